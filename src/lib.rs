//! qlsched: the PostgreSQL row-lease cluster scheduler of ADR-0105, and the operator's
//! instrument for it.

pub mod core;
