//! PostgreSQL servers a test owns outright, to restart, stop and promote: made with `initdb` (a
//! primary) or `pg_basebackup -R -X stream` from one (a streaming standby), from the newest
//! /usr/lib/postgresql/*/bin, as the `postgres` OS user, on free ports, in a directory of their
//! own (see `pg_tls` for why). Dropping a server stops it at once and deletes its data; a
//! watchdog does the same for every server of the directory should the test process die first.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::pg_tls::{as_postgres, free_port, pg_bin, postgres_ids, run, start_watchdog, write};

/// One server: its data directory, its port, and how to drive it.
pub struct OwnServer {
    pub port: u16,
    data: PathBuf,
    /// The directory holding this server (and its standby, if one is made).
    dir: PathBuf,
    bin: PathBuf,
    ids: (u32, u32),
    /// Whether dropping this value deletes `dir` (the first server of a directory does).
    owns_dir: bool,
}

impl OwnServer {
    /// A fresh primary, started, ready for streaming standbys; `name` keeps concurrent tests'
    /// directories apart.
    pub fn primary(name: &str) -> OwnServer {
        let bin = pg_bin();
        let ids = postgres_ids();
        let dir = std::env::temp_dir().join(format!("qlsched-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("server directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::os::unix::fs::chown(&dir, Some(ids.0), Some(ids.1)).expect("chown");
        watchdog(&dir);
        let data = dir.join("primary");
        run(
            as_postgres(&bin.join("initdb"), ids, &dir)
                .arg("-D")
                .arg(&data)
                .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"])
                .stdout(Stdio::null()),
            "initdb",
        );
        let conf = std::fs::read_to_string(data.join("postgresql.conf")).expect("conf");
        write(
            &data.join("postgresql.conf"),
            &format!(
                "{conf}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
                 fsync = off\nfull_page_writes = off\nmax_connections = 60\n\
                 shared_buffers = 16MB\nwal_level = replica\nmax_wal_senders = 4\n\
                 hot_standby = on\nwal_keep_size = 64MB\n",
                dir.display()
            ),
            0o600,
            Some(ids),
        );
        write(
            &data.join("pg_hba.conf"),
            "local all all trust\nhost all all 127.0.0.1/32 trust\n\
             host replication all 127.0.0.1/32 trust\n",
            0o600,
            Some(ids),
        );
        let server = OwnServer {
            port: free_port(),
            data,
            dir,
            bin,
            ids,
            owns_dir: true,
        };
        server.set_port();
        server.start();
        server
    }

    /// A streaming standby of this server, started: `pg_basebackup -R -X stream`, on a port of
    /// its own.
    pub fn standby(&self) -> OwnServer {
        let data = self.dir.join(format!("standby-{}", free_port()));
        run(
            as_postgres(&self.bin.join("pg_basebackup"), self.ids, &self.dir)
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                ])
                .arg("-D")
                .arg(&data)
                .args(["-R", "-X", "stream", "--no-sync"]),
            "pg_basebackup",
        );
        let standby = OwnServer {
            port: free_port(),
            data,
            dir: self.dir.clone(),
            bin: self.bin.clone(),
            ids: self.ids,
            owns_dir: false,
        };
        standby.set_port();
        standby.start();
        standby
    }

    fn set_port(&self) {
        let conf = self.data.join("postgresql.conf");
        let text = std::fs::read_to_string(&conf).expect("conf");
        write(
            &conf,
            &format!("{text}\nport = {}\n", self.port),
            0o600,
            Some(self.ids),
        );
    }

    fn pg_ctl(&self, args: &[&str], what: &str) {
        run(
            as_postgres(&self.bin.join("pg_ctl"), self.ids, &self.dir)
                .arg("-D")
                .arg(&self.data)
                .arg("-l")
                .arg(self.data.join("server.log"))
                .args(args)
                .stdout(Stdio::null()),
            what,
        );
    }

    pub fn start(&self) {
        self.pg_ctl(&["-w", "-t", "60", "start"], "pg_ctl start");
    }

    /// `pg_ctl stop -m MODE`: `fast` rolls sessions back and shuts down cleanly, `immediate`
    /// is as a crash (a recovery at the next start).
    pub fn stop(&self, mode: &str) {
        self.pg_ctl(&["-w", "-t", "60", "-m", mode, "stop"], "pg_ctl stop");
    }

    /// `pg_ctl restart -m MODE`, returning once the server accepts connections again.
    pub fn restart(&self, mode: &str) {
        self.pg_ctl(&["-w", "-t", "60", "-m", mode, "restart"], "pg_ctl restart");
    }

    /// Promotes a standby, returning once it is out of recovery.
    pub fn promote(&self) {
        self.pg_ctl(&["-w", "-t", "60", "promote"], "pg_ctl promote");
    }

    /// A key=value string for `dbname` on this server, without TLS.
    pub fn url(&self, dbname: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={dbname} sslmode=disable",
            self.port
        )
    }

    /// A superuser connection to `dbname`, with the qlsched schema on the search path.
    pub async fn client(&self, dbname: &str) -> tokio_postgres::Client {
        qlsched::store::ConnectionSettings::resolve(Some(&self.url(dbname)))
            .expect("own server URL")
            .connect(&super::schema(), "qlsched tests")
            .await
            .expect("connect to the test's own server")
    }

    /// Waits until this standby has replayed everything `primary` has written so far.
    pub async fn caught_up_with(&self, primary: &OwnServer) {
        let lsn: String = primary
            .client("postgres")
            .await
            .query_one("SELECT pg_current_wal_lsn()::text", &[])
            .await
            .expect("primary's WAL position")
            .get(0);
        let standby = self.client("postgres").await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let replayed: bool = standby
                .query_one(
                    "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
                    &[&lsn],
                )
                .await
                .expect("standby's replay position")
                .get(0);
            if replayed {
                return;
            }
            assert!(Instant::now() < deadline, "standby never replayed {lsn}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Stops the server at once; the first server of a directory stops every other one in it (its
/// standbys) and deletes the directory.
impl Drop for OwnServer {
    fn drop(&mut self) {
        let datas = if self.owns_dir {
            std::fs::read_dir(&self.dir)
                .map(|entries| {
                    entries
                        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                        .filter(|path| path.join("postmaster.pid").exists())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        } else {
            vec![self.data.clone()]
        };
        for data in datas {
            let _ = as_postgres(&self.bin.join("pg_ctl"), self.ids, &self.dir)
                .arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(if self.owns_dir { &self.dir } else { &self.data });
    }
}

/// Stops every server under `dir` and deletes it once this process has ended, however it ends.
fn watchdog(dir: &Path) {
    let script = format!(
        "while kill -0 {parent} 2>/dev/null; do sleep 1; done; \
         for pidfile in '{dir}'/*/postmaster.pid; do \
           [ -f \"$pidfile\" ] && kill -QUIT \"$(head -1 \"$pidfile\")\"; done; \
         sleep 2; rm -rf '{dir}'",
        parent = std::process::id(),
        dir = dir.display()
    );
    start_watchdog(&script, "the test's own servers");
}
