//! The PostgreSQL adapter: the only place SQL lives (STYLE.md). Each statement is a `const` next
//! to the function that runs it, with its intent in a comment; every value is a parameter.

pub mod admit;
pub mod bench;
pub mod claim;
pub mod connect;
pub mod embedded;
mod error;
pub mod invariants;
pub mod migrate;
pub mod operator;
pub mod publish;
pub mod read;
pub mod recovery;
pub mod scratch;
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
        })
    }

    pub fn schema(&self) -> &SchemaName {
        &self.schema
    }

    /// A pooled connection.
    pub async fn client(&self) -> Result<Object, StoreError> {
        Ok(self.pool.get().await?)
    }

    /// Connections the pool holds now, idle or lent out.
    pub fn connections(&self) -> usize {
        self.pool.status().size
    }
}
