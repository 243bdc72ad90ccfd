#!/usr/bin/env bash
# Checks the tools the test command needs, before anything long starts, and names each one
# missing or too old with how to get it. The rest (PostgreSQL, Chromium, umoci) the test
# command installs itself from Debian's packages.
#
#   Rust (cargo, rustc) >= the workspace's rust-version (Cargo.toml)
#   Go >= 1.26.0       builds the test control plane from its Go modules (testenv/*/go.mod)
#   Node.js >= 20, npm the portal's browser tests (portal-tests/package.json "engines")
set -euo pipefail
cd "$(dirname "$0")/.."

missing=0
# version_ge HAVE WANT: HAVE >= WANT, both dotted numbers.
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }
need() {
    local what=$1 have=$2 want=$3 how=$4
    if [ -z "${have}" ]; then
        echo "prerequisite missing: ${what} ${want} or newer (${how})" >&2
        missing=1
    elif ! version_ge "${have}" "${want}"; then
        echo "prerequisite too old: ${what} ${have}, ${want} or newer needed (${how})" >&2
        missing=1
    else
        echo "prerequisite: ${what} ${have}"
    fi
}

rust_want=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
rust_have=$(rustc --version 2>/dev/null | awk '{print $2}' || true)
need "Rust (rustc)" "${rust_have}" "${rust_want}" "https://rustup.rs, then rustup toolchain install stable"
command -v cargo >/dev/null || { echo "prerequisite missing: cargo (comes with Rust)" >&2; missing=1; }

go_want=1.26.0
go_have=$(go env GOVERSION 2>/dev/null | sed 's/^go//' || true)
need "Go" "${go_have}" "${go_want}" "https://go.dev/dl; the Go module proxy must be reachable"

node_want=20
node_have=$(node --version 2>/dev/null | sed 's/^v//' || true)
need "Node.js" "${node_have}" "${node_want}" "apt-get install nodejs npm, or https://nodejs.org"
command -v npm >/dev/null || { echo "prerequisite missing: npm (apt-get install npm)" >&2; missing=1; }

exit "${missing}"
