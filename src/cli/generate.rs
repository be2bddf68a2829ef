//! `qlsched generate` (hidden): shell completions and man pages from the clap definitions, as
//! clap_mangen advises (from the binary, not build.rs). The checked-in `completions/` and `man/`
//! are its output; a test fails when they are stale.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use clap_complete::Shell;

use super::CliError;

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Folder to write `completions/` and `man/` into.
    #[arg(long, default_value = ".")]
    pub out_dir: PathBuf,
}

pub fn run(args: GenerateArgs) -> Result<(), CliError> {
    write_all(&args.out_dir)?;
    eprintln!("wrote {0}/completions and {0}/man", args.out_dir.display());
    Ok(())
}

/// Writes every completion script and man page under `out_dir`.
pub fn write_all(out_dir: &Path) -> Result<(), CliError> {
    let completions = out_dir.join("completions");
    std::fs::create_dir_all(&completions)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut super::command(), "qlsched", &completions)?;
    }
    let man = out_dir.join("man");
    std::fs::create_dir_all(&man)?;
    let root = super::command();
    write_page(&man, &root, "qlsched", true)?;
    write_subcommand_pages(&man, &root, "qlsched", "qlsched")
}

/// One page per visible subcommand, at every depth (`qlsched-inspect-schedules.1`): the
/// SUBCOMMANDS section of a page refers to its children's pages by those names.
fn write_subcommand_pages(
    man: &Path,
    parent: &clap::Command,
    page_prefix: &str,
    bin_prefix: &str,
) -> Result<(), CliError> {
    for sub in parent.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("{page_prefix}-{}", sub.get_name());
        let bin_name = format!("{bin_prefix} {}", sub.get_name());
        write_page(
            man,
            &sub.clone().name(name.clone()).bin_name(bin_name.clone()),
            &name,
            false,
        )?;
        write_subcommand_pages(man, sub, &name, &bin_name)?;
    }
    Ok(())
}

fn write_page(dir: &Path, command: &clap::Command, name: &str, root: bool) -> Result<(), CliError> {
    // `help` is clap's, documented by --help itself; listed, it would name pages nobody writes.
    let command = &command.clone().disable_help_subcommand(true);
    let page = clap_mangen::Man::new(command.clone())
        .title(name.to_uppercase())
        .section("1")
        .manual("qlsched manual");
    let mut out: Vec<u8> = Vec::new();
    page.render_title(&mut out)?;
    page.render_name_section(&mut out)?;
    synopsis(&mut out, command)?;
    page.render_description_section(&mut out)?;
    if command.get_arguments().any(|a| !a.is_hide_set()) {
        page.render_options_section(&mut out)?;
    }
    if command.get_subcommands().any(|s| !s.is_hide_set()) {
        page.render_subcommands_section(&mut out)?;
    }
    // A nested page (qlsched-inspect-schedules) shows its command's examples, and the JSON shapes
    // and notes of its own words (`inspect schedules`).
    let words = name
        .strip_prefix("qlsched-")
        .unwrap_or(name)
        .replace('-', " ");
    let short = words.split(' ').next().unwrap_or(&words);
    let json = match (
        super::manual::json_section(&words),
        super::contract::section(&words),
    ) {
        (Some(prose), Some(shapes)) => Some(format!("{shapes}\n\n{prose}")),
        (prose, shapes) => shapes.or(prose),
    };
    if let Some(json) = json {
        section(&mut out, "JSON OUTPUT", &json)?;
    }
    for (title, body) in super::manual::extra_sections(short) {
        section(&mut out, title, &body)?;
    }
    section(&mut out, "EXIT STATUS", super::manual::EXIT_STATUS)?;
    section(&mut out, "ENVIRONMENT", super::manual::ENVIRONMENT)?;
    section(
        &mut out,
        "EXAMPLES",
        super::manual::examples(if root { "qlsched" } else { short }),
    )?;
    if root {
        section(&mut out, "SEE ALSO", super::manual::SEE_ALSO)?;
    }
    std::fs::write(dir.join(format!("{name}.1")), out)?;
    Ok(())
}

/// The SYNOPSIS with each option's value placeholder (`[--project PROJECT]`), which clap_mangen's
/// own leaves out, so that a reader of the synopsis alone can tell a flag from an option.
fn synopsis(out: &mut Vec<u8>, command: &clap::Command) -> std::io::Result<()> {
    let bold = |text: &str| format!("\\fB{}\\fR", roff_escape(text));
    let italic = |text: &str| format!("\\fI{}\\fR", roff_escape(text));
    // Built, so that every argument knows how many values it takes.
    let mut command = command.clone();
    command.build();
    let name = command.get_bin_name().unwrap_or(command.get_name());
    let mut parts = vec![bold(name)];
    let shown = command.get_arguments().filter(|a| {
        !a.is_hide_set()
            && !matches!(
                a.get_action(),
                clap::ArgAction::Help
                    | clap::ArgAction::HelpShort
                    | clap::ArgAction::HelpLong
                    | clap::ArgAction::Version
            )
    });
    for arg in shown {
        let values: Vec<String> = arg
            .get_value_names()
            .map(|names| names.iter().map(|n| italic(n.as_str())).collect())
            .unwrap_or_else(|| vec![italic(&arg.get_id().as_str().to_uppercase())]);
        let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
        let text = if arg.is_positional() {
            values.join(" ")
        } else {
            let mut names: Vec<String> = Vec::new();
            if let Some(short) = arg.get_short() {
                names.push(bold(&format!("-{short}")));
            }
            if let Some(long) = arg.get_long() {
                names.push(bold(&format!("--{long}")));
            }
            let names = names.join("|");
            if takes_value {
                format!("{names} {}", values.join(" "))
            } else {
                names
            }
        };
        parts.push(if arg.is_required_set() {
            text
        } else {
            format!("[{text}]")
        });
    }
    if command.get_subcommands().any(|s| !s.is_hide_set()) {
        parts.push(italic("<subcommand>"));
    }
    writeln!(out, ".SH SYNOPSIS")?;
    writeln!(out, "{}", parts.join(" "))?;
    Ok(())
}

/// A section of plain paragraphs; a line starting with two spaces is kept as a literal line.
fn section(out: &mut Vec<u8>, title: &str, body: &str) -> std::io::Result<()> {
    writeln!(out, ".SH \"{title}\"")?;
    for paragraph in body.trim().split("\n\n") {
        writeln!(out, ".PP")?;
        for line in paragraph.lines() {
            if let Some(literal) = line.strip_prefix("  ") {
                writeln!(out, ".br\n{}", roff_escape(literal))?;
            } else {
                writeln!(out, "{}", roff_escape(line))?;
            }
        }
    }
    Ok(())
}

fn roff_escape(line: &str) -> String {
    let escaped = line.replace('\\', "\\\\").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    /// An option's synopsis shows its value; a flag's shows none; a required argument has no
    /// brackets.
    #[test]
    fn the_synopsis_names_every_options_value() {
        let root = super::super::command();
        let backfill = root.find_subcommand("backfill").unwrap().clone();
        let mut out = Vec::new();
        super::synopsis(&mut out, &backfill.bin_name("qlsched backfill")).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(r"[\fB\-\-from\fR \fITIME\fR]")
                && text.contains(r"[\fB\-\-max\fR \fIN\fR]")
                && text.contains(r"[\fB\-\-dry\-run\fR]")
                && text.contains(r"\fBqlsched backfill\fR \fIPROJECT/TRIGGER\fR ["),
            "{text}"
        );
    }
}
