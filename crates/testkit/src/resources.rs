//! Resources of the four types in turn (an app, a container instance of two components, a
//! PostgreSQL and a Valkey), for the tests and benchmarks that fill a boundary with many.

use serde_json::json;

/// How the `i`th resource is made.
#[derive(Clone, Copy, Debug)]
pub struct Mixed<'a> {
    /// The plan of the app, the container instance's worker and the PostgreSQL.
    pub plan: &'a str,
    /// The Valkey's plan.
    pub valkey_plan: &'a str,
    /// Whether the app is labelled `team: web`.
    pub app_labels: bool,
}

/// The `i`th resource (its type by `i % 4`, its name with `i`): its type and its body.
pub fn mixed(i: usize, how: Mixed<'_>) -> (String, serde_json::Value) {
    let plan = how.plan;
    match i % 4 {
        0 => {
            let mut app = json!({"type": "app", "name": format!("app-{i}"), "plan": plan, "image": "ghcr.io/acme/web:1"});
            if how.app_labels {
                app["labels"] = json!({"team": "web"});
            }
            ("app".into(), app)
        }
        1 => (
            "container_instance".into(),
            json!({"type": "container_instance", "name": format!("ci-{i}"), "components": [
                {"name": "worker", "plan": plan, "image": "ghcr.io/acme/w:1"},
                {"name": "sidecar", "plan": "small", "image": "ghcr.io/acme/s:1"}]}),
        ),
        2 => (
            "postgresql".into(),
            json!({"type": "postgresql", "name": format!("db-{i}"), "plan": plan}),
        ),
        _ => (
            "valkey".into(),
            json!({"type": "valkey", "name": format!("cache-{i}"), "plan": how.valkey_plan}),
        ),
    }
}
