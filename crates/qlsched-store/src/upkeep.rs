//! Whether the server removes the schedule table's dead row versions: the upkeep every claim
//! depends on and no replica can do itself.
//!
//! Every occurrence updates its schedule row twice (the claim, then the admission), and neither
//! update can be heap-only, so each leaves a dead entry in the claim-order index at the place
//! every claim's walk starts (docs/PERFORMANCE.md, "Why the lag grew"). Autovacuum removes them
//! (migration 0009 sets the table's thresholds). A server with `autovacuum = off`, or the table's
//! own `autovacuum_enabled = false`, never does: the dead versions pile up at 2 per occurrence,
//! and the claim, and so the lag, slows minute over minute. A replica cannot vacuum in its place
//! (VACUUM needs the table's owner, and a replica is not), so it says so: a warning when it
//! starts, and the same fact in `bench --steady`'s report.

use tokio_postgres::GenericClient;

use super::StoreError;
use super::row::Named;

/// What the server does about the schedule table's dead row versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScheduleUpkeep {
    /// Autovacuum visits the table: the server's `autovacuum` is on and the table does not
    /// switch it off.
    pub autovacuum: bool,
    /// Dead row versions the statistics count now (an estimate, as the server's own).
    pub dead_rows: i64,
    /// Live rows, by the same estimate.
    pub live_rows: i64,
}

// Readable by every role: `pg_settings`, `pg_class.reloptions` and the statistics views are.
const SCHEDULE_UPKEEP: &str = "SELECT current_setting('autovacuum')::bool
            AND coalesce((SELECT o.option_value::bool
                          FROM pg_class c, pg_options_to_table(c.reloptions) o
                          WHERE c.oid = 'trigger_schedules'::regclass
                            AND o.option_name = 'autovacuum_enabled'), true) AS autovacuum,
        coalesce(t.n_dead_tup, 0) AS dead_rows,
        coalesce(t.n_live_tup, 0) AS live_rows
    FROM (SELECT 1) one
    LEFT JOIN pg_stat_user_tables t ON t.relid = 'trigger_schedules'::regclass";

/// The schedule table's upkeep as the server reports it, in one statement.
pub async fn schedule_upkeep(client: &impl GenericClient) -> Result<ScheduleUpkeep, StoreError> {
    let row = client.query_one(SCHEDULE_UPKEEP, &[]).await?;
    Ok(ScheduleUpkeep {
        autovacuum: row.col("autovacuum")?,
        dead_rows: row.col("dead_rows")?,
        live_rows: row.col("live_rows")?,
    })
}

impl ScheduleUpkeep {
    /// The warning a replica logs and `bench` prints, or none when autovacuum runs.
    pub fn warning(&self) -> Option<String> {
        (!self.autovacuum).then(|| {
            format!(
                "autovacuum is off for the schedule table (the server's `autovacuum` setting or \
                 the table's `autovacuum_enabled`): its dead row versions ({} now) are never \
                 removed, and every claim walks past them, so the lag grows minute over minute; \
                 turn autovacuum on, or have the schema's owner VACUUM trigger_schedules often",
                self.dead_rows
            )
        })
    }
}

super::statements::statements! {
    SCHEDULE_UPKEEP: Runtime | Observer,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_table_autovacuum_skips_is_warned_about() {
        let on = ScheduleUpkeep {
            autovacuum: true,
            dead_rows: 1_600_000,
            live_rows: 100_000,
        };
        assert_eq!(on.warning(), None);
        let off = ScheduleUpkeep {
            autovacuum: false,
            ..on
        };
        let warning = off.warning().expect("a warning when autovacuum is off");
        assert!(warning.contains("1600000"), "{warning}");
        assert!(warning.contains("autovacuum_enabled"), "{warning}");
    }
}
