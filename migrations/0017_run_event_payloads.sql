-- qlsched 0017: the payloads of a run's `run.created` and `run.queued` events, each written once
-- (docs/DESIGN.md §3.1, `run_events`), for every admission that writes them: the scheduler's
-- (`store::admit`), `fire` and `backfill` (`store::control`).
--
-- `run.created` has one shape whatever admitted the run, every key always present, JSON null
-- where it does not apply: the run's idempotency key, its occurrence (`scheduled_for_ms`), the
-- decision that admitted it (the misfire label of a cron run; `manual` or `backfill` for the
-- others), its origin as `runs.origin` holds it (`cron`, `manual`, `backfill`), the actor (the
-- claim owner for a cron run, the operator for the others), and the claim it was admitted under
-- (owner and version; null for a run admitted outside a claim). Events written before this
-- migration, and by replicas of 0.2.0 still running beside it, lack the keys of the other shape:
-- every reader reads a key with `->>`, for which an absent key and a JSON null are both null.
--
-- Written to be inlined by the planner into the admission's INSERT, as `schedule_state()` of
-- migration 0016 is (one SELECT of an expression, STABLE as `jsonb_build_object` is, not STRICT,
-- no SET clause, no SECURITY DEFINER, each argument used once): the object is built in the plan
-- as if written there, not by a function call per run.
CREATE FUNCTION run_created_payload(idempotency_key text, scheduled_for_ms bigint, decision text,
                                    origin text, actor text, claim_owner text,
                                    claim_version bigint) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT jsonb_build_object('idempotency_key', idempotency_key,
                              'scheduled_for_ms', scheduled_for_ms, 'decision', decision,
                              'origin', origin, 'actor', actor, 'claim_owner', claim_owner,
                              'claim_version', claim_version)
$$;

-- `run.queued`: the run's first attempt and its executor, the only one admissions create.
-- Inlined as the one above.
CREATE FUNCTION run_queued_payload(attempt_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT jsonb_build_object('attempt_id', attempt_id, 'executor', 'remote_worker')
$$;

-- EXECUTE stays with PUBLIC, as for `schedule_state()`: only the roles granted USAGE on this
-- schema reach the functions, and the ones that admit (the runtime's and the admin's) must.
-- (The planner inlines a function only for a caller that may execute it.)
