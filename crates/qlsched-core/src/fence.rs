//! The claim fence (docs/DESIGN.md §4.3): what a replica holds between claiming a schedule row and
//! admitting its occurrence, and what every admission and operator expiry must match.

/// The full fence a claimer must present to commit anything on a schedule row.
///
/// Neither half of a weaker fence is enough (docs/DESIGN.md §4.3). Owner alone is
/// ABA-unsafe: a replica whose claim expired and was taken over can win the row back under the same
/// owner name, and its stale in-flight admission would then match. Expiry alone trusts clocks and
/// says nothing about who holds the row now. The random `token`, fresh on every claim, together with
/// `version`, incremented by every claim, publish and expiry, names one claim exactly once: after
/// any takeover, expiry or re-publish, a stale holder's WHERE clause matches no row and its commit
/// is impossible. `owner` and `expires_at_ms` are still checked, and are what operators read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClaimFence {
    pub owner: String,
    pub token: uuid::Uuid,
    pub version: i64,
    pub expires_at_ms: i64,
}

/// The part of a fence that names one claim, as a script passes it back (`--token`,
/// `--version`): the token names one claim, the version proves it is still the latest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FenceRef {
    pub token: uuid::Uuid,
    pub version: i64,
}

impl ClaimFence {
    /// The token and version that name this claim.
    pub fn reference(&self) -> FenceRef {
        FenceRef {
            token: self.token,
            version: self.version,
        }
    }

    /// Does `fence` name this claim? Token and version together name one claim exactly once.
    pub fn is_named_by(&self, fence: FenceRef) -> bool {
        self.reference() == fence
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_named_only_by_its_own_token_and_version() {
        let fence = ClaimFence {
            owner: "node-a".into(),
            token: uuid::Uuid::from_u128(1),
            version: 7,
            expires_at_ms: 1_000,
        };
        let named = fence.reference();
        assert!(fence.is_named_by(named));
        assert!(!fence.is_named_by(FenceRef {
            version: 8,
            ..named
        }));
        let other = uuid::Uuid::from_u128(2);
        assert!(!fence.is_named_by(FenceRef {
            token: other,
            ..named
        }));
    }

    #[test]
    fn serializes_token_as_hyphenated_string() {
        let fence = ClaimFence {
            owner: "node-a".into(),
            token: uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef),
            version: 7,
            expires_at_ms: 1_000,
        };
        let json = serde_json::to_value(&fence).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "owner": "node-a",
                "token": "01234567-89ab-cdef-0123-456789abcdef",
                "version": 7,
                "expires_at_ms": 1000
            })
        );
    }
}
