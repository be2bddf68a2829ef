//! Every SQL statement of `store`, named, with the roles that run it: the list
//! `tests/integration/statements.rs` prepares against a migrated database, so that a renamed
//! column or a missing grant fails a test rather than a replica. Each module declares its own
//! list with [`statements!`] next to its statements; the test also scans the sources and fails
//! naming any SQL constant missing from the list, or any statement written in place that
//! [`BUILT_IN_PLACE`] does not account for.

/// A group role of docs/DESIGN.md §3.2, or the schema's owner.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Whoever migrates, benchmarks or connects: planned as the test's superuser only.
    Owner,
    Admin,
    Runtime,
    Observer,
}

impl Role {
    /// The group role to plan as, `None` for the owner.
    pub fn group(self) -> Option<&'static str> {
        match self {
            Role::Owner => None,
            Role::Admin => Some("qlsched_admin"),
            Role::Runtime => Some("qlsched_runtime"),
            Role::Observer => Some("qlsched_observer"),
        }
    }
}

/// One statement of `store`.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Statement {
    /// The module that holds it, as `module_path!()` says.
    pub module: &'static str,
    /// The constant's name.
    pub name: &'static str,
    pub text: &'static str,
    /// Who runs it: each is planned as that role, so a missing privilege fails too.
    pub run_by: &'static [Role],
    /// A statement that must run first in the same transaction, for a table created at run time.
    pub after: Option<&'static str>,
}

/// Declares a module's `statements()`: `NAME: Role | Role`, `NAME after SETUP: Role` for one
/// whose table `SETUP` creates; `@also child, child;` first adds the lists of submodules.
macro_rules! statements {
    ($(@also $($child:ident),+;)?
     $($name:ident $(after $setup:ident)?: $($role:ident)|+),* $(,)?) => {
        /// This module's statements, for `store::statements::all`.
        pub(crate) fn statements() -> Vec<$crate::statements::Statement> {
            #[allow(unused_mut)]
            let mut list = vec![$($crate::statements::Statement {
                module: module_path!(),
                name: stringify!($name),
                text: $name,
                run_by: &[$($crate::statements::Role::$role),+],
                after: $crate::statements::statements!(@after $($setup)?),
            }),*];
            $($(list.extend($child::statements());)+)?
            list
        }
    };
    (@after) => { None };
    (@after $setup:ident) => { Some($setup) };
}
pub(crate) use statements;

/// Statements written in place rather than as a constant: each with the module that builds it,
/// how its text starts in the source, and what prepares it or why nothing does. The source scan
/// of `tests/integration/statements.rs` fails on one that is not here, and on an entry that no
/// longer matches the sources.
#[doc(hidden)]
pub const BUILT_IN_PLACE: &[(&str, &str, &str)] = &[
    (
        "qlsched_store::claim",
        "EXPLAIN {CLAIM_DUE}",
        "not prepared: EXPLAIN of CLAIM_DUE, which is",
    ),
    (
        "qlsched_store::claim",
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {CLAIM_DUE}",
        "not prepared: EXPLAIN of CLAIM_DUE, which is",
    ),
    (
        "qlsched_store::top",
        "EXPLAIN {TRENDS}",
        "not prepared: EXPLAIN of TRENDS, which is",
    ),
    (
        "qlsched_store::read::schedules",
        "EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) {SCHEDULES}",
        "not prepared: EXPLAIN of SCHEDULES, which is",
    ),
    (
        "qlsched_store::connect::pool",
        "DO $refusal$",
        "not prepared: a DO block carrying its message as a literal, for a server it refuses",
    ),
    (
        "qlsched_store",
        "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY",
        "not prepared: sent with the schema's transaction settings as one simple query",
    ),
    (
        "qlsched_store",
        "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE",
        "not prepared: sent with the schema's transaction settings as one simple query",
    ),
    (
        "qlsched_store",
        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        "not prepared: sent with the schema's transaction settings as one simple query",
    ),
    (
        "qlsched_store::connect",
        "SET LOCAL search_path TO {}",
        "not prepared: SET naming the schema, which no parameter can; sent with its BEGIN",
    ),
    (
        "qlsched_store::connect",
        "SET search_path TO {}",
        "not prepared: SET naming the schema, which no parameter can; sent once a session opens",
    ),
    (
        "qlsched_store::migrate",
        "CREATE SCHEMA",
        "not prepared: DDL naming the schema, which no parameter can",
    ),
    (
        "qlsched_store::migrate",
        "SET LOCAL search_path",
        "not prepared: settings of a migration's transaction naming the schema, which no \
         parameter can",
    ),
];

/// Every statement of `store`, module by module. The migrations (`migrate::MIGRATIONS`) are not
/// here: each is a batch of many statements, which cannot be prepared, and every test database is
/// made from a template they built.
#[doc(hidden)]
pub fn all() -> Vec<Statement> {
    use super::*;
    [
        accounting::statements(),
        admission_errors::statements(),
        admit::statements(),
        claim::statements(),
        connect::statements(),
        control::statements(),
        invariants::statements(),
        migrate::statements(),
        misfires::statements(),
        observe::statements(),
        operator::statements(),
        publish::statements(),
        read::statements(),
        recovery::statements(),
        replicas::statements(),
        retention::statements(),
        sender::statements(),
        top::statements(),
        upkeep::statements(),
    ]
    .concat()
}
