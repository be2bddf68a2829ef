//! The claims of the round in flight, each in one [`ClaimState`], with every transition written
//! in [`ClaimState::next`]. The book outlives the round's future: a stop that cannot wait for the
//! round (or a round cut off by its lease) reads it to give back, or account for, what the round
//! still held (docs/DESIGN.md §4.9).

use std::collections::HashSet;

use qlsched_store::{AdmissionOutcome, ReleaseRequest};

/// Where one claim of a round stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimState {
    /// Claimed and not settled yet (being decided or admitted): a stop that cannot wait for the
    /// round gives it back.
    Held,
    /// Not due after all, or its admission did not settle: given back at the end of the round,
    /// or by a stop that cannot wait for it.
    Returning,
    /// Admitted or advanced: the admission spent the claim.
    Spent,
    /// The fence no longer held (lost before the admission, or gone by the give-back): the row is
    /// someone else's.
    Lost,
    /// Left to expire with its lease: undecidable, refused by the definition or the database,
    /// its outcome unknowable, or the give-back failed. Nothing is done with it any more.
    Expiring,
    /// Given back.
    GivenBack,
}

/// What happens to a claim during a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimEvent<'a> {
    /// The core decided it is not due.
    NotDue,
    /// The core could not decide (a definition it cannot parse).
    Undecidable,
    /// Its admission's outcome, known or learnt on a fresh connection.
    Admission(&'a AdmissionOutcome),
    /// What became of its admission cannot be learnt (the database unreachable): every claim
    /// still open is left to its lease.
    Abandoned,
    /// The give-back answered: `released` when this claim was among those released.
    GaveBack { released: bool },
    /// The give-back failed: the claim expires with its lease.
    GiveBackFailed,
}

/// A transition the round's code should never ask for: a claim settled twice, or given back
/// before it was decided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("claim {index}: no transition from {from:?} on {event}")]
pub struct TransitionError {
    pub index: usize,
    pub from: Option<ClaimState>,
    pub event: String,
}

impl ClaimState {
    /// The one table of transitions. `None` for an event that cannot happen in this state.
    pub fn next(self, event: ClaimEvent<'_>) -> Option<ClaimState> {
        use ClaimEvent as E;
        use ClaimState as S;
        Some(match (self, event) {
            (S::Held, E::NotDue) => S::Returning,
            (S::Held, E::Undecidable) => S::Expiring,
            (S::Held, E::Admission(outcome)) => match outcome {
                AdmissionOutcome::Admitted(_) | AdmissionOutcome::Advanced => S::Spent,
                AdmissionOutcome::FenceLost => S::Lost,
                AdmissionOutcome::DefinitionRefused { .. } | AdmissionOutcome::Rejected { .. } => {
                    S::Expiring
                }
                AdmissionOutcome::Unsettled { .. } => S::Returning,
            },
            (S::Held | S::Returning, E::Abandoned) => S::Expiring,
            // Abandoning a round leaves what it already settled as it is.
            (settled, E::Abandoned) => settled,
            (S::Returning, E::GaveBack { released: true }) => S::GivenBack,
            (S::Returning, E::GaveBack { released: false }) => S::Lost,
            (S::Returning, E::GiveBackFailed) => S::Expiring,
            _ => return None,
        })
    }

    /// Whether the replica still holds the claim: what a stop gives back.
    pub fn is_held(self) -> bool {
        matches!(self, ClaimState::Held | ClaimState::Returning)
    }
}

/// The claims a round took and not yet cleared, in claim order.
#[derive(Debug, Default)]
pub struct ClaimBook {
    claims: Vec<(ReleaseRequest, ClaimState)>,
}

impl ClaimBook {
    /// Records newly taken claims, all [`ClaimState::Held`]; returns the index of the first,
    /// which [`ClaimBook::apply`] counts from.
    pub fn hold(&mut self, requests: impl IntoIterator<Item = ReleaseRequest>) -> usize {
        let first = self.claims.len();
        self.claims
            .extend(requests.into_iter().map(|r| (r, ClaimState::Held)));
        first
    }

    /// Moves claim `index` on `event`; refused (and the claim left as it was) when the
    /// transition is not one of [`ClaimState::next`].
    pub fn apply(
        &mut self,
        index: usize,
        event: ClaimEvent<'_>,
    ) -> Result<ClaimState, TransitionError> {
        let refused = |from| TransitionError {
            index,
            from,
            event: format!("{event:?}"),
        };
        let Some((_, state)) = self.claims.get_mut(index) else {
            return Err(refused(None));
        };
        let next = state.next(event).ok_or_else(|| refused(Some(*state)))?;
        *state = next;
        Ok(next)
    }

    /// Every open claim left to its lease.
    pub fn abandon(&mut self) {
        for (_, state) in &mut self.claims {
            *state = state.next(ClaimEvent::Abandoned).unwrap_or(*state);
        }
    }

    /// The claims to give back at the end of the round, in claim order.
    pub fn returning(&self) -> Vec<ReleaseRequest> {
        self.claims
            .iter()
            .filter(|(_, state)| *state == ClaimState::Returning)
            .map(|(request, _)| request.clone())
            .collect()
    }

    /// What the give-back of [`ClaimBook::returning`] did: `Ok(released)` names the rows it
    /// released, `Err(())` when it failed.
    pub fn gave_back(&mut self, released: Result<&[(String, String)], ()>) {
        let released: Option<HashSet<(&str, &str)>> = released
            .ok()
            .map(|keys| keys.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect());
        for (request, state) in &mut self.claims {
            if *state != ClaimState::Returning {
                continue;
            }
            let event = match &released {
                Some(keys) => ClaimEvent::GaveBack {
                    released: keys.contains(&(&request.project_id, &request.trigger_id)),
                },
                None => ClaimEvent::GiveBackFailed,
            };
            *state = state.next(event).unwrap_or(*state);
        }
    }

    /// Forgets every claim, handing back those still held, in claim order: a stop gives them
    /// back, a round cut off by its lease says what became of them.
    pub fn take_held(&mut self) -> Vec<ReleaseRequest> {
        std::mem::take(&mut self.claims)
            .into_iter()
            .filter(|(_, state)| state.is_held())
            .map(|(request, _)| request)
            .collect()
    }

    /// Forgets every claim: the round is over.
    pub fn clear(&mut self) {
        self.claims.clear();
    }

    /// The state of claim `index`.
    pub fn state(&self, index: usize) -> Option<ClaimState> {
        self.claims.get(index).map(|(_, state)| *state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(trigger: &str) -> ReleaseRequest {
        ReleaseRequest {
            project_id: "p".to_owned(),
            trigger_id: trigger.to_owned(),
            owner: "o".to_owned(),
            token: uuid::Uuid::nil(),
            version: 1,
        }
    }

    fn book(triggers: &[&str]) -> ClaimBook {
        let mut book = ClaimBook::default();
        assert_eq!(book.hold(triggers.iter().map(|t| request(t))), 0);
        book
    }

    fn unsettled() -> AdmissionOutcome {
        AdmissionOutcome::Unsettled {
            reason: "r".to_owned(),
        }
    }

    fn triggers(requests: &[ReleaseRequest]) -> Vec<&str> {
        requests.iter().map(|r| r.trigger_id.as_str()).collect()
    }

    #[test]
    fn every_admission_outcome_settles_a_held_claim_as_the_round_treats_it() {
        use AdmissionOutcome as O;
        let reason = || "r".to_owned();
        let cases = [
            (O::Advanced, ClaimState::Spent),
            (O::FenceLost, ClaimState::Lost),
            (
                O::DefinitionRefused { reason: reason() },
                ClaimState::Expiring,
            ),
            (
                O::Rejected {
                    sqlstate: "P0001".to_owned(),
                    reason: reason(),
                },
                ClaimState::Expiring,
            ),
            (unsettled(), ClaimState::Returning),
        ];
        for (outcome, expected) in cases {
            assert_eq!(
                ClaimState::Held.next(ClaimEvent::Admission(&outcome)),
                Some(expected),
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn a_claim_is_settled_once_and_never_given_back_before_it_is_decided() {
        let mut book = book(&["a", "b"]);
        assert_eq!(book.apply(0, ClaimEvent::NotDue), Ok(ClaimState::Returning));
        // Decided twice, or admitted after it was found not due: refused, left as it was.
        let twice = book.apply(0, ClaimEvent::NotDue);
        assert_eq!(twice.map_err(|e| e.from), Err(Some(ClaimState::Returning)));
        assert!(book.apply(0, ClaimEvent::Admission(&unsettled())).is_err());
        assert_eq!(book.state(0), Some(ClaimState::Returning));
        // A held claim is not given back before the round decided what to do with it.
        assert!(
            book.apply(1, ClaimEvent::GaveBack { released: true })
                .is_err()
        );
        assert!(book.apply(1, ClaimEvent::GiveBackFailed).is_err());
        assert_eq!(book.state(1), Some(ClaimState::Held));
        // A claim the book does not have.
        assert_eq!(
            book.apply(2, ClaimEvent::Undecidable).map_err(|e| e.from),
            Err(None)
        );
    }

    #[test]
    fn a_settled_claim_takes_no_further_outcome() {
        for settled in [
            ClaimState::Spent,
            ClaimState::Lost,
            ClaimState::Expiring,
            ClaimState::GivenBack,
        ] {
            for event in [
                ClaimEvent::NotDue,
                ClaimEvent::Undecidable,
                ClaimEvent::Admission(&AdmissionOutcome::Advanced),
                ClaimEvent::GaveBack { released: true },
                ClaimEvent::GiveBackFailed,
            ] {
                assert_eq!(settled.next(event), None, "{settled:?} on {event:?}");
            }
            assert_eq!(settled.next(ClaimEvent::Abandoned), Some(settled));
        }
    }

    #[test]
    fn a_stop_gives_back_only_what_is_still_held() {
        let mut book = book(&["held", "not-due", "spent", "undecidable", "unsettled"]);
        book.apply(1, ClaimEvent::NotDue).ok();
        book.apply(2, ClaimEvent::Admission(&AdmissionOutcome::Advanced))
            .ok();
        book.apply(3, ClaimEvent::Undecidable).ok();
        book.apply(4, ClaimEvent::Admission(&unsettled())).ok();
        assert_eq!(triggers(&book.returning()), ["not-due", "unsettled"]);
        assert_eq!(
            triggers(&book.take_held()),
            ["held", "not-due", "unsettled"]
        );
        assert!(book.take_held().is_empty(), "taken once");
    }

    #[test]
    fn an_abandoned_round_leaves_its_open_claims_to_their_leases() {
        let mut book = book(&["held", "not-due", "spent"]);
        book.apply(1, ClaimEvent::NotDue).ok();
        book.apply(2, ClaimEvent::Admission(&AdmissionOutcome::Advanced))
            .ok();
        book.abandon();
        assert_eq!(book.state(0), Some(ClaimState::Expiring));
        assert_eq!(book.state(1), Some(ClaimState::Expiring));
        assert_eq!(book.state(2), Some(ClaimState::Spent));
        assert!(book.take_held().is_empty());
    }

    #[test]
    fn a_give_back_settles_each_returning_claim_by_what_it_released() {
        let mut book = book(&["a", "b", "c"]);
        book.apply(0, ClaimEvent::NotDue).ok();
        book.apply(1, ClaimEvent::NotDue).ok();
        book.gave_back(Ok(&[("p".to_owned(), "a".to_owned())]));
        assert_eq!(book.state(0), Some(ClaimState::GivenBack));
        assert_eq!(
            book.state(1),
            Some(ClaimState::Lost),
            "taken over meanwhile"
        );
        assert_eq!(book.state(2), Some(ClaimState::Held), "not returning");

        let mut failed = self::book(&["a"]);
        failed.apply(0, ClaimEvent::NotDue).ok();
        failed.gave_back(Err(()));
        assert_eq!(failed.state(0), Some(ClaimState::Expiring));
    }

    #[test]
    fn claims_held_by_a_later_round_are_counted_from_their_own_first_index() {
        let mut book = book(&["left-by-a-panicked-round"]);
        assert_eq!(book.hold([request("next")]), 1);
        assert_eq!(book.apply(1, ClaimEvent::NotDue), Ok(ClaimState::Returning));
        assert_eq!(book.state(0), Some(ClaimState::Held));
    }
}
