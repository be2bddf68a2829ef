//! `qlsched cron EXPR`: when a cron expression fires, offline. It validates exactly as `publish`
//! does (`core::CronSchedule::parse`, the same message, exit 65) and marks the occurrences a
//! daylight-saving gap moved or a fold repeats (docs/DESIGN.md §4.4).

use clap::Args;
use serde::Serialize;

use super::output::{emit, table};
use super::{CliError, Global};
use crate::core::CronSchedule;
use crate::core::cron::DstNote;
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

    /// How many occurrences to list (1 to 1000).
    #[arg(long, short = 'n', value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub count: u16,

    /// List the occurrences at or after this instant (RFC 3339, such as 2026-03-29T00:00:00Z, or
    /// epoch milliseconds) [default: now, this machine's clock].
    #[arg(long, value_name = "TIME", value_parser = instant_arg)]
    pub from: Option<i64>,
}

/// An instant on the command line: RFC 3339 (`2026-03-29T00:00:00Z`, `2026-03-29T02:00:00+01:00`)
/// or epoch milliseconds. Anything else is a usage error (exit 2), as a bad duration is.
pub fn instant_arg(text: &str) -> Result<i64, String> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|error| {
            format!(
                "expected an RFC 3339 time such as 2026-03-29T00:00:00Z, or epoch milliseconds: {error}"
            )
        })
}

#[derive(Debug, Serialize)]
struct CronReport {
    expr: String,
    time_zone: String,
    from_ms: i64,
    occurrences: Vec<Occurrence>,
}

#[derive(Debug, Serialize)]
pub struct Occurrence {
    pub at_ms: i64,
    pub utc: String,
    pub local: String,
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
    let mut occurrences = Vec::with_capacity(usize::from(args.count));
    let mut at = schedule.next_at_or_after(from_ms)?;
    for _ in 0..args.count {
        occurrences.push(occurrence(&schedule, at));
        match schedule.next_after(at) {
            Ok(next) => at = next,
            // A pattern past croner's last year ends the list; it did fire before.
            Err(_) => break,
        }
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
#[derive(Debug, Serialize)]
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
}
