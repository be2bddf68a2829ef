//! Rendering, in one place: tables for people (comfy-table), JSON for scripts. Data goes to
//! stdout, everything else to stderr; a closed stdout ends the command quietly.

use std::io::Write;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use serde::Serialize;

use super::args::OutputFormat;
use super::error::CliError;
use crate::core::text::clean;

/// Writes `text` to stdout; a broken pipe surfaces as an error `main` treats as a quiet exit.
pub fn print(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        stdout.write_all(b"\n")?;
    }
    stdout.flush()?;
    Ok(())
}

/// One JSON document on one line.
pub fn print_json(value: &impl Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string(value).map_err(|error| CliError::Io(error.into()))?;
    print(&text)
}

/// A table with a header row; plain ASCII-safe UTF-8 borders, no colour of its own.
pub fn table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled);
    table.set_header(header.iter().copied());
    // Cells repeat ids, owners and reasons as they were typed: escaped and shortened.
    for row in rows {
        table.add_row(row.iter().map(|cell| clean(cell)));
    }
    table.to_string()
}

/// Prints `value` as JSON, or the table `render` makes of it.
pub fn emit<T: Serialize>(
    format: OutputFormat,
    value: &T,
    render: impl FnOnce(&T) -> String,
) -> Result<(), CliError> {
    match format {
        OutputFormat::Json => print_json(value),
        OutputFormat::Table => print(&render(value)),
    }
}

/// `Some(x)` as text, `None` as a dash.
pub fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}
