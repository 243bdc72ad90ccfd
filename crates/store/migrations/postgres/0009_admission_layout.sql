-- The admission layout the reconciler uses in each cluster (`per-policy`, `per-boundary` or
-- `shared`) and why, in words (e.g. `212 boundaries`, `chosen by --admission-layout`); both
-- absent until the reconciler has said.
ALTER TABLE clusters ADD COLUMN admission_layout TEXT;
ALTER TABLE clusters ADD COLUMN admission_layout_reason TEXT;
