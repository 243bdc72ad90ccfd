#!/usr/bin/env bash
# Makes sure a local PostgreSQL server is running for the store's tests, and prints
#   export PALISADE_TEST_POSTGRES_URL=postgres://palisade:palisade@127.0.0.1:<port>/postgres
# as its last line on stdout (everything else goes to stderr), so CI can `eval` it:
#   eval "$(bash scripts/ci-postgres.sh)"
# Idempotent: installs Debian's `postgresql` only when it is absent, starts (or creates) a
# cluster only when none is running, and creates the `palisade` role only when it is missing.
# Must run as root (it installs packages and runs the server as the `postgres` user).
set -euo pipefail

# Keep stdout for the final export line only. Everything this script starts runs with fd 3
# closed (`3>&-`): a server that inherited it would hold the caller's `$(...)` open forever.
exec 3>&1 1>&2

log() { echo "ci-postgres: $*"; }

if [ "$(id -u)" != 0 ]; then
    log "must run as root"
    exit 1
fi

newest_version() {
    local dir best=""
    for dir in /usr/lib/postgresql/*/bin/initdb; do
        [ -x "$dir" ] || continue
        dir=${dir#/usr/lib/postgresql/}
        dir=${dir%%/*}
        if [ -z "$best" ] || [ "$dir" -gt "$best" ]; then best=$dir; fi
    done
    echo "$best"
}

if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(newest_version)" ]; then
    log "installing postgresql"
    apt-get update </dev/null 3>&-
    DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql </dev/null 3>&-
fi

version=$(newest_version)
if [ -z "$version" ]; then
    log "no PostgreSQL server binaries under /usr/lib/postgresql after installing"
    exit 1
fi

# The first cluster of that version, or a new one named `main`.
# pg_lsclusters -h columns: version cluster port status owner datadir logfile
cluster=$(pg_lsclusters -h | awk -v v="$version" '$1 == v { print $2; exit }')
if [ -z "$cluster" ]; then
    cluster=main
    log "creating cluster $version/$cluster"
    pg_createcluster "$version" "$cluster" </dev/null 3>&-
fi

status=$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c { print $4 }')
if [ "$status" != online ]; then
    log "starting cluster $version/$cluster"
    pg_ctlcluster "$version" "$cluster" start </dev/null 3>&-
fi
port=$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c { print $3 }')

for _ in $(seq 1 60); do
    if pg_isready -q -h 127.0.0.1 -p "$port"; then break; fi
    sleep 0.5
done
if ! pg_isready -h 127.0.0.1 -p "$port"; then
    log "PostgreSQL $version/$cluster does not answer on 127.0.0.1:$port"
    exit 1
fi

# The tests create one database each, so the role needs CREATEDB.
psql_admin() { runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d postgres "$@"; }
if [ "$(psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'palisade'")" != 1 ]; then
    log "creating role palisade"
    psql_admin -c "CREATE ROLE palisade LOGIN CREATEDB PASSWORD 'palisade'"
else
    psql_admin -c "ALTER ROLE palisade LOGIN CREATEDB PASSWORD 'palisade'"
fi

url="postgres://palisade:palisade@127.0.0.1:$port/postgres"
if ! PGPASSWORD=palisade psql -X -q -h 127.0.0.1 -p "$port" -U palisade -d postgres -tAc 'SELECT 1' >/dev/null; then
    log "cannot log in as palisade on 127.0.0.1:$port"
    exit 1
fi
log "PostgreSQL $version/$cluster ready on 127.0.0.1:$port"
echo "export PALISADE_TEST_POSTGRES_URL=$url" >&3
