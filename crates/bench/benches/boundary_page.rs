//! Server-side time of a boundary page with 1,000 resources and 50 policies (goal: < 50 ms):
//! `render` is the rendering alone (data already read); `handler` is the whole GET through the
//! router on SQLite (session check, store reads, policy decoding, grandfathering, rendering).

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use criterion::{criterion_group, criterion_main, Criterion};
use http_body_util::BodyExt;
use palisade_app::{Caller, Role};
use palisade_policy::Catalog;
use palisade_server::AppState;
use palisade_server::SealingKey;
use palisade_store::{NewResource, PolicyWrite};
use serde_json::json;
use tower::ServiceExt;

const RESOURCES: usize = 1000;
const POLICIES: usize = 50;

struct Fixture {
    _dir: tempfile::TempDir,
    state: AppState,
    router: Router,
    cookie: String,
}

fn policy_spec(i: usize) -> serde_json::Value {
    let mut rules =
        vec![json!({"allowedComputePlans": {"plans": ["small", "medium", "valkey/small"]}})];
    if i.is_multiple_of(2) {
        rules.push(json!({"requiredLabels": {"labels": [{"key": "team"}, {"key": "tier", "value": format!("t{i}")}]}}));
    }
    if i.is_multiple_of(3) {
        rules.push(
            json!({"allowedRegistries": {"registries": ["ghcr.io/acme", "docker.io/library"]}}),
        );
    }
    if i.is_multiple_of(5) {
        rules.push(json!({"disallowLatestTag": {}}));
    }
    json!({"mode": if i.is_multiple_of(7) { "audit" } else { "enforce" }, "rules": rules})
}

#[path = "support/resources.rs"]
mod resources;

use resources::resource;

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("palisade.db").display());
    let store = palisade_store::connect(&url).await.unwrap();
    let admin_path = palisade_app::caller::bootstrap_admin(store.as_ref(), dir.path())
        .await
        .unwrap()
        .unwrap();
    let admin = std::fs::read_to_string(admin_path)
        .unwrap()
        .trim()
        .to_owned();
    store.create_boundary("shop", Some("Shop")).await.unwrap();
    // Resources first, so those on 'large' are grandfathered once the policies exist.
    for i in 0..RESOURCES {
        let (ty, body) = resource(i);
        let name = body["name"].as_str().unwrap();
        let new = NewResource::unplaced("shop", ty, name, body.to_string());
        store.create_resource(new, None, None).await.unwrap();
    }
    let writes = (0..POLICIES)
        .map(|i| {
            let metadata = json!({"labels": {}, "annotations": {}});
            let spec = policy_spec(i).to_string();
            PolicyWrite::unconditional("shop", format!("policy-{i:02}"), spec, metadata.to_string())
        })
        .collect();
    store.apply_policies(writes, "bench").await.unwrap();
    for (name, enforced, reason) in [
        ("prod-1", Some(true), None),
        (
            "legacy-1",
            Some(false),
            Some("Kubernetes 1.29 is older than 1.30"),
        ),
    ] {
        store.put_cluster(name, b"sealed", None).await.unwrap();
        store
            .set_cluster_status(name, Some("1.31.0"), enforced, reason)
            .await
            .unwrap();
        store.attach_cluster("shop", name).await.unwrap();
    }
    let state = AppState::new(store, Catalog::builtin(), SealingKey::random());
    let router = palisade_server::app_with(state.clone(), palisade_portal::router());
    let cookie = sign_in(&router, &admin).await;
    Fixture {
        _dir: dir,
        state,
        router,
        cookie,
    }
}

async fn call(router: &Router, request: Request<Body>) -> (StatusCode, Vec<String>, String) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let cookies = response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_owned())
        .collect();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, cookies, String::from_utf8_lossy(&body).into_owned())
}

async fn sign_in(router: &Router, token: &str) -> String {
    let (_, cookies, body) = call(
        router,
        Request::get("/sign-in").body(Body::empty()).unwrap(),
    )
    .await;
    let marker = "name=\"csrf\" value=\"";
    let start = body.find(marker).unwrap() + marker.len();
    let csrf = &body[start..start + body[start..].find('"').unwrap()];
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("csrf", csrf)
        .append_pair("token", token)
        .finish();
    let request = Request::post("/sign-in")
        .header(header::COOKIE, cookies.join("; "))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form))
        .unwrap();
    let (status, cookies, _) = call(router, request).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    cookies
        .into_iter()
        .find(|c| c.starts_with("palisade_session="))
        .unwrap()
}

fn boundary_page(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fixture = runtime.block_on(fixture());
    let caller = Caller {
        token_id: "bench".into(),
        role: Role::Admin,
    };
    let data = runtime
        .block_on(palisade_portal::load_boundary_page(
            &fixture.state,
            &caller,
            "shop",
            None,
        ))
        .unwrap();
    assert_eq!(data.resources.len(), RESOURCES);
    assert_eq!(data.policies.len(), POLICIES);
    let html = palisade_portal::render_boundary_page(&data, palisade_portal::Lang::En);
    println!(
        "boundary page: {} resources, {} policies, {} grandfathered, {} KiB of HTML",
        data.resources.len(),
        data.policies.len(),
        data.grandfathered.as_ref().map(Vec::len).unwrap_or(0),
        html.len() / 1024
    );

    let mut group = c.benchmark_group("boundary_page_1000_resources_50_policies");
    group.sample_size(30);
    group.bench_function("render", |b| {
        b.iter(|| palisade_portal::render_boundary_page(&data, palisade_portal::Lang::En))
    });
    group.bench_function("handler", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let request = Request::get("/boundaries/shop")
                    .header(header::COOKIE, &fixture.cookie)
                    .body(Body::empty())
                    .unwrap();
                let (status, _, body) = call(&fixture.router, request).await;
                assert_eq!(status, StatusCode::OK);
                body.len()
            })
        })
    });
    group.finish();
}

criterion_group!(benches, boundary_page);
criterion_main!(benches);
