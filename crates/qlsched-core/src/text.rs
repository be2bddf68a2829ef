//! Echoed user text, made safe to print: every message, log line and table cell that repeats an
//! id, owner, reason, path or value someone typed (or a manifest carried) goes through [`clean`]
//! or [`clean_message`]. A control character is written as its escape (`\u{1b}`), so that an id
//! holding an ESC sequence cannot recolour or retitle the operator's terminal and a NUL cannot
//! cut a line; bidirectional overrides likewise, so that text cannot reorder what is around it.
//! A value longer than [`MAX_SHOWN`] bytes is cut, with its full length said: `…(10240 bytes)`.

use std::fmt::Write;

/// The longest value shown whole, in bytes. Every valid id (128 characters) and owner (200
/// characters) fits; what is longer was not typed on purpose.
pub const MAX_SHOWN: usize = 512;
/// How much of a longer value is shown before the cut, in bytes (at a character boundary).
const KEPT: usize = 64;

/// True for what must not reach a terminal as it is.
fn escaped(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// One echoed value, safe to print: control characters escaped, shortened past [`MAX_SHOWN`].
pub fn clean(text: &str) -> String {
    let long = text.len() > MAX_SHOWN;
    let mut out = String::with_capacity(text.len().min(MAX_SHOWN) + 16);
    for c in text.chars() {
        if long && out.len() >= KEPT {
            break;
        }
        if escaped(c) {
            let _ = write!(out, "{}", c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    if long {
        let _ = write!(out, "…({} bytes)", text.len());
    }
    out
}

/// A whole message, safe to print on one line: whitespace runs become one space, control
/// characters are escaped, and every word longer than [`MAX_SHOWN`] (an id or owner pasted
/// whole) is shortened as [`clean`] does.
pub fn clean_message(message: &str) -> String {
    message
        .split([' ', '\t', '\n', '\r'])
        .filter(|word| !word.is_empty())
        .map(clean)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(clean("a\u{1b}[31mred"), "a\\u{1b}[31mred");
        assert_eq!(clean("nul\0here"), "nul\\u{0}here");
        assert_eq!(
            clean("\u{1b}]0;pwned\u{7}"),
            "\\u{1b}]0;pwned\\u{7}",
            "a terminal-title sequence"
        );
        assert_eq!(clean("tab\there"), "tab\\u{9}here");
        assert_eq!(clean("a\u{202e}b"), "a\\u{202e}b", "a bidi override");
        assert_eq!(
            clean("acme/nightly é"),
            "acme/nightly é",
            "plain text is kept"
        );
    }

    #[test]
    fn long_values_are_shortened_with_their_length() {
        let long = "x".repeat(10_240);
        let shown = clean(&long);
        assert_eq!(shown, format!("{}…(10240 bytes)", "x".repeat(64)));
        assert_eq!(clean(&"y".repeat(MAX_SHOWN)), "y".repeat(MAX_SHOWN));
        // A cut never splits a character.
        let wide = "é".repeat(600);
        assert!(clean(&wide).starts_with(&"é".repeat(32)));
        assert!(clean(&wide).ends_with("…(1200 bytes)"));
    }

    #[test]
    fn messages_stay_one_line_and_short() {
        let message = format!("no trigger {}/x\nnamed\t\u{1b}[2J here", "p".repeat(10_240));
        let shown = clean_message(&message);
        assert!(!shown.contains('\n') && !shown.contains('\u{1b}'));
        assert!(
            shown.contains("…(10242 bytes) named \\u{1b}[2J here"),
            "{shown}"
        );
    }
}
