#!/usr/bin/env python3
"""Benchmark `palisade check` over 10,000 manifests: objects per second and peak memory.

Usage: scripts/bench-check.py [PATH_TO_PALISADE]   (default: target/release/palisade)
Prints one line of figures for docs/benchmarks.md.
"""
import os
import resource
import subprocess
import sys
import tempfile
import time

COUNT = 10_000
binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/palisade"

POLICIES = """apiVersion: palisade.dev/v1
kind: BoundaryPolicy
metadata: {name: labels, boundary: shop}
spec:
  rules:
    - requiredLabels: {labels: [{key: team, value: web}, {key: owner}]}
---
apiVersion: palisade.dev/v1
kind: BoundaryPolicy
metadata: {name: trusted, boundary: shop}
spec:
  rules:
    - allowedRegistries: {registries: [ghcr.io/acme, docker.io/library]}
---
apiVersion: palisade.dev/v1
kind: BoundaryPolicy
metadata: {name: no-latest, boundary: shop}
spec:
  rules:
    - disallowLatestTag: {}
"""

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-{i}
  labels: {{team: web, owner: alice}}
spec:
  selector: {{matchLabels: {{app: web-{i}}}}}
  template:
    metadata: {{labels: {{app: web-{i}}}}}
    spec:
      containers:
        - {{name: web, image: "ghcr.io/acme/web:1.{i}"}}
        - {{name: proxy, image: "docker.io/library/nginx:1.27"}}
      initContainers:
        - {{name: init, image: "{init}"}}
"""

with tempfile.TemporaryDirectory() as tmp:
    with open(os.path.join(tmp, "policies.yaml"), "w") as f:
        f.write(POLICIES)
    manifests = os.path.join(tmp, "manifests.yaml")
    with open(manifests, "w") as f:
        f.write("---\n".join(
            DEPLOYMENT.format(i=i, init="busybox" if i % 10 == 0 else "ghcr.io/acme/init:2")
            for i in range(COUNT)))
    start = time.perf_counter()
    done = subprocess.run([binary, "check", "-p", os.path.join(tmp, "policies.yaml"), manifests],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    denials = done.stdout.decode().count("\n")
    size_mib = os.path.getsize(manifests) / 2**20
    print(f"objects={COUNT} file={size_mib:.1f}MiB exit={done.returncode} denial_lines={denials} "
          f"wall={elapsed:.3f}s objects_per_s={COUNT / elapsed:,.0f} peak_rss={peak_kib / 1024:.1f}MiB")
