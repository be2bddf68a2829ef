//! The scheduler's steps by hand (docs/DESIGN.md §5.1), without a command line: claim a row
//! (waiting for it if asked), take the core's decision on it, and admit, hold or give it back.
//! Claim, decision and admission are the replica's own (`coordinator::decide_claimed`,
//! `store::admit`), so what an operator sees is exactly what a replica would do. Asking the
//! person, and what a signal means while they are asked, are the caller's (`qlsched claim`).

use std::time::Duration;

use crate::coordinator::{decide_claimed, run_identity};
use crate::stop::StopToken;
use qlsched_core::{ClaimFence, ClaimOutcome, CoreError, CronSchedule, Decision, TriggerName};
use qlsched_store::operator::{self, Actor};
use qlsched_store::{AdmissionOutcome, ClaimedRow, RunIdentity, Store, StoreError};

/// How often a waiting claim tries again: often enough to take a row between two replica rounds.
pub const WAIT_RETRY: Duration = Duration::from_millis(50);

/// Why a claim was not taken.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stop was tripped while waiting for the row; nothing claimed.
    #[error("interrupted by {0} while waiting; nothing claimed")]
    Interrupted(&'static str),
}

/// What to claim, and for how long to wait for it.
#[derive(Debug, Clone, Copy)]
pub struct ClaimRequest<'a> {
    /// The row to claim; `None`: the next eligible row in claim order.
    pub target: Option<&'a TriggerName>,
    pub owner: &'a str,
    pub lease_ms: i64,
    /// Show what would be claimed, claiming nothing.
    pub dry_run: bool,
    /// While the row is not claimable, try again until it is or this much time has passed.
    pub wait: Option<Duration>,
}

/// Claims as `operator::claim` does; with `wait`, a row that is not eligible (not due, claimed,
/// locked by a replica at that moment) is tried again every [`WAIT_RETRY`] until it is claimed
/// or the wait is over (then `NothingEligible`, with the last reason), or `stop` is tripped. The
/// deadline is this machine's clock: it only paces the retries, no lease is compared with it
/// (docs/DESIGN.md §4.1).
pub async fn claim(
    store: &Store,
    request: ClaimRequest<'_>,
    stop: &StopToken,
) -> Result<ClaimedRow, ClaimError> {
    let deadline = request.wait.map(|wait| tokio::time::Instant::now() + wait);
    loop {
        let attempt = operator::claim(
            store,
            request.target,
            request.owner,
            request.lease_ms,
            request.dry_run,
        )
        .await;
        let (Err(StoreError::NothingEligible(reason)), Some(deadline)) = (&attempt, deadline)
        else {
            return Ok(attempt?);
        };
        if let Some(signal) = stop.reason() {
            return Err(ClaimError::Interrupted(signal));
        }
        if tokio::time::Instant::now() + WAIT_RETRY > deadline {
            return Err(StoreError::NothingEligible(format!(
                "{reason} (still after waiting {})",
                qlsched_core::format_duration(request.wait.unwrap_or_default())
            ))
            .into());
        }
        tokio::time::sleep(WAIT_RETRY).await;
    }
}

/// The core's decision on a claimed row, and the run identity when it fires.
pub fn decide(row: &ClaimedRow) -> Result<(Decision, Option<RunIdentity>), CoreError> {
    let schedule = CronSchedule::parse(&row.definition.cron_expr, &row.definition.time_zone)?;
    let decision = decide_claimed(row, &schedule)?;
    let run = run_identity(row, &decision);
    Ok((decision, run))
}

/// A row claimed by hand, with the core's decision on it.
#[derive(Debug, Clone)]
pub struct ManualClaim {
    pub row: ClaimedRow,
    pub decision: Decision,
    pub run: Option<RunIdentity>,
    /// Who acts, as written in the audit.
    pub actor: String,
}

/// What settling a manual claim did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub step: ClaimOutcome,
    pub run: Option<RunIdentity>,
}

/// The step a person (or a flag) chose for a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Keep the claim: the row stays claimed until it expires or is expired.
    Hold,
    /// Give it back.
    Release,
    /// Admit what the decision admits or advances.
    Admit,
}

impl ManualClaim {
    /// The decision on `row`, acted on as `actor`.
    pub fn decide(row: ClaimedRow, actor: &str) -> Result<Self, CoreError> {
        let (decision, run) = decide(&row)?;
        Ok(ManualClaim {
            row,
            decision,
            run,
            actor: actor.to_owned(),
        })
    }

    /// [`ManualClaim::decide`] for a row just claimed: a row the core cannot decide is given
    /// back at once (unless the claim was a dry run, which took nothing), so that it does not
    /// stay blocked; whether that give-back worked changes nothing of the error.
    pub async fn decide_or_give_back(
        store: &Store,
        row: ClaimedRow,
        actor: &str,
        dry_run: bool,
    ) -> Result<Self, CoreError> {
        match decide(&row) {
            Ok((decision, run)) => Ok(ManualClaim {
                row,
                decision,
                run,
                actor: actor.to_owned(),
            }),
            Err(error) => {
                if !dry_run {
                    let _ = give_back(store, &row, actor).await;
                }
                Err(error)
            }
        }
    }

    /// Gives the claim back under its fence; `FenceRejected` when it no longer holds.
    pub async fn give_back(&self, store: &Store) -> Result<ClaimFence, StoreError> {
        give_back(store, &self.row, &self.actor).await
    }

    /// Admits what the decision admits or advances, as a round does; a row not due after all is
    /// released, as a round releases it.
    pub async fn settle(&self, store: &Store) -> Result<Settled, StoreError> {
        let actor = Actor {
            name: &self.actor,
            reason: None,
        };
        if let Decision::NotDue { .. } = self.decision {
            operator::release_claim(store, &self.row.name(), self.row.fence.reference(), &actor)
                .await?;
            return Ok(Settled {
                step: ClaimOutcome::Released,
                run: None,
            });
        }
        let outcome =
            operator::admit_claimed(store, &self.row, self.decision, self.run.clone(), &actor)
                .await?;
        Ok(match outcome {
            AdmissionOutcome::Admitted(run) => Settled {
                step: ClaimOutcome::Admitted,
                run: Some(run),
            },
            _ => Settled {
                step: ClaimOutcome::Advanced,
                run: None,
            },
        })
    }

    /// Carries out `step`.
    pub async fn take_step(&self, store: &Store, step: Step) -> Result<Settled, StoreError> {
        match step {
            Step::Hold => Ok(Settled {
                step: ClaimOutcome::Held,
                run: None,
            }),
            Step::Release => {
                self.give_back(store).await?;
                Ok(Settled {
                    step: ClaimOutcome::Released,
                    run: None,
                })
            }
            Step::Admit => self.settle(store).await,
        }
    }
}

async fn give_back(store: &Store, row: &ClaimedRow, actor: &str) -> Result<ClaimFence, StoreError> {
    let actor = Actor {
        name: actor,
        reason: None,
    };
    operator::release_claim(store, &row.name(), row.fence.reference(), &actor).await
}
