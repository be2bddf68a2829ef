//! What libpq does for a connection and tokio-postgres does not, for anyone on tokio-postgres
//! (see README.md beside this crate):
//!
//! - [`Settings`]: the connection settings as libpq resolves them: a string the program was
//!   given, else a variable it names ([`Origins`]), else the `PG*` variables, else libpq's
//!   defaults; the `PG*` variables also filling what a string leaves out (`PGPORT` included, on a
//!   URL host without a port); service files (`service`, `PGSERVICE`); `PGOPTIONS`;
//!   `connect_timeout` as libpq bounds it (TCP, TLS and authentication together);
//!   `target_session_attrs`, all six values; and every socket's waits bounded (keepalives,
//!   `tcp_user_timeout`) unless the settings say otherwise;
//! - [`Settings::connect`]: host by host as libpq tries them, each within `connect_timeout`, with
//!   `sslmode`'s fall-backs (`allow`, `prefer`), the password file consulted for that host, and
//!   the session checked against `target_session_attrs` (`SHOW transaction_read_only`,
//!   `pg_is_in_recovery()`, libpq's own probes); [`Settings::open_pooled`] the same for a pool's
//!   connector;
//! - [`tls`]: `sslmode` as libpq defines it (`disable` to `verify-full`, `sslrootcert` including
//!   `system`, `sslcert`/`sslkey`), over rustls, as one `MakeRustlsConnect` to hand the driver;
//! - [`passfile`]: the password file (`~/.pgpass`, `PGPASSFILE`, `passfile`), read as libpq
//!   reads it, permissions check included.
//!
//! Nothing here knows the program it serves: no schema, no SQL of its own beyond libpq's probes.
//!
//! # A session's setup
//!
//! A program often sets something on each session before using it (a `search_path`, a role).
//! [`Settings::connect`] and [`Settings::open_pooled`] take it as `setup`, statements sent as one
//! simple query once a host's session passed its `target_session_attrs` check, within the same
//! `connect_timeout`; an error there fails that host as a failed login would, and the next host is
//! tried. A text rather than a callback: a callback run on a borrowed client needs a boxed
//! future with a higher-ranked lifetime, and a pool's connector would have to own one (`Arc<dyn
//! Fn>`), for what every caller so far needs, statements to send; a text is `Clone`, `'static`
//! when owned, and needs no async in the caller's type. Anything that needs to decide is done
//! after [`Settings::connect`] returns. An empty text sends nothing.
//!
//! # Errors
//!
//! [`Error`] says what a program needs to choose its answer: a setting to fix ([`Error::Config`]),
//! no server there ([`Error::Unavailable`], each host's reason), a certificate refused
//! ([`Error::Untrusted`]), a login or privilege refused ([`Error::PermissionDenied`]), and the
//! driver's error otherwise ([`Error::Database`]), for the program to classify by its SQLSTATE.

mod open;
mod parse;
pub mod passfile;
mod service;
mod settings;
pub mod tls;

pub use open::Missed;
pub use parse::SessionAttrs;
pub use settings::{
    DEFAULT_CONNECT_TIMEOUT, KEEPALIVES_COUNT, KEEPALIVES_IDLE, KEEPALIVES_INTERVAL,
    LIBPQ_VARIABLES, Origins, Settings, Source, TCP_USER_TIMEOUT,
};

/// Why settings were refused or no connection was made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting refused: a value out of range, a file that cannot be read, a service not found.
    /// The message names the setting and the file.
    #[error("configuration invalid: {0}")]
    Config(String),
    /// No host gave a session: each host's reason, `user@host:port/dbname: reason`, in the order
    /// tried (the last pass's, for `prefer-standby`). A server that is not there, not taking
    /// connections now, or not what `target_session_attrs` asks for: trying later may succeed.
    #[error("database unavailable: {}", .0.join("; "))]
    Unavailable(Vec<String>),
    /// The server's TLS certificate failed the check `sslmode` asks for (a CA not trusted, another
    /// host's name, expired): the server did not prove who it is, so retrying cannot help.
    #[error("server not trusted: {0}")]
    Untrusted(String),
    /// The server refused the login (no such role, a wrong or missing password, `pg_hba`) or a
    /// privilege; the message says where the password came from when it was the password file.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// Any other error of the driver's while connecting or sending `setup`.
    #[error("database error: {}", describe(.0))]
    Database(#[source] tokio_postgres::Error),
}

/// What a server error means for the connection it came on, by its SQLSTATE alone: the one
/// classification of refusals that both opening a connection and using one share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The login or a privilege refused (42501, 28000, 28P01): retrying never helps.
    Permission,
    /// The server not there or not taking connections now (class 08, a shutdown, a database
    /// that does not exist (yet), no connection slot left): another try or host may help.
    Unavailable,
}

/// The [`Refusal`] `code` is, if it is one.
pub fn refusal(code: &tokio_postgres::error::SqlState) -> Option<Refusal> {
    use tokio_postgres::error::SqlState;
    if *code == SqlState::INSUFFICIENT_PRIVILEGE
        || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        || *code == SqlState::INVALID_PASSWORD
    {
        Some(Refusal::Permission)
    } else if code.code().starts_with("08")
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
        || *code == SqlState::INVALID_CATALOG_NAME
        || *code == SqlState::TOO_MANY_CONNECTIONS
    {
        Some(Refusal::Unavailable)
    } else {
        None
    }
}

/// The server's message with its SQLSTATE, detail and hint (the driver's own `Display` says only
/// "db error"), else the driver's message with its causes.
pub fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => {
            let mut text = format!("{} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                text.push_str(&format!("; {detail}"));
            }
            if let Some(hint) = db.hint() {
                text.push_str(&format!("; hint: {hint}"));
            }
            text
        }
        None => error_chain(error),
    }
}

/// tokio-postgres has no public error kind for a server that asks for a password when none was
/// given: it shows only in the message. When `error` is that, what to tell the user; another
/// attempt would never help.
pub fn password_missing(error: &tokio_postgres::Error) -> Option<String> {
    (error.as_db_error().is_none() && error_chain(error).contains("password missing")).then(|| {
        "the server asks for a password and none was given (put it in the URL or PGPASSWORD)"
            .to_owned()
    })
}

/// An error's message with its causes ("error connecting to server: Connection refused"), each
/// once.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests;

/// The examples of README.md, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
