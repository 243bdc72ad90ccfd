#!/usr/bin/env bash
# Stops what start.sh started in <workdir>: kwok, kube-scheduler, kube-controller-manager,
# kube-apiserver, etcd (in that order). Data and certificates stay; delete <workdir> to reset.
# Usage: stop.sh <workdir>
set -euo pipefail
if [[ $# -ne 1 ]]; then echo "usage: $0 <workdir>" >&2; exit 2; fi
WORKDIR="$1"

stop_pid_file() { # name
  local f="${WORKDIR}/$1.pid" pid i
  [[ -f "${f}" ]] || return 0
  pid="$(cat "${f}")"
  # Only signal the process if it is still the one we started (pids get reused).
  if [[ -n "${pid}" ]] && kill -0 "${pid}" 2>/dev/null \
     && tr '\0' ' ' < "/proc/${pid}/cmdline" 2>/dev/null | grep -q -- "$2"; then
    kill -TERM "${pid}" 2>/dev/null || true
    for i in $(seq 1 100); do
      kill -0 "${pid}" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "${pid}" 2>/dev/null; then
      echo "$1 (pid ${pid}) did not stop in 10s; killing" >&2
      kill -KILL "${pid}" 2>/dev/null || true
    fi
  fi
  rm -f "${f}"
}

stop_pid_file kwok kwok
stop_pid_file kube-scheduler kube-scheduler
stop_pid_file kube-controller-manager kube-controller-manager
stop_pid_file kube-apiserver kube-apiserver
stop_pid_file etcd etcd
# The watchdog (if any) goes last; when it is the caller (it execs stop.sh) it is left alone.
if [[ -f "${WORKDIR}/watchdog.pid" && "$(cat "${WORKDIR}/watchdog.pid")" != "$$" ]]; then
  stop_pid_file watchdog stop.sh
fi
rm -f "${WORKDIR}/watchdog.pid"
