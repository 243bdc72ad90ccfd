-- palisade's PostgreSQL schema. Timestamps are RFC 3339 UTC text; documents are JSON text.
-- Names use the "C" collation so that lists sort byte by byte, as on SQLite.

CREATE TABLE boundaries (
    name         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    display_name TEXT,
    created_at   TEXT NOT NULL
);

CREATE TABLE policies (
    boundary      TEXT COLLATE "C" NOT NULL REFERENCES boundaries (name),
    name          TEXT COLLATE "C" NOT NULL,
    spec_json     TEXT NOT NULL,
    metadata_json TEXT NOT NULL,
    etag          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    updated_by    TEXT NOT NULL,
    PRIMARY KEY (boundary, name)
);

-- Outlives the policy (and its boundary): it is the audit trail.
CREATE TABLE policy_history (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    boundary    TEXT COLLATE "C" NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    actor       TEXT NOT NULL,
    at          TEXT NOT NULL,
    before_json TEXT,
    after_json  TEXT
);
CREATE INDEX policy_history_by_policy ON policy_history (boundary, name, seq);

CREATE TABLE resources (
    boundary      TEXT COLLATE "C" NOT NULL REFERENCES boundaries (name),
    resource_type TEXT COLLATE "C" NOT NULL,
    name          TEXT COLLATE "C" NOT NULL,
    body_json     TEXT NOT NULL,
    etag          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (boundary, resource_type, name)
);

-- Every committed change. Writers of one boundary hold its row lock (SELECT ... FOR UPDATE)
-- from before they draw `seq` until they commit, so within a boundary `seq` follows commit
-- order.
CREATE TABLE changes (
    seq       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    boundary  TEXT COLLATE "C" NOT NULL,
    kind      TEXT NOT NULL,
    subject   TEXT NOT NULL,
    body_json TEXT,
    at        TEXT NOT NULL
);
CREATE INDEX changes_by_boundary ON changes (boundary, seq);

CREATE TABLE tokens (
    id            TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    secret_sha256 TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL,
    boundary      TEXT COLLATE "C" REFERENCES boundaries (name),
    created_at    TEXT COLLATE "C" NOT NULL,
    expires_at    TEXT,
    created_by    TEXT NOT NULL
);
CREATE INDEX tokens_by_boundary ON tokens (boundary, created_at, id);

CREATE TABLE clusters (
    name               TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    kubeconfig_sealed  BYTEA NOT NULL,
    kubernetes_version TEXT,
    admission_enforced BOOLEAN,
    admission_reason   TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
);

CREATE TABLE boundary_clusters (
    boundary    TEXT COLLATE "C" NOT NULL REFERENCES boundaries (name),
    cluster     TEXT COLLATE "C" NOT NULL REFERENCES clusters (name),
    attached_at TEXT NOT NULL,
    PRIMARY KEY (boundary, cluster)
);
CREATE INDEX boundary_clusters_by_cluster ON boundary_clusters (cluster);
