#!/usr/bin/env bash
# Benchmarks against real Kubernetes API servers (control planes from testenv/, built on first
# use by testenv/build.sh and cached):
#  - admission overhead: PODS (default 1,000) sequential real Pod creates in a boundary's
#    namespace without, then with 3 palisade policies (requiredLabels, allowedRegistries,
#    disallowLatestTag, all satisfied), after a warm-up of WARMUP_PODS (default 100), on
#    Kubernetes 1.30 and 1.37, then without policies again (order check); and once more with
#    both runs cut into 10 blocks, alternated (crates/bench/benches/admission.rs);
#  - propagation: from the answer to a policy PUT to the first dry-run create each cluster
#    denies with the new version, CHANGES (default 50) changes, with 1 and with 3 Kubernetes
#    1.37 control planes (crates/bench/benches/propagation.rs).
# Both are `cargo bench` targets of palisade-bench, run with their arguments.
# Prints a table of figures per benchmark; progress goes to stderr.
# PROFILE=debug runs a debug build instead of the release build.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE="${PROFILE:-release}"
case "${PROFILE}" in
  release) CARGO_PROFILE=bench ;;
  debug) CARGO_PROFILE=dev ;;
  *)
    echo "PROFILE must be release or debug, not '${PROFILE}'" >&2
    exit 2
    ;;
esac
bench() { # name args...
  local name=$1
  shift
  cargo bench --quiet --locked --profile "${CARGO_PROFILE}" -p palisade-bench --bench "${name}" -- "$@"
}
cargo bench --quiet --locked --profile "${CARGO_PROFILE}" -p palisade-bench \
  --bench admission --bench propagation --no-run

CPU="$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
MEMORY="$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
echo "machine: $(nproc) cores, ${CPU}, ${MEMORY}; ${PROFILE} build; $(date -u +%F)"
echo
PODS="${PODS:-1000}" WARMUP="${WARMUP_PODS:-100}" bench admission 1.30 1.37
echo
PODS="${PODS:-1000}" WARMUP="${WARMUP_PODS:-100}" BLOCKS=10 bench admission 1.30 1.37
echo
CHANGES="${CHANGES:-50}" bench propagation 1
echo
CHANGES="${CHANGES:-50}" bench propagation 3
