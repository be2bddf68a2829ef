//! qlsched's services, on top of `qlsched-core` and `qlsched-store`: [`coordinator`] runs one
//! bounded round of a replica and [`lifecycle`] the timer around it; [`observe`] serves its
//! metrics and health; [`bench`](mod@bench) measures the whole of it against the database's commit
//! ceiling.

pub mod bench;
pub mod coordinator;
pub mod lifecycle;
pub mod observe;
