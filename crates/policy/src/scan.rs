//! Judging objects already stored in a cluster (SPEC 3, issue "preview"): what a policy would
//! say about each checked object if it were created now, and which workload each belongs to.
//!
//! A [`Scan`] is fed the listed objects one at a time, in any order (pages of any size), and
//! keeps only what it needs to answer: the violations found, and for every controller it saw
//! (everything checked but Pods) its kind, name, owner and replicas, so that a Pod's owner chain
//! (Pod → ReplicaSet → Deployment) can be resolved at the end. Memory grows with the number of
//! violations and controllers, never with the number of Pods that comply.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::admission::{at, first_violation, first_violation_excepted, AdmissionObject};
use crate::policy::{Policy, RuleKind};

/// How far an owner chain is followed (Pod → ReplicaSet → Deployment needs 2; a CronJob's Pod
/// needs 3). A cycle in malformed owner references stops here.
const MAX_CHAIN: usize = 8;

/// An object named by kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// A link of an owner chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub kind: String,
    pub name: String,
}

/// The top of an owner chain (the object itself when it has no owner) and its current
/// replicas: what is at risk when its pods are denied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub kind: String,
    pub name: String,
    pub replicas: u64,
}

/// One object a policy's rules reject, with the exact message the API server would give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub object: ObjectRef,
    pub api_version: String,
    /// The object's `metadata.uid` (empty when it has none).
    pub uid: String,
    /// Owners from the object's controller up to the top-level workload.
    pub owners: Vec<Owner>,
    pub workload: Workload,
    pub rule: RuleKind,
    pub message: String,
}

/// An object an exception let past a policy's rules (SPEC 7): not a violation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Excepted {
    pub object: ObjectRef,
    pub api_version: String,
    pub uid: String,
    /// The exception that let it past.
    pub exception: crate::Name,
}

/// What a scan found for one policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Violations in the order of (namespace, kind, name).
    pub violations: Vec<Violation>,
    /// Objects that would violate the policy but for an exception, in the same order.
    pub excepted: Vec<Excepted>,
    /// Checked objects per namespace (violating or not; exempt terminating objects excluded).
    pub checked: BTreeMap<String, u64>,
}

impl Findings {
    /// Distinct top-level workloads among the violations, and the sum of their replicas.
    pub fn workloads_at_risk(&self) -> (u64, u64) {
        let mut seen = BTreeSet::new();
        let mut replicas = 0;
        for violation in &self.violations {
            let key = (
                violation.object.namespace.as_str(),
                violation.workload.kind.as_str(),
                violation.workload.name.as_str(),
            );
            if seen.insert(key) {
                replicas += violation.workload.replicas;
            }
        }
        (seen.len() as u64, replicas)
    }

    /// Checked objects in all namespaces.
    pub fn checked_total(&self) -> u64 {
        self.checked.values().sum()
    }
}

#[derive(Debug)]
struct Controller {
    kind: String,
    name: String,
    owner: Option<OwnerLink>,
    replicas: u64,
}

#[derive(Clone, Debug)]
struct OwnerLink {
    uid: String,
    kind: String,
    name: String,
}

#[derive(Debug)]
struct Found {
    object: ObjectRef,
    api_version: String,
    uid: String,
    owner: Option<OwnerLink>,
    replicas: u64,
    rule: RuleKind,
    message: String,
}

/// A scan of listed objects against several policies at once (one listing serves them all).
#[derive(Debug)]
pub struct Scan<'p> {
    policies: Vec<&'p Policy>,
    exceptions: Vec<&'p crate::Exception>,
    controllers: HashMap<String, Controller>,
    found: Vec<Vec<Found>>,
    excepted: Vec<Vec<Excepted>>,
    checked: BTreeMap<String, u64>,
    unreadable: u64,
}

impl<'p> Scan<'p> {
    pub fn new(policies: Vec<&'p Policy>) -> Self {
        let found = policies.iter().map(|_| Vec::new()).collect();
        let excepted = policies.iter().map(|_| Vec::new()).collect();
        Scan {
            policies,
            exceptions: Vec::new(),
            controllers: HashMap::new(),
            found,
            excepted,
            checked: BTreeMap::new(),
            unreadable: 0,
        }
    }

    /// The same scan judging with `exceptions` in force (SPEC 7): what they let past is listed
    /// as excepted, not as a violation.
    pub fn with_exceptions(mut self, exceptions: Vec<&'p crate::Exception>) -> Self {
        self.exceptions = exceptions;
        self
    }

    /// Objects the rules could not read (they are counted, not judged; the API server would
    /// not have stored them).
    pub fn unreadable(&self) -> u64 {
        self.unreadable
    }

    /// Judges one listed object (as the API server returns it: `apiVersion` and `kind` set).
    pub fn observe(&mut self, object: &Value) {
        let Ok(admission) = AdmissionObject::from_json(object) else {
            self.unreadable += 1;
            return;
        };
        if !admission.is_checked() {
            return;
        }
        let namespace = admission.namespace.as_deref().unwrap_or_default();
        let name = admission.name.as_deref().unwrap_or_default();
        let uid = object
            .get("metadata")
            .and_then(|m| m.get("uid"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        // Owner and replicas are read only for what needs them (controllers and violations):
        // most Pods comply, and a preview reads many of them.
        if admission.kind != "Pod" && !uid.is_empty() {
            self.controllers.insert(
                uid.to_owned(),
                Controller {
                    kind: admission.kind.clone(),
                    name: name.to_owned(),
                    owner: controller_of(object),
                    replicas: replicas_of(&admission.kind, object),
                },
            );
        }
        if admission.terminating {
            return;
        }
        match self.checked.get_mut(namespace) {
            Some(count) => *count += 1,
            None => {
                self.checked.insert(namespace.to_owned(), 1);
            }
        }
        let object_ref = || ObjectRef {
            kind: admission.kind.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        for (index, policy) in self.policies.iter().enumerate() {
            let (denial, used) = if self.exceptions.is_empty() {
                (first_violation(policy, &admission), Vec::new())
            } else {
                first_violation_excepted(
                    policy,
                    &admission,
                    &crate::AdmissionRequest::default(),
                    &self.exceptions,
                )
            };
            if denial.is_none() {
                if let Some(exception) = used.first() {
                    self.excepted[index].push(Excepted {
                        object: object_ref(),
                        api_version: admission.api_version.clone(),
                        uid: uid.to_owned(),
                        exception: exception.name.clone(),
                    });
                }
            }
            if let Some(denial) = denial {
                self.found[index].push(Found {
                    object: object_ref(),
                    api_version: admission.api_version.clone(),
                    uid: uid.to_owned(),
                    owner: controller_of(object),
                    replicas: replicas_of(&admission.kind, object),
                    rule: denial.rule,
                    message: denial.message,
                });
            }
        }
    }

    /// The findings per policy, in the order the policies were given.
    pub fn finish(self) -> Vec<Findings> {
        let Scan {
            controllers,
            found,
            excepted,
            checked,
            ..
        } = self;
        found
            .into_iter()
            .zip(excepted)
            .map(|(list, mut excepted)| {
                excepted.sort_by(|a, b| order(&a.object).cmp(&order(&b.object)));
                let mut violations: Vec<Violation> = list
                    .into_iter()
                    .map(|found| resolve(&controllers, found))
                    .collect();
                violations.sort_by(|a, b| order(&a.object).cmp(&order(&b.object)));
                Findings {
                    violations,
                    excepted,
                    checked: checked.clone(),
                }
            })
            .collect()
    }
}

/// The order findings are listed in: namespace, kind, name.
fn order(object: &ObjectRef) -> (&str, &str, &str) {
    (&object.namespace, &object.kind, &object.name)
}

fn resolve(controllers: &HashMap<String, Controller>, found: Found) -> Violation {
    let mut owners = Vec::new();
    let mut workload = Workload {
        kind: found.object.kind.clone(),
        name: found.object.name.clone(),
        replicas: found.replicas,
    };
    let mut next = found.owner;
    while let Some(link) = next.take() {
        if owners.len() >= MAX_CHAIN {
            break;
        }
        owners.push(Owner {
            kind: link.kind.clone(),
            name: link.name.clone(),
        });
        match controllers.get(&link.uid) {
            Some(controller) => {
                workload = Workload {
                    kind: controller.kind.clone(),
                    name: controller.name.clone(),
                    replicas: controller.replicas,
                };
                next = controller.owner.clone();
            }
            // An owner of a kind that is not checked (a custom controller): the chain ends
            // with it; what is at risk is what this object counts.
            None => {
                workload = Workload {
                    kind: link.kind,
                    name: link.name,
                    replicas: workload.replicas,
                };
            }
        }
    }
    Violation {
        object: found.object,
        api_version: found.api_version,
        uid: found.uid,
        owners,
        workload,
        rule: found.rule,
        message: found.message,
    }
}

/// The controlling owner reference (`controller: true`), if any.
fn controller_of(object: &Value) -> Option<OwnerLink> {
    let references = at(object, "/metadata/ownerReferences")?.as_array()?;
    references
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| {
            Some(OwnerLink {
                uid: r.get("uid")?.as_str()?.to_owned(),
                kind: r.get("kind")?.as_str()?.to_owned(),
                name: r.get("name")?.as_str()?.to_owned(),
            })
        })
}

fn count(object: &Value, pointer: &str) -> Option<u64> {
    at(object, pointer).and_then(Value::as_u64)
}

/// The replicas an object runs now: what the cluster reports in `status`, else what it asks
/// for in `spec` (no controller has reported yet), else Kubernetes' default.
pub fn replicas_of(kind: &str, object: &Value) -> u64 {
    match kind {
        "Pod" => match at(object, "/status/phase").and_then(Value::as_str) {
            Some("Succeeded" | "Failed") => 0,
            _ => 1,
        },
        "Deployment" | "ReplicaSet" | "StatefulSet" => count(object, "/status/replicas")
            .or_else(|| count(object, "/spec/replicas"))
            .unwrap_or(1),
        "DaemonSet" => count(object, "/status/currentNumberScheduled").unwrap_or(0),
        "Job" => count(object, "/status/active").unwrap_or(0),
        "CronJob" => at(object, "/status/active")
            .and_then(Value::as_array)
            .map_or(0, |active| active.len() as u64),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Mode, Rule, Scope};
    use crate::Name;
    use serde_json::json;

    fn no_latest(name: &str) -> Policy {
        Policy::new(
            Name::parse(name).unwrap(),
            Mode::Enforce,
            Scope::AllClusters,
            vec![Rule::DisallowLatestTag],
        )
        .unwrap()
    }

    fn meta(name: &str, uid: &str, owner: Option<(&str, &str, &str)>) -> Value {
        let mut meta = json!({"name": name, "namespace": "team-a", "uid": uid});
        if let Some((kind, owner_name, owner_uid)) = owner {
            meta["ownerReferences"] = json!([
                {"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "uid": owner_uid,
                 "controller": true}
            ]);
        }
        meta
    }

    fn template(image: &str) -> Value {
        json!({"spec": {"containers": [{"name": "c", "image": image}]}})
    }

    #[test]
    fn a_pod_is_traced_to_its_deployment_whatever_the_listing_order() {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": meta("web", "d1", None),
            "spec": {"replicas": 3, "template": template("nginx")},
            "status": {"replicas": 2}});
        let replica_set = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": meta("web-5d", "r1", Some(("Deployment", "web", "d1"))),
            "spec": {"replicas": 3, "template": template("nginx")}});
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": meta("web-5d-x", "p1", Some(("ReplicaSet", "web-5d", "r1"))),
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        let policy = no_latest("no-latest");
        for order in [
            [&pod, &replica_set, &deployment],
            [&deployment, &replica_set, &pod],
        ] {
            let mut scan = Scan::new(vec![&policy]);
            for object in order {
                scan.observe(object);
            }
            let findings = scan.finish().remove(0);
            assert_eq!(findings.violations.len(), 3);
            let pod = &findings.violations[1];
            assert_eq!(pod.object.kind, "Pod");
            assert_eq!(
                pod.owners,
                vec![
                    Owner {
                        kind: "ReplicaSet".into(),
                        name: "web-5d".into()
                    },
                    Owner {
                        kind: "Deployment".into(),
                        name: "web".into()
                    }
                ]
            );
            assert_eq!(
                pod.workload,
                Workload {
                    kind: "Deployment".into(),
                    name: "web".into(),
                    replicas: 2
                }
            );
            assert_eq!(
                pod.message,
                "Policy 'no-latest' (DisallowLatestTag) denied image nginx: it is tagged latest or carries no tag."
            );
            assert_eq!(findings.workloads_at_risk(), (1, 2));
            assert_eq!(findings.checked_total(), 3);
        }
    }

    #[test]
    fn terminating_and_unchecked_objects_are_not_judged() {
        let policy = no_latest("no-latest");
        let mut scan = Scan::new(vec![&policy]);
        scan.observe(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "n", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}));
        scan.observe(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "b", "namespace": "n"}}));
        scan.observe(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "c", "namespace": "n", "labels": {"x": 1}}}));
        assert_eq!(scan.unreadable(), 1);
        let findings = scan.finish().remove(0);
        assert!(findings.violations.is_empty());
        assert_eq!(findings.checked_total(), 0);
    }

    #[test]
    fn an_owner_of_an_unchecked_kind_ends_the_chain() {
        let policy = no_latest("no-latest");
        let mut scan = Scan::new(vec![&policy]);
        scan.observe(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": meta("db-0", "p", Some(("Cluster", "db", "x"))),
            "spec": {"containers": [{"name": "c", "image": "pg"}]}}));
        let violation = scan.finish().remove(0).violations.remove(0);
        assert_eq!(
            violation.workload,
            Workload {
                kind: "Cluster".into(),
                name: "db".into(),
                replicas: 1
            }
        );
    }

    #[test]
    fn replicas_come_from_status_then_spec() {
        let cases = [
            ("Deployment", json!({"spec": {"replicas": 4}}), 4),
            (
                "Deployment",
                json!({"spec": {"replicas": 4}, "status": {"replicas": 3}}),
                3,
            ),
            ("StatefulSet", json!({}), 1),
            (
                "DaemonSet",
                json!({"status": {"currentNumberScheduled": 5}}),
                5,
            ),
            ("Job", json!({"status": {"active": 2}}), 2),
            ("CronJob", json!({"status": {"active": [{}, {}]}}), 2),
            ("Pod", json!({"status": {"phase": "Succeeded"}}), 0),
            ("Pod", json!({"status": {"phase": "Running"}}), 1),
        ];
        for (kind, object, want) in cases {
            assert_eq!(replicas_of(kind, &object), want, "{kind} {object}");
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// A Deployment → ReplicaSet → Pods family: `images[i]` per object.
        fn family(index: usize, images: &[bool]) -> Vec<Value> {
            let image = |i: usize| {
                if images.get(i).copied().unwrap_or(false) {
                    "nginx:latest"
                } else {
                    "ghcr.io/acme/a:1"
                }
            };
            let (d, r) = (format!("d{index}"), format!("r{index}"));
            let mut out = vec![
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": meta(&d, &d, None), "spec": {"replicas": 3, "template": template(image(0))}}),
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": meta(&r, &r, Some(("Deployment", &d, &d))),
                    "spec": {"template": template(image(1))}}),
            ];
            for pod in 0..images.len().saturating_sub(2) {
                let name = format!("p{index}-{pod}");
                out.push(json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": meta(&name, &name, Some(("ReplicaSet", &r, &r))),
                    "spec": {"containers": [{"name": "c", "image": image(pod + 2)}]}}));
            }
            out
        }

        proptest! {
            /// Whatever the order objects are listed in, a scan finds the same violations,
            /// each with the evaluator's message, and traces every Pod to its Deployment.
            #[test]
            fn findings_do_not_depend_on_the_listing_order(
                families in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 2..6), 1..5),
                seed in any::<u64>(),
            ) {
                let policy = no_latest("no-latest");
                let objects: Vec<Value> = families
                    .iter()
                    .enumerate()
                    .flat_map(|(i, images)| family(i, images))
                    .collect();
                let mut shuffled = objects.clone();
                // A deterministic shuffle from the seed.
                let mut state = seed | 1;
                for i in (1..shuffled.len()).rev() {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    shuffled.swap(i, (state % (i as u64 + 1)) as usize);
                }
                let run = |list: &[Value]| {
                    let mut scan = Scan::new(vec![&policy]);
                    for object in list {
                        scan.observe(object);
                    }
                    scan.finish().remove(0)
                };
                let (first, second) = (run(&objects), run(&shuffled));
                prop_assert_eq!(&first, &second);
                let expected = objects
                    .iter()
                    .filter(|o| first_violation(&policy, &AdmissionObject::from_json(o).unwrap()).is_some())
                    .count();
                prop_assert_eq!(first.violations.len(), expected);
                for violation in &first.violations {
                    if violation.object.kind == "Pod" {
                        prop_assert_eq!(violation.owners.len(), 2);
                        prop_assert_eq!(&violation.workload.kind, "Deployment");
                        prop_assert_eq!(violation.workload.replicas, 3);
                    }
                }
            }
        }
    }
}
