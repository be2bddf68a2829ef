//! Schedule rows with their state and pause: `inspect schedules` and the dashboard's rows.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use tokio_postgres::{GenericClient, Row};

use crate::StoreError;
use crate::error::stored;
use crate::row::Named;

/// Where a schedule row stands, from the scheduler's point of view, at one database instant.
/// The first that applies wins, in the order of the variants. The reads compute it in SQL, by
/// the function `schedule_state()` (migration 0016), which an integration test holds to this
/// order (`schedule_state_follows_the_precedence_of_schedule_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ScheduleState {
    /// Parked by an operator (`qlsched pause`): no replica will claim it, and it is never due.
    Paused,
    /// Parked declaratively: its project is suspended or its trigger disabled (or, for the moment
    /// a publish takes, its revision is not the trigger's). No replica will claim it.
    Disabled,
    /// A claim holds it and has not expired.
    Claimed,
    /// A claim is recorded but expired: any replica may take it over.
    ExpiredClaim,
    /// No cursor yet: the next claim initializes it.
    Uninitialized,
    /// The cursor is at or before now: the next claim decides it.
    Due,
    /// The cursor is in the future.
    NotDue,
}

impl ScheduleState {
    pub const ALL: [ScheduleState; 7] = [
        ScheduleState::Paused,
        ScheduleState::Disabled,
        ScheduleState::Claimed,
        ScheduleState::ExpiredClaim,
        ScheduleState::Uninitialized,
        ScheduleState::Due,
        ScheduleState::NotDue,
    ];

    /// The names `--state` accepts, in the order of [`Self::ALL`].
    pub const NAMES: [&'static str; 7] = [
        "paused",
        "disabled",
        "claimed",
        "expired_claim",
        "uninitialized",
        "due",
        "not_due",
    ];

    /// Paused or disabled: not claimable (docs/DESIGN.md §3.1), so never due, overdue or lagging
    /// whatever its cursor says.
    pub fn is_parked(self) -> bool {
        matches!(self, ScheduleState::Paused | ScheduleState::Disabled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleState::Paused => "paused",
            ScheduleState::Disabled => "disabled",
            ScheduleState::Claimed => "claimed",
            ScheduleState::ExpiredClaim => "expired_claim",
            ScheduleState::Uninitialized => "uninitialized",
            ScheduleState::Due => "due",
            ScheduleState::NotDue => "not_due",
        }
    }
}

impl fmt::Display for ScheduleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ScheduleState {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == name)
            .ok_or_else(|| {
                format!(
                    "unknown schedule state {name:?}: expected one of {}",
                    Self::NAMES.join(", ")
                )
            })
    }
}

/// One schedule row with its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScheduleView {
    pub project_id: String,
    pub trigger_id: String,
    pub state: ScheduleState,
    pub trigger_revision: i64,
    pub state_version: i64,
    pub claim_version: i64,
    pub next_fire_at_ms: Option<i64>,
    /// `next_fire_at_ms` minus database now: negative when overdue; absent (null) for a parked
    /// row (paused or disabled), which is never due whatever its cursor says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_in_ms: Option<i64>,
    pub last_scheduled_at_ms: Option<i64>,
    pub claim_owner: Option<String>,
    pub claim_expires_at_ms: Option<i64>,
    pub updated_at_ms: i64,
}

/// Which schedule rows `inspect schedules` lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleFilter {
    pub project_id: Option<String>,
    pub state: Option<ScheduleState>,
    /// Only paused rows (`--state paused`).
    pub paused: bool,
    pub owner: Option<String>,
    pub limit: i64,
}

// Schedule rows, most urgent first, filtered: the claimable rows in claim order (the
// claimable-order index), then the parked ones by key (the parked index), each half bounded by
// the limit, the state filter applied inside each half so that its walk stops at the limit.
// Unset filters are NULL parameters; each statement is planned with its values, so a set owner or
// project uses its index. `--state paused` ($5) reads the paused rows' own index. The two halves
// differ only in which rows they take and in their order; each takes its rows whole.
//
// The columns, computed once over the union on the rows it keeps, are those [`schedule_row`]
// reads, of schedule row `s`:
// - `state` is the row's state, `schedule_state()` (migration 0016), with the precedence of
//   [`ScheduleState`]: a parked row (not claimable, docs/DESIGN.md §3.1) is `paused` when an
//   operator paused it, else `disabled`, whatever its cursor says: it is never due. The state
//   filter calls it again, since a WHERE cannot name a column of the SELECT list; the planner
//   inlines the function, so the filter is a filter on the index walk, which stops at the limit.
// - `due_in_ms`, `schedule_due_in_ms()`, is how far the row's cursor is ahead of now (negative
//   when overdue): null for a parked row, which is never due whatever its cursor says.
// `s.claimable` is the row's stored claimable fact (docs/DESIGN.md §3.1, "Claimable rows").
// A claimable row is never paused or disabled (a paused row is not claimable, in the same
// transaction), and a parked row is nothing else: a state filter or `--state paused` skips the
// half that cannot hold such a row by a test of the parameters alone, evaluated once, instead
// of walking that half's whole index to find nothing.
// URGENT_SCHEDULES and `trigger::TRIGGER` call the same functions.
const SCHEDULES: &str = "SELECT s.project_id, s.trigger_id,
        schedule_state(s.paused_at_ms, s.claimable, s.claim_token, s.claim_expires_at_ms,
                       s.next_fire_at_ms) AS state,
        s.trigger_revision, s.state_version, s.claim_version, s.next_fire_at_ms,
        schedule_due_in_ms(s.claimable, s.next_fire_at_ms) AS due_in_ms,
        s.last_scheduled_at_ms, s.claim_owner, s.claim_expires_at_ms, s.updated_at_ms,
        s.paused_at_ms, s.paused_by, s.pause_reason, s.claimable
    FROM (
        (SELECT s.* FROM trigger_schedules s
         WHERE s.claimable AND ($1::text IS NULL OR s.project_id = $1)
           AND ($2::text IS NULL OR s.claim_owner = $2)
           AND NOT $5::bool AND ($3::text IS NULL OR $3 NOT IN ('paused', 'disabled'))
           AND ($3::text IS NULL
                OR schedule_state(s.paused_at_ms, s.claimable, s.claim_token,
                                  s.claim_expires_at_ms, s.next_fire_at_ms) = $3)
         ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id
         LIMIT $4)
        UNION ALL
        (SELECT s.* FROM trigger_schedules s
         WHERE NOT s.claimable AND ($1::text IS NULL OR s.project_id = $1)
           AND ($2::text IS NULL OR s.claim_owner = $2)
           AND (NOT $5::bool OR s.paused_at_ms IS NOT NULL)
           AND ($3::text IS NULL OR $3 IN ('paused', 'disabled'))
           AND ($3::text IS NULL
                OR schedule_state(s.paused_at_ms, s.claimable, s.claim_token,
                                  s.claim_expires_at_ms, s.next_fire_at_ms) = $3)
         ORDER BY s.project_id, s.trigger_id
         LIMIT $4)
    ) s
    ORDER BY NOT s.claimable, CASE WHEN s.claimable THEN s.next_fire_at_ms END NULLS FIRST,
             s.project_id, s.trigger_id
    LIMIT $4";

pub async fn schedules(
    client: &impl GenericClient,
    filter: &ScheduleFilter,
) -> Result<Vec<ScheduleView>, StoreError> {
    Ok(schedules_with_pause(client, filter)
        .await?
        .into_iter()
        .map(|row| row.schedule)
        .collect())
}

/// [`schedules`], each with its pause.
pub async fn schedules_with_pause(
    client: &impl GenericClient,
    filter: &ScheduleFilter,
) -> Result<Vec<ScheduleRow>, StoreError> {
    let state = filter.state.map(ScheduleState::as_str);
    client
        .query(
            SCHEDULES,
            &[
                &filter.project_id,
                &filter.owner,
                &state,
                &filter.limit,
                &filter.paused,
            ],
        )
        .await?
        .iter()
        .map(schedule_row)
        .collect()
}

/// How `inspect schedules` runs with `filter` on this session now, as
/// `EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)` prints it: the scans it
/// chose, the rows each read, and the expressions it evaluated. For the tests that check it.
#[doc(hidden)]
pub async fn explain_schedules(
    client: &impl GenericClient,
    filter: &ScheduleFilter,
) -> Result<Vec<String>, StoreError> {
    let statement =
        format!("EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) {SCHEDULES}");
    let state = filter.state.map(ScheduleState::as_str);
    let rows = client
        .query(
            statement.as_str(),
            &[
                &filter.project_id,
                &filter.owner,
                &state,
                &filter.limit,
                &filter.paused,
            ],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

// The dashboard's rows, each with its pause: the head of the claim order (the claimable-order
// index), every row holding a claim (valid or expired, from the claim-owner index), so a held or
// abandoned claim is on screen even when thousands of uninitialized or overdue rows come first in
// claim order, and the first parked rows (the parked index), shown as paused or disabled after
// the others. Each part is bounded by an index and the limit; the union is at most three times it.
// The columns are those of SCHEDULES (see there for its `state` and `due_in_ms`).
const URGENT_SCHEDULES: &str = "WITH keys AS (
        (SELECT project_id, trigger_id FROM trigger_schedules WHERE claimable
         ORDER BY next_fire_at_ms NULLS FIRST, project_id, trigger_id LIMIT $1)
        UNION
        (SELECT project_id, trigger_id FROM trigger_schedules
         WHERE claim_owner IS NOT NULL ORDER BY claim_owner, claim_expires_at_ms LIMIT $1)
        UNION
        (SELECT project_id, trigger_id FROM trigger_schedules WHERE NOT claimable
         ORDER BY project_id, trigger_id LIMIT $1)
    )
    SELECT s.project_id, s.trigger_id,
           schedule_state(s.paused_at_ms, s.claimable, s.claim_token, s.claim_expires_at_ms,
                          s.next_fire_at_ms) AS state,
           s.trigger_revision, s.state_version, s.claim_version, s.next_fire_at_ms,
           schedule_due_in_ms(s.claimable, s.next_fire_at_ms) AS due_in_ms,
           s.last_scheduled_at_ms, s.claim_owner, s.claim_expires_at_ms, s.updated_at_ms,
           s.paused_at_ms, s.paused_by, s.pause_reason, s.claimable
    FROM keys
    JOIN trigger_schedules s ON s.project_id = keys.project_id AND s.trigger_id = keys.trigger_id
    ORDER BY NOT s.claimable, CASE WHEN s.claimable THEN s.next_fire_at_ms END NULLS FIRST,
             s.project_id, s.trigger_id";

/// The most urgent schedule rows for `top`, with their pauses: the claimable-order head, every
/// held claim, then the first parked rows.
pub async fn urgent_schedules(
    client: &impl GenericClient,
    limit: i64,
) -> Result<Vec<ScheduleRow>, StoreError> {
    client
        .query(URGENT_SCHEDULES, &[&limit])
        .await?
        .iter()
        .map(schedule_row)
        .collect()
}

pub(super) fn schedule_view(row: &Row) -> Result<ScheduleView, StoreError> {
    Ok(ScheduleView {
        project_id: row.col("project_id")?,
        trigger_id: row.col("trigger_id")?,
        state: stored("trigger_schedules", "state", row.col("state")?)?,
        trigger_revision: row.col("trigger_revision")?,
        state_version: row.col("state_version")?,
        claim_version: row.col("claim_version")?,
        next_fire_at_ms: row.col("next_fire_at_ms")?,
        due_in_ms: row.col("due_in_ms")?,
        last_scheduled_at_ms: row.col("last_scheduled_at_ms")?,
        claim_owner: row.col("claim_owner")?,
        claim_expires_at_ms: row.col("claim_expires_at_ms")?,
        updated_at_ms: row.col("updated_at_ms")?,
    })
}

/// An operator's pause of a schedule row (`qlsched pause`, docs/DESIGN.md §4.10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PauseView {
    pub paused_by: String,
    pub paused_at_ms: i64,
    pub reason: Option<String>,
}

/// The pause of a row read with `paused_at_ms`, `paused_by` and `pause_reason`.
pub(super) fn pause_of(row: &Row) -> Result<Option<PauseView>, StoreError> {
    let paused_at_ms: Option<i64> = row.col("paused_at_ms")?;
    let paused_by: Option<String> = row.col("paused_by")?;
    let reason = row.col("pause_reason")?;
    Ok(paused_at_ms
        .zip(paused_by)
        .map(|(paused_at_ms, paused_by)| PauseView {
            paused_by,
            paused_at_ms,
            reason,
        }))
}

/// A schedule row with its pause, for `inspect schedules` and `top`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScheduleRow {
    #[serde(flatten)]
    pub schedule: ScheduleView,
    pub paused: Option<PauseView>,
}

impl std::ops::Deref for ScheduleRow {
    type Target = ScheduleView;
    fn deref(&self) -> &ScheduleView {
        &self.schedule
    }
}

crate::statements::statements! {
    SCHEDULES: Observer,
    URGENT_SCHEDULES: Observer,
}

/// A schedule row with its pause, as both lists read them.
fn schedule_row(row: &Row) -> Result<ScheduleRow, StoreError> {
    Ok(ScheduleRow {
        schedule: schedule_view(row)?,
        paused: pause_of(row)?,
    })
}
