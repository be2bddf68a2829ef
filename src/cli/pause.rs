//! `qlsched pause` and `qlsched resume`: operational state apart from the manifest's `enabled`
//! (`store::control`, docs/DESIGN.md §4.10). A pause takes effect at once, also for a claim in
//! flight; a resume records what passed meanwhile as one misfire record.

use clap::Args;
use serde::Serialize;

use super::args::{Access, ConfirmArgs};
use super::identity::operator_name;
use super::output::{emit, opt, table};
use super::prompt::{ask, interactive};
use super::{CliError, Global};
use crate::core::TriggerName;
use crate::core::time::utc;
use crate::store::control::{self, PauseReport};

#[derive(Debug, Args)]
pub struct PauseArgs {
    #[command(flatten)]
    pub target: Target,

    /// Why, for the audit trail and `inspect trigger`.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,

    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub target: Target,

    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

/// One trigger, or every trigger of a project.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct Target {
    /// The trigger, as PROJECT/TRIGGER.
    #[arg(value_name = "PROJECT/TRIGGER")]
    pub trigger: Option<TriggerName>,

    /// Every trigger of this project instead.
    #[arg(long, value_name = "PROJECT")]
    pub project: Option<String>,
}

impl Target {
    fn key(&self) -> (&str, Option<&str>) {
        match (&self.trigger, &self.project) {
            (Some(trigger), _) => (&trigger.project_id, Some(&trigger.trigger_id)),
            (None, Some(project)) => (project, None),
            // clap's group requires one of the two.
            (None, None) => ("", None),
        }
    }

    fn describe(&self) -> String {
        match (&self.trigger, &self.project) {
            (Some(trigger), _) => trigger.to_string(),
            (None, Some(project)) => format!("every trigger of project {project}"),
            (None, None) => String::new(),
        }
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Report {
    dry_run: bool,
    #[schemars(extend("enum" = ["pause", "resume"]))]
    action: &'static str,
    #[serde(flatten)]
    report: PauseReport,
}

pub async fn pause(args: PauseArgs, global: &Global) -> Result<(), CliError> {
    let reason = args.reason.as_deref();
    act(
        Action::Pause { reason },
        &args.target,
        &args.confirm,
        global,
    )
    .await
}

pub async fn resume(args: ResumeArgs, global: &Global) -> Result<(), CliError> {
    act(Action::Resume, &args.target, &args.confirm, global).await
}

/// What a command does to its target rows.
#[derive(Clone, Copy)]
enum Action<'a> {
    Pause { reason: Option<&'a str> },
    Resume,
}

impl Action<'_> {
    fn name(self) -> &'static str {
        match self {
            Action::Pause { .. } => "pause",
            Action::Resume => "resume",
        }
    }

    /// The action as the refusal without `--yes` names it.
    fn doing(self) -> &'static str {
        match self {
            Action::Pause { .. } => "pausing",
            Action::Resume => "resuming",
        }
    }

    /// What the question asked on a terminal before anything changes.
    fn consequence(self) -> &'static str {
        match self {
            Action::Pause { .. } => "a claim in flight is voided",
            Action::Resume => "occurrences passed while paused are recorded, not run",
        }
    }
}

/// Pause or resume: confirmed on a terminal, done in one bounded transaction
/// (`store::control`), reported.
async fn act(
    action: Action<'_>,
    target: &Target,
    confirm: &ConfirmArgs,
    global: &Global,
) -> Result<(), CliError> {
    let name = action.name();
    confirm.require_confirmable(action.doing())?;
    let store = super::fire::open(
        global,
        &format!("qlsched {name}"),
        // A dry run locks the rows and writes before rolling back: it needs the primary.
        Access::Write,
    )
    .await?;
    let question = format!(
        "{name} {}? {} [y/N]",
        target.describe(),
        action.consequence()
    );
    if !confirm.yes && !confirm.dry_run && interactive() && ask(&question).await? != "y" {
        return Err(CliError::Usage("not confirmed; nothing changed".into()));
    }
    let (key, actor) = (target.key(), operator_name());
    let report = match action {
        Action::Pause { reason } => {
            control::pause(&store, key, &actor, reason, confirm.dry_run).await?
        }
        Action::Resume => control::resume(&store, key, &actor, confirm.dry_run).await?,
    };
    let report = Report {
        dry_run: confirm.dry_run,
        action: name,
        report,
    };
    emit(global.format, &report, render)
}

fn render(r: &Report) -> String {
    let verb = match (r.action, r.dry_run) {
        ("pause", false) => "paused",
        ("pause", true) => "would pause",
        (_, false) => "resumed",
        (_, true) => "would resume",
    };
    let mut out = if r.report.changed.is_empty() {
        format!("nothing {verb}")
    } else {
        // The time shown is the pause's, for a resume too: the time a trigger stopped firing is
        // what an operator reconciles afterwards (the resume's own time is the misfire record's).
        let header = if r.action == "pause" {
            [verb, "paused by", "reason"]
        } else {
            ["was paused", "paused by", "reason"]
        };
        let mut lines = format!("{verb} {}:\n", r.report.changed.len());
        lines.push_str(&table(
            &["trigger", header[0], header[1], header[2], "detail"],
            r.report.changed.iter().map(|c| {
                let detail = match (&c.voided_claim_of, &c.next_fire_at_ms, &c.passed_over) {
                    (Some(owner), _, _) => format!("claim of {owner} voided"),
                    (_, Some(next), passed) => format!(
                        "next {}{}",
                        // Published again since the pause: the new revision's cursor is set by
                        // the next replica round, to the first occurrence after it.
                        next.map_or_else(
                            || "when a replica initializes it (published since: the first \
                                occurrence after its next round)"
                                .to_owned(),
                            utc
                        ),
                        match passed {
                            Some(Some(p)) => format!(
                                "; {}{} occurrences recorded as a misfire",
                                p.count,
                                if p.count_exact { "" } else { "+" }
                            ),
                            _ => String::new(),
                        }
                    ),
                    _ => String::new(),
                };
                vec![
                    TriggerName::new(&c.project_id, &c.trigger_id).to_string(),
                    utc(c.paused_at_ms),
                    c.paused_by.clone(),
                    opt(c.reason.clone()),
                    detail,
                ]
            }),
        ));
        lines
    };
    if r.report.unchanged > 0 {
        out.push_str(&format!(
            "\n{} {}",
            r.report.unchanged,
            if r.action == "pause" {
                "already paused, left as they were"
            } else {
                "not paused, left as they were"
            }
        ));
    }
    out
}
