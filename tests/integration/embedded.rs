//! The throw-away server: `qlsched demo --embedded` through the built binary ends with its
//! summary and leaves no process, directory or socket behind, whether it ends by itself, by
//! SIGTERM or SIGINT, by SIGKILL (its watchdog), or by a panic unwinding past the server; plain
//! `demo` falls back to it when nothing was given and nothing answers at the default; and
//! what it cannot do it refuses with a message and a documented status.
//!
//! The default is made unreachable for one child only, never by stopping the machine's server
//! (other tests use it): the child runs in a mount namespace of its own (`unshare`) where the
//! default socket directory is an empty tmpfs. As root that is `unshare --mount`; otherwise a user
//! namespace maps this user to root for the mount, and a second one maps it back, so the child
//! runs as who we are.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use qlsched::embedded::EmbeddedServer;

use crate::util::bin;

/// libpq's default socket directory, as qlsched resolves it.
fn default_socket_dir() -> &'static str {
    if Path::new("/var/run/postgresql").is_dir() {
        "/var/run/postgresql"
    } else {
        "/tmp"
    }
}

/// The usual install locations the binaries are searched in, those that exist here.
fn install_locations() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = [
        "/usr/lib/postgresql",
        "/usr/local/pgsql",
        "/opt/homebrew/opt",
        "/usr/local/opt",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|dir| dir.is_dir())
    .collect();
    found.extend(
        std::fs::read_dir("/usr")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("pgsql-"))
            .map(|e| e.path()),
    );
    found
}

/// A mount in the child's own namespace.
enum Mount<'a> {
    /// An empty tmpfs over a directory.
    Hide(&'a str),
    /// A file bound over another.
    Replace { file: &'a str, with: &'a Path },
}

/// `qlsched ARGS` with no connection setting in its environment, stdout and stderr piped (as
/// `| cat` would), optionally in a mount namespace of its own with `mounts` and PATH set to
/// `path`. `as_root` keeps the child root in its namespace (to see a refusal meant for root).
fn qlsched_command(args: &[&str], mounts: &[Mount], path: Option<&Path>, as_root: bool) -> Command {
    let mut command = if mounts.is_empty() {
        Command::new(bin())
    } else {
        fn quoted(text: &str) -> String {
            format!("'{}'", text.replace('\'', r"'\''"))
        }
        let mut script = String::from("set -e\n");
        for mount in mounts {
            match mount {
                Mount::Hide(dir) => {
                    script.push_str(&format!("mount -t tmpfs qlsched-test {}\n", quoted(dir)));
                }
                Mount::Replace { file, with } => script.push_str(&format!(
                    "mount --bind {} {}\n",
                    quoted(&with.to_string_lossy()),
                    quoted(file)
                )),
            }
        }
        // Set last, by env, so that unshare and sh are still found on the way.
        let env = path.map_or_else(String::new, |path| {
            format!("env PATH={} ", quoted(&path.to_string_lossy()))
        });
        let me = std::fs::metadata("/proc/self").expect("/proc/self");
        let root = me.uid() == 0;
        let mut command = Command::new("unshare");
        if root {
            command.args(["--mount", "--propagation", "private"]);
            script.push_str(&format!("exec {env}\"$@\"\n"));
        } else {
            command.args(["--map-root-user", "--mount", "--propagation", "private"]);
            if as_root {
                script.push_str(&format!("exec {env}\"$@\"\n"));
            } else {
                script.push_str(&format!(
                    "exec unshare --map-user={} --map-group={} {env}\"$@\"\n",
                    me.uid(),
                    me.gid()
                ));
            }
        }
        command.args(["sh", "-c", &script, "sh"]).arg(bin());
        command
    };
    command
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("QLSCHED_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("QLSCHED_LOG")
        .env_remove("QLSCHED_POSTGRES_BIN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PG") {
            command.env_remove(key);
        }
    }
    command
}

/// A demo running as a child process, its stderr read line by line as it comes.
struct Demo {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Vec<String>,
    stdout: std::thread::JoinHandle<String>,
}

/// What the demo's throw-away server was, read while it ran.
struct Server {
    dir: PathBuf,
    postmaster: u32,
}

impl Demo {
    fn spawn(mut command: Command) -> Demo {
        let mut child = command.spawn().expect("spawn qlsched demo");
        let stderr = child.stderr.take().expect("stderr");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stdout = child.stdout.take().expect("stdout");
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        Demo {
            child,
            lines,
            stderr: Vec::new(),
            stdout,
        }
    }

    /// Waits for a stderr line holding `needle` and returns it.
    fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.stderr.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!(
                        "no line with {needle:?}; stderr so far:\n{}",
                        self.stderr.join("\n")
                    );
                }
            }
        }
    }

    /// The server's directory, from the start line, and its postmaster, once it is ready. The
    /// server says in its pid file what it listens on: nothing but the socket.
    fn server(&mut self) -> Server {
        let started = self.wait_for("started a throw-away PostgreSQL");
        let dir = started
            .split_once(", in ")
            .and_then(|(_, rest)| rest.split_once(", listening"))
            .map(|(dir, _)| PathBuf::from(dir))
            .unwrap_or_else(|| panic!("no directory in {started:?}"));
        self.wait_for("watch with");
        let pid_file = std::fs::read_to_string(dir.join("data/postmaster.pid"))
            .expect("the running server's pid file");
        let lines: Vec<&str> = pid_file.lines().collect();
        assert_eq!(
            lines.get(4).copied(),
            Some(dir.to_str().expect("utf-8")),
            "the socket is in the server's own directory: {pid_file}"
        );
        assert_eq!(
            lines.get(5).map(|l| l.trim()),
            Some(""),
            "no TCP address is listened on: {pid_file}"
        );
        Server {
            dir,
            postmaster: lines[0].trim().parse().expect("postmaster pid"),
        }
    }

    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
    }

    /// Waits for the exit; the whole of stderr and stdout.
    fn finish(mut self) -> (ExitStatus, String, String) {
        let status = self.child.wait().expect("wait for qlsched demo");
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.stderr.push(line);
        }
        let stdout = self.stdout.join().expect("stdout reader");
        (status, self.stderr.join("\n"), stdout)
    }
}

/// Nothing of the server is left: no directory, no process with it on its command line (the
/// postmaster's is `postgres -D DIR/data`; an exited one awaiting its reaper has none), the
/// postmaster gone, and no socket under the directory.
fn assert_nothing_left(server: &Server, context: &str) {
    let dir = server.dir.to_string_lossy().into_owned();
    assert!(!server.dir.exists(), "{context}: {dir} is still there");
    let mut holders = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && String::from_utf8_lossy(&cmdline).contains(&dir)
        {
            holders.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    assert!(
        holders.is_empty(),
        "{context}: processes {holders:?} name {dir}"
    );
    let state =
        std::fs::read_to_string(format!("/proc/{}/status", server.postmaster)).unwrap_or_default();
    let postmaster_alive = state
        .lines()
        .find(|l| l.starts_with("State:"))
        .is_some_and(|l| !l.contains("Z (zombie)"));
    // Only if the pid was not reused meanwhile: the command-line check above holds either way.
    assert!(
        !postmaster_alive || !state.contains("postgres"),
        "{context}: postmaster {} still runs",
        server.postmaster
    );
    let sockets = std::fs::read_to_string("/proc/net/unix").expect("/proc/net/unix");
    assert!(
        !sockets.contains(&dir),
        "{context}: a socket under {dir} is still open"
    );
}

fn assert_summary(stderr: &str, context: &str) {
    let last = stderr.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("qlsched demo: ")
            && last.contains(
                "duplicates 0, runs without one attempt 0, without two events 0, claims left 0"
            ),
        "{context}: stderr does not end with the summary:\n{stderr}"
    );
}

/// The README's first look on a machine with PostgreSQL installed: `qlsched demo --embedded
/// --duration 20s | cat`, its usual output, exit 0, and nothing left behind.
#[test]
fn the_embedded_demo_ends_with_its_summary_and_leaves_nothing_behind() {
    let mut demo = Demo::spawn(qlsched_command(
        &["demo", "--embedded", "--duration", "20s"],
        &[],
        None,
        false,
    ));
    let server = demo.server();
    let (status, stderr, stdout) = demo.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_summary(&stderr, "--duration 20s");
    assert!(
        !stderr.contains("is kept for a look"),
        "a throw-away server keeps nothing: {stderr}"
    );
    assert!(
        stdout.starts_with("time (UTC)    trigger"),
        "the admissions table: {stdout}"
    );
    let heartbeats = stdout
        .lines()
        .filter(|l| l.contains("acme/heartbeat"))
        .count();
    // Every 2 s for 20 s; a loaded machine may lose a few to the first rounds.
    assert!(heartbeats >= 3, "heartbeat fires every 2 s: {stdout}");
    if std::fs::metadata("/proc/self").expect("/proc/self").uid() == 0 {
        assert!(stderr.contains(" as user postgres, "), "{stderr}");
    }
    assert_nothing_left(&server, "--duration 20s");
}

/// SIGTERM (a supervisor) and SIGINT (Ctrl-C) end the embedded demo with its summary, exit 0,
/// and the server stopped and deleted.
#[test]
fn sigterm_and_sigint_during_the_embedded_demo_clean_up() {
    for signal in ["TERM", "INT"] {
        let mut demo = Demo::spawn(qlsched_command(&["demo", "--embedded"], &[], None, false));
        let server = demo.server();
        std::thread::sleep(Duration::from_millis(1500));
        demo.signal(signal);
        let (status, stderr, _) = demo.finish();
        assert_eq!(status.code(), Some(0), "SIG{signal}: {stderr}");
        assert_summary(&stderr, &format!("SIG{signal}"));
        assert_nothing_left(&server, &format!("SIG{signal}"));
    }
}

/// A signal while the server is still being made (initdb runs for about a second) lets the start
/// finish and then undoes it: exit 0, and nothing left.
#[test]
fn a_signal_while_the_server_starts_undoes_the_start() {
    let demo = Demo::spawn(qlsched_command(&["demo", "--embedded"], &[], None, false));
    // The directory comes first; its name carries the demo's pid.
    let prefix = format!("qlsched-pg-{}-", demo.child.id());
    let deadline = Instant::now() + Duration::from_secs(60);
    let dir = loop {
        let found = std::fs::read_dir(std::env::temp_dir())
            .expect("temp dir")
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix));
        if let Some(entry) = found {
            break entry.path();
        }
        assert!(Instant::now() < deadline, "no {prefix}* appeared");
        std::thread::sleep(Duration::from_millis(10));
    };
    demo.signal("TERM");
    let (status, stderr, _) = demo.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("stopped by SIGTERM") || stderr.contains("claims left 0"),
        "{stderr}"
    );
    // No postmaster to look up by pid here: the command-line and socket checks cover it.
    assert_nothing_left(
        &Server {
            dir,
            postmaster: u32::MAX,
        },
        "SIGTERM while starting",
    );
}

/// SIGKILL leaves the process no chance to clean up: the watchdog, reading a pipe only the
/// demo wrote to, stops the server and deletes its directory.
#[test]
fn after_sigkill_the_watchdog_stops_and_deletes_the_server() {
    let mut demo = Demo::spawn(qlsched_command(&["demo", "--embedded"], &[], None, false));
    let server = demo.server();
    demo.signal("KILL");
    let (status, stderr, _) = demo.finish();
    assert_eq!(status.code(), None, "killed: {stderr}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.dir.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    // The watchdog exits right after removing the directory.
    std::thread::sleep(Duration::from_millis(300));
    assert_nothing_left(&server, "SIGKILL");
}

/// A panic that unwinds past the server (as one in the demo unwinds past the demo's) stops and
/// deletes it on the way.
#[test]
fn a_panic_unwinding_past_the_server_stops_and_deletes_it() {
    let (send, receive) = mpsc::channel();
    let panicked = std::thread::spawn(move || {
        let server = EmbeddedServer::start(None).expect("a throw-away server");
        let pid = std::fs::read_to_string(server.dir().join("data/postmaster.pid"))
            .expect("pid file")
            .lines()
            .next()
            .and_then(|l| l.trim().parse::<u32>().ok())
            .expect("postmaster pid");
        send.send(Server {
            dir: server.dir().to_owned(),
            postmaster: pid,
        })
        .expect("send");
        panic!("a panic in the middle of a demo");
    })
    .join();
    assert!(panicked.is_err(), "the thread panicked");
    let server = receive.recv().expect("the server started");
    assert_nothing_left(&server, "panic");
}

/// No connection setting and nothing at libpq's default socket: `qlsched demo` says so on
/// stderr, runs on a throw-away server instead, and removes it.
#[test]
fn with_nothing_given_and_nothing_at_the_default_the_demo_falls_back() {
    let mut demo = Demo::spawn(qlsched_command(
        &["demo", "--duration", "3s"],
        &[Mount::Hide(default_socket_dir())],
        None,
        false,
    ));
    let fallback = demo.wait_for("nothing answers at");
    assert!(
        fallback
            .contains("no connection setting was given; starting a throw-away PostgreSQL instead"),
        "{fallback}"
    );
    let server = demo.server();
    let (status, stderr, stdout) = demo.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_summary(&stderr, "fallback");
    assert!(stdout.starts_with("time (UTC)"), "{stdout}");
    assert_nothing_left(&server, "fallback");
}

/// Nothing to start a server with: exit 78 and a message naming where it looked and what to do;
/// as the fallback of a plain `demo`, exit 69 (the database is unavailable) with both reasons.
/// A directory named by --postgres-bin without the programs is 78 too; --embedded with -D is a
/// usage error. None of it panics.
#[test]
fn without_postgresql_installed_the_refusal_says_where_it_looked() {
    let empty = std::env::temp_dir().join(format!("qlsched-no-bin-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("an empty directory");
    let locations = install_locations();
    let mut mounts: Vec<Mount> = locations
        .iter()
        .map(|dir| Mount::Hide(dir.to_str().expect("utf-8")))
        .collect();
    let output = qlsched_command(&["demo", "--embedded"], &mounts, Some(&empty), false)
        .output()
        .expect("run qlsched");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    let looked = format!("looked in PATH ({})", empty.display());
    for needle in [
        looked.as_str(),
        "/usr/lib/postgresql/<major>/bin",
        "Install PostgreSQL 15 or newer",
        "--postgres-bin",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    mounts.push(Mount::Hide(default_socket_dir()));
    let output = qlsched_command(&["demo"], &mounts, Some(&empty), false)
        .output()
        .expect("run qlsched");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("qlsched: database unavailable: "),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "and no throw-away server either: cannot start a throw-away PostgreSQL: no initdb"
        ),
        "{stderr}"
    );
    let _ = std::fs::remove_dir(&empty);

    let output = qlsched_command(
        &["demo", "--embedded", "--postgres-bin", "/nonexistent/bin"],
        &[],
        None,
        false,
    )
    .output()
    .expect("run qlsched");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("no initdb and pg_ctl in /nonexistent/bin (named by --postgres-bin"),
        "{stderr}"
    );

    let output = qlsched_command(
        &["-D", "host=/nowhere", "demo", "--embedded"],
        &[],
        None,
        false,
    )
    .output()
    .expect("run qlsched");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("drop --database-url"), "{stderr}");
}

/// As root with no unprivileged user to run PostgreSQL as, the demo refuses (78) and says what to
/// do, leaving nothing behind. The child is root in a namespace whose /etc/passwd has no
/// `postgres`.
#[test]
fn as_root_without_a_postgres_user_the_demo_refuses_and_says_what_to_do() {
    let passwd = std::env::temp_dir().join(format!("qlsched-passwd-{}", std::process::id()));
    let without: String = std::fs::read_to_string("/etc/passwd")
        .expect("/etc/passwd")
        .lines()
        .filter(|line| !line.starts_with("postgres:"))
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(&passwd, without).expect("write a passwd");
    let child = qlsched_command(
        &["demo", "--embedded"],
        &[Mount::Replace {
            file: "/etc/passwd",
            with: &passwd,
        }],
        None,
        true,
    )
    .spawn()
    .expect("run qlsched");
    // unshare and sh exec what follows them: the pid is qlsched's, and in its directory's name.
    let pid = child.id();
    let output = child.wait_with_output().expect("wait for qlsched");
    let _ = std::fs::remove_file(&passwd);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    for needle in [
        "qlsched runs as root",
        "no system user `postgres`",
        "Run qlsched as an ordinary user",
        "useradd --system",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    let prefix = format!("qlsched-pg-{pid}-");
    let left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .expect("temp dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
