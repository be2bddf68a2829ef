//! Occurrence accounting against a real PostgreSQL: a replica that fell behind admits every
//! occurrence still within the grace, one run each and in order; occurrences beyond the grace
//! are passed over as one misfire record written with the cursor's move; and a lost occurrence
//! is a gap that `inspect invariants` names and exits 1 for.

use std::time::Duration;

use serde_json::json;

use qlsched::coordinator::Coordinator;
use qlsched::core::CoordinatorConfig;

use crate::util::{TestDb, assert_invariants, code, manifest, qlsched, stdout};

const SECOND: i64 = 1_000;

fn coordinator(db_store: qlsched::store::Store) -> Coordinator {
    Coordinator::new(
        db_store,
        CoordinatorConfig {
            owner: "behind".to_owned(),
            lease: Duration::from_secs(30),
            ..CoordinatorConfig::default()
        },
    )
}

/// One every-second trigger `p/t` whose cursor (and accounting start) the database puts `behind`
/// seconds before its own now, on the second grid; returns that cursor.
async fn trigger_behind(db: &TestDb, policy: &str, grace: &str, behind: i64) -> i64 {
    db.publish(&manifest(json!([{
        "id": "t", "task": "t", "cron": "* * * * * *", "misfire": policy, "misfire_grace": grace
    }])))
    .await;
    db.client()
        .await
        .query_one(
            "UPDATE trigger_schedules
             SET next_fire_at_ms = (now_ms() / 1000 - $1) * 1000,
                 accounted_from_ms = (now_ms() / 1000 - $1) * 1000
             RETURNING next_fire_at_ms",
            &[&behind],
        )
        .await
        .expect("put the cursor behind")
        .get(0)
}

/// Rounds until one admits nothing more: at most `limit`.
async fn catch_up(
    coordinator: &Coordinator,
    limit: usize,
) -> Vec<qlsched::coordinator::RoundReport> {
    let mut reports = Vec::new();
    for _ in 0..limit {
        let report = coordinator.run_round().await.expect("round");
        let idle = report.fired == 0 && report.skipped == 0;
        reports.push(report);
        if idle {
            break;
        }
    }
    reports
}

async fn scheduled(db: &TestDb) -> Vec<i64> {
    db.client()
        .await
        .query(
            "SELECT scheduled_for_ms FROM runs ORDER BY created_at_ms, scheduled_for_ms",
            &[],
        )
        .await
        .expect("runs")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[tokio::test]
async fn a_replica_behind_within_the_grace_admits_every_occurrence_in_order() {
    let db = TestDb::new().await;
    let cursor = trigger_behind(&db, "skip", "60s", 5).await;
    let coordinator = coordinator(db.store("behind").await);
    let reports = catch_up(&coordinator, 20).await;

    let runs = scheduled(&db).await;
    assert!(runs.len() >= 6, "five seconds behind, then now: {runs:?}");
    let expected: Vec<i64> = (0..runs.len() as i64)
        .map(|i| cursor + i * SECOND)
        .collect();
    assert_eq!(
        runs, expected,
        "every occurrence, oldest first, none skipped"
    );
    assert!(reports.iter().all(|r| r.misfires == 0), "{reports:?}");
    assert_eq!(db.count("SELECT count(*) FROM misfires").await, 0);
    assert_invariants(&db).await;
}

#[tokio::test]
async fn beyond_the_grace_skip_records_one_misfire_and_fires_what_is_within() {
    let db = TestDb::new().await;
    let cursor = trigger_behind(&db, "skip", "2s", 30).await;
    let coordinator = coordinator(db.store("behind").await);
    let first = coordinator.run_round().await.expect("round");
    assert_eq!((first.fired, first.misfires), (1, 1), "{first:?}");
    assert!(first.occurrences_passed_over >= 27, "{first:?}");

    let record = db
        .client()
        .await
        .query_one(
            "SELECT first_occurrence_ms, last_occurrence_ms, occurrences, occurrences_exact,
                    policy, reason, owner, trigger_revision
             FROM misfires",
            &[],
        )
        .await
        .expect("exactly one misfire record");
    let (first_ms, last_ms, count): (i64, i64, i64) = (record.get(0), record.get(1), record.get(2));
    assert_eq!(first_ms, cursor);
    assert_eq!(count, (last_ms - first_ms) / SECOND + 1);
    assert!(record.get::<_, bool>(3));
    assert_eq!(record.get::<_, String>(4), "skip");
    assert_eq!(record.get::<_, String>(5), "beyond_grace");
    assert_eq!(record.get::<_, String>(6), "behind");
    assert_eq!(record.get::<_, i64>(7), 1);
    let runs = scheduled(&db).await;
    assert_eq!(
        runs.first(),
        Some(&(last_ms + SECOND)),
        "the first within the grace fires"
    );

    catch_up(&coordinator, 20).await;
    assert_eq!(db.count("SELECT count(*) FROM misfires").await, 1);
    assert_invariants(&db).await;
}

#[tokio::test]
async fn beyond_the_grace_fire_once_admits_the_latest_misfired_and_records_the_rest() {
    let db = TestDb::new().await;
    let cursor = trigger_behind(&db, "fire_once", "2s", 30).await;
    let coordinator = coordinator(db.store("behind").await);
    let first = coordinator.run_round().await.expect("round");
    assert_eq!((first.fired, first.misfires), (1, 1), "{first:?}");
    let admitted = &first.admitted[0];
    assert!(admitted.misfired);
    let (first_ms, last_ms): (i64, i64) = {
        let row = db
            .client()
            .await
            .query_one(
                "SELECT first_occurrence_ms, last_occurrence_ms FROM misfires",
                &[],
            )
            .await
            .expect("one record");
        (row.get(0), row.get(1))
    };
    assert_eq!(first_ms, cursor);
    assert_eq!(admitted.run.scheduled_for_ms, last_ms + SECOND);
    catch_up(&coordinator, 20).await;
    assert_invariants(&db).await;
}

#[tokio::test]
async fn a_lost_occurrence_is_a_gap_that_inspect_invariants_names() {
    let db = TestDb::new().await;
    trigger_behind(&db, "skip", "60s", 4).await;
    let coordinator = coordinator(db.store("behind").await);
    catch_up(&coordinator, 20).await;
    let clean = qlsched(Some(&db), &["inspect", "invariants"], None);
    assert_eq!(code(&clean), 0, "{}", stdout(&clean));
    assert!(
        stdout(&clean).contains("accounted for"),
        "{}",
        stdout(&clean)
    );

    // Lose the second run, as a bug that skipped an occurrence would.
    let lost: i64 = db
        .client()
        .await
        .query_one(
            "WITH lost AS (SELECT run_id, scheduled_for_ms FROM runs
                           ORDER BY scheduled_for_ms OFFSET 1 LIMIT 1),
                  e AS (DELETE FROM run_events WHERE run_id IN (SELECT run_id FROM lost)),
                  a AS (DELETE FROM attempts WHERE run_id IN (SELECT run_id FROM lost))
             DELETE FROM runs WHERE run_id IN (SELECT run_id FROM lost)
             RETURNING scheduled_for_ms",
            &[],
        )
        .await
        .expect("lose a run")
        .get(0);
    let table = qlsched(Some(&db), &["inspect", "invariants"], None);
    assert_eq!(code(&table), 1);
    let text = stdout(&table);
    assert!(
        text.contains("1 occurrences with neither a run nor a misfire record"),
        "{text}"
    );
    assert!(text.contains("p/t"), "{text}");
    assert!(text.contains(&qlsched::core::time::utc(lost)), "{text}");

    let json = qlsched(Some(&db), &["-o", "json", "inspect", "invariants"], None);
    assert_eq!(code(&json), 1);
    let report: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("json");
    assert_eq!(report["ok"], false);
    assert_eq!(report["accounting"]["gap_count"], 1);
    assert_eq!(report["accounting"]["gaps"][0]["occurrence_ms"], lost);
    assert_eq!(report["accounting"]["gaps"][0]["trigger_id"], "t");
}

#[tokio::test]
async fn inspect_misfires_and_inspect_trigger_show_the_records() {
    let db = TestDb::new().await;
    trigger_behind(&db, "skip", "1s", 20).await;
    let coordinator = coordinator(db.store("behind").await);
    coordinator.run_round().await.expect("round");

    let json = qlsched(
        Some(&db),
        &[
            "-o",
            "json",
            "inspect",
            "misfires",
            "--trigger",
            "p/t",
            "--since",
            "1h",
        ],
        None,
    );
    assert_eq!(code(&json), 0);
    let records: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("json");
    assert_eq!(records.as_array().map(Vec::len), Some(1), "{records}");
    assert_eq!(records[0]["policy"], "skip");
    assert_eq!(records[0]["reason"], "beyond_grace");
    assert_eq!(records[0]["owner"], "behind");
    assert!(records[0]["occurrences"].as_i64() >= Some(18), "{records}");

    let table = stdout(&qlsched(Some(&db), &["inspect", "misfires"], None));
    assert!(
        table.contains("beyond_grace") && table.contains("p/t"),
        "{table}"
    );
    let other = stdout(&qlsched(
        Some(&db),
        &["-o", "json", "inspect", "misfires", "--trigger", "p/other"],
        None,
    ));
    assert_eq!(other.trim(), "[]");

    let detail = qlsched(
        Some(&db),
        &["-o", "json", "inspect", "trigger", "p/t"],
        None,
    );
    let detail: serde_json::Value = serde_json::from_str(&stdout(&detail)).expect("json");
    assert_eq!(
        detail["recent_misfires"].as_array().map(Vec::len),
        Some(1),
        "{detail}"
    );
}
