//! The claim statement's plan: it walks the claim-order index whatever the statistics say, so a
//! claim stays cheap straight after a large publish, before anything analyzed the tables.

use serde_json::json;

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
        .filter(|line| line.contains("Index Scan using trigger_schedules_claim_order"))
        .count();
    assert_eq!(
        walks, 2,
        "{context}: the claim-order index is not walked:\n{text}"
    );
    assert!(
        !plan.iter().any(|line| line.contains("Sort Key")),
        "{context}: rows are sorted instead of read in claim order:\n{text}"
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
async fn the_claim_walks_the_claim_order_index_on_a_fresh_unanalyzed_database() {
    let db = fresh_unanalyzed(10_000).await;
    let client = db.client().await;
    // Nothing analyzed: what a replica meets before autovacuum's first pass.
    client
        .batch_execute(
            "DELETE FROM pg_statistic WHERE starelid IN ('triggers'::regclass, 'trigger_schedules'::regclass,
                                                        'projects'::regclass, 'tasks'::regclass)",
        )
        .await
        .expect("forget statistics");
    // A replica's session: its startup options carry the plan settings, no transaction needed.
    let replica = db.store("plan test replica").await;
    assert_index_walks(
        &**replica.client().await.expect("a replica session"),
        "replica session",
    )
    .await;
    // A manual claim's transaction pins them for itself.
    client.batch_execute("BEGIN").await.expect("begin");
    qlsched::store::claim::pin_claim_plan(&client)
        .await
        .expect("pin");
    assert_index_walks(&client, "pinned transaction").await;
    // Without either, the planner is free (shown, not asserted: what it picks unpinned differs
    // between server versions, which is the reason for pinning).
    client.batch_execute("ROLLBACK").await.expect("rollback");
    let free = qlsched::store::claim::explain_claim_due(&client, 16)
        .await
        .expect("explain");
    eprintln!("the claim's plan, unpinned:\n{}", free.join("\n"));
}
