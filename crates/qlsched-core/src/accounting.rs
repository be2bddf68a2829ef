//! Occurrence accounting (docs/DESIGN.md §4.4): every cron occurrence of a trigger's
//! revision, from where its accounting starts up to its cursor, has at most one run, and has a
//! run or lies inside a misfire record. Pure: the store reads the rows, this decides what is
//! missing, so `inspect invariants`, the demo, the bench and every concurrency test share one
//! rule.

use serde::Serialize;

use super::cron::CronSchedule;
use super::error::CoreError;

/// How many occurrences of one trigger the check walks at most. A window longer than this for
/// an every-second trigger is checked up to here and reported as truncated, never silently.
pub const MAX_CHECKED_OCCURRENCES: usize = 1_000_000;

/// What is known of one trigger's revision, as the store read it at one instant.
#[derive(Debug, Clone)]
pub struct AccountingInput<'a> {
    pub schedule: &'a CronSchedule,
    /// First occurrence to check: the later of the window's start and the revision's first
    /// cursor.
    pub from_ms: i64,
    /// The cursor now: every occurrence before it is owed an account.
    pub cursor_ms: i64,
    /// `scheduled_for_ms` of the revision's runs in `[from_ms, cursor_ms)`, in any order, with
    /// repeats if there are any.
    pub runs: &'a [i64],
    /// `(first, last)` occurrence of each misfire record of the revision.
    pub misfires: &'a [(i64, i64)],
}

/// What the check found for one trigger.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AccountingFindings {
    /// Occurrences checked.
    pub occurrences: u64,
    /// Occurrences with neither a run nor a misfire record, oldest first.
    pub gaps: Vec<i64>,
    /// Occurrences with more than one run.
    pub duplicates: Vec<i64>,
    /// Runs whose time is not an occurrence of the pattern (nothing the scheduler admits).
    pub strays: Vec<i64>,
    /// The window held more than [`MAX_CHECKED_OCCURRENCES`]; the rest was not checked.
    pub truncated: bool,
}

impl AccountingFindings {
    pub fn holds(&self) -> bool {
        self.gaps.is_empty() && self.duplicates.is_empty() && self.strays.is_empty()
    }
}

/// Checks one trigger's accounting.
///
/// # Errors
///
/// Those of [`CronSchedule::next_after`] (an instant out of range).
pub fn check(input: &AccountingInput) -> Result<AccountingFindings, CoreError> {
    let occurrences = input.schedule.occurrences_between(
        input.from_ms,
        input.cursor_ms,
        MAX_CHECKED_OCCURRENCES + 1,
    )?;
    let truncated = occurrences.len() > MAX_CHECKED_OCCURRENCES;
    let occurrences = &occurrences[..occurrences.len().min(MAX_CHECKED_OCCURRENCES)];
    let mut runs = input.runs.to_vec();
    runs.sort_unstable();
    let mut misfires = input.misfires.to_vec();
    misfires.sort_unstable();

    let mut findings = AccountingFindings {
        occurrences: occurrences.len() as u64,
        truncated,
        ..AccountingFindings::default()
    };
    let mut run = 0;
    let mut span = 0;
    for &occurrence in occurrences {
        while run < runs.len() && runs[run] < occurrence {
            findings.strays.push(runs[run]);
            run += 1;
        }
        let mut admitted = 0;
        while run < runs.len() && runs[run] == occurrence {
            admitted += 1;
            run += 1;
        }
        while span < misfires.len() && misfires[span].1 < occurrence {
            span += 1;
        }
        let recorded = misfires[span..]
            .iter()
            .take_while(|(first, _)| *first <= occurrence)
            .any(|(_, last)| *last >= occurrence);
        match admitted {
            0 if !recorded => findings.gaps.push(occurrence),
            0 | 1 => {}
            _ => findings.duplicates.push(occurrence),
        }
    }
    if !truncated {
        findings.strays.extend(&runs[run..]);
    }
    Ok(findings)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const T: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
    const S: i64 = 1_000;

    fn every_second() -> CronSchedule {
        CronSchedule::parse("* * * * * *", "UTC").unwrap()
    }

    fn checked(runs: &[i64], misfires: &[(i64, i64)]) -> AccountingFindings {
        check(&AccountingInput {
            schedule: &every_second(),
            from_ms: T,
            cursor_ms: T + 10 * S,
            runs,
            misfires,
        })
        .unwrap()
    }

    #[test]
    fn runs_and_misfire_spans_together_account_for_the_window() {
        let runs: Vec<i64> = (0..4).chain(8..10).map(|i| T + i * S).collect();
        let findings = checked(&runs, &[(T + 4 * S, T + 7 * S)]);
        assert_eq!(findings.occurrences, 10);
        assert!(findings.holds(), "{findings:?}");
    }

    #[test]
    fn an_occurrence_with_neither_is_a_gap() {
        let runs: Vec<i64> = (0..10)
            .filter(|i| *i != 3 && *i != 7)
            .map(|i| T + i * S)
            .collect();
        let findings = checked(&runs, &[(T + 7 * S, T + 7 * S)]);
        assert_eq!(findings.gaps, [T + 3 * S]);
        assert!(!findings.holds());
    }

    #[test]
    fn two_runs_of_one_occurrence_and_a_run_off_the_pattern_are_reported() {
        let mut runs: Vec<i64> = (0..10).map(|i| T + i * S).collect();
        runs.push(T + 5 * S);
        runs.push(T + 5 * S + 500);
        let findings = checked(&runs, &[]);
        assert_eq!(findings.duplicates, [T + 5 * S]);
        assert_eq!(findings.strays, [T + 5 * S + 500]);
    }

    #[test]
    fn nothing_is_owed_at_or_after_the_cursor() {
        let findings = check(&AccountingInput {
            schedule: &every_second(),
            from_ms: T,
            cursor_ms: T,
            runs: &[],
            misfires: &[],
        })
        .unwrap();
        assert_eq!(findings.occurrences, 0);
        assert!(findings.holds());
    }

    #[test]
    fn overlapping_and_unordered_spans_are_read_as_their_union() {
        let findings = checked(&[], &[(T + 5 * S, T + 9 * S), (T, T + 6 * S)]);
        assert!(findings.holds(), "{findings:?}");
    }
}
