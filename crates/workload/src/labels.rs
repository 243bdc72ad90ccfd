//! The labels on every rendered object, and the selector that finds them.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::model::Workload;

/// The boundary the resource belongs to.
pub const BOUNDARY_LABEL: &str = "palisade.dev/boundary";
/// The resource's name.
pub const RESOURCE_LABEL: &str = "palisade.dev/resource";
/// The resource's type as the API writes it (`app`, `static_web_app`...).
pub const RESOURCE_TYPE_LABEL: &str = "palisade.dev/resource-type";
/// `palisade` on every object palisade makes.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The installation that made the object.
pub const INSTALLATION_LABEL: &str = "palisade.dev/installation";
/// The build hash, on a build Job and its pod.
pub const BUILD_LABEL: &str = "palisade.dev/build";
/// The Deployment annotation holding its rendering hash (see [`crate::rendering_of`]).
pub const RENDERING_ANNOTATION: &str = "palisade.dev/rendering";
/// The value of [`MANAGED_BY_LABEL`].
pub const MANAGER: &str = "palisade";

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
