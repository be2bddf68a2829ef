//! The decider's examples: the policies' names, each branch of the rule (on time, late within the
//! grace, misfired under `skip` and under `fire_once`, a cursor the pattern never produced) and a
//! huge backlog; and the helpers its daylight-saving examples and property tests share.

use super::*;
use crate::cron::tests::utc;

mod daylight_saving;
mod properties;

const SECOND: i64 = 1_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;

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
