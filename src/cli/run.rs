//! `qlsched run`: one scheduler replica (docs/DESIGN.md §4.9). Configuration is
//! checked before any connection is opened; then schema readiness, startup recovery, and the
//! lifecycle until SIGINT or SIGTERM, which drains the round in flight and exits 0.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::args::{Access, duration_arg};
use super::signals::Shutdown;
use super::{CliError, Global};
use crate::coordinator::Coordinator;
use crate::core::TriggerName;
use crate::core::duration::format_duration;
use crate::core::{Batch, CoordinatorConfig};
use crate::lifecycle::{Lifecycle, RoundEvent};
use crate::observe::Observer;
use crate::store::migrate::{RUNTIME_ROLE, check_capability, check_not_behind, check_ready};
use crate::store::recovery::recovery_report;
use crate::store::{Begin, Store, StoreError, replicas, run_in_transaction};

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub replica: ReplicaArgs,

    /// Serve /metrics (Prometheus text format), /healthz and /readyz on HOST:PORT over plain
    /// HTTP [default: off]. Bound before the database is opened (exit 78 if it cannot be).
    #[arg(long, env = "QLSCHED_METRICS_ADDR", value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,

    /// Exit 78 at start when the schema is not migrated (no ledger, or migrations pending) instead
    /// of waiting, not ready, until `qlsched migrate` has run.
    #[arg(long, env = "QLSCHED_EXIT_IF_UNMIGRATED")]
    pub exit_if_unmigrated: bool,
}

/// How often a replica waiting for `migrate` looks at the schema again.
const SCHEMA_POLL: Duration = Duration::from_secs(2);

/// How often a replica still waiting for `migrate` says so again.
const SCHEMA_REMINDER: Duration = Duration::from_secs(60);

/// Waits until the schema is one this build can run against, looking every [`SCHEMA_POLL`] on a
/// connection of its own, and saying why once a minute: so that replicas deployed before
/// `migrate` has run come up by themselves once it has, and the order of a deployment does not
/// matter. A schema that is missing or behind is waited for (with `exit_if_unmigrated`, exit 78
/// instead); one that diverges from this build (a changed migration, or one this build does not
/// know) is not something waiting mends: exit 78 at once.
async fn wait_for_schema(
    settings: &crate::store::ConnectionSettings,
    schema: &crate::store::SchemaName,
    application: &str,
    exit_if_unmigrated: bool,
) -> Result<tokio_postgres::Client, CliError> {
    let mut said: Option<std::time::Instant> = None;
    loop {
        let startup = settings.connect(schema, application).await?;
        let checked = run_in_transaction(&startup, schema, Begin::ReadOnly, |client| {
            Box::pin(async move {
                check_not_behind(client, schema).await?;
                // Past this point a schema that is not ready is not one to wait for.
                Ok(check_ready(client, schema).await)
            })
        });
        match checked.await {
            Ok(ready) => {
                ready?;
                if said.is_some() {
                    tracing::info!(%schema, "the schema is migrated: starting");
                }
                return Ok(startup);
            }
            Err(StoreError::SchemaNotReady(problem)) if !exit_if_unmigrated => {
                if said.is_none_or(|at| at.elapsed() >= SCHEMA_REMINDER) {
                    said = Some(std::time::Instant::now());
                    tracing::warn!(%problem,
                        "waiting, not ready, for the schema to be migrated (`qlsched migrate`); \
                         --exit-if-unmigrated exits 78 instead");
                }
            }
            Err(error) => return Err(error.into()),
        }
        drop(startup);
        tokio::time::sleep(SCHEMA_POLL).await;
    }
}

/// A replica's configuration, shared with the demo and the bench.
#[derive(Debug, Clone, Args)]
pub struct ReplicaArgs {
    /// Claim owner written into every lease, 1 to 200 characters [default: HOSTNAME:PID].
    #[arg(long, env = "QLSCHED_OWNER")]
    pub owner: Option<String>,

    /// Whether `owner` came from `QLSCHED_OWNER` (set after parsing): a bad one is then a
    /// configuration error (78), not a usage error.
    #[arg(skip)]
    pub owner_from_env: bool,

    /// Claims per round, pinned (1..=256) [default: adaptive, 16..=256, following the backlog].
    #[arg(long, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..=i64::from(crate::core::MAX_BATCH)))]
    pub batch: Option<u16>,

    /// Lease of each claim, in database time (1s..=1h).
    #[arg(long, default_value = "30s", value_parser = duration_arg, allow_hyphen_values = true)]
    pub lease: Duration,

    /// Time from the start of one round to the start of the next (10ms..=1h).
    #[arg(long, default_value = "1s", value_parser = duration_arg, allow_hyphen_values = true)]
    pub cadence: Duration,

    /// How long a stop waits for the round in flight before releasing its claims (0s..=10m).
    #[arg(long, default_value = "10s", value_parser = duration_arg, allow_hyphen_values = true)]
    pub drain_timeout: Duration,
}

impl ReplicaArgs {
    /// The validated configuration, before any connection: a flag out of bounds is a usage
    /// error (2), an owner from `QLSCHED_OWNER` out of bounds a configuration error (78).
    pub fn config(&self) -> Result<CoordinatorConfig, CliError> {
        let config = CoordinatorConfig {
            owner: self.owner.clone().unwrap_or_else(default_owner),
            batch: self.batch.map_or(Batch::Adaptive, Batch::Pinned),
            lease: self.lease,
            cadence: self.cadence,
            drain_timeout: self.drain_timeout,
        };
        if let Err(error) = crate::core::config::check_owner(&config.owner) {
            return Err(if self.owner_from_env {
                CliError::Config(format!("QLSCHED_OWNER (from the environment): {error}"))
            } else {
                flag_value(&error)
            });
        }
        config.validate().map_err(|error| flag_value(&error))?;
        Ok(config)
    }
}

/// A flag value the core's bounds refuse: a usage error (exit 2) naming the flag, since the
/// rule is that whatever the command line gives is refused as usage before anything runs.
pub fn flag_value(error: &impl std::fmt::Display) -> CliError {
    let text = error.to_string();
    // The core names fields as in the design (drain_timeout); people type the flag.
    let text = match text.split_once(' ') {
        Some((field, rest)) if !field.contains(':') => {
            format!("--{} {rest}", field.replace('_', "-"))
        }
        _ => text,
    };
    CliError::Usage(text)
}

/// `hostname:pid`: unique per live process, and readable in `inspect claims`.
pub fn default_owner() -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    format!("{host}:{}", std::process::id())
}

pub async fn run(args: RunArgs, global: &Global) -> Result<(), CliError> {
    let config = args.replica.config()?;
    let settings = global.connection.settings(Access::Write)?;
    let schema = &global.connection.schema;
    // Caught from here on: a SIGTERM while the replica connects or runs its recovery report ends
    // the start cleanly (nothing is claimed before the lifecycle starts) instead of killing the
    // process by the signal's default action.
    let mut shutdown = Shutdown::install()?;
    // Bound first, so that probes answer ("starting") while the replica connects, and a busy or
    // invalid address fails the start before anything is opened.
    let listener = match &args.metrics_addr {
        Some(addr) => Some(crate::observe::http::bind(addr).await.map_err(|error| {
            StoreError::Config(format!("--metrics-addr {addr}: cannot listen: {error}"))
        })?),
        None => None,
    };
    let mut observer = None;
    let mut server = None;
    if let Some(listener) = listener {
        let watcher = Observer::new(&config.owner, config.lease, config.cadence);
        tracing::info!(address = %listener.local_addr()?, "serving /metrics, /healthz and /readyz");
        server = Some(crate::observe::http::serve(listener, watcher.clone()));
        observer = Some(watcher);
    }
    let start = async {
        let store = Store::open_replica(
            &settings,
            schema,
            &format!("qlsched run {}", config.owner),
            crate::lifecycle::REPLICA_POOL_SIZE,
        )
        .await?;
        // The startup checks and recovery's report on a connection of their own, each in a
        // transaction of its own.
        let startup = wait_for_schema(
            &settings,
            schema,
            &format!("qlsched run {} startup", config.owner),
            args.exit_if_unmigrated,
        )
        .await?;
        run_in_transaction(&startup, schema, Begin::ReadOnly, |client| {
            Box::pin(check_capability(client, schema, RUNTIME_ROLE))
        })
        .await?;
        log_recovery(&startup, schema).await?;
        // A server that never vacuums the schedule table slows every claim minute over minute:
        // said once here, since no replica may vacuum in its place (`store::upkeep`).
        let upkeep = run_in_transaction(&startup, schema, Begin::ReadOnly, |client| {
            Box::pin(crate::store::upkeep::schedule_upkeep(client))
        })
        .await;
        match upkeep {
            Ok(upkeep) => {
                if let Some(warning) = upkeep.warning() {
                    tracing::warn!("{warning}");
                }
            }
            Err(error) => tracing::warn!(%error, "could not read the schedule table's upkeep"),
        }
        drop(startup);
        crate::lifecycle::register(&store, &config).await?;
        // The probes' and gauges' pool of one connection, so that a scrape never competes with
        // a round for a connection.
        let probes = match observer {
            Some(_) => Some(
                Store::open(
                    &settings,
                    schema,
                    &format!("qlsched run {} metrics", config.owner),
                    1,
                )
                .await?,
            ),
            None => None,
        };
        Ok::<_, CliError>((store, probes))
    };
    let (store, probes) = tokio::select! {
        store = start => store?,
        signal = shutdown.recv() => {
            tracing::info!(signal, "stopped while starting: nothing was claimed");
            return Ok(());
        }
    };
    tracing::info!(
        owner = %config.owner, batch = %config.batch, lease = %format_duration(config.lease),
        cadence = %format_duration(config.cadence), database = %settings.describe(), %schema,
        "replica started"
    );

    let coordinator = Arc::new(Coordinator::new(store, config));
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let store = coordinator.store().clone();
    if let (Some(observer), Some(probes)) = (&observer, probes) {
        observer.watch(coordinator.clone(), probes);
    }
    let lifecycle = Lifecycle::start(coordinator, Some(events));
    let mut totals = Totals::default();
    let mut summary = tokio::time::interval(Duration::from_secs(60));
    summary.tick().await;
    // The control loop never awaits the database: housekeeping runs as a task of its own,
    // bounded by HOUSEKEEPING_TIMEOUT, so a signal is taken at once whatever the server does.
    let mut housekeeping: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        tokio::select! {
            signal = shutdown.recv() => {
                tracing::info!(signal, "stopping: draining the round in flight");
                break;
            }
            Some(event) = received.recv() => {
                if let Some(observer) = &observer {
                    observer.record(&event);
                }
                totals.add(&event);
            }
            _ = summary.tick() => {
                totals.log_and_reset();
                if housekeeping.as_ref().is_none_or(tokio::task::JoinHandle::is_finished) {
                    housekeeping = Some(tokio::spawn(housekeep(store.clone())));
                }
            }
        }
    }
    if let Some(task) = housekeeping {
        task.abort();
    }
    let stop = lifecycle.stop_registered().await;
    // The round the stop drained reported after the loop above stopped listening: count it, or
    // the last summary leaves out what that round admitted.
    while let Ok(event) = received.try_recv() {
        if let Some(observer) = &observer {
            observer.record(&event);
        }
        totals.add(&event);
    }
    if let Some(server) = server {
        server.abort();
    }
    totals.log_and_reset();
    tracing::info!(
        drained = stop.drained,
        released = stop.released,
        "replica stopped"
    );
    Ok(())
}

/// Admissions since the last summary line.
#[derive(Default)]
struct Totals {
    rounds: u64,
    failed: u64,
    fired: u64,
    skipped: u64,
    initialized: u64,
    misfires: u64,
    passed_over: u64,
    fence_lost: u64,
    definition_refused: u64,
    unsettled: u64,
}

impl Totals {
    fn add(&mut self, event: &RoundEvent) {
        self.rounds += 1;
        match event {
            RoundEvent::Finished { report, .. } => {
                self.fired += report.fired as u64;
                self.skipped += report.skipped as u64;
                self.initialized += report.initialized as u64;
                self.misfires += report.misfires as u64;
                self.passed_over += report.occurrences_passed_over;
                self.fence_lost += report.fence_lost as u64;
                self.definition_refused += report.definition_refused as u64;
                self.unsettled += report.unsettled as u64;
                for run in &report.admitted {
                    tracing::debug!(trigger = %TriggerName::new(&run.project_id, &run.trigger_id),
                        run = %run.run.run_id, key = %run.run.idempotency_key, "admitted");
                }
            }
            RoundEvent::Failed { .. } => self.failed += 1,
        }
    }

    fn log_and_reset(&mut self) {
        if self.rounds > 0 {
            tracing::info!(
                rounds = self.rounds,
                failed = self.failed,
                admitted = self.fired,
                skipped = self.skipped,
                initialized = self.initialized,
                misfires = self.misfires,
                passed_over = self.passed_over,
                fence_lost = self.fence_lost,
                definition_refused = self.definition_refused,
                unsettled = self.unsettled,
                "summary"
            );
        }
        *self = Totals::default();
    }
}

/// How long a replica's minute of housekeeping may take: a batch of deletes is an index probe
/// and a few thousand rows at most, so this is long; past it the statement is cancelled and the
/// next minute tries again.
pub const HOUSEKEEPING_TIMEOUT: Duration = Duration::from_secs(30);

/// A replica's minute of housekeeping: misfire records and audit rows past their retention
/// deleted (`store::retention`), a bounded batch from every replica (cheap when there is nothing
/// to delete: an index probe), and stopped or long-dead replicas forgotten from the registry, so
/// no table the scheduler owns grows without end.
async fn housekeep(store: Store) {
    let done = store
        .within(HOUSEKEEPING_TIMEOUT, "housekeeping", |client| {
            Box::pin(async move {
                let pruned = crate::store::misfires::prune(
                    client,
                    crate::core::MISFIRE_RETENTION_MS,
                    10_000,
                )
                .await?;
                let forgotten = replicas::forget(client).await?;
                let pruned = pruned + crate::store::retention::prune_audit(client, 10_000).await?;
                Ok((pruned, forgotten))
            })
        })
        .await;
    match done {
        Ok((0, 0)) => {}
        Ok((pruned, forgotten)) => tracing::info!(
            history_rows_deleted = pruned,
            replicas_forgotten = forgotten,
            "housekeeping"
        ),
        Err(error) => tracing::warn!(%error, "housekeeping failed; trying again in a minute"),
    }
}

/// Startup recovery (docs/DESIGN.md §4.8): drifted queued runs are logged, never re-admitted, and
/// the replica still starts.
async fn log_recovery(
    client: &tokio_postgres::Client,
    schema: &crate::store::SchemaName,
) -> Result<(), CliError> {
    let recovery = run_in_transaction(client, schema, Begin::ReadOnly, |client| {
        Box::pin(recovery_report(client, 20))
    })
    .await?;
    if recovery.drifted == 0 {
        tracing::info!(
            pristine = recovery.pristine,
            "startup recovery: every queued run is pristine"
        );
        return Ok(());
    }
    tracing::warn!(
        pristine = recovery.pristine,
        drifted = recovery.drifted,
        "startup recovery found drifted runs; they are not re-admitted (see `qlsched inspect recovery`)"
    );
    for candidate in &recovery.candidates {
        tracing::warn!(run = %candidate.run_id, trigger = %TriggerName::new(&candidate.project_id, &candidate.trigger_id),
            drift = %candidate.drift.join("; "), "recovery candidate");
    }
    Ok(())
}
