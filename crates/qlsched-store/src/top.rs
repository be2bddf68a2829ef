//! What `qlsched top` needs beyond the operator read models of [`super::read`]: a summary whose
//! every statement is bounded by an index. (Its `e` key expires through [`super::operator`],
//! as `qlsched expire` does.)
//!
//! `read::summary` counts every schedule row exactly, by index-only scans that read an entry of
//! every row: 40 to 80 ms at a million rows here, growing with the table, which is more than a
//! dashboard that refreshes every second can spend on its header (the aim is under 50 ms per
//! query). [`top_summary`] returns the same read-model types,
//! `read::StateCounts` and `read::OwnerClaims`, from bounded statements instead: the states an
//! operator acts on are counted exactly (held claims by the partial claim-owner index, cursors by
//! the claimable-order index, parked rows by their own partial index), the due count stops at
//! [`DUE_CAP`], and the total is the planner's estimate once the table is large.
//!
//! The replicas panel reads the replica registry (`super::replicas`, live and stale replicas,
//! idle ones included) beside the claim owners, and the header whether the server is a standby
//! (`super::observe::server_role`, the same read as `inspect`'s).
//!
//! The trends ([`trends`]) and the outage facts ([`outage_facts`]) are read from what the
//! database holds, so they are there the moment `top` opens: runs by their creation time (the
//! `runs_created` index) and misfire records by theirs (`misfires_recorded`). Each bucket of a
//! trend is cut into [`TREND_SLICES`] slices, and each slice reads at most [`TREND_SLICE_SAMPLE`]
//! runs from its head, so a refresh reads at most 6,000 runs whether over a quiet quarter hour or
//! a day of 100 admissions a second: a slice with more runs than its sample has them
//! extrapolated from the time between the slice's start and its last sampled run (its bucket says
//! so), and a bucket's lag percentiles are those of its slices' samples. Slices keep a steady load
//! honest to a few percent and spread the lag sample over the bucket. A burst is read less well:
//! admissions commit in batches that share one creation time, so a slice's sample may be one
//! batch, and its rate a guess (100,000 admissions within a minute, in 394 batches, have read as
//! 4,000 to 29,000); the bar is marked `≈` and its shape still shows the burst. Exact counts of a busy
//! day (8,640,000 runs at 100 a second) cannot be read within a refresh's 50 ms; a rollup written
//! by the replicas could, at a write per round. Misfire records are read up to [`TREND_SAMPLE`] a
//! bucket. Fence losses and
//! failed rounds exist in the database only as the registry's running totals per replica, so
//! their trend is the dashboard's own record of those totals, from the moment it opened.
//!
//! [`snapshot`] is the dashboard's whole list read: the summary, the most urgent schedule rows,
//! the held claims, the newest admissions and the misfire counts of the loaded rows, in one
//! REPEATABLE READ READ ONLY transaction, so that they describe the same instant. The screen
//! (`tui::load`) only says how many rows of each it wants.

use serde::Serialize;
use tokio_postgres::GenericClient;

use super::StoreError;
use super::misfires;
use super::observe::{ServerRole, server_role};
use super::read::{self, ClaimView, OwnerClaims, RunView, ScheduleRow, StateCounts};
use super::replicas::{self, ReplicaView};
use super::row::Named;
use qlsched_core::outage::{GRACE_SLACK_MS, OutageFacts};
use qlsched_core::{MISFIRE_RETENTION_MS, TriggerName};

/// Below this many rows (by the planner's estimate) the total is counted; above, estimated.
pub const COUNT_EXACT_BELOW: i64 = 100_000;
/// The due count stops here: past it, that it is large matters more than the number.
pub const DUE_CAP: i64 = 10_000;

/// The dashboard's header and replicas panel at one database instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TopSummary {
    pub now_ms: i64,
    pub schema_version: i64,
    /// `total` and `not_due` are estimates when `total_estimated`; `due` is at most [`DUE_CAP`].
    pub counts: StateCounts,
    pub total_estimated: bool,
    pub due_capped: bool,
    /// Owners holding claims or having admitted in the last minute.
    pub owners: Vec<OwnerClaims>,
    /// Every registered replica: live ones (idle ones too), then stale, then stopped ones
    /// (forgotten a day after they stopped).
    pub replicas: Vec<ReplicaView>,
    /// Primary, or a standby with its replay lag.
    pub server: ServerRole,
}

// Schedule rows by state, each count bounded by an index (see the module comment), with the
// precedence of `inspect`'s states: parked rows (not claimable) from the parked partial index,
// the paused among them from the paused one (each exact up to PARKED_COUNT_EXACT, estimated
// above, as the gauges count them); the other states among the claimable rows only, by
// the claimable-order index (uninitialized, due up to the cap) and the claim-owner index (held
// claims, each checked for claimability on its row). The parked counts are written as
// `observe::GAUGES` writes them, which explains them.
const TOP_COUNTS: &str = "WITH clock AS MATERIALIZED (
        SELECT now_ms() AS now_ms
    ), estimate AS (
        SELECT greatest(c.reltuples, 0)::bigint AS rows
        FROM pg_class c WHERE c.oid = 'trigger_schedules'::regclass
    )
    SELECT c.now_ms,
        coalesce((SELECT max(version) FROM schema_migrations), 0) AS schema_version,
        CASE WHEN (SELECT rows FROM estimate) < $1
             THEN (SELECT count(*) FROM trigger_schedules)
             ELSE (SELECT rows FROM estimate) END AS total,
        (SELECT rows FROM estimate) >= $1 AS total_estimated,
        (SELECT CASE WHEN c.n < $3 THEN c.n
                     ELSE greatest(c.n, (SELECT reltuples::bigint FROM pg_class
                                         WHERE oid = 'trigger_schedules_parked'::regclass)) END
         FROM (SELECT count(*) AS n FROM (SELECT 1 FROM trigger_schedules s
                                          WHERE NOT s.claimable LIMIT $3) l) c) AS parked,
        (SELECT count(*) FROM trigger_schedules
          WHERE claim_owner IS NOT NULL AND claim_expires_at_ms > c.now_ms AND claimable)
          AS claimed,
        (SELECT count(*) FROM trigger_schedules
          WHERE claim_owner IS NOT NULL AND claim_expires_at_ms <= c.now_ms AND claimable)
          AS expired_claim,
        (SELECT count(*) FROM trigger_schedules
          WHERE claimable AND next_fire_at_ms IS NULL AND claim_token IS NULL) AS uninitialized,
        (SELECT count(*) FROM (
            SELECT 1 FROM trigger_schedules
            WHERE claimable AND next_fire_at_ms <= c.now_ms AND claim_token IS NULL
            LIMIT $2) d) AS due,
        (SELECT CASE WHEN c.n < $3 THEN c.n
                     ELSE greatest(c.n, (SELECT reltuples::bigint FROM pg_class
                                         WHERE oid = 'trigger_schedules_paused'::regclass)) END
         FROM (SELECT count(*) AS n FROM (SELECT 1 FROM trigger_schedules s
                                          WHERE s.paused_at_ms IS NOT NULL LIMIT $3) l) c) AS paused
    FROM clock c";

/// The header and replicas panel, every statement bounded by an index (the registry holds a row
/// per replica, forgotten a day after it stopped), pipelined.
pub async fn top_summary(client: &impl GenericClient) -> Result<TopSummary, StoreError> {
    let (counts, owners, replicas, server) = tokio::join!(
        client.query_one(
            TOP_COUNTS,
            &[
                &COUNT_EXACT_BELOW,
                &DUE_CAP,
                &super::observe::PARKED_COUNT_EXACT
            ]
        ),
        read::owners(client),
        replicas::list(client),
        server_role(client),
    );
    let (counts, owners, replicas, server) = (counts?, owners?, replicas?, server?);
    let total: i64 = counts.col("total")?;
    let off: i64 = counts.col("parked")?;
    let paused: i64 = counts.col("paused")?;
    let claimed: i64 = counts.col("claimed")?;
    let expired_claim: i64 = counts.col("expired_claim")?;
    let uninitialized: i64 = counts.col("uninitialized")?;
    let due: i64 = counts.col("due")?;
    Ok(TopSummary {
        now_ms: counts.col("now_ms")?,
        schema_version: counts.col("schema_version")?,
        counts: StateCounts {
            total,
            due,
            claimed,
            expired_claim,
            not_due: (total - off - claimed - expired_claim - uninitialized - due).max(0),
            disabled: off - paused,
            paused,
            uninitialized,
        },
        total_estimated: counts.col("total_estimated")?,
        due_capped: due >= DUE_CAP,
        owners,
        replicas,
        server,
    })
}

/// Misfire records a trend bucket reads at most, and runs (over its slices).
pub const TREND_SAMPLE: i64 = TREND_SLICES * TREND_SLICE_SAMPLE;
/// Slices a trend bucket is cut into, and runs each slice reads at most, from its head.
pub const TREND_SLICES: i64 = 10;
pub const TREND_SLICE_SAMPLE: i64 = 10;
/// Buckets a trend window is cut into: one bar each.
pub const TREND_BUCKETS: i64 = 60;
/// Due rows the outage facts look at, most overdue first: past it, the count is a lower bound.
pub const OUTAGE_DUE_CAP: i64 = qlsched_core::outage::COUNT_CAP;

/// One bar of the trends: what happened in `[start_ms, start_ms + bucket_ms)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TrendBucket {
    pub start_ms: i64,
    /// Runs created in the bucket; extrapolated from its slices' samples when
    /// `admissions_estimated`.
    pub admissions: i64,
    pub admissions_estimated: bool,
    /// Admission lag (creation minus occurrence) of the sampled scheduler runs (`origin` cron;
    /// a backfill's or a manual run's lag says nothing of the replicas), median and 99th
    /// percentile; `None` when the bucket has none.
    pub lag_p50_ms: Option<i64>,
    pub lag_p99_ms: Option<i64>,
    /// Occurrences passed over by the misfire records written in the bucket (at most
    /// [`TREND_SAMPLE`] records read).
    pub misfires: i64,
}

/// The trends over the window ending at `now_ms`, oldest bucket first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Trends {
    pub now_ms: i64,
    pub window_ms: i64,
    pub bucket_ms: i64,
    pub buckets: Vec<TrendBucket>,
}

// The window [now - $1, now) cut into buckets of $2 ms, each into slices of $4 ms; in each slice
// the first $3 runs by creation time (a range of the runs_created index) with their lag. A
// slice's admissions are its count, or, when its sample filled, the sample's rate over the time
// from the slice's start to its last sampled run, times the slice. Per bucket: the slices' sum,
// whether any was extrapolated, the lag percentiles of the scheduler's own runs sampled, and the
// occurrences of its first $5 misfire records by recording time (misfires_recorded).
const TRENDS: &str = "WITH clock AS MATERIALIZED (
        SELECT now_ms() AS now_ms
    ), slices AS MATERIALIZED (
        SELECT b, c.now_ms - $1::bigint + b * $2::bigint + s * $4::bigint AS lo
        FROM clock c, generate_series(0, $1::bigint / $2::bigint - 1) b,
             generate_series(0, $2::bigint / $4::bigint - 1) s
    ), sample AS MATERIALIZED (
        SELECT sl.b, sl.lo, r.created_at_ms, r.lag_ms, r.origin
        FROM slices sl
        CROSS JOIN LATERAL (
            SELECT created_at_ms, created_at_ms - scheduled_for_ms AS lag_ms, origin
            FROM runs
            WHERE created_at_ms >= sl.lo AND created_at_ms < sl.lo + $4::bigint
            ORDER BY created_at_ms LIMIT $3) r
    ), per_slice AS (
        SELECT b, count(*) >= $3 AS filled,
               CASE WHEN count(*) >= $3
                    THEN count(*) * $4::bigint / greatest(max(created_at_ms) - lo + 1, 1)
                    ELSE count(*) END AS admissions
        FROM sample GROUP BY b, lo
    ), per_bucket AS (
        SELECT b, sum(admissions)::bigint AS admissions, bool_or(filled) AS estimated
        FROM per_slice GROUP BY b
    ), lags AS (
        SELECT b,
               percentile_disc(0.5) WITHIN GROUP (ORDER BY lag_ms)
                   FILTER (WHERE origin = 'cron') AS p50,
               percentile_disc(0.99) WITHIN GROUP (ORDER BY lag_ms)
                   FILTER (WHERE origin = 'cron') AS p99
        FROM sample GROUP BY b
    ), buckets AS (
        SELECT b, c.now_ms - $1::bigint + b * $2::bigint AS lo
        FROM clock c, generate_series(0, $1::bigint / $2::bigint - 1) b
    )
    SELECT (SELECT now_ms FROM clock) AS now_ms, k.lo,
           coalesce(p.admissions, 0) AS admissions, coalesce(p.estimated, false) AS estimated,
           l.p50, l.p99, m.occurrences
    FROM buckets k
    LEFT JOIN per_bucket p ON p.b = k.b
    LEFT JOIN lags l ON l.b = k.b
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(occurrences), 0)::bigint AS occurrences
        FROM (SELECT occurrences FROM misfires
              WHERE recorded_at_ms >= k.lo AND recorded_at_ms < k.lo + $2::bigint
              LIMIT $5) sample) m
    ORDER BY k.b";

/// The trends over the last `window_ms`, in [`TREND_BUCKETS`] buckets (see the module comment
/// for what each reads).
pub async fn trends(client: &impl GenericClient, window_ms: i64) -> Result<Trends, StoreError> {
    let slice_ms = (window_ms / (TREND_BUCKETS * TREND_SLICES)).max(1);
    let bucket_ms = slice_ms * TREND_SLICES;
    let window_ms = bucket_ms * TREND_BUCKETS;
    let rows = client
        .query(
            TRENDS,
            &[
                &window_ms,
                &bucket_ms,
                &TREND_SLICE_SAMPLE,
                &slice_ms,
                &TREND_SAMPLE,
            ],
        )
        .await?;
    let mut now_ms = 0;
    let buckets = rows
        .iter()
        .map(|row| {
            now_ms = row.col("now_ms")?;
            Ok(TrendBucket {
                start_ms: row.col("lo")?,
                admissions: row.col("admissions")?,
                admissions_estimated: row.col("estimated")?,
                lag_p50_ms: row.col("p50")?,
                lag_p99_ms: row.col("p99")?,
                misfires: row.col("occurrences")?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(Trends {
        now_ms,
        window_ms,
        bucket_ms,
        buckets,
    })
}

// What an outage is decided from (core::outage), at one database instant: the claimable rows
// whose cursor is not yet set or is past (claimed or not; a row no replica has initialized waits
// for one as much as an overdue row does), at most $1, from two ranges of the claimable-order
// index (the uninitialized rows, then the most overdue), so that the read stops at $1 however
// many rows are waiting; how long the oldest cursor has waited; how many are later than their
// trigger's misfire grace plus $2 (each trigger probed by its key); and the runs created in the
// last minute (runs_created, newest first), counted up to $1 (the outage asks only whether there
// were any); and whether a replica ever ran here, from facts the registry's forgetting (after a
// replica's --forget-stale-after) does not erase: any registry row still stored, forgotten or
// not, or a claimable row whose cursor a replica initialized (the head of the non-NULL range of
// the claimable-order index). `now_ms()` is written in each condition rather than read once from a CTE: the
// planner then sees an index condition it can bound (with the clock in a CTE it took a
// sequential scan of 100,000 schedule rows and of the runs). One statement's now_ms() is one
// value. The order is the index's, NULLS FIRST included, or the planner sorts instead.
const OUTAGE_FACTS: &str = "WITH due AS MATERIALIZED (
        (SELECT s.project_id, s.trigger_id, s.next_fire_at_ms
         FROM trigger_schedules s
         WHERE s.claimable AND s.next_fire_at_ms IS NULL
         LIMIT $1)
        UNION ALL
        (SELECT s.project_id, s.trigger_id, s.next_fire_at_ms
         FROM trigger_schedules s
         WHERE s.claimable AND s.next_fire_at_ms <= now_ms()
         ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id
         LIMIT $1)
    )
    SELECT least((SELECT count(*) FROM due), $1) AS due_rows,
        (SELECT now_ms() - min(next_fire_at_ms) FROM due) AS oldest_due_ms,
        (SELECT count(*) FROM due d
         WHERE now_ms() - d.next_fire_at_ms > $2 + (
             SELECT t.misfire_grace_ms FROM triggers t
             WHERE t.project_id = d.project_id AND t.trigger_id = d.trigger_id))
            AS overdue_beyond_grace,
        (SELECT count(*) FROM (SELECT 1 FROM runs WHERE created_at_ms > now_ms() - 60000
                               ORDER BY created_at_ms DESC LIMIT $1) r)
            AS admissions_last_minute,
        EXISTS (SELECT 1 FROM replicas)
            OR EXISTS (SELECT 1 FROM trigger_schedules s
                       WHERE s.claimable AND s.next_fire_at_ms IS NOT NULL) AS ever_ran";

/// The facts `core::outage::classify` decides from, with the replicas counted from `replicas`
/// (the registry as [`top_summary`] read it). The due count and the admissions of the last minute
/// stop at [`OUTAGE_DUE_CAP`].
pub async fn outage_facts(
    client: &impl GenericClient,
    replicas: &[ReplicaView],
) -> Result<OutageFacts, StoreError> {
    Ok(with_replicas(outage_counts(client).await?, replicas))
}

/// The counts of [`OUTAGE_FACTS`], the replicas not yet counted.
async fn outage_counts(client: &impl GenericClient) -> Result<OutageFacts, StoreError> {
    let row = client
        .query_one(OUTAGE_FACTS, &[&OUTAGE_DUE_CAP, &GRACE_SLACK_MS])
        .await?;
    Ok(OutageFacts {
        live_replicas: 0,
        registered_replicas: 0,
        ever_ran: row.col("ever_ran")?,
        due_rows: row.col("due_rows")?,
        overdue_beyond_grace: row.col("overdue_beyond_grace")?,
        oldest_due_ms: row.col("oldest_due_ms")?,
        admissions_last_minute: row.col("admissions_last_minute")?,
    })
}

fn with_replicas(facts: OutageFacts, replicas: &[ReplicaView]) -> OutageFacts {
    let live = replicas
        .iter()
        .filter(|r| r.liveness == qlsched_core::Liveness::Live)
        .count();
    OutageFacts {
        live_replicas: i64::try_from(live).unwrap_or(i64::MAX),
        registered_replicas: i64::try_from(replicas.len()).unwrap_or(i64::MAX),
        ..facts
    }
}

/// How many rows of each list [`snapshot`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotLimits {
    /// Schedule rows from the head of the claim order.
    pub schedules: i64,
    /// Held claims, valid or expired.
    pub claims: i64,
    /// Newest admissions.
    pub recent: i64,
    /// The trends' window.
    pub trend_window_ms: i64,
    /// Newest misfire records (in retention), audit rows and runs with their origin, for the
    /// view that lists them; 0 reads none.
    pub misfire_records: i64,
    pub audit: i64,
    pub runs: i64,
}

/// The dashboard's rows at one database instant (see [`snapshot`]).
#[derive(Debug, Clone)]
pub struct TopRows {
    pub summary: TopSummary,
    /// The most urgent schedule rows (claim order), each with its pause.
    pub schedules: Vec<ScheduleRow>,
    /// Held claims (valid or expired) with their full fences.
    pub claims: Vec<ClaimView>,
    /// The newest admissions.
    pub recent: Vec<RunView>,
    /// Misfire records still in retention of each loaded schedule row's current revision; rows
    /// without one are absent.
    pub misfires: Vec<(TriggerName, i64)>,
    pub trends: Trends,
    pub outage: OutageFacts,
    /// The lists [`SnapshotLimits`] asked for, newest first (empty when not asked).
    pub misfire_records: Vec<misfires::MisfireRecord>,
    pub audit: Vec<read::AuditView>,
    pub runs: Vec<read::RunRow>,
}

/// Reads the dashboard's rows, inside a REPEATABLE READ READ ONLY transaction the caller opened
/// ([`crate::Store::snapshot_within`]). The list statements run pipelined in it, so counts,
/// owners, claims, schedules and admissions describe the same instant; the misfire counts follow
/// in the same transaction, for the schedule rows read.
pub async fn snapshot(
    reads: &tokio_postgres::Client,
    limits: SnapshotLimits,
) -> Result<TopRows, StoreError> {
    let (summary, schedules, claims, recent, trends, outage) = tokio::join!(
        top_summary(reads),
        read::urgent_schedules(reads, limits.schedules),
        read::claims(reads, None, false, limits.claims),
        read::runs(reads, None, None, limits.recent),
        trends(reads, limits.trend_window_ms),
        outage_counts(reads),
    );
    let (summary, schedules, claims, recent, trends) =
        (summary?, schedules?, claims?, recent?, trends?);
    // The lists of the view on screen, each by its index, newest first.
    let (misfire_records, audit, runs) = tokio::join!(
        async {
            match limits.misfire_records {
                0 => Ok(Vec::new()),
                n => misfires::list(reads, None, Some(MISFIRE_RETENTION_MS), n).await,
            }
        },
        async {
            match limits.audit {
                0 => Ok(Vec::new()),
                n => read::audit(reads, None, n).await,
            }
        },
        async {
            match limits.runs {
                0 => Ok(Vec::new()),
                n => read::runs_with_origin(reads, None, None, n).await,
            }
        },
    );
    let (misfire_records, audit, runs) = (misfire_records?, audit?, runs?);
    let outage = with_replicas(outage?, &summary.replicas);
    // Misfire records of the loaded rows' current revisions: one grouped read, index-bounded.
    let keys: Vec<(&str, &str, i64)> = schedules
        .iter()
        .map(|row| {
            (
                row.project_id.as_str(),
                row.trigger_id.as_str(),
                row.trigger_revision,
            )
        })
        .collect();
    let misfires = misfires::counts(reads, &keys, MISFIRE_RETENTION_MS).await?;
    Ok(TopRows {
        summary,
        schedules,
        claims,
        recent,
        misfires,
        trends,
        outage,
        misfire_records,
        audit,
        runs,
    })
}

super::statements::statements! {
    TOP_COUNTS: Observer,
    TRENDS: Observer,
    OUTAGE_FACTS: Observer,
}
