-- What the reconciler needs: this installation's id, the namespaces palisade labelled for a
-- boundary, the last error of each cluster, and each policy's install status per cluster.

CREATE TABLE settings (
    key   TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);

ALTER TABLE clusters ADD COLUMN last_error TEXT;

CREATE TABLE namespaces (
    cluster    TEXT COLLATE "C" NOT NULL REFERENCES clusters (name),
    name       TEXT COLLATE "C" NOT NULL,
    boundary   TEXT COLLATE "C" NOT NULL REFERENCES boundaries (name),
    created_at TEXT NOT NULL,
    PRIMARY KEY (cluster, name)
);
CREATE INDEX namespaces_by_boundary ON namespaces (boundary, cluster, name);

-- Written only by the reconciler; `policy_etag` is the version the status is about, so a
-- status of an older version reads as `pending`.
CREATE TABLE policy_status (
    boundary    TEXT COLLATE "C" NOT NULL,
    policy      TEXT COLLATE "C" NOT NULL,
    cluster     TEXT COLLATE "C" NOT NULL,
    policy_etag TEXT NOT NULL,
    status      TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (boundary, policy, cluster)
);
CREATE INDEX policy_status_by_cluster ON policy_status (cluster, boundary);
