//! Clusters and their attachments, namespaces, policy statuses.

use crate::support::*;

/// The admission layout in use in a cluster and why: unknown until the reconciler says, then
/// the last one said, read back by every way of reading clusters; the cluster's `updated_at`
/// stays (the layout is what the reconciler found, not a change to the cluster).
pub async fn cluster_layout(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.put_cluster("kind-1", b"one", None).await.unwrap();
    store.attach_cluster("b", "kind-1").await.unwrap();
    let before = store.get_cluster("kind-1").await.unwrap();
    assert_eq!(before.admission_layout, None);
    assert_eq!(before.admission_layout_reason, None);

    store
        .set_cluster_layout("kind-1", "per-policy", "chosen by --admission-layout")
        .await
        .unwrap();
    store
        .set_cluster_layout("kind-1", "shared", "212 boundaries")
        .await
        .unwrap();
    let after = store.get_cluster("kind-1").await.unwrap();
    assert_eq!(after.admission_layout.as_deref(), Some("shared"));
    assert_eq!(
        after.admission_layout_reason.as_deref(),
        Some("212 boundaries")
    );
    assert_eq!(after.updated_at, before.updated_at);
    assert_eq!(after.created_at, before.created_at);

    for listed in [
        store.list_clusters().await.unwrap(),
        store.boundary_clusters("b").await.unwrap(),
    ] {
        let layouts: Vec<_> = listed
            .iter()
            .map(|c| {
                (
                    c.admission_layout.as_deref(),
                    c.admission_layout_reason.as_deref(),
                )
            })
            .collect();
        assert_eq!(layouts, [(Some("shared"), Some("212 boundaries"))]);
    }

    assert_not_found(
        store
            .set_cluster_layout("nope", "shared", "1 boundary")
            .await,
    );
    assert_not_found(store.get_cluster("nope").await);
}

pub async fn clusters_and_attachments(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.create_boundary("b2", None).await.unwrap();

    assert!(store.put_cluster("kind-2", b"two", None).await.unwrap());
    assert!(store
        .put_cluster("kind-1", b"\x00sealed\xff", None)
        .await
        .unwrap());
    let c1 = store.get_cluster("kind-1").await.unwrap();
    assert_eq!(c1.kubeconfig_sealed, b"\x00sealed\xff");
    assert_eq!(c1.kubernetes_version, None);
    assert_eq!(c1.admission_enforced, None);
    assert_eq!(c1.admission_reason, None);

    assert!(!store.put_cluster("kind-1", b"rotated", None).await.unwrap());
    let rotated = store.get_cluster("kind-1").await.unwrap();
    assert_eq!(rotated.kubeconfig_sealed, b"rotated");
    assert_eq!(rotated.created_at, c1.created_at);

    store
        .set_cluster_status("kind-1", Some("1.33.1"), Some(false), Some("webhook down"))
        .await
        .unwrap();
    let status = store.get_cluster("kind-1").await.unwrap();
    assert_eq!(status.kubernetes_version.as_deref(), Some("1.33.1"));
    assert_eq!(status.admission_enforced, Some(false));
    assert_eq!(status.admission_reason.as_deref(), Some("webhook down"));
    store
        .set_cluster_status("kind-1", Some("1.33.1"), Some(true), None)
        .await
        .unwrap();
    let status = store.get_cluster("kind-1").await.unwrap();
    assert_eq!(status.admission_enforced, Some(true));
    assert_eq!(status.admission_reason, None);
    assert_not_found(store.set_cluster_status("nope", None, None, None).await);
    assert_not_found(store.get_cluster("nope").await);

    // Repairs: counted, the last one kept with its time.
    assert_eq!(status.repairs, 0);
    assert_eq!((status.last_repair, status.last_repair_at), (None, None));
    store
        .record_repair("kind-1", "namespace web lost its boundary label; restored")
        .await
        .unwrap();
    store
        .record_repair("kind-1", "namespace api lost its boundary label; restored")
        .await
        .unwrap();
    let repaired = store.get_cluster("kind-1").await.unwrap();
    assert_eq!(repaired.repairs, 2);
    assert_eq!(
        repaired.last_repair.as_deref(),
        Some("namespace api lost its boundary label; restored")
    );
    assert!(repaired.last_repair_at.is_some());
    assert_not_found(store.record_repair("nope", "x").await);

    let names: Vec<String> = store
        .list_clusters()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["kind-1", "kind-2"]);

    assert!(store.attach_cluster("b", "kind-2").await.unwrap());
    assert!(store.attach_cluster("b", "kind-1").await.unwrap());
    assert!(!store.attach_cluster("b", "kind-1").await.unwrap());
    assert!(store.attach_cluster("b2", "kind-1").await.unwrap());
    assert_not_found(store.attach_cluster("nope", "kind-1").await);
    assert_not_found(store.attach_cluster("b", "nope").await);
    let attached: Vec<String> = store
        .boundary_clusters("b")
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(attached, ["kind-1", "kind-2"]);
    assert_not_found(store.boundary_clusters("nope").await);

    store.detach_cluster("b", "kind-2").await.unwrap();
    assert_not_found(store.detach_cluster("b", "kind-2").await);
    assert_eq!(store.boundary_clusters("b").await.unwrap().len(), 1);

    // Deleting a cluster detaches it everywhere.
    store.delete_cluster("kind-1").await.unwrap();
    assert!(store.boundary_clusters("b").await.unwrap().is_empty());
    assert!(store.boundary_clusters("b2").await.unwrap().is_empty());
    assert_not_found(store.get_cluster("kind-1").await);
    assert_not_found(store.delete_cluster("kind-1").await);
    assert_eq!(store.list_clusters().await.unwrap().len(), 1);
}

pub async fn namespaces(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.create_boundary("b2", None).await.unwrap();
    store.put_cluster("c1", b"x", None).await.unwrap();
    store.put_cluster("c2", b"x", None).await.unwrap();
    // Not attached yet.
    assert_not_found(store.put_namespace("b", "c1", "shop", None).await);
    store.attach_cluster("b", "c1").await.unwrap();
    store.attach_cluster("b2", "c1").await.unwrap();
    store.attach_cluster("b", "c2").await.unwrap();
    assert_not_found(store.put_namespace("nope", "c1", "shop", None).await);

    assert!(store.put_namespace("b", "c1", "shop", None).await.unwrap());
    assert!(!store.put_namespace("b", "c1", "shop", None).await.unwrap());
    assert!(store.put_namespace("b", "c2", "shop", None).await.unwrap());
    assert!(store
        .put_namespace("b", "c1", "a-shop", None)
        .await
        .unwrap());
    match store.put_namespace("b2", "c1", "shop", None).await {
        Err(StoreError::Conflict(message)) => assert_eq!(
            message,
            "namespace 'shop' in cluster 'c1' belongs to boundary 'b'"
        ),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let listed: Vec<(String, String)> = store
        .list_namespaces("b")
        .await
        .unwrap()
        .into_iter()
        .map(|n| (n.cluster, n.name))
        .collect();
    assert_eq!(
        listed,
        [
            ("c1".to_owned(), "a-shop".to_owned()),
            ("c1".to_owned(), "shop".to_owned()),
            ("c2".to_owned(), "shop".to_owned())
        ]
    );
    assert_eq!(store.cluster_namespaces("c1").await.unwrap().len(), 2);
    assert_eq!(
        store
            .get_namespace("b", "c1", "shop")
            .await
            .unwrap()
            .boundary,
        "b"
    );
    assert_not_found(store.get_namespace("b2", "c1", "shop").await);

    // A boundary or an attachment with namespaces cannot go.
    match store.delete_boundary("b").await {
        Err(StoreError::Conflict(message)) => assert_eq!(message, "boundary has namespaces"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    match store.detach_cluster("b", "c2").await {
        Err(StoreError::Conflict(message)) => assert_eq!(
            message,
            "boundary 'b' has namespaces in cluster 'c2'; delete them first"
        ),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_not_found(store.delete_namespace("b2", "c1", "shop").await);
    store.delete_namespace("b", "c2", "shop").await.unwrap();
    assert_not_found(store.delete_namespace("b", "c2", "shop").await);
    store.detach_cluster("b", "c2").await.unwrap();

    // Deleting a cluster forgets its namespaces.
    store.delete_cluster("c1").await.unwrap();
    assert!(store.list_namespaces("b").await.unwrap().is_empty());
    store.delete_boundary("b").await.unwrap();
}

pub async fn policy_statuses(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.put_cluster("c1", b"x", None).await.unwrap();
    store.put_cluster("c2", b"x", None).await.unwrap();
    store.attach_cluster("b", "c1").await.unwrap();
    store.attach_cluster("b", "c2").await.unwrap();
    let status = |policy: &str, cluster: &str, text: &str| palisade_store::PolicyStatusRecord {
        boundary: "b".into(),
        policy: policy.into(),
        cluster: cluster.into(),
        policy_etag: "e1".into(),
        status: text.into(),
        updated_at: palisade_store::now(),
    };
    store
        .replace_policy_statuses(
            "c1",
            "b",
            vec![
                status("p", "c1", "enforced"),
                status("q", "c1", "installed"),
            ],
        )
        .await
        .unwrap();
    store
        .replace_policy_statuses("c2", "b", vec![status("p", "c2", "error: unreachable")])
        .await
        .unwrap();
    let read = |records: Vec<palisade_store::PolicyStatusRecord>| -> Vec<(String, String, String)> {
        records
            .into_iter()
            .map(|r| (r.policy, r.cluster, r.status))
            .collect()
    };
    assert_eq!(
        read(store.policy_statuses("b").await.unwrap()),
        [
            ("p".into(), "c1".into(), "enforced".into()),
            ("p".into(), "c2".into(), "error: unreachable".into()),
            ("q".into(), "c1".into(), "installed".into()),
        ]
    );
    // Replacing one cluster's statuses leaves the other's.
    store
        .replace_policy_statuses(
            "c1",
            "b",
            vec![status(
                "p",
                "c1",
                "not enforced: Kubernetes 1.29 is older than 1.30",
            )],
        )
        .await
        .unwrap();
    assert_eq!(store.policy_statuses("b").await.unwrap().len(), 2);
    // Detaching a cluster drops its statuses; so does deleting one.
    store.detach_cluster("b", "c2").await.unwrap();
    assert_eq!(
        read(store.policy_statuses("b").await.unwrap()),
        [(
            "p".into(),
            "c1".into(),
            "not enforced: Kubernetes 1.29 is older than 1.30".into()
        )]
    );
    store.delete_cluster("c1").await.unwrap();
    assert!(store.policy_statuses("b").await.unwrap().is_empty());
}

pub async fn audit_reports(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let report = |policy: &str, cluster: &str, violations: i64| palisade_store::AuditRecord {
        boundary: "b".into(),
        policy: policy.into(),
        cluster: cluster.into(),
        policy_etag: "e1".into(),
        taken_at: palisade_store::now(),
        error: (cluster == "c2").then(|| "connection refused".to_owned()),
        checked: 10,
        violations,
        findings_json: format!("[{violations}]"),
    };
    store
        .replace_audit_reports("c1", "b", vec![report("p", "c1", 2), report("q", "c1", 0)])
        .await
        .unwrap();
    store
        .replace_audit_reports("c2", "b", vec![report("p", "c2", 0)])
        .await
        .unwrap();
    let read = store.audit_reports("b", "p").await.unwrap();
    assert_eq!(
        read,
        vec![report_at(&read[0], "c1", 2), report_at(&read[1], "c2", 0)]
    );
    assert_eq!(read[1].error.as_deref(), Some("connection refused"));
    // Replacing one cluster's reports leaves the other's and drops what is not repeated.
    store
        .replace_audit_reports("c1", "b", vec![report("q", "c1", 1)])
        .await
        .unwrap();
    let clusters: Vec<String> = store
        .audit_reports("b", "p")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.cluster)
        .collect();
    assert_eq!(clusters, ["c2"]);
    assert_eq!(
        store.audit_reports("b", "q").await.unwrap()[0].violations,
        1
    );
}

/// `record` with its cluster and count checked, the rest as read.
fn report_at(
    record: &palisade_store::AuditRecord,
    cluster: &str,
    violations: i64,
) -> palisade_store::AuditRecord {
    assert_eq!(record.cluster, cluster);
    assert_eq!(record.violations, violations);
    assert_eq!(record.findings_json, format!("[{violations}]"));
    record.clone()
}

/// SPEC 3.4 v3.2: a namespace records the uid palisade labelled; a record from before uids
/// learns one once; a namespace found gone reads so, leaves the placements, and is the
/// boundary's again when palisade labels it anew (a new uid). A cluster's reserved names are
/// kept across new credentials unless given.
pub async fn namespace_uids_gone_and_reserved_names(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let reserved = ["monitoring".to_owned(), "ingress".to_owned()];
    assert!(store
        .put_cluster("c1", b"x", Some(&reserved))
        .await
        .unwrap());
    assert_eq!(
        store.get_cluster("c1").await.unwrap().reserved_namespaces,
        reserved
    );
    assert!(!store.put_cluster("c1", b"y", None).await.unwrap());
    assert_eq!(
        store.get_cluster("c1").await.unwrap().reserved_namespaces,
        reserved
    );
    store.put_cluster("c1", b"y", Some(&[])).await.unwrap();
    assert!(store
        .get_cluster("c1")
        .await
        .unwrap()
        .reserved_namespaces
        .is_empty());

    store.attach_cluster("b", "c1").await.unwrap();
    assert!(store
        .put_namespace("b", "c1", "web", Some("uid-1"))
        .await
        .unwrap());
    store.put_namespace("b", "c1", "old", None).await.unwrap();
    let web = store.get_namespace("b", "c1", "web").await.unwrap();
    assert_eq!(
        (web.uid.as_deref(), web.gone_at.as_deref()),
        (Some("uid-1"), None)
    );
    // Learnt once, never overwritten.
    assert!(store
        .learn_namespace_uid("b", "c1", "old", "uid-2")
        .await
        .unwrap());
    assert!(!store
        .learn_namespace_uid("b", "c1", "old", "uid-3")
        .await
        .unwrap());
    assert!(!store
        .learn_namespace_uid("b", "c1", "web", "uid-3")
        .await
        .unwrap());
    assert_eq!(
        store
            .get_namespace("b", "c1", "old")
            .await
            .unwrap()
            .uid
            .as_deref(),
        Some("uid-2")
    );
    // Gone: marked once, out of the placements.
    assert!(store.namespace_gone("b", "c1", "web").await.unwrap());
    assert!(!store.namespace_gone("b", "c1", "web").await.unwrap());
    assert!(store
        .get_namespace("b", "c1", "web")
        .await
        .unwrap()
        .gone_at
        .is_some());
    let placements = store.placements("b").await.unwrap();
    assert_eq!(
        placements,
        [("c1".to_owned(), Some("old".to_owned()))],
        "a gone namespace is no placement"
    );
    // Labelled anew: the new uid, no longer gone.
    assert!(!store
        .put_namespace("b", "c1", "web", Some("uid-4"))
        .await
        .unwrap());
    let web = store.get_namespace("b", "c1", "web").await.unwrap();
    assert_eq!(
        (web.uid.as_deref(), web.gone_at.as_deref()),
        (Some("uid-4"), None)
    );
}
