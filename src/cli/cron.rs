//! `qlsched cron EXPR`: when a cron expression fires, offline. It validates exactly as `publish`
//! does (`core::CronSchedule::parse`, the same message, exit 65) and marks the occurrences a
//! daylight-saving gap moved or a fold repeats (docs/DESIGN.md §4.4).

use clap::Args;
use serde::Serialize;

use super::output::{emit, table};
use super::{CliError, Global};
use crate::core::CronSchedule;
use crate::core::cron::DstNote;
use crate::core::instant::InstantArg;
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

    /// List the occurrences at or after this instant (RFC 3339, such as 2026-03-29T00:00:00Z,
    /// epoch milliseconds, from 0001-01-01 to 9999-12-31 UTC; or relative to this machine's
    /// clock: now, now-2h, -2h, now+1d) [default: now].
    #[arg(long, value_name = "TIME", value_parser = InstantArg::parse, allow_hyphen_values = true)]
    pub from: Option<InstantArg>,
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
    // Offline: a relative instant is counted from this machine's clock.
    let from_ms = args
        .from
        .unwrap_or(InstantArg::FromNow(0))
        .resolve(chrono::Utc::now().timestamp_millis());
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
