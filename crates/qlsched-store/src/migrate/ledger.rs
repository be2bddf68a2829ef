//! The ledger of applied migrations, `schema_migrations`: its table, its reads, the row each
//! migration records, and what a ledger that disagrees with this binary says.

use std::collections::BTreeMap;

use tokio_postgres::Client;

use super::{MIGRATIONS, Migration, MigrationStatus, latest_version};
use crate::row::Named;
use crate::{SchemaName, StoreError};

// The ledger; created before the first migration so that migration 0002 can grant on it.
pub(super) const CREATE_LEDGER: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
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
pub(super) const ADD_LEDGER_FLAG: &str =
    "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS previous_release_may_run boolean";
pub(super) const FILL_LEDGER_FLAG: &str =
    "UPDATE schema_migrations m SET previous_release_may_run = x.may_run
    FROM unnest($1::int8[], $2::bool[]) AS x(version, may_run)
    WHERE m.version = x.version AND m.previous_release_may_run IS NULL";
pub(super) const ADD_LEDGER_FLOOR: &str =
    "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS upgrade_floor bigint";
pub(super) const FILL_LEDGER_FLOOR: &str = "UPDATE schema_migrations m SET upgrade_floor = x.floor
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

// Record one applied migration, inside the transaction that applied it.
const RECORD_MIGRATION: &str = "INSERT INTO schema_migrations
    (version, name, checksum, applied_at_ms, execution_ms, previous_release_may_run,
     upgrade_floor)
    VALUES ($1, $2, $3, now_ms(), $4, $5, $6)
    RETURNING applied_at_ms";

/// Records `migration` in the ledger, inside the transaction that applied it (or, for one run
/// outside a transaction, the one after its statements), and says so as `migrate` reports it.
pub(super) async fn record(
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

#[derive(Debug, Clone)]
pub(super) struct LedgerRow {
    pub(super) name: String,
    pub(super) checksum: String,
    pub(super) applied_at_ms: i64,
    pub(super) execution_ms: i64,
    /// As recorded by the build that applied it; `None` before the ledger had the column.
    pub(super) previous_release_may_run: Option<bool>,
    /// As recorded by the build that applied it, or filled by a later `migrate`; `None` before
    /// the ledger had the column.
    pub(super) upgrade_floor: Option<i64>,
}

/// Whether `version` is in the ledger, read in the caller's transaction under the migrators'
/// lock: another migrator applied it while this one waited, and nothing is left to do.
pub(super) async fn recorded(
    client: &impl tokio_postgres::GenericClient,
    version: i64,
) -> Result<bool, StoreError> {
    Ok(read_ledger(client).await?.contains_key(&version))
}

pub(super) async fn read_ledger(
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
pub(super) fn refuse_divergence(ledger: &BTreeMap<i64, LedgerRow>) -> Result<(), StoreError> {
    let problems = divergence(ledger);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StoreError::SchemaNotReady(problems.join("; ")))
    }
}

pub(super) fn divergence(ledger: &BTreeMap<i64, LedgerRow>) -> Vec<String> {
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

pub(super) async fn ledger_exists(
    client: &Client,
    schema: &SchemaName,
) -> Result<bool, StoreError> {
    Ok(client
        .query_one(LEDGER_EXISTS, &[&schema.as_str()])
        .await?
        .get(0))
}

fn short(checksum: &str) -> &str {
    checksum.get(..12).unwrap_or(checksum)
}

crate::statements::statements! {
    CREATE_LEDGER: Owner,
    ADD_LEDGER_FLAG: Owner,
    FILL_LEDGER_FLAG: Owner,
    ADD_LEDGER_FLOOR: Owner,
    FILL_LEDGER_FLOOR: Owner,
    LEDGER_EXISTS: Owner | Admin | Runtime | Observer,
    READ_LEDGER: Owner | Admin | Runtime | Observer,
    RECORD_MIGRATION: Owner,
}
