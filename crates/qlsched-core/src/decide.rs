//! The misfire decider (docs/DESIGN.md §4.4): given a claimed schedule row's cursor and the
//! database's "now", what happens to it: which occurrence fires, which are passed over as one
//! misfire, and where the cursor goes. Pure and clock-free, so the coordinator can run it outside
//! any lock and the manual `claim` command can show an operator the same answer before admitting
//! it.

use std::fmt;
use std::str::FromStr;

use super::cron::CronSchedule;
use super::error::CoreError;

/// What to do when even the latest due occurrence is later than the grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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

/// Everything the decision depends on. `now_ms` is the database's clock: no node clock is ever
/// compared with a lease or an occurrence (docs/DESIGN.md §4.1).
#[derive(Debug, Clone, Copy)]
pub struct DecisionInput<'a> {
    pub schedule: &'a CronSchedule,
    pub policy: MisfirePolicy,
    pub grace_ms: i64,
    /// The row's `next_fire_at_ms`, the next occurrence to account for; `None` for a new or
    /// re-published trigger.
    pub cursor_ms: Option<i64>,
    pub now_ms: i64,
}

/// How many passed-over occurrences a decision counts one by one. Past this the count is a
/// lower bound ([`MisfireSpan::count_exact`] is false): the decision's cost stays bounded
/// however long a trigger was missed, which matters more than an exact figure for a span that
/// long (10,000 every-second occurrences are 2 h 46 min).
pub const MAX_COUNTED_MISFIRES: u64 = 10_000;

/// Why a decision passed occurrences over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MisfireReason {
    /// Each occurrence was later than the trigger's `misfire_grace` when it was decided.
    BeyondGrace,
}

impl MisfireReason {
    /// The name stored in `misfires.reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BeyondGrace => "beyond_grace",
        }
    }
}

/// The occurrences one decision passed over without a run: what a misfire record stores, so that
/// every occurrence is accounted for (a run, or inside a record) without a row per occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MisfireSpan {
    pub first_ms: i64,
    pub last_ms: i64,
    /// Occurrences in `[first_ms, last_ms]`, all passed over; a lower bound when `count_exact`
    /// is false (more than 10,000).
    pub count: u64,
    pub count_exact: bool,
    pub reason: MisfireReason,
}

/// The outcome for one claimed row. Every variant carries the cursor to store next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A new cursor for a row that had none; nothing is admitted. Accounting for the trigger's
    /// revision starts at this cursor.
    Initialize { next_fire_at_ms: i64 },
    /// Admit the occurrence `scheduled_for_ms`, `late_ms` after it was due. `misfired` when that
    /// is beyond the grace and `fire_once` admits it for the misfired span; `passed_over` names
    /// the occurrences this decision passes over, if any. The next cursor may still be due (a
    /// replica catching up within the grace): the row is then claimed again at once.
    Fire {
        scheduled_for_ms: i64,
        next_fire_at_ms: i64,
        late_ms: i64,
        misfired: bool,
        passed_over: Option<MisfireSpan>,
    },
    /// Nothing is admitted; the cursor moves past `passed_over` (under `skip`, occurrences beyond
    /// the grace), or, with `passed_over` empty, past a cursor the pattern never produced.
    /// `late_ms` is how late the oldest occurrence owed was.
    Skip {
        passed_over: Option<MisfireSpan>,
        next_fire_at_ms: i64,
        late_ms: i64,
    },
    /// The cursor is still in the future: nothing is due and the cursor stays. A claim should not
    /// have selected this row; deciding it anyway is harmless.
    NotDue { next_fire_at_ms: i64 },
}

impl Decision {
    /// The cursor to store. It is after every occurrence the decision admits or passes over, so
    /// deciding again never fires or records one twice; it is at or before `now_ms` only while a
    /// fire catches up on occurrences still within the grace.
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

    /// The occurrences this decision passes over, which its admission records as one misfire.
    pub fn passed_over(&self) -> Option<&MisfireSpan> {
        match self {
            Self::Fire { passed_over, .. } | Self::Skip { passed_over, .. } => passed_over.as_ref(),
            Self::Initialize { .. } | Self::NotDue { .. } => None,
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
/// The cursor C is the next occurrence to account for, and H = now − grace is the grace horizon:
/// an occurrence at or after H is within the grace, one before H misfired.
///
/// - Nothing misfired: the first occurrence at or after C fires, and the cursor moves to the
///   occurrence after it, which may itself be due: a replica that fell behind admits every
///   occurrence within the grace, one per decision, in order.
/// - Occurrences in [C, H) misfired. `skip` passes over all of them and fires the first
///   occurrence within the grace if one is due; `fire_once` fires the latest misfired one and
///   passes over the others. Either way the cursor moves to the first occurrence within the
///   grace (or past it, when `skip` fired it), and the passed-over span is returned for one
///   misfire record.
///
/// The cost is a handful of cron searches plus a count capped at [`MAX_COUNTED_MISFIRES`],
/// whatever the backlog: nothing beyond the grace is replayed one by one.
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
    let first = schedule.next_at_or_after(cursor_ms)?;
    if first > now_ms {
        // A cursor this pattern never produced (written under another expression or zone, or by
        // hand) with no occurrence since: nothing in [cursor, now] is owed.
        return Ok(Decision::Skip {
            passed_over: None,
            next_fire_at_ms: first,
            late_ms: now_ms - cursor_ms,
        });
    }
    let horizon = now_ms.saturating_sub(grace_ms);
    if first >= horizon {
        return Ok(Decision::Fire {
            scheduled_for_ms: first,
            next_fire_at_ms: schedule.next_after(first)?,
            late_ms: now_ms - first,
            misfired: false,
            passed_over: None,
        });
    }
    // [first, last_misfired] is the misfired span; within_grace is the first occurrence after it.
    let last_misfired = schedule
        .latest_before(horizon)?
        .filter(|&latest| latest >= first)
        .unwrap_or(first);
    let within_grace = schedule.next_at_or_after(horizon)?;
    let span = |first_ms: i64, last_ms: i64| -> Result<MisfireSpan, CoreError> {
        let (count, count_exact) =
            schedule.count_between(first_ms, last_ms, MAX_COUNTED_MISFIRES)?;
        Ok(MisfireSpan {
            first_ms,
            last_ms,
            count,
            count_exact,
            reason: MisfireReason::BeyondGrace,
        })
    };
    Ok(match policy {
        MisfirePolicy::Skip if within_grace <= now_ms => Decision::Fire {
            scheduled_for_ms: within_grace,
            next_fire_at_ms: schedule.next_after(within_grace)?,
            late_ms: now_ms - within_grace,
            misfired: false,
            passed_over: Some(span(first, last_misfired)?),
        },
        MisfirePolicy::Skip => Decision::Skip {
            passed_over: Some(span(first, last_misfired)?),
            next_fire_at_ms: within_grace,
            late_ms: now_ms - first,
        },
        MisfirePolicy::FireOnce => {
            let passed_over = match schedule.latest_before(last_misfired)? {
                Some(previous) if previous >= first => Some(span(first, previous)?),
                _ => None,
            };
            Decision::Fire {
                scheduled_for_ms: last_misfired,
                next_fire_at_ms: within_grace,
                late_ms: now_ms - last_misfired,
                misfired: true,
                passed_over,
            }
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chrono::{Datelike as _, TimeZone as _, Utc};
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

    fn beyond_grace(first_ms: i64, last_ms: i64, count: u64) -> Option<MisfireSpan> {
        Some(MisfireSpan {
            first_ms,
            last_ms,
            count,
            count_exact: true,
            reason: MisfireReason::BeyondGrace,
        })
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
                misfired: false,
                passed_over: None,
            }
        );
        assert_eq!(d.kind(), "fire");
        assert_eq!(d.passed_over(), None);
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
                    misfired: false,
                    passed_over: None,
                },
                "{policy}"
            );
        }
    }

    /// The worked example of docs/DECISIONS.md: an every-second trigger whose replica is three
    /// seconds behind. With a 60 s grace every one of the four due occurrences fires, oldest
    /// first, one decision each, and the cursor stays due until the last.
    #[test]
    fn a_replica_behind_within_the_grace_fires_every_occurrence_in_order() {
        let t = utc(2026, 1, 1, 0, 0, 0);
        let now = t + 3 * SECOND + 200;
        for policy in [MisfirePolicy::Skip, MisfirePolicy::FireOnce] {
            let mut cursor = t;
            let mut fired = Vec::new();
            loop {
                let d = run("* * * * * *", "UTC", policy, MINUTE, Some(cursor), now);
                match d {
                    Decision::Fire {
                        scheduled_for_ms,
                        misfired: false,
                        passed_over: None,
                        ..
                    } => fired.push(scheduled_for_ms),
                    Decision::NotDue { .. } => break,
                    other => panic!("{policy}: {other:?}"),
                }
                cursor = d.next_fire_at_ms();
            }
            assert_eq!(
                fired,
                [t, t + SECOND, t + 2 * SECOND, t + 3 * SECOND],
                "{policy}"
            );
            assert_eq!(cursor, t + 4 * SECOND);
        }
    }

    /// The same replica with a 1 s grace: t and t+1 are later than the grace. `skip` records
    /// both as one misfire and fires t+2 in the same decision; `fire_once` fires t+1 (the latest
    /// misfired), records t, and leaves t+2 and t+3 due for the next decisions.
    #[test]
    fn a_replica_behind_beyond_the_grace_records_one_misfire_and_keeps_the_rest() {
        let t = utc(2026, 1, 1, 0, 0, 0);
        let now = t + 3 * SECOND + 200;
        let skip = run(
            "* * * * * *",
            "UTC",
            MisfirePolicy::Skip,
            SECOND,
            Some(t),
            now,
        );
        assert_eq!(
            skip,
            Decision::Fire {
                scheduled_for_ms: t + 3 * SECOND,
                next_fire_at_ms: t + 4 * SECOND,
                late_ms: 200,
                misfired: false,
                passed_over: beyond_grace(t, t + 2 * SECOND, 3),
            }
        );
        let once = run(
            "* * * * * *",
            "UTC",
            MisfirePolicy::FireOnce,
            SECOND,
            Some(t),
            now,
        );
        assert_eq!(
            once,
            Decision::Fire {
                scheduled_for_ms: t + 2 * SECOND,
                next_fire_at_ms: t + 3 * SECOND,
                late_ms: SECOND + 200,
                misfired: true,
                passed_over: beyond_grace(t, t + SECOND, 2),
            }
        );
    }

    #[test]
    fn misfire_under_skip_with_nothing_within_the_grace_only_advances() {
        let cursor = utc(2026, 1, 2, 3, 0, 0);
        let now = utc(2026, 1, 4, 9, 0, 0);
        let d = daily_3am(MisfirePolicy::Skip, Some(cursor), now);
        assert_eq!(
            d,
            Decision::Skip {
                passed_over: beyond_grace(cursor, utc(2026, 1, 4, 3, 0, 0), 3),
                next_fire_at_ms: utc(2026, 1, 5, 3, 0, 0),
                late_ms: now - cursor,
            }
        );
        assert_eq!(d.kind(), "skip");
    }

    #[test]
    fn misfire_under_fire_once_fires_the_latest_misfired_and_records_the_older() {
        let cursor = utc(2026, 1, 2, 3, 0, 0);
        let now = utc(2026, 1, 4, 9, 0, 0);
        let d = daily_3am(MisfirePolicy::FireOnce, Some(cursor), now);
        assert_eq!(
            d,
            Decision::Fire {
                scheduled_for_ms: utc(2026, 1, 4, 3, 0, 0),
                next_fire_at_ms: utc(2026, 1, 5, 3, 0, 0),
                late_ms: 6 * HOUR,
                misfired: true,
                passed_over: beyond_grace(cursor, utc(2026, 1, 3, 3, 0, 0), 2),
            }
        );
    }

    #[test]
    fn a_single_misfire_under_fire_once_fires_it_and_records_nothing() {
        let cursor = utc(2026, 1, 2, 3, 0, 0);
        let d = daily_3am(MisfirePolicy::FireOnce, Some(cursor), cursor + HOUR);
        assert_eq!(
            d,
            Decision::Fire {
                scheduled_for_ms: cursor,
                next_fire_at_ms: utc(2026, 1, 3, 3, 0, 0),
                late_ms: HOUR,
                misfired: true,
                passed_over: None,
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
        assert_eq!(past_grace.passed_over().map(|s| s.count), Some(1));
    }

    #[test]
    fn foreign_cursor_with_nothing_due_since_is_skipped_without_a_record() {
        let cursor = utc(2026, 1, 2, 4, 0, 0);
        let now = utc(2026, 1, 2, 5, 0, 0);
        let d = daily_3am(MisfirePolicy::FireOnce, Some(cursor), now);
        assert_eq!(
            d,
            Decision::Skip {
                passed_over: None,
                next_fire_at_ms: utc(2026, 1, 3, 3, 0, 0),
                late_ms: HOUR
            }
        );
    }

    /// A million missed every-second occurrences cost what a few do: the decider never walks
    /// the backlog past its counting cap. The bound only catches an uncapped walk (a million cron
    /// steps take tens of seconds in a debug build); it is a few seconds so that a test thread
    /// descheduled on a loaded machine passes.
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
                started.elapsed() < std::time::Duration::from_secs(3),
                "{missed}"
            );
            let Decision::Fire {
                scheduled_for_ms,
                next_fire_at_ms,
                misfired: true,
                passed_over: Some(span),
                ..
            } = d
            else {
                panic!("{d:?}");
            };
            assert_eq!((scheduled_for_ms, next_fire_at_ms), (now, now + SECOND));
            assert_eq!(
                (span.first_ms, span.last_ms),
                (now - missed * SECOND, now - SECOND)
            );
            let expected = u64::try_from(missed).unwrap();
            if expected <= MAX_COUNTED_MISFIRES {
                assert_eq!((span.count, span.count_exact), (expected, true));
            } else {
                assert_eq!(
                    (span.count, span.count_exact),
                    (MAX_COUNTED_MISFIRES, false)
                );
            }
        }
    }

    /// 02:30 does not exist on spring-forward day; the fixed-time job runs at 03:00 local, once.
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
                    misfired: false,
                    passed_over: None,
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
                    misfired: false,
                    passed_over: None,
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
            // Decided late, past the repeat and beyond the grace, the repeat is neither fired
            // nor counted: the one occurrence is the first instant.
            for policy in [MisfirePolicy::Skip, MisfirePolicy::FireOnce] {
                let late = run(expr, zone, policy, MINUTE, Some(first), repeat + 5 * MINUTE);
                let owed: Vec<i64> = match late {
                    Decision::Fire {
                        scheduled_for_ms,
                        passed_over,
                        ..
                    } => passed_over
                        .map(|s| s.first_ms)
                        .into_iter()
                        .chain([scheduled_for_ms])
                        .collect(),
                    Decision::Skip { passed_over, .. } => {
                        passed_over.map(|s| s.first_ms).into_iter().collect()
                    }
                    other => panic!("{zone} {policy}: {other:?}"),
                };
                assert_eq!(owed, [first], "{zone} {policy}");
                assert_eq!(late.next_fire_at_ms(), next_day, "{zone} {policy}");
            }
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

    /// A zone, the day of a change, and four jobs with the local times each runs that day.
    type ChangeDay = (
        &'static str,
        (i32, u32, u32),
        [(&'static str, &'static [&'static str]); 4],
    );

    /// The replicas' decision over the daylight-saving changes of 2027 in three zones, for a
    /// single-time, a list, a range and a step job: deciding on time, occurrence after
    /// occurrence, fires exactly the local times docs/DECISIONS.md's rule gives, each once; and
    /// one late `fire_once` decision at the day's end accounts for the same number of
    /// occurrences (one fired, the rest in one misfire span).
    #[test]
    fn decisions_over_the_daylight_saving_changes_fire_each_occurrence_once() {
        let cases: [ChangeDay; 6] = [
            (
                "Europe/Berlin",
                (2027, 3, 28),
                [
                    ("30 2 * * *", &["03:00+02:00"]),
                    (
                        "0,30 2,14 * * *",
                        &["03:00+02:00", "14:00+02:00", "14:30+02:00"],
                    ),
                    ("0 1-3 * * *", &["01:00+01:00", "03:00+02:00"]),
                    ("*/20 2 * * *", &[]),
                ],
            ),
            (
                "Europe/Berlin",
                (2027, 10, 31),
                [
                    ("30 2 * * *", &["02:30+02:00"]),
                    (
                        "0,30 2,14 * * *",
                        &["02:00+02:00", "02:30+02:00", "14:00+01:00", "14:30+01:00"],
                    ),
                    (
                        "0 1-3 * * *",
                        &["01:00+02:00", "02:00+02:00", "03:00+01:00"],
                    ),
                    (
                        "*/20 2 * * *",
                        &[
                            "02:00+02:00",
                            "02:20+02:00",
                            "02:40+02:00",
                            "02:00+01:00",
                            "02:20+01:00",
                            "02:40+01:00",
                        ],
                    ),
                ],
            ),
            (
                "America/New_York",
                (2027, 3, 14),
                [
                    ("30 2 * * *", &["03:00-04:00"]),
                    (
                        "0,30 2,14 * * *",
                        &["03:00-04:00", "14:00-04:00", "14:30-04:00"],
                    ),
                    ("0 1-3 * * *", &["01:00-05:00", "03:00-04:00"]),
                    ("*/20 2 * * *", &[]),
                ],
            ),
            (
                "America/New_York",
                (2027, 11, 7),
                [
                    ("30 1 * * *", &["01:30-04:00"]),
                    (
                        "0,30 1,14 * * *",
                        &["01:00-04:00", "01:30-04:00", "14:00-05:00", "14:30-05:00"],
                    ),
                    (
                        "0 0-2 * * *",
                        &["00:00-04:00", "01:00-04:00", "02:00-05:00"],
                    ),
                    (
                        "*/20 1 * * *",
                        &[
                            "01:00-04:00",
                            "01:20-04:00",
                            "01:40-04:00",
                            "01:00-05:00",
                            "01:20-05:00",
                            "01:40-05:00",
                        ],
                    ),
                ],
            ),
            (
                "Australia/Lord_Howe",
                (2027, 10, 3),
                [
                    ("15 2 * * *", &["02:30+11:00"]),
                    (
                        "0,15,45 2,14 * * *",
                        &[
                            "02:30+11:00",
                            "02:45+11:00",
                            "14:00+11:00",
                            "14:15+11:00",
                            "14:45+11:00",
                        ],
                    ),
                    ("10-40/10 2 * * *", &["02:30+11:00", "02:40+11:00"]),
                    ("*/20 2 * * *", &["02:40+11:00"]),
                ],
            ),
            (
                "Australia/Lord_Howe",
                (2027, 4, 4),
                [
                    ("45 1 * * *", &["01:45+11:00"]),
                    (
                        "15,45 1,14 * * *",
                        &["01:15+11:00", "01:45+11:00", "14:15+10:30", "14:45+10:30"],
                    ),
                    (
                        "30-50/10 1 * * *",
                        &["01:30+11:00", "01:40+11:00", "01:50+11:00"],
                    ),
                    (
                        "*/20 1 * * *",
                        &["01:00+11:00", "01:20+11:00", "01:40+11:00", "01:40+10:30"],
                    ),
                ],
            ),
        ];
        for (zone, (y, mo, d), jobs) in cases {
            let tz: Tz = zone.parse().unwrap();
            let day_start = local(zone, y, mo, d, 0, 0);
            let day_end = day_start + 24 * HOUR + 2 * HOUR;
            let in_day =
                |ms: i64| ms >= day_start && tz.timestamp_millis_opt(ms).unwrap().day() == d;
            let text = |ms: i64| {
                tz.timestamp_millis_opt(ms)
                    .unwrap()
                    .format("%H:%M%:z")
                    .to_string()
            };
            for (expr, expected) in jobs {
                let schedule = CronSchedule::parse(expr, zone).unwrap();
                let decide_at = |policy, cursor_ms, now_ms| {
                    decide(&DecisionInput {
                        schedule: &schedule,
                        policy,
                        grace_ms: 0,
                        cursor_ms,
                        now_ms,
                    })
                    .unwrap()
                };
                let mut cursor =
                    decide_at(MisfirePolicy::Skip, None, day_start - 1).next_fire_at_ms();
                let mut fired = Vec::new();
                while cursor < day_end {
                    let Decision::Fire {
                        scheduled_for_ms,
                        next_fire_at_ms,
                        late_ms: 0,
                        ..
                    } = decide_at(MisfirePolicy::Skip, Some(cursor), cursor)
                    else {
                        panic!("{zone} {expr}: an on-time decision that does not fire");
                    };
                    if in_day(scheduled_for_ms) {
                        fired.push(text(scheduled_for_ms));
                    }
                    cursor = next_fire_at_ms;
                }
                assert_eq!(fired, *expected, "{zone} {y}-{mo}-{d} {expr}");
                // Decided once, late, at the end of the day.
                let first = schedule.next_at_or_after(day_start).unwrap();
                let owed = schedule
                    .occurrences_between(day_start, day_end, 100)
                    .unwrap();
                let late = decide_at(MisfirePolicy::FireOnce, Some(first), day_end);
                let counted = late.passed_over().map_or(0, |span| span.count)
                    + u64::from(matches!(late, Decision::Fire { .. }));
                assert_eq!(counted, owed.len() as u64, "{zone} {expr}: {late:?}");
            }
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
    /// Instants around the DST changes of 2026 in the zones above, so that the property tests
    /// spend their cases where gaps and folds are.
    const DST_CHANGES: [i64; 6] = [
        1_774_746_000_000, // 2026-03-29T01:00Z, Berlin springs forward
        1_792_890_000_000, // 2026-10-25T01:00Z, Berlin falls back
        1_772_953_200_000, // 2026-03-08T07:00Z, New York springs forward
        1_793_512_800_000, // 2026-11-01T06:00Z, New York falls back
        1_775_314_800_000, // 2026-04-04T15:00Z, Lord Howe falls back half an hour
        1_791_041_400_000, // 2026-10-03T15:30Z, Lord Howe springs forward half an hour
    ];

    fn policy() -> impl Strategy<Value = MisfirePolicy> {
        prop_oneof![Just(MisfirePolicy::Skip), Just(MisfirePolicy::FireOnce)]
    }

    /// A now anywhere in 2020-2030, or within a day of a DST change.
    fn instant() -> impl Strategy<Value = i64> {
        prop_oneof![
            1_600_000_000_000i64..1_900_000_000_000,
            (0..DST_CHANGES.len(), -24 * HOUR..24 * HOUR).prop_map(|(i, d)| DST_CHANGES[i] + d),
        ]
    }

    /// Every occurrence in `[from, to]`, walking forward: the model the decider is checked against.
    fn walk(schedule: &CronSchedule, from: i64, to: i64) -> Vec<i64> {
        schedule
            .occurrences_between(from, to + 1, usize::MAX)
            .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn decisions_advance_and_never_fire_twice(
            pattern in 0..PATTERNS.len(),
            zone in 0..ZONES.len(),
            policy in policy(),
            grace_ms in 0i64..=7 * 24 * HOUR,
            now_ms in instant(),
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
                (Decision::Fire { scheduled_for_ms, late_ms, misfired, passed_over, .. }, Some(cursor)) => {
                    prop_assert!(scheduled_for_ms <= now_ms && scheduled_for_ms >= cursor);
                    prop_assert_eq!(late_ms, now_ms - scheduled_for_ms);
                    prop_assert_eq!(misfired, late_ms > grace_ms);
                    prop_assert!(!misfired || policy == MisfirePolicy::FireOnce);
                    if let Some(span) = passed_over {
                        prop_assert!(span.first_ms >= cursor && span.last_ms < scheduled_for_ms);
                    }
                }
                (Decision::Skip { passed_over, .. }, Some(cursor)) => {
                    if let Some(span) = passed_over {
                        prop_assert!(policy == MisfirePolicy::Skip);
                        prop_assert!(span.first_ms >= cursor && span.last_ms < now_ms - grace_ms);
                    }
                }
                (Decision::Initialize { .. }, None) => {}
                (other, cursor) => prop_assert!(false, "{other:?} for cursor {cursor:?}"),
            }
            // The new cursor is past everything decided, so deciding again at the same now
            // never fires or records an occurrence twice.
            let next = decision.next_fire_at_ms();
            if let Decision::Fire { scheduled_for_ms, .. } = decision {
                prop_assert!(next > scheduled_for_ms);
            }
            if let Some(span) = decision.passed_over() {
                prop_assert!(next > span.last_ms);
            }
            if next > now_ms {
                let again = decide(&DecisionInput { cursor_ms: Some(next), ..input }).unwrap();
                prop_assert_eq!(again, Decision::NotDue { next_fire_at_ms: next });
            }
        }

        /// Accounting: starting from a cursor the pattern produced, deciding again and again at
        /// one now accounts for every occurrence in [cursor, now] exactly once, as a run or
        /// inside a misfire span, the spans count exactly what they cover, nothing within the
        /// grace is passed over, and `fire_once` admits one occurrence for the misfired ones.
        /// Checked against a forward walk of the pattern, DST gaps and folds included.
        #[test]
        fn every_occurrence_is_accounted_for_once(
            pattern in 0..PATTERNS.len(),
            zone in 0..ZONES.len(),
            policy in policy(),
            grace_ms in prop_oneof![Just(0i64), 0i64..=2 * HOUR, 0i64..=3 * 24 * HOUR],
            now_ms in instant(),
            back_ms in 0i64..=40 * 24 * HOUR,
        ) {
            let schedule = CronSchedule::parse(PATTERNS[pattern], ZONES[zone]).unwrap();
            let cursor = schedule.next_at_or_after(now_ms - back_ms).unwrap();
            let owed = walk(&schedule, cursor, now_ms);
            prop_assume!(owed.len() < 5_000);
            let mut fired = Vec::new();
            let mut passed = Vec::new();
            let mut misfired_fires = 0;
            let mut at = cursor;
            for _ in 0..=owed.len() + 1 {
                let d = decide(&DecisionInput {
                    schedule: &schedule, policy, grace_ms, cursor_ms: Some(at), now_ms,
                }).unwrap();
                if let Some(span) = d.passed_over() {
                    let covered = walk(&schedule, span.first_ms, span.last_ms);
                    prop_assert_eq!(span.count, u64::try_from(covered.len()).unwrap());
                    prop_assert!(span.count_exact);
                    passed.extend(covered);
                }
                match d {
                    Decision::Fire { scheduled_for_ms, misfired, .. } => {
                        fired.push(scheduled_for_ms);
                        misfired_fires += usize::from(misfired);
                    }
                    Decision::NotDue { .. } => break,
                    Decision::Skip { .. } => {}
                    Decision::Initialize { .. } => prop_assert!(false, "initialize"),
                }
                at = d.next_fire_at_ms();
            }
            prop_assert!(at > now_ms, "still due after {} decisions", owed.len() + 1);
            let mut accounted: Vec<i64> = fired.iter().chain(&passed).copied().collect();
            accounted.sort_unstable();
            prop_assert_eq!(&accounted, &owed);
            let within_grace: Vec<i64> = owed.iter().copied().filter(|&o| now_ms - o <= grace_ms).collect();
            prop_assert!(within_grace.iter().all(|o| fired.contains(o)), "within the grace, passed over");
            let any_misfired = owed.iter().any(|&o| now_ms - o > grace_ms);
            let expected_misfired_fires = usize::from(any_misfired && policy == MisfirePolicy::FireOnce);
            prop_assert_eq!(misfired_fires, expected_misfired_fires);
        }
    }
}
