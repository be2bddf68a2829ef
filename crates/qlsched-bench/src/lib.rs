//! `qlsched bench`, the measurement behind docs/PERFORMANCE.md: how fast R replicas
//! turn a burst of due occurrences into admitted runs, next to what the server can commit at all.
//! A crate beside the product crates (docs/DESIGN.md §2), with its own SQL ([`sql`](mod@sql))
//! and the scratch databases the bench, the demo and the tests work in ([`scratch`]): the store
//! and the services do not depend on it, so the scheduler ships none of it.
//!
//! In a scratch database of its own: migrate; publish N triggers through the real publish path;
//! place their cursors so that a fraction of them is due at one instant (the burst); optionally pad
//! the schedule table with rows that are not due; measure the commit ceiling; then start R
//! replicas, each a [`Lifecycle`] around a [`Coordinator`] with a pool of its own, exactly as
//! `qlsched run` starts one, and stop them once every due occurrence is admitted. The invariants
//! are checked on what was written, and the database is dropped unless kept.

use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::mpsc;

use crate::replicas::{InProcessReplicas, stop_all};
use crate::scratch::{drop_database, recreate_database};
use crate::sql::{
    BATCH_PROBE, COMMIT_PROBE, database_now_ms, pad_schedule, place_cursors, probe_batches,
    probe_commits,
};
use qlsched_core::duration::format_duration;
use qlsched_core::manifest::parse_manifest;
use qlsched_core::{Batch, CoordinatorConfig, CoreError, CronSchedule, MAX_BATCH, ManifestError};
use qlsched_service::lifecycle::{Lifecycle, RoundEvent};
use qlsched_service::observe::Build;
use qlsched_store::invariants::invariant_counts;
use qlsched_store::migrate::migrate_up;
use qlsched_store::publish::publish;
use qlsched_store::{ConnectionSettings, SchemaName, StoreError};

pub mod replicas;
pub mod scratch;
pub mod sql;
pub mod statements;
pub mod steady;

/// The project every bench trigger belongs to.
const PROJECT: &str = "bench";
/// The one task every bench trigger runs.
const TASK: &str = "burst";
/// Name prefix of published triggers; padding rows use [`PAD_PREFIX`].
const TRIGGER_PREFIX: &str = "t";
const PAD_PREFIX: &str = "pad-";
/// How far before the bench starts the burst's occurrence lies, so it is due at once.
const BURST_AGE_MS: i64 = 60_000;
/// The grace of every bench trigger: the burst (minutes old at most) fires on time, not as a
/// misfire, however long seeding a large table took.
const GRACE: &str = "1h";

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Triggers published through the real publish path.
    pub triggers: u32,
    /// Of those, the fraction whose occurrence is due (0..=1).
    pub due_fraction: f64,
    /// Schedule rows in all: published triggers plus padding rows that are never due.
    pub rows_total: u64,
    pub replicas: u8,
    /// The coordinator settings of every replica; the owner gets a replica suffix.
    pub coordinator: CoordinatorConfig,
    /// The binary's version and commit, as the replicas register them.
    pub build: Build,
    /// Stop measuring admissions after this long even if some are still due.
    pub cap: Duration,
    /// How long the commit ceiling is probed.
    pub ceiling_time: Duration,
    /// The scratch database's name; it is dropped and recreated.
    pub database: String,
    /// Keep the scratch database afterwards.
    pub keep: bool,
    /// Parked rows and history added before measuring.
    pub lived_in: LivedIn,
}

/// What makes the bench's database look lived-in (docs/PERFORMANCE.md, "Lived-in tables"):
/// parked schedule rows besides the triggers, and runs already in the history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LivedIn {
    /// A third disabled, a third paused, a third in a suspended project.
    pub parked: u32,
    /// Runs with their attempts and events, created before the bench.
    pub history: u64,
}

impl LivedIn {
    /// Adds them to `project_id`'s database, copying `template` (a published trigger).
    pub async fn build(
        self,
        admin: &mut tokio_postgres::Client,
        project_id: &str,
        template: &str,
    ) -> Result<(), BenchError> {
        let history = i64::try_from(self.history)
            .map_err(|_| BenchError::Config(format!("--history {}", self.history)))?;
        crate::sql::lived_in(admin, project_id, template, i64::from(self.parked), history).await?;
        Ok(())
    }
}

/// `, 300000 parked, 10000000 runs of history` (nothing when there is neither), for the header.
impl std::fmt::Display for LivedIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.parked > 0 {
            write!(f, ", {} parked", self.parked)?;
        }
        if self.history > 0 {
            write!(f, ", {} runs of history", self.history)?;
        }
        Ok(())
    }
}

/// Everything one bench run measured; the JSON shape is documented in `qlsched-bench(1)`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BenchReport {
    /// Triggers published.
    pub triggers: u32,
    /// Of them, due at once.
    pub due: u64,
    /// Schedule rows, parked padding included.
    pub rows_total: u64,
    pub replicas: u8,
    pub batch: Batch,
    /// Runs admitted during the measurement.
    pub admitted: u64,
    /// All due occurrences were admitted before the cap.
    pub complete: bool,
    /// From the first round's start to the end of the last round that admitted anything.
    pub elapsed_s: f64,
    /// `admitted / elapsed_s`.
    pub admissions_per_s: f64,
    /// Single-row INSERT transactions a second with as many connections as replicas, probed
    /// before the replicas start.
    pub commit_ceiling_per_s: f64,
    /// `admissions_per_s / commit_ceiling_per_s`.
    pub ratio: f64,
    /// The claim statement, every round: nearest-rank percentile over rounds.
    pub claim_p50_ms: f64,
    /// As claim_p50_ms.
    pub claim_p99_ms: f64,
    /// A round's whole admission, retries and fallbacks included, over rounds that claimed
    /// anything: nearest-rank percentile.
    pub admit_p50_ms: f64,
    /// As admit_p50_ms.
    pub admit_p99_ms: f64,
    pub rounds: u64,
    pub failed_rounds: u64,
    /// Admission transactions, retries included.
    pub transactions: u64,
    pub serialization_retries: u64,
    /// `serialization_retries / admitted`.
    pub serialization_retry_rate: f64,
    /// Batches admitted row by row after failing whole.
    pub batch_fallbacks: u64,
    pub fence_lost: u64,
    /// Admissions the database refused (a constraint or consistency check).
    pub rejected: u64,
    /// Rows of failed batches whose own admission could not be settled either (given back).
    pub unsettled: u64,
    /// Exchanges with the server the rounds waited on: a claim 1, each admission transaction 1,
    /// a release 2, each first preparation of a statement on a connection 1.
    pub round_trips: u64,
    pub round_trips_per_admission: f64,
    /// Runs in the database afterwards.
    pub runs: i64,
    /// Occurrences admitted more than once.
    pub duplicates: i64,
    pub runs_without_one_attempt: i64,
    pub runs_without_two_events: i64,
    /// Attempts or events without their run.
    pub orphans: i64,
    /// Seconds spent creating, migrating, publishing and padding the database.
    pub seed_s: f64,
    /// The scratch database's name.
    pub database: String,
    /// The scratch database was kept (--keep).
    pub kept: bool,
}

impl BenchReport {
    /// What this run says is wrong with what the scheduler wrote, as messages; empty when the
    /// run was complete and every promise held.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !self.complete {
            problems.push(format!(
                "only {} of {} due occurrences were admitted before the cap",
                self.admitted, self.due
            ));
        }
        if u64::try_from(self.runs).ok() != Some(self.due) && self.complete {
            problems.push(format!(
                "{} runs for {} due occurrences",
                self.runs, self.due
            ));
        }
        for (count, what) in [
            (self.duplicates, "occurrences admitted more than once"),
            (self.runs_without_one_attempt, "runs without one attempt"),
            (self.runs_without_two_events, "runs without two events"),
            (self.orphans, "attempts or events without their run"),
        ] {
            if count > 0 {
                problems.push(format!("{count} {what}"));
            }
        }
        problems
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("bench manifest: {0}")]
    Manifest(#[from] ManifestError),
    #[error("configuration invalid: {0}")]
    Config(String),
}

/// Runs the whole bench against the server `server` names. The scratch database is dropped
/// afterwards, whatever happened, unless `config.keep`.
pub async fn run_bench(
    server: &ConnectionSettings,
    schema: &SchemaName,
    config: &BenchConfig,
) -> Result<BenchReport, BenchError> {
    let due = config.check()?;
    let outcome = measure(server, schema, config, due).await;
    drop_unless_kept(server, &config.database, config.keep).await;
    outcome
}

/// Drops a bench's scratch database, whatever the run's outcome, unless it is to be kept.
pub(crate) async fn drop_unless_kept(server: &ConnectionSettings, database: &str, keep: bool) {
    if !keep && let Err(error) = drop_database(server, database).await {
        tracing::warn!(%error, %database, "could not drop the bench database");
    }
}

/// Creates the scratch database `database` afresh and migrates it; returns its settings and an
/// admin connection to it.
pub(crate) async fn migrated_database(
    server: &ConnectionSettings,
    schema: &SchemaName,
    database: &str,
) -> Result<(ConnectionSettings, tokio_postgres::Client), BenchError> {
    recreate_database(server, database, None).await?;
    let settings = server.with_dbname(database);
    let mut admin = settings.connect(schema, "qlsched bench").await?;
    migrate_up(&mut admin, schema).await?;
    Ok((settings, admin))
}

impl BenchConfig {
    /// Refuses a configuration that cannot give a meaningful measurement, before anything is
    /// created; returns how many published triggers are due: N·F, rounded.
    pub fn check(&self) -> Result<u64, BenchError> {
        self.coordinator.validate()?;
        if !(0.0..=1.0).contains(&self.due_fraction) {
            return Err(BenchError::Config(format!(
                "due fraction {} is not within 0..=1",
                self.due_fraction
            )));
        }
        if self.rows_total < u64::from(self.triggers) {
            return Err(BenchError::Config(format!(
                "rows total {} is fewer than the {} triggers",
                self.rows_total, self.triggers
            )));
        }
        if self.cap < Duration::from_secs(1) {
            return Err(BenchError::Config(format!(
                "duration must be at least 1s, got {}",
                format_duration(self.cap)
            )));
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(600)).contains(&self.ceiling_time) {
            return Err(BenchError::Config(format!(
                "ceiling time must be 100ms..=10m, got {}",
                format_duration(self.ceiling_time)
            )));
        }
        // Exact for any u32 times a fraction: f64 holds every u32.
        Ok((f64::from(self.triggers) * self.due_fraction).round() as u64)
    }
}

async fn measure(
    server: &ConnectionSettings,
    schema: &SchemaName,
    config: &BenchConfig,
    due: u64,
) -> Result<BenchReport, BenchError> {
    let seeding = Instant::now();
    let (settings, mut admin) = migrated_database(server, schema, &config.database).await?;

    let now_ms = database_now_ms(&admin).await?;
    let burst_at_ms = (now_ms - BURST_AGE_MS).div_euclid(1000) * 1000;
    let cron = yearly_at(burst_at_ms)?;
    let idle_at_ms = CronSchedule::parse(&cron, "UTC")?.next_after(now_ms)?;
    let names: Vec<String> = (1..=config.triggers)
        .map(|n| format!("{TRIGGER_PREFIX}{n:07}"))
        .collect();
    let manifest = parse_manifest(&bench_manifest(&names, &cron).to_string())?;
    publish(&mut admin, schema, &manifest, false).await?;
    let due_names = &names[..usize::try_from(due).unwrap_or(names.len())];
    place_cursors(&admin, PROJECT, due_names, burst_at_ms, idle_at_ms).await?;
    let padding = config.rows_total - u64::from(config.triggers);
    if let Some(template) = names.first() {
        let padding = i64::try_from(padding)
            .map_err(|_| BenchError::Config(format!("{padding} padding rows")))?;
        pad_schedule(
            &mut admin, PROJECT, template, PAD_PREFIX, padding, idle_at_ms,
        )
        .await?;
    }
    if let Some(template) = names.first() {
        config.lived_in.build(&mut admin, PROJECT, template).await?;
    }
    let seed_s = seeding.elapsed().as_secs_f64();
    let started_ms = database_now_ms(&admin).await?;

    let commit_ceiling_per_s = measure_ceiling(
        Ceiling::Commits,
        &settings,
        schema,
        config.replicas,
        config.ceiling_time,
    )
    .await?;
    let mut run = admit_burst(&settings, schema, config, due).await?;
    run.claim_times.sort_unstable();
    run.admit_times.sort_unstable();
    // The runs of this bench only: the lived-in history is older.
    let since_start = database_now_ms(&admin).await? - started_ms + BURST_AGE_MS;
    let counts = invariant_counts(&admin, since_start).await?;

    let elapsed_s = run.elapsed.as_secs_f64();
    let admissions_per_s = ratio(run.admitted as f64, elapsed_s);
    Ok(BenchReport {
        triggers: config.triggers,
        due,
        rows_total: config.rows_total,
        replicas: config.replicas,
        batch: config.coordinator.batch,
        admitted: run.admitted,
        complete: run.admitted >= due,
        elapsed_s,
        admissions_per_s,
        commit_ceiling_per_s,
        ratio: ratio(admissions_per_s, commit_ceiling_per_s),
        claim_p50_ms: percentile_ms(&run.claim_times, 50),
        claim_p99_ms: percentile_ms(&run.claim_times, 99),
        admit_p50_ms: percentile_ms(&run.admit_times, 50),
        admit_p99_ms: percentile_ms(&run.admit_times, 99),
        rounds: run.rounds,
        failed_rounds: run.failed_rounds,
        transactions: run.transactions,
        serialization_retries: run.serialization_retries,
        serialization_retry_rate: ratio(run.serialization_retries as f64, run.admitted as f64),
        batch_fallbacks: run.batch_fallbacks,
        fence_lost: run.fence_lost,
        rejected: run.rejected,
        unsettled: run.unsettled,
        round_trips: run.round_trips,
        round_trips_per_admission: ratio(run.round_trips as f64, run.admitted as f64),
        runs: counts.runs,
        duplicates: counts.duplicate_occurrences,
        runs_without_one_attempt: counts.runs_without_one_attempt,
        runs_without_two_events: counts.runs_without_two_events,
        orphans: counts.orphans,
        seed_s,
        database: config.database.clone(),
        kept: config.keep,
    })
}

/// A six-field cron expression (leading seconds) that fires once a year, at `at_ms` in UTC: the
/// burst is its latest occurrence, and the next one is a year away, so nothing else becomes due
/// while the bench runs.
fn yearly_at(at_ms: i64) -> Result<String, BenchError> {
    use chrono::{Datelike, Timelike};
    let at = chrono::DateTime::from_timestamp_millis(at_ms)
        .ok_or_else(|| BenchError::Config(format!("database time {at_ms} ms is out of range")))?;
    Ok(format!(
        "{} {} {} {} {} *",
        at.second(),
        at.minute(),
        at.hour(),
        at.day(),
        at.month()
    ))
}

fn bench_manifest(names: &[String], cron: &str) -> serde_json::Value {
    let triggers: Vec<serde_json::Value> = names
        .iter()
        .map(|name| {
            serde_json::json!({
                "id": name, "task": TASK, "cron": cron, "time_zone": "UTC",
                "misfire": "skip", "misfire_grace": GRACE,
            })
        })
        .collect();
    serde_json::json!({
        "projects": [{
            "id": PROJECT,
            "tasks": [{ "id": TASK, "execution": { "kind": "remote_worker", "image": "qlsched/bench" } }],
            "triggers": triggers,
        }]
    })
}

/// A ceiling the bench measures on the server before any replica starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ceiling {
    /// Single-row INSERT transactions per second: the rate durable commits can go at on this
    /// server, whatever does the committing.
    Commits,
    /// Admissions' writes per second (the schedule row moved on, a run, its attempt and two
    /// events each) in batches of [`MAX_BATCH`] as one SERIALIZABLE statement: the most a round's
    /// admission could reach on this server, with no claim, decision or fence check.
    BatchedAdmissions,
}

/// `ceiling` per second, measured with `connections` connections together for `time`.
pub(crate) async fn measure_ceiling(
    ceiling: Ceiling,
    settings: &ConnectionSettings,
    schema: &SchemaName,
    connections: u8,
    time: Duration,
) -> Result<f64, BenchError> {
    let admin = settings.connect(schema, "qlsched bench ceiling").await?;
    let probe = match ceiling {
        Ceiling::Commits => &COMMIT_PROBE,
        Ceiling::BatchedAdmissions => &BATCH_PROBE,
    };
    probe.create(&admin).await?;
    let mut clients = Vec::with_capacity(usize::from(connections));
    for _ in 0..connections {
        clients.push(settings.connect(schema, "qlsched bench ceiling").await?);
    }
    let started = Instant::now();
    let deadline = started + time;
    let keep_going = move || Instant::now() < deadline;
    let probes = clients
        .iter()
        .zip(0..)
        .map(|(client, connection)| async move {
            match ceiling {
                Ceiling::Commits => probe_commits(client, connection, keep_going).await,
                Ceiling::BatchedAdmissions => {
                    probe_batches(client, connection, i32::from(MAX_BATCH), keep_going).await
                }
            }
        });
    let done: u64 = futures_util::future::try_join_all(probes)
        .await?
        .into_iter()
        .sum();
    let elapsed = started.elapsed().as_secs_f64();
    probe.remove(&admin).await?;
    Ok(ratio(done as f64, elapsed))
}

/// What the replicas did while admitting the burst.
#[derive(Default)]
struct BurstRun {
    admitted: u64,
    elapsed: Duration,
    claim_times: Vec<Duration>,
    admit_times: Vec<Duration>,
    rounds: u64,
    failed_rounds: u64,
    transactions: u64,
    serialization_retries: u64,
    batch_fallbacks: u64,
    fence_lost: u64,
    rejected: u64,
    unsettled: u64,
    round_trips: u64,
}

impl BurstRun {
    fn add(
        &mut self,
        event: RoundEvent,
        first_start: &mut Option<Instant>,
        last_admit: &mut Option<Instant>,
    ) {
        self.rounds += 1;
        match event {
            RoundEvent::Finished {
                started,
                finished,
                report,
            } => {
                *first_start = Some(first_start.map_or(started, |s| s.min(started)));
                self.claim_times.push(report.claim_time);
                if report.claimed > 0 {
                    self.admit_times.push(report.admit_time);
                }
                if report.fired > 0 {
                    *last_admit = Some(last_admit.map_or(finished, |f| f.max(finished)));
                }
                self.admitted += report.fired as u64;
                self.transactions += u64::from(report.transactions);
                self.serialization_retries += u64::from(report.serialization_retries);
                self.batch_fallbacks += u64::from(report.batch_fallbacks);
                self.fence_lost += report.fence_lost as u64;
                self.rejected += report.rejected as u64;
                self.unsettled += report.unsettled as u64;
                self.round_trips += u64::from(report.round_trips);
            }
            RoundEvent::Failed { started, error, .. } => {
                *first_start = Some(first_start.map_or(started, |s| s.min(started)));
                self.failed_rounds += 1;
                tracing::warn!(%error, "a bench round failed");
            }
        }
    }
}

/// Starts the replicas, waits until `due` occurrences are admitted (or the cap), stops them.
async fn admit_burst(
    settings: &ConnectionSettings,
    schema: &SchemaName,
    config: &BenchConfig,
    due: u64,
) -> Result<BurstRun, BenchError> {
    let (events, mut received) = mpsc::unbounded_channel();
    let lifecycles = start_replicas(
        settings,
        schema,
        &config.coordinator,
        config.build,
        config.replicas,
        events,
    )
    .await?;

    let mut run = BurstRun::default();
    let (mut first_start, mut last_admit) = (None, None);
    let mut capped = false;
    let cap = tokio::time::sleep(config.cap);
    tokio::pin!(cap);
    while run.admitted < due {
        tokio::select! {
            _ = &mut cap => {
                capped = true;
                break;
            }
            event = received.recv() => match event {
                Some(event) => run.add(event, &mut first_start, &mut last_admit),
                None => break,
            },
        }
    }
    stop_all(lifecycles).await;
    // Rounds that finished while the others were stopping admitted too; count them.
    while let Ok(event) = received.try_recv() {
        run.add(event, &mut first_start, &mut last_admit);
    }
    if let (Some(start), Some(end)) = (first_start, last_admit) {
        run.elapsed = end.saturating_duration_since(start);
    }
    if capped {
        tracing::warn!(cap = ?config.cap, "the cap ended the measurement before every occurrence was admitted");
    }
    Ok(run)
}

/// Opens `replicas` in-process replicas with owners `<owner>-<n>` and starts them, registered as
/// `build`; their round events go to `events`.
pub async fn start_replicas(
    settings: &ConnectionSettings,
    schema: &SchemaName,
    coordinator: &CoordinatorConfig,
    build: Build,
    replicas: u8,
    events: mpsc::UnboundedSender<RoundEvent>,
) -> Result<Vec<Lifecycle>, BenchError> {
    let owners = (0..replicas).map(|replica| format!("{}-{replica}", coordinator.owner));
    let opened = InProcessReplicas::open(settings, schema, "qlsched bench", owners).await?;
    Ok(opened.start(coordinator, build, Some(&events)).await?)
}

/// `a / b`, or 0 when there is nothing to divide by.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// The `p`th percentile (nearest rank) of sorted `samples`, in milliseconds; 0 for none.
fn percentile_ms(samples: &[Duration], p: usize) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let rank = (samples.len() * p).div_ceil(100).max(1);
    samples[rank - 1].as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&samples, 50), 50.0);
        assert_eq!(percentile_ms(&samples, 99), 99.0);
        assert_eq!(percentile_ms(&[Duration::from_millis(7)], 99), 7.0);
        assert_eq!(percentile_ms(&[], 99), 0.0);
    }

    #[test]
    fn the_burst_cron_fires_at_the_burst_and_next_a_year_later() -> Result<(), BenchError> {
        let at_ms = 1_767_225_600_000 + 13 * 3_600_000 + 5 * 60_000 + 7_000; // 2026-01-01T13:05:07Z
        let cron = yearly_at(at_ms)?;
        assert_eq!(cron, "7 5 13 1 1 *");
        let schedule = CronSchedule::parse(&cron, "UTC")?;
        assert_eq!(schedule.latest_at_or_before(at_ms + 60_000)?, Some(at_ms));
        assert!(schedule.next_after(at_ms)? >= at_ms + 365 * 86_400_000);
        Ok(())
    }
}
