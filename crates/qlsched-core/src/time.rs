//! How qlsched writes instants and spans for people: every table, message, log line and the
//! dashboard go through these, so one value always reads the same way.
//!
//! - An instant is RFC 3339 in UTC with milliseconds and the zone marker:
//!   `2026-12-01T03:00:00.000Z` ([`utc`]). The database's clock is epoch milliseconds, zone-free
//!   (docs/DESIGN.md §3.1), so `Z` is the honest marker. The dashboard's run list, where the date
//!   is the same on every line, shows the time of day alone: `03:00:00.000` ([`clock`]).
//! - A span reads unambiguously with one unit or two fixed-width ones ([`span`]): `450ms` under a
//!   second; `8.057s` (seconds with up to three decimals, trailing zeros dropped: `8s`, `8.5s`)
//!   under a minute; `2m05s`, `3h07m`, `2d03h` beyond, to the second, minute or hour. A number
//!   never runs into another unit's number, so `8s57ms` cannot be written. Negative spans (late,
//!   overdue) carry a `-`.
//!
//! - A narrow column (the dashboard's) takes [`short_span`]: the same units, seconds to one
//!   decimal (`23.3s`), so that no value is wider than six characters and none is ever cut.
//!
//! Flag values and manifest durations are written in the form the parser reads back instead
//! (`super::duration::format_duration`).

/// An instant in epoch milliseconds as `2026-12-01T03:00:00.000Z`; the raw number when it is not
/// a representable instant.
pub fn utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
    )
}

/// The time of day of an instant in epoch milliseconds, UTC: `03:00:00.000`; the raw number when
/// it is not a representable instant.
pub fn clock(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map_or_else(|| ms.to_string(), |t| t.format("%H:%M:%S%.3f").to_string())
}

/// A signed span of milliseconds for people (module docs): `450ms`, `8.057s`, `-2m05s`.
pub fn span(ms: i64) -> String {
    let magnitude = unsigned_span(ms.unsigned_abs());
    if ms < 0 {
        format!("-{magnitude}")
    } else {
        magnitude
    }
}

/// A signed span for a narrow column: as [`span`], but seconds under a minute to one decimal,
/// truncated (`23.3s`, `8s`), so the magnitude is at most six characters (`59.9s`, `23h59m`).
pub fn short_span(ms: i64) -> String {
    let magnitude = ms.unsigned_abs();
    let text = if (SECOND..MINUTE).contains(&magnitude) {
        let tenths = magnitude % SECOND / 100;
        if tenths == 0 {
            format!("{}s", magnitude / SECOND)
        } else {
            format!("{}.{tenths}s", magnitude / SECOND)
        }
    } else {
        unsigned_span(magnitude)
    };
    if ms < 0 { format!("-{text}") } else { text }
}

const SECOND: u64 = 1_000;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

fn unsigned_span(ms: u64) -> String {
    match ms {
        0..SECOND => format!("{ms}ms"),
        SECOND..MINUTE => {
            let fraction = format!("{:03}", ms % SECOND);
            let fraction = fraction.trim_end_matches('0');
            if fraction.is_empty() {
                format!("{}s", ms / SECOND)
            } else {
                format!("{}.{fraction}s", ms / SECOND)
            }
        }
        MINUTE..HOUR => format!("{}m{:02}s", ms / MINUTE, ms % MINUTE / SECOND),
        HOUR..DAY => format!("{}h{:02}m", ms / HOUR, ms % HOUR / MINUTE),
        _ => format!("{}d{:02}h", ms / DAY, ms % DAY / HOUR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_are_rfc3339_with_the_zone_marker() {
        assert_eq!(utc(1_796_212_800_000), "2026-12-02T12:00:00.000Z");
        assert_eq!(utc(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(utc(i64::MAX), i64::MAX.to_string());
        assert_eq!(clock(1_796_212_798_860), "11:59:58.860");
    }

    #[test]
    fn short_spans_keep_their_unit_within_six_characters() {
        assert_eq!(short_span(450), "450ms");
        assert_eq!(short_span(23_333), "23.3s");
        assert_eq!(short_span(8_000), "8s");
        assert_eq!(short_span(59_999), "59.9s");
        assert_eq!(short_span(-36_641), "-36.6s");
        assert_eq!(short_span(125_000), "2m05s");
        for ms in [
            0,
            999,
            1_000,
            9_950,
            59_999,
            60_000,
            3_599_999,
            86_399_999,
            86_400_000 * 99,
        ] {
            assert!(short_span(ms).len() <= 6, "{ms}: {}", short_span(ms));
        }
    }

    #[test]
    fn spans_under_a_second_are_milliseconds() {
        assert_eq!(span(0), "0ms");
        assert_eq!(span(450), "450ms");
        assert_eq!(span(999), "999ms");
    }

    #[test]
    fn spans_under_a_minute_are_decimal_seconds() {
        assert_eq!(span(8_057), "8.057s");
        assert_eq!(span(8_500), "8.5s");
        assert_eq!(span(8_050), "8.05s");
        assert_eq!(span(8_000), "8s");
        assert_eq!(span(1_001), "1.001s");
        assert_eq!(span(59_999), "59.999s");
    }

    #[test]
    fn longer_spans_have_two_units_the_second_zero_padded() {
        assert_eq!(span(60_000), "1m00s");
        assert_eq!(span(125_900), "2m05s");
        assert_eq!(span(3 * 3_600_000 + 7 * 60_000 + 59_000), "3h07m");
        assert_eq!(span(2 * 86_400_000 + 3 * 3_600_000), "2d03h");
    }

    #[test]
    fn negative_spans_carry_a_sign() {
        assert_eq!(span(-65_000), "-1m05s");
        assert_eq!(span(-250), "-250ms");
        assert_eq!(span(i64::MIN), "-106751991167d07h");
    }

    /// No span shows a number run into another unit's number (`8s57ms`): below an hour, at most
    /// one digit run is followed by `s` or `ms` alone.
    #[test]
    fn no_span_mixes_seconds_and_milliseconds() {
        for ms in (0..200_000).step_by(7) {
            let text = span(ms);
            assert!(!text.contains("ms") || ms < 1_000, "{ms}: {text}");
        }
    }
}
