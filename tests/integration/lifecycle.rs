//! The coordinator and its lifecycle (docs/DESIGN.md §4.9): rounds never overlap, run identities
//! are allocated only for admissions, a stop is bounded and releases unadmitted claims, and errors
//! do not stop the timer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::mpsc;

use qlsched::coordinator::Coordinator;
use qlsched::core::CoordinatorConfig;
use qlsched::lifecycle::{Lifecycle, RoundEvent};

use crate::util::{TestDb, assert_invariants, eventually, eventually_count, manifest, sleep_ms};

fn config(owner: &str, cadence_ms: u64, drain_ms: u64) -> CoordinatorConfig {
    CoordinatorConfig {
        owner: owner.to_owned(),
        lease: Duration::from_secs(30),
        cadence: Duration::from_millis(cadence_ms),
        drain_timeout: Duration::from_millis(drain_ms),
        ..CoordinatorConfig::default()
    }
}

async fn every_second(db: &TestDb, n: usize) {
    let triggers: Vec<_> = (0..n)
        .map(|i| json!({ "id": format!("t{i}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
}

/// Every row due now (on the one-second grid), and every admission stalled for 30 s in its run
/// INSERT: a round that holds its claims and does not finish.
async fn due_and_stalled(db: &TestDb) {
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = (now_ms() / 1000) * 1000 - 1000;
             CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN PERFORM pg_sleep(30); RETURN NEW; END $$;
             CREATE TRIGGER stall BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION stall();",
        )
        .await
        .expect("stall admissions");
}

fn drain(events: &mut mpsc::UnboundedReceiver<RoundEvent>) -> Vec<RoundEvent> {
    let mut out = Vec::new();
    while let Ok(event) = events.try_recv() {
        out.push(event);
    }
    out
}

/// Waits up to `within` in all for the first event `wanted` accepts, passing over the others;
/// panics naming `what` when none came.
async fn next_event(
    events: &mut mpsc::UnboundedReceiver<RoundEvent>,
    within: Duration,
    what: &str,
    wanted: impl Fn(&RoundEvent) -> bool,
) {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.recv()).await {
            Ok(Some(event)) if wanted(&event) => return,
            Ok(Some(_)) => {}
            _ => panic!("no {what} within {within:?}"),
        }
    }
}

fn span(event: &RoundEvent) -> (Instant, Instant) {
    match event {
        RoundEvent::Finished {
            started, finished, ..
        }
        | RoundEvent::Failed {
            started, finished, ..
        } => (*started, *finished),
    }
}

#[tokio::test]
async fn rounds_never_overlap_even_when_a_round_is_slower_than_the_cadence() {
    let db = TestDb::new().await;
    every_second(&db, 3).await;
    // Every claim write sleeps: a round takes far longer than the 20 ms cadence. Each write says
    // when it began and ended, in its transaction, on the database clock: what the server saw,
    // not what the lifecycle reports of itself.
    db.client()
        .await
        .batch_execute(
            "CREATE TABLE writes (xid bigint, began timestamptz, ended timestamptz);
             GRANT INSERT ON writes TO PUBLIC;
             CREATE FUNCTION slow_down() RETURNS trigger LANGUAGE plpgsql AS $$
             DECLARE began timestamptz := clock_timestamp();
             BEGIN PERFORM pg_sleep(0.1);
                   INSERT INTO writes VALUES (txid_current(), began, clock_timestamp());
                   RETURN NEW; END $$;
             CREATE TRIGGER slow BEFORE UPDATE ON trigger_schedules FOR EACH ROW EXECUTE FUNCTION slow_down();",
        )
        .await
        .expect("slow trigger");
    let coordinator = Arc::new(Coordinator::new(
        db.store("slow").await,
        config("slow", 20, 5_000),
    ));
    let (sender, mut events) = mpsc::unbounded_channel();
    let lifecycle = Lifecycle::start(coordinator, Some(sender));
    sleep_ms(2_500).await;
    lifecycle.stop().await;
    let rounds = drain(&mut events);
    assert!(rounds.len() >= 3, "{} rounds", rounds.len());
    let slow = rounds.iter().filter(|e| {
        let (s, f) = span(e);
        f - s >= Duration::from_millis(100)
    });
    assert!(slow.count() >= 2, "rounds were slower than the cadence");
    for pair in rounds.windows(2) {
        let (_, previous_end) = span(&pair[0]);
        let (next_start, _) = span(&pair[1]);
        assert!(
            next_start >= previous_end,
            "a round started before the previous one finished"
        );
    }
    // The server's view: no two of the replica's write transactions ran at once (overlapping
    // rounds would have two in flight), which fails if rounds ever run concurrently.
    let overlapping = db
        .count(
            "SELECT count(*) FROM
                 (SELECT xid, min(began) AS began, max(ended) AS ended FROM writes GROUP BY xid) a
             JOIN (SELECT xid, min(began) AS began, max(ended) AS ended FROM writes GROUP BY xid) b
               ON a.xid < b.xid AND a.began < b.ended AND b.began < a.ended",
        )
        .await;
    let transactions = db.count("SELECT count(DISTINCT xid) FROM writes").await;
    assert!(transactions >= 3, "{transactions} write transactions");
    assert_eq!(
        overlapping, 0,
        "write transactions of two rounds overlapped"
    );
}

#[tokio::test]
async fn run_identities_are_allocated_only_for_admissions() {
    let db = TestDb::new().await;
    every_second(&db, 4).await;
    let coordinator = Coordinator::new(db.store("c").await, config("c", 1000, 1000));
    let first = coordinator.run_round().await.expect("round");
    assert_eq!((first.claimed, first.initialized, first.fired), (4, 4, 0));
    assert!(
        first.admitted.is_empty(),
        "initializing allocates no run identity"
    );
    sleep_ms(1_100).await;
    let second = coordinator.run_round().await.expect("round");
    assert_eq!(second.fired, 4);
    assert_eq!(second.admitted.len(), 4);
    let client = db.client().await;
    for admitted in &second.admitted {
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM runs WHERE run_id = $1",
                &[&admitted.run.run_id],
            )
            .await
            .expect("count")
            .get(0);
        assert_eq!(n, 1, "every identity allocated is a run admitted");
    }
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 4);
    assert_invariants(&db).await;
}

#[tokio::test]
async fn stop_waits_at_most_the_drain_timeout_then_releases_unadmitted_claims() {
    let db = TestDb::new().await;
    every_second(&db, 3).await;
    due_and_stalled(&db).await;
    let coordinator = Arc::new(Coordinator::new(
        db.store("stuck").await,
        config("stuck", 10, 400),
    ));
    let lifecycle = Lifecycle::start(coordinator, None);
    // Wait until the round holds its claims and is stuck in the admission.
    let deadline = Instant::now() + Duration::from_secs(10);
    while db
        .count("SELECT count(*) FROM trigger_schedules WHERE claim_owner = 'stuck'")
        .await
        < 3
    {
        assert!(Instant::now() < deadline, "the round never claimed");
        sleep_ms(20).await;
    }
    sleep_ms(200).await;
    let started = Instant::now();
    let stop = lifecycle.stop().await;
    let took = started.elapsed();
    assert!(!stop.drained, "the stalled round cannot drain");
    assert_eq!(stop.released, 3, "its claims are given back");
    assert!(took < Duration::from_secs(5), "stop took {took:?}");
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claim_token IS NOT NULL")
            .await,
        0
    );
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
}

#[tokio::test]
async fn stop_drains_a_round_that_finishes_in_time() {
    let db = TestDb::new().await;
    every_second(&db, 5).await;
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = (now_ms() / 1000) * 1000 - 1000",
        )
        .await
        .expect("due");
    let coordinator = Arc::new(Coordinator::new(
        db.store("d").await,
        config("d", 10_000, 10_000),
    ));
    let (sender, mut events) = mpsc::unbounded_channel();
    let lifecycle = Lifecycle::start(coordinator, Some(sender));
    let deadline = Instant::now() + Duration::from_secs(30);
    while db.count("SELECT count(*) FROM runs").await < 5 {
        assert!(Instant::now() < deadline, "the lifecycle admitted nothing");
        sleep_ms(20).await;
    }
    let stop = lifecycle.stop().await;
    assert!(stop.drained);
    assert_eq!(stop.released, 0);
    assert!(
        matches!(drain(&mut events).first(), Some(RoundEvent::Finished { report, .. }) if report.fired == 5)
    );
    let counts = assert_invariants(&db).await;
    assert_eq!(counts.claims_held, 0);
}

#[tokio::test]
async fn a_failed_round_is_reported_and_the_next_round_still_runs() {
    let db = TestDb::new().await;
    every_second(&db, 2).await;
    let client = db.client().await;
    client
        .batch_execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'injected outage'; END $$;
             CREATE TRIGGER refuse BEFORE UPDATE ON trigger_schedules FOR EACH ROW EXECUTE FUNCTION refuse();",
        )
        .await
        .expect("break claims");
    let coordinator = Arc::new(Coordinator::new(db.store("r").await, config("r", 50, 1000)));
    let (sender, mut events) = mpsc::unbounded_channel();
    let lifecycle = Lifecycle::start(coordinator, Some(sender));
    // Two failed rounds before healing, however slowly they come.
    let mut events_seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while events_seen
        .iter()
        .filter(|e| matches!(e, RoundEvent::Failed { .. }))
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "no two failed rounds");
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("a round ends")
            .expect("the lifecycle runs");
        events_seen.push(event);
    }
    client
        .batch_execute("DROP TRIGGER refuse ON trigger_schedules")
        .await
        .expect("heal");
    let deadline = Instant::now() + Duration::from_secs(10);
    while db
        .count("SELECT count(*) FROM trigger_schedules WHERE next_fire_at_ms IS NOT NULL")
        .await
        < 2
    {
        assert!(Instant::now() < deadline, "rounds did not resume");
        sleep_ms(50).await;
    }
    lifecycle.stop().await;
    events_seen.extend(drain(&mut events));
    let events = events_seen;
    let first_ok = events
        .iter()
        .position(|e| matches!(e, RoundEvent::Finished { report, .. } if report.claimed > 0));
    let failures = events
        .iter()
        .filter(
            |e| matches!(e, RoundEvent::Failed { error, .. } if error.contains("injected outage")),
        )
        .count();
    assert!(failures >= 2, "failed rounds are reported: {failures}");
    assert!(
        first_ok.is_some_and(|i| i >= failures),
        "work resumed after the failures"
    );
}

#[tokio::test]
async fn a_round_that_outlives_its_lease_is_cancelled_and_the_timer_goes_on() {
    let db = TestDb::new().await;
    every_second(&db, 2).await;
    due_and_stalled(&db).await;
    let client = db.client().await;
    let config = CoordinatorConfig {
        lease: Duration::from_secs(1),
        ..config("hung", 50, 1_000)
    };
    let coordinator = Arc::new(Coordinator::new(db.store("hung").await, config));
    let (sender, mut events) = mpsc::unbounded_channel();
    let lifecycle = Lifecycle::start(coordinator, Some(sender));
    sleep_ms(2_500).await;
    client
        .batch_execute("DROP TRIGGER stall ON runs")
        .await
        .expect("heal");
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.count("SELECT count(*) FROM runs").await < 2 {
        assert!(
            Instant::now() < deadline,
            "rounds did not resume after the cancelled one"
        );
        sleep_ms(50).await;
    }
    lifecycle.stop().await;
    let events = drain(&mut events);
    assert!(
        events.iter().any(|e| matches!(e, RoundEvent::Failed { error, .. } if error.contains("did not finish within the lease"))),
        "the hung round was cancelled and reported"
    );
    // How long it ran and what became of its claims (nobody else was there to take them).
    let said = events
        .iter()
        .find_map(|e| match e {
            RoundEvent::Failed { error, .. } if error.contains("within the lease") => {
                Some(error.clone())
            }
            _ => None,
        })
        .unwrap_or_default();
    // A lease of 1s: it ran 1s and a fraction, written as seconds with decimals (core::time).
    assert!(
        said.contains("it ran 1s ") || said.contains("it ran 1."),
        "{said}"
    );
    assert!(said.contains("its 2 claims: p/t0 still ours"), "{said}");
    assert_invariants(&db).await;
}

/// After a stall, each claim the round held is accounted for from the fences: still ours,
/// expired by an operator (the audit names who), taken over by another owner.
#[tokio::test]
async fn claim_fates_say_who_expired_or_took_over_each_claim() {
    use qlsched::store::claim::{ClaimFate, ReleaseRequest, claim_fates};
    let db = TestDb::new().await;
    every_second(&db, 3).await;
    let held = |trigger: &str, owner: &str| {
        let output = crate::util::qlsched(
            Some(&db),
            &[
                "claim",
                &format!("p/{trigger}"),
                "--hold",
                "--owner",
                owner,
                "-o",
                "json",
            ],
            None,
        );
        assert_eq!(
            crate::util::code(&output),
            0,
            "{}",
            crate::util::stderr(&output)
        );
        let report: serde_json::Value =
            serde_json::from_str(&crate::util::stdout(&output)).expect("JSON");
        ReleaseRequest {
            project_id: "p".to_owned(),
            trigger_id: trigger.to_owned(),
            owner: owner.to_owned(),
            token: report["fence"]["token"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .expect("token"),
            version: report["fence"]["version"].as_i64().expect("version"),
        }
    };
    let ours = held("t0", "stalled");
    let expired = held("t1", "stalled");
    let taken = held("t2", "stalled");
    let expire = crate::util::qlsched(Some(&db), &["expire", "p/t1", "--yes"], None);
    assert_eq!(
        crate::util::code(&expire),
        0,
        "{}",
        crate::util::stderr(&expire)
    );
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules SET claim_owner = 'host-2', claim_token = gen_random_uuid(),
                 claim_version = claim_version + 1
             WHERE trigger_id = 't2'",
        )
        .await
        .expect("take over");
    let client = db.client().await;
    let fates = claim_fates(&client, &[ours, expired, taken])
        .await
        .expect("fates");
    assert_eq!(fates[0].1, ClaimFate::StillHeld { lapsed: false });
    assert!(
        matches!(
            &fates[1].1,
            ClaimFate::ExpiredBy {
                now_held_by: None,
                ..
            }
        ),
        "{:?}",
        fates[1]
    );
    assert_eq!(
        fates[2].1,
        ClaimFate::TakenOver {
            owner: "host-2".to_owned()
        }
    );
    assert!(fates[1].1.to_string().starts_with("expired by "));
}

/// A round dropped before it finished is followed by a cancel request, which names the backend,
/// not the statement. Its connection must never serve another round (the cancel would land on
/// that round's statement): it leaves the pool.
#[tokio::test]
async fn a_round_dropped_in_flight_never_lends_its_connection_again() {
    let db = TestDb::new().await;
    every_second(&db, 1).await;
    let coordinator = Coordinator::new(db.store("dropped").await, config("dropped", 10, 1_000));
    coordinator.run_round().await.expect("initialize");
    let pooled = coordinator.store().connections();
    assert!(pooled >= 1, "the pool kept the round's connection");
    due_and_stalled(&db).await;
    tokio::time::timeout(Duration::from_millis(500), coordinator.run_round())
        .await
        .expect_err("the round stalls");
    coordinator.cancel_in_flight().await;
    let _ = coordinator.forget_held();
    assert_eq!(
        coordinator.store().connections(),
        pooled - 1,
        "the dropped round's connection left the pool"
    );
    db.client()
        .await
        .batch_execute("DROP TRIGGER stall ON runs")
        .await
        .expect("heal");
    // The claim of the dropped round holds until its lease ends; the next round finds nothing
    // to do but does not fail on a stray cancel.
    let report = coordinator.run_round().await.expect("the next round runs");
    assert_eq!(report.fired, 0, "{report:?}");
}

/// After a round that was not full, a replica sleeps until the next occurrence falls due, not
/// until one cadence has passed: with a 5 s cadence, an every-second trigger still fires every
/// second. (The old timer woke once per cadence: one occurrence per 5 s, the rest caught up late.)
#[tokio::test]
async fn an_idle_replica_wakes_for_the_next_occurrence_not_for_its_cadence() {
    let db = TestDb::new().await;
    every_second(&db, 2).await;
    let coordinator = Coordinator::new(db.store("waker").await, config("waker", 5_000, 1_000));
    let lifecycle = Lifecycle::start(Arc::new(coordinator), None);
    eventually(Duration::from_secs(10), "every row initialized", || async {
        db.count("SELECT count(*) FROM trigger_schedules WHERE next_fire_at_ms IS NULL")
            .await
            == 0
    })
    .await;
    sleep_ms(4_500).await;
    lifecycle.stop().await;
    let on_time = db
        .count("SELECT count(*) FROM runs WHERE created_at_ms - scheduled_for_ms < 900")
        .await;
    assert!(
        on_time >= 2 * 3,
        "{on_time} runs admitted within 0.9 s of their occurrence in 4.5 s of two triggers"
    );
    assert_invariants(&db).await;
}

/// A round whose connection dies in the middle of its admission learns on a fresh connection
/// that nothing committed and gives its claims back there at once: a live replica does not keep
/// a batch of triggers blocked for a whole lease after one reset.
#[tokio::test]
async fn a_round_whose_connection_dies_gives_its_claims_back_on_a_fresh_one() {
    let db = TestDb::new().await;
    every_second(&db, 4).await;
    let coordinator = Arc::new(Coordinator::new(
        db.store("qlsched severed round").await,
        config("severed", 1000, 1000),
    ));
    coordinator.run_round().await.expect("initialize");
    due_and_stalled(&db).await;
    let round = tokio::spawn({
        let coordinator = coordinator.clone();
        async move { coordinator.run_round().await }
    });
    let stalled = "SELECT count(*) FROM pg_stat_activity
                   WHERE application_name = 'qlsched severed round' AND wait_event = 'PgSleep'";
    eventually_count(&db, Duration::from_secs(10), stalled, 1).await;
    db.count(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                               WHERE application_name = 'qlsched severed round'
                                 AND wait_event = 'PgSleep') t",
    )
    .await;
    let report = tokio::time::timeout(Duration::from_secs(10), round)
        .await
        .expect("the round ends")
        .expect("no panic")
        .expect("the round reports what happened");
    assert_eq!((report.fired, report.unsettled), (0, 4), "{report:?}");
    assert_eq!(report.released, 4, "{report:?}");
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claim_owner IS NOT NULL")
            .await,
        0,
        "every claim given back at once, not left for its lease"
    );
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
}

/// While the database refuses connections a replica backs off (doubling from one cadence, with
/// jitter, up to a few seconds) instead of failing a round every cadence, and it is back at work
/// within that cap once the database is.
#[tokio::test]
async fn rounds_back_off_while_the_database_refuses_and_resume_when_it_is_back() {
    let db = TestDb::new().await;
    every_second(&db, 2).await;
    let coordinator = Coordinator::new(db.store("backing off").await, config("b", 100, 1_000));
    let (events, mut received) = mpsc::unbounded_channel();
    let lifecycle = Lifecycle::start(Arc::new(coordinator), Some(events));
    next_event(&mut received, Duration::from_secs(10), "first round", |e| {
        matches!(e, RoundEvent::Finished { .. })
    })
    .await;
    let server = crate::util::server()
        .connect(&crate::util::schema(), "qlsched tests")
        .await
        .expect("server connection");
    let refuse = format!(
        "ALTER DATABASE \"{0}\" WITH ALLOW_CONNECTIONS false;
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = '{0}' AND pid <> pg_backend_pid();",
        db.name
    );
    server
        .batch_execute(&refuse)
        .await
        .expect("refuse connections");
    drain(&mut received);
    // The first failure: a round in flight when the backends were terminated may take a while to
    // learn it on a loaded machine (one CI run saw none within 3 s), so the back-off is measured
    // from the first failure on, and how long that took is printed for whoever reads a failure.
    let refused = Instant::now();
    next_event(
        &mut received,
        Duration::from_secs(10),
        "failed round after the database refused",
        |e| matches!(e, RoundEvent::Failed { .. }),
    )
    .await;
    eprintln!(
        "first failed round {:?} after the refusal",
        refused.elapsed()
    );
    sleep_ms(3_000).await;
    let failed = drain(&mut received)
        .iter()
        .filter(|e| matches!(e, RoundEvent::Failed { .. }))
        .count();
    // Every 100 ms without back-off would be about 30; with it (100 ms doubling, with jitter, up to
    // 5 s) 3 to 5.
    assert!(
        (1..=10).contains(&failed),
        "{failed} more failed rounds in 3 s"
    );

    server
        .batch_execute(&format!(
            "ALTER DATABASE \"{}\" WITH ALLOW_CONNECTIONS true",
            db.name
        ))
        .await
        .expect("allow connections");
    next_event(
        &mut received,
        qlsched::lifecycle::MAX_BACK_OFF + Duration::from_secs(3),
        "round succeeding (the back-off cap and 3 s) after the database came back",
        |e| matches!(e, RoundEvent::Finished { .. }),
    )
    .await;
    lifecycle.stop().await;
    assert_invariants(&db).await;
}

/// With no --batch the batch follows the backlog on a real database: 100 rows due at once, a
/// full claim of 16 doubles it round by round, and a quiet round after the backlog halves it;
/// a pinned batch never moves.
#[tokio::test]
async fn the_adaptive_batch_grows_with_a_backlog_and_shrinks_when_it_is_gone() {
    let db = TestDb::new().await;
    // Yearly triggers whose cursor is in the past: each is claimed once, then not due for a year.
    let triggers: Vec<_> = (0..100)
        .map(|i| json!({ "id": format!("y{i:03}"), "task": "t", "cron": "0 0 1 1 *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    db.client()
        .await
        .batch_execute("UPDATE trigger_schedules SET next_fire_at_ms = now_ms() - 1000")
        .await
        .expect("all due");
    let store = db.store("qlsched test adaptive").await;
    let coordinator = Coordinator::new(store.clone(), config("adaptive", 1_000, 1_000));
    let mut batches = Vec::new();
    for _ in 0..4 {
        let report = coordinator.run_round().await.expect("round");
        batches.push((report.batch, report.claimed));
    }
    assert_eq!(
        batches,
        [(16, 16), (32, 32), (64, 52), (64, 0)],
        "16 full → 32 full → 64 takes the rest of the 100 → nothing left"
    );
    assert_eq!(coordinator.batch(), 32, "an empty round halves it");

    let pinned = Coordinator::new(
        store,
        CoordinatorConfig {
            batch: qlsched::core::Batch::Pinned(8),
            ..config("pinned", 1_000, 1_000)
        },
    );
    let report = pinned.run_round().await.expect("round");
    assert_eq!((report.batch, pinned.batch()), (8, 8));
    assert_invariants(&db).await;
}

/// Two migrations applied after this build's latest (`L`), as a newer release's `migrate` records
/// them: `L+1` lets a build of schema `L` run beside it, `L+2` lets the build just before it
/// (`L+1`) run, so each single step says "the previous build may run". `floor` is `L+2`'s floor.
async fn two_newer_migrations(client: &tokio_postgres::Client, floor: i64) -> (i64, i64) {
    let latest = qlsched::store::migrate::latest_version();
    client
        .execute(
            "INSERT INTO schema_migrations (version, name, checksum, applied_at_ms, execution_ms,
                                            previous_release_may_run, upgrade_floor)
             VALUES ($1::int8, 'expand', repeat('a', 64), 0, 0, true, $1::int8 - 1),
                    ($1::int8 + 1, 'contract', repeat('b', 64), 0, 0, true, $2::int8)",
            &[&(latest + 1), &floor],
        )
        .await
        .expect("two newer migrations");
    (latest, latest + 2)
}

/// The upgrade gate is a floor, not a step: a replica of a build two migrations behind the
/// ledger admits beside them while their floors are at or below its build (a build at the floor
/// keeps admitting), and stops admitting, its claims given back, saying why in its log and in the
/// registry (`inspect replicas`' last error), as soon as the later one's floor rises above its
/// build, though each migration lets the build just before it run; it admits again when the
/// floor is lowered back (in an upgrade: the replica replaced).
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_two_migrations_behind_stops_admitting_where_a_floor_rises_above_its_build() {
    let db = crate::util::TestDb::new().await;
    db.publish(&crate::util::every_second(&["a", "b"])).await;
    let replica = crate::util::spawn_run(&db.url(), &["--owner", "behind", "--cadence", "100ms"]);
    let client = db.client().await;
    let runs = || async {
        client
            .query_one("SELECT count(*) FROM runs", &[])
            .await
            .expect("runs")
            .get::<_, i64>(0)
    };
    crate::util::eventually(Duration::from_secs(20), "admissions", || async {
        runs().await > 0
    })
    .await;
    // Both floors at this build: it runs beside them.
    let (latest, contract) = two_newer_migrations(&client, 0).await;
    client
        .execute(
            "UPDATE schema_migrations SET upgrade_floor = $1 WHERE version = $2",
            &[&latest, &contract],
        )
        .await
        .expect("a floor at this build");
    let before = runs().await;
    crate::util::eventually(Duration::from_secs(10), "admissions go on", || async {
        runs().await > before + 2
    })
    .await;
    // The contract step's floor is the build that carries the expansion: above this one.
    client
        .execute(
            "UPDATE schema_migrations SET upgrade_floor = $1::int8 WHERE version = $1::int8 + 1",
            &[&(latest + 1)],
        )
        .await
        .expect("the floor raised");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stopped_at = runs().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        runs().await,
        stopped_at,
        "admitted beside a migration whose floor is above its build"
    );
    let held: i64 = client
        .query_one(
            "SELECT count(*) FROM trigger_schedules WHERE claim_owner = 'behind'",
            &[],
        )
        .await
        .expect("claims")
        .get(0);
    assert_eq!(held, 0, "its claims are given back");
    let why = format!(
        "migration {contract} (contract) was applied, and this build may not run beside it: its \
         upgrade floor is schema {}, this build is of schema {latest}",
        latest + 1
    );
    crate::util::eventually(Duration::from_secs(10), "the registry says why", || async {
        client
            .query_one(
                "SELECT coalesce(last_error, '') FROM replicas WHERE owner = 'behind'",
                &[],
            )
            .await
            .is_ok_and(|row| row.get::<_, String>(0).contains(&why))
    })
    .await;
    client
        .execute(
            "UPDATE schema_migrations SET upgrade_floor = $1 WHERE version = $2",
            &[&latest, &contract],
        )
        .await
        .expect("the floor lowered");
    crate::util::eventually(Duration::from_secs(15), "admissions again", || async {
        runs().await > stopped_at
    })
    .await;
    let log = replica.stop();
    assert!(log.contains(&why), "{log}");
    client
        .batch_execute("DELETE FROM schema_migrations WHERE name IN ('expand', 'contract')")
        .await
        .expect("the newer migrations gone");
    crate::util::assert_invariants(&db).await;
}

/// The gate is in the claim statement itself: with due rows and a migration whose floor is above
/// this build in the ledger, the replica's claim and the manual claim take nothing, the dry run
/// shows nothing, and the `claim` command exits 78 naming the migration; with the floor at this
/// build, the same claim takes the rows.
#[tokio::test]
async fn a_claim_by_a_build_below_the_floor_claims_nothing() {
    let db = TestDb::new().await;
    every_second(&db, 3).await;
    let client = db.client().await;
    client
        .batch_execute("UPDATE trigger_schedules SET next_fire_at_ms = now_ms() - 1000")
        .await
        .expect("all due");
    let (latest, contract) = two_newer_migrations(&client, 0).await;
    let floor = |floor: i64| {
        let client = &client;
        async move {
            client
                .execute(
                    "UPDATE schema_migrations SET upgrade_floor = $1 WHERE version = $2",
                    &[&floor, &contract],
                )
                .await
                .expect("set the floor");
        }
    };
    floor(latest + 1).await;
    let claim = |owner: &'static str| {
        let client = &client;
        async move {
            client.batch_execute("BEGIN").await.expect("begin");
            let rows = qlsched::store::claim::claim_due(client, None, owner, 16, 30_000)
                .await
                .expect("the claim runs");
            let would = qlsched::store::claim::would_claim(client, None, owner, 30_000)
                .await
                .expect("the dry run runs");
            client.batch_execute("COMMIT").await.expect("commit");
            (rows.len(), would.is_some())
        }
    };
    assert_eq!(
        claim("below").await,
        (0, false),
        "nothing claimed below the floor"
    );
    let output = crate::util::qlsched(Some(&db), &["claim", "--owner", "by-hand", "--yes"], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains(&format!("migration {contract} (contract)"))
            && stderr.contains(&format!("builds before schema {}", latest + 1)),
        "{stderr}"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claim_owner IS NOT NULL")
            .await,
        0
    );
    floor(latest).await;
    assert_eq!(
        claim("at-floor").await,
        (3, false),
        "all three due rows claimed at the floor"
    );
}

/// A failed read of the gate fails the claim, it does not let the round admit: with SELECT on
/// the ledger revoked from the runtime role, a replica's round (its login a member of that role
/// only) fails naming the ledger, claims nothing and admits nothing; granted again, it admits.
#[tokio::test]
async fn a_failed_read_of_the_gate_fails_the_claim_and_admits_nothing() {
    let db = TestDb::new().await;
    every_second(&db, 3).await;
    let login = crate::util::LoginRole::create(&db, "qlsched_runtime").await;
    let settings = qlsched::store::ConnectionSettings::resolve(Some(&login.url(&db)))
        .expect("the runtime login's URL");
    let store = qlsched::store::Store::open_replica(&settings, &crate::util::schema(), "gate", 2)
        .await
        .expect("a replica's pool as the runtime login");
    let coordinator = Coordinator::new(store, config("runtime-login", 100, 1_000));
    let client = db.client().await;
    let due = || async {
        client
            .batch_execute(
                "UPDATE trigger_schedules SET next_fire_at_ms = (now_ms() / 1000) * 1000 - 1000",
            )
            .await
            .expect("all due");
    };
    // Initialized, then due.
    coordinator.run_round().await.expect("a first round");
    due().await;
    client
        .batch_execute("REVOKE SELECT ON schema_migrations FROM qlsched_runtime")
        .await
        .expect("revoke");
    let runs = db.count("SELECT count(*) FROM runs").await;
    let error = coordinator
        .run_round()
        .await
        .expect_err("a round that cannot read the gate fails");
    client
        .batch_execute("GRANT SELECT ON schema_migrations TO qlsched_runtime")
        .await
        .expect("grant again");
    assert!(
        error.to_string().contains("schema_migrations"),
        "the round says it could not read the ledger: {error}"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM runs").await,
        runs,
        "nothing admitted"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claim_owner IS NOT NULL")
            .await,
        0,
        "nothing claimed"
    );
    let report = coordinator.run_round().await.expect("the gate read again");
    assert_eq!(report.claimed, 3, "{report:?}");
    assert_eq!(db.count("SELECT count(*) FROM runs").await, runs + 3);
    assert_invariants(&db).await;
}

/// The replica as a library service, run in-process as `qlsched run` runs it: it starts, admits,
/// and on its stop token drains, gives back, marks itself stopped and returns how the stop went.
#[tokio::test]
async fn the_replica_service_runs_in_process_and_stops_when_its_token_is_tripped() {
    use qlsched::replica::{ReplicaConfig, ReplicaExit};
    use qlsched::stop::StopToken;

    let db = TestDb::new().await;
    every_second(&db, 3).await;
    let stop = StopToken::new();
    let replica = tokio::spawn({
        let stop = stop.clone();
        let config = ReplicaConfig {
            coordinator: config("in-process", 100, 2_000),
            settings: db.settings.clone(),
            schema: crate::util::schema(),
            metrics_addr: None,
            exit_if_unmigrated: true,
            retention: qlsched::replica::Retention::DEFAULT,
            forget_stale_after: qlsched::core::FORGET_STALE_AFTER,
            build: qlsched::cli::BUILD,
        };
        async move { qlsched::replica::run(config, &stop).await }
    });
    eventually_count(&db, Duration::from_secs(20), "SELECT count(*) FROM runs", 3).await;
    let asked = Instant::now();
    stop.trip("test");
    let exit = tokio::time::timeout(Duration::from_secs(10), replica)
        .await
        .expect("the replica stops within its bound")
        .expect("the replica's task")
        .expect("the replica ran");
    assert!(asked.elapsed() < qlsched::lifecycle::stop_bound(Duration::from_secs(2)));
    assert!(
        matches!(exit, ReplicaExit::Stopped(ref report) if report.drained),
        "{exit:?}"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM replicas WHERE owner = 'in-process' AND state = 'stopped'")
            .await,
        1
    );
    // Registered as the build the binary hands in: `VERSION+COMMIT`, as `qlsched run` registers.
    let version: String = db
        .client()
        .await
        .query_one(
            "SELECT version FROM replicas WHERE owner = 'in-process'",
            &[],
        )
        .await
        .expect("the registry row")
        .get(0);
    assert_eq!(version, qlsched::cli::BUILD.release());
    assert_invariants(&db).await;
}

/// A stop asked for before the replica has connected ends its start: nothing claimed, nothing
/// registered.
#[tokio::test]
async fn a_replica_service_stopped_before_it_starts_claims_nothing() {
    use qlsched::replica::{ReplicaConfig, ReplicaExit};
    use qlsched::stop::StopToken;

    let db = TestDb::new().await;
    every_second(&db, 1).await;
    let stop = StopToken::new();
    stop.trip("test");
    let config = ReplicaConfig {
        coordinator: config("never-started", 100, 2_000),
        settings: db.settings.clone(),
        schema: crate::util::schema(),
        metrics_addr: None,
        exit_if_unmigrated: true,
        retention: qlsched::replica::Retention::DEFAULT,
        forget_stale_after: qlsched::core::FORGET_STALE_AFTER,
        build: qlsched::cli::BUILD,
    };
    let exit = qlsched::replica::run(config, &stop)
        .await
        .expect("a clean stop");
    assert_eq!(exit, ReplicaExit::StoppedWhileStarting);
    assert_eq!(db.count("SELECT count(*) FROM replicas").await, 0);
}
