//! `inspect` tells the story first: an outage is its first line (and `inspect --check` exits 7
//! for scripts), a claim whose owner is dead says so where it is read, and a next occurrence far
//! off names the fields of the expression that put it there. Replicas are real processes.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{
    ReplicaProcess, TestDb, code, eventually, manifest, qlsched, spawn_run, stderr, stdout,
    until_due,
};

fn replica(db: &TestDb, owner: &str) -> ReplicaProcess {
    spawn_run(
        &db.url(),
        &["--owner", owner, "--lease", "3s", "--cadence", "250ms"],
    )
}

fn json_of(db: &TestDb, args: &[&str], status: i32) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    let output = qlsched(Some(db), &args, None);
    assert_eq!(code(&output), status, "{args:?}: {}", stderr(&output));
    serde_json::from_str(&stdout(&output)).expect("one JSON document")
}

/// How the registry sees `owner` now.
fn liveness(db: &TestDb, owner: &str) -> Option<String> {
    json_of(db, &["inspect", "replicas"], 0)
        .as_array()?
        .iter()
        .find(|r| r["owner"] == owner)
        .and_then(|r| r["liveness"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn stopping_every_replica_with_rows_due_is_the_headline_and_check_exits_7() {
    let db = TestDb::new().await;
    let triggers: Vec<_> = (0..3)
        .map(|i| json!({ "id": format!("t{i}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    let only = replica(&db, "only");
    eventually(Duration::from_secs(20), "admitting", || async {
        json_of(&db, &["inspect", "--check"], 0)["admissions_last_minute"].as_i64() > Some(0)
    })
    .await;
    let fine = qlsched(Some(&db), &["inspect", "--check"], None);
    assert_eq!(code(&fine), 0, "{}", stderr(&fine));
    assert!(
        stdout(&fine).starts_with("no outage: 1 live replica"),
        "{}",
        stdout(&fine)
    );

    only.stop();
    until_due(&db, 1).await;
    let summary = qlsched(Some(&db), &["inspect"], None);
    assert_eq!(code(&summary), 0, "inspect alone reports, it does not fail");
    let text = stdout(&summary);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("OUTAGE: no live replica, ") && lines[0].contains(" due"),
        "{text}"
    );
    assert!(
        lines[1].contains("likely cause: every replica in the registry is stopped"),
        "{text}"
    );
    assert_eq!(lines[2], "  next: `qlsched inspect replicas`", "{text}");

    let check = qlsched(Some(&db), &["inspect", "--check"], None);
    assert_eq!(code(&check), 7, "{}", stderr(&check));
    assert!(
        stdout(&check).starts_with("OUTAGE: no live replica"),
        "{}",
        stdout(&check)
    );
    assert!(
        stderr(&check).starts_with("qlsched: OUTAGE: no live replica"),
        "{}",
        stderr(&check)
    );
    let report = json_of(&db, &["inspect", "--check"], 7);
    assert_eq!(report["outage"]["kind"], "no_live_replica", "{report}");
    assert_eq!(report["live_replicas"], 0, "{report}");
    assert_eq!(report["registered_replicas"], 1, "{report}");
    let summary = json_of(&db, &["inspect"], 0);
    assert_eq!(summary["outage"]["kind"], "no_live_replica", "{summary}");

    // --check is the summary's question alone: with a view it is a usage error.
    let both = qlsched(Some(&db), &["inspect", "--check", "replicas"], None);
    assert_eq!(code(&both), 2, "{}", stderr(&both));
}

/// A replica killed while the registry still lists it running, and a claim under its name with a
/// lease longer than its own (as a dead replica's claim outlives it): once the registry shows it
/// stale, `inspect trigger` and `inspect claims` say the owner is dead and advise expiry rather
/// than waiting. The same replica initialized `0 8 * 5 *` in Berlin, which is far off by its
/// month field.
#[tokio::test]
async fn a_claim_of_a_stale_owner_says_so_and_a_far_occurrence_names_its_field() {
    let db = TestDb::new().await;
    db.publish(&manifest(json!([
        { "id": "x", "task": "t", "cron": "* * * * * *" },
        { "id": "may", "task": "t", "cron": "0 8 * 5 *", "time_zone": "Europe/Berlin" },
    ])))
    .await;
    let dead = replica(&db, "dead");
    eventually(Duration::from_secs(20), "both initialized", || async {
        db.count("SELECT count(*) FROM trigger_schedules WHERE next_fire_at_ms IS NOT NULL")
            .await
            == 2
    })
    .await;
    dead.kill();
    let held = qlsched(
        Some(&db),
        &[
            "claim", "p/x", "--hold", "--owner", "dead", "--lease", "1h", "--wait", "10s",
        ],
        None,
    );
    assert_eq!(code(&held), 0, "{}", stderr(&held));
    eventually(
        Duration::from_secs(15),
        "the killed one turns stale",
        || async { liveness(&db, "dead").as_deref() == Some("stale") },
    )
    .await;

    let why = json_of(&db, &["inspect", "trigger", "p/x"], 0)["why_not_firing"].clone();
    assert_eq!(why["cause"], "claim_owner_not_live", "{why}");
    assert_eq!(why["owner_liveness"], "stale", "{why}");
    let text = stdout(&qlsched(Some(&db), &["inspect", "trigger", "p/x"], None));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("dead is stale"), "{text}");
    assert!(lines[0].contains("its owner is dead"), "{text}");
    assert!(lines[1].starts_with("fix: `qlsched expire`"), "{text}");

    let claims = json_of(&db, &["inspect", "claims"], 0);
    assert_eq!(claims[0]["owner_liveness"], "stale", "{claims}");
    let text = stdout(&qlsched(Some(&db), &["inspect", "claims"], None));
    assert!(text.contains("STALE (dead)"), "{text}");
    assert!(text.contains("`qlsched expire --owner dead`"), "{text}");

    let text = stdout(&qlsched(Some(&db), &["inspect", "trigger", "p/may"], None));
    let first = text.lines().next().unwrap_or_default();
    assert!(first.contains(" 08:00:00 CEST)"), "{text}");
    assert!(first.contains("the month field `5`"), "{text}");
    assert!(
        text.lines()
            .nth(1)
            .unwrap_or_default()
            .contains("correct the expression"),
        "{text}"
    );
}
