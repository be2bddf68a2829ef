//! `qlsched top` against a real database: the expiry behind `e` clears exactly the fenced claim,
//! and the real binary in a real terminal (tmux), with replicas running, shows the cluster and
//! restores the terminal. Its frames and keys are tested in `src/tui` (snapshots, one test per
//! key).

use std::process::{Child, Command, Stdio};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use qlsched::core::TriggerName;
use qlsched::store::StoreError;
use qlsched::tui::input::{Effect, handle_key};
use qlsched::tui::load::{expire, read_snapshot};
use qlsched::tui::state::{App, Modal};

use crate::util::{PROMPT, TestDb, Tmux, bin, code, manifest, qlsched, stderr};

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

/// A replica as a child process, killed when dropped.
struct Replica(Child);

impl Replica {
    fn start(db: &TestDb, owner: &str) -> Replica {
        Replica(
            Command::new(bin())
                .args(["-D", &db.url(), "run", "--owner", owner])
                .args(["--lease", "5s", "--cadence", "200ms"])
                .env_remove("QLSCHED_LOG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn qlsched run"),
        )
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
    let _replicas = [
        Replica::start(&db, "replica-a"),
        Replica::start(&db, "replica-b"),
    ];

    let tmux = Tmux::start("top", 120, 40);
    tmux.wait_for("the shell prompt", |s| s.contains(PROMPT));
    let command = format!(
        "{} -D '{}' top --refresh 250ms; echo \"top exited $?\"",
        bin().display(),
        db.url()
    );
    tmux.send(&[&command, "Enter"]);
    let first = tmux.wait_for("owners and triggers", |s| {
        s.contains("Owners with claims or admissions in the last minute (")
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

    tmux.send(&["q"]);
    let after = tmux.wait_for("top to exit", |s| s.contains("top exited 0"));
    assert!(
        !after.contains("Owners with claims") && after.contains(PROMPT),
        "the alternate screen is left and the shell is back:\n{after}"
    );
}

/// The `mis` column counts the misfire records of each row's current trigger revision that are
/// still in retention: an older revision's and an expired record do not count, and a count stops
/// at its cap. The owners panel marks an owner holding only manual claims as an operator.
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
    let held = qlsched(
        Some(&db),
        &["claim", "p/calm", "--hold", "--owner", "ops-bob"],
        None,
    );
    assert_eq!(code(&held), 0, "{}", stderr(&held));
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
