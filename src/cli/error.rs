//! Every error a subcommand can end with, and the one exit status each maps to (docs/DESIGN.md
//! §5.4). `main` prints `qlsched: <message>` on stderr and exits with [`CliError::exit_code`].

use crate::bench::BenchError;
use crate::core::CoreError;
use crate::core::manifest::ManifestError;
use crate::store::StoreError;
use crate::store::embedded::EmbeddedError;

/// The documented exit statuses, named.
pub mod exit {
    pub const SUCCESS: u8 = 0;
    pub const UNEXPECTED: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const FENCE_REJECTED: u8 = 3;
    pub const NOT_FOUND: u8 = 4;
    pub const NOTHING_ELIGIBLE: u8 = 5;
    pub const DATA: u8 = 65;
    pub const UNAVAILABLE: u8 = 69;
    pub const TEMPFAIL: u8 = 75;
    pub const NO_PERMISSION: u8 = 77;
    pub const CONFIG: u8 = 78;
    /// Stopped by a signal before finishing, as the shell reports a SIGINT death.
    pub const INTERRUPTED: u8 = 130;

    /// Every status above: the one list the README's table, the man pages' EXIT STATUS and
    /// `--help` are tested against.
    pub const ALL: [u8; 12] = [
        SUCCESS,
        UNEXPECTED,
        USAGE,
        FENCE_REJECTED,
        NOT_FOUND,
        NOTHING_ELIGIBLE,
        DATA,
        UNAVAILABLE,
        TEMPFAIL,
        NO_PERMISSION,
        CONFIG,
        INTERRUPTED,
    ];
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Core(#[from] CoreError),
    /// Bad input data given on the command line (a malformed claim token or run id): exit 65.
    #[error("bad input: {0}")]
    BadInput(String),
    #[error("bad manifest: {0}")]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Bench(#[from] BenchError),
    /// The throw-away server of `demo --embedded` could not be had.
    #[error(transparent)]
    Embedded(#[from] EmbeddedError),
    /// A check that found problems (`migrate verify`, `inspect invariants`): already reported on
    /// stdout, the message is the one-line summary.
    #[error("{message}")]
    Findings { message: String, code: u8 },
    /// `expire --owner` named an owner that holds no claim and never appears in the audit, the
    /// runs' `run.created` events or the misfire records: most likely a typo (exit 4).
    #[error(
        "not found: owner \"{}\" holds no claim and was never seen (no audit row, admitted run or misfire record names it); check the name with `qlsched inspect claims`",
        crate::core::text::clean(owner)
    )]
    OwnerNeverSeen { owner: String },
    /// Configuration read from the environment that is invalid (`QLSCHED_SCHEMA`,
    /// `QLSCHED_OWNER`): exit 78. The same value given as a flag is a usage error.
    #[error("configuration invalid: {0}")]
    Config(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => exit::USAGE,
            CliError::Core(error) => error.exit_code(),
            CliError::Manifest(_) | CliError::BadInput(_) => exit::DATA,
            CliError::Store(error) => error.exit_code(),
            CliError::Bench(error) => error.exit_code(),
            CliError::Embedded(error) => error.exit_code(),
            CliError::Findings { code, .. } => *code,
            CliError::Config(_) => exit::CONFIG,
            CliError::OwnerNeverSeen { .. } => exit::NOT_FOUND,
            CliError::Io(_) => exit::UNEXPECTED,
        }
    }

    /// What kind of failure this is, for scripts: one word per exit status, and for 78 whether
    /// the schema or the configuration is at fault.
    pub fn kind(&self) -> &'static str {
        match self {
            CliError::Store(StoreError::SchemaNotReady(_)) => "schema_not_ready",
            // `inspect` and `inspect trigger` report an unready schema as findings.
            CliError::Findings { message, code }
                if *code == exit::CONFIG && message.starts_with("schema not ready") =>
            {
                "schema_not_ready"
            }
            CliError::Store(StoreError::TimedOut(_)) => "timed_out",
            CliError::Manifest(_) => "bad_manifest",
            _ => match self.exit_code() {
                exit::USAGE => "usage",
                exit::FENCE_REJECTED => "fence_rejected",
                exit::NOT_FOUND => "not_found",
                exit::NOTHING_ELIGIBLE => "nothing_eligible",
                exit::DATA => "bad_input",
                exit::UNAVAILABLE => "unavailable",
                exit::TEMPFAIL => "transient",
                exit::NO_PERMISSION => "permission_denied",
                exit::CONFIG => "config",
                exit::INTERRUPTED => "interrupted",
                _ => "unexpected",
            },
        }
    }

    /// The error as `-o json` writes it to stderr: one object with `error` (the message as the
    /// table format prints it), `exit_status`, `kind`, and the fields a script needs: `path`
    /// and `reason` of a refused manifest; `owner` and `seen` when an owner held nothing.
    pub fn json(&self, message: &str) -> serde_json::Value {
        let mut object = serde_json::json!({
            "error": message,
            "exit_status": self.exit_code(),
            "kind": self.kind(),
        });
        match self {
            CliError::Manifest(error) => {
                object["path"] = error.path.clone().into();
                object["reason"] = crate::core::text::clean_message(&error.message).into();
            }
            CliError::OwnerNeverSeen { owner } => {
                object["owner"] = crate::core::text::clean(owner).into();
                object["seen"] = false.into();
            }
            _ => {}
        }
        object
    }

    /// Standard output went away (`qlsched inspect | head`): not an error, exit quietly.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, CliError::Io(error) if error.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeSet;

    use super::exit;

    fn documented(text: &str, row: impl Fn(&str) -> Option<&str>) -> BTreeSet<u8> {
        text.lines()
            .filter_map(|line| row(line)?.trim().parse().ok())
            .collect()
    }

    /// The README's table, the man pages' EXIT STATUS and `--help` list exactly the statuses
    /// of [`exit::ALL`]: a status added in one place and forgotten in another fails here.
    #[test]
    fn every_exit_table_lists_exactly_the_statuses_there_are() {
        let all: BTreeSet<u8> = exit::ALL.into_iter().collect();
        let readme = include_str!("../../README.md");
        let table = readme
            .split("## Exit status")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .unwrap();
        let in_readme = documented(table, |line| line.strip_prefix("| ")?.split(" |").next());
        assert_eq!(in_readme, all, "README's exit status table");
        let in_man = documented(super::super::manual::EXIT_STATUS, |line| {
            line.strip_prefix("  ")?.split_whitespace().next()
        });
        assert_eq!(in_man, all, "the man pages' EXIT STATUS");
        let help = super::super::AFTER_HELP.replace('\n', " ");
        let in_help: BTreeSet<u8> = help
            .split([',', ':', '.'])
            .filter_map(|part| part.split_whitespace().next()?.parse().ok())
            .collect();
        assert_eq!(in_help, all, "--help's exit status line");
    }
}
