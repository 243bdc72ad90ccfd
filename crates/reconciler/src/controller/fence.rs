//! A pass and an audit against a fake API server whose cluster lease is not confirmed: not one
//! write reaches the cluster.

mod tests {
    use super::super::*;
    use crate::fence::tests::Countdown;
    use crate::fence::Fence;

    /// What a fake API server was asked, as `METHOD path`.
    type Asked = Arc<std::sync::Mutex<Vec<String>>>;

    /// A client of a fake API server: it answers the reads a cluster's part and an audit make
    /// (version, discovery, who palisade is, one boundary namespace `shop-ns` and nothing in
    /// it) and refuses every write with 500. It records every request but discovery's.
    fn fake_cluster() -> (ClusterClient, Asked) {
        let asked: Asked = Arc::default();
        let seen = asked.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let seen = seen.clone();
            async move {
                let line = format!("{} {}", request.method(), request.uri().path());
                let body = match line.as_str() {
                    "GET /version" => Some(serde_json::json!({
                        "major": "1", "minor": "37", "gitVersion": "v1.37.2",
                        "gitCommit": "", "gitTreeState": "", "buildDate": "",
                        "goVersion": "", "compiler": "", "platform": "linux/amd64",
                    })),
                    "GET /apis/admissionregistration.k8s.io/v1" => Some(serde_json::json!({
                        "kind": "APIResourceList", "apiVersion": "v1",
                        "groupVersion": "admissionregistration.k8s.io/v1",
                        "resources": [
                            {"name": "validatingadmissionpolicies", "singularName": "",
                             "namespaced": false, "kind": "ValidatingAdmissionPolicy",
                             "verbs": ["get"]},
                            {"name": "validatingadmissionpolicybindings", "singularName": "",
                             "namespaced": false, "kind": "ValidatingAdmissionPolicyBinding",
                             "verbs": ["get"]},
                        ],
                    })),
                    "GET /apis/openreports.io/v1alpha1" => Some(serde_json::json!({
                        "kind": "APIResourceList", "apiVersion": "v1",
                        "groupVersion": "openreports.io/v1alpha1",
                        "resources": [{"name": "reports", "singularName": "",
                            "namespaced": true, "kind": "Report", "verbs": ["get"]}],
                    })),
                    "GET /api/v1/namespaces" => {
                        if let Ok(mut seen) = seen.lock() {
                            seen.push(line);
                        }
                        Some(serde_json::json!({
                            "kind": "NamespaceList", "apiVersion": "v1", "metadata": {},
                            "items": [{"metadata": {"name": "shop-ns"}}],
                        }))
                    }
                    "POST /apis/authentication.k8s.io/v1/selfsubjectreviews" => {
                        Some(serde_json::json!({
                            "apiVersion": "authentication.k8s.io/v1",
                            "kind": "SelfSubjectReview", "metadata": {},
                            "status": {"userInfo": {"username": "palisade"}},
                        }))
                    }
                    // Not watched for restarts.
                    "GET /metrics" => None,
                    _ => {
                        let read = request.method() == http::Method::GET;
                        if let Ok(mut seen) = seen.lock() {
                            seen.push(line);
                        }
                        // Any other read: an empty list.
                        read.then(|| {
                            serde_json::json!({"kind": "List", "apiVersion": "v1",
                                "metadata": {}, "items": []})
                        })
                    }
                };
                let (status, body) = match body {
                    Some(body) => (200, body),
                    None => (
                        500,
                        serde_json::json!({"kind": "Status", "apiVersion": "v1",
                            "status": "Failure", "message": "fake", "code": 500}),
                    ),
                };
                let response = http::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body.to_string().into_bytes()));
                response.map_err(|e| std::io::Error::other(e.to_string()))
            }
        });
        let client = ClusterClient::from_client(kube::Client::new(service, "default"));
        (client, asked)
    }

    /// A controller on a SQLite store holding cluster `c1` (Kubernetes 1.37.2, enforcing, as
    /// the fake says), whose connection to it is `client`.
    async fn controller_with(
        client: &ClusterClient,
    ) -> (Arc<Controller>, ClusterRecord, tempfile::TempDir) {
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("palisade.db");
        let url = format!("sqlite://{}", file.display());
        let store = palisade_store::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut raw = sqlx::SqliteConnection::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        sqlx::query(
            "INSERT INTO clusters (name, kubeconfig_sealed, kubernetes_version, \
             admission_enforced, created_at, updated_at) \
             VALUES ('c1', x'00', 'v1.37.2', 1, '2025-01-01T00:00:00Z', '2025-01-01T00:00:00Z')",
        )
        .execute(&mut raw)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let app = App::new(
            store,
            palisade_policy::Catalog::builtin(),
            palisade_app::SealingKey::random(),
        );
        let controller = Controller::new(app, "i1".to_owned(), Settings::default());
        let state = controller
            .app
            .desired_state()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let Some(cluster) = state.clusters.into_iter().find(|c| c.name == "c1") else {
            panic!("the cluster is stored");
        };
        controller.memory.keep_connection(
            &cluster.name,
            super::super::Connection {
                sealed: cluster.kubeconfig_sealed.clone(),
                client: client.clone().with_layout(Layout::default()),
                identity: None,
            },
        );
        (controller, cluster, dir)
    }

    /// The part of cluster `c1` under `fence`, with the memory its worker lends it.
    async fn part_of(
        controller: &Controller,
        cluster: &ClusterRecord,
        fence: &Fence,
    ) -> ClusterDone {
        let mut memory = controller.memory.lend("c1", Vec::new());
        controller
            .cluster_pass(cluster, &[], fence, &mut memory)
            .await
    }

    /// A cluster's part of a pass reads the cluster, then confirms the lease before its first
    /// write: with the lease not confirmed, the API server gets no write at all, and nothing
    /// about the cluster is recorded (another replica holds it now).
    #[tokio::test]
    async fn a_pass_writes_nothing_to_a_cluster_whose_lease_is_not_confirmed() {
        let (client, asked) = fake_cluster();
        let (controller, cluster, _dir) = controller_with(&client).await;
        let fence = Fence::over("c1", Countdown::new(0));
        let done = part_of(&controller, &cluster, &fence).await;
        assert!(
            matches!(done.result, Err(ControllerError::Fenced(_))),
            "{:?}",
            done.result
        );
        assert!(done.recorded);
        let writes: Vec<String> = asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|line| !line.starts_with("GET "))
            .cloned()
            .collect();
        assert_eq!(writes, Vec::<String>::new());
        let stored = controller
            .records
            .cluster_record("c1")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            stored.last_error, None,
            "no failure recorded by a non-holder"
        );

        // The same part with the lease confirmed does write (the guard comes first; the fake
        // refuses it): the check above is what kept the writes away.
        let fence = Fence::over("c1", Countdown::new(usize::MAX));
        let done = part_of(&controller, &cluster, &fence).await;
        assert!(
            matches!(done.result, Err(ControllerError::Guard(_))),
            "{:?}",
            done.result
        );
        let asked = asked.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert!(
            asked.iter().any(|line| line.starts_with("PATCH ")),
            "{asked:?}"
        );
    }

    /// An audit confirms the cluster's lease before it reads and before each write (its
    /// results, then the cluster's reports): with the lease lost at any of these points, the
    /// cluster gets no write; with it confirmed throughout, the reports are written.
    #[tokio::test]
    async fn an_audit_of_a_cluster_no_longer_held_writes_nothing() {
        let (client, asked) = fake_cluster();
        let (controller, _cluster, _dir) = controller_with(&client).await;
        use palisade_policy::{LabelKey, LabelRequirement, Rule, Scope};
        let team = LabelKey::parse("team").unwrap_or_else(|e| panic!("{e}"));
        let policy = Policy::new(
            Name::parse("labels").unwrap_or_else(|e| panic!("{e}")),
            Mode::Enforce,
            Scope::AllClusters,
            vec![Rule::RequiredLabels(vec![LabelRequirement::new(
                team, None,
            )])],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let writes = || -> Vec<String> {
            asked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .filter(|line| !line.starts_with("GET "))
                .cloned()
                .collect()
        };
        for confirms in [0, 1, 2, 3] {
            let job = AuditJob {
                cluster: "c1".to_owned(),
                client: client.clone(),
                boundary: Name::parse("shop").unwrap_or_else(|e| panic!("{e}")),
                policies: vec![("etag".to_owned(), policy.clone())],
                exceptions: Vec::new(),
                fence: Fence::over("c1", Countdown::new(confirms)),
            };
            let Some(job) = controller
                .audits
                .offer(job, confirms.to_string(), Duration::ZERO)
            else {
                panic!("the audit is due");
            };
            audit::run(
                &controller.audits,
                &*controller.records,
                "i1",
                job,
                Duration::from_secs(5),
            )
            .await;
            if confirms == 0 {
                let asked = asked.lock().unwrap_or_else(|e| e.into_inner()).clone();
                assert!(asked.is_empty(), "not even read: {asked:?}");
            }
            if confirms < 3 {
                assert_eq!(writes(), Vec::<String>::new(), "{confirms} confirms");
            }
        }
        // Confirmed before the read, the results and the reports: the report is written.
        assert!(
            writes().iter().any(|line| line.contains("/reports")),
            "{:?}",
            writes()
        );
    }
}
