//! The last server error that refused each trigger's admission (migration 0011): written by the
//! replica whose row was refused on its own ([`crate::AdmissionOutcome::Rejected`]), read by
//! `inspect trigger` and its diagnosis, so a poisoned trigger is named where an operator looks,
//! whichever replica met it.

use deadpool_postgres::ClientWrapper;
use serde::Serialize;
use tokio_postgres::GenericClient;

use super::StoreError;
use super::row::Named;
use super::sender::{Sender, TRANSACTION_SETTINGS};
use super::{Admission, AdmissionOutcome};
use qlsched_core::TriggerName;

/// One refusal to record: the admission it refused and the server's code and message.
#[derive(Debug, Clone)]
pub struct Refusal<'a> {
    pub admission: &'a Admission<'a>,
    pub sqlstate: &'a str,
    pub message: &'a str,
}

impl<'a> Refusal<'a> {
    /// The refusal an outcome says, if it is one.
    pub fn of(admission: &'a Admission<'a>, outcome: &'a AdmissionOutcome) -> Option<Self> {
        match outcome {
            AdmissionOutcome::Rejected { sqlstate, reason } => Some(Refusal {
                admission,
                sqlstate,
                message: reason,
            }),
            _ => None,
        }
    }
}

// Each refusal over the trigger's previous one. A refusal of the same occurrence (revision and
// cursor unchanged) continues its streak: the first failure's time is kept and the count goes up;
// any other starts a new streak. Messages are cut to 1,000 characters: a trigger's RAISE may be
// long, and this is a pointer to the log, not the log.
const RECORD: &str = "INSERT INTO admission_errors AS e (project_id, trigger_id, trigger_revision,
        cursor_ms, sqlstate, message, owner, first_failed_at_ms, last_failed_at_ms, failures)
    SELECT project_id, trigger_id, trigger_revision, cursor_ms, sqlstate, left(message, 1000),
           owner, now_ms(), now_ms(), 1
    FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::text[], $6::text[], $7::text[])
         AS i(project_id, trigger_id, trigger_revision, cursor_ms, sqlstate, message, owner)
    ON CONFLICT (project_id, trigger_id) DO UPDATE SET
        first_failed_at_ms = CASE WHEN e.trigger_revision = excluded.trigger_revision
                                   AND e.cursor_ms IS NOT DISTINCT FROM excluded.cursor_ms
                                  THEN e.first_failed_at_ms ELSE excluded.first_failed_at_ms END,
        failures = CASE WHEN e.trigger_revision = excluded.trigger_revision
                         AND e.cursor_ms IS NOT DISTINCT FROM excluded.cursor_ms
                        THEN e.failures + 1 ELSE 1 END,
        trigger_revision = excluded.trigger_revision, cursor_ms = excluded.cursor_ms,
        sqlstate = excluded.sqlstate, message = excluded.message, owner = excluded.owner,
        last_failed_at_ms = excluded.last_failed_at_ms";
const BEGIN: &str = "BEGIN";
const COMMIT: &str = "COMMIT";

/// Records `refusals` in a transaction of its own, pipelined (one round trip once its statements
/// are ready), after the admissions they refused rolled back.
pub async fn record(
    client: &ClientWrapper,
    sender: &Sender,
    refusals: &[Refusal<'_>],
    round_trips: &mut u32,
) -> Result<(), StoreError> {
    if refusals.is_empty() {
        return Ok(());
    }
    let column = |f: fn(&Refusal<'_>) -> String| refusals.iter().map(f).collect::<Vec<_>>();
    let projects = column(|r| r.admission.row.project_id.clone());
    let triggers = column(|r| r.admission.row.trigger_id.clone());
    let revisions: Vec<i64> = refusals
        .iter()
        .map(|r| r.admission.row.trigger_revision)
        .collect();
    let cursors: Vec<Option<i64>> = refusals.iter().map(|r| r.admission.row.cursor_ms).collect();
    let sqlstates = column(|r| r.sqlstate.to_owned());
    let messages = column(|r| qlsched_core::text::clean(r.message));
    let owners = column(|r| r.admission.row.fence.owner.clone());
    let settings = sender
        .ready(client, TRANSACTION_SETTINGS, round_trips)
        .await?;
    let statement = sender.ready(client, RECORD, round_trips).await?;
    *round_trips += 1;
    let (begun, set, written, committed) = futures_util::future::join4(
        client.batch_execute(BEGIN),
        sender.settings(client, &settings),
        statement.execute(
            client,
            &[
                &projects, &triggers, &revisions, &cursors, &sqlstates, &messages, &owners,
            ],
        ),
        client.batch_execute(COMMIT),
    )
    .await;
    begun?;
    set?;
    written?;
    committed?;
    Ok(())
}

/// The last server error that refused a trigger's admission, as `inspect trigger` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AdmissionErrorView {
    /// The server's SQLSTATE (P0001: raised by a trigger function; 53200: out of shared memory).
    pub sqlstate: String,
    pub message: String,
    /// The replica whose admission it refused last.
    pub owner: String,
    /// The occurrence it refused: the schedule row's revision and cursor then.
    pub trigger_revision: i64,
    pub cursor_ms: Option<i64>,
    /// When the refusals of that occurrence began, the last one, and how many there were (one a
    /// lease: a refused row's claim is left to expire before it is tried again).
    pub first_failed_at_ms: i64,
    pub last_failed_at_ms: i64,
    pub failures: i64,
    /// True while the schedule row is still at that occurrence: nothing was admitted since, and
    /// the next attempt meets the same error unless its cause was removed.
    pub current: bool,
}

// The trigger's last refusal, and whether its schedule row is still at the occurrence refused.
const LAST: &str = "SELECT e.sqlstate, e.message, e.owner, e.trigger_revision, e.cursor_ms,
        e.first_failed_at_ms, e.last_failed_at_ms, e.failures,
        coalesce(s.trigger_revision = e.trigger_revision
                 AND s.next_fire_at_ms IS NOT DISTINCT FROM e.cursor_ms, false) AS current
    FROM admission_errors e
    LEFT JOIN trigger_schedules s ON s.project_id = e.project_id AND s.trigger_id = e.trigger_id
    WHERE e.project_id = $1 AND e.trigger_id = $2";

/// The last refusal of `trigger`'s admission, if any was ever recorded.
pub async fn last(
    client: &impl GenericClient,
    trigger: &TriggerName,
) -> Result<Option<AdmissionErrorView>, StoreError> {
    let Some(row) = client
        .query_opt(LAST, &[&trigger.project_id, &trigger.trigger_id])
        .await?
    else {
        return Ok(None);
    };
    Ok(Some(AdmissionErrorView {
        sqlstate: row.col("sqlstate")?,
        message: row.col("message")?,
        owner: row.col("owner")?,
        trigger_revision: row.col("trigger_revision")?,
        cursor_ms: row.col("cursor_ms")?,
        first_failed_at_ms: row.col("first_failed_at_ms")?,
        last_failed_at_ms: row.col("last_failed_at_ms")?,
        failures: row.col("failures")?,
        current: row.col("current")?,
    }))
}

super::statements::statements! {
    RECORD: Runtime,
    BEGIN: Runtime,
    COMMIT: Runtime,
    LAST: Observer,
}
