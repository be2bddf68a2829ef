//! Claims held on schedule rows, by owner and expiry: `inspect claims` and the dashboard.

use serde::Serialize;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use crate::StoreError;
use crate::row::Named;

/// A claim as operators see it: the fence, when it was taken, and its lease left in database time
/// (negative once expired).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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

/// A [`ClaimView`] of a row of `CLAIMS`.
fn claim_view(row: &Row) -> Result<ClaimView, StoreError> {
    Ok(ClaimView {
        project_id: row.col("project_id")?,
        trigger_id: row.col("trigger_id")?,
        owner: row.col("claim_owner")?,
        token: row.col("claim_token")?,
        version: row.col("claim_version")?,
        acquired_at_ms: row.col("updated_at_ms")?,
        expires_at_ms: row.col("claim_expires_at_ms")?,
        remaining_ms: row.col("remaining_ms")?,
        expired: row.col("expired")?,
    })
}

// Claims, by owner and expiry, from the claim-owner index (its predicate matches), with the
// columns of a [`ClaimView`].
const CLAIMS: &str = "SELECT s.project_id, s.trigger_id, s.claim_owner, s.claim_token,
         s.claim_version, s.updated_at_ms, s.claim_expires_at_ms,
         s.claim_expires_at_ms - now_ms() AS remaining_ms,
         s.claim_expires_at_ms <= now_ms() AS expired
    FROM trigger_schedules s
    WHERE s.claim_owner IS NOT NULL
      AND ($1::text IS NULL OR s.claim_owner = $1)
      AND (NOT $2 OR s.claim_expires_at_ms <= now_ms())
    ORDER BY s.claim_owner, s.claim_expires_at_ms, s.project_id, s.trigger_id
    LIMIT $3";

/// Claims held, optionally of one owner, optionally only the expired ones.
pub async fn claims(
    client: &impl GenericClient,
    owner: Option<&str>,
    expired_only: bool,
    limit: i64,
) -> Result<Vec<ClaimView>, StoreError> {
    client
        .query(CLAIMS, &[&owner, &expired_only, &limit])
        .await?
        .iter()
        .map(claim_view)
        .collect()
}

crate::statements::statements! {
    CLAIMS: Observer,
}
