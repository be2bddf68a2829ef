-- qlsched 0003: indexes for the operator's read models (inspect, top).

-- Disabled triggers are few and their schedule rows never advance: the summary finds them through
-- this small index instead of reading every trigger to learn which schedule rows are switched off.
CREATE INDEX triggers_disabled ON triggers (project_id, trigger_id) WHERE NOT enabled;
