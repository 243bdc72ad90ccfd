//! Which clusters a change concerns (issue 43): a cluster's part of a pass depends only on its
//! own record and on the boundaries attached to it, so a pass after a change of the store runs
//! the clusters whose inputs changed since their last part that left nothing to do, and no
//! other. Pure: the inputs are summed up in a [`Fingerprint`], compared by the loop.
//!
//! What a cluster's part reads of the desired state, and so what the fingerprint covers:
//! - of the cluster: its name, when it was made (a cluster deleted and added again is another),
//!   its sealed kubeconfig and its reserved namespaces; not what the reconciler itself records
//!   there (version, admission status, last error, layout, repairs, restarts);
//! - of each attached boundary: its name; its policies' names and versions (etags); its
//!   namespaces in this cluster; the exceptions in force (names and ends: one that ends, or
//!   begins to be in force, changes the set); and the sequence number of its latest write
//!   (`last_change`: a policy, an exception or a workload written, which is how a workload
//!   placed in the cluster shows).
//!
//! What a fingerprint cannot see is left to the passes over every cluster, which the loop
//! still runs at every resync, timer, drift, finished build, returning cluster and change of
//! the clusters held.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use palisade_app::reconcile::{BoundaryState, ClusterRecord};

/// A sum of what a cluster's part of a pass reads of the desired state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(u64);

/// The fingerprint of `cluster`'s inputs among `boundaries` (every boundary of the store; the
/// ones attached to the cluster count, in the order given).
pub fn fingerprint(cluster: &ClusterRecord, boundaries: &[BoundaryState]) -> Fingerprint {
    let mut h = DefaultHasher::new();
    cluster.name.hash(&mut h);
    cluster.created_at.hash(&mut h);
    cluster.kubeconfig_sealed.hash(&mut h);
    cluster.reserved_namespaces.hash(&mut h);
    for boundary in boundaries
        .iter()
        .filter(|b| b.clusters.contains(&cluster.name))
    {
        // A separator per boundary, so that no two lists of boundaries sum alike by moving
        // an item from one to the next.
        0xb0u8.hash(&mut h);
        boundary.name.as_str().hash(&mut h);
        boundary.last_change.hash(&mut h);
        for (record, _) in &boundary.policies {
            record.name.hash(&mut h);
            record.etag.hash(&mut h);
        }
        0x01u8.hash(&mut h);
        for namespace in boundary
            .namespaces
            .iter()
            .filter(|n| n.cluster == cluster.name)
        {
            namespace.name.hash(&mut h);
            namespace.created_at.hash(&mut h);
            namespace.uid.hash(&mut h);
        }
        0x02u8.hash(&mut h);
        for exception in &boundary.exceptions {
            exception.name.as_str().hash(&mut h);
            exception.expires_at.hash(&mut h);
        }
    }
    Fingerprint(h.finish())
}

/// The clusters a pass after a change runs: those without a settled fingerprint (never
/// settled, or their last part left something to do), and those whose fingerprint changed.
pub fn changed<'a>(
    current: impl IntoIterator<Item = (&'a str, Fingerprint)>,
    settled: impl Fn(&str) -> Option<Fingerprint>,
) -> Vec<&'a str> {
    current
        .into_iter()
        .filter(|(cluster, now)| settled(cluster) != Some(*now))
        .map(|(cluster, _)| cluster)
        .collect()
}

/// Whether a cluster's part that completed leaves its fingerprint settled: nothing failed,
/// every status was recorded, every policy confirmed. Otherwise the next pass runs it anyway.
pub fn settles(
    completed: bool,
    recorded: bool,
    unconfirmed: usize,
    workloads_failed: bool,
) -> bool {
    completed && recorded && unconfirmed == 0 && !workloads_failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_app::reconcile::{NamespaceRecord, PolicyRecord};
    use palisade_policy::Name;
    use std::collections::BTreeMap;

    fn mk_cluster(name: &str) -> ClusterRecord {
        ClusterRecord {
            name: name.to_owned(),
            kubeconfig_sealed: b"sealed".to_vec(),
            kubernetes_version: None,
            admission_enforced: None,
            admission_reason: None,
            last_error: None,
            apiserver_restarts: 0,
            apiserver_restarted_at: None,
            repairs: 0,
            last_repair: None,
            last_repair_at: None,
            admission_layout: None,
            admission_layout_reason: None,
            reserved_namespaces: Vec::new(),
            created_at: "2026-12-01T00:00:00.000Z".to_owned(),
            updated_at: "2026-12-01T00:00:00.000Z".to_owned(),
        }
    }

    fn mk_policy(boundary: &str, name: &str, etag: &str) -> PolicyRecord {
        PolicyRecord {
            boundary: boundary.to_owned(),
            name: name.to_owned(),
            spec_json: "{}".to_owned(),
            metadata_json: "{}".to_owned(),
            etag: etag.to_owned(),
            created_at: String::new(),
            updated_at: String::new(),
            updated_by: String::new(),
            version: 1,
            rollout_json: None,
        }
    }

    fn mk_namespace(boundary: &str, cluster: &str, name: &str) -> NamespaceRecord {
        NamespaceRecord {
            cluster: cluster.to_owned(),
            name: name.to_owned(),
            boundary: boundary.to_owned(),
            created_at: "2026-12-01T00:00:00.000Z".to_owned(),
            uid: Some(format!("uid-{name}")),
            gone_at: None,
        }
    }

    /// A boundary attached to `clusters`, with one policy and a namespace in each cluster.
    fn mk_boundary(name: &str, clusters: &[&str]) -> BoundaryState {
        BoundaryState {
            name: Name::parse(name).expect("a boundary name"),
            policies: vec![(
                mk_policy(name, "labels", "e1"),
                Err("not decoded in this test".to_owned()),
            )],
            clusters: clusters.iter().map(|c| (*c).to_owned()).collect(),
            namespaces: clusters
                .iter()
                .map(|c| mk_namespace(name, c, &format!("{name}-web")))
                .collect(),
            exceptions: Vec::new(),
            last_change: 7,
            rollouts: Default::default(),
        }
    }

    fn mk_exception(name: &str, expires_at: &str) -> palisade_policy::Exception {
        palisade_policy::Exception {
            name: Name::parse(name).expect("an exception name"),
            policy: Name::parse("labels").expect("a policy name"),
            rules: Default::default(),
            object_match: None,
            resources: Vec::new(),
            plans: Vec::new(),
            expires_at: expires_at.to_owned(),
            reason: "legacy".to_owned(),
        }
    }

    /// The fleet of the tests: `a` in c1 and c2, `b` in c2, `c` in c3.
    fn mk_fleet() -> (Vec<ClusterRecord>, Vec<BoundaryState>) {
        (
            vec![mk_cluster("c1"), mk_cluster("c2"), mk_cluster("c3")],
            vec![
                mk_boundary("a", &["c1", "c2"]),
                mk_boundary("b", &["c2"]),
                mk_boundary("c", &["c3"]),
            ],
        )
    }

    fn prints(
        clusters: &[ClusterRecord],
        boundaries: &[BoundaryState],
    ) -> BTreeMap<String, Fingerprint> {
        clusters
            .iter()
            .map(|c| (c.name.clone(), fingerprint(c, boundaries)))
            .collect()
    }

    /// The clusters whose fingerprint differs between the fleet as made and after `change`.
    fn concerned(
        change: impl FnOnce(&mut Vec<ClusterRecord>, &mut Vec<BoundaryState>),
    ) -> Vec<String> {
        let (mut clusters, mut boundaries) = mk_fleet();
        let before = prints(&clusters, &boundaries);
        change(&mut clusters, &mut boundaries);
        let after = prints(&clusters, &boundaries);
        let settled = |c: &str| before.get(c).copied();
        changed(after.iter().map(|(c, f)| (c.as_str(), *f)), settled)
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_change_concerns_the_clusters_its_boundary_is_attached_to_and_no_other() {
        type Change = fn(&mut Vec<ClusterRecord>, &mut Vec<BoundaryState>);
        let cases: Vec<(&str, Change, &[&str])> = vec![
            ("nothing", |_, _| {}, &[]),
            (
                "a policy of a changed",
                |_, b| b[0].policies[0].0.etag = "e2".into(),
                &["c1", "c2"],
            ),
            (
                "a policy of b changed",
                |_, b| b[1].policies[0].0.etag = "e2".into(),
                &["c2"],
            ),
            (
                "a policy added to c",
                |_, b| {
                    let added = (mk_policy("c", "registries", "r1"), Err(String::new()));
                    b[2].policies.push(added);
                },
                &["c3"],
            ),
            (
                "a policy of c deleted",
                |_, b| b[2].policies.clear(),
                &["c3"],
            ),
            (
                "a policy of a renamed, same etag",
                |_, b| b[0].policies[0].0.name = "other".into(),
                &["c1", "c2"],
            ),
            (
                "a workload of b written",
                |_, b| b[1].last_change = 8,
                &["c2"],
            ),
            (
                "a namespace of a made in c1",
                |_, b| b[0].namespaces.push(mk_namespace("a", "c1", "a-api")),
                &["c1"],
            ),
            (
                "a namespace of a in c2 released",
                |_, b| b[0].namespaces.retain(|n| n.cluster != "c2"),
                &["c2"],
            ),
            (
                "a namespace of a in c1 learnt its uid",
                |_, b| b[0].namespaces[0].uid = Some("new".into()),
                &["c1"],
            ),
            ("c detached from c3", |_, b| b[2].clusters.clear(), &["c3"]),
            (
                "b attached to c1",
                |_, b| {
                    b[1].clusters.insert("c1".into());
                },
                &["c1"],
            ),
            (
                "an exception of a in force",
                |_, b| {
                    b[0].exceptions
                        .push(mk_exception("legacy", "2027-01-01T00:00:00.000Z"))
                },
                &["c1", "c2"],
            ),
            (
                "an exception of b prolonged",
                |_, b| b[1].exceptions = vec![mk_exception("legacy", "2027-02-01T00:00:00.000Z")],
                &["c2"],
            ),
            (
                "c1's credentials changed",
                |c, _| c[0].kubeconfig_sealed = b"new".to_vec(),
                &["c1"],
            ),
            (
                "c2 deleted and added again",
                |c, _| c[1].created_at = "2026-12-02T00:00:00.000Z".into(),
                &["c2"],
            ),
            (
                "a namespace reserved in c3",
                |c, _| c[2].reserved_namespaces = vec!["ops".into()],
                &["c3"],
            ),
            (
                "what the reconciler records of c1",
                |c, _| {
                    c[0].last_error = Some("unreachable".into());
                    c[0].admission_enforced = Some(true);
                    c[0].kubernetes_version = Some("1.37.2".into());
                    c[0].admission_layout = Some("per-policy".into());
                    c[0].repairs = 3;
                    c[0].apiserver_restarts = 1;
                    c[0].updated_at = "2026-12-03T00:00:00.000Z".into();
                },
                &[],
            ),
            (
                "a boundary attached nowhere changed",
                |_, b| {
                    let mut d = mk_boundary("d", &[]);
                    d.last_change = 99;
                    b.push(d);
                },
                &[],
            ),
        ];
        for (what, change, clusters) in cases {
            assert_eq!(concerned(change), clusters, "{what}");
        }
    }

    #[test]
    fn a_cluster_never_settled_is_always_run() {
        let (clusters, boundaries) = mk_fleet();
        let now = prints(&clusters, &boundaries);
        let settled = |c: &str| (c != "c2").then(|| now[c]);
        let run = changed(now.iter().map(|(c, f)| (c.as_str(), *f)), settled);
        assert_eq!(run, ["c2"]);
    }

    #[test]
    fn only_a_part_that_left_nothing_to_do_settles() {
        assert!(settles(true, true, 0, false));
        let cases = [
            ("failed", (false, true, 0, false)),
            ("a status not recorded", (true, false, 0, false)),
            ("a policy not yet confirmed", (true, true, 1, false)),
            ("workloads not deployed", (true, true, 0, true)),
        ];
        for (what, (completed, recorded, unconfirmed, workloads)) in cases {
            assert!(
                !settles(completed, recorded, unconfirmed, workloads),
                "{what}"
            );
        }
    }
}
