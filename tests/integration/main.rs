//! Integration tests: one binary (STYLE.md, after ripgrep), one module per area, each test with
//! a PostgreSQL database of its own.

mod util;

mod accounting;
mod admission;
mod bench;
mod claiming;
mod cli;
mod generated;
mod lifecycle;
mod migrate;
mod operator;
mod plan;
mod publish;
mod recovery;
mod replicas;
mod top;
