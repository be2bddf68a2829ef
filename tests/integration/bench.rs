//! Issue 5, point 2: `qlsched bench` at a tiny size admits every occurrence exactly once, with one
//! attempt and two events each. Correctness only: no timing is asserted.

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
