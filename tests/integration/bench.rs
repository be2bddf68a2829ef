//! `qlsched bench` at a tiny size admits every occurrence exactly once, with one attempt and two
//! events each. Correctness only: no timing is asserted.

use crate::util::{code, qlsched, server_url, stderr, stdout};

#[test]
fn a_tiny_bench_admits_every_occurrence_once() {
    let output = qlsched(
        None,
        &[
            "-D",
            &server_url(),
            "bench",
            "--triggers",
            "200",
            "--replicas",
            "2",
            "--ceiling-time",
            "500ms",
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report: serde_json::Value =
        serde_json::from_str(&stdout(&output)).expect("one JSON object");
    crate::contracts::assert_conforms("bench", &report);
    assert_eq!(report["triggers"], 200);
    assert_eq!(report["replicas"], 2);
    assert_eq!(report["due"], 200);
    assert_eq!(report["admitted"], 200, "every due occurrence admitted");
    assert_eq!(report["runs"], 200, "and each exactly once");
    assert_eq!(report["complete"], true);
    for field in [
        "duplicates",
        "runs_without_one_attempt",
        "runs_without_two_events",
        "orphans",
        "fence_lost",
        "rejected",
        "unsettled",
        "failed_rounds",
    ] {
        assert_eq!(report[field], 0, "{field}");
    }
    for field in [
        "admissions_per_s",
        "commit_ceiling_per_s",
        "ratio",
        "claim_p99_ms",
        "admit_p99_ms",
        "serialization_retries",
        "round_trips_per_admission",
    ] {
        assert!(report[field].is_number(), "{field} is reported");
    }
    assert_eq!(report["kept"], false);
}

#[test]
fn a_bench_with_padding_admits_only_what_is_due() {
    let output = qlsched(
        None,
        &[
            "-D",
            &server_url(),
            "bench",
            "--triggers",
            "100",
            "--due-fraction",
            "0.5",
            "--rows-total",
            "1000",
            "--replicas",
            "2",
            "--ceiling-time",
            "200ms",
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report: serde_json::Value =
        serde_json::from_str(&stdout(&output)).expect("one JSON object");
    assert_eq!(report["rows_total"], 1000);
    assert_eq!(report["due"], 50);
    assert_eq!(report["runs"], 50, "rows not due are left alone");
    assert_eq!(report["duplicates"], 0);
}

/// A configuration that cannot measure anything is refused before anything is created: exit 2,
/// one line naming the flag's value, nothing on stdout. An unreachable server (port 1) proves no
/// connection was needed to refuse it.
#[test]
fn a_bench_that_cannot_measure_is_refused_before_it_connects() {
    let unreachable = "postgres://nobody@127.0.0.1:1/none";
    for (args, needle) in [
        (
            vec!["--due-fraction", "1.5"],
            "due fraction 1.5 is not within 0..=1",
        ),
        (
            vec!["--triggers", "100", "--rows-total", "10"],
            "rows total 10 is fewer than the 100 triggers",
        ),
        (
            vec!["--duration", "0s"],
            "duration must be at least 1s, got 0s",
        ),
        (
            vec!["--ceiling-time", "0s"],
            "ceiling time must be 100ms..=10m",
        ),
        (vec!["--batch", "999"], "999 is not in 1..=256"),
        (
            vec!["--due-fraction", "-0.5"],
            "due fraction -0.5 is not within 0..=1",
        ),
    ] {
        let mut full = vec!["-D", unreachable, "bench"];
        full.extend(args.iter().copied());
        let output = qlsched(None, &full, None);
        // Every value here came from a flag: a usage error (docs/DECISIONS.md, the rule for 2
        // and 78).
        crate::util::assert_refused(&output, 2, needle, &format!("{args:?}"));
        let message = stderr(&output);
        assert_eq!(message.trim_end().lines().count(), 1, "{args:?}: {message}");
        assert!(stdout(&output).is_empty(), "{args:?}");
    }
}

/// Ctrl-C (or SIGTERM) in the middle of a bench still drops its scratch database: exit 130 and
/// `qlsched_bench_<pid>` gone from the server.
#[tokio::test]
async fn an_interrupted_bench_drops_its_scratch_database() {
    let child = std::process::Command::new(crate::util::bin())
        .args([
            "-D",
            &server_url(),
            "bench",
            "--triggers",
            "200000",
            "--replicas",
            "1",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn bench");
    let database = format!("qlsched_bench_{}", child.id());
    let exists = |name: String| async move { crate::util::database_comment(&name).await.is_some() };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !exists(database.clone()).await {
        assert!(std::time::Instant::now() < deadline, "no {database}");
        crate::util::sleep_ms(50).await;
    }
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    let output = child.wait_with_output().expect("wait for bench");
    assert_eq!(code(&output), 130, "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!(
            "bench interrupted by SIGINT; scratch database {database} dropped"
        )),
        "{}",
        stderr(&output)
    );
    assert!(!exists(database.clone()).await, "{database} is still there");
}

/// A steady bench of 20 every-second triggers, 2 replicas and a 3 s window, with `extra` flags,
/// as JSON with its chart: it succeeded, and here are its output and the chart it drew.
fn small_steady_bench(extra: &[&str]) -> (std::process::Output, String) {
    let chart = std::env::temp_dir().join(format!("qlsched-steady-{}.svg", uuid::Uuid::new_v4()));
    let url = server_url();
    let mut args = vec![
        "-D",
        &url,
        "bench",
        "--steady",
        "--triggers",
        "20",
        "--replicas",
        "2",
        "--cron",
        "* * * * * *",
        "--window",
        "3s",
        "--chart",
        chart.to_str().expect("a UTF-8 path"),
        "-o",
        "json",
    ];
    args.extend_from_slice(extra);
    let output = qlsched(None, &args, None);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let svg = std::fs::read_to_string(&chart).expect("the chart was written");
    let _ = std::fs::remove_file(&chart);
    (output, svg)
}

/// The steady bench from a plain publish: every occurrence of the window admitted once per
/// trigger, nothing unaccounted, and the lag reported per occurrence. No timing is asserted.
#[test]
fn a_steady_bench_reports_the_lag_of_every_occurrence_in_its_window() {
    let (output, svg) = small_steady_bench(&[]);
    // The chart beside the report: an SVG with the three lag lines and the admission rate.
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.matches("<polyline").count() >= 4, "{svg}");
    for text in ["lag (s)", "admissions / s", "p99"] {
        assert!(svg.contains(text), "{text} in {svg}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&stdout(&output)).expect("one JSON object");
    crate::contracts::assert_conforms("bench --steady", &report);
    assert_eq!(report["mode"], "steady");
    assert_eq!(report["cadence_ms"], 1000, "qlsched run's default cadence");
    assert_eq!(report["batch"], "adaptive", "qlsched run's default batch");
    // Both ceilings were measured in the same run, before the replicas started and again once
    // they stopped, and each occurrence reads against them.
    for ceiling in [
        "commit_ceiling_per_s",
        "batched_ceiling_per_s",
        "commit_ceiling_after_per_s",
        "batched_ceiling_after_per_s",
    ] {
        assert!(report[ceiling].as_f64() > Some(0.0), "{ceiling}: {report}");
    }
    // The schedule table's upkeep as the server reported it at the end.
    assert!(
        report["schedule_upkeep"]["autovacuum"].is_boolean(),
        "{report}"
    );
    assert!(report["schedule_upkeep"]["dead_rows"].is_i64(), "{report}");
    assert_eq!(
        report["admission_rates_per_s"].as_array().map(Vec::len),
        Some(3),
        "{report}"
    );
    assert!(
        report["trend"]["max_lag_slope_ms_per_min"].is_number(),
        "{report}"
    );
    let occurrences = report["occurrences"].as_array().expect("occurrences");
    assert_eq!(occurrences.len(), 3, "{report}");
    for occurrence in occurrences {
        assert_eq!(occurrence["runs"], 20, "{occurrence}");
        assert!(occurrence["lag_max_ms"].as_i64() >= occurrence["lag_p50_ms"].as_i64());
    }
    assert_eq!(report["overall"]["runs"], 60);
    for field in [
        "short_occurrences",
        "duplicates",
        "unaccounted",
        "runs_without_one_attempt",
        "runs_without_two_events",
    ] {
        assert_eq!(report[field], 0, "{field}");
    }
}

/// With retention the steady bench runs a dispatcher and a retention pass beside the replicas,
/// and sums the window up minute by minute: the lag over each minute's runs, retention's deletes
/// in it and the history's size, which the chart draws below the lag. No timing is asserted.
#[test]
fn a_steady_bench_with_retention_sums_up_each_minute_of_its_window() {
    let (output, svg) = small_steady_bench(&["--retain", "1m"]);
    for text in ["retention 1m", "lag (s)", "MB of runs, attempts and events"] {
        assert!(svg.contains(text), "{text} in {svg}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&stdout(&output)).expect("one JSON object");
    crate::contracts::assert_conforms("bench --steady", &report);
    assert_eq!(report["retention_ms"], 60_000, "{report}");
    assert_eq!(
        report["dispatched"].as_i64().map(|n| n >= 60),
        Some(true),
        "{report}"
    );
    let minutes = report["minutes"].as_array().expect("minutes");
    assert_eq!(minutes.len(), 1, "a 3 s window is one minute: {report}");
    let minute = &minutes[0];
    assert_eq!(
        minute["from_ms"],
        report["occurrences"][0]["scheduled_for_ms"]
    );
    assert_eq!(minute["runs"], 60, "{minute}");
    assert!(minute["lag_max_ms"].as_i64() >= minute["lag_p99_ms"].as_i64());
    assert!(minute["lag_p99_ms"].as_i64() >= minute["lag_p50_ms"].as_i64());
    // Nothing finished a minute before the window's end: nothing deleted.
    assert_eq!(minute["deleted_runs"], 0, "{minute}");
    assert!(minute["history_at_end"]["runs"].is_i64(), "{minute}");
    for field in ["short_occurrences", "duplicates", "unaccounted"] {
        assert_eq!(report[field], 0, "{field}");
    }
}

#[test]
fn steady_only_flags_need_steady_and_burst_only_flags_refuse_it() {
    for args in [
        vec!["bench", "--window", "5s"],
        vec!["bench", "--steady", "--due-fraction", "0.5"],
        vec!["bench", "--chart", "lag.svg"],
    ] {
        let output = qlsched(None, &args, None);
        assert_eq!(code(&output), 2, "{args:?}: {}", stderr(&output));
    }
}

/// A lived-in bench (`--parked`, `--history`) writes its history in the shapes the admission
/// leaves: runs of the bench's own triggers, each with one attempt and two events (run.created
/// with the admission's keys), keys in the admission's format, and the foreign keys set aside for
/// the build back in place, validated.
#[tokio::test]
async fn a_lived_in_bench_writes_its_history_as_admissions_do() {
    let output = qlsched(
        None,
        &[
            "-D",
            &server_url(),
            "bench",
            "--triggers",
            "40",
            "--replicas",
            "1",
            "--ceiling-time",
            "200ms",
            "--parked",
            "30",
            "--history",
            "1200",
            "--keep",
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report: serde_json::Value =
        serde_json::from_str(&stdout(&output)).expect("one JSON object");
    assert_eq!(report["runs"], 40, "{report}");
    assert_eq!(report["orphans"], 0, "{report}");
    let database = report["database"].as_str().expect("database").to_owned();
    let client = crate::util::server()
        .with_dbname(&database)
        .connect(&crate::util::schema(), "lived-in test")
        .await
        .expect("connect to the kept bench database");
    let row = client
        .query_one(
            "SELECT count(*), count(DISTINCT trigger_id),
                    count(*) FILTER (WHERE idempotency_key = 'ql3:cron:v1:' || project_id || '/'
                                     || trigger_id || ':' || trigger_revision || ':'
                                     || scheduled_for_ms),
                    (SELECT count(*) FROM attempts a JOIN runs r USING (run_id)
                     WHERE r.status = 'succeeded'),
                    (SELECT count(*) FROM run_events e JOIN runs r USING (run_id)
                     WHERE r.status = 'succeeded'),
                    (SELECT count(*) FROM pg_constraint
                     WHERE contype = 'f' AND convalidated AND confrelid = 'runs'::regclass),
                    (SELECT count(DISTINCT ARRAY(SELECT jsonb_object_keys(payload) ORDER BY 1))
                     FROM run_events WHERE seq = 1),
                    (SELECT count(*) FROM run_events e JOIN runs r USING (run_id)
                     WHERE r.status = 'succeeded' AND e.seq = 1
                       AND e.payload->>'origin' = 'cron' AND e.payload->>'actor' = 'history'
                       AND e.payload->>'claim_owner' = 'history')
             FROM runs WHERE status = 'succeeded'",
            &[],
        )
        .await
        .expect("the history");
    let counts: Vec<i64> = (0..8).map(|i| row.get(i)).collect();
    qlsched::bench::scratch::drop_database(&crate::util::server(), &database)
        .await
        .expect("drop the kept bench database");
    // 1,200 runs over the 40 triggers the bench admits (parked rows get none), keys as the
    // admission writes them, 1,200 attempts and 2,400 events, both foreign keys validated; every
    // run.created, the history's and the bench's admissions', with the same keys, the history's
    // naming its claim owner as a cron run's does.
    assert_eq!(counts, vec![1200, 40, 1200, 1200, 2400, 2, 1, 1200]);
}
