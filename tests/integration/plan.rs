//! The claim statement's plan: it walks the claimable-order index (claimable rows only) whatever
//! the statistics say, so a claim stays cheap straight after a large publish, before anything
//! analyzed the tables, and whatever number of parked rows the table holds. The SQL functions
//! that stand for an expression (a schedule row's state, a run event's payload) are inlined into
//! the plans that call them.

use serde_json::json;

use qlsched::store::statements::Role;

use crate::util::{TestDb, manifest};

/// Publishes `n` every-minute triggers without the statistics publish gathers, as a database
/// looks when autovacuum has not run yet, and returns the database.
async fn fresh_unanalyzed(n: usize) -> TestDb {
    let db = TestDb::new().await;
    let triggers: Vec<_> = (0..n)
        .map(|i| json!({ "id": format!("t{i}"), "task": "t", "cron": "0 * * * * *" }))
        .collect();
    db.publish(&manifest(json!(triggers))).await;
    db
}

/// Nothing analyzed: what a replica meets before autovacuum's first pass (publish gathers
/// statistics itself, so they are deleted).
async fn forget_statistics(client: &tokio_postgres::Client) {
    client
        .batch_execute(
            "DELETE FROM pg_statistic WHERE starelid IN ('triggers'::regclass, 'trigger_schedules'::regclass,
                                                        'projects'::regclass, 'tasks'::regclass)",
        )
        .await
        .expect("forget statistics");
}

fn assert_index_walk(plan: &[String], context: &str) {
    let text = plan.join("\n");
    for table in ["trigger_schedules", "triggers"] {
        assert!(
            !plan
                .iter()
                .any(|line| line.contains(&format!("Seq Scan on {table} "))),
            "{context}: sequential scan of {table}:\n{text}"
        );
    }
    // Both scans that choose rows (uninitialized, then overdue) walk the claim-order index, so
    // the rows come in claim order and nothing is read to be sorted.
    let walks = plan
        .iter()
        .filter(|line| line.contains("Index Scan using trigger_schedules_claimable_order"))
        .count();
    assert_eq!(
        walks, 2,
        "{context}: the claim-order index is not walked:\n{text}"
    );
    assert!(
        !plan.iter().any(|line| line.contains("Sort Key")),
        "{context}: rows are sorted instead of read in claim order:\n{text}"
    );
    assert_gate_probed_once(plan, context);
}

/// The upgrade gate the claim carries: one probe of the ledger's primary key, in the one CTE
/// computed once per statement, and each scan that chooses rows behind a one-time filter on it
/// (checked once, before the scan reads or locks a row), never a filter evaluated row by row.
/// The scans a claim does not use (the named one in claim order, the two others for a named
/// row) stop on a one-time filter too.
fn assert_gate_probed_once(plan: &[String], context: &str) {
    let text = plan.join("\n");
    let count = |fragment: &str| plan.iter().filter(|line| line.contains(fragment)).count();
    assert_eq!(
        count("on schema_migrations"),
        1,
        "{context}: the ledger is read more than once, or not at all:\n{text}"
    );
    assert!(
        plan.iter().any(|line| line.contains("Index")
            && line.contains("using schema_migrations_pkey on schema_migrations")),
        "{context}: the gate is not an index probe of the ledger's key:\n{text}"
    );
    assert_eq!(count("CTE gate"), 1, "{context}:\n{text}");
    assert_eq!(
        count("One-Time Filter"),
        3,
        "{context}: each of the three scans is to stop on the gate before it reads:\n{text}"
    );
}

/// Custom plans for a small and the largest budget, then the generic plan, on `client`'s session.
async fn assert_index_walks(client: &impl tokio_postgres::GenericClient, session: &str) {
    for budget in [16, 256] {
        let plan = qlsched::store::claim::explain_claim_due(client, budget)
            .await
            .expect("explain");
        assert_index_walk(&plan, &format!("{session}: custom plan, budget {budget}"));
    }
    client
        .batch_execute("SET plan_cache_mode = force_generic_plan")
        .await
        .expect("generic plans");
    let plan = qlsched::store::claim::explain_claim_due(client, 16)
        .await
        .expect("explain");
    assert_index_walk(&plan, &format!("{session}: generic plan"));
}

#[tokio::test]
async fn the_claim_walks_the_claimable_order_index_on_a_fresh_unanalyzed_database() {
    let db = fresh_unanalyzed(10_000).await;
    let client = db.client().await;
    forget_statistics(&client).await;
    // A replica's session carries no planner setting of its own: every claim pins its plan in
    // its own transaction, so any session (or pooled server connection) plans it the same.
    let replica = db.store("plan test replica").await;
    let session = replica.client().await.expect("a replica session");
    for setting in qlsched::store::claim::CLAIM_PLAN_SETTINGS {
        let value: String = session
            .query_one(format!("SHOW {setting}").as_str(), &[])
            .await
            .expect("show")
            .get(0);
        assert_eq!(value, "on", "a replica session starts with {setting} set");
    }
    session.batch_execute("BEGIN").await.expect("begin");
    qlsched::store::claim::pin_claim_plan(&**session)
        .await
        .expect("pin");
    assert_index_walks(&**session, "replica's pinned transaction").await;
    session.batch_execute("ROLLBACK").await.expect("rollback");
    // A manual claim's transaction pins them the same way.
    client.batch_execute("BEGIN").await.expect("begin");
    qlsched::store::claim::pin_claim_plan(&client)
        .await
        .expect("pin");
    assert_index_walks(&client, "pinned transaction").await;
    // Without the pin, the planner is free (shown, not asserted: what it picks unpinned differs
    // between server versions, which is the reason for pinning).
    client.batch_execute("ROLLBACK").await.expect("rollback");
    let free = qlsched::store::claim::explain_claim_due(&client, 16)
        .await
        .expect("explain");
    eprintln!("the claim's plan, unpinned:\n{}", free.join("\n"));
}

/// A claim of one named row (an operator's `claim p/t`) runs the claim statement's `named`
/// scan alone: one probe of the primary key, whatever the statistics say, while the two walks of
/// the claim order stop on their one-time filter before they read a row; in a custom plan and in
/// the generic one.
#[tokio::test]
async fn a_named_claim_probes_the_primary_key_and_walks_nothing() {
    let db = fresh_unanalyzed(2_000).await;
    let client = db.client().await;
    forget_statistics(&client).await;
    client.batch_execute("BEGIN").await.expect("begin");
    qlsched::store::claim::pin_claim_plan(&client)
        .await
        .expect("pin");
    for (plans, trigger) in [("custom plan", "t1500"), ("generic plan", "t700")] {
        if plans == "generic plan" {
            client
                .batch_execute("SET LOCAL plan_cache_mode = force_generic_plan")
                .await
                .expect("generic plans");
        }
        let name = qlsched::core::TriggerName::new("p", trigger);
        let plan = qlsched::store::claim::explain_named_claim(&client, &name)
            .await
            .expect("explain");
        let text = plan.join("\n");
        let context = format!("{plans}, {name}");
        assert!(
            plan[0].starts_with("Update on trigger_schedules s (actual rows=1 ")
                || plan[0].starts_with("Update on trigger_schedules s (actual rows=1.00 "),
            "{context}: the named row is not claimed:\n{text}"
        );
        assert!(!text.contains("Seq Scan"), "{context}:\n{text}");
        // The `named` scan: everything the plan prints under it, one probe of the key.
        let start = plan
            .iter()
            .position(|line| line.trim() == "CTE named")
            .unwrap_or_else(|| panic!("{context}: no named scan:\n{text}"));
        let depth = |line: &str| line.len() - line.trim_start().len();
        let named: Vec<&String> = plan[start + 1..]
            .iter()
            .take_while(|line| depth(line) > depth(&plan[start]))
            .collect();
        let probe = named
            .iter()
            .find(|line| {
                line.contains("Index Scan using trigger_schedules_pkey on trigger_schedules")
            })
            .unwrap_or_else(|| panic!("{context}: the named row is not probed by key:\n{text}"));
        assert!(
            probe.contains("actual rows=1 ") || probe.contains("actual rows=1.00 "),
            "{context}: the probe does not find the row:\n{text}"
        );
        // The walks of the claim order are not run (a custom plan leaves them out altogether).
        assert!(
            plan.iter()
                .filter(|line| line.contains("trigger_schedules_claimable_order"))
                .all(|line| line.contains("never executed")),
            "{context}: the claim order is walked for a named claim:\n{text}"
        );
        assert_gate_probed_once(&plan, &context);
    }
    client.batch_execute("ROLLBACK").await.expect("rollback");
}

/// Parked rows (disabled triggers with a NULL cursor for ever, paused rows whose cursor falls
/// behind, a suspended project's rows) are not in the index the claim walks: a claim among them
/// reads only claimable rows, however many are parked.
#[tokio::test]
async fn parked_rows_are_not_in_the_index_the_claim_walks() {
    let db = TestDb::new().await;
    let mut triggers: Vec<_> = (0..2_000)
        .map(|i| json!({ "id": format!("off{i}"), "task": "t", "cron": "* * * * * *", "enabled": false }))
        .collect();
    triggers.extend(
        (0..2_000)
            .map(|i| json!({ "id": format!("paused{i}"), "task": "t", "cron": "* * * * * *" })),
    );
    triggers.extend(
        (0..20).map(|i| json!({ "id": format!("on{i}"), "task": "t", "cron": "* * * * * *" })),
    );
    db.publish(&manifest(json!(triggers))).await;
    let client = db.client().await;
    // Paused with an overdue cursor: the head of the old claim order.
    client
        .batch_execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = now_ms() - 600000,
                    paused_at_ms = now_ms() - 600000, paused_by = 'plan test'
             WHERE trigger_id LIKE 'paused%'",
        )
        .await
        .expect("pause");
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE NOT claimable")
            .await,
        4_000
    );
    client.batch_execute("BEGIN").await.expect("begin");
    qlsched::store::claim::pin_claim_plan(&client)
        .await
        .expect("pin");
    let plan: Vec<String> = client
        .query(
            format!(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {}",
                "SELECT s.project_id FROM trigger_schedules s WHERE s.claimable
                 AND (s.next_fire_at_ms IS NULL OR s.next_fire_at_ms <= now_ms())
                 ORDER BY s.next_fire_at_ms NULLS FIRST, s.project_id, s.trigger_id LIMIT 16"
            )
            .as_str(),
            &[],
        )
        .await
        .expect("explain")
        .iter()
        .map(|row| row.get(0))
        .collect();
    client.batch_execute("ROLLBACK").await.expect("rollback");
    let text = plan.join("\n");
    assert!(
        text.contains("trigger_schedules_claimable_order"),
        "the claimable-order index is not walked:\n{text}"
    );
    assert!(!text.contains("Rows Removed by Filter"), "{text}");
    // The claim itself takes the claimable rows only.
    let rows = qlsched::store::claim::explain_claim_due(&client, 16)
        .await
        .expect("explain");
    assert!(!rows.join("\n").contains("trigger_schedules_parked"));
}

/// The stored fact follows every write that changes it, in the same transaction: a trigger
/// disabled and enabled again by publish, a project suspended and made active, a pause and a
/// resume; and it always equals the definition evaluated now.
#[tokio::test]
async fn claimable_follows_publish_pause_resume_and_the_projects_status() {
    let db = TestDb::new().await;
    let claimable = |trigger: &'static str| {
        let db = &db;
        async move {
            db.count(&format!(
                "SELECT count(*) FROM trigger_schedules
                 WHERE trigger_id = '{trigger}' AND claimable
                   AND claimable = schedule_claimable(project_id, trigger_id, trigger_revision,
                                                      paused_at_ms)"
            ))
            .await
                == 1
        }
    };
    let consistent = || async {
        db.count(
            "SELECT count(*) FROM trigger_schedules
             WHERE claimable <> schedule_claimable(project_id, trigger_id, trigger_revision,
                                                   paused_at_ms)",
        )
        .await
    };
    let with = |enabled: bool, status: &str| {
        let mut m = manifest(json!([
            { "id": "a", "task": "t", "cron": "* * * * * *", "enabled": enabled },
            { "id": "b", "task": "t", "cron": "* * * * * *" }
        ]));
        m["projects"][0]["status"] = json!(status);
        m
    };
    db.publish(&with(true, "active")).await;
    assert!(claimable("a").await && claimable("b").await);
    db.publish(&with(false, "active")).await;
    assert!(!claimable("a").await && claimable("b").await);
    db.publish(&with(true, "active")).await;
    assert!(claimable("a").await);
    db.publish(&with(true, "suspended")).await;
    assert!(!claimable("a").await && !claimable("b").await);
    db.publish(&with(true, "active")).await;
    assert!(claimable("a").await && claimable("b").await);
    let paused = crate::util::qlsched(Some(&db), &["pause", "p/b", "--yes"], None);
    assert!(paused.status.success(), "{paused:?}");
    assert!(claimable("a").await && !claimable("b").await);
    let resumed = crate::util::qlsched(Some(&db), &["resume", "p/b", "--yes"], None);
    assert!(resumed.status.success(), "{resumed:?}");
    assert!(claimable("b").await);
    assert_eq!(consistent().await, 0);
}

/// `inspect schedules --state ...` on a populated table: the half that can hold rows of the
/// state walks its own index (the claimable rows in claim order, the parked rows by key or their
/// pause) and stops at the limit, the state filter being the inlined CASE of `schedule_state()`
/// evaluated on that walk, not a call per row; the other half, which cannot hold such a row,
/// reads nothing.
#[tokio::test]
async fn inspect_schedules_by_state_walks_each_index_and_stops_at_the_limit() {
    let db = TestDb::new().await;
    let mut triggers: Vec<_> = (0..2_000)
        .map(|i| json!({ "id": format!("on{i}"), "task": "t", "cron": "* * * * * *" }))
        .collect();
    triggers.extend(
        (0..2_000)
            .map(|i| json!({ "id": format!("off{i}"), "task": "t", "cron": "* * * * * *", "enabled": false })),
    );
    db.publish(&manifest(json!(triggers))).await;
    let client = db.client().await;
    // Half the claimable rows overdue, the other half an hour ahead; every parked row overdue
    // too, which it never shows as; 111 rows paused. Then each row copied twenty times (84,000 rows), by SQL
    // rather than a publish of as many triggers: on a table of a few thousand rows a sequential
    // scan is as cheap as any walk, and the planner rightly takes it.
    client
        .batch_execute(
            "UPDATE trigger_schedules
             SET next_fire_at_ms = CASE WHEN trigger_id LIKE 'on1%' THEN now_ms() + 3600000
                                        ELSE now_ms() - 600000 END;
             UPDATE trigger_schedules SET paused_at_ms = now_ms(), paused_by = 'plan test'
             WHERE trigger_id LIKE 'on2%';
             INSERT INTO triggers
             SELECT project_id, trigger_id || '-' || copy, task_id, revision, kind, provider,
                    enabled, cron_expr, time_zone, misfire_policy, misfire_grace_ms,
                    content_digest, created_at_ms, updated_at_ms
             FROM triggers, generate_series(1, 20) copy;
             INSERT INTO trigger_schedules (project_id, trigger_id, trigger_revision,
                                            next_fire_at_ms, updated_at_ms, paused_at_ms,
                                            paused_by)
             SELECT project_id, trigger_id || '-' || copy, trigger_revision, next_fire_at_ms,
                    updated_at_ms, paused_at_ms, paused_by
             FROM trigger_schedules, generate_series(1, 20) copy;
             ANALYZE triggers, trigger_schedules",
        )
        .await
        .expect("cursors and copies");
    assert_eq!(
        db.count("SELECT count(*) FROM trigger_schedules WHERE claimable")
            .await,
        42_000 - 21 * 111
    );
    use qlsched::store::read::{ScheduleFilter, ScheduleState};
    // Each filter with the index that finds its rows and the one it must leave alone.
    let cases = [
        (
            ScheduleFilter {
                state: Some(ScheduleState::Due),
                limit: 10,
                ..Default::default()
            },
            "trigger_schedules_claimable_order ",
            "trigger_schedules_parked",
        ),
        (
            ScheduleFilter {
                state: Some(ScheduleState::Disabled),
                limit: 10,
                ..Default::default()
            },
            "trigger_schedules_parked ",
            "trigger_schedules_claimable_order",
        ),
        (
            ScheduleFilter {
                paused: true,
                limit: 10,
                ..Default::default()
            },
            "trigger_schedules_paused ",
            "trigger_schedules_claimable_order",
        ),
    ];
    for (filter, walked, skipped) in cases {
        let plan = qlsched::store::read::explain_schedules(&client, &filter)
            .await
            .expect("explain");
        let text = plan.join("\n");
        let context = format!("{filter:?}");
        assert!(
            !text.contains("Seq Scan"),
            "{context}: a sequential scan of the schedule rows:\n{text}"
        );
        let walk = plan
            .iter()
            .find(|line| line.contains(&format!("Index Scan using {walked}")))
            .unwrap_or_else(|| panic!("{context}: {walked} is not walked:\n{text}"));
        // PostgreSQL 18 prints the rows with two decimals ("actual rows=10.00").
        assert!(
            walk.contains("actual rows=10 ") || walk.contains("actual rows=10.00 "),
            "{context}: the walk does not stop at the limit:\n{text}"
        );
        // The other half is a one-time filter on the parameters: its scan never runs.
        assert!(
            plan.iter()
                .all(|line| !line.contains(skipped) || line.contains("never executed")),
            "{context}: {skipped} is read for rows it cannot hold:\n{text}"
        );
        assert!(
            !text.contains("Sort Key: s."),
            "{context}: a half sorts its rows instead of reading them in index order:\n{text}"
        );
        // Inlined: the CASE is in the plan, and no call of the function is left to make per row.
        assert!(
            !text.contains("schedule_state("),
            "{context}: schedule_state() is called, not inlined:\n{text}"
        );
        let rows = qlsched::store::read::schedules(&client, &filter)
            .await
            .expect("schedules");
        assert_eq!(rows.len(), 10, "{context}");
        let expected = filter.state.unwrap_or(ScheduleState::Paused);
        assert!(
            rows.iter().all(|row| row.state == expected),
            "{context}: {rows:?}"
        );
    }
    let filter = ScheduleFilter {
        state: Some(ScheduleState::Due),
        limit: 10,
        ..Default::default()
    };
    let plan = qlsched::store::read::explain_schedules(&client, &filter)
        .await
        .expect("explain");
    assert!(
        plan.iter()
            .any(|line| line.contains("Filter:") && line.contains("'expired_claim'::text")),
        "the state filter is not the inlined CASE:\n{}",
        plan.join("\n")
    );
    let rows = qlsched::store::read::schedules(&client, &filter)
        .await
        .expect("schedules");
    assert!(
        rows.iter()
            .all(|row| row.due_in_ms.is_some_and(|ms| ms <= 0)),
        "{rows:?}"
    );
}

/// The run events' payloads (migration 0017's `run_created_payload()` and `run_queued_payload()`)
/// are inlined into every statement that writes them, planned as each role that runs it: the
/// object is built in the plan as if written there, and no call of a function is left to make
/// per run. The statements are found by the call in their text, so a new writer is checked too.
#[tokio::test]
async fn the_run_event_payloads_are_inlined_into_every_admission() {
    let db = TestDb::new().await;
    let mut client = db.client().await;
    let statements: Vec<_> = [
        qlsched::store::statements::all(),
        qlsched::bench::statements::all(),
    ]
    .concat()
    .into_iter()
    .filter(|statement| statement.text.contains("run_created_payload("))
    .collect();
    let names: Vec<&str> = statements.iter().map(|statement| statement.name).collect();
    for name in ["ADMIT", "ADMIT_UNCLAIMED", "HISTORY"] {
        assert!(
            names.contains(&name),
            "{name} writes no run.created: {names:?}"
        );
    }
    for (n, statement) in statements.iter().enumerate() {
        let roles = std::iter::once(Role::Owner).chain(
            statement
                .run_by
                .iter()
                .copied()
                .filter(|role| *role != Role::Owner),
        );
        for (m, role) in roles.enumerate() {
            let context = format!("{}::{} as {role:?}", statement.module, statement.name);
            let transaction = crate::statements::as_role(&mut client, statement, role).await;
            let parameters = transaction
                .prepare(statement.text)
                .await
                .unwrap_or_else(|e| panic!("{context}: {e}"))
                .params()
                .len();
            // EXPLAIN EXECUTE takes a statement prepared under a name of SQL's; NULL for each
            // parameter is enough to plan.
            let name = format!("payloads_{n}_{m}");
            transaction
                .batch_execute(&format!("PREPARE {name} AS {}", statement.text))
                .await
                .unwrap_or_else(|e| panic!("{context}: {e}"));
            let arguments = vec!["NULL"; parameters].join(", ");
            let plan: Vec<String> = transaction
                .query(
                    &format!("EXPLAIN (VERBOSE, COSTS OFF) EXECUTE {name}({arguments})"),
                    &[],
                )
                .await
                .unwrap_or_else(|e| panic!("{context}: {e}"))
                .iter()
                .map(|row| row.get(0))
                .collect();
            transaction.rollback().await.expect("rollback");
            let text = plan.join("\n");
            assert!(
                !text.contains("_payload("),
                "{context}: a payload function is called, not inlined:\n{text}"
            );
            assert!(
                text.contains("'claim_version'") && text.contains("'executor'"),
                "{context}: the payloads are not in the plan:\n{text}"
            );
        }
    }
}
