//! A PgBouncer of the test's own, from the distribution's package (`/usr/sbin/pgbouncer`), in
//! front of the test server: its settings are PgBouncer's defaults (so a startup `options` is
//! refused) but for the pool mode, a pool small enough that clients share server connections,
//! and trust authentication. It runs as the `postgres` OS user (PgBouncer refuses root), on a
//! free port, in a directory of its own; dropping it stops it and deletes the directory.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::TestDb;
use super::pg_tls::{as_postgres, free_port, postgres_ids, write};

pub const PGBOUNCER: &str = "/usr/sbin/pgbouncer";

pub struct PgBouncer {
    pub port: u16,
    dir: PathBuf,
    child: Child,
}

impl PgBouncer {
    /// A PgBouncer in `pool_mode` (`session` or `transaction`) for `db` alone, ready for clients.
    /// A machine without PgBouncer fails the test: `.ci/run` installs it.
    pub fn start(db: &TestDb, pool_mode: &str) -> PgBouncer {
        Self::start_with_pool(db, pool_mode, 3)
    }

    /// [`PgBouncer::start`] with `pool_size` server connections (`default_pool_size`).
    pub fn start_with_pool(db: &TestDb, pool_mode: &str, pool_size: u32) -> PgBouncer {
        assert!(
            std::path::Path::new(PGBOUNCER).exists(),
            "{PGBOUNCER} is missing: install the distribution's pgbouncer package (.ci/run does)"
        );
        let ids = postgres_ids();
        let dir = std::env::temp_dir().join(format!(
            "qlsched-pgbouncer-{pool_mode}-{}-{}",
            std::process::id(),
            db.name
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("pgbouncer directory");
        std::os::unix::fs::chown(&dir, Some(ids.0), Some(ids.1)).expect("chown");
        let port = free_port();
        // The server as the tests reach it, as libpq settings PgBouncer passes on.
        let target = db.settings.conninfo();
        write(
            &dir.join("pgbouncer.ini"),
            &format!(
                "[databases]\n{name} = {target}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
                 listen_port = {port}\nunix_socket_dir =\nauth_type = any\n\
                 pool_mode = {pool_mode}\ndefault_pool_size = {pool_size}\nmax_client_conn = 200\n\
                 logfile = {log}\npidfile = {pid}\n",
                name = db.name,
                log = dir.join("pgbouncer.log").display(),
                pid = dir.join("pgbouncer.pid").display(),
            ),
            0o600,
            Some(ids),
        );
        let child = as_postgres(std::path::Path::new(PGBOUNCER), ids, &dir)
            .arg(dir.join("pgbouncer.ini"))
            // It logs to its file as well: a pipe nobody reads would fill and stop it.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pgbouncer");
        let bouncer = PgBouncer { port, dir, child };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "pgbouncer did not listen within 10 s: {}",
                bouncer.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        bouncer
    }

    /// A URL for `db` through this pooler.
    pub fn url(&self, db: &TestDb) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{}", self.port, db.name)
    }

    /// What PgBouncer logged, for a failure's message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
