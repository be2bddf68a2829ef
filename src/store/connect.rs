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
//! `sslmode`'s fall-backs (`allow`, `prefer`) tried there. A password is never part of any text
//! this module renders.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::future::BoxFuture;
use tokio_postgres::config::{Host, LoadBalanceHosts, SslMode as DriverSslMode};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::StoreError;
use super::passfile;
use super::tls::{self, SslMode, Tls, TlsFiles};

/// What libpq waits for a connection when `connect_timeout` is not given: forever. qlsched waits
/// this long instead, so that a server that accepts and never answers cannot hang a command.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The libpq keywords read here rather than by tokio-postgres.
const OWN_KEYWORDS: [&str; 7] = [
    "sslmode",
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
    /// The driver's settings, every host of the list.
    config: Config,
    source: SettingsSource,
    ssl_mode: SslMode,
    tls: Tls,
    /// The password file to consult when no password is given; it need not exist.
    passfile: Option<PathBuf>,
    /// For each host: TCP, TLS and authentication together. `None` waits forever.
    connect_timeout: Option<Duration>,
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

/// A connection as the driver returns it: every connection qlsched opens has this type, TLS or
/// not, so that pools and single connections share one connector.
type Opened = (
    Client,
    tokio_postgres::Connection<Socket, <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream>,
);

/// One entry of the host list, as libpq tries them in turn.
#[derive(Debug, Clone)]
struct Target {
    host: Option<Host>,
    hostaddr: Option<IpAddr>,
    port: u16,
}

impl Target {
    /// The name the server is known by: for the certificate check, the password file, messages.
    fn name(&self) -> String {
        match (&self.host, self.hostaddr) {
            (Some(Host::Tcp(name)), _) => name.clone(),
            (Some(Host::Unix(path)), _) => path.display().to_string(),
            (None, Some(addr)) => addr.to_string(),
            (None, None) => "localhost".to_owned(),
        }
    }

    fn is_socket(&self) -> bool {
        matches!(self.host, Some(Host::Unix(_))) && self.hostaddr.is_none()
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
        if let Some(service) = own.get("service").cloned().or_else(|| env("PGSERVICE")) {
            return Err(StoreError::Config(format!(
                "service={service:?}: connection service files (pg_service.conf, PGSERVICE) are \
                 not supported; give the settings in the URL or the PG* variables"
            )));
        }
        fill_from_libpq_environment(&mut config, &env)?;
        for (keyword, variable) in [
            ("sslmode", "PGSSLMODE"),
            ("sslrootcert", "PGSSLROOTCERT"),
            ("sslcert", "PGSSLCERT"),
            ("sslkey", "PGSSLKEY"),
            ("passfile", "PGPASSFILE"),
            ("connect_timeout", "PGCONNECT_TIMEOUT"),
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
        let passfile = own
            .get("passfile")
            .map(PathBuf::from)
            .or_else(|| home.map(|home| home.join(".pgpass")));
        config.keepalives_idle(Duration::from_secs(30));
        Ok(ConnectionSettings {
            config,
            source,
            ssl_mode,
            tls,
            passfile,
            connect_timeout,
        })
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

    /// Opens one connection outside any pool (migrations, the demo's admin work).
    pub async fn connect(
        &self,
        schema: &SchemaName,
        application_name: &str,
    ) -> Result<Client, StoreError> {
        let base = self.driver_config(schema, application_name);
        let mut failures = Vec::new();
        for target in self.targets() {
            let attempt = self.open_target(&base, &target);
            let result = match self.connect_timeout {
                Some(limit) => match tokio::time::timeout(limit, attempt).await {
                    Ok(result) => result,
                    Err(_) => {
                        failures.push(StoreError::Unavailable(format!(
                            "{}: no answer within {} s (connect_timeout, which bounds the TCP \
                             connection, the TLS handshake and authentication together)",
                            self.describe_target(&target),
                            limit.as_secs()
                        )));
                        continue;
                    }
                },
                None => attempt.await,
            };
            match result {
                Ok((client, connection)) => {
                    tokio::spawn(async move {
                        if let Err(error) = connection.await {
                            tracing::debug!(%error, "connection closed");
                        }
                    });
                    return Ok(client);
                }
                Err(failed) => failures.push(self.failure(failed, &target)),
            }
        }
        Err(combine(failures))
    }

    /// Opens a pool of `size` connections and checks that one can be had.
    pub async fn pool(
        &self,
        schema: &SchemaName,
        application_name: &str,
        size: usize,
    ) -> Result<Pool, StoreError> {
        // The check is a connection of its own: its failure is described as `connect` describes
        // it (which host, which certificate check, which timeout), where the pool could say only
        // "timed out" or give the driver's bare error.
        drop(self.connect(schema, application_name).await?);
        let manager = Manager::from_connect(
            self.driver_config(schema, application_name),
            PoolConnect {
                settings: self.clone(),
            },
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        // The pool bounds a connection as a whole; every host gets its connect_timeout.
        let hosts = u32::try_from(self.targets().len()).unwrap_or(1).max(1);
        let create_timeout = self
            .connect_timeout
            .map_or(Duration::from_secs(15), |limit| limit * hosts);
        Pool::builder(manager)
            .max_size(size)
            .wait_timeout(Some(Duration::from_secs(15)))
            .create_timeout(Some(create_timeout))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|error| StoreError::Config(error.to_string()))
    }

    /// The host list in the order to try it (shuffled for `load_balance_hosts=random`).
    fn targets(&self) -> Vec<Target> {
        let hosts = self.config.get_hosts();
        let hostaddrs = self.config.get_hostaddrs();
        let ports = self.config.get_ports();
        let count = hosts.len().max(hostaddrs.len());
        let mut targets = (0..count)
            .map(|i| Target {
                host: hosts.get(i).cloned(),
                hostaddr: hostaddrs.get(i).copied(),
                port: ports.get(i).or(ports.first()).copied().unwrap_or(5432),
            })
            .collect::<Vec<_>>();
        if self.config.get_load_balance_hosts() == LoadBalanceHosts::Random {
            // Fisher-Yates with a v4 UUID's random bytes: no other randomness is needed here.
            let bytes = uuid::Uuid::new_v4().into_bytes();
            for i in (1..targets.len()).rev() {
                let j = usize::from(bytes[i % bytes.len()]) % (i + 1);
                targets.swap(i, j);
            }
        }
        targets
    }

    /// `base` narrowed to one host, with the password file's password for it when none is
    /// given (and the file's path, to say where a refused password came from).
    fn config_for(&self, base: &Config, target: &Target) -> (Config, Option<PathBuf>) {
        let mut config = Config::new();
        if let Some(user) = base.get_user() {
            config.user(user);
        }
        if let Some(dbname) = base.get_dbname() {
            config.dbname(dbname);
        }
        if let Some(options) = base.get_options() {
            config.options(options);
        }
        if let Some(name) = base.get_application_name() {
            config.application_name(name);
        }
        match &target.host {
            Some(Host::Tcp(name)) => {
                config.host(name);
            }
            Some(Host::Unix(path)) => {
                config.host_path(path);
            }
            None => {}
        }
        if let Some(addr) = target.hostaddr {
            config.hostaddr(addr);
        }
        config.port(target.port);
        if let Some(timeout) = base.get_connect_timeout() {
            config.connect_timeout(*timeout);
        }
        if let Some(timeout) = base.get_tcp_user_timeout() {
            config.tcp_user_timeout(*timeout);
        }
        config.keepalives(base.get_keepalives());
        config.keepalives_idle(base.get_keepalives_idle());
        if let Some(interval) = base.get_keepalives_interval() {
            config.keepalives_interval(interval);
        }
        if let Some(retries) = base.get_keepalives_retries() {
            config.keepalives_retries(retries);
        }
        config.target_session_attrs(base.get_target_session_attrs());
        config.channel_binding(base.get_channel_binding());
        config.ssl_negotiation(base.get_ssl_negotiation());
        let mut from_file = None;
        match base.get_password() {
            Some(password) => {
                config.password(password);
            }
            None => {
                if let Some(path) = &self.passfile
                    && let Some(password) = passfile::password(
                        path,
                        passfile::Lookup {
                            host: &passfile_host(target),
                            port: target.port,
                            dbname: base.get_dbname().unwrap_or_default(),
                            user: base.get_user().unwrap_or_default(),
                        },
                    )
                {
                    config.password(password);
                    from_file = Some(path.clone());
                }
            }
        }
        (config, from_file)
    }

    /// One host, with `sslmode`'s fall-backs as libpq makes them: `allow` goes on with TLS when
    /// the server refuses the plain connection, `prefer` goes on without TLS when the handshake
    /// fails. A Unix socket never speaks TLS (libpq ignores `sslmode` there).
    async fn open_target(&self, base: &Config, target: &Target) -> Result<Opened, Failed> {
        let (mut config, from_file) = self.config_for(base, target);
        let tls = self.tls.connector.clone();
        let mode = if target.is_socket() {
            SslMode::Disable
        } else {
            self.ssl_mode
        };
        let first = match mode {
            SslMode::Disable | SslMode::Allow => DriverSslMode::Disable,
            SslMode::Prefer => DriverSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => DriverSslMode::Require,
        };
        config.ssl_mode(first);
        let error = match config.connect(tls.clone()).await {
            Ok(opened) => return Ok(opened),
            Err(error) => error,
        };
        let second = match mode {
            SslMode::Allow if error.as_db_error().is_some() => DriverSslMode::Require,
            SslMode::Prefer if is_handshake_failure(&error) => DriverSslMode::Disable,
            _ => {
                return Err(Failed {
                    error,
                    passfile: from_file,
                    refused_certificate: None,
                });
            }
        };
        tracing::debug!(host = %target.name(), %error, ?second, "sslmode fall-back");
        // Kept for the message should the plain attempt fail too: "no encryption" alone would
        // hide that TLS was tried and why it failed.
        let refused_certificate = self.tls.certificate_failure(&error, &target.name());
        config.ssl_mode(second);
        config.connect(tls).await.map_err(|error| Failed {
            error,
            passfile: from_file,
            refused_certificate,
        })
    }

    /// A driver error while connecting to `target`, classified and described.
    fn failure(&self, failed: Failed, target: &Target) -> StoreError {
        let Failed {
            error,
            passfile,
            refused_certificate,
        } = failed;
        let place = match refused_certificate {
            Some(what) => format!(
                "{} (with TLS first: {what}; then without TLS, as sslmode=prefer does)",
                self.describe_target(target)
            ),
            None => self.describe_target(target),
        };
        if let Some(what) = self.tls.certificate_failure(&error, &target.name()) {
            return StoreError::Untrusted(format!("{place}: {what}"));
        }
        let chain = super::error::error_chain(&error);
        if chain.contains("server does not support TLS") {
            return StoreError::Unavailable(format!(
                "{place}: the server does not accept TLS connections, and sslmode={} requires TLS",
                self.ssl_mode
            ));
        }
        match StoreError::from_db(error) {
            StoreError::Unavailable(message) => {
                StoreError::Unavailable(format!("{place}: {message}"))
            }
            StoreError::PermissionDenied(message) => StoreError::PermissionDenied(match passfile {
                Some(path) => format!(
                    "{place}: {message} (the password came from the password file {})",
                    path.display()
                ),
                None => format!("{place}: {message}"),
            }),
            other => other,
        }
    }

    fn describe_target(&self, target: &Target) -> String {
        format!(
            "{}@{}:{}/{}",
            self.user(),
            target.name(),
            target.port,
            self.dbname()
        )
    }
}

/// A host's attempt that failed, with what the message needs besides the driver's error.
struct Failed {
    error: tokio_postgres::Error,
    /// The password file the password came from, if it did.
    passfile: Option<PathBuf>,
    /// Under `prefer`, why the TLS attempt before the plain one failed, if a certificate was
    /// refused.
    refused_certificate: Option<String>,
}

/// How the pool opens its connections: as [`ConnectionSettings::connect`] does, host by host.
/// The pool's own create timeout bounds the whole; here a host that does not answer within
/// `connect_timeout` gives way to the next one.
struct PoolConnect {
    settings: ConnectionSettings,
}

impl deadpool_postgres::Connect for PoolConnect {
    fn connect(
        &self,
        pg_config: &Config,
    ) -> BoxFuture<'_, Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>> {
        let base = pg_config.clone();
        Box::pin(async move {
            let targets = self.settings.targets();
            let last = targets.len().saturating_sub(1);
            let mut error = None;
            for (i, target) in targets.iter().enumerate() {
                let attempt = self.settings.open_target(&base, target);
                let result = match self.settings.connect_timeout {
                    Some(limit) if i < last => match tokio::time::timeout(limit, attempt).await {
                        Ok(result) => result,
                        Err(_) => continue,
                    },
                    _ => attempt.await,
                };
                match result {
                    Ok((client, connection)) => {
                        let task = tokio::spawn(async move {
                            if let Err(error) = connection.await {
                                tracing::warn!(%error, "pooled connection closed");
                            }
                        });
                        return Ok((client, task));
                    }
                    Err(failed) => error = Some(failed.error),
                }
            }
            // With no host left and none answering, the pool's create timeout has the last word;
            // `targets` is never empty (a host is always filled in), so this is an error.
            match error {
                Some(error) => Err(error),
                None => std::future::pending().await,
            }
        })
    }
}

/// The failures of every host, as one error: the first that is not "unavailable" (a refused
/// password or certificate says more than a host that did not answer), else all of them.
fn combine(mut failures: Vec<StoreError>) -> StoreError {
    if let Some(at) = failures
        .iter()
        .position(|failure| !matches!(failure, StoreError::Unavailable(_)))
    {
        return failures.swap_remove(at);
    }
    if failures.len() == 1 {
        return failures.swap_remove(0);
    }
    StoreError::Unavailable(
        failures
            .iter()
            .map(|failure| match failure {
                StoreError::Unavailable(message) => message.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// A failed TLS handshake (as opposed to a refused login or a closed socket): what makes libpq's
/// `prefer` try again without TLS. tokio-postgres has no public error kind, only its message.
fn is_handshake_failure(error: &tokio_postgres::Error) -> bool {
    error
        .to_string()
        .starts_with("error performing TLS handshake")
}

/// The host name the password file is searched for: as libpq, the default socket directory
/// counts as `localhost`.
fn passfile_host(target: &Target) -> String {
    match &target.host {
        Some(Host::Unix(path)) if path == Path::new(default_socket_dir()) => "localhost".to_owned(),
        _ => target.name(),
    }
}

/// libpq's `connect_timeout`: whole seconds; zero or less waits forever; 1 means 2, libpq's
/// minimum.
fn parse_connect_timeout(text: &str) -> Result<Option<Duration>, StoreError> {
    let seconds = text.trim().parse::<i64>().map_err(|_| {
        StoreError::Config(format!(
            "connect_timeout={text:?} is not a whole number of seconds"
        ))
    })?;
    Ok(match seconds {
        i64::MIN..=0 => None,
        1 => Some(Duration::from_secs(2)),
        n => Some(Duration::from_secs(n.unsigned_abs())),
    })
}

/// Takes libpq's keywords that tokio-postgres must not see ([`OWN_KEYWORDS`]) out of a URL's
/// query or a key=value string. `None` when the text does not tokenize (the driver's parser then
/// names the fault).
fn split_own_keywords(text: &str) -> Option<(String, BTreeMap<String, String>)> {
    let mut own = BTreeMap::new();
    if ["postgresql://", "postgres://"]
        .iter()
        .any(|scheme| text.starts_with(scheme))
    {
        let Some((base, query)) = text.split_once('?') else {
            return Some((text.to_owned(), own));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key_text = percent_decode(key)?;
            if OWN_KEYWORDS.contains(&key_text.as_str()) {
                own.insert(key_text, percent_decode(value)?);
            } else {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return Some((rest, own));
    }
    let mut kept = Vec::new();
    for (key, value) in tokenize_key_values(text)? {
        if OWN_KEYWORDS.contains(&key.as_str()) {
            own.insert(key, value);
        } else {
            let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
            kept.push(format!("{key}='{quoted}'"));
        }
    }
    Some((kept.join(" "), own))
}

/// libpq's `key = value` syntax: values unquoted up to white space, or single-quoted; a
/// backslash escapes the next character in either.
fn tokenize_key_values(text: &str) -> Option<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Some(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        chars.next_if_eq(&'=')?;
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next()? {
                    '\'' => break,
                    '\\' => value.push(chars.next()?),
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
            if value.is_empty() {
                return None;
            }
        }
        pairs.push((key, value));
    }
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
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

/// Applies `PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`, `PGPASSWORD` and `PGAPPNAME`
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
            env_of(&[("PGCONNECT_TIMEOUT", "soon")]),
            env_of(&[("PGSERVICE", "prod")]),
            // As libpq: verifying needs a root certificate, and the system's roots only mean
            // anything with the host name checked.
            env_of(&[("PGSSLMODE", "verify-ca")]),
            env_of(&[
                ("PGSSLMODE", "verify-full"),
                ("PGSSLROOTCERT", "/nonexistent/root.crt"),
            ]),
            env_of(&[("PGSSLMODE", "require"), ("PGSSLROOTCERT", "system")]),
        ] {
            let error = ConnectionSettings::resolve_with(None, env).expect_err("invalid");
            assert_eq!(error.exit_code(), 78, "{error}");
        }
    }

    /// Every sslmode libpq knows is accepted, from the URL, a key=value string or PGSSLMODE, and
    /// the keywords tokio-postgres does not know never reach it.
    #[test]
    fn every_sslmode_and_libpq_keyword_is_read() {
        for mode in [
            "disable",
            "allow",
            "prefer",
            "require",
            "verify-ca",
            "verify-full",
        ] {
            let root = "/etc/ssl/certs/ca-certificates.crt";
            let url =
                format!("postgres://u@h/db?sslmode={mode}&sslrootcert={root}&application_name=x");
            let key_values = format!("host=h user=u sslmode={mode} sslrootcert='{root}'");
            for settings in [
                ConnectionSettings::resolve_with(Some(&url), env_of(&[])),
                ConnectionSettings::resolve_with(Some(&key_values), env_of(&[])),
                ConnectionSettings::resolve_with(None, |name| match name {
                    "PGHOST" => Some("h".to_owned()),
                    "PGSSLMODE" => Some(mode.to_owned()),
                    "PGSSLROOTCERT" => Some(root.to_owned()),
                    _ => None,
                }),
                // The string wins over the variable, as every setting does.
                ConnectionSettings::resolve_with(Some(&key_values), env_of(&[("PGSSLMODE", "x")])),
            ] {
                let settings = settings.unwrap_or_else(|e| panic!("{mode}: {e}"));
                assert_eq!(settings.ssl_mode().as_str(), mode);
            }
        }
        let default = ConnectionSettings::resolve_with(Some("host=h"), env_of(&[])).expect("ok");
        assert_eq!(default.ssl_mode(), SslMode::Prefer);
        let system =
            ConnectionSettings::resolve_with(Some("host=h sslrootcert=system"), env_of(&[]))
                .expect("system roots");
        assert_eq!(system.ssl_mode(), SslMode::VerifyFull);
    }

    #[test]
    fn own_keywords_are_split_from_what_the_driver_reads() {
        let (rest, own) = split_own_keywords(
            "postgres://u:p%3Fw@h:1/db?sslmode=require&connect_timeout=3&sslkey=%2Fk%20y&keepalives=1",
        )
        .expect("splits");
        assert_eq!(rest, "postgres://u:p%3Fw@h:1/db?keepalives=1");
        assert_eq!(own["sslmode"], "require");
        assert_eq!(own["connect_timeout"], "3");
        assert_eq!(own["sslkey"], "/k y");
        let (rest, own) =
            split_own_keywords(r"host = h  password='it\'s' passfile='/a b' dbname=d\ b")
                .expect("splits");
        assert_eq!(own["passfile"], "/a b");
        let config = Config::from_str(&rest).expect("the rest parses");
        assert_eq!(config.get_dbname(), Some("d b"));
        assert_eq!(config.get_password(), Some(&b"it's"[..]));
        assert!(split_own_keywords("host='open").is_none());
    }

    #[test]
    fn connect_timeout_follows_libpq() {
        let timeout = |text: &str| {
            ConnectionSettings::resolve_with(Some(&format!("host=h {text}")), env_of(&[]))
                .expect(text)
                .connect_timeout()
        };
        assert_eq!(timeout(""), Some(DEFAULT_CONNECT_TIMEOUT));
        assert_eq!(timeout("connect_timeout=0"), None);
        assert_eq!(timeout("connect_timeout=1"), Some(Duration::from_secs(2)));
        assert_eq!(timeout("connect_timeout=7"), Some(Duration::from_secs(7)));
        let from_env = ConnectionSettings::resolve_with(
            Some("postgres://u@h/db"),
            env_of(&[("PGCONNECT_TIMEOUT", "4")]),
        )
        .expect("valid");
        assert_eq!(from_env.connect_timeout(), Some(Duration::from_secs(4)));
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
