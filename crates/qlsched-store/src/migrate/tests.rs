//! The migrations list against the files, the docs and the changelog; the floors and the flags;
//! the replicas a pending migration would stop; a migration run outside a transaction, split.

use super::status::to_stop;
use super::*;

/// docs/OPERATIONS.md's "Upgrading" table gives each migration's answer to "may replicas of
/// the previous release keep running beside it" and its upgrade floor, the ones `migrate`
/// records.
#[test]
fn the_upgrading_table_states_each_migrations_flag_and_floor() {
    let operations = include_str!("../../../../docs/OPERATIONS.md");
    for migration in MIGRATIONS {
        let name = migration.file_name();
        let stem = name.trim_end_matches(".sql");
        let row = operations
            .lines()
            .find(|line| line.starts_with(&format!("| `{stem}` |")))
            .unwrap_or_else(|| panic!("docs/OPERATIONS.md has no Upgrading row for {stem}"));
        let answer = format!(
            "| `{stem}` | {} | {} |",
            if migration.previous_release_may_run() {
                "yes"
            } else {
                "no"
            },
            migration.upgrade_floor
        );
        assert!(row.starts_with(&answer), "{stem}: {row}, not {answer}");
    }
}

/// A floor names a build at or before the migration: above it, it would stop the builds that
/// carry it. The flag recorded for 0.2.0 says exactly whether a build of its schema may run.
#[test]
fn each_floor_is_at_most_its_migration_and_the_flag_follows_it() {
    for migration in MIGRATIONS {
        assert!(
            (1..=migration.version).contains(&migration.upgrade_floor),
            "{}: floor {}",
            migration.file_name(),
            migration.upgrade_floor
        );
        if migration.version > LAST_SCHEMA_GATED_BY_FLAG {
            assert_eq!(
                migration.previous_release_may_run(),
                migration.upgrade_floor <= LAST_SCHEMA_GATED_BY_FLAG,
                "{}",
                migration.file_name()
            );
        }
    }
    let floor = |version, upgrade_floor| Migration {
        version,
        name: "example",
        sql: "",
        upgrade_floor,
    };
    // A later migration that raises the floor past 0.2.0's schema stops 0.2.0 by its flag,
    // though the build just before it may run beside it.
    assert!(!floor(16, 14).previous_release_may_run());
    assert!(floor(16, 13).previous_release_may_run());
    assert!(floor(8, 7).previous_release_may_run());
    assert!(!floor(8, 8).previous_release_may_run());
}

/// CHANGELOG.md lists every migration once, under the release that brings it, with the flag
/// and the floor `migrate` records for it; each release's "Beside the previous release" is
/// yes exactly when all of its migrations say yes; the newest release is this build's
/// version, below an "Unreleased" section when there is one (what the next release brings).
#[test]
fn the_changelog_lists_each_migration_with_its_flag_and_floor_under_one_release() {
    /// A release's version, its migrations with their flags and floors, and its "Beside" line.
    type Release = (String, Vec<(String, bool, i64)>, Option<bool>);
    let changelog = include_str!("../../../../CHANGELOG.md");
    let mut releases: Vec<Release> = Vec::new();
    for line in changelog.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            let version = heading.split_whitespace().next().unwrap_or_default();
            releases.push((version.to_owned(), Vec::new(), None));
        } else if let Some((_, rows, beside)) = releases.last_mut() {
            if let Some(rest) = line.strip_prefix("| `") {
                let (stem, rest) = rest.split_once("` |").expect("a migration row");
                let cells: Vec<&str> = rest.split('|').map(str::trim).collect();
                let flag = match cells.first() {
                    Some(&"yes") => true,
                    Some(&"no") => false,
                    other => panic!("CHANGELOG.md: {stem} says {other:?}, not yes or no"),
                };
                let floor = cells
                    .get(1)
                    .and_then(|cell| cell.parse().ok())
                    .unwrap_or_else(|| panic!("CHANGELOG.md: {stem} gives no floor: {line}"));
                rows.push((stem.to_owned(), flag, floor));
            } else if line.contains("Beside the previous release: yes") {
                *beside = Some(true);
            } else if line.contains("Beside the previous release: no") {
                *beside = Some(false);
            }
        }
    }
    let newest = releases
        .iter()
        .map(|(version, _, _)| version.as_str())
        .find(|version| *version != "Unreleased");
    assert_eq!(
        newest,
        Some(env!("CARGO_PKG_VERSION")),
        "CHANGELOG.md's newest release is this build's version"
    );
    let listed: Vec<&(String, bool, i64)> = releases.iter().flat_map(|(_, rows, _)| rows).collect();
    for migration in MIGRATIONS {
        let name = migration.file_name();
        let stem = name.trim_end_matches(".sql");
        let rows: Vec<&&(String, bool, i64)> =
            listed.iter().filter(|(s, _, _)| s == stem).collect();
        let expected = format!(
            "{} | {}",
            if migration.previous_release_may_run() {
                "yes"
            } else {
                "no"
            },
            migration.upgrade_floor
        );
        assert_eq!(
            rows.len(),
            1,
            "CHANGELOG.md lists {stem} {} times: add `| `{stem}` | {expected} |` once, under \
             the release that brings it",
            rows.len()
        );
        assert_eq!(
            (rows[0].1, rows[0].2),
            (
                migration.previous_release_may_run(),
                migration.upgrade_floor
            ),
            "CHANGELOG.md: {stem} must say {expected}, as MIGRATIONS does"
        );
    }
    assert_eq!(
        listed.len(),
        MIGRATIONS.len(),
        "CHANGELOG.md lists a migration this build does not carry"
    );
    for (version, rows, beside) in &releases {
        let all = rows.iter().all(|(_, flag, _)| *flag);
        assert_eq!(
            *beside,
            Some(all),
            "CHANGELOG.md {version}: \"Beside the previous release\" must say {}",
            if all { "yes" } else { "no" }
        );
    }
}

/// A pending migration stops the running replicas built for a schema below its floor, and
/// those that do not say when its floor is above 0.1's schema; one whose floor is at or below
/// every running replica's schema stops none.
#[test]
fn a_pending_migration_names_the_running_replicas_it_would_stop() {
    let replica = |owner: &str, schema_version: Option<i64>| RunningReplica {
        owner: owner.to_owned(),
        version: "test".to_owned(),
        schema_version,
    };
    let running = [
        replica("older", Some(6)),
        replica("unsaid", None),
        replica("built-for-it", Some(7)),
        replica("newer", Some(9)),
    ];
    let forbidding = Migration {
        version: 7,
        name: "forbidding",
        sql: "",
        upgrade_floor: 7,
    };
    let owners: Vec<String> = to_stop(&forbidding, &running)
        .into_iter()
        .map(|r| r.owner)
        .collect();
    assert_eq!(owners, ["older", "unsaid"]);
    let allowing = Migration {
        upgrade_floor: 6,
        ..forbidding
    };
    assert!(to_stop(&allowing, &running).is_empty());
    // A floor two migrations up stops a build one behind it too.
    let raising = Migration {
        version: 9,
        upgrade_floor: 8,
        ..forbidding
    };
    let owners: Vec<String> = to_stop(&raising, &running)
        .into_iter()
        .map(|r| r.owner)
        .collect();
    assert_eq!(owners, ["older", "unsaid", "built-for-it"]);
}

/// A migration run outside a transaction is split into its statements at each `;` that ends
/// a line, its comments left out, and names the indexes it builds concurrently; one with a
/// `$$` body is refused.
#[test]
fn a_migration_outside_a_transaction_splits_into_its_statements_and_names_its_indexes() {
    let migration = Migration {
        version: 99,
        name: "concurrent",
        sql: "-- no-transaction\n-- Why: an index for a read.\n\
              CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_by_time\n    ON runs (created_at_ms);\n\n\
              CREATE UNIQUE INDEX CONCURRENTLY \"runs_key\" ON runs (run_id);\n\
              CREATE INDEX CONCURRENTLY ON runs (status);\n",
        upgrade_floor: 98,
    };
    assert!(migration.outside_a_transaction());
    assert_eq!(
        migration.statements().expect("plain statements"),
        [
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_by_time\n    ON runs (created_at_ms);\n",
            "CREATE UNIQUE INDEX CONCURRENTLY \"runs_key\" ON runs (run_id);\n",
            "CREATE INDEX CONCURRENTLY ON runs (status);\n",
        ]
    );
    assert_eq!(migration.concurrent_indexes(), ["runs_by_time", "runs_key"]);
    let with_body = Migration {
        sql: "-- no-transaction\nDO $$ BEGIN PERFORM 1; END $$;\n",
        ..migration
    };
    assert!(matches!(
        with_body.statements(),
        Err(StoreError::SchemaNotReady(message)) if message.contains("0099_concurrent.sql")
    ));
}

#[test]
fn embedded_migrations_match_the_migrations_folder() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../migrations");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .expect("migrations folder")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".sql"))
        .collect();
    files.sort();
    let embedded: Vec<String> = MIGRATIONS.iter().map(Migration::file_name).collect();
    assert_eq!(
        files, embedded,
        "every file in migrations/ must be listed in MIGRATIONS"
    );
    for (index, migration) in MIGRATIONS.iter().enumerate() {
        assert_eq!(
            migration.version,
            i64::try_from(index).unwrap() + 1,
            "versions run 1, 2, 3, … without a gap"
        );
    }
}
