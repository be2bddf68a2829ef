//! Drills on the wire, through the loopback proxy of `util::wire`: a partition longer than the
//! lease, added latency, and connections reset in the middle of a round.

use std::time::{Duration, Instant};

use super::{every_second_triggers, lag_since, now_ms, replica, runs_by, triggers_fired_since};
use crate::util::wire::{Upstream, WireProxy};
use crate::util::{TestDb, assert_invariants, eventually};

/// The URL of `db` through `proxy` (no TLS through the proxy).
fn through(proxy: &WireProxy, db: &TestDb) -> String {
    format!(
        "postgres://postgres@{}/{}?sslmode=disable",
        proxy.addr, db.name
    )
}

/// A replica `owner` (lease `lease`) reaching `db` through a proxy of its own, once it has
/// admitted `runs` runs, cut off both ways at its next admission: that admission sent and never
/// answered.
async fn cut_off_at_an_admission(
    db: &TestDb,
    client: &tokio_postgres::Client,
    owner: &str,
    lease: &str,
    runs: i64,
) -> (WireProxy, super::Replica) {
    let proxy = WireProxy::start(Upstream::of(&crate::util::server()), 0).await;
    let start_ms = now_ms(client).await;
    let replica = replica(&through(&proxy, db), owner, lease);
    eventually(
        Duration::from_secs(20),
        "the proxied replica admits",
        || async { runs_by(client, owner, start_ms).await >= runs },
    )
    .await;
    proxy.partition_at_next_admission();
    eventually(
        Duration::from_secs(10),
        "a partition at an admission",
        || async { proxy.partitioned() },
    )
    .await;
    (proxy, replica)
}

/// Triggers held by `owner` now, with the database-time expiry of each claim.
async fn held_by(client: &tokio_postgres::Client, owner: &str) -> Vec<(String, i64)> {
    client
        .query(
            "SELECT trigger_id, claim_expires_at_ms FROM trigger_schedules WHERE claim_owner = $1",
            &[&owner],
        )
        .await
        .expect("claims held")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// A replica cut off from the database (both ways, its admission in flight) for longer than its
/// lease: another replica, started then, takes its rows only once their claims expire in
/// database time; the partitioned replica cancels its round at its lease, so the admission it
/// sent reaches the server after the heal on a closed connection and commits nothing (had it
/// been sent again, its fence would refuse it); and the partitioned replica goes back to work.
#[tokio::test(flavor = "multi_thread")]
async fn a_partition_longer_than_the_lease_hands_rows_over_only_at_their_expiry() {
    let db = TestDb::new().await;
    db.publish(&every_second_triggers(20)).await;
    let client = db.client().await;
    let (proxy, behind) = cut_off_at_an_admission(&db, &client, "behind", "2s", 5).await;
    let partitioned_at = Instant::now();
    let partition_ms = now_ms(&client).await;
    let held = held_by(&client, "behind").await;
    assert!(!held.is_empty(), "the partitioned replica holds claims");
    // The other replica, started now, is the one to take the rows over.
    let direct = replica(&db.url(), "direct", "2s");
    // Each held row: no run of it between the partition and its claim's expiry, then one after.
    let taken_over = || async {
        let mut all = true;
        for (trigger, expires_ms) in &held {
            let (early, late): (i64, i64) = {
                let row = client
                    .query_one(
                        "SELECT count(*) FILTER (WHERE created_at_ms < $3),
                                count(*) FILTER (WHERE created_at_ms >= $3)
                         FROM runs WHERE trigger_id = $1 AND created_at_ms > $2",
                        &[trigger, &partition_ms, expires_ms],
                    )
                    .await
                    .expect("runs of a held row");
                (row.get(0), row.get(1))
            };
            assert_eq!(early, 0, "{trigger} admitted before its claim expired");
            all &= late > 0;
        }
        all
    };
    eventually(
        Duration::from_secs(15),
        "every held row taken over",
        taken_over,
    )
    .await;
    let takeover = partitioned_at.elapsed();
    let expiry_after = held.iter().map(|(_, at)| at - partition_ms).max();
    // Longer than the lease, then healed: the held admission reaches the server late.
    tokio::time::sleep(Duration::from_secs(5).saturating_sub(partitioned_at.elapsed())).await;
    proxy.heal();
    let healed = Instant::now();
    let heal_ms = now_ms(&client).await;
    // Alone again (the other one, nearer the server, would win every row), it goes back to work.
    let direct_log = direct.stop();
    eventually(
        Duration::from_secs(15),
        "the partitioned replica admits again",
        || async { runs_by(&client, "behind", heal_ms).await > 0 },
    )
    .await;
    let back = healed.elapsed();
    let log = behind.stop();
    let counts = assert_invariants(&db).await;
    assert_eq!(counts.claims_held, 0, "{log}\n{direct_log}");
    let fence_lost = log.matches("claim fence lost").count();
    let cancelled = log.matches("did not finish within the lease").count();
    eprintln!(
        "drill: partition of 5 s with a 2 s lease: {} held rows taken over {takeover:?} after it \
         began (claims expiring {expiry_after:?} ms in); the partitioned replica admitting again \
         {back:?} after the heal; its log: {fence_lost} fence losses, {cancelled} rounds cancelled",
        held.len()
    );
}

/// 50 ms added each way to every exchange of a replica with the database: every occurrence still
/// fires, late by the round trips.
#[tokio::test(flavor = "multi_thread")]
async fn added_latency_delays_occurrences_and_loses_none() {
    let db = TestDb::new().await;
    db.publish(&every_second_triggers(10)).await;
    let proxy = WireProxy::start(Upstream::of(&crate::util::server()), 0).await;
    proxy.set_latency(Duration::from_millis(50));
    let client = db.client().await;
    let start_ms = now_ms(&client).await;
    let slow = replica(&through(&proxy, &db), "slow", "3s");
    eventually(
        Duration::from_secs(20),
        "every trigger fires through the latency",
        || async { triggers_fired_since(&client, start_ms).await >= 10 },
    )
    .await;
    // Five seconds of steady state: each trigger fires every second.
    let steady_ms = now_ms(&client).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let log = slow.stop();
    let fired = client
        .query_one(
            "SELECT count(*) FROM runs WHERE scheduled_for_ms > $1::bigint + 1000
               AND scheduled_for_ms <= $1::bigint + 4000",
            &[&steady_ms],
        )
        .await
        .expect("steady runs")
        .get::<_, i64>(0);
    assert_eq!(fired, 30, "10 triggers × 3 whole seconds:\n{log}");
    let (average, max) = lag_since(&client, steady_ms).await;
    assert!(max < 3000, "lag {max} ms within the lease:\n{log}");
    assert_invariants(&db).await;
    eprintln!(
        "drill: 50 ms each way: every occurrence fired; lag average {average} ms, max {max} ms"
    );
}

/// A connection reset just as a round sends its admission: the round's claims are given back
/// on a fresh connection at once, not left for their 30 s lease, and every trigger fires again.
#[tokio::test(flavor = "multi_thread")]
async fn a_reset_mid_round_gives_the_claims_back_on_a_fresh_connection() {
    let db = TestDb::new().await;
    db.publish(&every_second_triggers(10)).await;
    let proxy = WireProxy::start(Upstream::of(&crate::util::server()), 0).await;
    let client = db.client().await;
    let start_ms = now_ms(&client).await;
    let reset = replica(&through(&proxy, &db), "reset", "30s");
    eventually(Duration::from_secs(20), "every trigger fires", || async {
        triggers_fired_since(&client, start_ms).await >= 10
    })
    .await;
    proxy.reset_next_admissions(2);
    eventually(Duration::from_secs(10), "two resets", || async {
        proxy.resets_done() >= 2
    })
    .await;
    let reset_at = Instant::now();
    let reset_ms = now_ms(&client).await;
    eventually(
        Duration::from_secs(10),
        "every trigger fires again, well within the 30 s lease",
        || async { triggers_fired_since(&client, reset_ms).await >= 10 },
    )
    .await;
    let recovered = reset_at.elapsed();
    let log = reset.stop();
    assert!(
        log.contains("given back") && !log.contains("could not give claims back"),
        "the claims were given back:\n{log}"
    );
    let counts = assert_invariants(&db).await;
    assert_eq!(counts.claims_held, 0, "{log}");
    eprintln!(
        "drill: 2 connections reset mid-round; every trigger firing again {recovered:?} later"
    );
}

/// A replica whose network goes silent both ways in the middle of a round (its admission sent
/// and never answered, new connections never answered either) still answers SIGTERM within
/// `qlsched::lifecycle::stop_bound` of its drain timeout, and exits 0: the control loop waits on
/// nothing, the drain, the cancel, the give-back and the registry's marks each have a deadline.
/// The bound is the figure docs/OPERATIONS.md and deploy/ state (tests/integration/deploy.rs).
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_during_a_black_holed_round_exits_within_the_stop_bound() {
    let db = TestDb::new().await;
    db.publish(&every_second_triggers(5)).await;
    let client = db.client().await;
    // A lease far longer than the stop: the round is not cancelled by its lease meanwhile.
    let (proxy, stuck) = cut_off_at_an_admission(&db, &client, "stuck", "60s", 1).await;
    // Well inside the round: its admission is on the wire, unanswered.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let signalled = Instant::now();
    let output = crate::util::terminate(stuck);
    let took = signalled.elapsed();
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{log}");
    // The drills' replicas drain for 3 s.
    let bound = qlsched::lifecycle::stop_bound(Duration::from_secs(3));
    eprintln!("drill: SIGTERM during a black-holed round: exited after {took:?} (bound {bound:?})");
    assert!(
        took <= bound,
        "stopped after {took:?}, over {bound:?}: {log}"
    );
    proxy.heal();
    // Its claims were not given back (nothing answered): they expire with their lease. Nothing
    // ran twice, whatever became of the admission held on the wire.
    assert_invariants(&db).await;
}

/// The claims `owner` holds now, by trigger and token.
async fn claims_of(client: &tokio_postgres::Client, owner: &str) -> Vec<(String, uuid::Uuid)> {
    client
        .query(
            "SELECT trigger_id, claim_token FROM trigger_schedules
             WHERE claim_owner = $1 AND claim_expires_at_ms > now_ms()",
            &[&owner],
        )
        .await
        .expect("claims")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// A replica (30 s lease) whose every connection is cut just as it sends an admission, and whose
/// new connections are refused for 4 s (longer than its 2 s to settle on a fresh connection), as
/// when its pooler or server restarts: the round's claims are settled on its first connection
/// after, and released at once (the admission never reached the server), not at lease expiry.
/// With a 10 s grace nothing is passed over, and nothing runs twice.
#[tokio::test(flavor = "multi_thread")]
async fn claims_of_a_round_cut_off_mid_admission_are_settled_on_reconnecting() {
    let db = TestDb::new().await;
    let triggers: Vec<_> = (0..10)
        .map(|i| {
            serde_json::json!({ "id": format!("t{i:02}"), "task": "t", "cron": "* * * * * *",
                                "misfire_grace": "10s" })
        })
        .collect();
    db.publish(&crate::util::manifest(serde_json::json!(triggers)))
        .await;
    let proxy = WireProxy::start(Upstream::of(&crate::util::server()), 0).await;
    let client = db.client().await;
    let start_ms = now_ms(&client).await;
    let cut = replica(&through(&proxy, &db), "cut", "30s");
    eventually(Duration::from_secs(20), "every trigger fires", || async {
        triggers_fired_since(&client, start_ms).await >= 10
    })
    .await;
    proxy.cut_off_at_next_admission();
    eventually(Duration::from_secs(10), "a cut at an admission", || async {
        proxy.refusing()
    })
    .await;
    // The round's claims, as the cut left them (its admission never reached the server).
    let held = claims_of(&client, "cut").await;
    assert!(!held.is_empty(), "the cut round held claims");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !claims_of(&client, "cut").await.is_empty(),
        "still held while the replica cannot connect (its lease is 30 s)"
    );
    proxy.accept_connections();
    let allowed = Instant::now();
    let still_held = || async {
        let now = claims_of(&client, "cut").await;
        held.iter().filter(|claim| now.contains(claim)).count()
    };
    eventually(
        Duration::from_secs(15),
        "the cut round's claims released",
        || async { still_held().await == 0 },
    )
    .await;
    let released = Instant::now();
    let reconnected = proxy.reconnected_at().expect("the replica reconnected");
    let after_reconnect = released.saturating_duration_since(reconnected);
    let back_ms = now_ms(&client).await;
    eventually(
        Duration::from_secs(10),
        "every trigger fires again",
        || async { triggers_fired_since(&client, back_ms).await >= 10 },
    )
    .await;
    let log = cut.stop();
    let misfires = db.count("SELECT count(*) FROM misfires").await;
    eprintln!(
        "drill: every connection cut at an admission and refused for 4 s (lease 30 s, grace \
         10 s): {} claims released {after_reconnect:?} after the replica reconnected ({:?} after \
         connections were accepted again: its back-off); {misfires} misfire records",
        held.len(),
        released - allowed
    );
    assert!(
        after_reconnect <= Duration::from_secs(2),
        "released {after_reconnect:?} after reconnecting:\n{log}"
    );
    assert!(
        log.contains("settled on reconnecting"),
        "settled by the replica, not by the lease:\n{log}"
    );
    assert_eq!(misfires, 0, "{log}");
    assert_invariants(&db).await;
}

/// As above, but the cut connection's backend still holds the round's rows (the server keeps a
/// lost client's locks until it notices it is gone; here a session of the drill holds them):
/// settling on reconnecting is bounded, so the replica's rounds go on meanwhile (its heartbeat,
/// carried by the claim, moves), and what it owes stays owed until the lock goes; then the
/// claims are released at once, not at the end of their 30 s lease.
#[tokio::test(flavor = "multi_thread")]
async fn settling_a_cut_round_does_not_wait_on_rows_still_locked() {
    let db = TestDb::new().await;
    let triggers: Vec<_> = (0..10)
        .map(|i| {
            serde_json::json!({ "id": format!("t{i:02}"), "task": "t", "cron": "* * * * * *",
                                "misfire_grace": "10s" })
        })
        .collect();
    db.publish(&crate::util::manifest(serde_json::json!(triggers)))
        .await;
    let proxy = WireProxy::start(Upstream::of(&crate::util::server()), 0).await;
    let client = db.client().await;
    let start_ms = now_ms(&client).await;
    let cut = replica(&through(&proxy, &db), "cut", "30s");
    eventually(Duration::from_secs(20), "every trigger fires", || async {
        triggers_fired_since(&client, start_ms).await >= 10
    })
    .await;
    proxy.cut_off_at_next_admission();
    eventually(Duration::from_secs(10), "a cut at an admission", || async {
        proxy.refusing()
    })
    .await;
    let held = claims_of(&client, "cut").await;
    assert!(!held.is_empty(), "the cut round held claims");
    let mut locker = db.client().await;
    let lock = locker.transaction().await.expect("begin");
    lock.execute(
        "SELECT 1 FROM trigger_schedules WHERE claim_owner = 'cut' FOR UPDATE",
        &[],
    )
    .await
    .expect("lock the cut round's rows");
    proxy.accept_connections();
    let accepted_ms = now_ms(&client).await;
    let heartbeat = || async {
        client
            .query_one(
                "SELECT heartbeat_at_ms FROM replicas WHERE owner = 'cut'",
                &[],
            )
            .await
            .map(|row| row.get::<_, i64>(0))
            .unwrap_or(0)
    };
    // Two bounds of 2 s (the wait, then the cancel's) and then some: rounds go on.
    eventually(
        Duration::from_secs(15),
        "a round beats after a settlement blocked by a lock",
        || async { heartbeat().await > accepted_ms + 6_000 },
    )
    .await;
    assert!(
        !claims_of(&client, "cut").await.is_empty(),
        "nothing was released while its rows were locked"
    );
    lock.commit().await.expect("unlock");
    let unlocked = Instant::now();
    eventually(
        Duration::from_secs(10),
        "the cut round's claims released",
        || async {
            let now = claims_of(&client, "cut").await;
            held.iter().filter(|claim| now.contains(claim)).count() == 0
        },
    )
    .await;
    let after_unlock = unlocked.elapsed();
    let log = cut.stop();
    eprintln!("drill: claims released {after_unlock:?} after the rows were unlocked");
    assert!(
        after_unlock <= Duration::from_secs(5),
        "released {after_unlock:?} after the unlock:\n{log}"
    );
    assert!(
        log.contains("settled on reconnecting"),
        "settled by the replica, not by the lease:\n{log}"
    );
    assert_invariants(&db).await;
}

/// The whole server hangs for a replica (the proxy between them stops relaying anything, either
/// way, and answers no new connection), not only its commits: every second, `/metrics`,
/// `/readyz` and `/healthz`, asked at once, each answer within the 2 s the docs promise for
/// the database's part (2.5 s with the HTTP round trip); `/readyz` turns 503 naming the database
/// that does not answer and `qlsched_ready` 0; `/healthz` stays 200 (docs/DECISIONS.md: liveness
/// is the timer, and restarting would not help). After the heal it is ready again and nothing
/// ran twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_hangs_whole_leaves_the_probes_answering_within_their_bound() {
    use crate::observe::{free_addr, get, sample, wait_for};

    let db = TestDb::new().await;
    db.publish(&every_second_triggers(5)).await;
    let client = db.client().await;
    let proxy = WireProxy::start(Upstream::of(&crate::util::server()), 0).await;
    let url = through(&proxy, &db);
    let addr = free_addr();
    let hung = crate::util::spawn_run(
        &url,
        &[
            "--owner",
            "hung",
            "--lease",
            "3s",
            "--cadence",
            "250ms",
            "--drain-timeout",
            "3s",
            "--metrics-addr",
            &addr,
        ],
    );
    wait_for(&addr, "/readyz", 200).await;
    let start_ms = now_ms(&client).await;
    eventually(
        Duration::from_secs(20),
        "the proxied replica admits",
        || async { runs_by(&client, "hung", start_ms).await > 0 },
    )
    .await;

    proxy.partition_now();
    let hung_at = Instant::now();
    // The fault landed: a session through the proxy gets no answer at all.
    let session = tokio::time::timeout(
        Duration::from_secs(2),
        tokio_postgres::connect(&url, tokio_postgres::NoTls),
    )
    .await;
    assert!(session.is_err(), "a session through the proxy was answered");

    let bound = Duration::from_millis(2_500);
    let timed = |path: &'static str| {
        let addr = addr.clone();
        async move {
            let asked = Instant::now();
            let answer = get(&addr, path).await.expect(path);
            (answer, asked.elapsed())
        }
    };
    let (mut slowest, mut not_ready) = (Duration::ZERO, 0);
    while hung_at.elapsed() < Duration::from_secs(12) {
        let (metrics, ready, health) =
            tokio::join!(timed("/metrics"), timed("/readyz"), timed("/healthz"));
        for (path, took) in [
            ("/metrics", metrics.1),
            ("/readyz", ready.1),
            ("/healthz", health.1),
        ] {
            assert!(took < bound, "{path} took {took:?} while the server hangs");
            slowest = slowest.max(took);
        }
        assert_eq!(metrics.0.0, 200, "/metrics: {}", metrics.0.1);
        assert_eq!(health.0.0, 200, "/healthz: {}", health.0.1);
        // Past the second the readiness is cached for, every answer is not-ready.
        if hung_at.elapsed() > Duration::from_secs(3) {
            assert_eq!(ready.0.0, 503, "/readyz: {}", ready.0.1);
            assert!(
                ready.0.1.contains("the database did not answer"),
                "/readyz: {}",
                ready.0.1
            );
            assert_eq!(sample(&metrics.0.1, "qlsched_ready"), 0.0);
            assert_eq!(sample(&metrics.0.1, "qlsched_healthy"), 1.0);
            not_ready += 1;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(not_ready >= 3, "{not_ready} probes past the cache");
    eprintln!(
        "drill: the whole server hung for 12 s: the slowest of /metrics, /readyz and /healthz \
         asked together answered in {slowest:?}"
    );

    proxy.heal();
    wait_for(&addr, "/readyz", 200).await;
    let healed_ms = now_ms(&client).await;
    eventually(
        Duration::from_secs(20),
        "the replica admits again",
        || async { runs_by(&client, "hung", healed_ms).await > 0 },
    )
    .await;
    let log = hung.stop();
    let counts = assert_invariants(&db).await;
    assert_eq!(counts.claims_held, 0, "{log}");
}
