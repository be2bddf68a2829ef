//! Publishing definitions: one admin transaction that upserts projects, execution revisions,
//! tasks, triggers and their schedule rows (docs/DESIGN.md §4.2).
//!
//! The stored definitions of the projects the manifest names are read, `core::publish_plan`
//! decides what changes, and the plan is written with a fixed number of set-based statements, so
//! publishing ten thousand triggers costs the same handful of round trips as publishing one. An
//! unchanged definition is not written at all.

use std::collections::HashMap;

use tokio_postgres::{Client, GenericClient};
use uuid::Uuid;

use super::error::stored;
use super::retry::{OPERATOR, retry_conflicts};
use super::row::Named;
use super::{Begin, SchemaName, StoreError, run_in_transaction};
use qlsched_core::manifest::{Manifest, TriggerDef};
use qlsched_core::publish_plan::{Current, PublishPlan, StoredHead, StoredTriggerFields, plan};
pub use qlsched_core::publish_plan::{PublishReport, PublishedItem};

// Publishers of one database take turns; admissions are not blocked by this lock.
const LOCK: &str = "SELECT pg_advisory_xact_lock(hashtext('qlsched.publish'))";

const READ_PROJECTS: &str = "SELECT project_id, status FROM projects WHERE project_id = ANY($1)";
const READ_TASKS: &str =
    "SELECT project_id, task_id, revision, content_digest FROM tasks WHERE project_id = ANY($1)";
const READ_TRIGGERS: &str = "SELECT project_id, trigger_id, revision, content_digest FROM triggers WHERE project_id = ANY($1)";
// The stored fields of the triggers a manifest names, to say which fields a change touches.
const READ_TRIGGER_FIELDS: &str = "SELECT project_id, trigger_id, task_id, cron_expr, time_zone,
        misfire_policy, misfire_grace_ms, enabled
    FROM triggers WHERE project_id = ANY($1)";
// The database's now, for each changed trigger's next occurrence.
const NOW: &str = "SELECT now_ms()";

const UPSERT_PROJECTS: &str =
    "INSERT INTO projects (project_id, status, created_at_ms, updated_at_ms)
    SELECT id, status, now_ms(), now_ms() FROM unnest($1::text[], $2::text[]) AS x(id, status)
    ON CONFLICT (project_id) DO UPDATE SET status = excluded.status, updated_at_ms = now_ms()";

// The digest is PostgreSQL's own: sha256 of the jsonb's canonical text, which the admission
// recomputes to detect a corrupted revision.
const INSERT_EXECUTION_REVISIONS: &str = "INSERT INTO execution_revisions
        (execution_revision_id, project_id, kind, spec, digest, created_at_ms)
    SELECT id, project_id, 'remote_worker', spec,
           encode(sha256(convert_to(spec::text, 'UTF8')), 'hex'), now_ms()
    FROM unnest($1::uuid[], $2::text[], $3::jsonb[]) AS x(id, project_id, spec)";

const UPSERT_TASKS: &str = "INSERT INTO tasks
        (project_id, task_id, revision, content_digest, execution_revision_id, created_at_ms, updated_at_ms)
    SELECT project_id, task_id, 1, digest, revision_id, now_ms(), now_ms()
    FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[])
         AS x(project_id, task_id, digest, revision_id)
    ON CONFLICT (project_id, task_id) DO UPDATE
    SET revision = tasks.revision + 1, content_digest = excluded.content_digest,
        execution_revision_id = excluded.execution_revision_id, updated_at_ms = now_ms()
    RETURNING project_id, task_id, revision";

// A changed task voids every claim taken on its old revision: clear those claims and move both
// versions on, so that no admission decided on the old task can commit (the cursor stays).
// Rows are locked in primary-key order, the order every writer of schedule rows locks them in
// (an admission's batch included), so that two writers never wait on each other in a cycle.
const VOID_CLAIMS_OF_TASKS: &str = "WITH target AS (
    SELECT s.project_id, s.trigger_id
    FROM trigger_schedules s
    JOIN triggers t ON s.project_id = t.project_id AND s.trigger_id = t.trigger_id
    JOIN unnest($1::text[], $2::text[]) AS x(project_id, task_id)
      ON t.project_id = x.project_id AND t.task_id = x.task_id
    ORDER BY s.project_id, s.trigger_id
    FOR UPDATE OF s
)
UPDATE trigger_schedules s
    SET claim_owner = NULL, claim_token = NULL, claim_expires_at_ms = NULL,
        claim_version = s.claim_version + 1, state_version = s.state_version + 1,
        updated_at_ms = now_ms()
    FROM target
    WHERE s.project_id = target.project_id AND s.trigger_id = target.trigger_id";

const UPSERT_TRIGGERS: &str = "INSERT INTO triggers
        (project_id, trigger_id, task_id, revision, kind, provider, enabled, cron_expr, time_zone,
         misfire_policy, misfire_grace_ms, content_digest, created_at_ms, updated_at_ms)
    SELECT project_id, trigger_id, task_id, 1, 'cron', 'builtin', enabled, cron_expr, time_zone,
           misfire_policy, grace_ms, digest, now_ms(), now_ms()
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::text[], $6::text[], $7::text[],
                $8::int8[], $9::text[])
         AS x(project_id, trigger_id, task_id, enabled, cron_expr, time_zone, misfire_policy,
              grace_ms, digest)
    ON CONFLICT (project_id, trigger_id) DO UPDATE
    SET revision = triggers.revision + 1, task_id = excluded.task_id, enabled = excluded.enabled,
        cron_expr = excluded.cron_expr, time_zone = excluded.time_zone,
        misfire_policy = excluded.misfire_policy, misfire_grace_ms = excluded.misfire_grace_ms,
        content_digest = excluded.content_digest, updated_at_ms = now_ms()
    RETURNING project_id, trigger_id, revision";

// Create the schedule row of a new trigger head, or reset it for a new revision: cursor and
// claim cleared, both versions moved on, so any claim on the old revision can never commit.
// In primary-key order, the order every writer locks schedule rows in.
const UPSERT_SCHEDULES: &str = "INSERT INTO trigger_schedules
        (project_id, trigger_id, trigger_revision, updated_at_ms)
    SELECT project_id, trigger_id, revision, now_ms()
    FROM unnest($1::text[], $2::text[], $3::int8[]) AS x(project_id, trigger_id, revision)
    ORDER BY project_id, trigger_id
    ON CONFLICT (project_id, trigger_id) DO UPDATE
    SET trigger_revision = excluded.trigger_revision, next_fire_at_ms = NULL,
        accounted_from_ms = NULL, claim_owner = NULL, claim_token = NULL, claim_expires_at_ms = NULL,
        claim_version = trigger_schedules.claim_version + 1,
        state_version = trigger_schedules.state_version + 1, updated_at_ms = now_ms()";

// Statistics for the tables publish changes, as their owner (a SECURITY DEFINER function of
// migration 0004: ANALYZE needs the owner, and the publisher is not).
const ANALYZE: &str = "SELECT analyze_definitions()";

/// Publishes `manifest` in one transaction; with `dry_run`, reports the same and writes nothing.
pub async fn publish(
    client: &mut Client,
    schema: &SchemaName,
    manifest: &Manifest,
    dry_run: bool,
) -> Result<PublishReport, StoreError> {
    if dry_run {
        return dry_run_report(client, schema, manifest).await;
    }
    // Tried again as an operator's action is when contention aborts it (a deadlock with an
    // admission, a lock wait past the bound).
    let writer: &Client = client;
    let plan = retry_conflicts(&OPERATOR, "publish", move |_| async move {
        writer
            .batch_execute(&crate::operator::begin_bounded(
                schema,
                Begin::ReadWrite.statement(),
            ))
            .await?;
        let written = async {
            writer.execute(LOCK, &[]).await?;
            let current = read_current(writer, manifest).await?;
            let mut plan = plan(manifest, &current);
            apply(writer, &mut plan).await?;
            Ok::<_, StoreError>(plan)
        }
        .await;
        let end = if written.is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        let ended = writer.batch_execute(end).await;
        let plan = written?;
        ended?;
        Ok(plan)
    })
    .await?;
    if plan.writes() {
        // Statistics now, not at autovacuum's next pass: a planner without them misjudges every
        // statement that joins these tables. The claim does not depend on them (its plan is
        // pinned), the read models do. The publish has committed; a failure here only warns.
        let analyzed = run_in_transaction(client, schema, Begin::ReadWrite, |client| {
            Box::pin(async move { Ok(client.execute(ANALYZE, &[]).await?) })
        });
        if let Err(error) = analyzed.await {
            tracing::warn!(%error, "published, but could not analyze the definition tables");
        }
    }
    Ok(plan.report(false))
}

/// `--dry-run`: the plan from SELECTs alone, in a READ ONLY transaction, so that a login that may
/// only read (`qlsched_observer`) can see what a publish would change. It takes no publish lock:
/// it waits for no publisher and holds none up. The revisions are those the publish would write:
/// 1 for a new definition, the stored revision plus one for a changed one.
async fn dry_run_report(
    client: &mut Client,
    schema: &SchemaName,
    manifest: &Manifest,
) -> Result<PublishReport, StoreError> {
    let transaction = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
        .read_only(true)
        .start()
        .await?;
    transaction
        .batch_execute(&schema.transaction_settings())
        .await?;
    let current = read_current(&transaction, manifest).await?;
    transaction.rollback().await?;
    Ok(plan(manifest, &current).report(true))
}

/// Writes `plan`: projects, execution revisions and tasks, the claims the changed tasks void,
/// triggers and their schedule rows. Every statement runs, with empty arrays when nothing of its
/// kind changes. The revisions reported for written tasks and triggers are those the database
/// returned.
async fn apply(
    transaction: &impl GenericClient,
    plan: &mut PublishPlan<'_>,
) -> Result<(), StoreError> {
    transaction
        .execute(
            UPSERT_PROJECTS,
            &[
                &plan
                    .projects
                    .iter()
                    .map(|p| p.id.clone())
                    .collect::<Vec<_>>(),
                &plan
                    .projects
                    .iter()
                    .map(|p| p.status.as_str().to_owned())
                    .collect::<Vec<_>>(),
            ],
        )
        .await?;

    let revision_ids: Vec<Uuid> = plan.tasks.iter().map(|_| Uuid::now_v7()).collect();
    let task_projects: Vec<String> = plan.tasks.iter().map(|(p, _)| p.id.clone()).collect();
    transaction
        .execute(
            INSERT_EXECUTION_REVISIONS,
            &[
                &revision_ids,
                &task_projects,
                &plan
                    .tasks
                    .iter()
                    .map(|(_, t)| t.execution.clone())
                    .collect::<Vec<_>>(),
            ],
        )
        .await?;
    let task_revisions = transaction
        .query(
            UPSERT_TASKS,
            &[
                &task_projects,
                &plan
                    .tasks
                    .iter()
                    .map(|(_, t)| t.id.clone())
                    .collect::<Vec<_>>(),
                &plan
                    .tasks
                    .iter()
                    .map(|(_, t)| t.content_digest.clone())
                    .collect::<Vec<_>>(),
                &revision_ids,
            ],
        )
        .await?;
    fill_revisions(&mut plan.items, "task", "task_id", &task_revisions)?;
    transaction
        .execute(
            VOID_CLAIMS_OF_TASKS,
            &[
                &plan
                    .voided_tasks
                    .iter()
                    .map(|(p, _)| p.id.clone())
                    .collect::<Vec<_>>(),
                &plan
                    .voided_tasks
                    .iter()
                    .map(|(_, t)| t.id.clone())
                    .collect::<Vec<_>>(),
            ],
        )
        .await?;

    let triggers = &plan.triggers;
    let column = |f: &dyn Fn(&TriggerDef) -> String| {
        triggers.iter().map(|(_, t, _)| f(t)).collect::<Vec<_>>()
    };
    let trigger_revisions = transaction
        .query(
            UPSERT_TRIGGERS,
            &[
                &triggers
                    .iter()
                    .map(|(p, _, _)| p.id.clone())
                    .collect::<Vec<_>>(),
                &column(&|t| t.id.clone()),
                &column(&|t| t.task.clone()),
                &triggers
                    .iter()
                    .map(|(_, t, _)| t.enabled)
                    .collect::<Vec<_>>(),
                &column(&|t| t.cron_expr.clone()),
                &column(&|t| t.time_zone.clone()),
                &column(&|t| t.misfire.as_str().to_owned()),
                &triggers
                    .iter()
                    .map(|(_, t, _)| t.misfire_grace_ms)
                    .collect::<Vec<_>>(),
                &column(&|t| t.content_digest.clone()),
            ],
        )
        .await?;
    fill_revisions(&mut plan.items, "trigger", "trigger_id", &trigger_revisions)?;
    // The schedule rows of the triggers written, at the revisions the database gave them:
    // created for a new trigger, reset for a changed one.
    let column = |name: &'static str| {
        trigger_revisions
            .iter()
            .map(|r| r.col::<String>(name))
            .collect::<Result<Vec<_>, _>>()
    };
    let revisions = trigger_revisions
        .iter()
        .map(|r| r.col::<i64>("revision"))
        .collect::<Result<Vec<_>, _>>()?;
    transaction
        .execute(
            UPSERT_SCHEDULES,
            &[&column("project_id")?, &column("trigger_id")?, &revisions],
        )
        .await?;
    Ok(())
}

/// The stored definitions of the projects `manifest` names, and the database's now.
async fn read_current(
    transaction: &impl GenericClient,
    manifest: &Manifest,
) -> Result<Current, StoreError> {
    let project_ids: Vec<String> = manifest.projects.iter().map(|p| p.id.clone()).collect();
    let projects = transaction
        .query(READ_PROJECTS, &[&project_ids])
        .await?
        .iter()
        .map(|row| {
            Ok((
                row.col("project_id")?,
                stored("projects", "status", row.col("status")?)?,
            ))
        })
        .collect::<Result<_, StoreError>>()?;
    // A task's or a trigger's head, keyed by its project and `id` (its own id's column).
    let heads = |rows: Vec<tokio_postgres::Row>, id: &'static str| {
        rows.iter()
            .map(|row| {
                Ok((
                    (row.col("project_id")?, row.col(id)?),
                    StoredHead {
                        revision: row.col("revision")?,
                        digest: row.col("content_digest")?,
                    },
                ))
            })
            .collect::<Result<_, StoreError>>()
    };
    Ok(Current {
        projects,
        tasks: heads(
            transaction.query(READ_TASKS, &[&project_ids]).await?,
            "task_id",
        )?,
        triggers: heads(
            transaction.query(READ_TRIGGERS, &[&project_ids]).await?,
            "trigger_id",
        )?,
        trigger_fields: transaction
            .query(READ_TRIGGER_FIELDS, &[&project_ids])
            .await?
            .iter()
            .map(|row| {
                Ok((
                    (row.col("project_id")?, row.col("trigger_id")?),
                    StoredTriggerFields {
                        task: row.col("task_id")?,
                        cron: row.col("cron_expr")?,
                        time_zone: row.col("time_zone")?,
                        misfire: row.col("misfire_policy")?,
                        misfire_grace_ms: row.col("misfire_grace_ms")?,
                        enabled: row.col("enabled")?,
                    },
                ))
            })
            .collect::<Result<_, StoreError>>()?,
        now_ms: transaction.query_one(NOW, &[]).await?.get(0),
    })
}

/// Copies the revisions a RETURNING clause reported into the matching written items: `rows`
/// name each by its project and `id` (the column of its own id).
fn fill_revisions(
    items: &mut [PublishedItem],
    kind: &str,
    id: &'static str,
    rows: &[tokio_postgres::Row],
) -> Result<(), StoreError> {
    let revisions = rows
        .iter()
        .map(|row| {
            Ok((
                format!(
                    "{}/{}",
                    row.col::<String>("project_id")?,
                    row.col::<String>(id)?
                ),
                row.col("revision")?,
            ))
        })
        .collect::<Result<HashMap<String, i64>, StoreError>>()?;
    for item in items.iter_mut().filter(|item| item.kind == kind) {
        if let Some(revision) = revisions.get(&item.name) {
            item.revision = Some(*revision);
        }
    }
    Ok(())
}

super::statements::statements! {
    LOCK: Admin,
    READ_PROJECTS: Admin,
    READ_TASKS: Admin,
    READ_TRIGGERS: Admin,
    READ_TRIGGER_FIELDS: Admin,
    NOW: Admin,
    UPSERT_PROJECTS: Admin,
    INSERT_EXECUTION_REVISIONS: Admin,
    UPSERT_TASKS: Admin,
    VOID_CLAIMS_OF_TASKS: Admin,
    UPSERT_TRIGGERS: Admin,
    UPSERT_SCHEDULES: Admin,
    ANALYZE: Admin,
}
