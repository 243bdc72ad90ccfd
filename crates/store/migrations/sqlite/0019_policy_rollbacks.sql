-- A rollback (SPEC 8) is a save like any other, and its history entry says which earlier
-- version it restored; NULL for every other change and for the history stored before.
ALTER TABLE policy_history ADD COLUMN restored_version INTEGER;
