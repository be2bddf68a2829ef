//! The store layer's errors: kinds of failure, which `cli::error` maps to the exit statuses of
//! docs/DESIGN.md §5.4.
//!
//! PostgreSQL reports what went wrong as a SQLSTATE; [`StoreError::from_db`] is the one place
//! that reads it, so every caller sees the same classification.

use qlsched_pgconn::Refusal;
use tokio_postgres::error::SqlState;

/// SQLSTATE raised by the admission statement when a claim fence no longer holds.
pub(crate) const FENCE_LOST_SQLSTATE: &str = "QLF01";

/// SQLSTATE raised by the admission statement when every claim holds its fence and a definition
/// the decision was taken on no longer admits it (migration 0008): not a lost race, a fault to
/// look at.
pub(crate) const DEFINITION_REFUSED_SQLSTATE: &str = "QLD01";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("permission denied by the database role: {0}")]
    PermissionDenied(String),
    #[error("schema not ready: {0}")]
    SchemaNotReady(String),
    /// The server's TLS certificate failed the check `sslmode` asks for (a CA not trusted, another
    /// host's name, expired): the server did not prove who it is, so retrying cannot help.
    #[error("server not trusted: {0}")]
    Untrusted(String),
    #[error("configuration invalid: {0}")]
    Config(String),
    /// Conflicts outlasted the retries; `last` is the server's last error (SQLSTATE, detail, hint).
    #[error("transient conflict: {what} still failed after {attempts} attempts: {last}")]
    RetriesExhausted {
        what: &'static str,
        attempts: u32,
        last: String,
    },
    /// A serialization failure (40001) or a deadlock (40P01) where nothing retries it, or before
    /// [`super::retry`] tries again: trying again may succeed.
    /// The server's message with its SQLSTATE, detail and hint.
    #[error("transient conflict: {0}")]
    Conflict(String),
    #[error("fence rejected: {0}")]
    FenceRejected(String),
    /// The claim held its fence, and the definitions its decision was taken on no longer admit
    /// it (the project not active, the trigger or task changed, a corrupt execution revision
    /// digest): nothing was written.
    #[error("definition refused: {0}")]
    DefinitionRefused(String),
    /// A round that outlived its lease and was cancelled (the server may be slow or unreachable,
    /// or this process was paused; nothing says which), or a statement or lock wait that ran past
    /// its bound on the server (57014, 55P03), with the server's message.
    #[error("timed out: {0}")]
    TimedOut(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("nothing eligible: {0}")]
    NothingEligible(String),
    #[error("bad input: {0}")]
    BadInput(String),
    #[error("refused by the database: {0}")]
    Refused(String),
    /// A stored word this binary has no name for (a row written by hand, or by a newer version):
    /// bad data, named where it lies, rather than a panic or a string compared further in.
    #[error("unexpected value in the database: {table}.{column} is \"{value}\" ({reason})")]
    UnknownValue {
        table: &'static str,
        column: &'static str,
        value: String,
        reason: String,
    },
    /// A row that does not have the column a statement's reader names, or whose value is not of
    /// the type read: the statement and its reader disagree, which is a fault of this binary (or
    /// of a schema changed by hand), named rather than a panic.
    #[error("unexpected row: column \"{column}\" {reason}")]
    Column {
        column: &'static str,
        reason: String,
    },
    #[error("database error: {}", describe_db(.0))]
    Database(#[source] tokio_postgres::Error),
}

impl StoreError {
    /// Classifies a driver error by its SQLSTATE (or by its lack of one: a closed or never-opened
    /// connection has none).
    pub fn from_db(error: tokio_postgres::Error) -> Self {
        // Retrying (69) would never help: a permission refusal (77).
        if let Some(message) = qlsched_pgconn::password_missing(&error) {
            return StoreError::PermissionDenied(message);
        }
        let Some(db) = error.as_db_error() else {
            return StoreError::Unavailable(error_chain(&error));
        };
        let code = db.code();
        // What is printed keeps the server's SQLSTATE, detail and hint; `raw` is for matching.
        let raw = db.message();
        let message = describe_db(&error);
        // PgBouncer's refusal of a startup parameter (SQLSTATE 08P01): retrying never helps, the
        // pooler's configuration does.
        if let Some(parameter) = raw.strip_prefix("unsupported startup parameter: ") {
            // qlsched sends no startup parameter a pooler refuses by default: this one is the
            // connection string's own (or PGOPTIONS'), which only the operator can take out.
            return StoreError::Config(format!(
                "{message}: the server, a connection pooler, refuses the startup parameter \
                 `{parameter}`, which the connection settings give (the connection string or \
                 PGOPTIONS); qlsched needs none of its own: take it out of the settings, or list \
                 it in the pooler's `ignore_startup_parameters` if losing it is acceptable \
                 (docs/OPERATIONS.md, \"Behind a connection pooler\")"
            ));
        }
        // A setting the server does not know, given in the startup options (a connection
        // string's `options`, PGOPTIONS): qlsched's own settings are all known ones, so it is the
        // connection settings', and retrying never helps.
        if *code == SqlState::UNDEFINED_OBJECT
            && raw.starts_with("unrecognized configuration parameter")
        {
            return StoreError::Config(format!(
                "{message}: the connection settings name a setting this server does not know, in \
                 their startup options (the connection string's `options`, or PGOPTIONS): take it \
                 out or correct its name"
            ));
        }
        // A named prepared statement unknown (26000) or already taken (42P05) on the server
        // connection its use landed on, or a bind meant for another client's statement of the
        // same name (08P01, "bind message supplies …"): what a pooler in transaction mode does to
        // a client that prepares on its session. The setting, not a retry, mends it.
        if *code == SqlState::INVALID_SQL_STATEMENT_NAME
            || *code == SqlState::DUPLICATE_PSTATEMENT
            || (*code == SqlState::PROTOCOL_VIOLATION && raw.starts_with("bind message"))
        {
            return StoreError::Config(crate::connect::transaction_pooler_found(&format!(
                "a prepared statement was lost between transactions: {message}"
            )));
        }
        let refusal = qlsched_pgconn::refusal(code);
        if refusal == Some(Refusal::Permission) {
            // A login without USAGE on the schema sees none of its tables: name that privilege.
            if raw.starts_with("permission denied for schema") {
                return StoreError::PermissionDenied(format!(
                    "{message}: the login lacks USAGE on the schema (grant it the qlsched role \
                     its command needs, e.g. qlsched_observer to read)"
                ));
            }
            StoreError::PermissionDenied(message)
        } else if *code == SqlState::INVALID_SCHEMA_NAME
            || *code == SqlState::UNDEFINED_TABLE
            || *code == SqlState::UNDEFINED_FUNCTION
        {
            StoreError::SchemaNotReady(format!("{message} (run `qlsched migrate`)"))
        } else if *code == SqlState::LOCK_NOT_AVAILABLE || *code == SqlState::QUERY_CANCELED {
            // A bound ran out (a lock wait, a statement): the command reports it rather than
            // wait its bound again; an admission retries these itself (`is_retryable`).
            StoreError::TimedOut(describe_db(&error))
        } else if is_retryable(&error) {
            StoreError::Conflict(describe_db(&error))
        } else if code.code() == DEFINITION_REFUSED_SQLSTATE {
            StoreError::DefinitionRefused(describe_db(&error))
        } else if *code == SqlState::READ_ONLY_SQL_TRANSACTION
            // A standby's answer to a BEGIN that asks for READ WRITE, as every read-write BEGIN
            // of qlsched's does (0A000 rather than 25006).
            || (*code == SqlState::FEATURE_NOT_SUPPORTED
                && raw.starts_with("cannot set transaction read-write mode during recovery"))
        {
            // A standby (or a session made read-only) refuses every write: the writer needs the
            // primary, which another host or a promotion may provide, so it is "unavailable".
            StoreError::Unavailable(format!(
                "server is read-only (a standby?): {message}; writes need the primary"
            ))
        } else if refusal == Some(Refusal::Unavailable) {
            StoreError::Unavailable(message)
        } else {
            StoreError::Database(error)
        }
    }
}

/// Parses the word read from `table`.`column` at the store's boundary: a word the binary has no
/// name for is [`StoreError::UnknownValue`].
pub(crate) fn stored<T>(
    table: &'static str,
    column: &'static str,
    value: String,
) -> Result<T, StoreError>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .map_err(|error: T::Err| StoreError::UnknownValue {
            table,
            column,
            reason: error.to_string(),
            value: qlsched_core::text::clean(&value),
        })
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        StoreError::from_db(error)
    }
}

impl From<qlsched_pgconn::Error> for StoreError {
    fn from(error: qlsched_pgconn::Error) -> Self {
        match error {
            qlsched_pgconn::Error::Config(message) => StoreError::Config(message),
            qlsched_pgconn::Error::Unavailable(reasons) => {
                StoreError::Unavailable(reasons.join("; "))
            }
            qlsched_pgconn::Error::Untrusted(message) => StoreError::Untrusted(message),
            qlsched_pgconn::Error::PermissionDenied(message) => {
                StoreError::PermissionDenied(message)
            }
            // What pgconn leaves to its caller (e.g. a pooler refusing a startup parameter, a
            // server error while the session is set up) is classified as every server error is.
            qlsched_pgconn::Error::Database(error) => StoreError::from_db(error),
        }
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        match error {
            deadpool_postgres::PoolError::Backend(db) => StoreError::from_db(db),
            other => StoreError::Unavailable(other.to_string()),
        }
    }
}

/// True for the errors a transaction is expected to hit under contention and that a retry of
/// the whole transaction resolves: a serialization failure (40001), a deadlock (40P01), a
/// statement cancelled by the server (57014: a statement timeout, a cancel request) and a lock
/// wait that ran out (55P03, `lock_timeout`). A
/// cancel this process asked for is never retried: the future that would retry it is dropped.
pub(crate) fn is_retryable(error: &tokio_postgres::Error) -> bool {
    matches!(
        error.code(),
        Some(code) if *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
            || *code == SqlState::QUERY_CANCELED
            || *code == SqlState::LOCK_NOT_AVAILABLE
    )
}

/// The server's message with its SQLSTATE, detail and hint, as every error that came from the
/// server is printed (a retry loop's last error, a failed migration).
pub(crate) fn describe_server_error(error: &tokio_postgres::Error) -> String {
    describe_db(error)
}

pub(crate) fn is_definition_refused(error: &tokio_postgres::Error) -> bool {
    error
        .code()
        .is_some_and(|code| code.code() == DEFINITION_REFUSED_SQLSTATE)
}

/// An error that says the server, the session or the schema cannot take any admission now, not
/// that one row's writes failed: the connection is gone (no SQLSTATE, class 08), the server is
/// shutting down or not accepting (57P01-57P03), a read-only server or session (25006), the
/// database gone (3D000), too many connections (53300), the schema not what this build expects
/// (3F000, 42P01, 42883), or a prepared statement lost or doubled by a transaction pooler (26000,
/// 42P05). Admitting the rows one by one would fail every one the same
/// way. Every other server error may be one row's own (a user trigger raising, a constraint, a
/// resource a smaller transaction fits in) and is met by the one-by-one fall-back.
pub(crate) fn is_server_wide(error: &tokio_postgres::Error) -> bool {
    let Some(code) = error.code() else {
        return true;
    };
    let code = code.code();
    code.starts_with("08")
        || matches!(
            code,
            "57P01"
                | "57P02"
                | "57P03"
                | "25006"
                | "3D000"
                | "53300"
                | "3F000"
                | "42P01"
                | "42883"
                | "26000"
                | "42P05"
        )
}

/// Whether `sqlstate` says the server ran out of a resource it shares between all sessions
/// (class 53 but too many connections, which [`is_server_wide`] names): shared memory for
/// predicate locks while a long SERIALIZABLE transaction keeps every transaction beside it
/// holding its locks, memory, disk. Not the rows' fault and, unlike a conflict, not over in
/// milliseconds: the admission tries the same rows again after longer pauses
/// ([`super::retry::RESOURCES`]).
pub(crate) fn is_out_of_resources(sqlstate: &str) -> bool {
    sqlstate.starts_with("53") && sqlstate != "53300"
}

pub(crate) fn is_fence_lost(error: &tokio_postgres::Error) -> bool {
    error
        .code()
        .is_some_and(|code| code.code() == FENCE_LOST_SQLSTATE)
}

/// The server's message, detail and hint (the driver's own Display says only "db error").
fn describe_db(error: &tokio_postgres::Error) -> String {
    qlsched_pgconn::describe(error)
}

/// The driver's message with its causes ("error connecting to server: Connection refused").
pub(crate) use qlsched_pgconn::error_chain;

#[cfg(test)]
mod tests {
    use super::*;
    use qlsched_core::RunStatus;

    #[test]
    fn a_stored_word_parses_or_names_its_table_column_and_value() {
        let status: Result<RunStatus, _> = stored("runs", "status", "queued".to_owned());
        assert!(matches!(status, Ok(RunStatus::Queued)));
        let error = stored::<RunStatus>("runs", "status", "pausd\u{1b}".to_owned())
            .expect_err("an unknown status");
        assert!(
            matches!(error, StoreError::UnknownValue { .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with(
                "unexpected value in the database: runs.status is \"pausd\\u{1b}\" (unknown value"
            ),
            "{message}"
        );
    }
}
