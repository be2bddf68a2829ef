-- qlsched 0016: a schedule row's state and how far its cursor is ahead of now, each written once
-- (docs/DESIGN.md §3.1, "Claimable rows"), for every read that shows or filters by them
-- (`inspect schedules`, `inspect trigger`, `top`).

-- The row's state at this statement's instant, the first that applies winning, in the order of
-- `ScheduleState` in the store: `paused` (an operator's pause), `disabled` (parked otherwise:
-- not claimable, whatever its cursor or claim say), `claimed` (a claim not expired), `expired_claim`,
-- `uninitialized` (no cursor), `due` (cursor at or before now), `not_due`.
-- Arguments: the row's paused_at_ms, claimable, claim_token, claim_expires_at_ms and
-- next_fire_at_ms.
-- Written to be inlined by the planner into the statement that calls it (one SELECT of an
-- expression, STABLE as `now_ms()` is, not STRICT, no SET clause, no SECURITY DEFINER): the
-- CASE lands in the plan as if written there, so a state filter is a filter on the index walk
-- that chooses the rows and stops at its limit, not a function call per row. Inlining resolves
-- `now_ms()` through the caller's search_path, which names this schema since it found this
-- function there.
CREATE FUNCTION schedule_state(bigint, boolean, uuid, bigint, bigint) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN $1 IS NOT NULL THEN 'paused'
                WHEN NOT $2 THEN 'disabled'
                WHEN $3 IS NOT NULL AND $4 > now_ms() THEN 'claimed'
                WHEN $3 IS NOT NULL THEN 'expired_claim'
                WHEN $5 IS NULL THEN 'uninitialized'
                WHEN $5 <= now_ms() THEN 'due'
                ELSE 'not_due' END
$$;

-- How far the row's cursor is ahead of now, negative when overdue; null for a parked row, which
-- is never due whatever its cursor says, and for a row with no cursor. Inlined as the one above.
-- Arguments: the row's claimable and next_fire_at_ms.
CREATE FUNCTION schedule_due_in_ms(boolean, bigint) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN $1 THEN $2 - now_ms() END
$$;

-- EXECUTE stays with PUBLIC, as for `now_ms()` and `schedule_claimable()`: only the roles
-- granted USAGE on this schema reach the functions, and every one of them reads schedule rows.
-- (The planner inlines a function only for a caller that may execute it.)
