#!/usr/bin/env bash
# Builds promtool (Prometheus's rule checker) from its Go module into the test cache
# (${PALISADE_CACHE_DIR:-~/.cache/palisade}/promtool/<version>/bin/promtool), where the chart's
# monitoring test (crates/cli/tests/it/chart_monitoring.rs) finds it and runs
# `promtool check rules` and `promtool test rules`; without it that part is skipped with a
# note. About 15 minutes and 1 GB of module downloads on a 2-core machine, so CI does not run
# this: run it by hand. Prints the binary's path.
set -euo pipefail
VERSION="${PROMTOOL_VERSION:-v0.316.0}"
CACHE="${PALISADE_CACHE_DIR:-${HOME}/.cache/palisade}"
DEST="${CACHE}/promtool/${VERSION}/bin"
if [[ ! -x "${DEST}/promtool" ]]; then
  mkdir -p "${DEST}"
  GOBIN="${DEST}" GOFLAGS=-mod=mod go install "github.com/prometheus/prometheus/cmd/promtool@${VERSION}"
fi
echo "${DEST}/promtool"
