//! `qlsched demo`: the product doing its main job, from nothing, in one command. It (re)creates
//! the database `qlsched_demo` (or `--database`) on the server the connection settings name,
//! migrates it,
//! publishes `examples/demo.json`, runs three replicas in this process (each with its own pool),
//! and shows them at work until `q` or Ctrl-C (or `--duration`): in `top` on a terminal, as one
//! line per admission otherwise. Then it checks the invariants of what was admitted.
//!
//! With `--embedded`, or unasked when no connection setting was given and nothing answers at
//! libpq's default, the server is a throw-away one ([`crate::embedded`]) that the demo
//! stops and deletes however it ends: a machine with PostgreSQL installed but not running still
//! gets its first look.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use tokio::sync::mpsc;

use super::args::{Access, duration_arg};
use super::output::print;
use super::signals::Shutdown;
use super::{CliError, Global};
use crate::bench::replicas::{InProcessReplicas, stop_all};
use crate::bench::scratch::{Recreated, check_database_name, recreate_marked_database};
use crate::coordinator::AdmittedRun;
use crate::core::CoordinatorConfig;
use crate::core::TriggerName;
use crate::core::manifest::parse_manifest;
use crate::core::time::clock;
use crate::embedded::{BIN_ENV, EmbeddedError, EmbeddedServer};
use crate::lifecycle::{Lifecycle, RoundEvent};
use crate::store::connect::SettingsSource;
use crate::store::invariants::invariant_counts;
use crate::store::migrate::migrate_up;
use crate::store::publish::publish;
use crate::store::{ConnectionSettings, SchemaName, StoreError};

/// The demo's database; recreated on every start.
pub const DEMO_DATABASE: &str = "qlsched_demo";

/// The comment every demo database carries. The demo drops and recreates its database, so it
/// refuses a name that holds any other database: `--database` must never be a way to lose one.
pub const DEMO_MARK: &str = "made by qlsched demo; the next demo drops and recreates it";

/// The sample manifest, also readable (and publishable) at examples/demo.json.
pub const DEMO_MANIFEST: &str = include_str!("../../examples/demo.json");

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Stop by itself after this long (default: run until Ctrl-C).
    #[arg(long, value_parser = duration_arg, allow_hyphen_values = true)]
    pub duration: Option<Duration>,

    /// The database to (re)create for the demo, on the server the connection settings name. An
    /// existing database is dropped only if an earlier demo made it (or it is `qlsched_demo`).
    #[arg(long, default_value = DEMO_DATABASE, value_parser = database_name_arg)]
    pub database: String,

    /// Number of in-process replicas.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub replicas: u8,

    /// Run on a throw-away PostgreSQL of its own: a cluster initialised in a temporary directory
    /// (trust authentication, listening only on a unix socket there), stopped and deleted when the
    /// demo ends, by Ctrl-C, SIGTERM or a panic too. As root the server runs as the system user
    /// `postgres`. Without any connection setting, the demo does the same unasked when nothing
    /// answers at libpq's default.
    #[arg(long)]
    pub embedded: bool,

    /// Directory holding initdb and pg_ctl (PostgreSQL 15 or newer) for the throw-away server
    /// [default: the first of PATH, /usr/lib/postgresql/<major>/bin and the other usual install
    /// locations that has both, newest major first].
    #[arg(long, env = BIN_ENV, value_name = "DIR")]
    pub postgres_bin: Option<PathBuf>,
}

pub async fn run(args: DemoArgs, global: &Global) -> Result<(), CliError> {
    if global.format == super::OutputFormat::Json {
        return Err(CliError::Usage(
            "demo shows itself in `top` or as lines and has no JSON output; for a figure a script \
             can read, use `qlsched bench -o json`"
                .into(),
        ));
    }
    if args.embedded && global.connection.database_url.is_some() {
        return Err(CliError::Usage(
            "--embedded runs the demo on a throw-away server of its own: drop --database-url, or \
             drop --embedded to use that server"
                .into(),
        ));
    }
    // Caught before any server or database is made: a signal at any point lets the demo stop what
    // it started and delete what it made, instead of ending the process by its default action.
    let mut shutdown = Shutdown::install()?;
    let (server, embedded) = if args.embedded {
        match start_embedded(args.postgres_bin.clone(), &mut shutdown).await? {
            Some(embedded) => (embedded.settings(), Some(embedded)),
            None => return Ok(()),
        }
    } else {
        let server = global.connection.settings(Access::Write)?;
        server.require_session("demo", "it creates its own database and migrates it")?;
        match unanswered_default(&server).await {
            None => (server, None),
            Some(reason) => {
                eprintln!(
                    "qlsched demo: nothing answers at {reason}, and no connection setting was \
                     given; starting a throw-away PostgreSQL instead (as --embedded does)"
                );
                match start_embedded(args.postgres_bin.clone(), &mut shutdown).await {
                    Ok(Some(embedded)) => (embedded.settings(), Some(embedded)),
                    Ok(None) => return Ok(()),
                    // The first failure is what the person asked about; 69 as before the fallback.
                    Err(error) => {
                        return Err(StoreError::Unavailable(format!(
                            "{reason}; and no throw-away server either: {error}"
                        ))
                        .into());
                    }
                }
            }
        }
    };
    // A panic in the demo unwinds past `embedded`, whose Drop stops and deletes the server.
    let shown = show(&args, global, &server, embedded.is_none(), &mut shutdown).await;
    let Some(embedded) = embedded else {
        return shown;
    };
    // pg_ctl waits for the server to go: blocking, so off the runtime's workers.
    let stopped = tokio::task::spawn_blocking(move || embedded.stop())
        .await
        .unwrap_or_else(|joined| Err(join_failure("stop", &joined)));
    match (shown, stopped) {
        (shown, Ok(())) => shown,
        (Ok(()), Err(error)) => Err(error.into()),
        (Err(error), Err(stop)) => {
            eprintln!("qlsched: {stop}");
            Err(error)
        }
    }
}

/// The reason, when nothing was given and nothing answers at libpq's defaults: the one case the
/// demo may use a throw-away server unasked. Settings someone gave are never second-guessed.
async fn unanswered_default(server: &ConnectionSettings) -> Option<String> {
    if server.source() != SettingsSource::Defaults {
        return None;
    }
    server.answers().await.err()
}

/// Starts the throw-away server, off the runtime's workers (initdb takes a second). `None` when a
/// signal came meanwhile: initdb and pg_ctl are not cut off halfway, the start is let finish and
/// then undone, so nothing is left behind.
async fn start_embedded(
    bin_dir: Option<PathBuf>,
    shutdown: &mut Shutdown,
) -> Result<Option<EmbeddedServer>, EmbeddedError> {
    let mut starting =
        tokio::task::spawn_blocking(move || EmbeddedServer::start(bin_dir.as_deref()));
    let signal = tokio::select! {
        started = &mut starting => {
            let server = started.unwrap_or_else(|joined| Err(join_failure("start", &joined)))?;
            eprintln!(
                "qlsched demo: started a throw-away PostgreSQL {} ({}) in {:.1} s{}, in {}, \
                 listening only on a socket there; it is stopped and deleted when the demo ends",
                server.binaries().version,
                server.binaries().dir.display(),
                server.start_time().as_secs_f64(),
                server
                    .run_as()
                    .map_or_else(String::new, |user| format!(" as user {user}")),
                server.dir().display(),
            );
            return Ok(Some(server));
        }
        signal = shutdown.recv() => signal,
    };
    if let Ok(Ok(server)) = starting.await {
        tokio::task::spawn_blocking(move || server.stop())
            .await
            .unwrap_or_else(|joined| Err(join_failure("stop", &joined)))?;
    }
    eprintln!(
        "qlsched demo: stopped by {signal} while the throw-away server started; nothing of it is left"
    );
    Ok(None)
}

fn join_failure(step: &'static str, joined: &tokio::task::JoinError) -> EmbeddedError {
    EmbeddedError::Failed {
        step,
        detail: joined.to_string(),
    }
}

/// The demo proper, on `server`: prepare its database, run the replicas, show them, check.
async fn show(
    args: &DemoArgs,
    global: &Global,
    server: &ConnectionSettings,
    kept: bool,
    shutdown: &mut Shutdown,
) -> Result<(), CliError> {
    let schema = &global.connection.schema;
    let settings = server.with_dbname(args.database.as_str());
    let prepared = tokio::select! {
        prepared = prepare(server, &settings, schema, args.replicas) => prepared?,
        signal = shutdown.recv() => {
            eprintln!("qlsched demo: stopped by {signal} while preparing; no replica was started");
            return Ok(());
        }
    };
    let Prepared { admin, replicas } = prepared;
    let config = CoordinatorConfig {
        lease: Duration::from_secs(5),
        ..CoordinatorConfig::default()
    };
    // On a terminal the demo shows itself in `top`; piped, it prints lines.
    if std::io::stdout().is_terminal() {
        let lifecycles = replicas.start(&config, super::BUILD, None).await?;
        let started = Instant::now();
        let watched = watch_in_top(&settings, global, args.duration, shutdown).await;
        stop_all(lifecycles).await;
        say_kept(kept, &settings, args.database.as_str());
        report_invariants(&admin, started, "").await?;
        return watched;
    }
    let (events, received) = mpsc::unbounded_channel();
    let lifecycles = replicas.start(&config, super::BUILD, Some(&events)).await?;
    drop(events);
    let started = Instant::now();
    let per_owner = print_admissions(lifecycles, received, args.duration, shutdown).await?;
    say_kept(kept, &settings, args.database.as_str());
    report_invariants(&admin, started, &per_owner).await
}

/// Says that the demo's database stays (on a server the demo did not start): a reader may want
/// to look at it, or may not want it there at all.
fn say_kept(kept: bool, settings: &ConnectionSettings, name: &str) {
    if kept {
        eprintln!(
            "qlsched demo: the database {name} is kept for a look (`qlsched -D '{}' inspect`); \
             the next demo drops and recreates it, `DROP DATABASE {name}` removes it",
            settings.conninfo()
        );
    }
}

/// `top` on the demo's database until `q`, a signal or the duration.
async fn watch_in_top(
    settings: &ConnectionSettings,
    global: &Global,
    duration: Option<Duration>,
    shutdown: &mut Shutdown,
) -> Result<(), CliError> {
    super::top::open(
        settings,
        global,
        false,
        crate::tui::state::REFRESH_DEFAULT,
        crate::tui::state::all_columns(),
        async move {
            match duration {
                Some(duration) => tokio::select! {
                    () = tokio::time::sleep(duration) => {}
                    _ = shutdown.recv() => {}
                },
                None => {
                    shutdown.recv().await;
                }
            }
        },
    )
    .await
}

/// One line per admission until a signal or the duration; then stops the replicas and prints
/// what their drained rounds admitted too. Returns the count per owner, as ` (owner n, ...)`.
async fn print_admissions(
    lifecycles: Vec<Lifecycle>,
    mut received: mpsc::UnboundedReceiver<RoundEvent>,
    duration: Option<Duration>,
    shutdown: &mut Shutdown,
) -> Result<String, CliError> {
    print("time (UTC)    trigger                  scheduled for (UTC)  by      run")?;
    let mut per_owner: BTreeMap<String, u64> = BTreeMap::new();
    let mut show = |event: RoundEvent| -> Result<(), CliError> {
        match event {
            RoundEvent::Finished { report, .. } => {
                for admitted in &report.admitted {
                    *per_owner.entry(report.owner.clone()).or_default() += 1;
                    print(&admission_line(&report.owner, admitted))?;
                }
            }
            RoundEvent::Failed { error, .. } => eprintln!("qlsched demo: a round failed: {error}"),
        }
        Ok(())
    };
    let deadline = tokio::time::sleep(duration.unwrap_or(Duration::from_secs(u64::from(u32::MAX))));
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = &mut deadline => break,
            _ = shutdown.recv() => break,
            Some(event) = received.recv() => show(event)?,
        }
    }
    stop_all(lifecycles).await;
    // Rounds drained by the stop may have admitted more; show them too.
    while let Ok(event) = received.try_recv() {
        show(event)?;
    }
    let owners: Vec<String> = per_owner
        .iter()
        .map(|(owner, n)| format!("{owner} {n}"))
        .collect();
    Ok(format!(" ({})", owners.join(", ")))
}

/// What the demo runs on: its admin connection, and its replicas' pools, opened.
struct Prepared {
    admin: tokio_postgres::Client,
    replicas: InProcessReplicas,
}

/// Recreates the demo's database on `server`, migrates it, publishes the sample manifest and
/// opens each replica's pool. Nothing here has to be undone when it is cut short by a signal.
async fn prepare(
    server: &ConnectionSettings,
    settings: &ConnectionSettings,
    schema: &SchemaName,
    replicas: u8,
) -> Result<Prepared, CliError> {
    let database = settings.dbname();
    recreate_demo_database(server, database).await?;
    eprintln!(
        "qlsched demo: recreated database {database} on {}",
        server.describe()
    );
    let mut admin = settings.connect(schema, "qlsched demo").await?;
    migrate_up(&mut admin, schema).await?;
    let manifest = parse_manifest(DEMO_MANIFEST)?;
    let published = publish(&mut admin, schema, &manifest, false).await?;
    eprintln!(
        "qlsched demo: published {} definitions from examples/demo.json; starting {replicas} \
         replicas",
        published.items.len(),
    );
    eprintln!(
        "qlsched demo: watch with `qlsched -D '{}' inspect` in another terminal; Ctrl-C to stop",
        settings.conninfo()
    );
    let owners = (0..replicas).map(|index| format!("demo-{}", char::from(b'a' + index)));
    let replicas = InProcessReplicas::open(settings, schema, "qlsched demo", owners).await?;
    Ok(Prepared { admin, replicas })
}

/// The closing line: what was admitted, and whether every promise held.
async fn report_invariants(
    admin: &tokio_postgres::Client,
    started: Instant,
    per_owner: &str,
) -> Result<(), CliError> {
    let counts = invariant_counts(admin, crate::store::invariants::WHOLE_HISTORY_MS).await?;
    eprintln!(
        "qlsched demo: {} runs admitted in {:.0} s{per_owner}; duplicates {}, runs without one \
         attempt {}, without two events {}, claims left {}",
        counts.runs,
        started.elapsed().as_secs_f64(),
        counts.duplicate_occurrences,
        counts.runs_without_one_attempt,
        counts.runs_without_two_events,
        counts.claims_held
    );
    Ok(())
}

fn admission_line(owner: &str, admitted: &AdmittedRun) -> String {
    format!(
        "{}  {:<24} {}         {:<7} {}{}",
        clock(chrono::Utc::now().timestamp_millis()),
        TriggerName::new(&admitted.project_id, &admitted.trigger_id).to_string(),
        clock(admitted.run.scheduled_for_ms),
        owner,
        admitted.run.run_id,
        if admitted.misfired {
            "  (misfire: fired once)"
        } else {
            ""
        },
    )
}

/// Drops and recreates `name` for the demo, and marks it as the demo's. Refuses (exit 2, nothing
/// dropped) a database that exists without the mark, except the default name, which demos made
/// before they marked their databases.
async fn recreate_demo_database(server: &ConnectionSettings, name: &str) -> Result<(), CliError> {
    match recreate_marked_database(server, name, DEMO_MARK, name == DEMO_DATABASE).await? {
        Recreated::Done => Ok(()),
        Recreated::Refused { .. } => Err(CliError::Usage(format!(
            "database {name} exists and was not made by `qlsched demo`; the demo drops and \
             recreates its database, so name another with --database (or drop {name} yourself)"
        ))),
    }
}

/// `--database`: a plain identifier, checked before anything is touched.
fn database_name_arg(name: &str) -> Result<String, String> {
    check_database_name(name)
        .map(|()| name.to_owned())
        .map_err(|_| {
            "use 1 to 63 lower-case letters, digits and underscores, starting with a letter or \
             underscore, not `pg_`"
                .to_owned()
        })
}
