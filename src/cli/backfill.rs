//! `qlsched backfill P/T --from T1 --to T2`: admits the trigger's past cron occurrences in the
//! window that have no run (the library's [`crate::backfill`]); this parses, asks, shows the
//! progress and the report, and turns SIGINT and SIGTERM into the backfill's stop.

use std::io::IsTerminal;

use clap::Args;
use serde::Serialize;

use super::args::{Access, ConfirmArgs};
use super::cron::instant_arg;
use super::identity::operator_name;
use super::output::{emit, table};
use super::prompt::{ask, interactive};
use super::signals::Shutdown;
use super::{CliError, ExitStatus, Global};
use crate::backfill::{Backfill, BackfillError, BackfillRequest};
use crate::core::TriggerName;
use crate::core::time::utc;
use crate::stop::StopToken;

#[derive(Debug, Args)]
pub struct BackfillArgs {
    /// The trigger to backfill, as PROJECT/TRIGGER.
    #[arg(value_name = "PROJECT/TRIGGER")]
    pub trigger: TriggerName,

    /// The window's first instant, included (RFC 3339 or epoch milliseconds).
    #[arg(long, value_name = "TIME", value_parser = instant_arg)]
    pub from: i64,

    /// The window's last instant, included; must be before the database's now.
    #[arg(long, value_name = "TIME", value_parser = instant_arg)]
    pub to: i64,

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
}

pub async fn run(args: BackfillArgs, global: &Global) -> Result<(), CliError> {
    let request = BackfillRequest {
        trigger: args.trigger,
        from_ms: args.from,
        to_ms: args.to,
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
            utc(request.to_ms),
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
    if progress {
        eprintln!();
    }
    let report = BackfillReport {
        dry_run,
        project_id: request.trigger.project_id.clone(),
        trigger_id: request.trigger.trigger_id.clone(),
        trigger_revision: target.trigger_revision,
        from_ms: request.from_ms,
        to_ms: request.to_ms,
        first_published_at_ms: target.created_at_ms,
        before_creation: plan.before_creation,
        occurrences: plan.occurrences.len() as u64,
        already_admitted: outcome.total.existing,
        admitted: outcome.total.admitted,
        left_to_scheduler: outcome.total.left_to_scheduler,
        transactions: outcome.transactions,
        interrupted: outcome.interrupted,
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
    table(&["backfill", "value"], rows)
}
