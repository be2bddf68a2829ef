//! How long the scheduler keeps the history it owns (docs/DESIGN.md §3.3): misfire records
//! (`store::misfires`, a week), the replica registry (`store::replicas`, a day after a replica
//! stopped, a week after its last heartbeat) and the audit of operator actions (here). Each is
//! deleted past its bound by the replicas' minute of housekeeping, in bounded batches by a time
//! index. Runs, attempts and events are the dispatcher's: it moves them on after admission and
//! owns their retention; no scheduler read depends on their size (each is bounded by a key or a
//! time window).

use tokio_postgres::GenericClient;

use super::StoreError;

/// The audit of operator actions (claims by hand, expiries, pauses, resumes, fires, backfills)
/// is kept this long: 90 days.
pub const AUDIT_RETENTION_MS: i64 = 90 * 24 * 3_600_000;

// Deletes audit rows older than $1 ms of database time, oldest first, at most $2 a call (the
// audit's time index), so a replica's pass never holds a long transaction.
const PRUNE_AUDIT: &str = "DELETE FROM schedule_audit WHERE audit_id IN (
    SELECT audit_id FROM schedule_audit WHERE at_ms < now_ms() - $1
    ORDER BY at_ms LIMIT $2)";

/// Deletes up to `limit` audit rows older than [`AUDIT_RETENTION_MS`]; returns how many.
pub async fn prune_audit(client: &impl GenericClient, limit: i64) -> Result<u64, StoreError> {
    Ok(client
        .execute(PRUNE_AUDIT, &[&AUDIT_RETENTION_MS, &limit])
        .await?)
}

super::statements::statements! {
    PRUNE_AUDIT: Runtime,
}
