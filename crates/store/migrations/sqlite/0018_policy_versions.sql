-- Every change of a policy makes a new version (SPEC 8): 1, 2, … per policy name, kept on the
-- policy and on each history entry that saved a spec (a deletion saves none and has none). A
-- policy deleted and made again numbers on from its history. The history stored so far is
-- numbered in the order it was written; a policy takes its history's last version.
ALTER TABLE policy_history ADD COLUMN version INTEGER;
UPDATE policy_history SET version = (
    SELECT COUNT(*) FROM policy_history AS earlier
    WHERE earlier.boundary = policy_history.boundary
      AND earlier.name = policy_history.name
      AND earlier.after_json IS NOT NULL
      AND earlier.seq <= policy_history.seq)
WHERE after_json IS NOT NULL;
CREATE INDEX policy_history_by_version ON policy_history (boundary, name, version);

ALTER TABLE policies ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
UPDATE policies SET version = COALESCE(
    (SELECT MAX(h.version) FROM policy_history AS h
     WHERE h.boundary = policies.boundary AND h.name = policies.name),
    1);
