//! Side-by-side benchmarks (figures in docs/benchmarks.md):
//! - the compute-plan decision with 1, 10 and 100 applied policies, made on the spot and
//!   looked up among decisions made beforehand (`CompiledPlans`), against the same decision
//!   written as Cedar policies and evaluated by `cedar-policy`;
//! - admission evaluation of a Deployment with 5 containers under 3 policies, against the
//!   `cel` crate evaluating the rendered CEL on the same object.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark fixtures"
)]

use std::hint::black_box;
use std::str::FromStr;

use cedar_policy::{
    Authorizer, Context, Entities, EntityUid, PolicySet, Request, RestrictedExpression,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use palisade_policy::admission::{evaluate, AdmissionObject, AdmissionRequest};
use palisade_policy::{compute_plan, Catalog, PlanName, Policy, ResourceType};
use palisade_testkit::cel_eval::{request_for, to_cel, CompiledPolicy};
use palisade_testkit::corpus::policy;
use palisade_vap::PolicyCel;

const PLAN_SETS: [&[&str]; 4] = [
    &["small", "medium", "large", "valkey/small"],
    &["small", "medium", "postgresql/memory-optimized"],
    &["small", "medium", "xlarge", "qdrant/large"],
    &["small", "medium", "large", "app/xlarge"],
];

fn plan_policy(index: usize) -> (Policy, &'static [&'static str]) {
    let plans = PLAN_SETS[index % PLAN_SETS.len()];
    let spec = serde_json::json!({"rules": [{"allowedComputePlans": {"plans": plans}}]});
    (policy(&format!("p-{index:03}"), "shop", spec), plans)
}

/// The same rule as Cedar: one `forbid` per palisade policy, holding when the policy speaks
/// about the type and does not name the plan; one `permit` for everything else.
fn cedar_policy_text(index: usize, plans: &[&str]) -> String {
    let mut conditions = Vec::new();
    for ty in ResourceType::ALL.into_iter().filter(|t| t.has_plans()) {
        let named: Vec<String> = plans
            .iter()
            .filter_map(|entry| match entry.split_once('/') {
                None => Some(format!("\"{entry}\"")),
                Some((t, plan)) if t == ty.as_str() => Some(format!("\"{plan}\"")),
                Some(_) => None,
            })
            .collect();
        if !named.is_empty() {
            conditions.push(format!(
                "(context.type == \"{ty}\" && !([{}].contains(context.plan)))",
                named.join(", ")
            ));
        }
    }
    format!(
        "@id(\"p-{index:03}\")\nforbid(principal, action == Action::\"create\", resource) when {{ {} }};\n",
        conditions.join(" || ")
    )
}

fn plan_decisions(c: &mut Criterion) {
    let catalog = Catalog::builtin();
    let plan = PlanName::parse("large").unwrap();
    let mut group = c.benchmark_group("plan_decision");
    for count in [1usize, 10, 100] {
        let (policies, texts): (Vec<Policy>, Vec<String>) = (0..count)
            .map(|i| {
                let (policy, plans) = plan_policy(i);
                (policy, cedar_policy_text(i, plans))
            })
            .unzip();
        group.bench_with_input(
            BenchmarkId::new("palisade", count),
            &policies,
            |b, policies| {
                b.iter(|| {
                    compute_plan::decide(
                        black_box(policies),
                        &catalog,
                        ResourceType::App,
                        black_box(&plan),
                    )
                    .unwrap()
                })
            },
        );
        // The decision made beforehand (when the policies change), as a create looks it up.
        let compiled = compute_plan::CompiledPlans::new(&policies, &catalog);
        group.bench_with_input(
            BenchmarkId::new("palisade_compiled", count),
            &compiled,
            |b, compiled| {
                b.iter(|| {
                    compiled
                        .decide(ResourceType::App, black_box(&plan))
                        .unwrap()
                        .allowed
                })
            },
        );
        let set = PolicySet::from_str(&format!(
            "permit(principal, action, resource);\n{}",
            texts.concat()
        ))
        .unwrap();
        let authorizer = Authorizer::new();
        let entities = Entities::empty();
        let principal = EntityUid::from_str("User::\"alice\"").unwrap();
        let action = EntityUid::from_str("Action::\"create\"").unwrap();
        let resource = EntityUid::from_str("Resource::\"web\"").unwrap();
        // Sanity: Cedar and palisade agree on this decision.
        let palisade_allows = compute_plan::decide(&policies, &catalog, ResourceType::App, &plan)
            .unwrap()
            .allowed;
        group.bench_with_input(BenchmarkId::new("cedar", count), &set, |b, set| {
            b.iter(|| {
                let context = Context::from_pairs([
                    (
                        "type".to_owned(),
                        RestrictedExpression::new_string("app".to_owned()),
                    ),
                    (
                        "plan".to_owned(),
                        RestrictedExpression::new_string(black_box("large").to_owned()),
                    ),
                ])
                .unwrap();
                let request = Request::new(
                    principal.clone(),
                    action.clone(),
                    resource.clone(),
                    context,
                    None,
                )
                .unwrap();
                let response = authorizer.is_authorized(&request, set, &entities);
                assert_eq!(
                    response.decision() == cedar_policy::Decision::Allow,
                    palisade_allows
                );
                response
            })
        });
    }
    group.finish();
}

fn deployment() -> serde_json::Value {
    let containers: Vec<_> = (0..5)
        .map(|i| serde_json::json!({"name": format!("c{i}"), "image": format!("ghcr.io/acme/service-{i}:1.{i}.0")}))
        .collect();
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"team": "web", "app.kubernetes.io/name": "web", "owner": "alice"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": containers}}}
    })
}

fn admission_policies() -> Vec<Policy> {
    let specs = [
        serde_json::json!({"rules": [{"requiredLabels": {"labels": [{"key": "team", "value": "web"}, {"key": "app.kubernetes.io/name"}]}}]}),
        serde_json::json!({"rules": [{"allowedRegistries": {"registries": ["docker.io/library", "ghcr.io/acme"]}}]}),
        serde_json::json!({"rules": [{"disallowLatestTag": {}}]}),
    ];
    specs
        .into_iter()
        .enumerate()
        .map(|(i, spec)| policy(&format!("a-{i}"), "shop", spec))
        .collect()
}

fn admission(c: &mut Criterion) {
    let json = deployment();
    let policies = admission_policies();
    let request = AdmissionRequest::default();
    let mut group = c.benchmark_group("admission_deployment_5_containers_3_policies");
    group.bench_function("palisade_parse_and_evaluate", |b| {
        b.iter(|| {
            let object = AdmissionObject::from_json(black_box(&json)).unwrap();
            let verdict = evaluate(&policies, &object, &request);
            assert!(verdict.admitted());
            verdict
        })
    });
    let compiled: Vec<CompiledPolicy> = policies
        .iter()
        .map(|p| CompiledPolicy::new(&PolicyCel::of(p).unwrap()).unwrap())
        .collect();
    let object = to_cel(&json).unwrap();
    let cel_request = to_cel(&request_for(&json, "CREATE", "alice")).unwrap();
    group.bench_function("cel_crate_rendered_cel", |b| {
        b.iter(|| {
            for policy in &compiled {
                let outcome = policy.evaluate(black_box(&object), &cel_request).unwrap();
                assert_eq!(outcome, palisade_testkit::cel_eval::CelOutcome::Admitted);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, plan_decisions, admission);
criterion_main!(benches);
