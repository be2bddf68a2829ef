//! Publishing definitions: one admin transaction that upserts projects, execution revisions,
//! tasks, triggers and their schedule rows (docs/DESIGN.md §4.2).
//!
//! The manifest is diffed against the stored definitions by content digest, then written with a
//! fixed number of set-based statements, so publishing ten thousand triggers costs the same
//! handful of round trips as publishing one. An unchanged definition is not written at all.

use std::collections::HashMap;

use serde::Serialize;
use tokio_postgres::Client;
use uuid::Uuid;

use super::StoreError;
use super::error::stored;
use crate::core::manifest::{Manifest, ProjectDef, TaskDef, TriggerDef};
use crate::core::{Change, CronSchedule, ProjectStatus};

/// What publishing did to one definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PublishedItem {
    /// `project`, `task` or `trigger`.
    pub kind: &'static str,
    /// `PROJECT`, or `PROJECT/TASK`, or `PROJECT/TRIGGER`.
    pub name: String,
    pub change: Change,
    /// The revision after publishing (tasks and triggers).
    pub revision: Option<i64>,
    /// A changed trigger: the manifest fields that differ from the stored revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_fields: Option<Vec<&'static str>>,
    /// A created or changed trigger: its first occurrence after the database's now, where its
    /// new cursor will start (docs/DESIGN.md §4.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_occurrence_ms: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PublishReport {
    pub dry_run: bool,
    pub items: Vec<PublishedItem>,
}

impl PublishReport {
    pub fn count(&self, change: Change) -> usize {
        self.items
            .iter()
            .filter(|item| item.change == change)
            .count()
    }
}

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
const VOID_CLAIMS_OF_TASKS: &str = "UPDATE trigger_schedules s
    SET claim_owner = NULL, claim_token = NULL, claim_expires_at_ms = NULL,
        claim_version = s.claim_version + 1, state_version = s.state_version + 1,
        updated_at_ms = now_ms()
    FROM triggers t, unnest($1::text[], $2::text[]) AS x(project_id, task_id)
    WHERE t.project_id = x.project_id AND t.task_id = x.task_id
      AND s.project_id = t.project_id AND s.trigger_id = t.trigger_id";

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
const UPSERT_SCHEDULES: &str = "INSERT INTO trigger_schedules
        (project_id, trigger_id, trigger_revision, updated_at_ms)
    SELECT project_id, trigger_id, revision, now_ms()
    FROM unnest($1::text[], $2::text[], $3::int8[]) AS x(project_id, trigger_id, revision)
    ON CONFLICT (project_id, trigger_id) DO UPDATE
    SET trigger_revision = excluded.trigger_revision, next_fire_at_ms = NULL,
        accounted_from_ms = NULL, claim_owner = NULL, claim_token = NULL, claim_expires_at_ms = NULL,
        claim_version = trigger_schedules.claim_version + 1,
        state_version = trigger_schedules.state_version + 1, updated_at_ms = now_ms()";

// Statistics for the tables publish changes, as their owner (a SECURITY DEFINER function of
// migration 0004: ANALYZE needs the owner, and the publisher is not).
const ANALYZE: &str = "SELECT analyze_definitions()";

/// Publishes `manifest` in one transaction; with `dry_run`, reports the same and rolls back.
pub async fn publish(
    client: &mut Client,
    manifest: &Manifest,
    dry_run: bool,
) -> Result<PublishReport, StoreError> {
    if dry_run {
        return dry_run_report(client, manifest).await;
    }
    let transaction = client.transaction().await?;
    transaction.execute(LOCK, &[]).await?;
    let project_ids: Vec<String> = manifest.projects.iter().map(|p| p.id.clone()).collect();
    let stored = Stored::read(&transaction, &project_ids).await?;
    let mut items = Vec::new();

    let projects: Vec<&ProjectDef> = manifest
        .projects
        .iter()
        .filter(|p| {
            let change = match stored.projects.get(&p.id) {
                None => Change::Created,
                Some(status) if *status != p.status => Change::Changed,
                Some(_) => Change::Unchanged,
            };
            items.push(PublishedItem {
                kind: "project",
                name: p.id.clone(),
                change,
                revision: None,
                changed_fields: None,
                next_occurrence_ms: None,
            });
            change != Change::Unchanged
        })
        .collect();
    transaction
        .execute(
            UPSERT_PROJECTS,
            &[
                &projects.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
                &projects
                    .iter()
                    .map(|p| p.status.as_str().to_owned())
                    .collect::<Vec<_>>(),
            ],
        )
        .await?;

    let mut tasks: Vec<(&ProjectDef, &TaskDef, Uuid)> = Vec::new();
    let mut changed_tasks: Vec<(&ProjectDef, &TaskDef)> = Vec::new();
    for project in &manifest.projects {
        for task in &project.tasks {
            let key = (project.id.clone(), task.id.clone());
            let Some(change) = change_of(
                &stored.tasks,
                &key,
                &task.content_digest,
                "task",
                &mut items,
            ) else {
                continue;
            };
            if change == Change::Changed {
                changed_tasks.push((project, task));
            }
            tasks.push((project, task, Uuid::now_v7()));
            items.push(PublishedItem {
                kind: "task",
                name: join(&key),
                change,
                revision: None,
                changed_fields: None,
                next_occurrence_ms: None,
            });
        }
    }
    transaction
        .execute(
            INSERT_EXECUTION_REVISIONS,
            &[
                &tasks.iter().map(|(_, _, id)| *id).collect::<Vec<_>>(),
                &tasks
                    .iter()
                    .map(|(p, _, _)| p.id.clone())
                    .collect::<Vec<_>>(),
                &tasks
                    .iter()
                    .map(|(_, t, _)| t.execution.clone())
                    .collect::<Vec<_>>(),
            ],
        )
        .await?;
    let task_revisions = transaction
        .query(
            UPSERT_TASKS,
            &[
                &tasks
                    .iter()
                    .map(|(p, _, _)| p.id.clone())
                    .collect::<Vec<_>>(),
                &tasks
                    .iter()
                    .map(|(_, t, _)| t.id.clone())
                    .collect::<Vec<_>>(),
                &tasks
                    .iter()
                    .map(|(_, t, _)| t.content_digest.clone())
                    .collect::<Vec<_>>(),
                &tasks.iter().map(|(_, _, id)| *id).collect::<Vec<_>>(),
            ],
        )
        .await?;
    fill_revisions(&mut items, "task", &task_revisions);
    transaction
        .execute(
            VOID_CLAIMS_OF_TASKS,
            &[
                &changed_tasks
                    .iter()
                    .map(|(p, _)| p.id.clone())
                    .collect::<Vec<_>>(),
                &changed_tasks
                    .iter()
                    .map(|(_, t)| t.id.clone())
                    .collect::<Vec<_>>(),
            ],
        )
        .await?;

    let mut triggers: Vec<(&ProjectDef, &TriggerDef)> = Vec::new();
    for project in &manifest.projects {
        for trigger in &project.triggers {
            let key = (project.id.clone(), trigger.id.clone());
            let Some(change) = change_of(
                &stored.triggers,
                &key,
                &trigger.content_digest,
                "trigger",
                &mut items,
            ) else {
                continue;
            };
            triggers.push((project, trigger));
            let changed_fields = stored
                .trigger_fields
                .get(&key)
                .map(|before| before.differences(trigger));
            let next_occurrence_ms = CronSchedule::parse(&trigger.cron_expr, &trigger.time_zone)
                .and_then(|schedule| schedule.next_after(stored.now_ms))
                .ok();
            items.push(PublishedItem {
                kind: "trigger",
                name: join(&key),
                change,
                revision: None,
                changed_fields,
                next_occurrence_ms,
            });
        }
    }
    let column =
        |f: &dyn Fn(&TriggerDef) -> String| triggers.iter().map(|(_, t)| f(t)).collect::<Vec<_>>();
    let trigger_revisions = transaction
        .query(
            UPSERT_TRIGGERS,
            &[
                &triggers
                    .iter()
                    .map(|(p, _)| p.id.clone())
                    .collect::<Vec<_>>(),
                &column(&|t| t.id.clone()),
                &column(&|t| t.task.clone()),
                &triggers.iter().map(|(_, t)| t.enabled).collect::<Vec<_>>(),
                &column(&|t| t.cron_expr.clone()),
                &column(&|t| t.time_zone.clone()),
                &column(&|t| t.misfire.as_str().to_owned()),
                &triggers
                    .iter()
                    .map(|(_, t)| t.misfire_grace_ms)
                    .collect::<Vec<_>>(),
                &column(&|t| t.content_digest.clone()),
            ],
        )
        .await?;
    fill_revisions(&mut items, "trigger", &trigger_revisions);
    transaction
        .execute(
            UPSERT_SCHEDULES,
            &[
                &trigger_revisions
                    .iter()
                    .map(|r| r.get::<_, String>(0))
                    .collect::<Vec<_>>(),
                &trigger_revisions
                    .iter()
                    .map(|r| r.get::<_, String>(1))
                    .collect::<Vec<_>>(),
                &trigger_revisions
                    .iter()
                    .map(|r| r.get::<_, i64>(2))
                    .collect::<Vec<_>>(),
            ],
        )
        .await?;

    transaction.commit().await?;
    if items.iter().any(|item| item.change != Change::Unchanged) {
        // Statistics now, not at autovacuum's next pass: a planner without them misjudges every
        // statement that joins these tables. The claim does not depend on them (its plan is
        // pinned), the read models do. The publish has committed; a failure here only warns.
        if let Err(error) = client.execute(ANALYZE, &[]).await {
            tracing::warn!(%error, "published, but could not analyze the definition tables");
        }
    }
    Ok(PublishReport { dry_run, items })
}

/// `--dry-run`: the same diff from SELECTs alone, in a READ ONLY transaction, so that a login
/// that may only read (`qlsched_observer`) can see what a publish would change. It takes no
/// publish lock: it waits for no publisher and holds none up. The revisions are those the
/// publish would write: 1 for a new definition, the stored revision plus one for a changed one.
async fn dry_run_report(
    client: &mut Client,
    manifest: &Manifest,
) -> Result<PublishReport, StoreError> {
    let transaction = client.build_transaction().read_only(true).start().await?;
    let project_ids: Vec<String> = manifest.projects.iter().map(|p| p.id.clone()).collect();
    let stored = Stored::read(&transaction, &project_ids).await?;
    transaction.rollback().await?;
    let mut items: Vec<PublishedItem> = manifest
        .projects
        .iter()
        .map(|p| PublishedItem {
            kind: "project",
            name: p.id.clone(),
            change: match stored.projects.get(&p.id) {
                None => Change::Created,
                Some(status) if *status != p.status => Change::Changed,
                Some(_) => Change::Unchanged,
            },
            revision: None,
            changed_fields: None,
            next_occurrence_ms: None,
        })
        .collect();
    let diff = |kind: &'static str,
                stored: &HashMap<(String, String), (i64, String)>,
                key: &(String, String),
                digest: &str| {
        let (change, revision) = match stored.get(key) {
            None => (Change::Created, 1),
            Some((revision, stored_digest)) if stored_digest != digest => {
                (Change::Changed, revision + 1)
            }
            Some((revision, _)) => (Change::Unchanged, *revision),
        };
        PublishedItem {
            kind,
            name: join(key),
            change,
            revision: Some(revision),
            changed_fields: None,
            next_occurrence_ms: None,
        }
    };
    for project in &manifest.projects {
        for task in &project.tasks {
            let key = (project.id.clone(), task.id.clone());
            items.push(diff("task", &stored.tasks, &key, &task.content_digest));
        }
    }
    for project in &manifest.projects {
        for trigger in &project.triggers {
            let key = (project.id.clone(), trigger.id.clone());
            let mut item = diff("trigger", &stored.triggers, &key, &trigger.content_digest);
            // As publish reports it: the fields that changed, and the next occurrence.
            if item.change != Change::Unchanged {
                item.changed_fields = stored
                    .trigger_fields
                    .get(&key)
                    .map(|before| before.differences(trigger));
                item.next_occurrence_ms =
                    CronSchedule::parse(&trigger.cron_expr, &trigger.time_zone)
                        .and_then(|schedule| schedule.next_after(stored.now_ms))
                        .ok();
            }
            items.push(item);
        }
    }
    Ok(PublishReport {
        dry_run: true,
        items,
    })
}

/// The stored state the manifest is diffed against.
struct Stored {
    projects: HashMap<String, ProjectStatus>,
    tasks: HashMap<(String, String), (i64, String)>,
    triggers: HashMap<(String, String), (i64, String)>,
    trigger_fields: HashMap<(String, String), TriggerFields>,
    now_ms: i64,
}

/// A stored trigger's fields, as the manifest names them.
struct TriggerFields {
    task: String,
    cron: String,
    time_zone: String,
    misfire: String,
    misfire_grace_ms: i64,
    enabled: bool,
}

impl TriggerFields {
    /// The manifest fields of `new` that differ from these, in the manifest's order.
    fn differences(&self, new: &TriggerDef) -> Vec<&'static str> {
        [
            ("task", self.task != new.task),
            ("cron", self.cron != new.cron_expr),
            ("time_zone", self.time_zone != new.time_zone),
            ("misfire", self.misfire != new.misfire.as_str()),
            (
                "misfire_grace",
                self.misfire_grace_ms != new.misfire_grace_ms,
            ),
            ("enabled", self.enabled != new.enabled),
        ]
        .into_iter()
        .filter_map(|(name, differs)| differs.then_some(name))
        .collect()
    }
}

impl Stored {
    async fn read(
        transaction: &tokio_postgres::Transaction<'_>,
        project_ids: &[String],
    ) -> Result<Self, StoreError> {
        let projects = transaction
            .query(READ_PROJECTS, &[&project_ids])
            .await?
            .iter()
            .map(|row| Ok((row.get(0), stored("projects", "status", row.get(1))?)))
            .collect::<Result<_, StoreError>>()?;
        let keyed = |rows: Vec<tokio_postgres::Row>| {
            rows.iter()
                .map(|row| ((row.get(0), row.get(1)), (row.get(2), row.get(3))))
                .collect()
        };
        Ok(Stored {
            projects,
            tasks: keyed(transaction.query(READ_TASKS, &[&project_ids]).await?),
            triggers: keyed(transaction.query(READ_TRIGGERS, &[&project_ids]).await?),
            trigger_fields: transaction
                .query(READ_TRIGGER_FIELDS, &[&project_ids])
                .await?
                .iter()
                .map(|row| {
                    (
                        (row.get(0), row.get(1)),
                        TriggerFields {
                            task: row.get(2),
                            cron: row.get(3),
                            time_zone: row.get(4),
                            misfire: row.get(5),
                            misfire_grace_ms: row.get(6),
                            enabled: row.get(7),
                        },
                    )
                })
                .collect(),
            now_ms: transaction.query_one(NOW, &[]).await?.get(0),
        })
    }
}

fn join((project, item): &(String, String)) -> String {
    format!("{project}/{item}")
}

/// `created` or `changed` for a definition to write; `None` for an unchanged one, which is
/// recorded in `items` as such (with its stored revision) and not written.
fn change_of(
    stored: &HashMap<(String, String), (i64, String)>,
    key: &(String, String),
    digest: &str,
    kind: &'static str,
    items: &mut Vec<PublishedItem>,
) -> Option<Change> {
    match stored.get(key) {
        None => Some(Change::Created),
        Some((_, stored_digest)) if stored_digest != digest => Some(Change::Changed),
        Some((revision, _)) => {
            items.push(unchanged(kind, key, *revision));
            None
        }
    }
}

fn unchanged(kind: &'static str, key: &(String, String), revision: i64) -> PublishedItem {
    PublishedItem {
        kind,
        name: join(key),
        change: Change::Unchanged,
        revision: Some(revision),
        changed_fields: None,
        next_occurrence_ms: None,
    }
}

/// Copies the revisions a RETURNING clause reported into the matching report items.
fn fill_revisions(items: &mut [PublishedItem], kind: &str, rows: &[tokio_postgres::Row]) {
    let revisions: HashMap<String, i64> = rows
        .iter()
        .map(|row| {
            (
                format!("{}/{}", row.get::<_, String>(0), row.get::<_, String>(1)),
                row.get(2),
            )
        })
        .collect();
    for item in items
        .iter_mut()
        .filter(|item| item.kind == kind && item.revision.is_none())
    {
        item.revision = revisions.get(&item.name).copied();
    }
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
