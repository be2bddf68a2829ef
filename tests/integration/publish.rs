//! Publishing (docs/DESIGN.md §4.2) creates, is a no-op when unchanged, bumps revisions, and refuses
//! bad manifests with their JSON path, exit 65, and nothing written.

use serde_json::json;

use crate::util::{TestDb, claim, code, fingerprint, manifest, qlsched, stderr, stdout};

fn two_triggers(cron_b: &str) -> serde_json::Value {
    manifest(json!([
        { "id": "a", "task": "t", "cron": "*/5 * * * *" },
        { "id": "b", "task": "t", "cron": cron_b, "time_zone": "Europe/Berlin", "misfire": "fire_once" }
    ]))
}

#[tokio::test]
async fn publish_creates_then_is_a_no_op_then_bumps_the_changed_revision() {
    let db = TestDb::new().await;
    let first = qlsched(
        Some(&db),
        &["publish", "-f", "-", "-o", "json"],
        Some(&two_triggers("0 3 * * *").to_string()),
    );
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    let report: serde_json::Value = serde_json::from_str(&stdout(&first)).expect("json");
    let changes: Vec<_> = report["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["change"].clone())
        .collect();
    assert!(changes.iter().all(|c| c == "created"), "{changes:?}");
    assert_eq!(changes.len(), 4, "project, task, two triggers");
    assert_eq!(db.count("SELECT count(*) FROM trigger_schedules WHERE trigger_revision = 1 AND next_fire_at_ms IS NULL").await, 2);

    let before = fingerprint(&db).await;
    let again = qlsched(
        Some(&db),
        &["publish", "-f", "-", "-o", "json"],
        Some(&two_triggers("0 3 * * *").to_string()),
    );
    assert_eq!(code(&again), 0);
    let report: serde_json::Value = serde_json::from_str(&stdout(&again)).expect("json");
    assert!(
        report["items"]
            .as_array()
            .expect("items")
            .iter()
            .all(|i| i["change"] == "unchanged")
    );
    assert_eq!(
        fingerprint(&db).await,
        before,
        "an unchanged manifest writes nothing"
    );

    // A claim on b's first revision, then b changes: the claim can never commit.
    let store = db.store("test").await;
    let claimed = claim(&store, "old-holder", 10, 60_000).await;
    let old_b = claimed
        .iter()
        .find(|r| r.trigger_id == "b")
        .expect("b claimed")
        .clone();
    let versions = |row: &tokio_postgres::Row| (row.get::<_, i64>(0), row.get::<_, i64>(1));
    let client = db.client().await;
    let (state_before, claim_before) = versions(
        &client
            .query_one(
                "SELECT state_version, claim_version FROM trigger_schedules WHERE trigger_id = 'b'",
                &[],
            )
            .await
            .expect("row"),
    );

    let changed = qlsched(
        Some(&db),
        &["publish", "-f", "-", "-o", "json"],
        Some(&two_triggers("0 4 * * *").to_string()),
    );
    assert_eq!(code(&changed), 0, "{}", stderr(&changed));
    let report: serde_json::Value = serde_json::from_str(&stdout(&changed)).expect("json");
    let b = report["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["name"] == "p/b")
        .expect("p/b")
        .clone();
    assert_eq!(b["change"], "changed");
    assert_eq!(b["revision"], 2);
    let a = report["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["name"] == "p/a")
        .expect("p/a")
        .clone();
    assert_eq!(a["change"], "unchanged");

    let row = client
        .query_one(
            "SELECT trigger_revision, next_fire_at_ms, claim_token, state_version, claim_version \
             FROM trigger_schedules WHERE trigger_id = 'b'",
            &[],
        )
        .await
        .expect("row");
    assert_eq!(row.get::<_, i64>(0), 2);
    assert_eq!(row.get::<_, Option<i64>>(1), None, "cursor cleared");
    assert_eq!(row.get::<_, Option<uuid::Uuid>>(2), None, "claim cleared");
    assert_eq!(row.get::<_, i64>(3), state_before + 1);
    assert_eq!(row.get::<_, i64>(4), claim_before + 1);

    let outcome = crate::util::admit(&store, &[crate::util::admission(&old_b)])
        .await
        .expect("admit");
    assert_eq!(outcome, vec![qlsched::store::AdmissionOutcome::FenceLost]);
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
}

#[tokio::test]
async fn publish_dry_run_reports_and_writes_nothing() {
    let db = TestDb::new().await;
    let before = fingerprint(&db).await;
    let output = qlsched(
        Some(&db),
        &["publish", "-f", "-", "--dry-run"],
        Some(&two_triggers("0 3 * * *").to_string()),
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(stdout(&output).contains("p/b"), "{}", stdout(&output));
    assert!(stderr(&output).contains("dry run"), "{}", stderr(&output));
    assert_eq!(fingerprint(&db).await, before);
}

#[tokio::test]
async fn bad_manifests_exit_65_naming_the_path_and_write_nothing() {
    let db = TestDb::new().await;
    db.publish(&two_triggers("0 3 * * *")).await;
    let before = fingerprint(&db).await;
    let task = json!({ "id": "t", "execution": { "kind": "remote_worker" } });
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "unknown field",
            json!({ "projects": [{ "id": "p", "tasks": [task], "triggers": [
                { "id": "a", "task": "t", "cron": "* * * * *", "colour": "blue" }] }] })
            .to_string(),
            "$.projects[0].triggers[0]",
        ),
        (
            "bad cron",
            manifest(json!([{ "id": "a", "task": "t", "cron": "61 * * * *" }])).to_string(),
            "$.projects[0].triggers[0].cron",
        ),
        (
            "unknown time zone",
            manifest(json!([{ "id": "a", "task": "t", "cron": "* * * * *", "time_zone": "Mars/Olympus" }])).to_string(),
            "$.projects[0].triggers[0].time_zone",
        ),
        (
            "missing task",
            manifest(json!([{ "id": "a", "task": "nope", "cron": "* * * * *" }])).to_string(),
            "$.projects[0].triggers[0].task",
        ),
        (
            "execution kind",
            json!({ "projects": [{ "id": "p", "tasks": [{ "id": "t", "execution": { "kind": "local_shell" } }],
                "triggers": [] }] })
            .to_string(),
            "$.projects[0].tasks[0].execution.kind",
        ),
        (
            "duplicate ids",
            manifest(json!([
                { "id": "a", "task": "t", "cron": "* * * * *" },
                { "id": "a", "task": "t", "cron": "*/2 * * * *" }
            ]))
            .to_string(),
            "$.projects[0].triggers[1].id",
        ),
        ("invalid JSON", "{\"projects\": [".to_owned(), "$"),
    ];
    for (what, text, path) in cases {
        let output = qlsched(Some(&db), &["publish", "-f", "-"], Some(&text));
        assert_eq!(code(&output), 65, "{what}: {}", stderr(&output));
        let message = stderr(&output);
        assert!(
            message.starts_with("qlsched: ") && message.contains(path),
            "{what}: expected {path} in {message}"
        );
        assert_eq!(
            message.trim_end().lines().count(),
            1,
            "{what}: one line: {message}"
        );
        assert!(stdout(&output).is_empty(), "{what}: nothing on stdout");
        assert_eq!(fingerprint(&db).await, before, "{what}: nothing written");
    }
}

/// A grace shorter than the replicas' default lease (30 s) is published, with one warning on
/// stderr naming the triggers: a lost replica's claims wait out the lease, longer than the grace.
#[tokio::test]
async fn publish_warns_of_a_grace_shorter_than_the_default_lease() {
    let db = TestDb::new().await;
    let short = manifest(json!([
        { "id": "short", "task": "t", "cron": "* * * * *", "misfire_grace": "10s" },
        { "id": "long", "task": "t", "cron": "* * * * *", "misfire_grace": "30s" },
        { "id": "off", "task": "t", "cron": "* * * * *", "misfire_grace": "1s", "enabled": false }
    ]));
    let published = qlsched(
        Some(&db),
        &["publish", "-f", "-", "-o", "json"],
        Some(&short.to_string()),
    );
    assert_eq!(code(&published), 0, "{}", stderr(&published));
    let warning = stderr(&published);
    assert!(
        warning.contains("qlsched: warning: 1 trigger with a misfire grace shorter than the default lease (30s): p/short (10s)"),
        "{warning}"
    );
    assert!(
        !warning.contains("p/long") && !warning.contains("p/off"),
        "{warning}"
    );
    serde_json::from_str::<serde_json::Value>(&stdout(&published)).expect("stdout stays JSON");
    assert_eq!(db.count("SELECT count(*) FROM triggers").await, 3);
    let quiet = manifest(json!([{ "id": "long", "task": "t", "cron": "* * * * *" }]));
    let published = qlsched(Some(&db), &["publish", "-f", "-"], Some(&quiet.to_string()));
    assert!(
        !stderr(&published).contains("warning"),
        "{}",
        stderr(&published)
    );
}
