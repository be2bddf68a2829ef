//! Behind PgBouncer (the distribution's, at its default settings but for the pool mode and a pool
//! of three server connections, so that clients share them): in session and in transaction mode,
//! replicas admit while every operator command runs through the same pooler, an `inspect` never
//! stops a replica, and the promises hold at the end; and in transaction mode with `--pooler`
//! forgotten, every command and replica refuses (78) and `migrate` writes nothing outside its
//! schema; in session mode with a pool of one server connection, the look for a transaction
//! pooler waits no longer than `connect_timeout` and the command goes on (docs/OPERATIONS.md,
//! "Behind a connection pooler").

use std::process::Output;
use std::time::{Duration, Instant};

use crate::util::pgbouncer::PgBouncer;
use crate::util::{
    TestDb, assert_invariants, code, every_second, qlsched_at, sleep_ms, spawn_run, stderr, stdout,
};

/// `qlsched -D URL ARGS` with `--pooler MODE` given by its environment variable, as a deployment
/// would set it once for every command.
fn through(url: &str, mode: &str, args: &[&str], stdin: Option<&str>) -> Output {
    qlsched_at(Some(url), &[("QLSCHED_POOLER", mode)], args, stdin)
}

fn ok(output: &Output, what: &str, bouncer: &PgBouncer) -> String {
    assert_eq!(
        code(output),
        0,
        "{what}: {}\n{}\npgbouncer: {}",
        stdout(output),
        stderr(output),
        bouncer.log()
    );
    stdout(output)
}

async fn drill(mode: &str) {
    let db = TestDb::new().await;
    let bouncer = PgBouncer::start(&db, mode);
    let url = bouncer.url(&db);

    // `migrate` holds a session's advisory lock: through a transaction pooler it refuses (78)
    // before it connects; through a session pooler it runs (the schema is already migrated).
    let migrated = through(&url, mode, &["migrate"], None);
    if mode == "transaction" {
        assert_eq!(code(&migrated), 78, "{}", stderr(&migrated));
        assert!(
            stderr(&migrated).contains("--pooler transaction"),
            "{}",
            stderr(&migrated)
        );
    } else {
        ok(&migrated, "migrate", &bouncer);
    }
    let manifest = every_second(&["a", "b", "c", "d"]).to_string();
    ok(
        &through(&url, mode, &["publish", "-f", "-"], Some(&manifest)),
        "publish",
        &bouncer,
    );

    // Two replicas through the pooler, their sessions sharing its three server connections.
    let replicas: Vec<_> = ["pooled-1", "pooled-2"]
        .iter()
        .map(|owner| spawn_run(&url, &["--owner", owner, "--pooler", mode]))
        .collect();
    let client = db.client().await;
    crate::util::eventually_count(&db, Duration::from_secs(20), "SELECT count(*) FROM runs", 8)
        .await;

    // Every operator command through the same pooler while the replicas admit.
    let started = Instant::now();
    let views: &[&[&str]] = &[
        &["inspect"],
        &["inspect", "schedules"],
        &["inspect", "claims"],
        &["inspect", "runs", "--limit", "5"],
        &["inspect", "replicas"],
        &["inspect", "trigger", "p/a"],
        &["inspect", "audit"],
        &["inspect", "misfires"],
        &["inspect", "recovery"],
        &["inspect", "invariants", "--since", "1h"],
        &["migrate", "status"],
        &["claim", "--dry-run", "--owner", "someone"],
        &["claim", "--owner", "someone", "--release"],
        &["fire", "p/a", "--yes"],
        &["pause", "p/b", "--yes", "--reason", "drill"],
        &["resume", "p/b", "--yes"],
        &["expire", "--owner", "no-such-owner", "--yes"],
    ];
    let now_ms = |back_ms: u128| {
        (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis()
            - back_ms)
            .to_string()
    };
    // Round after round for 20 s at least, so the replicas admit beside them a while.
    let mut round = 0;
    while round < 2 || started.elapsed() < Duration::from_secs(20) {
        round += 1;
        for args in views {
            let output = through(&url, mode, args, None);
            let what = format!("round {round}: qlsched {}", args.join(" "));
            // `expire --owner` of an owner never seen says so (exit 4), and a claim may find nothing
            // the replicas left unclaimed (exit 5); the rest succeed.
            if args[0] == "expire" || args[0] == "claim" {
                assert!(
                    [0, if args[0] == "claim" { 5 } else { 4 }].contains(&code(&output)),
                    "{what}: {}",
                    stderr(&output)
                );
            } else {
                ok(&output, &what, &bouncer);
            }
        }
        ok(
            &through(
                &url,
                mode,
                &["publish", "-f", "-", "--dry-run"],
                Some(&manifest),
            ),
            "publish --dry-run",
            &bouncer,
        );
        let (from, to) = (now_ms(10_000), now_ms(5_000));
        let backfill = ["backfill", "p/c", "--from", &from, "--to", &to, "--dry-run"];
        ok(
            &through(&url, mode, &backfill, None),
            "backfill --dry-run",
            &bouncer,
        );
    }
    // The replicas kept admitting all along: every second's occurrences of the time the commands
    // took have runs, and no round failed.
    // The replicas kept admitting all along: each trigger the commands do not pause has a run for
    // every second from its first to its last (no gap while the commands ran), the last one now,
    // and no round failed. (p/b's paused seconds are a misfire record each time it resumes.)
    sleep_ms(2_000).await;
    let took = started.elapsed();
    let rows = client
        .query(
            "SELECT trigger_id, count(*), (max(scheduled_for_ms) - min(scheduled_for_ms)) / 1000 + 1,
                    now_ms() - max(scheduled_for_ms)
             FROM runs WHERE origin = 'cron' AND trigger_id <> 'b'
             GROUP BY trigger_id ORDER BY trigger_id",
            &[],
        )
        .await
        .expect("runs");
    let logs: Vec<String> = replicas.into_iter().map(|r| r.stop()).collect();
    assert_eq!(rows.len(), 3, "every trigger admitted: {logs:?}");
    for row in &rows {
        let (trigger, runs, seconds, behind): (String, i64, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        assert_eq!(
            runs, seconds,
            "p/{trigger}: {runs} runs over {seconds} seconds while the commands ran ({took:?}): \
             {logs:?}"
        );
        assert!(
            behind < 3_000,
            "p/{trigger}: its last run is {behind} ms old: {logs:?}"
        );
    }
    let failed: i64 = client
        .query_one(
            "SELECT coalesce(sum(failed_rounds), 0)::int8 FROM replicas",
            &[],
        )
        .await
        .expect("failed rounds")
        .get(0);
    assert_eq!(failed, 0, "rounds failed behind the pooler: {logs:?}");
    // The promises, read through the pooler and directly.
    let report = ok(
        &through(
            &url,
            mode,
            &["--output", "json", "inspect", "invariants", "--since", "1h"],
            None,
        ),
        "inspect invariants",
        &bouncer,
    );
    let report: serde_json::Value = serde_json::from_str(&report).expect("invariants JSON");
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["counts"]["duplicate_occurrences"], 0, "{report}");
    assert_invariants(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_pgbouncer_in_transaction_mode_replicas_admit_and_every_command_works() {
    drill("transaction").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_pgbouncer_in_session_mode_replicas_admit_and_every_command_works() {
    drill("session").await;
}

/// What the database holds outside the schema: relations, types, functions and schemas other than
/// the system's, the public schema's own entry aside.
const OUTSIDE_THE_SCHEMA: &str = "SELECT
    (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname NOT IN ('qlsched', 'pg_catalog', 'information_schema', 'pg_toast'))
  + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname NOT IN ('qlsched', 'pg_catalog', 'information_schema'))
  + (SELECT count(*) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname NOT IN ('qlsched', 'pg_catalog', 'information_schema', 'pg_toast'))
  + (SELECT count(*) FROM pg_namespace
        WHERE nspname NOT IN ('qlsched', 'public', 'pg_catalog', 'information_schema', 'pg_toast')
          AND nspname NOT LIKE 'pg_temp_%' AND nspname NOT LIKE 'pg_toast_temp_%')";

/// `qlsched -D URL ARGS` with no `--pooler` (and none in the environment): the forgotten setting.
fn forgetting(url: &str, args: &[&str]) -> Output {
    qlsched_at(Some(url), &[], args, None)
}

/// Refused as a transaction-mode pooler qlsched was not told of: exit 78, naming the setting.
fn refused_for_the_setting(output: &Output, what: &str, bouncer: &PgBouncer) {
    assert_eq!(
        code(output),
        78,
        "{what}: {}\n{}\npgbouncer: {}",
        stdout(output),
        stderr(output),
        bouncer.log()
    );
    assert!(
        stderr(output).contains("--pooler transaction")
            && stderr(output).contains("a connection pooler in transaction mode"),
        "{what}: {}",
        stderr(output)
    );
}

/// Behind PgBouncer in transaction mode with `--pooler` forgotten: `migrate` on a fresh database,
/// three at once and three times over, never creates anything outside the schema and exits 78
/// naming `--pooler`; a replica and `claim` exit 78 with the same message and write nothing; what
/// replicas connected directly admit afterwards is there once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_pgbouncer_in_transaction_mode_a_forgotten_setting_is_refused_and_corrupts_nothing()
{
    let db = TestDb::empty().await;
    let bouncer = PgBouncer::start(&db, "transaction");
    let url = bouncer.url(&db);
    let admin = db.client().await;
    for round in 1..=3 {
        let migrators: Vec<_> = (0..3)
            .map(|_| {
                let url = url.clone();
                std::thread::spawn(move || forgetting(&url, &["migrate"]))
            })
            .collect();
        for (index, migrator) in migrators.into_iter().enumerate() {
            let output = migrator.join().expect("a migrate");
            refused_for_the_setting(
                &output,
                &format!("round {round}, migrate {index}"),
                &bouncer,
            );
        }
        let outside: i64 = admin
            .query_one(OUTSIDE_THE_SCHEMA, &[])
            .await
            .expect("objects outside the schema")
            .get(0);
        assert_eq!(outside, 0, "round {round}: objects outside the schema");
    }

    // Migrated directly, as the docs say; then the replica and `claim` through the pooler.
    let migrated = qlsched_at(Some(&db.url()), &[], &["migrate"], None);
    assert_eq!(code(&migrated), 0, "{}", stderr(&migrated));
    let manifest = every_second(&["a", "b"]).to_string();
    let published = qlsched_at(
        Some(&db.url()),
        &[],
        &["publish", "-f", "-"],
        Some(&manifest),
    );
    assert_eq!(code(&published), 0, "{}", stderr(&published));
    let started = Instant::now();
    let mut replica = spawn_run(&url, &["--owner", "forgot"]);
    let exited = loop {
        if let Some(status) = replica.try_wait().expect("the replica's status") {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the replica without the setting kept running"
        );
        sleep_ms(100).await;
    };
    let log = crate::util::Reap::reap(replica);
    assert_eq!(exited.code(), Some(78), "{}", stderr(&log));
    refused_for_the_setting(&log, "the replica", &bouncer);
    let claim = forgetting(&url, &["claim", "--owner", "someone", "--yes"]);
    refused_for_the_setting(&claim, "claim", &bouncer);
    let fire = forgetting(&url, &["fire", "p/a", "--yes"]);
    refused_for_the_setting(&fire, "fire", &bouncer);
    assert_eq!(
        db.count("SELECT count(*) FROM runs").await,
        0,
        "nothing admitted"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claim_owner IS NOT NULL")
            .await,
        0,
        "nothing claimed"
    );

    // Nothing lost or doubled: a replica connected directly admits every second, once.
    let direct = spawn_run(&db.url(), &["--owner", "direct"]);
    crate::util::eventually_count(&db, Duration::from_secs(20), "SELECT count(*) FROM runs", 6)
        .await;
    direct.stop();
    assert_invariants(&db).await;
}

/// Behind PgBouncer in session mode with a pool of one server connection, at its default
/// `query_wait_timeout` (120 s), `--pooler` not given: the first session of a command takes the
/// one server connection, and the second session of the look for a transaction pooler waits for
/// another that never comes. The look waits `connect_timeout` (2 s here) and no longer, says at
/// WARN that it could not tell, and the command goes on and answers. The fault landed: the look
/// waited its whole bound, which the same command told `--pooler session` (no look) does not.
#[tokio::test]
async fn through_a_full_session_pooler_the_look_for_a_transaction_pooler_waits_connect_timeout() {
    let db = TestDb::new().await;
    let bouncer = PgBouncer::start_with_pool(&db, "session", 1);
    let url = format!("{}?connect_timeout=2", bouncer.url(&db));

    let started = Instant::now();
    let looked = forgetting(&url, &["inspect", "replicas", "-o", "json"]);
    let took = started.elapsed();
    assert_eq!(
        code(&looked),
        0,
        "{}\npgbouncer: {}",
        stderr(&looked),
        bouncer.log()
    );
    assert_eq!(stdout(&looked).trim(), "[]", "the view answered");
    let warned = stderr(&looked);
    assert!(
        warned.contains("could not tell whether a connection pooler in transaction mode")
            && warned.contains("a second session got no answer within 2s (connect_timeout)")
            && warned.contains("WARN"),
        "{warned}"
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(20),
        "the look waited {took:?}: its bound is 2 s, PgBouncer's own 120 s"
    );

    // Told the pooler's mode, the command makes no look: it neither waits nor warns.
    let started = Instant::now();
    let told = through(
        &url,
        "session",
        &["inspect", "replicas", "-o", "json"],
        None,
    );
    let took_told = started.elapsed();
    ok(&told, "inspect replicas with --pooler session", &bouncer);
    assert!(
        !stderr(&told).contains("could not tell"),
        "{}",
        stderr(&told)
    );
    assert!(
        took_told < Duration::from_secs(2),
        "without the look it took {took_told:?}"
    );
}
