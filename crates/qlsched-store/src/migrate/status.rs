//! `migrate status`, with the running replicas each pending migration would stop; the upgrade
//! gate's reading; and the readiness checks `run` and the readers make before their first query.

use std::collections::BTreeMap;

use tokio_postgres::Client;

use super::ledger::{LedgerRow, divergence, ledger_exists, read_ledger};
use super::{MIGRATIONS, Migration, MigrationStatus, RunningReplica, latest_version};
use crate::row::Named;
use crate::{SchemaName, StoreError};

// The migration applied after $1 (this build's latest) that holds this build out, if any: the
// one with the highest floor above $1 (a NULL floor reads as the version itself), the earliest
// of those. The claim statements carry the gate itself (`claim::CLAIM_DUE`); this read only says
// why a round claimed nothing, beside the claim. An index probe, no row when none.
pub(crate) const GATE_CLOSED_BY: &str = "SELECT version, name,
        coalesce(upgrade_floor, version) AS upgrade_floor
    FROM schema_migrations m
    WHERE version > $1 AND coalesce(upgrade_floor, version) > $1
    ORDER BY coalesce(upgrade_floor, version) DESC, version LIMIT 1";

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
pub(super) fn to_stop(migration: &Migration, running: &[RunningReplica]) -> Vec<RunningReplica> {
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

crate::statements::statements! {
    GATE_CLOSED_BY: Runtime | Admin | Observer,
    REGISTRY_EXISTS: Owner | Admin | Observer,
    RUNNING_REPLICAS: Owner | Admin | Observer,
}
