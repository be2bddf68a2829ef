//! What the scheduler promises, checked against the database itself: one run per occurrence, one
//! attempt and two events per admitted run, claim columns all-or-nothing, the cursor never behind
//! the last scheduled occurrence. Used by `inspect invariants`, the demo, the bench and every
//! concurrency test.

use serde::Serialize;
use tokio_postgres::GenericClient;

use super::StoreError;
use super::row::Named;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct InvariantCounts {
    /// Runs created in the window checked.
    pub runs: i64,
    /// Occurrences (trigger, scheduled time) admitted more than once, under any revision.
    pub duplicate_occurrences: i64,
    /// Runs without their first attempt (the admission's; a dispatcher's retries come after it).
    pub runs_without_one_attempt: i64,
    /// Runs whose first two events are not `run.created` and `run.queued` (a dispatcher's
    /// events come after them).
    pub runs_without_two_events: i64,
    /// Attempts or events whose run may not exist: foreign keys to `runs` missing or not
    /// validated (with both in place, there can be none).
    pub orphans: i64,
    /// Schedule rows whose claim columns are partly set.
    pub half_written_claims: i64,
    /// Schedule rows whose cursor is at or behind their last scheduled occurrence.
    pub cursors_behind: i64,
    /// Schedule rows holding a claim (valid or expired): not a violation, but tests want zero
    /// after a clean stop.
    pub claims_held: i64,
}

impl InvariantCounts {
    /// The violations, as messages; empty when every promise holds.
    pub fn violations(&self) -> Vec<String> {
        let checks = [
            (
                self.duplicate_occurrences,
                "occurrences admitted more than once",
            ),
            (
                self.runs_without_one_attempt,
                "runs without exactly one attempt",
            ),
            (
                self.runs_without_two_events,
                "runs without exactly run.created and run.queued",
            ),
            (self.orphans, "attempts or events without their run"),
            (
                self.half_written_claims,
                "schedule rows with a half-written claim",
            ),
            (
                self.cursors_behind,
                "schedule rows whose cursor is behind the last scheduled occurrence",
            ),
        ];
        checks
            .iter()
            .filter(|(count, _)| *count > 0)
            .map(|(count, what)| format!("{count} {what}"))
            .collect()
    }
}

// Every count in one statement, so they describe one snapshot, each bounded by the window ($1 ms
// back from now) or by the schedule table, never by the history: the runs created in the window
// (the runs' creation-time index), each checked by key (its attempts by the attempts' run
// index, its events by their primary key, an occurrence's other runs by the runs' trigger
// index). The admission's writes are checked, attempt 1 and events 1 and 2: what a dispatcher
// adds after them is its own (docs/DESIGN.md §3.4). A duplicate is a cron occurrence (scheduler or backfill) with two runs, one of them
// created in the window; manual runs (`fire`) are not occurrences. An attempt or event without
// its run is what the foreign keys to `runs` forbid: the check is that both are there and
// validated (the catalog), not a pass over every attempt and event ever written.
const COUNTS: &str = "WITH recent AS MATERIALIZED (
        SELECT run_id, project_id, trigger_id, scheduled_for_ms, origin
        FROM runs WHERE created_at_ms >= now_ms() - $1
    )
    SELECT
    (SELECT count(*) FROM recent) AS runs,
    (SELECT count(*) FROM (
        SELECT DISTINCT r.project_id, r.trigger_id, r.scheduled_for_ms FROM recent r
        WHERE r.origin <> 'manual'
          AND EXISTS (SELECT 1 FROM runs o
                      WHERE o.project_id = r.project_id AND o.trigger_id = r.trigger_id
                        AND o.scheduled_for_ms = r.scheduled_for_ms AND o.run_id <> r.run_id
                        AND o.origin <> 'manual')) d) AS duplicate_occurrences,
    (SELECT count(*) FROM recent r
      WHERE (SELECT count(*) FROM attempts a WHERE a.run_id = r.run_id AND a.attempt_no = 1) <> 1)
        AS runs_without_one_attempt,
    (SELECT count(*) FROM recent r
      WHERE (SELECT array_agg(e.type ORDER BY e.seq) FROM run_events e
             WHERE e.run_id = r.run_id AND e.seq <= 2)
            IS DISTINCT FROM ARRAY['run.created', 'run.queued']) AS runs_without_two_events,
    2 - (SELECT count(*) FROM pg_constraint
         WHERE contype = 'f' AND convalidated AND confrelid = 'runs'::regclass
           AND conrelid IN ('attempts'::regclass, 'run_events'::regclass)) AS orphans,
    (SELECT count(*) FROM trigger_schedules
      WHERE NOT ((claim_owner IS NULL) = (claim_token IS NULL)
                 AND (claim_token IS NULL) = (claim_expires_at_ms IS NULL)))
        AS half_written_claims,
    (SELECT count(*) FROM trigger_schedules
      WHERE next_fire_at_ms IS NOT NULL AND last_scheduled_at_ms IS NOT NULL
        AND next_fire_at_ms <= last_scheduled_at_ms) AS cursors_behind,
    (SELECT count(*) FROM trigger_schedules WHERE claim_token IS NOT NULL) AS claims_held";

/// The counts over the runs created in the last `window_ms` (the whole history when it reaches
/// back that far: the tests and the demo pass [`WHOLE_HISTORY_MS`]) and over every schedule row.
pub async fn invariant_counts(
    client: &impl GenericClient,
    window_ms: i64,
) -> Result<InvariantCounts, StoreError> {
    let row = client.query_one(COUNTS, &[&window_ms]).await?;
    Ok(InvariantCounts {
        runs: row.col("runs")?,
        duplicate_occurrences: row.col("duplicate_occurrences")?,
        runs_without_one_attempt: row.col("runs_without_one_attempt")?,
        runs_without_two_events: row.col("runs_without_two_events")?,
        orphans: row.col("orphans")?,
        half_written_claims: row.col("half_written_claims")?,
        cursors_behind: row.col("cursors_behind")?,
        claims_held: row.col("claims_held")?,
    })
}

/// A window that reaches back past any run: every run is checked (small databases only).
pub const WHOLE_HISTORY_MS: i64 = i64::MAX / 4;

super::statements::statements! {
    COUNTS: Observer,
}
