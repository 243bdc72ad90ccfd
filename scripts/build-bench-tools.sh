#!/usr/bin/env bash
# Builds the two tools that scripts/bench-check-tools.py compares with `palisade check`,
# from their Go modules through the Go module proxy, like testenv/build.sh builds the test
# control plane:
#   ${PALISADE_CACHE_DIR:-~/.cache/palisade}/bench-tools/kyverno-<version>/kyverno   (Kyverno CLI)
#   ${PALISADE_CACHE_DIR:-~/.cache/palisade}/bench-tools/gator-<version>/gator       (Gatekeeper's gator)
# The versions are those of testenv/bench-tools/go.mod (one wrapper module for both; its
# go.sum pins every dependency). A binary already present is skipped; each is written to a
# temporary name and renamed, so an interrupted build is simply redone. Go's module and build
# caches are testenv/lib.sh's (go/mod, go/build under the same cache dir).
# Benchmark only: nothing in CI runs this.
#
# Usage: scripts/build-bench-tools.sh [kyverno | gator]...   (default: both)
#   BENCH_TOOLS_NICE (default 10) is the nice level of the builds; GOFLAGS's -p is left to Go
#   unless BENCH_TOOLS_P is set (e.g. BENCH_TOOLS_P=1 on a busy machine).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "${ROOT}/testenv/lib.sh"
testenv_go_env
if [[ -n "${BENCH_TOOLS_P:-}" ]]; then export GOFLAGS="${GOFLAGS} -p=${BENCH_TOOLS_P}"; fi

MODDIR="${ROOT}/testenv/bench-tools"
OUT_DIR="${PALISADE_CACHE_DIR}/bench-tools"
TESTENV_NICE="${BENCH_TOOLS_NICE:-10}"
TMP_OUT=""
trap '[[ -n "${TMP_OUT}" ]] && rm -f "${TMP_OUT}"' EXIT

# module_version <module path> -> v1.19.1 (as the wrapper module's go.mod resolves it)
module_version() {
  (cd "${MODDIR}" && go list -mod=readonly -m -f '{{.Version}}' "$1")
}

# build_one <package> <output path> <ldflags>: testenv_build_one in the wrapper module,
# CGO_ENABLED=0 and upstream's ldflags, as upstream's Makefiles build the release binaries.
build_one() { testenv_build_one "${MODDIR}" "$1" "$2" "" "$3"; }

build_kyverno() {
  local v
  v="$(module_version github.com/kyverno/kyverno)"
  # kyverno's Makefile: LD_FLAGS := "-s -w -X $(PACKAGE)/pkg/version.BuildVersion=$(VERSION)"
  build_one github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno \
    "${OUT_DIR}/kyverno-${v#v}/kyverno" \
    "-s -w -X github.com/kyverno/kyverno/pkg/version.BuildVersion=${v}"
}

build_gator() {
  local v
  v="$(module_version github.com/open-policy-agent/gatekeeper/v3)"
  # gatekeeper's Makefile: LDFLAGS := "-X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=$(VERSION)"
  build_one github.com/open-policy-agent/gatekeeper/v3/cmd/gator \
    "${OUT_DIR}/gator-${v#v}/gator" \
    "-X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=${v}"
}

targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(gator kyverno)
total_start=$(date +%s)
for t in "${targets[@]}"; do
  case "${t}" in
    kyverno) build_kyverno ;;
    gator) build_gator ;;
    *) echo "unknown tool '${t}' (kyverno, gator)" >&2; exit 2 ;;
  esac
done
echo "== all done in $(( $(date +%s) - total_start ))s"
