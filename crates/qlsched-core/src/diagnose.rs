//! Why a trigger is not firing (docs/DESIGN.md §5.1, `inspect trigger`): the first cause, in the
//! order the claim statement and the admission check them, decided from a plain record of facts
//! the store read at one database instant. Pure, so every cause and their order are tested
//! without a database; the store only gathers the facts.

use serde::Serialize;
use uuid::Uuid;

use super::manifest::ProjectStatus;
use super::time::{span, utc};

/// What the diagnosis looks at, as read at one database instant. Spans are database time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerFacts {
    pub project_status: ProjectStatus,
    pub enabled: bool,
    /// The trigger's current revision.
    pub trigger_revision: i64,
    /// The revision the schedule row is at.
    pub schedule_revision: i64,
    /// The execution revision the task pins, and whether its digest still matches its spec (the
    /// admission's own check).
    pub execution_revision_id: Uuid,
    pub digest_ok: bool,
    /// The operator's pause of the row, if any.
    pub pause: Option<PauseFacts>,
    /// The claim recorded on the row, valid or expired, if any.
    pub claim: Option<ClaimFacts>,
    /// Replicas live in the registry at this instant.
    pub live_replicas: i64,
    /// The cursor, and how far it is ahead of now (negative when overdue); `None` until the first
    /// claim initializes it.
    pub next_fire_at_ms: Option<i64>,
    pub due_in_ms: Option<i64>,
    /// The server error that refused the admission of the occurrence the row is still at, if
    /// one did: the row is claimed and refused once a lease until its cause goes away.
    pub refusal: Option<RefusalFacts>,
}

/// The server's refusal of an occurrence's admission (a trigger function raising on `runs`, a
/// resource run out), as a replica recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusalFacts {
    pub sqlstate: String,
    pub message: String,
    pub owner: String,
    pub since_ms: i64,
    pub failures: i64,
}

/// A pause (`qlsched pause`, docs/DESIGN.md §4.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseFacts {
    pub by: String,
    pub at_ms: i64,
    pub reason: Option<String>,
}

/// A claim on the row: who holds it and its lease left (negative once expired).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimFacts {
    pub owner: String,
    pub remaining_ms: i64,
    pub expired: bool,
}

/// Why a schedule row is parked (not claimable): the Rust statement of the one definition of
/// claimability, the SQL function `schedule_claimable` whose value every schedule row stores
/// (docs/DESIGN.md §3.1). A parked row is never due, overdue or lagging; a pause is named first,
/// since it is the cause an operator set on purpose, whatever else holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parked {
    Paused,
    ProjectSuspended,
    TriggerDisabled,
    /// The row's revision is not the trigger's (for the moment a publish takes).
    RevisionBehind,
}

/// The cause that parks the row, or `None` when it is claimable.
pub fn parked(facts: &TriggerFacts) -> Option<Parked> {
    if facts.pause.is_some() {
        Some(Parked::Paused)
    } else if facts.project_status != ProjectStatus::Active {
        Some(Parked::ProjectSuspended)
    } else if !facts.enabled {
        Some(Parked::TriggerDisabled)
    } else if facts.schedule_revision != facts.trigger_revision {
        Some(Parked::RevisionBehind)
    } else {
        None
    }
}

/// The first cause that keeps the trigger from firing now: what parks the row ([`parked`]), then
/// the order the admission checks: execution digest, a server error refusing its admission, claim,
/// cursor.
pub fn diagnose(facts: &TriggerFacts) -> Diagnosis {
    match (parked(facts), &facts.pause) {
        (Some(Parked::Paused), Some(pause)) => {
            return Diagnosis::Paused {
                by: pause.by.clone(),
                at_ms: pause.at_ms,
                reason: pause.reason.clone(),
            };
        }
        (Some(Parked::ProjectSuspended), _) => return Diagnosis::ProjectSuspended,
        (Some(Parked::TriggerDisabled), _) => return Diagnosis::TriggerDisabled,
        (Some(Parked::RevisionBehind), _) => {
            return Diagnosis::RevisionBehind {
                schedule_revision: facts.schedule_revision,
                trigger_revision: facts.trigger_revision,
            };
        }
        _ => {}
    }
    if !facts.digest_ok {
        return Diagnosis::DigestCorrupt {
            execution_revision_id: facts.execution_revision_id,
        };
    }
    if let Some(refusal) = &facts.refusal {
        return Diagnosis::AdmissionRefused {
            sqlstate: refusal.sqlstate.clone(),
            message: refusal.message.clone(),
            owner: refusal.owner.clone(),
            since_ms: refusal.since_ms,
            failures: refusal.failures,
        };
    }
    if let Some(claim) = &facts.claim {
        return if claim.expired {
            Diagnosis::ClaimExpired {
                owner: claim.owner.clone(),
                expired_ms_ago: -claim.remaining_ms,
                live_replicas: facts.live_replicas,
            }
        } else {
            Diagnosis::ClaimHeld {
                owner: claim.owner.clone(),
                remaining_ms: claim.remaining_ms,
            }
        };
    }
    match (facts.next_fire_at_ms, facts.due_in_ms) {
        (None, _) => Diagnosis::NotInitialized,
        (Some(next_fire_at_ms), Some(due_in_ms)) if due_in_ms > 0 => Diagnosis::NotDue {
            next_fire_at_ms,
            due_in_ms,
        },
        _ => Diagnosis::Eligible,
    }
}

/// Why a trigger is not firing, as far as the scheduler can tell; each cause with its fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum Diagnosis {
    SchemaNotReady {
        detail: String,
    },
    /// An operator paused the row (`qlsched pause`): named first, since it is the cause an
    /// operator set on purpose, whatever else holds.
    Paused {
        by: String,
        at_ms: i64,
        reason: Option<String>,
    },
    ProjectSuspended,
    TriggerDisabled,
    /// The schedule row is at an older revision than the trigger (publish resets it in the same
    /// transaction, so this means the row was edited by hand).
    RevisionBehind {
        schedule_revision: i64,
        trigger_revision: i64,
    },
    /// The pinned execution revision's digest does not match its spec: every admission is refused.
    DigestCorrupt {
        execution_revision_id: Uuid,
    },
    /// The database refuses the admission of the occurrence the row is at with an error of its
    /// own (a trigger function on `runs` raising, a constraint, a resource run out): the row is
    /// tried once a lease and refused each time until the cause goes away.
    AdmissionRefused {
        sqlstate: String,
        message: String,
        /// The replica refused last.
        owner: String,
        since_ms: i64,
        failures: i64,
    },
    ClaimHeld {
        owner: String,
        remaining_ms: i64,
    },
    ClaimExpired {
        owner: String,
        expired_ms_ago: i64,
        /// Replicas live in the registry now: none means nothing is running to take it.
        live_replicas: i64,
    },
    NotInitialized,
    NotDue {
        next_fire_at_ms: i64,
        due_in_ms: i64,
    },
    /// Nothing stops it: due and unclaimed, the next replica round takes it.
    Eligible,
}

impl Diagnosis {
    /// The cause, in one sentence.
    pub fn reason(&self) -> String {
        match self {
            Diagnosis::SchemaNotReady { detail } => format!("schema not ready: {detail}"),
            Diagnosis::Paused { by, at_ms, reason } => format!(
                "paused by {by} at {}: {}",
                utc(*at_ms),
                reason.as_deref().unwrap_or("no reason given")
            ),
            Diagnosis::ProjectSuspended => "the project is suspended".to_owned(),
            Diagnosis::TriggerDisabled => "the trigger is disabled".to_owned(),
            Diagnosis::RevisionBehind {
                schedule_revision,
                trigger_revision,
            } => format!(
                "the schedule row is at revision {schedule_revision}, behind the trigger's \
                 revision {trigger_revision}"
            ),
            Diagnosis::DigestCorrupt {
                execution_revision_id,
            } => format!(
                "execution revision {execution_revision_id} is corrupt: its digest does not \
                 match its spec, so every admission is refused"
            ),
            Diagnosis::AdmissionRefused {
                sqlstate,
                message,
                owner,
                since_ms,
                failures,
            } => format!(
                "the database refuses its admission (SQLSTATE {sqlstate}) since {}, {failures}                  attempt{}, last by {owner}: {message}",
                utc(*since_ms),
                if *failures == 1 { "" } else { "s" }
            ),
            Diagnosis::ClaimHeld {
                owner,
                remaining_ms,
            } => format!("claim held by {owner} for another {}", span(*remaining_ms)),
            Diagnosis::ClaimExpired {
                owner,
                expired_ms_ago,
                live_replicas,
            } => format!(
                "the claim of {owner} expired {} ago and nobody took it over; {}",
                span(*expired_ms_ago),
                match live_replicas {
                    0 => "no replica is live".to_owned(),
                    1 => "1 replica is live".to_owned(),
                    n => format!("{n} replicas are live"),
                }
            ),
            Diagnosis::NotInitialized => "the schedule is not initialized yet".to_owned(),
            Diagnosis::NotDue {
                next_fire_at_ms,
                due_in_ms,
            } => format!(
                "not due until {} (in {})",
                utc(*next_fire_at_ms),
                span(*due_in_ms)
            ),
            Diagnosis::Eligible => "due and unclaimed: nothing stops it".to_owned(),
        }
    }

    /// What an operator can do about it.
    pub fn fix(&self) -> &'static str {
        match self {
            Diagnosis::SchemaNotReady { .. } => "run `qlsched migrate`",
            Diagnosis::Paused { .. } => {
                "`qlsched resume` it when it should run again (what passed meanwhile is recorded \
                 as a misfire)"
            }
            Diagnosis::ProjectSuspended => {
                "publish the project with \"status\": \"active\" if it should run"
            }
            Diagnosis::TriggerDisabled => {
                "publish the trigger with \"enabled\": true if it should run"
            }
            Diagnosis::RevisionBehind { .. } => {
                "publish the trigger again; publish resets its schedule row to the current revision"
            }
            Diagnosis::DigestCorrupt { .. } => {
                "publish the task again so it pins a fresh execution revision"
            }
            Diagnosis::AdmissionRefused { .. } => {
                "remove the cause the error names (a trigger function or constraint on qlsched's \
                 tables, the server's resources); the row is tried again when its claim expires, \
                 once a lease"
            }
            Diagnosis::ClaimHeld { .. } => {
                "wait for the holder to admit or the lease to expire, or `qlsched expire` it"
            }
            Diagnosis::ClaimExpired { .. } => {
                "is any replica running? start `qlsched run`, or `qlsched expire` the stale claim"
            }
            Diagnosis::NotInitialized => {
                "a running replica initializes it in its next round; is any replica running?"
            }
            Diagnosis::NotDue { .. } => "nothing to do: it fires when due",
            Diagnosis::Eligible => {
                "a running replica takes it in its next round; is any replica running?"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A due, unclaimed row of an active, enabled trigger at its current revision: eligible.
    fn eligible() -> TriggerFacts {
        TriggerFacts {
            project_status: ProjectStatus::Active,
            enabled: true,
            trigger_revision: 3,
            schedule_revision: 3,
            execution_revision_id: Uuid::from_u128(7),
            digest_ok: true,
            pause: None,
            claim: None,
            live_replicas: 2,
            next_fire_at_ms: Some(1_000),
            due_in_ms: Some(-250),
            refusal: None,
        }
    }

    /// A refusal of the occurrence the row is at comes before its claim (the refused row keeps
    /// its claim until the lease ends) and after what parks the row.
    #[test]
    fn a_refused_admission_is_named_before_the_claim_it_leaves() {
        let refusal = RefusalFacts {
            sqlstate: "P0001".to_owned(),
            message: "poisoned".to_owned(),
            owner: "r1".to_owned(),
            since_ms: 0,
            failures: 3,
        };
        let facts = TriggerFacts {
            claim: Some(ClaimFacts {
                owner: "r1".to_owned(),
                remaining_ms: 20_000,
                expired: false,
            }),
            refusal: Some(refusal),
            ..eligible()
        };
        let diagnosis = diagnose(&facts);
        assert!(
            matches!(&diagnosis, Diagnosis::AdmissionRefused { sqlstate, failures: 3, .. } if sqlstate == "P0001"),
            "{diagnosis:?}"
        );
        assert!(
            diagnosis.reason().contains("SQLSTATE P0001"),
            "{}",
            diagnosis.reason()
        );
        let paused = TriggerFacts {
            enabled: false,
            ..facts
        };
        assert_eq!(diagnose(&paused), Diagnosis::TriggerDisabled);
    }

    /// What parks a row, first cause first; a claim, a digest or a cursor never parks one.
    #[test]
    fn parked_names_the_first_cause_and_nothing_else_parks() {
        assert_eq!(parked(&eligible()), None);
        let mut facts = TriggerFacts {
            claim: Some(held(-5)),
            digest_ok: false,
            next_fire_at_ms: None,
            due_in_ms: None,
            ..eligible()
        };
        assert_eq!(parked(&facts), None);
        facts.schedule_revision = 2;
        assert_eq!(parked(&facts), Some(Parked::RevisionBehind));
        facts.enabled = false;
        assert_eq!(parked(&facts), Some(Parked::TriggerDisabled));
        facts.project_status = ProjectStatus::Suspended;
        assert_eq!(parked(&facts), Some(Parked::ProjectSuspended));
        facts.pause = Some(paused());
        assert_eq!(parked(&facts), Some(Parked::Paused));
    }

    fn paused() -> PauseFacts {
        PauseFacts {
            by: "alice".into(),
            at_ms: 0,
            reason: Some("maintenance".into()),
        }
    }

    fn held(remaining_ms: i64) -> ClaimFacts {
        ClaimFacts {
            owner: "node-a".into(),
            remaining_ms,
            expired: remaining_ms <= 0,
        }
    }

    #[test]
    fn nothing_in_the_way_is_eligible() {
        assert_eq!(diagnose(&eligible()), Diagnosis::Eligible);
        let due_now = TriggerFacts {
            due_in_ms: Some(0),
            ..eligible()
        };
        assert_eq!(diagnose(&due_now), Diagnosis::Eligible);
    }

    #[test]
    fn a_pause_is_named_with_who_when_and_why() {
        let facts = TriggerFacts {
            pause: Some(paused()),
            ..eligible()
        };
        assert_eq!(
            diagnose(&facts),
            Diagnosis::Paused {
                by: "alice".into(),
                at_ms: 0,
                reason: Some("maintenance".into())
            }
        );
    }

    #[test]
    fn a_suspended_project() {
        let facts = TriggerFacts {
            project_status: ProjectStatus::Suspended,
            ..eligible()
        };
        assert_eq!(diagnose(&facts), Diagnosis::ProjectSuspended);
    }

    #[test]
    fn a_disabled_trigger() {
        let facts = TriggerFacts {
            enabled: false,
            ..eligible()
        };
        assert_eq!(diagnose(&facts), Diagnosis::TriggerDisabled);
    }

    #[test]
    fn a_row_behind_its_trigger_revision() {
        let facts = TriggerFacts {
            schedule_revision: 2,
            ..eligible()
        };
        assert_eq!(
            diagnose(&facts),
            Diagnosis::RevisionBehind {
                schedule_revision: 2,
                trigger_revision: 3
            }
        );
    }

    #[test]
    fn a_corrupt_execution_digest() {
        let facts = TriggerFacts {
            digest_ok: false,
            ..eligible()
        };
        assert_eq!(
            diagnose(&facts),
            Diagnosis::DigestCorrupt {
                execution_revision_id: Uuid::from_u128(7)
            }
        );
    }

    #[test]
    fn a_claim_held_and_a_claim_expired() {
        let facts = TriggerFacts {
            claim: Some(held(4_000)),
            ..eligible()
        };
        assert_eq!(
            diagnose(&facts),
            Diagnosis::ClaimHeld {
                owner: "node-a".into(),
                remaining_ms: 4_000
            }
        );
        let facts = TriggerFacts {
            claim: Some(held(-1_500)),
            live_replicas: 0,
            ..eligible()
        };
        assert_eq!(
            diagnose(&facts),
            Diagnosis::ClaimExpired {
                owner: "node-a".into(),
                expired_ms_ago: 1_500,
                live_replicas: 0
            }
        );
    }

    #[test]
    fn an_uninitialized_cursor_and_a_future_one() {
        let facts = TriggerFacts {
            next_fire_at_ms: None,
            due_in_ms: None,
            ..eligible()
        };
        assert_eq!(diagnose(&facts), Diagnosis::NotInitialized);
        let facts = TriggerFacts {
            next_fire_at_ms: Some(5_000),
            due_in_ms: Some(4_000),
            ..eligible()
        };
        assert_eq!(
            diagnose(&facts),
            Diagnosis::NotDue {
                next_fire_at_ms: 5_000,
                due_in_ms: 4_000
            }
        );
    }

    /// Each cause hides every one after it: starting from all of them at once, removing the
    /// first named reveals the next, in the documented order.
    #[test]
    fn causes_come_in_order_with_the_pause_first() {
        let mut facts = TriggerFacts {
            pause: Some(paused()),
            project_status: ProjectStatus::Suspended,
            enabled: false,
            schedule_revision: 2,
            digest_ok: false,
            claim: Some(held(4_000)),
            next_fire_at_ms: None,
            due_in_ms: None,
            ..eligible()
        };
        let mut causes = Vec::new();
        loop {
            let diagnosis = diagnose(&facts);
            causes.push(cause(&diagnosis));
            match diagnosis {
                Diagnosis::Paused { .. } => facts.pause = None,
                Diagnosis::ProjectSuspended => facts.project_status = ProjectStatus::Active,
                Diagnosis::TriggerDisabled => facts.enabled = true,
                Diagnosis::RevisionBehind { .. } => facts.schedule_revision = 3,
                Diagnosis::DigestCorrupt { .. } => facts.digest_ok = true,
                Diagnosis::ClaimHeld { .. } => facts.claim = None,
                Diagnosis::NotInitialized => {
                    facts.next_fire_at_ms = Some(5_000);
                    facts.due_in_ms = Some(4_000);
                }
                Diagnosis::NotDue { .. } => facts.due_in_ms = Some(-1),
                _ => break,
            }
        }
        assert_eq!(
            causes,
            [
                "paused",
                "project_suspended",
                "trigger_disabled",
                "revision_behind",
                "digest_corrupt",
                "claim_held",
                "not_initialized",
                "not_due",
                "eligible"
            ]
        );
    }

    fn cause(diagnosis: &Diagnosis) -> String {
        serde_json::to_value(diagnosis).expect("serializes")["cause"]
            .as_str()
            .expect("a cause")
            .to_owned()
    }

    #[test]
    fn each_cause_says_what_and_what_to_do() {
        let facts = TriggerFacts {
            claim: Some(held(-65_000)),
            live_replicas: 1,
            ..eligible()
        };
        let diagnosis = diagnose(&facts);
        assert_eq!(
            diagnosis.reason(),
            "the claim of node-a expired 1m05s ago and nobody took it over; 1 replica is live"
        );
        assert!(diagnosis.fix().contains("qlsched expire"));
    }
}
