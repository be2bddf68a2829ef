//! What `qlsched bench` needs of the database besides the scheduler's own statements: database
//! time, cursors placed so that a published burst is due, a schedule table padded to a million
//! rows, and the commit-ceiling probe (docs/PERFORMANCE.md). Bench-only: nothing on the
//! scheduler's path calls these, and they run in a scratch database as its owner.

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, GenericClient};

use qlsched_store::StoreError;
use qlsched_store::row::Named;

// Database time, the only clock (docs/DESIGN.md §4.1): the burst occurrence is set relative to it.
const NOW_MS: &str = "SELECT now_ms()";

// An admin reset of cursors, as publish does for a new revision: the cursor moves and so does
// state_version, so a claim taken before (there is none in a fresh bench database) could not
// commit. Triggers named in $2 get cursor $3 (due); every other trigger of project $1 gets $4.
const PLACE_CURSORS: &str = "UPDATE trigger_schedules s
    SET next_fire_at_ms = CASE WHEN s.trigger_id = ANY($2) THEN $3::bigint ELSE $4::bigint END,
        state_version = s.state_version + 1, updated_at_ms = now_ms()
    WHERE s.project_id = $1";

// Copies of template trigger $2 of project $1 named `<$3><n>` for n in 1..=$4, so that padding a
// million rows is one statement instead of a million-trigger manifest. The copies share the
// template's definition and digest; they are never due within a bench.
const PAD_TRIGGERS: &str = "INSERT INTO triggers
        (project_id, trigger_id, task_id, revision, kind, provider, enabled, cron_expr, time_zone,
         misfire_policy, misfire_grace_ms, content_digest, created_at_ms, updated_at_ms)
    SELECT t.project_id, $3 || lpad(g::text, 7, '0'), t.task_id, t.revision, t.kind, t.provider,
           t.enabled, t.cron_expr, t.time_zone, t.misfire_policy, t.misfire_grace_ms,
           t.content_digest, now_ms(), now_ms()
    FROM triggers t CROSS JOIN generate_series(1, $4::bigint) g
    WHERE t.project_id = $1 AND t.trigger_id = $2";

// The schedule rows of those copies, with cursor $4: not due.
const PAD_SCHEDULES: &str = "INSERT INTO trigger_schedules
        (project_id, trigger_id, trigger_revision, next_fire_at_ms, updated_at_ms)
    SELECT t.project_id, t.trigger_id, t.revision, $3::bigint, now_ms()
    FROM triggers t
    WHERE t.project_id = $1 AND t.trigger_id LIKE $2 || '%'";

// Fresh planner statistics after bulk loading, as a long-lived database would have them; without
// them the claim's plan at a million rows would be judged on an empty table's estimates.
const ANALYZE: &str = "ANALYZE projects, tasks, triggers, trigger_schedules";

// The commit-ceiling probe: the cheapest durable transaction the server can do, one row INSERT
// in autocommit, so its rate is what fsync and WAL flushing allow with this many connections.
const CREATE_PROBE: &str = "CREATE TABLE IF NOT EXISTS bench_commit_probe (
    connection integer NOT NULL,
    at_ms      bigint NOT NULL
)";
const PROBE_INSERT: &str =
    "INSERT INTO bench_commit_probe (connection, at_ms) VALUES ($1, now_ms())";
const DROP_PROBE: &str = "DROP TABLE IF EXISTS bench_commit_probe";

// The batched-SQL ceiling: what the admission's writes cost with no claim, no decision and no
// fence check, as one SERIALIZABLE statement a batch: the schedule rows' cursors moved on, runs,
// their attempts and two events each, in copies of the four tables with their indexes and
// checks (no foreign keys: the copies stand alone). Its rate in runs a second is the most a
// round's admission could reach on this server. One statement (a DO block), so that it
// prepares like every other; connection c owns schedule rows c·10,000 + 1..=256.
const CREATE_BATCH_PROBE: &str = "DO $$ BEGIN
        CREATE TABLE bench_ceiling_schedules (LIKE trigger_schedules INCLUDING ALL);
        INSERT INTO bench_ceiling_schedules (project_id, trigger_id, trigger_revision,
            next_fire_at_ms, updated_at_ms)
        SELECT 'ceiling', 't' || (c * 10000 + g), 1, 0, 0
        FROM generate_series(0, 63) c CROSS JOIN generate_series(1, 256) g;
        CREATE TABLE bench_ceiling_runs (LIKE runs INCLUDING ALL);
        CREATE TABLE bench_ceiling_attempts (LIKE attempts INCLUDING ALL);
        CREATE TABLE bench_ceiling_events (LIKE run_events INCLUDING ALL);
    END $$";
// Batch $3 rows of connection $1, its batch number $2.
const BATCH_PROBE_INSERT: &str = "WITH s AS (
        UPDATE bench_ceiling_schedules
        SET next_fire_at_ms = next_fire_at_ms + 60000, last_scheduled_at_ms = next_fire_at_ms,
            state_version = state_version + 1, updated_at_ms = now_ms()
        WHERE project_id = 'ceiling'
          AND trigger_id IN (SELECT 't' || ($1::int4 * 10000 + g) FROM generate_series(1, $3::int4) g)
        RETURNING 1
    ), r AS (
        INSERT INTO bench_ceiling_runs (run_id, project_id, trigger_id, trigger_revision, task_id,
            task_revision, execution_revision_id, idempotency_key, status, scheduled_for_ms,
            created_at_ms, queued_at_ms, origin)
        SELECT gen_random_uuid(), 'ceiling', 't' || g, 1, 'tick', 1, gen_random_uuid(),
               'ceiling:' || $1::int4 || ':' || $2::int8 || ':' || g, 'queued', $2::int8,
               now_ms(), now_ms(), 'cron'
        FROM generate_series(1, $3::int4) g
        RETURNING run_id
    ), a AS (
        INSERT INTO bench_ceiling_attempts (attempt_id, run_id, attempt_no, executor, state,
            created_at_ms)
        SELECT gen_random_uuid(), run_id, 1, 'remote_worker', 'claimed', now_ms() FROM r
        RETURNING 1
    ), e AS (
        INSERT INTO bench_ceiling_events (run_id, seq, type, at_ms, payload)
        SELECT r.run_id, x.seq, x.type, now_ms(), '{}'::jsonb
        FROM r CROSS JOIN (VALUES (1, 'run.created'), (2, 'run.queued')) AS x(seq, type)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM r)
        + 0 * ((SELECT count(*) FROM s) + (SELECT count(*) FROM a) + (SELECT count(*) FROM e))";
const DROP_BATCH_PROBE: &str = "DROP TABLE IF EXISTS bench_ceiling_schedules, bench_ceiling_runs,
    bench_ceiling_attempts, bench_ceiling_events";
// The admission's isolation, for the probe's connections.
const SERIALIZABLE: &str = "SET default_transaction_isolation = serializable";

/// The tables a ceiling's probe writes in, by the statements that create and drop them.
pub struct Probe {
    create: &'static str,
    drop: &'static str,
}

/// The commit ceiling's table.
pub const COMMIT_PROBE: Probe = Probe {
    create: CREATE_PROBE,
    drop: DROP_PROBE,
};

/// The batched-SQL ceiling's tables.
pub const BATCH_PROBE: Probe = Probe {
    create: CREATE_BATCH_PROBE,
    drop: DROP_BATCH_PROBE,
};

impl Probe {
    /// Creates the tables afresh: any left by an earlier probe are dropped first.
    pub async fn create(&self, client: &impl GenericClient) -> Result<(), StoreError> {
        client.batch_execute(self.drop).await?;
        client.batch_execute(self.create).await?;
        Ok(())
    }

    /// Drops the tables.
    pub async fn remove(&self, client: &impl GenericClient) -> Result<(), StoreError> {
        client.batch_execute(self.drop).await?;
        Ok(())
    }
}

/// Commits batches of `rows` admissions' writes on `client` until `keep_going` says stop;
/// returns the rows written.
pub async fn probe_batches(
    client: &Client,
    connection: i32,
    rows: i32,
    mut keep_going: impl FnMut() -> bool,
) -> Result<u64, StoreError> {
    client.batch_execute(SERIALIZABLE).await?;
    let insert = client.prepare(BATCH_PROBE_INSERT).await?;
    let mut written = 0;
    let mut batch: i64 = 0;
    while keep_going() {
        batch += 1;
        match client
            .query_one(&insert, &[&connection, &batch, &rows])
            .await
        {
            Ok(row) => written += u64::try_from(row.get::<_, i64>(0)).unwrap_or(0),
            // Batches of different connections share index pages, so SERIALIZABLE sees
            // conflicts between them now and then, as it does between replicas: a batch that
            // did not commit counts nothing, and the next one goes on, as a retry would.
            Err(error) if error.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE) => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(written)
}

/// Database time in epoch milliseconds.
pub async fn database_now_ms(client: &impl GenericClient) -> Result<i64, StoreError> {
    Ok(client.query_one(NOW_MS, &[]).await?.get(0))
}

/// Sets the cursor of every trigger of `project_id`: `due_at_ms` for those in `due`, `idle_at_ms`
/// for the rest. Returns the rows updated.
pub async fn place_cursors(
    client: &impl GenericClient,
    project_id: &str,
    due: &[String],
    due_at_ms: i64,
    idle_at_ms: i64,
) -> Result<u64, StoreError> {
    Ok(client
        .execute(PLACE_CURSORS, &[&project_id, &due, &due_at_ms, &idle_at_ms])
        .await?)
}

/// Adds `count` triggers to `project_id`, copies of `template_trigger` named `prefix` and a
/// number, each with a schedule row whose cursor is `idle_at_ms`; then refreshes statistics.
pub async fn pad_schedule(
    client: &mut Client,
    project_id: &str,
    template_trigger: &str,
    prefix: &str,
    count: i64,
    idle_at_ms: i64,
) -> Result<(), StoreError> {
    let transaction = client.transaction().await?;
    if count > 0 {
        transaction
            .execute(
                PAD_TRIGGERS,
                &[&project_id, &template_trigger, &prefix, &count],
            )
            .await?;
        transaction
            .execute(PAD_SCHEDULES, &[&project_id, &prefix, &idle_at_ms])
            .await?;
    }
    transaction.commit().await?;
    client.batch_execute(ANALYZE).await?;
    Ok(())
}

/// Commits single-row INSERT transactions on `client` until `keep_going` says stop; returns how
/// many committed. The statement is prepared once, so each transaction is one round trip.
pub async fn probe_commits(
    client: &Client,
    connection: i32,
    mut keep_going: impl FnMut() -> bool,
) -> Result<u64, StoreError> {
    let insert = client.prepare(PROBE_INSERT).await?;
    let mut committed = 0;
    while keep_going() {
        client.execute(&insert, &[&connection]).await?;
        committed += 1;
    }
    Ok(committed)
}

// Claimable schedule rows still waiting for their first cursor: the steady bench starts
// measuring once every row has one (a parked row never gets one).
const UNINITIALIZED: &str =
    "SELECT count(*) FROM trigger_schedules WHERE next_fire_at_ms IS NULL AND claimable";

/// Schedule rows without a cursor yet.
pub async fn uninitialized_rows(client: &impl GenericClient) -> Result<i64, StoreError> {
    Ok(client.query_one(UNINITIALIZED, &[]).await?.get(0))
}

// Whether a claimable row still has its cursor at or before $1: the first entry of the
// claimable-order index answers, however many runs the history holds. (Counting the runs of the
// occurrence instead reads the whole runs table, having no index by time alone; polled every
// 200 ms during the last occurrence of a ten-minute window, that scan of 1,000,000 runs took
// the CPU the admissions needed and raised the last minute's lag by 1.2 s.)
const DUE_AT: &str = "SELECT EXISTS (SELECT 1 FROM trigger_schedules
                                     WHERE claimable AND next_fire_at_ms <= $1)";

/// Whether some claimable row is still due at `scheduled_for_ms` (its occurrence not yet
/// admitted, or passed over).
pub async fn still_due_at(
    client: &impl GenericClient,
    scheduled_for_ms: i64,
) -> Result<bool, StoreError> {
    Ok(client.query_one(DUE_AT, &[&scheduled_for_ms]).await?.get(0))
}

/// The lag users feel at one occurrence: runs admitted for it, and the lag from the occurrence
/// to the run's commit in database time (`created_at_ms - scheduled_for_ms`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OccurrenceLag {
    pub scheduled_for_ms: i64,
    pub runs: i64,
    pub lag_p50_ms: i64,
    pub lag_p99_ms: i64,
    pub lag_max_ms: i64,
}

// Per occurrence in [$1, $2): runs and lag percentiles (nearest rank), and the same over all of
// them as one more row with a null occurrence.
const LAG: &str = "SELECT scheduled_for_ms, count(*) AS runs,
        percentile_disc(0.5) WITHIN GROUP (ORDER BY created_at_ms - scheduled_for_ms) AS lag_p50_ms,
        percentile_disc(0.99) WITHIN GROUP (ORDER BY created_at_ms - scheduled_for_ms) AS lag_p99_ms,
        max(created_at_ms - scheduled_for_ms) AS lag_max_ms
    FROM runs WHERE scheduled_for_ms >= $1 AND scheduled_for_ms < $2
    GROUP BY GROUPING SETS ((scheduled_for_ms), ())
    ORDER BY scheduled_for_ms NULLS LAST";

/// Lag per occurrence in `[from_ms, to_ms)`, oldest first, then the lag over all of them (its
/// `scheduled_for_ms` is `to_ms`). Empty when no run fell in the window.
pub async fn lag_by_occurrence(
    client: &impl GenericClient,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<OccurrenceLag>, StoreError> {
    let rows = client.query(LAG, &[&from_ms, &to_ms]).await?;
    rows.iter()
        .map(|row| {
            Ok(OccurrenceLag {
                scheduled_for_ms: row.col::<Option<i64>>("scheduled_for_ms")?.unwrap_or(to_ms),
                runs: row.col("runs")?,
                lag_p50_ms: row.col("lag_p50_ms")?,
                lag_p99_ms: row.col("lag_p99_ms")?,
                lag_max_ms: row.col("lag_max_ms")?,
            })
        })
        .collect()
}

// The bench's dispatcher (docs/DESIGN.md §3.4): every queued run created in the last $1 ms finished as
// succeeded, as a dispatcher does (its status only; the finish time is the database's), by the
// runs' creation-time index; returns each one's occurrence and lag, read before retention can
// take it.
const FINISH_QUEUED: &str = "UPDATE runs SET status = 'succeeded'
    WHERE created_at_ms >= now_ms() - $1 AND status = 'queued'
    RETURNING trigger_id, scheduled_for_ms, created_at_ms - scheduled_for_ms AS lag_ms";

/// A run the bench's dispatcher finished: its trigger, occurrence and lag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishedRun {
    pub trigger_id: String,
    pub scheduled_for_ms: i64,
    pub lag_ms: i64,
}

/// Finishes every queued run created in the last `look_back_ms` (see `FINISH_QUEUED`).
pub async fn finish_queued(
    client: &impl GenericClient,
    look_back_ms: i64,
) -> Result<Vec<FinishedRun>, StoreError> {
    client
        .query(FINISH_QUEUED, &[&look_back_ms])
        .await?
        .iter()
        .map(|row| {
            Ok(FinishedRun {
                trigger_id: row.col("trigger_id")?,
                scheduled_for_ms: row.col("scheduled_for_ms")?,
                lag_ms: row.col("lag_ms")?,
            })
        })
        .collect()
}

// The history's size now: rows counted (a bench's tables are small), bytes on disk with indexes
// and TOAST, the runs retention deleted so far, and the WAL position.
const HISTORY_SIZE: &str = "SELECT now_ms() AS at_ms,
        (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM attempts) AS attempts,
        (SELECT count(*) FROM run_events) AS events,
        pg_total_relation_size('runs') AS runs_bytes,
        pg_total_relation_size('attempts') AS attempts_bytes,
        pg_total_relation_size('run_events') AS events_bytes,
        (SELECT deleted_runs FROM run_retention) AS deleted_runs,
        (pg_current_wal_lsn() - '0/0')::int8 AS wal_bytes";

/// One look at the history's size during a bench.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HistorySample {
    pub at_ms: i64,
    pub runs: i64,
    pub attempts: i64,
    pub events: i64,
    pub runs_bytes: i64,
    pub attempts_bytes: i64,
    pub events_bytes: i64,
    /// Runs retention deleted so far.
    pub deleted_runs: i64,
    /// The server's WAL position, in bytes: the difference between two samples is the WAL
    /// written between them (by everything on the server).
    pub wal_bytes: i64,
}

/// Reads a [`HistorySample`].
pub async fn history_size(client: &impl GenericClient) -> Result<HistorySample, StoreError> {
    let row = client.query_one(HISTORY_SIZE, &[]).await?;
    Ok(HistorySample {
        at_ms: row.col("at_ms")?,
        runs: row.col("runs")?,
        attempts: row.col("attempts")?,
        events: row.col("events")?,
        runs_bytes: row.col("runs_bytes")?,
        attempts_bytes: row.col("attempts_bytes")?,
        events_bytes: row.col("events_bytes")?,
        deleted_runs: row.col("deleted_runs")?,
        wal_bytes: row.col("wal_bytes")?,
    })
}

// Misfire records written, of every trigger.
const MISFIRES: &str = "SELECT count(*) FROM misfires";

/// Misfire records in the database.
pub async fn misfire_records(client: &impl GenericClient) -> Result<i64, StoreError> {
    Ok(client.query_one(MISFIRES, &[]).await?.get(0))
}

// A lived-in table (docs/PERFORMANCE.md, "Lived-in tables"), built in bulk as the one
// documented helper does instead of through a manifest of a million triggers: parked rows as
// publish and pause leave them, and a history of runs with their attempts and events. The
// claimable column is set by the schedule table's own trigger, as for any write.
//
// Disabled copies of template trigger $2 of project $1, `parked-off-<n>` for n in 1..=$3, with
// their schedule rows as publish leaves a disabled trigger: no cursor, for ever.
const PARK_DISABLED: &str = "WITH t AS (
        INSERT INTO triggers
            (project_id, trigger_id, task_id, revision, kind, provider, enabled, cron_expr,
             time_zone, misfire_policy, misfire_grace_ms, content_digest, created_at_ms,
             updated_at_ms)
        SELECT t.project_id, 'parked-off-' || lpad(g::text, 7, '0'), t.task_id, t.revision,
               t.kind, t.provider, false, t.cron_expr, t.time_zone, t.misfire_policy,
               t.misfire_grace_ms, t.content_digest, now_ms(), now_ms()
        FROM triggers t CROSS JOIN generate_series(1, $3::bigint) g
        WHERE t.project_id = $1 AND t.trigger_id = $2
        RETURNING project_id, trigger_id, revision
    )
    INSERT INTO trigger_schedules (project_id, trigger_id, trigger_revision, updated_at_ms)
    SELECT project_id, trigger_id, revision, now_ms() FROM t";

// Paused copies, `parked-paused-<n>`, paused ten minutes ago with the cursor they had then: a
// stale cursor that falls further behind.
const PARK_PAUSED: &str = "WITH t AS (
        INSERT INTO triggers
            (project_id, trigger_id, task_id, revision, kind, provider, enabled, cron_expr,
             time_zone, misfire_policy, misfire_grace_ms, content_digest, created_at_ms,
             updated_at_ms)
        SELECT t.project_id, 'parked-paused-' || lpad(g::text, 7, '0'), t.task_id, t.revision,
               t.kind, t.provider, t.enabled, t.cron_expr, t.time_zone, t.misfire_policy,
               t.misfire_grace_ms, t.content_digest, now_ms(), now_ms()
        FROM triggers t CROSS JOIN generate_series(1, $3::bigint) g
        WHERE t.project_id = $1 AND t.trigger_id = $2
        RETURNING project_id, trigger_id, revision
    )
    INSERT INTO trigger_schedules
        (project_id, trigger_id, trigger_revision, next_fire_at_ms, accounted_from_ms,
         paused_at_ms, paused_by, pause_reason, updated_at_ms)
    SELECT project_id, trigger_id, revision, now_ms() - 600000, now_ms() - 600000,
           now_ms() - 600000, 'qlsched bench', 'a lived-in table', now_ms()
    FROM t";

// A suspended project `<$1>-suspended` with a copy of the template's task and $3 copies of the
// template trigger, their cursors ten minutes behind as suspension leaves them.
const PARK_SUSPENDED: &str = "WITH p AS (
        INSERT INTO projects (project_id, status, created_at_ms, updated_at_ms)
        VALUES ($1 || '-suspended', 'suspended', now_ms(), now_ms())
        RETURNING project_id
    ), k AS (
        INSERT INTO tasks (project_id, task_id, revision, content_digest, execution_revision_id,
                           created_at_ms, updated_at_ms)
        SELECT p.project_id, k.task_id, k.revision, k.content_digest, k.execution_revision_id,
               now_ms(), now_ms()
        FROM p, triggers t JOIN tasks k ON k.project_id = t.project_id AND k.task_id = t.task_id
        WHERE t.project_id = $1 AND t.trigger_id = $2
        RETURNING project_id, task_id
    ), t AS (
        INSERT INTO triggers
            (project_id, trigger_id, task_id, revision, kind, provider, enabled, cron_expr,
             time_zone, misfire_policy, misfire_grace_ms, content_digest, created_at_ms,
             updated_at_ms)
        SELECT k.project_id, 'parked-suspended-' || lpad(g::text, 7, '0'), t.task_id, t.revision,
               t.kind, t.provider, t.enabled, t.cron_expr, t.time_zone, t.misfire_policy,
               t.misfire_grace_ms, t.content_digest, now_ms(), now_ms()
        FROM k, triggers t CROSS JOIN generate_series(1, $3::bigint) g
        WHERE t.project_id = $1 AND t.trigger_id = $2
        RETURNING project_id, trigger_id, revision
    )
    INSERT INTO trigger_schedules
        (project_id, trigger_id, trigger_revision, next_fire_at_ms, accounted_from_ms,
         updated_at_ms)
    SELECT project_id, trigger_id, revision, now_ms() - 600000, now_ms() - 600000, now_ms()
    FROM t";

// Runs $3+1..=$3+$4 of a history of $5 runs of project $1, oldest first, one every 10 ms up to
// $2 (database time), each with its one attempt and its run.created and run.queued events, in
// the shapes the admission writes them (and finished a second after, as a dispatcher leaves
// them): the runs spread round-robin over the project's
// claimable triggers (the ones the bench admits, so that their new runs land in the middle of
// the per-trigger index ranges, as in a database that has been firing them), the idempotency
// key in the admission's format, the run id led by the shard of a claim owner ("history") and
// then the time, as `core::run_id` lays it out, the attempt id a UUIDv7 of that time. Written
// in time order, as admissions write them, so the time-led keys grow at their index's right
// edge and the build costs a sequential pass, not a random page per row.
const HISTORY: &str = "WITH t AS MATERIALIZED (
        SELECT s.trigger_id, s.trigger_revision, k.task_id, k.revision AS task_revision,
               k.execution_revision_id,
               row_number() OVER (ORDER BY s.trigger_id) - 1 AS n
        FROM trigger_schedules s
        JOIN triggers g ON g.project_id = s.project_id AND g.trigger_id = s.trigger_id
        JOIN tasks k ON k.project_id = g.project_id AND k.task_id = g.task_id
        WHERE s.project_id = $1 AND s.claimable
    ), h AS MATERIALIZED (
        SELECT g, ms, ms - 5 AS scheduled_ms, t.*,
               (substr(encode(sha256('history'::bytea), 'hex'), 1, 4)
                || lpad(to_hex(ms >> 16), 8, '0') || to_hex(32768 | ((ms >> 4) & 4095))
                || to_hex(128 | ((ms & 15) << 2) | (g & 3)) || substr(md5(g::text), 1, 14)
               )::uuid AS run_id,
               (lpad(to_hex(ms), 12, '0') || '7' || substr(md5(g::text), 15, 3)
                || to_hex(8 + (g & 3)) || substr(md5(g::text), 18, 15))::uuid AS attempt_id
        FROM generate_series($3::bigint + 1, $3::bigint + $4::bigint) g
        CROSS JOIN LATERAL (SELECT $2::bigint - ($5::bigint - g) * 10 AS ms) m
        JOIN t ON t.n = g % (SELECT count(*) FROM t)
    ), r AS (
        INSERT INTO runs (run_id, project_id, trigger_id, trigger_revision, task_id,
                          task_revision, execution_revision_id, idempotency_key, status,
                          scheduled_for_ms, created_at_ms, queued_at_ms, origin, finished_at_ms)
        SELECT run_id, $1, trigger_id, trigger_revision, task_id, task_revision,
               execution_revision_id,
               'ql3:cron:v1:' || $1 || '/' || trigger_id || ':' || trigger_revision || ':'
                   || scheduled_ms,
               'succeeded', scheduled_ms, ms, ms, 'cron', ms + 1000
        FROM h ORDER BY g
        RETURNING 1
    ), a AS (
        INSERT INTO attempts (attempt_id, run_id, attempt_no, executor, state, created_at_ms)
        SELECT attempt_id, run_id, 1, 'remote_worker', 'succeeded', ms FROM h ORDER BY g
        RETURNING 1
    ), e AS (
        INSERT INTO run_events (run_id, seq, type, at_ms, payload)
        SELECT h.run_id, v.seq, v.type, h.ms,
               CASE WHEN v.seq = 1 THEN run_created_payload(
                        'ql3:cron:v1:' || $1 || '/' || h.trigger_id || ':' || h.trigger_revision
                            || ':' || h.scheduled_ms,
                        h.scheduled_ms, 'fire', 'cron', 'history', 'history', 1)
                    ELSE run_queued_payload(h.attempt_id) END
        FROM h CROSS JOIN (VALUES (1, 'run.created'), (2, 'run.queued')) v(seq, type)
        ORDER BY h.g, v.seq
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM a), (SELECT count(*) FROM e)";

// The history's foreign keys to runs (migration 0001), set aside while it is written and then
// added back as they were, validated by one pass each: checking 30,000,000 rows one by one, in
// the triggers that enforce the keys, took a third of the build. The history is written by
// this one connection into a scratch database no one else writes; an interrupted build leaves
// them absent, which `inspect invariants` reports (orphans), and the bench drops the database
// unless kept.
const DROP_ATTEMPTS_RUN_KEY: &str = "ALTER TABLE attempts DROP CONSTRAINT attempts_run_id_fkey";
const DROP_EVENTS_RUN_KEY: &str = "ALTER TABLE run_events DROP CONSTRAINT run_events_run_id_fkey";
const ADD_ATTEMPTS_RUN_KEY: &str = "ALTER TABLE attempts
    ADD CONSTRAINT attempts_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs";
const ADD_EVENTS_RUN_KEY: &str = "ALTER TABLE run_events
    ADD CONSTRAINT run_events_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs";

// Statistics (and the visibility map) as a long-lived database has them.
const SETTLE_LIVED_IN: &str = "VACUUM ANALYZE projects, tasks, triggers, trigger_schedules, runs,
    attempts, run_events";

// The build wrote gigabytes (10,000,000 runs: about 17 GB of WAL and 11 GB of tables and
// indexes) that the server and the kernel would otherwise still be writing back while the bench
// measures: the commit ceiling measured straight after such a build was a quarter of an empty
// database's. A checkpoint writes and syncs them now, so the measurement shares the disk with
// nothing a long-lived database would not be doing. It needs superuser or pg_checkpoint; without
// either, the bench says so and goes on.
const CHECKPOINT: &str = "CHECKPOINT";

/// The history's newest run is this long before the bench starts: outside `--since 1h`, `top`'s
/// last minute and any window the bench measures.
pub const HISTORY_AGE_MS: i64 = 2 * 3_600_000;

/// Runs of history written per transaction: each is one statement of set-based inserts, and a
/// transaction this size holds the server's vacuum horizon back for seconds, not for the whole
/// build.
pub const HISTORY_BATCH: i64 = 500_000;

/// Makes the bench's database lived-in: `parked` parked rows (a third disabled, a third paused,
/// a third in a suspended project, copies of `template_trigger` of `project_id`) and `history`
/// runs, each with its attempt and two events, created before the bench, in transactions of
/// [`HISTORY_BATCH`] runs; then vacuums and analyzes, as a long-lived database is.
pub async fn lived_in(
    client: &mut Client,
    project_id: &str,
    template_trigger: &str,
    parked: i64,
    history: i64,
) -> Result<(), StoreError> {
    if parked > 0 {
        let third = parked / 3;
        let transaction = client.transaction().await?;
        for (statement, count) in [
            (PARK_DISABLED, parked - 2 * third),
            (PARK_PAUSED, third),
            (PARK_SUSPENDED, third),
        ] {
            if count > 0 {
                transaction
                    .execute(statement, &[&project_id, &template_trigger, &count])
                    .await?;
            }
        }
        transaction.commit().await?;
    }
    let newest_ms = database_now_ms(client).await? - HISTORY_AGE_MS;
    if history > 0 {
        let transaction = client.transaction().await?;
        transaction.execute(DROP_ATTEMPTS_RUN_KEY, &[]).await?;
        transaction.execute(DROP_EVENTS_RUN_KEY, &[]).await?;
        transaction.commit().await?;
    }
    let mut written = 0i64;
    while written < history {
        let batch = (history - written).min(HISTORY_BATCH);
        client
            .query_one(
                HISTORY,
                &[&project_id, &newest_ms, &written, &batch, &history],
            )
            .await?;
        written += batch;
    }
    if history > 0 {
        let transaction = client.transaction().await?;
        transaction.execute(ADD_ATTEMPTS_RUN_KEY, &[]).await?;
        transaction.execute(ADD_EVENTS_RUN_KEY, &[]).await?;
        transaction.commit().await?;
    }
    if parked > 0 || history > 0 {
        client.batch_execute(SETTLE_LIVED_IN).await?;
        match client.batch_execute(CHECKPOINT).await {
            Err(error) if error.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
                tracing::warn!(
                    "no CHECKPOINT after building the lived-in tables (it needs superuser or \
                     pg_checkpoint): the measurement may share the disk with their write-back"
                );
            }
            other => other?,
        }
    }
    Ok(())
}

crate::statements::statements! {
    NOW_MS: Owner,
    PLACE_CURSORS: Owner,
    PAD_TRIGGERS: Owner,
    PAD_SCHEDULES: Owner,
    ANALYZE: Owner,
    CREATE_PROBE: Owner,
    PROBE_INSERT after CREATE_PROBE: Owner,
    DROP_PROBE: Owner,
    CREATE_BATCH_PROBE: Owner,
    BATCH_PROBE_INSERT after CREATE_BATCH_PROBE: Owner,
    DROP_BATCH_PROBE: Owner,
    SERIALIZABLE: Owner,
    UNINITIALIZED: Owner,
    DUE_AT: Owner,
    LAG: Owner,
    MISFIRES: Owner,
    PARK_DISABLED: Owner,
    PARK_PAUSED: Owner,
    PARK_SUSPENDED: Owner,
    HISTORY: Owner,
    DROP_ATTEMPTS_RUN_KEY: Owner,
    DROP_EVENTS_RUN_KEY: Owner,
    ADD_ATTEMPTS_RUN_KEY: Owner,
    ADD_EVENTS_RUN_KEY: Owner,
    SETTLE_LIVED_IN: Owner,
    CHECKPOINT: Owner,
    FINISH_QUEUED: Owner,
    HISTORY_SIZE: Owner,
}
