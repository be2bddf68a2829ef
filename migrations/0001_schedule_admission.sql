-- qlsched 0001: the durable state of ADR-0105 (DESIGN.md section 3).
-- Runs with search_path set to the target schema; nothing here names the schema.
-- Times are epoch milliseconds of the database clock, the only clock (ADR-0107).

-- Database time in epoch milliseconds, stable within one statement and fresh for the next:
-- every "now" the scheduler compares with a lease is taken here, never on a node.
CREATE FUNCTION now_ms() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint $$;

CREATE TABLE projects (
    project_id    text PRIMARY KEY CHECK (project_id ~ '^[A-Za-z0-9_.-]{1,128}$'),
    status        text NOT NULL CHECK (status IN ('active', 'suspended')),
    created_at_ms bigint NOT NULL,
    updated_at_ms bigint NOT NULL
);

-- Immutable: a changed spec is a new revision, never an edit (see the trigger below).
CREATE TABLE execution_revisions (
    execution_revision_id uuid PRIMARY KEY,
    project_id            text NOT NULL REFERENCES projects,
    kind                  text NOT NULL CHECK (kind = 'remote_worker'),
    spec                  jsonb NOT NULL,
    -- sha256 hex of spec::text, PostgreSQL's canonical jsonb rendering; admission recomputes it.
    digest                text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    created_at_ms         bigint NOT NULL
);

CREATE FUNCTION refuse_execution_revision_update() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'execution revisions are immutable; publish a new revision instead'
        USING ERRCODE = 'restrict_violation';
END $$;

CREATE TRIGGER execution_revisions_immutable
    BEFORE UPDATE ON execution_revisions
    FOR EACH ROW EXECUTE FUNCTION refuse_execution_revision_update();

CREATE TABLE tasks (
    project_id            text NOT NULL REFERENCES projects,
    task_id               text NOT NULL CHECK (task_id ~ '^[A-Za-z0-9_.-]{1,128}$'),
    revision              bigint NOT NULL CHECK (revision >= 1),
    content_digest        text NOT NULL,
    execution_revision_id uuid NOT NULL REFERENCES execution_revisions,
    created_at_ms         bigint NOT NULL,
    updated_at_ms         bigint NOT NULL,
    PRIMARY KEY (project_id, task_id)
);

CREATE TABLE triggers (
    project_id       text NOT NULL REFERENCES projects,
    trigger_id       text NOT NULL CHECK (trigger_id ~ '^[A-Za-z0-9_.-]{1,128}$'),
    task_id          text NOT NULL,
    revision         bigint NOT NULL CHECK (revision >= 1),
    kind             text NOT NULL CHECK (kind = 'cron'),
    provider         text NOT NULL CHECK (provider = 'builtin'),
    enabled          boolean NOT NULL,
    cron_expr        text NOT NULL,
    time_zone        text NOT NULL,
    misfire_policy   text NOT NULL CHECK (misfire_policy IN ('skip', 'fire_once')),
    misfire_grace_ms bigint NOT NULL CHECK (misfire_grace_ms >= 0),
    content_digest   text NOT NULL,
    created_at_ms    bigint NOT NULL,
    updated_at_ms    bigint NOT NULL,
    PRIMARY KEY (project_id, trigger_id),
    FOREIGN KEY (project_id, task_id) REFERENCES tasks
);

-- One row per trigger head. Neither the claim (claim_owner and claim_expires_at_ms are in the
-- per-owner index) nor the admission (the cursor is in the claim-order index) is a HOT update;
-- room left on each page (fillfactor 70) keeps a row's new version on its page, so claims and
-- admissions touch no more pages than the rows they change. docs/PERFORMANCE.md has what making
-- the claim HOT (dropping the per-owner index) and other fill factors measured: no difference.
CREATE TABLE trigger_schedules (
    project_id           text NOT NULL,
    trigger_id           text NOT NULL,
    trigger_revision     bigint NOT NULL CHECK (trigger_revision >= 1),
    next_fire_at_ms      bigint,
    last_scheduled_at_ms bigint,
    state_version        bigint NOT NULL DEFAULT 0 CHECK (state_version >= 0),
    claim_owner          text,
    claim_token          uuid,
    claim_version        bigint NOT NULL DEFAULT 0 CHECK (claim_version >= 0),
    claim_expires_at_ms  bigint,
    updated_at_ms        bigint NOT NULL,
    PRIMARY KEY (project_id, trigger_id),
    FOREIGN KEY (project_id, trigger_id) REFERENCES triggers,
    -- A claim is owner, token and expiry together, or nothing: never half-written.
    CONSTRAINT trigger_schedules_claim_whole CHECK (
        (claim_owner IS NULL) = (claim_token IS NULL)
        AND (claim_token IS NULL) = (claim_expires_at_ms IS NULL)),
    CONSTRAINT trigger_schedules_claim_owner_nonempty CHECK (claim_owner <> ''),
    -- The cursor never falls behind the last admitted occurrence.
    CONSTRAINT trigger_schedules_cursor_ahead CHECK (
        next_fire_at_ms IS NULL OR last_scheduled_at_ms IS NULL
        OR next_fire_at_ms > last_scheduled_at_ms)
) WITH (fillfactor = 70);

-- The claim order of ADR-0105: uninitialized rows first, then the most overdue.
CREATE INDEX trigger_schedules_claim_order
    ON trigger_schedules (next_fire_at_ms NULLS FIRST, project_id, trigger_id);
-- Per-owner views (inspect claims, expire --owner, top) without scanning the table.
CREATE INDEX trigger_schedules_claim_owner
    ON trigger_schedules (claim_owner, claim_expires_at_ms) WHERE claim_owner IS NOT NULL;

CREATE TABLE runs (
    run_id                uuid PRIMARY KEY,
    project_id            text NOT NULL,
    trigger_id            text NOT NULL,
    trigger_revision      bigint NOT NULL CHECK (trigger_revision >= 1),
    task_id               text NOT NULL,
    task_revision         bigint NOT NULL CHECK (task_revision >= 1),
    execution_revision_id uuid NOT NULL,
    idempotency_key       text NOT NULL UNIQUE,
    status                text NOT NULL CHECK (status IN (
                              'queued', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')),
    scheduled_for_ms      bigint NOT NULL,
    created_at_ms         bigint NOT NULL,
    queued_at_ms          bigint
);

CREATE INDEX runs_trigger_scheduled ON runs (project_id, trigger_id, scheduled_for_ms DESC);
CREATE INDEX runs_created ON runs (created_at_ms);

CREATE TABLE attempts (
    attempt_id     uuid PRIMARY KEY,
    run_id         uuid NOT NULL REFERENCES runs,
    attempt_no     integer NOT NULL CHECK (attempt_no >= 1),
    executor       text NOT NULL CHECK (executor = 'remote_worker'),
    state          text NOT NULL CHECK (state IN (
                       'claimed', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled', 'expired')),
    -- The dispatcher's fields: all null at admission (startup recovery relies on it).
    worker_id      text,
    session_id     text,
    lease_id       text,
    offer_id       text,
    callback_token text,
    started_at_ms  bigint,
    result         jsonb,
    error          jsonb,
    created_at_ms  bigint NOT NULL,
    UNIQUE (run_id, attempt_no)
);

CREATE TABLE run_events (
    run_id  uuid NOT NULL REFERENCES runs,
    seq     integer NOT NULL CHECK (seq >= 1),
    type    text NOT NULL,
    at_ms   bigint NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (run_id, seq)
);

-- Every operator action on a schedule row: who, when, why, and the fence before and after.
CREATE TABLE schedule_audit (
    audit_id     bigserial PRIMARY KEY,
    project_id   text NOT NULL,
    trigger_id   text NOT NULL,
    action       text NOT NULL CHECK (action IN ('claim', 'admit', 'release', 'expire')),
    actor        text NOT NULL,
    db_user      text NOT NULL DEFAULT current_user,
    reason       text,
    at_ms        bigint NOT NULL,
    fence_before jsonb,
    fence_after  jsonb
);

CREATE INDEX schedule_audit_trigger ON schedule_audit (project_id, trigger_id, audit_id DESC);

-- Closes an admission statement (DESIGN.md section 4, Admit). Raises fence_lost (QLF01) when
-- fewer claimed rows passed their fence than were submitted, and QLF02 when the writes do not
-- add up to one run, one attempt and two events per fired occurrence, so that the whole
-- SERIALIZABLE transaction rolls back, even when its COMMIT was pipelined behind the statement.
CREATE FUNCTION admission_complete(submitted bigint, advanced bigint, fired bigint,
                                   runs bigint, attempts bigint, events bigint) RETURNS bigint
    LANGUAGE plpgsql AS $$
BEGIN
    IF advanced <> submitted THEN
        RAISE EXCEPTION 'claim fence lost: % of % claimed rows still hold their fence',
            advanced, submitted USING ERRCODE = 'QLF01';
    END IF;
    IF runs <> fired OR attempts <> fired OR events <> 2 * fired THEN
        RAISE EXCEPTION 'admission wrote % runs, % attempts and % events for % occurrences',
            runs, attempts, events, fired USING ERRCODE = 'QLF02';
    END IF;
    RETURN advanced;
END $$;
