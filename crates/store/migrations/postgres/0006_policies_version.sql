-- A number that changes with every write to a boundary's policies, kept by the database
-- itself (a trigger), so that a policy row written by any means changes it. A guarded write
-- reads it with the boundary and reuses the decisions it made at the same number instead of
-- reading the policies again. A boundary created by palisade starts at a random number, so a
-- boundary deleted and created again under its name does not meet its old numbers.
ALTER TABLE boundaries ADD COLUMN policies_version BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION palisade_policies_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE boundaries SET policies_version = policies_version + 1 WHERE name = OLD.boundary;
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.boundary IS DISTINCT FROM OLD.boundary) THEN
        UPDATE boundaries SET policies_version = policies_version + 1 WHERE name = NEW.boundary;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER policies_version AFTER INSERT OR UPDATE OR DELETE ON policies
FOR EACH ROW EXECUTE FUNCTION palisade_policies_version();
