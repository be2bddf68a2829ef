-- qlsched 0002: the four group roles of DESIGN.md section 3 and their exact grants.
-- Roles are cluster-wide while this schema is per database: create a role only when missing, and
-- tolerate another migrator (of another database) creating it at the same moment.
DO $$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['qlsched_admin', 'qlsched_runtime', 'qlsched_observer',
                                     'qlsched_worker_ingress'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- created concurrently by another migrator: the same role we wanted
            END;
        END IF;
    END LOOP;
    EXECUTE format('REVOKE ALL ON SCHEMA %I FROM PUBLIC', current_schema());
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO qlsched_admin, qlsched_runtime, qlsched_observer',
                   current_schema());
END $$;

-- Admin: publishes definitions; creates and resets schedule rows.
GRANT SELECT, INSERT, UPDATE ON projects, tasks, triggers TO qlsched_admin;
GRANT SELECT, INSERT ON execution_revisions TO qlsched_admin;
GRANT SELECT, INSERT, UPDATE, DELETE ON trigger_schedules TO qlsched_admin;
GRANT SELECT ON runs, attempts, run_events, schema_migrations TO qlsched_admin;
GRANT SELECT, INSERT ON schedule_audit TO qlsched_admin;

-- Runtime: reads definitions, claims and advances schedule rows (never creates or deletes one),
-- admits runs.
GRANT SELECT ON projects, execution_revisions, tasks, triggers, schema_migrations TO qlsched_runtime;
GRANT SELECT, UPDATE ON trigger_schedules TO qlsched_runtime;
GRANT SELECT, INSERT ON runs, attempts, run_events TO qlsched_runtime;
GRANT SELECT, INSERT ON schedule_audit TO qlsched_runtime;

-- Observer: read-only, for inspect and top.
GRANT SELECT ON projects, execution_revisions, tasks, triggers, trigger_schedules, runs, attempts,
    run_events, schedule_audit, schema_migrations TO qlsched_observer;

GRANT USAGE ON SEQUENCE schedule_audit_audit_id_seq TO qlsched_admin, qlsched_runtime;

-- Worker ingress: no privilege on any scheduler table, by design (ADR-0105).
