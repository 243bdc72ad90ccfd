//! The whole role matrix of SPEC 4.1: every endpoint x (no token, admin, boundary-admin and
//! developer of the boundary, boundary-admin and developer of another boundary), each on a
//! fresh store, asserting the exact status.

use crate::common::{app_resource, plans, shop, TestApp, KUBECONFIG};
use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

struct Fixture {
    app: TestApp,
    tokens: Vec<Option<String>>,
    developer_token_id: String,
}

/// Columns of the matrix.
const ROLES: [&str; 6] = [
    "none",
    "admin",
    "ba-own",
    "dev-own",
    "ba-other",
    "dev-other",
];

async fn make_fixture() -> Fixture {
    let app = shop().await;
    app.boundary("other").await;
    app.policy("shop", "p", plans(&["small", "medium"])).await;
    let answer = app.admin_create(app_resource("web", "small")).await;
    assert_eq!(answer.status, StatusCode::CREATED);
    let answer = app.put_cluster("c1", KUBECONFIG).await;
    assert_eq!(answer.status, StatusCode::CREATED);
    let answer = app.attach("shop", "c1").await;
    assert_eq!(answer.status, StatusCode::OK);
    let dev = app.new_token("developer", Some("shop")).await;
    let developer_token_id = dev.body["id"].as_str().unwrap().to_owned();
    let tokens = vec![
        None,
        Some(app.admin.clone()),
        Some(app.token("boundary-admin", Some("shop")).await),
        Some(dev.body["secret"].as_str().unwrap().to_owned()),
        Some(app.token("boundary-admin", Some("other")).await),
        Some(app.token("developer", Some("other")).await),
    ];
    Fixture {
        app,
        tokens,
        developer_token_id,
    }
}

struct Row {
    method: Method,
    path: &'static str,
    body: Option<Value>,
    /// Expected status per role column (after `none`, which is always 401).
    expect: [u16; 5],
}

fn row(method: Method, path: &'static str, body: Option<Value>, expect: [u16; 5]) -> Row {
    Row {
        method,
        path,
        body,
        expect,
    }
}

#[tokio::test]
async fn every_endpoint_for_every_role() {
    let rows = vec![
        //                                                                              admin ba-own dev-own ba-oth dev-oth
        row(
            Method::POST,
            "/v1/boundaries",
            Some(json!({"name": "new"})),
            [201, 403, 403, 403, 403],
        ),
        row(
            Method::GET,
            "/v1/boundaries",
            None,
            [200, 200, 200, 200, 200],
        ),
        row(
            Method::GET,
            "/v1/boundaries/shop",
            None,
            [200, 200, 200, 404, 404],
        ),
        row(
            Method::DELETE,
            "/v1/boundaries/other",
            None,
            [204, 404, 404, 403, 403],
        ),
        row(
            Method::GET,
            "/v1/boundaries/shop/policies",
            None,
            [200, 200, 200, 404, 404],
        ),
        row(
            Method::GET,
            "/v1/boundaries/shop/policies/p",
            None,
            [200, 200, 200, 404, 404],
        ),
        row(
            Method::PUT,
            "/v1/boundaries/shop/policies/q",
            Some(plans(&["small"])),
            [201, 201, 403, 404, 404],
        ),
        row(
            Method::DELETE,
            "/v1/boundaries/shop/policies/p",
            None,
            [204, 204, 403, 404, 404],
        ),
        row(
            Method::GET,
            "/v1/boundaries/shop/policies/p/history",
            None,
            [200, 200, 200, 404, 404],
        ),
        row(
            Method::POST,
            "/v1/boundaries/shop/policies/p/rollback",
            Some(json!({"version": 1})),
            [200, 200, 403, 404, 404],
        ),
        row(
            Method::POST,
            "/v1/boundaries/shop/resources",
            Some(json!({"type": "valkey", "name": "c", "plan": "small"})),
            [201, 201, 201, 404, 404],
        ),
        row(
            Method::GET,
            "/v1/boundaries/shop/resources",
            None,
            [200, 200, 200, 404, 404],
        ),
        row(
            Method::GET,
            "/v1/boundaries/shop/resources/app/web",
            None,
            [200, 200, 200, 404, 404],
        ),
        row(
            Method::PATCH,
            "/v1/boundaries/shop/resources/app/web",
            Some(json!({"plan": "medium"})),
            [200, 200, 200, 404, 404],
        ),
        row(
            Method::DELETE,
            "/v1/boundaries/shop/resources/app/web",
            None,
            [204, 204, 204, 404, 404],
        ),
        row(
            Method::GET,
            "/v1/boundaries/shop/plans?type=app",
            None,
            [200, 200, 200, 404, 404],
        ),
        row(
            Method::POST,
            "/v1/tokens",
            Some(json!({"role": "developer", "boundary": "shop"})),
            // 404 before 403 (SPEC 2.4) for another boundary's boundary-admin, as on a path;
            // a developer may send no token body at all, so its role is refused first.
            [201, 201, 403, 404, 403],
        ),
        row(
            Method::POST,
            "/v1/tokens",
            Some(json!({"role": "boundary-admin", "boundary": "shop"})),
            [201, 403, 403, 404, 403],
        ),
        row(
            Method::POST,
            "/v1/tokens",
            Some(json!({"role": "admin"})),
            [201, 403, 403, 403, 403],
        ),
        row(Method::GET, "/v1/tokens", None, [200, 200, 403, 200, 403]),
        row(
            Method::DELETE,
            "/v1/tokens/{dev}",
            None,
            [204, 204, 403, 404, 404],
        ),
        row(Method::GET, "/v1/clusters", None, [200, 403, 403, 403, 403]),
        row(
            Method::PUT,
            "/v1/clusters/c2",
            Some(json!({"kubeconfig": KUBECONFIG})),
            [201, 403, 403, 403, 403],
        ),
        row(
            Method::GET,
            "/v1/clusters/c1",
            None,
            [200, 403, 403, 403, 403],
        ),
        row(
            Method::DELETE,
            "/v1/clusters/c1?force=true",
            None,
            [204, 403, 403, 403, 403],
        ),
        // The role is checked before the cluster is contacted (here: nothing listens, 503).
        row(
            Method::PUT,
            "/v1/boundaries/shop/clusters/c1/namespaces/web",
            None,
            [503, 503, 403, 404, 404],
        ),
        row(
            Method::GET,
            "/v1/boundaries/shop/namespaces",
            None,
            [200, 200, 200, 404, 404],
        ),
        row(
            Method::DELETE,
            "/v1/boundaries/shop/clusters/c1/namespaces/web",
            None,
            [404, 404, 403, 404, 404],
        ),
        row(
            Method::GET,
            "/v1/boundaries/shop/clusters",
            None,
            [200, 200, 403, 404, 404],
        ),
        row(
            Method::PUT,
            "/v1/boundaries/shop/clusters/c1",
            None,
            [200, 403, 403, 404, 404],
        ),
        row(
            Method::DELETE,
            "/v1/boundaries/shop/clusters/c1",
            None,
            [204, 403, 403, 404, 404],
        ),
    ];
    let mut checked = 0;
    for row in &rows {
        for (column, role) in ROLES.iter().enumerate() {
            let fixture = make_fixture().await;
            let path = row.path.replace("{dev}", &fixture.developer_token_id);
            let answer = fixture
                .app
                .call(
                    row.method.clone(),
                    &path,
                    fixture.tokens[column].as_deref(),
                    row.body.clone(),
                )
                .await;
            let expected = if column == 0 {
                401
            } else {
                row.expect[column - 1]
            };
            assert_eq!(
                answer.status.as_u16(),
                expected,
                "{} {} as {role}: {:?}",
                row.method,
                path,
                answer.body
            );
            checked += 1;
        }
    }
    // Lists show only the caller's boundaries.
    let fixture = make_fixture().await;
    let answer = fixture
        .app
        .call(
            Method::GET,
            "/v1/boundaries",
            fixture.tokens[3].as_deref(),
            None,
        )
        .await;
    assert_eq!(answer.items("name"), ["shop"]);
    // The apply endpoint: a developer may not (403 before its body is read), a boundary-admin
    // may only for its boundary.
    let doc = "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: q, boundary: shop}\nspec: {rules: [{disallowLatestTag: {}}]}\n";
    for (column, expected) in [(1, 200), (2, 200), (3, 403), (4, 404), (5, 403)] {
        let fixture = make_fixture().await;
        let answer = fixture
            .app
            .raw(
                Method::POST,
                "/v1/apply",
                fixture.tokens[column].as_deref(),
                Some(doc),
                Some("application/yaml"),
                &[],
            )
            .await;
        assert_eq!(
            answer.status.as_u16(),
            expected,
            "apply as {}",
            ROLES[column]
        );
        checked += 1;
    }
    eprintln!("auth matrix: {checked} (endpoint, role) pairs checked");
}

#[tokio::test]
async fn tokens_are_random_hashed_and_expire() {
    let fixture = make_fixture().await;
    let app = &fixture.app;
    let a = app.token("developer", Some("shop")).await;
    let b = app.token("developer", Some("shop")).await;
    assert_ne!(a, b);
    // pal_<16 hex id>_<43 base64url chars = 256 bits>
    assert!(a.starts_with("pal_") && a.as_bytes()[20] == b'_', "{a}");
    assert!(a[4..20].chars().all(|c| c.is_ascii_hexdigit()), "{a}");
    let secret = &a[21..];
    assert_eq!(secret.len(), 43);
    let listed = app.admin_get("/v1/tokens").await;
    assert!(
        !listed.body.to_string().contains(secret),
        "secrets are never listed"
    );
    // Revoked tokens stop working.
    let created = app
        .admin(
            Method::POST,
            "/v1/tokens",
            Some(json!({"role": "developer", "boundary": "shop", "expires_in_days": 1})),
        )
        .await;
    assert!(created.body["expires_at"].is_string());
    let id = created.body["id"].as_str().unwrap();
    let token = created.body["secret"].as_str().unwrap();
    let ok = app.get("/v1/boundaries", token).await;
    assert_eq!(ok.status, StatusCode::OK);
    let answer = app
        .admin(Method::DELETE, &format!("/v1/tokens/{id}"), None)
        .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    let gone = app.get("/v1/boundaries", token).await;
    assert_eq!(gone.status, StatusCode::UNAUTHORIZED);
}

#[cfg(unix)]
#[tokio::test]
async fn the_admin_token_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let app = TestApp::sqlite().await;
    let mode = std::fs::metadata(app.dir.path().join("admin.token"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // A second start on the same store makes no second token.
    let again = palisade_app::caller::bootstrap_admin(app.store.as_ref(), app.dir.path())
        .await
        .unwrap();
    assert_eq!(again, None);
}

/// The last admin token cannot be revoked (409 `conflict` saying what to do first): with no
/// admin token left no one could manage tokens or clusters again. With another one, it can.
#[tokio::test]
async fn the_last_admin_token_is_not_revoked() {
    let app = TestApp::sqlite().await;
    let listed = app.admin_get("/v1/tokens").await;
    let first = listed.body["items"][0]["id"].as_str().unwrap().to_owned();
    let refused = app
        .admin(Method::DELETE, &format!("/v1/tokens/{first}"), None)
        .await;
    refused.assert_refusal(
        StatusCode::CONFLICT,
        "conflict",
        format!("token '{first}' is the last admin token: create another admin token first"),
    );
    assert_eq!(
        app.admin_get("/v1/tokens").await.status,
        StatusCode::OK,
        "it still works"
    );
    // Another admin token: the first one may go (even by itself), and then the other is last.
    let second = app
        .admin(Method::POST, "/v1/tokens", Some(json!({"role": "admin"})))
        .await;
    let (second_id, second_secret) = (
        second.body["id"].as_str().unwrap().to_owned(),
        second.body["secret"].as_str().unwrap().to_owned(),
    );
    let gone = app
        .admin(Method::DELETE, &format!("/v1/tokens/{first}"), None)
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{gone:?}");
    let refused = app
        .delete(&format!("/v1/tokens/{second_id}"), &second_secret)
        .await;
    refused.assert_error(
        StatusCode::CONFLICT,
        format!("token '{second_id}' is the last admin token: create another admin token first"),
    );
}
