-- palisade's SQLite store as commit ef81048's migrations left it, with rows: made by
-- scripts/store-fixture.sh (sqlite3 .dump), read by crates/store/tests/contract/upgrade.rs.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE boundaries (
    name         TEXT NOT NULL PRIMARY KEY,
    display_name TEXT,
    created_at   TEXT NOT NULL
);
INSERT INTO boundaries VALUES('shop','Shop team','2026-12-02T18:00:00.000Z');
INSERT INTO boundaries VALUES('web',NULL,'2026-12-02T18:00:01.000Z');
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
INSERT INTO policies VALUES('shop','trusted','{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}},{"disallowLatestTag":{}}]}','{"labels":{"team":"shop"},"annotations":{}}','etag-trusted-2','2026-12-02T18:01:00.000Z','2026-12-02T18:02:00.000Z','tok-admin');
INSERT INTO policies VALUES('shop','plans','{"mode":"enforce","rules":[{"computePlans":{"allowed":{"app":["small","medium"]}}}]}','{"labels":{},"annotations":{}}','etag-plans-1','2026-12-02T18:01:30.000Z','2026-12-02T18:01:30.000Z','tok-admin');
CREATE TABLE policy_history (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    boundary    TEXT NOT NULL,
    name        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    at          TEXT NOT NULL,
    before_json TEXT,
    after_json  TEXT
);
INSERT INTO policy_history VALUES(1,'shop','trusted','tok-admin','2026-12-02T18:01:00.000Z',NULL,'{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}}]}');
INSERT INTO policy_history VALUES(2,'shop','plans','tok-admin','2026-12-02T18:01:30.000Z',NULL,'{"mode":"enforce","rules":[{"computePlans":{"allowed":{"app":["small","medium"]}}}]}');
INSERT INTO policy_history VALUES(3,'shop','trusted','tok-admin','2026-12-02T18:02:00.000Z','{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}}]}','{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}},{"disallowLatestTag":{}}]}');
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
INSERT INTO resources VALUES('shop','app','storefront','{"type":"app","name":"storefront","plan":"small"}','etag-r1','2026-12-02T18:03:00.000Z','2026-12-02T18:03:00.000Z');
INSERT INTO resources VALUES('shop','postgresql','orders','{"type":"postgresql","name":"orders","plan":"medium"}','etag-r2','2026-12-02T18:03:01.000Z','2026-12-02T18:03:01.000Z');
INSERT INTO resources VALUES('shop','container_instance','jobs','{"type":"container_instance","name":"jobs","components":[{"name":"a","plan":"small"},{"name":"b","plan":"large"}]}','etag-r3','2026-12-02T18:03:02.000Z','2026-12-02T18:03:02.000Z');
INSERT INTO resources VALUES('web','function','hook','{"type":"function","name":"hook","plan":"large"}','etag-r4','2026-12-02T18:03:03.000Z','2026-12-02T18:03:03.000Z');
CREATE TABLE changes (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    boundary  TEXT NOT NULL,
    kind      TEXT NOT NULL,
    subject   TEXT NOT NULL,
    body_json TEXT,
    at        TEXT NOT NULL
);
INSERT INTO changes VALUES(1,'shop','policy','trusted','{"etag":"etag-trusted-1"}','2026-12-02T18:01:00.000Z');
INSERT INTO changes VALUES(2,'shop','policy','plans','{"etag":"etag-plans-1"}','2026-12-02T18:01:30.000Z');
INSERT INTO changes VALUES(3,'shop','policy','trusted','{"etag":"etag-trusted-2"}','2026-12-02T18:02:00.000Z');
INSERT INTO changes VALUES(4,'shop','resource','app/storefront',NULL,'2026-12-02T18:03:00.000Z');
CREATE TABLE tokens (
    id            TEXT NOT NULL PRIMARY KEY,
    secret_sha256 TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL,
    boundary      TEXT REFERENCES boundaries (name),
    created_at    TEXT NOT NULL,
    expires_at    TEXT,
    created_by    TEXT NOT NULL
);
INSERT INTO tokens VALUES('tok-admin','ccce1cbb0e849a2f46ad55d94ba4407301cf934444c148d20f803c828c27f059','admin',NULL,'2026-12-02T18:00:00.000Z',NULL,'bootstrap');
INSERT INTO tokens VALUES('tok-dev','f5d415602d2c57c8f2f042b1f4f4a7f84e321a98fc61995112d9ce2e3602543a','developer','shop','2026-12-02T18:00:02.000Z','2099-01-01T00:00:00.000Z','tok-admin');
CREATE TABLE clusters (
    name               TEXT NOT NULL PRIMARY KEY,
    kubeconfig_sealed  BLOB NOT NULL,
    kubernetes_version TEXT,
    admission_enforced BOOLEAN,
    admission_reason   TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
);
INSERT INTO clusters VALUES('prod-1',X'7365616c6564206b756265636f6e666967','v1.30.14',1,NULL,'2026-12-02T18:04:00.000Z','2026-12-02T18:05:00.000Z');
CREATE TABLE boundary_clusters (
    boundary    TEXT NOT NULL REFERENCES boundaries (name),
    cluster     TEXT NOT NULL REFERENCES clusters (name),
    attached_at TEXT NOT NULL,
    PRIMARY KEY (boundary, cluster)
);
INSERT INTO boundary_clusters VALUES('shop','prod-1','2026-12-02T18:04:30.000Z');
CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, success BOOLEAN NOT NULL, checksum BLOB NOT NULL, execution_time BIGINT NOT NULL);
INSERT INTO _sqlx_migrations VALUES(1,'initial','2026-12-02 18:00:00',1,X'dd44d591d22ebe590580cc9d1560fe793351e750fcf1849a2821c47d6b16d570da45bcf760588d182113acec55fc7f07',1000000);
DELETE FROM sqlite_sequence;
INSERT INTO sqlite_sequence VALUES('policy_history',3);
INSERT INTO sqlite_sequence VALUES('changes',4);
CREATE INDEX policy_history_by_policy ON policy_history (boundary, name, seq);
CREATE INDEX changes_by_boundary ON changes (boundary, seq);
CREATE INDEX tokens_by_boundary ON tokens (boundary, created_at, id);
CREATE INDEX boundary_clusters_by_cluster ON boundary_clusters (cluster);
COMMIT;
