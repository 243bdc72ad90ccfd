-- A number that changes with every write to a boundary's policies, kept by the database
-- itself (triggers), so that a policy row written by any means changes it. A guarded write
-- reads it with the boundary and reuses the decisions it made at the same number instead of
-- reading the policies again. A boundary created by palisade starts at a random number, so a
-- boundary deleted and created again under its name does not meet its old numbers.
ALTER TABLE boundaries ADD COLUMN policies_version INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER policies_version_insert AFTER INSERT ON policies
BEGIN
    UPDATE boundaries SET policies_version = policies_version + 1 WHERE name = NEW.boundary;
END;

CREATE TRIGGER policies_version_update AFTER UPDATE ON policies
BEGIN
    UPDATE boundaries SET policies_version = policies_version + 1
    WHERE name = OLD.boundary OR name = NEW.boundary;
END;

CREATE TRIGGER policies_version_delete AFTER DELETE ON policies
BEGIN
    UPDATE boundaries SET policies_version = policies_version + 1 WHERE name = OLD.boundary;
END;
