//! The replica registry (migration 0006): each `qlsched run` registers itself, beats a heartbeat
//! at most once per cadence inside its claim's round trip (`store::claim::claim_for_round`), and
//! marks itself draining and stopped on SIGTERM; `inspect replicas`, the summary and the
//! why-not-firing diagnosis read which replicas are alive from here, on the database clock.

use serde::Serialize;
use tokio_postgres::GenericClient;

use super::StoreError;

/// What a replica says of itself when it starts.
#[derive(Debug, Clone)]
pub struct Registration<'a> {
    pub owner: &'a str,
    pub host: &'a str,
    pub pid: i32,
    pub version: &'a str,
    pub lease_ms: i64,
    pub cadence_ms: i64,
}

// Registers (or re-registers, after a restart under the same owner) a running replica: its
// counters start again from zero.
const REGISTER: &str = "INSERT INTO replicas (owner, host, pid, version, started_at_ms,
        heartbeat_at_ms, state, lease_ms, cadence_ms)
    VALUES ($1, $2, $3, $4, now_ms(), now_ms(), 'running', $5, $6)
    ON CONFLICT (owner) DO UPDATE SET host = excluded.host, pid = excluded.pid,
        version = excluded.version, started_at_ms = excluded.started_at_ms,
        heartbeat_at_ms = excluded.heartbeat_at_ms, last_round_at_ms = NULL, state = 'running',
        lease_ms = excluded.lease_ms, cadence_ms = excluded.cadence_ms, rounds = 0,
        failed_rounds = 0, admissions = 0, misfires = 0, fence_losses = 0, last_error = NULL";

/// Registers a replica as running.
pub async fn register(
    client: &impl GenericClient,
    replica: &Registration<'_>,
) -> Result<(), StoreError> {
    client
        .execute(
            REGISTER,
            &[
                &replica.owner,
                &replica.host,
                &replica.pid,
                &replica.version,
                &replica.lease_ms,
                &replica.cadence_ms,
            ],
        )
        .await?;
    Ok(())
}

/// What a replica did since its last heartbeat, added to its row by the next one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeat {
    pub rounds: i64,
    pub failed_rounds: i64,
    pub admissions: i64,
    pub misfires: i64,
    pub fence_losses: i64,
    /// The last round error since the last heartbeat; `None` leaves the stored one.
    pub last_error: Option<String>,
}

// A heartbeat of owner $1: database time, the counters moved on, the last error kept unless a
// newer one came. Pipelined with the claim, so it costs no round trip of its own.
pub(crate) const HEARTBEAT: &str = "UPDATE replicas SET heartbeat_at_ms = now_ms(),
        last_round_at_ms = now_ms(), rounds = rounds + $2, failed_rounds = failed_rounds + $3,
        admissions = admissions + $4, misfires = misfires + $5, fence_losses = fence_losses + $6,
        last_error = coalesce($7, last_error)
    WHERE owner = $1";

// The state of owner $1 moved to $2 (draining, stopped), with a heartbeat.
const MARK: &str = "UPDATE replicas SET state = $2, heartbeat_at_ms = now_ms() WHERE owner = $1";

/// Marks a replica `draining` or `stopped`.
pub async fn mark(client: &impl GenericClient, owner: &str, state: &str) -> Result<(), StoreError> {
    client.execute(MARK, &[&owner, &state]).await?;
    Ok(())
}

// Stopped replicas a day after they stopped, and any whose heartbeat stopped a week ago.
const FORGET: &str = "DELETE FROM replicas
    WHERE (state = 'stopped' AND heartbeat_at_ms < now_ms() - 86400000)
       OR heartbeat_at_ms < now_ms() - 604800000";

/// Forgets stopped and long-dead replicas; returns how many.
pub async fn forget(client: &impl GenericClient) -> Result<u64, StoreError> {
    Ok(client.execute(FORGET, &[]).await?)
}

/// One replica as `inspect replicas` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplicaView {
    pub owner: String,
    pub host: String,
    pub pid: i32,
    pub version: String,
    /// `live` (running or draining, heartbeat within its lease plus its cadence), `stale`
    /// (running or draining, no heartbeat for longer), or `stopped`.
    pub liveness: String,
    /// As the replica last wrote it: `running`, `draining` or `stopped`.
    pub state: String,
    pub started_at_ms: i64,
    pub heartbeat_at_ms: i64,
    /// Database time since the last heartbeat.
    pub heartbeat_age_ms: i64,
    pub last_round_at_ms: Option<i64>,
    pub rounds: i64,
    pub failed_rounds: i64,
    pub admissions: i64,
    pub misfires: i64,
    pub fence_losses: i64,
    pub last_error: Option<String>,
}

// Every registered replica, live ones first, then by owner, with its liveness at one database
// instant.
const LIST: &str = "SELECT * FROM (
    SELECT owner, host, pid, version,
        CASE WHEN state = 'stopped' THEN 'stopped'
             WHEN heartbeat_at_ms >= now_ms() - lease_ms - cadence_ms THEN 'live'
             ELSE 'stale' END AS liveness,
        state, started_at_ms, heartbeat_at_ms, now_ms() - heartbeat_at_ms AS heartbeat_age_ms,
        last_round_at_ms, rounds, failed_rounds, admissions, misfires, fence_losses, last_error
    FROM replicas) r
    ORDER BY liveness = 'live' DESC, liveness = 'stale' DESC, owner";

/// Every registered replica with its liveness.
pub async fn list(client: &impl GenericClient) -> Result<Vec<ReplicaView>, StoreError> {
    let rows = client.query(LIST, &[]).await?;
    Ok(rows
        .iter()
        .map(|row| ReplicaView {
            owner: row.get("owner"),
            host: row.get("host"),
            pid: row.get("pid"),
            version: row.get("version"),
            liveness: row.get("liveness"),
            state: row.get("state"),
            started_at_ms: row.get("started_at_ms"),
            heartbeat_at_ms: row.get("heartbeat_at_ms"),
            heartbeat_age_ms: row.get("heartbeat_age_ms"),
            last_round_at_ms: row.get("last_round_at_ms"),
            rounds: row.get("rounds"),
            failed_rounds: row.get("failed_rounds"),
            admissions: row.get("admissions"),
            misfires: row.get("misfires"),
            fence_losses: row.get("fence_losses"),
            last_error: row.get("last_error"),
        })
        .collect())
}

// Replicas live now: running or draining, with a heartbeat within their lease plus cadence.
const LIVE: &str = "SELECT count(*) FROM replicas
    WHERE state <> 'stopped' AND heartbeat_at_ms >= now_ms() - lease_ms - cadence_ms";

/// How many replicas are live now (the rule of [`list`]'s `live`).
pub async fn live_count(client: &impl GenericClient) -> Result<i64, StoreError> {
    Ok(client.query_one(LIVE, &[]).await?.get(0))
}

super::statements::statements! {
    REGISTER: Runtime,
    HEARTBEAT: Runtime,
    MARK: Runtime,
    FORGET: Runtime,
    LIST: Observer,
    LIVE: Observer,
}
