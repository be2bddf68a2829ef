//! The replica registry (migration 0006): each `qlsched run` registers itself, beats a heartbeat
//! at most once per cadence inside its claim's round trip (`store::claim::claim_for_round`), and
//! marks itself draining and stopped on SIGTERM; `inspect replicas`, the summary and the
//! why-not-firing diagnosis read which replicas are alive from here, on the database clock.

use serde::Serialize;
use tokio_postgres::GenericClient;

use super::StoreError;
use super::error::stored;
use super::row::Named;
use qlsched_core::Liveness;
use qlsched_core::minutes::{LAG_BUCKETS, Minutes};

/// What a replica says of itself when it starts.
#[derive(Debug, Clone)]
pub struct Registration<'a> {
    pub owner: &'a str,
    pub host: &'a str,
    pub pid: i32,
    /// The release and the commit it was built from (`0.2.0+0123456789ab`).
    pub version: &'a str,
    /// The schema version the binary was built for: its last migration.
    pub schema_version: i64,
    pub lease_ms: i64,
    pub cadence_ms: i64,
    /// How long after its last heartbeat the registry forgets this replica if it never stops
    /// (killed, its host lost): `run --forget-stale-after`.
    pub forget_after_ms: i64,
}

// Registers (or re-registers, after a restart under the same owner) a running replica: its
// counters start again from zero.
const REGISTER: &str = "INSERT INTO replicas (owner, host, pid, version, schema_version,
        started_at_ms, heartbeat_at_ms, state, lease_ms, cadence_ms, forget_after_ms)
    VALUES ($1, $2, $3, $4, $5, now_ms(), now_ms(), 'running', $6, $7, $8)
    ON CONFLICT (owner) DO UPDATE SET host = excluded.host, pid = excluded.pid,
        version = excluded.version, schema_version = excluded.schema_version,
        started_at_ms = excluded.started_at_ms, heartbeat_at_ms = excluded.heartbeat_at_ms,
        last_round_at_ms = NULL, state = 'running', lease_ms = excluded.lease_ms,
        cadence_ms = excluded.cadence_ms, forget_after_ms = excluded.forget_after_ms, rounds = 0,
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
                &replica.schema_version,
                &replica.lease_ms,
                &replica.cadence_ms,
                &replica.forget_after_ms,
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
    /// The batch the replica's next round claims with (`core::batch`).
    pub batch: i32,
    /// The same rounds' figures by the minute of database time they claimed in, added to the
    /// replica's rows of `replica_minutes` (migration 0015) by the same statement, so that the
    /// two never disagree about what was written.
    pub minutes: Minutes,
}

impl Heartbeat {
    /// The minutes as the parallel arrays [`HEARTBEAT`] takes: the minutes, each count, the
    /// largest lags, and every minute's lag histogram one after the other.
    #[allow(clippy::type_complexity)]
    fn minute_arrays(&self) -> (Vec<i64>, [Vec<i64>; 5], Vec<Option<i64>>, Vec<i64>) {
        let minutes = self.minutes.iter().filter(|(_, f)| !f.is_empty());
        let mut starts = Vec::new();
        let mut counts: [Vec<i64>; 5] = Default::default();
        let mut max = Vec::new();
        let mut lags = Vec::new();
        for (minute, figures) in minutes {
            starts.push(*minute);
            counts[0].push(figures.admissions);
            counts[1].push(figures.misfires);
            counts[2].push(figures.occurrences_passed_over);
            counts[3].push(figures.fence_losses);
            counts[4].push(figures.failed_rounds);
            max.push(figures.lag.max_ms);
            lags.extend_from_slice(&figures.lag.counts);
        }
        (starts, counts, max, lags)
    }
}

// A heartbeat of owner $1: database time, the counters moved on, the last error kept unless a
// newer one came; and, only when the registry row was there to beat, the figures of each minute
// $9 (parallel arrays $10..$14 of counts, $15 of largest lags, and $16 the minutes' lag
// histograms of $17 buckets each, one after the other) added to the replica's row of that minute
// (one row per replica and minute: the upsert never waits on another replica's). One statement,
// so the registry's counters and the minutes are written together or not at all, and a heartbeat
// that was not written is sent again without counting twice (one whose COMMIT was applied but
// whose reply was lost is sent again and counts twice: figures are never lost). Pipelined with the claim, so it costs no round trip of its own.
pub(crate) const HEARTBEAT: &str = "WITH beat AS (
        UPDATE replicas SET heartbeat_at_ms = now_ms(),
            last_round_at_ms = now_ms(), rounds = rounds + $2,
            failed_rounds = failed_rounds + $3, admissions = admissions + $4,
            misfires = misfires + $5, fence_losses = fence_losses + $6,
            last_error = coalesce($7, last_error), batch = $8
        WHERE owner = $1
        RETURNING owner
    ), minutes AS (
        INSERT INTO replica_minutes AS r (minute_ms, owner, admissions, misfires,
            occurrences_passed_over, fence_losses, failed_rounds, lag_counts, lag_max_ms)
        SELECT m.minute_ms, b.owner, m.admissions, m.misfires, m.passed_over, m.fence_losses,
               m.failed_rounds, (($16::bigint[])[((m.n - 1) * $17::int + 1)::int : (m.n * $17::int)::int])::int[],
               m.lag_max_ms
        FROM beat b,
             unnest($9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[],
                    $14::bigint[], $15::bigint[])
                 WITH ORDINALITY AS m(minute_ms, admissions, misfires, passed_over,
                                      fence_losses, failed_rounds, lag_max_ms, n)
        ON CONFLICT (minute_ms, owner) DO UPDATE SET
            admissions = r.admissions + excluded.admissions,
            misfires = r.misfires + excluded.misfires,
            occurrences_passed_over = r.occurrences_passed_over + excluded.occurrences_passed_over,
            fence_losses = r.fence_losses + excluded.fence_losses,
            failed_rounds = r.failed_rounds + excluded.failed_rounds,
            lag_counts = ARRAY(SELECT u.a + u.b
                               FROM unnest(r.lag_counts, excluded.lag_counts)
                                    WITH ORDINALITY AS u(a, b, i)
                               ORDER BY u.i),
            lag_max_ms = greatest(r.lag_max_ms, excluded.lag_max_ms)
    )
    SELECT count(*) AS beats FROM beat";

/// How many registry rows [`HEARTBEAT`] found: 1, or 0 when the row is gone.
pub(crate) fn heartbeat_beats(row: &tokio_postgres::Row) -> Result<i64, StoreError> {
    row.col("beats")
}

/// [`HEARTBEAT`]'s parameters for a heartbeat of `owner`.
pub(crate) fn heartbeat_parameters(owner: &str, beat: &Heartbeat) -> HeartbeatParameters {
    let (starts, counts, max, lags) = beat.minute_arrays();
    HeartbeatParameters {
        owner: owner.to_owned(),
        beat: beat.clone(),
        starts,
        counts,
        max,
        lags,
        buckets: i32::try_from(LAG_BUCKETS).unwrap_or(i32::MAX),
    }
}

/// [`HEARTBEAT`]'s parameters, owned, so that the statement can be sent in a pipeline.
pub(crate) struct HeartbeatParameters {
    owner: String,
    beat: Heartbeat,
    starts: Vec<i64>,
    counts: [Vec<i64>; 5],
    max: Vec<Option<i64>>,
    lags: Vec<i64>,
    buckets: i32,
}

impl HeartbeatParameters {
    pub(crate) fn as_params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 17] {
        let b = &self.beat;
        [
            &self.owner,
            &b.rounds,
            &b.failed_rounds,
            &b.admissions,
            &b.misfires,
            &b.fence_losses,
            &b.last_error,
            &b.batch,
            &self.starts,
            &self.counts[0],
            &self.counts[1],
            &self.counts[2],
            &self.counts[3],
            &self.counts[4],
            &self.max,
            &self.lags,
            &self.buckets,
        ]
    }
}

/// Sends [`HEARTBEAT`] on its own, outside a claim's round trip: a stopping replica's last,
/// with what its rounds did since the one before, which would otherwise be lost with it. Whether
/// the registry row was there to beat (the minutes are written only then).
pub async fn beat(
    client: &impl GenericClient,
    owner: &str,
    heartbeat: &Heartbeat,
) -> Result<bool, StoreError> {
    let parameters = heartbeat_parameters(owner, heartbeat);
    let row = client.query_one(HEARTBEAT, &parameters.as_params()).await?;
    Ok(heartbeat_beats(&row)? == 1)
}

// The state of owner $1 moved to $2 (draining, stopped), with a heartbeat. Only forward: a
// stopping replica writes `draining` beside its drain and `stopped` beside its give-back, on two
// connections, so the `draining` may commit last; it must not bring a stopped replica back. Only
// a new registration leaves `stopped`.
const MARK: &str = "UPDATE replicas SET state = $2, heartbeat_at_ms = now_ms()
    WHERE owner = $1 AND state <> 'stopped'";

/// Marks a replica `draining` or `stopped`.
pub async fn mark(client: &impl GenericClient, owner: &str, state: &str) -> Result<(), StoreError> {
    client.execute(MARK, &[&owner, &state]).await?;
    Ok(())
}

// The rows the registry has forgotten (replica_forgotten(), migration 0013): stopped replicas a
// day after they stopped, any other past its own bound.
const FORGET: &str = "DELETE FROM replicas
    WHERE replica_forgotten(state, heartbeat_at_ms, forget_after_ms)";

/// Deletes the replicas the registry has forgotten (stopped a day ago, or stale past their
/// bound); returns how many. The reads leave them out already.
pub async fn forget(client: &impl GenericClient) -> Result<u64, StoreError> {
    Ok(client.execute(FORGET, &[]).await?)
}

// Deletes minute rows older than $1 ms of database time, oldest first, at most $2 a call (a range
// of the primary key), so a replica's housekeeping never holds a long transaction.
const PRUNE_MINUTES: &str = "DELETE FROM replica_minutes WHERE (minute_ms, owner) IN (
    SELECT minute_ms, owner FROM replica_minutes WHERE minute_ms < now_ms() - $1
    ORDER BY minute_ms LIMIT $2)";

/// Deletes up to `limit` rows of `replica_minutes` older than `retention_ms`
/// (`core::minutes::RETENTION_MS`); returns how many.
pub async fn prune_minutes(
    client: &impl GenericClient,
    retention_ms: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    Ok(client
        .execute(PRUNE_MINUTES, &[&retention_ms, &limit])
        .await?)
}

// Rows whose claim still names owner $1, valid or expired (a range of the claim-owner index):
// what a claim whose reply never reached the replica took.
const CLAIMED_ROWS: &str = "SELECT count(*) FILTER (WHERE claim_expires_at_ms > now_ms()) AS valid,
        count(*) FILTER (WHERE claim_expires_at_ms <= now_ms()) AS expired
    FROM trigger_schedules WHERE claim_owner = $1";

/// How many rows still carry `owner`'s claim: `(valid, expired)`.
pub async fn claimed_rows(
    client: &impl GenericClient,
    owner: &str,
) -> Result<(i64, i64), StoreError> {
    let row = client.query_one(CLAIMED_ROWS, &[&owner]).await?;
    Ok((row.col("valid")?, row.col("expired")?))
}

/// One replica as `inspect replicas` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReplicaView {
    pub owner: String,
    pub host: String,
    pub pid: i32,
    /// The release and the commit it was built from (`0.2.0+0123456789ab`); a replica of a
    /// release before 0.2.0 says its version alone.
    pub version: String,
    /// The schema version the replica was built for (its binary's last migration); null for a
    /// replica of a release before 0.2.0, which does not say.
    pub schema_version: Option<i64>,
    /// From the heartbeat's age on the database clock: live (running or draining, a heartbeat
    /// within two cadences, at least a second), stalled (none for longer, but within its lease
    /// plus its cadence), stale (none for longer than that: its claims have expired), stopped.
    pub liveness: Liveness,
    /// As the replica last wrote it.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["running", "draining", "stopped"])))]
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
    /// The batch its next round claims with, as its last heartbeat said; null for a replica of
    /// a release that does not say.
    pub batch: Option<i32>,
}

// Every replica the registry remembers (replica_forgotten(), migration 0013: a stale one leaves
// at its bound, even before a housekeeping deletes it) with its liveness at one database instant:
// the one place the rule of `core::Liveness` is written (two cadences, at least a second, then
// the lease plus the cadence). The registry is small (stopped rows are forgotten after a day,
// dead ones after their bound), so the counts elsewhere are taken from this list rather than
// from a second statement.
const LIST: &str = "SELECT owner, host, pid, version, schema_version,
        CASE WHEN state = 'stopped' THEN 'stopped'
             WHEN heartbeat_at_ms < now_ms() - lease_ms - cadence_ms THEN 'stale'
             WHEN heartbeat_at_ms < now_ms() - greatest(2 * cadence_ms, 1000) THEN 'stalled'
             ELSE 'live' END AS liveness,
        state, started_at_ms, heartbeat_at_ms, now_ms() - heartbeat_at_ms AS heartbeat_age_ms,
        last_round_at_ms, rounds, failed_rounds, admissions, misfires, fence_losses, last_error,
        batch
    FROM replicas
    WHERE NOT replica_forgotten(state, heartbeat_at_ms, forget_after_ms)
    ORDER BY owner";

/// Every registered replica with its liveness: the ones that need a look first (stale, then
/// stalled), then live, then stopped, each by owner.
pub async fn list(client: &impl GenericClient) -> Result<Vec<ReplicaView>, StoreError> {
    let rows = client.query(LIST, &[]).await?;
    let mut replicas = rows
        .iter()
        .map(|row| {
            Ok(ReplicaView {
                owner: row.col("owner")?,
                host: row.col("host")?,
                pid: row.col("pid")?,
                version: row.col("version")?,
                schema_version: row.col("schema_version")?,
                liveness: stored("replicas", "liveness", row.col("liveness")?)?,
                state: row.col("state")?,
                started_at_ms: row.col("started_at_ms")?,
                heartbeat_at_ms: row.col("heartbeat_at_ms")?,
                heartbeat_age_ms: row.col("heartbeat_age_ms")?,
                last_round_at_ms: row.col("last_round_at_ms")?,
                rounds: row.col("rounds")?,
                failed_rounds: row.col("failed_rounds")?,
                admissions: row.col("admissions")?,
                misfires: row.col("misfires")?,
                fence_losses: row.col("fence_losses")?,
                last_error: row.col("last_error")?,
                batch: row.col("batch")?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    replicas
        .sort_by(|a, b| (a.liveness.urgency(), &a.owner).cmp(&(b.liveness.urgency(), &b.owner)));
    Ok(replicas)
}

/// How many registered replicas are in each state of [`Liveness`], in `Liveness::ALL`'s order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LivenessCounts {
    pub live: i64,
    pub stalled: i64,
    pub stale: i64,
    pub stopped: i64,
}

impl LivenessCounts {
    pub fn of(replicas: &[ReplicaView]) -> Self {
        let mut counts = Self::default();
        for replica in replicas {
            *counts.get_mut(replica.liveness) += 1;
        }
        counts
    }

    pub fn get(&self, liveness: Liveness) -> i64 {
        match liveness {
            Liveness::Live => self.live,
            Liveness::Stalled => self.stalled,
            Liveness::Stale => self.stale,
            Liveness::Stopped => self.stopped,
        }
    }

    fn get_mut(&mut self, liveness: Liveness) -> &mut i64 {
        match liveness {
            Liveness::Live => &mut self.live,
            Liveness::Stalled => &mut self.stalled,
            Liveness::Stale => &mut self.stale,
            Liveness::Stopped => &mut self.stopped,
        }
    }
}

/// How many registered replicas are in each state now (the rule of [`list`]).
pub async fn liveness_counts(client: &impl GenericClient) -> Result<LivenessCounts, StoreError> {
    Ok(LivenessCounts::of(&list(client).await?))
}

super::statements::statements! {
    REGISTER: Runtime,
    HEARTBEAT: Runtime,
    MARK: Runtime,
    FORGET: Runtime,
    PRUNE_MINUTES: Runtime,
    CLAIMED_ROWS: Runtime,
    LIST: Observer | Runtime,
}
