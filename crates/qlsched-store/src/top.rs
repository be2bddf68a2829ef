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
//! The trends ([`trends`]) are read from the rollup the replicas write with their heartbeats,
//! `replica_minutes` (migration 0015; `replicas::HEARTBEAT`, `core::minutes`): one row per
//! replica and minute of database time, so they are exact and there the moment `top` opens, and a
//! refresh reads only its window's range of the primary key (at most 1,440 rows a replica for the
//! day's window), whatever the size of `runs`. Admissions, misfires, fence losses and failed
//! rounds are sums; the lag percentiles are read from the bucket's merged lag histograms.
//! Manual admissions (`fire`, `backfill`) are no replica's and are not in them. The outage facts
//! ([`outage_facts`]) are read from what the database holds: the schedule rows, and runs by their
//! creation time (the `runs_created` index).
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
use qlsched_core::minutes::{LagHistogram, MINUTE_MS};
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

/// Buckets a trend window is cut into at most: one bar each. A bar is at least the rollup's
/// minute, so the shortest window has fewer.
pub const TREND_BUCKETS: i64 = 60;
/// Due rows the outage facts look at, most overdue first: past it, the count is a lower bound.
pub const OUTAGE_DUE_CAP: i64 = qlsched_core::outage::COUNT_CAP;

/// One bar of the trends: what the replicas did in `[start_ms, start_ms + bucket_ms)`, summed
/// over their rows of `replica_minutes` (the minutes of their claims). Manual admissions (`fire`,
/// `backfill`) are no replica's and are not counted (`top`'s runs view lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TrendBucket {
    pub start_ms: i64,
    /// Runs the replicas admitted.
    pub admissions: i64,
    /// Admission lag (claim time minus occurrence) of those runs, median and 99th percentile,
    /// from their merged histogram (`core::minutes`: at most half above the true value, never
    /// below it, never above the largest lag); `None` when the bucket has none.
    pub lag_p50_ms: Option<i64>,
    pub lag_p99_ms: Option<i64>,
    /// Occurrences passed over by the misfire records the replicas wrote.
    pub misfires: i64,
    pub fence_losses: i64,
    pub failed_rounds: i64,
}

/// The trends over the window ending at `now_ms`, oldest bucket first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Trends {
    pub now_ms: i64,
    pub window_ms: i64,
    pub bucket_ms: i64,
    pub buckets: Vec<TrendBucket>,
    /// The first bucket that was read; those before it were not (zero until
    /// [`Trends::keeping`] fills them from an earlier read).
    pub read_from_ms: i64,
}

/// How long after a bucket ends the dashboard reads it again: a replica's figures for a minute
/// reach the table with its next heartbeat (a cadence later, a second by default), so a bucket
/// that ended this long ago is settled and kept from the read before, not read again. Figures
/// later than that (a replica whose heartbeats failed for longer, or a cadence above a minute)
/// show when `top` opens again or the window changes.
pub const TREND_SETTLE_MS: i64 = 120_000;

impl Trends {
    /// Where the next read over the same window may start: the first bucket not yet settled
    /// ([`TREND_SETTLE_MS`]) at this read.
    pub fn settled_before_ms(&self) -> i64 {
        self.buckets
            .iter()
            .find(|b| b.start_ms + self.bucket_ms > self.now_ms - TREND_SETTLE_MS)
            .map_or(self.now_ms, |b| b.start_ms)
    }

    /// The minute a read after this one may start from, over a window of `window_ms`: where the
    /// buckets this read holds are no longer settled, or 0 (the whole window) for another window.
    pub fn read_next_from(&self, window_ms: i64) -> i64 {
        let (bucket_ms, count) = trend_buckets(window_ms);
        if bucket_ms == self.bucket_ms && count == i64::try_from(self.buckets.len()).unwrap_or(0) {
            self.settled_before_ms()
        } else {
            0
        }
    }

    /// These trends with the buckets they did not read (before `read_from_ms`) taken from
    /// `earlier`, the read they started from ([`Trends::read_next_from`]).
    pub fn keeping(mut self, earlier: &Trends) -> Trends {
        if earlier.bucket_ms != self.bucket_ms {
            return self;
        }
        for bucket in &mut self.buckets {
            if bucket.start_ms >= self.read_from_ms {
                continue;
            }
            if let Some(kept) = earlier
                .buckets
                .iter()
                .find(|b| b.start_ms == bucket.start_ms)
            {
                *bucket = *kept;
            }
        }
        self
    }
}

// The replicas' minutes in $2 buckets of $1 ms, the last bucket the one now is in (buckets start
// on multiples of $1 since the epoch, so a bar does not shift between refreshes), from minute $3
// on (the dashboard keeps the buckets it read before that, see `Trends::keeping`): one range of
// the primary key (minute_ms first), summed per bucket, the lag histograms bucket by bucket.
// `now_ms()` is written in the condition rather than read from a CTE, so that the planner sees an
// index condition it can bound (one statement's now_ms() is one value). The one-row left join
// returns the clock when no replica wrote anything in the window.
const TRENDS: &str = "SELECT now_ms() AS now_ms,
        now_ms() - now_ms() % $1::bigint - ($2::bigint - 1) * $1::bigint AS lo, g.*
    FROM (SELECT 1) one
    LEFT JOIN (
        SELECT (m.minute_ms - (now_ms() - now_ms() % $1::bigint - ($2::bigint - 1) * $1::bigint))
                   / $1::bigint AS b,
               sum(m.admissions)::bigint AS admissions,
               sum(m.occurrences_passed_over)::bigint AS passed_over,
               sum(m.fence_losses)::bigint AS fence_losses,
               sum(m.failed_rounds)::bigint AS failed_rounds,
               max(m.lag_max_ms) AS lag_max_ms,
               ARRAY[
                 sum(m.lag_counts[1]), sum(m.lag_counts[2]), sum(m.lag_counts[3]), sum(m.lag_counts[4]), sum(m.lag_counts[5]),
                 sum(m.lag_counts[6]), sum(m.lag_counts[7]), sum(m.lag_counts[8]), sum(m.lag_counts[9]), sum(m.lag_counts[10]),
                 sum(m.lag_counts[11]), sum(m.lag_counts[12]), sum(m.lag_counts[13]), sum(m.lag_counts[14]), sum(m.lag_counts[15]),
                 sum(m.lag_counts[16]), sum(m.lag_counts[17]), sum(m.lag_counts[18]), sum(m.lag_counts[19]), sum(m.lag_counts[20]),
                 sum(m.lag_counts[21]), sum(m.lag_counts[22]), sum(m.lag_counts[23]), sum(m.lag_counts[24]), sum(m.lag_counts[25]),
                 sum(m.lag_counts[26]), sum(m.lag_counts[27]), sum(m.lag_counts[28]), sum(m.lag_counts[29]), sum(m.lag_counts[30]),
                 sum(m.lag_counts[31]), sum(m.lag_counts[32]), sum(m.lag_counts[33]), sum(m.lag_counts[34]), sum(m.lag_counts[35]),
                 sum(m.lag_counts[36]), sum(m.lag_counts[37]), sum(m.lag_counts[38]), sum(m.lag_counts[39]), sum(m.lag_counts[40])
               ] AS lag_counts
        FROM replica_minutes m
        WHERE m.minute_ms >= now_ms() - now_ms() % $1::bigint - ($2::bigint - 1) * $1::bigint
          AND m.minute_ms >= $3::bigint
          AND m.minute_ms < now_ms() - now_ms() % $1::bigint + $1::bigint
        GROUP BY 1
    ) g ON true
    ORDER BY g.b";

/// The bar and the number of bars of a trend over `window_ms`: [`TREND_BUCKETS`] bars of a
/// whole number of minutes, or, for a window shorter than that many minutes, a bar a minute.
pub fn trend_buckets(window_ms: i64) -> (i64, i64) {
    let bucket_ms = (window_ms / TREND_BUCKETS / MINUTE_MS).max(1) * MINUTE_MS;
    (bucket_ms, (window_ms / bucket_ms).clamp(1, TREND_BUCKETS))
}

/// The trends over the last `window_ms` (see [`TRENDS`] and [`trend_buckets`]), the buckets
/// before `from_ms` not read (0 reads them all).
pub async fn trends(
    client: &impl GenericClient,
    window_ms: i64,
    from_ms: i64,
) -> Result<Trends, StoreError> {
    let (bucket_ms, count) = trend_buckets(window_ms);
    let rows = client
        .query(TRENDS, &[&bucket_ms, &count, &from_ms])
        .await?;
    let mut now_ms = 0;
    let mut lo = 0;
    let mut buckets: Vec<TrendBucket> = Vec::new();
    let mut filled = std::collections::BTreeMap::new();
    for row in &rows {
        now_ms = row.col("now_ms")?;
        lo = row.col("lo")?;
        let Some(b) = row.col::<Option<i64>>("b")? else {
            continue;
        };
        let counts: Vec<i64> = row.col("lag_counts")?;
        let mut lag = LagHistogram {
            max_ms: row.col("lag_max_ms")?,
            ..LagHistogram::default()
        };
        for (into, count) in lag.counts.iter_mut().zip(counts) {
            *into = count;
        }
        filled.insert(
            b,
            TrendBucket {
                start_ms: 0,
                admissions: row.col("admissions")?,
                lag_p50_ms: lag.quantile(0.5),
                lag_p99_ms: lag.quantile(0.99),
                misfires: row.col("passed_over")?,
                fence_losses: row.col("fence_losses")?,
                failed_rounds: row.col("failed_rounds")?,
            },
        );
    }
    for b in 0..count {
        let start_ms = lo + b * bucket_ms;
        buckets.push(match filled.remove(&b) {
            Some(bucket) => TrendBucket { start_ms, ..bucket },
            None => TrendBucket {
                start_ms,
                admissions: 0,
                lag_p50_ms: None,
                lag_p99_ms: None,
                misfires: 0,
                fence_losses: 0,
                failed_rounds: 0,
            },
        });
    }
    Ok(Trends {
        now_ms,
        window_ms: bucket_ms * count,
        bucket_ms,
        buckets,
        read_from_ms: from_ms.max(lo),
    })
}

/// The plan PostgreSQL chooses for the trends' statement over `window_ms` on this session now, as
/// `EXPLAIN` prints it. For the test that holds it to the primary key's range.
#[doc(hidden)]
pub async fn explain_trends(
    client: &impl GenericClient,
    window_ms: i64,
) -> Result<Vec<String>, StoreError> {
    let (bucket_ms, count) = trend_buckets(window_ms);
    let statement = format!("EXPLAIN {TRENDS}");
    let rows = client
        .query(statement.as_str(), &[&bucket_ms, &count, &0i64])
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
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
    /// The trends' window, and the minute their read starts from (`Trends::read_next_from`;
    /// 0 reads the whole window).
    pub trend_window_ms: i64,
    pub trend_from_ms: i64,
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
        trends(reads, limits.trend_window_ms, limits.trend_from_ms),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn trends(now_ms: i64, read_from_ms: i64, admissions: i64) -> Trends {
        let (bucket_ms, count) = trend_buckets(3_600_000);
        let lo = now_ms - now_ms % bucket_ms - (count - 1) * bucket_ms;
        Trends {
            now_ms,
            window_ms: bucket_ms * count,
            bucket_ms,
            buckets: (0..count)
                .map(|b| TrendBucket {
                    start_ms: lo + b * bucket_ms,
                    admissions: if lo + b * bucket_ms >= read_from_ms {
                        admissions
                    } else {
                        0
                    },
                    lag_p50_ms: None,
                    lag_p99_ms: None,
                    misfires: 0,
                    fence_losses: 0,
                    failed_rounds: 0,
                })
                .collect(),
            read_from_ms: read_from_ms.max(lo),
        }
    }

    #[test]
    fn a_bar_is_at_least_a_minute() {
        assert_eq!(trend_buckets(900_000), (60_000, 15));
        assert_eq!(trend_buckets(3_600_000), (60_000, 60));
        assert_eq!(trend_buckets(86_400_000), (1_440_000, 60));
    }

    /// The next read starts at the first bucket not settled two minutes after its end, and the
    /// buckets before it are kept from the read before, whose window they are still in.
    #[test]
    fn settled_buckets_are_kept_and_the_rest_read_again() {
        let now = 1_796_212_830_000; // 30 s into a minute
        let first = trends(now, 0, 5);
        let from = first.read_next_from(3_600_000);
        // The minute in progress and the two before it are not settled.
        assert_eq!(from, now - now % 60_000 - 2 * 60_000);
        assert_eq!(
            first.read_next_from(86_400_000),
            0,
            "another window reads it all"
        );
        let later = trends(now + 60_000, from, 7).keeping(&first);
        let admissions: Vec<i64> = later.buckets.iter().map(|b| b.admissions).collect();
        // The window moved a minute on: the three buckets read before and the new one are read.
        assert_eq!(&admissions[..56], &[5; 56]);
        assert_eq!(&admissions[56..], &[7; 4]);
    }
}
