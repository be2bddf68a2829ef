-- qlsched 0006: the replica registry (docs/DESIGN.md §3.1): one row per replica, so operators can
-- see which replicas are alive instead of inferring them from recent claims.

-- Written by the replica itself: registered at start, a heartbeat at most once per cadence carried
-- in the claim's round trip, the state moved to draining and stopped by a SIGTERM. Times are the
-- database clock. Stopped rows are forgotten after a day, and any row whose heartbeat stopped a
-- week ago, by the replicas' housekeeping.
CREATE TABLE replicas (
    owner            text PRIMARY KEY CHECK (owner <> ''),
    host             text NOT NULL,
    pid              integer NOT NULL,
    version          text NOT NULL,
    started_at_ms    bigint NOT NULL,
    heartbeat_at_ms  bigint NOT NULL,
    last_round_at_ms bigint,
    state            text NOT NULL CHECK (state IN ('running', 'draining', 'stopped')),
    lease_ms         bigint NOT NULL CHECK (lease_ms > 0),
    cadence_ms       bigint NOT NULL CHECK (cadence_ms > 0),
    rounds           bigint NOT NULL DEFAULT 0,
    failed_rounds    bigint NOT NULL DEFAULT 0,
    admissions       bigint NOT NULL DEFAULT 0,
    misfires         bigint NOT NULL DEFAULT 0,
    fence_losses     bigint NOT NULL DEFAULT 0,
    last_error       text
);

GRANT SELECT, INSERT, UPDATE, DELETE ON replicas TO qlsched_runtime;
GRANT SELECT ON replicas TO qlsched_admin, qlsched_observer;
