//! The evaluator's examples: the grammar and its messages, the day rule, and the daylight-saving
//! rule worked through in Berlin, New York and Lord Howe. `utc` and `local` write the decider's
//! examples too (`decide::tests`).

use super::*;
use chrono::{NaiveDate, Utc};

/// Epoch milliseconds of a wall clock time that exists exactly once in `zone`.
pub(crate) fn local(zone: &str, y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
    let tz: Tz = zone.parse().unwrap();
    tz.with_ymd_and_hms(y, mo, d, h, mi, 0)
        .single()
        .unwrap()
        .timestamp_millis()
}

/// Epoch milliseconds of a UTC time.
pub(crate) fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
        .unwrap()
        .timestamp_millis()
}

fn day_start_utc(y: i32, mo: u32, d: u32) -> i64 {
    NaiveDate::from_ymd_opt(y, mo, d)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
        .timestamp_millis()
}

/// Every occurrence in `[from, to)`, walking forward.
fn occurrences(schedule: &CronSchedule, from: i64, to: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut at = from - 1;
    loop {
        at = schedule.next_after(at).unwrap();
        if at >= to {
            return out;
        }
        out.push(at);
    }
}

const HOUR: i64 = 3_600_000;
const MINUTE: i64 = 60_000;

#[test]
fn five_fields() {
    let s = CronSchedule::parse("0 3 * * *", "UTC").unwrap();
    assert_eq!(s.expr(), "0 3 * * *");
    assert_eq!(s.time_zone(), "UTC");
    assert_eq!(
        s.next_after(utc(2026, 1, 1, 3, 0, 0)).unwrap(),
        utc(2026, 1, 2, 3, 0, 0)
    );
}

#[test]
fn six_fields_lead_with_seconds() {
    let s = CronSchedule::parse("*/20 * * * * *", "UTC").unwrap();
    let start = utc(2026, 1, 1, 0, 0, 0);
    let a = s.next_after(start).unwrap();
    let b = s.next_after(a).unwrap();
    let c = s.next_after(b).unwrap();
    assert_eq!([a, b, c], [start + 20_000, start + 40_000, start + 60_000]);
}

#[test]
fn next_after_is_strict_and_latest_is_inclusive_at_millisecond_precision() {
    let s = CronSchedule::parse("* * * * * *", "UTC").unwrap();
    let t = utc(2026, 1, 1, 0, 0, 0);
    assert_eq!(s.next_after(t).unwrap(), t + 1_000);
    assert_eq!(s.next_after(t + 999).unwrap(), t + 1_000);
    assert_eq!(s.next_after(t - 1).unwrap(), t);
    assert_eq!(s.latest_at_or_before(t).unwrap(), Some(t));
    assert_eq!(s.latest_at_or_before(t + 999).unwrap(), Some(t));
    assert_eq!(s.latest_at_or_before(t - 1).unwrap(), Some(t - 1_000));
}

#[test]
fn macros_expand() {
    let t = utc(2026, 5, 15, 12, 34, 0);
    let cases = [
        ("@yearly", utc(2027, 1, 1, 0, 0, 0)),
        ("@annually", utc(2027, 1, 1, 0, 0, 0)),
        ("@monthly", utc(2026, 6, 1, 0, 0, 0)),
        ("@weekly", utc(2026, 5, 17, 0, 0, 0)),
        ("@daily", utc(2026, 5, 16, 0, 0, 0)),
        ("@midnight", utc(2026, 5, 16, 0, 0, 0)),
        ("@hourly", utc(2026, 5, 15, 13, 0, 0)),
        ("@DAILY", utc(2026, 5, 16, 0, 0, 0)),
    ];
    for (expr, next) in cases {
        let s = CronSchedule::parse(expr, "UTC").unwrap();
        assert_eq!(s.next_after(t).unwrap(), next, "{expr}");
        assert_eq!(s.expr(), expr);
    }
}

fn reason(expr: &str) -> String {
    match CronSchedule::parse(expr, "UTC") {
        Err(CoreError::InvalidCron { reason, .. }) => reason,
        other => panic!("{expr}: expected InvalidCron, got {other:?}"),
    }
}

#[test]
fn refuses_bad_expressions() {
    assert!(reason("@reboot").contains("@reboot"));
    assert!(reason("@every 5m").contains("unknown macro"));
    assert!(reason("0 0 3 * * * 2026").contains("year"));
    assert!(reason("* * * *").contains("got 4"));
    assert!(reason("").contains("empty"));
    assert!(reason("   ").contains("empty"));
    for bad in [
        "61 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * * 13 *",
        "x * * * *",
        "*/0 * * * *",
    ] {
        reason(bad);
    }
}

#[test]
fn refuses_a_pattern_that_never_fires() {
    let err = CronSchedule::parse("0 0 30 2 *", "UTC").unwrap_err();
    assert!(matches!(err, CoreError::NoOccurrence { .. }), "{err:?}");
}

#[test]
fn refuses_unknown_zones() {
    for zone in ["Mars/Olympus", "", "berlin", "+02:00", "Europe/Berlin "] {
        let err = CronSchedule::parse("* * * * *", zone).unwrap_err();
        assert!(
            matches!(err, CoreError::UnknownTimeZone(_)),
            "{zone}: {err:?}"
        );
    }
    assert!(CronSchedule::parse("* * * * *", "America/New_York").is_ok());
}

#[test]
fn latest_is_none_before_the_first_representable_occurrence() {
    let s = CronSchedule::parse("0 0 1 1 *", "UTC").unwrap();
    let before_year_one = utc(1, 1, 1, 0, 0, 0) - 1;
    assert_eq!(s.latest_at_or_before(before_year_one).unwrap(), None);
}

/// A fixed-time job whose wall clock time falls in the spring-forward gap runs at the first
/// instant after the gap (03:00 local), once.
#[test]
fn daily_job_in_spring_gap_fires_once_at_the_gap_end() {
    for (zone, (y, mo, d)) in [
        ("Europe/Berlin", (2026, 3, 29)),
        ("America/New_York", (2026, 3, 8)),
    ] {
        let s = CronSchedule::parse("30 2 * * *", zone).unwrap();
        let day = day_start_utc(y, mo, d);
        let fires = occurrences(&s, day - 12 * HOUR, day + 36 * HOUR);
        let gap_end = local(zone, y, mo, d, 3, 0);
        let on_the_day: Vec<_> = fires
            .iter()
            .filter(|&&t| t >= gap_end - 2 * HOUR && t < gap_end + 20 * HOUR)
            .collect();
        assert_eq!(on_the_day, vec![&gap_end], "{zone}: {fires:?}");
        assert_eq!(
            s.latest_at_or_before(gap_end + HOUR).unwrap(),
            Some(gap_end),
            "{zone}"
        );
    }
}

/// In the autumn fold the wall clock repeats an hour (02:00-03:00 in Berlin, 01:00-02:00 in
/// New York); a fixed-time job in that hour fires on the earlier instant only.
#[test]
fn daily_job_in_autumn_fold_fires_once_on_the_earlier_instant() {
    for (zone, expr, (y, mo, d), earlier_utc) in [
        ("Europe/Berlin", "30 2 * * *", (2026, 10, 25), (0, 30)),
        ("America/New_York", "30 1 * * *", (2026, 11, 1), (5, 30)),
    ] {
        let s = CronSchedule::parse(expr, zone).unwrap();
        let earlier = utc(y, mo, d, earlier_utc.0, earlier_utc.1, 0);
        let fires = occurrences(&s, earlier - 12 * HOUR, earlier + 12 * HOUR);
        assert_eq!(fires, vec![earlier], "{zone}");
        assert_eq!(
            s.latest_at_or_before(earlier + HOUR).unwrap(),
            Some(earlier),
            "{zone}: the repeated wall clock time is not an occurrence"
        );
    }
}

/// An interval job keeps a steady 15-minute beat on the absolute time line through both
/// transitions: nothing repeats, nothing goes backwards, no slot is invented or lost.
#[test]
fn quarter_hour_job_keeps_its_beat_through_gap_and_fold() {
    for (zone, days) in [
        ("Europe/Berlin", [(2026, 3, 29), (2026, 10, 25)]),
        ("America/New_York", [(2026, 3, 8), (2026, 11, 1)]),
    ] {
        let s = CronSchedule::parse("*/15 * * * *", zone).unwrap();
        for (y, mo, d) in days {
            let day = day_start_utc(y, mo, d);
            let fires = occurrences(&s, day - 12 * HOUR, day + 36 * HOUR);
            assert_eq!(fires.len(), 48 * 4, "{zone} {y}-{mo}-{d}");
            assert!(
                fires.windows(2).all(|w| w[1] - w[0] == 15 * MINUTE),
                "{zone} {y}-{mo}-{d}: {fires:?}"
            );
            for &t in &fires {
                assert_eq!(s.latest_at_or_before(t).unwrap(), Some(t), "{zone}");
                assert_eq!(
                    s.latest_at_or_before(t + 15 * MINUTE - 1).unwrap(),
                    Some(t),
                    "{zone}"
                );
            }
        }
    }
}

/// `qlsched cron` marks an occurrence a gap moved, and the two instants of a repeated wall time.
#[test]
fn dst_notes_mark_gaps_and_folds() {
    for (zone, (y, mo, d)) in [
        ("Europe/Berlin", (2026, 3, 29)),
        ("America/New_York", (2026, 3, 8)),
    ] {
        let s = CronSchedule::parse("30 2 * * *", zone).unwrap();
        let gap_end = local(zone, y, mo, d, 3, 0);
        assert_eq!(s.dst_note(gap_end), Some(DstNote::GapMoved), "{zone}");
        assert_eq!(s.dst_note(gap_end + 24 * HOUR + 30 * MINUTE - HOUR), None);
        let hourly = CronSchedule::parse("0 * * * *", zone).unwrap();
        assert_eq!(
            hourly.dst_note(gap_end),
            None,
            "{zone}: 03:00 is hourly's own"
        );
    }
    for (zone, (y, mo, d), first_utc) in [
        ("Europe/Berlin", (2026, 10, 25), (0, 30)),
        ("America/New_York", (2026, 11, 1), (5, 30)),
    ] {
        let s = CronSchedule::parse("*/30 * * * *", zone).unwrap();
        let first = utc(y, mo, d, first_utc.0, first_utc.1, 0);
        assert_eq!(s.dst_note(first), Some(DstNote::FoldFirst), "{zone}");
        assert_eq!(
            s.dst_note(first + HOUR),
            Some(DstNote::FoldSecond),
            "{zone}"
        );
        assert_eq!(s.dst_note(first + 2 * HOUR), None, "{zone}");
        assert!(s.local_text(first).contains(":30:00"), "{zone}");
    }
}
/// The occurrences of `expr` in `zone` in `[from, to)`, as UTC text for readable assertions.
fn listed(expr: &str, zone: &str, from: i64, to: i64) -> Vec<String> {
    let s = CronSchedule::parse(expr, zone).unwrap();
    s.occurrences_between(from, to, 1_000)
        .unwrap()
        .into_iter()
        .map(crate::time::utc)
        .collect()
}

fn day_in_utc(y: i32, mo: u32, d: u32) -> (i64, i64) {
    let start = day_start_utc(y, mo, d);
    (start - 24 * HOUR, start + 24 * HOUR)
}

/// The worked examples of docs/DECISIONS.md, Europe/Berlin, spring 2027: 02:00-02:59 does not
/// exist on 28 March. Fixed-time jobs run their skipped wall times once, at 03:00 CEST
/// (01:00Z); a wildcard job has no 02:xx that day.
#[test]
fn worked_examples_berlin_spring() {
    let (from, to) = day_in_utc(2027, 3, 28);
    let berlin = |expr| listed(expr, "Europe/Berlin", from, to);
    assert_eq!(
        berlin("30 2 * * *"),
        ["2027-03-27T01:30:00.000Z", "2027-03-28T01:00:00.000Z"]
    );
    assert_eq!(
        berlin("30 2,14 * * *"),
        [
            "2027-03-27T01:30:00.000Z",
            "2027-03-27T13:30:00.000Z",
            "2027-03-28T01:00:00.000Z",
            "2027-03-28T12:30:00.000Z"
        ]
    );
    assert_eq!(
        berlin("0,30 2 * * *"),
        [
            "2027-03-27T01:00:00.000Z",
            "2027-03-27T01:30:00.000Z",
            "2027-03-28T01:00:00.000Z"
        ]
    );
    let quarters = berlin("*/15 * * * *");
    let around: Vec<&str> = quarters
        .iter()
        .map(String::as_str)
        .filter(|t| t.starts_with("2027-03-28T00:") || t.starts_with("2027-03-28T01:00"))
        .collect();
    assert_eq!(
        around,
        [
            "2027-03-28T00:00:00.000Z",
            "2027-03-28T00:15:00.000Z",
            "2027-03-28T00:30:00.000Z",
            "2027-03-28T00:45:00.000Z",
            "2027-03-28T01:00:00.000Z"
        ],
        "01:45 CET is followed by 03:00 CEST"
    );
    // Still every 15 minutes of real time: the gap removes wall times, not instants.
    assert_eq!(quarters.len(), 48 * 4);
}

/// Europe/Berlin, autumn 2027: 02:00-02:59 happens twice on 31 October, first in CEST (00:xxZ)
/// then in CET (01:xxZ). Fixed-time jobs run once, in CEST; a wildcard job runs both.
#[test]
fn worked_examples_berlin_autumn() {
    let (from, to) = day_in_utc(2027, 10, 31);
    let berlin = |expr| listed(expr, "Europe/Berlin", from, to);
    assert_eq!(
        berlin("30 2 * * *"),
        ["2027-10-30T00:30:00.000Z", "2027-10-31T00:30:00.000Z"]
    );
    assert_eq!(
        berlin("30 2,14 * * *"),
        [
            "2027-10-30T00:30:00.000Z",
            "2027-10-30T12:30:00.000Z",
            "2027-10-31T00:30:00.000Z",
            "2027-10-31T13:30:00.000Z"
        ]
    );
    assert_eq!(
        berlin("0,30 2 * * *")[2..],
        ["2027-10-31T00:00:00.000Z", "2027-10-31T00:30:00.000Z"]
    );
    let in_the_fold: Vec<String> = berlin("*/15 * * * *")
        .into_iter()
        .filter(|t| t.starts_with("2027-10-31T00:") || t.starts_with("2027-10-31T01:"))
        .collect();
    assert_eq!(in_the_fold.len(), 8, "{in_the_fold:?}");
    // The wildcard `*/30 2 * * *` follows the clock too: four runs in the repeated hour.
    assert_eq!(berlin("*/30 2 * * *")[2..].len(), 4);
}

/// Australia/Lord_Howe moves its clock by half an hour: 02:00-02:29 is skipped on 3 October
/// 2027 (to +11:00), 01:30-01:59 repeats on 4 April 2027 (back to +10:30).
#[test]
fn worked_examples_lord_howe() {
    let (from, to) = day_in_utc(2027, 10, 3);
    let gap = |expr| {
        listed(
            expr,
            "Australia/Lord_Howe",
            from - 24 * HOUR,
            to - 24 * HOUR,
        )
    };
    // 02:15 and 02:20 run once, at 02:30 +11:00 (15:30Z the day before in UTC).
    assert!(gap("15,20 2 * * *").contains(&"2027-10-02T15:30:00.000Z".to_owned()));
    assert_eq!(
        gap("15,20 2 * * *")
            .iter()
            .filter(|t| t.starts_with("2027-10-02T15"))
            .count(),
        1
    );
    assert!(
        gap("*/10 2 * * *")
            .iter()
            .all(|t| !t.starts_with("2027-10-02T15:2"))
    );
    let (from, to) = day_in_utc(2027, 4, 4);
    let fold = |expr| {
        listed(
            expr,
            "Australia/Lord_Howe",
            from - 24 * HOUR,
            to - 24 * HOUR,
        )
    };
    let fixed = fold("45 1 * * *");
    assert!(
        fixed.contains(&"2027-04-03T14:45:00.000Z".to_owned()),
        "{fixed:?}"
    );
    assert!(
        !fixed.contains(&"2027-04-03T15:15:00.000Z".to_owned()),
        "{fixed:?}"
    );
    let wildcard = fold("*/15 1 * * *");
    for t in ["2027-04-03T14:45:00.000Z", "2027-04-03T15:15:00.000Z"] {
        assert!(wildcard.contains(&t.to_owned()), "{t}: {wildcard:?}");
    }
}

/// cronie's flags: a job is fixed-time when no time field begins with `*`.
#[test]
fn fixed_time_is_no_time_field_beginning_with_a_star() {
    for (expr, fixed) in [
        ("30 2 * * *", true),
        ("30 2,14 * * *", true),
        ("0,30 2 * * *", true),
        ("0 1-3 * * *", true),
        ("0-59/15 2 * * *", true),
        ("7,*/15 2 * * *", true),
        ("*/15 2 * * *", false),
        ("*/15,7 2 * * *", false),
        ("0 * * * *", false),
        ("0 */2 * * *", false),
        ("0 30 2 * * *", true),
        ("* 30 2 * * *", false),
        ("*/10 30 2 * * *", false),
        ("@daily", true),
        ("@weekly", true),
        ("@hourly", false),
    ] {
        let s = CronSchedule::parse(expr, "UTC").unwrap();
        assert_eq!(s.is_fixed_time(), fixed, "{expr}");
    }
}

fn next_days(expr: &str, n: usize) -> Vec<String> {
    listed(
        expr,
        "UTC",
        utc(2026, 1, 1, 0, 0, 0),
        utc(2027, 1, 1, 0, 0, 0),
    )
    .into_iter()
    .take(n)
    .map(|t| t[..10].to_owned())
    .collect()
}

/// The day rule: day-of-month OR day-of-week only when both are restricted; a field that
/// begins with `*` (such as `*/2`) is unrestricted, so the other alone decides with AND.
#[test]
fn day_fields_are_read_as_cronie_reads_them() {
    // Odd days of the month that are Mondays.
    assert_eq!(
        next_days("0 0 */2 * 1", 4),
        ["2026-01-05", "2026-01-19", "2026-02-09", "2026-02-23"]
    );
    // The 1st, the 15th, and every Monday.
    assert_eq!(
        next_days("0 0 1,15 * MON", 5),
        [
            "2026-01-01",
            "2026-01-05",
            "2026-01-12",
            "2026-01-15",
            "2026-01-19"
        ]
    );
    // Sunday is 0, 7 and SUN; FRI-SUN ends on Sunday.
    let sundays = next_days("0 0 * * 0", 3);
    assert_eq!(sundays, ["2026-01-04", "2026-01-11", "2026-01-18"]);
    assert_eq!(next_days("0 0 * * 7", 3), sundays);
    assert_eq!(next_days("0 0 * * sun", 3), sundays);
    assert_eq!(
        next_days("0 0 * * FRI-SUN", 4),
        ["2026-01-02", "2026-01-03", "2026-01-04", "2026-01-09"]
    );
    // February 29 and the 31st.
    assert_eq!(next_days("0 0 29 2 *", 1), Vec::<String>::new());
    assert_eq!(
        CronSchedule::parse("0 0 29 FEB *", "UTC")
            .unwrap()
            .next_after(utc(2026, 1, 1, 0, 0, 0))
            .unwrap(),
        utc(2028, 2, 29, 0, 0, 0)
    );
    assert_eq!(
        next_days("0 0 31 * *", 3),
        ["2026-01-31", "2026-03-31", "2026-05-31"]
    );
    // A * inside a list is all values, as cronie reads it.
    assert_eq!(next_days("0 0 *,5 * *", 2), ["2026-01-01", "2026-01-02"]);
}

/// The messages quote the field and the token as written.
#[test]
fn messages_name_the_field_and_quote_the_token() {
    for (expr, message) in [
        ("0 1, * * *", "field hour: '1,' has an empty list element"),
        ("0 ,1 * * *", "field hour: ',1' has an empty list element"),
        (
            "0 0 * * Monday",
            "field day-of-week: 'Monday' is not a day name; use MON or 1",
        ),
        (
            "0 0 1 January *",
            "field month: 'January' is not a month name; use JAN or 1",
        ),
        (
            "0 0 * * sat/3",
            "field day-of-week: 'sat/3': a step follows * or a range, such as sat-SUN/3",
        ),
        (
            "0 22-2 * * *",
            "field hour: '22-2' is a reversed range; cron ranges do not wrap around: write \
             22-23,0-2",
        ),
        (
            "0 0 * DEC-FEB *",
            "field month: 'DEC-FEB' is a reversed range; cron ranges do not wrap around: \
             write DEC-12,1-FEB",
        ),
        ("61 * * * *", "field minute: '61' is out of range 0-59"),
        ("0 0 0 * *", "field day-of-month: '0' is out of range 1-31"),
        ("0 0 * 13 *", "field month: '13' is out of range 1-12"),
        ("0 0 * * 8", "field day-of-week: '8' is out of range 0-7"),
        (
            "*/0 * * * *",
            "field minute: '*/0': a step must be 1 or more",
        ),
        (
            "*/x * * * *",
            "field minute: '*/x': the step 'x' is not a number",
        ),
        ("x * * * *", "field minute: 'x' is not a number 0-59"),
        (
            "0 0 ? * *",
            "field day-of-month: '?' is Quartz syntax, not cron's; write *",
        ),
        (
            "0 0 L * *",
            "field day-of-month: 'L': L, W and # are Quartz syntax",
        ),
        (
            "0 0 15W * *",
            "field day-of-month: '15W': L, W and # are Quartz syntax",
        ),
        (
            "0 0 * * 5#3",
            "field day-of-week: '5#3': L, W and # are Quartz syntax",
        ),
        (
            "0 0 * * 5L",
            "field day-of-week: '5L': L, W and # are Quartz syntax",
        ),
        ("0~30 * * * *", "field minute: '0~30': ~ (a random value"),
        ("-5 * * * *", "field minute: '-5' is not a range"),
        ("61 0 0 * * *", "field second: '61' is out of range 0-59"),
        (
            "0 0 * * mon/2",
            "field day-of-week: 'mon/2': a step follows * or a range, such as mon-SAT/2",
        ),
        (
            "1-2-3 * * * *",
            "field minute: '1-2-3': '2-3' is not a number 0-59",
        ),
        (
            "/5 * * * *",
            "field minute: '/5': a step follows * or a range, such as */5",
        ),
        (
            "*/4294967297 * * * *",
            "field minute: '*/4294967297': the step '4294967297' is too large",
        ),
        (
            "0 0 * * sal",
            "field day-of-week: 'sal' is not a day name (SUN-SAT) or a number 0-7",
        ),
        (
            "0 0 5L * *",
            "field day-of-month: '5L': L, W and # are Quartz syntax",
        ),
        (
            "0 0 * * xyz",
            "field day-of-week: 'xyz' is not a day name (SUN-SAT) or a number 0-7",
        ),
    ] {
        let got = reason(expr);
        assert!(got.starts_with(message), "{expr}: {got}");
    }
}

/// The same pattern in five fields and in six with seconds 0 is one schedule.
#[test]
fn five_fields_are_six_with_second_zero() {
    let five = CronSchedule::parse("30 2,14 * * *", "Europe/Berlin").unwrap();
    let six = CronSchedule::parse("0 30 2,14 * * *", "Europe/Berlin").unwrap();
    assert_eq!(five.fields, six.fields);
}

/// Occurrences end at 9999-12-31T23:59:59Z; nothing is found past it, and nothing is owed
/// before 0001-01-01.
#[test]
fn the_evaluated_instants_end_in_year_9999() {
    let yearly = CronSchedule::parse("0 0 1 1 *", "UTC").unwrap();
    let last = utc(9999, 1, 1, 0, 0, 0);
    assert_eq!(yearly.next_after(last - 1).unwrap(), last);
    assert!(matches!(
        yearly.next_after(last),
        Err(CoreError::NoOccurrence { .. })
    ));
    assert_eq!(yearly.count_between(last, i64::MAX, 10).unwrap(), (1, true));
    assert_eq!(yearly.latest_at_or_before(i64::MAX).unwrap(), Some(last));
    assert_eq!(yearly.latest_at_or_before(i64::MIN).unwrap(), None);
    assert_eq!(yearly.next_after(i64::MIN).unwrap(), utc(1, 1, 1, 0, 0, 0));
}
/// A fixed-time list job's occurrence at the jump is marked moved; a wildcard job's occurrence
/// at the same instant is its own, not moved.
#[test]
fn the_occurrence_at_a_jump_is_marked_moved_for_fixed_time_jobs_only() {
    let jump = utc(2027, 3, 28, 1, 0, 0);
    for (expr, note) in [
        ("0,30 2 * * *", Some(DstNote::GapMoved)),
        ("0 2,3 * * *", Some(DstNote::GapMoved)),
        ("0 3 * * *", None),
        ("*/15 * * * *", None),
        ("0 * * * *", None),
    ] {
        let s = CronSchedule::parse(expr, "Europe/Berlin").unwrap();
        assert_eq!(s.next_at_or_after(jump).unwrap(), jump, "{expr}");
        assert_eq!(s.dst_note(jump), note, "{expr}");
    }
}
