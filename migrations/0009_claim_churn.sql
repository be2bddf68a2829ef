-- qlsched 0009: the schedule table is vacuumed as often as it churns, and a replica's registry row
-- says the batch it claims with (docs/PERFORMANCE.md, "Why the lag grew"; docs/DESIGN.md §3.1).
--
-- Every occurrence updates its schedule row twice (the claim, then the admission), and the
-- admission moves the cursor, an indexed column, so each occurrence leaves dead entries at the
-- head of the claim-order index, where every claim starts its walk; until a vacuum removes them
-- every claim steps over all of them. At the default thresholds (a fifth of the table) and cost
-- delay, a table of 100,000 every-minute triggers waited minutes for its vacuum while each claim
-- grew slower. A fixed threshold, no cost delay: a vacuum about once a naptime under churn, and
-- none on a quiet table. Storage parameters only: replicas of the previous release run on.
ALTER TABLE trigger_schedules SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_cost_delay = 0
);

-- The batch the replica's next round claims with (docs/PERFORMANCE.md, "The adaptive batch"),
-- written with its heartbeat; null for a replica of a release that does not say.
ALTER TABLE replicas ADD COLUMN batch integer;
