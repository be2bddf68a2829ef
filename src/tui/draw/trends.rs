//! The trends under the header: one sparkline a row over the window the operator chose, read
//! from what the replicas wrote minute by minute (`store::top::trends`), so they are exact and
//! full the moment `top` opens.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};

use super::*;

/// Rows the trends take: a title and six sparklines.
pub(super) const TRENDS_HEIGHT: u16 = 7;
/// Columns of a row's label and of its figures.
const LABEL: u16 = 13;
const FIGURES: u16 = 34;

/// One row of the trends: its label, a value per bucket (`None` where nothing is known), and
/// what the figures column says.
struct TrendRow {
    label: &'static str,
    values: Vec<Option<u64>>,
    figures: String,
    alarm: bool,
}

/// A lag as a bar height on a log scale: a spike of seconds would flatten a normal lag of tens
/// of milliseconds to nothing on a linear one. Ten steps a doubling.
fn log_scale(ms: i64) -> u64 {
    // A lag is far below 2^53 ms, so the float holds it exactly; the log is at most 640.
    let steps = ((ms.max(0) as f64) + 1.0).log2() * 10.0;
    steps.round() as u64
}

pub(super) fn draw_trends(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let window = span(app.trend_window_ms());
    let Some(snapshot) = &app.snapshot else {
        frame.render_widget(
            Paragraph::new(Line::styled(
                format!("Trends, last {window}: waiting for the first refresh…"),
                theme.dim(),
            )),
            area,
        );
        return;
    };
    let trends = &snapshot.trends;
    let buckets = &trends.buckets;
    let [title, rows] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(
                format!(
                    "Trends, last {}, {} a bar",
                    span(trends.window_ms),
                    span(trends.bucket_ms)
                ),
                theme.title(),
            ),
            Span::styled("  lag on a log scale  [ ] window  t folds", theme.dim()),
        ])),
        title,
    );

    let count = |v: i64| u64::try_from(v).unwrap_or(0);
    let admitted: Vec<Option<u64>> = buckets.iter().map(|b| Some(count(b.admissions))).collect();
    let last = buckets.last();
    let max_admitted = buckets.iter().max_by_key(|b| b.admissions);
    let lag = |pick: fn(&crate::store::top::TrendBucket) -> Option<i64>| {
        let values: Vec<Option<u64>> = buckets.iter().map(|b| pick(b).map(log_scale)).collect();
        let now = last
            .and_then(pick)
            .map_or_else(|| "-".to_owned(), short_span);
        let max = buckets
            .iter()
            .filter_map(pick)
            .max()
            .map_or_else(|| "-".to_owned(), short_span);
        (values, format!("{now} now, max {max}"))
    };
    let (p50, p50_figures) = lag(|b| b.lag_p50_ms);
    let (p99, p99_figures) = lag(|b| b.lag_p99_ms);
    let misfires: Vec<Option<u64>> = buckets.iter().map(|b| Some(count(b.misfires))).collect();
    let misfire_total: i64 = buckets.iter().map(|b| b.misfires).sum();
    let registry = |pick: fn(&crate::store::top::TrendBucket) -> i64| {
        let values: Vec<Option<u64>> = buckets.iter().map(|b| Some(count(pick(b)))).collect();
        (values, buckets.iter().map(pick).sum::<i64>())
    };
    let (fence, fence_total) = registry(|b| b.fence_losses);
    let (failed, failed_total) = registry(|b| b.failed_rounds);
    let (all_fence_losses, all_failed_rounds) = snapshot.registry_totals();
    let rows_of = [
        TrendRow {
            label: "admitted",
            values: admitted,
            figures: format!(
                "{} now, max {} a bar",
                last.map_or(0, |b| b.admissions),
                max_admitted.map_or(0, |b| b.admissions),
            ),
            alarm: false,
        },
        TrendRow {
            label: "lag p50",
            values: p50,
            figures: p50_figures,
            alarm: false,
        },
        TrendRow {
            label: "lag p99",
            values: p99,
            figures: p99_figures,
            alarm: false,
        },
        TrendRow {
            label: "misfired",
            values: misfires,
            figures: format!(
                "{} now, {misfire_total} in the window",
                last.map_or(0, |b| b.misfires)
            ),
            alarm: misfire_total > 0,
        },
        TrendRow {
            label: "fence losses",
            values: fence,
            figures: format!("{fence_total} in the window, {all_fence_losses} all told"),
            alarm: fence_total > 0,
        },
        TrendRow {
            label: "failed rnds",
            values: failed,
            figures: format!("{failed_total} in the window, {all_failed_rounds} all told"),
            alarm: failed_total > 0,
        },
    ];
    let lines = Layout::vertical(rows_of.iter().map(|_| Constraint::Length(1))).split(rows);
    for (row, line) in rows_of.iter().zip(lines.iter()) {
        let [label, chart, figures] = Layout::horizontal([
            Constraint::Length(LABEL),
            Constraint::Min(0),
            Constraint::Length(FIGURES),
        ])
        .areas(*line);
        frame.render_widget(
            Paragraph::new(Span::styled(row.label, theme.title())),
            label,
        );
        // A window with fewer bars than the trends' most (the shortest: a bar a minute) draws
        // each wider, so every window fills the same width; the newest bars when the chart is
        // narrower than that.
        let widen = usize::try_from(crate::store::top::TREND_BUCKETS).unwrap_or(1)
            / row.values.len().max(1);
        let values: Vec<Option<u64>> = row
            .values
            .iter()
            .flat_map(|v| std::iter::repeat_n(*v, widen.max(1)))
            .collect();
        let width = usize::from(chart.width.saturating_sub(1));
        let skip = values.len().saturating_sub(width);
        let values = &values[skip..];
        let style = if row.alarm {
            theme.warn()
        } else {
            theme.fg(Color::Cyan)
        };
        frame.render_widget(
            Sparkline::default()
                .data(values.iter().copied())
                .style(style)
                .absent_value_symbol("·"),
            chart,
        );
        frame.render_widget(
            Paragraph::new(Span::styled(
                format!(" {}", row.figures),
                if row.alarm {
                    theme.warn()
                } else {
                    Style::new()
                },
            )),
            figures,
        );
    }
}
