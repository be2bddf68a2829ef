//! The embedded migration runner, modelled on sqlx's (docs/DESIGN.md §7): a ledger with a
//! sha256 checksum per file, each migration applied with its ledger row in one transaction, and
//! an advisory lock so that concurrent migrators of one schema wait instead of racing.
//!
//! Readiness ([`check_ready`]) is what `run` demands before it claims anything: every embedded
//! migration applied with an identical checksum, and nothing applied that this binary does not
//! know (a schema ahead of the binary is as unsafe as one behind it).
//!
//! The runner is here (the migrations, `begin`, `apply`, `migrate_up`); its ledger is `ledger`,
//! the migrations marked `-- no-transaction` run by `outside`, `migrate status` and the readiness
//! checks are `status`, and the roles, grants and `migrate verify` are `verify`.

use std::time::Instant;

use serde::Serialize;
use tokio_postgres::Client;

use super::row::Named;
use super::{SchemaName, StoreError};
use qlsched_core::manifest::sha256_hex;

mod ledger;
mod outside;
mod status;
mod verify;

use ledger::{
    ADD_LEDGER_FLAG, ADD_LEDGER_FLOOR, CREATE_LEDGER, FILL_LEDGER_FLAG, FILL_LEDGER_FLOOR,
    read_ledger, record, recorded, refuse_divergence,
};
use outside::apply_outside_a_transaction;
pub(crate) use status::GATE_CLOSED_BY;
pub use status::{
    GateClosedBy, check_not_behind, check_ready, gate_closed_by, require_ledger, status,
};
pub use verify::{GRANTS, ROLES, RUNTIME_ROLE, VerifyFinding, check_capability, verify};

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
        sql: include_str!("../../../../migrations/0001_schedule_admission.sql"),
        upgrade_floor: 1,
    },
    Migration {
        version: 2,
        name: "roles_and_grants",
        sql: include_str!("../../../../migrations/0002_roles_and_grants.sql"),
        upgrade_floor: 2,
    },
    Migration {
        version: 3,
        name: "operator_read_models",
        sql: include_str!("../../../../migrations/0003_operator_read_models.sql"),
        upgrade_floor: 2,
    },
    Migration {
        version: 4,
        name: "occurrence_accounting",
        sql: include_str!("../../../../migrations/0004_occurrence_accounting.sql"),
        upgrade_floor: 4,
    },
    Migration {
        version: 5,
        name: "operator_control",
        sql: include_str!("../../../../migrations/0005_operator_control.sql"),
        upgrade_floor: 5,
    },
    Migration {
        version: 6,
        name: "replica_registry",
        sql: include_str!("../../../../migrations/0006_replica_registry.sql"),
        upgrade_floor: 5,
    },
    Migration {
        version: 7,
        name: "claimable_rows",
        sql: include_str!("../../../../migrations/0007_claimable_rows.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 8,
        name: "definition_refusal",
        sql: include_str!("../../../../migrations/0008_definition_refusal.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 9,
        name: "claim_churn",
        sql: include_str!("../../../../migrations/0009_claim_churn.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 10,
        name: "parked_counts",
        sql: include_str!("../../../../migrations/0010_parked_counts.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 11,
        name: "admission_errors",
        sql: include_str!("../../../../migrations/0011_admission_errors.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 12,
        name: "run_retention",
        sql: include_str!("../../../../migrations/0012_run_retention.sql"),
        // Adds a nullable column, a trigger on updates (a replica never updates a run), two
        // tables and grants: the previous release's admissions are untouched.
        upgrade_floor: 6,
    },
    Migration {
        version: 13,
        name: "replica_release",
        sql: include_str!("../../../../migrations/0013_replica_release.sql"),
        upgrade_floor: 6,
    },
    Migration {
        version: 14,
        name: "upgrade_floor",
        sql: include_str!("../../../../migrations/0014_upgrade_floor.sql"),
        // A column, its comment and a check on the ledger: 0.2.0's replicas read the ledger
        // through to_jsonb and never write it, so they run on beside it.
        upgrade_floor: 13,
    },
    Migration {
        version: 15,
        name: "replica_minutes",
        sql: include_str!("../../../../migrations/0015_replica_minutes.sql"),
        // A new table only this release's replicas write: the previous release (0.2.0, schema
        // 13) runs beside it, its admissions only missing from `top`'s trends.
        upgrade_floor: 13,
    },
    Migration {
        version: 16,
        name: "schedule_state",
        sql: include_str!("../../../../migrations/0016_schedule_state.sql"),
        // Two new functions that no older build calls: 0.2.0's replicas, which write their own
        // CASEs, run on beside it.
        upgrade_floor: 13,
    },
    Migration {
        version: 17,
        name: "run_event_payloads",
        sql: include_str!("../../../../migrations/0017_run_event_payloads.sql"),
        // Two new functions that no older build calls: 0.2.0's replicas run on beside it, writing
        // their events' payloads in the shapes they always did, which every reader reads alike.
        upgrade_floor: 13,
    },
];

/// The schema version a fully migrated database reports.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

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
    if recorded(&transaction, migration.version).await? {
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

super::statements::statements! {
    @also ledger, outside, status, verify;
    LOCK: Owner,
    OWNER_RIGHTS: Owner,
    EXISTING_ROLES: Owner,
    IN_SCHEMA: Owner,
}

#[cfg(test)]
mod tests;
