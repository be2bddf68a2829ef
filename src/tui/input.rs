//! Keys to actions, and actions to state changes. What a key means depends on the open dialog;
//! the keys follow top, pg_activity and k9s where an operator already knows them. The one action
//! with an effect outside the state, the expiry, comes back as an [`Effect`] for the event loop
//! to carry out, so this stays pure and testable key by key.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::state::{App, ExpireRequest, Modal, Notice, key_of};
use crate::core::ClaimFence;

/// What a key asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Quit,
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
    ToggleHelp,
    Close,
}

/// Work the event loop does on the state's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Expire this claim, fenced and audited, then report back.
    Expire(ExpireRequest),
}

/// Every key the dashboard knows, for the help overlay: (keys, what they do).
pub const KEYS: &[(&str, &str)] = &[
    (
        "q, Esc",
        "quit (Esc first clears a filter or closes a dialog)",
    ),
    ("↑ ↓, k j", "move the selection"),
    ("PgUp PgDn, g G", "move a page, to the top, to the bottom"),
    (
        "Enter",
        "detail of the selected trigger (why it is not firing)",
    ),
    ("/", "filter by project, trigger or owner; Enter applies"),
    ("s", "cycle sort: urgency, lease end, trigger, owner"),
    ("space", "pause or resume refreshing"),
    ("+ -", "refresh faster or slower (0.25 s to 10 s)"),
    (
        "e",
        "expire the selected claim (fenced, audited; asks first)",
    ),
    ("?", "this help"),
    ("Ctrl-C", "quit from anywhere"),
];

/// Rows a page key moves.
const PAGE: isize = 10;

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
        Modal::ConfirmExpire(_) => match key.code {
            KeyCode::Char('y' | 'Y') | KeyCode::Enter => Some(Action::ConfirmExpire),
            KeyCode::Char('n' | 'N' | 'q') | KeyCode::Esc => Some(Action::Close),
            _ => None,
        },
        Modal::Help => match key.code {
            KeyCode::Char('?' | 'q') | KeyCode::Esc => Some(Action::Close),
            _ => None,
        },
        Modal::Detail { .. } | Modal::None => match key.code {
            KeyCode::Char('q') => Some(Action::Quit),
            KeyCode::Esc if app.modal != Modal::None => Some(Action::Close),
            KeyCode::Esc if !app.filter.is_empty() => Some(Action::ClearFilter),
            KeyCode::Esc => Some(Action::Quit),
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
            KeyCode::Char('?') => Some(Action::ToggleHelp),
            _ => None,
        },
    }
}

/// Applies an action to the state; returns the work it leaves for the event loop.
pub fn update(app: &mut App, action: Action) -> Option<Effect> {
    match action {
        Action::Quit => app.quit = true,
        Action::Up => app.move_selection(-1),
        Action::Down => app.move_selection(1),
        Action::PageUp => app.move_selection(-PAGE),
        Action::PageDown => app.move_selection(PAGE),
        Action::Home => app.move_selection(isize::MIN / 2),
        Action::End => app.move_selection(isize::MAX / 2),
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
        Action::ToggleHelp => {
            app.modal = if app.modal == Modal::Help {
                Modal::None
            } else {
                Modal::Help
            };
        }
        Action::Close => app.modal = Modal::None,
    }
    None
}

/// Opens the confirmation for the selected row's claim, with the fence as it is on screen.
fn ask_expire(app: &mut App) {
    if app.readonly {
        app.notice = Some(Notice {
            text: "read-only (--readonly): e is disabled".to_owned(),
            is_error: true,
        });
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

/// A key, start to finish.
pub fn handle_key(app: &mut App, key: KeyEvent) -> Option<Effect> {
    let action = action_for(app, key)?;
    update(app, action)
}
