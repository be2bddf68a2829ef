-- qlsched 0014: the upgrade gate becomes a floor (docs/OPERATIONS.md, "Upgrading"). Each
-- migration's ledger row names the oldest build that may keep admitting beside it, by that
-- build's latest migration version; a replica whose build is older than the highest floor among
-- the migrations applied after its own latest admits nothing, whatever lies between.

-- `migrate` adds the column in its first transaction, before any migration, and fills it for the
-- rows recorded before it from what its build knows (as it does the flag): every migration's row
-- is written with it, this one's included. Here it is only described and held to its meaning.
ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS upgrade_floor bigint;
COMMENT ON COLUMN schema_migrations.upgrade_floor IS
    'The oldest build, named by its latest migration version, that may keep admitting beside '
    'this migration once it is applied; NULL (a row no floor-aware migrate recorded) reads as the '
    'version itself: only builds that carry the migration.';
-- A floor above the migration's own version would stop builds that carry it; none may.
ALTER TABLE schema_migrations ADD CONSTRAINT schema_migrations_upgrade_floor_check
    CHECK (upgrade_floor <= version);
