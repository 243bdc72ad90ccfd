//! Pure decisions of a pass, tested without a control plane: which boundaries and policies a
//! cluster holds, how a boundary's policies are written, where a probe runs, what a collection
//! keeps, which boundaries' objects go.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use palisade_app::reconcile::{BoundaryState, PolicyRecord};
use palisade_policy::{Name, Policy};
use palisade_vap::render::switch_binding;
use palisade_vap::Layout;

use crate::admission::{AdmissionLayout, Staging, Target, Writes};
use crate::installed::Installed;

/// The boundaries attached to `cluster`, in the order given.
pub(crate) fn attached<'a>(
    boundaries: &'a [BoundaryState],
    cluster: &str,
) -> Vec<&'a BoundaryState> {
    boundaries
        .iter()
        .filter(|b| b.clusters.contains(cluster))
        .collect()
}

/// The boundary's policies that belong in `cluster`: with admission rules and in scope, or
/// not decodable (whose status then says so).
pub(crate) fn wanted<'a>(
    boundary: &'a BoundaryState,
    cluster: &'a Name,
) -> impl Iterator<Item = (&'a PolicyRecord, &'a Result<Policy, String>)> + 'a {
    boundary
        .policies
        .iter()
        .filter(move |(_, decoded)| match decoded {
            Ok(policy) => policy.installs_in(cluster),
            Err(_) => true,
        })
        .map(|(record, decoded)| (record, decoded))
}

/// The boundary's policies in `cluster`, decoded (those that are not keep their objects).
pub(crate) fn decoded_in(boundary: &BoundaryState, cluster: &Name) -> Vec<Policy> {
    wanted(boundary, cluster)
        .filter_map(|(_, decoded)| decoded.as_ref().ok().cloned())
        .collect()
}

/// The boundary's namespaces in `cluster`, and the one its policies' probes run in: the first
/// that no exception names (there a probe is judged by the policies alone), else the first.
pub(crate) fn probe_namespace<'b>(
    boundary: &'b BoundaryState,
    cluster: &str,
) -> (Vec<&'b str>, Option<String>) {
    let named_by_exceptions = |namespace: &str| {
        boundary.exceptions.iter().any(|x| {
            x.object_match
                .as_ref()
                .is_some_and(|m| m.namespaces.iter().any(|n| n.as_str() == namespace))
        })
    };
    let namespaces: Vec<&str> = boundary
        .namespaces_in(cluster)
        .map(|n| n.name.as_str())
        .collect();
    let probe = namespaces
        .iter()
        .find(|n| !named_by_exceptions(n))
        .or_else(|| namespaces.first())
        .map(|n| (*n).to_owned());
    (namespaces, probe)
}

/// The policies whose objects a boundary's collection keeps in `cluster`: those in it that
/// decode, and every one that does not (it keeps whatever it had installed).
pub(crate) fn kept_policies(boundary: &BoundaryState, cluster: &Name) -> Vec<Name> {
    let mut keep: Vec<Name> = decoded_in(boundary, cluster)
        .iter()
        .map(|p| p.name().clone())
        .collect();
    keep.extend(
        boundary
            .policies
            .iter()
            .filter(|(_, d)| d.is_err())
            .filter_map(|(r, _)| Name::parse(&r.name).ok()),
    );
    keep
}

/// The boundaries with objects in the cluster (`installed`) that are no longer attached to it
/// (detached or deleted): their objects go. Names that are not boundary names are left alone.
pub(crate) fn detached(installed: &BTreeSet<String>, attached: &[&BoundaryState]) -> Vec<Name> {
    installed
        .iter()
        .filter(|b| !attached.iter().any(|a| a.name.as_str() == b.as_str()))
        .filter_map(|b| Name::parse(b).ok())
        .collect()
}

/// What a boundary's garbage collection keeps after its policies were written in `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Keep {
    /// The layouts whose objects of kept policies stay.
    pub layouts: Vec<Layout>,
    /// The switch bindings stay (the switch is not done).
    pub switch_bindings: bool,
}

/// SPEC 3.4, no gap: while the boundary has objects of a layout other than `target`
/// (`present`), they stay until every probe of the boundary confirmed the `target` objects at
/// work (`confirmed`); then only `target`'s stay, and the switch bindings go.
pub(crate) fn keep(present: &BTreeSet<Layout>, target: Layout, confirmed: bool) -> Keep {
    let switching = present.iter().any(|l| *l != target);
    if switching && !confirmed {
        let mut layouts: BTreeSet<Layout> = present.clone();
        layouts.insert(target);
        Keep {
            layouts: layouts.into_iter().collect(),
            switch_bindings: true,
        }
    } else {
        Keep {
            layouts: vec![target],
            switch_bindings: false,
        }
    }
}

/// What a cluster's part reads before it decides what to write: what this installation holds
/// there, and each attached boundary's namespaces where the layout writes into them.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    pub before: Installed,
    /// When it was read (milliseconds since the epoch): how long the version objects of a
    /// rollout have held their namespaces is judged from it.
    pub at_ms: i64,
    /// By boundary name: its namespaces in the cluster (none read for a layout that does not
    /// write into them), or why they could not be read.
    pub namespaces: BTreeMap<String, Result<Vec<String>, String>>,
}

/// A boundary in a cluster's part: what its probes and its collection need once it is
/// written.
#[derive(Debug)]
pub(crate) struct InCluster<'b> {
    pub boundary: &'b BoundaryState,
    /// Its namespaces in the cluster, as the store has them.
    pub namespaces: Vec<&'b str>,
    pub probe_namespace: Option<String>,
    /// Its policies in the cluster (decoded).
    pub in_cluster: Vec<Policy>,
    /// The layouts its objects were found in before the part wrote.
    pub present: BTreeSet<Layout>,
    pub switching: bool,
    /// Its policies being rolled out here, where their stage reached part of the boundary.
    pub staged: BTreeMap<Name, Staging>,
}

/// A boundary's part of a cluster's pass, decided from what was observed: the boundary in the
/// cluster, and its writes.
#[derive(Debug)]
pub(crate) struct Planned<'b> {
    pub part: InCluster<'b>,
    pub writes: BoundaryWrites,
}

/// What a boundary's part writes in `cluster` in `layout`, from what was observed.
pub(crate) fn plan_boundary<'b>(
    layout: Layout,
    installation: &str,
    observed: &Observed,
    boundary: &'b BoundaryState,
    cluster: &Name,
) -> Planned<'b> {
    let (namespaces, probe_namespace) = probe_namespace(boundary, cluster.as_str());
    let in_cluster = decoded_in(boundary, cluster);
    let exceptions = boundary.exceptions_in(cluster.as_str());
    let present = observed.before.layouts(installation, &boundary.name);
    let switching = present.iter().any(|l| *l != layout);
    let staged = staged_in(boundary, cluster, &in_cluster, observed, installation);
    let none = Ok(Vec::new());
    let writes = match observed
        .namespaces
        .get(boundary.name.as_str())
        .unwrap_or(&none)
    {
        Err(reason) => BoundaryWrites::Refused(reason.clone()),
        Ok(in_layout) => {
            let target = Target {
                installation,
                boundary: &boundary.name,
                exceptions: &exceptions,
                namespaces: in_layout,
                before: &observed.before,
                staged: &staged,
            };
            boundary_writes(
                crate::admission::of(layout),
                &target,
                boundary,
                cluster,
                &in_cluster,
                switching,
            )
        }
    };
    Planned {
        part: InCluster {
            boundary,
            namespaces,
            probe_namespace,
            in_cluster,
            present,
            switching,
            staged,
        },
        writes,
    }
}

/// The boundary's policies being rolled out (SPEC 8; running or paused) that `cluster` holds,
/// with the namespaces their stage reached there (maybe none, maybe all). The namespaces are
/// the boundary's as the store has them, so a namespace made later joins a percentage stage in
/// its place of the order. Once a rollout is done, its version is written as any policy is.
pub(crate) fn staged_in(
    boundary: &BoundaryState,
    cluster: &Name,
    in_cluster: &[Policy],
    observed: &Observed,
    installation: &str,
) -> BTreeMap<Name, Staging> {
    let namespaces: Vec<Name> = boundary
        .namespaces_in(cluster.as_str())
        .filter_map(|n| Name::parse(&n.name).ok())
        .collect();
    in_cluster
        .iter()
        .filter_map(|policy| {
            let rolling = boundary.rollouts.get(policy.name().as_str())?;
            let rollout = policy.rollout()?;
            // Reached everywhere in the cluster: still the version's own objects until the
            // rollout is done, so that what it denies is counted apart.
            let reached = rollout.namespaces_reached(
                rolling.stage,
                &boundary.name,
                policy.name(),
                cluster,
                &namespaces,
            );
            let previous = rolling.previous.clone().filter(|p| p.installs_in(cluster));
            let binding_name = palisade_vap::per_policy::version_object_name(
                &boundary.name,
                policy.name(),
                rolling.version,
            );
            let binding = observed.before.bindings.iter().find(|m| {
                m.name.as_deref() == Some(binding_name.as_str())
                    && crate::installed::is_ours(m, installation, &boundary.name)
            });
            let left = crate::admission::staged::handed_over(binding, &reached, observed.at_ms);
            Some((
                policy.name().clone(),
                Staging {
                    version: rolling.version,
                    previous,
                    reached,
                    left,
                },
            ))
        })
        .collect()
}

/// How a boundary's policies are written in a cluster, decided before anything is written.
#[derive(Debug)]
pub(crate) enum BoundaryWrites {
    /// Not written: every policy's write gives this reason.
    Refused(String),
    /// Written together (the layout's objects hold several policies, or the cluster changes
    /// layout and the switch bindings must come after the objects they prove), then the
    /// switch bindings.
    Together {
        writes: Writes,
        switch: Vec<ValidatingAdmissionPolicyBinding>,
    },
    /// Each policy alone, in order: its writes, or why it cannot be written.
    Each(Vec<Result<Writes, String>>),
}

/// The writes of a boundary's policies in the cluster (`in_cluster`, decoded, in order) in
/// `layout`; `switching`: the boundary has objects of another layout too. A boundary whose
/// objects hold several policies is not written while one of its policies cannot be decoded:
/// writing without that policy's rules would drop them.
pub(crate) fn boundary_writes(
    layout: &dyn AdmissionLayout,
    target: &Target<'_>,
    boundary: &BoundaryState,
    cluster: &Name,
    in_cluster: &[Policy],
    switching: bool,
) -> BoundaryWrites {
    let together = layout.writes_boundary_together();
    if !together && !switching {
        return BoundaryWrites::Each(
            in_cluster
                .iter()
                .map(|p| layout.write_policy(target, p).map_err(|e| e.to_string()))
                .collect(),
        );
    }
    if together {
        if let Some((record, _)) = wanted(boundary, cluster).find(|(_, d)| d.is_err()) {
            return BoundaryWrites::Refused(format!(
                "not applied: policy '{}' of the boundary cannot be decoded, and the boundary's \
                 admission objects hold its rules with this policy's; they are left as they were",
                record.name
            ));
        }
    }
    match layout.write_boundary(target, in_cluster) {
        Err(error) => BoundaryWrites::Refused(error.to_string()),
        Ok(writes) => BoundaryWrites::Together {
            writes,
            switch: if switching {
                layout
                    .enforce_bindings(target.installation, target.boundary, in_cluster)
                    .iter()
                    .map(switch_binding)
                    .collect()
            } else {
                Vec::new()
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_app::reconcile::NamespaceRecord;
    use Layout::{PerBoundary as B, PerPolicy as P, Shared as S};

    fn mk_record(name: &str) -> PolicyRecord {
        PolicyRecord {
            boundary: "shop".to_owned(),
            name: name.to_owned(),
            spec_json: "{}".to_owned(),
            metadata_json: "{}".to_owned(),
            etag: "e1".to_owned(),
            created_at: String::new(),
            updated_at: String::new(),
            updated_by: String::new(),
            version: 1,
            rollout_json: None,
        }
    }

    /// A policy requiring a label, installed in `clusters` (every cluster when empty).
    fn mk_policy(name: &str, clusters: &[&str]) -> (PolicyRecord, Result<Policy, String>) {
        let scope = if clusters.is_empty() {
            palisade_policy::Scope::AllClusters
        } else {
            palisade_policy::Scope::Clusters(
                clusters
                    .iter()
                    .map(|c| Name::parse(c).expect("a cluster name"))
                    .collect(),
            )
        };
        let team = palisade_policy::LabelKey::parse("team").expect("a label key");
        let label = palisade_policy::LabelRequirement::new(team, None);
        let rules = vec![palisade_policy::Rule::RequiredLabels(vec![label])];
        let policy = Policy::new(
            Name::parse(name).expect("a policy name"),
            palisade_policy::Mode::Enforce,
            scope,
            rules,
        )
        .expect("a policy");
        (mk_record(name), Ok(policy))
    }

    fn mk_undecodable(name: &str) -> (PolicyRecord, Result<Policy, String>) {
        (mk_record(name), Err("unknown rule 'x'".to_owned()))
    }

    fn mk_namespace(cluster: &str, name: &str) -> NamespaceRecord {
        NamespaceRecord {
            cluster: cluster.to_owned(),
            name: name.to_owned(),
            boundary: "shop".to_owned(),
            created_at: String::new(),
            uid: None,
            gone_at: None,
        }
    }

    fn mk_boundary(
        name: &str,
        clusters: &[&str],
        policies: Vec<(PolicyRecord, Result<Policy, String>)>,
    ) -> BoundaryState {
        BoundaryState {
            name: Name::parse(name).expect("a boundary name"),
            policies,
            clusters: clusters.iter().map(|c| (*c).to_owned()).collect(),
            namespaces: Vec::new(),
            exceptions: Vec::new(),
            last_change: 0,
            rollouts: Default::default(),
        }
    }

    fn mk_exception_in(namespaces: &[&str]) -> palisade_policy::Exception {
        palisade_policy::Exception {
            name: Name::parse("legacy").expect("a name"),
            policy: Name::parse("labels").expect("a name"),
            rules: Default::default(),
            object_match: Some(palisade_policy::ObjectMatch {
                clusters: Vec::new(),
                namespaces: namespaces
                    .iter()
                    .map(|n| Name::parse(n).expect("a name"))
                    .collect(),
                labels: Vec::new(),
                images: Vec::new(),
            }),
            resources: Vec::new(),
            plans: Vec::new(),
            expires_at: "2099-01-01T00:00:00.000Z".to_owned(),
            reason: "legacy".to_owned(),
        }
    }

    fn names(names: &[Name]) -> Vec<&str> {
        names.iter().map(Name::as_str).collect()
    }

    /// What a rollout's stage reaches in each cluster, as the writes use it: the named
    /// namespaces of the cluster a stage names and nothing in another, every namespace of a
    /// cluster a stage reaches whole (still the version's own objects), all of them from the
    /// last stage on; the previous version only where it installs; a policy with no rollout
    /// running is not staged.
    #[test]
    fn a_stage_reaches_its_namespaces_in_its_clusters() {
        use palisade_policy::rollout::{
            Namespaces, Progress, Promote, Rollout, Stage, StageDuration,
        };
        let names = |list: &[&str]| -> BTreeSet<Name> {
            list.iter()
                .map(|n| Name::parse(n).expect("a name"))
                .collect()
        };
        let stage = |clusters: Option<&[&str]>, namespaces| Stage {
            clusters: clusters.map(|c| names(c).into_iter().collect()),
            namespaces,
            duration: StageDuration::parse("1h").ok(),
        };
        let rollout = Rollout::new(
            vec![
                stage(
                    Some(&["c1"]),
                    Namespaces::Named(names(&["web"]).into_iter().collect()),
                ),
                stage(Some(&["c2"]), Namespaces::All),
            ],
            Promote::Manual,
            0,
            &palisade_policy::Scope::AllClusters,
            None,
        )
        .expect("a rollout");
        let (record, tags) = mk_policy("tags", &[]);
        let tags = tags.expect("a policy").with_rollout(rollout);
        let previous = mk_policy("tags", &["c1"]).1.expect("a policy");
        let (plain_record, plain) = mk_policy("plain", &[]);
        let plain = plain.expect("a policy");
        let mut boundary = mk_boundary(
            "shop",
            &["c1", "c2"],
            vec![
                (record, Ok(tags.clone())),
                (plain_record, Ok(plain.clone())),
            ],
        );
        boundary.namespaces = vec![
            mk_namespace("c1", "web"),
            mk_namespace("c1", "api"),
            mk_namespace("c2", "jobs"),
        ];
        let cases: [(usize, &str, &[&str], bool); 6] = [
            (0, "c1", &["web"], true),
            (0, "c2", &[], false),
            (1, "c1", &["web"], true),
            (1, "c2", &["jobs"], false),
            (2, "c1", &["api", "web"], true),
            (2, "c2", &["jobs"], false),
        ];
        for (at, cluster, reached, with_previous) in cases {
            boundary.rollouts.insert(
                "tags".to_owned(),
                palisade_app::reconcile::Rolling {
                    version: 2,
                    previous: Some(previous.clone()),
                    stage: at,
                    stored: palisade_app::rollout::StoredRollout {
                        progress: Progress::start(2, Some(1), 0),
                        previous_spec: None,
                        denials: 0,
                        baseline: None,
                    },
                },
            );
            let cluster_name = Name::parse(cluster).expect("a name");
            let staged = staged_in(
                &boundary,
                &cluster_name,
                &[tags.clone(), plain.clone()],
                &Observed::default(),
                "main",
            );
            let case = format!("stage {at} in {cluster}");
            assert_eq!(staged.len(), 1, "{case}: only the policy rolling out");
            let staging = &staged[tags.name()];
            assert_eq!(staging.version, 2, "{case}");
            assert_eq!(staging.reached, names(reached), "{case}");
            assert_eq!(staging.previous.is_some(), with_previous, "{case}");
            assert!(staging.left.is_empty(), "{case}: nothing handed over yet");
        }
    }

    #[test]
    fn a_cluster_holds_the_boundaries_attached_to_it() {
        let boundaries = [
            mk_boundary("a", &["c1", "c2"], Vec::new()),
            mk_boundary("b", &["c2"], Vec::new()),
            mk_boundary("c", &[], Vec::new()),
        ];
        let of = |cluster| -> Vec<String> {
            attached(&boundaries, cluster)
                .iter()
                .map(|b| b.name.to_string())
                .collect()
        };
        assert_eq!(of("c1"), ["a"]);
        assert_eq!(of("c2"), ["a", "b"]);
        assert!(of("c3").is_empty());
    }

    #[test]
    fn a_policy_belongs_in_the_clusters_of_its_scope_and_an_undecodable_one_everywhere() {
        let boundary = mk_boundary(
            "shop",
            &["c1", "c2"],
            vec![
                mk_policy("everywhere", &[]),
                mk_policy("only-c2", &["c2"]),
                mk_undecodable("broken"),
            ],
        );
        let c1 = Name::parse("c1").expect("a name");
        let c2 = Name::parse("c2").expect("a name");
        let wanted_in =
            |c| -> Vec<String> { wanted(&boundary, c).map(|(r, _)| r.name.clone()).collect() };
        assert_eq!(wanted_in(&c1), ["everywhere", "broken"]);
        assert_eq!(wanted_in(&c2), ["everywhere", "only-c2", "broken"]);
        let decoded: Vec<String> = decoded_in(&boundary, &c1)
            .iter()
            .map(|p| p.name().to_string())
            .collect();
        assert_eq!(decoded, ["everywhere"]);
        // The collection keeps what is in the cluster, and what cannot be decoded.
        assert_eq!(
            names(&kept_policies(&boundary, &c1)),
            ["everywhere", "broken"]
        );
        assert_eq!(
            names(&kept_policies(&boundary, &c2)),
            ["everywhere", "only-c2", "broken"]
        );
    }

    #[test]
    fn a_probe_runs_in_a_namespace_no_exception_names() {
        // (namespaces of the boundary in c1, namespaces an exception names) -> probe namespace
        type Case = (
            &'static [&'static str],
            &'static [&'static str],
            Option<&'static str>,
        );
        let cases: &[Case] = &[
            (&[], &[], None),
            (&["web"], &[], Some("web")),
            (&["web", "api"], &[], Some("web")),
            (&["web", "api"], &["web"], Some("api")),
            // Every one named: the first, judged with the exception.
            (&["web", "api"], &["web", "api"], Some("web")),
        ];
        for &(namespaces, excepted, probe) in cases {
            let mut boundary = mk_boundary("shop", &["c1"], Vec::new());
            boundary.namespaces = namespaces.iter().map(|n| mk_namespace("c1", n)).collect();
            // A namespace of another cluster is never this cluster's probe namespace.
            boundary
                .namespaces
                .insert(0, mk_namespace("c2", "elsewhere"));
            if !excepted.is_empty() {
                boundary.exceptions.push(mk_exception_in(excepted));
            }
            let (in_cluster, chosen) = probe_namespace(&boundary, "c1");
            assert_eq!(in_cluster, namespaces, "{namespaces:?} {excepted:?}");
            assert_eq!(chosen.as_deref(), probe, "{namespaces:?} {excepted:?}");
        }
    }

    #[test]
    fn the_objects_of_boundaries_no_longer_attached_go() {
        let boundaries = [
            mk_boundary("a", &["c1"], Vec::new()),
            mk_boundary("b", &["c1"], Vec::new()),
        ];
        let attached: Vec<&BoundaryState> = boundaries.iter().collect();
        let installed = |names: &[&str]| -> BTreeSet<String> {
            names.iter().map(|n| (*n).to_owned()).collect()
        };
        assert!(detached(&installed(&[]), &attached).is_empty());
        assert!(detached(&installed(&["a", "b"]), &attached).is_empty());
        assert_eq!(
            names(&detached(&installed(&["a", "gone"]), &attached)),
            ["gone"]
        );
        // Not a boundary name: left alone.
        assert!(detached(&installed(&["Not_A_Name"]), &attached).is_empty());
        assert_eq!(
            names(&detached(&installed(&["a", "b", "old"]), &attached[..1])),
            ["b", "old"]
        );
    }

    #[test]
    fn the_earlier_layout_stays_until_the_new_one_is_confirmed() {
        // (present, target, confirmed) -> (layouts kept, switch bindings kept)
        type Case = (&'static [Layout], Layout, bool, &'static [Layout], bool);
        let cases: &[Case] = &[
            // Nothing to switch from.
            (&[], B, false, &[B], false),
            (&[], B, true, &[B], false),
            (&[B], B, false, &[B], false),
            (&[S], S, true, &[S], false),
            // Switching, not confirmed: both stay, and the switch bindings.
            (&[B], S, false, &[B, S], true),
            (&[S], B, false, &[B, S], true),
            (&[P], B, false, &[P, B], true),
            (&[P, S], B, false, &[P, B, S], true),
            (&[B, S], S, false, &[B, S], true),
            // Confirmed: only the new layout stays.
            (&[B], S, true, &[S], false),
            (&[S], B, true, &[B], false),
            (&[P, B, S], B, true, &[B], false),
        ];
        for &(present, target, confirmed, layouts, switch_bindings) in cases {
            let present: BTreeSet<Layout> = present.iter().copied().collect();
            let mut expected = layouts.to_vec();
            expected.sort();
            assert_eq!(
                keep(&present, target, confirmed),
                Keep {
                    layouts: expected,
                    switch_bindings
                },
                "present {present:?}, target {target:?}, confirmed {confirmed}"
            );
        }
    }

    /// What a write plan is, in words a table can hold: `refused`, `each:<n>` (n policies
    /// written alone), or `together:<objects>+<switch bindings>`.
    fn shape(plan: &BoundaryWrites) -> String {
        match plan {
            BoundaryWrites::Refused(_) => "refused".to_owned(),
            BoundaryWrites::Each(each) => format!("each:{}", each.len()),
            BoundaryWrites::Together { writes, switch } => {
                format!("together:{}+{}", writes.objects.len(), switch.len())
            }
        }
    }

    /// The writes of `boundary`'s policies in cluster `c1` of installation `main`, which holds
    /// nothing of it yet.
    fn write_plan(layout: Layout, boundary: &BoundaryState, switching: bool) -> BoundaryWrites {
        let c1 = Name::parse("c1").expect("a name");
        let installed = Installed::default();
        let target = crate::admission::Target {
            installation: "main",
            boundary: &boundary.name,
            exceptions: &[],
            namespaces: &[],
            before: &installed,
            staged: &BTreeMap::new(),
        };
        let in_cluster = decoded_in(boundary, &c1);
        boundary_writes(
            crate::admission::of(layout),
            &target,
            boundary,
            &c1,
            &in_cluster,
            switching,
        )
    }

    /// How a boundary's policies are written: alone or together, with switch bindings while
    /// the cluster changes layout, and not at all where a held policy cannot be decoded.
    #[test]
    fn a_boundary_is_written_alone_together_or_not_at_all() {
        let decodable = mk_boundary(
            "shop",
            &["c1"],
            vec![mk_policy("a", &[]), mk_policy("b", &[])],
        );
        let undecodable = mk_boundary(
            "shop",
            &["c1"],
            vec![mk_policy("a", &[]), mk_undecodable("broken")],
        );
        // (case, layout, boundary, switching, shape)
        let cases: [(&str, Layout, &BoundaryState, bool, &str); 7] = [
            ("per policy: each alone", P, &decodable, false, "each:2"),
            (
                "per policy, switching: together, a switch binding each",
                P,
                &decodable,
                true,
                "together:4+2",
            ),
            (
                "per boundary: one object and binding",
                B,
                &decodable,
                false,
                "together:2+0",
            ),
            (
                "per boundary, switching",
                B,
                &decodable,
                true,
                "together:2+1",
            ),
            (
                "per boundary, a policy undecodable: not written",
                B,
                &undecodable,
                false,
                "refused",
            ),
            (
                "per policy, a policy undecodable: the others written",
                P,
                &undecodable,
                false,
                "each:1",
            ),
            (
                "shared, switching: the installation's switch binding",
                S,
                &decodable,
                true,
                "together:0+1",
            ),
        ];
        for (case, layout, boundary, switching, want) in cases {
            assert_eq!(
                shape(&write_plan(layout, boundary, switching)),
                want,
                "{case}"
            );
        }
    }

    #[test]
    fn an_undecodable_policy_refuses_its_boundarys_shared_objects_in_words() {
        let boundary = mk_boundary(
            "shop",
            &["c1"],
            vec![mk_policy("a", &[]), mk_undecodable("broken")],
        );
        let plan = write_plan(B, &boundary, false);
        let BoundaryWrites::Refused(reason) = plan else {
            panic!("written: {plan:?}");
        };
        assert_eq!(
            reason,
            "not applied: policy 'broken' of the boundary cannot be decoded, and the boundary's \
             admission objects hold its rules with this policy's; they are left as they were"
        );
    }

    /// A boundary's plan from what was observed: a switch when its objects are in another
    /// layout, and no write where its namespaces could not be read.
    #[test]
    fn a_boundary_is_planned_from_what_the_cluster_holds() {
        use palisade_vap::render::{
            BOUNDARY_LABEL, INSTALLATION_LABEL, MANAGED_BY_LABEL, POLICY_LABEL,
        };
        let c1 = Name::parse("c1").expect("a name");
        let boundary = mk_boundary("shop", &["c1"], vec![mk_policy("a", &[])]);
        let per_policy_object = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("a.shop.palisade.dev".to_owned()),
            labels: Some(
                [
                    (MANAGED_BY_LABEL, "palisade"),
                    (INSTALLATION_LABEL, "main"),
                    (BOUNDARY_LABEL, "shop"),
                    (POLICY_LABEL, "a"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            ),
            ..Default::default()
        };
        let held = Observed {
            before: Installed {
                policies: vec![per_policy_object],
                ..Installed::default()
            },
            at_ms: 0,
            namespaces: BTreeMap::new(),
        };
        let plan = plan_boundary(P, "main", &held, &boundary, &c1);
        assert!(!plan.part.switching);
        assert_eq!(shape(&plan.writes), "each:1");
        let plan = plan_boundary(B, "main", &held, &boundary, &c1);
        assert!(
            plan.part.switching,
            "per-policy objects held, per-boundary wanted"
        );
        assert_eq!(shape(&plan.writes), "together:2+1");
        let unreadable = Observed {
            namespaces: [("shop".to_owned(), Err("timed out".to_owned()))].into(),
            ..Observed::default()
        };
        let plan = plan_boundary(S, "main", &unreadable, &boundary, &c1);
        assert!(matches!(plan.writes, BoundaryWrites::Refused(ref r) if r == "timed out"));
    }
}
