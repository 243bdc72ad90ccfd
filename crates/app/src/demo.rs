//! `palisade serve --demo`: fills an empty store with a boundary `shop`, three policies,
//! resources of every type and one grandfathered resource (an app created on `large`
//! before `size-limits` disallowed it).

use palisade_api_types::document::spec_of;
use palisade_api_types::resource::Resource;
use palisade_api_types::PolicySpec;
use palisade_policy::{Catalog, Name};
use palisade_store::{NewResource, PolicyWrite, Store, StoreError};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("the demo data is invalid: {0}")]
    Invalid(String),
    #[error("could not write the demo data")]
    Store(#[from] StoreError),
}

const BOUNDARY: &str = "shop";

fn policies() -> Vec<(&'static str, serde_json::Value, serde_json::Value)> {
    vec![
        (
            "size-limits",
            json!({"rules": [{"allowedComputePlans": {"plans": ["small", "medium", "valkey/small"]}}]}),
            json!({"labels": {"team": "platform"}, "annotations": {}}),
        ),
        (
            "owner-label",
            json!({"rules": [{"requiredLabels": {"labels": [{"key": "team"}]}}]}),
            json!({"labels": {}, "annotations": {}}),
        ),
        (
            "trusted",
            json!({"rules": [
                {"allowedRegistries": {"registries": ["ghcr.io/acme", "docker.io/library"]}},
                {"disallowLatestTag": {}}
            ]}),
            json!({"labels": {}, "annotations": {}}),
        ),
    ]
}

fn resources() -> Vec<serde_json::Value> {
    vec![
        json!({"type": "app", "name": "web", "plan": "medium", "image": "ghcr.io/acme/web:1.4", "labels": {"team": "web"}}),
        json!({"type": "container_instance", "name": "batch", "components": [
            {"name": "worker", "plan": "small", "image": "ghcr.io/acme/worker:2.0"},
            {"name": "sidecar", "plan": "small", "image": "ghcr.io/acme/proxy:1.1"}
        ], "labels": {"team": "data"}}),
        json!({"type": "postgresql", "name": "orders-db", "plan": "small"}),
        json!({"type": "sqlserver", "name": "ledger-db", "plan": "medium"}),
        json!({"type": "qdrant", "name": "search", "plan": "small"}),
        json!({"type": "valkey", "name": "cache", "plan": "small"}),
        json!({"type": "function", "name": "thumbnails", "plan": "small", "source": "https://git.example.com/acme/thumbnails.git"}),
        json!({"type": "static_web_app", "name": "docs", "source": "https://git.example.com/acme/docs.git"}),
    ]
}

/// Loads the demo when the store has no boundary yet. Returns whether it loaded.
pub async fn load(store: &dyn Store, catalog: &Catalog) -> Result<bool, DemoError> {
    if !store.list_boundaries().await?.is_empty() {
        return Ok(false);
    }
    store.create_boundary(BOUNDARY, Some("Shop (demo)")).await?;
    let create = |body: serde_json::Value| -> Result<NewResource, DemoError> {
        let (resource, ty) = Resource::from_value(&body, catalog, None)
            .map_err(|e| DemoError::Invalid(e.to_string()))?;
        Ok(NewResource {
            boundary: BOUNDARY.into(),
            resource_type: ty.as_str().into(),
            name: resource.name.clone(),
            body_json: serde_json::to_string(&resource)
                .map_err(|e| DemoError::Invalid(e.to_string()))?,
            cluster: None,
            upload: None,
        })
    };
    // Created before size-limits, so it keeps a plan that policy now disallows.
    store
        .create_resource(
            create(
                json!({"type": "app", "name": "legacy-reports", "plan": "large",
                "image": "ghcr.io/acme/reports:0.9", "labels": {"team": "finance"}}),
            )?,
            None,
            None,
        )
        .await?;
    let mut writes = Vec::new();
    for (name, spec, metadata) in policies() {
        let parsed = PolicySpec::from_json(spec.to_string().as_bytes())
            .map_err(|e| DemoError::Invalid(e.to_string()))?;
        let policy_name = Name::parse(name).map_err(|e| DemoError::Invalid(e.to_string()))?;
        let (policy, _) = parsed
            .validate(policy_name, catalog)
            .map_err(|e| DemoError::Invalid(e.to_string()))?;
        writes.push(PolicyWrite {
            boundary: BOUNDARY.into(),
            name: name.into(),
            spec_json: serde_json::to_string(&spec_of(&policy))
                .map_err(|e| DemoError::Invalid(e.to_string()))?,
            metadata_json: metadata.to_string(),
            if_match: None,
            create_only: false,
            restores: None,
            rollout: None,
            rewrite_identical: false,
        });
    }
    store.apply_policies(writes, "demo").await?;
    for body in resources() {
        store.create_resource(create(body)?, None, None).await?;
    }
    Ok(true)
}
