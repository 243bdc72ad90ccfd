//! Carrying out what a layout rendered ([`crate::admission`]): each object server-side applied
//! as palisade, in order; then the objects the write made stale deleted by their uids
//! (parameter objects, bindings, then policies). Nothing here decides which objects.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::*;
use crate::admission::{Object, Target, Writes};

/// How long a new custom resource definition may take to be established.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);

impl ClusterClient {
    /// Applies installation-wide `objects` in order (a definition is waited for until
    /// established). Their names carry the installation, so no other installation's objects
    /// are checked for. Applying what is already there changes nothing.
    pub(crate) async fn apply_objects(&self, installation: &str, objects: &[Object]) -> Result<()> {
        check_installation(installation)?;
        for object in objects {
            self.apply_object(object).await?;
        }
        if objects.iter().any(|o| matches!(o, Object::Definition(_))) {
            self.mark_shared_installed(installation);
        }
        Ok(())
    }

    /// Carries out a boundary's `writes`: refuses when an object of the same name is labelled
    /// for another installation (never taken over), writes each object in order (the shared
    /// objects first, once per client, when parameter objects need them), then deletes what
    /// the write made stale.
    pub(crate) async fn write(&self, installation: &str, writes: &Writes) -> Result<()> {
        check_installation(installation)?;
        for object in &writes.objects {
            if let Object::Policy(policy) = object {
                let name = policy.metadata.name.as_deref().unwrap_or_default();
                self.refuse_other_installation_named(name, installation)
                    .await?;
            }
        }
        let parameters = writes
            .objects
            .iter()
            .any(|o| matches!(o, Object::Parameters { .. }));
        if parameters && !self.shared_installed(installation) {
            self.apply_objects(
                installation,
                &crate::admission::installation_objects(installation),
            )
            .await?;
        }
        for object in &writes.objects {
            self.apply_object(object).await?;
        }
        let stale = &writes.stale;
        for object in &stale.parameters {
            self.delete_parameter(object).await?;
        }
        let bindings = self.cluster_api::<ValidatingAdmissionPolicyBinding>();
        for binding in &stale.bindings {
            delete_exact(&bindings, binding).await?;
        }
        let policies = self.cluster_api::<ValidatingAdmissionPolicy>();
        for policy in &stale.policies {
            delete_exact(&policies, policy).await?;
        }
        Ok(())
    }

    /// Writes one policy of `target`'s boundary in this client's layout.
    pub(crate) async fn write_policy(&self, target: &Target<'_>, policy: &Policy) -> Result<()> {
        let writes = crate::admission::of(self.layout).write_policy(target, policy)?;
        self.write(target.installation, &writes).await
    }

    /// Writes `target`'s boundary's `policies` in this client's layout, in the order given.
    pub(crate) async fn write_boundary(
        &self,
        target: &Target<'_>,
        policies: &[Policy],
    ) -> Result<()> {
        let writes = crate::admission::of(self.layout).write_boundary(target, policies)?;
        self.write(target.installation, &writes).await
    }

    async fn apply_object(&self, object: &Object) -> Result<()> {
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
