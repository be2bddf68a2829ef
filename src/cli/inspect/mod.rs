//! `qlsched inspect`: read-only views of the scheduler's state, through the read models `top`
//! also draws (docs/DESIGN.md §5.1). The session is read-only, and the statements need only the
//! observer role's grants. [`run`] opens the session and hands each view to a step of its own;
//! the tables are written by `render`.

mod render;

use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::{Args, Subcommand};
use serde::Serialize;
use tokio_postgres::Client;
use uuid::Uuid;

use super::args::OutputFormat;
use super::args::{Access, at_least};
use super::error::ExitStatus;
use super::output::emit;
use super::{CliError, Global};
use crate::coordinator::duration_ms;
use crate::core::diagnose::Diagnosis;
use crate::core::instant::{InstantArg, parse_since};
use crate::core::outage::{self, Outage, OutageFacts};
use crate::core::time::utc;
use crate::core::{Liveness, TriggerName};
use crate::store::accounting::{AccountingReport, occurrence_accounting};
use crate::store::invariants::{InvariantCounts, invariant_counts};
use crate::store::migrate::{VerifyFinding, check_not_behind, check_ready, verify};
use crate::store::misfires;
use crate::store::observe::{ServerRole, server_role};
use crate::store::read::{
    self, ScheduleFilter, ScheduleState, ScheduleView, Summary, TriggerDetail,
};
use crate::store::recovery::recovery_report;
use crate::store::replicas::{self, ReplicaView};
use crate::store::retention::{RetentionState, retention_state};
use crate::store::{Begin, run_in_transaction};
use crate::store::{SchemaName, StoreError};
use render::{
    render_audit, render_check, render_claims, render_invariants, render_load, render_misfires,
    render_recovery, render_replicas, render_run, render_run_rows, render_schedules,
    render_summary, render_trigger,
};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct InspectArgs {
    /// Only whether there is an outage (no live replica with rows due, rows overdue beyond their
    /// misfire grace, or admissions stopped while rows are due): its headline, likely cause and
    /// next command, and exit 7; one line and exit 0 when there is none. For scripts and probes.
    #[arg(long)]
    pub check: bool,
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
        /// Only runs created within this long (10m; -10m and now-10m say the same).
        #[arg(long, value_parser = parse_since, allow_hyphen_values = true)]
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
    /// Registered replicas: live, stalled (no heartbeat for two cadences), stale (none for lease
    /// + cadence), stopped.
    Replicas,
    /// Misfire records: occurrences passed over beyond their grace, newest first.
    Misfires {
        /// Only records of this trigger.
        #[arg(long, value_name = "PROJECT/TRIGGER")]
        trigger: Option<TriggerName>,
        /// Only records written within this long (1h; -1h and now-1h say the same).
        #[arg(long, value_parser = parse_since, allow_hyphen_values = true)]
        since: Option<Duration>,
        /// At most this many records.
        #[arg(long, default_value_t = 50, allow_negative_numbers = true, value_parser = at_least(1))]
        limit: i64,
    },
    /// The load ahead: the instants with the most occurrences due together over the horizon,
    /// each with the time to admit it at the rate these replicas reached in their busiest minute
    /// of the last hour, and the daylight-saving changes that move occurrences.
    Load {
        /// How far ahead to look (at most 7d).
        #[arg(long, default_value = "1d", value_parser = horizon_arg)]
        horizon: Duration,
        /// Where to start looking: RFC 3339, epoch milliseconds, or relative to the database's
        /// now (now+1d, +6h).
        #[arg(long, value_name = "TIME", value_parser = InstantArg::parse,
              allow_hyphen_values = true, default_value = "now")]
        from: InstantArg,
        /// At most this many boundaries, the most occurrences first.
        #[arg(long, default_value_t = 10, allow_negative_numbers = true, value_parser = at_least(1))]
        limit: i64,
    },
    /// Check what the scheduler promises (one run per occurrence, every occurrence a run or
    /// inside a misfire record, attempts, events, claims) and the grants; exit 1 listing every
    /// failure.
    Invariants {
        /// How far back occurrences are accounted for (at most the 7-day retention of misfire
        /// records).
        #[arg(long, default_value = "1h", value_parser = parse_since, allow_hyphen_values = true)]
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
    clap::builder::PossibleValuesParser::new(ScheduleState::NAMES).try_map(|name| {
        match name.parse::<ScheduleState>()? {
            // The paused rows' own index, whatever the rest of the row says.
            ScheduleState::Paused => Ok(StateFilter::Paused),
            state => Ok::<_, String>(StateFilter::State(state)),
        }
    })
}

pub async fn run(args: InspectArgs, global: &Global) -> Result<(), CliError> {
    // A malformed run id is bad input before any connection is opened.
    let run_id = match &args.what {
        Some(InspectWhat::Run { run_id }) => Some(parse_run_id(run_id)?),
        _ => None,
    };
    let settings = global.connection.settings(Access::Read)?;
    let schema = &global.connection.schema;
    let client = settings.connect(schema, "qlsched inspect").await?;
    let format = global.format;
    if args.check {
        return check(&client, schema, format).await;
    }
    let Some(what) = args.what else {
        return summary(&client, schema, format).await;
    };
    // Every view reads in one READ ONLY transaction, with the schema's settings: an inspecting
    // session cannot write, even through a superuser login, and sets nothing on its session that
    // a transaction-mode pooler would hand on to another client. The view is shown only once the
    // transaction has ended: stdout may block (a pager, a pipe nobody reads), and a transaction
    // held open meanwhile would hold its snapshot and its locks, so that an ACCESS EXCLUSIVE
    // request (a migration, VACUUM FULL) queued behind it queues every replica's claims behind
    // it too. What the view itself failed on is its answer, so the transaction's end carries
    // only its own error.
    let shown = run_in_transaction(&client, schema, Begin::ReadOnly, |client| {
        Box::pin(async move { Ok(view(client, schema, what, run_id, format).await) })
    })
    .await??;
    shown()
}

/// A view read and not yet shown: it writes to stdout once the transaction that read it ended.
type Shown = Box<dyn FnOnce() -> Result<(), CliError> + Send>;

/// Defers `emit`: the view's rows, shown as JSON or as the table `render` makes of them.
fn shown<T: Serialize + Send + 'static>(
    format: OutputFormat,
    value: T,
    render: impl FnOnce(&T) -> String + Send + 'static,
) -> Shown {
    Box::new(move || emit(format, &value, render))
}

/// One view of `inspect`, read inside the transaction [`run`] opened and returned to be shown
/// after it.
async fn view(
    client: &Client,
    schema: &SchemaName,
    what: InspectWhat,
    run_id: Option<Uuid>,
    format: OutputFormat,
) -> Result<Shown, CliError> {
    // `inspect trigger` reports an unready schema as part of its answer. Every other view reads
    // what is there (a schema a newer release migrated too) but needs the tables and columns this
    // binary knows: a schema behind it exits 78 saying so, before any query could fail on a
    // column a pending migration adds.
    if !matches!(what, InspectWhat::Trigger { .. }) {
        check_not_behind(client, schema).await?;
    }
    Ok(match what {
        InspectWhat::Schedules {
            project,
            state,
            owner,
            limit,
        } => {
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
            schedules(client, &filter, format).await?
        }
        InspectWhat::Claims {
            owner,
            expired,
            limit,
        } => shown(
            format,
            claims(client, owner.as_deref(), expired, limit).await?,
            |rows| render_claims(rows),
        ),
        InspectWhat::Runs {
            trigger,
            since,
            limit,
        } => shown(
            format,
            read::runs_with_origin(client, trigger.as_ref(), since.map(duration_ms), limit).await?,
            |rows| render_run_rows(rows),
        ),
        InspectWhat::Run { .. } => match run_id {
            Some(run_id) => shown(format, read::run_detail(client, run_id).await?, render_run),
            None => Box::new(|| Ok(())),
        },
        InspectWhat::Trigger { trigger } => trigger_view(client, schema, &trigger, format).await?,
        InspectWhat::Recovery { limit } => shown(
            format,
            recovery_report(client, limit).await?,
            render_recovery,
        ),
        InspectWhat::Audit { trigger, limit } => shown(
            format,
            read::audit(client, trigger.as_ref(), limit).await?,
            |rows| render_audit(rows),
        ),
        InspectWhat::Replicas => shown(format, replicas::list(client).await?, |rows| {
            render_replicas(rows)
        }),
        InspectWhat::Misfires {
            trigger,
            since,
            limit,
        } => shown(
            format,
            misfires::list(client, trigger.as_ref(), since.map(duration_ms), limit).await?,
            |rows| render_misfires(rows),
        ),
        InspectWhat::Invariants { since } => invariants(client, schema, since, format).await?,
        InspectWhat::Load {
            horizon,
            from,
            limit,
        } => {
            let report = load(client, from, duration_ms(horizon), limit).await?;
            shown(format, report, render_load)
        }
    })
}

/// A run id as typed; a malformed one is bad input (exit 65).
fn parse_run_id(run_id: &str) -> Result<Uuid, CliError> {
    Uuid::parse_str(run_id).map_err(|error| {
        CliError::BadInput(format!(
            "invalid run id \"{}\": {error}",
            crate::core::text::clean(run_id)
        ))
    })
}

/// `inspect` without a view. The first look must not hide what stops every replica: a schema
/// `run` would refuse is named at the top and exits 78, after the counts.
async fn summary(
    client: &Client,
    schema: &SchemaName,
    format: OutputFormat,
) -> Result<(), CliError> {
    // Each read in a READ ONLY transaction of its own (as every view reads, see `run`), so that
    // one that fails on a schema this binary does not know leaves the next to answer.
    let ready = run_in_transaction(client, schema, Begin::ReadOnly, |client| {
        Box::pin(check_ready(client, schema))
    });
    let schema_problem = match ready.await {
        Ok(()) => None,
        Err(StoreError::SchemaNotReady(problem)) => Some(problem),
        Err(error) => return Err(error.into()),
    };
    let summary = match run_in_transaction(client, schema, Begin::ReadOnly, |client| {
        Box::pin(read::summary(client))
    })
    .await
    {
        Ok(summary) => summary,
        // No tables or columns to count (an empty schema, or one behind this binary): the
        // readiness problem says why.
        Err(_) if schema_problem.is_some() => {
            return Err(StoreError::SchemaNotReady(schema_problem.unwrap_or_default()).into());
        }
        Err(error) => return Err(error.into()),
    };
    // A schema without the registry yet (the problem above says so) has no replicas.
    let replicas = match run_in_transaction(client, schema, Begin::ReadOnly, |client| {
        Box::pin(replicas::list(client))
    })
    .await
    {
        Ok(rows) => rows,
        Err(StoreError::SchemaNotReady(_)) => Vec::new(),
        Err(error) => return Err(error.into()),
    };
    // The outage, when there is one, is the first thing said (its facts need the tables a
    // schema not ready may lack: then the schema problem is the headline).
    let outage = match schema_problem {
        Some(_) => None,
        None => outage::classify(&outage_facts(client, schema, &replicas).await?),
    };
    let replicas = replicas
        .into_iter()
        .filter(|r| r.liveness != Liveness::Stopped)
        .collect();
    // A schema without the retention table yet (the problem above says so) has none to show.
    let retention = match run_in_transaction(client, schema, Begin::ReadOnly, |client| {
        Box::pin(retention_state(client))
    })
    .await
    {
        Ok(state) => Some(state),
        Err(_) if schema_problem.is_some() => None,
        Err(error) => return Err(error.into()),
    };
    let report = SummaryReport {
        outage,
        server: run_in_transaction(client, schema, Begin::ReadOnly, |client| {
            Box::pin(server_role(client))
        })
        .await?,
        summary,
        replicas,
        retention,
        schema_problem,
    };
    emit(format, &report, render_summary)?;
    match report.schema_problem {
        None => Ok(()),
        Some(problem) => Err(StoreError::SchemaNotReady(problem).into()),
    }
}

/// The facts an outage is decided from, in a READ ONLY transaction of their own, with the
/// replicas counted from the registry as `replicas` read it.
async fn outage_facts(
    client: &Client,
    schema: &SchemaName,
    replicas: &[ReplicaView],
) -> Result<OutageFacts, CliError> {
    Ok(
        run_in_transaction(client, schema, Begin::ReadOnly, |client| {
            Box::pin(crate::store::top::outage_facts(client, replicas))
        })
        .await?,
    )
}

/// `inspect --check`: the outage, or a line saying there is none; exits 7 on an outage. A schema
/// not ready exits 78 as `inspect` does.
async fn check(client: &Client, schema: &SchemaName, format: OutputFormat) -> Result<(), CliError> {
    run_in_transaction(client, schema, Begin::ReadOnly, |client| {
        Box::pin(check_ready(client, schema))
    })
    .await?;
    let replicas = run_in_transaction(client, schema, Begin::ReadOnly, |client| {
        Box::pin(replicas::list(client))
    })
    .await?;
    let facts = outage_facts(client, schema, &replicas).await?;
    let report = CheckReport {
        outage: outage::classify(&facts),
        live_replicas: facts.live_replicas,
        registered_replicas: facts.registered_replicas,
        due_rows: facts.due_rows,
        overdue_beyond_grace: facts.overdue_beyond_grace,
        oldest_due_ms: facts.oldest_due_ms,
        admissions_last_minute: facts.admissions_last_minute,
    };
    emit(format, &report, render_check)?;
    match report.outage {
        None => Ok(()),
        Some(outage) => Err(CliError::Findings {
            message: outage.headline,
            status: ExitStatus::Outage,
        }),
    }
}

/// `inspect schedules`: the rows, then who paused which and why.
async fn schedules(
    client: &Client,
    filter: &ScheduleFilter,
    format: OutputFormat,
) -> Result<Shown, CliError> {
    let rows = read::schedules_with_pause(client, filter).await?;
    Ok(shown(format, rows, |rows| {
        let views: Vec<ScheduleView> = rows.iter().map(|r| r.schedule.clone()).collect();
        let mut out = render_schedules(&views);
        for (r, p) in rows.iter().filter_map(|r| Some((r, r.paused.as_ref()?))) {
            out.push_str(&format!(
                "\n{} paused by {} at {}: {}",
                TriggerName::new(&r.project_id, &r.trigger_id),
                p.paused_by,
                utc(p.paused_at_ms),
                p.reason.as_deref().unwrap_or("no reason given")
            ));
        }
        out
    }))
}

/// `--horizon`: a duration up to a week.
fn horizon_arg(text: &str) -> Result<Duration, String> {
    let horizon = super::args::duration_arg(text)?;
    if horizon.is_zero() || horizon > Duration::from_secs(7 * 86_400) {
        return Err(format!("{text} is out of range: from 1ms to 7d"));
    }
    Ok(horizon)
}

/// The admission rate of the busiest minute, in occurrences a second.
pub(crate) fn busiest_rate(busiest_minute: Option<i64>) -> Option<f64> {
    busiest_minute.filter(|n| *n > 0).map(|n| n as f64 / 60.0)
}

/// `inspect load`: the claimable triggers grouped by expression and zone, evaluated over the
/// horizon by the core, at the busiest recent rate.
pub(crate) async fn load(
    client: &Client,
    from: InstantArg,
    horizon_ms: i64,
    limit: i64,
) -> Result<LoadReport, CliError> {
    let (now_ms, busiest) = read::load::busiest_minute(client).await?;
    let groups = read::load::trigger_groups(client).await?;
    let rate_per_s = busiest_rate(busiest);
    Ok(LoadReport {
        triggers: groups.iter().map(|g| g.triggers).sum(),
        expressions: groups.len() as u64,
        busiest_minute_admissions: busiest,
        rate_per_s,
        load: crate::core::load::load_ahead(
            &groups,
            from.resolve(now_ms),
            horizon_ms,
            usize::try_from(limit).unwrap_or(usize::MAX),
            rate_per_s,
        ),
    })
}

/// `inspect claims`: each claim with its owner as the replica registry sees it.
async fn claims(
    client: &Client,
    owner: Option<&str>,
    expired: bool,
    limit: i64,
) -> Result<Vec<ClaimShown>, CliError> {
    let claims = read::claims(client, owner, expired, limit).await?;
    let replicas = replicas::list(client).await?;
    Ok(claims
        .into_iter()
        .map(|claim| ClaimShown {
            owner_liveness: replicas
                .iter()
                .find(|r| r.owner == claim.owner)
                .map(|r| r.liveness),
            claim,
        })
        .collect())
}

/// `inspect trigger P/T`: why it is not firing, what that rests on, and its occurrences. An
/// unready schema is the answer, and exits 78.
async fn trigger_view(
    client: &Client,
    schema: &SchemaName,
    trigger: &TriggerName,
    format: OutputFormat,
) -> Result<Shown, CliError> {
    let detail = read::trigger_detail(client, schema, trigger).await?;
    let occurrences = detail.state.as_ref().and_then(|state| {
        let d = &state.definition;
        super::cron::trigger_occurrences(&d.cron_expr, &d.time_zone, state.now_ms)
    });
    Ok(Box::new(move || {
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
            Diagnosis::SchemaNotReady { detail } => {
                Err(StoreError::SchemaNotReady(detail.clone()).into())
            }
            _ => Ok(()),
        }
    }))
}

/// `inspect invariants`: exits 1 listing every failure.
async fn invariants(
    client: &Client,
    schema: &SchemaName,
    since: Duration,
    format: OutputFormat,
) -> Result<Shown, CliError> {
    let report = InvariantReport::new(
        invariant_counts(client, duration_ms(since)).await?,
        occurrence_accounting(client, duration_ms(since)).await?,
        verify(client, schema).await?,
    );
    Ok(Box::new(move || {
        emit(format, &report, render_invariants)?;
        if report.ok {
            Ok(())
        } else {
            Err(CliError::Findings {
                message: format!("{} invariant(s) failed", report.failures.len()),
                status: ExitStatus::Unexpected,
            })
        }
    }))
}

/// `inspect invariants`: the counts, and every failure (violated promise or grant difference).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct InvariantReport {
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

/// `inspect load`: the boundaries ahead and the rate they are measured against.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LoadReport {
    /// Claimable triggers (a parked one fires nothing).
    pub triggers: u64,
    /// Distinct expression and zone pairs among them, each evaluated once.
    pub expressions: u64,
    /// The most runs created in one minute of the last hour; null when none were.
    pub busiest_minute_admissions: Option<i64>,
    /// That minute's rate, admissions a second: what the expected admission times assume.
    pub rate_per_s: Option<f64>,
    #[serde(flatten)]
    pub load: crate::core::load::LoadAhead,
}

/// `inspect --check`: the outage, if any, and the counts it was decided from.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CheckReport {
    /// The outage, most severe first when several hold; null when there is none (exit 0).
    pub outage: Option<Outage>,
    /// Replicas whose heartbeat is live.
    pub live_replicas: i64,
    /// Replicas the registry remembers, in any state (none: no replica ran here, or none within
    /// its --forget-stale-after, 15 minutes by default; a week for rows of releases before
    /// 0.2.0).
    pub registered_replicas: i64,
    /// Claimable rows due now, claimed or not (counted up to 1000).
    pub due_rows: i64,
    /// Of those, rows later than their misfire grace plus 10 s.
    pub overdue_beyond_grace: i64,
    /// How long the most overdue row has been due; null when none is.
    pub oldest_due_ms: Option<i64>,
    pub admissions_last_minute: i64,
}

/// `inspect` without a view: the summary, and what keeps the schema from being ready.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SummaryReport {
    /// The outage, when there is one (the first line of the table): its headline, likely cause
    /// and next command; null otherwise, and when the schema is not ready.
    pub outage: Option<Outage>,
    /// Primary, or a standby with its replay lag: a standby's answers may be behind.
    pub server: ServerRole,
    #[serde(flatten)]
    pub summary: Summary,
    /// Registered replicas that have not stopped: stale ones first, then stalled, then live
    /// (as inspect replicas says).
    pub replicas: Vec<ReplicaView>,
    /// The runs' retention: its horizon, who deletes, and the history's size (null for a
    /// schema not migrated that far).
    pub retention: Option<RetentionState>,
    /// Why `run` would refuse this schema (`migrate verify` has the details); null when ready.
    pub schema_problem: Option<String>,
}

/// `inspect claims`: a claim, and how alive its owner is.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ClaimShown {
    #[serde(flatten)]
    pub claim: read::ClaimView,
    /// The owner in the replica registry at this instant: live, stalled (hung or cut off: its
    /// claims protect rows nobody admits), stale or stopped (dead: `qlsched expire` them); null
    /// when it is not registered (an operator's `qlsched claim`).
    pub owner_liveness: Option<Liveness>,
}

/// `inspect trigger` with the trigger's previous and next occurrences.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct TriggerShown<'a> {
    #[serde(flatten)]
    detail: &'a TriggerDetail,
    occurrences: Option<super::cron::TriggerOccurrences>,
}
