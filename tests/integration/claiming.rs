//! The claim statement (docs/DESIGN.md §4.3) keeps the claim order, skips rows another session
//! holds locked, takes over an expired claim only after database time passes its expiry, never
//! claims an ineligible row, and never exceeds its budget.

use serde_json::json;

use crate::util::{TestDb, claim, every_second, sleep_ms};

#[tokio::test]
async fn claims_in_order_uninitialized_first_then_most_overdue() {
    let db = TestDb::new().await;
    db.publish(&every_second(&["a", "b", "c", "d"])).await;
    let client = db.client().await;
    client
        .batch_execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = now_ms() - 1000 WHERE trigger_id = 'a';
             UPDATE trigger_schedules SET next_fire_at_ms = now_ms() - 9000 WHERE trigger_id = 'b';
             UPDATE trigger_schedules SET next_fire_at_ms = now_ms() + 600000 WHERE trigger_id = 'd';",
        )
        .await
        .expect("cursors");
    let store = db.store("test").await;
    let mut order = Vec::new();
    loop {
        let rows = claim(&store, "o", 1, 60_000).await;
        assert!(rows.len() <= 1, "budget 1");
        match rows.first() {
            Some(row) => order.push(row.trigger_id.clone()),
            None => break,
        }
    }
    assert_eq!(
        order,
        ["c", "b", "a"],
        "NULL cursor first, then most overdue; d is not due"
    );
}

#[tokio::test]
async fn skip_locked_passes_over_a_row_another_session_holds() {
    let db = TestDb::new().await;
    db.publish(&every_second(&["a", "b", "c"])).await;
    let mut holder = db.client().await;
    let transaction = holder.transaction().await.expect("begin");
    transaction
        .query(
            "SELECT 1 FROM trigger_schedules WHERE trigger_id = 'a' FOR UPDATE",
            &[],
        )
        .await
        .expect("lock a");
    let store = db.store("test").await;
    // Bounded: a claim that waited on the lock would hang the test instead of failing it.
    let rows = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        claim(&store, "o", 10, 60_000),
    )
    .await
    .expect("a locked row does not make the claim wait");
    let mut ids: Vec<_> = rows.iter().map(|r| r.trigger_id.clone()).collect();
    ids.sort();
    assert_eq!(ids, ["b", "c"]);
    transaction.rollback().await.expect("rollback");
    let rows = claim(&store, "o", 10, 60_000).await;
    assert_eq!(
        rows.iter()
            .map(|r| r.trigger_id.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
}

#[tokio::test]
async fn an_expired_claim_is_taken_over_only_after_database_time_passes_its_expiry() {
    let db = TestDb::new().await;
    db.publish(&every_second(&["a"])).await;
    let (first, second) = (db.store("first").await, db.store("second").await);
    // A 3 s lease: the checks at 700 ms have over 2 s of slack on a loaded machine.
    let held = claim(&first, "first", 1, 3_000).await;
    assert_eq!(held.len(), 1);
    assert!(
        claim(&second, "second", 1, 60_000).await.is_empty(),
        "a valid claim is not taken"
    );
    sleep_ms(700).await;
    assert!(
        claim(&second, "second", 1, 60_000).await.is_empty(),
        "still valid at 700 ms"
    );
    let client = db.client().await;
    client
        .query_one(
            "SELECT 1 FROM trigger_schedules WHERE claim_owner = 'first' AND claim_expires_at_ms > now_ms()",
            &[],
        )
        .await
        .expect("database time has not passed the expiry yet");
    crate::util::until_expired(&db, "first").await;
    let taken = claim(&second, "second", 1, 60_000).await;
    assert_eq!(taken.len(), 1, "taken over after expiry");
    let (old, new) = (&held[0].fence, &taken[0].fence);
    assert_eq!(new.owner, "second");
    assert_eq!(new.version, old.version + 1);
    assert_ne!(new.token, old.token);
    assert!(
        taken[0].claimed_at_ms >= old.expires_at_ms,
        "taken at or after the old expiry, in database time"
    );
}

#[tokio::test]
async fn suspended_disabled_and_revision_mismatched_rows_are_not_claimed() {
    let db = TestDb::new().await;
    let task = json!({ "id": "t", "execution": { "kind": "remote_worker" } });
    db.publish(&json!({ "projects": [
        { "id": "live", "tasks": [task], "triggers": [
            { "id": "ok", "task": "t", "cron": "* * * * * *" },
            { "id": "off", "task": "t", "cron": "* * * * * *", "enabled": false },
            { "id": "stale", "task": "t", "cron": "* * * * * *" }
        ]},
        { "id": "frozen", "status": "suspended", "tasks": [task], "triggers": [
            { "id": "any", "task": "t", "cron": "* * * * * *" }
        ]}
    ]}))
    .await;
    // A trigger whose head moved on without its schedule row following (as an interrupted admin
    // write would leave it): the row's revision no longer matches and it must not be claimed.
    db.client()
        .await
        .batch_execute("UPDATE triggers SET revision = revision + 1 WHERE trigger_id = 'stale'")
        .await
        .expect("bump");
    let store = db.store("test").await;
    let claimed = claim(&store, "o", 16, 60_000).await;
    assert_eq!(
        claimed
            .iter()
            .map(|r| r.name().to_string())
            .collect::<Vec<_>>(),
        ["live/ok"]
    );
}

#[tokio::test]
async fn a_claim_never_exceeds_its_budget() {
    let db = TestDb::new().await;
    let ids: Vec<String> = (0..50).map(|i| format!("t{i:02}")).collect();
    db.publish(&every_second(
        &ids.iter().map(String::as_str).collect::<Vec<_>>(),
    ))
    .await;
    let store = db.store("test").await;
    let mut total = 0;
    for expected in [16, 16, 16, 2, 0] {
        let rows = claim(&store, "o", 16, 60_000).await;
        assert_eq!(rows.len(), expected);
        total += rows.len();
    }
    assert_eq!(total, 50);
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claim_owner = 'o'")
            .await,
        50
    );
}
