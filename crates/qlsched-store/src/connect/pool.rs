//! The pool: its connections opened as [`ConnectionSettings::connect`] opens one.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::future::BoxFuture;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, Config};

use super::open::{Drive, HostFailure, refusal};
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
                schema: schema.clone(),
            },
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        // The pool bounds a connection as a whole; every host gets its connect_timeout, on every
        // pass over the list (`prefer-standby` makes two).
        let hosts = self.targets().len() * self.session_attrs.passes().len();
        let hosts = u32::try_from(hosts).unwrap_or(u32::MAX).max(1);
        let create_timeout = self
            .connect_timeout
            .map_or(Duration::from_secs(15), |limit| limit * hosts);
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
    schema: SchemaName,
}

impl deadpool_postgres::Connect for PoolConnect {
    fn connect(
        &self,
        pg_config: &Config,
    ) -> BoxFuture<'_, Result<(Client, JoinHandle<()>), tokio_postgres::Error>> {
        let base = pg_config.clone();
        Box::pin(async move {
            let settings = &self.settings;
            let mut error = None;
            let mut mismatch = None;
            for &wanted in settings.session_attrs.passes() {
                for target in settings.targets() {
                    match settings
                        .open_session(&base, &target, wanted, &self.schema, Drive::Pooled)
                        .await
                    {
                        Ok(opened) => return Ok(opened),
                        Err(HostFailure::Driver(failed)) => error = Some(failed.error),
                        Err(HostFailure::TimedOut(_)) => {}
                        Err(HostFailure::Mismatch { client, reason }) => {
                            mismatch = Some((client, reason));
                        }
                    }
                }
            }
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
