//! Durations as operators write them (`500ms`, `30s`, `1m30s`; docs/DESIGN.md §5.2), for flags and
//! the manifest's `misfire_grace`. Parsing is strict so a typo is refused rather than read as some
//! other span: whole numbers only, every number carries a unit, units run from largest to smallest.

use std::time::Duration;

use super::error::CoreError;

/// Units from largest to smallest, each with its length in milliseconds. The order is the order a
/// compound duration must follow, and the order [`format_duration`] writes.
const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Parses `500ms`, `30s`, `1m`, `2h`, `1d` and compounds such as `1m30s` or `1h0m5s`.
///
/// # Errors
///
/// [`CoreError::InvalidDuration`] for an empty or signed input, a number without a unit, an unknown
/// or repeated unit, units out of order, or a span too large to represent.
pub fn parse_duration(s: &str) -> Result<Duration, CoreError> {
    let invalid = |reason: String| CoreError::InvalidDuration {
        input: s.to_owned(),
        reason,
    };
    if s.is_empty() {
        return Err(invalid("empty; expected e.g. 500ms, 30s, 1m30s".into()));
    }
    let mut rest = s;
    let mut total_ms: u64 = 0;
    let mut smallest_unit_so_far: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(invalid(
                "expected a whole number of units, e.g. 500ms, 30s, 1m30s".into(),
            ));
        }
        let (number, after_number) = rest.split_at(digits);
        let unit_len = after_number
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(after_number.len());
        let (unit, after_unit) = after_number.split_at(unit_len);
        if unit.is_empty() {
            return Err(invalid(format!(
                "{number} has no unit; use one of ms, s, m, h, d"
            )));
        }
        let Some(index) = UNITS.iter().position(|(name, _)| *name == unit) else {
            return Err(invalid(format!(
                "unknown unit \"{unit}\"; use one of ms, s, m, h, d"
            )));
        };
        if smallest_unit_so_far.is_some_and(|previous| index <= previous) {
            return Err(invalid(
                "units must appear once each, largest first (e.g. 1h30m)".into(),
            ));
        }
        smallest_unit_so_far = Some(index);
        total_ms = number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(UNITS[index].1))
            .and_then(|ms| total_ms.checked_add(ms))
            .ok_or_else(|| invalid("too large".into()))?;
        rest = after_unit;
    }
    Ok(Duration::from_millis(total_ms))
}

/// Writes `d` as a flag value, in a form [`parse_duration`] reads back exactly: `0s`, `500ms`,
/// `30s`, `1m30s`, `1d2h`, and a duration with a fraction of a second past one second in
/// milliseconds alone (`8057ms`, never `8s57ms`, whose numbers run into each other). Durations in
/// qlsched are whole milliseconds; anything finer is dropped. Spans shown to people are
/// `super::time::span`.
pub fn format_duration(d: Duration) -> String {
    let mut ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms % 1_000 != 0 {
        return format!("{ms}ms");
    }
    let mut out = String::new();
    for (name, unit_ms) in UNITS {
        let count = ms / unit_ms;
        if count > 0 {
            out.push_str(&count.to_string());
            out.push_str(name);
            ms %= unit_ms;
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn parses_single_units() {
        assert_eq!(parse_duration("500ms").unwrap(), ms(500));
        assert_eq!(parse_duration("30s").unwrap(), ms(30_000));
        assert_eq!(parse_duration("1m").unwrap(), ms(60_000));
        assert_eq!(parse_duration("2h").unwrap(), ms(7_200_000));
        assert_eq!(parse_duration("1d").unwrap(), ms(86_400_000));
        assert_eq!(parse_duration("0s").unwrap(), ms(0));
    }

    #[test]
    fn parses_compounds() {
        assert_eq!(parse_duration("1m30s").unwrap(), ms(90_000));
        assert_eq!(parse_duration("1h0m5s").unwrap(), ms(3_605_000));
        assert_eq!(parse_duration("1s250ms").unwrap(), ms(1_250));
    }

    #[test]
    fn refuses_malformed_input() {
        for bad in [
            "", "-5s", "+5s", "5", "1m30", "1.5s", "5x", "5 s", " 5s", "s", "30s1m", "1m1m",
            "1sms", "5S",
        ] {
            let err = parse_duration(bad).expect_err(bad);
            assert!(matches!(err, CoreError::InvalidDuration { .. }), "{bad}");
        }
    }

    #[test]
    fn refuses_overflow() {
        assert!(parse_duration("99999999999999999999ms").is_err());
        assert!(parse_duration("999999999999999d").is_err());
        assert!(parse_duration("18446744073709551615ms").is_ok());
        assert!(parse_duration("18446744073709551615ms1ms").is_err());
    }

    #[test]
    fn formats_shortest_exact_form() {
        assert_eq!(format_duration(ms(0)), "0s");
        assert_eq!(format_duration(ms(500)), "500ms");
        assert_eq!(format_duration(ms(30_000)), "30s");
        assert_eq!(format_duration(ms(90_000)), "1m30s");
        assert_eq!(format_duration(ms(86_400_000 + 7_200_000)), "1d2h");
        assert_eq!(format_duration(Duration::from_nanos(1_500_000)), "1ms");
    }

    #[test]
    fn a_fraction_of_a_second_is_written_in_milliseconds_alone() {
        assert_eq!(format_duration(ms(8_057)), "8057ms");
        assert_eq!(format_duration(ms(90_500)), "90500ms");
        assert_eq!(format_duration(ms(90_000)), "1m30s");
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(n in 0u64..=u64::MAX) {
            prop_assert_eq!(parse_duration(&format_duration(ms(n))).unwrap(), ms(n));
        }
    }
}
