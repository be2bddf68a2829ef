//! Test support: a fresh PostgreSQL database per test (a RAII value, dropped with the test),
//! created from a migrated template for speed, and helpers to drive the real binary.
//!
//! The server comes from QLSCHED_TEST_DATABASE_URL; unset, it is the local server as `postgres`
//! when that answers, else one throw-away server for the whole test run, started from the
//! installed binaries as `qlsched demo --embedded` starts its own. Rust tests have no global
//! teardown: that server is never dropped, and its watchdog stops and deletes it when this process
//! exits (docs/DECISIONS.md). A server that cannot be had fails the test; nothing here skips.

pub mod cluster;
pub mod pg_tls;
pub mod pgbouncer;
pub mod wire;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use qlsched::core::manifest::parse_manifest;
use qlsched::embedded::{BIN_ENV, EmbeddedServer};
use qlsched::store::migrate::{MIGRATIONS, migrate_up};
use qlsched::store::publish::{PublishReport, publish};
use qlsched::store::{ConnectionSettings, SchemaName, Store};

pub const DEFAULT_SERVER: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The server every test database lives on.
pub fn server() -> ConnectionSettings {
    ConnectionSettings::resolve(Some(&server_url()))
        .expect("QLSCHED_TEST_DATABASE_URL must be a valid connection string")
}

/// The server's URL or conninfo string, chosen once per test run.
pub fn server_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(choose_server).clone()
}

/// The throw-away server of this run, if it needed one. A static is never dropped: the server's
/// watchdog stops and deletes it once this process has exited, however it exits.
static EMBEDDED: OnceLock<EmbeddedServer> = OnceLock::new();

fn choose_server() -> String {
    use std::io::Write;
    if let Ok(url) = std::env::var("QLSCHED_TEST_DATABASE_URL") {
        return url;
    }
    let default = ConnectionSettings::resolve(Some(DEFAULT_SERVER)).expect("a valid default");
    // Called from sync and async tests alike: a runtime of its own, on a thread of its own.
    let answered = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(default.answers())
    })
    .join()
    .expect("the probe of the default server");
    let Err(reason) = answered else {
        return DEFAULT_SERVER.to_owned();
    };
    let bin_dir = std::env::var_os(BIN_ENV).map(PathBuf::from);
    let server = EmbeddedServer::start(bin_dir.as_deref()).unwrap_or_else(|error| {
        panic!(
            "QLSCHED_TEST_DATABASE_URL is unset, nothing answers at {reason}, and no throw-away \
             server either: {error}"
        )
    });
    // Past the harness's capture (which eprintln! would go to): whoever runs the tests sees it.
    let _ = writeln!(
        std::io::stderr(),
        "tests: nothing answers at {reason}; this run uses a throw-away PostgreSQL {} in {} \
         (started in {:.1} s)",
        server.binaries().version,
        server.dir().display(),
        server.start_time().as_secs_f64()
    );
    let url = server.conninfo();
    assert!(EMBEDDED.set(server).is_ok(), "one server per run");
    url
}

/// `url` (a URL or a conninfo string) with `user` instead of its user, for a test's login roles.
pub fn url_as(url: &str, user: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return format!("{url} user={user}");
    };
    let netloc_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let hosts = rest[..netloc_end]
        .rsplit_once('@')
        .map_or(&rest[..netloc_end], |(_, hosts)| hosts);
    format!("{scheme}://{user}@{hosts}{}", &rest[netloc_end..])
}

pub fn schema() -> SchemaName {
    SchemaName::default()
}

/// A database of its own for one test, dropped when the value is.
pub struct TestDb {
    pub name: String,
    pub settings: ConnectionSettings,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl TestDb {
    /// A fresh, migrated database.
    pub async fn new() -> TestDb {
        let template = ensure_template().await;
        Self::create(Some(&template)).await
    }

    /// A fresh database with nothing in it.
    pub async fn empty() -> TestDb {
        Self::create(None).await
    }

    async fn create(template: Option<&str>) -> TestDb {
        let name = format!(
            "qlsched_test_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            &uuid::Uuid::new_v4().simple().to_string()[..6]
        );
        qlsched::bench::scratch::recreate_database(&server(), &name, template)
            .await
            .unwrap_or_else(|e| {
                panic!("cannot create test database {name} (is PostgreSQL running?): {e}")
            });
        TestDb {
            settings: server().with_dbname(&name),
            name,
        }
    }

    /// A superuser connection with search_path set to the qlsched schema.
    pub async fn client(&self) -> tokio_postgres::Client {
        self.settings
            .connect(&schema(), "qlsched tests")
            .await
            .expect("connect to the test database")
    }

    /// A pool of its own, as a replica opens it (its sessions carry the claim's plan settings).
    pub async fn store(&self, application_name: &str) -> Store {
        Store::open_replica(&self.settings, &schema(), application_name, 4)
            .await
            .expect("open a pool")
    }

    /// The URL of this database, for `qlsched -D`.
    pub fn url(&self) -> String {
        let server = server_url();
        match server.rfind('/') {
            Some(slash) if server.starts_with("postgres") => {
                format!("{}/{}", &server[..slash], self.name)
            }
            _ => format!("{server} dbname={}", self.name),
        }
    }

    /// Publishes a manifest given as JSON.
    pub async fn publish(&self, manifest: &serde_json::Value) -> PublishReport {
        let manifest = parse_manifest(&manifest.to_string()).expect("valid manifest");
        let mut client = self.client().await;
        publish(&mut client, &SchemaName::default(), &manifest, false)
            .await
            .expect("publish")
    }

    /// One integer from a query.
    pub async fn count(&self, sql: &str) -> i64 {
        self.client()
            .await
            .query_one(sql, &[])
            .await
            .expect(sql)
            .get(0)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop runs outside any runtime the test may have had: use a small one of our own.
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map(|runtime| {
                    runtime.block_on(qlsched::bench::scratch::drop_database(&server(), &name))
                })
        })
        .join();
        if !matches!(dropped, Ok(Ok(Ok(())))) {
            eprintln!("warning: could not drop test database {}", self.name);
        }
    }
}

/// The migrated template, named after the migrations' checksums and floors (which the ledger
/// records) so a changed migration gets a new one. Built once per server under an advisory lock (tests run in many processes); templates
/// of other migrations are dropped a day after they were made. It stays between runs as a cache.
async fn ensure_template() -> String {
    let digest: String = qlsched::core::manifest::sha256_hex(
        MIGRATIONS
            .iter()
            .map(|m| format!("{}:{}", m.checksum(), m.upgrade_floor))
            .collect::<Vec<_>>()
            .join(",")
            .as_bytes(),
    );
    let template = format!("qlsched_template_{}", &digest[..12]);
    let admin = server()
        .connect(&schema(), "qlsched tests")
        .await
        .expect("connect to the test server");
    admin
        .execute(
            "SELECT pg_advisory_lock(hashtext('qlsched-test-template'))",
            &[],
        )
        .await
        .expect("lock");
    let ready: Option<bool> = admin
        .query_opt(
            "SELECT datistemplate FROM pg_database WHERE datname = $1",
            &[&template],
        )
        .await
        .expect("read pg_database")
        .map(|row| row.get(0));
    if ready != Some(true) {
        // This template if a crashed run left it half-made, and templates of other migrations
        // made more than a day ago: a checkout of another branch testing against the same server
        // right now keeps its own.
        for row in admin
            .query(
                "SELECT d.datname FROM pg_database d
                 LEFT JOIN pg_shdescription c
                   ON c.objoid = d.oid AND c.classoid = 'pg_database'::regclass
                 WHERE d.datname LIKE 'qlsched\\_template\\_%'
                   AND (d.datname = $1
                        OR coalesce(substring(c.description FROM 'made at ([0-9]+)')::bigint, 0)
                           < extract(epoch FROM now()) - 86400)",
                &[&template],
            )
            .await
            .expect("list templates")
        {
            let stale: String = row.get(0);
            admin
                .batch_execute(&format!(
                    "ALTER DATABASE \"{stale}\" WITH IS_TEMPLATE false"
                ))
                .await
                .expect("unmark");
            admin
                .batch_execute(&format!("DROP DATABASE \"{stale}\" WITH (FORCE)"))
                .await
                .expect("drop stale");
        }
        admin
            .batch_execute(&format!("CREATE DATABASE \"{template}\""))
            .await
            .expect("create template");
        let mut client = server()
            .with_dbname(&template)
            .connect(&schema(), "qlsched tests")
            .await
            .expect("connect");
        migrate_up(&mut client, &schema())
            .await
            .expect("migrate the template");
        drop(client);
        admin
            .batch_execute(&format!(
                "ALTER DATABASE \"{template}\" WITH IS_TEMPLATE true;
                 COMMENT ON DATABASE \"{template}\" IS 'qlsched test template, made at {}'",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
            ))
            .await
            .expect("mark");
    }
    admin
        .execute(
            "SELECT pg_advisory_unlock(hashtext('qlsched-test-template'))",
            &[],
        )
        .await
        .expect("unlock");
    template
}

/// The qlsched binary built for these tests.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_qlsched"))
}

/// Runs `qlsched ARGS` against `db` with no terminal and no inherited connection variables;
/// `stdin` is fed if given.
pub fn qlsched(db: Option<&TestDb>, args: &[&str], stdin: Option<&str>) -> Output {
    let url = db.map(TestDb::url);
    qlsched_at(url.as_deref(), &[], args, stdin)
}

/// [`qlsched`] with `-D url` (when given) and the environment variables `env` set.
pub fn qlsched_at(
    url: Option<&str>,
    env: &[(&str, &str)],
    args: &[&str],
    stdin: Option<&str>,
) -> Output {
    let mut command = Command::new(bin());
    if let Some(url) = url {
        command.arg("-D").arg(url);
    }
    command
        .args(args)
        .env_remove("QLSCHED_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("QLSCHED_LOG")
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn qlsched");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("wait for qlsched")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn code(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

/// Sleeps in database-time terms: long enough that `ms` of wall time passed (the server shares
/// this machine's clock, but tests never compare it with a lease; they wait it out).
/// Asserts that a run of the binary was refused with `expected` and a message holding `needle`.
pub fn assert_refused(output: &Output, expected: i32, needle: &str, context: &str) {
    assert_eq!(code(output), expected, "{context}: {}", stderr(output));
    assert!(
        stderr(output).contains(needle),
        "{context}: {}",
        stderr(output)
    );
}

/// What the server holds under database `name`: `None` without one, else its comment.
pub async fn database_comment(name: &str) -> Option<Option<String>> {
    server()
        .connect(&schema(), "qlsched tests")
        .await
        .expect("connect to the server")
        .query_opt(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1",
            &[&name],
        )
        .await
        .expect("look the database up")
        .map(|row| row.get(0))
}

pub async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// Waits for a fact, not for a time: polls `probe` every 20 ms until it is true, and fails the
/// test naming `what` if it is still false after `limit`. On a loaded machine the fact arrives
/// late and the test still passes; on a quiet one the test does not sleep longer than it must.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !probe().await {
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        sleep_ms(20).await;
    }
}

/// [`eventually`] for a count: waits until `sql` (one bigint) reaches at least `at_least`.
pub async fn eventually_count(db: &TestDb, limit: Duration, sql: &str, at_least: i64) {
    eventually(limit, sql, || async { db.count(sql).await >= at_least }).await;
}

/// Waits until every claim `owner` holds is past its lease in database time (the fact a
/// takeover waits for), within 30 s.
pub async fn until_expired(db: &TestDb, owner: &str) {
    let sql = format!(
        "SELECT count(*) FROM trigger_schedules
         WHERE claim_owner = '{owner}' AND claim_expires_at_ms > now_ms()"
    );
    eventually(Duration::from_secs(30), &sql, || async {
        db.count(&sql).await == 0
    })
    .await;
}

/// Waits until at least `rows` schedule rows are due in database time (their cursor has come),
/// within 30 s.
pub async fn until_due(db: &TestDb, rows: i64) {
    eventually_count(
        db,
        Duration::from_secs(30),
        "SELECT count(*) FROM trigger_schedules WHERE next_fire_at_ms <= now_ms()",
        rows,
    )
    .await;
}

/// A manifest with one project `p` holding one task `t` and the given triggers.
pub fn manifest(triggers: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "projects": [{
            "id": "p",
            "tasks": [{ "id": "t", "execution": { "kind": "remote_worker", "image": "x" } }],
            "triggers": triggers
        }]
    })
}

/// Every table of docs/DESIGN.md §3.1 but the migration ledger.
pub const SCHEDULER_TABLES: [&str; 9] = [
    "projects",
    "execution_revisions",
    "tasks",
    "triggers",
    "trigger_schedules",
    "runs",
    "attempts",
    "run_events",
    "schedule_audit",
];

/// A `qlsched run` child process, killed and reaped when dropped, also when an assertion fails
/// before the test stops it: no replica outlives its test (and keeps claiming in a database about
/// to be dropped). Its log is drained as it is written, by a thread of its own, so that a replica
/// that logs much never blocks on a full pipe (which would stall its rounds and look like a fault
/// of the code under test). Derefs to its [`std::process::Child`].
pub struct ReplicaProcess {
    child: Option<std::process::Child>,
    log: Option<std::thread::JoinHandle<Vec<u8>>>,
}

impl ReplicaProcess {
    fn new(mut child: std::process::Child) -> Self {
        let log = child.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut log = Vec::new();
                let _ = std::io::Read::read_to_end(&mut pipe, &mut log);
                log
            })
        });
        ReplicaProcess {
            child: Some(child),
            log,
        }
    }

    /// Stops it with SIGTERM and asserts a clean exit; returns its log.
    pub fn stop(self) -> String {
        String::from_utf8_lossy(&stop_cleanly(self).stderr).into_owned()
    }

    /// Kills it with SIGKILL, as a crash would, and reaps it.
    pub fn kill(mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, std::process::Child::id)
    }
}

/// A child process the tests stop and reap: its exit status and its log.
pub trait Reap {
    fn id(&self) -> u32;
    fn reap(self) -> Output;
}

impl Reap for std::process::Child {
    fn id(&self) -> u32 {
        std::process::Child::id(self)
    }

    fn reap(self) -> Output {
        self.wait_with_output().expect("wait for qlsched")
    }
}

impl Reap for ReplicaProcess {
    fn id(&self) -> u32 {
        self.pid()
    }

    /// Waits for it to exit (without signalling it), then for the rest of its log.
    fn reap(mut self) -> Output {
        let mut child = self.child.take().expect("a replica process is reaped once");
        let status = child.wait().expect("wait for qlsched");
        let stderr = self
            .log
            .take()
            .map(|log| log.join().expect("the log's reader"))
            .unwrap_or_default();
        Output {
            status,
            stdout: Vec::new(),
            stderr,
        }
    }
}

impl std::ops::Deref for ReplicaProcess {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        self.child
            .as_ref()
            .expect("a replica process reaped is not used")
    }
}

impl std::ops::DerefMut for ReplicaProcess {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.child
            .as_mut()
            .expect("a replica process reaped is not used")
    }
}

impl Drop for ReplicaProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            // Its log, to see why the test failed (the harness shows it only then).
            if let Some(log) = self.log.take().and_then(|log| log.join().ok()) {
                eprintln!("replica killed: {}", String::from_utf8_lossy(&log));
            }
        }
    }
}

/// Starts `qlsched -D URL run ARGS` as a child process, its log drained.
pub fn spawn_run(url: &str, args: &[&str]) -> ReplicaProcess {
    let child = Command::new(bin())
        .args(["-D", url, "run"])
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn qlsched run");
    ReplicaProcess::new(child)
}

/// Sends SIGTERM and waits for the child to exit.
pub fn terminate(child: impl Reap) -> Output {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill -TERM");
    child.reap()
}

/// Sends SIGTERM, waits, and asserts the replica stopped cleanly (exit 0), showing its log if
/// not; returns what it wrote.
pub fn stop_cleanly(child: impl Reap) -> Output {
    let output = terminate(child);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A digest of every scheduler table's rows: equal before and after means nothing was written.
pub async fn fingerprint(db: &TestDb) -> String {
    let client = db.client().await;
    let mut parts = Vec::new();
    for table in SCHEDULER_TABLES {
        let row = client
            .query_one(&format!("SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM {table} t"), &[])
            .await
            .expect("fingerprint");
        parts.push(format!("{table}:{}", row.get::<_, String>(0)));
    }
    parts.join(" ")
}

/// Claims up to `budget` due rows, as a replica's round would.
pub async fn claim(
    store: &Store,
    owner: &str,
    budget: i64,
    lease_ms: i64,
) -> Vec<qlsched::store::ClaimedRow> {
    let client = store.client().await.expect("pooled connection");
    qlsched::store::claim::claim_for_round(
        &client,
        store.sender(),
        owner,
        budget,
        lease_ms,
        None,
        &mut 0,
    )
    .await
    .expect("claim sent")
    .claim
    .expect("claim")
    .rows
}

/// The decision the coordinator would take on a claimed row.
pub fn decide_row(row: &qlsched::store::ClaimedRow) -> qlsched::core::Decision {
    let d = &row.definition;
    let schedule =
        qlsched::core::CronSchedule::parse(&d.cron_expr, &d.time_zone).expect("stored cron");
    qlsched::core::decide(&qlsched::core::DecisionInput {
        schedule: &schedule,
        policy: d.misfire_policy,
        grace_ms: d.misfire_grace_ms,
        cursor_ms: row.cursor_ms,
        now_ms: row.claimed_at_ms,
    })
    .expect("decide")
}

/// The admission the coordinator would submit for a claimed row.
pub fn admission(row: &qlsched::store::ClaimedRow) -> qlsched::store::Admission<'_> {
    let decision = decide_row(row);
    let run = qlsched::coordinator::run_identity(row, &decision);
    qlsched::store::Admission { row, decision, run }
}

/// Admits claimed rows as the coordinator would; one outcome per row.
pub async fn admit(
    store: &Store,
    admissions: &[qlsched::store::Admission<'_>],
) -> Result<Vec<qlsched::store::AdmissionOutcome>, qlsched::store::StoreError> {
    let client = store.client().await.expect("pooled connection");
    let mut stats = qlsched::store::AdmitStats::default();
    qlsched::store::admit::admit(&client, store.sender(), admissions, &mut stats).await
}

/// Asserts the scheduler's promises hold in `db`, and returns the counts: one run per occurrence,
/// one attempt and two events per run, no claim half-written, and every occurrence of the last
/// hour accounted for (a run, or inside a misfire record).
pub async fn assert_invariants(db: &TestDb) -> qlsched::store::invariants::InvariantCounts {
    assert_invariants_on(&db.client().await).await
}

/// [`assert_invariants`] on any connection to a qlsched database (a server the test owns).
pub async fn assert_invariants_on(
    client: &tokio_postgres::Client,
) -> qlsched::store::invariants::InvariantCounts {
    let counts = qlsched::store::invariants::invariant_counts(
        client,
        qlsched::store::invariants::WHOLE_HISTORY_MS,
    )
    .await
    .expect("invariants");
    assert!(
        counts.violations().is_empty(),
        "invariants violated: {:?}",
        counts.violations()
    );
    let accounting = qlsched::store::accounting::occurrence_accounting(client, 3_600_000)
        .await
        .expect("occurrence accounting");
    assert!(
        accounting.violations().is_empty(),
        "occurrences not accounted for: {:?}; gaps {:?}; duplicates {:?}",
        accounting.violations(),
        accounting.gaps,
        accounting.duplicates
    );
    counts
}

/// A login user that is a member of `group`, dropped with the value.
pub struct LoginRole {
    pub name: String,
}

impl LoginRole {
    pub async fn create(db: &TestDb, group: &str) -> LoginRole {
        let name = format!(
            "{}_login_{}",
            group,
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        db.client()
            .await
            .batch_execute(&format!("CREATE ROLE {name} LOGIN IN ROLE {group}"))
            .await
            .expect("create role");
        LoginRole { name }
    }

    /// The URL of `db` as this user, on the test server.
    pub fn url(&self, db: &TestDb) -> String {
        url_as(&db.url(), &self.name)
    }

    pub async fn connect(&self, db: &TestDb) -> tokio_postgres::Client {
        qlsched::store::ConnectionSettings::resolve(Some(&self.url(db)))
            .expect("url")
            .connect(&schema(), "qlsched tests")
            .await
            .expect("connect as login role")
    }
}

/// Roles are the server's, not the test database's: dropped with the value, pass or fail.
impl Drop for LoginRole {
    fn drop(&mut self) {
        let statement = format!("DROP ROLE IF EXISTS {}", self.name);
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map(|runtime| {
                    runtime.block_on(async {
                        let client = server().connect(&schema(), "qlsched tests").await?;
                        client.batch_execute(&statement).await?;
                        Ok::<_, qlsched::store::StoreError>(())
                    })
                })
        })
        .join();
        if !matches!(dropped, Ok(Ok(Ok(())))) {
            eprintln!("warning: could not drop login role {}", self.name);
        }
    }
}

/// A manifest whose project `p` has one trigger per id, each firing every second.
pub fn every_second(ids: &[&str]) -> serde_json::Value {
    manifest(serde_json::Value::Array(
        ids.iter()
            .map(|id| serde_json::json!({ "id": id, "task": "t", "cron": "* * * * * *" }))
            .collect(),
    ))
}

/// The prompt of the shell a [`Tmux`] session runs.
pub const PROMPT: &str = "qlsched-test$";

/// A tmux server of our own (its own socket file), killed and its socket removed when dropped: a
/// real terminal to drive the binary in as a person would.
pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// A session running a plain bash at `width` × `height`; `name` keeps concurrent tests'
    /// servers apart.
    pub fn start(name: &str, width: u16, height: u16) -> Tmux {
        let tmux = Tmux {
            socket: std::env::temp_dir()
                .join(format!("qlsched-tmux-{name}-{}", std::process::id())),
        };
        let shell = format!("env PS1='{PROMPT} ' bash --norc --noprofile");
        let started = tmux
            .command()
            .args(["new-session", "-d", "-s", "top", "-x", &width.to_string()])
            .args(["-y", &height.to_string(), &shell])
            .status()
            .expect("tmux is installed (.ci/run installs it)");
        assert!(started.success());
        tmux
    }

    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command.arg("-S").arg(&self.socket);
        command
    }

    pub fn send(&self, keys: &[&str]) {
        let sent = self
            .command()
            .args(["send-keys", "-t", "top"])
            .args(keys)
            .status()
            .expect("send-keys");
        assert!(sent.success());
    }

    pub fn screen(&self) -> String {
        let output = self
            .command()
            .args(["capture-pane", "-p", "-t", "top"])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The screen once `ready` holds, or a failure showing the last screen.
    pub fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").status();
        let _ = std::fs::remove_file(&self.socket);
    }
}
