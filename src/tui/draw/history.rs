//! The history views that take the schedules' place (`v`, `1`-`4`): misfire records, the audit of
//! operator actions and the runs, newest first, as `inspect misfires`, `inspect audit` and
//! `inspect runs` list them, filtered by `/` as the schedules are. They scroll; nothing in them is
//! selected, since the keys that act (e, E, p) act on schedule rows.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::*;

use super::*;

/// The title of a history view: what it lists, how many, and the filter.
fn view_title(app: &App, what: &str, shown: usize, loaded: usize) -> String {
    let scroll = if app.view_scroll > 0 {
        format!(", from row {}", app.view_scroll + 1)
    } else {
        String::new()
    };
    if app.filter.is_empty() {
        format!("{what}, newest first ({shown} of {loaded} loaded{scroll}; 1 schedules, v next)")
    } else {
        format!(
            "{what} matching /{} ({shown} of {loaded} loaded{scroll}; 1 schedules, v next)",
            clean(&app.filter)
        )
    }
}

/// A history view's table: its title, columns, rows and what it says when it has none.
struct HistoryTable<'a> {
    title: String,
    header: &'a [&'static str],
    widths: &'a [Constraint],
    rows: Vec<Row<'static>>,
    empty: &'a str,
}

fn render_history(frame: &mut Frame, area: Rect, app: &App, table: HistoryTable, theme: Theme) {
    let HistoryTable {
        title,
        header,
        widths,
        rows,
        empty,
    } = table;
    let title = title.as_str();
    let none = rows.is_empty();
    let rows: Vec<Row> = rows.into_iter().skip(app.view_scroll).collect();
    let table = Table::new(rows, widths.iter().copied())
        .header(Row::new(header.iter().copied()).style(theme.title()))
        .block(block(title, theme));
    frame.render_widget(table, area);
    if none {
        let inner = Rect {
            y: area.y + 2,
            height: 1.min(area.height.saturating_sub(3)),
            ..area.inner(ratatui::layout::Margin::new(1, 0))
        };
        frame.render_widget(Paragraph::new(empty.to_owned()).style(theme.dim()), inner);
    }
}

pub(super) fn draw_misfires(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let records = app.visible_misfires();
    let loaded = app.snapshot.as_ref().map_or(0, |s| s.misfire_records.len());
    let rows: Vec<Row> = records
        .iter()
        .map(|m| {
            Row::new(vec![
                Cell::from(format!("{} ago", short_span(now - m.recorded_at_ms))),
                Cell::from(clean(
                    &TriggerName::new(&m.project_id, &m.trigger_id).to_string(),
                )),
                Cell::from(format!(
                    "{}{}",
                    m.occurrences,
                    if m.occurrences_exact { "" } else { "+" }
                )),
                Cell::from(format!(
                    "{} … {}",
                    clock(m.first_occurrence_ms),
                    clock(m.last_occurrence_ms)
                )),
                Cell::from(m.policy.clone()),
                Cell::from(Span::styled(m.reason.clone(), theme.warn())),
                Cell::from(clean(&m.owner)),
            ])
        })
        .collect();
    render_history(
        frame,
        area,
        app,
        HistoryTable {
            title: view_title(app, "Misfire records (7 days)", records.len(), loaded),
            header: &[
                "recorded",
                "trigger",
                "occ.",
                "passed over (UTC)",
                "policy",
                "reason",
                "owner",
            ],
            widths: &[
                Constraint::Length(11),
                Constraint::Fill(2),
                Constraint::Length(6),
                Constraint::Length(27),
                Constraint::Length(9),
                Constraint::Length(12),
                Constraint::Fill(1),
            ],
            rows,
            empty: "no misfire record in retention",
        },
        theme,
    );
}

/// An audited fence's owner, or `-`.
fn fence_owner(fence: Option<&serde_json::Value>) -> String {
    fence
        .and_then(|f| f.get("owner"))
        .and_then(|o| o.as_str())
        .map_or_else(|| "-".to_owned(), clean)
}

pub(super) fn draw_audit(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let entries = app.visible_audit();
    let loaded = app.snapshot.as_ref().map_or(0, |s| s.audit.len());
    let rows: Vec<Row> = entries
        .iter()
        .map(|a| {
            Row::new(vec![
                Cell::from(format!("{} ago", short_span(now - a.at_ms))),
                Cell::from(clean(
                    &TriggerName::new(&a.project_id, &a.trigger_id).to_string(),
                )),
                Cell::from(Span::styled(a.action.clone(), theme.title())),
                Cell::from(format!("{} ({})", clean(&a.actor), clean(&a.db_user))),
                Cell::from(format!(
                    "{} → {}",
                    fence_owner(a.fence_before.as_ref()),
                    fence_owner(a.fence_after.as_ref())
                )),
                Cell::from(a.reason.as_deref().map_or_else(|| "-".to_owned(), clean)),
            ])
        })
        .collect();
    render_history(
        frame,
        area,
        app,
        HistoryTable {
            title: view_title(app, "Operator actions", entries.len(), loaded),
            header: &[
                "at",
                "trigger",
                "action",
                "actor (login)",
                "claim owner",
                "reason",
            ],
            widths: &[
                Constraint::Length(11),
                Constraint::Fill(2),
                Constraint::Length(8),
                Constraint::Fill(2),
                Constraint::Fill(2),
                Constraint::Fill(2),
            ],
            rows,
            empty: "no operator action recorded",
        },
        theme,
    );
}

pub(super) fn draw_runs(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let runs = app.visible_runs();
    let loaded = app.snapshot.as_ref().map_or(0, |s| s.runs.len());
    let rows: Vec<Row> = runs
        .iter()
        .map(|r| {
            Row::new(vec![
                Cell::from(format!("{} ago", short_span(now - r.created_at_ms))),
                Cell::from(clean(
                    &TriggerName::new(&r.project_id, &r.trigger_id).to_string(),
                )),
                Cell::from(clock(r.scheduled_for_ms)),
                Cell::from(short_span(r.created_at_ms - r.scheduled_for_ms)),
                Cell::from(r.origin.clone()),
                Cell::from(r.status.to_string()),
                Cell::from(r.run_id.to_string()),
            ])
        })
        .collect();
    render_history(
        frame,
        area,
        app,
        HistoryTable {
            title: view_title(app, "Runs", runs.len(), loaded),
            header: &[
                "admitted",
                "trigger",
                "scheduled",
                "lag",
                "origin",
                "status",
                "run",
            ],
            widths: &[
                Constraint::Length(11),
                Constraint::Fill(2),
                Constraint::Length(12),
                Constraint::Length(7),
                Constraint::Length(8),
                Constraint::Length(11),
                Constraint::Fill(2),
            ],
            rows,
            empty: "no run yet",
        },
        theme,
    );
}
