-- qlsched 0004: occurrence accounting (docs/DESIGN.md §4.4). Every occurrence of a
-- trigger's revision becomes a run or lies inside a misfire record, and the accounting check
-- needs to know where a revision's accounting starts.

-- The first cursor of the schedule row's current revision: the occurrence accounting starts at.
-- Set by the admission that initializes the cursor, cleared by publish with the cursor. Rows
-- that had a cursor before this migration start their accounting at that cursor.
ALTER TABLE trigger_schedules ADD COLUMN accounted_from_ms bigint;
UPDATE trigger_schedules SET accounted_from_ms = next_fire_at_ms WHERE next_fire_at_ms IS NOT NULL;

-- One row per decision that passed occurrences over, written by the admission that moved the
-- cursor past them, in its transaction: never a row per occurrence.
CREATE TABLE misfires (
    misfire_id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id          text NOT NULL,
    trigger_id          text NOT NULL,
    trigger_revision    bigint NOT NULL CHECK (trigger_revision >= 1),
    -- The first and last occurrence passed over, and how many lie in between, both included.
    first_occurrence_ms bigint NOT NULL,
    last_occurrence_ms  bigint NOT NULL,
    occurrences         bigint NOT NULL CHECK (occurrences >= 1),
    -- False when the decision stopped counting at its cap: `occurrences` is then a lower bound.
    occurrences_exact   boolean NOT NULL,
    policy              text NOT NULL CHECK (policy IN ('skip', 'fire_once')),
    reason              text NOT NULL CHECK (reason IN ('beyond_grace')),
    -- The claim owner whose decision it was, and the database time the decision was taken at
    -- (the claim's time) and committed at.
    owner               text NOT NULL,
    decided_at_ms       bigint NOT NULL,
    recorded_at_ms      bigint NOT NULL,
    CONSTRAINT misfires_span_ordered CHECK (first_occurrence_ms <= last_occurrence_ms)
);

-- inspect trigger and the accounting check read one trigger's records, newest first.
CREATE INDEX misfires_trigger ON misfires (project_id, trigger_id, misfire_id DESC);
-- Retention (records older than its bound are deleted by the replicas) and `--since`.
CREATE INDEX misfires_recorded ON misfires (recorded_at_ms);

-- The replicas write records and delete those past retention; everybody else reads them.
GRANT SELECT, INSERT, DELETE ON misfires TO qlsched_runtime;
GRANT SELECT ON misfires TO qlsched_admin, qlsched_observer;

-- Statistics for the tables publish changes, right after it changes them, so the claim's plan
-- never starts from an empty guess. ANALYZE needs the tables' owner, which the publisher is not:
-- this function runs as the migrator who owns them, and does nothing else.
CREATE FUNCTION analyze_definitions() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    ANALYZE projects, tasks, triggers, trigger_schedules;
END $$;
DO $$
BEGIN
    -- A SECURITY DEFINER function must not resolve names through the caller's search_path.
    EXECUTE format('ALTER FUNCTION analyze_definitions() SET search_path = %I, pg_catalog',
                   current_schema());
END $$;
REVOKE ALL ON FUNCTION analyze_definitions() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analyze_definitions() TO qlsched_admin;
