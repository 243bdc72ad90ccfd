//! Reading what a boundary already runs in a cluster, for previews and audits: the namespaces
//! labelled for the boundary, then every checked kind in each of them, in pages (`limit` and
//! `continue`), each page handed on before the next is read, so memory holds one page.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::core::Request;
use palisade_policy::admission::CHECKED_KINDS;
use palisade_policy::Name;
use palisade_vap::render::BOUNDARY_LABEL;
use serde::Deserialize;
use serde_json::Value;

use crate::{ClusterClient, Result};

/// The objects of one kind a page holds. Items of a list carry neither `apiVersion` nor `kind`;
/// they are set before the page is handed on.
#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    metadata: PageMeta,
    #[serde(default)]
    items: Vec<Value>,
}

#[derive(Default, Deserialize)]
struct PageMeta {
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
}

/// What reading a boundary's objects found and took.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scanned {
    /// The boundary's namespaces, by name.
    pub namespaces: Vec<String>,
    /// Objects read.
    pub listed: u64,
    /// Time spent waiting for the API server (the pages' handling excluded).
    pub list_time: Duration,
}

/// The API path of a checked kind's objects in a namespace, and its `apiVersion`.
fn collection(group: &str, plural: &str, namespace: &str) -> (String, String) {
    match group {
        "" => (
            format!("/api/v1/namespaces/{namespace}/{plural}"),
            "v1".to_owned(),
        ),
        group => (
            format!("/apis/{group}/v1/namespaces/{namespace}/{plural}"),
            format!("{group}/v1"),
        ),
    }
}

impl ClusterClient {
    /// The namespaces labelled for `boundary` (the ones its bindings select), by name.
    pub async fn boundary_namespaces(&self, boundary: &Name) -> Result<Vec<String>> {
        let api = kube::Api::<Namespace>::all(self.client().clone());
        let params = ListParams::default().labels(&format!("{BOUNDARY_LABEL}={boundary}"));
        let mut names: Vec<String> = api
            .list(&params)
            .await?
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        names.sort();
        Ok(names)
    }

    /// Reads every checked object in the boundary's namespaces, `page_size` at a time, and
    /// hands each page to `visit` (objects with `apiVersion` and `kind` set).
    pub async fn scan_boundary(
        &self,
        boundary: &Name,
        page_size: u32,
        visit: &mut (dyn FnMut(&[Value]) + Send),
    ) -> Result<Scanned> {
        let started = Instant::now();
        let namespaces = self.boundary_namespaces(boundary).await?;
        let mut scanned = Scanned {
            list_time: started.elapsed(),
            ..Scanned::default()
        };
        for namespace in &namespaces {
            for (group, kind, plural) in CHECKED_KINDS {
                let (path, api_version) = collection(group, plural, namespace);
                let mut continue_token: Option<String> = None;
                loop {
                    let mut params = ListParams::default().limit(page_size.max(1));
                    if let Some(token) = &continue_token {
                        params = params.continue_token(token);
                    }
                    let request = Request::new(&path)
                        .list(&params)
                        .map_err(|e| crate::ReconcileError::Unexpected(e.to_string()))?;
                    let asked = Instant::now();
                    let mut page: Page = self.client().request(request).await?;
                    scanned.list_time += asked.elapsed();
                    for item in &mut page.items {
                        if let Value::Object(fields) = item {
                            fields.insert("apiVersion".into(), Value::String(api_version.clone()));
                            fields.insert("kind".into(), Value::String(kind.to_owned()));
                        }
                    }
                    scanned.listed += page.items.len() as u64;
                    visit(&page.items);
                    continue_token = page.metadata.continue_token.filter(|t| !t.is_empty());
                    if continue_token.is_none() {
                        break;
                    }
                }
            }
        }
        scanned.namespaces = namespaces;
        Ok(scanned)
    }
}
