#!/usr/bin/env bash
# Builds the test control plane binaries pinned in versions.env into the cache dir:
#   ${PALISADE_CACHE_DIR:-~/.cache/palisade}/k8s/<version>/bin/{kube-apiserver,kube-controller-manager,kube-scheduler}
#   ${PALISADE_CACHE_DIR:-~/.cache/palisade}/etcd/<version>/bin/etcd
# A binary already present is skipped; each is written to a temporary name and
# renamed, so an interrupted build is simply redone. Go's module and build caches
# live under the same cache dir (go/mod, go/build).
#
#   ${PALISADE_CACHE_DIR:-~/.cache/palisade}/helm/<version>/bin/helm   (the chart's tests)
#   ${PALISADE_CACHE_DIR:-~/.cache/palisade}/kwok/<version>/bin/kwok   (start.sh START_WORKLOADS=1)
#   ${PALISADE_CACHE_DIR:-~/.cache/palisade}/kwok/<version>/stages.yaml   (its --config)
# Usage: build.sh [all | old | new | <k8s-version> | helm | kwok]...   (default: all)
#   e.g. build.sh 1.37      -> kube-apiserver, kube-controller-manager, kube-scheduler, etcd of 1.37
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
testenv_go_env
# One build at a time per cache dir: a second one (a test that finds a binary missing while
# another build runs) waits here, then finds what the first built. Without it, the first one's
# end (dropping the Go build cache, below) pulls the cache from under the second.
exec 9>"${PALISADE_CACHE_DIR}/build.lock"
if ! flock -n 9; then
  echo "== waiting for another testenv/build.sh on ${PALISADE_CACHE_DIR}"
  flock 9
fi

TESTENV_NICE=19
TMP_OUT=""
trap '[[ -n "${TMP_OUT}" ]] && rm -f "${TMP_OUT}"' EXIT


# ldflags that upstream's hack/lib/version.sh sets, so /version reports the release.
k8s_ldflags() {
  local version="$1" moddir="$2" minor build_date
  minor="$(minor_of "${version}")"
  # Deterministic build date: the release's commit time as the module proxy records it.
  build_date="$(cd "${moddir}" && go list -mod=readonly -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)"
  local flags="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=v${version}"
    flags+=" -X ${pkg}.gitMajor=1"
    flags+=" -X ${pkg}.gitMinor=${minor}"
    flags+=" -X ${pkg}.gitTreeState=clean"
    flags+=" -X ${pkg}.buildDate=${build_date}"
  done
  echo "${flags}"
}

build_k8s() {
  local version="$1" moddir bindir c ldflags
  moddir="$(k8s_module_dir "${version}")"
  bindir="$(k8s_bin_dir "${version}")"
  ldflags="$(k8s_ldflags "${version}" "${moddir}")"
  # Tags as upstream's hack/lib/golang.sh uses for release (non-debug) builds.
  for c in $(components_for "${version}"); do
    testenv_build_one "${moddir}" "k8s.io/kubernetes/cmd/${c}" "${bindir}/${c}" \
      "selinux,notest,grpcnotrace" "${ldflags}"
    # Build etcd right after the first (longest) binary of the newest version.
    if [[ "${c}" == kube-apiserver ]]; then build_etcd "$(etcd_version_for "${version}")"; fi
  done
}

build_etcd() {
  local version="$1" moddir pkg
  moddir="$(etcd_module_dir "${version}")"
  case "${version}" in
    3.5.*) pkg="." ;;                        # our main.go calling etcdmain.Main
    *) pkg="go.etcd.io/etcd/server/v3" ;;    # upstream server/main.go
  esac
  testenv_build_one "${moddir}" "${pkg}" "$(etcd_bin_dir "${version}")/etcd" "" "-s -w"
}

build_helm() {
  testenv_build_one "$(helm_module_dir)" "helm.sh/helm/v4/cmd/helm" "$(helm_bin_dir)/helm" "" \
    "-s -w -X helm.sh/helm/v4/internal/version.version=v${HELM_VERSION}"
}

build_kwok() {
  local moddir stages dir f
  moddir="$(kwok_module_dir)"
  testenv_build_one "${moddir}" "sigs.k8s.io/kwok/cmd/kwok" "$(kwok_bin_dir)/kwok" "" \
    "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v${KWOK_VERSION}"
  # The kwok binary has no Stages built in (without any it exits: "no stages found"). These
  # are the ones kwokctl puts in its --config (pkg/kwokctl/runtime/cluster.go,
  # getDefaultNodeStages with a node lease, getDefaultPodStages), copied from the module.
  stages="$(kwok_stages_file)"
  if [[ -f "${stages}" ]]; then
    echo "== ${stages}: present, skipped"
    return
  fi
  dir="$(cd "${moddir}" && nice -n "${TESTENV_NICE}" go mod download sigs.k8s.io/kwok \
    && go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  TMP_OUT="${stages}.tmp.$$"
  for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
    pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    echo "---"
    cat "${dir}/kustomize/stage/${f}.yaml"
  done > "${TMP_OUT}"
  mv -f "${TMP_OUT}" "${stages}"
  TMP_OUT=""
  echo "== wrote ${stages} from ${dir}/kustomize/stage"
}

targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(all)
total_start=$(date +%s)
for t in "${targets[@]}"; do
  case "${t}" in
    all) build_k8s "${K8S_NEW_VERSION}"; build_k8s "${K8S_OLD_VERSION}"; build_helm; build_kwok ;;
    helm) build_helm ;;
    kwok) build_kwok ;;
    *)
      v="$(resolve_k8s_version "${t}")"
      if [[ -z "${v}" ]]; then echo "unknown version '${t}' (pinned: ${K8S_OLD_VERSION} ${K8S_NEW_VERSION})" >&2; exit 2; fi
      build_k8s "${v}"
      ;;
  esac
done
# Go's build cache is only the compiler's scratch for the binaries above (about 7 GB after the
# control plane); once they are built it is dropped, so the Rust build that follows has the
# disk. The module cache stays. TESTENV_KEEP_GO_BUILD_CACHE=1 keeps it.
if [[ "${TESTENV_KEEP_GO_BUILD_CACHE:-0}" != 1 && -d "${GOCACHE}" ]]; then
  echo "== dropping the Go build cache ($(du -sh "${GOCACHE}" | cut -f1))"
  go clean -cache
fi
echo "== all done in $(( $(date +%s) - total_start ))s"
