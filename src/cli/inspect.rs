//! `qlsched inspect`: read-only views of the scheduler's state, through the read models `top`
//! also draws (docs/DESIGN.md §5.1). The session is read-only, and the statements need only the
//! observer role's grants.

use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::{Args, Subcommand};
use serde::Serialize;

use super::args::{at_least, duration_arg};
use super::error::exit;
use super::output::{emit, opt, table};
use super::{CliError, Global};
use crate::coordinator::duration_ms;
use crate::core::TriggerName;
use crate::core::diagnose::Diagnosis;
use crate::core::time::{span, utc};
use crate::store::StoreError;
use crate::store::accounting::{AccountingReport, occurrence_accounting};
use crate::store::invariants::{InvariantCounts, invariant_counts};
use crate::store::migrate::{VerifyFinding, check_ready, require_ledger, verify};
use crate::store::misfires::{self, MisfireRecord};
use crate::store::read::{
    self, AuditView, ClaimView, RunDetail, RunView, ScheduleFilter, ScheduleState, ScheduleView,
    Summary, TriggerDetail,
};
use crate::store::recovery::{RecoveryReport, recovery_report};
use crate::store::replicas::{self, ReplicaView};

#[derive(Debug, Args)]
pub struct InspectArgs {
    #[command(subcommand)]
    pub what: Option<InspectWhat>,
}

#[derive(Debug, Subcommand)]
pub enum InspectWhat {
    /// Schedule rows, most urgent first (claim order).
    Schedules {
        /// Only rows of this project.
        #[arg(long, value_name = "PROJECT")]
        project: Option<String>,
        /// Only rows in this state (`paused`: rows an operator paused, whatever else holds).
        #[arg(long, value_parser = state_arg())]
        state: Option<StateFilter>,
        /// Only rows claimed by this owner.
        #[arg(long)]
        owner: Option<String>,
        /// At most this many rows.
        #[arg(long, default_value_t = 50, allow_negative_numbers = true, value_parser = at_least(1))]
        limit: i64,
    },
    /// Claims held, by owner, with the lease left in database time.
    Claims {
        /// Only claims of this owner.
        #[arg(long)]
        owner: Option<String>,
        /// Only claims past their lease that nobody took over.
        #[arg(long)]
        expired: bool,
        /// At most this many claims.
        #[arg(long, default_value_t = 100, allow_negative_numbers = true, value_parser = at_least(1))]
        limit: i64,
    },
    /// Admitted runs, newest first.
    Runs {
        /// Only runs of this trigger.
        #[arg(long, value_name = "PROJECT/TRIGGER")]
        trigger: Option<TriggerName>,
        /// Only runs created within this long (e.g. 10m).
        #[arg(long, value_parser = duration_arg, allow_hyphen_values = true)]
        since: Option<Duration>,
        /// At most this many runs.
        #[arg(long, default_value_t = 50, allow_negative_numbers = true, value_parser = at_least(1))]
        limit: i64,
    },
    /// One run with its attempt and events.
    Run {
        /// The run id (a UUID).
        #[arg(value_name = "RUN_ID")]
        run_id: String,
    },
    /// A trigger's definition, cursor, claim, recent runs and audit, and why it is not firing.
    Trigger {
        /// The trigger, as PROJECT/TRIGGER.
        #[arg(value_name = "PROJECT/TRIGGER")]
        trigger: TriggerName,
    },
    /// Queued runs left to the dispatcher (pristine) and drifted ones (recovery candidates).
    Recovery {
        /// At most this many candidates listed, oldest run first.
        #[arg(long, default_value_t = 20, allow_negative_numbers = true, value_parser = at_least(1))]
        limit: i64,
    },
    /// Operator actions on schedule rows, newest first.
    Audit {
        /// Only actions on this trigger.
        #[arg(long, value_name = "PROJECT/TRIGGER")]
        trigger: Option<TriggerName>,
        /// At most this many audit rows.
        #[arg(long, default_value_t = 50, allow_negative_numbers = true, value_parser = at_least(1))]
        limit: i64,
    },
    /// Registered replicas: live, stale (no heartbeat for longer than lease + cadence), stopped.
    Replicas,
    /// Misfire records: occurrences passed over beyond their grace, newest first.
    Misfires {
        /// Only records of this trigger.
        #[arg(long, value_name = "PROJECT/TRIGGER")]
        trigger: Option<TriggerName>,
        /// Only records written within this long (e.g. 1h).
        #[arg(long, value_parser = duration_arg, allow_hyphen_values = true)]
        since: Option<Duration>,
        /// At most this many records.
        #[arg(long, default_value_t = 50, allow_negative_numbers = true, value_parser = at_least(1))]
        limit: i64,
    },
    /// Check what the scheduler promises (one run per occurrence, every occurrence a run or
    /// inside a misfire record, attempts, events, claims) and the grants; exit 1 listing every
    /// failure.
    Invariants {
        /// How far back occurrences are accounted for (at most the 7-day retention of misfire
        /// records).
        #[arg(long, default_value = "1h", value_parser = duration_arg, allow_hyphen_values = true)]
        since: Duration,
    },
}

/// `--state`: a schedule state, or `paused`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    State(ScheduleState),
    Paused,
}

fn state_arg() -> impl TypedValueParser<Value = StateFilter> {
    clap::builder::PossibleValuesParser::new(ScheduleState::NAMES.into_iter().chain(["paused"]))
        .try_map(|name| match name.as_str() {
            "paused" => Ok(StateFilter::Paused),
            other => other.parse::<ScheduleState>().map(StateFilter::State),
        })
}

pub async fn run(args: InspectArgs, global: &Global) -> Result<(), CliError> {
    let run_id = match &args.what {
        Some(InspectWhat::Run { run_id }) => {
            Some(uuid::Uuid::parse_str(run_id).map_err(|error| {
                CliError::BadInput(format!(
                    "invalid run id \"{}\": {error}",
                    crate::core::text::clean(run_id)
                ))
            })?)
        }
        _ => None,
    };
    let settings = global.connection.settings()?;
    let schema = &global.connection.schema;
    let client = settings.connect(schema, "qlsched inspect").await?;
    read::read_only(&client).await?;
    // The summary and `inspect trigger` report an unready schema as part of their answer. Every
    // other view reads what is there (during an upgrade too) but needs the tables, and says why
    // they are missing rather than which.
    if !matches!(args.what, None | Some(InspectWhat::Trigger { .. })) {
        require_ledger(&client, schema).await?;
    }
    let format = global.format;
    match args.what {
        None => {
            // The first look must not hide what stops every replica: a schema `run` would refuse
            // is named at the top and exits 78, after the counts.
            let schema_problem = match check_ready(&client, schema).await {
                Ok(()) => None,
                Err(StoreError::SchemaNotReady(problem)) => Some(problem),
                Err(error) => return Err(error.into()),
            };
            let summary = match read::summary(&client).await {
                Ok(summary) => summary,
                // No tables to count (an empty schema): the readiness problem says why.
                Err(StoreError::SchemaNotReady(_)) if schema_problem.is_some() => {
                    return Err(
                        StoreError::SchemaNotReady(schema_problem.unwrap_or_default()).into(),
                    );
                }
                Err(error) => return Err(error.into()),
            };
            // A schema without the registry yet (the problem above says so) has no replicas.
            let replicas = match replicas::list(&client).await {
                Ok(rows) => rows,
                Err(StoreError::SchemaNotReady(_)) => Vec::new(),
                Err(error) => return Err(error.into()),
            };
            let replicas = replicas
                .into_iter()
                .filter(|r| r.liveness != "stopped")
                .collect();
            let report = SummaryReport {
                summary,
                replicas,
                schema_problem,
            };
            emit(format, &report, render_summary)?;
            match report.schema_problem {
                None => Ok(()),
                Some(problem) => Err(CliError::Findings {
                    message: format!("schema not ready: {problem}"),
                    code: exit::CONFIG,
                }),
            }
        }
        Some(InspectWhat::Schedules {
            project,
            state,
            owner,
            limit,
        }) => {
            let filter = ScheduleFilter {
                project_id: project,
                state: match state {
                    Some(StateFilter::State(state)) => Some(state),
                    _ => None,
                },
                paused: state == Some(StateFilter::Paused),
                owner,
                limit,
            };
            let rows = read::schedules_with_pause(&client, &filter).await?;
            emit(format, &rows, |rows| {
                let views: Vec<ScheduleView> = rows.iter().map(|r| r.schedule.clone()).collect();
                let mut out = render_schedules(&views);
                for row in rows.iter().filter_map(|r| Some((r, r.paused.as_ref()?))) {
                    let (r, p) = row;
                    out.push_str(&format!(
                        "\n{} paused by {} at {}: {}",
                        TriggerName::new(&r.project_id, &r.trigger_id),
                        p.paused_by,
                        utc(p.paused_at_ms),
                        p.reason.as_deref().unwrap_or("no reason given")
                    ));
                }
                out
            })
        }
        Some(InspectWhat::Claims {
            owner,
            expired,
            limit,
        }) => emit(
            format,
            &read::claims(&client, owner.as_deref(), expired, limit).await?,
            |rows| render_claims(rows),
        ),
        Some(InspectWhat::Runs {
            trigger,
            since,
            limit,
        }) => emit(
            format,
            &read::runs_with_origin(&client, trigger.as_ref(), since.map(duration_ms), limit)
                .await?,
            |rows| render_run_rows(rows),
        ),
        Some(InspectWhat::Run { .. }) => {
            let Some(run_id) = run_id else {
                return Ok(());
            };
            emit(
                format,
                &read::run_detail(&client, run_id).await?,
                render_run,
            )
        }
        Some(InspectWhat::Trigger { trigger }) => {
            let detail = read::trigger_detail(&client, schema, &trigger).await?;
            let occurrences = detail.state.as_ref().and_then(|state| {
                let d = &state.definition;
                super::cron::trigger_occurrences(&d.cron_expr, &d.time_zone, state.now_ms)
            });
            let shown = TriggerShown {
                detail: &detail,
                occurrences,
            };
            emit(format, &shown, |shown| {
                let mut out = render_trigger(shown.detail);
                if let Some(o) = &shown.occurrences {
                    out = format!("{out}\n{}", super::cron::render_trigger_occurrences(o));
                }
                out
            })?;
            match &detail.why_not_firing {
                Diagnosis::SchemaNotReady { .. } => Err(CliError::Findings {
                    message: detail.why_not_firing.reason(),
                    code: exit::CONFIG,
                }),
                _ => Ok(()),
            }
        }
        Some(InspectWhat::Recovery { limit }) => emit(
            format,
            &recovery_report(&client, limit).await?,
            render_recovery,
        ),
        Some(InspectWhat::Audit { trigger, limit }) => emit(
            format,
            &read::audit(&client, trigger.as_ref(), limit).await?,
            |rows| render_audit(rows),
        ),
        Some(InspectWhat::Replicas) => emit(format, &replicas::list(&client).await?, |rows| {
            render_replicas(rows)
        }),
        Some(InspectWhat::Misfires {
            trigger,
            since,
            limit,
        }) => emit(
            format,
            &misfires::list(&client, trigger.as_ref(), since.map(duration_ms), limit).await?,
            |rows| render_misfires(rows),
        ),
        Some(InspectWhat::Invariants { since }) => {
            let report = InvariantReport::new(
                invariant_counts(&client).await?,
                occurrence_accounting(&client, duration_ms(since)).await?,
                verify(&client, schema).await?,
            );
            emit(format, &report, render_invariants)?;
            if report.ok {
                Ok(())
            } else {
                Err(CliError::Findings {
                    message: format!("{} invariant(s) failed", report.failures.len()),
                    code: exit::UNEXPECTED,
                })
            }
        }
    }
}

/// `inspect invariants`: the counts, and every failure (violated promise or grant difference).
#[derive(Debug, Serialize)]
struct InvariantReport {
    ok: bool,
    counts: InvariantCounts,
    accounting: AccountingReport,
    failures: Vec<String>,
    grants: Vec<VerifyFinding>,
}

impl InvariantReport {
    fn new(
        counts: InvariantCounts,
        accounting: AccountingReport,
        grants: Vec<VerifyFinding>,
    ) -> Self {
        let mut failures = counts.violations();
        failures.extend(accounting.violations());
        failures.extend(grants.iter().map(|f| f.message.clone()));
        InvariantReport {
            ok: failures.is_empty(),
            counts,
            accounting,
            failures,
            grants,
        }
    }
}

/// `inspect` without a view: the summary, and what keeps the schema from being ready.
#[derive(Debug, Clone, Serialize)]
pub struct SummaryReport {
    #[serde(flatten)]
    pub summary: Summary,
    /// Registered replicas that have not stopped: live ones (a heartbeat within their lease and
    /// cadence), then stale ones.
    pub replicas: Vec<ReplicaView>,
    /// Why `run` would refuse this schema (`migrate verify` has the details); null when ready.
    pub schema_problem: Option<String>,
}

fn render_summary(report: &SummaryReport) -> String {
    let s = &report.summary;
    let c = &s.schedules;
    let mut out = match &report.schema_problem {
        Some(problem) => format!(
            "SCHEMA NOT READY, replicas refuse to start: {problem} (see `qlsched migrate verify`)\n"
        ),
        None => String::new(),
    };
    out += &table(
        &["schedules", "rows"],
        [
            ("due", c.due),
            ("claimed", c.claimed),
            ("expired claim", c.expired_claim),
            ("not due", c.not_due),
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
    }
    let live = report
        .replicas
        .iter()
        .filter(|r| r.liveness == "live")
        .count();
    out.push_str(&format!(
        "replicas: {live} live{}\n",
        match report.replicas.len() - live {
            0 => String::new(),
            stale => format!(", {stale} stale (no heartbeat for longer than lease + cadence)"),
        }
    ));
    if !report.replicas.is_empty() {
        out.push_str(&render_replicas(&report.replicas));
    }
    out
}

fn render_replicas(rows: &[ReplicaView]) -> String {
    table(
        &[
            "replica",
            "liveness",
            "host",
            "pid",
            "heartbeat",
            "started",
            "rounds (failed)",
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
                    r.liveness.clone()
                },
                crate::core::text::clean(&r.host),
                r.pid.to_string(),
                format!("{} ago", span(r.heartbeat_age_ms)),
                utc(r.started_at_ms),
                format!("{} ({})", r.rounds, r.failed_rounds),
                r.admissions.to_string(),
                r.misfires.to_string(),
                r.fence_losses.to_string(),
                opt(r.last_error.as_deref().map(crate::core::text::clean)),
            ]
        }),
    )
}

fn render_schedules(rows: &[ScheduleView]) -> String {
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

fn render_claims(rows: &[ClaimView]) -> String {
    table(
        &[
            "trigger",
            "owner",
            "version",
            "token",
            "acquired",
            "lease left",
        ],
        rows.iter().map(|c| {
            vec![
                TriggerName::new(&c.project_id, &c.trigger_id).to_string(),
                c.owner.clone(),
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
    )
}

fn render_runs(rows: &[RunView]) -> String {
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
fn render_run_rows(rows: &[read::RunRow]) -> String {
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

fn render_run(detail: &RunDetail) -> String {
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

/// `inspect trigger` with the trigger's previous and next occurrences.
#[derive(serde::Serialize)]
struct TriggerShown<'a> {
    #[serde(flatten)]
    detail: &'a TriggerDetail,
    occurrences: Option<super::cron::TriggerOccurrences>,
}

fn render_trigger(detail: &TriggerDetail) -> String {
    let why = &detail.why_not_firing;
    let headline = format!(
        "{}: {}\nfix: {}",
        TriggerName::new(&detail.project_id, &detail.trigger_id),
        why.reason(),
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

fn render_recovery(report: &RecoveryReport) -> String {
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

fn render_audit(rows: &[AuditView]) -> String {
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
                utc(a.at_ms),
                version(&a.fence_before),
                version(&a.fence_after),
                opt(a.reason.clone()),
            ]
        }),
    )
}

fn render_invariants(report: &InvariantReport) -> String {
    let a = &report.accounting;
    let accounted = format!(
        "{} occurrences of {} triggers since {} accounted for",
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

fn render_misfires(rows: &[MisfireRecord]) -> String {
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
