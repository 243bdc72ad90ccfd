#!/usr/bin/env bash
# The container image, proven without a container runtime: scripts/image.sh builds it, umoci
# unpacks it, and its entrypoint runs from the image's own root filesystem (chroot, as the
# image's user 65532) on PostgreSQL; `palisade get boundaries` must answer through it, and
# the image's metadata must be what the chart expects (user, entrypoint, port, labels).
# Needs root (chroot) and PALISADE_TEST_POSTGRES_URL (scripts/ci-postgres.sh), or starts
# nothing and fails. PROFILE as in image.sh (CI uses dev: a smoke test of the same steps).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PALISADE_TEST_POSTGRES_URL:?set it (scripts/ci-postgres.sh prints it)}"
OUT="${IMAGE_OUT:-target/image}"
bash scripts/image.sh "${OUT}"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  [[ -n "${SERVER_PID}" ]] && kill "${SERVER_PID}" 2>/dev/null && wait "${SERVER_PID}" 2>/dev/null
  rm -rf "${WORK}"
}
trap cleanup EXIT

echo "== the image's configuration"
python3 - "${OUT}/oci" "${VERSION}" <<'PY'
import json, sys, os
layout, version = sys.argv[1], sys.argv[2]
def blob(digest):
    algorithm, value = digest.split(":")
    with open(os.path.join(layout, "blobs", algorithm, value)) as f:
        return json.load(f)
index = json.load(open(os.path.join(layout, "index.json")))
manifest_ref = next(m for m in index["manifests"]
                    if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == version)
manifest = blob(manifest_ref["digest"])
config = blob(manifest["config"]["digest"])["config"]
checks = {
    "User": config.get("User") == "65532:65532",
    "Entrypoint": config.get("Entrypoint") == ["/palisade"],
    "ExposedPorts": "8080/tcp" in config.get("ExposedPorts", {}),
    "labels": config.get("Labels", {}).get("org.opencontainers.image.version") == version
        and config.get("Labels", {}).get("org.opencontainers.image.licenses") == "Apache-2.0",
    "annotations": manifest.get("annotations", {}).get("org.opencontainers.image.title") == "palisade",
    "one layer": len(manifest["layers"]) == 1,
}
bad = [k for k, ok in checks.items() if not ok]
if bad:
    sys.exit(f"image configuration wrong: {bad}: {json.dumps(config)}")
print(f"   user {config['User']}, entrypoint {config['Entrypoint']}, cmd {config.get('Cmd')}, "
      f"layer {manifest['layers'][0]['size'] / 1048576:.1f} MiB compressed")
PY

echo "== unpacked, started from its own root filesystem"
umoci unpack --image "${OUT}/oci:${VERSION}" "${WORK}/bundle" >/dev/null
ROOTFS="${WORK}/bundle/rootfs"
echo "   root filesystem: $(du -sh "${ROOTFS}" | cut -f1), $(find "${ROOTFS}" -type f | wc -l) files"
# A database of its own on the test server.
DB="palisade_image_$$"
psql "${PALISADE_TEST_POSTGRES_URL}" -qc "CREATE DATABASE ${DB}" >/dev/null
URL="${PALISADE_TEST_POSTGRES_URL%/*}/${DB}"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
TOKEN="image-test-token-$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
KEY="$(head -c 32 /dev/urandom | base64)"
# The image's entrypoint and command, with the listen address on loopback for the test.
chroot --userspec=65532:65532 "${ROOTFS}" /usr/bin/env 2>/dev/null && {
  echo "error: the image has /usr/bin/env: it is not empty" >&2; exit 1; }
CHROOT="$(command -v chroot)"
env -i PALISADE_DATABASE_URL="${URL}" PALISADE_ADMIN_TOKEN="${TOKEN}" \
  PALISADE_ENCRYPTION_KEY="${KEY}" SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  "${CHROOT}" --userspec=65532:65532 "${ROOTFS}" /palisade serve --listen "127.0.0.1:${PORT}" \
  --data-dir /var/lib/palisade > "${WORK}/serve.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 150); do
  curl -fsS "http://127.0.0.1:${PORT}/readyz" >/dev/null 2>&1 && break
  kill -0 "${SERVER_PID}" 2>/dev/null || { cat "${WORK}/serve.log" >&2; echo "error: palisade exited" >&2; exit 1; }
  sleep 0.2
done
curl -fsS "http://127.0.0.1:${PORT}/readyz" >/dev/null || { cat "${WORK}/serve.log" >&2; exit 1; }
# The image's own binary is also the client.
export PALISADE_URL="http://127.0.0.1:${PORT}" PALISADE_TOKEN="${TOKEN}"
chroot --userspec=65532:65532 "${ROOTFS}" /palisade boundary create shop \
  --url "${PALISADE_URL}" --token "${TOKEN}" >/dev/null
BOUNDARIES="$(chroot --userspec=65532:65532 "${ROOTFS}" /palisade get boundaries \
  --url "${PALISADE_URL}" --token "${TOKEN}")"
echo "${BOUNDARIES}" | sed 's/^/   /'
grep -q '^shop ' <<< "${BOUNDARIES}" || { echo "error: no boundary shop in the answer" >&2; exit 1; }
# env and chroot exec into palisade: the process started is the server.
SERVER_UID="$(awk '/^Uid:/ {print $2}' "/proc/${SERVER_PID}/status")"
[[ "${SERVER_UID}" == 65532 ]] || { echo "error: the server runs as uid ${SERVER_UID}" >&2; exit 1; }
echo "== the image's palisade served the API on PostgreSQL as user 65532"
kill "${SERVER_PID}"; wait "${SERVER_PID}" 2>/dev/null || true; SERVER_PID=""
psql "${PALISADE_TEST_POSTGRES_URL}" -qc "DROP DATABASE ${DB}" >/dev/null
