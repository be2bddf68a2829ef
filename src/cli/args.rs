//! Flag groups shared by many subcommands (STYLE.md, after sqlx-cli): connection, output format,
//! confirmation. One definition each, flattened where needed.

use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::core::duration::parse_duration;
use crate::store::{ConnectionSettings, SchemaName, StoreError};

/// Where the database is (DESIGN.md section 5).
#[derive(Debug, Clone, Args)]
pub struct ConnectionArgs {
    /// PostgreSQL URL or key=value string [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the
    /// PG* variables, libpq's defaults]. A password in it is never printed.
    #[arg(
        short = 'D',
        long,
        global = true,
        value_name = "URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,

    /// Schema that holds the qlsched tables.
    #[arg(long, global = true, env = "QLSCHED_SCHEMA", default_value = SchemaName::DEFAULT, value_parser = parse_schema)]
    pub schema: SchemaName,
}

impl ConnectionArgs {
    pub fn settings(&self) -> Result<ConnectionSettings, StoreError> {
        ConnectionSettings::resolve(self.database_url.as_deref())
    }
}

fn parse_schema(text: &str) -> Result<SchemaName, String> {
    text.parse()
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
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// Confirmation for destructive actions (DESIGN.md section 5).
#[derive(Debug, Clone, Args)]
pub struct ConfirmArgs {
    /// Do it without asking (required when stdin is not a terminal).
    #[arg(short = 'y', long)]
    pub yes: bool,

    /// Show what would change and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `30s`, `1m`, `500ms`, `1m30s` as a clap value parser.
pub fn duration_arg(text: &str) -> Result<Duration, String> {
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
