//! What this installation has in a cluster, as one metadata-only list per kind (policies,
//! bindings, parameter objects) reads it (`ClusterClient::installed`), judged in memory: which layouts a boundary's objects are
//! in, which boundaries have objects, which objects are stale. A pass reads it twice per
//! cluster, not per boundary: before writing (the layouts present) and after (what to delete).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use palisade_policy::Name;
use palisade_vap::per_boundary::held_policies;
use palisade_vap::render::{
    BOUNDARY_LABEL, INSTALLATION_LABEL, MANAGED_BY_LABEL, POLICY_LABEL, SWITCH_LABEL, VERSION_LABEL,
};
use palisade_vap::shared::MODE_LABEL;
use palisade_vap::Layout;

/// Whether `meta` is palisade's, of `installation` and `boundary` (its labels say so).
pub(crate) fn is_ours(meta: &ObjectMeta, installation: &str, boundary: &Name) -> bool {
    let Some(labels) = &meta.labels else {
        return false;
    };
    let has = |key: &str, value: &str| labels.get(key).is_some_and(|v| v == value);
    has(MANAGED_BY_LABEL, "palisade")
        && has(INSTALLATION_LABEL, installation)
        && has(BOUNDARY_LABEL, boundary.as_str())
}

/// Whether `meta` is a per-boundary object: a mode, no policy of its own.
pub(crate) fn is_per_boundary(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .is_some_and(|l| l.contains_key(MODE_LABEL) && !l.contains_key(POLICY_LABEL))
}

/// Whether `meta` is an object of a version being rolled out (SPEC 8).
pub(crate) fn is_version(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .is_some_and(|l| l.contains_key(VERSION_LABEL))
}

/// Whether `meta` is a switch binding's.
pub(crate) fn is_switch(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .is_some_and(|l| l.contains_key(SWITCH_LABEL))
}

/// The metadata of this installation's admission objects and parameter objects in a cluster
/// (of one boundary, or of all).
#[derive(Clone, Debug, Default)]
pub struct Installed {
    pub policies: Vec<ObjectMeta>,
    pub bindings: Vec<ObjectMeta>,
    pub parameters: Vec<ObjectMeta>,
    /// The namespaces labelled for a boundary (for one boundary: for it).
    pub namespaces: Vec<ObjectMeta>,
    /// The API server's refusal to list parameter objects (a role that predates the shared
    /// layout): none are read. Only the shared layout writes them, so only there is it an
    /// error (`InLayout::installed`).
    pub parameters_refused: Option<Box<kube::core::Status>>,
}

/// What a garbage collection keeps of a boundary.
#[derive(Clone, Copy, Debug)]
pub struct Keep<'a> {
    /// The boundary's policies that stay.
    pub policies: &'a [Name],
    /// The layouts whose objects of those policies stay (two during a switch).
    pub layouts: &'a [Layout],
    /// Whether the switch bindings stay.
    pub switch_bindings: bool,
}

impl Installed {
    /// Only `boundary`'s objects.
    pub fn of_boundary(&self, installation: &str, boundary: &Name) -> Installed {
        let ours = |metas: &[ObjectMeta]| {
            metas
                .iter()
                .filter(|m| is_ours(m, installation, boundary))
                .cloned()
                .collect()
        };
        Installed {
            policies: ours(&self.policies),
            bindings: ours(&self.bindings),
            parameters: ours(&self.parameters),
            namespaces: self
                .namespaces
                .iter()
                .filter(|m| labelled_for(m, boundary))
                .cloned()
                .collect(),
            parameters_refused: self.parameters_refused.clone(),
        }
    }

    /// The layouts `boundary`'s objects are in.
    pub fn layouts(&self, installation: &str, boundary: &Name) -> BTreeSet<Layout> {
        let mut present: BTreeSet<Layout> = self
            .policies
            .iter()
            .filter(|m| is_ours(m, installation, boundary))
            // A rollout's version objects stand beside every layout's.
            .filter(|m| !is_version(m))
            .map(|m| {
                if is_per_boundary(m) {
                    Layout::PerBoundary
                } else {
                    Layout::PerPolicy
                }
            })
            .collect();
        if self
            .parameters
            .iter()
            .any(|m| is_ours(m, installation, boundary))
        {
            present.insert(Layout::Shared);
        }
        present
    }

    /// The names of the namespaces labelled for `boundary`.
    pub fn namespaces_of(&self, boundary: &Name) -> Vec<String> {
        self.namespaces
            .iter()
            .filter(|m| labelled_for(m, boundary))
            .filter_map(|m| m.name.clone())
            .collect()
    }

    /// The boundaries that have objects (from their labels).
    pub fn boundaries(&self) -> BTreeSet<String> {
        self.policies
            .iter()
            .chain(&self.bindings)
            .chain(&self.parameters)
            .filter_map(|m| m.labels.as_ref()?.get(BOUNDARY_LABEL).cloned())
            .collect()
    }

    /// `boundary`'s admission objects (bindings, then policies) that `keep` does not keep.
    pub fn stale<'a>(
        &'a self,
        installation: &'a str,
        boundary: &'a Name,
        keep: Keep<'a>,
    ) -> (Vec<&'a ObjectMeta>, Vec<&'a ObjectMeta>) {
        let stale = |meta: &&ObjectMeta| is_stale(meta, installation, boundary, keep);
        (
            self.bindings.iter().filter(stale).collect(),
            self.policies.iter().filter(stale).collect(),
        )
    }
}

fn labelled_for(meta: &ObjectMeta, boundary: &Name) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(BOUNDARY_LABEL))
        .is_some_and(|b| b == boundary.as_str())
}

fn is_stale(meta: &ObjectMeta, installation: &str, boundary: &Name, keep: Keep<'_>) -> bool {
    if !is_ours(meta, installation, boundary) {
        return false;
    }
    let kept = |policy: &str| keep.policies.iter().any(|k| k.as_str() == policy);
    if is_switch(meta) && !keep.switch_bindings {
        return true;
    }
    let policy = meta.labels.as_ref().and_then(|l| l.get(POLICY_LABEL));
    if is_version(meta) {
        // Of a kept policy, its write says which versions go (`admission::staged`).
        return !policy.is_some_and(|p| kept(p));
    }
    if is_per_boundary(meta) {
        let held = held_policies(meta.annotations.as_ref());
        return !keep.layouts.contains(&Layout::PerBoundary)
            || held.is_empty()
            || !held.iter().all(|p| kept(p));
    }
    !keep.layouts.contains(&Layout::PerPolicy) || !policy.is_some_and(|p| kept(p))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use palisade_vap::shared::MODE_LABEL;

    use super::*;

    const INSTALLATION: &str = "default";

    fn meta(name: &str, boundary: &str, extra: &[(&str, &str)]) -> ObjectMeta {
        let mut labels = BTreeMap::from([
            (MANAGED_BY_LABEL.to_owned(), "palisade".to_owned()),
            (INSTALLATION_LABEL.to_owned(), INSTALLATION.to_owned()),
            (BOUNDARY_LABEL.to_owned(), boundary.to_owned()),
        ]);
        for (k, v) in extra {
            labels.insert((*k).to_owned(), (*v).to_owned());
        }
        ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        }
    }

    fn name(s: &str) -> Name {
        Name::parse(s).expect("a valid name")
    }

    fn per_boundary(name: &str, boundary: &str, held: &str) -> ObjectMeta {
        let mut meta = meta(name, boundary, &[(MODE_LABEL, "enforce")]);
        meta.annotations = Some(BTreeMap::from([(
            palisade_vap::per_boundary::POLICIES_ANNOTATION.to_owned(),
            held.to_owned(),
        )]));
        meta
    }

    #[test]
    fn layouts_come_from_the_objects_of_the_boundary_only() {
        let installed = Installed {
            policies: vec![
                meta("a", "shop", &[(POLICY_LABEL, "p")]),
                per_boundary("b", "other", "p"),
            ],
            bindings: vec![],
            parameters: vec![meta("c", "other", &[(POLICY_LABEL, "p")])],
            namespaces: vec![],
            ..Default::default()
        };
        assert_eq!(
            installed.layouts(INSTALLATION, &name("shop")),
            BTreeSet::from([Layout::PerPolicy])
        );
        assert_eq!(
            installed.layouts(INSTALLATION, &name("other")),
            BTreeSet::from([Layout::PerBoundary, Layout::Shared])
        );
        assert_eq!(
            installed.boundaries(),
            BTreeSet::from(["shop".to_owned(), "other".to_owned()])
        );
        assert!(installed.layouts("another", &name("shop")).is_empty());
    }

    /// (case, kept policies, kept layouts, switch bindings kept, the names of the stale
    /// policies).
    type Case<'a> = (&'a str, &'a [Name], &'a [Layout], bool, &'a [&'a str]);

    /// Which objects a collection deletes.
    #[test]
    fn stale_objects_table() {
        let installed = Installed {
            policies: vec![
                meta("keep", "shop", &[(POLICY_LABEL, "keep")]),
                meta("gone", "shop", &[(POLICY_LABEL, "gone")]),
                per_boundary("held-kept", "shop", "keep"),
                per_boundary("held-both", "shop", "keep,gone"),
                meta(
                    "switch",
                    "shop",
                    &[
                        (palisade_vap::render::SWITCH_LABEL, "true"),
                        (POLICY_LABEL, "keep"),
                    ],
                ),
                meta("other", "other", &[(POLICY_LABEL, "gone")]),
            ],
            bindings: vec![],
            parameters: vec![],
            namespaces: vec![],
            ..Default::default()
        };
        let keep = [name("keep")];
        let cases: [Case<'_>; 4] = [
            (
                "per-policy kept",
                &keep,
                &[Layout::PerPolicy],
                true,
                &["gone", "held-kept", "held-both"],
            ),
            (
                "per-boundary kept",
                &keep,
                &[Layout::PerBoundary],
                true,
                &["keep", "gone", "held-both", "switch"],
            ),
            (
                "a switch: both kept, switch bindings go",
                &keep,
                &[Layout::PerPolicy, Layout::PerBoundary],
                false,
                &["gone", "held-both", "switch"],
            ),
            (
                "nothing kept",
                &[],
                &[Layout::PerPolicy],
                false,
                &["keep", "gone", "held-kept", "held-both", "switch"],
            ),
        ];
        for (case, policies, layouts, switch_bindings, expected) in cases {
            let keep = Keep {
                policies,
                layouts,
                switch_bindings,
            };
            let shop = name("shop");
            let (_, stale) = installed.stale(INSTALLATION, &shop, keep);
            let names: Vec<&str> = stale.iter().filter_map(|m| m.name.as_deref()).collect();
            assert_eq!(names, expected, "{case}");
        }
    }
}
