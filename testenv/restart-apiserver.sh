#!/usr/bin/env bash
# Restarts the kube-apiserver that start.sh started in <workdir>: stops it (TERM; KILL after
# 10 s), starts the same command line again (kube-apiserver.cmd) and waits until it is ready.
# etcd and everything else keep running; the new process compiles its admission policies again.
# With DOWN_FOR=<seconds>, the API server stays down that long before it starts again (an
# outage).
# Usage: restart-apiserver.sh <workdir>
set -euo pipefail
if [[ $# -ne 1 ]]; then echo "usage: $0 <workdir>" >&2; exit 2; fi
WORKDIR="$1"
LOGS="${WORKDIR}/logs"
PKI="${WORKDIR}/pki"
READY_TIMEOUT="${READY_TIMEOUT:-120}"
[[ -f "${WORKDIR}/kube-apiserver.cmd" ]] || { echo "no ${WORKDIR}/kube-apiserver.cmd" >&2; exit 1; }
URL="$(sed -n 's/^APISERVER_URL=//p' "${WORKDIR}/env" | tr -d "'\"")"

pid="$(cat "${WORKDIR}/kube-apiserver.pid")"
if kill -0 "${pid}" 2>/dev/null; then
  kill -TERM "${pid}"
  for _ in $(seq 1 100); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "${pid}" 2>/dev/null; then kill -KILL "${pid}" 2>/dev/null || true; fi
  for _ in $(seq 1 50); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
fi
sleep "${DOWN_FOR:-0}"
setsid bash -c "exec $(cat "${WORKDIR}/kube-apiserver.cmd")" >> "${LOGS}/kube-apiserver.log" 2>&1 < /dev/null &
echo $! > "${WORKDIR}/kube-apiserver.pid"
deadline=$(( $(date +%s) + READY_TIMEOUT ))
until [[ "$(curl -fsS --max-time 5 --cacert "${PKI}/ca.crt" --cert "${PKI}/admin.crt" \
            --key "${PKI}/admin.key" "${URL}/readyz" 2>/dev/null)" == ok ]]; do
  if ! kill -0 "$(cat "${WORKDIR}/kube-apiserver.pid")" 2>/dev/null; then
    echo "kube-apiserver exited; last lines:" >&2
    tail -n 30 "${LOGS}/kube-apiserver.log" >&2
    exit 1
  fi
  if (( $(date +%s) >= deadline )); then
    echo "kube-apiserver not ready after ${READY_TIMEOUT}s" >&2; exit 1
  fi
  sleep 0.2
done
