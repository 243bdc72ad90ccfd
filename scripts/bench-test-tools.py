#!/usr/bin/env python3
"""`palisade test` beside `kyverno test` on the same suite of 1,000 cases (issue 26's goal).

Usage: scripts/bench-test-tools.py [PALISADE] [--kyverno PATH] [--count 1000]
                                   [--max-load 1.5] [--wait 1200] [--keep DIR]
Build the Kyverno CLI first with `scripts/build-bench-tools.sh kyverno`. PALISADE defaults to
target/release/palisade. Benchmark only, not CI.

The suite: the same Deployments, policies and translations as scripts/bench-check-tools.py
(its module is loaded for them), COUNT of them (default 1,000) in one manifest file; every
tenth (web-0, web-10, ...) has the init image `busybox` and is denied by 2 of the 3 policies
(trusted, no-latest), the rest are admitted.

- palisade: one PolicyTest document with COUNT cases, each `file: manifests.yaml, document: i`
  expecting `admitted`, or `denied` with the exact message of the `trusted` policy's denial.
- kyverno (ClusterPolicy translation): one kyverno-test.yaml whose `results` give, for each of
  the 4 rules (labels/required-labels, trusted/allowed-registries, no-latest/require-image-tag,
  no-latest/validate-image-tag), the expected pass or fail of every Deployment, listed by name
  as Kyverno's test format groups them: 4 x COUNT results, because a Kyverno test asserts a
  result per rule, where a palisade case asserts the verdict of all policies together.
- kyverno (ValidatingPolicy translation): the same with 3 results per Deployment (a
  ValidatingPolicy result names no rule).

Each tool runs once untimed (warm-up), then once timed; wall time around the child, its CPU time
and peak RSS from os.wait4, as scripts/bench-check-tools.py measures. A run counts only when
the tool reports every case passed (palisade `COUNT passed, 0 failed`, Kyverno `Test Summary:
N tests passed and 0 tests failed`).
"""
import argparse
import importlib.util
import json
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "bench_check_tools", os.path.join(ROOT, "scripts", "bench-check-tools.py"))
bct = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bct)

TRUSTED_DENIAL = ("Policy 'trusted' (AllowedRegistries) denied image busybox: it is not under "
                  "ghcr.io/acme, docker.io/library.")


def palisade_suite(count):
    cases = []
    for i in range(count):
        if i % 10 == 0:
            expect = {"verdict": "denied", "policy": "trusted", "message": TRUSTED_DENIAL}
        else:
            expect = {"verdict": "admitted"}
        cases.append({"name": f"web-{i}", "file": "manifests.yaml", "document": i,
                      "expect": expect})
    document = {"apiVersion": "palisade.dev/v1", "kind": "PolicyTest",
                "metadata": {"name": "bench"},
                "spec": {"policies": ["palisade.yaml"], "cases": cases}}
    # JSON is YAML: one document.
    return json.dumps(document, indent=1)


def kyverno_suite(count, policy_file, rules):
    denied = [f"web-{i}" for i in range(count) if i % 10 == 0]
    admitted = [f"web-{i}" for i in range(count) if i % 10 != 0]
    results = []
    for policy, rule, fails_when_denied in rules:
        groups = [("pass", admitted + ([] if fails_when_denied else denied))]
        if fails_when_denied:
            groups.append(("fail", denied))
        for result, names in groups:
            entry = {"policy": policy, "resources": names, "kind": "Deployment", "result": result}
            if rule:
                entry["rule"] = rule
            results.append(entry)
    document = {"apiVersion": "cli.kyverno.io/v1alpha1", "kind": "Test",
                "metadata": {"name": "bench"}, "policies": [policy_file],
                "resources": ["manifests.yaml"], "results": results}
    return json.dumps(document, indent=1), len(rules) * count


CLUSTER_POLICY_RULES = [("labels", "required-labels", False),
                        ("trusted", "allowed-registries", True),
                        ("no-latest", "require-image-tag", True),
                        ("no-latest", "validate-image-tag", False)]
VALIDATING_POLICY_RULES = [("labels", None, False), ("trusted", None, True),
                           ("no-latest", None, True)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("palisade", nargs="?", default="target/release/palisade")
    kv = bct.pinned_version("github.com/kyverno/kyverno")
    ap.add_argument("--kyverno", default=os.path.join(bct.CACHE, "bench-tools", f"kyverno-{kv}", "kyverno"))
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--max-load", type=float, default=1.5)
    ap.add_argument("--wait", type=int, default=1200)
    ap.add_argument("--keep", metavar="DIR")
    args = ap.parse_args()

    policies, deployment, _ = bct.bench_check_constants()
    count = args.count
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        work, tmp = os.path.abspath(args.keep), None
    else:
        tmp = tempfile.TemporaryDirectory()
        work = tmp.name
    suites = {}
    for sub, files in {
        "palisade": {"palisade.yaml": policies, "palisade-test.yaml": palisade_suite(count)},
        "kyverno": {"kyverno.yaml": bct.KYVERNO_POLICIES,
                    "kyverno-test.yaml": kyverno_suite(count, "kyverno.yaml", CLUSTER_POLICY_RULES)[0]},
        "kyverno-vpol": {"kyverno-vpol.yaml": bct.KYVERNO_VALIDATING_POLICIES,
                         "kyverno-test.yaml": kyverno_suite(count, "kyverno-vpol.yaml", VALIDATING_POLICY_RULES)[0]},
    }.items():
        os.makedirs(os.path.join(work, sub), exist_ok=True)
        files["manifests.yaml"] = bct.manifests_text(deployment, count)
        for name, text in files.items():
            with open(os.path.join(work, sub, name), "w") as f:
                f.write(text)
        suites[sub] = os.path.join(work, sub)

    palisade = os.path.abspath(args.palisade)
    ky_cp = len(CLUSTER_POLICY_RULES) * count
    ky_vp = len(VALIDATING_POLICY_RULES) * count
    tools = [
        ("palisade test", palisade, [palisade, "--version"],
         [palisade, "test", "palisade-test.yaml"], "palisade", count,
         re.compile(rf"^{count} cases in 1 test: {count} passed, 0 failed$", re.M)),
        ("kyverno test (ClusterPolicy)", args.kyverno, [args.kyverno, "version"],
         [args.kyverno, "test", ".", "--remove-color"], "kyverno", ky_cp,
         re.compile(rf"Test Summary: {ky_cp} tests passed and 0 tests failed")),
        ("kyverno test (ValidatingPolicy)", args.kyverno, [args.kyverno, "version"],
         [args.kyverno, "test", ".", "--remove-color"], "kyverno-vpol", ky_vp,
         re.compile(rf"Test Summary: {ky_vp} tests passed and 0 tests failed")),
    ]
    present = [t for t in tools if os.access(t[1], os.X_OK)]
    for t in tools:
        if t not in present:
            print(f"# {t[0]}: {t[1]} is missing (scripts/build-bench-tools.sh builds it)",
                  file=sys.stderr)
    print(f"# {count} Deployments, {count // 10} denied; nproc={os.cpu_count()}", file=sys.stderr)
    bct.wait_for_idle(args.max_load, args.wait)
    for name, _, _, cmd, sub, _, _ in present:
        print(f"# warm-up: {name}", file=sys.stderr)
        bct.run(cmd, suites[sub])
    bct.wait_for_idle(args.max_load, args.wait)
    rows = []
    for name, _, version_cmd, cmd, sub, asserted, passed in present:
        load = os.getloadavg()[0]
        wall, cpu, rss_kib, others, code, out, err = bct.run(cmd, suites[sub])
        ok = bool(passed.search(out + err))
        rows.append((name, bct.version_of(version_cmd), wall, cpu, rss_kib, others, code, load,
                     asserted, ok))
        print(f"# {name}: exit {code}, every case passed: {ok}, load before {load:.2f}, "
              f"others' CPU {others:.2f} s", file=sys.stderr)
        if not ok:
            print(f"#   output ends: {(out + err)[-600:]!r}", file=sys.stderr)
    base = rows[0][2] if rows and rows[0][0] == "palisade test" else None
    print(f"\n{count:,} cases (Deployments), {count // 10:,} denied\n")
    print("| tool | version | results asserted | all passed | wall | CPU (user+sys) | peak RSS "
          "| exit | load before | others' CPU | wall ÷ palisade's |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, version, wall, cpu, rss_kib, others, code, load, asserted, ok in rows:
        ratio = f"{wall / base:,.1f}×" if base else "—"
        print(f"| `{name}` | {version} | {asserted:,} | {'yes' if ok else 'NO'} | {wall:.3f} s | "
              f"{cpu:.2f} s | {rss_kib / 1024:.1f} MiB | {code} | {load:.2f} | {others:.2f} s | "
              f"{ratio} |")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
