//! PostgreSQL servers of the test run's own for the connection tests: one with `ssl = on` that
//! refuses connections without TLS (as a managed service does), and its twin without TLS (the
//! local server on 5432 cannot serve as that: Debian turns `ssl` on with its snake-oil
//! certificate). Certificates come from a throw-away CA made here with rcgen.
//!
//! Both start once per test process, on ports of their own, from one `initdb` (the twin is a
//! copy of the data directory), as the `postgres` OS user: the tests run as root, and PostgreSQL
//! refuses to. A missing `initdb` fails the tests; nothing skips.
//!
//! Cleaning up: Rust runs no destructor for a static, so a watchdog shell, started with the
//! servers and detached from every pipe, waits for the test process to end (however it ends),
//! then stops both servers and deletes their directory.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// The role whose login needs a client certificate (`hostssl ... cert`), named by its CN.
pub const CERT_USER: &str = "qlsched_cert_user";
/// The role whose login needs a password (`scram-sha-256`).
pub const PASSWORD_USER: &str = "qlsched_password_user";

pub struct TlsServers {
    /// Everything: both data directories, the certificates, an empty home directory.
    pub dir: PathBuf,
    /// The server with `ssl = on` (and `hostnossl ... reject`).
    pub tls_port: u16,
    /// The server with `ssl = off`.
    pub plain_port: u16,
    /// The CA that signed the server's and the client's certificates.
    pub ca: PathBuf,
    /// A CA that signed nothing here.
    pub other_ca: PathBuf,
    /// The client certificate and key for [`CERT_USER`].
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A home directory with no `.pgpass` and no `.postgresql/`, so that the machine's own
    /// files never change what a test sees.
    pub home: PathBuf,
    /// [`PASSWORD_USER`]'s password, made for this run.
    pub password: String,
}

static SERVERS: OnceLock<TlsServers> = OnceLock::new();

/// The servers, started on first use.
pub fn servers() -> &'static TlsServers {
    SERVERS.get_or_init(start)
}

pub fn pg_bin() -> PathBuf {
    let mut versions = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL server binaries in /usr/lib/postgresql (apt-get install postgresql)")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").exists())
        .collect::<Vec<_>>();
    versions.sort();
    versions
        .pop()
        .expect("initdb under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
}

/// The uid and gid of the `postgres` OS user, from /etc/passwd.
pub fn postgres_ids() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    passwd
        .lines()
        .find_map(|line| {
            let fields = line.split(':').collect::<Vec<_>>();
            (fields.first() == Some(&"postgres") && fields.len() > 3)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
                .flatten()
        })
        .expect("an OS user named postgres (the postgresql package makes it)")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// `program` as the postgres OS user, in `dir` (the test's own working directory may be one
/// that user cannot enter, such as a checkout under /root).
pub fn as_postgres(program: &Path, ids: (u32, u32), dir: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .current_dir(dir)
        .uid(ids.0)
        .gid(ids.1)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null());
    command
}

pub fn run(command: &mut Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

pub fn write(path: &Path, text: &str, mode: u32, owner: Option<(u32, u32)>) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("chown");
    }
}

fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().expect("CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key).expect("CA certificate");
    (cert.pem(), Issuer::new(params, key))
}

fn leaf(names: &[&str], common_name: &str, issuer: &Issuer<'_, KeyPair>) -> (String, String) {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(
        names
            .iter()
            .map(|name| (*name).to_owned())
            .collect::<Vec<_>>(),
    )
    .expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    let cert = params.signed_by(&key, issuer).expect("certificate");
    (cert.pem(), key.serialize_pem())
}

fn start() -> TlsServers {
    let bin = pg_bin();
    let ids = postgres_ids();
    let dir = std::env::temp_dir().join(format!("qlsched-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("server directory");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::os::unix::fs::chown(&dir, Some(ids.0), Some(ids.1)).expect("chown");
    let home = dir.join("home");
    std::fs::create_dir(&home).expect("home");

    let tls_data = dir.join("tls");
    let plain_data = dir.join("plain");
    run(
        as_postgres(&bin.join("initdb"), ids, &dir)
            .arg("-D")
            .arg(&tls_data)
            .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]),
        "initdb",
    );

    let (ca_pem, issuer) = ca("qlsched test CA");
    let (other_ca_pem, _) = ca("qlsched unrelated CA");
    let (server_pem, server_key) = leaf(&["localhost", "127.0.0.1"], "localhost", &issuer);
    let (client_pem, client_key) = leaf(&[], CERT_USER, &issuer);
    write(&tls_data.join("server.crt"), &server_pem, 0o644, Some(ids));
    write(&tls_data.join("server.key"), &server_key, 0o600, Some(ids));
    write(&tls_data.join("root.crt"), &ca_pem, 0o644, Some(ids));
    let servers = TlsServers {
        ca: dir.join("ca.crt"),
        other_ca: dir.join("other-ca.crt"),
        client_cert: dir.join("client.crt"),
        client_key: dir.join("client.key"),
        tls_port: free_port(),
        plain_port: free_port(),
        home,
        password: format!("pw-{}", uuid::Uuid::new_v4().simple()),
        dir: dir.clone(),
    };
    write(&servers.ca, &ca_pem, 0o644, None);
    write(&servers.other_ca, &other_ca_pem, 0o644, None);
    write(&servers.client_cert, &client_pem, 0o644, None);
    write(&servers.client_key, &client_key, 0o600, None);

    let common = format!(
        "\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\nfsync = off\n\
         max_connections = 40\nshared_buffers = 16MB\npassword_encryption = 'scram-sha-256'\n",
        dir.display()
    );
    let conf = std::fs::read_to_string(tls_data.join("postgresql.conf")).expect("conf");
    // Copied before the TLS settings go in: the twin differs in port, TLS and pg_hba alone.
    run(
        as_postgres(Path::new("/bin/cp"), ids, &dir)
            .arg("-a")
            .arg(&tls_data)
            .arg(&plain_data),
        "copy the data directory",
    );
    write(
        &tls_data.join("postgresql.conf"),
        &format!(
            "{conf}{common}port = {}\nssl = on\nssl_cert_file = 'server.crt'\n\
             ssl_key_file = 'server.key'\nssl_ca_file = 'root.crt'\n",
            servers.tls_port
        ),
        0o600,
        Some(ids),
    );
    // As a managed service: TLS or nothing over TCP; a client certificate for one role, a
    // password for another.
    write(
        &tls_data.join("pg_hba.conf"),
        &format!(
            "local all all trust\n\
             hostssl all {CERT_USER} 127.0.0.1/32 cert\n\
             hostssl all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n\
             hostssl all all 127.0.0.1/32 trust\n\
             hostnossl all all 127.0.0.1/32 reject\n"
        ),
        0o600,
        Some(ids),
    );
    write(
        &plain_data.join("postgresql.conf"),
        &format!("{conf}{common}port = {}\nssl = off\n", servers.plain_port),
        0o600,
        Some(ids),
    );
    write(
        &plain_data.join("pg_hba.conf"),
        "local all all trust\nhost all all 127.0.0.1/32 trust\n",
        0o600,
        Some(ids),
    );

    for data in [&tls_data, &plain_data] {
        run(
            as_postgres(&bin.join("pg_ctl"), ids, &dir)
                .arg("-D")
                .arg(data)
                .arg("-l")
                .arg(data.join("server.log"))
                .args(["-w", "-t", "60", "start"])
                .stdout(Stdio::null()),
            "pg_ctl start",
        );
    }
    watchdog(&dir, &[&tls_data, &plain_data]);

    for role in [
        format!("CREATE ROLE {CERT_USER} LOGIN"),
        format!(
            "CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{}'",
            servers.password
        ),
    ] {
        run(
            as_postgres(&bin.join("psql"), ids, &dir)
                .arg("-h")
                .arg(&dir)
                .args(["-p", &servers.tls_port.to_string(), "-U", "postgres"])
                .args(["-d", "postgres", "-v", "ON_ERROR_STOP=1", "-Atqc", &role]),
            "create a login role",
        );
    }
    servers
}

/// Stops the servers and deletes `dir` once this process has ended, pass, fail or abort.
fn watchdog(dir: &Path, data: &[&Path]) {
    let stops = data
        .iter()
        .map(|data| {
            format!(
                "pid=$(head -1 '{0}/postmaster.pid' 2>/dev/null) && kill -INT \"$pid\"; ",
                data.display()
            )
        })
        .collect::<String>();
    let script = format!(
        "while kill -0 {parent} 2>/dev/null; do sleep 1; done; {stops}\
         for _ in $(seq 1 30); do ls '{dir}'/*/postmaster.pid >/dev/null 2>&1 || break; sleep 1; done; \
         rm -rf '{dir}'",
        parent = std::process::id(),
        dir = dir.display()
    );
    start_watchdog(&script, "the test servers");
}

/// Runs `script` in a shell of its own process group, detached: a watchdog that outlives this
/// process and cleans up after it (`what` names what it stops, for the failure message).
#[expect(
    clippy::zombie_processes,
    reason = "the watchdog must outlive this process; it is never waited for"
)]
pub fn start_watchdog(script: &str, what: &str) {
    Command::new("/bin/sh")
        .args(["-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|error| panic!("start the watchdog that stops {what}: {error}"));
}

impl TlsServers {
    /// A key=value string for the TLS server as `user`, with `extra` settings.
    pub fn tls(&self, user: &str, extra: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={user} dbname=postgres {extra}",
            self.tls_port
        )
    }

    /// A key=value string for the server without TLS, with `extra` settings.
    pub fn plain(&self, extra: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres {extra}",
            self.plain_port
        )
    }

    /// A password file with `text` and `mode`, in a directory of its own.
    pub fn passfile(&self, text: &str, mode: u32) -> PathBuf {
        let path = self
            .dir
            .join(format!("pgpass-{}", uuid::Uuid::new_v4().simple()));
        write(&path, text, mode, None);
        path
    }
}
