//! The group roles and the exact grants of docs/DESIGN.md §3.2, and the checks of them: the
//! privileges a replica's login must hold, and `migrate verify`.

use std::collections::BTreeSet;

use serde::Serialize;
use tokio_postgres::Client;

use super::MIGRATIONS;
use super::ledger::{divergence, ledger_exists, read_ledger};
use crate::row::Named;
use crate::{SchemaName, StoreError};

/// The group role a replica's login needs (docs/DESIGN.md §3.2).
pub const RUNTIME_ROLE: &str = "qlsched_runtime";

/// The group roles of docs/DESIGN.md §3.2.
pub const ROLES: [&str; 5] = [
    "qlsched_admin",
    "qlsched_runtime",
    "qlsched_observer",
    "qlsched_worker_ingress",
    "qlsched_dispatcher",
];

/// The exact table privileges each role must hold (docs/DESIGN.md §3.2); anything more or less is
/// reported by `migrate verify`.
pub const GRANTS: &[(&str, &str, &[&str])] = &[
    ("qlsched_admin", "projects", &["INSERT", "SELECT", "UPDATE"]),
    ("qlsched_admin", "tasks", &["INSERT", "SELECT", "UPDATE"]),
    ("qlsched_admin", "triggers", &["INSERT", "SELECT", "UPDATE"]),
    (
        "qlsched_admin",
        "execution_revisions",
        &["INSERT", "SELECT"],
    ),
    (
        "qlsched_admin",
        "trigger_schedules",
        &["DELETE", "INSERT", "SELECT", "UPDATE"],
    ),
    ("qlsched_admin", "runs", &["INSERT", "SELECT"]),
    ("qlsched_admin", "attempts", &["INSERT", "SELECT"]),
    ("qlsched_admin", "run_events", &["INSERT", "SELECT"]),
    ("qlsched_admin", "schema_migrations", &["SELECT"]),
    ("qlsched_admin", "schedule_audit", &["INSERT", "SELECT"]),
    ("qlsched_admin", "schedule_audit_audit_id_seq", &["USAGE"]),
    ("qlsched_admin", "misfires", &["INSERT", "SELECT"]),
    ("qlsched_admin", "replicas", &["DELETE", "SELECT"]),
    ("qlsched_admin", "admission_errors", &["SELECT"]),
    ("qlsched_admin", "run_retention", &["SELECT"]),
    ("qlsched_admin", "retired_manual_runs", &["SELECT"]),
    ("qlsched_runtime", "projects", &["SELECT"]),
    ("qlsched_runtime", "tasks", &["SELECT"]),
    ("qlsched_runtime", "triggers", &["SELECT"]),
    ("qlsched_runtime", "execution_revisions", &["SELECT"]),
    ("qlsched_runtime", "schema_migrations", &["SELECT"]),
    (
        "qlsched_runtime",
        "trigger_schedules",
        &["SELECT", "UPDATE"],
    ),
    ("qlsched_runtime", "runs", &["DELETE", "INSERT", "SELECT"]),
    (
        "qlsched_runtime",
        "attempts",
        &["DELETE", "INSERT", "SELECT"],
    ),
    (
        "qlsched_runtime",
        "run_events",
        &["DELETE", "INSERT", "SELECT"],
    ),
    (
        "qlsched_runtime",
        "schedule_audit",
        &["DELETE", "INSERT", "SELECT"],
    ),
    ("qlsched_runtime", "schedule_audit_audit_id_seq", &["USAGE"]),
    (
        "qlsched_runtime",
        "misfires",
        &["DELETE", "INSERT", "SELECT"],
    ),
    (
        "qlsched_runtime",
        "replicas",
        &["DELETE", "INSERT", "SELECT", "UPDATE"],
    ),
    (
        "qlsched_runtime",
        "admission_errors",
        &["INSERT", "SELECT", "UPDATE"],
    ),
    ("qlsched_observer", "projects", &["SELECT"]),
    ("qlsched_observer", "tasks", &["SELECT"]),
    ("qlsched_observer", "triggers", &["SELECT"]),
    ("qlsched_observer", "execution_revisions", &["SELECT"]),
    ("qlsched_observer", "trigger_schedules", &["SELECT"]),
    ("qlsched_observer", "runs", &["SELECT"]),
    ("qlsched_observer", "attempts", &["SELECT"]),
    ("qlsched_observer", "run_events", &["SELECT"]),
    ("qlsched_observer", "schedule_audit", &["SELECT"]),
    ("qlsched_observer", "schema_migrations", &["SELECT"]),
    ("qlsched_observer", "misfires", &["SELECT"]),
    ("qlsched_observer", "replicas", &["SELECT"]),
    ("qlsched_observer", "admission_errors", &["SELECT"]),
    ("qlsched_runtime", "run_retention", &["SELECT", "UPDATE"]),
    (
        "qlsched_runtime",
        "retired_manual_runs",
        &["INSERT", "SELECT"],
    ),
    ("qlsched_observer", "run_retention", &["SELECT"]),
    ("qlsched_observer", "retired_manual_runs", &["SELECT"]),
    ("qlsched_dispatcher", "runs", &["SELECT", "UPDATE"]),
    (
        "qlsched_dispatcher",
        "attempts",
        &["INSERT", "SELECT", "UPDATE"],
    ),
    ("qlsched_dispatcher", "run_events", &["INSERT", "SELECT"]),
    (
        "qlsched_runtime",
        "replica_minutes",
        &["DELETE", "INSERT", "SELECT", "UPDATE"],
    ),
    ("qlsched_admin", "replica_minutes", &["SELECT"]),
    ("qlsched_observer", "replica_minutes", &["SELECT"]),
];

/// Roles that must have USAGE on the schema; `qlsched_worker_ingress` must not.
const SCHEMA_USERS: [&str; 4] = [
    "qlsched_admin",
    "qlsched_runtime",
    "qlsched_observer",
    "qlsched_dispatcher",
];

// Which of `$1` (objects in schema `$3`) / `$2` (privileges) the session lacks.
const CURRENT_USER: &str = "SELECT current_user::text";

const MISSING_PRIVILEGES: &str = "SELECT o || ' (' || p || ')'
    FROM unnest($1::text[], $2::text[]) AS wanted(o, p)
    WHERE NOT CASE WHEN p = 'USAGE' THEN has_sequence_privilege(format('%I.%I', $3::text, o), p)
                   ELSE has_table_privilege(format('%I.%I', $3::text, o), p) END
    ORDER BY o, p";

/// Refuses ([`StoreError::PermissionDenied`], exit 77) a session that lacks any privilege the
/// schema grants `role`: `run` checks it for `qlsched_runtime` before it claims, so a replica
/// started with the wrong login exits at once instead of failing every round while it looks
/// alive. Run after [`check_ready`](super::check_ready): the objects must exist.
pub async fn check_capability(
    client: &Client,
    schema: &SchemaName,
    role: &str,
) -> Result<(), StoreError> {
    let (objects, privileges): (Vec<&str>, Vec<&str>) = GRANTS
        .iter()
        .filter(|(grantee, _, _)| *grantee == role)
        .flat_map(|(_, object, privileges)| privileges.iter().map(move |p| (*object, *p)))
        .unzip();
    let missing: Vec<String> = client
        .query(
            MISSING_PRIVILEGES,
            &[&objects, &privileges, &schema.as_str()],
        )
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let user: String = client.query_one(CURRENT_USER, &[]).await?.get(0);
    Err(StoreError::PermissionDenied(format!(
        "login {user} lacks what {role} grants: {} (grant it {role})",
        missing.join(", ")
    )))
}

/// One difference between the live database and what docs/DESIGN.md §3.2 prescribes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VerifyFinding {
    #[cfg_attr(feature = "schema", schemars(extend("enum" = [
        "checksum", "pending", "unknown_migration", "missing_grant", "extra_grant",
        "schema_usage", "role"
    ])))]
    pub kind: &'static str,
    pub message: String,
}

// Live table and sequence privileges of the qlsched roles in the schema.
const LIVE_GRANTS: &str = "SELECT r.rolname::text AS role_name, c.relname::text AS table_name,
        a.privilege_type
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    CROSS JOIN LATERAL aclexplode(c.relacl) a
    JOIN pg_roles r ON r.oid = a.grantee
    WHERE n.nspname = $1 AND r.rolname = ANY($2) AND c.relkind IN ('r', 'p', 'S')";

// Role existence, login capability and schema usage.
const LIVE_ROLES: &str = "SELECT role_name, r.oid IS NOT NULL AS role_exists,
        coalesce(r.rolcanlogin, false) AS can_login,
        r.oid IS NOT NULL AND has_schema_privilege(r.oid, $1::text, 'USAGE') AS has_usage
    FROM unnest($2::text[]) AS role_name
    LEFT JOIN pg_roles r ON r.rolname = role_name";

/// `migrate verify`: checksums and the exact grant matrix. An empty result means all is well.
pub async fn verify(
    client: &Client,
    schema: &SchemaName,
) -> Result<Vec<VerifyFinding>, StoreError> {
    if !ledger_exists(client, schema).await? {
        return Ok(vec![VerifyFinding {
            kind: "pending",
            message: format!("schema {schema} has no migration ledger (run `qlsched migrate`)"),
        }]);
    }
    let ledger = read_ledger(client).await?;
    let mut findings: Vec<VerifyFinding> = divergence(&ledger)
        .into_iter()
        .map(|message| VerifyFinding {
            kind: if message.contains("checksum") {
                "checksum"
            } else {
                "unknown_migration"
            },
            message,
        })
        .collect();
    for m in MIGRATIONS
        .iter()
        .filter(|m| !ledger.contains_key(&m.version))
    {
        findings.push(VerifyFinding {
            kind: "pending",
            message: format!("{} is not applied", m.file_name()),
        });
    }

    let roles: Vec<String> = ROLES.iter().map(|r| (*r).to_owned()).collect();
    for row in client
        .query(LIVE_ROLES, &[&schema.as_str(), &roles])
        .await?
    {
        let (role, exists, can_login, usage): (String, bool, bool, bool) = (
            row.col("role_name")?,
            row.col("role_exists")?,
            row.col("can_login")?,
            row.col("has_usage")?,
        );
        if !exists {
            findings.push(VerifyFinding {
                kind: "role",
                message: format!("role {role} does not exist"),
            });
            continue;
        }
        if can_login {
            findings.push(VerifyFinding {
                kind: "role",
                message: format!(
                    "role {role} can log in; it must be a NOLOGIN group role granted to login users"
                ),
            });
        }
        let should_use = SCHEMA_USERS.contains(&role.as_str());
        if usage != should_use {
            findings.push(VerifyFinding {
                kind: "schema_usage",
                message: if should_use {
                    format!("role {role} lacks USAGE on schema {schema}")
                } else {
                    format!("role {role} has USAGE on schema {schema}, which it must not")
                },
            });
        }
    }

    let expected: BTreeSet<(String, String, String)> = GRANTS
        .iter()
        .flat_map(|(role, table, privileges)| {
            privileges
                .iter()
                .map(move |p| ((*role).to_owned(), (*table).to_owned(), (*p).to_owned()))
        })
        .collect();
    let live = client
        .query(LIVE_GRANTS, &[&schema.as_str(), &roles])
        .await?
        .iter()
        .map(|row| {
            Ok((
                row.col("role_name")?,
                row.col("table_name")?,
                row.col("privilege_type")?,
            ))
        })
        .collect::<Result<BTreeSet<(String, String, String)>, StoreError>>()?;
    for (role, table, privilege) in expected.difference(&live) {
        findings.push(VerifyFinding {
            kind: "missing_grant",
            message: format!("{role} lacks {privilege} on {schema}.{table}"),
        });
    }
    for (role, table, privilege) in live.difference(&expected) {
        findings.push(VerifyFinding {
            kind: "extra_grant",
            message: format!("{role} has {privilege} on {schema}.{table}, which it must not hold"),
        });
    }
    Ok(findings)
}

crate::statements::statements! {
    CURRENT_USER: Runtime,
    MISSING_PRIVILEGES: Runtime,
    LIVE_GRANTS: Owner | Observer,
    LIVE_ROLES: Owner | Observer,
}
