//! The shared layout in a cluster (`palisade_vap::shared`): the parameters' custom resource
//! definition, the installation's one policy and two bindings, and each policy's parameter
//! objects in the namespaces of its boundary.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::Api;
use palisade_policy::{Mode, Name};
use palisade_vap::render::{BOUNDARY_LABEL, INSTALLATION_LABEL, MANAGED_BY_LABEL, POLICY_LABEL};
use palisade_vap::shared::{
    shared_binding_name, shared_policy_name, PARAMS_GROUP, PARAMS_KIND, PARAMS_PLURAL,
    PARAMS_VERSION,
};

use crate::cluster::{boundary_selector, delete_exact, is_ours, ClusterClient};
use crate::Result;

fn not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

fn forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 403)
}

pub(crate) fn params_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(PARAMS_GROUP, PARAMS_VERSION, PARAMS_KIND),
        PARAMS_PLURAL,
    )
}

/// The installation's shared objects, with no boundary label (the guard's rule).
fn is_installations(meta: &ObjectMeta, installation: &str) -> bool {
    meta.labels.as_ref().is_some_and(|l| {
        l.get(MANAGED_BY_LABEL).is_some_and(|v| v == "palisade")
            && l.get(INSTALLATION_LABEL).is_some_and(|v| v == installation)
            && !l.contains_key(BOUNDARY_LABEL)
    })
}

/// A list of parameters that fails this way finds none: the definition is not installed, or
/// the role predates the shared layout (in which only the shared layout can have written any).
fn none_to_read(error: &kube::Error) -> bool {
    not_found(error) || forbidden(error)
}

impl ClusterClient {
    fn params_api(&self) -> Api<DynamicObject> {
        Api::all_with(self.client().clone(), &params_resource())
    }

    pub(crate) fn params_in(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client().clone(), namespace, &params_resource())
    }

    /// The parameter objects `selector` picks, in every namespace; none when the definition
    /// is not installed or the role may not list them ([`none_to_read`]).
    async fn list_parameters(&self, selector: &str) -> Result<Vec<DynamicObject>> {
        match self
            .params_api()
            .list(&ListParams::default().labels(selector))
            .await
        {
            Ok(list) => Ok(list.items),
            Err(e) if none_to_read(&e) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    /// The metadata of the parameter objects `selector` picks, in every namespace; none when
    /// the definition is not installed, and none with the refusal when the role may not list
    /// them.
    pub(crate) async fn parameter_metas(
        &self,
        selector: &str,
    ) -> Result<(Vec<ObjectMeta>, Option<Box<kube::core::Status>>)> {
        match self
            .params_api()
            .list_metadata(&ListParams::default().labels(selector))
            .await
        {
            Ok(list) => Ok((list.items.into_iter().map(|o| o.metadata).collect(), None)),
            Err(kube::Error::Api(status)) if status.code == 403 => Ok((Vec::new(), Some(status))),
            Err(e) if not_found(&e) => Ok((Vec::new(), None)),
            Err(e) => Err(e.into()),
        }
    }

    /// This installation's parameter objects of `boundary` (all namespaces).
    async fn boundary_parameters(
        &self,
        installation: &str,
        boundary: &Name,
    ) -> Result<Vec<DynamicObject>> {
        let objects = self
            .list_parameters(&boundary_selector(installation, boundary))
            .await?;
        Ok(objects
            .into_iter()
            .filter(|o| is_ours(&o.metadata, installation, boundary))
            .collect())
    }

    /// Deletes one parameter object, exactly that one (its uid); gone already is fine.
    pub(crate) async fn delete_parameter(&self, object: &ObjectMeta) -> Result<bool> {
        let (Some(namespace), Some(name)) = (&object.namespace, &object.name) else {
            return Ok(false);
        };
        let params = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: object.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        crate::deletions::deleting(object.uid.as_deref());
        match self.params_in(namespace).delete(name, &params).await {
            Ok(_) => {
                tracing::info!(kind = PARAMS_KIND, namespace, name, "deleted");
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes `policy`'s parameter objects of `boundary`, in every namespace.
    pub(crate) async fn delete_parameters(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Name,
    ) -> Result<()> {
        for object in self.boundary_parameters(installation, boundary).await? {
            let of_policy = object
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(POLICY_LABEL))
                .is_some_and(|p| p == policy.as_str());
            if of_policy {
                self.delete_parameter(&object.metadata).await?;
            }
        }
        Ok(())
    }

    /// Deletes `boundary`'s parameter objects among `objects` whose policy is not in `keep`,
    /// or whose namespace is no longer the boundary's; returns `<namespace>/<name>` of each
    /// deleted.
    pub(crate) async fn collect_parameters(
        &self,
        installation: &str,
        boundary: &Name,
        installed: &crate::cluster::Installed,
        keep: &[Name],
    ) -> Result<Vec<String>> {
        let objects: Vec<&ObjectMeta> = installed
            .parameters
            .iter()
            .filter(|o| is_ours(o, installation, boundary))
            .collect();
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        let namespaces = installed.namespaces_of(boundary);
        let mut deleted = Vec::new();
        for object in objects {
            let kept = object
                .labels
                .as_ref()
                .and_then(|l| l.get(POLICY_LABEL))
                .is_some_and(|p| keep.iter().any(|k| k.as_str() == p));
            let in_boundary = object
                .namespace
                .as_ref()
                .is_some_and(|n| namespaces.contains(n));
            if !(kept && in_boundary) && self.delete_parameter(object).await? {
                deleted.push(format!(
                    "{}/{}",
                    object.namespace.clone().unwrap_or_default(),
                    object.name.clone().unwrap_or_default()
                ));
            }
        }
        Ok(deleted)
    }

    /// Deletes the installation's shared bindings and policy (bindings first); the parameters'
    /// definition stays, as other installations may share it. Returns the names deleted.
    pub(crate) async fn remove_shared(&self, installation: &str) -> Result<Vec<String>> {
        let mut deleted = Vec::new();
        let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(self.client().clone());
        for mode in [Mode::Enforce, Mode::Audit] {
            let name = shared_binding_name(installation, mode);
            if let Some(binding) = bindings.get_opt(&name).await? {
                if is_installations(&binding.metadata, installation)
                    && delete_exact(&bindings, &binding.metadata).await?
                {
                    deleted.push(name);
                }
            }
        }
        self.remove_shared_switch(installation).await?;
        let guard = palisade_vap::parameters_guard_name(installation);
        if let Some(binding) = bindings.get_opt(&guard).await? {
            if is_installations(&binding.metadata, installation) {
                delete_exact(&bindings, &binding.metadata).await?;
            }
        }
        let policies = Api::<ValidatingAdmissionPolicy>::all(self.client().clone());
        for name in [shared_policy_name(installation), guard] {
            if let Some(policy) = policies.get_opt(&name).await? {
                if is_installations(&policy.metadata, installation)
                    && delete_exact(&policies, &policy.metadata).await?
                {
                    deleted.push(name);
                }
            }
        }
        Ok(deleted)
    }
}
