//! `qlsched publish -f FILE|-`: validate a manifest, then publish it in one admin transaction.

use std::io::Read;
use std::path::PathBuf;

use clap::Args;

use super::args::Access;
use super::output::{emit, opt, table};
use super::{CliError, Global};
use crate::core::Change;
use crate::core::manifest::{ManifestError, parse_manifest};
use crate::core::text::clean;
use crate::store::migrate::check_ready;
use crate::store::publish::{PublishReport, publish};
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
    emit(global.format, &report, render)?;
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
