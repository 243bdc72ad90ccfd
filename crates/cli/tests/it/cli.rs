//! The command line itself, as users meet it: help with examples, values listed where they
//! are taken and refused with the list, usage lines, shell completion, `version --client`.

use std::process::{Command, Output};

use crate::common::{assert_exit, text};

fn palisade(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(args)
        .env_remove("PALISADE_URL")
        .env_remove("PALISADE_TOKEN")
        // No context of the user's config file either.
        .env(
            "PALISADE_CONFIG",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/no-palisade-config.yaml"),
        )
        .output()
        .unwrap()
}

fn stdout(args: &[&str]) -> String {
    let out = palisade(args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

const TYPES: &str =
    "[possible values: app, container_instance, postgresql, sqlserver, qdrant, valkey, function, static_web_app]";

#[test]
fn every_command_shows_examples() {
    let commands: &[&[&str]] = &[
        &[],
        &["check"],
        &["check", "plan"],
        &["serve"],
        &["apply"],
        &["get"],
        &["get", "boundaries"],
        &["get", "clusters"],
        &["get", "policies"],
        &["get", "policy"],
        &["get", "resources"],
        &["get", "tokens"],
        &["get", "namespaces"],
        &["get", "plans"],
        &["delete"],
        &["delete", "boundary"],
        &["delete", "policy"],
        &["delete", "resource"],
        &["delete", "token"],
        &["delete", "cluster"],
        &["delete", "namespace"],
        &["resource"],
        &["resource", "create"],
        &["resource", "update"],
        &["token"],
        &["token", "create"],
        &["token", "list"],
        &["token", "revoke"],
        &["boundary"],
        &["boundary", "create"],
        &["namespace"],
        &["namespace", "create"],
        &["namespace", "adopt"],
        &["cluster"],
        &["cluster", "add"],
        &["cluster", "attach"],
        &["cluster", "rbac"],
        &["cluster", "kubeconfig"],
        &["version"],
        &["completion"],
    ];
    for command in commands {
        let mut args = command.to_vec();
        args.push("--help");
        let help = stdout(&args);
        let mut invocation = vec!["palisade"];
        invocation.extend(command.iter());
        let invocation = invocation.join(" ");
        assert!(
            help.contains("\nExamples:\n  # ") || help.contains("\nExamples:\n  palisade"),
            "{invocation}: {help}"
        );
        assert!(
            help.contains(&format!("\n  {invocation}")) || command.is_empty(),
            "{invocation}: no example runs it\n{help}"
        );
    }
}

#[test]
fn apply_help_shows_standard_input_and_the_round_trip() {
    let help = stdout(&["apply", "--help"]);
    assert!(
        help.contains("Usage: palisade apply [OPTIONS] --filename <FILE|DIR|->\n"),
        "{help}"
    );
    assert!(
        help.contains("  palisade get policy shop/size-limits -o yaml | palisade apply -f -\n"),
        "{help}"
    );
}

/// The connection options are global and optional: usage lines never show them as
/// required, and their environment variables are named.
#[test]
fn usage_lines_do_not_require_the_global_options() {
    let help = stdout(&["get", "boundaries", "--help"]);
    assert!(
        help.contains("Usage: palisade get boundaries [OPTIONS]\n"),
        "{help}"
    );
    assert!(help.contains("Global Options:\n"), "{help}");
    assert!(help.contains("[env: PALISADE_URL"), "{help}");
    assert!(help.contains("[env: PALISADE_TOKEN]"), "{help}");
    let help = stdout(&["resource", "create", "--help"]);
    assert!(
        help.contains(
            "Usage: palisade resource create [OPTIONS] --type <TYPE> --name <NAME> <BOUNDARY>\n"
        ),
        "{help}"
    );
    // Given before or after the subcommand.
    let out = palisade(&["get", "--url", "http://127.0.0.1:1", "boundaries"]);
    assert_eq!(
        text(&out.stderr),
        "error: cannot reach palisade at http://127.0.0.1:1: connection refused\n"
    );
    let out = palisade(&["get", "boundaries", "--server", "http://127.0.0.1:1"]);
    assert_eq!(
        text(&out.stderr),
        "error: cannot reach palisade at http://127.0.0.1:1: connection refused\n"
    );
}

#[test]
fn roles_are_listed_and_a_bad_one_is_refused_with_the_list() {
    let help = stdout(&["token", "create", "--help"]);
    for line in [
        "          - admin:          everything, in every boundary (no --boundary)\n",
        "          - boundary-admin: a boundary's policies, namespaces, resources and developer tokens (needs --boundary)\n",
        "          - developer:      a boundary's resources and plans; reads its policies (needs --boundary)\n",
    ] {
        assert!(help.contains(line), "{line}\n{help}");
    }
    let out = palisade(&["token", "create", "--role", "viewer"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(
            "error: invalid value 'viewer' for '--role <ROLE>'\n  [possible values: admin, boundary-admin, developer]\n"
        ),
        "{stderr}"
    );
}

#[test]
fn resource_types_are_listed_and_a_bad_one_is_refused_with_the_list() {
    for command in [
        &["resource", "create", "-h"][..],
        &["get", "resources", "-h"],
        &["get", "plans", "-h"],
        &["check", "plan", "-h"],
    ] {
        let help = stdout(command);
        assert!(help.contains(TYPES), "{command:?}: {help}");
    }
    for command in [
        &["delete", "resource", "-h"][..],
        &["resource", "update", "-h"],
    ] {
        let help = stdout(command);
        assert!(
            help.contains("TYPE is one of app, container_instance, postgresql, sqlserver, qdrant, valkey, function, static_web_app"),
            "{command:?}: {help}"
        );
    }
    let out = palisade(&[
        "resource",
        "create",
        "shop",
        "--type",
        "sql_server",
        "--name",
        "db",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "error: invalid value 'sql_server' for '--type <TYPE>'\n  {TYPES}\n"
        )),
        "{stderr}"
    );
    // Inside BOUNDARY/TYPE/NAME the type is checked before anything is sent.
    let out = palisade(&["delete", "resource", "shop/ap/web"]);
    assert_exit(&out, 1, "error: 'shop/ap/web': unknown resource type 'ap'; known types are app, container_instance, postgresql, sqlserver, qdrant, valkey, function, static_web_app\n");
}

#[test]
fn completion_scripts_name_the_commands() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout(&["completion", shell]);
        for word in [
            "apply",
            "check",
            "plan",
            "completion",
            "version",
            "boundary-admin",
            "container_instance",
        ] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    assert!(stdout(&["completion", "bash"]).starts_with("_palisade() {\n"));
    assert!(stdout(&["completion", "zsh"]).starts_with("#compdef palisade\n"));
    assert!(stdout(&["completion", "fish"]).contains("complete -c palisade "));
    let out = palisade(&["completion", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn version_without_a_server_is_the_client_only() {
    let client = format!("Client Version: {}\n", env!("CARGO_PKG_VERSION"));
    assert_eq!(stdout(&["version"]), client);
    assert_eq!(stdout(&["version", "--client"]), client);
    assert_eq!(
        stdout(&["version", "-o", "yaml"]),
        format!("clientVersion: {}\n", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        stdout(&["--version"]),
        format!("palisade {}\n", env!("CARGO_PKG_VERSION"))
    );
}

/// `cluster rbac` needs no server: the role (nothing on Secrets) and a binding to the
/// identity asked for, as YAML documents `kubectl apply -f -` takes.
#[test]
fn cluster_rbac_prints_the_role_and_a_binding_to_the_identity() {
    let text = stdout(&["cluster", "rbac", "--service-account", "platform/palisade"]);
    let documents: Vec<serde_json::Value> = text
        .split("\n---\n")
        .map(|d| serde_yaml_ng::from_str(d).unwrap())
        .collect();
    assert_eq!(documents.len(), 2, "{text}");
    assert_eq!(documents[0]["kind"], "ClusterRole");
    assert_eq!(documents[0]["metadata"]["name"], "palisade");
    let rules = documents[0]["rules"].as_array().unwrap();
    let resources: Vec<&str> = rules
        .iter()
        .flat_map(|r| {
            r["resources"]
                .as_array()
                .or_else(|| r["nonResourceURLs"].as_array())
                .unwrap()
        })
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(
        resources,
        [
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
            "namespaces",
            "customresourcedefinitions",
            "boundarypolicies",
            "pods",
            "deployments",
            "replicasets",
            "statefulsets",
            "daemonsets",
            "jobs",
            "cronjobs",
            "deployments",
            "deployments/scale",
            "replicasets",
            "jobs",
            "events",
            "reports",
            "selfsubjectreviews",
            "leases",
            "/metrics"
        ]
    );
    assert_eq!(documents[1]["kind"], "ClusterRoleBinding");
    assert_eq!(documents[1]["roleRef"]["name"], "palisade");
    assert_eq!(
        documents[1]["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": "palisade", "namespace": "platform"}])
    );

    let user = stdout(&[
        "cluster",
        "rbac",
        "--user",
        "ops",
        "--name",
        "palisade-prod",
    ]);
    assert!(user.contains("  name: palisade-prod\n"), "{user}");
    assert!(
        user.ends_with(
            "subjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: ops\n"
        ),
        "{user}"
    );

    let bad = palisade(&["cluster", "rbac", "--service-account", "palisade"]);
    assert_exit(
        &bad,
        1,
        "error: --service-account 'palisade' must be written NAMESPACE/NAME\n",
    );
}

/// A `--history-days` so large that no time is that long ago is refused when read, naming the
/// flag, instead of stopping history retention later.
#[test]
fn a_huge_history_days_is_refused_naming_the_flag() {
    let out = palisade(&["serve", "--history-days", "100000000"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(
            "error: invalid value '100000000' for '--history-days <DAYS>': 100000000 is not in 0..=36500"
        ),
        "{stderr}"
    );
}
