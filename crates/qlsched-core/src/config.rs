//! The coordinator's settings and their bounds (docs/DESIGN.md §4.9). `run` validates them
//! before it opens a connection, so an out-of-range value never touches the database: a flag's
//! is a usage error there (exit 2), one from `QLSCHED_OWNER` a configuration error (78).

use std::time::Duration;

use super::duration::format_duration;
use super::error::CoreError;

use super::batch::{Batch, MAX_BATCH};

/// How long misfire records are kept, by the database time they were recorded at: replicas
/// delete older ones (a bound on the table's size), and the occurrence accounting check reaches
/// back no further, since the records that account for older occurrences may be gone.
pub const MISFIRE_RETENTION_MS: i64 = 7 * 24 * 3_600_000;
const MAX_OWNER_CHARS: usize = 200;

/// How long after its last heartbeat the registry forgets a replica that never stopped (killed,
/// its host lost) unless `run --forget-stale-after` says otherwise: long enough for an operator
/// paged by the stalled-replica alert to see it stale, short enough that a week of restarts on
/// new hosts does not crowd `inspect replicas`, `top` and the metrics with the dead.
pub const FORGET_STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The bounds of `run --forget-stale-after`: past the lease plus the cadence (when a replica
/// becomes stale, its claims expired), at least a minute, at most the week earlier releases
/// kept every dead replica.
pub fn check_forget_stale_after(
    forget: std::time::Duration,
    config: &CoordinatorConfig,
) -> Result<(), String> {
    let floor = (config.lease + config.cadence).max(std::time::Duration::from_secs(60));
    let ceiling = std::time::Duration::from_secs(7 * 24 * 3600);
    if forget < floor || forget > ceiling {
        return Err(format!(
            "--forget-stale-after must be at least a minute and more than --lease plus --cadence \
             ({}s), and at most 7d",
            floor.as_secs()
        ));
    }
    Ok(())
}

/// How one replica claims and admits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorConfig {
    /// The name written into `claim_owner`; the caller chooses it (e.g. host and process id).
    pub owner: String,
    /// Claims per round: adaptive, or pinned to `1..=MAX_BATCH`.
    pub batch: Batch,
    /// How long a claim stays valid; a crashed replica's rows become claimable after this.
    pub lease: Duration,
    /// The pause between rounds that did not use their whole budget.
    pub cadence: Duration,
    /// How long stop waits for the round in flight.
    pub drain_timeout: Duration,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        Self {
            owner: String::new(),
            batch: Batch::Adaptive,
            lease: Duration::from_secs(30),
            cadence: Duration::from_secs(1),
            drain_timeout: Duration::from_secs(10),
        }
    }
}

impl CoordinatorConfig {
    /// Checks every bound, reporting the first field out of range.
    ///
    /// # Errors
    ///
    /// [`CoreError::OutOfBounds`] naming the field, its bounds and the value given.
    pub fn validate(&self) -> Result<(), CoreError> {
        self.validate_owner()?;
        if let Batch::Pinned(n) = self.batch
            && !(1..=MAX_BATCH).contains(&n)
        {
            return Err(CoreError::OutOfBounds {
                field: "batch",
                value: n.to_string(),
                bounds: "1..=256",
            });
        }
        check_duration("lease", self.lease, ms(1_000), ms(3_600_000), "1s..=1h")?;
        check_duration("cadence", self.cadence, ms(10), ms(3_600_000), "10ms..=1h")?;
        check_duration(
            "drain_timeout",
            self.drain_timeout,
            Duration::ZERO,
            ms(600_000),
            "0s..=10m",
        )
    }

    /// The owner is stored, shown in tables and compared in fences; a control character would
    /// corrupt the first two and an unbounded length the index pages.
    fn validate_owner(&self) -> Result<(), CoreError> {
        check_owner(&self.owner)
    }
}

/// A claim owner as replicas write it: 1 to 200 characters, no control characters.
///
/// # Errors
///
/// [`CoreError::OutOfBounds`] for the field `owner`, the value shown escaped and shortened.
pub fn check_owner(owner: &str) -> Result<(), CoreError> {
    let chars = owner.chars().count();
    if (1..=MAX_OWNER_CHARS).contains(&chars) && !owner.chars().any(char::is_control) {
        return Ok(());
    }
    Err(CoreError::OutOfBounds {
        field: "owner",
        value: format!("\"{}\" ({chars} characters)", super::text::clean(owner)),
        bounds: "1..=200 characters without control characters",
    })
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn check_duration(
    field: &'static str,
    value: Duration,
    min: Duration,
    max: Duration,
    bounds: &'static str,
) -> Result<(), CoreError> {
    if (min..=max).contains(&value) {
        return Ok(());
    }
    Err(CoreError::OutOfBounds {
        field,
        value: format_duration(value),
        bounds,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn valid() -> CoordinatorConfig {
        CoordinatorConfig {
            owner: "node-a:1234".into(),
            ..CoordinatorConfig::default()
        }
    }

    fn refused_field(config: &CoordinatorConfig) -> &'static str {
        match config.validate() {
            Err(CoreError::OutOfBounds { field, .. }) => field,
            other => panic!("expected OutOfBounds, got {other:?}"),
        }
    }

    #[test]
    fn defaults_follow_the_design() {
        let d = CoordinatorConfig::default();
        assert_eq!(d.batch, Batch::Adaptive);
        assert_eq!(d.lease, Duration::from_secs(30));
        assert_eq!(d.cadence, Duration::from_secs(1));
        assert_eq!(d.drain_timeout, Duration::from_secs(10));
        assert_eq!(refused_field(&d), "owner", "the caller must set the owner");
        assert!(valid().validate().is_ok());
    }

    #[test]
    fn owner_bounds() {
        let with = |owner: String| CoordinatorConfig { owner, ..valid() };
        assert!(with("a".into()).validate().is_ok());
        assert!(with("é".repeat(200)).validate().is_ok());
        assert_eq!(refused_field(&with("é".repeat(201))), "owner");
        assert_eq!(refused_field(&with(String::new())), "owner");
        assert_eq!(refused_field(&with("a\nb".into())), "owner");
        assert_eq!(refused_field(&with("a\u{7f}".into())), "owner");
    }

    #[test]
    fn batch_bounds() {
        let with = |n| CoordinatorConfig {
            batch: Batch::Pinned(n),
            ..valid()
        };
        assert!(with(1).validate().is_ok());
        assert!(with(MAX_BATCH).validate().is_ok());
        assert_eq!(refused_field(&with(0)), "batch");
        assert_eq!(
            with(300).validate().unwrap_err().to_string(),
            "batch must be 1..=256, got 300"
        );
    }

    #[test]
    fn lease_bounds() {
        let with = |n| CoordinatorConfig {
            lease: ms(n),
            ..valid()
        };
        assert!(with(1_000).validate().is_ok());
        assert!(with(3_600_000).validate().is_ok());
        assert_eq!(refused_field(&with(999)), "lease");
        assert_eq!(refused_field(&with(3_600_001)), "lease");
    }

    #[test]
    fn cadence_bounds() {
        let with = |n| CoordinatorConfig {
            cadence: ms(n),
            ..valid()
        };
        assert!(with(10).validate().is_ok());
        assert!(with(3_600_000).validate().is_ok());
        assert_eq!(refused_field(&with(9)), "cadence");
        assert_eq!(refused_field(&with(3_600_001)), "cadence");
    }

    #[test]
    fn drain_timeout_bounds() {
        let with = |n| CoordinatorConfig {
            drain_timeout: ms(n),
            ..valid()
        };
        assert!(with(0).validate().is_ok());
        assert!(with(600_000).validate().is_ok());
        let err = with(600_001).validate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "drain_timeout must be 0s..=10m, got 600001ms"
        );
        assert!(matches!(err, CoreError::OutOfBounds { .. }), "{err:?}");
    }
}
