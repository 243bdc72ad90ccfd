//! Reading what this installation has in a cluster ([`Installed`]): one metadata-only list per
//! kind, and the labelled namespaces when there are parameter objects.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use palisade_policy::Name;
use palisade_vap::render::{BOUNDARY_LABEL, INSTALLATION_LABEL, MANAGED_BY_LABEL};

use super::{boundary_selector, check_installation, ClusterClient};
use crate::installed::Installed;
use crate::Result;

impl ClusterClient {
    /// This installation's objects in the cluster (`boundary`: only that boundary's), one
    /// metadata-only list per kind.
    pub async fn installed(
        &self,
        installation: &str,
        boundary: Option<&Name>,
    ) -> Result<Installed> {
        check_installation(installation)?;
        let selector = match boundary {
            Some(boundary) => boundary_selector(installation, boundary),
            None => format!("{MANAGED_BY_LABEL}=palisade,{INSTALLATION_LABEL}={installation}"),
        };
        let params = ListParams::default().labels(&selector);
        let policies = metas(
            self.cluster_api::<ValidatingAdmissionPolicy>()
                .list_metadata(&params)
                .await?,
        );
        let bindings = metas(
            self.cluster_api::<ValidatingAdmissionPolicyBinding>()
                .list_metadata(&params)
                .await?,
        );
        let (parameters, parameters_refused) = self.parameter_metas(&selector).await?;
        let namespaces = if parameters.is_empty() {
            Vec::new()
        } else {
            let selector = match boundary {
                Some(boundary) => format!("{BOUNDARY_LABEL}={boundary}"),
                None => BOUNDARY_LABEL.to_owned(),
            };
            metas(
                kube::Api::<Namespace>::all(self.client().clone())
                    .list_metadata(&ListParams::default().labels(&selector))
                    .await?,
            )
        };
        Ok(Installed {
            policies,
            bindings,
            parameters,
            namespaces,
            parameters_refused,
        })
    }
}

fn metas<K: Clone>(
    list: kube::core::ObjectList<kube::core::PartialObjectMeta<K>>,
) -> Vec<ObjectMeta> {
    list.items.into_iter().map(|o| o.metadata).collect()
}
