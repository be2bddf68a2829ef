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
    /// Whether replicas of the release before it may keep running beside it, admitting, once it
    /// is applied (the mixed window of a rolling upgrade). Recorded in the ledger when applied,
    /// so that a replica of an older build, which does not know the migration, can read it.
    pub previous_release_may_run: bool,
}

impl Migration {
    pub fn checksum(&self) -> String {
        sha256_hex(self.sql.as_bytes())
    }

    pub fn file_name(&self) -> String {
        format!("{:04}_{}.sql", self.version, self.name)
    }
}

/// Every migration this binary carries, in order. A test checks this list against the files in
/// `migrations/`, so a file cannot be added without being embedded.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "schedule_admission",
        sql: include_str!("../../../migrations/0001_schedule_admission.sql"),
        previous_release_may_run: false,
    },
    Migration {
        version: 2,
        name: "roles_and_grants",
        sql: include_str!("../../../migrations/0002_roles_and_grants.sql"),
        previous_release_may_run: false,
    },
    Migration {
        version: 3,
        name: "operator_read_models",
        sql: include_str!("../../../migrations/0003_operator_read_models.sql"),
        previous_release_may_run: true,
    },
    Migration {
        version: 4,
        name: "occurrence_accounting",
        sql: include_str!("../../../migrations/0004_occurrence_accounting.sql"),
        previous_release_may_run: false,
    },
    Migration {
        version: 5,
        name: "operator_control",
        sql: include_str!("../../../migrations/0005_operator_control.sql"),
        previous_release_may_run: false,
    },
    Migration {
        version: 6,
        name: "replica_registry",
        sql: include_str!("../../../migrations/0006_replica_registry.sql"),
        previous_release_may_run: true,
    },
    Migration {
        version: 7,
        name: "claimable_rows",
        sql: include_str!("../../../migrations/0007_claimable_rows.sql"),
        previous_release_may_run: true,
    },
    Migration {
        version: 8,
        name: "definition_refusal",
        sql: include_str!("../../../migrations/0008_definition_refusal.sql"),
        previous_release_may_run: true,
    },
    Migration {
        version: 9,
        name: "claim_churn",
        sql: include_str!("../../../migrations/0009_claim_churn.sql"),
        previous_release_may_run: true,
    },
    Migration {
        version: 10,
        name: "parked_counts",
        sql: include_str!("../../../migrations/0010_parked_counts.sql"),
        previous_release_may_run: true,
    },
];

/// The schema version a fully migrated database reports.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// The group role a replica's login needs (docs/DESIGN.md §3.2).
pub const RUNTIME_ROLE: &str = "qlsched_runtime";

/// The four group roles of docs/DESIGN.md §3.2.
pub const ROLES: [&str; 4] = [
    "qlsched_admin",
    "qlsched_runtime",
    "qlsched_observer",
    "qlsched_worker_ingress",
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
    ("qlsched_admin", "replicas", &["SELECT"]),
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
    ("qlsched_runtime", "runs", &["INSERT", "SELECT"]),
    ("qlsched_runtime", "attempts", &["INSERT", "SELECT"]),
    ("qlsched_runtime", "run_events", &["INSERT", "SELECT"]),
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
];

/// Roles that must have USAGE on the schema; `qlsched_worker_ingress` must not.
const SCHEMA_USERS: [&str; 3] = ["qlsched_admin", "qlsched_runtime", "qlsched_observer"];

/// One row of `migrate status`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MigrationStatus {
    pub version: i64,
    pub name: String,
    /// unknown: applied, but not in this binary.
    #[schemars(extend("enum" = ["applied", "pending", "checksum_mismatch", "unknown"]))]
    pub state: &'static str,
    /// SHA-256 of the migration's text, in hex.
    pub checksum: String,
    pub applied_at_ms: Option<i64>,
    pub execution_ms: Option<i64>,
}

/// What `migrate up` did.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
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
// (`Migration::previous_release_may_run`), in the ledger, where an older build that does not know
// a migration can read it. Added to ledgers made before it; NULL for rows recorded before, which
// `migrate` fills in from what this build knows.
const ADD_LEDGER_FLAG: &str =
    "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS previous_release_may_run boolean";
const FILL_LEDGER_FLAG: &str = "UPDATE schema_migrations m SET previous_release_may_run = x.may_run
    FROM unnest($1::int8[], $2::bool[]) AS x(version, may_run)
    WHERE m.version = x.version AND m.previous_release_may_run IS NULL";

// Is the ledger there at all? (A missing one means "never migrated", not an error.)
const LEDGER_EXISTS: &str =
    "SELECT to_regclass(format('%I.schema_migrations', $1::text)) IS NOT NULL";

// The applied migrations, in order.
// The flag read through to_jsonb, so that a ledger `migrate` has not yet given the column reads
// as NULL rather than failing.
const READ_LEDGER: &str = "SELECT version, name, checksum, applied_at_ms, execution_ms,
        (to_jsonb(m) ->> 'previous_release_may_run')::boolean AS previous_release_may_run
    FROM schema_migrations m ORDER BY version";

// The migrations applied after $1 (this build's latest), with whether this build may run beside
// them: what a replica reads beside each round's claim. An index probe, no row when none.
pub(crate) const NEWER_MIGRATIONS: &str = "SELECT version, name,
        (to_jsonb(m) ->> 'previous_release_may_run')::boolean AS previous_release_may_run
    FROM schema_migrations m WHERE version > $1 ORDER BY version";

// Record one applied migration, inside the transaction that applied it.
const RECORD_MIGRATION: &str = "INSERT INTO schema_migrations
    (version, name, checksum, applied_at_ms, execution_ms, previous_release_may_run)
    VALUES ($1, $2, $3, now_ms(), $4, $5)
    RETURNING applied_at_ms";

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
    let (versions, flags): (Vec<i64>, Vec<bool>) = MIGRATIONS
        .iter()
        .map(|m| (m.version, m.previous_release_may_run))
        .unzip();
    transaction
        .execute(FILL_LEDGER_FLAG, &[&versions, &flags])
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
    transaction
        .batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {schema}; SET LOCAL search_path TO {schema}; \
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
        match apply(client, schema, home, migration).await? {
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
        if error.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) {
            return Ok(Err(super::error::describe_server_error(&error)));
        }
        return Err(match StoreError::from_db(error) {
            // The server's SQLSTATE, detail and hint kept: they say what to fix.
            StoreError::Database(db) => StoreError::SchemaNotReady(format!(
                "migration {} failed: {}",
                migration.file_name(),
                super::error::describe_server_error(&db)
            )),
            other => other,
        });
    }
    let execution_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    let applied_at_ms: i64 = transaction
        .query_one(
            RECORD_MIGRATION,
            &[
                &migration.version,
                &migration.name,
                &migration.checksum(),
                &execution_ms,
                &migration.previous_release_may_run,
            ],
        )
        .await?
        .get(0);
    transaction.commit().await?;
    Ok(Ok(Some(MigrationStatus {
        version: migration.version,
        name: migration.name.to_owned(),
        state: "applied",
        checksum: migration.checksum(),
        applied_at_ms: Some(applied_at_ms),
        execution_ms: Some(execution_ms),
    })))
}

#[derive(Debug, Clone)]
struct LedgerRow {
    name: String,
    checksum: String,
    applied_at_ms: i64,
    execution_ms: i64,
    /// As recorded by the build that applied it; `None` before the ledger had the column.
    previous_release_may_run: Option<bool>,
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
            // A newer release's migration that says this one may keep running beside it.
            None if row.previous_release_may_run == Some(true) => {}
            None => problems.push(format!(
                "migration {version} ({}) is applied but unknown to this binary (schema ahead: \
                 upgrade qlsched)",
                row.name
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

/// A migration applied after this build's latest that this build may not run beside: what a
/// replica checks each round, and stops admitting on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewerMigration {
    pub version: i64,
    pub name: String,
}

/// The first migration of `rows` ([`NEWER_MIGRATIONS`]' answer: those applied after this build's
/// latest) that does not let this build run beside it (its flag false, or not recorded), if any:
/// a replica reads them in its claim's round trip ([`super::claim::claim_for_round`]).
pub(crate) fn first_blocking(
    rows: &[tokio_postgres::Row],
) -> Result<Option<NewerMigration>, StoreError> {
    for row in rows {
        if row.col::<Option<bool>>("previous_release_may_run")? != Some(true) {
            return Ok(Some(NewerMigration {
                version: row.col("version")?,
                name: row.col("name")?,
            }));
        }
    }
    Ok(None)
}

/// `migrate status`: every known and every applied migration.
pub async fn status(
    client: &Client,
    schema: &SchemaName,
) -> Result<Vec<MigrationStatus>, StoreError> {
    let ledger = if ledger_exists(client, schema).await? {
        read_ledger(client).await?
    } else {
        BTreeMap::new()
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct VerifyFinding {
    #[schemars(extend("enum" = [
        "checksum", "pending", "unknown_migration", "missing_grant", "extra_grant",
        "schema_usage", "role"
    ]))]
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
    NEWER_MIGRATIONS: Runtime | Observer,
    LEDGER_EXISTS: Owner | Admin | Runtime | Observer,
    READ_LEDGER: Owner | Admin | Runtime | Observer,
    RECORD_MIGRATION: Owner,
    CURRENT_USER: Runtime,
    MISSING_PRIVILEGES: Runtime,
    LIVE_GRANTS: Owner | Observer,
    LIVE_ROLES: Owner | Observer,
    EXISTING_ROLES: Owner,
    IN_SCHEMA: Owner,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/OPERATIONS.md's "Upgrading" table gives each migration's answer to "may replicas of
    /// the previous release keep running beside it", and it is the one `migrate` records.
    #[test]
    fn the_upgrading_table_states_each_migrations_flag() {
        let operations = include_str!("../../../docs/OPERATIONS.md");
        for migration in MIGRATIONS {
            let name = migration.file_name();
            let stem = name.trim_end_matches(".sql");
            let row = operations
                .lines()
                .find(|line| line.starts_with(&format!("| `{stem}` |")))
                .unwrap_or_else(|| panic!("docs/OPERATIONS.md has no Upgrading row for {stem}"));
            let answer = if migration.previous_release_may_run {
                "| yes |"
            } else {
                "| no |"
            };
            assert!(row.contains(answer), "{stem}: {row}");
        }
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
