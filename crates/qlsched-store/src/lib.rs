//! The PostgreSQL adapter: the only place the product's SQL lives (docs/DESIGN.md §2; the
//! benchmark's is in `qlsched-bench`). Each statement is a
//! `const` next to the function that runs it, with its intent in a comment; every value is a
//! parameter. Each module lists its statements with the roles that run them (`statements!`), and
//! a test prepares them all (`statements`).

pub mod accounting;
pub mod admission_errors;
pub mod admit;
pub mod claim;
pub mod connect;
pub mod control;
mod error;
pub mod invariants;
pub mod migrate;
pub mod misfires;
pub mod observe;
pub mod operator;
pub mod publish;
pub mod read;
pub mod recovery;
pub mod replicas;
pub mod retention;
pub mod retry;
pub mod row;
pub mod sender;
pub mod statements;
pub mod top;
pub mod upkeep;

pub use qlsched_pgconn::{passfile, tls};

pub use admit::{Admission, AdmissionOutcome, AdmitStats, RunIdentity, Shortage};
pub use claim::{ClaimedRow, ReleaseRequest, TriggerDefinition};
pub use connect::{ConnectionSettings, Pooler, SchemaName};
pub use error::StoreError;
pub use recovery::RecoveryReport;

use deadpool_postgres::{Object, Pool};
use futures_util::future::BoxFuture;

/// One connection outside any pool, opened by [`ConnectionSettings::connect`] (migrations, a
/// replica's startup checks): the name the layers above the store hold it by, so that none of
/// them names the driver.
pub type Connection = tokio_postgres::Client;

/// Work to run on one connection, inside a transaction it is given: a closure returning a boxed
/// future, since the borrow of the client must outlive the call.
pub type Work<'c, T> = BoxFuture<'c, Result<T, StoreError>>;

/// How a transaction of [`run_in_transaction`] begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    ReadOnly,
    ReadWrite,
    /// A read whose statements all see one instant (REPEATABLE READ READ ONLY): what `top`'s
    /// snapshot reads, its statements pipelined.
    Snapshot,
}

impl Begin {
    pub(crate) fn statement(self) -> &'static str {
        match self {
            Begin::ReadOnly => "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY",
            Begin::ReadWrite => "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE",
            Begin::Snapshot => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        }
    }
}

/// A transaction's first round trip, as one simple-query message: `begin` (a BEGIN that names its
/// isolation level and read-only mode, so that neither the database's nor the role's defaults,
/// `default_transaction_isolation` and `default_transaction_read_only`, reach a transaction of
/// qlsched) and the schema's transaction settings
/// ([`SchemaName::transaction_settings`]). The one place a transaction of qlsched is opened from:
/// [`run_in_transaction`], an operator's bounded transaction and the sender's prepare.
pub(crate) fn opening(schema: &SchemaName, begin: &str) -> String {
    format!("{begin}; {}", schema.transaction_settings())
}

/// Runs `work` inside a transaction of its own on `client`: BEGIN and the schema's transaction
/// settings in one round trip ([`SchemaName::transaction_settings`]), then `work`, then COMMIT,
/// or ROLLBACK when `work` failed. Every statement qlsched sends runs in such a transaction (or
/// in one of the replica's pipelines, which set the same themselves), never on a bare session:
/// behind a transaction-mode pooler a statement outside a transaction may run on a server
/// connection without the schema, and a named statement prepared outside one may be gone from the
/// server connection its execution lands on.
pub async fn run_in_transaction<'c, T>(
    client: &'c tokio_postgres::Client,
    schema: &SchemaName,
    begin: Begin,
    work: impl FnOnce(&'c tokio_postgres::Client) -> Work<'c, T>,
) -> Result<T, StoreError> {
    if let Err(error) = client
        .batch_execute(&opening(schema, begin.statement()))
        .await
    {
        // The BEGIN may have run and a setting after it failed: end what was opened, so that
        // the connection goes back to the pool outside any transaction.
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(error.into());
    }
    let result = work(client).await;
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = client.batch_execute(end).await;
    let value = result?;
    ended?;
    Ok(value)
}

/// A connection pool on one qlsched schema: what a replica, an operator command or the dashboard
/// holds. Cloning shares the pool.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    schema: SchemaName,
    sender: sender::Sender,
    /// For cancel requests, which open a connection of their own, as TLS as the pool's.
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    connect_timeout: Option<std::time::Duration>,
}

impl Store {
    /// Opens a pool of `size` connections and checks one can be had.
    pub async fn open(
        settings: &ConnectionSettings,
        schema: &SchemaName,
        application_name: &str,
        size: usize,
    ) -> Result<Self, StoreError> {
        let pool = settings.pool(schema, application_name, size).await?;
        Ok(Store {
            pool,
            schema: schema.clone(),
            sender: sender::Sender::new(settings.pooler(), schema.clone()),
            tls: settings.tls_connector(),
            connect_timeout: settings.connect_timeout(),
        })
    }

    /// A replica's pool: as [`Store::open`]. Its sessions carry no setting of their own: the
    /// claim pins its plan in its own transaction ([`claim::claim_for_round`]).
    pub async fn open_replica(
        settings: &ConnectionSettings,
        schema: &SchemaName,
        application_name: &str,
        size: usize,
    ) -> Result<Self, StoreError> {
        Self::open(settings, schema, application_name, size).await
    }

    pub fn schema(&self) -> &SchemaName {
        &self.schema
    }

    /// How the replica's pipelined statements are sent on this store's connections.
    pub fn sender(&self) -> &sender::Sender {
        &self.sender
    }

    /// A pooled connection. Public for the tests and drills alone, which write and inspect rows
    /// by hand: the binary and the services go through this crate's functions, which open and
    /// end their own transactions, so that no driver type leaves the store.
    #[doc(hidden)]
    pub async fn client(&self) -> Result<Object, StoreError> {
        Ok(self.pool.get().await?)
    }

    /// Runs `work` on a pooled connection in a read-only transaction of its own
    /// ([`run_in_transaction`]): what the operator's views and the metrics read.
    ///
    /// On a lent connection ([`Store::lend`]): a read cut off before its transaction ended (a
    /// caller's bound, a command interrupted) closes its connection rather than pooling it.
    pub async fn read<T>(
        &self,
        work: impl for<'c> FnOnce(&'c tokio_postgres::Client) -> Work<'c, T>,
    ) -> Result<T, StoreError> {
        let client = self.lend().await?;
        let done = run_in_transaction(&client, &self.schema, Begin::ReadOnly, work).await;
        client.finished();
        done
    }

    /// [`migrate::check_ready`] in a read-only transaction of its own, on a lent connection as
    /// [`Store::read`]'s is.
    pub async fn check_ready(&self) -> Result<(), StoreError> {
        let client = self.lend().await?;
        let schema = &self.schema;
        let done = run_in_transaction(&client, schema, Begin::ReadOnly, |client| {
            Box::pin(migrate::check_ready(client, schema))
        })
        .await;
        client.finished();
        done
    }

    /// [`migrate::check_not_behind`] in a read-only transaction of its own, on a lent connection as
    /// [`Store::read`]'s is.
    pub async fn check_not_behind(&self) -> Result<(), StoreError> {
        let client = self.lend().await?;
        let schema = &self.schema;
        let done = run_in_transaction(&client, schema, Begin::ReadOnly, |client| {
            Box::pin(migrate::check_not_behind(client, schema))
        })
        .await;
        client.finished();
        done
    }

    /// [`read::trigger_detail`] in a read-only transaction of its own, on a lent connection as
    /// [`Store::read`]'s is.
    pub async fn trigger_detail(
        &self,
        trigger: &qlsched_core::TriggerName,
    ) -> Result<read::TriggerDetail, StoreError> {
        let client = self.lend().await?;
        let schema = &self.schema;
        let done = run_in_transaction(&client, schema, Begin::ReadOnly, |client| {
            Box::pin(read::trigger_detail(client, schema, trigger))
        })
        .await;
        client.finished();
        done
    }

    /// Asks the server to cancel the statement running on the session `token` came from, over
    /// a connection made as the pool's are, within the connect timeout.
    pub async fn cancel(&self, token: &tokio_postgres::CancelToken) -> Result<(), StoreError> {
        let cancel = token.cancel_query(self.tls.clone());
        match self.connect_timeout {
            Some(limit) => tokio::time::timeout(limit, cancel).await.map_err(|_| {
                StoreError::Unavailable(format!(
                    "the cancel request got no answer within {} s",
                    limit.as_secs()
                ))
            })??,
            None => cancel.await?,
        }
        Ok(())
    }

    /// Runs `work` on a pooled connection, in a read-write transaction of its own
    /// ([`run_in_transaction`]), within `limit`, the wait for the connection included:
    /// what a replica does beside its rounds (housekeeping, the registry) never waits longer on
    /// a server that stopped answering. On time out the statement in flight is cancelled in the
    /// background and the connection is closed instead of going back to the pool, where the
    /// cancel could land on the next statement sent on it.
    pub async fn within<T>(
        &self,
        limit: std::time::Duration,
        what: &str,
        work: impl for<'c> FnOnce(&'c tokio_postgres::Client) -> Work<'c, T>,
    ) -> Result<T, StoreError> {
        self.bounded(limit, what, Begin::ReadWrite, work).await
    }

    /// [`Store::within`] for a read: a read-only transaction, its connection closed, not pooled,
    /// when `limit` runs out (what the probes and the metrics read).
    pub async fn read_within<T>(
        &self,
        limit: std::time::Duration,
        what: &str,
        work: impl for<'c> FnOnce(&'c tokio_postgres::Client) -> Work<'c, T>,
    ) -> Result<T, StoreError> {
        self.bounded(limit, what, Begin::ReadOnly, work).await
    }

    /// [`Store::read_within`] in one REPEATABLE READ READ ONLY transaction: reads pipelined on
    /// it describe one instant (what `top`'s snapshot reads), its connection closed, not pooled,
    /// when `limit` runs out.
    pub async fn snapshot_within<T>(
        &self,
        limit: std::time::Duration,
        what: &str,
        work: impl for<'c> FnOnce(&'c tokio_postgres::Client) -> Work<'c, T>,
    ) -> Result<T, StoreError> {
        self.bounded(limit, what, Begin::Snapshot, work).await
    }

    /// [`Store::within`], [`Store::read_within`] and [`Store::snapshot_within`]: a transaction on
    /// a [`Lent`] connection, so that one cut by `limit` (or by a caller that stopped waiting) is
    /// closed and cancelled rather than handed back to the pool mid-transaction.
    async fn bounded<T>(
        &self,
        limit: std::time::Duration,
        what: &str,
        begin: Begin,
        work: impl for<'c> FnOnce(&'c tokio_postgres::Client) -> Work<'c, T>,
    ) -> Result<T, StoreError> {
        let deadline = tokio::time::Instant::now() + limit;
        let timed_out = || {
            StoreError::TimedOut(format!(
                "{what}: no answer within {}",
                qlsched_core::format_duration(limit)
            ))
        };
        let client = tokio::time::timeout_at(deadline, self.lend())
            .await
            .map_err(|_| timed_out())??;
        let transaction = run_in_transaction(&client, &self.schema, begin, work);
        match tokio::time::timeout_at(deadline, transaction).await {
            Ok(result) => {
                client.finished();
                result
            }
            // Dropped unfinished: closed, and its statement cancelled.
            Err(_) => Err(timed_out()),
        }
    }

    /// A pooled connection for one piece of work, handed back to the pool only by
    /// [`Lent::finished`].
    pub async fn lend(&self) -> Result<Lent, StoreError> {
        Ok(Lent {
            client: Some(self.client().await?),
            store: self.clone(),
        })
    }

    /// Connections the pool holds now, idle or lent out.
    pub fn connections(&self) -> usize {
        self.pool.status().size
    }
}

/// A pooled connection lent for one piece of work: it goes back to the pool only through
/// [`Lent::finished`], once that work ended. Dropped before (its bound ran out, or whoever
/// awaited it stopped waiting), it may be inside a transaction, or running a statement stuck
/// on a lock: handed back, the next borrower would run in that transaction (a READ ONLY one
/// refuses its writes as if on a standby; an aborted one refuses everything) or behind that
/// statement. So it is taken out of the pool and closed, and the statement it may be running
/// is cancelled in the background (a backend waiting on a lock does not notice its client
/// left, and would keep its place in the lock's queue). The one place a connection cut off
/// mid-work is discarded.
pub struct Lent {
    client: Option<Object>,
    store: Store,
}

impl Lent {
    /// The work ended (its transaction committed or rolled back): back to the pool.
    pub fn finished(mut self) {
        drop(self.client.take());
    }

    /// What cancels the statement this connection runs, from elsewhere (a stop that cannot wait
    /// for the work, a bound that ran out): a cancel request names the backend, not the
    /// statement, so it is meant for work whose connection is then closed, never pooled, as a
    /// `Lent` dropped before [`Lent::finished`] is.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            token: self.cancel_token(),
            store: self.store.clone(),
        }
    }
}

/// Cancels the statement running on one [`Lent`] connection ([`Lent::canceller`]), over a
/// connection of its own made as the pool's are ([`Store::cancel`]). What a caller above the
/// store holds instead of the driver's cancel token.
#[derive(Clone)]
pub struct Canceller {
    token: tokio_postgres::CancelToken,
    store: Store,
}

impl Canceller {
    /// Asks the server to cancel the statement in flight on that connection, if any: a
    /// cancelled transaction rolls back as a whole; one that already committed is unaffected.
    pub async fn cancel(&self) -> Result<(), StoreError> {
        self.store.cancel(&self.token).await
    }
}

impl std::ops::Deref for Lent {
    type Target = Object;

    fn deref(&self) -> &Object {
        match &self.client {
            Some(client) => client,
            // Only `finished` and `drop` take the connection, and both consume the value.
            None => unreachable!("a lent connection is used after it was handed back"),
        }
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let token = client.cancel_token();
        drop(Object::take(client));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.store.clone();
        runtime.spawn(async move {
            if let Err(error) = store.cancel(&token).await {
                tracing::debug!(%error, "could not cancel the statement of a connection cut off");
            }
        });
    }
}
