//! Startup recovery (docs/DESIGN.md §4.8) leaves pristine queued attempts alone and reports every
//! kind of drift as a recovery candidate.

use serde_json::json;

use qlsched::coordinator::Coordinator;
use qlsched::core::CoordinatorConfig;
use qlsched::store::recovery::{recovery_report, startup_recovery_report};

use crate::util::{TestDb, manifest, sleep_ms};

/// Four admitted runs, one per trigger t0..t3, as a replica leaves them.
async fn four_queued_runs(db: &TestDb) {
    let triggers: Vec<_> = (0..4)
        .map(|i| json!({ "id": format!("t{i}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    let coordinator = Coordinator::new(
        db.store("r").await,
        CoordinatorConfig {
            owner: "r".into(),
            ..CoordinatorConfig::default()
        },
    );
    coordinator.run_round().await.expect("initialize");
    crate::util::until_due(db, 4).await;
    assert_eq!(coordinator.run_round().await.expect("fire").fired, 4);
}

#[tokio::test]
async fn pristine_queued_attempts_are_left_alone() {
    let db = TestDb::new().await;
    four_queued_runs(&db).await;
    let report = recovery_report(&db.client().await, 100)
        .await
        .expect("report");
    assert_eq!((report.pristine, report.drifted), (4, 0));
    assert!(report.candidates.is_empty());
}

#[tokio::test]
async fn every_kind_of_drift_is_a_recovery_candidate() {
    let db = TestDb::new().await;
    four_queued_runs(&db).await;
    db.client()
        .await
        .batch_execute(
            "UPDATE attempts SET worker_id = 'w-17' WHERE run_id = (SELECT run_id FROM runs WHERE trigger_id = 't0');
             INSERT INTO attempts (attempt_id, run_id, attempt_no, executor, state, created_at_ms)
                 SELECT gen_random_uuid(), run_id, 2, 'remote_worker', 'dispatching', now_ms()
                 FROM runs WHERE trigger_id = 't1';
             UPDATE runs SET status = 'cancelled' WHERE trigger_id = 't2';",
        )
        .await
        .expect("drift");
    let report = recovery_report(&db.client().await, 100)
        .await
        .expect("report");
    assert_eq!((report.pristine, report.drifted), (1, 3));
    let reasons = |trigger: &str| {
        report
            .candidates
            .iter()
            .find(|c| c.trigger_id == trigger)
            .map(|c| c.drift.clone())
            .unwrap_or_default()
    };
    assert_eq!(reasons("t0"), ["worker_id is set"]);
    assert_eq!(
        reasons("t1"),
        [
            "newest attempt is dispatching",
            "a newer attempt supersedes a claimed attempt"
        ]
    );
    assert_eq!(reasons("t2"), ["run is cancelled, no longer queued"]);
}

/// Candidates are listed oldest run first, whatever their run ids: ids lead with a shard of the
/// admitting replica (`core::run_id`), not with time, so ordering by id would interleave
/// replicas and cut `--limit` at an arbitrary place.
#[tokio::test]
async fn candidates_are_listed_oldest_first() {
    let db = TestDb::new().await;
    four_queued_runs(&db).await;
    db.client()
        .await
        .batch_execute(
            // A run's creation time is never a dispatcher's to change (migration 0012's
            // trigger refuses it); the drift is made by hand past the trigger.
            "UPDATE attempts SET worker_id = 'w-1';
             ALTER TABLE runs DISABLE TRIGGER runs_status_contract;
             UPDATE runs SET created_at_ms = created_at_ms
                 - 1000 * (row_number) FROM (
                     SELECT run_id AS id, row_number() OVER (ORDER BY run_id) FROM runs) o
                 WHERE run_id = o.id;
             ALTER TABLE runs ENABLE TRIGGER runs_status_contract;",
        )
        .await
        .expect("drift, with the newest run id the oldest run");
    let client = db.client().await;
    let report = recovery_report(&client, 3).await.expect("report");
    let expected: Vec<uuid::Uuid> = client
        .query("SELECT run_id FROM runs ORDER BY run_id DESC LIMIT 3", &[])
        .await
        .expect("runs")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let listed: Vec<_> = report.candidates.iter().map(|c| c.run_id).collect();
    assert_eq!(listed, expected);
}

#[tokio::test]
async fn run_reports_drift_at_startup_and_still_starts() {
    let db = TestDb::new().await;
    four_queued_runs(&db).await;
    db.client().await.batch_execute("UPDATE attempts SET lease_id = 'l-1' WHERE attempt_no = 1 AND run_id = (SELECT run_id FROM runs ORDER BY run_id LIMIT 1)").await.expect("drift");
    let child = crate::util::spawn_run(&db.url(), &["--owner", "rec", "--drain-timeout", "1s"]);
    // Started means admitting: wait for the replica's first run rather than for a fixed time.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db
        .count("SELECT count(*) FROM run_events WHERE payload->>'claim_owner' = 'rec'")
        .await
        == 0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the replica never admitted"
        );
        sleep_ms(50).await;
    }
    let output = crate::util::terminate(child);
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{log}");
    assert!(
        log.contains("drifted=1") && log.contains("lease_id is set"),
        "{log}"
    );
    assert!(log.contains("replica stopped"), "{log}");
}

/// A replica whose login's own `statement_timeout` cuts a startup statement (here startup
/// recovery's read of `runs`, queued behind a table lock longer than the bound) exits 78 naming
/// the setting to change, once, instead of 75 and a supervisor's restart into the same cut.
#[tokio::test(flavor = "multi_thread")]
async fn a_startup_statement_cut_by_the_logins_statement_timeout_exits_78_naming_it() {
    let db = crate::util::TestDb::new().await;
    let login = crate::util::LoginRole::create(&db, "qlsched_runtime").await;
    let mut holder = db.client().await;
    holder
        .batch_execute(&format!(
            "ALTER ROLE {} SET statement_timeout = '300ms'",
            login.name
        ))
        .await
        .expect("the login's bound");
    let transaction = holder.transaction().await.expect("begin");
    transaction
        .batch_execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("hold runs");
    let started = std::time::Instant::now();
    let mut replica = crate::util::spawn_run(&login.url(&db), &["--owner", "bounded"]);
    let status = loop {
        if let Some(status) = replica.try_wait().expect("the replica's status") {
            break status;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the replica kept starting"
        );
        crate::util::sleep_ms(100).await;
    };
    drop(transaction);
    let log = crate::util::Reap::reap(replica);
    let message = String::from_utf8_lossy(&log.stderr);
    assert_eq!(status.code(), Some(78), "{message}");
    assert!(
        message.contains("cut by the login's own statement_timeout")
            && message.contains("ALTER ROLE"),
        "{message}"
    );
}

/// A replica's start classifies only the newest runs (by the `runs_created` index, whatever the
/// table holds): drift in older runs is left to `inspect recovery`, which classifies them all.
#[tokio::test]
async fn startup_recovery_classifies_only_the_newest_runs() {
    let db = TestDb::new().await;
    four_queued_runs(&db).await;
    db.client()
        .await
        .batch_execute(
            "UPDATE attempts SET worker_id = 'w-17' WHERE run_id = (SELECT run_id FROM runs WHERE trigger_id = 't0');
             UPDATE runs SET status = 'cancelled' WHERE trigger_id = 't2';
             ALTER TABLE runs DISABLE TRIGGER runs_status_contract;
             UPDATE runs SET created_at_ms = created_at_ms - 86400000 WHERE trigger_id IN ('t0', 't1');
             ALTER TABLE runs ENABLE TRIGGER runs_status_contract;",
        )
        .await
        .expect("drift, t0 a day old");
    let client = db.client().await;
    let newest = startup_recovery_report(&client, 100, 2)
        .await
        .expect("the newest two");
    assert_eq!((newest.pristine, newest.drifted), (1, 1), "{newest:?}");
    assert_eq!(newest.candidates[0].trigger_id, "t2");
    let all = recovery_report(&client, 100).await.expect("every run");
    assert_eq!((all.pristine, all.drifted), (2, 2), "{all:?}");
}
