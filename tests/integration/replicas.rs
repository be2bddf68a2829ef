//! Replicas as real processes, each with its own pool, admit every occurrence exactly once: with
//! one SIGKILLed while it holds claims, with two independent pools racing to initialize one row,
//! with one SIGSTOPped for longer than its lease and shorter than the grace (its rows taken over
//! by the other, its stale decisions never committed), and with backends
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

/// A replica stopped (SIGSTOP) while it holds claims (its admission in flight lost with its
/// session), until the other has taken its rows over, which is longer than its leases had left
/// and shorter than the grace: the other claims and admits every stranded row while the stopped
/// one is still stopped, not before the row's lease expired; nothing the stopped one decided
/// commits when it resumes; and no occurrence is passed over or doubled: no misfire record,
/// every occurrence one run.
#[tokio::test]
async fn a_replica_paused_for_less_than_the_grace_loses_no_occurrence() {
    let db = TestDb::new().await;
    let triggers: Vec<_> = (0..30)
        .map(|i| json!({ "id": format!("t{i:02}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    // Its admissions take 0.3 s longer (a tenth of the lease), so that it holds claims for a
    // while in every round and a stop lands inside one at once, on a loaded machine too.
    let client = db.client().await;
    client
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

    // Stopped while it holds claims: tried until the stop strands some. Its round is a claim,
    // then an admission (one pipelined round trip the server would finish alone, releasing the
    // claims), so a stop almost always lands with the admission in flight: that admission is
    // ended with its session, as a lost connection would end it, and rolls back. The claims left
    // are then held by a process that cannot act, until their leases expire.
    let deadline = Instant::now() + Duration::from_secs(30);
    let busy = "SELECT count(*) FROM pg_stat_activity
                WHERE application_name = 'qlsched run paused' AND state <> 'idle'";
    let (stranded, stopped_at) = loop {
        assert!(
            Instant::now() < deadline,
            "never stopped while holding a claim"
        );
        if db
            .count("SELECT count(*) FROM trigger_schedules WHERE claim_owner = 'paused'")
            .await
            == 0
        {
            sleep_ms(2).await;
            continue;
        }
        signal(&paused, "-STOP");
        client
            .batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE application_name = 'qlsched run paused' AND state <> 'idle'",
            )
            .await
            .expect("end the stopped replica's statement in flight");
        eventually(Duration::from_secs(10), busy, || async {
            db.count(busy).await == 0
        })
        .await;
        let rows = client
            .query(
                "SELECT trigger_id, claim_version, claim_expires_at_ms, now_ms() AS now_ms
                 FROM trigger_schedules
                 WHERE claim_owner = 'paused' AND claim_expires_at_ms > now_ms()
                 ORDER BY trigger_id",
                &[],
            )
            .await
            .expect("stranded claims");
        if let Some(first) = rows.first() {
            let stopped_at: i64 = first.get("now_ms");
            let stranded: Vec<(String, i64, i64)> = rows
                .iter()
                .map(|row| {
                    (
                        row.get("trigger_id"),
                        row.get("claim_version"),
                        row.get("claim_expires_at_ms"),
                    )
                })
                .collect();
            break (stranded, stopped_at);
        }
        signal(&paused, "-CONT");
    };
    let ids: Vec<&str> = stranded.iter().map(|(id, _, _)| id.as_str()).collect();
    let versions: Vec<i64> = stranded.iter().map(|(_, v, _)| *v).collect();

    // The takeover: while it is still stopped, the other admits a run of every stranded row, by
    // its own claim (`run.created` records whose claim a run was admitted under).
    let taken_over = "SELECT count(DISTINCT r.trigger_id)
                      FROM runs r JOIN run_events e ON e.run_id = r.run_id AND e.seq = 1
                      WHERE r.trigger_id = ANY($1) AND r.created_at_ms > $2
                        AND e.payload->>'claim_owner' = 'other'";
    eventually(
        Duration::from_secs(20),
        "the other replica admits every row the stopped one holds",
        || async {
            let row = client
                .query_one(taken_over, &[&ids, &stopped_at])
                .await
                .expect("taken over");
            row.get::<_, i64>(0) == ids.len() as i64
        },
    )
    .await;
    // Not before the leases ran out: a stranded row's first run after the stop is the other's,
    // admitted at or after that row's claim expired, under a later claim than the stranded one.
    let first_after_stop = client
        .query(
            "SELECT DISTINCT ON (r.trigger_id) r.trigger_id, r.created_at_ms,
                    e.payload->>'claim_owner' AS owner, (e.payload->>'claim_version')::int8 AS version
             FROM runs r JOIN run_events e ON e.run_id = r.run_id AND e.seq = 1
             WHERE r.trigger_id = ANY($1) AND r.created_at_ms > $2
             ORDER BY r.trigger_id, r.created_at_ms",
            &[&ids, &stopped_at],
        )
        .await
        .expect("first runs after the stop");
    assert_eq!(first_after_stop.len(), stranded.len());
    for (row, (id, version, expires)) in first_after_stop.iter().zip(&stranded) {
        assert_eq!(row.get::<_, &str>("trigger_id"), id);
        assert_eq!(row.get::<_, &str>("owner"), "other", "{id}");
        assert!(
            row.get::<_, i64>("created_at_ms") >= *expires,
            "{id}: taken over before its lease expired"
        );
        assert!(row.get::<_, i64>("version") > *version, "{id}: a new claim");
    }
    // Resumed: it finds its claims gone, and works again (a run of its own after the resume).
    let resumed_at = db.count("SELECT now_ms()").await;
    signal(&paused, "-CONT");
    let own_after = format!(
        "SELECT count(*) FROM runs r JOIN run_events e ON e.run_id = r.run_id AND e.seq = 1
         WHERE r.created_at_ms > {resumed_at} AND e.payload->>'claim_owner' = 'paused'"
    );
    eventually_count(&db, Duration::from_secs(20), &own_after, 1).await;
    for child in [paused, other] {
        stop_cleanly(child);
    }

    let counts = assert_invariants(&db).await;
    assert_eq!(counts.claims_held, 0);
    let stale = client
        .query_one(
            "SELECT count(*) FROM unnest($1::text[], $2::int8[]) s(trigger_id, version)
             JOIN runs r ON r.trigger_id = s.trigger_id
             JOIN run_events e ON e.run_id = r.run_id AND e.seq = 1
             WHERE e.payload->>'claim_owner' = 'paused'
               AND (e.payload->>'claim_version')::int8 = s.version",
            &[&ids, &versions],
        )
        .await
        .expect("stale admissions")
        .get::<_, i64>(0);
    assert_eq!(stale, 0, "a stranded claim's decision committed");
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
/// running ones are live with their work counted and the batch they claim with, one stopped (SIGSTOP) past its lease and
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
                && rows.iter().all(|r| {
                    r["liveness"] == "live"
                        && r["admissions"].as_i64() > Some(0)
                        && r["batch"].as_i64().is_some_and(|b| (16..=256).contains(&b))
                })
        },
    )
    .await;
    // Each names its release with the commit it was built from, and the schema it was built for.
    let release = built_release();
    for row in replicas(&db) {
        assert_eq!(row["version"], release.as_str(), "{row}");
        assert_eq!(
            row["schema_version"],
            qlsched::store::migrate::latest_version(),
            "{row}"
        );
    }
    let table = crate::util::stdout(&crate::util::qlsched(
        Some(&db),
        &["inspect", "replicas"],
        None,
    ));
    assert!(table.contains("version (schema)"), "{table}");
    assert!(
        table.contains(&format!(
            "{release} ({})",
            qlsched::store::migrate::latest_version()
        )),
        "{table}"
    );

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

/// The release a replica registers: `VERSION+COMMIT`, the commit `qlsched --version` names.
fn built_release() -> String {
    let output = crate::util::qlsched(None, &["--version"], None);
    let line = crate::util::stdout(&output);
    let commit = line
        .trim()
        .strip_suffix(')')
        .and_then(|rest| rest.rsplit_once("(commit "))
        .map(|(_, commit)| commit.to_owned())
        .unwrap_or_else(|| panic!("--version names no commit: {line}"));
    assert!(!commit.is_empty() && commit != "unknown", "{line}");
    format!("{}+{commit}", env!("CARGO_PKG_VERSION"))
}

/// A replica that died without stopping leaves the registry's views at the bound it registered
/// (`run --forget-stale-after`) even with no replica left to delete it; until then it is shown
/// stale. A row of a release that set no bound stays its week. The housekeeping's delete takes
/// exactly the forgotten rows, and `expire --owner` forgets a dead owner's row with its claims
/// but never a live one's.
#[tokio::test]
async fn a_dead_replica_leaves_the_registry_at_its_bound_and_expire_owner_forgets_it() {
    use qlsched::store::replicas::{Registration, forget, list, register};
    let db = TestDb::new().await;
    db.publish(&manifest(json!([
        { "id": "calm", "task": "t", "cron": "0 0 1 1 *" }
    ])))
    .await;
    let client = db.client().await;
    for owner in ["past-bound", "within-bound", "old-release", "dead", "alive"] {
        let registration = Registration {
            owner,
            host: "node-1",
            pid: 1,
            version: "test",
            schema_version: qlsched::store::migrate::latest_version(),
            lease_ms: 5_000,
            cadence_ms: 200,
            forget_after_ms: 60_000,
        };
        register(&client, &registration).await.expect("register");
    }
    let age = |owner: &str, ms: i64| {
        format!("UPDATE replicas SET heartbeat_at_ms = now_ms() - {ms} WHERE owner = '{owner}'")
    };
    for (owner, ms) in [
        ("past-bound", 61_000),
        ("within-bound", 30_000),
        ("old-release", 2 * 86_400_000),
        ("dead", 10_000),
    ] {
        client.execute(&age(owner, ms), &[]).await.expect("age");
    }
    // The live one stays live for the whole test (which sends it no heartbeat), on a loaded
    // machine too: its 5 s lease would make it stale, and `expire --owner` would forget it.
    client
        .execute(
            "UPDATE replicas SET lease_ms = 3600000 WHERE owner = 'alive'",
            &[],
        )
        .await
        .expect("a long lease for the live one");
    // What a registration of a release before 0.2.0 leaves: no bound, no schema version.
    client
        .execute(
            "UPDATE replicas SET forget_after_ms = NULL, schema_version = NULL \
             WHERE owner = 'old-release'",
            &[],
        )
        .await
        .expect("an old release's row");
    let shown = |rows: Vec<qlsched::store::replicas::ReplicaView>| {
        rows.into_iter()
            .map(|r| (r.owner, r.liveness.to_string()))
            .collect::<Vec<_>>()
    };
    let expected = vec![
        ("dead".to_owned(), "stale".to_owned()),
        ("old-release".to_owned(), "stale".to_owned()),
        ("within-bound".to_owned(), "stale".to_owned()),
        ("alive".to_owned(), "live".to_owned()),
    ];
    assert_eq!(shown(list(&client).await.expect("list")), expected);
    let output = crate::util::qlsched(Some(&db), &["-o", "json", "inspect", "replicas"], None);
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&crate::util::stdout(&output)).expect("json");
    assert!(rows.iter().all(|r| r["owner"] != "past-bound"), "{rows:?}");
    assert_eq!(rows.len(), 4, "{rows:?}");
    // The row is still there until a housekeeping deletes it, and that delete takes it alone.
    assert_eq!(
        db.count("SELECT count(*) FROM replicas WHERE owner = 'past-bound'")
            .await,
        1
    );
    assert_eq!(forget(&client).await.expect("forget"), 1);
    assert_eq!(db.count("SELECT count(*) FROM replicas").await, 4);

    // `expire --owner` of a dead replica with a claim: the claim expired, the row forgotten.
    client
        .execute(
            "UPDATE trigger_schedules SET claim_owner = 'dead', claim_token = gen_random_uuid(), \
             claim_expires_at_ms = now_ms() + 60000, claim_version = claim_version + 1",
            &[],
        )
        .await
        .expect("a claim of the dead replica");
    let output = crate::util::qlsched(
        Some(&db),
        &["-o", "json", "expire", "--owner", "dead", "--yes"],
        None,
    );
    assert_eq!(
        crate::util::code(&output),
        0,
        "{}",
        crate::util::stderr(&output)
    );
    let report: serde_json::Value =
        serde_json::from_str(&crate::util::stdout(&output)).expect("json");
    assert_eq!(
        report["expired"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert_eq!(report["replica_forgotten"], true, "{report}");
    assert_eq!(
        db.count("SELECT count(*) FROM replicas WHERE owner = 'dead'")
            .await,
        0
    );
    // A live replica keeps its row: its next heartbeat would only register it again, counters lost.
    let output = crate::util::qlsched(Some(&db), &["expire", "--owner", "alive", "--yes"], None);
    assert_eq!(
        crate::util::code(&output),
        0,
        "{}",
        crate::util::stderr(&output)
    );
    assert!(
        !crate::util::stdout(&output).contains("left the registry"),
        "{}",
        crate::util::stdout(&output)
    );
    assert_eq!(
        db.count("SELECT count(*) FROM replicas WHERE owner = 'alive'")
            .await,
        1
    );
    // The human form says it.
    let output = crate::util::qlsched(
        Some(&db),
        &["expire", "--owner", "within-bound", "--yes"],
        None,
    );
    assert_eq!(
        crate::util::code(&output),
        0,
        "{}",
        crate::util::stderr(&output)
    );
    assert!(
        crate::util::stdout(&output).contains("its replica left the registry"),
        "{}",
        crate::util::stdout(&output)
    );
}

/// `run --forget-stale-after` below what makes a replica stale is refused before anything runs.
#[test]
fn a_forget_bound_shorter_than_the_lease_is_refused() {
    let output = crate::util::qlsched_at(
        Some("postgres://nobody@127.0.0.1:1/none"),
        &[],
        &["run", "--lease", "5m", "--forget-stale-after", "2m"],
        None,
    );
    crate::util::assert_refused(
        &output,
        2,
        "--forget-stale-after",
        "a bound under the lease",
    );
}

/// A stopping replica marks itself `draining` beside its drain and `stopped` beside its give-back,
/// on two connections, so the `draining` can commit last. It must not bring the stopped replica
/// back to life in the registry: a mark only moves forward, and only a new registration (a
/// restart under the same owner) runs it again.
#[tokio::test]
async fn a_draining_mark_that_commits_last_leaves_the_replica_stopped() {
    use qlsched::store::replicas::{Registration, list, mark, register};
    let db = TestDb::new().await;
    let client = db.client().await;
    let registration = Registration {
        owner: "late-mark",
        host: "node-1",
        pid: 1,
        version: "test",
        schema_version: qlsched::store::migrate::latest_version(),
        lease_ms: 5_000,
        cadence_ms: 200,
        forget_after_ms: 900_000,
    };
    let state = |rows: Vec<qlsched::store::replicas::ReplicaView>| {
        rows.into_iter()
            .find(|r| r.owner == "late-mark")
            .map(|r| (r.state, r.liveness))
    };
    register(&client, &registration).await.expect("register");
    mark(&client, "late-mark", "stopped")
        .await
        .expect("stopped");
    mark(&client, "late-mark", "draining")
        .await
        .expect("draining");
    let (stored, liveness) = state(list(&client).await.expect("list")).expect("listed");
    assert_eq!(stored, "stopped");
    assert_eq!(liveness, qlsched::core::Liveness::Stopped);

    register(&client, &registration)
        .await
        .expect("register again");
    let (stored, _) = state(list(&client).await.expect("list")).expect("listed");
    assert_eq!(
        stored, "running",
        "a restart under the same owner runs it again"
    );
}

/// A hung replica is seen at once, not after its lease: SIGSTOPped in the middle of an admission,
/// it is `stalled` in `inspect replicas`, in `top`'s replicas panel and in the other replica's
/// `/metrics` within two of its cadences, while its claims are still valid; once continued, the
/// round it could not finish is in the registry as a failed round with its error, naming the
/// claims it held.
#[tokio::test]
async fn a_sigstopped_replica_is_shown_stalled_within_two_cadences_and_its_failed_round_recorded() {
    let db = TestDb::new().await;
    let triggers: Vec<_> = (0..4)
        .map(|i| json!({ "id": format!("t{i}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    // The hung replica's next admission sleeps on the server for `hang.secs`: it is stopped
    // inside it, holding claims, and the server is still sleeping when it is continued, so the
    // round's lease has run out with its reply outstanding, whatever the machine's speed.
    db.client()
        .await
        .batch_execute(
            "CREATE TABLE public.hang (secs float8 NOT NULL);
             INSERT INTO public.hang VALUES (0);
             GRANT SELECT ON public.hang TO PUBLIC;
             CREATE FUNCTION public.slow_hung() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF current_setting('application_name') = 'qlsched run hung' THEN
                     PERFORM pg_sleep((SELECT secs FROM public.hang));
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE TRIGGER slow_hung BEFORE INSERT ON runs FOR EACH STATEMENT EXECUTE FUNCTION public.slow_hung();",
        )
        .await
        .expect("slow hung");
    let addr = crate::observe::free_addr();
    let watcher = spawn_run(
        &db.url(),
        &[
            "--owner",
            "watcher",
            "--cadence",
            "250ms",
            "--metrics-addr",
            &addr,
        ],
    );
    // Two cadences of 500 ms is the one-second floor; the lease leaves a long stalled window.
    let hung = spawn_run(
        &db.url(),
        &["--owner", "hung", "--lease", "8s", "--cadence", "500ms"],
    );
    crate::observe::wait_for(&addr, "/readyz", 200).await;
    let client = db.client().await;
    eventually(
        Duration::from_secs(20),
        "the hung replica admits",
        || async {
            client
                .query_one("SELECT admissions FROM replicas WHERE owner = 'hung'", &[])
                .await
                .map(|row| row.get::<_, i64>(0) > 0)
                .unwrap_or(false)
        },
    )
    .await;
    client
        .batch_execute("UPDATE public.hang SET secs = 12")
        .await
        .expect("hang");
    eventually(
        Duration::from_secs(20),
        "the hung replica sleeps inside an admission",
        || async {
            client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'qlsched run hung'
                       AND state = 'active' AND wait_event = 'PgSleep'",
                    &[],
                )
                .await
                .expect("activity")
                .get::<_, i64>(0)
                == 1
        },
    )
    .await;
    signal(&hung, "-STOP");
    let stopped = Instant::now();
    client
        .batch_execute("UPDATE public.hang SET secs = 0")
        .await
        .expect("unhang");
    let inspect = || {
        let output = crate::util::qlsched(Some(&db), &["-o", "json", "inspect", "replicas"], None);
        assert_eq!(
            crate::util::code(&output),
            0,
            "{}",
            crate::util::stderr(&output)
        );
        let rows: Vec<serde_json::Value> =
            serde_json::from_str(&crate::util::stdout(&output)).expect("json");
        rows.into_iter()
            .find(|r| r["owner"] == "hung")
            .expect("hung is registered")
    };
    eventually(Duration::from_secs(5), "inspect says stalled", || async {
        inspect()["liveness"] == "stalled"
    })
    .await;
    let seen_after = stopped.elapsed();
    // Its heartbeat was at most one cadence old when it stopped, and the rule is two cadences;
    // the rest is the polling and a loaded machine.
    assert!(
        seen_after < Duration::from_millis(2_500),
        "stalled only after {seen_after:?}"
    );
    let store = db.store("qlsched top test").await;
    let snapshot = qlsched::tui::load::read_snapshot(&store, None)
        .await
        .expect("snapshot");
    let panel: Vec<String> = snapshot
        .panel_rows()
        .iter()
        .filter_map(|row| match row {
            qlsched::tui::state::PanelRow::Replica { replica, .. } => {
                Some(format!("{} {}", replica.owner, replica.liveness))
            }
            qlsched::tui::state::PanelRow::Other { .. } => None,
        })
        .collect();
    assert_eq!(
        panel,
        ["hung stalled", "watcher live"],
        "top lists it first"
    );
    eventually(
        Duration::from_secs(5),
        "the watcher's scrape counts it",
        || async {
            let Ok((200, text)) = crate::observe::get(&addr, "/metrics").await else {
                return false;
            };
            crate::observe::sample(&text, "qlsched_replicas{liveness=\"stalled\"}") == 1.0
                && crate::observe::sample(&text, "qlsched_replicas{liveness=\"live\"}") == 1.0
        },
    )
    .await;
    assert!(
        stopped.elapsed() < Duration::from_secs(8),
        "all three seen while its lease still held"
    );

    // Past its lease (its round began at most a second before the stop), then continued while
    // the server still sleeps: the round it was stopped in has timed out.
    sleep_ms(9_500u64.saturating_sub(u64::try_from(stopped.elapsed().as_millis()).unwrap_or(0)))
        .await;
    signal(&hung, "-CONT");
    eventually(
        Duration::from_secs(20),
        "the failed round reaches the registry",
        || async {
            let row = inspect();
            row["liveness"] == "live" && row["failed_rounds"].as_i64() >= Some(1)
        },
    )
    .await;
    let row = inspect();
    let error = row["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("did not finish within the lease") && error.contains("claim"),
        "{row}"
    );
    assert!(
        !error.contains("it held no claim"),
        "it held claims: {error}"
    );
    stop_cleanly(watcher);
    stop_cleanly(hung);
    assert_invariants(&db).await;
}

/// A heartbeat that finds no registry row (taken away here by hand, as `expire --owner` or the
/// registry's forgetting after a long stall would) is a failed heartbeat, logged at WARN, not one
/// that passes for written; and the replica, still admitting, registers again within a couple of
/// cadences, with its own --forget-stale-after.
#[tokio::test(flavor = "multi_thread")]
async fn a_heartbeat_that_updates_no_registry_row_is_logged_as_failed() {
    let db = crate::util::TestDb::new().await;
    db.publish(&crate::util::every_second(&["a"])).await;
    let replica = crate::util::spawn_run(
        &db.url(),
        &["--owner", "beating", "--forget-stale-after", "20m"],
    );
    crate::util::eventually_count(
        &db,
        std::time::Duration::from_secs(20),
        "SELECT count(*) FROM replicas WHERE owner = 'beating'",
        1,
    )
    .await;
    db.client()
        .await
        .batch_execute("DELETE FROM replicas WHERE owner = 'beating'")
        .await
        .expect("take the registry row away");
    // The default cadence is a second: back within a couple of them (and some slack).
    crate::util::eventually_count(
        &db,
        std::time::Duration::from_secs(5),
        "SELECT count(*) FROM replicas
         WHERE owner = 'beating' AND state = 'running' AND forget_after_ms = 1200000",
        1,
    )
    .await;
    let log = replica.stop();
    assert!(
        log.contains("the heartbeat updated 0 registry rows for owner beating")
            && log.contains("WARN"),
        "{log}"
    );
    assert!(log.contains("registered again"), "{log}");
    // The readiness check's write-through finds no row to write for an owner the registry does
    // not hold: not ready, rather than a COMMIT that wrote nothing and so waited for no one.
    let touched = qlsched::store::observe::write_through_commit(&db.client().await, "beating-gone")
        .await
        .expect_err("no registry row to write through");
    assert!(
        touched.to_string().contains("registry row is gone"),
        "{touched}"
    );
    crate::util::assert_invariants(&db).await;
}
