//! Claims held on schedule rows, by owner and expiry: `inspect claims` and the dashboard.

use serde::Serialize;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use crate::StoreError;

/// A claim as operators see it: the fence, when it was taken, and its lease left in database time
/// (negative once expired).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ClaimView {
    pub project_id: String,
    pub trigger_id: String,
    pub owner: String,
    pub token: Uuid,
    pub version: i64,
    pub acquired_at_ms: i64,
    pub expires_at_ms: i64,
    /// The lease left, database time; negative once expired.
    pub remaining_ms: i64,
    pub expired: bool,
}

/// The columns of a [`ClaimView`] of schedule row `s`.
macro_rules! claim_columns {
    () => {
        "s.project_id, s.trigger_id, s.claim_owner, s.claim_token, s.claim_version,
         s.updated_at_ms, s.claim_expires_at_ms, s.claim_expires_at_ms - now_ms() AS remaining_ms,
         s.claim_expires_at_ms <= now_ms() AS expired"
    };
}

pub(super) fn claim_view(row: &Row) -> ClaimView {
    ClaimView {
        project_id: row.get(0),
        trigger_id: row.get(1),
        owner: row.get(2),
        token: row.get(3),
        version: row.get(4),
        acquired_at_ms: row.get(5),
        expires_at_ms: row.get(6),
        remaining_ms: row.get(7),
        expired: row.get(8),
    }
}

// Claims, by owner and expiry, from the claim-owner index (its predicate matches).
const CLAIMS: &str = concat!(
    "SELECT ",
    claim_columns!(),
    " FROM trigger_schedules s
    WHERE s.claim_owner IS NOT NULL
      AND ($1::text IS NULL OR s.claim_owner = $1)
      AND (NOT $2 OR s.claim_expires_at_ms <= now_ms())
    ORDER BY s.claim_owner, s.claim_expires_at_ms, s.project_id, s.trigger_id
    LIMIT $3"
);

/// Claims held, optionally of one owner, optionally only the expired ones.
pub async fn claims(
    client: &impl GenericClient,
    owner: Option<&str>,
    expired_only: bool,
    limit: i64,
) -> Result<Vec<ClaimView>, StoreError> {
    Ok(client
        .query(CLAIMS, &[&owner, &expired_only, &limit])
        .await?
        .iter()
        .map(claim_view)
        .collect())
}

pub(super) fn claim_of(row: &Row) -> Option<ClaimView> {
    let token: Option<Uuid> = row.get("claim_token");
    let owner: Option<String> = row.get("claim_owner");
    let expires_at_ms: Option<i64> = row.get("claim_expires_at_ms");
    let now_ms: i64 = row.get("now_ms");
    Some(ClaimView {
        project_id: row.get("project_id"),
        trigger_id: row.get("trigger_id"),
        owner: owner?,
        token: token?,
        version: row.get("claim_version"),
        acquired_at_ms: row.get("updated_at_ms"),
        expires_at_ms: expires_at_ms?,
        remaining_ms: expires_at_ms? - now_ms,
        expired: expires_at_ms? <= now_ms,
    })
}

crate::statements::statements! {
    CLAIMS: Observer,
}
