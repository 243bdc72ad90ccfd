# Shared helpers for the testenv scripts. Sourced, not executed.
# shellcheck shell=bash

TESTENV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "${TESTENV_DIR}/versions.env"

PALISADE_CACHE_DIR="${PALISADE_CACHE_DIR:-${HOME}/.cache/palisade}"

# Keep Go's module and build caches under the palisade cache dir so they
# survive between runs and never land in the repo.
testenv_go_env() {
  export GOMODCACHE="${PALISADE_CACHE_DIR}/go/mod"
  export GOCACHE="${PALISADE_CACHE_DIR}/go/build"
  export GOTOOLCHAIN="${GO_TOOLCHAIN:-local}"
  export GOFLAGS="-buildvcs=false"
  mkdir -p "${GOMODCACHE}" "${GOCACHE}"
}

# minor_of 1.30.14 -> 30
minor_of() { local v="${1#v}"; v="${v#*.}"; echo "${v%%.*}"; }
# major_minor_of 1.30.14 -> 1.30
major_minor_of() { local v="${1#v}"; echo "${v%.*}"; }

# Resolve a user-given version ("1.30", "1.30.14", "v1.37.2", "old", "new")
# to a pinned full Kubernetes version; prints nothing if not pinned.
resolve_k8s_version() {
  local want="${1#v}" v
  case "${want}" in
    old) echo "${K8S_OLD_VERSION}"; return ;;
    new|newest) echo "${K8S_NEW_VERSION}"; return ;;
  esac
  for v in "${K8S_OLD_VERSION}" "${K8S_NEW_VERSION}"; do
    if [[ "${want}" == "${v}" || "${want}" == "$(major_minor_of "${v}")" ]]; then
      echo "${v}"; return
    fi
  done
}

etcd_version_for() {
  case "$1" in
    "${K8S_OLD_VERSION}") echo "${K8S_OLD_ETCD_VERSION}" ;;
    "${K8S_NEW_VERSION}") echo "${K8S_NEW_ETCD_VERSION}" ;;
    *) return 1 ;;
  esac
}

components_for() {
  case "$1" in
    "${K8S_OLD_VERSION}") echo "${K8S_OLD_COMPONENTS}" ;;
    "${K8S_NEW_VERSION}") echo "${K8S_NEW_COMPONENTS}" ;;
    *) return 1 ;;
  esac
}

# Wrapper module directories, keyed by minor so a patch bump edits in place.
k8s_module_dir() { echo "${TESTENV_DIR}/k8s-$(major_minor_of "$1")"; }
etcd_module_dir() { echo "${TESTENV_DIR}/etcd-$(major_minor_of "$1")"; }

k8s_bin_dir() { echo "${PALISADE_CACHE_DIR}/k8s/$1/bin"; }
etcd_bin_dir() { echo "${PALISADE_CACHE_DIR}/etcd/$1/bin"; }

helm_module_dir() { echo "${TESTENV_DIR}/helm-$(major_minor_of "${HELM_VERSION}")"; }
helm_bin_dir() { echo "${PALISADE_CACHE_DIR}/helm/${HELM_VERSION}/bin"; }

kwok_module_dir() { echo "${TESTENV_DIR}/kwok-$(major_minor_of "${KWOK_VERSION}")"; }
kwok_bin_dir() { echo "${PALISADE_CACHE_DIR}/kwok/${KWOK_VERSION}/bin"; }
# kwok's --config: the Stages that make fake Nodes Ready and their Pods Running (build.sh kwok).
kwok_stages_file() { echo "${PALISADE_CACHE_DIR}/kwok/${KWOK_VERSION}/stages.yaml"; }

# testenv_build_one <module dir> <package> <output path> <tags> <ldflags>
# Builds a Go package of the module in <module dir> (modules through the proxy, the caches of
# testenv_go_env) into <output path>, unless a binary is already there: at nice level
# TESTENV_NICE (default 19), static (CGO_ENABLED=0), to a temporary name (TMP_OUT, which the
# calling script removes on exit) that is renamed once complete.
testenv_build_one() {
  local moddir="$1" pkg="$2" out="$3" tags="$4" ldflags="$5" start end
  if [[ -x "${out}" ]]; then
    echo "== ${out}: present, skipped"
    return
  fi
  mkdir -p "$(dirname "${out}")"
  TMP_OUT="${out}.tmp.$$"
  echo "== building ${pkg} -> ${out}"
  start=$(date +%s)
  (
    cd "${moddir}"
    # Fetch first so the timing below can be split into download vs. compile.
    nice -n "${TESTENV_NICE:-19}" go mod download
    echo "   modules ready after $(( $(date +%s) - start ))s"
    CGO_ENABLED=0 nice -n "${TESTENV_NICE:-19}" go build -mod=readonly -trimpath \
      -tags "${tags}" -ldflags "${ldflags}" -o "${TMP_OUT}" "${pkg}"
  )
  mv -f "${TMP_OUT}" "${out}"
  TMP_OUT=""
  end=$(date +%s)
  echo "== built ${out} in $(( end - start ))s wall clock"
}
