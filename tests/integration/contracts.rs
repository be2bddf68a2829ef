//! What the commands print with `-o json` conforms to the shapes their man pages are rendered
//! from (`qlsched::cli::contract`): a field added, renamed, retyped or left out of a printed type
//! without its schema fails here, and `generated.rs` keeps the man pages equal to the schemas.
//! Every shape is checked against a real command's output: here, or (the benchmarks, which take
//! a scratch database of their own) in `bench.rs`.

use qlsched::cli::contract::{Shape, check, shapes};

use crate::util::{TestDb, code, every_second, qlsched, sleep_ms, stderr, stdout};

fn shape(name: &str) -> Shape {
    shapes()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no shape {name}"))
}

/// Fails naming what `value` has that the shape `name` does not say, or lacks.
pub fn assert_conforms(name: &str, value: &serde_json::Value) {
    let problems = check(&shape(name).schema, value);
    assert!(
        problems.is_empty(),
        "{name} printed what its man page does not say:\n{problems:#?}\n{value:#}"
    );
}

/// Runs `args` with `-o json` and checks its output against the shape `name`; returns it.
fn conforms(db: &TestDb, name: &str, args: &[&str]) -> serde_json::Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    let output = qlsched(Some(db), &args, None);
    assert_eq!(code(&output), 0, "{args:?}: {}", stderr(&output));
    let value: serde_json::Value =
        serde_json::from_str(&stdout(&output)).expect("one JSON document");
    assert_conforms(name, &value);
    value
}

/// A database with two every-second triggers, both initialized by a round (so they have a
/// cursor), a claim held by hand on `p/x`, and `p/y` paused and resumed after occurrences passed
/// (a misfire record, reason paused).
async fn lived_in() -> TestDb {
    let db = TestDb::new().await;
    db.publish(&every_second(&["x", "y"])).await;
    let store = db.store("contracts").await;
    let rows = crate::util::claim(&store, "r1", 16, 30_000).await;
    let admissions: Vec<_> = rows.iter().map(crate::util::admission).collect();
    crate::util::admit(&store, &admissions)
        .await
        .expect("initialize");
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
    db
}

#[tokio::test]
async fn inspect_prints_every_view_in_its_documented_shape() {
    let db = lived_in().await;
    let fired = conforms(&db, "fire", &["fire", "p/y", "--yes"]);
    let run_id = fired["run_id"].as_str().expect("a run id").to_owned();

    let summary = conforms(&db, "inspect", &["inspect"]);
    assert_eq!(summary["server"]["role"], "primary", "{summary}");
    // No replica runs here and rows are due: an outage, its report on stdout and exit 7.
    let output = qlsched(Some(&db), &["inspect", "--check", "-o", "json"], None);
    assert_eq!(code(&output), 7, "{}", stderr(&output));
    let check: serde_json::Value =
        serde_json::from_str(&stdout(&output)).expect("one JSON document");
    assert_conforms("inspect --check", &check);
    assert_eq!(check["outage"]["kind"], "no_live_replica", "{check}");
    conforms(&db, "inspect replicas", &["inspect", "replicas"]);
    let schedules = conforms(&db, "inspect schedules", &["inspect", "schedules"]);
    assert_eq!(schedules.as_array().map(Vec::len), Some(2), "{schedules}");
    let claims = conforms(&db, "inspect claims", &["inspect", "claims"]);
    assert_eq!(claims.as_array().map(Vec::len), Some(1), "{claims}");
    let runs = conforms(&db, "inspect runs", &["inspect", "runs"]);
    assert!(
        runs.as_array()
            .into_iter()
            .flatten()
            .any(|run| run["origin"] == "manual"),
        "{runs}"
    );
    conforms(&db, "inspect run", &["inspect", "run", &run_id]);
    let trigger = conforms(&db, "inspect trigger", &["inspect", "trigger", "p/x"]);
    assert_eq!(
        trigger["why_not_firing"]["cause"], "claim_held",
        "{trigger}"
    );
    conforms(&db, "inspect recovery", &["inspect", "recovery"]);
    let load = conforms(&db, "inspect load", &["inspect", "load"]);
    assert_eq!(load["triggers"], 2, "{load}");
    conforms(&db, "inspect invariants", &["inspect", "invariants"]);
    let audit = conforms(&db, "inspect audit", &["inspect", "audit"]);
    let actions: Vec<&str> = audit
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row["action"].as_str())
        .collect();
    for action in ["claim", "pause", "resume", "fire"] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
    let misfires = conforms(&db, "inspect misfires", &["inspect", "misfires"]);
    assert_eq!(misfires[0]["reason"], "paused", "{misfires}");
}

#[tokio::test]
async fn the_operator_commands_print_their_documented_shapes() {
    let db = lived_in().await;
    for name in ["migrate up", "migrate status", "migrate verify"] {
        let args: Vec<&str> = name.split(' ').collect();
        conforms(&db, name, &args);
    }
    // The manifest on standard input: the test leaves no file behind.
    let manifest = every_second(&["x", "y", "z"]).to_string();
    let output = qlsched(
        Some(&db),
        &["publish", "-f", "-", "--dry-run", "-o", "json"],
        Some(&manifest),
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let published = serde_json::from_str(&stdout(&output)).expect("one JSON document");
    assert_conforms("publish", &published);
    assert_eq!(published["dry_run"], true, "{published}");
    conforms(
        &db,
        "cron",
        &["cron", "*/30 1 * * *", "-z", "Europe/Berlin", "-n", "3"],
    );

    // The claim on p/x is held by `o`: a dry run shows it, expire gives it back.
    // A dry run does not wait for the row to come due: asked until it has (every second).
    let dry_run = ["claim", "p/y", "--dry-run", "-o", "json"];
    let mut output = qlsched(Some(&db), &dry_run, None);
    for _ in 0..20 {
        if code(&output) == 0 {
            break;
        }
        sleep_ms(100).await;
        output = qlsched(Some(&db), &dry_run, None);
    }
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let shown = serde_json::from_str(&stdout(&output)).expect("one JSON document");
    assert_conforms("claim", &shown);
    let expired = conforms(&db, "expire", &["expire", "p/x", "--yes"]);
    assert_eq!(
        expired["expired"].as_array().map(Vec::len),
        Some(1),
        "{expired}"
    );
    let held = conforms(
        &db,
        "claim",
        &["claim", "p/y", "--hold", "--owner", "ops", "--wait", "5s"],
    );
    let fence = &held["fence"];
    let (token, version) = (
        fence["token"].as_str().expect("token").to_owned(),
        fence["version"].to_string(),
    );
    let fenced = ["p/y", "--token", &token, "--version", &version];
    let mut admit = vec!["claim", "admit"];
    admit.extend(fenced);
    admit.extend(["--dry-run"]);
    conforms(&db, "claim admit", &admit);
    let mut release = vec!["claim", "release"];
    release.extend(fenced);
    conforms(&db, "claim release", &release);

    let now_ms = chrono::Utc::now().timestamp_millis();
    let (from, to) = ((now_ms - 60_000).to_string(), (now_ms - 5_000).to_string());
    conforms(
        &db,
        "backfill",
        &[
            "backfill",
            "p/x",
            "--from",
            &from,
            "--to",
            &to,
            "--dry-run",
            "--yes",
        ],
    );
    conforms(&db, "pause", &["pause", "p/x", "--dry-run", "--yes"]);
    conforms(&db, "resume", &["resume", "p/y", "--dry-run", "--yes"]);
}

/// Every shape the man pages show is one a test checks a real command's output against: its
/// name is written, quoted, in the tests of this file or of `bench.rs`.
#[test]
fn every_documented_shape_is_checked_against_a_command() {
    let sources = [include_str!("contracts.rs"), include_str!("bench.rs")].concat();
    let unchecked: Vec<String> = shapes()
        .iter()
        .map(|s| s.name.to_owned())
        .filter(|name| !sources.contains(&format!("{name:?}")))
        .collect();
    assert!(unchecked.is_empty(), "shapes no test checks: {unchecked:?}");
}

/// The libraries derive `JsonSchema` only behind their `schema` feature, which the binary alone
/// enables (docs/DECISIONS.md, "Dependencies"): a derive or a `#[schemars(..)]` written plainly
/// builds in the workspace, where the feature is on, and breaks the crate built on its own.
#[test]
fn the_libraries_name_schemars_only_behind_their_schema_feature() {
    fn files(dir: &std::path::Path, into: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read the sources") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                files(&path, into);
            } else if path.extension().is_some_and(|e| e == "rs") {
                into.push(path);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut plain, mut gated) = (Vec::new(), 0);
    for krate in [
        "qlsched-core",
        "qlsched-store",
        "qlsched-service",
        "qlsched-bench",
    ] {
        let manifest = std::fs::read_to_string(root.join("crates").join(krate).join("Cargo.toml"))
            .expect("the manifest");
        assert!(
            manifest.contains("schemars = { workspace = true, optional = true }")
                && manifest.contains("schema = [\"dep:schemars\""),
            "{krate}: schemars is not an optional dependency behind the `schema` feature"
        );
        let mut sources = Vec::new();
        files(&root.join("crates").join(krate).join("src"), &mut sources);
        for file in sources {
            let text = std::fs::read_to_string(&file).expect("a source");
            // Inside an item under `#[cfg(feature = "schema")]`, down to its closing brace.
            let (mut under_cfg, mut depth, mut opened) = (false, 0i32, false);
            for (n, line) in text.lines().enumerate() {
                let code = line.trim();
                if code == "#[cfg(feature = \"schema\")]" {
                    (under_cfg, depth, opened) = (true, 0, false);
                    gated += 1;
                    continue;
                }
                if code.contains("schemars") && !code.starts_with("//") {
                    if code.contains("cfg_attr(feature = \"schema\"") {
                        gated += 1;
                    } else if !under_cfg {
                        plain.push(format!("{}:{}: {code}", file.display(), n + 1));
                    }
                }
                if under_cfg {
                    depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
                    opened |= code.contains('{');
                    if opened && depth <= 0 {
                        under_cfg = false;
                    }
                }
            }
        }
    }
    assert!(gated > 50, "only {gated} gated uses of schemars found");
    assert!(
        plain.is_empty(),
        "schemars named outside the `schema` feature (write #[cfg_attr(feature = \"schema\", ..)]):\n{}",
        plain.join("\n")
    );
}
