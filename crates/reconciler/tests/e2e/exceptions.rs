//! Exceptions to admission rules (SPEC 7), as `palisade serve` runs, judged by the API server:
//! in the per-policy, per-boundary and shared layouts on 1.30 and 1.37, an approved exception lets
//! exactly the matched objects past exactly the excepted rule and images, everything else is
//! denied with the messages of SPEC 3.3, and at `expiresAt` the matched object is denied again
//! without any change in the store. The time from `expiresAt` to that first denial is printed
//! (`EXCEPTION_EXPIRIES` rounds, default 1; the benchmark of docs/benchmarks.md runs more, and
//! with `EXCEPTION_CLUSTERS=N` measures it in N clusters at once: N-1 more private control
//! planes attached to the same boundary).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::Api;
use palisade_reconciler::Layout;
use palisade_testkit::control_plane::unique_name;
use serde_json::json;

use crate::serve::Stack;
use crate::support::{in_every_layout, no_latest, plane, retry, verdict};

in_every_layout!(exceptions_hold_and_end_on_time);

/// The message of SPEC 3.3 for `image`.
fn latest(image: &str) -> String {
    palisade_policy::message::image_latest(
        &palisade_policy::Name::parse("no-latest").unwrap(),
        image,
    )
}

async fn exceptions_hold_and_end_on_time(version: &str, layout: Layout) {
    let plane = plane(version).await;
    let admin = plane.client().await;
    let stack = Stack::start_in(layout).await;
    let web = unique_name("web");
    let other = unique_name("other");
    let boundary = stack
        .new_boundary("exc", "k1", plane.kubeconfig_yaml())
        .await;
    for namespace in [&web, &other] {
        stack.add_namespace(&boundary, "k1", namespace).await;
    }
    stack
        .enforce_policy(&boundary, "k1", "no-latest", no_latest())
        .await;
    // More clusters of the same boundary, for the expiry benchmark: private control planes.
    let clusters: usize = std::env::var("EXCEPTION_CLUSTERS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let mut extra_planes = Vec::new();
    let mut admins = vec![admin.clone()];
    for n in 2..=clusters {
        let wanted = version.to_owned();
        let extra = tokio::task::spawn_blocking(move || {
            palisade_testkit::control_plane::ControlPlane::start(&wanted)
        })
        .await
        .unwrap();
        let name = format!("k{n}");
        stack
            .add_cluster(&name, extra.kubeconfig_yaml(), &boundary)
            .await;
        stack.add_namespace(&boundary, &name, &web).await;
        stack.wait_enforced(&boundary, "no-latest", &name).await;
        admins.push(extra.client().await);
        extra_planes.push(extra);
    }
    let legacy = json!({"app": "legacy"});
    let rounds: usize = std::env::var("EXCEPTION_EXPIRIES")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let mut lags = Vec::new();
    for round in 0..rounds {
        // Ends a few seconds from now: long enough to look at it, short enough to wait for.
        let ahead = if round == 0 { 12 } else { 5 };
        let expires_text = (chrono::Utc::now() + chrono::Duration::seconds(ahead))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let expires = chrono::DateTime::parse_from_rfc3339(&expires_text)
            .unwrap()
            .with_timezone(&chrono::Utc);
        let name = format!("legacy-{round}");
        let path = format!("/v1/boundaries/{boundary}/exceptions/{name}");
        stack
            .ok(
                "PUT",
                &path,
                Some(json!({"policy": "no-latest", "match": {"namespaces": [web],
                    "labels": {"app": "legacy"}, "images": ["nginx:latest"]},
                    "expiresAt": expires_text, "reason": "moving to nginx:1.27, OPS-1234"})),
            )
            .await;
        // Installed by the pass the save starts, in every cluster.
        let started = Instant::now();
        for admin in &admins {
            while verdict(admin, &web, legacy.clone(), &["nginx:latest"])
                .await
                .is_some()
            {
                assert!(
                    started.elapsed() < Duration::from_secs(8),
                    "{layout} {version}: the matched Pod is still denied {:?} after the save",
                    started.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        if round == 0 {
            // Confirmed in the cluster like a policy: its probe (a matched violating Pod) was
            // admitted by the API server.
            let what = format!("{layout} {version}: confirmed");
            retry(
                &what,
                Duration::from_secs(8),
                Duration::from_millis(100),
                || async {
                    let shown = stack.ok("GET", &path, None).await;
                    let statuses = shown["clusters"].as_array().cloned().unwrap_or_default();
                    if statuses.len() == clusters
                        && statuses.iter().all(|c| c["status"] == "enforced")
                    {
                        Ok(())
                    } else {
                        Err(shown.to_string())
                    }
                },
            )
            .await;
            // Matched / unmatched / partially matched, with the API server's exact messages.
            let cases: [(&str, serde_json::Value, &[&str], Option<String>); 5] = [
                ("matched", legacy.clone(), &["nginx:latest"], None),
                (
                    "another image of the matched Pod",
                    legacy.clone(),
                    &["nginx:latest", "busybox:latest"],
                    Some(latest("busybox:latest")),
                ),
                (
                    "without the label",
                    json!({}),
                    &["nginx:latest"],
                    Some(latest("nginx:latest")),
                ),
                (
                    "with another label value",
                    json!({"app": "new"}),
                    &["nginx:latest"],
                    Some(latest("nginx:latest")),
                ),
                (
                    "an image not listed",
                    legacy.clone(),
                    &["redis:latest"],
                    Some(latest("redis:latest")),
                ),
            ];
            for (case, labels, images, expected) in cases {
                assert_eq!(
                    verdict(&admin, &web, labels, images).await,
                    expected,
                    "{layout} {version}: {case}"
                );
            }
            assert_eq!(
                verdict(&admin, &other, legacy.clone(), &["nginx:latest"]).await,
                Some(latest("nginx:latest")),
                "{layout} {version}: another namespace"
            );
            // A real legacy Pod: the preview lists it as excepted, not as denied.
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": "legacy-real", "labels": {"app": "legacy"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:latest"}]},
            }))
            .unwrap();
            Api::<Pod>::namespaced(admin.clone(), &web)
                .create(&PostParams::default(), &pod)
                .await
                .unwrap();
            let preview = stack.preview(&boundary, "no-latest").await;
            let cluster = &preview["clusters"][0];
            assert_eq!(
                cluster["denied"],
                json!([]),
                "{layout} {version}: {preview}"
            );
            assert_eq!(
                cluster["excepted"],
                json!([{"kind": "Pod", "namespace": web, "name": "legacy-real", "exception": name}]),
                "{layout} {version}: {preview}"
            );
            // The policy is still confirmed enforced (its probe runs where no exception applies).
            assert_eq!(
                stack
                    .policy_status(&boundary, "no-latest", "k1")
                    .await
                    .as_deref(),
                Some("enforced")
            );
        }
        // Until expiresAt it is admitted; from then on, with no change in the store, the API
        // server denies it again.
        let end = std::time::SystemTime::from(expires);
        if let Ok(wait) = end.duration_since(std::time::SystemTime::now()) {
            tokio::time::sleep(wait.saturating_sub(Duration::from_millis(300))).await;
        }
        assert_eq!(
            verdict(&admin, &web, legacy.clone(), &["nginx:latest"]).await,
            None,
            "{layout} {version}: denied before expiresAt"
        );
        if let Ok(wait) = end.duration_since(std::time::SystemTime::now()) {
            tokio::time::sleep(wait).await;
        }
        // Each cluster's first denial after expiresAt.
        let mut waiting: Vec<&kube::Client> = admins.iter().collect();
        while !waiting.is_empty() {
            let lag = std::time::SystemTime::now()
                .duration_since(end)
                .unwrap_or_default();
            let mut still = Vec::new();
            for admin in waiting {
                if verdict(admin, &web, legacy.clone(), &["nginx:latest"]).await
                    == Some(latest("nginx:latest"))
                {
                    lags.push(lag);
                } else {
                    still.push(admin);
                }
            }
            waiting = still;
            assert!(
                lag < Duration::from_secs(10),
                "{layout} {version}: still admitted {lag:?} after expiresAt"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let shown = stack.ok("GET", &path, None).await;
        // Ended; the pass that removed it may still be recording where it is installed.
        assert_eq!(shown["status"], "expired", "{shown}");
    }
    lags.sort();
    let p = |q: f64| lags[((lags.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    eprintln!(
        "exception expiry {layout} {version}: {rounds} expiries in {clusters} cluster(s), {} first denials, expiresAt to first denial p50 {} ms, p99 {} ms, max {} ms",
        lags.len(),
        p(0.5).as_millis(),
        p(0.99).as_millis(),
        lags.last().map_or(0, |l| l.as_millis())
    );
}

/// An exception that ends while its cluster's API server is down reads `expired; still
/// installed in <cluster>: <why>` and counts on `/metrics` until the cluster answers again;
/// then it is removed and reads `expired`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_that_ends_during_an_outage_says_where_it_is_still_installed() {
    let plane = std::sync::Arc::new(
        tokio::task::spawn_blocking(|| {
            palisade_testkit::control_plane::ControlPlane::start("1.37")
        })
        .await
        .unwrap(),
    );
    let admin = plane.client().await;
    let stack = Stack::start_in(Layout::PerPolicy).await;
    // Its own name: other tests' clusters named k1 share the process's metrics.
    let k = unique_name("k");
    let boundary = stack
        .new_boundary("outage", &k, plane.kubeconfig_yaml())
        .await;
    let web = stack.new_namespace(&boundary, &k, "web").await;
    stack
        .enforce_policy(&boundary, &k, "no-latest", no_latest())
        .await;
    let expires = (chrono::Utc::now() + chrono::Duration::seconds(8))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let path = format!("/v1/boundaries/{boundary}/exceptions/legacy");
    stack
        .ok(
            "PUT",
            &path,
            Some(
                json!({"policy": "no-latest", "match": {"namespaces": [web]},
                "expiresAt": expires, "reason": "r"}),
            ),
        )
        .await;
    let started = Instant::now();
    loop {
        let shown = stack.ok("GET", &path, None).await;
        // Confirmed by its probe: a matched violating Pod is admitted.
        if shown["clusters"] == json!([{"cluster": k, "status": "enforced"}]) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{shown}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Confirmed, so the API server admits what it matches.
    let started = Instant::now();
    while verdict(&admin, &web, json!({}), &["nginx:latest"])
        .await
        .is_some()
    {
        assert!(started.elapsed() < Duration::from_secs(5), "not admitted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Down from before expiresAt until well after it.
    let outage = {
        let plane = plane.clone();
        tokio::task::spawn_blocking(move || plane.restart_apiserver_after(Duration::from_secs(14)))
    };
    let end = chrono::DateTime::parse_from_rfc3339(&expires).unwrap();
    let until_end = (end.with_timezone(&chrono::Utc) - chrono::Utc::now())
        .to_std()
        .unwrap_or_default();
    tokio::time::sleep(until_end + Duration::from_secs(3)).await;
    let shown = stack.ok("GET", &path, None).await;
    let status = shown["status"].as_str().unwrap_or_default().to_owned();
    assert!(
        status.starts_with(&format!("expired; still installed in {k}: ")),
        "{shown}"
    );
    let (_, metrics) = stack.call("GET", "/metrics", None).await;
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    assert!(
        metrics.contains(&format!(
            "palisade_exceptions_ended_still_installed{{cluster=\"{k}\"}} 1"
        )),
        "{metrics}"
    );
    outage.await.unwrap();
    let started = Instant::now();
    loop {
        let shown = stack.ok("GET", &path, None).await;
        if shown["status"] == "expired" && shown.get("clusters").is_none() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{shown}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let started = Instant::now();
    while verdict(&admin, &web, json!({}), &["nginx:latest"]).await != Some(latest("nginx:latest"))
    {
        assert!(started.elapsed() < Duration::from_secs(5), "still admitted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, metrics) = stack.call("GET", "/metrics", None).await;
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    assert!(
        metrics.contains(&format!(
            "palisade_exceptions_ended_still_installed{{cluster=\"{k}\"}} 0"
        )),
        "{metrics}"
    );
}
