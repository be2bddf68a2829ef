//! `qlsched claim`: the scheduler's steps by hand (docs/DESIGN.md §5.1), the library's
//! [`crate::manual`]. An operator claims a row, sees the fence and the decision the core takes
//! on it, and admits, holds or releases it; a script does the same with the fence passed back
//! explicitly (`claim admit`, `claim release`). This parses, asks, renders, and decides what a
//! signal means while a person is asked.

use std::time::Duration;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::args::{Access, ConfirmArgs, FenceArgs, duration_arg};
use super::identity::manual_owner;
use super::output::{emit, opt, table};
use super::prompt::{Answer, ask, ask_or_interrupted};
use super::signals::Shutdown;
use super::{CliError, Global, OutputFormat};
use crate::coordinator::duration_ms;
use crate::core::TriggerName;
use crate::core::time::{span, utc};
use crate::core::{ClaimOutcome, CoordinatorConfig, Decision, MisfireSpan};
use crate::manual::{self, ClaimError, ClaimRequest, ManualClaim, Settled, Step};
use crate::stop::StopToken;
use crate::store::operator::{self, Actor};
use crate::store::{RunIdentity, Store, StoreError};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ClaimArgs {
    #[command(subcommand)]
    pub action: Option<ClaimAction>,

    /// The trigger to claim [default: the next eligible row in claim order].
    #[arg(value_name = "PROJECT/TRIGGER")]
    pub trigger: Option<TriggerName>,

    #[command(flatten)]
    pub confirm: ConfirmArgs,

    /// Keep the claim and exit: the row stays claimed until it expires or is expired.
    #[arg(long, conflicts_with_all = ["yes", "dry_run", "release"])]
    pub hold: bool,

    /// Give the claim back at once.
    #[arg(long, conflicts_with_all = ["yes", "dry_run"])]
    pub release: bool,

    /// Claim owner written into the lease [default: USER@HOST:manual].
    #[arg(long)]
    pub owner: Option<String>,

    /// Lease of the claim, in database time (1s..=1h).
    #[arg(long, default_value = "30s", value_parser = duration_arg, allow_hyphen_values = true)]
    pub lease: Duration,

    /// While the row is not claimable (not due, or claimed), try again until it is or this much
    /// time has passed (then exit 5), instead of failing at once.
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub wait: Option<Duration>,
}

#[derive(Debug, Subcommand)]
pub enum ClaimAction {
    /// Admit a claimed row's occurrence under its fence; exit 3 when the fence no longer holds.
    #[command(disable_version_flag = true)]
    Admit(AdmitArgs),
    /// Give a claimed row back under its fence; exit 3 when the fence no longer holds.
    #[command(disable_version_flag = true)]
    Release(FencedTrigger),
}

/// `claim admit`: a manual admission, so it is confirmed like every destructive action.
#[derive(Debug, Args)]
pub struct AdmitArgs {
    #[command(flatten)]
    pub target: FencedTrigger,

    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

#[derive(Debug, Args)]
pub struct FencedTrigger {
    /// The claimed trigger, as PROJECT/TRIGGER.
    #[arg(value_name = "PROJECT/TRIGGER")]
    pub trigger: TriggerName,

    #[command(flatten)]
    pub fence: FenceArgs,
}

/// The decision the core took on a claimed row, for output.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DecisionView {
    #[schemars(extend("enum" = ["initialize", "fire", "skip", "not_due"]))]
    pub kind: &'static str,
    pub next_fire_at_ms: i64,
    pub scheduled_for_ms: Option<i64>,
    pub idempotency_key: Option<String>,
    pub late_ms: Option<i64>,
    pub misfired: Option<bool>,
    /// The occurrences the decision passes over, recorded as one misfire when it is admitted.
    pub passed_over: Option<MisfireSpan>,
}

impl DecisionView {
    fn of(decision: &Decision, run: Option<&RunIdentity>) -> Self {
        let (late_ms, misfired) = match *decision {
            Decision::Fire {
                late_ms, misfired, ..
            } => (Some(late_ms), Some(misfired)),
            Decision::Skip {
                late_ms,
                passed_over,
                ..
            } => (Some(late_ms), Some(passed_over.is_some())),
            _ => (None, None),
        };
        DecisionView {
            kind: decision.kind(),
            next_fire_at_ms: decision.next_fire_at_ms(),
            scheduled_for_ms: run.map(|r| r.scheduled_for_ms),
            idempotency_key: run.map(|r| r.idempotency_key.clone()),
            late_ms,
            misfired,
            passed_over: decision.passed_over().copied(),
        }
    }
}

/// What `qlsched claim` did: the claim as taken, the decision, and the step that followed.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ClaimReport {
    pub dry_run: bool,
    pub project_id: String,
    pub trigger_id: String,
    pub fence: crate::core::ClaimFence,
    /// Database time at the claim: the "now" the decision was taken at.
    pub observed_at_ms: i64,
    pub cursor_ms: Option<i64>,
    pub decision: DecisionView,
    /// `admitted`, `advanced`, `held`, `released` or `dry_run`.
    pub step: ClaimOutcome,
    pub run: Option<RunIdentity>,
}

pub async fn run(args: ClaimArgs, global: &Global) -> Result<(), CliError> {
    if let Some(action) = args.action {
        return scripted(action, global).await;
    }
    let config = CoordinatorConfig {
        owner: args.owner.clone().unwrap_or_else(manual_owner),
        lease: args.lease,
        ..CoordinatorConfig::default()
    };
    config
        .validate()
        .map_err(|error| super::run::flag_value(&error))?;
    // A claim nobody will settle is refused before anything is claimed.
    if !args.hold && !args.release {
        args.confirm
            .require_confirmable("admitting a manual claim")?;
    }
    let dry_run = args.confirm.dry_run;
    // A person will be asked: signals are caught from before the claim, so that leaving (Ctrl-C,
    // Ctrl-D, a closed terminal) gives the claim back instead of leaving the row blocked.
    let asking = !dry_run && !args.hold && !args.release && !args.confirm.yes;
    let mut interrupts = asking.then(Interrupts::install).transpose()?;
    let stop = interrupts
        .as_ref()
        .map_or_else(StopToken::new, |i| i.stop.clone());
    let store = guarded(
        &mut interrupts,
        open(global, Access::writing_unless(dry_run)),
    )
    .await?;
    let request = ClaimRequest {
        target: args.trigger.as_ref(),
        owner: &config.owner,
        lease_ms: duration_ms(config.lease),
        dry_run,
        wait: args.wait,
    };
    let row = guarded(&mut interrupts, async {
        manual::claim(&store, request, &stop)
            .await
            .map_err(|error| match error {
                ClaimError::Store(error) => CliError::Store(error),
                ClaimError::Interrupted(_) => CliError::Usage(error.to_string()),
            })
    })
    .await?;
    let claim = guarded(&mut interrupts, async {
        Ok(ManualClaim::decide_or_give_back(&store, row, &config.owner, dry_run).await?)
    })
    .await?;
    let row = &claim.row;
    let mut report = ClaimReport {
        dry_run,
        project_id: row.project_id.clone(),
        trigger_id: row.trigger_id.clone(),
        fence: row.fence.clone(),
        observed_at_ms: row.claimed_at_ms,
        cursor_ms: row.cursor_ms,
        decision: DecisionView::of(&claim.decision, claim.run.as_ref()),
        step: ClaimOutcome::DryRun,
        run: None,
    };
    let give_back = async |interrupts: &mut Option<Interrupts>| {
        guarded(interrupts, async { Ok(claim.give_back(&store).await?) }).await
    };
    let step = match interrupts.as_mut() {
        None if dry_run => None,
        None if args.hold => Some(Step::Hold),
        None if args.release => Some(Step::Release),
        None => Some(Step::Admit),
        Some(asked) => match ask_about(asked, &report, global.format).await {
            Ok(Ok(step)) => Some(step),
            // Nobody decided: the claim goes back, whatever else failed.
            Ok(Err(why)) => {
                let claimed = match give_back(&mut interrupts).await {
                    Ok(_) => "released the claim",
                    Err(CliError::Store(StoreError::FenceRejected(_))) => {
                        "the claim no longer held"
                    }
                    Err(error) => return Err(error),
                };
                return Err(CliError::Usage(format!(
                    "{why}: {claimed} on {}; nothing admitted",
                    row.name()
                )));
            }
            Err(error) => {
                let _ = give_back(&mut interrupts).await;
                return Err(error);
            }
        },
    };
    match step {
        None => {}
        // Nothing to wait for: no database step, so no signal to note.
        Some(Step::Hold) => report.step = ClaimOutcome::Held,
        Some(step) => {
            let settled = guarded(&mut interrupts, async {
                Ok(claim.take_step(&store, step).await?)
            })
            .await?;
            report.step = settled.step;
            report.run = settled.run;
        }
    }
    emit(global.format, &report, render_claim)
}

/// Signals while a person is being asked about a claim. At the prompt, the first one ends the
/// wait and the claim is given back. During a database step, the first one lets the step finish
/// (a claim half-known could not be given back) and the claim then goes back; a second one stops
/// at once, exit 130 as the shell reports a SIGINT death, leaving a claim already taken to
/// expire with its lease, so that a stalled database never traps the person.
struct Interrupts {
    shutdown: Shutdown,
    /// Tripped by the first signal: a waiting claim stops trying, and the claim goes back.
    stop: StopToken,
}

impl Interrupts {
    fn install() -> Result<Self, CliError> {
        Ok(Self {
            shutdown: Shutdown::install_with_hangup()?,
            stop: StopToken::new(),
        })
    }

    fn note(&mut self, signal: &'static str) {
        if self.stop.reason().is_some() {
            eprintln!(
                "qlsched: {signal} again: stopping now; a claim already taken expires with its lease"
            );
            std::process::exit(i32::from(super::ExitStatus::Interrupted.code()));
        }
        eprintln!(
            "qlsched: {signal}: waiting for the database step in flight (once more stops at once, \
             leaving a claim already taken to expire with its lease)"
        );
        self.stop.trip(signal);
    }
}

/// Runs one database step; with `interrupts`, a signal is noted while it runs (see
/// [`Interrupts`]).
async fn guarded<T>(
    interrupts: &mut Option<Interrupts>,
    step: impl Future<Output = Result<T, CliError>>,
) -> Result<T, CliError> {
    let Some(interrupts) = interrupts else {
        return step.await;
    };
    tokio::pin!(step);
    loop {
        tokio::select! {
            done = &mut step => return done,
            signal = interrupts.shutdown.recv() => interrupts.note(signal),
        }
    }
}

/// Shows the claim and its decision and asks for the step; `Ok(Err(why))` when nobody decided.
async fn ask_about(
    interrupts: &mut Interrupts,
    report: &ClaimReport,
    format: OutputFormat,
) -> Result<Result<Step, String>, CliError> {
    if let Some(signal) = interrupts.stop.reason() {
        return Ok(Err(format!("interrupted by {signal}")));
    }
    // The person answering must see the fence and the decision, whatever stdout carries.
    if format == OutputFormat::Table {
        super::output::print(&render_claim(report))?;
    } else {
        eprintln!("{}", render_claim(report));
    }
    ask_step(interrupts).await
}

/// The person's step, or why there is none (interrupted, or no more input).
async fn ask_step(interrupts: &mut Interrupts) -> Result<Result<Step, String>, CliError> {
    loop {
        let question = "admit, hold or release? [a/h/r]";
        match ask_or_interrupted(question, &mut interrupts.shutdown).await? {
            Answer::Line(line) => match line.as_str() {
                "a" | "admit" => return Ok(Ok(Step::Admit)),
                "h" | "hold" => return Ok(Ok(Step::Hold)),
                "r" | "release" => return Ok(Ok(Step::Release)),
                _ => eprintln!("answer a, h or r"),
            },
            // Off the prompt's line before the verdict.
            Answer::EndOfInput => {
                eprintln!();
                return Ok(Err("no answer (end of input)".to_owned()));
            }
            Answer::Interrupted(signal) => {
                eprintln!();
                // Counted: one more signal while the claim goes back stops at once.
                interrupts.stop.trip(signal);
                return Ok(Err(format!("interrupted by {signal}")));
            }
        }
    }
}

/// What `claim admit` prints.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AdmitReport {
    pub project_id: String,
    pub trigger_id: String,
    pub decision: DecisionView,
    /// `admitted`, `advanced` or `released`.
    pub step: ClaimOutcome,
    pub run: Option<RunIdentity>,
}

/// What `claim release` prints.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ReleaseReport {
    pub project_id: String,
    pub trigger_id: String,
    pub fence: crate::core::ClaimFence,
    pub step: ClaimOutcome,
}

async fn scripted(action: ClaimAction, global: &Global) -> Result<(), CliError> {
    let user = manual_owner();
    let actor = Actor {
        name: &user,
        reason: None,
    };
    match action {
        ClaimAction::Admit(AdmitArgs {
            target: FencedTrigger { trigger, fence },
            confirm,
        }) => {
            let fence = fence.fence()?;
            confirm.require_confirmable("a manual admission")?;
            let store = open(global, Access::writing_unless(confirm.dry_run)).await?;
            let row = operator::claimed(&store, &trigger, fence).await?;
            let claim = ManualClaim::decide(row, &user)?;
            let view = DecisionView::of(&claim.decision, claim.run.as_ref());
            if !confirm.yes && !confirm.dry_run {
                eprintln!("{trigger}: {}", render_decision(&view));
                if ask("admit it? [y/N]").await? != "y" {
                    return Err(CliError::Usage("not confirmed; nothing changed".into()));
                }
            }
            let outcome = if confirm.dry_run {
                Settled {
                    step: ClaimOutcome::DryRun,
                    run: None,
                }
            } else {
                claim.settle(&store).await?
            };
            let report = AdmitReport {
                project_id: claim.row.project_id,
                trigger_id: claim.row.trigger_id,
                decision: view,
                step: outcome.step,
                run: outcome.run,
            };
            emit(global.format, &report, |r| {
                format!(
                    "{}: {}{}",
                    TriggerName::new(&r.project_id, &r.trigger_id),
                    r.step,
                    r.run.as_ref().map_or_else(String::new, |run| format!(
                        " run {} attempt {} ({})",
                        run.run_id, run.attempt_id, run.idempotency_key
                    ))
                )
            })
        }
        ClaimAction::Release(FencedTrigger { trigger, fence }) => {
            let fence = fence.fence()?;
            let store = open(global, Access::Write).await?;
            let before = operator::release_claim(&store, &trigger, fence, &actor).await?;
            let report = ReleaseReport {
                project_id: trigger.project_id,
                trigger_id: trigger.trigger_id,
                fence: before,
                step: ClaimOutcome::Released,
            };
            emit(global.format, &report, |r| {
                format!(
                    "{}: released the claim of {} at version {}",
                    TriggerName::new(&r.project_id, &r.trigger_id),
                    r.fence.owner,
                    r.fence.version
                )
            })
        }
    }
}

/// `access` is the command's: a dry run only reads.
async fn open(global: &Global, access: Access) -> Result<Store, CliError> {
    let settings = global.connection.settings(access)?;
    let store = Store::open(&settings, &global.connection.schema, "qlsched claim", 1).await?;
    // The claim and the admission are the replica's: they demand the schema `run` demands.
    store.check_ready().await?;
    Ok(store)
}

/// One line: what admitting would do.
fn render_decision(d: &DecisionView) -> String {
    match (&d.idempotency_key, d.scheduled_for_ms) {
        (Some(key), Some(at)) => format!(
            "{} the occurrence of {} ({key}), next cursor {}",
            d.kind,
            utc(at),
            utc(d.next_fire_at_ms)
        ),
        _ => format!("{}, next cursor {}", d.kind, utc(d.next_fire_at_ms)),
    }
}

fn render_claim(report: &ClaimReport) -> String {
    let d = &report.decision;
    let rows = vec![
        vec![
            "trigger".into(),
            TriggerName::new(&report.project_id, &report.trigger_id).to_string(),
        ],
        vec!["owner".into(), report.fence.owner.clone()],
        vec!["token".into(), report.fence.token.to_string()],
        vec!["version".into(), report.fence.version.to_string()],
        vec!["expires at".into(), utc(report.fence.expires_at_ms)],
        vec!["observed at".into(), utc(report.observed_at_ms)],
        vec!["cursor".into(), opt(report.cursor_ms.map(utc))],
        vec!["decision".into(), d.kind.to_owned()],
        vec!["scheduled for".into(), opt(d.scheduled_for_ms.map(utc))],
        vec!["late by".into(), opt(d.late_ms.map(span))],
        vec!["idempotency key".into(), opt(d.idempotency_key.clone())],
        vec!["next cursor".into(), utc(d.next_fire_at_ms)],
        vec![
            "step".into(),
            if report.dry_run {
                "dry run: nothing written (no claim taken, nothing admitted)".to_owned()
            } else {
                report.step.to_string()
            },
        ],
        vec![
            "run".into(),
            opt(report
                .run
                .as_ref()
                .map(|r| format!("{} (attempt {})", r.run_id, r.attempt_id))),
        ],
    ];
    table(&["claim", "value"], rows)
}
