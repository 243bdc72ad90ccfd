#!/usr/bin/env bash
# Makes testdata/store/<version>/{sqlite,postgres}.sql: a database of both stores as an earlier
# palisade left it, for the upgrade test (crates/store/tests/contract/upgrade.rs). The schema
# is the one the migrations of commit <commit> made (taken with `git show`, so the migrations
# of today play no part), with the migration tool's own table as it recorded them (each
# migration's version, description and SHA-384 checksum), and rows of every table.
#
# Usage: scripts/store-fixture.sh [commit] [version]
#   default: ef81048 (the first store: migration 0001) into testdata/store/0001
# Needs git, sqlite3, psql and pg_dump, and PALISADE_TEST_POSTGRES_URL (scripts/ci-postgres.sh).
# The dumps are checked in: run this only to add a fixture of another version.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
COMMIT="${1:-ef81048}"
VERSION="${2:-0001}"
OUT="testdata/store/${VERSION}"
: "${PALISADE_TEST_POSTGRES_URL:?run scripts/ci-postgres.sh first}"
WORK="$(mktemp -d)"
trap 'rm -rf "${WORK}"' EXIT
mkdir -p "${OUT}"

# The rows, in the schema of migration 0001 (both stores). Timestamps are RFC 3339 UTC text,
# documents JSON text, as the store wrote them. The admin token's secret is 'fixture-admin',
# the developer's 'fixture-developer' (their SHA-256 stored, as palisade stores tokens).
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
rows() { # blob-literal-of-kubeconfig
cat <<SQL
INSERT INTO boundaries (name, display_name, created_at) VALUES
  ('shop', 'Shop team', '2026-12-02T18:00:00.000Z'),
  ('web', NULL, '2026-12-02T18:00:01.000Z');
INSERT INTO policies (boundary, name, spec_json, metadata_json, etag, created_at, updated_at, updated_by) VALUES
  ('shop', 'trusted', '{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}},{"disallowLatestTag":{}}]}',
   '{"labels":{"team":"shop"},"annotations":{}}', 'etag-trusted-2', '2026-12-02T18:01:00.000Z', '2026-12-02T18:02:00.000Z', 'tok-admin'),
  ('shop', 'plans', '{"mode":"enforce","rules":[{"computePlans":{"allowed":{"app":["small","medium"]}}}]}',
   '{"labels":{},"annotations":{}}', 'etag-plans-1', '2026-12-02T18:01:30.000Z', '2026-12-02T18:01:30.000Z', 'tok-admin');
INSERT INTO policy_history (boundary, name, actor, at, before_json, after_json) VALUES
  ('shop', 'trusted', 'tok-admin', '2026-12-02T18:01:00.000Z', NULL, '{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}}]}'),
  ('shop', 'plans', 'tok-admin', '2026-12-02T18:01:30.000Z', NULL, '{"mode":"enforce","rules":[{"computePlans":{"allowed":{"app":["small","medium"]}}}]}'),
  ('shop', 'trusted', 'tok-admin', '2026-12-02T18:02:00.000Z', '{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}}]}', '{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}},{"disallowLatestTag":{}}]}');
INSERT INTO resources (boundary, resource_type, name, body_json, etag, created_at, updated_at) VALUES
  ('shop', 'app', 'storefront', '{"type":"app","name":"storefront","plan":"small"}', 'etag-r1', '2026-12-02T18:03:00.000Z', '2026-12-02T18:03:00.000Z'),
  ('shop', 'postgresql', 'orders', '{"type":"postgresql","name":"orders","plan":"medium"}', 'etag-r2', '2026-12-02T18:03:01.000Z', '2026-12-02T18:03:01.000Z'),
  ('shop', 'container_instance', 'jobs', '{"type":"container_instance","name":"jobs","components":[{"name":"a","plan":"small"},{"name":"b","plan":"large"}]}', 'etag-r3', '2026-12-02T18:03:02.000Z', '2026-12-02T18:03:02.000Z'),
  ('web', 'function', 'hook', '{"type":"function","name":"hook","plan":"large"}', 'etag-r4', '2026-12-02T18:03:03.000Z', '2026-12-02T18:03:03.000Z');
INSERT INTO changes (boundary, kind, subject, body_json, at) VALUES
  ('shop', 'policy', 'trusted', '{"etag":"etag-trusted-1"}', '2026-12-02T18:01:00.000Z'),
  ('shop', 'policy', 'plans', '{"etag":"etag-plans-1"}', '2026-12-02T18:01:30.000Z'),
  ('shop', 'policy', 'trusted', '{"etag":"etag-trusted-2"}', '2026-12-02T18:02:00.000Z'),
  ('shop', 'resource', 'app/storefront', NULL, '2026-12-02T18:03:00.000Z');
INSERT INTO tokens (id, secret_sha256, role, boundary, created_at, expires_at, created_by) VALUES
  ('tok-admin', '$(sha fixture-admin)', 'admin', NULL, '2026-12-02T18:00:00.000Z', NULL, 'bootstrap'),
  ('tok-dev', '$(sha fixture-developer)', 'developer', 'shop', '2026-12-02T18:00:02.000Z', '2099-01-01T00:00:00.000Z', 'tok-admin');
INSERT INTO clusters (name, kubeconfig_sealed, kubernetes_version, admission_enforced, admission_reason, created_at, updated_at) VALUES
  ('prod-1', $1, 'v1.30.14', TRUE, NULL, '2026-12-02T18:04:00.000Z', '2026-12-02T18:05:00.000Z');
INSERT INTO boundary_clusters (boundary, cluster, attached_at) VALUES
  ('shop', 'prod-1', '2026-12-02T18:04:30.000Z');
SQL
}

for backend in sqlite postgres; do
  mkdir -p "${WORK}/${backend}"
  git show "${COMMIT}:crates/store/migrations/${backend}/" | tail -n +3 | while read -r file; do
    [[ -n "${file}" ]] && git show "${COMMIT}:crates/store/migrations/${backend}/${file}" > "${WORK}/${backend}/${file}"
  done
done

# The migration tool's table and one row per migration, as it writes them.
migrations_rows() { # backend checksum-literal-format
  for file in "${WORK}/$1"/*.sql; do
    local base version description checksum
    base="$(basename "${file}" .sql)"
    version="$((10#${base%%_*}))"
    description="${base#*_}"; description="${description//_/ }"
    checksum="$(sha384sum "${file}" | cut -d' ' -f1)"
    # shellcheck disable=SC2059
    printf "INSERT INTO _sqlx_migrations (version, description, installed_on, success, checksum, execution_time) VALUES (%s, '%s', '2026-12-02 18:00:00', TRUE, $2, 1000000);\n" \
      "${version}" "${description}" "${checksum}"
  done
}

# SQLite
DB="${WORK}/palisade.db"
{
  cat "${WORK}"/sqlite/*.sql
  echo "CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, success BOOLEAN NOT NULL, checksum BLOB NOT NULL, execution_time BIGINT NOT NULL);"
  migrations_rows sqlite "X'%s'"
  rows "X'$(printf 'sealed kubeconfig' | xxd -p | tr -d '\n')'"
} | sqlite3 "${DB}"
{
  echo "-- palisade's SQLite store as commit ${COMMIT}'s migrations left it, with rows: made by"
  echo "-- scripts/store-fixture.sh (sqlite3 .dump), read by crates/store/tests/contract/upgrade.rs."
  sqlite3 "${DB}" .dump
} > "${OUT}/sqlite.sql"

# PostgreSQL: a database of its own, dumped as plain SQL without owners or grants.
NAME="palisade_fixture_$$"
psql "${PALISADE_TEST_POSTGRES_URL}" -qAtc "CREATE DATABASE ${NAME}" > /dev/null
PG_URL="${PALISADE_TEST_POSTGRES_URL%/*}/${NAME}"
trap 'psql "${PALISADE_TEST_POSTGRES_URL}" -qAtc "DROP DATABASE IF EXISTS ${NAME}" > /dev/null; rm -rf "${WORK}"' EXIT
{
  echo "SET client_min_messages = warning;"
  cat "${WORK}"/postgres/*.sql
  echo "CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, installed_on TIMESTAMPTZ NOT NULL DEFAULT now(), success BOOLEAN NOT NULL, checksum BYTEA NOT NULL, execution_time BIGINT NOT NULL);"
  migrations_rows postgres "'\\\\x%s'"
  rows "'\\x$(printf 'sealed kubeconfig' | xxd -p | tr -d '\n')'::bytea"
} | psql "${PG_URL}" -q -v ON_ERROR_STOP=1 > /dev/null
{
  echo "-- palisade's PostgreSQL store as commit ${COMMIT}'s migrations left it, with rows: made by"
  echo "-- scripts/store-fixture.sh (pg_dump --inserts, psql's meta-commands and SET lines left"
  echo "-- out), read by crates/store/tests/contract/upgrade.rs."
  pg_dump --no-owner --no-privileges --inserts --no-comments "${PG_URL}" \
    | grep -v '^\\' | grep -v '^SET ' | grep -v "^SELECT pg_catalog.set_config" | grep -v '^--' | cat -s
} > "${OUT}/postgres.sql"
echo "wrote ${OUT}/sqlite.sql and ${OUT}/postgres.sql from ${COMMIT}"
