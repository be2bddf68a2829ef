//! Whole databases, for the demo, the benchmark and the tests: each works in a database of its
//! own that it creates from scratch and drops afterwards.

use super::{ConnectionSettings, SchemaName, StoreError};

/// A database name the scratch functions accept: the same plain identifiers as schema names, so
/// it can be spliced into CREATE/DROP DATABASE (identifiers cannot be parameters).
pub fn check_database_name(name: &str) -> Result<(), StoreError> {
    name.parse::<SchemaName>()
        .map(drop)
        .map_err(|_| StoreError::Config(format!("invalid scratch database name {name:?}")))
}

/// Drops `name` if it exists (closing its sessions) and creates it empty, optionally from a
/// template database.
pub async fn recreate_database(
    settings: &ConnectionSettings,
    name: &str,
    template: Option<&str>,
) -> Result<(), StoreError> {
    let client = drop_with(settings, name).await?;
    let create = match template {
        Some(template) => {
            check_database_name(template)?;
            format!("CREATE DATABASE \"{name}\" TEMPLATE \"{template}\"")
        }
        None => format!("CREATE DATABASE \"{name}\""),
    };
    client.batch_execute(&create).await?;
    Ok(())
}

/// Drops `name` if it exists, closing its sessions.
pub async fn drop_database(settings: &ConnectionSettings, name: &str) -> Result<(), StoreError> {
    drop_with(settings, name).await.map(drop)
}

/// Drops `name` over a new maintenance connection, and returns that connection.
async fn drop_with(
    settings: &ConnectionSettings,
    name: &str,
) -> Result<tokio_postgres::Client, StoreError> {
    check_database_name(name)?;
    let client = settings
        .connect(&SchemaName::default(), "qlsched scratch")
        .await?;
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .await?;
    Ok(client)
}

/// What a server holds under a database name: nothing, or a database with its comment (set by
/// `COMMENT ON DATABASE`, read with `shobj_description`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExistingDatabase {
    Absent,
    Present { comment: Option<String> },
}

/// Looks `name` up in `pg_database`.
pub async fn existing_database(
    settings: &ConnectionSettings,
    name: &str,
) -> Result<ExistingDatabase, StoreError> {
    check_database_name(name)?;
    let client = settings
        .connect(&SchemaName::default(), "qlsched scratch")
        .await?;
    let row = client
        .query_opt(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1",
            &[&name],
        )
        .await?;
    Ok(match row {
        None => ExistingDatabase::Absent,
        Some(row) => ExistingDatabase::Present {
            comment: row.get(0),
        },
    })
}

/// Sets the comment of database `name` (COMMENT takes no parameters: quotes are doubled).
pub async fn comment_on_database(
    settings: &ConnectionSettings,
    name: &str,
    comment: &str,
) -> Result<(), StoreError> {
    check_database_name(name)?;
    let client = settings
        .connect(&SchemaName::default(), "qlsched scratch")
        .await?;
    let literal = comment.replace('\'', "''");
    client
        .batch_execute(&format!("COMMENT ON DATABASE \"{name}\" IS '{literal}'"))
        .await?;
    Ok(())
}
