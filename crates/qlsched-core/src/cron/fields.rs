//! An expression as bit sets, one per field, and the searches of zone-free wall-clock time that
//! match them: months, cronie's day rule and times of day. It knows only the calendar; zones and
//! instants are the schedule's (`cron`).

use chrono::{Datelike as _, NaiveDate};

use super::DAY_S;

/// The expression as bit sets, and the two flags the rules need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fields {
    pub(super) seconds: u64,
    pub(super) minutes: u64,
    pub(super) hours: u64,
    /// Bits 1 to 31.
    pub(super) days_of_month: u64,
    /// Bits 1 to 12.
    pub(super) months: u64,
    /// Bits 0 to 6, Sunday 0 (a 7 is read as 0).
    pub(super) days_of_week: u64,
    /// Day-of-month OR day-of-week, when both are restricted (neither begins with `*`); AND
    /// otherwise, as cronie reads them.
    pub(super) either_day: bool,
    /// No time field begins with `*`: gaps and folds run its wall times once.
    pub(super) fixed_time: bool,
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
    pub(super) fn can_fire(&self) -> bool {
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
    pub(super) fn next_match(&self, from: i64, limit: i64) -> Option<i64> {
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
    pub(super) fn previous_match(&self, to: i64, limit: i64) -> Option<i64> {
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
