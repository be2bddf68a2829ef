//! `qlsched publish -f FILE|-`: validate a manifest, then publish it in one admin transaction.

use std::io::Read;
use std::path::PathBuf;

use clap::Args;

use super::args::Access;
use super::output::{emit, opt, table};
use super::{CliError, Global};
use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::core::Change;
use crate::core::load::{AddedGroup, LoadWarning, TriggerGroup, added_boundaries_beyond_grace};
use crate::core::manifest::{Manifest, ManifestError, ProjectStatus, parse_manifest};
use crate::core::text::clean;
use crate::store::migrate::check_ready;
use crate::store::publish::{PublishReport, publish};
use crate::store::read;
use crate::store::{Begin, run_in_transaction};

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The JSON manifest to publish, or `-` for standard input.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,

    /// Validate and diff against the database, report, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub async fn run(args: PublishArgs, global: &Global) -> Result<(), CliError> {
    let text = read_manifest(&args.file)?;
    // Validated in full before any connection is opened: a bad manifest writes nothing.
    let manifest = parse_manifest(&text)?;
    if let Some(warning) =
        grace_under_lease(&manifest, crate::core::CoordinatorConfig::default().lease)
    {
        eprintln!("qlsched: warning: {warning}");
    }
    let settings = global
        .connection
        .settings(Access::writing_unless(args.dry_run))?;
    let mut client = settings
        .connect(&global.connection.schema, "qlsched publish")
        .await?;
    // Definitions written into a schema `run` refuses (changed, or from a newer binary) would be
    // read by code that does not know them.
    let schema = &global.connection.schema;
    run_in_transaction(&client, schema, Begin::ReadOnly, |client| {
        Box::pin(check_ready(client, schema))
    })
    .await?;
    let report = publish(&mut client, schema, &manifest, args.dry_run).await?;
    // A dry run looks a day ahead: does the change add occurrences to an instant that these
    // replicas, at their busiest recent rate, could not admit within the grace?
    let load_warnings = if report.dry_run {
        run_in_transaction(&client, schema, Begin::ReadOnly, |client| {
            Box::pin(load_warnings(client, &manifest, &report))
        })
        .await?
    } else {
        Vec::new()
    };
    let shown = PublishShown {
        report,
        load_warnings,
    };
    emit(global.format, &shown, |shown| {
        let mut out = render(&shown.report);
        for w in &shown.load_warnings {
            out.push_str(&format!(
                "\nwarning: this change adds {} occurrences at {}, which would then hold {}: at \
                 the busiest admission rate of the last hour that takes {}, beyond the misfire \
                 grace of {} (spread them over the minute, or raise the grace)",
                w.added,
                crate::core::time::utc(w.at_ms),
                w.occurrences,
                crate::core::time::span(w.expected_admission_ms),
                crate::core::time::span(w.misfire_grace_ms)
            ));
        }
        out
    })?;
    let report = shown.report;
    if global.format == super::OutputFormat::Table {
        eprintln!(
            "{}{} created, {} changed, {} unchanged",
            if report.dry_run {
                "dry run, nothing written: "
            } else {
                ""
            },
            report.count(Change::Created),
            report.count(Change::Changed),
            report.count(Change::Unchanged)
        );
    }
    Ok(())
}

/// `publish`'s report, and with --dry-run the boundaries the change would put beyond the grace.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct PublishShown {
    #[serde(flatten)]
    pub report: PublishReport,
    /// With --dry-run: instants of the next day where the change adds occurrences and admitting
    /// all due there (at the busiest minute's rate of the last hour) would take longer than the
    /// added triggers' misfire grace, the longest first (at most 5; none without runs to measure
    /// a rate by). Empty when publishing.
    pub load_warnings: Vec<LoadWarning>,
}

/// How far ahead a dry run looks for boundaries a change overloads.
const WARNING_HORIZON_MS: i64 = 86_400_000;

async fn load_warnings(
    client: &tokio_postgres::Client,
    manifest: &Manifest,
    report: &PublishReport,
) -> Result<Vec<LoadWarning>, crate::store::StoreError> {
    let changed: HashSet<&str> = report
        .items
        .iter()
        .filter(|item| item.kind == "trigger" && item.change != Change::Unchanged)
        .map(|item| item.name.as_str())
        .collect();
    // The dry run rolled back: the database still has the triggers as they were, and counts
    // them in `current`. A changed trigger adds occurrences only when its expression or zone
    // changed (or it was not claimable before); then its old group loses it.
    let mut candidates = Vec::new();
    for project in manifest
        .projects
        .iter()
        .filter(|p| p.status == ProjectStatus::Active)
    {
        for trigger in project.triggers.iter().filter(|t| t.enabled) {
            if changed.contains(format!("{}/{}", project.id, trigger.id).as_str()) {
                candidates.push((project, trigger));
            }
        }
    }
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<(String, String)> = candidates
        .iter()
        .map(|(project, trigger)| (project.id.clone(), trigger.id.clone()))
        .collect();
    let before: HashMap<(String, String), read::load::ClaimableTrigger> =
        read::load::claimable_triggers(client, &names)
            .await?
            .into_iter()
            .map(|t| ((t.project_id.clone(), t.trigger_id.clone()), t))
            .collect();
    let mut current = read::load::trigger_groups(client).await?;
    let mut added: Vec<AddedGroup> = Vec::new();
    for (project, trigger) in candidates {
        if let Some(old) = before.get(&(project.id.clone(), trigger.id.clone())) {
            if old.cron_expr == trigger.cron_expr && old.time_zone == trigger.time_zone {
                continue;
            }
            if let Some(group) = current
                .iter_mut()
                .find(|g| g.cron_expr == old.cron_expr && g.time_zone == old.time_zone)
            {
                group.triggers = group.triggers.saturating_sub(1);
            }
        }
        match added.iter_mut().find(|a| {
            a.group.cron_expr == trigger.cron_expr && a.group.time_zone == trigger.time_zone
        }) {
            Some(a) => {
                a.group.triggers += 1;
                a.misfire_grace_ms = a.misfire_grace_ms.min(trigger.misfire_grace_ms);
            }
            None => added.push(AddedGroup {
                group: TriggerGroup {
                    cron_expr: trigger.cron_expr.clone(),
                    time_zone: trigger.time_zone.clone(),
                    triggers: 1,
                },
                misfire_grace_ms: trigger.misfire_grace_ms,
            }),
        }
    }
    current.retain(|g| g.triggers > 0);
    if added.is_empty() {
        return Ok(Vec::new());
    }
    let (now_ms, busiest) = read::load::busiest_minute(client).await?;
    Ok(added_boundaries_beyond_grace(
        &current,
        &added,
        now_ms,
        WARNING_HORIZON_MS,
        super::inspect::busiest_rate(busiest),
        5,
    ))
}

/// A warning when triggers have a misfire grace shorter than `lease` (the replicas' default):
/// the claims of a replica lost mid-round (killed, partitioned) wait out their lease before
/// another replica takes them, and an occurrence that waits longer than its grace is passed over
/// into a misfire record. Accepted all the same: a short grace is a choice (docs/DECISIONS.md,
/// "A grace shorter than the lease").
fn grace_under_lease(
    manifest: &crate::core::manifest::Manifest,
    lease: std::time::Duration,
) -> Option<String> {
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let short: Vec<String> = manifest
        .projects
        .iter()
        .flat_map(|project| {
            project
                .triggers
                .iter()
                .filter(|trigger| trigger.enabled && trigger.misfire_grace_ms < lease_ms)
                .map(move |trigger| {
                    format!(
                        "{}/{} ({})",
                        project.id,
                        trigger.id,
                        crate::core::time::span(trigger.misfire_grace_ms)
                    )
                })
        })
        .collect();
    if short.is_empty() {
        return None;
    }
    const LISTED: usize = 5;
    let more = short.len().saturating_sub(LISTED);
    Some(format!(
        "{} trigger{} with a misfire grace shorter than the default lease ({}): {}{}; a replica \
         lost while it holds their claims leaves them for its lease, and occurrences later than \
         the grace are passed over (misfire records): run the replicas with a --lease under the \
         grace, or raise the grace",
        short.len(),
        if short.len() == 1 { "" } else { "s" },
        crate::core::format_duration(lease),
        short
            .into_iter()
            .take(LISTED)
            .collect::<Vec<_>>()
            .join(", "),
        if more > 0 {
            format!(", and {more} more")
        } else {
            String::new()
        }
    ))
}

/// The manifest's text. A file that cannot be read is a usage error (2); one that is read but
/// is not UTF-8 is bad input (65), with the byte offset of the first bad byte.
fn read_manifest(file: &PathBuf) -> Result<String, CliError> {
    let mut bytes = Vec::new();
    let result = if file.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::read(file).map(|read| bytes = read)
    };
    result.map_err(|error| {
        CliError::Usage(format!(
            "cannot read manifest {}: {error}",
            clean(&file.display().to_string())
        ))
    })?;
    String::from_utf8(bytes).map_err(|error| {
        CliError::Manifest(ManifestError {
            path: "$".to_owned(),
            message: format!(
                "invalid UTF-8 at byte offset {} of {}",
                error.utf8_error().valid_up_to(),
                clean(&file.display().to_string())
            ),
        })
    })
}

/// Created and changed definitions; unchanged ones are only counted (on stderr).
fn render(report: &PublishReport) -> String {
    let rows: Vec<Vec<String>> = report
        .items
        .iter()
        .filter(|item| item.change != Change::Unchanged)
        .map(|item| {
            vec![
                item.kind.to_owned(),
                item.name.clone(),
                item.change.to_string(),
                opt(item.revision),
                item.changed_fields
                    .as_ref()
                    .map_or_else(String::new, |fields| fields.join(", ")),
                opt(item.next_occurrence_ms.map(crate::core::time::utc)),
            ]
        })
        .collect();
    let dry_run = if report.dry_run {
        "dry run: nothing written\n"
    } else {
        ""
    };
    if rows.is_empty() {
        return format!("{dry_run}nothing to publish: every definition is unchanged");
    }
    format!(
        "{dry_run}{}",
        table(
            &[
                "kind",
                "name",
                "change",
                "revision",
                "fields",
                "next occurrence",
            ],
            rows,
        )
    )
}
