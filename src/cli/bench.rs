//! `qlsched bench`: flags in, [`crate::bench::run_bench`], a table or one JSON object out. A run
//! that was cut short by `--duration` or whose writes break an invariant exits 1 after printing
//! its report, so a script cannot mistake it for a measurement.

use std::time::Duration;

use clap::Args;

use super::args::{Access, duration_arg};
use super::error::ExitStatus;
use super::output::{emit, table};
use super::signals::Shutdown;
use super::{CliError, Global};
use crate::bench::scratch::drop_database;
use crate::bench::sql::OccurrenceLag;
use crate::bench::steady::{SteadyConfig, SteadyReport, run_steady};
use crate::bench::{BenchConfig, BenchReport, run_bench};
use crate::core::duration::format_duration;
use crate::core::time::utc;
use crate::core::{Batch, CoordinatorConfig};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Triggers to publish (through the real publish path).
    #[arg(long, default_value_t = 10_000, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub triggers: u32,

    /// In-process replicas, each with a pool of its own, as `qlsched run` starts one.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = clap::value_parser!(u8).range(1..=64))]
    pub replicas: u8,

    /// Claims per round of every replica, pinned (1..=256) [default: adaptive, as `qlsched run`].
    #[arg(long, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..=i64::from(crate::core::MAX_BATCH)))]
    pub batch: Option<u16>,

    /// Fraction of the triggers whose occurrence is due at once (0..=1); the rest are not due.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub due_fraction: f64,

    /// Schedule rows in all: the triggers, plus rows that are never due [default: --triggers].
    #[arg(long, value_name = "M")]
    pub rows_total: Option<u64>,

    /// Stop measuring after this long even if occurrences are still due (exit 1); at least 1s.
    #[arg(long, default_value = "5m", value_parser = duration_arg, allow_hyphen_values = true)]
    pub duration: Duration,

    /// How long the commit ceiling is probed (100ms..=10m).
    #[arg(long, default_value = "3s", value_parser = duration_arg, allow_hyphen_values = true)]
    pub ceiling_time: Duration,

    /// Time from the start of one round to the next for rounds that did not fill their budget;
    /// also the window the replicas' random start phases fall in [default: 100ms; with
    /// --steady, 1s as `qlsched run`].
    #[arg(long, value_parser = duration_arg, allow_hyphen_values = true)]
    pub cadence: Option<Duration>,

    /// Lease of each claim, in database time.
    #[arg(long, default_value = "30s", value_parser = duration_arg, allow_hyphen_values = true)]
    pub lease: Duration,

    /// Parked schedule rows besides the triggers, as a lived-in table holds them: a third of
    /// disabled triggers, a third paused, a third in a suspended project.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub parked: u32,

    /// Runs already in the history, each with its attempt and two events, created before the
    /// bench (the newest two hours before it).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub history: u64,

    /// Keep the scratch database afterwards (its name is in the report).
    #[arg(long)]
    pub keep: bool,

    /// Measure the steady state instead of a burst: from a plain publish, replicas at
    /// `qlsched run`'s defaults, the lag of every occurrence in --window.
    #[arg(long, conflicts_with_all = ["due_fraction", "rows_total", "duration", "ceiling_time"])]
    pub steady: bool,

    /// With --steady: every trigger's cron expression (UTC).
    #[arg(long, default_value = "0 * * * * *", requires = "steady")]
    pub cron: String,

    /// With --steady: the span of occurrences measured, from the first one after every trigger
    /// has its first cursor.
    #[arg(long, default_value = "2m", value_parser = duration_arg, requires = "steady")]
    pub window: Duration,

    /// With --steady: a dispatcher beside the replicas finishes every queued run each second
    /// (status `succeeded`, as docs/DESIGN.md §3.4 says a dispatcher does), reading each run's
    /// lag as it does, and the history's size is sampled every ten seconds.
    #[arg(long, requires = "steady")]
    pub dispatch: bool,

    /// With --steady: delete finished runs this long after they finished, as `qlsched run`
    /// does (a pass a minute by the replica holding the lease); implies --dispatch.
    #[arg(long, value_parser = duration_arg, requires = "steady", value_name = "DURATION")]
    pub retain: Option<Duration>,

    /// With --steady: also write an SVG chart of the lag of each occurrence (p50, p99, max) and
    /// its admissions a second to this file, beside the report.
    #[arg(long, value_name = "FILE", requires = "steady")]
    pub chart: Option<std::path::PathBuf>,
}

impl BenchArgs {
    /// What --parked and --history add before measuring.
    fn lived_in(&self) -> crate::bench::LivedIn {
        crate::bench::LivedIn {
            parked: self.parked,
            history: self.history,
        }
    }
}

pub async fn run(args: BenchArgs, global: &Global) -> Result<(), CliError> {
    let server = global.connection.settings(Access::Write)?;
    server.require_session("bench", "it creates its own database and migrates it")?;
    if args.steady {
        return run_steady_bench(args, &server, global).await;
    }
    let config = BenchConfig {
        triggers: args.triggers,
        due_fraction: args.due_fraction,
        rows_total: args.rows_total.unwrap_or(u64::from(args.triggers)),
        replicas: args.replicas,
        coordinator: coordinator(&args, BURST_CADENCE),
        build: super::BUILD,
        cap: args.duration,
        ceiling_time: args.ceiling_time,
        database: scratch_database(),
        keep: args.keep,
        lived_in: args.lived_in(),
    };
    // Every value checked here came from a flag: out of bounds is a usage error (2).
    config.check().map_err(|error| match error {
        crate::bench::BenchError::Config(text) => CliError::Usage(text),
        crate::bench::BenchError::Core(error) => super::run::flag_value(&error),
        other => CliError::Bench(other),
    })?;
    eprintln!(
        "qlsched bench: {} triggers ({} schedule rows{}), {} replica{}, batch {} on {}",
        config.triggers,
        config.rows_total,
        config.lived_in,
        config.replicas,
        if config.replicas == 1 { "" } else { "s" },
        config.coordinator.batch,
        server.describe()
    );
    let bench = run_bench(&server, &global.connection.schema, &config);
    let report = unless_interrupted(bench, &server, &config.database, config.keep).await?;
    emit(global.format, &report, render)?;
    verdict(report.problems())
}

/// The burst's cadence: short, so that the replicas' random phases do not dominate its time.
const BURST_CADENCE: Duration = Duration::from_millis(100);

/// The replicas' settings, burst or steady: owner `bench-<pid>`, the batch, lease and cadence
/// flags (`cadence` without --cadence), and `qlsched run`'s defaults for the rest.
fn coordinator(args: &BenchArgs, cadence: Duration) -> CoordinatorConfig {
    CoordinatorConfig {
        owner: format!("bench-{}", std::process::id()),
        batch: args.batch.map_or(Batch::Adaptive, Batch::Pinned),
        lease: args.lease,
        cadence: args.cadence.unwrap_or(cadence),
        ..CoordinatorConfig::default()
    }
}

/// The scratch database of this process's bench.
fn scratch_database() -> String {
    format!("qlsched_bench_{}", std::process::id())
}

async fn run_steady_bench(
    args: BenchArgs,
    server: &crate::store::ConnectionSettings,
    global: &Global,
) -> Result<(), CliError> {
    let chart = args.chart.clone();
    let config = SteadyConfig {
        triggers: args.triggers,
        replicas: args.replicas,
        coordinator: coordinator(&args, CoordinatorConfig::default().cadence),
        cron: args.cron.clone(),
        window: args.window,
        build: super::BUILD,
        ceiling_time: args.ceiling_time,
        database: scratch_database(),
        keep: args.keep,
        lived_in: args.lived_in(),
        dispatch: args.dispatch,
        retention: args.retain,
    };
    config.check()?;
    eprintln!(
        "qlsched bench --steady: {} triggers \"{}\"{}, {} replica{}, batch {}, cadence {}, window {} on {}",
        config.triggers,
        config.cron,
        config.lived_in,
        config.replicas,
        if config.replicas == 1 { "" } else { "s" },
        config.coordinator.batch,
        format_duration(config.coordinator.cadence),
        format_duration(config.window),
        server.describe()
    );
    let bench = run_steady(server, &global.connection.schema, &config);
    let report = unless_interrupted(bench, server, &config.database, config.keep).await?;
    emit(global.format, &report, render_steady)?;
    if let Some(path) = chart {
        write_chart(&report, &path)?;
    }
    verdict(report.problems())
}

/// Above this many occurrences the chart draws the lag minute by minute (when the report has
/// the minutes): a point a second over half an hour is a file of hundreds of kilobytes and a
/// band too dense to read.
const CHART_OCCURRENCES: usize = 360;

/// The steady run as a picture, against the minute of the window: the lag (p50, p99, max,
/// seconds) of each occurrence, or of each minute's runs in a long window of a second-scale
/// cron, above; below, with a dispatcher, the history's size (runs in thousands and megabytes of
/// the three tables), else each occurrence's admissions a second.
fn write_chart(report: &SteadyReport, path: &std::path::Path) -> Result<(), CliError> {
    use plotters::prelude::*;

    let drawn = |error: &dyn std::fmt::Display| {
        CliError::Io(std::io::Error::other(format!(
            "chart {}: {error}",
            crate::core::text::clean(&path.display().to_string())
        )))
    };
    let first = report.occurrences.first().map_or(0, |o| o.scheduled_for_ms);
    let minute_of = |ms: i64| (ms - first) as f64 / 60_000.0;
    let seconds = |ms: i64| ms as f64 / 1_000.0;
    let by_minute = report.occurrences.len() > CHART_OCCURRENCES && !report.minutes.is_empty();
    // (minute, p50, p99, max) of each point, the lags in seconds.
    let points: Vec<(f64, f64, f64, f64)> = if by_minute {
        report
            .minutes
            .iter()
            .map(|m| {
                (
                    minute_of(m.from_ms),
                    seconds(m.lag_p50_ms),
                    seconds(m.lag_p99_ms),
                    seconds(m.lag_max_ms),
                )
            })
            .collect()
    } else {
        report
            .occurrences
            .iter()
            .map(|o| {
                (
                    minute_of(o.scheduled_for_ms),
                    seconds(o.lag_p50_ms),
                    seconds(o.lag_p99_ms),
                    seconds(o.lag_max_ms),
                )
            })
            .collect()
    };
    let last = points.last().map_or(1.0, |p| p.0).max(1.0);
    let lag_top = points.iter().map(|p| p.3).fold(0.1, f64::max);
    let root = SVGBackend::new(path, (960, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| drawn(&e))?;
    let (upper, lower) = root.split_vertically(320);
    let title = format!(
        "qlsched bench --steady: {} triggers \"{}\", {} replica(s){}",
        report.triggers,
        report.cron,
        report.replicas,
        report.retention_ms.map_or_else(
            || if report.history.is_empty() {
                String::new()
            } else {
                ", no retention".to_owned()
            },
            |ms| format!(", retention {}", format_duration(Duration::from_millis(ms)))
        )
    );
    let lag_desc = if by_minute {
        "lag of the minute's runs (s)"
    } else {
        "lag (s)"
    };
    let mut lag =
        minute_chart(&upper, Some(&title), (last, lag_top), lag_desc).map_err(|e| drawn(&e))?;
    let lags = [
        ("p50", BLUE, points.iter().map(|p| (p.0, p.1)).collect()),
        ("p99", MAGENTA, points.iter().map(|p| (p.0, p.2)).collect()),
        ("max", RED, points.iter().map(|p| (p.0, p.3)).collect()),
    ];
    labelled_lines(&mut lag, lags, None).map_err(|e| drawn(&e))?;
    if report.history.is_empty() {
        let rate_top = report
            .admission_rates_per_s
            .iter()
            .copied()
            .fold(1.0, f64::max);
        let mut rate = minute_chart(&lower, None, (last, rate_top), "admissions / s")
            .map_err(|e| drawn(&e))?;
        rate.draw_series(LineSeries::new(
            report
                .occurrences
                .iter()
                .zip(&report.admission_rates_per_s)
                .map(|(o, r)| (minute_of(o.scheduled_for_ms), *r)),
            GREEN,
        ))
        .map_err(|e| drawn(&e))?;
    } else {
        // The samples within the window's span, in thousands of runs and in megabytes.
        let samples: Vec<(f64, f64, f64)> = report
            .history
            .iter()
            .map(|s| {
                (
                    minute_of(s.at_ms),
                    s.runs as f64 / 1_000.0,
                    (s.runs_bytes + s.attempts_bytes + s.events_bytes) as f64 / 1e6,
                )
            })
            .filter(|s| (0.0..=last).contains(&s.0))
            .collect();
        let top = samples.iter().map(|s| s.1.max(s.2)).fold(1.0, f64::max);
        let mut size = minute_chart(&lower, None, (last, top), "history").map_err(|e| drawn(&e))?;
        let sizes = [
            (
                "runs (thousands; attempts as many, events twice)",
                GREEN,
                samples.iter().map(|s| (s.0, s.1)).collect(),
            ),
            (
                "MB of runs, attempts and events",
                BLACK,
                samples.iter().map(|s| (s.0, s.2)).collect(),
            ),
        ];
        labelled_lines(&mut size, sizes, Some(SeriesLabelPosition::UpperLeft))
            .map_err(|e| drawn(&e))?;
    }
    root.present().map_err(|e| drawn(&e))?;
    Ok(())
}

/// A chart of the steady run against the minute of its window.
type MinuteChart<'a, DB> = plotters::prelude::ChartContext<
    'a,
    DB,
    plotters::prelude::Cartesian2d<
        plotters::coord::types::RangedCoordf64,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// What drawing a chart fails with.
type ChartError<DB> =
    plotters::prelude::DrawingAreaErrorKind<<DB as plotters::prelude::DrawingBackend>::ErrorType>;

/// A chart on `area` of the window's minutes, 0 to `last`, against values from 0 to a tenth
/// above `top`, its mesh drawn and its axes named.
fn minute_chart<'a, DB: plotters::prelude::DrawingBackend>(
    area: &'a plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    caption: Option<&str>,
    (last, top): (f64, f64),
    y_desc: &str,
) -> Result<MinuteChart<'a, DB>, ChartError<DB>> {
    let mut builder = plotters::prelude::ChartBuilder::on(area);
    if let Some(caption) = caption {
        builder.caption(caption, ("sans-serif", 18));
    }
    let mut chart = builder
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..last, 0.0..top * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("minute of the window")
        .y_desc(y_desc)
        .draw()?;
    Ok(chart)
}

/// A line of a chart: its label in the legend, its colour and its points.
type Line<'s> = (&'s str, plotters::style::RGBColor, Vec<(f64, f64)>);

/// Draws `lines` on `chart`, with a legend of their
/// labels at `position` (plotters' own place when none).
fn labelled_lines<'a, const N: usize, DB: plotters::prelude::DrawingBackend + 'a>(
    chart: &mut MinuteChart<'a, DB>,
    lines: [Line<'_>; N],
    position: Option<plotters::prelude::SeriesLabelPosition>,
) -> Result<(), ChartError<DB>> {
    use plotters::prelude::*;

    for (label, color, points) in lines {
        chart
            .draw_series(LineSeries::new(points, color))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color));
    }
    let mut legend = chart.configure_series_labels();
    if let Some(position) = position {
        legend.position(position);
    }
    legend.background_style(WHITE).border_style(BLACK).draw()
}

/// The report of `bench`, unless a signal comes first. Interrupted, the bench still drops its
/// scratch database (unless kept): a server must not collect qlsched_bench_* databases from
/// every Ctrl-C.
async fn unless_interrupted<R>(
    bench: impl Future<Output = Result<R, crate::bench::BenchError>>,
    server: &crate::store::ConnectionSettings,
    database: &str,
    keep: bool,
) -> Result<R, CliError> {
    let mut shutdown = Shutdown::install()?;
    let signal = tokio::select! {
        report = bench => return Ok(report?),
        signal = shutdown.recv() => signal,
    };
    let what = if keep {
        format!("scratch database {database} kept")
    } else {
        match drop_database(server, database).await {
            Ok(()) => format!("scratch database {database} dropped"),
            Err(error) => format!("scratch database {database} not dropped: {error}"),
        }
    };
    Err(CliError::Findings {
        message: format!("bench interrupted by {signal}; {what}"),
        status: ExitStatus::Interrupted,
    })
}

/// A run whose writes break a promise, or that did not measure what it was asked to, exits 1
/// after its report, so a script cannot mistake it for a measurement.
fn verdict(problems: Vec<String>) -> Result<(), CliError> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::Findings {
            message: format!("bench: {}", problems.join("; ")),
            status: ExitStatus::Unexpected,
        })
    }
}

fn render_steady(report: &SteadyReport) -> String {
    let lag_row = |label: String, lag: &OccurrenceLag, rate: Option<f64>| {
        vec![
            label,
            lag.runs.to_string(),
            lag.lag_p50_ms.to_string(),
            lag.lag_p99_ms.to_string(),
            lag.lag_max_ms.to_string(),
            rate.map_or_else(|| "-".to_owned(), |r| format!("{r:.0}")),
            rate.map_or_else(
                || "-".to_owned(),
                |r| format!("{:.2}", r / report.batched_ceiling_per_s.max(1.0)),
            ),
        ]
    };
    // Per occurrence for a minute-scale cron (up to an hour's); a second-scale one is summed up
    // in `overall`.
    let mut rows: Vec<Vec<String>> = if report.occurrences.len() <= 60 {
        report
            .occurrences
            .iter()
            .zip(&report.admission_rates_per_s)
            .map(|(lag, rate)| lag_row(utc(lag.scheduled_for_ms), lag, Some(*rate)))
            .collect()
    } else {
        Vec::new()
    };
    if let Some(overall) = &report.overall {
        rows.push(lag_row(
            format!("all {} occurrences", report.occurrences.len()),
            overall,
            None,
        ));
    }
    let mut out = table(
        &[
            "occurrence",
            "runs",
            "lag p50 ms",
            "lag p99 ms",
            "lag max ms",
            "admitted/s",
            "of batched ceiling",
        ],
        rows,
    );
    out.push('\n');
    out += &table(
        &["measure", "value"],
        [
            (
                "triggers",
                format!("{} \"{}\"", report.triggers, report.cron),
            ),
            (
                "replicas × batch, cadence",
                format!(
                    "{} × {}, {} ms",
                    report.replicas, report.batch, report.cadence_ms
                ),
            ),
            (
                "ceilings (same run)",
                format!(
                    "{:.0} commits/s; {:.0} admissions/s as batched SQL; after the window \
                     {:.0} and {:.0}",
                    report.commit_ceiling_per_s,
                    report.batched_ceiling_per_s,
                    report.commit_ceiling_after_per_s,
                    report.batched_ceiling_after_per_s
                ),
            ),
            (
                "max lag trend",
                report.trend.as_ref().map_or_else(
                    || "- (fewer than two occurrences)".to_owned(),
                    |t| {
                        format!(
                            "{:+.0} ms a minute; last three {} ms vs first three {} ms ({:.2}×); \
                             slowest occurrence at {:.2} of the batched ceiling",
                            t.max_lag_slope_ms_per_min,
                            t.last_three_max_ms,
                            t.first_three_max_ms,
                            t.last_over_first,
                            t.min_rate_of_batched_ceiling
                        )
                    },
                ),
            ),
            (
                "occurrences short of runs",
                report.short_occurrences.to_string(),
            ),
            (
                "schedule table at the end",
                format!(
                    "{} live, {} dead row versions (the server's estimates); autovacuum {}",
                    report.schedule_upkeep.live_rows,
                    report.schedule_upkeep.dead_rows,
                    if report.schedule_upkeep.autovacuum {
                        "on"
                    } else {
                        "OFF: the lag grows with the dead versions"
                    }
                ),
            ),
            ("duplicates", report.duplicates.to_string()),
            ("misfire records", report.misfire_records.to_string()),
            ("unaccounted occurrences", report.unaccounted.to_string()),
            writes_row(
                report.runs_without_one_attempt,
                report.runs_without_two_events,
            ),
            database_row(&report.database, report.kept),
        ]
        .into_iter()
        .map(|(name, value)| vec![name.to_owned(), value]),
    );
    if !report.history.is_empty() {
        out.push('\n');
        out += &render_history(report);
    }
    if !report.minutes.is_empty() {
        out.push('\n');
        out += &render_minutes(report);
    }
    out
}

/// The window minute by minute: the lag over each minute's runs, retention's deletes in it and
/// the history's size at its end.
fn render_minutes(report: &SteadyReport) -> String {
    let rows = report.minutes.iter().enumerate().map(|(n, m)| {
        let (runs, bytes) = m.history_at_end.as_ref().map_or_else(
            || ("-".to_owned(), "-".to_owned()),
            |s| {
                (
                    s.runs.to_string(),
                    format!(
                        "{:.1}",
                        (s.runs_bytes + s.attempts_bytes + s.events_bytes) as f64 / 1e6
                    ),
                )
            },
        );
        vec![
            (n + 1).to_string(),
            m.runs.to_string(),
            m.lag_p50_ms.to_string(),
            m.lag_p99_ms.to_string(),
            m.lag_max_ms.to_string(),
            m.deleted_runs.to_string(),
            runs,
            bytes,
        ]
    });
    format!(
        "the window minute by minute\n{}",
        table(
            &[
                "minute",
                "runs",
                "lag p50 ms",
                "lag p99 ms",
                "lag max ms",
                "deleted",
                "runs at end",
                "MB at end",
            ],
            rows.collect::<Vec<_>>(),
        )
    )
}

/// The history's size over the run (a dispatcher's samples), and what retention deleted between
/// two samples.
fn render_history(report: &SteadyReport) -> String {
    let first = report.history.first().map_or(0, |s| s.at_ms);
    let mut previous: Option<&crate::bench::sql::HistorySample> = None;
    let rows = report.history.iter().map(|s| {
        let (deleted, wal) = previous.map_or((0, 0), |p| {
            (s.deleted_runs - p.deleted_runs, s.wal_bytes - p.wal_bytes)
        });
        previous = Some(s);
        vec![
            format!("{:.0}", (s.at_ms - first) as f64 / 1000.0),
            s.runs.to_string(),
            s.attempts.to_string(),
            s.events.to_string(),
            format!(
                "{:.1}",
                (s.runs_bytes + s.attempts_bytes + s.events_bytes) as f64 / 1e6
            ),
            deleted.to_string(),
            format!("{:.1}", wal as f64 / 1e6),
        ]
    });
    let mut out = format!(
        "history ({} runs dispatched; retention {}; horizon {})\n",
        report.dispatched,
        report
            .retention_ms
            .map_or_else(|| "off".to_owned(), |ms| format!("{ms} ms")),
        report.horizon_ms.map_or_else(|| "none".to_owned(), utc)
    );
    out += &table(
        &["s", "runs", "attempts", "events", "MB", "deleted", "WAL MB"],
        rows.collect::<Vec<_>>(),
    );
    out
}

fn render(report: &BenchReport) -> String {
    let rows = [
        ("triggers", report.triggers.to_string()),
        ("due occurrences", report.due.to_string()),
        ("schedule rows", report.rows_total.to_string()),
        (
            "replicas × batch",
            format!("{} × {}", report.replicas, report.batch),
        ),
        (
            "admitted",
            format!("{} in {:.2} s", report.admitted, report.elapsed_s),
        ),
        ("admissions/s", format!("{:.0}", report.admissions_per_s)),
        (
            "commit ceiling/s",
            format!("{:.0}", report.commit_ceiling_per_s),
        ),
        ("ratio", format!("{:.2}", report.ratio)),
        (
            "claim p50 / p99",
            format!("{:.1} / {:.1} ms", report.claim_p50_ms, report.claim_p99_ms),
        ),
        (
            "admit p50 / p99",
            format!("{:.1} / {:.1} ms", report.admit_p50_ms, report.admit_p99_ms),
        ),
        (
            "serialization retries",
            format!(
                "{} ({:.1} % of admissions)",
                report.serialization_retries,
                report.serialization_retry_rate * 100.0
            ),
        ),
        ("batch fallbacks", report.batch_fallbacks.to_string()),
        ("fence lost", report.fence_lost.to_string()),
        ("rejected", report.rejected.to_string()),
        ("unsettled", report.unsettled.to_string()),
        (
            "round trips/admission",
            format!("{:.3}", report.round_trips_per_admission),
        ),
        (
            "rounds (failed)",
            format!("{} ({})", report.rounds, report.failed_rounds),
        ),
        ("duplicates", report.duplicates.to_string()),
        writes_row(
            report.runs_without_one_attempt,
            report.runs_without_two_events,
        ),
        database_row(&report.database, report.kept),
    ];
    table(
        &["measure", "value"],
        rows.into_iter()
            .map(|(name, value)| vec![name.to_owned(), value]),
    )
}

/// The report row of runs whose writes do not add up.
fn writes_row(without_one_attempt: i64, without_two_events: i64) -> (&'static str, String) {
    (
        "runs without 1 attempt / 2 events",
        format!("{without_one_attempt} / {without_two_events}"),
    )
}

/// The report row naming the scratch database and what became of it.
fn database_row(database: &str, kept: bool) -> (&'static str, String) {
    (
        "database",
        format!("{database} ({})", if kept { "kept" } else { "dropped" }),
    )
}
