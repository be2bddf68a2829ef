//! qlsched: a PostgreSQL row-lease cluster scheduler (docs/DESIGN.md), and the operator's
//! instrument for it.
//!
//! Layers, from the inside out: [`core`] is pure (cron, decider, fence, manifest, bounds);
//! [`store`] is the PostgreSQL adapter and the only place SQL lives; [`coordinator`] runs one
//! bounded round and [`lifecycle`] the timer around it; [`replica`] is a whole replica (startup,
//! rounds, probes, housekeeping, stop), [`backfill`] and [`manual`] the operator's flows, each
//! stopped through a [`stop::StopToken`]; [`cli`] translates between people and
//! the layers below; [`bench`](mod@bench) measures the whole of it against the database's commit ceiling.
//! [`embedded`] is the throw-away server of the demo and the tests, beside the store, not in it.

pub mod backfill;
pub mod bench;
pub mod cli;
pub mod coordinator;
pub mod core;
pub mod embedded;
pub mod lifecycle;
pub mod manual;
pub mod observe;
pub mod replica;
pub mod stop;
pub mod store;
pub mod tui;
