//! Integration tests: one binary (STYLE.md, after ripgrep), one module per area, each test with
//! a PostgreSQL database of its own.

mod util;

mod bench;
mod migrate;
