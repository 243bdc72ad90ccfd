#!/usr/bin/env bash
# Builds palisade's container image offline, as an OCI image layout and its tar archive:
#   a static `palisade` binary (glibc linked statically: -C target-feature=+crt-static) on an
#   empty base, user and group 65532, /etc/passwd and /etc/group naming them, /etc/nsswitch.conf
#   (hosts: files dns; glibc's files and dns lookups are built into its static library),
#   Debian's CA bundle for TLS to PostgreSQL, an empty /var/lib/palisade owned by 65532 (the
#   data dir the chart mounts), the OCI annotations (org.opencontainers.image.*) as labels and
#   manifest annotations.
# Tools: Debian's umoci (installed when missing and apt-get is allowed), cargo.
#
# Usage: scripts/image.sh [OUT_DIR]    (default: target/image)
# Writes OUT_DIR/oci (the layout, tag palisade:<version>), OUT_DIR/palisade-<version>.oci.tar,
# and prints the image's size (compressed layer, and the unpacked root filesystem).
# PROFILE=release (default) or dev: the cargo profile of the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-target/image}"
PROFILE="${PROFILE:-release}"
TARGET=x86_64-unknown-linux-gnu
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
CREATED="$(git log -1 --format=%cI 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)"

if ! command -v umoci >/dev/null; then
  echo "== installing umoci (Debian)"
  apt-get install -y -qq --no-install-recommends umoci >/dev/null
fi

echo "== static palisade (${PROFILE}, ${TARGET}, crt-static)"
# A target dir of its own: the static flags would otherwise rebuild the normal one.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_IMAGE:-target/static}"
RUSTFLAGS="-C target-feature=+crt-static" cargo build --locked --quiet \
  --profile "${PROFILE}" --target "${TARGET}" -p palisade-cli 2> >(grep -v "statically linked applications requires at runtime" >&2 || true)
case "${PROFILE}" in dev) DIR=debug ;; *) DIR="${PROFILE}" ;; esac
BINARY="${CARGO_TARGET_DIR}/${TARGET}/${DIR}/palisade"
# ldd says "statically linked" (static-pie) or "not a dynamic executable" (static).
if ! ldd "${BINARY}" 2>&1 | grep -Eq "statically linked|not a dynamic executable"; then
  echo "error: ${BINARY} is dynamically linked: $(ldd "${BINARY}" 2>&1 | head -3)" >&2
  exit 1
fi

rm -rf "${OUT}"
mkdir -p "${OUT}"
LAYOUT="${OUT}/oci"
BUNDLE="${OUT}/bundle"
IMAGE="${LAYOUT}:${VERSION}"
umoci init --layout "${LAYOUT}"
umoci new --image "${IMAGE}"
# As root, ownership is recorded as it is on disk (the data dir belongs to 65532); otherwise
# rootless, where everything is recorded as root's.
ROOTLESS=()
[[ "${EUID}" -eq 0 ]] || ROOTLESS=(--rootless)
umoci unpack "${ROOTLESS[@]}" --image "${IMAGE}" "${BUNDLE}" >/dev/null
ROOTFS="${BUNDLE}/rootfs"
install -d -m 0755 "${ROOTFS}"
# Without its symbol table (the binary keeps its line tables out: release has none).
if command -v strip >/dev/null; then
  strip -o "${ROOTFS}/palisade" "${BINARY}"
  chmod 0755 "${ROOTFS}/palisade"
else
  install -m 0755 "${BINARY}" "${ROOTFS}/palisade"
fi
install -d -m 0755 "${ROOTFS}/etc" "${ROOTFS}/etc/ssl/certs"
install -d -m 1777 "${ROOTFS}/tmp"
install -d -m 0700 "${ROOTFS}/var/lib/palisade"
cat > "${ROOTFS}/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
palisade:x:65532:65532:palisade:/var/lib/palisade:/sbin/nologin
PASSWD
cat > "${ROOTFS}/etc/group" <<'GROUP'
root:x:0:
palisade:x:65532:
GROUP
echo "hosts: files dns" > "${ROOTFS}/etc/nsswitch.conf"
cp /etc/ssl/certs/ca-certificates.crt "${ROOTFS}/etc/ssl/certs/ca-certificates.crt"
if [[ "${EUID}" -eq 0 ]]; then
  chown 65532:65532 "${ROOTFS}/var/lib/palisade"
else
  echo "   (not root: /var/lib/palisade is recorded as root's; mount a volume there)"
fi
umoci repack --image "${IMAGE}" "${BUNDLE}" >/dev/null

label() { # key value -> both a config label and a manifest annotation
  LABELS+=(--config.label "$1=$2" --manifest.annotation "$1=$2")
}
LABELS=()
label org.opencontainers.image.title palisade
label org.opencontainers.image.description "Boundary policies: compute plans enforced by the API, admission rules by Kubernetes"
label org.opencontainers.image.version "${VERSION}"
label org.opencontainers.image.revision "${REVISION}"
label org.opencontainers.image.created "${CREATED}"
label org.opencontainers.image.licenses Apache-2.0
label org.opencontainers.image.base.name scratch
umoci config --image "${IMAGE}" \
  --config.user 65532:65532 \
  --config.entrypoint /palisade \
  --config.cmd serve --config.cmd --listen --config.cmd 0.0.0.0:8080 \
  --config.cmd --data-dir --config.cmd /var/lib/palisade \
  --config.workingdir /var/lib/palisade \
  --config.exposedports 8080/tcp \
  --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --author palisade \
  --created "${CREATED}" \
  "${LABELS[@]}"
umoci gc --layout "${LAYOUT}"
IMAGE_BINARY_MIB="$(( $(stat -c %s "${ROOTFS}/palisade") / 1024 / 1024 ))"
rm -rf "${BUNDLE}"

ARCHIVE="${OUT}/palisade-${VERSION}.oci.tar"
tar -C "${LAYOUT}" -cf "${ARCHIVE}" .
LAYER_BYTES="$(find "${LAYOUT}/blobs" -type f -size +100k -printf '%s\n' | sort -n | tail -1)"
echo "== image ${IMAGE}: archive $(du -h "${ARCHIVE}" | cut -f1), largest (binary) layer $(( LAYER_BYTES / 1024 / 1024 )) MiB compressed, binary ${IMAGE_BINARY_MIB} MiB in the image"
