//! Fault drills on the wire: a replica process whose admission COMMIT reached the server and
//! committed, and whose reply was withheld and its connection cut, reports what happened as it
//! is (the admissions it counts are the runs in the database), gives nothing twice, and goes on.
//! Ends on the suite's invariants, occurrence accounting included.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::util::wire::{Upstream, WireProxy};
use crate::util::{
    TestDb, assert_invariants, eventually, manifest, sleep_ms, spawn_run, terminate,
};

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
    let triggers: Vec<_> = (0..20)
        .map(|i| json!({ "id": format!("t{i:02}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
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
