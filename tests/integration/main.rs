//! Integration tests: one binary (after ripgrep), one module per area; each test that talks to
//! PostgreSQL gets a database of its own.

mod util;

mod admission;
mod bench;
mod claiming;
mod cli;
mod generated;
mod lifecycle;
mod migrate;
mod operator;
mod publish;
mod recovery;
mod replicas;
mod self_contained;
mod top;
