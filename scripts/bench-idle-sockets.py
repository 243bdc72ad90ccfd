#!/usr/bin/env python3
"""Holds N idle sockets to a palisade serve (started here with a soft open-files limit) and
probes /healthz 40 times (2 s each, connecting included); prints answered count and latencies."""
import socket, time, subprocess, sys, tempfile, os, statistics
binp, n, soft = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = tempfile.mkdtemp(); port = 16000 + os.getpid() % 1000
srv = subprocess.Popen(["bash", "-c", f"ulimit -Sn {soft} && exec {binp} serve --no-reconciler --listen 127.0.0.1:{port} --data-dir {d}"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def probe(timeout=2.0):
    t = time.time()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.settimeout(max(0.01, timeout - (time.time() - t)))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            c = s.recv(4096)
            if not c: break
            data += c
        return time.time() - t if data.split(b" ")[1:2] == [b"200"] else None
    except Exception:
        return None
for _ in range(200):
    if probe(): break
    time.sleep(0.1)
holder = r'''
import socket, sys, time, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
socks = []
for i in range(int(sys.argv[2])):
    try: socks.append(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30))
    except Exception: pass
print(len(socks), flush=True)
time.sleep(3600)
'''
per = 12000
holders = []
left = n
while left > 0:
    k = min(per, left); left -= k
    holders.append(subprocess.Popen([sys.executable, "-c", holder, str(port), str(k)], stdout=subprocess.PIPE, text=True))
time.sleep(2)
lat = []
for i in range(40):
    lat.append(probe()); time.sleep(0.5)
held = 0
for h in holders:
    h.kill()
srv.kill()
ok = [x for x in lat if x is not None]
print(f"sockets={n} soft_limit={soft} answered={len(ok)}/40 " + (f"p50={statistics.median(ok)*1000:.1f}ms max={max(ok)*1000:.1f}ms" if ok else ""))
