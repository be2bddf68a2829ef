//! How many schedule rows a replica claims in one round (docs/DESIGN.md §4.9): pinned by
//! `--batch N`, or, with no flag, following the backlog.
//!
//! A round costs two round trips and two commits (the claim, then the admission) whatever its
//! size, so a small batch wastes them when many rows are due at once (100,000 triggers on the
//! minute take hundreds of rounds of 16), and a large one holds rows longer than it needs when
//! the cluster is quiet: every claimed row waits for the whole batch's admission, and a replica
//! that dies holding them delays all of them by a lease. The rule here grows the batch while the
//! claim comes back full, which says more rows were due behind the ones it took, and shrinks it
//! while rounds come back mostly empty; it never lets a round hold more rows than the replica
//! admitted in a quarter of its lease, measured on its own last round, so that a slow server
//! cannot push a round's claims past their expiry.

use std::fmt;
use std::time::Duration;

/// The smallest adaptive batch, and the batch of a quiet cluster: the long-standing default, so
/// a small cluster claims as it always did.
pub const MIN_ADAPTIVE_BATCH: u16 = 16;
/// The hard cap on claims per round, pinned or adaptive: one round's claims must fit one short
/// statement and one lease.
pub const MAX_BATCH: u16 = 256;

/// The share of the lease one round's admission may take at most, by the replica's own
/// measure: the rest is room for a retry, a slow commit and the release, before the claims that
/// the admission rests on could expire.
const LEASE_SHARE: u32 = 4;

/// Claims per round: what `--batch` says, or the adaptive rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Batch {
    /// No `--batch`: follow the backlog between [`MIN_ADAPTIVE_BATCH`] and [`MAX_BATCH`].
    #[default]
    Adaptive,
    /// `--batch N`: always N (1..=[`MAX_BATCH`]).
    Pinned(u16),
}

impl Batch {
    /// The batch of the first round.
    pub fn initial(self) -> u16 {
        match self {
            Batch::Adaptive => MIN_ADAPTIVE_BATCH,
            Batch::Pinned(n) => n,
        }
    }
}

impl fmt::Display for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Batch::Adaptive => write!(f, "adaptive ({MIN_ADAPTIVE_BATCH}..={MAX_BATCH})"),
            Batch::Pinned(n) => write!(f, "{n}"),
        }
    }
}

/// As JSON: the pinned number, or `"adaptive"`.
impl serde::Serialize for Batch {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Batch::Adaptive => serializer.serialize_str("adaptive"),
            Batch::Pinned(n) => serializer.serialize_u16(*n),
        }
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Batch {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Batch".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "--batch, or adaptive (no --batch: 16 to 256, following the backlog)",
            "anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "enum": ["adaptive"]}]
        })
    }
}

/// What one round did with its batch, for the next round's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundLoad {
    /// The batch the round claimed with.
    pub batch: u16,
    /// Rows it claimed.
    pub claimed: usize,
    /// How long deciding and admitting them took.
    pub admit_time: Duration,
    /// Whether the server refused a row of it (the round counts as failed): the batch halves,
    /// whatever the claim, so a fault that fails batches is met with smaller ones.
    pub failed: bool,
}

/// The batch the round after `last` claims with, under `policy`, for claims of `lease`.
///
/// Adaptive: a failed round halves the batch, a full claim doubles it (more rows were due behind
/// it), a claim of less than a quarter of it halves it (the backlog is gone), anything between
/// keeps it; kept within [`MIN_ADAPTIVE_BATCH`]..=[`MAX_BATCH`], and then capped by what the
/// replica admitted in a quarter of the lease at its last round's speed, which the floor does not
/// override: on a server that slow, fewer rows a round is what keeps the claims inside their
/// lease (never fewer than one). A pinned batch never changes.
pub fn next_batch(policy: Batch, last: RoundLoad, lease: Duration) -> u16 {
    let Batch::Adaptive = policy else {
        return policy.initial();
    };
    let current = last.batch.clamp(MIN_ADAPTIVE_BATCH, MAX_BATCH);
    let wanted = if last.failed {
        current / 2
    } else if last.claimed >= usize::from(current) {
        current.saturating_mul(2)
    } else if last.claimed < usize::from(current / 4) {
        current / 2
    } else {
        current
    };
    let affordable = affordable(last, lease);
    wanted
        .clamp(MIN_ADAPTIVE_BATCH, MAX_BATCH)
        .min(affordable)
        .max(1)
}

/// Rows the replica can admit within its share of the lease, at its last round's speed;
/// unbounded when the last round admitted nothing (there is no speed to go by).
fn affordable(last: RoundLoad, lease: Duration) -> u16 {
    if last.claimed == 0 || last.admit_time.is_zero() {
        return MAX_BATCH;
    }
    let per_row = last.admit_time / u32::try_from(last.claimed).unwrap_or(u32::MAX);
    if per_row.is_zero() {
        return MAX_BATCH;
    }
    let budget = lease / LEASE_SHARE;
    let rows = budget.as_nanos() / per_row.as_nanos();
    u16::try_from(rows).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(30);

    fn after(batch: u16, claimed: usize, admit_ms: u64) -> u16 {
        next_batch(
            Batch::Adaptive,
            RoundLoad {
                batch,
                claimed,
                admit_time: Duration::from_millis(admit_ms),
                failed: false,
            },
            LEASE,
        )
    }

    #[test]
    fn a_full_claim_doubles_the_batch_up_to_the_cap() {
        assert_eq!(after(16, 16, 20), 32);
        assert_eq!(after(32, 32, 40), 64);
        assert_eq!(after(128, 128, 150), 256);
        assert_eq!(after(256, 256, 300), 256, "never past the cap");
    }

    #[test]
    fn a_mostly_empty_claim_halves_it_down_to_the_floor() {
        assert_eq!(after(256, 10, 10), 128);
        assert_eq!(after(64, 15, 15), 32);
        assert_eq!(after(16, 0, 0), 16, "never under the floor");
        assert_eq!(after(32, 3, 3), 16);
    }

    #[test]
    fn a_claim_between_a_quarter_and_full_keeps_it() {
        assert_eq!(after(64, 16, 20), 64);
        assert_eq!(after(64, 63, 80), 64);
    }

    #[test]
    fn a_slow_server_caps_the_batch_at_a_quarter_of_the_lease() {
        // 64 rows in 6 s: 93.75 ms a row; a quarter of 30 s holds 80 of them.
        assert_eq!(after(64, 64, 6_000), 80);
        // 16 rows in 8 s: 500 ms a row, 15 rows in 7.5 s: under the floor, the lease wins.
        assert_eq!(after(16, 16, 8_000), 15);
        // 2 rows in 30 s: one row a quarter of the lease, never none.
        assert_eq!(after(16, 2, 30_000), 1);
        // A short lease: 2 s, 10 ms a row: 50 rows in 500 ms.
        let short = next_batch(
            Batch::Adaptive,
            RoundLoad {
                batch: 64,
                claimed: 64,
                admit_time: Duration::from_millis(640),
                failed: false,
            },
            Duration::from_secs(2),
        );
        assert_eq!(short, 50);
    }

    #[test]
    fn a_failed_round_halves_the_batch_even_when_its_claim_was_full() {
        let failed = |batch: u16, claimed: usize| {
            next_batch(
                Batch::Adaptive,
                RoundLoad {
                    batch,
                    claimed,
                    admit_time: Duration::from_millis(50),
                    failed: true,
                },
                LEASE,
            )
        };
        assert_eq!(failed(256, 256), 128);
        assert_eq!(failed(64, 20), 32);
        assert_eq!(failed(16, 16), MIN_ADAPTIVE_BATCH, "down to the floor");
    }

    #[test]
    fn a_pinned_batch_never_moves() {
        for claimed in [0, 1, 8, 200] {
            let next = next_batch(
                Batch::Pinned(8),
                RoundLoad {
                    batch: 8,
                    claimed,
                    admit_time: Duration::from_secs(20),
                    failed: false,
                },
                LEASE,
            );
            assert_eq!(next, 8);
        }
    }

    #[test]
    fn a_backlog_reaches_the_cap_in_four_rounds_and_a_quiet_cluster_returns_to_the_floor() {
        let mut batch = Batch::Adaptive.initial();
        let mut rounds = 0;
        while batch < MAX_BATCH {
            batch = after(batch, usize::from(batch), u64::from(batch));
            rounds += 1;
        }
        assert_eq!(rounds, 4, "16 → 32 → 64 → 128 → 256");
        let mut quiet = 0;
        while batch > MIN_ADAPTIVE_BATCH {
            batch = after(batch, 1, 1);
            quiet += 1;
        }
        assert_eq!(quiet, 4);
    }

    #[test]
    fn shown_and_serialized() {
        assert_eq!(Batch::Adaptive.to_string(), "adaptive (16..=256)");
        assert_eq!(Batch::Pinned(64).to_string(), "64");
        assert_eq!(
            serde_json::to_string(&Batch::Adaptive).unwrap_or_default(),
            "\"adaptive\""
        );
        assert_eq!(
            serde_json::to_string(&Batch::Pinned(64)).unwrap_or_default(),
            "64"
        );
    }
}
