//! The operator commands behave as docs/DESIGN.md §4.7 and §5 say, driven through the real binary
//! as a script would, and so do the store functions underneath them.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{TestDb, bin, code, manifest, qlsched, sleep_ms, stderr, stdout};
use qlsched::core::TriggerName;
use qlsched::store::StoreError;
use qlsched::store::operator::{self, Actor};

/// A trigger firing every second, `p/tick`, on project `p`.
fn every_second() -> Value {
    manifest(json!([{ "id": "tick", "task": "t", "cron": "* * * * * *" }]))
}

/// Runs qlsched with `-o json`, expects `expected` as exit status, and parses stdout.
fn json_of(db: &TestDb, args: &[&str], expected: i32) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let output = qlsched(Some(db), &all, None);
    assert_eq!(
        code(&output),
        expected,
        "qlsched {args:?}: {}{}",
        stdout(&output),
        stderr(&output)
    );
    serde_json::from_str(&stdout(&output)).unwrap_or_else(|e| {
        panic!(
            "qlsched {args:?} printed no JSON ({e}): {}",
            stdout(&output)
        )
    })
}

/// The schedule row of `p/tick` and the audit count: what "nothing written" compares.
async fn written(db: &TestDb) -> (Value, i64) {
    let client = db.client().await;
    let row: Value = client
        .query_one(
            "SELECT to_jsonb(s) FROM trigger_schedules s WHERE project_id = 'p' AND trigger_id = 'tick'",
            &[],
        )
        .await
        .expect("schedule row")
        .get(0);
    (row, db.count("SELECT count(*) FROM schedule_audit").await)
}

#[tokio::test]
async fn operator_script_holds_expires_and_the_old_fence_is_dead() {
    let db = TestDb::empty().await;
    assert_eq!(code(&qlsched(Some(&db), &["migrate"], None)), 0);
    let file = std::env::temp_dir().join(format!("qlsched-{}.json", db.name));
    std::fs::write(&file, every_second().to_string()).expect("write manifest");
    let published = qlsched(
        Some(&db),
        &["publish", "-f", file.to_str().expect("path")],
        None,
    );
    assert_eq!(code(&published), 0, "{}", stderr(&published));

    let held = json_of(
        &db,
        &[
            "claim",
            "p/tick",
            "--hold",
            "--owner",
            "ops-script",
            "--lease",
            "20s",
        ],
        0,
    );
    assert_eq!(held["step"], "held");
    assert_eq!(held["decision"]["kind"], "initialize");
    let token = held["fence"]["token"].as_str().expect("token").to_owned();
    let version = held["fence"]["version"].as_i64().expect("version");

    let inspected = json_of(&db, &["inspect", "trigger", "p/tick"], 0);
    assert_eq!(inspected["claim"]["owner"], "ops-script");
    assert_eq!(inspected["claim"]["token"], token.as_str());
    assert_eq!(inspected["why_not_firing"]["cause"], "claim_held");

    let replica = crate::util::spawn_run(
        &db.url(),
        &[
            "--owner",
            "replica-a",
            "--lease",
            "2s",
            "--cadence",
            "100ms",
        ],
    );
    sleep_ms(1_500).await;
    let (row, audits) = written(&db).await;
    assert_eq!(
        row["claim_owner"], "ops-script",
        "a replica cannot take a held row before expiry"
    );
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);

    let wrong = (version + 1).to_string();
    let refused = qlsched(
        Some(&db),
        &[
            "expire",
            "p/tick",
            "--token",
            &token,
            "--version",
            &wrong,
            "--yes",
        ],
        None,
    );
    assert_eq!(code(&refused), 3, "{}", stderr(&refused));
    assert!(stdout(&refused).is_empty());
    assert_eq!(
        written(&db).await,
        (row, audits),
        "a refused expire changes nothing"
    );

    let version_text = version.to_string();
    let expired = json_of(
        &db,
        &[
            "expire",
            "p/tick",
            "--token",
            &token,
            "--version",
            &version_text,
            "--reason",
            "test",
            "--yes",
        ],
        0,
    );
    assert_eq!(expired["expired"][0]["fence_before"]["owner"], "ops-script");
    assert_eq!(expired["expired"][0]["claim_version"], version + 1);
    assert_eq!(
        db.count("SELECT count(*) FROM schedule_audit WHERE action = 'expire' AND reason = 'test'")
            .await,
        1
    );

    let deadline = Instant::now() + Duration::from_secs(15);
    while db.count("SELECT count(*) FROM runs").await == 0 {
        assert!(
            Instant::now() < deadline,
            "the replica admits after the expiry"
        );
        sleep_ms(100).await;
    }
    let owner: String = db
        .client()
        .await
        .query_one(
            "SELECT payload->>'claim_owner' FROM run_events WHERE seq = 1 LIMIT 1",
            &[],
        )
        .await
        .expect("event")
        .get(0);
    assert_eq!(owner, "replica-a");

    let stale = qlsched(
        Some(&db),
        &[
            "claim",
            "admit",
            "p/tick",
            "--token",
            &token,
            "--version",
            &version_text,
            "--yes",
        ],
        None,
    );
    assert_eq!(code(&stale), 3, "{}", stderr(&stale));
    assert!(
        stderr(&stale).contains("no longer holds"),
        "{}",
        stderr(&stale)
    );
    crate::util::stop_cleanly(replica);
    let _ = std::fs::remove_file(file);
}

#[tokio::test]
async fn the_old_holders_admission_fails_its_fence_after_an_expire() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    let store = db.store("operator test").await;
    let actor = Actor {
        name: "test",
        reason: None,
    };
    let row = operator::claim(
        &store,
        Some(&TriggerName::new("p", "tick")),
        "old-holder",
        30_000,
        false,
    )
    .await
    .expect("claim");
    let fence = row.fence.reference();
    operator::expire(
        &store,
        &TriggerName::new("p", "tick"),
        Some(fence),
        &actor,
        false,
    )
    .await
    .expect("expire");

    let schedule = qlsched::core::CronSchedule::parse("* * * * * *", "UTC").expect("cron");
    let decision = qlsched::coordinator::decide_claimed(&row, &schedule).expect("decide");
    let run = qlsched::coordinator::run_identity(&row, &decision);
    let refused = operator::admit_claimed(&store, &row, decision, run, &actor).await;
    assert!(
        matches!(refused, Err(StoreError::FenceRejected(_))),
        "{refused:?}"
    );
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
    let version: i64 = db
        .client()
        .await
        .query_one("SELECT claim_version FROM trigger_schedules", &[])
        .await
        .expect("row")
        .get(0);
    assert_eq!(version, row.fence.version + 1);
}

/// `inspect trigger p/tick -o json`'s answer to "why is this not firing?".
fn why(db: &TestDb) -> Value {
    json_of(db, &["inspect", "trigger", "p/tick"], 0)["why_not_firing"].clone()
}

#[tokio::test]
async fn why_not_firing_project_suspended() {
    let db = TestDb::new().await;
    let mut m = every_second();
    m["projects"][0]["status"] = json!("suspended");
    db.publish(&m).await;
    assert_eq!(why(&db)["cause"], "project_suspended");
}

#[tokio::test]
async fn why_not_firing_trigger_disabled() {
    let db = TestDb::new().await;
    db.publish(&manifest(
        json!([{ "id": "tick", "task": "t", "cron": "* * * * * *", "enabled": false }]),
    ))
    .await;
    assert_eq!(why(&db)["cause"], "trigger_disabled");
}

#[tokio::test]
async fn why_not_firing_not_initialized() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    assert_eq!(why(&db)["cause"], "not_initialized");
}

#[tokio::test]
async fn why_not_firing_not_due_until() {
    let db = TestDb::new().await;
    db.publish(&manifest(
        json!([{ "id": "tick", "task": "t", "cron": "0 0 1 1 *" }]),
    ))
    .await;
    json_of(&db, &["claim", "p/tick", "--yes"], 0);
    let why = why(&db);
    assert_eq!(why["cause"], "not_due");
    assert!(why["due_in_ms"].as_i64().expect("due_in_ms") > 0);
}

#[tokio::test]
async fn why_not_firing_claim_held() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    json_of(&db, &["claim", "p/tick", "--hold", "--owner", "someone"], 0);
    let why = why(&db);
    assert_eq!(why["cause"], "claim_held");
    assert_eq!(why["owner"], "someone");
    assert!(why["remaining_ms"].as_i64().expect("remaining") > 0);
}

#[tokio::test]
async fn why_not_firing_claim_expired_and_nobody_took_it() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    json_of(
        &db,
        &[
            "claim", "p/tick", "--hold", "--owner", "gone", "--lease", "1s",
        ],
        0,
    );
    sleep_ms(1_200).await;
    let why = why(&db);
    assert_eq!(why["cause"], "claim_expired");
    assert_eq!(why["owner"], "gone");
}

#[tokio::test]
async fn why_not_firing_schedule_revision_behind() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    db.client()
        .await
        .batch_execute("UPDATE triggers SET revision = revision + 1")
        .await
        .expect("move the trigger on by hand");
    assert_eq!(why(&db)["cause"], "revision_behind");
}

#[tokio::test]
async fn why_not_firing_execution_revision_digest_corrupt() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    db.client()
        .await
        .batch_execute(
            "SET session_replication_role = replica;
             UPDATE execution_revisions SET digest = repeat('0', 64);",
        )
        .await
        .expect("tamper");
    assert_eq!(why(&db)["cause"], "digest_corrupt");
}

#[tokio::test]
async fn why_not_firing_schema_not_ready() {
    let db = TestDb::empty().await;
    let why = json_of(&db, &["inspect", "trigger", "p/tick"], 78)["why_not_firing"].clone();
    assert_eq!(why["cause"], "schema_not_ready");
    // The report on stdout, and the error a script branches on as JSON on stderr.
    let output = qlsched(
        Some(&db),
        &["inspect", "trigger", "p/tick", "-o", "json"],
        None,
    );
    let error: Value = serde_json::from_str(&stderr(&output)).expect("one JSON object");
    assert_eq!(error["kind"], "schema_not_ready", "{error}");
    assert_eq!(error["exit_status"], 78);
}

#[tokio::test]
async fn bad_input_is_refused_with_its_exit_code_one_line_and_nothing_written() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    let held = json_of(&db, &["claim", "p/tick", "--hold", "--owner", "holder"], 0);
    let token = held["fence"]["token"].as_str().expect("token").to_owned();
    let before = written(&db).await;
    let other = uuid::Uuid::new_v4().to_string();
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["claim", "p/", "--hold"], 2),
        (vec!["inspect", "trigger", "nope"], 2),
        (vec!["expire", "a/b/c", "--yes"], 2),
        (vec!["claim", "p/nope", "--hold"], 4),
        (vec!["inspect", "trigger", "p/nope"], 4),
        (vec!["expire", "p/nope", "--yes"], 4),
        (
            vec![
                "claim",
                "admit",
                "p/tick",
                "--token",
                "not-a-uuid",
                "--version",
                "1",
            ],
            65,
        ),
        (
            vec![
                "claim",
                "release",
                "p/tick",
                "--token",
                "12345",
                "--version",
                "1",
            ],
            65,
        ),
        (
            vec![
                "expire",
                "p/tick",
                "--token",
                "not-a-uuid",
                "--version",
                "1",
            ],
            65,
        ),
        (vec!["inspect", "run", "not-a-uuid"], 65),
        (
            // A manual admission without a terminal needs --yes.
            vec![
                "claim",
                "admit",
                "p/tick",
                "--token",
                &token,
                "--version",
                "1",
            ],
            2,
        ),
        (
            vec![
                "claim",
                "admit",
                "p/tick",
                "--token",
                &token,
                "--version",
                "-1",
            ],
            2,
        ),
        (
            vec![
                "claim",
                "admit",
                "p/tick",
                "--token",
                &token,
                "--version=-1",
            ],
            2,
        ),
        (
            vec!["expire", "p/tick", "--token", &token, "--version", "one"],
            2,
        ),
        (
            vec![
                "claim",
                "admit",
                "p/tick",
                "--token",
                &other,
                "--version",
                "1",
                "--yes",
            ],
            3,
        ),
        (vec!["claim", "p/tick", "--hold", "--lease", "5x"], 2),
        (vec!["inspect", "runs", "--since", "soon"], 2),
        (vec!["inspect", "schedules", "--state", "stuck"], 2),
        (vec!["expire", "p/tick"], 2),
        (vec!["expire", "--owner", "holder"], 2),
        // A fence names the claim, but expiring it is still destructive: --yes without a terminal.
        (
            vec!["expire", "p/tick", "--token", &token, "--version", "1"],
            2,
        ),
        // --expired-only narrows --owner; with a trigger it would be silently ignored.
        (vec!["expire", "p/tick", "--expired-only", "--yes"], 2),
        (vec!["claim", "p/tick"], 2),
        (vec!["claim"], 2),
    ];
    let dir = std::env::temp_dir().join(format!("qlsched-bad-input-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let nul = dir.join("nul.json");
    std::fs::write(
        &nul,
        r#"{"projects": [{"id": "p", "tasks": [{"id": "t", "execution": {"kind": "remote_worker", "args": ["a\u0000b"]}}]}]}"#,
    )
    .expect("write");
    let latin1 = dir.join("latin1.json");
    std::fs::write(&latin1, b"{\"projects\": [{\"id\": \"caf\xe9\"}]}").expect("write");
    let coloured = dir.join("coloured.json");
    std::fs::write(
        &coloured,
        r#"{"projects": [{"id": "\u001b[31mred\u001b]0;title\u0007"}]}"#,
    )
    .expect("write");
    let (nul, latin1) = (nul.display().to_string(), latin1.display().to_string());
    let coloured = coloured.display().to_string();
    let long_trigger = format!("{}/x", "p".repeat(10_240));
    let long = "o".repeat(10_240);
    let owners_trigger = "p\u{1b}]0;pwned\u{7}/tick".to_owned();
    // Each with a needle its one line must hold: the real reason, named where it came from.
    let explained: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec!["publish", "-f", &nul],
            65,
            "$.projects[0].tasks[0].execution.args[0]: contains a NUL",
        ),
        (
            vec!["publish", "-f", &latin1],
            65,
            "invalid UTF-8 at byte offset 25",
        ),
        (
            vec!["expire", "--owner", "", "--yes"],
            2,
            "owner must be 1..=200 characters",
        ),
        (
            vec!["expire", "--owner", "ghost", "--yes"],
            4,
            "owner \"ghost\" holds no claim and was never seen",
        ),
        (
            vec!["expire", "--owner", "ghost", "--dry-run"],
            4,
            "never seen",
        ),
        (
            vec!["expire", "--yes"],
            2,
            "a PROJECT/TRIGGER for one trigger's claim, or --owner OWNER",
        ),
        (vec!["run", "--batch", "-1"], 2, "-1 is not in 1..=256"),
        (vec!["run", "--batch", "0"], 2, "0 is not in 1..=256"),
        (vec!["run", "--lease", "-1s"], 2, "-1s is negative"),
        (
            vec!["run", "--lease", "0s"],
            2,
            "--lease must be 1s..=1h, got 0s",
        ),
        (
            vec!["run", "--cadence", "0s"],
            2,
            "--cadence must be 10ms..=1h",
        ),
        (
            vec!["run", "--drain-timeout", "11m"],
            2,
            "--drain-timeout must be 0s..=10m",
        ),
        (
            vec!["run", "--owner", ""],
            2,
            "--owner must be 1..=200 characters",
        ),
        (
            vec!["claim", "p/tick", "--hold", "--owner", ""],
            2,
            "--owner must be 1..=200 characters",
        ),
        (
            vec!["claim", "p/tick", "--hold", "--lease", "0s"],
            2,
            "--lease must be 1s..=1h",
        ),
        (
            vec![
                "claim",
                "admit",
                "p/tick",
                "--token",
                &token,
                "--version",
                "-1",
            ],
            2,
            "must be 0 or more, got -1",
        ),
        (
            vec!["inspect", "runs", "--limit", "-1"],
            2,
            "must be 1 or more, got -1",
        ),
        (
            vec!["inspect", "runs", "--limit", "0"],
            2,
            "must be 1 or more, got 0",
        ),
        (
            vec!["inspect", "runs", "--since", "+5m"],
            2,
            "+5m is after now",
        ),
        (
            vec!["inspect", "misfires", "--since", "+5m"],
            2,
            "+5m is after now",
        ),
        (vec!["top", "--refresh", "1ms"], 2, "between 250ms and 10s"),
        (
            vec!["--schema", "Bad", "inspect"],
            2,
            "--schema: invalid schema name \"Bad\"",
        ),
        (
            vec!["claim", &owners_trigger, "--hold"],
            2,
            "p\\u{1b}]0;pwned\\u{7}/tick",
        ),
        (
            vec!["expire", "--owner", &long, "--yes"],
            2,
            "…(10240 bytes)",
        ),
        (
            vec!["inspect", "trigger", &long_trigger],
            2,
            "…(10242 bytes)",
        ),
        (
            vec!["publish", "-f", &coloured],
            65,
            "invalid id \"\\u{1b}[31mred\\u{1b}]0;title\\u{7}\"",
        ),
    ];
    let mut cases: Vec<(Vec<&str>, i32, &str)> = cases
        .into_iter()
        .map(|(args, code)| (args, code, ""))
        .collect();
    cases.extend(explained);
    for (args, expected, needle) in cases {
        let output = qlsched(Some(&db), &args, None);
        let err = stderr(&output);
        assert_eq!(code(&output), expected, "qlsched {args:?}: {err}");
        assert!(
            stdout(&output).is_empty(),
            "qlsched {args:?} printed {}",
            stdout(&output)
        );
        assert!(
            err.starts_with("qlsched: ") && err.trim_end().lines().count() == 1,
            "qlsched {args:?} must say one line on stderr, said {err:?}"
        );
        assert!(err.contains(needle), "qlsched {args:?}: {err}");
        assert!(
            !err.contains('\u{1b}') && !err.contains('\u{7}') && err.len() < 2_000,
            "qlsched {args:?} echoed raw or unbounded text: {err:?}"
        );
        assert_eq!(
            written(&db).await,
            before,
            "qlsched {args:?} wrote something"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn expire_by_owner_clears_every_claim_in_one_transaction_and_audits_each() {
    let db = TestDb::new().await;
    db.publish(&crate::util::every_second(&["a", "b", "c"]))
        .await;
    for name in ["p/a", "p/b"] {
        json_of(
            &db,
            &["claim", name, "--hold", "--owner", "dead-replica"],
            0,
        );
    }
    json_of(&db, &["claim", "p/c", "--hold", "--owner", "alive"], 0);
    let dry = json_of(&db, &["expire", "--owner", "dead-replica", "--dry-run"], 0);
    assert_eq!(dry["expired"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claim_owner = 'dead-replica'")
            .await,
        2,
        "a dry run changes nothing"
    );
    let done = json_of(&db, &["expire", "--owner", "dead-replica", "--yes"], 0);
    assert_eq!(done["expired"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claim_owner IS NOT NULL")
            .await,
        1
    );
    assert_eq!(
        db.count("SELECT count(*) FROM schedule_audit WHERE action = 'expire'")
            .await,
        2
    );
    let claims = json_of(&db, &["inspect", "claims"], 0);
    assert_eq!(claims.as_array().map(Vec::len), Some(1));
    assert_eq!(claims[0]["owner"], "alive");
}

#[tokio::test]
async fn manual_claim_admits_the_occurrence_the_core_decides() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    json_of(&db, &["claim", "p/tick", "--yes"], 0);
    sleep_ms(1_100).await;
    let dry = json_of(&db, &["claim", "--dry-run"], 0);
    assert_eq!(dry["decision"]["kind"], "fire");
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claim_owner IS NOT NULL")
            .await,
        0
    );
    let admitted = json_of(&db, &["claim", "--yes"], 0);
    assert_eq!(admitted["step"], "admitted");
    let run_id = admitted["run"]["run_id"]
        .as_str()
        .expect("run id")
        .to_owned();
    let detail = json_of(&db, &["inspect", "run", &run_id], 0);
    assert_eq!(detail["attempts"].as_array().map(Vec::len), Some(1));
    assert_eq!(detail["events"][0]["type"], "run.created");
    assert_eq!(json_of(&db, &["inspect", "invariants"], 0)["ok"], true);
    let summary = json_of(&db, &["inspect"], 0);
    assert_eq!(summary["admissions_last_minute"], 1);
    assert_eq!(summary["schedules"]["total"], 1);
    assert_eq!(
        db.count("SELECT count(*) FROM schedule_audit WHERE action IN ('claim', 'admit')")
            .await,
        4
    );
}

#[tokio::test]
async fn inspect_needs_nothing_more_than_the_observer_role() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    let observer = crate::util::LoginRole::create(&db, "qlsched_observer").await;
    let as_observer = |args: &[&str]| {
        let mut full = vec!["-D".to_owned(), observer.url(&db)];
        full.extend(args.iter().map(|a| (*a).to_owned()));
        std::process::Command::new(crate::util::bin())
            .args(&full)
            .env("NO_COLOR", "1")
            .output()
            .expect("run qlsched")
    };
    let trigger = db
        .client()
        .await
        .query_one(
            "SELECT project_id || '/' || trigger_id FROM trigger_schedules LIMIT 1",
            &[],
        )
        .await
        .expect("a trigger")
        .get::<_, String>(0);
    for args in [
        vec!["inspect"],
        vec!["inspect", "schedules"],
        vec!["inspect", "claims"],
        vec!["inspect", "runs"],
        vec!["inspect", "trigger", trigger.as_str()],
        vec!["inspect", "recovery"],
        vec!["inspect", "audit"],
        vec!["inspect", "invariants"],
    ] {
        let output = as_observer(&[args.as_slice(), &["-o", "json"]].concat());
        assert_eq!(
            crate::util::code(&output),
            0,
            "{args:?}: {}",
            crate::util::stderr(&output)
        );
    }
    // And the observer cannot change anything: expiring a held claim is refused (exit 77).
    let held = crate::util::qlsched(Some(&db), &["claim", trigger.as_str(), "--hold"], None);
    assert_eq!(
        crate::util::code(&held),
        0,
        "{}",
        crate::util::stderr(&held)
    );
    let before = crate::util::fingerprint(&db).await;
    let output = as_observer(&["expire", trigger.as_str(), "--yes"]);
    assert_eq!(
        crate::util::code(&output),
        77,
        "{}",
        crate::util::stderr(&output)
    );
    assert_eq!(crate::util::fingerprint(&db).await, before);
}

/// An admission the database refuses while the claim still holds (here a corrupt execution
/// digest) is no lost fence: exit 6 (definition refused) naming what failed, and the claim is
/// given back at once rather than left to block the row for its lease.
#[tokio::test]
async fn a_refused_manual_admission_gives_its_claim_back() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = (now_ms() / 1000) * 1000 - 1000;
             SET session_replication_role = replica;
             UPDATE execution_revisions SET digest = repeat('0', 64);",
        )
        .await
        .expect("due, and tampered");
    let output = qlsched(
        Some(&db),
        &["claim", "p/tick", "--yes", "--lease", "1h"],
        None,
    );
    assert_eq!(code(&output), 6, "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("the admission of p/tick refused it")
            && message.contains("SQLSTATE QLD01")
            && message.contains("digest matches its spec")
            && message.contains("the claim was released"),
        "{message}"
    );
    assert_eq!(message.trim_end().lines().count(), 1, "{message}");
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claim_token IS NOT NULL")
            .await,
        0
    );
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
    assert_eq!(
        db.count("SELECT count(*) FROM schedule_audit WHERE action IN ('claim', 'release')")
            .await,
        2,
        "the claim and its release are audited"
    );
}

/// An expired claim no longer holds (docs/DESIGN.md §5.4): `claim release` refuses its fence with
/// exit 3, as `claim admit` does, and writes nothing.
#[tokio::test]
async fn release_refuses_an_expired_fence_as_admit_does() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    let held = json_of(
        &db,
        &["claim", "p/tick", "--hold", "--owner", "h", "--lease", "1s"],
        0,
    );
    let token = held["fence"]["token"].as_str().expect("token").to_owned();
    let version = held["fence"]["version"].to_string();
    sleep_ms(1_200).await;
    let before = written(&db).await;
    for action in ["release", "admit"] {
        let output = qlsched(
            Some(&db),
            &[
                "claim",
                action,
                "p/tick",
                "--token",
                &token,
                "--version",
                &version,
                "--yes",
            ]
            .into_iter()
            .filter(|arg| action == "admit" || *arg != "--yes")
            .collect::<Vec<_>>(),
            None,
        );
        assert_eq!(code(&output), 3, "{action}: {}", stderr(&output));
        assert!(
            stderr(&output).contains("no longer holds: it expired"),
            "{action}: {}",
            stderr(&output)
        );
        assert_eq!(written(&db).await, before, "{action} wrote nothing");
    }
}

/// A person who leaves the claim prompt with Ctrl-C or Ctrl-D gets the claim given back (exit 2),
/// in a real terminal.
#[test]
fn leaving_the_claim_prompt_gives_the_claim_back() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let db = runtime.block_on(async {
        let db = TestDb::new().await;
        db.publish(&every_second()).await;
        db
    });
    let tmux = crate::util::Tmux::start("claim-prompt", 120, 40);
    tmux.wait_for("the shell prompt", |s| s.contains(crate::util::PROMPT));
    for (key, why, round) in [("C-c", "interrupted by SIGINT", 1), ("C-d", "no answer", 2)] {
        let command = format!(
            // Quoted apart, so that the typed line never matches what the echo prints.
            "{} -D '{}' claim p/tick --lease 1h; echo \"claim-{round}-\"\"exited $?\"",
            bin().display(),
            db.url()
        );
        tmux.send(&["clear", "Enter"]);
        tmux.wait_for("a clear screen", |s| !s.contains("exited"));
        tmux.send(&[&command, "Enter"]);
        tmux.wait_for("the prompt", |s| {
            s.contains("admit, hold or release? [a/h/r]")
        });
        tmux.send(&[key]);
        let screen = tmux.wait_for("claim to exit", |s| {
            s.contains(&format!("claim-{round}-exited"))
        });
        assert!(
            screen.contains(&format!("claim-{round}-exited 2")),
            "{screen}"
        );
        assert!(
            screen.contains(why) && screen.contains("released the claim on p/tick"),
            "{screen}"
        );
        let held = runtime.block_on(
            db.count("SELECT count(*) FROM trigger_schedules WHERE claim_token IS NOT NULL"),
        );
        assert_eq!(held, 0, "{key} gave the claim back");
    }
    let audits =
        runtime.block_on(db.count("SELECT count(*) FROM schedule_audit WHERE action = 'release'"));
    assert_eq!(audits, 2);
}

/// A database step that stalls (here the release, behind a row lock another session holds) never
/// traps the person: the first Ctrl-C says it waits for the step, a second one stops at once with
/// exit 130, and the claim expires with its lease.
#[test]
fn a_second_interrupt_stops_a_stalled_step_at_once() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (db, locker) = runtime.block_on(async {
        let db = TestDb::new().await;
        db.publish(&every_second()).await;
        let locker = db.client().await;
        (db, locker)
    });
    let tmux = crate::util::Tmux::start("claim-stall", 120, 40);
    tmux.wait_for("the shell prompt", |s| s.contains(crate::util::PROMPT));
    let command = format!(
        "{} -D '{}' claim p/tick --lease 1h; echo \"claim-\"\"exited $?\"",
        bin().display(),
        db.url()
    );
    tmux.send(&[&command, "Enter"]);
    tmux.wait_for("the prompt", |s| {
        s.contains("admit, hold or release? [a/h/r]")
    });
    runtime.block_on(async {
        locker
            .batch_execute("BEGIN; SELECT 1 FROM trigger_schedules FOR UPDATE")
            .await
            .expect("lock the row");
    });
    tmux.send(&["r", "Enter"]);
    // Wait until the release waits on the lock: a Ctrl-C typed sooner would flush the unread
    // answer and interrupt the prompt instead.
    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(20);
        while db
            .count(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE application_name = 'qlsched claim' AND wait_event_type = 'Lock'",
            )
            .await
            == 0
        {
            assert!(
                Instant::now() < deadline,
                "the release never waited on the lock"
            );
            sleep_ms(50).await;
        }
    });
    // The first Ctrl-C only says it waits for the step.
    tmux.send(&["C-c"]);
    tmux.wait_for("the first interrupt noted", |s| {
        s.contains("SIGINT: waiting for the database step in flight")
    });
    tmux.send(&["C-c"]);
    let screen = tmux.wait_for("claim to exit", |s| s.contains("claim-exited"));
    assert!(screen.contains("claim-exited 130"), "{screen}");
    assert!(screen.contains("SIGINT again: stopping now"), "{screen}");
    runtime.block_on(async {
        locker.batch_execute("ROLLBACK").await.expect("unlock");
        assert_eq!(
            db.count("SELECT count(*) FROM trigger_schedules WHERE claim_token IS NOT NULL")
                .await,
            1,
            "the claim stays until its lease ends (or an expire)"
        );
    });
}

/// Runs the real binary as `login` on `db`, with `stdin` if given.
fn as_login(
    db: &TestDb,
    login: &crate::util::LoginRole,
    args: &[&str],
    stdin: Option<&str>,
) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(bin())
        .args(["-D", &login.url(db)])
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn qlsched");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("wait for qlsched")
}

/// A dry run changes nothing, so a login that may only read can run one: `publish --dry-run`
/// and `claim --dry-run` as `qlsched_observer`, saying in the table that nothing was written.
#[tokio::test]
async fn dry_runs_work_for_a_read_only_login_and_say_nothing_was_written() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    let observer = crate::util::LoginRole::create(&db, "qlsched_observer").await;
    let before = crate::util::fingerprint(&db).await;
    let changed = manifest(json!([
        { "id": "tick", "task": "t", "cron": "*/2 * * * * *" },
        { "id": "tock", "task": "t", "cron": "* * * * * *" }
    ]))
    .to_string();
    let output = as_login(
        &db,
        &observer,
        &["publish", "-f", "-", "--dry-run"],
        Some(&changed),
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let table = stdout(&output);
    assert!(table.starts_with("dry run: nothing written"), "{table}");
    assert!(
        table.contains("p/tick") && table.contains("changed"),
        "{table}"
    );
    let output = as_login(
        &db,
        &observer,
        &["publish", "-f", "-", "--dry-run", "-o", "json"],
        Some(&changed),
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let revision_of = |name: &str| {
        report["items"]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["name"] == name))
            .map(|i| (i["change"].clone(), i["revision"].clone()))
    };
    assert_eq!(revision_of("p/tick"), Some((json!("changed"), json!(2))));
    assert_eq!(revision_of("p/tock"), Some((json!("created"), json!(1))));
    assert_eq!(revision_of("p/t"), Some((json!("unchanged"), json!(1))));

    let output = as_login(&db, &observer, &["claim", "--dry-run"], None);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(
        stdout(&output).contains("dry run: nothing written"),
        "{}",
        stdout(&output)
    );
    let output = as_login(
        &db,
        &observer,
        &["claim", "p/tick", "--dry-run", "-o", "json"],
        None,
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let claim: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(claim["dry_run"], true);
    assert_eq!(claim["decision"]["kind"], "initialize");
    assert_eq!(
        crate::util::fingerprint(&db).await,
        before,
        "nothing written"
    );
    assert_eq!(db.count("SELECT count(*) FROM schedule_audit").await, 0);
}

/// With `-o json` an error is one JSON object on stderr that a script can branch on, and stdout
/// stays empty; usage errors clap finds are no exception.
#[tokio::test]
async fn json_errors_are_one_object_on_stderr_and_stdout_stays_empty() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    let bad_manifest = r#"{"projects": [{"id": "p", "tasks": [{"id": "t", "execution": {"kind": "remote_worker", "x": "\u0000"}}]}]}"#;
    let cases: Vec<(Vec<&str>, Option<&str>, i32, &str)> = vec![
        (
            vec!["expire", "--owner", "ghost", "--yes"],
            None,
            4,
            "not_found",
        ),
        (vec!["inspect", "trigger", "p/nope"], None, 4, "not_found"),
        (vec!["inspect", "runs", "--limit", "-1"], None, 2, "usage"),
        (vec!["--bogus", "inspect"], None, 2, "usage"),
        (
            vec!["expire", "p/tick", "--yes"],
            None,
            5,
            "nothing_eligible",
        ),
        (
            vec!["publish", "-f", "-"],
            Some(bad_manifest),
            65,
            "bad_manifest",
        ),
        (vec!["inspect", "run", "nope"], None, 65, "bad_input"),
    ];
    for (args, stdin, expected, kind) in cases {
        let mut all = args.clone();
        all.extend(["-o", "json"]);
        let output = qlsched(Some(&db), &all, stdin);
        assert_eq!(code(&output), expected, "{args:?}: {}", stderr(&output));
        assert!(stdout(&output).is_empty(), "{args:?}: {}", stdout(&output));
        let text = stderr(&output);
        assert_eq!(text.trim_end().lines().count(), 1, "{args:?}: {text}");
        let error: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{args:?}: not one JSON object ({e}): {text}"));
        assert_eq!(error["exit_status"], expected, "{error}");
        assert_eq!(error["kind"], kind, "{error}");
        assert!(
            error["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{error}"
        );
        if kind == "bad_manifest" {
            assert_eq!(
                error["path"], "$.projects[0].tasks[0].execution.x",
                "{error}"
            );
        }
        if args.contains(&"ghost") {
            assert_eq!(
                (&error["owner"], &error["seen"]),
                (&json!("ghost"), &json!(false))
            );
        }
    }
    // An owner seen before, holding nothing now: exit 0, and the report says it was seen.
    json_of(
        &db,
        &["claim", "p/tick", "--hold", "--owner", "was-here"],
        0,
    );
    json_of(&db, &["expire", "p/tick", "--yes"], 0);
    let report = json_of(&db, &["expire", "--owner", "was-here", "--yes"], 0);
    assert_eq!(report["expired"], json!([]));
    assert_eq!(report["owner_seen"], true);
}

/// A login holding only `qlsched_worker_ingress` has no USAGE on the schema: `inspect trigger`
/// says so (77), as `inspect` does, instead of sending the operator to migrate a healthy schema.
#[tokio::test]
async fn inspect_trigger_without_schema_usage_is_77_naming_the_privilege() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    let ingress = crate::util::LoginRole::create(&db, "qlsched_worker_ingress").await;
    for args in [vec!["inspect"], vec!["inspect", "trigger", "p/tick"]] {
        let output = as_login(&db, &ingress, &args, None);
        assert_eq!(code(&output), 77, "{args:?}: {}", stderr(&output));
        assert!(
            stderr(&output).contains("lacks USAGE on the schema"),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(!stderr(&output).contains("migrate"), "{}", stderr(&output));
    }
}

/// The summary counts claimed rows whose cursor is past (a hung replica's) and names the holder:
/// `oldest overdue` alone shows only rows a replica could take.
#[tokio::test]
async fn inspect_counts_claimed_overdue_rows_and_names_the_holder() {
    let db = TestDb::new().await;
    db.publish(&crate::util::every_second(&["a", "b"])).await;
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules
             SET next_fire_at_ms = now_ms() - 60000, claim_owner = 'hung-replica',
                 claim_token = gen_random_uuid(), claim_version = claim_version + 1,
                 claim_expires_at_ms = now_ms() + 30000",
        )
        .await
        .expect("a hung replica's claims");
    let summary = json_of(&db, &["inspect"], 0);
    assert!(summary["oldest_overdue"].is_null(), "{summary}");
    assert_eq!(summary["claimed_overdue"]["count"], 2, "{summary}");
    assert_eq!(
        summary["claimed_overdue"]["oldest"]["owner"],
        "hung-replica"
    );
    assert_eq!(summary["claimed_overdue"]["oldest"]["claim_expired"], false);
    let output = qlsched(Some(&db), &["inspect"], None);
    assert!(
        stdout(&output).contains("claimed and overdue: 2 rows, oldest p/a")
            && stdout(&output).contains("held by hung-replica (claim still valid)"),
        "{}",
        stdout(&output)
    );
}

/// An operator's transaction waits for a row lock at most its lock timeout: a row held by a
/// session that does not let go (a stuck client) ends `pause` with exit 75 naming the lock
/// wait, instead of leaving it waiting without end.
#[tokio::test(flavor = "multi_thread")]
async fn an_operator_command_waits_for_a_held_row_lock_at_most_its_lock_timeout() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    let mut holder = db.client().await;
    let transaction = holder.transaction().await.expect("begin");
    transaction
        .execute(
            "SELECT 1 FROM trigger_schedules WHERE project_id = 'p' FOR UPDATE",
            &[],
        )
        .await
        .expect("hold the rows");
    let url = db.url();
    let started = std::time::Instant::now();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(crate::util::bin())
            .args(["-D", &url, "pause", "--project", "p", "--yes"])
            .output()
            .expect("qlsched")
    })
    .await
    .expect("join");
    let took = started.elapsed();
    drop(transaction);
    let message = stderr(&output);
    assert_eq!(code(&output), 75, "{message}");
    assert!(message.contains("SQLSTATE 55P03"), "{message}");
    // One lock wait of 5 s: a wait past its bound is reported, not waited again.
    assert!(
        took < std::time::Duration::from_secs(10),
        "{took:?}: {message}"
    );
}

/// `inspect`'s and `top`'s state counts, each read from the indexes that hold their rows, are
/// what classifying every row one by one gives (`schedule_state()`, whose precedence is paused,
/// disabled, claimed, expired_claim, uninitialized, due, not_due), for rows in every state and
/// the claims among them on cursors of every kind, parked rows holding claims too.
#[tokio::test]
async fn inspect_and_top_state_counts_match_a_row_by_row_classification() {
    let db = TestDb::new().await;
    let ids = [
        "due",
        "later",
        "fresh",
        "held-due",
        "held-later",
        "held-fresh",
        "lapsed-due",
        "lapsed-later",
        "off",
        "off-held",
        "paused",
        "paused-off",
        "paused-held",
    ];
    let mut manifest = crate::util::every_second(&ids);
    manifest["projects"]
        .as_array_mut()
        .expect("projects")
        .push(json!({
            "id": "q",
            "tasks": [{ "id": "t", "execution": { "kind": "remote_worker", "image": "x" } }],
            "triggers": [{ "id": "asleep", "task": "t", "cron": "* * * * * *" },
                         { "id": "asleep-held", "task": "t", "cron": "* * * * * *" }]
        }));
    db.publish(&manifest).await;
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = CASE
                 WHEN trigger_id IN ('fresh', 'held-fresh') THEN NULL
                 WHEN trigger_id LIKE '%later' THEN now_ms() + 3600000
                 ELSE now_ms() - 60000 END;
             UPDATE trigger_schedules
             SET claim_owner = 'r', claim_token = gen_random_uuid(),
                 claim_version = claim_version + 1,
                 claim_expires_at_ms = CASE WHEN trigger_id LIKE 'lapsed%' THEN now_ms() - 1000
                                            ELSE now_ms() + 30000 END
             WHERE trigger_id LIKE 'held%' OR trigger_id LIKE 'lapsed%'
                OR trigger_id LIKE '%-held';
             UPDATE triggers SET enabled = false WHERE trigger_id LIKE 'off%' OR trigger_id = 'paused-off';
             UPDATE trigger_schedules SET paused_at_ms = now_ms(), paused_by = 'test'
             WHERE trigger_id LIKE 'paused%';
             UPDATE projects SET status = 'suspended' WHERE project_id = 'q';",
        )
        .await
        .expect("rows in every state");
    let expected: Vec<(String, i64)> = db
        .client()
        .await
        .query(
            "SELECT state, count(*) FROM (
                 SELECT schedule_state(s.paused_at_ms, s.claimable, s.claim_token,
                                       s.claim_expires_at_ms, s.next_fire_at_ms) AS state
                 FROM trigger_schedules s) c
             GROUP BY state ORDER BY state",
            &[],
        )
        .await
        .expect("row by row")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let summary = json_of(&db, &["inspect"], 0);
    let counts = &summary["schedules"];
    let mut got: Vec<(String, i64)> = [
        "claimed",
        "disabled",
        "due",
        "expired_claim",
        "not_due",
        "paused",
        "uninitialized",
    ]
    .iter()
    .map(|state| ((*state).to_owned(), counts[state].as_i64().expect(state)))
    .filter(|(_, n)| *n > 0)
    .collect();
    got.sort();
    assert_eq!(got, expected, "{summary}");
    assert_eq!(counts["total"], 15, "{summary}");
    // Every state is present, so the comparison covers each.
    assert_eq!(expected.len(), 7, "{expected:?}");
    // `top` counts by other indexes, each bounded; on a table this small every count is exact.
    let top = qlsched::store::top::top_summary(&db.client().await)
        .await
        .expect("top's counts");
    assert!(!top.total_estimated && !top.due_capped, "{top:?}");
    let c = &top.counts;
    let mut got: Vec<(String, i64)> = [
        ("claimed", c.claimed),
        ("disabled", c.disabled),
        ("due", c.due),
        ("expired_claim", c.expired_claim),
        ("not_due", c.not_due),
        ("paused", c.paused),
        ("uninitialized", c.uninitialized),
    ]
    .into_iter()
    .map(|(state, n)| (state.to_owned(), n))
    .filter(|(_, n)| *n > 0)
    .collect();
    got.sort();
    assert_eq!(got, expected, "top: {c:?}");
    assert_eq!(c.total, 15, "top: {c:?}");
}

/// `fire`, `fire --dry-run` and `backfill` wait for a held schedule row at most the operators'
/// lock timeout (5 s): each exits 75 naming the lock wait within 6 s, and writes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn fire_and_backfill_wait_for_a_held_row_at_most_the_lock_timeout() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    let mut holder = db.client().await;
    let transaction = holder.transaction().await.expect("begin");
    transaction
        .execute(
            "SELECT 1 FROM trigger_schedules WHERE project_id = 'p' FOR UPDATE",
            &[],
        )
        .await
        .expect("hold the rows");
    let url = db.url();
    let commands: [&[&str]; 3] = [
        &["fire", "p/tick", "--yes"],
        &["fire", "p/tick", "--dry-run", "--yes"],
        &[
            "backfill",
            "p/tick",
            "--from",
            "2024-01-01T00:00:00Z",
            "--to",
            "2024-01-01T00:00:02Z",
            "--yes",
        ],
    ];
    for args in commands {
        let started = std::time::Instant::now();
        let (url, owned) = (
            url.clone(),
            args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>(),
        );
        let output = tokio::task::spawn_blocking(move || {
            std::process::Command::new(crate::util::bin())
                .arg("-D")
                .arg(&url)
                .args(&owned)
                .output()
                .expect("qlsched")
        })
        .await
        .expect("join");
        let took = started.elapsed();
        let message = stderr(&output);
        assert_eq!(code(&output), 75, "{args:?}: {message}");
        assert!(message.contains("SQLSTATE 55P03"), "{args:?}: {message}");
        assert!(
            took >= std::time::Duration::from_secs(5) && took < std::time::Duration::from_secs(6),
            "{args:?}: {took:?}: {message}"
        );
    }
    drop(transaction);
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM schedule_audit").await, 0);
}

/// A project suspended under a held claim parks the row without moving its fence: the admission
/// is a definition refusal (exit 6, the claim given back), not a lost fence (exit 3), from `claim
/// admit` as from a replica.
#[tokio::test]
async fn a_project_suspended_under_a_held_claim_is_a_definition_refusal() {
    let db = TestDb::new().await;
    db.publish(&every_second()).await;
    let held = json_of(&db, &["claim", "p/tick", "--hold", "--owner", "holder"], 0);
    let token = held["fence"]["token"].as_str().expect("token").to_owned();
    let version = held["fence"]["version"]
        .as_i64()
        .expect("version")
        .to_string();
    db.client()
        .await
        .batch_execute("UPDATE projects SET status = 'suspended'")
        .await
        .expect("suspend");
    let refused = qlsched(
        Some(&db),
        &[
            "claim",
            "admit",
            "p/tick",
            "--token",
            &token,
            "--version",
            &version,
            "--yes",
        ],
        None,
    );
    assert_eq!(code(&refused), 6, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("the project is suspended"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);

    // A replica's round, its claim taken before the suspension: refused, not a lost fence.
    db.client()
        .await
        .batch_execute(
            "UPDATE projects SET status = 'active';
             UPDATE trigger_schedules SET next_fire_at_ms = (now_ms() / 1000) * 1000 - 1000",
        )
        .await
        .expect("active and due");
    let store = db.store("test").await;
    let rows = crate::util::claim(&store, "replica", 1, 60_000).await;
    db.client()
        .await
        .batch_execute("UPDATE projects SET status = 'suspended'")
        .await
        .expect("suspend again");
    let outcome = crate::util::admit(&store, &[crate::util::admission(&rows[0])])
        .await
        .expect("admit");
    assert!(
        matches!(&outcome[0], qlsched::store::AdmissionOutcome::DefinitionRefused { reason }
            if reason.contains("suspended")),
        "{outcome:?}"
    );
    crate::util::assert_invariants(&db).await;
}
