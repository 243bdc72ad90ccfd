#!/usr/bin/env bash
# Installs Debian's Chromium for the portal's browser tests (portal-tests/), unless it is
# already there. Idempotent; needs root (CI and the dev machines run as root).
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present)"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo installed)"
