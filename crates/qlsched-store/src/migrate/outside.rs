//! The runner of the migrations marked `-- no-transaction` (`OUTSIDE_A_TRANSACTION`): their
//! text split into statements, run one by one in `migrate`'s session under the migrators' lock.

use std::time::Instant;

use tokio_postgres::Client;

use super::ledger::{record, recorded};
use super::{LOCK_NAMESPACE, MIGRATION_LOCK_TIMEOUT, Migration, MigrationStatus, begin, failed};
use crate::row::Named;
use crate::{SchemaName, StoreError};

impl Migration {
    /// The statements of a migration run outside a transaction, one by one: the text split after
    /// each `;` that ends a line, comments and blank pieces left out. Such a migration holds
    /// plain statements only (no `$$` body, which could hold a `;` at a line's end): refused
    /// otherwise, naming the file, before anything runs.
    pub(super) fn statements(&self) -> Result<Vec<String>, StoreError> {
        if self.sql.contains("$$") {
            return Err(StoreError::SchemaNotReady(format!(
                "migration {} runs outside a transaction and holds a $$ body: such a migration \
                 holds plain statements only (docs/DESIGN.md §3.1, the migration runner)",
                self.file_name()
            )));
        }
        let mut statements = Vec::new();
        let mut current = String::new();
        for line in self.sql.lines() {
            let code = line.trim();
            if code.is_empty() || code.starts_with("--") {
                continue;
            }
            current.push_str(line);
            current.push('\n');
            if code.ends_with(';') {
                statements.push(std::mem::take(&mut current));
            }
        }
        if !current.trim().is_empty() {
            statements.push(current);
        }
        Ok(statements)
    }

    /// The indexes a migration run outside a transaction builds, by the name after each
    /// `CREATE [UNIQUE] INDEX CONCURRENTLY [IF NOT EXISTS]`: those an attempt that failed may have
    /// left invalid.
    pub(super) fn concurrent_indexes(&self) -> Vec<String> {
        let words: Vec<String> = self
            .sql
            .lines()
            .filter(|line| !line.trim_start().starts_with("--"))
            .flat_map(str::split_whitespace)
            .map(str::to_ascii_lowercase)
            .collect();
        let mut names = Vec::new();
        for (at, word) in words.iter().enumerate() {
            if word != "concurrently" || at == 0 || words[at - 1] != "index" {
                continue;
            }
            let mut rest = words[at + 1..].iter();
            let name = match rest.next().map(String::as_str) {
                Some("if") => rest.nth(2),
                other => other.map(|_| &words[at + 1]),
            };
            if let Some(name) = name.filter(|name| *name != "on") {
                names.push(name.trim_matches('"').to_owned());
            }
        }
        names
    }
}

// The migrators' lock of LOCK, held by `migrate`'s session across the statements of a migration
// run outside a transaction, and let go after them. The transaction-level LOCK that `begin`
// takes in the same session is granted at once: advisory locks are re-entrant in one session.
const SESSION_LOCK: &str = "SELECT pg_advisory_lock(hashtext($1), hashtext($2))";
const SESSION_UNLOCK: &str = "SELECT pg_advisory_unlock(hashtext($1), hashtext($2))";

// The session's search_path, lock timeout and JIT setting, to be put back after a migration run
// outside a transaction; and the statement that sets them, for the session ($1, $2, $3).
const SESSION_SETTINGS: &str = "SELECT current_setting('search_path') AS search_path,
        current_setting('lock_timeout') AS lock_timeout, current_setting('jit') AS jit";
const SET_SESSION_SETTINGS: &str = "SELECT set_config('search_path', $1, false),
        set_config('lock_timeout', $2, false), set_config('jit', $3, false)";

// The indexes of schema $1 named in $2 that a failed `CREATE INDEX CONCURRENTLY` left invalid,
// with the statement that drops each (concurrently, its names quoted by the server).
const INVALID_INDEXES: &str = "SELECT format('DROP INDEX CONCURRENTLY IF EXISTS %I.%I', n.nspname,
        c.relname) AS drop_statement
    FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname = ANY($2) AND NOT i.indisvalid
    ORDER BY c.relname";

/// A migration marked [`OUTSIDE_A_TRANSACTION`](super::OUTSIDE_A_TRANSACTION), applied as
/// [`apply`](super::apply) applies one (the same answers: `None` when another migrator applied it
/// first, `Err` with the server's message when a statement ran out of [`MIGRATION_LOCK_TIMEOUT`]),
/// its statements run one by one in the session: under the migrators' lock held for the session,
/// after the checks of [`begin`], with the schema as `search_path` and the lock timeout set for
/// the session and reset after, every invalid index it builds (left by an attempt that failed)
/// dropped first; then its ledger row recorded in a transaction of [`begin`]'s. A statement that
/// failed leaves what the statements before it did: each must be safe to run again.
pub(super) async fn apply_outside_a_transaction(
    client: &mut Client,
    schema: &SchemaName,
    home: &str,
    migration: &Migration,
) -> Result<Result<Option<MigrationStatus>, String>, StoreError> {
    let statements = migration.statements()?;
    let before = client.query_one(SESSION_SETTINGS, &[]).await?;
    let before: [String; 3] = [
        before.col("search_path")?,
        before.col("lock_timeout")?,
        before.col("jit")?,
    ];
    client
        .execute(SESSION_LOCK, &[&LOCK_NAMESPACE, &schema.as_str()])
        .await?;
    let applied = run_outside_a_transaction(client, schema, home, migration, &statements).await;
    // Whatever happened, nothing of the migration's outlives it in the session.
    let restored = client
        .query_one(SET_SESSION_SETTINGS, &[&before[0], &before[1], &before[2]])
        .await;
    let unlocked = client
        .execute(SESSION_UNLOCK, &[&LOCK_NAMESPACE, &schema.as_str()])
        .await;
    let applied = applied?;
    restored?;
    unlocked?;
    Ok(applied)
}

async fn run_outside_a_transaction(
    client: &mut Client,
    schema: &SchemaName,
    home: &str,
    migration: &Migration,
    statements: &[String],
) -> Result<Result<Option<MigrationStatus>, String>, StoreError> {
    let transaction = begin(client, schema, home).await?;
    let applied = recorded(&transaction, migration.version).await?;
    transaction.commit().await?;
    if applied {
        return Ok(Ok(None));
    }
    client
        .query_one(
            SET_SESSION_SETTINGS,
            &[&schema.quoted(), &MIGRATION_LOCK_TIMEOUT, &"off"],
        )
        .await?;
    let started = Instant::now();
    let invalid: Vec<String> = client
        .query(
            INVALID_INDEXES,
            &[&schema.as_str(), &migration.concurrent_indexes()],
        )
        .await?
        .iter()
        .map(|row| row.col("drop_statement"))
        .collect::<Result<_, _>>()?;
    for statement in invalid.iter().chain(statements) {
        if let Err(error) = client.batch_execute(statement).await {
            return failed(migration, error).map(Err);
        }
    }
    let execution_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    let transaction = begin(client, schema, home).await?;
    if recorded(&transaction, migration.version).await? {
        transaction.commit().await?;
        return Ok(Ok(None));
    }
    let status = record(&transaction, migration, execution_ms).await?;
    transaction.commit().await?;
    Ok(Ok(Some(status)))
}

crate::statements::statements! {
    SESSION_LOCK: Owner,
    SESSION_UNLOCK: Owner,
    SESSION_SETTINGS: Owner,
    SET_SESSION_SETTINGS: Owner,
    INVALID_INDEXES: Owner,
}
