//! Replicas run inside this process, for `demo` and `bench`: each a [`Lifecycle`] around a
//! [`Coordinator`] with a pool of its own, started exactly as `qlsched run` starts one. In the
//! bench crate, not the services: only the benchmark and the demo start replicas this way, and
//! the product crates carry nothing that only they call (docs/DESIGN.md §2).

use std::sync::Arc;

use tokio::sync::mpsc;

use qlsched_core::{CoordinatorConfig, CoreError};
use qlsched_service::coordinator::Coordinator;
use qlsched_service::lifecycle::{Lifecycle, REPLICA_POOL_SIZE, RoundEvent, StopReport, register};
use qlsched_service::observe::Build;
use qlsched_store::{ConnectionSettings, SchemaName, Store, StoreError};

/// Replicas run inside this process (`demo`, `bench`): each a [`Lifecycle`] around a
/// [`Coordinator`] with a pool of its own, exactly as `qlsched run` starts one. Opening the pools
/// and starting the timers are two steps, so a caller can give up between them (the demo, on a
/// signal while it prepares) with nothing to undo.
pub struct InProcessReplicas {
    stores: Vec<(String, Store)>,
}

impl InProcessReplicas {
    /// Opens one pool per owner; its sessions are named `<application> <owner>`.
    pub async fn open(
        settings: &ConnectionSettings,
        schema: &SchemaName,
        application: &str,
        owners: impl IntoIterator<Item = String>,
    ) -> Result<Self, StoreError> {
        let mut stores = Vec::new();
        for owner in owners {
            let name = format!("{application} {owner}");
            let store = Store::open_replica(settings, schema, &name, REPLICA_POOL_SIZE).await?;
            stores.push((owner, store));
        }
        Ok(InProcessReplicas { stores })
    }

    /// Registers every replica (docs/DESIGN.md §3, `replicas`) as `build` and starts its timer with
    /// `template`'s configuration under its own owner; each reports its rounds to `events` when
    /// given. Every configuration is checked first: on an error none is started. A registration
    /// that fails is logged and the replica runs anyway: the registry is what people read, the
    /// fence is what keeps the promises.
    pub async fn start(
        self,
        template: &CoordinatorConfig,
        build: Build,
        events: Option<&mpsc::UnboundedSender<RoundEvent>>,
    ) -> Result<Vec<Lifecycle>, CoreError> {
        let configured = self
            .stores
            .into_iter()
            .map(|(owner, store)| {
                let config = CoordinatorConfig {
                    owner,
                    ..template.clone()
                };
                config.validate().map(|()| (config, store))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut lifecycles = Vec::with_capacity(configured.len());
        for (config, store) in configured {
            let forget_after = qlsched_core::FORGET_STALE_AFTER;
            if let Err(error) = register(&store, &config, forget_after, build).await {
                tracing::warn!(%error, owner = %config.owner, "could not register the replica");
            }
            lifecycles.push(Lifecycle::start(
                Arc::new(Coordinator::new(store, config).registered(forget_after, build)),
                events.cloned(),
            ));
        }
        Ok(lifecycles)
    }
}

/// Stops every replica at once (each drains its round within its drain timeout) and marks it
/// stopped in the registry.
pub async fn stop_all(lifecycles: Vec<Lifecycle>) -> Vec<StopReport> {
    futures_util::future::join_all(lifecycles.into_iter().map(Lifecycle::stop_registered)).await
}
