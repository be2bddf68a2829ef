//! The command line as scripts meet it: configuration refused before any connection, secrets
//! never printed, the demo doing its job, signals ending a replica cleanly.

use crate::util::{TestDb, code, qlsched, server, stderr, stdout};

#[test]
fn run_checks_its_configuration_before_opening_any_connection() {
    // Port 1 on loopback refuses connections: had run connected first, this would be exit 69.
    let unreachable = "postgres://nobody@127.0.0.1:1/none";
    for (args, needle) in [
        (vec!["run", "--batch", "300"], "batch must be 1..=256"),
        (vec!["run", "--batch", "0"], "batch must be 1..=256"),
        (vec!["run", "--lease", "0s"], "lease"),
        (vec!["run", "--cadence", "2h"], "cadence"),
        (vec!["run", "--owner", ""], "owner"),
    ] {
        let mut full = vec!["-D", unreachable];
        full.extend(args.iter().copied());
        let output = qlsched(None, &full, None);
        assert_eq!(code(&output), 78, "{args:?}: {}", stderr(&output));
        assert!(
            stderr(&output).contains(needle),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(stdout(&output).is_empty());
    }
    let output = qlsched(None, &["-D", unreachable, "run", "--lease", "soon"], None);
    assert_eq!(code(&output), 2, "an unparsable duration is a usage error");
}

#[test]
fn an_unreachable_database_is_exit_69_and_the_password_is_never_printed() {
    let output = qlsched(
        None,
        &[
            "-D",
            "postgres://ops:s3cret-pw@127.0.0.1:1/prod",
            "migrate",
            "status",
        ],
        None,
    );
    assert_eq!(code(&output), 69, "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.starts_with("qlsched: database unavailable"),
        "{message}"
    );
    assert!(message.contains("ops@127.0.0.1:1/prod"), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
    assert_eq!(message.trim_end().lines().count(), 1);
}

#[test]
fn tls_is_refused_rather_than_downgraded() {
    let output = qlsched(
        None,
        &[
            "-D",
            "postgres://x@127.0.0.1/db?sslmode=require",
            "migrate",
            "status",
        ],
        None,
    );
    assert_eq!(code(&output), 78, "{}", stderr(&output));
    assert!(stderr(&output).contains("sslmode=require"));
}

#[tokio::test]
async fn the_demo_admits_runs_and_checks_them() {
    let name = format!("qlsched_demo_test_{}", std::process::id());
    let server_url = crate::util::server_url();
    let output = qlsched(
        None,
        &[
            "-D",
            &server_url,
            "demo",
            "--database",
            &name,
            "--duration",
            "5s",
        ],
        None,
    );
    qlsched::store::scratch::drop_database(&server(), &name)
        .await
        .expect("drop the demo database");
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let heartbeats = stdout(&output)
        .lines()
        .filter(|l| l.contains("acme/heartbeat"))
        .count();
    assert!(
        heartbeats >= 2,
        "heartbeat fires every 2 s: {}",
        stdout(&output)
    );
    let summary = stderr(&output);
    assert!(
        summary.contains(
            "duplicates 0, runs without one attempt 0, without two events 0, claims left 0"
        ),
        "{summary}"
    );
}

#[tokio::test]
async fn sigterm_stops_a_replica_with_exit_0_and_no_claim_left() {
    let db = TestDb::new().await;
    db.publish(&crate::util::manifest(
        serde_json::json!([{ "id": "a", "task": "t", "cron": "* * * * * *" }]),
    ))
    .await;
    let child = crate::util::spawn_run(&db.url(), &["--owner", "term", "--cadence", "100ms"]);
    while db.count("SELECT count(*) FROM runs").await < 2 {
        crate::util::sleep_ms(50).await;
    }
    let output = crate::util::terminate(child);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("signal=\"SIGTERM\""));
    let counts = crate::util::assert_invariants(&db).await;
    assert_eq!(counts.claims_held, 0);
}
