//! `qlsched fire P/T`: one manual run now, through a SERIALIZABLE admission like the
//! scheduler's (`store::control`, docs/DESIGN.md §4.10). Idempotent by request id; the cursor
//! does not move.

use clap::Args;
use serde::Serialize;

use super::args::{Access, ConfirmArgs};
use super::identity::operator_name;
use super::output::emit;
use super::prompt::{ask, interactive};
use super::{CliError, Global};
use crate::core::TriggerName;
use crate::core::time::utc;
use crate::store::Store;
use crate::store::control::{self, Fired};

#[derive(Debug, Args)]
pub struct FireArgs {
    /// The trigger to fire, as PROJECT/TRIGGER.
    #[arg(value_name = "PROJECT/TRIGGER")]
    pub trigger: TriggerName,

    /// Makes the request idempotent: the same id again reports the run it admitted (1 to 128 of
    /// A-Z a-z 0-9 _ . : -) [default: a new UUID].
    #[arg(long, value_name = "ID")]
    pub request_id: Option<String>,

    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct FireReport {
    dry_run: bool,
    project_id: String,
    trigger_id: String,
    request_id: String,
    #[serde(flatten)]
    fired: Fired,
}

/// A request id becomes part of the idempotency key: characters that cannot confuse it.
fn check_request_id(id: &str) -> Result<(), CliError> {
    let valid = (1..=128).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'));
    if valid {
        Ok(())
    } else {
        Err(CliError::BadInput(format!(
            "request id {id:?}: expected 1 to 128 of A-Z a-z 0-9 _ . : -"
        )))
    }
}

/// Opens a one-connection store for an operator action, after the schema check `run` makes.
/// `access` is the command's.
pub async fn open(global: &Global, application: &str, access: Access) -> Result<Store, CliError> {
    let settings = global.connection.settings(access)?;
    let store = Store::open(&settings, &global.connection.schema, application, 1).await?;
    store.check_ready().await?;
    Ok(store)
}

pub async fn run(args: FireArgs, global: &Global) -> Result<(), CliError> {
    let request_id = args
        .request_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    check_request_id(&request_id)?;
    args.confirm.require_confirmable("firing a trigger")?;
    let store = open(
        global,
        "qlsched fire",
        // A dry run locks the rows and writes before rolling back: it needs the primary.
        Access::Write,
    )
    .await?;
    // The revision the key names, read (and every definition checked) before asking.
    let target = control::read_target(&store, &args.trigger).await?;
    let dry_run = args.confirm.dry_run;
    if !args.confirm.yes && !dry_run && interactive() {
        let paused = if target.paused { " (paused)" } else { "" };
        let question = format!(
            "fire {}{paused} now: one manual run of revision {}, request id {request_id}? [y/N]",
            args.trigger, target.trigger_revision
        );
        if ask(&question).await? != "y" {
            return Err(CliError::Usage("not confirmed; nothing admitted".into()));
        }
    }
    let actor = operator_name();
    let fired = control::fire(
        &store,
        &args.trigger,
        target.trigger_revision,
        &request_id,
        &actor,
        dry_run,
    )
    .await?;
    let report = FireReport {
        dry_run,
        project_id: args.trigger.project_id.clone(),
        trigger_id: args.trigger.trigger_id.clone(),
        request_id,
        fired,
    };
    emit(global.format, &report, |r| {
        let what = match (r.dry_run, r.fired.created) {
            (true, true) => "would admit",
            (true, false) | (false, false) => "already admitted",
            (false, true) => "admitted",
        };
        format!(
            "{what} manual run {} of {} (revision {}), scheduled for {}\nkey {}",
            r.fired.run_id,
            TriggerName::new(&r.project_id, &r.trigger_id),
            r.fired.trigger_revision,
            utc(r.fired.scheduled_for_ms),
            r.fired.idempotency_key
        )
    })
}
