//! Drawing: a pure function of the state. Every time is shown relative to the snapshot's
//! database time (the only clock, docs/DESIGN.md §4.1), so the same state draws the same frame,
//! which is what the snapshot tests rely on. Marks that matter (an expired claim nobody took over,
//! an owner whose claims all expired, stale data) are text first and colour second, so they
//! survive `NO_COLOR` and `--color never`.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::input::KEYS;
use super::state::{
    ALWAYS_SHOWN, App, ExpireRequest, Modal, OwnerExpireRequest, PanelRow, PauseRequest, SortOrder,
    View, column_name, key_of,
};
use crate::core::text::clean;
use crate::core::time::{clock, short_span, span, utc};
use crate::core::{Liveness, TriggerName};
use crate::store::read::{PauseView, ScheduleRow, ScheduleState, TriggerDetail};

mod history;
mod panels;
mod popups;
mod trends;

use history::*;
use panels::*;
use popups::*;
use trends::*;

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

/// Lines of the help overlay: the keys, a blank line, the columns.
pub const HELP_LINES: usize = KEYS.len() + 1 + COLUMNS.len();

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
    let outage = app.snapshot.as_ref().and_then(|s| s.outage());
    let outage_lines = outage.as_ref().map_or(0, |o| outage_height(o, area.width));
    let trends = if app.trends_shown(area.height) {
        TRENDS_HEIGHT
    } else {
        0
    };
    let [header, outage_area, banner_area, trends_area, body, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(outage_lines),
        Constraint::Length(banner),
        Constraint::Length(trends),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(frame, header, app, theme);
    if let Some(outage) = &outage {
        draw_outage(frame, outage_area, outage, theme);
    }
    if banner > 0 {
        draw_banner(frame, banner_area, app, theme);
    }
    if trends > 0 {
        draw_trends(frame, trends_area, app, theme);
    }
    draw_body(frame, body, app, theme);
    draw_footer(frame, footer, app, theme);
    match &app.modal {
        Modal::None => {}
        // Over everything but the footer: the help is long, and it scrolls.
        Modal::Help => draw_help(
            frame,
            Rect {
                height: area.height.saturating_sub(1),
                ..area
            },
            app.help_scroll,
            theme,
        ),
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
            draw_detail(frame, body, app, &key.to_string(), detail, pause, theme);
        }
        Modal::ConfirmExpire(request) => draw_confirm(frame, body, app, request, theme),
        Modal::ConfirmExpireOwner(request) => draw_confirm_owner(frame, body, app, request, theme),
        Modal::ConfirmPause(request) => draw_confirm_pause(frame, body, app, request, theme),
        Modal::Columns { cursor } => draw_columns(frame, body, app, *cursor, theme),
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

/// The outage banner: its headline, the likely cause and the next command, each on a line of
/// its own (the cause wraps).
fn outage_lines(outage: &crate::core::outage::Outage) -> [String; 3] {
    [
        format!(" {} ", outage.headline),
        format!(" cause: {}", outage.cause),
        format!(" next:  {}", outage.next_command),
    ]
}

fn outage_height(outage: &crate::core::outage::Outage, width: u16) -> u16 {
    let width = usize::from(width.max(1));
    let lines: usize = outage_lines(outage)
        .iter()
        .map(|line| line.chars().count().div_ceil(width).max(1))
        .sum();
    u16::try_from(lines).unwrap_or(3)
}

fn draw_outage(frame: &mut Frame, area: Rect, outage: &crate::core::outage::Outage, theme: Theme) {
    let [headline, cause, next] = outage_lines(outage);
    let text = vec![
        Line::styled(headline, theme.alarm().add_modifier(Modifier::REVERSED)),
        Line::styled(cause, theme.alarm()),
        Line::from(vec![
            Span::styled(" next:  ", theme.alarm()),
            Span::styled(
                next.trim_start_matches(" next:  ").to_owned(),
                theme.title(),
            ),
        ]),
    ];
    frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: false }), area);
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
    match app.view {
        View::Schedules => draw_schedules(frame, schedules, app, theme),
        View::Misfires => draw_misfires(frame, schedules, app, theme),
        View::Audit => draw_audit(frame, schedules, app, theme),
        View::Runs => draw_runs(frame, schedules, app, theme),
    }
    draw_recent(frame, recent, app, theme);
}

fn block(title: &str, theme: Theme) -> Block<'static> {
    Block::new()
        .borders(Borders::ALL)
        .title(Span::styled(format!(" {title} "), theme.title()))
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
            let act = match (app.readonly, area.width >= 110) {
                (true, _) => "",
                (false, true) => "  e expire  E expire owner's  p pause",
                (false, false) => "  e expire  p pause",
            };
            let trends = if area.width >= 120 {
                "  t trends  [] window"
            } else {
                ""
            };
            // The rate keys give way first on a narrow terminal (? lists them).
            let rate = if area.width >= 89 { "  +- rate" } else { "" };
            Line::from(Span::styled(
                format!(
                    "q quit  ↑↓ move  ⏎ detail  / filter  s sort  ␣ freeze{rate}{act}{trends}  ? help"
                ),
                theme.dim(),
            ))
        }
    };
    frame.render_widget(Paragraph::new(line), area);
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

    /// `c` opens the column picker; space toggles the column under the cursor, the trigger's
    /// refuses; the table then shows only the chosen columns.
    #[test]
    fn column_picker_and_the_table_it_chooses() {
        let mut app = fixtures::busy();
        update(&mut app, Action::OpenColumns);
        update(&mut app, Action::ColumnCursor(1));
        update(&mut app, Action::ToggleColumn);
        assert!(
            app.columns.iter().all(|shown| *shown),
            "trigger always shows"
        );
        for _ in 0..6 {
            update(&mut app, Action::ColumnCursor(1));
        }
        update(&mut app, Action::ToggleColumn);
        update(&mut app, Action::ColumnCursor(1));
        update(&mut app, Action::ToggleColumn);
        let picker = render(&app, 100, 40);
        assert!(picker.contains("› [ ] s.v"), "{picker}");
        assert!(picker.contains("[=] trigger"), "{picker}");
        insta::assert_snapshot!("column_picker", picker);
        update(&mut app, Action::Close);
        let table = render(&app, 100, 40);
        let header = table
            .lines()
            .find(|l| l.contains("trigger") && l.contains("state"))
            .unwrap_or_default();
        assert!(
            !header.contains("c.v") && !header.contains("s.v"),
            "{table}"
        );
        assert!(header.contains("mis"), "{table}");
        insta::assert_snapshot!("table_without_the_versions", table);
    }

    /// `--columns` takes the names the picker shows; the trigger's always shows.
    #[test]
    fn columns_named_on_the_command_line() {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let shown = crate::tui::state::parse_columns(&names(&["mark", "state", "mis"]))
            .expect("known columns");
        let chosen: Vec<&str> = (0..shown.len())
            .filter(|&i| shown[i])
            .map(crate::tui::state::column_name)
            .collect();
        assert_eq!(chosen, ["mark", "trigger", "state", "mis"]);
        let refused = crate::tui::state::parse_columns(&names(&["state", "lagg"]))
            .expect_err("an unknown column");
        assert!(
            refused.starts_with("unknown column `lagg` in --columns"),
            "{refused}"
        );
    }

    /// The detail pane says, as the row does, that the claim's owner is dead (STALE) or hung
    /// (STALLED).
    #[test]
    fn detail_names_a_stale_or_stalled_owner() {
        let mut app = fixtures::stuck();
        update(&mut app, Action::ToggleDetail);
        let mut detail = fixtures::stuck_detail();
        if let Some(snapshot) = &mut app.snapshot {
            snapshot.detail = Some(detail.clone());
        }
        let frame = render(&app, 120, 40);
        assert!(
            frame.contains("claim owner    STALE: no heartbeat for longer than its lease"),
            "{frame}"
        );
        if let Some(claim) = detail.state.as_mut().and_then(|s| s.claim.as_mut()) {
            claim.owner = "hung-replica".to_owned();
        }
        if let Some(snapshot) = &mut app.snapshot {
            snapshot.detail = Some(detail);
        }
        let frame = render(&app, 120, 40);
        assert!(
            frame.contains("claim owner    STALLED: its heartbeat is late"),
            "{frame}"
        );
        insta::assert_snapshot!(frame);
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

    #[test]
    fn expire_every_claim_of_an_owner_confirmation() {
        let mut app = fixtures::busy();
        app.selected = app
            .visible_schedules()
            .iter()
            .find(|row| row.claim_owner.is_some())
            .map(|row| super::key_of(row));
        update(&mut app, Action::AskExpireOwner);
        assert!(matches!(app.modal, Modal::ConfirmExpireOwner(_)));
        insta::assert_snapshot!(render(&app, 100, 30));
    }

    #[test]
    fn the_schedules_title_names_the_sort_in_use() {
        let mut app = fixtures::busy();
        let title = |app: &App| {
            render(app, 120, 40)
                .lines()
                .find(|line| line.contains("Schedules,"))
                .map(str::to_owned)
                .unwrap_or_default()
        };
        assert!(title(&app).contains("most urgent first"), "{}", title(&app));
        update(&mut app, Action::CycleSort);
        assert!(
            title(&app).contains("soonest lease end first"),
            "{}",
            title(&app)
        );
        update(&mut app, Action::CycleSort);
        assert!(title(&app).contains("by trigger"), "{}", title(&app));
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
    fn trends_over_the_last_hour() {
        let frame = render(&fixtures::busy(), 100, 40);
        assert!(frame.contains("Trends, last 1h00m, 1m00s a bar"), "{frame}");
        assert!(frame.contains("3 in the window, 3 all told"), "{frame}");
        insta::assert_snapshot!(frame);
    }

    #[test]
    fn trends_fold_on_a_short_terminal_and_by_t() {
        let mut app = fixtures::busy();
        assert!(render(&app, 120, 36).contains("Trends, last"));
        assert!(!render(&app, 120, 35).contains("Trends, last"));
        update(&mut app, Action::ToggleTrends);
        assert!(!render(&app, 120, 40).contains("Trends, last"));
        update(&mut app, Action::ToggleTrends);
        update(&mut app, Action::TrendWindow { longer: true });
        assert_eq!(app.load_request().trend_window_ms, 6 * 3_600_000);
    }

    #[test]
    fn outage_banner_with_no_live_replica() {
        let frame = render(&fixtures::outage(), 120, 40);
        let lines: Vec<&str> = frame.lines().collect();
        assert!(
            lines[2].contains("OUTAGE: no live replica, 16 rows due, the oldest late by 47s"),
            "{frame}"
        );
        assert!(
            lines[4].contains("next:  qlsched inspect replicas"),
            "{frame}"
        );
        insta::assert_snapshot!(frame);
    }

    #[test]
    fn no_banner_while_the_cluster_keeps_up() {
        assert!(!render(&fixtures::busy(), 120, 40).contains("OUTAGE"));
        assert!(!render(&fixtures::empty(), 120, 40).contains("OUTAGE"));
    }

    #[test]
    fn a_stale_owners_claim_says_so_in_its_row() {
        let frame = render(&fixtures::stuck(), 120, 30);
        let row = frame
            .lines()
            .find(|line| line.contains("acme/report-5s") && line.contains("EXPIRED"))
            .unwrap_or_default();
        assert!(row.contains("gone-replica STALE"), "{frame}");
    }

    #[test]
    fn expire_every_claim_of_a_stale_owner() {
        let mut app = fixtures::stuck();
        update(&mut app, Action::AskExpireOwner);
        let frame = render(&app, 100, 30);
        assert!(frame.contains("It is STALE: no heartbeat"), "{frame}");
        insta::assert_snapshot!(frame);
    }

    /// On a narrow terminal the dialog's lines wrap; its answer keys stay on screen.
    #[test]
    fn expire_dialog_keeps_its_keys_when_lines_wrap() {
        let mut app = fixtures::stuck();
        update(&mut app, Action::AskExpire);
        let frame = render(&app, 60, 30);
        assert!(frame.contains("[y] expire  [n/Esc] cancel"), "{frame}");
        assert!(frame.contains("audited."), "{frame}");
        insta::assert_snapshot!(frame);
    }

    /// The help is longer than a short terminal: it scrolls to its last line.
    #[test]
    fn help_scrolls_on_a_short_terminal() {
        let mut app = fixtures::busy();
        update(&mut app, Action::ToggleHelp);
        let top = render(&app, 100, 20);
        let total = super::HELP_LINES;
        assert!(top.contains(&format!("lines 1-17 of {total}")), "{top}");
        assert!(!top.contains("misfire records"), "{top}");
        update(&mut app, Action::ScrollHelp(i32::MAX / 2));
        let bottom = render(&app, 100, 20);
        assert!(bottom.contains("misfire records"), "{bottom}");
        assert!(
            bottom.contains(&format!("lines {}-{total} of {total}", total - 16)),
            "{bottom}"
        );
        insta::assert_snapshot!(bottom);
    }

    #[test]
    fn the_admitted_column_is_never_cut() {
        let mut app = fixtures::busy();
        if let Some(snapshot) = &mut app.snapshot {
            snapshot.recent[0].created_at_ms = fixtures::NOW - 47_949;
            snapshot.recent[1].created_at_ms = fixtures::NOW - 86_399_000;
        }
        let frame = render(&app, 80, 30);
        assert!(frame.contains("│47.9s ago "), "{frame}");
        assert!(frame.contains("│23h59m ago "), "{frame}");
    }

    #[test]
    fn misfires_view() {
        let mut app = fixtures::busy_with_history();
        update(
            &mut app,
            Action::ShowView(crate::tui::state::View::Misfires),
        );
        let frame = render(&app, 120, 30);
        assert!(
            frame.contains("Misfire records (7 days), newest first (2 of 2 loaded"),
            "{frame}"
        );
        insta::assert_snapshot!(frame);
    }

    #[test]
    fn audit_view() {
        let mut app = fixtures::busy_with_history();
        update(&mut app, Action::ShowView(crate::tui::state::View::Audit));
        let frame = render(&app, 120, 30);
        assert!(frame.contains("gone-replica → -"), "{frame}");
        insta::assert_snapshot!(frame);
    }

    #[test]
    fn runs_view_filtered() {
        let mut app = fixtures::busy_with_history();
        update(&mut app, Action::ShowView(crate::tui::state::View::Runs));
        update(&mut app, Action::OpenFilter);
        for c in "globex".chars() {
            update(&mut app, Action::FilterChar(c));
        }
        update(&mut app, Action::FilterApply);
        let frame = render(&app, 120, 30);
        assert!(
            frame.contains("Runs matching /globex (2 of 4 loaded"),
            "{frame}"
        );
        assert!(!frame.contains("acme/heartbeat  "), "{frame}");
        insta::assert_snapshot!(frame);
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
