//! Keys to actions, and actions to state changes. What a key means depends on the open dialog;
//! the keys follow top, pg_activity and k9s where an operator already knows them. The actions
//! with an effect outside the state, the expiry and the pause or resume, come back as an
//! [`Effect`] for the event loop to carry out, so this stays pure and testable key by key.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::state::{
    ALWAYS_SHOWN, App, ExpireRequest, Modal, Notice, OwnerExpireRequest, PauseRequest, View,
    column_name, key_of,
};
use crate::core::{ClaimFence, Liveness};

/// What a key asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Quit,
    /// `c`: open the column picker; in it, move and toggle the column under the cursor.
    OpenColumns,
    ColumnCursor(isize),
    ToggleColumn,
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    ToggleDetail,
    OpenFilter,
    FilterChar(char),
    FilterBackspace,
    FilterApply,
    ClearFilter,
    CycleSort,
    TogglePause,
    Faster,
    Slower,
    AskExpire,
    ConfirmExpire,
    /// `E`: expire every claim of the selected row's claim owner.
    AskExpireOwner,
    ConfirmExpireOwner,
    /// `p`: pause the selected trigger, or resume it when paused (not the screen: that is space).
    AskPauseTrigger,
    ConfirmPauseTrigger,
    ToggleHelp,
    /// Scroll the help overlay by this many lines.
    ScrollHelp(i32),
    /// `v` cycles the views; `1`-`4` show one.
    NextView,
    ShowView(View),
    /// `t`: fold or unfold the trends.
    ToggleTrends,
    /// `[` and `]`: a shorter or longer trends window.
    TrendWindow {
        longer: bool,
    },
    Close,
}

/// Work the event loop does on the state's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Expire this claim, fenced and audited, then report back.
    Expire(ExpireRequest),
    /// Expire every claim of this owner, as `expire --owner` does, then report back.
    ExpireOwner(OwnerExpireRequest),
    /// Pause or resume this trigger, as `qlsched pause` / `resume` do, then report back.
    Pause(PauseRequest),
}

/// Every key the dashboard knows, for the help overlay: (keys, what they do).
pub const KEYS: &[(&str, &str)] = &[
    ("q, Ctrl-C", "quit"),
    (
        "Esc",
        "close a dialog or the detail, else clear the filter; never quits",
    ),
    ("↑ ↓, k j", "move the selection (scroll, in a history view)"),
    (
        "v, 1 2 3 4",
        "views: schedules, misfires, audit, runs (newest first; / filters each)",
    ),
    ("PgUp PgDn, g G", "move a page, to the top, to the bottom"),
    (
        "Enter",
        "detail of the selected trigger (why it is not firing)",
    ),
    ("/", "filter by project, trigger or owner; Enter applies"),
    ("s", "cycle sort: urgency, lease end, trigger, owner"),
    ("space", "freeze or unfreeze the screen (stop refreshing)"),
    (
        "t",
        "fold or unfold the trends (they fold by themselves under 36 rows)",
    ),
    (
        "[ ]",
        "trends over a shorter or longer window: 15m, 1h, 6h, 12h, 24h",
    ),
    (
        "c",
        "choose the table's columns (space toggles; also --columns)",
    ),
    ("+ -", "refresh faster or slower (0.25 s to 10 s)"),
    (
        "e",
        "expire the selected claim (fenced, audited; asks first)",
    ),
    (
        "E",
        "expire every claim of the row's owner, as expire --owner (audited; asks first)",
    ),
    (
        "p",
        "pause the selected trigger, or resume it when paused (fenced, audited; asks first)",
    ),
    (
        "y, n",
        "in a dialog: y expires, pauses or resumes; n (or Esc) cancels",
    ),
    (
        "?",
        "this help: keys and columns (↑↓ PgUp PgDn scroll it, ? or Esc closes)",
    ),
];

/// Rows a page key moves.
const PAGE: isize = 10;
/// Lines a page key scrolls the help.
const HELP_PAGE: i32 = 10;

/// The action a key stands for, given the open dialog.
pub fn action_for(app: &App, key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Some(Action::Quit);
    }
    match &app.modal {
        Modal::Filter { .. } => match key.code {
            KeyCode::Enter => Some(Action::FilterApply),
            KeyCode::Esc => Some(Action::Close),
            KeyCode::Backspace => Some(Action::FilterBackspace),
            KeyCode::Char(c) => Some(Action::FilterChar(c)),
            _ => None,
        },
        Modal::ConfirmExpire(_) | Modal::ConfirmExpireOwner(_) => match key.code {
            // Not Enter: elsewhere Enter opens the detail, and a second Enter must not expire.
            KeyCode::Char('y' | 'Y') if matches!(app.modal, Modal::ConfirmExpireOwner(_)) => {
                Some(Action::ConfirmExpireOwner)
            }
            KeyCode::Char('y' | 'Y') => Some(Action::ConfirmExpire),
            KeyCode::Char('n' | 'N' | 'q') | KeyCode::Esc => Some(Action::Close),
            _ => None,
        },
        // Nor p: a second p must not confirm what the first asked.
        Modal::ConfirmPause(_) => match key.code {
            KeyCode::Char('y' | 'Y') => Some(Action::ConfirmPauseTrigger),
            KeyCode::Char('n' | 'N' | 'q') | KeyCode::Esc => Some(Action::Close),
            _ => None,
        },
        Modal::Columns { .. } => match key.code {
            KeyCode::Char('c' | 'q') | KeyCode::Esc => Some(Action::Close),
            KeyCode::Up | KeyCode::Char('k') => Some(Action::ColumnCursor(-1)),
            KeyCode::Down | KeyCode::Char('j') => Some(Action::ColumnCursor(1)),
            KeyCode::Char(' ' | 'x') | KeyCode::Enter => Some(Action::ToggleColumn),
            _ => None,
        },
        Modal::Help => match key.code {
            KeyCode::Char('?' | 'q') | KeyCode::Esc => Some(Action::Close),
            KeyCode::Up | KeyCode::Char('k') => Some(Action::ScrollHelp(-1)),
            KeyCode::Down | KeyCode::Char('j') => Some(Action::ScrollHelp(1)),
            KeyCode::PageUp => Some(Action::ScrollHelp(-HELP_PAGE)),
            KeyCode::PageDown | KeyCode::Char(' ') => Some(Action::ScrollHelp(HELP_PAGE)),
            KeyCode::Home | KeyCode::Char('g') => Some(Action::ScrollHelp(i32::MIN / 2)),
            KeyCode::End | KeyCode::Char('G') => Some(Action::ScrollHelp(i32::MAX / 2)),
            _ => None,
        },
        Modal::Detail { .. } | Modal::None => match key.code {
            KeyCode::Char('q') => Some(Action::Quit),
            KeyCode::Esc if app.modal != Modal::None => Some(Action::Close),
            KeyCode::Esc if !app.filter.is_empty() => Some(Action::ClearFilter),
            // Esc closes and clears; with nothing open it does nothing (q and Ctrl-C quit).
            KeyCode::Esc => None,
            KeyCode::Up | KeyCode::Char('k') => Some(Action::Up),
            KeyCode::Down | KeyCode::Char('j') => Some(Action::Down),
            KeyCode::PageUp => Some(Action::PageUp),
            KeyCode::PageDown => Some(Action::PageDown),
            KeyCode::Home | KeyCode::Char('g') => Some(Action::Home),
            KeyCode::End | KeyCode::Char('G') => Some(Action::End),
            KeyCode::Enter => Some(Action::ToggleDetail),
            KeyCode::Char('/') => Some(Action::OpenFilter),
            KeyCode::Char('s') => Some(Action::CycleSort),
            KeyCode::Char(' ') => Some(Action::TogglePause),
            KeyCode::Char('+' | '=') => Some(Action::Faster),
            KeyCode::Char('-') => Some(Action::Slower),
            KeyCode::Char('e') => Some(Action::AskExpire),
            KeyCode::Char('E') => Some(Action::AskExpireOwner),
            KeyCode::Char('p') => Some(Action::AskPauseTrigger),
            KeyCode::Char('?') => Some(Action::ToggleHelp),
            KeyCode::Char('t') => Some(Action::ToggleTrends),
            KeyCode::Char('c') => Some(Action::OpenColumns),
            KeyCode::Char('v') => Some(Action::NextView),
            KeyCode::Char(c @ '1'..='4') => View::ALL
                .get(usize::from(c as u8 - b'1'))
                .map(|view| Action::ShowView(*view)),
            KeyCode::Char('[') => Some(Action::TrendWindow { longer: false }),
            KeyCode::Char(']') => Some(Action::TrendWindow { longer: true }),
            _ => None,
        },
    }
}

/// Applies an action to the state; returns the work it leaves for the event loop.
pub fn update(app: &mut App, action: Action) -> Option<Effect> {
    let on_a_row = matches!(
        action,
        Action::ToggleDetail | Action::AskExpire | Action::AskExpireOwner | Action::AskPauseTrigger
    );
    if on_a_row && app.view != View::Schedules && app.modal == Modal::None {
        app.notice = Some(Notice {
            text: format!(
                "the {} view lists history: 1 shows the schedules, whose rows these keys act on",
                app.view.label()
            ),
            is_error: true,
        });
        return None;
    }
    match action {
        Action::Quit => app.quit = true,
        Action::Up => app.move_in_view(-1),
        Action::Down => app.move_in_view(1),
        Action::PageUp => app.move_in_view(-PAGE),
        Action::PageDown => app.move_in_view(PAGE),
        Action::Home => app.move_in_view(isize::MIN / 2),
        Action::End => app.move_in_view(isize::MAX / 2),
        Action::NextView => app.show_view(app.view.next()),
        Action::ShowView(view) => app.show_view(view),
        Action::ToggleDetail => {
            app.modal = match (&app.modal, app.selected_row()) {
                (Modal::Detail { .. }, _) | (_, None) => Modal::None,
                (_, Some(row)) => Modal::Detail { key: key_of(row) },
            };
        }
        Action::OpenFilter => {
            app.modal = Modal::Filter {
                input: app.filter.clone(),
            };
        }
        Action::FilterChar(c) => {
            if let Modal::Filter { input } = &mut app.modal {
                input.push(c);
            }
        }
        Action::FilterBackspace => {
            if let Modal::Filter { input } = &mut app.modal {
                input.pop();
            }
        }
        Action::FilterApply => {
            if let Modal::Filter { input } = std::mem::take(&mut app.modal) {
                app.filter = input.trim().to_owned();
                app.keep_selection_visible();
            }
        }
        Action::ClearFilter => {
            app.filter.clear();
            app.keep_selection_visible();
        }
        Action::CycleSort => {
            app.sort = app.sort.next();
        }
        Action::TogglePause => app.paused = !app.paused,
        Action::Faster => app.step_refresh(true),
        Action::Slower => app.step_refresh(false),
        Action::AskExpire => ask_expire(app),
        Action::ConfirmExpire => {
            if let Modal::ConfirmExpire(request) = std::mem::take(&mut app.modal) {
                app.notice = Some(Notice {
                    text: format!("expiring the claim on {}…", request.key),
                    is_error: false,
                });
                return Some(Effect::Expire(request));
            }
        }
        Action::AskExpireOwner => ask_expire_owner(app),
        Action::ConfirmExpireOwner => {
            if let Modal::ConfirmExpireOwner(request) = std::mem::take(&mut app.modal) {
                app.notice = Some(Notice {
                    text: format!("expiring every claim of {}…", request.owner),
                    is_error: false,
                });
                return Some(Effect::ExpireOwner(request));
            }
        }
        Action::AskPauseTrigger => ask_pause(app),
        Action::ConfirmPauseTrigger => {
            if let Modal::ConfirmPause(request) = std::mem::take(&mut app.modal) {
                app.notice = Some(Notice {
                    text: format!(
                        "{} {}…",
                        if request.resume {
                            "resuming"
                        } else {
                            "pausing"
                        },
                        request.key
                    ),
                    is_error: false,
                });
                return Some(Effect::Pause(request));
            }
        }
        Action::ToggleHelp => {
            app.help_scroll = 0;
            app.modal = if app.modal == Modal::Help {
                Modal::None
            } else {
                Modal::Help
            };
        }
        Action::ScrollHelp(delta) => {
            // Bounded by the help's length here; the overlay stops sooner on a tall screen.
            let last = i32::try_from(super::draw::HELP_LINES.saturating_sub(1)).unwrap_or(0);
            let next = i32::from(app.help_scroll)
                .saturating_add(delta)
                .clamp(0, last);
            app.help_scroll = u16::try_from(next).unwrap_or(0);
        }
        Action::ToggleTrends => app.trends_folded = !app.trends_folded,
        Action::OpenColumns => app.modal = Modal::Columns { cursor: 0 },
        Action::ColumnCursor(by) => {
            if let Modal::Columns { cursor } = &mut app.modal {
                *cursor = cursor
                    .saturating_add_signed(by)
                    .min(app.columns.len().saturating_sub(1));
            }
        }
        Action::ToggleColumn => {
            if let Modal::Columns { cursor } = app.modal {
                if column_name(cursor) == ALWAYS_SHOWN {
                    app.notice = Some(Notice {
                        text: "the trigger column always shows".to_owned(),
                        is_error: true,
                    });
                } else if let Some(shown) = app.columns.get_mut(cursor) {
                    *shown = !*shown;
                }
            }
        }
        Action::TrendWindow { longer } => app.step_trend_window(longer),
        Action::Close => app.modal = Modal::None,
    }
    None
}

/// With `--read-only`, says that `key` is disabled; true when it is.
fn refused_read_only(app: &mut App, key: char) -> bool {
    if app.readonly {
        app.notice = Some(Notice {
            text: format!("read-only (--read-only): {key} is disabled"),
            is_error: true,
        });
    }
    app.readonly
}

/// Opens the confirmation for the selected row's claim, with the fence as it is on screen.
fn ask_expire(app: &mut App) {
    if refused_read_only(app, 'e') {
        return;
    }
    let Some(row) = app.selected_row() else {
        return;
    };
    let key = key_of(row);
    let claim = app
        .snapshot
        .as_ref()
        .and_then(|s| s.claim_of(&key))
        .cloned();
    match claim {
        Some(claim) => {
            app.modal = Modal::ConfirmExpire(ExpireRequest {
                key,
                fence: ClaimFence {
                    owner: claim.owner,
                    token: claim.token,
                    version: claim.version,
                    expires_at_ms: claim.expires_at_ms,
                },
                expired: claim.expired,
            });
        }
        None => {
            app.notice = Some(Notice {
                text: format!("{key} holds no claim: nothing to expire"),
                is_error: true,
            });
        }
    }
}

/// Opens the confirmation to expire every claim of the selected row's owner, counting them from
/// the screen's snapshot.
fn ask_expire_owner(app: &mut App) {
    if refused_read_only(app, 'E') {
        return;
    }
    let Some(owner) = app.selected_row().and_then(|row| row.claim_owner.clone()) else {
        app.notice = Some(Notice {
            text: "the selected row holds no claim: select a row of the owner whose claims to \
                   expire"
                .to_owned(),
            is_error: true,
        });
        return;
    };
    let Some(snapshot) = app.snapshot.as_ref() else {
        return;
    };
    let held = snapshot.claims.iter().filter(|c| c.owner == owner);
    let (expired, valid): (Vec<_>, Vec<_>) = held.partition(|c| c.expired);
    let live = snapshot
        .summary
        .replicas
        .iter()
        .any(|r| r.owner == owner && r.liveness == Liveness::Live);
    app.modal = Modal::ConfirmExpireOwner(OwnerExpireRequest {
        owner,
        valid: valid.len(),
        expired: expired.len(),
        live,
    });
}

/// Opens the confirmation to pause the selected row, or to resume it when it is paused.
fn ask_pause(app: &mut App) {
    if refused_read_only(app, 'p') {
        return;
    }
    let Some(row) = app.selected_row() else {
        return;
    };
    app.modal = Modal::ConfirmPause(PauseRequest {
        key: key_of(row),
        resume: row.paused.is_some(),
        paused: row.paused.clone(),
        claim_owner: row.claim_owner.clone(),
        state: row.state,
    });
}

/// A key, start to finish.
pub fn handle_key(app: &mut App, key: KeyEvent) -> Option<Effect> {
    let action = action_for(app, key)?;
    update(app, action)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    use super::{Effect, handle_key};
    use crate::core::Liveness;
    use crate::tui::fixtures;
    use crate::tui::state::{App, Modal, SortOrder};

    fn press(app: &mut App, code: KeyCode) -> Option<Effect> {
        handle_key(app, KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn selected(app: &App) -> String {
        app.selected
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default()
    }

    #[test]
    fn q_quits_esc_never_does_and_ctrl_c_quits_from_a_dialog() {
        let mut app = fixtures::busy();
        press(&mut app, KeyCode::Char('q'));
        assert!(app.quit);
        let mut app = fixtures::busy();
        press(&mut app, KeyCode::Esc);
        assert!(!app.quit, "Esc with nothing open does nothing");
        press(&mut app, KeyCode::Esc);
        assert!(!app.quit, "nor a second time");
        let mut app = fixtures::busy();
        press(&mut app, KeyCode::Char('/'));
        handle_key(
            &mut app,
            KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
        );
        assert!(app.quit);
    }

    #[test]
    fn arrows_and_jk_move_within_the_table() {
        let mut app = fixtures::busy();
        assert_eq!(app.selected_index(), Some(0));
        press(&mut app, KeyCode::Down);
        press(&mut app, KeyCode::Char('j'));
        assert_eq!(selected(&app), "acme/heartbeat");
        press(&mut app, KeyCode::Char('k'));
        assert_eq!(selected(&app), "globex/sync-a");
        press(&mut app, KeyCode::Up);
        press(&mut app, KeyCode::Up);
        assert_eq!(app.selected_index(), Some(0), "clamped at the top");
        press(&mut app, KeyCode::Char('G'));
        assert_eq!(selected(&app), "initech/tps-report");
        press(&mut app, KeyCode::Down);
        assert_eq!(
            selected(&app),
            "initech/tps-report",
            "clamped at the bottom"
        );
        press(&mut app, KeyCode::Char('g'));
        assert_eq!(app.selected_index(), Some(0));
    }

    /// Untouched, the cursor stays on the first row: a stuck row that moved to the top is
    /// under it. Once moved, it follows its trigger; back on the first row it follows the head.
    #[test]
    fn the_cursor_on_the_first_row_follows_the_head() {
        use crate::store::read::ScheduleState;

        let mut app = fixtures::busy();
        assert_eq!(selected(&app), "acme/report-5s");
        // globex/sync-c's claim expires with nobody taking it over: it moves to the top.
        let mut later = app.snapshot.clone().unwrap();
        later.schedules[4].schedule.state = ScheduleState::ExpiredClaim;
        app.apply_snapshot(later.clone());
        assert_eq!(
            selected(&app),
            "globex/sync-c",
            "the stuck row is under the cursor"
        );
        press(&mut app, KeyCode::Down);
        let chosen = selected(&app);
        assert_eq!(chosen, "acme/report-5s");
        // Another row moves to the top: the row the operator chose stays chosen.
        let mut again = later.clone();
        again.schedules[0].schedule.state = ScheduleState::ExpiredClaim;
        app.apply_snapshot(again);
        assert_eq!(selected(&app), chosen, "a chosen row is followed");
        press(&mut app, KeyCode::Char('g'));
        app.apply_snapshot(later);
        assert_eq!(selected(&app), "globex/sync-c", "g follows the head again");
    }

    #[test]
    fn v_cycles_the_views_the_loader_reads_only_the_one_shown_and_row_keys_point_back() {
        use crate::tui::state::View;

        let mut app = fixtures::busy_with_history();
        let mut seen = vec![app.view];
        for _ in 0..4 {
            press(&mut app, KeyCode::Char('v'));
            seen.push(app.view);
        }
        assert_eq!(
            seen,
            [
                View::Schedules,
                View::Misfires,
                View::Audit,
                View::Runs,
                View::Schedules
            ]
        );
        press(&mut app, KeyCode::Char('3'));
        assert_eq!(app.load_request().view, View::Audit);
        press(&mut app, KeyCode::Down);
        assert_eq!(app.view_scroll, 1, "a history view scrolls");
        press(&mut app, KeyCode::Down);
        assert_eq!(app.view_scroll, 1, "to its last row");
        assert_eq!(press(&mut app, KeyCode::Char('e')), None);
        assert_eq!(app.modal, Modal::None);
        assert!(
            app.notice
                .as_ref()
                .is_some_and(|n| n.text.contains("1 shows the schedules")),
            "{:?}",
            app.notice
        );
        press(&mut app, KeyCode::Char('1'));
        assert_eq!((app.view, app.view_scroll), (View::Schedules, 0));
    }

    #[test]
    fn selection_follows_its_row_across_a_refresh() {
        let mut app = fixtures::busy();
        press(&mut app, KeyCode::Down);
        let before = selected(&app);
        let mut snapshot = app.snapshot.clone().unwrap();
        snapshot.schedules.reverse();
        app.apply_snapshot(snapshot);
        assert_eq!(selected(&app), before);
    }

    #[test]
    fn enter_opens_and_closes_the_detail_of_the_selected_row() {
        let mut app = fixtures::busy();
        press(&mut app, KeyCode::Down);
        press(&mut app, KeyCode::Enter);
        let Modal::Detail { key } = &app.modal else {
            panic!("detail open")
        };
        assert_eq!(key.to_string(), "globex/sync-a");
        assert_eq!(
            app.load_request().detail,
            Some(key.clone()),
            "the loader reads it"
        );
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.modal, Modal::None);
        assert!(!app.quit, "Esc closes the dialog first");
    }

    #[test]
    fn slash_filters_on_enter_and_esc_cancels_or_clears() {
        let mut app = fixtures::busy();
        press(&mut app, KeyCode::Char('/'));
        for c in "demo-c".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        assert_eq!(app.filter, "", "nothing applies before Enter");
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.filter, "demo-c");
        let rows: Vec<String> = app
            .visible_schedules()
            .iter()
            .map(|r| crate::core::TriggerName::new(&r.project_id, &r.trigger_id).to_string())
            .collect();
        assert_eq!(rows, ["globex/sync-b"], "an owner matches");
        assert_eq!(selected(&app), "globex/sync-b");

        press(&mut app, KeyCode::Char('/'));
        press(&mut app, KeyCode::Backspace);
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.filter, "demo-c", "Esc in the prompt cancels the edit");
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.filter, "", "Esc clears an applied filter");
        assert!(!app.quit);
    }

    #[test]
    fn s_cycles_the_sort() {
        let mut app = fixtures::busy();
        let mut seen = vec![app.sort];
        for _ in 0..4 {
            press(&mut app, KeyCode::Char('s'));
            seen.push(app.sort);
        }
        assert_eq!(
            seen,
            [
                SortOrder::Urgency,
                SortOrder::LeaseEnd,
                SortOrder::Trigger,
                SortOrder::Owner,
                SortOrder::Urgency
            ]
        );
        press(&mut app, KeyCode::Char('s'));
        let first = app.visible_schedules()[0];
        assert_eq!(
            first.trigger_id, "sync-b",
            "lease end: the soonest lease first"
        );
    }

    #[test]
    fn space_pauses_and_a_paused_screen_keeps_its_data() {
        let mut app = fixtures::busy();
        press(&mut app, KeyCode::Char(' '));
        assert!(app.paused && app.load_request().paused);
        let shown = app.snapshot.clone();
        app.apply_snapshot(fixtures::empty().snapshot.unwrap());
        assert_eq!(app.snapshot, shown);
        press(&mut app, KeyCode::Char(' '));
        assert!(!app.paused);
    }

    #[test]
    fn plus_and_minus_step_the_refresh_within_bounds() {
        let mut app = fixtures::busy();
        press(&mut app, KeyCode::Char('+'));
        assert_eq!(app.refresh, Duration::from_millis(500));
        for _ in 0..5 {
            press(&mut app, KeyCode::Char('+'));
        }
        assert_eq!(app.refresh, Duration::from_millis(250));
        for _ in 0..20 {
            press(&mut app, KeyCode::Char('-'));
        }
        assert_eq!(app.refresh, Duration::from_secs(10));
        assert_eq!(app.load_request().refresh, Duration::from_secs(10));
    }

    #[test]
    fn e_asks_with_the_fence_and_only_y_expires() {
        let mut app = fixtures::stuck();
        assert_eq!(selected(&app), "acme/report-5s");
        assert_eq!(press(&mut app, KeyCode::Char('e')), None);
        let Modal::ConfirmExpire(request) = app.modal.clone() else {
            panic!("confirmation open")
        };
        assert_eq!(request.fence.owner, "gone-replica");
        assert_eq!(request.fence.version, 6);
        assert!(request.expired);
        assert_eq!(
            press(&mut app, KeyCode::Char('x')),
            None,
            "other keys do nothing"
        );
        assert_eq!(
            press(&mut app, KeyCode::Enter),
            None,
            "Enter (which opens the detail elsewhere) does not expire"
        );
        assert!(matches!(app.modal, Modal::ConfirmExpire(_)));
        assert_eq!(press(&mut app, KeyCode::Char('n')), None);
        assert_eq!(app.modal, Modal::None);
        press(&mut app, KeyCode::Char('e'));
        assert_eq!(press(&mut app, KeyCode::Esc), None);
        assert_eq!(app.modal, Modal::None, "Esc cancels");
        assert!(!app.quit);

        press(&mut app, KeyCode::Char('e'));
        assert_eq!(
            press(&mut app, KeyCode::Char('y')),
            Some(Effect::Expire(request))
        );
        assert_eq!(app.modal, Modal::None);
    }

    #[test]
    fn e_on_an_unclaimed_row_or_readonly_explains_itself() {
        let mut app = fixtures::busy();
        press(&mut app, KeyCode::Char('e'));
        assert_eq!(app.modal, Modal::None);
        assert!(
            app.notice
                .as_ref()
                .is_some_and(|n| n.text.contains("no claim"))
        );

        let mut app = fixtures::stuck();
        app.readonly = true;
        press(&mut app, KeyCode::Char('e'));
        assert_eq!(app.modal, Modal::None);
        assert!(
            app.notice
                .as_ref()
                .is_some_and(|n| n.text.contains("read-only"))
        );
    }

    #[test]
    fn p_pauses_an_unpaused_row_and_resumes_a_paused_one_after_y() {
        let mut app = fixtures::busy();
        press(&mut app, KeyCode::Down);
        assert_eq!(selected(&app), "globex/sync-a");
        assert_eq!(press(&mut app, KeyCode::Char('p')), None);
        let Modal::ConfirmPause(request) = app.modal.clone() else {
            panic!("confirmation open")
        };
        assert!(!request.resume);
        assert_eq!(request.claim_owner.as_deref(), Some("demo-a"));
        assert_eq!(
            press(&mut app, KeyCode::Char('p')),
            None,
            "a second p does not confirm"
        );
        assert_eq!(press(&mut app, KeyCode::Enter), None, "nor does Enter");
        assert_eq!(press(&mut app, KeyCode::Esc), None);
        assert_eq!(app.modal, Modal::None, "Esc cancels");
        press(&mut app, KeyCode::Char('p'));
        assert_eq!(
            press(&mut app, KeyCode::Char('y')),
            Some(Effect::Pause(request))
        );
        assert_eq!(app.modal, Modal::None);

        app.selected = Some(crate::core::TriggerName::new("globex", "paused"));
        press(&mut app, KeyCode::Char('p'));
        let Modal::ConfirmPause(request) = app.modal.clone() else {
            panic!("confirmation open")
        };
        assert!(request.resume, "a paused row resumes");
        assert_eq!(
            request.paused.as_ref().map(|p| p.paused_by.as_str()),
            Some("ops-alice@bastion")
        );
        assert_eq!(
            press(&mut app, KeyCode::Char('n')),
            None,
            "n cancels, nothing happens"
        );
        assert_eq!(app.modal, Modal::None);
    }

    #[test]
    fn p_in_readonly_explains_itself() {
        let mut app = fixtures::busy();
        app.readonly = true;
        press(&mut app, KeyCode::Char('p'));
        assert_eq!(app.modal, Modal::None);
        assert!(
            app.notice
                .as_ref()
                .is_some_and(|n| n.is_error && n.text.contains("read-only"))
        );
    }

    #[test]
    fn the_replicas_panel_lists_idle_replicas_flags_stale_and_stalled_ones_and_names_operators() {
        use crate::tui::state::PanelRow;

        let app = fixtures::stuck();
        let snapshot = app.snapshot.as_ref().unwrap();
        let rows: Vec<String> = snapshot
            .panel_rows()
            .iter()
            .map(|row| match row {
                PanelRow::Replica { replica, claims } => format!(
                    "{} {} {}",
                    replica.owner,
                    replica.liveness,
                    claims.map_or(0, |c| c.claims)
                ),
                PanelRow::Other { owner, stopped } => format!(
                    "{} {}",
                    owner.owner,
                    if *stopped { "stopped" } else { "operator" }
                ),
            })
            .collect();
        assert_eq!(
            rows,
            [
                "gone-replica stale 0",
                "hung-replica stalled 0",
                "demo-a live 1",
                "demo-b live 1",
                "demo-c live 1",
                "demo-d live 0",
                "ops-alice operator",
            ],
            "stale first, then stalled, the idle demo-d listed, the manual claimant not a replica"
        );

        let mut app = fixtures::stuck();
        if let Some(snapshot) = &mut app.snapshot {
            for replica in &mut snapshot.summary.replicas {
                if replica.owner == "gone-replica" {
                    replica.liveness = Liveness::Stopped;
                }
            }
        }
        let snapshot = app.snapshot.as_ref().unwrap();
        assert!(
            snapshot.panel_rows().iter().any(|row| matches!(
                row,
                PanelRow::Other { owner, stopped: true } if owner.owner == "gone-replica"
            )),
            "a stopped replica's leftover claims show under its name, as stopped"
        );
    }

    #[test]
    fn shift_e_asks_to_expire_every_claim_of_the_selected_rows_owner() {
        let mut app = fixtures::stuck();
        app.selected = Some(crate::core::TriggerName::new("acme", "report-5s"));
        press(&mut app, KeyCode::Char('E'));
        let Modal::ConfirmExpireOwner(shown) = app.modal.clone() else {
            panic!("E asks first: {:?}", app.modal);
        };
        assert_eq!(
            (shown.owner.as_str(), shown.valid, shown.expired, shown.live),
            ("gone-replica", 0, 1, false)
        );
        assert_eq!(
            press(&mut app, KeyCode::Char('E')),
            None,
            "a second E does not confirm"
        );
        assert_eq!(
            press(&mut app, KeyCode::Char('y')),
            Some(Effect::ExpireOwner(shown))
        );

        let mut readonly = fixtures::stuck();
        readonly.readonly = true;
        readonly.selected = Some(crate::core::TriggerName::new("acme", "report-5s"));
        assert_eq!(press(&mut readonly, KeyCode::Char('E')), None);
        assert_eq!(readonly.modal, Modal::None, "read-only: no dialog");
        assert!(readonly.notice.as_ref().is_some_and(|n| n.is_error));
    }

    #[test]
    fn question_mark_toggles_help() {
        let mut app = fixtures::busy();
        press(&mut app, KeyCode::Char('?'));
        assert_eq!(app.modal, Modal::Help);
        press(&mut app, KeyCode::Char('q'));
        assert_eq!(app.modal, Modal::None);
        assert!(!app.quit, "q closes the help first");
        press(&mut app, KeyCode::Char('?'));
        press(&mut app, KeyCode::Char('?'));
        assert_eq!(app.modal, Modal::None);
    }

    #[test]
    fn a_failed_refresh_keeps_the_data_and_a_good_one_clears_the_banner() {
        let mut app = fixtures::busy();
        app.apply_failure("connection refused".to_owned());
        app.apply_failure("connection refused".to_owned());
        assert_eq!(app.stale.as_ref().map(|s| s.failures), Some(2));
        assert!(app.snapshot.is_some());
        app.apply_snapshot(fixtures::busy().snapshot.unwrap());
        assert_eq!(app.stale, None);
    }
}
