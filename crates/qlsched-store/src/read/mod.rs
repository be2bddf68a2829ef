//! The operator's read models: what `inspect` prints and the `top` dashboard draws, one query
//! each, so that both always show the same facts (docs/DESIGN.md §5.1).
//!
//! Everything here is SELECT-only, within the observer role's grants, and every comparison with a
//! lease or a cursor uses the database's clock (`now_ms()` inside the statement), never this
//! node's (§4.1). The per-trigger and per-owner views are index lookups, so they stay cheap at
//! a million schedule rows; the summary's state counts read an index entry of every row, by
//! index-only scans (docs/OPERATIONS.md has the figures).
//!
//! One file per read model: [`summary`], [`schedules`], [`claims`], [`runs`], [`audit`] and
//! [`trigger`]; misfire records are `store::misfires`, replicas `store::replicas`.

/// The state of a schedule row `s`, as SQL: the same order of precedence as [`ScheduleState`].
/// A parked row (not claimable, docs/DESIGN.md §3.1) is `paused` when an operator paused it, else
/// `disabled`, whatever its cursor says: it is never due.
macro_rules! state_case {
    () => {
        concat!(
            "CASE WHEN s.paused_at_ms IS NOT NULL THEN 'paused'
              WHEN NOT ",
            crate::claim::claimable!(),
            " THEN 'disabled'
              WHEN s.claim_token IS NOT NULL AND s.claim_expires_at_ms > now_ms() THEN 'claimed'
              WHEN s.claim_token IS NOT NULL THEN 'expired_claim'
              WHEN s.next_fire_at_ms IS NULL THEN 'uninitialized'
              WHEN s.next_fire_at_ms <= now_ms() THEN 'due'
              ELSE 'not_due' END"
        )
    };
}

/// How far a schedule row `s`'s cursor is ahead of now (negative when overdue), as SQL: null for
/// a parked row, which is never due whatever its cursor says.
macro_rules! due_in_ms {
    () => {
        concat!(
            "CASE WHEN ",
            crate::claim::claimable!(),
            " THEN s.next_fire_at_ms - now_ms() END"
        )
    };
}

mod audit;
mod claims;
mod runs;
mod schedules;
mod summary;
mod trigger;

pub use audit::{AuditView, audit};
pub use claims::{ClaimView, claims};
pub use runs::{
    AttemptView, EventView, RunDetail, RunRow, RunView, run_detail, runs, runs_with_origin,
};
pub use schedules::{
    PauseView, ScheduleFilter, ScheduleRow, ScheduleState, ScheduleView, schedules,
    schedules_with_pause, urgent_schedules,
};
pub use summary::{
    ClaimedOverdue, HeldOverdue, Overdue, OwnerClaims, StateCounts, Summary, owners, summary,
};
pub use trigger::{TriggerDetail, TriggerState, TriggerView, trigger_detail};

crate::statements::statements! {
    @also audit, claims, runs, schedules, summary, trigger;
}
