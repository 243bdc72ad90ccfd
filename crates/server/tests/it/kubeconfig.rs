//! `PUT /v1/clusters/{c}` refuses every kubeconfig SPEC 4.1 refuses, however the YAML spells
//! it (aliases, merge keys, nested merges), and stores exactly the document it validated.

use crate::common;
use crate::common::TestApp;
use axum::http::StatusCode;
use serde_json::json;

/// A kubeconfig whose `cluster` and `user` bodies are given, plus extra top-level text
/// (anchors live there).
fn kubeconfig(extra: &str, cluster: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\n{extra}\
clusters:\n- name: c\n  cluster: {cluster}\n\
users:\n- name: u\n  user: {user}\n\
contexts:\n- name: x\n  context: {{cluster: c, user: u}}\n\
current-context: x\n"
    )
}

const CLUSTER: &str = "{server: 'https://127.0.0.1:6443', certificate-authority-data: Zm9v}";
const USER: &str = "{token: abc}";

async fn put(app: &TestApp, text: &str) -> common::Answer {
    app.put_cluster("c1", text).await
}

#[tokio::test]
async fn every_refused_field_is_a_400_naming_it_however_it_is_spelt() {
    let app = TestApp::sqlite().await;
    let plugin = "credential plugins are not accepted; use inline credentials";
    let file = "file paths are not accepted; use inline credentials";
    let basic = "basic authentication is not accepted";
    let user_fields: [(&str, &str); 7] = [
        (
            "exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}",
            "exec",
        ),
        ("auth-provider: {name: gcp}", "auth-provider"),
        ("client-certificate: /etc/cert", "client-certificate"),
        ("client-key: /etc/key", "client-key"),
        ("tokenFile: /var/token", "tokenFile"),
        ("username: admin", "username"),
        ("password: secret", "password"),
    ];
    let cluster_fields: [(&str, &str, &str); 4] = [
        (
            "insecure-skip-tls-verify: true",
            "insecure-skip-tls-verify",
            "TLS verification cannot be turned off",
        ),
        (
            "insecure-skip-tls-verify: false",
            "insecure-skip-tls-verify",
            "TLS verification cannot be turned off",
        ),
        (
            "proxy-url: 'http://proxy:3128'",
            "proxy-url",
            "proxies are not supported",
        ),
        (
            "certificate-authority: /ca.crt",
            "certificate-authority",
            "file paths are not accepted; use certificate-authority-data",
        ),
    ];
    let mut cases: Vec<(String, String)> = Vec::new();
    for (field, name) in user_fields {
        let why = match name {
            "exec" | "auth-provider" => plugin,
            "username" | "password" => basic,
            _ => file,
        };
        let expected = format!("/kubeconfig/users/0/user/{name}: {why}");
        // Written out.
        cases.push((
            kubeconfig("", CLUSTER, &format!("{{token: abc, {field}}}")),
            expected.clone(),
        ));
        // An alias of an anchored mapping.
        cases.push((
            kubeconfig(
                &format!("x-user: &u {{token: abc, {field}}}\n"),
                CLUSTER,
                "*u",
            ),
            expected.clone(),
        ));
        // A merge key.
        cases.push((
            kubeconfig(
                &format!("x-user: &u {{{field}}}\n"),
                CLUSTER,
                "{<<: *u, token: abc}",
            ),
            expected.clone(),
        ));
        // A merge key whose list names it second.
        cases.push((
            kubeconfig(
                &format!("x-a: &a {{token: abc}}\nx-b: &b {{{field}}}\n"),
                CLUSTER,
                "{<<: [*a, *b]}",
            ),
            expected.clone(),
        ));
        // A merge of a mapping that itself merges.
        cases.push((
            kubeconfig(
                &format!("x-a: &a {{{field}}}\nx-b: &b {{<<: *a}}\n"),
                CLUSTER,
                "{<<: *b, token: abc}",
            ),
            expected,
        ));
    }
    for (field, name, why) in cluster_fields {
        let expected = format!("/kubeconfig/clusters/0/cluster/{name}: {why}");
        cases.push((
            kubeconfig(
                "",
                &format!("{{server: 'https://127.0.0.1:6443', {field}}}"),
                USER,
            ),
            expected.clone(),
        ));
        cases.push((
            kubeconfig(
                &format!("x-cluster: &c {{server: 'https://127.0.0.1:6443', {field}}}\n"),
                "*c",
                USER,
            ),
            expected.clone(),
        ));
        cases.push((
            kubeconfig(
                &format!("x-cluster: &c {{{field}}}\n"),
                "{<<: *c, server: 'https://127.0.0.1:6443'}",
                USER,
            ),
            expected.clone(),
        ));
        cases.push((
            kubeconfig(
                &format!("x-a: &a {{{field}}}\nx-b: &b {{<<: *a}}\n"),
                "{<<: *b, server: 'https://127.0.0.1:6443'}",
                USER,
            ),
            expected,
        ));
    }
    // An http server, also through a merge key.
    cases.push((
        kubeconfig("", "{server: 'http://127.0.0.1:6443'}", USER),
        "/kubeconfig/clusters/0/cluster/server: must be an https:// URL".to_owned(),
    ));
    cases.push((
        kubeconfig(
            "x-cluster: &c {server: 'http://127.0.0.1:6443'}\n",
            "{<<: *c}",
            USER,
        ),
        "/kubeconfig/clusters/0/cluster/server: must be an https:// URL".to_owned(),
    ));
    // Contexts that name what the file does not hold.
    let base = kubeconfig("", CLUSTER, USER);
    let context = "{cluster: c, user: u}";
    for (from, to, expected) in [
        (
            context,
            "{cluster: other, user: u}",
            "/kubeconfig/contexts/0/context/cluster: must name the kubeconfig's cluster 'c'",
        ),
        (
            context,
            "{cluster: c, user: other}",
            "/kubeconfig/contexts/0/context/user: must name the kubeconfig's user 'u'",
        ),
        (
            context,
            "{cluster: c}",
            "/kubeconfig/contexts/0/context/user: must name the kubeconfig's user 'u'",
        ),
        (
            "current-context: x",
            "current-context: y",
            "/kubeconfig/current-context: must name the kubeconfig's context 'x'",
        ),
    ] {
        cases.push((base.replace(from, to), expected.to_owned()));
    }
    // Tags could hide a mapping from one reader and not another.
    cases.push((
        kubeconfig("", CLUSTER, "!creds {token: abc}"),
        "/kubeconfig/users/0/user: YAML tags are not accepted".to_owned(),
    ));

    let mut failures = Vec::new();
    for (text, expected) in &cases {
        let answer = put(&app, text).await;
        if answer.status != StatusCode::BAD_REQUEST || answer.message() != expected {
            failures.push(format!(
                "{text}\n  expected 400 {expected}\n  got {} {}",
                answer.status,
                answer.message()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    let list = app.admin_get("/v1/clusters").await;
    assert_eq!(list.body["items"], json!([]), "nothing refused was stored");
}

#[tokio::test]
async fn the_stored_kubeconfig_is_the_validated_document_with_merges_resolved() {
    let app = TestApp::sqlite().await;
    let text = kubeconfig(
        "x-cluster: &c {server: 'https://127.0.0.1:6443'}\nx-user: &u {token: abc}\n",
        "{<<: *c, certificate-authority-data: Zm9v}",
        "{<<: *u}",
    );
    let answer = put(&app, &text).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let record = app.store.get_cluster("c1").await.unwrap();
    let stored =
        String::from_utf8(app.state.sealing.open(&record.kubeconfig_sealed).unwrap()).unwrap();
    assert!(!stored.contains("<<"), "{stored}");
    assert!(!stored.contains('&') && !stored.contains('*'), "{stored}");
    // What is stored passes the same rules and holds the merged fields.
    assert_eq!(
        palisade_api_types::kubeconfig::normalise(&stored).as_deref(),
        Ok(stored.as_str())
    );
    let loaded: serde_json::Value = serde_yaml_ng::from_str(&stored).unwrap();
    let cluster = &loaded["clusters"][0]["cluster"];
    assert_eq!(cluster["server"], "https://127.0.0.1:6443");
    assert_eq!(cluster["certificate-authority-data"], "Zm9v");
    assert_eq!(loaded["users"][0]["user"]["token"], "abc");
    // Storing it again is the same document: validation is idempotent.
    let again = put(&app, &stored).await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
    let record = app.store.get_cluster("c1").await.unwrap();
    let restored =
        String::from_utf8(app.state.sealing.open(&record.kubeconfig_sealed).unwrap()).unwrap();
    assert_eq!(restored, stored);
}
