//! The body's panels: replicas, schedules (with their state and lease cells), recent admissions.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::*;

use super::*;

/// The replicas panel's columns: the registry's counters (failed rounds, fence losses, misfires
/// recorded, all since the replica started) beside the claims, then the version it runs and, in
/// the last column, what needs a look (or its last error).
const REPLICA_COLUMNS: &[(&str, Constraint)] = &[
    ("replica or owner", Constraint::Fill(2)),
    ("state", Constraint::Length(8)),
    ("heartbeat", Constraint::Length(10)),
    ("claims", Constraint::Length(6)),
    ("expired", Constraint::Length(7)),
    ("last claim", Constraint::Length(11)),
    ("adm/1m", Constraint::Length(6)),
    ("batch", Constraint::Length(5)),
    ("fail", Constraint::Length(4)),
    ("fence", Constraint::Length(5)),
    ("misf", Constraint::Length(4)),
    ("version", Constraint::Length(8)),
    ("", Constraint::Fill(3)),
];

/// The replicas panel: registered replicas that have not stopped, live or stale, idle ones
/// included (the registry, as `inspect replicas` reads it), then claim owners without a running
/// replica: an operator's manual claims, or a stopped replica's leftovers.
pub(super) fn draw_replicas(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let panel = app
        .snapshot
        .as_ref()
        .map(|s| s.panel_rows())
        .unwrap_or_default();
    let (mut live, mut stalled, mut stale, mut others) = (0, 0, 0, 0);
    // Which of REPLICA_COLUMNS fit: the version, then the last claim and the batch, then the
    // registry's counters give way (inspect replicas has them all).
    let shown: Vec<bool> = REPLICA_COLUMNS
        .iter()
        .map(|(name, _)| match *name {
            "version" => area.width >= 130,
            "last claim" | "batch" => area.width >= 110,
            "fail" | "fence" | "misf" => area.width >= 100,
            _ => true,
        })
        .collect();
    let shown = &shown;
    let rows: Vec<Row> = panel
        .iter()
        .map(|row| {
            let registry = match *row {
                PanelRow::Replica { replica, .. } => Some(replica),
                PanelRow::Other { .. } => None,
            };
            let (name, state, heartbeat, owner, batch) = match *row {
                PanelRow::Replica { replica, claims } => {
                    let state = match (replica.liveness, replica.state.as_str()) {
                        (Liveness::Live, "draining") => Span::raw("draining"),
                        (Liveness::Live, _) => Span::styled("live", theme.fg(Color::Green)),
                        (Liveness::Stalled, _) => Span::styled("STALLED", theme.warn()),
                        _ => Span::styled("STALE", theme.alarm()),
                    };
                    match replica.liveness {
                        Liveness::Live => live += 1,
                        Liveness::Stalled => stalled += 1,
                        _ => stale += 1,
                    }
                    let heartbeat = format!("{} ago", short_span(replica.heartbeat_age_ms));
                    let batch = replica
                        .batch
                        .map_or_else(|| "-".to_owned(), |b| b.to_string());
                    (&replica.owner, state, heartbeat, claims, batch)
                }
                PanelRow::Other { owner, stopped } => {
                    others += 1;
                    let state = if stopped {
                        Span::styled("stopped", theme.dim())
                    } else {
                        Span::raw("operator")
                    };
                    (
                        &owner.owner,
                        state,
                        "-".to_owned(),
                        Some(owner),
                        "-".to_owned(),
                    )
                }
            };
            let liveness = match row {
                PanelRow::Replica { replica, .. } => replica.liveness,
                PanelRow::Other { .. } => Liveness::Live,
            };
            let stale_row = liveness == Liveness::Stale;
            let all_expired = owner.is_some_and(|o| o.expired > 0 && o.claims == 0);
            let status = if stale_row {
                Span::styled("! no heartbeat", theme.alarm())
            } else if liveness == Liveness::Stalled {
                Span::styled("! heartbeat late", theme.warn())
            } else if all_expired {
                Span::styled("! ALL CLAIMS EXPIRED", theme.alarm())
            } else if owner.is_some_and(|o| o.expired > 0) {
                Span::styled("some claims expired", theme.warn())
            } else if let Some(error) = registry.and_then(|r| r.last_error.as_deref()) {
                Span::styled(format!("last error: {}", clean(error)), theme.warn())
            } else if owner.is_none() {
                Span::styled("idle", theme.dim())
            } else {
                Span::raw("")
            };
            let style = if stale_row || all_expired {
                theme.alarm()
            } else if liveness == Liveness::Stalled {
                theme.warn()
            } else {
                Style::new()
            };
            let count = |pick: fn(&crate::store::read::OwnerClaims) -> i64| {
                owner.map_or_else(|| "0".to_owned(), |o| pick(o).to_string())
            };
            let counter = |pick: fn(&crate::store::replicas::ReplicaView) -> i64| {
                registry.map_or_else(|| "-".to_owned(), |r| pick(r).to_string())
            };
            let cells = vec![
                Cell::from(clean(name)),
                Cell::from(state),
                Cell::from(heartbeat),
                Cell::from(count(|o| o.claims)),
                Cell::from(count(|o| o.expired)),
                Cell::from(owner.map_or_else(
                    || "-".to_owned(),
                    |o| format!("{} ago", short_span(now - o.last_claim_at_ms)),
                )),
                Cell::from(count(|o| o.admissions_last_minute)),
                Cell::from(batch),
                Cell::from(counter(|r| r.failed_rounds)),
                Cell::from(counter(|r| r.fence_losses)),
                Cell::from(counter(|r| r.misfires)),
                Cell::from(registry.map_or_else(|| "-".to_owned(), |r| clean(&r.version))),
                Cell::from(status),
            ];
            Row::new(
                cells
                    .into_iter()
                    .zip(shown)
                    .filter_map(|(cell, show)| show.then_some(cell)),
            )
            .style(style)
        })
        .collect();
    let empty = rows.is_empty();
    let title = format!(
        "Replicas: {live} live{}{}{}",
        if stalled > 0 {
            format!(", {stalled} STALLED")
        } else {
            String::new()
        },
        if stale > 0 {
            format!(", {stale} STALE")
        } else {
            String::new()
        },
        if others > 0 {
            format!("; other claim owners: {others}")
        } else {
            String::new()
        }
    );
    let pick = |(column, show): (&(&'static str, Constraint), &bool)| show.then_some(*column);
    let columns: Vec<(&str, Constraint)> =
        REPLICA_COLUMNS.iter().zip(shown).filter_map(pick).collect();
    let table = Table::new(rows, columns.iter().map(|(_, width)| *width))
        .header(Row::new(columns.iter().map(|(name, _)| *name)).style(theme.title()))
        .block(block(&title, theme));
    frame.render_widget(table, area);
    if empty {
        let inner = Rect {
            y: area.y + 2,
            height: 1,
            ..area.inner(ratatui::layout::Margin::new(1, 0))
        };
        frame.render_widget(
            Paragraph::new("no replica is registered as running, and no owner holds a claim")
                .style(theme.dim()),
            inner,
        );
    }
}

/// How a row reads in the state column, and how loud. A paused row reads paused whatever else
/// holds, as the read model and `inspect trigger` name the pause first.
pub(super) fn state_label(row: &ScheduleRow, theme: Theme) -> (&'static str, Style) {
    if row.paused.is_some() {
        return ("paused", theme.warn());
    }
    match row.state {
        ScheduleState::ExpiredClaim => ("EXPIRED", theme.alarm()),
        ScheduleState::Claimed => ("claimed", theme.fg(Color::Cyan)),
        ScheduleState::Due => ("due", theme.warn()),
        ScheduleState::Uninitialized => ("uninit", Style::new()),
        ScheduleState::NotDue => ("waiting", Style::new()),
        ScheduleState::Paused => ("paused", theme.warn()),
        ScheduleState::Disabled => ("disabled", theme.dim()),
    }
}

/// The lease as a bar of what is left, and the time left; an expired lease shows how long ago.
/// The lease bar of a claimed row, from the row itself: a claim writes its acquired time into
/// `updated_at_ms`, and nothing else writes a claimed row, so no lookup in the claims list is
/// needed (nor is a claim beyond the loaded list shown without its bar).
pub(super) fn lease_cell(app: &App, row: &ScheduleRow, width: usize) -> String {
    let (Some(snapshot), Some(expires_at_ms)) = (&app.snapshot, row.claim_expires_at_ms) else {
        return String::new();
    };
    let remaining = expires_at_ms - snapshot.now_ms();
    if remaining <= 0 {
        return format!("{:░<bar$} -{}", "", span(-remaining), bar = width);
    }
    let total = (expires_at_ms - row.updated_at_ms).max(1);
    let filled = usize::try_from((remaining * width as i64 + total - 1) / total)
        .unwrap_or(width)
        .min(width);
    format!(
        "{}{} {}",
        "█".repeat(filled),
        "░".repeat(width - filled),
        span(remaining)
    )
}

pub(super) fn draw_schedules(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let rows = app.visible_schedules();
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let wide = area.width >= 110;
    let bar = if wide { 10 } else { 5 };
    let table_rows: Vec<Vec<Cell>> = rows
        .iter()
        .map(|row| {
            let (label, style) = state_label(row, theme);
            let mark = if row.state == ScheduleState::ExpiredClaim {
                "!"
            } else {
                " "
            };
            // A parked row is never due, however old or near its cursor: no countdown, no lag.
            let parked = row.state.is_parked() || row.paused.is_some();
            let next = match row.next_fire_at_ms {
                _ if parked => "-".to_owned(),
                Some(next) if next > now => format!("in {}", short_span(next - now)),
                Some(_) => "now".to_owned(),
                None => "-".to_owned(),
            };
            let lag = match row.next_fire_at_ms {
                Some(next) if next <= now && !parked => short_span(now - next),
                _ => "-".to_owned(),
            };
            let misfires = app
                .snapshot
                .as_ref()
                .and_then(|s| s.misfires.get(&key_of(row)).copied())
                .unwrap_or(0);
            let misfires = if misfires >= crate::store::misfires::COUNT_CAP {
                format!("{}+", crate::store::misfires::COUNT_CAP - 1)
            } else {
                misfires.to_string()
            };
            vec![
                Cell::from(Span::styled(mark, theme.alarm())),
                Cell::from(clean(
                    &TriggerName::new(&row.project_id, &row.trigger_id).to_string(),
                )),
                Cell::from(Span::styled(label, style)),
                Cell::from(next),
                Cell::from(lag),
                owner_cell(app, row.claim_owner.as_deref(), theme),
                Cell::from(lease_cell(app, row, bar)),
                Cell::from(row.claim_version.to_string()),
                Cell::from(row.state_version.to_string()),
                Cell::from(misfires),
            ]
        })
        .collect::<Vec<Vec<Cell>>>();
    let trigger_width = rows
        .iter()
        .map(|row| row.project_id.chars().count() + row.trigger_id.chars().count() + 1)
        .max()
        .unwrap_or(0)
        .clamp(16, 48);
    let trigger_width = u16::try_from(trigger_width).unwrap_or(48);
    let shown = table_rows.len();
    let total = app.snapshot.as_ref().map_or(0, |s| s.schedules.len());
    let title = if app.filter.is_empty() {
        format!(
            "Schedules, {} ({shown} of {total} loaded)",
            app.sort.title()
        )
    } else {
        format!(
            "Schedules matching /{} ({shown} of {total} loaded)",
            clean(&app.filter)
        )
    };
    // The columns the operator chose (`c`, `--columns`), each cell and width with its header.
    let chosen = |i: &usize| app.columns.get(*i).copied().unwrap_or(true);
    let table_rows: Vec<Row> = table_rows
        .into_iter()
        .map(|cells| {
            Row::new(
                cells
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| chosen(i))
                    .map(|(_, cell)| cell),
            )
        })
        .collect();
    let widths: Vec<Constraint> = [
        Constraint::Length(1),
        // As wide as the longest name shown (16 to 48 columns), not a share of the screen:
        // a wide terminal gives the owner the rest.
        Constraint::Length(trigger_width),
        Constraint::Length(8),
        // `in ` and a short span of up to seven characters (`364d23h`).
        Constraint::Length(10),
        Constraint::Length(7),
        Constraint::Fill(1),
        Constraint::Length(u16::try_from(bar + 8).unwrap_or(13)),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Length(3),
    ]
    .into_iter()
    .enumerate()
    .filter(|(i, _)| chosen(i))
    .map(|(_, width)| width)
    .collect();
    let table = Table::new(table_rows, widths)
        .header(
            Row::new(
                COLUMNS
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| chosen(i))
                    .map(|(_, (name, _))| if *name == "!" { "" } else { *name }),
            )
            .style(theme.title()),
        )
        .row_highlight_style(theme.selected())
        // A symbol as well as the reverse video, so the selection shows in any terminal.
        .highlight_symbol("›")
        .highlight_spacing(HighlightSpacing::Always)
        .block(block(&title, theme));
    let mut state = TableState::default().with_selected(app.selected_index());
    frame.render_stateful_widget(table, area, &mut state);
}

/// A claim owner as the schedules table shows it: marked STALE or STALLED when the registry says
/// its replica is not live (the claim is held by a process that is dead or hung), `stopped` when
/// the replica stopped and left it.
fn owner_cell<'a>(app: &App, owner: Option<&str>, theme: Theme) -> Cell<'a> {
    let Some(owner) = owner else {
        return Cell::from("-");
    };
    let trouble = app.snapshot.as_ref().and_then(|s| s.owner_trouble(owner));
    let name = Span::raw(clean(owner));
    match trouble.map(owner_mark) {
        Some((mark, alarm)) => Cell::from(Line::from(vec![
            name,
            Span::styled(
                format!(" {mark}"),
                if alarm { theme.alarm() } else { theme.warn() },
            ),
        ])),
        None => Cell::from(Line::from(name)),
    }
}

/// The mark of an owner whose replica is not live, and whether it is an alarm (its claims have
/// expired) rather than a warning.
pub(super) fn owner_mark(liveness: Liveness) -> (&'static str, bool) {
    match liveness {
        Liveness::Stale => ("STALE", true),
        Liveness::Stalled => ("STALLED", false),
        _ => ("stopped", false),
    }
}

pub(super) fn draw_recent(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let runs = app.visible_recent();
    let rows: Vec<Row> = runs
        .iter()
        .map(|run| {
            Row::new(vec![
                Cell::from(format!("{} ago", short_span(now - run.created_at_ms))),
                Cell::from(clean(
                    &TriggerName::new(&run.project_id, &run.trigger_id).to_string(),
                )),
                Cell::from(clock(run.scheduled_for_ms)),
                Cell::from(run.run_id.to_string()),
                Cell::from(clean(&run.idempotency_key)),
            ])
        })
        .collect();
    let table = Table::new(
        rows,
        [
            // short_span is at most six characters, seven with a sign: never cut.
            Constraint::Length(11),
            Constraint::Fill(2),
            Constraint::Length(12),
            Constraint::Fill(2),
            Constraint::Fill(3),
        ],
    )
    .header(
        Row::new(["admitted", "trigger", "scheduled", "run", "idempotency key"])
            .style(theme.title()),
    )
    .block(block("Recent admissions", theme));
    frame.render_widget(table, area);
}
