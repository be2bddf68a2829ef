//! Startup recovery (docs/DESIGN.md §4.8).
//!
//! A queued run whose newest attempt is the claimed `remote_worker` attempt exactly as admission
//! wrote it belongs to the dispatcher and is left alone. Anything else in the recovery source (a
//! dispatcher field set, a newer attempt, the run no longer queued, no attempt at all) is drift:
//! it is reported with every reason, never silently ignored, and never re-admitted.

use serde::{Deserialize, Serialize};
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
// newest attempt and every reason it differs from what an admission leaves behind, counted and
// listed in one statement, so that the count and the list cannot classify differently. With $1
// NULL, every such run (`inspect recovery`: a pass over `runs` and `attempts`); with $1 a number,
// those among the $1 newest runs, found by the `runs_created` index and each run's attempts by
// `(run_id, attempt_no)` (a replica's start, bounded however many runs the table holds). One row:
// the pristine and drifted counts, and the first $2 drifted runs, oldest first, as JSON.
const CLASSIFY: &str = "WITH source AS (
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
    count(*) FILTER (WHERE cardinality(drift) > 0) AS drifted,
    (SELECT coalesce(jsonb_agg(to_jsonb(listed) ORDER BY listed.created_at_ms, listed.run_id),
                     '[]')
        FROM (SELECT run_id, project_id, trigger_id, status, attempt_id, attempt_no, state, drift,
                     created_at_ms
              FROM classified WHERE cardinality(drift) > 0
              ORDER BY created_at_ms, run_id LIMIT $2) listed) AS candidates
FROM classified";

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
    let row = client.query_one(CLASSIFY, &[&newest, &limit]).await?;
    let listed: serde_json::Value = row.col("candidates")?;
    let candidates = serde_json::from_value::<Vec<Listed>>(listed)
        .map_err(|error| StoreError::Column {
            column: "candidates",
            reason: error.to_string(),
        })?
        .into_iter()
        .map(RecoveryCandidate::from)
        .collect();
    Ok(RecoveryReport {
        pristine: row.col("pristine")?,
        drifted: row.col("drifted")?,
        candidates,
    })
}

/// One drifted run as [`CLASSIFY`] lists it.
#[derive(Deserialize)]
struct Listed {
    run_id: Uuid,
    project_id: String,
    trigger_id: String,
    status: String,
    attempt_id: Option<Uuid>,
    attempt_no: Option<i32>,
    state: Option<String>,
    drift: Vec<String>,
}

impl From<Listed> for RecoveryCandidate {
    fn from(listed: Listed) -> Self {
        RecoveryCandidate {
            run_id: listed.run_id,
            project_id: listed.project_id,
            trigger_id: listed.trigger_id,
            run_status: listed.status,
            attempt_id: listed.attempt_id,
            attempt_no: listed.attempt_no,
            attempt_state: listed.state,
            drift: listed.drift,
        }
    }
}

super::statements::statements! {
    CLASSIFY: Runtime | Observer,
    PIN_INDEX_PLAN: Runtime,
}
