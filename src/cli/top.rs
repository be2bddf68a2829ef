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
    open(&settings, global, args.readonly, args.refresh, async move {
        shutdown.recv().await;
    })
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
    shutdown: impl Future<Output = ()>,
) -> Result<(), CliError> {
    // One connection refreshes, one is free for an expiry while a refresh is in flight.
    let store = Store::open(settings, &global.connection.schema, "qlsched top", 2).await?;
    store.check_not_behind().await?;
    let options = TopOptions {
        database: settings.describe(),
        readonly,
        refresh,
        color: global.color,
        actor: super::identity::operator_name(),
    };
    tui::run(store, options, shutdown).await?;
    Ok(())
}
