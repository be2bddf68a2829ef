//! `qlsched migrate [up|status|verify]`.

use clap::{Args, Subcommand};

use super::args::Access;
use super::error::ExitStatus;
use super::output::{emit, opt, table};
use super::{CliError, Global};
use crate::core::time::{span, utc};
use crate::store::migrate::{self, MigrateReport, MigrationStatus, VerifyFinding};
use crate::store::{Begin, run_in_transaction};

#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(subcommand)]
    pub action: Option<MigrateAction>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum MigrateAction {
    /// Apply every pending migration (the default). Safe to run from several places at once.
    Up,
    /// List the migrations this binary carries and what the database has applied, whether
    /// replicas of the previous release may run beside each, what is pending, and which running
    /// replicas (from the registry) would have to stop for it.
    Status,
    /// Compare checksums and each role's grants with what it must hold; exit 78 on any difference.
    Verify,
}

pub async fn run(args: MigrateArgs, global: &Global) -> Result<(), CliError> {
    let action = args.action.unwrap_or(MigrateAction::Up);
    // `status` and `verify` only read: a standby or a read-only login serves them.
    let access = if action == MigrateAction::Up {
        Access::Write
    } else {
        Access::Read
    };
    let settings = global.connection.settings(access)?;
    let schema = &global.connection.schema;
    if action == MigrateAction::Up {
        settings.require_session(
            "migrate",
            "it checks that each of its transactions runs on its own session's server process",
        )?;
    }
    let mut client = settings.connect(schema, "qlsched migrate").await?;
    match action {
        MigrateAction::Up => {
            let report = migrate::migrate_up(&mut client, schema).await?;
            emit(global.format, &report, render_up)
        }
        MigrateAction::Status => {
            let status = run_in_transaction(&client, schema, Begin::ReadOnly, |client| {
                Box::pin(migrate::status(client, schema))
            })
            .await?;
            emit(global.format, &status, |rows| render_status(rows))
        }
        MigrateAction::Verify => {
            let findings = run_in_transaction(&client, schema, Begin::ReadOnly, |client| {
                Box::pin(migrate::verify(client, schema))
            })
            .await?;
            let report = VerifyReport {
                schema: schema.to_string(),
                ok: findings.is_empty(),
                findings,
            };
            emit(global.format, &report, render_verify)?;
            if report.ok {
                Ok(())
            } else {
                Err(CliError::Findings {
                    message: format!(
                        "schema {schema}: {} difference(s) from the expected schema",
                        report.findings.len()
                    ),
                    status: ExitStatus::Config,
                })
            }
        }
    }
}

#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct VerifyReport {
    schema: String,
    ok: bool,
    findings: Vec<VerifyFinding>,
}

fn render_up(report: &MigrateReport) -> String {
    if report.applied.is_empty() {
        return format!(
            "schema {} is up to date at version {}",
            report.schema, report.version
        );
    }
    let rows = report.applied.iter().map(|m| {
        vec![
            m.version.to_string(),
            m.name.clone(),
            opt(m.execution_ms.map(span)),
        ]
    });
    let mut out = format!(
        "{}\nschema {} migrated to version {}",
        table(&["version", "applied", "took"], rows),
        report.schema,
        report.version
    );
    if !report.roles_created.is_empty() {
        out.push_str(&format!(
            "\ngroup roles created: {}",
            report.roles_created.join(", ")
        ));
    }
    if !report.roles_reused.is_empty() {
        out.push_str(&format!(
            "\ngroup roles already on this server, granted to as they are: {} (roles belong to \
             the whole server; `qlsched migrate verify` checks none of them can log in)",
            report.roles_reused.join(", ")
        ));
    }
    out
}

fn render_status(rows: &[MigrationStatus]) -> String {
    let yes_no = |flag: Option<bool>| match flag {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    };
    let mut out = table(
        &[
            "version",
            "name",
            "state",
            "checksum",
            "applied at",
            "previous release may run",
            "oldest build beside it",
        ],
        rows.iter().map(|m| {
            vec![
                m.version.to_string(),
                m.name.clone(),
                m.state.to_owned(),
                m.checksum.get(..12).unwrap_or_default().to_owned(),
                opt(m.applied_at_ms.map(utc)),
                yes_no(m.previous_release_may_run).to_owned(),
                m.upgrade_floor
                    .map_or_else(|| "-".to_owned(), |floor| format!("schema {floor}")),
            ]
        }),
    );
    let pending: Vec<&MigrationStatus> = rows.iter().filter(|m| m.state == "pending").collect();
    if pending.is_empty() {
        out.push_str("\nnothing pending");
        return out;
    }
    out.push_str(&format!(
        "\npending: {} (`qlsched migrate` applies them)",
        pending
            .iter()
            .map(|m| format!("{:04}_{}", m.version, m.name))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mut to_stop: Vec<&crate::store::migrate::RunningReplica> = Vec::new();
    for replica in pending.iter().flat_map(|m| &m.replicas_to_stop) {
        if !to_stop.iter().any(|r| r.owner == replica.owner) {
            to_stop.push(replica);
        }
    }
    if to_stop.is_empty() {
        out.push_str("\nno running replica would have to stop for them");
    } else {
        out.push_str(&format!(
            "\nrunning replicas that would have to stop for them (docs/OPERATIONS.md, \
             \"Upgrading\"): {}",
            to_stop
                .iter()
                .map(|r| format!(
                    "{} ({}, schema {})",
                    crate::core::text::clean(&r.owner),
                    crate::core::text::clean(&r.version),
                    opt(r.schema_version)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

fn render_verify(report: &VerifyReport) -> String {
    if report.ok {
        return format!("schema {}: checksums and grants match", report.schema);
    }
    table(
        &["kind", "difference"],
        report
            .findings
            .iter()
            .map(|f| vec![f.kind.to_owned(), f.message.clone()]),
    )
}
