//! Fault drills (docs/RELIABILITY.md): real replica processes and a real PostgreSQL under one
//! fault each, every drill ending on the suite's invariants, occurrence accounting included, and
//! printing its recovery time. Here: a replica process whose admission COMMIT reached the server
//! and committed, and whose reply was withheld and its connection cut, reports what happened as
//! it is (the admissions it counts are the runs in the database), gives nothing twice, and goes
//! on. On the wire (`wire`): a partition longer than the lease, added latency, resets. Processes
//! (`processes`): a SIGKILL storm with restarts. Servers the drill owns (`servers`): a restart,
//! a physical promotion with a claim held across it. The soak (`soak`) runs them at random.

mod poison;
mod processes;
mod servers;
mod soak;
mod wire;

use std::time::{Duration, Instant};

use serde_json::json;

use crate::util::wire::{Upstream, WireProxy};
use crate::util::{
    TestDb, assert_invariants, eventually, manifest, sleep_ms, spawn_run, terminate,
};

/// A manifest of `n` triggers `t00`, `t01`, ... firing every second.
pub fn every_second_triggers(n: usize) -> serde_json::Value {
    let triggers: Vec<_> = (0..n)
        .map(|i| json!({ "id": format!("t{i:02}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    manifest(json!(triggers))
}

/// A drill's replica process (killed, its log shown, should the drill fail before stopping it).
pub type Replica = crate::util::ReplicaProcess;

/// Starts a replica with `owner` and a short `lease` (a 250 ms cadence, a 3 s drain): the
/// drills' replicas.
pub fn replica(url: &str, owner: &str, lease: &str) -> Replica {
    spawn_run(
        url,
        &[
            "--owner",
            owner,
            "--lease",
            lease,
            "--cadence",
            "250ms",
            "--drain-timeout",
            "3s",
        ],
    )
}

/// The database's clock now, in milliseconds (leases and runs are in database time).
pub async fn now_ms(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one("SELECT now_ms()", &[])
        .await
        .expect("now_ms()")
        .get(0)
}

/// How many of the `n` triggers have a run created after `since_ms` (database time).
pub async fn triggers_fired_since(client: &tokio_postgres::Client, since_ms: i64) -> i64 {
    client
        .query_one(
            "SELECT count(DISTINCT trigger_id) FROM runs WHERE created_at_ms > $1",
            &[&since_ms],
        )
        .await
        .expect("triggers fired since")
        .get(0)
}

/// Runs created by `owner`'s admissions (their `run.created` event names the claim owner).
pub async fn runs_by(client: &tokio_postgres::Client, owner: &str, since_ms: i64) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM run_events
             WHERE type = 'run.created' AND payload->>'claim_owner' = $1 AND at_ms > $2",
            &[&owner, &since_ms],
        )
        .await
        .expect("runs by owner")
        .get(0)
}

/// Lag of the runs created after `since_ms`: (average, maximum) of created minus scheduled, ms.
pub async fn lag_since(client: &tokio_postgres::Client, since_ms: i64) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT coalesce(avg(created_at_ms - scheduled_for_ms), 0)::bigint,
                    coalesce(max(created_at_ms - scheduled_for_ms), 0)
             FROM runs WHERE created_at_ms > $1",
            &[&since_ms],
        )
        .await
        .expect("lag");
    (row.get(0), row.get(1))
}

/// The `admitted=` counts of a replica's summary lines, added up.
fn reported_admissions(log: &str) -> i64 {
    log.lines()
        .filter(|line| line.contains("summary"))
        .filter_map(|line| {
            line.split_whitespace()
                .find_map(|field| field.strip_prefix("admitted="))
                .and_then(|n| n.parse::<i64>().ok())
        })
        .sum()
}

#[tokio::test]
async fn a_commit_whose_reply_is_lost_is_reported_as_admitted_and_never_duplicated() {
    let db = TestDb::new().await;
    db.publish(&every_second_triggers(20)).await;
    let proxy = WireProxy::start(Upstream::of(&crate::util::server()), 3).await;
    let url = format!(
        "postgres://postgres@{}/{}?sslmode=disable",
        proxy.addr, db.name
    );
    let replica = spawn_run(
        &url,
        &[
            "--owner",
            "drill",
            "--lease",
            "3s",
            "--cadence",
            "250ms",
            "--drain-timeout",
            "5s",
        ],
    );
    let started = Instant::now();
    eventually(
        Duration::from_secs(30),
        "three COMMIT replies withheld",
        || async { proxy.cuts_done() >= 3 },
    )
    .await;
    let cut_at = started.elapsed();
    proxy.pass_everything();
    // Back at work after the cuts: every trigger admitted again since.
    let since = db.count("SELECT now_ms()").await;
    eventually(
        Duration::from_secs(15),
        "every trigger admitted after the cuts",
        || async {
            db.count(&format!(
                "SELECT count(DISTINCT trigger_id) FROM runs WHERE created_at_ms > {since}"
            ))
            .await
                >= 20
        },
    )
    .await;
    let recovered_in = started.elapsed() - cut_at;
    sleep_ms(500).await;
    let output = terminate(replica);
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{log}");

    let in_database = db
        .count(
            "SELECT count(*) FROM run_events
             WHERE type = 'run.created' AND payload->>'claim_owner' = 'drill'",
        )
        .await;
    assert_eq!(
        reported_admissions(&log),
        in_database,
        "what the replica reports is what it committed, lost replies included:\n{log}"
    );
    assert!(
        log.contains("learnt on a fresh connection"),
        "the lost replies were settled, not guessed:\n{log}"
    );
    let counts = assert_invariants(&db).await;
    assert_eq!(counts.claims_held, 0, "{log}");
    eprintln!("drill: 3 COMMIT replies lost; every trigger firing again {recovered_in:?} later");
}
