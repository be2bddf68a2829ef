//! `qlsched run`: one scheduler replica (docs/DESIGN.md §4.9), the library's [`crate::replica`].
//! Configuration is checked before any connection is opened; SIGINT and SIGTERM trip the
//! replica's stop, which drains the round in flight, and the command exits 0.

use std::time::Duration;

use clap::Args;

use super::args::{Access, duration_arg};
use super::signals::Shutdown;
use super::{CliError, Global};
use crate::core::{Batch, CoordinatorConfig};
use crate::replica::{ReplicaConfig, ReplicaError, ReplicaExit, Retention};
use crate::stop::StopToken;
use crate::store::retention::RunRetention;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub replica: ReplicaArgs,

    /// Serve /metrics (Prometheus text format), /healthz and /readyz on HOST:PORT over plain
    /// HTTP [default: off]. Bound before the database is opened (exit 78 if it cannot be).
    #[arg(long, env = "QLSCHED_METRICS_ADDR", value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,

    /// Exit 78 at start when the schema is not migrated (no ledger, or migrations pending) instead
    /// of waiting, not ready, until `qlsched migrate` has run.
    #[arg(long, env = "QLSCHED_EXIT_IF_UNMIGRATED")]
    pub exit_if_unmigrated: bool,

    #[command(flatten)]
    pub retention: RetentionArgs,

    /// How long after its last heartbeat a replica that never stopped (killed, its host lost)
    /// leaves the registry: `inspect replicas`, `top` and the qlsched_replicas metric stop
    /// showing it, and the replicas' housekeeping deletes its row. Recorded with this replica's
    /// registration, so its own bound applies when it dies (1m..=7d, more than --lease plus
    /// --cadence).
    #[arg(
        long,
        env = "QLSCHED_FORGET_STALE_AFTER",
        default_value = "15m",
        allow_hyphen_values = true
    )]
    pub forget_stale_after: String,

    /// Whether `forget_stale_after` came from `QLSCHED_FORGET_STALE_AFTER` (set after parsing): a
    /// bad one is then a configuration error (78), not a usage error.
    #[arg(skip)]
    pub forget_stale_after_from_env: bool,
}

impl RunArgs {
    /// The validated `--forget-stale-after` against the replica's lease and cadence: a bad flag
    /// is a usage error (2), a bad variable a configuration error (78), each named.
    pub fn forget_stale_after(
        &self,
        coordinator: &CoordinatorConfig,
    ) -> Result<Duration, CliError> {
        let refuse = |error: String| {
            if self.forget_stale_after_from_env {
                let error = error
                    .strip_prefix("--forget-stale-after ")
                    .unwrap_or(&error)
                    .to_owned();
                CliError::Config(format!(
                    "QLSCHED_FORGET_STALE_AFTER (from the environment): {error}"
                ))
            } else if error.starts_with("--forget-stale-after") {
                CliError::Usage(error)
            } else {
                CliError::Usage(format!("--forget-stale-after {error}"))
            }
        };
        let forget = duration_arg(&self.forget_stale_after).map_err(refuse)?;
        crate::core::check_forget_stale_after(forget, coordinator).map_err(refuse)?;
        Ok(forget)
    }
}

/// How long finished runs are kept (docs/OPERATIONS.md, "Retention of runs"): one replica at a time
/// deletes them with their attempts and events past this, and the replica that does applies its
/// own settings, so give every replica the same.
#[derive(Debug, Clone, Args)]
pub struct RetentionArgs {
    /// Keep a succeeded run this long after it finished, or `off` to keep succeeded runs for ever.
    #[arg(
        long,
        env = "QLSCHED_RETAIN_SUCCEEDED",
        default_value = "24h",
        value_name = "DURATION|off"
    )]
    pub retain_succeeded: String,

    /// Keep a failed run this long after it finished (long enough for someone to look into it
    /// after a weekend), or `off`.
    #[arg(
        long,
        env = "QLSCHED_RETAIN_FAILED",
        default_value = "7d",
        value_name = "DURATION|off"
    )]
    pub retain_failed: String,

    /// Keep a cancelled run this long after it finished, or `off`.
    #[arg(
        long,
        env = "QLSCHED_RETAIN_CANCELLED",
        default_value = "24h",
        value_name = "DURATION|off"
    )]
    pub retain_cancelled: String,

    /// Time between two retention passes of this replica (1s..=1h); each drains what is due in
    /// batches for at most 30 s, and only the replica holding the retention lease deletes.
    #[arg(
        long,
        env = "QLSCHED_RETENTION_INTERVAL",
        default_value = "1m",
        value_name = "DURATION"
    )]
    pub retention_interval: String,

    /// The flags whose value came from the environment (set after parsing): a bad one is then a
    /// configuration error (78), not a usage error.
    #[arg(skip)]
    pub from_env: Vec<&'static str>,
}

impl RetentionArgs {
    /// The flags, by id and environment variable, in the order they are checked.
    pub const FLAGS: [(&'static str, &'static str); 4] = [
        ("retain_succeeded", "QLSCHED_RETAIN_SUCCEEDED"),
        ("retain_failed", "QLSCHED_RETAIN_FAILED"),
        ("retain_cancelled", "QLSCHED_RETAIN_CANCELLED"),
        ("retention_interval", "QLSCHED_RETENTION_INTERVAL"),
    ];

    /// The validated retention: a bad flag is a usage error (2), a bad variable a configuration
    /// error (78), each named.
    pub fn retention(&self) -> Result<Retention, CliError> {
        let refuse = |id: &'static str, error: String| {
            let (_, variable) = Self::FLAGS
                .iter()
                .find(|(flag, _)| *flag == id)
                .copied()
                .unwrap_or((id, id));
            if self.from_env.contains(&id) {
                CliError::Config(format!("{variable} (from the environment): {error}"))
            } else {
                CliError::Usage(format!("--{} {error}", id.replace('_', "-")))
            }
        };
        let keep = |id: &'static str, text: &str| -> Result<Option<i64>, CliError> {
            if text == "off" {
                return Ok(None);
            }
            let duration = duration_arg(text).map_err(|error| refuse(id, error))?;
            Ok(Some(
                i64::try_from(duration.as_millis()).unwrap_or(i64::MAX),
            ))
        };
        let every = duration_arg(&self.retention_interval)
            .map_err(|error| refuse("retention_interval", error))?;
        if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&every) {
            return Err(refuse(
                "retention_interval",
                format!("{}: expected 1s..=1h", self.retention_interval),
            ));
        }
        Ok(Retention {
            runs: RunRetention {
                succeeded_ms: keep("retain_succeeded", &self.retain_succeeded)?,
                failed_ms: keep("retain_failed", &self.retain_failed)?,
                cancelled_ms: keep("retain_cancelled", &self.retain_cancelled)?,
            },
            every,
        })
    }
}

/// A replica's configuration, shared with the demo and the bench.
#[derive(Debug, Clone, Args)]
pub struct ReplicaArgs {
    /// Claim owner written into every lease, 1 to 200 characters [default: HOSTNAME:PID].
    #[arg(long, env = "QLSCHED_OWNER")]
    pub owner: Option<String>,

    /// Whether `owner` came from `QLSCHED_OWNER` (set after parsing): a bad one is then a
    /// configuration error (78), not a usage error.
    #[arg(skip)]
    pub owner_from_env: bool,

    /// Claims per round, pinned (1..=256) [default: adaptive, 16..=256, following the backlog].
    #[arg(long, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..=i64::from(crate::core::MAX_BATCH)))]
    pub batch: Option<u16>,

    /// Lease of each claim, in database time (1s..=1h).
    #[arg(long, default_value = "30s", value_parser = duration_arg, allow_hyphen_values = true)]
    pub lease: Duration,

    /// Time from the start of one round to the start of the next (10ms..=1h).
    #[arg(long, default_value = "1s", value_parser = duration_arg, allow_hyphen_values = true)]
    pub cadence: Duration,

    /// How long a stop waits for the round in flight before releasing its claims (0s..=10m).
    #[arg(long, default_value = "10s", value_parser = duration_arg, allow_hyphen_values = true)]
    pub drain_timeout: Duration,
}

impl ReplicaArgs {
    /// The validated configuration, before any connection: a flag out of bounds is a usage
    /// error (2), an owner from `QLSCHED_OWNER` out of bounds a configuration error (78).
    pub fn config(&self) -> Result<CoordinatorConfig, CliError> {
        let config = CoordinatorConfig {
            owner: self.owner.clone().unwrap_or_else(default_owner),
            batch: self.batch.map_or(Batch::Adaptive, Batch::Pinned),
            lease: self.lease,
            cadence: self.cadence,
            drain_timeout: self.drain_timeout,
        };
        if let Err(error) = crate::core::config::check_owner(&config.owner) {
            return Err(if self.owner_from_env {
                CliError::Config(format!("QLSCHED_OWNER (from the environment): {error}"))
            } else {
                flag_value(&error)
            });
        }
        config.validate().map_err(|error| flag_value(&error))?;
        Ok(config)
    }
}

/// A flag value the core's bounds refuse: a usage error (exit 2) naming the flag, since the
/// rule is that whatever the command line gives is refused as usage before anything runs.
pub fn flag_value(error: &impl std::fmt::Display) -> CliError {
    let text = error.to_string();
    // The core names fields as in the design (drain_timeout); people type the flag.
    let text = match text.split_once(' ') {
        Some((field, rest)) if !field.contains(':') => {
            format!("--{} {rest}", field.replace('_', "-"))
        }
        _ => text,
    };
    CliError::Usage(text)
}

/// `hostname:pid`: unique per live process, and readable in `inspect claims`.
pub fn default_owner() -> String {
    format!("{}:{}", crate::lifecycle::host_name(), std::process::id())
}

pub async fn run(args: RunArgs, global: &Global) -> Result<(), CliError> {
    let coordinator = args.replica.config()?;
    let forget_stale_after = args.forget_stale_after(&coordinator)?;
    let config = ReplicaConfig {
        coordinator,
        retention: args.retention.retention()?,
        settings: global.connection.settings(Access::Write)?,
        schema: global.connection.schema.clone(),
        metrics_addr: args.metrics_addr,
        exit_if_unmigrated: args.exit_if_unmigrated,
        forget_stale_after,
        build: super::BUILD,
    };
    // Caught from here on: a SIGTERM while the replica connects or runs its recovery report ends
    // the start cleanly (nothing is claimed before the lifecycle starts) instead of killing the
    // process by the signal's default action.
    let stop = StopToken::new();
    let _signals = Shutdown::install()?.trip(stop.clone());
    // Stopped while starting or after running, a stop asked for is a clean exit.
    match crate::replica::run(config, &stop).await {
        Ok(ReplicaExit::StoppedWhileStarting | ReplicaExit::Stopped(_)) => Ok(()),
        Err(ReplicaError::Store(error)) => Err(error.into()),
        Err(ReplicaError::Io(error)) => Err(error.into()),
    }
}
