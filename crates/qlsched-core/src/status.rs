//! The closed sets of words the tables and reports use (docs/DESIGN.md §3.1): a run's status,
//! what publishing did to a definition, what a manual claim ended with, and how alive a
//! registered replica is. A project's status is [`super::manifest::ProjectStatus`].
//! The store parses each at the boundary, so a value the binary has no name for (a row written by
//! hand, or by a newer version) is an error naming its table and column, never a panic and never a
//! string compared further in.

/// Declares a unit enum stored as a snake_case word: `as_str`, `ALL`, `Display`, `FromStr` (the
/// error lists the words expected), and `Serialize` and (with the `schema` feature) `JsonSchema`
/// as that word.
macro_rules! words {
    ($(#[$meta:meta])* $name:ident { $($(#[$variant_meta:meta])* $variant:ident => $word:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &[$name] = &[$($name::$variant,)+];

            /// The word stored and printed.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::status::UnknownWord;

            fn from_str(word: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|value| value.as_str() == word)
                    .ok_or_else(|| $crate::status::UnknownWord {
                        word: word.to_owned(),
                        expected: Self::ALL.iter().map(|value| value.as_str()).collect(),
                    })
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        #[cfg(feature = "schema")]
        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                let mut schema = ::schemars::json_schema!({"type": "string"});
                let words: Vec<&str> = Self::ALL.iter().map(|value| value.as_str()).collect();
                schema.insert("enum".into(), words.into());
                schema
            }
        }
    };
}
pub(crate) use words;

/// A word that is none of a set's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value \"{}\": expected one of {}", crate::text::clean(word), expected.join(", "))]
pub struct UnknownWord {
    pub word: String,
    pub expected: Vec<&'static str>,
}

words! {
    /// `runs.status`. qlsched admits runs as `queued`; the others belong to the dispatcher.
    RunStatus {
        Queued => "queued",
        Dispatching => "dispatching",
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
        Cancelled => "cancelled",
    }
}

words! {
    /// What `publish` did to one definition.
    Change {
        /// It was not stored before.
        Created => "created",
        /// It was stored with other content: a new revision (tasks and triggers).
        Changed => "changed",
        /// It was stored as it is.
        Unchanged => "unchanged",
    }
}

words! {
    /// What a manual claim (`qlsched claim`) ended with.
    ClaimOutcome {
        /// Nothing was written: the claim, decision and admission were only shown.
        DryRun => "dry_run",
        /// The claim is kept until its lease ends.
        Held => "held",
        /// The claim was given back (by the operator, or because nothing was due after all).
        Released => "released",
        /// A run was admitted.
        Admitted => "admitted",
        /// The cursor moved on (occurrences passed over), and no run was admitted.
        Advanced => "advanced",
    }
}

words! {
    /// How alive a registered replica is, read from its heartbeat's age on the database clock
    /// (`store::replicas`, docs/DESIGN.md §3.1 `replicas`). A replica beats at most once a
    /// cadence, inside its claim's round trip, so a heartbeat two cadences old already means a
    /// round that is not coming back on time; the lease is when its claims stop protecting rows.
    Liveness {
        /// Running or draining, with a heartbeat within two cadences (at least one second).
        Live => "live",
        /// Running or draining, no heartbeat for longer than two cadences but not yet for its
        /// lease plus its cadence: hung (SIGSTOP, a frozen VM), cut off, or in a very long round.
        /// Its claims may still be valid, so nothing else takes its rows yet.
        Stalled => "stalled",
        /// Running or draining, no heartbeat for longer than its lease plus its cadence: every
        /// claim it held has expired and other replicas take its rows.
        Stale => "stale",
        /// It said it stopped.
        Stopped => "stopped",
    }
}

impl Liveness {
    /// Lists put what needs a look first: stale (0), stalled (1), live (2), stopped (3).
    pub fn urgency(self) -> u8 {
        match self {
            Liveness::Stale => 0,
            Liveness::Stalled => 1,
            Liveness::Live => 2,
            Liveness::Stopped => 3,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_its_value() {
        for status in RunStatus::ALL {
            assert_eq!(status.as_str().parse::<RunStatus>().unwrap(), *status);
            assert_eq!(status.to_string(), status.as_str());
        }
        for change in Change::ALL {
            assert_eq!(change.as_str().parse::<Change>().unwrap(), *change);
        }
        for outcome in ClaimOutcome::ALL {
            assert_eq!(outcome.as_str().parse::<ClaimOutcome>().unwrap(), *outcome);
        }
        for liveness in Liveness::ALL {
            assert_eq!(liveness.as_str().parse::<Liveness>().unwrap(), *liveness);
        }
    }

    #[test]
    fn an_unknown_word_names_itself_and_the_words_expected() {
        let error = "paused".parse::<RunStatus>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown value \"paused\": expected one of queued, dispatching, running, succeeded, \
             failed, cancelled"
        );
    }

    #[test]
    fn serializes_as_its_word_and_pads_in_tables() {
        assert_eq!(
            serde_json::to_value(RunStatus::Queued).unwrap(),
            serde_json::json!("queued")
        );
        assert_eq!(format!("{:<8}|", Change::Created), "created |");
    }
}
