-- qlsched 0013: each replica says which release it is and which schema it was built for, and
-- the registry forgets a dead one after a bound its operator sets (docs/OPERATIONS.md, "Replica
-- registry"), instead of a week.

-- Written by the registration of this release and later: the schema version the binary carries
-- (its last migration), and how long after its last heartbeat a replica that stopped beating
-- without a stop (killed, its host lost) leaves the registry (`run --forget-stale-after`).
-- NULL for a replica of an earlier release, whose registration names neither: such a row is
-- forgotten after a week, as that release did. Added nullable, so the previous release's
-- registration and heartbeat run on unchanged beside this migration.
ALTER TABLE replicas ADD COLUMN schema_version bigint;
ALTER TABLE replicas ADD COLUMN forget_after_ms bigint CHECK (forget_after_ms > 0);

-- The one rule of "this row is gone from the registry": a stopped replica a day after it
-- stopped, any other once its heartbeat is older than its own bound (a week when it set none).
-- The registry's reads leave such rows out and the replicas' housekeeping deletes them, so a
-- dead replica leaves `inspect replicas`, `top` and the metrics at its bound, even when no other
-- replica is running to delete it.
-- Arguments: the row's state, heartbeat_at_ms and forget_after_ms.
CREATE FUNCTION replica_forgotten(text, bigint, bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN $1 = 'stopped' THEN $2 < now_ms() - 86400000
                ELSE $2 < now_ms() - coalesce($3, 604800000) END
$$;
-- Called, qualified, from sessions whose search_path may not name this schema: `now_ms()`
-- resolves through this schema whatever the caller's path is.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION replica_forgotten(text, bigint, bigint) '
                   'SET search_path = %I, pg_catalog', current_schema());
END $$;

-- `expire --owner` forgets the replica whose claims it expires (a replica known to be dead).
GRANT DELETE ON replicas TO qlsched_admin;
