#!/usr/bin/env python3
"""Checks the shared corpus in testdata/ (needs only PyYAML: pip install pyyaml).

    python3 testdata/check_corpus.py [-v]

What it checks:
  * every file parses and is a YAML sequence of cases; counts per file and per directory;
  * case names are unique across the whole corpus and are kebab-case;
  * each case has exactly the keys its directory expects;
  * admission objects are ones a real API server would accept unless the case says `live: false`
    (containers have name + image, workload selectors match the template labels, StatefulSets have
    serviceName, Jobs/CronJobs have restartPolicy Never/OnFailure, CronJobs have a schedule, no
    namespace, DNS-label names, valid label syntax, no deletionTimestamp or ephemeral containers, no
    line breaks in images, no white space around a Pod's images, known kinds only);
  * every expectation agrees with an independent reference model of SPEC 1-3 written below
    (document validation and save warnings, compute-plan decisions, admission evaluation and
    message post-processing). The model is a second derivation of the expected values, not the
    source of them: the YAML files are the corpus.
"""

import json
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
VERBOSE = "-v" in sys.argv[1:]
problems = []


def problem(where, text):
    problems.append(f"{where}: {text}")


# --------------------------------------------------------------------------------------------
# Catalog (SPEC 2.1) and document validation (SPEC 1)
# --------------------------------------------------------------------------------------------

CATALOG = {
    "app": ["small", "medium", "large", "xlarge"],
    "container_instance": ["small", "medium", "large", "xlarge"],
    "postgresql": ["small", "medium", "large", "xlarge", "memory-optimized"],
    "sqlserver": ["small", "medium", "large", "xlarge", "memory-optimized"],
    "qdrant": ["small", "medium", "large"],
    "valkey": ["small", "medium", "large"],
    "function": ["small", "medium", "large", "xlarge"],
}
TYPES_WITHOUT_PLANS = {"static_web_app"}
BLOCKABLE = ["app", "container_instance", "postgresql", "sqlserver", "qdrant", "valkey"]

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
PLAN_NAME = DNS_LABEL
HOST = re.compile(r"^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
                  r"(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?$")
PATH_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$")


def dns_label(s):
    return isinstance(s, str) and len(s) <= 63 and bool(DNS_LABEL.fullmatch(s))


def label_key_ok(key):
    if not isinstance(key, str) or not key:
        return False
    parts = key.split("/")
    if len(parts) > 2:
        return False
    if len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix):
            return False
    else:
        name = parts[0]
    return len(name) <= 63 and bool(LABEL_NAME.fullmatch(name))


def label_value_ok(value):
    return isinstance(value, str) and (value == "" or (len(value) <= 63 and bool(LABEL_NAME.fullmatch(value))))


def parse_prefix(text):
    """Returns (saved prefix, normalised?) or raises ValueError."""
    if not isinstance(text, str):
        raise ValueError("not a string")
    saved = text[:-1] if text.endswith("/") else text
    if len(saved) > 255 or not saved:
        raise ValueError("length")
    components = saved.split("/")
    host = components[0]
    if not ("." in host or ":" in host or host == "localhost") or not HOST.fullmatch(host):
        raise ValueError("host")
    for c in components[1:]:
        if not PATH_COMPONENT.fullmatch(c):
            raise ValueError("path component")
    return saved, saved != text


def parse_plan_entry(text):
    """Returns (type or None, plan) or raises ValueError."""
    if not isinstance(text, str):
        raise ValueError("not a string")
    if "/" in text:
        t, _, p = text.partition("/")
        if t in TYPES_WITHOUT_PLANS:
            raise ValueError("type without plans")
        if t not in CATALOG:
            raise ValueError("unknown type")
        if not PLAN_NAME.fullmatch(p):
            raise ValueError("plan name")
        return t, p
    if not PLAN_NAME.fullmatch(text):
        raise ValueError("plan name")
    return None, text


RULE_FIELDS = {
    "allowedComputePlans": {"plans"},
    "requiredLabels": {"labels"},
    "allowedRegistries": {"registries"},
    "disallowLatestTag": set(),
}
RULE_KIND = {
    "allowedComputePlans": "AllowedComputePlans",
    "requiredLabels": "RequiredLabels",
    "allowedRegistries": "AllowedRegistries",
    "disallowLatestTag": "DisallowLatestTag",
}
LIMITS = {"plans": 256, "labels": 64, "registries": 64}


def validate_document(doc):
    """Returns (errors: list of pointers in check order, policy model or None, warnings)."""
    errors = []

    def unknown(obj, allowed, at):
        for k in obj:
            if k not in allowed:
                errors.append(f"{at}/{k}")

    if not isinstance(doc, dict):
        return [""], None, []
    unknown(doc, {"apiVersion", "kind", "metadata", "spec"}, "")
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    unknown(meta, {"name", "boundary", "labels", "annotations"}, "/metadata")
    unknown(spec, {"mode", "scope", "rules"}, "/spec")
    if "mode" in spec and spec["mode"] not in ("enforce", "audit"):
        errors.append("/spec/mode")
    scope = spec.get("scope")
    if scope is not None:
        unknown(scope, {"clusters"}, "/spec/scope")
        clusters = scope.get("clusters", [])
        if not clusters:
            errors.append("/spec/scope/clusters")
        for i, c in enumerate(clusters):
            if not dns_label(c):
                errors.append(f"/spec/scope/clusters/{i}")
            elif c in clusters[:i]:
                errors.append(f"/spec/scope/clusters/{i}")
    rules_doc = spec.get("rules", [])
    for i, rule in enumerate(rules_doc):
        for k, body in rule.items():
            if k not in RULE_FIELDS:
                errors.append(f"/spec/rules/{i}/{k}")
            elif isinstance(body, dict):
                unknown(body, RULE_FIELDS[k], f"/spec/rules/{i}/{k}")
                if k == "requiredLabels":
                    for j, entry in enumerate(body.get("labels", [])):
                        unknown(entry, {"key", "value"}, f"/spec/rules/{i}/{k}/labels/{j}")
    structural = list(errors)
    errors = []
    if doc.get("apiVersion") != "palisade.dev/v1":
        errors.append("/apiVersion")
    if doc.get("kind") != "BoundaryPolicy":
        errors.append("/kind")
    if not dns_label(meta.get("name")):
        errors.append("/metadata/name")
    if not dns_label(meta.get("boundary")):
        errors.append("/metadata/boundary")
    for k in ("labels", "annotations"):
        if k in meta and not all(isinstance(v, str) for v in (meta[k] or {}).values()):
            errors.append(f"/metadata/{k}")
    # Kubernetes' syntax: label keys and values, annotation keys (the same qualified names).
    for key, value in (meta.get("labels") or {}).items():
        if not label_key_ok(key) or not label_value_ok(value):
            errors.append("/metadata/labels/" + key.replace("~", "~0").replace("/", "~1"))
    annotations = meta.get("annotations") or {}
    for key in annotations:
        if not label_key_ok(key):
            errors.append("/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1"))
    if sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items()) > 256 * 1024:
        errors.append("/metadata/annotations")
    if not rules_doc:
        errors.append("/spec/rules")
    normalisations = []
    rules = []
    seen_kinds = set()
    for i, rule in enumerate(rules_doc):
        at = f"/spec/rules/{i}"
        kinds = [k for k in rule if k in RULE_FIELDS]
        if len(kinds) != 1 or len(rule) != 1:
            if len([k for k in rule if k not in RULE_FIELDS]) == 0:
                errors.append(at)
            continue
        k = kinds[0]
        body = rule[k] or {}
        if k in seen_kinds:
            errors.append(at)
        seen_kinds.add(k)
        if k == "disallowLatestTag":
            rules.append(("DisallowLatestTag", None))
            continue
        list_name = next(iter(RULE_FIELDS[k]))
        items = body.get(list_name, [])
        lat = f"{at}/{k}/{list_name}"
        if not items:
            errors.append(lat)
            continue
        if len(items) > LIMITS[list_name]:
            errors.append(lat)
            continue
        parsed = []
        for j, item in enumerate(items):
            try:
                if k == "allowedComputePlans":
                    value = parse_plan_entry(item)
                    shown = item
                elif k == "allowedRegistries":
                    value, trimmed = parse_prefix(item)
                    if trimmed:
                        normalisations.append(f"registry prefix '{item}' saved as '{value}'")
                    shown = value
                else:
                    key = item.get("key")
                    if not label_key_ok(key):
                        errors.append(f"{lat}/{j}/key")
                        continue
                    val = item.get("value")
                    if val is not None and not label_value_ok(val):
                        errors.append(f"{lat}/{j}/value")
                        continue
                    if val == "":
                        normalisations.append(f"label '{key}' value \"\" saved as any value")
                        val = None
                    value = (key, val)
                    shown = json.dumps(item, sort_keys=True)
            except ValueError:
                errors.append(f"{lat}/{j}")
                continue
            if any(s == shown for _, s in parsed):
                errors.append(f"{lat}/{j}")
                continue
            parsed.append((value, shown))
        values = [v for v, _ in parsed]
        rules.append((RULE_KIND[k], values))
    errors = structural + errors
    if errors:
        return errors, None, []
    policy = {"name": meta["name"], "mode": spec.get("mode", "enforce"), "rules": rules}
    warnings = list(normalisations)
    plan_rule = next((v for kind, v in rules if kind == "AllowedComputePlans"), None)
    if plan_rule is not None:
        for t, p in plan_rule:
            applies = [t] if t else list(CATALOG)
            if not any(p in CATALOG[x] for x in applies):
                warnings.append(f"plan entry '{t + '/' if t else ''}{p}' names no plan of any type it applies to")
        if policy["mode"] == "enforce":
            for t in BLOCKABLE:
                if speaks(policy, t) and not named(policy, t):
                    warnings.append(f"creates of {t} are now refused: no policy allows any {t} plan")
    for kind, v in rules:
        if kind == "AllowedRegistries":
            for prefix in v:
                if len(prefix.split("/")) >= 3:
                    warnings.append(f"registry prefix '{prefix}' names a repository: its tagged images ({prefix}:tag) are not under it")
    return [], policy, warnings


# --------------------------------------------------------------------------------------------
# Compute plans (SPEC 2.3)
# --------------------------------------------------------------------------------------------

def entries_for(policy, t):
    for kind, v in policy["rules"]:
        if kind == "AllowedComputePlans":
            return [p for (et, p) in v if et is None or et == t]
    return []


def speaks(policy, t):
    return bool(entries_for(policy, t))


def named(policy, t):
    return [p for p in CATALOG[t] if p in entries_for(policy, t)]


def plan_message(plan, allowed):
    return (f"Compute plan '{plan}' is not allowed in this boundary: a boundary policy disallows it. "
            f"Allowed plans: {', '.join(allowed) if allowed else 'none'}.")


def decide_plan(policies, t, plan):
    enforce = [p for p in policies if p["mode"] == "enforce" and speaks(p, t)]
    audit = sorted((p for p in policies if p["mode"] == "audit" and speaks(p, t)), key=lambda p: p["name"])
    allowed = [x for x in CATALOG[t] if all(x in entries_for(p, t) for p in enforce)]
    denied_by = sorted(p["name"] for p in enforce if plan not in entries_for(p, t))
    result = {"allowed": plan in allowed, "allowed_plans": allowed, "denied_by": denied_by, "audit_warnings": []}
    if plan not in allowed:
        result["message"] = plan_message(plan, allowed)
    for a in audit:
        if plan not in entries_for(a, t):
            with_audit = [x for x in allowed if x in entries_for(a, t)]
            result["audit_warnings"].append(f"Policy '{a['name']}' (audit) would deny: {plan_message(plan, with_audit)}")
    return result


# --------------------------------------------------------------------------------------------
# Admission (SPEC 3)
# --------------------------------------------------------------------------------------------

CHECKED = {("", "Pod"), ("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"),
           ("apps", "DaemonSet"), ("batch", "Job"), ("batch", "CronJob")}
STATIC = {
    "RequiredLabels": "requires labels that are missing or wrong.",
    "AllowedRegistries": "denied an image that is not under an allowed registry.",
    "DisallowLatestTag": "denied an image that is tagged latest or carries no tag.",
}


def group_of(api_version):
    return api_version.split("/")[0] if "/" in api_version else ""


def pod_spec_of(obj):
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        return (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    return (spec.get("template") or {}).get("spec") or {}


def images_of(pod_spec, kind):
    """Containers, then init containers, then image volumes' references (SPEC 3.1, v3.2), then
    (a Pod's) ephemeral containers (SPEC 3.2, v3.1)."""
    images = [c.get("image", "") for field in ("containers", "initContainers")
              for c in (pod_spec.get(field) or [])]
    images += [(v["image"] or {}).get("reference", "") for v in (pod_spec.get("volumes") or [])
               if v.get("image") is not None]
    if kind == "Pod":
        images += [c.get("image", "") for c in (pod_spec.get("ephemeralContainers") or [])]
    return images


def latest_violation(image):
    if "@" in image:
        return False
    last = image[image.rfind("/") + 1:]
    if ":" not in last:
        return True
    tag = last[last.rfind(":") + 1:]
    return tag in ("", "latest")


def first_violation(policy, obj_labels, images):
    p = policy["name"]
    for kind, v in policy["rules"]:
        if kind == "RequiredLabels":
            for key, value in v:
                if value is None:
                    if key not in obj_labels:
                        return kind, f"Policy '{p}' (RequiredLabels) requires the label {key}."
                elif obj_labels.get(key) != value:
                    found = "<unset>" if key not in obj_labels else ('""' if obj_labels[key] == "" else obj_labels[key])
                    return kind, f"Policy '{p}' (RequiredLabels) requires label {key}={value}, found {found}"
        elif kind == "AllowedRegistries":
            for image in images:
                if not any(image == pr or image.startswith(pr + "/") for pr in v):
                    return kind, f"Policy '{p}' (AllowedRegistries) denied image {image}: it is not under {', '.join(v)}."
        elif kind == "DisallowLatestTag":
            for image in images:
                if latest_violation(image):
                    return kind, f"Policy '{p}' (DisallowLatestTag) denied image {image}: it is tagged latest or carries no tag."
    return None


def post_process(policy_name, kind, message):
    # The rendered CEL decides on the raw message (CEL cannot trim): a line feed or more than
    # 5,120 bytes selects the static message; Kubernetes then trims what is left.
    if len(message.encode()) > 5120 or "\n" in message:
        return f"Policy '{policy_name}' ({kind}) {STATIC[kind]}"
    return message.strip()


def admission_labels(group, obj):
    """The labels admission reads: the API server's defaulting first (SPEC 4.2). A batch/v1 Job
    whose own labels are empty takes its pod template's (SetDefaults_Job), and then the labels
    the create strategy generates for its selector."""
    meta = obj.get("metadata") or {}
    own = meta.get("labels") or {}
    if group == "batch" and obj.get("kind") == "Job" and not own:
        spec = obj.get("spec") or {}
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
        if template_labels is not None:
            # One map from here on: the create strategy's generated selector labels, added to
            # the template unless spec.manualSelector, are the Job's labels too.
            labels = dict(template_labels)
            if spec.get("manualSelector") is not True:
                name = meta.get("name") or "<name generated by the API server>"
                for key, value in (("job-name", name), ("batch.kubernetes.io/job-name", name),
                                   ("controller-uid", "<uid assigned by the API server>"),
                                   ("batch.kubernetes.io/controller-uid", "<uid assigned by the API server>")):
                    labels.setdefault(key, value)
            return labels
    return own


def evaluate(policies, obj):
    group = group_of(obj.get("apiVersion", ""))
    checked = (group, obj.get("kind")) in CHECKED
    result = {"checked": checked, "admitted": True, "denials": [], "warnings": []}
    meta = obj.get("metadata") or {}
    # Every case is a CREATE, which is judged even with a deletionTimestamp (the API server
    # clears it on create; SPEC 3.1 v3.1 exempts only spec-preserving UPDATEs of terminating
    # objects).
    if not checked:
        return result
    obj_labels = admission_labels(group, obj)
    images = images_of(pod_spec_of(obj), obj.get("kind"))
    for policy in sorted(policies, key=lambda p: p["name"]):
        v = first_violation(policy, obj_labels, images)
        if v is None:
            continue
        kind, message = v
        message = post_process(policy["name"], kind, message)
        if policy["mode"] == "audit":
            result["warnings"].append({"policy": policy["name"], "message": message})
        else:
            result["denials"].append({"policy": policy["name"], "rule": kind, "message": message})
    result["admitted"] = not result["denials"]
    return result


# --------------------------------------------------------------------------------------------
# Object validity (what a real API server accepts)
# --------------------------------------------------------------------------------------------

KNOWN = {("", "Pod"), ("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"),
         ("apps", "DaemonSet"), ("batch", "Job"), ("batch", "CronJob"), ("", "ConfigMap"), ("", "Service"),
         ("", "Secret"), ("", "ServiceAccount"), ("", "Namespace"), ("", "PodTemplate"),
         ("", "ReplicationController")}
SERVED_VERSIONS = {"": {"v1"}, "apps": {"apps/v1"}, "batch": {"batch/v1"}}


def object_issues(obj):
    """Returns (hard problems, reasons the object cannot be created live)."""
    hard, not_live = [], []
    api = obj.get("apiVersion", "")
    kind = obj.get("kind", "")
    group = group_of(api)
    meta = obj.get("metadata") or {}
    if "namespace" in meta:
        hard.append("metadata.namespace must not be set (the harness sets it)")
    name = meta.get("name")
    if not dns_label(name):
        hard.append(f"metadata.name {name!r} is not a DNS label")
    if kind == "CronJob" and isinstance(name, str) and len(name) > 52:
        hard.append("CronJob names are at most 52 characters")
    for k, v in (meta.get("labels") or {}).items():
        if not label_key_ok(k) or not label_value_ok(v):
            not_live.append(f"invalid label {k}={v!r}")
    if "deletionTimestamp" in meta:
        not_live.append("metadata.deletionTimestamp")
    if (group, kind) not in KNOWN or api not in SERVED_VERSIONS.get(group, set()):
        not_live.append(f"{api} {kind} is not served by a plain API server")
    spec = obj.get("spec") or {}
    template = None
    pod_specs = []
    if kind == "Pod":
        pod_specs.append(("spec", spec, "pod"))
    elif kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "PodTemplate", "ReplicationController"):
        template = (obj.get("template") if kind == "PodTemplate" else spec.get("template")) or {}
        pod_specs.append(("template.spec", template.get("spec") or {}, kind))
    elif kind == "CronJob":
        if not spec.get("schedule"):
            hard.append("CronJob needs spec.schedule")
        template = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
        pod_specs.append(("jobTemplate.spec.template.spec", template.get("spec") or {}, kind))
        jt_meta = (spec.get("jobTemplate") or {}).get("metadata") or {}
        for k, v in (jt_meta.get("labels") or {}).items():
            if not label_key_ok(k) or not label_value_ok(v):
                not_live.append(f"invalid jobTemplate label {k}={v!r}")
    if template is not None:
        for k, v in ((template.get("metadata") or {}).get("labels") or {}).items():
            if not label_key_ok(k) or not label_value_ok(v):
                not_live.append(f"invalid template label {k}={v!r}")
    if kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet") and group == "apps":
        match = (spec.get("selector") or {}).get("matchLabels") or {}
        tlabels = (template.get("metadata") or {}).get("labels") or {}
        if not match:
            hard.append("workload needs spec.selector.matchLabels")
        for k, v in match.items():
            if tlabels.get(k) != v:
                hard.append(f"selector {k}={v} does not match the template labels")
        if kind == "StatefulSet" and not spec.get("serviceName"):
            hard.append("StatefulSet needs spec.serviceName")
    if kind == "ReplicationController":
        tlabels = (template.get("metadata") or {}).get("labels") or {}
        for k, v in (spec.get("selector") or {}).items():
            if tlabels.get(k) != v:
                hard.append(f"selector {k}={v} does not match the template labels")
    for where, ps, owner in pod_specs:
        containers = ps.get("containers") or []
        if not containers:
            hard.append(f"{where}.containers is empty")
        names = []
        for field in ("containers", "initContainers", "ephemeralContainers"):
            for c in ps.get(field) or []:
                if not dns_label(c.get("name")):
                    hard.append(f"{where}.{field}: container name {c.get('name')!r} is not a DNS label")
                names.append(c.get("name"))
                image = c.get("image")
                if not isinstance(image, str) or not image:
                    hard.append(f"{where}.{field}: container {c.get('name')} has no image")
                    continue
                if "\n" in image:
                    not_live.append("line break in an image")
                if owner == "pod" and image != image.strip():
                    not_live.append("a Pod image with surrounding white space")
            if field == "ephemeralContainers" and ps.get(field):
                not_live.append("ephemeralContainers cannot be set on create")
        if len(names) != len(set(names)):
            hard.append(f"{where}: duplicate container names")
        volume_names = []
        for v in ps.get("volumes") or []:
            if not dns_label(v.get("name")):
                hard.append(f"{where}.volumes: volume name {v.get('name')!r} is not a DNS label")
            volume_names.append(v.get("name"))
            if v.get("image") is not None and not (v["image"] or {}).get("reference"):
                hard.append(f"{where}.volumes: image volume {v.get('name')} has no reference")
        if len(volume_names) != len(set(volume_names)):
            hard.append(f"{where}: duplicate volume names")
        restart = ps.get("restartPolicy")
        if (group, owner) not in KNOWN:
            pass
        elif owner in ("Job", "CronJob") and group == "batch":
            if restart not in ("Never", "OnFailure"):
                hard.append(f"{owner} needs restartPolicy Never or OnFailure")
        elif restart not in (None, "Always") and owner != "pod" and (group, owner) in KNOWN:
            hard.append(f"{owner} pod template restartPolicy must be Always")
    return hard, not_live


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

KEYS = {
    "admission": ({"name", "policies", "object", "expect"}, {"description", "live", "since"},
                  {"checked", "admitted"}, {"denials", "warnings"}),
    "compute_plans": ({"name", "policies", "type", "plan", "expect"}, {"description"},
                      {"allowed", "allowed_plans"}, {"message", "denied_by", "audit_warnings"}),
    "policy_documents": ({"name", "document", "expect"}, {"description"},
                         set(), {"error_pointer", "warnings"}),
}
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def check_keys(where, case, directory):
    required, optional, exp_required, exp_optional = KEYS[directory]
    for k in required - set(case):
        problem(where, f"missing key {k}")
    for k in set(case) - required - optional:
        problem(where, f"unknown key {k}")
    expect = case.get("expect") or {}
    for k in exp_required - set(expect):
        problem(where, f"missing expect.{k}")
    for k in set(expect) - exp_required - exp_optional:
        problem(where, f"unknown expect.{k}")


def policies_of(where, docs):
    out = []
    names = set()
    for d in docs:
        errors, policy, _ = validate_document(d)
        if errors:
            problem(where, f"policy document is not valid: {errors}")
            continue
        if (d.get("metadata") or {}).get("boundary") != "shop":
            problem(where, "policy boundary must be shop")
        if policy["name"] in names:
            problem(where, f"two policies named {policy['name']}")
        names.add(policy["name"])
        out.append(policy)
    return out


def compare(where, expected, actual):
    if expected != actual:
        problem(where, "expectation differs from the reference model:\n    expected "
                + json.dumps(expected, ensure_ascii=False)[:2000] + "\n    model    "
                + json.dumps(actual, ensure_ascii=False)[:2000])


def check_admission(where, case):
    obj = case["object"]
    policies = policies_of(where, case.get("policies") or [])
    hard, not_live = object_issues(obj)
    for h in hard:
        problem(where, h)
    live = case.get("live", True)
    if live and not_live:
        problem(where, f"must be live: false ({'; '.join(sorted(set(not_live)))})")
    if not live and not not_live:
        problem(where, "live: false but the object looks creatable (no known reason found)")
    since = case.get("since")
    if since is not None and not re.fullmatch(r"1\.[0-9]+", str(since)):
        problem(where, f"since must be a Kubernetes minor version such as '1.35', found {since!r}")
    uses_image_volumes = any(v.get("image") is not None
                             for v in (pod_spec_of(obj).get("volumes") or []))
    if uses_image_volumes and since is None and live:
        problem(where, "an image volume needs since: '1.35' (older API servers refuse it by validation)")
    exp = case["expect"]
    expected = {"checked": exp["checked"], "admitted": exp["admitted"],
                "denials": exp.get("denials") or [], "warnings": exp.get("warnings") or []}
    compare(where, expected, evaluate(policies, obj))
    for d in expected["denials"]:
        if set(d) != {"policy", "rule", "message"}:
            problem(where, f"denial keys {sorted(d)}")
    for w in expected["warnings"]:
        if set(w) != {"policy", "message"}:
            problem(where, f"warning keys {sorted(w)}")


def check_plan(where, case):
    policies = policies_of(where, case.get("policies") or [])
    t, plan = case["type"], case["plan"]
    if t not in CATALOG:
        problem(where, f"type {t} has no plans")
        return
    if plan not in CATALOG[t]:
        problem(where, f"plan {plan} is not in the catalog of {t}")
        return
    exp = dict(case["expect"])
    exp.setdefault("denied_by", [])
    exp.setdefault("audit_warnings", [])
    compare(where, exp, decide_plan(policies, t, plan))


def check_document(where, case):
    errors, _, warnings = validate_document(case["document"])
    exp = case["expect"]
    pointer = exp.get("error_pointer")
    if pointer is None:
        if errors:
            problem(where, f"expected valid, model finds errors at {errors}")
        elif (exp.get("warnings") or []) != warnings:
            compare(where, exp.get("warnings") or [], warnings)
    else:
        if exp.get("warnings"):
            problem(where, "an invalid document has no warnings")
        if not errors:
            problem(where, f"expected an error at {pointer}, model finds the document valid")
        elif errors[0] != pointer:
            problem(where, f"expected error at {pointer}, model's first error is {errors[0]} (all: {errors})")
        elif len(set(errors)) > 1 and VERBOSE:
            print(f"  note {where}: several errors {errors}")


def main():
    names = {}
    totals = {}
    for directory, check in (("admission", check_admission), ("compute_plans", check_plan),
                             ("policy_documents", check_document)):
        path = os.path.join(HERE, directory)
        files = sorted(f for f in os.listdir(path) if f.endswith(".yaml")) if os.path.isdir(path) else []
        if not files:
            problem(directory, "no YAML files")
        totals[directory] = 0
        for f in files:
            full = os.path.join(path, f)
            try:
                with open(full, encoding="utf-8") as fh:
                    cases = yaml.safe_load(fh)
            except yaml.YAMLError as e:
                problem(f"{directory}/{f}", f"does not parse: {e}")
                continue
            if not isinstance(cases, list):
                problem(f"{directory}/{f}", "is not a YAML sequence")
                continue
            print(f"{directory}/{f}: {len(cases)} cases")
            totals[directory] += len(cases)
            for i, case in enumerate(cases):
                if not isinstance(case, dict):
                    problem(f"{directory}/{f}[{i}]", "case is not a mapping")
                    continue
                name = case.get("name")
                where = f"{directory}/{f}:{name}"
                if not isinstance(name, str) or not KEBAB.fullmatch(name):
                    problem(where, "name is not kebab-case")
                if name in names:
                    problem(where, f"duplicate name (also in {names[name]})")
                names[name] = f"{directory}/{f}"
                check_keys(where, case, directory)
                try:
                    check(where, case)
                except (KeyError, TypeError, AttributeError) as e:
                    problem(where, f"malformed case: {e!r}")
    for directory, n in totals.items():
        print(f"total {directory}: {n}")
    minimum = {"admission": 170, "compute_plans": 45, "policy_documents": 40}
    for directory, n in minimum.items():
        if totals.get(directory, 0) < n:
            problem(directory, f"{totals.get(directory, 0)} cases, at least {n} wanted")
    if problems:
        print(f"\n{len(problems)} problem(s):")
        for p in problems:
            print(" -", p)
        return 1
    print("\ncorpus OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
