//! Every SQL statement of `store` (`store::statements::all`) and of the bench crate
//! (`bench::statements::all`, the benchmark's and the scratch databases' SQL, kept out of the
//! product) is prepared against a migrated database, and planned as each role that runs it, so
//! that a renamed column or a missing grant fails here rather than in a replica. A line scan of
//! both crates' sources (`SQL_SOURCES`) keeps the lists whole: a SQL constant missing from them, a
//! statement written in place that neither crate's `statements::BUILT_IN_PLACE` accounts for, or
//! one assembled by `concat!` fails the second test, named. Each statement is one literal, whole in the source, so a scan of lines
//! finds it: no tokenizer of Rust is needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use qlsched::store::statements::{Role, Statement};

/// Every statement listed: the store's, then the bench crate's.
fn all() -> Vec<Statement> {
    [
        qlsched::store::statements::all(),
        qlsched::bench::statements::all(),
    ]
    .concat()
}

/// Every statement written in place, with the module that builds it: the store's, then the
/// bench crate's.
fn built_in_place() -> Vec<(&'static str, &'static str, &'static str)> {
    [
        qlsched::store::statements::BUILT_IN_PLACE,
        qlsched::bench::statements::BUILT_IN_PLACE,
    ]
    .concat()
}

use crate::util::TestDb;

/// The words a SQL statement of this repository starts with.
const SQL_VERBS: &[&str] = &[
    "ALTER", "ANALYZE", "BEGIN", "CALL", "COMMENT", "COMMIT", "COPY", "CREATE", "DELETE", "DO",
    "DROP", "EXPLAIN", "GRANT", "INSERT", "LOCK", "MERGE", "RESET", "REVOKE", "ROLLBACK", "SELECT",
    "SET", "SHOW", "TRUNCATE", "UPDATE", "VACUUM", "WITH",
];

/// Statements that can be planned, hence checked against a role's privileges by EXPLAIN.
const PLANNABLE: &[&str] = &["DELETE", "INSERT", "SELECT", "UPDATE", "WITH"];

static CHECKS: AtomicUsize = AtomicUsize::new(0);

fn first_word(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("")
}

fn label(statement: &Statement) -> String {
    format!("{}::{}", statement.module, statement.name)
}

/// A transaction in which `statement` runs as `role` would run it: its setup statement run, the
/// role's group set for the transaction. The caller rolls it back.
pub(crate) async fn as_role<'c>(
    client: &'c mut tokio_postgres::Client,
    statement: &Statement,
    role: Role,
) -> tokio_postgres::Transaction<'c> {
    let transaction = client.transaction().await.expect("begin");
    if let Some(setup) = statement.after {
        transaction.batch_execute(setup).await.expect("setup");
    }
    if let Some(group) = role.group() {
        transaction
            .batch_execute(&format!("SET LOCAL ROLE {group}"))
            .await
            .expect("set role");
    }
    transaction
}

/// Why `statement` does not prepare (as the owner), or does not plan as `role`; `None` when it
/// does. Each check runs in a transaction that is rolled back.
async fn check(
    client: &mut tokio_postgres::Client,
    statement: &Statement,
    role: Role,
) -> Option<String> {
    let transaction = as_role(client, statement, role).await;
    let prepared = match transaction.prepare(statement.text).await {
        Ok(prepared) => prepared,
        Err(error) => return Some(format!("does not prepare: {}", reason(&error))),
    };
    if role.group().is_none() || !PLANNABLE.contains(&first_word(statement.text)) {
        return None;
    }
    // EXPLAIN plans without running, and checks privileges as the executor would: NULL for each
    // parameter is enough to plan.
    // The statement is prepared again under a name of SQL's, which EXPLAIN EXECUTE takes;
    // prepared statements outlive the rollback, hence one name each.
    let name = format!("qlsched_check_{}", CHECKS.fetch_add(1, Ordering::Relaxed));
    let arguments = match prepared.params().len() {
        0 => String::new(),
        n => format!("({})", vec!["NULL"; n].join(", ")),
    };
    let explain = format!(
        "PREPARE {name} AS {}; EXPLAIN EXECUTE {name}{arguments}",
        statement.text
    );
    match transaction.batch_execute(&explain).await {
        Ok(()) => None,
        Err(error) => Some(format!("does not plan as {role:?}: {}", reason(&error))),
    }
}

fn reason(error: &tokio_postgres::Error) -> String {
    error
        .as_db_error()
        .map_or_else(|| error.to_string(), |db| db.message().to_owned())
}

#[tokio::test]
async fn every_store_statement_prepares_and_plans_as_the_roles_that_run_it() {
    let db = TestDb::new().await;
    let mut client = db.client().await;
    let statements = all();
    let mut failures = Vec::new();
    let mut plans = 0;
    for statement in &statements {
        let groups = statement.run_by.iter().filter(|role| **role != Role::Owner);
        for role in std::iter::once(Role::Owner).chain(groups.copied()) {
            if let Some(why) = check(&mut client, statement, role).await {
                failures.push(format!("{} {why}", label(statement)));
                break;
            } else if role != Role::Owner {
                plans += 1;
            }
        }
    }
    let not_prepared = built_in_place()
        .iter()
        .filter(|(_, _, why)| why.starts_with("not prepared"))
        .count();
    eprintln!(
        "{} statements prepared, {plans} plans as a role; {not_prepared} built in place not prepared",
        statements.len()
    );
    assert!(
        statements.len() > 100,
        "only {} statements",
        statements.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_sql_constant_of_store_is_listed_and_nothing_is_built_unaccounted() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let listed: BTreeSet<(String, String)> = all()
        .iter()
        .map(|s| (s.module.to_owned(), s.name.to_owned()))
        .collect();
    let mut missing = Vec::new();
    let mut unaccounted = Vec::new();
    let mut used_exceptions = BTreeSet::new();
    let mut assembled = Vec::new();
    let mut positional = Vec::new();
    let mut constants = 0;
    let built_in_place = built_in_place();
    for (file, module) in sql_sources(&root) {
        let source = std::fs::read_to_string(&file).expect("read source");
        let production = source.split("\n#[cfg(test)]").next().unwrap_or("");
        let scan = scan(production);
        for name in scan.constants {
            constants += 1;
            if !listed.contains(&(module.clone(), name.clone())) {
                missing.push(format!("{module}::{name}"));
            }
        }
        let located = |lines: &[String]| {
            lines
                .iter()
                .map(|line| format!("{module}: {line}"))
                .collect::<Vec<_>>()
        };
        assembled.extend(located(&scan.assembled));
        positional.extend(located(&scan.positional));
        for text in scan.inline {
            match built_in_place
                .iter()
                .position(|(m, start, _)| *m == module && text.starts_with(start))
            {
                Some(index) => {
                    used_exceptions.insert(index);
                }
                None => unaccounted.push(format!("{module}: {:?}", first_line(&text))),
            }
        }
    }
    let stale: Vec<_> = built_in_place
        .iter()
        .enumerate()
        .filter(|(index, _)| !used_exceptions.contains(index))
        .map(|(_, (module, start, _))| format!("{module}: {start:?}"))
        .collect();
    assert!(constants > 100, "the scan found only {constants} constants");
    assert!(
        missing.is_empty(),
        "SQL constants missing from their module's statements! list: {}",
        missing.join(", ")
    );
    assert!(
        assembled.is_empty(),
        "statements are written whole, as one literal each, never assembled by concat!: {}",
        assembled.join(", ")
    );
    assert!(
        positional.is_empty(),
        "rows of more than one column are read by name (store::row::Named::col): {}",
        positional.join(", ")
    );
    assert!(
        unaccounted.is_empty(),
        "statements written outside a constant, not in the store's or the bench's statements::BUILT_IN_PLACE \
         (make them constants and list them): {}",
        unaccounted.join(", ")
    );
    assert!(
        stale.is_empty(),
        "statements::BUILT_IN_PLACE names what the sources no longer build: {}",
        stale.join(", ")
    );
}

/// The layers above the store write no SQL of their own: the core, the services, the CLI, the
/// dashboard and the embedded server reach the database only through the store's functions (or
/// the bench crate's, for the benchmark and the scratch databases), so the statements listed and
/// planned as their roles above are all the SQL qlsched sends (the connection crate's session
/// checks aside: `SHOW transaction_read_only` and the like, which libpq sends too).
#[test]
fn no_layer_above_the_store_writes_sql() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut written = Vec::new();
    let mut scanned = 0;
    for dir in [
        "crates/qlsched-core/src",
        "crates/qlsched-service/src",
        "crates/qlsched-embedded/src",
        "src",
    ] {
        for file in rust_files(&root.join(dir)) {
            scanned += 1;
            let source = std::fs::read_to_string(&file).expect("read source");
            let production = source.split("\n#[cfg(test)]").next().unwrap_or("");
            let scan = scan(production);
            let at = file
                .strip_prefix(&root)
                .unwrap_or(&file)
                .display()
                .to_string();
            written.extend(
                scan.constants
                    .iter()
                    .map(|name| format!("{at}: const {name}")),
            );
            written.extend(
                scan.inline
                    .iter()
                    .map(|text| format!("{at}: {:?}", first_line(text))),
            );
        }
    }
    assert!(scanned > 50, "the scan found only {scanned} files");
    assert!(
        written.is_empty(),
        "SQL written above the store (give the store a function for it): {}",
        written.join(", ")
    );
}

/// The driver's and the pool's types stay inside the store (docs/DESIGN.md §2): the service
/// holds store types (`Lent`, `Canceller`, `Connection`, `Store::within`), so that the store
/// alone decides how a connection cut off mid-work is discarded. Its manifest names neither
/// crate, and its sources name neither crate's paths.
#[test]
fn the_service_names_no_driver_type() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("crates/qlsched-service/Cargo.toml"))
        .expect("read the service's manifest");
    let drivers = ["deadpool-postgres", "tokio-postgres"];
    let depended: Vec<_> = manifest
        .lines()
        .filter(|line| {
            drivers
                .iter()
                .any(|name| line.trim_start().starts_with(name))
        })
        .collect();
    assert!(
        depended.is_empty(),
        "crates/qlsched-service/Cargo.toml depends on the driver (hold store types instead): {depended:?}"
    );
    let mut named = Vec::new();
    let mut scanned = 0;
    for file in rust_files(&root.join("crates/qlsched-service/src")) {
        scanned += 1;
        let source = std::fs::read_to_string(&file).expect("read source");
        for (number, line) in source.lines().enumerate() {
            if ["deadpool_postgres", "tokio_postgres", "CancelToken"]
                .iter()
                .any(|path| line.contains(path))
            {
                let at = file.strip_prefix(&root).unwrap_or(&file).display();
                named.push(format!("{at}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(scanned > 10, "the scan found only {scanned} files");
    assert!(
        named.is_empty(),
        "the service names the driver's types (hold store types instead): {}",
        named.join(", ")
    );
}

/// The names of the columns each statement returns, by module, as the server prepares them.
async fn columns_by_module(
    client: &mut tokio_postgres::Client,
) -> BTreeMap<String, Vec<(String, Vec<String>)>> {
    let mut found: BTreeMap<String, Vec<(String, Vec<String>)>> = BTreeMap::new();
    for statement in all() {
        let transaction = client.transaction().await.expect("begin");
        if let Some(setup) = statement.after {
            transaction.batch_execute(setup).await.expect("setup");
        }
        let prepared = transaction
            .prepare(statement.text)
            .await
            .unwrap_or_else(|e| panic!("{} does not prepare: {}", label(&statement), reason(&e)));
        let names = prepared
            .columns()
            .iter()
            .map(|c| c.name().to_owned())
            .collect();
        found
            .entry(statement.module.to_owned())
            .or_default()
            .push((statement.name.to_owned(), names));
    }
    found
}

/// The column positions a line reads: `.get(1)`, `.try_get(2)`, `.get::<_, T>(3)`.
fn positions_read(line: &str) -> Vec<usize> {
    [".get", ".try_get"]
        .iter()
        .flat_map(|call| {
            line.match_indices(call)
                .map(|(at, _)| &line[at + call.len()..])
        })
        .filter_map(|rest| {
            let rest = match rest.strip_prefix("::<") {
                Some(typed) => &typed[typed.find(">(")? + 1..],
                None => rest,
            };
            let digits: String = rest
                .strip_prefix('(')?
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .collect()
}

/// The column names a line reads with `Named::col`: `.col("name")` and `.col::<T>("name")`.
fn names_read(line: &str) -> Vec<&str> {
    line.match_indices(".col")
        .filter_map(|(at, _)| {
            let rest = &line[at + ".col".len()..];
            let rest = if let Some(typed) = rest.strip_prefix("::<") {
                // Past the turbofish's closing `>(`.
                &typed[typed.find(">(")? + 1..]
            } else {
                rest
            };
            let name = rest.strip_prefix("(\"")?;
            name.find('"').map(|end| &name[..end])
        })
        .collect()
}

#[tokio::test]
async fn every_column_the_store_reads_by_name_is_one_column_of_its_statements() {
    let db = TestDb::new().await;
    let mut client = db.client().await;
    let columns = columns_by_module(&mut client).await;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut reads = 0;
    let mut problems = Vec::new();
    for (file, module) in sql_sources(&root) {
        let source = std::fs::read_to_string(&file).expect("read source");
        let production = source.split("\n#[cfg(test)]").next().unwrap_or("");
        let statements = columns.get(&module).map(Vec::as_slice).unwrap_or_default();
        for (number, line) in production.lines().enumerate() {
            for name in names_read(line) {
                reads += 1;
                let giving: Vec<&str> = statements
                    .iter()
                    .filter(|(_, names)| names.iter().any(|n| n == name))
                    .map(|(statement, _)| statement.as_str())
                    .collect();
                let twice: Vec<&str> = statements
                    .iter()
                    .filter(|(_, names)| names.iter().filter(|n| *n == name).count() > 1)
                    .map(|(statement, _)| statement.as_str())
                    .collect();
                if giving.is_empty() {
                    problems.push(format!(
                        "{module}:{}: reads column {name:?}, which no statement of the module returns",
                        number + 1
                    ));
                }
                if !twice.is_empty() {
                    problems.push(format!(
                        "{module}:{}: reads column {name:?}, which {} return more than once",
                        number + 1,
                        twice.join(", ")
                    ));
                }
            }
        }
    }
    eprintln!("{reads} columns read by name");
    assert!(
        reads > 150,
        "the scan found only {reads} columns read by name"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test]
async fn a_column_read_by_name_that_does_not_fit_is_an_error_naming_it() {
    use qlsched::store::StoreError;
    use qlsched::store::row::Named;
    let db = TestDb::new().await;
    let client = db.client().await;
    let row = client
        .query_one("SELECT 1::bigint AS one", &[])
        .await
        .expect("select");
    assert_eq!(row.col::<i64>("one").expect("one"), 1);
    let missing = row.col::<i64>("two").expect_err("no such column");
    assert!(
        matches!(missing, StoreError::Column { column: "two", .. }),
        "{missing:?}"
    );
    let mistyped = row.col::<String>("one").expect_err("a bigint is no text");
    assert!(
        matches!(mistyped, StoreError::Column { column: "one", .. }),
        "{mistyped:?}"
    );
    assert!(mistyped.to_string().contains("\"one\""), "{mistyped}");
}

#[test]
fn the_scan_finds_the_columns_read_by_name() {
    assert_eq!(
        names_read(r#"a: row.col("a")?, b: row.col::<Option<Vec<i64>>>("b")?, c: row.get(0)"#),
        ["a", "b"]
    );
}

#[test]
fn the_scan_finds_constants_statements_built_in_place_and_assembled_ones() {
    let source = r##"
        // const NOT_ME: &str = "SELECT 1";
        const A: &str = "SELECT 1";
        pub(crate) const B: &str = concat!("WITH x AS (", columns!(), ")");
        const C: &str = "qlsched.migrate";
        const E: &str = "COMMIT";
        pub(super) const F: &str = "DELETE FROM t";
        const D: &str = r#"UPDATE t SET "x" = 1"#;
        const LONG: &str =
            "DELETE FROM t
             WHERE x = $1";
        fn f(c: char) { let _ = ('"', c); query(&format!("DROP TABLE {x}"), "SELECT"); }
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../migrations");
        let one: i64 = row.get(0);
        let (a, b): (i64, i64) = (row.get(0), row.get::<_, i64>(1));
    "##;
    let scan = scan(source);
    assert_eq!(scan.constants, ["A", "E", "F", "D", "LONG"]);
    assert_eq!(scan.inline, ["DROP TABLE {x}"]);
    assert_eq!(
        scan.assembled,
        [r#"pub(crate) const B: &str = concat!("WITH x AS (", columns!(), ")");"#]
    );
    assert_eq!(
        scan.positional,
        ["let (a, b): (i64, i64) = (row.get(0), row.get::<_, i64>(1));"]
    );
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the sources") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs")
            // The test module of `connect`, and the list itself, which names what it excepts.
            && path
                .file_name()
                .is_some_and(|n| n != "tests.rs" && n != "statements.rs")
        {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The crates where SQL lives, each with its crate's name in `module_path!()`: the store, and the
/// bench crate, whose statements the product never runs (docs/DESIGN.md §2).
const SQL_SOURCES: &[(&str, &str)] = &[
    ("crates/qlsched-store/src", "qlsched_store"),
    ("crates/qlsched-bench/src", "qlsched_bench"),
];

/// Every source file of [`SQL_SOURCES`], with its module.
fn sql_sources(root: &Path) -> Vec<(PathBuf, String)> {
    SQL_SOURCES
        .iter()
        .flat_map(|(dir, krate)| {
            rust_files(&root.join(dir)).into_iter().map(move |file| {
                let module = module_of(&root.join(dir), krate, &file);
                (file, module)
            })
        })
        .collect()
}

/// `crates/qlsched-store/src/read/runs.rs` is `qlsched_store::read::runs`, as `module_path!()`
/// says; a `mod.rs` is its folder's module, `lib.rs` the crate's.
fn module_of(sources: &Path, krate: &str, file: &Path) -> String {
    let relative = file
        .strip_prefix(sources)
        .expect("under the crate's sources");
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.insert(0, krate.to_owned());
    parts.join("::")
}

/// A verb, then more: a lone `"SELECT"` written in place is the name of a privilege. A verb that
/// ends its statement (`"BEGIN; {}"`) counts too.
fn is_sql(text: &str) -> bool {
    text.split_once(char::is_whitespace)
        .is_some_and(|(verb, _)| SQL_VERBS.contains(&verb.trim_end_matches(';')))
}

/// A constant may be a lone verb: `COMMIT`.
fn is_sql_constant(text: &str) -> bool {
    is_sql(text) || SQL_VERBS.contains(&text)
}

#[derive(Default)]
struct Scan {
    /// Names of `const NAME: &str =` whose literal is SQL.
    constants: Vec<String>,
    /// The first line of each SQL literal outside a constant.
    inline: Vec<String>,
    /// Lines that build a string with `concat!` (a path from `env!` aside).
    assembled: Vec<String>,
    /// Lines that read a column after the first by position (`get(1)`, `try_get::<_, T>(2)`):
    /// a row of more than one column is read by name.
    positional: Vec<String>,
}

/// `const NAME: &str =` (with any visibility) at the start of `code`: the name, and what follows
/// the `=` on the line.
fn constant(code: &str) -> Option<(&str, &str)> {
    // `pub `, `pub(crate) `, `pub(super) `: any visibility.
    let code = match code.strip_prefix("pub") {
        Some(rest) if rest.starts_with('(') => rest.split_once(") ").map_or(code, |(_, r)| r),
        Some(rest) => rest.strip_prefix(' ').unwrap_or(code),
        None => code,
    };
    let (name, rest) = code.strip_prefix("const ")?.split_once(": &str =")?;
    Some((name.trim(), rest.trim()))
}

/// The text of the literal that `value` starts with (`"...`, `r"...` or `r#"...`), up to its
/// closing quote or the end of the line; `None` when it does not start with one.
fn literal(value: &str) -> Option<&str> {
    let hashes = value
        .strip_prefix('r')
        .map_or(0, |raw| raw.chars().take_while(|&c| c == '#').count());
    let open = if value.starts_with('r') {
        1 + hashes
    } else {
        0
    };
    let body = value.get(open..)?.strip_prefix('"')?;
    let closing = format!("\"{}", "#".repeat(hashes));
    Some(body.find(&closing).map_or(body, |end| &body[..end]))
}

/// The SQL literals a line opens outside a constant: each `"` (or `r"`, `r#"`) that a SQL verb
/// follows. A literal's later lines hold no opening quote, and a closing quote is followed by
/// punctuation, not by a verb.
fn opened_sql(line: &str) -> Vec<String> {
    line.match_indices('"')
        .filter_map(|(at, _)| {
            let raw_start = line[..at].trim_end_matches('#');
            let from = if raw_start.ends_with('r') {
                raw_start.len() - 1
            } else {
                at
            };
            let text = literal(&line[from..])?;
            is_sql(text).then(|| text.to_owned())
        })
        .collect()
}

/// Finds SQL constants, SQL literals written in place and strings assembled by `concat!`, one
/// line at a time: each statement is one literal, whose first line holds its verb.
fn scan(source: &str) -> Scan {
    let lines: Vec<&str> = source.lines().collect();
    let mut found = Scan::default();
    // The line holding the current constant's literal, which is not a statement in place.
    let mut constant_value = None;
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim();
        if code.starts_with("//") {
            continue;
        }
        if code.contains("concat!(") && !code.contains("env!(") {
            found.assembled.push(code.to_owned());
        }
        if positions_read(code).iter().any(|&at| at > 0) {
            found.positional.push(code.to_owned());
        }
        if let Some((name, rest)) = constant(code) {
            let (at, value) = if rest.is_empty() {
                (i + 1, lines.get(i + 1).map_or("", |l| l.trim()))
            } else {
                (i, rest)
            };
            if literal(value).is_some_and(is_sql_constant) {
                found.constants.push(name.to_owned());
            }
            constant_value = Some(at);
            if at == i {
                continue;
            }
        }
        if constant_value == Some(i) {
            continue;
        }
        found.inline.extend(opened_sql(code));
    }
    found
}
