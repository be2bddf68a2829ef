//! The admission (docs/DESIGN.md §4.5) writes a run, its attempt and two events and advances the
//! schedule, or writes nothing: on a lost fence race, an injected write fault or a corrupt execution
//! revision. Serialization retries are bounded, and one failing row never blocks the others.

use serde_json::json;

use qlsched::core::Decision;
use qlsched::store::{AdmissionOutcome, StoreError};

use crate::util::{
    TestDb, admission, admit, assert_invariants, claim, fingerprint, manifest, qlsched, sleep_ms,
    stdout,
};

async fn one_due_trigger(db: &TestDb, extra: serde_json::Value) {
    let mut trigger = json!({ "id": "a", "task": "t", "cron": "* * * * * *" });
    if let (Some(trigger), Some(extra)) = (trigger.as_object_mut(), extra.as_object()) {
        trigger.extend(extra.clone());
    }
    db.publish(&manifest(json!([trigger]))).await;
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = (now_ms() / 1000) * 1000 - 1000",
        )
        .await
        .expect("make it due");
}

#[tokio::test]
async fn admission_writes_run_attempt_and_two_events_and_advances_the_schedule() {
    let db = TestDb::new().await;
    one_due_trigger(&db, json!({})).await;
    let store = db.store("test").await;
    let rows = claim(&store, "o", 1, 60_000).await;
    let admission = admission(&rows[0]);
    let Decision::Fire {
        scheduled_for_ms,
        next_fire_at_ms,
        ..
    } = admission.decision
    else {
        panic!("expected a fire decision, got {:?}", admission.decision);
    };
    let outcome = admit(&store, std::slice::from_ref(&admission))
        .await
        .expect("admit");
    let AdmissionOutcome::Admitted(run) = &outcome[0] else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        run.idempotency_key,
        format!("ql3:cron:v1:p/a:1:{scheduled_for_ms}")
    );

    let client = db.client().await;
    let r = client
        .query_one(
            "SELECT status, scheduled_for_ms, queued_at_ms IS NOT NULL, idempotency_key FROM runs",
            &[],
        )
        .await
        .expect("one run");
    assert_eq!(r.get::<_, String>(0), "queued");
    assert_eq!(r.get::<_, i64>(1), scheduled_for_ms);
    assert!(r.get::<_, bool>(2));
    let a = client
        .query_one(
            "SELECT attempt_no, executor, state, num_nonnulls(worker_id, session_id, lease_id, offer_id, \
             callback_token, started_at_ms, result, error) FROM attempts",
            &[],
        )
        .await
        .expect("one attempt");
    assert_eq!(
        (
            a.get::<_, i32>(0),
            a.get::<_, String>(1),
            a.get::<_, String>(2),
            a.get::<_, i32>(3)
        ),
        (1, "remote_worker".into(), "claimed".into(), 0)
    );
    let events: Vec<String> = client
        .query("SELECT type FROM run_events ORDER BY seq", &[])
        .await
        .expect("events")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(events, ["run.created", "run.queued"]);
    // run.created in the one shape every admission writes (migration 0017): a cron run names its
    // origin, its claim owner as the actor, and the claim it was admitted under.
    let payloads: Vec<serde_json::Value> = client
        .query("SELECT payload FROM run_events ORDER BY seq", &[])
        .await
        .expect("payloads")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        payloads,
        [
            json!({
                "idempotency_key": run.idempotency_key,
                "scheduled_for_ms": scheduled_for_ms,
                "decision": "fire",
                "origin": "cron",
                "actor": "o",
                "claim_owner": "o",
                "claim_version": rows[0].fence.version,
            }),
            json!({ "attempt_id": run.attempt_id, "executor": "remote_worker" }),
        ]
    );
    let s = client
        .query_one("SELECT next_fire_at_ms, last_scheduled_at_ms, claim_token IS NULL FROM trigger_schedules", &[])
        .await
        .expect("schedule");
    assert_eq!(s.get::<_, Option<i64>>(0), Some(next_fire_at_ms));
    assert_eq!(s.get::<_, Option<i64>>(1), Some(scheduled_for_ms));
    assert!(s.get::<_, bool>(2), "claim cleared");
    assert_invariants(&db).await;
}

#[tokio::test]
async fn skip_moves_only_the_cursor() {
    let db = TestDb::new().await;
    one_due_trigger(
        &db,
        json!({ "cron": "0 0 1 1 *", "misfire": "skip", "misfire_grace": "1s" }),
    )
    .await;
    // The cursor at this year's New Year occurrence: long missed, far beyond the grace.
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules \
             SET next_fire_at_ms = (extract(epoch FROM date_trunc('year', now() AT TIME ZONE 'UTC')) * 1000)::bigint",
        )
        .await
        .expect("missed");
    let store = db.store("test").await;
    let rows = claim(&store, "o", 1, 60_000).await;
    let admission = admission(&rows[0]);
    assert!(
        matches!(admission.decision, Decision::Skip { .. }),
        "{:?}",
        admission.decision
    );
    assert_eq!(
        admit(&store, &[admission]).await.expect("admit"),
        [AdmissionOutcome::Advanced]
    );
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM trigger_schedules WHERE next_fire_at_ms > now_ms() AND claim_token IS NULL AND last_scheduled_at_ms IS NULL").await, 1);
}

#[tokio::test]
async fn the_first_holder_loses_the_fence_race_and_writes_nothing() {
    let db = TestDb::new().await;
    one_due_trigger(&db, json!({})).await;
    let (first, second) = (db.store("first").await, db.store("second").await);
    let stale = claim(&first, "first", 1, 500).await;
    crate::util::until_expired(&db, "first").await;
    let fresh = claim(&second, "second", 1, 60_000).await;
    assert_eq!(fresh.len(), 1, "taken over after expiry");

    let before = fingerprint(&db).await;
    assert_eq!(
        admit(&first, &[admission(&stale[0])]).await.expect("admit"),
        [AdmissionOutcome::FenceLost]
    );
    assert_eq!(
        fingerprint(&db).await,
        before,
        "the stale holder wrote nothing"
    );
    assert!(matches!(
        admit(&second, &[admission(&fresh[0])])
            .await
            .expect("admit")[0],
        AdmissionOutcome::Admitted(_)
    ));
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 1);
    assert_invariants(&db).await;
}

#[tokio::test]
async fn a_write_fault_in_the_middle_of_admission_leaves_no_row_behind() {
    let db = TestDb::new().await;
    one_due_trigger(&db, json!({})).await;
    db.client()
        .await
        .batch_execute(
            "CREATE FUNCTION fail_queued_event() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN IF NEW.type = 'run.queued' THEN RAISE EXCEPTION 'injected write fault'; END IF;
                   RETURN NEW; END $$;
             CREATE TRIGGER inject_fault BEFORE INSERT ON run_events
                 FOR EACH ROW EXECUTE FUNCTION fail_queued_event();",
        )
        .await
        .expect("inject");
    let store = db.store("test").await;
    let rows = claim(&store, "o", 1, 60_000).await;
    let before = fingerprint(&db).await;
    let outcome = admit(&store, &[admission(&rows[0])])
        .await
        .expect("a row's own error is its outcome");
    assert!(
        matches!(&outcome[0], AdmissionOutcome::Rejected { sqlstate, reason }
            if sqlstate == "P0001" && reason.contains("injected write fault")),
        "{outcome:?}"
    );
    assert_eq!(
        fingerprint(&db).await,
        before,
        "no run, attempt, event or schedule change survived"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM runs").await
            + db.count("SELECT count(*) FROM attempts").await,
        0
    );
}

#[tokio::test]
async fn a_corrupt_execution_revision_digest_fails_closed() {
    let db = TestDb::new().await;
    one_due_trigger(&db, json!({})).await;
    db.client()
        .await
        .batch_execute(
            "SET session_replication_role = replica;
             UPDATE execution_revisions SET spec = spec || '{\"image\": \"evil\"}';
             SET session_replication_role = origin;",
        )
        .await
        .expect("tamper with the spec, bypassing the immutability trigger");
    let store = db.store("test").await;
    let rows = claim(&store, "o", 1, 60_000).await;
    let before = fingerprint(&db).await;
    // Its own verdict, not a lost fence: the claim held, the definition refused it.
    let outcomes = admit(&store, &[admission(&rows[0])]).await.expect("admit");
    let [AdmissionOutcome::DefinitionRefused { reason }] = outcomes.as_slice() else {
        panic!("{outcomes:?}");
    };
    assert!(
        reason.contains("holds its claim fence and its definitions no longer admit it")
            && reason.contains("SQLSTATE QLD01")
            && reason.contains("whose digest matches its spec")
            && !reason.contains("the project is not active"),
        "{reason}"
    );
    assert_eq!(fingerprint(&db).await, before);
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
}

#[tokio::test]
async fn serialization_failures_are_retried_a_bounded_number_of_times_then_reported() {
    let db = TestDb::new().await;
    one_due_trigger(&db, json!({})).await;
    db.client()
        .await
        .batch_execute(
            "CREATE FUNCTION always_conflict() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'injected conflict' USING ERRCODE = 'serialization_failure'; END $$;
             CREATE TRIGGER inject_conflict BEFORE INSERT ON runs
                 FOR EACH ROW EXECUTE FUNCTION always_conflict();",
        )
        .await
        .expect("inject");
    let store = db.store("test").await;
    let rows = claim(&store, "o", 1, 60_000).await;
    let client = store.client().await.expect("client");
    let mut stats = qlsched::store::AdmitStats::default();
    let error =
        qlsched::store::admit::admit(&client, store.sender(), &[admission(&rows[0])], &mut stats)
            .await
            .expect_err("gives up");
    assert!(
        matches!(error, StoreError::RetriesExhausted { attempts: 4, .. }),
        "{error}"
    );
    // What the server said last is kept: its message and SQLSTATE.
    assert!(
        error
            .to_string()
            .contains("injected conflict (SQLSTATE 40001)"),
        "{error}"
    );
    assert_eq!((stats.transactions, stats.serialization_retries), (4, 3));
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
}

/// A row of a failed batch whose own admission keeps conflicting does not fail the round: the
/// other rows are admitted and reported, the row is reported unsettled and its claim given back
/// at once, and the next round admits it.
#[tokio::test]
async fn a_row_that_keeps_conflicting_is_given_back_and_the_others_admitted() {
    let db = TestDb::new().await;
    db.publish(&crate::util::every_second(&["a", "b", "c"]))
        .await;
    let coordinator = qlsched::coordinator::Coordinator::new(
        db.store("o").await,
        qlsched::core::CoordinatorConfig {
            owner: "o".into(),
            ..qlsched::core::CoordinatorConfig::default()
        },
    );
    coordinator.run_round().await.expect("initialize");
    sleep_ms(1_100).await;
    db.client()
        .await
        .batch_execute(
            "CREATE FUNCTION conflict_on_b() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.trigger_id = 'b' THEN
                     RAISE EXCEPTION 'injected conflict' USING ERRCODE = 'serialization_failure';
                 END IF;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER inject_conflict BEFORE INSERT ON runs
                 FOR EACH ROW EXECUTE FUNCTION conflict_on_b();",
        )
        .await
        .expect("inject");
    let report = coordinator.run_round().await.expect("the round completes");
    assert_eq!(
        (report.fired, report.unsettled, report.batch_fallbacks),
        (2, 1, 1),
        "{report:?}"
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM trigger_schedules WHERE trigger_id = 'b' AND claim_token IS NULL"
        )
        .await,
        1,
        "b's claim was given back"
    );
    db.client()
        .await
        .batch_execute("DROP TRIGGER inject_conflict ON runs")
        .await
        .expect("heal");
    // a and c fire every second, so whether this round finds them due again depends on the clock;
    // b's one occurrence is what the round must admit.
    let report = coordinator.run_round().await.expect("next round");
    assert!(
        report.admitted.iter().any(|run| run.trigger_id == "b"),
        "{report:?}"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM runs WHERE trigger_id = 'b'")
            .await,
        1
    );
    let counts = assert_invariants(&db).await;
    assert_eq!(counts.runs, 2 + report.fired as i64, "{report:?}");
}

#[tokio::test]
async fn a_batch_with_one_lost_fence_falls_back_and_admits_the_others() {
    let db = TestDb::new().await;
    db.publish(&crate::util::every_second(&["a", "b", "c"]))
        .await;
    db.client()
        .await
        .batch_execute("UPDATE trigger_schedules SET next_fire_at_ms = now_ms() - 1000")
        .await
        .expect("due");
    let store = db.store("test").await;
    let rows = claim(&store, "o", 3, 60_000).await;
    // An operator-style expiry of b between claim and admission.
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules SET claim_owner = NULL, claim_token = NULL, claim_expires_at_ms = NULL, \
             claim_version = claim_version + 1, state_version = state_version + 1 WHERE trigger_id = 'b'",
        )
        .await
        .expect("expire b");
    let admissions: Vec<_> = rows.iter().map(admission).collect();
    let client = store.client().await.expect("client");
    let mut stats = qlsched::store::AdmitStats::default();
    let outcomes = qlsched::store::admit::admit(&client, store.sender(), &admissions, &mut stats)
        .await
        .expect("admit");
    for (row, outcome) in rows.iter().zip(&outcomes) {
        if row.trigger_id == "b" {
            assert_eq!(*outcome, AdmissionOutcome::FenceLost);
        } else {
            assert!(
                matches!(outcome, AdmissionOutcome::Admitted(_)),
                "{}: {outcome:?}",
                row.trigger_id
            );
        }
    }
    assert_eq!(stats.batch_fallbacks, 1);
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 2);
    assert_invariants(&db).await;
}

#[tokio::test]
async fn a_row_the_database_refuses_never_blocks_the_others() {
    let db = TestDb::new().await;
    db.publish(&crate::util::every_second(&["a", "b", "c"]))
        .await;
    // Runs already holding every key p/a will want in the next minute: each admission of p/a
    // breaks the unique idempotency key, as a corrupted history would.
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = (now_ms() / 1000) * 1000 - 1000;
             INSERT INTO runs (run_id, project_id, trigger_id, trigger_revision, task_id, task_revision,
                               execution_revision_id, idempotency_key, status, scheduled_for_ms,
                               created_at_ms, queued_at_ms, finished_at_ms)
             SELECT gen_random_uuid(), 'p', 'x', 1, 't', 1, k.execution_revision_id,
                    'ql3:cron:v1:p/a:1:' || ((now_ms() / 1000) * 1000 + i * 1000), 'succeeded', 0, 0, 0,
                    0
             FROM tasks k, generate_series(-2, 60) AS i;",
        )
        .await
        .expect("poison p/a");
    let coordinator = qlsched::coordinator::Coordinator::new(
        db.store("c").await,
        qlsched::core::CoordinatorConfig {
            owner: "c".into(),
            ..qlsched::core::CoordinatorConfig::default()
        },
    );
    let mut rejected = 0;
    for _ in 0..3 {
        let report = coordinator
            .run_round()
            .await
            .expect("a refused row does not fail the round");
        rejected += report.rejected;
        sleep_ms(1_000).await;
    }
    assert!(rejected >= 1, "p/a was refused");
    let runs_of = |t: &str| format!("SELECT count(*) FROM runs WHERE trigger_id = '{t}'");
    assert!(db.count(&runs_of("b")).await >= 1 && db.count(&runs_of("c")).await >= 1);
    assert_eq!(db.count(&runs_of("a")).await, 0);
    assert_eq!(
        db.count(
            "SELECT count(*) FROM trigger_schedules WHERE trigger_id = 'a' AND claim_owner = 'c'"
        )
        .await,
        1,
        "the refused row keeps its claim until the lease expires"
    );
}

/// Admissions of different replicas do not conflict under SERIALIZABLE, even on neighbouring
/// rows (store::admit): three replicas' batches of adjacent schedule rows, each statement run
/// while the others' transactions are open, then committed newest first — the order in which
/// PostgreSQL cancels the middle one as a pivot when their reads and writes share index pages.
/// The runs table holds history first, as a database that has admitted before does, so each
/// owner's runs already span pages of their own.
#[tokio::test]
async fn interleaved_admissions_of_neighbouring_rows_all_commit() {
    let db = TestDb::new().await;
    let owners = ["replica-a", "replica-b", "replica-c"];
    let ids: Vec<String> = (0..48).map(|n| format!("n{n:02}")).collect();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    db.publish(&crate::util::every_second(&id_refs)).await;
    db.client()
        .await
        .batch_execute("UPDATE trigger_schedules SET next_fire_at_ms = now_ms() - 1000")
        .await
        .expect("due");
    history_of(&db, &owners, 1_000).await;
    let store = db.store("test").await;
    let mut batches = Vec::new();
    for owner in owners {
        let rows = claim(&store, owner, 16, 60_000).await;
        assert_eq!(rows.len(), 16, "{owner} claims its 16 neighbouring rows");
        batches.push(rows);
    }
    let mut clients = Vec::new();
    for _ in &owners {
        clients.push(db.client().await);
    }
    let mut transactions = Vec::new();
    for (client, rows) in clients.iter_mut().zip(&batches) {
        let transaction = serializable(client).await;
        let admissions: Vec<_> = rows.iter().map(admission).collect();
        qlsched::store::admit::admit_in_transaction(&transaction, &admissions)
            .await
            .expect("the admission statement");
        transactions.push(transaction);
    }
    while let Some(transaction) = transactions.pop() {
        transaction
            .commit()
            .await
            .expect("commits without a serialization failure");
    }
    let counts = assert_invariants(&db).await;
    assert_eq!(counts.runs, 3_000 + 48);
}

/// `per_owner` admitted runs (with their attempt and events) for each owner, an hour ago.
async fn history_of(db: &TestDb, owners: &[&str], per_owner: u64) {
    let hour_ago =
        u64::try_from(chrono::Utc::now().timestamp_millis()).expect("after 1970") - 3_600_000;
    let mut run_ids = Vec::new();
    for owner in owners {
        for n in 0..per_owner {
            let entropy = *uuid::Uuid::new_v4().as_bytes();
            let mut random = [0u8; 8];
            random.copy_from_slice(&entropy[..8]);
            run_ids.push(qlsched::core::run_id(owner, hour_ago + n, random));
        }
    }
    db.client()
        .await
        .execute(
            "WITH r AS (
                 INSERT INTO runs (run_id, project_id, trigger_id, trigger_revision, task_id,
                                   task_revision, execution_revision_id, idempotency_key, status,
                                   scheduled_for_ms, created_at_ms, queued_at_ms)
                 SELECT id, 'p', 'n00', 1, 't', 1, k.execution_revision_id,
                        'history:' || id, 'queued', n, 0, 0
                 FROM unnest($1::uuid[]) WITH ORDINALITY AS h(id, n), tasks k
                 RETURNING run_id
             ), a AS (
                 INSERT INTO attempts (attempt_id, run_id, attempt_no, executor, state, created_at_ms)
                 SELECT gen_random_uuid(), run_id, 1, 'remote_worker', 'claimed', 0 FROM r
             )
             INSERT INTO run_events (run_id, seq, type, at_ms)
             SELECT run_id, seq, CASE seq WHEN 1 THEN 'run.created' ELSE 'run.queued' END, 0
             FROM r, generate_series(1, 2) AS seq",
            &[&run_ids],
        )
        .await
        .expect("history");
}

/// A table rewrite between claim and admission moves the claimed rows without moving their
/// fences (docs/OPERATIONS.md), as any new version of a row that leaves its fence alone does: the
/// batch, which finds rows by the ctid their claim returned, misses them; the fall-back finds each by key and admits it. Every occurrence once, no lease
/// lost.
#[tokio::test]
async fn a_table_rewrite_between_claim_and_admission_costs_one_fallback() {
    let db = TestDb::new().await;
    db.publish(&crate::util::every_second(&["a", "b", "c"]))
        .await;
    db.client()
        .await
        .batch_execute("UPDATE trigger_schedules SET next_fire_at_ms = now_ms() - 1000")
        .await
        .expect("due");
    let store = db.store("test").await;
    let rows = claim(&store, "o", 3, 60_000).await;
    assert_eq!(rows.len(), 3);
    let client = db.client().await;
    // Moved as a rewrite moves them, fences untouched: a new version of each row, at a new
    // ctid. (VACUUM FULL moves them too, but keeps recently dead versions while any older
    // transaction runs on the server, and may then put a row back where its claim saw it.)
    client
        .batch_execute("UPDATE trigger_schedules SET updated_at_ms = updated_at_ms")
        .await
        .expect("move the rows");
    let now: Vec<String> = client
        .query("SELECT ctid::text FROM trigger_schedules", &[])
        .await
        .expect("ctids")
        .iter()
        .map(|row| row.get(0))
        .collect();
    for row in &rows {
        assert!(
            !now.contains(&row.row_tid),
            "the rewrite moved {}: it was at {}, the table now holds {now:?}",
            row.trigger_id,
            row.row_tid
        );
    }
    let admissions: Vec<_> = rows.iter().map(admission).collect();
    let mut stats = qlsched::store::AdmitStats::default();
    let pooled = store.client().await.expect("pooled connection");
    let outcomes = qlsched::store::admit::admit(&pooled, store.sender(), &admissions, &mut stats)
        .await
        .expect("admit");
    for outcome in &outcomes {
        assert!(
            matches!(outcome, AdmissionOutcome::Admitted(_)),
            "{outcome:?}"
        );
    }
    assert_eq!(stats.batch_fallbacks, 1, "{stats:?}");
    let counts = assert_invariants(&db).await;
    assert_eq!(counts.runs, 3);
}

/// Why concurrent batch admissions do not conflict on the schedule table: inside an admission,
/// before it commits, the transaction holds no SIREAD lock on `trigger_schedules` or its primary
/// key. The rows are found by TID scan (no index page read) and PostgreSQL drops a transaction's
/// SIREAD lock on a tuple that the same transaction then updates. That holds only for the plan
/// the admission pins; left to itself, the planner picks a sequential scan on an analyzed small
/// table and a hash join at some sizes, so every size here is analyzed first and tried with
/// custom and generic plans. A lookup by key, for contrast, leaves a lock on the index page.
#[tokio::test]
async fn an_admission_holds_no_predicate_lock_on_the_schedule_table() {
    for triggers in [48, 72, 300] {
        let db = TestDb::new().await;
        let ids: Vec<String> = (0..triggers).map(|n| format!("n{n:03}")).collect();
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        db.publish(&crate::util::every_second(&id_refs)).await;
        db.client()
            .await
            .batch_execute(
                "UPDATE trigger_schedules SET next_fire_at_ms = now_ms() - 1000;
                 ANALYZE trigger_schedules, triggers, tasks, projects, execution_revisions",
            )
            .await
            .expect("due, analyzed");
        let store = db.store("test").await;
        let rows = claim(&store, "replica-a", 16, 60_000).await;
        assert_eq!(rows.len(), 16);
        let admissions: Vec<_> = rows.iter().map(admission).collect();
        let mut client = db.client().await;
        for plans in ["auto", "force_generic_plan"] {
            let transaction = serializable(&mut client).await;
            transaction
                .batch_execute(&format!("SET LOCAL plan_cache_mode = {plans}"))
                .await
                .expect("plan cache mode");
            qlsched::store::admit::admit_in_transaction(&transaction, &admissions)
                .await
                .expect("the admission statement");
            let locked = siread_locks_on_schedules(&transaction).await;
            assert!(
                locked.is_empty(),
                "{triggers} schedule rows, plan_cache_mode {plans}: SIREAD locks held: {locked:?}"
            );
            if plans == "auto" {
                transaction
                    .query(
                        "SELECT 1 FROM trigger_schedules \
                         WHERE project_id = 'p' AND trigger_id = 'n040'",
                        &[],
                    )
                    .await
                    .expect("a lookup by key");
                let locked = siread_locks_on_schedules(&transaction).await;
                assert!(
                    !locked.is_empty(),
                    "a lookup by key locks what it read: {locked:?}"
                );
            }
            transaction.rollback().await.expect("rollback");
        }
    }
}

/// What an admission costs the server's shared predicate-lock table, which every SERIALIZABLE
/// transaction draws on and which a long one beside the admissions can fill: inside an admission
/// of 1, 16 and 120 rows, one SIREAD lock on each definition table as a whole (none on their
/// rows, so no entry a trigger), and as many locks in all, give or take the index pages the
/// rows' keys span. Read row by row, as the admission did before it locked the tables whole, a
/// batch took one lock a trigger: 120 rows filled a table sized for 10 locks a connection.
#[tokio::test]
async fn an_admission_locks_each_definition_table_once_whatever_its_batch() {
    let db = TestDb::new().await;
    let ids: Vec<String> = (0..137).map(|n| format!("d{n:03}")).collect();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    db.publish(&crate::util::every_second(&id_refs)).await;
    db.client()
        .await
        .batch_execute("UPDATE trigger_schedules SET next_fire_at_ms = now_ms() - 1000")
        .await
        .expect("due");
    let store = db.store("test").await;
    let mut client = db.client().await;
    let mut totals = Vec::new();
    for batch in [1, 16, 120] {
        let rows = claim(&store, "replica-a", batch, 60_000).await;
        assert_eq!(rows.len(), usize::try_from(batch).unwrap_or(0));
        let admissions: Vec<_> = rows.iter().map(admission).collect();
        let transaction = serializable(&mut client).await;
        qlsched::store::admit::admit_in_transaction(&transaction, &admissions)
            .await
            .expect("the admission statement");
        let locks: Vec<(String, String, i64)> = transaction
            .query(
                "SELECT coalesce(l.relation::regclass::text, '-'), l.locktype, count(*)
                 FROM pg_locks l
                 WHERE l.mode = 'SIReadLock' AND l.pid = pg_backend_pid()
                 GROUP BY 1, 2 ORDER BY 1, 2",
                &[],
            )
            .await
            .expect("pg_locks")
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect();
        transaction.commit().await.expect("commit");
        for table in ["execution_revisions", "projects", "tasks", "triggers"] {
            let on_table: Vec<_> = locks.iter().filter(|l| l.0 == table).collect();
            assert_eq!(
                on_table,
                [&(table.to_owned(), "relation".to_owned(), 1)],
                "a batch of {batch}: {locks:?}"
            );
        }
        let total: i64 = locks.iter().map(|l| l.2).sum();
        eprintln!("a batch of {batch}: {total} SIREAD locks: {locks:?}");
        totals.push(total);
    }
    assert!(
        totals[2] <= totals[0] + 4,
        "120 rows hold about the locks one row does: {totals:?}"
    );
}

/// A SERIALIZABLE transaction on `client`, as an admission runs in.
async fn serializable(client: &mut tokio_postgres::Client) -> tokio_postgres::Transaction<'_> {
    client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::Serializable)
        .start()
        .await
        .expect("begin")
}

/// This backend's SIREAD locks on the schedule table and its indexes: (relation, lock type).
async fn siread_locks_on_schedules(
    transaction: &tokio_postgres::Transaction<'_>,
) -> Vec<(String, String)> {
    transaction
        .query(
            "SELECT l.relation::regclass::text, l.locktype FROM pg_locks l
             WHERE l.mode = 'SIReadLock' AND l.pid = pg_backend_pid()
               AND l.relation::regclass::text LIKE 'trigger_schedules%'
             ORDER BY 1, 2",
            &[],
        )
        .await
        .expect("pg_locks")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// An admission whose reply never came is settled by asking the database, never guessed: a
/// committed one reads as admitted (its run exists), an uncommitted one whose claim still holds
/// as unsettled (to give back), and one whose claim was taken meanwhile as a lost fence.
#[tokio::test]
async fn an_admission_whose_reply_was_lost_is_settled_by_what_the_database_holds() {
    let db = TestDb::new().await;
    let triggers: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|id| json!({ "id": id, "task": "t", "cron": "* * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = (now_ms() / 1000) * 1000 - 1000",
        )
        .await
        .expect("make them due");
    let store = db.store("test").await;
    let rows = claim(&store, "o", 3, 60_000).await;
    assert_eq!(rows.len(), 3);
    let admissions: Vec<_> = rows.iter().map(admission).collect();
    // a commits (its reply is what a dead connection would have lost); b is left as it was;
    // c's claim is expired by an operator and so no longer this replica's.
    let committed = admit(&store, std::slice::from_ref(&admissions[0]))
        .await
        .expect("admit a");
    assert!(matches!(committed[0], AdmissionOutcome::Admitted(_)));
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules SET claim_owner = NULL, claim_token = NULL,
                 claim_expires_at_ms = NULL, claim_version = claim_version + 1,
                 state_version = state_version + 1
             WHERE trigger_id = 'c'",
        )
        .await
        .expect("expire c");

    let client = store.client().await.expect("connection");
    let settled = qlsched::store::admit::settle(&**client, &admissions)
        .await
        .expect("settle");
    let outcomes: Vec<_> = settled.iter().map(|s| s.outcome.clone()).collect();
    assert!(
        matches!(&outcomes[0], AdmissionOutcome::Admitted(run) if Some(run) == admissions[0].run.as_ref()),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[1], AdmissionOutcome::Unsettled { .. }),
        "{outcomes:?}"
    );
    assert!(settled[1].claim_held);
    assert_eq!(outcomes[2], AdmissionOutcome::FenceLost);
    assert!(!settled[2].claim_held);
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 1);
}

/// A trigger function on `runs` that raises P0001 for trigger `victim`, as a dispatcher's own
/// trigger might: the poison of the drills.
pub(crate) const POISON: &str = "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.trigger_id = 'victim' THEN
            RAISE EXCEPTION 'dispatcher refuses %', NEW.trigger_id;
        END IF;
        RETURN NEW;
    END $$;
    CREATE TRIGGER poison AFTER INSERT ON runs FOR EACH ROW EXECUTE FUNCTION poison();";

/// Any server error of one row's own (here P0001, raised by a user trigger on `runs`) fails the
/// batch, and the fall-back admits every other row in the same round: the poisoned one is
/// refused with its SQLSTATE, recorded for `inspect trigger`, its claim left to its lease, and
/// the round counts as failed.
#[tokio::test]
async fn a_row_a_trigger_function_refuses_falls_back_and_is_named() {
    let db = TestDb::new().await;
    db.publish(&crate::util::every_second(&["a", "victim", "c"]))
        .await;
    db.client()
        .await
        .batch_execute(&format!(
            "{POISON}; UPDATE trigger_schedules SET next_fire_at_ms = (now_ms() / 1000) * 1000 - 1000"
        ))
        .await
        .expect("poison");
    let store = db.store("test").await;
    let rows = claim(&store, "o", 3, 60_000).await;
    let admissions: Vec<_> = rows.iter().map(admission).collect();
    let client = store.client().await.expect("client");
    let mut stats = qlsched::store::AdmitStats::default();
    let outcomes = qlsched::store::admit::admit(&client, store.sender(), &admissions, &mut stats)
        .await
        .expect("a row's own error is an outcome, not the batch's error");
    for (row, outcome) in rows.iter().zip(&outcomes) {
        if row.trigger_id == "victim" {
            assert!(
                matches!(outcome, AdmissionOutcome::Rejected { sqlstate, reason }
                    if sqlstate == "P0001" && reason.contains("dispatcher refuses victim")),
                "{outcome:?}"
            );
        } else {
            assert!(
                matches!(outcome, AdmissionOutcome::Admitted(_)),
                "{}: {outcome:?}",
                row.trigger_id
            );
        }
    }
    assert_eq!(stats.batch_fallbacks, 1);
    drop(client);

    // A replica's round: the same, recorded, and counted as failed.
    db.client()
        .await
        .batch_execute(
            "UPDATE trigger_schedules SET claim_owner = NULL, claim_token = NULL,
                 claim_expires_at_ms = NULL, claim_version = claim_version + 1,
                 state_version = state_version + 1 WHERE trigger_id = 'victim'",
        )
        .await
        .expect("the refused claim expired by hand");
    // a and c due again at their next second.
    sleep_ms(1_100).await;
    let coordinator = qlsched::coordinator::Coordinator::new(
        db.store("c").await,
        qlsched::core::CoordinatorConfig {
            owner: "c".into(),
            ..qlsched::core::CoordinatorConfig::default()
        },
    );
    let report = coordinator.run_round().await.expect("the round finishes");
    assert_eq!((report.fired, report.rejected), (2, 1), "{report:?}");
    assert_eq!(report.rejected_sqlstates, ["P0001"]);
    let failure = report.failure.as_deref().unwrap_or_default();
    assert!(
        failure.contains("p/victim") && failure.contains("SQLSTATE P0001"),
        "{failure}"
    );
    let recorded = db
        .client()
        .await
        .query_one(
            "SELECT sqlstate, owner, failures FROM admission_errors WHERE trigger_id = 'victim'",
            &[],
        )
        .await
        .expect("the refusal is recorded");
    assert_eq!(
        (
            recorded.get::<_, String>(0),
            recorded.get::<_, String>(1),
            recorded.get::<_, i64>(2)
        ),
        ("P0001".to_owned(), "c".to_owned(), 1),
        "the round's refusal (the store-level one above is the caller's to record)"
    );
    let detail = qlsched(
        Some(&db),
        &["inspect", "trigger", "p/victim", "-o", "json"],
        None,
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&detail)).expect("json");
    assert_eq!(
        json["why_not_firing"]["cause"], "admission_refused",
        "{json}"
    );
    assert_eq!(json["why_not_firing"]["sqlstate"], "P0001", "{json}");
    assert_eq!(json["admission_error"]["current"], true, "{json}");
    let text = stdout(&qlsched(
        Some(&db),
        &["inspect", "trigger", "p/victim"],
        None,
    ));
    assert!(
        text.contains("SQLSTATE P0001") && text.contains("dispatcher refuses victim"),
        "{text}"
    );
    assert_invariants(&db).await;
}

/// `n` every-second triggers `r00`, `r01`, ... all due, on a server whose statement trigger on
/// `runs` answers 53200 (out of shared memory, as a full predicate-lock table does) to a statement
/// whenever `no_room` holds (`inserted` is its runs), and a coordinator with the adaptive batch.
async fn short_of_room(db: &TestDb, n: usize, no_room: &str) -> qlsched::coordinator::Coordinator {
    let ids: Vec<String> = (0..n).map(|n| format!("r{n:02}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    db.publish(&crate::util::every_second(&ids)).await;
    db.client()
        .await
        .batch_execute(&format!(
            "CREATE FUNCTION no_room() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF {no_room} THEN
                     RAISE EXCEPTION 'out of shared memory' USING ERRCODE = '53200',
                         HINT = 'You might need to increase max_pred_locks_per_transaction.';
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE TRIGGER no_room AFTER INSERT ON runs REFERENCING NEW TABLE AS inserted
                 FOR EACH STATEMENT EXECUTE FUNCTION no_room();
             UPDATE trigger_schedules SET next_fire_at_ms = (now_ms() / 1000) * 1000 - 1000"
        ))
        .await
        .expect("a server without room for batches");
    qlsched::coordinator::Coordinator::new(
        db.store("c").await,
        qlsched::core::CoordinatorConfig {
            owner: "c".into(),
            batch: qlsched::core::batch::Batch::Adaptive,
            // Long enough that the speed cap on the next batch (a quarter of the lease at the
            // round's speed, pauses for the shortage included) never binds on a loaded machine:
            // what these tests check is what the shortage does to the batch, not the cap.
            lease: std::time::Duration::from_secs(600),
            ..qlsched::core::CoordinatorConfig::default()
        },
    )
}

/// The server out of room for a while (53200, as a predicate-lock table that a long
/// SERIALIZABLE transaction keeps full answers every admission; here for the first two tries, by
/// a counter a failed try cannot roll back): the same batch is tried again after a pause, in the
/// same round, and admitted whole. Nothing falls back, nothing is refused, the round does not
/// fail, and its batch is not held against it: the full claim doubles it.
#[tokio::test]
async fn a_batch_the_server_has_no_room_for_yet_is_tried_again_whole() {
    let db = TestDb::new().await;
    db.client()
        .await
        .batch_execute("CREATE SEQUENCE tries")
        .await
        .expect("a counter outside the transaction");
    let coordinator = short_of_room(
        &db,
        20,
        "(SELECT count(*) FROM inserted) > 1 AND nextval('tries') <= 2",
    )
    .await;
    let started = std::time::Instant::now();
    let round = coordinator.run_round().await.expect("the round finishes");
    let took = started.elapsed();
    assert_eq!((round.claimed, round.fired), (16, 16), "{round:?}");
    assert_eq!(round.shortage.times, 2, "{round:?}");
    assert_eq!(
        (round.rejected, round.batch_fallbacks, round.unsettled),
        (0, 0, 0),
        "{round:?}"
    );
    assert!(round.failure.is_none(), "{:?}", round.failure);
    assert_eq!(
        round.transactions, 3,
        "the same batch three times: {round:?}"
    );
    assert!(
        took >= std::time::Duration::from_millis(300),
        "paused between tries (100 ms, then 200 ms, and more): {took:?}"
    );
    assert_eq!(coordinator.batch(), 32, "a full claim doubles it");
    assert_eq!(db.count("SELECT count(*) FROM admission_errors").await, 0);
    assert_invariants(&db).await;
}

/// A server with no room for any admission (53200 for every statement, as a predicate-lock
/// table a long transaction keeps full answers): one budget of pauses for the round, the batch's
/// tries and its fall-back together, so the first row alone finds it spent and is given back,
/// and the rows after it are not tried. About 1.5 s, not one budget a row; every claim is given
/// back for the next round, nothing is refused or recorded.
#[tokio::test]
async fn a_server_with_no_room_at_all_costs_a_round_one_budget_of_pauses() {
    let db = TestDb::new().await;
    let coordinator = short_of_room(&db, 20, "true").await;
    let started = std::time::Instant::now();
    let round = coordinator.run_round().await.expect("the round finishes");
    let took = started.elapsed();
    assert_eq!(
        (round.claimed, round.fired, round.unsettled),
        (16, 0, 16),
        "{round:?}"
    );
    assert_eq!(
        round.shortage.times,
        qlsched::store::retry::RESOURCES.attempts + 1,
        "the batch's tries, then the first row's one: {round:?}"
    );
    assert!(
        took < std::time::Duration::from_secs(5),
        "one budget of pauses: {took:?}"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claim_owner IS NOT NULL")
            .await,
        0,
        "every claim given back"
    );
    assert_eq!(db.count("SELECT count(*) FROM runs").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM admission_errors").await, 0);
    assert_invariants(&db).await;
}

/// A batch the server never has room for (53200 for any statement of more than one run, as a
/// resource a large transaction outgrows where a small one fits): after the same batch was tried
/// again as long as a shortage of the server's is, its rows are admitted one by one in the same
/// round; nothing is refused or recorded, and the round counts as failed (the registry, the
/// back-off) but keeps its batch: the full claim doubles it, where a refusal would halve it.
#[tokio::test]
async fn a_batch_the_server_has_no_room_for_is_admitted_row_by_row_in_the_end() {
    let db = TestDb::new().await;
    let coordinator = short_of_room(&db, 20, "(SELECT count(*) FROM inserted) > 1").await;
    let first = coordinator.run_round().await.expect("the round finishes");
    assert_eq!(first.batch, 16);
    assert_eq!((first.claimed, first.fired), (16, 16), "{first:?}");
    assert_eq!((first.rejected, first.batch_fallbacks), (0, 1), "{first:?}");
    assert_eq!(
        first.shortage.times,
        qlsched::store::retry::RESOURCES.attempts,
        "{first:?}"
    );
    let failure = first.failure.as_deref().unwrap_or_default();
    assert!(failure.contains("SQLSTATE 53200"), "{failure}");
    assert_eq!(
        coordinator.batch(),
        32,
        "the shortage is not held against the batch"
    );
    assert_eq!(db.count("SELECT count(*) FROM admission_errors").await, 0);
    assert_invariants(&db).await;
}
