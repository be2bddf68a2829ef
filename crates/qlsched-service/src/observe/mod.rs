//! What a replica tells the outside while it runs (`run --metrics-addr`): the Prometheus text
//! exposition of its rounds, and the `/healthz` and `/readyz` probes (docs/OPERATIONS.md,
//! "Metrics and probes"). The counters and histograms are fed by the lifecycle's
//! [`RoundEvent`]s; the gauges are read from the database when scraped, at most once per
//! cadence, on a connection of their own. No metric has a per-trigger label.

pub mod exposition;
pub mod http;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use self::exposition::Histogram;
use crate::coordinator::{Coordinator, GIVE_BACK_TIMEOUT};
use crate::lifecycle::{MAX_BACK_OFF, RoundEvent};
use qlsched_core::Liveness;
use qlsched_store::migrate::{RUNTIME_ROLE, check_capability, check_ready};
use qlsched_store::observe::{Gauges, check_writable, gauges, write_through_commit};
use qlsched_store::replicas::{LivenessCounts, liveness_counts};
use qlsched_store::retention::{RetentionState, retention_state};
use qlsched_store::{Store, StoreError};

/// The version and the commit of the binary a replica runs in, as `qlsched --version` names
/// them: the labels of `qlsched_build_info` and the release the replica registers. The binary
/// names them (its build script reads the commit) and hands them in, so that this library has no
/// build step of its own and does not rebuild each time HEAD moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Build {
    pub version: &'static str,
    pub commit: &'static str,
}

impl Build {
    /// What a replica registers as its version: the release and the commit, as semver build
    /// metadata (`0.2.0+0123456789ab`), so two builds of one release tell apart in the registry.
    pub fn release(&self) -> String {
        format!("{}+{}", self.version, self.commit)
    }
}

/// How long a scrape or a probe waits on the database before it answers without it.
const DATABASE_WAIT: Duration = Duration::from_secs(2);

/// Round and claim durations: a round is milliseconds, its bound is the lease (30 s by default).
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Schedule lag: tens of milliseconds on a healthy cluster, up to the grace (60 s by default)
/// when it falls behind.
const LAG_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// A misfire record's policy and reason, as stored.
type MisfireKey = (&'static str, &'static str);
/// Misfire records, and the occurrences passed over inside them.
type MisfireCounts = (u64, u64);

/// Everything counted since the replica started.
#[derive(Debug, Clone)]
struct Counts {
    rounds_succeeded: u64,
    rounds_failed: u64,
    claims_taken: u64,
    runs_admitted: u64,
    initialized: u64,
    skipped: u64,
    misfires: Vec<(MisfireKey, MisfireCounts)>,
    fence_losses: u64,
    definition_refusals: u64,
    rejected: u64,
    /// Refusals by SQLSTATE, in the order first met.
    admission_errors: Vec<(String, u64)>,
    unsettled: u64,
    undecidable: u64,
    released: u64,
    transactions: u64,
    serialization_retries: u64,
    batch_fallbacks: u64,
    round_duration: Histogram,
    claim_duration: Histogram,
    admission_duration: Histogram,
    schedule_lag: Histogram,
}

impl Default for Counts {
    fn default() -> Self {
        let policies = ["skip", "fire_once"];
        Counts {
            rounds_succeeded: 0,
            rounds_failed: 0,
            claims_taken: 0,
            runs_admitted: 0,
            initialized: 0,
            skipped: 0,
            // Every series exists from the start, so `increase()` sees the first misfire.
            misfires: policies
                .iter()
                .map(|policy| ((*policy, "beyond_grace"), (0, 0)))
                .collect(),
            fence_losses: 0,
            definition_refusals: 0,
            rejected: 0,
            admission_errors: Vec::new(),
            unsettled: 0,
            undecidable: 0,
            released: 0,
            transactions: 0,
            serialization_retries: 0,
            batch_fallbacks: 0,
            round_duration: Histogram::new(DURATION_BUCKETS),
            claim_duration: Histogram::new(DURATION_BUCKETS),
            admission_duration: Histogram::new(DURATION_BUCKETS),
            schedule_lag: Histogram::new(LAG_BUCKETS),
        }
    }
}

impl Counts {
    fn add(&mut self, event: &RoundEvent) {
        match event {
            RoundEvent::Failed {
                started, finished, ..
            } => {
                self.rounds_failed += 1;
                self.round_duration
                    .observe((*finished - *started).as_secs_f64());
            }
            RoundEvent::Finished {
                started,
                finished,
                report,
            } => {
                // A round whose rows the server refused counts as failed, as the registry and the
                // back-off count it; what it admitted is counted all the same.
                if report.failure.is_some() {
                    self.rounds_failed += 1;
                } else {
                    self.rounds_succeeded += 1;
                }
                for sqlstate in &report.rejected_sqlstates {
                    match self
                        .admission_errors
                        .iter_mut()
                        .find(|(s, _)| s == sqlstate)
                    {
                        Some((_, count)) => *count += 1,
                        None => self.admission_errors.push((sqlstate.clone(), 1)),
                    }
                }
                self.round_duration
                    .observe((*finished - *started).as_secs_f64());
                self.claim_duration.observe(report.claim_time.as_secs_f64());
                if report.transactions > 0 {
                    self.admission_duration
                        .observe(report.admit_time.as_secs_f64());
                }
                self.claims_taken += report.claimed as u64;
                self.runs_admitted += report.fired as u64;
                self.initialized += report.initialized as u64;
                self.skipped += report.skipped as u64;
                for passed in &report.passed_over {
                    let key = (passed.policy.as_str(), passed.reason.as_str());
                    match self.misfires.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, (records, occurrences))) => {
                            *records += 1;
                            *occurrences += passed.occurrences;
                        }
                        None => self.misfires.push((key, (1, passed.occurrences))),
                    }
                }
                self.fence_losses += report.fence_lost as u64;
                self.definition_refusals += report.definition_refused as u64;
                self.rejected += report.rejected as u64;
                self.unsettled += report.unsettled as u64;
                self.undecidable += report.undecidable as u64;
                self.released += report.released as u64;
                self.transactions += u64::from(report.transactions);
                self.serialization_retries += u64::from(report.serialization_retries);
                self.batch_fallbacks += u64::from(report.batch_fallbacks);
                // Run created − scheduled for, on the database clock: the claim's database time
                // less the occurrence, plus the admission that created the run (an upper bound
                // of the time from the claim to the run's creation, measured on this replica).
                let admission = report.admit_time.as_secs_f64();
                for run in &report.admitted {
                    let claimed = (run.claimed_at_ms - run.run.scheduled_for_ms) as f64 / 1000.0;
                    self.schedule_lag.observe(claimed + admission);
                }
            }
        }
    }
}

/// Readiness, as `/readyz` and `qlsched_ready` report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    NotReady(String),
}

/// A read of the database taken at most once per period: when, and what it said. Each has a lock
/// of its own, so that a probe of `/readyz` never waits for a scrape's gauges.
type Cached<T> = tokio::sync::Mutex<Option<(Instant, T)>>;

/// What a scrape reads from the database besides readiness.
#[derive(Debug, Clone)]
struct DatabaseReads {
    gauges: Gauges,
    replicas: LivenessCounts,
    retention: RetentionState,
}

/// The replica's rounds, once they start.
struct Running {
    coordinator: Arc<Coordinator>,
    store: Store,
    /// When the lifecycle started: the last round's start until the first round starts.
    since: Instant,
}

/// One replica's metrics and probes. Cloning shares them.
#[derive(Clone)]
pub struct Observer {
    inner: Arc<Inner>,
}

struct Inner {
    owner: String,
    build: Build,
    lease: Duration,
    cadence: Duration,
    counts: Mutex<Counts>,
    /// Set when the rounds start: the coordinator whose timer `/healthz` watches, and a pool of
    /// its own (one connection) for `/readyz` and the gauges, so that a scrape never waits for,
    /// nor delays, a round.
    running: Mutex<Option<Running>>,
    readiness: Cached<Readiness>,
    database: Cached<Result<DatabaseReads, String>>,
}

impl Observer {
    pub fn new(owner: &str, build: Build, lease: Duration, cadence: Duration) -> Self {
        Observer {
            inner: Arc::new(Inner {
                owner: owner.to_owned(),
                build,
                lease,
                cadence,
                counts: Mutex::new(Counts::default()),
                running: Mutex::new(None),
                readiness: Cached::default(),
                database: Cached::default(),
            }),
        }
    }

    /// The lifecycle starts: from now on `/healthz` watches its rounds, and `/readyz` and the
    /// gauges read the database through `store`.
    pub fn watch(&self, coordinator: Arc<Coordinator>, store: Store) {
        *self.running() = Some(Running {
            coordinator,
            store,
            since: Instant::now(),
        });
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Option<Running>> {
        self.inner.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn store(&self) -> Option<Store> {
        self.running().as_ref().map(|r| r.store.clone())
    }

    /// Counts one round.
    pub fn record(&self, event: &RoundEvent) {
        self.counts().add(event);
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.inner.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The longest a live timer goes without starting a round: the lease (a round's bound),
    /// the cadence (the sleep between rounds), widened by what the lifecycle may add to both:
    /// the back-off after failed rounds (up to `MAX_BACK_OFF`) and, for a round that ran out its
    /// lease, the cancel, the read that settles its admissions' outcome on a fresh connection and
    /// the give-back (`GIVE_BACK_TIMEOUT` each): a database that stops answering keeps a live
    /// timer green.
    pub fn health_bound(&self) -> Duration {
        self.inner.lease + self.inner.cadence.max(MAX_BACK_OFF) + GIVE_BACK_TIMEOUT * 3
    }

    /// `/healthz`: `Ok(detail)` while the timer is alive, `Err(reason)` when it is not.
    pub fn health(&self) -> Result<String, String> {
        // Before the first round, the timer's start counts as its last round.
        let last = self
            .running()
            .as_ref()
            .map(|r| r.coordinator.last_round_started().unwrap_or(r.since));
        match last {
            None => Ok("starting: connecting and checking the schema".to_owned()),
            Some(last) => judge_health(last.elapsed(), self.health_bound()),
        }
    }

    /// `/readyz`: schema ready, the runtime role's privileges, a working connection, a
    /// writable server whose commits complete. Checked at most once a second, whatever the probe
    /// rate, within [`DATABASE_WAIT`].
    pub async fn readiness(&self) -> Readiness {
        self.readiness_within(DATABASE_WAIT).await
    }

    /// [`Self::readiness`] within `limit`: the check's transaction writes the registry row as it
    /// is, so that its COMMIT waits as an admission's would (a synchronous standby that does not answer,
    /// `synchronous_commit = remote_apply` with none); a check that does not end within `limit`
    /// is not-ready, and its connection is closed, not pooled mid-transaction. The wait for a
    /// check already in flight (another probe's, a scrape's) counts in `limit`.
    async fn readiness_within(&self, limit: Duration) -> Readiness {
        let Some(store) = self.store() else {
            return Readiness::NotReady("starting: the replica has not started its rounds".into());
        };
        let deadline = tokio::time::Instant::now() + limit;
        let no_answer = || {
            Readiness::NotReady(format!(
                "the database did not answer, or a commit did not complete, within {}",
                qlsched_core::format_duration(limit)
            ))
        };
        let Ok(mut cached) = tokio::time::timeout_at(deadline, self.inner.readiness.lock()).await
        else {
            return no_answer();
        };
        if let Some((at, readiness)) = &*cached
            && at.elapsed() < Duration::from_secs(1)
        {
            return readiness.clone();
        }
        let schema = store.schema().clone();
        let owner = self.inner.owner.clone();
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let check = store
            .within(left, "the readiness check", |client| {
                Box::pin(async move {
                    check_ready(client, &schema).await?;
                    check_capability(client, &schema, RUNTIME_ROLE).await?;
                    check_writable(client).await?;
                    write_through_commit(client, &owner).await
                })
            })
            .await;
        let readiness = match check {
            Ok(()) => Readiness::Ready,
            Err(StoreError::TimedOut(_)) => no_answer(),
            Err(error) => Readiness::NotReady(error.to_string()),
        };
        *cached = Some((Instant::now(), readiness.clone()));
        readiness
    }

    /// The database gauges and the registry's replicas by liveness, read together on one
    /// connection at most once per cadence (at least a second apart). The replicas are every
    /// live replica's to show, since a hung one cannot say so itself. Within `limit`, the wait
    /// for a read already in flight (another scrape's) included.
    async fn database_reads(&self, limit: Duration) -> Result<DatabaseReads, String> {
        let Some(store) = self.store() else {
            return Err("starting".to_owned());
        };
        let deadline = tokio::time::Instant::now() + limit;
        let Ok(mut cached) = tokio::time::timeout_at(deadline, self.inner.database.lock()).await
        else {
            return Err("the database did not answer in time".to_owned());
        };
        let period = self.inner.cadence.max(Duration::from_secs(1));
        if let Some((at, reads)) = &*cached
            && at.elapsed() < period
        {
            return reads.clone();
        }
        let limit = deadline.saturating_duration_since(tokio::time::Instant::now());
        let owner = &self.inner.owner;
        let owner = owner.clone();
        let read = store
            .read_within(limit, "the database gauges", |client| {
                Box::pin(async move {
                    Ok(DatabaseReads {
                        gauges: gauges(client, &owner).await?,
                        replicas: liveness_counts(client).await?,
                        retention: retention_state(client).await?,
                    })
                })
            })
            .await;
        let result = match read {
            Ok(reads) => Ok(reads),
            Err(StoreError::TimedOut(_)) => Err("the database did not answer in time".to_owned()),
            Err(error) => Err(error.to_string()),
        };
        *cached = Some((Instant::now(), result.clone()));
        result
    }

    /// The Prometheus text exposition (format 0.0.4).
    /// Within [`DATABASE_WAIT`] as a whole, however the server answers: the readiness check
    /// gets half of it, the gauges what is left.
    pub async fn render(&self) -> String {
        let started = Instant::now();
        let readiness = self.readiness_within(DATABASE_WAIT / 2).await;
        let reads = self
            .database_reads(DATABASE_WAIT.saturating_sub(started.elapsed()))
            .await;
        if let Err(error) = &reads {
            tracing::warn!(%error, "metrics: the database gauges could not be read");
        }
        let counts = self.counts().clone();
        let healthy = self.health().is_ok();
        let batch = self.running().as_ref().map(|r| r.coordinator.batch());
        render(
            self.inner.build,
            &counts,
            reads.as_ref().ok(),
            &readiness,
            healthy,
            batch,
        )
    }
}

/// Alive while the last round started within `bound`.
fn judge_health(ago: Duration, bound: Duration) -> Result<String, String> {
    if ago <= bound {
        Ok(format!("last round started {:.3}s ago", ago.as_secs_f64()))
    } else {
        Err(format!(
            "no round started for {:.3}s (bound {}s: lease + cadence, back-off and give-back)",
            ago.as_secs_f64(),
            bound.as_secs_f64()
        ))
    }
}

/// The exposition of one scrape. The database's gauges, replicas and history are left out when
/// they could not be read, the claim batch before the rounds start.
fn render(
    build: Build,
    c: &Counts,
    reads: Option<&DatabaseReads>,
    readiness: &Readiness,
    healthy: bool,
    batch: Option<u16>,
) -> String {
    let gauges = reads.map(|r| r.gauges);
    let replicas = reads.map(|r| &r.replicas);
    let retention = reads.map(|r| &r.retention);
    use self::exposition::*;
    let mut out = Exposition::new();
    out.family(&ROUNDS)
        .sample(&["succeeded"], c.rounds_succeeded)
        .sample(&["failed"], c.rounds_failed);
    out.single(&CLAIMS_TAKEN, c.claims_taken);
    out.single(&RUNS_ADMITTED, c.runs_admitted);
    out.family(&SCHEDULES_ADVANCED)
        .sample(&["initialized"], c.initialized)
        .sample(&["skipped"], c.skipped);
    let mut records = out.family(&MISFIRE_RECORDS);
    for ((policy, reason), (count, _)) in &c.misfires {
        records.sample(&[*policy, *reason], count);
    }
    let mut passed_over = out.family(&OCCURRENCES_PASSED_OVER);
    for ((policy, reason), (_, occurrences)) in &c.misfires {
        passed_over.sample(&[*policy, *reason], occurrences);
    }
    out.single(&FENCE_LOSSES, c.fence_losses);
    out.single(&DEFINITION_REFUSALS, c.definition_refusals);
    out.single(&ADMISSIONS_REJECTED, c.rejected);
    let mut errors = out.family(&ADMISSION_ERRORS);
    for (sqlstate, count) in &c.admission_errors {
        errors.sample(&[sqlstate.as_str()], count);
    }
    out.single(&ADMISSIONS_UNSETTLED, c.unsettled);
    out.single(&UNDECIDABLE_ROWS, c.undecidable);
    out.single(&CLAIMS_RELEASED, c.released);
    out.single(&ADMISSION_TRANSACTIONS, c.transactions);
    out.single(&SERIALIZATION_RETRIES, c.serialization_retries);
    out.single(&BATCH_FALLBACKS, c.batch_fallbacks);
    out.family(&ROUND_DURATION).histogram(&c.round_duration);
    out.family(&CLAIM_DURATION).histogram(&c.claim_duration);
    out.family(&ADMISSION_DURATION)
        .histogram(&c.admission_duration);
    out.family(&SCHEDULE_LAG).histogram(&c.schedule_lag);
    if let Some(g) = gauges {
        out.single(&CLAIMS_HELD, g.claims_held as f64);
        out.single(&DUE_UNCLAIMED_ROWS, g.due_unclaimed as f64);
        out.single(&OLDEST_DUE_AGE, g.oldest_due_age_ms as f64 / 1000.0);
        out.single(&PAUSED_ROWS, g.paused as f64);
        out.single(&DISABLED_ROWS, g.disabled as f64);
    }
    let one = |yes: bool| if yes { 1.0 } else { 0.0 };
    out.single(&READY, one(*readiness == Readiness::Ready));
    out.single(&HEALTHY, one(healthy));
    out.family(&BUILD_INFO)
        .sample(&[build.version, build.commit], 1);
    if let Some(counts) = replicas {
        // One sample a state, so a state with none reads 0.
        let mut family = out.family(&REPLICAS);
        for liveness in Liveness::ALL {
            family.sample(&[&liveness.to_string()], counts.get(*liveness));
        }
    }
    if let Some(batch) = batch {
        out.single(&CLAIM_BATCH, f64::from(batch));
    }
    if let Some(r) = retention {
        out.single(
            &RETENTION_HORIZON,
            r.horizon_ms.map_or(0.0, |h| h as f64 / 1000.0),
        );
        out.single(&RETENTION_DELETED_RUNS, r.deleted_runs as f64);
        let mut rows = out.family(&HISTORY_ROWS);
        for table in &r.history {
            rows.sample(&[&table.table], table.rows_estimate.max(0));
        }
        let mut bytes = out.family(&HISTORY_BYTES);
        for table in &r.history {
            bytes.sample(&[&table.table], table.bytes.max(0));
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::{AdmittedRun, PassedOver, RoundReport};
    use qlsched_core::{MisfirePolicy, MisfireReason};
    use qlsched_store::RunIdentity;

    const BUILD: Build = Build {
        version: "0.0.0",
        commit: "0123456789ab",
    };

    fn finished(report: RoundReport) -> RoundEvent {
        let started = Instant::now();
        RoundEvent::Finished {
            started,
            finished: started + Duration::from_millis(12),
            report: Box::new(report),
        }
    }

    #[test]
    fn counts_rounds_admissions_misfires_and_lag() {
        let mut counts = Counts::default();
        let run = AdmittedRun {
            project_id: "p".into(),
            trigger_id: "t".into(),
            run: RunIdentity {
                run_id: uuid::Uuid::nil(),
                attempt_id: uuid::Uuid::nil(),
                idempotency_key: "k".into(),
                scheduled_for_ms: 10_000,
            },
            misfired: false,
            claimed_at_ms: 10_040,
        };
        counts.add(&finished(RoundReport {
            claimed: 3,
            fired: 1,
            skipped: 1,
            initialized: 1,
            misfires: 1,
            occurrences_passed_over: 7,
            passed_over: vec![PassedOver {
                policy: MisfirePolicy::FireOnce,
                reason: MisfireReason::BeyondGrace,
                occurrences: 7,
            }],
            transactions: 1,
            admit_time: Duration::from_millis(5),
            admitted: vec![run],
            ..RoundReport::default()
        }));
        counts.add(&failed());
        let text = scrape(&counts, None);
        for line in [
            "qlsched_rounds_total{outcome=\"succeeded\"} 1",
            "qlsched_rounds_total{outcome=\"failed\"} 1",
            "qlsched_claims_taken_total 3",
            "qlsched_runs_admitted_total 1",
            "qlsched_misfire_records_total{policy=\"fire_once\",reason=\"beyond_grace\"} 1",
            "qlsched_misfire_records_total{policy=\"skip\",reason=\"beyond_grace\"} 0",
            "qlsched_occurrences_passed_over_total{policy=\"fire_once\",reason=\"beyond_grace\"} 7",
            // 40 ms after the occurrence, plus 5 ms of admission: the 0.05 bucket, not 0.025.
            "qlsched_schedule_lag_seconds_bucket{le=\"0.025\"} 0",
            "qlsched_schedule_lag_seconds_bucket{le=\"0.05\"} 1",
            "qlsched_schedule_lag_seconds_count 1",
            "qlsched_round_duration_seconds_count 2",
            "qlsched_ready 1",
            "qlsched_due_unclaimed_rows 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        // Every metric has HELP and TYPE, and every sample belongs to a declared metric.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .filter(|b| text.contains(&format!("# TYPE {b} histogram")))
                .unwrap_or(name);
            assert!(
                text.contains(&format!("# HELP {base} ")),
                "{name} has no HELP"
            );
            assert!(name.starts_with("qlsched_"), "{name}");
        }
    }

    /// docs/alerts.yml names only metrics this binary exposes.
    #[test]
    fn the_example_alerts_name_metrics_that_exist() {
        let text = everything();
        let alerts = include_str!("../../../../docs/alerts.yml");
        let mut named = 0;
        for (at, _) in alerts.match_indices("qlsched_") {
            let name: String = alerts[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                text.contains(&format!("# TYPE {name} "))
                    || text.lines().any(|l| l.starts_with(&format!("{name}{{"))),
                "docs/alerts.yml names {name}, which /metrics does not expose"
            );
            named += 1;
        }
        assert!(named >= 5);
    }

    #[test]
    fn health_fails_past_lease_plus_cadence_and_the_lifecycle_bounds() {
        let observer = Observer::new("o", BUILD, Duration::from_secs(30), Duration::from_secs(1));
        // 30 s lease + max(1 s cadence, 5 s back-off cap) + 3 × 2 s: the cancel, the settling
        // read and the give-back.
        assert_eq!(observer.health_bound(), Duration::from_secs(41));
        assert!(observer.health().is_ok(), "starting is alive");
        let bound = observer.health_bound();
        assert!(judge_health(Duration::from_secs(2), bound).is_ok());
        assert!(judge_health(Duration::from_secs(40), bound).is_ok());
        let dead = judge_health(Duration::from_secs(42), bound).expect_err("a stopped timer");
        assert!(dead.contains("no round started for 42.000s"), "{dead}");
    }

    /// The whole exposition of a scrape with every metric present, as operators' dashboards and
    /// alerts read it: a change to a name, a label, a HELP or a TYPE shows here.
    #[test]
    fn the_exposition_is_unchanged() {
        let mut counts = Counts::default();
        counts.add(&failed());
        let text = scrape(&counts, Some(16));
        // The build the binary handed in, as it is: the snapshot masks it.
        assert!(
            text.contains("qlsched_build_info{version=\"0.0.0\",commit=\"0123456789ab\"} 1"),
            "{text}"
        );
        let text: String = text
            .lines()
            .map(|line| {
                if line.starts_with("qlsched_build_info{") {
                    "qlsched_build_info{version=\"[version]\",commit=\"[commit]\"} 1".to_owned()
                } else if line.starts_with("qlsched_round_duration_seconds_sum ") {
                    "qlsched_round_duration_seconds_sum [sum]".to_owned()
                } else {
                    line.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(exposition::escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    /// Every database read a scrape makes, each history table named.
    fn every_read() -> DatabaseReads {
        DatabaseReads {
            gauges: Gauges::default(),
            replicas: LivenessCounts::default(),
            retention: every_history_table(),
        }
    }

    /// A retention state naming each history table, so that every `qlsched_history_*` series is
    /// rendered.
    fn every_history_table() -> RetentionState {
        RetentionState {
            history: ["attempts", "run_events", "runs"]
                .iter()
                .map(|table| qlsched_store::retention::HistoryTable {
                    table: (*table).to_owned(),
                    rows_estimate: 0,
                    bytes: 0,
                })
                .collect(),
            ..RetentionState::default()
        }
    }

    /// A round that failed.
    fn failed() -> RoundEvent {
        RoundEvent::Failed {
            started: Instant::now(),
            finished: Instant::now(),
            error: "x".into(),
        }
    }

    /// A scrape of `counts` by a ready, healthy replica whose every database read answered, its
    /// claim batch `batch`.
    fn scrape(counts: &Counts, batch: Option<u16>) -> String {
        render(
            BUILD,
            counts,
            Some(&every_read()),
            &Readiness::Ready,
            true,
            batch,
        )
    }

    /// A scrape with every metric present.
    fn everything() -> String {
        scrape(&Counts::default(), Some(16))
    }

    /// The names docs/OPERATIONS.md, docs/alerts.yml and dashboards know: a metric is only ever
    /// added (here and in `exposition::ALL`), never renamed or dropped.
    #[test]
    fn the_metric_names_are_those_operators_know() {
        let known = [
            "qlsched_rounds_total counter outcome",
            "qlsched_claims_taken_total counter",
            "qlsched_runs_admitted_total counter",
            "qlsched_schedules_advanced_total counter decision",
            "qlsched_misfire_records_total counter policy,reason",
            "qlsched_occurrences_passed_over_total counter policy,reason",
            "qlsched_fence_losses_total counter",
            "qlsched_definition_refusals_total counter",
            "qlsched_admissions_rejected_total counter",
            "qlsched_admission_errors_total counter sqlstate",
            "qlsched_admissions_unsettled_total counter",
            "qlsched_undecidable_rows_total counter",
            "qlsched_claims_released_total counter",
            "qlsched_admission_transactions_total counter",
            "qlsched_serialization_retries_total counter",
            "qlsched_batch_fallbacks_total counter",
            "qlsched_round_duration_seconds histogram",
            "qlsched_claim_duration_seconds histogram",
            "qlsched_admission_duration_seconds histogram",
            "qlsched_schedule_lag_seconds histogram",
            "qlsched_claims_held gauge",
            "qlsched_due_unclaimed_rows gauge",
            "qlsched_oldest_due_age_seconds gauge",
            "qlsched_paused_rows gauge",
            "qlsched_disabled_rows gauge",
            "qlsched_ready gauge",
            "qlsched_healthy gauge",
            "qlsched_build_info gauge version,commit",
            "qlsched_replicas gauge liveness",
            "qlsched_claim_batch gauge",
            "qlsched_retention_horizon_seconds gauge",
            "qlsched_retention_deleted_runs_total counter",
            "qlsched_history_rows gauge table",
            "qlsched_history_bytes gauge table",
        ];
        let declared: Vec<String> = exposition::ALL
            .iter()
            .map(|m| {
                let kind = format!("{:?}", m.kind).to_lowercase();
                [m.name, &kind, &m.labels.join(",")]
                    .join(" ")
                    .trim_end()
                    .to_owned()
            })
            .collect();
        assert_eq!(declared, known);
        // A scrape with everything present writes every declared metric, once, in that order.
        let text = everything();
        let typed: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        let names: Vec<&str> = exposition::ALL.iter().map(|m| m.name).collect();
        assert_eq!(typed, names);
        // Every metric docs/OPERATIONS.md names is declared.
        let operations = include_str!("../../../../docs/OPERATIONS.md");
        for (at, _) in operations.match_indices("qlsched_") {
            let name: String = operations[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(&name);
            // Role names (qlsched_admin, ..., and the owner login of the guide's SQL) are not
            // metrics.
            if [
                "qlsched_admin",
                "qlsched_observer",
                "qlsched_runtime",
                "qlsched_dispatcher",
                "qlsched_worker_ingress",
                "qlsched_owner",
            ]
            .contains(&base)
                || base.starts_with("qlsched_bench")
            {
                continue;
            }
            assert!(
                names.contains(&base),
                "docs/OPERATIONS.md names {name}, which no metric declares"
            );
        }
    }
}
