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
//! [`trigger`], and what [`load`] looks ahead from; misfire records are `store::misfires`, replicas `store::replicas`.

mod audit;
mod claims;
pub mod load;
mod runs;
mod schedules;
mod summary;
mod trigger;

pub use audit::{AuditView, audit};
pub use claims::{ClaimView, claims};
pub use runs::{
    AttemptView, EventView, RunDetail, RunRow, RunView, admitted_among, first_scheduler_start,
    run_detail, runs, runs_with_origin,
};
pub use schedules::{
    PauseView, ScheduleFilter, ScheduleRow, ScheduleState, ScheduleView, explain_schedules,
    schedules, schedules_with_pause, urgent_schedules,
};
pub use summary::{
    ClaimedOverdue, HeldOverdue, Overdue, OwnerClaims, StateCounts, Summary, owners, summary,
};
pub use trigger::{TriggerDetail, TriggerState, TriggerView, trigger_detail};

crate::statements::statements! {
    @also audit, claims, load, runs, schedules, summary, trigger;
}
