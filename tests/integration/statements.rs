//! Every SQL statement of `store` (`store::statements::all`) is prepared against a migrated
//! database, and planned as each role that runs it, so that a renamed column or a missing grant
//! fails here rather than in a replica. A scan of `crates/qlsched-store/src` keeps the list whole: a SQL constant
//! missing from it, or a statement written in place that `store::statements::BUILT_IN_PLACE` does
//! not account for, fails the second test, named.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use qlsched::store::statements::{BUILT_IN_PLACE, Role, Statement, all};

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

/// Why `statement` does not prepare (as the owner), or does not plan as `role`; `None` when it
/// does. Each check runs in a transaction that is rolled back.
async fn check(
    client: &mut tokio_postgres::Client,
    statement: &Statement,
    role: Role,
) -> Option<String> {
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
    let not_prepared = BUILT_IN_PLACE
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
    let mut constants = 0;
    for file in rust_files(&root.join(STORE_SOURCES)) {
        let module = module_of(&root, &file);
        let source = std::fs::read_to_string(&file).expect("read source");
        let production = source.split("\n#[cfg(test)]").next().unwrap_or("");
        let scan = scan(production);
        for name in scan.constants {
            constants += 1;
            if !listed.contains(&(module.clone(), name.clone())) {
                missing.push(format!("{module}::{name}"));
            }
        }
        for text in scan.inline {
            match BUILT_IN_PLACE
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
    let stale: Vec<_> = BUILT_IN_PLACE
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
        unaccounted.is_empty(),
        "statements written outside a constant, not in store::statements::BUILT_IN_PLACE \
         (make them constants and list them): {}",
        unaccounted.join(", ")
    );
    assert!(
        stale.is_empty(),
        "store::statements::BUILT_IN_PLACE names what the sources no longer build: {}",
        stale.join(", ")
    );
}

#[test]
fn the_scan_finds_constants_and_statements_built_in_place() {
    let source = r##"
        // const NOT_ME: &str = "SELECT 1";
        const A: &str = "SELECT 1";
        pub(crate) const B: &str = concat!("WITH x AS (", columns!(), ")");
        const C: &str = "qlsched.migrate";
        const E: &str = "COMMIT";
        const D: &str = r#"UPDATE t SET "x" = 1"#;
        macro_rules! m { () => { "SELECT in a macro" } }
        fn f(c: char) { let _ = ('"', c); query(&format!("DROP TABLE {x}"), "SELECT"); }
    "##;
    let scan = scan(source);
    assert_eq!(scan.constants, ["A", "B", "E", "D"]);
    assert_eq!(scan.inline, ["DROP TABLE {x}"]);
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the store's sources") {
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

/// Where the store crate's sources are, from the root package.
const STORE_SOURCES: &str = "crates/qlsched-store/src";

/// `crates/qlsched-store/src/read/runs.rs` is `qlsched_store::read::runs`, as `module_path!()`
/// says; a `mod.rs` is its folder's module, `lib.rs` the crate's.
fn module_of(root: &Path, file: &Path) -> String {
    let relative = file
        .strip_prefix(root.join(STORE_SOURCES))
        .expect("under the store's sources");
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.insert(0, "qlsched_store".to_owned());
    parts.join("::")
}

/// A verb, then more: a lone `"SELECT"` written in place is the name of a privilege.
fn is_sql(text: &str) -> bool {
    text.split_once(char::is_whitespace)
        .is_some_and(|(verb, _)| SQL_VERBS.contains(&verb))
}

/// A constant may be a lone verb: `COMMIT`.
fn is_sql_constant(text: &str) -> bool {
    is_sql(text) || SQL_VERBS.contains(&text)
}

#[derive(Default)]
struct Scan {
    /// Names of `const NAME: &str =` whose value is SQL or a `concat!`.
    constants: Vec<String>,
    /// SQL string literals outside constants and macro definitions.
    inline: Vec<String>,
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Text(String),
    Punct(char),
}

/// Finds SQL constants and SQL literals written in place. A macro definition's literals are
/// fragments (of a constant or of a listed statement), so they are passed over.
fn scan(source: &str) -> Scan {
    let tokens = tokens(source);
    let mut found = Scan::default();
    let mut i = 0;
    while i < tokens.len() {
        if let Some((name, value_at)) = constant_at(&tokens, i) {
            let sql = match &tokens[value_at] {
                Token::Text(text) => is_sql_constant(text),
                Token::Word(word) => word == "concat",
                Token::Punct(_) => false,
            };
            if sql {
                found.constants.push(name);
            }
            i = end_of_item(&tokens, value_at);
        } else if tokens[i] == Token::Word("macro_rules".into()) {
            i = end_of_item(&tokens, i);
        } else {
            if let Token::Text(text) = &tokens[i]
                && is_sql(text)
            {
                found.inline.push(text.clone());
            }
            i += 1;
        }
    }
    found
}

/// At `const NAME: &str =`: the name and where the value starts.
fn constant_at(tokens: &[Token], i: usize) -> Option<(String, usize)> {
    let word = |at: usize, w: &str| tokens.get(at) == Some(&Token::Word(w.into()));
    let punct = |at: usize, c: char| tokens.get(at) == Some(&Token::Punct(c));
    if !word(i, "const") {
        return None;
    }
    let Some(Token::Word(name)) = tokens.get(i + 1) else {
        return None;
    };
    (punct(i + 2, ':')
        && punct(i + 3, '&')
        && word(i + 4, "str")
        && punct(i + 5, '=')
        && i + 6 < tokens.len())
    .then(|| (name.clone(), i + 6))
}

/// The index after the `;` that ends the item at `i`, or after its outermost closing bracket.
fn end_of_item(tokens: &[Token], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < tokens.len() {
        match tokens[i] {
            Token::Punct('(' | '[' | '{') => depth += 1,
            Token::Punct(')' | ']' | '}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 && !matches!(tokens.get(i + 1), Some(Token::Punct(';'))) {
                    return i + 1;
                }
            }
            Token::Punct(';') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Rust source as words, string literals (their text as written) and punctuation; comments and
/// character literals dropped.
fn tokens(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            let open = i + 1 + hashes;
            if chars.get(open) != Some(&'"') {
                tokens.push(Token::Word("r".into()));
                i += 1;
                continue;
            }
            let closing: String = std::iter::once('"')
                .chain("#".repeat(hashes).chars())
                .collect();
            let body: String = chars[open + 1..].iter().collect();
            let end = body.find(&closing).unwrap_or(body.len());
            tokens.push(Token::Text(body[..end].to_owned()));
            i = open + 1 + body[..end].chars().count() + closing.chars().count();
        } else if c == '"' {
            let mut text = String::new();
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    text.push(chars[i]);
                    i += 1;
                }
                if let Some(&ch) = chars.get(i) {
                    text.push(ch);
                }
                i += 1;
            }
            tokens.push(Token::Text(text));
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '"'), or a lifetime, which is a word.
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Word(chars[start..i].iter().collect()));
        } else {
            if !c.is_whitespace() {
                tokens.push(Token::Punct(c));
            }
            i += 1;
        }
    }
    tokens
}
