//! `qlsched top`: the live lease dashboard, built as gitui and bottom are:
//! [`state`] holds what is shown and chosen, [`input`] maps keys to actions on it, [`draw`] is a
//! pure function of it, and [`load`] reads snapshots on a tokio task that feeds a channel. This
//! module owns the terminal: raw mode and the alternate screen on entry, and their restoration on
//! every way out (quit, error, SIGTERM, and a panic, through ratatui's panic hook).

pub mod draw;
pub mod input;
pub mod load;
pub mod state;

#[cfg(test)]
mod fixtures;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossterm::event::{self, Event};
use tokio::sync::{mpsc, watch};

use self::input::Effect;
use self::load::LoadEvent;
use self::state::{App, Notice};
use crate::store::Store;

/// How `top` was asked to run.
#[derive(Debug, Clone)]
pub struct TopOptions {
    /// `user@host:port/dbname` for the header (never with the password).
    pub database: String,
    pub readonly: bool,
    pub refresh: Duration,
    /// The schedules table's columns shown at start (`state::parse_columns`).
    pub columns: Vec<bool>,
    pub color: bool,
    /// Who the audit row of an expiry, a pause or a resume names (as the commands name their
    /// operator).
    pub actor: String,
}

/// Restores the terminal when dropped, whichever way the dashboard ends.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Runs the dashboard on this terminal until `q`, or until `shutdown` resolves (SIGTERM,
/// SIGINT, the demo's deadline). Database errors never end it: they show as a banner.
pub async fn run(
    store: Store,
    options: TopOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut app = App::new(
        options.database.clone(),
        store.schema().to_string(),
        options.readonly,
        options.color,
    );
    app.columns = options.columns.clone();
    app.refresh = options
        .refresh
        .clamp(state::REFRESH_MIN, state::REFRESH_MAX);

    let (request_tx, request_rx) = watch::channel(app.load_request());
    let (load_tx, mut load_rx) = mpsc::channel(8);
    let loader = load::spawn(store.clone(), request_rx, load_tx.clone());

    // ratatui::try_init installs a panic hook that restores the terminal before the panic
    // message prints; the guard covers every other way out.
    let mut terminal = ratatui::try_init()?;
    let _guard = TerminalGuard;
    let (key_tx, mut key_rx) = mpsc::channel(64);
    let stop_input = Arc::new(AtomicBool::new(false));
    let input_thread = spawn_input_thread(key_tx, Arc::clone(&stop_input));

    tokio::pin!(shutdown);
    terminal.draw(|frame| draw::draw(frame, &app))?;
    while !app.quit {
        tokio::select! {
            () = &mut shutdown => break,
            Some(event) = key_rx.recv() => match event {
                Event::Key(key) => {
                    app.notice = None;
                    match input::handle_key(&mut app, key) {
                        Some(Effect::Expire(request)) => load::spawn_expire(
                            store.clone(), request, options.actor.clone(), load_tx.clone(),
                        ),
                        Some(Effect::ExpireOwner(request)) => load::spawn_expire_owner(
                            store.clone(), request, options.actor.clone(), load_tx.clone(),
                        ),
                        Some(Effect::Pause(request)) => load::spawn_pause(
                            store.clone(), request, options.actor.clone(), load_tx.clone(),
                        ),
                        None => {}
                    }
                }
                Event::Resize(..) => {}
                _ => continue,
            },
            Some(event) = load_rx.recv() => match event {
                LoadEvent::Snapshot(snapshot) => app.apply_snapshot(*snapshot),
                LoadEvent::Failed(error) => app.apply_failure(error),
                LoadEvent::Expired(outcome) => {
                    app.notice = Some(match outcome {
                        Ok(done) => Notice {
                            text: format!(
                                "expired the claim of {} on {} (claim version now {})",
                                done.fence_before.owner,
                                crate::core::TriggerName::new(&done.project_id, &done.trigger_id),
                                done.claim_version
                            ),
                            is_error: false,
                        },
                        Err(error) => Notice { text: format!("not expired: {error}"), is_error: true },
                    });
                    // Show the row as it is now, not at the next tick.
                    request_tx.send_modify(|_| {});
                }
                LoadEvent::ExpiredOwner(outcome) => {
                    app.notice = Some(match outcome {
                        Ok((owner, count)) => Notice {
                            text: format!(
                                "expired {count} claim{} of {owner}",
                                if count == 1 { "" } else { "s" }
                            ),
                            is_error: false,
                        },
                        Err(error) => Notice { text: format!("not expired: {error}"), is_error: true },
                    });
                    request_tx.send_modify(|_| {});
                }
                LoadEvent::Paused(notice) => {
                    app.notice = Some(notice);
                    request_tx.send_modify(|_| {});
                }
            },
        }
        request_tx.send_if_modified(|current| {
            let wanted = app.load_request();
            let changed = *current != wanted;
            *current = wanted;
            changed
        });
        terminal.draw(|frame| draw::draw(frame, &app))?;
    }
    stop_input.store(true, Ordering::Relaxed);
    loader.abort();
    // The input thread polls with a short timeout, so it sees the flag promptly.
    let _ = tokio::task::spawn_blocking(move || input_thread.join()).await;
    Ok(())
}

/// Terminal events on a thread of their own (crossterm's read blocks), polled with a timeout so
/// that the thread notices when the dashboard ends.
fn spawn_input_thread(
    events: mpsc::Sender<Event>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match event::poll(Duration::from_millis(100)) {
                Ok(true) => match event::read() {
                    Ok(event) => {
                        if events.blocking_send(event).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                },
                Ok(false) => {}
                Err(_) => return,
            }
        }
    })
}
