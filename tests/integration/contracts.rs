//! What the commands print with `-o json` conforms to the shapes their man pages are rendered
//! from (`qlsched::cli::contract`): a field added, renamed, retyped or left out of a printed type
//! without its schema fails here, and `generated.rs` keeps the man pages equal to the schemas.

use qlsched::cli::contract::{Shape, check, shapes};

use crate::util::{TestDb, code, every_second, qlsched, sleep_ms, stderr, stdout};

fn shape(name: &str) -> Shape {
    shapes()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no shape {name}"))
}

/// Runs `args` with `-o json` and checks its output against the shape `name`; returns it.
fn conforms(db: &TestDb, name: &str, args: &[&str]) -> serde_json::Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    let output = qlsched(Some(db), &args, None);
    assert_eq!(code(&output), 0, "{args:?}: {}", stderr(&output));
    let value: serde_json::Value =
        serde_json::from_str(&stdout(&output)).expect("one JSON document");
    let problems = check(&shape(name).schema, &value);
    assert!(
        problems.is_empty(),
        "{args:?} printed what its man page does not say:\n{problems:#?}\n{value:#}"
    );
    value
}

#[tokio::test]
async fn inspect_claims_audit_and_misfires_print_their_documented_shapes() {
    let db = TestDb::new().await;
    db.publish(&every_second(&["x", "y"])).await;
    // Both rows initialized by a round, so they have a cursor.
    let store = db.store("contracts").await;
    let rows = crate::util::claim(&store, "r1", 16, 30_000).await;
    let admissions: Vec<_> = rows.iter().map(crate::util::admission).collect();
    crate::util::admit(&store, &admissions)
        .await
        .expect("initialize");
    // A held claim (an audit row with a fence), a pause and a resume after occurrences passed
    // while paused (a misfire record, reason paused; audit rows without a fence after).
    let held = qlsched(
        Some(&db),
        &["claim", "p/x", "--hold", "--owner", "o", "--wait", "5s"],
        None,
    );
    assert_eq!(code(&held), 0, "{}", stderr(&held));
    let paused = qlsched(Some(&db), &["pause", "p/y", "--yes", "--reason", "r"], None);
    assert_eq!(code(&paused), 0, "{}", stderr(&paused));
    sleep_ms(2_500).await;
    let resumed = qlsched(Some(&db), &["resume", "p/y", "--yes"], None);
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));

    let claims = conforms(&db, "inspect claims", &["inspect", "claims"]);
    assert_eq!(claims.as_array().map(Vec::len), Some(1), "{claims}");
    let audit = conforms(&db, "inspect audit", &["inspect", "audit"]);
    let actions: Vec<&str> = audit
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row["action"].as_str())
        .collect();
    for action in ["claim", "pause", "resume"] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
    let misfires = conforms(&db, "inspect misfires", &["inspect", "misfires"]);
    assert_eq!(misfires[0]["reason"], "paused", "{misfires}");
}
