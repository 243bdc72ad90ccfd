//! The labels on every rendered object, and the selector that finds them.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::model::Workload;

// The keys, defined once in the core; the Deployment's rendering hash is
// [`crate::rendering_of`].
pub use palisade_policy::labels::{
    BOUNDARY_LABEL, BUILD_LABEL, INSTALLATION_LABEL, MANAGED_BY_LABEL, MANAGER,
    RENDERING_ANNOTATION, RESOURCE_LABEL, RESOURCE_TYPE_LABEL,
};

/// The labels of every object rendered for `w`: the user's labels, then palisade's five, which
/// win over a user label with the same key.
pub fn resource_labels(w: &Workload) -> BTreeMap<String, String> {
    let mut labels = w.labels.clone();
    for (key, value) in [
        (BOUNDARY_LABEL, w.boundary.as_str()),
        (RESOURCE_LABEL, w.name.as_str()),
        (RESOURCE_TYPE_LABEL, w.kind.as_str()),
        (MANAGED_BY_LABEL, MANAGER),
        (INSTALLATION_LABEL, w.installation.as_str()),
    ] {
        labels.insert(key.to_owned(), value.to_owned());
    }
    labels
}

/// The Deployment's selector: the resource's type and name, which never change.
pub(crate) fn selector_labels(w: &Workload) -> Value {
    let mut labels = Map::new();
    labels.insert(RESOURCE_TYPE_LABEL.to_owned(), w.kind.as_str().into());
    labels.insert(RESOURCE_LABEL.to_owned(), w.name.clone().into());
    Value::Object(labels)
}

/// The Deployment's selector as a label selector string, which also finds its ReplicaSets
/// and pods: `palisade.dev/resource-type=<type>,palisade.dev/resource=<name>`.
pub fn workload_selector(w: &Workload) -> String {
    format!(
        "{RESOURCE_TYPE_LABEL}={},{RESOURCE_LABEL}={}",
        w.kind.as_str(),
        w.name
    )
}

/// Labels as a JSON object, keys sorted.
pub(crate) fn to_json(labels: BTreeMap<String, String>) -> Value {
    Value::Object(
        labels
            .into_iter()
            .map(|(key, value)| (key, Value::String(value)))
            .collect(),
    )
}

/// The label selector that finds every object this renderer makes for `installation`:
/// `app.kubernetes.io/managed-by=palisade,palisade.dev/installation=<id>`.
pub fn owned_selector(installation: &str) -> String {
    format!("{MANAGED_BY_LABEL}={MANAGER},{INSTALLATION_LABEL}={installation}")
}
