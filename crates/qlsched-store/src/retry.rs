//! The one retry of a transaction that contention aborted: a serialization failure, a deadlock,
//! a cancelled statement or a lock wait that ran out ([`super::error::is_retryable`]; on the
//! paths that see a [`StoreError`], the first two as the [`StoreError::Conflict`] they become,
//! the last two being [`StoreError::TimedOut`], which is not tried again). The whole transaction
//! is tried again after a short pause that grows with each attempt and carries a random part
//! from the thread's RNG, so that two writers that collided do not collide again in step. A policy names how many attempts and how
//! long the pauses; each write path picks one: the admission [`ADMISSION`] (and [`RESOURCES`]
//! when the server had no room for it); `publish`, `pause`, `resume`, `fire`, `backfill`, a
//! manual claim, release and `expire` [`OPERATOR`]. A replica's claim and give-back are not
//! retried here: a failed round backs off and the next one claims again, and a claim not given
//! back expires with its lease.

use std::time::Duration;

use rand::RngExt;

use super::StoreError;

/// How often, and after what pauses, a transaction is tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The pause after attempt n is n × `step` ...
    pub step: Duration,
    /// ... plus a random part below `jitter`.
    pub jitter: Duration,
}

/// A replica's admission: short pauses, few attempts. A row that keeps conflicting is admitted on
/// its own after its batch, or given back for a later round.
pub const ADMISSION: Policy = Policy {
    attempts: 4,
    step: Duration::from_millis(4),
    jitter: Duration::from_millis(8),
};

/// A replica's admission that the server had no room for (SQLSTATE class 53,
/// [`super::error::is_out_of_resources`]): the same rows again after pauses of a tenth of a
/// second and more, about 1.5 s in all for one round's admission, so that a predicate-lock table
/// filled by a transaction beside the admission has time to drain, and no loop at full speed
/// while it does not. Bounded well inside a lease: the round then falls back to one row at a
/// time, and a row with no room either is given back.
pub const RESOURCES: Policy = Policy {
    attempts: 6,
    step: Duration::from_millis(100),
    jitter: Duration::from_millis(60),
};

/// An operator's write (`publish`, `pause`, `resume`, `fire`, `backfill`, a manual claim,
/// release and `expire`): it races the replicas on the same rows, and a person waits for it, so
/// it tries longer.
pub const OPERATOR: Policy = Policy {
    attempts: 8,
    step: Duration::from_millis(10),
    jitter: Duration::from_millis(16),
};

impl Policy {
    /// The pause after attempt `attempt` (1 for the first) failed.
    pub fn pause(&self, attempt: u32) -> Duration {
        let jitter = u64::try_from(self.jitter.as_micros()).unwrap_or(u64::MAX);
        let random = if jitter == 0 {
            0
        } else {
            rand::rng().random_range(0..jitter)
        };
        self.step.saturating_mul(attempt) + Duration::from_micros(random)
    }
}

/// What [`retry`] ended with, and how many attempts it made.
#[derive(Debug)]
pub struct Tried<T, E> {
    pub result: Result<T, Exhausted<E>>,
    pub attempts: u32,
}

/// Why [`retry`] gave up.
#[derive(Debug)]
pub enum Exhausted<E> {
    /// An error a retry does not resolve, on the attempt it happened.
    Failed(E),
    /// Every attempt failed with one that does; the last one's error.
    RanOut(E),
}

/// Runs `attempt` (given its number, 1 for the first) up to `policy.attempts` times while it
/// fails with an error `transient` accepts, pausing [`Policy::pause`] between attempts.
pub async fn retry<T, E, F>(
    policy: &Policy,
    transient: impl Fn(&E) -> bool,
    mut attempt: impl FnMut(u32) -> F,
) -> Tried<T, E>
where
    F: Future<Output = Result<T, E>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt(tries).await {
            Ok(value) => {
                return Tried {
                    result: Ok(value),
                    attempts: tries,
                };
            }
            Err(error) if transient(&error) && tries < policy.attempts => {
                tokio::time::sleep(policy.pause(tries)).await;
            }
            Err(error) => {
                let result = Err(if transient(&error) {
                    Exhausted::RanOut(error)
                } else {
                    Exhausted::Failed(error)
                });
                return Tried {
                    result,
                    attempts: tries,
                };
            }
        }
    }
}

/// [`retry`] for work whose contention errors are already [`StoreError::Conflict`]: the last
/// conflict, once every attempt had one, becomes [`StoreError::RetriesExhausted`] naming `what`.
pub async fn retry_conflicts<T, F>(
    policy: &Policy,
    what: &'static str,
    attempt: impl FnMut(u32) -> F,
) -> Result<T, StoreError>
where
    F: Future<Output = Result<T, StoreError>>,
{
    let tried = retry(
        policy,
        |error| matches!(error, StoreError::Conflict(_)),
        attempt,
    )
    .await;
    match tried.result {
        Ok(value) => Ok(value),
        Err(Exhausted::Failed(error)) => Err(error),
        Err(Exhausted::RanOut(StoreError::Conflict(last))) => Err(StoreError::RetriesExhausted {
            what,
            attempts: tried.attempts,
            last,
        }),
        Err(Exhausted::RanOut(other)) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_with_the_attempt_and_stay_below_the_jitter_bound() {
        let policy = OPERATOR;
        let pauses: Vec<Duration> = (0..200).map(|_| policy.pause(3)).collect();
        assert!(pauses.iter().all(|p| *p >= Duration::from_millis(30)));
        assert!(pauses.iter().all(|p| *p < Duration::from_millis(46)));
        // A real RNG: 200 draws below 16 ms in microseconds are not all the same.
        let first = pauses[0];
        assert!(pauses.iter().any(|p| *p != first), "{pauses:?}");
    }

    #[tokio::test]
    async fn a_transient_error_is_retried_until_the_attempts_run_out() {
        let policy = Policy {
            attempts: 3,
            step: Duration::ZERO,
            jitter: Duration::ZERO,
        };
        let tried = retry(
            &policy,
            |e: &&str| *e == "conflict",
            |_| async { Err::<(), _>("conflict") },
        )
        .await;
        assert_eq!(tried.attempts, 3);
        assert!(matches!(tried.result, Err(Exhausted::RanOut("conflict"))));
        let tried = retry(
            &policy,
            |e: &&str| *e == "conflict",
            |n| async move { if n < 2 { Err("conflict") } else { Ok(n) } },
        )
        .await;
        assert_eq!((tried.attempts, tried.result.ok()), (2, Some(2)));
        let tried = retry(
            &policy,
            |e: &&str| *e == "conflict",
            |_| async { Err::<(), _>("broken") },
        )
        .await;
        assert_eq!(tried.attempts, 1);
        assert!(matches!(tried.result, Err(Exhausted::Failed("broken"))));
    }

    #[tokio::test]
    async fn conflicts_that_run_out_name_the_work_and_the_last_conflict() {
        let policy = Policy {
            attempts: 2,
            step: Duration::ZERO,
            jitter: Duration::ZERO,
        };
        let error = retry_conflicts(&policy, "fire", |n| async move {
            Err::<(), _>(StoreError::Conflict(format!("conflict {n}")))
        })
        .await
        .expect_err("runs out");
        assert!(
            matches!(&error, StoreError::RetriesExhausted { what: "fire", attempts: 2, last }
                if last == "conflict 2"),
            "{error:?}"
        );
    }
}
