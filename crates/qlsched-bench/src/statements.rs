//! Every SQL statement of the bench crate, named, with the roles that run it: the bench's own
//! statements ([`sql`](mod@crate::sql)) and the scratch databases' ([`scratch`](mod@crate::scratch)).
//! The bench's SQL lives here rather than in `qlsched-store`, so that the product does not ship
//! it, under the store's rule (docs/DESIGN.md §2): a `const` next to the function that runs it,
//! listed with [`statements!`], and prepared and planned by `tests/integration/statements.rs`
//! beside the store's, whose source scan covers this crate too.

pub use qlsched_store::statements::{Role, Statement};

/// Declares a module's `statements()`, as the store's macro of the same name does:
/// `NAME: Role | Role`, `NAME after SETUP: Role` for one whose table `SETUP` creates.
macro_rules! statements {
    ($($name:ident $(after $setup:ident)?: $($role:ident)|+),* $(,)?) => {
        /// This module's statements, for `qlsched_bench::statements::all`.
        pub(crate) fn statements() -> Vec<$crate::statements::Statement> {
            vec![$($crate::statements::Statement {
                module: module_path!(),
                name: stringify!($name),
                text: $name,
                run_by: &[$($crate::statements::Role::$role),+],
                after: $crate::statements::statements!(@after $($setup)?),
            }),*]
        }
    };
    (@after) => { None };
    (@after $setup:ident) => { Some($setup) };
}
pub(crate) use statements;

/// Statements written in place rather than as a constant, as the store's
/// `statements::BUILT_IN_PLACE`: the module that builds each, how its text starts in the source,
/// and why nothing prepares it.
#[doc(hidden)]
pub const BUILT_IN_PLACE: &[(&str, &str, &str)] = &[
    (
        "qlsched_bench::scratch",
        "CREATE DATABASE",
        "not prepared: DDL naming a database, which no parameter can",
    ),
    (
        "qlsched_bench::scratch",
        "DROP DATABASE",
        "not prepared: DDL naming a database, which no parameter can",
    ),
    (
        "qlsched_bench::scratch",
        "COMMENT ON DATABASE",
        "not prepared: DDL naming a database, which no parameter can",
    ),
];

/// Every statement of the bench crate, module by module.
#[doc(hidden)]
pub fn all() -> Vec<Statement> {
    [crate::sql::statements(), crate::scratch::statements()].concat()
}
