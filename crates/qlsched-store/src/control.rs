//! Admissions outside a claim: `qlsched fire` (one manual run now) and `qlsched backfill` (past
//! cron occurrences that have no run), docs/DESIGN.md §4.10.
//!
//! Each is one SERIALIZABLE transaction, as the scheduler's admission (§4.5): it locks the
//! schedule row, re-reads every definition the runs rest on (project active, trigger at the
//! schedule row's revision, task pinned to an execution revision that is `remote_worker` with a
//! digest equal to the sha256 of its spec, recomputed here), writes each run with its claimed
//! attempt and the `run.created` and `run.queued` events, and ends in `admission_complete()`,
//! which raises when the writes do not add up. The schedule row is locked, never changed: the
//! cursor does not move.
//!
//! Why a backfill can never duplicate what the scheduler admits: it admits only occurrences
//! before the schedule row's bound, read under the row lock, and the scheduler admits only
//! occurrences at or after its cursor. The bound is the cursor; for a row without a cursor it
//! is the time of the claim in flight (whose decision initializes the cursor to the first
//! occurrence after that time), else the database's now. Each run is written under its
//! occurrence's regular cron key (`core::idempotency_key`) and only when no cron or backfill
//! run of that trigger exists for the occurrence (any revision), so a rerun, or a backfill racing
//! another, admits nothing twice.

mod pause;

pub use pause::{PassedOver, PauseChange, PauseReport, pause, resume};

use deadpool_postgres::ClientWrapper;
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use super::error::stored;
use super::row::Named;
use super::{Begin, Store, StoreError, Work};
use qlsched_core::run_id::run_id;
use qlsched_core::{ProjectStatus, TriggerName};

/// Where an admitted run came from (`runs.origin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `qlsched fire`.
    Manual,
    /// `qlsched backfill`.
    Backfill,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Manual => "manual",
            Origin::Backfill => "backfill",
        }
    }
}

const BEGIN_SERIALIZABLE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE READ WRITE";

// Lock one schedule row and read, in the same snapshot, every definition a run admitted outside
// a claim rests on, the row's bound for backfills (its cursor; without one, the time of a claim
// in flight or now), the database's now, when the trigger was first published, and the
// retention horizon (`store::retention`).
const LOCK_TARGET: &str = "SELECT s.trigger_revision AS schedule_revision,
        t.revision AS trigger_revision, p.status, t.enabled,
        t.cron_expr, t.time_zone, t.task_id, k.revision AS task_revision, k.execution_revision_id,
        e.kind = 'remote_worker'
            AND e.digest = encode(sha256(convert_to(e.spec::text, 'UTF8')), 'hex') AS execution_sound,
        coalesce(s.next_fire_at_ms,
                 CASE WHEN s.claim_token IS NOT NULL THEN s.updated_at_ms END, now_ms()) AS bound_ms,
        now_ms() AS now_ms, s.paused_at_ms IS NOT NULL AS paused, t.created_at_ms,
        (SELECT horizon_ms FROM run_retention WHERE singleton) AS horizon_ms
    FROM trigger_schedules s
    JOIN projects p ON p.project_id = s.project_id
    JOIN triggers t ON t.project_id = s.project_id AND t.trigger_id = s.trigger_id
    JOIN tasks k ON k.project_id = t.project_id AND k.task_id = t.task_id
    JOIN execution_revisions e ON e.execution_revision_id = k.execution_revision_id
    WHERE s.project_id = $1 AND s.trigger_id = $2
    FOR UPDATE OF s";

// Insert runs $1.. for trigger $5/$6 (revision $7, task $8 at $9, execution revision $10) with
// origin $11, each with its claimed attempt and both events, skipping a key already taken and,
// for a backfill, an occurrence that already has a cron or backfill run of any revision; then
// check that the writes add up. Returns the occurrences written.
const ADMIT_UNCLAIMED: &str = "WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::int8[])
        AS i(run_id, attempt_id, idempotency_key, scheduled_for_ms)
), new_runs AS (
    INSERT INTO runs (run_id, project_id, trigger_id, trigger_revision, task_id, task_revision,
                      execution_revision_id, idempotency_key, status, scheduled_for_ms,
                      created_at_ms, queued_at_ms, origin)
    SELECT i.run_id, $5::text, $6::text, $7::int8, $8::text, $9::int8, $10::uuid,
           i.idempotency_key, 'queued', i.scheduled_for_ms, now_ms(), now_ms(), $11::text
    FROM input i
    WHERE $11::text = 'manual' OR NOT EXISTS (
        SELECT 1 FROM runs r
        WHERE r.project_id = $5::text AND r.trigger_id = $6::text
          AND r.scheduled_for_ms = i.scheduled_for_ms AND r.origin <> 'manual')
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING run_id, idempotency_key, scheduled_for_ms
), new_attempts AS (
    INSERT INTO attempts (attempt_id, run_id, attempt_no, executor, state, created_at_ms)
    SELECT i.attempt_id, n.run_id, 1, 'remote_worker', 'claimed', now_ms()
    FROM new_runs n JOIN input i ON i.run_id = n.run_id
    RETURNING 1
), new_events AS (
    INSERT INTO run_events (run_id, seq, type, at_ms, payload)
    SELECT n.run_id, e.seq, e.type, now_ms(),
           CASE e.seq
               WHEN 1 THEN run_created_payload(n.idempotency_key, n.scheduled_for_ms, $11::text,
                                               $11::text, $12::text, NULL, NULL)
               ELSE run_queued_payload(i.attempt_id)
           END
    FROM new_runs n JOIN input i ON i.run_id = n.run_id
    CROSS JOIN (VALUES (1, 'run.created'), (2, 'run.queued')) AS e(seq, type)
    RETURNING 1
), counts AS (
    SELECT (SELECT count(*) FROM new_runs) AS runs, (SELECT count(*) FROM new_attempts) AS attempts,
           (SELECT count(*) FROM new_events) AS events
)
SELECT admission_complete(runs, runs, runs, runs, attempts, events),
       (SELECT coalesce(array_agg(scheduled_for_ms), '{}') FROM new_runs) AS written
FROM counts";

// A manual run retention deleted, by its key: a request id used before, whose run is gone.
const RETIRED_BY_KEY: &str = "SELECT run_id, scheduled_for_ms FROM retired_manual_runs
    WHERE idempotency_key = $1";

// The run that holds an idempotency key, for a `fire` repeated with its request id.
const RUN_BY_KEY: &str =
    "SELECT run_id, scheduled_for_ms, origin FROM runs WHERE idempotency_key = $1";

// One audit row for a fire or a backfill transaction; `at_ms` is database time.
const INSERT_AUDIT: &str = "INSERT INTO schedule_audit
        (project_id, trigger_id, action, actor, reason, at_ms)
    VALUES ($1, $2, $3, $4, $5, now_ms())";

/// The definitions a run admitted outside a claim rests on, read under the row lock.
#[derive(Debug, Clone)]
pub struct Target {
    pub project_id: String,
    pub trigger_id: String,
    pub trigger_revision: i64,
    pub cron_expr: String,
    pub time_zone: String,
    pub task_id: String,
    pub task_revision: i64,
    pub execution_revision_id: Uuid,
    pub enabled: bool,
    pub paused: bool,
    /// Backfills admit only occurrences before this (module docs).
    pub bound_ms: i64,
    pub now_ms: i64,
    /// When the trigger was first published (its first revision; later revisions keep it).
    pub created_at_ms: i64,
    /// Occurrences before this may have lost their runs to retention: none is admitted there
    /// (`store::retention`); null while retention has deleted nothing.
    pub horizon_ms: Option<i64>,
}

impl Target {
    fn name(&self) -> TriggerName {
        TriggerName::new(&self.project_id, &self.trigger_id)
    }
}

/// Reads the target without writing: for `fire` and `backfill` to name the revision and check
/// the range before their transaction, and for `--dry-run`.
pub async fn read_target(store: &Store, trigger: &TriggerName) -> Result<Target, StoreError> {
    // One statement in a transaction of its own: its row lock waits for an admission in flight
    // and is gone with the transaction; no snapshot to serialize against. Under the operators'
    // bounds (`operator::OPERATOR_LOCK_TIMEOUT`): a row held longer (a stuck session, a table
    // lock) ends the command with exit 75 instead of a wait without end.
    operator_transaction(
        store,
        "reading the trigger",
        Begin::ReadWrite.statement(),
        false,
        trigger,
        |client, trigger| Box::pin(lock_target(client, trigger)),
    )
    .await
}

async fn lock_target(
    client: &tokio_postgres::Client,
    name: &TriggerName,
) -> Result<Target, StoreError> {
    let TriggerName {
        project_id,
        trigger_id,
    } = name;
    let row: Row = client
        .query_opt(LOCK_TARGET, &[project_id, trigger_id])
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("trigger {name}")))?;
    let schedule_revision: i64 = row.col("schedule_revision")?;
    let trigger_revision: i64 = row.col("trigger_revision")?;
    let status: ProjectStatus = stored("projects", "status", row.col("status")?)?;
    if status != ProjectStatus::Active {
        return Err(StoreError::NothingEligible(format!(
            "{name}: project {project_id} is {status}; nothing is admitted for a suspended \
             project (publish it with status active first)"
        )));
    }
    if schedule_revision != trigger_revision {
        return Err(StoreError::NothingEligible(format!(
            "{name}: its schedule row is at revision {schedule_revision}, the trigger at \
             {trigger_revision} (edited by hand?); publish the trigger again"
        )));
    }
    let execution_revision_id: Uuid = row.col("execution_revision_id")?;
    if !row.col::<bool>("execution_sound")? {
        return Err(StoreError::NothingEligible(format!(
            "{name}: execution revision {execution_revision_id} is corrupt (its digest does not \
             match its spec); every admission is refused until the task is published again"
        )));
    }
    Ok(Target {
        project_id: project_id.to_owned(),
        trigger_id: trigger_id.to_owned(),
        trigger_revision,
        enabled: row.col("enabled")?,
        cron_expr: row.col("cron_expr")?,
        time_zone: row.col("time_zone")?,
        task_id: row.col("task_id")?,
        task_revision: row.col("task_revision")?,
        execution_revision_id,
        bound_ms: row.col("bound_ms")?,
        now_ms: row.col("now_ms")?,
        paused: row.col("paused")?,
        created_at_ms: row.col("created_at_ms")?,
        horizon_ms: row.col("horizon_ms")?,
    })
}

/// The target locked ([`lock_target`]) at `revision`, the one its caller computed from: a
/// trigger published since is refused (exit 3), with `since` saying when and what to do.
async fn lock_at(
    client: &tokio_postgres::Client,
    trigger: &TriggerName,
    revision: i64,
    since: &str,
) -> Result<Target, StoreError> {
    let target = lock_target(client, trigger).await?;
    if target.trigger_revision != revision {
        return Err(StoreError::FenceRejected(format!(
            "{}: published again (revision {} → {}) {since}",
            target.name(),
            revision,
            target.trigger_revision
        )));
    }
    Ok(target)
}

/// What `fire` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Fired {
    pub run_id: Uuid,
    pub idempotency_key: String,
    pub scheduled_for_ms: i64,
    /// False when the request id had been used: the run reported is the one it admitted then.
    pub created: bool,
    pub trigger_revision: i64,
}

/// The key of a manual run: `ql3:manual:v1:<P/T>:<revision>:<request id>`.
pub fn manual_key(trigger: &str, revision: i64, request_id: &str) -> String {
    format!("ql3:manual:v1:{trigger}:{revision}:{request_id}")
}

/// Admits one manual run of the trigger now (database time), at the revision `revision` (the
/// one the request id's key names; a trigger published since is refused, exit 3), or reports
/// the run an earlier call with the same request id admitted. `dry_run` checks everything and
/// rolls back.
pub async fn fire(
    store: &Store,
    trigger: &TriggerName,
    revision: i64,
    request_id: &str,
    actor: &str,
    dry_run: bool,
) -> Result<Fired, StoreError> {
    let request = (trigger, revision, request_id, actor);
    operator_transaction(
        store,
        "fire",
        BEGIN_SERIALIZABLE,
        dry_run,
        &request,
        |client, &(trigger, revision, request_id, actor)| {
            Box::pin(fire_in_transaction(
                client, trigger, revision, request_id, actor,
            ))
        },
    )
    .await
}

async fn fire_in_transaction(
    client: &ClientWrapper,
    trigger: &TriggerName,
    revision: i64,
    request_id: &str,
    actor: &str,
) -> Result<Fired, StoreError> {
    let since = "since the request was made; fire again";
    let target = lock_at(client, trigger, revision, since).await?;
    let key = manual_key(&target.name().to_string(), revision, request_id);
    if let Some(retired) = client
        .query_opt(RETIRED_BY_KEY, &[&key])
        .await
        .map_err(StoreError::from_db)?
    {
        let run_id: Uuid = retired.col("run_id")?;
        let scheduled_for_ms: i64 = retired.col("scheduled_for_ms")?;
        return Err(StoreError::NothingEligible(format!(
            "{}: request id {request_id} admitted run {run_id} at {}, before the retention \
             horizon{}; retention has deleted that run, and a request id never admits a second \
             run (use a new request id to fire again)",
            target.name(),
            qlsched_core::time::utc(scheduled_for_ms),
            target
                .horizon_ms
                .map_or_else(String::new, |h| format!(" {}", qlsched_core::time::utc(h)))
        )));
    }
    let written = admit_unclaimed(
        client,
        &target,
        &[(key.clone(), target.now_ms)],
        Origin::Manual,
        actor,
    )
    .await?;
    // Nothing written: the request id's run exists already, and is reported as it is.
    let created = !written.is_empty();
    if created {
        audit(
            client,
            &target,
            "fire",
            actor,
            &format!("request {request_id}"),
        )
        .await?;
    }
    let row = client
        .query_one(RUN_BY_KEY, &[&key])
        .await
        .map_err(StoreError::from_db)?;
    Ok(Fired {
        run_id: row.col("run_id")?,
        idempotency_key: key,
        scheduled_for_ms: row.col("scheduled_for_ms")?,
        created,
        trigger_revision: revision,
    })
}

/// What one backfill transaction did with its occurrences.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BackfillBatch {
    /// Admitted now (with `dry_run`: would be).
    pub admitted: u64,
    /// Had a run already (the scheduler's, an earlier backfill's).
    pub existing: u64,
    /// At or after the row's bound: the scheduler's to admit or record (module docs).
    pub left_to_scheduler: u64,
}

/// Admits the cron occurrences `occurrences` (ascending) of the trigger at revision `revision`
/// that have no run, in one transaction. A trigger published since the occurrences were
/// computed is refused (exit 3): they may not be its occurrences any more.
pub async fn backfill(
    store: &Store,
    trigger: &TriggerName,
    revision: i64,
    occurrences: &[i64],
    actor: &str,
    dry_run: bool,
) -> Result<BackfillBatch, StoreError> {
    let request = (trigger, revision, occurrences, actor);
    operator_transaction(
        store,
        "backfill",
        BEGIN_SERIALIZABLE,
        dry_run,
        &request,
        |client, &(trigger, revision, occurrences, actor)| {
            Box::pin(backfill_in_transaction(
                client,
                trigger,
                revision,
                occurrences,
                actor,
            ))
        },
    )
    .await
}

async fn backfill_in_transaction(
    client: &ClientWrapper,
    trigger: &TriggerName,
    revision: i64,
    occurrences: &[i64],
    actor: &str,
) -> Result<BackfillBatch, StoreError> {
    let since = "during the backfill; what was admitted stays, run it again for the rest";
    let target = lock_at(client, trigger, revision, since).await?;
    if !target.enabled {
        return Err(StoreError::NothingEligible(format!(
            "{}: the trigger is disabled, so it has no occurrences to backfill (enable it by \
             publishing enabled: true)",
            target.name()
        )));
    }
    if let Some(refusal) = before_horizon(&target, occurrences) {
        return Err(refusal);
    }
    let name = target.name().to_string();
    let (owed, later): (Vec<i64>, Vec<i64>) =
        occurrences.iter().partition(|&&at| at < target.bound_ms);
    let keyed: Vec<(String, i64)> = owed
        .iter()
        .map(|&at| (qlsched_core::idempotency_key(&name, revision, at), at))
        .collect();
    let written = admit_unclaimed(client, &target, &keyed, Origin::Backfill, actor).await?;
    let admitted = written.len() as u64;
    if admitted > 0 {
        let (first, last) = (written.iter().min(), written.iter().max());
        audit(
            client,
            &target,
            "backfill",
            actor,
            &format!(
                "{admitted} occurrences from {} to {}",
                first.map_or_else(String::new, |&t| qlsched_core::time::utc(t)),
                last.map_or_else(String::new, |&t| qlsched_core::time::utc(t))
            ),
        )
        .await?;
    }
    Ok(BackfillBatch {
        admitted,
        existing: owed.len() as u64 - admitted,
        left_to_scheduler: later.len() as u64,
    })
}

/// The refusal of occurrences (ascending) that reach before the retention horizon: there a run
/// may have been deleted, so that an occurrence that ran looks like one that never did, and
/// admitting it would run it twice. Exit 5 (nothing eligible), nothing written.
pub fn before_horizon(target: &Target, occurrences: &[i64]) -> Option<StoreError> {
    let horizon = target.horizon_ms?;
    let first = *occurrences.first()?;
    (first < horizon).then(|| {
        let utc = qlsched_core::time::utc;
        StoreError::NothingEligible(format!(
            "{}: the window starts at {}, before the retention horizon {}: runs of occurrences \
             before it may have been deleted, so a backfill there cannot tell an occurrence that \
             ran from one that never did; nothing admitted (start the window at or after {})",
            target.name(),
            utc(first),
            utc(horizon),
            utc(horizon)
        ))
    })
}

/// Writes the runs `keyed` (key, occurrence) with their attempts and events; returns the
/// occurrences written.
async fn admit_unclaimed(
    client: &ClientWrapper,
    target: &Target,
    keyed: &[(String, i64)],
    origin: Origin,
    actor: &str,
) -> Result<Vec<i64>, StoreError> {
    if keyed.is_empty() {
        return Ok(Vec::new());
    }
    let owner_ms = u64::try_from(target.now_ms).unwrap_or(0);
    let run_ids: Vec<Uuid> = keyed
        .iter()
        .map(|_| {
            let mut entropy = [0u8; 8];
            entropy.copy_from_slice(&Uuid::new_v4().as_bytes()[8..16]);
            run_id(actor, owner_ms, entropy)
        })
        .collect();
    let attempt_ids: Vec<Uuid> = keyed.iter().map(|_| Uuid::now_v7()).collect();
    let keys: Vec<&str> = keyed.iter().map(|(key, _)| key.as_str()).collect();
    let at: Vec<i64> = keyed.iter().map(|(_, at)| *at).collect();
    let row = client
        .query_one(
            ADMIT_UNCLAIMED,
            &[
                &run_ids,
                &attempt_ids,
                &keys,
                &at,
                &target.project_id,
                &target.trigger_id,
                &target.trigger_revision,
                &target.task_id,
                &target.task_revision,
                &target.execution_revision_id,
                &origin.as_str(),
                &actor,
            ],
        )
        .await
        .map_err(StoreError::from_db)?;
    row.col("written")
}

async fn audit(
    client: &ClientWrapper,
    target: &Target,
    action: &str,
    actor: &str,
    reason: &str,
) -> Result<(), StoreError> {
    client
        .execute(
            INSERT_AUDIT,
            &[
                &target.project_id,
                &target.trigger_id,
                &action,
                &actor,
                &reason,
            ],
        )
        .await
        .map_err(StoreError::from_db)?;
    Ok(())
}

/// Runs `work` (on `args`, which it borrows beside the connection) in one operator's transaction
/// (`operator::bounded`: opened by `begin` under the operators' bounds, committed, or rolled
/// back for a dry run or an error, and tried again as [`super::retry::OPERATOR`] says while it fails on
/// contention, a replica admitting or claiming the same rows at that moment).
///
/// On a connection lent for it ([`Store::lend`]), back to the pool once every attempt has ended
/// its transaction; a call cut off before that (a command interrupted, `top` quitting with a
/// pause in flight) closes the connection instead, so that no transaction left open is handed on.
async fn operator_transaction<A: Sync + ?Sized, T>(
    store: &Store,
    what: &'static str,
    begin: &str,
    dry_run: bool,
    args: &A,
    work: impl for<'c> Fn(&'c ClientWrapper, &'c A) -> Work<'c, T>,
) -> Result<T, StoreError> {
    let lent = store.lend().await?;
    let done = crate::operator::bounded(store, &lent, what, begin, dry_run, |client| {
        work(client, args)
    })
    .await;
    lent.finished();
    done
}

super::statements::statements! {
    @also pause;
    BEGIN_SERIALIZABLE: Admin,
    LOCK_TARGET: Admin,
    ADMIT_UNCLAIMED: Admin,
    RUN_BY_KEY: Admin,
    RETIRED_BY_KEY: Admin,
    INSERT_AUDIT: Admin,
}
