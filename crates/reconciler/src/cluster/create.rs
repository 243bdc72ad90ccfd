//! Server-side (dry-run) creates of an object of any kind the server serves, read back with
//! the API server's message and warnings: what a probe sends ([`crate::verdict`] judges it).

use super::*;

impl ClusterClient {
    /// The resource name and scope of `kind` in `api_version`, from discovery (cached).
    pub(super) async fn resource_for(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<(String, bool)> {
        let cached = self
            .resources
            .lock()
            .map_err(|_| ReconcileError::Unexpected("discovery cache poisoned".to_owned()))?
            .get(api_version)
            .cloned();
        let resources = match cached {
            Some(resources) => resources,
            None => {
                let list = if api_version.contains('/') {
                    self.client.list_api_group_resources(api_version).await
                } else {
                    self.client.list_core_api_resources(api_version).await
                };
                let resources = match list {
                    Ok(list) => list.resources,
                    Err(e) if not_found(&e) => Vec::new(),
                    Err(e) => return Err(e.into()),
                };
                if let Ok(mut cache) = self.resources.lock() {
                    cache.insert(api_version.to_owned(), resources.clone());
                }
                resources
            }
        };
        resources
            .into_iter()
            .find(|r| r.kind == kind && !r.name.contains('/'))
            .map(|r| (r.name, r.namespaced))
            .ok_or_else(|| ReconcileError::UnknownKind(format!("{api_version} {kind}")))
    }

    /// A server-side dry-run (`dryRun=All`) create of `object` (any kind the server serves)
    /// into `namespace` (ignored for cluster-scoped kinds). Refusals are answers, not errors.
    pub async fn dry_run_create(&self, namespace: &str, object: &Value) -> Result<AdmissionAnswer> {
        self.send_create(namespace, object, true).await
    }

    /// Creates `object` for real, like [`ClusterClient::dry_run_create`] (refusals are
    /// answers, not errors).
    pub async fn create(&self, namespace: &str, object: &Value) -> Result<AdmissionAnswer> {
        self.send_create(namespace, object, false).await
    }

    pub(super) async fn send_create(
        &self,
        namespace: &str,
        object: &Value,
        dry_run: bool,
    ) -> Result<AdmissionAnswer> {
        let field = |name: &str| {
            object
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| ReconcileError::UnknownKind(format!("the object has no {name}")))
        };
        let api_version = field("apiVersion")?;
        let kind = field("kind")?;
        let (plural, namespaced) = self.resource_for(api_version, kind).await?;
        let base = if api_version.contains('/') {
            format!("/apis/{api_version}")
        } else {
            format!("/api/{api_version}")
        };
        let mut object = object.clone();
        let path = if namespaced {
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
            }
            format!("{base}/namespaces/{namespace}/{plural}")
        } else {
            format!("{base}/{plural}")
        };
        let params = PostParams {
            dry_run,
            field_manager: None,
        };
        let body = serde_json::to_vec(&object).map_err(ReconcileError::Json)?;
        let request = kube::core::Request::new(path)
            .create(&params, body)
            .map_err(|e| ReconcileError::Kube(kube::Error::BuildRequest(e)))?;
        let response = self
            .client
            .send(request.map(kube::client::Body::from))
            .await?;
        let code = response.status().as_u16();
        let warnings: Vec<String> = response
            .headers()
            .get_all(http::header::WARNING)
            .iter()
            .flat_map(|v| parse_warning_header(&String::from_utf8_lossy(v.as_bytes())))
            .collect();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(ReconcileError::Kube)?
            .to_bytes();
        let (message, reason) = if (200..300).contains(&code) {
            (None, None)
        } else {
            match serde_json::from_slice::<kube::core::Status>(&bytes) {
                Ok(status) => (Some(status.message), Some(status.reason)),
                Err(_) => (Some(String::from_utf8_lossy(&bytes).into_owned()), None),
            }
        };
        Ok(AdmissionAnswer {
            code,
            message,
            reason,
            warnings,
        })
    }
}
