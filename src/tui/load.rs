//! Loading, off the drawing path: a tokio task reads a snapshot through the operator read models
//! on every refresh tick and sends it over a channel, so a slow or failed query never freezes the
//! screen. A failure is sent as such (the screen marks its data stale) and the next tick tries
//! again; the pool replaces a connection the server closed, which is the reconnect.

use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::state::{
    ExpireRequest, LoadRequest, Notice, OwnerExpireRequest, PauseRequest, Snapshot, VIEW_ROWS, View,
};
use crate::core::TriggerName;
use crate::core::time::utc;
use crate::store::control::{self, PauseReport};
use crate::store::operator::{self, Actor, Expired};
use crate::store::read;
use crate::store::top::{self, SnapshotLimits, Trends};
use crate::store::{Store, StoreError};

/// Schedule rows a snapshot carries from the head of the claim order (plus up to as many held
/// claims): more than any terminal shows, few enough to stay cheap.
pub const SCHEDULE_ROWS: i64 = 200;
/// Held claims a snapshot carries (their fences, for the lease bars and `e`).
pub const CLAIM_ROWS: i64 = 500;
/// Admissions a snapshot carries.
pub const RECENT_ROWS: i64 = 30;
/// What a snapshot reads, by the counts above, with the trends over `trend_window_ms`
/// and the list of the history `view` on screen (only that one).
fn limits(trend_window_ms: i64, trend_from_ms: i64, view: View) -> SnapshotLimits {
    let rows = |of: View| if view == of { VIEW_ROWS } else { 0 };
    SnapshotLimits {
        schedules: SCHEDULE_ROWS,
        claims: CLAIM_ROWS,
        recent: RECENT_ROWS,
        trend_window_ms,
        trend_from_ms,
        misfire_records: rows(View::Misfires),
        audit: rows(View::Audit),
        runs: rows(View::Runs),
    }
}
/// A refresh that takes longer than this counts as failed; the screen says so.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(10);

/// What the loader and the expiry report to the event loop.
#[derive(Debug)]
pub enum LoadEvent {
    Snapshot(Box<Snapshot>),
    Failed(String),
    Expired(Result<Expired, String>),
    /// Every claim of an owner expired (`E`): the owner and how many.
    ExpiredOwner(Result<(String, usize), String>),
    /// A pause or resume ended; what the status line says of it.
    Paused(Notice),
}

/// Reads one snapshot: the dashboard's rows at one database instant ([`top::snapshot`]), then
/// the detail, when asked for, through `inspect trigger`'s own read.
pub async fn read_snapshot(
    store: &Store,
    detail: Option<&TriggerName>,
) -> Result<Snapshot, StoreError> {
    read_snapshot_over(store, detail, &LoadRequest::default(), None).await
}

/// As [`read_snapshot`], with the trends over the request's window and the list of its view;
/// the settled buckets of `earlier` trends over the same window are kept, not read again.
pub async fn read_snapshot_over(
    store: &Store,
    detail: Option<&TriggerName>,
    request: &LoadRequest,
    earlier: Option<&Trends>,
) -> Result<Snapshot, StoreError> {
    read_snapshot_within(store, detail, request, earlier, REFRESH_TIMEOUT).await
}

/// As [`read_snapshot_over`], the whole read within `limit`. A read cut by it closes its
/// connection rather than hand it back to the pool mid-transaction (the store's bounded reads,
/// [`Store::snapshot_within`], [`Store::read_within`]): the next refresh, or an expiry or a
/// pause sent meanwhile, gets a connection outside any transaction.
pub async fn read_snapshot_within(
    store: &Store,
    detail: Option<&TriggerName>,
    request: &LoadRequest,
    earlier: Option<&Trends>,
    limit: Duration,
) -> Result<Snapshot, StoreError> {
    let started = Instant::now();
    let limits = limits(
        request.trend_window_ms,
        earlier.map_or(0, |t| t.read_next_from(request.trend_window_ms)),
        request.view,
    );
    let rows = store
        .snapshot_within(limit, "the dashboard's snapshot", |client| {
            Box::pin(top::snapshot(client, limits))
        })
        .await?;
    let detail = match detail {
        Some(key) => {
            let (schema, key) = (store.schema().clone(), key.clone());
            Some(
                store
                    .read_within(
                        limit.saturating_sub(started.elapsed()),
                        "the trigger's detail",
                        move |client| {
                            Box::pin(
                                async move { read::trigger_detail(client, &schema, &key).await },
                            )
                        },
                    )
                    .await?,
            )
        }
        None => None,
    };
    Ok(Snapshot {
        summary: rows.summary,
        schedules: rows.schedules,
        claims: rows.claims,
        recent: rows.recent,
        misfires: rows.misfires.into_iter().collect(),
        detail,
        trends: match earlier {
            Some(earlier) => rows.trends.keeping(earlier),
            None => rows.trends,
        },
        outage: rows.outage,
        misfire_records: rows.misfire_records,
        audit: rows.audit,
        runs: rows.runs,
        took: started.elapsed(),
    })
}

/// Starts the loader: a refresh now, then one every `refresh` of the latest request (at once
/// when the request changes, e.g. the detail pane opened); none while paused. Ends when the
/// receiving side is gone.
pub fn spawn(
    store: Store,
    mut requests: watch::Receiver<LoadRequest>,
    events: mpsc::Sender<LoadEvent>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // The last trends read: their settled buckets are not read again.
        let mut earlier: Option<Trends> = None;
        loop {
            let request = requests.borrow_and_update().clone();
            if !request.paused {
                let event = match read_snapshot_over(
                    &store,
                    request.detail.as_ref(),
                    &request,
                    earlier.as_ref(),
                )
                .await
                {
                    Ok(snapshot) => {
                        earlier = Some(snapshot.trends.clone());
                        LoadEvent::Snapshot(Box::new(snapshot))
                    }
                    // A refresh past its bound says so by name: "the dashboard's snapshot: no
                    // answer within 10s".
                    Err(error) => {
                        LoadEvent::Failed(crate::core::text::clean_message(&error.to_string()))
                    }
                };
                if events.send(event).await.is_err() {
                    return;
                }
                tokio::select! {
                    () = tokio::time::sleep(request.refresh) => {}
                    changed = requests.changed() => if changed.is_err() { return },
                }
            } else if requests.changed().await.is_err() {
                return;
            }
        }
    })
}

/// Expires a claim on its own task, as `qlsched expire` does (fenced by token and version,
/// audited as `actor`), and reports the outcome.
pub fn spawn_expire(
    store: Store,
    request: ExpireRequest,
    actor: String,
    events: mpsc::Sender<LoadEvent>,
) {
    report_when_done(events, async move {
        LoadEvent::Expired(expire(&store, &request, &actor).await.map_err(cleaned))
    });
}

/// Runs an operator's action on its own task and sends what it says to the event loop, which
/// may have quit meanwhile: the action stands either way.
fn report_when_done(
    events: mpsc::Sender<LoadEvent>,
    action: impl Future<Output = LoadEvent> + Send + 'static,
) {
    tokio::spawn(async move {
        let _ = events.send(action.await).await;
    });
}

/// A store error as one clean line for the status bar.
fn cleaned(error: StoreError) -> String {
    crate::core::text::clean_message(&error.to_string())
}

/// Expires every claim of an owner on its own task, as `qlsched expire --owner` does (each
/// audited as `actor`), and reports how many.
pub fn spawn_expire_owner(
    store: Store,
    request: OwnerExpireRequest,
    actor: String,
    events: mpsc::Sender<LoadEvent>,
) {
    report_when_done(events, async move {
        LoadEvent::ExpiredOwner(
            expire_owner(&store, &request, &actor)
                .await
                .map(|expired| (request.owner.clone(), expired.len()))
                .map_err(cleaned),
        )
    });
}

/// The expiry `E` asks for: every claim the owner holds when it runs, valid or not, in one
/// transaction, each row's claim version moved on, so the owner's admissions fail their fence.
pub async fn expire_owner(
    store: &Store,
    request: &OwnerExpireRequest,
    actor: &str,
) -> Result<Vec<Expired>, StoreError> {
    let actor = Actor {
        name: actor,
        reason: Some("every claim of the owner expired from qlsched top"),
    };
    operator::expire_owner(store, &request.owner, false, &actor, false).await
}

/// The expiry `e` asks for: exactly the claim the confirmation showed, or nothing.
pub async fn expire(
    store: &Store,
    request: &ExpireRequest,
    actor: &str,
) -> Result<Expired, StoreError> {
    let fence = request.fence.reference();
    let actor = Actor {
        name: actor,
        reason: Some("expired from qlsched top"),
    };
    operator::expire(store, &request.key, Some(fence), &actor, false).await
}

/// Pauses or resumes a trigger on its own task, as `qlsched pause` / `resume` do (audited as
/// `actor`), and reports the outcome as a status line.
pub fn spawn_pause(
    store: Store,
    request: PauseRequest,
    actor: String,
    events: mpsc::Sender<LoadEvent>,
) {
    report_when_done(events, async move {
        let outcome = pause_or_resume(&store, &request, &actor).await;
        LoadEvent::Paused(pause_notice(&request, &outcome))
    });
}

/// The pause or resume `p` asks for, through `store::control`, the functions the commands use:
/// a pause clears a claim in flight and moves the row's versions on, so an admission decided
/// before it fails its fence (docs/DESIGN.md §4.10). A row already paused (or, for a resume, no
/// longer paused) is left as it is.
pub async fn pause_or_resume(
    store: &Store,
    request: &PauseRequest,
    actor: &str,
) -> Result<PauseReport, StoreError> {
    let key = (
        request.key.project_id.as_str(),
        Some(request.key.trigger_id.as_str()),
    );
    if request.resume {
        control::resume(store, key, actor, false).await
    } else {
        control::pause(store, key, actor, Some("paused from qlsched top"), false).await
    }
}

/// What the status line says of a pause or resume: what changed, or why nothing did.
pub fn pause_notice(request: &PauseRequest, outcome: &Result<PauseReport, StoreError>) -> Notice {
    let key = &request.key;
    let done = |text: String| Notice {
        text,
        is_error: false,
    };
    match outcome {
        Ok(report) => match (report.changed.first(), request.resume) {
            (Some(change), false) => done(match &change.voided_claim_of {
                Some(owner) => format!(
                    "paused {key}; the claim of {owner} is voided (its admission fails its fence)"
                ),
                None => format!("paused {key}"),
            }),
            (Some(change), true) => done(format!(
                "resumed {key}; next {}{}",
                change
                    .next_fire_at_ms
                    .flatten()
                    .map_or_else(|| "at its first claim".to_owned(), utc),
                match change.passed_over.flatten() {
                    Some(p) => format!(
                        "; {}{} occurrences passed while paused, recorded as a misfire",
                        p.count,
                        if p.count_exact { "" } else { "+" }
                    ),
                    None => "; no occurrence passed while paused".to_owned(),
                }
            )),
            (None, false) => done(format!("{key} was paused already: nothing changed")),
            (None, true) => done(format!("{key} is not paused (any more): nothing changed")),
        },
        Err(error) => {
            let verb = if request.resume {
                "not resumed"
            } else {
                "not paused"
            };
            let why = match error {
                StoreError::PermissionDenied(detail) => {
                    format!("this login may not pause or resume (qlsched_admin may): {detail}")
                }
                other => other.to_string(),
            };
            Notice {
                text: format!("{verb}: {}", crate::core::text::clean_message(&why)),
                is_error: true,
            }
        }
    }
}
