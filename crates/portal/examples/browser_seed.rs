//! Pre-seeds a `palisade serve` data directory for the portal's browser tests: the demo
//! boundary plus attached clusters and policy statuses exactly as the reconciler records them
//! (`tests/common/reconciled.rs`: enforced, installed, pending, not enforced on Kubernetes
//! 1.29, not enforced without the API, unreachable). There is no API to set statuses (the
//! reconciler records them), so the tests start the server with `--no-reconciler` on a store
//! seeded here.
//!
//! `cargo run -p palisade-portal --example browser_seed -- <data-dir>`

#[path = "../tests/common/reconciled.rs"]
mod reconciled;

use anyhow::Context;
use palisade_policy::Catalog;
use palisade_server::SealingKey;

const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443', certificate-authority-data: AA==}}]
users: [{name: u, user: {token: not-a-real-token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
";

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
    palisade_app::demo::load(store.as_ref(), &Catalog::builtin()).await?;
    reconciled::seed(store.as_ref(), &key.seal(KUBECONFIG.as_bytes())?).await?;
    println!("seeded {}", dir.display());
    Ok(())
}
