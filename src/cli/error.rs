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
            CliError::Io(_) => exit::UNEXPECTED,
        }
    }

    /// Standard output went away (`qlsched inspect | head`): not an error, exit quietly.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, CliError::Io(error) if error.kind() == std::io::ErrorKind::BrokenPipe)
    }
}
