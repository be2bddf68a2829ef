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
//!
//! The expression's grammar and the messages for what it refuses are in `parse`; the bit sets it
//! becomes, and the matching of wall times against them (the day rule), in `fields`; this file
//! holds the schedule, its searches and the mapping of wall times to instants.

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset as _, TimeZone as _};
use chrono_tz::{GapInfo, Tz};

use super::error::CoreError;
use fields::Fields;
use parse::{expand, invalid, parse_fields};

mod fields;
mod parse;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests;

/// The instants qlsched evaluates cron in, in epoch seconds: 0001-01-01T00:00:00Z to
/// 9999-12-31T23:59:59Z, the years RFC 3339 can write. Before the first there is no occurrence;
/// after the last, none is found.
pub const FIRST_INSTANT_S: i64 = -62_135_596_800;
pub const LAST_INSTANT_S: i64 = 253_402_300_799;
/// Wall-clock searches stop two days beyond the instants, past any zone's offset.
const WALL_MARGIN_S: i64 = 2 * DAY_S;
const DAY_S: i64 = 86_400;

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
