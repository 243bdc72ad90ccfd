-- palisade's PostgreSQL store as commit ef81048's migrations left it, with rows: made by
-- scripts/store-fixture.sh (pg_dump --inserts, psql's meta-commands and SET lines left
-- out), read by crates/store/tests/contract/upgrade.rs.

CREATE TABLE public._sqlx_migrations (
    version bigint NOT NULL,
    description text NOT NULL,
    installed_on timestamp with time zone DEFAULT now() NOT NULL,
    success boolean NOT NULL,
    checksum bytea NOT NULL,
    execution_time bigint NOT NULL
);

CREATE TABLE public.boundaries (
    name text NOT NULL COLLATE pg_catalog."C",
    display_name text,
    created_at text NOT NULL
);

CREATE TABLE public.boundary_clusters (
    boundary text NOT NULL COLLATE pg_catalog."C",
    cluster text NOT NULL COLLATE pg_catalog."C",
    attached_at text NOT NULL
);

CREATE TABLE public.changes (
    seq bigint NOT NULL,
    boundary text NOT NULL COLLATE pg_catalog."C",
    kind text NOT NULL,
    subject text NOT NULL,
    body_json text,
    at text NOT NULL
);

ALTER TABLE public.changes ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.changes_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.clusters (
    name text NOT NULL COLLATE pg_catalog."C",
    kubeconfig_sealed bytea NOT NULL,
    kubernetes_version text,
    admission_enforced boolean,
    admission_reason text,
    created_at text NOT NULL,
    updated_at text NOT NULL
);

CREATE TABLE public.policies (
    boundary text NOT NULL COLLATE pg_catalog."C",
    name text NOT NULL COLLATE pg_catalog."C",
    spec_json text NOT NULL,
    metadata_json text NOT NULL,
    etag text NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    updated_by text NOT NULL
);

CREATE TABLE public.policy_history (
    seq bigint NOT NULL,
    boundary text NOT NULL COLLATE pg_catalog."C",
    name text NOT NULL COLLATE pg_catalog."C",
    actor text NOT NULL,
    at text NOT NULL,
    before_json text,
    after_json text
);

ALTER TABLE public.policy_history ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.policy_history_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.resources (
    boundary text NOT NULL COLLATE pg_catalog."C",
    resource_type text NOT NULL COLLATE pg_catalog."C",
    name text NOT NULL COLLATE pg_catalog."C",
    body_json text NOT NULL,
    etag text NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL
);

CREATE TABLE public.tokens (
    id text NOT NULL COLLATE pg_catalog."C",
    secret_sha256 text NOT NULL,
    role text NOT NULL,
    boundary text COLLATE pg_catalog."C",
    created_at text NOT NULL COLLATE pg_catalog."C",
    expires_at text,
    created_by text NOT NULL
);

INSERT INTO public._sqlx_migrations VALUES (1, 'initial', '2026-12-02 18:00:00+00', true, '\x93d9f869d349ab4495ffb13f459dbdbc0c5f43529bb063aaf7efee7387fd85e3b21d78d82f09c1986d0ac7f3385b36e3', 1000000);

INSERT INTO public.boundaries VALUES ('shop', 'Shop team', '2026-12-02T18:00:00.000Z');
INSERT INTO public.boundaries VALUES ('web', NULL, '2026-12-02T18:00:01.000Z');

INSERT INTO public.boundary_clusters VALUES ('shop', 'prod-1', '2026-12-02T18:04:30.000Z');

INSERT INTO public.changes OVERRIDING SYSTEM VALUE VALUES (1, 'shop', 'policy', 'trusted', '{"etag":"etag-trusted-1"}', '2026-12-02T18:01:00.000Z');
INSERT INTO public.changes OVERRIDING SYSTEM VALUE VALUES (2, 'shop', 'policy', 'plans', '{"etag":"etag-plans-1"}', '2026-12-02T18:01:30.000Z');
INSERT INTO public.changes OVERRIDING SYSTEM VALUE VALUES (3, 'shop', 'policy', 'trusted', '{"etag":"etag-trusted-2"}', '2026-12-02T18:02:00.000Z');
INSERT INTO public.changes OVERRIDING SYSTEM VALUE VALUES (4, 'shop', 'resource', 'app/storefront', NULL, '2026-12-02T18:03:00.000Z');

INSERT INTO public.clusters VALUES ('prod-1', '\x7365616c6564206b756265636f6e666967', 'v1.30.14', true, NULL, '2026-12-02T18:04:00.000Z', '2026-12-02T18:05:00.000Z');

INSERT INTO public.policies VALUES ('shop', 'trusted', '{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}},{"disallowLatestTag":{}}]}', '{"labels":{"team":"shop"},"annotations":{}}', 'etag-trusted-2', '2026-12-02T18:01:00.000Z', '2026-12-02T18:02:00.000Z', 'tok-admin');
INSERT INTO public.policies VALUES ('shop', 'plans', '{"mode":"enforce","rules":[{"computePlans":{"allowed":{"app":["small","medium"]}}}]}', '{"labels":{},"annotations":{}}', 'etag-plans-1', '2026-12-02T18:01:30.000Z', '2026-12-02T18:01:30.000Z', 'tok-admin');

INSERT INTO public.policy_history OVERRIDING SYSTEM VALUE VALUES (1, 'shop', 'trusted', 'tok-admin', '2026-12-02T18:01:00.000Z', NULL, '{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}}]}');
INSERT INTO public.policy_history OVERRIDING SYSTEM VALUE VALUES (2, 'shop', 'plans', 'tok-admin', '2026-12-02T18:01:30.000Z', NULL, '{"mode":"enforce","rules":[{"computePlans":{"allowed":{"app":["small","medium"]}}}]}');
INSERT INTO public.policy_history OVERRIDING SYSTEM VALUE VALUES (3, 'shop', 'trusted', 'tok-admin', '2026-12-02T18:02:00.000Z', '{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}}]}', '{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}},{"disallowLatestTag":{}}]}');

INSERT INTO public.resources VALUES ('shop', 'app', 'storefront', '{"type":"app","name":"storefront","plan":"small"}', 'etag-r1', '2026-12-02T18:03:00.000Z', '2026-12-02T18:03:00.000Z');
INSERT INTO public.resources VALUES ('shop', 'postgresql', 'orders', '{"type":"postgresql","name":"orders","plan":"medium"}', 'etag-r2', '2026-12-02T18:03:01.000Z', '2026-12-02T18:03:01.000Z');
INSERT INTO public.resources VALUES ('shop', 'container_instance', 'jobs', '{"type":"container_instance","name":"jobs","components":[{"name":"a","plan":"small"},{"name":"b","plan":"large"}]}', 'etag-r3', '2026-12-02T18:03:02.000Z', '2026-12-02T18:03:02.000Z');
INSERT INTO public.resources VALUES ('web', 'function', 'hook', '{"type":"function","name":"hook","plan":"large"}', 'etag-r4', '2026-12-02T18:03:03.000Z', '2026-12-02T18:03:03.000Z');

INSERT INTO public.tokens VALUES ('tok-admin', 'ccce1cbb0e849a2f46ad55d94ba4407301cf934444c148d20f803c828c27f059', 'admin', NULL, '2026-12-02T18:00:00.000Z', NULL, 'bootstrap');
INSERT INTO public.tokens VALUES ('tok-dev', 'f5d415602d2c57c8f2f042b1f4f4a7f84e321a98fc61995112d9ce2e3602543a', 'developer', 'shop', '2026-12-02T18:00:02.000Z', '2099-01-01T00:00:00.000Z', 'tok-admin');

SELECT pg_catalog.setval('public.changes_seq_seq', 4, true);

SELECT pg_catalog.setval('public.policy_history_seq_seq', 3, true);

ALTER TABLE ONLY public._sqlx_migrations
    ADD CONSTRAINT _sqlx_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.boundaries
    ADD CONSTRAINT boundaries_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.boundary_clusters
    ADD CONSTRAINT boundary_clusters_pkey PRIMARY KEY (boundary, cluster);

ALTER TABLE ONLY public.changes
    ADD CONSTRAINT changes_pkey PRIMARY KEY (seq);

ALTER TABLE ONLY public.clusters
    ADD CONSTRAINT clusters_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.policies
    ADD CONSTRAINT policies_pkey PRIMARY KEY (boundary, name);

ALTER TABLE ONLY public.policy_history
    ADD CONSTRAINT policy_history_pkey PRIMARY KEY (seq);

ALTER TABLE ONLY public.resources
    ADD CONSTRAINT resources_pkey PRIMARY KEY (boundary, resource_type, name);

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_secret_sha256_key UNIQUE (secret_sha256);

CREATE INDEX boundary_clusters_by_cluster ON public.boundary_clusters USING btree (cluster);

CREATE INDEX changes_by_boundary ON public.changes USING btree (boundary, seq);

CREATE INDEX policy_history_by_policy ON public.policy_history USING btree (boundary, name, seq);

CREATE INDEX tokens_by_boundary ON public.tokens USING btree (boundary, created_at, id);

ALTER TABLE ONLY public.boundary_clusters
    ADD CONSTRAINT boundary_clusters_boundary_fkey FOREIGN KEY (boundary) REFERENCES public.boundaries(name);

ALTER TABLE ONLY public.boundary_clusters
    ADD CONSTRAINT boundary_clusters_cluster_fkey FOREIGN KEY (cluster) REFERENCES public.clusters(name);

ALTER TABLE ONLY public.policies
    ADD CONSTRAINT policies_boundary_fkey FOREIGN KEY (boundary) REFERENCES public.boundaries(name);

ALTER TABLE ONLY public.resources
    ADD CONSTRAINT resources_boundary_fkey FOREIGN KEY (boundary) REFERENCES public.boundaries(name);

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_boundary_fkey FOREIGN KEY (boundary) REFERENCES public.boundaries(name);

