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

/// A history view: what it lists and how many the snapshot holds, the header of its first
/// column (how long ago each record was written), its columns after the trigger, and what it says
/// when it has none.
struct History<'a> {
    what: &'a str,
    loaded: usize,
    when: &'a str,
    columns: &'a [(&'a str, Constraint)],
    empty: &'a str,
}

/// One record's row: when it was written and its trigger, the two columns every history view
/// opens with, then the view's own cells.
struct Entry {
    at_ms: i64,
    trigger: TriggerName,
    cells: Vec<Cell<'static>>,
}

/// Draws `records` as `view` lists them, each the row `entry` makes of it.
fn draw_history<T>(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    theme: Theme,
    view: History,
    records: Vec<&T>,
    entry: impl Fn(&T) -> Entry,
) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let title = view_title(app, view.what, records.len(), view.loaded);
    let none = records.is_empty();
    let rows: Vec<Row> = records
        .into_iter()
        .skip(app.view_scroll)
        .map(|record| {
            let Entry {
                at_ms,
                trigger,
                cells,
            } = entry(record);
            let opening = [
                Cell::from(format!("{} ago", short_span(now - at_ms))),
                Cell::from(clean(&trigger.to_string())),
            ];
            Row::new(opening.into_iter().chain(cells))
        })
        .collect();
    let header = [view.when, "trigger"]
        .into_iter()
        .chain(view.columns.iter().map(|(name, _)| *name));
    let widths = [Constraint::Length(11), Constraint::Fill(2)]
        .into_iter()
        .chain(view.columns.iter().map(|(_, width)| *width));
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(theme.title()))
        .block(block(&title, theme));
    frame.render_widget(table, area);
    if none {
        let inner = Rect {
            y: area.y + 2,
            height: 1.min(area.height.saturating_sub(3)),
            ..area.inner(ratatui::layout::Margin::new(1, 0))
        };
        frame.render_widget(
            Paragraph::new(view.empty.to_owned()).style(theme.dim()),
            inner,
        );
    }
}

pub(super) fn draw_misfires(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let view = History {
        what: "Misfire records (7 days)",
        loaded: app.snapshot.as_ref().map_or(0, |s| s.misfire_records.len()),
        when: "recorded",
        columns: &[
            ("occ.", Constraint::Length(6)),
            ("passed over (UTC)", Constraint::Length(27)),
            ("policy", Constraint::Length(9)),
            ("reason", Constraint::Length(12)),
            ("owner", Constraint::Fill(1)),
        ],
        empty: "no misfire record in retention",
    };
    let records = app.visible_misfires();
    draw_history(frame, area, app, theme, view, records, |m| Entry {
        at_ms: m.recorded_at_ms,
        trigger: TriggerName::new(&m.project_id, &m.trigger_id),
        cells: vec![
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
        ],
    });
}

/// An audited fence's owner, or `-`.
fn fence_owner(fence: Option<&serde_json::Value>) -> String {
    fence
        .and_then(|f| f.get("owner"))
        .and_then(|o| o.as_str())
        .map_or_else(|| "-".to_owned(), clean)
}

pub(super) fn draw_audit(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let view = History {
        what: "Operator actions",
        loaded: app.snapshot.as_ref().map_or(0, |s| s.audit.len()),
        when: "at",
        columns: &[
            ("action", Constraint::Length(8)),
            ("actor (login)", Constraint::Fill(2)),
            ("claim owner", Constraint::Fill(2)),
            ("reason", Constraint::Fill(2)),
        ],
        empty: "no operator action recorded",
    };
    let entries = app.visible_audit();
    draw_history(frame, area, app, theme, view, entries, |a| Entry {
        at_ms: a.at_ms,
        trigger: TriggerName::new(&a.project_id, &a.trigger_id),
        cells: vec![
            Cell::from(Span::styled(a.action.clone(), theme.title())),
            Cell::from(format!("{} ({})", clean(&a.actor), clean(&a.db_user))),
            Cell::from(format!(
                "{} → {}",
                fence_owner(a.fence_before.as_ref()),
                fence_owner(a.fence_after.as_ref())
            )),
            Cell::from(a.reason.as_deref().map_or_else(|| "-".to_owned(), clean)),
        ],
    });
}

pub(super) fn draw_runs(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let view = History {
        what: "Runs",
        loaded: app.snapshot.as_ref().map_or(0, |s| s.runs.len()),
        when: "admitted",
        columns: &[
            ("scheduled", Constraint::Length(12)),
            ("lag", Constraint::Length(7)),
            ("origin", Constraint::Length(8)),
            ("status", Constraint::Length(11)),
            ("run", Constraint::Fill(2)),
        ],
        empty: "no run yet",
    };
    let runs = app.visible_runs();
    draw_history(frame, area, app, theme, view, runs, |r| Entry {
        at_ms: r.created_at_ms,
        trigger: TriggerName::new(&r.project_id, &r.trigger_id),
        cells: vec![
            Cell::from(clock(r.scheduled_for_ms)),
            Cell::from(short_span(r.created_at_ms - r.scheduled_for_ms)),
            Cell::from(r.origin.clone()),
            Cell::from(r.status.to_string()),
            Cell::from(r.run_id.to_string()),
        ],
    });
}
