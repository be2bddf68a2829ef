//! The whole picture in a few statements: `inspect` with no argument and the header of `top`.

use serde::Serialize;
use tokio_postgres::GenericClient;

use crate::StoreError;
use crate::row::Named;

/// Schedule rows per state. A parked row (not claimable) is counted once: as `paused` when an
/// operator paused it (whatever else holds, as `inspect trigger` names the pause first), else as
/// `disabled` (its trigger disabled or its project suspended, declaratively); never as due.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StateCounts {
    pub total: i64,
    pub due: i64,
    pub claimed: i64,
    pub expired_claim: i64,
    pub not_due: i64,
    pub disabled: i64,
    pub paused: i64,
    pub uninitialized: i64,
}

/// One claim owner's share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Overdue {
    pub project_id: String,
    pub trigger_id: String,
    pub next_fire_at_ms: i64,
    pub lag_ms: i64,
}

/// Claimed rows whose cursor is past: a live replica holds such a row for a moment; one held
/// long (a hung or paused replica) is overdue though no replica can take it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClaimedOverdue {
    /// How many claimed rows (valid or expired claims) have their cursor at or before now.
    pub count: i64,
    /// The one of them whose cursor is oldest, and who holds it.
    pub oldest: Option<HeldOverdue>,
}

/// The claimed row that has waited longest, with its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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

// Schedule rows per state, with the precedence of `schedule_state()` (migration 0016), each part
// from the index that holds it rather than one pass over every row (at 1,000,000 rows, 900,000
// of them parked, that pass took 0.43 s): the parked rows and the paused among them by one
// index-only scan of the parked rows' pause index (migration 0010; a paused row is never claimable,
// so the paused are parked); the claimable rows by cursor by an index-only scan of the
// claimable-order index (null, due, later); the held claims among them by the claim-owner index,
// each with its lease and cursor, which moves a claimed row out of its cursor's state (claimed
// before expired_claim before the cursor's states). Database now is read once (the clock CTE).
// Calling the function here would cost the pass over every row; instead a test holds these
// counts, and `top`'s, to it row by row (`inspect_and_top_state_counts_match_a_row_by_row_...`).
const STATE_COUNTS: &str = "WITH clock AS MATERIALIZED (
        SELECT now_ms() AS now_ms
    ), parked AS (
        SELECT count(*) AS parked, count(*) FILTER (WHERE paused_at_ms IS NOT NULL) AS paused
        FROM trigger_schedules WHERE NOT claimable
    ), cursors AS (
        SELECT count(*) AS claimable,
               count(*) FILTER (WHERE next_fire_at_ms IS NULL) AS uninitialized,
               count(*) FILTER (WHERE next_fire_at_ms <= (SELECT now_ms FROM clock)) AS due
        FROM trigger_schedules WHERE claimable
    ), held AS (
        SELECT count(*) FILTER (WHERE s.claim_expires_at_ms > c.now_ms) AS claimed,
               count(*) FILTER (WHERE s.claim_expires_at_ms <= c.now_ms) AS expired,
               count(*) FILTER (WHERE s.next_fire_at_ms IS NULL) AS uninitialized,
               count(*) FILTER (WHERE s.next_fire_at_ms <= c.now_ms) AS due,
               count(*) AS held
        FROM trigger_schedules s CROSS JOIN clock c
        WHERE s.claim_owner IS NOT NULL AND s.claimable
    )
    SELECT p.parked + k.claimable AS total,
           k.due - h.due AS due,
           h.claimed,
           h.expired AS expired_claim,
           (k.claimable - k.uninitialized - k.due) - (h.held - h.uninitialized - h.due) AS not_due,
           p.parked - p.paused AS disabled,
           k.uninitialized - h.uninitialized AS uninitialized,
           (SELECT now_ms FROM clock) AS now_ms,
           (SELECT coalesce(max(version), 0) FROM schema_migrations) AS schema_version,
           p.paused
    FROM parked p CROSS JOIN cursors k CROSS JOIN held h";

// Owners holding claims (the partial claim-owner index) or having admitted in the last minute
// (the runs' creation-time index; the run.created event, by its key, names the claim owner). The last claim is
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
        SELECT e.owner, count(*) AS n, max(r.created_at_ms) AS last_at_ms
        FROM runs r
        -- One primary-key probe per run of the minute, never a join that reads the events of the
        -- whole history: the LIMIT keeps the planner from flattening it into a hash join.
        CROSS JOIN LATERAL (
            SELECT e.payload->>'claim_owner' AS owner FROM run_events e
            WHERE e.run_id = r.run_id AND e.seq = 1 LIMIT 1) e
        WHERE r.created_at_ms > now_ms() - 60000
        GROUP BY 1
    )
    SELECT coalesce(h.owner, a.owner) AS owner, coalesce(h.valid, 0) AS claims,
           coalesce(h.expired, 0) AS expired,
           greatest(h.last_claim_at_ms, a.last_at_ms) AS last_claim_at_ms,
           coalesce(a.n, 0) AS admissions_last_minute, coalesce(h.manual, 0) AS manual_claims
    FROM held h FULL JOIN admitted a ON a.owner = h.owner
    WHERE coalesce(h.owner, a.owner) IS NOT NULL
    ORDER BY 1
    LIMIT 100";

/// Claim owners: those holding claims, and those that admitted in the last minute.
pub async fn owners(client: &impl GenericClient) -> Result<Vec<OwnerClaims>, StoreError> {
    client
        .query(OWNERS, &[])
        .await?
        .iter()
        .map(|row| {
            Ok(OwnerClaims {
                owner: row.col("owner")?,
                claims: row.col("claims")?,
                expired: row.col("expired")?,
                last_claim_at_ms: row.col("last_claim_at_ms")?,
                admissions_last_minute: row.col("admissions_last_minute")?,
                manual_claims: row.col("manual_claims")?,
            })
        })
        .collect()
}

// The most overdue row a replica could take (claim order, from the claimable-order index: a
// parked row is never overdue), and its lag. `s.claimable` is the row's stored claimable fact
// (docs/DESIGN.md §3.1, "Claimable rows"), the condition of that partial index.
const OLDEST_OVERDUE: &str = "SELECT s.project_id, s.trigger_id, s.next_fire_at_ms,
           now_ms() - s.next_fire_at_ms AS lag_ms
    FROM trigger_schedules s
    WHERE s.claimable AND s.next_fire_at_ms <= now_ms()
      AND (s.claim_token IS NULL OR s.claim_expires_at_ms <= now_ms())
    ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id
    LIMIT 1";

// Held claims (valid or expired, the claim-owner index) on rows whose cursor is past: how many,
// and the oldest with its holder.
const CLAIMED_OVERDUE: &str = "WITH held AS (
        SELECT project_id, trigger_id, next_fire_at_ms, claim_owner, claim_expires_at_ms
        FROM trigger_schedules
        WHERE claim_owner IS NOT NULL AND next_fire_at_ms <= now_ms() AND claimable
    )
    SELECT (SELECT count(*) FROM held) AS count, o.project_id, o.trigger_id, o.next_fire_at_ms,
           now_ms() - o.next_fire_at_ms AS lag_ms, o.claim_owner,
           o.claim_expires_at_ms <= now_ms() AS claim_expired
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
        .map(|row| {
            Ok::<_, StoreError>(Overdue {
                project_id: row.col("project_id")?,
                trigger_id: row.col("trigger_id")?,
                next_fire_at_ms: row.col("next_fire_at_ms")?,
                lag_ms: row.col("lag_ms")?,
            })
        })
        .transpose()?;
    let held = client.query_one(CLAIMED_OVERDUE, &[]).await?;
    let claimed_overdue = ClaimedOverdue {
        count: held.col("count")?,
        oldest: held
            .col::<Option<String>>("project_id")?
            .map(|project_id| {
                Ok::<_, StoreError>(HeldOverdue {
                    project_id,
                    trigger_id: held.col("trigger_id")?,
                    next_fire_at_ms: held.col("next_fire_at_ms")?,
                    lag_ms: held.col("lag_ms")?,
                    owner: held.col("claim_owner")?,
                    claim_expired: held.col("claim_expired")?,
                })
            })
            .transpose()?,
    };
    let admissions_last_minute = client.query_one(ADMISSIONS_LAST_MINUTE, &[]).await?.get(0);
    Ok(Summary {
        schema_version: counts.col("schema_version")?,
        now_ms: counts.col("now_ms")?,
        schedules: StateCounts {
            total: counts.col("total")?,
            due: counts.col("due")?,
            claimed: counts.col("claimed")?,
            expired_claim: counts.col("expired_claim")?,
            not_due: counts.col("not_due")?,
            disabled: counts.col("disabled")?,
            paused: counts.col("paused")?,
            uninitialized: counts.col("uninitialized")?,
        },
        owners,
        oldest_overdue,
        claimed_overdue,
        admissions_last_minute,
    })
}

crate::statements::statements! {
    STATE_COUNTS: Observer,
    OWNERS: Observer,
    OLDEST_OVERDUE: Observer,
    CLAIMED_OVERDUE: Observer,
    ADMISSIONS_LAST_MINUTE: Observer,
}
