//! `palisade test` as users run it: the shared corpus as PolicyTest suites (every case passes,
//! and every case with its verdict turned fails), the exact text, JSON and JUnit reports,
//! exceptions at a fixed time, and bad input named by file, document and field.

use std::path::Path;

use crate::common::{run_in, text};
use palisade_testkit::corpus::{admission_cases, plan_cases};
use serde_json::{json, Value};

fn write(dir: &Path, name: &str, content: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn yaml(documents: &[Value]) -> String {
    documents
        .iter()
        .map(|d| serde_yaml_ng::to_string(d).unwrap())
        .collect::<Vec<_>>()
        .join("---\n")
}

fn test_document(name: &str, policies: &str, cases: Vec<Value>) -> Value {
    json!({
        "apiVersion": "palisade.dev/v1",
        "kind": "PolicyTest",
        "metadata": {"name": name},
        "spec": {"policies": [policies], "cases": cases}
    })
}

/// Asserts that `palisade test` of `what` passed (exit code 0).
fn assert_passed(out: &std::process::Output, what: &str) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{what}: {stdout}{stderr}");
}

/// Writes `policies` as `policies/<count>.yaml`.
fn write_policies<T: serde::Serialize>(dir: &Path, count: usize, policies: &[T]) {
    let policies: Vec<Value> = policies
        .iter()
        .map(|p| serde_json::to_value(p).unwrap())
        .collect();
    write(dir, &format!("policies/{count}.yaml"), &yaml(&policies));
}

/// The corpus as one suite per case: `tests/<n>.yaml` beside `policies/<n>.yaml`. With
/// `turned`, every expected verdict is the opposite of the corpus's.
fn corpus_suites(dir: &Path, turned: bool) -> usize {
    let mut count = 0;
    for case in admission_cases().unwrap() {
        write_policies(dir, count, &case.policies);
        let admitted = case.expect.admitted != turned;
        let mut expect = json!({"verdict": if admitted { "admitted" } else { "denied" }});
        if !turned {
            if let Some(first) = case.expect.denials.first() {
                expect["message"] = json!(first.message);
                expect["policy"] = json!(first.policy);
            }
            let warnings: Vec<&str> = case
                .expect
                .warnings
                .iter()
                .map(|w| w.message.as_str())
                .collect();
            expect["warnings"] = json!(warnings);
        }
        let suite = test_document(
            &format!("admission {}", case.name),
            &format!("../policies/{count}.yaml"),
            vec![json!({"name": case.name, "object": case.object, "expect": expect})],
        );
        write(dir, &format!("tests/{count}.yaml"), &yaml(&[suite]));
        count += 1;
    }
    for case in plan_cases().unwrap() {
        write_policies(dir, count, &case.policies);
        // The API never refuses a function's plan (SPEC 2.2): the corpus's decision is what
        // its warning says.
        let enforced = case.resource_type != "function";
        let allowed = (case.expect.allowed || !enforced) != turned;
        let mut expect = json!({"verdict": if allowed { "allowed" } else { "denied" }});
        if !turned && enforced {
            if let Some(message) = &case.expect.message {
                expect["message"] = json!(message);
            }
            if let Some(policy) = case.expect.denied_by.first() {
                expect["policy"] = json!(policy);
            }
            expect["warnings"] = json!(case.expect.audit_warnings);
        }
        let resource = json!({"type": case.resource_type, "plan": case.plan});
        let suite = test_document(
            &format!("plan {}", case.name),
            &format!("../policies/{count}.yaml"),
            vec![json!({"name": case.name, "resource": resource, "expect": expect})],
        );
        write(dir, &format!("tests/{count}.yaml"), &yaml(&[suite]));
        count += 1;
    }
    count
}

/// Every case of the shared corpus (the one the API server and the rendered CEL are held
/// to) passes as a PolicyTest with its exact verdict, first message, denying policy and
/// warnings; with every verdict turned, every case fails.
#[test]
fn the_corpus_passes_as_policy_tests_and_fails_turned() {
    for turned in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let count = corpus_suites(dir.path(), turned);
        assert!(count > 50, "the corpus has {count} cases");
        let out = run_in(&["test", "-o", "json", "tests"], dir.path());
        let results: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("no JSON ({e}): {}", text(&out.stderr)));
        let results = results.as_array().unwrap();
        assert_eq!(results.len(), count, "{}", text(&out.stderr));
        let passing = results.iter().filter(|r| r["passed"] == true).count();
        if turned {
            assert_eq!(passing, 0, "turned verdicts that passed: {results:#?}");
            assert_eq!(out.status.code(), Some(1));
        } else {
            let failed: Vec<&Value> = results.iter().filter(|r| r["passed"] != true).collect();
            assert!(failed.is_empty(), "failed: {failed:#?}");
            assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        }
    }
}

const POLICIES: &str = "\
apiVersion: palisade.dev/v1
kind: BoundaryPolicy
metadata: {name: owner-label, boundary: shop}
spec:
  rules:
    - requiredLabels: {labels: [{key: team}]}
---
apiVersion: palisade.dev/v1
kind: BoundaryPolicy
metadata: {name: size-limits, boundary: shop}
spec:
  rules:
    - allowedComputePlans: {plans: [small, medium]}
";

const MANIFESTS: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {team: shop}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, team: shop}}
    spec: {containers: [{name: web, image: 'ghcr.io/acme/web:1.4'}]}
---
apiVersion: v1
kind: Pod
metadata: {name: stray}
spec: {containers: [{name: app, image: 'ghcr.io/acme/web:1.4'}]}
";

const SUITE: &str = "\
apiVersion: palisade.dev/v1
kind: PolicyTest
metadata: {name: shop}
spec:
  policies: [../policies/]
  cases:
    - name: the labelled Deployment is admitted
      file: ../manifests/web.yaml
      expect: {verdict: admitted}
    - name: an unlabelled pod is denied
      file: ../manifests/web.yaml
      document: 1
      expect:
        verdict: denied
        policy: owner-label
        message: \"Policy 'owner-label' (RequiredLabels) requires the label team.\"
    - name: a large app is refused
      resource: {type: app, name: web, plan: large}
      expect:
        verdict: denied
        message: \"Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium.\"
    - name: a wrong expectation
      resource: {type: app, plan: large}
      expect: {verdict: allowed}
";

fn shop(dir: &Path) {
    write(dir, "policies/shop.yaml", POLICIES);
    write(dir, "manifests/web.yaml", MANIFESTS);
    write(dir, "tests/shop.yaml", SUITE);
    // Not a test: skipped without being read as one.
    write(dir, "tests/notes.yaml", "just: a note\n");
}

#[test]
fn the_text_report_names_each_case_and_what_a_failing_one_got() {
    let dir = tempfile::tempdir().unwrap();
    shop(dir.path());
    let out = run_in(&["test", "tests"], dir.path());
    assert_eq!(
        text(&out.stdout),
        "\
PASS  shop / the labelled Deployment is admitted
PASS  shop / an unlabelled pod is denied
PASS  shop / a large app is refused
FAIL  shop / a wrong expectation
      tests/shop.yaml:0 /spec/cases/3
      expected admitted, got denied
      got: denied by policy 'size-limits': Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium.
4 cases in 1 test: 3 passed, 1 failed
"
    );
    assert_eq!(text(&out.stderr), "");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn the_junit_report_is_xml_with_one_testcase_per_case() {
    let dir = tempfile::tempdir().unwrap();
    shop(dir.path());
    let out = run_in(&["test", "-o", "junit", "tests"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let xml = text(&out.stdout);
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"palisade test\" tests=\"4\" failures=\"1\" errors=\"0\" time=\""), "{xml}");
    // Well-formed, and read back: four test cases, one failure with the message escaped.
    let mut reader = quick_xml::Reader::from_str(&xml);
    let (mut cases, mut failures) = (Vec::new(), Vec::new());
    loop {
        match reader.read_event().unwrap() {
            quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e) => {
                let attribute = |name: &str| {
                    e.try_get_attribute(name).unwrap().map(|a| {
                        a.normalized_value(quick_xml::XmlVersion::default())
                            .unwrap()
                            .into_owned()
                    })
                };
                match e.name().0 {
                    "testcase" => cases.push((attribute("classname"), attribute("name"))),
                    "failure" => failures.push(attribute("message")),
                    _ => {}
                }
            }
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(cases.len(), 4);
    assert_eq!(
        cases[1],
        (
            Some("shop".into()),
            Some("an unlabelled pod is denied".into())
        )
    );
    assert_eq!(failures, [Some("expected admitted, got denied".to_owned())]);
    assert!(
        xml.contains("denied by policy &apos;size-limits&apos;")
            || xml.contains("denied by policy 'size-limits'")
    );
}

#[test]
fn exceptions_are_judged_at_the_test_s_time() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "policies/shop.yaml", POLICIES);
    write(
        dir.path(),
        "exceptions.yaml",
        "\
apiVersion: palisade.dev/v1
kind: BoundaryException
metadata: {name: big-web, boundary: shop}
spec:
  policy: size-limits
  resources: [app/web]
  plans: [large]
  expiresAt: 2027-03-01T00:00:00Z
  reason: migration
",
    );
    let suite = |at: &str, verdict: &str, excepted: bool| {
        let mut expect = json!({"verdict": verdict});
        if excepted {
            expect["exceptedBy"] = json!("big-web");
        }
        let mut document = test_document(
            "big web",
            "policies/",
            vec![
                json!({"name": "web on large", "resource": {"type": "app", "name": "web", "plan": "large"}, "expect": expect}),
            ],
        );
        document["spec"]["exceptions"] = json!(["exceptions.yaml"]);
        document["spec"]["at"] = json!(at);
        yaml(&[document])
    };
    write(
        dir.path(),
        "before.yaml",
        &suite("2027-02-01T00:00:00Z", "allowed", true),
    );
    write(
        dir.path(),
        "after.yaml",
        &suite("2027-03-02T00:00:00Z", "denied", false),
    );
    for file in ["before.yaml", "after.yaml"] {
        let out = run_in(&["test", file], dir.path());
        assert_passed(&out, file);
    }
    // Expecting the exception after it expired fails, naming what was got.
    write(
        dir.path(),
        "late.yaml",
        &suite("2027-03-02T00:00:00Z", "allowed", true),
    );
    let out = run_in(&["test", "late.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("      expected admitted, got denied\n      expected to be let past by exception 'big-web'\n"), "{stdout}");
}

/// Bad input is exit 2, named by file, document and field; the valid tests still run.
#[test]
fn bad_input_names_the_file_the_document_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    shop(dir.path());
    let cases: [(&str, &str); 7] = [
        (
            "cases: [{name: a, resource: {type: app, plan: small}, expect: {verdict: admitted}, object: {kind: Pod}}]",
            "bad.yaml:0: /spec/cases/0: give exactly one of object, file or resource",
        ),
        (
            "cases: [{name: a, resource: {type: app, plan: small}, expekt: {verdict: admitted}}]",
            "bad.yaml:0: /spec/cases/0/expekt: is not a known field; the fields are name, object, file, document, resource, expect",
        ),
        (
            "cases: [{name: a, resource: {type: app, plan: small}, expect: {verdict: passes}}]",
            "bad.yaml:0: /spec/cases/0/expect/verdict:",
        ),
        (
            "cases: [{name: a, resource: {type: app, plan: huge}, expect: {verdict: denied}}]",
            "bad.yaml:0: /spec/cases/0/resource/plan:",
        ),
        (
            "cases: [{name: a, file: ../manifests/web.yaml, document: 5, expect: {verdict: denied}}]",
            "bad.yaml:0: /spec/cases/0/document: ../manifests/web.yaml has 2 documents, there is no document 5",
        ),
        (
            "cases: [{name: a, object: {apiVersion: v1, kind: Pod, metadata: {name: 5}}, expect: {verdict: denied}}]",
            "bad.yaml:0: /spec/cases/0/object/metadata/name:",
        ),
        (
            "cases: [{name: a, resource: {type: app, plan: small}, expect: {verdict: admitted, message: x}}]",
            "bad.yaml:0: /spec/cases/0/expect/message: only a denial has a message",
        ),
    ];
    for (spec, expected) in cases {
        write(
            dir.path(),
            "tests/bad.yaml",
            &format!(
                "apiVersion: palisade.dev/v1\nkind: PolicyTest\nmetadata: {{name: bad}}\nspec:\n  policies: [../policies/]\n  {spec}\n"
            ),
        );
        let out = run_in(&["test", "tests/bad.yaml", "tests/shop.yaml"], dir.path());
        let stderr = text(&out.stderr);
        assert!(
            stderr.starts_with(&format!("error: tests/{expected}")),
            "{spec}\n{stderr}"
        );
        assert_eq!(out.status.code(), Some(2), "{spec}");
        // The valid suite still ran.
        assert!(text(&out.stdout).contains("PASS  shop / a large app is refused"));
    }
    let out = run_in(&["test", "policies"], dir.path());
    assert_eq!(
        text(&out.stderr),
        "error: no PolicyTest document in policies (a document whose kind is PolicyTest)\n"
    );
    assert_eq!(out.status.code(), Some(2));
    write(
        dir.path(),
        "missing.yaml",
        &yaml(&[test_document(
            "m",
            "nowhere/",
            vec![
                json!({"name": "a", "resource": {"type": "app", "plan": "small"}, "expect": {"verdict": "allowed"}}),
            ],
        )]),
    );
    let out = run_in(&["test", "missing.yaml"], dir.path());
    assert!(
        text(&out.stderr).starts_with("error: missing.yaml:0: /spec/policies: nowhere/"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2));
}

/// The README's example suite passes against the example policies and manifests.
#[test]
fn the_example_suite_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = run_in(&["test", "examples/tests"], &root);
    assert_passed(&out, "examples/tests");
    assert!(
        text(&out.stdout).ends_with("6 cases in 1 test: 6 passed, 0 failed\n"),
        "{}",
        text(&out.stdout)
    );
}
