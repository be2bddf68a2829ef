//! `qlsched backfill P/T --from T1 --to T2`: admits the trigger's past cron occurrences in the
//! window that have no run (the library's [`crate::backfill`]); this parses, asks, shows the
//! progress and the report, and turns SIGINT and SIGTERM into the backfill's stop.

use std::io::IsTerminal;

use clap::Args;
use serde::Serialize;

use super::args::{Access, ConfirmArgs};
use super::identity::operator_name;
use super::output::{emit, table};
use super::prompt::{ask, interactive};
use super::signals::Shutdown;
use super::{CliError, ExitStatus, Global};
use crate::backfill::{Backfill, BackfillError, BackfillRequest};
use crate::core::TriggerName;
use crate::core::instant::{InstantArg, parse_since};
use crate::core::time::utc;
use crate::stop::StopToken;
use crate::store::{misfires, read};

#[derive(Debug, Args)]
pub struct BackfillArgs {
    /// The trigger to backfill, as PROJECT/TRIGGER.
    #[arg(value_name = "PROJECT/TRIGGER")]
    pub trigger: TriggerName,

    /// The window's first instant, included: RFC 3339, epoch milliseconds, or relative to the
    /// database's now (now-2h, -2h).
    #[arg(long, value_name = "TIME", value_parser = InstantArg::parse,
          allow_hyphen_values = true, required_unless_present = "since")]
    pub from: Option<InstantArg>,

    /// The window as a look-back from the database's now (2h; -2h and now-2h say the same):
    /// --from now-2h.
    #[arg(long, value_name = "SPAN", value_parser = parse_since, allow_hyphen_values = true,
          conflicts_with = "from")]
    pub since: Option<std::time::Duration>,

    /// The window's last instant, included; must be before the database's now (`now`: the
    /// last millisecond before it).
    #[arg(long, value_name = "TIME", value_parser = InstantArg::parse,
          allow_hyphen_values = true, default_value = "now")]
    pub to: InstantArg,

    /// Admit the window's occurrences from before the trigger was first published too; without
    /// it they are left out, and the report counts them.
    #[arg(long)]
    pub before_creation: bool,

    /// Refuse (exit 65, nothing written) a window with more occurrences than this.
    #[arg(long, value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max: u64,

    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct BackfillReport {
    dry_run: bool,
    project_id: String,
    trigger_id: String,
    trigger_revision: i64,
    from_ms: i64,
    to_ms: i64,
    /// When the trigger was first published.
    first_published_at_ms: i64,
    /// Occurrences in the window from before then, left out (0 with --before-creation).
    before_creation: u64,
    /// Occurrences of the pattern in the window (from its first publication on, unless
    /// --before-creation).
    occurrences: u64,
    /// Occurrences that had a run already (the scheduler's, an earlier backfill's).
    already_admitted: u64,
    /// Admitted by this backfill (with --dry-run: would be).
    admitted: u64,
    /// At or after the trigger's cursor: the scheduler's to admit or record.
    left_to_scheduler: u64,
    transactions: u64,
    /// Stopped by SIGINT or SIGTERM between transactions; a rerun continues.
    interrupted: bool,
    /// When a replica first ran here, as far as the registry and the runs tell (null when
    /// neither does): occurrences before it were never missed, there was no scheduler yet.
    first_scheduler_start_ms: Option<i64>,
    /// Of the occurrences, those before that start (counted with --dry-run only).
    before_first_scheduler: u64,
    /// Of the occurrences, those inside a misfire record still kept: a replica passed them over
    /// on purpose, beyond their grace or while paused (counted with --dry-run only).
    passed_over: u64,
    /// With --dry-run, the occurrences (all of them up to 20, else the first and last 10), each
    /// with what is known of it; empty otherwise.
    listed: Vec<ListedOccurrence>,
}

/// One occurrence of a dry run's list.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ListedOccurrence {
    at_ms: i64,
    note: OccurrenceNote,
    /// For passed_over: the replica or operator whose misfire record holds it.
    by: Option<String>,
}

/// What a dry run knows of an occurrence: it has a run already (the backfill leaves it), a
/// misfire record holds it (a replica passed it over; the backfill admits it), it falls before
/// the first replica started (never missed: nothing ran yet; the backfill admits it), or none of
/// these (admitted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OccurrenceNote {
    HasRun,
    PassedOver,
    BeforeFirstScheduler,
    Missed,
}

/// How many occurrences a dry run lists in full; past it, the first and last half as many.
const LISTED: usize = 20;

/// What a dry run tells of the planned occurrences: the counts over all of them, and the list.
struct DryRunNotes {
    first_scheduler_start_ms: Option<i64>,
    before_first_scheduler: u64,
    passed_over: u64,
    listed: Vec<ListedOccurrence>,
}

async fn dry_run_notes(
    store: &crate::store::Store,
    trigger: &TriggerName,
    occurrences: &[i64],
) -> Result<DryRunNotes, CliError> {
    let shown: Vec<i64> = if occurrences.len() <= LISTED {
        occurrences.to_vec()
    } else {
        let half = LISTED / 2;
        let mut shown = occurrences[..half].to_vec();
        shown.extend_from_slice(&occurrences[occurrences.len() - half..]);
        shown
    };
    // One read-only transaction of its own, as every read of qlsched: behind a transaction-mode
    // pooler a statement on a bare session may land on a server connection without the schema.
    let (first_scheduler_start_ms, records, admitted) = {
        let (shown, trigger) = (shown.clone(), trigger.clone());
        store
            .read(|client| {
                Box::pin(async move {
                    Ok((
                        read::first_scheduler_start(client).await?,
                        misfires::list(client, Some(&trigger), None, 1_000).await?,
                        read::admitted_among(client, &trigger, &shown).await?,
                    ))
                })
            })
            .await?
    };
    let record_of = |at: i64| {
        records
            .iter()
            .find(|r| (r.first_occurrence_ms..=r.last_occurrence_ms).contains(&at))
    };
    let before = |at: i64| first_scheduler_start_ms.is_some_and(|start| at < start);
    let listed = shown
        .iter()
        .map(|&at_ms| {
            let record = record_of(at_ms);
            let note = if admitted.contains(&at_ms) {
                OccurrenceNote::HasRun
            } else if record.is_some() {
                OccurrenceNote::PassedOver
            } else if before(at_ms) {
                OccurrenceNote::BeforeFirstScheduler
            } else {
                OccurrenceNote::Missed
            };
            ListedOccurrence {
                at_ms,
                note,
                by: record
                    .filter(|_| note == OccurrenceNote::PassedOver)
                    .map(|r| r.owner.clone()),
            }
        })
        .collect();
    let count = |f: &dyn Fn(i64) -> bool| occurrences.iter().filter(|&&at| f(at)).count() as u64;
    Ok(DryRunNotes {
        first_scheduler_start_ms,
        before_first_scheduler: count(&before),
        passed_over: count(&|at| record_of(at).is_some()),
        listed,
    })
}

pub async fn run(args: BackfillArgs, global: &Global) -> Result<(), CliError> {
    let from = match (args.from, args.since) {
        (Some(from), _) => from,
        (None, Some(since)) => {
            InstantArg::FromNow(-i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
        }
        (None, None) => return Err(CliError::Usage("--from or --since is required".into())),
    };
    let request = BackfillRequest {
        trigger: args.trigger,
        from,
        to: args.to,
        before_creation: args.before_creation,
        max: args.max,
    };
    request.check().map_err(refused)?;
    args.confirm.require_confirmable("backfilling a trigger")?;
    let store = super::fire::open(
        global,
        "qlsched backfill",
        // A dry run locks the rows and writes before rolling back: it needs the primary.
        Access::Write,
    )
    .await?;
    let plan = Backfill::plan(&store, request).await.map_err(refused)?;
    let (request, target) = (&plan.request, &plan.target);
    let dry_run = args.confirm.dry_run;
    if !args.confirm.yes && !dry_run && interactive() {
        let question = format!(
            "backfill {} (revision {}): {} occurrences from {} to {}, those without a run{}? \
             [y/N]",
            request.trigger,
            target.trigger_revision,
            plan.occurrences.len(),
            utc(plan.from_ms),
            utc(plan.to_ms),
            if plan.before_creation > 0 {
                format!(
                    " ({} before its first publication at {} left out)",
                    plan.before_creation,
                    utc(target.created_at_ms)
                )
            } else {
                String::new()
            }
        );
        if ask(&question).await? != "y" {
            return Err(CliError::Usage("not confirmed; nothing admitted".into()));
        }
    }
    // SIGINT and SIGTERM end the backfill between transactions, never inside one.
    let stop = StopToken::new();
    let listener = Shutdown::install()?.trip(stop.clone());
    let progress = std::io::stderr().is_terminal() && !dry_run;
    let outcome = plan
        .run(&operator_name(), dry_run, &stop, |done| {
            if progress {
                eprint!(
                    "\rbackfill {}: {}/{} occurrences, {} admitted",
                    request.trigger, done.done, done.total, done.admitted
                );
            }
        })
        .await;
    listener.abort();
    let outcome = outcome?;
    let Backfill {
        request,
        target,
        requested_from_ms,
        to_ms,
        before_creation,
        occurrences,
        ..
    } = plan;
    let notes = if dry_run {
        Some(dry_run_notes(&store, &request.trigger, &occurrences).await?)
    } else {
        None
    };
    if progress {
        eprintln!();
    }
    let report = BackfillReport {
        dry_run,
        project_id: request.trigger.project_id.clone(),
        trigger_id: request.trigger.trigger_id.clone(),
        trigger_revision: target.trigger_revision,
        from_ms: requested_from_ms,
        to_ms,
        first_published_at_ms: target.created_at_ms,
        before_creation,
        occurrences: occurrences.len() as u64,
        already_admitted: outcome.total.existing,
        admitted: outcome.total.admitted,
        left_to_scheduler: outcome.total.left_to_scheduler,
        transactions: outcome.transactions,
        interrupted: outcome.interrupted,
        first_scheduler_start_ms: notes.as_ref().and_then(|n| n.first_scheduler_start_ms),
        before_first_scheduler: notes.as_ref().map_or(0, |n| n.before_first_scheduler),
        passed_over: notes.as_ref().map_or(0, |n| n.passed_over),
        listed: notes.map(|n| n.listed).unwrap_or_default(),
    };
    emit(global.format, &report, render)?;
    if outcome.interrupted {
        return Err(CliError::Findings {
            message: format!(
                "interrupted after {} transactions ({} admitted); the same command continues \
                 where this one stopped",
                outcome.transactions, report.admitted
            ),
            status: ExitStatus::Interrupted,
        });
    }
    Ok(())
}

/// The library's refusals are bad input (exit 65), as they were when they were checked here.
fn refused(error: BackfillError) -> CliError {
    match error {
        BackfillError::Refused(text) => CliError::BadInput(text),
        BackfillError::Core(error) => error.into(),
        BackfillError::Store(error) => error.into(),
    }
}

fn render(r: &BackfillReport) -> String {
    let rows = vec![
        vec![
            "trigger".to_owned(),
            format!(
                "{} (revision {})",
                TriggerName::new(&r.project_id, &r.trigger_id),
                r.trigger_revision
            ),
        ],
        vec![
            "window".to_owned(),
            format!("{} to {}", utc(r.from_ms), utc(r.to_ms)),
        ],
        vec![
            "before the trigger existed".to_owned(),
            if r.before_creation > 0 {
                format!(
                    "{} left out (first published {}; --before-creation admits them)",
                    r.before_creation,
                    utc(r.first_published_at_ms)
                )
            } else {
                format!("none (first published {})", utc(r.first_published_at_ms))
            },
        ],
        vec!["occurrences".to_owned(), r.occurrences.to_string()],
        vec![
            "already admitted".to_owned(),
            r.already_admitted.to_string(),
        ],
        vec![
            if r.dry_run {
                "would admit"
            } else {
                "admitted now"
            }
            .to_owned(),
            r.admitted.to_string(),
        ],
        vec![
            "left to the scheduler".to_owned(),
            r.left_to_scheduler.to_string(),
        ],
        vec!["transactions".to_owned(), r.transactions.to_string()],
    ];
    let mut out = table(&["backfill", "value"], rows);
    if !r.dry_run {
        return out;
    }
    out.push_str(&format!(
        "\nfirst replica start: {}; of the occurrences, {} before it (never missed: nothing \
         ran yet), {} passed over by a replica (a misfire record holds them)\n",
        r.first_scheduler_start_ms
            .map_or_else(|| "unknown (no registry row or run)".to_owned(), utc),
        r.before_first_scheduler,
        r.passed_over
    ));
    let mut listed: Vec<Vec<String>> = r
        .listed
        .iter()
        .map(|o| {
            let note = match o.note {
                OccurrenceNote::HasRun => "has a run: left as it is".to_owned(),
                OccurrenceNote::PassedOver => format!(
                    "passed over by {} (misfire record): would admit",
                    o.by.as_deref()
                        .map_or("a replica".into(), crate::core::text::clean)
                ),
                OccurrenceNote::BeforeFirstScheduler => {
                    "before the first replica started: would admit".to_owned()
                }
                OccurrenceNote::Missed => "no run: would admit".to_owned(),
            };
            vec![utc(o.at_ms), note]
        })
        .collect();
    let occurrences = usize::try_from(r.occurrences).unwrap_or(usize::MAX);
    if occurrences > listed.len() {
        listed.insert(
            LISTED / 2,
            vec![
                format!("… {} more", occurrences - listed.len()),
                String::new(),
            ],
        );
    }
    out.push_str(&table(&["occurrence", "what the backfill does"], listed));
    out
}
