//! qlsched's services, on top of `qlsched-core` and `qlsched-store`: [`coordinator`] runs one
//! bounded round of a replica and [`lifecycle`] the timer around it; [`replica`] is a whole
//! replica (startup, rounds, probes, housekeeping, stop); [`backfill`] and [`manual`] are the
//! operator's flows; each is stopped through a [`stop::StopToken`]; [`observe`] serves a
//! replica's metrics and health. The benchmark that measures the whole of it is a crate of its
//! own, `qlsched-bench`, which depends on this one and never the other way round.

pub mod backfill;
pub mod coordinator;
pub mod lifecycle;
pub mod manual;
pub mod observe;
pub mod replica;
pub mod stop;
