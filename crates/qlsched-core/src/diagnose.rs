//! Why a trigger is not firing (docs/DESIGN.md §5.1, `inspect trigger`): the first cause, in the
//! order the claim statement and the admission check them, decided from a plain record of facts
//! the store read at one database instant. Pure, so every cause and their order are tested
//! without a database; the store only gathers the facts.

use serde::Serialize;
use uuid::Uuid;

use super::cron::CronSchedule;
use super::manifest::ProjectStatus;
use super::status::Liveness;
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
    /// The trigger's expression and zone, to tell a next occurrence far off by its fields.
    pub cron_expr: String,
    pub time_zone: String,
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
    /// The owner as the replica registry sees it at this instant; `None` when it is not
    /// registered (an operator's `qlsched claim`, or a replica forgotten after its
    /// `--forget-stale-after`: 15 minutes by default; a week for rows of releases before 0.2.0).
    pub owner_liveness: Option<Liveness>,
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
        return match claim.owner_liveness {
            _ if claim.expired => Diagnosis::ClaimExpired {
                owner: claim.owner.clone(),
                expired_ms_ago: -claim.remaining_ms,
                live_replicas: facts.live_replicas,
            },
            // A valid lease whose holder has stopped beating protects the row for nobody.
            Some(owner_liveness @ (Liveness::Stalled | Liveness::Stale | Liveness::Stopped)) => {
                Diagnosis::ClaimOwnerNotLive {
                    owner: claim.owner.clone(),
                    owner_liveness,
                    remaining_ms: claim.remaining_ms,
                }
            }
            _ => Diagnosis::ClaimHeld {
                owner: claim.owner.clone(),
                remaining_ms: claim.remaining_ms,
            },
        };
    }
    match (facts.next_fire_at_ms, facts.due_in_ms) {
        (None, _) => Diagnosis::NotInitialized,
        (Some(next_fire_at_ms), Some(due_in_ms)) if due_in_ms > 0 => Diagnosis::NotDue {
            next_fire_at_ms,
            due_in_ms,
            far: far_next(
                &facts.cron_expr,
                &facts.time_zone,
                next_fire_at_ms - due_in_ms,
            ),
        },
        _ => Diagnosis::Eligible,
    }
}

/// `at_ms` as a wall time in `time_zone` (`2027-05-01 08:00:00 CEST`); `None` for a zone
/// chrono-tz does not know.
fn local(at_ms: i64, time_zone: &str) -> Option<String> {
    use chrono::TimeZone;
    let zone: chrono_tz::Tz = time_zone.parse().ok()?;
    let at = zone.timestamp_millis_opt(at_ms).single()?;
    Some(at.format("%Y-%m-%d %H:%M:%S %Z").to_string())
}

impl FarNext {
    /// The far-off note of a cause line: which fields put the occurrence there, and the next
    /// few.
    fn describe(&self) -> String {
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|f| {
                format!(
                    "the {} field `{}` (were it `*`, next at {})",
                    f.field,
                    f.value,
                    utc(f.next_without_ms)
                )
            })
            .collect();
        let next: Vec<String> = self.next_ms.iter().map(|&ms| utc(ms)).collect();
        let by = match fields.len() {
            0 => String::new(),
            _ => format!(", put there by {}", fields.join(" and ")),
        };
        format!(
            "; that is far off{by}; its next occurrences: {}",
            next.join(", ")
        )
    }
}

/// Beyond this, a next occurrence further off than the expression's own spacing is far off.
const FAR_MS: i64 = 7 * 24 * 3_600_000;
/// A next occurrence this many times further off than the spacing of the ones after it (and more
/// than a day away) is far off for its own expression: `0 8 * 5 *` fires daily, in May.
const FAR_SPACING_FACTOR: i64 = 10;
/// How many occurrences a far one is shown with.
const FAR_SHOWN: usize = 4;

/// A next occurrence far from now, and what in the expression puts it there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FarNext {
    /// The fields without which the next occurrence would come much sooner, each with its value
    /// as written and where the next occurrence would be without it (`*` in its place).
    pub fields: Vec<FieldNote>,
    /// The next occurrences, the first included.
    pub next_ms: Vec<i64>,
}

/// One field of a cron expression that pushes the next occurrence far off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FieldNote {
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["second", "minute", "hour", "day-of-month", "month", "day-of-week"])))]
    pub field: &'static str,
    pub value: String,
    /// The next occurrence were this field `*`.
    pub next_without_ms: i64,
}

/// Whether the next occurrence after `now_ms` is far off (further than the spacing of the
/// occurrences after it, and beyond a week or ten times that spacing), and which fields make it
/// so: each restricted field
/// is relaxed to `*` in turn, and a field whose relaxing brings the next occurrence within half
/// its distance is named. `None` when it is near, or the expression no longer parses.
pub fn far_next(expr: &str, time_zone: &str, now_ms: i64) -> Option<FarNext> {
    let schedule = CronSchedule::parse(expr, time_zone).ok()?;
    let mut next_ms = Vec::with_capacity(FAR_SHOWN);
    let mut at = now_ms;
    while next_ms.len() < FAR_SHOWN {
        let Ok(next) = schedule.next_after(at) else {
            break;
        };
        next_ms.push(next);
        at = next;
    }
    let first = *next_ms.first()?;
    let distance = first - now_ms;
    let spacing = next_ms.windows(2).map(|w| w[1] - w[0]).min();
    // Only further than the expression's own spacing: a monthly job 27 days off is as meant.
    let far = spacing.is_some_and(|s| {
        distance > s
            && (distance > FAR_MS
                || (distance > 24 * 3_600_000 && distance > FAR_SPACING_FACTOR * s))
    });
    if !far {
        return None;
    }
    let written: Vec<&str> = expr.split_whitespace().collect();
    let names: &[&'static str] = match written.len() {
        5 => &["minute", "hour", "day-of-month", "month", "day-of-week"],
        6 => &[
            "second",
            "minute",
            "hour",
            "day-of-month",
            "month",
            "day-of-week",
        ],
        // A macro (`@yearly`) has no fields to name.
        _ => &[],
    };
    let fields = names
        .iter()
        .enumerate()
        .filter(|(i, _)| !matches!(written[*i], "*" | "?"))
        .filter_map(|(i, &field)| {
            let mut relaxed = written.clone();
            relaxed[i] = "*";
            let next_without_ms = CronSchedule::parse(&relaxed.join(" "), time_zone)
                .ok()?
                .next_after(now_ms)
                .ok()?;
            (next_without_ms - now_ms <= distance / 2).then(|| FieldNote {
                field,
                value: written[i].to_owned(),
                next_without_ms,
            })
        })
        .collect();
    Some(FarNext { fields, next_ms })
}

/// Why a trigger is not firing, as far as the scheduler can tell; each cause with its fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// A claim still valid whose owner the replica registry shows stalled (hung or cut off),
    /// stale or stopped (dead): nothing is coming to admit under it.
    ClaimOwnerNotLive {
        owner: String,
        /// Stalled, stale or stopped.
        owner_liveness: Liveness,
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
        /// Set when the next occurrence is far off (beyond a week, or much further than the
        /// expression's own spacing): the fields that put it there, and the next occurrences.
        far: Option<FarNext>,
    },
    /// Nothing stops it: due and unclaimed, the next replica round takes it.
    Eligible,
}

impl Diagnosis {
    /// The cause, in one sentence, its instants in UTC.
    pub fn reason(&self) -> String {
        self.reason_in(None)
    }

    /// The cause, in one sentence, its instants in UTC and, given the trigger's time zone, in
    /// that zone beside it: `2027-05-01T06:00:00.000Z (2027-05-01 08:00:00 CEST)`.
    pub fn reason_in(&self, time_zone: Option<&str>) -> String {
        let at = |ms: i64| match time_zone.and_then(|zone| local(ms, zone)) {
            Some(local) => format!("{} ({local})", utc(ms)),
            None => utc(ms),
        };
        match self {
            Diagnosis::SchemaNotReady { detail } => format!("schema not ready: {detail}"),
            Diagnosis::Paused { by, at_ms, reason } => format!(
                "paused by {by} at {}: {}",
                at(*at_ms),
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
                "the database refuses its admission (SQLSTATE {sqlstate}) since {}, {failures} \
                 attempt{}, last by {owner}: {message}",
                at(*since_ms),
                if *failures == 1 { "" } else { "s" }
            ),
            Diagnosis::ClaimHeld {
                owner,
                remaining_ms,
            } => format!("claim held by {owner} for another {}", span(*remaining_ms)),
            Diagnosis::ClaimOwnerNotLive {
                owner,
                owner_liveness,
                remaining_ms,
            } => format!(
                "claim held by {owner} for another {}, but {owner} is {owner_liveness} in the \
                 replica registry ({})",
                span(*remaining_ms),
                match owner_liveness {
                    Liveness::Stalled => "no heartbeat for two cadences: hung or cut off",
                    Liveness::Stopped => "it said it stopped: its owner is gone",
                    _ => "no heartbeat for longer than its lease and cadence: its owner is dead",
                }
            ),
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
                far,
            } => {
                let mut out = format!(
                    "not due until {} (in {})",
                    at(*next_fire_at_ms),
                    span(*due_in_ms)
                );
                if let Some(far) = far {
                    out.push_str(&far.describe());
                }
                out
            }
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
            Diagnosis::ClaimOwnerNotLive {
                owner_liveness: Liveness::Stalled,
                ..
            } => {
                "if its owner does not recover, `qlsched expire` the claim (fenced: the owner, if \
                 it wakes, cannot admit under it), and find out why it hangs (`qlsched inspect \
                 replicas`)"
            }
            Diagnosis::ClaimOwnerNotLive { .. } => {
                "`qlsched expire` the claim: its owner will not admit under it, and waiting only \
                 lets the lease run out"
            }
            Diagnosis::ClaimExpired { .. } => {
                "is any replica running? start `qlsched run`, or `qlsched expire` the stale claim"
            }
            Diagnosis::NotInitialized => {
                "a running replica initializes it in its next round; is any replica running?"
            }
            Diagnosis::NotDue { far: Some(_), .. } => {
                "if that is not what was meant, correct the expression (`qlsched cron EXPR -z \
                 ZONE` lists its occurrences) and publish again"
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
            cron_expr: "* * * * * *".into(),
            time_zone: "UTC".into(),
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
                owner_liveness: None,
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
        assert!(
            diagnosis
                .reason()
                .contains(", 3 attempts, last by r1: poisoned"),
            "{}",
            diagnosis.reason()
        );
        for reason in [
            diagnosis.reason(),
            diagnosis.reason_in(Some("Europe/Berlin")),
        ] {
            assert!(!reason.contains("  "), "{reason}");
        }
        assert!(
            diagnosis
                .reason_in(Some("Europe/Berlin"))
                .contains("1970-01-01T00:00:00.000Z (1970-01-01 01:00:00 CET)"),
            "{}",
            diagnosis.reason_in(Some("Europe/Berlin"))
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
            owner_liveness: Some(Liveness::Live),
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
                due_in_ms: 4_000,
                far: None
            }
        );
    }

    /// A valid claim whose owner stopped beating is no longer a reason to wait: the cause says
    /// so, and the fix is to expire it. An owner the registry does not know (an operator's hand
    /// claim) is a claim held as any other.
    #[test]
    fn a_claim_whose_owner_is_not_live_says_so_and_advises_expiry() {
        for (liveness, words) in [
            (Liveness::Stale, "its owner is dead"),
            (Liveness::Stalled, "hung or cut off"),
            (Liveness::Stopped, "its owner is gone"),
        ] {
            let facts = TriggerFacts {
                claim: Some(ClaimFacts {
                    owner_liveness: Some(liveness),
                    ..held(3_360_000)
                }),
                ..eligible()
            };
            let diagnosis = diagnose(&facts);
            assert_eq!(
                diagnosis,
                Diagnosis::ClaimOwnerNotLive {
                    owner: "node-a".into(),
                    owner_liveness: liveness,
                    remaining_ms: 3_360_000
                }
            );
            let reason = diagnosis.reason();
            assert!(
                reason.contains(&format!("node-a is {liveness}")),
                "{reason}"
            );
            assert!(reason.contains(words), "{reason}");
            assert!(
                diagnosis.fix().contains("qlsched expire"),
                "{}",
                diagnosis.fix()
            );
            assert!(!diagnosis.fix().starts_with("wait"), "{}", diagnosis.fix());
        }
        let by_hand = TriggerFacts {
            claim: Some(ClaimFacts {
                owner_liveness: None,
                ..held(4_000)
            }),
            ..eligible()
        };
        assert!(matches!(diagnose(&by_hand), Diagnosis::ClaimHeld { .. }));
    }

    /// `0 8 * 5 *` (May where Friday was meant), seen on 2026-12-05: daily at 08:00, but not
    /// until May. The month field is named, the next occurrences listed, the zone's wall time
    /// shown beside UTC, and the fix is to check the expression.
    #[test]
    fn a_next_occurrence_far_off_names_the_fields_that_put_it_there() {
        let now_ms = 1_796_428_800_000; // 2026-12-05T00:00:00Z
        let facts = TriggerFacts {
            cron_expr: "0 8 * 5 *".into(),
            time_zone: "Europe/Berlin".into(),
            next_fire_at_ms: Some(1_809_151_200_000), // 2027-05-01T06:00:00Z
            due_in_ms: Some(1_809_151_200_000 - now_ms),
            ..eligible()
        };
        let diagnosis = diagnose(&facts);
        let Diagnosis::NotDue { far: Some(far), .. } = &diagnosis else {
            panic!("not far: {diagnosis:?}");
        };
        let named: Vec<&str> = far.fields.iter().map(|f| f.field).collect();
        assert_eq!(named, ["month"]);
        assert_eq!(far.fields[0].value, "5");
        assert_eq!(
            utc(far.fields[0].next_without_ms),
            "2026-12-05T07:00:00.000Z"
        );
        assert_eq!(far.next_ms.len(), FAR_SHOWN);
        assert_eq!(far.next_ms[1] - far.next_ms[0], 24 * 3_600_000);
        let reason = diagnosis.reason_in(Some("Europe/Berlin"));
        assert!(
            reason.starts_with(
                "not due until 2027-05-01T06:00:00.000Z (2027-05-01 08:00:00 CEST) (in "
            ),
            "{reason}"
        );
        assert!(reason.contains("the month field `5`"), "{reason}");
        assert!(diagnosis.fix().contains("correct the expression"));

        // Near, or as far as its own spacing says: nothing to note.
        assert_eq!(far_next("0 8 * * *", "Europe/Berlin", now_ms), None);
        assert_eq!(far_next("0 0 1 * *", "UTC", now_ms), None);
        assert_eq!(far_next("0 0 1 3 *", "UTC", now_ms), None);
        // Weekdays at 09:00 seen on a Saturday: two days off, 24 hours apart, is not ten times.
        assert_eq!(far_next("0 9 * * 1-5", "UTC", now_ms + 86_400_000), None);
        // Every minute of 03:00 on the 1st, by its day-of-month.
        let hourly = far_next("* 3 1 * *", "UTC", now_ms).expect("far");
        let named: Vec<&str> = hourly.fields.iter().map(|f| f.field).collect();
        assert_eq!(named, ["day-of-month"]);
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
