#!/usr/bin/env bash
# Starts a Kubernetes control plane on loopback from the binaries build.sh made:
# etcd (--unsafe-no-fsync), kube-apiserver (client-certificate auth, Node,RBAC) and,
# with START_KCM=1 (newest version only), kube-controller-manager. With START_WORKLOADS=1
# (newest version only; implies START_KCM=1) also kube-scheduler and kwok, which simulates
# WORKLOAD_NODES fake Nodes: Pods are scheduled onto them and become Running without any
# container runtime.
#
# Usage: start.sh <k8s-version> <workdir>
#   <k8s-version>: 1.30, 1.37, a full pinned version (1.30.14), "old" or "new".
# Writes into <workdir>:
#   kubeconfig            admin (CN=admin, O=system:masters), inline base64 certs, https server
#   env                   shell-sourceable: APISERVER_URL, APISERVER_PORT, ETCD_URL, K8S_VERSION, ...
#                         and KUBECONFIG, exported: after `source <workdir>/env`, kubectl uses it
#   pki/                  ca.{crt,key}, apiserver.{crt,key}, admin.{crt,key}, sa.{key,pub}, ...
#   *.pid, logs/*.log     one per process; stop.sh <workdir> stops them
#   kwok/                 kwok's work dir (KWOK_WORKDIR), so that no ~/.kwok/kwok.yaml is read
# Environment:
#   START_KCM=1                    also start kube-controller-manager
#   START_WORKLOADS=1              also start kube-scheduler and kwok, and create WORKLOAD_NODES
#                                  fake Nodes kwok-node-0, ... (annotated kwok.x-k8s.io/node=fake,
#                                  untainted); waits until they are Ready and schedulable
#   WORKLOAD_NODES=2               how many fake Nodes, with START_WORKLOADS=1
#   APISERVER_EXTRA_ARGS="..."     extra kube-apiserver flags (word-split)
#   PALISADE_TESTENV_PARENT_PID=N  stop everything when process N exits (test harnesses)
#   READY_TIMEOUT=120              seconds to wait for each component
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <k8s-version> <workdir>" >&2; exit 2
fi
VERSION="$(resolve_k8s_version "$1")"
if [[ -z "${VERSION}" ]]; then
  echo "unknown Kubernetes version '$1' (pinned: ${K8S_OLD_VERSION} ${K8S_NEW_VERSION})" >&2; exit 2
fi
mkdir -p "$2"
WORKDIR="$(cd "$2" && pwd)"
ETCD_VERSION="$(etcd_version_for "${VERSION}")"
KBIN="$(k8s_bin_dir "${VERSION}")"
ETCD_BIN="$(etcd_bin_dir "${ETCD_VERSION}")/etcd"
READY_TIMEOUT="${READY_TIMEOUT:-120}"
START_KCM="${START_KCM:-0}"
START_WORKLOADS="${START_WORKLOADS:-0}"
WORKLOAD_NODES="${WORKLOAD_NODES:-2}"
KWOK_BIN="$(kwok_bin_dir)/kwok"
KWOK_STAGES="$(kwok_stages_file)"
if [[ "${START_WORKLOADS}" == 1 ]]; then
  # Without kube-controller-manager no ReplicaSet makes Pods and no Node loses its not-ready taint.
  START_KCM=1
fi

for b in "${ETCD_BIN}" "${KBIN}/kube-apiserver"; do
  [[ -x "${b}" ]] || { echo "missing ${b}: run testenv/build.sh ${VERSION}" >&2; exit 1; }
done
if [[ "${START_WORKLOADS}" == 1 ]]; then
  if [[ ! -x "${KBIN}/kube-scheduler" ]]; then
    echo "START_WORKLOADS=1 but ${KBIN}/kube-scheduler is missing (built for ${K8S_NEW_VERSION} only)" >&2
    exit 1
  fi
  if [[ ! -x "${KWOK_BIN}" || ! -f "${KWOK_STAGES}" ]]; then
    echo "START_WORKLOADS=1 but ${KWOK_BIN} or ${KWOK_STAGES} is missing: run testenv/build.sh kwok" >&2
    exit 1
  fi
fi
if [[ "${START_KCM}" == 1 && ! -x "${KBIN}/kube-controller-manager" ]]; then
  echo "START_KCM=1 but ${KBIN}/kube-controller-manager is missing (built for ${K8S_NEW_VERSION} only)" >&2
  exit 1
fi
for p in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do
  if [[ -f "${WORKDIR}/${p}.pid" ]] && kill -0 "$(cat "${WORKDIR}/${p}.pid")" 2>/dev/null; then
    echo "${p} already running in ${WORKDIR} (pid $(cat "${WORKDIR}/${p}.pid")); run stop.sh first" >&2
    exit 1
  fi
done

PKI="${WORKDIR}/pki"
LOGS="${WORKDIR}/logs"
mkdir -p "${PKI}" "${LOGS}"

# ---- free loopback ports ------------------------------------------------------
USED_PORTS=" "
free_port() {
  local p i
  for i in $(seq 1 200); do
    # Below Linux's ephemeral range (32768-60999), so that no client connection of a test
    # running beside us holds the port as its local end.
    p=$(( 10000 + (RANDOM * 32768 + RANDOM) % 22000 ))
    [[ "${USED_PORTS}" == *" ${p} "* ]] && continue
    if [[ -z "$(ss -Hltn "sport = :${p}" 2>/dev/null)" ]]; then
      USED_PORTS+="${p} "
      echo "${p}"; return
    fi
  done
  echo "no free port found" >&2; return 1
}
ETCD_PORT="$(free_port)"; USED_PORTS+="${ETCD_PORT} "
ETCD_PEER_PORT="$(free_port)"; USED_PORTS+="${ETCD_PEER_PORT} "
APISERVER_PORT="$(free_port)"; USED_PORTS+="${APISERVER_PORT} "
KCM_PORT="$(free_port)"; USED_PORTS+="${KCM_PORT} "
SCHEDULER_PORT="$(free_port)"; USED_PORTS+="${SCHEDULER_PORT} "
KWOK_PORT="$(free_port)"; USED_PORTS+="${KWOK_PORT} "

# ---- certificates (openssl) ------------------------------------------------------
gen_ca() { # name cn
  openssl req -x509 -new -newkey rsa:2048 -nodes -sha256 -days 3650 \
    -keyout "${PKI}/$1.key" -out "${PKI}/$1.crt" -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}
gen_cert() { # ca name subject eku san...
  local ca="$1" name="$2" subj="$3" eku="$4"; shift 4
  local ext="${PKI}/${name}.ext"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=${eku}"
    [[ $# -gt 0 ]] && echo "subjectAltName=$(IFS=,; echo "$*")"
  } > "${ext}"
  openssl req -new -newkey rsa:2048 -nodes -keyout "${PKI}/${name}.key" \
    -subj "${subj}" -out "${PKI}/${name}.csr" 2>/dev/null
  openssl x509 -req -in "${PKI}/${name}.csr" -CA "${PKI}/${ca}.crt" -CAkey "${PKI}/${ca}.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "${ext}" -out "${PKI}/${name}.crt" 2>/dev/null
  rm -f "${PKI}/${name}.csr" "${ext}"
}
if [[ ! -f "${PKI}/ca.crt" ]]; then
  gen_ca ca palisade-testenv-ca
  gen_cert ca apiserver "/CN=kube-apiserver" serverAuth \
    IP:127.0.0.1 IP:0:0:0:0:0:0:0:1 DNS:localhost IP:10.0.0.1 DNS:kubernetes \
    DNS:kubernetes.default DNS:kubernetes.default.svc DNS:kubernetes.default.svc.cluster.local
  gen_cert ca admin "/O=system:masters/CN=admin" clientAuth
  gen_cert ca kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
  gen_cert ca kube-scheduler "/CN=system:kube-scheduler" clientAuth
  # Front proxy (aggregation layer): without it the apiserver publishes no
  # requestheader CA and every delegating component (kube-controller-manager) logs errors.
  gen_ca front-proxy-ca palisade-testenv-front-proxy-ca
  gen_cert front-proxy-ca front-proxy-client "/CN=front-proxy-client" clientAuth
  openssl genrsa -out "${PKI}/sa.key" 2048 2>/dev/null
  openssl rsa -in "${PKI}/sa.key" -pubout -out "${PKI}/sa.pub" 2>/dev/null
fi

APISERVER_URL="https://127.0.0.1:${APISERVER_PORT}"
ETCD_URL="http://127.0.0.1:${ETCD_PORT}"

b64() { base64 -w0 < "$1"; }
write_kubeconfig() { # file user
  cat > "$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: palisade-testenv
  cluster:
    server: ${APISERVER_URL}
    certificate-authority-data: $(b64 "${PKI}/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(b64 "${PKI}/$2.crt")
    client-key-data: $(b64 "${PKI}/$2.key")
contexts:
- name: palisade-testenv
  context:
    cluster: palisade-testenv
    user: $2
current-context: palisade-testenv
KC
  chmod 600 "$1"
}

# ---- process helpers --------------------------------------------------------------
start_proc() { # name binary args...
  local name="$1"; shift
  # The command line, so that restart-apiserver.sh can start the same process again.
  printf '%q ' "$@" > "${WORKDIR}/${name}.cmd"
  setsid "$@" > "${LOGS}/${name}.log" 2>&1 < /dev/null &
  echo $! > "${WORKDIR}/${name}.pid"
}
fail() {
  echo "start.sh: $1; last lines of ${LOGS}/$2.log:" >&2
  tail -n 30 "${LOGS}/$2.log" >&2 || true
  "${TESTENV_DIR}/stop.sh" "${WORKDIR}" >&2 || true
  exit 1
}
wait_for() { # name probe-command...
  local name="$1"; shift
  local deadline=$(( $(date +%s) + READY_TIMEOUT ))
  until "$@" > /dev/null 2>&1; do
    kill -0 "$(cat "${WORKDIR}/${name}.pid")" 2>/dev/null || fail "${name} exited" "${name}"
    (( $(date +%s) < deadline )) || fail "${name} not ready after ${READY_TIMEOUT}s" "${name}"
    sleep 0.2
  done
}
CURL=(curl -fsS --max-time 5 --cacert "${PKI}/ca.crt" --cert "${PKI}/admin.crt" --key "${PKI}/admin.key")
t0=$(date +%s)

# ---- etcd -------------------------------------------------------------------------
start_proc etcd "${ETCD_BIN}" \
  --name=testenv \
  --data-dir="${WORKDIR}/etcd-data" \
  --listen-client-urls="${ETCD_URL}" \
  --advertise-client-urls="${ETCD_URL}" \
  --listen-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
  --initial-advertise-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
  --initial-cluster="testenv=http://127.0.0.1:${ETCD_PEER_PORT}" \
  --unsafe-no-fsync \
  --log-level=warn
wait_for etcd bash -c "curl -fsS --max-time 2 '${ETCD_URL}/health' | grep -q '\"health\":\"true\"'"

# ---- kube-apiserver ---------------------------------------------------------------
ADMISSION_ARGS=()
if [[ "${START_KCM}" != 1 ]]; then
  # Without the controller-manager no "default" ServiceAccount is ever created, and the
  # ServiceAccount admission plugin would reject every pod before any policy runs.
  ADMISSION_ARGS=(--disable-admission-plugins=ServiceAccount)
fi
# shellcheck disable=SC2206
EXTRA=(${APISERVER_EXTRA_ARGS:-})
start_proc kube-apiserver "${KBIN}/kube-apiserver" \
  --etcd-servers="${ETCD_URL}" \
  --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 \
  --endpoint-reconciler-type=none \
  --secure-port="${APISERVER_PORT}" \
  --tls-cert-file="${PKI}/apiserver.crt" \
  --tls-private-key-file="${PKI}/apiserver.key" \
  --client-ca-file="${PKI}/ca.crt" \
  --requestheader-client-ca-file="${PKI}/front-proxy-ca.crt" \
  --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User \
  --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="${PKI}/front-proxy-client.crt" \
  --proxy-client-key-file="${PKI}/front-proxy-client.key" \
  --authorization-mode=Node,RBAC \
  --anonymous-auth=false \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="${PKI}/sa.pub" \
  --service-account-signing-key-file="${PKI}/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 \
  --allow-privileged=true \
  --cert-dir="${PKI}" \
  --profiling=false \
  "${ADMISSION_ARGS[@]}" \
  "${EXTRA[@]}"
wait_for kube-apiserver bash -c "[[ \"\$(${CURL[*]} '${APISERVER_URL}/readyz')\" == ok ]]"
write_kubeconfig "${WORKDIR}/kubeconfig" admin

# ---- kube-controller-manager (optional) ---------------------------------------------
if [[ "${START_KCM}" == 1 ]]; then
  write_kubeconfig "${WORKDIR}/kube-controller-manager.kubeconfig" kube-controller-manager
  start_proc kube-controller-manager "${KBIN}/kube-controller-manager" \
    --kubeconfig="${WORKDIR}/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="${WORKDIR}/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="${WORKDIR}/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="${KCM_PORT}" \
    --cert-dir="${PKI}/kcm" \
    --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file="${PKI}/sa.key" \
    --root-ca-file="${PKI}/ca.crt" \
    --cluster-signing-cert-file="${PKI}/ca.crt" \
    --cluster-signing-key-file="${PKI}/ca.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --profiling=false
  wait_for kube-controller-manager bash -c "[[ \"\$(curl -ksS --max-time 2 'https://127.0.0.1:${KCM_PORT}/healthz')\" == ok ]]"
fi

# ---- kube-scheduler and kwok with fake Nodes (optional) ---------------------------------
FAKE_NODES=()
if [[ "${START_WORKLOADS}" == 1 ]]; then
  write_kubeconfig "${WORKDIR}/kube-scheduler.kubeconfig" kube-scheduler
  start_proc kube-scheduler "${KBIN}/kube-scheduler" \
    --kubeconfig="${WORKDIR}/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="${WORKDIR}/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="${WORKDIR}/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="${SCHEDULER_PORT}" \
    --cert-dir="${PKI}/scheduler" \
    --leader-elect=false
  # kwok's flags as kwokctl passes them (pkg/kwokctl/components/kwok_controller.go), with
  # kwokctl's default lease of 40s: kwok renews each fake Node's Lease, so the node lifecycle
  # controller keeps it Ready. Its HTTP(S) server (healthz) is on loopback only; Pod IPs come
  # from --cidr, away from the service range 10.0.0.0/24 (kwok's default --cidr).
  mkdir -p "${WORKDIR}/kwok"
  start_proc kwok env KWOK_WORKDIR="${WORKDIR}/kwok" "${KWOK_BIN}" \
    --kubeconfig="${WORKDIR}/kubeconfig" \
    --config="${KWOK_STAGES}" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds=40 \
    --cidr=10.244.0.0/16 \
    --server-address="127.0.0.1:${KWOK_PORT}"
  wait_for kube-scheduler bash -c "[[ \"\$(curl -ksS --max-time 2 'https://127.0.0.1:${SCHEDULER_PORT}/healthz')\" == ok ]]"
  wait_for kwok bash -c "[[ \"\$(curl -sS --max-time 2 'http://127.0.0.1:${KWOK_PORT}/healthz')\" == ok ]]"

  # Fake Nodes as in kwok's example (site/static/examples/node.yaml) without a status: kwok's
  # node-initialize Stage fills it in. Not tainted, so that Pods need no toleration: no real
  # Node exists here for the taint to keep them off.
  for i in $(seq 0 $(( WORKLOAD_NODES - 1 ))); do
    node="kwok-node-${i}"
    FAKE_NODES+=("${node}")
    # Present already when the workdir is started again (etcd's data stays).
    "${CURL[@]}" "${APISERVER_URL}/api/v1/nodes/${node}" > /dev/null 2>&1 && continue
    "${CURL[@]}" -X POST -H "Content-Type: application/json" "${APISERVER_URL}/api/v1/nodes" \
      -d @- > /dev/null <<NODE || fail "cannot create Node ${node}" kwok
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "${node}",
   "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
   "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
     "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "${node}", "kubernetes.io/os": "linux",
     "kubernetes.io/role": "agent", "node-role.kubernetes.io/agent": "", "type": "kwok"}}}
NODE
  done
  # Ready (kwok's node-initialize Stage) and schedulable: kube-controller-manager lifts the
  # not-ready taint that admission put on each new Node. With pretty=false (curl gets indented
  # JSON otherwise) the API server writes compact JSON, a condition's fields in the order
  # type, status, ...
  node_ready() { # name
    local node
    node="$("${CURL[@]}" "${APISERVER_URL}/api/v1/nodes/$1?pretty=false")" || return 1
    [[ "${node}" == *'{"type":"Ready","status":"True"'* && "${node}" != *node.kubernetes.io/not-ready* ]]
  }
  for node in "${FAKE_NODES[@]}"; do
    wait_for kwok node_ready "${node}"
  done
  echo "kube-scheduler, kwok ${KWOK_VERSION} and ${#FAKE_NODES[@]} Ready fake Nodes after $(( $(date +%s) - t0 ))s"
fi

cat > "${WORKDIR}/env" <<ENV
K8S_VERSION=${VERSION}
ETCD_VERSION=${ETCD_VERSION}
APISERVER_URL=${APISERVER_URL}
APISERVER_PORT=${APISERVER_PORT}
ETCD_URL=${ETCD_URL}
export KUBECONFIG=${WORKDIR}/kubeconfig
KCM_PORT=$([[ "${START_KCM}" == 1 ]] && echo "${KCM_PORT}")
SCHEDULER_PORT=$([[ "${START_WORKLOADS}" == 1 ]] && echo "${SCHEDULER_PORT}")
KWOK_PORT=$([[ "${START_WORKLOADS}" == 1 ]] && echo "${KWOK_PORT}")
FAKE_NODES=$(IFS=,; echo "${FAKE_NODES[*]}")
ENV

if [[ -n "${PALISADE_TESTENV_PARENT_PID:-}" ]]; then
  # Watchdog: when the harness process goes away, take the control plane with it.
  parent="${PALISADE_TESTENV_PARENT_PID}"
  setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec "$2" "$3"' \
    _ "${parent}" "${TESTENV_DIR}/stop.sh" "${WORKDIR}" > "${LOGS}/watchdog.log" 2>&1 < /dev/null &
  echo $! > "${WORKDIR}/watchdog.pid"
fi

echo "Kubernetes ${VERSION} (etcd ${ETCD_VERSION}) ready at ${APISERVER_URL} in $(( $(date +%s) - t0 ))s"
echo "export KUBECONFIG=${WORKDIR}/kubeconfig"
