-- qlsched 0008: an admission whose claim still holds its fence but whose definitions no longer
-- admit it (the project not active, the trigger disabled or at another revision, the task
-- changed, the execution revision's stored digest not matching its spec) is told apart from a
-- lost fence: the admission statement calls this function for such a row, which raises
-- definition_refused (QLD01) naming the row and what failed, so that it is logged, counted and
-- exits as what it is, and the whole transaction rolls back as before.
--
-- Replicas of the previous release do not call it and may keep running beside this one: for
-- them such a row stays a lost fence, as it was.
CREATE FUNCTION admission_definition_refused(project_id text, trigger_id text,
                                             project_active boolean, trigger_current boolean,
                                             task_current boolean, digest_matches boolean)
    RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    failed text[] := '{}';
BEGIN
    IF NOT coalesce(project_active, false) THEN
        failed := failed || 'the project is not active'::text;
    END IF;
    IF NOT coalesce(trigger_current, false) THEN
        failed := failed || 'the trigger is disabled or not at the claimed revision'::text;
    END IF;
    IF NOT coalesce(task_current, false) THEN
        failed := failed || 'the task is not at the claimed revision or execution revision'::text;
    END IF;
    IF NOT coalesce(digest_matches, false) THEN
        failed := failed || 'the execution revision is not a remote_worker whose digest matches its spec'::text;
    END IF;
    RAISE EXCEPTION '%/% holds its claim fence and its definitions no longer admit it',
        project_id, trigger_id
        USING ERRCODE = 'QLD01',
              DETAIL = array_to_string(failed, '; '),
              HINT = 'look at `qlsched inspect trigger PROJECT/TRIGGER`; a digest that does not '
                     'match its spec means the execution revision was changed outside qlsched';
END $$;
