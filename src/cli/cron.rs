//! `qlsched cron EXPR`: when a cron expression fires, offline. It validates exactly as `publish`
//! does (`core::CronSchedule::parse`, the same message, exit 65) and marks the occurrences a
//! daylight-saving gap moved or a fold repeats (docs/DESIGN.md §4.4).

use clap::Args;
use serde::Serialize;

use super::output::{emit, table};
use super::{CliError, Global};
use crate::core::CronSchedule;
use crate::core::cron::{DstNote, FIRST_INSTANT_S, LAST_INSTANT_S};
use crate::core::time::utc;

#[derive(Debug, Args)]
pub struct CronArgs {
    /// The cron expression, as a manifest's `cron` (five fields, six with leading seconds, or an
    /// @ macro).
    #[arg(value_name = "EXPR")]
    pub expr: String,

    /// The IANA time zone to evaluate it in, as a manifest's `time_zone`.
    #[arg(long, short = 'z', value_name = "ZONE", default_value = "UTC")]
    pub time_zone: String,

    /// How many occurrences to list (1 to 1000). An expression with fewer occurrences left before
    /// the year 10000 lists those, says so on stderr and exits 0.
    #[arg(long, short = 'n', value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub count: u16,

    /// List the occurrences at or after this instant (RFC 3339, such as 2026-03-29T00:00:00Z, or
    /// epoch milliseconds; from 0001-01-01 to 9999-12-31 UTC) [default: now, this machine's
    /// clock].
    #[arg(long, value_name = "TIME", value_parser = instant_arg)]
    pub from: Option<i64>,
}

/// An instant on the command line: RFC 3339 (`2026-03-29T00:00:00Z`, `2026-03-29T02:00:00+01:00`)
/// or epoch milliseconds, within the instants cron is evaluated in (years 1 to 9999 UTC).
/// Anything else is a usage error (exit 2), as a bad duration is; clap's message quotes the value
/// as given.
pub fn instant_arg(text: &str) -> Result<i64, String> {
    const RANGE: &str = "out of range: cron is evaluated from 0001-01-01T00:00:00Z (epoch \
                         milliseconds -62135596800000) to 9999-12-31T23:59:59.999Z \
                         (253402300799999)";
    let first = FIRST_INSTANT_S * 1_000;
    let last = LAST_INSTANT_S * 1_000 + 999;
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<i64>() {
            Ok(ms) if (first..=last).contains(&ms) => Ok(ms),
            _ => Err(RANGE.to_owned()),
        };
    }
    let ms = chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|error| {
            format!(
                "expected an RFC 3339 time such as 2026-03-29T00:00:00Z, or epoch milliseconds: {error}"
            )
        })?;
    if (first..=last).contains(&ms) {
        Ok(ms)
    } else {
        Err(RANGE.to_owned())
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct CronReport {
    expr: String,
    time_zone: String,
    from_ms: i64,
    occurrences: Vec<Occurrence>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Occurrence {
    pub at_ms: i64,
    /// RFC 3339, in UTC.
    pub utc: String,
    /// Wall time in the zone, with its abbreviation.
    pub local: String,
    /// gap_moved: the wall time the pattern names fell in a spring-forward gap and was moved to
    /// the first instant after it; fold_first, fold_second: an autumn fold repeats this wall
    /// time, and this is the first or the second of its two instants.
    pub dst: Option<DstNote>,
}

/// The occurrence at `at_ms` with its wall time and DST note.
pub fn occurrence(schedule: &CronSchedule, at_ms: i64) -> Occurrence {
    Occurrence {
        at_ms,
        utc: utc(at_ms),
        local: schedule.local_text(at_ms),
        dst: schedule.dst_note(at_ms),
    }
}

pub fn run(args: &CronArgs, global: &Global) -> Result<(), CliError> {
    let schedule = CronSchedule::parse(&args.expr, &args.time_zone)?;
    let from_ms = args
        .from
        .unwrap_or_else(|| chrono::Utc::now().timestamp_millis());
    // Strictly increasing instants: an occurrence a gap moved or a fold repeats is listed once.
    let occurrences: Vec<Occurrence> = schedule
        .occurrences_between(from_ms, i64::MAX, usize::from(args.count))?
        .into_iter()
        .map(|at| occurrence(&schedule, at))
        .collect();
    if occurrences.len() < usize::from(args.count) {
        eprintln!(
            "qlsched: '{}' has {} of the {} occurrences asked for from {} to 9999-12-31T23:59:59Z, \
             the last instant cron is evaluated in",
            args.expr,
            occurrences.len(),
            args.count,
            utc(from_ms)
        );
    }
    let report = CronReport {
        expr: args.expr.clone(),
        time_zone: schedule.time_zone().to_owned(),
        from_ms,
        occurrences,
    };
    emit(global.format, &report, |r| {
        table(
            &["#", &format!("local ({})", r.time_zone), "UTC", "DST"],
            r.occurrences.iter().enumerate().map(|(i, o)| {
                vec![
                    (i + 1).to_string(),
                    o.local.clone(),
                    o.utc.clone(),
                    o.dst.map_or_else(String::new, |n| n.describe().to_owned()),
                ]
            }),
        )
    })
}

/// A trigger's previous occurrence and its next five after the database's now, for
/// `inspect trigger` (in the trigger's zone and UTC).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct TriggerOccurrences {
    pub previous: Option<Occurrence>,
    pub next: Vec<Occurrence>,
}

/// `None` when the stored expression no longer evaluates (a changed time-zone database).
pub fn trigger_occurrences(expr: &str, zone: &str, now_ms: i64) -> Option<TriggerOccurrences> {
    let schedule = CronSchedule::parse(expr, zone).ok()?;
    let previous = schedule
        .latest_at_or_before(now_ms)
        .ok()
        .flatten()
        .map(|at| occurrence(&schedule, at));
    let mut next = Vec::with_capacity(5);
    let mut at = now_ms;
    for _ in 0..5 {
        let Ok(following) = schedule.next_after(at) else {
            break;
        };
        next.push(occurrence(&schedule, following));
        at = following;
    }
    Some(TriggerOccurrences { previous, next })
}

/// The occurrences as a table: previous, then next 1 to 5.
pub fn render_trigger_occurrences(o: &TriggerOccurrences) -> String {
    let row = |label: String, o: &Occurrence| {
        vec![
            label,
            o.local.clone(),
            o.utc.clone(),
            o.dst.map_or_else(String::new, |n| n.describe().to_owned()),
        ]
    };
    let rows = o
        .previous
        .iter()
        .map(|p| row("previous".to_owned(), p))
        .chain(
            o.next
                .iter()
                .enumerate()
                .map(|(i, n)| row(format!("next {}", i + 1), n)),
        );
    table(&["occurrence", "local", "UTC", "DST"], rows)
}

#[cfg(test)]
mod tests {
    use super::instant_arg;

    #[test]
    fn instants_are_rfc3339_or_epoch_milliseconds() {
        assert_eq!(instant_arg("0"), Ok(0));
        assert_eq!(instant_arg("1767229200000"), Ok(1_767_229_200_000));
        assert_eq!(instant_arg("2026-01-01T01:00:00Z"), Ok(1_767_229_200_000));
        assert_eq!(
            instant_arg("2026-01-01T02:00:00+01:00"),
            Ok(1_767_229_200_000)
        );
        assert!(instant_arg("yesterday").is_err());
        assert!(instant_arg("2026-01-01").is_err());
    }

    #[test]
    fn instants_are_within_the_years_cron_is_evaluated_in() {
        assert_eq!(instant_arg("-62135596800000"), Ok(-62_135_596_800_000));
        assert_eq!(instant_arg("253402300799999"), Ok(253_402_300_799_999));
        for out in [
            "-62135596800001",
            "253402300800000",
            "99999999999999999",
            "99999999999999999999",
            "-99999999999999999999",
        ] {
            let error = instant_arg(out).unwrap_err();
            assert!(error.starts_with("out of range"), "{out}: {error}");
        }
        assert!(instant_arg("0000-12-31T23:59:59Z").is_err());
    }
}
