//! The misfire decider (docs/DESIGN.md §4.4): given a claimed schedule row's cursor and the
//! database's "now", what happens to it: which occurrence fires, which are passed over as one
//! misfire, and where the cursor goes. Pure and clock-free, so the coordinator can run it outside
//! any lock and the manual `claim` command can show an operator the same answer before admitting
//! it.

use std::fmt;
use std::str::FromStr;

use super::cron::CronSchedule;
use super::error::CoreError;

/// What to do when even the latest due occurrence is later than the grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MisfirePolicy {
    /// Advance the cursor; admit nothing.
    Skip,
    /// Admit exactly one occurrence, the latest due one.
    FireOnce,
}

impl MisfirePolicy {
    /// The name stored in `triggers.misfire_policy` and written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::FireOnce => "fire_once",
        }
    }
}

impl fmt::Display for MisfirePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The stored name was neither `skip` nor `fire_once`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown misfire policy \"{0}\": expected skip or fire_once")]
pub struct UnknownMisfirePolicy(pub String);

impl FromStr for MisfirePolicy {
    type Err = UnknownMisfirePolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "skip" => Ok(Self::Skip),
            "fire_once" => Ok(Self::FireOnce),
            other => Err(UnknownMisfirePolicy(other.to_owned())),
        }
    }
}

/// Everything the decision depends on. `now_ms` is the database's clock: no node clock is ever
/// compared with a lease or an occurrence (docs/DESIGN.md §4.1).
#[derive(Debug, Clone, Copy)]
pub struct DecisionInput<'a> {
    pub schedule: &'a CronSchedule,
    pub policy: MisfirePolicy,
    pub grace_ms: i64,
    /// The row's `next_fire_at_ms`, the next occurrence to account for; `None` for a new or
    /// re-published trigger.
    pub cursor_ms: Option<i64>,
    pub now_ms: i64,
}

/// How many passed-over occurrences a decision counts one by one. Past this the count is a
/// lower bound ([`MisfireSpan::count_exact`] is false): the decision's cost stays bounded
/// however long a trigger was missed, which matters more than an exact figure for a span that
/// long (10,000 every-second occurrences are 2 h 46 min).
pub const MAX_COUNTED_MISFIRES: u64 = 10_000;

/// Why a decision passed occurrences over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MisfireReason {
    /// Each occurrence was later than the trigger's `misfire_grace` when it was decided.
    BeyondGrace,
}

impl MisfireReason {
    /// The name stored in `misfires.reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BeyondGrace => "beyond_grace",
        }
    }
}

/// The occurrences one decision passed over without a run: what a misfire record stores, so that
/// every occurrence is accounted for (a run, or inside a record) without a row per occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MisfireSpan {
    pub first_ms: i64,
    pub last_ms: i64,
    /// Occurrences in `[first_ms, last_ms]`, all passed over; a lower bound when `count_exact`
    /// is false (more than 10,000).
    pub count: u64,
    pub count_exact: bool,
    pub reason: MisfireReason,
}

/// The outcome for one claimed row. Every variant carries the cursor to store next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A new cursor for a row that had none; nothing is admitted. Accounting for the trigger's
    /// revision starts at this cursor.
    Initialize { next_fire_at_ms: i64 },
    /// Admit the occurrence `scheduled_for_ms`, `late_ms` after it was due. `misfired` when that
    /// is beyond the grace and `fire_once` admits it for the misfired span; `passed_over` names
    /// the occurrences this decision passes over, if any. The next cursor may still be due (a
    /// replica catching up within the grace): the row is then claimed again at once.
    Fire {
        scheduled_for_ms: i64,
        next_fire_at_ms: i64,
        late_ms: i64,
        misfired: bool,
        passed_over: Option<MisfireSpan>,
    },
    /// Nothing is admitted; the cursor moves past `passed_over` (under `skip`, occurrences beyond
    /// the grace), or, with `passed_over` empty, past a cursor the pattern never produced.
    /// `late_ms` is how late the oldest occurrence owed was.
    Skip {
        passed_over: Option<MisfireSpan>,
        next_fire_at_ms: i64,
        late_ms: i64,
    },
    /// The cursor is still in the future: nothing is due and the cursor stays. A claim should not
    /// have selected this row; deciding it anyway is harmless.
    NotDue { next_fire_at_ms: i64 },
}

impl Decision {
    /// The cursor to store. It is after every occurrence the decision admits or passes over, so
    /// deciding again never fires or records one twice; it is at or before `now_ms` only while a
    /// fire catches up on occurrences still within the grace.
    pub fn next_fire_at_ms(&self) -> i64 {
        match *self {
            Self::Initialize { next_fire_at_ms }
            | Self::Fire {
                next_fire_at_ms, ..
            }
            | Self::Skip {
                next_fire_at_ms, ..
            }
            | Self::NotDue { next_fire_at_ms } => next_fire_at_ms,
        }
    }

    /// The occurrences this decision passes over, which its admission records as one misfire.
    pub fn passed_over(&self) -> Option<&MisfireSpan> {
        match self {
            Self::Fire { passed_over, .. } | Self::Skip { passed_over, .. } => passed_over.as_ref(),
            Self::Initialize { .. } | Self::NotDue { .. } => None,
        }
    }

    /// A stable name for output and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Initialize { .. } => "initialize",
            Self::Fire { .. } => "fire",
            Self::Skip { .. } => "skip",
            Self::NotDue { .. } => "not_due",
        }
    }
}

/// Decides one claimed row (docs/DESIGN.md §4.4).
///
/// The cursor C is the next occurrence to account for, and H = now − grace is the grace horizon:
/// an occurrence at or after H is within the grace, one before H misfired.
///
/// - Nothing misfired: the first occurrence at or after C fires, and the cursor moves to the
///   occurrence after it, which may itself be due: a replica that fell behind admits every
///   occurrence within the grace, one per decision, in order.
/// - Occurrences in [C, H) misfired. `skip` passes over all of them and fires the first
///   occurrence within the grace if one is due; `fire_once` fires the latest misfired one and
///   passes over the others. Either way the cursor moves to the first occurrence within the
///   grace (or past it, when `skip` fired it), and the passed-over span is returned for one
///   misfire record.
///
/// The cost is a handful of cron searches plus a count capped at [`MAX_COUNTED_MISFIRES`],
/// whatever the backlog: nothing beyond the grace is replayed one by one.
///
/// # Errors
///
/// Those of [`CronSchedule::next_after`]: the pattern has no occurrence after now, or now is not a
/// representable instant.
pub fn decide(input: &DecisionInput) -> Result<Decision, CoreError> {
    let DecisionInput {
        schedule,
        policy,
        grace_ms,
        cursor_ms,
        now_ms,
    } = *input;
    let Some(cursor_ms) = cursor_ms else {
        return Ok(Decision::Initialize {
            next_fire_at_ms: schedule.next_after(now_ms)?,
        });
    };
    if cursor_ms > now_ms {
        return Ok(Decision::NotDue {
            next_fire_at_ms: cursor_ms,
        });
    }
    let first = schedule.next_at_or_after(cursor_ms)?;
    if first > now_ms {
        // A cursor this pattern never produced (written under another expression or zone, or by
        // hand) with no occurrence since: nothing in [cursor, now] is owed.
        return Ok(Decision::Skip {
            passed_over: None,
            next_fire_at_ms: first,
            late_ms: now_ms - cursor_ms,
        });
    }
    let horizon = now_ms.saturating_sub(grace_ms);
    if first >= horizon {
        return Ok(Decision::Fire {
            scheduled_for_ms: first,
            next_fire_at_ms: schedule.next_after(first)?,
            late_ms: now_ms - first,
            misfired: false,
            passed_over: None,
        });
    }
    // [first, last_misfired] is the misfired span; within_grace is the first occurrence after it.
    let last_misfired = schedule
        .latest_before(horizon)?
        .filter(|&latest| latest >= first)
        .unwrap_or(first);
    let within_grace = schedule.next_at_or_after(horizon)?;
    let span = |first_ms: i64, last_ms: i64| -> Result<MisfireSpan, CoreError> {
        let (count, count_exact) =
            schedule.count_between(first_ms, last_ms, MAX_COUNTED_MISFIRES)?;
        Ok(MisfireSpan {
            first_ms,
            last_ms,
            count,
            count_exact,
            reason: MisfireReason::BeyondGrace,
        })
    };
    Ok(match policy {
        MisfirePolicy::Skip if within_grace <= now_ms => Decision::Fire {
            scheduled_for_ms: within_grace,
            next_fire_at_ms: schedule.next_after(within_grace)?,
            late_ms: now_ms - within_grace,
            misfired: false,
            passed_over: Some(span(first, last_misfired)?),
        },
        MisfirePolicy::Skip => Decision::Skip {
            passed_over: Some(span(first, last_misfired)?),
            next_fire_at_ms: within_grace,
            late_ms: now_ms - first,
        },
        MisfirePolicy::FireOnce => {
            let passed_over = match schedule.latest_before(last_misfired)? {
                Some(previous) if previous >= first => Some(span(first, previous)?),
                _ => None,
            };
            Decision::Fire {
                scheduled_for_ms: last_misfired,
                next_fire_at_ms: within_grace,
                late_ms: now_ms - last_misfired,
                misfired: true,
                passed_over,
            }
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
