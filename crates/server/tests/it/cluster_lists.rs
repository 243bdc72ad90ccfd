//! The cluster lists page like every list (SPEC 4.1): `?limit=N&continue=...`, and a bad
//! `limit` is a 400 naming `/limit` (a bad `continue`: see `hardening.rs`). A cluster shows
//! the admission layout in use in it and why (SPEC 3.4) once the reconciler has said.

use crate::common::{shop, TestApp, KUBECONFIG};
use axum::http::StatusCode;
use serde_json::json;

#[tokio::test]
async fn cluster_lists_page_and_refuse_a_bad_limit() {
    let app = shop().await;
    for name in ["c3", "c1", "c2"] {
        let answer = app.put_cluster(name, KUBECONFIG).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let answer = app.attach("shop", name).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    }
    for list in ["/v1/clusters", "/v1/boundaries/shop/clusters"] {
        let first = app.admin_get(&format!("{list}?limit=2")).await;
        assert_eq!(first.status, StatusCode::OK, "{list}: {first:?}");
        assert_eq!(first.items("name"), ["c1", "c2"], "{list}");
        let token = first.body["continue"].as_str().unwrap();
        let rest = app
            .admin_get(&format!("{list}?limit=2&continue={token}"))
            .await;
        assert_eq!(rest.items("name"), ["c3"], "{list}");
        assert!(
            rest.body.get("continue").is_none(),
            "{list}: {:?}",
            rest.body
        );
        let all = app.admin_get(list).await;
        assert_eq!(all.items("name"), ["c1", "c2", "c3"], "{list}");
        for (query, message) in [
            ("?limit=0", "/limit: must be from 1 to 1000, got 0"),
            ("?limit=1001", "/limit: must be from 1 to 1000, got 1001"),
        ] {
            let answer = app.admin_get(&format!("{list}{query}")).await;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{list}{query}");
            assert_eq!(answer.message(), message, "{list}{query}");
        }
        let answer = app.admin_get(&format!("{list}?limit=abc")).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{list}?limit=abc");
        assert!(
            answer.message().starts_with("/limit: "),
            "{list}?limit=abc: {}",
            answer.message()
        );
    }
}

#[tokio::test]
async fn a_cluster_shows_its_admission_layout_and_why_once_known() {
    let app = shop().await;
    let answer = app.put_cluster("c1", KUBECONFIG).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    app.attach("shop", "c1").await;

    let unknown = app.admin_get("/v1/clusters/c1").await;
    assert_eq!(unknown.status, StatusCode::OK, "{unknown:?}");
    assert!(unknown.body.get("layout").is_none(), "{:?}", unknown.body);

    app.store
        .set_cluster_layout("c1", "shared", "212 boundaries")
        .await
        .unwrap();
    let known = app.admin_get("/v1/clusters/c1").await;
    assert_eq!(known.status, StatusCode::OK, "{known:?}");
    assert_eq!(
        serde_json::to_string(&known.body["layout"]).unwrap(),
        r#"{"name":"shared","reason":"212 boundaries"}"#
    );
    for list in ["/v1/clusters", "/v1/boundaries/shop/clusters"] {
        let answer = app.admin_get(list).await;
        assert_eq!(
            answer.body["items"][0]["layout"],
            json!({"name": "shared", "reason": "212 boundaries"}),
            "{list}: {:?}",
            answer.body
        );
    }
}

#[tokio::test]
async fn the_openapi_document_names_the_paging_parameters_of_cluster_lists() {
    let app = TestApp::sqlite().await;
    let answer = app.admin_get("/openapi.json").await;
    for path in ["/v1/clusters", "/v1/boundaries/{boundary}/clusters"] {
        let parameters = answer.body["paths"][path]["get"]["parameters"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for name in ["limit", "continue"] {
            assert!(
                parameters.iter().any(|p| p["name"] == name),
                "{path} lacks {name}: {parameters:?}"
            );
        }
    }
}
