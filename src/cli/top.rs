//! `qlsched top`: the live lease dashboard on this terminal. Everything it shows comes
//! through the operator read models, as `inspect` does; it needs a terminal on stdout and says
//! where to go for scripts when there is none.

use std::io::IsTerminal;
use std::time::Duration;

use clap::Args;

use super::args::{Access, duration_arg};
use super::signals::Shutdown;
use super::{CliError, Global};
use crate::store::{ConnectionSettings, Store};
use crate::tui::{self, TopOptions};

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Disable `e`, `E` (expire) and `p` (pause, resume): look, never touch. For people who
    /// must not write, whatever their login may do.
    #[arg(long = "read-only", visible_alias = "readonly")]
    pub readonly: bool,

    /// Time between refreshes, 250ms to 10s (`+` and `-` change it live).
    #[arg(long, default_value = "1s", value_parser = refresh_arg, allow_hyphen_values = true)]
    pub refresh: Duration,

    /// The schedules table's columns to show, comma-separated, of: mark (the `!` of an expired
    /// claim), trigger (always shown), state, next, lag, owner, lease, c.v, s.v, mis. Default:
    /// all (`c` chooses them live).
    #[arg(long, value_delimiter = ',', value_name = "COLUMN,...", value_parser = column_arg)]
    pub columns: Option<Vec<String>>,
}

/// One name of `--columns`, refused (exit 2, before connecting) unless it is a column.
fn column_arg(text: &str) -> Result<String, String> {
    tui::state::parse_columns(&[text.to_owned()]).map(|_| text.trim().to_owned())
}

/// The keys, for `top --help` (the `?` overlay and the man page list the same).
pub fn keys_help() -> String {
    let keys: Vec<String> = tui::input::KEYS
        .iter()
        .map(|(keys, what)| format!("  {keys:<16}{what}"))
        .collect();
    format!("Keys:\n{}", keys.join("\n"))
}

fn refresh_arg(text: &str) -> Result<Duration, String> {
    let refresh = duration_arg(text)?;
    if (tui::state::REFRESH_MIN..=tui::state::REFRESH_MAX).contains(&refresh) {
        Ok(refresh)
    } else {
        Err("the refresh rate must be between 250ms and 10s".to_owned())
    }
}

pub async fn run(args: TopArgs, global: &Global) -> Result<(), CliError> {
    require_terminal()?;
    let settings = global.connection.settings(Access::Read)?;
    // Caught before the terminal goes raw, so that a SIGTERM always restores it.
    let mut shutdown = Shutdown::install()?;
    let columns = match &args.columns {
        Some(names) => tui::state::parse_columns(names).map_err(CliError::Usage)?,
        None => tui::state::all_columns(),
    };
    open(
        &settings,
        global,
        args.readonly,
        args.refresh,
        columns,
        async move {
            shutdown.recv().await;
        },
    )
    .await
}

/// Refuses (exit 2) when stdout is not a terminal: a dashboard cannot be piped.
pub fn require_terminal() -> Result<(), CliError> {
    if std::io::stdout().is_terminal() {
        Ok(())
    } else {
        Err(CliError::Usage(
            "top needs a terminal on stdout; for scripts use `qlsched inspect` (with -o json)"
                .to_owned(),
        ))
    }
}

/// Opens the dashboard on `settings` until quit or `shutdown`; also how `demo` shows itself.
pub async fn open(
    settings: &ConnectionSettings,
    global: &Global,
    readonly: bool,
    refresh: Duration,
    columns: Vec<bool>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), CliError> {
    // One connection refreshes, one is free for an expiry while a refresh is in flight.
    let store = Store::open(settings, &global.connection.schema, "qlsched top", 2).await?;
    store.check_not_behind().await?;
    let options = TopOptions {
        database: settings.describe(),
        readonly,
        refresh,
        columns,
        color: global.color,
        actor: super::identity::operator_name(),
    };
    tui::run(store, options, shutdown).await?;
    Ok(())
}
