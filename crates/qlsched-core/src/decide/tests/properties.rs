//! Property tests of the decider against a forward walk of the pattern: each decision moves the
//! cursor past what it decided, and deciding again and again accounts for every occurrence once.

use proptest::prelude::*;

use super::*;

const PATTERNS: [&str; 8] = [
    "* * * * *",
    "*/15 * * * *",
    "30 2 * * *",
    "0 0 * * 0",
    "*/20 * * * * *",
    "0 0 1 * *",
    "@hourly",
    "15 1,2,3 * * 1-5",
];
const ZONES: [&str; 5] = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
];
/// Instants around the DST changes of 2026 in the zones above, so that the property tests
/// spend their cases where gaps and folds are.
const DST_CHANGES: [i64; 6] = [
    1_774_746_000_000, // 2026-03-29T01:00Z, Berlin springs forward
    1_792_890_000_000, // 2026-10-25T01:00Z, Berlin falls back
    1_772_953_200_000, // 2026-03-08T07:00Z, New York springs forward
    1_793_512_800_000, // 2026-11-01T06:00Z, New York falls back
    1_775_314_800_000, // 2026-04-04T15:00Z, Lord Howe falls back half an hour
    1_791_041_400_000, // 2026-10-03T15:30Z, Lord Howe springs forward half an hour
];

fn policy() -> impl Strategy<Value = MisfirePolicy> {
    prop_oneof![Just(MisfirePolicy::Skip), Just(MisfirePolicy::FireOnce)]
}

/// A now anywhere in 2020-2030, or within a day of a DST change.
fn instant() -> impl Strategy<Value = i64> {
    prop_oneof![
        1_600_000_000_000i64..1_900_000_000_000,
        (0..DST_CHANGES.len(), -24 * HOUR..24 * HOUR).prop_map(|(i, d)| DST_CHANGES[i] + d),
    ]
}

/// Every occurrence in `[from, to]`, walking forward: the model the decider is checked against.
fn walk(schedule: &CronSchedule, from: i64, to: i64) -> Vec<i64> {
    schedule
        .occurrences_between(from, to + 1, usize::MAX)
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decisions_advance_and_never_fire_twice(
        pattern in 0..PATTERNS.len(),
        zone in 0..ZONES.len(),
        policy in policy(),
        grace_ms in 0i64..=7 * 24 * HOUR,
        now_ms in instant(),
        cursor_back in proptest::option::of(-HOUR..=400 * 24 * HOUR),
    ) {
        let schedule = CronSchedule::parse(PATTERNS[pattern], ZONES[zone]).unwrap();
        let cursor_ms = cursor_back.map(|back| now_ms - back);
        let input = DecisionInput { schedule: &schedule, policy, grace_ms, cursor_ms, now_ms };
        let decision = decide(&input).unwrap();
        match (decision, cursor_ms) {
            (Decision::NotDue { next_fire_at_ms }, Some(cursor)) => {
                prop_assert!(cursor > now_ms);
                prop_assert_eq!(next_fire_at_ms, cursor);
            }
            (Decision::Fire { scheduled_for_ms, late_ms, misfired, passed_over, .. }, Some(cursor)) => {
                prop_assert!(scheduled_for_ms <= now_ms && scheduled_for_ms >= cursor);
                prop_assert_eq!(late_ms, now_ms - scheduled_for_ms);
                prop_assert_eq!(misfired, late_ms > grace_ms);
                prop_assert!(!misfired || policy == MisfirePolicy::FireOnce);
                if let Some(span) = passed_over {
                    prop_assert!(span.first_ms >= cursor && span.last_ms < scheduled_for_ms);
                }
            }
            (Decision::Skip { passed_over, .. }, Some(cursor)) => {
                if let Some(span) = passed_over {
                    prop_assert!(policy == MisfirePolicy::Skip);
                    prop_assert!(span.first_ms >= cursor && span.last_ms < now_ms - grace_ms);
                }
            }
            (Decision::Initialize { .. }, None) => {}
            (other, cursor) => prop_assert!(false, "{other:?} for cursor {cursor:?}"),
        }
        // The new cursor is past everything decided, so deciding again at the same now
        // never fires or records an occurrence twice.
        let next = decision.next_fire_at_ms();
        if let Decision::Fire { scheduled_for_ms, .. } = decision {
            prop_assert!(next > scheduled_for_ms);
        }
        if let Some(span) = decision.passed_over() {
            prop_assert!(next > span.last_ms);
        }
        if next > now_ms {
            let again = decide(&DecisionInput { cursor_ms: Some(next), ..input }).unwrap();
            prop_assert_eq!(again, Decision::NotDue { next_fire_at_ms: next });
        }
    }

    /// Accounting: starting from a cursor the pattern produced, deciding again and again at
    /// one now accounts for every occurrence in [cursor, now] exactly once, as a run or
    /// inside a misfire span, the spans count exactly what they cover, nothing within the
    /// grace is passed over, and `fire_once` admits one occurrence for the misfired ones.
    /// Checked against a forward walk of the pattern, DST gaps and folds included.
    #[test]
    fn every_occurrence_is_accounted_for_once(
        pattern in 0..PATTERNS.len(),
        zone in 0..ZONES.len(),
        policy in policy(),
        grace_ms in prop_oneof![Just(0i64), 0i64..=2 * HOUR, 0i64..=3 * 24 * HOUR],
        now_ms in instant(),
        back_ms in 0i64..=40 * 24 * HOUR,
    ) {
        let schedule = CronSchedule::parse(PATTERNS[pattern], ZONES[zone]).unwrap();
        let cursor = schedule.next_at_or_after(now_ms - back_ms).unwrap();
        let owed = walk(&schedule, cursor, now_ms);
        prop_assume!(owed.len() < 5_000);
        let mut fired = Vec::new();
        let mut passed = Vec::new();
        let mut misfired_fires = 0;
        let mut at = cursor;
        for _ in 0..=owed.len() + 1 {
            let d = decide(&DecisionInput {
                schedule: &schedule, policy, grace_ms, cursor_ms: Some(at), now_ms,
            }).unwrap();
            if let Some(span) = d.passed_over() {
                let covered = walk(&schedule, span.first_ms, span.last_ms);
                prop_assert_eq!(span.count, u64::try_from(covered.len()).unwrap());
                prop_assert!(span.count_exact);
                passed.extend(covered);
            }
            match d {
                Decision::Fire { scheduled_for_ms, misfired, .. } => {
                    fired.push(scheduled_for_ms);
                    misfired_fires += usize::from(misfired);
                }
                Decision::NotDue { .. } => break,
                Decision::Skip { .. } => {}
                Decision::Initialize { .. } => prop_assert!(false, "initialize"),
            }
            at = d.next_fire_at_ms();
        }
        prop_assert!(at > now_ms, "still due after {} decisions", owed.len() + 1);
        let mut accounted: Vec<i64> = fired.iter().chain(&passed).copied().collect();
        accounted.sort_unstable();
        prop_assert_eq!(&accounted, &owed);
        let within_grace: Vec<i64> = owed.iter().copied().filter(|&o| now_ms - o <= grace_ms).collect();
        prop_assert!(within_grace.iter().all(|o| fired.contains(o)), "within the grace, passed over");
        let any_misfired = owed.iter().any(|&o| now_ms - o > grace_ms);
        let expected_misfired_fires = usize::from(any_misfired && policy == MisfirePolicy::FireOnce);
        prop_assert_eq!(misfired_fires, expected_misfired_fires);
    }
}
