//! qlsched: a PostgreSQL row-lease cluster scheduler (docs/DESIGN.md), and the operator's
//! instrument for it.
//!
//! Layers, from the inside out, each a crate of the workspace so that the compiler holds the
//! layering (docs/DESIGN.md §2, "Layers"): [`core`] (`qlsched-core`) is pure (cron, decider, fence,
//! manifest, bounds); [`pgconn`] (`qlsched-pgconn`) is what libpq does for a connection and
//! tokio-postgres does not; [`store`] (`qlsched-store`) is the PostgreSQL adapter and the only
//! place the product's SQL lives; the services (`qlsched-service`): [`coordinator`] runs one bounded round and
//! [`lifecycle`] the timer around it, [`replica`] is a whole replica (startup, rounds, probes,
//! housekeeping, stop), [`backfill`] and [`manual`] the operator's flows, each stopped through a
//! [`stop::StopToken`], [`observe`] serves the metrics. Beside those product crates, which never
//! depend on them: [`bench`](mod@bench) (`qlsched-bench`) measures the whole of it against the
//! database's commit ceiling and holds the scratch databases, and [`embedded`]
//! (`qlsched-embedded`) is the throw-away server of the demo and the tests. This package holds
//! the rest: [`cli`] translates between people and the layers below, and [`tui`] is the dashboard.

pub use qlsched_bench as bench;
pub use qlsched_core as core;
pub use qlsched_embedded as embedded;
pub use qlsched_pgconn as pgconn;
pub use qlsched_service::{backfill, coordinator, lifecycle, manual, observe, replica, stop};
pub use qlsched_store as store;

pub mod cli;
pub mod tui;
