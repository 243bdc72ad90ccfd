-- Where each exception to admission rules is installed (SPEC 7): written by the reconciler
-- after each successful pass of a cluster (the cluster's rows replaced whole). An exception
-- that has ended but still has a row here could not be removed from that cluster yet.
CREATE TABLE exception_installs (
    cluster      TEXT NOT NULL,
    boundary     TEXT NOT NULL,
    exception    TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    installed_at TEXT NOT NULL,
    PRIMARY KEY (cluster, boundary, exception)
);
CREATE INDEX exception_installs_by_boundary ON exception_installs (boundary, exception);
