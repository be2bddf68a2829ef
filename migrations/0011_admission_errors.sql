-- qlsched 0011: the last server error that refused a trigger's admission, where every replica and
-- every operator reads it (docs/RELIABILITY.md, "A row the database refuses").
--
-- A replica admits a batch in one transaction; when the server refuses it with any error that is
-- not the server's own state (a user trigger on `runs` raising P0001, out of predicate-lock memory
-- 53200, a constraint), the rows are admitted one by one, and a row refused on its own is recorded
-- here and its claim left to its lease, which paces the next attempt. One row per trigger,
-- overwritten by the next failure: the occurrence it failed on (the schedule row's cursor and
-- revision), the SQLSTATE and message, the replica, when this streak of failures on that occurrence
-- began and how many there were. The error is current while the schedule row is still at that
-- revision and cursor (nothing writes here when an admission succeeds: the cursor moving says it).
--
-- A table of its own: the hot schedule rows stay as narrow as they were. Replicas of the previous
-- release never read or write it and may keep running beside it.
CREATE TABLE admission_errors (
    project_id         text NOT NULL,
    trigger_id         text NOT NULL,
    trigger_revision   bigint NOT NULL,
    cursor_ms          bigint,
    sqlstate           text NOT NULL CHECK (sqlstate ~ '^[0-9A-Z]{5}$'),
    message            text NOT NULL,
    owner              text NOT NULL,
    first_failed_at_ms bigint NOT NULL,
    last_failed_at_ms  bigint NOT NULL CHECK (last_failed_at_ms >= first_failed_at_ms),
    failures           bigint NOT NULL CHECK (failures > 0),
    PRIMARY KEY (project_id, trigger_id),
    FOREIGN KEY (project_id, trigger_id) REFERENCES triggers ON DELETE CASCADE
);

GRANT SELECT, INSERT, UPDATE ON admission_errors TO qlsched_runtime;
GRANT SELECT ON admission_errors TO qlsched_admin, qlsched_observer;
