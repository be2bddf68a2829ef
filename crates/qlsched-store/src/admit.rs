//! The admission: one SERIALIZABLE transaction that re-checks the full claim fence and every
//! definition a decision was taken on, then writes the queued run, its claimed `remote_worker`
//! attempt, the `run.created` and `run.queued` events, and advances the schedule, clearing the
//! claim (docs/DESIGN.md §4.5).
//!
//! One file of about 1,000 lines on purpose: the statement, its parameter list, the retries, the
//! one-by-one fall-back and the settlement of an unknown outcome are one protocol, and each part
//! is only correct given the others.
//!
//! Shape, chosen for throughput without weakening any of that:
//! - A claimed batch is admitted by one statement, each row's fence checked in it. A batch that
//!   fails (a lost fence, a refused row, retries exhausted, or any server error that is not the
//!   server's own state: a user trigger raising, a resource a smaller transaction fits in) falls
//!   back to admitting its rows one by one, so one stale or poisoned row never blocks the others
//!   and every row gets its own verdict. Only an error that would fail every row alike (the
//!   connection gone, a read-only server: `error::is_server_wide`) ends the batch as an error.
//!   The server short of a resource of its own (class 53: its predicate-lock table full, memory,
//!   disk) is met first by the same rows again after pauses (`retry::RESOURCES`, about 1.5 s in
//!   all): the shortage is the server's, and usually over once the transaction that caused it
//!   ends; a row that still finds no room on its own is given back.
//! - The server's predicate-lock table, which every SERIALIZABLE transaction shares and a long
//!   one keeps full of the locks of every transaction that overlapped it, is spent by the batch,
//!   not by the row: the transaction first samples each definition table it reads
//!   (`LOCK_DEFINITIONS`), which PostgreSQL predicate-locks as the whole relation, so reading a
//!   trigger, task, project or execution revision takes no lock of its own. Otherwise each
//!   trigger read was one more entry: 16 for a batch of 16 wherever the server promotes no lock.
//!   An admission holds 9 locks, whatever its batch: those 4, an index page of each definition
//!   table's key and one of `runs_pkey`
//!   (`an_admission_locks_each_definition_table_once_whatever_its_batch`).
//! - BEGIN, the plan settings, the statement and COMMIT are pipelined: one round trip. The
//!   statement ends in `admission_complete()`, which raises when a fence failed, so the
//!   pipelined COMMIT finds an aborted transaction and rolls it back. Nothing of a failed
//!   admission is ever committed.
//! - Concurrent admissions of different replicas hold no SIREAD lock on a page another one
//!   writes, so PostgreSQL's SERIALIZABLE, which tracks reads of index pages at page
//!   granularity, sees no false read-write conflict between them. Two places would otherwise
//!   be shared:
//!   - the schedule rows. Found through `trigger_schedules_pkey`, neighbouring batches lock the
//!     leaf pages that their non-HOT cursor updates write into. The batch statement finds each
//!     row by the `ctid` its claim returned instead (`Lookup::Tid`: a TID scan, which locks
//!     the tuple, not a page) and checks the key and the whole fence on the row there. The
//!     tuple's lock then goes away: PostgreSQL drops a transaction's SIREAD lock on a tuple
//!     when the same transaction updates it, and the statement updates each row before it
//!     reads the next (the UPDATE pulls `fenced` row by row through a nested loop).
//!   - `runs_pkey`: the foreign keys from attempts and events make the transaction read the
//!     page its new runs went to. Run ids lead with a shard of the claim owner
//!     (`core::run_id`), so each replica inserts into, and reads, its own pages.
//! - That needs one plan shape, and the planner does not always choose it: on a small analyzed
//!   schedule table it scans the whole table (a SIREAD lock on the relation, which every other
//!   admission's write conflicts with), and at some sizes it hash-joins, reading every row
//!   before writing any, so more than `max_pred_locks_per_page` (2) tuple locks on one heap page
//!   are promoted to a page lock that no write removes. Both were seen. Each admission
//!   transaction therefore turns off sequential scans, hash joins and merge joins for itself
//!   (`PIN_PLAN`), which leaves nested loops over TID scans.
//!   `an_admission_holds_no_predicate_lock_on_the_schedule_table` checks the locks at three
//!   table sizes, analyzed, with custom and generic plans; it fails without the settings.
//! - A row that moved since its claim is not found by ctid. Every update of a schedule row moves
//!   `state_version`, so that is almost always a lost fence; the exception is a table rewrite
//!   (VACUUM FULL, CLUSTER), which moves rows and not their fences. A row admitted on its own is
//!   looked up by key when its ctid misses (`Lookup::Key`), so a rewrite costs a batch in
//!   flight its failed transaction and two per row, and a `FenceLost` verdict
//!   always means the fence moved.
//!
//! `interleaved_admissions_of_neighbouring_rows_all_commit` (tests/integration/admission.rs)
//! fails if either of the two is undone; docs/PERFORMANCE.md has what they measured.

use std::sync::atomic::{AtomicU32, Ordering};

use deadpool_postgres::ClientWrapper;
use futures_util::future::{join, join3};
use serde::Serialize;
use tokio_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::StoreError;
use super::claim::ClaimedRow;
use super::error::{
    describe_server_error, is_definition_refused, is_fence_lost, is_out_of_resources, is_retryable,
    is_server_wide,
};
use super::retry::{ADMISSION, Exhausted, RESOURCES, retry};
use super::row::Named;
use super::sender::{Sender, TRANSACTION_SETTINGS};
use qlsched_core::Decision;

/// A claimed row together with the decision taken on it.
#[derive(Debug, Clone)]
pub struct Admission<'a> {
    pub row: &'a ClaimedRow,
    pub decision: Decision,
    /// Present exactly when the decision fires: a run identity is allocated only for an admission.
    pub run: Option<RunIdentity>,
}

/// The identities a fired occurrence is admitted under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunIdentity {
    pub run_id: Uuid,
    pub attempt_id: Uuid,
    pub idempotency_key: String,
    pub scheduled_for_ms: i64,
}

/// The order an admission locks its rows in, which a caller sorts its admissions by: primary-key
/// order, the order every writer of schedule rows locks them in (publish, a pause or resume,
/// `expire --owner`), so that no two of them wait on each other in a cycle. The admission
/// statement locks rows in the order it is given them (a nested loop over its input).
pub fn lock_order(a: &ClaimedRow, b: &ClaimedRow) -> std::cmp::Ordering {
    (&a.project_id, &a.trigger_id).cmp(&(&b.project_id, &b.trigger_id))
}

/// The verdict on one admission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AdmissionOutcome {
    /// The run, its attempt and both events were committed, and the schedule advanced.
    Admitted(RunIdentity),
    /// No run (initialize or skip): the schedule advanced and the claim was cleared.
    Advanced,
    /// The claim no longer held (expired and taken over, expired by an operator, or a definition
    /// changed); nothing was written.
    FenceLost,
    /// The claim held its fence, and a definition the decision was taken on no longer admits it
    /// (the project not active, the trigger disabled or changed, the task changed, the execution
    /// revision's digest not matching its spec): nothing was written. Not a lost race: the claim
    /// is left to expire, which paces the next attempt, and the fault is reported as itself.
    DefinitionRefused { reason: String },
    /// The database refused this occurrence's writes with an error of its own, not of the server
    /// at large (a constraint, such as a run already holding its idempotency key; the admission's
    /// own consistency check; a user trigger on `runs` that raises; anything but the server's own
    /// state, which class 53, a resource run out, is, and is `Unsettled`): nothing was written. The claim is left to expire, which paces the next
    /// attempt to one a lease, and the row never blocks others. `sqlstate` is the server's code.
    Rejected { sqlstate: String, reason: String },
    /// Admitted on its own after its batch failed, and not settled: serialization failures
    /// outlasted the retries, or the database could not be reached (then whether its
    /// transaction committed is unknown). The claim is released if it still holds, or expires;
    /// either way a later claim finds the row as this admission left it.
    Unsettled { reason: String },
}

/// What admitting a set of rows took.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AdmitStats {
    pub transactions: u32,
    pub serialization_retries: u32,
    pub batch_fallbacks: u32,
    /// Exchanges with the server the admission waited on: one per pipelined transaction (a failed
    /// one included: its pipelined COMMIT rolls it back), one per statement this connection had
    /// not prepared before.
    pub round_trips: u32,
    /// Why the batch fell back, when the server refused it (an error of its own, retries run
    /// out) rather than a row losing its fence or its definition: the round then counts as
    /// failed, though the fall-back admitted its rows.
    #[serde(skip)]
    pub batch_error: Option<String>,
    /// Transactions the server had no room for, and what became of them.
    #[serde(skip)]
    pub shortage: Shortage,
}

/// Transactions the server had no room for (SQLSTATE class 53, a shortage of its own, such as
/// its predicate-lock table full), each tried again with the same rows after a pause while they
/// number fewer than [`RESOURCES`]' attempts. A shortage of the server's is no fault of the
/// batch: a round that met one keeps its batch (`core::batch`), whatever became of its rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shortage {
    /// How many transactions met it.
    pub times: u32,
    /// The server's last word on it.
    pub last_error: Option<String>,
    /// Whether it outlasted [`RESOURCES`]' attempts: the batch then fell back to one row at a
    /// time, or a row alone was given back.
    pub exhausted: bool,
}

// Re-lock every claimed row and check its whole fence and every definition its decision was
// taken on, against database time; then advance the schedule (the fence again in the UPDATE),
// insert runs, attempts and events, and let admission_complete() raise if any row dropped out.
// The `input` CTE unnests one parameter per `ADMISSION_INPUT` column, in that order ($1 the
// first); `tests` fails when the two disagree. `held` finds each claimed row by the ctid its
// claim returned (`Lookup::Tid`), the key checked on the row found there, or, where the row's
// `row_tid` is NULL (`Lookup::Key`), at the ctid its key finds now: the sub-select runs only for
// those rows (COALESCE evaluates it for a NULL alone), so a batch found by ctid reads no index
// page, and either way the row is reached by one TID scan. The UPDATE finds it where `held`
// locked it. The definition evaluated under the lock is the claim's (`schedule_claimable(...)`,
// explained at `claim::CLAIM_DUE`).
const ADMIT: &str = r#"WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::text[],
                         $7::uuid[], $8::int8[], $9::text[], $10::int8[], $11::text[], $12::uuid[],
                         $13::int8[], $14::int8[], $15::uuid[], $16::uuid[], $17::text[], $18::text[],
                         $19::text[], $20::int8[], $21::int8[], $22::int8[], $23::bool[], $24::text[])
        AS i(project_id, trigger_id, trigger_revision, state_version, cursor_ms, owner, token,
             claim_version, trigger_digest, task_revision, task_digest, execution_revision_id,
             next_fire_at_ms, scheduled_for_ms, run_id, attempt_id, idempotency_key, decision,
             row_tid, misfire_first_ms, misfire_last_ms, misfire_count, misfire_exact, misfire_reason)
), held AS (
    -- The claimed row, locked (FOR UPDATE also keeps the planner from pulling the subquery up
    -- and choosing another access path), then its whole fence; held_tid is where it is now.
    -- The fence unchanged, its updated_at_ms is the time of the claim, the now it was decided at.
    SELECT i.*, s.ctid AS held_tid, s.updated_at_ms AS decided_at_ms
    FROM input i
    CROSS JOIN LATERAL (
        SELECT s.*, s.ctid FROM trigger_schedules s
        WHERE s.ctid = coalesce(i.row_tid::tid, (
                  SELECT k.ctid FROM trigger_schedules k
                  WHERE k.project_id = i.project_id AND k.trigger_id = i.trigger_id))
          AND s.project_id = i.project_id AND s.trigger_id = i.trigger_id
        FOR UPDATE
    ) s
    WHERE s.trigger_revision = i.trigger_revision
      AND s.state_version = i.state_version
      AND s.next_fire_at_ms IS NOT DISTINCT FROM i.cursor_ms
      AND s.claim_owner = i.owner AND s.claim_token = i.token AND s.claim_version = i.claim_version
      AND s.claim_expires_at_ms > now_ms()
      -- Claimable by the definition itself, evaluated under the lock (never the stored fact).
      AND schedule_claimable(s.project_id, s.trigger_id, s.trigger_revision, s.paused_at_ms)
), fenced AS (
    SELECT i.*, t.task_id, t.misfire_policy
    FROM held i
    JOIN projects p ON p.project_id = i.project_id
    JOIN triggers t ON t.project_id = i.project_id AND t.trigger_id = i.trigger_id
    JOIN tasks k ON k.project_id = t.project_id AND k.task_id = t.task_id
    JOIN execution_revisions e ON e.execution_revision_id = k.execution_revision_id
    -- A row that holds its fence and fails a definition check raises definition_refused
    -- (QLD01) rather than dropping out as a lost fence would.
    WHERE CASE
        WHEN p.status = 'active'
          AND t.enabled AND t.revision = i.trigger_revision AND t.content_digest = i.trigger_digest
          AND k.revision = i.task_revision AND k.content_digest = i.task_digest
          AND k.execution_revision_id = i.execution_revision_id
          AND e.kind = 'remote_worker'
          AND e.digest = encode(sha256(convert_to(e.spec::text, 'UTF8')), 'hex')
        THEN true
        ELSE admission_definition_refused(i.project_id, i.trigger_id, p.status = 'active',
            t.enabled AND t.revision = i.trigger_revision AND t.content_digest = i.trigger_digest,
            k.revision = i.task_revision AND k.content_digest = i.task_digest
                AND k.execution_revision_id = i.execution_revision_id,
            e.kind = 'remote_worker'
                AND e.digest = encode(sha256(convert_to(e.spec::text, 'UTF8')), 'hex'))
    END
), advanced AS (
    -- By the tid held locked, key and fence again. Row by row, each row written before the
    -- next is read: a nested loop over a TID scan, which PIN_PLAN leaves as the only cheap plan.
    UPDATE trigger_schedules s
    SET next_fire_at_ms = f.next_fire_at_ms,
        -- Accounting for a revision starts at its first cursor: the one an initialization sets.
        accounted_from_ms = coalesce(s.accounted_from_ms, s.next_fire_at_ms, f.next_fire_at_ms),
        last_scheduled_at_ms = coalesce(f.scheduled_for_ms, s.last_scheduled_at_ms),
        state_version = s.state_version + 1,
        claim_owner = NULL, claim_token = NULL, claim_expires_at_ms = NULL,
        updated_at_ms = now_ms()
    FROM fenced f
    WHERE s.ctid = f.held_tid
      AND s.project_id = f.project_id AND s.trigger_id = f.trigger_id
      AND s.state_version = f.state_version AND s.claim_owner = f.owner
      AND s.claim_token = f.token AND s.claim_version = f.claim_version
    RETURNING f.*
), new_runs AS (
    INSERT INTO runs (run_id, project_id, trigger_id, trigger_revision, task_id, task_revision,
                      execution_revision_id, idempotency_key, status, scheduled_for_ms,
                      created_at_ms, queued_at_ms)
    SELECT run_id, project_id, trigger_id, trigger_revision, task_id, task_revision,
           execution_revision_id, idempotency_key, 'queued', scheduled_for_ms, now_ms(), now_ms()
    FROM advanced WHERE run_id IS NOT NULL
    RETURNING 1
), new_attempts AS (
    INSERT INTO attempts (attempt_id, run_id, attempt_no, executor, state, created_at_ms)
    SELECT attempt_id, run_id, 1, 'remote_worker', 'claimed', now_ms()
    FROM advanced WHERE run_id IS NOT NULL
    RETURNING 1
), new_events AS (
    INSERT INTO run_events (run_id, seq, type, at_ms, payload)
    SELECT a.run_id, e.seq, e.type, now_ms(),
           CASE e.seq
               WHEN 1 THEN run_created_payload(a.idempotency_key, a.scheduled_for_ms, a.decision,
                                               'cron', a.owner, a.owner, a.claim_version)
               ELSE run_queued_payload(a.attempt_id)
           END
    FROM advanced a CROSS JOIN (VALUES (1, 'run.created'), (2, 'run.queued')) AS e(seq, type)
    WHERE a.run_id IS NOT NULL
    RETURNING 1
), new_misfires AS (
    -- One record for the occurrences a decision passed over, in the transaction that moves the
    -- cursor past them: every occurrence is a run or inside a record.
    INSERT INTO misfires (project_id, trigger_id, trigger_revision, first_occurrence_ms,
                          last_occurrence_ms, occurrences, occurrences_exact, policy, reason,
                          owner, decided_at_ms, recorded_at_ms)
    SELECT project_id, trigger_id, trigger_revision, misfire_first_ms, misfire_last_ms,
           misfire_count, misfire_exact, misfire_policy, misfire_reason, owner, decided_at_ms,
           now_ms()
    FROM advanced WHERE misfire_first_ms IS NOT NULL
    RETURNING 1
)
SELECT admission_complete(
    (SELECT count(*) FROM input), (SELECT count(*) FROM advanced),
    (SELECT count(*) FROM input WHERE run_id IS NOT NULL), (SELECT count(*) FROM new_runs),
    (SELECT count(*) FROM new_attempts), (SELECT count(*) FROM new_events))"#;

/// How the admission finds a claimed row: both in [`ADMIT`], told apart by the row's `row_tid`
/// parameter, the ctid or NULL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    /// By the ctid its claim returned (a TID scan), the key checked on the row found there: no
    /// index page is read, so concurrent admissions share none. A row that moved since its
    /// claim is not found.
    Tid,
    /// By primary key, then at the ctid found there: finds a row wherever it is, so a row a
    /// table rewrite moved between claim and admission is still admitted, and a row whose fence
    /// fails here really lost it. Tried for a single row only after its ctid missed: it locks an
    /// index page.
    Key,
}

const BEGIN_SERIALIZABLE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE READ WRITE";

// The plan the admission relies on (module docs): every join a nested loop, so each row is
// written before the next is read, and no sequential scan, so each schedule row is reached by
// TID. Left to itself the planner takes a sequential scan on a small schedule table (a SIREAD
// lock on the whole relation) and, at some sizes, a hash join that reads every row first.
// Transaction-local: the COMMIT or rollback that follows resets them.
const PIN_PLAN: &str = "SELECT set_config('enable_seqscan', 'off', true), \
    set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)";
// One SIREAD lock on each definition table as a whole, taken before the admission reads them
// (module docs): a scan of the table, if a sample of none of its pages, is predicate-locked as the
// whole relation in a SERIALIZABLE transaction, and the admission's reads of the same tables then
// find that lock covering them and take none of their own. No SERIALIZABLE transaction writes
// these tables (publish, pause and the other definition writers are READ COMMITTED), so the
// coarser lock conflicts with nothing that the tuple locks did not.
const LOCK_DEFINITIONS: &str = "SELECT (SELECT count(*) FROM projects TABLESAMPLE SYSTEM (0))
    + (SELECT count(*) FROM triggers TABLESAMPLE SYSTEM (0))
    + (SELECT count(*) FROM tasks TABLESAMPLE SYSTEM (0))
    + (SELECT count(*) FROM execution_revisions TABLESAMPLE SYSTEM (0)) AS sampled";
const COMMIT: &str = "COMMIT";
const BEGIN_READ_ONLY: &str = "BEGIN READ ONLY";

/// Admits every admission given; one outcome per admission, in order. Fence losses are outcomes,
/// not errors. An error means nothing was committed: the database could not be asked, or, for a
/// single admission, its retries ran out ([`StoreError::RetriesExhausted`]).
///
/// A claimed set of several rows is admitted in one transaction, rows found by ctid. If that
/// fails (a lost fence, a refused row, retries exhausted, any error not server-wide), each row is
/// admitted on its own
/// (`admit_one`) and gets its own verdict, so one stale row never blocks the others; a row
/// that cannot be settled then is [`AdmissionOutcome::Unsettled`], since rows before it may
/// have committed.
pub async fn admit(
    client: &ClientWrapper,
    sender: &Sender,
    admissions: &[Admission<'_>],
    stats: &mut AdmitStats,
) -> Result<Vec<AdmissionOutcome>, StoreError> {
    match admissions {
        [] => return Ok(Vec::new()),
        [single] => {
            let outcome = admit_one(client, sender, single, stats).await?;
            return Ok(vec![
                out_of_resources(outcome).map_or_else(|o| o, |(o, _)| o),
            ]);
        }
        _ => {}
    }
    match admit_with_retries(client, sender, admissions, Lookup::Tid, stats).await {
        Ok(Verdict::Committed) => {
            return Ok(admissions.iter().map(committed_outcome).collect());
        }
        Ok(Verdict::FenceLost | Verdict::DefinitionRefused(_)) => {
            stats.batch_fallbacks += 1;
        }
        Ok(Verdict::Rejected { sqlstate, reason }) => {
            stats.batch_fallbacks += 1;
            stats.batch_error = Some(format!(
                "a batch of {} admissions was refused (SQLSTATE {sqlstate}) and admitted row by \
                 row: {reason}",
                admissions.len()
            ));
        }
        Err(error @ StoreError::RetriesExhausted { .. }) => {
            stats.batch_fallbacks += 1;
            stats.batch_error = Some(format!(
                "a batch of {} admissions failed and was admitted row by row: {error}",
                admissions.len()
            ));
        }
        Err(other) => return Err(other),
    }
    let mut outcomes = Vec::with_capacity(admissions.len());
    let mut unreachable: Option<String> = None;
    for admission in admissions {
        if let Some(reason) = &unreachable {
            outcomes.push(AdmissionOutcome::Unsettled {
                reason: format!("not tried: {reason}"),
            });
            continue;
        }
        outcomes.push(match admit_one(client, sender, admission, stats).await {
            Ok(outcome) => match out_of_resources(outcome) {
                Ok((unsettled, reason)) => {
                    unreachable = Some(reason);
                    unsettled
                }
                Err(outcome) => outcome,
            },
            Err(error @ StoreError::RetriesExhausted { .. }) => AdmissionOutcome::Unsettled {
                reason: error.to_string(),
            },
            Err(error) => {
                let reason = error.to_string();
                unreachable = Some(reason.clone());
                AdmissionOutcome::Unsettled { reason }
            }
        });
    }
    Ok(outcomes)
}

/// Admits one row: found by ctid, and if not found there, by key, so that a row a table rewrite
/// moved is admitted all the same and `FenceLost` always means the fence moved. The ctid comes
/// first because the lookup by key locks an index page other admissions write, and a row is
/// admitted on its own exactly when its batch failed, often for conflicts.
async fn admit_one(
    client: &ClientWrapper,
    sender: &Sender,
    admission: &Admission<'_>,
    stats: &mut AdmitStats,
) -> Result<AdmissionOutcome, StoreError> {
    let single = std::slice::from_ref(admission);
    let mut verdict = admit_with_retries(client, sender, single, Lookup::Tid, stats).await?;
    if matches!(verdict, Verdict::FenceLost) {
        verdict = admit_with_retries(client, sender, single, Lookup::Key, stats).await?;
    }
    if matches!(verdict, Verdict::FenceLost)
        && let Some(reason) = parked_under_claim(client, sender, admission, stats).await?
    {
        verdict = Verdict::DefinitionRefused(reason);
    }
    Ok(match verdict {
        Verdict::Committed => committed_outcome(admission),
        Verdict::FenceLost => AdmissionOutcome::FenceLost,
        Verdict::DefinitionRefused(reason) => AdmissionOutcome::DefinitionRefused { reason },
        Verdict::Rejected { sqlstate, reason } => AdmissionOutcome::Rejected { sqlstate, reason },
    })
}

/// A refusal that says the server ran out of a resource (SQLSTATE class 53: shared memory for
/// predicate locks, disk, memory), not that the row is poisoned: `Ok` with the row given back
/// (`Unsettled`, to be tried again after the round's back-off rather than a lease later) and the
/// reason the rows after it are not tried this round; `Err` with any other outcome, unchanged.
fn out_of_resources(
    outcome: AdmissionOutcome,
) -> Result<(AdmissionOutcome, String), AdmissionOutcome> {
    match outcome {
        AdmissionOutcome::Rejected { sqlstate, reason } if is_out_of_resources(&sqlstate) => {
            let reason = format!(
                "the server ran out of a resource (SQLSTATE {sqlstate}); the claim is given \
                 back and tried again after the round's back-off: {reason}"
            );
            Ok((
                AdmissionOutcome::Unsettled {
                    reason: reason.clone(),
                },
                reason,
            ))
        }
        other => Err(other),
    }
}

/// A row's own refusal, with the server's SQLSTATE.
fn rejected(error: tokio_postgres::Error) -> Verdict {
    Verdict::Rejected {
        sqlstate: error
            .code()
            .map_or_else(|| "XX000".to_owned(), |code| code.code().to_owned()),
        reason: StoreError::from_db(error).to_string(),
    }
}

// Whether a claim whose admission found no claimable row under it is intact all the same: the
// fence as the claim left it, unexpired, on a row its definition parks. A project suspended under
// a held claim does that: it parks the row (the `claimable` flag, migration 0007) without moving
// the fence, and the admission's check of claimability under its lock then drops the row as it
// drops a lost fence. That is a definition refusal, not a lost race.
const PARKED_UNDER_CLAIM: &str = "SELECT p.status
    FROM trigger_schedules s JOIN projects p ON p.project_id = s.project_id
    WHERE s.project_id = $1 AND s.trigger_id = $2 AND NOT s.claimable
      AND s.claim_owner = $3 AND s.claim_token = $4 AND s.claim_version = $5
      AND s.state_version = $6 AND s.claim_expires_at_ms > now_ms()";

/// The definition refusal behind a fence loss whose claim is intact on a parked row
/// ([`PARKED_UNDER_CLAIM`]), if that is what it is. Read in a transaction of its own, after the
/// admission's rolled back.
async fn parked_under_claim(
    client: &ClientWrapper,
    sender: &Sender,
    admission: &Admission<'_>,
    stats: &mut AdmitStats,
) -> Result<Option<String>, StoreError> {
    let row = admission.row;
    let settings = sender
        .ready(client, TRANSACTION_SETTINGS, &mut stats.round_trips)
        .await?;
    let statement = sender
        .ready(client, PARKED_UNDER_CLAIM, &mut stats.round_trips)
        .await?;
    stats.round_trips += 1;
    let (begun, set, rows, committed) = futures_util::future::join4(
        client.batch_execute(BEGIN_READ_ONLY),
        sender.settings(client, &settings),
        statement.query(
            client,
            &[
                &row.project_id,
                &row.trigger_id,
                &row.fence.owner,
                &row.fence.token,
                &row.fence.version,
                &row.state_version,
            ],
        ),
        client.batch_execute(COMMIT),
    )
    .await;
    begun?;
    set?;
    let rows = rows?;
    committed?;
    let Some(found) = rows.first() else {
        return Ok(None);
    };
    let status: String = found.col("status")?;
    Ok(Some(if status == "active" {
        "the row is parked by its definition (the trigger disabled or changed) under a claim that \
         still holds"
            .to_owned()
    } else {
        format!("the project is {status} (parked under a claim that still holds)")
    }))
}

fn committed_outcome(admission: &Admission<'_>) -> AdmissionOutcome {
    match &admission.run {
        Some(run) => AdmissionOutcome::Admitted(run.clone()),
        None => AdmissionOutcome::Advanced,
    }
}

enum Verdict {
    Committed,
    FenceLost,
    DefinitionRefused(String),
    Rejected { sqlstate: String, reason: String },
}

/// Admits `admissions` in one transaction, tried again while contention aborts it
/// ([`ADMISSION`]) and, for longer, while the server has no room for it ([`RESOURCES`], counted
/// in `stats` across one [`admit`]): a shortage of the server's shared resources is no verdict
/// on the rows, and the same rows are likely to fit once the transaction that filled the
/// server's table ends. Past those attempts a shortage is the verdict [`admit`] meets by
/// admitting row by row, and a row alone gives back.
async fn admit_with_retries(
    client: &ClientWrapper,
    sender: &Sender,
    admissions: &[Admission<'_>],
    lookup: Lookup,
    stats: &mut AdmitStats,
) -> Result<Verdict, StoreError> {
    loop {
        match admit_contended(client, sender, admissions, lookup, stats).await? {
            Verdict::Rejected { sqlstate, reason } if is_out_of_resources(&sqlstate) => {
                stats.shortage.times += 1;
                stats.shortage.last_error = Some(reason.clone());
                // One budget of attempts for the whole of [`admit`], the batch and its fall-back
                // together: a shortage that comes and goes must not pause every row of a batch.
                if stats.shortage.times >= RESOURCES.attempts {
                    stats.shortage.exhausted = true;
                    return Ok(Verdict::Rejected { sqlstate, reason });
                }
                tokio::time::sleep(RESOURCES.pause(stats.shortage.times)).await;
            }
            verdict => return Ok(verdict),
        }
    }
}

/// [`admit_with_retries`]' one pass: the transaction, tried again as [`ADMISSION`] says while
/// contention aborts it.
async fn admit_contended(
    client: &ClientWrapper,
    sender: &Sender,
    admissions: &[Admission<'_>],
    lookup: Lookup,
    stats: &mut AdmitStats,
) -> Result<Verdict, StoreError> {
    let trips = AtomicU32::new(0);
    let trips = &trips;
    // A lost fence, a refused definition or a rejected row is a verdict, not a failure to retry;
    // so is any server error that is neither retried nor server-wide: the safe path for an error
    // nobody foresaw is the one-by-one fall-back, and for one row, its claim left to its lease.
    let tried = retry(&ADMISSION, is_retryable, move |_| async move {
        let mut round_trips = 0;
        let done = admit_once(client, sender, admissions, lookup, &mut round_trips).await;
        trips.fetch_add(round_trips, Ordering::Relaxed);
        match done {
            Ok(()) => Ok(Verdict::Committed),
            Err(error) if is_fence_lost(&error) => Ok(Verdict::FenceLost),
            Err(error) if is_definition_refused(&error) => {
                Ok(Verdict::DefinitionRefused(describe_server_error(&error)))
            }
            // A constraint (class 23), the admission's own count check (QLF02), the server out of
            // a resource (class 53, which the caller tries again) and every other error of this
            // row's writes.
            Err(error) if !is_retryable(&error) && !is_server_wide(&error) => Ok(rejected(error)),
            Err(error) => Err(error),
        }
    })
    .await;
    stats.round_trips += trips.load(Ordering::Relaxed);
    stats.transactions += tried.attempts;
    stats.serialization_retries += tried.attempts - 1;
    match tried.result {
        Ok(verdict) => Ok(verdict),
        Err(Exhausted::RanOut(error)) => Err(StoreError::RetriesExhausted {
            what: "admission",
            attempts: tried.attempts,
            last: describe_server_error(&error),
        }),
        Err(Exhausted::Failed(error)) => Err(StoreError::from_db(error)),
    }
}

/// The admission statement alone (rows found by ctid, as [`admit`] first tries), in a
/// transaction the caller opened, which must be SERIALIZABLE: for tests and fault drills that
/// interleave admissions step by step. It raises as [`admit`]'s transaction does (a lost fence
/// is `QLF01`) and leaves the commit to the caller. [`admit`] is what a replica runs.
#[doc(hidden)]
pub async fn admit_in_transaction(
    transaction: &impl GenericClient,
    admissions: &[Admission<'_>],
) -> Result<(), StoreError> {
    let columns = Columns::of(admissions, Lookup::Tid);
    for setup in [PIN_PLAN, LOCK_DEFINITIONS] {
        transaction
            .query_one(setup, &[])
            .await
            .map_err(StoreError::from_db)?;
    }
    transaction
        .query_one(ADMIT, &columns.params())
        .await
        .map_err(StoreError::from_db)?;
    Ok(())
}

// What became of admissions whose outcome the replica could not learn (the connection died with
// the COMMIT in flight, or the reply was lost): for each, whether its run exists (by run id, which
// is allocated once per decision, so another replica's run of the same occurrence does not count),
// whether its claim is still on the row (owner, token, version), and the row's cursor now.
const SETTLE: &str = "SELECT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = i.run_id) AS run_exists,
        coalesce(s.claim_owner = i.owner AND s.claim_token = i.token
                 AND s.claim_version = i.claim_version, false) AS claim_held,
        s.next_fire_at_ms
    FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::uuid[], $6::int8[])
         WITH ORDINALITY AS i(project_id, trigger_id, run_id, owner, token, claim_version, ord)
    LEFT JOIN trigger_schedules s ON s.project_id = i.project_id AND s.trigger_id = i.trigger_id
    ORDER BY i.ord";

/// What the database says became of one admission whose outcome was unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// `Admitted` or `Advanced` when it committed; `FenceLost` when it did not and its claim is
    /// gone (expired and taken over, or expired by an operator); `Unsettled` when it did not
    /// commit and the claim is still this replica's, to give back.
    pub outcome: AdmissionOutcome,
    pub claim_held: bool,
}

/// Learns, on a connection that works, whether admissions whose reply never came committed:
/// never guessed. A fired occurrence committed exactly when its run exists; an advance without a
/// run (initialize, skip) committed when the claim is gone and the cursor is the decision's. A
/// transaction still committing on the server while this asks is read as not committed; the
/// claim's release that follows is fenced, so it then changes nothing.
pub async fn settle(
    client: &impl GenericClient,
    admissions: &[Admission<'_>],
) -> Result<Vec<Settlement>, StoreError> {
    let column = |f: fn(&Admission<'_>) -> String| admissions.iter().map(f).collect::<Vec<_>>();
    let projects = column(|a| a.row.project_id.clone());
    let triggers = column(|a| a.row.trigger_id.clone());
    let owners = column(|a| a.row.fence.owner.clone());
    let run_ids: Vec<Option<Uuid>> = admissions
        .iter()
        .map(|a| a.run.as_ref().map(|r| r.run_id))
        .collect();
    let tokens: Vec<Uuid> = admissions.iter().map(|a| a.row.fence.token).collect();
    let versions: Vec<i64> = admissions.iter().map(|a| a.row.fence.version).collect();
    let rows = client
        .query(
            SETTLE,
            &[&projects, &triggers, &run_ids, &owners, &tokens, &versions],
        )
        .await?;
    admissions
        .iter()
        .zip(&rows)
        .map(|(admission, row)| {
            let run_exists: bool = row.col("run_exists")?;
            let claim_held: bool = row.col("claim_held")?;
            let cursor: Option<i64> = row.col("next_fire_at_ms")?;
            let outcome = match &admission.run {
                Some(run) if run_exists => AdmissionOutcome::Admitted(run.clone()),
                None if !claim_held && cursor == Some(admission.decision.next_fire_at_ms()) => {
                    AdmissionOutcome::Advanced
                }
                _ if claim_held => AdmissionOutcome::Unsettled {
                    reason: "not committed; the claim is given back".to_owned(),
                },
                _ => AdmissionOutcome::FenceLost,
            };
            Ok(Settlement {
                outcome,
                claim_held,
            })
        })
        .collect()
}

/// One pipelined round trip: BEGIN, the schema's settings, the plan settings, the definitions'
/// predicate locks, the admission statement, COMMIT.
async fn admit_once(
    client: &ClientWrapper,
    sender: &Sender,
    admissions: &[Admission<'_>],
    lookup: Lookup,
    round_trips: &mut u32,
) -> Result<(), tokio_postgres::Error> {
    let begin = sender
        .ready(client, BEGIN_SERIALIZABLE, round_trips)
        .await?;
    let settings = sender
        .ready(client, TRANSACTION_SETTINGS, round_trips)
        .await?;
    let pin = sender.ready(client, PIN_PLAN, round_trips).await?;
    let lock = sender.ready(client, LOCK_DEFINITIONS, round_trips).await?;
    let admit = sender.ready(client, ADMIT, round_trips).await?;
    let commit = sender.ready(client, COMMIT, round_trips).await?;
    *round_trips += 1;
    let columns = Columns::of(admissions, lookup);
    let params = columns.params();
    // join polls in order, so the requests leave in order on the one connection.
    let ((began, set, pinned), (locked, admitted, committed)) = join(
        join3(
            begin.execute(client, &[]),
            sender.settings(client, &settings),
            pin.query_one(client, &[]),
        ),
        join3(
            lock.query_one(client, &[]),
            admit.query_one(client, &params),
            commit.execute(client, &[]),
        ),
    )
    .await;
    // The first error is the cause; after it the pipelined COMMIT found the transaction aborted
    // and ended it as a rollback.
    began?;
    set?;
    pinned?;
    locked?;
    admitted?;
    committed?;
    Ok(())
}

/// Declares the admission's input once: each column's name, the Rust type of its values and its
/// SQL type. From it come `ADMISSION_INPUT` (which the `unnest(...) AS i(...)` of the admission
/// statements must match, as `tests` checks), [`Columns`] and [`Columns::params`], so a
/// parameter's position, name and type cannot disagree between the statement and the values bound
/// to it.
macro_rules! admission_input {
    ($($name:ident: $rust:ty => $sql:literal),+ $(,)?) => {
        /// The admission's input columns in parameter order: (column, SQL element type).
        const ADMISSION_INPUT: &[(&str, &str)] = &[$((stringify!($name), $sql)),+];

        /// The admission statement's parameters, column by column.
        struct Columns {
            $($name: Vec<$rust>,)+
        }

        impl Columns {
            fn with_capacity(n: usize) -> Self {
                Columns {
                    $($name: Vec::with_capacity(n),)+
                }
            }

            fn params(&self) -> [&(dyn ToSql + Sync); ADMISSION_INPUT.len()] {
                [$(&self.$name),+]
            }

            /// How many values each column holds: all equal, or `unnest` would pad the short
            /// ones with NULLs without a word.
            fn lengths(&self) -> [usize; ADMISSION_INPUT.len()] {
                [$(self.$name.len()),+]
            }

            /// Whether each column's values can be bound to its SQL array type, in order.
            #[cfg(test)]
            fn binds() -> Vec<(&'static str, bool)> {
                vec![$((
                    stringify!($name),
                    <Vec<$rust> as ToSql>::accepts(&tests::array_type($sql)),
                )),+]
            }
        }
    };
}

admission_input! {
    project_id: String => "text",
    trigger_id: String => "text",
    trigger_revision: i64 => "int8",
    state_version: i64 => "int8",
    cursor_ms: Option<i64> => "int8",
    owner: String => "text",
    token: Uuid => "uuid",
    claim_version: i64 => "int8",
    trigger_digest: String => "text",
    task_revision: i64 => "int8",
    task_digest: String => "text",
    execution_revision_id: Uuid => "uuid",
    next_fire_at_ms: i64 => "int8",
    scheduled_for_ms: Option<i64> => "int8",
    run_id: Option<Uuid> => "uuid",
    attempt_id: Option<Uuid> => "uuid",
    idempotency_key: Option<String> => "text",
    decision: String => "text",
    row_tid: Option<String> => "text",
    misfire_first_ms: Option<i64> => "int8",
    misfire_last_ms: Option<i64> => "int8",
    misfire_count: Option<i64> => "int8",
    misfire_exact: Option<bool> => "bool",
    misfire_reason: Option<&'static str> => "text",
}

impl Columns {
    /// The columns of `admissions`, each row to be found as `lookup` says: at its claim's ctid,
    /// or (a NULL `row_tid`) by its key.
    fn of(admissions: &[Admission<'_>], lookup: Lookup) -> Self {
        let mut c = Columns::with_capacity(admissions.len());
        for Admission { row, decision, run } in admissions {
            let d = &row.definition;
            c.project_id.push(row.project_id.clone());
            c.trigger_id.push(row.trigger_id.clone());
            c.trigger_revision.push(row.trigger_revision);
            c.state_version.push(row.state_version);
            c.cursor_ms.push(row.cursor_ms);
            c.owner.push(row.fence.owner.clone());
            c.token.push(row.fence.token);
            c.claim_version.push(row.fence.version);
            c.trigger_digest.push(d.trigger_digest.clone());
            c.task_revision.push(d.task_revision);
            c.task_digest.push(d.task_digest.clone());
            c.execution_revision_id.push(d.execution_revision_id);
            c.next_fire_at_ms.push(decision.next_fire_at_ms());
            c.scheduled_for_ms
                .push(run.as_ref().map(|r| r.scheduled_for_ms));
            c.run_id.push(run.as_ref().map(|r| r.run_id));
            c.attempt_id.push(run.as_ref().map(|r| r.attempt_id));
            c.idempotency_key
                .push(run.as_ref().map(|r| r.idempotency_key.clone()));
            c.decision.push(decision_label(decision).to_owned());
            c.row_tid.push(match lookup {
                Lookup::Tid => Some(row.row_tid.clone()),
                Lookup::Key => None,
            });
            let span = decision.passed_over();
            c.misfire_first_ms.push(span.map(|s| s.first_ms));
            c.misfire_last_ms.push(span.map(|s| s.last_ms));
            c.misfire_count
                .push(span.map(|s| i64::try_from(s.count).unwrap_or(i64::MAX)));
            c.misfire_exact.push(span.map(|s| s.count_exact));
            c.misfire_reason.push(span.map(|s| s.reason.as_str()));
        }
        debug_assert!(
            c.lengths().iter().all(|&n| n == admissions.len()),
            "an admission column was left short: {:?}",
            c.lengths()
        );
        c
    }
}

/// The label recorded in the `run.created` event: on time, or the one occurrence a misfire admits.
fn decision_label(decision: &Decision) -> &'static str {
    match decision {
        Decision::Fire { misfired: true, .. } => "fire_once_misfire",
        other => other.kind(),
    }
}

super::statements::statements! {
    BEGIN_SERIALIZABLE: Runtime | Admin,
    PIN_PLAN: Runtime | Admin,
    LOCK_DEFINITIONS: Runtime | Admin,
    ADMIT: Runtime | Admin,
    COMMIT: Runtime | Admin,
    SETTLE: Runtime,
    PARKED_UNDER_CLAIM: Runtime | Admin,
    BEGIN_READ_ONLY: Runtime | Admin,
}

#[cfg(test)]
mod tests {
    use tokio_postgres::types::Type;

    use super::*;
    use crate::claim::tests::squeezed;

    /// The array type of a column whose elements are `sql`.
    pub(super) fn array_type(sql: &str) -> Type {
        match sql {
            "text" => Type::TEXT_ARRAY,
            "int8" => Type::INT8_ARRAY,
            "uuid" => Type::UUID_ARRAY,
            "bool" => Type::BOOL_ARRAY,
            other => panic!("no array type for {other} here"),
        }
    }

    /// The admission statement unnests exactly `ADMISSION_INPUT`, in its order and with its
    /// types, so that `Columns::params` binds each column to its own parameter.
    #[test]
    fn the_admission_statement_unnests_the_admission_input_in_order() {
        let arrays: Vec<String> = ADMISSION_INPUT
            .iter()
            .zip(1..)
            .map(|((_, sql_type), n)| format!("${n}::{sql_type}[]"))
            .collect();
        let names: Vec<&str> = ADMISSION_INPUT.iter().map(|(name, _)| *name).collect();
        let input = format!(
            "WITH input AS ( SELECT * FROM unnest({}) AS i({}) ), held AS (",
            arrays.join(", "),
            names.join(", ")
        );
        assert!(squeezed(ADMIT).starts_with(&input), "{ADMIT}");
    }

    /// The definition the admission checks under its lock is the one the claim evaluates now
    /// (`claim::CLAIM_DUE` explains it), evaluated on the locked row.
    #[test]
    fn the_admission_checks_the_claims_definition_under_its_lock() {
        use crate::claim::tests::CLAIMABLE_NOW;
        let check = format!("AND {CLAIMABLE_NOW} ), fenced AS (");
        assert_eq!(squeezed(ADMIT).matches(&check).count(), 1, "{ADMIT}");
    }

    #[test]
    fn every_admission_column_binds_to_its_sql_type() {
        let binds = Columns::binds();
        assert_eq!(binds.len(), ADMISSION_INPUT.len());
        for ((name, binds), (column, sql_type)) in binds.iter().zip(ADMISSION_INPUT) {
            assert_eq!(name, column);
            assert!(binds, "{name}'s values do not bind to {sql_type}[]");
        }
    }
}
