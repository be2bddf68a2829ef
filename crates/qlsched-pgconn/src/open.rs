//! Opening one connection: host by host as libpq does, each within `connect_timeout`, with
//! `sslmode`'s fall-backs, the password file, and `target_session_attrs` checked on each.

use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_postgres::config::{Host, LoadBalanceHosts, SslMode as DriverSslMode};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, SimpleQueryMessage, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::parse::{SessionAttrs, default_socket_dir};
use crate::passfile;
use crate::settings::Settings;
use crate::tls::SslMode;
use crate::{Error, Refusal, describe, error_chain, refusal};

/// A connection as the driver returns it: every connection opened here has this type, TLS or
/// not, so that pools and single connections share one connector.
type Connection =
    tokio_postgres::Connection<Socket, <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream>;
type Opened = (Client, Connection);

/// One entry of the host list, as libpq tries them in turn.
#[derive(Debug, Clone)]
pub(crate) struct Target {
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

/// What a pool's connector learns when no host gave a session it wants
/// ([`Settings::open_pooled`]): a pool can report only a driver error, so the caller chooses
/// which to raise.
pub struct Missed {
    /// The last host whose session was opened and is not what `target_session_attrs` asks for:
    /// its client, still open, and why (e.g. "server is read-only (a standby?), and
    /// target_session_attrs=read-write wants writes"). A server that answered and is not what is
    /// wanted says more than one that did not; the client lets the caller have that server raise
    /// the reason as an error of its own.
    pub mismatch: Option<(Client, String)>,
    /// The last driver error of a host that could not be opened. With neither, every host ran
    /// out of `connect_timeout`.
    pub error: Option<tokio_postgres::Error>,
}

impl Settings {
    /// Opens one connection, driven by a task of its own: the first host, in list order (shuffled
    /// for `load_balance_hosts=random`), whose session is what `target_session_attrs` asks for,
    /// with `setup` sent on it before it is accepted ([`crate`] says why a text). Every host is
    /// tried before giving up; the error is the first that is not [`Error::Unavailable`] (a
    /// refused password or certificate says more than a host that did not answer), else every
    /// host's reason.
    pub async fn connect(&self, application_name: &str, setup: &str) -> Result<Client, Error> {
        let base = self.driver_config(application_name);
        let mut failures = Vec::new();
        for &wanted in self.session_attrs.passes() {
            // A later pass starts afresh: what the earlier one refused is no longer the reason.
            failures.clear();
            for target in self.targets() {
                match self
                    .open_session(&base, &target, wanted, setup, Drive::Alone)
                    .await
                {
                    Ok((client, _task)) => return Ok(client),
                    Err(failure) => failures.push(self.host_failure(failure, &target)),
                }
            }
        }
        Err(combine(failures))
    }

    /// [`Self::connect`] for a pool's connector (deadpool-postgres' `Connect`, given
    /// [`Self::driver_config`] as `base`): the connection and the task that drives it, a closed
    /// connection logged as a warning; when no host is kept, what [`Missed`] says, since a pool
    /// can report only a driver error.
    pub async fn open_pooled(
        &self,
        base: &Config,
        setup: &str,
    ) -> Result<(Client, JoinHandle<()>), Missed> {
        let mut missed = Missed {
            mismatch: None,
            error: None,
        };
        for &wanted in self.session_attrs.passes() {
            for target in self.targets() {
                match self
                    .open_session(base, &target, wanted, setup, Drive::Pooled)
                    .await
                {
                    Ok(opened) => return Ok(opened),
                    Err(HostFailure::Driver(failed)) => missed.error = Some(failed.error),
                    Err(HostFailure::TimedOut(_)) => {}
                    Err(
                        HostFailure::Mismatch { client, reason }
                        | HostFailure::ReadOnlyLogin { client, reason },
                    ) => {
                        missed.mismatch = Some((client, reason));
                    }
                }
            }
        }
        Err(missed)
    }

    /// The longest one connection may take: `connect_timeout` for every host, on every pass over
    /// the list (`prefer-standby` makes two); `None` when it waits forever. What a pool's create
    /// timeout should allow.
    pub fn max_connect_time(&self) -> Option<Duration> {
        let attempts = self.targets().len() * self.session_attrs.passes().len();
        let attempts = u32::try_from(attempts).unwrap_or(u32::MAX).max(1);
        self.connect_timeout.map(|limit| limit * attempts)
    }

    /// Whether a server answers at all: `Err` with the reason only when nothing did (no socket,
    /// connection refused, timed out). A server that answers with an error (no such role or
    /// database, starting up, a password wanted, a certificate refused) does answer: those are
    /// its operator's to fix. The probe's session is closed at once.
    pub async fn answers(&self, application_name: &str) -> Result<(), String> {
        match self.connect(application_name, "").await {
            Ok(_) => Ok(()),
            Err(Error::Unavailable(reasons)) => Err(reasons.join("; ")),
            Err(_) => Ok(()),
        }
    }

    /// One host, within `connect_timeout` (TCP, TLS, authentication, the session check and
    /// `setup` together), its connection driven by a task of its own, its session checked
    /// against `wanted`, then given `setup`.
    async fn open_session(
        &self,
        base: &Config,
        target: &Target,
        wanted: SessionAttrs,
        setup: &str,
        drive: Drive,
    ) -> Result<(Client, JoinHandle<()>), HostFailure> {
        let driver = |error| {
            HostFailure::Driver(Failed {
                error,
                passfile: None,
                refused_certificate: None,
            })
        };
        let attempt = async {
            let (client, connection) = self
                .open_target(base, target)
                .await
                .map_err(HostFailure::Driver)?;
            let task = drive.spawn(connection);
            match session_mismatch(&client, wanted).await {
                Ok(None) => {
                    if !setup.is_empty() {
                        client.batch_execute(setup).await.map_err(driver)?;
                    }
                    Ok((client, task))
                }
                Ok(Some(Unwanted::Role(reason))) => Err(HostFailure::Mismatch { client, reason }),
                Ok(Some(Unwanted::ReadOnlyLogin(reason))) => {
                    Err(HostFailure::ReadOnlyLogin { client, reason })
                }
                Err(error) => Err(driver(error)),
            }
        };
        match self.connect_timeout {
            Some(limit) => tokio::time::timeout(limit, attempt)
                .await
                .unwrap_or(Err(HostFailure::TimedOut(limit))),
            None => attempt.await,
        }
    }

    /// A host's failure as the error reported.
    fn host_failure(&self, failure: HostFailure, target: &Target) -> Error {
        match failure {
            HostFailure::Driver(failed) => self.failure(failed, target),
            HostFailure::TimedOut(limit) => Error::Unavailable(vec![format!(
                "{}: no answer within {} s (connect_timeout, which bounds the TCP connection, \
                 the TLS handshake and authentication together)",
                self.describe_target(target),
                limit.as_secs()
            )]),
            HostFailure::ReadOnlyLogin { reason, .. } => {
                Error::Config(format!("{}: {reason}", self.describe_target(target)))
            }
            HostFailure::Mismatch { reason, .. } => {
                Error::Unavailable(vec![format!("{}: {reason}", self.describe_target(target))])
            }
        }
    }

    /// The host list in the order to try it (shuffled for `load_balance_hosts=random`).
    pub(crate) fn targets(&self) -> Vec<Target> {
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
            // Fisher-Yates with the standard library's randomly seeded hasher: no dependency for
            // the little randomness needed here.
            let mut random = std::collections::hash_map::RandomState::new().build_hasher();
            for i in (1..targets.len()).rev() {
                random.write_usize(i);
                let j = usize::try_from(random.finish() % (i as u64 + 1)).unwrap_or(0);
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
        let opened = config.connect(tls).await.map_err(|failed| Failed {
            error: failed,
            passfile: from_file,
            refused_certificate,
        })?;
        // libpq goes on in plain text here without a word; a replica's every statement would
        // then cross the network readable, so it is said once per connection.
        if second == DriverSslMode::Disable {
            tracing::warn!(host = %target.name(), %error,
                "connected without TLS after the TLS handshake failed, as sslmode=prefer allows; \
                 sslmode=require or verify-full refuses a connection without TLS");
        }
        Ok(opened)
    }

    /// A driver error while connecting to `target`, classified and described.
    fn failure(&self, failed: Failed, target: &Target) -> Error {
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
            return Error::Untrusted(format!("{place}: {what}"));
        }
        let chain = error_chain(&error);
        if chain.contains("server does not support TLS") {
            return Error::Unavailable(vec![format!(
                "{place}: the server does not accept TLS connections, and sslmode={} requires TLS",
                self.ssl_mode
            )]);
        }
        match classify(error) {
            Error::Unavailable(reasons) => {
                Error::Unavailable(vec![format!("{place}: {}", reasons.join("; "))])
            }
            Error::PermissionDenied(message) => Error::PermissionDenied(match passfile {
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

/// A driver error met while connecting, by what it means for the connection: a refused login or
/// privilege ([`Error::PermissionDenied`]), a server that is not there or not taking connections
/// now ([`Error::Unavailable`]), anything else as the driver's own ([`Error::Database`], for the
/// caller to classify further).
fn classify(error: tokio_postgres::Error) -> Error {
    if let Some(message) = crate::password_missing(&error) {
        return Error::PermissionDenied(message);
    }
    let Some(db) = error.as_db_error() else {
        return Error::Unavailable(vec![error_chain(&error)]);
    };
    // A pooler's refusal of a startup parameter (PgBouncer, SQLSTATE 08P01) is in the
    // connection-failure class, and yet no retry or other host fixes it, the settings do: left
    // to the caller, who knows what its settings send.
    if db.message().starts_with("unsupported startup parameter: ") {
        return Error::Database(error);
    }
    match refusal(db.code()) {
        Some(Refusal::Permission) => Error::PermissionDenied(describe(&error)),
        Some(Refusal::Unavailable) => Error::Unavailable(vec![describe(&error)]),
        None => Error::Database(error),
    }
}

/// Who drives a connection's I/O once it is open: its task ends when the connection does, and
/// says so at the level that matters to the holder.
#[derive(Debug, Clone, Copy)]
enum Drive {
    /// A connection of its own ([`Settings::connect`]): its end is routine.
    Alone,
    /// A pooled connection: its end, when not asked for, is worth a warning.
    Pooled,
}

impl Drive {
    fn spawn(self, connection: Connection) -> JoinHandle<()> {
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                match self {
                    Drive::Alone => tracing::debug!(%error, "connection closed"),
                    Drive::Pooled => tracing::warn!(%error, "pooled connection closed"),
                }
            }
        })
    }
}

/// Why a host was passed over.
enum HostFailure {
    /// The driver could not open a connection there.
    Driver(Failed),
    /// Nothing within `connect_timeout`.
    TimedOut(Duration),
    /// A session was opened, and it is not what `target_session_attrs` asks for: `reason` says
    /// what it is instead. The client is kept for a pool ([`Missed::mismatch`]).
    Mismatch { client: Client, reason: String },
    /// A session was opened on a primary, and a setting of the login, its database or the server
    /// (`default_transaction_read_only`) makes it read-only where writes are wanted: no other host
    /// or promotion mends that, the setting does ([`Error::Config`]).
    ReadOnlyLogin { client: Client, reason: String },
}

const READ_ONLY_PROBE: &str = "SHOW transaction_read_only";
const STANDBY_PROBE: &str = "SELECT pg_is_in_recovery()";

/// Why `client`'s session is not what `wanted` asks for, or `None` when it is: one simple query
/// (no statement to prepare), none for `any`. As libpq: writability is `transaction_read_only`,
/// being a standby is `pg_is_in_recovery()`.
async fn session_mismatch(
    client: &Client,
    wanted: SessionAttrs,
) -> Result<Option<Unwanted>, tokio_postgres::Error> {
    let (query, yes) = match wanted {
        SessionAttrs::Any | SessionAttrs::PreferStandby => return Ok(None),
        SessionAttrs::ReadWrite | SessionAttrs::ReadOnly => (READ_ONLY_PROBE, "on"),
        SessionAttrs::Primary | SessionAttrs::Standby => (STANDBY_PROBE, "t"),
    };
    let flag = first_value(client, query).await?.as_deref() == Some(yes);
    let reason = match (wanted, flag) {
        // Read-only on a primary: a setting, not the server's role (libpq passes over such a
        // host as over a standby; where no host is kept, the setting is what to name).
        (SessionAttrs::ReadWrite, true)
            if first_value(client, STANDBY_PROBE).await?.as_deref() == Some("f") =>
        {
            return Ok(Some(Unwanted::ReadOnlyLogin(
                "the session is read-only on a primary (not in recovery): \
                 default_transaction_read_only is on for this login, its database or the server, \
                 and writes are wanted; turn it off for the login (ALTER ROLE name SET \
                 default_transaction_read_only = off) or connect as a login without it"
                    .to_owned(),
            )));
        }
        (SessionAttrs::ReadWrite, true) => {
            "server is read-only (a standby?), and target_session_attrs=read-write wants writes"
        }
        (SessionAttrs::ReadOnly, false) => {
            "server accepts writes, and target_session_attrs=read-only wants a read-only one"
        }
        (SessionAttrs::Primary, true) => {
            "server is a standby (in recovery), and target_session_attrs=primary wants the primary"
        }
        (SessionAttrs::Standby, false) => {
            "server is a primary (not in recovery), and target_session_attrs=standby wants a standby"
        }
        _ => return Ok(None),
    };
    Ok(Some(Unwanted::Role(reason.to_owned())))
}

/// Why a session is not what `target_session_attrs` asks for.
enum Unwanted {
    /// The server's role (a standby, a primary, read-only or not): another host may be.
    Role(String),
    /// [`HostFailure::ReadOnlyLogin`].
    ReadOnlyLogin(String),
}

/// The first column of the first row `query` (a simple query) returns.
async fn first_value(
    client: &Client,
    query: &str,
) -> Result<Option<String>, tokio_postgres::Error> {
    Ok(client
        .simple_query(query)
        .await?
        .into_iter()
        .find_map(|message| match message {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        }))
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

/// The failures of every host, as one error: the first that is not "unavailable" (a refused
/// password or certificate says more than a host that did not answer), else all of them.
fn combine(mut failures: Vec<Error>) -> Error {
    if let Some(at) = failures
        .iter()
        .position(|failure| !matches!(failure, Error::Unavailable(_)))
    {
        return failures.swap_remove(at);
    }
    Error::Unavailable(
        failures
            .into_iter()
            .flat_map(|failure| match failure {
                Error::Unavailable(reasons) => reasons,
                other => vec![other.to_string()],
            })
            .collect(),
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
