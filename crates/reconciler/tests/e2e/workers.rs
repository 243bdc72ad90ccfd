//! Each cluster its own worker (issue 43, item 1): a cluster that stops answering holds up its
//! own next part, never another cluster's. Two clusters share a boundary; one of them is
//! reached through a proxy that goes silent (connections open, nothing forwarded), so its part
//! hangs until the cluster time limit (60 s). A change made meanwhile is enforced in the other
//! cluster while the silent one's part still hangs.

use palisade_testkit::stall::{socket_address, StallProxy};

use crate::fencing::pointed_at;
use crate::serve::Stack;
use crate::support::{plane, requires_label};

/// The API server address of a kubeconfig.
fn server_of(kubeconfig: &str) -> String {
    kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))
        .map(|s| s.trim().to_owned())
        .expect("a server in the kubeconfig")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_cluster_delays_no_other_cluster() {
    let quick = plane("1.37").await;
    let silent = plane("1.30").await;
    let proxy = StallProxy::start(socket_address(&server_of(silent.kubeconfig_yaml()))).await;
    let through_proxy = pointed_at(
        silent.kubeconfig_yaml(),
        &format!("https://{}", proxy.address()),
    );
    let stack = Stack::start(None).await;
    let boundary = stack
        .new_boundary("workers", "quick", quick.kubeconfig_yaml())
        .await;
    stack.add_cluster("silent", &through_proxy, &boundary).await;
    stack.new_namespace(&boundary, "quick", "ns").await;
    stack
        .put_policy(&boundary, "first", requires_label("team"))
        .await;
    stack.wait_enforced(&boundary, "first", "quick").await;
    // No namespace of the boundary there: installed, nothing to probe.
    assert_eq!(
        stack.settled_status(&boundary, "first", "silent").await,
        "installed"
    );

    proxy.stall();
    stack
        .put_policy(&boundary, "second", requires_label("owner"))
        .await;
    stack.wait_enforced(&boundary, "second", "quick").await;
    // The silent cluster's part for this change hangs until its time limit; meanwhile the
    // next change reaches the other cluster.
    let saved = std::time::Instant::now();
    stack
        .put_policy(&boundary, "third", requires_label("tier"))
        .await;
    stack.wait_enforced(&boundary, "third", "quick").await;
    eprintln!(
        "workers: the third change enforced in the other cluster {} ms after its save, \
         while the silent cluster's part hung",
        saved.elapsed().as_millis()
    );
    assert_eq!(
        stack
            .policy_status(&boundary, "second", "silent")
            .await
            .as_deref(),
        Some("pending"),
        "the silent cluster's part had ended before the other cluster took the next change"
    );
    proxy.resume();
}
