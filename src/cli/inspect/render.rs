//! The tables `inspect` prints for people (`-o table`); `-o json` writes the same values as they
//! are.

use super::ClaimShown;
use super::{CheckReport, InvariantReport, LoadReport, SummaryReport};
use crate::cli::output::{opt, table};
use crate::core::outage::Outage;
use crate::core::time::{span, utc};
use crate::core::{Liveness, TriggerName};
use crate::store::misfires::MisfireRecord;
use crate::store::read::{self, AuditView, RunDetail, RunView, ScheduleView, TriggerDetail};
use crate::store::recovery::RecoveryReport;
use crate::store::replicas::{LivenessCounts, ReplicaView};

/// An outage in three lines: the headline, the likely cause, the next command.
fn render_outage(outage: &Outage) -> String {
    format!(
        "{}\n  likely cause: {}\n  next: `{}`\n",
        outage.headline, outage.cause, outage.next_command
    )
}

pub(super) fn render_check(report: &CheckReport) -> String {
    match &report.outage {
        Some(outage) => render_outage(outage),
        None => format!(
            "no outage: {} live replica{}, {} row{} due, {} admission{} in the last minute\n",
            report.live_replicas,
            plural(report.live_replicas),
            report.due_rows,
            plural(report.due_rows),
            report.admissions_last_minute,
            plural(report.admissions_last_minute),
        ),
    }
}

fn plural(n: i64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

pub(super) fn render_summary(report: &SummaryReport) -> String {
    let s = &report.summary;
    let c = &s.schedules;
    let mut out = match &report.outage {
        Some(outage) => render_outage(outage),
        None => String::new(),
    };
    if let Some(problem) = &report.schema_problem {
        out.push_str(&format!(
            "SCHEMA NOT READY, replicas refuse to start: {problem} (see `qlsched migrate verify`)\n"
        ));
    }
    if let Some(standby) = report.server.header() {
        out.push_str(&format!(
            "server: {standby} (what follows may be behind the primary)\n"
        ));
    }
    out += &table(
        &["schedules", "rows"],
        [
            ("due", c.due),
            ("claimed", c.claimed),
            ("expired claim", c.expired_claim),
            ("not due", c.not_due),
            ("paused", c.paused),
            ("disabled", c.disabled),
            ("uninitialized", c.uninitialized),
            ("total", c.total),
        ]
        .into_iter()
        .map(|(state, n)| vec![state.to_owned(), n.to_string()]),
    );
    out.push_str(&format!(
        "\nschema version {}, database time {}, {} admissions in the last minute\n",
        s.schema_version,
        utc(s.now_ms),
        s.admissions_last_minute
    ));
    out.push_str(&match &s.oldest_overdue {
        Some(o) => format!(
            "oldest overdue: {} due at {}, lag {}\n",
            TriggerName::new(&o.project_id, &o.trigger_id),
            utc(o.next_fire_at_ms),
            span(o.lag_ms)
        ),
        None => "oldest overdue: none unclaimed\n".to_owned(),
    });
    let held = &s.claimed_overdue;
    if let Some(o) = &held.oldest {
        out.push_str(&format!(
            "claimed and overdue: {} row{}, oldest {} due at {}, lag {}, held by {}{}\n",
            held.count,
            if held.count == 1 { "" } else { "s" },
            TriggerName::new(&o.project_id, &o.trigger_id),
            utc(o.next_fire_at_ms),
            span(o.lag_ms),
            crate::core::text::clean(&o.owner),
            if o.claim_expired {
                " (claim expired, not taken over)"
            } else {
                " (claim still valid)"
            }
        ));
        // The holder as the registry sees it: a valid claim of a dead owner is no reason to wait.
        let holder = report.replicas.iter().find(|r| r.owner == o.owner);
        if let Some(r) = holder.filter(|r| r.liveness != Liveness::Live) {
            out.push_str(&format!(
                "  its owner is {} in the replica registry: `qlsched expire --owner {}` gives \
                 its claims back\n",
                r.liveness.to_string().to_uppercase(),
                crate::core::text::clean(&o.owner)
            ));
        }
    }
    if !s.owners.is_empty() {
        out.push_str(&table(
            &[
                "owner",
                "claims",
                "expired",
                "last claim",
                "admissions last minute",
            ],
            s.owners.iter().map(|o| {
                vec![
                    o.owner.clone(),
                    o.claims.to_string(),
                    o.expired.to_string(),
                    utc(o.last_claim_at_ms),
                    o.admissions_last_minute.to_string(),
                ]
            }),
        ));
        // A table ends on its border: the next line starts a line of its own.
        out.push('\n');
    }
    if let Some(retention) = &report.retention {
        out.push_str(&render_retention(retention));
    }
    let counts = LivenessCounts::of(&report.replicas);
    let mut line = format!("replicas: {} live", counts.live);
    if counts.stalled > 0 {
        line.push_str(&format!(
            ", {} stalled (no heartbeat for two cadences)",
            counts.stalled
        ));
    }
    if counts.stale > 0 {
        line.push_str(&format!(
            ", {} stale (no heartbeat for longer than lease + cadence)",
            counts.stale
        ));
    }
    out.push_str(&line);
    out.push('\n');
    if !report.replicas.is_empty() {
        out.push_str(&render_replicas(&report.replicas));
    }
    out
}

pub(super) fn render_replicas(rows: &[ReplicaView]) -> String {
    table(
        &[
            "replica",
            "liveness",
            "host",
            "pid",
            "version (schema)",
            "heartbeat",
            "started",
            "rounds (failed)",
            "batch",
            "admissions",
            "misfires",
            "fence lost",
            "last error",
        ],
        rows.iter().map(|r| {
            vec![
                crate::core::text::clean(&r.owner),
                if r.state == "draining" {
                    format!("{} (draining)", r.liveness)
                } else {
                    r.liveness.to_string()
                },
                crate::core::text::clean(&r.host),
                r.pid.to_string(),
                format!(
                    "{} ({})",
                    crate::core::text::clean(&r.version),
                    opt(r.schema_version)
                ),
                format!("{} ago", span(r.heartbeat_age_ms)),
                utc(r.started_at_ms),
                format!("{} ({})", r.rounds, r.failed_rounds),
                opt(r.batch),
                r.admissions.to_string(),
                r.misfires.to_string(),
                r.fence_losses.to_string(),
                opt(r.last_error.as_deref().map(crate::core::text::clean)),
            ]
        }),
    )
}

pub(super) fn render_schedules(rows: &[ScheduleView]) -> String {
    table(
        &[
            "trigger",
            "state",
            "next fire",
            "due in",
            "owner",
            "claim version",
        ],
        rows.iter().map(|s| {
            vec![
                TriggerName::new(&s.project_id, &s.trigger_id).to_string(),
                s.state.to_string(),
                opt(s.next_fire_at_ms.map(utc)),
                opt(s.due_in_ms.map(span)),
                opt(s.claim_owner.clone()),
                s.claim_version.to_string(),
            ]
        }),
    )
}

pub(super) fn render_claims(rows: &[ClaimShown]) -> String {
    let mut out = table(
        &[
            "trigger",
            "owner",
            "owner is",
            "version",
            "token",
            "acquired",
            "lease left",
        ],
        rows.iter().map(|shown| {
            let c = &shown.claim;
            vec![
                TriggerName::new(&c.project_id, &c.trigger_id).to_string(),
                c.owner.clone(),
                match shown.owner_liveness {
                    Some(Liveness::Live) => "live".to_owned(),
                    Some(Liveness::Stalled) => "STALLED (hung?)".to_owned(),
                    Some(liveness) => format!("{} (dead)", liveness.to_string().to_uppercase()),
                    None => "unregistered".to_owned(),
                },
                c.version.to_string(),
                c.token.to_string(),
                utc(c.acquired_at_ms),
                if c.expired {
                    format!("expired {} ago", span(-c.remaining_ms))
                } else {
                    span(c.remaining_ms)
                },
            ]
        }),
    );
    // The advice for an owner that is not coming back, once per owner, after the table.
    let mut owners: Vec<(&str, Liveness)> = rows
        .iter()
        .filter_map(|shown| Some((shown.claim.owner.as_str(), shown.owner_liveness?)))
        .filter(|(_, liveness)| *liveness != Liveness::Live)
        .collect();
    owners.dedup();
    for (owner, liveness) in owners {
        let owner = crate::core::text::clean(owner);
        out.push_str(&match liveness {
            Liveness::Stalled => format!(
                "\n{owner} is stalled (no heartbeat for two cadences: hung or cut off): if it does \
                 not recover, `qlsched expire --owner {owner}` gives its claims back (fenced)"
            ),
            _ => format!(
                "\n{owner} is {liveness}: its owner is dead and will not admit under these claims; \
                 `qlsched expire --owner {owner}` gives them back now"
            ),
        });
    }
    out
}

pub(super) fn render_runs(rows: &[RunView]) -> String {
    table(
        &["run", "trigger", "scheduled for", "status", "created"],
        rows.iter().map(|r| {
            vec![
                r.run_id.to_string(),
                TriggerName::new(&r.project_id, &r.trigger_id).to_string(),
                utc(r.scheduled_for_ms),
                r.status.to_string(),
                utc(r.created_at_ms),
            ]
        }),
    )
}

/// `inspect runs`: as [`render_runs`], with each run's origin.
pub(super) fn render_run_rows(rows: &[read::RunRow]) -> String {
    table(
        &[
            "run",
            "trigger",
            "origin",
            "scheduled for",
            "status",
            "created",
        ],
        rows.iter().map(|r| {
            vec![
                r.run_id.to_string(),
                TriggerName::new(&r.project_id, &r.trigger_id).to_string(),
                r.origin.clone(),
                utc(r.scheduled_for_ms),
                r.status.to_string(),
                utc(r.created_at_ms),
            ]
        }),
    )
}

pub(super) fn render_run(detail: &RunDetail) -> String {
    let r = &detail.run;
    let mut out = format!(
        "run {} of {} (revision {}), task {} revision {}\n{} {} run scheduled for {}, key {}\n",
        r.run_id,
        TriggerName::new(&r.project_id, &r.trigger_id),
        r.trigger_revision,
        r.task_id,
        r.task_revision,
        r.status,
        r.origin,
        utc(r.scheduled_for_ms),
        r.idempotency_key
    );
    out.push_str(&table(
        &["attempt", "id", "executor", "state", "worker"],
        detail.attempts.iter().map(|a| {
            vec![
                a.attempt_no.to_string(),
                a.attempt_id.to_string(),
                a.executor.clone(),
                a.state.clone(),
                opt(a.worker_id.clone()),
            ]
        }),
    ));
    out.push('\n');
    out.push_str(&table(
        &["seq", "event", "at", "payload"],
        detail.events.iter().map(|e| {
            vec![
                e.seq.to_string(),
                e.event_type.clone(),
                utc(e.at_ms),
                e.payload.to_string(),
            ]
        }),
    ));
    out
}

pub(super) fn render_trigger(detail: &TriggerDetail) -> String {
    let why = &detail.why_not_firing;
    let zone = detail
        .state
        .as_ref()
        .map(|s| s.definition.time_zone.as_str());
    let headline = format!(
        "{}: {}\nfix: {}",
        TriggerName::new(&detail.project_id, &detail.trigger_id),
        why.reason_in(zone),
        why.fix()
    );
    let Some(state) = &detail.state else {
        return headline;
    };
    let d = &state.definition;
    let s = &state.schedule;
    let mut rows = vec![
        vec!["project status".to_owned(), d.project_status.to_string()],
        vec!["enabled".to_owned(), d.enabled.to_string()],
        vec!["task".to_owned(), d.task_id.clone()],
        vec!["revision".to_owned(), d.revision.to_string()],
        vec![
            "cron".to_owned(),
            format!("{} ({})", d.cron_expr, d.time_zone),
        ],
        vec![
            "misfire".to_owned(),
            format!("{}, grace {}", d.misfire_policy, span(d.misfire_grace_ms)),
        ],
        vec!["state".to_owned(), s.state.to_string()],
        vec!["cursor".to_owned(), opt(s.next_fire_at_ms.map(utc))],
        vec![
            "last scheduled".to_owned(),
            opt(s.last_scheduled_at_ms.map(utc)),
        ],
        vec![
            "versions".to_owned(),
            format!(
                "schedule revision {}, state {}, claim {}",
                s.trigger_revision, s.state_version, s.claim_version
            ),
        ],
        vec!["database time".to_owned(), utc(state.now_ms)],
    ];
    if let Some(c) = &state.claim {
        rows.push(vec![
            "claim".to_owned(),
            format!(
                "{} token {} version {}, {}",
                c.owner,
                c.token,
                c.version,
                if c.expired {
                    format!("expired {} ago", span(-c.remaining_ms))
                } else {
                    format!("{} left", span(c.remaining_ms))
                }
            ),
        ]);
    }
    if let Some(e) = &state.admission_error {
        rows.push(vec![
            if e.current {
                "admission error".to_owned()
            } else {
                "last admission error".to_owned()
            },
            format!(
                "SQLSTATE {} since {}, {} attempt{} (last {} by {}){}: {}",
                e.sqlstate,
                utc(e.first_failed_at_ms),
                e.failures,
                if e.failures == 1 { "" } else { "s" },
                utc(e.last_failed_at_ms),
                e.owner,
                if e.current { "" } else { ", admitted since" },
                e.message
            ),
        ]);
    }
    let mut out = format!("{headline}\n{}", table(&["trigger", "value"], rows));
    if !state.recent_runs.is_empty() {
        out.push('\n');
        out.push_str(&render_runs(&state.recent_runs));
    }
    if !state.recent_misfires.is_empty() {
        out.push('\n');
        out.push_str(&render_misfires(&state.recent_misfires));
    }
    if !state.audit.is_empty() {
        out.push('\n');
        out.push_str(&render_audit(&state.audit));
    }
    out
}

pub(super) fn render_recovery(report: &RecoveryReport) -> String {
    let mut out = format!(
        "{} pristine queued runs (the dispatcher's), {} drifted\n",
        report.pristine, report.drifted
    );
    if !report.candidates.is_empty() {
        out.push_str(&table(
            &["run", "trigger", "status", "drift"],
            report.candidates.iter().map(|c| {
                vec![
                    c.run_id.to_string(),
                    TriggerName::new(&c.project_id, &c.trigger_id).to_string(),
                    c.run_status.clone(),
                    c.drift.join("; "),
                ]
            }),
        ));
    }
    out
}

pub(super) fn render_audit(rows: &[AuditView]) -> String {
    let version = |fence: &Option<serde_json::Value>| {
        opt(fence
            .as_ref()
            .and_then(|f| f.get("version"))
            .and_then(serde_json::Value::as_i64))
    };
    table(
        &[
            "id",
            "trigger",
            "action",
            "actor",
            "login",
            "at",
            "version before",
            "version after",
            "reason",
        ],
        rows.iter().map(|a| {
            vec![
                a.audit_id.to_string(),
                TriggerName::new(&a.project_id, &a.trigger_id).to_string(),
                a.action.clone(),
                a.actor.clone(),
                a.db_user.clone(),
                utc(a.at_ms),
                version(&a.fence_before),
                version(&a.fence_after),
                opt(a.reason.clone()),
            ]
        }),
    )
}

/// The summary's retention lines: the horizon, who deletes, the history's size.
fn render_retention(r: &crate::store::retention::RetentionState) -> String {
    let horizon = match r.horizon_ms {
        Some(h) => format!(
            "runs before {} may be deleted (retention horizon); {} deleted in all, last at {}",
            utc(h),
            r.deleted_runs,
            r.last_deleted_at_ms.map_or_else(|| "-".to_owned(), utc)
        ),
        None => "no run deleted yet (no retention horizon)".to_owned(),
    };
    let leader = match (&r.leader, r.lease_expires_at_ms) {
        (Some(leader), Some(until)) => format!(
            ", lease held by {} until {}",
            crate::core::text::clean(leader),
            utc(until)
        ),
        _ => String::new(),
    };
    let sizes: Vec<String> = r
        .history
        .iter()
        .map(|t| {
            format!(
                "{} ~{} rows {}",
                t.table,
                t.rows_estimate.max(0),
                megabytes(t.bytes)
            )
        })
        .collect();
    format!(
        "retention: {horizon}{leader}
history: {}
",
        sizes.join(", ")
    )
}

fn megabytes(bytes: i64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

pub(super) fn render_invariants(report: &InvariantReport) -> String {
    let a = &report.accounting;
    let stopped = if a.stopped_at_horizon {
        " (the retention horizon: runs before it may be deleted, so earlier occurrences are not \
         checked)"
    } else {
        ""
    };
    let accounted = format!(
        "{} occurrences of {} triggers since {}{stopped} accounted for",
        a.occurrences,
        a.triggers,
        utc(a.since_ms)
    );
    if report.ok {
        return format!(
            "every invariant holds ({} runs, {} claims held; {accounted}); every role holds exactly \
             its grants",
            report.counts.runs, report.counts.claims_held
        );
    }
    let mut out = table(
        &["failure"],
        report.failures.iter().map(|f| vec![f.clone()]),
    );
    let listed = a
        .gaps
        .iter()
        .map(|g| (g, "no run, no misfire record"))
        .chain(
            a.duplicates
                .iter()
                .map(|d| (d, "more than one run, or off the pattern")),
        );
    let rows: Vec<Vec<String>> = listed
        .map(|(finding, what)| {
            vec![
                TriggerName::new(&finding.project_id, &finding.trigger_id).to_string(),
                finding.trigger_revision.to_string(),
                utc(finding.occurrence_ms),
                what.to_owned(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push('\n');
        out += &table(&["trigger", "revision", "occurrence", "finding"], rows);
    }
    out
}

pub(super) fn render_misfires(rows: &[MisfireRecord]) -> String {
    table(
        &[
            "trigger",
            "rev",
            "first passed over",
            "last passed over",
            "count",
            "policy",
            "reason",
            "owner",
            "recorded",
        ],
        rows.iter().map(|m| {
            vec![
                TriggerName::new(&m.project_id, &m.trigger_id).to_string(),
                m.trigger_revision.to_string(),
                utc(m.first_occurrence_ms),
                utc(m.last_occurrence_ms),
                misfire_count(m),
                m.policy.clone(),
                m.reason.clone(),
                m.owner.clone(),
                utc(m.recorded_at_ms),
            ]
        }),
    )
}

/// A record's count as people read it: `12`, or `10000+` where counting stopped at its cap.
fn misfire_count(m: &MisfireRecord) -> String {
    if m.occurrences_exact {
        m.occurrences.to_string()
    } else {
        format!("{}+", m.occurrences)
    }
}

pub(super) fn render_load(report: &LoadReport) -> String {
    let load = &report.load;
    let mut out = format!(
        "{} occurrences due from {} over {}, from {} triggers ({} distinct expressions); {}\n",
        load.occurrences,
        utc(load.from_ms),
        span(load.horizon_ms),
        report.triggers,
        report.expressions,
        match (report.busiest_minute_admissions, report.rate_per_s) {
            (Some(n), Some(rate)) => format!(
                "admission times at the busiest minute of the last hour: {n} runs, {rate:.1}/s"
            ),
            _ => "no runs in the last hour to measure an admission rate by".to_owned(),
        }
    );
    out.push_str(&table(
        &["boundary", "occurrences", "expected admission"],
        load.boundaries.iter().map(|b| {
            vec![
                utc(b.at_ms),
                b.occurrences.to_string(),
                opt(b.expected_admission_ms.map(span)),
            ]
        }),
    ));
    out.push('\n');
    for change in &load.dst_changes {
        out.push_str(&format!(
            "daylight saving: {} changes from UTC{:+} to UTC{:+} at {}: {} trigger{} keep{} \
             their wall time, so their instants move by {}; {} occurrence{} moved out of a gap \
             or repeated in a fold\n",
            change.time_zone,
            f64::from(change.offset_before_s) / 3_600.0,
            f64::from(change.offset_after_s) / 3_600.0,
            utc(change.at_ms),
            change.triggers,
            if change.triggers == 1 { "" } else { "s" },
            if change.triggers == 1 { "s" } else { "" },
            span(i64::from(change.offset_before_s - change.offset_after_s) * 1_000),
            change.occurrences_moved,
            if change.occurrences_moved == 1 {
                ""
            } else {
                "s"
            },
        ));
    }
    if !load.capped_expressions.is_empty() {
        out.push_str(&format!(
            "counted only up to {} occurrences each (lower bounds): {}\n",
            crate::core::load::OCCURRENCE_CAP,
            load.capped_expressions.join(", ")
        ));
    }
    out
}
