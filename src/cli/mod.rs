//! The command line: clap definitions, one module per subcommand, and the one place an outcome
//! becomes an exit status. Subcommands translate between people and the core and store layers;
//! none writes SQL of its own (docs/DESIGN.md §2).

mod args;
mod backfill;
mod bench;
mod claim;
pub mod contract;
mod cron;
mod demo;
mod error;
mod expire;
mod fire;
mod generate;
mod identity;
mod inspect;
mod manual;
mod migrate;
mod output;
mod pause;
mod prompt;
mod publish;
mod run;
mod signals;
mod top;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use args::{ColorChoice, ConfirmArgs, ConnectionArgs, OutputArgs, OutputFormat};
pub use demo::{DEMO_DATABASE, DEMO_MARK};
pub use error::{CliError, ExitStatus};

/// PostgreSQL row-lease cluster scheduler: exactly-once cron admission across leaderless
/// replicas, and the operator's instrument for it.
#[derive(Debug, Parser)]
#[command(name = "qlsched", version, long_version = LONG_VERSION, about, long_about = None, propagate_version = true)]
#[command(after_long_help = after_help())]
pub struct Cli {
    #[command(flatten)]
    pub connection: ConnectionArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// When to use colour [NO_COLOR is honoured under auto].
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, help_heading = args::GLOBAL)]
    pub color: ColorChoice,

    /// Log format on stderr: text for people, json for a log pipeline (one object per line).
    #[arg(long, global = true, value_enum, env = "QLSCHED_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

/// `qlsched --version`: the version and the commit the binary was built from (build.rs).
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("QLSCHED_COMMIT"),
    ")"
);

/// The same version and commit, handed to the replicas this binary runs: the release they
/// register (`VERSION+COMMIT`) and the labels of `qlsched_build_info`.
pub const BUILD: crate::observe::Build = crate::observe::Build {
    version: env!("CARGO_PKG_VERSION"),
    commit: env!("QLSCHED_COMMIT"),
};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line: timestamp, level, message, target and the event's fields.
    Json,
}

pub(crate) fn after_help() -> String {
    format!(
        "{} With -o json, errors are JSON on stderr.\n\n\
         Logs go to stderr; set QLSCHED_LOG (e.g. debug, or qlsched=trace) to change their level, \
         and --log-format json (QLSCHED_LOG_FORMAT) for one JSON object per line.",
        ExitStatus::help_line()
    )
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or upgrade the schema, show its migrations, or verify checksums and grants.
    Migrate(migrate::MigrateArgs),
    /// Publish projects, tasks and triggers from a JSON manifest.
    Publish(publish::PublishArgs),
    /// Run a scheduler replica until SIGINT or SIGTERM.
    Run(run::RunArgs),
    /// Step through the scheduler by hand: claim a row, see its fence and decision, then admit,
    /// hold or release it.
    Claim(claim::ClaimArgs),
    /// List when a cron expression fires, in its zone and UTC, offline: validated as publish does,
    /// with the occurrences a daylight-saving gap moved or a fold repeats marked.
    Cron(cron::CronArgs),
    /// Read-only views: summary, schedules, claims, runs, a trigger and why it is not firing.
    Inspect(inspect::InspectArgs),
    /// Expire a stuck claim (fenced and audited), or every claim of a dead replica.
    Expire(expire::ExpireArgs),
    /// Admit one manual run of a trigger now (idempotent by --request-id); the cursor stays.
    Fire(fire::FireArgs),
    /// Admit a trigger's past cron occurrences in a window that have no run, exactly once.
    Backfill(backfill::BackfillArgs),
    /// Pause a trigger (or every trigger of a project) at once, apart from the manifest's
    /// enabled: a claim in flight is voided, replicas skip it, publish leaves it paused.
    Pause(pause::PauseArgs),
    /// Resume a paused trigger: what passed meanwhile is one misfire record, the cursor moves to
    /// the first occurrence at or after now.
    Resume(pause::ResumeArgs),
    /// Watch replicas, claims, leases and admissions live in the terminal; expire a stuck
    /// claim, pause or resume a trigger.
    #[command(after_long_help = top::keys_help())]
    Top(top::TopArgs),
    /// Show qlsched at work: a fresh demo database, three replicas, live admissions.
    Demo(demo::DemoArgs),
    /// Measure admission throughput against the database's commit ceiling, in a scratch database.
    Bench(bench::BenchArgs),
    /// Write shell completions and man pages generated from these definitions.
    #[command(hide = true)]
    Generate(generate::GenerateArgs),
}

impl Command {
    /// The subcommand's name, as typed.
    fn name(&self) -> &'static str {
        match self {
            Command::Migrate(_) => "migrate",
            Command::Publish(_) => "publish",
            Command::Run(_) => "run",
            Command::Claim(_) => "claim",
            Command::Cron(_) => "cron",
            Command::Inspect(_) => "inspect",
            Command::Expire(_) => "expire",
            Command::Fire(_) => "fire",
            Command::Backfill(_) => "backfill",
            Command::Pause(_) => "pause",
            Command::Resume(_) => "resume",
            Command::Top(_) => "top",
            Command::Demo(_) => "demo",
            Command::Bench(_) => "bench",
            Command::Generate(_) => "generate",
        }
    }

    /// The group role (docs/DESIGN.md §3.2) a login needs for this command, as the README's
    /// role table lists it, for a refusal to name; `None` where no group role is enough
    /// (`migrate`, `demo` and `bench` create schemas, roles or databases) or none is needed.
    pub fn role(&self) -> Option<&'static str> {
        match self {
            Command::Publish(args) if args.dry_run => Some("qlsched_observer"),
            Command::Claim(args) if args.confirm.dry_run => Some("qlsched_observer"),
            Command::Inspect(_) | Command::Top(_) => Some("qlsched_observer"),
            Command::Run(_) => Some("qlsched_runtime"),
            Command::Publish(_)
            | Command::Claim(_)
            | Command::Expire(_)
            | Command::Fire(_)
            | Command::Backfill(_)
            | Command::Pause(_)
            | Command::Resume(_) => Some("qlsched_admin"),
            Command::Migrate(_)
            | Command::Demo(_)
            | Command::Bench(_)
            | Command::Cron(_)
            | Command::Generate(_) => None,
        }
    }
}

/// Parses the command line, runs the subcommand, and returns its exit status.
pub fn main() -> ExitCode {
    let matches = match Cli::command().try_get_matches() {
        Ok(matches) => matches,
        Err(error) => return usage_error(&error),
    };
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => return usage_error(&error),
    };
    let format = cli.output.format;
    // Where a value came from decides what a bad one is: a flag is a usage error (2), the
    // environment a configuration error (78), and the message names which.
    let from_env = |matches: &clap::ArgMatches, id: &str| {
        matches.value_source(id) == Some(clap::parser::ValueSource::EnvVariable)
    };
    if let Err(error) = cli.connection.resolve_schema(from_env(&matches, "schema")) {
        return report(&error, format);
    }
    if let (Command::Run(args), Some(("run", run))) = (&mut cli.command, matches.subcommand()) {
        args.replica.owner_from_env = from_env(run, "owner");
        args.forget_stale_after_from_env = from_env(run, "forget_stale_after");
        args.retention.from_env = run::RetentionArgs::FLAGS
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| from_env(run, id))
            .collect();
    }
    init_logging(&cli.command, cli.color, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return report(&CliError::Io(error), format),
    };
    let result = runtime.block_on(dispatch(cli));
    // Work still blocked on the network (a host name being resolved on a blocking thread, a
    // cancel request) must not hold the exit: a stop's bound is the command's own.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => report(&error, format),
    }
}

async fn dispatch(cli: Cli) -> Result<(), CliError> {
    let Cli {
        connection,
        output,
        color,
        command,
        log_format: _,
    } = cli;
    let global = Global {
        connection,
        format: output.format,
        color: color.enabled(),
    };
    let (name, role) = (command.name(), command.role());
    let result = match command {
        Command::Migrate(args) => migrate::run(args, &global).await,
        Command::Publish(args) => publish::run(args, &global).await,
        Command::Run(args) => run::run(args, &global).await,
        Command::Top(args) => top::run(args, &global).await,
        Command::Demo(args) => demo::run(args, &global).await,
        Command::Claim(args) => claim::run(args, &global).await,
        Command::Inspect(args) => inspect::run(args, &global).await,
        Command::Cron(args) => cron::run(&args, &global),
        Command::Fire(args) => fire::run(args, &global).await,
        Command::Backfill(args) => backfill::run(args, &global).await,
        Command::Pause(args) => pause::pause(args, &global).await,
        Command::Resume(args) => pause::resume(args, &global).await,
        Command::Expire(args) => expire::run(args, &global).await,
        Command::Bench(args) => bench::run(args, &global).await,
        Command::Generate(args) => generate::run(args),
    };
    result.map_err(|error| match role {
        Some(role) => error.naming_role(name, role),
        None => error,
    })
}

/// Options every subcommand sees.
#[derive(Debug, Clone)]
pub struct Global {
    pub connection: ConnectionArgs,
    pub format: OutputFormat,
    pub color: bool,
}

/// An error on stderr: `qlsched: <message>` on one line, or with `-o json` one JSON object
/// (`error`, `exit_status`, `kind` and the error's own fields, see [`CliError::json`]). Standard
/// output stays as it was: empty, unless a check printed its report there first.
fn report(error: &CliError, format: OutputFormat) -> ExitCode {
    if error.is_broken_pipe() {
        return ExitCode::SUCCESS;
    }
    let message = crate::core::text::clean_message(&error.to_string());
    let status = error.status();
    match format {
        OutputFormat::Json => eprintln!("{}", error.json(&message)),
        // A log pipeline reads every line of stderr as an object, the last one too.
        OutputFormat::Table if LOG_FORMAT.get() == Some(&LogFormat::Json) => {
            let line = serde_json::json!({
                "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                "level": "ERROR",
                "message": message,
                "exit_code": status.code(),
                "target": "qlsched",
            });
            eprintln!("{line}");
        }
        OutputFormat::Table => eprintln!("qlsched: {message}"),
    }
    ExitCode::from(status)
}

/// The log format chosen on the command line, for the error that ends a command.
static LOG_FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// Whether the command line asks for JSON, read from the raw arguments: for the usage errors
/// clap finds before anything is parsed.
fn json_requested() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    args.iter().enumerate().any(|(index, arg)| {
        matches!(arg.as_str(), "-ojson" | "--output=json" | "-o=json")
            || (matches!(arg.as_str(), "-o" | "--output")
                && args.get(index + 1).map(String::as_str) == Some("json"))
    })
}

/// Help and version go to stdout as clap writes them; a usage error becomes one line on stderr
/// like every other error, so that scripts can read it, and exits 2.
fn usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        return match error.print() {
            Ok(()) => ExitCode::from(
                u8::try_from(error.exit_code()).unwrap_or(ExitStatus::Unexpected.code()),
            ),
            // `qlsched --help | head`: a closed stdout ends quietly, as for every command. Help
            // shown for a missing argument is a usage error on stderr and keeps its status.
            Err(failed)
                if failed.kind() == std::io::ErrorKind::BrokenPipe
                    && error.kind() != ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
            {
                ExitCode::SUCCESS
            }
            Err(_) => ExitCode::from(ExitStatus::Unexpected),
        };
    }
    let text = error.render().to_string();
    let message: Vec<&str> = text
        .lines()
        .take_while(|line| !line.starts_with("Usage:") && !line.starts_with("For more information"))
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let message = crate::core::text::clean_message(&message.join(" "));
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    if json_requested() {
        eprintln!("{}", CliError::Usage(message.to_owned()).json(message));
    } else {
        eprintln!("qlsched: {message}");
    }
    ExitCode::from(ExitStatus::Usage)
}

/// Logs go to stderr. Long-running commands log at info, one-shot commands only warnings, unless
/// QLSCHED_LOG says otherwise.
fn init_logging(command: &Command, color: ColorChoice, format: LogFormat) {
    let _ = LOG_FORMAT.set(format);
    use std::io::IsTerminal;
    // The dashboard owns the terminal: a log line on stderr would tear its frame.
    let dashboard = matches!(command, Command::Top(_))
        || (matches!(command, Command::Demo(_)) && std::io::stdout().is_terminal());
    let default = match command {
        _ if dashboard => "off",
        Command::Run(_) | Command::Demo(_) => "info,tokio_postgres=warn",
        _ => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("QLSCHED_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Every field of every log line goes through core::text, as error messages do: an id, owner
    // or database message can then neither write terminal sequences nor run on for kilobytes.
    use tracing_subscriber::field::MakeExt;
    let fields = tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let text = crate::core::text::clean_message(&format!("{value:?}"));
        if field.name() == "message" {
            write!(writer, "{text}")
        } else {
            write!(writer, "{}={text}", field.name())
        }
    })
    .delimited(" ");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .fmt_fields(fields)
            .with_ansi(color.enabled_for_stderr())
            .with_target(false)
            .try_init(),
        // Fields at the top level, next to timestamp, level, message and target; no span lists
        // (qlsched opens no spans of its own).
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_target(true)
            .try_init(),
    };
}

/// The clap command tree, for completions and man pages: without the commit, so that the
/// generated files change with the interface, not with every commit.
pub fn command() -> clap::Command {
    Cli::command().long_version(None::<&str>)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    /// The README's role table names every subcommand a person can type, so a refusal's "the
    /// README's role table lists every command" stays true when a command is added.
    #[test]
    fn the_readme_role_table_lists_every_subcommand() {
        let readme = include_str!("../../README.md");
        let table: Vec<&str> = readme
            .split("| command | group role its login needs |")
            .nth(1)
            .unwrap()
            .lines()
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .collect();
        let named = table.join("\n");
        for command in super::command()
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
        {
            let name = format!("`{}`", command.get_name());
            assert!(
                named.contains(&name),
                "{name} is missing from the README's role table"
            );
        }
    }
}
