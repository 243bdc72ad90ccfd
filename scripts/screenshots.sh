#!/usr/bin/env bash
# Makes the portal's pictures in docs/screenshots anew: the browser tests (scripts/portal-tests.sh)
# take them as they check the pages; this copies the ones the README and docs/portal.md show.
# With an argument, copies from a directory of pictures a run already made (for example the
# portal-tests/screenshots of a CI checkout) instead of running the tests.
# Exits non-zero, copying nothing, when a test fails or a picture is missing. Review the result
# (git diff --stat docs/screenshots) and commit it.
set -euo pipefail
cd "$(dirname "$0")/.."

shots=(boundary-page plan-denied policy-editor-error boundary-clusters-page resource-running)

from="${1:-}"
if [[ -z "$from" ]]; then
  rm -rf portal-tests/screenshots
  bash scripts/portal-tests.sh
  from=portal-tests/screenshots
fi
for shot in "${shots[@]}"; do
  [[ -f "$from/$shot.png" ]] || { echo "missing: $from/$shot.png" >&2; exit 1; }
done
mkdir -p docs/screenshots
for shot in "${shots[@]}"; do
  cp "$from/$shot.png" "docs/screenshots/$shot.png"
  echo "docs/screenshots/$shot.png"
done
