-- A policy's staged rollout (SPEC 8): how far the change of its current version has come, as
-- JSON text the application reads (the store does not interpret it). NULL: no rollout; the
-- current version is in force everywhere.
ALTER TABLE policies ADD COLUMN rollout_json TEXT;
