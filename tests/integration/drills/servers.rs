//! Drills on PostgreSQL servers the test owns (`util::cluster`): a restart under running
//! replicas; two hosts, the first a standby, and `target_session_attrs`; and a physical
//! promotion with a claim held across it.

use std::time::{Duration, Instant};

use qlsched::store::connect::SessionAttrs;
use qlsched::store::{ConnectionSettings, Store, StoreError};

use super::{every_second_triggers, now_ms, replica, runs_by, triggers_fired_since};
use crate::util::cluster::OwnServer;
use crate::util::{assert_invariants_on, code, eventually, qlsched, schema, stderr, stdout};

const DB: &str = "drill";

/// Creates database [`DB`] on `server`, then migrates and publishes `triggers` every-second
/// triggers there with the binary, through `url` (which may name several hosts).
async fn prepare(server: &OwnServer, url: &str, triggers: usize) {
    server
        .client("postgres")
        .await
        .batch_execute(&format!("CREATE DATABASE {DB}"))
        .await
        .expect("create the drill's database");
    let migrated = qlsched(None, &["-D", url, "migrate"], None);
    assert_eq!(code(&migrated), 0, "{}", stderr(&migrated));
    let manifest = every_second_triggers(triggers).to_string();
    let published = qlsched(None, &["-D", url, "publish", "-f", "-"], Some(&manifest));
    assert_eq!(code(&published), 0, "{}", stderr(&published));
}

/// Two replicas ride through `pg_ctl restart -m fast` of their server (their pooled connections
/// die and are replaced), then through 2 s with the server stopped: their rounds fail, back off,
/// and resume once it is up; nothing is lost or doubled.
#[tokio::test(flavor = "multi_thread")]
async fn replicas_ride_through_a_restart_of_their_server() {
    let server = OwnServer::primary("restart");
    let url = server.url(DB);
    prepare(&server, &url, 10).await;
    let client = server.client(DB).await;
    let start_ms = now_ms(&client).await;
    let replicas = [replica(&url, "ride-a", "2s"), replica(&url, "ride-b", "2s")];
    eventually(Duration::from_secs(20), "every trigger fires", || async {
        triggers_fired_since(&client, start_ms).await >= 10
    })
    .await;
    drop(client);
    let restart = Instant::now();
    server.restart("fast");
    let restarted = restart.elapsed();
    let client = server.client(DB).await;
    let back_ms = now_ms(&client).await;
    eventually(
        Duration::from_secs(20),
        "every trigger fires after the restart",
        || async { triggers_fired_since(&client, back_ms).await >= 10 },
    )
    .await;
    let recovered = restart.elapsed();
    // Then down for longer than a few cadences: the rounds fail, back off, and resume.
    drop(client);
    let outage = Instant::now();
    server.stop("fast");
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.start();
    let started = outage.elapsed();
    let client = server.client(DB).await;
    let up_ms = now_ms(&client).await;
    eventually(
        Duration::from_secs(20),
        "every trigger fires after the outage",
        || async { triggers_fired_since(&client, up_ms).await >= 10 },
    )
    .await;
    let resumed = outage.elapsed() - started;
    let logs: Vec<String> = replicas.into_iter().map(super::Replica::stop).collect();
    assert!(
        logs.iter()
            .any(|log| log.contains("retrying with back-off")),
        "a round failed while the server was down: {logs:?}"
    );
    // One may still be backing off when the other has fired everything: one says it resumed.
    assert!(
        logs.iter().any(|log| log.contains("rounds succeed again")),
        "a replica said it resumed: {logs:?}"
    );
    let counts = assert_invariants_on(&client).await;
    assert_eq!(counts.claims_held, 0);
    eprintln!(
        "drill: pg_ctl restart -m fast took {restarted:?}, every trigger firing again \
         {recovered:?} after it began; a 2 s outage ({started:?} down): every trigger firing again \
         {resumed:?} after the server was back"
    );
}

/// Which server a session of `url` with `attrs` lands on: `true` for the standby.
async fn lands_on_standby(url: &str, attrs: Option<SessionAttrs>) -> bool {
    let settings = ConnectionSettings::resolve(Some(url)).expect("url");
    let settings = match attrs {
        Some(attrs) => settings.with_default_session_attrs(attrs),
        None => settings,
    };
    settings
        .connect(&schema(), "qlsched tests")
        .await
        .expect("a host that fits")
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .expect("pg_is_in_recovery")
        .get(0)
}

/// Two hosts, the first a read-only standby: a writer's session goes on to the primary, a
/// reader's stays on the standby, and every `target_session_attrs` value picks as libpq does.
#[tokio::test(flavor = "multi_thread")]
async fn target_session_attrs_picks_the_host_as_libpq_does() {
    let primary = OwnServer::primary("attrs");
    let standby = primary.standby();
    let both = |attrs: &str| {
        format!(
            "host=127.0.0.1,127.0.0.1 port={},{} user=postgres dbname={DB} sslmode=disable {attrs}",
            standby.port, primary.port
        )
    };
    // The writers' default skips the standby listed first.
    prepare(&primary, &both(""), 2).await;
    standby.caught_up_with(&primary).await;

    for (attrs, on_standby) in [
        (SessionAttrs::Any, true),
        (SessionAttrs::ReadWrite, false),
        (SessionAttrs::ReadOnly, true),
        (SessionAttrs::Primary, false),
        (SessionAttrs::Standby, true),
        (SessionAttrs::PreferStandby, true),
    ] {
        assert_eq!(
            lands_on_standby(&both(&format!("target_session_attrs={attrs}")), None).await,
            on_standby,
            "{attrs}"
        );
        // A command's default never overrides a given value.
        assert_eq!(
            lands_on_standby(
                &both(&format!("target_session_attrs={attrs}")),
                Some(SessionAttrs::ReadWrite)
            )
            .await,
            on_standby,
            "{attrs} given"
        );
    }
    // With the primary first, prefer-standby still finds the standby, any stays on the first.
    let reversed = format!(
        "host=127.0.0.1,127.0.0.1 port={},{} user=postgres dbname={DB} sslmode=disable",
        primary.port, standby.port
    );
    assert!(
        lands_on_standby(
            &format!("{reversed} target_session_attrs=prefer-standby"),
            None
        )
        .await
    );
    assert!(!lands_on_standby(&reversed, None).await);
    // With the standby alone, prefer-standby takes it on the first pass, and primary nothing.
    let only_standby = standby.url(DB);
    assert!(
        lands_on_standby(
            &format!("{only_standby} target_session_attrs=prefer-standby"),
            None
        )
        .await
    );
    let refused = ConnectionSettings::resolve(Some(&format!(
        "{only_standby} target_session_attrs=primary"
    )))
    .expect("url")
    .connect(&schema(), "qlsched tests")
    .await
    .expect_err("no primary in the list");
    assert!(matches!(refused, StoreError::Unavailable(_)), "{refused:?}");
    assert!(
        refused.to_string().contains("target_session_attrs=primary"),
        "{refused}"
    );

    // A writer's pool goes to the primary too.
    let store = Store::open(
        &ConnectionSettings::resolve(Some(&both("")))
            .expect("url")
            .with_default_session_attrs(SessionAttrs::ReadWrite),
        &schema(),
        "qlsched tests",
        2,
    )
    .await
    .expect("a pool on the primary");
    let in_recovery: bool = store
        .client()
        .await
        .expect("pooled")
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .expect("pg_is_in_recovery")
        .get(0);
    assert!(!in_recovery);

    // The binary: a writer finds the primary by itself; a given `any` wins and meets the
    // standby's refusal (69); a reader is content with the standby.
    let manifest = every_second_triggers(3).to_string();
    let published = qlsched(
        None,
        &["-D", &both(""), "publish", "-f", "-"],
        Some(&manifest),
    );
    assert_eq!(code(&published), 0, "{}", stderr(&published));
    let forced = qlsched(
        None,
        &[
            "-D",
            &both("target_session_attrs=any"),
            "publish",
            "-f",
            "-",
        ],
        Some(&manifest),
    );
    assert_eq!(code(&forced), 69, "{}", stderr(&forced));
    assert!(stderr(&forced).contains("read-only"), "{}", stderr(&forced));
    let alone = qlsched(
        None,
        &["-D", &only_standby, "claim", "--hold", "p/t00"],
        None,
    );
    assert_eq!(code(&alone), 69, "{}", stderr(&alone));
    assert!(
        stderr(&alone).contains("target_session_attrs=read-write"),
        "{}",
        stderr(&alone)
    );
    // A reader on the standby says where it is, in the header and in JSON.
    standby.caught_up_with(&primary).await;
    let header = qlsched(None, &["-D", &only_standby, "inspect"], None);
    assert_eq!(code(&header), 0, "{}", stderr(&header));
    assert!(
        stdout(&header).contains("standby, replay lag"),
        "{}",
        stdout(&header)
    );
    let json = qlsched(None, &["-D", &only_standby, "inspect", "-o", "json"], None);
    let json: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("inspect -o json");
    assert_eq!(json["server"]["role"], "standby", "{json}");
    let unknown = qlsched(
        None,
        &["-D", &both("target_session_attrs=master"), "inspect"],
        None,
    );
    assert_eq!(code(&unknown), 78, "{}", stderr(&unknown));
    assert!(
        stderr(&unknown).contains("\"master\""),
        "{}",
        stderr(&unknown)
    );
}

/// A physical promotion with a claim held across it: the claim, replicated to the standby,
/// keeps its row from the fresh replicas on the promoted server until its database-time expiry;
/// a replica given both hosts from the start finds the new primary by itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_promotion_with_a_claim_held_hands_the_row_over_only_at_its_expiry() {
    let primary = OwnServer::primary("promote");
    let standby = primary.standby();
    let both = format!(
        "host=127.0.0.1,127.0.0.1 port={},{} user=postgres dbname={DB} sslmode=disable \
         target_session_attrs=read-write connect_timeout=2",
        primary.port, standby.port
    );
    prepare(&primary, &primary.url(DB), 10).await;
    // A claim held by hand, longer than the replicas' lease, taken before any replica runs (the
    // row is not initialized yet, so it is eligible at once).
    let held = qlsched(
        None,
        &[
            "-D",
            &primary.url(DB),
            "claim",
            "p/t05",
            "--hold",
            "--owner",
            "by-hand",
            "--lease",
            "6s",
        ],
        None,
    );
    assert_eq!(code(&held), 0, "{}", stderr(&held));
    let client = primary.client(DB).await;
    let start_ms = now_ms(&client).await;
    let steady = replica(&both, "both-hosts", "2s");
    eventually(
        Duration::from_secs(20),
        "every trigger but the held one fires",
        || async { triggers_fired_since(&client, start_ms).await >= 9 },
    )
    .await;
    let expires_ms: i64 = client
        .query_one(
            "SELECT claim_expires_at_ms FROM trigger_schedules
             WHERE trigger_id = 't05' AND claim_owner = 'by-hand'",
            &[],
        )
        .await
        .expect("the held claim")
        .get(0);
    standby.caught_up_with(&primary).await;
    drop(client);

    let failover = Instant::now();
    primary.stop("immediate");
    standby.promote();
    let promoted = failover.elapsed();
    let client = standby.client(DB).await;
    let promoted_ms = now_ms(&client).await;
    let replicated: i64 = client
        .query_one(
            "SELECT count(*) FROM trigger_schedules
             WHERE trigger_id = 't05' AND claim_owner = 'by-hand' AND claim_expires_at_ms = $1",
            &[&expires_ms],
        )
        .await
        .expect("the replicated claim")
        .get(0);
    assert_eq!(replicated, 1, "the claim was replayed on the standby");
    let fresh = replica(&standby.url(DB), "fresh", "2s");
    eventually(
        Duration::from_secs(20),
        "every trigger fires on the promoted server",
        || async { triggers_fired_since(&client, promoted_ms).await >= 10 },
    )
    .await;
    let recovered = failover.elapsed();
    let early: i64 = client
        .query_one(
            "SELECT count(*) FROM runs
             WHERE trigger_id = 't05' AND created_at_ms > $1 AND created_at_ms < $2",
            &[&promoted_ms, &expires_ms],
        )
        .await
        .expect("runs of the held row")
        .get(0);
    assert_eq!(early, 0, "the held row was taken before its claim expired");
    let t05_back: i64 = client
        .query_one(
            "SELECT min(created_at_ms) FROM runs WHERE trigger_id = 't05' AND created_at_ms > $1",
            &[&promoted_ms],
        )
        .await
        .expect("the held row's next run")
        .get(0);
    assert!(t05_back >= expires_ms);
    eventually(
        Duration::from_secs(20),
        "the replica given both hosts admits on the promoted server",
        || async { runs_by(&client, "both-hosts", promoted_ms).await > 0 },
    )
    .await;
    let both_back = failover.elapsed();
    let steady_log = steady.stop();
    fresh.stop();
    let counts = assert_invariants_on(&client).await;
    assert_eq!(counts.claims_held, 0, "{steady_log}");
    eprintln!(
        "drill: promotion ({promoted:?} from stopping the primary to the standby promoted); every \
         trigger firing on the new primary {recovered:?} after the stop; the held row taken {} ms \
         after the claim's expiry; the replica given both hosts admitting there {both_back:?} \
         after the stop",
        t05_back - expires_ms
    );
}
