//! Replicas as real processes, each with its own pool, admit every occurrence exactly once: with
//! one SIGKILLed while it holds claims, with two independent pools racing to initialize one row,
//! with one SIGSTOPped for longer than its lease and shorter than the grace, and with backends
//! terminated mid-round. Every test ends on the invariants: one run per occurrence, one attempt
//! and two events per run, no claim half-written, and every occurrence accounted for.

use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use qlsched::coordinator::Coordinator;
use qlsched::core::CoordinatorConfig;

use crate::util::{
    ReplicaProcess, TestDb, assert_invariants, eventually, eventually_count, manifest, sleep_ms,
    spawn_run, stop_cleanly,
};

const LEASE_MS: i64 = 3_000;

fn replica(db: &TestDb, owner: &str) -> ReplicaProcess {
    spawn_run(
        &db.url(),
        &[
            "--owner",
            owner,
            "--lease",
            "3s",
            "--cadence",
            "250ms",
            "--drain-timeout",
            "5s",
        ],
    )
}

#[tokio::test]
async fn three_replica_processes_one_killed_holding_claims_admit_every_occurrence_once() {
    let db = TestDb::new().await;
    let triggers: Vec<_> = (0..50)
        .map(|i| json!({ "id": format!("t{i:02}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    // The victim's admissions are slow, so it is sure to be caught holding claims when killed.
    let client = db.client().await;
    client
        .batch_execute(
            "CREATE FUNCTION slow_victim() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF current_setting('application_name') = 'qlsched run victim' THEN PERFORM pg_sleep(1.5); END IF;
                 RETURN NULL;
             END $$;
             CREATE TRIGGER slow_victim BEFORE INSERT ON runs FOR EACH STATEMENT EXECUTE FUNCTION slow_victim();",
        )
        .await
        .expect("slow victim");

    let victim = replica(&db, "victim");
    let survivors = [replica(&db, "replica-b"), replica(&db, "replica-c")];
    // Every trigger has fired once, so the victim's claims are of due rows, not initializations.
    eventually_count(
        &db,
        Duration::from_secs(20),
        "SELECT count(DISTINCT trigger_id) FROM runs",
        50,
    )
    .await;
    let held_query = "SELECT count(*) FROM trigger_schedules WHERE claim_owner = 'victim' AND claim_expires_at_ms > now_ms()";
    eventually_count(&db, Duration::from_secs(20), held_query, 1).await;
    victim.kill();
    let killed_at: i64 = client
        .query_one("SELECT now_ms()", &[])
        .await
        .expect("now")
        .get(0);
    let held_at_kill = db
        .count("SELECT count(*) FROM trigger_schedules WHERE claim_owner = 'victim'")
        .await;
    assert!(held_at_kill > 0, "killed while holding claims");

    // The survivors take the victim's rows over once its leases expire, and every trigger fires
    // after that; then a few more seconds of every trigger firing.
    let resumed_query = format!(
        "SELECT count(*) FROM (SELECT trigger_id FROM runs GROUP BY trigger_id \
         HAVING max(scheduled_for_ms) >= {}) resumed",
        killed_at + LEASE_MS + 3_000
    );
    eventually_count(&db, Duration::from_secs(30), &resumed_query, 50).await;
    for child in survivors {
        stop_cleanly(child);
    }

    let counts = assert_invariants(&db).await;
    assert_eq!(
        counts.claims_held, 0,
        "no schedule row keeps a claim after the survivors stop"
    );
    assert!(counts.runs >= 50 * 6, "{} runs", counts.runs);
    let resumed = db
        .count(&format!(
            "SELECT count(*) FROM (SELECT trigger_id FROM runs GROUP BY trigger_id \
             HAVING max(scheduled_for_ms) >= {}) resumed",
            killed_at + LEASE_MS + 1_000
        ))
        .await;
    assert_eq!(
        resumed, 50,
        "every trigger kept firing after the killed replica's leases expired"
    );
    let by_owner = |owner: &str| {
        format!(
            "SELECT count(*) FROM run_events WHERE type = 'run.created' AND payload->>'claim_owner' = '{owner}'"
        )
    };
    assert!(
        db.count(&by_owner("replica-b")).await > 0 && db.count(&by_owner("replica-c")).await > 0
    );
}

/// A replica stopped (SIGSTOP) while it holds claims, for longer than its lease and shorter than
/// the grace: the other takes its rows over once the leases expire and catches up on every
/// occurrence in between, nothing the stopped one decided commits when it resumes, and no
/// occurrence is passed over: no misfire record, every occurrence a run.
#[tokio::test]
async fn a_replica_paused_for_less_than_the_grace_loses_no_occurrence() {
    let db = TestDb::new().await;
    let triggers: Vec<_> = (0..30)
        .map(|i| json!({ "id": format!("t{i:02}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    // Its admissions take 0.3 s longer (a tenth of the lease), so that it holds claims for a
    // while in every round and a stop lands inside one at once, on a loaded machine too.
    db.client()
        .await
        .batch_execute(
            "CREATE FUNCTION slow_paused() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF current_setting('application_name') = 'qlsched run paused' THEN PERFORM pg_sleep(0.3); END IF;
                 RETURN NULL;
             END $$;
             CREATE TRIGGER slow_paused BEFORE INSERT ON runs FOR EACH STATEMENT EXECUTE FUNCTION slow_paused();",
        )
        .await
        .expect("slow the replica to be stopped");
    let paused = replica(&db, "paused");
    let other = replica(&db, "other");
    // Stopped while it holds claims: tried until the stop lands inside a round.
    let deadline = Instant::now() + Duration::from_secs(30);
    let held = "SELECT count(*) FROM trigger_schedules WHERE claim_owner = 'paused'";
    loop {
        assert!(
            Instant::now() < deadline,
            "never stopped while holding a claim"
        );
        if db.count(held).await == 0 {
            sleep_ms(2).await;
            continue;
        }
        signal(&paused, "-STOP");
        if db.count(held).await > 0 {
            break;
        }
        signal(&paused, "-CONT");
    }
    sleep_ms(6_000).await; // twice the lease, a tenth of the default grace
    signal(&paused, "-CONT");
    sleep_ms(3_000).await;
    for child in [paused, other] {
        stop_cleanly(child);
    }

    let counts = assert_invariants(&db).await;
    assert_eq!(counts.claims_held, 0);
    assert_eq!(
        db.count("SELECT count(*) FROM misfires").await,
        0,
        "nothing within the grace is passed over"
    );
    // Every trigger has a run for every second from its first to its last: none lost.
    let holes = db
        .count(
            "SELECT count(*) FROM (SELECT trigger_id FROM runs GROUP BY trigger_id
             HAVING (max(scheduled_for_ms) - min(scheduled_for_ms)) / 1000 + 1 <> count(*)) h",
        )
        .await;
    assert_eq!(
        holes, 0,
        "an occurrence between the first and last run has no run"
    );
    // A sanity floor only (a loaded machine starts slowly): the test is about what is owed.
    assert!(counts.runs >= 30 * 3, "{} runs", counts.runs);
}

fn signal(child: &Child, which: &str) {
    let status = std::process::Command::new("kill")
        .args([which, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill {which}");
}

#[tokio::test]
async fn two_independent_pools_racing_initialize_a_row_exactly_once() {
    let db = TestDb::new().await;
    let config = |owner: &str| CoordinatorConfig {
        owner: owner.to_owned(),
        ..CoordinatorConfig::default()
    };
    let (store_a, store_b) = (db.store("pool-a").await, db.store("pool-b").await);
    let pid = |store: qlsched::store::Store| async move {
        let client = store.client().await.expect("client");
        client
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .expect("pid")
            .get::<_, i32>(0)
    };
    assert_ne!(
        pid(store_a.clone()).await,
        pid(store_b.clone()).await,
        "two backends"
    );
    let a = Arc::new(Coordinator::new(store_a, config("a")));
    let b = Arc::new(Coordinator::new(store_b, config("b")));
    for round in 0..20 {
        let id = format!("race{round:02}");
        let triggers: Vec<_> = (0..=round)
            .map(|i| json!({ "id": format!("race{i:02}"), "task": "t", "cron": "0 0 1 1 *" }))
            .collect();
        db.publish(&manifest(json!(triggers))).await;
        let (ra, rb) = tokio::join!(a.run_round(), b.run_round());
        let (ra, rb) = (ra.expect("round a"), rb.expect("round b"));
        assert_eq!(ra.initialized + rb.initialized, 1, "{id}: initialized once");
        assert_eq!(ra.fence_lost + rb.fence_lost, 0);
        let state: i64 = db
            .client()
            .await
            .query_one(
                "SELECT state_version FROM trigger_schedules WHERE trigger_id = $1",
                &[&id],
            )
            .await
            .expect("row")
            .get(0);
        assert_eq!(state, 2, "{id}: one claim and one admission wrote the row");
    }
    let counts = assert_invariants(&db).await;
    assert_eq!((counts.runs, counts.claims_held), (0, 0));
}

#[tokio::test]
async fn backends_terminated_mid_round_never_duplicate_or_lose_an_occurrence() {
    let db = TestDb::new().await;
    let triggers: Vec<_> = (0..10)
        .map(|i| json!({ "id": format!("t{i}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    // Widen the admission so terminations land inside it as often as outside.
    let client = db.client().await;
    client
        .batch_execute(
            "CREATE FUNCTION widen() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN PERFORM pg_sleep(0.2); RETURN NULL; END $$;
             CREATE TRIGGER widen BEFORE INSERT ON runs FOR EACH STATEMENT EXECUTE FUNCTION widen();",
        )
        .await
        .expect("widen");
    let store = qlsched::store::Store::open_replica(
        &db.settings,
        &crate::util::schema(),
        "doomed-replica",
        2,
    )
    .await
    .expect("pool");
    let config = CoordinatorConfig {
        owner: "doomed".into(),
        lease: Duration::from_secs(2),
        cadence: Duration::from_millis(100),
        ..CoordinatorConfig::default()
    };
    let lifecycle =
        qlsched::lifecycle::Lifecycle::start(Arc::new(Coordinator::new(store, config)), None);
    // Terminate backends caught inside a statement until five have been, whenever that happens.
    let mut terminated = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while terminated < 5 {
        assert!(
            Instant::now() < deadline,
            "only {terminated} backends were caught mid-statement"
        );
        sleep_ms(40).await;
        terminated += client
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = 'doomed-replica' AND state = 'active'",
                &[],
            )
            .await
            .expect("terminate")
            .len();
    }
    let runs_before_calm = db.count("SELECT count(*) FROM runs").await;
    // The replica keeps admitting after its backends were terminated.
    eventually_count(
        &db,
        Duration::from_secs(10),
        "SELECT count(*) FROM runs",
        runs_before_calm + 1,
    )
    .await;
    let stop = lifecycle.stop().await;
    assert!(stop.drained);
    let counts = assert_invariants(&db).await;
    assert_eq!(counts.claims_held, 0);
}

/// The registry shows which replicas are alive, as the replicas themselves write it: two
/// running ones are live with their work counted, one stopped (SIGSTOP) past its lease and
/// cadence turns stale, and one given SIGTERM is stopped; the summary counts the live ones.
#[tokio::test]
async fn the_registry_shows_live_stale_and_stopped_replicas() {
    let db = TestDb::new().await;
    let triggers: Vec<_> = (0..5)
        .map(|i| json!({ "id": format!("t{i}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    let first = replica(&db, "first");
    let second = replica(&db, "second");
    let replicas = |db: &TestDb| {
        let output = crate::util::qlsched(Some(db), &["-o", "json", "inspect", "replicas"], None);
        assert_eq!(
            crate::util::code(&output),
            0,
            "{}",
            crate::util::stderr(&output)
        );
        serde_json::from_str::<Vec<serde_json::Value>>(&crate::util::stdout(&output)).expect("json")
    };
    let liveness = |rows: &[serde_json::Value], owner: &str| {
        rows.iter()
            .find(|r| r["owner"] == owner)
            .map(|r| r["liveness"].as_str().unwrap_or_default().to_owned())
    };
    eventually(
        Duration::from_secs(20),
        "both live, both admitting",
        || async {
            let rows = replicas(&db);
            rows.len() == 2
                && rows
                    .iter()
                    .all(|r| r["liveness"] == "live" && r["admissions"].as_i64() > Some(0))
        },
    )
    .await;

    signal(&second, "-STOP");
    // Stale once no heartbeat came for longer than its lease (3 s) and cadence (250 ms).
    eventually(
        Duration::from_secs(15),
        "the stopped one turns stale",
        || async { liveness(&replicas(&db), "second").as_deref() == Some("stale") },
    )
    .await;
    assert_eq!(liveness(&replicas(&db), "first").as_deref(), Some("live"));
    signal(&second, "-CONT");

    stop_cleanly(first);
    let rows = replicas(&db);
    assert_eq!(
        liveness(&rows, "first").as_deref(),
        Some("stopped"),
        "{rows:?}"
    );
    eventually(
        Duration::from_secs(10),
        "the continued one is live again",
        || async { liveness(&replicas(&db), "second").as_deref() == Some("live") },
    )
    .await;
    let summary = crate::util::stdout(&crate::util::qlsched(Some(&db), &["inspect"], None));
    assert!(summary.contains("replicas: 1 live"), "{summary}");
    stop_cleanly(second);
    assert_invariants(&db).await;
}
