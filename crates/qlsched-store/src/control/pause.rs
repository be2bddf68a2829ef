//! `qlsched pause` and `resume` (docs/DESIGN.md §4.10): operational state on the schedule row,
//! apart from the manifest's `enabled`. A pause moves the row's versions so that an admission
//! decided before it fails its fence; a resume records what passed meanwhile as one misfire record
//! and moves the cursor to the first occurrence at or after it. Both are audited.

use std::collections::HashMap;

use deadpool_postgres::ClientWrapper;
use serde::Serialize;
use tokio_postgres::Row;

use super::operator_transaction;
use crate::row::Named;
use crate::{Store, StoreError};
use qlsched_core::TriggerName;

/// A row a pause or a resume changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PauseChange {
    pub project_id: String,
    pub trigger_id: String,
    /// When the row was paused (database time), by whom and why.
    pub paused_at_ms: i64,
    pub paused_by: String,
    pub reason: Option<String>,
    /// Pause: the owner of the claim in flight that the pause voided (its admission fails its
    /// fence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voided_claim_of: Option<String>,
    /// Resume: the cursor after it (the first occurrence at or after the resume; null for a row
    /// not initialized yet, which the next claim initializes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_fire_at_ms: Option<Option<i64>>,
    /// Resume: the occurrences passed while paused, recorded as one misfire record (reason
    /// `paused`); null when none passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passed_over: Option<Option<PassedOver>>,
}

/// The span a resume recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PassedOver {
    pub first_ms: i64,
    pub last_ms: i64,
    pub count: u64,
    pub count_exact: bool,
}

/// What a pause or a resume did: the rows it changed, and how many it left as they were
/// (already paused, or not paused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PauseReport {
    pub changed: Vec<PauseChange>,
    pub unchanged: i64,
}

impl PauseReport {
    /// The rows changed, out of the target's `total`; the rest were left as they were.
    fn of(total: i64, changed: Vec<PauseChange>) -> Self {
        let unchanged = total - i64::try_from(changed.len()).unwrap_or(i64::MAX);
        PauseReport { changed, unchanged }
    }
}

// How many schedule rows project $1 (trigger $2, or all when NULL) has: none is "not found".
const COUNT_ROWS: &str = "SELECT count(*) FROM trigger_schedules
    WHERE project_id = $1 AND ($2::text IS NULL OR trigger_id = $2)";

// Pause the unpaused rows of project $1 (trigger $2, or every row when NULL): who ($3), when
// (database time), why ($4). A claim in flight is cleared and both versions move on, so an
// admission decided before the pause fails its fence (as an expiry does); each row is audited
// with its fence before and after, in the same statement.
const PAUSE: &str = "WITH target AS (
    SELECT project_id, trigger_id, claim_owner, claim_token, claim_version, claim_expires_at_ms
    FROM trigger_schedules
    WHERE project_id = $1 AND ($2::text IS NULL OR trigger_id = $2) AND paused_at_ms IS NULL
    ORDER BY project_id, trigger_id
    FOR UPDATE
), paused AS (
    UPDATE trigger_schedules s
    SET paused_at_ms = now_ms(), paused_by = $3, pause_reason = $4,
        claim_owner = NULL, claim_token = NULL, claim_expires_at_ms = NULL,
        claim_version = s.claim_version + 1, state_version = s.state_version + 1,
        updated_at_ms = now_ms()
    FROM target t
    WHERE s.project_id = t.project_id AND s.trigger_id = t.trigger_id
    RETURNING t.project_id, t.trigger_id, s.paused_at_ms, t.claim_owner, t.claim_token,
              t.claim_version AS version_before, t.claim_expires_at_ms, s.claim_version
), audited AS (
    INSERT INTO schedule_audit
        (project_id, trigger_id, action, actor, reason, at_ms, fence_before, fence_after)
    SELECT project_id, trigger_id, 'pause', $3, $4, now_ms(),
           CASE WHEN claim_token IS NOT NULL THEN
               jsonb_build_object('owner', claim_owner, 'token', claim_token,
                                  'version', version_before, 'expires_at_ms', claim_expires_at_ms)
           END,
           jsonb_build_object('owner', NULL, 'token', NULL, 'version', claim_version,
                              'expires_at_ms', NULL)
    FROM paused
    RETURNING 1
)
SELECT project_id, trigger_id, paused_at_ms, claim_owner FROM paused
ORDER BY project_id, trigger_id";

// The paused rows of project $1 (trigger $2, or all), locked, with what a resume computes from:
// the revision, the cursor, the pattern and the policy; and the database's now, the resume's
// time. Run twice by a resume: first inside a savepoint rolled back at once (UNLOCK_READ), for
// the cron steps to be computed from the rows without holding them, then to hold them while
// what was computed is written where nothing it depends on moved.
const PAUSED_ROWS: &str =
    "SELECT s.project_id, s.trigger_id, s.trigger_revision, s.next_fire_at_ms,
        s.paused_at_ms, s.paused_by, s.pause_reason, t.cron_expr, t.time_zone, t.misfire_policy,
        now_ms() AS now_ms
    FROM trigger_schedules s
    JOIN triggers t ON t.project_id = s.project_id AND t.trigger_id = s.trigger_id
    WHERE s.project_id = $1 AND ($2::text IS NULL OR s.trigger_id = $2)
      AND s.paused_at_ms IS NOT NULL
    ORDER BY s.project_id, s.trigger_id
    FOR UPDATE OF s";

// Around the first PAUSED_ROWS: PostgreSQL releases the row locks taken after a savepoint when
// the transaction rolls back to it, so the read leaves nothing held behind it.
const READ_UNLOCKED: &str = "SAVEPOINT resume_read";
const UNLOCK_READ: &str = "ROLLBACK TO SAVEPOINT resume_read";

// Resume the locked rows given, in one statement whatever their number: for each, the pause
// cleared, the cursor moved to `next_ms` (the first occurrence at or after the resume, or as it
// was) and state_version moved on; the occurrences the pause passed over (where `first_ms` is
// given) recorded as one misfire record with reason `paused`, so that occurrence accounting stays
// whole; and an audit row with `reason`. $11 is the actor, $12 the resume's database time.
const RESUME: &str = "WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::int8[],
                         $7::int8[], $8::bool[], $9::text[], $10::text[])
        AS i(project_id, trigger_id, next_ms, revision, first_ms, last_ms, occurrences, exact,
             policy, reason)
), resumed AS (
    UPDATE trigger_schedules s
    SET paused_at_ms = NULL, paused_by = NULL, pause_reason = NULL, next_fire_at_ms = i.next_ms,
        state_version = s.state_version + 1, updated_at_ms = now_ms()
    FROM input i
    WHERE s.project_id = i.project_id AND s.trigger_id = i.trigger_id
    RETURNING 1
), misfired AS (
    INSERT INTO misfires
        (project_id, trigger_id, trigger_revision, first_occurrence_ms, last_occurrence_ms,
         occurrences, occurrences_exact, policy, reason, owner, decided_at_ms, recorded_at_ms)
    SELECT project_id, trigger_id, revision, first_ms, last_ms, occurrences, exact, policy,
           'paused', $11, $12, now_ms()
    FROM input WHERE first_ms IS NOT NULL
    RETURNING 1
), audited AS (
    INSERT INTO schedule_audit (project_id, trigger_id, action, actor, reason, at_ms)
    SELECT project_id, trigger_id, 'resume', $11, reason, now_ms() FROM input
    RETURNING 1
)
SELECT (SELECT count(*) FROM resumed), (SELECT count(*) FROM misfired),
       (SELECT count(*) FROM audited)";

// Manual actions on schedule rows are short READ COMMITTED transactions: the row locks keep the
// rows still until the audit rows are in.
const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE";

/// Pauses the trigger `target.1` of project `target.0`, or every trigger of the project.
pub async fn pause(
    store: &Store,
    (project_id, trigger_id): (&str, Option<&str>),
    actor: &str,
    reason: Option<&str>,
    dry_run: bool,
) -> Result<PauseReport, StoreError> {
    let request = (project_id, trigger_id, actor, reason);
    operator_transaction(
        store,
        "pause",
        BEGIN,
        dry_run,
        &request,
        |client, &(project_id, trigger_id, actor, reason)| {
            Box::pin(pause_rows(client, project_id, trigger_id, actor, reason))
        },
    )
    .await
}

async fn pause_rows(
    client: &ClientWrapper,
    project_id: &str,
    trigger_id: Option<&str>,
    actor: &str,
    reason: Option<&str>,
) -> Result<PauseReport, StoreError> {
    let total = require_rows(client, project_id, trigger_id).await?;
    let rows = client
        .query(PAUSE, &[&project_id, &trigger_id, &actor, &reason])
        .await?;
    let changed = rows
        .iter()
        .map(|row| {
            Ok(PauseChange {
                project_id: row.col("project_id")?,
                trigger_id: row.col("trigger_id")?,
                paused_at_ms: row.col("paused_at_ms")?,
                paused_by: actor.to_owned(),
                reason: reason.map(str::to_owned),
                voided_claim_of: row.col("claim_owner")?,
                next_fire_at_ms: None,
                passed_over: None,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(PauseReport::of(total, changed))
}

/// How many schedule rows the target has; [`StoreError::NotFound`] for none at all.
async fn require_rows(
    client: &ClientWrapper,
    project_id: &str,
    trigger_id: Option<&str>,
) -> Result<i64, StoreError> {
    let total: i64 = client
        .query_one(COUNT_ROWS, &[&project_id, &trigger_id])
        .await?
        .get(0);
    not_found_if_none(total, project_id, trigger_id)?;
    Ok(total)
}

fn not_found_if_none(
    total: i64,
    project_id: &str,
    trigger_id: Option<&str>,
) -> Result<(), StoreError> {
    if total > 0 {
        return Ok(());
    }
    Err(StoreError::NotFound(match trigger_id {
        Some(trigger_id) => format!("trigger {}", TriggerName::new(project_id, trigger_id)),
        None => format!("project {project_id} (no schedule rows)"),
    }))
}

/// Resumes the paused trigger (or every paused trigger of the project): the occurrences that
/// passed while it was paused are recorded as one misfire record (reason `paused`, the trigger's
/// policy), none is admitted, and the cursor moves to the first occurrence at or after the
/// resume (database time). A row not initialized stays so.
pub async fn resume(
    store: &Store,
    (project_id, trigger_id): (&str, Option<&str>),
    actor: &str,
    dry_run: bool,
) -> Result<PauseReport, StoreError> {
    let request = (project_id, trigger_id, actor);
    operator_transaction(
        store,
        "resume",
        BEGIN,
        dry_run,
        &request,
        |client, &(project_id, trigger_id, actor)| {
            Box::pin(resume_rows(client, project_id, trigger_id, actor))
        },
    )
    .await
}

async fn resume_rows(
    client: &ClientWrapper,
    project_id: &str,
    trigger_id: Option<&str>,
    actor: &str,
) -> Result<PauseReport, StoreError> {
    let total = require_rows(client, project_id, trigger_id).await?;
    // The cron steps (up to `MAX_COUNTED_MISFIRES` a row) computed while no row is held, so
    // that a project of many long-paused triggers does not hold them all, and every admission
    // waiting on one, while they are counted. The read itself waits, as the lock below does, for
    // a row another session holds (up to the transaction's lock timeout), and holds the rows
    // only while it runs.
    client.batch_execute(READ_UNLOCKED).await?;
    let read = client
        .query(PAUSED_ROWS, &[&project_id, &trigger_id])
        .await?;
    client.batch_execute(UNLOCK_READ).await?;
    let computed: HashMap<StepInputs, Steps> = read
        .iter()
        .filter_map(|row| Some((step_inputs(row).ok()?, resume_steps(row).ok()?)))
        .collect();
    let rows = client
        .query(PAUSED_ROWS, &[&project_id, &trigger_id])
        .await?;
    let changed = rows
        .iter()
        .map(|row| resumed_row(row, &computed))
        .collect::<Result<Vec<_>, _>>()?;
    write_resumes(client, &rows, &changed, actor).await?;
    Ok(PauseReport::of(total, changed))
}

/// What a resume's cron steps depend on besides the time: the row's name, revision, cursor and
/// pause, and its trigger's pattern and zone.
type StepInputs = (
    String,
    String,
    i64,
    Option<i64>,
    Option<i64>,
    String,
    String,
);

/// A resumed row's next cursor and the occurrences its pause passed over.
type Steps = (Option<i64>, Option<PassedOver>);

fn step_inputs(row: &Row) -> Result<StepInputs, StoreError> {
    Ok((
        row.col("project_id")?,
        row.col("trigger_id")?,
        row.col("trigger_revision")?,
        row.col("next_fire_at_ms")?,
        row.col("paused_at_ms")?,
        row.col("cron_expr")?,
        row.col("time_zone")?,
    ))
}

/// What resuming one locked row does: the steps computed before the lock when nothing they
/// depend on moved since and the time has not reached the next cursor they found (so that the
/// same next cursor and the same passed-over span follow from the locked row's now), else
/// computed again here, under the lock.
fn resumed_row(
    row: &Row,
    computed: &HashMap<StepInputs, Steps>,
) -> Result<PauseChange, StoreError> {
    let name = TriggerName::new(
        row.col::<String>("project_id")?,
        row.col::<String>("trigger_id")?,
    );
    let now_ms: i64 = row.col("now_ms")?;
    let (next, passed) = match computed.get(&step_inputs(row)?) {
        Some(steps) if steps.0.is_none_or(|next| next >= now_ms) => *steps,
        _ => resume_steps(row)?,
    };
    Ok(PauseChange {
        project_id: name.project_id,
        trigger_id: name.trigger_id,
        paused_at_ms: row.col("paused_at_ms")?,
        paused_by: row.col("paused_by")?,
        reason: row.col("pause_reason")?,
        voided_claim_of: None,
        next_fire_at_ms: Some(next),
        passed_over: Some(passed),
    })
}

/// The cron steps of resuming `row` at its `now_ms` (the cron is evaluated in Rust).
fn resume_steps(row: &Row) -> Result<Steps, StoreError> {
    let name = TriggerName::new(
        row.col::<String>("project_id")?,
        row.col::<String>("trigger_id")?,
    );
    let cursor: Option<i64> = row.col("next_fire_at_ms")?;
    let (cron_expr, time_zone): (String, String) = (row.col("cron_expr")?, row.col("time_zone")?);
    let now_ms: i64 = row.col("now_ms")?;
    let schedule = qlsched_core::CronSchedule::parse(&cron_expr, &time_zone).map_err(|error| {
        StoreError::BadInput(format!(
            "{name}: its stored cron cannot be evaluated ({error}); \
             publish it again"
        ))
    })?;
    let evaluate =
        |error: qlsched_core::CoreError| StoreError::BadInput(format!("{name}: {error}"));
    Ok(match cursor {
        None => (None, None),
        Some(cursor) if cursor >= now_ms => (Some(cursor), None),
        Some(cursor) => {
            let next = schedule.next_at_or_after(now_ms).map_err(evaluate)?;
            let first = schedule.next_at_or_after(cursor).map_err(evaluate)?;
            let passed = if first < next {
                let last = schedule
                    .latest_before(next)
                    .map_err(evaluate)?
                    .unwrap_or(first);
                let (count, count_exact) = schedule
                    .count_between(first, last, qlsched_core::decide::MAX_COUNTED_MISFIRES)
                    .map_err(evaluate)?;
                Some(PassedOver {
                    first_ms: first,
                    last_ms: last,
                    count,
                    count_exact,
                })
            } else {
                None
            };
            (Some(next), passed)
        }
    })
}

/// Writes the resumes of `rows` (locked by PAUSED_ROWS, in its order) as `changed` computed
/// them, in one statement: a project of a thousand paused triggers takes one round trip.
async fn write_resumes(
    client: &ClientWrapper,
    rows: &[Row],
    changed: &[PauseChange],
    actor: &str,
) -> Result<(), StoreError> {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    let now_ms: i64 = first.col("now_ms")?;
    let column =
        |f: &dyn Fn(&PauseChange) -> Option<i64>| changed.iter().map(f).collect::<Vec<_>>();
    let passed = |c: &PauseChange| c.passed_over.flatten();
    let project_ids: Vec<&str> = changed.iter().map(|c| c.project_id.as_str()).collect();
    let trigger_ids: Vec<&str> = changed.iter().map(|c| c.trigger_id.as_str()).collect();
    let next = column(&|c| c.next_fire_at_ms.flatten());
    let revisions = rows
        .iter()
        .map(|row| row.col("trigger_revision"))
        .collect::<Result<Vec<i64>, _>>()?;
    let firsts = column(&|c| passed(c).map(|p| p.first_ms));
    let lasts = column(&|c| passed(c).map(|p| p.last_ms));
    let counts = column(&|c| passed(c).map(|p| i64::try_from(p.count).unwrap_or(i64::MAX)));
    let exact: Vec<Option<bool>> = changed
        .iter()
        .map(|c| passed(c).map(|p| p.count_exact))
        .collect();
    let policies = rows
        .iter()
        .map(|row| row.col("misfire_policy"))
        .collect::<Result<Vec<String>, _>>()?;
    let reasons: Vec<String> = changed
        .iter()
        .map(|c| match passed(c) {
            Some(p) => format!(
                "paused by {}; {}{} occurrences passed over, recorded as a misfire",
                c.paused_by,
                p.count,
                if p.count_exact { "" } else { "+" }
            ),
            None => format!("paused by {}; no occurrence passed", c.paused_by),
        })
        .collect();
    client
        .query_one(
            RESUME,
            &[
                &project_ids,
                &trigger_ids,
                &next,
                &revisions,
                &firsts,
                &lasts,
                &counts,
                &exact,
                &policies,
                &reasons,
                &actor,
                &now_ms,
            ],
        )
        .await?;
    Ok(())
}

super::super::statements::statements! {
    COUNT_ROWS: Admin,
    PAUSE: Admin,
    PAUSED_ROWS: Admin,
    READ_UNLOCKED: Admin,
    UNLOCK_READ: Admin,
    RESUME: Admin,
    BEGIN: Admin,
}
