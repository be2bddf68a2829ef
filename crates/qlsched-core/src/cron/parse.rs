//! The grammar of cron as cronie reads it: the `@` macros, the fields and their elements, each
//! read into the bit sets of `fields`; and the messages for what is refused, which quote the field
//! and the token as written so that the reader finds the fault in what they typed.

use super::fields::Fields;
use crate::error::CoreError;

/// The `@` macros qlsched accepts, with the five-field pattern each stands for; the expansion has
/// the same `*` flags cronie sets for the macro (`@hourly` is a wildcard job, the others are
/// fixed-time).
const MACROS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// One field of the expression: its name in messages, its bounds and its names, if any.
struct FieldKind {
    name: &'static str,
    low: u32,
    high: u32,
    names: &'static [&'static str],
    /// How a message suggests a name and its number (`use MON or 1`).
    noun: &'static str,
}

const SECOND: FieldKind = FieldKind {
    name: "second",
    low: 0,
    high: 59,
    names: &[],
    noun: "",
};
const MINUTE: FieldKind = FieldKind {
    name: "minute",
    low: 0,
    high: 59,
    names: &[],
    noun: "",
};
const HOUR: FieldKind = FieldKind {
    name: "hour",
    low: 0,
    high: 23,
    names: &[],
    noun: "",
};
const DAY_OF_MONTH: FieldKind = FieldKind {
    name: "day-of-month",
    low: 1,
    high: 31,
    names: &[],
    noun: "",
};
const MONTH: FieldKind = FieldKind {
    name: "month",
    low: 1,
    high: 12,
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
    noun: "month",
};
const DAY_OF_WEEK: FieldKind = FieldKind {
    name: "day-of-week",
    low: 0,
    high: 7,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
    noun: "day",
};

/// A parsed field: the values it allows (bit `v` for value `v`) and whether it begins with `*`,
/// which is what cronie's day and daylight-saving rules look at.
struct Parsed {
    bits: u64,
    star: bool,
}

/// Checks the shape (a seventh, year field; unknown macros) and returns the fields' text.
pub(super) fn expand(expr: &str) -> Result<&str, CoreError> {
    let trimmed = expr.trim();
    if trimmed.starts_with('@') {
        return MACROS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(trimmed))
            .map(|(_, pattern)| *pattern)
            .ok_or_else(|| invalid(expr, macro_reason(trimmed)));
    }
    match trimmed.split_whitespace().count() {
        5 | 6 => Ok(trimmed),
        0 => Err(invalid(expr, "empty expression".into())),
        7 => Err(invalid(
            expr,
            "seven fields: a year field is not supported; use five fields, or six with leading seconds"
                .into(),
        )),
        n => Err(invalid(
            expr,
            format!("expected five fields, or six with leading seconds; got {n}"),
        )),
    }
}

pub(super) fn parse_fields(pattern: &str) -> Result<Fields, String> {
    let texts: Vec<&str> = pattern.split_whitespace().collect();
    let (second, rest) = match texts.len() {
        6 => (Some(parse_field(&SECOND, texts[0])?), &texts[1..]),
        _ => (None, &texts[..]),
    };
    let minute = parse_field(&MINUTE, rest[0])?;
    let hour = parse_field(&HOUR, rest[1])?;
    let dom = parse_field(&DAY_OF_MONTH, rest[2])?;
    let month = parse_field(&MONTH, rest[3])?;
    let dow = parse_field(&DAY_OF_WEEK, rest[4])?;
    let second_star = second.as_ref().is_some_and(|s| s.star);
    Ok(Fields {
        seconds: second.map_or(1, |s| s.bits),
        minutes: minute.bits,
        hours: hour.bits,
        days_of_month: dom.bits,
        months: month.bits,
        // Sunday is 0 and 7.
        days_of_week: (dow.bits | (dow.bits >> 7)) & 0x7f,
        either_day: !dom.star && !dow.star,
        fixed_time: !minute.star && !hour.star && !second_star,
    })
}

/// One field: a comma list of `*`, `*/step`, `value`, `low-high` and `low-high/step`, as cronie
/// reads it; the messages quote the field and the element as written.
fn parse_field(kind: &FieldKind, text: &str) -> Result<Parsed, String> {
    let mut bits = 0u64;
    for element in text.split(',') {
        if element.is_empty() {
            return Err(format!(
                "field {}: '{text}' has an empty list element",
                kind.name
            ));
        }
        let (low, high, step) = parse_element(kind, element)?;
        let mut v = Some(low);
        while let Some(value) = v.filter(|&value| value <= high) {
            bits |= 1 << value;
            v = value.checked_add(step);
        }
    }
    Ok(Parsed {
        bits,
        star: text.starts_with('*'),
    })
}

fn parse_element(kind: &FieldKind, element: &str) -> Result<(u32, u32, u32), String> {
    let name = kind.name;
    if element.contains('~') {
        return Err(format!(
            "field {name}: '{element}': ~ (a random value each crond picks for itself) is refused: \
             every replica must read one schedule"
        ));
    }
    let (range, step) = match element.split_once('/') {
        None => (element, None),
        Some((range, step_text)) => {
            let digits = !step_text.is_empty() && step_text.bytes().all(|b| b.is_ascii_digit());
            let step = match digits.then(|| step_text.parse::<u32>().ok()).flatten() {
                Some(0) => {
                    return Err(format!(
                        "field {name}: '{element}': a step must be 1 or more"
                    ));
                }
                Some(step) => step,
                None if digits => {
                    return Err(format!(
                        "field {name}: '{element}': the step '{step_text}' is too large"
                    ));
                }
                None => {
                    return Err(format!(
                        "field {name}: '{element}': the step '{step_text}' is not a number"
                    ));
                }
            };
            (range, Some(step))
        }
    };
    if range == "*" {
        return Ok((kind.low, kind.high, step.unwrap_or(1)));
    }
    if range.is_empty() {
        return Err(format!(
            "field {name}: '{element}': a step follows * or a range, such as */{}",
            step.unwrap_or(1)
        ));
    }
    let Some((low_text, high_text)) = range.split_once('-') else {
        let value = parse_value(kind, range).map_err(|e| within(e, element, range))?;
        if let Some(step) = step {
            // "From it to the end": the week's end is Saturday (7 is Sunday again), unless the
            // value is Saturday itself; named the way the value was written.
            let last = match (kind.name == DAY_OF_WEEK.name, value >= 6) {
                (true, false) => 6,
                _ => kind.high,
            };
            let last = if range.bytes().all(|b| b.is_ascii_digit()) {
                last.to_string()
            } else {
                let index = usize::try_from(last - kind.low).unwrap_or(0);
                kind.names
                    .get(index % kind.names.len().max(1))
                    .map_or_else(|| last.to_string(), |n| (*n).to_owned())
            };
            return Err(format!(
                "field {name}: '{element}': a step follows * or a range, such as {range}-{last}/{step}"
            ));
        }
        return Ok((value, value, 1));
    };
    if low_text.is_empty() || high_text.is_empty() {
        return Err(format!(
            "field {name}: '{element}' is not a range: a value is missing beside '-'"
        ));
    }
    let low = parse_value(kind, low_text).map_err(|e| within(e, element, low_text))?;
    let mut high = parse_value(kind, high_text).map_err(|e| within(e, element, high_text))?;
    // cronie reads a day-of-week range ending on Sunday written as 0 (FRI-SUN) as ending on 7.
    if kind.name == DAY_OF_WEEK.name && high == 0 && low > 0 {
        high = 7;
    }
    if low > high {
        return Err(format!(
            "field {name}: '{element}' is a reversed range; cron ranges do not wrap around: write \
             {low_text}-{},{}-{high_text}",
            kind.high, kind.low
        ));
    }
    Ok((low, high, step.unwrap_or(1)))
}

/// A value's error, quoting the whole element as written when the value is only part of it
/// (`'1-2-3': '2-3' is not a number`), so the reader finds it in what they typed.
fn within(error: String, element: &str, token: &str) -> String {
    if element == token {
        return error;
    }
    let quoted = format!("'{token}'");
    match error.split_once(&quoted) {
        Some((field, rest)) => format!("{field}'{element}': {quoted}{rest}"),
        None => error,
    }
}

fn parse_value(kind: &FieldKind, token: &str) -> Result<u32, String> {
    let name = kind.name;
    let (low, high) = (kind.low, kind.high);
    if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
        return match token.parse::<u32>() {
            Ok(v) if (low..=high).contains(&v) => Ok(v),
            _ => Err(format!(
                "field {name}: '{token}' is out of range {low}-{high}"
            )),
        };
    }
    if let Some(index) = kind
        .names
        .iter()
        .position(|n| n.eq_ignore_ascii_case(token))
    {
        return Ok(u32::try_from(index).unwrap_or(0) + low);
    }
    if token == "?" {
        return Err(format!(
            "field {name}: '?' is Quartz syntax, not cron's; write *"
        ));
    }
    // Quartz's L (last), W (weekday) and # (nth): `L`, `LW`, `5L`, `15W`, `1#2`; not a misspelt
    // name that happens to end in l or w.
    let quartz_suffix = token.len() >= 2
        && token.ends_with(['L', 'l', 'W', 'w'])
        && token[..token.len() - 1].bytes().all(|b| b.is_ascii_digit());
    if token.contains('#')
        || token.eq_ignore_ascii_case("L")
        || token.eq_ignore_ascii_case("LW")
        || quartz_suffix
    {
        return Err(format!(
            "field {name}: '{token}': L, W and # are Quartz syntax that cron does not have"
        ));
    }
    if !kind.names.is_empty() {
        if let Some(index) = kind.names.iter().position(|n| {
            token.len() > 3 && token.get(..3).is_some_and(|p| p.eq_ignore_ascii_case(n))
        }) {
            return Err(format!(
                "field {name}: '{token}' is not a {} name; use {} or {}",
                kind.noun,
                kind.names[index],
                u32::try_from(index).unwrap_or(0) + low
            ));
        }
        return Err(format!(
            "field {name}: '{token}' is not a {noun} name ({}-{}) or a number {low}-{high}",
            kind.names[0],
            kind.names[kind.names.len() - 1],
            noun = kind.noun
        ));
    }
    Err(format!(
        "field {name}: '{token}' is not a number {low}-{high}"
    ))
}

fn macro_reason(name: &str) -> String {
    if name.eq_ignore_ascii_case("@reboot") {
        "@reboot is not a schedule: a cluster of replicas has no single boot to fire on".into()
    } else {
        "unknown macro; expected one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly".into()
    }
}

pub(super) fn invalid(expr: &str, reason: String) -> CoreError {
    CoreError::InvalidCron {
        expr: expr.to_owned(),
        reason,
    }
}
