//! Every error a subcommand can end with, and the one table that gives each its exit status and
//! its `kind` word (docs/DESIGN.md §5.4). `main` prints `qlsched: <message>` on stderr and exits
//! with [`CliError::status`]. The layers below carry kinds of failure (their error variants), not
//! numbers: [`CliError::class`] is the one place a number is chosen.

use crate::bench::BenchError;
use crate::core::CoreError;
use crate::core::manifest::ManifestError;
use crate::embedded::EmbeddedError;
use crate::store::StoreError;

/// The documented exit statuses: the one list the README's table, the man pages' EXIT STATUS and
/// `--help` are tested against or written from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExitStatus {
    Success,
    Unexpected,
    Usage,
    FenceRejected,
    NotFound,
    NothingEligible,
    /// The claim held, and the trigger's definitions no longer admit the occurrence.
    DefinitionRefused,
    /// `inspect --check` found an outage (`core::outage`): no live replica with rows due, rows
    /// overdue beyond their grace, or admissions stopped while rows are due.
    Outage,
    Data,
    Unavailable,
    TempFail,
    NoPermission,
    Config,
    /// Stopped by a signal before finishing, as the shell reports a SIGINT death.
    Interrupted,
}

impl ExitStatus {
    /// Every status, in the order of the tables.
    pub const ALL: [ExitStatus; 14] = [
        ExitStatus::Success,
        ExitStatus::Unexpected,
        ExitStatus::Usage,
        ExitStatus::FenceRejected,
        ExitStatus::NotFound,
        ExitStatus::NothingEligible,
        ExitStatus::DefinitionRefused,
        ExitStatus::Outage,
        ExitStatus::Data,
        ExitStatus::Unavailable,
        ExitStatus::TempFail,
        ExitStatus::NoPermission,
        ExitStatus::Config,
        ExitStatus::Interrupted,
    ];

    /// The number the process exits with: the small ones qlsched's own, the rest as sysexits.h.
    pub const fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Unexpected => 1,
            ExitStatus::Usage => 2,
            ExitStatus::FenceRejected => 3,
            ExitStatus::NotFound => 4,
            ExitStatus::NothingEligible => 5,
            ExitStatus::DefinitionRefused => 6,
            ExitStatus::Outage => 7,
            ExitStatus::Data => 65,
            ExitStatus::Unavailable => 69,
            ExitStatus::TempFail => 75,
            ExitStatus::NoPermission => 77,
            ExitStatus::Config => 78,
            ExitStatus::Interrupted => 130,
        }
    }

    /// The JSON error's `kind` for an error of this status that has no narrower word (see
    /// [`Class`]): one word per status, for scripts.
    pub const fn kind(self) -> &'static str {
        match self {
            ExitStatus::Success => "success",
            ExitStatus::Unexpected => "unexpected",
            ExitStatus::Usage => "usage",
            ExitStatus::FenceRejected => "fence_rejected",
            ExitStatus::NotFound => "not_found",
            ExitStatus::NothingEligible => "nothing_eligible",
            ExitStatus::DefinitionRefused => "definition_refused",
            ExitStatus::Outage => "outage",
            ExitStatus::Data => "bad_input",
            ExitStatus::Unavailable => "unavailable",
            ExitStatus::TempFail => "transient",
            ExitStatus::NoPermission => "permission_denied",
            ExitStatus::Config => "config",
            ExitStatus::Interrupted => "interrupted",
        }
    }

    /// What the status means, in the few words of `--help`'s exit status line (the README and
    /// the man pages say more).
    const fn summary(self) -> &'static str {
        match self {
            ExitStatus::Success => "success",
            ExitStatus::Unexpected => "unexpected error",
            ExitStatus::Usage => "usage error (any flag value malformed or out of range)",
            ExitStatus::FenceRejected => "fence rejected",
            ExitStatus::NotFound => "not found",
            ExitStatus::NothingEligible => "nothing eligible",
            ExitStatus::DefinitionRefused => "definition refused",
            ExitStatus::Outage => "outage found (inspect --check)",
            ExitStatus::Data => "bad input data",
            ExitStatus::Unavailable => "database unavailable",
            ExitStatus::TempFail => {
                "transient conflict (retries exhausted; a deadlock or a cancelled statement)"
            }
            ExitStatus::NoPermission => "permission denied",
            ExitStatus::Config => "schema not ready or configuration from the environment invalid",
            ExitStatus::Interrupted => "interrupted",
        }
    }

    /// `--help`'s exit status line, written from [`ExitStatus::ALL`] so it cannot miss one.
    pub fn help_line() -> String {
        let statuses: Vec<String> = ExitStatus::ALL
            .iter()
            .map(|status| format!("{} {}", status.code(), status.summary()))
            .collect();
        format!("Exit status: {}.", statuses.join(", "))
    }
}

impl From<ExitStatus> for std::process::ExitCode {
    fn from(status: ExitStatus) -> Self {
        std::process::ExitCode::from(status.code())
    }
}

/// What [`CliError::class`] says of an error: its exit status, and the `kind` word of its JSON
/// form, which for a few errors is narrower than the status's own word, so that a script tells an
/// unready schema from a bad setting (both 78), or a timeout from a conflict (both 75).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    pub status: ExitStatus,
    pub kind: &'static str,
}

impl Class {
    const fn of(status: ExitStatus) -> Self {
        Class {
            status,
            kind: status.kind(),
        }
    }

    const fn narrowed(status: ExitStatus, kind: &'static str) -> Self {
        Class { status, kind }
    }
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
    /// A check that found problems (`migrate verify`, `inspect invariants`), or a command
    /// stopped by a signal after its summary: already reported on stdout, the message is the
    /// one-line summary.
    #[error("{message}")]
    Findings { message: String, status: ExitStatus },
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
    /// The one table of docs/DESIGN.md §5.4: every error of every layer, matched variant by
    /// variant (no wildcard), so that a new variant does not compile until it has a status. An
    /// error the bench wraps has the status and kind it has on its own.
    pub fn class(&self) -> Class {
        use ExitStatus::{
            Config, Data, DefinitionRefused, FenceRejected, NoPermission, NotFound,
            NothingEligible, TempFail, Unavailable, Unexpected, Usage,
        };
        match self {
            CliError::Usage(_) => Class::of(Usage),
            CliError::BadInput(_) => Class::of(Data),
            CliError::Manifest(ManifestError { .. })
            | CliError::Bench(BenchError::Manifest(ManifestError { .. })) => {
                Class::narrowed(Data, "bad_manifest")
            }
            CliError::Findings { status, .. } => Class::of(*status),
            CliError::OwnerNeverSeen { .. } => Class::of(NotFound),
            CliError::Config(_) | CliError::Bench(BenchError::Config(_)) => Class::of(Config),
            CliError::Io(_) => Class::of(Unexpected),
            CliError::Core(error) | CliError::Bench(BenchError::Core(error)) => match error {
                CoreError::InvalidCron { .. }
                | CoreError::UnknownTimeZone(_)
                | CoreError::NoOccurrence { .. } => Class::of(Data),
                CoreError::InvalidDuration { .. } => Class::of(Usage),
                CoreError::OutOfBounds { .. } => Class::of(Config),
            },
            CliError::Store(error) | CliError::Bench(BenchError::Store(error)) => match error {
                StoreError::Unavailable(_) => Class::of(Unavailable),
                StoreError::PermissionDenied(_) | StoreError::Untrusted(_) => {
                    Class::of(NoPermission)
                }
                StoreError::SchemaNotReady(_) => Class::narrowed(Config, "schema_not_ready"),
                StoreError::Config(_) => Class::of(Config),
                StoreError::RetriesExhausted { .. } => Class::of(TempFail),
                StoreError::TimedOut(_) => Class::narrowed(TempFail, "timed_out"),
                StoreError::Conflict(_) => Class::narrowed(TempFail, "conflict"),
                StoreError::FenceRejected(_) => Class::of(FenceRejected),
                StoreError::DefinitionRefused(_) => Class::of(DefinitionRefused),
                StoreError::NotFound(_) => Class::of(NotFound),
                StoreError::NothingEligible(_) => Class::of(NothingEligible),
                StoreError::BadInput(_) | StoreError::UnknownValue { .. } => Class::of(Data),
                StoreError::Refused(_) | StoreError::Column { .. } | StoreError::Database(_) => {
                    Class::of(Unexpected)
                }
            },
            CliError::Embedded(error) => match error {
                EmbeddedError::NotFound(_) | EmbeddedError::Root(_) => Class::of(Config),
                EmbeddedError::Failed { .. } => Class::of(Unavailable),
            },
        }
    }

    /// A permission refusal that does not say which group role would do names it: the
    /// server's "permission denied for table trigger_schedules" tells what was refused, not what
    /// to grant.
    pub fn naming_role(self, command: &str, role: &str) -> CliError {
        match self {
            CliError::Store(StoreError::PermissionDenied(message))
                if !message.contains("qlsched_") =>
            {
                CliError::Store(StoreError::PermissionDenied(format!(
                    "{message}: `qlsched {command}` needs a login granted {role} (GRANT {role} \
                     TO <login>; the README's role table lists every command)"
                )))
            }
            other => other,
        }
    }

    /// The status the process exits with.
    pub fn status(&self) -> ExitStatus {
        self.class().status
    }

    /// The error as `-o json` writes it to stderr: one object with `error` (the message as the
    /// table format prints it), `exit_status`, `kind`, and the fields a script needs: `path`
    /// and `reason` of a refused manifest; `owner` and `seen` when an owner held nothing.
    pub fn json(&self, message: &str) -> serde_json::Value {
        let class = self.class();
        let mut object = serde_json::json!({
            "error": message,
            "exit_status": class.status.code(),
            "kind": class.kind,
        });
        match self {
            CliError::Manifest(error) | CliError::Bench(BenchError::Manifest(error)) => {
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

    use super::*;

    fn documented(text: &str, row: impl Fn(&str) -> Option<&str>) -> BTreeSet<u8> {
        text.lines()
            .filter_map(|line| row(line)?.trim().parse().ok())
            .collect()
    }

    /// The README's table, the man pages' EXIT STATUS and `--help` list exactly the statuses
    /// of [`ExitStatus::ALL`]: a status added in one place and forgotten in another fails here.
    #[test]
    fn every_exit_table_lists_exactly_the_statuses_there_are() {
        let all: BTreeSet<u8> = ExitStatus::ALL.map(ExitStatus::code).into_iter().collect();
        assert_eq!(
            all.len(),
            ExitStatus::ALL.len(),
            "two statuses share a number"
        );
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
        let help = super::super::after_help().replace('\n', " ");
        let in_help: BTreeSet<u8> = help
            .split([',', ':', '.'])
            .filter_map(|part| part.split_whitespace().next()?.parse().ok())
            .collect();
        assert_eq!(in_help, all, "--help's exit status line");
    }

    fn manifest_error() -> ManifestError {
        ManifestError {
            path: "$.projects[0].id".into(),
            message: "empty".into(),
        }
    }

    fn a_driver_error() -> tokio_postgres::Error {
        "host=".parse::<tokio_postgres::Config>().unwrap_err()
    }

    /// One error of every variant of every layer, with the status and `kind` it ends with.
    fn every_error() -> Vec<(CliError, u8, &'static str)> {
        let store = || {
            vec![
                (StoreError::Unavailable("x".into()), 69, "unavailable"),
                (
                    StoreError::PermissionDenied("x".into()),
                    77,
                    "permission_denied",
                ),
                (
                    StoreError::SchemaNotReady("x".into()),
                    78,
                    "schema_not_ready",
                ),
                (StoreError::Untrusted("x".into()), 77, "permission_denied"),
                (StoreError::Config("x".into()), 78, "config"),
                (
                    StoreError::RetriesExhausted {
                        what: "admission",
                        attempts: 4,
                        last: "x (SQLSTATE 40001)".into(),
                    },
                    75,
                    "transient",
                ),
                (StoreError::Conflict("x".into()), 75, "conflict"),
                (StoreError::FenceRejected("x".into()), 3, "fence_rejected"),
                (
                    StoreError::DefinitionRefused("x".into()),
                    6,
                    "definition_refused",
                ),
                (StoreError::TimedOut("x".into()), 75, "timed_out"),
                (StoreError::NotFound("x".into()), 4, "not_found"),
                (
                    StoreError::NothingEligible("x".into()),
                    5,
                    "nothing_eligible",
                ),
                (StoreError::BadInput("x".into()), 65, "bad_input"),
                (StoreError::Refused("x".into()), 1, "unexpected"),
                (
                    StoreError::UnknownValue {
                        table: "runs",
                        column: "status",
                        value: "x".into(),
                        reason: "unknown".into(),
                    },
                    65,
                    "bad_input",
                ),
                (
                    StoreError::Column {
                        column: "lag_ms",
                        reason: "not found".into(),
                    },
                    1,
                    "unexpected",
                ),
                (StoreError::Database(a_driver_error()), 1, "unexpected"),
            ]
        };
        let core = || {
            vec![
                (
                    CoreError::InvalidCron {
                        expr: "x".into(),
                        reason: "r".into(),
                    },
                    65,
                    "bad_input",
                ),
                (
                    CoreError::UnknownTimeZone("Mars/Base".into()),
                    65,
                    "bad_input",
                ),
                (
                    CoreError::InvalidDuration {
                        input: "x".into(),
                        reason: "r".into(),
                    },
                    2,
                    "usage",
                ),
                (
                    CoreError::OutOfBounds {
                        field: "batch",
                        value: "300".into(),
                        bounds: "1..=256",
                    },
                    78,
                    "config",
                ),
                (
                    CoreError::NoOccurrence { expr: "x".into() },
                    65,
                    "bad_input",
                ),
            ]
        };
        let mut cases: Vec<(CliError, u8, &'static str)> = vec![
            (CliError::Usage("x".into()), 2, "usage"),
            (CliError::BadInput("x".into()), 65, "bad_input"),
            (CliError::Manifest(manifest_error()), 65, "bad_manifest"),
            (
                CliError::OwnerNeverSeen { owner: "x".into() },
                4,
                "not_found",
            ),
            (CliError::Config("x".into()), 78, "config"),
            (CliError::Io(std::io::Error::other("x")), 1, "unexpected"),
            (
                CliError::Embedded(EmbeddedError::NotFound("x".into())),
                78,
                "config",
            ),
            (
                CliError::Embedded(EmbeddedError::Root("x".into())),
                78,
                "config",
            ),
            (
                CliError::Embedded(EmbeddedError::Failed {
                    step: "start",
                    detail: "x".into(),
                }),
                69,
                "unavailable",
            ),
            (
                CliError::Bench(BenchError::Manifest(manifest_error())),
                65,
                "bad_manifest",
            ),
            (
                CliError::Bench(BenchError::Config("x".into())),
                78,
                "config",
            ),
        ];
        // A command that succeeded ends with no error at all.
        for status in ExitStatus::ALL
            .into_iter()
            .filter(|status| *status != ExitStatus::Success)
        {
            let findings = CliError::Findings {
                message: "x".into(),
                status,
            };
            cases.push((findings, status.code(), status.kind()));
        }
        for (error, code, kind) in store() {
            cases.push((CliError::Store(error), code, kind));
        }
        for (error, code, kind) in store() {
            cases.push((CliError::Bench(BenchError::Store(error)), code, kind));
        }
        for (error, code, kind) in core() {
            cases.push((CliError::Core(error), code, kind));
        }
        for (error, code, kind) in core() {
            cases.push((CliError::Bench(BenchError::Core(error)), code, kind));
        }
        cases
    }

    #[test]
    fn every_error_has_the_status_and_kind_of_the_design_table() {
        for (error, code, kind) in every_error() {
            let class = error.class();
            assert_eq!((class.status.code(), class.kind), (code, kind), "{error:?}");
            let json = error.json("m");
            assert_eq!(json["exit_status"], code, "{error:?}");
            assert_eq!(json["kind"], kind, "{error:?}");
        }
    }

    /// The `kind` words the man pages list are exactly those an error can end with.
    #[test]
    fn the_man_pages_list_every_kind_there_is() {
        let made: BTreeSet<&str> = every_error().into_iter().map(|(_, _, kind)| kind).collect();
        let listed: BTreeSet<&str> = super::super::manual::EXIT_STATUS
            .split("\"kind\": ")
            .nth(1)
            .and_then(|rest| rest.split('}').next())
            .unwrap()
            .split('|')
            .map(|word| word.trim_matches('"'))
            .collect();
        assert_eq!(made, listed);
    }

    #[test]
    fn a_manifest_error_names_its_path_and_reason_in_json() {
        for error in [
            CliError::Manifest(manifest_error()),
            CliError::Bench(BenchError::Manifest(manifest_error())),
        ] {
            let json = error.json("m");
            assert_eq!(json["path"], "$.projects[0].id", "{json}");
            assert_eq!(json["reason"], "empty", "{json}");
        }
    }
}
