//! Operator actions on schedule rows, newest first (`schedule_audit`): `inspect audit`.

use serde::Serialize;
use tokio_postgres::GenericClient;

use crate::StoreError;
use crate::row::Named;
use qlsched_core::TriggerName;

/// One operator action on a schedule row (docs/DESIGN.md §3.1, `schedule_audit`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AuditView {
    pub audit_id: i64,
    pub project_id: String,
    pub trigger_id: String,
    /// What was done (the words the `schedule_audit.action` CHECK constraint allows).
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["claim", "admit", "release", "expire", "pause", "resume", "fire", "backfill"])))]
    pub action: String,
    /// The operator: OS user and host, or --owner.
    pub actor: String,
    /// The database login that did it.
    pub db_user: String,
    pub reason: Option<String>,
    pub at_ms: i64,
    /// The fence before: owner, token, version, expires_at_ms; a cleared fence has null owner,
    /// token and expires_at_ms.
    #[cfg_attr(feature = "schema", schemars(with = "Option<FenceJson>"))]
    pub fence_before: Option<serde_json::Value>,
    /// The fence after, as fence_before.
    #[cfg_attr(feature = "schema", schemars(with = "Option<FenceJson>"))]
    pub fence_after: Option<serde_json::Value>,
}

/// A fence as `schedule_audit` stores it (its shape only: the column is JSON).
#[cfg(feature = "schema")]
#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
struct FenceJson {
    owner: Option<String>,
    token: Option<uuid::Uuid>,
    version: i64,
    expires_at_ms: Option<i64>,
}

// Audit rows, newest first, optionally of one trigger (its (project, trigger, id) index).
const AUDIT: &str =
    "SELECT audit_id, project_id, trigger_id, action, actor, db_user, reason, at_ms,
        fence_before, fence_after
    FROM schedule_audit
    WHERE ($1::text IS NULL OR (project_id = $1 AND trigger_id = $2))
    ORDER BY audit_id DESC
    LIMIT $3";

pub async fn audit(
    client: &impl GenericClient,
    trigger: Option<&TriggerName>,
    limit: i64,
) -> Result<Vec<AuditView>, StoreError> {
    let (project_id, trigger_id) = trigger
        .map(|name| (&name.project_id, &name.trigger_id))
        .unzip();
    client
        .query(AUDIT, &[&project_id, &trigger_id, &limit])
        .await?
        .iter()
        .map(|row| {
            Ok(AuditView {
                audit_id: row.col("audit_id")?,
                project_id: row.col("project_id")?,
                trigger_id: row.col("trigger_id")?,
                action: row.col("action")?,
                actor: row.col("actor")?,
                db_user: row.col("db_user")?,
                reason: row.col("reason")?,
                at_ms: row.col("at_ms")?,
                fence_before: row.col("fence_before")?,
                fence_after: row.col("fence_after")?,
            })
        })
        .collect()
}

crate::statements::statements! {
    AUDIT: Observer,
}
