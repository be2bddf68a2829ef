//! A throw-away PostgreSQL server, for `qlsched demo --embedded` and for the tests when no server
//! answers: qlsched needs PostgreSQL, but on a machine where it is installed and not running (or
//! runs under other credentials) a first look and the tests should not depend on it.
//!
//! It drives the installed binaries, never downloads any: `initdb` and `pg_ctl` of PostgreSQL 15
//! or newer from `--postgres-bin`, else PATH, else the usual install locations, newest major
//! first. The cluster lives in a fresh temporary directory, trusts every local login (nothing else
//! can reach it), and listens only on a unix socket in that directory: no TCP port is ever
//! opened, so there is none to collide with or to leave behind.
//!
//! PostgreSQL refuses to run as root. As root the directory is handed to the unprivileged system
//! user `postgres` and every PostgreSQL program runs as that user (std's `CommandExt::uid/gid`,
//! which also clears root's supplementary groups); without such a user, [`EmbeddedServer::start`]
//! refuses and says what to do.
//!
//! Cleanup: [`EmbeddedServer::stop`] (or dropping the value, which also happens when a panic
//! unwinds past it) stops the server and deletes the directory. A process can also end without
//! running either (SIGKILL, an abort, a test binary whose statics are never dropped), so each
//! server has a watchdog: a small `sh` that waits for end-of-input on a pipe whose only writer is
//! this process. The kernel closes that pipe however the process ends; the watchdog then stops the
//! server and deletes the directory.

use std::ffi::OsStr;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use qlsched_store::ConnectionSettings;

/// The oldest major version qlsched supports (the README's prerequisites).
pub const MIN_MAJOR: u32 = 15;

/// The user an embedded server runs as when qlsched runs as root.
pub const SYSTEM_USER: &str = "postgres";

/// The superuser `initdb` creates, and the user qlsched connects as.
pub const SUPERUSER: &str = "postgres";

/// The port in the socket's name (`.s.PGSQL.5432`); the socket is in a directory of its own, so
/// the number never collides with another server.
const PORT: u16 = 5432;

/// The environment variable that names the directory of `initdb` and `pg_ctl`, as
/// `--postgres-bin` does.
pub const BIN_ENV: &str = "QLSCHED_POSTGRES_BIN";

/// Runs `sh -c WATCHDOG qlsched-watchdog PG_CTL DATA DIR`. Signals to the terminal's process
/// group are ignored (it has a process group of its own as well): only the end of the pipe, the
/// owner gone, starts the cleanup. `pg_ctl stop` on a directory already removed fails at once.
const WATCHDOG: &str = r#"trap '' INT TERM HUP
while read -r _; do :; done
if [ -d "$2" ]; then
  "$1" stop -D "$2" -m fast -w -t 30 -s >/dev/null 2>&1 ||
    "$1" stop -D "$2" -m immediate -w -t 30 -s >/dev/null 2>&1
fi
rm -rf "$3"
"#;

/// Why no embedded server: each maps (in `cli::error`) to one exit status of the README's table.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// No `initdb` and `pg_ctl` of a supported version where we looked. Retrying cannot help;
    /// installing PostgreSQL or naming its directory does: exit 78.
    #[error("cannot start a throw-away PostgreSQL: {0}")]
    NotFound(String),
    /// Running as root with no unprivileged user to run the server as: exit 78.
    #[error("cannot start a throw-away PostgreSQL: {0}")]
    Root(String),
    /// A step failed on a machine that has PostgreSQL (disk full, shared memory, a broken
    /// install): the database is unavailable, exit 69.
    #[error("the throw-away PostgreSQL failed to {step}: {detail}")]
    Failed { step: &'static str, detail: String },
}

impl EmbeddedError {
    fn io(step: &'static str, what: &Path, error: &std::io::Error) -> Self {
        EmbeddedError::Failed {
            step,
            detail: format!("{}: {error}", what.display()),
        }
    }
}

/// Where the PostgreSQL programs are, and which version they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    pub dir: PathBuf,
    /// `15.20`, as `pg_ctl --version` reports it.
    pub version: String,
}

/// An unprivileged user to run the server as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// A running throw-away server. Stopped and deleted by [`EmbeddedServer::stop`], when dropped,
/// or by its watchdog when this process ends without either.
#[derive(Debug)]
pub struct EmbeddedServer {
    dir: PathBuf,
    binaries: Binaries,
    run_as: Option<SystemUser>,
    watchdog: Option<Child>,
    started: bool,
    start_time: Duration,
}

impl EmbeddedServer {
    /// Finds the binaries, initialises a cluster in a new temporary directory and starts it.
    /// `bin_dir` is `--postgres-bin`: only that directory is used when given. Blocking: `initdb`
    /// takes about a second.
    pub fn start(bin_dir: Option<&Path>) -> Result<Self, EmbeddedError> {
        let began = Instant::now();
        let binaries = match bin_dir {
            Some(dir) => binaries_in(dir).map_err(|why| {
                EmbeddedError::NotFound(format!(
                    "{why} (named by --postgres-bin or {BIN_ENV}); name the directory that holds \
                     them"
                ))
            })?,
            None => find_binaries(std::env::var_os("PATH").as_deref())?,
        };
        let dir = make_directory()?;
        // Whoever owns what we just created is who we are: no unsafe geteuid() needed.
        let me = std::fs::metadata(&dir)
            .map_err(|e| EmbeddedError::io("create its directory", &dir, &e))?
            .uid();
        let run_as = if me == 0 {
            match read_system_user(SYSTEM_USER) {
                Some(user) => Some(user),
                None => {
                    let _ = std::fs::remove_dir(&dir);
                    return Err(EmbeddedError::Root(root_refusal()));
                }
            }
        } else {
            None
        };
        if let Some(user) = &run_as {
            std::os::unix::fs::chown(&dir, Some(user.uid), Some(user.gid))
                .map_err(|e| EmbeddedError::io("hand its directory to postgres", &dir, &e))?;
        }
        // From here on the value exists, so any failure below stops and deletes what was made.
        let mut server = EmbeddedServer {
            dir,
            binaries,
            run_as,
            watchdog: None,
            started: false,
            start_time: Duration::ZERO,
        };
        server.watchdog = Some(server.spawn_watchdog()?);
        server.init()?;
        server.started = true;
        server.run_pg_ctl_start()?;
        server.start_time = began.elapsed();
        Ok(server)
    }

    /// The settings that reach the server's `postgres` database as its superuser. Nothing from
    /// the environment applies: they name this server and nothing else.
    pub fn settings(&self) -> ConnectionSettings {
        ConnectionSettings::resolve_with(Some(&self.conninfo()), |_| None)
            .expect("a conninfo string of our own making parses")
    }

    /// `host='DIR' port=5432 user=postgres dbname=postgres`, for `-D`.
    pub fn conninfo(&self) -> String {
        format!(
            "host={} port={PORT} user={SUPERUSER} dbname=postgres",
            conninfo_value(&self.dir.to_string_lossy())
        )
    }

    /// The temporary directory: the cluster (`data/`), its log and its socket.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    /// The system user the server runs as, when qlsched runs as root.
    pub fn run_as(&self) -> Option<&str> {
        self.run_as.as_ref().map(|user| user.name.as_str())
    }

    /// From the search for the binaries to a server accepting connections.
    pub fn start_time(&self) -> Duration {
        self.start_time
    }

    /// Stops the server and deletes its directory; reports what could not be done.
    pub fn stop(mut self) -> Result<(), EmbeddedError> {
        self.shutdown()
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// A PostgreSQL program, run as the server's user, in its directory, with none of the
    /// caller's `PG*` variables (`PGDATA`, `PGPORT`, `PGOPTIONS`... would redirect it), in a
    /// process group of its own: a Ctrl-C at the terminal reaches qlsched, which decides, and not
    /// an initdb or pg_ctl halfway through.
    fn program(&self, name: &str) -> Command {
        let mut command = Command::new(self.binaries.dir.join(name));
        command
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .process_group(0);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("PG") {
                command.env_remove(key);
            }
        }
        if let Some(user) = &self.run_as {
            command.uid(user.uid).gid(user.gid);
        }
        command
    }

    fn spawn_watchdog(&self) -> Result<Child, EmbeddedError> {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(WATCHDOG)
            .arg("qlsched-watchdog")
            .arg(self.binaries.dir.join("pg_ctl"))
            .arg(self.data())
            .arg(&self.dir)
            .current_dir("/")
            .process_group(0)
            // The pipe's write end stays in this process only: std opens it close-on-exec, so no
            // child started later (pg_ctl, the demo's own children, a test's) holds it open.
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(user) = &self.run_as {
            command.uid(user.uid).gid(user.gid);
        }
        command
            .spawn()
            .map_err(|e| EmbeddedError::io("start its watchdog", Path::new("sh"), &e))
    }

    fn init(&self) -> Result<(), EmbeddedError> {
        let output = self
            .program("initdb")
            .arg("-D")
            .arg(self.data())
            .args(["-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-locale"])
            // A throw-away cluster: nothing is worth an fsync.
            .args(["--no-sync", "--no-instructions"])
            .output()
            .map_err(|e| EmbeddedError::io("initialise a cluster", &self.binaries.dir, &e))?;
        check(&output, "initialise a cluster", None)?;
        // Settings in the file, not on pg_ctl's -o, which goes through a shell: the directory's
        // name is never parsed by one.
        let settings = format!(
            "\n# qlsched: a throw-away server, reachable only through its socket\n\
             listen_addresses = ''\n\
             unix_socket_directories = {}\n\
             port = {PORT}\n\
             fsync = off\n\
             synchronous_commit = off\n\
             full_page_writes = off\n",
            conf_value(&self.dir.to_string_lossy())
        );
        let conf = self.data().join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf)
            .map_err(|e| EmbeddedError::io("configure the cluster", &conf, &e))?;
        text.push_str(&settings);
        std::fs::write(&conf, text)
            .map_err(|e| EmbeddedError::io("configure the cluster", &conf, &e))
    }

    fn run_pg_ctl_start(&self) -> Result<(), EmbeddedError> {
        let output = self
            .program("pg_ctl")
            .args(["start", "-w", "-t", "60", "-s", "-D"])
            .arg(self.data())
            // With -l the postmaster writes to the log, never to our pipes: output() returns.
            // pg_ctl also gives the postmaster a session of its own.
            .arg("-l")
            .arg(self.log())
            .output()
            .map_err(|e| EmbeddedError::io("start", &self.binaries.dir, &e))?;
        check(&output, "start", Some(&self.log()))
    }

    fn shutdown(&mut self) -> Result<(), EmbeddedError> {
        let mut failure = None;
        if std::mem::take(&mut self.started) {
            let stopped = self
                .pg_ctl_stop("fast")
                .or_else(|_| self.pg_ctl_stop("immediate"));
            if let Err(error) = stopped {
                failure = Some(error);
            }
        }
        match std::fs::remove_dir_all(&self.dir) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                failure.get_or_insert(EmbeddedError::io("delete its directory", &self.dir, &error));
            }
        }
        if let Some(mut watchdog) = self.watchdog.take() {
            // End of input: it finds nothing left to do and exits.
            drop(watchdog.stdin.take());
            let _ = watchdog.wait();
        }
        failure.map_or(Ok(()), Err)
    }

    fn pg_ctl_stop(&self, mode: &str) -> Result<(), EmbeddedError> {
        let output = self
            .program("pg_ctl")
            .args(["stop", "-w", "-t", "30", "-s", "-m", mode, "-D"])
            .arg(self.data())
            .output()
            .map_err(|e| EmbeddedError::io("stop", &self.binaries.dir, &e))?;
        check(&output, "stop", None)
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        if let Err(error) = self.shutdown() {
            eprintln!("qlsched: {error}");
        }
    }
}

/// A failed program's exit status and the end of what it said (and of the server's log).
fn check(output: &Output, step: &'static str, log: Option<&Path>) -> Result<(), EmbeddedError> {
    if output.status.success() {
        return Ok(());
    }
    let mut detail = format!("{}", output.status);
    let said = String::from_utf8_lossy(&output.stderr);
    let said = said.trim();
    if !said.is_empty() {
        detail.push_str(&format!(": {}", last_lines(said, 5)));
    }
    if let Some(log) = log.and_then(|path| std::fs::read_to_string(path).ok()) {
        let log = log.trim();
        if !log.is_empty() {
            detail.push_str(&format!("; server log: {}", last_lines(log, 5)));
        }
    }
    Err(EmbeddedError::Failed { step, detail })
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" / ")
}

/// A new directory only this user can enter, `qlsched-pg-<pid>-<random>` in the temporary
/// directory. Created, never reused: a name someone else made first is an error, not adopted.
fn make_directory() -> Result<PathBuf, EmbeddedError> {
    let name = format!(
        "qlsched-pg-{}-{}",
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let mut base = std::env::temp_dir();
    // A unix socket's path is limited to 107 bytes; a long TMPDIR gets /tmp instead.
    if base.join(&name).join(".s.PGSQL.5432").as_os_str().len() > 100 {
        base = PathBuf::from("/tmp");
    }
    let dir = base.join(name);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| EmbeddedError::io("create its directory", &dir, &e))?;
    Ok(dir)
}

/// The directories searched, in order: PATH, then the usual install locations, newest first.
pub fn search_dirs(path: Option<&OsStr>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = path
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    dirs.extend(versioned("/usr/lib/postgresql", "", "bin"));
    dirs.extend(versioned("/usr", "pgsql-", "bin"));
    dirs.push(PathBuf::from("/usr/local/pgsql/bin"));
    dirs.extend(versioned("/opt/homebrew/opt", "postgresql@", "bin"));
    dirs.extend(versioned("/usr/local/opt", "postgresql@", "bin"));
    dirs
}

/// `PARENT/PREFIX<major>/BIN` for every such entry, newest major first.
fn versioned(parent: &str, prefix: &str, bin: &str) -> Vec<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(parent)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let major = name.strip_prefix(prefix)?.parse::<u32>().ok()?;
            Some((major, entry.path().join(bin)))
        })
        .collect();
    found.sort_by_key(|(major, _)| std::cmp::Reverse(*major));
    found.into_iter().map(|(_, dir)| dir).collect()
}

/// The first directory of [`search_dirs`] with `initdb` and `pg_ctl` of 15 or newer.
pub fn find_binaries(path: Option<&OsStr>) -> Result<Binaries, EmbeddedError> {
    let mut skipped = Vec::new();
    for dir in search_dirs(path) {
        match binaries_in(&dir) {
            Ok(binaries) => return Ok(binaries),
            Err(Missing::Absent(_)) => {}
            Err(other) => skipped.push(other.to_string()),
        }
    }
    let path = path.map_or_else(
        || "PATH (unset)".to_owned(),
        |p| format!("PATH ({})", p.to_string_lossy()),
    );
    let skipped = if skipped.is_empty() {
        String::new()
    } else {
        format!("; passed over: {}", skipped.join("; "))
    };
    Err(EmbeddedError::NotFound(format!(
        "no initdb and pg_ctl of PostgreSQL {MIN_MAJOR} or newer: looked in {path}, \
         /usr/lib/postgresql/<major>/bin, /usr/pgsql-<major>/bin, /usr/local/pgsql/bin, \
         /opt/homebrew/opt/postgresql@<major>/bin and /usr/local/opt/postgresql@<major>/bin\
         {skipped}. Install PostgreSQL {MIN_MAJOR} or newer (e.g. `apt-get install postgresql`), \
         name its bin directory with --postgres-bin, or give a running server with --database-url"
    )))
}

/// Why a directory was passed over.
#[derive(Debug, thiserror::Error)]
enum Missing {
    #[error("no initdb and pg_ctl in {0}")]
    Absent(String),
    #[error("{dir}: PostgreSQL {version} ({MIN_MAJOR} or newer is needed)")]
    TooOld { dir: String, version: String },
    #[error("{dir}: `pg_ctl --version` said {said:?}")]
    Unreadable { dir: String, said: String },
}

/// `initdb` and `pg_ctl` in `dir`, executable, and of a supported version.
fn binaries_in(dir: &Path) -> Result<Binaries, Missing> {
    let executable = |name: &str| {
        std::fs::metadata(dir.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let shown = dir.display().to_string();
    if !executable("initdb") || !executable("pg_ctl") {
        return Err(Missing::Absent(shown));
    }
    let said = Command::new(dir.join("pg_ctl"))
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let Some(version) = parse_version(&said) else {
        return Err(Missing::Unreadable { dir: shown, said });
    };
    match version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok())
    {
        Some(major) if major >= MIN_MAJOR => Ok(Binaries {
            dir: dir.to_owned(),
            version,
        }),
        _ => Err(Missing::TooOld {
            dir: shown,
            version,
        }),
    }
}

/// `15.20` from `pg_ctl (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)`.
fn parse_version(said: &str) -> Option<String> {
    let rest = said.split_once("(PostgreSQL) ")?.1;
    let version: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (!version.is_empty()).then_some(version)
}

/// The refusal when qlsched runs as root and no unprivileged user exists to run the server as.
fn root_refusal() -> String {
    format!(
        "qlsched runs as root, PostgreSQL will not, and there is no system user `{SYSTEM_USER}` to \
         run it as. Run qlsched as an ordinary user, create the user (`useradd --system \
         --user-group {SYSTEM_USER}`; PostgreSQL's packages usually do), or give a running server \
         with --database-url"
    )
}

/// `name` from /etc/passwd (the system users PostgreSQL's packages create live there).
fn read_system_user(name: &str) -> Option<SystemUser> {
    parse_passwd(&std::fs::read_to_string("/etc/passwd").ok()?, name)
}

fn parse_passwd(passwd: &str, name: &str) -> Option<SystemUser> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != name {
            return None;
        }
        let _password = fields.next()?;
        let uid = fields.next()?.parse().ok()?;
        let gid = fields.next()?.parse().ok()?;
        // Root under another name would be no better than root.
        (uid != 0).then(|| SystemUser {
            name: name.to_owned(),
            uid,
            gid,
        })
    })
}

/// A conninfo value, quoted: `'…'` with `\` and `'` escaped.
fn conninfo_value(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A postgresql.conf string value, quoted: `'…'` with `'` doubled and `\` escaped.
fn conf_value(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_pg_ctl() {
        assert_eq!(
            parse_version("pg_ctl (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)").as_deref(),
            Some("15.20")
        );
        assert_eq!(
            parse_version("pg_ctl (PostgreSQL) 17beta1").as_deref(),
            Some("17")
        );
        assert_eq!(parse_version("something else"), None);
    }

    #[test]
    fn the_system_user_comes_from_passwd_and_is_never_root() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      postgres:x:101:104:PostgreSQL administrator:/var/lib/postgresql:/bin/bash\n\
                      toor:x:0:0::/:/bin/sh\n";
        assert_eq!(
            parse_passwd(passwd, "postgres"),
            Some(SystemUser {
                name: "postgres".to_owned(),
                uid: 101,
                gid: 104
            })
        );
        assert_eq!(parse_passwd(passwd, "toor"), None);
        assert_eq!(parse_passwd(passwd, "nobody"), None);
    }

    /// The refusal says what to do.
    #[test]
    fn refusals_say_what_to_do() {
        let root = EmbeddedError::Root(root_refusal());
        for advice in ["ordinary user", "useradd --system", "--database-url"] {
            assert!(root.to_string().contains(advice), "{root}");
        }
    }

    #[test]
    fn quoting_survives_awkward_directory_names() {
        assert_eq!(conninfo_value("/tmp/a b'c\\d"), r"'/tmp/a b\'c\\d'");
        assert_eq!(conf_value("/tmp/a b'c\\d"), r"'/tmp/a b''c\\d'");
        let settings = ConnectionSettings::resolve_with(
            Some(&format!(
                "host={} port=5432 user=u",
                conninfo_value("/tmp/a b'c")
            )),
            |_| None,
        )
        .expect("parses");
        assert_eq!(settings.describe(), "u@/tmp/a b'c:5432/u");
    }
}
