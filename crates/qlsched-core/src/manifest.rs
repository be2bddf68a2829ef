//! The publish manifest (docs/DESIGN.md §5.3): what an admin gives `publish`, checked here with no
//! database so every mistake is reported with its JSON path before any transaction starts. Parsing
//! also computes the content digests that decide whether publish bumps a revision (docs/DESIGN.md
//! §4.2): same digest, no-op; new digest, new revision and a reset schedule row.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::cron::CronSchedule;
use super::decide::MisfirePolicy;
use super::duration::parse_duration;
use super::error::CoreError;

use super::name::{MAX_ID_CHARS, valid_id};
const MAX_GRACE_MS: i64 = 7 * 24 * 3_600_000;
const EXECUTION_KIND: &str = "remote_worker";

/// A validated manifest, with every default applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub projects: Vec<ProjectDef>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProjectDef {
    pub id: String,
    pub status: ProjectStatus,
    pub tasks: Vec<TaskDef>,
    pub triggers: Vec<TriggerDef>,
}

super::status::words! {
    /// Whether a project's triggers may be claimed at all: `projects.status`.
    ProjectStatus {
        Active => "active",
        Suspended => "suspended",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskDef {
    pub id: String,
    /// The whole `execution` object, `kind` included; free-form beyond `kind`, it is the
    /// dispatcher's business.
    pub execution: Value,
    pub content_digest: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TriggerDef {
    pub id: String,
    pub task: String,
    pub cron_expr: String,
    pub time_zone: String,
    pub misfire: MisfirePolicy,
    pub misfire_grace_ms: i64,
    pub enabled: bool,
    pub content_digest: String,
}

/// A refused manifest: where (a JSON path such as `$.projects[0].triggers[1].cron`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ManifestError {
    pub path: String,
    pub message: String,
}

impl ManifestError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Parses and validates a manifest, applying defaults and computing content digests.
///
/// # Errors
///
/// The first problem found, with its JSON path: malformed JSON (path `$`, with line and column),
/// an unknown field or wrong type, or a value that fails validation.
pub fn parse_manifest(text: &str) -> Result<Manifest, ManifestError> {
    let raw = deserialize(text)?;
    let mut first_index_of: HashMap<&str, usize> = HashMap::new();
    let mut projects = Vec::with_capacity(raw.projects.len());
    for (index, project) in raw.projects.iter().enumerate() {
        let path = format!("$.projects[{index}]");
        check_id(&format!("{path}.id"), &project.id)?;
        if let Some(first) = first_index_of.insert(&project.id, index) {
            return Err(duplicate(
                &path,
                "project",
                &project.id,
                &format!("$.projects[{first}]"),
            ));
        }
        projects.push(validate_project(&path, project)?);
    }
    Ok(Manifest { projects })
}

/// Lowercase hex SHA-256, the digest format of every `*digest` column.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut out, byte| {
            let _ = write!(out, "{byte:02x}");
            out
        })
}

/// The manifest as written. `deny_unknown_fields` everywhere but `execution` makes a misspelt
/// field an error instead of a silently applied default.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a manifest object with \"projects\"")]
struct RawManifest {
    projects: Vec<RawProject>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a project object with \"id\"")]
struct RawProject {
    id: String,
    status: Option<String>,
    #[serde(default)]
    tasks: Vec<RawTask>,
    #[serde(default)]
    triggers: Vec<RawTrigger>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a task object with \"id\" and \"execution\""
)]
struct RawTask {
    id: String,
    execution: Value,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a trigger object with \"id\", \"task\" and \"cron\""
)]
struct RawTrigger {
    id: String,
    task: String,
    cron: String,
    time_zone: Option<String>,
    misfire: Option<String>,
    misfire_grace: Option<String>,
    enabled: Option<bool>,
}

fn deserialize(text: &str) -> Result<RawManifest, ManifestError> {
    // Syntax first (the typed parse below reports it with line and column), then shape.
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        refuse_arrays_for_objects(&value)?;
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let raw = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let inner = e.inner();
        if inner.is_syntax() || inner.is_eof() {
            ManifestError::new("$", format!("invalid JSON: {inner}"))
        } else {
            ManifestError::new(json_path(&e.path().to_string()), inner.to_string())
        }
    })?;
    deserializer
        .end()
        .map_err(|e| ManifestError::new("$", format!("invalid JSON: {e}")))?;
    Ok(raw)
}

/// serde accepts a struct written as an array, its fields by position, which would slip past
/// `deny_unknown_fields` and read `[[]]` as an empty manifest. Every place that holds one of the
/// manifest's objects is checked to be an object first.
fn refuse_arrays_for_objects(value: &serde_json::Value) -> Result<(), ManifestError> {
    let object = |value: &serde_json::Value, path: &str, what: &str| match value {
        serde_json::Value::Array(_) => Err(ManifestError::new(
            path,
            format!("invalid type: array, expected {what}"),
        )),
        _ => Ok(()),
    };
    fn items<'a>(value: &'a serde_json::Value, key: &str) -> &'a [serde_json::Value] {
        match value.get(key) {
            Some(serde_json::Value::Array(items)) => items,
            _ => &[],
        }
    }
    object(value, "$", "a manifest object with \"projects\"")?;
    for (i, project) in items(value, "projects").iter().enumerate() {
        let path = format!("$.projects[{i}]");
        object(project, &path, "a project object with \"id\"")?;
        for (j, task) in items(project, "tasks").iter().enumerate() {
            object(
                task,
                &format!("{path}.tasks[{j}]"),
                "a task object with \"id\" and \"execution\"",
            )?;
        }
        for (k, trigger) in items(project, "triggers").iter().enumerate() {
            object(
                trigger,
                &format!("{path}.triggers[{k}]"),
                "a trigger object with \"id\", \"task\" and \"cron\"",
            )?;
        }
    }
    Ok(())
}

/// serde_path_to_error writes `projects[0].id`, and `.` for the root.
fn json_path(relative: &str) -> String {
    match relative {
        "." | "" => "$".to_owned(),
        path => format!("$.{path}"),
    }
}

fn validate_project(path: &str, raw: &RawProject) -> Result<ProjectDef, ManifestError> {
    let status = match &raw.status {
        None => ProjectStatus::Active,
        Some(status) => status.parse().map_err(|_| {
            ManifestError::new(
                format!("{path}.status"),
                format!(
                    "unknown status \"{}\": expected active or suspended",
                    crate::text::clean(status)
                ),
            )
        })?,
    };
    let mut task_index: HashMap<&str, usize> = HashMap::new();
    let mut tasks = Vec::with_capacity(raw.tasks.len());
    for (index, task) in raw.tasks.iter().enumerate() {
        let task_path = format!("{path}.tasks[{index}]");
        check_id(&format!("{task_path}.id"), &task.id)?;
        if let Some(first) = task_index.insert(&task.id, index) {
            let first_path = format!("{path}.tasks[{first}]");
            return Err(duplicate(&task_path, "task", &task.id, &first_path));
        }
        tasks.push(validate_task(&task_path, task)?);
    }
    let mut trigger_index: HashMap<&str, usize> = HashMap::new();
    let mut triggers = Vec::with_capacity(raw.triggers.len());
    for (index, trigger) in raw.triggers.iter().enumerate() {
        let trigger_path = format!("{path}.triggers[{index}]");
        check_id(&format!("{trigger_path}.id"), &trigger.id)?;
        if let Some(first) = trigger_index.insert(&trigger.id, index) {
            let first_path = format!("{path}.triggers[{first}]");
            return Err(duplicate(
                &trigger_path,
                "trigger",
                &trigger.id,
                &first_path,
            ));
        }
        if !task_index.contains_key(trigger.task.as_str()) {
            return Err(ManifestError::new(
                format!("{trigger_path}.task"),
                format!(
                    "no task \"{}\" in project \"{}\" of this manifest (a trigger's task is \
                     published with it, in the same manifest)",
                    trigger.task, raw.id
                ),
            ));
        }
        triggers.push(validate_trigger(&trigger_path, trigger)?);
    }
    Ok(ProjectDef {
        id: raw.id.clone(),
        status,
        tasks,
        triggers,
    })
}

fn validate_task(path: &str, raw: &RawTask) -> Result<TaskDef, ManifestError> {
    let Some(execution) = raw.execution.as_object() else {
        return Err(ManifestError::new(
            format!("{path}.execution"),
            format!("must be an object with \"kind\": \"{EXECUTION_KIND}\""),
        ));
    };
    if execution.get("kind").and_then(Value::as_str) != Some(EXECUTION_KIND) {
        return Err(ManifestError::new(
            format!("{path}.execution.kind"),
            format!("must be \"{EXECUTION_KIND}\", the only executor qlsched admits"),
        ));
    }
    refuse_nul(&format!("{path}.execution"), &raw.execution)?;
    let digest_input = json!({ "id": raw.id, "execution": raw.execution });
    Ok(TaskDef {
        id: raw.id.clone(),
        execution: raw.execution.clone(),
        content_digest: sha256_hex(canonical_json(&digest_input).as_bytes()),
    })
}

/// PostgreSQL stores no NUL in text or jsonb (`\u0000` fails with SQLSTATE 22P05): refused here,
/// with the path of the first string or key holding one, before anything reaches the database.
/// Unknown keys inside `execution` are accepted on purpose (it is the dispatcher's, free-form
/// beyond `kind`), so this walks every one of them.
fn refuse_nul(path: &str, value: &Value) -> Result<(), ManifestError> {
    let refused = |path: String| {
        Err(ManifestError::new(
            path,
            "contains a NUL character (\\u0000), which PostgreSQL cannot store",
        ))
    };
    match value {
        Value::String(text) if text.contains('\0') => refused(path.to_owned()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(index, item)| refuse_nul(&format!("{path}[{index}]"), item)),
        Value::Object(fields) => fields.iter().try_for_each(|(key, item)| {
            let field = format!("{path}.{}", crate::text::clean(key));
            if key.contains('\0') {
                return refused(field);
            }
            refuse_nul(&field, item)
        }),
        _ => Ok(()),
    }
}

fn validate_trigger(path: &str, raw: &RawTrigger) -> Result<TriggerDef, ManifestError> {
    let time_zone = raw.time_zone.as_deref().unwrap_or("UTC");
    CronSchedule::parse(&raw.cron, time_zone).map_err(|e| {
        let field = match e {
            CoreError::UnknownTimeZone(_) => "time_zone",
            _ => "cron",
        };
        ManifestError::new(format!("{path}.{field}"), e.to_string())
    })?;
    let misfire = match &raw.misfire {
        None => MisfirePolicy::Skip,
        Some(policy) => policy
            .parse()
            .map_err(|e| ManifestError::new(format!("{path}.misfire"), format!("{e}")))?,
    };
    let misfire_grace_ms = parse_grace(
        &format!("{path}.misfire_grace"),
        raw.misfire_grace.as_deref(),
    )?;
    let enabled = raw.enabled.unwrap_or(true);
    let digest_input = json!({
        "id": raw.id,
        "task": raw.task,
        "cron": raw.cron,
        "time_zone": time_zone,
        "misfire": misfire.as_str(),
        "misfire_grace_ms": misfire_grace_ms,
        "enabled": enabled,
    });
    Ok(TriggerDef {
        id: raw.id.clone(),
        task: raw.task.clone(),
        cron_expr: raw.cron.clone(),
        time_zone: time_zone.to_owned(),
        misfire,
        misfire_grace_ms,
        enabled,
        content_digest: sha256_hex(canonical_json(&digest_input).as_bytes()),
    })
}

fn parse_grace(path: &str, grace: Option<&str>) -> Result<i64, ManifestError> {
    let grace = parse_duration(grace.unwrap_or("60s"))
        .map_err(|e| ManifestError::new(path, e.to_string()))?;
    i64::try_from(grace.as_millis())
        .ok()
        .filter(|ms| *ms <= MAX_GRACE_MS)
        .ok_or_else(|| ManifestError::new(path, "must be at most 7d"))
}

/// An id as the schema allows it ([`valid_id`]).
fn check_id(path: &str, id: &str) -> Result<(), ManifestError> {
    if !valid_id(id) {
        return Err(ManifestError::new(
            path,
            format!(
                "invalid id \"{}\": use 1 to {MAX_ID_CHARS} of A-Z a-z 0-9 _ . -",
                crate::text::clean(id)
            ),
        ));
    }
    Ok(())
}

fn duplicate(path: &str, what: &str, id: &str, first_path: &str) -> ManifestError {
    ManifestError::new(
        format!("{path}.id"),
        format!(
            "duplicate {what} id \"{}\", first defined at {first_path}",
            crate::text::clean(id)
        ),
    )
}

/// JSON with object keys sorted at every depth and no whitespace: the digest of a definition must
/// not change when an editor reorders keys. Sorting here, rather than relying on serde_json's
/// default `BTreeMap`, keeps digests stable even if some dependency turns on `preserve_order`.
fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"projects":[{"id":"acme","status":"active",
        "tasks":[{"id":"backup","execution":{"kind":"remote_worker","queue":"db","args":{"b":1,"a":[2,3]}}}],
        "triggers":[{"id":"nightly","task":"backup","cron":"0 3 * * *","time_zone":"Europe/Berlin",
                     "misfire":"fire_once","misfire_grace":"90s","enabled":false}]}]}"#;

    fn manifest(value: Value) -> Result<Manifest, ManifestError> {
        parse_manifest(&value.to_string())
    }

    fn project_with(tasks: Value, triggers: Value) -> Value {
        json!({"projects": [{"id": "acme", "tasks": tasks, "triggers": triggers}]})
    }

    fn task(id: &str) -> Value {
        json!({"id": id, "execution": {"kind": "remote_worker"}})
    }

    fn with_trigger(trigger: Value) -> Value {
        project_with(json!([task("backup")]), json!([trigger]))
    }

    fn trigger_with(field: &str, value: Value) -> Value {
        let mut trigger = json!({"id": "nightly", "task": "backup", "cron": "0 3 * * *"});
        trigger[field] = value;
        with_trigger(trigger)
    }

    fn refused_at(value: Value) -> String {
        match manifest(value) {
            Err(e) => e.path,
            Ok(m) => panic!("accepted: {m:?}"),
        }
    }

    /// Messages name what belongs there in the manifest's words, never a Rust type.
    #[test]
    fn a_nul_anywhere_in_execution_is_refused_with_its_path() {
        let with = |execution: &str| {
            format!(
                r#"{{"projects": [{{"id": "p", "tasks": [{{"id": "t", "execution": {execution}}}]}}]}}"#
            )
        };
        let error = parse_manifest(&with(
            r#"{"kind": "remote_worker", "env": {"A": ["ok", "x\u0000y"]}}"#,
        ))
        .unwrap_err();
        assert_eq!(error.path, "$.projects[0].tasks[0].execution.env.A[1]");
        assert!(error.message.contains("NUL"), "{error}");
        let error =
            parse_manifest(&with(r#"{"kind": "remote_worker", "a\u0000b": 1}"#)).unwrap_err();
        assert_eq!(error.path, "$.projects[0].tasks[0].execution.a\\u{0}b");
        // Unknown keys inside execution are the dispatcher's, accepted on purpose.
        assert!(
            parse_manifest(&with(
                r#"{"kind": "remote_worker", "anything": {"goes": [1]}}"#
            ))
            .is_ok()
        );
    }

    #[test]
    fn a_wrong_shape_is_named_in_the_manifests_words() {
        for (text, path, message) in [
            (
                "[]",
                "$",
                "invalid type: array, expected a manifest object with \"projects\"",
            ),
            (
                r#"{"projects": [1]}"#,
                "$.projects[0]",
                "invalid type: integer `1`, expected a project object with \"id\"",
            ),
            (
                "[[]]",
                "$",
                "invalid type: array, expected a manifest object with \"projects\"",
            ),
            (
                r#"{"projects": [["p", null, [], []]]}"#,
                "$.projects[0]",
                "invalid type: array, expected a project object with \"id\"",
            ),
            (
                r#"{"projects": [{"id": "p", "triggers": [[]]}]}"#,
                "$.projects[0].triggers[0]",
                "invalid type: array, expected a trigger object with \"id\", \"task\" and \"cron\"",
            ),
        ] {
            let error = parse_manifest(text).expect_err(text);
            assert_eq!(error.path, path, "{text}");
            assert!(
                error.message.starts_with(message),
                "{text}: {}",
                error.message
            );
            assert!(!error.message.contains("Raw"), "{text}: {}", error.message);
        }
    }

    #[test]
    fn reads_a_good_manifest() {
        let m = parse_manifest(GOOD).unwrap();
        let project = &m.projects[0];
        assert_eq!(project.id, "acme");
        assert_eq!(project.status, ProjectStatus::Active);
        assert_eq!(project.tasks[0].execution["queue"], "db");
        let t = &project.triggers[0];
        assert_eq!(
            (
                t.id.as_str(),
                t.task.as_str(),
                t.cron_expr.as_str(),
                t.time_zone.as_str()
            ),
            ("nightly", "backup", "0 3 * * *", "Europe/Berlin")
        );
        assert_eq!(t.misfire, MisfirePolicy::FireOnce);
        assert_eq!(t.misfire_grace_ms, 90_000);
        assert!(!t.enabled);
        assert_eq!(t.content_digest.len(), 64);
    }

    /// The digests stored in every `*digest` and checksum column: FIPS 180-2's test vectors, so
    /// that a new version of the hashing crate cannot change them unseen.
    #[test]
    fn sha256_hex_is_the_standard_digest_in_lowercase_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn applies_defaults() {
        let m = manifest(json!({"projects": [{
            "id": "acme",
            "tasks": [task("backup")],
            "triggers": [{"id": "nightly", "task": "backup", "cron": "@daily"}]
        }]}))
        .unwrap();
        let project = &m.projects[0];
        assert_eq!(project.status, ProjectStatus::Active);
        let t = &project.triggers[0];
        assert_eq!(t.time_zone, "UTC");
        assert_eq!(t.misfire, MisfirePolicy::Skip);
        assert_eq!(t.misfire_grace_ms, 60_000);
        assert!(t.enabled);
    }

    #[test]
    fn explicit_defaults_digest_like_omitted_ones() {
        let omitted = manifest(trigger_with("enabled", json!(true))).unwrap();
        let mut explicit = json!({"id": "nightly", "task": "backup", "cron": "0 3 * * *",
            "time_zone": "UTC", "misfire": "skip", "misfire_grace": "1m", "enabled": true});
        explicit = with_trigger(explicit.take());
        let explicit = manifest(explicit).unwrap();
        assert_eq!(omitted.projects[0].triggers, explicit.projects[0].triggers);
    }

    #[test]
    fn accepts_no_projects_and_suspended_ones() {
        assert!(
            manifest(json!({"projects": []}))
                .unwrap()
                .projects
                .is_empty()
        );
        let m = manifest(json!({"projects": [{"id": "p", "status": "suspended"}]})).unwrap();
        assert_eq!(m.projects[0].status, ProjectStatus::Suspended);
        assert_eq!(m.projects[0].status.as_str(), "suspended");
    }

    #[test]
    fn invalid_json_names_line_and_column() {
        let e = parse_manifest("{\n  \"projects\": [,]\n}").unwrap_err();
        assert_eq!(e.path, "$");
        assert!(e.message.contains("line 2 column"), "{}", e.message);
        assert_eq!(
            parse_manifest(r#"{"projects":[]} x"#).unwrap_err().path,
            "$"
        );
        assert_eq!(parse_manifest("").unwrap_err().path, "$");
    }

    #[test]
    fn missing_projects_and_wrong_types_are_refused() {
        let e = manifest(json!({})).unwrap_err();
        assert_eq!(e.path, "$");
        assert!(e.message.contains("projects"), "{}", e.message);
        assert_eq!(
            refused_at(trigger_with("enabled", json!("yes"))),
            "$.projects[0].triggers[0].enabled"
        );
        assert_eq!(
            refused_at(json!({"projects": [{"id": 7}]})),
            "$.projects[0].id"
        );
    }

    #[test]
    fn unknown_fields_are_refused_outside_execution() {
        assert_eq!(refused_at(json!({"projects": [], "extra": 1})), "$.extra");
        assert_eq!(
            refused_at(json!({"projects": [{"id": "p", "owner": "x"}]})),
            "$.projects[0].owner"
        );
        assert_eq!(
            refused_at(project_with(
                json!([{"id": "t", "execution": {"kind": "remote_worker"}, "x": 1}]),
                json!([])
            )),
            "$.projects[0].tasks[0].x"
        );
        assert_eq!(
            refused_at(trigger_with("timezone", json!("UTC"))),
            "$.projects[0].triggers[0].timezone"
        );
        let free_form = project_with(
            json!([{"id": "t", "execution": {"kind": "remote_worker", "anything": {"goes": true}}}]),
            json!([]),
        );
        assert!(manifest(free_form).is_ok());
    }

    #[test]
    fn ids_are_checked() {
        for bad in ["", "a/b", "a:b", "a b", "ü", &"x".repeat(129)] {
            assert_eq!(
                refused_at(json!({"projects": [{"id": bad}]})),
                "$.projects[0].id",
                "{bad}"
            );
            assert_eq!(
                refused_at(project_with(json!([task(bad)]), json!([]))),
                "$.projects[0].tasks[0].id",
                "{bad}"
            );
            assert_eq!(
                refused_at(trigger_with("id", json!(bad))),
                "$.projects[0].triggers[0].id"
            );
        }
        assert!(manifest(json!({"projects": [{"id": "A-z_0.9"}]})).is_ok());
        assert!(manifest(json!({"projects": [{"id": "x".repeat(128)}]})).is_ok());
    }

    #[test]
    fn duplicates_name_the_second_and_point_at_the_first() {
        let e = manifest(json!({"projects": [{"id": "p"}, {"id": "q"}, {"id": "p"}]})).unwrap_err();
        assert_eq!(e.path, "$.projects[2].id");
        assert!(e.message.contains("$.projects[0]"), "{}", e.message);

        let e = manifest(project_with(json!([task("t"), task("t")]), json!([]))).unwrap_err();
        assert_eq!(e.path, "$.projects[0].tasks[1].id");
        assert!(e.message.contains("tasks[0]"), "{}", e.message);

        let trigger = json!({"id": "n", "task": "backup", "cron": "@daily"});
        let e = manifest(project_with(
            json!([task("backup")]),
            json!([trigger, trigger]),
        ))
        .unwrap_err();
        assert_eq!(e.path, "$.projects[0].triggers[1].id");
        assert!(e.message.contains("triggers[0]"), "{}", e.message);

        let same_ids_across_projects = json!({"projects": [
            {"id": "p", "tasks": [task("t")], "triggers": [{"id": "n", "task": "t", "cron": "@daily"}]},
            {"id": "q", "tasks": [task("t")], "triggers": [{"id": "n", "task": "t", "cron": "@daily"}]}
        ]});
        assert!(manifest(same_ids_across_projects).is_ok());
    }

    #[test]
    fn trigger_task_must_exist_in_the_same_project() {
        let cross_project = json!({"projects": [
            {"id": "p", "tasks": [task("t")]},
            {"id": "q", "triggers": [{"id": "n", "task": "t", "cron": "@daily"}]}
        ]});
        assert_eq!(refused_at(cross_project), "$.projects[1].triggers[0].task");
    }

    #[test]
    fn execution_must_be_a_remote_worker_object() {
        let with_execution = |execution: Value| {
            project_with(json!([{"id": "t", "execution": execution}]), json!([]))
        };
        assert_eq!(
            refused_at(with_execution(json!("remote_worker"))),
            "$.projects[0].tasks[0].execution"
        );
        assert_eq!(
            refused_at(with_execution(json!({}))),
            "$.projects[0].tasks[0].execution.kind"
        );
        assert_eq!(
            refused_at(with_execution(json!({"kind": "local_process"}))),
            "$.projects[0].tasks[0].execution.kind"
        );
    }

    #[test]
    fn trigger_values_are_checked_at_their_own_paths() {
        let at = |field: &str| format!("$.projects[0].triggers[0].{field}");
        assert_eq!(refused_at(trigger_with("cron", json!("* * *"))), at("cron"));
        assert_eq!(
            refused_at(trigger_with("cron", json!("@reboot"))),
            at("cron")
        );
        assert_eq!(
            refused_at(trigger_with("cron", json!("0 0 30 2 *"))),
            at("cron")
        );
        assert_eq!(
            refused_at(trigger_with("time_zone", json!("Mars/Olympus"))),
            at("time_zone")
        );
        assert_eq!(
            refused_at(trigger_with("misfire", json!("fire_all"))),
            at("misfire")
        );
        assert_eq!(
            refused_at(trigger_with("misfire_grace", json!("soon"))),
            at("misfire_grace")
        );
        assert_eq!(
            refused_at(trigger_with("misfire_grace", json!("7d1ms"))),
            at("misfire_grace")
        );
        assert!(manifest(trigger_with("misfire_grace", json!("7d"))).is_ok());
        assert!(manifest(trigger_with("misfire_grace", json!("0s"))).is_ok());
        assert_eq!(
            refused_at(json!({"projects": [{"id": "p", "status": "paused"}]})),
            "$.projects[0].status"
        );
    }

    fn digests(value: &Value) -> (String, String) {
        let m = manifest(value.clone()).unwrap();
        let project = &m.projects[0];
        (
            project.tasks[0].content_digest.clone(),
            project.triggers[0].content_digest.clone(),
        )
    }

    #[test]
    fn digests_ignore_key_order() {
        let reordered = r#"{"projects":[{"triggers":[{"enabled":false,"misfire_grace":"90s",
            "misfire":"fire_once","time_zone":"Europe/Berlin","cron":"0 3 * * *","task":"backup","id":"nightly"}],
            "tasks":[{"execution":{"args":{"a":[2,3],"b":1},"queue":"db","kind":"remote_worker"},"id":"backup"}],
            "status":"active","id":"acme"}]}"#;
        let a = parse_manifest(GOOD).unwrap();
        let b = parse_manifest(reordered).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn digests_change_with_every_field() {
        let base: Value = serde_json::from_str(GOOD).unwrap();
        let (task_digest, trigger_digest) = digests(&base);
        let task_changes = [
            ("/projects/0/tasks/0/execution/queue", json!("db2")),
            ("/projects/0/tasks/0/execution/args/a/0", json!(4)),
        ];
        for (pointer, value) in task_changes {
            let mut changed = base.clone();
            if let Some(slot) = changed.pointer_mut(pointer) {
                *slot = value;
            }
            assert_ne!(digests(&changed).0, task_digest, "{pointer}");
        }
        let trigger_changes = [
            ("cron", json!("0 4 * * *")),
            ("time_zone", json!("UTC")),
            ("misfire", json!("skip")),
            ("misfire_grace", json!("91s")),
            ("enabled", json!(true)),
        ];
        for (field, value) in trigger_changes {
            let mut changed = base.clone();
            changed["projects"][0]["triggers"][0][field] = value;
            assert_ne!(digests(&changed).1, trigger_digest, "{field}");
            assert_eq!(digests(&changed).0, task_digest, "{field}");
        }
        let mut renamed = base.clone();
        renamed["projects"][0]["tasks"][0]["id"] = json!("backup2");
        renamed["projects"][0]["triggers"][0]["task"] = json!("backup2");
        let (renamed_task, renamed_trigger) = digests(&renamed);
        assert_ne!(renamed_task, task_digest);
        assert_ne!(renamed_trigger, trigger_digest);
        renamed["projects"][0]["triggers"][0]["id"] = json!("nightly2");
        assert_ne!(digests(&renamed).1, renamed_trigger);
    }

    #[test]
    fn sha256_hex_is_lowercase_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let value = json!({"b": [{"d": 1, "c": "x\"y"}], "a": null});
        assert_eq!(
            canonical_json(&value),
            r#"{"a":null,"b":[{"c":"x\"y","d":1}]}"#
        );
    }
}
