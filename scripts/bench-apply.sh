#!/usr/bin/env bash
# Measures POST /v1/apply on a release `palisade serve` (SQLite, loopback only): dry-run time
# for growing document counts, an apply into a boundary that already holds the most policies
# it may, and /healthz latency while four oversized applies arrive at once. Figures only;
# nothing is asserted. Usage: bash scripts/bench-apply.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release -p palisade-cli --locked
bin=target/release/palisade
dir=$(mktemp -d)
port=$(( 20000 + RANDOM % 20000 ))
"${bin}" serve --data-dir "${dir}" --database "${dir}/palisade.db" --listen "127.0.0.1:${port}" \
    --no-reconciler --token-write-rate 0 --boundary-write-rate 0 >"${dir}/serve.log" 2>&1 &
pid=$!
trap 'kill ${pid} 2>/dev/null || true; rm -rf "${dir}"' EXIT
url="http://127.0.0.1:${port}"
for _ in $(seq 100); do curl -sf "${url}/healthz" >/dev/null && break; sleep 0.1; done
token=$(cat "${dir}/admin.token")

docs() { # docs BOUNDARY COUNT PREFIX
    python3 - "$@" <<'PY'
import sys
b, n, p = sys.argv[1], int(sys.argv[2]), sys.argv[3]
print("---\n".join(
    f"apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {{name: {p}-{i}, boundary: {b}}}\n"
    "spec:\n  rules:\n    - requiredLabels: {labels: [{key: team}]}\n" for i in range(n)))
PY
}
apply() { # apply FILE QUERY -> "status seconds"
    curl -s -o /dev/null -w '%{http_code} %{time_total}' -H "Authorization: Bearer ${token}" \
        -H 'content-type: application/yaml' --data-binary "@$1" "${url}/v1/apply$2"
}
for b in shop web; do
    curl -s -o /dev/null -H "Authorization: Bearer ${token}" -H 'content-type: application/json' \
        -d "{\"name\": \"${b}\"}" "${url}/v1/boundaries"
done

echo "dry-run of N documents into an empty boundary:"
for n in 250 500 1000 2000 5000; do
    if (( n <= 500 )); then docs shop "${n}" p >"${dir}/d.yaml"
    else { docs shop 500 p; echo ---; docs web $(( n - 500 )) p; } >"${dir}/d.yaml"; fi
    echo "  ${n}: $(apply "${dir}/d.yaml" '?dry_run=true')"
done
docs shop 500 p >"${dir}/full.yaml"
echo "store 500 policies (the most a boundary holds): $(apply "${dir}/full.yaml" '')"
echo "dry-run of the same 500 into that boundary: $(apply "${dir}/full.yaml" '?dry_run=true')"
{ docs shop 500 p; echo ---; docs web 500 q; } >"${dir}/d.yaml"
echo "dry-run of 1000 (500 into the full boundary, 500 into another): $(apply "${dir}/d.yaml" '?dry_run=true')"

python3 -c 'print("\n".join("---\n{apiVersion: palisade.dev/v1, kind: BoundaryPolicy, metadata: {name: x%d, boundary: shop}, spec: {rules: [{disallowLatestTag: {}}]}}" % i for i in range(7000)))' >"${dir}/big.yaml"
echo "4 concurrent applies of 7000 documents ($(wc -c <"${dir}/big.yaml") bytes each), /healthz probed every 50 ms:"
for i in 1 2 3 4; do apply "${dir}/big.yaml" '?dry_run=true' >"${dir}/answer.${i}" & done
worst=0
for _ in $(seq 40); do
    t=$(curl -s -o /dev/null -m 10 -w '%{time_total}' "${url}/healthz" || echo 10)
    worst=$(python3 -c "print(max(${worst}, ${t}))")
    sleep 0.05
done
wait $(jobs -p | grep -v "^${pid}$") 2>/dev/null || true
echo "  applies (status seconds): $(for i in 1 2 3 4; do printf '%s; ' "$(cat "${dir}/answer.${i}")"; done)"
echo "  slowest /healthz: ${worst} s"
