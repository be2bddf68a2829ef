//! Pure scheduler logic (docs/DESIGN.md §2): cron evaluation, the misfire decider, the claim fence,
//! idempotency keys, the run-id layout, manifest validation, the publish plan and configuration
//! bounds. Nothing here does I/O or reads a clock; every "now" is passed in, taken from the
//! database by the caller (docs/DESIGN.md §4.1).

pub mod accounting;
pub mod batch;
pub mod config;
pub mod cron;
#[cfg(test)]
mod cron_oracle;
pub mod decide;
pub mod diagnose;
pub mod duration;
pub mod error;
pub mod fence;
pub mod idempotency;
pub mod instant;
pub mod load;
pub mod manifest;
pub mod minutes;
pub mod name;
pub mod outage;
pub mod publish_plan;
pub mod run_id;
pub mod status;
pub mod text;
pub mod time;

pub use batch::{Batch, MAX_BATCH, MIN_ADAPTIVE_BATCH};
pub use config::{
    CoordinatorConfig, FORGET_STALE_AFTER, MISFIRE_RETENTION_MS, check_forget_stale_after,
};
pub use cron::CronSchedule;
pub use decide::{
    Decision, DecisionInput, MAX_COUNTED_MISFIRES, MisfirePolicy, MisfireReason, MisfireSpan,
    UnknownMisfirePolicy, decide,
};
pub use duration::{format_duration, parse_duration};
pub use error::CoreError;
pub use fence::{ClaimFence, FenceRef};
pub use idempotency::idempotency_key;
pub use manifest::{
    Manifest, ManifestError, ProjectDef, ProjectStatus, TaskDef, TriggerDef, parse_manifest,
    sha256_hex,
};
pub use name::TriggerName;
pub use run_id::run_id;
pub use status::{Change, ClaimOutcome, Liveness, RunStatus};
