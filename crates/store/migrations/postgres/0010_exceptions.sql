-- Exceptions (SPEC 7): one resource or the objects a match picks let past one policy of the
-- boundary until `expires_at`. `state` is `requested` (written by a developer, applies
-- nothing) or `approved`; the requester and the approver are kept, never the same person.
CREATE TABLE exceptions (
    boundary     TEXT COLLATE "C" NOT NULL REFERENCES boundaries (name),
    name         TEXT COLLATE "C" NOT NULL,
    policy       TEXT COLLATE "C" NOT NULL,
    spec_json    TEXT NOT NULL,
    expires_at   TEXT COLLATE "C" NOT NULL,
    etag         TEXT NOT NULL,
    state        TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    approved_by  TEXT,
    approved_at  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    updated_by   TEXT NOT NULL,
    PRIMARY KEY (boundary, name)
);

-- Outlives the exception (and its boundary): the audit trail of who asked, who approved.
CREATE TABLE exception_history (
    seq         BIGSERIAL PRIMARY KEY,
    boundary    TEXT COLLATE "C" NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    actor       TEXT NOT NULL,
    at          TEXT NOT NULL,
    action      TEXT NOT NULL,
    before_json TEXT,
    after_json  TEXT
);
CREATE INDEX exception_history_by_exception ON exception_history (boundary, name, seq);

-- A guarded write decides at the boundary's policies' version: exceptions change it too.
CREATE TRIGGER exceptions_version AFTER INSERT OR UPDATE OR DELETE ON exceptions
FOR EACH ROW EXECUTE FUNCTION palisade_policies_version();
