//! The decision on a claimed row and the identity of the run it fires: pure functions of the
//! claimed row, shared by the replica's round and a manual `qlsched claim`.

use std::time::Duration;

use uuid::Uuid;

use qlsched_core::{CronSchedule, Decision, DecisionInput, decide, idempotency_key, run_id};
use qlsched_store::{ClaimedRow, RunIdentity};

/// The decision on a claimed row, taken at its claim time (docs/DESIGN.md §4.1): what a
/// round does for every row it claims, and what a manual `qlsched claim` shows and admits.
pub fn decide_claimed(
    row: &ClaimedRow,
    schedule: &CronSchedule,
) -> Result<Decision, qlsched_core::CoreError> {
    let definition = &row.definition;
    decide(&DecisionInput {
        schedule,
        policy: definition.misfire_policy,
        grace_ms: definition.misfire_grace_ms,
        cursor_ms: row.cursor_ms,
        now_ms: row.claimed_at_ms,
    })
}

/// A run identity is allocated here alone, for a decision that fires (docs/DESIGN.md §4.4). The run
/// id leads with a shard of the claim owner (`core::run_id` says why); the attempt id, which no
/// admission reads back, is a plain UUIDv7.
pub fn run_identity(row: &ClaimedRow, decision: &Decision) -> Option<RunIdentity> {
    let Decision::Fire {
        scheduled_for_ms, ..
    } = *decision
    else {
        return None;
    };
    Some(RunIdentity {
        run_id: new_run_id(row),
        attempt_id: new_attempt_id(row),
        idempotency_key: idempotency_key(
            &row.name().to_string(),
            row.trigger_revision,
            scheduled_for_ms,
        ),
        scheduled_for_ms,
    })
}

/// A run id for the admission of `row`: sharded by its claim owner, timed by its claim, which
/// the database clocked (index locality only: nothing reads the time back).
fn new_run_id(row: &ClaimedRow) -> Uuid {
    let random = Uuid::new_v4();
    let mut entropy = [0u8; 8];
    entropy.copy_from_slice(&random.as_bytes()[8..16]);
    run_id(&row.fence.owner, claimed_unix_ms(row), entropy)
}

/// An attempt id for the admission of `row`: UUIDv7 timed, like the run id, by the claim's
/// database time, with random bits for uniqueness.
fn new_attempt_id(row: &ClaimedRow) -> Uuid {
    let ms = claimed_unix_ms(row);
    let at = uuid::Timestamp::from_unix(
        uuid::NoContext,
        ms / 1000,
        u32::try_from(ms % 1000).unwrap_or(0) * 1_000_000,
    );
    Uuid::new_v7(at)
}

/// The claim's database time as unix milliseconds (a clock before 1970 reads as 0).
fn claimed_unix_ms(row: &ClaimedRow) -> u64 {
    u64::try_from(row.claimed_at_ms).unwrap_or(0)
}

/// Milliseconds of a duration that configuration bounds keep far below `i64::MAX`.
pub fn duration_ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
