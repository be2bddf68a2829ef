//! The soak: replicas under random faults from the drills for minutes on end, then the
//! invariants and the figures. Ignored by the suite; run it with
//! `QLSCHED_SOAK_MINUTES=10 cargo test --release --test integration -- --ignored drills::soak`
//! (QLSCHED_SOAK_REPLICAS, default 3; QLSCHED_SOAK_TRIGGERS, default 100). Every replica talks
//! to a PostgreSQL the soak owns through a fault proxy of its own.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use super::processes::pick;
use super::{Replica, every_second_triggers, now_ms, replica, triggers_fired_since};
use crate::util::cluster::OwnServer;
use crate::util::wire::{Upstream, WireProxy};
use crate::util::{assert_invariants_on, code, eventually, qlsched, stderr};

const LEASE: &str = "3s";

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn signal(replica: &Replica, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &replica.pid().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success(), "kill -{name}");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "minutes long: run by hand (docs/RELIABILITY.md, the soak)"]
async fn soak() {
    let minutes = setting("QLSCHED_SOAK_MINUTES", 1);
    let replicas_wanted = usize::try_from(setting("QLSCHED_SOAK_REPLICAS", 3)).unwrap_or(3);
    let triggers = usize::try_from(setting("QLSCHED_SOAK_TRIGGERS", 100)).unwrap_or(100);
    let server = OwnServer::primary("soak");
    server
        .client("postgres")
        .await
        .batch_execute("CREATE DATABASE soak")
        .await
        .expect("create the soak's database");
    let url = server.url("soak");
    for args in [vec!["migrate"], vec!["publish", "-f", "-"]] {
        let mut full = vec!["-D", url.as_str()];
        full.extend(args);
        let manifest = every_second_triggers(triggers).to_string();
        let output = qlsched(None, &full, Some(&manifest));
        assert_eq!(code(&output), 0, "{}", stderr(&output));
    }
    let upstream = Upstream::Tcp("127.0.0.1".to_owned(), server.port);
    let mut proxies = Vec::new();
    for _ in 0..replicas_wanted {
        proxies.push(WireProxy::start(upstream.clone(), 0).await);
    }
    let urls: Vec<String> = proxies
        .iter()
        .map(|proxy| {
            format!(
                "host=127.0.0.1 port={} user=postgres dbname=soak sslmode=disable",
                proxy.addr.port()
            )
        })
        .collect();
    let owners: Vec<String> = (0..replicas_wanted).map(|i| format!("soak-{i}")).collect();
    let mut replicas: Vec<Replica> = (0..replicas_wanted)
        .map(|i| replica(&urls[i], &owners[i], LEASE))
        .collect();
    let client = server.client("soak").await;
    let start_ms = now_ms(&client).await;
    drop(client);
    let began = Instant::now();
    let mut faults: BTreeMap<&str, u32> = BTreeMap::new();
    while began.elapsed() < Duration::from_secs(minutes * 60) {
        tokio::time::sleep(Duration::from_millis(3000 + 1000 * pick(5) as u64)).await;
        let victim = pick(replicas_wanted);
        let kind = [
            "sigkill",
            "sigstop",
            "terminate",
            "partition",
            "latency",
            "reset",
            "lost-commit",
            "pg-restart",
        ][pick(8)];
        *faults.entry(kind).or_default() += 1;
        match kind {
            "sigkill" => {
                let restarted = replica(&urls[victim], &owners[victim], LEASE);
                std::mem::replace(&mut replicas[victim], restarted).kill();
            }
            "sigstop" => {
                signal(&replicas[victim], "STOP");
                tokio::time::sleep(Duration::from_secs(7)).await;
                signal(&replicas[victim], "CONT");
            }
            "terminate" => {
                server
                    .client("postgres")
                    .await
                    .batch_execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                         WHERE datname = 'soak' AND pid <> pg_backend_pid()",
                    )
                    .await
                    .expect("terminate backends");
            }
            "partition" => {
                proxies[victim].partition_at_next_admission();
                tokio::time::sleep(Duration::from_secs(5)).await;
                proxies[victim].heal();
            }
            "latency" => {
                proxies[victim].set_latency(Duration::from_millis(50));
                tokio::time::sleep(Duration::from_secs(5)).await;
                proxies[victim].set_latency(Duration::ZERO);
            }
            "reset" => proxies[victim].reset_next_admissions(1),
            "lost-commit" => proxies[victim].cut_next_commits(1),
            _ => server.restart("fast"),
        }
    }
    for proxy in &proxies {
        proxy.heal();
        proxy.set_latency(Duration::ZERO);
        proxy.pass_everything();
        proxy.reset_next_admissions(0);
    }
    let client = server.client("soak").await;
    let calm_ms = now_ms(&client).await;
    let calm = Instant::now();
    eventually(
        Duration::from_secs(30),
        "every trigger fires after the soak",
        || async { triggers_fired_since(&client, calm_ms).await >= triggers as i64 },
    )
    .await;
    let recovered = calm.elapsed();
    let mut summaries = Vec::new();
    for replica in replicas {
        let log = replica.stop();
        summaries.extend(
            log.lines()
                .filter(|line| line.contains("summary"))
                .map(str::to_owned),
        );
    }
    let counts = assert_invariants_on(&client).await;
    assert_eq!(counts.claims_held, 0);
    let row = client
        .query_one(
            "SELECT count(*),
                    coalesce(avg(created_at_ms - scheduled_for_ms), 0)::bigint,
                    coalesce(percentile_disc(0.99) WITHIN GROUP
                        (ORDER BY created_at_ms - scheduled_for_ms), 0),
                    coalesce(max(created_at_ms - scheduled_for_ms), 0),
                    (SELECT count(*) FROM misfires)
             FROM runs WHERE created_at_ms > $1",
            &[&start_ms],
        )
        .await
        .expect("figures");
    let (runs, average, p99, max, misfires): (i64, i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    eprintln!(
        "soak: {minutes} min, {replicas_wanted} replicas, {triggers} every-second triggers, \
         {LEASE} lease; faults {faults:?}; {runs} runs, 0 duplicates, 0 gaps, {misfires} misfire \
         records; lag average {average} ms, p99 {p99} ms, max {max} ms; every trigger firing \
         {recovered:?} after the last fault\nsummaries:\n{}",
        summaries.join("\n")
    );
}
