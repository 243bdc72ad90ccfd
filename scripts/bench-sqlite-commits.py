#!/usr/bin/env python3
"""The store's own limit on SQLite: plain INSERT + COMMIT of one resource-sized row per
transaction, at the durability palisade uses (WAL, synchronous=FULL), as fast as it goes for
SECONDS (default 60), in a directory on the same disk as palisade's data directory
(default: a temporary directory under ./target). Prints commits per second for every 5 s window,
so a rate that falls during the run shows.

Usage: scripts/bench-sqlite-commits.py [SECONDS] [DIR]
"""
import os
import sqlite3
import sys
import tempfile
import time

seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 60
parent = sys.argv[2] if len(sys.argv) > 2 else "target"
os.makedirs(parent, exist_ok=True)
with tempfile.TemporaryDirectory(dir=parent) as work:
    db = sqlite3.connect(os.path.join(work, "bench.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE resources (boundary TEXT, resource_type TEXT, name TEXT, body_json TEXT,"
        " etag TEXT, created_at TEXT, updated_at TEXT, PRIMARY KEY (boundary, resource_type, name))"
    )
    body = '{"type":"app","name":"%s","plan":"small","image":"ghcr.io/acme/web:1.4","labels":{}}'
    start = time.monotonic()
    window, count, i = start, 0, 0
    rates = []
    while time.monotonic() - start < seconds:
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO resources VALUES ('bench', 'app', ?, ?, 'e', 't', 't')",
            (f"a{i}", body % f"a{i}"),
        )
        db.execute("COMMIT")
        i += 1
        count += 1
        now = time.monotonic()
        if now - window >= 5:
            rates.append(count / (now - window))
            window, count = now, 0
    print("commits/s per 5 s window: " + ", ".join(f"{r:.0f}" for r in rates))
    print(f"total: {i} commits in {time.monotonic() - start:.1f} s")
