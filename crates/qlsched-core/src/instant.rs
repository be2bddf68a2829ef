//! Instants and look-backs as people type them on a command line, parsed here for every time
//! flag so that `backfill --from`, `cron --from` and every `--since` read the same words:
//!
//! - absolute: RFC 3339 (`2026-03-29T00:00:00Z`, `2026-03-29T02:00:00+01:00`) or epoch
//!   milliseconds (`1767229200000`, `-62135596800000`: digits alone, signed or not);
//! - relative to now: `now`, `now-2h`, `now+30m`, or a signed duration `-2h`, `+30m` (a duration
//!   as `parse_duration` reads it, so `-1h30m` and `-500ms` too).
//!
//! The core reads no clock: a relative instant is an offset, resolved by the command that uses it
//! against the database's now (`backfill`), or this machine's clock where there is no database
//! (`cron`). A look-back (`--since 2h`) is a span; `-2h` and `now-2h` say the same there.

use std::time::Duration;

use super::cron::{FIRST_INSTANT_S, LAST_INSTANT_S};
use super::duration::parse_duration;

/// An instant as given: at an instant, or an offset from a now the caller supplies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstantArg {
    /// Epoch milliseconds, within the instants cron is evaluated in (years 1 to 9999 UTC).
    At(i64),
    /// Milliseconds from now: negative before it.
    FromNow(i64),
}

const FORMS: &str = "expected an RFC 3339 time such as 2026-03-29T00:00:00Z, epoch milliseconds, \
                     now, now-2h, now+30m or -2h";
const RANGE: &str = "out of range: cron is evaluated from 0001-01-01T00:00:00Z (epoch \
                     milliseconds -62135596800000) to 9999-12-31T23:59:59.999Z (253402300799999)";

impl InstantArg {
    /// Parses one of the forms of the module docs; the error says which forms there are.
    ///
    /// # Errors
    ///
    /// The reason, for a usage error that quotes the value: none of the forms, or an absolute
    /// instant outside the years 1 to 9999.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (first, last) = (FIRST_INSTANT_S * 1_000, LAST_INSTANT_S * 1_000 + 999);
        let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return match text.parse::<i64>() {
                Ok(ms) if (first..=last).contains(&ms) => Ok(InstantArg::At(ms)),
                _ => Err(RANGE.to_owned()),
            };
        }
        if let Some(offset) = relative(text) {
            return offset.map(InstantArg::FromNow);
        }
        let ms = chrono::DateTime::parse_from_rfc3339(text)
            .map(|t| t.timestamp_millis())
            .map_err(|error| format!("{FORMS}: {error}"))?;
        if (first..=last).contains(&ms) {
            Ok(InstantArg::At(ms))
        } else {
            Err(RANGE.to_owned())
        }
    }

    /// The instant, a relative one counted from `now_ms`.
    pub fn resolve(self, now_ms: i64) -> i64 {
        match self {
            InstantArg::At(ms) => ms,
            InstantArg::FromNow(offset) => now_ms.saturating_add(offset),
        }
    }
}

/// `now`, `now±D` or `±D` as an offset in milliseconds; `None` when `text` is none of them.
fn relative(text: &str) -> Option<Result<i64, String>> {
    let signed = match text.strip_prefix("now") {
        Some("") => return Some(Ok(0)),
        Some(rest) => rest,
        None => text,
    };
    let (sign, span) = match signed.as_bytes().first() {
        Some(b'-') => (-1, &signed[1..]),
        Some(b'+') => (1, &signed[1..]),
        // `now2h`, or a word that is not a relative form: neither.
        _ if text.starts_with("now") => return Some(Err(FORMS.to_owned())),
        _ => return None,
    };
    Some(
        parse_duration(span)
            .map_err(|error| format!("{FORMS}: {error}"))
            .and_then(|d| {
                i64::try_from(d.as_millis())
                    .map(|ms| sign * ms)
                    .map_err(|_| RANGE.to_owned())
            }),
    )
}

/// A look-back (`--since`): `2h`, or the same written as an instant before now (`-2h`,
/// `now-2h`).
///
/// # Errors
///
/// The reason, for a usage error: not a span, an instant after now, or an absolute instant (the
/// database's now, which it would be measured from, is not known here).
pub fn parse_since(text: &str) -> Result<Duration, String> {
    if let Ok(span) = parse_duration(text) {
        return Ok(span);
    }
    match InstantArg::parse(text) {
        Ok(InstantArg::FromNow(offset)) if offset <= 0 => {
            Ok(Duration::from_millis(offset.unsigned_abs()))
        }
        Ok(InstantArg::FromNow(_)) => Err(format!(
            "{text} is after now: a look-back is a span back from now, e.g. 10m, -2h or now-2h"
        )),
        _ => Err(format!(
            "expected a span back from now, e.g. 10m, 2h, -2h or now-2h (not {text})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_instants_are_rfc3339_or_epoch_milliseconds() {
        assert_eq!(InstantArg::parse("0"), Ok(InstantArg::At(0)));
        assert_eq!(
            InstantArg::parse("2026-01-01T02:00:00+01:00"),
            Ok(InstantArg::At(1_767_229_200_000))
        );
        assert_eq!(
            InstantArg::parse("-62135596800000"),
            Ok(InstantArg::At(-62_135_596_800_000))
        );
        for out in ["-62135596800001", "253402300800000", "0000-12-31T23:59:59Z"] {
            assert!(InstantArg::parse(out).is_err(), "{out}");
        }
        assert!(InstantArg::parse("2026-01-01").is_err());
        assert!(InstantArg::parse("yesterday").is_err());
    }

    #[test]
    fn relative_instants_are_offsets_from_a_now_given_later() {
        for (text, offset) in [
            ("now", 0),
            ("now-2h", -7_200_000),
            ("now+30m", 1_800_000),
            ("-2h", -7_200_000),
            ("+1m30s", 90_000),
            ("-500ms", -500),
        ] {
            assert_eq!(
                InstantArg::parse(text),
                Ok(InstantArg::FromNow(offset)),
                "{text}"
            );
        }
        assert_eq!(
            InstantArg::FromNow(-7_200_000).resolve(10_000_000),
            2_800_000
        );
        assert_eq!(InstantArg::At(5).resolve(10_000_000), 5);
        for bad in ["now2h", "now-", "now-2", "-2x", "nowish", "-"] {
            let error = InstantArg::parse(bad).unwrap_err();
            assert!(error.contains("now-2h"), "{bad}: {error}");
        }
    }

    #[test]
    fn a_look_back_is_a_span_however_it_is_written() {
        for text in ["2h", "-2h", "now-2h"] {
            assert_eq!(parse_since(text), Ok(Duration::from_secs(7_200)), "{text}");
        }
        assert_eq!(parse_since("now"), Ok(Duration::ZERO));
        assert!(parse_since("+2h").unwrap_err().contains("after now"));
        assert!(parse_since("2026-01-01T00:00:00Z").is_err());
        assert!(parse_since("soon").is_err());
    }
}
