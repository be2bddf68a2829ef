//! Connection settings, resolved in one place (docs/DESIGN.md §5.2, §7), and the one way
//! connections are opened from them.
//!
//! What libpq does and tokio-postgres does not (the `PG*` variables, service files, the password
//! file, `sslmode`, multi-host with `target_session_attrs`, `connect_timeout`) is
//! `qlsched_pgconn`'s. This module adds what is qlsched's: where qlsched looks for its string
//! (`--database-url`, else `QLSCHED_DATABASE_URL`, else `DATABASE_URL`, then as libpq), the
//! schema's settings sent on each session it opens ([`SchemaName::session_settings`]), what sits
//! in between ([`Pooler`]), the pool, and its errors as [`StoreError`].

use std::str::FromStr;
use std::time::Duration;

use qlsched_pgconn::{Origins, Settings, Source};
use tokio_postgres::{Client, Config};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::StoreError;
use super::tls::SslMode;

mod pool;

pub use qlsched_pgconn::{
    DEFAULT_CONNECT_TIMEOUT, KEEPALIVES_COUNT, KEEPALIVES_IDLE, KEEPALIVES_INTERVAL, SessionAttrs,
    TCP_USER_TIMEOUT,
};

/// Where qlsched finds its connection string before the `PG*` variables.
const ORIGINS: Origins = Origins {
    given: "--database-url",
    variables: &["QLSCHED_DATABASE_URL", "DATABASE_URL"],
};

/// The PostgreSQL schema that holds every qlsched object (docs/DESIGN.md §3.1).
///
/// Identifiers cannot be bound as statement parameters, so the name is validated here once and
/// is the only text ever spliced into SQL: a plain lower-case identifier, quoted anyway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaName(String);

impl SchemaName {
    pub const DEFAULT: &'static str = "qlsched";

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `"name"`, for the few statements (CREATE SCHEMA, search_path) that need the identifier.
    pub fn quoted(&self) -> String {
        format!("\"{}\"", self.0)
    }

    /// What every qlsched transaction sets for itself, as statements to send right after its
    /// BEGIN: this schema first on the `search_path` (then `pg_catalog`, implicitly), and JIT off.
    /// Every qlsched statement is short, and compiling one (PostgreSQL does so once a plan's cost
    /// passes `jit_above_cost`, e.g. a count over a million schedule rows) costs 100-300 ms, many
    /// times the statement itself. Transaction-local (`SET LOCAL`): the transaction's end resets
    /// them, so a pooled server connection handed on carries nothing of qlsched's.
    pub fn transaction_settings(&self) -> String {
        format!(
            "SET LOCAL search_path TO {}; SET LOCAL jit TO off",
            self.quoted()
        )
    }

    /// The same for a whole session, sent once when it opens, unless a transaction-mode pooler
    /// is in between ([`Pooler::Transaction`]), where a session's settings would stay on a server
    /// connection other clients are given next.
    pub fn session_settings(&self) -> String {
        format!("SET search_path TO {}; SET jit TO off", self.quoted())
    }
}

/// What sits between qlsched and PostgreSQL (`--pooler`, `QLSCHED_POOLER`; docs/OPERATIONS.md,
/// "Behind a connection pooler"). A pooler answers as the server does, so the setting says which;
/// a transaction-mode pooler the setting leaves out is found by what it does to sessions and
/// refused ([`ConnectionSettings::connect`]), before qlsched sets anything on one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pooler {
    /// Nothing: each client session is a server session.
    #[default]
    None,
    /// A pooler in session mode (PgBouncer's `pool_mode = session`): a client keeps one server
    /// connection for its whole session, so it is served as [`Pooler::None`] is.
    Session,
    /// A pooler in transaction mode: each transaction may run on another server connection. No
    /// session setting is made, and no named prepared statement outlives its transaction: the
    /// replica's statements are sent unnamed, with their parameter types.
    Transaction,
}

impl Pooler {
    /// Whether a session's settings and prepared statements stay with the client.
    pub fn keeps_sessions(self) -> bool {
        !matches!(self, Pooler::Transaction)
    }
}

impl Default for SchemaName {
    fn default() -> Self {
        SchemaName(Self::DEFAULT.to_owned())
    }
}

impl FromStr for SchemaName {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let mut chars = name.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
        let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if first_ok && rest_ok && name.len() <= 63 && !name.starts_with("pg_") {
            Ok(SchemaName(name.to_owned()))
        } else {
            Err(format!(
                "invalid schema name {name:?}: use 1 to 63 lower-case letters, digits and \
                 underscores, starting with a letter or underscore, not `pg_`"
            ))
        }
    }
}

impl std::fmt::Display for SchemaName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where the connection settings came from, for messages ("from DATABASE_URL").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsSource {
    Flag,
    QlschedDatabaseUrl,
    DatabaseUrl,
    LibpqEnvironment,
    /// Nothing was given: no flag, no URL variable, none of the `PG*` variables qlsched reads.
    /// Only then may `demo` fall back to a throw-away server when the default does not answer.
    Defaults,
}

impl SettingsSource {
    fn of(source: Source) -> Self {
        match source {
            Source::Given(_) => SettingsSource::Flag,
            Source::Variable("QLSCHED_DATABASE_URL") => SettingsSource::QlschedDatabaseUrl,
            Source::Variable(_) => SettingsSource::DatabaseUrl,
            Source::LibpqEnvironment => SettingsSource::LibpqEnvironment,
            Source::Defaults => SettingsSource::Defaults,
        }
    }
}

/// Resolved connection settings for one PostgreSQL database: libpq's ([`Settings`]), and what
/// sits between qlsched and the server.
#[derive(Clone, Debug)]
pub struct ConnectionSettings {
    settings: Settings,
    /// What sits between qlsched and the server ([`Pooler`]).
    pooler: Pooler,
}

impl ConnectionSettings {
    /// Resolves the settings from the flag and the process environment.
    pub fn resolve(flag: Option<&str>) -> Result<Self, StoreError> {
        Self::resolve_with(flag, |name| {
            std::env::var(name).ok().filter(|v| !v.is_empty())
        })
    }

    /// [`Self::resolve`] with the environment passed in, so that tests need not mutate theirs.
    pub fn resolve_with(
        flag: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, StoreError> {
        Ok(ConnectionSettings {
            settings: Settings::resolve_with(ORIGINS, flag, env)?,
            pooler: Pooler::None,
        })
    }

    /// libpq's part of the settings.
    pub fn libpq(&self) -> &Settings {
        &self.settings
    }

    /// The same settings, for connections that reach the server through `pooler`.
    pub fn with_pooler(mut self, pooler: Pooler) -> Self {
        self.pooler = pooler;
        self
    }

    pub fn pooler(&self) -> Pooler {
        self.pooler
    }

    /// Refuses ([`StoreError::Config`], exit 78) a transaction-mode pooler for `command`, which
    /// needs a session of its own: `why` says what it keeps on it.
    pub fn require_session(&self, command: &str, why: &str) -> Result<(), StoreError> {
        if self.pooler.keeps_sessions() {
            return Ok(());
        }
        Err(StoreError::Config(format!(
            "`qlsched {command}` cannot run through a transaction-mode pooler (--pooler \
             transaction): {why}; connect it to the server directly, or through the pooler in \
             session mode (docs/OPERATIONS.md, \"Behind a connection pooler\")"
        )))
    }

    /// The same server and credentials, another database (the demo and the tests create theirs).
    pub fn with_dbname(&self, dbname: &str) -> Self {
        ConnectionSettings {
            settings: self.settings.with_dbname(dbname),
            pooler: self.pooler,
        }
    }

    pub fn dbname(&self) -> &str {
        self.settings.dbname()
    }

    pub fn user(&self) -> &str {
        self.settings.user()
    }

    pub fn source(&self) -> SettingsSource {
        SettingsSource::of(self.settings.source())
    }

    /// The effective `sslmode` (libpq's default `prefer`, or `verify-full` with
    /// `sslrootcert=system`).
    pub fn ssl_mode(&self) -> SslMode {
        self.settings.ssl_mode()
    }

    /// How long one host may take to connect, TLS and authentication included.
    pub fn connect_timeout(&self) -> Option<Duration> {
        self.settings.connect_timeout()
    }

    /// The `target_session_attrs` in force: the one the settings name, else the command's
    /// default, else libpq's `any`.
    pub fn session_attrs(&self) -> SessionAttrs {
        self.settings.session_attrs()
    }

    /// These settings with `attrs` as `target_session_attrs` unless they name one: writers ask
    /// for `read-write`, readers for `any` (docs/OPERATIONS.md, "Several hosts"). A setting given
    /// in the URL or `PGTARGETSESSIONATTRS` always wins.
    pub fn with_default_session_attrs(mut self, attrs: SessionAttrs) -> Self {
        self.settings = self.settings.with_default_session_attrs(attrs);
        self
    }

    /// `user@host:port/dbname`, never with the password.
    pub fn describe(&self) -> String {
        self.settings.describe()
    }

    /// A `key=value` string naming the same server, user and database, without the password:
    /// what to print for a person to pass back as `-D` (it works for sockets too, unlike a URL).
    pub fn conninfo(&self) -> String {
        self.settings.conninfo()
    }

    /// The driver's configuration for one of qlsched's sessions: the connection string's, with
    /// qlsched's application name unless it names one. No startup `options` of qlsched's own
    /// (a pooler may refuse or drop them): the schema and settings are set on the session after it
    /// opens, and again by every transaction ([`SchemaName::transaction_settings`]).
    pub fn driver_config(&self, application_name: &str) -> Config {
        self.settings.driver_config(application_name)
    }

    /// The TLS connector every connection of these settings uses (also for cancel requests,
    /// which open a connection of their own).
    pub fn tls_connector(&self) -> MakeRustlsConnect {
        self.settings.tls_connector()
    }

    /// What qlsched sends on each session it opens, once its host is chosen: `schema`'s session
    /// settings, unless a transaction-mode pooler is in between ([`SchemaName::session_settings`]).
    fn session_setup(&self, schema: &SchemaName) -> String {
        if self.pooler.keeps_sessions() {
            schema.session_settings()
        } else {
            String::new()
        }
    }

    /// Opens one connection outside any pool (migrations, the demo's admin work): the first
    /// host, in list order, whose session is what `target_session_attrs` asks for, given
    /// `schema`'s session settings.
    pub async fn connect(
        &self,
        schema: &SchemaName,
        application_name: &str,
    ) -> Result<Client, StoreError> {
        let client = self.settings.connect(application_name, "").await?;
        self.refuse_shared_sessions(&client, application_name)
            .await?;
        let setup = self.session_setup(schema);
        if !setup.is_empty() {
            client.batch_execute(&setup).await?;
        }
        Ok(client)
    }

    /// Refuses ([`StoreError::Config`], exit 78) a session that is not its own while the
    /// settings name no pooler (no `--pooler`): a pooler in transaction mode in between, which nothing in its answers names. Found by what it does, before qlsched sets
    /// anything on the session: `client`'s server process is read, then that of a second session
    /// of the same settings and `client`'s again, [`SHARING_PROBES`] times. Sessions of their own are two server
    /// processes, each the same every time; behind a transaction pooler the second session is
    /// handed the server connection `client` just gave back (PgBouncer reuses the last one
    /// released), or `client` is handed another on its next statement. Sent as simple queries
    /// (no prepared statement), each a transaction of its own, nothing set.
    async fn refuse_shared_sessions(
        &self,
        client: &Client,
        application_name: &str,
    ) -> Result<(), StoreError> {
        // Told of a pooler (either mode), qlsched takes the setting's word: in session mode a
        // second session at once would need a second server connection from a pool sized for
        // one a client.
        if self.pooler != Pooler::None {
            return Ok(());
        }
        let first = server_process(client).await?;
        // The second session waits on nothing of qlsched's but its answers: through a pooler in
        // session mode whose pool is full, its first statement (or the session check of its
        // login) would wait for a server connection as long as the pooler lets it (PgBouncer's
        // query_wait_timeout, 120 s by default). So its part of the looks, connecting
        // included, is bounded by the connect timeout; one that runs out, or a second session
        // refused where the first was let in, tells nothing either way: said at WARN, and the
        // command goes on.
        let limit = self.connect_timeout();
        let deadline = limit.map(|limit| tokio::time::Instant::now() + limit);
        let no_answer = || {
            let within = limit.map_or_else(String::new, |limit| {
                format!(
                    " within {} (connect_timeout)",
                    qlsched_core::format_duration(limit)
                )
            });
            format!("a second session got no answer{within}")
        };
        let other = match by(deadline, self.settings.connect(application_name, "")).await {
            Some(Ok(other)) => other,
            Some(Err(error)) => {
                inconclusive(&format!("a second session was not let in: {error}"));
                return Ok(());
            }
            None => {
                inconclusive(&no_answer());
                return Ok(());
            }
        };
        let mut shared = false;
        for _ in 0..SHARING_PROBES {
            let Some(process) = by(deadline, server_process(&other)).await else {
                inconclusive(&no_answer());
                return Ok(());
            };
            shared = shared || process? == first || server_process(client).await? != first;
        }
        drop(other);
        if shared {
            return Err(StoreError::Config(transaction_pooler_found(&format!(
                "two of its sessions were served by one server process ({first}), or one \
                 session by several"
            ))));
        }
        Ok(())
    }

    /// Whether a server answers at all: `Err` with the reason only when nothing did (no socket,
    /// connection refused, timed out). A server that answers with an error (no such role or
    /// database, starting up, a password wanted, a certificate refused) does answer: those are its
    /// operator's to fix, and the command that then connects reports them with their own exit
    /// status.
    pub async fn answers(&self) -> Result<(), String> {
        self.settings.answers("qlsched probe").await
    }
}

/// `look`'s answer, or `None` when `deadline` came first.
async fn by<T>(deadline: Option<tokio::time::Instant>, look: impl Future<Output = T>) -> Option<T> {
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, look).await.ok(),
        None => Some(look.await),
    }
}

/// The look for a transaction pooler found nothing either way, for the reason `why`. A pooler in
/// session mode with its pool full keeps a second session waiting, or refuses it; one in
/// transaction mode would have answered (the first session's server connection is free between
/// its statements). So going on is the likely right guess, and the warning says what to set
/// when it is not.
fn inconclusive(why: &str) {
    tracing::warn!(
        "could not tell whether a connection pooler in transaction mode sits between qlsched and \
         the server: {why} (a pooler in session mode with its pool full?); going on as if every \
         session were its own. Behind a pooler in transaction mode, run with --pooler \
         transaction (QLSCHED_POOLER=transaction); behind one in session mode, --pooler session \
         skips this look"
    );
}

// This session's server process, as `pid@start` (the server's start time, in seconds since 1970,
// tells apart two servers' processes of one number, as a second session of several hosts may
// reach another): the same on every statement of a session of its own.
pub(crate) const SERVER_PROCESS: &str =
    "SELECT pg_backend_pid() || '@' || extract(epoch FROM pg_postmaster_start_time())";

/// How many times [`ConnectionSettings::connect`] looks for a shared session. Behind a
/// transaction pooler each look finds it unless, in the instant between `client`'s statement and
/// the other session's, a third client takes the server connection and gives it back; eight looks
/// (sixteen short statements) make that vanishingly rare even while other clients of the pooler
/// are busy, and sessions of their own never show it, however many looks.
const SHARING_PROBES: usize = 8;

/// [`SERVER_PROCESS`] on `client`, as a simple query: the one statement that runs before
/// qlsched knows whether a named prepared statement would survive to its execution.
pub(crate) async fn server_process(client: &Client) -> Result<String, StoreError> {
    let answer = client.simple_query(SERVER_PROCESS).await?;
    answer
        .iter()
        .find_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .ok_or_else(|| StoreError::Unavailable("the server gave no process id".to_owned()))
}

/// The one message for a transaction-mode pooler qlsched was not told of, found by `how`: what
/// the session check says, and what a prepared statement lost between transactions
/// ([`StoreError::from_db`]) says.
pub(crate) fn transaction_pooler_found(how: &str) -> String {
    format!(
        "a connection pooler in transaction mode sits between qlsched and the server ({how}), \
         and qlsched was not told: run replicas and commands with --pooler transaction \
         (QLSCHED_POOLER=transaction); `migrate`, `demo` and `bench` need a session of their \
         own: connect them to the server directly, or through the pooler in session mode \
         (docs/OPERATIONS.md, \"Behind a connection pooler\")"
    )
}

crate::statements::statements! {
    SERVER_PROCESS: Owner | Admin | Runtime | Observer,
}

#[cfg(test)]
mod tests;
