//! `qlsched backfill P/T --from T1 --to T2`: admits the trigger's past cron occurrences in the
//! window that have no run, each under its regular cron key, in bounded transactions
//! (`store::control::backfill`, docs/DESIGN.md §4.10). A rerun admits nothing twice.
//!
//! Occurrences from before the trigger was first published are left out and counted unless
//! `--before-creation` asks for them: a window typed a little too wide (`--from` yesterday for a
//! trigger published this morning) must not quietly admit runs for a time the trigger never had.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use serde::Serialize;

use super::args::{Access, ConfirmArgs};
use super::cron::instant_arg;
use super::identity::operator_name;
use super::output::{emit, table};
use super::prompt::{ask, interactive};
use super::signals::Shutdown;
use super::{CliError, ExitStatus, Global};
use crate::core::CronSchedule;
use crate::core::TriggerName;
use crate::core::time::utc;
use crate::store::control::{self, BackfillBatch};

/// Occurrences admitted per transaction: short enough that a replica waiting on the row lock
/// (the claim skips it) loses well under a second, large enough to cover a day of minutes in
/// three transactions.
pub const BATCH: usize = 500;

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
struct BackfillReport {
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
    if args.from > args.to {
        return Err(CliError::BadInput(format!(
            "--from {} is after --to {}",
            utc(args.from),
            utc(args.to)
        )));
    }
    args.confirm.require_confirmable("backfilling a trigger")?;
    let store = super::fire::open(
        global,
        "qlsched backfill",
        // A dry run locks the rows and writes before rolling back: it needs the primary.
        Access::Write,
    )
    .await?;
    let client = store.client().await?;
    let target = control::read_target(&client, store.schema(), &args.trigger).await?;
    if args.to >= target.now_ms {
        return Err(CliError::BadInput(format!(
            "--to {} is not in the past (the database's now is {}): future occurrences are the \
             scheduler's",
            utc(args.to),
            utc(target.now_ms)
        )));
    }
    let schedule = CronSchedule::parse(&target.cron_expr, &target.time_zone)?;
    let cap = usize::try_from(args.max).unwrap_or(usize::MAX);
    let from = if args.before_creation {
        args.from
    } else {
        args.from.max(target.created_at_ms)
    };
    let before_creation = if from > args.from {
        // Counted up to --max: past it the number is only a lower bound, and says enough.
        let last = from.min(args.to.saturating_add(1)) - 1;
        schedule.count_between(args.from, last, args.max)?.0
    } else {
        0
    };
    let occurrences = if from <= args.to {
        schedule.occurrences_between(from, args.to.saturating_add(1), cap.saturating_add(1))?
    } else {
        Vec::new()
    };
    if occurrences.len() > cap {
        return Err(CliError::BadInput(format!(
            "the window holds more than --max {} occurrences of {} ({}); narrow it or raise --max",
            args.max, args.trigger, target.cron_expr
        )));
    }
    let dry_run = args.confirm.dry_run;
    if !args.confirm.yes && !dry_run && interactive() {
        let question = format!(
            "backfill {} (revision {}): {} occurrences from {} to {}, those without a run{}? \
             [y/N]",
            args.trigger,
            target.trigger_revision,
            occurrences.len(),
            utc(from),
            utc(args.to),
            if before_creation > 0 {
                format!(
                    " ({before_creation} before its first publication at {} left out)",
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
    let stop = Arc::new(AtomicBool::new(false));
    let mut shutdown = Shutdown::install()?;
    let flag = Arc::clone(&stop);
    let listener = tokio::spawn(async move {
        shutdown.recv().await;
        flag.store(true, Ordering::SeqCst);
    });
    let progress = std::io::stderr().is_terminal() && !dry_run;
    let actor = operator_name();
    let mut total = BackfillBatch::default();
    let mut transactions = 0;
    let mut interrupted = false;
    for chunk in occurrences.chunks(BATCH) {
        if stop.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        let batch = control::backfill(
            &client,
            store.schema(),
            &args.trigger,
            target.trigger_revision,
            chunk,
            &actor,
            dry_run,
        )
        .await?;
        transactions += 1;
        total.admitted += batch.admitted;
        total.existing += batch.existing;
        total.left_to_scheduler += batch.left_to_scheduler;
        if progress {
            let done = total.admitted + total.existing + total.left_to_scheduler;
            eprint!(
                "\rbackfill {}: {done}/{} occurrences, {} admitted",
                args.trigger,
                occurrences.len(),
                total.admitted
            );
        }
    }
    listener.abort();
    if progress {
        eprintln!();
    }
    let report = BackfillReport {
        dry_run,
        project_id: args.trigger.project_id.clone(),
        trigger_id: args.trigger.trigger_id.clone(),
        trigger_revision: target.trigger_revision,
        from_ms: args.from,
        to_ms: args.to,
        first_published_at_ms: target.created_at_ms,
        before_creation,
        occurrences: occurrences.len() as u64,
        already_admitted: total.existing,
        admitted: total.admitted,
        left_to_scheduler: total.left_to_scheduler,
        transactions,
        interrupted,
    };
    emit(global.format, &report, render)?;
    if interrupted {
        return Err(CliError::Findings {
            message: format!(
                "interrupted after {transactions} transactions ({} admitted); the same command \
                 continues where this one stopped",
                report.admitted
            ),
            status: ExitStatus::Interrupted,
        });
    }
    Ok(())
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
