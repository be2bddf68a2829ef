//! Run retention (docs/DESIGN.md §3.3, §3.4): a dispatcher holding only `qlsched_dispatcher`
//! finishes runs, and retention deletes exactly those, with their attempts and events, never a
//! run still queued, dispatching or running; one replica at a time deletes; the horizon it
//! leaves refuses a backfill or a repeated `fire --request-id` before it and stops
//! `inspect invariants`.

use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::util::{
    LoginRole, TestDb, code, eventually_count, every_second, manifest, qlsched, spawn_run, stderr,
    stdout,
};
use qlsched::store::retention::{RetentionBatch, RunRetention, delete_finished_runs};

fn json_of(output: &std::process::Output) -> Value {
    serde_json::from_str(&stdout(output))
        .unwrap_or_else(|e| panic!("json: {e}: {}{}", stdout(output), stderr(output)))
}

/// Every finished status deleted as soon as it finished.
const AT_ONCE: RunRetention = RunRetention {
    succeeded_ms: Some(0),
    failed_ms: Some(0),
    cancelled_ms: Some(0),
};

/// Retention flags for a replica that keeps everything.
const KEEP_ALL: [&str; 6] = [
    "--retain-succeeded",
    "off",
    "--retain-failed",
    "off",
    "--retain-cancelled",
    "off",
];

/// Admits at least `runs` runs of every-second triggers with a replica that keeps everything,
/// then stops it.
async fn admitted_runs(db: &TestDb, ids: &[&str], runs: i64) {
    db.publish(&every_second(ids)).await;
    let replica = spawn_run(&db.url(), &KEEP_ALL);
    eventually_count(
        db,
        Duration::from_secs(20),
        "SELECT count(*) FROM runs",
        runs,
    )
    .await;
    replica.stop();
}

/// One retention batch as replica `owner`, in a transaction of its own, committed.
async fn retention_batch(db: &TestDb, owner: &str, lease_ms: i64) -> Option<RetentionBatch> {
    let mut client = db.client().await;
    let transaction = client.transaction().await.expect("begin");
    let batch = delete_finished_runs(&transaction, owner, lease_ms, &AT_ONCE, 1_000)
        .await
        .expect("retention batch");
    transaction.commit().await.expect("commit");
    batch
}

async fn run_ids(db: &TestDb, condition: &str) -> Vec<Uuid> {
    db.client()
        .await
        .query(
            &format!("SELECT run_id FROM runs WHERE {condition} ORDER BY run_id"),
            &[],
        )
        .await
        .expect("run ids")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// The test dispatcher: a login holding only `qlsched_dispatcher` moves runs on as the contract
/// says (status only), one run into each status; it can change nothing else of a run, never
/// revive a finished one, and delete nothing.
async fn dispatch_one_of_each(db: &TestDb, dispatcher: &tokio_postgres::Client) -> Vec<Uuid> {
    let queued = run_ids(db, "status = 'queued'").await;
    assert!(queued.len() >= 6, "{queued:?}");
    let statuses = ["dispatching", "running", "succeeded", "failed", "cancelled"];
    for (run, status) in queued.iter().zip(statuses) {
        if status != "dispatching" {
            // Through dispatching, as a dispatcher would; the finish time is the database's.
            dispatcher
                .execute(
                    "UPDATE runs SET status = 'dispatching' WHERE run_id = $1",
                    &[run],
                )
                .await
                .expect("dispatching");
        }
        dispatcher
            .execute(
                "UPDATE runs SET status = $2 WHERE run_id = $1",
                &[run, &status],
            )
            .await
            .unwrap_or_else(|e| panic!("{status}: {e}"));
    }
    let finished = queued[2..5].to_vec();
    let refused = |what: &str, error: Option<tokio_postgres::Error>| {
        let error = error.unwrap_or_else(|| panic!("{what} was allowed"));
        error
            .code()
            .map(|c| c.code().to_owned())
            .unwrap_or_default()
    };
    let key = dispatcher
        .execute(
            "UPDATE runs SET idempotency_key = 'forged' WHERE run_id = $1",
            &[&queued[0]],
        )
        .await
        .err();
    assert_eq!(refused("a key changed", key), "42501");
    let revived = dispatcher
        .execute(
            "UPDATE runs SET status = 'running' WHERE run_id = $1",
            &[&finished[0]],
        )
        .await
        .err();
    assert_eq!(refused("a finished run revived", revived), "23001");
    let deleted = dispatcher
        .execute("DELETE FROM runs WHERE run_id = $1", &[&finished[0]])
        .await
        .err();
    assert_eq!(refused("a delete", deleted), "42501");
    finished
}

/// The test dispatcher finishes three runs (succeeded, failed, cancelled) and leaves one
/// queued, one dispatching and one running; a replica with a retention of zero deletes exactly
/// the three, with their attempts and events, and moves the horizon past them. Every other run
/// keeps its attempt and events, and the role the dispatcher holds is exactly the one
/// `migrate verify` expects.
#[tokio::test]
async fn retention_deletes_exactly_the_runs_a_dispatcher_finished() {
    let db = TestDb::new().await;
    admitted_runs(&db, &["a", "b", "c"], 8).await;
    let dispatcher = LoginRole::create(&db, "qlsched_dispatcher").await;
    let finished = dispatch_one_of_each(&db, &dispatcher.connect(&db).await).await;
    assert_eq!(
        db.count("SELECT count(*) FROM runs WHERE finished_at_ms IS NOT NULL")
            .await,
        3,
        "the database stamps the finish time"
    );
    let unfinished = run_ids(&db, "status IN ('queued', 'dispatching', 'running')").await;
    let latest: i64 = db
        .count(&format!(
            "SELECT max(scheduled_for_ms) FROM runs WHERE run_id IN ('{}')",
            finished
                .iter()
                .map(Uuid::to_string)
                .collect::<Vec<_>>()
                .join("','")
        ))
        .await;

    let replica = spawn_run(
        &db.url(),
        &[
            "--owner",
            "keeper",
            "--retain-succeeded",
            "0s",
            "--retain-failed",
            "0s",
            "--retain-cancelled",
            "0s",
            "--retention-interval",
            "1s",
        ],
    );
    eventually_count(
        &db,
        Duration::from_secs(20),
        "SELECT deleted_runs FROM run_retention",
        3,
    )
    .await;
    let log = replica.stop();
    assert!(log.contains("retention deleted finished runs"), "{log}");

    let gone = finished
        .iter()
        .map(|run| format!("'{run}'"))
        .collect::<Vec<_>>()
        .join(",");
    for table in ["runs", "attempts", "run_events"] {
        assert_eq!(
            db.count(&format!(
                "SELECT count(*) FROM {table} WHERE run_id IN ({gone})"
            ))
            .await,
            0,
            "{table} of the finished runs"
        );
    }
    for run in &unfinished {
        assert_eq!(
            db.count(&format!(
                "SELECT (SELECT count(*) FROM runs WHERE run_id = '{run}')
                      + (SELECT count(*) FROM attempts WHERE run_id = '{run}')
                      + (SELECT count(*) FROM run_events WHERE run_id = '{run}')"
            ))
            .await,
            4,
            "run {run} survives with its attempt and both events"
        );
    }
    assert_eq!(
        db.count("SELECT deleted_runs FROM run_retention").await,
        3,
        "exactly the three finished runs"
    );
    assert_eq!(
        db.count("SELECT horizon_ms FROM run_retention").await,
        latest + 1
    );
    assert_eq!(
        db.count("SELECT count(*) FROM runs WHERE status IN ('succeeded', 'failed', 'cancelled')")
            .await,
        0
    );
    crate::util::assert_invariants(&db).await;
    let verify = qlsched(Some(&db), &["migrate", "verify", "-o", "json"], None);
    assert_eq!(code(&verify), 0, "{}{}", stdout(&verify), stderr(&verify));
}

/// A run in each unfinished status is never taken, however old: retention with a retention of
/// zero, batch after batch, deletes nothing and leaves the horizon unset.
#[tokio::test]
async fn unfinished_runs_survive_retention() {
    let db = TestDb::new().await;
    admitted_runs(&db, &["a", "b"], 6).await;
    let dispatcher = LoginRole::create(&db, "qlsched_dispatcher").await;
    let client = dispatcher.connect(&db).await;
    let ids = run_ids(&db, "true").await;
    for (run, status) in ids.iter().zip(["dispatching", "running"]) {
        client
            .execute(
                "UPDATE runs SET status = $2 WHERE run_id = $1",
                &[run, &status],
            )
            .await
            .expect("move on");
    }
    let before = crate::util::fingerprint(&db).await;
    for _ in 0..3 {
        let batch = retention_batch(&db, "r1", 60_000).await;
        assert_eq!(batch, Some(RetentionBatch::default()));
    }
    assert_eq!(crate::util::fingerprint(&db).await, before);
    for status in ["queued", "dispatching", "running"] {
        assert!(
            db.count(&format!(
                "SELECT count(*) FROM runs WHERE status = '{status}'"
            ))
            .await
                >= 1,
            "{status}"
        );
    }
    assert_eq!(
        db.count("SELECT count(*) FROM run_retention WHERE horizon_ms IS NULL")
            .await,
        1
    );
}

/// While one replica's batch is in flight, another's skips at once (the lease's row is locked,
/// not waited for); once it committed, the other skips again because the lease is held, until
/// the lease expires. Then, with real processes, two replicas with a retention of zero side by
/// side: only one of them ever deletes.
#[tokio::test]
async fn two_replicas_never_delete_at_once() {
    let db = TestDb::new().await;
    admitted_runs(&db, &["a", "b", "c"], 9).await;
    let finish = "UPDATE runs SET status = 'succeeded' WHERE status = 'queued'";
    db.client()
        .await
        .execute(finish, &[])
        .await
        .expect("finish");

    let mut first = db.client().await;
    let in_flight = first.transaction().await.expect("begin");
    let deleted = delete_finished_runs(&in_flight, "r1", 1_000, &AT_ONCE, 2)
        .await
        .expect("batch")
        .expect("r1 takes the lease");
    assert_eq!(deleted.runs, 2);
    let started = std::time::Instant::now();
    assert_eq!(
        retention_batch(&db, "r2", 1_000).await,
        None,
        "r2 skips while r1's batch is in flight"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "skipped, not waited"
    );
    in_flight.commit().await.expect("commit");
    assert_eq!(
        retention_batch(&db, "r2", 1_000).await,
        None,
        "r1 holds the lease"
    );
    assert!(
        retention_batch(&db, "r1", 1_000).await.is_some(),
        "r1 keeps it"
    );
    crate::util::sleep_ms(1_100).await;
    let taken = retention_batch(&db, "r2", 1_000)
        .await
        .expect("r2 takes the expired lease");
    assert_eq!(
        db.count("SELECT count(*) FROM runs").await,
        0,
        "r2 deleted what was left: {taken:?}"
    );

    // Two processes, each passing every second with a retention of zero, while runs finish.
    db.client()
        .await
        .execute(
            "UPDATE run_retention SET leader = NULL, lease_expires_at_ms = NULL",
            &[],
        )
        .await
        .expect("lease free");
    let args = |owner: &'static str| {
        [
            "--owner",
            owner,
            "--retain-succeeded",
            "0s",
            "--retention-interval",
            "1s",
        ]
    };
    let one = spawn_run(&db.url(), &args("one"));
    let two = spawn_run(&db.url(), &args("two"));
    let client = db.client().await;
    let mut leaders = std::collections::BTreeSet::new();
    for _ in 0..25 {
        client.execute(finish, &[]).await.expect("finish");
        crate::util::sleep_ms(200).await;
        let leader: Option<String> = client
            .query_one("SELECT leader FROM run_retention", &[])
            .await
            .expect("leader")
            .get(0);
        leaders.extend(leader);
    }
    let logs = [one.stop(), two.stop()];
    let deleting: Vec<usize> = logs
        .iter()
        .enumerate()
        .filter(|(_, log)| log.contains("retention deleted finished runs"))
        .map(|(index, _)| index)
        .collect();
    assert_eq!(leaders.len(), 1, "one leader throughout: {leaders:?}");
    assert_eq!(deleting.len(), 1, "only the leader deleted: {logs:?}");
    assert!(
        db.count("SELECT deleted_runs FROM run_retention").await > 9,
        "the leader kept deleting"
    );
    crate::util::assert_invariants(&db).await;
}

/// After retention deleted a manual run and cron runs, `fire` with the manual run's request id
/// and a backfill reaching before the horizon are refused (exit 5, saying why) and write
/// nothing; a backfill starting at the horizon is not refused.
#[tokio::test]
async fn backfill_and_fire_before_the_horizon_are_refused() {
    let db = TestDb::new().await;
    db.publish(&manifest(
        json!([{ "id": "x", "task": "t", "cron": "* * * * * *" }]),
    ))
    .await;
    let fire = || {
        qlsched(
            Some(&db),
            &["fire", "p/x", "--request-id", "r1", "--yes", "-o", "json"],
            None,
        )
    };
    let fired = fire();
    assert_eq!(code(&fired), 0, "{}", stderr(&fired));
    db.client()
        .await
        .execute("UPDATE runs SET status = 'succeeded'", &[])
        .await
        .expect("finish");
    let batch = retention_batch(&db, "r1", 60_000).await.expect("lease");
    assert_eq!((batch.runs, batch.retired_keys), (1, 1));
    let horizon = db.count("SELECT horizon_ms FROM run_retention").await;

    let before = crate::util::fingerprint(&db).await;
    let audit = db.count("SELECT count(*) FROM schedule_audit").await;
    let again = fire();
    crate::util::assert_refused(&again, 5, "retention", "fire with a retired request id");
    assert!(stderr(&again).contains("r1"), "{}", stderr(&again));
    crate::util::sleep_ms(2_100).await;
    let now = db.count("SELECT now_ms()").await;
    let window = |from: i64| {
        let (from, to) = (from.to_string(), (now - 1).to_string());
        qlsched(
            Some(&db),
            &[
                "backfill",
                "p/x",
                "--from",
                &from,
                "--to",
                &to,
                "--before-creation",
                "--yes",
                "-o",
                "json",
            ],
            None,
        )
    };
    let early = window(horizon - 3_000);
    crate::util::assert_refused(
        &early,
        5,
        "before the retention horizon",
        "a backfill over the horizon",
    );
    assert_eq!(
        crate::util::fingerprint(&db).await,
        before,
        "nothing written"
    );
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
    assert_eq!(
        db.count("SELECT count(*) FROM schedule_audit").await,
        audit,
        "nothing audited"
    );

    let from_horizon = window(horizon);
    assert_eq!(code(&from_horizon), 0, "{}", stderr(&from_horizon));
    assert!(
        json_of(&from_horizon)["admitted"].as_u64() >= Some(1),
        "{}",
        stdout(&from_horizon)
    );
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM runs WHERE scheduled_for_ms < {horizon}"
        ))
        .await,
        0
    );
}

/// Once retention deleted runs, `inspect invariants --since` starts at the horizon and says
/// so: the deleted occurrences are not reported as unaccounted for.
#[tokio::test]
async fn inspect_invariants_stops_at_the_horizon() {
    let db = TestDb::new().await;
    admitted_runs(&db, &["a", "b"], 6).await;
    db.client()
        .await
        .execute("UPDATE runs SET status = 'succeeded'", &[])
        .await
        .expect("finish");
    let deleted = retention_batch(&db, "r1", 60_000)
        .await
        .expect("lease")
        .runs;
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
    let horizon = db.count("SELECT horizon_ms FROM run_retention").await;

    let output = qlsched(
        Some(&db),
        &["inspect", "invariants", "--since", "1h", "-o", "json"],
        None,
    );
    assert_eq!(code(&output), 0, "{}{}", stdout(&output), stderr(&output));
    let report = json_of(&output);
    assert_eq!(report["accounting"]["since_ms"], horizon, "{report}");
    assert_eq!(report["accounting"]["horizon_ms"], horizon);
    assert_eq!(report["accounting"]["stopped_at_horizon"], true);
    assert_eq!(report["accounting"]["gap_count"], 0);
    let text = stdout(&qlsched(
        Some(&db),
        &["inspect", "invariants", "--since", "1h"],
        None,
    ));
    assert!(text.contains("retention horizon"), "{text}");

    let summary = json_of(&qlsched(Some(&db), &["inspect", "-o", "json"], None));
    assert_eq!(summary["retention"]["horizon_ms"], horizon, "{summary}");
    assert_eq!(summary["retention"]["deleted_runs"], deleted);
    assert_eq!(summary["retention"]["leader"], "r1");
    let text = stdout(&qlsched(Some(&db), &["inspect"], None));
    assert!(
        text.contains(&format!("(retention horizon); {deleted} deleted in all"))
            && text.contains("history: "),
        "{text}"
    );
}

/// The retention flags are checked before anything connects: a bad flag is a usage error (2)
/// naming the flag, a bad variable a configuration error (78) naming the variable; `off` and a
/// duration are taken.
#[test]
fn a_bad_retention_is_refused_before_anything_connects() {
    let run = |args: &[&str], env: &[(&str, &str)]| {
        std::process::Command::new(crate::util::bin())
            .args(["-D", "postgres://nobody@127.0.0.1:1/none", "run"])
            .args(args)
            .envs(env.iter().copied())
            .env("NO_COLOR", "1")
            .output()
            .expect("run qlsched")
    };
    let flag = run(&["--retain-succeeded", "5x"], &[]);
    assert_eq!(code(&flag), 2, "{}", stderr(&flag));
    assert!(
        stderr(&flag).contains("--retain-succeeded"),
        "{}",
        stderr(&flag)
    );
    let interval = run(&["--retention-interval", "0s"], &[]);
    assert_eq!(code(&interval), 2, "{}", stderr(&interval));
    assert!(
        stderr(&interval).contains("1s..=1h"),
        "{}",
        stderr(&interval)
    );
    let variable = run(&[], &[("QLSCHED_RETAIN_FAILED", "a week")]);
    assert_eq!(code(&variable), 78, "{}", stderr(&variable));
    assert!(
        stderr(&variable).contains("QLSCHED_RETAIN_FAILED"),
        "{}",
        stderr(&variable)
    );
    // Valid retention, so the run goes on to connect, and fails there (69), not on the flags.
    let valid = run(
        &["--retain-succeeded", "off", "--retain-failed", "30d"],
        &[("QLSCHED_RETAIN_CANCELLED", "1h")],
    );
    assert_eq!(code(&valid), 69, "{}", stderr(&valid));
}

/// Retention's batch finds its runs by the `runs_finished` index, per status, whatever the
/// parameters (the generic plan a replica's prepared statement gets), and deletes each run, its
/// attempts and events by key, never by a pass over a table: 60,000 runs, most of them finished.
#[tokio::test]
async fn a_retention_batch_walks_the_finished_runs_index() {
    let db = TestDb::new().await;
    let client = db.client().await;
    client
        .batch_execute(
            "INSERT INTO runs (run_id, project_id, trigger_id, trigger_revision, task_id,
                               task_revision, execution_revision_id, idempotency_key, status,
                               scheduled_for_ms, created_at_ms, queued_at_ms, finished_at_ms)
             SELECT gen_random_uuid(), 'p', 't' || (g % 300), 1, 't', 1, gen_random_uuid(),
                    'k' || g, CASE WHEN g % 10 = 0 THEN 'queued' WHEN g % 7 = 0 THEN 'failed'
                                   ELSE 'succeeded' END,
                    g * 3, g * 3, g * 3, CASE WHEN g % 10 = 0 THEN NULL ELSE g * 3 + 1000 END
             FROM generate_series(1, 60000) g;
             INSERT INTO attempts (attempt_id, run_id, attempt_no, executor, state, created_at_ms)
             SELECT gen_random_uuid(), run_id, 1, 'remote_worker', 'claimed', 0 FROM runs;
             INSERT INTO run_events (run_id, seq, type, at_ms)
             SELECT run_id, s, 'run.created', 0 FROM runs, generate_series(1, 2) s;
             ANALYZE runs, attempts, run_events;",
        )
        .await
        .expect("history");
    let statement = qlsched::store::statements::all()
        .into_iter()
        .find(|s| s.name == "DELETE_FINISHED")
        .expect("retention's statement");
    client
        .batch_execute(&format!(
            "SET plan_cache_mode = force_generic_plan;
             PREPARE batch(int8, int8, int8, int8) AS {}",
            statement.text
        ))
        .await
        .expect("prepare");
    let plan: Vec<String> = client
        .query(
            "EXPLAIN EXECUTE batch(86400000, 604800000, 86400000, 1000)",
            &[],
        )
        .await
        .expect("explain")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let text = plan.join("\n");
    for table in ["runs", "attempts", "run_events"] {
        assert!(
            !text.contains(&format!("Seq Scan on {table}")),
            "a pass over {table}:\n{text}"
        );
    }
    assert_eq!(
        plan.iter()
            .filter(|line| line.contains("Index Scan using runs_finished on runs"))
            .count(),
        3,
        "one walk per status:\n{text}"
    );
}

/// The contract's triggers and the registry's rule resolve their names through the schema, not
/// through the caller's search_path: a dispatcher whose session path does not name the schema
/// finishes a run through its qualified name (the finish time is still the database's), updates
/// an attempt, and reads the registry's rule.
#[tokio::test]
async fn a_dispatcher_on_its_own_search_path_finishes_runs() {
    let db = TestDb::new().await;
    admitted_runs(&db, &["a", "b"], 2).await;
    let dispatcher = LoginRole::create(&db, "qlsched_dispatcher").await;
    let client = dispatcher.connect(&db).await;
    client
        .batch_execute("SET search_path = public")
        .await
        .expect("search_path");
    let schema = crate::util::schema().quoted();
    let run = run_ids(&db, "status = 'queued'").await[0];
    for status in ["dispatching", "succeeded"] {
        client
            .execute(
                &format!("UPDATE {schema}.runs SET status = $2 WHERE run_id = $1"),
                &[&run, &status],
            )
            .await
            .unwrap_or_else(|e| panic!("{status}: {e}"));
    }
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM runs WHERE run_id = '{run}' AND finished_at_ms IS NOT NULL"
        ))
        .await,
        1
    );
    let attempts = client
        .execute(
            &format!("UPDATE {schema}.attempts SET state = 'succeeded' WHERE run_id = $1"),
            &[&run],
        )
        .await
        .expect("attempt");
    assert!(attempts >= 1, "{attempts}");
    let forgotten: bool = client
        .query_one(
            &format!("SELECT {schema}.replica_forgotten('running', 0, NULL)"),
            &[],
        )
        .await
        .expect("replica_forgotten")
        .get(0);
    assert!(forgotten);
}
