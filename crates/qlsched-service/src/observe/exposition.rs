//! Every metric `/metrics` exposes, declared once: name, type, labels and help. The text
//! exposition (Prometheus text format 0.0.4) writes `# HELP` and `# TYPE` from these
//! declarations, and a sample can only be written through its metric, with as many label
//! values as the metric declares labels. docs/OPERATIONS.md and docs/alerts.yml name these
//! metrics: a name, a label or a meaning never changes, metrics are only ever added.

use std::fmt::{Display, Write as _};

/// The type a metric declares in `# TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One metric family's declaration.
#[derive(Debug)]
pub struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

const fn counter(
    name: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> Metric {
    Metric {
        name,
        kind: Kind::Counter,
        labels,
        help,
    }
}

const fn gauge(name: &'static str, labels: &'static [&'static str], help: &'static str) -> Metric {
    Metric {
        name,
        kind: Kind::Gauge,
        labels,
        help,
    }
}

const fn histogram(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        kind: Kind::Histogram,
        labels: &[],
        help,
    }
}

pub const ROUNDS: Metric = counter(
    "qlsched_rounds_total",
    &["outcome"],
    "Rounds run by this replica, by outcome (succeeded, failed).",
);
pub const CLAIMS_TAKEN: Metric =
    counter("qlsched_claims_taken_total", &[], "Schedule rows claimed.");
pub const RUNS_ADMITTED: Metric = counter(
    "qlsched_runs_admitted_total",
    &[],
    "Runs admitted (queued): occurrences fired.",
);
pub const SCHEDULES_ADVANCED: Metric = counter(
    "qlsched_schedules_advanced_total",
    &["decision"],
    "Claimed rows advanced without a run, by decision (initialized, skipped).",
);
pub const MISFIRE_RECORDS: Metric = counter(
    "qlsched_misfire_records_total",
    &["policy", "reason"],
    "Misfire records written (decisions that passed occurrences over), by policy and reason.",
);
pub const OCCURRENCES_PASSED_OVER: Metric = counter(
    "qlsched_occurrences_passed_over_total",
    &["policy", "reason"],
    "Occurrences passed over inside misfire records, by policy and reason.",
);
pub const FENCE_LOSSES: Metric = counter(
    "qlsched_fence_losses_total",
    &[],
    "Admissions whose claim fence no longer matched: nothing written.",
);
pub const DEFINITION_REFUSALS: Metric = counter(
    "qlsched_definition_refusals_total",
    &[],
    "Admissions whose claim held and whose definitions no longer admit them: nothing written.",
);
pub const ADMISSIONS_REJECTED: Metric = counter(
    "qlsched_admissions_rejected_total",
    &[],
    "Admissions the database refused; their claims are left to expire.",
);
pub const ADMISSIONS_UNSETTLED: Metric = counter(
    "qlsched_admissions_unsettled_total",
    &[],
    "Admissions not settled (retries ran out, or the database went away); claims given back.",
);
pub const UNDECIDABLE_ROWS: Metric = counter(
    "qlsched_undecidable_rows_total",
    &[],
    "Claimed rows whose stored cron could not be evaluated.",
);
pub const CLAIMS_RELEASED: Metric = counter(
    "qlsched_claims_released_total",
    &[],
    "Claims given back by rounds: rows not due after all, admissions that did not commit.",
);
pub const ADMISSION_TRANSACTIONS: Metric = counter(
    "qlsched_admission_transactions_total",
    &[],
    "Admission transactions run, fall-backs included.",
);
pub const SERIALIZATION_RETRIES: Metric = counter(
    "qlsched_serialization_retries_total",
    &[],
    "Admission transactions retried after a serialization failure.",
);
pub const ADMISSION_ERRORS: Metric = counter(
    "qlsched_admission_errors_total",
    &["sqlstate"],
    "Admissions the database refused with an error of the row's own, by SQLSTATE (P0001: a trigger function raised).",
);
pub const BATCH_FALLBACKS: Metric = counter(
    "qlsched_batch_fallbacks_total",
    &[],
    "Batched admissions that failed and were admitted row by row.",
);
pub const ROUND_DURATION: Metric = histogram(
    "qlsched_round_duration_seconds",
    "Duration of a round (claim, decide, admit, release), failed rounds included.",
);
pub const CLAIM_DURATION: Metric = histogram(
    "qlsched_claim_duration_seconds",
    "Duration of a round's claim (one round trip).",
);
pub const ADMISSION_DURATION: Metric = histogram(
    "qlsched_admission_duration_seconds",
    "Duration of a round's admission, retries and fall-backs included.",
);
pub const SCHEDULE_LAG: Metric = histogram(
    "qlsched_schedule_lag_seconds",
    "Run created minus scheduled for, database clock (claim time plus the admission).",
);
pub const CLAIMS_HELD: Metric = gauge(
    "qlsched_claims_held",
    &[],
    "Valid claims held by this replica's owner (database, at most once per cadence).",
);
pub const DUE_UNCLAIMED_ROWS: Metric = gauge(
    "qlsched_due_unclaimed_rows",
    &[],
    "Eligible rows due (or uninitialized) and not validly claimed, counted up to 1000.",
);
pub const OLDEST_DUE_AGE: Metric = gauge(
    "qlsched_oldest_due_age_seconds",
    &[],
    "Database now minus the cursor of the most overdue unclaimed eligible row; 0 if none.",
);
pub const PAUSED_ROWS: Metric = gauge(
    "qlsched_paused_rows",
    &[],
    "Schedule rows an operator paused: parked, never counted as due or overdue.",
);
pub const DISABLED_ROWS: Metric = gauge(
    "qlsched_disabled_rows",
    &[],
    "Schedule rows of a disabled trigger or a suspended project, not paused: parked.",
);
pub const READY: Metric = gauge(
    "qlsched_ready",
    &[],
    "1 when /readyz would answer 200 (schema, privileges, connection, writable server).",
);
pub const HEALTHY: Metric = gauge(
    "qlsched_healthy",
    &[],
    "1 when /healthz would answer 200 (the round timer is alive).",
);
pub const BUILD_INFO: Metric = gauge(
    "qlsched_build_info",
    &["version", "commit"],
    "Always 1; the labels name the version and the commit of this binary.",
);
pub const REPLICAS: Metric = gauge(
    "qlsched_replicas",
    &["liveness"],
    "Registered replicas by liveness (live; stalled: no heartbeat for two cadences; stale: none \
     for lease + cadence; stopped), database clock.",
);
pub const CLAIM_BATCH: Metric = gauge(
    "qlsched_claim_batch",
    &[],
    "Rows the next round claims at most: --batch, or where the adaptive batch stands.",
);

pub const RETENTION_HORIZON: Metric = gauge(
    "qlsched_retention_horizon_seconds",
    &[],
    "The runs' retention horizon (Unix time): occurrences before it may have lost their runs; 0 \
     while retention has deleted nothing.",
);
pub const RETENTION_DELETED_RUNS: Metric = counter(
    "qlsched_retention_deleted_runs_total",
    &[],
    "Finished runs retention has deleted from this database, by every replica (database).",
);
pub const HISTORY_ROWS: Metric = gauge(
    "qlsched_history_rows",
    &["table"],
    "Rows of the history tables (runs, attempts, run_events): the planner's estimate as of the \
     last vacuum or analyze.",
);
pub const HISTORY_BYTES: Metric = gauge(
    "qlsched_history_bytes",
    &["table"],
    "Bytes on disk of the history tables (runs, attempts, run_events), indexes and TOAST included.",
);

/// Every metric, in the order a scrape writes them. The database gauges, the replicas and the
/// claim batch are left out of a scrape that cannot read them.
pub const ALL: &[&Metric] = &[
    &ROUNDS,
    &CLAIMS_TAKEN,
    &RUNS_ADMITTED,
    &SCHEDULES_ADVANCED,
    &MISFIRE_RECORDS,
    &OCCURRENCES_PASSED_OVER,
    &FENCE_LOSSES,
    &DEFINITION_REFUSALS,
    &ADMISSIONS_REJECTED,
    &ADMISSION_ERRORS,
    &ADMISSIONS_UNSETTLED,
    &UNDECIDABLE_ROWS,
    &CLAIMS_RELEASED,
    &ADMISSION_TRANSACTIONS,
    &SERIALIZATION_RETRIES,
    &BATCH_FALLBACKS,
    &ROUND_DURATION,
    &CLAIM_DURATION,
    &ADMISSION_DURATION,
    &SCHEDULE_LAG,
    &CLAIMS_HELD,
    &DUE_UNCLAIMED_ROWS,
    &OLDEST_DUE_AGE,
    &PAUSED_ROWS,
    &DISABLED_ROWS,
    &READY,
    &HEALTHY,
    &BUILD_INFO,
    &REPLICAS,
    &CLAIM_BATCH,
    &RETENTION_HORIZON,
    &RETENTION_DELETED_RUNS,
    &HISTORY_ROWS,
    &HISTORY_BYTES,
];

/// A cumulative histogram with fixed bucket bounds, in seconds.
#[derive(Debug, Clone)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, seconds: f64) {
        let seconds = seconds.max(0.0);
        for (bound, count) in self.bounds.iter().zip(self.counts.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }
}

/// The text exposition being written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    pub fn new() -> Self {
        Exposition {
            out: String::with_capacity(8192),
        }
    }

    /// Starts `metric`'s family: its `# HELP` and `# TYPE`, then its samples.
    pub fn family(&mut self, metric: &'static Metric) -> Family<'_> {
        let _ = writeln!(self.out, "# HELP {} {}", metric.name, metric.help);
        let _ = writeln!(self.out, "# TYPE {} {}", metric.name, metric.kind.as_str());
        Family {
            out: &mut self.out,
            metric,
        }
    }

    /// A counter or gauge without labels: its family and its one sample.
    pub fn single(&mut self, metric: &'static Metric, value: impl Display) {
        self.family(metric).sample(&[], value);
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// The samples of one family.
pub struct Family<'a> {
    out: &'a mut String,
    metric: &'static Metric,
}

impl Family<'_> {
    /// One sample of a counter or gauge, with a value for each declared label, in order.
    pub fn sample(&mut self, values: &[&str], value: impl Display) -> &mut Self {
        debug_assert_ne!(self.metric.kind, Kind::Histogram, "{}", self.metric.name);
        assert_eq!(
            values.len(),
            self.metric.labels.len(),
            "{}: one value per label",
            self.metric.name
        );
        let _ = write!(self.out, "{}", self.metric.name);
        if !values.is_empty() {
            let pairs: Vec<String> = self
                .metric
                .labels
                .iter()
                .zip(values)
                .map(|(label, value)| format!("{label}=\"{}\"", escape(value)))
                .collect();
            let _ = write!(self.out, "{{{}}}", pairs.join(","));
        }
        let _ = writeln!(self.out, " {value}");
        self
    }

    /// A histogram's buckets, sum and count.
    pub fn histogram(&mut self, histogram: &Histogram) {
        debug_assert_eq!(self.metric.kind, Kind::Histogram, "{}", self.metric.name);
        let name = self.metric.name;
        for (bound, count) in histogram.bounds.iter().zip(&histogram.counts) {
            let _ = writeln!(self.out, "{name}_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(self.out, "{name}_bucket{{le=\"+Inf\"}} {}", histogram.count);
        let _ = writeln!(self.out, "{name}_sum {}", histogram.sum);
        let _ = writeln!(self.out, "{name}_count {}", histogram.count);
    }
}

/// A label value as the text format quotes it.
pub fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
