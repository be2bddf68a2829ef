//! `qlsched expire`: clear a stuck claim, fenced and audited (docs/DESIGN.md §4.7). With
//! a fence, only that claim; without one, the claim is shown and confirmed first. `--owner`
//! expires every claim of a replica known to be dead, in one transaction.

use clap::Args;
use serde::Serialize;

use super::args::{Access, ConfirmArgs, at_least, fence, owner_arg};
use super::identity::operator_name;
use super::output::{emit, table};
use super::prompt::{ask, interactive};
use super::{CliError, Global};
use crate::core::FenceRef;
use crate::core::TriggerName;
use crate::core::time::utc;
use crate::store::operator::{self, Actor, Expired};
use crate::store::{Store, StoreError};

#[derive(Debug, Args)]
#[command(disable_version_flag = true)]
pub struct ExpireArgs {
    /// The trigger whose claim to expire.
    #[arg(value_name = "PROJECT/TRIGGER", conflicts_with = "owner")]
    pub trigger: Option<TriggerName>,

    /// Expire only the claim with this token (exit 3 if it changed in between).
    #[arg(long, value_name = "UUID", requires = "claim_version")]
    pub token: Option<String>,

    /// The claim version that goes with --token.
    #[arg(long = "version", id = "claim_version", value_name = "N", requires = "token",
          allow_negative_numbers = true, value_parser = at_least(0))]
    pub claim_version: Option<i64>,

    /// Expire every claim of this owner (a replica known to be dead), in one transaction.
    #[arg(long, conflicts_with_all = ["token", "claim_version"], value_parser = owner_arg)]
    pub owner: Option<String>,

    /// With --owner: only the claims already past their lease.
    #[arg(long, requires = "owner")]
    pub expired_only: bool,

    /// Why, for the audit row.
    #[arg(long)]
    pub reason: Option<String>,

    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

/// What `qlsched expire` did (or, with --dry-run, would do).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ExpireReport {
    pub dry_run: bool,
    pub expired: Vec<Expired>,
    /// With `--owner` and nothing expired: the owner was seen before (it holds claims that are
    /// not expired yet, or a record names it). A never-seen owner is an error (exit 4) instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner_seen: Option<bool>,
    /// With `--owner`: whether the owner's replica registry row was forgotten with its claims
    /// (not with `--expired-only`, nor while the replica is live).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_forgotten: Option<bool>,
    #[serde(skip)]
    owner: Option<String>,
}

pub async fn run(args: ExpireArgs, global: &Global) -> Result<(), CliError> {
    if args.trigger.is_none() && args.owner.is_none() {
        return Err(CliError::Usage(
            "name the claim to expire: a PROJECT/TRIGGER for one trigger's claim, or --owner \
             OWNER for every claim of one owner"
                .into(),
        ));
    }
    let given = match (&args.token, args.claim_version) {
        (Some(token), Some(version)) => Some(fence(token, version)?),
        _ => None,
    };
    // clap drops `requires = "owner"` when the conflicting trigger is given, so this is checked
    // here: ignored, the flag would let a live claim be expired by someone who meant stale ones.
    if args.expired_only && args.owner.is_none() {
        return Err(CliError::Usage(
            "--expired-only goes with --owner; for one trigger, `qlsched inspect trigger` shows \
             whether its claim expired"
                .into(),
        ));
    }
    // Destructive: with no terminal to ask on, it needs --yes, fence or not (docs/DESIGN.md §5.2).
    args.confirm.require_confirmable("expiring a claim")?;
    // A dry run locks the rows and writes before rolling back: it needs the primary.
    let settings = global.connection.settings(Access::Write)?;
    let store = Store::open(&settings, &global.connection.schema, "qlsched expire", 1).await?;
    store.check_ready().await?;
    let name = operator_name();
    let actor = Actor {
        name: &name,
        reason: args.reason.as_deref(),
    };
    let dry_run = args.confirm.dry_run;
    let asking = !args.confirm.yes && !dry_run && interactive();
    let mut replica_forgotten = None;
    let expired = match (&args.trigger, &args.owner) {
        (Some(trigger), _) => {
            // The person confirms the claim they were shown, so that claim is the fence: if
            // another replica took the row meanwhile, the expiry is refused (exit 3), not
            // applied to a healthy claim the person never saw.
            let fence = match (asking, given) {
                (true, None) => match confirm_trigger(&store, trigger).await? {
                    Some(shown) => Some(shown),
                    None => return Err(CliError::Usage("not confirmed; nothing changed".into())),
                },
                (true, Some(given)) => {
                    let question = format!(
                        "expire the claim {} at version {} on {trigger}? [y/N]",
                        given.token, given.version
                    );
                    if ask(&question).await? != "y" {
                        return Err(CliError::Usage("not confirmed; nothing changed".into()));
                    }
                    Some(given)
                }
                (false, given) => given,
            };
            vec![operator::expire(&store, trigger, fence, &actor, dry_run).await?]
        }
        (None, Some(owner)) => {
            let question = format!(
                "expire every {}claim of {}? [y/N]",
                if args.expired_only { "expired " } else { "" },
                crate::core::text::clean(owner)
            );
            if asking && ask(&question).await? != "y" {
                return Err(CliError::Usage("not confirmed; nothing changed".into()));
            }
            let done = operator::expire_and_forget_owner(
                &store,
                owner,
                args.expired_only,
                &actor,
                dry_run,
            )
            .await?;
            let expired = done.expired;
            replica_forgotten = Some(done.replica_forgotten);
            // Nothing expired: a typo must not pass for success.
            if expired.is_empty() {
                if !done.replica_forgotten && !operator::owner_seen(&store, owner).await? {
                    return Err(CliError::OwnerNeverSeen {
                        owner: owner.clone(),
                    });
                }
                let report = ExpireReport {
                    dry_run,
                    expired,
                    owner_seen: Some(true),
                    replica_forgotten,
                    owner: Some(owner.clone()),
                };
                return emit(global.format, &report, render);
            }
            expired
        }
        // Refused before connecting.
        (None, None) => Vec::new(),
    };
    let report = ExpireReport {
        dry_run,
        expired,
        owner_seen: None,
        replica_forgotten,
        owner: None,
    };
    emit(global.format, &report, render)
}

/// Shows the claim about to be expired and asks; the fence of the claim shown when confirmed.
async fn confirm_trigger(
    store: &Store,
    trigger: &TriggerName,
) -> Result<Option<FenceRef>, CliError> {
    let detail = store.trigger_detail(trigger).await?;
    let Some(claim) = detail.state.and_then(|state| state.claim) else {
        return Err(StoreError::NothingEligible(format!(
            "{trigger} holds no claim; nothing to expire"
        ))
        .into());
    };
    eprintln!(
        "{trigger} is claimed by {} (token {}, version {}), {} at {}",
        crate::core::text::clean(&claim.owner),
        claim.token,
        claim.version,
        if claim.expired { "expired" } else { "expiring" },
        utc(claim.expires_at_ms)
    );
    Ok((ask("expire it? [y/N]").await? == "y").then_some(FenceRef {
        token: claim.token,
        version: claim.version,
    }))
}

fn render(report: &ExpireReport) -> String {
    let mut out = render_claims(report);
    if report.replica_forgotten == Some(true) {
        out.push_str(if report.dry_run {
            "\nits replica would leave the registry (dry run)"
        } else {
            "\nits replica left the registry"
        });
    }
    out
}

fn render_claims(report: &ExpireReport) -> String {
    if report.expired.is_empty() {
        return match &report.owner {
            Some(owner) => format!(
                "no claim to expire: owner {} holds none{} (it was seen before: a held claim, \
                 an audit row, an admitted run or a misfire record names it)",
                crate::core::text::clean(owner),
                if report.dry_run { " (dry run)" } else { "" }
            ),
            None => "no claim to expire".to_owned(),
        };
    }
    let rows = report.expired.iter().map(|e| {
        vec![
            TriggerName::new(&e.project_id, &e.trigger_id).to_string(),
            e.fence_before.owner.clone(),
            e.fence_before.version.to_string(),
            e.claim_version.to_string(),
            if report.dry_run {
                "would expire (dry run)".to_owned()
            } else {
                "expired".to_owned()
            },
        ]
    });
    table(
        &["trigger", "owner", "claim version", "version now", "result"],
        rows,
    )
}
