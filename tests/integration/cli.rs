//! The command line as scripts meet it: configuration refused before any connection, secrets
//! never printed, the demo doing its job, signals ending a replica cleanly.

use crate::util::{TestDb, code, qlsched, server, stderr, stdout};

/// A flag value out of range is a usage error (2), whichever flag; the same value from the
/// environment is a configuration error (78) naming the variable. Both before any connection.
#[test]
fn run_checks_its_configuration_before_opening_any_connection() {
    // Port 1 on loopback refuses connections: had run connected first, this would be exit 69.
    let unreachable = "postgres://nobody@127.0.0.1:1/none";
    let from_env = |variable: &str, value: &str, args: &[&str]| {
        std::process::Command::new(crate::util::bin())
            .args(["-D", unreachable])
            .args(args)
            .env(variable, value)
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run qlsched")
    };
    let output = from_env("QLSCHED_OWNER", "", &["run"]);
    assert_eq!(code(&output), 78, "{}", stderr(&output));
    assert!(stderr(&output).contains("QLSCHED_OWNER (from the environment)"));
    let output = from_env("QLSCHED_SCHEMA", "Bad", &["run"]);
    assert_eq!(code(&output), 78, "{}", stderr(&output));
    assert!(
        stderr(&output).contains("QLSCHED_SCHEMA (from the environment): invalid schema name"),
        "{}",
        stderr(&output)
    );
    let output = from_env(
        "QLSCHED_SCHEMA",
        "Bad",
        &["--schema", "good", "run", "--batch", "0"],
    );
    assert_eq!(
        code(&output),
        2,
        "the flag wins over the variable: {}",
        stderr(&output)
    );
    for (args, needle) in [
        (vec!["run", "--batch", "300"], "300 is not in 1..=256"),
        (vec!["run", "--batch", "0"], "0 is not in 1..=256"),
        (vec!["run", "--lease", "0s"], "--lease must be 1s..=1h"),
        (
            vec!["run", "--cadence", "2h"],
            "--cadence must be 10ms..=1h",
        ),
        (vec!["run", "--owner", ""], "--owner must be"),
        (
            vec!["--schema", "Bad", "run"],
            "--schema: invalid schema name",
        ),
        (vec!["bench", "--batch", "0"], "0 is not in 1..=256"),
        (
            vec!["bench", "--ceiling-time", "1ms"],
            "ceiling time must be",
        ),
    ] {
        let mut full = vec!["-D", unreachable];
        full.extend(args.iter().copied());
        let output = qlsched(None, &full, None);
        assert_eq!(code(&output), 2, "{args:?}: {}", stderr(&output));
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

/// `--forget-stale-after` out of range (or unparsable) is a usage error (2) from the command
/// line and a configuration error (78) naming `QLSCHED_FORGET_STALE_AFTER` from the environment,
/// both before any connection; a valid variable lets the run go on to connect (and fail there).
#[test]
fn a_bad_forget_stale_after_from_the_environment_is_a_configuration_error() {
    let unreachable = "postgres://nobody@127.0.0.1:1/none";
    let run = |args: &[&str], value: Option<&str>| {
        let mut command = std::process::Command::new(crate::util::bin());
        command
            .args(["-D", unreachable, "run"])
            .args(args)
            .env_remove("QLSCHED_FORGET_STALE_AFTER")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null());
        if let Some(value) = value {
            command.env("QLSCHED_FORGET_STALE_AFTER", value);
        }
        command.output().expect("run qlsched")
    };
    for value in ["10s", "8d", "a week"] {
        let output = run(&[], Some(value));
        assert_eq!(code(&output), 78, "{value}: {}", stderr(&output));
        assert!(
            stderr(&output).contains("QLSCHED_FORGET_STALE_AFTER (from the environment)"),
            "{value}: {}",
            stderr(&output)
        );
    }
    for value in ["10s", "soon"] {
        let output = run(&["--forget-stale-after", value], None);
        assert_eq!(code(&output), 2, "{value}: {}", stderr(&output));
        assert!(
            stderr(&output).contains("--forget-stale-after"),
            "{value}: {}",
            stderr(&output)
        );
    }
    let output = run(&["--forget-stale-after", "1h"], Some("10s"));
    assert_eq!(code(&output), 69, "the flag wins: {}", stderr(&output));
    let output = run(&[], Some("1h"));
    assert_eq!(code(&output), 69, "{}", stderr(&output));
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

/// A setting that cannot be honoured is refused before any connection, never downgraded.
#[test]
fn unusable_tls_settings_are_refused_rather_than_downgraded() {
    for (url, needle) in [
        (
            "postgres://x@127.0.0.1/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            "root certificate file \"/nonexistent/ca.pem\" does not exist",
        ),
        (
            "postgres://x@127.0.0.1/db?sslmode=require&sslrootcert=system",
            "weak sslmode \"require\"",
        ),
        (
            "postgres://x@127.0.0.1/db?sslmode=sometimes",
            "sslmode=\"sometimes\"",
        ),
    ] {
        let output = qlsched(None, &["-D", url, "migrate", "status"], None);
        assert_eq!(code(&output), 78, "{url}: {}", stderr(&output));
        assert!(
            stderr(&output).contains(needle),
            "{url}: {}",
            stderr(&output)
        );
    }
}

/// `qlsched -D SERVER demo --database NAME --duration DURATION`.
fn demo(server_url: &str, name: &str, duration: &str) -> std::process::Output {
    qlsched(
        None,
        &[
            "-D",
            server_url,
            "demo",
            "--database",
            name,
            "--duration",
            duration,
        ],
        None,
    )
}

#[tokio::test]
async fn the_demo_admits_runs_and_checks_them() {
    let name = format!("qlsched_demo_test_{}", std::process::id());
    let server_url = crate::util::server_url();
    // 8 s: initializing fires nothing, the first `*/2` heartbeat may be 2 s off, and a loaded
    // machine's first round may be slow; two heartbeats still fit.
    let output = demo(&server_url, &name, "8s");
    let made = crate::util::database_comment(&name).await;
    // The hint the demo prints works as it is.
    let summary = stderr(&output);
    let hint = summary
        .split_once("-D '")
        .and_then(|(_, rest)| rest.split_once("' inspect"))
        .map(|(conninfo, _)| conninfo.to_owned())
        .unwrap_or_else(|| panic!("no -D hint: {summary}"));
    let inspect = qlsched(None, &["-D", &hint, "inspect"], None);
    assert_eq!(code(&inspect), 0, "{hint}: {}", stderr(&inspect));
    // A database the demo made is the demo's to recreate.
    let again = demo(&server_url, &name, "1s");
    qlsched::bench::scratch::drop_database(&server(), &name)
        .await
        .expect("drop the demo database");
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(
        made,
        Some(Some(qlsched::cli::DEMO_MARK.to_owned())),
        "the demo made and marked the database --database names"
    );
    assert_eq!(code(&again), 0, "{}", stderr(&again));
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
    assert!(
        summary.contains(&format!("the database {name} is kept for a look")),
        "the demo says it leaves its database: {summary}"
    );
}

/// The demo drops and recreates its database: a database it did not make is refused, exit 2,
/// and left as it was.
#[tokio::test]
async fn the_demo_never_drops_a_database_it_did_not_make() {
    let db = TestDb::new().await;
    let before = crate::util::fingerprint(&db).await;
    let output = demo(&crate::util::server_url(), &db.name, "1s");
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains(&format!(
            "database {} exists and was not made by `qlsched demo`",
            db.name
        )),
        "{message}"
    );
    assert_eq!(message.trim_end().lines().count(), 1, "{message}");
    assert_eq!(crate::util::fingerprint(&db).await, before);
    let output = qlsched(None, &["demo", "--database", "Prod-DB"], None);
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    assert!(stderr(&output).contains("'Prod-DB' for '--database"));
    let output = qlsched(None, &["demo", "-o", "json"], None);
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    assert!(stderr(&output).contains("has no JSON output"));
}

/// A signal while the replica is still connecting ends it with exit 0 and nothing claimed, not by
/// the signal's default action. The "server" accepts the connection and never answers, so the
/// replica is held in its start for as long as the test likes.
#[tokio::test]
async fn sigterm_while_starting_stops_cleanly() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/none",
        silent.local_addr().expect("port").port()
    );
    let child = crate::util::spawn_run(&url, &["--owner", "early"]);
    let (_held, _) = tokio::time::timeout(std::time::Duration::from_secs(20), silent.accept())
        .await
        .expect("the replica connects")
        .expect("accept");
    let output = crate::util::terminate(child);
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{log}");
    assert!(
        log.contains("stopped while starting: nothing was claimed"),
        "{log}"
    );
    assert!(!log.contains("replica started"), "{log}");
}

#[tokio::test]
async fn sigterm_stops_a_replica_with_exit_0_and_no_claim_left() {
    let db = TestDb::new().await;
    db.publish(&crate::util::manifest(
        serde_json::json!([{ "id": "a", "task": "t", "cron": "* * * * * *" }]),
    ))
    .await;
    let child = crate::util::spawn_run(&db.url(), &["--owner", "term", "--cadence", "100ms"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.count("SELECT count(*) FROM runs").await < 2 {
        if std::time::Instant::now() > deadline {
            let output = crate::util::terminate(child);
            panic!("the replica admitted nothing: {}", stderr(&output));
        }
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

/// `qlsched ... | head`: a closed standard output ends the command quietly with status 0, help
/// and version included. The pipe's read end is closed before the child starts, so every write
/// fails with EPIPE.
#[tokio::test]
async fn a_closed_stdout_ends_quietly_with_status_0() {
    let db = TestDb::new().await;
    db.publish(&crate::util::every_second(&["a", "b"])).await;
    for args in [
        vec!["--help"],
        vec!["--version"],
        vec!["help", "inspect"],
        vec!["-D", &db.url(), "inspect", "schedules"],
        vec!["-D", &db.url(), "inspect", "schedules", "-o", "json"],
    ] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let output = std::process::Command::new(crate::util::bin())
            .args(&args)
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("run qlsched");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(output.stderr.is_empty(), "{args:?}: {}", stderr(&output));
    }
}

/// A server that asks for a password when none was given is an authentication failure (77), not
/// an unavailable database (69) that a supervisor would retry forever. The "server" refuses TLS
/// and answers the startup message with AuthenticationCleartextPassword.
#[tokio::test]
async fn a_password_the_server_asks_for_and_nobody_gave_is_exit_77() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let port = server.local_addr().expect("port").port();
    let asking = tokio::spawn(async move {
        while let Ok((mut socket, _)) = server.accept().await {
            let mut startup = [0u8; 512];
            let read = socket.read(&mut startup).await.unwrap_or(0);
            // As a server without TLS: an SSLRequest (sslmode=prefer, the default) gets 'N',
            // then the startup message follows.
            if startup[..read] == [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f] {
                let _ = socket.write_all(b"N").await;
                let _ = socket.read(&mut startup).await;
            }
            let _ = socket.write_all(b"R\0\0\0\x08\0\0\0\x03").await;
            let _ = socket.flush().await;
            let _ = socket.read(&mut startup).await;
        }
    });
    let url = format!("postgres://nobody@127.0.0.1:{port}/db");
    let output = tokio::task::spawn_blocking(move || qlsched(None, &["-D", &url, "inspect"], None))
        .await
        .expect("qlsched");
    asking.abort();
    assert_eq!(code(&output), 77, "{}", stderr(&output));
    assert!(
        stderr(&output).contains("asks for a password and none was given"),
        "{}",
        stderr(&output)
    );
}

/// Every subcommand's help lists its own options first and the global ones (`-D`, `--schema`,
/// `-o`, `--color`) under a heading of their own, not in between.
#[test]
fn every_subcommand_groups_the_global_options_under_their_own_heading() {
    fn check(command: &mut clap::Command, path: &str) {
        let help = command.render_help().to_string();
        let (own, global) = help
            .split_once("Global options:")
            .unwrap_or_else(|| panic!("{path}: no Global options heading:\n{help}"));
        for flag in ["--schema", "--database-url", "--output", "--color"] {
            assert!(
                !own.contains(flag),
                "{path}: {flag} among its own options:\n{help}"
            );
            assert!(global.contains(flag), "{path}: {flag} missing:\n{help}");
        }
        let names: Vec<String> = command
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            .map(|s| s.get_name().to_owned())
            .collect();
        for name in names {
            if let Some(sub) = command.find_subcommand_mut(&name) {
                check(sub, &format!("{path} {name}"));
            }
        }
    }
    let mut root = qlsched::cli::command();
    root.build();
    check(&mut root, "qlsched");
}
