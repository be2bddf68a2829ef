//! What the scheduler promises, checked against the database itself: one run per occurrence, one
//! attempt and two events per admitted run, claim columns all-or-nothing, the cursor never behind
//! the last scheduled occurrence. Used by `inspect invariants`, the demo, the bench and every
//! concurrency test.

use serde::Serialize;
use tokio_postgres::GenericClient;

use super::StoreError;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InvariantCounts {
    pub runs: i64,
    /// Occurrences (trigger, scheduled time) admitted more than once, under any revision.
    pub duplicate_occurrences: i64,
    /// Runs with other than exactly one attempt.
    pub runs_without_one_attempt: i64,
    /// Runs with other than exactly the `run.created` and `run.queued` events.
    pub runs_without_two_events: i64,
    /// Attempts or events whose run does not exist.
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

// Every count in one statement, so they describe one snapshot. A duplicate is a cron occurrence
// (scheduler or backfill) with two runs; manual runs (`fire`) are not occurrences.
const COUNTS: &str = "SELECT
    (SELECT count(*) FROM runs),
    (SELECT count(*) FROM (SELECT 1 FROM runs WHERE origin <> 'manual'
                           GROUP BY project_id, trigger_id, scheduled_for_ms
                           HAVING count(*) > 1) d),
    (SELECT count(*) FROM runs r
      WHERE (SELECT count(*) FROM attempts a WHERE a.run_id = r.run_id) <> 1),
    (SELECT count(*) FROM runs r
      WHERE (SELECT array_agg(e.type ORDER BY e.seq) FROM run_events e WHERE e.run_id = r.run_id)
            IS DISTINCT FROM ARRAY['run.created', 'run.queued']),
    (SELECT count(*) FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = a.run_id))
      + (SELECT count(*) FROM run_events e WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = e.run_id)),
    (SELECT count(*) FROM trigger_schedules
      WHERE NOT ((claim_owner IS NULL) = (claim_token IS NULL)
                 AND (claim_token IS NULL) = (claim_expires_at_ms IS NULL))),
    (SELECT count(*) FROM trigger_schedules
      WHERE next_fire_at_ms IS NOT NULL AND last_scheduled_at_ms IS NOT NULL
        AND next_fire_at_ms <= last_scheduled_at_ms),
    (SELECT count(*) FROM trigger_schedules WHERE claim_token IS NOT NULL)";

pub async fn invariant_counts(client: &impl GenericClient) -> Result<InvariantCounts, StoreError> {
    let row = client.query_one(COUNTS, &[]).await?;
    Ok(InvariantCounts {
        runs: row.get(0),
        duplicate_occurrences: row.get(1),
        runs_without_one_attempt: row.get(2),
        runs_without_two_events: row.get(3),
        orphans: row.get(4),
        half_written_claims: row.get(5),
        cursors_behind: row.get(6),
        claims_held: row.get(7),
    })
}

super::statements::statements! {
    COUNTS: Observer,
}
