//! `qlsched top` against a real database: the expiry behind `e` clears exactly the fenced claim,
//! the pause behind `p` goes through `store::control` (an observer's login is refused), the
//! replicas panel reads the registry, the header knows a primary, and the real binary in a real
//! terminal (tmux), with replicas running, shows the cluster, pauses and resumes a trigger, and
//! restores the terminal. Its frames and keys are tested in `src/tui` (snapshots, one test per
//! key).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use qlsched::core::TriggerName;
use qlsched::core::minutes::lag_bucket;
use qlsched::store::StoreError;
use qlsched::store::observe::ServerRole;
use qlsched::tui::input::{Effect, handle_key};
use qlsched::tui::load::{
    expire, pause_notice, pause_or_resume, read_snapshot, read_snapshot_over,
};
use qlsched::tui::state::{App, Modal, PanelRow};

use crate::util::{
    LoginRole, PROMPT, TestDb, Tmux, assert_invariants, bin, code, eventually, manifest, qlsched,
    schema, stderr, stdout,
};

fn press(app: &mut App, c: char) -> Option<Effect> {
    handle_key(app, KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

/// Gives `trigger` a claim of `owner` whose lease ends `lease_left_ms` from now (negative: ended).
async fn hold(db: &TestDb, trigger: &str, owner: &str, lease_left_ms: i64) {
    db.client()
        .await
        .execute(
            "UPDATE trigger_schedules
             SET claim_owner = $2, claim_token = gen_random_uuid(), claim_version = claim_version + 1,
                 claim_expires_at_ms = now_ms() + $3, state_version = state_version + 1,
                 updated_at_ms = now_ms() - 5000
             WHERE project_id = 'p' AND trigger_id = $1",
            &[&trigger, &owner, &lease_left_ms],
        )
        .await
        .expect("hold a claim");
}

async fn claim_columns(db: &TestDb, trigger: &str) -> (Option<String>, i64, i64) {
    let row = db
        .client()
        .await
        .query_one(
            "SELECT claim_owner, claim_version, state_version FROM trigger_schedules
             WHERE project_id = 'p' AND trigger_id = $1",
            &[&trigger],
        )
        .await
        .expect("schedule row");
    (row.get(0), row.get(1), row.get(2))
}

/// `--columns` is checked before anything is opened: an unknown column exits 2 naming it and
/// the columns there are, with no database to reach (the URL points nowhere).
#[test]
fn an_unknown_column_exits_2_naming_it_before_connecting() {
    let output = qlsched(
        None,
        &[
            "-D",
            "postgres://nobody@127.0.0.1:1/none",
            "top",
            "--columns",
            "state,lease,bogus",
        ],
        None,
    );
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    let said = stderr(&output);
    assert!(
        said.contains("unknown column `bogus` in --columns"),
        "{said}"
    );
    assert!(
        said.contains("mark, trigger, state, next, lag, owner"),
        "{said}"
    );
    assert!(!said.contains("connect"), "{said}");
}

#[test]
fn top_without_a_terminal_exits_2_and_points_to_inspect() {
    let output = qlsched(None, &["top"], None);
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    assert!(
        stderr(&output).contains("qlsched inspect"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn e_and_y_expire_exactly_the_fenced_claim() {
    let db = TestDb::new().await;
    db.publish(&manifest(serde_json::json!([
        { "id": "dead", "task": "t", "cron": "0 0 1 1 *" },
        { "id": "alive", "task": "t", "cron": "0 0 1 1 *" }
    ])))
    .await;
    hold(&db, "dead", "gone-replica", -3_000).await;
    hold(&db, "alive", "live-replica", 60_000).await;
    let store = db.store("qlsched top test").await;

    let mut app = App::new(db.url(), "qlsched".to_owned(), false, false);
    app.apply_snapshot(read_snapshot(&store, None).await.expect("snapshot"));
    let dead = TriggerName::new("p", "dead");
    app.selected = Some(dead.clone());
    assert_eq!(
        app.selected_row().map(|r| r.trigger_id.as_str()),
        Some("dead")
    );
    assert_eq!(press(&mut app, 'e'), None);
    let Modal::ConfirmExpire(shown) = app.modal.clone() else {
        panic!("e asks first");
    };
    assert_eq!(shown.fence.owner, "gone-replica");
    let Some(Effect::Expire(request)) = press(&mut app, 'y') else {
        panic!("y confirms");
    };
    assert_eq!(request, shown, "what is expired is exactly what was shown");

    let (_, dead_version, dead_state) = claim_columns(&db, "dead").await;
    let alive_before = claim_columns(&db, "alive").await;
    let done = expire(&store, &request, "tester@top")
        .await
        .expect("expire");
    assert_eq!(done.claim_version, dead_version + 1);
    assert_eq!(
        claim_columns(&db, "dead").await,
        (None, dead_version + 1, dead_state + 1),
        "claim cleared, both versions moved on so the old holder's admission fails"
    );
    assert_eq!(
        claim_columns(&db, "alive").await,
        alive_before,
        "the other claim untouched"
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM schedule_audit WHERE action = 'expire' AND trigger_id = 'dead' \
             AND actor = 'tester@top' AND fence_before->>'owner' = 'gone-replica'"
        )
        .await,
        1,
        "audited"
    );

    // A claim that moved between the dialog and the confirmation is left alone.
    app.apply_snapshot(read_snapshot(&store, None).await.expect("snapshot"));
    app.selected = Some(TriggerName::new("p", "alive"));
    press(&mut app, 'e');
    let Some(Effect::Expire(stale)) = press(&mut app, 'y') else {
        panic!("y confirms");
    };
    hold(&db, "alive", "live-replica", 60_000).await;
    let moved = claim_columns(&db, "alive").await;
    let refused = expire(&store, &stale, "tester@top").await;
    assert!(
        matches!(refused, Err(StoreError::FenceRejected(_))),
        "{refused:?}"
    );
    assert_eq!(claim_columns(&db, "alive").await, moved);
}

/// `E` then `y` expires every claim of the selected row's owner, valid or past its lease, each
/// audited, as `expire --owner` does, and leaves another owner's claim alone; `--read-only`
/// refuses the key.
#[tokio::test]
async fn shift_e_and_y_expire_every_claim_of_one_owner() {
    let db = TestDb::new().await;
    db.publish(&manifest(serde_json::json!([
        { "id": "a", "task": "t", "cron": "0 0 1 1 *" },
        { "id": "b", "task": "t", "cron": "0 0 1 1 *" },
        { "id": "c", "task": "t", "cron": "0 0 1 1 *" },
        { "id": "other", "task": "t", "cron": "0 0 1 1 *" }
    ])))
    .await;
    hold(&db, "a", "hung-replica", 20_000).await;
    hold(&db, "b", "hung-replica", 20_000).await;
    hold(&db, "c", "hung-replica", -2_000).await;
    hold(&db, "other", "live-replica", 60_000).await;
    let store = db.store("qlsched top test").await;
    let mut app = App::new(db.url(), "qlsched".to_owned(), false, false);
    app.apply_snapshot(read_snapshot(&store, None).await.expect("snapshot"));
    app.selected = Some(TriggerName::new("p", "b"));
    assert_eq!(press(&mut app, 'E'), None);
    let Modal::ConfirmExpireOwner(shown) = app.modal.clone() else {
        panic!("E asks first: {:?}", app.modal);
    };
    assert_eq!(
        (shown.owner.as_str(), shown.valid, shown.expired),
        ("hung-replica", 2, 1)
    );
    let Some(Effect::ExpireOwner(request)) = press(&mut app, 'y') else {
        panic!("y confirms");
    };
    let other = claim_columns(&db, "other").await;
    let done = qlsched::tui::load::expire_owner(&store, &request, "tester@top")
        .await
        .expect("expire the owner's claims");
    assert_eq!(done.len(), 3);
    for trigger in ["a", "b", "c"] {
        assert_eq!(
            claim_columns(&db, trigger).await.0,
            None,
            "{trigger} cleared"
        );
    }
    assert_eq!(
        claim_columns(&db, "other").await,
        other,
        "another owner untouched"
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM schedule_audit WHERE action = 'expire' AND actor = 'tester@top' \
             AND fence_before->>'owner' = 'hung-replica'"
        )
        .await,
        3,
        "each expiry audited"
    );

    let mut readonly = App::new(db.url(), "qlsched".to_owned(), true, false);
    readonly.apply_snapshot(read_snapshot(&store, None).await.expect("snapshot"));
    readonly.selected = Some(TriggerName::new("p", "other"));
    assert_eq!(press(&mut readonly, 'E'), None);
    assert_eq!(readonly.modal, Modal::None, "read-only: no dialog");
}

/// The pause columns and both versions of `trigger`'s row.
async fn pause_columns(db: &TestDb, trigger: &str) -> (Option<String>, Option<String>, i64, i64) {
    let row = db
        .client()
        .await
        .query_one(
            "SELECT paused_by, pause_reason, claim_version, state_version FROM trigger_schedules
             WHERE project_id = 'p' AND trigger_id = $1",
            &[&trigger],
        )
        .await
        .expect("schedule row");
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

/// `p` then `y` pauses the selected row through `store::control` (its claim voided, both versions
/// moved on, audited), the snapshot then shows it paused apart from disabled rows, `p` on it
/// resumes it; an observer's login is refused with a clear line and changes nothing.
#[tokio::test]
async fn p_and_y_pause_and_resume_through_store_control_and_an_observer_is_refused() {
    let db = TestDb::new().await;
    db.publish(&manifest(serde_json::json!([
        { "id": "busy", "task": "t", "cron": "0 0 1 1 *" },
        { "id": "off", "task": "t", "cron": "0 0 1 1 *", "enabled": false }
    ])))
    .await;
    hold(&db, "busy", "live-replica", 60_000).await;
    let store = db.store("qlsched top test").await;
    let mut app = App::new(db.url(), "qlsched".to_owned(), false, false);
    app.apply_snapshot(read_snapshot(&store, None).await.expect("snapshot"));
    app.selected = Some(TriggerName::new("p", "busy"));

    // An observer's login: asked and confirmed, refused by the database, nothing changed.
    let observer = LoginRole::create(&db, "qlsched_observer").await;
    let settings =
        qlsched::store::ConnectionSettings::resolve(Some(&observer.url(&db))).expect("url");
    let observer_store = qlsched::store::Store::open(&settings, &schema(), "observer top", 1)
        .await
        .expect("observer pool");
    press(&mut app, 'p');
    let Some(Effect::Pause(request)) = press(&mut app, 'y') else {
        panic!("y confirms");
    };
    assert!(!request.resume);
    let before = pause_columns(&db, "busy").await;
    let refused = pause_or_resume(&observer_store, &request, "observer@top").await;
    assert!(
        matches!(refused, Err(StoreError::PermissionDenied(_))),
        "{refused:?}"
    );
    let notice = pause_notice(&request, &refused);
    assert!(
        notice.is_error
            && notice
                .text
                .starts_with("not paused: this login may not pause")
            && notice.text.contains("qlsched_admin"),
        "{notice:?}"
    );
    assert_eq!(pause_columns(&db, "busy").await, before, "nothing changed");

    let (_, _, claim_version, state_version) = before;
    let paused = pause_or_resume(&store, &request, "tester@top")
        .await
        .expect("pause");
    assert_eq!(paused.changed.len(), 1);
    assert!(
        pause_notice(&request, &Ok(paused))
            .text
            .contains("the claim of live-replica is voided"),
    );
    assert_eq!(
        pause_columns(&db, "busy").await,
        (
            Some("tester@top".to_owned()),
            Some("paused from qlsched top".to_owned()),
            claim_version + 1,
            state_version + 1
        ),
        "paused, the claim voided: both versions moved on, so its holder's admission fails"
    );
    assert_eq!(claim_columns(&db, "busy").await.0, None);
    assert_eq!(
        db.count(
            "SELECT count(*) FROM schedule_audit WHERE action = 'pause' AND trigger_id = 'busy' \
             AND actor = 'tester@top' AND fence_before->>'owner' = 'live-replica'"
        )
        .await,
        1,
        "audited with the fence it voided"
    );

    let snapshot = read_snapshot(&store, None).await.expect("snapshot");
    let counts = &snapshot.summary.counts;
    assert_eq!(
        (counts.paused, counts.disabled),
        (1, 1),
        "paused and disabled counted apart"
    );
    let row = snapshot
        .row_of(&TriggerName::new("p", "busy"))
        .expect("row loaded");
    assert_eq!(
        row.paused.as_ref().map(|p| p.paused_by.as_str()),
        Some("tester@top")
    );
    assert!(
        snapshot
            .row_of(&TriggerName::new("p", "off"))
            .is_some_and(|r| r.paused.is_none())
    );
    app.apply_snapshot(snapshot);
    press(&mut app, 'p');
    let Some(Effect::Pause(request)) = press(&mut app, 'y') else {
        panic!("y confirms");
    };
    assert!(request.resume, "p on a paused row resumes it");
    let resumed = pause_or_resume(&store, &request, "tester@top")
        .await
        .expect("resume");
    assert_eq!(resumed.changed.len(), 1);
    assert_eq!(pause_columns(&db, "busy").await.0, None, "resumed");
    assert_eq!(
        db.count("SELECT count(*) FROM schedule_audit WHERE action = 'resume'")
            .await,
        1
    );
    // A second resume of the same row finds it not paused, and says so.
    let again = pause_or_resume(&store, &request, "tester@top")
        .await
        .expect("resume again");
    assert!(
        pause_notice(&request, &Ok(again))
            .text
            .contains("not paused (any more): nothing changed")
    );
}

/// The replicas panel comes from the registry: an idle live replica is listed, a replica whose
/// heartbeat stopped is stale, a manual claimant is an operator; on a primary the header says
/// nothing of a standby, in `top` and in `inspect` (whose JSON names the role).
#[tokio::test]
async fn the_replicas_panel_reads_the_registry_and_a_primary_is_no_standby() {
    let db = TestDb::new().await;
    db.publish(&manifest(serde_json::json!([
        { "id": "calm", "task": "t", "cron": "0 0 1 1 *" }
    ])))
    .await;
    let client = db.client().await;
    for owner in ["idle-replica", "dead-replica"] {
        qlsched::store::replicas::register(
            &client,
            &qlsched::store::replicas::Registration {
                owner,
                host: "node-1",
                pid: 1,
                version: "test",
                schema_version: qlsched::store::migrate::latest_version(),
                lease_ms: 5_000,
                cadence_ms: 200,
                forget_after_ms: 900_000,
            },
        )
        .await
        .expect("register");
    }
    client
        .execute(
            "UPDATE replicas SET heartbeat_at_ms = now_ms() - 60000 WHERE owner = 'dead-replica'",
            &[],
        )
        .await
        .expect("age a heartbeat");
    hold_by_hand(&db, "p/calm", "ops-bob");

    let store = db.store("qlsched top test").await;
    let snapshot = read_snapshot(&store, None).await.expect("snapshot");
    assert_eq!(snapshot.summary.server, ServerRole::Primary);
    let rows: Vec<String> = snapshot
        .panel_rows()
        .iter()
        .map(|row| match row {
            PanelRow::Replica { replica, .. } => format!("{} {}", replica.owner, replica.liveness),
            PanelRow::Other { owner, stopped } => {
                format!(
                    "{} {}",
                    owner.owner,
                    if *stopped { "stopped" } else { "operator" }
                )
            }
        })
        .collect();
    assert_eq!(
        rows,
        [
            "dead-replica stale",
            "idle-replica live",
            "ops-bob operator"
        ]
    );

    let summary: serde_json::Value = serde_json::from_str(&stdout(&qlsched(
        Some(&db),
        &["inspect", "-o", "json"],
        None,
    )))
    .expect("inspect -o json");
    assert_eq!(summary["server"], serde_json::json!({ "role": "primary" }));
    let text = stdout(&qlsched(Some(&db), &["inspect"], None));
    assert!(!text.contains("standby"), "{text}");
}

/// A replica with a short lease and cadence, killed when the test ends.
fn replica(db: &TestDb, owner: &str) -> crate::util::ReplicaProcess {
    crate::util::spawn_run(
        &db.url(),
        &["--owner", owner, "--lease", "5s", "--cadence", "200ms"],
    )
}

/// `trigger` claimed and held by hand by `owner`, as an operator does with `qlsched claim --hold`.
fn hold_by_hand(db: &TestDb, trigger: &str, owner: &str) {
    let held = qlsched(
        Some(db),
        &["claim", trigger, "--hold", "--owner", owner],
        None,
    );
    assert_eq!(code(&held), 0, "{}", stderr(&held));
}

/// The selected `p/tock` row of the schedules table (the header names the filter `/p/tock`).
const TOCK_ROW: &str = "›  p/tock";

/// Waits until `p/tock` is paused (or not) in the database, by `top`'s operator.
async fn paused_by_top(db: &TestDb, paused: bool) {
    let what = if paused {
        "p/tock paused by top"
    } else {
        "p/tock resumed"
    };
    eventually(std::time::Duration::from_secs(30), what, || async {
        let paused_by: Option<String> = db
            .client()
            .await
            .query_one(
                "SELECT paused_by FROM trigger_schedules WHERE project_id = 'p' AND trigger_id = 'tock'",
                &[],
            )
            .await
            .expect("schedule row")
            .get(0);
        paused_by.is_some() == paused
    })
    .await;
}

fn line_with<'a>(screen: &'a str, needle: &str) -> &'a str {
    screen.lines().find(|l| l.contains(needle)).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread")]
async fn top_in_a_real_terminal_shows_the_cluster_and_restores_the_terminal() {
    let db = TestDb::new().await;
    db.publish(&manifest(serde_json::json!([
        { "id": "tick", "task": "t", "cron": "* * * * * *" },
        { "id": "tock", "task": "t", "cron": "*/2 * * * * *" },
        { "id": "stuck", "task": "t", "cron": "0 0 1 1 *" }
    ])))
    .await;
    // A claim of a replica that is not running: its countdown runs for a minute.
    hold(&db, "stuck", "stuck-replica", 60_000).await;
    let _replicas = [replica(&db, "replica-a"), replica(&db, "replica-b")];

    let tmux = Tmux::start("top", 120, 40);
    tmux.wait_for("the shell prompt", |s| s.contains(PROMPT));
    let command = format!(
        "{} -D '{}' top --refresh 250ms; echo \"top exited $?\"",
        bin().display(),
        db.url()
    );
    tmux.send(&[&command, "Enter"]);
    let first = tmux.wait_for("replicas and triggers", |s| {
        s.contains("Replicas: 2 live")
            && s.contains("stuck-replica")
            && (s.contains("replica-a") || s.contains("replica-b"))
            && s.contains("p/tick")
            && s.contains("p/tock")
    });
    let countdown = line_with(&first, "p/stuck").to_owned();
    assert!(countdown.contains("claimed"), "{first}");
    let second = tmux.wait_for("the countdown to move", |s| {
        let now = line_with(s, "p/stuck");
        !now.is_empty() && now != countdown
    });
    assert!(second.contains("stuck-replica"));

    tmux.send(&["?"]);
    tmux.wait_for("the help overlay", |s| s.contains("Keys and columns"));
    tmux.send(&["Escape"]);
    tmux.wait_for("the help to close", |s| !s.contains("Keys and columns"));

    // Esc with nothing open does not quit: only q and Ctrl-C do.
    tmux.send(&["Escape"]);
    std::thread::sleep(std::time::Duration::from_millis(800));
    let still = tmux.wait_for("the dashboard after Esc", |s| s.contains("p/tick"));
    assert!(!still.contains("top exited"), "{still}");

    // p pauses the selected trigger after y, and p on it again resumes it.
    tmux.send(&["/", "p/tock", "Enter"]);
    tmux.wait_for("the filter", |s| {
        s.contains("filter /p/tock") && !s.contains("p/tick")
    });
    tmux.send(&["p"]);
    tmux.wait_for("the pause dialog", |s| s.contains("Pause p/tock?"));
    tmux.send(&["y"]);
    paused_by_top(&db, true).await;
    let shown = tmux.wait_for("the row marked paused", |s| {
        line_with(s, TOCK_ROW).contains("paused") && s.contains("paused 1")
    });
    assert!(!shown.contains("top exited"), "{shown}");
    tmux.send(&["p"]);
    tmux.wait_for("the resume dialog", |s| s.contains("Resume p/tock?"));
    tmux.send(&["y"]);
    paused_by_top(&db, false).await;
    tmux.wait_for("the row no longer paused", |s| {
        !line_with(s, TOCK_ROW).contains("paused") && s.contains("paused 0")
    });

    tmux.send(&["q"]);
    let after = tmux.wait_for("top to exit", |s| s.contains("top exited 0"));
    assert!(
        !after.contains("Replicas:") && after.contains(PROMPT),
        "the alternate screen is left and the shell is back:\n{after}"
    );
    assert_invariants(&db).await;
}

/// The `mis` column counts the misfire records of each row's current trigger revision that are
/// still in retention: an older revision's and an expired record do not count, and a count stops
/// at its cap. The owners list counts a manual claimant's claims as taken by hand.
#[tokio::test]
async fn misfire_counts_follow_the_revision_and_the_retention_and_manual_claimants_show() {
    let db = TestDb::new().await;
    db.publish(&manifest(serde_json::json!([
        { "id": "late", "task": "t", "cron": "0 0 1 1 *" },
        { "id": "many", "task": "t", "cron": "0 0 1 1 *" },
        { "id": "calm", "task": "t", "cron": "0 0 1 1 *" }
    ])))
    .await;
    let retention = qlsched::core::MISFIRE_RETENTION_MS;
    db.client()
        .await
        .execute(
            "INSERT INTO misfires (project_id, trigger_id, trigger_revision, first_occurrence_ms,
                 last_occurrence_ms, occurrences, occurrences_exact, policy, reason, owner,
                 decided_at_ms, recorded_at_ms)
             SELECT 'p', t, r, 0, 0, 1, true, 'skip', 'beyond_grace', 'x', 0, at
             FROM (VALUES ('late', 1, now_ms()), ('late', 1, now_ms() - 1000),
                          ('late', 2, now_ms()), ('late', 1, now_ms() - $1 - 1000)) v(t, r, at)
             UNION ALL
             SELECT 'p', 'many', 1, 0, 0, 1, true, 'skip', 'beyond_grace', 'x', 0, now_ms()
             FROM generate_series(1, 150)",
            &[&retention],
        )
        .await
        .expect("misfire records");
    hold_by_hand(&db, "p/calm", "ops-bob");
    let store = db.store("qlsched top test").await;
    let snapshot = read_snapshot(&store, None).await.expect("snapshot");
    assert_eq!(
        snapshot.misfires.get(&TriggerName::new("p", "late")),
        Some(&2)
    );
    assert_eq!(
        snapshot.misfires.get(&TriggerName::new("p", "many")),
        Some(&qlsched::store::misfires::COUNT_CAP)
    );
    assert_eq!(snapshot.misfires.get(&TriggerName::new("p", "calm")), None);
    let bob = snapshot
        .summary
        .owners
        .iter()
        .find(|o| o.owner == "ops-bob")
        .expect("the manual claimant is listed");
    assert_eq!((bob.claims, bob.manual_claims), (1, 1));
}

/// The outage facts `top`'s banner decides from, read from a real database: rows waiting with no
/// replica ever started, then with the only replica stale, then forgotten by the registry, then
/// deleted from it, then a live replica with a row past its grace, then one past no grace but waiting longer than the minute with nothing admitted.
#[tokio::test]
async fn the_outage_banner_names_each_outage_from_the_database() {
    use qlsched::core::outage::OutageKind;
    use qlsched::store::replicas::{Registration, register};

    let db = TestDb::new().await;
    db.publish(&manifest(serde_json::json!([
        { "id": "tick", "task": "t", "cron": "* * * * * *" }
    ])))
    .await;
    let store = db.store("qlsched top test").await;
    let outage = || async {
        read_snapshot(&store, None)
            .await
            .expect("snapshot")
            .outage()
    };

    // Nothing ever ran: the row has no cursor yet, and the next command starts a replica.
    let never = outage().await.expect("an outage before the first replica");
    assert_eq!(never.kind, OutageKind::NoLiveReplica);
    assert_eq!(never.next_command, "qlsched run");
    assert!(never.headline.contains("1 row due"), "{never:?}");

    let client = db.client().await;
    let registration = |owner| Registration {
        owner,
        host: "node-1",
        pid: 1,
        version: "test",
        schema_version: qlsched::store::migrate::latest_version(),
        lease_ms: 5_000,
        // A minute's cadence keeps a registered replica live for the whole test.
        cadence_ms: 60_000,
        forget_after_ms: qlsched::core::FORGET_STALE_AFTER.as_millis() as i64,
    };
    register(&client, &registration("dead-replica"))
        .await
        .expect("register");
    let age = |ms: i64| {
        let client = &client;
        async move {
            client
                .execute(
                    "UPDATE replicas SET heartbeat_at_ms = now_ms() - $1
                     WHERE owner = 'dead-replica'",
                    &[&ms],
                )
                .await
                .expect("age a heartbeat");
        }
    };
    // Stale (no heartbeat for ten minutes) but still remembered by the registry.
    age(600_000).await;
    let dead = outage()
        .await
        .expect("an outage with the only replica stale");
    assert_eq!(dead.kind, OutageKind::NoLiveReplica);
    assert_eq!(dead.next_command, "qlsched inspect replicas");
    assert!(dead.cause.contains("stopped, stalled or stale"), "{dead:?}");

    // An hour without a heartbeat: past its --forget-stale-after, the registry forgot it, but a
    // replica did run here, which the banner must still say.
    age(3_600_000).await;
    let forgotten = outage()
        .await
        .expect("an outage with the only replica forgotten");
    assert_eq!(forgotten.kind, OutageKind::NoLiveReplica);
    assert_eq!(forgotten.next_command, "qlsched inspect replicas");
    assert!(!forgotten.cause.contains("never"), "{forgotten:?}");
    assert!(forgotten.cause.contains("forgot"), "{forgotten:?}");

    // Its row deleted too, a cursor a replica initialized still says one ran.
    qlsched::store::replicas::forget(&client)
        .await
        .expect("forget");
    client
        .execute(
            "UPDATE trigger_schedules
             SET next_fire_at_ms = now_ms() - 120000, accounted_from_ms = now_ms() - 120000,
                 updated_at_ms = now_ms()
             WHERE project_id = 'p' AND trigger_id = 'tick'",
            &[],
        )
        .await
        .expect("a cursor two minutes late");
    let deleted = outage().await.expect("an outage with the registry empty");
    assert_eq!(deleted.kind, OutageKind::NoLiveReplica);
    assert_eq!(deleted.next_command, "qlsched inspect replicas");

    register(&client, &registration("live-replica"))
        .await
        .expect("register");
    let late = outage().await.expect("a row past its 60 s grace");
    assert_eq!(late.kind, OutageKind::OverdueBeyondGrace);
    assert!(late.headline.contains("late by 2m"), "{late:?}");

    client
        .execute(
            "UPDATE triggers SET misfire_grace_ms = 3600000
             WHERE project_id = 'p' AND trigger_id = 'tick'",
            &[],
        )
        .await
        .expect("an hour's grace");
    let stopped = outage().await.expect("admissions stopped");
    assert_eq!(stopped.kind, OutageKind::AdmissionsStopped);
    assert_eq!(stopped.next_command, "qlsched inspect replicas");
}

/// An hour of what a replica wrote minute by minute (as its heartbeats write `replica_minutes`),
/// before `top` opened: 60 admissions a minute, 30 ms late for the first forty minutes and
/// 2.5 s late for the last twenty, a misfire record of 7 occurrences half an hour ago, two fence
/// losses 25 minutes ago and a failed round 10 minutes ago.
async fn an_hour_of_history(db: &TestDb) {
    let client = db.client().await;
    let bucket = |lag_ms: i64| i32::try_from(lag_bucket(lag_ms)).expect("small") + 1;
    client
        .execute(
            "INSERT INTO replica_minutes (minute_ms, owner, admissions, misfires,
                                          occurrences_passed_over, fence_losses, failed_rounds,
                                          lag_counts, lag_max_ms)
             SELECT now_ms() - now_ms() % 60000 - i * 60000, 'history', 60,
                    (i = 30)::int, CASE WHEN i = 30 THEN 7 ELSE 0 END,
                    CASE WHEN i = 25 THEN 2 ELSE 0 END, (i = 10)::int,
                    ARRAY(SELECT CASE WHEN k = CASE WHEN i < 20 THEN $2::int ELSE $1::int END
                                      THEN 60 ELSE 0 END
                          FROM generate_series(1, 40) k ORDER BY k),
                    CASE WHEN i < 20 THEN 2500 ELSE 30 END
             FROM generate_series(0, 59) i",
            &[&bucket(30), &bucket(2_500)],
        )
        .await
        .expect("an hour of minutes");
}

/// `top` opened on a database with an hour of history shows it in the trend header at its
/// first refresh (the refresh is 10 s, and the header is read sooner), with the outage banner
/// above it, since no replica ever ran here.
#[tokio::test(flavor = "multi_thread")]
async fn top_in_a_real_terminal_shows_an_hour_of_history_at_its_first_refresh() {
    let db = TestDb::new().await;
    db.publish(&manifest(serde_json::json!([
        { "id": "tick", "task": "t", "cron": "* * * * * *" }
    ])))
    .await;
    an_hour_of_history(&db).await;

    let tmux = Tmux::start("top-history", 120, 40);
    tmux.wait_for("the shell prompt", |s| s.contains(PROMPT));
    let command = format!(
        "{} -D '{}' top --refresh 10s; echo \"top exited $?\"",
        bin().display(),
        db.url()
    );
    let started = std::time::Instant::now();
    tmux.send(&[&command, "Enter"]);
    let screen = tmux.wait_for("the trend header", |s| {
        s.contains("Trends, last 1h00m") && line_with(s, "misfired").contains("7 in the window")
    });
    // What the replicas did before `top` opened, exactly.
    assert!(
        line_with(&screen, "fence losses").contains("2 in the window")
            && line_with(&screen, "failed rnds").contains("1 in the window"),
        "{screen}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "read after the first refresh:\n{screen}"
    );
    assert!(
        line_with(&screen, "admitted").contains("60 now, max 60 a bar"),
        "{screen}"
    );
    assert!(
        line_with(&screen, "lag p99").contains("max 2.5s"),
        "{screen}"
    );
    let p50 = line_with(&screen, "lag p50");
    assert!(p50.contains("2.5s now, max 2.5s"), "{screen}");
    // Forty minutes of low bars, then twenty of high ones.
    assert!(p50.contains("▃▃▃▃") && p50.contains("████"), "{screen}");
    assert!(
        screen.contains("OUTAGE: no live replica, 1 row due")
            && screen.contains("next:  qlsched run"),
        "{screen}"
    );

    // t folds the trends away, and unfolds them.
    tmux.send(&["t"]);
    tmux.wait_for("the trends folded", |s| !s.contains("Trends, last"));
    tmux.send(&["t"]);
    tmux.wait_for("the trends back", |s| s.contains("Trends, last"));
    tmux.send(&["q"]);
    tmux.wait_for("top to exit", |s| s.contains("top exited 0"));
}

/// Two replicas admitting, then both killed as a crash would: the banner names the outage, its
/// cause and the next command within the replicas' lease, and the rows they held say STALE.
#[tokio::test(flavor = "multi_thread")]
async fn top_in_a_real_terminal_shows_the_outage_banner_when_every_replica_dies() {
    let db = TestDb::new().await;
    db.publish(&manifest(serde_json::json!([
        { "id": "tick", "task": "t", "cron": "* * * * * *" },
        { "id": "tock", "task": "t", "cron": "* * * * * *" }
    ])))
    .await;
    let replicas = [replica(&db, "replica-a"), replica(&db, "replica-b")];

    let tmux = Tmux::start("top-outage", 120, 40);
    tmux.wait_for("the shell prompt", |s| s.contains(PROMPT));
    let command = format!(
        "{} -D '{}' top --refresh 250ms; echo \"top exited $?\"",
        bin().display(),
        db.url()
    );
    tmux.send(&[&command, "Enter"]);
    let working = tmux.wait_for("two live replicas admitting", |s| {
        s.contains("Replicas: 2 live") && s.contains("p/tick") && !s.contains("OUTAGE")
    });
    assert!(!working.contains("OUTAGE"), "{working}");

    for replica in replicas {
        replica.kill();
    }
    let outage = tmux.wait_for("the outage banner", |s| {
        s.contains("OUTAGE: no live replica") && s.contains("Replicas: 0 live")
    });
    assert!(
        outage.contains("cause: every replica in the registry is stopped, stalled or stale")
            && outage.contains("next:  qlsched inspect replicas"),
        "{outage}"
    );
    // The banner is the first thing under the header.
    assert!(
        outage.lines().nth(2).is_some_and(|l| l.contains("OUTAGE")),
        "{outage}"
    );
    tmux.send(&["q"]);
    tmux.wait_for("top to exit", |s| s.contains("top exited 0"));
}

/// Holds `table` in ACCESS EXCLUSIVE mode on a session of its own until the value is dropped
/// (or `release` rolls it back): what a migration or a VACUUM FULL does to `top`'s reads.
struct TableLock(tokio_postgres::Client);

impl TableLock {
    async fn take(db: &TestDb, table: &str) -> TableLock {
        let client = db.client().await;
        client
            .batch_execute(&format!(
                "BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"
            ))
            .await
            .expect("lock");
        TableLock(client)
    }

    async fn release(self) {
        self.0.batch_execute("ROLLBACK").await.expect("unlock");
    }
}

/// `top`'s sessions waiting on a lock now.
async fn top_waiting_on_a_lock(db: &TestDb) -> i64 {
    db.count(&format!(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = '{}' AND application_name = 'qlsched top test'
           AND wait_event_type = 'Lock'",
        db.name
    ))
    .await
}

/// A refresh cut by its bound closes its connection instead of handing it back to the pool
/// mid-transaction: on a pool of one connection, the pause sent next is not refused as if on a
/// standby (a READ ONLY transaction left open) nor as an aborted transaction, the statement cut
/// is cancelled (no session of `top` left waiting on the lock), and the next refresh reads. Both
/// reads of a refresh are cut in turn: the snapshot (a lock on the schedule rows) and the
/// trigger's detail (a lock on a table only the detail reads).
#[tokio::test]
async fn a_refresh_cut_by_its_bound_leaves_the_pool_outside_any_transaction() {
    use qlsched::store::read::ScheduleState;
    use qlsched::tui::load::read_snapshot_within;
    use qlsched::tui::state::{LoadRequest, PauseRequest};
    use std::time::Duration;

    let db = TestDb::new().await;
    db.publish(&manifest(serde_json::json!([
        { "id": "watched", "task": "t", "cron": "0 0 1 1 *" }
    ])))
    .await;
    let store = qlsched::store::Store::open(&db.settings, &schema(), "qlsched top test", 1)
        .await
        .expect("a pool of one connection");
    let key = TriggerName::new("p", "watched");
    let request = LoadRequest {
        detail: Some(key.clone()),
        ..LoadRequest::default()
    };
    let mut resume = false;
    for (table, cut) in [
        ("trigger_schedules", "the dashboard's snapshot"),
        ("execution_revisions", "the trigger's detail"),
    ] {
        let lock = TableLock::take(&db, table).await;
        let started = std::time::Instant::now();
        let read = read_snapshot_within(
            &store,
            Some(&key),
            &request,
            None,
            Duration::from_millis(1_500),
        )
        .await;
        // The fault landed: the read waited on the lock until its bound, and it was the read
        // named that was cut.
        match &read {
            Err(StoreError::TimedOut(message)) => {
                assert!(message.starts_with(cut), "{table}: {message}")
            }
            other => panic!("{table}: the refresh was not cut by its bound: {other:?}"),
        }
        assert!(
            started.elapsed() >= Duration::from_millis(1_500)
                && started.elapsed() < Duration::from_secs(5),
            "{table}: cut at {:?}",
            started.elapsed()
        );
        eventually(
            Duration::from_secs(10),
            "the cut statement cancelled",
            || async { top_waiting_on_a_lock(&db).await == 0 },
        )
        .await;
        lock.release().await;

        // The next write and the next read on the pool's one connection: outside any
        // transaction.
        let pause = PauseRequest {
            key: key.clone(),
            resume,
            paused: None,
            claim_owner: None,
            state: ScheduleState::Uninitialized,
        };
        let report = pause_or_resume(&store, &pause, "tester@top")
            .await
            .unwrap_or_else(|error| panic!("{table}: the write after the cut: {error}"));
        assert_eq!(report.changed.len(), 1, "{table}");
        let snapshot =
            read_snapshot_within(&store, Some(&key), &request, None, Duration::from_secs(10))
                .await
                .unwrap_or_else(|error| panic!("{table}: the read after the cut: {error}"));
        assert!(snapshot.detail.is_some(), "{table}");
        resume = !resume;
    }
    assert_invariants(&db).await;
}

/// The trends' sums over the default window (the hour), from the dashboard's own read.
async fn trend_sums(store: &qlsched::store::Store) -> (qlsched::tui::state::Snapshot, [i64; 4]) {
    let snapshot = read_snapshot(store, None).await.expect("snapshot");
    let buckets = &snapshot.trends.buckets;
    let sums = [
        buckets.iter().map(|b| b.admissions).sum(),
        buckets.iter().map(|b| b.misfires).sum(),
        buckets.iter().map(|b| b.fence_losses).sum(),
        buckets.iter().map(|b| b.failed_rounds).sum(),
    ];
    (snapshot, sums)
}

/// A burst of 1,000 admissions within seconds, by two replicas: the trends count exactly 1,000
/// (no sample, no estimate, neither replica counted twice), in the bars of the minute they were
/// claimed in, with the lag's percentiles; the registry says the same.
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_admissions_shows_exactly_in_the_trends() {
    const N: i64 = 1_000;
    let db = TestDb::new().await;
    let ids: Vec<String> = (0..N).map(|i| format!("burst-{i:04}")).collect();
    db.publish(&manifest(serde_json::Value::Array(
        ids.iter()
            .map(|id| serde_json::json!({ "id": id, "task": "t", "cron": "*/30 * * * * *" }))
            .collect(),
    )))
    .await;
    let replicas = [replica(&db, "burst-a"), replica(&db, "burst-b")];
    let cron_runs = "SELECT count(*) FROM runs WHERE origin = 'cron'";
    crate::util::eventually_count(&db, std::time::Duration::from_secs(60), cron_runs, N).await;
    let store = db.store("qlsched top test").await;
    // The burst's last rounds are written by the next heartbeats, within a cadence or two.
    crate::util::eventually(
        std::time::Duration::from_secs(10),
        "the trends to count the burst",
        || async { trend_sums(&store).await.1[0] >= N },
    )
    .await;
    let (snapshot, sums) = trend_sums(&store).await;
    let admitted = db.count(cron_runs).await;
    assert_eq!(admitted, N, "the next burst is 30 s away");
    assert_eq!(sums[0], N, "{:?}", snapshot.trends);
    let registry: i64 = snapshot.summary.replicas.iter().map(|r| r.admissions).sum();
    assert_eq!(registry, N);
    let bars: Vec<&qlsched::store::top::TrendBucket> = snapshot
        .trends
        .buckets
        .iter()
        .filter(|b| b.admissions > 0)
        .collect();
    assert!(
        (1..=2).contains(&bars.len()),
        "a burst of seconds is in one minute's bar, or two across a minute's end: {bars:?}"
    );
    for bar in bars {
        let (p50, p99) = (bar.lag_p50_ms.expect("p50"), bar.lag_p99_ms.expect("p99"));
        assert!(p50 <= p99 && p99 < 30_000, "{bar:?}");
    }
    for replica in replicas {
        replica.stop();
    }
    // Stopped, each replica sent what its last rounds did: the trends count every run the
    // replicas admitted, exactly, and the registry as much.
    let (snapshot, sums) = trend_sums(&store).await;
    assert_eq!(sums[0], db.count(cron_runs).await, "{:?}", snapshot.trends);
    let registry: i64 = snapshot.summary.replicas.iter().map(|r| r.admissions).sum();
    assert_eq!(registry, sums[0]);
    assert_invariants(&db).await;
}

/// Failed rounds a replica had before `top` opened are in the trends at its first read, and
/// the window's sums equal the registry's totals of a replica that started within it: both are
/// written by one statement.
#[tokio::test(flavor = "multi_thread")]
async fn failed_rounds_before_top_opened_are_in_its_first_trends() {
    let db = TestDb::new().await;
    db.publish(&crate::util::every_second(&["a", "victim"]))
        .await;
    db.client()
        .await
        .batch_execute(crate::admission::POISON)
        .await
        .expect("poison");
    let running = replica(&db, "failing");
    crate::util::eventually_count(
        &db,
        std::time::Duration::from_secs(30),
        "SELECT coalesce(max(failed_rounds), 0) FROM replicas WHERE owner = 'failing'",
        1,
    )
    .await;
    running.stop();
    let store = db.store("qlsched top test").await;
    let (snapshot, sums) = trend_sums(&store).await;
    let replica = snapshot
        .summary
        .replicas
        .iter()
        .find(|r| r.owner == "failing")
        .expect("registered");
    assert!(replica.failed_rounds >= 1);
    assert_eq!(sums[3], replica.failed_rounds, "{:?}", snapshot.trends);
    assert_eq!(sums[2], replica.fence_losses);
    assert_eq!(sums[0], replica.admissions);
    assert_eq!(
        sums[0],
        db.count("SELECT count(*) FROM runs WHERE origin = 'cron'")
            .await
    );
    assert_invariants(&db).await;
}

/// The trends read a range of `replica_minutes`' primary key, however long the table: a week of
/// minutes of twenty replicas (its retention), analyzed, and the day's window.
#[tokio::test]
async fn the_trends_read_the_minutes_by_their_primary_key() {
    let db = TestDb::new().await;
    let client = db.client().await;
    client
        .batch_execute(
            "INSERT INTO replica_minutes (minute_ms, owner, admissions, misfires,
                                          occurrences_passed_over, fence_losses, failed_rounds,
                                          lag_counts, lag_max_ms)
             SELECT now_ms() - now_ms() % 60000 - i * 60000, 'replica-' || r, 100, 0, 0, 0, 0,
                    array_fill(2, ARRAY[40]), 50
             FROM generate_series(0, 7 * 1440 - 1) i, generate_series(1, 20) r;
             ANALYZE replica_minutes",
        )
        .await
        .expect("a week of minutes");
    for window_ms in [900_000, 86_400_000] {
        let plan = qlsched::store::top::explain_trends(&client, window_ms)
            .await
            .expect("explain")
            .join("\n");
        assert!(plan.contains("on replica_minutes_pkey"), "{plan}");
        assert!(!plan.contains("Seq Scan on replica_minutes"), "{plan}");
    }
    let store = db.store("qlsched top test").await;
    let (snapshot, sums) = trend_sums(&store).await;
    assert_eq!(snapshot.trends.buckets.len(), 60);
    assert_eq!(sums[0], 60 * 20 * 100);
    // A refresh reads only the buckets not yet settled and keeps the others: the same figures
    // as a whole read, whatever the window.
    for window_ms in [900_000, 86_400_000] {
        let request = qlsched::tui::state::LoadRequest {
            trend_window_ms: window_ms,
            ..Default::default()
        };
        let whole = read_snapshot_over(&store, None, &request, None)
            .await
            .expect("a whole read");
        let from = whole.trends.read_next_from(window_ms);
        assert!(from > whole.trends.buckets[0].start_ms);
        let again = read_snapshot_over(&store, None, &request, Some(&whole.trends))
            .await
            .expect("a read of the unsettled buckets");
        assert_eq!(again.trends.read_from_ms, from);
        let admissions = |t: &qlsched::store::top::Trends| {
            t.buckets.iter().map(|b| b.admissions).collect::<Vec<_>>()
        };
        assert_eq!(admissions(&again.trends), admissions(&whole.trends));
    }
}
