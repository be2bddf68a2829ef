//! Connection settings, resolved in one place (docs/DESIGN.md §5.2, §7), and the one way
//! connections are opened from them.
//!
//! tokio-postgres reads no environment variables, no password file and only part of libpq's
//! keywords, so the libpq rules are applied here by hand: `--database-url`, else
//! `QLSCHED_DATABASE_URL`, else `DATABASE_URL`, else the `PG*` variables, else libpq's defaults.
//! As with libpq, `PG*` variables also fill whatever a URL leaves out. The keywords tokio-postgres
//! does not know (`sslrootcert`, `sslcert`, `sslkey`, `passfile`) or gives another meaning
//! (`sslmode`, whose `verify-*` values it refuses; `connect_timeout`, which it applies to the TCP
//! connect alone) are taken out of the string before the driver parses the rest.
//!
//! Connections are opened host by host, as libpq does: each host within `connect_timeout` (TCP,
//! TLS and authentication together), with the password file consulted for that host, and
//! `sslmode`'s fall-backs (`allow`, `prefer`) tried there, and `target_session_attrs` checked on
//! the session found there ([`SessionAttrs`]). A password is never part of any text this module
//! renders.
//!
//! The parts: [`parse`] reads the text of the settings, `open` opens one host, `pool` the pools.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::Config;
use tokio_postgres::config::Host;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::StoreError;
use super::tls::{self, SslMode, Tls, TlsFiles};

mod open;
pub mod parse;
mod pool;
mod service;

pub use parse::SessionAttrs;
use parse::{
    fill_from_libpq_environment, parse_connect_timeout, split_own_keywords, url_with_port,
};

/// What libpq waits for a connection when `connect_timeout` is not given: forever. qlsched waits
/// this long instead, so that a server that accepts and never answers cannot hang a command.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// TCP keepalives on every socket unless the settings say otherwise: an idle connection whose
/// server vanished (a partition, a host powered off) is found dead after idle + interval x count
/// (10 s + 5 s x 3 = 25 s) instead of the system's two hours.
pub const KEEPALIVES_IDLE: Duration = Duration::from_secs(10);
pub const KEEPALIVES_INTERVAL: Duration = Duration::from_secs(5);
pub const KEEPALIVES_COUNT: u32 = 3;

/// `tcp_user_timeout` unless the settings give one: a connection whose sent data stays
/// unacknowledged this long is closed by the kernel, so a statement sent into a black-holed
/// network fails instead of waiting on retransmissions for about fifteen minutes.
pub const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

/// What tokio-postgres leaves `keepalives_idle` at when it is not given (libpq leaves the
/// system's, usually the same two hours).
const DRIVER_KEEPALIVES_IDLE: Duration = Duration::from_secs(2 * 60 * 60);

/// Every socket's waits bounded ([`KEEPALIVES_IDLE`], [`TCP_USER_TIMEOUT`]) where the connection
/// string (`keepalives*`, `tcp_user_timeout`) leaves them to the system. `keepalives=0` is kept.
fn bound_the_socket(config: &mut Config) {
    if config.get_keepalives_idle() == DRIVER_KEEPALIVES_IDLE {
        config.keepalives_idle(KEEPALIVES_IDLE);
    }
    if config.get_keepalives_interval().is_none() {
        config.keepalives_interval(KEEPALIVES_INTERVAL);
    }
    if config.get_keepalives_retries().is_none() {
        config.keepalives_retries(KEEPALIVES_COUNT);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
}

/// The libpq keywords read here rather than by tokio-postgres.
const OWN_KEYWORDS: [&str; 8] = [
    "sslmode",
    "target_session_attrs",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "passfile",
    "connect_timeout",
    "service",
];

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
/// "Behind a connection pooler"). It cannot be detected: a pooler answers as the server does.
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
    fn describe(self) -> &'static str {
        match self {
            SettingsSource::Flag => "--database-url",
            SettingsSource::QlschedDatabaseUrl => "QLSCHED_DATABASE_URL",
            SettingsSource::DatabaseUrl => "DATABASE_URL",
            SettingsSource::LibpqEnvironment => "the PG* environment",
            SettingsSource::Defaults => "libpq's defaults",
        }
    }
}

/// The `PG*` variables qlsched reads, as libpq does: any one of them set means settings were
/// given (the demo never replaces given settings with a throw-away server). A test checks that
/// every `PG*` name this module reads is here.
const LIBPQ_VARIABLES: [&str; 17] = [
    "PGHOST",
    "PGPORT",
    "PGUSER",
    "PGDATABASE",
    "PGPASSWORD",
    "PGPASSFILE",
    "PGSERVICE",
    "PGSERVICEFILE",
    "PGSYSCONFDIR",
    "PGOPTIONS",
    "PGSSLMODE",
    "PGSSLROOTCERT",
    "PGSSLCERT",
    "PGSSLKEY",
    "PGAPPNAME",
    "PGCONNECT_TIMEOUT",
    "PGTARGETSESSIONATTRS",
];

/// Resolved connection settings for one PostgreSQL database.
#[derive(Clone)]
pub struct ConnectionSettings {
    /// The driver's settings, every host of the list.
    config: Config,
    source: SettingsSource,
    ssl_mode: SslMode,
    tls: Tls,
    /// The password file to consult when no password is given; it need not exist.
    passfile: Option<PathBuf>,
    /// For each host: TCP, TLS and authentication together. `None` waits forever.
    connect_timeout: Option<Duration>,
    /// What a host's session must be to be kept (`target_session_attrs`).
    session_attrs: SessionAttrs,
    /// Whether the settings named `target_session_attrs`: a command's own default
    /// ([`Self::with_default_session_attrs`]) applies only when they did not.
    session_attrs_given: bool,
    /// What sits between qlsched and the server ([`Pooler`]).
    pooler: Pooler,
}

impl std::fmt::Debug for ConnectionSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionSettings")
            .field("target", &self.describe())
            .field("source", &self.source)
            .field("sslmode", &self.ssl_mode)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
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
        let (text, source) = match flag {
            Some(url) => (Some(url.to_owned()), SettingsSource::Flag),
            None => match env("QLSCHED_DATABASE_URL") {
                Some(url) => (Some(url), SettingsSource::QlschedDatabaseUrl),
                None => match env("DATABASE_URL") {
                    Some(url) => (Some(url), SettingsSource::DatabaseUrl),
                    None if LIBPQ_VARIABLES.iter().any(|name| env(name).is_some()) => {
                        (None, SettingsSource::LibpqEnvironment)
                    }
                    None => (None, SettingsSource::Defaults),
                },
            },
        };
        // tokio-postgres gives a URL host without a port 5432; libpq gives it PGPORT.
        let text = match (text, env("PGPORT")) {
            (Some(text), Some(port)) => Some(url_with_port(&text, &port)?.unwrap_or(text)),
            (text, _) => text,
        };
        let parse_error = |error: tokio_postgres::Error| {
            StoreError::Config(format!(
                "cannot parse the connection string from {}: {}",
                source.describe(),
                super::error::error_chain(&error)
            ))
        };
        let (mut config, mut own) = match &text {
            Some(text) => match split_own_keywords(text) {
                Some((rest, own)) => (Config::from_str(&rest).map_err(parse_error)?, own),
                // Not something the splitter understands: the driver names the fault.
                None => (
                    Config::from_str(text).map_err(parse_error)?,
                    BTreeMap::new(),
                ),
            },
            None => (Config::new(), BTreeMap::new()),
        };
        // libpq's order: what the string says, then the service file, then the environment.
        if let Some(service) = own.get("service").cloned().or_else(|| env("PGSERVICE")) {
            let (settings, file) = service::lookup(&service, &env)?;
            service::apply(&mut config, &mut own, &settings, &file)?;
        }
        fill_from_libpq_environment(&mut config, &env)?;
        for (keyword, variable) in [
            ("sslmode", "PGSSLMODE"),
            ("sslrootcert", "PGSSLROOTCERT"),
            ("sslcert", "PGSSLCERT"),
            ("sslkey", "PGSSLKEY"),
            ("passfile", "PGPASSFILE"),
            ("connect_timeout", "PGCONNECT_TIMEOUT"),
            ("target_session_attrs", "PGTARGETSESSIONATTRS"),
        ] {
            if !own.contains_key(keyword)
                && let Some(value) = env(variable)
            {
                own.insert(keyword.to_owned(), value);
            }
        }
        let ssl_mode = match own.get("sslmode") {
            None => None,
            Some(text) => Some(SslMode::parse(text).ok_or_else(|| {
                StoreError::Config(format!(
                    "sslmode={text:?} is not one of disable, allow, prefer, require, verify-ca, \
                     verify-full"
                ))
            })?),
        };
        let home = env("HOME").map(PathBuf::from);
        let files = TlsFiles {
            root_cert: own.get("sslrootcert").cloned(),
            cert: own.get("sslcert").map(PathBuf::from),
            key: own.get("sslkey").map(PathBuf::from),
            home: home.clone(),
        };
        let (ssl_mode, tls) = tls::build(ssl_mode, &files)?;
        let connect_timeout = match own.get("connect_timeout") {
            None => Some(DEFAULT_CONNECT_TIMEOUT),
            Some(text) => parse_connect_timeout(text)?,
        };
        if let Some(timeout) = connect_timeout {
            config.connect_timeout(timeout);
        }
        let session_attrs = own
            .get("target_session_attrs")
            .map(|text| SessionAttrs::parse(text))
            .transpose()?;
        let passfile = own
            .get("passfile")
            .map(PathBuf::from)
            .or_else(|| home.map(|home| home.join(".pgpass")));
        bound_the_socket(&mut config);
        Ok(ConnectionSettings {
            config,
            source,
            ssl_mode,
            tls,
            passfile,
            connect_timeout,
            session_attrs: session_attrs.unwrap_or(SessionAttrs::Any),
            session_attrs_given: session_attrs.is_some(),
            pooler: Pooler::None,
        })
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
        let mut settings = self.clone();
        settings.config.dbname(dbname);
        settings
    }

    pub fn dbname(&self) -> &str {
        self.config.get_dbname().unwrap_or_default()
    }

    pub fn user(&self) -> &str {
        self.config.get_user().unwrap_or_default()
    }

    pub fn source(&self) -> SettingsSource {
        self.source
    }

    /// The effective `sslmode` (libpq's default `prefer`, or `verify-full` with
    /// `sslrootcert=system`).
    pub fn ssl_mode(&self) -> SslMode {
        self.ssl_mode
    }

    /// How long one host may take to connect, TLS and authentication included.
    pub fn connect_timeout(&self) -> Option<Duration> {
        self.connect_timeout
    }

    /// The `target_session_attrs` in force: the one the settings name, else the command's
    /// default, else libpq's `any`.
    pub fn session_attrs(&self) -> SessionAttrs {
        self.session_attrs
    }

    /// These settings with `attrs` as `target_session_attrs` unless they name one: writers ask
    /// for `read-write`, readers for `any` (docs/OPERATIONS.md, "Several hosts"). A setting given
    /// in the URL or `PGTARGETSESSIONATTRS` always wins.
    pub fn with_default_session_attrs(mut self, attrs: SessionAttrs) -> Self {
        if !self.session_attrs_given {
            self.session_attrs = attrs;
        }
        self
    }

    /// `user@host:port/dbname`, never with the password.
    pub fn describe(&self) -> String {
        let (host, port) = self.first_server();
        let host = host.unwrap_or_else(|| "?".to_owned());
        format!("{}@{host}:{port}/{}", self.user(), self.dbname())
    }

    /// A `key=value` string naming the same server, user and database, without the password:
    /// what to print for a person to pass back as `-D` (it works for sockets too, unlike a URL).
    pub fn conninfo(&self) -> String {
        let (host, port) = self.first_server();
        let host = host.unwrap_or_else(|| "localhost".to_owned());
        format!(
            "host={host} port={port} user={} dbname={}",
            self.user(),
            self.dbname()
        )
    }

    /// The first host (a name or a socket directory) and its port.
    fn first_server(&self) -> (Option<String>, u16) {
        let host = self.config.get_hosts().first().map(|host| match host {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        });
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        (host, port)
    }

    /// The driver's configuration for one of qlsched's sessions: the connection string's, with
    /// qlsched's application name unless it names one. No startup `options` of qlsched's own
    /// (a pooler may refuse or drop them): the schema and settings are set on the session after it
    /// opens, and again by every transaction ([`SchemaName::transaction_settings`]).
    pub fn driver_config(&self, application_name: &str) -> Config {
        let mut config = self.config.clone();
        if self.config.get_application_name().is_none() {
            config.application_name(application_name);
        }
        config
    }

    /// The TLS connector every connection of these settings uses (also for cancel requests,
    /// which open a connection of their own).
    pub fn tls_connector(&self) -> MakeRustlsConnect {
        self.tls.connector.clone()
    }

    /// Whether a server answers at all: `Err` with the reason only when nothing did (no socket,
    /// connection refused, timed out). A server that answers with an error (no such role or
    /// database, starting up, a password wanted, a certificate refused) does answer: those are its
    /// operator's to fix, and the command that then connects reports them with their own exit
    /// status.
    pub async fn answers(&self) -> Result<(), String> {
        match self.connect(&SchemaName::default(), "qlsched probe").await {
            Ok(_) => Ok(()),
            Err(StoreError::Unavailable(reason)) => Err(reason),
            Err(_) => Ok(()),
        }
    }
}

crate::statements::statements! {
    @also open;
}

#[cfg(test)]
mod tests;
