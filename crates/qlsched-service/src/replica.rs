//! One scheduler replica as a service (docs/DESIGN.md §4.9): what `qlsched run` is, without its
//! command line. [`run`] binds the probes, waits for the schema, checks the runtime role, logs
//! startup recovery, warns of a schedule table autovacuum never visits, and registers; then runs the [`Lifecycle`] with the probes fed, a summary
//! and housekeeping every minute, until its [`StopToken`] is tripped; then drains the round in
//! flight and stops (within [`crate::lifecycle::stop_bound`]).
//!
//! The loop that waits for the stop never awaits the database: housekeeping runs as a task of
//! its own, bounded by [`HOUSEKEEPING_TIMEOUT`], so a stop is taken at once whatever the server
//! does.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::coordinator::Coordinator;
use crate::lifecycle::{Lifecycle, RoundEvent, StopReport};
use crate::observe::{Build, Observer};
use crate::stop::StopToken;
use qlsched_core::duration::format_duration;
use qlsched_core::{CoordinatorConfig, TriggerName};
use qlsched_store::migrate::{RUNTIME_ROLE, check_capability, check_not_behind, check_ready};
use qlsched_store::recovery::{STARTUP_RECOVERY_RUNS, startup_recovery_report};
use qlsched_store::retention::{RetentionBatch, RunRetention, delete_finished_runs};
use qlsched_store::{
    Begin, Connection, ConnectionSettings, SchemaName, Store, StoreError, replicas,
    run_in_transaction,
};

/// A replica's configuration: the coordinator's, and where and how it runs.
#[derive(Clone)]
pub struct ReplicaConfig {
    pub coordinator: CoordinatorConfig,
    pub settings: ConnectionSettings,
    pub schema: SchemaName,
    /// Serve /metrics, /healthz and /readyz on this address (bound before anything is opened).
    pub metrics_addr: Option<String>,
    /// Fail at start when the schema is not migrated, instead of waiting for `migrate`.
    pub exit_if_unmigrated: bool,
    /// How long finished runs are kept (docs/DESIGN.md §3.3), and how often this replica offers
    /// to delete those past it.
    pub retention: Retention,
    /// How long after its last heartbeat the registry forgets this replica if it never stops
    /// (`core::FORGET_STALE_AFTER` by default).
    pub forget_stale_after: Duration,
    /// The binary's version and commit: what the replica registers as and `/metrics` labels.
    pub build: Build,
}

/// A replica's part in run retention: the retention per status it applies when it holds the
/// lease, and how often it tries to.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub runs: RunRetention,
    /// Time between two passes (each drains what is due, batch by batch, within
    /// [`RETENTION_PASS_BUDGET`]).
    pub every: Duration,
}

impl Retention {
    /// Succeeded and cancelled runs a day, failed ones a week, a pass a minute (docs/OPERATIONS.md,
    /// "Retention of runs", has the reasons).
    pub const DEFAULT: Retention = Retention {
        runs: RunRetention {
            succeeded_ms: Some(24 * 3_600_000),
            failed_ms: Some(7 * 24 * 3_600_000),
            cancelled_ms: Some(24 * 3_600_000),
        },
        every: Duration::from_secs(60),
    };
}

#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// How a replica that was asked to stop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaExit {
    /// Stopped before its lifecycle started: nothing was claimed.
    StoppedWhileStarting,
    /// Stopped after running: how the stop went.
    Stopped(StopReport),
}

/// Runs a replica until `stop` is tripped (see the module's documentation). An error is one of
/// the start (an address that cannot be bound, a schema that will not do, a database that
/// refuses); once running, a replica only stops when asked.
pub async fn run(config: ReplicaConfig, stop: &StopToken) -> Result<ReplicaExit, ReplicaError> {
    let ReplicaConfig {
        coordinator: config,
        settings,
        schema,
        metrics_addr,
        exit_if_unmigrated,
        retention,
        forget_stale_after,
        build,
    } = config;
    let schema = &schema;
    // Bound first, so that probes answer ("starting") while the replica connects, and a busy or
    // invalid address fails the start before anything is opened.
    let listener = match &metrics_addr {
        Some(addr) => Some(crate::observe::http::bind(addr).await.map_err(|error| {
            StoreError::Config(format!("--metrics-addr {addr}: cannot listen: {error}"))
        })?),
        None => None,
    };
    let mut observer = None;
    let mut server = None;
    if let Some(listener) = listener {
        let watcher = Observer::new(&config.owner, build, config.lease, config.cadence);
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
            exit_if_unmigrated,
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
            Box::pin(qlsched_store::upkeep::schedule_upkeep(client))
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
        crate::lifecycle::register(&store, &config, forget_stale_after, build).await?;
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
        Ok::<_, StoreError>((store, probes))
    };
    let (store, probes) = tokio::select! {
        store = start => store.map_err(cut_by_the_logins_bound)?,
        signal = stop.tripped() => {
            tracing::info!(signal, "stopped while starting: nothing was claimed");
            return Ok(ReplicaExit::StoppedWhileStarting);
        }
    };
    tracing::info!(
        owner = %config.owner, batch = %config.batch, lease = %format_duration(config.lease),
        cadence = %format_duration(config.cadence), database = %settings.describe(), %schema,
        "replica started"
    );

    let owner = config.owner.clone();
    let coordinator =
        Arc::new(Coordinator::new(store, config).registered(forget_stale_after, build));
    let (events, mut received) = mpsc::unbounded_channel();
    let store = coordinator.store().clone();
    if let (Some(observer), Some(probes)) = (&observer, probes) {
        observer.watch(coordinator.clone(), probes);
    }
    let lifecycle = Lifecycle::start(coordinator, Some(events));
    let mut totals = Totals::default();
    let mut housekeeping = Housekeeping::default();
    let mut summary = tokio::time::interval(Duration::from_secs(60));
    summary.tick().await;
    let mut retainer = Housekeeping::default();
    let mut retain = tokio::time::interval(retention.every);
    retain.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let record = |totals: &mut Totals, event: &RoundEvent| {
        if let Some(observer) = &observer {
            observer.record(event);
        }
        totals.add(event);
    };
    loop {
        tokio::select! {
            signal = stop.tripped() => {
                tracing::info!(signal, "stopping: draining the round in flight");
                break;
            }
            Some(event) = received.recv() => record(&mut totals, &event),
            _ = summary.tick() => {
                totals.log_and_reset();
                housekeeping.start_unless_running(|| housekeep(store.clone()));
            }
            _ = retain.tick(), if !retention.runs.is_off() => {
                retainer.start_unless_running(|| {
                    retain_runs(store.clone(), owner.clone(), retention.runs)
                });
            }
        }
    }
    housekeeping.abort();
    retainer.abort();
    let stopped = lifecycle.stop_registered().await;
    // The round the stop drained reported after the loop above stopped listening: count it, or
    // the last summary leaves out what that round admitted.
    while let Ok(event) = received.try_recv() {
        record(&mut totals, &event);
    }
    if let Some(server) = server {
        server.abort();
    }
    totals.log_and_reset();
    tracing::info!(
        drained = stopped.drained,
        released = stopped.released,
        "replica stopped"
    );
    Ok(ReplicaExit::Stopped(stopped))
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
    settings: &ConnectionSettings,
    schema: &SchemaName,
    application: &str,
    exit_if_unmigrated: bool,
) -> Result<Connection, StoreError> {
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
            Err(error) => return Err(error),
        }
        drop(startup);
        tokio::time::sleep(SCHEMA_POLL).await;
    }
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

/// A maintenance task (the minute's housekeeping, a retention pass): at most one of each at a
/// time, never awaited by the loop.
#[derive(Default)]
struct Housekeeping(Option<JoinHandle<()>>);

impl Housekeeping {
    /// Starts the task `start` makes, unless the last one is still running.
    fn start_unless_running<F>(&mut self, start: impl FnOnce() -> F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        if self.0.as_ref().is_none_or(JoinHandle::is_finished) {
            self.0 = Some(tokio::spawn(start()));
        }
    }

    fn abort(self) {
        if let Some(task) = self.0 {
            task.abort();
        }
    }
}

/// A replica's minute of housekeeping: misfire records, audit rows and the replicas' minute
/// figures past their retention deleted (`store::retention`, `store::replicas::prune_minutes`),
/// a bounded batch from every replica (cheap when there is nothing to delete: an index probe),
/// and stopped or long-dead replicas forgotten from the registry, so no table the scheduler owns
/// grows without end.
async fn housekeep(store: Store) {
    let done = store
        .within(HOUSEKEEPING_TIMEOUT, "housekeeping", |client| {
            Box::pin(async move {
                let pruned = qlsched_store::misfires::prune(
                    client,
                    qlsched_core::MISFIRE_RETENTION_MS,
                    10_000,
                )
                .await?;
                let forgotten = replicas::forget(client).await?;
                let pruned = pruned + qlsched_store::retention::prune_audit(client, 10_000).await?;
                let pruned = pruned
                    + replicas::prune_minutes(client, qlsched_core::minutes::RETENTION_MS, 10_000)
                        .await?;
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

/// Finished runs deleted per batch, of each status: a batch is one short transaction (an index
/// range of the finished runs, then each run's attempts and events by key), a few tens of
/// milliseconds, so an admission waiting behind it on a page loses little.
pub const RETENTION_BATCH: i64 = 1_000;

/// How long one retention pass may go on deleting, batch after batch: a backlog (a week of
/// history when retention is first turned on) drains over many passes, never in one.
pub const RETENTION_PASS_BUDGET: Duration = Duration::from_secs(30);

/// The pause between two batches of a pass, so that the deletes are spread and admissions,
/// vacuum and replication keep up.
pub const RETENTION_PAUSE: Duration = Duration::from_millis(100);

/// How long the retention lease lasts past each batch: longer than the time between two passes
/// of the default minute, so the leader keeps it, and short enough that another replica takes
/// over within minutes of the leader's end.
pub const RETENTION_LEASE_MS: i64 = 150_000;

/// One retention pass (`store::retention`): batches of finished runs past their retention
/// deleted while this replica holds the lease, until a batch comes back short or the pass's
/// budget is spent. Another replica's lease, or its batch in flight, ends the pass at once: the
/// work is the leader's.
pub async fn retain_runs(store: Store, owner: String, retention: RunRetention) {
    let started = tokio::time::Instant::now();
    let mut total = RetentionBatch::default();
    let mut batches = 0u64;
    loop {
        let owner = owner.clone();
        let batch = store
            .within(HOUSEKEEPING_TIMEOUT, "retention", move |client| {
                Box::pin(async move {
                    delete_finished_runs(
                        client,
                        &owner,
                        RETENTION_LEASE_MS,
                        &retention,
                        RETENTION_BATCH,
                    )
                    .await
                })
            })
            .await;
        match batch {
            Ok(None) => {
                tracing::debug!("retention: another replica holds the lease; skipped");
                break;
            }
            Ok(Some(batch)) => {
                batches += 1;
                total.add(&batch);
                let full = batch.runs >= RETENTION_BATCH as u64;
                if !full || started.elapsed() + RETENTION_PAUSE >= RETENTION_PASS_BUDGET {
                    break;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "retention failed; trying again at the next pass");
                break;
            }
        }
        tokio::time::sleep(RETENTION_PAUSE).await;
    }
    if total.runs > 0 {
        tracing::info!(
            runs = total.runs,
            attempts = total.attempts,
            events = total.events,
            manual_keys_retired = total.retired_keys,
            batches,
            "retention deleted finished runs"
        );
    }
}

/// A startup statement cancelled by a statement timeout: qlsched sets none on a replica's
/// startup, so the bound is the login's own (`statement_timeout` of its role, its database or the
/// server), and every restart would be cut the same way: a setting to change (78), named, not an
/// outage (75) for a supervisor to restart into.
fn cut_by_the_logins_bound(error: StoreError) -> StoreError {
    match error {
        StoreError::TimedOut(message) if message.contains("statement timeout") => {
            StoreError::Config(format!(
                "a startup statement was cut by the login's own statement_timeout (set for its \
                 role, its database or the server; a replica sets none while it starts): \
                 {message}; every restart would be cut the same way: raise it for the replica's \
                 login (ALTER ROLE name SET statement_timeout = '30s', or 0 for none)"
            ))
        }
        other => other,
    }
}

/// Startup recovery (docs/DESIGN.md §4.8): drifted queued runs are logged, never re-admitted, and
/// the replica still starts.
async fn log_recovery(client: &Connection, schema: &SchemaName) -> Result<(), StoreError> {
    let recovery = run_in_transaction(client, schema, Begin::ReadOnly, |client| {
        Box::pin(startup_recovery_report(client, 20, STARTUP_RECOVERY_RUNS))
    })
    .await?;
    if recovery.drifted == 0 {
        tracing::info!(
            pristine = recovery.pristine,
            newest_runs = STARTUP_RECOVERY_RUNS,
            "startup recovery: every queued run among the newest is pristine \
             (`qlsched inspect recovery` looks at every run)"
        );
        return Ok(());
    }
    tracing::warn!(
        pristine = recovery.pristine,
        drifted = recovery.drifted,
        newest_runs = STARTUP_RECOVERY_RUNS,
        "startup recovery found drifted runs among the newest; they are not re-admitted (see \
         `qlsched inspect recovery`, which looks at every run)"
    );
    for candidate in &recovery.candidates {
        tracing::warn!(run = %candidate.run_id, trigger = %TriggerName::new(&candidate.project_id, &candidate.trigger_id),
            drift = %candidate.drift.join("; "), "recovery candidate");
    }
    Ok(())
}
