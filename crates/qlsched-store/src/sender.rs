//! How the replica's pipelined statements (the claim, the admission) reach the server: named
//! prepared statements cached on the session, or, behind a transaction-mode pooler, unnamed
//! statements sent with their parameter types (docs/OPERATIONS.md, "Behind a connection pooler").
//!
//! A named statement lives on the server session that parsed it. Behind a pooler in transaction
//! mode the next transaction may run on another server connection, where the name is unknown
//! (26000) or, prepared there by another client, already taken (42P05). An unnamed statement is
//! parsed, bound and executed in one message sequence and gone at its end, so it needs nothing
//! from the session. Its parameter types are learned once per process, inside a transaction whose
//! statement is closed before it commits, and sent with every execution.
//!
//! Everything else qlsched sends runs inside a transaction of its own
//! ([`super::run_in_transaction`]), where the driver's own prepare-and-execute of a statement
//! happens on the one server connection the transaction holds, closed before the transaction ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use deadpool_postgres::ClientWrapper;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Row, Statement};

use super::{Pooler, SchemaName};

/// The replica's statement sender: cloned with the store, sharing the types it learned.
#[derive(Clone)]
pub struct Sender {
    pooler: Pooler,
    schema: SchemaName,
    /// Parameter types of the statements sent unnamed, by statement text.
    types: Arc<Mutex<LearnedTypes>>,
}

/// Each statement's parameter types, as the server gave them.
type LearnedTypes = HashMap<&'static str, Arc<[Type]>>;

/// A statement ready to execute on one connection.
pub enum Ready {
    /// Prepared and cached on this session (no pooler, or one in session mode).
    Named(Statement),
    /// Sent unnamed with its parameter types.
    Unnamed(&'static str, Arc<[Type]>),
}

impl Sender {
    pub fn new(pooler: Pooler, schema: SchemaName) -> Self {
        Sender {
            pooler,
            schema,
            types: Arc::default(),
        }
    }

    /// `text`, ready to execute on `client`. Adds to `round_trips` the round trips this took: none
    /// when the statement was ready before (cached on the session, or its types known), else one
    /// (a named prepare) or three (learning the types of an unnamed one).
    pub async fn ready(
        &self,
        client: &ClientWrapper,
        text: &'static str,
        round_trips: &mut u32,
    ) -> Result<Ready, tokio_postgres::Error> {
        if self.pooler.keeps_sessions() {
            let before = client.statement_cache.size();
            let statement = client.prepare_cached(text).await?;
            if client.statement_cache.size() > before {
                *round_trips += 1;
            }
            return Ok(Ready::Named(statement));
        }
        let known = self
            .types
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(text)
            .cloned();
        if let Some(types) = known {
            return Ok(Ready::Unnamed(text, types));
        }
        // BEGIN, the prepare (the statement's names resolve in the schema), COMMIT: the statement
        // is closed on the same server connection before the transaction ends.
        client
            .batch_execute(&crate::opening(
                &self.schema,
                crate::Begin::ReadWrite.statement(),
            ))
            .await?;
        // The statement is dropped at the end of its arm: its Close leaves before the COMMIT.
        let (types, failed) = match client.prepare(text).await {
            Ok(statement) => (Arc::<[Type]>::from(statement.params()), None),
            Err(error) => (Arc::default(), Some(error)),
        };
        let end = if failed.is_none() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        let ended = client.batch_execute(end).await;
        if let Some(error) = failed {
            return Err(error);
        }
        ended?;
        *round_trips += 3;
        self.types
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(text, types.clone());
        Ok(Ready::Unnamed(text, types))
    }

    /// Executes [`TRANSACTION_SETTINGS`] for this store's schema, in a pipeline that opened its
    /// own transaction: what [`SchemaName::transaction_settings`] sets, as one statement.
    pub async fn settings(
        &self,
        client: &ClientWrapper,
        ready: &Ready,
    ) -> Result<(), tokio_postgres::Error> {
        ready
            .query_one(client, &[&self.schema.quoted()])
            .await
            .map(|_| ())
    }
}

// The schema's transaction settings (search_path, JIT off), for the transaction it runs in, as a
// statement a pipeline can prepare; the transaction's end resets them.
pub const TRANSACTION_SETTINGS: &str =
    "SELECT set_config('search_path', $1, true), set_config('jit', 'off', true)";

impl Ready {
    /// Executes the statement with `params`; the request leaves when the future is first polled,
    /// so futures joined in order leave in order on the connection.
    pub async fn query(
        &self,
        client: &ClientWrapper,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        match self {
            Ready::Named(statement) => client.query(statement, params).await,
            Ready::Unnamed(text, types) => client.query_typed(text, &typed(params, types)).await,
        }
    }

    /// [`Ready::query`], for a statement that returns exactly one row.
    pub async fn query_one(
        &self,
        client: &ClientWrapper,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, tokio_postgres::Error> {
        match self {
            Ready::Named(statement) => client.query_one(statement, params).await,
            Ready::Unnamed(text, types) => {
                client.query_typed_one(text, &typed(params, types)).await
            }
        }
    }

    /// [`Ready::query`], for a statement whose rows are not wanted: the number it affected.
    pub async fn execute(
        &self,
        client: &ClientWrapper,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, tokio_postgres::Error> {
        match self {
            Ready::Named(statement) => client.execute(statement, params).await,
            Ready::Unnamed(text, types) => client.execute_typed(text, &typed(params, types)).await,
        }
    }
}

/// Each parameter with the type the server gave it.
fn typed<'a>(
    params: &[&'a (dyn ToSql + Sync)],
    types: &[Type],
) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params.iter().copied().zip(types.iter().cloned()).collect()
}

super::statements::statements! {
    TRANSACTION_SETTINGS: Runtime | Admin,
}
