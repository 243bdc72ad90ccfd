#!/usr/bin/env python3
"""Memory per request (issue 42, item 8): a release `palisade serve` (SQLite, no reconciler,
loopback) is sent the worst YAML apply bodies by CONCURRENCY clients at once for SECONDS
seconds, while one small apply is timed every 250 ms. Each body gets a server of its own, so
that its peak resident memory (VmHWM of /proc/<pid>/status) is its own. Figures only; nothing
is asserted.

Usage: scripts/bench-parse-memory.py BINARY [CONCURRENCY [SECONDS]]
(build BINARY with `cargo build --release -p palisade-cli`)."""
import http.client, json, os, statistics, subprocess, sys, tempfile, threading, time

binary = sys.argv[1]
concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 4
seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 15

MIB = 1 << 20

def documents(one, size=MIB):
    """Copies of one document up to about `size` bytes."""
    return "---\n".join([one] * max(1, size // (len(one) + 4)))

def fill(head, unit, tail, size=MIB):
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail

BODIES = [
    # The worst accepted now: documents each as large as the node limit lets it be.
    ("documents of 50,000 nodes (`[],`)", documents("a: [" + "[]," * 49_990 + "x]\n")),
    ("documents of 50,000 nodes (`? a,`)", documents("a: [" + "? a," * 16_665 + "x]\n")),
    # The worst before: one document of a million nodes (refused now, where the limit passes).
    ("one document of one-key mappings", fill("a: [", "{a},", "x]\n")),
    ("one document 64 deep", fill("a: [", "[" * 62 + "x" + "]" * 62 + ", ", "x]\n")),
    # Aliases of a long scalar (refused now when they pass twice the text in strings).
    ("4,000 aliases of a 64 KiB scalar", "a: &a " + "x" * 65536 + "\nb: [" + "*a," * 4000 + "x]\n"),
]

SMALL = ("apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\n"
         "metadata: {name: small, boundary: web}\nspec: {rules: [{disallowLatestTag: {}}]}\n")


def status_of(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) * 1024
    return fields


def request(port, token, method, path, body, content_type, timeout=60):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body.encode() if isinstance(body, str) else body,
                           headers={"Authorization": f"Bearer {token}",
                                    "Content-Type": content_type})
        answer = connection.getresponse()
        answer.read()
        return answer.status
    except Exception as error:  # the figure is the status; a failure is one too
        return type(error).__name__
    finally:
        connection.close()


def run(what, body):
    directory = tempfile.mkdtemp()
    port = 17000 + os.getpid() % 1000
    server = subprocess.Popen([binary, "serve", "--no-reconciler", "--listen", f"127.0.0.1:{port}",
                               "--data-dir", directory, "--token-write-rate", "0",
                               "--boundary-write-rate", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                connection.request("GET", "/healthz")
                if connection.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        token = open(os.path.join(directory, "admin.token")).read().strip()
        for boundary in ("shop", "web"):
            request(port, token, "POST", "/v1/boundaries", json.dumps({"name": boundary}),
                    "application/json")
        idle = status_of(server.pid)["VmRSS"]
        stop = time.time() + seconds
        answers, small = {}, []
        lock = threading.Lock()

        def heavy():
            while time.time() < stop:
                status = request(port, token, "POST", "/v1/apply?dry_run=true", body,
                                 "application/yaml")
                with lock:
                    answers[status] = answers.get(status, 0) + 1

        def light():
            while time.time() < stop:
                started = time.time()
                status = request(port, token, "POST", "/v1/apply?dry_run=true", SMALL,
                                 "application/yaml")
                if status == 200:
                    small.append(time.time() - started)
                time.sleep(0.25)

        threads = [threading.Thread(target=heavy) for _ in range(concurrency)]
        threads.append(threading.Thread(target=light))
        for thread in threads:
            thread.start()
        rss = idle
        while any(thread.is_alive() for thread in threads):
            rss = max(rss, status_of(server.pid)["VmRSS"])
            time.sleep(0.02)
        peak = status_of(server.pid)["VmHWM"]
        light_figures = (f"{statistics.median(small) * 1000:.0f} ms / {max(small) * 1000:.0f} ms"
                         if small else "none answered")
        print(f"| {what} ({len(body)} bytes) | {answers} | {idle / MIB:.0f} MiB | "
              f"{peak / MIB:.0f} MiB | {light_figures} ({len(small)}) |", flush=True)
    finally:
        server.kill()
        server.wait()


print(f"{concurrency} clients at once for {seconds:.0f} s each:")
print("| body | answers | idle RSS | peak RSS (VmHWM) | small apply p50 / max (answered) |")
print("|---|---|---|---|---|")
for what, body in BODIES:
    run(what, body)
