//! The per-boundary layout's rendering: which object holds which policy, at most 5 per object,
//! each policy's validation exactly as the per-policy layout renders it, variables once.

use palisade_policy::{Mode, Name, Policy};
use palisade_vap::per_boundary::{
    boundary_object_name, held_policies, object_holding, render_boundary, POLICIES_PER_OBJECT,
};
use palisade_vap::render;
use proptest::prelude::*;
use serde_json::json;

/// Policy `p<n>` in `mode`, with admission rules unless `plans_only`.
fn policy(n: usize, mode: Mode, plans_only: bool) -> Policy {
    let rules = if plans_only {
        json!([{"allowedComputePlans": {"plans": ["small"]}}])
    } else {
        json!([{"requiredLabels": {"labels": [{"key": format!("l{n}")}]}}])
    };
    palisade_testkit::corpus::policy(
        &format!("p{n}"),
        "shop",
        json!({"mode": mode.as_str(), "rules": rules}),
    )
}

fn shop() -> Name {
    Name::parse("shop").unwrap()
}

#[test]
fn policies_are_grouped_by_mode_in_order_five_per_object() {
    // (enforce-mode policies, audit-mode policies) → (object name, policies held).
    type Case<'a> = (usize, usize, &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        (0, 0, &[]),
        (1, 0, &[("enforce-1.shop.boundary.palisade.dev", "p0")]),
        (
            5,
            1,
            &[
                ("enforce-1.shop.boundary.palisade.dev", "p0,p1,p2,p3,p4"),
                ("audit-1.shop.boundary.palisade.dev", "p5"),
            ],
        ),
        (
            6,
            0,
            &[
                ("enforce-1.shop.boundary.palisade.dev", "p0,p1,p2,p3,p4"),
                ("enforce-2.shop.boundary.palisade.dev", "p5"),
            ],
        ),
        (
            0,
            11,
            &[
                ("audit-1.shop.boundary.palisade.dev", "p0,p1,p2,p3,p4"),
                ("audit-2.shop.boundary.palisade.dev", "p5,p6,p7,p8,p9"),
                ("audit-3.shop.boundary.palisade.dev", "p10"),
            ],
        ),
    ];
    for (enforce, audit, expected) in cases {
        let policies: Vec<Policy> = (0..enforce + audit)
            .map(|n| {
                policy(
                    n,
                    if n < *enforce {
                        Mode::Enforce
                    } else {
                        Mode::Audit
                    },
                    false,
                )
            })
            .collect();
        let objects = render_boundary(&shop(), &policies, "3f2a9c1e");
        let found: Vec<(String, String)> = objects
            .iter()
            .map(|o| {
                (
                    o.rendered.policy.metadata.name.clone().unwrap(),
                    held_policies(o.rendered.policy.metadata.annotations.as_ref()).join(","),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(n, h)| ((*n).to_owned(), (*h).to_owned()))
            .collect();
        assert_eq!(found, expected, "{enforce} enforce, {audit} audit");
    }
}

#[test]
fn each_validation_is_the_per_policy_one_and_the_binding_names_its_object() {
    let policies: Vec<Policy> = (0..3).map(|n| policy(n, Mode::Enforce, false)).collect();
    let objects = render_boundary(&shop(), &policies, "3f2a9c1e");
    assert_eq!(objects.len(), 1);
    let object = &objects[0].rendered;
    let spec = object.policy.spec.as_ref().unwrap();
    let own: Vec<_> = policies
        .iter()
        .map(|p| {
            render(&shop(), p, "3f2a9c1e")
                .unwrap()
                .policy
                .spec
                .unwrap()
                .validations
                .unwrap()[0]
                .clone()
        })
        .collect();
    assert_eq!(spec.validations.as_ref().unwrap(), &own);
    let variables: Vec<&str> = spec
        .variables
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(variables, ["podSpec", "images"]);
    assert_eq!(
        spec.match_conditions.as_ref().unwrap().len(),
        palisade_vap::MATCH_CONDITIONS.len()
    );
    let binding = object.binding.spec.as_ref().unwrap();
    assert_eq!(
        binding.policy_name.as_deref(),
        Some("enforce-1.shop.boundary.palisade.dev")
    );
    assert_eq!(
        binding.validation_actions.as_deref(),
        Some(&["Deny".to_owned()][..])
    );
    let labels = object.policy.metadata.labels.as_ref().unwrap();
    assert_eq!(
        labels.get("palisade.dev/mode").map(String::as_str),
        Some("enforce")
    );
    assert!(!labels.contains_key("palisade.dev/policy"));
    assert_eq!(object.binding.metadata, object.policy.metadata);
}

#[test]
fn audit_mode_objects_warn_and_audit() {
    let objects = render_boundary(&shop(), &[policy(0, Mode::Audit, false)], "i");
    assert_eq!(
        objects[0]
            .rendered
            .binding
            .spec
            .as_ref()
            .unwrap()
            .validation_actions
            .as_deref(),
        Some(&["Warn".to_owned(), "Audit".to_owned()][..])
    );
}

proptest! {
    /// Every policy with admission rules is in exactly one object, the one `object_holding`
    /// names; no object holds more than 5; policies without admission rules are in none.
    #[test]
    fn every_policy_is_held_once_where_object_holding_says(
        kinds in prop::collection::vec((any::<bool>(), any::<bool>()), 0..23)
    ) {
        let policies: Vec<Policy> = kinds
            .iter()
            .enumerate()
            .map(|(n, (audit, plans_only))| {
                policy(n, if *audit { Mode::Audit } else { Mode::Enforce }, *plans_only)
            })
            .collect();
        let objects = render_boundary(&shop(), &policies, "i");
        for object in &objects {
            prop_assert!(!object.policies.is_empty() && object.policies.len() <= POLICIES_PER_OBJECT);
            let validations = object.rendered.policy.spec.as_ref().unwrap().validations.as_ref().unwrap();
            prop_assert_eq!(validations.len(), object.policies.len());
        }
        for (n, (_, plans_only)) in kinds.iter().enumerate() {
            let name = Name::parse(&format!("p{n}")).unwrap();
            let holders: Vec<String> = objects
                .iter()
                .filter(|o| o.policies.contains(&name))
                .map(|o| o.rendered.policy.metadata.name.clone().unwrap())
                .collect();
            let holding = object_holding(&shop(), &policies, &name);
            if *plans_only {
                prop_assert!(holders.is_empty());
                prop_assert_eq!(holding, None);
            } else {
                prop_assert_eq!(holders.len(), 1);
                prop_assert_eq!(holding.as_ref(), holders.first());
            }
        }
    }
}

#[test]
fn object_names_never_meet_per_policy_names() {
    // A per-policy name has three dot-separated parts before `palisade.dev`'s two; a
    // per-boundary name four.
    let name = boundary_object_name(&shop(), Mode::Enforce, 1);
    assert_eq!(name.split('.').count(), 5);
    assert_eq!(
        palisade_vap::object_name(&shop(), &Name::parse("enforce-1").unwrap())
            .split('.')
            .count(),
        4
    );
}
