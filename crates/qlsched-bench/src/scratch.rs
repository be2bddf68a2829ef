//! Whole databases, for the demo, the benchmark and the tests: each works in a database of its
//! own that it creates from scratch and drops afterwards.

use qlsched_store::{ConnectionSettings, SchemaName, StoreError};

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

/// What [`recreate_marked_database`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recreated {
    /// The database is new (or new again) and carries the mark.
    Done,
    /// A database of that name exists without the mark; nothing was dropped.
    Refused { comment: Option<String> },
}

// A database's comment, which marks it as one qlsched may drop and recreate.
const DATABASE_COMMENT: &str =
    "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1";

/// Drops and recreates `name` only if no database of that name exists, or the one that does
/// carries `mark` as its comment (or `adopt_unmarked`), then marks the new one. All on one
/// connection, so that a database created by someone else between the look-up and the create
/// makes the CREATE fail rather than be dropped, and the mark follows the CREATE at once. The mark
/// is a constant of the caller's: COMMENT takes no parameters, and doubling quotes is enough only
/// for text without backslashes, which is checked.
pub async fn recreate_marked_database(
    settings: &ConnectionSettings,
    name: &str,
    mark: &'static str,
    adopt_unmarked: bool,
) -> Result<Recreated, StoreError> {
    check_database_name(name)?;
    if mark.contains(['\\', '\0']) {
        return Err(StoreError::Config(format!(
            "invalid database mark {mark:?}"
        )));
    }
    let client = settings
        .connect(&SchemaName::default(), "qlsched scratch")
        .await?;
    let existing = client.query_opt(DATABASE_COMMENT, &[&name]).await?;
    if let Some(row) = existing {
        let comment: Option<String> = row.get(0);
        if comment.as_deref() != Some(mark) && !adopt_unmarked {
            return Ok(Recreated::Refused { comment });
        }
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
            .await?;
    }
    client
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await?;
    let literal = mark.replace('\'', "''");
    client
        .batch_execute(&format!("COMMENT ON DATABASE \"{name}\" IS '{literal}'"))
        .await?;
    Ok(Recreated::Done)
}

crate::statements::statements! {
    DATABASE_COMMENT: Owner,
}
