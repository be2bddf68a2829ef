//! What the store adds to libpq's settings: where qlsched looks for them, the schema.

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
    assert_eq!(settings.source(), SettingsSource::Flag);
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
    let settings =
        ConnectionSettings::resolve_with(None, env_of(&[("DATABASE_URL", "postgres://two/b")]))
            .expect("valid");
    assert_eq!(settings.source(), SettingsSource::DatabaseUrl);
}

/// `demo` falls back to a throw-away server only when nothing at all was given.
#[test]
fn nothing_given_is_told_apart_from_the_pg_environment() {
    let source = |env| {
        ConnectionSettings::resolve_with(None, env)
            .expect("valid")
            .source()
    };
    assert_eq!(source(env_of(&[])), SettingsSource::Defaults);
    assert_eq!(
        source(env_of(&[("PGHOST", "h")])),
        SettingsSource::LibpqEnvironment
    );
}

/// A setting refused by libpq's rules is a configuration error (exit 78) here too, naming the
/// place the string came from.
#[test]
fn a_refused_setting_is_a_configuration_error_naming_its_source() {
    let error =
        ConnectionSettings::resolve_with(None, env_of(&[("DATABASE_URL", "postgres://x@h:no/d")]))
            .expect_err("a bad port");
    assert!(
        matches!(&error, StoreError::Config(m) if m.contains("from DATABASE_URL")),
        "{error:?}"
    );
    let error = ConnectionSettings::resolve_with(Some("host=h sslmode=sometimes"), env_of(&[]))
        .expect_err("a bad sslmode");
    assert!(matches!(error, StoreError::Config(_)), "{error:?}");
}

#[test]
fn schema_names_are_plain_identifiers() {
    assert!("qlsched".parse::<SchemaName>().is_ok());
    assert!("ql_2".parse::<SchemaName>().is_ok());
    for bad in ["", "Bad", "a-b", "x;drop", "pg_x", "1abc", &"a".repeat(64)] {
        assert!(bad.parse::<SchemaName>().is_err(), "{bad:?}");
    }
}

/// No startup options of qlsched's own (a pooler may refuse or drop them): the schema and JIT
/// are set once the session opens, unless a transaction-mode pooler is in between, and again by
/// every transaction.
#[test]
fn the_schema_is_set_on_the_session_not_in_startup_options() {
    let settings = ConnectionSettings::resolve_with(Some("host=db user=u dbname=d"), env_of(&[]))
        .expect("valid");
    assert_eq!(settings.driver_config("t").get_options(), None);
    let schema = SchemaName::default();
    assert_eq!(
        schema.session_settings(),
        "SET search_path TO \"qlsched\"; SET jit TO off"
    );
    assert_eq!(
        schema.transaction_settings(),
        "SET LOCAL search_path TO \"qlsched\"; SET LOCAL jit TO off"
    );
    assert_eq!(settings.session_setup(&schema), schema.session_settings());
    let pooled = settings.with_pooler(Pooler::Transaction);
    assert_eq!(pooled.session_setup(&schema), "");
    assert!(pooled.require_session("demo", "why").is_err());
}
