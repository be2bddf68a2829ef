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

use crate::stop::StopToken;
use qlsched_core::instant::InstantArg;
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
    /// The window's first instant, included: absolute, or relative to the database's now.
    pub from: InstantArg,
    /// The window's last instant, included; must be before the database's now. `now` itself
    /// (an offset of zero) is the last millisecond before it.
    pub to: InstantArg,
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
        // Two instants on the same footing compare without the database's now.
        let backwards = match (self.from, self.to) {
            (InstantArg::At(from), InstantArg::At(to)) => from > to,
            (InstantArg::FromNow(from), InstantArg::FromNow(to)) => from > to,
            _ => false,
        };
        if backwards {
            return Err(self.backwards(0));
        }
        Ok(())
    }

    fn backwards(&self, now_ms: i64) -> BackfillError {
        BackfillError::Refused(format!(
            "--from {} is after --to {}",
            utc(self.from.resolve(now_ms)),
            utc(self.to_ms(now_ms))
        ))
    }

    /// The window's last instant at `now_ms`: `now` is the millisecond before it.
    fn to_ms(&self, now_ms: i64) -> i64 {
        match self.to {
            InstantArg::FromNow(0) => now_ms - 1,
            to => to.resolve(now_ms),
        }
    }
}

/// A planned backfill: the trigger as read, and the occurrences to admit.
pub struct Backfill {
    /// Each transaction of the run takes a connection of its own from it, and gives it back
    /// once the transaction has ended (`store::control`): between two, the backfill holds none.
    store: Store,
    pub request: BackfillRequest,
    /// The window as asked, resolved against the database's now read with the trigger.
    pub requested_from_ms: i64,
    pub to_ms: i64,
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
    /// Reads the trigger and computes the window's occurrences; writes nothing.
    pub async fn plan(store: &Store, request: BackfillRequest) -> Result<Self, BackfillError> {
        request.check()?;
        let target = control::read_target(store, &request.trigger).await?;
        let (requested_from_ms, to_ms) = (
            request.from.resolve(target.now_ms),
            request.to_ms(target.now_ms),
        );
        if requested_from_ms > to_ms {
            return Err(request.backwards(target.now_ms));
        }
        if to_ms >= target.now_ms {
            return Err(BackfillError::Refused(format!(
                "--to {} is not in the past (the database's now is {}): future occurrences are \
                 the scheduler's",
                utc(to_ms),
                utc(target.now_ms)
            )));
        }
        let schedule = CronSchedule::parse(&target.cron_expr, &target.time_zone)?;
        let cap = usize::try_from(request.max).unwrap_or(usize::MAX);
        let from_ms = if request.before_creation {
            requested_from_ms
        } else {
            requested_from_ms.max(target.created_at_ms)
        };
        let before_creation = if from_ms > requested_from_ms {
            let last = from_ms.min(to_ms.saturating_add(1)) - 1;
            schedule
                .count_between(requested_from_ms, last, request.max)?
                .0
        } else {
            0
        };
        let occurrences = if from_ms <= to_ms {
            schedule.occurrences_between(from_ms, to_ms.saturating_add(1), cap.saturating_add(1))?
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
            store: store.clone(),
            request,
            requested_from_ms,
            to_ms,
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
                &self.store,
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
            from: InstantArg::At(from_ms),
            to: InstantArg::At(to_ms),
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
        let relative = BackfillRequest {
            from: InstantArg::FromNow(-1_000),
            to: InstantArg::FromNow(-2_000),
            ..request(0, 0)
        };
        assert!(relative.check().is_err(), "-1s is after -2s");
        let mixed = BackfillRequest {
            from: InstantArg::FromNow(-1_000),
            ..request(0, 0)
        };
        assert!(
            mixed.check().is_ok(),
            "compared once the database's now is read"
        );
        assert_eq!(
            BackfillRequest {
                to: InstantArg::FromNow(0),
                ..request(0, 0)
            }
            .to_ms(5_000),
            4_999,
            "`now` ends the window just before it"
        );
    }
}
