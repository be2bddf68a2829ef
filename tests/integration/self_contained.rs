//! No tracked file sends a reader to a document the repository does not contain: no design file
//! but docs/DESIGN.md, no style guide or shared folder from outside, no tracker issue numbers, and
//! no text in Chinese script (the ADR's section titles were; docs/DESIGN.md states them in
//! English). Needs no database.
//!
//! The patterns are spelled in pieces below so that this file does not match itself.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Findings that stay, each with its reason, as (path, line, what). Keep this list short.
///
/// The comments of applied migrations cite the design by section number without its folder. A
/// migration's checksum covers the whole file (docs/DESIGN.md §3.1), so editing one, even a
/// comment, would make every database migrated with it fail readiness; docs/DESIGN.md §3.1 says
/// what those comments refer to.
const ALLOWED: &[(&str, usize, &str)] = &[
    (
        "migrations/0001_schedule_admission.sql",
        1,
        DESIGN_WITHOUT_DOCS,
    ),
    (
        "migrations/0001_schedule_admission.sql",
        171,
        DESIGN_WITHOUT_DOCS,
    ),
    (
        "migrations/0002_roles_and_grants.sql",
        1,
        DESIGN_WITHOUT_DOCS,
    ),
];

const DESIGN_WITHOUT_DOCS: &str = "a design file other than docs/DESIGN.md";

#[test]
fn no_tracked_file_cites_a_document_outside_the_repository() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut findings = Vec::new();
    for path in tracked_files(&root) {
        // A drawn chart (docs/charts): its hexadecimal colours are no tracker's numbers, and its
        // words are the bench's own labels.
        if path.ends_with(".svg") {
            continue;
        }
        let Ok(bytes) = std::fs::read(root.join(&path)) else {
            continue; // deleted in the working tree, or unreadable: nothing to cite from
        };
        let Ok(text) = String::from_utf8(bytes) else {
            continue; // binary
        };
        for (index, line) in text.lines().enumerate() {
            for what in citations(line) {
                findings.push((path.clone(), index + 1, what, line.trim().to_owned()));
            }
        }
    }

    let allows = |allowed: &(&str, usize, &str), finding: &(String, usize, &str, String)| {
        allowed.0 == finding.0 && allowed.1 == finding.1 && allowed.2 == finding.2
    };
    let refused: Vec<String> = findings
        .iter()
        .filter(|finding| !ALLOWED.iter().any(|allowed| allows(allowed, finding)))
        .map(|(path, line, what, text)| format!("{path}:{line}: {what}: {text}"))
        .collect();
    let unused: Vec<_> = ALLOWED
        .iter()
        .filter(|allowed| !findings.iter().any(|finding| allows(allowed, finding)))
        .collect();
    assert!(
        refused.is_empty(),
        "tracked files cite what the repository does not contain; cite docs/DESIGN.md §N, a \
         module or a test instead:\n{}",
        refused.join("\n")
    );
    assert!(
        unused.is_empty(),
        "allow-list entries that no longer match anything (remove them): {unused:?}"
    );
}

#[test]
fn the_scan_finds_each_kind_of_citation() {
    let design = concat!("DESIGN", ".md");
    let cases = [
        (format!("see {design} section 4"), DESIGN_WITHOUT_DOCS),
        (format!("see ../{design}"), DESIGN_WITHOUT_DOCS),
        (
            format!("({}, after ripgrep)", concat!("STYLE", ".md")),
            STYLE_GUIDE,
        ),
        (
            format!("in {}/seeds", concat!("..", "/shared")),
            SHARED_FOLDER,
        ),
        (format!("asked for in {} 4", "Issue"), ISSUE_NUMBER),
        (format!("{} 12, point 3", "issues"), ISSUE_NUMBER),
        (format!("fixed in {}{}7", "issue ", '#'), ISSUE_NUMBER),
        (format!("closes {}12.", '#'), ISSUE_NUMBER),
        (format!("ADR-0105 \"{}\"", '\u{6709}'), CHINESE),
    ];
    for (line, what) in &cases {
        assert!(
            citations(line).contains(what),
            "{line:?} should be found as {what}"
        );
    }
    let fine = [
        format!("docs/{design} §4.5"),
        "#[derive(Debug)] and r#\"raw\"# and &#8212; and colour #1e1e1e".to_owned(),
        "an issue with 3 rows; ${#words[@]}; \\#1".to_owned(),
        "ADR-0105 names the design's origin (docs/DESIGN.md §8)".to_owned(),
    ];
    for line in &fine {
        assert!(
            citations(line).is_empty(),
            "{line:?} was found as {:?}",
            citations(line)
        );
    }
}

const STYLE_GUIDE: &str = "a style guide the repository does not contain";
const SHARED_FOLDER: &str = "a shared folder outside the repository";
const ISSUE_NUMBER: &str = "a tracker issue number";
const CHINESE: &str = "text in Chinese script";

/// What `line` cites that the repository does not contain, one entry per kind found.
fn citations(line: &str) -> Vec<&'static str> {
    let mut found = Vec::new();
    let design = concat!("DESIGN", ".md");
    if line
        .match_indices(design)
        .any(|(at, _)| !line[..at].ends_with("docs/"))
    {
        found.push(DESIGN_WITHOUT_DOCS);
    }
    if line.contains(concat!("STYLE", ".md")) {
        found.push(STYLE_GUIDE);
    }
    if line.contains(concat!("..", "/shared")) || line.contains(concat!("/work", "/shared")) {
        found.push(SHARED_FOLDER);
    }
    if cites_issue_word(line) || cites_hash_number(line) {
        found.push(ISSUE_NUMBER);
    }
    if line.chars().any(is_chinese) {
        found.push(CHINESE);
    }
    found
}

/// The word for a tracker entry (singular or plural, any case), then an optional `#`, then a
/// number.
fn cites_issue_word(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let word = concat!("iss", "ue");
    lower.match_indices(word).any(|(at, _)| {
        let starts_word = !lower[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric());
        let rest = &lower[at + word.len()..];
        let rest = rest.strip_prefix('s').unwrap_or(rest);
        let rest = rest.trim_start_matches([' ', '/']);
        let rest = rest.strip_prefix('#').unwrap_or(rest);
        starts_word && rest.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// A number sign before a number, as trackers write a reference: `#`, digits, then no letter or
/// digit, and before the `#` nothing that makes it something else (`&#8212;`, `\#`, `$#`, `r#`,
/// `##`, a word).
fn cites_hash_number(line: &str) -> bool {
    let bytes = line.as_bytes();
    bytes.iter().enumerate().any(|(at, &b)| {
        if b != b'#' {
            return false;
        }
        let before = at.checked_sub(1).map(|i| bytes[i]);
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || b"&\\$#_".contains(&c)) {
            return false;
        }
        let digits = bytes[at + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let after = bytes.get(at + 1 + digits);
        digits > 0 && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

/// CJK ideographs and their punctuation and full-width forms.
fn is_chinese(c: char) -> bool {
    matches!(c, '\u{3000}'..='\u{303f}' | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}'
        | '\u{f900}'..='\u{faff}' | '\u{ff00}'..='\u{ffef}')
}

/// The files git tracks, relative to `root`; where git or the repository is missing, every file
/// under `root` but `.git` and `target`.
fn tracked_files(root: &Path) -> Vec<String> {
    let listed = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output();
    if let Ok(output) = listed
        && output.status.success()
    {
        return output
            .stdout
            .split(|&b| b == 0)
            .filter(|name| !name.is_empty())
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .collect();
    }
    let mut files = Vec::new();
    walk(root, root, &mut files);
    files
}

fn walk(root: &Path, dir: &Path, files: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != ".git" && !(dir == root && name == "target") {
                walk(root, &path, files);
            }
        } else if let Ok(relative) = path.strip_prefix(root) {
            files.push(relative.to_string_lossy().into_owned());
        }
    }
}
