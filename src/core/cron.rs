//! Cron evaluation in a time zone, in epoch milliseconds, on top of croner 4.0.3 (the first release
//! without the spring-forward double fire; docs/DESIGN.md §7). This module owns which expressions
//! qlsched accepts (docs/DESIGN.md §5.3) and how DST gaps and folds resolve; the tests pin croner's
//! behaviour so an upgrade that changes it fails here first.

use chrono::{DateTime, TimeZone as _};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds};

use super::error::CoreError;

/// The `@` macros qlsched accepts, with the five-field pattern each stands for. croner knows most of
/// these but not `@midnight`, so they are expanded here, in one place.
const MACROS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// Where the "does it ever fire" check starts; any pattern that fires at all fires within a few
/// years of any instant, since qlsched refuses year fields.
const VALIDATION_ORIGIN_MS: i64 = 946_684_800_000; // 2000-01-01T00:00:00Z

/// A validated cron expression bound to its time zone.
///
/// Occurrences are wall clock times in the zone, with croner's DST rules (pinned by the tests
/// below): a fixed-time job whose time falls in a spring-forward gap fires once, at the first
/// instant after the gap; in an autumn fold a fixed-time job fires on the earlier instant only,
/// while an interval job (such as every 15 minutes) fires on both, which are distinct instants.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    cron: Cron,
    time_zone: Tz,
    expr: String,
}

impl CronSchedule {
    /// Accepts five fields, six with leading seconds, or one of the `@` macros, in an IANA time zone.
    ///
    /// # Errors
    ///
    /// [`CoreError::InvalidCron`] for a malformed expression, [`CoreError::UnknownTimeZone`] for a
    /// zone chrono-tz does not know, [`CoreError::NoOccurrence`] for a pattern that never fires
    /// (such as February 30).
    pub fn parse(expr: &str, time_zone: &str) -> Result<Self, CoreError> {
        let time_zone: Tz = time_zone
            .parse()
            .map_err(|_| CoreError::UnknownTimeZone(time_zone.to_owned()))?;
        let pattern = expand(expr)?;
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(pattern)
            .map_err(|e| invalid(expr, e.to_string()))?;
        let schedule = Self {
            cron,
            time_zone,
            expr: expr.to_owned(),
        };
        schedule.next_after(VALIDATION_ORIGIN_MS)?;
        Ok(schedule)
    }

    /// The expression as written, before macro expansion.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// The IANA name of the schedule's time zone.
    pub fn time_zone(&self) -> &str {
        self.time_zone.name()
    }

    /// The first occurrence strictly after `at_ms`.
    ///
    /// # Errors
    ///
    /// [`CoreError::NoOccurrence`] when there is none before croner's upper year limit, and
    /// [`CoreError::OutOfBounds`] when `at_ms` is not a representable instant.
    pub fn next_after(&self, at_ms: i64) -> Result<i64, CoreError> {
        let at = self.whole_second_at_or_before(at_ms)?;
        self.cron
            .find_next_occurrence(&at, false)
            .map(|next| next.timestamp_millis())
            .map_err(|_| CoreError::NoOccurrence {
                expr: self.expr.clone(),
            })
    }

    /// The latest occurrence at or before `at_ms`, or `None` when the pattern never fired before it.
    ///
    /// This is one backward search from `at_ms`, so its cost does not depend on how many occurrences
    /// lie between `at_ms` and any cursor (docs/DESIGN.md §4.4): finding L costs the same for one
    /// missed occurrence as for a million.
    ///
    /// # Errors
    ///
    /// [`CoreError::OutOfBounds`] when `at_ms` is not a representable instant.
    pub fn latest_at_or_before(&self, at_ms: i64) -> Result<Option<i64>, CoreError> {
        let at = self.whole_second_at_or_before(at_ms)?;
        // croner reports "no earlier match" as a search error (year limit or search budget); the
        // pattern was proven to fire at parse time, so any failure here means none before `at_ms`.
        Ok(self
            .cron
            .find_previous_occurrence(&at, true)
            .ok()
            .map(|latest| latest.timestamp_millis()))
    }

    /// The first occurrence at or after `at_ms`.
    ///
    /// # Errors
    ///
    /// Those of [`CronSchedule::next_after`].
    pub fn next_at_or_after(&self, at_ms: i64) -> Result<i64, CoreError> {
        // Occurrences are whole seconds, so "strictly after at - 1 ms" is "at or after at".
        self.next_after(at_ms.saturating_sub(1))
    }

    /// The latest occurrence strictly before `at_ms`, or `None` when there is none.
    ///
    /// # Errors
    ///
    /// Those of [`CronSchedule::latest_at_or_before`].
    pub fn latest_before(&self, at_ms: i64) -> Result<Option<i64>, CoreError> {
        self.latest_at_or_before(at_ms.saturating_sub(1))
    }

    /// Counts the occurrences in `[first_ms, last_ms]` by walking them, but at most `cap`:
    /// `(count, true)` when the walk reached `last_ms`, `(cap, false)` when it stopped there, so
    /// the caller's cost is bounded whatever the span.
    ///
    /// # Errors
    ///
    /// Those of [`CronSchedule::next_after`].
    pub fn count_between(
        &self,
        first_ms: i64,
        last_ms: i64,
        cap: u64,
    ) -> Result<(u64, bool), CoreError> {
        let mut count = 0;
        let mut at = self.next_at_or_after(first_ms)?;
        while at <= last_ms {
            if count == cap {
                return Ok((cap, false));
            }
            count += 1;
            at = self.next_after(at)?;
        }
        Ok((count, true))
    }

    /// Every occurrence in `[from_ms, to_ms)`, in order, but at most `limit` of them.
    ///
    /// # Errors
    ///
    /// Those of [`CronSchedule::next_after`].
    pub fn occurrences_between(
        &self,
        from_ms: i64,
        to_ms: i64,
        limit: usize,
    ) -> Result<Vec<i64>, CoreError> {
        let mut out = Vec::new();
        if from_ms >= to_ms {
            return Ok(out);
        }
        let mut at = self.next_at_or_after(from_ms)?;
        while at < to_ms && out.len() < limit {
            out.push(at);
            at = self.next_after(at)?;
        }
        Ok(out)
    }

    /// croner searches whole seconds; flooring first keeps "strictly after" and "at or before"
    /// exact for instants with a millisecond part.
    fn whole_second_at_or_before(&self, at_ms: i64) -> Result<DateTime<Tz>, CoreError> {
        self.time_zone
            .timestamp_opt(at_ms.div_euclid(1_000), 0)
            .single()
            .ok_or_else(|| CoreError::OutOfBounds {
                field: "time",
                value: at_ms.to_string(),
                bounds: "a representable instant in epoch milliseconds",
            })
    }
}

/// How daylight saving time bears on one occurrence in its zone (`qlsched cron` marks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DstNote {
    /// The wall time the pattern names was skipped by a spring-forward gap: the occurrence moved
    /// to the first instant after the gap, and its wall time is not one the pattern names.
    GapMoved,
    /// The wall time repeats in an autumn fold, and this is its first instant.
    FoldFirst,
    /// The wall time repeats in an autumn fold, and this is its second instant.
    FoldSecond,
}

impl DstNote {
    /// A few words for a table.
    pub fn describe(self) -> &'static str {
        match self {
            DstNote::GapMoved => "moved: its wall time falls in a DST gap",
            DstNote::FoldFirst => "DST fold: wall time repeats, first instant",
            DstNote::FoldSecond => "DST fold: wall time repeats, second instant",
        }
    }
}

impl CronSchedule {
    /// The wall time of `at_ms` in the schedule's zone, as `2026-03-29 03:00:00 CEST`.
    pub fn local_text(&self, at_ms: i64) -> String {
        self.time_zone
            .timestamp_millis_opt(at_ms)
            .single()
            .map_or_else(
                || at_ms.to_string(),
                |t| t.format("%Y-%m-%d %H:%M:%S %Z").to_string(),
            )
    }

    /// Whether a DST gap moved the occurrence at `at_ms`, or a fold repeats its wall time.
    pub fn dst_note(&self, at_ms: i64) -> Option<DstNote> {
        use chrono::LocalResult;
        let local = self.time_zone.timestamp_millis_opt(at_ms).single()?;
        if let LocalResult::Ambiguous(first, _) =
            self.time_zone.from_local_datetime(&local.naive_local())
        {
            return Some(if first.timestamp_millis() == at_ms {
                DstNote::FoldFirst
            } else {
                DstNote::FoldSecond
            });
        }
        match self.cron.is_time_matching(&local) {
            Ok(false) => Some(DstNote::GapMoved),
            _ => None,
        }
    }
}

/// Checks the shape croner would otherwise accept too loosely (a seventh, year field; unknown
/// macros) and returns the pattern to hand to croner.
fn expand(expr: &str) -> Result<&str, CoreError> {
    let trimmed = expr.trim();
    if trimmed.starts_with('@') {
        return MACROS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(trimmed))
            .map(|(_, pattern)| *pattern)
            .ok_or_else(|| invalid(expr, macro_reason(trimmed)));
    }
    match trimmed.split_whitespace().count() {
        5 | 6 => Ok(trimmed),
        0 => Err(invalid(expr, "empty expression".into())),
        7 => Err(invalid(
            expr,
            "seven fields: a year field is not supported; use five fields, or six with leading seconds"
                .into(),
        )),
        n => Err(invalid(
            expr,
            format!("expected five fields, or six with leading seconds; got {n}"),
        )),
    }
}

fn macro_reason(name: &str) -> String {
    if name.eq_ignore_ascii_case("@reboot") {
        "@reboot is not a schedule: a cluster of replicas has no single boot to fire on".into()
    } else {
        "unknown macro; expected one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly".into()
    }
}

fn invalid(expr: &str, reason: String) -> CoreError {
    CoreError::InvalidCron {
        expr: expr.to_owned(),
        reason,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chrono::{NaiveDate, Utc};

    /// Epoch milliseconds of a wall clock time that exists exactly once in `zone`.
    fn local(zone: &str, y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
        let tz: Tz = zone.parse().unwrap();
        tz.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .unwrap()
            .timestamp_millis()
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
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

    /// croner carries a fixed-time job whose wall clock time falls in the spring-forward gap to the
    /// first instant after the gap (03:00 local), once.
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
}
