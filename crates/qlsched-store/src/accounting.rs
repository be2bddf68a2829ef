//! Reads what occurrence accounting needs (each trigger's revision, cursor, runs and misfire
//! records in a window) and hands it to [`qlsched_core::accounting`], which decides what is
//! missing. Used by `inspect invariants`, the demo, the bench and every concurrency test.

use std::collections::HashMap;

use serde::Serialize;
use tokio_postgres::GenericClient;

use super::StoreError;
use super::row::Named;
use qlsched_core::accounting::{AccountingInput, check};
use qlsched_core::{CronSchedule, MISFIRE_RETENTION_MS, TriggerName};

/// The most gaps (or duplicates) listed by name; the counts are always whole.
pub const MAX_LISTED: usize = 100;

/// One occurrence that is not accounted for as it should be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OccurrenceFinding {
    pub project_id: String,
    pub trigger_id: String,
    pub trigger_revision: i64,
    pub occurrence_ms: i64,
}

/// What the accounting check found over its window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AccountingReport {
    /// The window's start in database time: now minus the window, or the retention bound of
    /// misfire records when the window reaches further back, or the retention horizon of runs
    /// when that is later.
    pub since_ms: i64,
    /// The runs' retention horizon: occurrences before it may have lost their runs and are not
    /// checked (null while retention has deleted nothing).
    pub horizon_ms: Option<i64>,
    /// Whether the horizon cut the window short (the window asked for reached before it).
    pub stopped_at_horizon: bool,
    pub triggers: u64,
    pub occurrences: u64,
    /// Occurrences with neither a run nor a misfire record (at most 100 listed).
    pub gap_count: u64,
    pub gaps: Vec<OccurrenceFinding>,
    /// Occurrences with more than one run of one revision, or runs off the pattern.
    pub duplicate_count: u64,
    pub duplicates: Vec<OccurrenceFinding>,
    /// Triggers whose window held more occurrences than the check walks: `PROJECT/TRIGGER`.
    pub truncated: Vec<String>,
}

impl AccountingReport {
    /// The violations, as messages; empty when every occurrence is accounted for.
    pub fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.gap_count > 0 {
            out.push(format!(
                "{} occurrences with neither a run nor a misfire record",
                self.gap_count
            ));
        }
        if self.duplicate_count > 0 {
            out.push(format!(
                "{} occurrences with more than one run, or runs off their pattern",
                self.duplicate_count
            ));
        }
        out
    }
}

// Every trigger whose revision has a cursor past the window's start, with the runs and misfire
// spans of that revision between the start (the later of the window's and the revision's first
// cursor) and the cursor, at one snapshot. A manual run (`qlsched fire`) is no cron occurrence
// and is left out; a backfilled one is its occurrence's run. The window starts $1 ms before the database's now.
// The window's start when no schedule row is in it.
// Both start at the later of now minus the window and the retention horizon (`store::retention`),
// read in the same snapshot as the runs: before the horizon a run may be gone, and its occurrence
// would look unaccounted for.
const SINCE: &str = "WITH w AS (SELECT now_ms() - $1::int8 AS asked_ms,
        (SELECT horizon_ms FROM run_retention WHERE singleton) AS horizon_ms)
    SELECT greatest(w.asked_ms, w.horizon_ms) AS since_ms, w.horizon_ms FROM w";

const ACCOUNTING: &str = "WITH w AS (
    SELECT greatest(now_ms() - $1::int8, h.horizon_ms) AS since_ms, h.horizon_ms
    FROM (SELECT (SELECT horizon_ms FROM run_retention WHERE singleton) AS horizon_ms) h)
SELECT s.project_id, s.trigger_id, s.trigger_revision, t.cron_expr, t.time_zone,
       greatest(s.accounted_from_ms, w.since_ms) AS from_ms, s.next_fire_at_ms AS cursor_ms,
       w.since_ms, w.horizon_ms,
       coalesce((SELECT array_agg(r.scheduled_for_ms) FROM runs r
                 WHERE r.project_id = s.project_id AND r.trigger_id = s.trigger_id
                   AND r.trigger_revision = s.trigger_revision
                   AND r.origin <> 'manual'
                   AND r.scheduled_for_ms >= greatest(s.accounted_from_ms, w.since_ms)
                   AND r.scheduled_for_ms < s.next_fire_at_ms), '{}') AS runs,
       coalesce((SELECT array_agg(m.first_occurrence_ms ORDER BY m.misfire_id) FROM misfires m
                 WHERE m.project_id = s.project_id AND m.trigger_id = s.trigger_id
                   AND m.trigger_revision = s.trigger_revision
                   AND m.last_occurrence_ms >= greatest(s.accounted_from_ms, w.since_ms)
                   AND m.first_occurrence_ms < s.next_fire_at_ms), '{}') AS misfire_first,
       coalesce((SELECT array_agg(m.last_occurrence_ms ORDER BY m.misfire_id) FROM misfires m
                 WHERE m.project_id = s.project_id AND m.trigger_id = s.trigger_id
                   AND m.trigger_revision = s.trigger_revision
                   AND m.last_occurrence_ms >= greatest(s.accounted_from_ms, w.since_ms)
                   AND m.first_occurrence_ms < s.next_fire_at_ms), '{}') AS misfire_last
FROM w, trigger_schedules s
JOIN triggers t ON t.project_id = s.project_id AND t.trigger_id = s.trigger_id
WHERE s.accounted_from_ms IS NOT NULL
  AND s.next_fire_at_ms > greatest(s.accounted_from_ms, w.since_ms)
ORDER BY s.project_id, s.trigger_id";

/// Checks every trigger's occurrences over the last `window_ms` of database time (capped at the
/// retention of misfire records, beyond which the records that account for occurrences are gone,
/// and never before the runs' retention horizon, before which runs may be gone).
pub async fn occurrence_accounting(
    client: &impl GenericClient,
    window_ms: i64,
) -> Result<AccountingReport, StoreError> {
    let window_ms = window_ms.clamp(0, MISFIRE_RETENTION_MS);
    let rows = client.query(ACCOUNTING, &[&window_ms]).await?;
    let mut report = AccountingReport::default();
    let mut schedules: HashMap<(String, String), CronSchedule> = HashMap::new();
    let (since_ms, horizon_ms) = match rows.first() {
        Some(row) => (row.col("since_ms")?, row.col("horizon_ms")?),
        None => {
            let row = client.query_one(SINCE, &[&window_ms]).await?;
            (row.col("since_ms")?, row.col("horizon_ms")?)
        }
    };
    report.since_ms = since_ms;
    report.horizon_ms = horizon_ms;
    report.stopped_at_horizon = horizon_ms == Some(since_ms);
    for row in &rows {
        let project_id: String = row.col("project_id")?;
        let trigger_id: String = row.col("trigger_id")?;
        let revision: i64 = row.col("trigger_revision")?;
        let cron_expr: String = row.col("cron_expr")?;
        let time_zone: String = row.col("time_zone")?;
        let schedule = match schedules.entry((cron_expr.clone(), time_zone.clone())) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(
                CronSchedule::parse(&cron_expr, &time_zone)
                    .map_err(|error| StoreError::BadInput(error.to_string()))?,
            ),
        };
        let runs: Vec<i64> = row.col("runs")?;
        let first: Vec<i64> = row.col("misfire_first")?;
        let last: Vec<i64> = row.col("misfire_last")?;
        let misfires: Vec<(i64, i64)> = first.into_iter().zip(last).collect();
        let findings = check(&AccountingInput {
            schedule,
            from_ms: row.col("from_ms")?,
            cursor_ms: row.col("cursor_ms")?,
            runs: &runs,
            misfires: &misfires,
        })
        .map_err(|error| StoreError::BadInput(error.to_string()))?;
        report.triggers += 1;
        report.occurrences += findings.occurrences;
        let finding = |occurrence_ms: i64| OccurrenceFinding {
            project_id: project_id.clone(),
            trigger_id: trigger_id.clone(),
            trigger_revision: revision,
            occurrence_ms,
        };
        report.gap_count += findings.gaps.len() as u64;
        let room = MAX_LISTED.saturating_sub(report.gaps.len());
        report
            .gaps
            .extend(findings.gaps.iter().take(room).map(|&o| finding(o)));
        let duplicates: Vec<i64> = findings
            .duplicates
            .iter()
            .chain(&findings.strays)
            .copied()
            .collect();
        report.duplicate_count += duplicates.len() as u64;
        let room = MAX_LISTED.saturating_sub(report.duplicates.len());
        report
            .duplicates
            .extend(duplicates.iter().take(room).map(|&o| finding(o)));
        if findings.truncated {
            report
                .truncated
                .push(TriggerName::new(project_id, trigger_id).to_string());
        }
    }
    Ok(report)
}

super::statements::statements! {
    ACCOUNTING: Observer,
    SINCE: Observer,
}
