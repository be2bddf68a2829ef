//! Connection settings, resolved as libpq resolves them, and what they say.
//!
//! tokio-postgres reads no environment variables, no password file and only part of libpq's
//! keywords, so the libpq rules are applied here by hand: a connection string the program was
//! given, else one of the variables it names ([`Origins`]), else the `PG*` variables, else
//! libpq's defaults. As with libpq, `PG*` variables also fill whatever a string leaves out. The
//! keywords tokio-postgres does not know (`sslrootcert`, `sslcert`, `sslkey`, `passfile`,
//! `service`) or gives another meaning (`sslmode`, whose `verify-*` values it refuses;
//! `connect_timeout`, which it applies to the TCP connect alone; `target_session_attrs`, of which
//! it knows three values) are taken out of the string before the driver parses the rest.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::Config;
use tokio_postgres::config::Host;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::Error;
use crate::parse::{
    SessionAttrs, fill_from_libpq_environment, parse_connect_timeout, split_own_keywords,
    url_with_port,
};
use crate::service;
use crate::tls::{self, SslMode, Tls, TlsFiles};

/// What libpq waits for a connection when `connect_timeout` is not given: forever. This crate
/// waits this long instead, so that a server that accepts and never answers cannot hang a
/// program; `connect_timeout=0` still waits forever.
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

/// Where a program looks for a whole connection string before the `PG*` variables, and what it
/// calls the one it is given directly: libpq itself has neither (psql takes its string as an
/// argument), many programs have both (a `--database-url` flag, a `DATABASE_URL` variable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origins {
    /// What the string given to [`Settings::resolve_with`] is called in messages, e.g.
    /// `--database-url`.
    pub given: &'static str,
    /// Variables holding a whole connection string (a URL or `key=value` pairs), the first set
    /// one winning, e.g. `["DATABASE_URL"]`.
    pub variables: &'static [&'static str],
}

impl Default for Origins {
    fn default() -> Self {
        Origins {
            given: "the connection string",
            variables: &[],
        }
    }
}

/// Where the connection settings came from, for messages ("from DATABASE_URL").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The string the program was given, by the name of [`Origins::given`].
    Given(&'static str),
    /// One of [`Origins::variables`].
    Variable(&'static str),
    /// No string: one or more of the `PG*` variables.
    LibpqEnvironment,
    /// Nothing was given: no string, no variable of [`Origins`], none of the `PG*` variables
    /// read here. A program may treat this case apart (e.g. offer a throw-away server).
    Defaults,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::Given(name) | Source::Variable(name) => name,
            Source::LibpqEnvironment => "the PG* environment",
            Source::Defaults => "libpq's defaults",
        }
    }
}

/// The `PG*` variables read here, as libpq does: any one of them set means settings were given
/// ([`Source::LibpqEnvironment`]). A test checks that every `PG*` name this crate reads is here.
pub const LIBPQ_VARIABLES: [&str; 17] = [
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

/// Resolved connection settings for one PostgreSQL database, every host of its list. A password
/// is never part of any text they render.
#[derive(Clone)]
pub struct Settings {
    /// The driver's settings, every host of the list.
    pub(crate) config: Config,
    source: Source,
    pub(crate) ssl_mode: SslMode,
    pub(crate) tls: Tls,
    /// The password file to consult when no password is given; it need not exist.
    pub(crate) passfile: Option<PathBuf>,
    /// For each host: TCP, TLS and authentication together. `None` waits forever.
    pub(crate) connect_timeout: Option<Duration>,
    /// What a host's session must be to be kept (`target_session_attrs`).
    pub(crate) session_attrs: SessionAttrs,
    /// Whether the settings named `target_session_attrs`: a program's own default
    /// ([`Self::with_default_session_attrs`]) applies only when they did not.
    session_attrs_given: bool,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("target", &self.describe())
            .field("source", &self.source)
            .field("sslmode", &self.ssl_mode)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

impl Settings {
    /// Resolves the settings from `given` (a string the program was given, if any) and the
    /// process environment, with no variable of a whole string ([`Origins::default`]).
    pub fn resolve(given: Option<&str>) -> Result<Self, Error> {
        Self::resolve_with(Origins::default(), given, |name| {
            std::env::var(name).ok().filter(|v| !v.is_empty())
        })
    }

    /// The settings from `given`, else the first of `origins.variables` that `env` has, else
    /// the `PG*` variables, else libpq's defaults; the environment passed in, so that tests need
    /// not mutate theirs (and a program may choose what counts as unset).
    pub fn resolve_with(
        origins: Origins,
        given: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, Error> {
        let (text, source) = match given {
            Some(text) => (Some(text.to_owned()), Source::Given(origins.given)),
            None => match origins
                .variables
                .iter()
                .find_map(|name| env(name).map(|text| (text, *name)))
            {
                Some((text, name)) => (Some(text), Source::Variable(name)),
                None if LIBPQ_VARIABLES.iter().any(|name| env(name).is_some()) => {
                    (None, Source::LibpqEnvironment)
                }
                None => (None, Source::Defaults),
            },
        };
        // libpq's order: what the string says, then the service file, then the environment. The
        // service is named by the string (`service=`) or PGSERVICE.
        let service = match text
            .as_deref()
            .and_then(split_own_keywords)
            .and_then(|(_, own)| own.get("service").cloned())
            .or_else(|| env("PGSERVICE"))
        {
            Some(name) => Some(service::lookup(&name, &env)?),
            None => None,
        };
        // tokio-postgres gives a URL host without a port 5432; libpq gives it the service file's
        // port, else PGPORT.
        let port = service
            .as_ref()
            .and_then(|(settings, file)| {
                settings
                    .iter()
                    .find(|(key, _)| key == "port")
                    .map(|(_, port)| (port.clone(), format!("service file {}", file.display())))
            })
            .or_else(|| env("PGPORT").map(|port| (port, "PGPORT".to_owned())));
        let text = match (text, port) {
            (Some(text), Some((port, from))) => {
                Some(url_with_port(&text, &port, &from)?.unwrap_or(text))
            }
            (text, _) => text,
        };
        let parse_error = |error: tokio_postgres::Error| {
            Error::Config(format!(
                "cannot parse the connection string from {}: {}",
                source.describe(),
                crate::error_chain(&error)
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
        if let Some((settings, file)) = &service {
            service::apply(&mut config, &mut own, settings, file)?;
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
                Error::Config(format!(
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
        Ok(Settings {
            config,
            source,
            ssl_mode,
            tls,
            passfile,
            connect_timeout,
            session_attrs: session_attrs.unwrap_or(SessionAttrs::Any),
            session_attrs_given: session_attrs.is_some(),
        })
    }

    /// The same server and credentials, another database.
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

    pub fn source(&self) -> Source {
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

    /// The `target_session_attrs` in force: the one the settings name, else the program's
    /// default, else libpq's `any`.
    pub fn session_attrs(&self) -> SessionAttrs {
        self.session_attrs
    }

    /// These settings with `attrs` as `target_session_attrs` unless they name one: a writer may
    /// ask for `read-write`, a reader for `any`. A setting given in the string or
    /// `PGTARGETSESSIONATTRS` always wins.
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
    /// what to print for a person to pass back (it works for sockets too, unlike a URL).
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

    /// The driver's configuration, every host of the list: the connection string's, with
    /// `application_name` unless it names one. What this crate reads itself (`sslmode`, the
    /// password file, `target_session_attrs`) is not in it: open connections with
    /// [`Self::connect`] or [`Self::open_pooled`].
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
}
