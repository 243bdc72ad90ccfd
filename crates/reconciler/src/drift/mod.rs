//! Drift (SPEC 3.4 v3.1): per cluster, one watch per kind on what palisade installs — its
//! admission policies and bindings (the guards' and the shared layout's among them, selected by
//! palisade's and the installation's labels), the shared layout's parameter objects and their
//! definition, and the boundary label of every boundary namespace. A change palisade did not
//! make reaches the controller as a [`Drift`]; the controller says at once what happened in
//! the affected policies' statuses and runs a pass, which undoes it (server-side apply with
//! palisade's one field manager; a label palisade owns put back) and confirms enforcement
//! again.
//!
//! What palisade did itself is told apart without guessing: a deletion by palisade is of an
//! object whose uid it noted just before ([`deleting`]), and a change by palisade is one whose
//! latest field-manager entry is palisade's. Deletions by another palisade process (a replica
//! serving an API request) are of objects the store no longer wants, which the controller
//! checks before it believes a drift.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use palisade_vap::layout::per_boundary::held_policies;
use palisade_vap::layout::shared::PARAMS_CRD;
use palisade_vap::render::{
    BOUNDARY_LABEL, FIELD_MANAGER, INSTALLATION_LABEL, MANAGED_BY_LABEL, POLICY_LABEL, SWITCH_LABEL,
};
use palisade_vap::{guard_name, parameters_guard_name};
use tokio::sync::mpsc;

/// The server ends each watch request after this long (below the client's read timeout), and
/// the watch resumes from where it was.
const WATCH_TIMEOUT_SECONDS: u32 = 15;
/// What kind of object drifted, as `/metrics` labels repairs (`kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DriftKind {
    /// A policy's (or a boundary's, or the shared) ValidatingAdmissionPolicy.
    Policy,
    /// Its binding.
    Binding,
    /// A boundary-label guard's or the parameters guard's policy or binding.
    Guard,
    /// A shared-layout parameter object in a namespace.
    Parameters,
    /// The parameter objects' CustomResourceDefinition.
    Definition,
    /// A boundary namespace's `palisade.dev/boundary` label.
    NamespaceLabel,
}

impl DriftKind {
    /// The `kind` label of `palisade_repairs_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftKind::Policy => "policy",
            DriftKind::Binding => "binding",
            DriftKind::Guard => "guard",
            DriftKind::Parameters => "parameters",
            DriftKind::Definition => "definition",
            DriftKind::NamespaceLabel => "namespace_label",
        }
    }

    fn word(self) -> &'static str {
        match self {
            DriftKind::Policy => "ValidatingAdmissionPolicy",
            DriftKind::Binding => "binding",
            DriftKind::Guard => "guard",
            DriftKind::Parameters => "parameter object",
            DriftKind::Definition => "definition",
            DriftKind::NamespaceLabel => "namespace",
        }
    }
}

/// What someone did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Happened {
    Deleted,
    /// Changed; `by` is the field manager that changed it (e.g. `kubectl-edit`).
    Changed {
        by: String,
    },
    /// A boundary namespace lost its label.
    LabelRemoved,
    /// A boundary namespace's label was set to `to`.
    LabelChanged {
        to: String,
    },
}

/// A change to one object palisade installs that palisade did not make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    pub cluster: String,
    pub kind: DriftKind,
    /// The object's name (`<namespace>/<name>` for a parameter object).
    pub object: String,
    pub happened: Happened,
    /// The boundary whose policies it affects; `None`: every boundary's in the cluster.
    pub boundary: Option<String>,
    /// The policies it affects; empty: every policy of `boundary`.
    pub policies: Vec<String>,
}

impl Drift {
    /// What happened, in words: `binding trusted.shop.palisade.dev was deleted`.
    pub fn what(&self) -> String {
        let (word, object) = (self.kind.word(), &self.object);
        match &self.happened {
            Happened::Deleted => format!("{word} {object} was deleted"),
            Happened::Changed { by } => format!("{word} {object} was changed by {by}"),
            Happened::LabelRemoved => format!("namespace {object} lost its boundary label"),
            Happened::LabelChanged { to } => {
                format!("namespace {object}'s boundary label was changed to '{to}'")
            }
        }
    }

    /// Whether the drift touches `policy` of `boundary`.
    pub fn affects(&self, boundary: &str, policy: &str) -> bool {
        self.boundary.as_deref().is_none_or(|b| b == boundary)
            && (self.policies.is_empty() || self.policies.iter().any(|p| p == policy))
    }
}

/// What a watch hands the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Drift(Drift),
    /// A watch listed its objects again after a gap (a deletion in the gap has no event): a
    /// pass looks at everything.
    Relisted {
        cluster: String,
    },
    /// A boundary namespace was deleted (SPEC 3.4 v3.2): not a drift (nothing to put back),
    /// but a pass marks its record `gone` at once, before anyone can make one of that name.
    NamespaceDeleted {
        cluster: String,
        namespace: String,
    },
    /// A watch failed (and is retried): the API server may have restarted, so its start time
    /// is read at the next look (`restarts`).
    WatchFailed {
        cluster: String,
    },
}

mod watch;

pub use watch::DriftWatch;

#[derive(Clone)]
struct Context {
    cluster: String,
    installation: String,
    seen: mpsc::Sender<Seen>,
    health: Arc<Mutex<Health>>,
}

/// Which watches have listed their objects once, and the latest failure of any.
#[derive(Debug, Default)]
struct Health {
    listed: BTreeSet<DriftKind>,
    /// The parameter objects are watched (their definition is established).
    parameters: bool,
    error: Option<String>,
    /// Kinds whose watch was refused (403), said once.
    forbidden: BTreeSet<DriftKind>,
}

impl Context {
    /// Hands `seen` over; a full queue (the controller is behind) drops it, which loses
    /// nothing a pass would not find anyway: the controller runs one for what it reads.
    fn tell(&self, seen: Seen) {
        if let Err(error) = self.seen.try_send(seen) {
            tracing::debug!(cluster = %self.cluster, %error, "drift not queued");
        }
    }

    fn failed(&self, kind: DriftKind, error: &watcher::Error) {
        self.tell(Seen::WatchFailed {
            cluster: self.cluster.clone(),
        });
        let text = error.to_string();
        let Ok(mut health) = self.health.lock() else {
            return;
        };
        // A role without `watch` (from before drift repair) is said once per kind.
        if text.contains("403") && health.forbidden.insert(kind) {
            tracing::warn!(cluster = %self.cluster, kind = kind.as_str(), error = %text,
                "drift watch refused: re-apply `palisade cluster rbac`; until then drift is repaired by the next pass");
        } else {
            tracing::debug!(cluster = %self.cluster, kind = kind.as_str(), error = %text, "drift watch retrying");
        }
        health.error = Some(text);
    }

    fn listed(&self, kind: DriftKind) {
        if let Ok(mut health) = self.health.lock() {
            health.listed.insert(kind);
        }
    }

    fn relisted(&self) -> Seen {
        Seen::Relisted {
            cluster: self.cluster.clone(),
        }
    }

    /// A drift of namespace `name`'s boundary label, which was `boundary`'s.
    fn label_drift(&self, name: String, happened: Happened, boundary: String) -> Drift {
        Drift {
            cluster: self.cluster.clone(),
            kind: DriftKind::NamespaceLabel,
            object: name,
            happened,
            boundary: Some(boundary),
            policies: Vec::new(),
        }
    }
}

/// Who changed the object after palisade last wrote it: the field manager of the latest
/// entry that is not palisade's (status writes aside, e.g. the API server's type checking),
/// when it is not older than palisade's latest.
pub fn changed_by(meta: &ObjectMeta) -> Option<String> {
    let entries = meta.managed_fields.as_ref()?;
    let main = |e: &&k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry| {
        e.subresource.as_deref().is_none_or(str::is_empty)
    };
    let ours = entries
        .iter()
        .filter(main)
        .filter(|e| e.manager.as_deref() == Some(FIELD_MANAGER))
        .filter_map(|e| e.time.clone())
        .max();
    entries
        .iter()
        .filter(main)
        .filter(|e| e.manager.as_deref() != Some(FIELD_MANAGER))
        .filter(|e| match (&e.time, &ours) {
            (Some(theirs), Some(ours)) => theirs >= ours,
            _ => true,
        })
        .max_by(|a, b| a.time.cmp(&b.time))
        .map(|e| e.manager.clone().unwrap_or_else(|| "someone".to_owned()))
}

/// The drift of one admission object or parameter object, `None` when it is not one (a
/// switch binding, which palisade removes itself, or an event of palisade's own).
fn drift_of(
    context: &Context,
    kind: DriftKind,
    meta: &ObjectMeta,
    happened: Happened,
) -> Option<Drift> {
    let name = meta.name.clone()?;
    let labels = meta.labels.clone().unwrap_or_default();
    if labels.contains_key(SWITCH_LABEL) {
        return None;
    }
    // Parameter objects are watched without a selector (below); the definition is everyone's.
    if kind != DriftKind::Definition
        && labels.get(INSTALLATION_LABEL) != Some(&context.installation)
    {
        return None;
    }
    let guards = [
        guard_name(&context.installation),
        parameters_guard_name(&context.installation),
    ];
    let kind = match kind {
        DriftKind::Policy | DriftKind::Binding if guards.contains(&name) => DriftKind::Guard,
        other => other,
    };
    let object = match &meta.namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name,
    };
    let boundary = labels.get(BOUNDARY_LABEL).cloned();
    let policies = match labels.get(POLICY_LABEL) {
        Some(policy) => vec![policy.clone()],
        None => held_policies(meta.annotations.as_ref()),
    };
    let every = kind == DriftKind::Guard || kind == DriftKind::Definition;
    Some(Drift {
        cluster: context.cluster.clone(),
        kind,
        object,
        happened,
        boundary: if every { None } else { boundary },
        policies: if every { Vec::new() } else { policies },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/metrics` makes a repairs series of every kind exist at 0 from a cluster's first pass.
    #[test]
    fn every_drift_kind_has_a_repairs_series_from_the_start() {
        let kinds = [
            DriftKind::Policy,
            DriftKind::Binding,
            DriftKind::Guard,
            DriftKind::Parameters,
            DriftKind::Definition,
            DriftKind::NamespaceLabel,
        ];
        let labels: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        assert_eq!(labels, crate::metrics::REPAIR_KINDS);
    }
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};

    fn entry(manager: &str, second: i64, subresource: Option<&str>) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.to_owned()),
            operation: Some("Update".to_owned()),
            subresource: subresource.map(str::to_owned),
            time: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + second).unwrap(),
            )),
            ..ManagedFieldsEntry::default()
        }
    }

    fn meta(entries: Vec<ManagedFieldsEntry>) -> ObjectMeta {
        ObjectMeta {
            managed_fields: Some(entries),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_change_is_someone_elses_when_their_entry_is_the_latest() {
        let cases = [
            (vec![entry("palisade", 0, None)], None),
            (
                vec![entry("palisade", 0, None), entry("kubectl-edit", 5, None)],
                Some("kubectl-edit"),
            ),
            // palisade wrote after them: its own repair.
            (
                vec![entry("kubectl-edit", 0, None), entry("palisade", 5, None)],
                None,
            ),
            // Within the same second: counted as theirs (a pass too many, never one too few).
            (
                vec![entry("palisade", 3, None), entry("kubectl-patch", 3, None)],
                Some("kubectl-patch"),
            ),
            // The API server writing the policy's status is not a change of what palisade set.
            (
                vec![
                    entry("palisade", 0, None),
                    entry("kube-apiserver", 9, Some("status")),
                ],
                None,
            ),
        ];
        for (entries, expected) in cases {
            assert_eq!(
                changed_by(&meta(entries.clone())).as_deref(),
                expected,
                "{entries:?}"
            );
        }
    }

    #[test]
    fn drifts_say_what_happened() {
        let drift = |kind, object: &str, happened| Drift {
            cluster: "local".into(),
            kind,
            object: object.into(),
            happened,
            boundary: Some("shop".into()),
            policies: vec!["trusted".into()],
        };
        let cases = [
            (
                drift(
                    DriftKind::Binding,
                    "trusted.shop.palisade.dev",
                    Happened::Deleted,
                ),
                "binding trusted.shop.palisade.dev was deleted",
            ),
            (
                drift(
                    DriftKind::Policy,
                    "trusted.shop.palisade.dev",
                    Happened::Changed {
                        by: "kubectl-edit".into(),
                    },
                ),
                "ValidatingAdmissionPolicy trusted.shop.palisade.dev was changed by kubectl-edit",
            ),
            (
                drift(DriftKind::Parameters, "web/trusted.shop", Happened::Deleted),
                "parameter object web/trusted.shop was deleted",
            ),
            (
                drift(DriftKind::NamespaceLabel, "web", Happened::LabelRemoved),
                "namespace web lost its boundary label",
            ),
            (
                drift(
                    DriftKind::NamespaceLabel,
                    "web",
                    Happened::LabelChanged { to: "other".into() },
                ),
                "namespace web's boundary label was changed to 'other'",
            ),
        ];
        for (drift, text) in cases {
            assert_eq!(drift.what(), text);
        }
    }

    #[test]
    fn only_this_installation_s_objects_drift() {
        let (seen, _queue) = mpsc::channel(1);
        let context = Context {
            cluster: "local".into(),
            installation: "mine".into(),
            seen,
            health: Arc::default(),
        };
        let meta = |installation: &str| ObjectMeta {
            name: Some("trusted.mine".into()),
            namespace: Some("web".into()),
            labels: Some(BTreeMap::from([
                (INSTALLATION_LABEL.to_owned(), installation.to_owned()),
                (BOUNDARY_LABEL.to_owned(), "shop".to_owned()),
                (POLICY_LABEL.to_owned(), "trusted".to_owned()),
            ])),
            ..ObjectMeta::default()
        };
        let drift = drift_of(
            &context,
            DriftKind::Parameters,
            &meta("mine"),
            Happened::Deleted,
        )
        .unwrap();
        assert_eq!(
            drift.what(),
            "parameter object web/trusted.mine was deleted"
        );
        assert_eq!(drift.boundary.as_deref(), Some("shop"));
        assert_eq!(drift.policies, ["trusted"]);
        assert!(drift_of(
            &context,
            DriftKind::Parameters,
            &meta("theirs"),
            Happened::Deleted
        )
        .is_none());
    }

    #[test]
    fn palisade_s_own_deletions_are_remembered() {
        assert!(!crate::deletions::deleted_by_palisade(Some("uid-1")));
        crate::deletions::deleting(Some("uid-1"));
        assert!(crate::deletions::deleted_by_palisade(Some("uid-1")));
        assert!(crate::deletions::deleted_by_palisade(Some("uid-1")));
        assert!(!crate::deletions::deleted_by_palisade(Some("uid-2")));
        assert!(!crate::deletions::deleted_by_palisade(None));
    }
}
