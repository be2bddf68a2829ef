//! Reading a row by the names its statement gives its columns.
//!
//! `row.get(3)` compiles whatever the SELECT list says; reorder the list and it misreads, or
//! panics on a type it did not expect. [`Named::col`] reads by name instead, and a name the
//! statement does not give, or a value of another type, is a [`StoreError::Column`] naming the
//! column, never a panic. A statement gives each column read this way a name: the column's own,
//! or `AS name` for an expression. A row of one column may still be read by position (`get(0)`):
//! there is nothing to reorder.

use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

use crate::StoreError;
use crate::error::error_chain;

/// A row read by column name.
pub trait Named {
    /// The value of `column`, or [`StoreError::Column`] naming it when the row has no such
    /// column or its value does not convert to `T`.
    fn col<'a, T: FromSql<'a>>(&'a self, column: &'static str) -> Result<T, StoreError>;
}

impl Named for Row {
    fn col<'a, T: FromSql<'a>>(&'a self, column: &'static str) -> Result<T, StoreError> {
        self.try_get(column).map_err(|error| StoreError::Column {
            column,
            reason: error_chain(&error),
        })
    }
}
