-- palisade's SQLite schema. Timestamps are RFC 3339 UTC text; documents are JSON text.
-- TEXT compares byte by byte (BINARY), the same order as the PostgreSQL schema's "C".

CREATE TABLE boundaries (
    name         TEXT NOT NULL PRIMARY KEY,
    display_name TEXT,
    created_at   TEXT NOT NULL
);

CREATE TABLE policies (
    boundary      TEXT NOT NULL REFERENCES boundaries (name),
    name          TEXT NOT NULL,
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
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    boundary    TEXT NOT NULL,
    name        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    at          TEXT NOT NULL,
    before_json TEXT,
    after_json  TEXT
);
CREATE INDEX policy_history_by_policy ON policy_history (boundary, name, seq);

CREATE TABLE resources (
    boundary      TEXT NOT NULL REFERENCES boundaries (name),
    resource_type TEXT NOT NULL,
    name          TEXT NOT NULL,
    body_json     TEXT NOT NULL,
    etag          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (boundary, resource_type, name)
);

-- Every committed change, in commit order: `seq` is written in the change's transaction and
-- AUTOINCREMENT never reuses a value.
CREATE TABLE changes (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    boundary  TEXT NOT NULL,
    kind      TEXT NOT NULL,
    subject   TEXT NOT NULL,
    body_json TEXT,
    at        TEXT NOT NULL
);
CREATE INDEX changes_by_boundary ON changes (boundary, seq);

CREATE TABLE tokens (
    id            TEXT NOT NULL PRIMARY KEY,
    secret_sha256 TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL,
    boundary      TEXT REFERENCES boundaries (name),
    created_at    TEXT NOT NULL,
    expires_at    TEXT,
    created_by    TEXT NOT NULL
);
CREATE INDEX tokens_by_boundary ON tokens (boundary, created_at, id);

CREATE TABLE clusters (
    name               TEXT NOT NULL PRIMARY KEY,
    kubeconfig_sealed  BLOB NOT NULL,
    kubernetes_version TEXT,
    admission_enforced BOOLEAN,
    admission_reason   TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
);

CREATE TABLE boundary_clusters (
    boundary    TEXT NOT NULL REFERENCES boundaries (name),
    cluster     TEXT NOT NULL REFERENCES clusters (name),
    attached_at TEXT NOT NULL,
    PRIMARY KEY (boundary, cluster)
);
CREATE INDEX boundary_clusters_by_cluster ON boundary_clusters (cluster);
