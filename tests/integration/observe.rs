//! `run --metrics-addr` and `--log-format json`, scraped and read as an operator's tools would:
//! a real `qlsched run` process, plain HTTP over a TCP socket, and its stderr line by line
//! (docs/OPERATIONS.md, "Metrics and probes" and "Logs").

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::util::{TestDb, bin, every_second, sleep_ms, spawn_run, terminate};

/// A port nothing listens on right now.
pub(crate) fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    drop(listener);
    addr
}

/// `GET path` over a plain TCP connection: the status and the body.
pub(crate) async fn get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .map_err(|_| std::io::Error::other("no answer within 10 s"))??;
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_owned()))
}

/// Polls `path` until it answers `status`, for up to 30 s.
pub(crate) async fn wait_for(addr: &str, path: &str, status: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match get(addr, path).await {
            Ok((got, body)) if got == status => return body,
            other if Instant::now() > deadline => {
                panic!("{path} never answered {status}; last: {other:?}")
            }
            _ => sleep_ms(100).await,
        }
    }
}

/// The value of one sample (`name` with its labels, as written) in an exposition.
pub(crate) fn sample(exposition: &str, name: &str) -> f64 {
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {name} in\n{exposition}"))
}

/// `promtool check metrics` on a real scrape. CI installs promtool (.ci/run); a developer
/// without it is told, and the rest of the test still runs.
fn promtool_check(exposition: &str) {
    use std::io::Write;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) if std::env::var_os("CI").is_none() => {
            // Written to the process's stderr itself, not through eprintln!, which the test
            // harness captures and throws away for a passing test: the developer sees it.
            let _ = writeln!(
                std::io::stderr(),
                "\nNOTICE: promtool not found ({error}): the scrape was not checked with \
                 `promtool check metrics` (Debian's prometheus package has it; .ci/run installs \
                 it and CI requires it)"
            );
            return;
        }
        Err(error) => panic!("promtool is required in CI: {error}"),
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(exposition.as_bytes())
        .expect("write to promtool");
    let output = child.wait_with_output().expect("promtool");
    assert!(
        output.status.success(),
        "promtool check metrics refused the scrape: {}{}\n{exposition}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn metrics_counters_move_as_a_running_replica_admits_and_promtool_accepts_them() {
    let db = TestDb::new().await;
    db.publish(&every_second(&["a", "b", "late"])).await;
    // `late` is five minutes behind, far past its 60 s grace: one misfire record (policy skip)
    // passes over the first four minutes of occurrences, and the last minute is admitted.
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules
             SET next_fire_at_ms = (now_ms() / 1000 - 300) * 1000,
                 accounted_from_ms = (now_ms() / 1000 - 300) * 1000
             WHERE trigger_id = 'late'",
        )
        .await
        .expect("put late behind");
    let put_behind = Instant::now();
    let addr = free_addr();
    let child = spawn_run(
        &db.url(),
        &[
            "--owner",
            "scraped",
            "--cadence",
            "200ms",
            "--metrics-addr",
            &addr,
        ],
    );
    wait_for(&addr, "/readyz", 200).await;

    // Both triggers initialize, then fire every second: the counter moves between scrapes.
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        let (_, body) = get(&addr, "/metrics").await.expect("scrape");
        if sample(&body, "qlsched_runs_admitted_total") >= 1.0 {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "nothing admitted in 30 s:\n{body}"
        );
        sleep_ms(200).await;
    };
    let admitted = sample(&first, "qlsched_runs_admitted_total");
    let later = loop {
        sleep_ms(500).await;
        let (_, body) = get(&addr, "/metrics").await.expect("scrape");
        if sample(&body, "qlsched_runs_admitted_total") >= admitted + 2.0 {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "the counter did not move:\n{body}"
        );
    };
    assert_eq!(
        sample(
            &later,
            "qlsched_schedules_advanced_total{decision=\"initialized\"}"
        ),
        2.0
    );
    assert!(
        sample(&later, "qlsched_claims_taken_total")
            >= sample(&later, "qlsched_runs_admitted_total") + 2.0
    );
    assert!(sample(&later, "qlsched_rounds_total{outcome=\"succeeded\"}") >= 2.0);
    assert_eq!(
        sample(&later, "qlsched_rounds_total{outcome=\"failed\"}"),
        0.0
    );
    assert_eq!(sample(&later, "qlsched_fence_losses_total"), 0.0);
    let skip = "{policy=\"skip\",reason=\"beyond_grace\"}";
    assert_eq!(
        sample(&later, &format!("qlsched_misfire_records_total{skip}")),
        1.0
    );
    let passed_over = sample(
        &later,
        &format!("qlsched_occurrences_passed_over_total{skip}"),
    );
    // Four minutes of every-second occurrences, plus one for each second the replica took to
    // decide after the cursor was put behind (more on a loaded machine).
    let waited = put_behind.elapsed().as_secs_f64().ceil();
    assert!(
        (230.0..=241.0 + waited).contains(&passed_over),
        "{passed_over} passed over, {waited} s after the cursor was put behind"
    );
    assert_eq!(
        passed_over as i64,
        db.count("SELECT sum(occurrences)::bigint FROM misfires")
            .await
    );
    // Every admitted run is in the lag histogram, in the database and no more.
    let lag_count = sample(&later, "qlsched_schedule_lag_seconds_count");
    let runs_admitted = sample(&later, "qlsched_runs_admitted_total");
    assert_eq!(lag_count, runs_admitted);
    assert!(sample(&later, "qlsched_schedule_lag_seconds_bucket{le=\"+Inf\"}") == lag_count);
    assert!(runs_admitted as i64 <= db.count("SELECT count(*) FROM runs").await);
    assert!(sample(&later, "qlsched_round_duration_seconds_count") >= 2.0);
    assert_eq!(sample(&later, "qlsched_ready"), 1.0);
    assert_eq!(sample(&later, "qlsched_healthy"), 1.0);
    // Once `late` has caught up, nothing due waits: the oldest due age falls to a round's time
    // (the gauge is read at most once a second).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = get(&addr, "/metrics").await.expect("scrape");
        if sample(&body, "qlsched_oldest_due_age_seconds") < 2.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the oldest due row stays old:\n{body}"
        );
        sleep_ms(300).await;
    }
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        later.contains(&format!(
            "qlsched_build_info{{version=\"{version}\",commit=\""
        )),
        "{later}"
    );
    for line in later.lines().filter(|l| !l.starts_with('#')) {
        assert!(!line.contains("trigger"), "a per-trigger label: {line}");
    }
    promtool_check(&later);

    let output = terminate(child);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        db.count("SELECT count(*) FROM runs").await,
        db.count("SELECT count(*) FROM run_events WHERE type = 'run.created'")
            .await
    );
}

#[tokio::test]
async fn probes_answer_json_and_readyz_names_a_schema_that_is_not_ready() {
    let db = TestDb::new().await;
    db.publish(&every_second(&["a"])).await;
    let addr = free_addr();
    let child = spawn_run(&db.url(), &["--cadence", "200ms", "--metrics-addr", &addr]);
    let ready: serde_json::Value =
        serde_json::from_str(&wait_for(&addr, "/readyz", 200).await).expect("readyz JSON");
    assert_eq!(ready["status"], "ok");
    let (status, health) = get(&addr, "/healthz").await.expect("healthz");
    assert_eq!(status, 200, "{health}");
    let health: serde_json::Value = serde_json::from_str(&health).expect("healthz JSON");
    assert_eq!(health["status"], "ok");
    assert!(
        health["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("last round started"),
        "{health}"
    );
    let (status, body) = get(&addr, "/nothing-here").await.expect("404");
    assert_eq!(status, 404, "{body}");

    // A schema this binary does not know (as after a newer binary migrated it, with a migration
    // whose upgrade floor is above this build): not ready, and the reason says why; the rounds
    // go on (admitting nothing), so the replica stays alive.
    db.client()
        .await
        .batch_execute(
            "UPDATE schema_migrations
             SET version = 9999, previous_release_may_run = false, upgrade_floor = 9999
             WHERE version = (SELECT max(version) FROM schema_migrations)",
        )
        .await
        .expect("move the ledger ahead");
    let body = wait_for(&addr, "/readyz", 503).await;
    let not_ready: serde_json::Value = serde_json::from_str(&body).expect("readyz JSON");
    assert_eq!(not_ready["status"], "failing");
    assert!(
        not_ready["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown to this binary, and builds before schema 9999 may not run"),
        "{not_ready}"
    );
    let (_, metrics) = get(&addr, "/metrics").await.expect("scrape");
    assert_eq!(sample(&metrics, "qlsched_ready"), 0.0);
    let (status, _) = get(&addr, "/healthz").await.expect("healthz");
    assert_eq!(status, 200);
    let output = terminate(child);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn a_metrics_address_in_use_fails_the_start_with_78_before_connecting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    // Nothing listens at this database: the address is refused first, so the status is 78.
    let output = std::process::Command::new(bin())
        .args([
            "-D",
            "postgres://nobody@127.0.0.1:1/none",
            "run",
            "--metrics-addr",
            &addr,
        ])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(78), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--metrics-addr") && stderr.contains(&addr),
        "{stderr}"
    );
}

/// The URL with a password in it, and that password: the one it has, or one made up (the test
/// server trusts local connections, so it is never checked).
fn with_password(url: &str) -> (String, String) {
    const MADE_UP: &str = "Pw-7c1e0d5a9b";
    if let Some(rest) = url.strip_prefix("postgres://")
        && let Some((user, host)) = rest.split_once('@')
    {
        return match user.split_once(':') {
            Some((_, password)) => (url.to_owned(), password.to_owned()),
            None => (
                format!("postgres://{user}:{MADE_UP}@{host}"),
                MADE_UP.to_owned(),
            ),
        };
    }
    (format!("{url} password={MADE_UP}"), MADE_UP.to_owned())
}

#[tokio::test]
async fn json_logs_are_one_object_per_line_and_never_show_the_password() {
    let db = TestDb::new().await;
    db.publish(&every_second(&["a"])).await;
    let (url, password) = with_password(&db.url());
    let child = std::process::Command::new(bin())
        .args([
            "--log-format",
            "json",
            "-D",
            &url,
            "run",
            "--cadence",
            "200ms",
        ])
        // Everything, the driver's and the pool's debug lines included.
        .env("QLSCHED_LOG", "debug")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // Read as it is written: at debug level the driver's lines would fill a pipe nobody reads,
    // and the replica would block on its next log line.
    let mut child = child;
    let mut pipe = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut pipe, &mut text).expect("read stderr");
        text
    });
    // Connected, migrated-schema checks done, a round admitted: every kind of line has been logged.
    crate::util::eventually_count(&db, Duration::from_secs(20), "SELECT count(*) FROM runs", 2)
        .await;
    let mut output = terminate(child);
    assert!(output.status.success());
    output.stderr = reader.join().expect("stderr reader");
    // The same password given to a server that is not there: the error that ends the command.
    let refused = std::process::Command::new(bin())
        .args([
            "-D",
            &format!("postgres://someone:{password}@127.0.0.1:1/none"),
            "inspect",
        ])
        .env("QLSCHED_LOG_FORMAT", "json")
        .output()
        .expect("inspect");
    assert_eq!(refused.status.code(), Some(69));

    let mut messages = Vec::new();
    for stderr in [&output.stderr, &refused.stderr] {
        let stderr = String::from_utf8_lossy(stderr);
        assert!(
            !stderr.contains(&password),
            "the password was logged:\n{stderr}"
        );
        for line in stderr.lines() {
            let object: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("not one JSON object ({error}): {line}"));
            for key in ["timestamp", "level", "message", "target"] {
                assert!(object.get(key).is_some(), "no {key} in {line}");
            }
            messages.push(object);
        }
    }
    let started = messages
        .iter()
        .find(|m| m["message"] == "replica started")
        .expect("a replica started line");
    assert_eq!(started["level"], "INFO");
    assert!(
        started["owner"].is_string() && started["batch"] == "adaptive (16..=256)",
        "{started}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m["level"] == "DEBUG" && m["message"] == "admitted")
    );
    let last = messages.last().expect("the error");
    assert_eq!(last["level"], "ERROR");
    assert_eq!(last["exit_code"], 69);
}

/// `promtool test rules` with docs/alerts.yml on a scrape: every sample held at its scraped value
/// for `minutes` (counters flat), and every alert of the file expected not to fire. `None` when
/// promtool is missing outside CI (said on stderr), else promtool's verdict.
fn promtool_no_alert(exposition: &str, minutes: u32) -> Option<Result<(), String>> {
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/alerts.yml");
    let alerts: Vec<String> = std::fs::read_to_string(rules)
        .expect("docs/alerts.yml")
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- alert: ").map(str::to_owned))
        .collect();
    assert!(!alerts.is_empty(), "no alert in {rules}");
    let mut series = String::new();
    for line in exposition.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = match name.split_once('{') {
            Some((metric, labels)) => format!("{metric}{{instance=\"scraped\",{labels}"),
            None => format!("{name}{{instance=\"scraped\"}}"),
        };
        series.push_str(&format!(
            "      - series: '{name}'\n        values: '{value}+0x{minutes}'\n"
        ));
    }
    let checks: String = alerts
        .iter()
        .map(|alert| {
            format!(
                "      - eval_time: {minutes}m\n        alertname: {alert}\n        exp_alerts: []\n"
            )
        })
        .collect();
    let test = format!(
        "rule_files:\n  - {rules}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{series}    alert_rule_test:\n{checks}"
    );
    let dir = std::env::temp_dir().join(format!("qlsched-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("scrape.test.yml");
    std::fs::write(&file, &test).expect("write the rules test");
    let ran = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output();
    // Removed however promtool went, found or not.
    let _ = std::fs::remove_dir_all(&dir);
    let output = match ran {
        Ok(output) => output,
        Err(error) if std::env::var_os("CI").is_none() => {
            eprintln!("promtool not found ({error}); .ci/run installs it and tests the rules");
            return None;
        }
        Err(error) => panic!("promtool is required in CI: {error}"),
    };
    Some(if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}\n{test}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    })
}

/// A pause is not an outage: a row paused long past its occurrences is left out of every due and
/// overdue figure (the gauges, so no alert of docs/alerts.yml fires on them, and `inspect`'s
/// oldest overdue row), and counted as paused instead.
#[tokio::test]
async fn a_paused_row_long_past_its_occurrence_raises_no_alert_and_is_not_overdue() {
    let db = TestDb::new().await;
    db.publish(&every_second(&["busy", "quiet"])).await;
    let paused = crate::util::qlsched(
        Some(&db),
        &["pause", "p/quiet", "--reason", "noisy", "--yes"],
        None,
    );
    assert!(
        paused.status.success(),
        "{}",
        String::from_utf8_lossy(&paused.stderr)
    );
    // Paused ten minutes ago with its cursor then: what the on-call engineer's pause looks like
    // ten minutes later. The stored fact does not move with the times.
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules
             SET paused_at_ms = now_ms() - 600000, next_fire_at_ms = (now_ms() / 1000 - 600) * 1000
             WHERE trigger_id = 'quiet'",
        )
        .await
        .expect("put the pause ten minutes back");
    let addr = free_addr();
    let child = spawn_run(
        &db.url(),
        &[
            "--owner",
            "pager",
            "--cadence",
            "200ms",
            "--metrics-addr",
            &addr,
        ],
    );
    wait_for(&addr, "/readyz", 200).await;
    // Past the paused row's next occurrences, and `busy` admitted more than once.
    let deadline = Instant::now() + Duration::from_secs(30);
    let scrape = loop {
        sleep_ms(500).await;
        let (_, body) = get(&addr, "/metrics").await.expect("scrape");
        if sample(&body, "qlsched_runs_admitted_total") >= 2.0 {
            break body;
        }
        assert!(Instant::now() < deadline, "nothing admitted:\n{body}");
    };
    assert!(
        sample(&scrape, "qlsched_oldest_due_age_seconds") < 5.0,
        "{scrape}"
    );
    assert!(
        sample(&scrape, "qlsched_due_unclaimed_rows") <= 1.0,
        "{scrape}"
    );
    assert_eq!(sample(&scrape, "qlsched_paused_rows"), 1.0, "{scrape}");
    assert_eq!(sample(&scrape, "qlsched_disabled_rows"), 0.0, "{scrape}");
    if let Some(verdict) = promtool_no_alert(&scrape, 15) {
        verdict.unwrap_or_else(|failure| panic!("an alert fired on a pause: {failure}"));
    }
    let inspect = crate::util::qlsched(Some(&db), &["-o", "json", "inspect"], None);
    let summary: serde_json::Value =
        serde_json::from_slice(&inspect.stdout).expect("inspect -o json");
    let oldest = &summary["oldest_overdue"];
    assert_ne!(oldest["trigger_id"], "quiet", "{summary}");
    assert_eq!(summary["schedules"]["paused"], 1, "{summary}");
    let table = crate::util::qlsched(Some(&db), &["inspect"], None);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(!table.contains("p/quiet"), "{table}");

    let output = terminate(child);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The test above would catch an alert: the same scrape with the paused row's age as the gauge
/// showed it before parked rows were left out fires `QlschedOldestDueRowOld`.
#[test]
fn the_rules_check_catches_an_overdue_row_when_there_is_one() {
    let scrape = "qlsched_ready 1\nqlsched_oldest_due_age_seconds 600\n";
    if let Some(verdict) = promtool_no_alert(scrape, 15) {
        let failure = verdict.expect_err("an overdue row ten minutes old must alert");
        assert!(failure.contains("QlschedOldestDueRowOld"), "{failure}");
    }
}

/// A schedule table autovacuum never visits slows every claim minute over minute, and no replica
/// may vacuum it: the store reads the fact from the server, and a starting replica says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_names_a_schedule_table_that_is_never_vacuumed() {
    let db = TestDb::new().await;
    db.publish(&every_second(&["a"])).await;
    let client = db.client().await;
    let server_vacuums: bool = client
        .query_one("SELECT current_setting('autovacuum')::bool", &[])
        .await
        .expect("autovacuum setting")
        .get(0);
    let upkeep = qlsched::store::upkeep::schedule_upkeep(&client)
        .await
        .expect("upkeep");
    assert_eq!(upkeep.autovacuum, server_vacuums, "{upkeep:?}");

    client
        .batch_execute("ALTER TABLE trigger_schedules SET (autovacuum_enabled = false)")
        .await
        .expect("switch autovacuum off for the table");
    let upkeep = qlsched::store::upkeep::schedule_upkeep(&client)
        .await
        .expect("upkeep");
    assert!(!upkeep.autovacuum, "{upkeep:?}");

    let child = spawn_run(&db.url(), &["--cadence", "200ms"]);
    crate::util::eventually_count(&db, Duration::from_secs(20), "SELECT count(*) FROM runs", 1)
        .await;
    let output = terminate(child);
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("autovacuum is off for the schedule table"),
        "no warning in:\n{stderr}"
    );
}

/// `/readyz` turns not-ready while commits do not complete (a synchronous standby named that
/// never answers, on a server of the test's own): within a few seconds, naming the commit, a
/// scrape of `/metrics` still answering within its 2 s; ready again once commits complete.
#[tokio::test(flavor = "multi_thread")]
async fn readyz_turns_not_ready_while_commits_do_not_complete() {
    let server = crate::util::cluster::OwnServer::primary("readyz-commit");
    let url = server.url("postgres");
    let migrated = crate::util::qlsched(None, &["-D", &url, "migrate"], None);
    assert_eq!(
        crate::util::code(&migrated),
        0,
        "{}",
        crate::util::stderr(&migrated)
    );
    let manifest = every_second(&["a"]).to_string();
    let published =
        crate::util::qlsched(None, &["-D", &url, "publish", "-f", "-"], Some(&manifest));
    assert_eq!(
        crate::util::code(&published),
        0,
        "{}",
        crate::util::stderr(&published)
    );
    let addr = free_addr();
    let _replica = spawn_run(&url, &["--owner", "committing", "--metrics-addr", &addr]);
    wait_for(&addr, "/readyz", 200).await;

    let admin = server.client("postgres").await;
    let set = |value: &'static str| {
        let admin = &admin;
        async move {
            admin
                .batch_execute(&format!(
                    "ALTER SYSTEM SET synchronous_standby_names = '{value}'"
                ))
                .await
                .expect("alter system");
            admin
                .batch_execute("SELECT pg_reload_conf()")
                .await
                .expect("reload");
            // The checkpointer, which publishes whether synchronous standbys are named, takes the
            // reload in its own time.
            sleep_ms(1_500).await;
        }
    };
    set("no_such_standby").await;
    // The fault landed: a commit that wrote something now waits.
    let other = server.client("postgres").await;
    let commit = other.batch_execute("BEGIN; UPDATE qlsched.replicas SET state = state; COMMIT");
    assert!(
        tokio::time::timeout(Duration::from_secs(2), commit)
            .await
            .is_err(),
        "a commit completed with a synchronous standby that does not exist"
    );
    let stalled = Instant::now();
    let body = wait_for(&addr, "/readyz", 503).await;
    let took = stalled.elapsed();
    assert!(body.contains("a commit did not complete"), "{body}");
    assert!(took < Duration::from_secs(6), "{took:?}: {body}");
    let scrape = Instant::now();
    let (status, _) = get(&addr, "/metrics").await.expect("a scrape");
    assert_eq!(status, 200);
    assert!(
        scrape.elapsed() < Duration::from_millis(2_500),
        "/metrics took {:?} while commits hang",
        scrape.elapsed()
    );
    set("").await;
    wait_for(&addr, "/readyz", 200).await;
}
