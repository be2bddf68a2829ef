//! Migrations, the ledger, the roles and their exact grants (docs/DESIGN.md §3), and the readiness
//! `run` demands.

use crate::util::{LoginRole, TestDb, assert_refused, code, qlsched, schema, stderr, stdout};
use qlsched::store::migrate::{MIGRATIONS, latest_version, migrate_up, verify};

#[tokio::test]
async fn migrate_creates_schema_roles_and_exact_grants_then_is_a_no_op() {
    let db = TestDb::empty().await;
    let first = qlsched(Some(&db), &["migrate", "-o", "json"], None);
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    let report: serde_json::Value = serde_json::from_str(&stdout(&first)).expect("json");
    assert_eq!(
        report["applied"].as_array().map(Vec::len),
        Some(MIGRATIONS.len())
    );
    assert_eq!(report["version"], latest_version());
    // Roles belong to the server: whichever this run did not create, it says it found.
    let mut roles: Vec<String> = ["roles_created", "roles_reused"]
        .iter()
        .flat_map(|key| report[key].as_array().cloned().unwrap_or_default())
        .filter_map(|role| role.as_str().map(str::to_owned))
        .collect();
    roles.sort();
    assert_eq!(
        roles,
        [
            "qlsched_admin",
            "qlsched_dispatcher",
            "qlsched_observer",
            "qlsched_runtime",
            "qlsched_worker_ingress"
        ],
        "{report}"
    );
    for applied in report["applied"].as_array().into_iter().flatten() {
        assert!(
            applied["applied_at_ms"].as_i64().is_some_and(|at| at > 0),
            "a migration just applied has its time: {applied}"
        );
    }

    let client = db.client().await;
    assert!(verify(&client, &schema()).await.expect("verify").is_empty());
    let roles: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_roles WHERE rolname IN ('qlsched_admin', 'qlsched_runtime', \
             'qlsched_observer', 'qlsched_worker_ingress', 'qlsched_dispatcher') \
             AND NOT rolcanlogin",
            &[],
        )
        .await
        .expect("roles")
        .get(0);
    assert_eq!(roles, 5);

    let second = qlsched(Some(&db), &["migrate", "-o", "json"], None);
    assert_eq!(code(&second), 0);
    let report: serde_json::Value = serde_json::from_str(&stdout(&second)).expect("json");
    assert_eq!(
        report["applied"].as_array().map(Vec::len),
        Some(0),
        "a second migrate applies nothing"
    );
    assert_eq!(
        report["roles_reused"],
        serde_json::json!([]),
        "and says nothing of roles"
    );
    let db2 = TestDb::empty().await;
    let table = stdout(&qlsched(Some(&db2), &["migrate"], None));
    assert!(
        table.contains(
            "group roles already on this server, granted to as they are: \
                        qlsched_admin, qlsched_runtime, qlsched_observer, qlsched_worker_ingress, \
                        qlsched_dispatcher"
        ),
        "a second database finds the roles the first made: {table}"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM schema_migrations").await,
        i64::try_from(MIGRATIONS.len()).expect("a few migrations")
    );

    let verify_ok = qlsched(Some(&db), &["migrate", "verify"], None);
    assert_eq!(code(&verify_ok), 0, "{}", stdout(&verify_ok));
}

/// Two migrators of one schema started while a third session holds the migrators' advisory lock:
/// both are seen waiting on it before either has touched the schema, and once it is released
/// they take turns, a migration at a time: both succeed, and each migration is applied once, by
/// one of them. The overlap is certain, not left to timing.
#[tokio::test]
async fn two_migrators_started_at_once_both_succeed() {
    let db = TestDb::empty().await;
    let url = db.url();
    // The key every migrator of this schema locks (an advisory lock on the namespace
    // `qlsched.migrate` and the schema's name, taken by each of its transactions; held here for a
    // session): if migrators stop taking it, none waits below.
    let holder = db.client().await;
    holder
        .execute(
            "SELECT pg_advisory_lock(hashtext('qlsched.migrate'), hashtext($1))",
            &[&schema().as_str()],
        )
        .await
        .expect("hold the migrators' lock");
    let spawn = |url: String| {
        std::thread::spawn(move || {
            std::process::Command::new(crate::util::bin())
                .args(["-D", &url, "migrate", "-o", "json"])
                .output()
                .expect("run migrate")
        })
    };
    let (a, b) = (spawn(url.clone()), spawn(url));

    let waiting = "SELECT count(*) FROM pg_locks l
                   JOIN pg_stat_activity a ON a.pid = l.pid
                   WHERE l.locktype = 'advisory' AND NOT l.granted
                     AND a.datname = current_database() AND a.wait_event = 'advisory'
                     AND (l.classid, l.objid) = (SELECT classid, objid FROM pg_locks
                                                 WHERE locktype = 'advisory' AND granted
                                                   AND pid = pg_backend_pid())";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        // Asked in the holder's session, where `pg_backend_pid()` holds the lock.
        let both: i64 = holder
            .query_one(waiting, &[])
            .await
            .expect("waiting")
            .get(0);
        if both == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline && !a.is_finished() && !b.is_finished(),
            "both migrators wait on the lock: {both} waiting"
        );
        crate::util::sleep_ms(20).await;
    }
    let schema_there: bool = holder
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&schema().as_str()],
        )
        .await
        .expect("schema")
        .get(0);
    assert!(
        !schema_there,
        "a waiting migrator has not touched the schema"
    );
    holder
        .execute(
            "SELECT pg_advisory_unlock(hashtext('qlsched.migrate'), hashtext($1))",
            &[&schema().as_str()],
        )
        .await
        .expect("release");

    let mut applied = Vec::new();
    for output in [a.join().expect("a"), b.join().expect("b")] {
        assert_eq!(code(&output), 0, "{}", stderr(&output));
        let report: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("json");
        applied.push(report["applied"].as_array().map_or(0, Vec::len));
    }
    // Each migration is a transaction of its own under the lock: whichever migrator has it next
    // applies the next migration, the other finds it applied; between them, each once.
    assert_eq!(
        applied.iter().sum::<usize>(),
        MIGRATIONS.len(),
        "each migration applied by one migrator, once: {applied:?}"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM schema_migrations").await,
        i64::try_from(MIGRATIONS.len()).expect("a few migrations")
    );
    let mut client = db.client().await;
    assert!(
        migrate_up(&mut client, &schema())
            .await
            .expect("again")
            .applied
            .is_empty()
    );
}

#[tokio::test]
async fn verify_names_an_extra_grant_and_a_changed_checksum() {
    let db = TestDb::new().await;
    let client = db.client().await;
    client
        .batch_execute("GRANT INSERT ON trigger_schedules TO qlsched_runtime")
        .await
        .expect("grant");
    let output = qlsched(Some(&db), &["migrate", "verify"], None);
    assert_eq!(code(&output), 78);
    assert!(
        stdout(&output).contains("qlsched_runtime has INSERT on qlsched.trigger_schedules"),
        "{}",
        stdout(&output)
    );
    assert!(
        stderr(&output).starts_with("qlsched: "),
        "{}",
        stderr(&output)
    );

    client
        .batch_execute("REVOKE INSERT ON trigger_schedules FROM qlsched_runtime")
        .await
        .expect("revoke");
    client
        .batch_execute("UPDATE schema_migrations SET checksum = repeat('0', 64) WHERE version = 1")
        .await
        .expect("tamper");
    let output = qlsched(Some(&db), &["migrate", "verify", "-o", "json"], None);
    assert_eq!(code(&output), 78);
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("json");
    assert_eq!(report["ok"], false);
    assert_eq!(report["findings"][0]["kind"], "checksum");
    assert!(
        report["findings"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("0001_schedule_admission.sql")
    );
}

#[tokio::test]
async fn run_refuses_a_schema_that_is_behind_ahead_or_changed() {
    let empty = TestDb::empty().await;
    // Asked not to wait for `migrate` (see below for the wait).
    let output = qlsched(Some(&empty), &["run", "--exit-if-unmigrated"], None);
    assert_eq!(code(&output), 78, "{}", stderr(&output));
    assert!(
        stderr(&output).contains("qlsched migrate"),
        "{}",
        stderr(&output)
    );
    // Every read says why its tables are missing, not which one it tripped on.
    for args in [
        vec!["inspect"],
        vec!["inspect", "claims"],
        vec!["inspect", "runs"],
    ] {
        let output = qlsched(Some(&empty), &args, None);
        assert_refused(
            &output,
            78,
            "has no migration ledger (run `qlsched migrate`)",
            &format!("{args:?}"),
        );
    }

    let ahead = TestDb::new().await;
    ahead
        .client()
        .await
        .batch_execute(
            "INSERT INTO schema_migrations VALUES (99, 'from_the_future', repeat('a', 64), 0, 0)",
        )
        .await
        .expect("insert");
    let output = qlsched(Some(&ahead), &["run"], None);
    assert_eq!(code(&output), 78);
    assert!(
        stderr(&output).contains("migration 99 (from_the_future) is applied but unknown"),
        "{}",
        stderr(&output)
    );

    let changed = TestDb::new().await;
    changed
        .client()
        .await
        .batch_execute("UPDATE schema_migrations SET checksum = repeat('b', 64) WHERE version = 2")
        .await
        .expect("tamper");
    let output = qlsched(Some(&changed), &["run"], None);
    assert_eq!(code(&output), 78);
    assert!(
        stderr(&output)
            .contains("0002_roles_and_grants.sql was applied with checksum bbbbbbbbbbbb"),
        "{}",
        stderr(&output)
    );
    // Nothing writes into a schema `run` refuses: 78, and nothing written.
    let before = crate::util::fingerprint(&changed).await;
    let manifest = crate::util::manifest(
        serde_json::json!([{ "id": "a", "task": "t", "cron": "* * * * * *" }]),
    )
    .to_string();
    for (args, stdin) in [
        (vec!["publish", "-f", "-"], Some(manifest.as_str())),
        (vec!["claim", "--hold"], None),
        (vec!["expire", "--owner", "anyone", "--yes"], None),
    ] {
        let output = qlsched(Some(&changed), &args, stdin);
        assert_refused(
            &output,
            78,
            "was applied with checksum bbbbbbbbbbbb",
            &format!("{args:?}"),
        );
    }
    assert_eq!(crate::util::fingerprint(&changed).await, before);
    // The views still read what is there: a checksum incident is when they are needed.
    let output = qlsched(Some(&changed), &["inspect", "claims"], None);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    // The first look shows the counts and names the problem: exit 78, in the table and the JSON.
    let output = qlsched(Some(&changed), &["inspect"], None);
    assert_eq!(code(&output), 78, "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("SCHEMA NOT READY, replicas refuse to start:")
            && stdout(&output).contains("total"),
        "{}",
        stdout(&output)
    );
    let output = qlsched(Some(&changed), &["inspect", "-o", "json"], None);
    assert_eq!(code(&output), 78, "{}", stderr(&output));
    let summary: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert!(
        summary["schema_problem"]
            .as_str()
            .is_some_and(|p| p.contains("checksum bbbbbbbbbbbb")),
        "{summary}"
    );
    assert_eq!(summary["schedules"]["total"], 0);
    let ready = TestDb::new().await;
    let output = qlsched(Some(&ready), &["inspect", "-o", "json"], None);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let summary: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert!(summary["schema_problem"].is_null(), "{summary}");
}

#[tokio::test]
async fn runtime_cannot_insert_schedules_and_worker_ingress_cannot_read_anything() {
    let db = TestDb::new().await;
    db.publish(&crate::util::manifest(
        serde_json::json!([{ "id": "tr", "task": "t", "cron": "* * * * *" }]),
    ))
    .await;

    let runtime = LoginRole::create(&db, "qlsched_runtime").await;
    let client = runtime.connect(&db).await;
    let insert = client
        .execute(
            "INSERT INTO trigger_schedules (project_id, trigger_id, trigger_revision, updated_at_ms) \
             VALUES ('p', 'other', 1, 0)",
            &[],
        )
        .await
        .expect_err("runtime must not insert schedule rows");
    assert_eq!(
        insert.code(),
        Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)
    );
    let delete = client
        .execute("DELETE FROM trigger_schedules", &[])
        .await
        .expect_err("nor delete them");
    assert_eq!(
        delete.code(),
        Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)
    );
    let rows: i64 = client
        .query_one("SELECT count(*) FROM trigger_schedules", &[])
        .await
        .expect("select")
        .get(0);
    assert_eq!(rows, 1, "runtime reads schedules");
    drop(client);

    let ingress = LoginRole::create(&db, "qlsched_worker_ingress").await;
    let client = ingress.connect(&db).await;
    for table in crate::util::SCHEDULER_TABLES {
        let error = client
            .query(&format!("SELECT * FROM qlsched.{table}"), &[])
            .await
            .expect_err("worker ingress must read nothing");
        assert_eq!(
            error.code(),
            Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
            "{table}"
        );
    }
    drop(client);
}

#[tokio::test]
async fn the_granted_roles_are_enough_to_publish_and_to_run_a_replica() {
    let db = TestDb::new().await;
    let admin = LoginRole::create(&db, "qlsched_admin").await;
    let runtime = LoginRole::create(&db, "qlsched_runtime").await;
    let manifest = crate::util::manifest(
        serde_json::json!([{ "id": "a", "task": "t", "cron": "* * * * * *" }]),
    );
    let published = std::process::Command::new(crate::util::bin())
        .args(["-D", &admin.url(&db), "publish", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(manifest.to_string().as_bytes())?;
            child.wait_with_output()
        })
        .expect("publish as admin");
    assert_eq!(code(&published), 0, "{}", stderr(&published));
    assert!(
        !stderr(&published).contains("could not analyze"),
        "{}",
        stderr(&published)
    );
    // publish gathers the statistics the planner needs, though an admin does not own the tables.
    let analyzed = db
        .count(
            "SELECT count(DISTINCT starelid) FROM pg_statistic
             WHERE starelid IN ('triggers'::regclass, 'trigger_schedules'::regclass)",
        )
        .await;
    assert_eq!(analyzed, 2, "publish did not analyze the tables it changed");

    let replica = crate::util::spawn_run(
        &runtime.url(&db),
        &["--owner", "least-privilege", "--cadence", "100ms"],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while db.count("SELECT count(*) FROM runs").await < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the runtime role admitted nothing"
        );
        crate::util::sleep_ms(50).await;
    }
    let output = crate::util::terminate(replica);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    crate::util::assert_invariants(&db).await;
}

/// A replica whose login lacks what `qlsched_runtime` grants exits 77 before it claims, naming
/// what is missing, instead of logging a failed round every second while it looks alive.
#[tokio::test]
async fn run_refuses_a_login_without_the_runtime_privileges() {
    let db = TestDb::new().await;
    let observer = LoginRole::create(&db, "qlsched_observer").await;
    let output = qlsched(
        None,
        &["-D", &observer.url(&db), "run", "--owner", "obs"],
        None,
    );
    assert_eq!(code(&output), 77, "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains(&format!(
            "login {} lacks what qlsched_runtime grants",
            observer.name
        )) && message.contains("trigger_schedules (UPDATE)")
            && message.contains("runs (INSERT)"),
        "{message}"
    );
    assert!(!message.contains("replica started"), "{message}");
}

/// A login whose sessions are read-only by setting (`default_transaction_read_only`) on a primary
/// is a setting to change, not a standby to wait for: a writer exits 78 naming the setting, not 69
/// "a standby?" (a supervisor restarts on 69 forever), and writes nothing.
#[tokio::test]
async fn a_writer_whose_login_is_read_only_by_setting_exits_78_naming_it() {
    let db = TestDb::new().await;
    let admin = LoginRole::create(&db, "qlsched_admin").await;
    db.client()
        .await
        .batch_execute(&format!(
            "ALTER ROLE {} SET default_transaction_read_only = on",
            admin.name
        ))
        .await
        .expect("read-only sessions");
    let manifest =
        crate::util::manifest(serde_json::json!([{ "id": "a", "task": "t", "cron": "@daily" }]));
    let output = crate::util::qlsched(
        None,
        &["-D", &admin.url(&db), "publish", "-f", "-"],
        Some(&manifest.to_string()),
    );
    assert_eq!(code(&output), 78, "{}", stderr(&output));
    assert!(
        stderr(&output).contains("default_transaction_read_only is on for this login")
            && !stderr(&output).contains("standby?"),
        "{}",
        stderr(&output)
    );
    assert_eq!(db.count("SELECT count(*) FROM triggers").await, 0);
}

/// A migration the server refuses exits 78 with the server's own words: the message, its
/// SQLSTATE, and its detail and hint when it gives them.
#[tokio::test]
async fn a_failed_migration_keeps_the_servers_sqlstate_detail_and_hint() {
    let db = TestDb::empty().await;
    db.client()
        .await
        .batch_execute(
            "CREATE SCHEMA qlsched;
             CREATE FUNCTION qlsched.refuse() RETURNS event_trigger LANGUAGE plpgsql AS $$
             BEGIN
                 RAISE EXCEPTION 'no functions today' USING ERRCODE = 'P0001',
                     DETAIL = 'the maintenance window is closed', HINT = 'come back at noon';
             END $$;
             CREATE EVENT TRIGGER refuse ON ddl_command_start WHEN TAG IN ('CREATE FUNCTION')
                 EXECUTE FUNCTION qlsched.refuse();",
        )
        .await
        .expect("an event trigger that refuses functions");
    let output = qlsched(Some(&db), &["migrate"], None);
    let _ = db
        .client()
        .await
        .batch_execute("DROP EVENT TRIGGER refuse")
        .await;
    assert_eq!(code(&output), 78, "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("migration 0001_schedule_admission.sql failed: no functions today")
            && message.contains("SQLSTATE P0001")
            && message.contains("the maintenance window is closed")
            && message.contains("hint: come back at noon"),
        "{message}"
    );
}

/// On a schema whose ledger is behind this binary (a release migrated it, this one not yet),
/// every command exits 78 saying so and naming what is pending, before any query can fail on a
/// column a pending migration adds: the readers (`inspect` and its views, `inspect invariants`)
/// as the writers.
#[tokio::test]
async fn every_command_on_a_schema_behind_the_binary_exits_78_saying_so() {
    let db = TestDb::new().await;
    db.publish(&crate::util::every_second(&["a"])).await;
    // As a schema the release before operator control left it: no pause columns, no ledger rows
    // from 0005 on.
    db.client()
        .await
        .batch_execute(
            "DELETE FROM schema_migrations WHERE version >= 5;
             ALTER TABLE trigger_schedules DROP COLUMN paused_at_ms CASCADE;",
        )
        .await
        .expect("an older schema");
    let manifest = crate::util::every_second(&["a"]).to_string();
    for (args, stdin) in [
        (&["inspect"][..], None),
        (&["inspect", "invariants"], None),
        (&["inspect", "schedules"], None),
        (&["inspect", "claims"], None),
        (&["inspect", "trigger", "p/a"], None),
        (&["inspect", "replicas"], None),
        (
            &["publish", "-f", "-", "--dry-run"],
            Some(manifest.as_str()),
        ),
        (&["fire", "p/a", "--dry-run", "--yes"], None),
        (&["pause", "p/a", "--yes"], None),
        (&["expire", "p/a", "--yes"], None),
        (&["claim", "--dry-run"], None),
    ] {
        let output = qlsched(Some(&db), args, stdin);
        let message = stderr(&output);
        assert_eq!(code(&output), 78, "{args:?}: {message}");
        assert!(
            message.contains("behind this binary") && message.contains("0005_"),
            "{args:?}: {message}"
        );
    }
}

/// A replica started before `migrate` waits, not ready, saying why, and starts by itself once
/// the schema is migrated: the order of a deployment does not matter.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_started_before_migrate_waits_and_then_starts() {
    let db = TestDb::empty().await;
    let replica = crate::util::spawn_run(&db.url(), &["--owner", "early", "--cadence", "100ms"]);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let output = qlsched(Some(&db), &["migrate"], None);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let client = db.client().await;
    crate::util::eventually(
        std::time::Duration::from_secs(20),
        "the waiting replica registers once migrated",
        || async {
            client
                .query_one(
                    "SELECT count(*) FROM qlsched.replicas WHERE owner = 'early'",
                    &[],
                )
                .await
                .is_ok_and(|row| row.get::<_, i64>(0) == 1)
        },
    )
    .await;
    let log = replica.stop();
    assert!(
        log.contains("waiting, not ready, for the schema to be migrated")
            && log.contains("has no migration ledger")
            && log.contains("the schema is migrated: starting"),
        "{log}"
    );
    assert_eq!(
        log.matches("waiting, not ready").count(),
        1,
        "once a minute: {log}"
    );
}

/// A connection string's own `options` cannot move qlsched's tables: the session's search_path is
/// set to the schema once the session opens, after the startup options, so `migrate` creates
/// every table in the schema and none where the string pointed.
#[tokio::test]
async fn a_connection_strings_search_path_does_not_move_the_schema() {
    let db = TestDb::empty().await;
    // A URL or, on the tests' throw-away server, key=value settings.
    let base = db.url();
    let url = if base.starts_with("postgres") {
        let separator = if base.contains('?') { '&' } else { '?' };
        format!("{base}{separator}options=-csearch_path%3Dpublic")
    } else {
        format!("{base} options='-csearch_path=public'")
    };
    let output = std::process::Command::new(crate::util::bin())
        .args(["-D", &url, "migrate"])
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run qlsched");
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let tables = |schema: &'static str| {
        let db = &db;
        async move {
            db.count(&format!(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = '{schema}' AND c.relkind = 'r'"
            ))
            .await
        }
    };
    assert_eq!(tables("public").await, 0, "nothing created in public");
    assert!(
        tables("qlsched").await >= 10,
        "the tables are in the schema"
    );
}

/// `migrate status` says, for each migration, whether the previous release may run beside it,
/// and of a pending one, that it is pending and which running replicas would have to stop for it
/// (none for one the previous release may run beside), in its table and its JSON.
#[tokio::test]
async fn migrate_status_says_what_is_pending_and_which_replicas_would_stop() {
    use qlsched::store::replicas::{Registration, register};
    let db = TestDb::new().await;
    let up_to_date = qlsched(Some(&db), &["migrate", "status"], None);
    assert_eq!(code(&up_to_date), 0, "{}", stderr(&up_to_date));
    assert!(
        stdout(&up_to_date).contains("previous release may run")
            && stdout(&up_to_date).ends_with("nothing pending\n"),
        "{}",
        stdout(&up_to_date)
    );
    let client = db.client().await;
    register(
        &client,
        &Registration {
            owner: "running-one",
            host: "node-1",
            pid: 1,
            version: "test",
            schema_version: latest_version(),
            lease_ms: 5_000,
            cadence_ms: 200,
            forget_after_ms: 900_000,
        },
    )
    .await
    .expect("register");
    // The last migration's ledger row gone: the schema reads as one that has it pending.
    let last = MIGRATIONS.last().expect("migrations");
    client
        .execute(
            "DELETE FROM schema_migrations WHERE version = $1",
            &[&last.version],
        )
        .await
        .expect("a pending migration");
    let output = qlsched(Some(&db), &["migrate", "status", "-o", "json"], None);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&output)).expect("json");
    let row = rows
        .iter()
        .find(|r| r["version"] == last.version)
        .expect("the last migration's row");
    assert_eq!(row["state"], "pending", "{row}");
    assert_eq!(
        row["previous_release_may_run"],
        last.previous_release_may_run(),
        "{row}"
    );
    assert_eq!(row["replicas_to_stop"], serde_json::json!([]), "{row}");
    assert_eq!(row["upgrade_floor"], last.upgrade_floor, "{row}");
    for row in &rows {
        assert!(row["previous_release_may_run"].is_boolean(), "{row}");
        assert!(row["upgrade_floor"].is_i64(), "{row}");
    }
    let table = stdout(&qlsched(Some(&db), &["migrate", "status"], None));
    assert!(
        table.contains(&format!(
            "pending: {} (`qlsched migrate` applies them)",
            last.file_name().trim_end_matches(".sql")
        )) && table.contains("no running replica would have to stop for them"),
        "{table}"
    );
}

/// `migrate` runs as the schema's owner: a login that is no superuser, made as README says
/// (LOGIN CREATEROLE, CREATE on the database), migrates an empty database and again finds
/// nothing to do. A login granted only `qlsched_admin` is refused with 77 and told which of the
/// owner's rights it lacks: CREATE on the database while the schema is missing, ownership of the
/// schema once it exists; and it creates nothing.
#[tokio::test]
async fn migrate_runs_as_the_schema_owner_and_names_the_right_an_admin_login_lacks() {
    // Roles are the server's: made from a database of their own, dropped after the test's
    // database (locals drop in reverse), which holds the owner's schema and its CREATE grant.
    let anchor = TestDb::empty().await;
    let owner = LoginRole {
        name: format!(
            "qlsched_owner_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        ),
    };
    anchor
        .client()
        .await
        .batch_execute(&format!("CREATE ROLE {} LOGIN CREATEROLE", owner.name))
        .await
        .expect("the owner login");
    let db = TestDb::empty().await;
    let admin = LoginRole::create(&db, "qlsched_admin").await;
    db.client()
        .await
        .batch_execute(&format!(
            "GRANT CREATE ON DATABASE {} TO {}",
            db.name, owner.name
        ))
        .await
        .expect("CREATE on the database");
    let migrate_as = |login: &LoginRole| qlsched(None, &["-D", &login.url(&db), "migrate"], None);
    let schema_exists = "SELECT count(*) FROM pg_namespace WHERE nspname = 'qlsched'";

    let refused = migrate_as(&admin);
    assert_refused(
        &refused,
        77,
        &format!(
            "login {} lacks CREATE on database {}, which creating schema qlsched takes",
            admin.name, db.name
        ),
        "an admin login on an empty database",
    );
    assert!(stderr(&refused).contains("GRANT CREATE ON DATABASE"));
    assert_eq!(db.count(schema_exists).await, 0, "nothing was created");

    let migrated = migrate_as(&owner);
    assert_eq!(code(&migrated), 0, "{}", stderr(&migrated));
    assert!(
        stdout(&migrated).contains(&format!("migrated to version {}", latest_version())),
        "{}",
        stdout(&migrated)
    );
    let superuser: bool = db
        .client()
        .await
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = $1",
            &[&owner.name],
        )
        .await
        .expect("rolsuper")
        .get(0);
    assert!(!superuser, "the owner login is no superuser");
    let again = migrate_as(&owner);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert!(stdout(&again).contains("up to date"), "{}", stdout(&again));
    let verified = qlsched(None, &["-D", &owner.url(&db), "migrate", "verify"], None);
    assert_eq!(code(&verified), 0, "{}", stdout(&verified));

    let refused = migrate_as(&admin);
    assert_refused(
        &refused,
        77,
        &format!(
            "login {} does not own schema qlsched: {} does",
            admin.name, owner.name
        ),
        "an admin login on a migrated database",
    );
}

/// A ledger recorded before floors existed (as 0.2.0's `migrate` leaves it: no `upgrade_floor`
/// column, 0014 not applied) gets the column from this build's `migrate`, each row's floor and flag
/// as this build declares them, and 0014 recorded with its own; `migrate verify` finds nothing.
#[tokio::test]
async fn migrate_gives_a_ledger_from_before_floors_each_migrations_floor() {
    let db = TestDb::new().await;
    let client = db.client().await;
    client
        .batch_execute(
            "DELETE FROM schema_migrations WHERE version = 14;
             ALTER TABLE schema_migrations DROP COLUMN upgrade_floor;
             UPDATE schema_migrations SET previous_release_may_run = NULL WHERE version = 7;",
        )
        .await
        .expect("a ledger as 0.2.0 left it");
    let output = qlsched(Some(&db), &["migrate"], None);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let recorded: Vec<(i64, bool, i64)> = client
        .query(
            "SELECT version, previous_release_may_run, upgrade_floor FROM schema_migrations
             ORDER BY version",
            &[],
        )
        .await
        .expect("the ledger")
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    let declared: Vec<(i64, bool, i64)> = MIGRATIONS
        .iter()
        .map(|m| (m.version, m.previous_release_may_run(), m.upgrade_floor))
        .collect();
    assert_eq!(recorded, declared);
    let output = qlsched(Some(&db), &["migrate", "verify"], None);
    assert_eq!(code(&output), 0, "{}", stdout(&output));
}

/// A migration marked to run outside a transaction builds its index with `CREATE INDEX
/// CONCURRENTLY` on a table replicas write to: an invalid index of the same name, left by an
/// attempt that failed, is dropped and built again (where `IF NOT EXISTS` alone would keep it);
/// a statement that waits past the lock timeout behind a session holding the table is tried
/// again, and the migration recorded once it ran; applied again, it finds itself in the ledger.
#[tokio::test]
async fn a_migration_outside_a_transaction_rebuilds_an_invalid_index_and_retries_a_lock_wait() {
    use qlsched::store::migrate::{Migration, apply_one};
    let db = TestDb::new().await;
    db.publish(&crate::util::every_second(&["a", "b"])).await;
    let client = db.client().await;
    let index_valid = || async {
        client
            .query_opt(
                "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i
                 JOIN pg_class c ON c.oid = i.indexrelid
                 WHERE c.relname = 'trigger_schedules_throw_away'",
                &[],
            )
            .await
            .expect("the index")
            .map(|row| (row.get::<_, bool>(0), row.get::<_, String>(1)))
    };
    // A concurrent build that failed (two rows, one unique key) leaves its index invalid.
    let failed = client
        .batch_execute(
            "CREATE UNIQUE INDEX CONCURRENTLY trigger_schedules_throw_away
             ON trigger_schedules ((true))",
        )
        .await;
    assert!(failed.is_err(), "the failed build");
    let (valid, _) = index_valid().await.expect("an index left behind");
    assert!(!valid, "the failed build left its index invalid");
    let migration = Migration {
        version: 9001,
        name: "throw_away_index",
        sql: "-- no-transaction\n\
              CREATE INDEX CONCURRENTLY IF NOT EXISTS trigger_schedules_throw_away\n\
              ON trigger_schedules (updated_at_ms);\n",
        upgrade_floor: 9000,
    };
    // A session holds a lock the build waits for, longer than one lock timeout (5 s).
    let holder = db.client().await;
    holder
        .batch_execute("BEGIN; LOCK TABLE trigger_schedules IN SHARE UPDATE EXCLUSIVE MODE")
        .await
        .expect("hold the table");
    let release = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(6)).await;
        holder.batch_execute("COMMIT").await.expect("let go");
    });
    let mut runner = db.client().await;
    let settings =
        "SELECT current_setting('search_path') || ' ' || current_setting('lock_timeout')";
    let before: String = runner.query_one(settings, &[]).await.expect("show").get(0);
    let started = std::time::Instant::now();
    let applied = apply_one(&mut runner, &schema(), &migration)
        .await
        .expect("applied after a retry");
    release.await.expect("the holder");
    // Had the build waited for the holder, it would have ended at 6 s; it gave up at 5 s (its
    // lock timeout), paused 2 s and built the index on its second attempt.
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(7),
        "the first attempt waited out its lock timeout and a second ran: {:?}",
        started.elapsed()
    );
    assert_eq!(applied.map(|status| status.version), Some(9001));
    let (valid, definition) = index_valid().await.expect("the index");
    assert!(valid, "{definition}");
    assert!(
        definition.contains("(updated_at_ms)"),
        "rebuilt: {definition}"
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM schema_migrations WHERE version = 9001 AND upgrade_floor = 9000"
        )
        .await,
        1
    );
    // The session's settings are as they were.
    let after: String = runner.query_one(settings, &[]).await.expect("show").get(0);
    assert_eq!(after, before);
    assert!(
        apply_one(&mut runner, &schema(), &migration)
            .await
            .expect("applied again")
            .is_none()
    );
}
