//! Backfill (docs/DESIGN.md §4.10): a trigger's past cron occurrences in a window that have no
//! run, each admitted under its regular cron key, in bounded transactions
//! (`store::control::backfill`). A rerun admits nothing twice.
//!
//! Two steps, so that a caller can ask a person between them: [`Backfill::plan`] reads the
//! trigger and computes the window's occurrences (writing nothing); [`Backfill::run`] admits
//! them a chunk a transaction, saying how far it got after each, and stops between two
//! transactions, never inside one, once its [`StopToken`] is tripped.
//!
//! Occurrences from before the trigger was first published are left out and counted unless the
//! request asks for them: a window typed a little too wide (from yesterday, for a trigger
//! published this morning) must not quietly admit runs for a time the trigger never had.

use deadpool_postgres::Object;

use crate::stop::StopToken;
use qlsched_core::time::utc;
use qlsched_core::{CoreError, CronSchedule, TriggerName};
use qlsched_store::control::{self, BackfillBatch, Target};
use qlsched_store::{Store, StoreError};

/// Occurrences admitted per transaction: short enough that a replica waiting on the row lock
/// (the claim skips it) loses well under a second, large enough to cover a day of minutes in
/// three transactions.
pub const BATCH: usize = 500;

/// What to backfill.
#[derive(Debug, Clone)]
pub struct BackfillRequest {
    pub trigger: TriggerName,
    /// The window's first instant, included, in epoch milliseconds.
    pub from_ms: i64,
    /// The window's last instant, included; must be before the database's now.
    pub to_ms: i64,
    /// Admit the occurrences from before the trigger was first published too.
    pub before_creation: bool,
    /// Refuse a window with more occurrences than this.
    pub max: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    /// The request cannot be carried out as asked (a window backwards, in the future, or
    /// holding more than its maximum); nothing was written.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl BackfillRequest {
    /// The checks that need no database: a window that ends before it starts.
    pub fn check(&self) -> Result<(), BackfillError> {
        if self.from_ms > self.to_ms {
            return Err(BackfillError::Refused(format!(
                "--from {} is after --to {}",
                utc(self.from_ms),
                utc(self.to_ms)
            )));
        }
        Ok(())
    }
}

/// A planned backfill: the trigger as read, and the occurrences to admit.
pub struct Backfill {
    client: Object,
    store: Store,
    pub request: BackfillRequest,
    pub target: Target,
    /// The first instant admitted: the request's, or the trigger's first publication if later
    /// (unless the request asks for earlier occurrences).
    pub from_ms: i64,
    /// Occurrences in the window from before the first publication, left out (counted up to
    /// the request's maximum: past it the number is only a lower bound, and says enough).
    pub before_creation: u64,
    /// The occurrences to admit, ascending.
    pub occurrences: Vec<i64>,
}

/// How far a backfill has got, after each transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Occurrences settled so far (admitted, found with a run, or left to the scheduler).
    pub done: u64,
    pub total: u64,
    pub admitted: u64,
}

/// What a backfill did.
#[derive(Debug, Clone, Default)]
pub struct BackfillOutcome {
    pub total: BackfillBatch,
    pub transactions: u64,
    /// Stopped by its token between transactions; a rerun continues.
    pub interrupted: bool,
}

impl Backfill {
    /// Reads the trigger (on a connection kept for [`Backfill::run`]) and computes the
    /// window's occurrences; writes nothing.
    pub async fn plan(store: &Store, request: BackfillRequest) -> Result<Self, BackfillError> {
        request.check()?;
        let client = store.client().await?;
        let target = control::read_target(&client, store.schema(), &request.trigger).await?;
        if request.to_ms >= target.now_ms {
            return Err(BackfillError::Refused(format!(
                "--to {} is not in the past (the database's now is {}): future occurrences are \
                 the scheduler's",
                utc(request.to_ms),
                utc(target.now_ms)
            )));
        }
        let schedule = CronSchedule::parse(&target.cron_expr, &target.time_zone)?;
        let cap = usize::try_from(request.max).unwrap_or(usize::MAX);
        let from_ms = if request.before_creation {
            request.from_ms
        } else {
            request.from_ms.max(target.created_at_ms)
        };
        let before_creation = if from_ms > request.from_ms {
            let last = from_ms.min(request.to_ms.saturating_add(1)) - 1;
            schedule
                .count_between(request.from_ms, last, request.max)?
                .0
        } else {
            0
        };
        let occurrences = if from_ms <= request.to_ms {
            schedule.occurrences_between(
                from_ms,
                request.to_ms.saturating_add(1),
                cap.saturating_add(1),
            )?
        } else {
            Vec::new()
        };
        if let Some(refusal) = control::before_horizon(&target, &occurrences) {
            return Err(refusal.into());
        }
        if occurrences.len() > cap {
            return Err(BackfillError::Refused(format!(
                "the window holds more than --max {} occurrences of {} ({}); narrow it or raise \
                 --max",
                request.max, request.trigger, target.cron_expr
            )));
        }
        Ok(Backfill {
            client,
            store: store.clone(),
            request,
            target,
            from_ms,
            before_creation,
            occurrences,
        })
    }

    /// Admits the planned occurrences, [`BATCH`] a transaction, calling `progress` after each;
    /// `stop` ends it between two transactions. With `dry_run` every transaction rolls back.
    pub async fn run(
        &self,
        actor: &str,
        dry_run: bool,
        stop: &StopToken,
        mut progress: impl FnMut(Progress),
    ) -> Result<BackfillOutcome, StoreError> {
        let mut outcome = BackfillOutcome::default();
        for chunk in self.occurrences.chunks(BATCH) {
            if stop.reason().is_some() {
                outcome.interrupted = true;
                break;
            }
            let batch = control::backfill(
                &self.client,
                self.store.schema(),
                &self.request.trigger,
                self.target.trigger_revision,
                chunk,
                actor,
                dry_run,
            )
            .await?;
            outcome.transactions += 1;
            let total = &mut outcome.total;
            total.admitted += batch.admitted;
            total.existing += batch.existing;
            total.left_to_scheduler += batch.left_to_scheduler;
            progress(Progress {
                done: total.admitted + total.existing + total.left_to_scheduler,
                total: self.occurrences.len() as u64,
                admitted: total.admitted,
            });
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(from_ms: i64, to_ms: i64) -> BackfillRequest {
        BackfillRequest {
            trigger: TriggerName::new("p", "t"),
            from_ms,
            to_ms,
            before_creation: false,
            max: 10,
        }
    }

    #[test]
    fn a_window_that_ends_before_it_starts_is_refused_before_any_connection() {
        assert!(
            request(1_000, 1_000).check().is_ok(),
            "one instant is a window"
        );
        let refused = request(1_001, 1_000).check();
        assert!(
            matches!(&refused, Err(BackfillError::Refused(text)) if text.starts_with("--from ")),
            "{refused:?}"
        );
    }
}
