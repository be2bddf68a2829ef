//! The load ahead (`inspect load`, `publish --dry-run`): the instants over a horizon at which the
//! most occurrences fall due together (boundaries), each with the time these replicas would take
//! to admit it at the best rate they have shown, and the daylight-saving changes that move
//! occurrences. Pure: the store hands over the triggers grouped by identical expression and zone,
//! and every distinct expression is evaluated once, so 100,000 triggers that share a few
//! expressions cost a few evaluations.

use std::collections::{BTreeMap, HashMap};

use chrono::{Offset, TimeZone};
use serde::Serialize;

use super::cron::{CronSchedule, DstNote};

/// Occurrences one expression contributes at most over a horizon: an every-second trigger over
/// a day is 86,400; past this the expression is counted as far as the cap (and says so).
pub const OCCURRENCE_CAP: usize = 200_000;

/// Triggers sharing one expression and zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerGroup {
    pub cron_expr: String,
    pub time_zone: String,
    pub triggers: u64,
}

/// One instant at which occurrences fall due together.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Boundary {
    pub at_ms: i64,
    /// Occurrences due at this instant, one per trigger whose expression names it.
    pub occurrences: u64,
    /// At the busiest recent rate, how long admitting them takes (occurrences / rate); null
    /// when no rate is known.
    pub expected_admission_ms: Option<i64>,
}

/// A daylight-saving change in the horizon, in a zone some triggers use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DstChange {
    pub time_zone: String,
    /// The instant the zone's offset changes.
    pub at_ms: i64,
    pub offset_before_s: i32,
    pub offset_after_s: i32,
    /// Triggers in the zone with an occurrence after the change in the horizon: their wall
    /// times stay, so their instants move by the change in offset.
    pub triggers: u64,
    /// Occurrences the change touches directly: moved out of a spring-forward gap, or repeated
    /// wall times of an autumn fold.
    pub occurrences_moved: u64,
}

/// What the horizon holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LoadAhead {
    pub from_ms: i64,
    pub horizon_ms: i64,
    /// Occurrences due in the horizon, all triggers.
    pub occurrences: u64,
    /// The boundaries with the most occurrences, most first (then earliest).
    pub boundaries: Vec<Boundary>,
    pub dst_changes: Vec<DstChange>,
    /// Expressions that stopped at the occurrence cap or no longer evaluate: their counts are
    /// lower bounds.
    pub capped_expressions: Vec<String>,
}

/// The load over `[from_ms, from_ms + horizon_ms)` of `groups`, keeping the `top` boundaries with
/// the most occurrences; admission times at `rate_per_s` occurrences a second when known.
pub fn load_ahead(
    groups: &[TriggerGroup],
    from_ms: i64,
    horizon_ms: i64,
    top: usize,
    rate_per_s: Option<f64>,
) -> LoadAhead {
    let end_ms = from_ms.saturating_add(horizon_ms);
    let mut by_instant: HashMap<i64, u64> = HashMap::new();
    let mut capped = Vec::new();
    let mut occurrences = 0u64;
    let mut zones: BTreeMap<&str, Vec<(&TriggerGroup, Vec<i64>)>> = BTreeMap::new();
    for group in groups {
        let Ok(schedule) = CronSchedule::parse(&group.cron_expr, &group.time_zone) else {
            capped.push(group.cron_expr.clone());
            continue;
        };
        // occurrences_between is [from, to): the horizon's end is not in it.
        let due = schedule
            .occurrences_between(from_ms, end_ms, OCCURRENCE_CAP)
            .unwrap_or_default();
        if due.len() >= OCCURRENCE_CAP {
            capped.push(group.cron_expr.clone());
        }
        for &at in &due {
            *by_instant.entry(at).or_default() += group.triggers;
        }
        occurrences += group.triggers * due.len() as u64;
        zones
            .entry(&group.time_zone)
            .or_default()
            .push((group, due));
    }
    let mut boundaries: Vec<Boundary> = by_instant
        .into_iter()
        .map(|(at_ms, n)| Boundary {
            at_ms,
            occurrences: n,
            expected_admission_ms: expected_admission_ms(n, rate_per_s),
        })
        .collect();
    boundaries.sort_by(|a, b| {
        b.occurrences
            .cmp(&a.occurrences)
            .then(a.at_ms.cmp(&b.at_ms))
    });
    boundaries.truncate(top);
    let dst_changes = zones
        .into_iter()
        .flat_map(|(zone, groups)| dst_changes(zone, &groups, from_ms, end_ms))
        .collect();
    capped.sort();
    capped.dedup();
    LoadAhead {
        from_ms,
        horizon_ms,
        occurrences,
        boundaries,
        dst_changes,
        capped_expressions: capped,
    }
}

/// Triggers a change adds (created, or changed to a new expression), sharing one expression and
/// zone, with the smallest misfire grace among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedGroup {
    pub group: TriggerGroup,
    pub misfire_grace_ms: i64,
}

/// A boundary a change adds occurrences to whose admission, at the busiest recent rate, would
/// take longer than the misfire grace of the triggers added there: their occurrences would be
/// passed over as misfires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LoadWarning {
    pub at_ms: i64,
    /// Occurrences the change adds at this instant.
    pub added: u64,
    /// Occurrences due at this instant once the change is published (those already there
    /// counted as they are now).
    pub occurrences: u64,
    pub expected_admission_ms: i64,
    /// The smallest misfire grace among the triggers the change adds here.
    pub misfire_grace_ms: i64,
}

/// The boundaries over `[from_ms, from_ms + horizon_ms)` where `added` puts occurrences and the
/// expected admission (of those already due there plus the added) exceeds the added triggers'
/// grace, the longest first, at most `top`. Nothing without a rate.
pub fn added_boundaries_beyond_grace(
    current: &[TriggerGroup],
    added: &[AddedGroup],
    from_ms: i64,
    horizon_ms: i64,
    rate_per_s: Option<f64>,
    top: usize,
) -> Vec<LoadWarning> {
    if rate_per_s.is_none() || added.is_empty() {
        return Vec::new();
    }
    let end_ms = from_ms.saturating_add(horizon_ms);
    let occurrences_of = |g: &TriggerGroup| {
        CronSchedule::parse(&g.cron_expr, &g.time_zone)
            .and_then(|s| s.occurrences_between(from_ms, end_ms, OCCURRENCE_CAP))
            .unwrap_or_default()
    };
    // Instant -> (occurrences added, smallest grace among them).
    let mut touched: HashMap<i64, (u64, i64)> = HashMap::new();
    for a in added {
        for at in occurrences_of(&a.group) {
            let entry = touched.entry(at).or_insert((0, i64::MAX));
            entry.0 += a.group.triggers;
            entry.1 = entry.1.min(a.misfire_grace_ms);
        }
    }
    let mut already: HashMap<i64, u64> = HashMap::new();
    for g in current {
        for at in occurrences_of(g) {
            if touched.contains_key(&at) {
                *already.entry(at).or_default() += g.triggers;
            }
        }
    }
    let mut warnings: Vec<LoadWarning> = touched
        .into_iter()
        .filter_map(|(at_ms, (n, grace))| {
            let occurrences = n + already.get(&at_ms).copied().unwrap_or(0);
            let expected = expected_admission_ms(occurrences, rate_per_s)?;
            (expected > grace).then_some(LoadWarning {
                at_ms,
                added: n,
                occurrences,
                expected_admission_ms: expected,
                misfire_grace_ms: grace,
            })
        })
        .collect();
    warnings.sort_by(|a, b| {
        b.expected_admission_ms
            .cmp(&a.expected_admission_ms)
            .then(a.at_ms.cmp(&b.at_ms))
    });
    warnings.truncate(top);
    warnings
}

/// How long `occurrences` take at `rate_per_s`; `None` without a rate.
pub fn expected_admission_ms(occurrences: u64, rate_per_s: Option<f64>) -> Option<i64> {
    let rate = rate_per_s.filter(|r| *r > 0.0)?;
    Some((occurrences as f64 / rate * 1_000.0).round() as i64)
}

/// The zone's offset at `at_ms`, in seconds east of UTC.
fn offset_s(zone: chrono_tz::Tz, at_ms: i64) -> Option<i32> {
    let at = zone.timestamp_millis_opt(at_ms).single()?;
    Some(at.offset().fix().local_minus_utc())
}

/// The offset changes of `zone` in `[from_ms, end_ms)`, found by bisection between instants of
/// different offsets (to the second), each with what it does to `groups`.
fn dst_changes(
    zone: &str,
    groups: &[(&TriggerGroup, Vec<i64>)],
    from_ms: i64,
    end_ms: i64,
) -> Vec<DstChange> {
    let Ok(tz) = zone.parse::<chrono_tz::Tz>() else {
        return Vec::new();
    };
    let mut changes = Vec::new();
    // Offsets change at most a few times a year: probing every six hours finds each one.
    const STEP_MS: i64 = 6 * 3_600_000;
    let mut lo = from_ms;
    while lo < end_ms {
        let hi = (lo + STEP_MS).min(end_ms);
        let (Some(before), Some(after)) = (offset_s(tz, lo), offset_s(tz, hi)) else {
            break;
        };
        if before != after {
            let (mut a, mut b) = (lo, hi);
            while b - a > 1_000 {
                let mid = a + (b - a) / 2;
                if offset_s(tz, mid) == Some(before) {
                    a = mid;
                } else {
                    b = mid;
                }
            }
            // `b` is within a second of the change; changes fall on whole seconds.
            let at_ms = b.div_euclid(1_000) * 1_000;
            let mut triggers = 0;
            let mut occurrences_moved = 0;
            for (group, due) in groups {
                if due.iter().any(|&at| at >= at_ms) {
                    triggers += group.triggers;
                }
                if let Ok(schedule) = CronSchedule::parse(&group.cron_expr, &group.time_zone) {
                    // Only the occurrences within the largest shift of the change can be touched.
                    let near = 2 * i64::from((after - before).abs()) * 1_000 + 3_600_000;
                    let touched = due
                        .iter()
                        .filter(|&&at| (at - at_ms).abs() <= near)
                        .filter(|&&at| {
                            matches!(
                                schedule.dst_note(at),
                                Some(DstNote::GapMoved | DstNote::FoldFirst | DstNote::FoldSecond)
                            )
                        })
                        .count() as u64;
                    occurrences_moved += touched * group.triggers;
                }
            }
            changes.push(DstChange {
                time_zone: zone.to_owned(),
                at_ms,
                offset_before_s: before,
                offset_after_s: after,
                triggers,
                occurrences_moved,
            });
        }
        lo = hi;
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(cron_expr: &str, time_zone: &str, triggers: u64) -> TriggerGroup {
        TriggerGroup {
            cron_expr: cron_expr.into(),
            time_zone: time_zone.into(),
            triggers,
        }
    }

    const DEC_5: i64 = 1_796_428_800_000; // 2026-12-05T00:00:00Z
    const DAY: i64 = 86_400_000;

    /// 40,000 triggers at midnight UTC and 10,000 spread over the minutes of the hour: midnight
    /// comes first, with its count and the time to admit it at 2,000 a second.
    #[test]
    fn the_busiest_boundary_comes_first_with_its_admission_time() {
        let mut groups = vec![group("0 0 * * *", "UTC", 40_000)];
        for minute in 0..60 {
            let n = 10_000 / 60 + u64::from(minute < 10_000 % 60);
            groups.push(group(&format!("{minute} * * * *"), "UTC", n));
        }
        let load = load_ahead(&groups, DEC_5 - 1, DAY, 5, Some(2_000.0));
        let first = &load.boundaries[0];
        assert_eq!(first.at_ms, DEC_5);
        assert_eq!(first.occurrences, 40_000 + 167);
        assert_eq!(first.expected_admission_ms, Some(20_084));
        assert_eq!(load.occurrences, 40_000 + 10_000 * 24);
        assert!(
            load.boundaries[1].occurrences < 200,
            "{:?}",
            load.boundaries[1]
        );
        assert!(load.dst_changes.is_empty());
        let unknown = load_ahead(&groups, DEC_5, DAY, 1, None);
        assert_eq!(unknown.boundaries[0].expected_admission_ms, None);
    }

    /// A Berlin job on the day of the spring change: the change is listed with the triggers
    /// it moves; a 02:30 job's occurrence falls in the gap and is moved.
    #[test]
    fn a_daylight_saving_change_in_the_horizon_is_listed() {
        let change_day = 1_806_192_000_000; // 2027-03-28T00:00:00Z
        let groups = [
            group("0 9 * * *", "Europe/Berlin", 3),
            group("30 2 * * *", "Europe/Berlin", 2),
            group("0 9 * * *", "UTC", 5),
        ];
        let load = load_ahead(&groups, change_day, DAY, 10, None);
        assert_eq!(load.dst_changes.len(), 1, "{:?}", load.dst_changes);
        let change = &load.dst_changes[0];
        assert_eq!(change.time_zone, "Europe/Berlin");
        assert_eq!(change.at_ms, change_day + 3_600_000); // 01:00Z
        assert_eq!(
            (change.offset_before_s, change.offset_after_s),
            (3_600, 7_200)
        );
        assert_eq!(change.triggers, 5);
        assert_eq!(change.occurrences_moved, 2);
        assert!(
            load_ahead(&groups, DEC_5, DAY, 10, None)
                .dst_changes
                .is_empty()
        );
    }

    /// 5,000 triggers added at midnight beside 1,000 there already, at 100 a second: 60 s, past
    /// their grace of 30 s; an hourly addition of 10 is not warned of.
    #[test]
    fn a_change_that_adds_a_boundary_beyond_the_grace_is_warned_of() {
        let current = [group("0 0 * * *", "UTC", 1_000)];
        let added = [
            AddedGroup {
                group: group("0 0 * * *", "UTC", 5_000),
                misfire_grace_ms: 30_000,
            },
            AddedGroup {
                group: group("15 * * * *", "UTC", 10),
                misfire_grace_ms: 30_000,
            },
        ];
        let warnings =
            added_boundaries_beyond_grace(&current, &added, DEC_5 - 1, DAY, Some(100.0), 5);
        assert_eq!(
            warnings,
            [LoadWarning {
                at_ms: DEC_5,
                added: 5_000,
                occurrences: 6_000,
                expected_admission_ms: 60_000,
                misfire_grace_ms: 30_000,
            }]
        );
        assert!(added_boundaries_beyond_grace(&current, &added, DEC_5, DAY, None, 5).is_empty());
    }

    /// 100,000 triggers over a handful of expressions are a handful of evaluations.
    #[test]
    fn many_triggers_sharing_expressions_cost_one_evaluation_each() {
        let groups: Vec<_> = (0..60)
            .map(|m| group(&format!("{m} */2 * * *"), "Europe/Berlin", 100_000 / 60))
            .collect();
        let started = std::time::Instant::now();
        let load = load_ahead(&groups, DEC_5, DAY, 10, Some(500.0));
        assert_eq!(load.boundaries.len(), 10);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
