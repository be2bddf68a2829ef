//! Integration tests: one binary (after ripgrep), one module per area; each test that talks to
//! PostgreSQL gets a database of its own.

mod util;

mod accounting;
mod admission;
mod bench;
mod claiming;
mod cli;
mod connection;
mod contracts;
mod control;
mod deploy;
mod drills;
mod embedded;
mod generated;
mod inspecting;
mod lifecycle;
mod migrate;
mod observe;
mod operator;
mod plan;
mod pooler;
mod publish;
mod recovery;
mod replicas;
mod retention;
mod self_contained;
mod statements;
mod top;
