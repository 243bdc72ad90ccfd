//! Writing one object a layout rendered ([`crate::admission`]), server-side applied as
//! palisade. Nothing here decides which objects.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::*;
use crate::admission::Object;

/// How long a new custom resource definition may take to be established.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);

impl ClusterClient {
    /// Server-side applies one object a layout rendered (a definition is waited for until
    /// established).
    pub(crate) async fn apply_object(&self, object: &Object) -> Result<()> {
        let name = object.name();
        match object {
            Object::Definition(definition) => {
                let definitions = Api::<CustomResourceDefinition>::all(self.client().clone());
                let deadline = Instant::now() + ESTABLISH_TIMEOUT;
                // Re-applying is how a new definition is read back until established (an
                // unchanged apply writes nothing), so the role needs no `get` on it.
                loop {
                    let current = apply_owned(&definitions, name, definition).await?;
                    if established(&current) {
                        break;
                    }
                    if Instant::now() > deadline {
                        return Err(ReconcileError::Unexpected(format!(
                            "the custom resource definition {name} was not established \
                             within {} s",
                            ESTABLISH_TIMEOUT.as_secs()
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Object::Policy(policy) => {
                apply_owned(
                    &self.cluster_api::<ValidatingAdmissionPolicy>(),
                    name,
                    policy,
                )
                .await?;
            }
            Object::Binding(binding) => {
                apply_owned(
                    &self.cluster_api::<ValidatingAdmissionPolicyBinding>(),
                    name,
                    binding,
                )
                .await?;
            }
            Object::Parameters {
                namespace, object, ..
            } => {
                apply_owned(&self.params_in(namespace), name, object).await?;
            }
        }
        Ok(())
    }
}

/// Whether a custom resource definition is established (its kind is served).
pub(crate) fn established(definition: &CustomResourceDefinition) -> bool {
    definition
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}
