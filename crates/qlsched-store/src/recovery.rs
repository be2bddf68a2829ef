//! Startup recovery (docs/DESIGN.md §4.8).
//!
//! A queued run whose newest attempt is the claimed `remote_worker` attempt exactly as admission
//! wrote it belongs to the dispatcher and is left alone. Anything else in the recovery source (a
//! dispatcher field set, a newer attempt, the run no longer queued, no attempt at all) is drift:
//! it is reported with every reason, never silently ignored, and never re-admitted.

use serde::Serialize;
use tokio_postgres::GenericClient;
use uuid::Uuid;

use super::StoreError;
use super::row::Named;

/// One recovery candidate and why it is not pristine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecoveryCandidate {
    pub run_id: Uuid,
    pub project_id: String,
    pub trigger_id: String,
    pub run_status: String,
    pub attempt_id: Option<Uuid>,
    pub attempt_no: Option<i32>,
    pub attempt_state: Option<String>,
    pub drift: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecoveryReport {
    /// Queued runs left to the dispatcher, untouched.
    pub pristine: i64,
    /// Drifted runs (at most `limit` of them are listed in `candidates`).
    pub drifted: i64,
    pub candidates: Vec<RecoveryCandidate>,
}

// The recovery source (queued runs, and runs with a claimed remote_worker attempt), each with its
// newest attempt and every reason it differs from what an admission leaves behind: the CTE both
// statements below start with. With $1 NULL, every such run (`inspect recovery`: a pass over
// `runs` and `attempts`); with $1 a number, those among the $1 newest runs, found by the
// `runs_created` index and each run's attempts by `(run_id, attempt_no)` (a replica's start, bounded
// however many runs the table holds). This one counts the pristine runs and the drifted ones.
const COUNTS: &str = "WITH source AS (
    SELECT run_id FROM runs WHERE status = 'queued' AND $1::int8 IS NULL
    UNION
    SELECT run_id FROM attempts
        WHERE state = 'claimed' AND executor = 'remote_worker' AND $1::int8 IS NULL
    UNION
    SELECT recent.run_id FROM (
        SELECT run_id, status FROM runs WHERE $1::int8 IS NOT NULL
        ORDER BY created_at_ms DESC LIMIT $1
    ) recent
    WHERE recent.status = 'queued'
       OR EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = recent.run_id
                    AND a.state = 'claimed' AND a.executor = 'remote_worker')
), newest AS (
    SELECT DISTINCT ON (a.run_id) a.*
    FROM attempts a JOIN source USING (run_id)
    ORDER BY a.run_id, a.attempt_no DESC
), classified AS (
    SELECT r.run_id, r.project_id, r.trigger_id, r.status, r.created_at_ms,
        n.attempt_id, n.attempt_no, n.state,
        array_remove(ARRAY[
            CASE WHEN r.status <> 'queued' THEN 'run is ' || r.status || ', no longer queued' END,
            CASE WHEN r.queued_at_ms IS NULL THEN 'run has no queued_at_ms' END,
            CASE WHEN n.attempt_id IS NULL THEN 'run has no attempt' END,
            CASE WHEN n.state <> 'claimed' THEN 'newest attempt is ' || n.state END,
            CASE WHEN n.executor <> 'remote_worker' THEN 'newest attempt runs on ' || n.executor END,
            CASE WHEN EXISTS (SELECT 1 FROM attempts o WHERE o.run_id = r.run_id
                                AND o.state = 'claimed' AND o.attempt_no < n.attempt_no)
                 THEN 'a newer attempt supersedes a claimed attempt' END,
            CASE WHEN n.worker_id IS NOT NULL THEN 'worker_id is set' END,
            CASE WHEN n.session_id IS NOT NULL THEN 'session_id is set' END,
            CASE WHEN n.lease_id IS NOT NULL THEN 'lease_id is set' END,
            CASE WHEN n.offer_id IS NOT NULL THEN 'offer_id is set' END,
            CASE WHEN n.callback_token IS NOT NULL THEN 'callback_token is set' END,
            CASE WHEN n.started_at_ms IS NOT NULL THEN 'started_at_ms is set' END,
            CASE WHEN n.result IS NOT NULL THEN 'result is set' END,
            CASE WHEN n.error IS NOT NULL THEN 'error is set' END
        ], NULL) AS drift
    FROM source JOIN runs r USING (run_id) LEFT JOIN newest n USING (run_id)
)
SELECT count(*) FILTER (WHERE cardinality(drift) = 0) AS pristine,
    count(*) FILTER (WHERE cardinality(drift) > 0) AS drifted FROM classified";

// The drifted runs, oldest first: the CTE of COUNTS, which explains it.
const DRIFTED: &str = "WITH source AS (
    SELECT run_id FROM runs WHERE status = 'queued' AND $1::int8 IS NULL
    UNION
    SELECT run_id FROM attempts
        WHERE state = 'claimed' AND executor = 'remote_worker' AND $1::int8 IS NULL
    UNION
    SELECT recent.run_id FROM (
        SELECT run_id, status FROM runs WHERE $1::int8 IS NOT NULL
        ORDER BY created_at_ms DESC LIMIT $1
    ) recent
    WHERE recent.status = 'queued'
       OR EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = recent.run_id
                    AND a.state = 'claimed' AND a.executor = 'remote_worker')
), newest AS (
    SELECT DISTINCT ON (a.run_id) a.*
    FROM attempts a JOIN source USING (run_id)
    ORDER BY a.run_id, a.attempt_no DESC
), classified AS (
    SELECT r.run_id, r.project_id, r.trigger_id, r.status, r.created_at_ms,
        n.attempt_id, n.attempt_no, n.state,
        array_remove(ARRAY[
            CASE WHEN r.status <> 'queued' THEN 'run is ' || r.status || ', no longer queued' END,
            CASE WHEN r.queued_at_ms IS NULL THEN 'run has no queued_at_ms' END,
            CASE WHEN n.attempt_id IS NULL THEN 'run has no attempt' END,
            CASE WHEN n.state <> 'claimed' THEN 'newest attempt is ' || n.state END,
            CASE WHEN n.executor <> 'remote_worker' THEN 'newest attempt runs on ' || n.executor END,
            CASE WHEN EXISTS (SELECT 1 FROM attempts o WHERE o.run_id = r.run_id
                                AND o.state = 'claimed' AND o.attempt_no < n.attempt_no)
                 THEN 'a newer attempt supersedes a claimed attempt' END,
            CASE WHEN n.worker_id IS NOT NULL THEN 'worker_id is set' END,
            CASE WHEN n.session_id IS NOT NULL THEN 'session_id is set' END,
            CASE WHEN n.lease_id IS NOT NULL THEN 'lease_id is set' END,
            CASE WHEN n.offer_id IS NOT NULL THEN 'offer_id is set' END,
            CASE WHEN n.callback_token IS NOT NULL THEN 'callback_token is set' END,
            CASE WHEN n.started_at_ms IS NOT NULL THEN 'started_at_ms is set' END,
            CASE WHEN n.result IS NOT NULL THEN 'result is set' END,
            CASE WHEN n.error IS NOT NULL THEN 'error is set' END
        ], NULL) AS drift
    FROM source JOIN runs r USING (run_id) LEFT JOIN newest n USING (run_id)
)
SELECT run_id, project_id, trigger_id, status, attempt_id, attempt_no, state, drift
    FROM classified WHERE cardinality(drift) > 0 ORDER BY created_at_ms, run_id LIMIT $2";

/// How many of the newest runs a replica's start classifies ([`startup_recovery_report`]): 25-50
/// ms on a shared development machine with 1,000,000 runs (10,000 took 0.5 s), where classifying
/// every run took 4.1 s; the time does not grow with the table.
pub const STARTUP_RECOVERY_RUNS: i64 = 1_000;

// Index scans only, for the transaction it runs in: the bounded source is a few thousand rows at
// most, and each is found through `runs_pkey` and `(run_id, attempt_no)`; a plan that hashes them
// against a pass over `runs` or `attempts` would cost what the bound exists to avoid.
const PIN_INDEX_PLAN: &str = "SELECT set_config('enable_seqscan', 'off', true)";

/// Classifies the whole recovery source; lists at most `limit` candidates: `inspect recovery`.
pub async fn recovery_report(
    client: &impl GenericClient,
    limit: i64,
) -> Result<RecoveryReport, StoreError> {
    classify(client, limit, None).await
}

/// Classifies the recovery source among the `newest` runs, by index, however many runs the table
/// holds: what a replica reports as it starts (docs/DESIGN.md §4.8). `inspect recovery` classifies
/// them all. Inside a transaction: the plan's setting is the transaction's.
pub async fn startup_recovery_report(
    client: &impl GenericClient,
    limit: i64,
    newest: i64,
) -> Result<RecoveryReport, StoreError> {
    client.query_one(PIN_INDEX_PLAN, &[]).await?;
    classify(client, limit, Some(newest)).await
}

async fn classify(
    client: &impl GenericClient,
    limit: i64,
    newest: Option<i64>,
) -> Result<RecoveryReport, StoreError> {
    let counts = client.query_one(COUNTS, &[&newest]).await?;
    let candidates = client
        .query(DRIFTED, &[&newest, &limit])
        .await?
        .iter()
        .map(|row| {
            Ok(RecoveryCandidate {
                run_id: row.col("run_id")?,
                project_id: row.col("project_id")?,
                trigger_id: row.col("trigger_id")?,
                run_status: row.col("status")?,
                attempt_id: row.col("attempt_id")?,
                attempt_no: row.col("attempt_no")?,
                attempt_state: row.col("state")?,
                drift: row.col("drift")?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(RecoveryReport {
        pristine: counts.col("pristine")?,
        drifted: counts.col("drifted")?,
        candidates,
    })
}

super::statements::statements! {
    COUNTS: Runtime | Observer,
    DRIFTED: Runtime | Observer,
    PIN_INDEX_PLAN: Runtime,
}

#[cfg(test)]
mod tests {
    use super::{COUNTS, DRIFTED};

    /// The part before the statement's own last SELECT: the recovery source and its drift.
    fn source(statement: &str) -> &str {
        &statement[..statement.rfind("\nSELECT").expect("a final SELECT")]
    }

    /// COUNTS and DRIFTED classify the same runs the same way: a drift reason added to one
    /// alone would make `inspect recovery` count runs it does not list, and fails here.
    #[test]
    fn counts_and_the_list_share_one_classification() {
        assert_eq!(source(COUNTS), source(DRIFTED));
        assert!(source(COUNTS).contains("AS drift"), "{COUNTS}");
    }
}
