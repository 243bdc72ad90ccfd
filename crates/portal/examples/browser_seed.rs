//! Pre-seeds a `palisade serve` data directory for the portal's browser tests: the demo
//! boundary plus three attached clusters whose status a reconciler would have recorded
//! (enforced; not enforced on Kubernetes 1.29; not checked yet) and one policy's install
//! status. There is no API to set statuses (the reconciler records them), so the tests start
//! the server with `--no-reconciler` on a store seeded here.
//!
//! `cargo run -p palisade-portal --example browser_seed -- <data-dir>`

use anyhow::Context;
use palisade_policy::Catalog;
use palisade_server::sealing::SealingKey;

const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443', certificate-authority-data: AA==}}]
users: [{name: u, user: {token: not-a-real-token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
";

/// A cluster as a reconciler would have recorded it.
struct Seeded {
    name: &'static str,
    version: Option<&'static str>,
    enforced: Option<bool>,
    reason: Option<&'static str>,
}

const SEEDED: [Seeded; 3] = [
    Seeded {
        name: "prod-1",
        version: Some("1.31.2"),
        enforced: Some(true),
        reason: None,
    },
    Seeded {
        name: "legacy-1",
        version: Some("1.29.4"),
        enforced: Some(false),
        reason: Some("Kubernetes 1.29 is older than 1.30"),
    },
    Seeded {
        name: "edge-1",
        version: None,
        enforced: None,
        reason: None,
    },
];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .context("usage: browser_seed <data-dir>")?;
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir)?;
    let store =
        palisade_store::connect(&format!("sqlite://{}", dir.join("palisade.db").display())).await?;
    let key = SealingKey::load_or_create(&dir)?;
    palisade_server::demo::load(store.as_ref(), &Catalog::builtin()).await?;
    for seeded in SEEDED {
        store
            .put_cluster(seeded.name, &key.seal(KUBECONFIG.as_bytes()))
            .await?;
        store
            .set_cluster_status(seeded.name, seeded.version, seeded.enforced, seeded.reason)
            .await?;
        store.attach_cluster("shop", seeded.name).await?;
    }
    // The install status a reconciler would have recorded for the demo's `trusted` policy.
    let trusted = store.get_policy("shop", "trusted").await?;
    store
        .replace_policy_statuses(
            "prod-1",
            "shop",
            vec![palisade_store::PolicyStatusRecord {
                boundary: "shop".into(),
                policy: "trusted".into(),
                cluster: "prod-1".into(),
                policy_etag: trusted.etag,
                status: "enforced".into(),
                updated_at: palisade_store::now(),
            }],
        )
        .await?;
    println!("seeded {}", dir.display());
    Ok(())
}
