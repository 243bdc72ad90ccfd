#!/usr/bin/env python3
"""`palisade check` beside `kyverno apply` and `gator test` on the same 10,000 manifests.

Usage: scripts/bench-check-tools.py [PALISADE] [--kyverno PATH] [--gator PATH]
                                    [--max-load 1.5] [--wait 1200] [--keep DIR] [--edge-cases]
Build the two other tools first with scripts/build-bench-tools.sh (they land in
${PALISADE_CACHE_DIR:-~/.cache/palisade}/bench-tools/<name>-<version>/, the versions of
testenv/bench-tools/go.mod). PALISADE defaults to target/release/palisade. A tool whose binary
is missing gets a row saying so; the others are still measured. Benchmark only, not CI.
--edge-cases runs no benchmark: it checks 17 small Deployments (labels, tags, registries at the
edges of each rule) with every tool and prints which policies each tool denies, per object.

Input: exactly scripts/bench-check.py's (its POLICIES, DEPLOYMENT and COUNT are read from that
file): one 4.1 MiB file of 10,000 Deployments, each with 2 containers and 1 init container;
every tenth one (web-0, web-10, ...) has the init image `busybox`, so 1,000 Deployments
violate 2 of the 3 policies. Every tool reads that same file.

Each tool runs once untimed (warm-up: page cache, binary), then once timed. Wall time is
perf_counter around the child; CPU time and peak RSS (ru_maxrss) are the child's own, from
os.wait4. Before the warm-ups and again before the timed runs the script waits (up to --wait
seconds each) for the 1-minute load average to fall to --max-load. Each row shows the load
before its timed run and "others' CPU": the CPU time the rest of the machine used during it
(busy time from /proc/stat minus the child's), which shows whether other work interfered.

Counting: "violating" is the number of distinct Deployment names a tool reports, parsed from
its default text output: palisade's `<file>:<doc> Deployment/<name>: ...` lines, kyverno's
`policy <p> -> resource <ns>/Deployment/<name> failed:` lines, gator's
`apps/v1/Deployment <name>: [...]` lines. The set is also compared with the expected one.

How the 3 palisade policies were translated. Kyverno runs twice, on two translations: as
ClusterPolicies (kyverno.io/v1, the pattern engine, which Kyverno 1.19 prints as deprecated)
and as ValidatingPolicies (policies.kyverno.io/v1, CEL, the form it recommends instead). Each
tool gets one policy (or ConstraintTemplate + Constraint) per palisade policy, each matching
apps/v1 Deployments only:

1. labels, `requiredLabels: team=web, owner` (palisade: the label must be present, and equal
   to the value when one is given; any value, even "", satisfies `owner`).
   ClusterPolicy: pattern `metadata.labels: {team: web, owner: "*"}`.
   ValidatingPolicy: `'team' in labels && labels['team'] == 'web' && 'owner' in labels`.
   Rego: for each {key, value?} parameter, `labels[key]` must exist and equal
   `object.get(param, "value", found)`; one violation per object listing the unmet keys.
2. trusted, `allowedRegistries: ghcr.io/acme, docker.io/library` (palisade: every image of
   `containers` and `initContainers` must equal a prefix or start with prefix + "/"; a missing
   image counts as "").
   ClusterPolicy: pattern `containers[*].image` and `=(initContainers)[*].image` each
   `ghcr.io/acme | ghcr.io/acme/* | docker.io/library | docker.io/library/*`.
   ValidatingPolicy: `images.all(i, [prefixes].exists(p, i == p || i.startsWith(p + '/')))`.
   Rego: the same equality / startswith(prefix + "/") test, object.get(image, "") for a
   missing image.
3. no-latest, `disallowLatestTag` (palisade: an image with `@` passes; otherwise the tag is
   the text after the last `:` of the part after the last `/`, and a missing, empty or
   `latest` tag is denied).
   Rego: exactly that (split on "/", then on ":").
   ValidatingPolicy: `i.contains('@') || (i.matches(':[^/:]+$') && !i.endsWith(':latest'))`.
   ClusterPolicy: the upstream sample "disallow-latest-tag" as two pattern rules,
   `image: "*:*"` (a tag is required) and `image: "!*:latest"`, on containers and
   =(initContainers). A digest-only `web@sha256:...` passes it, as in palisade.
Where they differ (--edge-cases shows it; none of these objects occur in the benchmark input):
the ClusterPolicy passes `registry:5000/web` (a port, no tag) and `web:` (empty tag), which
palisade denies, and it denies `initContainers: null` (both image policies), which palisade
admits. The Rego and the ValidatingPolicy give palisade's verdicts on all 17 edge cases.
Enforcement: ClusterPolicy rules use `validate.failureAction: Enforce` (the rule-level field;
the policy-level `validationFailureAction` is deprecated in Kyverno 1.19), ValidatingPolicies
`validationActions: [Deny]`; Gatekeeper constraints use the default enforcementAction `deny`.
No tool stops at the first failing policy or object; counts are per object.
"""
import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("PALISADE_CACHE_DIR") or os.path.join(
    os.path.expanduser("~"), ".cache", "palisade")


def bench_check_constants():
    """POLICIES, DEPLOYMENT and COUNT of scripts/bench-check.py, without running it."""
    with open(os.path.join(ROOT, "scripts", "bench-check.py")) as f:
        tree = ast.parse(f.read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ("POLICIES", "DEPLOYMENT", "COUNT"):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["POLICIES"], found["DEPLOYMENT"], found["COUNT"]


def manifests_text(deployment, count):
    # The same expression as scripts/bench-check.py.
    return "---\n".join(
        deployment.format(i=i, init="busybox" if i % 10 == 0 else "ghcr.io/acme/init:2")
        for i in range(count))


def expected_violators(count):
    return {f"web-{i}" for i in range(count) if i % 10 == 0}


def pinned_version(module):
    """The version testenv/bench-tools/go.mod requires, without the leading v."""
    with open(os.path.join(ROOT, "testenv", "bench-tools", "go.mod")) as f:
        m = re.search(r"^\s*" + re.escape(module) + r" v(\S+)", f.read(), re.M)
    return m.group(1) if m else "?"


KYVERNO_POLICIES = """\
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: labels}
spec:
  rules:
    - name: required-labels
      match: {any: [{resources: {kinds: [Deployment]}}]}
      validate:
        failureAction: Enforce
        message: "label team must be web and label owner must be set"
        pattern:
          metadata:
            labels: {team: web, owner: "*"}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: trusted}
spec:
  rules:
    - name: allowed-registries
      match: {any: [{resources: {kinds: [Deployment]}}]}
      validate:
        failureAction: Enforce
        message: "images must be under ghcr.io/acme or docker.io/library"
        pattern:
          spec:
            template:
              spec:
                containers:
                  - image: "ghcr.io/acme | ghcr.io/acme/* | docker.io/library | docker.io/library/*"
                =(initContainers):
                  - image: "ghcr.io/acme | ghcr.io/acme/* | docker.io/library | docker.io/library/*"
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: no-latest}
spec:
  rules:
    - name: require-image-tag
      match: {any: [{resources: {kinds: [Deployment]}}]}
      validate:
        failureAction: Enforce
        message: "an image tag is required"
        pattern:
          spec:
            template:
              spec:
                containers:
                  - image: "*:*"
                =(initContainers):
                  - image: "*:*"
    - name: validate-image-tag
      match: {any: [{resources: {kinds: [Deployment]}}]}
      validate:
        failureAction: Enforce
        message: "the tag latest is not allowed"
        pattern:
          spec:
            template:
              spec:
                containers:
                  - image: "!*:latest"
                =(initContainers):
                  - image: "!*:latest"
"""

# The same 3 policies as Kyverno ValidatingPolicies (CEL). `images` is containers then
# initContainers, a missing image read as "" and a missing or null list as [].
def _list(field):
    path = f"object.spec.template.spec.{field}"
    return f"(has({path}) && {path} != null ? {path} : []).map(c, has(c.image) ? c.image : '')"


def validating_policy(name, variable, expression, message):
    return f"""\
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {{name: {name}}}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
      - {{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}}
  variables:
    - name: {variable[0]}
      expression: >-
        {variable[1]}
  validations:
    - expression: >-
        {expression}
      message: "{message}"
"""


KYVERNO_VALIDATING_POLICIES = "---\n".join([
    validating_policy(
        "labels",
        ("labels", "has(object.metadata.labels) && object.metadata.labels != null"
                   " ? object.metadata.labels : {}"),
        "'team' in variables.labels && variables.labels['team'] == 'web'"
        " && 'owner' in variables.labels",
        "label team must be web and label owner must be set"),
    validating_policy(
        "trusted", ("images", _list("containers") + " + " + _list("initContainers")),
        "variables.images.all(i, ['ghcr.io/acme', 'docker.io/library']"
        ".exists(p, i == p || i.startsWith(p + '/')))",
        "images must be under ghcr.io/acme or docker.io/library"),
    validating_policy(
        "no-latest", ("images", _list("containers") + " + " + _list("initContainers")),
        "variables.images.all(i, i.contains('@')"
        " || (i.matches(':[^/:]+$') && !i.endsWith(':latest')))",
        "images must carry a tag other than latest, or a digest"),
])

# Rego v1 (the `code` form of ConstraintTemplate); images of containers then initContainers.
REGO_IMAGES = """
              images contains image if {
                some field in ["containers", "initContainers"]
                some container in object.get(input.review.object, ["spec", "template", "spec", field], [])
                image := object.get(container, "image", "")
              }
"""


def gatekeeper_template(kind, package, schema, rego):
    return f"""\
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {{name: {kind.lower()}}}
spec:
  crd:
    spec:
      names: {{kind: {kind}}}
      validation:
        openAPIV3Schema:
{schema}
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
        - engine: Rego
          source:
            version: "v1"
            rego: |
              package {package}
{rego}"""


def gatekeeper_constraint(kind, name, parameters):
    return f"""\
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: {kind}
metadata: {{name: {name}}}
spec:
  match:
    kinds: [{{apiGroups: [apps], kinds: [Deployment]}}]
{parameters}"""


GATEKEEPER = "---\n".join([
    gatekeeper_template("PalisadeRequiredLabels", "palisaderequiredlabels", """\
          type: object
          properties:
            labels:
              type: array
              items:
                type: object
                properties: {key: {type: string}, value: {type: string}}""", """
              labels := object.get(input.review.object, ["metadata", "labels"], {})

              met(req) if {
                found := labels[req.key]
                object.get(req, "value", found) == found
              }

              violation contains {"msg": msg} if {
                unmet := [req.key | some req in input.parameters.labels; not met(req)]
                count(unmet) > 0
                msg := sprintf("labels not as required: %v", [unmet])
              }
"""),
    gatekeeper_template("PalisadeAllowedRegistries", "palisadeallowedregistries", """\
          type: object
          properties:
            registries: {type: array, items: {type: string}}""", REGO_IMAGES + """
              under(image, prefix) if image == prefix

              under(image, prefix) if startswith(image, concat("", [prefix, "/"]))

              allowed(image) if {
                some prefix in input.parameters.registries
                under(image, prefix)
              }

              violation contains {"msg": msg} if {
                bad := [image | some image in images; not allowed(image)]
                count(bad) > 0
                msg := sprintf("images not under %v: %v", [input.parameters.registries, bad])
              }
"""),
    gatekeeper_template("PalisadeDisallowLatestTag", "palisadedisallowlatesttag", """\
          type: object""", REGO_IMAGES + """
              # The text after the last ":" of the part after the last "/"; undefined if none.
              tag(image) := t if {
                segments := split(image, "/")
                parts := split(segments[count(segments) - 1], ":")
                count(parts) > 1
                t := parts[count(parts) - 1]
              }

              latest(image) if {
                not contains(image, "@")
                not tag(image)
              }

              latest(image) if {
                not contains(image, "@")
                tag(image) in {"", "latest"}
              }

              violation contains {"msg": msg} if {
                bad := [image | some image in images; latest(image)]
                count(bad) > 0
                msg := sprintf("images tagged latest or without a tag: %v", [bad])
              }
"""),
    gatekeeper_constraint("PalisadeRequiredLabels", "labels", """\
  parameters:
    labels: [{key: team, value: web}, {key: owner}]
"""),
    gatekeeper_constraint("PalisadeAllowedRegistries", "trusted", """\
  parameters:
    registries: [ghcr.io/acme, docker.io/library]
"""),
    gatekeeper_constraint("PalisadeDisallowLatestTag", "no-latest", ""),
])

# --edge-cases: (name, labels, container images, init container images); None = key absent,
# "null" = `initContainers: null`, an image None = no `image` key.
EDGE_CASES = [
    ("ok", "{team: web, owner: alice}", ["ghcr.io/acme/web:1"], ["docker.io/library/nginx:1.2"]),
    ("owner-empty", "{team: web, owner: ''}", ["ghcr.io/acme/web:1"], None),
    ("no-owner", "{team: web}", ["ghcr.io/acme/web:1"], None),
    ("team-other", "{team: api, owner: a}", ["ghcr.io/acme/web:1"], None),
    ("no-labels", None, ["ghcr.io/acme/web:1"], None),
    ("port-no-tag", "{team: web, owner: a}", ["ghcr.io/acme/registry:5000/web"], None),
    ("empty-tag", "{team: web, owner: a}", ["ghcr.io/acme/web:"], None),
    ("digest-only", "{team: web, owner: a}", ["ghcr.io/acme/web@sha256:abcd"], None),
    ("latest-and-digest", "{team: web, owner: a}", ["ghcr.io/acme/web:latest@sha256:abcd"], None),
    ("latest", "{team: web, owner: a}", ["ghcr.io/acme/web:latest"], None),
    ("latest-upper-case", "{team: web, owner: a}", ["ghcr.io/acme/web:LATEST"], None),
    ("prefix-itself", "{team: web, owner: a}", ["ghcr.io/acme"], None),
    ("prefix-sibling", "{team: web, owner: a}", ["ghcr.io/acmex/web:1"], None),
    ("no-registry", "{team: web, owner: a}", ["nginx:1.2"], None),
    ("init-null", "{team: web, owner: a}", ["ghcr.io/acme/web:1"], "null"),
    ("init-elsewhere", "{team: web, owner: a}", ["ghcr.io/acme/web:1"], ["quay.io/x:1"]),
    ("no-image", "{team: web, owner: a}", [None], None),
]


def edge_manifests():
    def containers(images, prefix):
        return "".join(f"        - name: {prefix}{n}\n"
                       + (f'          image: "{image}"\n' if image is not None else "")
                       for n, image in enumerate(images))
    docs = []
    for name, labels, images, init in EDGE_CASES:
        doc = f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n"
        if labels:
            doc += f"  labels: {labels}\n"
        doc += ("spec:\n  selector: {matchLabels: {app: x}}\n  template:\n"
                "    metadata: {labels: {app: x}}\n    spec:\n      containers:\n"
                + containers(images, "c"))
        if init == "null":
            doc += "      initContainers: null\n"
        elif init:
            doc += "      initContainers:\n" + containers(init, "i")
        docs.append(doc)
    return "---\n".join(docs)


# (object, policy) pairs each tool denies, from its default text output.
PAIRS = {
    "palisade": (re.compile(r"^\S+:\d+ Deployment/(\S+): Policy '([^']+)'", re.M), (0, 1)),
    "kyverno": (re.compile(r"^policy (\S+) -> resource [^/\s]*/Deployment/(\S+) failed", re.M),
                (1, 0)),
    "gator": (re.compile(r'^apps/v1/Deployment (\S+): \["([^"]+)"\]', re.M), (0, 1)),
}


def edge_cases(tools, work):
    with open(os.path.join(work, "edge.yaml"), "w") as f:
        f.write(edge_manifests())
    denied = {}
    for name, _, _, cmd, key in tools:
        cmd = [c if c != "manifests.yaml" else "edge.yaml" for c in cmd]
        *_, code, out, err = run(cmd, work)
        pattern, (obj, pol) = PAIRS[key]
        pairs = {}
        for m in pattern.finditer(out):
            pairs.setdefault(m.group(obj + 1), set()).add(m.group(pol + 1))
        denied[name] = pairs
        print(f"# {name}: exit {code}", file=sys.stderr)
    names = [t[0] for t in tools]
    print("| Deployment | " + " | ".join(f"`{n}`" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for case, *_ in EDGE_CASES:
        cells = [", ".join(sorted(denied[n].get(case, ()))) or "admitted" for n in names]
        marked = [c if c == cells[0] else f"**{c}**" for c in cells]
        print(f"| {case} | " + " | ".join(marked) + " |")


PATTERNS = {
    "palisade": re.compile(r"^\S+:\d+ Deployment/(\S+): ", re.M),
    "kyverno": re.compile(r"^policy \S+ -> resource [^/\s]*/Deployment/(\S+) failed", re.M),
    "gator": re.compile(r"^apps/v1/Deployment (\S+): \[", re.M),
}


def busy_cpu_seconds():
    """CPU time spent by the whole machine so far (not idle, not iowait), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def run(cmd, cwd):
    """Runs cmd; returns (wall s, cpu s, peak RSS KiB, others' CPU s, exit code, stdout, stderr).
    Others' CPU is what the rest of the machine used meanwhile (busy CPU minus the child's)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        busy = busy_cpu_seconds()
        start = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        cpu = usage.ru_utime + usage.ru_stime
        others = busy_cpu_seconds() - busy - cpu if busy is not None else float("nan")
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (wall, cpu, usage.ru_maxrss, max(others, 0.0), child.returncode,
                out.read().decode(errors="replace"), err.read().decode(errors="replace"))


def version_of(cmd):
    """The first x.y.z in what the version command prints."""
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    except OSError as e:
        return f"? ({e})"
    m = re.search(r"v?\d+\.\d+\.\d+", done.stdout.decode(errors="replace"))
    return m.group(0) if m else "?"


def wait_for_idle(max_load, max_wait, poll=120):
    deadline = time.time() + max_wait
    while True:
        load = os.getloadavg()[0]
        if load <= max_load:
            return load
        if time.time() >= deadline:
            print(f"# load {load:.2f} still above {max_load} after {max_wait}s; measuring anyway",
                  file=sys.stderr)
            return load
        print(f"# 1-minute load {load:.2f} > {max_load}; waiting {poll}s", file=sys.stderr)
        time.sleep(poll)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("palisade", nargs="?", default="target/release/palisade")
    kv, gv = pinned_version("github.com/kyverno/kyverno"), \
        pinned_version("github.com/open-policy-agent/gatekeeper/v3")
    ap.add_argument("--kyverno", default=os.path.join(CACHE, "bench-tools", f"kyverno-{kv}", "kyverno"))
    ap.add_argument("--gator", default=os.path.join(CACHE, "bench-tools", f"gator-{gv}", "gator"))
    ap.add_argument("--max-load", type=float, default=1.5,
                    help="wait until the 1-minute load average is at most this (default 1.5)")
    ap.add_argument("--wait", type=int, default=1200,
                    help="give up waiting for that load after this many seconds (default 1200)")
    ap.add_argument("--keep", metavar="DIR", help="write the inputs to DIR instead of a temp dir")
    ap.add_argument("--edge-cases", action="store_true",
                    help="no benchmark: each tool's verdicts on 17 edge-case Deployments")
    args = ap.parse_args()

    policies, deployment, count = bench_check_constants()
    expected = expected_violators(count)
    tmp = None
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        work = os.path.abspath(args.keep)
    else:
        tmp = tempfile.TemporaryDirectory()
        work = tmp.name
    files = {"manifests.yaml": manifests_text(deployment, count), "palisade.yaml": policies,
             "kyverno.yaml": KYVERNO_POLICIES, "kyverno-vpol.yaml": KYVERNO_VALIDATING_POLICIES,
             "gatekeeper.yaml": GATEKEEPER}
    for name, text in files.items():
        with open(os.path.join(work, name), "w") as f:
            f.write(text)
    size_mib = os.path.getsize(os.path.join(work, "manifests.yaml")) / 2**20

    palisade = os.path.abspath(args.palisade)
    tools = [
        ("palisade check", palisade, [palisade, "--version"],
         [palisade, "check", "-p", "palisade.yaml", "manifests.yaml"], "palisade"),
        ("kyverno apply (ClusterPolicy)", args.kyverno, [args.kyverno, "version"],
         [args.kyverno, "apply", "kyverno.yaml", "--resource", "manifests.yaml", "--remove-color"],
         "kyverno"),
        ("kyverno apply (ValidatingPolicy)", args.kyverno, [args.kyverno, "version"],
         [args.kyverno, "apply", "kyverno-vpol.yaml", "--resource", "manifests.yaml",
          "--remove-color"],
         "kyverno"),
        ("gator test", args.gator, [args.gator, "--version"],
         [args.gator, "test", "-f", "gatekeeper.yaml", "-f", "manifests.yaml"], "gator"),
    ]
    present = [t for t in tools if os.access(t[1], os.X_OK)]
    for name, path, *_ in tools:
        if (name, path) not in [(t[0], t[1]) for t in present]:
            print(f"# {name}: {path} is missing (scripts/build-bench-tools.sh builds it)",
                  file=sys.stderr)

    if args.edge_cases:
        edge_cases(present, work)
        if tmp:
            tmp.cleanup()
        return

    print(f"# input: {count} Deployments, {size_mib:.1f} MiB, {len(expected)} violating; "
          f"nproc={os.cpu_count()}", file=sys.stderr)
    # Wait for other work to end before the warm-ups too: after them, part of the load
    # average is this script's own (the warm-ups take minutes of CPU).
    wait_for_idle(args.max_load, args.wait)
    for name, _, _, cmd, _ in present:
        print(f"# warm-up: {name}: {' '.join(os.path.basename(c) if c.startswith('/') else c for c in cmd)}",
              file=sys.stderr)
        run(cmd, work)
    wait_for_idle(args.max_load, args.wait)

    rows = []
    for name, path, version_cmd, cmd, key in present:
        load = os.getloadavg()[0]
        wall, cpu, rss_kib, others, code, out, err = run(cmd, work)
        names = set(PATTERNS[key].findall(out))
        lines = sum(1 for line in out.splitlines() if PATTERNS[key].match(line))
        version = version_of(version_cmd)
        rows.append((name, version, wall, cpu, rss_kib, others, names, code, load))
        print(f"# {name}: exit {code}, {lines} violation lines, {len(names)} Deployments, "
              f"same set as expected: {names == expected}, load before {load:.2f}, "
              f"others' CPU during the run {others:.2f} s", file=sys.stderr)
        summary = [l for l in (out + err).splitlines()
                   if re.search(r"checked \d+ objects|pass: \d+|fail: \d+", l)]
        for line in summary[-2:]:
            print(f"#   {line.strip()}", file=sys.stderr)
        if not names:
            print(f"#   no violations parsed; output starts: {(out + err)[:600]!r}",
                  file=sys.stderr)

    base = rows[0][2] if rows and rows[0][0] == "palisade check" else None
    print(f"\n{count:,} Deployments, {size_mib:.1f} MiB, {len(expected):,} violating; "
          f"load (1 min) at start of timed runs: {rows[0][8]:.2f}\n" if rows else "")
    print("| tool | version | wall | objects/s | CPU (user+sys) | peak RSS | violating Deployments "
          "found | exit | load before | others' CPU | wall ÷ palisade's |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, version, wall, cpu, rss_kib, others, names, code, load in rows:
        found = f"{len(names):,}" + ("" if names == expected else " (not the expected set)")
        ratio = f"{wall / base:,.1f}×" if base else "—"
        print(f"| `{name}` | {version} | {wall:.3f} s | {count / wall:,.0f} | {cpu:.2f} s | "
              f"{rss_kib / 1024:.1f} MiB | {found} | {code} | {load:.2f} | {others:.2f} s | {ratio} |")
    measured = {r[0] for r in rows}
    for name, path, *_ in tools:
        if name not in measured:
            print(f"| `{name}` | not built | — | — | — | — | — | — | — | — | — |")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
