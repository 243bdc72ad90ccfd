//! Confirming enforcement: server-side dry-run creates of a violating object, read back with
//! the API server's message and warnings.

use super::*;

impl ClusterClient {
    /// Confirms enforcement: a server-side dry-run create of a Pod violating `policy` into
    /// `namespace` (a namespace of the boundary). Enforce mode: `Enforced` when denied with
    /// the policy's message; audit mode: when admitted with its warning.
    pub async fn probe_enforcement(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        namespace: &str,
    ) -> Result<EnforcementProbe> {
        self.probe_enforcement_among(installation, boundary, policy, &[], namespace)
            .await
    }

    /// [`Self::probe_enforcement`] with a probe Pod that also complies with `others` (the
    /// boundary's other policies in this cluster) where possible, so that their denials do
    /// not hide this policy's.
    pub async fn probe_enforcement_among(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        others: &[Policy],
        namespace: &str,
    ) -> Result<EnforcementProbe> {
        self.probe_policy(
            None,
            installation,
            boundary,
            policy,
            others,
            namespace,
            false,
            None,
        )
        .await
    }

    /// [`Self::probe_enforcement_among`] while the cluster changes to this client's layout and
    /// the earlier layout's objects are still there ([`palisade_vap::render::switch_binding`]):
    /// an enforce-mode policy is confirmed in the new layout only when its switch binding
    /// warned; denied with the policy's message without that warning, it is
    /// [`EnforcementProbe::EnforcedByEarlierLayout`].
    pub async fn probe_during_switch(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        others: &[Policy],
        namespace: &str,
    ) -> Result<EnforcementProbe> {
        self.probe_policy(
            None,
            installation,
            boundary,
            policy,
            others,
            namespace,
            true,
            None,
        )
        .await
    }

    /// Which policy object and binding judge `policy` in `namespace`, in this client's layout:
    /// from `installed` (a pass's read after its writes), or read now.
    async fn judge(
        &self,
        installed: Option<&Installed>,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        namespace: &str,
    ) -> Result<crate::admission::Judge> {
        let layout = crate::admission::of(self.layout);
        Ok(match installed {
            Some(installed) => layout.judge(installed, installation, boundary, policy, namespace),
            None => {
                let installed = self.installed(installation, Some(boundary)).await?;
                layout.judge(&installed, installation, boundary, policy, namespace)
            }
        })
    }

    /// A policy's probe; `installed` as [`Self::judge`] takes it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn probe_policy(
        &self,
        installed: Option<&Installed>,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        others: &[Policy],
        namespace: &str,
        switching: bool,
        staging: Option<&crate::admission::Staging>,
    ) -> Result<EnforcementProbe> {
        check_installation(installation)?;
        // A namespace a stage reached a moment ago is judged by both versions until the one
        // before leaves it (make before break): a denial by either is the policy enforced.
        let mut also = None;
        // A policy being rolled out is judged in `namespace` by the version in force there.
        let (policy, judge) = match staging {
            None => (
                std::borrow::Cow::Borrowed(policy),
                self.judge(installed, installation, boundary, policy, namespace)
                    .await?,
            ),
            Some(staging) => {
                let read;
                let installed = match installed {
                    Some(installed) => installed,
                    None => {
                        read = self.installed(installation, Some(boundary)).await?;
                        &read
                    }
                };
                let judging = crate::admission::staged::judging(
                    installed,
                    installation,
                    boundary,
                    policy,
                    staging,
                    namespace,
                );
                if let Some(previous) = staging.handing_over_in(namespace) {
                    also = self
                        .judge(Some(installed), installation, boundary, previous, namespace)
                        .await?
                        .ok()
                        .map(|(name, _)| name);
                }
                match judging {
                    Ok((judged, judge)) => (std::borrow::Cow::Owned(judged), judge),
                    Err(previous) => {
                        let judge = self
                            .judge(
                                Some(installed),
                                installation,
                                boundary,
                                &previous,
                                namespace,
                            )
                            .await?;
                        (std::borrow::Cow::Owned(previous), judge)
                    }
                }
            }
        };
        let policy = policy.as_ref();
        let (pod, message) = violating_pod_among(policy, others)
            .ok_or_else(|| ReconcileError::NoAdmissionRules(policy.name().to_string()))?;
        let (name, binding) = match judge {
            Ok(judging) => judging,
            Err(reason) => return Ok(EnforcementProbe::NotEnforced(reason)),
        };
        let answer = self.dry_run_create(namespace, &pod).await?;
        let switch = palisade_vap::render::switch_binding_name(&binding);
        Ok(match policy.mode() {
            Mode::Enforce if answer.admitted() => {
                EnforcementProbe::NotEnforced(ADMITTED_VIOLATING.to_owned())
            }
            Mode::Enforce if switching && answer.denial_message() == Some(message.as_str()) => {
                if answer.has_warning(&name, &switch, &message) {
                    EnforcementProbe::Enforced
                } else {
                    EnforcementProbe::EnforcedByEarlierLayout
                }
            }
            Mode::Enforce
                if answer.denying_policy() == Some(name.as_str())
                    && answer.denial_message() == Some(message.as_str()) =>
            {
                EnforcementProbe::Enforced
            }
            Mode::Enforce if also.is_some() && answer.denying_policy() == also.as_deref() => {
                EnforcementProbe::Enforced
            }
            Mode::Audit if answer.admitted() && answer.has_warning(&name, &binding, &message) => {
                EnforcementProbe::Enforced
            }
            Mode::Audit if answer.admitted() => {
                EnforcementProbe::NotEnforced(NOT_WARNED.to_owned())
            }
            _ => EnforcementProbe::Inconclusive(format!(
                "{PROBE_REFUSED}: {}",
                answer.message.unwrap_or_default()
            )),
        })
    }

    /// Confirms an exception (SPEC 7) like a policy: a server-side dry-run create of `probe`
    /// ([`crate::excepted::excepted_pod`]), which violates a rule of `policy` the exception
    /// lifts, must be admitted without the policy's denial or warning. That objects it does
    /// not match are still denied is the policy's own probe.
    pub async fn probe_exception(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        probe: &crate::excepted::ExceptedProbe,
    ) -> Result<EnforcementProbe> {
        self.probe_exception_in(None, installation, boundary, policy, probe)
            .await
    }

    /// [`Self::probe_exception`]; `installed` as [`Self::judge`] takes it.
    pub(crate) async fn probe_exception_in(
        &self,
        installed: Option<&Installed>,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        probe: &crate::excepted::ExceptedProbe,
    ) -> Result<EnforcementProbe> {
        check_installation(installation)?;
        let judge = self
            .judge(installed, installation, boundary, policy, &probe.namespace)
            .await?;
        let (name, binding) = match judge {
            Ok(judging) => judging,
            Err(reason) => return Ok(EnforcementProbe::NotEnforced(reason)),
        };
        let answer = self.dry_run_create(&probe.namespace, &probe.pod).await?;
        Ok(if answer.admitted() {
            if answer.has_warning(&name, &binding, &probe.message) {
                EnforcementProbe::NotEnforced(crate::probe::WARNED_EXCEPTED.to_owned())
            } else {
                EnforcementProbe::Enforced
            }
        } else if answer.denial_message() == Some(probe.message.as_str()) {
            EnforcementProbe::NotEnforced(crate::probe::DENIED_EXCEPTED.to_owned())
        } else {
            EnforcementProbe::Inconclusive(format!(
                "{PROBE_REFUSED}: {}",
                answer.message.unwrap_or_default()
            ))
        })
    }

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
