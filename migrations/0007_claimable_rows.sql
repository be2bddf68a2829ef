-- qlsched 0007: claimability is a stored fact of the schedule row (docs/DESIGN.md §3.1, §4.3).
-- Parked rows (paused, trigger disabled, project suspended) are kept out of the one index every
-- "what is due" read walks, so they cost the claim, the next-due read and the gauges nothing.

-- The one definition of "may a replica claim this schedule row at all" (leases and the cursor
-- aside): not paused, and an active project with an enabled builtin cron trigger at the row's
-- revision. The stored column below is this function's value, kept by the triggers that follow;
-- the claim and the admission evaluate it again on the rows they take, so that the stored fact
-- finds rows and is never trusted.
-- Arguments: the row's project, trigger, revision and paused_at_ms. OFFSET 0 keeps the planner
-- from turning the EXISTS into a join or a hashed subplan over every trigger: evaluated row by
-- row, by key, on the few rows a claim or an admission takes.
CREATE FUNCTION schedule_claimable(text, text, bigint, bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT $4 IS NULL AND EXISTS (
        SELECT 1 FROM triggers t JOIN projects p ON p.project_id = t.project_id
        WHERE t.project_id = $1 AND t.trigger_id = $2
          AND p.status = 'active' AND t.enabled AND t.kind = 'cron' AND t.provider = 'builtin'
          AND t.revision = $3
        OFFSET 0)
$$;

-- Added true for every row (a metadata-only change), then made false on the parked rows alone:
-- the rows a replica claims are not rewritten. The two UPDATEs are schedule_claimable() written
-- as set operations (an anti-join instead of a probe per row), for this one pass over the table.
ALTER TABLE trigger_schedules ADD COLUMN claimable boolean NOT NULL DEFAULT true;
UPDATE trigger_schedules s SET claimable = false WHERE s.paused_at_ms IS NOT NULL;
UPDATE trigger_schedules s SET claimable = false
WHERE s.claimable AND NOT EXISTS (
    SELECT 1 FROM triggers t JOIN projects p ON p.project_id = t.project_id
    WHERE t.project_id = s.project_id AND t.trigger_id = s.trigger_id
      AND p.status = 'active' AND t.enabled AND t.kind = 'cron' AND t.provider = 'builtin'
      AND t.revision = s.trigger_revision);

-- The trigger functions below look rows up by key whatever the statistics say (enable_seqscan
-- off for their own statements): straight after a large publish the statistics still describe a
-- small table, and a sequential scan of `triggers` per schedule row inserted made a publish of
-- 100,000 triggers quadratic.
--
-- The row's own writes that change it: a new row, a new revision (publish), a pause or resume.
-- Claims and admissions write none of these columns, so the trigger never fires for them.
CREATE FUNCTION schedule_claimable_of_row() RETURNS trigger
    LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    NEW.claimable := schedule_claimable(NEW.project_id, NEW.trigger_id, NEW.trigger_revision,
                                        NEW.paused_at_ms);
    RETURN NEW;
END $$;

CREATE TRIGGER trigger_schedules_claimable
    BEFORE INSERT OR UPDATE OF trigger_revision, paused_at_ms, claimable ON trigger_schedules
    FOR EACH ROW EXECUTE FUNCTION schedule_claimable_of_row();

-- The definitions' writes that change it: a trigger enabled or disabled or given a new revision,
-- a project suspended or made active. Only rows whose fact changes are written (the WHEN clauses
-- are evaluated without calling the function, so a publish that changes neither pays nothing).
CREATE FUNCTION schedule_claimable_of_trigger() RETURNS trigger
    LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    UPDATE trigger_schedules s SET claimable = NOT s.claimable
    WHERE s.project_id = NEW.project_id AND s.trigger_id = NEW.trigger_id
      AND s.claimable IS DISTINCT FROM
          schedule_claimable(s.project_id, s.trigger_id, s.trigger_revision, s.paused_at_ms);
    RETURN NULL;
END $$;

CREATE TRIGGER triggers_claimable
    AFTER UPDATE ON triggers
    FOR EACH ROW
    WHEN (OLD.enabled IS DISTINCT FROM NEW.enabled OR OLD.revision IS DISTINCT FROM NEW.revision)
    EXECUTE FUNCTION schedule_claimable_of_trigger();

CREATE FUNCTION schedule_claimable_of_project() RETURNS trigger
    LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    UPDATE trigger_schedules s SET claimable = NOT s.claimable
    WHERE s.project_id = NEW.project_id
      AND s.claimable IS DISTINCT FROM
          schedule_claimable(s.project_id, s.trigger_id, s.trigger_revision, s.paused_at_ms);
    RETURN NULL;
END $$;

CREATE TRIGGER projects_claimable
    AFTER UPDATE ON projects
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION schedule_claimable_of_project();

-- Called by the triggers only, which need no EXECUTE privilege.
REVOKE ALL ON FUNCTION schedule_claimable_of_row() FROM PUBLIC;
REVOKE ALL ON FUNCTION schedule_claimable_of_trigger() FROM PUBLIC;
REVOKE ALL ON FUNCTION schedule_claimable_of_project() FROM PUBLIC;

-- The claim order of docs/DESIGN.md §4.3 over claimable rows only: uninitialized rows first,
-- then the most overdue. It replaces the claim-order index over every row, whose head parked
-- rows (a disabled trigger's NULL cursor, a paused row's stale one) held for ever.
DROP INDEX trigger_schedules_claim_order;
CREATE INDEX trigger_schedules_claimable_order
    ON trigger_schedules (next_fire_at_ms NULLS FIRST, project_id, trigger_id) WHERE claimable;
-- The parked rows, for their counts and for listing them (inspect schedules, top). Parked rows
-- are never claimed or admitted, so this index is written only when a row is parked or unparked.
CREATE INDEX trigger_schedules_parked
    ON trigger_schedules (project_id, trigger_id) WHERE NOT claimable;

-- History the scheduler owns is bounded by what it keeps, and every operator read of it by an
-- index (docs/DESIGN.md §3.3). The audit is kept for AUDIT_RETENTION (store::retention) and
-- deleted past it, oldest first, by the replicas' housekeeping, as misfire records are.
CREATE INDEX schedule_audit_at ON schedule_audit (at_ms);
GRANT DELETE ON schedule_audit TO qlsched_runtime;
-- `expire --owner` tells a typo from an owner with nothing left to expire by the records that
-- name owners: these indexes answer for the audit's fences and the misfire records, so that an
-- unknown owner costs index probes, not a pass over the history.
CREATE INDEX schedule_audit_fence_owner ON schedule_audit ((fence_after->>'owner'));
CREATE INDEX schedule_audit_fence_before_owner ON schedule_audit ((fence_before->>'owner'));
CREATE INDEX misfires_owner ON misfires (owner);
