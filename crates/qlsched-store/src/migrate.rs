//! The embedded migration runner, modelled on sqlx's (docs/DESIGN.md §7): a ledger with a
//! sha256 checksum per file, each migration applied with its ledger row in one transaction, and
//! an advisory lock so that concurrent migrators of one schema wait instead of racing.
//!
//! Readiness ([`check_ready`]) is what `run` demands before it claims anything: every embedded
//! migration applied with an identical checksum, and nothing applied that this binary does not
//! know (a schema ahead of the binary is as unsafe as one behind it).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde::Serialize;
use tokio_postgres::Client;

use super::row::Named;
use super::{SchemaName, StoreError};
use qlsched_core::manifest::sha256_hex;

/// One migration file, embedded at build time.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
    /// The upgrade floor: the oldest build, named by its latest migration version, whose replicas
    /// may keep running beside this migration, admitting, once it is applied (the mixed window of
    /// a rolling upgrade). Its own version when only builds that carry it may; lower when older
    /// builds may, down to the oldest build its author vouches for. Recorded in the ledger when
    /// applied, so that a replica of an older build, which does not know the migration, can read
    /// it: such a replica admits only while every migration applied after its own latest has a
    /// floor at or below that latest (the gate in every claim statement, `claim::CLAIM_DUE`).
    pub upgrade_floor: i64,
}

/// The first line that marks a migration to be run outside a transaction, as sqlx marks one: a
/// migration that builds an index with `CREATE INDEX CONCURRENTLY` on a table replicas write to
/// (which cannot run inside a transaction block), so that no replica's write waits for the build.
/// The runner runs its statements one by one in `migrate`'s session, under the migrators' lock
/// held for the session, with the schema as `search_path` and the same lock timeout and retries,
/// drops an invalid index a failed attempt left before it tries again, and records the ledger
/// row once every statement ran ([`apply_outside_a_transaction`]). Its statements must each be
/// safe to run again (`IF NOT EXISTS`): an attempt that failed half-way is run again whole.
pub const OUTSIDE_A_TRANSACTION: &str = "-- no-transaction";

/// The latest migration of the builds that gate on the ledger's `previous_release_may_run` flag
/// alone (0.2.0, the first release that checked, and the builds before it): they stop at the
/// first newer migration whose flag is false. The flag `migrate` records for them says whether a
/// build of this schema may run beside the migration ([`Migration::previous_release_may_run`]).
pub const LAST_SCHEMA_GATED_BY_FLAG: i64 = 13;

impl Migration {
    /// The flag recorded beside the floor for the builds of [`LAST_SCHEMA_GATED_BY_FLAG`] and
    /// before, which read nothing else: for the migrations up to it, whether the build just
    /// before each may run beside it, as they were declared; for later ones, whether a build of
    /// that schema (0.2.0) may, so that it stops where the floor says it must.
    pub const fn previous_release_may_run(&self) -> bool {
        let newest_reader = if self.version - 1 < LAST_SCHEMA_GATED_BY_FLAG {
            self.version - 1
        } else {
            LAST_SCHEMA_GATED_BY_FLAG
        };
        self.upgrade_floor <= newest_reader
    }

    pub fn checksum(&self) -> String {
        sha256_hex(self.sql.as_bytes())
    }

    /// Whether the migration runs outside a transaction ([`OUTSIDE_A_TRANSACTION`], its first
    /// line), as `CREATE INDEX CONCURRENTLY` must.
    pub fn outside_a_transaction(&self) -> bool {
        self.sql.starts_with(OUTSIDE_A_TRANSACTION)
    }

    /// The statements of a migration run outside a transaction, one by one: the text split after
    /// each `;` that ends a line, comments and blank pieces left out. Such a migration holds
    /// plain statements only (no `$$` body, which could hold a `;` at a line's end): refused
    /// otherwise, naming the file, before anything runs.
    fn statements(&self) -> Result<Vec<String>, StoreError> {
        if self.sql.contains("$$") {
            return Err(StoreError::SchemaNotReady(format!(
                "migration {} runs outside a transaction and holds a $$ body: such a migration \
                 holds plain statements only (docs/DESIGN.md §3.1, the migration runner)",
                self.file_name()
            )));
        }
        let mut statements = Vec::new();
        let mut current = String::new();
        for line in self.sql.lines() {
            let code = line.trim();
            if code.is_empty() || code.starts_with("--") {
                continue;
            }
            current.push_str(line);
            current.push('\n');
            if code.ends_with(';') {
                statements.push(std::mem::take(&mut current));
            }
        }
        if !current.trim().is_empty() {
            statements.push(current);
        }
        Ok(statements)
    }

    /// The indexes a migration run outside a transaction builds, by the name after each
    /// `CREATE [UNIQUE] INDEX CONCURRENTLY [IF NOT EXISTS]`: those an attempt that failed may have
    /// left invalid.
    fn concurrent_indexes(&self) -> Vec<String> {
        let words: Vec<String> = self
            .sql
            .lines()
            .filter(|line| !line.trim_start().starts_with("--"))
            .flat_map(str::split_whitespace)
            .map(str::to_ascii_lowercase)
            .collect();
        let mut names = Vec::new();
        for (at, word) in words.iter().enumerate() {
            if word != "concurrently" || at == 0 || words[at - 1] != "index" {
                continue;
            }
            let mut rest = words[at + 1..].iter();
            let name = match rest.next().map(String::as_str) {
                Some("if") => rest.nth(2),
                other => other.map(|_| &words[at + 1]),
            };
            if let Some(name) = name.filter(|name| *name != "on") {
                names.push(name.trim_matches('"').to_owned());
            }
        }
        names
    }

    pub fn file_name(&self) -> String {
        format!("{:04}_{}.sql", self.version, self.name)
    }
}

/// Every migration this binary carries, in order. A test checks this list against the files in
/// `migrations/`, so a file cannot be added without being embedded.
///
/// The floors of 0001 to 0013 restate the flags they were declared with before floors existed:
/// a "no" is the migration's own version, a "yes" the latest migration of the release before it
/// (0.1's schema 6 for 0.2.0's 0007 to 0013; the build just before it for 0003 and 0006).
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "schedule_admission",
        sql: include_str!("../../../migrations/0001_schedule_admission.sql"),
        upgrade_floor: 1,
    },
    Migration {
        version: 2,
        name: "roles_and_grants",
        sql: include_str!("../../../migrations/0002_roles_and_grants.sql"),
        upgrade_floor: 2,
    },
    Migration {
        version: 3,
        name: "operator_read_models",
        sql: include_str!("../../../migrations/0003_operator_read_models.sql"),
        upgrade_floor: 2,
    },
    Migration {
        version: 4,
        name: "occurrence_accounting",
        sql: include_str!("../../../migrations/0004_occurrence_accounting.sql"),
        upgrade_floor: 4,
    },
    Migration {
        version: 5,
        name: "operator_control",
        sql: include_str!("../../../migrations/0005_operator_control.sql"),
        upgrade_floor: 5,
    },
    Migration {
        version: 6,
        name: "replica_registry",
        sql: include_str!("../../../migrations/0006_replica_registry.sql"),
        upgrade_floor: 5,
    },
    Migration {
        version: 7,
        name: "claimable_rows",
        sql: include_str!("../../../migrations/0007_claimable_rows.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 8,
        name: "definition_refusal",
        sql: include_str!("../../../migrations/0008_definition_refusal.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 9,
        name: "claim_churn",
        sql: include_str!("../../../migrations/0009_claim_churn.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 10,
        name: "parked_counts",
        sql: include_str!("../../../migrations/0010_parked_counts.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 11,
        name: "admission_errors",
        sql: include_str!("../../../migrations/0011_admission_errors.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 12,
        name: "run_retention",
        sql: include_str!("../../../migrations/0012_run_retention.sql"),
        // Adds a nullable column, a trigger on updates (a replica never updates a run), two
        // tables and grants: the previous release's admissions are untouched.
        upgrade_floor: 6,
    },
    Migration {
        version: 13,
        name: "replica_release",
        sql: include_str!("../../../migrations/0013_replica_release.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 14,
        name: "upgrade_floor",
        sql: include_str!("../../../migrations/0014_upgrade_floor.sql"),
        // A column, its comment and a check on the ledger: 0.2.0's replicas read the ledger
        // through to_jsonb and never write it, so they run on beside it.
        upgrade_floor: 13,
    },
    Migration {
        version: 15,
        name: "replica_minutes",
        sql: include_str!("../../../migrations/0015_replica_minutes.sql"),
        // A new table only this release's replicas write: the previous release (0.2.0, schema
        // 13) runs beside it, its admissions only missing from `top`'s trends.
        upgrade_floor: 13,
    },
    Migration {
        version: 16,
        name: "schedule_state",
        sql: include_str!("../../../migrations/0016_schedule_state.sql"),
        // Two new functions that no older build calls: 0.2.0's replicas, which write their own
        // CASEs, run on beside it.
        upgrade_floor: 13,
    },
    Migration {
        version: 17,
        name: "run_event_payloads",
        sql: include_str!("../../../migrations/0017_run_event_payloads.sql"),
        // Two new functions that no older build calls: 0.2.0's replicas run on beside it, writing
        // their events' payloads in the shapes they always did, which every reader reads alike.
        upgrade_floor: 13,
    },
];

/// The schema version a fully migrated database reports.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

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

/// One row of `migrate status`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MigrationStatus {
    pub version: i64,
    pub name: String,
    /// unknown: applied, but not in this binary.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["applied", "pending", "checksum_mismatch", "unknown"])))]
    pub state: &'static str,
    /// SHA-256 of the migration's text, in hex.
    pub checksum: String,
    pub applied_at_ms: Option<i64>,
    pub execution_ms: Option<i64>,
    /// Whether replicas of the release before this migration may keep running beside it once it
    /// is applied (the operator's guide, "Upgrading"): this binary's answer, or for an unknown
    /// migration the ledger's (null when it does not say).
    pub previous_release_may_run: Option<bool>,
    /// The oldest build, named by its latest migration version, whose replicas may keep running
    /// beside this migration once it is applied (the operator's guide, "Upgrading"): this
    /// binary's answer, or for an unknown migration the ledger's (null when it does not say).
    pub upgrade_floor: Option<i64>,
    /// For a pending migration: the running replicas (registered, not stopped, not stale) built
    /// for a schema below its floor, or of a release that does not say which when its floor is
    /// above 0.1's schema, that would have to stop for it. Empty otherwise.
    pub replicas_to_stop: Vec<RunningReplica>,
}

/// A running replica as `migrate status` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunningReplica {
    pub owner: String,
    pub version: String,
    /// The schema version it was built for; null for a release before 0.2.0, which does not say.
    pub schema_version: Option<i64>,
}

/// What `migrate up` did.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MigrateReport {
    pub schema: String,
    pub applied: Vec<MigrationStatus>,
    pub version: i64,
    /// Group roles this run created, and those it found on the server and granted to as they
    /// were (roles belong to the server, not the database: another schema's migrate may have
    /// made them, or someone by hand). Both empty when the roles' migration did not run now.
    pub roles_created: Vec<String>,
    /// As roles_created.
    pub roles_reused: Vec<String>,
}

// Which server process runs this transaction, and the schema its unqualified names resolve to.
// (The process as `connect::SERVER_PROCESS` gives it.)
const IN_SCHEMA: &str = "SELECT
    pg_backend_pid() || '@' || extract(epoch FROM pg_postmaster_start_time()) AS server_process,
    current_schema()::text AS current_schema";

// Which of the group roles $1 exist on the server.
const EXISTING_ROLES: &str =
    "SELECT array_agg(rolname ORDER BY rolname) FROM pg_roles WHERE rolname = ANY($1)";

// What `migrate` needs of its login, asked before it creates anything: to create schema $1 when
// it is missing (CREATE on the database), to act as its owner when it exists (every migration
// creates and alters tables in it, which only the owner may: pg_has_role with USAGE is "holds the
// owner's privileges", true for the owner, a member that inherits it, and a superuser), and to
// create the group roles when some are missing (CREATEROLE).
const OWNER_RIGHTS: &str = "SELECT current_user::text AS login,
        current_database()::text AS database,
        n.oid IS NOT NULL AS schema_exists,
        pg_get_userbyid(n.nspowner)::text AS schema_owner,
        coalesce(pg_has_role(n.nspowner, 'USAGE'), false) AS acts_as_owner,
        has_database_privilege(current_database(), 'CREATE') AS may_create_schema,
        (SELECT rolcreaterole OR rolsuper FROM pg_roles WHERE rolname = current_user)
            AS may_create_roles,
        (SELECT count(*) FROM pg_roles WHERE rolname = ANY($2)) < cardinality($2) AS roles_missing
    FROM (SELECT 1) AS one LEFT JOIN pg_namespace n ON n.nspname = $1";

/// The rights `migrate`'s login holds, as [`OWNER_RIGHTS`] reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRights {
    pub login: String,
    pub database: String,
    /// The schema's owner, when the schema exists.
    pub schema_owner: Option<String>,
    pub acts_as_owner: bool,
    pub may_create_schema: bool,
    pub may_create_roles: bool,
    pub roles_missing: bool,
}

impl OwnerRights {
    fn read(row: &tokio_postgres::Row) -> Result<Self, StoreError> {
        Ok(Self {
            login: row.col("login")?,
            database: row.col("database")?,
            schema_owner: row.col("schema_owner")?,
            acts_as_owner: row.col("acts_as_owner")?,
            may_create_schema: row.col("may_create_schema")?,
            may_create_roles: row
                .col::<Option<bool>>("may_create_roles")?
                .unwrap_or(false),
            roles_missing: row.col("roles_missing")?,
        })
    }
}

/// Refuses ([`StoreError::PermissionDenied`], exit 77) a login that lacks a right of the
/// schema's owner, naming the right and the SQL that grants it, before anything is created: a
/// `qlsched_admin` login publishes and operates, but only the owner migrates.
pub fn check_owner_rights(schema: &SchemaName, rights: &OwnerRights) -> Result<(), StoreError> {
    let OwnerRights {
        login, database, ..
    } = rights;
    let refusal = match &rights.schema_owner {
        None if !rights.may_create_schema => Some(format!(
            "migrate needs the schema owner's rights, and login {login} lacks CREATE on database \
             {database}, which creating schema {schema} takes (as a superuser: GRANT CREATE ON \
             DATABASE {database} TO {login}; or run migrate as the login that owns the schema; \
             qlsched_admin is not enough)"
        )),
        Some(owner) if !rights.acts_as_owner => Some(format!(
            "migrate needs the schema owner's rights, and login {login} does not own schema \
             {schema}: {owner} does (run migrate as {owner}, or as a superuser: GRANT {owner} TO \
             {login}; qlsched_admin is not enough)"
        )),
        _ if rights.roles_missing && !rights.may_create_roles => Some(format!(
            "migrate creates the qlsched group roles the server lacks, and login {login} lacks \
             CREATEROLE (as a superuser: ALTER ROLE {login} CREATEROLE, or create the roles \
             once as a superuser with `qlsched migrate`)"
        )),
        _ => None,
    };
    match refusal {
        Some(message) => Err(StoreError::PermissionDenied(message)),
        None => Ok(()),
    }
}

/// Key of the transaction advisory lock that serialises migrators of one schema: each of
/// `migrate`'s transactions takes it first, so two migrators never apply one migration twice, and
/// its end releases it, so nothing of it outlives the transaction on a server connection.
const LOCK_NAMESPACE: &str = "qlsched.migrate";
const LOCK: &str = "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))";

/// How long one migration's statements wait for a table lock (a long transaction, a paged
/// `inspect`, VACUUM FULL) before the migration rolls back and tries again: while a migration's
/// ACCESS EXCLUSIVE request waits, every claim of the replicas queues behind it.
const MIGRATION_LOCK_TIMEOUT: &str = "5s";

/// How many times a migration that ran out of [`MIGRATION_LOCK_TIMEOUT`] is tried, one
/// [`MIGRATION_RETRY_PAUSE`] apart, before `migrate` gives up (exit 75).
const MIGRATION_ATTEMPTS: u32 = 6;
const MIGRATION_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_secs(2);

// The ledger; created before the first migration so that migration 0002 can grant on it.
const CREATE_LEDGER: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version       bigint PRIMARY KEY,
    name          text NOT NULL,
    checksum      text NOT NULL,
    applied_at_ms bigint NOT NULL,
    execution_ms  bigint NOT NULL
)";

// Whether replicas of the previous release may run beside each migration
// (`Migration::previous_release_may_run`), and the oldest build that may (its upgrade floor), in
// the ledger, where an older build that does not know a migration can read them. Added to ledgers
// made before them; NULL for rows recorded before, which `migrate` fills in from what this build
// knows. The flag is still written for the builds that read nothing else (0.2.0).
const ADD_LEDGER_FLAG: &str =
    "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS previous_release_may_run boolean";
const FILL_LEDGER_FLAG: &str = "UPDATE schema_migrations m SET previous_release_may_run = x.may_run
    FROM unnest($1::int8[], $2::bool[]) AS x(version, may_run)
    WHERE m.version = x.version AND m.previous_release_may_run IS NULL";
const ADD_LEDGER_FLOOR: &str =
    "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS upgrade_floor bigint";
const FILL_LEDGER_FLOOR: &str = "UPDATE schema_migrations m SET upgrade_floor = x.floor
    FROM unnest($1::int8[], $2::int8[]) AS x(version, floor)
    WHERE m.version = x.version AND m.upgrade_floor IS NULL";

// Is the ledger there at all? (A missing one means "never migrated", not an error.)
const LEDGER_EXISTS: &str =
    "SELECT to_regclass(format('%I.schema_migrations', $1::text)) IS NOT NULL";

// The applied migrations, in order.
// The flag and the floor read through to_jsonb, so that a ledger `migrate` has not yet given the
// columns reads as NULL rather than failing.
const READ_LEDGER: &str = "SELECT version, name, checksum, applied_at_ms, execution_ms,
        (to_jsonb(m) ->> 'previous_release_may_run')::boolean AS previous_release_may_run,
        (to_jsonb(m) ->> 'upgrade_floor')::bigint AS upgrade_floor
    FROM schema_migrations m ORDER BY version";

// The migration applied after $1 (this build's latest) that holds this build out, if any: the
// one with the highest floor above $1 (a NULL floor reads as the version itself), the earliest
// of those. The claim statements carry the gate itself (`claim::CLAIM_DUE`); this read only says
// why a round claimed nothing, beside the claim. An index probe, no row when none.
pub(crate) const GATE_CLOSED_BY: &str = "SELECT version, name,
        coalesce(upgrade_floor, version) AS upgrade_floor
    FROM schema_migrations m
    WHERE version > $1 AND coalesce(upgrade_floor, version) > $1
    ORDER BY coalesce(upgrade_floor, version) DESC, version LIMIT 1";

// Record one applied migration, inside the transaction that applied it.
const RECORD_MIGRATION: &str = "INSERT INTO schema_migrations
    (version, name, checksum, applied_at_ms, execution_ms, previous_release_may_run,
     upgrade_floor)
    VALUES ($1, $2, $3, now_ms(), $4, $5, $6)
    RETURNING applied_at_ms";

/// What a statement of `migration` that failed with `error` means: a lock wait past the lock
/// timeout is `Ok` with the server's words (the caller tries the migration again), anything else
/// the error to report, with the server's SQLSTATE, detail and hint kept (they say what to fix).
fn failed(migration: &Migration, error: tokio_postgres::Error) -> Result<String, StoreError> {
    if error.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) {
        return Ok(super::error::describe_server_error(&error));
    }
    Err(match StoreError::from_db(error) {
        StoreError::Database(db) => StoreError::SchemaNotReady(format!(
            "migration {} failed: {}",
            migration.file_name(),
            super::error::describe_server_error(&db)
        )),
        other => other,
    })
}

/// Applies every pending migration, each in a transaction of its own that takes the migrators'
/// lock, sets the schema's `search_path` for itself (`SET LOCAL`) and checks, in the same
/// transaction, that it runs where `migrate`'s session does and resolves names in the schema:
/// whatever the session's `search_path`, nothing is created elsewhere, and nothing set outlives
/// the transaction. Safe to run concurrently: the lock makes the second migrator wait, then find
/// each migration applied.
pub async fn migrate_up(
    client: &mut Client,
    schema: &SchemaName,
) -> Result<MigrateReport, StoreError> {
    let home = crate::connect::server_process(client).await?;
    // The ledger (created before the first migration, so that migration 0002 can grant on it),
    // and what is known before any migration.
    let transaction = begin(client, schema, &home).await?;
    transaction.batch_execute(CREATE_LEDGER).await?;
    transaction.batch_execute(ADD_LEDGER_FLAG).await?;
    transaction.batch_execute(ADD_LEDGER_FLOOR).await?;
    let (versions, flags): (Vec<i64>, Vec<bool>) = MIGRATIONS
        .iter()
        .map(|m| (m.version, m.previous_release_may_run()))
        .unzip();
    transaction
        .execute(FILL_LEDGER_FLAG, &[&versions, &flags])
        .await?;
    let floors: Vec<i64> = MIGRATIONS.iter().map(|m| m.upgrade_floor).collect();
    transaction
        .execute(FILL_LEDGER_FLOOR, &[&versions, &floors])
        .await?;
    let roles: Vec<String> = ROLES.iter().map(|r| (*r).to_owned()).collect();
    let roles_before: Vec<String> = transaction
        .query_one(EXISTING_ROLES, &[&roles])
        .await?
        .get::<_, Option<Vec<String>>>(0)
        .unwrap_or_default();
    let ledger = read_ledger(&transaction).await?;
    transaction.commit().await?;
    refuse_divergence(&ledger)?;
    let mut applied = Vec::new();
    for migration in MIGRATIONS
        .iter()
        .filter(|m| !ledger.contains_key(&m.version))
    {
        if let Some(status) = apply_with_retries(client, schema, &home, migration).await? {
            applied.push(status);
        }
    }
    // The roles' migration grants to whatever roles it finds: say which it made and which it
    // took as they were, so that a role made by hand (with LOGIN, say) is not a surprise.
    let (roles_created, roles_reused) = if applied.iter().any(|m| m.name == "roles_and_grants") {
        roles
            .iter()
            .cloned()
            .partition(|role| !roles_before.contains(role))
    } else {
        (Vec::new(), Vec::new())
    };
    Ok(MigrateReport {
        schema: schema.to_string(),
        applied,
        roles_created,
        roles_reused,
        version: latest_version(),
    })
}

/// One of `migrate`'s transactions, begun: read committed and read-write whatever the database's
/// or the role's defaults, the migrators' lock taken, the schema made if missing and set as the
/// transaction's `search_path`, JIT off, table locks waited for at most
/// [`MIGRATION_LOCK_TIMEOUT`]; then checked to run on `home`, the server process of `migrate`'s
/// session (a pooler in transaction mode hands a transaction any server connection: refused,
/// exit 78), and to resolve names in the schema.
async fn begin<'c>(
    client: &'c mut Client,
    schema: &SchemaName,
    home: &str,
) -> Result<tokio_postgres::Transaction<'c>, StoreError> {
    let transaction = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
        .read_only(false)
        .start()
        .await?;
    transaction
        .execute(LOCK, &[&LOCK_NAMESPACE, &schema.as_str()])
        .await?;
    // The login's rights as the schema's owner, asked before anything is created: a refusal
    // names the right that is missing (exit 77) instead of the server's bare "permission denied".
    let roles: Vec<String> = ROLES.iter().map(|r| (*r).to_owned()).collect();
    let rights = transaction
        .query_one(OWNER_RIGHTS, &[&schema.as_str(), &roles])
        .await?;
    check_owner_rights(schema, &OwnerRights::read(&rights)?)?;
    if !rights.col::<bool>("schema_exists")? {
        // Only when missing: CREATE SCHEMA checks CREATE on the database even with IF NOT
        // EXISTS, a right the owner of an existing schema need not have.
        transaction
            .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", schema.quoted()))
            .await?;
    }
    transaction
        .batch_execute(&format!(
            "SET LOCAL search_path TO {schema}; \
             SET LOCAL jit TO off; SET LOCAL lock_timeout TO '{MIGRATION_LOCK_TIMEOUT}'",
            schema = schema.quoted()
        ))
        .await?;
    let session = transaction.query_one(IN_SCHEMA, &[]).await?;
    let process: String = session.col("server_process")?;
    if process != home {
        return Err(StoreError::Config(
            crate::connect::transaction_pooler_found(&format!(
                "migrate's session ran on server process {home}, one of its transactions on \
                 {process}"
            )),
        ));
    }
    let resolves_in: Option<String> = session.col("current_schema")?;
    if resolves_in.as_deref() != Some(schema.as_str()) {
        return Err(StoreError::Config(format!(
            "migrate's transaction resolves names in {resolves_in:?}, not in schema {schema}, \
             after setting its search_path; nothing was migrated"
        )));
    }
    Ok(transaction)
}

/// [`apply`], tried again while its statements run out of [`MIGRATION_LOCK_TIMEOUT`] (each try
/// rolled back whole), at most [`MIGRATION_ATTEMPTS`] times; then a time-out (exit 75).
async fn apply_with_retries(
    client: &mut Client,
    schema: &SchemaName,
    home: &str,
    migration: &Migration,
) -> Result<Option<MigrationStatus>, StoreError> {
    let mut attempt = 1;
    loop {
        let applied = if migration.outside_a_transaction() {
            apply_outside_a_transaction(client, schema, home, migration).await?
        } else {
            apply(client, schema, home, migration).await?
        };
        match applied {
            Ok(status) => return Ok(status),
            Err(waited) if attempt < MIGRATION_ATTEMPTS => {
                tracing::warn!(migration = %migration.file_name(), attempt, %waited,
                    "a migration waited {MIGRATION_LOCK_TIMEOUT} for a table lock and was \
                     rolled back; trying again");
                tokio::time::sleep(MIGRATION_RETRY_PAUSE).await;
                attempt += 1;
            }
            Err(waited) => {
                return Err(StoreError::TimedOut(format!(
                    "migration {} waited for a table lock {attempt} times, \
                     {MIGRATION_LOCK_TIMEOUT} each, and was rolled back each time: {waited}; \
                     nothing of it was applied (find the session holding the lock in \
                     pg_locks, then run `qlsched migrate` again)",
                    migration.file_name()
                )));
            }
        }
    }
}

/// Applies `migration` and records it in the ledger, in one transaction ([`begin`]): `None` when
/// another migrator applied it first, `Err` with the server's message when a table lock was not
/// had within [`MIGRATION_LOCK_TIMEOUT`] (rolled back, nothing applied).
async fn apply(
    client: &mut Client,
    schema: &SchemaName,
    home: &str,
    migration: &Migration,
) -> Result<Result<Option<MigrationStatus>, String>, StoreError> {
    let transaction = begin(client, schema, home).await?;
    if read_ledger(&transaction)
        .await?
        .contains_key(&migration.version)
    {
        transaction.commit().await?;
        return Ok(Ok(None));
    }
    let started = Instant::now();
    if let Err(error) = transaction.batch_execute(migration.sql).await {
        return failed(migration, error).map(Err);
    }
    let execution_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    let status = record(&transaction, migration, execution_ms).await?;
    transaction.commit().await?;
    Ok(Ok(Some(status)))
}

// The migrators' lock of LOCK, held by `migrate`'s session across the statements of a migration
// run outside a transaction, and let go after them. The transaction-level LOCK that `begin`
// takes in the same session is granted at once: advisory locks are re-entrant in one session.
const SESSION_LOCK: &str = "SELECT pg_advisory_lock(hashtext($1), hashtext($2))";
const SESSION_UNLOCK: &str = "SELECT pg_advisory_unlock(hashtext($1), hashtext($2))";

// The session's search_path, lock timeout and JIT setting, to be put back after a migration run
// outside a transaction; and the statement that sets them, for the session ($1, $2, $3).
const SESSION_SETTINGS: &str = "SELECT current_setting('search_path') AS search_path,
        current_setting('lock_timeout') AS lock_timeout, current_setting('jit') AS jit";
const SET_SESSION_SETTINGS: &str = "SELECT set_config('search_path', $1, false),
        set_config('lock_timeout', $2, false), set_config('jit', $3, false)";

// The indexes of schema $1 named in $2 that a failed `CREATE INDEX CONCURRENTLY` left invalid,
// with the statement that drops each (concurrently, its names quoted by the server).
const INVALID_INDEXES: &str = "SELECT format('DROP INDEX CONCURRENTLY IF EXISTS %I.%I', n.nspname,
        c.relname) AS drop_statement
    FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname = ANY($2) AND NOT i.indisvalid
    ORDER BY c.relname";

/// A migration marked [`OUTSIDE_A_TRANSACTION`], applied as [`apply`] applies one (the same
/// answers: `None` when another migrator applied it first, `Err` with the server's message when a
/// statement ran out of [`MIGRATION_LOCK_TIMEOUT`]), its statements run one by one in the
/// session: under the migrators' lock held for the session, after the checks of [`begin`], with
/// the schema as `search_path` and the lock timeout set for the session and reset after, every
/// invalid index it builds (left by an attempt that failed) dropped first; then its ledger row
/// recorded in a transaction of [`begin`]'s. A statement that failed leaves what the statements
/// before it did: each must be safe to run again.
async fn apply_outside_a_transaction(
    client: &mut Client,
    schema: &SchemaName,
    home: &str,
    migration: &Migration,
) -> Result<Result<Option<MigrationStatus>, String>, StoreError> {
    let statements = migration.statements()?;
    let before = client.query_one(SESSION_SETTINGS, &[]).await?;
    let before: [String; 3] = [
        before.col("search_path")?,
        before.col("lock_timeout")?,
        before.col("jit")?,
    ];
    client
        .execute(SESSION_LOCK, &[&LOCK_NAMESPACE, &schema.as_str()])
        .await?;
    let applied = run_outside_a_transaction(client, schema, home, migration, &statements).await;
    // Whatever happened, nothing of the migration's outlives it in the session.
    let restored = client
        .query_one(SET_SESSION_SETTINGS, &[&before[0], &before[1], &before[2]])
        .await;
    let unlocked = client
        .execute(SESSION_UNLOCK, &[&LOCK_NAMESPACE, &schema.as_str()])
        .await;
    let applied = applied?;
    restored?;
    unlocked?;
    Ok(applied)
}

async fn run_outside_a_transaction(
    client: &mut Client,
    schema: &SchemaName,
    home: &str,
    migration: &Migration,
    statements: &[String],
) -> Result<Result<Option<MigrationStatus>, String>, StoreError> {
    let transaction = begin(client, schema, home).await?;
    let applied = read_ledger(&transaction)
        .await?
        .contains_key(&migration.version);
    transaction.commit().await?;
    if applied {
        return Ok(Ok(None));
    }
    client
        .query_one(
            SET_SESSION_SETTINGS,
            &[&schema.quoted(), &MIGRATION_LOCK_TIMEOUT, &"off"],
        )
        .await?;
    let started = Instant::now();
    let invalid: Vec<String> = client
        .query(
            INVALID_INDEXES,
            &[&schema.as_str(), &migration.concurrent_indexes()],
        )
        .await?
        .iter()
        .map(|row| row.col("drop_statement"))
        .collect::<Result<_, _>>()?;
    for statement in invalid.iter().chain(statements) {
        if let Err(error) = client.batch_execute(statement).await {
            return failed(migration, error).map(Err);
        }
    }
    let execution_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    let transaction = begin(client, schema, home).await?;
    if read_ledger(&transaction)
        .await?
        .contains_key(&migration.version)
    {
        transaction.commit().await?;
        return Ok(Ok(None));
    }
    let status = record(&transaction, migration, execution_ms).await?;
    transaction.commit().await?;
    Ok(Ok(Some(status)))
}

/// Records `migration` in the ledger, inside the transaction that applied it (or, for one run
/// outside a transaction, the one after its statements), and says so as `migrate` reports it.
async fn record(
    transaction: &tokio_postgres::Transaction<'_>,
    migration: &Migration,
    execution_ms: i64,
) -> Result<MigrationStatus, StoreError> {
    let applied_at_ms: i64 = transaction
        .query_one(
            RECORD_MIGRATION,
            &[
                &migration.version,
                &migration.name,
                &migration.checksum(),
                &execution_ms,
                &migration.previous_release_may_run(),
                &migration.upgrade_floor,
            ],
        )
        .await?
        .get(0);
    Ok(MigrationStatus {
        version: migration.version,
        name: migration.name.to_owned(),
        state: "applied",
        checksum: migration.checksum(),
        applied_at_ms: Some(applied_at_ms),
        execution_ms: Some(execution_ms),
        previous_release_may_run: Some(migration.previous_release_may_run()),
        upgrade_floor: Some(migration.upgrade_floor),
        replicas_to_stop: Vec::new(),
    })
}

/// Applies one migration as `migrate` applies each pending one (in a transaction of its own, or
/// outside one when marked so), with the same lock timeout and retries: for the tests of the
/// runner, with a migration of their own. `None` when it was applied already.
#[doc(hidden)]
pub async fn apply_one(
    client: &mut Client,
    schema: &SchemaName,
    migration: &Migration,
) -> Result<Option<MigrationStatus>, StoreError> {
    let home = crate::connect::server_process(client).await?;
    apply_with_retries(client, schema, &home, migration).await
}

#[derive(Debug, Clone)]
struct LedgerRow {
    name: String,
    checksum: String,
    applied_at_ms: i64,
    execution_ms: i64,
    /// As recorded by the build that applied it; `None` before the ledger had the column.
    previous_release_may_run: Option<bool>,
    /// As recorded by the build that applied it, or filled by a later `migrate`; `None` before
    /// the ledger had the column.
    upgrade_floor: Option<i64>,
}

async fn read_ledger(
    client: &impl tokio_postgres::GenericClient,
) -> Result<BTreeMap<i64, LedgerRow>, StoreError> {
    let rows = client.query(READ_LEDGER, &[]).await?;
    rows.iter()
        .map(|row| {
            Ok((
                row.col::<i64>("version")?,
                LedgerRow {
                    name: row.col("name")?,
                    checksum: row.col("checksum")?,
                    applied_at_ms: row.col("applied_at_ms")?,
                    execution_ms: row.col("execution_ms")?,
                    previous_release_may_run: row.col("previous_release_may_run")?,
                    upgrade_floor: row.col("upgrade_floor")?,
                },
            ))
        })
        .collect()
}

/// Refuses a ledger that disagrees with this binary: a changed file or an unknown version.
fn refuse_divergence(ledger: &BTreeMap<i64, LedgerRow>) -> Result<(), StoreError> {
    let problems = divergence(ledger);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StoreError::SchemaNotReady(problems.join("; ")))
    }
}

fn divergence(ledger: &BTreeMap<i64, LedgerRow>) -> Vec<String> {
    let mut problems = Vec::new();
    for (version, row) in ledger {
        match MIGRATIONS.iter().find(|m| m.version == *version) {
            // A newer release's migration whose floor lets this build keep running beside it.
            None if row
                .upgrade_floor
                .is_some_and(|floor| floor <= latest_version()) => {}
            None => problems.push(format!(
                "migration {version} ({}) is applied but unknown to this binary, and {} (schema \
                 ahead: upgrade qlsched)",
                row.name,
                floor_says(*version, row.upgrade_floor)
            )),
            Some(migration) if migration.checksum() != row.checksum => problems.push(format!(
                "migration {} was applied with checksum {} but this binary carries {} (the file \
                 changed after it was applied)",
                migration.file_name(),
                short(&row.checksum),
                short(&migration.checksum())
            )),
            Some(_) => {}
        }
    }
    problems
}

/// What a floor says of the builds before it, as the messages put it.
fn floor_says(version: i64, floor: Option<i64>) -> String {
    match floor {
        Some(floor) => format!(
            "builds before schema {floor} may not run beside it (this one is of schema {})",
            latest_version()
        ),
        None => format!(
            "it records no upgrade floor: only builds of schema {version} or later may run beside it"
        ),
    }
}

/// The migration applied after this build's latest that holds it out (the highest floor above
/// this build's latest): what the claim statements' gate finds, as [`GATE_CLOSED_BY`] reads it to
/// say why a round admits nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateClosedBy {
    pub version: i64,
    pub name: String,
    /// The oldest build that may run beside it, by its latest migration.
    pub upgrade_floor: i64,
}

impl GateClosedBy {
    /// [`GATE_CLOSED_BY`]'s answer: its one row, if any.
    pub(crate) fn read(rows: &[tokio_postgres::Row]) -> Result<Option<Self>, StoreError> {
        rows.first()
            .map(|row| {
                Ok(GateClosedBy {
                    version: row.col("version")?,
                    name: row.col("name")?,
                    upgrade_floor: row.col("upgrade_floor")?,
                })
            })
            .transpose()
    }
}

/// The migration that closes the upgrade gate for this build, if one does ([`GATE_CLOSED_BY`]).
pub async fn gate_closed_by(
    client: &impl tokio_postgres::GenericClient,
) -> Result<Option<GateClosedBy>, StoreError> {
    let rows = client.query(GATE_CLOSED_BY, &[&latest_version()]).await?;
    GateClosedBy::read(&rows)
}

impl std::fmt::Display for GateClosedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "migration {} ({}) was applied, and this build may not run beside it: its upgrade \
             floor is schema {}, this build is of schema {}",
            self.version,
            self.name,
            self.upgrade_floor,
            latest_version()
        )
    }
}

// Is the replica registry there (migration 0006)? Asked before RUNNING_REPLICAS, which a schema
// migrated by an early release could not answer.
const REGISTRY_EXISTS: &str = "SELECT to_regclass(format('%I.replicas', $1::text)) IS NOT NULL";

// The replicas running now: registered, not stopped, not stale (a heartbeat within their lease
// plus their cadence: `replicas::LIST`'s rule; a stale one holds no valid claim). The schema
// version read through to_jsonb, so that a registry without the column (migration 0013 pending,
// just when `migrate status` is asked) reads as NULL instead of failing.
const RUNNING_REPLICAS: &str = "SELECT owner, version,
        (to_jsonb(r) ->> 'schema_version')::bigint AS schema_version
    FROM replicas r
    WHERE state <> 'stopped' AND heartbeat_at_ms >= now_ms() - lease_ms - cadence_ms
    ORDER BY owner";

async fn running_replicas(
    client: &Client,
    schema: &SchemaName,
) -> Result<Vec<RunningReplica>, StoreError> {
    let exists: bool = client
        .query_one(REGISTRY_EXISTS, &[&schema.as_str()])
        .await?
        .get(0);
    if !exists {
        return Ok(Vec::new());
    }
    client
        .query(RUNNING_REPLICAS, &[])
        .await?
        .iter()
        .map(|row| {
            Ok(RunningReplica {
                owner: row.col("owner")?,
                version: row.col("version")?,
                schema_version: row.col("schema_version")?,
            })
        })
        .collect()
}

/// The latest schema a replica that does not say which schema it was built for can be of: such
/// a replica is of a release before 0.2.0, and 0.1's schema is 6.
const UNNAMED_SCHEMA_AT_MOST: i64 = 6;

/// The replicas of `running` that `migration` would stop, were it applied: those built for a
/// schema below its floor, and those of a release that does not say (the releases before 0.2.0,
/// which do not even check: their operator stops them by hand) when its floor is above the
/// schema they can be of.
fn to_stop(migration: &Migration, running: &[RunningReplica]) -> Vec<RunningReplica> {
    running
        .iter()
        .filter(|r| match r.schema_version {
            Some(built) => built < migration.upgrade_floor,
            None => migration.upgrade_floor > UNNAMED_SCHEMA_AT_MOST,
        })
        .cloned()
        .collect()
}

/// `migrate status`: every known and every applied migration, and for each pending one the
/// running replicas it would stop.
pub async fn status(
    client: &Client,
    schema: &SchemaName,
) -> Result<Vec<MigrationStatus>, StoreError> {
    let ledger = if ledger_exists(client, schema).await? {
        read_ledger(client).await?
    } else {
        BTreeMap::new()
    };
    let running = if MIGRATIONS.iter().any(|m| !ledger.contains_key(&m.version)) {
        running_replicas(client, schema).await?
    } else {
        Vec::new()
    };
    let mut out: Vec<MigrationStatus> = MIGRATIONS
        .iter()
        .map(|m| {
            let row = ledger.get(&m.version);
            MigrationStatus {
                version: m.version,
                name: m.name.to_owned(),
                state: match row {
                    None => "pending",
                    Some(row) if row.checksum != m.checksum() => "checksum_mismatch",
                    Some(_) => "applied",
                },
                checksum: m.checksum(),
                applied_at_ms: row.map(|r| r.applied_at_ms),
                execution_ms: row.map(|r| r.execution_ms),
                previous_release_may_run: Some(m.previous_release_may_run()),
                upgrade_floor: Some(m.upgrade_floor),
                replicas_to_stop: match row {
                    None => to_stop(m, &running),
                    Some(_) => Vec::new(),
                },
            }
        })
        .collect();
    for (version, row) in ledger
        .iter()
        .filter(|(v, _)| !MIGRATIONS.iter().any(|m| m.version == **v))
    {
        out.push(MigrationStatus {
            version: *version,
            name: row.name.clone(),
            state: "unknown",
            checksum: row.checksum.clone(),
            applied_at_ms: Some(row.applied_at_ms),
            execution_ms: Some(row.execution_ms),
            previous_release_may_run: row.previous_release_may_run,
            upgrade_floor: row.upgrade_floor,
            replicas_to_stop: Vec::new(),
        });
    }
    Ok(out)
}

async fn ledger_exists(client: &Client, schema: &SchemaName) -> Result<bool, StoreError> {
    Ok(client
        .query_one(LEDGER_EXISTS, &[&schema.as_str()])
        .await?
        .get(0))
}

/// Refuses a schema without a migration ledger (78): the reads' precondition. Weaker than
/// [`check_ready`] on purpose: during a rolling upgrade or a checksum incident the tables are
/// still there to be inspected.
pub async fn require_ledger(client: &Client, schema: &SchemaName) -> Result<(), StoreError> {
    if ledger_exists(client, schema).await? {
        Ok(())
    } else {
        Err(StoreError::SchemaNotReady(format!(
            "schema {schema} has no migration ledger (run `qlsched migrate`)"
        )))
    }
}

/// The migrations this binary carries that the ledger lacks, as file names: what makes a schema
/// behind this binary.
fn pending(ledger: &BTreeMap<i64, LedgerRow>) -> Vec<String> {
    MIGRATIONS
        .iter()
        .filter(|m| !ledger.contains_key(&m.version))
        .map(Migration::file_name)
        .collect()
}

fn behind(schema: &SchemaName, pending: &[String]) -> String {
    format!(
        "schema {schema} is behind this binary: {} pending (run `qlsched migrate`)",
        pending.join(", ")
    )
}

/// Refuses ([`StoreError::SchemaNotReady`], exit 78) a schema with no ledger or whose ledger is
/// behind this binary, before a reader's first query, which would otherwise fail on a column or
/// table a pending migration adds (exit 1, naming the column). Two small reads. A schema ahead of
/// the binary (a newer release migrated it) is let through: its reads are what it was.
pub async fn check_not_behind(client: &Client, schema: &SchemaName) -> Result<(), StoreError> {
    require_ledger(client, schema).await?;
    let pending = pending(&read_ledger(client).await?);
    if pending.is_empty() {
        Ok(())
    } else {
        Err(StoreError::SchemaNotReady(behind(schema, &pending)))
    }
}

/// Schema readiness, checked by `run` before it claims anything: the capability (every migration
/// this binary needs) present, with identical checksums, and nothing unknown applied.
pub async fn check_ready(client: &Client, schema: &SchemaName) -> Result<(), StoreError> {
    require_ledger(client, schema).await?;
    let ledger = read_ledger(client).await?;
    let mut problems = divergence(&ledger);
    let pending = pending(&ledger);
    if !pending.is_empty() {
        problems.push(behind(schema, &pending));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StoreError::SchemaNotReady(problems.join("; ")))
    }
}

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
/// alive. Run after [`check_ready`]: the objects must exist.
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

fn short(checksum: &str) -> &str {
    checksum.get(..12).unwrap_or(checksum)
}

super::statements::statements! {
    LOCK: Owner,
    CREATE_LEDGER: Owner,
    ADD_LEDGER_FLAG: Owner,
    FILL_LEDGER_FLAG: Owner,
    GATE_CLOSED_BY: Runtime | Admin | Observer,
    ADD_LEDGER_FLOOR: Owner,
    FILL_LEDGER_FLOOR: Owner,
    LEDGER_EXISTS: Owner | Admin | Runtime | Observer,
    READ_LEDGER: Owner | Admin | Runtime | Observer,
    RECORD_MIGRATION: Owner,
    OWNER_RIGHTS: Owner,
    REGISTRY_EXISTS: Owner | Admin | Observer,
    RUNNING_REPLICAS: Owner | Admin | Observer,
    CURRENT_USER: Runtime,
    MISSING_PRIVILEGES: Runtime,
    LIVE_GRANTS: Owner | Observer,
    LIVE_ROLES: Owner | Observer,
    EXISTING_ROLES: Owner,
    IN_SCHEMA: Owner,
    SESSION_LOCK: Owner,
    SESSION_UNLOCK: Owner,
    SESSION_SETTINGS: Owner,
    SET_SESSION_SETTINGS: Owner,
    INVALID_INDEXES: Owner,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/OPERATIONS.md's "Upgrading" table gives each migration's answer to "may replicas of
    /// the previous release keep running beside it" and its upgrade floor, the ones `migrate`
    /// records.
    #[test]
    fn the_upgrading_table_states_each_migrations_flag_and_floor() {
        let operations = include_str!("../../../docs/OPERATIONS.md");
        for migration in MIGRATIONS {
            let name = migration.file_name();
            let stem = name.trim_end_matches(".sql");
            let row = operations
                .lines()
                .find(|line| line.starts_with(&format!("| `{stem}` |")))
                .unwrap_or_else(|| panic!("docs/OPERATIONS.md has no Upgrading row for {stem}"));
            let answer = format!(
                "| `{stem}` | {} | {} |",
                if migration.previous_release_may_run() {
                    "yes"
                } else {
                    "no"
                },
                migration.upgrade_floor
            );
            assert!(row.starts_with(&answer), "{stem}: {row}, not {answer}");
        }
    }

    /// A floor names a build at or before the migration: above it, it would stop the builds that
    /// carry it. The flag recorded for 0.2.0 says exactly whether a build of its schema may run.
    #[test]
    fn each_floor_is_at_most_its_migration_and_the_flag_follows_it() {
        for migration in MIGRATIONS {
            assert!(
                (1..=migration.version).contains(&migration.upgrade_floor),
                "{}: floor {}",
                migration.file_name(),
                migration.upgrade_floor
            );
            if migration.version > LAST_SCHEMA_GATED_BY_FLAG {
                assert_eq!(
                    migration.previous_release_may_run(),
                    migration.upgrade_floor <= LAST_SCHEMA_GATED_BY_FLAG,
                    "{}",
                    migration.file_name()
                );
            }
        }
        let floor = |version, upgrade_floor| Migration {
            version,
            name: "example",
            sql: "",
            upgrade_floor,
        };
        // A later migration that raises the floor past 0.2.0's schema stops 0.2.0 by its flag,
        // though the build just before it may run beside it.
        assert!(!floor(16, 14).previous_release_may_run());
        assert!(floor(16, 13).previous_release_may_run());
        assert!(floor(8, 7).previous_release_may_run());
        assert!(!floor(8, 8).previous_release_may_run());
    }

    /// CHANGELOG.md lists every migration once, under the release that brings it, with the flag
    /// and the floor `migrate` records for it; each release's "Beside the previous release" is
    /// yes exactly when all of its migrations say yes; the newest release is this build's
    /// version, below an "Unreleased" section when there is one (what the next release brings).
    #[test]
    fn the_changelog_lists_each_migration_with_its_flag_and_floor_under_one_release() {
        /// A release's version, its migrations with their flags and floors, and its "Beside" line.
        type Release = (String, Vec<(String, bool, i64)>, Option<bool>);
        let changelog = include_str!("../../../CHANGELOG.md");
        let mut releases: Vec<Release> = Vec::new();
        for line in changelog.lines() {
            if let Some(heading) = line.strip_prefix("## ") {
                let version = heading.split_whitespace().next().unwrap_or_default();
                releases.push((version.to_owned(), Vec::new(), None));
            } else if let Some((_, rows, beside)) = releases.last_mut() {
                if let Some(rest) = line.strip_prefix("| `") {
                    let (stem, rest) = rest.split_once("` |").expect("a migration row");
                    let cells: Vec<&str> = rest.split('|').map(str::trim).collect();
                    let flag = match cells.first() {
                        Some(&"yes") => true,
                        Some(&"no") => false,
                        other => panic!("CHANGELOG.md: {stem} says {other:?}, not yes or no"),
                    };
                    let floor = cells
                        .get(1)
                        .and_then(|cell| cell.parse().ok())
                        .unwrap_or_else(|| panic!("CHANGELOG.md: {stem} gives no floor: {line}"));
                    rows.push((stem.to_owned(), flag, floor));
                } else if line.contains("Beside the previous release: yes") {
                    *beside = Some(true);
                } else if line.contains("Beside the previous release: no") {
                    *beside = Some(false);
                }
            }
        }
        let newest = releases
            .iter()
            .map(|(version, _, _)| version.as_str())
            .find(|version| *version != "Unreleased");
        assert_eq!(
            newest,
            Some(env!("CARGO_PKG_VERSION")),
            "CHANGELOG.md's newest release is this build's version"
        );
        let listed: Vec<&(String, bool, i64)> =
            releases.iter().flat_map(|(_, rows, _)| rows).collect();
        for migration in MIGRATIONS {
            let name = migration.file_name();
            let stem = name.trim_end_matches(".sql");
            let rows: Vec<&&(String, bool, i64)> =
                listed.iter().filter(|(s, _, _)| s == stem).collect();
            let expected = format!(
                "{} | {}",
                if migration.previous_release_may_run() {
                    "yes"
                } else {
                    "no"
                },
                migration.upgrade_floor
            );
            assert_eq!(
                rows.len(),
                1,
                "CHANGELOG.md lists {stem} {} times: add `| `{stem}` | {expected} |` once, under \
                 the release that brings it",
                rows.len()
            );
            assert_eq!(
                (rows[0].1, rows[0].2),
                (
                    migration.previous_release_may_run(),
                    migration.upgrade_floor
                ),
                "CHANGELOG.md: {stem} must say {expected}, as MIGRATIONS does"
            );
        }
        assert_eq!(
            listed.len(),
            MIGRATIONS.len(),
            "CHANGELOG.md lists a migration this build does not carry"
        );
        for (version, rows, beside) in &releases {
            let all = rows.iter().all(|(_, flag, _)| *flag);
            assert_eq!(
                *beside,
                Some(all),
                "CHANGELOG.md {version}: \"Beside the previous release\" must say {}",
                if all { "yes" } else { "no" }
            );
        }
    }

    /// A pending migration stops the running replicas built for a schema below its floor, and
    /// those that do not say when its floor is above 0.1's schema; one whose floor is at or below
    /// every running replica's schema stops none.
    #[test]
    fn a_pending_migration_names_the_running_replicas_it_would_stop() {
        let replica = |owner: &str, schema_version: Option<i64>| RunningReplica {
            owner: owner.to_owned(),
            version: "test".to_owned(),
            schema_version,
        };
        let running = [
            replica("older", Some(6)),
            replica("unsaid", None),
            replica("built-for-it", Some(7)),
            replica("newer", Some(9)),
        ];
        let forbidding = Migration {
            version: 7,
            name: "forbidding",
            sql: "",
            upgrade_floor: 7,
        };
        let owners: Vec<String> = to_stop(&forbidding, &running)
            .into_iter()
            .map(|r| r.owner)
            .collect();
        assert_eq!(owners, ["older", "unsaid"]);
        let allowing = Migration {
            upgrade_floor: 6,
            ..forbidding
        };
        assert!(to_stop(&allowing, &running).is_empty());
        // A floor two migrations up stops a build one behind it too.
        let raising = Migration {
            version: 9,
            upgrade_floor: 8,
            ..forbidding
        };
        let owners: Vec<String> = to_stop(&raising, &running)
            .into_iter()
            .map(|r| r.owner)
            .collect();
        assert_eq!(owners, ["older", "unsaid", "built-for-it"]);
    }

    /// A migration run outside a transaction is split into its statements at each `;` that ends
    /// a line, its comments left out, and names the indexes it builds concurrently; one with a
    /// `$$` body is refused.
    #[test]
    fn a_migration_outside_a_transaction_splits_into_its_statements_and_names_its_indexes() {
        let migration = Migration {
            version: 99,
            name: "concurrent",
            sql: "-- no-transaction\n-- Why: an index for a read.\n\
                  CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_by_time\n    ON runs (created_at_ms);\n\n\
                  CREATE UNIQUE INDEX CONCURRENTLY \"runs_key\" ON runs (run_id);\n\
                  CREATE INDEX CONCURRENTLY ON runs (status);\n",
            upgrade_floor: 98,
        };
        assert!(migration.outside_a_transaction());
        assert_eq!(
            migration.statements().expect("plain statements"),
            [
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_by_time\n    ON runs (created_at_ms);\n",
                "CREATE UNIQUE INDEX CONCURRENTLY \"runs_key\" ON runs (run_id);\n",
                "CREATE INDEX CONCURRENTLY ON runs (status);\n",
            ]
        );
        assert_eq!(migration.concurrent_indexes(), ["runs_by_time", "runs_key"]);
        let with_body = Migration {
            sql: "-- no-transaction\nDO $$ BEGIN PERFORM 1; END $$;\n",
            ..migration
        };
        assert!(matches!(
            with_body.statements(),
            Err(StoreError::SchemaNotReady(message)) if message.contains("0099_concurrent.sql")
        ));
    }

    #[test]
    fn embedded_migrations_match_the_migrations_folder() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../migrations");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .expect("migrations folder")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|name| name.ends_with(".sql"))
            .collect();
        files.sort();
        let embedded: Vec<String> = MIGRATIONS.iter().map(Migration::file_name).collect();
        assert_eq!(
            files, embedded,
            "every file in migrations/ must be listed in MIGRATIONS"
        );
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(
                migration.version,
                i64::try_from(index).unwrap() + 1,
                "versions run 1, 2, 3, … without a gap"
            );
        }
    }
}
