//! A cluster as one admission layout writes and judges it ([`InLayout`]): the thin
//! [`ClusterClient`] (apply, delete exact, dry-run, list installed, discovery, whoami), the
//! [`Layout`] its policies take, and which installations' shared objects it wrote or removed
//! once. Everything here asks the layout (`admission`) what to write or which object
//! judges, and has the client carry it out; the client itself knows no layout.

mod probes;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use palisade_policy::{Exception, Name, Policy};
use palisade_vap::render::switch_binding;
use palisade_vap::Layout;

use crate::admission::{Object, Target, Writes};
use crate::cluster::{check_installation, delete_exact, ClusterClient, Installed};
use crate::{ReconcileError, Result};

/// A cluster in one layout. Cloning it shares what it wrote once; [`InLayout::to`] gives the
/// same cluster in another layout, sharing that too.
#[derive(Clone, Debug)]
pub struct InLayout {
    client: ClusterClient,
    layout: Layout,
    once: Arc<Mutex<Once>>,
}

/// What was written once per connection, by installation.
#[derive(Debug, Default)]
struct Once {
    /// Installations whose shared objects were applied (shared layout).
    shared: BTreeSet<String>,
    /// Installations whose shared objects were removed (the other layouts).
    unshared: BTreeSet<String>,
}

impl ClusterClient {
    /// This client writing and judging policies in `layout`.
    pub fn with_layout(self, layout: Layout) -> InLayout {
        InLayout {
            client: self,
            layout,
            once: Arc::default(),
        }
    }
}

/// Every operation of the thin client is the cluster's in any layout.
impl Deref for InLayout {
    type Target = ClusterClient;

    fn deref(&self) -> &ClusterClient {
        &self.client
    }
}

impl InLayout {
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The same cluster, and what was written once there, in `layout`.
    pub fn to(&self, layout: Layout) -> InLayout {
        InLayout {
            client: self.client.clone(),
            layout,
            once: Arc::clone(&self.once),
        }
    }

    fn shared_installed(&self, installation: &str) -> bool {
        self.once
            .lock()
            .is_ok_and(|once| once.shared.contains(installation))
    }

    /// This installation's objects in the cluster (`boundary`: only that boundary's), as
    /// [`ClusterClient::installed`] reads them. In the shared layout, parameter objects the
    /// role may not list are an error; in the others palisade cannot have written any.
    pub async fn installed(
        &self,
        installation: &str,
        boundary: Option<&Name>,
    ) -> Result<Installed> {
        let installed = self.client.installed(installation, boundary).await?;
        match &installed.parameters_refused {
            Some(status) if self.layout == Layout::Shared => {
                Err(ReconcileError::Kube(kube::Error::Api(status.clone())))
            }
            _ => Ok(installed),
        }
    }

    /// The boundaries this installation has objects of in the cluster (from their labels).
    pub async fn installed_boundaries(&self, installation: &str) -> Result<BTreeSet<String>> {
        Ok(self.installed(installation, None).await?.boundaries())
    }

    /// Applies installation-wide `objects` in order (a definition is waited for until
    /// established). Their names carry the installation, so no other installation's objects
    /// are checked for. Applying what is already there changes nothing.
    pub(crate) async fn apply_objects(&self, installation: &str, objects: &[Object]) -> Result<()> {
        check_installation(installation)?;
        for object in objects {
            self.client.apply_object(object).await?;
        }
        if objects.iter().any(|o| matches!(o, Object::Definition(_))) {
            if let Ok(mut once) = self.once.lock() {
                once.shared.insert(installation.to_owned());
                // Installed again (a switch back to the shared layout): a later switch away
                // removes it again.
                once.unshared.remove(installation);
            }
        }
        Ok(())
    }

    /// Server-side applies the parameters' definition (waiting until it is established), then
    /// the installation's shared policy and its two bindings. Applying what is already there
    /// changes nothing.
    pub async fn install_shared(&self, installation: &str) -> Result<()> {
        self.apply_objects(
            installation,
            &crate::admission::installation_objects(installation),
        )
        .await
    }

    /// Removes the installation's shared policy and bindings once (in a layout other than
    /// shared, after a switch from it); later calls do nothing.
    pub async fn remove_shared_once(&self, installation: &str) -> Result<()> {
        check_installation(installation)?;
        let done = self
            .once
            .lock()
            .is_ok_and(|once| once.unshared.contains(installation));
        if done || self.layout == Layout::Shared {
            return Ok(());
        }
        self.client.remove_shared(installation).await?;
        if let Ok(mut once) = self.once.lock() {
            once.unshared.insert(installation.to_owned());
            once.shared.remove(installation);
        }
        Ok(())
    }

    /// Carries out a boundary's `writes`: refuses when an object of the same name is labelled
    /// for another installation (never taken over), writes each object in order (the shared
    /// objects first, once, when parameter objects need them), then deletes what the write
    /// made stale (parameter objects, bindings, then policies), each by its uid.
    pub(crate) async fn write(&self, installation: &str, writes: &Writes) -> Result<()> {
        check_installation(installation)?;
        for object in &writes.objects {
            if let Object::Policy(policy) = object {
                let name = policy.metadata.name.as_deref().unwrap_or_default();
                self.client
                    .refuse_other_installation_named(name, installation)
                    .await?;
            }
        }
        let parameters = writes
            .objects
            .iter()
            .any(|o| matches!(o, Object::Parameters { .. }));
        if parameters && !self.shared_installed(installation) {
            self.install_shared(installation).await?;
        }
        for object in &writes.objects {
            self.client.apply_object(object).await?;
        }
        let stale = &writes.stale;
        for object in &stale.parameters {
            self.client.delete_parameter(object).await?;
        }
        let bindings = self
            .client
            .cluster_api::<ValidatingAdmissionPolicyBinding>();
        for binding in &stale.bindings {
            delete_exact(&bindings, binding).await?;
        }
        let policies = self.client.cluster_api::<ValidatingAdmissionPolicy>();
        for policy in &stale.policies {
            delete_exact(&policies, policy).await?;
        }
        Ok(())
    }

    /// Server-side applies the policy's objects, policy first, then its binding. A policy
    /// without admission rules has no objects: any left from an earlier version are removed.
    /// Applying what is already there changes nothing (not even `resourceVersion`). Objects of
    /// the same name that another installation labelled as its own are left alone
    /// ([`ReconcileError::OtherInstallation`]).
    pub async fn apply_policy(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
    ) -> Result<()> {
        self.apply_policy_excepted(installation, boundary, policy, &[])
            .await
    }

    /// [`Self::apply_policy`] with the exceptions in force in this cluster (SPEC 7).
    pub async fn apply_policy_excepted(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        exceptions: &[Exception],
    ) -> Result<()> {
        let (before, namespaces) = self.observe_boundary(installation, boundary).await?;
        let target = target(installation, boundary, exceptions, &namespaces, &before);
        let writes = crate::admission::of(self.layout).write_policy(&target, policy)?;
        self.write(installation, &writes).await
    }

    /// Writes the admission objects of `boundary`'s `policies` in this cluster (in the order
    /// given). Per policy or shared: each policy as [`Self::apply_policy`] does. Per boundary:
    /// the boundary's objects, one per mode and 5 policies, written together; per-boundary
    /// objects of the boundary that no longer hold anything are deleted. Other objects of the
    /// boundary (policies not given, the other layouts') are left to [`Self::garbage_collect`].
    pub async fn apply_boundary(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
    ) -> Result<()> {
        self.apply_boundary_excepted(installation, boundary, policies, &[])
            .await
    }

    /// [`Self::apply_boundary`] with the exceptions in force in this cluster (SPEC 7).
    pub async fn apply_boundary_excepted(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
        exceptions: &[Exception],
    ) -> Result<()> {
        let (before, namespaces) = self.observe_boundary(installation, boundary).await?;
        let target = target(installation, boundary, exceptions, &namespaces, &before);
        let writes = crate::admission::of(self.layout).write_boundary(&target, policies)?;
        self.write(installation, &writes).await
    }

    /// What a write of `boundary` in this layout renders against: what is installed of it,
    /// and its namespaces (read only for a layout whose objects live in them).
    async fn observe_boundary(
        &self,
        installation: &str,
        boundary: &Name,
    ) -> Result<(Installed, Vec<String>)> {
        check_installation(installation)?;
        let before = self.installed(installation, Some(boundary)).await?;
        let namespaces = self.layout_namespaces(boundary).await?;
        Ok((before, namespaces))
    }

    /// `boundary`'s namespaces in the cluster when this layout writes into them; none (and
    /// nothing read) otherwise.
    pub(crate) async fn layout_namespaces(&self, boundary: &Name) -> Result<Vec<String>> {
        if crate::admission::of(self.layout).per_namespace() {
            self.client.boundary_namespaces(boundary).await
        } else {
            Ok(Vec::new())
        }
    }

    /// Deletes this installation's objects of `boundary` whose policy is not in `keep`
    /// (bindings first), selected by labels; returns the names deleted. A per-boundary object
    /// goes when one of the policies it holds is not in `keep`. Objects of the layouts not in
    /// use (left by an earlier one) all go, and so do switch bindings.
    pub async fn garbage_collect(
        &self,
        installation: &str,
        boundary: &Name,
        keep: &[Name],
    ) -> Result<Vec<String>> {
        self.client
            .garbage_collect_keeping(installation, boundary, keep, &[self.layout], false)
            .await
    }

    /// Writes a switch binding beside each enforce-mode binding of `boundary`'s `policies` in
    /// this layout (shared: beside the installation's enforce binding).
    pub async fn apply_switch_bindings(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
    ) -> Result<()> {
        let bindings =
            crate::admission::of(self.layout).enforce_bindings(installation, boundary, policies);
        let switch: Vec<_> = bindings.iter().map(switch_binding).collect();
        self.client.apply_switch(installation, &switch).await
    }
}

/// A write of one boundary outside a pass: no rollout is staged.
fn target<'a>(
    installation: &'a str,
    boundary: &'a Name,
    exceptions: &'a [Exception],
    namespaces: &'a [String],
    before: &'a Installed,
) -> Target<'a> {
    static NONE: BTreeMap<Name, crate::admission::Staging> = BTreeMap::new();
    Target {
        installation,
        boundary,
        exceptions,
        namespaces,
        before,
        staged: &NONE,
    }
}
