//! The RBAC palisade needs in each cluster it manages: one `ClusterRole` with exactly the verbs
//! on exactly the resources this crate uses, and a `ClusterRoleBinding` to the identity of the
//! kubeconfig given to `palisade cluster add`. `palisade cluster rbac` prints both; the
//! end-to-end test `rbac.rs` runs palisade with this role and nothing more.
//!
//! What each rule is for:
//! - `validatingadmissionpolicies`, `validatingadmissionpolicybindings`: server-side apply
//!   (`patch`, and `create`, which the API server also requires when an apply creates the
//!   object), read back (`get`), garbage collection (`list`, `delete`).
//! - `namespaces`: `get`, `create` and `patch` (create or label a boundary's namespace,
//!   release it). palisade never lists or deletes namespaces.
//! - `pods`: `create`, for the server-side dry-run that confirms enforcement (nothing is
//!   stored).
//! - `selfsubjectreviews`: `create`, to learn the identity the boundary-label guard exempts.
//! - `leases`: `list`, the API servers' identity Leases in `kube-system`, and `/metrics`:
//!   `get`, the API server's start time, to notice restarts (`restarts`), and what a version
//!   being rolled out denied (`denials`, automatic promotion).
//!
//! `/version` and discovery are readable by every authenticated identity
//! (`system:discovery`, `system:public-info-viewer`). No rule names Secrets, ConfigMaps or
//! any workload: palisade cannot read them.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use palisade_vap::shared::{PARAMS_CRD, PARAMS_GROUP, PARAMS_PLURAL};

/// The API server's metrics, read for its start time and a rollout's denials.
pub const METRICS_PATH: &str = "/metrics";

/// The default name of the role and its binding.
pub const DEFAULT_NAME: &str = "palisade";

/// Who the binding grants the role to: the identity of palisade's kubeconfig.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grantee {
    /// A user, as a client certificate's CN or an authenticating proxy names it.
    User(String),
    /// A service account (a token kubeconfig).
    ServiceAccount { namespace: String, name: String },
}

impl Grantee {
    fn subject(&self) -> Subject {
        match self {
            Grantee::User(name) => Subject {
                api_group: Some("rbac.authorization.k8s.io".to_owned()),
                kind: "User".to_owned(),
                name: name.clone(),
                namespace: None,
            },
            Grantee::ServiceAccount { namespace, name } => Subject {
                api_group: None,
                kind: "ServiceAccount".to_owned(),
                name: name.clone(),
                namespace: Some(namespace.clone()),
            },
        }
    }
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The rules of palisade's role, in the order they are printed.
pub fn rules() -> Vec<PolicyRule> {
    vec![
        rule(
            "admissionregistration.k8s.io",
            &[
                "validatingadmissionpolicies",
                "validatingadmissionpolicybindings",
            ],
            // `watch`: drift (SPEC 3.4 v3.1) is noticed by a watch on palisade's objects.
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        rule(
            "",
            &["namespaces"],
            &["get", "list", "watch", "create", "patch"],
        ),
        // The shared layout: the parameters' definition (this one only) and the parameters.
        PolicyRule {
            resource_names: Some(vec![PARAMS_CRD.to_owned()]),
            ..rule(
                "apiextensions.k8s.io",
                &["customresourcedefinitions"],
                // `list`, `watch`: by name (a field selector), for drift.
                &["list", "watch", "create", "patch"],
            )
        },
        rule(
            PARAMS_GROUP,
            &[PARAMS_PLURAL],
            &["list", "watch", "create", "patch", "delete"],
        ),
        // `create`: the server-side dry-runs that confirm enforcement (nothing is stored);
        // `list`: previews and audits read what runs in the boundary's namespaces.
        rule("", &["pods"], &["create", "list"]),
        rule(
            "apps",
            &["deployments", "replicasets", "statefulsets", "daemonsets"],
            &["list"],
        ),
        rule("batch", &["jobs", "cronjobs"], &["list"]),
        // Platform workloads (SPEC 5): their Deployments and build Jobs, applied, scaled and
        // deleted (only this installation's, by label), and followed by watches.
        rule(
            "apps",
            &["deployments"],
            &["get", "create", "patch", "delete", "watch"],
        ),
        rule("apps", &["deployments/scale"], &["patch"]),
        rule("apps", &["replicasets"], &["watch"]),
        rule("batch", &["jobs"], &["get", "create", "delete", "watch"]),
        rule("", &["events"], &["list", "watch"]),
        // The audit's OpenReports, where the cluster serves them.
        rule(
            "openreports.io",
            &["reports"],
            &["list", "create", "patch", "delete"],
        ),
        rule(
            "authentication.k8s.io",
            &["selfsubjectreviews"],
            &["create"],
        ),
        // Restarts (a restart recompiles every admission policy, and palisade reports it):
        // the API servers' identity Leases in `kube-system`, read at every look (a
        // ClusterRole cannot name a namespace; Leases hold holder names and times, no
        // secrets), and the API server's start time on its metrics, read after a failure.
        rule("coordination.k8s.io", &["leases"], &["list"]),
        PolicyRule {
            non_resource_urls: Some(vec![METRICS_PATH.to_owned()]),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        },
    ]
}

fn metadata(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(BTreeMap::from([(
            "app.kubernetes.io/name".to_owned(),
            "palisade".to_owned(),
        )])),
        ..ObjectMeta::default()
    }
}

/// The `ClusterRole` named `name`.
pub fn cluster_role(name: &str) -> ClusterRole {
    ClusterRole {
        metadata: metadata(name),
        rules: Some(rules()),
        ..ClusterRole::default()
    }
}

/// The `ClusterRoleBinding` named `name`, granting the role `name` to `grantee`.
pub fn cluster_role_binding(name: &str, grantee: &Grantee) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: metadata(name),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: name.to_owned(),
        },
        subjects: Some(vec![grantee.subject()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rule_grants_secrets_or_wildcards() {
        for rule in rules() {
            let resources = rule.resources.unwrap_or_default();
            assert!(!resources.iter().any(|r| r == "secrets" || r == "*"));
            assert!(!rule.verbs.iter().any(|v| v == "*"));
        }
    }

    #[test]
    fn a_service_account_subject_has_its_namespace_and_no_group() {
        let binding = cluster_role_binding(
            "palisade",
            &Grantee::ServiceAccount {
                namespace: "platform".into(),
                name: "palisade".into(),
            },
        );
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(subject.kind, "ServiceAccount");
        assert_eq!(subject.namespace.as_deref(), Some("platform"));
        assert_eq!(subject.api_group, None);
    }
}
