//! The claim: one statement that takes short row leases on due schedule rows (docs/DESIGN.md
//! §4.3), and the fenced release of a lease (§4.6).
//!
//! Nothing else happens while the row locks are held: the statement commits at once, and the
//! cron decision is taken afterwards, outside any lock.
//!
//! The claim's eligibility, its statement, its plan settings and the fenced release share one
//! file (about 620 lines): the release's fence is the claim's, and the plan is the statement's.

use deadpool_postgres::ClientWrapper;
use serde::Serialize;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use super::StoreError;
use super::error::stored;
use super::migrate::{GATE_CLOSED_BY, GateClosedBy, latest_version};
use super::replicas::{HEARTBEAT, Heartbeat, heartbeat_beats, heartbeat_parameters};
use super::row::Named;
use super::sender::{Sender, TRANSACTION_SETTINGS};
use qlsched_core::{ClaimFence, MisfirePolicy, TriggerName};

/// A schedule row as this replica claimed it: the full fence, and every definition the decision
/// and the admission are taken on, so that the admission can check none of them moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClaimedRow {
    /// Where the claim left the row version (its `ctid`, as text): the admission finds the row
    /// there with a TID scan, not through the primary key (`store::admit` says why). Only an
    /// access path, never part of the fence: the admission checks the key and the whole fence
    /// on the version it finds. Not shown to operators.
    #[serde(skip)]
    pub row_tid: String,
    pub project_id: String,
    pub trigger_id: String,
    pub trigger_revision: i64,
    /// `state_version` after the claim wrote it.
    pub state_version: i64,
    /// The cursor (`next_fire_at_ms`) the claim saw; `None` means not yet initialized.
    pub cursor_ms: Option<i64>,
    pub fence: ClaimFence,
    /// Database time at the claim (the row's `updated_at_ms`, docs/DESIGN.md §4.1): the
    /// "now" the decision is taken at.
    pub claimed_at_ms: i64,
    pub definition: TriggerDefinition,
}

/// What the decision and the admission depend on, as the claim read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TriggerDefinition {
    pub task_id: String,
    pub cron_expr: String,
    pub time_zone: String,
    pub misfire_policy: MisfirePolicy,
    pub misfire_grace_ms: i64,
    pub trigger_digest: String,
    pub task_revision: i64,
    pub task_digest: String,
    pub execution_revision_id: Uuid,
}

impl ClaimedRow {
    /// The row's trigger, by the name operators use.
    pub fn name(&self) -> TriggerName {
        TriggerName::new(&self.project_id, &self.trigger_id)
    }

    fn from_row(row: &Row) -> Result<Self, StoreError> {
        Ok(ClaimedRow {
            row_tid: row.col("row_tid")?,
            project_id: row.col("project_id")?,
            trigger_id: row.col("trigger_id")?,
            trigger_revision: row.col("trigger_revision")?,
            state_version: row.col("state_version")?,
            cursor_ms: row.col("next_fire_at_ms")?,
            fence: ClaimFence {
                owner: row.col("claim_owner")?,
                token: row.col("claim_token")?,
                version: row.col("claim_version")?,
                expires_at_ms: row.col("claim_expires_at_ms")?,
            },
            claimed_at_ms: row.col("updated_at_ms")?,
            definition: TriggerDefinition {
                task_id: row.col("task_id")?,
                cron_expr: row.col("cron_expr")?,
                time_zone: row.col("time_zone")?,
                misfire_policy: stored("triggers", "misfire_policy", row.col("misfire_policy")?)?,
                misfire_grace_ms: row.col("misfire_grace_ms")?,
                trigger_digest: row.col("trigger_digest")?,
                task_revision: row.col("task_revision")?,
                task_digest: row.col("task_digest")?,
                execution_revision_id: row.col("execution_revision_id")?,
            },
        })
    }
}

// Claim for owner $1, with a lease of $3 ms, skipping rows another session holds locked: up to $2
// due rows in claim order (a replica's round), or, when $5 and $6 name a row, that row alone if it
// is due and eligible (an operator's claim, told at once that a replica holds the row rather than
// waiting behind it). A one-time filter on $5 runs either the batch's two scans or the named one;
// the others read and lock nothing:
// - `uninitialized` (NULL cursor, first in claim order), then `overdue` with what the first left
//   of the budget, each walking the claimable-order index (claimable rows only) within its own
//   condition: a claim that finds nothing stops at once, and no parked row is ever walked;
// - `named`, one probe of the primary key.
//
// Eligibility of a schedule row `s` (docs/DESIGN.md §4.3), the two lines after each scan's own
// condition: claimable by the stored fact (the condition of the partial index the claim walks),
// no valid claim, and claimable by the definition evaluated now on the few rows the walk returns.
// - `s.claimable`: whether a replica may claim the row at all, leases and cursor aside, as stored
//   on the row (docs/DESIGN.md §3.1, "Claimable rows"): not paused, and an active project with an
//   enabled builtin cron trigger at the row's revision. The column is the value of the SQL
//   function `schedule_claimable` (migration 0007), kept by the writes that change it (publish,
//   pause, resume, a project's status, a trigger's revision or `enabled`), and the partial index
//   `trigger_schedules_claimable_order` holds exactly these rows, in claim order. Every read of
//   "due", "overdue" or "next due" (the claim, the next-due read, the gauges, `inspect`'s summary
//   and oldest overdue row, `top`) filters on this and nothing else, so that a parked row is
//   never due anywhere; [`qlsched_core::diagnose::Parked`] is the same definition in Rust.
// - `schedule_claimable(...)`: the definition itself, evaluated now on the row: what the claim
//   re-checks on each row the stored fact found, and what the admission checks again under its
//   SERIALIZABLE lock. The stored fact finds rows; it is never trusted.
// WOULD_CLAIM carries the same predicate, NEXT_DUE its stored fact, the admission (`store::admit`)
// its definition evaluated now; `tests` fails when a copy differs.
//
// The upgrade gate (docs/OPERATIONS.md, "Upgrading"), the `gate` CTE: open unless a migration
// applied after $4, this build's latest migration, has an upgrade floor above $4 (a NULL floor
// reads as the version itself); closed, every scan's one-time filter stops it before it reads or
// locks a row. In the statement, so that no claim writes before the gate is read (a migration
// committed before the claim's snapshot is seen by it), and a failed read of the ledger fails the
// claim instead of letting the round admit. One probe of the ledger's primary key
// (`schema_migrations_pkey`), computed once for the three scans. WOULD_CLAIM carries the same CTE
// and filter, with its own parameter; `tests` fails when a copy differs.
//
// The UPDATE writes a fresh claim on every row of `chosen` (a new random token, the claim and
// state versions moved on, expiry and acquired time from database time) and returns it with its
// definitions, in `ClaimedRow::from_row`'s names.
const CLAIM_DUE: &str = r#"WITH gate AS (
        SELECT NOT EXISTS (
            SELECT 1 FROM schema_migrations m
            WHERE m.version > $4 AND coalesce(m.upgrade_floor, m.version) > $4
        ) AS open
    ), uninitialized AS (
        SELECT s.project_id, s.trigger_id
        FROM trigger_schedules s
        WHERE (SELECT open FROM gate) AND $5::text IS NULL AND s.next_fire_at_ms IS NULL
          AND s.claimable AND (s.claim_token IS NULL OR s.claim_expires_at_ms <= now_ms())
          AND schedule_claimable(s.project_id, s.trigger_id, s.trigger_revision, s.paused_at_ms)
        ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id
        LIMIT $2
        FOR UPDATE OF s SKIP LOCKED
    ), overdue AS (
        SELECT s.project_id, s.trigger_id
        FROM trigger_schedules s
        WHERE (SELECT open FROM gate) AND $5::text IS NULL AND s.next_fire_at_ms <= now_ms()
          AND s.claimable AND (s.claim_token IS NULL OR s.claim_expires_at_ms <= now_ms())
          AND schedule_claimable(s.project_id, s.trigger_id, s.trigger_revision, s.paused_at_ms)
        ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id
        LIMIT $2 - (SELECT count(*) FROM uninitialized)
        FOR UPDATE OF s SKIP LOCKED
    ), named AS (
        SELECT s.project_id, s.trigger_id
        FROM trigger_schedules s
        WHERE (SELECT open FROM gate) AND $5::text IS NOT NULL
          AND s.project_id = $5 AND s.trigger_id = $6
          AND (s.next_fire_at_ms IS NULL OR s.next_fire_at_ms <= now_ms())
          AND s.claimable AND (s.claim_token IS NULL OR s.claim_expires_at_ms <= now_ms())
          AND schedule_claimable(s.project_id, s.trigger_id, s.trigger_revision, s.paused_at_ms)
        FOR UPDATE OF s SKIP LOCKED
    ), chosen AS (
        SELECT project_id, trigger_id FROM uninitialized
        UNION ALL
        SELECT project_id, trigger_id FROM overdue
        UNION ALL
        SELECT project_id, trigger_id FROM named
    )
    UPDATE trigger_schedules s
    SET claim_owner = $1,
        claim_token = gen_random_uuid(),
        claim_version = s.claim_version + 1,
        claim_expires_at_ms = now_ms() + $3,
        state_version = s.state_version + 1,
        updated_at_ms = now_ms()
    FROM chosen c, triggers t, tasks k
    WHERE s.project_id = c.project_id AND s.trigger_id = c.trigger_id
      AND t.project_id = s.project_id AND t.trigger_id = s.trigger_id
      AND k.project_id = t.project_id AND k.task_id = t.task_id
    RETURNING s.ctid::text AS row_tid,
        s.project_id, s.trigger_id, s.trigger_revision, s.state_version, s.next_fire_at_ms,
        s.claim_owner, s.claim_token, s.claim_version, s.claim_expires_at_ms, s.updated_at_ms,
        t.task_id, t.cron_expr, t.time_zone, t.misfire_policy, t.misfire_grace_ms,
        t.content_digest AS trigger_digest, k.revision AS task_revision,
        k.content_digest AS task_digest, k.execution_revision_id"#;

// The named row as its holder claimed it, if the claim with token $3 and version $4 is still
// there and unexpired: what a script's `qlsched claim admit` hands to the admission, which checks
// the whole fence again under its own lock. The columns are CLAIM_DUE's RETURNING list.
const CLAIMED_BY_FENCE: &str = r#"SELECT s.ctid::text AS row_tid,
        s.project_id, s.trigger_id, s.trigger_revision, s.state_version, s.next_fire_at_ms,
        s.claim_owner, s.claim_token, s.claim_version, s.claim_expires_at_ms, s.updated_at_ms,
        t.task_id, t.cron_expr, t.time_zone, t.misfire_policy, t.misfire_grace_ms,
        t.content_digest AS trigger_digest, k.revision AS task_revision,
        k.content_digest AS task_digest, k.execution_revision_id
    FROM trigger_schedules s
    JOIN triggers t ON t.project_id = s.project_id AND t.trigger_id = s.trigger_id
    JOIN tasks k ON k.project_id = t.project_id AND k.task_id = t.task_id
    WHERE s.project_id = $1 AND s.trigger_id = $2 AND s.claim_token = $3 AND s.claim_version = $4
      AND s.claim_expires_at_ms > now_ms()"#;

// Give claims back: clear each row's claim if its fence (owner, token, version) still holds.
// The version moves on, so the released fence can never be used again.
const RELEASE: &str = "UPDATE trigger_schedules s
    SET claim_owner = NULL, claim_token = NULL, claim_expires_at_ms = NULL,
        state_version = s.state_version + 1, updated_at_ms = now_ms()
    FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[], $5::int8[])
         AS r(project_id, trigger_id, owner, token, claim_version)
    WHERE s.project_id = r.project_id AND s.trigger_id = r.trigger_id
      AND s.claim_owner = r.owner AND s.claim_token = r.token AND s.claim_version = r.claim_version
    RETURNING s.project_id, s.trigger_id";

// What a claim would take, by SELECT alone (no row lock: FOR UPDATE needs UPDATE privilege, and
// a dry run must work for a login that may only read): the named row ($1, $2 not null) if it is
// due and eligible (eligibility as in CLAIM_DUE), else the first due, eligible row in claim order.
// Its columns are those a claim by owner $3 with a lease of $4 ms would return (CLAIM_DUE's
// RETURNING list), computed without writing the row: what `--dry-run` shows (the token is one the
// claim would not reuse). Nothing when the upgrade gate is closed for a build whose latest
// migration is $5 (as in CLAIM_DUE): the claim would take nothing either.
const WOULD_CLAIM: &str = r#"WITH gate AS (
        SELECT NOT EXISTS (
            SELECT 1 FROM schema_migrations m
            WHERE m.version > $5 AND coalesce(m.upgrade_floor, m.version) > $5
        ) AS open
    ), chosen AS (
        SELECT s.project_id, s.trigger_id
        FROM trigger_schedules s
        WHERE (SELECT open FROM gate) AND ($1::text IS NULL OR (s.project_id = $1 AND s.trigger_id = $2))
          AND (s.next_fire_at_ms IS NULL OR s.next_fire_at_ms <= now_ms())
          AND s.claimable AND (s.claim_token IS NULL OR s.claim_expires_at_ms <= now_ms())
          AND schedule_claimable(s.project_id, s.trigger_id, s.trigger_revision, s.paused_at_ms)
        ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id
        LIMIT 1
    )
    SELECT s.ctid::text AS row_tid,
        s.project_id, s.trigger_id, s.trigger_revision, s.state_version + 1 AS state_version,
        s.next_fire_at_ms, $3::text AS claim_owner, gen_random_uuid() AS claim_token,
        s.claim_version + 1 AS claim_version, now_ms() + $4::int8 AS claim_expires_at_ms,
        now_ms() AS updated_at_ms,
        t.task_id, t.cron_expr, t.time_zone, t.misfire_policy, t.misfire_grace_ms,
        t.content_digest AS trigger_digest, k.revision AS task_revision,
        k.content_digest AS task_digest, k.execution_revision_id
    FROM chosen c
    JOIN trigger_schedules s ON s.project_id = c.project_id AND s.trigger_id = c.trigger_id
    JOIN triggers t ON t.project_id = s.project_id AND t.trigger_id = s.trigger_id
    JOIN tasks k ON k.project_id = t.project_id AND k.task_id = t.task_id"#;

/// The row a claim would take now (the named one, or the next in claim order) as it would be
/// claimed, read-only; `None` when there is none.
pub async fn would_claim(
    client: &impl GenericClient,
    target: Option<&TriggerName>,
    owner: &str,
    lease_ms: i64,
) -> Result<Option<ClaimedRow>, StoreError> {
    let (project_id, trigger_id) = target
        .map(|name| (&name.project_id, &name.trigger_id))
        .unzip();
    let rows = client
        .query(
            WOULD_CLAIM,
            &[
                &project_id,
                &trigger_id,
                &owner,
                &lease_ms,
                &latest_version(),
            ],
        )
        .await?;
    rows.first().map(ClaimedRow::from_row).transpose()
}

/// The planner settings that pin the claim's plan, whatever the statistics say: each scan walks
/// the claimable-order index, which returns rows in claim order, so the walk stops after the
/// budget; no bitmap scan or sort that reads every due (or every uninitialized) row first, no hash
/// or merge join that reads a whole table. The partial index alone is not enough: straight after a
/// large publish, before anything analyzed the table, the planner reads every uninitialized row
/// with a bitmap scan and sorts them. Every claim sets them for its own transaction only
/// ([`PIN_CLAIM_PLAN`], reset by the transaction's end), never for a session, so that a claim's
/// plan does not depend on which session (or which pooled server connection) it runs on.
pub const CLAIM_PLAN_SETTINGS: [&str; 5] = [
    "enable_seqscan",
    "enable_bitmapscan",
    "enable_sort",
    "enable_hashjoin",
    "enable_mergejoin",
];

// CLAIM_PLAN_SETTINGS off for the transaction it runs in, whose end resets them.
const PIN_CLAIM_PLAN: &str = "SELECT set_config('enable_seqscan', 'off', true), \
    set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true), \
    set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)";

// A replica's claim runs in a transaction of its own, opened, pinned, claimed and committed in
// the one round trip of the round's claim.
const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE";
const COMMIT: &str = "COMMIT";

/// Claims up to `budget` due rows for `owner`, or only `target` if it is due and eligible now
/// (nothing when it is not: the caller explains why), with a lease of `lease_ms` in database
/// time, inside a transaction the caller opened (the plan settings are that transaction's): as a
/// manual claim does. A replica's claim is [`claim_for_round`].
pub async fn claim_due(
    client: &impl GenericClient,
    target: Option<&TriggerName>,
    owner: &str,
    budget: i64,
    lease_ms: i64,
) -> Result<Vec<ClaimedRow>, StoreError> {
    client.query_one(PIN_CLAIM_PLAN, &[]).await?;
    let (project_id, trigger_id) = key(target);
    let rows = client
        .query(
            CLAIM_DUE,
            &[
                &owner,
                &budget,
                &lease_ms,
                &latest_version(),
                &project_id,
                &trigger_id,
            ],
        )
        .await?;
    rows.iter().map(ClaimedRow::from_row).collect()
}

/// [`CLAIM_DUE`]'s last two parameters: the named row's key, or NULLs for a claim in claim order.
fn key(target: Option<&TriggerName>) -> (Option<&str>, Option<&str>) {
    target
        .map(|name| (name.project_id.as_str(), name.trigger_id.as_str()))
        .unzip()
}

// Database time now, and the earliest cursor after it: when the next occurrence falls due,
// so that a replica sleeps until then and no longer (one row from the claimable-order index).
// Claimable by the stored fact, as CLAIM_DUE explains.
const NEXT_DUE: &str = "SELECT now_ms() AS now_ms,
    (SELECT s.next_fire_at_ms FROM trigger_schedules s WHERE s.next_fire_at_ms > now_ms()
       AND s.claimable
     ORDER BY s.next_fire_at_ms NULLS FIRST LIMIT 1) AS next_due_ms";

/// A round's claim, and what the database said about the time after it.
#[derive(Debug, Clone)]
pub struct RoundClaim {
    pub rows: Vec<ClaimedRow>,
    /// Database time after the claim, and when the local clock received it: together they turn
    /// a database instant into a local one without comparing the two clocks.
    pub now_ms: i64,
    pub received: std::time::Instant,
    /// The earliest cursor later than `now_ms`, if any (also `None` when that read failed: the
    /// replica then sleeps one cadence).
    pub next_due_ms: Option<i64>,
}

/// What one claim round trip did. Its statements commit one by one, so each has its own
/// outcome: claimed rows are the replica's even when a later statement failed (they must be
/// admitted or given back, not dropped), and a heartbeat that failed is sent again.
#[derive(Debug)]
pub struct ClaimTrip {
    pub claim: Result<RoundClaim, StoreError>,
    pub heartbeat: Result<(), StoreError>,
    /// The migration applied after this build's latest whose upgrade floor holds this build
    /// out, read after the claim in the same trip ([`GATE_CLOSED_BY`]): why a claim by a gated
    /// build took nothing (its statement carries the gate itself), or that a migration committed
    /// between the claim and this read, and the rows claimed just before it are to be given back.
    pub gate: Result<Option<GateClosedBy>, StoreError>,
}

/// A replica's claim, in a transaction of its own that pins the claim's plan
/// ([`PIN_CLAIM_PLAN`]) and commits at once, and in the same round trip (pipelined) the database's
/// time and the next cursor to fall due, which a replica needs to sleep exactly until the next
/// occurrence, and the registry's heartbeat when one is due. No session setting is relied on.
pub async fn claim_for_round(
    client: &ClientWrapper,
    sender: &Sender,
    owner: &str,
    budget: i64,
    lease_ms: i64,
    heartbeat: Option<&Heartbeat>,
    round_trips: &mut u32,
) -> Result<ClaimTrip, StoreError> {
    let settings = sender
        .ready(client, TRANSACTION_SETTINGS, round_trips)
        .await?;
    let pin = sender.ready(client, PIN_CLAIM_PLAN, round_trips).await?;
    let claim = sender.ready(client, CLAIM_DUE, round_trips).await?;
    let next_due = sender.ready(client, NEXT_DUE, round_trips).await?;
    let gate = sender.ready(client, GATE_CLOSED_BY, round_trips).await?;
    let beat = sender.ready(client, HEARTBEAT, round_trips).await?;
    *round_trips += 1;
    let parameters = heartbeat.map(|h| heartbeat_parameters(owner, h));
    let beat = async {
        match &parameters {
            Some(parameters) => beat
                .query_one(client, &parameters.as_params())
                .await
                .map_err(StoreError::from)
                .and_then(|row| heartbeat_beats(&row))
                .and_then(|written| match written {
                    1 => Ok(()),
                    // The registry row is gone (`expire --owner`, a prune of a replica taken
                    // for stopped): the beat reached no one, and must not pass for one that did
                    // (its minutes were not written either).
                    _ => Err(StoreError::NotFound(format!(
                        "the heartbeat updated {written} registry rows for owner {owner}, not 1"
                    ))),
                }),
            None => Ok(()),
        }
    };
    let latest = latest_version();
    // A replica claims in claim order: no named row.
    let (project_id, trigger_id) = key(None);
    // The claim's transaction: BEGIN, the schema's settings, the pin, the claim, COMMIT. A failed
    // claim leaves the transaction aborted and its COMMIT rolls it back.
    let claimed = async {
        let (begun, set, pinned, rows) = futures_util::future::join4(
            client.batch_execute(BEGIN),
            sender.settings(client, &settings),
            pin.query_one(client, &[]),
            claim.query(
                client,
                &[
                    &owner,
                    &budget,
                    &lease_ms,
                    &latest,
                    &project_id,
                    &trigger_id,
                ],
            ),
        )
        .await;
        (begun.and(set).and(pinned.map(|_| ())), rows)
    };
    // After it, in a transaction of their own: the next-due read, which migration closes the
    // gate for this build if one does, and the heartbeat. A failed heartbeat leaves the reads'
    // answers as they came; a failed read fails the heartbeat too, which is sent again next round.
    // The BEGIN's and the settings' own results are not needed: had either failed, so would what
    // follows them.
    let after = async {
        let ((_, _, clock), (gate, beat, committed)) = futures_util::future::join(
            futures_util::future::join3(
                client.batch_execute(BEGIN),
                sender.settings(client, &settings),
                next_due.query_one(client, &[]),
            ),
            futures_util::future::join3(
                gate.query(client, &[&latest]),
                beat,
                client.batch_execute(COMMIT),
            ),
        )
        .await;
        (
            clock,
            gate.map_err(StoreError::from)
                .and_then(|rows| GateClosedBy::read(&rows)),
            // A heartbeat whose transaction did not commit was not written.
            beat.and(committed.map_err(StoreError::from)),
        )
    };
    // One round trip: the requests leave in order on the one connection (join polls in order).
    // The claim commits at once, as docs/DESIGN.md §4.3 requires.
    let ((opened, rows), committed, (clock, gate, heartbeat)) =
        futures_util::future::join3(claimed, client.batch_execute(COMMIT), after).await;
    let received = std::time::Instant::now();
    let claim = opened
        .and(rows)
        .and_then(|rows| committed.map(|()| rows))
        .map_err(StoreError::from)
        .and_then(|rows| {
            let rows = rows
                .iter()
                .map(ClaimedRow::from_row)
                .collect::<Result<Vec<_>, _>>()?;
            let clock = clock.map_err(StoreError::from).and_then(|clock| {
                Ok((clock.col("now_ms")?, clock.col("next_due_ms")?))
            });
            let (now_ms, next_due_ms) = match clock {
                Ok(clock) => clock,
                Err(error) => {
                    tracing::warn!(%error, "the next-due read after a claim failed; sleeping one cadence");
                    (0, None)
                }
            };
            Ok(RoundClaim {
                rows,
                now_ms,
                received,
                next_due_ms,
            })
        });
    Ok(ClaimTrip {
        claim,
        heartbeat,
        gate,
    })
}

/// The plan PostgreSQL chooses for the claim statement in claim order on this session now, as
/// `EXPLAIN` prints it (nothing is claimed): in a transaction pinned by [`pin_claim_plan`], as
/// every claim runs. For the tests that check it.
#[doc(hidden)]
pub async fn explain_claim_due(
    client: &impl GenericClient,
    budget: i64,
) -> Result<Vec<String>, StoreError> {
    let statement = format!("EXPLAIN {CLAIM_DUE}");
    let rows = client
        .query(
            statement.as_str(),
            &[
                &"explain",
                &budget,
                &1_000i64,
                &latest_version(),
                &None::<&str>,
                &None::<&str>,
            ],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// The claim statement's run for the named row on this session now, as
/// `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)` prints it: the scans it ran and the
/// rows each read. It claims the row if it can: for a transaction the caller rolls back. For the
/// tests that check it.
#[doc(hidden)]
pub async fn explain_named_claim(
    client: &impl GenericClient,
    target: &TriggerName,
) -> Result<Vec<String>, StoreError> {
    let statement = format!("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {CLAIM_DUE}");
    let (project_id, trigger_id) = key(Some(target));
    let rows = client
        .query(
            statement.as_str(),
            &[
                &"explain",
                &1i64,
                &1_000i64,
                &latest_version(),
                &project_id,
                &trigger_id,
            ],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Pins the claim's plan for the transaction the caller opened, as a manual claim does.
#[doc(hidden)]
pub async fn pin_claim_plan(client: &impl GenericClient) -> Result<(), StoreError> {
    client.query_one(PIN_CLAIM_PLAN, &[]).await?;
    Ok(())
}

/// The named row as claimed under `token` and `version`, if that claim still holds now.
pub async fn claimed_by_fence(
    client: &impl GenericClient,
    trigger: &TriggerName,
    token: Uuid,
    version: i64,
) -> Result<Option<ClaimedRow>, StoreError> {
    let TriggerName {
        project_id,
        trigger_id,
    } = trigger;
    let rows = client
        .query(
            CLAIMED_BY_FENCE,
            &[project_id, trigger_id, &token, &version],
        )
        .await?;
    rows.first().map(ClaimedRow::from_row).transpose()
}

/// Key and fence of a claim to give back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseRequest {
    pub project_id: String,
    pub trigger_id: String,
    pub owner: String,
    pub token: Uuid,
    pub version: i64,
}

impl From<&ClaimedRow> for ReleaseRequest {
    fn from(row: &ClaimedRow) -> Self {
        ReleaseRequest {
            project_id: row.project_id.clone(),
            trigger_id: row.trigger_id.clone(),
            owner: row.fence.owner.clone(),
            token: row.fence.token,
            version: row.fence.version,
        }
    }
}

/// Releases the claims whose fence still holds; returns the `(project, trigger)` pairs released.
/// A claim that was admitted, expired or taken over in the meantime is left as it is.
/// Adds its round trips to `round_trips`: two, as an unprepared statement is parsed first.
pub async fn release(
    client: &impl GenericClient,
    requests: &[ReleaseRequest],
    round_trips: &mut u32,
) -> Result<Vec<(String, String)>, StoreError> {
    if requests.is_empty() {
        return Ok(Vec::new());
    }
    *round_trips += 2;
    let columns = ReleaseColumns::of(requests);
    let rows = client.query(RELEASE, &columns.params()).await?;
    released(&rows)
}

/// [`RELEASE`]'s parameters: the requests as columns, one array each.
struct ReleaseColumns {
    projects: Vec<String>,
    triggers: Vec<String>,
    owners: Vec<String>,
    tokens: Vec<Uuid>,
    versions: Vec<i64>,
}

impl ReleaseColumns {
    fn of(requests: &[ReleaseRequest]) -> Self {
        ReleaseColumns {
            projects: requests.iter().map(|r| r.project_id.clone()).collect(),
            triggers: requests.iter().map(|r| r.trigger_id.clone()).collect(),
            owners: requests.iter().map(|r| r.owner.clone()).collect(),
            tokens: requests.iter().map(|r| r.token).collect(),
            versions: requests.iter().map(|r| r.version).collect(),
        }
    }

    fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 5] {
        [
            &self.projects,
            &self.triggers,
            &self.owners,
            &self.tokens,
            &self.versions,
        ]
    }
}

/// [`release`] as a replica gives claims back: in a transaction of its own, pipelined (BEGIN,
/// the schema's settings, the release, COMMIT), one round trip once its statements are ready.
pub async fn give_back(
    client: &ClientWrapper,
    sender: &Sender,
    requests: &[ReleaseRequest],
    round_trips: &mut u32,
) -> Result<Vec<(String, String)>, StoreError> {
    if requests.is_empty() {
        return Ok(Vec::new());
    }
    let settings = sender
        .ready(client, TRANSACTION_SETTINGS, round_trips)
        .await?;
    let statement = sender.ready(client, RELEASE, round_trips).await?;
    *round_trips += 1;
    let columns = ReleaseColumns::of(requests);
    let (begun, set, rows, committed) = futures_util::future::join4(
        client.batch_execute(BEGIN),
        sender.settings(client, &settings),
        statement.query(client, &columns.params()),
        client.batch_execute(COMMIT),
    )
    .await;
    begun?;
    set?;
    let rows = rows?;
    committed?;
    released(&rows)
}

/// The `(project, trigger)` pairs [`RELEASE`] returned.
fn released(rows: &[Row]) -> Result<Vec<(String, String)>, StoreError> {
    rows.iter()
        .map(|row| Ok((row.col("project_id")?, row.col("trigger_id")?)))
        .collect()
}

/// What became of a claim this replica held, read after a stall (docs/DESIGN.md §4.3: only the
/// token and version identify a claim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimFate {
    /// The row still carries this claim; `lapsed` when its lease has run out.
    StillHeld { lapsed: bool },
    /// An operator expired it (`qlsched expire` or `top`), by the audit row; `now_held_by` is
    /// whoever holds the row now.
    ExpiredBy {
        actor: String,
        now_held_by: Option<String>,
    },
    /// Another claim holds the row now: taken over after the lease ran out.
    TakenOver { owner: String },
    /// No claim holds the row now: taken over and settled, or voided by a publish.
    Cleared,
    /// The schedule row is gone.
    Gone,
}

impl std::fmt::Display for ClaimFate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use qlsched_core::text::clean;
        match self {
            ClaimFate::StillHeld { lapsed: true } => f.write_str("still ours, lease run out"),
            ClaimFate::StillHeld { lapsed: false } => f.write_str("still ours"),
            ClaimFate::ExpiredBy { actor, now_held_by } => {
                write!(f, "expired by {}", clean(actor))?;
                match now_held_by {
                    Some(owner) => write!(f, ", now held by {}", clean(owner)),
                    None => Ok(()),
                }
            }
            ClaimFate::TakenOver { owner } => write!(f, "taken over by {}", clean(owner)),
            ClaimFate::Cleared => f.write_str("cleared (settled by another owner, or voided)"),
            ClaimFate::Gone => f.write_str("row gone"),
        }
    }
}

// For each claim given by key and token ($1, $2, $3): whether the row still carries it, who holds
// the row now, and which operator expired it (the audit row whose fence_before has the token, by
// the audit's trigger index). One statement, one round trip.
const CLAIM_FATES: &str = "SELECT r.project_id, r.trigger_id, s.project_id IS NOT NULL AS row_exists,
        s.claim_token IS NOT DISTINCT FROM r.token AS still_ours,
        coalesce(s.claim_expires_at_ms <= now_ms(), true) AS lapsed,
        s.claim_owner,
        (SELECT a.actor FROM schedule_audit a
         WHERE a.project_id = r.project_id AND a.trigger_id = r.trigger_id
           AND a.action = 'expire' AND a.fence_before->>'token' = r.token::text
         ORDER BY a.audit_id DESC LIMIT 1) AS expired_by
    FROM unnest($1::text[], $2::text[], $3::uuid[]) WITH ORDINALITY AS r(project_id, trigger_id, token, n)
    LEFT JOIN trigger_schedules s ON s.project_id = r.project_id AND s.trigger_id = r.trigger_id
    ORDER BY r.n";

/// What became of each of `held` (claims of a round that outlived its lease), in their order.
pub async fn claim_fates(
    client: &impl GenericClient,
    held: &[ReleaseRequest],
) -> Result<Vec<(TriggerName, ClaimFate)>, StoreError> {
    if held.is_empty() {
        return Ok(Vec::new());
    }
    let projects: Vec<&str> = held.iter().map(|r| r.project_id.as_str()).collect();
    let triggers: Vec<&str> = held.iter().map(|r| r.trigger_id.as_str()).collect();
    let tokens: Vec<Uuid> = held.iter().map(|r| r.token).collect();
    let rows = client
        .query(CLAIM_FATES, &[&projects, &triggers, &tokens])
        .await?;
    rows.iter()
        .map(|row| {
            let exists: bool = row.col("row_exists")?;
            let ours: bool = row.col("still_ours")?;
            let holder: Option<String> = row.col("claim_owner")?;
            let expired_by: Option<String> = row.col("expired_by")?;
            let fate = match (exists, ours, expired_by, holder) {
                (false, ..) => ClaimFate::Gone,
                (true, true, ..) => ClaimFate::StillHeld {
                    lapsed: row.col("lapsed")?,
                },
                (true, false, Some(actor), now_held_by) => {
                    ClaimFate::ExpiredBy { actor, now_held_by }
                }
                (true, false, None, Some(owner)) => ClaimFate::TakenOver { owner },
                (true, false, None, None) => ClaimFate::Cleared,
            };
            let name = TriggerName::new(
                row.col::<String>("project_id")?,
                row.col::<String>("trigger_id")?,
            );
            Ok((name, fate))
        })
        .collect()
}

super::statements::statements! {
    CLAIM_DUE: Runtime | Admin,
    CLAIMED_BY_FENCE: Admin,
    RELEASE: Runtime | Admin,
    WOULD_CLAIM: Observer,
    PIN_CLAIM_PLAN: Runtime | Admin,
    BEGIN: Runtime,
    COMMIT: Runtime,
    NEXT_DUE: Runtime,
    CLAIM_FATES: Runtime,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The claimable-by-definition check, as every claim statement and the admission write it.
    pub(crate) const CLAIMABLE_NOW: &str =
        "schedule_claimable(s.project_id, s.trigger_id, s.trigger_revision, s.paused_at_ms)";

    /// Eligibility (CLAIM_DUE's comment): the stored fact, no valid claim, the definition now.
    fn eligible() -> String {
        format!(
            "AND s.claimable AND (s.claim_token IS NULL OR s.claim_expires_at_ms <= now_ms()) \
             AND {CLAIMABLE_NOW}"
        )
    }

    /// The columns of a claimed row, in `ClaimedRow::from_row`'s names, as the claim writes them.
    const CLAIMED_COLUMNS: &str = "s.ctid::text AS row_tid, s.project_id, s.trigger_id, \
        s.trigger_revision, s.state_version, s.next_fire_at_ms, s.claim_owner, s.claim_token, \
        s.claim_version, s.claim_expires_at_ms, s.updated_at_ms, t.task_id, t.cron_expr, \
        t.time_zone, t.misfire_policy, t.misfire_grace_ms, t.content_digest AS trigger_digest, \
        k.revision AS task_revision, k.content_digest AS task_digest, k.execution_revision_id";

    /// The claim's write on the rows of `chosen`, for owner $1 with a lease of $3 ms.
    fn take_chosen() -> String {
        format!(
            ") UPDATE trigger_schedules s SET claim_owner = $1, \
             claim_token = gen_random_uuid(), claim_version = s.claim_version + 1, \
             claim_expires_at_ms = now_ms() + $3, state_version = s.state_version + 1, \
             updated_at_ms = now_ms() FROM chosen c, triggers t, tasks k \
             WHERE s.project_id = c.project_id AND s.trigger_id = c.trigger_id \
             AND t.project_id = s.project_id AND t.trigger_id = s.trigger_id \
             AND k.project_id = t.project_id AND k.task_id = t.task_id \
             RETURNING {CLAIMED_COLUMNS}"
        )
    }

    /// Whitespace collapsed: the statements are compared as SQL reads them, not as laid out.
    pub(crate) fn squeezed(text: &str) -> String {
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn occurrences(statement: &str, fragment: &str) -> usize {
        squeezed(statement).matches(&squeezed(fragment)).count()
    }

    /// Every statement that must agree on which rows are eligible carries the same predicate:
    /// a copy edited alone fails here.
    #[test]
    fn the_claim_statements_share_one_eligibility() {
        let eligible = eligible();
        assert_eq!(occurrences(CLAIM_DUE, &eligible), 3, "all three scans");
        assert_eq!(occurrences(WOULD_CLAIM, &eligible), 1);
        // The next-due read filters on the stored fact alone (one index probe), as the claim's
        // scans do before they evaluate the definition.
        assert_eq!(occurrences(NEXT_DUE, "AND s.claimable ORDER BY"), 1);
        // The definition is evaluated within that predicate and nowhere else.
        for statement in [CLAIM_DUE, WOULD_CLAIM] {
            assert_eq!(
                occurrences(statement, CLAIMABLE_NOW),
                occurrences(statement, &eligible),
                "{statement}"
            );
        }
    }

    /// The upgrade gate as every claim statement carries it, with the parameter naming this
    /// build's latest migration: one CTE that probes the ledger once, and each scan's filter.
    fn gate(parameter: &str) -> String {
        format!(
            "WITH gate AS ( SELECT NOT EXISTS ( SELECT 1 FROM schema_migrations m \
             WHERE m.version > {parameter} \
             AND coalesce(m.upgrade_floor, m.version) > {parameter} ) AS open ), "
        )
    }

    /// Every claim statement, the dry run's included, opens with the same gate and filters each
    /// of its scans on it: a claim by a build the gate holds out takes nothing.
    #[test]
    fn the_claim_statements_share_one_gate() {
        const FILTER: &str = "WHERE (SELECT open FROM gate) AND ";
        for (statement, parameter, scans) in [(CLAIM_DUE, "$4", 3), (WOULD_CLAIM, "$5", 1)] {
            assert!(
                squeezed(statement).starts_with(&gate(parameter)),
                "{statement}"
            );
            assert_eq!(
                occurrences(statement, "schema_migrations"),
                1,
                "{statement}"
            );
            assert_eq!(occurrences(statement, FILTER), scans, "{statement}");
            assert_eq!(
                occurrences(statement, "FROM trigger_schedules s WHERE"),
                scans,
                "every scan that chooses rows is filtered: {statement}"
            );
        }
    }

    /// The claim writes one claim on whatever its scans chose, and every statement that returns
    /// a claimed row returns the same columns under the same names.
    #[test]
    fn the_claim_statements_write_and_return_a_claim_alike() {
        assert!(squeezed(CLAIM_DUE).ends_with(&take_chosen()));
        assert!(squeezed(CLAIMED_BY_FENCE).starts_with(&format!("SELECT {CLAIMED_COLUMNS} FROM")));
        // The dry run computes the same columns, under the same names, without writing them.
        let would = "SELECT s.ctid::text AS row_tid, s.project_id, s.trigger_id, \
            s.trigger_revision, s.state_version + 1 AS state_version, s.next_fire_at_ms, \
            $3::text AS claim_owner, gen_random_uuid() AS claim_token, \
            s.claim_version + 1 AS claim_version, now_ms() + $4::int8 AS claim_expires_at_ms, \
            now_ms() AS updated_at_ms, t.task_id, t.cron_expr, t.time_zone, t.misfire_policy, \
            t.misfire_grace_ms, t.content_digest AS trigger_digest, k.revision AS task_revision, \
            k.content_digest AS task_digest, k.execution_revision_id FROM chosen c";
        assert_eq!(occurrences(WOULD_CLAIM, would), 1);
    }

    /// The claim runs either its two scans in claim order or, when $5 names a row, the named
    /// one: each behind a test of $5 alone, and the claim writes whatever they chose.
    #[test]
    fn the_claim_runs_its_batch_scans_or_its_named_one() {
        let batch = "WHERE (SELECT open FROM gate) AND $5::text IS NULL AND s.next_fire_at_ms ";
        assert_eq!(
            occurrences(CLAIM_DUE, batch),
            2,
            "uninitialized and overdue"
        );
        let named = "WHERE (SELECT open FROM gate) AND $5::text IS NOT NULL \
                     AND s.project_id = $5 AND s.trigger_id = $6 \
                     AND (s.next_fire_at_ms IS NULL OR s.next_fire_at_ms <= now_ms())";
        assert_eq!(occurrences(CLAIM_DUE, named), 1);
        let chosen = "chosen AS ( SELECT project_id, trigger_id FROM uninitialized \
                      UNION ALL SELECT project_id, trigger_id FROM overdue \
                      UNION ALL SELECT project_id, trigger_id FROM named )";
        assert_eq!(occurrences(CLAIM_DUE, chosen), 1);
    }

    /// The transaction-local pin turns off every claim plan setting, and nothing else.
    #[test]
    fn the_pin_names_every_claim_plan_setting() {
        for setting in CLAIM_PLAN_SETTINGS {
            assert!(
                PIN_CLAIM_PLAN.contains(&format!("set_config('{setting}', 'off', true)")),
                "{setting}"
            );
        }
        assert_eq!(
            PIN_CLAIM_PLAN.matches("set_config(").count(),
            CLAIM_PLAN_SETTINGS.len()
        );
    }
}
