//! The name of a trigger, `PROJECT/TRIGGER` (docs/DESIGN.md §5.2): how operators type it, how
//! every message, table and log line writes it, and the key the dashboard selects by. One type, so
//! that the spelling and the rules for the ids inside it live in one place.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// The longest id, in characters (docs/DESIGN.md §3.1).
pub const MAX_ID_CHARS: usize = 128;

/// A project id and a trigger id. Serialized as its two ids (`project_id`, `trigger_id`), as the
/// tables name them; displayed as `PROJECT/TRIGGER`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TriggerName {
    pub project_id: String,
    pub trigger_id: String,
}

impl TriggerName {
    /// The name of stored ids; nothing is checked, since what the database holds was checked when
    /// it was written.
    pub fn new(project_id: impl Into<String>, trigger_id: impl Into<String>) -> Self {
        TriggerName {
            project_id: project_id.into(),
            trigger_id: trigger_id.into(),
        }
    }
}

impl fmt::Display for TriggerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.project_id, self.trigger_id)
    }
}

/// True for an id the schema allows: 1 to [`MAX_ID_CHARS`] of `A-Z a-z 0-9 _ . -`. Ids end up
/// in `PROJECT/TRIGGER` names and in idempotency keys (`ql3:cron:v1:<id>:…`), so `/` and `:` would
/// make either ambiguous; the rest of the restriction keeps ids shell- and URL-safe.
pub fn valid_id(id: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    !id.is_empty() && id.chars().count() <= MAX_ID_CHARS && id.chars().all(allowed)
}

/// A `PROJECT/TRIGGER` that is not one: no `/`, or an id the schema does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "expected PROJECT/TRIGGER, each 1 to 128 of A-Z a-z 0-9 _ . -, got \"{}\"",
    crate::text::clean(.0)
)]
pub struct InvalidTriggerName(pub String);

impl FromStr for TriggerName {
    type Err = InvalidTriggerName;

    /// Reads `PROJECT/TRIGGER` as an operator types it; clap parses the argument with this.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once('/') {
            Some((project, trigger)) if valid_id(project) && valid_id(trigger) => {
                Ok(TriggerName::new(project, trigger))
            }
            _ => Err(InvalidTriggerName(text.to_owned())),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays_project_slash_trigger() {
        let name: TriggerName = "acme/nightly-report.v2".parse().unwrap();
        assert_eq!(name, TriggerName::new("acme", "nightly-report.v2"));
        assert_eq!(name.to_string(), "acme/nightly-report.v2");
    }

    #[test]
    fn refuses_what_is_not_a_name_with_the_expected_form() {
        let long = format!("{}/t", "x".repeat(129));
        for text in ["acme", "/t", "p/", "p/t/x", "p q/t", "p/t:1", "", &long] {
            let error = text.parse::<TriggerName>().expect_err(text);
            assert!(
                error
                    .to_string()
                    .starts_with("expected PROJECT/TRIGGER, each 1 to 128 of A-Z a-z 0-9 _ . -"),
                "{error}"
            );
        }
        assert!(
            format!("{}/t", "p".repeat(128))
                .parse::<TriggerName>()
                .is_ok()
        );
    }

    #[test]
    fn the_error_escapes_what_it_echoes() {
        let error = "a\u{1b}[2Jb".parse::<TriggerName>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "expected PROJECT/TRIGGER, each 1 to 128 of A-Z a-z 0-9 _ . -, got \"a\\u{1b}[2Jb\""
        );
    }

    #[test]
    fn orders_by_project_then_trigger() {
        let mut names = [
            TriggerName::new("b", "a"),
            TriggerName::new("a", "z"),
            TriggerName::new("a", "b"),
        ];
        names.sort();
        let shown: Vec<String> = names.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["a/b", "a/z", "b/a"]);
    }

    #[test]
    fn serializes_as_its_two_ids() {
        let json = serde_json::to_value(TriggerName::new("p", "t")).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"project_id": "p", "trigger_id": "t"})
        );
    }
}
