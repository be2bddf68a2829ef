-- qlsched 0010: inspect's summary counts the parked schedule rows, and the paused among them, by
-- one index-only scan instead of a pass over every row (docs/PERFORMANCE.md, "Lived-in tables").
--
-- A parked row (not claimable, docs/DESIGN.md §3.1) is counted as paused when its pause is set,
-- else as disabled: this index holds the parked rows alone, keyed by the pause time, so one scan of
-- it gives both counts without reading the table. Keyed by that one column, its entries are small
-- and the disabled rows' null keys share posting lists: at 900,000 parked rows it is 6 MB, against
-- 48 MB for trigger_schedules_parked, and the planner takes it over a sequential scan of the table.
-- Claims and admissions never write it (they touch claimable rows only); publish, pause and
-- resume write it when a row is parked or unparked, as they write trigger_schedules_parked.
--
-- An index only: replicas of the previous release may keep running beside it. Building it holds
-- a SHARE lock on trigger_schedules (claims and admissions wait): 0.3 s at 1,000,000 rows.
CREATE INDEX trigger_schedules_parked_paused_at ON trigger_schedules (paused_at_ms)
    WHERE NOT claimable;
