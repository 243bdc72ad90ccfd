-- Written only by the reconciler's audit: what each admission policy's current rules find
-- among the objects already stored in a cluster. `findings` is the JSON list the API answers;
-- `policy_etag` is the version audited, so a report of an older version is marked as such.
CREATE TABLE audit_report (
    boundary    TEXT NOT NULL,
    policy      TEXT NOT NULL,
    cluster     TEXT NOT NULL,
    policy_etag TEXT NOT NULL,
    taken_at    TEXT NOT NULL,
    error       TEXT,
    checked     BIGINT NOT NULL,
    violations  BIGINT NOT NULL,
    findings    TEXT NOT NULL,
    PRIMARY KEY (boundary, policy, cluster)
);
CREATE INDEX audit_report_by_cluster ON audit_report (cluster, boundary);
