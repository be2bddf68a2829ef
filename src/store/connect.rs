//! Connection settings, resolved in one place (DESIGN.md section 5, section 7).
//!
//! tokio-postgres reads no environment variables, so the libpq rules are applied here by hand:
//! `--database-url`, else `QLSCHED_DATABASE_URL`, else `DATABASE_URL`, else the `PG*` variables,
//! else libpq's defaults. As with libpq, `PG*` variables also fill whatever a URL leaves out.
//! A password is never part of any text this module renders.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{Config, NoTls};

use super::StoreError;

/// The PostgreSQL schema that holds every qlsched object (DESIGN.md section 3).
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

/// The `PG*` variables qlsched reads, as libpq does.
const LIBPQ_VARIABLES: [&str; 7] = [
    "PGHOST",
    "PGPORT",
    "PGUSER",
    "PGDATABASE",
    "PGPASSWORD",
    "PGSSLMODE",
    "PGAPPNAME",
];

/// Resolved connection settings for one PostgreSQL database.
#[derive(Clone)]
pub struct ConnectionSettings {
    config: Config,
    source: SettingsSource,
}

impl std::fmt::Debug for ConnectionSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionSettings")
            .field("target", &self.describe())
            .field("source", &self.source)
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
        let mut config = match &text {
            Some(text) => Config::from_str(text).map_err(|error| {
                StoreError::Config(format!(
                    "cannot parse the connection string from {}: {}",
                    source.describe(),
                    super::error::error_chain(&error)
                ))
            })?,
            None => Config::new(),
        };
        fill_from_libpq_environment(&mut config, &env)?;
        if matches!(config.get_ssl_mode(), SslMode::Require) {
            return Err(StoreError::Config(
                "sslmode=require is not supported by this build (it connects without TLS); \
                 use a local socket, an SSH tunnel, or sslmode=prefer"
                    .to_owned(),
            ));
        }
        config.connect_timeout(Duration::from_secs(10));
        config.keepalives_idle(Duration::from_secs(30));
        Ok(ConnectionSettings { config, source })
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

    /// A driver configuration whose sessions resolve unqualified names in `schema`.
    pub fn driver_config(&self, schema: &SchemaName, application_name: &str) -> Config {
        let mut config = self.config.clone();
        // Startup options cost no round trip, and every session of a pool gets them. JIT is off:
        // every qlsched statement is short, and compiling one (PostgreSQL does so once a plan's
        // cost passes jit_above_cost, e.g. a count over a million schedule rows) costs 100-300 ms,
        // many times the statement itself.
        config.options(format!("-c search_path={} -c jit=off", schema.as_str()));
        if self.config.get_application_name().is_none() {
            config.application_name(application_name);
        }
        config
    }

    /// Opens one connection outside any pool (migrations, the demo's admin work).
    pub async fn connect(
        &self,
        schema: &SchemaName,
        application_name: &str,
    ) -> Result<tokio_postgres::Client, StoreError> {
        let (client, connection) = self
            .driver_config(schema, application_name)
            .connect(NoTls)
            .await
            .map_err(|error| self.unavailable(error))?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection closed");
            }
        });
        Ok(client)
    }

    /// Opens a pool of `size` connections and checks that one can be had.
    pub async fn pool(
        &self,
        schema: &SchemaName,
        application_name: &str,
        size: usize,
    ) -> Result<Pool, StoreError> {
        let manager = Manager::from_config(
            self.driver_config(schema, application_name),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(size)
            .wait_timeout(Some(Duration::from_secs(15)))
            .create_timeout(Some(Duration::from_secs(15)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|error| StoreError::Config(error.to_string()))?;
        drop(pool.get().await.map_err(|error| match error {
            deadpool_postgres::PoolError::Backend(db) => self.unavailable(db),
            other => StoreError::Unavailable(format!("{}: {other}", self.describe())),
        })?);
        Ok(pool)
    }

    /// Whether a server answers at all: `Err` with the reason only when nothing did (no socket,
    /// connection refused, timed out). A server that answers with an error (no such role or
    /// database, starting up, a password wanted) does answer: those are its operator's to fix, and
    /// the command that then connects reports them with their own exit status.
    pub async fn answers(&self) -> Result<(), String> {
        let connected = self
            .driver_config(&SchemaName::default(), "qlsched probe")
            .connect(NoTls)
            .await;
        match connected {
            Ok((client, connection)) => {
                drop(client);
                // Dropping the client ends the connection future: a Terminate message, then EOF.
                let _ = connection.await;
                Ok(())
            }
            Err(error) if error.as_db_error().is_some() => Ok(()),
            Err(error) => {
                let chain = super::error::error_chain(&error);
                // The password request is the server answering (see StoreError::from_db).
                if chain.contains("password missing") {
                    Ok(())
                } else {
                    Err(format!("{}: {chain}", self.describe()))
                }
            }
        }
    }

    fn unavailable(&self, error: tokio_postgres::Error) -> StoreError {
        match StoreError::from_db(error) {
            StoreError::Unavailable(message) => {
                StoreError::Unavailable(format!("{}: {message}", self.describe()))
            }
            other => other,
        }
    }
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

/// Applies `PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`, `PGPASSWORD`, `PGSSLMODE` and `PGAPPNAME`
/// to whatever the connection string left unset, then libpq's compiled-in defaults.
fn fill_from_libpq_environment(
    config: &mut Config,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<(), StoreError> {
    if config.get_hosts().is_empty() {
        match env("PGHOST") {
            Some(hosts) => {
                for host in hosts.split(',') {
                    config.host(host);
                }
            }
            None => {
                config.host(default_socket_dir());
            }
        }
    }
    if config.get_ports().is_empty()
        && let Some(port) = env("PGPORT")
    {
        let port = port
            .parse::<u16>()
            .map_err(|_| StoreError::Config(format!("PGPORT={port:?} is not a port number")))?;
        config.port(port);
    }
    if config.get_user().is_none() {
        let user = env("PGUSER").unwrap_or_else(os_user);
        config.user(&user);
    }
    if config.get_dbname().is_none() {
        let dbname =
            env("PGDATABASE").unwrap_or_else(|| config.get_user().unwrap_or("postgres").to_owned());
        config.dbname(&dbname);
    }
    if config.get_password().is_none()
        && let Some(password) = env("PGPASSWORD")
    {
        config.password(password);
    }
    if config.get_application_name().is_none()
        && let Some(name) = env("PGAPPNAME")
    {
        config.application_name(name);
    }
    if let Some(mode) = env("PGSSLMODE") {
        config.ssl_mode(match mode.as_str() {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" | "verify-ca" | "verify-full" => SslMode::Require,
            other => {
                return Err(StoreError::Config(format!(
                    "PGSSLMODE={other:?} is not one of disable, allow, prefer, require, verify-ca, verify-full"
                )));
            }
        });
    }
    Ok(())
}

/// `text` with `:port` after each host, when it is a URL that names hosts and none with a port;
/// `None` when it is not such a URL (a key=value string is left to the parser and
/// [`fill_from_libpq_environment`]).
fn url_with_port(text: &str, port: &str) -> Result<Option<String>, StoreError> {
    let Some(rest) = ["postgresql://", "postgres://"]
        .iter()
        .find_map(|scheme| text.strip_prefix(scheme))
    else {
        return Ok(None);
    };
    let netloc_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let netloc = &rest[..netloc_end];
    let hosts_start = netloc.rfind('@').map_or(0, |at| at + 1);
    let hosts = &netloc[hosts_start..];
    let has_port = |host: &str| match host.strip_prefix('[') {
        Some(bracketed) => bracketed.contains("]:"),
        None => host.contains(':'),
    };
    if hosts.is_empty() || hosts.split(',').any(has_port) {
        return Ok(None);
    }
    let port = port
        .parse::<u16>()
        .map_err(|_| StoreError::Config(format!("PGPORT={port:?} is not a port number")))?;
    let with_ports = hosts
        .split(',')
        .map(|host| format!("{host}:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    let scheme_len = text.len() - rest.len();
    Ok(Some(format!(
        "{}{}{with_ports}{}",
        &text[..scheme_len],
        &netloc[..hosts_start],
        &rest[netloc_end..]
    )))
}

/// libpq's default socket directory: Debian builds use /var/run/postgresql, upstream /tmp.
fn default_socket_dir() -> &'static str {
    if Path::new("/var/run/postgresql").is_dir() {
        "/var/run/postgresql"
    } else {
        "/tmp"
    }
}

fn os_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| whoami::username())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn flag_wins_over_environment() {
        let settings = ConnectionSettings::resolve_with(
            Some("postgres://alice:secret@db.example:6543/prod"),
            env_of(&[("DATABASE_URL", "postgres://bob@elsewhere/other")]),
        )
        .expect("valid");
        assert_eq!(settings.describe(), "alice@db.example:6543/prod");
        assert!(!format!("{settings:?}").contains("secret"));
    }

    #[test]
    fn qlsched_url_wins_over_database_url() {
        let settings = ConnectionSettings::resolve_with(
            None,
            env_of(&[
                ("QLSCHED_DATABASE_URL", "host=one user=u dbname=a"),
                ("DATABASE_URL", "postgres://two/b"),
            ]),
        )
        .expect("valid");
        assert_eq!(settings.describe(), "u@one:5432/a");
        assert_eq!(settings.source(), SettingsSource::QlschedDatabaseUrl);
    }

    /// `demo` falls back to a throw-away server only when nothing at all was given.
    #[test]
    fn nothing_given_is_told_apart_from_the_pg_environment() {
        let settings = ConnectionSettings::resolve_with(None, env_of(&[])).expect("valid");
        assert_eq!(settings.source(), SettingsSource::Defaults);
        for name in LIBPQ_VARIABLES {
            let value = match name {
                "PGPORT" => "5432",
                "PGSSLMODE" => "disable",
                _ => "x",
            };
            let env = move |key: &str| (key == name).then(|| value.to_owned());
            let settings = ConnectionSettings::resolve_with(None, env).expect(name);
            assert_eq!(
                settings.source(),
                SettingsSource::LibpqEnvironment,
                "{name}"
            );
        }
    }

    #[test]
    fn libpq_variables_fill_the_gaps() {
        let settings = ConnectionSettings::resolve_with(
            None,
            env_of(&[
                ("PGHOST", "127.0.0.1"),
                ("PGPORT", "5433"),
                ("PGUSER", "ops"),
                ("PGPASSWORD", "pw"),
            ]),
        )
        .expect("valid");
        assert_eq!(settings.describe(), "ops@127.0.0.1:5433/ops");
    }

    /// As libpq: PGPORT applies to URL hosts that name no port, never to one that does.
    #[test]
    fn pgport_fills_a_url_host_without_a_port() {
        for (url, expected) in [
            ("postgres://ops@127.0.0.1/db", "ops@127.0.0.1:5999/db"),
            (
                "postgresql://ops:pw@db.example/db?sslmode=disable",
                "ops@db.example:5999/db",
            ),
            ("postgres://ops@127.0.0.1:6000/db", "ops@127.0.0.1:6000/db"),
            ("postgres://ops@[::1]/db", "ops@::1:5999/db"),
            ("host=127.0.0.1 user=ops dbname=db", "ops@127.0.0.1:5999/db"),
            (
                "host=127.0.0.1 port=6000 user=ops dbname=db",
                "ops@127.0.0.1:6000/db",
            ),
        ] {
            let settings =
                ConnectionSettings::resolve_with(Some(url), env_of(&[("PGPORT", "5999")]))
                    .expect(url);
            assert_eq!(settings.describe(), expected, "{url}");
        }
        let error = ConnectionSettings::resolve_with(
            Some("postgres://ops@127.0.0.1/db"),
            env_of(&[("PGPORT", "abc")]),
        )
        .expect_err("a bad PGPORT is refused");
        assert_eq!(error.exit_code(), 78, "{error}");
    }

    /// A connection string that does not parse names what is wrong in it.
    #[test]
    fn a_bad_connection_string_names_its_fault() {
        for (text, fault) in [
            (
                "postgres://x@h:notaport/db",
                "invalid value for option `port`",
            ),
            (
                "host='unterminated",
                "unterminated quoted connection parameter value",
            ),
        ] {
            let error = ConnectionSettings::resolve_with(Some(text), env_of(&[])).expect_err(text);
            assert_eq!(error.exit_code(), 78, "{error}");
            assert!(error.to_string().contains(fault), "{text}: {error}");
        }
    }

    #[test]
    fn bad_port_and_sslmode_are_configuration_errors() {
        for env in [
            env_of(&[("PGPORT", "fivefour")]),
            env_of(&[("PGSSLMODE", "sometimes")]),
            env_of(&[("PGSSLMODE", "require")]),
        ] {
            let error = ConnectionSettings::resolve_with(None, env).expect_err("invalid");
            assert_eq!(error.exit_code(), 78, "{error}");
        }
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!("qlsched".parse::<SchemaName>().is_ok());
        assert!("ql_2".parse::<SchemaName>().is_ok());
        for bad in ["", "Bad", "a-b", "x;drop", "pg_x", "1abc", &"a".repeat(64)] {
            assert!(bad.parse::<SchemaName>().is_err(), "{bad:?}");
        }
    }
}
