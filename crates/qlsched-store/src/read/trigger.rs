//! One trigger at one database instant, and why it is not firing: `inspect trigger P/T`.

use serde::Serialize;
use tokio_postgres::{Client, Row};
use uuid::Uuid;

use super::audit::{AuditView, audit};
use super::claims::ClaimView;
use super::runs::{RunView, runs};
use super::schedules::{PauseView, ScheduleView, pause_of, schedule_view};
use crate::error::stored;
use crate::migrate::check_ready;
use crate::row::Named;
use crate::{SchemaName, StoreError};
use qlsched_core::diagnose::{
    ClaimFacts, Diagnosis, PauseFacts, RefusalFacts, TriggerFacts, diagnose,
};
use qlsched_core::{ProjectStatus, TriggerName};

/// A trigger's definition as stored, with its project's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TriggerView {
    pub project_status: ProjectStatus,
    pub task_id: String,
    pub revision: i64,
    pub enabled: bool,
    pub cron_expr: String,
    pub time_zone: String,
    pub misfire_policy: String,
    pub misfire_grace_ms: i64,
    pub content_digest: String,
    pub execution_revision_id: Uuid,
}

/// Everything known about one trigger at one database instant.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TriggerState {
    pub now_ms: i64,
    pub definition: TriggerView,
    pub schedule: ScheduleView,
    /// The claim, valid or expired, if one is recorded.
    pub claim: Option<ClaimView>,
    pub recent_runs: Vec<RunView>,
    /// Replicas live in the registry at this instant.
    pub live_replicas: i64,
    /// The newest misfire records of the trigger: occurrences passed over beyond the grace.
    pub recent_misfires: Vec<crate::misfires::MisfireRecord>,
    /// The last server error that refused the trigger's admission, if one ever did; `current`
    /// while the row is still at the occurrence it refused.
    pub admission_error: Option<crate::admission_errors::AdmissionErrorView>,
    pub audit: Vec<AuditView>,
}

/// `inspect trigger P/T`: the answer to "why is this not firing?" and what it rests on. `state`
/// is absent when the schema is not ready, since nothing else can be read then.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TriggerDetail {
    pub project_id: String,
    pub trigger_id: String,
    pub why_not_firing: Diagnosis,
    #[serde(flatten)]
    pub state: Option<TriggerState>,
}

// One trigger with its project, schedule row and execution revision, and whether that revision's
// digest still matches its spec (the admission's own check), at one database instant. The schedule
// row's `state` and `due_in_ms` are those of `schedules::SCHEDULES`, which explains them.
pub(super) const TRIGGER: &str = "SELECT now_ms() AS now_ms, p.status AS project_status, t.task_id,
            t.revision, t.enabled, t.cron_expr, t.time_zone, t.misfire_policy,
            t.misfire_grace_ms, t.content_digest, k.execution_revision_id,
            e.digest = encode(sha256(convert_to(e.spec::text, 'UTF8')), 'hex') AS digest_ok,
            s.project_id, s.trigger_id,
            schedule_state(s.paused_at_ms, s.claimable, s.claim_token, s.claim_expires_at_ms,
                           s.next_fire_at_ms) AS state,
            s.trigger_revision, s.state_version, s.claim_version, s.next_fire_at_ms,
            schedule_due_in_ms(s.claimable, s.next_fire_at_ms) AS due_in_ms,
            s.last_scheduled_at_ms,
            s.claim_owner, s.claim_token, s.claim_expires_at_ms, s.updated_at_ms,
            s.paused_at_ms, s.paused_by, s.pause_reason
    FROM triggers t
    JOIN projects p ON p.project_id = t.project_id
    JOIN tasks k ON k.project_id = t.project_id AND k.task_id = t.task_id
    JOIN execution_revisions e ON e.execution_revision_id = k.execution_revision_id
    JOIN trigger_schedules s ON s.project_id = t.project_id AND s.trigger_id = t.trigger_id
    WHERE t.project_id = $1 AND t.trigger_id = $2";

/// How many recent runs and audit rows `inspect trigger` shows.
const TRIGGER_HISTORY: i64 = 10;

/// `inspect trigger P/T`; [`StoreError::NotFound`] when there is no such trigger. A schema that
/// is not ready is a diagnosis here, not an error: it is the answer to the question asked.
pub async fn trigger_detail(
    client: &Client,
    schema: &SchemaName,
    trigger: &TriggerName,
) -> Result<TriggerDetail, StoreError> {
    let detail = |why_not_firing, state| TriggerDetail {
        project_id: trigger.project_id.clone(),
        trigger_id: trigger.trigger_id.clone(),
        why_not_firing,
        state,
    };
    // Only an unready schema is an answer; any other failure of the check (a login without
    // USAGE on the schema, whose every table then looks missing) is the error itself, so that a
    // healthy schema is never reported as one to migrate.
    match check_ready(client, schema).await {
        Ok(()) => {}
        Err(StoreError::SchemaNotReady(detail_text)) => {
            return Ok(detail(
                Diagnosis::SchemaNotReady {
                    detail: detail_text,
                },
                None,
            ));
        }
        Err(error) => return Err(error),
    }
    let row = client
        .query_opt(TRIGGER, &[&trigger.project_id, &trigger.trigger_id])
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("trigger {trigger}")))?;
    let trigger = Some(trigger);
    let replicas = crate::replicas::list(client).await?;
    let state = TriggerState {
        now_ms: row.col("now_ms")?,
        definition: TriggerView {
            project_status: stored("projects", "status", row.col("project_status")?)?,
            task_id: row.col("task_id")?,
            revision: row.col("revision")?,
            enabled: row.col("enabled")?,
            cron_expr: row.col("cron_expr")?,
            time_zone: row.col("time_zone")?,
            misfire_policy: row.col("misfire_policy")?,
            misfire_grace_ms: row.col("misfire_grace_ms")?,
            content_digest: row.col("content_digest")?,
            execution_revision_id: row.col("execution_revision_id")?,
        },
        schedule: schedule_view(&row)?,
        claim: claim_of(&row)?,
        recent_runs: runs(client, trigger, None, TRIGGER_HISTORY).await?,
        recent_misfires: crate::misfires::list(client, trigger, None, TRIGGER_HISTORY).await?,
        admission_error: match trigger {
            Some(trigger) => crate::admission_errors::last(client, trigger).await?,
            None => None,
        },
        live_replicas: crate::replicas::LivenessCounts::of(&replicas).live,
        audit: audit(client, trigger, TRIGGER_HISTORY).await?,
    };
    // The claim's owner as the registry sees it: a valid claim of a dead replica is no reason
    // to wait.
    let owner_liveness = state.claim.as_ref().and_then(|claim| {
        replicas
            .iter()
            .find(|r| r.owner == claim.owner)
            .map(|r| r.liveness)
    });
    let why = diagnose(&facts_of(
        &state,
        row.col("digest_ok")?,
        pause_of(&row)?,
        owner_liveness,
    ));
    Ok(detail(why, Some(state)))
}

/// What the diagnosis looks at, from what `inspect trigger` read.
fn facts_of(
    state: &TriggerState,
    digest_ok: bool,
    pause: Option<PauseView>,
    owner_liveness: Option<qlsched_core::Liveness>,
) -> TriggerFacts {
    let definition = &state.definition;
    let schedule = &state.schedule;
    TriggerFacts {
        project_status: definition.project_status,
        enabled: definition.enabled,
        trigger_revision: definition.revision,
        schedule_revision: schedule.trigger_revision,
        execution_revision_id: definition.execution_revision_id,
        digest_ok,
        pause: pause.map(|pause| PauseFacts {
            by: pause.paused_by,
            at_ms: pause.paused_at_ms,
            reason: pause.reason,
        }),
        claim: state.claim.as_ref().map(|claim| ClaimFacts {
            owner: claim.owner.clone(),
            remaining_ms: claim.remaining_ms,
            expired: claim.expired,
            owner_liveness,
        }),
        live_replicas: state.live_replicas,
        next_fire_at_ms: schedule.next_fire_at_ms,
        due_in_ms: schedule.due_in_ms,
        refusal: state
            .admission_error
            .as_ref()
            .filter(|error| error.current)
            .map(|error| RefusalFacts {
                sqlstate: error.sqlstate.clone(),
                message: error.message.clone(),
                owner: error.owner.clone(),
                since_ms: error.first_failed_at_ms,
                failures: error.failures,
            }),
        cron_expr: definition.cron_expr.clone(),
        time_zone: definition.time_zone.clone(),
    }
}

/// The claim recorded on a schedule row of TRIGGER, read with its claim columns and `now_ms`; none when
/// the row holds no claim.
fn claim_of(row: &Row) -> Result<Option<ClaimView>, StoreError> {
    let token: Option<Uuid> = row.col("claim_token")?;
    let owner: Option<String> = row.col("claim_owner")?;
    let expires_at_ms: Option<i64> = row.col("claim_expires_at_ms")?;
    let (Some(token), Some(owner), Some(expires_at_ms)) = (token, owner, expires_at_ms) else {
        return Ok(None);
    };
    let now_ms: i64 = row.col("now_ms")?;
    Ok(Some(ClaimView {
        project_id: row.col("project_id")?,
        trigger_id: row.col("trigger_id")?,
        owner,
        token,
        version: row.col("claim_version")?,
        acquired_at_ms: row.col("updated_at_ms")?,
        expires_at_ms,
        remaining_ms: expires_at_ms - now_ms,
        expired: expires_at_ms <= now_ms,
    }))
}

crate::statements::statements! {
    TRIGGER: Observer,
}
