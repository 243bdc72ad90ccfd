//! Property tests: for generated images and label maps, the Rust evaluator and the rendered CEL
//! give the same verdict and the same message.

use palisade_policy::admission::{first_violation, AdmissionObject};
use palisade_testkit::cel_eval::{request_for, to_cel, CelOutcome, CompiledPolicy};
use palisade_testkit::generated::{image, labels, pod, policies};
use palisade_vap::PolicyCel;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn rust_and_cel_agree(
        images in proptest::collection::vec(image(), 1..4),
        init in proptest::collection::vec(image(), 0..3),
        labels in labels(),
    ) {
        let json = pod(&images, &init, &labels);
        let object = AdmissionObject::from_json(&json).unwrap();
        let cel_object = to_cel(&json).unwrap();
        let request = to_cel(&request_for(&json, "CREATE", "alice")).unwrap();
        for policy in policies() {
            let rust = first_violation(&policy, &object).map(|d| d.message);
            let compiled = CompiledPolicy::new(&PolicyCel::of(&policy).unwrap()).unwrap();
            let cel = match compiled.evaluate(&cel_object, &request).unwrap() {
                CelOutcome::Denied(message) => Some(message),
                CelOutcome::Admitted | CelOutcome::NotMatched => None,
            };
            prop_assert_eq!(rust, cel, "policy {} on {}", policy.name(), json);
        }
    }
}

/// An exception of `policy` from generated parts (SPEC 7).
fn exception(
    policy: &palisade_policy::Policy,
    rules: &[palisade_policy::RuleKind],
    namespaces: &[&str],
    labels: &std::collections::BTreeMap<String, String>,
    images: &[String],
) -> palisade_policy::Exception {
    use palisade_policy::label::{LabelKey, LabelValue};
    use palisade_policy::{Exception, Name, ObjectMatch};
    Exception {
        name: Name::parse("legacy").unwrap(),
        policy: policy.name().clone(),
        rules: rules.iter().copied().collect(),
        object_match: Some(ObjectMatch {
            clusters: vec![],
            namespaces: namespaces.iter().map(|n| Name::parse(n).unwrap()).collect(),
            labels: labels
                .iter()
                .filter_map(|(k, v)| Some((LabelKey::parse(k).ok()?, LabelValue::parse(v).ok()?)))
                .collect(),
            images: images.to_vec(),
        }),
        resources: vec![],
        plans: vec![],
        expires_at: "2099-01-01T00:00:00.000Z".into(),
        reason: "r".into(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// With an exception (every rule or some; some namespaces; some of the object's labels or
    /// others; some of its images or none), Rust and the CEL the API server runs agree on the
    /// verdict and the message.
    #[test]
    fn rust_and_cel_agree_with_exceptions(
        images in proptest::collection::vec(image(), 1..4),
        init in proptest::collection::vec(image(), 0..2),
        labels in labels(),
        excepted_labels in labels(),
        namespace in prop_oneof![Just("web"), Just("api")],
        namespaces in prop_oneof![Just(vec![]), Just(vec!["web"]), Just(vec!["api", "db"])],
        rules in prop_oneof![
            Just(vec![]),
            Just(vec![palisade_policy::RuleKind::RequiredLabels]),
            Just(vec![palisade_policy::RuleKind::AllowedRegistries, palisade_policy::RuleKind::DisallowLatestTag]),
        ],
        listed in proptest::collection::vec(any::<bool>(), 4),
        other_image in image(),
    ) {
        let mut json = pod(&images, &init, &labels);
        json["metadata"]["namespace"] = serde_json::json!(namespace);
        let object = AdmissionObject::from_json(&json).unwrap();
        let cel_object = to_cel(&json).unwrap();
        let mut request = request_for(&json, "CREATE", "alice");
        request["namespace"] = serde_json::json!(namespace);
        let request_cel = to_cel(&request).unwrap();
        // Some of the object's images, and sometimes one it does not run.
        let mut excepted_images: Vec<String> = images
            .iter()
            .chain(&init)
            .zip(&listed)
            .filter(|(_, keep)| **keep)
            .map(|(i, _)| i.clone())
            .collect();
        if listed[3] {
            excepted_images.push(other_image.clone());
        }
        // The labels matched: the object's own, or generated others.
        let matched_labels = if listed[0] { labels.clone() } else { excepted_labels.clone() };
        for policy in policies() {
            let x = exception(&policy, &rules, &namespaces, &matched_labels, &excepted_images);
            let (rust, _) = palisade_policy::admission::first_violation_excepted(
                &policy,
                &object,
                &palisade_policy::AdmissionRequest::default(),
                &[&x],
            );
            let compiled = CompiledPolicy::new(&PolicyCel::excepted(&policy, &[&x]).unwrap()).unwrap();
            let cel = match compiled.evaluate(&cel_object, &request_cel).unwrap() {
                CelOutcome::Denied(message) => Some(message),
                CelOutcome::Admitted | CelOutcome::NotMatched => None,
            };
            prop_assert_eq!(rust.map(|d| d.message), cel, "policy {} on {} with {:?}", policy.name(), json, x);
        }
    }
}

/// One matched object: the listed image passes, an unlisted one is denied with the usual
/// message naming it; the same object in another namespace is denied as before.
#[test]
fn an_exception_lets_exactly_its_images_past() {
    let policy = palisade_testkit::corpus::policy(
        "no-latest",
        "shop",
        serde_json::json!({"rules": [{"disallowLatestTag": {}}]}),
    );
    let labels = std::collections::BTreeMap::from([("app".to_owned(), "legacy".to_owned())]);
    let x = exception(
        &policy,
        &[],
        &["web"],
        &labels,
        &["nginx:latest".to_owned()],
    );
    let compiled = CompiledPolicy::new(&PolicyCel::excepted(&policy, &[&x]).unwrap()).unwrap();
    let cases = [
        ("web", vec!["nginx:latest".to_owned()], None),
        (
            "web",
            vec!["nginx:latest".to_owned(), "busybox:latest".to_owned()],
            Some("busybox:latest"),
        ),
        ("api", vec!["nginx:latest".to_owned()], Some("nginx:latest")),
    ];
    for (namespace, images, denied) in cases {
        let mut json = pod(&images, &[], &labels);
        json["metadata"]["namespace"] = serde_json::json!(namespace);
        let mut request = request_for(&json, "CREATE", "alice");
        request["namespace"] = serde_json::json!(namespace);
        let object = AdmissionObject::from_json(&json).unwrap();
        let (rust, used) = palisade_policy::admission::first_violation_excepted(
            &policy,
            &object,
            &palisade_policy::AdmissionRequest::default(),
            &[&x],
        );
        let cel = match compiled
            .evaluate(&to_cel(&json).unwrap(), &to_cel(&request).unwrap())
            .unwrap()
        {
            CelOutcome::Denied(message) => Some(message),
            CelOutcome::Admitted | CelOutcome::NotMatched => None,
        };
        let expected =
            denied.map(|image| palisade_policy::message::image_latest(policy.name(), image));
        assert_eq!(rust.map(|d| d.message), expected, "{namespace} {images:?}");
        assert_eq!(cel, expected, "{namespace} {images:?}");
        assert_eq!(
            used.len(),
            usize::from(namespace == "web"),
            "{namespace} {images:?}"
        );
    }
}
