//! Integration tests: one binary (STYLE.md, after ripgrep), one module per area, each test with
//! a PostgreSQL database of its own.

mod util;

mod generated;
mod migrate;
mod operator;
mod top;
