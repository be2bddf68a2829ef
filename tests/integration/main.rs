//! Integration tests: one binary (STYLE.md, after ripgrep), one module per area, each test with
//! a PostgreSQL database of its own.

mod util;

mod admission;
mod bench;
mod claiming;
mod cli;
mod embedded;
mod generated;
mod lifecycle;
mod migrate;
mod operator;
mod publish;
mod recovery;
mod replicas;
mod top;
