//! The PostgreSQL adapter: the only place SQL lives (docs/DESIGN.md §2). Each statement is a
//! `const` next to the function that runs it, with its intent in a comment; every value is a
//! parameter. Each module lists its statements with the roles that run them (`statements!`), and
//! a test prepares them all (`statements`).

pub mod accounting;
pub mod admit;
pub mod bench;
pub mod claim;
pub mod connect;
pub mod control;
pub mod embedded;
mod error;
pub mod invariants;
pub mod migrate;
pub mod misfires;
pub mod observe;
pub mod operator;
pub mod passfile;
pub mod publish;
pub mod read;
pub mod recovery;
pub mod replicas;
pub mod retention;
pub mod scratch;
pub mod statements;
pub mod tls;
pub mod top;

pub use admit::{Admission, AdmissionOutcome, AdmitStats, RunIdentity};
pub use claim::{ClaimedRow, ReleaseRequest, TriggerDefinition};
pub use connect::{ConnectionSettings, SchemaName};
pub use error::StoreError;
pub use recovery::RecoveryReport;

use deadpool_postgres::{Object, Pool};

/// A connection pool on one qlsched schema: what a replica, an operator command or the dashboard
/// holds. Cloning shares the pool.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    schema: SchemaName,
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

    /// A pooled connection.
    pub async fn client(&self) -> Result<Object, StoreError> {
        Ok(self.pool.get().await?)
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

    /// Runs `work` on a pooled connection within `limit`, the wait for the connection included:
    /// what a replica does beside its rounds (housekeeping, the registry) never waits longer on
    /// a server that stopped answering. On time out the statement in flight is cancelled in the
    /// background and the connection is closed instead of going back to the pool, where the
    /// cancel could land on the next statement sent on it.
    pub async fn within<T>(
        &self,
        limit: std::time::Duration,
        what: &str,
        work: impl for<'c> FnOnce(
            &'c tokio_postgres::Client,
        ) -> futures_util::future::BoxFuture<'c, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let deadline = tokio::time::Instant::now() + limit;
        let timed_out = || {
            StoreError::TimedOut(format!(
                "{what}: no answer within {}",
                crate::core::format_duration(limit)
            ))
        };
        let client = tokio::time::timeout_at(deadline, self.client())
            .await
            .map_err(|_| timed_out())??;
        let token = client.cancel_token();
        match tokio::time::timeout_at(deadline, work(&client)).await {
            Ok(result) => result,
            Err(_) => {
                drop(Object::take(client));
                let store = self.clone();
                tokio::spawn(async move {
                    if let Err(error) = store.cancel(&token).await {
                        tracing::debug!(%error, "could not cancel a statement that timed out");
                    }
                });
                Err(timed_out())
            }
        }
    }

    /// Connections the pool holds now, idle or lent out.
    pub fn connections(&self) -> usize {
        self.pool.status().size
    }
}
