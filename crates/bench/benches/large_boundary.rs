//! One boundary with RESOURCES resources (issue 42, item 8: 105,000 of them) on SQLite, as
//! `palisade serve` keeps them by default: the time of what reads them page by page.
//!
//! The store is filled through its API, 64 creates at a time (SQLite's group commit). A tenth
//! of the resources with plans are on `large`; the policy previewed allows `small` and
//! `medium` (saved, and previewed as typed), so it disallows those plans; the boundary has no
//! cluster (the preview's plan part alone). Printed, each as the time of one call:
//!
//! - the store's count of the resources by type and plans (`Store::plan_groups`, one read of
//!   an index), which each preview page makes;
//! - the first preview page (the default limit, 100), as `POST .../preview` answers it;
//! - every page of the whole preview as `palisade preview` and `apply --dry-run` read it
//!   (limit 1000), the first, the slowest and the sum (skipped when the first page took more
//!   than a minute: the sum would take hours);
//! - the boundary page's data (`load_boundary_page`: a page of 1,000 resources and the
//!   grandfathered ones) and its rendering, the first and the last page of
//!   `GET .../resources`, and the first page of `GET .../resources?grandfathered=true`.
//!
//! `cargo bench -p palisade-bench --bench large_boundary -- RESOURCES`

use std::sync::Arc;
use std::time::{Duration, Instant};

use palisade_app::paging::PageRequest;
use palisade_app::resources::ResourceFilter;
use palisade_app::{Caller, Role};
use palisade_policy::Catalog;
use palisade_server::{AppState, SealingKey};
use palisade_store::{NewResource, PolicyWrite};
use palisade_testkit::bench::args_or_usage;
use serde_json::json;

const BOUNDARY: &str = "shop";
const IN_FLIGHT: usize = 64;

#[path = "support/resources.rs"]
mod resources;

use resources::resource;

async fn fill(store: Arc<dyn palisade_store::Store>, resources: usize) {
    let semaphore = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..resources {
        let permit = semaphore.clone().acquire_owned().await.unwrap();
        let store = store.clone();
        tasks.spawn(async move {
            let (ty, body) = resource(i);
            let name = body["name"].as_str().unwrap();
            let resource = NewResource::unplaced(BOUNDARY, ty, name, body.to_string());
            store.create_resource(resource, None, None).await.unwrap();
            drop(permit);
        });
        while tasks.try_join_next().is_some() {}
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

async fn run(resources: usize) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("palisade.db").display());
    let store = palisade_store::connect(&url).await.unwrap();
    store.create_boundary(BOUNDARY, None).await.unwrap();
    let started = Instant::now();
    fill(store.clone(), resources).await;
    println!(
        "large_boundary: {resources} resources stored in {}",
        secs(started.elapsed())
    );
    let spec = json!({"rules": [{"allowedComputePlans": {"plans": ["small", "medium"]}}]});
    // Saved too, so that the boundary page and the lists have resources to grandfather.
    let metadata = json!({"labels": {}, "annotations": {}});
    let write =
        PolicyWrite::unconditional(BOUNDARY, "sizes", spec.to_string(), metadata.to_string());
    store.apply_policies(vec![write], "bench").await.unwrap();
    let state = AppState::new(store.clone(), Catalog::builtin(), SealingKey::random());
    let caller = Caller {
        token_id: "bench".into(),
        role: Role::Admin,
    };
    let access = state.open(&caller, BOUNDARY).await.unwrap();
    let spec = serde_json::to_vec(&spec).unwrap();

    let started = Instant::now();
    let groups = store.plan_groups(BOUNDARY).await.unwrap();
    println!(
        "plan groups (what a preview page counts from): {} ({} groups)",
        secs(started.elapsed()),
        groups.len()
    );

    let started = Instant::now();
    let first = state
        .preview_policy_page(&access, "sizes", &spec, &PageRequest::default())
        .await
        .unwrap();
    let took = started.elapsed();
    let grandfathered = first.summary.resources_grandfathered;
    println!(
        "preview, first page (limit 100): {} ({} of {grandfathered} grandfathered resources listed)",
        secs(took),
        first.grandfathered.len()
    );

    let mut pages = 0;
    let mut listed = 0;
    let mut slowest = Duration::ZERO;
    let mut total = Duration::ZERO;
    let mut next = None;
    loop {
        let page = PageRequest {
            limit: Some(1000),
            continue_token: next.take(),
        };
        let started = Instant::now();
        let answer = state
            .preview_policy_page(&access, "sizes", &spec, &page)
            .await
            .unwrap();
        let took = started.elapsed();
        assert_eq!(answer.summary.resources_grandfathered, grandfathered);
        if pages == 0 {
            println!("preview, first page (limit 1000): {}", secs(took));
        }
        pages += 1;
        listed += answer.grandfathered.len() as u64;
        slowest = slowest.max(took);
        total += took;
        next = answer.continue_token;
        if next.is_none() {
            break;
        }
        if pages == 1 && took > Duration::from_secs(60) {
            println!("preview, whole: not read (its first page took over a minute)");
            break;
        }
    }
    if next.is_none() {
        assert_eq!(listed, grandfathered);
        println!(
            "preview, whole ({pages} pages of 1000): {} in all, slowest page {}",
            secs(total),
            secs(slowest)
        );
    }

    let started = Instant::now();
    let data = palisade_portal::load_boundary_page(&state, &caller, BOUNDARY, None)
        .await
        .unwrap();
    println!(
        "boundary page data: {} ({} resources on it, {} grandfathered)",
        secs(started.elapsed()),
        data.resources.len(),
        data.grandfathered.as_ref().map(Vec::len).unwrap_or(0)
    );
    let started = Instant::now();
    let html = palisade_portal::render_boundary_page(&data, palisade_portal::Lang::En);
    println!(
        "boundary page rendering: {} ({} KiB of HTML)",
        secs(started.elapsed()),
        html.len() / 1024
    );

    let all = ResourceFilter::default();
    let mut page = PageRequest {
        limit: Some(1000),
        continue_token: None,
    };
    let mut pages = 0;
    let mut first = Duration::ZERO;
    let mut last;
    let walk = Instant::now();
    loop {
        let started = Instant::now();
        let list = state.list_resources(&access, &all, &page).await.unwrap();
        let took = started.elapsed();
        if pages == 0 {
            first = took;
        }
        last = took;
        pages += 1;
        match list.continue_token {
            Some(token) => page.continue_token = Some(token),
            None => break,
        }
    }
    println!(
        "resources list ({pages} pages of 1000): first page {}, last page {}, all {}",
        secs(first),
        secs(last),
        secs(walk.elapsed())
    );

    let filter = ResourceFilter {
        grandfathered: true,
        ..ResourceFilter::default()
    };
    let started = Instant::now();
    let list = state
        .list_resources(&access, &filter, &PageRequest::default())
        .await
        .unwrap();
    println!(
        "grandfathered list, first page (limit 100): {} ({} items)",
        secs(started.elapsed()),
        list.items.len()
    );
}

fn main() {
    let usage = "cargo bench -p palisade-bench --bench large_boundary -- RESOURCES";
    let Some(args) = args_or_usage("large_boundary", "a number of resources", usage) else {
        return;
    };
    let resources: usize = args[0].parse().expect("RESOURCES is a number");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(resources));
}
