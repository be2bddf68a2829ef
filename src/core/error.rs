//! The core's one error type. Each variant maps to exactly one exit status of docs/DESIGN.md §5.4,
//! so the binary chooses its exit code in one place without inspecting messages.

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

impl CoreError {
    /// The exit status for this error (docs/DESIGN.md §5.4): bad input data is 65, a usage error
    /// (a malformed flag value) is 2, an invalid configuration is 78.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::InvalidCron { .. } | Self::UnknownTimeZone(_) | Self::NoOccurrence { .. } => 65,
            Self::InvalidDuration { .. } => 2,
            Self::OutOfBounds { .. } => 78,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_design_table() {
        let cron = CoreError::InvalidCron {
            expr: "x".into(),
            reason: "r".into(),
        };
        assert_eq!(cron.exit_code(), 65);
        assert_eq!(
            CoreError::UnknownTimeZone("Mars/Base".into()).exit_code(),
            65
        );
        assert_eq!(CoreError::NoOccurrence { expr: "x".into() }.exit_code(), 65);
        let duration = CoreError::InvalidDuration {
            input: "x".into(),
            reason: "r".into(),
        };
        assert_eq!(duration.exit_code(), 2);
        let bounds = CoreError::OutOfBounds {
            field: "batch",
            value: "300".into(),
            bounds: "1..=256",
        };
        assert_eq!(bounds.exit_code(), 78);
    }

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
