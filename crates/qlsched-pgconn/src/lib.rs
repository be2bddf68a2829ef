//! What libpq does for a connection and tokio-postgres does not, for anyone on tokio-postgres
//! (see README.md beside this crate):
//!
//! - [`tls`]: `sslmode` as libpq defines it (`disable` to `verify-full`, `sslrootcert` including
//!   `system`, `sslcert`/`sslkey`), over rustls, as one `MakeRustlsConnect` to hand the driver;
//! - [`passfile`]: the password file (`~/.pgpass`, `PGPASSFILE`, `passfile`), read as libpq
//!   reads it, permissions check included.
//!
//! Nothing here knows qlsched: no schema, no SQL, no scheduler type. The rest of libpq's
//! connection behaviour (the precedence of settings, multi-host with `target_session_attrs`,
//! service files, `PGOPTIONS`) is still in `qlsched-store`'s `connect` module, written against
//! the store's error type; docs/DECISIONS.md says why and what moves it here.

pub mod passfile;
pub mod tls;

/// A setting this crate refuses: a file that cannot be read, a mode the files do not allow.
/// The message names the setting and the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("configuration invalid: {0}")]
    Config(String),
}
