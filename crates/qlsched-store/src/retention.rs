//! How long the scheduler keeps history (docs/DESIGN.md §3.3): misfire records
//! (`store::misfires`, a week), the replica registry (`store::replicas`, a day after a replica
//! stopped, any other after its `--forget-stale-after` since its last heartbeat: 15 minutes by
//! default; a week for rows of releases before 0.2.0), the audit of operator actions (here, 90 days), and
//! finished runs with their attempts and events (here, a retention per status the operator sets).
//!
//! Runs are deleted by one replica at a time: the holder of the lease in `run_retention`, taken
//! in the first statement of each batch's transaction. A replica that finds the lease held (or
//! its row locked by the leader's batch) skips, so two replicas never delete at once and none
//! repeats another's work. Each batch is one short transaction: the oldest finished runs of each
//! status past its retention, by the `runs_finished` index, deleted with their attempts and
//! events, manual runs' keys retired, and the retention horizon moved past the latest occurrence
//! deleted, all or nothing. The horizon is what keeps the scheduler's guarantees once runs are
//! gone: a backfill or a repeated `fire --request-id` before it is refused (`store::control`),
//! `inspect invariants` stops at it (`store::accounting`).

use serde::Serialize;
use tokio_postgres::GenericClient;

use super::StoreError;
use super::row::Named;

/// The audit of operator actions (claims by hand, expiries, pauses, resumes, fires, backfills)
/// is kept this long: 90 days.
pub const AUDIT_RETENTION_MS: i64 = 90 * 24 * 3_600_000;

// Deletes audit rows older than $1 ms of database time, oldest first, at most $2 a call (the
// audit's time index), so a replica's pass never holds a long transaction.
const PRUNE_AUDIT: &str = "DELETE FROM schedule_audit WHERE audit_id IN (
    SELECT audit_id FROM schedule_audit WHERE at_ms < now_ms() - $1
    ORDER BY at_ms LIMIT $2)";

/// Deletes up to `limit` audit rows older than [`AUDIT_RETENTION_MS`]; returns how many.
pub async fn prune_audit(client: &impl GenericClient, limit: i64) -> Result<u64, StoreError> {
    Ok(client
        .execute(PRUNE_AUDIT, &[&AUDIT_RETENTION_MS, &limit])
        .await?)
}

/// How long finished runs are kept, per status, in milliseconds after they finished; `None`
/// keeps that status for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunRetention {
    pub succeeded_ms: Option<i64>,
    pub failed_ms: Option<i64>,
    pub cancelled_ms: Option<i64>,
}

impl RunRetention {
    /// Whether anything is ever deleted.
    pub fn is_off(&self) -> bool {
        self.succeeded_ms.is_none() && self.failed_ms.is_none() && self.cancelled_ms.is_none()
    }
}

// Takes or keeps the retention lease for owner $1 for $2 ms, unless another replica holds it
// unexpired; a row locked by the leader's batch in flight is skipped, not waited for. No row
// back: not this replica's turn.
const TAKE_LEASE: &str = "UPDATE run_retention
    SET leader = $1, lease_expires_at_ms = now_ms() + $2
    WHERE singleton
      AND (leader IS NULL OR leader = $1 OR lease_expires_at_ms < now_ms())
      AND singleton IN (SELECT singleton FROM run_retention FOR UPDATE SKIP LOCKED)
    RETURNING leader";

// One batch: the oldest finished runs of each status that finished more than its retention
// ($1 succeeded, $2 failed, $3 cancelled; null keeps the status) ago, at most $4 of each, by the
// `runs_finished` index; their events and attempts, then the runs, each looked up by key (`=
// ANY` of the batch's ids: an index probe per run, never a join the planner could make a pass
// over the table), in one statement (the foreign keys are checked at its end, when the children
// are gone). A manual run's key is retired, so that its request id is not admitted again.
// Returns the counts and the latest occurrence gone.
const DELETE_FINISHED: &str = "WITH doomed AS MATERIALIZED (
    SELECT coalesce(array_agg(run_id), '{}') AS ids FROM (
        (SELECT run_id FROM runs WHERE status = 'succeeded' AND finished_at_ms IS NOT NULL
            AND finished_at_ms < now_ms() - $1::int8 ORDER BY finished_at_ms LIMIT $4)
        UNION ALL
        (SELECT run_id FROM runs WHERE status = 'failed' AND finished_at_ms IS NOT NULL
            AND finished_at_ms < now_ms() - $2::int8 ORDER BY finished_at_ms LIMIT $4)
        UNION ALL
        (SELECT run_id FROM runs WHERE status = 'cancelled' AND finished_at_ms IS NOT NULL
            AND finished_at_ms < now_ms() - $3::int8 ORDER BY finished_at_ms LIMIT $4)) d
), gone_events AS (
    DELETE FROM run_events WHERE run_id = ANY ((SELECT ids FROM doomed)::uuid[]) RETURNING 1
), gone_attempts AS (
    DELETE FROM attempts WHERE run_id = ANY ((SELECT ids FROM doomed)::uuid[]) RETURNING 1
), gone_runs AS (
    DELETE FROM runs
    WHERE run_id = ANY ((SELECT ids FROM doomed)::uuid[])
      AND status IN ('succeeded', 'failed', 'cancelled')
    RETURNING run_id, project_id, trigger_id, idempotency_key, scheduled_for_ms, origin
), retired AS (
    INSERT INTO retired_manual_runs
        (idempotency_key, run_id, project_id, trigger_id, scheduled_for_ms, retired_at_ms)
    SELECT idempotency_key, run_id, project_id, trigger_id, scheduled_for_ms, now_ms()
    FROM gone_runs WHERE origin = 'manual'
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone_runs) AS runs,
       (SELECT count(*) FROM gone_attempts) AS attempts,
       (SELECT count(*) FROM gone_events) AS events,
       (SELECT count(*) FROM retired) AS retired,
       (SELECT max(scheduled_for_ms) FROM gone_runs) AS latest_occurrence_ms";

// Moves the horizon past occurrence $1 (never back) and counts $2 runs deleted, in the batch's
// transaction.
const ADVANCE_HORIZON: &str = "UPDATE run_retention
    SET horizon_ms = greatest(horizon_ms, $1::int8 + 1), deleted_runs = deleted_runs + $2,
        last_deleted_at_ms = now_ms()
    WHERE singleton";

/// What one batch deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionBatch {
    pub runs: u64,
    pub attempts: u64,
    pub events: u64,
    /// Manual runs whose keys were retired.
    pub retired_keys: u64,
}

impl RetentionBatch {
    pub fn add(&mut self, other: &RetentionBatch) {
        self.runs += other.runs;
        self.attempts += other.attempts;
        self.events += other.events;
        self.retired_keys += other.retired_keys;
    }
}

/// One batch of run retention for `owner`, in the caller's transaction (its first statement
/// takes the lease, so call it first): `None` when another replica holds the lease, or its row
/// is locked by the leader's batch in flight; else what was deleted, at most `limit` runs of
/// each status.
pub async fn delete_finished_runs(
    client: &impl GenericClient,
    owner: &str,
    lease_ms: i64,
    retention: &RunRetention,
    limit: i64,
) -> Result<Option<RetentionBatch>, StoreError> {
    if client
        .query_opt(TAKE_LEASE, &[&owner, &lease_ms])
        .await?
        .is_none()
    {
        return Ok(None);
    }
    let row = client
        .query_one(
            DELETE_FINISHED,
            &[
                &retention.succeeded_ms,
                &retention.failed_ms,
                &retention.cancelled_ms,
                &limit,
            ],
        )
        .await?;
    let count = |name: &'static str| -> Result<u64, StoreError> {
        Ok(u64::try_from(row.col::<i64>(name)?).unwrap_or(0))
    };
    let batch = RetentionBatch {
        runs: count("runs")?,
        attempts: count("attempts")?,
        events: count("events")?,
        retired_keys: count("retired")?,
    };
    if let Some(latest) = row.col::<Option<i64>>("latest_occurrence_ms")? {
        client
            .execute(ADVANCE_HORIZON, &[&latest, &(batch.runs as i64)])
            .await?;
    }
    Ok(Some(batch))
}

/// Where retention stands, and how large the history is: for `inspect` and the metrics.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RetentionState {
    /// Occurrences before this (epoch ms) may have lost their runs to retention; null while
    /// nothing has been deleted.
    pub horizon_ms: Option<i64>,
    /// The replica holding the retention lease, and until when (null when none ever did).
    pub leader: Option<String>,
    pub lease_expires_at_ms: Option<i64>,
    /// When retention last deleted, and how many runs it has deleted in all.
    pub last_deleted_at_ms: Option<i64>,
    pub deleted_runs: i64,
    /// The history's size, per table: the planner's row estimate (as of the last vacuum or
    /// analyze) and the bytes on disk, indexes and TOAST included.
    pub history: Vec<HistoryTable>,
}

/// One table of the history.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HistoryTable {
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["runs", "attempts", "run_events"])))]
    pub table: String,
    /// The planner's estimate (`pg_class.reltuples`); -1 before the first vacuum or analyze.
    pub rows_estimate: i64,
    pub bytes: i64,
}

// The retention row and each history table's size, by the catalog (never a count).
const RETENTION_STATE: &str = "SELECT horizon_ms, leader, lease_expires_at_ms,
        last_deleted_at_ms, deleted_runs,
        (SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_class c
          WHERE c.oid IN ('runs'::regclass, 'attempts'::regclass, 'run_events'::regclass))
            AS tables,
        (SELECT array_agg(c.reltuples::int8 ORDER BY c.relname) FROM pg_class c
          WHERE c.oid IN ('runs'::regclass, 'attempts'::regclass, 'run_events'::regclass))
            AS rows_estimate,
        (SELECT array_agg(pg_total_relation_size(c.oid) ORDER BY c.relname) FROM pg_class c
          WHERE c.oid IN ('runs'::regclass, 'attempts'::regclass, 'run_events'::regclass))
            AS bytes
    FROM run_retention WHERE singleton";

/// Reads [`RetentionState`].
pub async fn retention_state(client: &impl GenericClient) -> Result<RetentionState, StoreError> {
    let row = client.query_one(RETENTION_STATE, &[]).await?;
    let tables: Vec<String> = row.col("tables")?;
    let rows: Vec<i64> = row.col("rows_estimate")?;
    let bytes: Vec<i64> = row.col("bytes")?;
    Ok(RetentionState {
        horizon_ms: row.col("horizon_ms")?,
        leader: row.col("leader")?,
        lease_expires_at_ms: row.col("lease_expires_at_ms")?,
        last_deleted_at_ms: row.col("last_deleted_at_ms")?,
        deleted_runs: row.col("deleted_runs")?,
        history: tables
            .into_iter()
            .zip(rows)
            .zip(bytes)
            .map(|((table, rows_estimate), bytes)| HistoryTable {
                table,
                rows_estimate,
                bytes,
            })
            .collect(),
    })
}

super::statements::statements! {
    PRUNE_AUDIT: Runtime,
    TAKE_LEASE: Runtime,
    DELETE_FINISHED: Runtime,
    ADVANCE_HORIZON: Runtime,
    RETENTION_STATE: Observer | Runtime,
}
