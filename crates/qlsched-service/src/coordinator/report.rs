//! What a round reports: counts, timings, and each admitted run, for the lifecycle's observers
//! (the demo, `top`, the bench, the metrics) and the replica's summary.

use std::time::{Duration, Instant};

use serde::Serialize;

use qlsched_core::Decision;
use qlsched_store::{Admission, AdmissionOutcome, RunIdentity, Shortage};

/// What one round did. Counts are of claimed rows; durations are wall time on this replica.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RoundReport {
    pub owner: String,
    /// The batch this round claimed with (`core::batch`): the claim was full when `claimed`
    /// reached it.
    pub batch: u16,
    pub claimed: usize,
    pub fired: usize,
    pub initialized: usize,
    pub skipped: usize,
    /// Misfire records written: decisions that passed occurrences over (beyond the grace).
    pub misfires: usize,
    /// Occurrences inside those records (a lower bound where a record's count is).
    pub occurrences_passed_over: u64,
    /// Each of those records' policy, reason and occurrences, for metrics labelled by them.
    #[serde(skip)]
    pub passed_over: Vec<PassedOver>,
    /// Claims given back: rows not due after all, and admissions that did not commit.
    pub released: usize,
    pub fence_lost: usize,
    /// Admissions whose claims held and whose definitions no longer admit them (a trigger or
    /// task changed, the project not active, a corrupt execution revision digest): nothing
    /// written, the claims left to expire.
    pub definition_refused: usize,
    /// Admissions the database refused with an error of the row's own (a constraint, a user
    /// trigger raising): their claims are left to expire, which paces the next
    /// attempt to one a lease, each is recorded for `inspect trigger`, and the other rows of the
    /// round are admitted regardless. The round counts as failed (back-off, a smaller batch).
    pub rejected: usize,
    /// The SQLSTATE of each of those refusals, for the metric labelled by it.
    #[serde(skip)]
    pub rejected_sqlstates: Vec<String>,
    /// What failed in a round that otherwise finished: its batch refused by the server (then
    /// admitted row by row), or else the first row refused on its own, named with its trigger
    /// and SQLSTATE. A round with one counts as failed (the registry's failed rounds and last
    /// error, the back-off, the batch), though its other rows were admitted.
    #[serde(skip)]
    pub failure: Option<String>,
    /// Why the batch fell back when the server refused it (`AdmitStats::batch_error`).
    #[serde(skip)]
    pub batch_error: Option<String>,
    /// Rows whose stored cron could not be evaluated: left claimed until the lease expires, which
    /// paces the retry, and logged.
    pub undecidable: usize,
    /// Rows admitted on their own after their batch failed that could not be settled (retries
    /// ran out, or the database went away): their claims are released when the database can be
    /// reached, and the rows are claimed again by a later round.
    pub unsettled: usize,
    /// Admission transactions the server had no room for (SQLSTATE class 53: its predicate-lock
    /// table full, memory, disk), as the admission met them.
    #[serde(skip)]
    pub shortage: Shortage,
    pub transactions: u32,
    pub serialization_retries: u32,
    pub batch_fallbacks: u32,
    /// Exchanges with the server this round waited on (claim, admission, release), counted by
    /// the store where the statements are sent.
    pub round_trips: u32,
    #[serde(serialize_with = "as_ms")]
    pub claim_time: Duration,
    #[serde(serialize_with = "as_ms")]
    pub admit_time: Duration,
    /// The occurrences this round admitted.
    pub admitted: Vec<AdmittedRun>,
    /// When, on this replica's monotonic clock, the next occurrence falls due: the earliest of
    /// the cursors this round wrote and the next one the database reported at the claim. In the
    /// past when a row is still due (a replica catching up). `None` when the round learned
    /// nothing (it failed to claim).
    #[serde(skip)]
    pub next_due_at: Option<Instant>,
    /// Database time of this round's claim (`None` when it failed to claim, or the clock read
    /// beside the claim failed): the minute of `replica_minutes` its figures count in.
    #[serde(skip)]
    pub claimed_at_ms: Option<i64>,
}

impl RoundReport {
    /// Counts one admission's outcome (and says what the log must), `due_at` being when its
    /// next occurrence falls due on this replica's clock. `say` is false for a refusal or an
    /// unsettled admission already logged for this trigger lately: it is then logged at DEBUG, so
    /// a trigger failing at every attempt is one line an interval, not one a round.
    pub(crate) fn account(
        &mut self,
        admission: &Admission<'_>,
        outcome: AdmissionOutcome,
        due_at: Instant,
        say: bool,
    ) {
        if matches!(
            outcome,
            AdmissionOutcome::Admitted(_) | AdmissionOutcome::Advanced
        ) {
            self.next_due_at = Some(self.next_due_at.map_or(due_at, |at| at.min(due_at)));
            if let Some(span) = admission.decision.passed_over() {
                self.misfires += 1;
                self.occurrences_passed_over += span.count;
                self.passed_over.push(PassedOver {
                    policy: admission.row.definition.misfire_policy,
                    reason: span.reason,
                    occurrences: span.count,
                });
                tracing::warn!(
                    trigger = %admission.row.name(),
                    revision = admission.row.trigger_revision,
                    policy = %admission.row.definition.misfire_policy,
                    first = %qlsched_core::time::utc(span.first_ms),
                    last = %qlsched_core::time::utc(span.last_ms),
                    occurrences = span.count,
                    exact = span.count_exact,
                    "misfire: occurrences later than the grace passed over"
                );
            }
        }
        match outcome {
            AdmissionOutcome::Admitted(run) => {
                self.fired += 1;
                self.admitted.push(AdmittedRun {
                    project_id: admission.row.project_id.clone(),
                    trigger_id: admission.row.trigger_id.clone(),
                    run,
                    misfired: matches!(admission.decision, Decision::Fire { misfired: true, .. }),
                    claimed_at_ms: admission.row.claimed_at_ms,
                });
            }
            AdmissionOutcome::Advanced => match admission.decision {
                Decision::Initialize { .. } => self.initialized += 1,
                _ => self.skipped += 1,
            },
            AdmissionOutcome::FenceLost => {
                self.fence_lost += 1;
                tracing::warn!(trigger = %admission.row.name(), "claim fence lost before admission; nothing written");
            }
            AdmissionOutcome::DefinitionRefused { reason } => {
                self.definition_refused += 1;
                if say {
                    tracing::error!(trigger = %admission.row.name(), %reason,
                        "definition refused at admission (the claim still held): nothing written, the claim is left to expire");
                } else {
                    tracing::debug!(trigger = %admission.row.name(), %reason, "definition refused at admission again");
                }
            }
            AdmissionOutcome::Rejected { sqlstate, reason } => {
                self.rejected += 1;
                if self.failure.is_none() {
                    self.failure = Some(format!(
                        "the admission of {} was refused (SQLSTATE {sqlstate}): {reason}",
                        admission.row.name()
                    ));
                }
                if say {
                    tracing::error!(trigger = %admission.row.name(), %sqlstate, %reason,
                        "the database refused this admission; nothing written, the claim is left to expire (`qlsched inspect trigger` shows it)");
                } else {
                    tracing::debug!(trigger = %admission.row.name(), %sqlstate, %reason, "admission refused again");
                }
                self.rejected_sqlstates.push(sqlstate);
            }
            AdmissionOutcome::Unsettled { reason } => {
                self.unsettled += 1;
                if self.failure.is_none() {
                    self.failure = Some(format!(
                        "the admission of {} was not settled: {reason}",
                        admission.row.name()
                    ));
                }
                if say {
                    tracing::warn!(trigger = %admission.row.name(), %reason,
                        "admission not settled; the claim is given back for a later round");
                } else {
                    tracing::debug!(trigger = %admission.row.name(), %reason, "admission not settled again");
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AdmittedRun {
    pub project_id: String,
    pub trigger_id: String,
    #[serde(flatten)]
    pub run: RunIdentity,
    pub misfired: bool,
    /// Database time of the claim the run was admitted under (the schedule lag's start point is
    /// `run.scheduled_for_ms`, both on the database clock).
    #[serde(skip)]
    pub claimed_at_ms: i64,
}

/// One misfire record a round wrote: its policy, reason and occurrences passed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassedOver {
    pub policy: qlsched_core::MisfirePolicy,
    pub reason: qlsched_core::MisfireReason,
    pub occurrences: u64,
}

fn as_ms<S: serde::Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64() * 1000.0)
}
