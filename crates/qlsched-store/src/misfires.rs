//! Misfire records: one row per decision that passed occurrences over, written by the
//! admission (`store::admit`), read here for `inspect misfires`, `inspect trigger` and `top`, and
//! pruned here past their retention.

use serde::Serialize;
use tokio_postgres::{GenericClient, Row};

use super::StoreError;
use super::row::Named;
use qlsched_core::TriggerName;

/// One misfire record, as `inspect misfires` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MisfireRecord {
    pub misfire_id: i64,
    pub project_id: String,
    pub trigger_id: String,
    pub trigger_revision: i64,
    /// The first occurrence passed over.
    pub first_occurrence_ms: i64,
    /// The last occurrence passed over.
    pub last_occurrence_ms: i64,
    /// Occurrences passed over, first and last included; a lower bound when `occurrences_exact`
    /// is false.
    pub occurrences: i64,
    /// False: counting stopped at 10000 and occurrences is a lower bound.
    pub occurrences_exact: bool,
    /// The trigger's misfire policy when it was decided.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["skip", "fire_once"])))]
    pub policy: String,
    /// beyond_grace: later than the grace when decided; paused: passed while paused, written by
    /// a resume.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["beyond_grace", "paused"])))]
    pub reason: String,
    /// The replica or operator whose decision it was.
    pub owner: String,
    pub decided_at_ms: i64,
    pub recorded_at_ms: i64,
}

impl MisfireRecord {
    fn from_row(row: &Row) -> Result<Self, StoreError> {
        Ok(MisfireRecord {
            misfire_id: row.col("misfire_id")?,
            project_id: row.col("project_id")?,
            trigger_id: row.col("trigger_id")?,
            trigger_revision: row.col("trigger_revision")?,
            first_occurrence_ms: row.col("first_occurrence_ms")?,
            last_occurrence_ms: row.col("last_occurrence_ms")?,
            occurrences: row.col("occurrences")?,
            occurrences_exact: row.col("occurrences_exact")?,
            policy: row.col("policy")?,
            reason: row.col("reason")?,
            owner: row.col("owner")?,
            decided_at_ms: row.col("decided_at_ms")?,
            recorded_at_ms: row.col("recorded_at_ms")?,
        })
    }
}

// The newest records first, of one trigger ($1, $2 not null) or of all, recorded no earlier than
// $3 ms before the database's now (null: any age), at most $4.
const LIST: &str = "SELECT misfire_id, project_id, trigger_id, trigger_revision,
        first_occurrence_ms, last_occurrence_ms, occurrences, occurrences_exact, policy, reason,
        owner, decided_at_ms, recorded_at_ms
    FROM misfires
    WHERE ($1::text IS NULL OR (project_id = $1 AND trigger_id = $2))
      AND ($3::int8 IS NULL OR recorded_at_ms >= now_ms() - $3)
    ORDER BY misfire_id DESC
    LIMIT $4";

/// Misfire records, newest first: of `trigger` or of every trigger,
/// recorded within `since_ms` of now (any age when `None`), at most `limit`.
pub async fn list(
    client: &impl GenericClient,
    trigger: Option<&TriggerName>,
    since_ms: Option<i64>,
    limit: i64,
) -> Result<Vec<MisfireRecord>, StoreError> {
    let (project, trigger) = trigger
        .map(|name| (&name.project_id, &name.trigger_id))
        .unzip();
    let rows = client
        .query(LIST, &[&project, &trigger, &since_ms, &limit])
        .await?;
    rows.iter().map(MisfireRecord::from_row).collect()
}

// Deletes records past their retention ($1 ms of database time), oldest first, at most $2 a
// call, so a replica's pass never holds a long transaction.
const PRUNE: &str = "DELETE FROM misfires WHERE misfire_id IN (
    SELECT misfire_id FROM misfires WHERE recorded_at_ms < now_ms() - $1
    ORDER BY recorded_at_ms LIMIT $2)";

/// Deletes up to `limit` records recorded more than `retention_ms` ago; returns how many.
pub async fn prune(
    client: &impl GenericClient,
    retention_ms: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    Ok(client.execute(PRUNE, &[&retention_ms, &limit]).await?)
}

/// A per-row count stops here: `top` shows `99+` past it, and no count reads more index entries.
pub const COUNT_CAP: i64 = 100;

// How many records of each given row's trigger revision are still in retention ($4 ms of
// database time), each count a bounded probe of the misfires_trigger index (at most $5 entries),
// for the rows given as parallel arrays: projects $1, triggers $2, revisions $3.
const COUNTS: &str = "SELECT w.project_id, w.trigger_id, c.n
    FROM unnest($1::text[], $2::text[], $3::int8[]) AS w(project_id, trigger_id, revision)
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM (
            SELECT 1 FROM misfires m
            WHERE m.project_id = w.project_id AND m.trigger_id = w.trigger_id
              AND m.trigger_revision = w.revision AND m.recorded_at_ms >= now_ms() - $4
            LIMIT $5) capped) c
    WHERE c.n > 0";

/// Misfire records still in retention per `(project, trigger, revision)` row, for the rows on
/// `top`'s screen: one statement, one bounded index probe per row, at most [`COUNT_CAP`] each.
/// Rows without a record are absent from the answer.
pub async fn counts(
    client: &impl GenericClient,
    rows: &[(&str, &str, i64)],
    retention_ms: i64,
) -> Result<Vec<(TriggerName, i64)>, StoreError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let projects: Vec<&str> = rows.iter().map(|r| r.0).collect();
    let triggers: Vec<&str> = rows.iter().map(|r| r.1).collect();
    let revisions: Vec<i64> = rows.iter().map(|r| r.2).collect();
    client
        .query(
            COUNTS,
            &[&projects, &triggers, &revisions, &retention_ms, &COUNT_CAP],
        )
        .await?
        .iter()
        .map(|row| {
            let name = TriggerName::new(
                row.col::<String>("project_id")?,
                row.col::<String>("trigger_id")?,
            );
            Ok((name, row.col("n")?))
        })
        .collect()
}

super::statements::statements! {
    LIST: Observer,
    PRUNE: Runtime,
    COUNTS: Observer,
}
