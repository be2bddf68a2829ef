//! The operator's read models: what `inspect` prints and the `top` dashboard draws, one query
//! each, so that both always show the same facts (docs/DESIGN.md §5.1).
//!
//! Everything here is SELECT-only, within the observer role's grants, and every comparison with a
//! lease or a cursor uses the database's clock (`now_ms()` inside the statement), never this
//! node's (§4.1). The per-trigger and per-owner views are index lookups, so they stay cheap at
//! a million schedule rows; the summary's state counts are one sequential scan (docs/OPERATIONS.md
//! has the figures).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use tokio_postgres::{Client, GenericClient, Row};
use uuid::Uuid;

use super::error::stored;
use super::migrate::check_ready;
use super::{SchemaName, StoreError};
use crate::core::diagnose::{ClaimFacts, PauseFacts, TriggerFacts, diagnose};
use crate::core::{ProjectStatus, RunStatus, TriggerName};

/// Where a schedule row stands, from the scheduler's point of view, at one database instant.
/// The first that applies wins, in the order of the variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleState {
    /// Its project is suspended, its trigger disabled or its row paused: no replica will claim it.
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
    pub const ALL: [ScheduleState; 6] = [
        ScheduleState::Disabled,
        ScheduleState::Claimed,
        ScheduleState::ExpiredClaim,
        ScheduleState::Uninitialized,
        ScheduleState::Due,
        ScheduleState::NotDue,
    ];

    /// The names `--state` accepts, in the order of [`Self::ALL`].
    pub const NAMES: [&'static str; 6] = [
        "disabled",
        "claimed",
        "expired_claim",
        "uninitialized",
        "due",
        "not_due",
    ];

    pub fn as_str(self) -> &'static str {
        match self {
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

/// The state of a schedule row `s` joined to its trigger `t` and project `p`, as SQL: the same
/// order of precedence as [`ScheduleState`].
macro_rules! state_case {
    () => {
        "CASE WHEN p.status <> 'active' OR NOT t.enabled OR s.paused_at_ms IS NOT NULL
                  THEN 'disabled'
              WHEN s.claim_token IS NOT NULL AND s.claim_expires_at_ms > now_ms() THEN 'claimed'
              WHEN s.claim_token IS NOT NULL THEN 'expired_claim'
              WHEN s.next_fire_at_ms IS NULL THEN 'uninitialized'
              WHEN s.next_fire_at_ms <= now_ms() THEN 'due'
              ELSE 'not_due' END"
    };
}

/// A claim as operators see it: the fence, when it was taken, and its lease left in database time
/// (negative once expired).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClaimView {
    pub project_id: String,
    pub trigger_id: String,
    pub owner: String,
    pub token: Uuid,
    pub version: i64,
    pub acquired_at_ms: i64,
    pub expires_at_ms: i64,
    pub remaining_ms: i64,
    pub expired: bool,
}

/// One schedule row with its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleView {
    pub project_id: String,
    pub trigger_id: String,
    pub state: ScheduleState,
    pub trigger_revision: i64,
    pub state_version: i64,
    pub claim_version: i64,
    pub next_fire_at_ms: Option<i64>,
    /// `next_fire_at_ms` minus database now: negative when overdue.
    pub due_in_ms: Option<i64>,
    pub last_scheduled_at_ms: Option<i64>,
    pub claim_owner: Option<String>,
    pub claim_expires_at_ms: Option<i64>,
    pub updated_at_ms: i64,
}

/// Schedule rows per state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StateCounts {
    pub total: i64,
    pub due: i64,
    pub claimed: i64,
    pub expired_claim: i64,
    pub not_due: i64,
    pub disabled: i64,
    pub uninitialized: i64,
}

/// One claim owner's share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnerClaims {
    pub owner: String,
    /// Claims still valid.
    pub claims: i64,
    /// Claims past their expiry that nobody took over yet.
    pub expired: i64,
    pub last_claim_at_ms: i64,
    pub admissions_last_minute: i64,
    /// Of its held claims, those an operator took by hand (`qlsched claim`, which audits the
    /// claim's token): an owner whose claims are all manual is an operator, not a replica.
    pub manual_claims: i64,
}

/// The schedule row that has waited longest for a replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Overdue {
    pub project_id: String,
    pub trigger_id: String,
    pub next_fire_at_ms: i64,
    pub lag_ms: i64,
}

/// Claimed rows whose cursor is past: a live replica holds such a row for a moment; one held
/// long (a hung or paused replica) is overdue though no replica can take it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClaimedOverdue {
    /// How many claimed rows (valid or expired claims) have their cursor at or before now.
    pub count: i64,
    /// The one of them whose cursor is oldest, and who holds it.
    pub oldest: Option<HeldOverdue>,
}

/// The claimed row that has waited longest, with its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldOverdue {
    pub project_id: String,
    pub trigger_id: String,
    pub next_fire_at_ms: i64,
    pub lag_ms: i64,
    pub owner: String,
    pub claim_expired: bool,
}

/// `inspect` with no argument, and the header of `top`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub schema_version: i64,
    pub now_ms: i64,
    pub schedules: StateCounts,
    pub owners: Vec<OwnerClaims>,
    /// The most overdue row a replica could take now (unclaimed, or its claim expired).
    pub oldest_overdue: Option<Overdue>,
    /// Overdue rows that a claim holds, which `oldest_overdue` cannot show.
    pub claimed_overdue: ClaimedOverdue,
    pub admissions_last_minute: i64,
}

// Schedule rows per state in one scan of trigger_schedules. Switched-off rows are found from the
// other side (disabled triggers by their partial index, suspended projects, both few) and hashed,
// so the scan joins nothing large. Database now is read once (the clock CTE) rather than per row:
// at a million rows, calling now_ms() in every comparison costs four times the scan itself.
const STATE_COUNTS: &str = "WITH clock AS MATERIALIZED (
        SELECT now_ms() AS now_ms
    ), off AS (
        SELECT project_id, trigger_id FROM triggers WHERE NOT enabled
        UNION
        SELECT t.project_id, t.trigger_id
        FROM projects p JOIN triggers t ON t.project_id = p.project_id
        WHERE p.status <> 'active'
    ), classified AS (
        SELECT CASE WHEN o.project_id IS NOT NULL OR s.paused_at_ms IS NOT NULL THEN 'disabled'
                    WHEN s.claim_token IS NOT NULL AND s.claim_expires_at_ms > c.now_ms THEN 'claimed'
                    WHEN s.claim_token IS NOT NULL THEN 'expired_claim'
                    WHEN s.next_fire_at_ms IS NULL THEN 'uninitialized'
                    WHEN s.next_fire_at_ms <= c.now_ms THEN 'due'
                    ELSE 'not_due' END AS state
        FROM trigger_schedules s
        CROSS JOIN clock c
        LEFT JOIN off o ON o.project_id = s.project_id AND o.trigger_id = s.trigger_id
    )
    SELECT count(*),
           count(*) FILTER (WHERE state = 'due'),
           count(*) FILTER (WHERE state = 'claimed'),
           count(*) FILTER (WHERE state = 'expired_claim'),
           count(*) FILTER (WHERE state = 'not_due'),
           count(*) FILTER (WHERE state = 'disabled'),
           count(*) FILTER (WHERE state = 'uninitialized'),
           (SELECT now_ms FROM clock),
           (SELECT coalesce(max(version), 0) FROM schema_migrations)
    FROM classified";

// Owners holding claims (the partial claim-owner index) or having admitted in the last minute
// (the runs' creation-time index; the run.created event names the claim owner). The last claim is
// the newest held claim or, for an owner holding none now, its newest admission, made under a
// claim taken just before. A held claim whose token a `claim` audit row of its trigger names was
// taken by hand (one probe of the audit's trigger index per held claim). Shared by `inspect` and
// `top`.
const OWNERS: &str = "WITH held AS (
        SELECT claim_owner AS owner,
               count(*) FILTER (WHERE claim_expires_at_ms > now_ms()) AS valid,
               count(*) FILTER (WHERE claim_expires_at_ms <= now_ms()) AS expired,
               max(updated_at_ms) AS last_claim_at_ms,
               count(*) FILTER (WHERE EXISTS (
                   SELECT 1 FROM schedule_audit a
                   WHERE a.project_id = s.project_id AND a.trigger_id = s.trigger_id
                     AND a.action = 'claim' AND a.fence_after->>'token' = s.claim_token::text))
                   AS manual
        FROM trigger_schedules s WHERE claim_owner IS NOT NULL
        GROUP BY claim_owner
    ), admitted AS (
        SELECT e.payload->>'claim_owner' AS owner, count(*) AS n, max(r.created_at_ms) AS last_at_ms
        FROM runs r JOIN run_events e ON e.run_id = r.run_id AND e.seq = 1
        WHERE r.created_at_ms > now_ms() - 60000
        GROUP BY 1
    )
    SELECT coalesce(h.owner, a.owner), coalesce(h.valid, 0), coalesce(h.expired, 0),
           greatest(h.last_claim_at_ms, a.last_at_ms), coalesce(a.n, 0), coalesce(h.manual, 0)
    FROM held h FULL JOIN admitted a ON a.owner = h.owner
    WHERE coalesce(h.owner, a.owner) IS NOT NULL
    ORDER BY 1
    LIMIT 100";

/// Claim owners: those holding claims, and those that admitted in the last minute.
pub async fn owners(client: &impl GenericClient) -> Result<Vec<OwnerClaims>, StoreError> {
    Ok(client
        .query(OWNERS, &[])
        .await?
        .iter()
        .map(|row| OwnerClaims {
            owner: row.get(0),
            claims: row.get(1),
            expired: row.get(2),
            last_claim_at_ms: row.get(3),
            admissions_last_minute: row.get(4),
            manual_claims: row.get(5),
        })
        .collect())
}

// The most overdue row a replica could take (claim order, from its index), and its lag.
const OLDEST_OVERDUE: &str = "SELECT s.project_id, s.trigger_id, s.next_fire_at_ms,
        now_ms() - s.next_fire_at_ms
    FROM trigger_schedules s
    JOIN triggers t ON t.project_id = s.project_id AND t.trigger_id = s.trigger_id
    JOIN projects p ON p.project_id = s.project_id
    WHERE s.next_fire_at_ms <= now_ms()
      AND p.status = 'active' AND t.enabled AND t.revision = s.trigger_revision
      AND (s.claim_token IS NULL OR s.claim_expires_at_ms <= now_ms())
    ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id
    LIMIT 1";

// Held claims (valid or expired, the claim-owner index) on rows whose cursor is past: how many,
// and the oldest with its holder.
const CLAIMED_OVERDUE: &str = "WITH held AS (
        SELECT project_id, trigger_id, next_fire_at_ms, claim_owner, claim_expires_at_ms
        FROM trigger_schedules
        WHERE claim_owner IS NOT NULL AND next_fire_at_ms <= now_ms()
    )
    SELECT (SELECT count(*) FROM held), o.project_id, o.trigger_id, o.next_fire_at_ms,
           now_ms() - o.next_fire_at_ms, o.claim_owner, o.claim_expires_at_ms <= now_ms()
    FROM (SELECT 1) one
    LEFT JOIN LATERAL (SELECT * FROM held
                       ORDER BY next_fire_at_ms, project_id, trigger_id LIMIT 1) o ON true";

// Admissions (runs created) in the last minute, from the creation-time index.
const ADMISSIONS_LAST_MINUTE: &str =
    "SELECT count(*) FROM runs WHERE created_at_ms > now_ms() - 60000";

/// The whole picture in a few statements (each one snapshot of its own).
pub async fn summary(client: &impl GenericClient) -> Result<Summary, StoreError> {
    let counts = client.query_one(STATE_COUNTS, &[]).await?;
    let owners = owners(client).await?;
    let oldest_overdue = client
        .query_opt(OLDEST_OVERDUE, &[])
        .await?
        .map(|row| Overdue {
            project_id: row.get(0),
            trigger_id: row.get(1),
            next_fire_at_ms: row.get(2),
            lag_ms: row.get(3),
        });
    let held = client.query_one(CLAIMED_OVERDUE, &[]).await?;
    let claimed_overdue = ClaimedOverdue {
        count: held.get(0),
        oldest: held
            .get::<_, Option<String>>(1)
            .map(|project_id| HeldOverdue {
                project_id,
                trigger_id: held.get(2),
                next_fire_at_ms: held.get(3),
                lag_ms: held.get(4),
                owner: held.get(5),
                claim_expired: held.get(6),
            }),
    };
    let admissions_last_minute = client.query_one(ADMISSIONS_LAST_MINUTE, &[]).await?.get(0);
    Ok(Summary {
        schema_version: counts.get(8),
        now_ms: counts.get(7),
        schedules: StateCounts {
            total: counts.get(0),
            due: counts.get(1),
            claimed: counts.get(2),
            expired_claim: counts.get(3),
            not_due: counts.get(4),
            disabled: counts.get(5),
            uninitialized: counts.get(6),
        },
        owners,
        oldest_overdue,
        claimed_overdue,
        admissions_last_minute,
    })
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

// Schedule rows, most urgent first (claim order), filtered. Unset filters are NULL parameters;
// each statement is planned with its values, so a set owner or project uses its index.
const SCHEDULES: &str = concat!(
    "SELECT * FROM (
        SELECT s.project_id, s.trigger_id, ",
    state_case!(),
    " AS state,
               s.trigger_revision, s.state_version, s.claim_version, s.next_fire_at_ms,
               s.next_fire_at_ms - now_ms() AS due_in_ms, s.last_scheduled_at_ms,
               s.claim_owner, s.claim_expires_at_ms, s.updated_at_ms,
               s.paused_at_ms, s.paused_by, s.pause_reason
        FROM trigger_schedules s
        JOIN triggers t ON t.project_id = s.project_id AND t.trigger_id = s.trigger_id
        JOIN projects p ON p.project_id = s.project_id
        WHERE ($1::text IS NULL OR s.project_id = $1)
          AND ($2::text IS NULL OR s.claim_owner = $2)
          AND (NOT $5::bool OR s.paused_at_ms IS NOT NULL)
        ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id
    ) rows
    WHERE $3::text IS NULL OR state = $3
    LIMIT $4"
);

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
        .map(|row| {
            Ok(ScheduleRow {
                schedule: schedule_view(row)?,
                paused: pause_of(row),
            })
        })
        .collect()
}

// The dashboard's rows: the head of the claim order and every row holding a claim (valid or
// expired, from the claim-owner index), so a held or abandoned claim is on screen even when
// thousands of uninitialized or overdue rows come first in claim order. Both halves are bounded
// by an index; the union is at most twice the limit.
const URGENT_SCHEDULES: &str = concat!(
    "WITH keys AS (
        (SELECT project_id, trigger_id FROM trigger_schedules
         ORDER BY next_fire_at_ms NULLS FIRST, project_id, trigger_id LIMIT $1)
        UNION
        (SELECT project_id, trigger_id FROM trigger_schedules
         WHERE claim_owner IS NOT NULL ORDER BY claim_owner, claim_expires_at_ms LIMIT $1)
    )
    SELECT s.project_id, s.trigger_id, ",
    state_case!(),
    " AS state,
           s.trigger_revision, s.state_version, s.claim_version, s.next_fire_at_ms,
           s.next_fire_at_ms - now_ms() AS due_in_ms, s.last_scheduled_at_ms,
           s.claim_owner, s.claim_expires_at_ms, s.updated_at_ms
    FROM keys
    JOIN trigger_schedules s ON s.project_id = keys.project_id AND s.trigger_id = keys.trigger_id
    JOIN triggers t ON t.project_id = s.project_id AND t.trigger_id = s.trigger_id
    JOIN projects p ON p.project_id = s.project_id
    ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id"
);

/// The most urgent schedule rows for `top`: the claim-order head and every held claim.
pub async fn urgent_schedules(
    client: &impl GenericClient,
    limit: i64,
) -> Result<Vec<ScheduleView>, StoreError> {
    client
        .query(URGENT_SCHEDULES, &[&limit])
        .await?
        .iter()
        .map(schedule_view)
        .collect()
}

fn schedule_view(row: &Row) -> Result<ScheduleView, StoreError> {
    Ok(ScheduleView {
        project_id: row.get("project_id"),
        trigger_id: row.get("trigger_id"),
        state: stored("trigger_schedules", "state", row.get("state"))?,
        trigger_revision: row.get("trigger_revision"),
        state_version: row.get("state_version"),
        claim_version: row.get("claim_version"),
        next_fire_at_ms: row.get("next_fire_at_ms"),
        due_in_ms: row.get("due_in_ms"),
        last_scheduled_at_ms: row.get("last_scheduled_at_ms"),
        claim_owner: row.get("claim_owner"),
        claim_expires_at_ms: row.get("claim_expires_at_ms"),
        updated_at_ms: row.get("updated_at_ms"),
    })
}

/// The columns of a [`ClaimView`] of schedule row `s`.
macro_rules! claim_columns {
    () => {
        "s.project_id, s.trigger_id, s.claim_owner, s.claim_token, s.claim_version,
         s.updated_at_ms, s.claim_expires_at_ms, s.claim_expires_at_ms - now_ms() AS remaining_ms,
         s.claim_expires_at_ms <= now_ms() AS expired"
    };
}

fn claim_view(row: &Row) -> ClaimView {
    ClaimView {
        project_id: row.get(0),
        trigger_id: row.get(1),
        owner: row.get(2),
        token: row.get(3),
        version: row.get(4),
        acquired_at_ms: row.get(5),
        expires_at_ms: row.get(6),
        remaining_ms: row.get(7),
        expired: row.get(8),
    }
}

// Claims, by owner and expiry, from the claim-owner index (its predicate matches).
const CLAIMS: &str = concat!(
    "SELECT ",
    claim_columns!(),
    " FROM trigger_schedules s
    WHERE s.claim_owner IS NOT NULL
      AND ($1::text IS NULL OR s.claim_owner = $1)
      AND (NOT $2 OR s.claim_expires_at_ms <= now_ms())
    ORDER BY s.claim_owner, s.claim_expires_at_ms, s.project_id, s.trigger_id
    LIMIT $3"
);

/// Claims held, optionally of one owner, optionally only the expired ones.
pub async fn claims(
    client: &impl GenericClient,
    owner: Option<&str>,
    expired_only: bool,
    limit: i64,
) -> Result<Vec<ClaimView>, StoreError> {
    Ok(client
        .query(CLAIMS, &[&owner, &expired_only, &limit])
        .await?
        .iter()
        .map(claim_view)
        .collect())
}

/// One admitted run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
pub struct RunRow {
    #[serde(flatten)]
    pub run: RunView,
    pub origin: String,
}

impl std::ops::Deref for RunRow {
    type Target = RunView;
    fn deref(&self) -> &RunView {
        &self.run
    }
}

/// The columns of a [`RunView`], in its order, then the run's origin (a [`RunRow`]).
macro_rules! run_columns {
    () => {
        "run_id, project_id, trigger_id, trigger_revision, task_id, task_revision,
         execution_revision_id, idempotency_key, status, scheduled_for_ms, created_at_ms,
         queued_at_ms, origin"
    };
}

fn run_row(row: &Row) -> Result<RunRow, StoreError> {
    Ok(RunRow {
        run: run_view(row)?,
        origin: row.get(12),
    })
}

fn run_view(row: &Row) -> Result<RunView, StoreError> {
    Ok(RunView {
        run_id: row.get(0),
        project_id: row.get(1),
        trigger_id: row.get(2),
        trigger_revision: row.get(3),
        task_id: row.get(4),
        task_revision: row.get(5),
        execution_revision_id: row.get(6),
        idempotency_key: row.get(7),
        status: stored("runs", "status", row.get(8))?,
        scheduled_for_ms: row.get(9),
        created_at_ms: row.get(10),
        queued_at_ms: row.get(11),
    })
}

// One trigger's runs, latest occurrence first, from its (project, trigger, scheduled_for) index.
const RUNS_OF_TRIGGER: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM runs
    WHERE project_id = $1 AND trigger_id = $2
      AND ($3::int8 IS NULL OR created_at_ms >= now_ms() - $3)
    ORDER BY scheduled_for_ms DESC
    LIMIT $4"
);

// All triggers' runs, newest first, from the creation-time index.
const RECENT_RUNS: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM runs
    WHERE $1::int8 IS NULL OR created_at_ms >= now_ms() - $1
    ORDER BY created_at_ms DESC
    LIMIT $2"
);

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
pub struct EventView {
    pub seq: i32,
    #[serde(rename = "type")]
    pub event_type: String,
    pub at_ms: i64,
    pub payload: serde_json::Value,
}

/// `inspect run RUN_ID`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDetail {
    pub run: RunRow,
    pub attempts: Vec<AttemptView>,
    pub events: Vec<EventView>,
}

const RUN: &str = concat!("SELECT ", run_columns!(), " FROM runs WHERE run_id = $1");

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
        .map(|row| AttemptView {
            attempt_id: row.get(0),
            attempt_no: row.get(1),
            executor: row.get(2),
            state: row.get(3),
            worker_id: row.get(4),
            session_id: row.get(5),
            lease_id: row.get(6),
            started_at_ms: row.get(7),
            created_at_ms: row.get(8),
        })
        .collect();
    let events = client
        .query(EVENTS_OF_RUN, &[&run_id])
        .await?
        .iter()
        .map(|row| EventView {
            seq: row.get(0),
            event_type: row.get(1),
            at_ms: row.get(2),
            payload: row.get(3),
        })
        .collect();
    Ok(RunDetail {
        run,
        attempts,
        events,
    })
}

/// One operator action on a schedule row (docs/DESIGN.md §3.1, `schedule_audit`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditView {
    pub audit_id: i64,
    pub project_id: String,
    pub trigger_id: String,
    pub action: String,
    pub actor: String,
    pub db_user: String,
    pub reason: Option<String>,
    pub at_ms: i64,
    pub fence_before: Option<serde_json::Value>,
    pub fence_after: Option<serde_json::Value>,
}

// Audit rows, newest first, optionally of one trigger (its (project, trigger, id) index).
const AUDIT: &str =
    "SELECT audit_id, project_id, trigger_id, action, actor, db_user, reason, at_ms,
        fence_before, fence_after
    FROM schedule_audit
    WHERE ($1::text IS NULL OR (project_id = $1 AND trigger_id = $2))
    ORDER BY audit_id DESC
    LIMIT $3";

pub async fn audit(
    client: &impl GenericClient,
    trigger: Option<&TriggerName>,
    limit: i64,
) -> Result<Vec<AuditView>, StoreError> {
    let (project_id, trigger_id) = trigger
        .map(|name| (&name.project_id, &name.trigger_id))
        .unzip();
    Ok(client
        .query(AUDIT, &[&project_id, &trigger_id, &limit])
        .await?
        .iter()
        .map(|row| AuditView {
            audit_id: row.get(0),
            project_id: row.get(1),
            trigger_id: row.get(2),
            action: row.get(3),
            actor: row.get(4),
            db_user: row.get(5),
            reason: row.get(6),
            at_ms: row.get(7),
            fence_before: row.get(8),
            fence_after: row.get(9),
        })
        .collect())
}

/// A trigger's definition as stored, with its project's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    pub recent_misfires: Vec<super::misfires::MisfireRecord>,
    pub audit: Vec<AuditView>,
}

/// `inspect trigger P/T`: the answer to "why is this not firing?" and what it rests on. `state`
/// is absent when the schema is not ready, since nothing else can be read then.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TriggerDetail {
    pub project_id: String,
    pub trigger_id: String,
    pub why_not_firing: Diagnosis,
    #[serde(flatten)]
    pub state: Option<TriggerState>,
}

pub use crate::core::diagnose::Diagnosis;

// One trigger with its project, schedule row and execution revision, and whether that revision's
// digest still matches its spec (the admission's own check), at one database instant.
const TRIGGER: &str = concat!(
    "SELECT now_ms() AS now_ms, p.status AS project_status, t.task_id, t.revision, t.enabled,
            t.cron_expr, t.time_zone, t.misfire_policy, t.misfire_grace_ms, t.content_digest,
            k.execution_revision_id,
            e.digest = encode(sha256(convert_to(e.spec::text, 'UTF8')), 'hex') AS digest_ok,
            s.project_id, s.trigger_id, ",
    state_case!(),
    " AS state,
            s.trigger_revision, s.state_version, s.claim_version, s.next_fire_at_ms,
            s.next_fire_at_ms - now_ms() AS due_in_ms, s.last_scheduled_at_ms,
            s.claim_owner, s.claim_token, s.claim_expires_at_ms, s.updated_at_ms,
            s.paused_at_ms, s.paused_by, s.pause_reason
    FROM triggers t
    JOIN projects p ON p.project_id = t.project_id
    JOIN tasks k ON k.project_id = t.project_id AND k.task_id = t.task_id
    JOIN execution_revisions e ON e.execution_revision_id = k.execution_revision_id
    JOIN trigger_schedules s ON s.project_id = t.project_id AND s.trigger_id = t.trigger_id
    WHERE t.project_id = $1 AND t.trigger_id = $2"
);

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
    let state = TriggerState {
        now_ms: row.get("now_ms"),
        definition: TriggerView {
            project_status: stored("projects", "status", row.get("project_status"))?,
            task_id: row.get("task_id"),
            revision: row.get("revision"),
            enabled: row.get("enabled"),
            cron_expr: row.get("cron_expr"),
            time_zone: row.get("time_zone"),
            misfire_policy: row.get("misfire_policy"),
            misfire_grace_ms: row.get("misfire_grace_ms"),
            content_digest: row.get("content_digest"),
            execution_revision_id: row.get("execution_revision_id"),
        },
        schedule: schedule_view(&row)?,
        claim: claim_of(&row),
        recent_runs: runs(client, trigger, None, TRIGGER_HISTORY).await?,
        recent_misfires: super::misfires::list(client, trigger, None, TRIGGER_HISTORY).await?,
        live_replicas: super::replicas::live_count(client).await?,
        audit: audit(client, trigger, TRIGGER_HISTORY).await?,
    };
    let why = diagnose(&facts_of(&state, row.get("digest_ok"), pause_of(&row)));
    Ok(detail(why, Some(state)))
}

/// What the diagnosis looks at, from what `inspect trigger` read.
fn facts_of(state: &TriggerState, digest_ok: bool, pause: Option<PauseView>) -> TriggerFacts {
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
        }),
        live_replicas: state.live_replicas,
        next_fire_at_ms: schedule.next_fire_at_ms,
        due_in_ms: schedule.due_in_ms,
    }
}

/// An operator's pause of a schedule row (`qlsched pause`, docs/DESIGN.md §4.10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PauseView {
    pub paused_by: String,
    pub paused_at_ms: i64,
    pub reason: Option<String>,
}

/// The pause of a row read with `paused_at_ms`, `paused_by` and `pause_reason`.
fn pause_of(row: &Row) -> Option<PauseView> {
    Some(PauseView {
        paused_at_ms: row.get::<_, Option<i64>>("paused_at_ms")?,
        paused_by: row.get::<_, Option<String>>("paused_by")?,
        reason: row.get("pause_reason"),
    })
}

/// A schedule row with its pause, for `inspect schedules`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

fn claim_of(row: &Row) -> Option<ClaimView> {
    let token: Option<Uuid> = row.get("claim_token");
    let owner: Option<String> = row.get("claim_owner");
    let expires_at_ms: Option<i64> = row.get("claim_expires_at_ms");
    let now_ms: i64 = row.get("now_ms");
    Some(ClaimView {
        project_id: row.get("project_id"),
        trigger_id: row.get("trigger_id"),
        owner: owner?,
        token: token?,
        version: row.get("claim_version"),
        acquired_at_ms: row.get("updated_at_ms"),
        expires_at_ms: expires_at_ms?,
        remaining_ms: expires_at_ms? - now_ms,
        expired: expires_at_ms? <= now_ms,
    })
}

// Every later transaction of this session is read-only: an inspecting session cannot write, even
// through a superuser login.
const READ_ONLY: &str = "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY";

/// Makes `client`'s session read-only, for inspection.
pub async fn read_only(client: &Client) -> Result<(), StoreError> {
    client.batch_execute(READ_ONLY).await?;
    Ok(())
}
