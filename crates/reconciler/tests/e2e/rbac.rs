//! palisade with the ClusterRole that `palisade cluster rbac` prints, and nothing more: a
//! service account bound to exactly that role is the identity of the cluster's kubeconfig, and
//! the whole path `palisade serve` runs works through it — the guard, namespaces created,
//! adopted and released, a policy installed, confirmed `enforced` and removed, the cluster
//! deleted with every object of the installation — while the same identity cannot read
//! Secrets or ConfigMaps.
//!
//! A private control plane: on the shared one, other tests' installations have guards that
//! exempt only their own identity (the admin), so they would refuse this service account's
//! namespace labels, as they should.

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use palisade_reconciler::rbac::{cluster_role, cluster_role_binding, rules, Grantee, DEFAULT_NAME};
use palisade_reconciler::ClusterClient;
use palisade_testkit::control_plane::{unique_name, ControlPlane};
use reqwest::StatusCode;
use serde_json::json;

use crate::serve::{namespace_path, Stack};
use crate::support::{
    boundary_label, eventually, no_latest, on_both_versions, wait_gone, ACTIVATION_TIMEOUT,
};

on_both_versions!(palisade_works_with_its_cluster_role_and_nothing_more);

/// The admin kubeconfig with its client certificate replaced by `token`.
fn token_kubeconfig(admin: &str, token: &str) -> String {
    let mut lines = Vec::new();
    for line in admin.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("client-certificate-data:") {
            let indent = &line[..line.len() - trimmed.len()];
            lines.push(format!("{indent}token: {token}"));
        } else if !trimmed.starts_with("client-key-data:") {
            lines.push(line.to_owned());
        }
    }
    lines.join("\n")
}

/// Asserts that `result` is the API server's 403.
fn forbidden<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>) {
    match result {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{what}: {status:?}"),
        other => panic!("{what} must be forbidden, got {other:?}"),
    }
}

async fn palisade_works_with_its_cluster_role_and_nothing_more(version: &str) {
    let wanted = version.to_owned();
    let plane = tokio::task::spawn_blocking(move || ControlPlane::start(&wanted))
        .await
        .unwrap();
    let admin = plane.client().await;

    // The service account, and the role and binding exactly as `palisade cluster rbac` prints them.
    let home = "palisade-system";
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": home}})).unwrap(),
        )
        .await
        .unwrap();
    let accounts = Api::<ServiceAccount>::namespaced(admin.clone(), home);
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "palisade"}})).unwrap(),
        )
        .await
        .unwrap();
    let grantee = Grantee::ServiceAccount {
        namespace: home.to_owned(),
        name: "palisade".to_owned(),
    };
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &cluster_role(DEFAULT_NAME))
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &cluster_role_binding(DEFAULT_NAME, &grantee),
        )
        .await
        .unwrap();
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = accounts
        .create_token_request("palisade", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let kubeconfig = token_kubeconfig(plane.kubeconfig_yaml(), &token);
    let restricted = ClusterClient::from_kubeconfig(&kubeconfig)
        .await
        .expect("a token kubeconfig is accepted");
    assert_eq!(
        restricted.whoami().await.unwrap(),
        "system:serviceaccount:palisade-system:palisade"
    );

    // Nothing beyond the role: no Secrets, no ConfigMaps, no Pod to read or delete.
    let client = restricted.client().clone();
    let all = ListParams::default();
    let secrets = Api::<Secret>::all(client.clone());
    let default_secrets = Api::<Secret>::namespaced(client.clone(), "default");
    let configmaps = Api::<ConfigMap>::all(client.clone());
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    forbidden("list secrets", secrets.list(&all).await);
    forbidden("get a secret", default_secrets.get("anything").await);
    forbidden("list configmaps", configmaps.list(&all).await);
    forbidden("get a pod", pods.get("anything").await);
    let deleted = pods.delete("anything", &Default::default()).await;
    forbidden("delete a pod", deleted);

    // The whole path of `palisade serve`, with that identity.
    let stack = Stack::start(None).await;
    let boundary = stack.new_boundary("shop", "c1", &kubeconfig).await;
    let created = unique_name("web");
    let (status, body) = stack
        .call("PUT", &namespace_path(&boundary, "c1", &created), None)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let legacy = unique_name("legacy");
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": legacy}})).unwrap(),
        )
        .await
        .unwrap();
    let (status, body) = stack
        .call(
            "PUT",
            &namespace_path(&boundary, "c1", &legacy),
            Some(json!({"adopt": true})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["action"], "adopted");

    stack.put_policy(&boundary, "no-latest", no_latest()).await;
    let status = stack
        .wait_status(&boundary, "no-latest", "c1", |s| {
            s != "pending" && s != "installed"
        })
        .await;
    assert_eq!(status, "enforced");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "nginx:latest"}]},
    }))
    .unwrap();
    let denied = Api::<Pod>::namespaced(admin.clone(), &created)
        .create(&PostParams::default(), &pod)
        .await
        .expect_err("the API server denies nginx:latest");
    let kube::Error::Api(answer) = denied else {
        panic!("expected the API server's refusal, got {denied:?}");
    };
    assert!(
        answer.message.ends_with(
            "Policy 'no-latest' (DisallowLatestTag) denied image nginx:latest: it is tagged latest or carries no tag."
        ),
        "{}",
        answer.message
    );
    let clusters = stack.ok("GET", "/v1/clusters/c1", None).await;
    assert_eq!(clusters["last_error"], json!(null), "{clusters}");
    // A preview reads the boundary's objects with the role's `list` verbs.
    let preview = stack.preview(&boundary, "no-latest").await;
    assert_eq!(preview["clusters"][0]["error"], json!(null), "{preview}");
    assert_eq!(
        preview["clusters"][0]["namespaces"],
        json!([created.clone(), legacy.clone()]
            .iter()
            .collect::<std::collections::BTreeSet<_>>()),
        "{preview}"
    );

    // A role without the workloads' verbs (as in a cluster whose role predates them): the
    // cluster's last error says why, the policy stays enforced, and once the role is whole
    // again the workload is deployed and the error clears.
    let resources = format!("/v1/boundaries/{boundary}/resources");
    let roles = Api::<ClusterRole>::all(admin.clone());
    let names = |r: &k8s_openapi::api::rbac::v1::PolicyRule, resource: &str| {
        r.resources
            .as_ref()
            .is_some_and(|list| list.iter().any(|x| x == resource))
    };
    // The rules added for workloads: `deployments/scale`, and Deployments with `create`.
    let for_workloads = |r: &k8s_openapi::api::rbac::v1::PolicyRule| {
        names(r, "deployments/scale")
            || (names(r, "deployments") && r.verbs.iter().any(|v| v == "create"))
    };
    let without_workloads: Vec<_> = rules().into_iter().filter(|r| !for_workloads(r)).collect();
    roles
        .patch(
            DEFAULT_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": without_workloads})),
        )
        .await
        .unwrap();
    stack
        .ok(
            "POST",
            &resources,
            Some(json!({"type": "app", "name": "early", "plan": "small",
                        "image": "ghcr.io/acme/web:1.0", "namespace": created})),
        )
        .await;
    let (error, _) = eventually("the cluster saying why", ACTIVATION_TIMEOUT, || async {
        let cluster = stack.ok("GET", "/v1/clusters/c1", None).await;
        cluster["last_error"]
            .as_str()
            .filter(|e| e.starts_with("cannot deploy workloads: ") && e.contains("403"))
            .map(str::to_owned)
    })
    .await;
    assert!(error.contains("deployments"), "{error}");
    assert_eq!(
        stack
            .policy_status(&boundary, "no-latest", "c1")
            .await
            .as_deref(),
        Some("enforced")
    );
    roles
        .patch(
            DEFAULT_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": rules()})),
        )
        .await
        .unwrap();
    let deployments = Api::<Deployment>::namespaced(admin.clone(), &created);
    eventually(
        "deployed once the role is whole",
        ACTIVATION_TIMEOUT,
        || async {
            let cluster = stack.ok("GET", "/v1/clusters/c1", None).await;
            let deployed = deployments.get_opt("app-early").await.unwrap().is_some();
            (deployed && cluster["last_error"].is_null()).then_some(())
        },
    )
    .await;
    stack
        .ok("DELETE", &format!("{resources}/app/early"), None)
        .await;

    // Platform workloads through the same identity: an app's Deployment applied, then scaled
    // through `scale`; a git build's Job created; both deleted with their resources.
    stack
        .ok(
            "POST",
            &resources,
            Some(json!({"type": "app", "name": "web", "plan": "small",
                        "image": "ghcr.io/acme/web:1.0", "namespace": created})),
        )
        .await;
    stack
        .ok(
            "POST",
            &resources,
            Some(json!({"type": "app", "name": "site", "plan": "small",
                        "source": "https://git.acme.internal/site.git", "namespace": created})),
        )
        .await;
    let jobs = Api::<Job>::namespaced(admin.clone(), &created);
    let built = ListParams::default().labels("palisade.dev/resource=site");
    eventually(
        "the app's Deployment and the build's Job",
        ACTIVATION_TIMEOUT,
        || async {
            let deployed = deployments.get_opt("app-web").await.unwrap().is_some();
            let building = !jobs.list(&built).await.unwrap().items.is_empty();
            (deployed && building).then_some(())
        },
    )
    .await;
    stack
        .ok(
            "PATCH",
            &format!("{resources}/app/web"),
            Some(json!({"replicas": 2})),
        )
        .await;
    eventually("the app scaled to 2", ACTIVATION_TIMEOUT, || async {
        let replicas = deployments
            .get("app-web")
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas;
        (replicas == Some(2)).then_some(())
    })
    .await;
    let clusters = stack.ok("GET", "/v1/clusters/c1", None).await;
    assert_eq!(clusters["last_error"], json!(null), "{clusters}");
    for path in ["app/web", "app/site"] {
        stack
            .ok("DELETE", &format!("{resources}/{path}"), None)
            .await;
    }
    eventually(
        "the workloads' objects deleted",
        ACTIVATION_TIMEOUT,
        || async {
            let deployed = deployments.get_opt("app-web").await.unwrap().is_some();
            let building = !jobs.list(&built).await.unwrap().items.is_empty();
            (!deployed && !building).then_some(())
        },
    )
    .await;

    // Removing the policy removes its objects (list and delete).
    let policies = Api::<ValidatingAdmissionPolicy>::all(admin.clone());
    let object = format!("no-latest.{boundary}.palisade.dev");
    stack.delete_policy(&boundary, "no-latest").await;
    wait_gone(
        "the policy's objects removed",
        ACTIVATION_TIMEOUT,
        &policies,
        &object,
    )
    .await;

    // Releasing namespaces, then deleting the cluster, which removes the guard.
    for namespace in [&created, &legacy] {
        stack
            .ok("DELETE", &namespace_path(&boundary, "c1", namespace), None)
            .await;
        let namespaces = Api::<Namespace>::all(admin.clone());
        assert_eq!(boundary_label(&namespaces, namespace).await, None);
    }
    let guard = palisade_vap::guard_name(&stack.installation);
    assert!(policies.get_opt(&guard).await.unwrap().is_some());
    let (status, body) = stack.call("DELETE", "/v1/clusters/c1", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    // A pass running meanwhile may put the guard back; it removes it again when it finds the
    // cluster gone.
    wait_gone("the guard removed", ACTIVATION_TIMEOUT, &policies, &guard).await;
}
