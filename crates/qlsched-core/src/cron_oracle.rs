//! The reference the cron evaluator is checked against: a plain, slow model of the rules of
//! docs/DECISIONS.md ("Cron, as cronie has it"), written apart from `core::cron` so that the two
//! share neither the parser nor the search.
//!
//! The property tests generate an expression in a structured form ([`Spec`]), render it as text for
//! the real path (`CronSchedule::parse`), and hand the structure to [`oracle`], which walks every
//! instant of a window one wall-clock minute (or, for six fields, one second) at a time and asks of
//! each the questions the rule asks: does its wall time match; has that wall time been seen before
//! (an autumn fold); did the clock just jump over wall times that match (a spring gap). The two
//! must list the same occurrences, in zones with 1-hour, 30-minute and 45-minute-offset changes,
//! around every change of 2026-2028 and at instants spread over the years.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike as _, Offset as _, TimeZone as _};
use chrono_tz::Tz;
use proptest::prelude::*;
use proptest::strategy::ValueTree as _;
use proptest::test_runner::{Config, TestRunner};

use super::cron::{CronSchedule, DstNote};
use super::decide::{Decision, DecisionInput, MisfirePolicy, decide};

/// One element of a field's comma list, as written.
#[derive(Debug, Clone)]
pub enum Elem {
    Star,
    StarStep(u32),
    One(u32),
    Range(u32, u32),
    RangeStep(u32, u32, u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Second,
    Minute,
    Hour,
    Dom,
    Month,
    Dow,
}

impl Kind {
    fn bounds(self) -> (u32, u32) {
        match self {
            Kind::Second | Kind::Minute => (0, 59),
            Kind::Hour => (0, 23),
            Kind::Dom => (1, 31),
            Kind::Month => (1, 12),
            Kind::Dow => (0, 7),
        }
    }
}

/// A field: its list, and how its values are written (numbers, or names where the field has them).
#[derive(Debug, Clone)]
pub struct Field {
    pub kind: Kind,
    pub elems: Vec<Elem>,
    pub names: bool,
    pub lower: bool,
}

impl Field {
    /// Every value the field names, Sunday 7 read as 0; plain arithmetic on the structure.
    fn values(&self) -> BTreeSet<u32> {
        let (lo, hi) = self.kind.bounds();
        let mut out = BTreeSet::new();
        for e in &self.elems {
            let (a, b, s) = match *e {
                Elem::Star => (lo, hi, 1),
                Elem::StarStep(s) => (lo, hi, s),
                Elem::One(v) => (v, v, 1),
                Elem::Range(a, b) => (a, b, 1),
                Elem::RangeStep(a, b, s) => (a, b, s),
            };
            let mut v = a;
            while v <= b {
                out.insert(if self.kind == Kind::Dow && v == 7 {
                    0
                } else {
                    v
                });
                v += s;
            }
        }
        out
    }

    /// cronie's "begins with `*`".
    fn star(&self) -> bool {
        matches!(self.elems[0], Elem::Star | Elem::StarStep(_))
    }

    fn value_text(&self, v: u32) -> String {
        const MONTHS: [&str; 12] = [
            "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
        ];
        const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
        let name = match self.kind {
            Kind::Month if self.names => Some(MONTHS[(v - 1) as usize]),
            Kind::Dow if self.names && v < 7 => Some(DAYS[v as usize]),
            _ => None,
        };
        match name {
            Some(n) if self.lower => n.to_lowercase(),
            Some(n) => n.to_owned(),
            None => v.to_string(),
        }
    }

    fn text(&self) -> String {
        self.elems
            .iter()
            .map(|e| match *e {
                Elem::Star => "*".to_owned(),
                Elem::StarStep(s) => format!("*/{s}"),
                Elem::One(v) => self.value_text(v),
                Elem::Range(a, b) => format!("{}-{}", self.value_text(a), self.value_text(b)),
                Elem::RangeStep(a, b, s) => {
                    format!("{}-{}/{s}", self.value_text(a), self.value_text(b))
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// An expression in structured form: five fields, or six with leading seconds.
#[derive(Debug, Clone)]
pub struct Spec {
    pub second: Option<Field>,
    pub fields: [Field; 5],
}

impl Spec {
    pub fn text(&self) -> String {
        self.second
            .iter()
            .chain(&self.fields)
            .map(Field::text)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The expression as a table of allowed values per field, and the rule's two flags.
struct Model {
    second: [bool; 60],
    minute: [bool; 60],
    hour: [bool; 24],
    dom: [bool; 32],
    month: [bool; 13],
    dow: [bool; 7],
    /// Day-of-month OR day-of-week: both fields restricted (neither begins with `*`).
    either_day: bool,
    /// Neither the seconds (six fields), the minute nor the hour field begins with `*`.
    fixed_time: bool,
}

fn table<const N: usize>(values: &BTreeSet<u32>) -> [bool; N] {
    let mut out = [false; N];
    for &v in values {
        out[v as usize] = true;
    }
    out
}

impl Model {
    fn of(spec: &Spec) -> Self {
        let [minute, hour, dom, month, dow] = &spec.fields;
        Model {
            second: table(
                &spec
                    .second
                    .as_ref()
                    .map_or_else(|| BTreeSet::from([0]), Field::values),
            ),
            minute: table(&minute.values()),
            hour: table(&hour.values()),
            dom: table(&dom.values()),
            month: table(&month.values()),
            dow: table(&dow.values()),
            either_day: !dom.star() && !dow.star(),
            fixed_time: !minute.star()
                && !hour.star()
                && !spec.second.as_ref().is_some_and(Field::star),
        }
    }

    /// Whether a wall time (seconds on a zone-free clock) matches: the time of day by arithmetic,
    /// the date by chrono.
    fn matches(&self, wall: i64) -> bool {
        let of_day = wall.rem_euclid(86_400) as usize;
        if !(self.second[of_day % 60] && self.minute[of_day / 60 % 60] && self.hour[of_day / 3600])
        {
            return false;
        }
        let t = DateTime::from_timestamp(wall, 0).unwrap().naive_utc();
        let dom = self.dom[t.day() as usize];
        let dow = self.dow[t.weekday().num_days_from_sunday() as usize];
        let day = if self.either_day {
            dom || dow
        } else {
            dom && dow
        };
        day && self.month[t.month() as usize]
    }
}

fn wall_of(tz: Tz, t: i64) -> i64 {
    let offset = tz
        .offset_from_utc_datetime(&DateTime::from_timestamp(t, 0).unwrap().naive_utc())
        .fix()
        .local_minus_utc();
    t + i64::from(offset)
}

/// The occurrences in `[from, to)` (epoch seconds) by the rule, walking every instant at `step`
/// seconds (60 for five fields: every occurrence and every offset of the zones tested is a whole
/// minute; 1 for six). The walk starts 65 minutes early, so that it has seen the first pass of a
/// fold whose second pass overlaps `from` (the zones tested repeat an hour at most).
pub fn oracle(spec: &Spec, tz: Tz, from: i64, to: i64) -> Vec<i64> {
    walk(spec, tz, from, to)
        .into_iter()
        .map(|(t, _)| t)
        .collect()
}

/// [`oracle`], with whether each occurrence stands for wall times a gap skipped (what
/// `qlsched cron` marks as moved).
pub fn walk(spec: &Spec, tz: Tz, from: i64, to: i64) -> Vec<(i64, bool)> {
    let model = Model::of(spec);
    let step = if spec.second.is_some() { 1 } else { 60 };
    let mut t = (from - 65 * 60).div_euclid(step) * step;
    let mut previous_wall: Option<i64> = None;
    let mut latest_wall = i64::MIN;
    let mut out = Vec::new();
    while t < to {
        let wall = wall_of(tz, t);
        let own = model.matches(wall) && (!model.fixed_time || wall > latest_wall);
        let mut moved = false;
        if let Some(previous) = previous_wall
            && model.fixed_time
            && wall > previous + step
        {
            // The clock jumped: the wall times skipped run once, now.
            let mut skipped = previous + step;
            while skipped < wall && !moved {
                moved = model.matches(skipped);
                skipped += step;
            }
        }
        if (own || moved) && t >= from {
            out.push((t, moved));
        }
        latest_wall = latest_wall.max(wall);
        previous_wall = Some(wall);
        t += step;
    }
    out
}

/// The instants in `[from, to)` (epoch seconds) where the zone's offset changes, found by probing
/// every six hours and bisecting: plain, and slow enough for test setup only.
pub fn changes(tz: Tz, from: i64, to: i64) -> Vec<i64> {
    let offset = |t: i64| wall_of(tz, t) - t;
    let mut out = Vec::new();
    let mut t = from;
    while t < to {
        let next = t + 6 * 3600;
        if offset(t) != offset(next) {
            let (mut lo, mut hi) = (t, next);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if offset(mid) == offset(lo) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            out.push(hi);
        }
        t = next;
    }
    out
}

/// The zones of the comparison: ordinary 1-hour changes on both hemispheres and at midnight
/// (Santiago), a 30-minute change (Lord Howe), changes at a :45 offset (Chatham, at 02:45 local),
/// a negative summer offset (Casablanca, for Ramadan), and no change at all.
pub const ZONES: [&str; 8] = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "America/Santiago",
    "Africa/Casablanca",
    "Europe/London",
    "UTC",
];

const Y2026: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z
const Y2029: i64 = 1_861_920_000; // 2029-01-01T00:00:00Z

/// Every change of 2026-2028 in every zone of [`ZONES`].
pub fn all_changes() -> &'static [(usize, i64)] {
    static CHANGES: std::sync::OnceLock<Vec<(usize, i64)>> = std::sync::OnceLock::new();
    CHANGES.get_or_init(|| {
        let mut out = Vec::new();
        for (i, zone) in ZONES.iter().enumerate() {
            let tz: Tz = zone.parse().unwrap();
            out.extend(changes(tz, Y2026, Y2029).into_iter().map(|c| (i, c)));
        }
        out
    })
}

fn elem(kind: Kind) -> BoxedStrategy<Elem> {
    let (lo, hi) = kind.bounds();
    let width = hi - lo + 1;
    let value = match kind {
        // Days 28-31 and February 29 get extra weight: the ends of months are where day rules go
        // wrong.
        Kind::Dom => prop_oneof![lo..=hi, 28u32..=31].boxed(),
        Kind::Month => prop_oneof![lo..=hi, Just(2u32)].boxed(),
        // Sunday as 0 and as 7.
        Kind::Dow => prop_oneof![lo..=hi, Just(0u32), Just(7u32)].boxed(),
        _ => (lo..=hi).boxed(),
    };
    prop_oneof![
        2 => Just(Elem::Star),
        1 => (1..=width).prop_map(Elem::StarStep),
        4 => value.clone().prop_map(Elem::One),
        2 => (value.clone(), value.clone()).prop_map(|(a, b)| Elem::Range(a.min(b), a.max(b))),
        1 => (value.clone(), value, 1..=width)
            .prop_map(|(a, b, s)| Elem::RangeStep(a.min(b), a.max(b), s)),
    ]
    .boxed()
}

fn field(kind: Kind) -> BoxedStrategy<Field> {
    (
        proptest::collection::vec(elem(kind), 1..=3),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(move |(elems, names, lower)| Field {
            kind,
            elems,
            names,
            lower,
        })
        .boxed()
}

fn star(kind: Kind) -> Field {
    Field {
        kind,
        elems: vec![Elem::Star],
        names: false,
        lower: false,
    }
}

/// An expression; half the time with every day allowed, so that cases near a change reach it.
pub fn spec(six: bool) -> BoxedStrategy<Spec> {
    let days = prop_oneof![
        1 => Just((star(Kind::Dom), star(Kind::Month), star(Kind::Dow))),
        1 => (field(Kind::Dom), field(Kind::Month), field(Kind::Dow)),
    ];
    let second = if six {
        field(Kind::Second).prop_map(Some).boxed()
    } else {
        Just(None).boxed()
    };
    (second, field(Kind::Minute), field(Kind::Hour), days)
        .prop_map(|(second, minute, hour, (dom, month, dow))| Spec {
            second,
            fields: [minute, hour, dom, month, dow],
        })
        .boxed()
}

/// A window start: near one of the changes of 2026-2028 (`near`), or anywhere from 1971 to 2099.
pub fn start(near: bool, before: i64, after: i64) -> BoxedStrategy<(usize, i64)> {
    if near {
        (0..all_changes().len(), -before..=after)
            .prop_map(|(i, d)| {
                let (zone, change) = all_changes()[i];
                (zone, change + d)
            })
            .boxed()
    } else {
        (0..ZONES.len(), 31_536_000i64..4_102_444_800)
            .prop_map(|(z, t)| (z, t))
            .boxed()
    }
}

/// What the real path lists in the window, or why it refused.
pub fn real(spec: &Spec, zone: &str, from: i64, to: i64) -> Result<Vec<i64>, String> {
    let schedule = CronSchedule::parse(&spec.text(), zone).map_err(|e| e.to_string())?;
    let listed = schedule
        .occurrences_between(from * 1000, to * 1000, 1_000_000)
        .map_err(|e| e.to_string())?;
    Ok(listed.into_iter().map(|ms| ms / 1000).collect())
}

/// One comparison: `None` when they agree, else a description of the first difference (which
/// starts with "refused" when the real path refused an expression cron accepts).
pub fn compare(spec: &Spec, zone_index: usize, from: i64, to: i64) -> Option<String> {
    let zone = ZONES[zone_index];
    let tz: Tz = zone.parse().unwrap();
    let expected = oracle(spec, tz, from, to);
    let got = match real(spec, zone, from, to) {
        // A pattern with no occurrence anywhere (February 30) is refused by both readings;
        // anything else refused is a difference.
        Err(e) if e.contains("never fires") && expected.is_empty() => return None,
        Err(e) => return Some(format!("refused '{}' in {zone}: {e}", spec.text())),
        Ok(got) => got,
    };
    if got == expected {
        return backward(spec, zone, &expected, from, to)
            .or_else(|| marks(spec, zone, tz, from, to));
    }
    let missing: Vec<_> = expected
        .iter()
        .filter(|t| !got.contains(t))
        .take(3)
        .collect();
    let extra: Vec<_> = got
        .iter()
        .filter(|t| !expected.contains(t))
        .take(3)
        .collect();
    let text = |ts: Vec<&i64>| {
        ts.iter()
            .map(|&&t| {
                let tz: Tz = zone.parse().unwrap();
                tz.timestamp_opt(t, 0)
                    .unwrap()
                    .format("%Y-%m-%dT%H:%M:%S%:z")
                    .to_string()
            })
            .collect::<Vec<_>>()
    };
    Some(format!(
        "'{}' in {zone} from {from}: oracle {} vs real {}; missing {:?}, extra {:?}",
        spec.text(),
        expected.len(),
        got.len(),
        text(missing),
        text(extra)
    ))
}

/// The backward search agrees with the oracle: the latest occurrence at or before each of the
/// window's occurrences is itself, the one strictly before is the previous one (up to 40 of them,
/// spread over the window), and at the window's end it is the last.
fn backward(spec: &Spec, zone: &str, expected: &[i64], from: i64, to: i64) -> Option<String> {
    let schedule = CronSchedule::parse(&spec.text(), zone).unwrap();
    let latest = |at_s: i64, strict: bool| {
        let at = at_s * 1000;
        if strict {
            schedule.latest_before(at)
        } else {
            schedule.latest_at_or_before(at)
        }
        .unwrap()
        .map(|ms| ms / 1000)
    };
    let stride = (expected.len() / 40).max(1);
    for i in (1..expected.len()).step_by(stride) {
        if latest(expected[i], false) != Some(expected[i])
            || latest(expected[i], true) != Some(expected[i - 1])
        {
            return Some(format!(
                "'{}' in {zone}: backward from {} finds {:?}, not {}",
                spec.text(),
                expected[i],
                latest(expected[i], true),
                expected[i - 1]
            ));
        }
    }
    match (expected.last(), latest(to - 1, false)) {
        (Some(&last), Some(found)) if found != last => Some(format!(
            "'{}' in {zone}: latest before {to} is {found}, not {last}",
            spec.text()
        )),
        (None, Some(found)) if found >= from => Some(format!(
            "'{}' in {zone}: latest before {to} is {found}, none in the window",
            spec.text()
        )),
        _ => None,
    }
}

/// `dst_note` marks an occurrence moved exactly when the oracle says it stands for wall times a gap
/// skipped.
fn marks(spec: &Spec, zone: &str, tz: Tz, from: i64, to: i64) -> Option<String> {
    let schedule = CronSchedule::parse(&spec.text(), zone).unwrap();
    walk(spec, tz, from, to).into_iter().find_map(|(t, moved)| {
        let marked = schedule.dst_note(t * 1000) == Some(DstNote::GapMoved);
        (marked != moved).then(|| {
            format!(
                "'{}' in {zone}: the occurrence at {t} is marked moved: {marked}, the oracle says {moved}",
                spec.text()
            )
        })
    })
}

/// The cases of one comparison family, as generated from a fixed seed.
pub struct Family {
    pub name: &'static str,
    pub six: bool,
    pub near: bool,
    pub cases: u32,
    /// Window length in seconds.
    pub window: i64,
}

pub const FAMILIES: [Family; 4] = [
    Family {
        name: "five fields, around every change of 2026-2028",
        six: false,
        near: true,
        cases: 5_000,
        window: 30 * 3600,
    },
    Family {
        name: "five fields, 1971-2099",
        six: false,
        near: false,
        cases: 2_500,
        window: 30 * 3600,
    },
    Family {
        name: "six fields, around every change of 2026-2028",
        six: true,
        near: true,
        cases: 2_000,
        window: 3600,
    },
    Family {
        name: "six fields, 1971-2099",
        six: true,
        near: false,
        cases: 500,
        window: 3600,
    },
];

fn case(family: &Family) -> BoxedStrategy<(Spec, (usize, i64))> {
    let (before, after) = if family.six {
        (3600, 600)
    } else {
        (28 * 3600, 6 * 3600)
    };
    (spec(family.six), start(family.near, before, after)).boxed()
}

/// Runs a family from its fixed seed; returns how many cases disagreed (refused, and listed other
/// occurrences) and the first few of each.
pub fn census(family: &Family) -> ((u32, u32), Vec<String>) {
    let mut runner = TestRunner::new(Config {
        rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha,
        ..Config::default()
    });
    let strategy = case(family);
    let (mut refused, mut differ) = (0, 0);
    let mut examples = Vec::new();
    for _ in 0..family.cases {
        let (spec, (zone, from)) = strategy.new_tree(&mut runner).unwrap().current();
        if let Some(difference) = compare(&spec, zone, from, from + family.window) {
            let count = if difference.starts_with("refused") {
                &mut refused
            } else {
                &mut differ
            };
            *count += 1;
            if *count <= 4 {
                examples.push(difference);
            }
        }
    }
    ((refused, differ), examples)
}

#[test]
fn the_changes_of_2026_to_2028_are_found_in_every_zone_that_has_them() {
    let per_zone = |z: usize| all_changes().iter().filter(|(i, _)| *i == z).count();
    for (z, zone) in ZONES.iter().enumerate() {
        let expected = match *zone {
            "UTC" => 0,
            _ => 6,
        };
        assert!(per_zone(z) >= expected, "{zone}: {}", per_zone(z));
    }
}

/// The figure for the record: how many generated cases the evaluator and the oracle disagree on,
/// per family. `cargo test -p qlsched-core --lib cron_oracle::census -- --ignored --nocapture`.
#[test]
#[ignore = "a census for the record, not a check: the property tests below are the check"]
fn census_of_disagreements() {
    let mut total = (0, 0, 0);
    for family in &FAMILIES {
        let started = std::time::Instant::now();
        let ((refused, differ), examples) = census(family);
        println!(
            "{}: of {} cases, {refused} refused, {differ} listed other occurrences ({:?})",
            family.name,
            family.cases,
            started.elapsed()
        );
        for example in examples {
            println!("  {example}");
        }
        total = (total.0 + family.cases, total.1 + refused, total.2 + differ);
    }
    println!(
        "total: of {} cases, {} refused, {} listed other occurrences",
        total.0, total.1, total.2
    );
}

fn check(family: &Family, spec: &Spec, zone: usize, from: i64) -> Result<(), TestCaseError> {
    match compare(spec, zone, from, from + family.window) {
        None => Ok(()),
        Some(difference) => Err(TestCaseError::fail(difference)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(FAMILIES[0].cases))]
    #[test]
    fn five_fields_agree_with_the_oracle_around_every_change((spec, (zone, from)) in case(&FAMILIES[0])) {
        check(&FAMILIES[0], &spec, zone, from)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(FAMILIES[1].cases))]
    #[test]
    fn five_fields_agree_with_the_oracle_over_the_years((spec, (zone, from)) in case(&FAMILIES[1])) {
        check(&FAMILIES[1], &spec, zone, from)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(FAMILIES[2].cases))]
    #[test]
    fn six_fields_agree_with_the_oracle_around_every_change((spec, (zone, from)) in case(&FAMILIES[2])) {
        check(&FAMILIES[2], &spec, zone, from)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(FAMILIES[3].cases))]
    #[test]
    fn six_fields_agree_with_the_oracle_over_the_years((spec, (zone, from)) in case(&FAMILIES[3])) {
        check(&FAMILIES[3], &spec, zone, from)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// The replicas' accounting across a change, against the oracle: deciding again and again at
    /// one now, from a cursor a day and more back, every occurrence the oracle lists is a run or
    /// inside a misfire span, none twice, and each span counts exactly the oracle's occurrences
    /// in it.
    #[test]
    fn decisions_account_for_the_oracles_occurrences_across_a_change(
        (spec, (zone, from)) in case(&FAMILIES[0]),
        policy in prop_oneof![Just(MisfirePolicy::Skip), Just(MisfirePolicy::FireOnce)],
        grace_s in prop_oneof![Just(0i64), 0i64..=3 * 3600, Just(2 * 86_400)],
    ) {
        let tz: Tz = ZONES[zone].parse().unwrap();
        let now = from + FAMILIES[0].window;
        let Ok(schedule) = CronSchedule::parse(&spec.text(), ZONES[zone]) else {
            prop_assert!(oracle(&spec, tz, from, now).is_empty());
            return Ok(());
        };
        let cursor = schedule.next_at_or_after(from * 1000).unwrap();
        let owed: Vec<i64> = oracle(&spec, tz, from, now + 1)
            .into_iter()
            .map(|s| s * 1000)
            .collect();
        let mut accounted = Vec::new();
        let mut at = cursor;
        for _ in 0..=owed.len() + 1 {
            let d = decide(&DecisionInput {
                schedule: &schedule,
                policy,
                grace_ms: grace_s * 1000,
                cursor_ms: Some(at),
                now_ms: now * 1000,
            })
            .unwrap();
            if let Some(span) = d.passed_over() {
                let inside: Vec<i64> = owed
                    .iter()
                    .copied()
                    .filter(|&o| o >= span.first_ms && o <= span.last_ms)
                    .collect();
                prop_assert_eq!(span.count, inside.len() as u64, "{}", spec.text());
                accounted.extend(inside);
            }
            match d {
                Decision::Fire { scheduled_for_ms, .. } => accounted.push(scheduled_for_ms),
                Decision::NotDue { .. } => break,
                _ => {}
            }
            at = d.next_fire_at_ms();
        }
        accounted.sort_unstable();
        prop_assert_eq!(&accounted, &owed, "{} in {}", spec.text(), ZONES[zone]);
    }
}

/// A defect cron refuses, put into one field of a valid expression.
#[derive(Debug, Clone, Copy)]
enum Defect {
    EmptyElement,
    OutOfRange,
    Reversed,
    ZeroStep,
    StepAfterValue,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    /// What cron refuses is refused, and the message names the field and quotes the element as
    /// written.
    #[test]
    fn defects_are_refused_naming_the_field_and_the_element(
        spec in spec(true),
        field in 0usize..6,
        defect in prop_oneof![
            Just(Defect::EmptyElement),
            Just(Defect::OutOfRange),
            Just(Defect::Reversed),
            Just(Defect::ZeroStep),
            Just(Defect::StepAfterValue),
        ],
    ) {
        let fields: Vec<Field> = spec.second.iter().chain(&spec.fields).cloned().collect();
        let (lo, hi) = fields[field].kind.bounds();
        let name = ["second", "minute", "hour", "day-of-month", "month", "day-of-week"][field];
        let text = fields[field].text();
        let element = match defect {
            Defect::EmptyElement => format!("{text},"),
            Defect::OutOfRange => (hi + 1).to_string(),
            Defect::Reversed => format!("{}-{}", lo + 2, lo + 1),
            Defect::ZeroStep => "*/0".to_owned(),
            Defect::StepAfterValue => format!("{lo}/2"),
        };
        let texts: Vec<String> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| if i == field { element.clone() } else { f.text() })
            .collect();
        let expr = texts.join(" ");
        let quoted = match defect {
            Defect::EmptyElement => format!("field {name}: '{element}'"),
            _ => format!("field {name}: '{element}"),
        };
        match CronSchedule::parse(&expr, "UTC") {
            Err(crate::CoreError::InvalidCron { reason, .. }) => {
                prop_assert!(reason.starts_with(&quoted), "{expr}: {reason}");
            }
            other => prop_assert!(false, "{expr}: {other:?}"),
        }
    }
}
