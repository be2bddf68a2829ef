//! Operator control: when a trigger fires (`cron`, `inspect trigger`, `publish --dry-run`),
//! `claim --wait`, `fire`, `backfill`, pause and resume.

use serde_json::{Value, json};

use crate::util::{TestDb, code, manifest, qlsched, stderr, stdout, terminate};

fn json_of(output: &std::process::Output) -> Value {
    serde_json::from_str(&stdout(output))
        .unwrap_or_else(|e| panic!("json: {e}: {}{}", stdout(output), stderr(output)))
}

fn dst_notes(expr: &str, zone: &str, from: &str, count: &str) -> Vec<(String, Value)> {
    let output = qlsched(
        None,
        &[
            "cron", expr, "-z", zone, "--from", from, "-n", count, "-o", "json",
        ],
        None,
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    json_of(&output)["occurrences"]
        .as_array()
        .expect("occurrences")
        .iter()
        .map(|o| (o["utc"].as_str().expect("utc").to_owned(), o["dst"].clone()))
        .collect()
}

/// A wall time skipped by the spring-forward gap moves to the gap's end and is marked so, in
/// Europe/Berlin and America/New_York; the days around it are not marked.
#[test]
fn cron_marks_the_occurrence_a_gap_moved() {
    for (zone, from, moved) in [
        (
            "Europe/Berlin",
            "2026-03-28T00:00:00Z",
            "2026-03-29T01:00:00.000Z",
        ),
        (
            "America/New_York",
            "2026-03-06T12:00:00Z",
            "2026-03-08T07:00:00.000Z",
        ),
    ] {
        let notes = dst_notes("30 2 * * *", zone, from, "3");
        assert_eq!(notes.len(), 3, "{zone}: {notes:?}");
        assert_eq!(notes[0].1, Value::Null, "{zone}");
        assert_eq!(notes[1], (moved.to_owned(), json!("gap_moved")), "{zone}");
        assert_eq!(notes[2].1, Value::Null, "{zone}");
    }
    let table = stdout(&qlsched(
        None,
        &[
            "cron",
            "30 2 * * *",
            "-z",
            "Europe/Berlin",
            "--from",
            "2026-03-28T00:00:00Z",
            "-n",
            "2",
        ],
        None,
    ));
    assert!(
        table.contains("2026-03-29 03:00:00 CEST") && table.contains("DST gap"),
        "{table}"
    );
}

/// In the autumn fold a half-hourly job fires at both instants of each repeated wall time, marked
/// first and second; a daily job fires at the first only.
#[test]
fn cron_marks_both_instants_of_a_fold() {
    for (zone, from, expr) in [
        ("Europe/Berlin", "2026-10-25T00:00:00Z", "*/30 2 * * *"),
        ("America/New_York", "2026-11-01T05:00:00Z", "*/30 1 * * *"),
    ] {
        let notes = dst_notes(expr, zone, from, "5");
        let marks: Vec<&Value> = notes.iter().map(|(_, d)| d).collect();
        assert_eq!(
            marks,
            [
                &json!("fold_first"),
                &json!("fold_first"),
                &json!("fold_second"),
                &json!("fold_second"),
                &Value::Null
            ],
            "{zone}: {notes:?}"
        );
        let daily = dst_notes(&expr.replace("*/30", "30"), zone, from, "2");
        assert_eq!(daily[0].1, json!("fold_first"), "{zone}: {daily:?}");
        assert_eq!(daily[1].1, Value::Null, "{zone}: the next day, {daily:?}");
    }
}

/// A job written with a list is fixed-time as cronie defines it: on the spring-forward day its
/// wall times in the gap run once, at the jump, marked moved; on the fall-back day its repeated
/// wall time runs once, in the first offset. Nothing is listed twice.
#[test]
fn cron_lists_a_list_job_once_through_both_changes() {
    let spring = dst_notes(
        "0,30 2,14 * * *",
        "Europe/Berlin",
        "2027-03-28T00:00:00Z",
        "3",
    );
    assert_eq!(
        spring,
        [
            ("2027-03-28T01:00:00.000Z".to_owned(), json!("gap_moved")),
            ("2027-03-28T12:00:00.000Z".to_owned(), Value::Null),
            ("2027-03-28T12:30:00.000Z".to_owned(), Value::Null),
        ]
    );
    let autumn = dst_notes(
        "30 2,14 * * *",
        "Europe/Berlin",
        "2027-10-30T23:00:00Z",
        "3",
    );
    assert_eq!(
        autumn,
        [
            ("2027-10-31T00:30:00.000Z".to_owned(), json!("fold_first")),
            ("2027-10-31T13:30:00.000Z".to_owned(), Value::Null),
            ("2027-11-01T01:30:00.000Z".to_owned(), Value::Null),
        ]
    );
    let table = stdout(&qlsched(
        None,
        &[
            "cron",
            "0,30 2 * * *",
            "-z",
            "Europe/Berlin",
            "--from",
            "2027-03-28T00:00:00Z",
            "-n",
            "1",
        ],
        None,
    ));
    assert!(table.contains("moved: DST gap"), "{table}");
}

/// `--from` and `--count` out of their range are usage errors (exit 2) that quote the value as
/// given; an expression with fewer occurrences left than asked lists them and says so.
#[test]
fn cron_options_are_checked_and_a_short_list_is_explained() {
    for args in [
        ["--from", "99999999999999999"],
        ["--from", "10000-01-01T00:00:00Z"],
        ["--count", "1001"],
        ["--count", "0"],
    ] {
        let output = qlsched(None, &["cron", "0 0 * * *", args[0], args[1]], None);
        assert_eq!(code(&output), 2, "{args:?}: {}", stderr(&output));
        assert!(
            stderr(&output).contains(&format!("'{}'", args[1])),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let output = qlsched(
        None,
        &[
            "cron",
            "0 0 1 1 *",
            "--from",
            "9990-06-01T00:00:00Z",
            "-n",
            "20",
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(
        json_of(&output)["occurrences"].as_array().map(Vec::len),
        Some(9)
    );
    assert!(
        stderr(&output).contains("has 9 of the 20 occurrences asked for"),
        "{}",
        stderr(&output)
    );
}

/// `cron` refuses what publish refuses, with publish's message and exit 65, and needs no database.
#[tokio::test]
async fn cron_validates_as_publish_does() {
    let db = TestDb::new().await;
    for (expr, zone) in [
        ("* * *", "UTC"),
        ("0 0 30 2 *", "UTC"),
        ("0 3 * * *", "Mars/Base"),
    ] {
        let cron = qlsched(None, &["cron", expr, "-z", zone], None);
        assert_eq!(code(&cron), 65, "{expr}: {}", stderr(&cron));
        let published = qlsched(
            Some(&db),
            &["publish", "-f", "-", "--dry-run"],
            Some(
                &manifest(json!([{ "id": "x", "task": "t", "cron": expr, "time_zone": zone }]))
                    .to_string(),
            ),
        );
        assert_eq!(code(&published), 65, "{expr}");
        let message = stderr(&cron);
        let message = message.trim().trim_start_matches("qlsched: ");
        assert!(
            stderr(&published).contains(message),
            "{expr}: {message} / {}",
            stderr(&published)
        );
    }
}

/// `inspect trigger` lists the previous and the next five occurrences in the zone and UTC;
/// `publish --dry-run` names the fields a changed trigger changes and its next occurrence.
#[tokio::test]
async fn inspect_shows_occurrences_and_dry_run_names_changed_fields() {
    let db = TestDb::new().await;
    db.publish(&manifest(json!([
        { "id": "n", "task": "t", "cron": "0 3 * * *", "time_zone": "Europe/Berlin" }
    ])))
    .await;
    let output = qlsched(
        Some(&db),
        &["inspect", "trigger", "p/n", "-o", "json"],
        None,
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let detail = json_of(&output);
    let now = detail["now_ms"].as_i64().expect("now");
    let next = detail["occurrences"]["next"].as_array().expect("next");
    assert_eq!(next.len(), 5, "{detail}");
    assert!(next[0]["at_ms"].as_i64().expect("at") > now);
    assert!(
        next[0]["local"]
            .as_str()
            .expect("local")
            .contains("03:00:00"),
        "{detail}"
    );
    assert!(
        detail["occurrences"]["previous"]["at_ms"]
            .as_i64()
            .expect("previous")
            <= now
    );
    let table = stdout(&qlsched(Some(&db), &["inspect", "trigger", "p/n"], None));
    assert!(
        table.contains("next 5") && table.contains("previous"),
        "{table}"
    );

    let changed = manifest(json!([
        { "id": "n", "task": "t", "cron": "0 4 * * *", "time_zone": "Europe/Berlin", "misfire": "fire_once" }
    ]));
    let output = qlsched(
        Some(&db),
        &["publish", "-f", "-", "--dry-run", "-o", "json"],
        Some(&changed.to_string()),
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report = json_of(&output);
    let item = report["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["kind"] == "trigger")
        .expect("trigger item")
        .clone();
    assert_eq!(item["change"], "changed");
    assert_eq!(item["changed_fields"], json!(["cron", "misfire"]), "{item}");
    assert!(
        item["next_occurrence_ms"].as_i64().expect("next") > now,
        "{item}"
    );
    let table = stdout(&qlsched(
        Some(&db),
        &["publish", "-f", "-", "--dry-run"],
        Some(&changed.to_string()),
    ));
    assert!(table.contains("cron, misfire"), "{table}");
}

/// `claim P/T --wait` tries again while another owner holds the row, and takes it once the lease
/// ran out; a wait shorter than the lease ends with exit 5 and the reason.
#[tokio::test]
async fn claim_wait_takes_the_row_once_it_is_claimable() {
    let db = TestDb::new().await;
    db.publish(&manifest(
        json!([{ "id": "x", "task": "t", "cron": "* * * * * *" }]),
    ))
    .await;
    let held = qlsched(
        Some(&db),
        &[
            "claim", "p/x", "--hold", "--owner", "a", "--lease", "3s", "-o", "json",
        ],
        None,
    );
    assert_eq!(code(&held), 0, "{}", stderr(&held));
    let started = std::time::Instant::now();
    let refused = qlsched(
        Some(&db),
        &["claim", "p/x", "--hold", "--wait", "500ms"],
        None,
    );
    assert_eq!(code(&refused), 5, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("claim held by a")
            && stderr(&refused).contains("after waiting 500ms"),
        "{}",
        stderr(&refused)
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(450));
    let waited = qlsched(
        Some(&db),
        &[
            "claim", "p/x", "--hold", "--owner", "b", "--wait", "20s", "-o", "json",
        ],
        None,
    );
    assert_eq!(code(&waited), 0, "{}", stderr(&waited));
    assert_eq!(json_of(&waited)["fence"]["owner"], "b");
    let immediate = qlsched(Some(&db), &["claim", "p/x", "--hold"], None);
    assert_eq!(code(&immediate), 5, "without --wait it fails at once");
}

/// The schedule row as the scheduler sees it: cursor, versions, claim.
async fn schedule_row(db: &TestDb, trigger: &str) -> String {
    db.client()
        .await
        .query_one(
            "SELECT s::text FROM trigger_schedules s WHERE project_id = 'p' AND trigger_id = $1",
            &[&trigger],
        )
        .await
        .expect("schedule row")
        .get(0)
}

/// `fire` twice with one request id admits one run (the second reports it, `created: false`),
/// through the full admission (one attempt, two events), with origin `manual`; the cursor and the
/// schedule row do not move; accounting ignores the manual run.
#[tokio::test]
async fn fire_twice_with_one_request_id_admits_one_run() {
    let db = TestDb::new().await;
    db.publish(&manifest(
        json!([{ "id": "n", "task": "t", "cron": "0 3 * * *" }]),
    ))
    .await;
    let before = schedule_row(&db, "n").await;
    let refused = qlsched(Some(&db), &["fire", "p/n", "--request-id", "r1"], None);
    assert_eq!(
        code(&refused),
        2,
        "no terminal, no --yes: {}",
        stderr(&refused)
    );
    let dry = qlsched(
        Some(&db),
        &[
            "fire",
            "p/n",
            "--request-id",
            "r1",
            "--dry-run",
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(code(&dry), 0, "{}", stderr(&dry));
    assert_eq!(json_of(&dry)["dry_run"], true);
    assert_eq!(
        db.count("SELECT count(*) FROM runs").await,
        0,
        "a dry run admits nothing"
    );

    let fire = || {
        qlsched(
            Some(&db),
            &["fire", "p/n", "--request-id", "r1", "--yes", "-o", "json"],
            None,
        )
    };
    let first = fire();
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    let first = json_of(&first);
    assert_eq!(first["created"], true, "{first}");
    assert_eq!(first["idempotency_key"], "ql3:manual:v1:p/n:1:r1");
    let second = fire();
    assert_eq!(code(&second), 0, "{}", stderr(&second));
    let second = json_of(&second);
    assert_eq!(second["created"], false, "{second}");
    assert_eq!(second["run_id"], first["run_id"]);
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 1);
    assert_eq!(
        schedule_row(&db, "n").await,
        before,
        "the cursor and the fence stay"
    );

    let run_id = first["run_id"].as_str().expect("run id").to_owned();
    let detail = qlsched(Some(&db), &["inspect", "run", &run_id, "-o", "json"], None);
    let detail = json_of(&detail);
    assert_eq!(detail["run"]["origin"], "manual", "{detail}");
    assert_eq!(detail["attempts"].as_array().map(Vec::len), Some(1));
    assert_eq!(detail["events"].as_array().map(Vec::len), Some(2));
    // run.created in the one shape every admission writes (migration 0017): origin and decision
    // `manual`, the operator (the audit's actor) as actor, and no claim.
    let written = db
        .client()
        .await
        .query_one(
            "SELECT c.payload, q.payload, r.scheduled_for_ms, t.attempt_id::text, a.actor
             FROM runs r
             JOIN run_events c ON c.run_id = r.run_id AND c.seq = 1
             JOIN run_events q ON q.run_id = r.run_id AND q.seq = 2
             JOIN attempts t ON t.run_id = r.run_id
             JOIN schedule_audit a ON a.action = 'fire'
             WHERE r.run_id = $1::text::uuid",
            &[&run_id],
        )
        .await
        .expect("the run's events");
    let actor: String = written.get(4);
    assert_eq!(
        written.get::<_, Value>(0),
        json!({
            "idempotency_key": "ql3:manual:v1:p/n:1:r1",
            "scheduled_for_ms": written.get::<_, i64>(2),
            "decision": "manual",
            "origin": "manual",
            "actor": actor,
            "claim_owner": null,
            "claim_version": null,
        })
    );
    assert_eq!(
        written.get::<_, Value>(1),
        json!({ "attempt_id": written.get::<_, String>(3), "executor": "remote_worker" })
    );
    let runs = json_of(&qlsched(
        Some(&db),
        &["inspect", "runs", "-o", "json"],
        None,
    ));
    assert_eq!(runs[0]["origin"], "manual", "{runs}");
    let table = stdout(&qlsched(Some(&db), &["inspect", "runs"], None));
    assert!(table.contains("manual"), "{table}");
    assert_eq!(
        db.count("SELECT count(*) FROM schedule_audit WHERE action = 'fire'")
            .await,
        1
    );
    // Another request id is another run.
    let other = qlsched(Some(&db), &["fire", "p/n", "--yes", "-o", "json"], None);
    assert_eq!(json_of(&other)["created"], true);
    crate::util::assert_invariants(&db).await;
}

/// `fire` is refused, with the why, for a suspended project and a corrupt execution revision;
/// a malformed request id is bad input.
#[tokio::test]
async fn fire_refuses_a_suspended_project_and_a_corrupt_revision() {
    let db = TestDb::new().await;
    let mut suspended = manifest(json!([{ "id": "n", "task": "t", "cron": "0 3 * * *" }]));
    suspended["projects"][0]["status"] = json!("suspended");
    db.publish(&suspended).await;
    let refused = qlsched(Some(&db), &["fire", "p/n", "--yes"], None);
    crate::util::assert_refused(&refused, 5, "suspended", "suspended project");
    suspended["projects"][0]["status"] = json!("active");
    db.publish(&suspended).await;
    db.client()
        .await
        .batch_execute(
            "SET session_replication_role = replica;
             UPDATE execution_revisions SET digest = repeat('0', 64);",
        )
        .await
        .expect("tamper");
    let refused = qlsched(Some(&db), &["fire", "p/n", "--yes"], None);
    crate::util::assert_refused(&refused, 5, "corrupt", "corrupt execution revision");
    let bad = qlsched(
        Some(&db),
        &["fire", "p/n", "--yes", "--request-id", "a b"],
        None,
    );
    assert_eq!(code(&bad), 65, "{}", stderr(&bad));
    let missing = qlsched(Some(&db), &["fire", "p/nope", "--yes"], None);
    assert_eq!(code(&missing), 4, "{}", stderr(&missing));
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
}

async fn cursor(db: &TestDb, trigger: &str) -> i64 {
    db.client()
        .await
        .query_one(
            "SELECT next_fire_at_ms FROM trigger_schedules WHERE project_id = 'p' AND trigger_id = $1",
            &[&trigger],
        )
        .await
        .expect("cursor")
        .get::<_, Option<i64>>(0)
        .expect("initialized")
}

fn backfill(
    db: &TestDb,
    trigger: &str,
    from: i64,
    to: i64,
    extra: &[&str],
) -> std::process::Output {
    let (from, to) = (from.to_string(), to.to_string());
    let mut args = vec![
        "backfill", trigger, "--from", &from, "--to", &to, "--yes", "-o", "json",
    ];
    args.extend_from_slice(extra);
    qlsched(Some(db), &args, None)
}

/// A window holding admitted and misfired occurrences: the first backfill admits exactly the
/// misfired ones, under their cron keys, and a rerun admits nothing; accounting holds.
/// Ranges reaching the future or over --max are refused before anything is written.
#[tokio::test]
async fn backfill_twice_admits_each_occurrence_once() {
    let db = TestDb::new().await;
    db.publish(&manifest(json!([{
        "id": "x", "task": "t", "cron": "* * * * * *", "misfire": "fire_once", "misfire_grace": "0s"
    }])))
    .await;
    let admit = || {
        let output = qlsched(Some(&db), &["claim", "p/x", "--yes", "-o", "json"], None);
        assert_eq!(code(&output), 0, "{}", stderr(&output));
    };
    admit(); // initializes the cursor
    let first = cursor(&db, "x").await;
    for _ in 0..2 {
        crate::util::sleep_ms(2_600).await;
        admit(); // fires the latest misfired occurrence, records the others
    }
    let end = cursor(&db, "x").await;
    crate::util::sleep_ms(1_200).await; // the cursor's occurrence is past: [first, end) is owed
    let owed = (end - first) / 1_000;
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 2);
    assert!(db.count("SELECT count(*) FROM misfires").await >= 2);

    let before = crate::util::fingerprint(&db).await;
    let future = backfill(&db, "p/x", first, end + 3_600_000, &[]);
    crate::util::assert_refused(
        &future,
        65,
        "not in the past",
        "a window reaching the future",
    );
    let over = backfill(&db, "p/x", first, end - 1, &["--max", "2"]);
    crate::util::assert_refused(&over, 65, "--max", "a window over --max");
    let dry = backfill(&db, "p/x", first, end - 1, &["--dry-run"]);
    assert_eq!(
        json_of(&dry)["admitted"].as_i64(),
        Some(owed - 2),
        "{}",
        stdout(&dry)
    );
    assert_eq!(
        crate::util::fingerprint(&db).await,
        before,
        "refusals and a dry run write nothing"
    );

    let once = backfill(&db, "p/x", first, end - 1, &[]);
    assert_eq!(code(&once), 0, "{}", stderr(&once));
    let once = json_of(&once);
    assert_eq!(once["occurrences"].as_i64(), Some(owed), "{once}");
    assert_eq!(once["already_admitted"].as_i64(), Some(2), "{once}");
    assert_eq!(once["admitted"].as_i64(), Some(owed - 2), "{once}");
    let twice = json_of(&backfill(&db, "p/x", first, end - 1, &[]));
    assert_eq!(twice["admitted"].as_i64(), Some(0), "{twice}");
    assert_eq!(twice["already_admitted"].as_i64(), Some(owed), "{twice}");
    assert_eq!(
        db.count("SELECT count(*) FROM runs WHERE origin = 'backfill'")
            .await,
        owed - 2
    );
    let keyed = db
        .count(&format!(
            "SELECT count(*) FROM runs WHERE idempotency_key = 'ql3:cron:v1:p/x:1:' || scheduled_for_ms \
             AND scheduled_for_ms BETWEEN {first} AND {end}"
        ))
        .await;
    assert_eq!(keyed, owed, "every run under its occurrence's cron key");
    // Every run.created in one shape (migration 0017): a backfilled run names its origin and the
    // operator (the audit's actor), no claim; a cron run, admitted by `claim`, names the claim
    // it was admitted under and its owner as the actor.
    let client = db.client().await;
    let created = client
        .query(
            "SELECT e.payload, r.origin, r.idempotency_key, r.scheduled_for_ms
             FROM runs r JOIN run_events e ON e.run_id = r.run_id AND e.seq = 1
             ORDER BY r.scheduled_for_ms",
            &[],
        )
        .await
        .expect("run.created events");
    let operator: String = client
        .query_one(
            "SELECT DISTINCT actor FROM schedule_audit WHERE action = 'backfill'",
            &[],
        )
        .await
        .expect("one backfill actor")
        .get(0);
    let mut origins = Vec::new();
    for row in &created {
        let payload: Value = row.get(0);
        let origin: String = row.get(1);
        let (key, scheduled_for_ms): (String, i64) = (row.get(2), row.get(3));
        let expected = if origin == "backfill" {
            json!({
                "idempotency_key": key,
                "scheduled_for_ms": scheduled_for_ms,
                "decision": "backfill",
                "origin": "backfill",
                "actor": operator,
                "claim_owner": null,
                "claim_version": null,
            })
        } else {
            let owner = &payload["claim_owner"];
            assert!(owner.is_string(), "{payload}");
            assert!(payload["claim_version"].is_i64(), "{payload}");
            json!({
                "idempotency_key": key,
                "scheduled_for_ms": scheduled_for_ms,
                "decision": "fire_once_misfire",
                "origin": "cron",
                "actor": owner,
                "claim_owner": owner,
                "claim_version": payload["claim_version"],
            })
        };
        assert_eq!(payload, expected, "{origin}");
        origins.push(origin);
    }
    let cron = origins.iter().filter(|origin| *origin == "cron").count();
    assert_eq!(
        (cron, origins.len() - cron),
        (2, usize::try_from(owed - 2).expect("owed")),
        "{origins:?}"
    );

    // The cursor's occurrence and later are the scheduler's, even once they are past.
    crate::util::sleep_ms(2_200).await;
    let later = json_of(&backfill(&db, "p/x", end, end + 1_000, &[]));
    assert_eq!(later["admitted"].as_i64(), Some(0), "{later}");
    assert_eq!(later["left_to_scheduler"].as_i64(), Some(2), "{later}");
    crate::util::assert_invariants(&db).await;
}

/// A window reaching back before the trigger was first published admits nothing from before it:
/// the dry run and the result count what was left out and name the first publication, and
/// `--before-creation` admits those too. A republish keeps the first publication's time.
#[tokio::test]
async fn backfill_leaves_out_occurrences_before_the_trigger_existed_unless_asked() {
    let db = TestDb::new().await;
    let manifest_at = |cron: &str| {
        manifest(json!([{ "id": "x", "task": "t", "cron": cron, "misfire_grace": "0s" }]))
    };
    db.publish(&manifest_at("* * * * * *")).await;
    let created: i64 = db
        .count("SELECT created_at_ms FROM triggers WHERE trigger_id = 'x'")
        .await;
    // Republished under another expression: a new revision, the same first publication.
    db.publish(&manifest_at("*/1 * * * * *")).await;
    crate::util::sleep_ms(2_500).await;
    let first_after = (created / 1_000 + 1) * 1_000;
    let from = first_after - 30_000;
    let to = first_after + 999;
    let before = crate::util::fingerprint(&db).await;
    let dry = backfill(&db, "p/x", from, to, &["--dry-run"]);
    assert_eq!(code(&dry), 0, "{}", stderr(&dry));
    let dry = json_of(&dry);
    assert_eq!(
        dry["first_published_at_ms"].as_i64(),
        Some(created),
        "{dry}"
    );
    assert_eq!(dry["before_creation"].as_i64(), Some(30), "{dry}");
    assert_eq!(dry["occurrences"].as_i64(), Some(1), "{dry}");
    assert_eq!(dry["admitted"].as_i64(), Some(1), "{dry}");
    let table = qlsched(
        Some(&db),
        &[
            "backfill",
            "p/x",
            "--from",
            &from.to_string(),
            "--to",
            &to.to_string(),
            "--dry-run",
        ],
        None,
    );
    let text = stdout(&table);
    assert!(
        text.contains("30 left out") && text.contains("--before-creation"),
        "{text}"
    );
    assert_eq!(
        crate::util::fingerprint(&db).await,
        before,
        "a dry run writes nothing"
    );

    let clipped = json_of(&backfill(&db, "p/x", from, to, &[]));
    assert_eq!(clipped["admitted"].as_i64(), Some(1), "{clipped}");
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM runs WHERE scheduled_for_ms < {created}"
        ))
        .await,
        0
    );
    let asked = json_of(&backfill(&db, "p/x", from, to, &["--before-creation"]));
    assert_eq!(asked["before_creation"].as_i64(), Some(0), "{asked}");
    assert_eq!(asked["occurrences"].as_i64(), Some(31), "{asked}");
    assert_eq!(asked["admitted"].as_i64(), Some(30), "{asked}");
    crate::util::assert_invariants(&db).await;
}

/// Backfills racing real replicas (which catch up and record misfires over the same window)
/// never admit an occurrence twice, and occurrence accounting holds.
#[tokio::test]
async fn backfill_while_replicas_run_admits_no_duplicate() {
    let db = TestDb::new().await;
    let ids = ["a", "b", "c"];
    db.publish(&manifest(serde_json::Value::Array(
        ids.iter()
            .map(
                |id| json!({ "id": id, "task": "t", "cron": "* * * * * *", "misfire_grace": "1s" }),
            )
            .collect(),
    )))
    .await;
    let replica = |owner: &str| {
        crate::util::spawn_run(
            &db.url(),
            &[
                "--owner",
                owner,
                "--lease",
                "3s",
                "--cadence",
                "100ms",
                "--drain-timeout",
                "5s",
            ],
        )
    };
    let first = replica("r1");
    crate::util::sleep_ms(2_000).await;
    terminate(first);
    let start: i64 = db
        .client()
        .await
        .query_one("SELECT min(accounted_from_ms) FROM trigger_schedules", &[])
        .await
        .expect("start")
        .get(0);
    crate::util::sleep_ms(3_000).await; // occurrences pass beyond the grace: misfires to come
    let replicas = [replica("r2"), replica("r3")];
    let mut admitted = 0;
    for _ in 0..6 {
        let now: i64 = db
            .client()
            .await
            .query_one("SELECT now_ms()", &[])
            .await
            .expect("now")
            .get(0);
        for id in ids {
            let output = backfill(&db, &format!("p/{id}"), start, now - 1, &[]);
            assert_eq!(code(&output), 0, "{}", stderr(&output));
            admitted += json_of(&output)["admitted"].as_i64().expect("admitted");
        }
        crate::util::sleep_ms(300).await;
    }
    for child in replicas {
        let output = terminate(child);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    assert!(admitted > 0, "the misfired occurrences were backfilled");
    let counts = crate::util::assert_invariants(&db).await;
    assert_eq!(counts.duplicate_occurrences, 0);
    assert_eq!(
        db.count("SELECT count(*) FROM (SELECT 1 FROM runs GROUP BY idempotency_key HAVING count(*) > 1) d")
            .await,
        0
    );
}

/// Pausing with a claim in flight: the admission decided before the pause fails its fence and
/// nothing is admitted; the claim statement skips the paused row; `inspect trigger` names the
/// pause first, `inspect schedules --state paused` lists it, and publish leaves it paused.
#[tokio::test]
async fn pause_fences_out_a_claim_in_flight_and_stops_claims() {
    use qlsched::store::AdmissionOutcome;
    let db = TestDb::new().await;
    let every_second = manifest(json!([{ "id": "x", "task": "t", "cron": "* * * * * *" }]));
    db.publish(&every_second).await;
    let store = db.store("control test").await;
    let rows = crate::util::claim(&store, "r1", 1, 30_000).await;
    let outcomes = crate::util::admit(&store, &[crate::util::admission(&rows[0])]).await;
    assert_eq!(outcomes.expect("initialize"), [AdmissionOutcome::Advanced]);
    crate::util::sleep_ms(1_200).await;
    let rows = crate::util::claim(&store, "r1", 1, 30_000).await;
    assert_eq!(rows.len(), 1, "due and claimed");

    let paused = qlsched(
        Some(&db),
        &[
            "pause",
            "p/x",
            "--reason",
            "incident 7",
            "--yes",
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(code(&paused), 0, "{}", stderr(&paused));
    let paused = json_of(&paused);
    assert_eq!(paused["changed"][0]["voided_claim_of"], "r1", "{paused}");
    let outcomes = crate::util::admit(&store, &[crate::util::admission(&rows[0])]).await;
    assert_eq!(outcomes.expect("admit"), [AdmissionOutcome::FenceLost]);
    assert_eq!(
        db.count("SELECT count(*) FROM runs").await,
        0,
        "nothing admitted"
    );

    crate::util::sleep_ms(1_200).await;
    assert!(
        crate::util::claim(&store, "r2", 16, 30_000)
            .await
            .is_empty(),
        "skipped while paused"
    );
    let again = json_of(&qlsched(
        Some(&db),
        &["pause", "p/x", "--yes", "-o", "json"],
        None,
    ));
    assert_eq!(
        again["changed"].as_array().map(Vec::len),
        Some(0),
        "{again}"
    );
    assert_eq!(again["unchanged"], 1);

    let mut changed = every_second.clone();
    changed["projects"][0]["triggers"][0]["misfire_grace"] = json!("5s");
    db.publish(&changed).await;
    let detail = json_of(&qlsched(
        Some(&db),
        &["inspect", "trigger", "p/x", "-o", "json"],
        None,
    ));
    let why = &detail["why_not_firing"];
    assert_eq!(why["cause"], "paused", "publish leaves the pause: {detail}");
    assert_eq!(why["reason"], "incident 7");
    assert!(why["by"].as_str().is_some_and(|by| !by.is_empty()));
    let table = stdout(&qlsched(Some(&db), &["inspect", "trigger", "p/x"], None));
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|l| l.contains("paused by") && l.contains("incident 7")),
        "{table}"
    );
    let listed = json_of(&qlsched(
        Some(&db),
        &["inspect", "schedules", "--state", "paused", "-o", "json"],
        None,
    ));
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["paused"]["reason"], "incident 7");
    // Named for what it is, with no due time: a script picking overdue rows by `due_in_ms` never
    // picks a paused one.
    assert_eq!(listed[0]["state"], "paused", "{listed}");
    assert!(listed[0].get("due_in_ms").is_none(), "{listed}");
    let every = json_of(&qlsched(
        Some(&db),
        &["inspect", "schedules", "-o", "json"],
        None,
    ));
    assert_eq!(every[0]["state"], "paused", "{every}");
    assert!(every[0].get("due_in_ms").is_none(), "{every}");
    let table = stdout(&qlsched(
        Some(&db),
        &["inspect", "schedules", "--state", "paused"],
        None,
    ));
    let row = table
        .lines()
        .find(|line| line.contains("p/x"))
        .unwrap_or_else(|| panic!("no row for p/x:\n{table}"));
    assert!(row.contains("paused"), "{table}");
    assert!(!row.contains("disabled"), "{table}");
    // The `due in` column is empty (`-`) for a paused row.
    let cells: Vec<&str> = row.split(['│', '┆']).map(str::trim).collect();
    assert_eq!(
        cells.get(2..5).map(|c| (c[0], c[2])),
        Some(("paused", "-")),
        "{table}"
    );
    let summary = json_of(&qlsched(Some(&db), &["inspect", "-o", "json"], None));
    assert_eq!(
        (
            &summary["schedules"]["paused"],
            &summary["schedules"]["disabled"]
        ),
        (&json!(1), &json!(0)),
        "no replica claims it, counted as paused, apart from disabled: {summary}"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM schedule_audit WHERE action = 'pause'")
            .await,
        1
    );
    let missing = qlsched(Some(&db), &["pause", "p/nope", "--yes"], None);
    assert_eq!(code(&missing), 4, "{}", stderr(&missing));
    let unconfirmed = qlsched(Some(&db), &["resume", "p/x"], None);
    assert_eq!(code(&unconfirmed), 2, "{}", stderr(&unconfirmed));
}

/// Resume records the occurrences passed while paused as one misfire record with reason
/// `paused` and moves the cursor to the first occurrence at or after the resume; replicas then
/// carry on and occurrence accounting holds. `--project` pauses and resumes every trigger.
#[tokio::test]
async fn resume_records_a_paused_misfire_and_accounting_holds() {
    let db = TestDb::new().await;
    db.publish(&manifest(json!([
        { "id": "x", "task": "t", "cron": "* * * * * *" },
        { "id": "y", "task": "t", "cron": "* * * * * *" }
    ])))
    .await;
    let replica = || {
        crate::util::spawn_run(
            &db.url(),
            &[
                "--owner",
                "r1",
                "--lease",
                "3s",
                "--cadence",
                "100ms",
                "--drain-timeout",
                "5s",
            ],
        )
    };
    let first = replica();
    crate::util::sleep_ms(1_500).await;
    let paused = json_of(&qlsched(
        Some(&db),
        &["pause", "--project", "p", "--yes", "-o", "json"],
        None,
    ));
    assert_eq!(
        paused["changed"].as_array().map(Vec::len),
        Some(2),
        "{paused}"
    );
    let runs_at_pause = db.count("SELECT count(*) FROM runs").await;
    crate::util::sleep_ms(3_000).await;
    assert_eq!(
        db.count("SELECT count(*) FROM runs").await,
        runs_at_pause,
        "nothing while paused"
    );

    let dry = json_of(&qlsched(
        Some(&db),
        &["resume", "p/x", "--dry-run", "-o", "json"],
        None,
    ));
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        db.count("SELECT count(*) FROM misfires").await,
        0,
        "a dry run records nothing"
    );
    let resumed = qlsched(
        Some(&db),
        &["resume", "--project", "p", "--yes", "-o", "json"],
        None,
    );
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));
    let resumed = json_of(&resumed);
    let now: i64 = db
        .client()
        .await
        .query_one("SELECT now_ms()", &[])
        .await
        .expect("now")
        .get(0);
    for change in resumed["changed"].as_array().expect("changed") {
        let passed = &change["passed_over"];
        assert!(passed["count"].as_i64().expect("count") >= 2, "{resumed}");
        let next = change["next_fire_at_ms"].as_i64().expect("next");
        assert!(
            next > passed["last_ms"].as_i64().expect("last") && next <= now + 1_000,
            "{resumed}"
        );
    }
    assert_eq!(
        db.count("SELECT count(*) FROM misfires WHERE reason = 'paused'")
            .await,
        2
    );
    assert_eq!(
        db.count("SELECT count(*) FROM schedule_audit WHERE action = 'resume'")
            .await,
        2
    );
    crate::util::sleep_ms(1_500).await;
    let output = terminate(first);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        db.count("SELECT count(*) FROM runs").await > runs_at_pause,
        "firing again"
    );
    crate::util::assert_invariants(&db).await;
}

fn as_login(url: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(crate::util::bin())
        .args(["-D", url])
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run qlsched")
}

/// A trigger published again while paused has no cursor when it is resumed: the resume says
/// when it will have one instead of a bare dash.
#[tokio::test]
async fn resume_after_a_republish_says_when_the_cursor_comes() {
    let db = TestDb::new().await;
    let publish = |cron: &str| manifest(json!([{ "id": "x", "task": "t", "cron": cron }]));
    db.publish(&publish("* * * * * *")).await;
    let paused = qlsched(Some(&db), &["pause", "p/x", "--yes"], None);
    assert_eq!(code(&paused), 0, "{}", stderr(&paused));
    db.publish(&publish("*/2 * * * * *")).await;
    let resumed = qlsched(Some(&db), &["resume", "p/x", "--yes"], None);
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));
    let text = stdout(&resumed);
    assert!(
        text.contains("next when a replica initializes it"),
        "{text}"
    );
}

/// Pause, resume, fire and backfill are the admin's (docs/DESIGN.md §3.2): an admin login does
/// each, observer and runtime logins are refused with exit 77, a message naming `qlsched_admin`,
/// and change nothing.
#[tokio::test]
async fn operator_control_is_the_admins() {
    use crate::util::LoginRole;
    let db = TestDb::new().await;
    db.publish(&manifest(
        json!([{ "id": "x", "task": "t", "cron": "* * * * * *" }]),
    ))
    .await;
    for group in ["qlsched_observer", "qlsched_runtime"] {
        let login = LoginRole::create(&db, group).await;
        let url = login.url(&db);
        for args in [
            vec!["pause", "p/x", "--yes"],
            vec!["fire", "p/x", "--yes"],
            vec![
                "backfill",
                "p/x",
                "--from",
                "0",
                "--to",
                "1000",
                "--before-creation",
                "--yes",
            ],
        ] {
            let output = as_login(&url, &args);
            assert_eq!(code(&output), 77, "{group} {args:?}: {}", stderr(&output));
            assert!(
                stderr(&output).contains("qlsched_admin"),
                "the refusal names the role to grant: {group} {args:?}: {}",
                stderr(&output)
            );
        }
    }
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
    let admin = LoginRole::create(&db, "qlsched_admin").await;
    let url = admin.url(&db);
    let fired = as_login(&url, &["fire", "p/x", "--yes", "-o", "json"]);
    assert_eq!(code(&fired), 0, "{}", stderr(&fired));
    let paused = as_login(&url, &["pause", "p/x", "--yes"]);
    assert_eq!(code(&paused), 0, "{}", stderr(&paused));
    let fired_paused = as_login(&url, &["fire", "p/x", "--yes"]);
    assert_eq!(
        code(&fired_paused),
        0,
        "a paused trigger can be fired: {}",
        stderr(&fired_paused)
    );
    let resumed = as_login(&url, &["resume", "p/x", "--yes"]);
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));
    let backfilled = as_login(
        &url,
        &["backfill", "p/x", "--from", "0", "--to", "1", "--yes"],
    );
    assert_eq!(code(&backfilled), 0, "{}", stderr(&backfilled));
    assert_eq!(
        db.count("SELECT count(*) FROM runs WHERE origin = 'manual'")
            .await,
        2
    );
    let verify = qlsched(Some(&db), &["migrate", "verify", "-o", "json"], None);
    assert_eq!(
        code(&verify),
        0,
        "the live grants are the matrix: {}",
        stdout(&verify)
    );
}

/// SIGINT stops a backfill between transactions (exit 130 after its summary, what committed
/// stays); the same command then admits exactly the rest.
#[tokio::test]
async fn an_interrupted_backfill_continues_where_it_stopped() {
    let db = TestDb::new().await;
    db.publish(&manifest(
        json!([{ "id": "x", "task": "t", "cron": "* * * * * *" }]),
    ))
    .await;
    let init = qlsched(Some(&db), &["claim", "p/x", "--yes"], None);
    assert_eq!(code(&init), 0, "{}", stderr(&init));
    let end = cursor(&db, "x").await - 1_000;
    // 40,000 occurrences (80 transactions), reaching back before the trigger was published.
    let start = end - 40_000 * 1_000 + 1_000;
    let (from, to) = (start.to_string(), end.to_string());
    let args = [
        "-D",
        &db.url(),
        "backfill",
        "p/x",
        "--from",
        &from,
        "--to",
        &to,
        "--max",
        "50000",
        "--before-creation",
        "--yes",
        "-o",
        "json",
    ];
    let child = std::process::Command::new(crate::util::bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn backfill");
    crate::util::sleep_ms(1_500).await;
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    let stopped = child.wait_with_output().expect("wait");
    let first = json_of(&stopped);
    let admitted_first = first["admitted"].as_i64().expect("admitted");
    if first["interrupted"] == true {
        assert_eq!(code(&stopped), 130, "{}", stderr(&stopped));
        assert!(admitted_first < 40_000, "{first}");
    } else {
        assert_eq!(
            code(&stopped),
            0,
            "finished before the signal: {}",
            stderr(&stopped)
        );
    }
    assert_eq!(
        db.count("SELECT count(*) FROM runs").await,
        admitted_first,
        "what committed stays"
    );
    let rest = json_of(&backfill(
        &db,
        "p/x",
        start,
        end,
        &["--max", "50000", "--before-creation"],
    ));
    assert_eq!(
        rest["admitted"].as_i64(),
        Some(40_000 - admitted_first),
        "{rest}"
    );
    assert_eq!(
        rest["already_admitted"].as_i64(),
        Some(admitted_first),
        "{rest}"
    );
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 40_000);
    crate::util::assert_invariants(&db).await;
}

/// Deadlocks the server has detected in `db` (pg_stat_database), as last flushed.
async fn deadlocks(db: &TestDb) -> i64 {
    db.count("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        .await
}

/// Publish (a changed task voids every claim on it), a project-wide pause and resume, and
/// `expire --owner` run over and over against three replicas admitting the same rows: each
/// writer locks schedule rows in the order an admission does, so none of them deadlocks, by the
/// server's own count (`pg_stat_database.deadlocks`, 0 more after the race; a deadlock would also
/// exit 1 or 75 here). Then the real admission statement meets a real `pause` on two rows, step
/// by step ([`admission_meets_pause`]): with its rows in the order the coordinator sorts them
/// (`store::admit::lock_order`) the count stays, with them reversed it moves, so the measure sees
/// a deadlock when there is one, and either writer's order regressing fails the test. The run
/// ends on the invariants.
#[tokio::test(flavor = "multi_thread")]
async fn writers_racing_running_replicas_never_deadlock_and_keep_the_invariants() {
    let db = TestDb::new().await;
    let ids: Vec<String> = (0..40).map(|i| format!("t{i:02}")).collect();
    let triggers: Vec<Value> = ids
        .iter()
        .map(|id| json!({ "id": id, "task": "t", "cron": "* * * * * *" }))
        .collect();
    let with_image = |image: &str| {
        let mut manifest = manifest(json!(triggers.clone()));
        manifest["projects"][0]["tasks"][0]["execution"]["image"] = json!(image);
        manifest.to_string()
    };
    db.publish(&serde_json::from_str(&with_image("x0")).expect("json"))
        .await;
    let deadlocks_before = deadlocks(&db).await;
    let url = db.url();
    let replicas: Vec<_> = (0..3)
        .map(|i| {
            crate::util::spawn_run(
                &url,
                &[
                    "--owner",
                    &format!("r{i}"),
                    "--lease",
                    "2s",
                    "--cadence",
                    "100ms",
                    "--batch",
                    "16",
                ],
            )
        })
        .collect();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (published, paused, expired) = std::thread::scope(|scope| {
        let publisher = scope.spawn(|| {
            let mut rounds = 0;
            while std::time::Instant::now() < until {
                let output = qlsched(
                    Some(&db),
                    &["publish", "-f", "-"],
                    Some(&with_image(&format!("x{}", rounds + 1))),
                );
                assert_eq!(code(&output), 0, "publish: {}", stderr(&output));
                rounds += 1;
                // A publish that changes the task voids every claim on it. Back to back, on a
                // loaded machine, publishes voided every claim for nine seconds and nothing was
                // admitted (1 run in 4 before the round's claims became one type, 2 in 4 after):
                // a pace no deployment publishes at, and not what this test is for (deadlocks).
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            rounds
        });
        let pauser = scope.spawn(|| {
            let mut rounds = 0;
            while std::time::Instant::now() < until {
                for verb in ["pause", "resume"] {
                    let output = qlsched(Some(&db), &[verb, "--project", "p", "--yes"], None);
                    assert_eq!(code(&output), 0, "{verb}: {}", stderr(&output));
                }
                rounds += 1;
                // Back to back, a pause followed each resume within milliseconds: the rows were
                // paused whenever they came due, and in one CI run nothing was admitted in ten
                // seconds. Resumed for 400 ms of each pair, they come due while replicas claim.
                std::thread::sleep(std::time::Duration::from_millis(400));
            }
            rounds
        });
        let expirer = scope.spawn(|| {
            let mut rounds = 0;
            while std::time::Instant::now() < until {
                let output = qlsched(Some(&db), &["expire", "--owner", "r1", "--yes"], None);
                // 4 before r1 has held anything, 5 when it holds nothing now: no conflict.
                assert!(
                    matches!(code(&output), 0 | 4 | 5),
                    "expire --owner: {}",
                    stderr(&output)
                );
                rounds += 1;
            }
            rounds
        });
        (
            publisher.join().expect("publisher"),
            pauser.join().expect("pauser"),
            expirer.join().expect("expirer"),
        )
    });
    let mut logs = String::new();
    for replica in replicas {
        logs.push_str(&replica.stop());
    }
    crate::util::assert_invariants(&db).await;
    let runs = db.count("SELECT count(*) FROM runs").await;
    assert!(runs > 0, "the replicas admitted nothing: {logs}");
    assert!(
        !logs.contains("40P01") && !logs.contains("deadlock"),
        "a replica met a deadlock: {logs}"
    );
    // Every process of the race has exited, and a backend flushes its counts when it ends.
    crate::util::sleep_ms(1_500).await;
    let in_race = deadlocks(&db).await - deadlocks_before;
    assert_eq!(in_race, 0, "the server detected deadlocks during the race");

    // The measure sees a deadlock when there is one, and the writers' order is what keeps it
    // away: the real admission statement and the real `pause`, made to meet on t00 and t01, once
    // with the admission's rows in the order the coordinator sorts them, once reversed.
    admission_meets_pause(&db, false).await;
    crate::util::sleep_ms(1_500).await;
    let in_order = deadlocks(&db).await - deadlocks_before;
    assert_eq!(
        in_order, 0,
        "an admission in lock order and a pause met without a deadlock"
    );
    admission_meets_pause(&db, true).await;
    crate::util::eventually(
        std::time::Duration::from_secs(5),
        "the reversed admission's deadlock counted",
        || async { deadlocks(&db).await > deadlocks_before },
    )
    .await;
    let reversed = deadlocks(&db).await - deadlocks_before;
    eprintln!(
        "race: {published} publishes, {paused} pause/resume pairs, {expired} expires beside 3 \
         replicas; {runs} runs admitted; deadlocks counted by the server: {in_race} in the race, \
         {in_order} when an admission in lock order met a pause, {reversed} when one in reversed \
         order did"
    );
}

/// The real admission statement (`store::admit::admit_in_transaction`, SERIALIZABLE) of t00 and
/// t01, claimed by an owner of its own, against a real `qlsched pause --project p`, which locks
/// every row of the project in primary-key order. Made to meet, not left to timing: a gate session
/// holds the first row the admission locks; the admission waits on it; the pause starts and locks
/// what it can (t00, when the admission takes t01 first) and waits; then the gate lets go. In
/// lock order both want t00 first, and the pause waits for the admission. Reversed, the admission
/// takes t01 and waits for the pause's t00, while the pause waits for t01: a deadlock, which the
/// server breaks (the pause retries it as contention). Both end; the project is resumed and the
/// admission rolled back, and the backends' counts flushed.
async fn admission_meets_pause(db: &TestDb, reversed: bool) {
    let setup = db.client().await;
    setup
        .batch_execute(
            "UPDATE trigger_schedules SET claim_owner = NULL, claim_token = NULL,
                 claim_expires_at_ms = NULL, claim_version = claim_version + 1,
                 state_version = state_version + 1,
                 next_fire_at_ms = CASE WHEN trigger_id IN ('t00', 't01')
                     THEN next_fire_at_ms ELSE now_ms() + 3600000 END",
        )
        .await
        .expect("only t00 and t01 to come due, nothing claimed");
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE paused_at_ms IS NOT NULL")
            .await,
        0,
        "the project is not paused"
    );
    let store = db.store("meet").await;
    let mut rows = Vec::new();
    for _ in 0..30 {
        rows = crate::util::claim(&store, "meet", 2, 60_000).await;
        if rows.len() == 2 {
            break;
        }
        // Every second: t00 and t01 come due within one.
        crate::util::sleep_ms(100).await;
    }
    let mut admissions: Vec<_> = rows.iter().map(crate::util::admission).collect();
    admissions.reverse();
    admissions.sort_by(|a, b| qlsched::store::admit::lock_order(a.row, b.row));
    if reversed {
        admissions.reverse();
    }
    let first = admissions
        .first()
        .map(|a| a.row.trigger_id.clone())
        .expect("two rows claimed");
    assert_eq!(rows.len(), 2);
    let waiting = || async {
        db.count(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .await
    };
    let gate = db.client().await;
    gate.batch_execute(&format!(
        "BEGIN; SELECT 1 FROM trigger_schedules WHERE trigger_id = '{first}' FOR UPDATE"
    ))
    .await
    .expect("the gate holds the admission's first row");
    let mut admitting = db.client().await;
    let transaction = admitting
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::Serializable)
        .start()
        .await
        .expect("begin");
    let wait = |n: i64| {
        crate::util::eventually(
            std::time::Duration::from_secs(10),
            "lock waits",
            move || async move { waiting().await >= n },
        )
    };
    let (admitted, pause) = {
        let admitted = qlsched::store::admit::admit_in_transaction(&transaction, &admissions);
        tokio::pin!(admitted);
        // The admission's statement waits on the gate (polled alongside, so that it is sent).
        tokio::select! {
            done = &mut admitted => panic!("the admission did not wait on the gate: {done:?}"),
            () = wait(1) => {}
        }
        let pause = std::process::Command::new(crate::util::bin())
            .args(["-D", &db.url(), "pause", "--project", "p", "--yes"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn qlsched pause");
        tokio::select! {
            done = &mut admitted => panic!("the admission did not wait for the gate: {done:?}"),
            () = wait(2) => {}
        }
        gate.batch_execute("COMMIT")
            .await
            .expect("the gate lets go");
        (admitted.await, pause)
    };
    if reversed {
        // Either side may be the one the server aborts; the admission, when it is, says so.
        if let Err(error) = &admitted {
            assert!(error.to_string().contains("40P01"), "{error}");
        }
    } else {
        admitted.expect("the admission in lock order");
    }
    let _ = transaction.rollback().await;
    let paused = tokio::task::spawn_blocking(move || pause.wait_with_output())
        .await
        .expect("join")
        .expect("wait for qlsched pause");
    assert_eq!(code(&paused), 0, "pause: {}", stderr(&paused));
    let resumed = qlsched(Some(db), &["resume", "--project", "p", "--yes"], None);
    assert_eq!(code(&resumed), 0, "resume: {}", stderr(&resumed));
    admitting
        .batch_execute("SELECT pg_stat_force_next_flush()")
        .await
        .expect("flush");
}

/// Backfill as a library service: progress after each transaction, and a stop token tripped
/// after the first ends it there (interrupted, what committed stays); a second run admits exactly
/// the rest.
#[tokio::test]
async fn the_backfill_service_reports_progress_and_stops_between_transactions() {
    use qlsched::backfill::{BATCH, Backfill, BackfillRequest};
    use qlsched::core::TriggerName;
    use qlsched::stop::StopToken;

    let db = TestDb::new().await;
    db.publish(&manifest(
        json!([{ "id": "x", "task": "t", "cron": "* * * * * *" }]),
    ))
    .await;
    let init = qlsched(Some(&db), &["claim", "p/x", "--yes"], None);
    assert_eq!(code(&init), 0, "{}", stderr(&init));
    let end = cursor(&db, "x").await - 1_000;
    let occurrences = 3 * BATCH as i64;
    let request = BackfillRequest {
        trigger: TriggerName::new("p", "x"),
        from: qlsched::core::instant::InstantArg::At(end - (occurrences - 1) * 1_000),
        to: qlsched::core::instant::InstantArg::At(end),
        before_creation: true,
        max: 10_000,
    };
    let store = db.store("backfill service").await;
    let plan = Backfill::plan(&store, request.clone()).await.expect("plan");
    assert_eq!(plan.occurrences.len() as i64, occurrences);

    let stop = StopToken::new();
    let mut seen = Vec::new();
    let first = plan
        .run("tester", false, &stop, |progress| {
            seen.push(progress);
            stop.trip("test");
        })
        .await
        .expect("first run");
    assert!(first.interrupted);
    assert_eq!(first.transactions, 1);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].total, occurrences as u64);
    assert_eq!(seen[0].done, BATCH as u64);
    assert_eq!(seen[0].admitted, first.total.admitted);

    let rest = Backfill::plan(&store, request)
        .await
        .expect("plan again")
        .run("tester", false, &StopToken::new(), |_| {})
        .await
        .expect("second run");
    assert!(!rest.interrupted);
    assert_eq!(rest.transactions, 3);
    assert_eq!(rest.total.existing, first.total.admitted);
    assert_eq!(
        first.total.admitted + rest.total.admitted + rest.total.left_to_scheduler,
        occurrences as u64
    );
}

/// A resume computes its cron steps from the paused rows without holding them: the read runs
/// the statement that locks them inside a savepoint rolled back at once, which releases its
/// locks; the same statement run again holds them. Another connection's `NOWAIT` lock tells.
#[tokio::test]
async fn a_resumes_first_read_holds_no_row_and_its_second_holds_them() {
    let db = TestDb::new().await;
    db.publish(&manifest(
        json!([{ "id": "x", "task": "t", "cron": "* * * * * *" }]),
    ))
    .await;
    let store = db.store("control test").await;
    qlsched::store::control::pause(&store, ("p", Some("x")), "test", None, false)
        .await
        .expect("pause");
    let text = |name: &str| {
        qlsched::store::statements::all()
            .into_iter()
            .find(|s| s.module.ends_with("control::pause") && s.name == name)
            .unwrap_or_else(|| panic!("no statement {name}"))
            .text
    };
    let resume = db.client().await;
    let other = db.client().await;
    let lock_it = "BEGIN; SELECT 1 FROM trigger_schedules \
                   WHERE project_id = 'p' AND trigger_id = 'x' FOR UPDATE NOWAIT";
    resume.batch_execute("BEGIN").await.expect("begin");
    resume
        .batch_execute(text("READ_UNLOCKED"))
        .await
        .expect("savepoint");
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&"p", &Some("x")];
    let read = resume
        .query(text("PAUSED_ROWS"), &params)
        .await
        .expect("read");
    assert_eq!(read.len(), 1);
    resume
        .batch_execute(text("UNLOCK_READ"))
        .await
        .expect("rollback to the savepoint");
    other
        .batch_execute(lock_it)
        .await
        .expect("the first read left the row free");
    other.batch_execute("ROLLBACK").await.expect("rollback");
    let held = resume
        .query(text("PAUSED_ROWS"), &params)
        .await
        .expect("lock");
    assert_eq!(held.len(), 1);
    let refused = other.batch_execute(lock_it).await.expect_err("held");
    assert_eq!(
        refused.code(),
        Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE),
        "{refused}"
    );
    other.batch_execute("ROLLBACK").await.expect("rollback");
    resume.batch_execute("ROLLBACK").await.expect("rollback");
}
