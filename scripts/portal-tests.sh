#!/usr/bin/env bash
# The portal's browser tests (portal-tests/): Debian's headless Chromium driven by
# playwright-core through Node's built-in test runner. Installs Chromium when absent, installs
# the locked npm packages, builds `palisade` and the store seeder, and runs `node --test`.
# Exits non-zero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUST_BACKTRACE=0

bash scripts/ci-chromium.sh

echo "== npm ci (portal-tests)"
(cd portal-tests && npm ci --no-audit --no-fund --loglevel=error)

echo "== cargo build palisade and the browser-test seeder"
cargo build -p palisade-cli --locked
cargo build -p palisade-portal --example browser_seed --locked

echo "== node --test (portal-tests)"
cd portal-tests
start=$(date +%s)
node --test --test-concurrency=1 tests/
echo "== portal browser tests finished in $(( $(date +%s) - start ))s"
