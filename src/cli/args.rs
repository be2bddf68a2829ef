//! Flag groups shared by many subcommands (after sqlx-cli): connection, output format,
//! confirmation. One definition each, flattened where needed.

use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::core::duration::parse_duration;
use crate::store::connect::SessionAttrs;
use crate::store::{ConnectionSettings, Pooler, SchemaName, StoreError};

/// The help heading of the options every subcommand takes, so that a subcommand's own options
/// are listed apart from them.
pub const GLOBAL: &str = "Global options";

/// Where the database is (docs/DESIGN.md §5.2).
#[derive(Debug, Clone, Args)]
pub struct ConnectionArgs {
    /// PostgreSQL URL or key=value string, with libpq's settings (sslmode, sslrootcert,
    /// sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs:
    /// read-write for commands that write, any for those that read, unless given) [default:
    /// $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq's defaults]. A password in
    /// it is never printed.
    #[arg(
        short = 'D',
        long,
        global = true,
        value_name = "URL",
        hide_env_values = true,
        help_heading = GLOBAL
    )]
    pub database_url: Option<String>,

    /// Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _,
    /// not pg_.
    #[arg(long = "schema", id = "schema", global = true, env = "QLSCHED_SCHEMA",
          default_value = SchemaName::DEFAULT, value_name = "SCHEMA", help_heading = GLOBAL)]
    pub schema_text: String,

    /// The schema named by `--schema` or `QLSCHED_SCHEMA`, checked by [`ConnectionArgs::resolve_schema`].
    #[arg(skip)]
    pub schema: SchemaName,

    /// What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in
    /// transaction mode (PgBouncer's pool_mode), where qlsched keeps nothing on a session and
    /// sends its replica's statements unnamed. migrate, demo and bench connect directly.
    #[arg(long, global = true, env = "QLSCHED_POOLER", value_enum, default_value_t,
          value_name = "MODE", help_heading = GLOBAL)]
    pub pooler: PoolerMode,
}

/// `--pooler`: what sits between qlsched and PostgreSQL ([`Pooler`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum PoolerMode {
    #[default]
    None,
    Session,
    Transaction,
}

impl From<PoolerMode> for Pooler {
    fn from(mode: PoolerMode) -> Self {
        match mode {
            PoolerMode::None => Pooler::None,
            PoolerMode::Session => Pooler::Session,
            PoolerMode::Transaction => Pooler::Transaction,
        }
    }
}

/// What a command does with the database, which decides the `target_session_attrs` it asks
/// for when the settings name none (docs/OPERATIONS.md, "Several hosts"): a writer wants the
/// primary's `read-write` session, a reader takes `any` server, a standby included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Write,
    Read,
}

impl Access {
    /// A writer's access, or a reader's for a dry run, which writes nothing.
    pub fn writing_unless(dry_run: bool) -> Access {
        if dry_run { Access::Read } else { Access::Write }
    }
}

impl ConnectionArgs {
    /// The resolved settings, with `access`'s `target_session_attrs` unless they name one.
    pub fn settings(&self, access: Access) -> Result<ConnectionSettings, StoreError> {
        let attrs = match access {
            Access::Write => SessionAttrs::ReadWrite,
            Access::Read => SessionAttrs::Any,
        };
        Ok(ConnectionSettings::resolve(self.database_url.as_deref())?
            .with_default_session_attrs(attrs)
            .with_pooler(self.pooler.into()))
    }

    /// Checks the schema name where it came from: a bad `--schema` is a usage error (2), a bad
    /// `QLSCHED_SCHEMA` a configuration error (78), each message naming its source.
    pub fn resolve_schema(&mut self, from_env: bool) -> Result<(), super::CliError> {
        match self.schema_text.parse::<SchemaName>() {
            Ok(schema) => {
                self.schema = schema;
                Ok(())
            }
            Err(problem) if from_env => Err(super::CliError::Config(format!(
                "QLSCHED_SCHEMA (from the environment): {problem}"
            ))),
            Err(problem) => Err(super::CliError::Usage(format!("--schema: {problem}"))),
        }
    }
}

/// A claim owner given on the command line (`expire --owner`, `inspect --owner`): 1 to 200
/// characters without control characters, as replicas write them (docs/DESIGN.md §4.9). An
/// empty or malformed owner is a usage error (exit 2), refused before any connection.
pub fn owner_arg(text: &str) -> Result<String, String> {
    crate::core::config::check_owner(text).map_err(|error| error.to_string())?;
    Ok(text.to_owned())
}

/// Tables for people, JSON for scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum OutputFormat {
    #[default]
    Table,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Output format: tables for people, JSON (stable, documented in the man pages) for scripts.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = OutputFormat::Table,
          help_heading = GLOBAL)]
    pub format: OutputFormat,
}

/// Confirmation for destructive actions (docs/DESIGN.md §5.2).
#[derive(Debug, Clone, Args)]
pub struct ConfirmArgs {
    /// Do it without asking (required when stdin is not a terminal).
    #[arg(short = 'y', long)]
    pub yes: bool,

    /// Show what would change and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// A whole number of at least `min` as a clap value parser, with the bound said plainly. The
/// flags that take one accept a leading `-` (`allow_negative_numbers`), so that `--limit -1` is
/// refused for being negative rather than read as an unknown flag.
pub fn at_least(min: i64) -> impl Fn(&str) -> Result<i64, String> + Clone + Send + Sync + 'static {
    move |text: &str| {
        let value: i64 = text.parse().map_err(|_| {
            format!(
                "expected a whole number, got \"{}\"",
                crate::core::text::clean(text)
            )
        })?;
        if value < min {
            return Err(format!("must be {min} or more, got {value}"));
        }
        Ok(value)
    }
}

/// `30s`, `1m`, `500ms`, `1m30s` as a clap value parser. The flags that take one accept a
/// leading `-` (`allow_hyphen_values`), so that `--lease -1s` is refused for what it is.
pub fn duration_arg(text: &str) -> Result<Duration, String> {
    if text.starts_with('-') {
        return Err(format!(
            "{} is negative: a duration is 0 or more, e.g. 500ms, 30s, 1m30s",
            crate::core::text::clean(text)
        ));
    }
    parse_duration(text).map_err(|error| error.to_string())
}

/// When to use colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Colour on stdout: `auto` means stdout is a terminal and `NO_COLOR` is unset or empty.
    pub fn enabled(self) -> bool {
        use std::io::IsTerminal;
        self.enabled_on(std::io::stdout().is_terminal())
    }

    /// Colour for logs on stderr, by the same rule.
    pub fn enabled_for_stderr(self) -> bool {
        use std::io::IsTerminal;
        self.enabled_on(std::io::stderr().is_terminal())
    }

    fn enabled_on(self, terminal: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        }
    }
}

/// A claim fence passed back by a script: `--token UUID --version N`. The version is a flag value
/// (a negative or non-numeric one is a usage error, exit 2); the token is data, checked after
/// parsing so that a malformed UUID is bad input (exit 65), as docs/DESIGN.md §5.4 lists it.
#[derive(Debug, Clone, Args)]
pub struct FenceArgs {
    /// The claim token `qlsched claim` printed (a UUID).
    #[arg(long, value_name = "UUID")]
    pub token: String,

    /// The claim version `qlsched claim` printed with the token.
    #[arg(long = "version", id = "claim_version", value_name = "N", allow_negative_numbers = true,
          value_parser = at_least(0))]
    pub claim_version: i64,
}

impl FenceArgs {
    pub fn fence(&self) -> Result<crate::core::FenceRef, super::CliError> {
        fence(&self.token, self.claim_version)
    }
}

/// A fence from its token text and version; a malformed token is bad input (exit 65).
pub fn fence(token: &str, version: i64) -> Result<crate::core::FenceRef, super::CliError> {
    let token = uuid::Uuid::parse_str(token).map_err(|error| {
        super::CliError::BadInput(format!(
            "invalid claim token \"{}\": {error}",
            crate::core::text::clean(token)
        ))
    })?;
    Ok(crate::core::FenceRef { token, version })
}

impl ConfirmArgs {
    /// Refuses, before anything is touched, a destructive action that nobody confirmed: without
    /// `--yes` or `--dry-run` it needs a terminal to ask on (docs/DESIGN.md §5.2, exit 2).
    pub fn require_confirmable(&self, what: &str) -> Result<(), super::CliError> {
        if self.yes || self.dry_run || super::prompt::interactive() {
            Ok(())
        } else {
            Err(super::CliError::Usage(format!(
                "{what} needs --yes when not run on a terminal (or --dry-run to see what would change)"
            )))
        }
    }
}
