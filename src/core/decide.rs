//! The misfire decider (docs/DESIGN.md §4.4): given a claimed row's cursor and the database's
//! "now", what happens to it. Pure and clock-free, so the coordinator can run it outside any lock
//! and the manual `claim` command can show an operator the same answer before admitting it.

use std::fmt;
use std::str::FromStr;

use super::cron::CronSchedule;
use super::error::CoreError;

/// What to do when even the latest due occurrence is later than the grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MisfirePolicy {
    /// Advance the cursor; admit nothing.
    Skip,
    /// Admit exactly one occurrence, the latest due one.
    FireOnce,
}

impl MisfirePolicy {
    /// The name stored in `triggers.misfire_policy` and written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::FireOnce => "fire_once",
        }
    }
}

impl fmt::Display for MisfirePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The stored name was neither `skip` nor `fire_once`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown misfire policy \"{0}\": expected skip or fire_once")]
pub struct UnknownMisfirePolicy(pub String);

impl FromStr for MisfirePolicy {
    type Err = UnknownMisfirePolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "skip" => Ok(Self::Skip),
            "fire_once" => Ok(Self::FireOnce),
            other => Err(UnknownMisfirePolicy(other.to_owned())),
        }
    }
}

/// Everything the decision depends on. `now_ms` is the database's clock (docs/DESIGN.md §4.1).
#[derive(Debug, Clone, Copy)]
pub struct DecisionInput<'a> {
    pub schedule: &'a CronSchedule,
    pub policy: MisfirePolicy,
    pub grace_ms: i64,
    /// The row's `next_fire_at_ms`; `None` for a new or re-published trigger.
    pub cursor_ms: Option<i64>,
    pub now_ms: i64,
}

/// The outcome for one claimed row. Every variant carries the cursor to store next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A new cursor for a row that had none; nothing is admitted.
    Initialize { next_fire_at_ms: i64 },
    /// Admit the occurrence `scheduled_for_ms`, `late_ms` after it was due; `misfired` when that is
    /// beyond the grace and only `fire_once` let it through.
    Fire {
        scheduled_for_ms: i64,
        next_fire_at_ms: i64,
        late_ms: i64,
        misfired: bool,
    },
    /// The due occurrence `missed_ms` misfired under `skip`; only the cursor advances.
    Skip {
        missed_ms: i64,
        next_fire_at_ms: i64,
        late_ms: i64,
    },
    /// The cursor is still in the future: nothing is due and the cursor stays. A claim should not
    /// have selected this row; deciding it anyway is harmless.
    NotDue { next_fire_at_ms: i64 },
}

impl Decision {
    /// The cursor to store: always greater than `now_ms`, except for [`Decision::NotDue`], whose
    /// cursor is unchanged and already greater.
    pub fn next_fire_at_ms(&self) -> i64 {
        match *self {
            Self::Initialize { next_fire_at_ms }
            | Self::Fire {
                next_fire_at_ms, ..
            }
            | Self::Skip {
                next_fire_at_ms, ..
            }
            | Self::NotDue { next_fire_at_ms } => next_fire_at_ms,
        }
    }

    /// A stable name for output and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Initialize { .. } => "initialize",
            Self::Fire { .. } => "fire",
            Self::Skip { .. } => "skip",
            Self::NotDue { .. } => "not_due",
        }
    }
}

/// Decides one claimed row (docs/DESIGN.md §4.4).
///
/// Let L be the latest occurrence at or before now. L fires under either policy when it is within
/// the grace; earlier missed occurrences are passed over. Beyond the grace, `skip` only advances the
/// cursor and `fire_once` admits L alone. The next cursor is the first occurrence after now, so a
/// second decision at the same now is [`Decision::NotDue`] and nothing fires twice.
///
/// The cost is two cron searches whatever the backlog: one back from now, one forward.
///
/// # Errors
///
/// Those of [`CronSchedule::next_after`]: the pattern has no occurrence after now, or now is not a
/// representable instant.
pub fn decide(input: &DecisionInput) -> Result<Decision, CoreError> {
    let DecisionInput {
        schedule,
        policy,
        grace_ms,
        cursor_ms,
        now_ms,
    } = *input;
    let Some(cursor_ms) = cursor_ms else {
        return Ok(Decision::Initialize {
            next_fire_at_ms: schedule.next_after(now_ms)?,
        });
    };
    if cursor_ms > now_ms {
        return Ok(Decision::NotDue {
            next_fire_at_ms: cursor_ms,
        });
    }
    let next_fire_at_ms = schedule.next_after(now_ms)?;
    let latest_due = schedule
        .latest_at_or_before(now_ms)?
        .filter(|&latest| latest >= cursor_ms);
    let Some(latest_due) = latest_due else {
        // A cursor this pattern never produced (written under another expression or zone, or by
        // hand) with no occurrence since: nothing in [cursor, now] is owed.
        return Ok(Decision::Skip {
            missed_ms: cursor_ms,
            next_fire_at_ms,
            late_ms: now_ms.saturating_sub(cursor_ms),
        });
    };
    let late_ms = now_ms - latest_due;
    let misfired = late_ms > grace_ms;
    Ok(match policy {
        MisfirePolicy::Skip if misfired => Decision::Skip {
            missed_ms: latest_due,
            next_fire_at_ms,
            late_ms,
        },
        MisfirePolicy::Skip | MisfirePolicy::FireOnce => Decision::Fire {
            scheduled_for_ms: latest_due,
            next_fire_at_ms,
            late_ms,
            misfired,
        },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chrono::{TimeZone as _, Utc};
    use chrono_tz::Tz;
    use proptest::prelude::*;

    const SECOND: i64 = 1_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .unwrap()
            .timestamp_millis()
    }

    fn local(zone: &str, y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
        let tz: Tz = zone.parse().unwrap();
        tz.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .unwrap()
            .timestamp_millis()
    }

    fn run(
        expr: &str,
        zone: &str,
        policy: MisfirePolicy,
        grace_ms: i64,
        cursor_ms: Option<i64>,
        now_ms: i64,
    ) -> Decision {
        let schedule = CronSchedule::parse(expr, zone).unwrap();
        decide(&DecisionInput {
            schedule: &schedule,
            policy,
            grace_ms,
            cursor_ms,
            now_ms,
        })
        .unwrap()
    }

    fn daily_3am(policy: MisfirePolicy, cursor_ms: Option<i64>, now_ms: i64) -> Decision {
        run("0 3 * * *", "UTC", policy, MINUTE, cursor_ms, now_ms)
    }

    #[test]
    fn policy_names_round_trip() {
        for policy in [MisfirePolicy::Skip, MisfirePolicy::FireOnce] {
            assert_eq!(policy.as_str().parse::<MisfirePolicy>(), Ok(policy));
            assert_eq!(
                serde_json::to_value(policy).unwrap(),
                serde_json::json!(policy.as_str())
            );
        }
        assert!("fire-once".parse::<MisfirePolicy>().is_err());
    }

    #[test]
    fn initializes_to_first_occurrence_after_now() {
        let now = utc(2026, 1, 1, 3, 0, 0);
        let d = daily_3am(MisfirePolicy::Skip, None, now);
        assert_eq!(
            d,
            Decision::Initialize {
                next_fire_at_ms: utc(2026, 1, 2, 3, 0, 0)
            }
        );
        assert_eq!(d.kind(), "initialize");
    }

    #[test]
    fn future_cursor_is_not_due_and_unchanged() {
        let cursor = utc(2026, 1, 2, 3, 0, 0);
        let d = daily_3am(MisfirePolicy::FireOnce, Some(cursor), cursor - 1);
        assert_eq!(
            d,
            Decision::NotDue {
                next_fire_at_ms: cursor
            }
        );
        assert_eq!(d.kind(), "not_due");
        assert_eq!(d.next_fire_at_ms(), cursor);
    }

    #[test]
    fn fires_on_time() {
        let due = utc(2026, 1, 2, 3, 0, 0);
        let d = daily_3am(MisfirePolicy::Skip, Some(due), due);
        assert_eq!(
            d,
            Decision::Fire {
                scheduled_for_ms: due,
                next_fire_at_ms: utc(2026, 1, 3, 3, 0, 0),
                late_ms: 0,
                misfired: false
            }
        );
        assert_eq!(d.kind(), "fire");
    }

    #[test]
    fn fires_late_within_grace_under_either_policy() {
        let due = utc(2026, 1, 2, 3, 0, 0);
        for policy in [MisfirePolicy::Skip, MisfirePolicy::FireOnce] {
            let d = daily_3am(policy, Some(due), due + MINUTE);
            assert_eq!(
                d,
                Decision::Fire {
                    scheduled_for_ms: due,
                    next_fire_at_ms: utc(2026, 1, 3, 3, 0, 0),
                    late_ms: MINUTE,
                    misfired: false
                },
                "{policy}"
            );
        }
    }

    #[test]
    fn on_time_latest_fires_and_passes_over_older_misses() {
        let cursor = utc(2026, 1, 2, 3, 0, 0);
        let latest = utc(2026, 1, 5, 3, 0, 0);
        let d = daily_3am(MisfirePolicy::Skip, Some(cursor), latest + SECOND);
        assert_eq!(
            d,
            Decision::Fire {
                scheduled_for_ms: latest,
                next_fire_at_ms: utc(2026, 1, 6, 3, 0, 0),
                late_ms: SECOND,
                misfired: false
            }
        );
    }

    #[test]
    fn misfire_under_skip_advances_only() {
        let cursor = utc(2026, 1, 2, 3, 0, 0);
        let now = utc(2026, 1, 4, 9, 0, 0);
        let d = daily_3am(MisfirePolicy::Skip, Some(cursor), now);
        assert_eq!(
            d,
            Decision::Skip {
                missed_ms: utc(2026, 1, 4, 3, 0, 0),
                next_fire_at_ms: utc(2026, 1, 5, 3, 0, 0),
                late_ms: 6 * HOUR
            }
        );
        assert_eq!(d.kind(), "skip");
    }

    #[test]
    fn misfire_under_fire_once_fires_the_latest_due_not_the_oldest() {
        let cursor = utc(2026, 1, 2, 3, 0, 0);
        let now = utc(2026, 1, 4, 9, 0, 0);
        let d = daily_3am(MisfirePolicy::FireOnce, Some(cursor), now);
        assert_eq!(
            d,
            Decision::Fire {
                scheduled_for_ms: utc(2026, 1, 4, 3, 0, 0),
                next_fire_at_ms: utc(2026, 1, 5, 3, 0, 0),
                late_ms: 6 * HOUR,
                misfired: true
            }
        );
    }

    #[test]
    fn grace_boundary_is_inclusive() {
        let due = utc(2026, 1, 2, 3, 0, 0);
        let at_grace = daily_3am(MisfirePolicy::Skip, Some(due), due + MINUTE);
        let past_grace = daily_3am(MisfirePolicy::Skip, Some(due), due + MINUTE + 1);
        assert_eq!(at_grace.kind(), "fire");
        assert_eq!(past_grace.kind(), "skip");
    }

    #[test]
    fn foreign_cursor_with_nothing_due_since_is_skipped() {
        let cursor = utc(2026, 1, 2, 4, 0, 0);
        let now = utc(2026, 1, 2, 5, 0, 0);
        let d = daily_3am(MisfirePolicy::FireOnce, Some(cursor), now);
        assert_eq!(
            d,
            Decision::Skip {
                missed_ms: cursor,
                next_fire_at_ms: utc(2026, 1, 3, 3, 0, 0),
                late_ms: HOUR
            }
        );
    }

    /// A million missed every-second occurrences cost what one does: the decider never walks the
    /// backlog. The bound only catches a walk (a million cron steps take tens of seconds in a debug
    /// build); it is a full second so that a test thread descheduled on a loaded machine passes.
    #[test]
    fn huge_backlog_is_decided_without_walking_it() {
        let now = utc(2026, 6, 1, 0, 0, 0);
        let schedule = CronSchedule::parse("* * * * * *", "Europe/Berlin").unwrap();
        for missed in [1_000, 1_000_000] {
            let started = std::time::Instant::now();
            let d = decide(&DecisionInput {
                schedule: &schedule,
                policy: MisfirePolicy::FireOnce,
                grace_ms: 0,
                cursor_ms: Some(now - missed * SECOND),
                now_ms: now + 500,
            })
            .unwrap();
            assert!(
                started.elapsed() < std::time::Duration::from_secs(1),
                "{missed}"
            );
            assert_eq!(
                d,
                Decision::Fire {
                    scheduled_for_ms: now,
                    next_fire_at_ms: now + SECOND,
                    late_ms: 500,
                    misfired: true
                }
            );
        }
    }

    #[test]
    fn seconds_cron_fires_the_latest_twenty_second_slot() {
        let start = utc(2026, 1, 1, 0, 0, 0);
        let d = run(
            "*/20 * * * * *",
            "UTC",
            MisfirePolicy::Skip,
            5 * SECOND,
            Some(start),
            start + 43 * SECOND,
        );
        assert_eq!(
            d,
            Decision::Fire {
                scheduled_for_ms: start + 40 * SECOND,
                next_fire_at_ms: start + 60 * SECOND,
                late_ms: 3 * SECOND,
                misfired: false
            }
        );
    }

    /// 02:30 does not exist on spring-forward day; croner carries it to 03:00 local, once.
    #[test]
    fn dst_gap_fires_at_gap_end_once() {
        for (zone, (y, mo, d)) in [
            ("Europe/Berlin", (2026, 3, 29)),
            ("America/New_York", (2026, 3, 8)),
        ] {
            let before = local(zone, y, mo, d - 1, 2, 30);
            let gap_end = local(zone, y, mo, d, 3, 0);
            let init = run(
                "30 2 * * *",
                zone,
                MisfirePolicy::Skip,
                MINUTE,
                None,
                before,
            );
            assert_eq!(init.next_fire_at_ms(), gap_end, "{zone}");
            let fire = run(
                "30 2 * * *",
                zone,
                MisfirePolicy::Skip,
                MINUTE,
                Some(gap_end),
                gap_end,
            );
            assert_eq!(
                fire,
                Decision::Fire {
                    scheduled_for_ms: gap_end,
                    next_fire_at_ms: local(zone, y, mo, d + 1, 2, 30),
                    late_ms: 0,
                    misfired: false
                },
                "{zone}"
            );
        }
    }

    /// The repeated hour of fall-back day (02:xx in Berlin, 01:xx in New York): the job fires at the
    /// first 02:30/01:30, and the repeat is not an occurrence, so the cursor moves to the next day.
    #[test]
    fn dst_fold_fires_once() {
        for (zone, expr, (y, mo, d), first_utc_hour, hour) in [
            ("Europe/Berlin", "30 2 * * *", (2026, 10, 25), 0, 2),
            ("America/New_York", "30 1 * * *", (2026, 11, 1), 5, 1),
        ] {
            let first = utc(y, mo, d, first_utc_hour, 30, 0);
            let repeat = first + HOUR;
            let next_day = local(zone, y, mo, d + 1, hour, 30);
            let fire = run(expr, zone, MisfirePolicy::Skip, MINUTE, Some(first), first);
            assert_eq!(
                fire,
                Decision::Fire {
                    scheduled_for_ms: first,
                    next_fire_at_ms: next_day,
                    late_ms: 0,
                    misfired: false
                },
                "{zone}"
            );
            let at_repeat = run(
                expr,
                zone,
                MisfirePolicy::FireOnce,
                MINUTE,
                Some(next_day),
                repeat,
            );
            assert_eq!(
                at_repeat,
                Decision::NotDue {
                    next_fire_at_ms: next_day
                },
                "{zone}"
            );
        }
    }

    /// Every 15 minutes through the fold: each decision fires the slot just due and the cursors
    /// step forward 15 minutes of real time, with no instant repeated.
    #[test]
    fn dst_fold_quarter_hours_never_repeat() {
        for (zone, (y, mo, d)) in [
            ("Europe/Berlin", (2026, 10, 25)),
            ("America/New_York", (2026, 11, 1)),
        ] {
            let mut now = local(zone, y, mo, d, 0, 0);
            let mut cursor = Some(now);
            let mut fired = Vec::new();
            for _ in 0..24 {
                let d = run("*/15 * * * *", zone, MisfirePolicy::Skip, 0, cursor, now);
                if let Decision::Fire {
                    scheduled_for_ms, ..
                } = d
                {
                    fired.push(scheduled_for_ms);
                }
                cursor = Some(d.next_fire_at_ms());
                now = d.next_fire_at_ms();
            }
            assert_eq!(fired.len(), 24, "{zone}");
            assert!(
                fired.windows(2).all(|w| w[1] - w[0] == 15 * MINUTE),
                "{zone}: {fired:?}"
            );
        }
    }

    const PATTERNS: [&str; 8] = [
        "* * * * *",
        "*/15 * * * *",
        "30 2 * * *",
        "0 0 * * 0",
        "*/20 * * * * *",
        "0 0 1 * *",
        "@hourly",
        "15 1,2,3 * * 1-5",
    ];
    const ZONES: [&str; 5] = [
        "UTC",
        "Europe/Berlin",
        "America/New_York",
        "Australia/Lord_Howe",
        "Asia/Kolkata",
    ];

    fn policy() -> impl Strategy<Value = MisfirePolicy> {
        prop_oneof![Just(MisfirePolicy::Skip), Just(MisfirePolicy::FireOnce)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn decisions_advance_and_never_fire_twice(
            pattern in 0..PATTERNS.len(),
            zone in 0..ZONES.len(),
            policy in policy(),
            grace_ms in 0i64..=7 * 24 * HOUR,
            now_ms in 1_600_000_000_000i64..1_900_000_000_000,
            cursor_back in proptest::option::of(-HOUR..=400 * 24 * HOUR),
        ) {
            let schedule = CronSchedule::parse(PATTERNS[pattern], ZONES[zone]).unwrap();
            let cursor_ms = cursor_back.map(|back| now_ms - back);
            let input = DecisionInput { schedule: &schedule, policy, grace_ms, cursor_ms, now_ms };
            let decision = decide(&input).unwrap();
            match (decision, cursor_ms) {
                (Decision::NotDue { next_fire_at_ms }, Some(cursor)) => {
                    prop_assert!(cursor > now_ms);
                    prop_assert_eq!(next_fire_at_ms, cursor);
                }
                (Decision::Fire { scheduled_for_ms, late_ms, misfired, .. }, Some(cursor)) => {
                    prop_assert!(scheduled_for_ms <= now_ms && scheduled_for_ms >= cursor);
                    prop_assert_eq!(late_ms, now_ms - scheduled_for_ms);
                    prop_assert_eq!(misfired, late_ms > grace_ms);
                    prop_assert!(!misfired || policy == MisfirePolicy::FireOnce);
                }
                (Decision::Skip { missed_ms, .. }, Some(cursor)) => {
                    prop_assert!(policy == MisfirePolicy::Skip || missed_ms == cursor);
                    prop_assert!(missed_ms <= now_ms && missed_ms >= cursor);
                }
                (Decision::Initialize { .. }, None) => {}
                (other, cursor) => prop_assert!(false, "{other:?} for cursor {cursor:?}"),
            }
            prop_assert!(decision.next_fire_at_ms() > now_ms);
            let again = decide(&DecisionInput { cursor_ms: Some(decision.next_fire_at_ms()), ..input }).unwrap();
            prop_assert_eq!(again, Decision::NotDue { next_fire_at_ms: decision.next_fire_at_ms() });
        }
    }
}
