//! `qlsched bench --steady`: the lag users feel, measured as they get it. From a plain publish
//! of N triggers (no cursors placed, nothing analyzed by hand) R replicas run `qlsched run`'s
//! code at its default flags; once every row has its first cursor, every occurrence in the
//! window is measured: runs admitted for it, and the lag from the occurrence to the run's commit
//! in database time (`created_at_ms - scheduled_for_ms`). Afterwards the invariants and the
//! occurrence accounting are checked on what was written.
//!
//! Before the replicas start, the same run measures two ceilings on the same server: durable
//! commits a second, and the admission's writes as batched SQL a second ([`super::Ceiling`]),
//! so that each occurrence's admission rate reads as a share of what the server can do at that
//! moment, on a shared machine whose speed moves from one run to the next. Over a long window
//! the report gives the trend of the per-occurrence maximum lag: a least-squares slope, and the
//! last three occurrences' worst lag against the first three's, since a lag that grows minute
//! over minute at a steady load will, given time, pass the grace.

use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::mpsc;

use super::{
    BenchError, Ceiling, drop_unless_kept, measure_ceiling, migrated_database, ratio,
    start_replicas,
};
use crate::replicas::stop_all;
use crate::sql::{
    FinishedRun, HistorySample, OccurrenceLag, database_now_ms, finish_queued, history_size,
    lag_by_occurrence, misfire_records, still_due_at, uninitialized_rows,
};
use qlsched_core::duration::format_duration;
use qlsched_core::manifest::parse_manifest;
use qlsched_core::{Batch, CoordinatorConfig, CronSchedule};
use qlsched_store::accounting::occurrence_accounting;
use qlsched_store::invariants::invariant_counts;
use qlsched_store::publish::publish;
use qlsched_store::retention::{RunRetention, retention_state};
use qlsched_store::upkeep::{ScheduleUpkeep, schedule_upkeep};
use qlsched_store::{ConnectionSettings, SchemaName, Store};

const PROJECT: &str = "steady";
const TASK: &str = "tick";
/// How long the replicas get to give every row its first cursor, and the last occurrence of the
/// window to be admitted, before the bench gives up on them.
const SETTLE_LIMIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(200);

/// What to measure.
#[derive(Debug, Clone)]
pub struct SteadyConfig {
    pub triggers: u32,
    pub replicas: u8,
    /// Every trigger's cron expression, in UTC.
    pub cron: String,
    /// The span of occurrences measured, from the first one after every row has a cursor.
    pub window: Duration,
    /// The replicas' settings: `qlsched run`'s defaults unless flags say otherwise.
    pub coordinator: CoordinatorConfig,
    /// The binary's version and commit, as the replicas register them.
    pub build: qlsched_service::observe::Build,
    /// How long each ceiling is probed, before the replicas start.
    pub ceiling_time: Duration,
    pub database: String,
    pub keep: bool,
    /// Parked rows and history added before measuring.
    pub lived_in: crate::LivedIn,
    /// Run a dispatcher beside the replicas that finishes every queued run each second, as a
    /// real one would (docs/DESIGN.md §3.4); the lags are then read as it finishes the runs.
    pub dispatch: bool,
    /// Delete finished runs this long after they finished, as `qlsched run` does (a pass a
    /// minute by the replica holding the lease); implies `dispatch`.
    pub retention: Option<Duration>,
}

/// What a steady run measured; the JSON shape is documented in `qlsched-bench(1)`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SteadyReport {
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["steady"])))]
    pub mode: &'static str,
    pub triggers: u32,
    pub replicas: u8,
    pub batch: Batch,
    pub cadence_ms: u64,
    pub cron: String,
    /// Per occurrence in the window, oldest first.
    pub occurrences: Vec<OccurrenceLag>,
    /// Each occurrence's admission rate: its runs over the time from the occurrence to its last
    /// run's commit, runs a second; in the order of `occurrences`.
    pub admission_rates_per_s: Vec<f64>,
    /// Single-row durable commits a second, with as many connections as replicas.
    pub commit_ceiling_per_s: f64,
    /// The admission's writes as batched SQL (256 a statement), runs a second, as many
    /// connections as replicas.
    pub batched_ceiling_per_s: f64,
    /// The same two ceilings probed again once the replicas stopped: a machine that got busier
    /// (or quieter) during the window shows here, and its lag trend is then the machine's, not
    /// the scheduler's.
    pub commit_ceiling_after_per_s: f64,
    /// As commit_ceiling_after_per_s.
    pub batched_ceiling_after_per_s: f64,
    /// How the worst lag of an occurrence moved over the window; none under two occurrences.
    pub trend: Option<LagTrend>,
    /// Over every run of the window.
    pub overall: Option<OccurrenceLag>,
    /// Occurrences in the window with fewer runs than triggers.
    pub short_occurrences: usize,
    pub runs: i64,
    /// Occurrences admitted more than once.
    pub duplicates: i64,
    pub misfire_records: i64,
    /// Occurrences (of the whole run) with neither a run nor a misfire record.
    pub unaccounted: u64,
    pub runs_without_one_attempt: i64,
    pub runs_without_two_events: i64,
    pub seed_s: f64,
    /// The schedule table's upkeep once the window ended: on a server whose autovacuum is off
    /// its dead versions grow 2 per occurrence and the lag with them.
    pub schedule_upkeep: ScheduleUpkeep,
    pub database: String,
    pub kept: bool,
    /// With a dispatcher: the runs it finished.
    pub dispatched: u64,
    /// The retention applied to finished runs, in milliseconds; null without.
    pub retention_ms: Option<u64>,
    /// The retention horizon at the end; null when nothing was deleted.
    pub horizon_ms: Option<i64>,
    /// With a dispatcher: the history's size every ten seconds from the replicas' start.
    pub history: Vec<HistorySample>,
    /// With a dispatcher: each minute of the window, oldest first (a long window's figures, and
    /// the spread of retention's deletes over it).
    pub minutes: Vec<MinuteSummary>,
}

/// One minute of the window `[from_ms, from_ms + 60 s)`: the lag of every run of its
/// occurrences as the dispatcher read it, what retention deleted in it, and the history's size
/// at its end.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MinuteSummary {
    /// The minute's start, in database time.
    pub from_ms: i64,
    /// Runs of the minute's occurrences, and their lag percentiles over all of them (nearest
    /// rank), not a median of the occurrences' percentiles.
    pub runs: i64,
    pub lag_p50_ms: i64,
    /// As lag_p50_ms.
    pub lag_p99_ms: i64,
    /// As lag_p50_ms.
    pub lag_max_ms: i64,
    /// Runs retention deleted in the minute: the growth of the history samples' `deleted_runs`
    /// from the last sample at or before its start to the last at or before its end (a pass
    /// that spans a sample at the boundary is split between two minutes).
    pub deleted_runs: i64,
    /// The last history sample at or before the minute's end; null before the first sample.
    pub history_at_end: Option<HistorySample>,
}

impl MinuteSummary {
    /// The minutes of `[from_ms, to_ms)`, from the runs the dispatcher finished and the history
    /// samples (oldest first); a minute cut short by the window's end counts as one.
    fn of(
        finished: &[FinishedRun],
        history: &[HistorySample],
        from_ms: i64,
        to_ms: i64,
    ) -> Vec<Self> {
        const MINUTE_MS: i64 = 60_000;
        let span = u64::try_from(to_ms - from_ms).unwrap_or(0);
        let minutes = usize::try_from(span.div_ceil(MINUTE_MS as u64)).unwrap_or(0);
        let mut lags: Vec<Vec<i64>> = vec![Vec::new(); minutes];
        for run in finished
            .iter()
            .filter(|run| run.scheduled_for_ms >= from_ms && run.scheduled_for_ms < to_ms)
        {
            if let Ok(minute) = usize::try_from((run.scheduled_for_ms - from_ms) / MINUTE_MS)
                && let Some(lags) = lags.get_mut(minute)
            {
                lags.push(run.lag_ms);
            }
        }
        let at = |ms: i64| history.iter().rev().find(|sample| sample.at_ms <= ms);
        let deleted = |ms: i64| at(ms).map_or(0, |sample| sample.deleted_runs);
        lags.into_iter()
            .enumerate()
            .map(|(minute, mut lags)| {
                let start = from_ms + minute as i64 * MINUTE_MS;
                let end = (start + MINUTE_MS).min(to_ms);
                lags.sort_unstable();
                let rank = |p: usize| {
                    lags.get((lags.len() * p).div_ceil(100).max(1) - 1)
                        .copied()
                        .unwrap_or(0)
                };
                MinuteSummary {
                    from_ms: start,
                    runs: lags.len() as i64,
                    lag_p50_ms: rank(50),
                    lag_p99_ms: rank(99),
                    lag_max_ms: lags.last().copied().unwrap_or(0),
                    deleted_runs: deleted(end) - deleted(start),
                    history_at_end: at(end).cloned(),
                }
            })
            .collect()
    }
}

/// How the per-occurrence maximum lag moved over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LagTrend {
    /// Least-squares slope of the maximum lag over the occurrences, in milliseconds per minute
    /// of the window: about 0 when the lag holds, positive when it grows.
    pub max_lag_slope_ms_per_min: f64,
    /// The worst maximum lag of the first three occurrences, and of the last three.
    pub first_three_max_ms: i64,
    /// As first_three_max_ms.
    pub last_three_max_ms: i64,
    /// `last_three_max_ms / first_three_max_ms`.
    pub last_over_first: f64,
    /// The lowest occurrence's admission rate as a share of the batched-SQL ceiling.
    pub min_rate_of_batched_ceiling: f64,
}

impl LagTrend {
    /// The trend of `lags` (oldest first), with `rates` their admission rates; `None` under two.
    pub fn of(lags: &[OccurrenceLag], rates: &[f64], batched_ceiling_per_s: f64) -> Option<Self> {
        if lags.len() < 2 {
            return None;
        }
        let points: Vec<(f64, f64)> = lags
            .iter()
            .map(|lag| {
                (
                    (lag.scheduled_for_ms - lags[0].scheduled_for_ms) as f64 / 60_000.0,
                    lag.lag_max_ms as f64,
                )
            })
            .collect();
        let n = points.len() as f64;
        let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
        let covariance: f64 = points
            .iter()
            .map(|(x, y)| (x - mean_x) * (y - mean_y))
            .sum();
        let variance: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
        let slope = if variance > 0.0 {
            covariance / variance
        } else {
            0.0
        };
        let worst = |part: &[OccurrenceLag]| part.iter().map(|l| l.lag_max_ms).max().unwrap_or(0);
        let first = worst(&lags[..lags.len().min(3)]);
        let last = worst(&lags[lags.len().saturating_sub(3)..]);
        let min_rate = rates.iter().copied().fold(f64::INFINITY, f64::min);
        Some(LagTrend {
            max_lag_slope_ms_per_min: slope,
            first_three_max_ms: first,
            last_three_max_ms: last,
            last_over_first: ratio(last as f64, first as f64),
            min_rate_of_batched_ceiling: if min_rate.is_finite() {
                ratio(min_rate, batched_ceiling_per_s)
            } else {
                0.0
            },
        })
    }
}

/// An occurrence's runs over the time to its last run's commit, a second.
fn admission_rate(lag: &OccurrenceLag) -> f64 {
    ratio(lag.runs as f64, lag.lag_max_ms.max(1) as f64 / 1_000.0)
}

impl SteadyReport {
    /// What this run says is wrong, as messages; empty when every promise held.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.occurrences.is_empty() {
            problems.push("no occurrence of the window was admitted".to_owned());
        }
        for (count, what) in [
            (
                self.short_occurrences as i64,
                "occurrences with fewer runs than triggers",
            ),
            (self.duplicates, "occurrences admitted more than once"),
            (
                i64::try_from(self.unaccounted).unwrap_or(i64::MAX),
                "occurrences not accounted for",
            ),
            (self.runs_without_one_attempt, "runs without one attempt"),
            (self.runs_without_two_events, "runs without two events"),
        ] {
            if count > 0 {
                problems.push(format!("{count} {what}"));
            }
        }
        problems
    }
}

impl SteadyConfig {
    /// Refuses what cannot give a measurement, before anything is created.
    pub fn check(&self) -> Result<CronSchedule, BenchError> {
        self.coordinator.validate()?;
        if self.window < Duration::from_secs(1) {
            return Err(BenchError::Config(format!(
                "window must be at least 1s, got {}",
                format_duration(self.window)
            )));
        }
        Ok(CronSchedule::parse(&self.cron, "UTC")?)
    }
}

/// Runs the steady bench against the server `server` names; the scratch database is dropped
/// afterwards, whatever happened, unless `config.keep`.
pub async fn run_steady(
    server: &ConnectionSettings,
    schema: &SchemaName,
    config: &SteadyConfig,
) -> Result<SteadyReport, BenchError> {
    let schedule = config.check()?;
    let outcome = measure(server, schema, config, &schedule).await;
    drop_unless_kept(server, &config.database, config.keep).await;
    outcome
}

async fn measure(
    server: &ConnectionSettings,
    schema: &SchemaName,
    config: &SteadyConfig,
    schedule: &CronSchedule,
) -> Result<SteadyReport, BenchError> {
    let seeding = Instant::now();
    let (settings, mut admin) = migrated_database(server, schema, &config.database).await?;
    let manifest = parse_manifest(&steady_manifest(config).to_string())?;
    publish(&mut admin, schema, &manifest, false).await?;
    config
        .lived_in
        .build(&mut admin, PROJECT, &format!("t{:07}", 1))
        .await?;
    let seed_s = seeding.elapsed().as_secs_f64();
    let ceiling = |kind| {
        measure_ceiling(
            kind,
            &settings,
            schema,
            config.replicas,
            config.ceiling_time,
        )
    };
    let commit_ceiling_per_s = ceiling(Ceiling::Commits).await?;
    let batched_ceiling_per_s = ceiling(Ceiling::BatchedAdmissions).await?;
    if let Some(warning) = schedule_upkeep(&admin).await?.warning() {
        tracing::warn!("{warning}: this bench measures such a server");
    }
    let started_ms = database_now_ms(&admin).await?;

    // Rounds report nothing the steady bench needs: it reads what was committed.
    let (events, mut received) = mpsc::unbounded_channel();
    let drain = tokio::spawn(async move { while received.recv().await.is_some() {} });
    let replicas = start_replicas(
        &settings,
        schema,
        &config.coordinator,
        config.build,
        config.replicas,
        events,
    )
    .await?;
    let dispatcher = if config.dispatch || config.retention.is_some() {
        Some(Dispatcher::start(&settings, schema).await?)
    } else {
        None
    };
    let retainer = match config.retention {
        Some(retention) => Some(start_retention(&settings, schema, config, retention).await?),
        None => None,
    };
    let measured = measure_window(&admin, config, schedule).await;
    stop_all(replicas).await;
    drain.abort();
    if let Some(retainer) = retainer {
        retainer.abort();
    }
    let dispatched = match dispatcher {
        Some(dispatcher) => Some(dispatcher.stop().await?),
        None => None,
    };
    let (from_ms, to_ms) = measured?;
    let commit_ceiling_after_per_s = ceiling(Ceiling::Commits).await?;
    let batched_ceiling_after_per_s = ceiling(Ceiling::BatchedAdmissions).await?;

    // With a dispatcher the lags are those it read as it finished each run: retention may have
    // deleted the runs since.
    let mut lags = match &dispatched {
        Some((finished, _)) => lags_of(finished, from_ms, to_ms),
        None => lag_by_occurrence(&admin, from_ms, to_ms).await?,
    };
    let repeated = dispatched
        .as_ref()
        .map_or(0, |(finished, _)| repeated(finished));
    let minutes = match &dispatched {
        Some((finished, history)) => MinuteSummary::of(finished, history, from_ms, to_ms),
        None => Vec::new(),
    };
    let overall = lags.pop();
    let rates: Vec<f64> = lags.iter().map(admission_rate).collect();
    let trend = LagTrend::of(&lags, &rates, batched_ceiling_per_s);
    let expected = i64::from(config.triggers);
    let since_start = database_now_ms(&admin).await? - started_ms + 1_000;
    // The runs of this bench only: the lived-in history is older.
    let counts = invariant_counts(&admin, since_start).await?;
    let accounting = occurrence_accounting(&admin, since_start).await?;
    Ok(SteadyReport {
        mode: "steady",
        triggers: config.triggers,
        replicas: config.replicas,
        batch: config.coordinator.batch,
        cadence_ms: u64::try_from(config.coordinator.cadence.as_millis()).unwrap_or(u64::MAX),
        cron: config.cron.clone(),
        short_occurrences: lags.iter().filter(|lag| lag.runs < expected).count(),
        occurrences: lags,
        admission_rates_per_s: rates,
        commit_ceiling_per_s,
        batched_ceiling_per_s,
        commit_ceiling_after_per_s,
        batched_ceiling_after_per_s,
        trend,
        overall,
        runs: counts.runs,
        duplicates: counts.duplicate_occurrences + accounting.duplicate_count as i64 + repeated,
        misfire_records: misfire_records(&admin).await?,
        unaccounted: accounting.gap_count,
        runs_without_one_attempt: counts.runs_without_one_attempt,
        runs_without_two_events: counts.runs_without_two_events,
        seed_s,
        schedule_upkeep: schedule_upkeep(&admin).await?,
        database: config.database.clone(),
        kept: config.keep,
        dispatched: dispatched
            .as_ref()
            .map_or(0, |(finished, _)| finished.len() as u64),
        retention_ms: config
            .retention
            .map(|r| u64::try_from(r.as_millis()).unwrap_or(u64::MAX)),
        horizon_ms: retention_state(&admin).await?.horizon_ms,
        history: dispatched.map(|(_, history)| history).unwrap_or_default(),
        minutes,
    })
}

/// How often the bench's dispatcher finishes the queued runs, and how many of its passes make
/// one sample of the history's size.
const DISPATCH_EVERY: Duration = Duration::from_secs(1);
const SAMPLE_EVERY_PASSES: u32 = 10;

/// The bench's dispatcher, on a connection of its own: each second it finishes every queued run
/// (`sql::finish_queued`), keeping each run's occurrence and lag, and every ten seconds
/// it samples the history's size.
struct Dispatcher {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<Dispatched, BenchError>>,
}

/// What the bench's dispatcher saw: the runs it finished, and the history's samples.
type Dispatched = (Vec<FinishedRun>, Vec<HistorySample>);

impl Dispatcher {
    async fn start(settings: &ConnectionSettings, schema: &SchemaName) -> Result<Self, BenchError> {
        let client = settings.connect(schema, "qlsched bench dispatcher").await?;
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut finished = Vec::new();
            let mut history = vec![history_size(&client).await?];
            let mut passes = 0u32;
            loop {
                let last = tokio::time::timeout(DISPATCH_EVERY, &mut stopped)
                    .await
                    .is_ok();
                // Ten minutes back covers any run still queued: the bench's lags are seconds.
                finished.extend(finish_queued(&client, 600_000).await?);
                passes += 1;
                if last || passes.is_multiple_of(SAMPLE_EVERY_PASSES) {
                    history.push(history_size(&client).await?);
                }
                if last {
                    return Ok((finished, history));
                }
            }
        });
        Ok(Dispatcher { stop, task })
    }

    /// Finishes what is still queued, and hands back what it saw.
    async fn stop(self) -> Result<Dispatched, BenchError> {
        let _ = self.stop.send(());
        self.task
            .await
            .map_err(|error| BenchError::Config(format!("the bench's dispatcher: {error}")))?
    }
}

/// Retention as the replicas run it (`replica::retain_runs`): a pass a minute by each replica's
/// owner in turn, only the lease's holder deleting; every finished status kept `retention`.
async fn start_retention(
    settings: &ConnectionSettings,
    schema: &SchemaName,
    config: &SteadyConfig,
    retention: Duration,
) -> Result<tokio::task::JoinHandle<()>, BenchError> {
    let store = Store::open_replica(settings, schema, "qlsched bench retention", 2).await?;
    let keep = Some(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX));
    let runs = RunRetention {
        succeeded_ms: keep,
        failed_ms: keep,
        cancelled_ms: keep,
    };
    let owners: Vec<String> = (0..config.replicas)
        .map(|replica| format!("{}-{replica}", config.coordinator.owner))
        .collect();
    let every = qlsched_service::replica::Retention::DEFAULT.every;
    Ok(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            for owner in &owners {
                qlsched_service::replica::retain_runs(store.clone(), owner.clone(), runs).await;
            }
        }
    }))
}

/// Per occurrence in `[from_ms, to_ms)` of the runs the dispatcher finished: runs and lag
/// percentiles (nearest rank), and the same over all of them last, as `lag_by_occurrence`.
fn lags_of(finished: &[FinishedRun], from_ms: i64, to_ms: i64) -> Vec<OccurrenceLag> {
    let mut by_occurrence: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    for run in finished
        .iter()
        .filter(|run| run.scheduled_for_ms >= from_ms && run.scheduled_for_ms < to_ms)
    {
        by_occurrence
            .entry(run.scheduled_for_ms)
            .or_default()
            .push(run.lag_ms);
    }
    let lag = |scheduled_for_ms: i64, lags: &mut Vec<i64>| {
        lags.sort_unstable();
        let rank = |p: usize| lags[(lags.len() * p).div_ceil(100).max(1) - 1];
        OccurrenceLag {
            scheduled_for_ms,
            runs: lags.len() as i64,
            lag_p50_ms: rank(50),
            lag_p99_ms: rank(99),
            lag_max_ms: lags.last().copied().unwrap_or(0),
        }
    };
    let mut all: Vec<i64> = by_occurrence.values().flatten().copied().collect();
    let mut out: Vec<OccurrenceLag> = by_occurrence
        .iter_mut()
        .map(|(at, lags)| lag(*at, lags))
        .collect();
    if !all.is_empty() {
        out.push(lag(to_ms, &mut all));
    }
    out
}

/// Occurrences (trigger, time) the dispatcher finished more than one run of.
fn repeated(finished: &[FinishedRun]) -> i64 {
    let mut seen = std::collections::HashSet::new();
    finished
        .iter()
        .filter(|run| !seen.insert((&run.trigger_id, run.scheduled_for_ms)))
        .count() as i64
}

/// Waits for every row's first cursor, then through the window, then for the window's last
/// occurrence to be admitted by every trigger; returns the window `[from, to)` in database time.
async fn measure_window(
    admin: &tokio_postgres::Client,
    config: &SteadyConfig,
    schedule: &CronSchedule,
) -> Result<(i64, i64), BenchError> {
    let give_up = Instant::now() + SETTLE_LIMIT;
    while uninitialized_rows(admin).await? > 0 {
        if Instant::now() > give_up {
            return Err(BenchError::Config(format!(
                "the replicas did not initialize {} triggers within {}",
                config.triggers,
                format_duration(SETTLE_LIMIT)
            )));
        }
        tokio::time::sleep(POLL).await;
    }
    let now_ms = database_now_ms(admin).await?;
    let from_ms = schedule.next_after(now_ms)?;
    let window_ms = i64::try_from(config.window.as_millis()).unwrap_or(i64::MAX);
    let to_ms = from_ms.saturating_add(window_ms);
    let Some(last) = schedule
        .latest_before(to_ms)?
        .filter(|&last| last >= from_ms)
    else {
        return Err(BenchError::Config(format!(
            "no occurrence of {} within a window of {}",
            config.cron,
            format_duration(config.window)
        )));
    };
    let ahead = u64::try_from(last - now_ms).unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(ahead)).await;
    let give_up = Instant::now() + SETTLE_LIMIT;
    // Until every cursor has moved past the last occurrence: a walk of one index entry, never a
    // read of the runs, which would compete with the admissions it waits for.
    while still_due_at(admin, last).await? && Instant::now() < give_up {
        tokio::time::sleep(POLL).await;
    }
    Ok((from_ms, to_ms))
}

fn steady_manifest(config: &SteadyConfig) -> serde_json::Value {
    // misfire and misfire_grace are left out: the defaults are what users get.
    let triggers: Vec<serde_json::Value> = (1..=config.triggers)
        .map(|n| serde_json::json!({ "id": format!("t{n:07}"), "task": TASK, "cron": config.cron }))
        .collect();
    serde_json::json!({
        "projects": [{
            "id": PROJECT,
            "tasks": [{ "id": TASK, "execution": { "kind": "remote_worker", "image": "qlsched/bench" } }],
            "triggers": triggers,
        }]
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn lag(minute: i64, max_ms: i64) -> OccurrenceLag {
        OccurrenceLag {
            scheduled_for_ms: minute * 60_000,
            runs: 100_000,
            lag_p50_ms: max_ms / 2,
            lag_p99_ms: max_ms,
            lag_max_ms: max_ms,
        }
    }

    fn finished(trigger: &str, at: i64, lag_ms: i64) -> FinishedRun {
        FinishedRun {
            trigger_id: trigger.to_owned(),
            scheduled_for_ms: at,
            lag_ms,
        }
    }

    /// The dispatcher's lags grouped as `lag_by_occurrence` groups the runs: per occurrence in
    /// the window, then all of them; a second run of one occurrence is counted as repeated.
    #[test]
    fn the_dispatchers_lags_are_grouped_per_occurrence_in_the_window() {
        let runs: Vec<FinishedRun> = (1..=100)
            .map(|n| finished(&format!("t{n}"), 1_000, n))
            .chain([finished("t1", 2_000, 7), finished("t1", 5_000, 9)])
            .collect();
        let lags = lags_of(&runs, 1_000, 3_000);
        assert_eq!(lags.len(), 3, "two occurrences and the overall row");
        assert_eq!(
            (
                lags[0].runs,
                lags[0].lag_p50_ms,
                lags[0].lag_p99_ms,
                lags[0].lag_max_ms
            ),
            (100, 50, 99, 100)
        );
        assert_eq!((lags[1].scheduled_for_ms, lags[1].runs), (2_000, 1));
        assert_eq!((lags[2].scheduled_for_ms, lags[2].runs), (3_000, 101));
        assert_eq!(repeated(&runs), 0);
        let twice = [finished("t1", 1_000, 5), finished("t1", 1_000, 6)];
        assert_eq!(repeated(&twice), 1);
        assert!(lags_of(&[], 0, 1).is_empty());
    }

    fn sample(at_ms: i64, runs: i64, deleted_runs: i64) -> HistorySample {
        HistorySample {
            at_ms,
            runs,
            attempts: runs,
            events: 2 * runs,
            runs_bytes: 8_192 * runs,
            attempts_bytes: 0,
            events_bytes: 0,
            deleted_runs,
            wal_bytes: 0,
        }
    }

    /// Each minute of the window gets the percentiles of all of its runs, the deletes between
    /// the samples at its two ends, and the sample at its end; runs outside the window are left
    /// out and a minute cut short by the window's end is still one.
    #[test]
    fn the_window_is_summed_up_minute_by_minute() {
        let runs: Vec<FinishedRun> = (1..=100)
            .map(|n| finished(&format!("t{n}"), 1_000, n))
            .chain((1..=10).map(|n| finished(&format!("t{n}"), 61_000, 1_000 * n)))
            .chain([finished("t1", 999, 50_000), finished("t1", 150_000, 50_000)])
            .collect();
        let history = [
            sample(0, 0, 0),
            sample(50_000, 500, 0),
            sample(60_000, 600, 0),
            sample(100_000, 400, 300),
            sample(120_500, 500, 300),
        ];
        let minutes = MinuteSummary::of(&runs, &history, 1_000, 150_000);
        assert_eq!(minutes.len(), 3);
        let figures = |m: &MinuteSummary| {
            (
                m.from_ms,
                m.runs,
                m.lag_p50_ms,
                m.lag_p99_ms,
                m.lag_max_ms,
                m.deleted_runs,
            )
        };
        assert_eq!(figures(&minutes[0]), (1_000, 100, 50, 99, 100, 0));
        assert_eq!(
            figures(&minutes[1]),
            (61_000, 10, 5_000, 10_000, 10_000, 300)
        );
        assert_eq!(figures(&minutes[2]), (121_000, 0, 0, 0, 0, 0));
        assert_eq!(
            minutes[0].history_at_end.as_ref().map(|s| s.runs),
            Some(600)
        );
        assert_eq!(
            minutes[2].history_at_end.as_ref().map(|s| s.at_ms),
            Some(120_500)
        );
        assert!(MinuteSummary::of(&runs, &[], 1_000, 1_000).is_empty());
        assert!(
            MinuteSummary::of(&[], &[], 1_000, 2_000)[0]
                .history_at_end
                .is_none()
        );
    }

    #[test]
    fn a_lag_that_holds_has_no_slope_and_one_that_grows_shows_it() {
        let flat: Vec<_> = (0..10).map(|m| lag(m, 12_000)).collect();
        let rates: Vec<_> = flat.iter().map(admission_rate).collect();
        let trend = LagTrend::of(&flat, &rates, 10_000.0).unwrap();
        assert_eq!(trend.max_lag_slope_ms_per_min, 0.0);
        assert_eq!(trend.last_over_first, 1.0);
        // 100,000 runs in 12 s: 8,333 a second, 0.83 of a 10,000 ceiling.
        assert!((trend.min_rate_of_batched_ceiling - 0.8333).abs() < 0.001);

        let growing: Vec<_> = (0..10).map(|m| lag(m, 8_000 + 2_000 * m)).collect();
        let rates: Vec<_> = growing.iter().map(admission_rate).collect();
        let trend = LagTrend::of(&growing, &rates, 10_000.0).unwrap();
        assert!((trend.max_lag_slope_ms_per_min - 2_000.0).abs() < 1e-6);
        assert_eq!(
            (trend.first_three_max_ms, trend.last_three_max_ms),
            (12_000, 26_000)
        );
        assert!(LagTrend::of(&growing[..1], &rates[..1], 10_000.0).is_none());
    }
}
