//! What `run --metrics-addr` reads from the database: whether the server takes writes (for
//! `/readyz`), and the gauges of `/metrics` (docs/OPERATIONS.md, "Metrics and probes"); and, for
//! the headers of `inspect` and `top`, whether the server is a standby ([`server_role`]).

use std::time::Duration;

use serde::Serialize;
use tokio_postgres::GenericClient;

use super::StoreError;
use super::row::Named;

// A standby (or a server being promoted) answers reads but refuses every admission.
const IN_RECOVERY: &str = "SELECT pg_is_in_recovery()";

/// Refuses ([`StoreError::Unavailable`]) a server that is in recovery: a standby cannot admit.
pub async fn check_writable(client: &impl GenericClient) -> Result<(), StoreError> {
    let in_recovery: bool = client.query_one(IN_RECOVERY, &[]).await?.get(0);
    if in_recovery {
        return Err(StoreError::Unavailable(
            "the server is in recovery (a standby): it cannot take admissions".into(),
        ));
    }
    Ok(())
}

/// Writes the replica's registry row unchanged (a new row version, nothing else), so that the
/// transaction's COMMIT writes and waits as an admission's does (`synchronous_commit`, a
/// synchronous standby that does not answer): a readiness check whose commit does not complete
/// within its bound finds the server cannot take admissions, where a transaction that wrote
/// nothing (or only took a transaction id) commits at once, waiting for no standby. A registry
/// row that is gone (forgotten after a long stall, `expire --owner`) is no such write: the check
/// fails ([`StoreError::NotFound`]) until the replica's next heartbeat registers it again.
pub async fn write_through_commit(
    client: &impl GenericClient,
    owner: &str,
) -> Result<(), StoreError> {
    match client.execute(TOUCH_REGISTRY_ROW, &[&owner]).await? {
        1 => Ok(()),
        written => Err(StoreError::NotFound(format!(
            "the readiness write updated {written} registry rows for owner {owner}, not 1: the \
             replica's registry row is gone, and it is not ready until its next heartbeat \
             registers it again"
        ))),
    }
}

// The registry row of $1 written as it is: WAL for the COMMIT to wait on, no change to read.
const TOUCH_REGISTRY_ROW: &str = "UPDATE replicas SET state = state WHERE owner = $1";

/// The database side of a replica's gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gauges {
    /// Valid claims held by this owner.
    pub claims_held: i64,
    /// Rows a replica could claim now: claimable, due or uninitialized, and without a valid
    /// claim; counted up to [`DUE_COUNT_CAP`].
    pub due_unclaimed: i64,
    /// Database now minus the cursor of the most overdue of those rows (0 when none is due).
    pub oldest_due_age_ms: i64,
    /// Parked rows an operator paused: never due, never overdue, counted here instead (exactly
    /// up to [`PARKED_COUNT_EXACT`], estimated above).
    pub paused: i64,
    /// Parked rows switched off declaratively (trigger disabled, project suspended) and not
    /// paused.
    pub disabled: i64,
}

/// The due-and-unclaimed count stops here: past it the count is a backlog either way, and the
/// walk that counts stays bounded (milliseconds) however many rows are due.
pub const DUE_COUNT_CAP: i64 = 1_000;

/// Parked rows are counted exactly up to here, estimated above (see `GAUGES`).
pub const PARKED_COUNT_EXACT: i64 = 10_000;

// Walks of the claimable-order index (claimable rows only, docs/DESIGN.md §4.3) that stop after
// the cap, as the claim's own walk does: the due rows (cursor <= now, oldest first, so the first is
// the oldest) and the uninitialized ones (the NULLS FIRST head). `s.claimable` is the row's stored
// claimable fact (docs/DESIGN.md §3.1, "Claimable rows"), the condition of that index. Parked rows
// (paused, disabled, suspended) are not in that index, so the oldest due age cannot grow on a row
// no replica may take; they are counted apart, from the parked and paused partial indexes
// (index-only counts of the parked rows, never of the claimable ones). The owner's claims are a
// range of the claim-owner index. Database now is read once.
//
// Each parked count (`parked`, `paused`) is of the rows matching its condition, counted exactly up
// to $3 (a walk of its partial index that stops there), and above it the index's size as the last
// vacuum or analyze left it: counting 900,000 parked rows on every scrape took 130 ms, and past
// the cap the number matters less than that it is large. `top::TOP_COUNTS` counts them the same.
const GAUGES: &str = "WITH clock AS MATERIALIZED (
        SELECT now_ms() AS now_ms
    ), due AS MATERIALIZED (
        SELECT s.next_fire_at_ms
        FROM trigger_schedules s
        WHERE s.claimable AND s.next_fire_at_ms <= (SELECT now_ms FROM clock)
          AND (s.claim_token IS NULL OR s.claim_expires_at_ms <= (SELECT now_ms FROM clock))
        ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id
        LIMIT $2
    ), fresh AS MATERIALIZED (
        SELECT 1
        FROM trigger_schedules s
        WHERE s.claimable AND s.next_fire_at_ms IS NULL
          AND (s.claim_token IS NULL OR s.claim_expires_at_ms <= (SELECT now_ms FROM clock))
        ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id
        LIMIT $2
    )
    SELECT least((SELECT count(*) FROM due) + (SELECT count(*) FROM fresh), $2) AS due_unclaimed,
           coalesce((SELECT c.now_ms - min(next_fire_at_ms) FROM due), 0) AS oldest_due_age_ms,
           (SELECT count(*) FROM trigger_schedules s
            WHERE s.claim_owner = $1 AND s.claim_expires_at_ms > c.now_ms) AS claims_held,
           (SELECT CASE WHEN c.n < $3 THEN c.n
                        ELSE greatest(c.n, (SELECT reltuples::bigint FROM pg_class
                                            WHERE oid = 'trigger_schedules_parked'::regclass)) END
            FROM (SELECT count(*) AS n FROM (SELECT 1 FROM trigger_schedules s
                                             WHERE NOT s.claimable LIMIT $3) l) c) AS parked,
           (SELECT CASE WHEN c.n < $3 THEN c.n
                        ELSE greatest(c.n, (SELECT reltuples::bigint FROM pg_class
                                            WHERE oid = 'trigger_schedules_paused'::regclass)) END
            FROM (SELECT count(*) AS n FROM (SELECT 1 FROM trigger_schedules s
                                             WHERE s.paused_at_ms IS NOT NULL LIMIT $3) l) c)
               AS paused
    FROM clock c";

/// The gauges of `owner`, in one statement, in a transaction with the schema's settings (JIT off:
/// without statistics, straight after a large publish, the planner's estimates of the walks above
/// are huge, and JIT compiling them took 800 ms for a statement that runs in under 100).
pub async fn gauges(client: &impl GenericClient, owner: &str) -> Result<Gauges, StoreError> {
    let row = client
        .query_one(GAUGES, &[&owner, &DUE_COUNT_CAP, &PARKED_COUNT_EXACT])
        .await?;
    Ok(Gauges {
        due_unclaimed: row.col("due_unclaimed")?,
        oldest_due_age_ms: row
            .col::<Option<i64>>("oldest_due_age_ms")?
            .unwrap_or(0)
            .max(0),
        claims_held: row.col("claims_held")?,
        paused: row.col("paused")?,
        disabled: (row.col::<i64>("parked")? - row.col::<i64>("paused")?).max(0),
    })
}

/// Whether the server a session reads is the primary or a standby, for the headers of `inspect`
/// and `top` (docs/OPERATIONS.md, "`qlsched top`"): a standby answers every read, some of it old.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ServerRole {
    Primary,
    /// In recovery. `replay_lag` is the database's now minus the commit time of the last
    /// transaction replayed: unknown (null) before the first replay; on an idle primary it grows
    /// although nothing is missing, as PostgreSQL's own measure does.
    Standby {
        /// Seconds: database now minus the last replayed commit; null before the first replay.
        #[serde(rename = "replay_lag_s", serialize_with = "seconds")]
        #[cfg_attr(feature = "schema", schemars(with = "Option<f64>"))]
        replay_lag: Option<Duration>,
    },
}

impl ServerRole {
    /// `standby, replay lag 1.2s` (or `replay lag unknown`); nothing for the primary, which
    /// is what every header assumes.
    pub fn header(&self) -> Option<String> {
        match self {
            ServerRole::Primary => None,
            ServerRole::Standby {
                replay_lag: Some(lag),
            } => Some(format!(
                "standby, replay lag {}",
                qlsched_core::time::span(i64::try_from(lag.as_millis()).unwrap_or(i64::MAX))
            )),
            ServerRole::Standby { replay_lag: None } => {
                Some("standby, replay lag unknown".to_owned())
            }
        }
    }
}

fn seconds<S: serde::Serializer>(lag: &Option<Duration>, out: S) -> Result<S::Ok, S::Error> {
    match lag {
        Some(lag) => out.serialize_f64(lag.as_secs_f64()),
        None => out.serialize_none(),
    }
}

// The replay lag in milliseconds, never negative (the standby's clock may run behind the
// primary's); null when nothing was replayed yet or on a primary.
const SERVER_ROLE: &str = "SELECT pg_is_in_recovery() AS in_recovery,
        greatest((extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000)::int8, 0)
            AS replay_lag_ms";

/// The role of the server `client` is connected to, in one statement any login may run.
pub async fn server_role(client: &impl GenericClient) -> Result<ServerRole, StoreError> {
    let row = client.query_one(SERVER_ROLE, &[]).await?;
    if !row.col::<bool>("in_recovery")? {
        return Ok(ServerRole::Primary);
    }
    let lag_ms: Option<i64> = row.col("replay_lag_ms")?;
    Ok(ServerRole::Standby {
        replay_lag: lag_ms.map(|ms| Duration::from_millis(ms.unsigned_abs())),
    })
}

super::statements::statements! {
    IN_RECOVERY: Runtime,
    GAUGES: Runtime,
    SERVER_ROLE: Runtime | Observer,
    TOUCH_REGISTRY_ROW: Runtime,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::ServerRole;

    #[test]
    fn the_header_names_a_standby_and_its_lag_and_nothing_for_the_primary() {
        assert_eq!(ServerRole::Primary.header(), None);
        let lagging = ServerRole::Standby {
            replay_lag: Some(Duration::from_millis(1_200)),
        };
        assert_eq!(
            lagging.header().as_deref(),
            Some("standby, replay lag 1.2s")
        );
        let unknown = ServerRole::Standby { replay_lag: None };
        assert_eq!(
            unknown.header().as_deref(),
            Some("standby, replay lag unknown")
        );
    }

    #[test]
    fn json_names_the_role_and_the_lag_in_seconds() {
        let json = |role: ServerRole| serde_json::to_value(role).map(|v| v.to_string()).ok();
        assert_eq!(
            json(ServerRole::Primary).as_deref(),
            Some(r#"{"role":"primary"}"#)
        );
        assert_eq!(
            json(ServerRole::Standby {
                replay_lag: Some(Duration::from_millis(1_200))
            })
            .as_deref(),
            Some(r#"{"replay_lag_s":1.2,"role":"standby"}"#)
        );
        assert_eq!(
            json(ServerRole::Standby { replay_lag: None }).as_deref(),
            Some(r#"{"replay_lag_s":null,"role":"standby"}"#)
        );
    }
}
