//! Cron as cron users know it, evaluated in a time zone, in epoch milliseconds.
//!
//! This module owns which expressions qlsched accepts and what their occurrences are: the grammar
//! and day rule of cronie (`man 5 crontab`), and cronie's daylight-saving rule applied in each
//! trigger's own zone (docs/DECISIONS.md, "Cron, as cronie has it"). It is qlsched's own small
//! parser and evaluator because no crate does what is needed: the crates at hand read the day
//! fields, a `*` inside a list and the daylight-saving changes otherwise than cronie, and the
//! replicas' decision, the accounting, `backfill`, `inspect trigger` and `qlsched cron` must all
//! agree with what a crontab user expects. Every one of them goes through [`CronSchedule`]; the
//! tests check it against an independent model (`core::cron_oracle`).
//!
//! An expression becomes a bit set per field; a search walks wall-clock (zone-free) times with
//! those sets, and each matching wall time is mapped to instants by chrono-tz with the rule:
//!
//! - a *fixed-time* job (neither its minute nor its hour field, nor a six-field expression's
//!   seconds field, begins with `*`) runs a wall time that a spring-forward gap skips once, at the
//!   instant the gap ends (several skipped wall times are that one occurrence), and a wall time an
//!   autumn fold repeats once, at its first instant;
//! - any other (*wildcard*) job follows the wall clock: every instant whose wall time matches,
//!   both instants of a repeated wall time, none for a skipped one.

use chrono::{
    DateTime, Datelike as _, LocalResult, NaiveDate, NaiveDateTime, Offset as _, TimeZone as _,
};
use chrono_tz::{GapInfo, Tz};

use super::error::CoreError;

/// The `@` macros qlsched accepts, with the five-field pattern each stands for; the expansion has
/// the same `*` flags cronie sets for the macro (`@hourly` is a wildcard job, the others are
/// fixed-time).
const MACROS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// The instants qlsched evaluates cron in, in epoch seconds: 0001-01-01T00:00:00Z to
/// 9999-12-31T23:59:59Z, the years RFC 3339 can write. Before the first there is no occurrence;
/// after the last, none is found.
pub const FIRST_INSTANT_S: i64 = -62_135_596_800;
pub const LAST_INSTANT_S: i64 = 253_402_300_799;
/// Wall-clock searches stop two days beyond the instants, past any zone's offset.
const WALL_MARGIN_S: i64 = 2 * DAY_S;
const DAY_S: i64 = 86_400;

/// One field of the expression: its name in messages, its bounds and its names, if any.
struct FieldKind {
    name: &'static str,
    low: u32,
    high: u32,
    names: &'static [&'static str],
    /// How a message suggests a name and its number (`use MON or 1`).
    noun: &'static str,
}

const SECOND: FieldKind = FieldKind {
    name: "second",
    low: 0,
    high: 59,
    names: &[],
    noun: "",
};
const MINUTE: FieldKind = FieldKind {
    name: "minute",
    low: 0,
    high: 59,
    names: &[],
    noun: "",
};
const HOUR: FieldKind = FieldKind {
    name: "hour",
    low: 0,
    high: 23,
    names: &[],
    noun: "",
};
const DAY_OF_MONTH: FieldKind = FieldKind {
    name: "day-of-month",
    low: 1,
    high: 31,
    names: &[],
    noun: "",
};
const MONTH: FieldKind = FieldKind {
    name: "month",
    low: 1,
    high: 12,
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
    noun: "month",
};
const DAY_OF_WEEK: FieldKind = FieldKind {
    name: "day-of-week",
    low: 0,
    high: 7,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
    noun: "day",
};

/// A parsed field: the values it allows (bit `v` for value `v`) and whether it begins with `*`,
/// which is what cronie's day and daylight-saving rules look at.
struct Parsed {
    bits: u64,
    star: bool,
}

/// The expression as bit sets, and the two flags the rules need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fields {
    seconds: u64,
    minutes: u64,
    hours: u64,
    /// Bits 1 to 31.
    days_of_month: u64,
    /// Bits 1 to 12.
    months: u64,
    /// Bits 0 to 6, Sunday 0 (a 7 is read as 0).
    days_of_week: u64,
    /// Day-of-month OR day-of-week, when both are restricted (neither begins with `*`); AND
    /// otherwise, as cronie reads them.
    either_day: bool,
    /// No time field begins with `*`: gaps and folds run its wall times once.
    fixed_time: bool,
}

/// A validated cron expression bound to its time zone.
///
/// Occurrences are whole seconds. See the module docs for the daylight-saving rule.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    fields: Fields,
    time_zone: Tz,
    expr: String,
}

/// How a wall time exists in the zone.
enum Wall {
    Once(i64),
    /// A fold: the first and the second instant.
    Twice(i64, i64),
    /// A gap: the instant the gap ends, when chrono-tz knows it.
    Skipped(Option<i64>),
}

/// A fold around a repeated wall time: the repeated wall times `[start, end)` and the offsets
/// before and after.
struct Fold {
    start: i64,
    end: i64,
    first_offset: i64,
    second_offset: i64,
}

impl CronSchedule {
    /// Accepts five fields, six with leading seconds, or one of the `@` macros, in an IANA time zone.
    ///
    /// # Errors
    ///
    /// [`CoreError::InvalidCron`] for a malformed expression, with the field and the token as
    /// written; [`CoreError::UnknownTimeZone`] for a zone chrono-tz does not know;
    /// [`CoreError::NoOccurrence`] for a pattern that never fires (such as February 30).
    pub fn parse(expr: &str, time_zone: &str) -> Result<Self, CoreError> {
        let time_zone: Tz = time_zone
            .parse()
            .map_err(|_| CoreError::UnknownTimeZone(time_zone.to_owned()))?;
        let pattern = expand(expr)?;
        let fields = parse_fields(pattern).map_err(|reason| invalid(expr, reason))?;
        if !fields.can_fire() {
            return Err(CoreError::NoOccurrence {
                expr: expr.to_owned(),
            });
        }
        Ok(Self {
            fields,
            time_zone,
            expr: expr.to_owned(),
        })
    }

    /// The expression as written, before macro expansion.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// The IANA name of the schedule's time zone.
    pub fn time_zone(&self) -> &str {
        self.time_zone.name()
    }

    /// Whether the gap and fold rule for fixed-time jobs applies (module docs).
    pub fn is_fixed_time(&self) -> bool {
        self.fields.fixed_time
    }

    /// The first occurrence strictly after `at_ms`.
    ///
    /// # Errors
    ///
    /// [`CoreError::NoOccurrence`] when there is none up to 9999-12-31T23:59:59Z, the last
    /// instant qlsched evaluates cron in ([`LAST_INSTANT_S`]).
    pub fn next_after(&self, at_ms: i64) -> Result<i64, CoreError> {
        let at = at_ms.div_euclid(1_000).max(FIRST_INSTANT_S - 1);
        let next = if at >= LAST_INSTANT_S {
            None
        } else if self.fields.fixed_time {
            self.next_fixed(at)
        } else {
            self.next_wildcard(at)
        };
        next.filter(|&s| s <= LAST_INSTANT_S)
            .map(|s| s * 1_000)
            .ok_or_else(|| CoreError::NoOccurrence {
                expr: self.expr.clone(),
            })
    }

    /// The latest occurrence at or before `at_ms`, or `None` when the pattern never fired before
    /// it (or `at_ms` is before 0001-01-01).
    ///
    /// This is one backward search from `at_ms`, so its cost does not depend on how many occurrences
    /// lie between `at_ms` and any cursor (docs/DESIGN.md §4.4): finding L costs the same for one
    /// missed occurrence as for a million.
    ///
    /// # Errors
    ///
    /// None today; the `Result` keeps the signature of the other searches.
    pub fn latest_at_or_before(&self, at_ms: i64) -> Result<Option<i64>, CoreError> {
        let at = at_ms.div_euclid(1_000).min(LAST_INSTANT_S);
        if at < FIRST_INSTANT_S {
            return Ok(None);
        }
        let latest = if self.fields.fixed_time {
            self.latest_fixed(at)
        } else {
            self.latest_wildcard(at)
        };
        Ok(latest.filter(|&s| s >= FIRST_INSTANT_S).map(|s| s * 1_000))
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
        let Some(mut at) = self.next_or_end(first_ms.saturating_sub(1))? else {
            return Ok((0, true));
        };
        while at <= last_ms {
            if count == cap {
                return Ok((cap, false));
            }
            count += 1;
            match self.next_or_end(at)? {
                Some(next) => at = next,
                None => break,
            }
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
        let mut at = self.next_or_end(from_ms.saturating_sub(1))?;
        while let Some(next) = at
            && next < to_ms
            && out.len() < limit
        {
            out.push(next);
            at = self.next_or_end(next)?;
        }
        Ok(out)
    }

    /// [`CronSchedule::next_after`], with the end of the evaluated instants as `None`: a walk
    /// that reaches year 9999 has simply listed everything.
    fn next_or_end(&self, at_ms: i64) -> Result<Option<i64>, CoreError> {
        match self.next_after(at_ms) {
            Ok(next) => Ok(Some(next)),
            Err(CoreError::NoOccurrence { .. }) => Ok(None),
            Err(other) => Err(other),
        }
    }

    // The searches, in epoch seconds and wall seconds (seconds on a zone-free clock). `at` is a
    // whole second; the wall time of an instant is `at + offset`.

    /// Fixed-time: the occurrences are the matching wall times mapped by "first instant, or the
    /// gap's end", a map that never decreases; so the next occurrence is the map of the first
    /// match past the wall times that map to `at` or before.
    fn next_fixed(&self, at: i64) -> Option<i64> {
        let wall = self.wall_of(at);
        let mut from = match self.resolve(wall) {
            // In a fold's second pass every repeated wall time already ran.
            Wall::Twice(first, _) if first != at => self.fold(wall, first, at).end,
            _ => wall + 1,
        };
        loop {
            let matched = self.fields.next_match(from, wall_limit_up())?;
            match self.resolve(matched) {
                Wall::Once(t) | Wall::Twice(t, _) | Wall::Skipped(Some(t)) => return Some(t),
                // chrono-tz knows no end for this gap (the edge of its data): nothing to run.
                Wall::Skipped(None) => from = matched + 1,
            }
        }
    }

    /// The map of the last match among the wall times that map to `at` or before.
    fn latest_fixed(&self, at: i64) -> Option<i64> {
        let wall = self.wall_of(at);
        // In a fold's second pass, every repeated wall time ran at its first instant, before `at`.
        let mut to = match self.resolve(wall) {
            Wall::Twice(first, _) if first != at => self.fold(wall, first, at).end - 1,
            _ => wall,
        };
        loop {
            let matched = self.fields.previous_match(to, wall_limit_down())?;
            match self.resolve(matched) {
                Wall::Once(t) | Wall::Twice(t, _) | Wall::Skipped(Some(t)) => return Some(t),
                Wall::Skipped(None) => to = matched - 1,
            }
        }
    }

    /// Wildcard: every instant whose wall time matches. Outside folds that is the first match
    /// past `at`'s wall time; in a fold, the rest of the pass `at` is in comes first, then (from
    /// the first pass) the second pass from the fold's start.
    fn next_wildcard(&self, at: i64) -> Option<i64> {
        let wall = self.wall_of(at);
        let Wall::Twice(first, second) = self.resolve(wall) else {
            return self.first_instant_from(wall + 1);
        };
        let fold = self.fold(wall, first, second);
        let in_fold = |w: Option<i64>| w.filter(|&w| w < fold.end);
        if at == first {
            if let Some(w) = in_fold(self.fields.next_match(wall + 1, fold.end)) {
                return Some(w - fold.first_offset);
            }
            if let Some(w) = in_fold(self.fields.next_match(fold.start, fold.end)) {
                return Some(w - fold.second_offset);
            }
        } else if let Some(w) = in_fold(self.fields.next_match(wall + 1, fold.end)) {
            return Some(w - fold.second_offset);
        }
        self.first_instant_from(fold.end)
    }

    fn latest_wildcard(&self, at: i64) -> Option<i64> {
        let wall = self.wall_of(at);
        let Wall::Twice(first, second) = self.resolve(wall) else {
            return self.last_instant_to(wall);
        };
        let fold = self.fold(wall, first, second);
        let in_fold = |w: Option<i64>| w.filter(|&w| w >= fold.start);
        if at == second {
            if let Some(w) = in_fold(self.fields.previous_match(wall, fold.start)) {
                return Some(w - fold.second_offset);
            }
            if let Some(w) = in_fold(self.fields.previous_match(fold.end - 1, fold.start)) {
                return Some(w - fold.first_offset);
            }
        } else if let Some(w) = in_fold(self.fields.previous_match(wall, fold.start)) {
            return Some(w - fold.first_offset);
        }
        self.last_instant_to(fold.start - 1)
    }

    /// The earliest instant of the first matching wall time at or after `from` that exists.
    fn first_instant_from(&self, mut from: i64) -> Option<i64> {
        loop {
            let matched = self.fields.next_match(from, wall_limit_up())?;
            match self.resolve(matched) {
                Wall::Once(t) | Wall::Twice(t, _) => return Some(t),
                Wall::Skipped(Some(end)) => from = self.wall_of(end).max(matched + 1),
                Wall::Skipped(None) => from = matched + 1,
            }
        }
    }

    /// The latest instant of the last matching wall time at or before `to` that exists.
    fn last_instant_to(&self, mut to: i64) -> Option<i64> {
        loop {
            let matched = self.fields.previous_match(to, wall_limit_down())?;
            match self.resolve(matched) {
                Wall::Once(t) | Wall::Twice(_, t) => return Some(t),
                // Past the whole gap at once, not one skipped second at a time.
                Wall::Skipped(_) => to = self.gap_start(matched).unwrap_or(matched) - 1,
            }
        }
    }

    fn offset_at(&self, at: i64) -> i64 {
        DateTime::from_timestamp(at, 0).map_or(0, |t| {
            i64::from(
                self.time_zone
                    .offset_from_utc_datetime(&t.naive_utc())
                    .fix()
                    .local_minus_utc(),
            )
        })
    }

    fn wall_of(&self, at: i64) -> i64 {
        at + self.offset_at(at)
    }

    fn resolve(&self, wall: i64) -> Wall {
        let Some(naive) = naive(wall) else {
            return Wall::Skipped(None);
        };
        match self.time_zone.from_local_datetime(&naive) {
            LocalResult::Single(t) => Wall::Once(t.timestamp()),
            LocalResult::Ambiguous(a, b) => {
                let (a, b) = (a.timestamp(), b.timestamp());
                Wall::Twice(a.min(b), a.max(b))
            }
            LocalResult::None => Wall::Skipped(
                GapInfo::new(&naive, &self.time_zone)
                    .and_then(|gap| gap.end)
                    .map(|end| end.timestamp()),
            ),
        }
    }

    /// The first wall time of the gap `wall` falls in.
    fn gap_start(&self, wall: i64) -> Option<i64> {
        GapInfo::new(&naive(wall)?, &self.time_zone)
            .and_then(|gap| gap.begin)
            .map(|(start, _)| start.and_utc().timestamp())
            .filter(|&start| start <= wall)
    }

    /// The fold around a wall time that exists at `first` and `second`: the change is the one
    /// instant in `(first, second]` where the offset drops, found by bisection.
    fn fold(&self, wall: i64, first: i64, second: i64) -> Fold {
        let first_offset = wall - first;
        let second_offset = wall - second;
        let (mut before, mut change) = (first, second);
        while change - before > 1 {
            let mid = before + (change - before) / 2;
            if self.offset_at(mid) == first_offset {
                before = mid;
            } else {
                change = mid;
            }
        }
        Fold {
            start: change + second_offset,
            end: change + first_offset,
            first_offset,
            second_offset,
        }
    }
}

fn wall_limit_up() -> i64 {
    LAST_INSTANT_S + WALL_MARGIN_S
}

fn wall_limit_down() -> i64 {
    FIRST_INSTANT_S - WALL_MARGIN_S
}

fn naive(wall: i64) -> Option<NaiveDateTime> {
    DateTime::from_timestamp(wall, 0).map(|t| t.naive_utc())
}

fn date_of(day: i64) -> Option<NaiveDate> {
    i32::try_from(day + 719_163)
        .ok()
        .and_then(NaiveDate::from_num_days_from_ce_opt)
}

/// The lowest set bit at or above `from`.
fn next_bit(bits: u64, from: i64) -> Option<i64> {
    if !(0..64).contains(&from) {
        return None;
    }
    let masked = bits & (u64::MAX << from);
    (masked != 0).then(|| i64::from(masked.trailing_zeros()))
}

/// The highest set bit at or below `to`.
fn previous_bit(bits: u64, to: i64) -> Option<i64> {
    if to < 0 {
        return None;
    }
    let masked = bits & (u64::MAX >> (63 - to.min(63)));
    (masked != 0).then(|| 63 - i64::from(masked.leading_zeros()))
}

impl Fields {
    fn day_matches(&self, date: NaiveDate) -> bool {
        let dom = self.days_of_month & (1 << date.day()) != 0;
        let dow = self.days_of_week & (1 << date.weekday().num_days_from_sunday()) != 0;
        if self.either_day {
            dom || dow
        } else {
            dom && dow
        }
    }

    /// Whether some day of the 400-year Gregorian cycle matches. Only a day-of-month list read
    /// with AND can fail: every month and day pair that exists falls on every weekday.
    fn can_fire(&self) -> bool {
        if self.either_day {
            return true;
        }
        (1..=12).any(|month| {
            self.months & (1 << month) != 0 && {
                let longest = if month == 2 { 29 } else { days_in(2000, month) };
                (1..=longest).any(|d| self.days_of_month & (1 << d) != 0)
            }
        })
    }

    /// The first time of day at or after `from` seconds since midnight.
    fn next_time_of_day(&self, from: i64) -> Option<i64> {
        let (mut hour, mut minute, mut second) = (from / 3600, from / 60 % 60, from % 60);
        loop {
            let h = next_bit(self.hours, hour)?;
            if h != hour {
                (hour, minute, second) = (h, 0, 0);
            }
            let Some(m) = next_bit(self.minutes, minute) else {
                (hour, minute, second) = (hour + 1, 0, 0);
                continue;
            };
            if m != minute {
                (minute, second) = (m, 0);
            }
            match next_bit(self.seconds, second) {
                Some(s) => return Some(hour * 3600 + minute * 60 + s),
                None => (minute, second) = (minute + 1, 0),
            }
        }
    }

    /// The last time of day at or before `to` seconds since midnight.
    fn previous_time_of_day(&self, to: i64) -> Option<i64> {
        let (mut hour, mut minute, mut second) = (to / 3600, to / 60 % 60, to % 60);
        loop {
            let h = previous_bit(self.hours, hour)?;
            if h != hour {
                (hour, minute, second) = (h, 59, 59);
            }
            let Some(m) = previous_bit(self.minutes, minute) else {
                (hour, minute, second) = (hour - 1, 59, 59);
                continue;
            };
            if m != minute {
                (minute, second) = (m, 59);
            }
            match previous_bit(self.seconds, second) {
                Some(s) => return Some(hour * 3600 + minute * 60 + s),
                None => (minute, second) = (minute - 1, 59),
            }
        }
    }

    /// The first matching wall time at or after `from`, up to `limit`.
    fn next_match(&self, from: i64, limit: i64) -> Option<i64> {
        let mut day = from.div_euclid(DAY_S);
        let mut time = from.rem_euclid(DAY_S);
        while day * DAY_S <= limit {
            let date = date_of(day)?;
            if self.months & (1 << date.month()) == 0 {
                // The first of the next month.
                day += i64::from(days_in(date.year(), date.month()) - date.day()) + 1;
                time = 0;
                continue;
            }
            if self.day_matches(date)
                && let Some(t) = self.next_time_of_day(time)
            {
                let found = day * DAY_S + t;
                return (found <= limit).then_some(found);
            }
            day += 1;
            time = 0;
        }
        None
    }

    /// The last matching wall time at or before `to`, down to `limit`.
    fn previous_match(&self, to: i64, limit: i64) -> Option<i64> {
        let mut day = to.div_euclid(DAY_S);
        let mut time = to.rem_euclid(DAY_S);
        while (day + 1) * DAY_S > limit {
            let date = date_of(day)?;
            if self.months & (1 << date.month()) == 0 {
                // The last day of the previous month.
                day -= i64::from(date.day());
                time = DAY_S - 1;
                continue;
            }
            if self.day_matches(date)
                && let Some(t) = self.previous_time_of_day(time)
            {
                let found = day * DAY_S + t;
                return (found >= limit).then_some(found);
            }
            day -= 1;
            time = DAY_S - 1;
        }
        None
    }
}

fn days_in(year: i32, month: u32) -> u32 {
    let (y, m) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    NaiveDate::from_ymd_opt(y, m, 1)
        .and_then(|next| next.pred_opt())
        .map_or(31, |last| last.day())
}

/// How daylight saving time bears on one occurrence in its zone (`qlsched cron` marks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DstNote {
    /// A fixed-time job's wall time (one or more) was skipped by a spring-forward gap: it runs
    /// once, here, at the instant the gap ends.
    GapMoved,
    /// The wall time repeats in an autumn fold, and this is its first instant.
    FoldFirst,
    /// The wall time repeats in an autumn fold, and this is its second instant (wildcard jobs
    /// only).
    FoldSecond,
}

impl DstNote {
    /// A few words for a table.
    pub fn describe(self) -> &'static str {
        match self {
            DstNote::GapMoved => "moved: DST gap skipped its wall time; runs once at the jump",
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

    /// Whether the occurrence at `at_ms` stands for wall times a gap skipped, or its wall time
    /// repeats in a fold.
    pub fn dst_note(&self, at_ms: i64) -> Option<DstNote> {
        let at = at_ms.div_euclid(1_000);
        let wall = self.wall_of(at);
        if let Wall::Twice(first, _) = self.resolve(wall) {
            return Some(if first == at {
                DstNote::FoldFirst
            } else {
                DstNote::FoldSecond
            });
        }
        let before = self.wall_of(at - 1);
        let skipped_a_match = self.fields.fixed_time
            && wall - before > 1
            && self.fields.next_match(before + 1, wall - 1).is_some();
        skipped_a_match.then_some(DstNote::GapMoved)
    }
}

/// Checks the shape (a seventh, year field; unknown macros) and returns the fields' text.
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

fn parse_fields(pattern: &str) -> Result<Fields, String> {
    let texts: Vec<&str> = pattern.split_whitespace().collect();
    let (second, rest) = match texts.len() {
        6 => (Some(parse_field(&SECOND, texts[0])?), &texts[1..]),
        _ => (None, &texts[..]),
    };
    let minute = parse_field(&MINUTE, rest[0])?;
    let hour = parse_field(&HOUR, rest[1])?;
    let dom = parse_field(&DAY_OF_MONTH, rest[2])?;
    let month = parse_field(&MONTH, rest[3])?;
    let dow = parse_field(&DAY_OF_WEEK, rest[4])?;
    let second_star = second.as_ref().is_some_and(|s| s.star);
    Ok(Fields {
        seconds: second.map_or(1, |s| s.bits),
        minutes: minute.bits,
        hours: hour.bits,
        days_of_month: dom.bits,
        months: month.bits,
        // Sunday is 0 and 7.
        days_of_week: (dow.bits | (dow.bits >> 7)) & 0x7f,
        either_day: !dom.star && !dow.star,
        fixed_time: !minute.star && !hour.star && !second_star,
    })
}

/// One field: a comma list of `*`, `*/step`, `value`, `low-high` and `low-high/step`, as cronie
/// reads it; the messages quote the field and the element as written.
fn parse_field(kind: &FieldKind, text: &str) -> Result<Parsed, String> {
    let mut bits = 0u64;
    for element in text.split(',') {
        if element.is_empty() {
            return Err(format!(
                "field {}: '{text}' has an empty list element",
                kind.name
            ));
        }
        let (low, high, step) = parse_element(kind, element)?;
        let mut v = Some(low);
        while let Some(value) = v.filter(|&value| value <= high) {
            bits |= 1 << value;
            v = value.checked_add(step);
        }
    }
    Ok(Parsed {
        bits,
        star: text.starts_with('*'),
    })
}

fn parse_element(kind: &FieldKind, element: &str) -> Result<(u32, u32, u32), String> {
    let name = kind.name;
    if element.contains('~') {
        return Err(format!(
            "field {name}: '{element}': ~ (a random value each crond picks for itself) is refused: \
             every replica must read one schedule"
        ));
    }
    let (range, step) = match element.split_once('/') {
        None => (element, None),
        Some((range, step_text)) => {
            let digits = !step_text.is_empty() && step_text.bytes().all(|b| b.is_ascii_digit());
            let step = match digits.then(|| step_text.parse::<u32>().ok()).flatten() {
                Some(0) => {
                    return Err(format!(
                        "field {name}: '{element}': a step must be 1 or more"
                    ));
                }
                Some(step) => step,
                None if digits => {
                    return Err(format!(
                        "field {name}: '{element}': the step '{step_text}' is too large"
                    ));
                }
                None => {
                    return Err(format!(
                        "field {name}: '{element}': the step '{step_text}' is not a number"
                    ));
                }
            };
            (range, Some(step))
        }
    };
    if range == "*" {
        return Ok((kind.low, kind.high, step.unwrap_or(1)));
    }
    if range.is_empty() {
        return Err(format!(
            "field {name}: '{element}': a step follows * or a range, such as */{}",
            step.unwrap_or(1)
        ));
    }
    let Some((low_text, high_text)) = range.split_once('-') else {
        let value = parse_value(kind, range).map_err(|e| within(e, element, range))?;
        if let Some(step) = step {
            // "From it to the end": the week's end is Saturday (7 is Sunday again), unless the
            // value is Saturday itself; named the way the value was written.
            let last = match (kind.name == DAY_OF_WEEK.name, value >= 6) {
                (true, false) => 6,
                _ => kind.high,
            };
            let last = if range.bytes().all(|b| b.is_ascii_digit()) {
                last.to_string()
            } else {
                let index = usize::try_from(last - kind.low).unwrap_or(0);
                kind.names
                    .get(index % kind.names.len().max(1))
                    .map_or_else(|| last.to_string(), |n| (*n).to_owned())
            };
            return Err(format!(
                "field {name}: '{element}': a step follows * or a range, such as {range}-{last}/{step}"
            ));
        }
        return Ok((value, value, 1));
    };
    if low_text.is_empty() || high_text.is_empty() {
        return Err(format!(
            "field {name}: '{element}' is not a range: a value is missing beside '-'"
        ));
    }
    let low = parse_value(kind, low_text).map_err(|e| within(e, element, low_text))?;
    let mut high = parse_value(kind, high_text).map_err(|e| within(e, element, high_text))?;
    // cronie reads a day-of-week range ending on Sunday written as 0 (FRI-SUN) as ending on 7.
    if kind.name == DAY_OF_WEEK.name && high == 0 && low > 0 {
        high = 7;
    }
    if low > high {
        return Err(format!(
            "field {name}: '{element}' is a reversed range; cron ranges do not wrap around: write \
             {low_text}-{},{}-{high_text}",
            kind.high, kind.low
        ));
    }
    Ok((low, high, step.unwrap_or(1)))
}

/// A value's error, quoting the whole element as written when the value is only part of it
/// (`'1-2-3': '2-3' is not a number`), so the reader finds it in what they typed.
fn within(error: String, element: &str, token: &str) -> String {
    if element == token {
        return error;
    }
    let quoted = format!("'{token}'");
    match error.split_once(&quoted) {
        Some((field, rest)) => format!("{field}'{element}': {quoted}{rest}"),
        None => error,
    }
}

fn parse_value(kind: &FieldKind, token: &str) -> Result<u32, String> {
    let name = kind.name;
    let (low, high) = (kind.low, kind.high);
    if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
        return match token.parse::<u32>() {
            Ok(v) if (low..=high).contains(&v) => Ok(v),
            _ => Err(format!(
                "field {name}: '{token}' is out of range {low}-{high}"
            )),
        };
    }
    if let Some(index) = kind
        .names
        .iter()
        .position(|n| n.eq_ignore_ascii_case(token))
    {
        return Ok(u32::try_from(index).unwrap_or(0) + low);
    }
    if token == "?" {
        return Err(format!(
            "field {name}: '?' is Quartz syntax, not cron's; write *"
        ));
    }
    // Quartz's L (last), W (weekday) and # (nth): `L`, `LW`, `5L`, `15W`, `1#2`; not a misspelt
    // name that happens to end in l or w.
    let quartz_suffix = token.len() >= 2
        && token.ends_with(['L', 'l', 'W', 'w'])
        && token[..token.len() - 1].bytes().all(|b| b.is_ascii_digit());
    if token.contains('#')
        || token.eq_ignore_ascii_case("L")
        || token.eq_ignore_ascii_case("LW")
        || quartz_suffix
    {
        return Err(format!(
            "field {name}: '{token}': L, W and # are Quartz syntax that cron does not have"
        ));
    }
    if !kind.names.is_empty() {
        if let Some(index) = kind.names.iter().position(|n| {
            token.len() > 3 && token.get(..3).is_some_and(|p| p.eq_ignore_ascii_case(n))
        }) {
            return Err(format!(
                "field {name}: '{token}' is not a {} name; use {} or {}",
                kind.noun,
                kind.names[index],
                u32::try_from(index).unwrap_or(0) + low
            ));
        }
        return Err(format!(
            "field {name}: '{token}' is not a {noun} name ({}-{}) or a number {low}-{high}",
            kind.names[0],
            kind.names[kind.names.len() - 1],
            noun = kind.noun
        ));
    }
    Err(format!(
        "field {name}: '{token}' is not a number {low}-{high}"
    ))
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
}
