//! Operator actions on schedule rows: the scheduler's own steps by hand (claim, admit, release)
//! and the fenced expiry of a stuck claim (docs/DESIGN.md §4.7, §5.1).
//!
//! Nothing here decides or admits on its own: a manual claim runs the replica's claim statement,
//! an admission goes through [`admit`], a release through [`release`]. What this module adds is
//! the audit trail (every action writes a `schedule_audit` row with the fence before and after,
//! in the transaction that acts) and the explanation an operator needs when an action is refused.
//! A dry run does the same work inside a transaction that is rolled back.

use deadpool_postgres::ClientWrapper;
use serde::Serialize;
use serde_json::{Value, json};
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use super::admit::admit;
use super::claim::{claim_due, claimed_by_fence, release, would_claim};
use super::migrate::gate_closed_by;
use super::read::trigger_detail;
use super::retry::{OPERATOR, retry_conflicts};
use super::row::Named;
use super::{
    Admission, AdmissionOutcome, AdmitStats, Begin, ClaimedRow, ReleaseRequest, RunIdentity,
    SchemaName, Store, StoreError, run_in_transaction,
};
use qlsched_core::diagnose::Diagnosis;
use qlsched_core::{ClaimFence, Decision, FenceRef, TriggerName};

/// A claim that an expiry cleared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Expired {
    pub project_id: String,
    pub trigger_id: String,
    pub fence_before: ClaimFence,
    /// `claim_version` after the expiry: the old holder's version no longer matches.
    pub claim_version: i64,
    pub state_version: i64,
}

/// Who acts and why, for the audit row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor<'a> {
    pub name: &'a str,
    pub reason: Option<&'a str>,
}

// Manual actions are short READ COMMITTED transactions: each statement sees the database's now,
// and the row lock taken by the first statement keeps the row still until the audit row is in.
/// How long a statement of an operator's transaction may wait for a row lock, and run: set for
/// that transaction alone (no session state, which a transaction-mode pooler would hand on),
/// sent in the same message as its BEGIN. A lock held longer (a stuck session) or a statement
/// that runs away ends the command with exit 75 instead of leaving it waiting without end.
pub const OPERATOR_LOCK_TIMEOUT: &str = "5s";
pub const OPERATOR_STATEMENT_TIMEOUT: &str = "60s";

// The bounds of an operator's transaction (OPERATOR_LOCK_TIMEOUT, OPERATOR_STATEMENT_TIMEOUT),
// local to it.
pub(crate) const BOUND_TRANSACTION: &str =
    "SELECT set_config('lock_timeout', '5s', true), set_config('statement_timeout', '60s', true)";

/// `begin` (a BEGIN statement), the schema's transaction settings and [`BOUND_TRANSACTION`] as one
/// simple-query message: one round trip.
pub(crate) fn begin_bounded(schema: &SchemaName, begin: &str) -> String {
    format!("{}; {BOUND_TRANSACTION}", crate::opening(schema, begin))
}

const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE";
const BEGIN_READ_ONLY: &str = "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY";
const COMMIT: &str = "COMMIT";
const ROLLBACK: &str = "ROLLBACK";

// One audit row; `at_ms` is database time, `db_user` defaults to the session's role.
const INSERT_AUDIT: &str = "INSERT INTO schedule_audit
        (project_id, trigger_id, action, actor, reason, at_ms, fence_before, fence_after)
    VALUES ($1, $2, $3, $4, $5, now_ms(), $6, $7)";

// Lock one schedule row and read its claim, so that a fence given by an operator is compared
// with a row nobody can change until this transaction ends.
const LOCK_CLAIM: &str = "SELECT claim_owner, claim_token, claim_version, claim_expires_at_ms,
        claim_expires_at_ms <= now_ms() AS expired
    FROM trigger_schedules WHERE project_id = $1 AND trigger_id = $2
    FOR UPDATE";

// Expire the claims of owner $1 (only those past their lease when $2), or, with $5 given, the
// claim of row ($5, $6) alone, whose fence ($1, $7, $8) the caller read under LOCK_CLAIM: in one
// statement, so that a dead replica gives up all its rows at once, or none. `expired` clears the
// claims of the `target` rows (locked by it, in key order) whose fence is unchanged, moves both
// versions on so that the old holder's admission fails its fence (docs/DESIGN.md §4.7), and
// `audited` audits each. `$3` is the actor, `$4` the reason. The owner's index finds the rows
// either way.
const EXPIRE: &str = "WITH target AS (
        SELECT project_id, trigger_id, claim_owner, claim_token, claim_version, claim_expires_at_ms
        FROM trigger_schedules
        WHERE claim_owner = $1 AND (NOT $2 OR claim_expires_at_ms <= now_ms())
          AND ($5::text IS NULL
               OR (project_id = $5 AND trigger_id = $6
                   AND claim_token = $7 AND claim_version = $8))
        ORDER BY project_id, trigger_id
        FOR UPDATE
    ), expired AS (
        UPDATE trigger_schedules s
        SET claim_owner = NULL, claim_token = NULL, claim_expires_at_ms = NULL,
            claim_version = s.claim_version + 1, state_version = s.state_version + 1,
            updated_at_ms = now_ms()
        FROM target t
        WHERE s.project_id = t.project_id AND s.trigger_id = t.trigger_id
          AND s.claim_token = t.claim_token AND s.claim_version = t.claim_version
        RETURNING t.project_id, t.trigger_id, t.claim_owner, t.claim_token,
                  t.claim_version AS version_before, t.claim_expires_at_ms,
                  s.claim_version, s.state_version
    ), audited AS (
        INSERT INTO schedule_audit
            (project_id, trigger_id, action, actor, reason, at_ms, fence_before, fence_after)
        SELECT project_id, trigger_id, 'expire', $3, $4, now_ms(),
               jsonb_build_object('owner', claim_owner, 'token', claim_token,
                                  'version', version_before, 'expires_at_ms', claim_expires_at_ms),
               jsonb_build_object('owner', NULL, 'token', NULL, 'version', claim_version,
                                  'expires_at_ms', NULL)
        FROM expired
        RETURNING 1
    )
    SELECT project_id, trigger_id, claim_owner, claim_token, version_before,
           claim_expires_at_ms, claim_version, state_version
    FROM expired ORDER BY project_id, trigger_id";

/// Claims the next eligible row in claim order, or the named one, for `owner` with a lease of
/// `lease_ms`, and audits the claim in the same transaction. A named row that is not eligible is
/// [`StoreError::NothingEligible`] with the reason, or [`StoreError::NotFound`].
pub async fn claim(
    store: &Store,
    target: Option<&TriggerName>,
    owner: &str,
    lease_ms: i64,
    dry_run: bool,
) -> Result<ClaimedRow, StoreError> {
    let client = store.lend().await?;
    let begin = if dry_run { BEGIN_READ_ONLY } else { BEGIN };
    let claimed = bounded(
        store,
        &client,
        "claim",
        begin,
        dry_run,
        |client| async move {
            // A dry run reads what the claim would take, by SELECT alone (in a READ ONLY
            // transaction), so that it works for a login that may only read; it writes no claim and
            // no audit row.
            let row = if dry_run {
                would_claim(&**client, target, owner, lease_ms).await?
            } else {
                claim_and_audit(client, target, owner, lease_ms).await?
            };
            // The claim carries the upgrade gate: when it is closed for this build, that is why
            // nothing was claimed (a migration applied since the readiness check before it).
            // Read in the same transaction: a bare statement would not be the transaction's,
            // nor resolve names in the schema, behind a pooler in transaction mode.
            match row {
                Some(row) => Ok(Ok(row)),
                None => Ok(Err(gate_closed_by(&**client).await?)),
            }
        },
    )
    .await;
    let claimed = match claimed? {
        Ok(row) => Ok(row),
        Err(Some(closed_by)) => Err(StoreError::SchemaNotReady(format!(
            "{closed_by}: nothing claimed"
        ))),
        Err(None) => Err(match target {
            None => StoreError::NothingEligible(
                "no schedule row is due and unclaimed (see `qlsched inspect schedules`)".into(),
            ),
            Some(trigger) => not_eligible(store, &client, trigger).await,
        }),
    };
    client.finished();
    claimed
}

async fn claim_and_audit(
    client: &ClientWrapper,
    target: Option<&TriggerName>,
    owner: &str,
    lease_ms: i64,
) -> Result<Option<ClaimedRow>, StoreError> {
    let row = claim_due(&**client, target, owner, 1, lease_ms)
        .await?
        .pop();
    if let Some(row) = &row {
        write_audit(
            &**client,
            &row.name(),
            "claim",
            &Actor {
                name: owner,
                reason: None,
            },
            None,
            Some(fence_json(Some(&row.fence), row.fence.version)),
        )
        .await?;
    }
    Ok(row)
}

/// Why the named row could not be claimed: the trigger's diagnosis, or that a replica holds the
/// row locked at this very moment (the claim skips locked rows rather than wait).
async fn not_eligible(store: &Store, client: &ClientWrapper, trigger: &TriggerName) -> StoreError {
    let schema = store.schema();
    let detail = run_in_transaction(client, schema, Begin::ReadOnly, |client| {
        Box::pin(trigger_detail(client, schema, trigger))
    });
    let detail = match detail.await {
        Ok(detail) => detail,
        Err(error) => return error,
    };
    let reason = match &detail.why_not_firing {
        Diagnosis::SchemaNotReady { detail } => {
            return StoreError::SchemaNotReady(detail.clone());
        }
        Diagnosis::Eligible => {
            "a replica is claiming or admitting it at this moment; try again".to_owned()
        }
        other => format!("{}; {}", other.reason(), other.fix()),
    };
    StoreError::NothingEligible(format!("{trigger} is not eligible: {reason}"))
}

/// The named row as claimed under `fence`, for an admission by a script; a fence that no longer
/// holds is [`StoreError::FenceRejected`] saying what holds now.
pub async fn claimed(
    store: &Store,
    trigger: &TriggerName,
    fence: FenceRef,
) -> Result<ClaimedRow, StoreError> {
    let client = store.lend().await?;
    let claimed = run_in_transaction(&client, store.schema(), Begin::ReadOnly, |client| {
        Box::pin(claimed_by_fence(
            client,
            trigger,
            fence.token,
            fence.version,
        ))
    })
    .await;
    let claimed = match claimed? {
        Some(row) => Ok(row),
        None => Err(fence_rejected(store, &client, trigger, fence).await),
    };
    client.finished();
    claimed
}

/// Admits one claimed row with its decision through the replica's own [`admit`], then audits it.
/// A fence that no longer holds is [`StoreError::FenceRejected`]; nothing was written then.
///
/// The audit row follows the admission's transaction rather than joining it: the admission is
/// one pipelined statement shared with the replicas, and its `run.created` event already records
/// the claim owner and version, so an admission is never without a durable trace.
pub async fn admit_claimed(
    store: &Store,
    row: &ClaimedRow,
    decision: Decision,
    run: Option<RunIdentity>,
    actor: &Actor<'_>,
) -> Result<AdmissionOutcome, StoreError> {
    let client = store.lend().await?;
    let admission = Admission { row, decision, run };
    let mut stats = AdmitStats::default();
    let outcome = admit(
        &client,
        store.sender(),
        std::slice::from_ref(&admission),
        &mut stats,
    )
    .await?
    .pop()
    .unwrap_or(AdmissionOutcome::FenceLost);
    let fence = row.fence.reference();
    let mut definition = false;
    let refusal = match &outcome {
        AdmissionOutcome::Rejected { reason, .. } => Some(reason.clone()),
        AdmissionOutcome::DefinitionRefused { reason } => {
            definition = true;
            Some(reason.clone())
        }
        AdmissionOutcome::FenceLost => {
            match fence_rejected(store, &client, &row.name(), fence).await {
                StoreError::Refused(reason) => Some(reason),
                lost => return Err(lost),
            }
        }
        _ => None,
    };
    if let Some(reason) = refusal {
        // The claim still holds but cannot be admitted (a definition that moved, a corrupt
        // digest): give it back rather than leave the row blocked for the rest of the lease.
        // The release takes a connection of its own; the operator's pool has one.
        client.finished();
        let released = release_claim(store, &row.name(), fence, actor).await;
        let claim = match released {
            Ok(_) => "the claim was released".to_owned(),
            Err(error) => {
                format!("the claim could not be released ({error}) and expires with its lease")
            }
        };
        let message = format!(
            "the admission of {} refused it: {reason}; {claim}",
            row.name()
        );
        return Err(if definition {
            StoreError::DefinitionRefused(message)
        } else {
            StoreError::Refused(message)
        });
    }
    let name = row.name();
    let fence_before = fence_json(Some(&row.fence), row.fence.version);
    let fence_after = fence_json(None, row.fence.version);
    run_in_transaction(&client, store.schema(), Begin::ReadWrite, |client| {
        Box::pin(write_audit(
            client,
            &name,
            "admit",
            actor,
            Some(fence_before),
            Some(fence_after),
        ))
    })
    .await?;
    client.finished();
    Ok(outcome)
}

/// Gives the named row's claim back if `fence` still names it, and audits the release.
pub async fn release_claim(
    store: &Store,
    trigger: &TriggerName,
    fence: FenceRef,
    actor: &Actor<'_>,
) -> Result<ClaimFence, StoreError> {
    let client = store.lend().await?;
    let released = bounded(store, &client, "release", BEGIN, false, |client| {
        release_locked(client, trigger, fence, actor)
    })
    .await;
    let released = match released? {
        Some(before) => Ok(before),
        None => Err(fence_rejected(store, &client, trigger, fence).await),
    };
    client.finished();
    released
}

async fn release_locked(
    client: &ClientWrapper,
    trigger: &TriggerName,
    fence: FenceRef,
    actor: &Actor<'_>,
) -> Result<Option<ClaimFence>, StoreError> {
    let Some(current) = lock_claim(&**client, trigger).await? else {
        return Err(StoreError::NotFound(format!("trigger {trigger}")));
    };
    // An expired claim no longer holds (docs/DESIGN.md §5.4, exit 3), as `claim admit` finds it;
    // clearing one is what `expire` is for.
    let Some(before) = current
        .fence
        .filter(|f| f.is_named_by(fence) && !current.expired)
    else {
        return Ok(None);
    };
    let request = ReleaseRequest {
        project_id: trigger.project_id.clone(),
        trigger_id: trigger.trigger_id.clone(),
        owner: before.owner.clone(),
        token: before.token,
        version: before.version,
    };
    if release(&**client, &[request], &mut 0).await?.is_empty() {
        return Ok(None);
    }
    write_audit(
        &**client,
        trigger,
        "release",
        actor,
        Some(fence_json(Some(&before), before.version)),
        Some(fence_json(None, before.version)),
    )
    .await?;
    Ok(Some(before))
}

/// Expires the named row's claim (docs/DESIGN.md §4.7): with `fence`, only if it still
/// names the claim. Without a claim to expire: [`StoreError::FenceRejected`] when a fence was
/// given, else [`StoreError::NothingEligible`].
pub async fn expire(
    store: &Store,
    trigger: &TriggerName,
    fence: Option<FenceRef>,
    actor: &Actor<'_>,
    dry_run: bool,
) -> Result<Expired, StoreError> {
    let client = store.lend().await?;
    let expired = bounded(store, &client, "expire", BEGIN, dry_run, |client| {
        expire_locked(client, trigger, fence, actor)
    })
    .await;
    let expired = match expired? {
        Some(expired) => Ok(expired),
        None => Err(match fence {
            Some(fence) => fence_rejected(store, &client, trigger, fence).await,
            None => {
                StoreError::NothingEligible(format!("{trigger} holds no claim; nothing to expire"))
            }
        }),
    };
    client.finished();
    expired
}

async fn expire_locked(
    client: &ClientWrapper,
    trigger: &TriggerName,
    fence: Option<FenceRef>,
    actor: &Actor<'_>,
) -> Result<Option<Expired>, StoreError> {
    let Some(current) = lock_claim(&**client, trigger).await? else {
        return Err(StoreError::NotFound(format!("trigger {trigger}")));
    };
    let Some(held) = current.fence else {
        return Ok(None);
    };
    if fence.is_some_and(|fence| !held.is_named_by(fence)) {
        return Ok(None);
    }
    let rows = client
        .query(
            EXPIRE,
            &[
                &held.owner,
                &false,
                &actor.name,
                &actor.reason,
                &Some(&trigger.project_id),
                &trigger.trigger_id,
                &held.token,
                &held.version,
            ],
        )
        .await?;
    rows.first().map(expired_row).transpose()
}

// The registry row of owner $1, unless $2 (only expired claims: the replica may be alive) or the
// replica is live (a heartbeat within two cadences, at least a second: `replicas::LIST`'s rule).
// A live replica's next heartbeat would find a row deleted under it gone and register it again,
// its counters from zero: deleting it would only lose them.
const FORGET_OWNER: &str = "DELETE FROM replicas
    WHERE owner = $1 AND NOT $2
      AND (state = 'stopped' OR heartbeat_at_ms < now_ms() - greatest(2 * cadence_ms, 1000))";

/// What `expire --owner` did: the claims it expired, and whether it forgot the owner's
/// registry row with them.
#[derive(Debug, Clone)]
pub struct OwnerExpiry {
    pub expired: Vec<Expired>,
    pub replica_forgotten: bool,
}

/// Expires every claim of `owner` (only those already past their lease when `expired_only`) in
/// one transaction, each audited; an owner with no claims expires nothing.
pub async fn expire_owner(
    store: &Store,
    owner: &str,
    expired_only: bool,
    actor: &Actor<'_>,
    dry_run: bool,
) -> Result<Vec<Expired>, StoreError> {
    Ok(
        expire_and_forget_owner(store, owner, expired_only, actor, dry_run)
            .await?
            .expired,
    )
}

/// [`expire_owner`], and in the same transaction the owner's registry row forgotten (a replica
/// known to be dead leaves `inspect replicas`, `top` and the metrics with its claims) unless
/// `expired_only` or the replica is live.
pub async fn expire_and_forget_owner(
    store: &Store,
    owner: &str,
    expired_only: bool,
    actor: &Actor<'_>,
    dry_run: bool,
) -> Result<OwnerExpiry, StoreError> {
    let client = store.lend().await?;
    let expired = bounded(
        store,
        &client,
        "expire",
        BEGIN,
        dry_run,
        |client| async move {
            let expired = client
                .query(
                    EXPIRE,
                    &[
                        &owner,
                        &expired_only,
                        &actor.name,
                        &actor.reason,
                        &None::<&str>,
                        &None::<&str>,
                        &None::<Uuid>,
                        &None::<i64>,
                    ],
                )
                .await
                .map_err(StoreError::from)
                .and_then(|rows| rows.iter().map(expired_row).collect())?;
            let forgotten = client
                .execute(FORGET_OWNER, &[&owner, &expired_only])
                .await?;
            Ok(OwnerExpiry {
                expired,
                replica_forgotten: forgotten > 0,
            })
        },
    )
    .await;
    client.finished();
    expired
}

/// Runs `work` in an operator's bounded transaction on `client` opened by `begin`
/// ([`begin_bounded`]), ended by [`finish`] (rolled back for a dry run), and tried again as
/// [`OPERATOR`] says when contention aborts it (a serialization failure, a deadlock with an
/// admission); a lock wait past its bound is reported, not waited again. Every path out of it
/// ends the transaction, so that the caller may give a lent `client` back
/// ([`crate::Lent::finished`]) once it returns; a call cut off before then leaves the
/// connection to be closed, never pooled, as a `Lent` dropped is.
pub(crate) async fn bounded<'c, T, F>(
    store: &Store,
    client: &'c ClientWrapper,
    what: &'static str,
    begin: &str,
    dry_run: bool,
    work: impl Fn(&'c ClientWrapper) -> F,
) -> Result<T, StoreError>
where
    F: Future<Output = Result<T, StoreError>>,
{
    let begin = begin_bounded(store.schema(), begin);
    let (begin, work) = (&begin, &work);
    retry_conflicts(&OPERATOR, what, move |_| async move {
        if let Err(error) = client.batch_execute(begin).await {
            // The BEGIN may have run and a setting after it failed: end what was opened.
            let _ = client.batch_execute(ROLLBACK).await;
            return Err(error.into());
        }
        let done = work(client).await;
        finish(client, done, dry_run).await
    })
    .await
}

// Whether any record names $1 as a claim owner: a claim held now (the claim-owner index), the
// replica registry (its key: a replica is remembered after its last heartbeat for its
// --forget-stale-after, 15 minutes by default and a week for rows of releases before 0.2.0, and a
// day after it stopped), an audited fence (a manual claim, an expiry, a pause: the audit's owner indexes)
// or a misfire record (its owner index). Asked only when `expire --owner` found nothing to expire,
// to tell a typo from an owner with nothing left; each part is an index probe, so an unknown
// owner costs no pass over the history, whatever its size. Runs and their events are not asked:
// a replica that admitted them is in the registry for as long as it matters.
const OWNER_SEEN: &str = "SELECT EXISTS (SELECT 1 FROM trigger_schedules WHERE claim_owner = $1)
    OR EXISTS (SELECT 1 FROM replicas WHERE owner = $1)
    OR EXISTS (SELECT 1 FROM schedule_audit WHERE fence_after->>'owner' = $1)
    OR EXISTS (SELECT 1 FROM schedule_audit WHERE fence_before->>'owner' = $1)
    OR EXISTS (SELECT 1 FROM misfires WHERE owner = $1)";

/// True when `owner` was ever a claim owner, as far as the database remembers.
pub async fn owner_seen(store: &Store, owner: &str) -> Result<bool, StoreError> {
    let owner = owner.to_owned();
    store
        .read(|client| {
            Box::pin(async move { Ok(client.query_one(OWNER_SEEN, &[&owner]).await?.get(0)) })
        })
        .await
}

/// Ends the transaction: COMMIT when `result` is a success and this is not a dry run, else
/// ROLLBACK. The first error wins.
async fn finish<T>(
    client: &ClientWrapper,
    result: Result<T, StoreError>,
    dry_run: bool,
) -> Result<T, StoreError> {
    let end = if dry_run || result.is_err() {
        ROLLBACK
    } else {
        COMMIT
    };
    let ended = client.batch_execute(end).await;
    let value = result?;
    ended?;
    Ok(value)
}

/// A schedule row's claim, read under its row lock.
struct LockedClaim {
    fence: Option<ClaimFence>,
    /// Past its lease in database time (false without a claim).
    expired: bool,
}

async fn lock_claim(
    client: &impl GenericClient,
    trigger: &TriggerName,
) -> Result<Option<LockedClaim>, StoreError> {
    let Some(row) = client
        .query_opt(LOCK_CLAIM, &[&trigger.project_id, &trigger.trigger_id])
        .await?
    else {
        return Ok(None);
    };
    let owner: Option<String> = row.col("claim_owner")?;
    let token: Option<Uuid> = row.col("claim_token")?;
    let expires_at_ms: Option<i64> = row.col("claim_expires_at_ms")?;
    let fence = match (owner, token, expires_at_ms) {
        (Some(owner), Some(token), Some(expires_at_ms)) => Some(ClaimFence {
            owner,
            token,
            version: row.col("claim_version")?,
            expires_at_ms,
        }),
        _ => None,
    };
    let expired = row.col::<Option<bool>>("expired")?.unwrap_or(false);
    Ok(Some(LockedClaim { fence, expired }))
}

/// The refusal of a fence that no longer holds, saying what holds instead.
async fn fence_rejected(
    store: &Store,
    client: &ClientWrapper,
    trigger: &TriggerName,
    fence: FenceRef,
) -> StoreError {
    let schema: &SchemaName = store.schema();
    let detail = run_in_transaction(client, schema, Begin::ReadOnly, |client| {
        Box::pin(trigger_detail(client, schema, trigger))
    });
    let detail = match detail.await {
        Ok(detail) => detail,
        Err(error) => return error,
    };
    let given = format!(
        "the claim {} at version {} on {trigger}",
        fence.token, fence.version
    );
    let Some(state) = &detail.state else {
        return StoreError::SchemaNotReady(detail.why_not_firing.reason());
    };
    let now = match &state.claim {
        None => format!(
            "no longer holds: the row holds no claim now (claim version {})",
            state.schedule.claim_version
        ),
        Some(claim) if claim.token != fence.token || claim.version != fence.version => format!(
            "no longer holds: the row is now claimed by {} at version {}",
            claim.owner, claim.version
        ),
        Some(claim) if claim.expired => format!(
            "no longer holds: it expired {} ago",
            qlsched_core::time::span(-claim.remaining_ms)
        ),
        // The claim is intact, so the admission refused a definition that moved under it. The
        // diagnosis names the known causes; the ones it does not check (a new task revision or
        // execution, a moved cursor) leave it looking at the claim itself.
        Some(_) => {
            return StoreError::Refused(match &detail.why_not_firing {
                Diagnosis::ClaimHeld { .. }
                | Diagnosis::ClaimExpired { .. }
                | Diagnosis::NotDue { .. }
                | Diagnosis::Eligible => "the row or its definition changed under the claim \
                     (see `qlsched inspect trigger`)"
                    .to_owned(),
                cause => cause.reason(),
            });
        }
    };
    StoreError::FenceRejected(format!("{given} {now}"))
}

async fn write_audit(
    client: &impl GenericClient,
    trigger: &TriggerName,
    action: &str,
    actor: &Actor<'_>,
    fence_before: Option<Value>,
    fence_after: Option<Value>,
) -> Result<(), StoreError> {
    client
        .execute(
            INSERT_AUDIT,
            &[
                &trigger.project_id,
                &trigger.trigger_id,
                &action,
                &actor.name,
                &actor.reason,
                &fence_before,
                &fence_after,
            ],
        )
        .await?;
    Ok(())
}

/// A fence as recorded in `schedule_audit`: the claim, or a cleared one at `version`.
fn fence_json(fence: Option<&ClaimFence>, version: i64) -> Value {
    match fence {
        Some(fence) => json!(fence),
        None => json!({ "owner": null, "token": null, "version": version, "expires_at_ms": null }),
    }
}

fn expired_row(row: &Row) -> Result<Expired, StoreError> {
    Ok(Expired {
        project_id: row.col("project_id")?,
        trigger_id: row.col("trigger_id")?,
        fence_before: ClaimFence {
            owner: row.col("claim_owner")?,
            token: row.col("claim_token")?,
            version: row.col("version_before")?,
            expires_at_ms: row.col("claim_expires_at_ms")?,
        },
        claim_version: row.col("claim_version")?,
        state_version: row.col("state_version")?,
    })
}

super::statements::statements! {
    BEGIN: Admin,
    BEGIN_READ_ONLY: Admin | Observer,
    BOUND_TRANSACTION: Admin | Observer,
    COMMIT: Admin,
    ROLLBACK: Admin,
    INSERT_AUDIT: Admin,
    LOCK_CLAIM: Admin,
    EXPIRE: Admin,
    FORGET_OWNER: Admin,
    OWNER_SEEN: Admin,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operators_transaction_is_bounded_by_the_documented_timeouts() {
        assert!(
            BOUND_TRANSACTION.contains(&format!("'lock_timeout', '{OPERATOR_LOCK_TIMEOUT}', true"))
        );
        assert!(BOUND_TRANSACTION.contains(&format!(
            "'statement_timeout', '{OPERATOR_STATEMENT_TIMEOUT}', true"
        )));
        let schema = SchemaName::default();
        assert_eq!(
            begin_bounded(&schema, "BEGIN"),
            format!(
                "BEGIN; SET LOCAL search_path TO \"qlsched\"; SET LOCAL jit TO off; \
                 {BOUND_TRANSACTION}"
            )
        );
    }
}
