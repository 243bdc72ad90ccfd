//! Boundary labels put back before a pass probes anything (SPEC 3.4: a namespace without its
//! label is judged by none of the boundary's policies), on the namespaces palisade made or was
//! handed only (v3.2): the one with the recorded uid, never one made since under the same name,
//! and never a reserved one.

use super::*;
use crate::cluster::{LabelTampering, NamespaceSeen};

/// What the cluster says of one recorded namespace, against the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum LabelDecision {
    /// The boundary's namespace, labelled as it should be.
    Keep,
    /// The boundary's namespace, its label removed or changed: put it back.
    Restore(LabelTampering),
    /// A record from before uids were kept: learn this uid, then judge it as [`Self::Keep`] or
    /// [`Self::Restore`] (the first pass after an upgrade trusts what it finds).
    Learn(String, Option<LabelTampering>),
    /// Deleted in the cluster, or made again by someone else (another uid): the record reads
    /// `gone`, and nothing is labelled.
    Gone,
    /// Its name is reserved in the cluster: never labelled (the record reports it).
    Reserved,
}

/// Decides what to do with a recorded namespace (`recorded_uid`) of `boundary` from what the
/// cluster has under its name (`seen`).
pub(super) fn decide(
    boundary: &str,
    recorded_uid: Option<&str>,
    reserved: bool,
    seen: Option<&NamespaceSeen>,
) -> LabelDecision {
    let Some(seen) = seen else {
        return LabelDecision::Gone;
    };
    let tampering = seen.tampering(boundary);
    match (recorded_uid, seen.uid.as_deref()) {
        (Some(recorded), Some(now)) if recorded != now => LabelDecision::Gone,
        _ if reserved => LabelDecision::Reserved,
        (None, Some(now)) => LabelDecision::Learn(now.to_owned(), tampering),
        _ => match tampering {
            None => LabelDecision::Keep,
            Some(tampering) => LabelDecision::Restore(tampering),
        },
    }
}

impl Part<'_> {
    /// Puts each boundary namespace's `palisade.dev/boundary` label back where someone removed
    /// or changed it (the guard stops everyone but palisade; a cluster admin may still delete
    /// the guard), before anything is probed: a namespace without its label is judged by none
    /// of the boundary's policies. Each repair is counted and recorded on the cluster. Answers
    /// the `(boundary, namespace)` pairs found gone, which the rest of the pass leaves out.
    pub(super) async fn restore_labels(
        &self,
        client: &ClusterClient,
        attached: &[&BoundaryState],
    ) -> Result<BTreeSet<(String, String)>, ControllerError> {
        let (ctl, cluster) = (self.ctl, self.cluster);
        let mut gone = BTreeSet::new();
        for boundary in attached {
            for namespace in boundary
                .namespaces
                .iter()
                .filter(|n| n.cluster == cluster.name)
            {
                let seen = client
                    .namespace_seen(&namespace.name)
                    .await
                    .map_err(ControllerError::RestoreLabel)?;
                let reserved = palisade_policy::namespace::is_reserved(
                    &namespace.name,
                    &cluster.reserved_namespaces,
                );
                let decision = decide(
                    boundary.name.as_str(),
                    namespace.uid.as_deref(),
                    reserved,
                    seen.as_ref(),
                );
                let tampering = match decision {
                    LabelDecision::Keep | LabelDecision::Reserved => continue,
                    LabelDecision::Learn(uid, tampering) => {
                        let learnt = ctl
                            .records
                            .learn_namespace_uid(
                                boundary.name.as_str(),
                                &cluster.name,
                                &namespace.name,
                                &uid,
                            )
                            .await;
                        pass::recorded(
                            &cluster.name,
                            "a namespace's uid",
                            learnt.map(|_| ()).map_err(ControllerError::ClusterStatus),
                        );
                        match tampering {
                            Some(tampering) => tampering,
                            None => continue,
                        }
                    }
                    LabelDecision::Gone => {
                        tracing::warn!(cluster = %cluster.name, boundary = %boundary.name, namespace = %namespace.name,
                            "boundary namespace deleted in the cluster; a namespace of that name made since is not labelled");
                        let marked = ctl
                            .records
                            .namespace_gone(boundary.name.as_str(), &cluster.name, &namespace.name)
                            .await;
                        pass::recorded(
                            &cluster.name,
                            "a gone namespace",
                            marked.map(|_| ()).map_err(ControllerError::ClusterStatus),
                        );
                        gone.insert((boundary.name.to_string(), namespace.name.clone()));
                        continue;
                    }
                    LabelDecision::Restore(tampering) => tampering,
                };
                let version = seen.and_then(|s| s.resource_version);
                // Read again after the label was found missing: a release (the record, then
                // the label) since the pass read its state leaves it removed.
                // A store that cannot be read counts as registered (the label is put back; a
                // release removes it again).
                let registered = ctl
                    .records
                    .namespace_record(boundary.name.as_str(), &cluster.name, &namespace.name)
                    .await;
                if matches!(registered, Err(StoreError::NotFound)) {
                    continue;
                }
                if !client
                    .put_boundary_label_back(&boundary.name, &namespace.name, version)
                    .await
                    .map_err(ControllerError::RestoreLabel)?
                {
                    continue;
                }
                let repair = tampering.repair(&namespace.name);
                tracing::warn!(cluster = %cluster.name, boundary = %boundary.name, repair, "boundary label repaired");
                metrics::repaired(&cluster.name, "namespace_label");
                let result = ctl
                    .records
                    .record_repair(&cluster.name, &repair)
                    .await
                    .map_err(ControllerError::ClusterStatus);
                pass::recorded(&cluster.name, "a repair", result);
            }
        }
        Ok(gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(uid: &str, label: Option<&str>) -> NamespaceSeen {
        NamespaceSeen {
            label: label.map(str::to_owned),
            uid: Some(uid.to_owned()),
            resource_version: Some("7".into()),
        }
    }

    /// A name, the recorded uid, whether the name is reserved, what the cluster has, the decision.
    type Case = (
        &'static str,
        Option<&'static str>,
        bool,
        Option<NamespaceSeen>,
        LabelDecision,
    );

    /// SPEC 3.4 v3.2: the label is restored on the namespace with the recorded uid only.
    #[test]
    fn labels_are_restored_on_the_recorded_namespace_only() {
        use LabelDecision::*;
        let removed = Some(LabelTampering::Removed);
        let cases: [Case; 10] = [
            (
                "labelled as it should be",
                Some("u1"),
                false,
                Some(seen("u1", Some("shop"))),
                Keep,
            ),
            (
                "its label removed",
                Some("u1"),
                false,
                Some(seen("u1", None)),
                Restore(LabelTampering::Removed),
            ),
            (
                "its label changed",
                Some("u1"),
                false,
                Some(seen("u1", Some("other"))),
                Restore(LabelTampering::Changed("other".into())),
            ),
            ("deleted", Some("u1"), false, None, Gone),
            (
                "made again by someone else",
                Some("u1"),
                false,
                Some(seen("u2", None)),
                Gone,
            ),
            (
                "made again, even labelled",
                Some("u1"),
                false,
                Some(seen("u2", Some("shop"))),
                Gone,
            ),
            (
                "an older record learns its uid",
                None,
                false,
                Some(seen("u3", Some("shop"))),
                Learn("u3".into(), None),
            ),
            (
                "an older record learns, then restores",
                None,
                false,
                Some(seen("u3", None)),
                Learn("u3".into(), removed),
            ),
            (
                "reserved: never labelled",
                Some("u1"),
                true,
                Some(seen("u1", None)),
                Reserved,
            ),
            (
                "an older reserved record",
                None,
                true,
                Some(seen("u1", None)),
                Reserved,
            ),
        ];
        for (case, recorded, reserved, cluster_has, expected) in cases {
            assert_eq!(
                decide("shop", recorded, reserved, cluster_has.as_ref()),
                expected,
                "{case}"
            );
        }
    }
}
