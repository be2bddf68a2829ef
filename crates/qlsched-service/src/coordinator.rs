//! The bounded round of docs/DESIGN.md §4.9: claim up to the budget, decide each claimed
//! row outside any lock, admit what fires, advance what initializes or skips, and release what
//! turned out not to be due. One round at a time; [`crate::lifecycle`] owns the timer.

mod claims;
mod identity;
mod report;

pub use claims::{ClaimBook, ClaimEvent, ClaimState, TransitionError};
pub use identity::{decide_claimed, duration_ms, run_identity};
pub use report::{AdmittedRun, PassedOver, RoundReport};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::observe::Build;
use qlsched_core::batch::{RoundLoad, next_batch};
use qlsched_core::minutes::{MinuteFigures, merge_minutes, minute_of};
use qlsched_core::{CoordinatorConfig, CronSchedule, Decision};
use qlsched_store::admission_errors::{self, Refusal};
use qlsched_store::admit::{admit, lock_order};
use qlsched_store::claim::{RoundClaim, claim_for_round, give_back};
use qlsched_store::replicas::Heartbeat;
use qlsched_store::{
    Admission, AdmissionOutcome, AdmitStats, Begin, Canceller, ClaimedRow, Lent, ReleaseRequest,
    RunIdentity, Store, StoreError, run_in_transaction,
};

/// How long giving claims back (or learning an unknown outcome) may wait for a connection: a
/// stop is bounded by the drain timeout plus this, and a round by its lease plus this.
pub const GIVE_BACK_TIMEOUT: Duration = Duration::from_secs(2);

/// How often a trigger whose admission keeps being refused is logged at ERROR: once an interval
/// per trigger, at DEBUG between. `inspect trigger` and the registry keep the error meanwhile.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// How many parsed schedules the cache keeps before it starts again empty: more distinct (zone,
/// expression) pairs than this is a fleet of generated expressions, and parsing is cheap.
const SCHEDULE_CACHE_LIMIT: usize = 4_096;

/// An admission whose outcome a lost connection hid, kept until a connection can tell.
#[derive(Debug, Clone)]
struct PendingAdmission {
    row: ClaimedRow,
    decision: Decision,
    run: Option<RunIdentity>,
}

/// What a round that lost its connection still owes the database: the admissions whose outcome is
/// unknown and the claims it had to give back. Settled at the start of the next round, on its
/// connection (docs/RELIABILITY.md, "A connection lost mid-round"): a run that exists by its
/// identity was admitted, any other claim still held is released at once, fenced, instead of
/// waiting out its lease.
#[derive(Debug, Default, Clone)]
struct Owed {
    admissions: Vec<PendingAdmission>,
    releases: Vec<ReleaseRequest>,
}

/// One replica's scheduler: its configuration, its store, and the claims its round holds.
pub struct Coordinator {
    store: Store,
    config: CoordinatorConfig,
    /// The round's claims and where each stands, so that a stop that cannot wait for the round
    /// can still give back those it holds (docs/DESIGN.md §4.9).
    claims: Mutex<ClaimBook>,
    /// Parsed schedules by zone, then expression: parsing is cheap, but not free on the hot
    /// path, and nested maps let a hit be found with borrowed strings. At most
    /// [`SCHEDULE_CACHE_LIMIT`] of them.
    schedules: Mutex<HashMap<String, HashMap<String, Arc<CronSchedule>>>>,
    /// Cancels the statement of the round in flight, for a stop that cannot wait for it: the
    /// server rolls the admission back, and the held claims can then be released.
    in_flight: Mutex<Option<Canceller>>,
    /// What the next registry heartbeat adds, and when the last one was sent: at most one a
    /// cadence, carried in the claim's round trip.
    heartbeat: Mutex<(Option<Instant>, Heartbeat)>,
    /// How long after its last heartbeat the registry forgets this replica, and the build it
    /// registers as, when the replica registers itself ([`Coordinator::registered`]): a
    /// heartbeat that finds its registry row gone then registers it again.
    registration: Option<(Duration, Build)>,
    /// Figures of rounds whose minute of database time is not known yet (they failed before
    /// this replica's first claim): counted in the minute of the next heartbeat after one.
    unplaced: Mutex<MinuteFigures>,
    /// The last claim's database time and when its reply arrived here: a failed round's
    /// database minute is read from it.
    clock: Mutex<Option<(i64, Instant)>>,
    /// A heartbeat updated no registry row: the row is to be written again after the round.
    registry_row_lost: AtomicBool,
    /// When the last round started, on this replica's clock: what `/healthz` reads.
    last_started: Mutex<Option<Instant>>,
    /// The batch the next round claims with: the pinned one, or where the adaptive rule
    /// (`core::batch`) left it.
    batch: Mutex<u16>,
    /// What a round that lost its connection left unsettled, for the next round to settle.
    owed: Mutex<Owed>,
    /// Set when a statement of the round may still be running on its connection (a settlement
    /// past its bound): the connection is then closed rather than pooled.
    connection_busy: AtomicBool,
    /// When each trigger whose admission failed was last logged ([`REFUSAL_LOG_INTERVAL`]).
    refusals_said: Mutex<HashMap<(String, String), Instant>>,
    /// When the server's having no room for an admission was last logged at WARN.
    shortage_said: Mutex<Option<Instant>>,
}

impl Coordinator {
    /// A replica's rounds on `store`, which should be opened with [`Store::open_replica`]: on any
    /// other pool the claim is as correct, but its plan is the planner's guess again.
    pub fn new(store: Store, config: CoordinatorConfig) -> Self {
        Coordinator {
            store,
            claims: Mutex::new(ClaimBook::default()),
            schedules: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(None),
            heartbeat: Mutex::new((None, Heartbeat::default())),
            registration: None,
            unplaced: Mutex::new(MinuteFigures::default()),
            clock: Mutex::new(None),
            registry_row_lost: AtomicBool::new(false),
            last_started: Mutex::new(None),
            batch: Mutex::new(config.batch.initial()),
            owed: Mutex::new(Owed::default()),
            connection_busy: AtomicBool::new(false),
            refusals_said: Mutex::new(HashMap::new()),
            shortage_said: Mutex::new(None),
            config,
        }
    }

    /// A replica that keeps itself in the registry: registered (by
    /// [`crate::lifecycle::register`]) as `build` with `forget_after`, and registered again so
    /// when a heartbeat finds its row gone (forgotten after a long stall, `expire --owner`), so
    /// that a replica that still admits never goes missing from the registry.
    pub fn registered(mut self, forget_after: Duration, build: Build) -> Self {
        self.registration = Some((forget_after, build));
        self
    }

    /// Writes the registry row again when the last heartbeat found it gone, outside the round
    /// (on a connection of its own, within the registry's bound); a registration that fails is
    /// tried again after the next round. Nothing for a coordinator not [`Self::registered`].
    pub async fn register_again_if_lost(&self) {
        let Some((forget_after, build)) = self.registration else {
            return;
        };
        if !self.registry_row_lost.swap(false, Ordering::AcqRel) {
            return;
        }
        match crate::lifecycle::register(&self.store, &self.config, forget_after, build).await {
            Ok(()) => tracing::warn!(
                owner = %self.config.owner,
                "the replica's registry row was gone (forgotten or expired by an operator); \
                 registered again"
            ),
            Err(error) => {
                tracing::warn!(%error, "could not register the replica again; trying after the next round");
                self.registry_row_lost.store(true, Ordering::Release);
            }
        }
    }

    /// The batch the next round claims with.
    pub fn batch(&self) -> u16 {
        *self.batch.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next round's batch, from what this one did (`core::batch::next_batch`).
    fn adapt_batch(&self, report: &RoundReport) {
        let next = next_batch(
            self.config.batch,
            RoundLoad {
                batch: report.batch,
                claimed: report.claimed,
                admit_time: report.admit_time,
                // The server short of its own resources fails batches of any size alike: halving
                // would only cost rounds once it has room again.
                failed: report.failure.is_some() && report.shortage.times == 0,
            },
            self.config.lease,
        );
        *self.batch.lock().unwrap_or_else(|p| p.into_inner()) = next;
    }

    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// When the last round started (`None` before the first): the timer is alive while this
    /// keeps moving.
    pub fn last_round_started(&self) -> Option<Instant> {
        *self.last_started.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs one round: claim, decide, admit, release.
    pub async fn run_round(&self) -> Result<RoundReport, StoreError> {
        *self.last_started.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        // Lent, not pooled: a round dropped before it finished (its lease ran out, or a stop
        // could not wait for it) is followed by a cancel request, and a cancel request names the
        // backend, not the statement: had the connection gone back to the pool, the cancel could
        // land on the next round's statement. Dropped unfinished, a `Lent` is closed instead.
        let connection = self.store.lend().await?;
        *self.in_flight.lock().unwrap_or_else(|p| p.into_inner()) = Some(connection.canceller());
        let result = self.round(&connection).await;
        self.count_round(&result);
        if let Ok(report) = &result {
            self.adapt_batch(report);
        }
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        // Finished: the connection goes back to the pool, unless a statement of the round may
        // still be running on it (a settlement past its bound): then, dropped unfinished, it is
        // closed and that statement cancelled.
        if !self.connection_busy.swap(false, Ordering::Relaxed) {
            connection.finished();
        }
        result
    }

    async fn round(&self, client: &Lent) -> Result<RoundReport, StoreError> {
        let mut report = RoundReport {
            owner: self.config.owner.clone(),
            batch: self.batch(),
            ..RoundReport::default()
        };
        self.settle_owed(client, &mut report).await?;
        let started = Instant::now();
        let claim = self.claim(client, &mut report).await?;
        report.claim_time = started.elapsed();
        report.claimed = claim.rows.len();
        // A database instant as a local one: the claim's reply arrived at `received`, when the
        // database's clock read `now_ms`. Never earlier than the reply, so never early by the
        // network's delay.
        let local = |due_ms: i64| {
            let ahead = u64::try_from(due_ms.saturating_sub(claim.now_ms)).unwrap_or(0);
            claim.received + Duration::from_millis(ahead)
        };
        report.next_due_at = claim.next_due_ms.map(local);
        // A failed clock read says 0: no database time was learnt.
        if claim.now_ms > 0 {
            report.claimed_at_ms = Some(claim.now_ms);
            *self.lock_clock() = Some((claim.now_ms, claim.received));
        }
        let rows = claim.rows;
        if rows.is_empty() {
            return Ok(report);
        }
        let first = self
            .lock_claims()
            .hold(rows.iter().map(ReleaseRequest::from));
        let (indices, admissions) = self.decide_all(&rows, first, &mut report);
        let (outcomes, connection_failed) =
            match self.admit_all(client, &admissions, &mut report).await {
                Ok(admitted) => admitted,
                Err(error) => {
                    // What became of the admissions cannot be learnt now: the next round learns
                    // it on its own connection, and releases what did not commit then.
                    let mut claims = self.lock_claims();
                    let mut owed = self.lock_owed();
                    owed.admissions
                        .extend(admissions.iter().map(|a| PendingAdmission {
                            row: a.row.clone(),
                            decision: a.decision,
                            run: a.run.clone(),
                        }));
                    owed.releases.extend(claims.returning());
                    claims.abandon();
                    claims.clear();
                    return Err(error);
                }
            };
        let mut refusals = Vec::new();
        for ((admission, outcome), index) in admissions.iter().zip(&outcomes).zip(indices) {
            self.transition(index, ClaimEvent::Admission(outcome));
            let due_at = local(admission.decision.next_fire_at_ms());
            let say = match outcome {
                // The server had no room for any of them: one line said so for the round
                // (`say_short_of_resources`), not one a row, which while a long transaction kept
                // its table full wrote hundreds a round.
                AdmissionOutcome::Unsettled { .. } if report.shortage.exhausted => false,
                AdmissionOutcome::Rejected { .. }
                | AdmissionOutcome::DefinitionRefused { .. }
                | AdmissionOutcome::Unsettled { .. } => self.first_in_interval(admission.row),
                _ => true,
            };
            report.account(admission, outcome.clone(), due_at, say);
            refusals.extend(Refusal::of(admission, outcome));
        }
        // A row refused on its own names its trigger: the failure the round reports before its
        // batch's.
        if report.failure.is_none() {
            report.failure = report.batch_error.take();
        }
        // Where every replica and operator looks (`inspect trigger`): one write a refusal, and a
        // refused row is tried once a lease, so this is never a write a round.
        if !refusals.is_empty() && !connection_failed {
            let recorded = admission_errors::record(
                client,
                self.store.sender(),
                &refusals,
                &mut report.round_trips,
            )
            .await;
            if let Err(error) = recorded {
                tracing::warn!(%error, "could not record the refused admissions for `inspect trigger`");
            }
        }
        self.give_back_returning(client, connection_failed, &mut report)
            .await;
        self.lock_claims().clear();
        Ok(report)
    }

    /// The round's claim, with the heartbeat it carries. The claim statement carries the upgrade
    /// gate: a build that a migration's floor holds out claims nothing, and a failed read of the
    /// ledger fails the claim. The same trip says which migration closes the gate: then the round
    /// fails saying so (not ready, in the registry's last error), after giving back what a claim
    /// that ran just before the migration committed took.
    async fn claim(
        &self,
        client: &Lent,
        report: &mut RoundReport,
    ) -> Result<RoundClaim, StoreError> {
        let heartbeat = self.due_heartbeat();
        let claimed = claim_for_round(
            client,
            self.store.sender(),
            &self.config.owner,
            i64::from(report.batch),
            duration_ms(self.config.lease),
            heartbeat.as_ref(),
            &mut report.round_trips,
        )
        .await;
        // The heartbeat first, whatever the gate says below: a replica held out still counts
        // its rounds and, its registry row gone, registers again.
        match &claimed {
            Ok(trip) => {
                if let (Some(unsent), Err(error)) = (heartbeat, &trip.heartbeat) {
                    tracing::warn!(%error, "the registry's heartbeat failed; the next one carries its counts");
                    if matches!(error, StoreError::NotFound(_)) {
                        // No row to beat: the timer registers the replica again after the round.
                        self.registry_row_lost.store(true, Ordering::Release);
                    }
                    self.heartbeat_not_sent(unsent);
                }
            }
            Err(_) => {
                if let Some(unsent) = heartbeat {
                    self.heartbeat_not_sent(unsent);
                }
            }
        }
        if let Ok(trip) = &claimed {
            match &trip.gate {
                Ok(Some(closed_by)) => {
                    // Admit nothing, and give back what the claim took.
                    if let Ok(claim) = &trip.claim {
                        let taken: Vec<ReleaseRequest> =
                            claim.rows.iter().map(ReleaseRequest::from).collect();
                        if let Err(error) =
                            give_back(client, self.store.sender(), &taken, &mut report.round_trips)
                                .await
                        {
                            tracing::warn!(%error, "could not give claims back; they expire with their lease");
                        }
                    }
                    return Err(StoreError::SchemaNotReady(format!(
                        "{closed_by}: admitting nothing (upgrade this replica to a release that \
                         carries it)"
                    )));
                }
                Ok(None) => {}
                // The claim read the gate itself: only the reason is missing.
                Err(error) => {
                    tracing::warn!(%error, "could not read which migration, if any, closes the upgrade gate");
                }
            }
        }
        let claim = match claimed {
            Ok(trip) => trip.claim?,
            Err(error) => return Err(error),
        };
        Ok(claim)
    }

    /// The core's decision on each claimed row (claim `first + i` for row `i`): a row not due is
    /// to be given back, one that cannot be decided is left to expire, and the others are
    /// returned as admissions in primary-key order, each beside the index of its claim.
    fn decide_all<'r>(
        &self,
        rows: &'r [ClaimedRow],
        first: usize,
        report: &mut RoundReport,
    ) -> (Vec<usize>, Vec<Admission<'r>>) {
        // Each admission beside the index of its claim in the book.
        let mut admitting = Vec::with_capacity(rows.len());
        for (index, row) in rows.iter().enumerate() {
            let index = first + index;
            match self.decide(row) {
                Ok(Decision::NotDue { .. }) => self.transition(index, ClaimEvent::NotDue),
                Ok(decision) => admitting.push((
                    index,
                    Admission {
                        row,
                        decision,
                        run: run_identity(row, &decision),
                    },
                )),
                Err(error) => {
                    report.undecidable += 1;
                    self.transition(index, ClaimEvent::Undecidable);
                    tracing::error!(trigger = %row.name(), %error, "cannot decide; the claim is left to expire");
                }
            }
        }

        // Locked in the order every writer of schedule rows locks them (publish, a pause,
        // `expire --owner`): no two of them wait on each other in a cycle.
        admitting.sort_by(|(_, a), (_, b)| lock_order(a.row, b.row));
        admitting.into_iter().unzip()
    }

    /// Admits on the round's connection; where the outcome is not known (the admission failed,
    /// or left rows unsettled), learns it on a fresh connection. Returns each admission's
    /// outcome, and whether the round's connection is to be left alone from now on. An error:
    /// the outcomes cannot be learnt, and the claims are left to their leases.
    async fn admit_all(
        &self,
        client: &Lent,
        admissions: &[Admission<'_>],
        report: &mut RoundReport,
    ) -> Result<(Vec<AdmissionOutcome>, bool), StoreError> {
        let admit_started = Instant::now();
        let mut stats = AdmitStats::default();
        let outcomes = admit(client, self.store.sender(), admissions, &mut stats).await;
        report.admit_time = admit_started.elapsed();
        report.transactions = stats.transactions;
        report.serialization_retries = stats.serialization_retries;
        report.batch_fallbacks = stats.batch_fallbacks;
        report.batch_error = stats.batch_error.take();
        report.round_trips += stats.round_trips;
        report.shortage = std::mem::take(&mut stats.shortage);
        if let Some(error) = &report.shortage.last_error {
            self.say_short_of_resources(report.shortage.times, report.shortage.exhausted, error);
        }
        // A failed admission may have committed all the same (the connection died with the
        // COMMIT in flight, or its reply was lost), and a row left unsettled by the fall-back may
        // have too: what became of them is learnt on a fresh connection, never guessed, and the
        // round's own connection, which may be dead, is not used again.
        let mut connection_failed = false;
        let outcomes = match outcomes {
            Ok(outcomes)
                if !outcomes
                    .iter()
                    .any(|o| matches!(o, AdmissionOutcome::Unsettled { .. })) =>
            {
                outcomes
            }
            failed => {
                connection_failed = true;
                let known = failed.as_ref().ok();
                match self.settle_unknown(admissions, known).await {
                    Ok(outcomes) => {
                        let committed = outcomes
                            .iter()
                            .filter(|o| {
                                matches!(
                                    o,
                                    AdmissionOutcome::Admitted(_) | AdmissionOutcome::Advanced
                                )
                            })
                            .count();
                        tracing::warn!(
                            committed,
                            not_committed = outcomes.len() - committed,
                            error = %failed.as_ref().err().map_or_else(
                                || "rows left unsettled".to_owned(),
                                ToString::to_string
                            ),
                            "admission outcome unknown; learnt on a fresh connection"
                        );
                        outcomes
                    }
                    Err(settle_error) => {
                        let error = failed.err().unwrap_or(settle_error);
                        tracing::warn!(%error, "admission outcome unknown and the database unreachable; the claims expire with their lease");
                        return Err(error);
                    }
                }
            }
        };
        Ok((outcomes, connection_failed))
    }

    /// Gives back the claims the book has returning (not due, or not settled): on the round's
    /// connection, or on a fresh one when the round's may be dead.
    async fn give_back_returning(
        &self,
        client: &Lent,
        connection_failed: bool,
        report: &mut RoundReport,
    ) {
        let returned = self.lock_claims().returning();
        if !returned.is_empty() {
            let released = if connection_failed {
                self.release_on_fresh_connection(&returned).await
            } else {
                give_back(
                    client,
                    self.store.sender(),
                    &returned,
                    &mut report.round_trips,
                )
                .await
            };
            match released {
                Ok(released) => {
                    report.released = released.len();
                    self.lock_claims().gave_back(Ok(&released));
                }
                Err(error) => {
                    self.lock_claims().gave_back(Err(()));
                    // The next round gives them back, fenced, on its own connection.
                    self.lock_owed().releases.extend(returned);
                    tracing::warn!(%error, "could not give claims back; the next round gives them back");
                }
            }
        }
    }

    /// The outcome of each admission, learnt on a fresh connection where `known` (the outcomes
    /// `admit` returned, if it returned) leaves it open: all of them when `admit` failed, the
    /// `Unsettled` ones otherwise.
    async fn settle_unknown(
        &self,
        admissions: &[Admission<'_>],
        known: Option<&Vec<AdmissionOutcome>>,
    ) -> Result<Vec<AdmissionOutcome>, StoreError> {
        let open = |i: usize| {
            known.is_none_or(|outcomes| {
                matches!(
                    outcomes.get(i),
                    Some(AdmissionOutcome::Unsettled { .. }) | None
                )
            })
        };
        let unknown: Vec<Admission<'_>> = admissions
            .iter()
            .enumerate()
            .filter(|(i, _)| open(*i))
            .map(|(_, a)| a.clone())
            .collect();
        // Lent, not pooled: a round cut off by its lease mid-settlement drops this read, and its
        // connection, inside a READ ONLY transaction, must not be handed to the next round.
        let client = tokio::time::timeout(GIVE_BACK_TIMEOUT, self.store.lend())
            .await
            .map_err(|_| StoreError::TimedOut("no fresh connection to settle on".into()))??;
        let settled = run_in_transaction(&client, self.store.schema(), Begin::ReadOnly, |c| {
            Box::pin(qlsched_store::admit::settle(c, &unknown))
        })
        .await;
        client.finished();
        let mut settled = settled?.into_iter();
        Ok((0..admissions.len())
            .map(|i| match known.and_then(|outcomes| outcomes.get(i)) {
                Some(outcome) if !open(i) => outcome.clone(),
                earlier => match settled.next().map(|s| s.outcome) {
                    // Not committed, as `admit` said: its reason (the server's error) is the
                    // cause worth reporting, not the settlement's.
                    Some(AdmissionOutcome::Unsettled { .. }) | None => match earlier {
                        Some(unsettled @ AdmissionOutcome::Unsettled { .. }) => unsettled.clone(),
                        _ => AdmissionOutcome::Unsettled {
                            reason: "not committed; the claim is given back".to_owned(),
                        },
                    },
                    Some(outcome) => outcome,
                },
            })
            .collect())
    }

    /// Gives claims back on a connection other than the round's, which may be the one that
    /// died, within [`GIVE_BACK_TIMEOUT`]: a dead connection must not keep a live replica's
    /// claims for a whole lease.
    async fn release_on_fresh_connection(
        &self,
        requests: &[ReleaseRequest],
    ) -> Result<Vec<(String, String)>, StoreError> {
        // Lent, not pooled: cut off by the bound mid-transaction, the connection is closed
        // rather than handed to the next round inside this give-back's transaction.
        tokio::time::timeout(GIVE_BACK_TIMEOUT, async {
            let client = self.store.lend().await?;
            let released = give_back(&client, self.store.sender(), requests, &mut 0).await;
            client.finished();
            released
        })
        .await
        .map_err(|_| StoreError::TimedOut("giving claims back".into()))?
    }

    /// Asks the server to cancel the statement of the round in flight, if any. A cancelled
    /// admission rolls back as a whole; one that already committed is unaffected.
    pub async fn cancel_in_flight(&self) {
        let canceller = self
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(canceller) = canceller {
            // A cancel request opens a connection of its own; on a partition that would wait for
            // the connect timeout, and a stop must stay bounded.
            match tokio::time::timeout(GIVE_BACK_TIMEOUT, canceller.cancel()).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(%error, "could not cancel the statement in flight");
                }
                Err(_) => tracing::warn!(
                    "could not cancel the statement in flight: no answer within {GIVE_BACK_TIMEOUT:?}"
                ),
            }
        }
    }

    /// Drops the record of the claims a cancelled round held: their leases have run out, so they
    /// are anyone's to take, and releasing them would only wait on the same unanswering server.
    /// Returns them, so that the caller can say what became of each.
    pub fn forget_held(&self) -> Vec<ReleaseRequest> {
        self.lock_claims().take_held()
    }

    /// Gives back every claim the round in flight still holds (used when a stop cannot wait for
    /// the round). Fenced: a claim admitted or taken over meanwhile is left alone.
    pub async fn release_held(&self) -> Result<usize, StoreError> {
        let held = self.lock_claims().take_held();
        if held.is_empty() {
            return Ok(0);
        }
        Ok(self.release_on_fresh_connection(&held).await?.len())
    }

    /// The core's decision on `row`, its schedule parsed once and kept: looked up under the
    /// cache's lock, parsed and decided outside it, so one slow parse never holds up a decision.
    fn decide(&self, row: &ClaimedRow) -> Result<Decision, qlsched_core::CoreError> {
        let definition = &row.definition;
        let cached = self
            .schedules
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(definition.time_zone.as_str())
            .and_then(|in_zone| in_zone.get(definition.cron_expr.as_str()))
            .cloned();
        let schedule = match cached {
            Some(schedule) => schedule,
            None => {
                let parsed = Arc::new(CronSchedule::parse(
                    &definition.cron_expr,
                    &definition.time_zone,
                )?);
                let mut schedules = self
                    .schedules
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                // Bounded: past the limit it starts again, and the schedules in use come back
                // at one parse each.
                if schedules.values().map(HashMap::len).sum::<usize>() >= SCHEDULE_CACHE_LIMIT {
                    schedules.clear();
                }
                schedules
                    .entry(definition.time_zone.clone())
                    .or_default()
                    .insert(definition.cron_expr.clone(), parsed.clone());
                parsed
            }
        };
        decide_claimed(row, &schedule)
    }

    fn lock_heartbeat(&self) -> std::sync::MutexGuard<'_, (Option<Instant>, Heartbeat)> {
        self.heartbeat
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lock_clock(&self) -> std::sync::MutexGuard<'_, Option<(i64, Instant)>> {
        self.clock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The database's time now, as this replica last learnt it (the last claim's time plus the
    /// time since its reply); `None` before its first claim.
    fn database_now_ms(&self) -> Option<i64> {
        let clock = *self.lock_clock();
        clock.map(|(at_ms, received)| {
            at_ms.saturating_add(i64::try_from(received.elapsed().as_millis()).unwrap_or(0))
        })
    }

    /// The heartbeat to send with this round's claim, if a cadence has passed since the last one.
    fn due_heartbeat(&self) -> Option<Heartbeat> {
        let batch = i32::from(self.batch());
        let now = self.database_now_ms();
        let mut heartbeat = self.lock_heartbeat();
        let due = heartbeat
            .0
            .is_none_or(|sent| sent.elapsed() >= self.config.cadence);
        if !due {
            return None;
        }
        heartbeat.0 = Some(Instant::now());
        let mut due = std::mem::take(&mut heartbeat.1);
        due.batch = batch;
        if let Some(now) = now {
            let unplaced =
                std::mem::take(&mut *self.unplaced.lock().unwrap_or_else(|p| p.into_inner()));
            if !unplaced.is_empty() {
                due.minutes
                    .entry(minute_of(now))
                    .or_default()
                    .merge(&unplaced);
            }
        }
        Some(due)
    }

    /// What the registry has not been told yet, taken for a last heartbeat (`None` when there
    /// is nothing to tell): a stopping replica's, whose next round never comes.
    pub(crate) fn last_heartbeat(&self) -> Option<Heartbeat> {
        let batch = i32::from(self.batch());
        let now = self.database_now_ms();
        let mut heartbeat = self.lock_heartbeat();
        let mut last = std::mem::take(&mut heartbeat.1);
        last.batch = batch;
        if let Some(now) = now {
            let unplaced =
                std::mem::take(&mut *self.unplaced.lock().unwrap_or_else(|p| p.into_inner()));
            if !unplaced.is_empty() {
                last.minutes
                    .entry(minute_of(now))
                    .or_default()
                    .merge(&unplaced);
            }
        }
        (last
            != Heartbeat {
                batch,
                ..Heartbeat::default()
            })
        .then_some(last)
    }

    /// A heartbeat whose claim failed: its counts go into the next one.
    fn heartbeat_not_sent(&self, unsent: Heartbeat) {
        let mut heartbeat = self.lock_heartbeat();
        heartbeat.0 = None;
        let pending = &mut heartbeat.1;
        pending.rounds += unsent.rounds;
        pending.failed_rounds += unsent.failed_rounds;
        pending.admissions += unsent.admissions;
        pending.misfires += unsent.misfires;
        pending.fence_losses += unsent.fence_losses;
        merge_minutes(&mut pending.minutes, &unsent.minutes);
        if pending.last_error.is_none() {
            pending.last_error = unsent.last_error;
        }
    }

    /// What a round did, for the next heartbeat; the timer counts a round it had to cancel here
    /// too, so the registry's failed rounds and last error say what the log said.
    pub(crate) fn count_round(&self, result: &Result<RoundReport, StoreError>) {
        // The minute of database time the round's figures count in: its claim's, or, for a
        // round that did not claim, now as the last claim taught it.
        let minute = result
            .as_ref()
            .ok()
            .and_then(|report| report.claimed_at_ms)
            .or_else(|| self.database_now_ms())
            .map(minute_of);
        let mut figures = MinuteFigures::default();
        let mut heartbeat = self.lock_heartbeat();
        let pending = &mut heartbeat.1;
        pending.rounds += 1;
        match result {
            Ok(report) => {
                pending.admissions += report.fired as i64;
                pending.misfires += report.misfires as i64;
                pending.fence_losses += report.fence_lost as i64;
                figures.admissions = report.fired as i64;
                figures.misfires = report.misfires as i64;
                figures.occurrences_passed_over =
                    i64::try_from(report.occurrences_passed_over).unwrap_or(i64::MAX);
                figures.fence_losses = report.fence_lost as i64;
                for run in &report.admitted {
                    figures
                        .lag
                        .record(run.claimed_at_ms - run.run.scheduled_for_ms);
                }
            }
            Err(error) => {
                pending.failed_rounds += 1;
                figures.failed_rounds += 1;
                pending.last_error = Some(qlsched_core::text::clean(&error.to_string()));
            }
        }
        if let Ok(RoundReport {
            failure: Some(failure),
            ..
        }) = result
        {
            pending.failed_rounds += 1;
            figures.failed_rounds += 1;
            pending.last_error = Some(qlsched_core::text::clean(failure));
        }
        if figures.is_empty() {
            return;
        }
        match minute {
            Some(minute) => pending.minutes.entry(minute).or_default().merge(&figures),
            None => self
                .unplaced
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .merge(&figures),
        }
    }

    /// Whether to log a failed admission of `row` (refused, or not settled) at its level now, not
    /// at DEBUG: once a [`REFUSAL_LOG_INTERVAL`] per trigger, whichever the failure. The map forgets triggers not refused for an interval, so it stays as small as the
    /// set of triggers being refused.
    fn first_in_interval(&self, row: &ClaimedRow) -> bool {
        let mut said = self.refusals_said.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        said.retain(|_, at| now.duration_since(*at) < REFUSAL_LOG_INTERVAL);
        let key = (row.project_id.clone(), row.trigger_id.clone());
        if said.contains_key(&key) {
            return false;
        }
        said.insert(key, now);
        true
    }

    /// Says that the server had no room for this round's admissions `times` times, at WARN once a
    /// [`REFUSAL_LOG_INTERVAL`] and at DEBUG between: while a long transaction keeps the server's
    /// predicate-lock table full, every round of every replica meets it.
    fn say_short_of_resources(&self, times: u32, exhausted: bool, error: &str) {
        let now = Instant::now();
        let mut said = self.shortage_said.lock().unwrap_or_else(|p| p.into_inner());
        let loud = said.is_none_or(|at| now.duration_since(at) >= REFUSAL_LOG_INTERVAL);
        if loud {
            *said = Some(now);
        }
        drop(said);
        let outcome = if exhausted {
            "the server still had no room after the pauses: its rows were tried one at a time, \
             and those it had no room for given back for a later round"
        } else {
            "tried again with the same rows after a pause, and admitted"
        };
        if loud {
            tracing::warn!(times, %error, "the server had no room for an admission: {outcome}");
        } else {
            tracing::debug!(times, %error, "the server had no room for an admission: {outcome}");
        }
    }

    fn lock_owed(&self) -> std::sync::MutexGuard<'_, Owed> {
        self.owed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Settles what an earlier round that lost its connection left owed, on this round's
    /// connection: each admission whose run exists (or whose advance is there) is counted as the
    /// admission it was, and every claim of them still held is released at once, fenced, so
    /// that a connection lost mid-round costs its rows a reconnect, not a lease. Left owed (for the
    /// next round) when this connection cannot tell either.
    ///
    /// Bounded by [`GIVE_BACK_TIMEOUT`]: the old connection's backend may still hold the rows'
    /// locks (until the server notices it is gone), and waiting for them would hold the round
    /// until its lease cancels it. Past the bound the statement is cancelled and what is owed
    /// stays owed; an error means the connection may still be busy with it, and the round fails.
    async fn settle_owed(&self, client: &Lent, report: &mut RoundReport) -> Result<(), StoreError> {
        // What is owed stays in the book until settled: a round dropped while settling (its
        // lease ran out) leaves it for the next one.
        let owed = self.lock_owed().clone();
        if owed.admissions.is_empty() && owed.releases.is_empty() {
            return Ok(());
        }
        let settling = self.settle_and_release(client, &owed, report);
        tokio::pin!(settling);
        if tokio::time::timeout(GIVE_BACK_TIMEOUT, &mut settling)
            .await
            .is_ok()
        {
            return Ok(());
        }
        // Still waiting, most likely for a lock the lost connection's backend holds: cancelled,
        // the statement fails at once and the connection is free for the round.
        match tokio::time::timeout(GIVE_BACK_TIMEOUT, client.canceller().cancel()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "could not cancel the settlement in flight"),
            Err(_) => tracing::warn!("could not cancel the settlement in flight: no answer"),
        }
        match tokio::time::timeout(GIVE_BACK_TIMEOUT, &mut settling).await {
            Ok(()) => Ok(()),
            Err(_) => {
                self.connection_busy.store(true, Ordering::Relaxed);
                Err(StoreError::TimedOut(format!(
                    "settling the claims of a round that lost its connection did not end within \
                     {GIVE_BACK_TIMEOUT:?}, nor once cancelled; the next round tries again"
                )))
            }
        }
    }

    /// [`Self::settle_owed`]'s work, unbounded: removes from the book what it settled, and no
    /// more.
    async fn settle_and_release(&self, client: &Lent, owed: &Owed, report: &mut RoundReport) {
        let admissions: Vec<Admission<'_>> = owed
            .admissions
            .iter()
            .map(|a| Admission {
                row: &a.row,
                decision: a.decision,
                run: a.run.clone(),
            })
            .collect();
        let settled = if admissions.is_empty() {
            Ok(Vec::new())
        } else {
            run_in_transaction(client, self.store.schema(), Begin::ReadOnly, |c| {
                Box::pin(qlsched_store::admit::settle(c, &admissions))
            })
            .await
        };
        let settled = match settled {
            Ok(settled) => settled,
            Err(error) => {
                tracing::warn!(%error, "could not settle the claims of a round that lost its connection; the next round tries again");
                return;
            }
        };
        // Settled: counted below, so out of the book (only a round adds to it, after this, at
        // its end).
        let mut releases = {
            let mut book = self.lock_owed();
            let settled = owed.admissions.len().min(book.admissions.len());
            book.admissions.drain(..settled);
            let owed_releases = owed.releases.len().min(book.releases.len());
            book.releases.drain(..owed_releases).collect::<Vec<_>>()
        };
        let (mut admitted, mut lost) = (0, 0);
        // Their next occurrences are the claim's to report; these only never wake a round early.
        let later = Instant::now() + self.config.cadence;
        for (admission, settlement) in admissions.iter().zip(settled) {
            match settlement.outcome {
                outcome @ (AdmissionOutcome::Admitted(_) | AdmissionOutcome::Advanced) => {
                    admitted += 1;
                    report.account(admission, outcome, later, true);
                }
                AdmissionOutcome::FenceLost => lost += 1,
                _ if settlement.claim_held => releases.push(ReleaseRequest::from(admission.row)),
                _ => {}
            }
        }
        // Owed again until given back: if this is cut short (bounded, or the round dropped), the
        // next round gives them back.
        self.lock_owed()
            .releases
            .splice(0..0, releases.iter().cloned());
        let released = give_back(
            client,
            self.store.sender(),
            &releases,
            &mut report.round_trips,
        )
        .await;
        match released {
            Ok(released) => {
                let mut book = self.lock_owed();
                let given = releases.len().min(book.releases.len());
                book.releases.drain(..given);
                drop(book);
                report.released += released.len();
                tracing::warn!(
                    committed = admitted,
                    released = released.len(),
                    taken_over = lost,
                    "the claims of a round that lost its connection were settled on reconnecting"
                );
            }
            Err(error) => {
                tracing::warn!(%error, "could not give back the claims of a round that lost its connection; the next round tries again");
            }
        }
    }

    fn lock_claims(&self) -> std::sync::MutexGuard<'_, ClaimBook> {
        self.claims
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Moves a claim of the round on `event` ([`ClaimState::next`]). A transition the table
    /// refuses is a fault of the round's code: said, and the claim left as it was.
    fn transition(&self, index: usize, event: ClaimEvent<'_>) {
        if let Err(error) = self.lock_claims().apply(index, event) {
            tracing::error!(%error, "claim bookkeeping refused a transition");
        }
    }
}
