//! The pool: its connections opened as [`ConnectionSettings::connect`] opens one.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::future::BoxFuture;
use qlsched_pgconn::Missed;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, Config};

use super::{ConnectionSettings, SchemaName};
use crate::StoreError;

impl ConnectionSettings {
    /// Opens a pool of `size` connections and checks that one can be had.
    pub async fn pool(
        &self,
        schema: &SchemaName,
        application_name: &str,
        size: usize,
    ) -> Result<Pool, StoreError> {
        // The check is a connection of its own: its failure is described as `connect` describes
        // it (which host, which certificate check, which timeout), where the pool could say only
        // "timed out" or give the driver's bare error.
        drop(self.connect(schema, application_name).await?);
        let manager = Manager::from_connect(
            self.driver_config(application_name),
            PoolConnect {
                settings: self.clone(),
                setup: self.session_setup(schema),
            },
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        // The pool bounds a connection as a whole; every host gets its connect_timeout, on every
        // pass over the list (`prefer-standby` makes two).
        let create_timeout = self
            .libpq()
            .max_connect_time()
            .unwrap_or(Duration::from_secs(15));
        Pool::builder(manager)
            .max_size(size)
            .wait_timeout(Some(Duration::from_secs(15)))
            .create_timeout(Some(create_timeout))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|error| StoreError::Config(error.to_string()))
    }
}

/// How the pool opens its connections: as [`ConnectionSettings::connect`] does, host by host,
/// each session checked against `target_session_attrs`, so that a replica given every host finds
/// the primary again after a promotion. The pool's own create timeout bounds the whole.
struct PoolConnect {
    settings: ConnectionSettings,
    /// The schema's session settings, or nothing behind a transaction-mode pooler.
    setup: String,
}

impl deadpool_postgres::Connect for PoolConnect {
    fn connect(
        &self,
        pg_config: &Config,
    ) -> BoxFuture<'_, Result<(Client, JoinHandle<()>), tokio_postgres::Error>> {
        let base = pg_config.clone();
        Box::pin(async move {
            let Missed { mismatch, error } =
                match self.settings.libpq().open_pooled(&base, &self.setup).await {
                    Ok(opened) => return Ok(opened),
                    Err(missed) => missed,
                };
            // A server that answered and is not what is wanted says more than one that did not.
            if let Some((client, reason)) = mismatch
                && let Some(refused) = refusal(&client, &reason).await
            {
                return Err(refused);
            }
            // With no host answering in time and none refusing, the pool's create timeout has
            // the last word.
            match error {
                Some(error) => Err(error),
                None => std::future::pending().await,
            }
        })
    }
}

/// The error the pool reports when every host was passed over for its session: the pool's
/// connector can return only a driver error, so the server the last mismatch was found on raises
/// it (SQLSTATE 08004, the server rejected the connection: a connection failure, exit 69).
/// `None` should the server not raise it.
async fn refusal(client: &Client, reason: &str) -> Option<tokio_postgres::Error> {
    let message = reason.replace('\'', "''");
    client
        .batch_execute(&format!(
            "DO $refusal$ BEGIN RAISE EXCEPTION USING MESSAGE = '{message}', ERRCODE = '08004'; \
             END $refusal$"
        ))
        .await
        .err()
}
