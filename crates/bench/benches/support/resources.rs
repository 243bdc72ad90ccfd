//! The resources of the boundary benchmarks (`boundary_page`, `large_boundary`): a tenth of
//! them on `large`, the apps labelled, the Valkeys small.

use palisade_testkit::resources::{mixed, Mixed};

/// The `i`th resource: its type and its body.
pub fn resource(i: usize) -> (String, serde_json::Value) {
    let plan = if i.is_multiple_of(10) {
        "large"
    } else {
        "small"
    };
    let how = Mixed {
        plan,
        valkey_plan: "small",
        app_labels: true,
    };
    mixed(i, how)
}
