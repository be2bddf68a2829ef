//! The connection settings as libpq reads them: sources, keywords, values.

use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::Config;

use crate::parse::split_own_keywords;
use crate::settings::LIBPQ_VARIABLES;
use crate::tls::SslMode;
use crate::*;

/// A program with a flag and two variables of a whole connection string, as many have.
const ORIGINS: Origins = Origins {
    given: "--database-url",
    variables: &["APP_DATABASE_URL", "DATABASE_URL"],
};

fn resolve_with(
    given: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Settings, Error> {
    Settings::resolve_with(ORIGINS, given, env)
}

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
    let settings = resolve_with(
        Some("postgres://alice:secret@db.example:6543/prod"),
        env_of(&[("DATABASE_URL", "postgres://bob@elsewhere/other")]),
    )
    .expect("valid");
    assert_eq!(settings.describe(), "alice@db.example:6543/prod");
    assert!(!format!("{settings:?}").contains("secret"));
}

#[test]
fn the_first_url_variable_wins() {
    let settings = resolve_with(
        None,
        env_of(&[
            ("APP_DATABASE_URL", "host=one user=u dbname=a"),
            ("DATABASE_URL", "postgres://two/b"),
        ]),
    )
    .expect("valid");
    assert_eq!(settings.describe(), "u@one:5432/a");
    assert_eq!(settings.source(), Source::Variable("APP_DATABASE_URL"));
}

/// Nothing given at all is told apart (a program may offer a throw-away server then).
#[test]
fn nothing_given_is_told_apart_from_the_pg_environment() {
    let settings = resolve_with(None, env_of(&[])).expect("valid");
    assert_eq!(settings.source(), Source::Defaults);
    for name in LIBPQ_VARIABLES {
        let value = match name {
            "PGPORT" => "5432",
            "PGSSLMODE" => "disable",
            "PGCONNECT_TIMEOUT" => "5",
            "PGTARGETSESSIONATTRS" => "any",
            _ => "x",
        };
        let env = move |key: &str| (key == name).then(|| value.to_owned());
        match resolve_with(None, env) {
            Ok(settings) => assert_eq!(settings.source(), Source::LibpqEnvironment, "{name}"),
            // Service files are refused by name: given, and said so.
            Err(Error::Config(message)) if name == "PGSERVICE" => {
                assert!(message.contains("PGSERVICE"), "{message}");
            }
            Err(error) => panic!("{name}: {error:?}"),
        }
    }
}

#[test]
fn libpq_variables_fill_the_gaps() {
    let settings = resolve_with(
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
        let settings = resolve_with(Some(url), env_of(&[("PGPORT", "5999")])).expect(url);
        assert_eq!(settings.describe(), expected, "{url}");
    }
    let error = resolve_with(
        Some("postgres://ops@127.0.0.1/db"),
        env_of(&[("PGPORT", "abc")]),
    )
    .expect_err("a bad PGPORT is refused");
    assert!(matches!(error, Error::Config(_)), "{error:?}");
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
        let error = resolve_with(Some(text), env_of(&[])).expect_err(text);
        assert!(matches!(error, Error::Config(_)), "{error:?}");
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
        let error = resolve_with(None, env).expect_err("invalid");
        assert!(matches!(error, Error::Config(_)), "{error:?}");
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
        let url = format!("postgres://u@h/db?sslmode={mode}&sslrootcert={root}&application_name=x");
        let key_values = format!("host=h user=u sslmode={mode} sslrootcert='{root}'");
        for settings in [
            resolve_with(Some(&url), env_of(&[])),
            resolve_with(Some(&key_values), env_of(&[])),
            resolve_with(None, |name| match name {
                "PGHOST" => Some("h".to_owned()),
                "PGSSLMODE" => Some(mode.to_owned()),
                "PGSSLROOTCERT" => Some(root.to_owned()),
                _ => None,
            }),
            // The string wins over the variable, as every setting does.
            resolve_with(Some(&key_values), env_of(&[("PGSSLMODE", "x")])),
        ] {
            let settings = settings.unwrap_or_else(|e| panic!("{mode}: {e}"));
            assert_eq!(settings.ssl_mode().as_str(), mode);
        }
    }
    let default = resolve_with(Some("host=h"), env_of(&[])).expect("ok");
    assert_eq!(default.ssl_mode(), SslMode::Prefer);
    let system =
        resolve_with(Some("host=h sslrootcert=system"), env_of(&[])).expect("system roots");
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
    let (rest, own) = split_own_keywords(r"host = h  password='it\'s' passfile='/a b' dbname=d\ b")
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
        resolve_with(Some(&format!("host=h {text}")), env_of(&[]))
            .expect(text)
            .connect_timeout()
    };
    assert_eq!(timeout(""), Some(DEFAULT_CONNECT_TIMEOUT));
    assert_eq!(timeout("connect_timeout=0"), None);
    assert_eq!(timeout("connect_timeout=1"), Some(Duration::from_secs(2)));
    assert_eq!(timeout("connect_timeout=7"), Some(Duration::from_secs(7)));
    let from_env = resolve_with(
        Some("postgres://u@h/db"),
        env_of(&[("PGCONNECT_TIMEOUT", "4")]),
    )
    .expect("valid");
    assert_eq!(from_env.connect_timeout(), Some(Duration::from_secs(4)));
}

/// Every `target_session_attrs` libpq knows is read from a URL, a key=value string or
/// `PGTARGETSESSIONATTRS`, the string winning over the variable; the driver never sees it.
#[test]
fn every_target_session_attrs_is_read() {
    for attrs in SessionAttrs::ALL {
        let value = attrs.as_str();
        let url = format!("postgres://u@a:1,b:2/db?target_session_attrs={value}");
        let key_values = format!("host=a,b port=1,2 user=u target_session_attrs={value}");
        for settings in [
            resolve_with(Some(&url), env_of(&[])),
            resolve_with(Some(&key_values), env_of(&[])),
            resolve_with(
                Some(&key_values),
                env_of(&[("PGTARGETSESSIONATTRS", "any")]),
            ),
            resolve_with(None, |name| match name {
                "PGHOST" => Some("a,b".to_owned()),
                "PGTARGETSESSIONATTRS" => Some(value.to_owned()),
                _ => None,
            }),
        ] {
            let settings = settings.unwrap_or_else(|e| panic!("{value}: {e}"));
            assert_eq!(settings.session_attrs(), attrs, "{value}");
            assert_eq!(settings.targets().len(), 2, "{value}");
        }
    }
}

/// An unknown value is a configuration error that names it and lists the valid ones.
#[test]
fn an_unknown_target_session_attrs_is_a_configuration_error() {
    for (flag, env) in [
        (Some("host=h target_session_attrs=readwrite"), env_of(&[])),
        (
            Some("postgres://u@h/db?target_session_attrs=master"),
            env_of(&[]),
        ),
        (None, env_of(&[("PGTARGETSESSIONATTRS", "Primary")])),
    ] {
        let error = resolve_with(flag, env).expect_err("refused");
        assert!(matches!(error, Error::Config(_)), "{error:?}");
        let text = error.to_string();
        assert!(text.contains("target_session_attrs="), "{text}");
        assert!(text.contains("prefer-standby"), "{text}");
    }
}

/// A command's default applies only when the settings name none: a given setting always wins.
#[test]
fn a_given_target_session_attrs_wins_over_the_commands_default() {
    let plain = resolve_with(Some("host=h"), env_of(&[])).expect("valid");
    assert_eq!(plain.session_attrs(), SessionAttrs::Any);
    let writer = plain.with_default_session_attrs(SessionAttrs::ReadWrite);
    assert_eq!(writer.session_attrs(), SessionAttrs::ReadWrite);
    let given = resolve_with(Some("host=h target_session_attrs=any"), env_of(&[]))
        .expect("valid")
        .with_default_session_attrs(SessionAttrs::ReadWrite);
    assert_eq!(given.session_attrs(), SessionAttrs::Any);
}

/// `prefer-standby` goes through the hosts twice, a standby wanted first; every other value once.
#[test]
fn prefer_standby_makes_a_second_pass_accepting_any() {
    assert_eq!(
        SessionAttrs::PreferStandby.passes(),
        &[SessionAttrs::Standby, SessionAttrs::Any]
    );
    for attrs in SessionAttrs::ALL {
        if attrs != SessionAttrs::PreferStandby {
            assert_eq!(attrs.passes(), &[attrs]);
        }
    }
}

/// No startup options of this crate's own (a pooler may refuse or drop them): the connection
/// string's own `options` pass as given.
#[test]
fn startup_options_are_the_connection_strings_own() {
    let settings = resolve_with(
        Some("host=db user=u dbname=d options='-c statement_timeout=5s'"),
        env_of(&[]),
    )
    .expect("valid");
    assert_eq!(
        settings.driver_config("t").get_options(),
        Some("-c statement_timeout=5s")
    );
    let bare = resolve_with(Some("host=db user=u dbname=d"), env_of(&[])).expect("valid");
    assert_eq!(bare.driver_config("t").get_options(), None);
}

/// Every `PG*` variable the settings read is one of those that count as a setting given.
#[test]
fn every_pg_variable_read_is_listed() {
    let sources = [
        include_str!("settings.rs"),
        include_str!("parse.rs"),
        include_str!("open.rs"),
        include_str!("service.rs"),
    ];
    for source in sources {
        for (at, _) in source.match_indices("\"PG") {
            let name: String = source[at + 1..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                .collect();
            assert!(
                LIBPQ_VARIABLES.contains(&name.as_str()),
                "{name} is read but not listed"
            );
        }
    }
}

/// Every socket gets keepalives with a count and a user timeout, unless the connection string
/// names its own.
#[test]
fn sockets_are_bounded_unless_the_settings_say_otherwise() {
    let config = resolve_with(Some("host=db user=u dbname=d"), env_of(&[]))
        .expect("valid")
        .driver_config("t");
    assert!(config.get_keepalives());
    assert_eq!(config.get_keepalives_idle(), KEEPALIVES_IDLE);
    assert_eq!(config.get_keepalives_interval(), Some(KEEPALIVES_INTERVAL));
    assert_eq!(config.get_keepalives_retries(), Some(KEEPALIVES_COUNT));
    assert_eq!(config.get_tcp_user_timeout(), Some(&TCP_USER_TIMEOUT));

    let given = resolve_with(
        Some(
            "host=db user=u dbname=d keepalives_idle=60 keepalives_interval=7 \
             keepalives_retries=9 tcp_user_timeout=4",
        ),
        env_of(&[]),
    )
    .expect("valid")
    .driver_config("t");
    assert_eq!(given.get_keepalives_idle(), Duration::from_secs(60));
    assert_eq!(
        given.get_keepalives_interval(),
        Some(Duration::from_secs(7))
    );
    assert_eq!(given.get_keepalives_retries(), Some(9));
    assert_eq!(given.get_tcp_user_timeout(), Some(&Duration::from_secs(4)));
}

/// A directory of its own for a test's files, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("pgconn-service-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write");
        path.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn env_owned(pairs: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<String> {
    move |name| {
        pairs
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
    }
}

/// `service=` and `PGSERVICE` read the service file as libpq does: the string's own settings
/// first, then the service's, then the `PG*` variables.
#[test]
fn a_service_fills_what_the_string_leaves_out_before_the_environment() {
    let scratch = Scratch::new();
    let file = scratch.file(
        "services.conf",
        "# ours\n[other]\nhost=elsewhere\n\n[prod]\nhost=db.example\nport=6543\n\
         user=svc\ndbname=svcdb\nsslmode=require\noptions=-c work_mem=64MB\n",
    );
    let settings = resolve_with(
        Some("service=prod dbname=mine"),
        env_owned(vec![
            ("PGSERVICEFILE", file.clone()),
            ("PGUSER", "fromenv".into()),
            ("PGSYSCONFDIR", scratch.0.display().to_string()),
        ]),
    )
    .expect("valid");
    assert_eq!(settings.describe(), "svc@db.example:6543/mine");
    assert_eq!(settings.ssl_mode(), SslMode::Require);
    let config = settings.driver_config("t");
    assert!(
        config
            .get_options()
            .is_some_and(|o| o.ends_with("-c work_mem=64MB")),
        "{:?}",
        config.get_options()
    );

    // PGSERVICE in a URL's stead, and the environment for what the service leaves out.
    let settings = resolve_with(
        None,
        env_owned(vec![
            ("PGSERVICEFILE", file),
            ("PGSERVICE", "other".into()),
            ("PGUSER", "fromenv".into()),
            ("PGSYSCONFDIR", scratch.0.display().to_string()),
        ]),
    )
    .expect("valid");
    assert_eq!(settings.describe(), "fromenv@elsewhere:5432/fromenv");
    assert_eq!(settings.source(), Source::LibpqEnvironment);
}

/// A URL that names a host but no port, with a service (`service=` in the URL, or PGSERVICE),
/// takes the service file's port before PGPORT, as libpq does (the string, then the service, then
/// the environment): psql goes where the service says, and so does qlsched, never past a pooler
/// the service names to the server behind it. A port in the URL still wins over both.
#[test]
fn a_url_host_takes_the_service_files_port_before_pgport() {
    let scratch = Scratch::new();
    let file = scratch.file(
        "services.conf",
        "[pooled]
port=6432
",
    );
    let env = |service_in_env: bool| {
        let mut pairs = vec![
            ("PGSERVICEFILE", file.clone()),
            ("PGPORT", "5999".to_owned()),
            ("PGSYSCONFDIR", scratch.0.display().to_string()),
        ];
        if service_in_env {
            pairs.push(("PGSERVICE", "pooled".to_owned()));
        }
        env_owned(pairs)
    };
    for (url, service_in_env, expected) in [
        (
            "postgres://ops@db.example/db?service=pooled",
            false,
            "ops@db.example:6432/db",
        ),
        (
            "postgres://ops@db.example/db",
            true,
            "ops@db.example:6432/db",
        ),
        (
            "postgres://ops@db.example:7000/db",
            true,
            "ops@db.example:7000/db",
        ),
        (
            "postgres://ops@db.example/db",
            false,
            "ops@db.example:5999/db",
        ),
    ] {
        let settings = resolve_with(Some(url), env(service_in_env)).expect(url);
        assert_eq!(
            settings.describe(),
            expected,
            "{url}, PGSERVICE: {service_in_env}"
        );
    }
    let bad = scratch.file("bad.conf", "[pooled]\nport=sixty\n");
    let error = resolve_with(
        Some("postgres://ops@db.example/db"),
        env_owned(vec![
            ("PGSERVICEFILE", bad),
            ("PGSERVICE", "pooled".to_owned()),
        ]),
    )
    .expect_err("a bad port in the service file");
    assert!(
        matches!(&error, Error::Config(message) if message.contains("service file")),
        "{error:?}"
    );
}

/// The user's file is the whole answer when it has the service; the system's
/// (`PGSYSCONFDIR/pg_service.conf`) is read when it does not; a service in neither is a
/// configuration error, as is a keyword not read from a service file.
#[test]
fn the_system_service_file_is_read_when_the_users_has_no_such_service() {
    let scratch = Scratch::new();
    let user = scratch.file("user.conf", "[both]\nhost=mine\n");
    scratch.file(
        "pg_service.conf",
        "[both]\nhost=system\n[sys]\nhost=sysonly\n",
    );
    let env = |service: &'static str| {
        env_owned(vec![
            ("PGSERVICEFILE", user.clone()),
            ("PGSYSCONFDIR", scratch.0.display().to_string()),
            ("PGSERVICE", service.into()),
            ("PGUSER", "u".into()),
            ("PGDATABASE", "d".into()),
        ])
    };
    let describe = |service| resolve_with(None, env(service)).map(|s| s.describe());
    assert_eq!(describe("both").expect("valid"), "u@mine:5432/d");
    assert_eq!(describe("sys").expect("valid"), "u@sysonly:5432/d");
    let error = describe("none").expect_err("no such service");
    assert!(
        matches!(&error, Error::Config(m) if m.contains("definition of service \"none\" not found")),
        "{error}"
    );
    let odd = scratch.file("odd.conf", "[odd]\nfrobnicate=1\n");
    let error = resolve_with(Some("service=odd"), env_owned(vec![("PGSERVICEFILE", odd)]))
        .expect_err("unknown keyword");
    assert!(
        matches!(&error, Error::Config(m) if m.contains("\"frobnicate\"")),
        "{error}"
    );
}

/// `PGOPTIONS` is the `options` a string does not give, as libpq (and psql) read it; a string's
/// own `options` win. None of this crate's own is added.
#[test]
fn pgoptions_gives_the_options_a_string_leaves_out() {
    let options = |flag: &str| {
        resolve_with(
            Some(flag),
            env_owned(vec![("PGOPTIONS", "-c statement_timeout=5s".into())]),
        )
        .expect("valid")
        .driver_config("t")
        .get_options()
        .map(str::to_owned)
    };
    assert_eq!(
        options("host=db user=u dbname=d"),
        Some("-c statement_timeout=5s".to_owned())
    );
    assert_eq!(
        options("host=db user=u dbname=d options='-c lock_timeout=1s'"),
        Some("-c lock_timeout=1s".to_owned())
    );
}

/// The modules that read the settings form layers, so that each can be read (and changed) without
/// the ones above it: `parse` uses none of its siblings, `service` only `parse`, and `settings`
/// both; none imports a module that imports it back.
#[test]
fn the_settings_modules_import_no_circle() {
    for (name, text, above) in [
        (
            "parse",
            include_str!("parse.rs"),
            &["crate::settings", "crate::service", "crate::open"][..],
        ),
        (
            "service",
            include_str!("service.rs"),
            &["crate::settings", "crate::open"][..],
        ),
    ] {
        for module in above {
            assert!(!text.contains(module), "{name} uses {module}");
        }
    }
}
