//! What the benchmarks on a private control plane share: the layout they render in (`LAYOUT`)
//! and the plane itself with a client and a `ClusterClient` on it.

use palisade_reconciler::{ClusterClient, InLayout, Layout};
use palisade_testkit::control_plane::ControlPlane;

/// `LAYOUT` (`per-policy`, the default, `shared` or `per-boundary`).
pub fn layout_from_env() -> Layout {
    std::env::var("LAYOUT")
        .unwrap_or_else(|_| "per-policy".into())
        .parse()
        .expect("LAYOUT: per-policy, shared or per-boundary")
}

/// A private control plane of `version`, an admin client and a client writing in `layout`.
pub async fn private_plane(
    version: &str,
    layout: Layout,
) -> (ControlPlane, kube::Client, InLayout) {
    let wanted = version.to_owned();
    let plane = tokio::task::spawn_blocking(move || ControlPlane::start(&wanted))
        .await
        .unwrap();
    let client = plane.client().await;
    let cluster = ClusterClient::from_kubeconfig(plane.kubeconfig_yaml())
        .await
        .unwrap()
        .with_layout(layout);
    (plane, client, cluster)
}
