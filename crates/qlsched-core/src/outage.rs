//! Whether the cluster is in an outage, and which one: the headline `top`'s banner and the first
//! line of `inspect` show, with its likely cause and the next command to run. Decided from a few
//! counts the store read at one database instant, so every class and their order are tested
//! without a database, and both screens say the same words for the same facts.
//!
//! An outage is what an operator must act on now, not a row that is a little late:
//! - no live replica while rows are due (nothing will admit them);
//! - rows overdue beyond their misfire grace (occurrences are being lost, whatever the replicas
//!   say about themselves);
//! - admissions stopped: live replicas admitted nothing in the last minute while a row has been
//!   due for longer than that minute. A row that fell due a moment ago is not an outage; an hourly
//!   trigger that just came due on an idle cluster must not raise a banner.

use serde::Serialize;

use super::time::span;

/// How long a row must have been due, with nothing admitted meanwhile, before admissions count as
/// stopped: the same minute the admission count looks back over.
pub const ADMISSIONS_STOPPED_AFTER_MS: i64 = 60_000;

/// How far past its misfire grace a row must be before it counts as overdue beyond it: a replica
/// takes a due row within a round (a second by default), so a trigger with a grace of zero is a
/// little past it at every occurrence, which is no outage.
pub const GRACE_SLACK_MS: i64 = 10_000;

/// Where a reader stops counting due rows (and the last minute's admissions): a count at or above
/// it is written `1000+`, since past it that rows wait matters more than how many.
pub const COUNT_CAP: i64 = 1_000;

/// The counts an outage is decided from, read at one database instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutageFacts {
    /// Replicas whose heartbeat is live (neither stalled, stale nor stopped).
    pub live_replicas: i64,
    /// Replicas the registry remembers, in any state. A replica that went stale leaves it after
    /// its `--forget-stale-after` (15 minutes by default; a week for rows of releases before
    /// 0.2.0), so none does not mean none ever ran: [`Self::ever_ran`] says that.
    pub registered_replicas: i64,
    /// Whether a replica ever ran against this database, from facts that outlive the registry's
    /// forgetting: a registry row still stored (even one forgotten, not yet deleted), or a
    /// schedule row whose cursor a replica initialized.
    pub ever_ran: bool,
    /// Claimable rows whose next occurrence is due now (claimed or not), or whose cursor no
    /// replica has initialized yet (it waits for one as much).
    pub due_rows: i64,
    /// Of those, rows late by more than their own misfire grace plus [`GRACE_SLACK_MS`].
    pub overdue_beyond_grace: i64,
    /// How long the most overdue claimable row has been due, if any row is due.
    pub oldest_due_ms: Option<i64>,
    /// Runs admitted in the last minute, by any replica or operator.
    pub admissions_last_minute: i64,
}

/// Which outage, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OutageKind {
    NoLiveReplica,
    OverdueBeyondGrace,
    AdmissionsStopped,
}

/// An outage: one line to headline it, its likely cause, and the command that tells more or fixes
/// it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Outage {
    pub kind: OutageKind,
    pub headline: String,
    pub cause: String,
    pub next_command: String,
}

/// The outage these facts show, the most severe one when several hold; `None` when the cluster
/// is keeping up.
pub fn classify(facts: &OutageFacts) -> Option<Outage> {
    let lag = facts
        .oldest_due_ms
        .map(|ms| format!(", the oldest late by {}", span(ms)))
        .unwrap_or_default();
    if facts.live_replicas <= 0 && facts.due_rows > 0 {
        let (cause, next_command) = if facts.registered_replicas <= 0 && !facts.ever_ran {
            (
                "no replica has ever run against this database (or none within its \
                 --forget-stale-after)"
                    .to_owned(),
                "qlsched run".to_owned(),
            )
        } else if facts.registered_replicas <= 0 {
            (
                "every replica that ran here stopped or went stale, and the registry forgot it \
                 after its --forget-stale-after: nothing admits the due rows"
                    .to_owned(),
                "qlsched inspect replicas".to_owned(),
            )
        } else {
            (
                "every replica in the registry is stopped, stalled or stale: nothing admits the \
                 due rows"
                    .to_owned(),
                "qlsched inspect replicas".to_owned(),
            )
        };
        return Some(Outage {
            kind: OutageKind::NoLiveReplica,
            headline: format!("OUTAGE: no live replica, {} due{lag}", rows(facts.due_rows)),
            cause,
            next_command,
        });
    }
    if facts.overdue_beyond_grace > 0 {
        return Some(Outage {
            kind: OutageKind::OverdueBeyondGrace,
            headline: format!(
                "OUTAGE: {} overdue beyond their misfire grace{lag}",
                rows(facts.overdue_beyond_grace)
            ),
            cause: format!(
                "{} live but not taking these rows: claims held by a stalled owner, or the \
                 replicas cannot keep up",
                replicas(facts.live_replicas)
            ),
            next_command: "qlsched inspect claims".to_owned(),
        });
    }
    let stuck = facts
        .oldest_due_ms
        .is_some_and(|ms| ms > ADMISSIONS_STOPPED_AFTER_MS);
    if facts.due_rows > 0 && facts.admissions_last_minute <= 0 && stuck {
        return Some(Outage {
            kind: OutageKind::AdmissionsStopped,
            headline: format!(
                "OUTAGE: no admission in the last minute, {} due{lag}",
                rows(facts.due_rows)
            ),
            cause: format!(
                "{} live but admitting nothing: hung, cut off from the primary, or every due row \
                 is claimed by an owner that stopped",
                replicas(facts.live_replicas)
            ),
            next_command: "qlsched inspect replicas".to_owned(),
        });
    }
    None
}

fn rows(n: i64) -> String {
    match n {
        1 => "1 row".to_owned(),
        n if n >= COUNT_CAP => format!("{COUNT_CAP}+ rows"),
        n => format!("{n} rows"),
    }
}

fn replicas(n: i64) -> String {
    if n == 1 {
        "1 replica is".to_owned()
    } else {
        format!("{n} replicas are")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keeping_up() -> OutageFacts {
        OutageFacts {
            live_replicas: 3,
            registered_replicas: 3,
            ever_ran: true,
            due_rows: 2,
            overdue_beyond_grace: 0,
            oldest_due_ms: Some(400),
            admissions_last_minute: 120,
        }
    }

    #[test]
    fn a_cluster_keeping_up_has_no_outage() {
        assert_eq!(classify(&keeping_up()), None);
        assert_eq!(classify(&OutageFacts::default()), None);
    }

    #[test]
    fn no_live_replica_with_rows_due_is_the_first_outage() {
        let facts = OutageFacts {
            live_replicas: 0,
            due_rows: 16,
            overdue_beyond_grace: 4,
            oldest_due_ms: Some(47_000),
            admissions_last_minute: 0,
            ..keeping_up()
        };
        let outage = classify(&facts).expect("an outage");
        assert_eq!(outage.kind, OutageKind::NoLiveReplica);
        assert_eq!(
            outage.headline,
            "OUTAGE: no live replica, 16 rows due, the oldest late by 47s"
        );
        assert_eq!(outage.next_command, "qlsched inspect replicas");
        assert!(outage.cause.contains("stopped, stalled or stale"));
    }

    #[test]
    fn before_the_first_replica_the_next_command_starts_one() {
        let facts = OutageFacts {
            live_replicas: 0,
            registered_replicas: 0,
            ever_ran: false,
            due_rows: 1,
            oldest_due_ms: Some(2_000),
            admissions_last_minute: 0,
            ..keeping_up()
        };
        let outage = classify(&facts).expect("an outage");
        assert_eq!(outage.kind, OutageKind::NoLiveReplica);
        assert!(outage.headline.contains("1 row due"));
        assert!(outage.cause.contains("no replica has ever run"));
        assert_eq!(outage.next_command, "qlsched run");
    }

    #[test]
    fn a_fleet_the_registry_forgot_is_not_one_that_never_ran() {
        let facts = OutageFacts {
            live_replicas: 0,
            registered_replicas: 0,
            ever_ran: true,
            due_rows: 5,
            oldest_due_ms: Some(3_600_000),
            admissions_last_minute: 0,
            ..keeping_up()
        };
        let outage = classify(&facts).expect("an outage");
        assert_eq!(outage.kind, OutageKind::NoLiveReplica);
        assert!(!outage.cause.contains("never"), "{outage:?}");
        assert!(outage.cause.contains("forgot"), "{outage:?}");
        assert_eq!(outage.next_command, "qlsched inspect replicas");
    }

    #[test]
    fn no_live_replica_and_nothing_due_is_not_an_outage() {
        let facts = OutageFacts {
            live_replicas: 0,
            due_rows: 0,
            oldest_due_ms: None,
            admissions_last_minute: 0,
            ..keeping_up()
        };
        assert_eq!(classify(&facts), None);
    }

    #[test]
    fn a_count_at_the_cap_is_a_lower_bound() {
        let facts = OutageFacts {
            live_replicas: 0,
            due_rows: COUNT_CAP,
            ..keeping_up()
        };
        let outage = classify(&facts).expect("an outage");
        assert!(outage.headline.contains("1000+ rows due"), "{outage:?}");
    }

    #[test]
    fn rows_overdue_beyond_grace_with_live_replicas() {
        let facts = OutageFacts {
            overdue_beyond_grace: 3,
            oldest_due_ms: Some(125_000),
            ..keeping_up()
        };
        let outage = classify(&facts).expect("an outage");
        assert_eq!(outage.kind, OutageKind::OverdueBeyondGrace);
        assert_eq!(
            outage.headline,
            "OUTAGE: 3 rows overdue beyond their misfire grace, the oldest late by 2m05s"
        );
        assert_eq!(outage.next_command, "qlsched inspect claims");
    }

    #[test]
    fn admissions_stopped_only_once_a_row_waited_longer_than_the_minute() {
        let fresh = OutageFacts {
            admissions_last_minute: 0,
            oldest_due_ms: Some(ADMISSIONS_STOPPED_AFTER_MS),
            ..keeping_up()
        };
        assert_eq!(classify(&fresh), None, "an hourly row just came due");
        let stuck = OutageFacts {
            oldest_due_ms: Some(ADMISSIONS_STOPPED_AFTER_MS + 1),
            ..fresh
        };
        let outage = classify(&stuck).expect("an outage");
        assert_eq!(outage.kind, OutageKind::AdmissionsStopped);
        assert!(
            outage
                .headline
                .starts_with("OUTAGE: no admission in the last minute")
        );
        assert_eq!(outage.next_command, "qlsched inspect replicas");
        let admitting = OutageFacts {
            admissions_last_minute: 1,
            ..stuck
        };
        assert_eq!(classify(&admitting), None);
    }
}
