//! Drawing: a pure function of the state. Every time is shown relative to the snapshot's
//! database time (the only clock, docs/DESIGN.md §4.1), so the same state draws the same frame,
//! which is what the snapshot tests rely on. Marks that matter (an expired claim nobody took over,
//! an owner whose claims all expired, stale data) are text first and colour second, so they
//! survive `NO_COLOR` and `--color never`.

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{
    Block, Borders, Cell, Clear, HighlightSpacing, Paragraph, Row, Table, TableState, Wrap,
};

use super::input::KEYS;
use super::state::{App, ExpireRequest, Modal, PanelRow, PauseRequest, SortOrder, key_of};
use crate::core::TriggerName;
use crate::core::text::clean;
use crate::core::time::{clock, span, utc};
use crate::store::read::{PauseView, ScheduleRow, ScheduleState, TriggerDetail};

/// The schedules table's columns and what each shows: the `?` overlay and `man qlsched-top` list
/// them from here.
pub const COLUMNS: &[(&str, &str)] = &[
    ("!", "a claim past its lease that no replica took over"),
    ("trigger", "PROJECT/TRIGGER"),
    (
        "state",
        "claimed, EXPIRED, due, uninit, waiting, paused (operator), disabled (manifest)",
    ),
    (
        "next",
        "time until the cursor (the next occurrence); now when due",
    ),
    ("lag", "how long a due row has waited past its cursor"),
    (
        "owner",
        "the claim owner (a replica, or an operator's manual claim)",
    ),
    (
        "lease",
        "the lease left, as a bar and a time; negative once expired",
    ),
    (
        "c.v",
        "claim version: +1 on every claim, expiry, and publish that voids a claim",
    ),
    (
        "s.v",
        "state version: +1 on every write of the schedule row",
    ),
    (
        "mis",
        "misfire records of the row's trigger revision kept (7 days); 99+ past 100",
    ),
];

/// Styles, or none at all when colour is off.
#[derive(Clone, Copy)]
struct Theme {
    color: bool,
}

impl Theme {
    fn fg(self, color: Color) -> Style {
        if self.color {
            Style::new().fg(color)
        } else {
            Style::new()
        }
    }

    fn alarm(self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }

    fn warn(self) -> Style {
        self.fg(Color::Yellow)
    }

    fn dim(self) -> Style {
        self.fg(Color::DarkGray)
    }

    fn title(self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }

    fn selected(self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }
}

/// Draws the whole dashboard.
pub fn draw(frame: &mut Frame, app: &App) {
    let theme = Theme { color: app.color };
    let area = frame.area();
    let banner = u16::from(app.stale.is_some());
    let [header, banner_area, body, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(banner),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(frame, header, app, theme);
    if banner > 0 {
        draw_banner(frame, banner_area, app, theme);
    }
    draw_body(frame, body, app, theme);
    draw_footer(frame, footer, app, theme);
    match &app.modal {
        Modal::None => {}
        Modal::Help => draw_help(frame, body, theme),
        Modal::Filter { input } => draw_filter(frame, body, input, theme),
        Modal::Detail { key } => {
            let detail = app
                .snapshot
                .as_ref()
                .and_then(|s| s.detail.as_ref())
                .filter(|d| d.project_id == key.project_id && d.trigger_id == key.trigger_id);
            let pause = app
                .snapshot
                .as_ref()
                .and_then(|s| s.row_of(key))
                .and_then(|row| row.paused.as_ref());
            draw_detail(frame, body, &key.to_string(), detail, pause, theme);
        }
        Modal::ConfirmExpire(request) => draw_confirm(frame, body, app, request, theme),
        Modal::ConfirmPause(request) => draw_confirm_pause(frame, body, app, request, theme),
    }
}

fn draw_header(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    // The screen frozen by space, not a trigger paused by p.
    let mode = if app.paused {
        Span::styled(" FROZEN ", theme.warn().add_modifier(Modifier::REVERSED))
    } else {
        Span::styled(" LIVE ", theme.fg(Color::Green))
    };
    let rate = format!(
        "every {}",
        span(i64::try_from(app.refresh.as_millis()).unwrap_or(i64::MAX))
    );
    let mut first = vec![Span::styled("qlsched top", theme.title())];
    let mut second = Vec::new();
    match &app.snapshot {
        Some(snapshot) => {
            let summary = &snapshot.summary;
            if let Some(standby) = summary.server.header() {
                first.push(Span::raw("  "));
                first.push(Span::styled(
                    format!(" {standby} "),
                    theme.warn().add_modifier(Modifier::REVERSED),
                ));
            }
            first.push(Span::raw(format!(
                "  db {} UTC  {rate} ",
                clock(summary.now_ms)
            )));
            first.push(mode);
            first.push(Span::styled(
                format!(" {} ms", snapshot.took.as_millis()),
                theme.dim(),
            ));
            first.push(Span::raw(format!(
                "  {} v{} on {}",
                app.schema, summary.schema_version, app.database
            )));
            let counts = &summary.counts;
            let about = if summary.total_estimated { "≈" } else { "" };
            second.push(Span::raw(format!("schedules {about}{}: ", counts.total)));
            let parts = [
                ("due", counts.due, theme.warn()),
                ("claimed", counts.claimed, Style::new()),
                ("expired", counts.expired_claim, theme.alarm()),
                ("uninit", counts.uninitialized, Style::new()),
                ("waiting", counts.not_due, Style::new()),
                ("paused", counts.paused, theme.warn()),
                ("disabled", counts.disabled, theme.dim()),
            ];
            // Every count fits in 80 columns with single gaps.
            let gap = if area.width >= 90 { "  " } else { " " };
            for (index, (name, count, style)) in parts.into_iter().enumerate() {
                if index > 0 {
                    second.push(Span::raw(gap));
                }
                let style = if count > 0 { style } else { Style::new() };
                let more = if name == "due" && summary.due_capped {
                    "+"
                } else {
                    ""
                };
                let about = if name == "waiting" && summary.total_estimated {
                    "≈"
                } else {
                    ""
                };
                second.push(Span::styled(format!("{name} {about}{count}{more}"), style));
            }
        }
        None => {
            first.push(Span::raw(format!("  {rate} ")));
            first.push(mode);
            first.push(Span::raw(format!("  {} on {}", app.schema, app.database)));
            second.push(Span::styled("waiting for the first refresh…", theme.dim()));
        }
    }
    if !app.filter.is_empty() {
        second.push(Span::styled(
            format!("  filter /{}", clean(&app.filter)),
            theme.warn(),
        ));
    }
    if app.sort != SortOrder::Urgency {
        second.push(Span::raw(format!("  sort {}", app.sort.label())));
    }
    if app.readonly {
        second.push(Span::raw("  read-only"));
    }
    frame.render_widget(
        Paragraph::new(vec![Line::from(first), Line::from(second)]),
        area,
    );
}

fn draw_banner(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let Some(stale) = &app.stale else { return };
    let since = app.snapshot.as_ref().map_or_else(
        || "no data yet".to_owned(),
        |s| format!("data from db {} is stale", clock(s.summary.now_ms)),
    );
    let text = format!(
        " CONNECTION LOST ({} failed refreshes): {since}; reconnecting. {}",
        stale.failures,
        clean(&stale.error)
    );
    frame.render_widget(
        Paragraph::new(text).style(theme.alarm().add_modifier(Modifier::REVERSED)),
        area,
    );
}

fn draw_body(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let panel = app.snapshot.as_ref().map_or(0, |s| s.panel_rows().len());
    let panel_rows = u16::try_from(panel.clamp(1, 5)).unwrap_or(5);
    let recent_rows: u16 = if area.height >= 30 { 8 } else { 3 };
    let [replicas, schedules, recent] = Layout::vertical([
        Constraint::Length(panel_rows + 3),
        Constraint::Min(5),
        Constraint::Length(recent_rows + 3),
    ])
    .areas(area);
    draw_replicas(frame, replicas, app, theme);
    draw_schedules(frame, schedules, app, theme);
    draw_recent(frame, recent, app, theme);
}

fn block(title: &str, theme: Theme) -> Block<'static> {
    Block::new()
        .borders(Borders::ALL)
        .title(Span::styled(format!(" {title} "), theme.title()))
}

/// The replicas panel: registered replicas that have not stopped, live or stale, idle ones
/// included (the registry, as `inspect replicas` reads it), then claim owners without a running
/// replica: an operator's manual claims, or a stopped replica's leftovers.
fn draw_replicas(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let panel = app
        .snapshot
        .as_ref()
        .map(|s| s.panel_rows())
        .unwrap_or_default();
    let (mut live, mut stale, mut others) = (0, 0, 0);
    let rows: Vec<Row> = panel
        .iter()
        .map(|row| {
            let (name, state, heartbeat, owner) = match *row {
                PanelRow::Replica { replica, claims } => {
                    let state = match (replica.liveness.as_str(), replica.state.as_str()) {
                        ("live", "draining") => Span::raw("draining"),
                        ("live", _) => Span::styled("live", theme.fg(Color::Green)),
                        _ => Span::styled("STALE", theme.alarm()),
                    };
                    if replica.liveness == "live" {
                        live += 1;
                    } else {
                        stale += 1;
                    }
                    let heartbeat = format!("{} ago", span(replica.heartbeat_age_ms));
                    (&replica.owner, state, heartbeat, claims)
                }
                PanelRow::Other { owner, stopped } => {
                    others += 1;
                    let state = if stopped {
                        Span::styled("stopped", theme.dim())
                    } else {
                        Span::raw("operator")
                    };
                    (&owner.owner, state, "-".to_owned(), Some(owner))
                }
            };
            let stale_row =
                matches!(row, PanelRow::Replica { replica, .. } if replica.liveness != "live");
            let all_expired = owner.is_some_and(|o| o.expired > 0 && o.claims == 0);
            let status = if stale_row {
                Span::styled("! no heartbeat", theme.alarm())
            } else if all_expired {
                Span::styled("! ALL CLAIMS EXPIRED", theme.alarm())
            } else if owner.is_some_and(|o| o.expired > 0) {
                Span::styled("some claims expired", theme.warn())
            } else if owner.is_none() {
                Span::styled("idle", theme.dim())
            } else {
                Span::raw("")
            };
            let style = if stale_row || all_expired {
                theme.alarm()
            } else {
                Style::new()
            };
            let count = |pick: fn(&crate::store::read::OwnerClaims) -> i64| {
                owner.map_or_else(|| "0".to_owned(), |o| pick(o).to_string())
            };
            Row::new(vec![
                Cell::from(clean(name)),
                Cell::from(state),
                Cell::from(heartbeat),
                Cell::from(count(|o| o.claims)),
                Cell::from(count(|o| o.expired)),
                Cell::from(owner.map_or_else(
                    || "-".to_owned(),
                    |o| format!("{} ago", span(now - o.last_claim_at_ms)),
                )),
                Cell::from(count(|o| o.admissions_last_minute)),
                Cell::from(status),
            ])
            .style(style)
        })
        .collect();
    let empty = rows.is_empty();
    let title = format!(
        "Replicas: {live} live{}{}",
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
    let table = Table::new(
        rows,
        [
            Constraint::Fill(2),
            Constraint::Length(8),
            Constraint::Length(10),
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Length(11),
            Constraint::Length(6),
            Constraint::Fill(2),
        ],
    )
    .header(
        Row::new([
            "replica or owner",
            "state",
            "heartbeat",
            "claims",
            "expired",
            "last claim",
            "adm/1m",
            "",
        ])
        .style(theme.title()),
    )
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
/// holds (the read model counts it among the disabled), as `inspect trigger` names the pause first.
fn state_label(row: &ScheduleRow, theme: Theme) -> (&'static str, Style) {
    if row.paused.is_some() {
        return ("paused", theme.warn());
    }
    match row.state {
        ScheduleState::ExpiredClaim => ("EXPIRED", theme.alarm()),
        ScheduleState::Claimed => ("claimed", theme.fg(Color::Cyan)),
        ScheduleState::Due => ("due", theme.warn()),
        ScheduleState::Uninitialized => ("uninit", Style::new()),
        ScheduleState::NotDue => ("waiting", Style::new()),
        ScheduleState::Disabled => ("disabled", theme.dim()),
    }
}

/// The lease as a bar of what is left, and the time left; an expired lease shows how long ago.
/// The lease bar of a claimed row, from the row itself: a claim writes its acquired time into
/// `updated_at_ms`, and nothing else writes a claimed row, so no lookup in the claims list is
/// needed (nor is a claim beyond the loaded list shown without its bar).
fn lease_cell(app: &App, row: &ScheduleRow, width: usize) -> String {
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

fn draw_schedules(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let rows = app.visible_schedules();
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let wide = area.width >= 110;
    let bar = if wide { 10 } else { 5 };
    let table_rows: Vec<Row> = rows
        .iter()
        .map(|row| {
            let (label, style) = state_label(row, theme);
            let mark = if row.state == ScheduleState::ExpiredClaim {
                "!"
            } else {
                " "
            };
            // A switched-off row is not due now, however old its cursor.
            let next = match row.next_fire_at_ms {
                Some(next) if next > now => format!("in {}", span(next - now)),
                Some(_) if row.state != ScheduleState::Disabled => "now".to_owned(),
                _ => "-".to_owned(),
            };
            let lag = match row.next_fire_at_ms {
                Some(next) if next <= now && row.state != ScheduleState::Disabled => {
                    span(now - next)
                }
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
            Row::new(vec![
                Cell::from(Span::styled(mark, theme.alarm())),
                Cell::from(clean(
                    &TriggerName::new(&row.project_id, &row.trigger_id).to_string(),
                )),
                Cell::from(Span::styled(label, style)),
                Cell::from(next),
                Cell::from(lag),
                Cell::from(
                    row.claim_owner
                        .as_deref()
                        .map_or_else(|| "-".to_owned(), clean),
                ),
                Cell::from(lease_cell(app, row, bar)),
                Cell::from(row.claim_version.to_string()),
                Cell::from(row.state_version.to_string()),
                Cell::from(misfires),
            ])
        })
        .collect();
    let shown = table_rows.len();
    let total = app.snapshot.as_ref().map_or(0, |s| s.schedules.len());
    let title = if app.filter.is_empty() {
        format!("Schedules, most urgent first ({shown} of {total} loaded)")
    } else {
        format!(
            "Schedules matching /{} ({shown} of {total} loaded)",
            clean(&app.filter)
        )
    };
    let table = Table::new(
        table_rows,
        [
            Constraint::Length(1),
            Constraint::Fill(2),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(7),
            Constraint::Fill(1),
            Constraint::Length(u16::try_from(bar + 8).unwrap_or(13)),
            Constraint::Length(4),
            Constraint::Length(4),
            Constraint::Length(3),
        ],
    )
    .header(
        Row::new(
            COLUMNS
                .iter()
                .map(|(name, _)| if *name == "!" { "" } else { *name }),
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

fn draw_recent(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let runs = app.visible_recent();
    let rows: Vec<Row> = runs
        .iter()
        .map(|run| {
            Row::new(vec![
                Cell::from(format!("{} ago", span(now - run.created_at_ms))),
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
            Constraint::Length(10),
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

fn draw_footer(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let line = match &app.notice {
        Some(notice) => Line::from(Span::styled(
            clean(&notice.text),
            if notice.is_error {
                theme.alarm()
            } else {
                theme.fg(Color::Green)
            },
        )),
        None => {
            let act = if app.readonly {
                ""
            } else {
                "  e expire  p pause"
            };
            // The rate keys give way first on a narrow terminal (? lists them).
            let rate = if area.width >= 89 { "  +- rate" } else { "" };
            Line::from(Span::styled(
                format!("q quit  ↑↓ move  ⏎ detail  / filter  s sort  ␣ freeze{rate}{act}  ? help"),
                theme.dim(),
            ))
        }
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// A rectangle of `width` × `height` centred in `area`, shrunk to fit.
fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

fn draw_popup(frame: &mut Frame, area: Rect, title: &str, text: Text<'static>, theme: Theme) {
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(text)
            .block(block(title, theme))
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn draw_help(frame: &mut Frame, body: Rect, theme: Theme) {
    let mut lines: Vec<Line> = KEYS
        .iter()
        .map(|(keys, what)| {
            Line::from(vec![
                Span::styled(format!("{keys:<16}"), theme.title()),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    lines.extend(COLUMNS.iter().map(|(column, what)| {
        Line::from(vec![
            Span::styled(format!("{column:<16}"), theme.title()),
            Span::raw(*what),
        ])
    }));
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let area = centered(body, 104, height);
    draw_popup(
        frame,
        area,
        "Keys and columns; times are database time (? or Esc closes)",
        Text::from(lines),
        theme,
    );
}

fn draw_filter(frame: &mut Frame, body: Rect, input: &str, theme: Theme) {
    let area = Rect {
        y: body.y + body.height.saturating_sub(3),
        height: 3.min(body.height),
        ..body
    };
    let line = Line::from(vec![
        Span::raw(format!("/{}", clean(input))),
        Span::styled("█", theme.dim()),
        Span::styled(
            "   part of PROJECT/TRIGGER or owner; Enter applies, Esc cancels",
            theme.dim(),
        ),
    ]);
    draw_popup(frame, area, "Filter", Text::from(line), theme);
}

fn field(name: &str, value: String, theme: Theme) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{name:<15}"), theme.title()),
        Span::raw(value),
    ])
}

/// Runs the detail panel lists (its title counts these, not what was loaded).
const DETAIL_RUNS: usize = 5;

fn draw_detail(
    frame: &mut Frame,
    body: Rect,
    name: &str,
    detail: Option<&TriggerDetail>,
    pause: Option<&PauseView>,
    theme: Theme,
) {
    let area = centered(
        body,
        body.width.saturating_sub(4),
        body.height.saturating_sub(2),
    );
    let Some(detail) = detail else {
        draw_popup(frame, area, name, Text::from("loading…"), theme);
        return;
    };
    let diagnosis = &detail.why_not_firing;
    let mut lines = vec![
        Line::from(vec![
            Span::styled("why not firing ", theme.title()),
            Span::styled(diagnosis.reason(), theme.warn()),
        ]),
        field("fix", diagnosis.fix().to_owned(), theme),
    ];
    if let Some(state) = &detail.state {
        let now = state.now_ms;
        if let Some(pause) = pause {
            lines.push(field(
                "paused",
                format!("{} · p resumes", pause_text(pause, now)),
                theme,
            ));
        }
        let d = &state.definition;
        let s = &state.schedule;
        lines.push(field(
            "definition",
            format!(
                "cron \"{}\" in {} · misfire {} (grace {}) · revision {} · {} · project {} · task {}",
                d.cron_expr,
                d.time_zone,
                d.misfire_policy,
                span(d.misfire_grace_ms),
                d.revision,
                if d.enabled { "enabled" } else { "disabled" },
                d.project_status,
                d.task_id
            ),
            theme,
        ));
        lines.push(field(
            "schedule",
            format!(
                "{} · next {} · last {} · revision {} · state v{} · claim v{}",
                if pause.is_some() {
                    "paused"
                } else {
                    s.state.as_str()
                },
                s.next_fire_at_ms.map_or_else(
                    || "-".to_owned(),
                    |n| format!("{} ({})", utc(n), signed(n - now))
                ),
                s.last_scheduled_at_ms.map_or_else(|| "-".to_owned(), utc),
                s.trigger_revision,
                s.state_version,
                s.claim_version
            ),
            theme,
        ));
        match &state.claim {
            Some(claim) => lines.push(field(
                "claim",
                format!(
                    "{} · token {} · v{} · acquired {} · expires {} ({})",
                    claim.owner,
                    claim.token,
                    claim.version,
                    utc(claim.acquired_at_ms),
                    utc(claim.expires_at_ms),
                    signed(claim.remaining_ms)
                ),
                theme,
            )),
            None => lines.push(field("claim", "none".to_owned(), theme)),
        }
        let runs = &state.recent_runs[..state.recent_runs.len().min(DETAIL_RUNS)];
        lines.push(Line::styled(
            format!("latest runs ({})", runs.len()),
            theme.title(),
        ));
        for run in runs {
            lines.push(Line::raw(format!(
                "  {}  {}  {}",
                utc(run.scheduled_for_ms),
                run.status,
                clean(&run.idempotency_key)
            )));
        }
        if !state.audit.is_empty() {
            lines.push(Line::styled("operator actions", theme.title()));
            for entry in state.audit.iter().take(3) {
                lines.push(Line::raw(format!(
                    "  {}  {} by {}{}",
                    utc(entry.at_ms),
                    entry.action,
                    entry.actor,
                    entry
                        .reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                )));
            }
        }
    }
    draw_popup(
        frame,
        area,
        &format!("{name} (Esc closes)"),
        Text::from(lines),
        theme,
    );
}

/// `by ops@host at 2026-…Z (3m05s ago): why`.
fn pause_text(pause: &PauseView, now: i64) -> String {
    format!(
        "by {} at {} ({} ago): {}",
        clean(&pause.paused_by),
        utc(pause.paused_at_ms),
        span(now - pause.paused_at_ms),
        pause
            .reason
            .as_deref()
            .map_or_else(|| "no reason given".to_owned(), clean)
    )
}

fn draw_confirm_pause(
    frame: &mut Frame,
    body: Rect,
    app: &App,
    request: &PauseRequest,
    theme: Theme,
) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let verb = if request.resume { "Resume" } else { "Pause" };
    let mut lines = vec![
        Line::styled(format!("{verb} {}?", request.key), theme.title()),
        Line::raw(""),
    ];
    match &request.paused {
        Some(pause) if request.resume => {
            lines.push(field("paused by", clean(&pause.paused_by), theme));
            lines.push(field(
                "at",
                format!(
                    "{} ({} ago)",
                    utc(pause.paused_at_ms),
                    span(now - pause.paused_at_ms)
                ),
                theme,
            ));
            lines.push(field(
                "reason",
                pause
                    .reason
                    .as_deref()
                    .map_or_else(|| "no reason given".to_owned(), clean),
                theme,
            ));
            lines.push(Line::raw(""));
            lines.push(Line::raw(
                "The occurrences that passed while paused are recorded as one misfire record,",
            ));
            lines.push(Line::raw(
                "not run (backfill admits them if wanted); the cursor moves to the first",
            ));
            lines.push(Line::raw(
                "occurrence from now. A disabled trigger stays disabled. Audited.",
            ));
        }
        _ => {
            let claim = match &request.claim_owner {
                Some(owner) => format!("{} is voided: its admission fails its fence", clean(owner)),
                None => "none in flight".to_owned(),
            };
            lines.push(field("claim", claim, theme));
            lines.push(field("reason", "paused from qlsched top".to_owned(), theme));
            lines.push(Line::raw(""));
            lines.push(Line::raw(
                "No replica claims it until it is resumed (p again, or qlsched resume).",
            ));
            lines.push(Line::raw(
                "The manifest's enabled is left as it is, and publish leaves the pause. Audited.",
            ));
        }
    }
    lines.push(Line::raw(""));
    lines.push(Line::from(vec![
        Span::styled("[y]", theme.alarm()),
        Span::raw(format!(" {}  ", verb.to_lowercase())),
        Span::styled("[n/Esc]", theme.title()),
        Span::raw(" cancel"),
    ]));
    let area = centered(body, 84, 13);
    draw_popup(
        frame,
        area,
        &format!("{verb} trigger"),
        Text::from(lines).alignment(Alignment::Left),
        theme,
    );
}

fn draw_confirm(frame: &mut Frame, body: Rect, app: &App, request: &ExpireRequest, theme: Theme) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let fence = &request.fence;
    let lease = if fence.expires_at_ms <= now {
        format!(
            "{} (expired {} ago)",
            utc(fence.expires_at_ms),
            span(now - fence.expires_at_ms)
        )
    } else {
        format!(
            "{} (in {}: the lease is still running)",
            utc(fence.expires_at_ms),
            span(fence.expires_at_ms - now)
        )
    };
    let lines = vec![
        Line::styled(
            format!("Expire the claim on {}?", request.key),
            theme.title(),
        ),
        Line::raw(""),
        field("owner", clean(&fence.owner), theme),
        field("token", fence.token.to_string(), theme),
        field("claim version", fence.version.to_string(), theme),
        field("expires", lease, theme),
        Line::raw(""),
        Line::raw("Only this exact claim is expired: if it moved since, nothing changes."),
        Line::raw("Its holder's admission will fail its fence. The expiry is audited."),
        Line::raw(""),
        Line::from(vec![
            Span::styled("[y]", theme.alarm()),
            Span::raw(" expire  "),
            Span::styled("[n/Esc]", theme.title()),
            Span::raw(" cancel"),
        ]),
    ];
    let area = centered(body, 76, 13);
    draw_popup(
        frame,
        area,
        "Expire claim",
        Text::from(lines).alignment(Alignment::Left),
        theme,
    );
}

/// A span as `in 4.2s` or `3s ago`.
fn signed(ms: i64) -> String {
    if ms >= 0 {
        format!("in {}", span(ms))
    } else {
        format!("{} ago", span(-ms))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::style::Color;

    use super::draw;
    use crate::tui::fixtures;
    use crate::tui::input::{Action, update};
    use crate::tui::state::{App, Modal};

    fn frame_of(app: &App, width: u16, height: u16) -> Terminal<TestBackend> {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|frame| draw(frame, app)).unwrap();
        terminal
    }

    /// The frame as text, one line per row, trailing blanks trimmed.
    fn render(app: &App, width: u16, height: u16) -> String {
        let terminal = frame_of(app, width, height);
        let buffer = terminal.backend().buffer();
        (0..height)
            .map(|y| {
                let line: String = (0..width).map(|x| buffer[(x, y)].symbol()).collect();
                line.trim_end().to_owned()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn empty_database() {
        insta::assert_snapshot!(render(&fixtures::empty(), 100, 30));
    }

    #[test]
    fn busy_cluster_with_three_owners() {
        insta::assert_snapshot!(render(&fixtures::busy(), 120, 40));
    }

    #[test]
    fn expired_claim_not_taken_over() {
        insta::assert_snapshot!(render(&fixtures::stuck(), 120, 40));
    }

    #[test]
    fn detail_view() {
        let mut app = fixtures::stuck();
        update(&mut app, Action::ToggleDetail);
        if let Some(snapshot) = &mut app.snapshot {
            snapshot.detail = Some(fixtures::stuck_detail());
        }
        assert!(matches!(app.modal, Modal::Detail { .. }));
        insta::assert_snapshot!(render(&app, 120, 40));
    }

    #[test]
    fn the_detail_title_counts_the_runs_it_lists() {
        let mut app = fixtures::stuck();
        update(&mut app, Action::ToggleDetail);
        let mut detail = fixtures::stuck_detail();
        if let Some(state) = &mut detail.state {
            let run = state.recent_runs[0].clone();
            state.recent_runs = vec![run; 10];
        }
        if let Some(snapshot) = &mut app.snapshot {
            snapshot.detail = Some(detail);
        }
        let frame = render(&app, 120, 40);
        assert!(frame.contains("latest runs (5)"), "{frame}");
        assert_eq!(
            frame.matches("  queued  ql3:cron:v1:report-5s").count(),
            5,
            "{frame}"
        );
    }

    #[test]
    fn echoed_text_is_escaped_and_shortened_on_screen() {
        let mut app = fixtures::stuck();
        if let Some(snapshot) = &mut app.snapshot {
            snapshot.schedules[0].schedule.claim_owner =
                Some(format!("evil\u{1b}]0;title\u{7}{}", "o".repeat(10_000)));
            snapshot.summary.owners[0].owner = "\u{1b}[31mred".to_owned();
            snapshot.summary.replicas[0].owner = "\u{1b}[31mred".to_owned();
        }
        let frame = render(&app, 200, 40);
        assert!(!frame.contains('\u{1b}'), "{frame}");
        assert!(frame.contains("\\u{1b}[31mred"), "{frame}");
        assert!(frame.contains("evil\\u{1b}]0;title"), "{frame}");
    }

    #[test]
    fn filter_prompt() {
        let mut app = fixtures::busy();
        update(&mut app, Action::OpenFilter);
        for c in "globex".chars() {
            update(&mut app, Action::FilterChar(c));
        }
        insta::assert_snapshot!(render(&app, 100, 30));
    }

    #[test]
    fn filter_applied() {
        let mut app = fixtures::busy();
        update(&mut app, Action::OpenFilter);
        for c in "demo-".chars() {
            update(&mut app, Action::FilterChar(c));
        }
        update(&mut app, Action::FilterApply);
        insta::assert_snapshot!(render(&app, 100, 30));
    }

    #[test]
    fn expire_confirmation() {
        let mut app = fixtures::stuck();
        update(&mut app, Action::AskExpire);
        assert!(matches!(app.modal, Modal::ConfirmExpire(_)));
        insta::assert_snapshot!(render(&app, 100, 30));
    }

    /// Selects `globex/paused` (paused by an operator) in the busy cluster.
    fn select_paused(app: &mut App) {
        app.selected = Some(crate::core::TriggerName::new("globex", "paused"));
    }

    #[test]
    fn paused_row_detail_names_who_when_and_why() {
        let mut app = fixtures::busy();
        select_paused(&mut app);
        update(&mut app, Action::ToggleDetail);
        if let Some(snapshot) = &mut app.snapshot {
            snapshot.detail = Some(fixtures::paused_detail());
        }
        insta::assert_snapshot!(render(&app, 120, 40));
    }

    #[test]
    fn pause_confirmation() {
        let mut app = fixtures::busy();
        update(&mut app, Action::Down);
        update(&mut app, Action::AskPauseTrigger);
        let Modal::ConfirmPause(request) = &app.modal else {
            panic!("p asks first")
        };
        assert!(!request.resume);
        insta::assert_snapshot!(render(&app, 100, 30));
    }

    #[test]
    fn resume_confirmation() {
        let mut app = fixtures::busy();
        select_paused(&mut app);
        update(&mut app, Action::AskPauseTrigger);
        let Modal::ConfirmPause(request) = &app.modal else {
            panic!("p asks first")
        };
        assert!(request.resume);
        insta::assert_snapshot!(render(&app, 100, 30));
    }

    /// An observer's login may look, not pause: the status line says so and the dashboard
    /// goes on.
    #[test]
    fn pause_refused_for_an_observer() {
        use crate::store::StoreError;
        use crate::tui::load::pause_notice;

        let mut app = fixtures::busy();
        update(&mut app, Action::Down);
        update(&mut app, Action::AskPauseTrigger);
        let Some(crate::tui::input::Effect::Pause(request)) =
            update(&mut app, Action::ConfirmPauseTrigger)
        else {
            panic!("y confirms")
        };
        let refused = Err(StoreError::PermissionDenied(
            "permission denied for table trigger_schedules".to_owned(),
        ));
        app.notice = Some(pause_notice(&request, &refused));
        assert!(!app.quit);
        insta::assert_snapshot!(render(&app, 120, 30));
    }

    #[test]
    fn standby_header() {
        use std::time::Duration;

        use crate::store::observe::ServerRole;

        let mut app = fixtures::busy();
        if let Some(snapshot) = &mut app.snapshot {
            snapshot.summary.server = ServerRole::Standby {
                replay_lag: Some(Duration::from_millis(1_200)),
            };
        }
        insta::assert_snapshot!(render(&app, 100, 30));
        if let Some(snapshot) = &mut app.snapshot {
            snapshot.summary.server = ServerRole::Standby { replay_lag: None };
        }
        let frame = render(&app, 100, 30);
        assert!(
            frame
                .lines()
                .next()
                .is_some_and(|l| l.contains("standby, replay lag unknown")),
            "{frame}"
        );
    }

    #[test]
    fn help_overlay() {
        let mut app = fixtures::busy();
        update(&mut app, Action::ToggleHelp);
        insta::assert_snapshot!(render(&app, 100, 30));
    }

    #[test]
    fn lost_connection() {
        let mut app = fixtures::busy();
        app.apply_failure(
            "database unavailable: postgres@127.0.0.1:5432/qlsched_demo: error connecting to \
             server: Connection refused (os error 111)"
                .to_owned(),
        );
        app.apply_failure("database unavailable: Connection refused (os error 111)".to_owned());
        insta::assert_snapshot!(render(&app, 100, 30));
    }

    #[test]
    fn smallest_terminal_80_by_24() {
        let mut app = fixtures::stuck();
        app.paused = true;
        insta::assert_snapshot!(render(&app, 80, 24));
    }

    #[test]
    fn no_colour_when_colour_is_off() {
        let app = fixtures::stuck();
        let terminal = frame_of(&app, 120, 40);
        let coloured = terminal
            .backend()
            .buffer()
            .content()
            .iter()
            .filter(|cell| cell.fg != Color::Reset || cell.bg != Color::Reset)
            .count();
        assert_eq!(
            coloured, 0,
            "NO_COLOR / --color never: no cell has a colour"
        );

        let mut app = fixtures::stuck();
        app.color = true;
        let terminal = frame_of(&app, 120, 40);
        assert!(
            terminal
                .backend()
                .buffer()
                .content()
                .iter()
                .any(|cell| cell.fg == Color::Red),
            "with colour, the expired claim is red"
        );
    }
}
