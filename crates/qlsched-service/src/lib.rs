//! qlsched's services, on top of `qlsched-core` and `qlsched-store`: [`coordinator`] runs one
//! bounded round of a replica and [`lifecycle`] the timer around it; [`replica`] is a whole
//! replica (startup, rounds, probes, housekeeping, stop); [`backfill`] and [`manual`] are the
//! operator's flows; each is stopped through a [`stop::StopToken`]; [`observe`] serves a
//! replica's metrics and health; [`bench`](mod@bench) measures the whole of it against the
//! database's commit ceiling.

pub mod backfill;
pub mod bench;
pub mod coordinator;
pub mod lifecycle;
pub mod manual;
pub mod observe;
pub mod replica;
pub mod stop;
