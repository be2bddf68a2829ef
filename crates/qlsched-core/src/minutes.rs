//! What a replica did in one minute of database time, as it writes it to the `replica_minutes`
//! table (migration 0015) and as `top`'s trends merge it back: counts, and the admission lag as a
//! fixed log-scale histogram, so that the percentiles of several replicas (and of several
//! minutes) are read from the sum of their histograms rather than guessed from an average of
//! percentiles.
//!
//! The histogram's buckets are fixed ([`LAG_BOUNDS_MS`]): two a doubling, their upper bounds 1, 2,
//! 3, 4, 6, 8, 12, 16, … ms, so a percentile read from it is at most 50% above the true one (a
//! bucket's upper bound over its lower), and never below it; the last bucket holds every lag above
//! 13 minutes. The minute's largest lag is kept beside it, and a percentile never says more than
//! it. The migration checks the length: changing [`LAG_BUCKETS`] is a migration.

use std::collections::BTreeMap;

/// The length of a minute, the rollup's grain.
pub const MINUTE_MS: i64 = 60_000;

/// How long the rows are kept: a week, so that an incident can still be read back from them
/// days later, while the longest trend window is a day. At one row per replica and minute that
/// is 10,080 rows a replica; the trends read only their window's range of the primary key, so
/// the table's size does not slow them.
pub const RETENTION_MS: i64 = 7 * 86_400_000;

/// How many lag buckets a minute has (the table's `lag_counts` array holds exactly these).
pub const LAG_BUCKETS: usize = 40;

/// The upper bound (inclusive) in milliseconds of every bucket but the last, which is open:
/// 2^j for odd index 2j-1, 3·2^(j-1) for even index 2j, and 1 for index 0.
pub const LAG_BOUNDS_MS: [i64; LAG_BUCKETS - 1] = lag_bounds();

const fn lag_bounds() -> [i64; LAG_BUCKETS - 1] {
    let mut bounds = [0i64; LAG_BUCKETS - 1];
    bounds[0] = 1;
    let mut k = 1;
    while k < LAG_BUCKETS - 1 {
        let j = (k as u32).div_ceil(2);
        bounds[k] = if k % 2 == 1 {
            1 << j
        } else {
            3 * (1 << (j - 1))
        };
        k += 1;
    }
    bounds
}

/// The bucket a lag falls in (a negative lag, a clock step, counts as no lag).
pub fn lag_bucket(lag_ms: i64) -> usize {
    LAG_BOUNDS_MS.partition_point(|&bound| bound < lag_ms.max(0))
}

/// The start of the minute `ms` is in.
pub fn minute_of(ms: i64) -> i64 {
    ms - ms.rem_euclid(MINUTE_MS)
}

/// Admission lags counted by bucket, with the largest seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LagHistogram {
    pub counts: [i64; LAG_BUCKETS],
    pub max_ms: Option<i64>,
}

impl Default for LagHistogram {
    fn default() -> Self {
        LagHistogram {
            counts: [0; LAG_BUCKETS],
            max_ms: None,
        }
    }
}

impl LagHistogram {
    pub fn record(&mut self, lag_ms: i64) {
        let lag_ms = lag_ms.max(0);
        self.counts[lag_bucket(lag_ms)] += 1;
        self.max_ms = Some(self.max_ms.map_or(lag_ms, |max| max.max(lag_ms)));
    }

    pub fn merge(&mut self, other: &LagHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine += theirs;
        }
        self.max_ms = match (self.max_ms, other.max_ms) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }

    pub fn total(&self) -> i64 {
        self.counts.iter().sum()
    }

    /// The `q` quantile (0 < q ≤ 1) as the upper bound of the bucket that holds it, and never
    /// more than the largest lag seen; `None` when nothing was counted. As `percentile_disc`:
    /// the smallest value with at least `q` of the lags at or below it.
    pub fn quantile(&self, q: f64) -> Option<i64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        // The rank is at most `total`, which is far below 2^53: the float holds it exactly.
        let rank = ((q * total as f64).ceil() as i64).clamp(1, total);
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                let bound = LAG_BOUNDS_MS.get(bucket).copied();
                return match (bound, self.max_ms) {
                    (Some(bound), Some(max)) => Some(bound.min(max)),
                    (None, max) => max,
                    (bound, None) => bound,
                };
            }
        }
        self.max_ms
    }
}

/// One replica's figures for one minute: what its rounds that claimed in that minute did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MinuteFigures {
    /// Runs admitted.
    pub admissions: i64,
    /// Misfire records written, and the occurrences they passed over.
    pub misfires: i64,
    pub occurrences_passed_over: i64,
    pub fence_losses: i64,
    pub failed_rounds: i64,
    /// Each admitted run's lag: the claim's database time minus the occurrence.
    pub lag: LagHistogram,
}

impl MinuteFigures {
    pub fn merge(&mut self, other: &MinuteFigures) {
        self.admissions += other.admissions;
        self.misfires += other.misfires;
        self.occurrences_passed_over += other.occurrences_passed_over;
        self.fence_losses += other.fence_losses;
        self.failed_rounds += other.failed_rounds;
        self.lag.merge(&other.lag);
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        *self == MinuteFigures::default()
    }
}

/// A replica's figures not yet written, by the start of their minute.
pub type Minutes = BTreeMap<i64, MinuteFigures>;

/// Adds `other` into `into`, minute by minute.
pub fn merge_minutes(into: &mut Minutes, other: &Minutes) {
    for (minute, figures) in other {
        into.entry(*minute).or_default().merge(figures);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_two_a_doubling() {
        assert_eq!(&LAG_BOUNDS_MS[..9], &[1, 2, 3, 4, 6, 8, 12, 16, 24]);
        assert_eq!(LAG_BOUNDS_MS[LAG_BUCKETS - 2], 786_432);
        assert!(LAG_BOUNDS_MS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_lag_falls_in_the_first_bucket_whose_bound_holds_it() {
        assert_eq!(lag_bucket(-5), 0);
        assert_eq!(lag_bucket(0), 0);
        assert_eq!(lag_bucket(1), 0);
        assert_eq!(lag_bucket(2), 1);
        assert_eq!(lag_bucket(5), 4);
        assert_eq!(lag_bucket(6), 4);
        assert_eq!(lag_bucket(7), 5);
        assert_eq!(lag_bucket(786_432), LAG_BUCKETS - 2);
        assert_eq!(lag_bucket(786_433), LAG_BUCKETS - 1);
        assert_eq!(lag_bucket(i64::MAX), LAG_BUCKETS - 1);
    }

    #[test]
    fn quantiles_are_never_below_the_true_one_nor_more_than_half_above() {
        let mut h = LagHistogram::default();
        for lag in 1..=1000 {
            h.record(lag);
        }
        let p50 = h.quantile(0.5).expect("some");
        let p99 = h.quantile(0.99).expect("some");
        assert!((500..=750).contains(&p50), "{p50}");
        // The 99th's bucket ends at 1024, above the largest lag: the largest is said.
        assert_eq!(p99, 1000);
        assert_eq!(LagHistogram::default().quantile(0.5), None);
    }

    #[test]
    fn merged_histograms_give_the_quantiles_of_the_union() {
        let (mut fast, mut slow) = (LagHistogram::default(), LagHistogram::default());
        for _ in 0..99 {
            fast.record(30);
        }
        slow.record(2_500);
        fast.merge(&slow);
        assert_eq!(fast.quantile(0.5), Some(32));
        assert_eq!(fast.quantile(0.99), Some(32));
        assert_eq!(fast.quantile(1.0), Some(2_500));
        assert_eq!(fast.max_ms, Some(2_500));
    }

    #[test]
    fn an_open_bucket_says_the_largest_lag() {
        let mut h = LagHistogram::default();
        h.record(3_600_000);
        assert_eq!(h.quantile(0.5), Some(3_600_000));
    }

    #[test]
    fn minutes_start_on_the_minute() {
        assert_eq!(minute_of(125_000), 120_000);
        assert_eq!(minute_of(120_000), 120_000);
        assert_eq!(minute_of(-1), -60_000);
    }
}
