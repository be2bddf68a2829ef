//! Integration tests: one binary (STYLE.md, after ripgrep), one module per area, each test with
//! a PostgreSQL database of its own.

mod util;

mod admission;
mod claiming;
mod cli;
mod lifecycle;
mod migrate;
mod publish;
mod recovery;
mod replicas;
