//! Deterministic states for the snapshot and input tests: fixed database time, fixed tokens and
//! run ids, so that a whole frame can be compared byte for byte.

use std::time::Duration;

use uuid::Uuid;

use super::state::{App, Snapshot};
use crate::core::diagnose::Diagnosis;
use crate::core::outage::OutageFacts;
use crate::core::{Liveness, TriggerName};
use crate::store::observe::ServerRole;
use crate::store::read::{
    ClaimView, OwnerClaims, PauseView, RunView, ScheduleRow, ScheduleState, ScheduleView,
    StateCounts, TriggerDetail, TriggerState, TriggerView,
};
use crate::store::replicas::ReplicaView;
use crate::store::top::{TREND_BUCKETS, TopSummary, TrendBucket, Trends};

/// 2026-12-02T12:00:00.000Z.
pub const NOW: i64 = 1_796_212_800_000;

pub fn app() -> App {
    App::new(
        "postgres@127.0.0.1:5432/qlsched_demo".to_owned(),
        "qlsched".to_owned(),
        false,
        false,
    )
}

fn token(n: u128) -> Uuid {
    Uuid::from_u128(0x5eed_0000_0000_4000_8000_0000_0000_0000 + n)
}

fn schedule(
    project: &str,
    trigger: &str,
    state: ScheduleState,
    next_in_ms: Option<i64>,
    claim: Option<(&str, i64)>,
) -> ScheduleRow {
    ScheduleRow {
        schedule: view(project, trigger, state, next_in_ms, claim),
        paused: None,
    }
}

fn view(
    project: &str,
    trigger: &str,
    state: ScheduleState,
    next_in_ms: Option<i64>,
    claim: Option<(&str, i64)>,
) -> ScheduleView {
    ScheduleView {
        project_id: project.to_owned(),
        trigger_id: trigger.to_owned(),
        state,
        trigger_revision: 1,
        state_version: 12,
        claim_version: 6,
        next_fire_at_ms: next_in_ms.map(|ms| NOW + ms),
        due_in_ms: next_in_ms,
        last_scheduled_at_ms: next_in_ms.map(|ms| NOW + ms - 2_000),
        claim_owner: claim.map(|(owner, _)| owner.to_owned()),
        claim_expires_at_ms: claim.map(|(_, left)| NOW + left),
        // A claimed row was last written by its claim (every fixture lease is 5 s).
        updated_at_ms: claim.map_or(NOW - 1_000, |(_, left)| NOW + left - 5_000),
    }
}

/// A registered replica of lease 5 s and cadence 200 ms: `live` (or `stalled`, `stale`),
/// `running` (or `draining`, `stopped`), its last heartbeat `heartbeat_ago_ms` before now.
fn replica(owner: &str, liveness: Liveness, state: &str, heartbeat_ago_ms: i64) -> ReplicaView {
    ReplicaView {
        owner: owner.to_owned(),
        host: "node-1".to_owned(),
        pid: 4242,
        version: "0.1.0".to_owned(),
        schema_version: Some(crate::store::migrate::latest_version()),
        liveness,
        state: state.to_owned(),
        started_at_ms: NOW - 3_600_000,
        heartbeat_at_ms: NOW - heartbeat_ago_ms,
        heartbeat_age_ms: heartbeat_ago_ms,
        last_round_at_ms: Some(NOW - heartbeat_ago_ms),
        rounds: 18_000,
        failed_rounds: 0,
        admissions: 2_400,
        misfires: 0,
        fence_losses: 0,
        last_error: None,
        batch: Some(16),
    }
}

fn claim(row: &ScheduleView, n: u128, lease_ms: i64) -> ClaimView {
    let expires_at_ms = row.claim_expires_at_ms.unwrap_or(NOW);
    ClaimView {
        project_id: row.project_id.clone(),
        trigger_id: row.trigger_id.clone(),
        owner: row.claim_owner.clone().unwrap_or_default(),
        token: token(n),
        version: row.claim_version,
        acquired_at_ms: expires_at_ms - lease_ms,
        expires_at_ms,
        remaining_ms: expires_at_ms - NOW,
        expired: expires_at_ms <= NOW,
    }
}

fn run(n: u128, project: &str, trigger: &str, ago_ms: i64) -> RunView {
    let scheduled = NOW - ago_ms - 40;
    RunView {
        run_id: Uuid::from_u128(0x0192_0000_0000_7000_8000_0000_0000_0000 + n),
        project_id: project.to_owned(),
        trigger_id: trigger.to_owned(),
        trigger_revision: 1,
        task_id: "sync".to_owned(),
        task_revision: 1,
        execution_revision_id: token(99),
        idempotency_key: format!("ql3:cron:v1:{trigger}:1:{scheduled}"),
        status: crate::core::RunStatus::Queued,
        scheduled_for_ms: scheduled,
        created_at_ms: NOW - ago_ms,
        queued_at_ms: Some(NOW - ago_ms),
    }
}

/// The last hour in minute buckets, `bucket(i)` giving each one's admissions, lag p50 and p99
/// and misfires (`None` lag: no run), and fence losses and failed rounds.
pub fn trends(bucket: impl Fn(i64) -> (i64, Option<(i64, i64)>, i64, (i64, i64))) -> Trends {
    let bucket_ms = 60_000;
    Trends {
        now_ms: NOW,
        window_ms: bucket_ms * TREND_BUCKETS,
        bucket_ms,
        buckets: (0..TREND_BUCKETS)
            .map(|i| {
                let (admissions, lag, misfires, (fence_losses, failed_rounds)) = bucket(i);
                TrendBucket {
                    start_ms: NOW - (TREND_BUCKETS - i) * bucket_ms,
                    admissions,
                    lag_p50_ms: lag.map(|l| l.0),
                    lag_p99_ms: lag.map(|l| l.1),
                    misfires,
                    fence_losses,
                    failed_rounds,
                }
            })
            .collect(),
        read_from_ms: NOW - TREND_BUCKETS * bucket_ms,
    }
}

/// A cluster admitting about 2,400 a minute with a slow patch twenty minutes ago (lag up, a few
/// misfires, demo-b losing three fences and failing a round), recovered since.
pub fn busy_trends() -> Trends {
    trends(|i| {
        let slow = (38..44).contains(&i);
        let admissions = if slow {
            900 + 100 * (i - 38)
        } else {
            2_300 + (i * 37) % 200
        };
        let lag = if slow {
            (1_800 + 400 * (i - 38), 9_500)
        } else {
            (40 + (i * 13) % 30, 210 + (i * 29) % 120)
        };
        let trouble = (if i == 40 { 3 } else { 0 }, i64::from(i == 42));
        (admissions, Some(lag), if i == 41 { 12 } else { 0 }, trouble)
    })
}

/// A migrated database with nothing published.
pub fn empty() -> App {
    let mut app = app();
    app.apply_snapshot(Snapshot {
        summary: TopSummary {
            now_ms: NOW,
            schema_version: 3,
            counts: StateCounts::default(),
            total_estimated: false,
            due_capped: false,
            owners: Vec::new(),
            replicas: Vec::new(),
            server: ServerRole::Primary,
        },
        schedules: Vec::new(),
        claims: Vec::new(),
        recent: Vec::new(),
        misfires: Default::default(),
        detail: None,
        trends: trends(|_| (0, None, 0, (0, 0))),
        outage: OutageFacts::default(),
        misfire_records: Vec::new(),
        audit: Vec::new(),
        runs: Vec::new(),
        took: Duration::from_millis(3),
    });
    app
}

/// Three replicas at work, every claim live.
pub fn busy() -> App {
    let schedules = vec![
        schedule(
            "globex",
            "sync-a",
            ScheduleState::Claimed,
            Some(-120),
            Some(("demo-a", 4_200)),
        ),
        schedule(
            "acme",
            "heartbeat",
            ScheduleState::Claimed,
            Some(-60),
            Some(("demo-b", 4_900)),
        ),
        schedule("acme", "report-5s", ScheduleState::Due, Some(-350), None),
        schedule(
            "globex",
            "sync-b",
            ScheduleState::Claimed,
            Some(-20),
            Some(("demo-c", 1_500)),
        ),
        schedule("globex", "sync-c", ScheduleState::NotDue, Some(1_000), None),
        schedule(
            "globex",
            "hourly",
            ScheduleState::NotDue,
            Some(1_860_000),
            None,
        ),
        schedule(
            "acme",
            "nightly-backup",
            ScheduleState::NotDue,
            Some(54_000_000),
            None,
        ),
        ScheduleRow {
            paused: Some(PauseView {
                paused_by: "ops-alice@bastion".to_owned(),
                paused_at_ms: NOW - 185_000,
                reason: Some("incident 7: upstream down".to_owned()),
            }),
            // Paused with its cursor ahead (as a resume-then-pause leaves it): still no
            // countdown, since a parked row is never due. The read model gives it no due time.
            schedule: ScheduleView {
                due_in_ms: None,
                ..view(
                    "globex",
                    "paused",
                    ScheduleState::Paused,
                    Some(36_641),
                    None,
                )
            },
        },
        schedule("initech", "tps-report", ScheduleState::Disabled, None, None),
    ];
    let claims = vec![
        claim(&schedules[0], 1, 5_000),
        claim(&schedules[1], 2, 5_000),
        claim(&schedules[3], 3, 5_000),
    ];
    let owner = |name: &str, claims, admissions| OwnerClaims {
        owner: name.to_owned(),
        claims,
        expired: 0,
        last_claim_at_ms: NOW - 800,
        admissions_last_minute: admissions,
        manual_claims: 0,
    };
    let mut app = app();
    let mut demo_b = replica("demo-b", Liveness::Live, "running", 40);
    demo_b.fence_losses = 3;
    demo_b.failed_rounds = 1;
    demo_b.misfires = 12;
    demo_b.last_error =
        Some("round failed: canceling statement due to statement timeout".to_owned());
    app.apply_snapshot(Snapshot {
        summary: TopSummary {
            now_ms: NOW,
            schema_version: 3,
            counts: StateCounts {
                total: 9,
                due: 1,
                claimed: 3,
                expired_claim: 0,
                not_due: 3,
                disabled: 1,
                paused: 1,
                uninitialized: 0,
            },
            total_estimated: false,
            due_capped: false,
            owners: vec![
                owner("demo-a", 1, 41),
                owner("demo-b", 1, 38),
                owner("demo-c", 1, 44),
            ],
            // demo-d is live and idle: it holds nothing and admitted nothing in the last minute.
            replicas: vec![
                replica("demo-a", Liveness::Live, "running", 150),
                demo_b,
                replica("demo-c", Liveness::Live, "running", 90),
                replica("demo-d", Liveness::Live, "running", 120),
            ],
            server: ServerRole::Primary,
        },
        schedules,
        claims,
        recent: vec![
            run(1, "globex", "sync-c", 1_100),
            run(2, "acme", "heartbeat", 2_050),
            run(3, "globex", "sync-b", 2_100),
            run(4, "acme", "report-5s", 5_020),
        ],
        misfires: Default::default(),
        detail: None,
        trends: busy_trends(),
        outage: OutageFacts {
            live_replicas: 4,
            registered_replicas: 4,
            ever_ran: true,
            due_rows: 4,
            overdue_beyond_grace: 0,
            oldest_due_ms: Some(350),
            admissions_last_minute: 2_400,
        },
        misfire_records: Vec::new(),
        audit: Vec::new(),
        runs: Vec::new(),
        took: Duration::from_millis(7),
    });
    app
}

/// The busy cluster, plus a replica that died holding a claim nobody took over.
pub fn stuck() -> App {
    let mut app = busy();
    if let Some(snapshot) = &mut app.snapshot {
        let row = schedule(
            "acme",
            "report-5s",
            ScheduleState::ExpiredClaim,
            Some(-12_400),
            Some(("gone-replica", -7_400)),
        );
        let held = claim(&row, 4, 5_000);
        snapshot.schedules[2] = row;
        // The replica that died: registered, no heartbeat since.
        snapshot
            .summary
            .replicas
            .push(replica("gone-replica", Liveness::Stale, "running", 12_600));
        // One that stopped answering 3.2 s ago (SIGSTOP, a frozen VM): stalled, its claims still
        // valid, before it turns stale.
        snapshot.summary.replicas.push(replica(
            "hung-replica",
            Liveness::Stalled,
            "running",
            3_240,
        ));
        snapshot.claims.push(held);
        snapshot.summary.counts.due = 0;
        snapshot.summary.counts.expired_claim = 1;
        snapshot.summary.owners.push(OwnerClaims {
            owner: "gone-replica".to_owned(),
            claims: 0,
            expired: 1,
            last_claim_at_ms: NOW - 12_400,
            admissions_last_minute: 0,
            manual_claims: 0,
        });
        // An operator holding a claim taken with `qlsched claim --hold`.
        snapshot.summary.owners.push(OwnerClaims {
            owner: "ops-alice".to_owned(),
            claims: 1,
            expired: 0,
            last_claim_at_ms: NOW - 30_000,
            admissions_last_minute: 0,
            manual_claims: 1,
        });
        snapshot
            .misfires
            .insert(TriggerName::new("acme", "report-5s"), 3);
        snapshot.misfires.insert(
            TriggerName::new("globex", "sync-b"),
            crate::store::misfires::COUNT_CAP,
        );
    }
    app
}

/// `inspect trigger` for the stuck row.
pub fn stuck_detail() -> TriggerDetail {
    let app = stuck();
    let snapshot = app.snapshot.as_ref();
    let schedule = snapshot.map(|s| s.schedules[2].schedule.clone());
    let claim = snapshot.and_then(|s| s.claims.last().cloned());
    TriggerDetail {
        project_id: "acme".to_owned(),
        trigger_id: "report-5s".to_owned(),
        why_not_firing: Diagnosis::ClaimExpired {
            owner: "gone-replica".to_owned(),
            expired_ms_ago: 7_400,
            live_replicas: 2,
        },
        state: schedule.map(|schedule| TriggerState {
            now_ms: NOW,
            definition: TriggerView {
                project_status: crate::core::ProjectStatus::Active,
                task_id: "report".to_owned(),
                revision: 1,
                enabled: true,
                cron_expr: "*/5 * * * * *".to_owned(),
                time_zone: "UTC".to_owned(),
                misfire_policy: "fire_once".to_owned(),
                misfire_grace_ms: 2_000,
                content_digest: "0".repeat(64),
                execution_revision_id: token(99),
            },
            schedule,
            claim,
            recent_runs: vec![run(4, "acme", "report-5s", 17_400)],
            live_replicas: 2,
            recent_misfires: Vec::new(),
            admission_error: None,
            audit: Vec::new(),
        }),
    }
}

/// `inspect trigger` for the paused row of the busy cluster.
pub fn paused_detail() -> TriggerDetail {
    let mut detail = stuck_detail();
    let app = busy();
    let row = app
        .snapshot
        .as_ref()
        .and_then(|s| s.row_of(&TriggerName::new("globex", "paused")))
        .cloned();
    detail.project_id = "globex".to_owned();
    detail.trigger_id = "paused".to_owned();
    if let Some(row) = row {
        let pause = row.paused.clone();
        detail.why_not_firing = Diagnosis::Paused {
            by: pause
                .as_ref()
                .map(|p| p.paused_by.clone())
                .unwrap_or_default(),
            at_ms: pause.as_ref().map_or(NOW, |p| p.paused_at_ms),
            reason: pause.and_then(|p| p.reason),
        };
        if let Some(state) = &mut detail.state {
            state.schedule = row.schedule;
            state.claim = None;
            state.recent_runs.clear();
            state.live_replicas = 4;
        }
    }
    detail
}

/// Every replica gone: the stuck cluster after its replicas all stopped beating, sixteen rows due
/// and the oldest 47 s late.
pub fn outage() -> App {
    let mut app = stuck();
    if let Some(snapshot) = &mut app.snapshot {
        for replica in &mut snapshot.summary.replicas {
            replica.liveness = Liveness::Stale;
            replica.heartbeat_age_ms = 61_000;
            replica.heartbeat_at_ms = NOW - 61_000;
        }
        snapshot.summary.counts.due = 16;
        snapshot.outage = OutageFacts {
            live_replicas: 0,
            registered_replicas: 6,
            ever_ran: true,
            due_rows: 16,
            overdue_beyond_grace: 2,
            oldest_due_ms: Some(47_000),
            admissions_last_minute: 0,
        };
    }
    app
}

/// The busy cluster with the lists of the history views loaded (as the loader reads only the
/// view on screen, a real snapshot holds one of them).
pub fn busy_with_history() -> App {
    use crate::store::misfires::MisfireRecord;
    use crate::store::read::{AuditView, RunRow};

    let mut app = busy();
    if let Some(snapshot) = &mut app.snapshot {
        let misfire =
            |id: i64, trigger: &str, owner: &str, ago_ms: i64, occurrences: i64| MisfireRecord {
                misfire_id: id,
                project_id: "acme".to_owned(),
                trigger_id: trigger.to_owned(),
                trigger_revision: 1,
                first_occurrence_ms: NOW - ago_ms - 20_000,
                last_occurrence_ms: NOW - ago_ms - 5_000,
                occurrences,
                occurrences_exact: true,
                policy: "fire_once".to_owned(),
                reason: "beyond_grace".to_owned(),
                owner: owner.to_owned(),
                decided_at_ms: NOW - ago_ms,
                recorded_at_ms: NOW - ago_ms,
            };
        snapshot.misfire_records = vec![
            misfire(2, "report-5s", "demo-b", 1_200_000, 4),
            misfire(1, "heartbeat", "demo-a", 2_400_000, 12),
        ];
        let fence = |owner: Option<&str>, version: i64| {
            serde_json::json!({
                "owner": owner, "token": null, "version": version, "expires_at_ms": null
            })
        };
        snapshot.audit = vec![
            AuditView {
                audit_id: 2,
                project_id: "globex".to_owned(),
                trigger_id: "paused".to_owned(),
                action: "pause".to_owned(),
                actor: "ops-alice@bastion".to_owned(),
                db_user: "qlsched_admin".to_owned(),
                reason: Some("incident 7: upstream down".to_owned()),
                at_ms: NOW - 185_000,
                fence_before: Some(fence(None, 5)),
                fence_after: Some(fence(None, 6)),
            },
            AuditView {
                audit_id: 1,
                project_id: "acme".to_owned(),
                trigger_id: "report-5s".to_owned(),
                action: "expire".to_owned(),
                actor: "ops-bob@bastion".to_owned(),
                db_user: "qlsched_operator".to_owned(),
                reason: Some("expired from qlsched top".to_owned()),
                at_ms: NOW - 1_260_000,
                fence_before: Some(fence(Some("gone-replica"), 4)),
                fence_after: Some(fence(None, 5)),
            },
        ];
        snapshot.runs = snapshot
            .recent
            .iter()
            .enumerate()
            .map(|(i, run)| RunRow {
                run: run.clone(),
                origin: if i == 2 { "backfill" } else { "cron" }.to_owned(),
            })
            .collect();
    }
    app
}
