#!/usr/bin/env python3
"""A boundary-admin loops policy saves (alternating two specs: each save writes a history row
and a change row) from 4 clients for SECONDS against palisade serve on SQLite; prints the
database's growth (file + WAL) per minute and the writes that were answered 2xx and 429."""
import json, os, subprocess, sys, tempfile, threading, time, urllib.request, urllib.error
binp, seconds = sys.argv[1], float(sys.argv[2]); extra = sys.argv[3:]
d = tempfile.mkdtemp(); port = 15000 + os.getpid() % 1000
srv = subprocess.Popen([binp, "serve", "--no-reconciler", "--listen", f"127.0.0.1:{port}", "--data-dir", d] + extra,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
base = f"http://127.0.0.1:{port}"
for _ in range(200):
    if os.path.exists(f"{d}/admin.token"):
        try:
            urllib.request.urlopen(base + "/healthz", timeout=1); break
        except Exception: pass
    time.sleep(0.1)
admin = open(f"{d}/admin.token").read().strip()
def call(method, path, body, token):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r: return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e: return e.code, None
call("POST", "/v1/boundaries", {"name": "shop"}, admin)
_, tok = call("POST", "/v1/tokens", {"role": "boundary-admin", "boundary": "shop"}, admin)
token = tok["secret"]
def size():
    return os.path.getsize(os.path.join(d, "palisade.db"))
counts = {"ok": 0, "429": 0, "other": 0}; lock = threading.Lock(); stop = time.time() + seconds
def loop(w):
    i = 0
    while time.time() < stop:
        spec = {"rules": [{"allowedComputePlans": {"plans": ["small"] if i % 2 else ["small", "medium"]}}]}
        st, _ = call("PUT", f"/v1/boundaries/shop/policies/p{w}", spec, token); i += 1
        with lock: counts["ok" if st < 300 else ("429" if st == 429 else "other")] += 1
srv_size0 = size()
before = srv_size0
ts = [threading.Thread(target=loop, args=(w,)) for w in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
time.sleep(1)
# A clean stop checkpoints the WAL into the database file: measure that file alone.
srv.terminate(); srv.wait(timeout=60)
grown = os.path.getsize(os.path.join(d, "palisade.db")) - before
print(f"{' '.join(extra) or 'defaults'}: {seconds:.0f} s, writes 2xx={counts['ok']} 429={counts['429']} other={counts['other']}, database grew {grown/1e6:.2f} MB = {grown/1e6*60/seconds:.2f} MB/min")
