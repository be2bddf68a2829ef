-- qlsched 0015: what each replica did, minute by minute, so that `top`'s trends are exact and
-- there the moment it opens (docs/OPERATIONS.md, "The dashboard").
--
-- One row per replica and minute of database time, written by the replica's heartbeat (at most
-- once a cadence, in its claim's round trip, in the heartbeat's own statement: never in an
-- admission transaction) as an upsert that adds what the rounds which claimed in that minute did:
-- runs admitted, misfire records written and the occurrences they passed over, fence losses,
-- failed rounds, and the admission lag (claim time minus occurrence) as a fixed log-scale
-- histogram, `core::minutes::LAG_BOUNDS_MS`, plus the largest lag, so that percentiles merge
-- across replicas and minutes. A minute with nothing to say is not written. The lag counts are
-- integers (one replica admits far fewer than 2^31 runs a minute): PostgreSQL sums integers into
-- a bigint, but bigints into a numeric, which made the trends' read of a day 40% slower.
--
-- The primary key leads with the minute: the trends read a window as one range of it, whatever
-- the size of `runs`. The replicas' housekeeping deletes rows older than a week
-- (`core::minutes::RETENTION_MS`). A new table that nothing of the
-- previous release reads or writes: its replicas may keep running beside it (their minutes are
-- not counted).
CREATE TABLE replica_minutes (
    minute_ms               bigint NOT NULL CHECK (minute_ms % 60000 = 0),
    owner                   text NOT NULL CHECK (owner <> ''),
    admissions              bigint NOT NULL CHECK (admissions >= 0),
    misfires                bigint NOT NULL CHECK (misfires >= 0),
    occurrences_passed_over bigint NOT NULL CHECK (occurrences_passed_over >= 0),
    fence_losses            bigint NOT NULL CHECK (fence_losses >= 0),
    failed_rounds           bigint NOT NULL CHECK (failed_rounds >= 0),
    lag_counts              integer[] NOT NULL
        CHECK (array_ndims(lag_counts) = 1 AND array_length(lag_counts, 1) = 40
               AND array_lower(lag_counts, 1) = 1),
    lag_max_ms              bigint,
    PRIMARY KEY (minute_ms, owner)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON replica_minutes TO qlsched_runtime;
GRANT SELECT ON replica_minutes TO qlsched_admin, qlsched_observer;
