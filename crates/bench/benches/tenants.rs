//! Admission cost as tenants share a cluster (issue: scale, item 1), by the API server's own
//! metrics: for 0, 1, 10, 100 and 300 boundaries with 3 policies each (one `requiredLabels`,
//! one `allowedRegistries`, one `disallowLatestTag`, as palisade renders them: one
//! ValidatingAdmissionPolicy and one binding per policy), `PODS` compliant Pods (default 300)
//! are created one after the other in a namespace of the first boundary (with 0 boundaries, in
//! an unlabelled namespace), and the API server's `/metrics` is read before and after:
//!
//! - `apiserver_admission_step_admission_duration_seconds{type="validate",operation="CREATE",
//!   rejected="false"}` (sum / count of the run's delta): the validating admission step per
//!   create, which is where ValidatingAdmissionPolicies are matched and evaluated;
//! - the client's p50 per create, and the API server's resident memory (`VmRSS`) after the run.
//!
//! (`apiserver_validating_admission_policy_check_duration_seconds` is not used: in 1.30 and
//! 1.37 the dispatcher observes an admitted request only when its evaluation failed
//! (`dispatcher.go`: `ActionAdmit` with `EvalError`), so compliant creates leave it at zero.)
//!
//! Boundaries are added to the same control plane step by step (0 → 1 → 10 → 100 → 300), each
//! step waiting until its last policy is active (a dry-run it denies). One private control plane
//! per version asked for.
//!
//! `cargo bench -p palisade-bench --bench tenants -- VERSION...` (e.g. `1.30 1.37`)
//! (environment: `PODS`, `STEPS`, e.g. `STEPS=0,1,10`; `LAYOUT=shared` for the shared layout:
//! one policy and two bindings per installation, each policy's rules in a `BoundaryPolicy` in
//! its boundary's namespace; `LAYOUT=per-boundary`: one policy and binding per boundary; `FLOOR=1` for the floor: instead of palisade's policies, 3 minimal
//! ValidatingAdmissionPolicies per boundary, each one comparison (`object.metadata.name !=
//! 'probe'`) bound to the boundary's namespaces like palisade's, which is what any 3 policy
//! objects cost the API server on this machine).
//!
//! `PAIRED=ROUNDS` instead measures, in one control plane per version, what 3 policies add to a
//! create, with the machine's drift paired out: one boundary with palisade's 3 policies, one
//! with the 3 minimal policies of `FLOOR=1`, and a namespace of no boundary; then `ROUNDS`
//! rounds of `PODS` creates in each of the three namespaces in turn, `/metrics` read around
//! each block. Reported: per round, each block's validate step minus the same round's block in
//! the namespace of no boundary (where the 6 bindings' namespace selectors are checked and do
//! not match); the median and range over the rounds. A fourth namespace is of a boundary whose
//! 3 policies are in palisade's per-boundary layout (`--admission-layout per-boundary`: one
//! ValidatingAdmissionPolicy and one binding holding the 3 validations). With `EXCEPTIONS=N`,
//! two more namespaces are of boundaries whose 3 policies (per-policy, and per-boundary) carry
//! N exceptions each (SPEC 7), matched by labels no created Pod has: what exceptions cost a
//! create they do not let past. With `ROLLOUT=1`, two more: a boundary of 4 policies, and one
//! of 3 whose `trusted` is mid-rollout (SPEC 8, per-policy layout), measured where the stage
//! has not reached (version 1 enforcing, version 2 auditing): issue 44's "one more evaluation"
//! goal, reported as the ratio of the two paired by round.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use palisade_policy::Name;
use palisade_reconciler::{InLayout, Layout};
use palisade_testkit::bench::{args_or_usage, env_number};
use palisade_testkit::control_plane::{temp_namespace, ControlPlane};
use serde_json::json;

#[path = "support/plane.rs"]
mod plane;

use plane::{layout_from_env, private_plane};

const INSTALLATION: &str = "benchtenants";

/// The three policies of every boundary.
fn policies() -> Vec<palisade_policy::Policy> {
    [
        (
            "owner",
            json!({"rules": [{"requiredLabels": {"labels": [{"key": "team"}]}}]}),
        ),
        (
            "trusted",
            json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}}]}),
        ),
        ("no-latest", json!({"rules": [{"disallowLatestTag": {}}]})),
    ]
    .into_iter()
    .map(|(name, spec)| palisade_testkit::corpus::policy(name, "bench", spec))
    .collect()
}

/// The Prometheus text's samples: `name{labels}` → value (histogram `_sum`/`_count` lines).
async fn metrics(client: &kube::Client) -> BTreeMap<String, f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(request).await.unwrap();

    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            Some((key.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// The sum over the samples named `name` whose labels hold every `(label, value)`.
fn total(samples: &BTreeMap<String, f64>, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(key, _)| {
            key.split_once('{')
                .map_or(key.as_str() == name, |(n, rest)| {
                    n == name
                        && labels
                            .iter()
                            .all(|(l, v)| rest.contains(&format!("{l}=\"{v}\"")))
                })
        })
        .map(|(_, v)| v)
        .sum()
}

/// The validating admission step per compliant create (ms) between two reads of `/metrics`.
fn validate_ms(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> f64 {
    let step = "apiserver_admission_step_admission_duration_seconds";
    let labels = [
        ("type", "validate"),
        ("operation", "CREATE"),
        ("rejected", "false"),
    ];
    let delta = |name: &str| total(after, name, &labels) - total(before, name, &labels);
    delta(&format!("{step}_sum")) / delta(&format!("{step}_count")).max(1.0) * 1000.0
}

fn rss_mib(plane: &ControlPlane) -> f64 {
    let pid = std::fs::read_to_string(plane.workdir().join("kube-apiserver.pid")).unwrap();
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024.0
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"team": "web"}},
        "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/web:1.0"}]},
    }))
    .unwrap()
}

/// Installs the 3 policies of `count` more boundaries (a namespace each), and waits until the
/// last one denies.
async fn add_boundaries(
    cluster: &InLayout,
    client: &kube::Client,
    from: usize,
    count: usize,
) -> Vec<String> {
    let mut namespaces = Vec::new();
    let latest = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe",
        "labels": {"team": "web"}},
        "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/web:latest"}]}});
    for index in from..from + count {
        let boundary = Name::parse(&format!("tenant-{index}")).unwrap();
        let namespace = temp_namespace(client, Some(boundary.as_str())).await;
        cluster
            .apply_boundary(INSTALLATION, &boundary, &policies())
            .await
            .unwrap();
        namespaces.push(namespace);
    }
    if let Some(last) = namespaces.last() {
        let deadline = Instant::now() + Duration::from_secs(120);
        while cluster
            .dry_run_create(last, &latest)
            .await
            .unwrap()
            .admitted()
        {
            assert!(
                Instant::now() < deadline,
                "the last boundary's policies never acted"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    namespaces
}

/// `per_policy` exceptions to each of [`policies`], matched by a label no bench Pod carries
/// (`app: legacy-<i>`): every create is judged as usual, and pays for looking at them.
fn exceptions(per_policy: usize) -> Vec<palisade_policy::Exception> {
    policies()
        .iter()
        .flat_map(|policy| {
            (0..per_policy).map(move |i| palisade_policy::Exception {
                name: Name::parse(&format!("x-{}-{i}", policy.name())).unwrap(),
                policy: policy.name().clone(),
                rules: Default::default(),
                object_match: Some(palisade_policy::ObjectMatch {
                    labels: vec![(
                        palisade_policy::LabelKey::parse("app").unwrap(),
                        palisade_policy::LabelValue::parse(&format!("legacy-{i}")).unwrap(),
                    )],
                    ..Default::default()
                }),
                resources: Vec::new(),
                plans: Vec::new(),
                expires_at: "2999-01-01T00:00:00.000Z".to_owned(),
                reason: "bench".to_owned(),
            })
        })
        .collect()
}

/// One boundary with [`policies`] and `per_policy` [`exceptions`] each, in `cluster`'s layout;
/// its namespace, once its policies deny.
async fn add_excepted_boundary(
    cluster: &InLayout,
    client: &kube::Client,
    index: usize,
    per_policy: usize,
) -> String {
    let boundary = Name::parse(&format!("tenant-{index}")).unwrap();
    let namespace = temp_namespace(client, Some(boundary.as_str())).await;
    cluster
        .apply_boundary_excepted(
            INSTALLATION,
            &boundary,
            &policies(),
            &exceptions(per_policy),
        )
        .await
        .unwrap();
    let latest = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe",
        "labels": {"team": "web"}},
        "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/web:latest"}]}});
    until_refused(client, &namespace, latest, "the excepted policies").await;
    namespace
}

/// The version of `trusted` being rolled out in `ROLLOUT=1`: the same registry, and the label
/// `team: web`, which the bench's Pods carry.
fn trusted_next(name: &str) -> palisade_policy::Policy {
    palisade_testkit::corpus::policy(
        name,
        "bench",
        json!({"rules": [
            {"allowedRegistries": {"registries": ["ghcr.io/acme"]}},
            {"requiredLabels": {"labels": [{"key": "team", "value": "web"}]}},
        ]}),
    )
}

/// `ROLLOUT=1` (SPEC 8; issue 44's goal): a boundary of 4 policies ([`policies`] and a 4th with
/// the rolled-out version's rules), and a boundary whose `trusted` is mid-rollout in the
/// per-policy layout, measured in a namespace the stage has not reached (version 1 enforcing,
/// version 2 auditing), another namespace of it reached. Their namespaces, once all is active.
async fn add_rollout_boundaries(
    cluster: &InLayout,
    client: &kube::Client,
    from: usize,
) -> (String, String) {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    use kube::api::{Patch, PatchParams};

    let four = Name::parse(&format!("tenant-{from}")).unwrap();
    let four_ns = temp_namespace(client, Some(four.as_str())).await;
    let mut four_policies = policies();
    four_policies.push(trusted_next("trusted-next"));
    cluster
        .apply_boundary(INSTALLATION, &four, &four_policies)
        .await
        .unwrap();

    let rolling = Name::parse(&format!("tenant-{}", from + 1)).unwrap();
    let measured = temp_namespace(client, Some(rolling.as_str())).await;
    let reached_ns = temp_namespace(client, Some(rolling.as_str())).await;
    let (trusted, others): (Vec<_>, Vec<_>) = policies()
        .into_iter()
        .partition(|p| p.name().as_str() == "trusted");
    cluster
        .apply_boundary(INSTALLATION, &rolling, &others)
        .await
        .unwrap();
    let reached = std::collections::BTreeSet::from([Name::parse(&reached_ns).unwrap()]);
    let next = trusted_next("trusted");
    // Handed over: version 1 has left the reached namespace.
    let version = palisade_vap::per_boundary::Rolling {
        current: &next,
        version: 2,
        reached: &reached,
        left: &reached,
    };
    let staged = palisade_vap::per_policy::render_staged(
        &rolling,
        trusted.first(),
        version,
        INSTALLATION,
        &[],
    )
    .unwrap();
    let apply = PatchParams::apply(palisade_vap::FIELD_MANAGER).force();
    let objects: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let previous = staged.previous.clone().unwrap();
    for object in [&previous.policy, &staged.policy] {
        let name = object.metadata.name.clone().unwrap();
        objects
            .patch(&name, &apply, &Patch::Apply(object))
            .await
            .unwrap();
    }
    for binding in staged.bindings.iter().chain([&previous.binding]) {
        let name = binding.metadata.name.clone().unwrap();
        bindings
            .patch(&name, &apply, &Patch::Apply(binding))
            .await
            .unwrap();
    }
    // Active: the 4th policy denies in its boundary; in the measured namespace version 1
    // denies another registry and version 2 warns of another team.
    let other_team = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe",
        "labels": {"team": "api"}},
        "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/api:1.0"}]}});
    until_refused(client, &four_ns, other_team.clone(), "the 4th policy").await;
    let other_registry = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe",
        "labels": {"team": "web"}},
        "spec": {"containers": [{"name": "c", "image": "docker.io/library/nginx:1.27"}]}});
    until_refused(client, &measured, other_registry, "version 1 of trusted").await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let answer = cluster
            .dry_run_create(&measured, &other_team)
            .await
            .unwrap();
        if answer.admitted() && !answer.warnings.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "version 2's audit never acted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (four_ns, measured)
}

/// As [`add_boundaries`], with 3 minimal policies per boundary (`FLOOR=1`).
async fn add_floor_boundaries(client: &kube::Client, from: usize, count: usize) -> Vec<String> {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let policies = Api::<ValidatingAdmissionPolicy>::all(client.clone());
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone());
    let mut namespaces = Vec::new();
    for index in from..from + count {
        let boundary = format!("tenant-{index}");
        let namespace = temp_namespace(client, Some(&boundary)).await;
        for slot in 0..3 {
            let name = format!("floor-{index}-{slot}");
            let policy = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
                    "validations": [{"expression": "object.metadata.name != 'probe'"}],
                },
            }))
            .unwrap();
            policies
                .create(&PostParams::default(), &policy)
                .await
                .unwrap();
            let binding = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {
                    "policyName": name,
                    "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": {"matchLabels": {"palisade.dev/boundary": boundary}}},
                },
            }))
            .unwrap();
            bindings
                .create(&PostParams::default(), &binding)
                .await
                .unwrap();
        }
        namespaces.push(namespace);
    }
    if let Some(last) = namespaces.last() {
        let probe = json!({"metadata": {"name": "probe"},
            "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/web:1.0"}]}});
        until_refused(client, last, probe, "the floor policies").await;
    }
    namespaces
}

/// Dry-run creates the `probe` Pod in `namespace` until it is refused (the policies meant to
/// refuse it are active); panics after 120 s, naming `what` never acted.
async fn until_refused(
    client: &kube::Client,
    namespace: &str,
    probe: serde_json::Value,
    what: &str,
) {
    let probe: Pod = serde_json::from_value(probe).unwrap();
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while api.create(&dry, &probe).await.is_ok() {
        assert!(Instant::now() < deadline, "{what} never acted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Step {
    boundaries: usize,
    validate_ms: f64,
    client_p50_ms: f64,
    rss_mib: f64,
}

async fn measure(
    plane: &ControlPlane,
    client: &kube::Client,
    namespace: &str,
    boundaries: usize,
    pods: usize,
) -> Step {
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    // Warm-up, not counted.
    for i in 0..20 {
        api.create(&PostParams::default(), &pod(&format!("w-{boundaries}-{i}")))
            .await
            .unwrap();
    }
    let before = metrics(client).await;
    let mut latencies = Vec::new();
    for i in 0..pods {
        let started = Instant::now();
        api.create(&PostParams::default(), &pod(&format!("p-{boundaries}-{i}")))
            .await
            .unwrap();
        latencies.push(started.elapsed());
    }
    let after = metrics(client).await;
    latencies.sort();
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    Step {
        boundaries,
        validate_ms: validate_ms(&before, &after),
        client_p50_ms: latencies[latencies.len() / 2].as_secs_f64() * 1000.0,
        rss_mib: rss_mib(plane),
    }
}

/// The validate step per create (ms) of `pods` creates in `namespace`, from `/metrics`.
async fn validate_step(client: &kube::Client, namespace: &str, prefix: &str, pods: usize) -> f64 {
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    let before = metrics(client).await;
    for i in 0..pods {
        api.create(&PostParams::default(), &pod(&format!("{prefix}-{i}")))
            .await
            .unwrap();
    }
    let after = metrics(client).await;
    validate_ms(&before, &after)
}

/// The median and range of `values`.
fn median_range(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    (median, values[0], values[n - 1])
}

/// `PAIRED=ROUNDS`: palisade's 3 policies and the 3 minimal ones against no policy, block by
/// block in one control plane (see the module's documentation).
async fn paired(version: &str, rounds: usize, pods: usize) {
    let (plane, client, cluster) = private_plane(version, Layout::PerPolicy).await;
    let none = temp_namespace(&client, None).await;
    let palisade = add_boundaries(&cluster, &client, 0, 1).await.remove(0);
    let floor = add_floor_boundaries(&client, 1, 1).await.remove(0);
    let mut blocks = vec![("none", &none), ("palisade", &palisade), ("floor", &floor)];
    let per_boundary = cluster.to(Layout::PerBoundary);
    let per_boundary = add_boundaries(&per_boundary, &client, 2, 1).await.remove(0);
    blocks.push(("per-boundary", &per_boundary));
    // `EXCEPTIONS=N`: the same 3 policies with N exceptions each that match nothing created.
    let per_policy_exceptions = env_number("EXCEPTIONS", 0);
    let excepted;
    let per_boundary_excepted;
    if per_policy_exceptions > 0 {
        excepted = add_excepted_boundary(&cluster, &client, 3, per_policy_exceptions).await;
        blocks.push(("palisade-excepted", &excepted));
        per_boundary_excepted = add_excepted_boundary(
            &cluster.to(Layout::PerBoundary),
            &client,
            4,
            per_policy_exceptions,
        )
        .await;
        blocks.push(("per-boundary-excepted", &per_boundary_excepted));
    }
    // `ROLLOUT=1`: 4 policies, against 3 with one of them mid-rollout.
    let rollout;
    if env_number("ROLLOUT", 0) > 0 {
        rollout = add_rollout_boundaries(&cluster, &client, 5).await;
        blocks.push(("four-policies", &rollout.0));
        blocks.push(("one-rolling-out", &rollout.1));
    }
    for &(name, namespace) in &blocks {
        validate_step(&client, namespace, &format!("warm-{name}"), 50).await;
    }
    let mut steps: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for round in 0..rounds {
        for &(name, namespace) in &blocks {
            let ms = validate_step(&client, namespace, &format!("r{round}-{name}"), pods).await;
            steps.entry(name).or_default().push(ms);
        }
        for &(_, namespace) in &blocks {
            Api::<Pod>::namespaced(client.clone(), namespace)
                .delete_collection(&DeleteParams::default(), &ListParams::default())
                .await
                .unwrap();
        }
        let line: Vec<String> = blocks
            .iter()
            .map(|(name, _)| format!("{name} {:.3} ms", steps[name][round]))
            .collect();
        eprintln!("paired {version} round {round}: {}", line.join(", "));
    }
    println!(
        "Kubernetes {}: validate step per create, {rounds} rounds of {pods} creates per namespace",
        plane.version()
    );
    println!("| namespace | validate step (median, range) | added to no policy, paired by round (median, range) |");
    println!("|---|---|---|");
    for &(name, _) in &blocks {
        let (m, lo, hi) = median_range(steps[name].clone());
        let added: Vec<f64> = steps[name]
            .iter()
            .zip(&steps["none"])
            .map(|(with, without)| with - without)
            .collect();
        let (am, alo, ahi) = median_range(added);
        println!("| {name} | {m:.3} ms ({lo:.3}–{hi:.3}) | {am:.3} ms ({alo:.3}–{ahi:.3}) |");
    }
    if let (Some(rolling), Some(four)) = (steps.get("one-rolling-out"), steps.get("four-policies"))
    {
        let ratios: Vec<f64> = rolling.iter().zip(four).map(|(r, f)| r / f).collect();
        let (m, lo, hi) = median_range(ratios);
        println!(
            "one rolling out / four policies, paired by round: {m:.3}× (median; range {lo:.3}–{hi:.3})"
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(versions) = args_or_usage(
        "tenants",
        "Kubernetes versions (private control planes, minutes each)",
        "cargo bench -p palisade-bench --bench tenants -- 1.30 1.37",
    ) else {
        return;
    };
    let pods = env_number("PODS", 300);
    let rounds = env_number("PAIRED", 0);
    if rounds > 0 {
        for version in versions {
            paired(&version, rounds, pods).await;
        }
        return;
    }
    let steps: Vec<usize> = std::env::var("STEPS")
        .unwrap_or_else(|_| "0,1,10,100,300".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("STEPS: numbers separated by commas")
        })
        .collect();
    let layout = layout_from_env();
    let floor = std::env::var("FLOOR").is_ok_and(|v| v == "1");
    let what = if floor { "floor" } else { layout.as_str() };
    for version in versions {
        let (plane, client, cluster) = private_plane(&version, layout).await;
        let unlabelled = temp_namespace(&client, None).await;
        let mut namespaces: Vec<String> = Vec::new();
        let mut results = Vec::new();
        for &boundaries in &steps {
            let started = Instant::now();
            let (from, count) = (namespaces.len(), boundaries - namespaces.len());
            let added = if floor {
                add_floor_boundaries(&client, from, count).await
            } else {
                add_boundaries(&cluster, &client, from, count).await
            };
            namespaces.extend(added);
            let installed = started.elapsed();
            let namespace = namespaces.first().unwrap_or(&unlabelled).clone();
            let step = measure(&plane, &client, &namespace, boundaries, pods).await;
            eprintln!(
                "tenants {version} ({} layout): {boundaries} boundaries ({} objects) installed and active in {:.1} s; \
                 validate step {:.3} ms per create; client p50 {:.2} ms; API server RSS {:.0} MiB",
                what,
                match layout {
                    Layout::PerPolicy => boundaries * 6,
                    Layout::Shared => 3 + boundaries * 3,
                    Layout::PerBoundary => boundaries * 2,
                },
                installed.as_secs_f64(),
                step.validate_ms,
                step.client_p50_ms,
                step.rss_mib
            );
            results.push(step);
        }
        let base = results
            .iter()
            .find(|s| s.boundaries == 1)
            .map_or(f64::NAN, |s| s.validate_ms);
        println!(
            "Kubernetes {} ({} layout, {pods} creates per step)",
            plane.version(),
            what
        );
        println!("| boundaries × 3 policies | validate step per create | ratio to 1 boundary | client p50 | API server RSS |");
        println!("|---|---|---|---|---|");
        for s in &results {
            println!(
                "| {} | {:.3} ms | {:.2}× | {:.2} ms | {:.0} MiB |",
                s.boundaries,
                s.validate_ms,
                s.validate_ms / base,
                s.client_p50_ms,
                s.rss_mib
            );
        }
    }
}
