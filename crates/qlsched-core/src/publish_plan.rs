//! What publishing a manifest changes (docs/DESIGN.md §4.2), decided from plain data: the
//! manifest and the stored definitions of the projects it names. `store::publish` reads those
//! rows, asks [`plan`], and applies the plan in the same transaction; `publish --dry-run` reports
//! the plan and writes nothing. Keeping the decision here lets it be tested without a database.
//!
//! Each definition is compared with the stored one by content digest: an unchanged definition is
//! not written. A written task gets a new execution revision, and a changed one voids every claim
//! on its triggers (their cursors stay). A written trigger's schedule row is created (a new
//! trigger) or reset (a changed one: cursor and claim cleared). The plan has no word for a pause:
//! that is operational state (docs/DESIGN.md §4.10), and publish leaves it as it is.

use std::collections::HashMap;

use serde::Serialize;

use super::cron::CronSchedule;
use super::manifest::{Manifest, ProjectDef, ProjectStatus, TaskDef, TriggerDef};
use super::status::Change;

/// What publishing did (or, with `--dry-run`, would do) to one definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PublishedItem {
    /// `project`, `task` or `trigger`.
    pub kind: &'static str,
    /// `PROJECT`, or `PROJECT/TASK`, or `PROJECT/TRIGGER`.
    pub name: String,
    pub change: Change,
    /// The revision after publishing (tasks and triggers; with --dry-run, the one it would
    /// write).
    pub revision: Option<i64>,
    /// A changed trigger: the manifest fields that differ from the stored revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("items" = {"enum": [
        "task", "cron", "time_zone", "misfire", "misfire_grace", "enabled"
    ]})))]
    pub changed_fields: Option<Vec<&'static str>>,
    /// A created or changed trigger: its first occurrence after the database's now, where its
    /// new cursor will start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_occurrence_ms: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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

/// `(project, task)` or `(project, trigger)`.
pub type Key = (String, String);

/// A stored task or trigger head: its revision and content digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredHead {
    pub revision: i64,
    pub digest: String,
}

/// A stored trigger's fields, as the manifest names them, to say which fields a change touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTriggerFields {
    pub task: String,
    pub cron: String,
    pub time_zone: String,
    pub misfire: String,
    pub misfire_grace_ms: i64,
    pub enabled: bool,
}

impl StoredTriggerFields {
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

/// The stored definitions of the projects a manifest names, and the database's now.
#[derive(Debug, Clone, Default)]
pub struct Current {
    pub projects: HashMap<String, ProjectStatus>,
    pub tasks: HashMap<Key, StoredHead>,
    pub triggers: HashMap<Key, StoredHead>,
    pub trigger_fields: HashMap<Key, StoredTriggerFields>,
    /// Where a written trigger's next occurrence is counted from.
    pub now_ms: i64,
}

/// What happens to the schedule row of a written trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleWrite {
    /// A new trigger: a new row with a null cursor.
    Create,
    /// A changed trigger: cursor and claim cleared, both versions moved on, so that a claim taken
    /// on the old revision can never commit. A pause stays.
    Reset,
}

/// What publishing a manifest writes, and what it reports.
#[derive(Debug, Clone)]
pub struct PublishPlan<'m> {
    /// One item per definition of the manifest: projects, then tasks, then triggers, each in the
    /// manifest's order. A written task's or trigger's revision is the one publishing gives it
    /// (1 when new, the stored one plus one when changed); an unchanged one keeps its own.
    pub items: Vec<PublishedItem>,
    /// Projects created or whose status changed.
    pub projects: Vec<&'m ProjectDef>,
    /// Tasks created or changed: each gets a new execution revision and task revision.
    pub tasks: Vec<(&'m ProjectDef, &'m TaskDef)>,
    /// Changed tasks: every claim on a trigger of theirs is voided; the cursors stay.
    pub voided_tasks: Vec<(&'m ProjectDef, &'m TaskDef)>,
    /// Triggers created or changed, with what happens to their schedule rows.
    pub triggers: Vec<(&'m ProjectDef, &'m TriggerDef, ScheduleWrite)>,
}

impl PublishPlan<'_> {
    /// Whether publishing writes anything at all.
    pub fn writes(&self) -> bool {
        self.items
            .iter()
            .any(|item| item.change != Change::Unchanged)
    }

    /// The report of this plan.
    pub fn report(self, dry_run: bool) -> PublishReport {
        PublishReport {
            dry_run,
            items: self.items,
        }
    }
}

/// Plans publishing `manifest` over the `current` stored definitions.
pub fn plan<'m>(manifest: &'m Manifest, current: &Current) -> PublishPlan<'m> {
    let mut plan = PublishPlan {
        items: Vec::new(),
        projects: Vec::new(),
        tasks: Vec::new(),
        voided_tasks: Vec::new(),
        triggers: Vec::new(),
    };
    for project in &manifest.projects {
        let change = match current.projects.get(&project.id) {
            None => Change::Created,
            Some(status) if *status != project.status => Change::Changed,
            Some(_) => Change::Unchanged,
        };
        if change != Change::Unchanged {
            plan.projects.push(project);
        }
        plan.items
            .push(item("project", project.id.clone(), change, None));
    }
    for project in &manifest.projects {
        for task in &project.tasks {
            let key = (project.id.clone(), task.id.clone());
            let (change, revision) = compare(current.tasks.get(&key), &task.content_digest);
            match change {
                Change::Created => plan.tasks.push((project, task)),
                Change::Changed => {
                    plan.tasks.push((project, task));
                    plan.voided_tasks.push((project, task));
                }
                Change::Unchanged => {}
            }
            plan.items
                .push(item("task", join(&key), change, Some(revision)));
        }
    }
    for project in &manifest.projects {
        for trigger in &project.triggers {
            let key = (project.id.clone(), trigger.id.clone());
            let (change, revision) = compare(current.triggers.get(&key), &trigger.content_digest);
            let mut item = item("trigger", join(&key), change, Some(revision));
            let schedule = match change {
                Change::Created => ScheduleWrite::Create,
                Change::Changed => ScheduleWrite::Reset,
                Change::Unchanged => {
                    plan.items.push(item);
                    continue;
                }
            };
            item.changed_fields = current
                .trigger_fields
                .get(&key)
                .map(|before| before.differences(trigger));
            item.next_occurrence_ms = CronSchedule::parse(&trigger.cron_expr, &trigger.time_zone)
                .and_then(|cron| cron.next_after(current.now_ms))
                .ok();
            plan.items.push(item);
            plan.triggers.push((project, trigger, schedule));
        }
    }
    plan
}

/// A definition's change by content digest, and its revision after publishing.
fn compare(stored: Option<&StoredHead>, digest: &str) -> (Change, i64) {
    match stored {
        None => (Change::Created, 1),
        Some(head) if head.digest != digest => (Change::Changed, head.revision + 1),
        Some(head) => (Change::Unchanged, head.revision),
    }
}

fn item(kind: &'static str, name: String, change: Change, revision: Option<i64>) -> PublishedItem {
    PublishedItem {
        kind,
        name,
        change,
        revision,
        changed_fields: None,
        next_occurrence_ms: None,
    }
}

fn join((project, item): &Key) -> String {
    format!("{project}/{item}")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::parse_manifest;

    /// 2024-01-01T00:00:00Z.
    const NOW_MS: i64 = 1_704_067_200_000;

    fn manifest(triggers: Value) -> Manifest {
        let text = json!({"projects": [{
            "id": "p",
            "tasks": [{"id": "backup", "execution": {"kind": "remote_worker"}}],
            "triggers": triggers,
        }]});
        parse_manifest(&text.to_string()).expect("a valid manifest")
    }

    fn trigger(id: &str, cron: &str) -> Value {
        json!({"id": id, "task": "backup", "cron": cron})
    }

    /// The stored state `manifest` leaves once published (every definition at `revision`).
    fn stored_as(manifest: &Manifest, revision: i64) -> Current {
        let mut current = Current {
            now_ms: NOW_MS,
            ..Current::default()
        };
        for project in &manifest.projects {
            current.projects.insert(project.id.clone(), project.status);
            for task in &project.tasks {
                current.tasks.insert(
                    (project.id.clone(), task.id.clone()),
                    StoredHead {
                        revision,
                        digest: task.content_digest.clone(),
                    },
                );
            }
            for trigger in &project.triggers {
                let key = (project.id.clone(), trigger.id.clone());
                let head = StoredHead {
                    revision,
                    digest: trigger.content_digest.clone(),
                };
                current.triggers.insert(key.clone(), head);
                current.trigger_fields.insert(
                    key,
                    StoredTriggerFields {
                        task: trigger.task.clone(),
                        cron: trigger.cron_expr.clone(),
                        time_zone: trigger.time_zone.clone(),
                        misfire: trigger.misfire.as_str().to_owned(),
                        misfire_grace_ms: trigger.misfire_grace_ms,
                        enabled: trigger.enabled,
                    },
                );
            }
        }
        current
    }

    fn item_of<'a>(plan: &'a PublishPlan<'_>, name: &str) -> &'a PublishedItem {
        plan.items
            .iter()
            .find(|item| item.name == name)
            .unwrap_or_else(|| panic!("no item {name} in {:?}", plan.items))
    }

    fn written_triggers<'m>(plan: &PublishPlan<'m>) -> Vec<(&'m str, ScheduleWrite)> {
        plan.triggers
            .iter()
            .map(|(_, trigger, schedule)| (trigger.id.as_str(), *schedule))
            .collect()
    }

    #[test]
    fn an_empty_database_gets_everything_created_at_revision_one() {
        let manifest = manifest(json!([trigger("hourly", "0 * * * *")]));
        let current = Current {
            now_ms: NOW_MS,
            ..Current::default()
        };
        let plan = plan(&manifest, &current);
        let kinds: Vec<(&str, &str, Change, Option<i64>)> = plan
            .items
            .iter()
            .map(|i| (i.kind, i.name.as_str(), i.change, i.revision))
            .collect();
        assert_eq!(
            kinds,
            [
                ("project", "p", Change::Created, None),
                ("task", "p/backup", Change::Created, Some(1)),
                ("trigger", "p/hourly", Change::Created, Some(1)),
            ]
        );
        assert_eq!(plan.projects.len(), 1);
        assert_eq!(plan.tasks.len(), 1);
        assert!(plan.voided_tasks.is_empty(), "nothing stored to void");
        assert_eq!(written_triggers(&plan), [("hourly", ScheduleWrite::Create)]);
        let hourly = item_of(&plan, "p/hourly");
        assert_eq!(hourly.changed_fields, None, "a new trigger has no before");
        assert_eq!(hourly.next_occurrence_ms, Some(NOW_MS + 3_600_000));
    }

    #[test]
    fn an_unchanged_manifest_writes_nothing_and_keeps_every_revision() {
        let manifest = manifest(json!([trigger("hourly", "0 * * * *")]));
        let plan = plan(&manifest, &stored_as(&manifest, 4));
        assert!(!plan.writes());
        assert!(plan.projects.is_empty() && plan.tasks.is_empty() && plan.triggers.is_empty());
        assert!(plan.voided_tasks.is_empty());
        assert!(
            plan.items
                .iter()
                .all(|i| i.change == Change::Unchanged && i.next_occurrence_ms.is_none())
        );
        assert_eq!(item_of(&plan, "p/backup").revision, Some(4));
        assert_eq!(item_of(&plan, "p/hourly").revision, Some(4));
    }

    #[test]
    fn a_new_trigger_beside_stored_ones_is_the_only_write() {
        let before = manifest(json!([trigger("hourly", "0 * * * *")]));
        let after = manifest(json!([
            trigger("hourly", "0 * * * *"),
            trigger("daily", "0 3 * * *")
        ]));
        let plan = plan(&after, &stored_as(&before, 2));
        assert!(plan.projects.is_empty() && plan.tasks.is_empty());
        assert_eq!(written_triggers(&plan), [("daily", ScheduleWrite::Create)]);
        let daily = item_of(&plan, "p/daily");
        assert_eq!((daily.change, daily.revision), (Change::Created, Some(1)));
        assert_eq!(daily.next_occurrence_ms, Some(NOW_MS + 3 * 3_600_000));
        assert_eq!(item_of(&plan, "p/hourly").change, Change::Unchanged);
    }

    #[test]
    fn a_changed_cron_resets_the_schedule_row_and_names_the_field() {
        let before = manifest(json!([trigger("t", "0 * * * *")]));
        let after = manifest(json!([trigger("t", "*/5 * * * *")]));
        let plan = plan(&after, &stored_as(&before, 3));
        assert_eq!(written_triggers(&plan), [("t", ScheduleWrite::Reset)]);
        let t = item_of(&plan, "p/t");
        assert_eq!((t.change, t.revision), (Change::Changed, Some(4)));
        assert_eq!(t.changed_fields, Some(vec!["cron"]));
        assert_eq!(t.next_occurrence_ms, Some(NOW_MS + 5 * 60_000));
        assert!(plan.tasks.is_empty(), "the task is as stored");
    }

    #[test]
    fn disabling_a_trigger_is_a_change_that_resets_its_row() {
        let before = manifest(json!([trigger("t", "0 * * * *")]));
        let mut disabled = trigger("t", "0 * * * *");
        disabled["enabled"] = json!(false);
        let after = manifest(json!([disabled]));
        let plan = plan(&after, &stored_as(&before, 1));
        assert_eq!(written_triggers(&plan), [("t", ScheduleWrite::Reset)]);
        assert!(!plan.triggers[0].1.enabled, "written as disabled");
        let t = item_of(&plan, "p/t");
        assert_eq!(t.changed_fields, Some(vec!["enabled"]));
        assert_eq!(t.revision, Some(2));
    }

    #[test]
    fn a_changed_task_voids_its_claims_but_resets_no_schedule_row() {
        let before = manifest(json!([trigger("t", "0 * * * *")]));
        let text = json!({"projects": [{
            "id": "p",
            "tasks": [{"id": "backup", "execution": {"kind": "remote_worker", "queue": "db"}}],
            "triggers": [trigger("t", "0 * * * *")],
        }]});
        let after = parse_manifest(&text.to_string()).expect("a valid manifest");
        let plan = plan(&after, &stored_as(&before, 1));
        assert_eq!(plan.tasks.len(), 1);
        assert_eq!(plan.voided_tasks.len(), 1);
        assert_eq!(item_of(&plan, "p/backup").revision, Some(2));
        assert!(plan.triggers.is_empty(), "the trigger's cursor stays");
    }

    #[test]
    fn a_pause_is_left_alone_only_the_changed_triggers_row_is_reset() {
        // Both rows are paused by an operator (operational state the plan never reads); the
        // manifest changes one trigger's grace. Only that row is reset (cursor and claim, not
        // the pause); the other is not written at all.
        let before = manifest(json!([
            trigger("a", "* * * * *"),
            trigger("b", "* * * * *")
        ]));
        let mut graced = trigger("b", "* * * * *");
        graced["misfire_grace"] = json!("5s");
        let after = manifest(json!([trigger("a", "* * * * *"), graced]));
        let plan = plan(&after, &stored_as(&before, 1));
        assert_eq!(written_triggers(&plan), [("b", ScheduleWrite::Reset)]);
        assert_eq!(
            item_of(&plan, "p/b").changed_fields,
            Some(vec!["misfire_grace"])
        );
        assert_eq!(item_of(&plan, "p/a").change, Change::Unchanged);
    }

    #[test]
    fn a_suspended_project_is_a_project_change_only() {
        let before = manifest(json!([trigger("t", "0 * * * *")]));
        let mut current = stored_as(&before, 1);
        current
            .projects
            .insert("p".to_owned(), ProjectStatus::Suspended);
        let plan = plan(&before, &current);
        assert_eq!(item_of(&plan, "p").change, Change::Changed);
        assert_eq!(plan.projects.len(), 1);
        assert!(plan.tasks.is_empty() && plan.triggers.is_empty());
    }
}
