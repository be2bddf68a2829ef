//! The dashboard's state: the last snapshot the loader delivered and everything the operator has
//! chosen (selection, filter, sort, pause, refresh rate, the open dialog). Input changes it,
//! the loader feeds it, drawing only reads it; nothing here does I/O or reads a clock.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::core::ClaimFence;
use crate::core::outage::{self, Outage, OutageFacts};
use crate::core::{Liveness, TriggerName};
use crate::store::misfires::MisfireRecord;
use crate::store::read::{AuditView, RunRow};
use crate::store::read::{
    ClaimView, OwnerClaims, PauseView, RunView, ScheduleRow, ScheduleState, ScheduleView,
    TriggerDetail,
};
use crate::store::replicas::ReplicaView;
use crate::store::top::{TopSummary, Trends};
use crate::tui::draw::COLUMNS;

/// Refresh rate bounds and steps (default 1 s, 0.25 to 10 s).
pub const REFRESH_DEFAULT: Duration = Duration::from_secs(1);
pub const REFRESH_MIN: Duration = Duration::from_millis(250);
pub const REFRESH_MAX: Duration = Duration::from_secs(10);
const REFRESH_STEPS_MS: [u64; 8] = [250, 500, 1_000, 2_000, 3_000, 5_000, 7_500, 10_000];

/// The trends' windows, `[` and `]` step through them (default the hour).
pub const TREND_WINDOWS_MS: [i64; 5] = [
    900_000,
    3_600_000,
    6 * 3_600_000,
    12 * 3_600_000,
    86_400_000,
];
const TREND_WINDOW_DEFAULT: usize = 1;
/// Below this many rows the trends fold away by themselves (`t` folds and unfolds them by hand):
/// the tables need the room more.
pub const TRENDS_MIN_HEIGHT: u16 = 36;
/// Every column of the schedules table shown.
pub fn all_columns() -> Vec<bool> {
    vec![true; COLUMNS.len()]
}

/// The column of the table named `name` on the command line: its header, or `mark` for `!`.
pub fn column_named(name: &str) -> Option<usize> {
    (0..COLUMNS.len()).find(|&i| column_name(i) == name)
}

/// A column's name on the command line (`top --columns`): its header, `mark` for the `!`.
pub fn column_name(index: usize) -> &'static str {
    match COLUMNS.get(index).map(|(header, _)| *header) {
        Some("!") => "mark",
        Some(header) => header,
        None => "",
    }
}

/// The table's column that always shows: a row must say which trigger it is.
pub const ALWAYS_SHOWN: &str = "trigger";

/// The columns `--columns` lists, in the table's order, as a mask of `draw::COLUMNS`; an unknown
/// name is refused naming it and the columns there are.
pub fn parse_columns(names: &[String]) -> Result<Vec<bool>, String> {
    let mut shown = vec![false; COLUMNS.len()];
    for name in names {
        let name = name.trim();
        let index = column_named(name).ok_or_else(|| {
            format!(
                "unknown column `{}` in --columns; the columns are {}",
                crate::core::text::clean(name),
                (0..COLUMNS.len())
                    .map(column_name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        shown[index] = true;
    }
    if let Some(trigger) = column_named(ALWAYS_SHOWN) {
        shown[trigger] = true;
    }
    Ok(shown)
}

/// One refresh, as the read models returned it.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Database time, schema version, counts by state, owners.
    pub summary: TopSummary,
    /// The most urgent schedule rows (claim order), each with its pause.
    pub schedules: Vec<ScheduleRow>,
    /// Every held claim (valid or expired) with its full fence.
    pub claims: Vec<ClaimView>,
    /// The newest admissions.
    pub recent: Vec<RunView>,
    /// Misfire records still in retention of each loaded row's current trigger revision (rows
    /// without one are absent), at most `store::misfires::COUNT_CAP` each.
    pub misfires: BTreeMap<TriggerName, i64>,
    /// What `inspect trigger` says about the trigger the detail pane shows.
    pub detail: Option<TriggerDetail>,
    /// Admissions, lag and misfires per bucket over the trends' window.
    pub trends: Trends,
    /// What an outage is decided from (`core::outage`).
    pub outage: OutageFacts,
    /// The history the view on screen lists, newest first (only that view's is read).
    pub misfire_records: Vec<MisfireRecord>,
    pub audit: Vec<AuditView>,
    pub runs: Vec<RunRow>,
    /// How long the refresh took (shown in the header).
    pub took: Duration,
}

impl Snapshot {
    pub fn now_ms(&self) -> i64 {
        self.summary.now_ms
    }

    /// The outage these facts show, if any (the banner).
    pub fn outage(&self) -> Option<Outage> {
        outage::classify(&self.outage)
    }

    /// How the registry sees a claim owner: `Some(Stalled)` or `Some(Stale)` when it is a
    /// registered replica that is not live (its claims may be held by a process that is hung
    /// or dead), `Some(Stopped)` for one that stopped; `None` for a live replica or an owner the
    /// registry does not know (an operator).
    pub fn owner_trouble(&self, owner: &str) -> Option<Liveness> {
        self.summary
            .replicas
            .iter()
            .find(|r| r.owner == owner)
            .map(|r| r.liveness)
            .filter(|l| *l != Liveness::Live)
    }

    /// The registry's running totals of fence losses and failed rounds, over every replica it
    /// holds (counted since each replica's start).
    pub fn registry_totals(&self) -> (i64, i64) {
        let replicas = &self.summary.replicas;
        (
            replicas.iter().map(|r| r.fence_losses).sum(),
            replicas.iter().map(|r| r.failed_rounds).sum(),
        )
    }

    /// The claim recorded on a schedule row, with its fence.
    pub fn claim_of(&self, key: &TriggerName) -> Option<&ClaimView> {
        self.claims
            .iter()
            .find(|c| c.project_id == key.project_id && c.trigger_id == key.trigger_id)
    }

    /// The loaded schedule row of `key`.
    pub fn row_of(&self, key: &TriggerName) -> Option<&ScheduleRow> {
        self.schedules
            .iter()
            .find(|r| r.project_id == key.project_id && r.trigger_id == key.trigger_id)
    }

    /// The replicas panel: registered replicas that have not stopped (stale and stalled ones
    /// first, since they need a look, then live ones, idle ones too), each with the claims it holds and what
    /// it admitted in the last minute, then every other claim owner. An owner without a running
    /// registered replica is no replica: an operator's manual claims, or what a stopped replica
    /// left behind.
    pub fn panel_rows(&self) -> Vec<PanelRow<'_>> {
        let summary = &self.summary;
        let mut running: Vec<&ReplicaView> = summary
            .replicas
            .iter()
            .filter(|r| r.liveness != Liveness::Stopped)
            .collect();
        running.sort_by_key(|r| r.liveness.urgency());
        let owner_of = |name: &str| summary.owners.iter().find(|o| o.owner == name);
        let mut rows: Vec<PanelRow> = running
            .iter()
            .map(|&replica| PanelRow::Replica {
                replica,
                claims: owner_of(&replica.owner),
            })
            .collect();
        rows.extend(
            summary
                .owners
                .iter()
                .filter(|o| !running.iter().any(|r| r.owner == o.owner))
                .map(|owner| PanelRow::Other {
                    owner,
                    stopped: summary.replicas.iter().any(|r| r.owner == owner.owner),
                }),
        );
        rows
    }
}

/// A row of the replicas panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanelRow<'a> {
    /// A registered replica that has not stopped, with its claims and admissions when it has any.
    Replica {
        replica: &'a ReplicaView,
        claims: Option<&'a OwnerClaims>,
    },
    /// A claim owner the registry has no running replica for: a replica that stopped
    /// (`stopped`), else an operator.
    Other {
        owner: &'a OwnerClaims,
        stopped: bool,
    },
}

/// What the middle of the screen lists: the schedule rows (default), or one of the histories an
/// operator reads beside them. `v` cycles, `1`-`4` choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    #[default]
    Schedules,
    /// Misfire records in retention, newest first (`inspect misfires`).
    Misfires,
    /// Operator actions on schedule rows, newest first (`inspect audit`).
    Audit,
    /// Runs with their origin, newest first (`inspect runs`).
    Runs,
}

impl View {
    pub const ALL: [View; 4] = [View::Schedules, View::Misfires, View::Audit, View::Runs];

    pub fn next(self) -> Self {
        match self {
            View::Schedules => View::Misfires,
            View::Misfires => View::Audit,
            View::Audit => View::Runs,
            View::Runs => View::Schedules,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            View::Schedules => "schedules",
            View::Misfires => "misfires",
            View::Audit => "audit",
            View::Runs => "runs",
        }
    }
}

/// Rows a history view reads (the newest).
pub const VIEW_ROWS: i64 = 200;

/// How the schedules table is ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortOrder {
    /// What needs an operator first: expired claims nobody took over, overdue rows, live
    /// claims, uninitialized rows, then the rest (paused rows before disabled ones); within
    /// each, claim order.
    #[default]
    Urgency,
    /// Soonest lease end first; unclaimed rows after.
    LeaseEnd,
    /// By `PROJECT/TRIGGER`.
    Trigger,
    /// By claim owner; unclaimed rows after.
    Owner,
}

impl SortOrder {
    pub fn next(self) -> Self {
        match self {
            SortOrder::Urgency => SortOrder::LeaseEnd,
            SortOrder::LeaseEnd => SortOrder::Trigger,
            SortOrder::Trigger => SortOrder::Owner,
            SortOrder::Owner => SortOrder::Urgency,
        }
    }

    /// How the schedules pane's title says the rows are ordered.
    pub fn title(self) -> &'static str {
        match self {
            SortOrder::Urgency => "most urgent first",
            SortOrder::LeaseEnd => "soonest lease end first",
            SortOrder::Trigger => "by trigger",
            SortOrder::Owner => "by claim owner",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SortOrder::Urgency => "urgency",
            SortOrder::LeaseEnd => "lease end",
            SortOrder::Trigger => "trigger",
            SortOrder::Owner => "owner",
        }
    }
}

/// The claim an operator asked to expire: the fence exactly as the dashboard showed it, so that
/// the expiry refuses if the claim moved in the meantime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpireRequest {
    pub key: TriggerName,
    pub fence: ClaimFence,
    /// Whether its lease had already run out when the dialog opened.
    pub expired: bool,
}

/// Every claim of one owner, to expire at once (`E`): what a hung or dead replica holds, as
/// `qlsched expire --owner` does it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerExpireRequest {
    pub owner: String,
    /// Its claims on screen when the dialog opened: valid, and already past their lease.
    pub valid: usize,
    pub expired: usize,
    /// Whether the owner is a registered replica that still beats (live): expiring a working
    /// replica's claims costs it its round, so the dialog says so.
    pub live: bool,
}

/// The pause or resume an operator asked for (`p`), with the row as the dialog showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseRequest {
    pub key: TriggerName,
    /// Resume a paused row; otherwise pause it.
    pub resume: bool,
    /// The pause shown (a resume's), who, when and why.
    pub paused: Option<PauseView>,
    /// The claim a pause would void (its owner), as shown.
    pub claim_owner: Option<String>,
    /// The row's state as shown: a pause leaves a disabled trigger disabled.
    pub state: ScheduleState,
}

/// The dialog or overlay in front of the tables, if any.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Modal {
    #[default]
    None,
    Help,
    /// The column picker (`c`), its cursor on a column of `draw::COLUMNS`.
    Columns {
        cursor: usize,
    },
    /// The `/` prompt, with the text typed so far (applied on Enter).
    Filter {
        input: String,
    },
    /// The selected trigger's detail.
    Detail {
        key: TriggerName,
    },
    /// "Expire this claim?", showing the fence.
    ConfirmExpire(ExpireRequest),
    /// "Expire every claim of this owner?", with their count.
    ConfirmExpireOwner(OwnerExpireRequest),
    /// "Pause this trigger?" or "Resume it?", showing what it changes.
    ConfirmPause(PauseRequest),
}

/// Why the data on screen may be old.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    /// The last error, one line, no password (connection settings never render one).
    pub error: String,
    /// Failed refreshes in a row.
    pub failures: u32,
}

/// A line for the status bar: the outcome of an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub text: String,
    pub is_error: bool,
}

/// Everything the dashboard shows and remembers.
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    /// `user@host:port/dbname`, never with the password.
    pub database: String,
    pub schema: String,
    pub readonly: bool,
    pub color: bool,
    pub snapshot: Option<Snapshot>,
    pub stale: Option<Stale>,
    /// The selected schedule row, by key so that it survives a refresh that reorders rows.
    pub selected: Option<TriggerName>,
    /// The cursor stays on the first row whatever comes to the top (the most urgent row, in the
    /// default sort), until the operator moves it down; then it follows its trigger, so that a
    /// key acts on the row the operator chose. Moving back to the first row (or `g`) follows
    /// the head again.
    pub follow_head: bool,
    /// Index into [`TREND_WINDOWS_MS`].
    pub trend_window: usize,
    /// Folded by `t` (they also fold on a terminal shorter than [`TRENDS_MIN_HEIGHT`]).
    pub trends_folded: bool,
    /// Which columns of the schedules table show, one per `draw::COLUMNS` (`top --columns`,
    /// the `c` picker); the trigger's always does.
    pub columns: Vec<bool>,
    /// The first line of the help overlay shown (it scrolls).
    pub help_scroll: u16,
    /// What the middle of the screen lists.
    pub view: View,
    /// The first row shown of a history view (they scroll; only the schedules select).
    pub view_scroll: usize,
    /// Applied filter: part of `PROJECT/TRIGGER` or of the claim owner.
    pub filter: String,
    pub sort: SortOrder,
    pub paused: bool,
    pub refresh: Duration,
    pub modal: Modal,
    pub notice: Option<Notice>,
    pub quit: bool,
}

impl App {
    pub fn new(database: String, schema: String, readonly: bool, color: bool) -> Self {
        App {
            database,
            schema,
            readonly,
            color,
            snapshot: None,
            stale: None,
            selected: None,
            follow_head: true,
            trend_window: TREND_WINDOW_DEFAULT,
            trends_folded: false,
            columns: all_columns(),
            help_scroll: 0,
            view: View::Schedules,
            view_scroll: 0,
            filter: String::new(),
            sort: SortOrder::default(),
            paused: false,
            refresh: REFRESH_DEFAULT,
            modal: Modal::None,
            notice: None,
            quit: false,
        }
    }

    /// A refresh arrived. While paused the screen keeps what it shows (the loader is idle then
    /// anyway; this drops one that was already in flight).
    pub fn apply_snapshot(&mut self, snapshot: Snapshot) {
        if self.paused {
            return;
        }
        self.snapshot = Some(snapshot);
        self.stale = None;
        self.keep_selection_visible();
    }

    /// A refresh failed: keep the last data, marked stale.
    pub fn apply_failure(&mut self, error: String) {
        let failures = self.stale.as_ref().map_or(0, |s| s.failures) + 1;
        self.stale = Some(Stale { error, failures });
    }

    /// The schedule rows on screen: filtered, then sorted.
    pub fn visible_schedules(&self) -> Vec<&ScheduleRow> {
        let Some(snapshot) = &self.snapshot else {
            return Vec::new();
        };
        let mut rows: Vec<&ScheduleRow> = snapshot
            .schedules
            .iter()
            .filter(|row| self.matches_filter(row))
            .collect();
        match self.sort {
            SortOrder::Urgency => rows.sort_by_key(|r| {
                (
                    urgency(r.state),
                    // Among the switched-off rows, an operator's pause before the manifest's.
                    r.paused.is_none(),
                    r.next_fire_at_ms.is_some(),
                    r.next_fire_at_ms,
                )
            }),
            SortOrder::LeaseEnd => {
                rows.sort_by_key(|r| (r.claim_expires_at_ms.is_none(), r.claim_expires_at_ms))
            }
            SortOrder::Trigger => rows.sort_by(|a, b| {
                (&a.project_id, &a.trigger_id).cmp(&(&b.project_id, &b.trigger_id))
            }),
            SortOrder::Owner => rows.sort_by(|a, b| {
                (a.claim_owner.is_none(), &a.claim_owner)
                    .cmp(&(b.claim_owner.is_none(), &b.claim_owner))
            }),
        }
        rows
    }

    fn matches_filter(&self, row: &ScheduleRow) -> bool {
        self.filter.is_empty()
            || TriggerName::new(&row.project_id, &row.trigger_id)
                .to_string()
                .contains(&self.filter)
            || row
                .claim_owner
                .as_deref()
                .is_some_and(|owner| owner.contains(&self.filter))
    }

    /// Whether `text` (a trigger's name, an owner, an actor) matches the applied filter.
    fn filter_matches(&self, texts: &[&str]) -> bool {
        self.filter.is_empty() || texts.iter().any(|t| t.contains(&self.filter))
    }

    /// The misfire view's records, filtered by trigger or owner.
    pub fn visible_misfires(&self) -> Vec<&MisfireRecord> {
        self.snapshot.as_ref().map_or_else(Vec::new, |s| {
            s.misfire_records
                .iter()
                .filter(|m| {
                    let name = TriggerName::new(&m.project_id, &m.trigger_id).to_string();
                    self.filter_matches(&[&name, &m.owner])
                })
                .collect()
        })
    }

    /// The audit view's rows, filtered by trigger, actor or the owners of the fences.
    pub fn visible_audit(&self) -> Vec<&AuditView> {
        self.snapshot.as_ref().map_or_else(Vec::new, |s| {
            s.audit
                .iter()
                .filter(|a| {
                    let name = TriggerName::new(&a.project_id, &a.trigger_id).to_string();
                    let owner = |fence: &Option<serde_json::Value>| {
                        fence
                            .as_ref()
                            .and_then(|f| f.get("owner"))
                            .and_then(|o| o.as_str())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let (before, after) = (owner(&a.fence_before), owner(&a.fence_after));
                    self.filter_matches(&[&name, &a.actor, &before, &after])
                })
                .collect()
        })
    }

    /// The runs view's runs, filtered by trigger.
    pub fn visible_runs(&self) -> Vec<&RunRow> {
        self.snapshot.as_ref().map_or_else(Vec::new, |s| {
            s.runs
                .iter()
                .filter(|r| {
                    let name = TriggerName::new(&r.project_id, &r.trigger_id).to_string();
                    self.filter_matches(&[&name])
                })
                .collect()
        })
    }

    /// Rows of the history view on screen, after the filter.
    pub fn view_len(&self) -> usize {
        match self.view {
            View::Schedules => self.visible_schedules().len(),
            View::Misfires => self.visible_misfires().len(),
            View::Audit => self.visible_audit().len(),
            View::Runs => self.visible_runs().len(),
        }
    }

    /// Shows `view`, from its first row.
    pub fn show_view(&mut self, view: View) {
        self.view = view;
        self.view_scroll = 0;
    }

    /// Moves the selection in the schedules, or scrolls a history view, by `delta` rows.
    pub fn move_in_view(&mut self, delta: isize) {
        if self.view == View::Schedules {
            self.move_selection(delta);
        } else {
            let last = self.view_len().saturating_sub(1);
            self.view_scroll = self.view_scroll.saturating_add_signed(delta).min(last);
        }
    }

    /// Admissions on screen, filtered like the schedules.
    pub fn visible_recent(&self) -> Vec<&RunView> {
        let Some(snapshot) = &self.snapshot else {
            return Vec::new();
        };
        snapshot
            .recent
            .iter()
            .filter(|run| {
                self.filter.is_empty()
                    || TriggerName::new(&run.project_id, &run.trigger_id)
                        .to_string()
                        .contains(&self.filter)
            })
            .collect()
    }

    /// Index of the selected row among the visible ones (the first when none is selected).
    pub fn selected_index(&self) -> Option<usize> {
        let rows = self.visible_schedules();
        if rows.is_empty() {
            return None;
        }
        Some(
            self.selected
                .as_ref()
                .and_then(|key| rows.iter().position(|r| key_of(r) == *key))
                .unwrap_or(0),
        )
    }

    pub fn selected_row(&self) -> Option<&ScheduleRow> {
        let index = self.selected_index()?;
        self.visible_schedules().get(index).copied()
    }

    /// Moves the selection by `delta` rows, clamped to the table.
    pub fn move_selection(&mut self, delta: isize) {
        let rows = self.visible_schedules();
        let Some(current) = self.selected_index() else {
            return;
        };
        let last = rows.len().saturating_sub(1);
        let target = current.saturating_add_signed(delta).min(last);
        self.selected = rows.get(target).map(|r| key_of(r));
        self.follow_head = target == 0;
    }

    /// After a refresh or a filter, the selection names a row that is on screen: the first one
    /// while the cursor follows the head, else the row it was on (the first when that row is
    /// gone).
    pub fn keep_selection_visible(&mut self) {
        let key = if self.follow_head {
            self.visible_schedules().first().map(|r| key_of(r))
        } else {
            self.selected_index()
                .and_then(|i| self.visible_schedules().get(i).map(|r| key_of(r)))
        };
        self.selected = key;
    }

    /// The trends' window in milliseconds.
    pub fn trend_window_ms(&self) -> i64 {
        TREND_WINDOWS_MS[self.trend_window.min(TREND_WINDOWS_MS.len() - 1)]
    }

    /// A longer (`]`) or shorter (`[`) trends window, within the list.
    pub fn step_trend_window(&mut self, longer: bool) {
        self.trend_window = if longer {
            (self.trend_window + 1).min(TREND_WINDOWS_MS.len() - 1)
        } else {
            self.trend_window.saturating_sub(1)
        };
    }

    /// Whether the trends show on a terminal `height` rows tall.
    pub fn trends_shown(&self, height: u16) -> bool {
        !self.trends_folded && height >= TRENDS_MIN_HEIGHT
    }

    /// One step faster (`+`) or slower (`-`), within the bounds.
    pub fn step_refresh(&mut self, faster: bool) {
        let current = u64::try_from(self.refresh.as_millis()).unwrap_or(u64::MAX);
        let next = if faster {
            REFRESH_STEPS_MS.iter().rev().find(|&&ms| ms < current)
        } else {
            REFRESH_STEPS_MS.iter().find(|&&ms| ms > current)
        };
        if let Some(&ms) = next {
            self.refresh = Duration::from_millis(ms);
        }
    }

    /// What the loader must read now.
    pub fn load_request(&self) -> LoadRequest {
        LoadRequest {
            refresh: self.refresh,
            paused: self.paused,
            detail: match &self.modal {
                Modal::Detail { key } => Some(key.clone()),
                _ => None,
            },
            trend_window_ms: self.trend_window_ms(),
            view: self.view,
        }
    }
}

/// The part of the state the loader follows (over a watch channel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadRequest {
    pub refresh: Duration,
    pub paused: bool,
    pub detail: Option<TriggerName>,
    pub trend_window_ms: i64,
    pub view: View,
}

impl Default for LoadRequest {
    fn default() -> Self {
        LoadRequest {
            refresh: REFRESH_DEFAULT,
            paused: false,
            detail: None,
            trend_window_ms: TREND_WINDOWS_MS[TREND_WINDOW_DEFAULT],
            view: View::Schedules,
        }
    }
}

/// Rank of a state in the urgency order.
fn urgency(state: ScheduleState) -> u8 {
    match state {
        ScheduleState::ExpiredClaim => 0,
        ScheduleState::Due => 1,
        ScheduleState::Claimed => 2,
        ScheduleState::Uninitialized => 3,
        ScheduleState::NotDue => 4,
        ScheduleState::Paused => 5,
        ScheduleState::Disabled => 6,
    }
}

pub fn key_of(row: &ScheduleView) -> TriggerName {
    TriggerName::new(row.project_id.clone(), row.trigger_id.clone())
}
