#!/usr/bin/env bash
# Schema-driven API check: schemathesis (PyPI, pinned) generates requests from /openapi.json
# with a fixed seed and a bounded number of examples against a real `palisade serve --demo`
# on loopback, as the admin. Fails on any 5xx and on any response that does not match the
# document (status code, content type, schema, headers). One worker: with two, the generator
# library parses lambda sources from two threads at once, which CPython 3.11's `ast` does not
# survive ("AST constructor recursion depth mismatch", a runtime error of the tool itself).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=4.32.5
CACHE="${PALISADE_CACHE_DIR:-${HOME}/.cache/palisade}"
VENV="${CACHE}/venv-schemathesis-${VERSION}"
if [[ ! -x "${VENV}/bin/schemathesis" ]]; then
  python3 -m venv "${VENV}"
  "${VENV}/bin/pip" install --quiet "schemathesis==${VERSION}"
fi

cargo build --quiet -p palisade-cli --locked
DATA="$(mktemp -d)"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
# Write rate limits off: the check sends many writes, and 429 is documented on every write.
target/debug/palisade serve --demo --listen "127.0.0.1:${PORT}" --data-dir "${DATA}" \
  --token-write-rate 0 --boundary-write-rate 0 > "${DATA}/serve.log" 2>&1 &
SERVER=$!
trap 'kill ${SERVER} 2>/dev/null || true; wait ${SERVER} 2>/dev/null || true; rm -rf "${DATA}"' EXIT
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:${PORT}/healthz" > /dev/null 2>&1 && break
  sleep 0.1
done
TOKEN="$(cat "${DATA}/admin.token")"

"${VENV}/bin/schemathesis" run "http://127.0.0.1:${PORT}/openapi.json" \
  --header "Authorization: Bearer ${TOKEN}" \
  --checks all \
  --exclude-checks positive_data_acceptance \
  --seed 20261202 \
  --max-examples "${SCHEMATHESIS_EXAMPLES:-25}" \
  --workers 1 \
  --request-timeout 10 \
  --warnings off
