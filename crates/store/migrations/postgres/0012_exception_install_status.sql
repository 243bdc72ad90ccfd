-- What the probe of each installed exception found in its cluster (SPEC 7: an active
-- exception reads `pending`, `enforced` or `error: ...` per cluster, as policies do).
-- Rows written before this column existed were never probed: `installed`.
ALTER TABLE exception_installs ADD COLUMN status TEXT NOT NULL DEFAULT 'installed';
