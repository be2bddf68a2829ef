//! What `inspect load` and `publish --dry-run` look ahead from: the claimable triggers grouped by
//! identical expression and zone (so the core evaluates each distinct expression once), and the
//! admission rate these replicas reached in their busiest recent minute.

use qlsched_core::load::TriggerGroup;
use tokio_postgres::GenericClient;

use crate::StoreError;
use crate::row::Named;

// The claimable triggers (a parked row fires nothing) by expression and zone: one pass over the
// schedule rows, each joined to its trigger by key.
const TRIGGER_GROUPS: &str = "SELECT t.cron_expr, t.time_zone, count(*) AS triggers
    FROM trigger_schedules s
    JOIN triggers t ON t.project_id = s.project_id AND t.trigger_id = s.trigger_id
    WHERE s.claimable
    GROUP BY t.cron_expr, t.time_zone";

/// The claimable triggers, grouped by identical expression and zone.
pub async fn trigger_groups(client: &impl GenericClient) -> Result<Vec<TriggerGroup>, StoreError> {
    client
        .query(TRIGGER_GROUPS, &[])
        .await?
        .iter()
        .map(|row| {
            Ok(TriggerGroup {
                cron_expr: row.col("cron_expr")?,
                time_zone: row.col("time_zone")?,
                triggers: u64::try_from(row.col::<i64>("triggers")?).unwrap_or(0),
            })
        })
        .collect()
}

// The claimable triggers among those named (by project and trigger, pairwise), with the
// expression and zone they are grouped by in TRIGGER_GROUPS.
const CLAIMABLE_TRIGGERS: &str = "SELECT t.project_id, t.trigger_id, t.cron_expr, t.time_zone
    FROM trigger_schedules s
    JOIN triggers t ON t.project_id = s.project_id AND t.trigger_id = s.trigger_id
    WHERE s.claimable
      AND (t.project_id, t.trigger_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))";

/// A claimable trigger as [`trigger_groups`] counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimableTrigger {
    pub project_id: String,
    pub trigger_id: String,
    pub cron_expr: String,
    pub time_zone: String,
}

/// Of the triggers named by `(project, trigger)`, those [`trigger_groups`] counts, with their
/// expression and zone.
pub async fn claimable_triggers(
    client: &impl GenericClient,
    names: &[(String, String)],
) -> Result<Vec<ClaimableTrigger>, StoreError> {
    let (projects, triggers): (Vec<&str>, Vec<&str>) =
        names.iter().map(|(p, t)| (p.as_str(), t.as_str())).unzip();
    client
        .query(CLAIMABLE_TRIGGERS, &[&projects, &triggers])
        .await?
        .iter()
        .map(|row| {
            Ok(ClaimableTrigger {
                project_id: row.col("project_id")?,
                trigger_id: row.col("trigger_id")?,
                cron_expr: row.col("cron_expr")?,
                time_zone: row.col("time_zone")?,
            })
        })
        .collect()
}

/// How far back the busiest minute is looked for.
pub const RATE_WINDOW_MS: i64 = 3_600_000;

// The most runs created in one minute of the last $1 ms (a range of the creation-time index),
// and the database's now.
const BUSIEST_MINUTE: &str = "SELECT now_ms() AS now_ms,
        (SELECT max(n) FROM (
            SELECT count(*) AS n FROM runs
            WHERE created_at_ms > now_ms() - $1
            GROUP BY created_at_ms / 60000) m) AS busiest";

/// The database's now, and the most admissions in one minute of the last [`RATE_WINDOW_MS`]
/// (`None` when there were none).
pub async fn busiest_minute(client: &impl GenericClient) -> Result<(i64, Option<i64>), StoreError> {
    let row = client.query_one(BUSIEST_MINUTE, &[&RATE_WINDOW_MS]).await?;
    Ok((row.col("now_ms")?, row.col("busiest")?))
}

crate::statements::statements! {
    TRIGGER_GROUPS: Observer,
    CLAIMABLE_TRIGGERS: Observer,
    BUSIEST_MINUTE: Observer,
}
