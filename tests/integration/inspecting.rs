//! `inspect` tells the story first: an outage is its first line (and `inspect --check` exits 7
//! for scripts), a claim whose owner is dead says so where it is read, and a next occurrence far
//! off names the fields of the expression that put it there; `backfill` takes relative times and
//! its dry run says which occurrences were never missed. Replicas are real processes.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{
    ReplicaProcess, TestDb, code, eventually, manifest, qlsched, spawn_run, stderr, stdout,
};

fn replica(db: &TestDb, owner: &str) -> ReplicaProcess {
    spawn_run(
        &db.url(),
        &["--owner", owner, "--lease", "3s", "--cadence", "250ms"],
    )
}

fn json_of(db: &TestDb, args: &[&str], status: i32) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    let output = qlsched(Some(db), &args, None);
    assert_eq!(code(&output), status, "{args:?}: {}", stderr(&output));
    serde_json::from_str(&stdout(&output)).expect("one JSON document")
}

/// How the registry sees `owner` now.
fn liveness(db: &TestDb, owner: &str) -> Option<String> {
    json_of(db, &["inspect", "replicas"], 0)
        .as_array()?
        .iter()
        .find(|r| r["owner"] == owner)
        .and_then(|r| r["liveness"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn stopping_every_replica_with_rows_due_is_the_headline_and_check_exits_7() {
    let db = TestDb::new().await;
    let triggers: Vec<_> = (0..3)
        .map(|i| json!({ "id": format!("t{i}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    let only = replica(&db, "only");
    // Before the replica's first round its rows wait uninitialized: an outage (exit 7) too.
    eventually(Duration::from_secs(20), "admitting, no outage", || async {
        let output = qlsched(Some(&db), &["inspect", "--check"], None);
        code(&output) == 0
    })
    .await;
    let fine = qlsched(Some(&db), &["inspect", "--check"], None);
    assert_eq!(code(&fine), 0, "{}", stderr(&fine));
    assert!(
        stdout(&fine).starts_with("no outage: 1 live replica"),
        "{}",
        stdout(&fine)
    );

    only.stop();
    // Every second a row falls due again, with nothing left to admit it.
    eventually(Duration::from_secs(10), "an outage", || async {
        code(&qlsched(Some(&db), &["inspect", "--check"], None)) == 7
    })
    .await;
    let summary = qlsched(Some(&db), &["inspect"], None);
    assert_eq!(code(&summary), 0, "inspect alone reports, it does not fail");
    let text = stdout(&summary);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("OUTAGE: no live replica, ") && lines[0].contains(" due"),
        "{text}"
    );
    assert!(
        lines[1].contains("likely cause: every replica in the registry is stopped"),
        "{text}"
    );
    assert_eq!(lines[2], "  next: `qlsched inspect replicas`", "{text}");

    let check = qlsched(Some(&db), &["inspect", "--check"], None);
    assert_eq!(code(&check), 7, "{}", stderr(&check));
    assert!(
        stdout(&check).starts_with("OUTAGE: no live replica"),
        "{}",
        stdout(&check)
    );
    assert!(
        stderr(&check).starts_with("qlsched: OUTAGE: no live replica"),
        "{}",
        stderr(&check)
    );
    let report = json_of(&db, &["inspect", "--check"], 7);
    assert_eq!(report["outage"]["kind"], "no_live_replica", "{report}");
    assert_eq!(report["live_replicas"], 0, "{report}");
    assert_eq!(report["registered_replicas"], 1, "{report}");
    let summary = json_of(&db, &["inspect"], 0);
    assert_eq!(summary["outage"]["kind"], "no_live_replica", "{summary}");

    // --check is the summary's question alone: with a view it is a usage error.
    let both = qlsched(Some(&db), &["inspect", "--check", "replicas"], None);
    assert_eq!(code(&both), 2, "{}", stderr(&both));
}

/// A replica killed while the registry still lists it running, and a claim under its name with a
/// lease longer than its own (as a dead replica's claim outlives it): once the registry shows it
/// stale, `inspect trigger` and `inspect claims` say the owner is dead and advise expiry rather
/// than waiting. The same replica initialized `0 8 * 5 *` in Berlin, which is far off by its
/// month field.
#[tokio::test]
async fn a_claim_of_a_stale_owner_says_so_and_a_far_occurrence_names_its_field() {
    let db = TestDb::new().await;
    db.publish(&manifest(json!([
        { "id": "x", "task": "t", "cron": "* * * * * *" },
        { "id": "may", "task": "t", "cron": "0 8 * 5 *", "time_zone": "Europe/Berlin" },
    ])))
    .await;
    let dead = replica(&db, "dead");
    eventually(Duration::from_secs(20), "both initialized", || async {
        db.count("SELECT count(*) FROM trigger_schedules WHERE next_fire_at_ms IS NOT NULL")
            .await
            == 2
    })
    .await;
    dead.kill();
    let held = qlsched(
        Some(&db),
        &[
            "claim", "p/x", "--hold", "--owner", "dead", "--lease", "1h", "--wait", "10s",
        ],
        None,
    );
    assert_eq!(code(&held), 0, "{}", stderr(&held));
    eventually(
        Duration::from_secs(15),
        "the killed one turns stale",
        || async { liveness(&db, "dead").as_deref() == Some("stale") },
    )
    .await;

    let why = json_of(&db, &["inspect", "trigger", "p/x"], 0)["why_not_firing"].clone();
    assert_eq!(why["cause"], "claim_owner_not_live", "{why}");
    assert_eq!(why["owner_liveness"], "stale", "{why}");
    let text = stdout(&qlsched(Some(&db), &["inspect", "trigger", "p/x"], None));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("dead is stale"), "{text}");
    assert!(lines[0].contains("its owner is dead"), "{text}");
    assert!(lines[1].starts_with("fix: `qlsched expire`"), "{text}");

    let claims = json_of(&db, &["inspect", "claims"], 0);
    assert_eq!(claims[0]["owner_liveness"], "stale", "{claims}");
    let text = stdout(&qlsched(Some(&db), &["inspect", "claims"], None));
    assert!(text.contains("STALE (dead)"), "{text}");
    assert!(text.contains("`qlsched expire --owner dead`"), "{text}");

    let text = stdout(&qlsched(Some(&db), &["inspect"], None));
    assert!(
        text.contains("its owner is STALE in the replica registry: `qlsched expire --owner dead`"),
        "{text}"
    );

    let text = stdout(&qlsched(Some(&db), &["inspect", "trigger", "p/may"], None));
    let first = text.lines().next().unwrap_or_default();
    assert!(first.contains(" 08:00:00 CEST)"), "{text}");
    assert!(first.contains("the month field `5`"), "{text}");
    assert!(
        text.lines()
            .nth(1)
            .unwrap_or_default()
            .contains("correct the expression"),
        "{text}"
    );
}

/// `backfill` takes relative times (`--since 1m`, `--from -2h`, `--to` defaulting to now), read
/// against the database's clock, and its dry run lists the occurrences with what is known of
/// each: those before the first replica started (never missed), those with a run.
#[tokio::test]
async fn a_relative_backfill_dry_run_lists_its_occurrences_and_which_came_before_any_replica() {
    let db = TestDb::new().await;
    db.publish(&manifest(
        json!([{ "id": "x", "task": "t", "cron": "* * * * * *" }]),
    ))
    .await;
    // Occurrences pass with no replica at all, then one runs for a while and stops.
    crate::util::sleep_ms(2_500).await;
    let only = replica(&db, "only");
    crate::util::eventually_count(&db, Duration::from_secs(20), "SELECT count(*) FROM runs", 3)
        .await;
    only.stop();

    let args = ["backfill", "p/x", "--since", "1m", "--dry-run", "--yes"];
    let report = json_of(&db, &args, 0);
    assert_eq!(report["dry_run"], true, "{report}");
    let start = report["first_scheduler_start_ms"]
        .as_i64()
        .expect("a start");
    assert!(
        report["before_first_scheduler"].as_u64() >= Some(2),
        "{report}"
    );
    let listed = report["listed"].as_array().expect("a list");
    assert!(!listed.is_empty(), "{report}");
    for o in listed {
        let at = o["at_ms"].as_i64().expect("an instant");
        match o["note"].as_str() {
            Some("before_first_scheduler") => assert!(at < start, "{o}"),
            Some("has_run" | "missed" | "passed_over") => {}
            other => panic!("{other:?} in {report}"),
        }
    }
    assert!(
        listed.iter().any(|o| o["note"] == "has_run"),
        "the replica's runs: {report}"
    );
    let text = stdout(&qlsched(Some(&db), &args, None));
    assert!(
        text.contains("before the first replica started: would admit"),
        "{text}"
    );

    // The same window written as instants relative to now, and a backwards one refused.
    let output = qlsched(
        Some(&db),
        &[
            "backfill",
            "p/x",
            "--from",
            "now-1m",
            "--to",
            "-1s",
            "--dry-run",
            "--yes",
        ],
        None,
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let output = qlsched(
        Some(&db),
        &[
            "backfill",
            "p/x",
            "--from",
            "-1s",
            "--to",
            "-1m",
            "--dry-run",
            "--yes",
        ],
        None,
    );
    assert_eq!(code(&output), 65, "{}", stderr(&output));
    let output = qlsched(
        Some(&db),
        &[
            "backfill",
            "p/x",
            "--from",
            "yesterday",
            "--dry-run",
            "--yes",
        ],
        None,
    );
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    assert!(stderr(&output).contains("now-2h"), "{}", stderr(&output));
}

/// 40,000 triggers at 00:00 UTC and 10,000 spread over the minutes of each hour (and a Berlin
/// job): `inspect load` lists midnight first with its count and the time to admit it at the
/// busiest minute's rate of a replica that ran a few every-second triggers; the Berlin job's
/// daylight-saving change is listed on the change day; and a dry run of a change that adds
/// 5,000 more at midnight with a grace of 1 s is warned of.
#[tokio::test]
async fn inspect_load_lists_the_busiest_boundary_and_a_dst_change_and_publish_warns() {
    let db = TestDb::new().await;
    let every_second: Vec<Value> = (0..5)
        .map(|i| json!({ "id": format!("s{i}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(every_second))).await;
    let only = replica(&db, "only");
    crate::util::eventually_count(
        &db,
        Duration::from_secs(20),
        "SELECT count(*) FROM runs",
        20,
    )
    .await;
    only.stop();

    let mut triggers = every_second.clone();
    triggers.extend(
        (0..40_000).map(|i| json!({ "id": format!("m{i}"), "task": "t", "cron": "0 0 * * *" })),
    );
    triggers.extend((0..10_000).map(
        |i| json!({ "id": format!("h{i}"), "task": "t", "cron": format!("{} * * * *", i % 60) }),
    ));
    triggers.push(json!({
        "id": "berlin", "task": "t", "cron": "0 9 * * *", "time_zone": "Europe/Berlin"
    }));
    let big = manifest(json!(triggers));
    db.publish(&big).await;

    let started = std::time::Instant::now();
    let load = json_of(&db, &["inspect", "load"], 0);
    eprintln!("inspect load at 50,006 triggers: {:?}", started.elapsed());
    assert_eq!(load["triggers"], 50_006, "{load}");
    let midnight = (load["from_ms"].as_i64().expect("from") / 86_400_000 + 1) * 86_400_000;
    let first = &load["boundaries"][0];
    assert_eq!(first["at_ms"], midnight, "{load}");
    // Midnight: the 40,000, the 167 of minute 0, and the every-second five.
    assert_eq!(first["occurrences"], 40_000 + 167 + 5, "{load}");
    let rate = load["rate_per_s"].as_f64().expect("a rate");
    let expected = first["expected_admission_ms"]
        .as_i64()
        .expect("an admission time");
    assert_eq!(
        expected,
        (40_172.0 / rate * 1_000.0).round() as i64,
        "{load}"
    );
    let text = stdout(&qlsched(Some(&db), &["inspect", "load"], None));
    assert!(text.contains("busiest minute of the last hour"), "{text}");

    let change_day = json_of(
        &db,
        &[
            "inspect",
            "load",
            "--from",
            "2027-03-28T00:00:00Z",
            "--horizon",
            "1d",
        ],
        0,
    );
    let change = &change_day["dst_changes"][0];
    assert_eq!(change["time_zone"], "Europe/Berlin", "{change_day}");
    assert_eq!(change["at_ms"], 1_806_195_600_000_i64, "{change_day}");
    assert_eq!(change["triggers"], 1, "{change_day}");

    let mut more = triggers.clone();
    more.extend((0..5_000).map(|i| {
        json!({ "id": format!("n{i}"), "task": "t", "cron": "0 0 * * *", "misfire_grace": "1s" })
    }));
    let output = qlsched(
        Some(&db),
        &["publish", "-f", "-", "--dry-run", "-o", "json"],
        Some(&manifest(json!(more)).to_string()),
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let dry_run: Value = serde_json::from_str(&stdout(&output)).expect("json");
    let warning = &dry_run["load_warnings"][0];
    assert_eq!(warning["at_ms"], midnight, "{warning}");
    assert_eq!(warning["added"], 5_000, "{warning}");
    assert_eq!(warning["misfire_grace_ms"], 1_000, "{warning}");
    let unchanged = qlsched(
        Some(&db),
        &["publish", "-f", "-", "--dry-run", "-o", "json"],
        Some(&big.to_string()),
    );
    let unchanged: Value = serde_json::from_str(&stdout(&unchanged)).expect("json");
    assert_eq!(
        unchanged["load_warnings"],
        json!([]),
        "nothing added, nothing warned"
    );

    // A change of grace only adds no occurrence: the 40,000 of midnight, now with 1 s, are
    // there already and warned of by nobody.
    let dry_run_of = |triggers: &[Value]| {
        let output = qlsched(
            Some(&db),
            &["publish", "-f", "-", "--dry-run", "-o", "json"],
            Some(&manifest(json!(triggers)).to_string()),
        );
        assert_eq!(code(&output), 0, "{}", stderr(&output));
        serde_json::from_str::<Value>(&stdout(&output)).expect("json")
    };
    let graced: Vec<Value> = triggers
        .iter()
        .map(|t| {
            let mut t = t.clone();
            if t["cron"] == "0 0 * * *" {
                t["misfire_grace"] = json!("1s");
            }
            t
        })
        .collect();
    let grace_only = dry_run_of(&graced);
    assert_eq!(
        grace_only["load_warnings"],
        json!([]),
        "a grace changed adds nothing: {}",
        grace_only["load_warnings"]
    );

    // 5,000 of midnight's moved to 00:30: added there (beside the 167 hourly and the
    // every-second five), and gone from midnight, which is warned of by nobody.
    let moved: Vec<Value> = triggers
        .iter()
        .map(|t| {
            let mut t = t.clone();
            let id = t["id"].as_str().unwrap_or_default();
            let number = id.strip_prefix('m').and_then(|n| n.parse::<u32>().ok());
            if number.is_some_and(|n| n < 5_000) {
                t["cron"] = json!("30 0 * * *");
                t["misfire_grace"] = json!("1s");
            }
            t
        })
        .collect();
    let moved = dry_run_of(&moved);
    let warnings = moved["load_warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0]["at_ms"], midnight + 1_800_000, "{warnings:?}");
    assert_eq!(warnings[0]["added"], 5_000, "{warnings:?}");
    assert_eq!(warnings[0]["occurrences"], 5_000 + 167 + 5, "{warnings:?}");
}

/// A view whose stdout blocks (a pager, `| sleep`, a pipe nobody reads) holds no transaction
/// open while it waits: it read everything and committed before writing a byte, so its session
/// is idle, not idle in transaction, and an ACCESS EXCLUSIVE request queued behind it (a
/// migration, VACUUM FULL) would not queue the replicas' claims behind it.
#[tokio::test]
async fn a_view_whose_stdout_blocks_holds_no_transaction_open() {
    let db = TestDb::new().await;
    let triggers: Vec<Value> = (0..1_500)
        .map(|i| json!({ "id": format!("row-{i:04}"), "task": "t", "cron": "0 0 1 1 *" }))
        .collect();
    db.publish(&manifest(Value::Array(triggers))).await;
    // Every row claimed by one owner, so that `inspect claims` has as much to write.
    db.client()
        .await
        .execute(
            "UPDATE trigger_schedules
             SET claim_owner = 'holder', claim_token = gen_random_uuid(),
                 claim_version = claim_version + 1, claim_expires_at_ms = now_ms() + 600000,
                 state_version = state_version + 1",
            &[],
        )
        .await
        .expect("hold claims");
    for view in [&["inspect", "schedules"][..], &["inspect", "claims"][..]] {
        let mut args = view.to_vec();
        args.extend(["--limit", "5000"]);
        let mut child = std::process::Command::new(crate::util::bin())
            .arg("-D")
            .arg(db.url())
            .args(&args)
            .env_remove("QLSCHED_DATABASE_URL")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            // A pipe nobody reads: the view's 1,500 rows fill it and the write blocks.
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn inspect");
        let sessions = format!(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = '{}' AND application_name = 'qlsched inspect' AND state = 'idle'",
            db.name
        );
        // The read is over once the session is idle; the process is still there a second
        // later: its write to stdout blocked (the fault landed).
        eventually(Duration::from_secs(30), &sessions, || async {
            db.count(&sessions).await == 1
        })
        .await;
        crate::util::sleep_ms(1_000).await;
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "{args:?}: the view wrote everything: its stdout never blocked"
        );
        let states = db
            .client()
            .await
            .query(
                "SELECT state, xact_start IS NOT NULL FROM pg_stat_activity
                 WHERE datname = $1 AND application_name = 'qlsched inspect'",
                &[&db.name],
            )
            .await
            .expect("pg_stat_activity");
        let states: Vec<(String, bool)> = states.iter().map(|r| (r.get(0), r.get(1))).collect();
        assert_eq!(
            states,
            vec![("idle".to_owned(), false)],
            "{args:?}: blocked on stdout, the session holds no transaction"
        );
        // Reading stdout now lets the view finish, whole.
        let output = child.wait_with_output().expect("wait for inspect");
        assert_eq!(code(&output), 0, "{args:?}");
        assert!(
            stdout(&output).contains("row-1499"),
            "{args:?}: every row shown after the commit"
        );
    }
}

/// `schedule_state()`, the one SQL definition of a schedule row's state that every read showing
/// or filtering by it calls, agrees with [`ScheduleState`]'s precedence (the first variant that
/// applies wins) on every combination of the facts it reads: pause, claimability, claim (none,
/// held, expired) and cursor (none, past, future). Among them a paused row holding an expired
/// claim (paused), a disabled row that is due (disabled) and a claimed row that is due (claimed).
/// `schedule_due_in_ms()` is null exactly for the parked rows and the rows without a cursor.
#[tokio::test]
async fn schedule_state_follows_the_precedence_of_schedule_state() {
    use qlsched::store::read::ScheduleState;

    #[derive(Clone, Copy, Debug)]
    enum Claim {
        Free,
        Held,
        Expired,
    }
    #[derive(Clone, Copy, Debug)]
    enum Cursor {
        Unset,
        Past,
        Future,
    }
    /// Whether `state` describes a row with these facts, read off the variant's documentation.
    fn applies(
        state: ScheduleState,
        paused: bool,
        claimable: bool,
        claim: Claim,
        cursor: Cursor,
    ) -> bool {
        match state {
            ScheduleState::Paused => paused,
            ScheduleState::Disabled => !claimable,
            ScheduleState::Claimed => matches!(claim, Claim::Held),
            ScheduleState::ExpiredClaim => matches!(claim, Claim::Expired),
            ScheduleState::Uninitialized => matches!(cursor, Cursor::Unset),
            ScheduleState::Due => matches!(cursor, Cursor::Past),
            ScheduleState::NotDue => matches!(cursor, Cursor::Future),
        }
    }

    let db = TestDb::new().await;
    let client = db.client().await;
    let mut cases = Vec::new();
    for paused in [false, true] {
        for claimable in [true, false] {
            for claim in [Claim::Free, Claim::Held, Claim::Expired] {
                for cursor in [Cursor::Unset, Cursor::Past, Cursor::Future] {
                    cases.push((paused, claimable, claim, cursor));
                }
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (paused, claimable, claim, cursor) in cases {
        let row = client
            .query_one(
                "SELECT schedule_state(CASE WHEN $1 THEN now_ms() - 1000 END, $2,
                                       CASE WHEN $3 <> 'free' THEN gen_random_uuid() END,
                                       CASE $3 WHEN 'held' THEN now_ms() + 30000
                                               WHEN 'expired' THEN now_ms() - 1 END,
                                       CASE $4 WHEN 'past' THEN now_ms() - 60000
                                               WHEN 'future' THEN now_ms() + 60000 END),
                        schedule_due_in_ms($2, CASE $4 WHEN 'past' THEN now_ms() - 60000
                                                       WHEN 'future' THEN now_ms() + 60000 END)",
                &[
                    &paused,
                    &claimable,
                    &format!("{claim:?}").to_lowercase(),
                    &format!("{cursor:?}").to_lowercase(),
                ],
            )
            .await
            .expect("schedule_state");
        let facts =
            format!("paused {paused}, claimable {claimable}, {claim:?} claim, {cursor:?} cursor");
        let state: String = row.get(0);
        let expected = ScheduleState::ALL
            .into_iter()
            .find(|state| applies(*state, paused, claimable, claim, cursor))
            .expect("a state applies to every row");
        assert_eq!(state, expected.as_str(), "{facts}");
        seen.insert(state);
        let due_in_ms: Option<i64> = row.get(1);
        match (claimable, cursor) {
            (true, Cursor::Past) => assert_eq!(due_in_ms, Some(-60_000), "{facts}"),
            (true, Cursor::Future) => assert_eq!(due_in_ms, Some(60_000), "{facts}"),
            _ => assert_eq!(due_in_ms, None, "{facts}"),
        }
    }
    // Every state is some combination's, so the table covers each branch of the CASE.
    assert_eq!(seen.len(), ScheduleState::ALL.len(), "{seen:?}");
    // The named edges: a claim that expires at this very instant is expired, and a cursor at
    // this very instant is due.
    for (args, expected) in [
        (
            "NULL, true, gen_random_uuid(), now_ms(), now_ms() + 1",
            "expired_claim",
        ),
        ("NULL, true, NULL, NULL, now_ms()", "due"),
        (
            "now_ms(), true, gen_random_uuid(), now_ms() - 1, now_ms() - 1",
            "paused",
        ),
        ("NULL, false, NULL, NULL, now_ms() - 1", "disabled"),
    ] {
        let state: String = client
            .query_one(format!("SELECT schedule_state({args})").as_str(), &[])
            .await
            .expect("edge")
            .get(0);
        assert_eq!(state, expected, "schedule_state({args})");
    }
}
