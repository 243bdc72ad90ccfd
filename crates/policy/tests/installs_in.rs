//! Which clusters a policy is installed in (SPEC 3.4): the one answer the reconciler, the
//! policy statuses and the preview share.

#![allow(clippy::unwrap_used, reason = "a test fails loudly on bad fixtures")]

use palisade_policy::{Mode, Name, PlanEntry, Policy, Rule, Scope};

fn name(text: &str) -> Name {
    Name::parse(text).unwrap()
}

#[test]
fn a_policy_installs_where_its_scope_reaches_and_only_with_admission_rules() {
    let latest = || vec![Rule::DisallowLatestTag];
    let plans =
        || vec![Rule::allowed_compute_plans(vec![PlanEntry::parse("small").unwrap()]).unwrap()];
    let only_prod = || Scope::Clusters(vec![name("prod")]);
    // (rules, mode, scope, cluster, installed)
    let cases: Vec<(Vec<Rule>, Mode, Scope, &str, bool)> = vec![
        (latest(), Mode::Enforce, Scope::AllClusters, "prod", true),
        (latest(), Mode::Audit, Scope::AllClusters, "dev", true),
        (latest(), Mode::Enforce, only_prod(), "prod", true),
        (latest(), Mode::Enforce, only_prod(), "dev", false),
        (plans(), Mode::Enforce, Scope::AllClusters, "prod", false),
        (plans(), Mode::Enforce, only_prod(), "prod", false),
    ];
    for (rules, mode, scope, cluster, installed) in cases {
        let what = format!("{rules:?} {mode:?} {scope:?} in {cluster}");
        let policy = Policy::new(name("p"), mode, scope, rules).unwrap();
        assert_eq!(policy.installs_in(&name(cluster)), installed, "{what}");
    }
}
