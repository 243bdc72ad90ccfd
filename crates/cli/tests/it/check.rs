//! `palisade check` as users run it: the corpus through the binary, output formats, exit codes
//! and bad input.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{assert_exit, assert_stderr_contains, output_with_stdin, run_in, text, BIN};
use palisade_testkit::corpus::{
    plan_cases, AdmissionCase, AdmissionHarness, Finding, Reports, Verdict,
};

/// The findings of one object of `palisade check -o json`: `denials` (with their rule) or
/// `warnings` (the output names no rule for them).
fn findings(object: &serde_json::Value, key: &str) -> Result<Vec<Finding>, String> {
    let field = |item: &serde_json::Value, name: &str| {
        item[name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{key} without a {name}: {object}"))
    };
    object[key]
        .as_array()
        .ok_or_else(|| format!("no {key} in {object}"))?
        .iter()
        .map(|item| {
            Ok(Finding {
                policy: field(item, "policy")?,
                rule: match key {
                    "denials" => Some(field(item, "rule")?),
                    _ => None,
                },
                message: field(item, "message")?,
            })
        })
        .collect()
}

/// One case through `palisade check -p policies.yaml -o json manifest.yaml`.
fn check(dir: &Path, case: &AdmissionCase) -> Result<Verdict, String> {
    let docs: Vec<String> = case
        .policies
        .iter()
        .map(|p| serde_yaml_ng::to_string(p).unwrap())
        .collect();
    std::fs::write(dir.join("policies.yaml"), docs.join("---\n")).unwrap();
    let manifest = serde_yaml_ng::to_string(&case.object).unwrap();
    std::fs::write(dir.join("manifest.yaml"), manifest).unwrap();
    let args = [
        "check",
        "-p",
        "policies.yaml",
        "-o",
        "json",
        "manifest.yaml",
    ];
    let out = run_in(&args, dir);
    let parsed: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("no JSON ({e}): {}", text(&out.stderr)))?;
    let object = &parsed[0];
    let verdict = Verdict {
        checked: Some(
            object["checked"]
                .as_bool()
                .ok_or_else(|| format!("no checked in {object}"))?,
        ),
        admitted: object["admitted"]
            .as_bool()
            .ok_or_else(|| format!("no admitted in {object}"))?,
        denials: findings(object, "denials")?,
        warnings: findings(object, "warnings")?,
    };
    // The exit code agrees with the verdict: 0 admitted, 1 denied.
    let want_code = if verdict.admitted { 0 } else { 1 };
    if out.status.code() != Some(want_code) {
        return Err(format!("exit {:?} with {object}", out.status.code()));
    }
    Ok(verdict)
}

#[test]
fn corpus_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    AdmissionHarness::new("palisade check", Reports::InOrder).run(|case| check(dir.path(), case));
}

#[test]
fn plan_corpus_through_check_plan() {
    let dir = tempfile::tempdir().unwrap();
    for case in plan_cases().unwrap() {
        let policies = dir.path().join("p.yaml");
        let docs: Vec<String> = case
            .policies
            .iter()
            .map(|p| serde_yaml_ng::to_string(p).unwrap())
            .collect();
        std::fs::write(&policies, docs.join("---\n")).unwrap();
        let mut args = vec!["check"];
        if !case.policies.is_empty() {
            args.extend(["-p", "p.yaml"]);
        }
        args.extend(["plan", "--type", &case.resource_type, "--plan", &case.plan]);
        let out = run_in(&args, dir.path());
        // SPEC 2.2: a function is created whatever its plan; the decision is a warning.
        let enforced = case.resource_type != "function";
        let want = case
            .expect
            .message
            .clone()
            .filter(|_| enforced)
            .unwrap_or_else(|| "allowed".into());
        assert_eq!(text(&out.stdout), format!("{want}\n"), "{}", case.name);
        assert_eq!(
            out.status.code(),
            Some(if case.expect.allowed || !enforced {
                0
            } else {
                1
            }),
            "{}",
            case.name
        );
        if !case.expect.allowed && !enforced {
            let policies: Vec<String> = case
                .expect
                .denied_by
                .iter()
                .map(|p| format!("'{p}'"))
                .collect();
            let noun = if policies.len() == 1 {
                "policy"
            } else {
                "policies"
            };
            assert!(
                text(&out.stderr).contains(&format!(
                    "warning: Compute plan '{}' is disallowed by boundary {noun} {}; plans of functions are not enforced\n",
                    case.plan,
                    policies.join(", ")
                )),
                "{}: {}",
                case.name,
                text(&out.stderr)
            );
        }
        for warning in &case.expect.audit_warnings {
            assert!(
                text(&out.stderr).contains(&format!("warning: {warning}\n")),
                "{}",
                case.name
            );
        }
    }
}

const POLICY: &str = "apiVersion: palisade.dev/v1
kind: BoundaryPolicy
metadata: {name: no-latest, boundary: shop}
spec:
  rules:
    - disallowLatestTag: {}
";

const MANIFESTS: &str = "apiVersion: v1
kind: Pod
metadata: {name: ok}
spec: {containers: [{name: a, image: nginx:1.27}]}
---
apiVersion: v1
kind: List
items:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web}
    spec:
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec: {containers: [{name: a, image: nginx}]}
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: settings}
";

fn write(dir: &Path, name: &str, content: &str) {
    std::fs::write(dir.join(name), content).unwrap();
}

#[test]
fn text_output_is_one_line_per_denial() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "policy.yaml", POLICY);
    write(dir.path(), "app.yaml", MANIFESTS);
    let out = run_in(&["check", "-p", "policy.yaml", "app.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "app.yaml:1 Deployment/web: Policy 'no-latest' (DisallowLatestTag) denied image nginx: it is tagged latest or carries no tag.\n"
    );
    let out = run_in(
        &["check", "-p", "policy.yaml", "-o", "json", "app.yaml"],
        dir.path(),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 3);
    assert_eq!(json[2]["kind"], "ConfigMap");
    assert_eq!(json[2]["checked"], false);
    assert_eq!(json[2]["admitted"], true);
}

/// `-o sarif`: one SARIF 2.1.0 log; each denial an error located at the first line of its
/// object's document, with the policy and rule as its rule; an audit warning a warning; the exit
/// code as for the text output.
#[test]
fn sarif_output_locates_each_denial_for_code_scanning() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "policy.yaml", POLICY);
    write(
        dir.path(),
        "audit.yaml",
        "apiVersion: palisade.dev/v1
kind: BoundaryPolicy
metadata: {name: owner, boundary: shop}
spec:
  mode: audit
  rules:
    - requiredLabels: {labels: [{key: team}]}
",
    );
    write(dir.path(), "app.yaml", MANIFESTS);
    let out = run_in(
        &[
            "check",
            "-p",
            "policy.yaml",
            "-p",
            "audit.yaml",
            "-o",
            "sarif",
            "app.yaml",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(log["version"], "2.1.0");
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "palisade");
    assert_eq!(
        run["tool"]["driver"]["rules"],
        serde_json::json!([
            {"id": "no-latest/DisallowLatestTag",
             "shortDescription": {"text": "Policy 'no-latest' (DisallowLatestTag)"}},
            {"id": "owner", "shortDescription": {"text": "Policy 'owner' (audit)"}},
        ])
    );
    let results = run["results"].as_array().unwrap();
    let denial = results.iter().find(|r| r["level"] == "error").unwrap();
    assert_eq!(
        denial,
        &serde_json::json!({
            "ruleId": "no-latest/DisallowLatestTag",
            "level": "error",
            "message": {"text": "Policy 'no-latest' (DisallowLatestTag) denied image nginx: it is tagged latest or carries no tag."},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": {"uri": "app.yaml"},
                    // The List's document starts at its `---`, line 5.
                    "region": {"startLine": 5},
                },
                "logicalLocations": [{"name": "Deployment/web", "kind": "object"}],
            }],
            "properties": {"document": 1},
        })
    );
    // The Pod (document 0, line 1) and the Deployment lack `team`: audit warnings.
    let warnings: Vec<(&str, u64)> = results
        .iter()
        .filter(|r| r["level"] == "warning")
        .map(|r| {
            (
                r["locations"][0]["logicalLocations"][0]["name"]
                    .as_str()
                    .unwrap(),
                r["locations"][0]["physicalLocation"]["region"]["startLine"]
                    .as_u64()
                    .unwrap(),
            )
        })
        .collect();
    assert_eq!(warnings, [("Pod/ok", 1), ("Deployment/web", 5)]);
    assert!(results
        .iter()
        .filter(|r| r["level"] == "warning")
        .all(|r| r["ruleId"] == "owner"));
}

#[test]
fn a_directory_of_policies_is_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    write(&dir.path().join("policies"), "a.yaml", POLICY);
    write(&dir.path().join("policies"), "README.md", "not yaml: [");
    write(dir.path(), "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: 'nginx:latest'}]}\n");
    let out = run_in(&["check", "-p", "policies", "pod.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

#[test]
fn bad_input_is_exit_2_and_names_the_place() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "policy.yaml", POLICY);
    write(
        dir.path(),
        "broken.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n",
    );
    let out = run_in(&["check", "-p", "policy.yaml", "broken.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("error: broken.yaml:"), "{stderr}");
    assert!(stderr.contains(":4:"), "names line 4: {stderr}");

    write(
        dir.path(),
        "bad-policy.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop}\nspec:\n  rules:\n    - allowedRegistries: {registries: [library]}\n",
    );
    write(dir.path(), "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: x}]}\n");
    let out = run_in(&["check", "-p", "bad-policy.yaml", "pod.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("error: bad-policy.yaml:0: /spec/rules/0/allowedRegistries/registries/0: registry prefix 'library' must start with a registry host"),
        "{}",
        text(&out.stderr)
    );

    // Bad input wins over a denial.
    write(dir.path(), "latest.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {v: 1}}\nspec: {containers: [{name: a, image: x}]}\n");
    let out = run_in(
        &["check", "-p", "policy.yaml", "latest.yaml", "pod.yaml"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_stderr_contains(
        &out,
        "latest.yaml:0: /metadata/labels/v: label values must be strings",
    );

    let out = run_in(&["check", "-p", "policy.yaml", "missing.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("error: missing.yaml: "),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn policies_of_several_boundaries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", POLICY);
    write(
        dir.path(),
        "b.yaml",
        &POLICY.replace("boundary: shop", "boundary: bank"),
    );
    write(dir.path(), "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: x:1}]}\n");
    let out = run_in(
        &["check", "-p", "a.yaml", "-p", "b.yaml", "pod.yaml"],
        dir.path(),
    );
    assert_exit(&out, 2, "error: the policies belong to several boundaries (bank, shop); check one boundary at a time\n");
}

#[test]
fn check_plan_prints_the_422_message() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "size.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: size-limits, boundary: shop}\nspec:\n  rules:\n    - allowedComputePlans: {plans: [small, medium]}\n",
    );
    let out = run_in(
        &[
            "check",
            "-p",
            "size.yaml",
            "plan",
            "--type",
            "app",
            "--plan",
            "large",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium.\n"
    );
    let out = run_in(
        &[
            "check",
            "-p",
            "size.yaml",
            "plan",
            "--type",
            "app",
            "--plan",
            "small",
        ],
        dir.path(),
    );
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), "allowed\n".to_owned())
    );
    let out = run_in(
        &["check", "plan", "--type", "valkey", "--plan", "xlarge"],
        dir.path(),
    );
    assert_exit(&out, 2, "error: --plan: plan 'xlarge' is not a plan of valkey; the catalog has small, medium, large\n");
    // A manifest file named plan is written ./plan.
    write(dir.path(), "plan", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: 'x:latest'}]}\n");
    let out = run_in(&["check", "-p", "size.yaml", "./plan"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

const TEAM_POLICY: &str = "apiVersion: palisade.dev/v1
kind: BoundaryPolicy
metadata: {name: owner-label, boundary: shop}
spec:
  rules:
    - requiredLabels: {labels: [{key: team}]}
";

fn job(own_labels: &str) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata: {{name: migrate{own_labels}}}
spec:
  template:
    metadata: {{labels: {{team: web}}}}
    spec:
      restartPolicy: Never
      containers: [{{name: a, image: 'ghcr.io/acme/migrate:1.0'}}]
"
    )
}

/// The API server defaults a Job's empty labels from its pod template before admission
/// (SPEC 4.2), so `check` gives the cluster's verdict.
#[test]
fn a_job_without_labels_of_its_own_is_judged_with_its_templates() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "policy.yaml", TEAM_POLICY);
    for own in ["", ", labels: {}", ", labels: null"] {
        write(dir.path(), "job.yaml", &job(own));
        let out = run_in(&["check", "-p", "policy.yaml", "job.yaml"], dir.path());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{own}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    write(dir.path(), "job.yaml", &job(", labels: {app: migrate}"));
    let out = run_in(&["check", "-p", "policy.yaml", "job.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "job.yaml:0 Job/migrate: Policy 'owner-label' (RequiredLabels) requires the label team.\n"
    );
    // A Deployment is not defaulted: it needs the label on itself.
    write(
        dir.path(),
        "deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {team: web}}\n  template:\n    metadata: {labels: {team: web}}\n    spec: {containers: [{name: a, image: 'ghcr.io/acme/web:1.4'}]}\n",
    );
    let out = run_in(
        &["check", "-p", "policy.yaml", "deployment.yaml"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
}

#[test]
fn custom_yaml_tags_and_bad_metadata_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: 'x:1'}]}\n");
    write(
        dir.path(),
        "tagged.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop}\nspec: !evil {rules: [{disallowLatestTag: {}}]}\n",
    );
    let out = run_in(&["check", "-p", "tagged.yaml", "pod.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert_stderr_contains(
        &out,
        "tagged.yaml:0: /spec: custom YAML tags are not accepted (found !evil)",
    );
    write(
        dir.path(),
        "labels.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop, labels: {'a b': c}}\nspec: {rules: [{disallowLatestTag: {}}]}\n",
    );
    let out = run_in(&["check", "-p", "labels.yaml", "pod.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert_stderr_contains(&out, "labels.yaml:0: /metadata/labels/a b: ");
    // A manifest with a custom tag cannot be judged as the cluster would: bad input too.
    write(dir.path(), "policy.yaml", POLICY);
    write(
        dir.path(),
        "tagged-pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: !pod {containers: [{name: a, image: nginx}]}\n",
    );
    let out = run_in(
        &["check", "-p", "policy.yaml", "tagged-pod.yaml"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert_stderr_contains(
        &out,
        "tagged-pod.yaml:0: /spec: custom YAML tags are not accepted (found !pod)",
    );
}

fn palisade_with_stdin(args: &[&str], dir: &Path, input: &str) -> Output {
    output_with_stdin(Command::new(BIN).args(args).current_dir(dir), input)
}

/// The summary goes to standard error, in both output formats; standard output and the exit
/// code are as before.
#[test]
fn a_summary_line_ends_standard_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "policy.yaml", POLICY);
    write(dir.path(), "app.yaml", MANIFESTS);
    let out = run_in(&["check", "-p", "policy.yaml", "app.yaml"], dir.path());
    assert_exit(&out, 1, "checked 3 objects: 1 denied\n");
    let out = run_in(
        &["check", "-p", "policy.yaml", "-o", "json", "app.yaml"],
        dir.path(),
    );
    assert_exit(&out, 1, "checked 3 objects: 1 denied\n");
    assert!(serde_json::from_slice::<serde_json::Value>(&out.stdout).is_ok());
    write(dir.path(), "ok.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: ok}\nspec: {containers: [{name: a, image: 'nginx:1.27'}]}\n");
    let out = run_in(
        &["check", "-p", "policy.yaml", "ok.yaml", "app.yaml"],
        dir.path(),
    );
    assert_eq!(text(&out.stderr), "checked 4 objects: 1 denied\n");
    // After the errors of bad input, counting what could be read.
    write(dir.path(), "broken.yaml", "kind: [\n");
    let out = run_in(
        &["check", "-p", "policy.yaml", "ok.yaml", "broken.yaml"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("error: broken.yaml:"), "{stderr}");
    assert!(
        stderr.ends_with("\nchecked 1 objects: 0 denied\n"),
        "{stderr}"
    );
}

#[test]
fn no_policy_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "app.yaml", MANIFESTS);
    let out = run_in(&["check", "app.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(
        text(&out.stderr),
        "warning: no policy given (-p POLICY_FILE): every object is admitted\nchecked 3 objects: 0 denied\n"
    );
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let out = run_in(&["check", "-p", "empty", "app.yaml"], dir.path());
    assert_eq!(
        text(&out.stderr),
        "warning: the policy files hold no policy: every object is admitted\nchecked 3 objects: 0 denied\n"
    );
    let out = run_in(
        &["check", "plan", "--type", "app", "--plan", "xlarge"],
        dir.path(),
    );
    assert_eq!(
        (out.status.code(), text(&out.stdout), text(&out.stderr)),
        (
            Some(0),
            "allowed\n".to_owned(),
            "warning: no policy given (-p POLICY_FILE): every plan is allowed\n".to_owned()
        )
    );
}

#[test]
fn manifests_and_policies_from_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "policy.yaml", POLICY);
    write(dir.path(), "app.yaml", MANIFESTS);
    let out = palisade_with_stdin(&["check", "-p", "policy.yaml", "-"], dir.path(), MANIFESTS);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "<stdin>:1 Deployment/web: Policy 'no-latest' (DisallowLatestTag) denied image nginx: it is tagged latest or carries no tag.\n"
    );
    let out = palisade_with_stdin(&["check", "-p", "-", "app.yaml"], dir.path(), POLICY);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "app.yaml:1 Deployment/web: Policy 'no-latest' (DisallowLatestTag) denied image nginx: it is tagged latest or carries no tag.\n"
    );
    let out = palisade_with_stdin(
        &[
            "check", "-p", "-", "plan", "--type", "app", "--plan", "large",
        ],
        dir.path(),
        POLICY,
    );
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), "allowed\n".to_owned())
    );
    let out = palisade_with_stdin(&["check", "-p", "-", "-"], dir.path(), POLICY);
    assert_eq!(out.status.code(), Some(2));
    assert_stderr_contains(&out, "error: standard input (-) can be read only once\n");
}

/// `check plan` is a command of its own: its help, its required options, and its options
/// before or after the word `plan`.
#[test]
fn check_plan_has_its_own_help() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(&["check", "plan", "--help"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    assert!(
        help.starts_with("Decide a compute plan offline: prints `allowed`, or the exact message the API's 422 would carry.\n"),
        "{help}"
    );
    assert!(
        help.contains("\nUsage: palisade check plan [OPTIONS] --type <TYPE> --plan <PLAN>\n"),
        "{help}"
    );
    assert!(
        help.contains("\nExamples:\n  # Prints `allowed` (exit 0) or the API's exact 422 message (exit 1)\n  palisade check plan -p policies/ --type app --plan large\n"),
        "{help}"
    );
    for option in ["  -p, --policy <POLICY_FILE>\n", "      --catalog <FILE>\n"] {
        assert!(help.contains(option), "{option}: {help}");
    }
    let help = text(&run_in(&["check", "--help"], dir.path()).stdout);
    assert!(
        help.contains("\n  plan  Decide a compute plan offline"),
        "{help}"
    );
    let out = run_in(&["check", "plan", "--type", "app"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with(
            "error: the following required arguments were not provided:\n  --plan <PLAN>\n"
        ),
        "{}",
        text(&out.stderr)
    );
    write(
        dir.path(),
        "size.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: size-limits, boundary: shop}\nspec:\n  rules:\n    - allowedComputePlans: {plans: [small]}\n",
    );
    for args in [
        &[
            "check",
            "-p",
            "size.yaml",
            "plan",
            "--type",
            "app",
            "--plan",
            "large",
        ][..],
        &[
            "check",
            "plan",
            "--type",
            "app",
            "--plan",
            "large",
            "-p",
            "size.yaml",
        ],
    ] {
        let out = run_in(args, dir.path());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
    }
}

/// `-e` takes exceptions: a matched object is let past (a note on standard error, `excepted`
/// in the JSON), an unmatched one is denied as before, and `--at` after `expiresAt` denies it
/// again; an exception of another boundary is bad input.
#[test]
fn exceptions_let_matched_objects_past_until_they_end() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "policy.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: no-latest, boundary: shop}\nspec: {rules: [{disallowLatestTag: {}}]}\n",
    );
    write(
        dir.path(),
        "legacy.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryException\nmetadata: {name: legacy-nginx, boundary: shop}\nspec:\n  policy: no-latest\n  match: {labels: {app: legacy}, images: [\"nginx:latest\"]}\n  expiresAt: \"2030-01-31T00:00:00Z\"\n  reason: moving to nginx:1.27\n",
    );
    write(
        dir.path(),
        "pods.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: legacy, labels: {app: legacy}}\nspec: {containers: [{name: c, image: \"nginx:latest\"}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: other}\nspec: {containers: [{name: c, image: \"nginx:latest\"}]}\n",
    );
    let args = [
        "check",
        "-p",
        "policy.yaml",
        "-e",
        "legacy.yaml",
        "--at",
        "2030-01-01T00:00:00Z",
        "pods.yaml",
    ];
    let out = run_in(&args, dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "pods.yaml:1 Pod/other: Policy 'no-latest' (DisallowLatestTag) denied image nginx:latest: it is tagged latest or carries no tag.\n"
    );
    assert_stderr_contains(&out, "note: pods.yaml:0 Pod/legacy: let past policy 'no-latest' by exception 'legacy-nginx' (until 2030-01-31T00:00:00Z)");
    let mut json_args = args.to_vec();
    json_args.splice(1..1, ["-o", "json"]);
    let out = run_in(&json_args, dir.path());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json[0]["admitted"], true);
    assert_eq!(
        json[0]["excepted"],
        serde_json::json!([{"policy": "no-latest", "exception": "legacy-nginx", "expiresAt": "2030-01-31T00:00:00Z"}])
    );
    assert!(json[1].get("excepted").is_none());
    // At expiresAt it has ended.
    let out = run_in(
        &[
            "check",
            "-p",
            "policy.yaml",
            "-e",
            "legacy.yaml",
            "--at",
            "2030-01-31T00:00:00Z",
            "pods.yaml",
        ],
        dir.path(),
    );
    assert_eq!(
        text(&out.stdout).lines().count(),
        2,
        "{}",
        text(&out.stdout)
    );
    // Another boundary's exception, a bad time: exit 2, named.
    write(
        dir.path(),
        "other.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryException\nmetadata: {name: x, boundary: other}\nspec: {policy: no-latest, match: {namespaces: [web]}, expiresAt: \"2030-01-31T00:00:00Z\", reason: r}\n",
    );
    let out = run_in(
        &[
            "check",
            "-p",
            "policy.yaml",
            "-e",
            "other.yaml",
            "pods.yaml",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_stderr_contains(
        &out,
        "other.yaml:0: exception of boundary 'other', the policies are of 'shop'",
    );
    let out = run_in(
        &[
            "check",
            "-p",
            "policy.yaml",
            "-e",
            "legacy.yaml",
            "--at",
            "soon",
            "pods.yaml",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_stderr_contains(&out, "--at: must be an RFC 3339 time");
}

/// `check plan -e ... --name N`: an exception listing the resource and plan lets it past, with
/// the API's warning; another name, or a time after `expiresAt`, gets the 422 message.
#[test]
fn check_plan_takes_exceptions_for_a_named_resource() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "size.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: size, boundary: shop}\nspec: {rules: [{allowedComputePlans: {plans: [small]}}]}\n",
    );
    write(
        dir.path(),
        "reports.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryException\nmetadata: {name: legacy-reports, boundary: shop}\nspec: {policy: size, resources: [app/reports], plans: [large], expiresAt: \"2030-01-31T00:00:00Z\", reason: r}\n",
    );
    let run = |name: &str, at: &str| {
        run_in(
            &[
                "check",
                "plan",
                "-p",
                "size.yaml",
                "-e",
                "reports.yaml",
                "--type",
                "app",
                "--plan",
                "large",
                "--name",
                name,
                "--at",
                at,
            ],
            dir.path(),
        )
    };
    let out = run("reports", "2030-01-01T00:00:00Z");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "allowed\n");
    assert_eq!(
        text(&out.stderr),
        "warning: Compute plan 'large' is allowed by exception 'legacy-reports' until 2030-01-31T00:00:00Z\n"
    );
    let denied = "Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small.\n";
    let out = run("web", "2030-01-01T00:00:00Z");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), denied);
    let out = run("reports", "2030-01-31T00:00:00Z");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), denied);
}
