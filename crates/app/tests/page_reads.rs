//! What one page reads from the store grows with the page, not with the boundary (issue 42,
//! item 8: a preview page of a boundary with 105,000 resources read and judged every one of
//! them, each page of the store's list from the boundary's first resource, and took minutes).
//!
//! Counted: the rows the SQLite store's statements return, as the database driver reports each
//! statement it ran (its `sqlx::query` events, which carry `rows_returned`), summed by a
//! subscriber of this test binary's own. A boundary of 1,200 resources, one in ten of each type
//! on a plan the policy disallows: a page reads its own rows (at most one more of each set of
//! plans the policy disallows), the sets of plans, and the few rows of the boundary, its
//! policies, clusters and exceptions; before, every page read all 1,200.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use palisade_app::paging::PageRequest;
use palisade_app::resources::ResourceFilter;
use palisade_app::{App, Caller, Role, SealingKey};
use palisade_policy::Catalog;
use palisade_store::{NewResource, PolicyWrite};
use palisade_testkit::resources::{mixed, Mixed};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

const RESOURCES: usize = 1200;
/// The sets of plans the policy disallows: `large` of each of the four types.
const DISALLOWED_GROUPS: u64 = 4;
/// The rows a page reads besides its resources: the boundary (once per store read of a
/// list), the sets of plans (8), the policy, clusters and exceptions (a handful).
const BESIDES: u64 = 30;

/// Rows returned by every statement the driver ran since the start.
static ROWS: AtomicU64 = AtomicU64::new(0);

struct CountRows;

struct RowsReturned(u64);

impl Visit for RowsReturned {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "rows_returned" {
            self.0 += value;
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, u64::try_from(value).unwrap_or(0));
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl<S: tracing::Subscriber> Layer<S> for CountRows {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() == "sqlx::query" {
            let mut rows = RowsReturned(0);
            event.record(&mut rows);
            ROWS.fetch_add(rows.0, Ordering::SeqCst);
        }
    }
}

/// What `read` returns and how many rows the store returned while it ran.
async fn counted<T>(read: impl std::future::Future<Output = T>) -> (T, u64) {
    let before = ROWS.load(Ordering::SeqCst);
    let value = read.await;
    (value, ROWS.load(Ordering::SeqCst) - before)
}

fn resource(i: usize) -> (String, serde_json::Value) {
    let plan = if (i / 4).is_multiple_of(10) {
        "large"
    } else {
        "small"
    };
    let how = Mixed {
        plan,
        valkey_plan: plan,
        app_labels: false,
    };
    mixed(i, how)
}

fn page(limit: u32, continue_token: Option<String>) -> PageRequest {
    PageRequest {
        limit: Some(limit),
        continue_token,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_reads_rows_of_its_own_not_the_boundary_s() {
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(CountRows))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("palisade.db").display());
    let store = palisade_store::connect(&url).await.unwrap();
    store.create_boundary("shop", None).await.unwrap();
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..RESOURCES {
        let store = Arc::clone(&store);
        writes.spawn(async move {
            let (resource_type, body) = resource(i);
            let name = body["name"].as_str().unwrap();
            let resource = NewResource::unplaced("shop", resource_type, name, body.to_string());
            store.create_resource(resource, None, None).await.unwrap();
        });
        if writes.len() >= 64 {
            writes.join_next().await.unwrap().unwrap();
        }
    }
    while let Some(done) = writes.join_next().await {
        done.unwrap();
    }
    let spec = json!({"rules": [{"allowedComputePlans": {"plans": ["small", "medium"]}}]});
    let metadata = json!({"labels": {}, "annotations": {}});
    let write = PolicyWrite::unconditional("shop", "sizes", spec.to_string(), metadata.to_string());
    store.apply_policies(vec![write], "test").await.unwrap();
    let app = App::new(store, Catalog::builtin(), SealingKey::random());
    let caller = Caller {
        token_id: "test".into(),
        role: Role::Admin,
    };
    let access = app.open(&caller, "shop").await.unwrap();
    let spec = spec.to_string().into_bytes();
    let grandfathered = (RESOURCES / 10) as u64;

    // The whole preview, as `palisade preview` reads it, for what the pages must add up to.
    let (whole, _) =
        counted(app.preview_policy_page(&access, "sizes", &spec, &page(1000, None))).await;
    let whole = whole.unwrap();
    assert_eq!(whole.summary.resources_grandfathered, grandfathered);
    assert_eq!(whole.grandfathered.len() as u64, grandfathered);
    assert_eq!(whole.continue_token, None);

    // Pages of 10 and of 50, each from the first on: each reads its own rows and one more of
    // each disallowed set of plans, whatever its place in the list.
    for limit in [10, 50] {
        let mut next = None;
        let mut listed = Vec::new();
        let mut pages = 0;
        loop {
            let (answer, rows) = counted(app.preview_policy_page(
                &access,
                "sizes",
                &spec,
                &page(limit, next.take()),
            ))
            .await;
            let answer = answer.unwrap();
            pages += 1;
            assert_eq!(answer.summary, whole.summary, "page {pages} of {limit}");
            let bound = DISALLOWED_GROUPS * (u64::from(limit) + 1) + BESIDES;
            assert!(
                rows >= answer.grandfathered.len() as u64 && rows <= bound,
                "page {pages} of {limit} read {rows} rows of the store, more than {bound}"
            );
            listed.extend(answer.grandfathered);
            match answer.continue_token {
                Some(token) => next = Some(token),
                None => break,
            }
        }
        assert_eq!(listed, whole.grandfathered, "pages of {limit}");
        assert_eq!(pages, grandfathered.div_ceil(u64::from(limit)));
    }

    // The same holds for the list of grandfathered resources...
    let filter = ResourceFilter {
        grandfathered: true,
        ..ResourceFilter::default()
    };
    let (list, rows) = counted(app.list_resources(&access, &filter, &page(10, None))).await;
    let list = list.unwrap();
    assert_eq!(list.items.len(), 10);
    let bound = DISALLOWED_GROUPS * 11 + BESIDES;
    assert!(
        rows <= bound,
        "a list page read {rows} rows, more than {bound}"
    );

    // ... and the boundary page reads its page of resources and the grandfathered ones.
    let (overview, rows) = counted(app.overview(&access, None)).await;
    let overview = overview.unwrap();
    assert_eq!(overview.resources.len(), 1000);
    let shown = overview.grandfathered.map(|g| g.len()).unwrap() as u64;
    assert_eq!(shown, grandfathered);
    let bound = 1001 + grandfathered + BESIDES;
    assert!(
        rows <= bound,
        "the overview read {rows} rows, more than {bound}"
    );
}
