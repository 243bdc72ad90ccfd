-- A staged rollout's moves (SPEC 8: a promotion, a pause, an abort) are entries of the
-- policy's history: the spec they concern, unchanged, and what happened. NULL for every save.
ALTER TABLE policy_history ADD COLUMN event TEXT;
