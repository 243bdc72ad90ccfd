-- Repairs the reconciler made in each cluster (something palisade owns found changed by someone
-- else and put back, e.g. a namespace's boundary label): how many, and the last one (what and
-- when).
ALTER TABLE clusters ADD COLUMN repairs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE clusters ADD COLUMN last_repair TEXT;
ALTER TABLE clusters ADD COLUMN last_repair_at TEXT;
