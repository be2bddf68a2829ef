-- qlsched 0012: runs' retention (docs/DESIGN.md §3.3). Finished runs, with their attempts and
-- events, are deleted after a retention per status by one replica at a time; the horizon before
-- which an occurrence's run may be gone is kept here for every replica and command to read; the
-- dispatcher gets a role of its own and a contract the database holds (§3.4).

-- When the run finished, in database time; null while it is queued, dispatching or running.
-- Written by the trigger below, never by hand: a dispatcher writes the status only.
ALTER TABLE runs ADD COLUMN finished_at_ms bigint;

-- Runs a dispatcher finished before this migration: their retention starts now (the latest
-- they can have finished, so none is deleted earlier than its retention says).
UPDATE runs SET finished_at_ms = now_ms()
    WHERE status IN ('succeeded', 'failed', 'cancelled') AND finished_at_ms IS NULL;

ALTER TABLE runs ADD CONSTRAINT runs_finished_when_final CHECK (
    (status IN ('succeeded', 'failed', 'cancelled')) = (finished_at_ms IS NOT NULL)) NOT VALID;
ALTER TABLE runs VALIDATE CONSTRAINT runs_finished_when_final;

-- Retention's order: per status, the longest finished first; finished runs only.
CREATE INDEX runs_finished ON runs (status, finished_at_ms) WHERE finished_at_ms IS NOT NULL;

-- The dispatcher's contract on a run: it moves the status on, and nothing else of the run is
-- its to change (the scheduler's identity, key and times are what every guarantee rests on); a
-- finished run is final, since retention may delete it from then on; the finish time is the
-- database's.
CREATE FUNCTION run_status_contract() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.run_id, NEW.project_id, NEW.trigger_id, NEW.trigger_revision, NEW.task_id,
        NEW.task_revision, NEW.execution_revision_id, NEW.idempotency_key, NEW.scheduled_for_ms,
        NEW.created_at_ms, NEW.queued_at_ms, NEW.origin)
       IS DISTINCT FROM
       (OLD.run_id, OLD.project_id, OLD.trigger_id, OLD.trigger_revision, OLD.task_id,
        OLD.task_revision, OLD.execution_revision_id, OLD.idempotency_key, OLD.scheduled_for_ms,
        OLD.created_at_ms, OLD.queued_at_ms, OLD.origin) THEN
        RAISE EXCEPTION 'run %: only its status is the dispatcher''s to change', OLD.run_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.status IN ('succeeded', 'failed', 'cancelled') AND NEW.status <> OLD.status THEN
        RAISE EXCEPTION 'run % is % and final: a finished run never moves again', OLD.run_id,
            OLD.status USING ERRCODE = 'restrict_violation';
    END IF;
    NEW.finished_at_ms := CASE WHEN NEW.status IN ('succeeded', 'failed', 'cancelled')
                               THEN coalesce(OLD.finished_at_ms, now_ms()) END;
    RETURN NEW;
END $$;

CREATE TRIGGER runs_status_contract
    BEFORE UPDATE ON runs
    FOR EACH ROW EXECUTE FUNCTION run_status_contract();
REVOKE ALL ON FUNCTION run_status_contract() FROM PUBLIC;

-- An attempt's identity is the scheduler's (or, for a retry, the dispatcher's at insert); the
-- dispatcher updates its state and its own fields only.
CREATE FUNCTION attempt_identity_kept() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.attempt_id, NEW.run_id, NEW.attempt_no, NEW.executor, NEW.created_at_ms)
       IS DISTINCT FROM
       (OLD.attempt_id, OLD.run_id, OLD.attempt_no, OLD.executor, OLD.created_at_ms) THEN
        RAISE EXCEPTION 'attempt %: its identity (run, number, executor, creation) never changes',
            OLD.attempt_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER attempts_identity_kept
    BEFORE UPDATE ON attempts
    FOR EACH ROW EXECUTE FUNCTION attempt_identity_kept();
REVOKE ALL ON FUNCTION attempt_identity_kept() FROM PUBLIC;

-- The triggers fire in the dispatcher's session, under its search_path, not ours: each function
-- resolves `now_ms()` and every name through this schema whatever the caller's path is.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION run_status_contract() SET search_path = %I, pg_catalog',
                   current_schema());
    EXECUTE format('ALTER FUNCTION attempt_identity_kept() SET search_path = %I, pg_catalog',
                   current_schema());
END $$;

-- One row: the retention horizon, and the lease of the replica that deletes. `horizon_ms` is
-- one past the latest occurrence whose run retention deleted (null: none yet): from it on every
-- occurrence's history is whole; before it a run may be gone, so a backfill there is refused.
-- It only moves forward, in the transaction that deletes.
CREATE TABLE run_retention (
    singleton           boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    horizon_ms          bigint,
    leader              text,
    lease_expires_at_ms bigint,
    last_deleted_at_ms  bigint,
    deleted_runs        bigint NOT NULL DEFAULT 0 CHECK (deleted_runs >= 0),
    CONSTRAINT run_retention_lease_whole CHECK ((leader IS NULL) = (lease_expires_at_ms IS NULL))
);
INSERT INTO run_retention DEFAULT VALUES;

-- Manual runs (`qlsched fire`) that retention deleted, by key: a request id used again after its
-- run is gone is refused instead of admitted a second time. One row per manual run, an
-- operator's action, so this grows with what operators do, never with the schedule.
CREATE TABLE retired_manual_runs (
    idempotency_key  text PRIMARY KEY,
    run_id           uuid NOT NULL,
    project_id       text NOT NULL,
    trigger_id       text NOT NULL,
    scheduled_for_ms bigint NOT NULL,
    retired_at_ms    bigint NOT NULL
);

-- Retention is the runtime's: the replicas delete finished runs with their attempts and events.
GRANT DELETE ON runs, attempts, run_events TO qlsched_runtime;
GRANT SELECT, UPDATE ON run_retention TO qlsched_runtime;
GRANT SELECT, INSERT ON retired_manual_runs TO qlsched_runtime;
GRANT SELECT ON run_retention, retired_manual_runs TO qlsched_admin, qlsched_observer;

-- The dispatcher's role: reads the runs it dispatches, moves their status on, records attempts
-- and events (docs/DESIGN.md §3.4).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'qlsched_dispatcher') THEN
        BEGIN
            CREATE ROLE qlsched_dispatcher NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created concurrently by another migrator: the same role we wanted
        END;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO qlsched_dispatcher', current_schema());
END $$;
GRANT SELECT, UPDATE ON runs TO qlsched_dispatcher;
GRANT SELECT, INSERT, UPDATE ON attempts TO qlsched_dispatcher;
GRANT SELECT, INSERT ON run_events TO qlsched_dispatcher;
