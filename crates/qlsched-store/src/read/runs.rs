//! Admitted runs, with their attempts and events: `inspect runs`, `inspect run` and the dashboard.

use serde::Serialize;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use crate::StoreError;
use crate::error::stored;
use crate::row::Named;
use qlsched_core::{RunStatus, TriggerName};

/// One admitted run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunView {
    pub run_id: Uuid,
    pub project_id: String,
    pub trigger_id: String,
    pub trigger_revision: i64,
    pub task_id: String,
    pub task_revision: i64,
    pub execution_revision_id: Uuid,
    pub idempotency_key: String,
    pub status: RunStatus,
    pub scheduled_for_ms: i64,
    pub created_at_ms: i64,
    pub queued_at_ms: Option<i64>,
}

/// A run with where it came from: `cron` (the scheduler), `manual` (`qlsched fire`) or
/// `backfill` (`qlsched backfill`). `inspect runs` and `inspect run` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunRow {
    #[serde(flatten)]
    pub run: RunView,
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["cron", "manual", "backfill"])))]
    pub origin: String,
}

impl std::ops::Deref for RunRow {
    type Target = RunView;
    fn deref(&self) -> &RunView {
        &self.run
    }
}

pub(super) fn run_row(row: &Row) -> Result<RunRow, StoreError> {
    Ok(RunRow {
        run: run_view(row)?,
        origin: row.col("origin")?,
    })
}

pub(super) fn run_view(row: &Row) -> Result<RunView, StoreError> {
    Ok(RunView {
        run_id: row.col("run_id")?,
        project_id: row.col("project_id")?,
        trigger_id: row.col("trigger_id")?,
        trigger_revision: row.col("trigger_revision")?,
        task_id: row.col("task_id")?,
        task_revision: row.col("task_revision")?,
        execution_revision_id: row.col("execution_revision_id")?,
        idempotency_key: row.col("idempotency_key")?,
        status: stored("runs", "status", row.col("status")?)?,
        scheduled_for_ms: row.col("scheduled_for_ms")?,
        created_at_ms: row.col("created_at_ms")?,
        queued_at_ms: row.col("queued_at_ms")?,
    })
}

// One trigger's runs, latest occurrence first, from its (project, trigger, scheduled_for) index.
// The columns are those of a [`RunView`], in its order, then the run's origin (a [`RunRow`]), as
// [`run_row`] reads them; RECENT_RUNS and RUN select the same.
const RUNS_OF_TRIGGER: &str = "SELECT run_id, project_id, trigger_id, trigger_revision, task_id,
         task_revision, execution_revision_id, idempotency_key, status, scheduled_for_ms,
         created_at_ms, queued_at_ms, origin
    FROM runs
    WHERE project_id = $1 AND trigger_id = $2
      AND ($3::int8 IS NULL OR created_at_ms >= now_ms() - $3)
    ORDER BY scheduled_for_ms DESC
    LIMIT $4";

// All triggers' runs, newest first, from the creation-time index, with RUNS_OF_TRIGGER's columns.
const RECENT_RUNS: &str = "SELECT run_id, project_id, trigger_id, trigger_revision, task_id,
         task_revision, execution_revision_id, idempotency_key, status, scheduled_for_ms,
         created_at_ms, queued_at_ms, origin
    FROM runs
    WHERE $1::int8 IS NULL OR created_at_ms >= now_ms() - $1
    ORDER BY created_at_ms DESC
    LIMIT $2";

/// Runs, newest first: of one trigger or of all, created within `since_ms` if given.
pub async fn runs(
    client: &impl GenericClient,
    trigger: Option<&TriggerName>,
    since_ms: Option<i64>,
    limit: i64,
) -> Result<Vec<RunView>, StoreError> {
    Ok(runs_with_origin(client, trigger, since_ms, limit)
        .await?
        .into_iter()
        .map(|r| r.run)
        .collect())
}

/// [`runs`], each with its origin.
pub async fn runs_with_origin(
    client: &impl GenericClient,
    trigger: Option<&TriggerName>,
    since_ms: Option<i64>,
    limit: i64,
) -> Result<Vec<RunRow>, StoreError> {
    let rows = match trigger {
        Some(TriggerName {
            project_id,
            trigger_id,
        }) => {
            client
                .query(
                    RUNS_OF_TRIGGER,
                    &[project_id, trigger_id, &since_ms, &limit],
                )
                .await?
        }
        None => client.query(RECENT_RUNS, &[&since_ms, &limit]).await?,
    };
    rows.iter().map(run_row).collect()
}

/// One attempt of a run, with the dispatcher's fields as they stand.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AttemptView {
    pub attempt_id: Uuid,
    pub attempt_no: i32,
    pub executor: String,
    pub state: String,
    pub worker_id: Option<String>,
    pub session_id: Option<String>,
    pub lease_id: Option<String>,
    pub started_at_ms: Option<i64>,
    pub created_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EventView {
    pub seq: i32,
    #[serde(rename = "type")]
    pub event_type: String,
    pub at_ms: i64,
    /// The event's payload as stored. `run.created`: idempotency_key, scheduled_for_ms, decision,
    /// origin, actor, claim_owner, claim_version, null where they do not apply (no claim outside
    /// the scheduler's admission); written before 0.3.0, a cron run's has no origin and actor, a
    /// manual or backfill run's no claim. `run.queued`: attempt_id, executor.
    pub payload: serde_json::Value,
}

/// `inspect run RUN_ID`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunDetail {
    pub run: RunRow,
    pub attempts: Vec<AttemptView>,
    pub events: Vec<EventView>,
}

// One run, with RUNS_OF_TRIGGER's columns.
const RUN: &str = "SELECT run_id, project_id, trigger_id, trigger_revision, task_id,
         task_revision, execution_revision_id, idempotency_key, status, scheduled_for_ms,
         created_at_ms, queued_at_ms, origin
    FROM runs WHERE run_id = $1";

const ATTEMPTS_OF_RUN: &str = "SELECT attempt_id, attempt_no, executor, state, worker_id,
        session_id, lease_id, started_at_ms, created_at_ms
    FROM attempts WHERE run_id = $1 ORDER BY attempt_no";

const EVENTS_OF_RUN: &str =
    "SELECT seq, type, at_ms, payload FROM run_events WHERE run_id = $1 ORDER BY seq";

/// One run with its attempts and events; [`StoreError::NotFound`] when there is no such run.
pub async fn run_detail(
    client: &impl GenericClient,
    run_id: Uuid,
) -> Result<RunDetail, StoreError> {
    let run = client
        .query_opt(RUN, &[&run_id])
        .await?
        .map(|row| run_row(&row))
        .transpose()?
        .ok_or_else(|| StoreError::NotFound(format!("run {run_id}")))?;
    let attempts = client
        .query(ATTEMPTS_OF_RUN, &[&run_id])
        .await?
        .iter()
        .map(|row| {
            Ok(AttemptView {
                attempt_id: row.col("attempt_id")?,
                attempt_no: row.col("attempt_no")?,
                executor: row.col("executor")?,
                state: row.col("state")?,
                worker_id: row.col("worker_id")?,
                session_id: row.col("session_id")?,
                lease_id: row.col("lease_id")?,
                started_at_ms: row.col("started_at_ms")?,
                created_at_ms: row.col("created_at_ms")?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    let events = client
        .query(EVENTS_OF_RUN, &[&run_id])
        .await?
        .iter()
        .map(|row| {
            Ok(EventView {
                seq: row.col("seq")?,
                event_type: row.col("type")?,
                at_ms: row.col("at_ms")?,
                payload: row.col("payload")?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(RunDetail {
        run,
        attempts,
        events,
    })
}

// Which of the given occurrences of one trigger have a run: one probe each of the
// (project, trigger, scheduled_for) index.
const ADMITTED_AMONG: &str = "SELECT scheduled_for_ms FROM runs
    WHERE project_id = $1 AND trigger_id = $2 AND scheduled_for_ms = ANY($3::int8[])";

/// The occurrences among `occurrences` of `trigger` that have a run.
pub async fn admitted_among(
    client: &impl GenericClient,
    trigger: &TriggerName,
    occurrences: &[i64],
) -> Result<Vec<i64>, StoreError> {
    client
        .query(
            ADMITTED_AMONG,
            &[&trigger.project_id, &trigger.trigger_id, &occurrences],
        )
        .await?
        .iter()
        .map(|row| row.col("scheduled_for_ms"))
        .collect()
}

// When a replica first ran here, as far as the database remembers: the earliest start in the
// replica registry (it forgets a replica after its --forget-stale-after since its last heartbeat:
// 15 minutes by default; a week for rows of releases before 0.2.0) or the earliest run (the
// creation-time index), whichever is earlier; null when neither tells.
const FIRST_SCHEDULER_START: &str = "SELECT least(
        (SELECT min(started_at_ms) FROM replicas),
        (SELECT min(created_at_ms) FROM runs)) AS at_ms";

/// The earliest instant the registry or the runs show a scheduler at work; `None` for a
/// database nothing ever ran on.
pub async fn first_scheduler_start(client: &impl GenericClient) -> Result<Option<i64>, StoreError> {
    client
        .query_one(FIRST_SCHEDULER_START, &[])
        .await?
        .col("at_ms")
}

crate::statements::statements! {
    ADMITTED_AMONG: Observer,
    FIRST_SCHEDULER_START: Observer,
    RUNS_OF_TRIGGER: Observer,
    RECENT_RUNS: Observer,
    RUN: Observer,
    ATTEMPTS_OF_RUN: Observer,
    EVENTS_OF_RUN: Observer,
}
