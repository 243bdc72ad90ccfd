#!/usr/bin/env bash
# Load benchmark of the API on loopback:
#  - create-with-check (POST .../resources, app on plan small, a unique name per request) at a
#    fixed 1,000 req/s for DURATION seconds (default 60), on SQLite and on PostgreSQL, with 0
#    and with 20 applied policies, by the open-loop generator crates/bench/benches/load.rs
#    (`cargo bench -p palisade-bench --bench load -- URL TOKEN RATE SECONDS`)
#    (latency from the moment each request was due);
#  - the plan picker (GET .../plans?type=app, 20 policies) with oha (crates.io, installed into
#    the cache dir), closed loop, 16 connections.
#  - with CAPACITY=1, the sustainable create rate of one boundary (20 policies; closed loop,
#    WORKERS workers, default 32) beside the store's own limit: plain INSERT + COMMIT of a
#    resource row into the same table at the same durability (SQLite:
#    scripts/bench-sqlite-commits.py, one writer; PostgreSQL: pgbench with WORKERS clients).
# Prints one line of figures per run. Needs PALISADE_TEST_POSTGRES_URL for the PostgreSQL runs
# (eval "$(bash scripts/ci-postgres.sh)").
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-60}"
RATE="${RATE:-1000}"
CACHE="${PALISADE_CACHE_DIR:-${HOME}/.cache/palisade}"
OHA="${CACHE}/tools/bin/oha"
[[ -x "${OHA}" ]] || cargo install oha --version 1.16.0 --locked --root "${CACHE}/tools"
cargo build --quiet --release -p palisade-cli --locked
cargo bench --quiet --locked -p palisade-bench --bench load --no-run
BIN="${CARGO_TARGET_DIR:-target}/release/palisade"
LOAD=(cargo bench --quiet --locked -p palisade-bench --bench load --)
WORK="$(mktemp -d)"
SERVER=""
cleanup() { [[ -n "${SERVER}" ]] && kill "${SERVER}" 2>/dev/null; wait 2>/dev/null; rm -rf "${WORK}"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start() { # database-url-or-empty
  local dir port
  dir="$(mktemp -d -p "${WORK}")"
  port="$(free_port)"
  if [[ -n "$1" ]]; then
    "${BIN}" serve --listen "127.0.0.1:${port}" --data-dir "${dir}" --database "$1" \
      --token-write-rate 0 --boundary-write-rate 0 > "${dir}/log" 2>&1 &
  else
    "${BIN}" serve --listen "127.0.0.1:${port}" --data-dir "${dir}" \
      --token-write-rate 0 --boundary-write-rate 0 > "${dir}/log" 2>&1 &
  fi
  SERVER=$!
  for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:${port}/healthz" > /dev/null 2>&1 && break; sleep 0.1; done
  URL="http://127.0.0.1:${port}"
  TOKEN="$(cat "${dir}/admin.token")"
}
stop() { kill "${SERVER}"; wait "${SERVER}" 2>/dev/null || true; SERVER=""; }
api() { curl -fsS -H "Authorization: Bearer ${TOKEN}" -H 'content-type: application/json' "$@" > /dev/null; }

setup() { # policies
  api -X POST "${URL}/v1/boundaries" -d '{"name": "bench"}'
  local i
  for i in $(seq 1 "$1"); do
    api -X PUT "${URL}/v1/boundaries/bench/policies/limits-${i}" \
      -d '{"rules": [{"allowedComputePlans": {"plans": ["small", "medium", "large", "xlarge", "memory-optimized"]}}]}'
  done
}

summary() { # label json-file
  python3 - "$1" "$2" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
r = json.load(open(path))
lat = r["latencyPercentiles"]
codes = r.get("statusCodeDistribution", {})
s = r["summary"]
ms = lambda v: f"{v * 1000:.2f} ms"
print(f"{label}: {s['requestsPerSec']:.0f} req/s, p50 {ms(lat['p50'])}, p99 {ms(lat['p99'])}, "
      f"max {ms(s['slowest'])}, success {s['successRate'] * 100:.2f}%, status {codes}")
PY
}

create_run() { # label database-url policies
  start "$2"
  setup "$3"
  echo "$1: $("${LOAD[@]}" "${URL}/v1/boundaries/bench/resources" "${TOKEN}" "${RATE}" "${DURATION}")"
  stop
}

pg_database() { # name -> url
  local base="${PALISADE_TEST_POSTGRES_URL:?set PALISADE_TEST_POSTGRES_URL}"
  psql -q "${base}" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" > /dev/null 2>&1
  echo "${base%/*}/$1"
}

# CPU ticks (1/100 s) used so far: by a process, by the PostgreSQL server (postmaster, its live
# backends and those it has reaped), by the whole machine (busy time).
ticks_of() { local f; read -r -a f < "/proc/$1/stat"; echo $(( f[13] + f[14] )); }
postgres_ticks() {
  local pm t c g
  pm="$(ps -eo pid=,ppid=,comm= | awk '$2 == 1 && $3 == "postgres" {print $1; exit}')"
  [[ -n "${pm}" ]] || { echo 0; return; }
  read -r -a g < "/proc/${pm}/stat"
  t=$(( g[13] + g[14] + g[15] + g[16] ))
  for c in $(pgrep -P "${pm}"); do
    read -r -a g < "/proc/${c}/stat" 2>/dev/null || continue
    t=$(( t + g[13] + g[14] ))
  done
  echo "${t}"
}
busy_ticks() { awk '/^cpu /{print $2+$3+$4+$6+$7+$8}' /proc/stat; }

capacity_run() { # label database-url
  start "$2"
  setup 20
  local s0 p0 b0 out
  s0="$(ticks_of "${SERVER}")"; p0="$(postgres_ticks)"; b0="$(busy_ticks)"
  out="$("${LOAD[@]}" "${URL}/v1/boundaries/bench/resources" "${TOKEN}" "max:${WORKERS:-32}" "${DURATION}")"
  echo "$1: ${out}"
  echo "  CPU ticks: machine busy $(( $(busy_ticks) - b0 )), palisade $(( $(ticks_of "${SERVER}") - s0 )), postgres $(( $(postgres_ticks) - p0 ))"
  stop
}

if [[ -n "${CAPACITY:-}" ]]; then
  echo "machine: $(nproc) cores; closed loop, ${WORKERS:-32} workers, ${DURATION} s"
  if [[ -z "${ONLY_POSTGRES:-}" ]]; then
    capacity_run "capacity, SQLite, 20 policies" ""
    echo "store limit, SQLite: $(python3 scripts/bench-sqlite-commits.py "${DURATION}" | tail -1)"
  fi
  if [[ -n "${PALISADE_TEST_POSTGRES_URL:-}" ]]; then
    db="$(pg_database palisade_capacity)"
    capacity_run "capacity, PostgreSQL, 20 policies" "${db}"
    psql -q "${db}" -c "CREATE SEQUENCE bench_names" > /dev/null
    cat > "${WORK}/insert.sql" <<'SQL'
INSERT INTO resources (boundary, resource_type, name, body_json, etag, created_at, updated_at)
VALUES ('bench', 'app', 'p-' || nextval('bench_names'),
  '{"type":"app","name":"p","plan":"small","image":"ghcr.io/acme/x:1","labels":{}}',
  'e', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
SQL
    p0="$(postgres_ticks)"; b0="$(busy_ticks)"
    echo "store limit, PostgreSQL (INSERT + COMMIT, ${WORKERS:-32} clients): $(pgbench -n -c "${WORKERS:-32}" -j 2 -T "${DURATION}" -f "${WORK}/insert.sql" "${db}" 2>/dev/null | grep -E '^tps')"
    echo "  CPU ticks: machine busy $(( $(busy_ticks) - b0 )), postgres $(( $(postgres_ticks) - p0 ))"
  fi
  exit 0
fi

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); ${RATE} req/s for ${DURATION} s"
if [[ -z "${ONLY_POSTGRES:-}" ]]; then
  create_run "create, SQLite, 0 policies" "" 0
  create_run "create, SQLite, 20 policies" "" 20
fi
if [[ -n "${PALISADE_TEST_POSTGRES_URL:-}" ]]; then
  create_run "create, PostgreSQL, 0 policies" "$(pg_database palisade_bench_0)" 0
  create_run "create, PostgreSQL, 20 policies" "$(pg_database palisade_bench_20)" 20
fi
start ""
setup 20
"${OHA}" -z "$(( DURATION / 3 ))s" -c 16 --no-tui -H "Authorization: Bearer ${TOKEN}" \
  --output-format json -o "${WORK}/result.json" "${URL}/v1/boundaries/bench/plans?type=app"
summary "plan picker, SQLite, 20 policies, 16 connections" "${WORK}/result.json"
stop
