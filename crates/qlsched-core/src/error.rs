//! The core's one error type. Each variant is one kind of refusal, which `cli::error` maps to
//! exactly one exit status of docs/DESIGN.md §5.4, so that the binary chooses its exit status in
//! one place without inspecting messages.

/// Why a value given to the core was refused.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("invalid cron expression \"{expr}\": {reason}")]
    InvalidCron { expr: String, reason: String },

    #[error("unknown time zone \"{0}\": expected an IANA name such as Europe/Berlin or UTC")]
    UnknownTimeZone(String),

    #[error("invalid duration \"{input}\": {reason}")]
    InvalidDuration { input: String, reason: String },

    #[error("{field} must be {bounds}, got {value}")]
    OutOfBounds {
        field: &'static str,
        value: String,
        bounds: &'static str,
    },

    #[error("cron expression \"{expr}\" never fires")]
    NoOccurrence { expr: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_offending_value() {
        let bounds = CoreError::OutOfBounds {
            field: "batch",
            value: "300".into(),
            bounds: "1..=256",
        };
        assert_eq!(bounds.to_string(), "batch must be 1..=256, got 300");
        let zone = CoreError::UnknownTimeZone("Mars/Base".into()).to_string();
        assert!(
            zone.contains("Mars/Base") && zone.contains("Europe/Berlin"),
            "{zone}"
        );
        let cron = CoreError::InvalidCron {
            expr: "* *".into(),
            reason: "too few fields".into(),
        };
        assert_eq!(
            cron.to_string(),
            "invalid cron expression \"* *\": too few fields"
        );
    }
}
