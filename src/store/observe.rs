//! What `run --metrics-addr` reads from the database: whether the server takes writes (for
//! `/readyz`), and the gauges of `/metrics` (docs/OPERATIONS.md, "Metrics and probes").

use tokio_postgres::GenericClient;

use super::StoreError;

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

/// The database side of a replica's gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gauges {
    /// Valid claims held by this owner.
    pub claims_held: i64,
    /// Rows a replica could claim now: eligible, due or uninitialized, and without a valid claim.
    pub due_unclaimed: i64,
    /// Database now minus the cursor of the most overdue of those rows (0 when none is due).
    pub oldest_due_age_ms: i64,
}

// One statement. The due rows are a range of the claim-order index (cursor <= now; uninitialized
// rows are the NULLS FIRST head of the same index), each checked against its definitions by key,
// as the claim checks them; rows switched off (a suspended project, a disabled trigger, a stale
// revision) are left out, so the oldest due age cannot grow on a row no replica may take. The
// owner's claims are a range of the claim-owner index. Database now is read once.
const GAUGES: &str = "WITH clock AS MATERIALIZED (
        SELECT now_ms() AS now_ms
    ), due AS (
        SELECT s.next_fire_at_ms
        FROM trigger_schedules s CROSS JOIN clock c
        WHERE (s.next_fire_at_ms IS NULL OR s.next_fire_at_ms <= c.now_ms)
          AND (s.claim_token IS NULL OR s.claim_expires_at_ms <= c.now_ms)
          AND EXISTS (SELECT 1 FROM triggers t JOIN projects p ON p.project_id = t.project_id
                      WHERE t.project_id = s.project_id AND t.trigger_id = s.trigger_id
                        AND t.revision = s.trigger_revision AND t.enabled
                        AND p.status = 'active')
    )
    SELECT (SELECT count(*) FROM due),
           coalesce((SELECT c.now_ms - min(next_fire_at_ms) FROM due), 0),
           (SELECT count(*) FROM trigger_schedules s
            WHERE s.claim_owner = $1 AND s.claim_expires_at_ms > c.now_ms)
    FROM clock c";

/// The gauges of `owner`, in one statement.
pub async fn gauges(client: &impl GenericClient, owner: &str) -> Result<Gauges, StoreError> {
    let row = client.query_one(GAUGES, &[&owner]).await?;
    Ok(Gauges {
        due_unclaimed: row.get(0),
        oldest_due_age_ms: row.get::<_, Option<i64>>(1).unwrap_or(0).max(0),
        claims_held: row.get(2),
    })
}
