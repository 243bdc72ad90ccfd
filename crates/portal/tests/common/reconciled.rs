//! Cluster and policy statuses exactly as palisade's reconciler records them, made with the
//! reconciler's own functions and texts (never typed here), for the demo boundary `shop`.
//! Shared by the in-process portal tests and the browser tests' seeder
//! (`examples/browser_seed.rs`), so neither can show a status the reconciler does not write.

use palisade_api_types::view::InstallStatus;
use palisade_reconciler::controller::{status_error, status_not_enforced};
use palisade_reconciler::probe::{too_old, NOT_SERVED};
use palisade_store::{PolicyStatusRecord, Store, StoreError};

/// The demo policies with admission rules (the ones a reconciler records a status for).
pub const POLICIES: [&str; 2] = ["owner-label", "trusted"];

/// One attached cluster as the reconciler leaves it after a pass.
pub struct Reconciled {
    pub name: &'static str,
    /// `/version`'s `gitVersion`, as the reconciler records it.
    pub version: Option<&'static str>,
    pub enforced: Option<bool>,
    pub reason: Option<String>,
    pub last_error: Option<String>,
    /// `(policy, status)` for each policy of [`POLICIES`]; none: `pending` in the API.
    pub statuses: Vec<(&'static str, String)>,
}

/// Why a cluster nothing listens on failed, in the reconciler's words.
pub fn connection_refused() -> String {
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    palisade_reconciler::cause::unreachable(&palisade_reconciler::cause::transport(&refused))
}

/// The clusters of the demo, each in a state the reconciler really produces.
pub fn clusters() -> Vec<Reconciled> {
    let old = too_old("1", 29);
    let each = |status: &str| -> Vec<(&'static str, String)> {
        POLICIES.iter().map(|p| (*p, status.to_owned())).collect()
    };
    vec![
        // Reached and enforcing: one policy confirmed, one just saved (not yet active).
        Reconciled {
            name: "prod-1",
            version: Some("v1.31.2"),
            enforced: Some(true),
            reason: None,
            last_error: None,
            statuses: vec![
                ("owner-label", InstallStatus::Pending.to_string()),
                ("trusted", InstallStatus::Enforced.to_string()),
            ],
        },
        // Enforcing, but no namespace of the boundary to confirm it in.
        Reconciled {
            name: "staging-1",
            version: Some("v1.37.2"),
            enforced: Some(true),
            reason: None,
            last_error: None,
            statuses: each(&InstallStatus::Installed.to_string()),
        },
        // Too old: nothing written, every policy says why.
        Reconciled {
            name: "legacy-1",
            version: Some("v1.29.4"),
            enforced: Some(false),
            statuses: each(&status_not_enforced(old.as_deref().unwrap_or_default()).to_string()),
            reason: old,
            last_error: None,
        },
        // New enough, but the API is not served.
        Reconciled {
            name: "noapi-1",
            version: Some("v1.37.2"),
            enforced: Some(false),
            reason: Some(NOT_SERVED.to_owned()),
            last_error: None,
            statuses: each(&status_not_enforced(NOT_SERVED).to_string()),
        },
        // Never reached: the cluster and each policy say why.
        Reconciled {
            name: "edge-1",
            version: None,
            enforced: None,
            reason: None,
            last_error: Some(connection_refused()),
            statuses: each(&status_error(&connection_refused()).to_string()),
        },
    ]
}

/// Registers the clusters (credentials `sealed`), attaches them to `shop` and records their
/// statuses for the policies' current versions.
pub async fn seed(store: &dyn Store, sealed: &[u8]) -> Result<(), StoreError> {
    for cluster in clusters() {
        store.put_cluster(cluster.name, sealed, None).await?;
        store
            .set_cluster_status(
                cluster.name,
                cluster.version,
                cluster.enforced,
                cluster.reason.as_deref(),
            )
            .await?;
        store
            .set_cluster_error(cluster.name, cluster.last_error.as_deref())
            .await?;
        store.attach_cluster("shop", cluster.name).await?;
        let mut records = Vec::new();
        for (policy, status) in &cluster.statuses {
            let etag = store.get_policy("shop", policy).await?.etag;
            records.push(PolicyStatusRecord {
                boundary: "shop".into(),
                policy: (*policy).into(),
                cluster: cluster.name.into(),
                policy_etag: etag,
                status: status.clone(),
                updated_at: palisade_store::now(),
            });
        }
        store
            .replace_policy_statuses(cluster.name, "shop", records)
            .await?;
    }
    Ok(())
}
