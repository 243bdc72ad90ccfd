#!/usr/bin/env bash
# The whole test suite, on a fresh machine: builds or finds the test control plane's
# binaries, starts what the tests need (a local PostgreSQL server, installed from Debian's
# packages when absent), then runs every test of the
# workspace with PostgreSQL required (a PostgreSQL test fails, never skips), then the
# schema-driven API check (schemathesis against /openapi.json), then the portal's browser
# tests in Debian's headless Chromium (installed when absent).
# Needs root for the package install and to run PostgreSQL as its own user.
set -euo pipefail
cd "$(dirname "$0")/.."

# Kubernetes control-plane binaries (kube-apiserver, etcd; 1.30 and 1.37) from their Go
# modules, cached outside the repo: about 17 minutes on 2 cores the first time, then found.
bash testenv/build.sh all

eval "$(bash scripts/ci-postgres.sh)"
export PALISADE_REQUIRE_POSTGRES=1

cargo test --workspace --locked
bash scripts/schemathesis.sh
bash scripts/portal-tests.sh
