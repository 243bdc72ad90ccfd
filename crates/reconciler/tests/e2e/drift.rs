//! Drift (SPEC 3.4 v3.1), as `palisade serve` runs: someone else (the plane's admin) deletes
//! what palisade installed — a policy's binding and ValidatingAdmissionPolicy, the shared
//! layout's parameter object, the guard — changes a binding to warn only, or removes a
//! namespace's boundary label, in every
//! layout on both versions. palisade's watches notice without any change in the store, put
//! it back, the API server denies the violating Pod again with the policy's message, and the
//! cluster counts and shows the repair. Someone who keeps deleting is answered with pauses
//! that the status states, and no status reads `enforced` meanwhile.
//!
//! Each repair's time (deletion → object back, and → `enforced` again) is printed; the figures
//! of docs/benchmarks.md come from these lines.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use kube::{Api, Resource};
use palisade_reconciler::Layout;
use palisade_vap::guard_name;
use palisade_vap::shared::{PARAMS_GROUP, PARAMS_KIND, PARAMS_PLURAL, PARAMS_VERSION};
use serde_json::json;

use crate::serve::Stack;
use crate::support::{
    apiserver_requests, in_every_layout, plane, retry, selector_of, wait_boundary_label,
};

in_every_layout!(drift_is_repaired);

/// How often a repair's waits look.
const POLL: Duration = Duration::from_millis(20);

const DENIAL: &str =
    "Policy 'trusted' (AllowedRegistries) denied image busybox:1.36: it is not under ghcr.io/acme.";

/// How many times each object is deleted: 3, or `DRIFT_ROUNDS` (the benchmark of
/// docs/benchmarks.md runs 50, with repairs never paused).
fn rounds() -> usize {
    std::env::var("DRIFT_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3)
}

/// A boundary with one namespace in the plane (cluster `k1`) and policy `trusted`, enforced.
struct Fixture {
    stack: Stack,
    admin: kube::Client,
    boundary: String,
    namespace: String,
}

impl Fixture {
    async fn new(version: &str, layout: Layout) -> Fixture {
        let plane = plane(version).await;
        let stack = if rounds() > 3 {
            Stack::start_repairing(layout, usize::MAX).await
        } else {
            Stack::start_in(layout).await
        };
        let boundary = stack
            .new_boundary("drift", "k1", plane.kubeconfig_yaml())
            .await;
        let namespace = stack.new_namespace(&boundary, "k1", "drift").await;
        stack
            .enforce_policy(
                &boundary,
                "k1",
                "trusted",
                json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}}]}),
            )
            .await;
        Fixture {
            stack,
            admin: plane.client().await,
            boundary,
            namespace,
        }
    }

    fn ours(&self) -> ListParams {
        ListParams::default().labels(&selector_of(&self.stack.installation, &self.boundary))
    }

    /// The denial a violating Pod gets (a server-side dry run), or `None` when admitted.
    async fn denial(&self) -> Option<String> {
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "drift-probe"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
        }))
        .unwrap();
        match pods
            .create(
                &PostParams {
                    dry_run: true,
                    ..PostParams::default()
                },
                &pod,
            )
            .await
        {
            Ok(_) => None,
            Err(kube::Error::Api(status)) => Some(status.message),
            Err(other) => panic!("dry-run create: {other}"),
        }
    }

    async fn status(&self) -> String {
        self.stack
            .policy_status(&self.boundary, "trusted", "k1")
            .await
            .unwrap_or_default()
    }

    async fn cluster(&self) -> serde_json::Value {
        self.stack.ok("GET", "/v1/clusters/k1", None).await
    }

    /// Waits until the policy reads `enforced` again and the violating Pod is denied, at most
    /// 60 s after `started` (when someone changed what palisade installed: `after`); the time
    /// since `started`.
    async fn wait_denied_again(&self, started: Instant, after: &str) -> Duration {
        let what = format!("after {after}: enforced and denied again");
        let left = Duration::from_secs(60).saturating_sub(started.elapsed());
        retry(&what, left, POLL, || async {
            let status = self.status().await;
            if status != "enforced" {
                return Err(format!("status {status}"));
            }
            match self.denial().await {
                Some(denial) if denial.ends_with(DENIAL) => Ok(started.elapsed()),
                denial => Err(format!("status {status} and denial {denial:?}")),
            }
        })
        .await
        .0
    }
}

/// Deletes `name` through `api` and waits until palisade has put an object of that name back;
/// then until the policy is `enforced` again and the violating Pod is denied. The two times.
async fn delete_and_wait<K>(f: &Fixture, api: &Api<K>, name: &str) -> (Duration, Duration)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let before = api.get(name).await.unwrap();
    let uid = before.meta().uid.clone();
    api.delete(name, &DeleteParams::default()).await.unwrap();
    let started = Instant::now();
    let what = format!("{name} put back");
    retry(&what, Duration::from_secs(30), POLL, || async {
        match api.get_opt(name).await.unwrap() {
            Some(object) if object.meta().uid != uid => Ok(()),
            _ => Err("missing, or the deleted one".to_owned()),
        }
    })
    .await;
    let back = started.elapsed();
    let enforced = f
        .wait_denied_again(started, &format!("deleting {name}"))
        .await;
    (back, enforced)
}

/// The name of the fixture's first object that `api` lists (of its installation and boundary).
async fn first_of<K>(f: &Fixture, api: &Api<K>) -> String
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&f.ours()).await.unwrap().items[0]
        .meta()
        .name
        .clone()
        .unwrap()
}

/// [`delete_and_wait`] `rounds()` times, reported as `kind`.
async fn delete_rounds<K>(
    f: &Fixture,
    api: &Api<K>,
    name: &str,
    kind: &str,
    (version, layout): (&str, Layout),
) where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut times = Vec::new();
    for _ in 0..rounds() {
        times.push(delete_and_wait(f, api, name).await);
    }
    report(version, layout, kind, &times);
}

/// Changes `name` through `api` as the field manager `drift-test` with the merge `patch`, and
/// waits until palisade has made it `restored` again, the policy is `enforced` and the violating
/// Pod denied; the cluster's last repair names the change.
async fn change_and_wait<K>(
    f: &Fixture,
    api: &Api<K>,
    name: &str,
    patch: serde_json::Value,
    restored: impl Fn(&K) -> bool,
    what: &str,
    (version, layout): (&str, Layout),
) where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let started = Instant::now();
    api.patch(
        name,
        &PatchParams {
            field_manager: Some("drift-test".to_owned()),
            ..PatchParams::default()
        },
        &Patch::Merge(patch),
    )
    .await
    .unwrap();
    let restoring = format!("{what} restored");
    retry(&restoring, Duration::from_secs(30), POLL, || async {
        let object = api.get(name).await.unwrap();
        if restored(&object) {
            Ok(())
        } else {
            Err(format!("{object:?}"))
        }
    })
    .await;
    let back = started.elapsed();
    f.stack.wait_enforced(&f.boundary, "trusted", "k1").await;
    let denial = f.denial().await.unwrap_or_default();
    assert!(denial.ends_with(DENIAL), "{denial}");
    eprintln!(
        "drift {version} {} {what} changed: back after {} ms, enforced after {} ms",
        layout.as_str(),
        back.as_millis(),
        started.elapsed().as_millis()
    );
    // The repair is recorded once the pass has confirmed the policy.
    let repaired = format!("{what} was changed by drift-test; restored");
    f.stack
        .wait_cluster("k1", what, |c| c["last_repair"]["message"] == repaired)
        .await;
}

fn report(version: &str, layout: Layout, kind: &str, times: &[(Duration, Duration)]) {
    let ms = |d: Duration| d.as_millis();
    let mut back: Vec<u128> = times.iter().map(|t| ms(t.0)).collect();
    let mut enforced: Vec<u128> = times.iter().map(|t| ms(t.1)).collect();
    if times.len() > 3 {
        back.sort_unstable();
        enforced.sort_unstable();
        let at = |v: &[u128], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        eprintln!(
            "drift {version} {} {kind}, {} deletions: object back p50 {} p99 {} max {} ms; enforced and denying p50 {} p99 {} max {} ms",
            layout.as_str(),
            times.len(),
            at(&back, 0.5),
            at(&back, 0.99),
            at(&back, 1.0),
            at(&enforced, 0.5),
            at(&enforced, 0.99),
            at(&enforced, 1.0),
        );
        return;
    }
    eprintln!(
        "drift {version} {} {kind}: object back after {back:?} ms, enforced and denying after {enforced:?} ms",
        layout.as_str()
    );
}

async fn drift_is_repaired(version: &str, layout: Layout) {
    let f = Fixture::new(version, layout).await;
    let policies = Api::<ValidatingAdmissionPolicy>::all(f.admin.clone());
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(f.admin.clone());
    let mut repaired = Vec::new();

    // What holds the policy in this layout.
    match layout {
        Layout::Shared => {
            let resource = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(PARAMS_GROUP, PARAMS_VERSION, PARAMS_KIND),
                PARAMS_PLURAL,
            );
            let parameters: Api<DynamicObject> =
                Api::namespaced_with(f.admin.clone(), &f.namespace, &resource);
            let name = first_of(&f, &parameters).await;
            delete_rounds(&f, &parameters, &name, "parameters", (version, layout)).await;
            repaired.push(format!(
                "parameter object {}/{name} was deleted; restored",
                f.namespace
            ));
            // Changed: the policy's mode set to audit, so it would only warn.
            change_and_wait(
                &f,
                &parameters,
                &name,
                json!({"spec": {"mode": "audit"}}),
                |o: &DynamicObject| o.data["spec"]["mode"] == "enforce",
                &format!("parameter object {}/{name}", f.namespace),
                (version, layout),
            )
            .await;
        }
        _ => {
            let name = first_of(&f, &bindings).await;
            delete_rounds(&f, &bindings, &name, "binding", (version, layout)).await;
            repaired.push(format!("binding {name} was deleted; restored"));
            // Changed rather than deleted: the binding set to warn only.
            change_and_wait(
                &f,
                &bindings,
                &name,
                json!({"spec": {"validationActions": ["Warn"]}}),
                |b: &ValidatingAdmissionPolicyBinding| {
                    b.spec.as_ref().and_then(|s| s.validation_actions.clone())
                        == Some(vec!["Deny".to_owned()])
                },
                &format!("binding {name}"),
                (version, layout),
            )
            .await;
        }
    }
    if layout != Layout::Shared {
        let policy = first_of(&f, &policies).await;
        delete_rounds(&f, &policies, &policy, "policy", (version, layout)).await;
        repaired.push(format!(
            "ValidatingAdmissionPolicy {policy} was deleted; restored"
        ));
        // Changed: errors let through.
        change_and_wait(
            &f,
            &policies,
            &policy,
            json!({"spec": {"failurePolicy": "Ignore"}}),
            |p: &ValidatingAdmissionPolicy| {
                p.spec.as_ref().and_then(|s| s.failure_policy.as_deref()) == Some("Fail")
            },
            &format!("ValidatingAdmissionPolicy {policy}"),
            (version, layout),
        )
        .await;
    }
    // The guard (its binding) and the namespace's label: once each, or every round of a
    // benchmark.
    let once = if rounds() > 3 { rounds() } else { 1 };
    let guard = guard_name(&f.stack.installation);
    let mut times = Vec::new();
    for _ in 0..once {
        times.push(delete_and_wait(&f, &bindings, &guard).await);
    }
    report(version, layout, "guard", &times);

    // palisade acts as the plane's admin here, whom its guard lets through, so the admin can
    // remove the label. Each time: the label back, then `enforced` and the denial again.
    let namespaces: Api<Namespace> = Api::all(f.admin.clone());
    let mut times = Vec::new();
    for _ in 0..once {
        let started = Instant::now();
        namespaces
            .patch(
                &f.namespace,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"palisade.dev/boundary": null}}})),
            )
            .await
            .unwrap();
        wait_boundary_label(&namespaces, &f.namespace, &f.boundary, POLL).await;
        let back = started.elapsed();
        let enforced = f.wait_denied_again(started, "the label's removal").await;
        times.push((back, enforced));
    }
    report(version, layout, "namespace_label", &times);

    // Each deletion and change one repair.
    let cluster = f.cluster().await;
    let changed = if layout == Layout::Shared { 1 } else { 2 };
    let expected = repaired.len() * rounds() + 2 * once + changed;
    assert!(
        cluster["repairs"].as_u64().unwrap() >= expected as u64,
        "{expected} repairs expected: {cluster}"
    );
    assert_eq!(
        cluster["last_repair"]["message"],
        format!(
            "namespace {} lost its boundary label; restored",
            f.namespace
        ),
        "{cluster}"
    );
}

/// Someone who keeps deleting a binding: from the sixth deletion within a minute palisade
/// pauses before it repairs, the status says so in words throughout, and the binding comes
/// back after the pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_deletions_are_repaired_after_a_stated_pause() {
    let f = Fixture::new("1.37", Layout::PerPolicy).await;
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(f.admin.clone());
    let name = format!("trusted.{}.palisade.dev", f.boundary);
    for _ in 0..5 {
        delete_and_wait(&f, &bindings, &name).await;
    }
    // The sixth within a minute waits 2 s.
    bindings
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let deleted = Instant::now();
    let expected = format!(
        "not enforced: binding {name} was deleted 6 times within a minute; restoring after a pause of 2 s in k1"
    );
    let mut seen = Vec::new();
    loop {
        let status = f.status().await;
        let present = bindings.get_opt(&name).await.unwrap().is_some();
        if present {
            break;
        }
        // Once palisade has seen the deletion (a watch event, milliseconds), never
        // `enforced` while the binding is missing.
        if seen.contains(&expected) {
            assert_ne!(status, "enforced", "the binding is missing: {seen:?}");
        }
        seen.push(status);
        assert!(deleted.elapsed() < Duration::from_secs(30), "{seen:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let waited = deleted.elapsed();
    assert!(seen.contains(&expected), "{seen:?}");
    assert!(
        waited >= Duration::from_millis(1500),
        "put back after {waited:?}"
    );
    f.stack.wait_enforced(&f.boundary, "trusted", "k1").await;
    let denial = f.denial().await.unwrap_or_default();
    assert!(denial.ends_with(DENIAL), "{denial}");
}

/// The idle cost of the drift watches (docs/benchmarks.md): a private 1.37 plane, one cluster
/// with 1,000 boundaries of one namespace each, palisade idle between passes; the API server's
/// own count of palisade's LIST and WATCH requests per resource over one minute.
/// `cargo test -p palisade-reconciler --test e2e -- drift::idle_cost --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it with --ignored"]
async fn idle_cost() {
    const BOUNDARIES: usize = 1_000;
    let plane = tokio::task::spawn_blocking(|| {
        palisade_testkit::control_plane::ControlPlane::start("1.37")
    })
    .await
    .unwrap();
    let admin = plane.client().await;
    let stack = Stack::start_in(Layout::PerPolicy).await;
    stack
        .ok("POST", "/v1/boundaries", Some(json!({"name": "idle-0"})))
        .await;
    stack
        .add_cluster("k1", plane.kubeconfig_yaml(), "idle-0")
        .await;
    for i in 0..BOUNDARIES {
        let boundary = format!("idle-{i}");
        if i > 0 {
            stack.store.create_boundary(&boundary, None).await.unwrap();
            stack.store.attach_cluster(&boundary, "k1").await.unwrap();
        }
        // Through the API, which creates and labels the namespace in the cluster; within the
        // write limits.
        let path = format!("/v1/boundaries/{boundary}/clusters/k1/namespaces/idle-ns-{i}");
        loop {
            let (status, body) = stack.call("PUT", &path, None).await;
            if status.as_u16() == 429 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            assert!(status.is_success(), "{path}: {status} {body}");
            break;
        }
    }
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let started = Instant::now();
    loop {
        let labelled = namespaces
            .list(&ListParams::default().labels("palisade.dev/boundary"))
            .await
            .unwrap()
            .items
            .len();
        if labelled == BOUNDARIES {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "{labelled} of {BOUNDARIES} namespaces labelled after 10 minutes"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "idle cost: {BOUNDARIES} namespaces labelled {} s after the first write",
        started.elapsed().as_secs()
    );
    // (resource, verb) → WATCH and LIST requests so far.
    let counts = || async {
        apiserver_requests(&admin, |verb| verb == "WATCH" || verb == "LIST")
            .await
            .into_iter()
            .map(|((verb, resource), count)| ((resource, verb), count))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    // Wait until the passes the writes started are over: no LIST of palisade's objects for
    // 15 s (a pass lists them per boundary).
    let lists = |counts: &std::collections::BTreeMap<(String, String), f64>| {
        counts
            .iter()
            .filter(|((_, verb), _)| verb == "LIST")
            .map(|(_, v)| v)
            .sum::<f64>()
    };
    let quiet_since = Instant::now();
    let mut last = lists(&counts().await);
    loop {
        tokio::time::sleep(Duration::from_secs(15)).await;
        let now = lists(&counts().await);
        if now == last {
            break;
        }
        last = now;
        assert!(
            quiet_since.elapsed() < Duration::from_secs(900),
            "the passes did not end"
        );
    }
    eprintln!(
        "idle cost: passes over after {} s more",
        quiet_since.elapsed().as_secs()
    );
    let before = counts().await;
    let rss = |field: &str| {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find(|l| l.starts_with(field))
            .map(str::to_owned)
            .unwrap_or_default()
    };
    tokio::time::sleep(Duration::from_secs(60)).await;
    let after = counts().await;
    for (key, value) in &after {
        let delta = value - before.get(key).copied().unwrap_or(0.0);
        if delta > 0.0 {
            eprintln!("idle cost: {} {} {delta} in 60 s", key.0, key.1);
        }
    }
    eprintln!("idle cost: test process {}", rss("VmRSS"));
}
