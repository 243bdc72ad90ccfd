-- Platform workloads (SPEC 5). `cluster` is where a workload resource is placed (NULL for
-- databases and for workloads with nowhere to run), so the reconciler reads one cluster's
-- workloads by index; `status` is what that cluster last said about it, written only by the
-- reconciler and never part of the etag.
ALTER TABLE resources ADD COLUMN cluster TEXT;
ALTER TABLE resources ADD COLUMN status TEXT;
ALTER TABLE resources ADD COLUMN status_at TEXT;
CREATE INDEX resources_by_cluster ON resources (cluster);

-- Code uploaded for a build (functions and static web apps), fetched by the build Job.
CREATE TABLE uploads (
    boundary   TEXT NOT NULL REFERENCES boundaries (name),
    id         TEXT NOT NULL,
    sha256     TEXT NOT NULL,
    size       BIGINT NOT NULL,
    content    BLOB NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (boundary, id)
);
