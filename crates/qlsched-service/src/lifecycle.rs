//! The timer around the coordinator (docs/DESIGN.md §4.9): one round at a time; a round that
//! used its whole budget may start the next at once, any other is followed by the next when the
//! next occurrence falls due (at most one cadence later); errors (and even panics) of a round go
//! to the diagnostic sink and never stop or overlap the timer; a stop waits at most the drain
//! timeout for the round in flight before giving its claims back.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::coordinator::{Coordinator, GIVE_BACK_TIMEOUT, RoundReport, duration_ms};
use crate::observe::Build;
use qlsched_core::CoordinatorConfig;
use qlsched_store::{Store, StoreError, replicas};

/// What the lifecycle tells an observer (the demo, `top`, the bench, tests) after each round.
/// One a round, so the size of a finished round's report beside a failed one's text costs
/// nothing worth a box.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum RoundEvent {
    Finished {
        started: Instant,
        finished: Instant,
        report: Box<RoundReport>,
    },
    Failed {
        started: Instant,
        finished: Instant,
        error: String,
    },
}

/// How a stop went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopReport {
    /// The round in flight finished within the drain timeout (or none was in flight).
    pub drained: bool,
    /// Claims given back because the round in flight was abandoned.
    pub released: usize,
}

pub struct Lifecycle {
    coordinator: Arc<Coordinator>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Lifecycle {
    /// Starts the timer. The first round starts within one cadence, at a random phase.
    pub fn start(
        coordinator: Arc<Coordinator>,
        events: Option<mpsc::UnboundedSender<RoundEvent>>,
    ) -> Self {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run_rounds(coordinator.clone(), stopped, events));
        Lifecycle {
            coordinator,
            stop,
            task,
        }
    }

    /// Stops claiming, waits up to the drain timeout for the round in flight, then gives back any
    /// claim that round still holds. Within [`stop_bound`] of the drain timeout.
    pub async fn stop(self) -> StopReport {
        self.stop_with(None).await
    }

    /// [`Self::stop`] for a registered replica: its registry row is marked `draining` beside the
    /// drain, and `stopped` beside the give-back, so that neither mark adds to the stop's bound.
    pub async fn stop_registered(self) -> StopReport {
        let coordinator = self.coordinator.clone();
        let owner = coordinator.config().owner.clone();
        let store = coordinator.store();
        let (_, report) = tokio::join!(
            mark(store, &owner, "draining"),
            self.stop_with(Some(&owner))
        );
        report
    }

    async fn stop_with(mut self, registered: Option<&str>) -> StopReport {
        let _ = self.stop.send(true);
        let drain_timeout = self.coordinator.config().drain_timeout;
        let drained = tokio::time::timeout(drain_timeout, &mut self.task)
            .await
            .is_ok();
        if !drained {
            self.coordinator.cancel_in_flight().await;
            self.task.abort();
            // Wait for the abort to take effect: a round still running could otherwise hold new
            // claims after release_held() below had taken the list.
            let _ = (&mut self.task).await;
            tracing::warn!(timeout = ?drain_timeout, "the round in flight did not finish within the drain timeout; releasing its claims");
        }
        let release = async {
            match self.coordinator.release_held().await {
                Ok(released) => released,
                Err(error) => {
                    tracing::warn!(%error, "could not release held claims; they expire with their lease");
                    0
                }
            }
        };
        let stopped = async {
            if let Some(owner) = registered {
                let last = self.coordinator.last_heartbeat();
                mark_stopped(self.coordinator.store(), owner, last).await;
            }
        };
        let (released, ()) = tokio::join!(release, stopped);
        StopReport { drained, released }
    }
}

/// The longest a stop takes beyond waiting for the round in flight: the cancel of that round's
/// statement, then its claims given back (beside the registry's `stopped` mark), each within
/// [`GIVE_BACK_TIMEOUT`], however the server answers or does not.
pub const STOP_BEYOND_DRAIN: Duration = Duration::from_secs(2 * GIVE_BACK_TIMEOUT.as_secs());

/// The longest from SIGTERM to the exit of `qlsched run` with `drain_timeout`, on a server that
/// answers nothing (a black-holed network): the registry's `draining` mark beside the drain
/// (whichever is longer), then [`STOP_BEYOND_DRAIN`]. The control loop that receives the signal
/// never waits on the database, so this is the whole of it. docs/OPERATIONS.md, the systemd unit
/// and the Kubernetes manifest state it for the default drain timeout, and tests hold them to it.
pub fn stop_bound(drain_timeout: Duration) -> Duration {
    drain_timeout.max(GIVE_BACK_TIMEOUT) + STOP_BEYOND_DRAIN
}

/// Connections in a replica's pool (`qlsched run`'s, and those run in-process): one for the
/// round, one for a give-back or a settlement while the round's connection is lost.
pub const REPLICA_POOL_SIZE: usize = 2;

/// How long a registry write (a registration, a mark) may take: a start or a stop never waits
/// on it longer, and a failure is only logged by the callers that can go on without it.
pub const REGISTRY_TIMEOUT: Duration = GIVE_BACK_TIMEOUT;

/// Writes this process's replica `config.owner` into the registry (host, pid, the release of
/// `build` and the schema version, lease and cadence, and how long after its last heartbeat the
/// registry forgets it if it never stops), as running, within [`REGISTRY_TIMEOUT`].
pub async fn register(
    store: &Store,
    config: &CoordinatorConfig,
    forget_after: Duration,
    build: Build,
) -> Result<(), StoreError> {
    let host = host_name();
    let release = build.release();
    let owner = config.owner.clone();
    let (lease_ms, cadence_ms) = (duration_ms(config.lease), duration_ms(config.cadence));
    let forget_after_ms = duration_ms(forget_after);
    store
        .within(REGISTRY_TIMEOUT, "registering the replica", move |client| {
            Box::pin(async move {
                let registration = replicas::Registration {
                    owner: &owner,
                    host: &host,
                    pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
                    version: &release,
                    schema_version: qlsched_store::migrate::latest_version(),
                    lease_ms,
                    cadence_ms,
                    forget_after_ms,
                };
                replicas::register(client, &registration).await
            })
        })
        .await
}

/// This machine's name, as the registry and `qlsched run`'s default owner (`HOST:PID`) write it:
/// the system's host name, or "unknown" in the rare case it gives none in UTF-8.
pub fn host_name() -> String {
    whoami::hostname().unwrap_or_else(|_| "unknown".to_owned())
}

/// Moves replica `owner`'s registry row to `state` (`draining`, `stopped`), within
/// [`REGISTRY_TIMEOUT`]: a stop never waits on it longer, and a failure is only logged.
pub async fn mark(store: &Store, owner: &str, state: &str) {
    let what = format!("marking the replica {state} in the registry");
    let (owner, state) = (owner.to_owned(), state.to_owned());
    let marked = store
        .within(REGISTRY_TIMEOUT, &what, |client| {
            Box::pin(async move { replicas::mark(client, &owner, &state).await })
        })
        .await;
    if let Err(error) = marked {
        tracing::warn!(%error, "could not update the replica registry");
    }
}

/// Marks a replica stopped, after its last heartbeat when its rounds did anything since the one
/// before (no later round will carry it): in the registry's counters and the minutes `top`'s
/// trends read. One connection and one bound for both, as [`mark`]'s alone, so a stop takes no
/// longer on a server that does not answer.
async fn mark_stopped(store: &Store, owner: &str, last: Option<replicas::Heartbeat>) {
    let owner = owner.to_owned();
    let marked = store
        .within(
            REGISTRY_TIMEOUT,
            "marking the replica stopped in the registry",
            |client| {
                Box::pin(async move {
                    if let Some(last) = &last {
                        replicas::beat(client, &owner, last).await?;
                    }
                    replicas::mark(client, &owner, "stopped").await
                })
            },
        )
        .await;
    if let Err(error) = marked {
        tracing::warn!(%error, "could not update the replica registry");
    }
}

async fn run_rounds(
    coordinator: Arc<Coordinator>,
    mut stopped: watch::Receiver<bool>,
    events: Option<mpsc::UnboundedSender<RoundEvent>>,
) {
    let cadence = coordinator.config().cadence;
    // Replicas started together would otherwise claim in step, each round racing the others for
    // the same head of the claim order; a random phase within one cadence spreads them out.
    let phase = cadence.mul_f64(f64::from(uuid::Uuid::new_v4().as_bytes()[0]) / 256.0);
    tokio::select! {
        _ = tokio::time::sleep(phase) => {}
        _ = stopped.changed() => return,
    }
    let mut failures = Failures::default();
    loop {
        if *stopped.borrow() {
            return;
        }
        let started = Instant::now();
        // A round never outlives its leases: on a connection that stopped answering (a failover,
        // a partition) the round is cancelled instead of leaving the replica silently stuck.
        let lease = coordinator.config().lease;
        let outcome = match tokio::time::timeout(
            lease,
            AssertUnwindSafe(coordinator.run_round()).catch_unwind(),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_) => {
                coordinator.cancel_in_flight().await;
                let held = coordinator.forget_held();
                // A replica resumed after a stall (SIGSTOP, a frozen VM) lands here at once:
                // say how long the round ran and what became of its claims meanwhile.
                let ran = qlsched_core::time::span(
                    i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
                );
                let fates = fates_of(&coordinator, &held, lease).await;
                let error = StoreError::TimedOut(format!(
                    "the round did not finish within the lease ({}): it ran {ran} (this process \
                     was stalled or the server did not answer); {fates}; cancelled, and its \
                     connection closed",
                    qlsched_core::format_duration(lease)
                ));
                let error = Err(error);
                coordinator.count_round(&error);
                Ok(error)
            }
        };
        let finished = Instant::now();
        coordinator.register_again_if_lost().await;
        let (full_budget, next_due_at) = match outcome {
            Ok(Ok(report)) => {
                // A round whose rows the server refused finished, its other rows admitted, and
                // still counts as failed: it backs off, and does not go again at once.
                let full = match &report.failure {
                    Some(failure) => {
                        failures.failed(failure);
                        false
                    }
                    None => {
                        failures.recovered();
                        report.claimed >= usize::from(report.batch)
                    }
                };
                let next_due_at = report.next_due_at;
                emit(
                    &events,
                    RoundEvent::Finished {
                        started,
                        finished,
                        report: Box::new(report),
                    },
                );
                (full, next_due_at)
            }
            Ok(Err(error)) => {
                failures.failed(&error.to_string());
                emit(
                    &events,
                    RoundEvent::Failed {
                        started,
                        finished,
                        error: error.to_string(),
                    },
                );
                (false, None)
            }
            Err(_) => {
                tracing::error!("round panicked");
                failures.failed("round panicked");
                emit(
                    &events,
                    RoundEvent::Failed {
                        started,
                        finished,
                        error: "round panicked".to_owned(),
                    },
                );
                (false, None)
            }
        };
        if full_budget {
            // More may be due right now: go again, but let a stop in between take effect.
            tokio::task::yield_now().await;
            continue;
        }
        // Wake for the next occurrence, not for the timer's phase: the lag of an idle cluster is
        // then the round's own time, and it cannot drift. The cadence bounds every sleep, so a
        // row another replica gives back or lets expire is found within one cadence.
        // After a failure, the next round waits out the back-off instead.
        let wake = match failures.back_off(cadence) {
            Some(back_off) => finished + back_off,
            None => next_due_at.map_or(started + cadence, |due| due.min(started + cadence)),
        };
        tokio::select! {
            _ = tokio::time::sleep_until(wake.into()) => {}
            _ = stopped.changed() => return,
        }
    }
}

/// The longest a replica waits between failed rounds (or one cadence, if that is longer). Short
/// against the default grace (60 s), so an outage of the database costs lag, not occurrences,
/// and a server that is back is found within this long.
pub const MAX_BACK_OFF: Duration = Duration::from_secs(5);

/// How often a replica whose rounds keep failing says so again.
const REMINDER: Duration = Duration::from_secs(60);

/// Consecutive failed rounds: the back-off before the next one, and what is logged. The first
/// failure is logged at WARN, then a reminder a minute while they go on (not a line a round: an
/// unreachable database otherwise wrote one every cadence), and one line when rounds succeed again.
#[derive(Default)]
struct Failures {
    consecutive: u32,
    since: Option<Instant>,
    reminded: Option<Instant>,
}

impl Failures {
    fn failed(&mut self, error: &str) {
        self.consecutive += 1;
        let now = Instant::now();
        match self.since {
            None => {
                self.since = Some(now);
                self.reminded = Some(now);
                tracing::warn!(%error, max_back_off = ?MAX_BACK_OFF,
                    "round failed; retrying with back-off");
            }
            Some(since) if self.reminded.is_some_and(|at| now - at >= REMINDER) => {
                self.reminded = Some(now);
                tracing::warn!(%error, failed_rounds = self.consecutive,
                    failing_for = ?(now - since), "rounds still failing");
            }
            Some(_) => tracing::debug!(%error, failed_rounds = self.consecutive, "round failed"),
        }
    }

    fn recovered(&mut self) {
        if let Some(since) = self.since.take() {
            tracing::info!(failed_rounds = self.consecutive, after = ?since.elapsed(),
                "rounds succeed again");
        }
        *self = Failures::default();
    }

    /// The wait before the next round while rounds fail: one cadence after the first failure,
    /// doubling after each further one up to [`MAX_BACK_OFF`], less a random part of up to a
    /// half, so replicas that lost the same server do not come back in step.
    fn back_off(&self, cadence: Duration) -> Option<Duration> {
        if self.consecutive == 0 {
            return None;
        }
        let cap = MAX_BACK_OFF.max(cadence);
        let doubled = cadence.saturating_mul(1 << self.consecutive.saturating_sub(1).min(16));
        let full = doubled.min(cap);
        let jitter: f64 = rand::RngExt::random_range(&mut rand::rng(), 0.0..0.5);
        Some(full.mul_f64(1.0 - jitter))
    }
}

/// What became of the claims a timed-out round held, from one read bounded by the lease (the
/// server may be the thing that is not answering): `its 2 claims: p/a taken over by host-2; …`.
async fn fates_of(
    coordinator: &Coordinator,
    held: &[qlsched_store::claim::ReleaseRequest],
    lease: std::time::Duration,
) -> String {
    if held.is_empty() {
        // Nothing read back, but a claim may have been in flight: its rows carry this owner's
        // name until their lease ends or another replica takes them.
        let owner = coordinator.config().owner.clone();
        let store = coordinator.store();
        // A read that runs out of time closes its connection (`Store::read_within`): handed back
        // to the pool mid-transaction, it would carry a read-only transaction into a round.
        let read = store
            .read_within(lease, "the claims in flight", |client| {
                Box::pin(async move { qlsched_store::replicas::claimed_rows(client, &owner).await })
            })
            .await;
        return match read {
            Ok((0, 0)) => "it held no claim".to_owned(),
            Ok((valid, expired)) => format!(
                "it held no claim it had read back, but {} row{} still carry a claim in its name \
                 from a claim in flight ({valid} valid, {expired} expired: other replicas take \
                 them once expired)",
                valid + expired,
                if valid + expired == 1 { "" } else { "s" }
            ),
            Err(StoreError::TimedOut(_)) => {
                "whether a claim was in flight is unknown: the server did not answer".to_owned()
            }
            Err(error) => format!("whether a claim was in flight is unknown: {error}"),
        };
    }
    let store = coordinator.store();
    let asked = held.to_vec();
    let read = store
        .read_within(lease, "the fates of its claims", |client| {
            Box::pin(async move { qlsched_store::claim::claim_fates(client, &asked).await })
        })
        .await;
    let fates = match read {
        Ok(fates) => fates,
        Err(StoreError::TimedOut(_)) => {
            return format!(
                "what became of its {} claims is unknown: the server did not answer",
                held.len()
            );
        }
        Err(error) => {
            return format!(
                "what became of its {} claims is unknown: {error}",
                held.len()
            );
        }
    };
    const LISTED: usize = 5;
    let mut text = format!(
        "its {} claim{}: ",
        fates.len(),
        if fates.len() == 1 { "" } else { "s" }
    );
    let listed: Vec<String> = fates
        .iter()
        .take(LISTED)
        .map(|(name, fate)| format!("{} {fate}", qlsched_core::text::clean(&name.to_string())))
        .collect();
    text.push_str(&listed.join("; "));
    if fates.len() > LISTED {
        text.push_str(&format!("; and {} more", fates.len() - LISTED));
    }
    text
}

fn emit(events: &Option<mpsc::UnboundedSender<RoundEvent>>, event: RoundEvent) {
    if let Some(events) = events {
        let _ = events.send(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_is_bounded_by_the_drain_timeout_plus_the_cancel_and_the_give_back() {
        assert_eq!(stop_bound(Duration::from_secs(10)), Duration::from_secs(14));
        // The registry's draining mark runs beside the drain: a shorter drain waits for it.
        assert_eq!(stop_bound(Duration::ZERO), Duration::from_secs(6));
    }
}
