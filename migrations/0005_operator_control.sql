-- qlsched 0005: operator control (docs/DESIGN.md §4.10): runs carry their origin, operators
-- pause and resume schedule rows, fire a trigger by hand and backfill a window.

-- Where a run came from: the scheduler's cron decision, an operator's `fire`, or a `backfill`
-- of past cron occurrences (which uses the occurrence's regular cron key). Existing runs were
-- all admitted by the scheduler.
ALTER TABLE runs ADD COLUMN origin text NOT NULL DEFAULT 'cron'
    CONSTRAINT runs_origin_known CHECK (origin IN ('cron', 'manual', 'backfill'));

-- A pause is operational state, apart from the trigger's declarative `enabled`: who paused the
-- row, when (database time) and why. The claim skips a paused row; publish leaves it as it is.
ALTER TABLE trigger_schedules
    ADD COLUMN paused_at_ms bigint,
    ADD COLUMN paused_by    text,
    ADD COLUMN pause_reason text,
    ADD CONSTRAINT trigger_schedules_pause_whole CHECK (
        (paused_at_ms IS NULL) = (paused_by IS NULL)
        AND (pause_reason IS NULL OR paused_at_ms IS NOT NULL));
-- The few paused rows, for `inspect schedules --state paused` and the dashboard's counts.
CREATE INDEX trigger_schedules_paused ON trigger_schedules (project_id, trigger_id)
    WHERE paused_at_ms IS NOT NULL;

-- A resume records the occurrences that passed while the row was paused as one misfire record.
ALTER TABLE misfires DROP CONSTRAINT misfires_reason_check;
ALTER TABLE misfires ADD CONSTRAINT misfires_reason_check
    CHECK (reason IN ('beyond_grace', 'paused'));
-- A resume's record has no misfire policy of its own: it records the trigger's.

-- The operator actions of this migration are audited like the others.
ALTER TABLE schedule_audit DROP CONSTRAINT schedule_audit_action_check;
ALTER TABLE schedule_audit ADD CONSTRAINT schedule_audit_action_check
    CHECK (action IN ('claim', 'admit', 'release', 'expire', 'pause', 'resume', 'fire',
                      'backfill'));

-- Pause, resume, fire and backfill are the admin's (docs/DESIGN.md §3.2): fire and backfill
-- admit runs (run, attempt, events), resume writes the `paused` misfire record.
GRANT INSERT ON runs, attempts, run_events, misfires TO qlsched_admin;

-- The runtime holds every table privilege these actions use (it updates schedule rows and
-- inserts runs), so the database itself keeps them the admin's: a pause set or cleared, and a
-- run of another origin than the scheduler's, need membership in qlsched_admin. The WHEN
-- clauses are evaluated without calling the function, so a replica's claims and admissions
-- (which touch neither) pay nothing for them.
CREATE FUNCTION operator_control_is_admins() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NOT pg_has_role(current_user, 'qlsched_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied: % on %.% is qlsched_admin''s (pause, resume, fire, backfill)',
            TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER trigger_schedules_pause_is_admins
    BEFORE UPDATE ON trigger_schedules
    FOR EACH ROW
    WHEN (OLD.paused_at_ms IS DISTINCT FROM NEW.paused_at_ms
          OR OLD.paused_by IS DISTINCT FROM NEW.paused_by
          OR OLD.pause_reason IS DISTINCT FROM NEW.pause_reason)
    EXECUTE FUNCTION operator_control_is_admins();

CREATE TRIGGER runs_operator_origin_is_admins
    BEFORE INSERT ON runs
    FOR EACH ROW
    WHEN (NEW.origin <> 'cron')
    EXECUTE FUNCTION operator_control_is_admins();
-- Called by the triggers only, which need no EXECUTE privilege.
REVOKE ALL ON FUNCTION operator_control_is_admins() FROM PUBLIC;
