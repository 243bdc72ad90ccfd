#!/usr/bin/env bash
# The whole test suite, on a fresh machine: builds or finds the test control plane's
# binaries, starts what the tests need (a local PostgreSQL server, installed from Debian's
# packages when absent), then runs every test of the
# workspace on that server (a PostgreSQL test fails, never skips; without the URL the test
# kit would start a server of its own), then the
# schema-driven API check (schemathesis against /openapi.json), then the portal's browser
# tests in Debian's headless Chromium (installed when absent), then the container image built
# and run from its own root filesystem (scripts/image-test.sh).
# Needs root for the package install and to run PostgreSQL as its own user.
# Every stage has a time limit, so a stuck step fails with its name instead of hanging CI.
set -euo pipefail
cd "$(dirname "$0")/.."

stage() {
    local limit=$1 name=$2 started
    shift 2
    started=$(date +%s)
    echo "== ${name}"
    if ! timeout --kill-after=30 "${limit}" "$@"; then
        echo "== ${name}: failed or exceeded its ${limit} limit" >&2
        return 1
    fi
    echo "== ${name}: $(( $(date +%s) - started ))s"
}

# Kubernetes control-plane binaries (kube-apiserver, etcd; 1.30 and 1.37) and helm from their Go
# modules, cached outside the repo: about 22 minutes (control plane) plus 5 (helm) on 2 cores
# the first time, then found.
stage 1m "prerequisites" bash scripts/prerequisites.sh
stage 40m "control-plane binaries" bash testenv/build.sh all

pg_env=$(mktemp)
trap 'rm -f "${pg_env}"' EXIT
stage 10m "postgresql" bash -c 'bash scripts/ci-postgres.sh > "$1"' _ "${pg_env}"
# shellcheck disable=SC1090
source "${pg_env}"

stage 40m "cargo test" cargo test --workspace --locked
stage 10m "schemathesis" bash scripts/schemathesis.sh
stage 15m "portal browser tests" bash scripts/portal-tests.sh
# The container image (a debug build in CI: the same steps as a release image, faster).
stage 25m "container image" env PROFILE="${IMAGE_PROFILE:-dev}" bash scripts/image-test.sh
