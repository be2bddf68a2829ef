//! The decisions across daylight-saving changes: spring gaps and autumn folds in zones whose clock
//! moves by an hour and by half an hour, decided on time and late, each occurrence fired or
//! counted once.

use chrono::{Datelike as _, TimeZone as _};
use chrono_tz::Tz;

use super::*;
use crate::cron::tests::local;

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
        let in_day = |ms: i64| ms >= day_start && tz.timestamp_millis_opt(ms).unwrap().day() == d;
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
            let mut cursor = decide_at(MisfirePolicy::Skip, None, day_start - 1).next_fire_at_ms();
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
