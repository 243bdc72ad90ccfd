//! The portal through the router, in-process (`oneshot`): cookies, CSRF, roles, the plan
//! picker, the API's 422 and 503 messages after a submission, the policy editor, Swedish.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Browser, Portal};
use serde_json::json;
use sqlx::Connection;

const DENIED_LARGE: &str = "Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium.";

#[tokio::test]
async fn cookies_are_http_only_same_site_strict_and_secure_behind_https() {
    let portal = Portal::demo().await;
    let anonymous = Browser::anonymous();

    let form = portal.get("/sign-in", &anonymous).await;
    let sign_in_cookie = form.set_cookie("palisade_sign_in");
    assert!(sign_in_cookie.contains("; HttpOnly"), "{sign_in_cookie}");
    assert!(
        sign_in_cookie.contains("; SameSite=Strict"),
        "{sign_in_cookie}"
    );
    assert!(!sign_in_cookie.contains("Secure"), "{sign_in_cookie}");

    let browser = {
        let mut b = Browser::anonymous();
        b.absorb(&form);
        b
    };
    let csrf = form.csrf();
    let done = portal
        .post(
            "/sign-in",
            &browser,
            &[
                ("csrf", &csrf),
                ("token", &portal.admin),
                ("next", "/boundaries/shop"),
            ],
        )
        .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    assert_eq!(done.location(), "/boundaries/shop");
    let session = done.set_cookie("palisade_session");
    assert!(
        session.ends_with("; Path=/; HttpOnly; SameSite=Strict"),
        "{session}"
    );
    assert!(
        !session.contains(&portal.admin),
        "the token is sealed, never in clear: {session}"
    );
    assert!(done.set_cookie("palisade_sign_in").contains("Max-Age=0"));

    // Behind a TLS-terminating proxy every cookie is Secure.
    let https = [("x-forwarded-proto", "https")];
    let form = portal
        .request(Method::GET, "/sign-in", &anonymous, None, &https)
        .await;
    assert!(form.set_cookie("palisade_sign_in").ends_with("; Secure"));
    let mut browser = Browser::anonymous();
    browser.absorb(&form);
    let csrf = form.csrf();
    let done = portal
        .request(
            Method::POST,
            "/sign-in",
            &browser,
            Some(&[("csrf", &csrf), ("token", &portal.admin)]),
            &https,
        )
        .await;
    assert_eq!(
        done.set_cookie("palisade_session")
            .split("; ")
            .skip(1)
            .collect::<Vec<_>>(),
        ["Path=/", "HttpOnly", "SameSite=Strict", "Secure"]
    );
    let lang = portal
        .request(Method::GET, "/lang/sv?next=/", &anonymous, None, &https)
        .await;
    assert!(lang
        .set_cookie("lang")
        .contains("HttpOnly; SameSite=Strict; Max-Age="));
    assert!(lang.set_cookie("lang").ends_with("; Secure"));

    // Sign-out clears the session.
    let signed_in = portal.sign_in(&portal.admin).await;
    let out = portal
        .post("/sign-out", &signed_in, &[("csrf", &signed_in.csrf)])
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(out.location(), "/sign-in");
    assert!(out.set_cookie("palisade_session").contains("Max-Age=0"));
}

#[tokio::test]
async fn pages_need_a_session_and_a_bad_token_is_refused() {
    let portal = Portal::demo().await;
    let anonymous = Browser::anonymous();
    let page = portal.get("/boundaries/shop", &anonymous).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.location(), "/sign-in?next=%2Fboundaries%2Fshop");
    // A forged session cookie is no session.
    let forged = anonymous
        .clone()
        .with_cookie("palisade_session", "bm90LXNlYWxlZA");
    assert_eq!(
        portal.get("/boundaries/shop", &forged).await.status,
        StatusCode::SEE_OTHER
    );
    // A wrong token answers the API's message.
    let form = portal.get("/sign-in", &anonymous).await;
    let mut browser = Browser::anonymous();
    browser.absorb(&form);
    let csrf = form.csrf();
    let refused = portal
        .post(
            "/sign-in",
            &browser,
            &[("csrf", &csrf), ("token", "pal_nope")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(refused.text().contains("the token is not valid"));
    // A revoked token ends the session at once.
    let (status, created) = portal
        .api(
            Method::POST,
            "/v1/tokens",
            Some(json!({"role": "developer", "boundary": "shop"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let developer = portal.sign_in(created["secret"].as_str().unwrap()).await;
    let id = created["id"].as_str().unwrap();
    let (status, _) = portal
        .api(Method::DELETE, &format!("/v1/tokens/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        portal.get("/boundaries/shop", &developer).await.status,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn forms_without_the_session_csrf_token_are_refused_with_403() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let other = portal.sign_in(&portal.admin).await;
    assert_ne!(browser.csrf, other.csrf, "each session has its own token");
    let policy = [("view", "form"), ("name", "csrf-test"), ("plans", "small")];
    for csrf in [None, Some(""), Some("forged"), Some(other.csrf.as_str())] {
        let mut form: Vec<(&str, &str)> = policy.to_vec();
        if let Some(csrf) = csrf {
            form.push(("csrf", csrf));
        }
        let answer = portal
            .post("/boundaries/shop/policies/new", &browser, &form)
            .await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "csrf {csrf:?}");
        assert!(answer.text().contains("CSRF check failed"));
    }
    let (status, _) = portal
        .api(Method::GET, "/v1/boundaries/shop/policies/csrf-test", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing was saved");

    for (path, form) in [
        (
            "/boundaries/shop/resources/new?type=valkey",
            vec![("name", "c2"), ("plan", "small")],
        ),
        ("/boundaries/shop/policies/size-limits/delete", vec![]),
        (
            "/boundaries/shop/policies/size-limits/edit",
            vec![("view", "form"), ("plans", "small")],
        ),
        ("/sign-out", vec![]),
    ] {
        let answer = portal.post(path, &browser, &form).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{path}");
    }
    let (status, _) = portal
        .api(
            Method::GET,
            "/v1/boundaries/shop/policies/size-limits",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "not deleted");
    // The sign-in form is checked against its own cookie.
    let anonymous = Browser::anonymous();
    let refused = portal
        .post(
            "/sign-in",
            &anonymous,
            &[("csrf", "x"), ("token", &portal.admin)],
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    // With the token the same form saves.
    let mut form: Vec<(&str, &str)> = policy.to_vec();
    form.push(("csrf", &browser.csrf));
    let saved = portal
        .post("/boundaries/shop/policies/new", &browser, &form)
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
}

#[tokio::test]
async fn roles_see_what_the_api_lets_them_see() {
    let portal = Portal::demo().await;
    let developer = portal
        .sign_in(&portal.token("developer", Some("shop")).await)
        .await;
    let home = portal.get("/", &developer).await;
    assert!(home.body.contains("href=\"/boundaries/shop\""));
    assert!(!home.body.contains("href=\"/boundaries/other\""));
    assert_eq!(
        portal.get("/boundaries/other", &developer).await.status,
        StatusCode::NOT_FOUND
    );
    let shop = portal.get("/boundaries/shop", &developer).await;
    assert_eq!(shop.status, StatusCode::OK);
    assert!(
        !shop.body.contains("id=\"clusters-heading\""),
        "no cluster status"
    );
    assert!(!shop.body.contains("/policies/new"));
    assert!(!shop.body.contains("/policies/size-limits/edit"));
    assert!(
        shop.body
            .contains(r#"href="/boundaries/shop/resources/app/web">web</a>"#),
        "resources link to their pages"
    );
    assert!(shop.body.contains("size-limits"), "policies are readable");
    let edit = portal
        .get("/boundaries/shop/policies/size-limits/edit", &developer)
        .await;
    assert_eq!(edit.status, StatusCode::FORBIDDEN);
    assert!(edit
        .text()
        .contains("this needs the role admin or boundary-admin; the token is a developer token"));
    let save = portal
        .post(
            "/boundaries/shop/policies/new",
            &developer,
            &[
                ("csrf", &developer.csrf),
                ("view", "form"),
                ("name", "mine"),
                ("plans", "small"),
            ],
        )
        .await;
    assert_eq!(save.status, StatusCode::FORBIDDEN);
    let delete = portal
        .post(
            "/boundaries/shop/policies/size-limits/delete",
            &developer,
            &[("csrf", &developer.csrf)],
        )
        .await;
    assert_eq!(delete.status, StatusCode::FORBIDDEN);
    assert_eq!(
        portal
            .api(
                Method::GET,
                "/v1/boundaries/shop/policies/size-limits",
                None
            )
            .await
            .0,
        StatusCode::OK
    );
    // A developer creates resources in its boundary, not elsewhere.
    let created = portal
        .post(
            "/boundaries/shop/resources/new?type=valkey",
            &developer,
            &[
                ("csrf", &developer.csrf),
                ("name", "sessions"),
                ("plan", "small"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    let elsewhere = portal
        .post(
            "/boundaries/other/resources/new?type=valkey",
            &developer,
            &[
                ("csrf", &developer.csrf),
                ("name", "sessions"),
                ("plan", "small"),
            ],
        )
        .await;
    assert_eq!(elsewhere.status, StatusCode::NOT_FOUND);

    let boundary_admin = portal
        .sign_in(&portal.token("boundary-admin", Some("shop")).await)
        .await;
    let shop = portal.get("/boundaries/shop", &boundary_admin).await;
    assert!(shop.body.contains("id=\"clusters-heading\""));
    assert!(shop.body.contains("/boundaries/shop/policies/new"));
    assert_eq!(
        portal
            .get(
                "/boundaries/shop/policies/size-limits/edit",
                &boundary_admin
            )
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        portal
            .get("/boundaries/other", &boundary_admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn the_picker_disables_disallowed_plans_with_their_reason_in_text() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let page = portal
        .get("/boundaries/shop/resources/new?type=app", &browser)
        .await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.text();
    assert!(html.contains(
        r#"<input type="radio" name="plan" id="plan-large" value="large" disabled aria-describedby="reason-large"><label for="plan-large">large (2 vCPU, 4 GiB)</label> <span class="reason" id="reason-large">Disallowed by boundary policy 'size-limits'</span>"#
    ), "{html}");
    assert!(html.contains(
        r#"<input type="radio" name="plan" id="plan-small" value="small" checked><label for="plan-small">small (0.5 vCPU, 1 GiB)</label>"#
    ));
    assert!(!html.contains("does not enforce plans of functions"));

    // Two policies: the reason names both, in name order.
    let (status, _) = portal
        .api(
            Method::PUT,
            "/v1/boundaries/shop/policies/a-tiny",
            Some(json!({"rules": [{"allowedComputePlans": {"plans": ["small"]}}]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let html = portal
        .get("/boundaries/shop/resources/new?type=postgresql", &browser)
        .await
        .text();
    assert!(html.contains("Disallowed by boundary policies 'a-tiny', 'size-limits'"));

    // Functions: the same picker, and the page says the API does not enforce it.
    let html = portal
        .get("/boundaries/shop/resources/new?type=function", &browser)
        .await
        .text();
    assert!(html.contains(r#"id="plan-large" value="large" disabled"#));
    assert!(html.contains("Disallowed by boundary policies 'a-tiny', 'size-limits'"));
    assert!(html.contains("The API does not enforce plans of functions"));

    // Container instances: each component row's select, disabled options with the reason.
    let html = portal
        .get(
            "/boundaries/shop/resources/new?type=container_instance",
            &browser,
        )
        .await
        .text();
    assert!(html.contains(
        r#"<option value="large" disabled>large (2 vCPU, 4 GiB) — Disallowed by boundary policies 'a-tiny', 'size-limits'</option>"#
    ), "{html}");
    // Static web apps have no plan at all.
    let html = portal
        .get(
            "/boundaries/shop/resources/new?type=static_web_app",
            &browser,
        )
        .await
        .text();
    assert!(!html.contains("plan-picker"));
}

#[tokio::test]
async fn a_crafted_submission_shows_the_api_422_message() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let answer = portal
        .post(
            "/boundaries/shop/resources/new?type=app",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("name", "reports"),
                ("plan", "large"),
                ("image", "ghcr.io/acme/reports:1"),
            ],
        )
        .await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    let html = answer.text();
    assert!(html.contains(&format!(
        r#"<code>compute_plan_not_allowed</code> <span lang="en" class="api-message">{DENIED_LARGE}</span>"#
    )), "{html}");
    assert!(
        html.contains(r#"value="reports""#),
        "the form keeps what was typed"
    );
    let (status, _) = portal
        .api(
            Method::GET,
            "/v1/boundaries/shop/resources/app/reports",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A container instance names the component in the API's way.
    let answer = portal
        .post(
            "/boundaries/shop/resources/new?type=container_instance",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("name", "jobs"),
                ("component_name", "a"),
                ("component_plan", "small"),
                ("component_image", "ghcr.io/acme/a:1"),
                ("component_name", "b"),
                ("component_plan", "xlarge"),
                ("component_image", "ghcr.io/acme/b:1"),
            ],
        )
        .await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(answer.text().contains(
        "Compute plan 'xlarge' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium."
    ));

    // A function on the same plan is created, with the API's warning shown.
    let answer = portal
        .post(
            "/boundaries/shop/resources/new?type=function",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("name", "resize"),
                ("plan", "large"),
                ("source", "https://git.example.com/acme/resize.git"),
            ],
        )
        .await;
    let answer = portal.follow(&answer, &mut browser.clone()).await;
    assert!(answer.text().contains(
        "Compute plan 'large' is disallowed by boundary policy 'size-limits'; plans of functions are not enforced"
    ));

    // A 400 is shown next to its field.
    let answer = portal
        .post(
            "/boundaries/shop/resources/new?type=app",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("name", "Bad Name"),
                ("plan", "small"),
                ("image", "i"),
            ],
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer
        .body
        .contains(r#"<div class="field-error" id="error-name"><p lang="en">/name: "#));
    assert!(answer.body.contains(r#"aria-describedby="error-name""#));
}

#[tokio::test]
async fn unreadable_policies_show_the_503_message_and_ask_to_retry() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let mut side = sqlx::SqliteConnection::connect(&portal.url).await.unwrap();
    sqlx::query("ALTER TABLE policies RENAME TO policies_unreadable")
        .execute(&mut side)
        .await
        .unwrap();
    let message = "The boundary's policies could not be read; the request was not applied. Try again shortly.";
    let form = portal
        .get("/boundaries/shop/resources/new?type=app", &browser)
        .await;
    assert_eq!(form.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(form.headers.get("retry-after").unwrap(), "5");
    assert!(form.text().contains(message));
    assert!(form.text().contains("Please try again in a few seconds."));
    let answer = portal
        .post(
            "/boundaries/shop/resources/new?type=valkey",
            &browser,
            &[("csrf", &browser.csrf), ("name", "c2"), ("plan", "small")],
        )
        .await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(answer.text().contains(&format!(
        "<code>compute_plan_policy_unavailable</code> <span lang=\"en\" class=\"api-message\">{message}</span>"
    )));
    assert!(answer
        .text()
        .contains("Nothing was changed. Please try again in a few seconds."));
}

#[tokio::test]
async fn the_policy_editor_saves_and_maps_errors_to_their_fields() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let form = portal
        .get("/boundaries/shop/policies/trusted/edit", &browser)
        .await;
    assert_eq!(form.status, StatusCode::OK);
    let html = form.text();
    assert!(html.contains(
        r#"<input type="hidden" name="order" value="allowedRegistries,disallowLatestTag">"#
    ));
    assert!(html.contains("ghcr.io/acme\ndocker.io/library</textarea>"));
    let etag_marker = r#"name="etag" value=""#;
    let start = form.body.find(etag_marker).unwrap() + etag_marker.len();
    let etag = form.body[start..start + form.body[start..].find('"').unwrap()].to_owned();

    let bad = portal
        .post(
            "/boundaries/shop/policies/trusted/edit",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("view", "form"),
                ("etag", &etag),
                ("order", "allowedRegistries,disallowLatestTag"),
                ("mode", "enforce"),
                ("scope", "all"),
                ("registries", "ghcr.io/acme\nGHCR.io/Bad Name"),
                ("disallow_latest_tag", "on"),
                ("label_key", "team"),
                ("label_value", ""),
                ("label_key", "Bad Key!"),
                ("label_value", "x"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    // Rules are saved in the stored order, then new ones: registries, latest, labels.
    let html = bad.text();
    assert!(
        html.contains(r#"<div class="field-error" id="error-registries"><p>Line 2: <span lang="en">/rules/0/allowedRegistries/registries/1: "#),
        "{html}"
    );

    let bad_label = portal
        .post(
            "/boundaries/shop/policies/trusted/edit",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("view", "form"),
                ("etag", &etag),
                ("order", "allowedRegistries,disallowLatestTag"),
                ("registries", "ghcr.io/acme"),
                ("label_key", ""),
                ("label_value", ""),
                ("label_key", "Bad Key!"),
                ("label_value", "x"),
            ],
        )
        .await;
    assert_eq!(bad_label.status, StatusCode::BAD_REQUEST);
    assert!(bad_label.text().contains(
        r#"<div class="field-error" id="error-label-key-1"><p><span lang="en">/rules/1/requiredLabels/labels/0/key: "#
    ), "{}", bad_label.text());

    let saved = portal
        .post(
            "/boundaries/shop/policies/trusted/edit",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("view", "form"),
                ("etag", &etag),
                ("order", "allowedRegistries,disallowLatestTag"),
                ("mode", "audit"),
                ("scope", "all"),
                ("registries", "ghcr.io/acme\ndocker.io/library/"),
                ("disallow_latest_tag", "on"),
            ],
        )
        .await;
    let saved = portal.follow(&saved, &mut browser.clone()).await;
    assert!(saved
        .text()
        .contains("registry prefix 'docker.io/library/' saved as 'docker.io/library'"));
    let (_, stored) = portal
        .api(Method::GET, "/v1/boundaries/shop/policies/trusted", None)
        .await;
    assert_eq!(
        stored["spec"],
        json!({"mode": "audit", "rules": [
            {"allowedRegistries": {"registries": ["ghcr.io/acme", "docker.io/library"]}},
            {"disallowLatestTag": {}}
        ]})
    );
    // The old etag is stale now: 412.
    let stale = portal
        .post(
            "/boundaries/shop/policies/trusted/edit",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("view", "form"),
                ("etag", &etag),
                ("registries", "ghcr.io/acme"),
            ],
        )
        .await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    assert!(stale
        .text()
        .contains("the object has changed since you read it"));
}

/// Issue 31, item 2: the editor's YAML is bounded before it is parsed (off the async
/// workers): nested 100,000 deep it is a 400 naming the line and column, and a tag the parser
/// would drop is refused, naming where.
#[tokio::test]
async fn the_yaml_view_refuses_deep_nesting_and_dropped_tags_naming_where() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let document = |annotations: &str| {
        format!("apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata:\n  name: deep\n  boundary: shop\n  annotations: {annotations}\nspec:\n  rules: [{{disallowLatestTag: {{}}}}]\n")
    };
    let deep = document(&format!(
        "{{x: {}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    ));
    let cases = [
        (deep, "line 6 column 81: nesting deeper than 64 levels"),
        (
            document("{x: !!binary aGVsbG8=}"),
            "line 6 column 20: the YAML tag !!binary is not accepted; the tags accepted are !!str, !!int, !!float, !!bool, !!null, !!map, !!seq",
        ),
    ];
    for (yaml, message) in cases {
        let started = std::time::Instant::now();
        let page = portal.save_policy_yaml(&browser, &yaml).await;
        println!(
            "editor ({} KiB): {} in {:?}",
            yaml.len() / 1024,
            page.status,
            started.elapsed()
        );
        assert_eq!(page.status, StatusCode::BAD_REQUEST, "{}", page.text());
        assert!(
            page.text().contains(&format!(
                r#"<div class="field-error" id="error-yaml"><p><span lang="en">{message}</span>"#
            )),
            "{message}: {}",
            page.text()
        );
    }
    let (status, _) = portal
        .api(Method::GET, "/v1/boundaries/shop/policies/deep", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing saved");
}

#[tokio::test]
async fn the_yaml_view_saves_the_same_document() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let yaml = "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata:\n  name: from-yaml\n  boundary: shop\nspec:\n  scope: {clusters: [prod-1]}\n  rules:\n    - allowedComputePlans: {plans: [small, valky/small]}\n";
    let bad = portal.save_policy_yaml(&browser, yaml).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.text().contains(r#"<div class="field-error" id="error-yaml"><p><span lang="en">/spec/rules/0/allowedComputePlans/plans/1: "#), "{}", bad.text());
    assert!(
        bad.text().contains("[small, valky/small]}\n</textarea>"),
        "the text is kept"
    );

    let good = yaml.replace("valky/small", "valkey/small");
    let saved = portal.save_policy_yaml(&browser, &good).await;
    assert_eq!(saved.location(), "/boundaries/shop/policies/from-yaml/edit");
    let saved = portal.follow(&saved, &mut browser.clone()).await;
    assert!(saved
        .body
        .contains(r#"action="/boundaries/shop/policies/from-yaml/edit""#));
    let (_, stored) = portal
        .api(Method::GET, "/v1/boundaries/shop/policies/from-yaml", None)
        .await;
    assert_eq!(stored["spec"]["scope"], json!({"clusters": ["prod-1"]}));
    // A name that is taken is refused, not overwritten.
    let again = portal
        .post(
            "/boundaries/shop/policies/new",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("view", "form"),
                ("name", "from-yaml"),
                ("plans", "medium"),
            ],
        )
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again
        .text()
        .contains("policy 'from-yaml' already exists in boundary 'shop'"));
}

#[tokio::test]
async fn deleting_a_policy_asks_for_confirmation_first() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let confirm = portal
        .get("/boundaries/shop/policies/owner-label/delete", &browser)
        .await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains("Delete the policy"));
    assert_eq!(
        portal
            .api(
                Method::GET,
                "/v1/boundaries/shop/policies/owner-label",
                None
            )
            .await
            .0,
        StatusCode::OK
    );
    let done = portal
        .post(
            "/boundaries/shop/policies/owner-label/delete",
            &browser,
            &[("csrf", &browser.csrf)],
        )
        .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    assert_eq!(done.location(), "/boundaries/shop?deleted=owner-label");
    assert_eq!(
        portal
            .api(
                Method::GET,
                "/v1/boundaries/shop/policies/owner-label",
                None
            )
            .await
            .0,
        StatusCode::NOT_FOUND
    );
}

/// The element of `html` that starts at the first `start` after `after`, up to `end`.
fn element<'h>(html: &'h str, after: &str, start: &str, end: &str) -> &'h str {
    let from = html.find(after).unwrap_or_else(|| panic!("no {after}"));
    let begin = from
        + html[from..]
            .find(start)
            .unwrap_or_else(|| panic!("no {start}"));
    let stop = begin + html[begin..].find(end).unwrap();
    &html[begin..stop + end.len()]
}

/// The text of an HTML fragment (tags dropped).
fn text_of(fragment: &str) -> String {
    let mut text = String::new();
    let mut in_tag = false;
    for c in fragment.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

#[tokio::test]
async fn the_boundary_page_shows_cluster_status_and_grandfathered_resources() {
    let portal = Portal::demo().await;
    let store = portal.store.clone();
    // Statuses exactly as the reconciler writes them (its own functions make them).
    common::reconciled::seed(store.as_ref(), b"sealed")
        .await
        .unwrap();
    // The admission layout in use is shown where the reconciler has recorded one.
    store
        .set_cluster_layout("staging-1", "shared", "212 boundaries")
        .await
        .unwrap();
    // And the last repair where palisade put something back.
    store
        .record_repair(
            "prod-1",
            "binding trusted.shop.palisade.dev was deleted; restored",
        )
        .await
        .unwrap();
    let repaired_at = store
        .get_cluster("prod-1")
        .await
        .unwrap()
        .last_repair_at
        .unwrap();
    let browser = portal.sign_in(&portal.admin).await;
    let html = portal.get("/boundaries/shop", &browser).await.text();
    assert!(html.contains(
        r#"<tr data-cluster="staging-1"><th scope="row">staging-1</th><td>v1.37.2</td><td><span class="status ok">enforced</span><br>Admission layout: <span lang="en">shared (212 boundaries)</span></td><td><span class="muted">–</span></td></tr>"#
    ), "{html}");
    assert!(html.contains(
        r#"<tr data-cluster="legacy-1"><th scope="row">legacy-1</th><td>v1.29.4</td><td><span class="status bad">not enforced: <span lang="en">Kubernetes 1.29 is older than 1.30</span></span></td><td><span class="muted">–</span></td></tr>"#
    ), "{html}");
    assert!(html.contains(
        r#"<tr data-cluster="noapi-1"><th scope="row">noapi-1</th><td>v1.37.2</td><td><span class="status bad">not enforced: <span lang="en">the API server does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy</span></span></td><td><span class="muted">–</span></td></tr>"#
    ), "{html}");
    assert!(html.contains(&format!(
        r#"<tr data-cluster="prod-1"><th scope="row">prod-1</th><td>v1.31.2</td><td><span class="status ok">enforced</span><br>Last repair: <span lang="en">binding trusted.shop.palisade.dev was deleted; restored</span> <time datetime="{repaired_at}">({repaired_at})</time></td><td><span class="muted">–</span></td></tr>"#
    )), "{html}");
    assert!(html.contains(r#"<span class="status unknown">not checked yet — "#));
    assert!(html.contains(
        r#"Last attempt failed: <span lang="en">cannot reach the API server: connection refused</span>"#
    ), "{html}");
    // Each policy's line per cluster shows the recorded status once, and nothing else.
    let mut checked = 0;
    for cluster in common::reconciled::clusters() {
        for (policy, status) in &cluster.statuses {
            let line = element(
                &html,
                &format!(r#"id="policy-{policy}""#),
                &format!(r#"<li data-install="{}">"#, cluster.name),
                "</li>",
            );
            assert_eq!(
                text_of(line),
                format!("{}: {status}", cluster.name),
                "policy {policy}: {line}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 10);
    let legacy = element(
        &html,
        r#"id="policy-trusted""#,
        r#"<li data-install="legacy-1">"#,
        "</li>",
    );
    assert_eq!(
        legacy,
        r#"<li data-install="legacy-1"><strong>legacy-1</strong>: <span class="status bad">not enforced: <span lang="en">Kubernetes 1.29 is older than 1.30</span></span></li>"#
    );
    assert_eq!(
        legacy.matches("not enforced").count(),
        1,
        "the status is shown once: {legacy}"
    );
    // A status recorded for an older version of the policy is not shown: pending.
    store
        .replace_policy_statuses(
            "legacy-1",
            "shop",
            vec![palisade_store::PolicyStatusRecord {
                boundary: "shop".into(),
                policy: "trusted".into(),
                cluster: "legacy-1".into(),
                policy_etag: "an-older-version".into(),
                status: "enforced".into(),
                updated_at: palisade_store::now(),
            }],
        )
        .await
        .unwrap();
    let html = portal.get("/boundaries/shop", &browser).await.text();
    // Not yet re-recorded for this version: pending, and the cluster's own reason.
    assert!(html.contains(r#"<li data-install="legacy-1"><strong>legacy-1</strong>: <span class="status unknown">pending</span> — <span class="status bad">not enforced: <span lang="en">Kubernetes 1.29 is older than 1.30</span></span></li>"#), "{html}");
    assert!(html.contains(
        r#"<td><code>app</code></td><td><a href="/boundaries/shop/resources/app/legacy-reports/edit">legacy-reports</a></td><td>large</td><td><a href="/boundaries/shop/policies/size-limits/edit">size-limits</a></td>"#
    ));
    assert!(html.contains("<td>worker: small, sidecar: small</td>"));
}

#[tokio::test]
async fn swedish_is_one_link_away_and_api_texts_stay_english() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let english = portal.get("/boundaries/shop", &browser).await;
    assert!(english.body.contains(r#"<html lang="en">"#));
    assert!(english.body.contains(
        r#"href="/lang/sv?next=%2Fboundaries%2Fshop" lang="sv" hreflang="sv">Svenska</a>"#
    ));
    let switch = portal
        .get("/lang/sv?next=%2Fboundaries%2Fshop", &browser)
        .await;
    assert_eq!(switch.status, StatusCode::SEE_OTHER);
    assert_eq!(switch.location(), "/boundaries/shop");
    assert!(switch.set_cookie("lang").starts_with("lang=sv;"));
    let swedish_browser = browser.clone().with_cookie("lang", "sv");
    let page = portal.get("/boundaries/shop", &swedish_browser).await;
    assert!(page.body.contains(r#"<html lang="sv">"#));
    assert!(page
        .body
        .contains(r#"<h2 id="clusters-heading">Kluster</h2>"#));
    assert!(page.body.contains("Logga ut"));
    let picker = portal
        .get("/boundaries/shop/resources/new?type=app", &swedish_browser)
        .await
        .text();
    assert!(picker.contains(
        r#"<span class="reason" id="reason-large">Otillåten enligt boundary-policyn 'size-limits'</span>"#
    ), "{picker}");
    let denied = portal
        .post(
            "/boundaries/shop/resources/new?type=app",
            &swedish_browser,
            &[
                ("csrf", &browser.csrf),
                ("name", "x"),
                ("plan", "large"),
                ("image", "i"),
            ],
        )
        .await;
    assert!(
        denied.text().contains(DENIED_LARGE),
        "API messages stay English"
    );
    // The switch never sends anyone to another site.
    for next in [
        "//evil.example/",
        "https://evil.example/",
        "/\\evil.example",
    ] {
        let path = format!(
            "/lang/en?next={}",
            form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>()
        );
        assert_eq!(portal.get(&path, &browser).await.location(), "/");
    }
}

#[tokio::test]
async fn the_portal_leaves_the_api_paths_alone() {
    let portal = Portal::demo().await;
    let anonymous = Browser::anonymous();
    let api = portal.get("/v1/boundaries", &anonymous).await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    assert!(api.body.starts_with(r#"{"error":{"code":"unauthorized""#));
    assert_eq!(
        portal.get("/healthz", &anonymous).await.status,
        StatusCode::OK
    );
    assert!(portal
        .get("/openapi.json", &anonymous)
        .await
        .body
        .contains("\"openapi\""));
    let css = portal.get("/static/portal.css", &anonymous).await;
    assert_eq!(css.status, StatusCode::OK);
    assert_eq!(
        css.headers.get("content-type").unwrap(),
        "text/css; charset=utf-8"
    );
    let page = portal.get("/sign-in", &anonymous).await;
    assert!(page
        .headers
        .get("content-security-policy")
        .unwrap()
        .to_str()
        .unwrap()
        .contains("default-src 'none'; script-src 'self';"));
    // One script, the portal's own file (the live region's); nothing inline.
    assert_eq!(page.body.matches("<script").count(), 1, "{}", page.body);
    assert!(page.body.contains(r#"<script src="/static/live.js?v="#));
    assert!(page.body.contains(" defer></script>"));
    let script = portal.get("/static/live.js", &anonymous).await;
    assert_eq!(script.status, StatusCode::OK);
    assert_eq!(
        script.headers.get("content-type").unwrap(),
        "text/javascript; charset=utf-8"
    );
    assert!(script.body.contains("data-moving"));
}

#[tokio::test]
async fn editing_a_grandfathered_resource_keeps_its_plan_and_checks_a_move() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let path = "/boundaries/shop/resources/app/legacy-reports/edit";
    let form = portal.get(path, &browser).await;
    assert_eq!(form.status, StatusCode::OK);
    let html = form.text();
    // The current plan stays selectable (keeping it is allowed), with the reason in text.
    assert!(html.contains(
        r#"<input type="radio" name="plan" id="plan-large" value="large" checked aria-describedby="reason-large">"#
    ), "{html}");
    assert!(html.contains(r#"id="plan-xlarge" value="xlarge" disabled"#));
    assert!(html.contains("keeping it is allowed"));
    let etag_marker = r#"name="etag" value=""#;
    let start = form.body.find(etag_marker).unwrap() + etag_marker.len();
    let etag = form.body[start..start + form.body[start..].find('"').unwrap()].to_owned();

    // Another change on the now-disallowed plan succeeds; a removed label is removed.
    let kept = portal
        .post(
            path,
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("etag", &etag),
                ("plan", "large"),
                ("image", "ghcr.io/acme/reports:1.0"),
                ("label_key", "owner"),
                ("label_value", "ops"),
            ],
        )
        .await;
    assert_eq!(kept.status, StatusCode::SEE_OTHER, "{}", kept.text());
    let (_, stored) = portal
        .api(
            Method::GET,
            "/v1/boundaries/shop/resources/app/legacy-reports",
            None,
        )
        .await;
    assert_eq!(stored["plan"], "large");
    assert_eq!(stored["image"], "ghcr.io/acme/reports:1.0");
    assert_eq!(stored["labels"], json!({"owner": "ops"}));

    // A move to another disallowed plan gets the API's 422; a move to an allowed one works.
    let moved = portal
        .post(
            path,
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("plan", "xlarge"),
                ("image", "ghcr.io/acme/reports:1.0"),
            ],
        )
        .await;
    assert_eq!(moved.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(moved.text().contains(
        "Compute plan 'xlarge' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium."
    ));
    let moved = portal
        .post(
            path,
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("plan", "medium"),
                ("image", "ghcr.io/acme/reports:1.0"),
            ],
        )
        .await;
    assert_eq!(moved.status, StatusCode::SEE_OTHER, "{}", moved.text());
    let (_, stored) = portal
        .api(
            Method::GET,
            "/v1/boundaries/shop/resources/app/legacy-reports",
            None,
        )
        .await;
    assert_eq!(stored["plan"], "medium");
    assert!(stored.get("labels").is_none(), "{stored}");
    // A stale etag is the API's 412.
    let stale = portal
        .post(
            path,
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("etag", &etag),
                ("plan", "small"),
                ("image", "i"),
            ],
        )
        .await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
}

const NO_LATEST_WARNING: &str = "Policy 'no-latest' (DisallowLatestTag) denies builds of uploaded code: the function builder is referenced by the tag latest";

/// Boundary `other` of the demo with cluster `k1` attached (namespace `web`) and an enforce
/// DisallowLatestTag policy `no-latest`.
async fn with_cluster_and_no_latest(portal: &Portal) {
    let store = portal.store.clone();
    store.put_cluster("k1", b"sealed", None).await.unwrap();
    store.attach_cluster("other", "k1").await.unwrap();
    store
        .put_namespace("other", "k1", "web", None)
        .await
        .unwrap();
    let (status, body) = portal
        .api(
            Method::PUT,
            "/v1/boundaries/other/policies/no-latest",
            Some(json!({"rules": [{"disallowLatestTag": {}}]})),
        )
        .await;
    assert!(status.is_success(), "{status} {body}");
}

/// The demo boundary has no cluster: its page says so once, in plain words, and its
/// workloads read as waiting, in grey, not as five red failures (nothing failed).
#[tokio::test]
async fn a_boundary_without_a_cluster_says_so_instead_of_failures() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let html = portal.get("/boundaries/shop", &browser).await.text();
    let notice = element(
        &html,
        r#"id="resources-heading""#,
        r#"<p class="notice" id="no-cluster">"#,
        "</p>",
    );
    assert!(notice.contains("No cluster is attached to this boundary, so its workloads are not deployed anywhere yet; nothing has failed."), "{notice}");
    let table = element(
        &html,
        r#"id="resources-heading""#,
        r#"<table id="resources">"#,
        "</table>",
    );
    assert!(!table.contains("status bad"), "{table}");
    let row = element(table, "<tbody>", r#"<tr data-resource="app/web">"#, "</tr>");
    assert!(row.contains(r#"<span class="status unknown">not deployed: no cluster is attached to this boundary</span>"#), "{row}");
    assert!(!row.contains("Place it"), "{row}");
}

#[tokio::test]
async fn the_boundary_page_shows_each_workload_status() {
    let portal = Portal::demo().await;
    let store = portal.store.clone();
    store.put_cluster("k1", b"sealed", None).await.unwrap();
    store.attach_cluster("shop", "k1").await.unwrap();
    let denial = "Policy 'trusted' (DisallowLatestTag) denied image ghcr.io/acme/api:latest: it is tagged latest or carries no tag.";
    let rejected = format!("rejected: {denial}");
    let degraded = format!("degraded: 1/3 replicas; pods rejected: {denial}");
    for (name, status) in [
        ("api", Some(rejected.as_str())),
        ("site", Some("running")),
        ("new", None),
        ("half", Some(degraded.as_str())),
    ] {
        let body = json!({"type": "app", "name": name, "plan": "small",
            "image": "ghcr.io/acme/api:latest", "cluster": "k1", "namespace": "web"});
        store
            .create_resource(
                palisade_store::NewResource {
                    boundary: "shop".into(),
                    resource_type: "app".into(),
                    name: name.into(),
                    body_json: body.to_string(),
                    cluster: Some("k1".into()),
                    upload: None,
                },
                None,
                None,
            )
            .await
            .unwrap();
        if let Some(status) = status {
            let key = palisade_store::ResourceKey {
                boundary: "shop".into(),
                resource_type: "app".into(),
                name: name.into(),
            };
            assert!(store.set_resource_status(&key, status).await.unwrap());
        }
    }
    let developer = portal.token("developer", Some("shop")).await;
    for token in [portal.admin.clone(), developer] {
        let browser = portal.sign_in(&token).await;
        let page = portal.get("/boundaries/shop", &browser).await;
        assert_eq!(page.status, StatusCode::OK);
        let html = page.text();
        assert!(html.contains(r#"<th scope="col">Status</th>"#), "{html}");
        let row = element(
            &html,
            r#"id="resources""#,
            r#"<tr data-resource="app/api">"#,
            "</tr>",
        );
        assert!(row.ends_with(&format!(
            r#"<td>small</td><td class="resource-status"><span class="status bad">rejected: <span lang="en">{denial}</span></span></td></tr>"#
        )), "{row}");
        // Degraded is amber, not the red of a refusal.
        let row = element(
            &html,
            r#"id="resources""#,
            r#"<tr data-resource="app/half">"#,
            "</tr>",
        );
        assert!(row.contains(&format!(
            r#"<span class="status warn">degraded: 1/3 replicas; pods rejected: <span lang="en">{denial}</span></span>"#
        )), "{row}");
        let row = element(
            &html,
            r#"id="resources""#,
            r#"<tr data-resource="app/site">"#,
            "</tr>",
        );
        assert!(
            row.contains(r#"<span class="status ok">running</span>"#),
            "{row}"
        );
        // Placed, not yet acted on by the reconciler.
        let row = element(
            &html,
            r#"id="resources""#,
            r#"<tr data-resource="app/new">"#,
            "</tr>",
        );
        assert!(
            row.contains(r#"<span class="status unknown">deploying</span>"#),
            "{row}"
        );
        // A workload with nowhere to run says why; a database has no status.
        let row = element(
            &html,
            r#"id="resources""#,
            r#"<tr data-resource="app/web">"#,
            "</tr>",
        );
        // Waiting to be placed is no failure: grey, not red.
        assert!(row.contains(r#"<span class="status unknown">not deployed: <span lang="en">no cluster given, and boundary 'shop' has no single attached cluster and namespace to run it in</span></span>"#), "{row}");
        // ... and offers to place it: the edit form, at its cluster field.
        assert!(row.contains(r#"<a class="small" href="/boundaries/shop/resources/app/web/edit#cluster">Place it</a>"#), "{row}");
        let row = element(
            &html,
            r#"id="resources""#,
            r#"<tr data-resource="postgresql/orders-db">"#,
            "</tr>",
        );
        assert!(
            row.contains(r#"<td class="resource-status"><span class="muted">–</span></td>"#),
            "{row}"
        );
        // The upload pages are one click away.
        assert!(html.contains(r#"href="/boundaries/shop/uploads/new?type=function""#));
        assert!(html.contains(r#"href="/boundaries/shop/uploads/new?type=static_web_app""#));
    }
    let swedish = portal
        .sign_in(&portal.admin)
        .await
        .with_cookie("lang", "sv");
    let html = portal.get("/boundaries/shop", &swedish).await.text();
    assert!(html.contains("Funktion från uppladdad kod"), "{html}");
    // palisade's words of a status in Swedish; Kubernetes' message as it wrote it.
    for words in [
        format!(r#"<span class="status bad">nekad: <span lang="en">{denial}</span></span>"#),
        format!(
            r#"<span class="status warn">försämrad: 1/3 repliker; poddar nekade: <span lang="en">{denial}</span></span>"#
        ),
        r#"<span class="status ok">körs</span>"#.to_owned(),
        r#"<span class="status unknown">driftsätts</span>"#.to_owned(),
    ] {
        assert!(html.contains(&words), "{words} in {html}");
    }
}

#[tokio::test]
async fn resource_forms_send_replicas_and_show_the_api_400_at_the_field() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let form = portal
        .get("/boundaries/shop/resources/new?type=app", &browser)
        .await;
    assert!(
        form.body
            .contains(r#"<input type="number" id="replicas" name="replicas""#),
        "{}",
        form.body
    );
    let databases = portal
        .get("/boundaries/shop/resources/new?type=postgresql", &browser)
        .await;
    assert!(!databases.body.contains(r#"id="replicas""#));
    // The function and static web app forms link to their upload pages.
    let function = portal
        .get("/boundaries/shop/resources/new?type=function", &browser)
        .await;
    assert!(function
        .body
        .contains(r#"href="/boundaries/shop/uploads/new?type=function""#));

    for (typed, message) in [
        (
            "-1",
            "/replicas: must be a whole number from 0 to 1000, got -1",
        ),
        (
            "5000",
            "/replicas: must be a whole number from 0 to 1000, got 5000",
        ),
        (
            "1.5",
            "/replicas: must be a whole number from 0 to 1000, got 1.5",
        ),
    ] {
        let answer = portal
            .post(
                "/boundaries/shop/resources/new?type=app",
                &browser,
                &[
                    ("csrf", &browser.csrf),
                    ("name", "scaled"),
                    ("plan", "small"),
                    ("image", "ghcr.io/acme/web:1.0"),
                    ("replicas", typed),
                ],
            )
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{typed}");
        let html = answer.text();
        assert!(
            html.contains(&format!(
                r#"<div class="field-error" id="error-replicas"><p lang="en">{message}</p></div>"#
            )),
            "{html}"
        );
        assert!(
            html.contains(&format!(r#"value="{typed}""#)),
            "kept: {html}"
        );
        assert!(html.contains(r#"aria-describedby="error-replicas""#));
    }
    let created = portal
        .post(
            "/boundaries/shop/resources/new?type=app",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("name", "scaled"),
                ("plan", "small"),
                ("image", "ghcr.io/acme/web:1.0"),
                ("replicas", "3"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.text());
    let (_, stored) = portal
        .api(
            Method::GET,
            "/v1/boundaries/shop/resources/app/scaled",
            None,
        )
        .await;
    assert_eq!(stored["replicas"], json!(3));
    // The edit form shows it; emptying the field removes it (the default, 1).
    let path = "/boundaries/shop/resources/app/scaled/edit";
    let edit = portal.get(path, &browser).await;
    assert!(
        edit.body.contains(r#"name="replicas" value="3""#),
        "{}",
        edit.body
    );
    let saved = portal
        .post(
            path,
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("plan", "small"),
                ("image", "ghcr.io/acme/web:1.0"),
                ("replicas", ""),
            ],
        )
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.text());
    let (_, stored) = portal
        .api(
            Method::GET,
            "/v1/boundaries/shop/resources/app/scaled",
            None,
        )
        .await;
    assert!(stored.get("replicas").is_none(), "{stored}");
}

#[tokio::test]
async fn the_upload_form_warns_before_a_build_a_policy_denies() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    // No cluster attached: nothing to warn about.
    let quiet = portal
        .get("/boundaries/other/uploads/new?type=function", &browser)
        .await;
    assert_eq!(quiet.status, StatusCode::OK);
    assert!(!quiet.body.contains("upload-warnings"));
    with_cluster_and_no_latest(&portal).await;
    let form = portal
        .get("/boundaries/other/uploads/new?type=function", &browser)
        .await;
    assert_eq!(form.status, StatusCode::OK);
    let html = form.text();
    let notice = element(
        &html,
        "<main",
        r#"<div class="notice warning" role="status" id="upload-warnings">"#,
        "</div>",
    );
    assert!(
        notice.contains(&format!(r#"<li>{NO_LATEST_WARNING}</li>"#)),
        "{notice}"
    );
    assert_eq!(notice.matches("<li").count(), 1, "{notice}");
    // In Swedish, palisade's warning is said in Swedish (the policy's name as named).
    let swedish = portal
        .get(
            "/boundaries/other/uploads/new?type=function",
            &browser.clone().with_cookie("lang", "sv"),
        )
        .await
        .text();
    assert!(
        swedish.contains("<li>Policyn 'no-latest' (DisallowLatestTag) nekar byggen av uppladdad kod: funktionsbyggaren refereras med taggen latest</li>"),
        "{swedish}"
    );
    assert!(html.contains(r#"enctype="multipart/form-data""#));
    assert!(html.contains(r#"<input type="file" id="file" name="file""#));
    assert!(
        html.contains(r#"id="plan-small""#),
        "the function plans: {html}"
    );
    // Static web apps have no builder of that kind, and no plan.
    let site = portal
        .get(
            "/boundaries/other/uploads/new?type=static_web_app",
            &browser,
        )
        .await;
    assert_eq!(site.status, StatusCode::OK);
    assert!(!site.body.contains("upload-warnings"));
    assert!(!site.body.contains("plan-picker"));
    // Other types cannot be built from uploads.
    let app = portal
        .get("/boundaries/other/uploads/new?type=app", &browser)
        .await;
    assert_eq!(app.status, StatusCode::BAD_REQUEST);
    // Swedish around the warning, and the warning too (checked above).
    assert!(swedish.contains("Funktion från uppladdad kod"));
    assert!(!swedish.contains(NO_LATEST_WARNING));
    // Another boundary's page is not shown.
    let developer = portal.token("developer", Some("shop")).await;
    let developer = portal.sign_in(&developer).await;
    assert_eq!(
        portal
            .get("/boundaries/other/uploads/new?type=function", &developer)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn an_upload_without_the_session_csrf_token_is_refused() {
    let portal = Portal::demo().await;
    with_cluster_and_no_latest(&portal).await;
    let browser = portal.sign_in(&portal.admin).await;
    let other = portal.sign_in(&portal.admin).await;
    let path = "/boundaries/other/uploads/new?type=function";
    for csrf in [None, Some(""), Some("forged"), Some(other.csrf.as_str())] {
        let mut parts: Vec<(&str, Option<&str>, &[u8])> = Vec::new();
        if let Some(csrf) = csrf {
            parts.push(("csrf", None, csrf.as_bytes()));
        }
        parts.push(("name", None, b"hook"));
        parts.push(("plan", None, b"small"));
        parts.push(("file", Some("hook.js"), b"export default () => 'hi';"));
        let answer = portal.post_multipart(path, &browser, &parts).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "csrf {csrf:?}");
        assert!(answer.text().contains("CSRF check failed"));
    }
    // Not multipart at all: no token can be read from it.
    let answer = portal
        .post(path, &browser, &[("csrf", &browser.csrf), ("name", "hook")])
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    let (status, _) = portal
        .api(
            Method::GET,
            "/v1/boundaries/other/resources/function/hook",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing was created");
    // Without a session: to sign-in.
    let answer = portal
        .post_multipart(path, &Browser::anonymous(), &[("name", None, b"hook")])
        .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER);
}

/// The content of an upload of boundary `other`, as its build Job fetches it.
async fn upload_content(portal: &Portal, id: &str) -> Vec<u8> {
    let token = portal.state.fetch_token("other", id).unwrap();
    portal
        .state
        .fetch_upload("other", id, Some(&token))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_upload_creates_the_code_and_the_function_with_its_warning() {
    let portal = Portal::demo().await;
    with_cluster_and_no_latest(&portal).await;
    let browser = portal.sign_in(&portal.admin).await;
    let path = "/boundaries/other/uploads/new?type=function";
    let code: &[u8] = b"export default () => 'hi';\n";

    // Nothing chosen: the application's 400, at the file.
    let empty = portal
        .post_multipart(
            path,
            &browser,
            &[
                ("csrf", None, browser.csrf.as_bytes()),
                ("name", None, b"hook"),
                ("plan", None, b"small"),
                ("file", Some(""), b""),
            ],
        )
        .await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
    assert!(
        empty.text().contains(
            r#"<div class="field-error" id="error-file"><p lang="en">the upload is empty</p></div>"#
        ),
        "{}",
        empty.text()
    );
    assert!(empty.text().contains(NO_LATEST_WARNING), "the notice stays");

    // A create the API refuses: its 400 at the field, and the upload is kept for the retry.
    let refused = portal
        .post_multipart(
            path,
            &browser,
            &[
                ("csrf", None, browser.csrf.as_bytes()),
                ("name", None, b"hook"),
                ("plan", None, b"small"),
                ("replicas", None, b"5000"),
                ("file", Some("hook.js"), code),
            ],
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    let html = refused.text();
    assert!(html.contains(r#"<div class="field-error" id="error-replicas"><p lang="en">/replicas: must be a whole number from 0 to 1000, got 5000</p></div>"#), "{html}");
    let marker = r#"<input type="hidden" name="upload" value=""#;
    let start = html.find(marker).expect("the upload is kept") + marker.len();
    let kept = html[start..start + html[start..].find('"').unwrap()].to_owned();
    assert!(kept.starts_with("u-"), "{kept}");

    // The retry without a file uses the kept upload.
    let created = portal
        .post_multipart(
            path,
            &browser,
            &[
                ("csrf", None, browser.csrf.as_bytes()),
                ("upload", None, kept.as_bytes()),
                ("name", None, b"hook"),
                ("plan", None, b"small"),
                ("replicas", None, b"2"),
                ("file", Some(""), b""),
            ],
        )
        .await;
    let created = portal.follow(&created, &mut browser.clone()).await;
    let html = created.text();
    assert!(
        html.contains(
            r#"<p id="created">Created <code>function</code> <strong>hook</strong>.</p>"#
        ),
        "{html}"
    );
    assert!(
        html.contains(&format!(r#"<li>{NO_LATEST_WARNING}</li>"#)),
        "{html}"
    );
    let (status, stored) = portal
        .api(
            Method::GET,
            "/v1/boundaries/other/resources/function/hook",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(stored["upload"], json!(kept));
    assert_eq!(stored["plan"], "small");
    assert_eq!(stored["replicas"], json!(2));
    assert_eq!(stored["cluster"], "k1");
    assert_eq!(stored["namespace"], "web");
    assert_eq!(upload_content(&portal, &kept).await, code);

    // A file chosen with everything else right: a new upload and a static web app.
    let site = portal
        .post_multipart(
            "/boundaries/other/uploads/new?type=static_web_app",
            &browser,
            &[
                ("csrf", None, browser.csrf.as_bytes()),
                ("name", None, b"docs"),
                ("cluster", None, b"k1"),
                ("namespace", None, b"web"),
                ("file", Some("index.html"), b"<h1>docs</h1>"),
            ],
        )
        .await;
    let site = portal.follow(&site, &mut browser.clone()).await;
    assert!(
        !site.text().contains(NO_LATEST_WARNING),
        "only function builds are denied"
    );
    let (_, stored) = portal
        .api(
            Method::GET,
            "/v1/boundaries/other/resources/static_web_app/docs",
            None,
        )
        .await;
    let id = stored["upload"].as_str().unwrap();
    assert_ne!(id, kept);
    assert_eq!(upload_content(&portal, id).await, b"<h1>docs</h1>");
    // A taken name is the API's 409 at the name.
    let taken = portal
        .post_multipart(
            path,
            &browser,
            &[
                ("csrf", None, browser.csrf.as_bytes()),
                ("name", None, b"hook"),
                ("plan", None, b"small"),
                ("file", Some("hook.js"), code),
            ],
        )
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    assert!(taken.body.contains(r#"id="error-name""#), "{}", taken.body);
}

#[tokio::test]
async fn an_upload_over_the_limit_is_the_api_413_at_the_file() {
    let portal = Portal::demo().await;
    with_cluster_and_no_latest(&portal).await;
    let browser = portal.sign_in(&portal.admin).await;
    let path = "/boundaries/other/uploads/new?type=function";
    let max = palisade_app::uploads::MAX_UPLOAD_BYTES;
    // One byte over: the application's own answer.
    let over = vec![b'x'; max + 1];
    let answer = portal
        .post_multipart(
            path,
            &browser,
            &[
                ("csrf", None, browser.csrf.as_bytes()),
                ("name", None, b"big"),
                ("file", Some("big.bin"), &over),
            ],
        )
        .await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(answer.text().contains(&format!(
        r#"<div class="field-error" id="error-file"><p lang="en">an upload may be at most {max} bytes (8 MiB)</p></div>"#
    )), "{}", answer.text());
    // Far over: the body is cut where it is read, and the form says so the same way. The
    // reader takes in whatever has arrived before it hands out the first field, so the cut
    // may come before the token (or any field) was read: the form is only shown again.
    let far = vec![b'x'; max + 256 * 1024];
    for parts in [
        [
            ("csrf", None, browser.csrf.as_bytes()),
            ("name", None, b"big".as_slice()),
            ("file", Some("big.bin"), far.as_slice()),
        ],
        [
            ("name", None, b"big".as_slice()),
            ("file", Some("big.bin"), far.as_slice()),
            ("csrf", None, b"forged".as_slice()),
        ],
    ] {
        let answer = portal.post_multipart(path, &browser, &parts).await;
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(answer.text().contains(&format!(
            r#"<div class="field-error" id="error-file"><p lang="en">an upload may be at most {max} bytes (8 MiB)</p></div>"#
        )), "{}", answer.text());
    }
    // A form that ends before its end: shown again, nothing stored.
    let cut = format!(
        "--b\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{}\r\n--b\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nbig\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nabc",
        browser.csrf
    );
    let answer = portal
        .post_body(
            path,
            &browser,
            "multipart/form-data; boundary=b",
            cut.into_bytes(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text());
    assert!(answer.text().contains("The form could not be read whole"));
    assert!(
        answer.text().contains(r#"value="big""#),
        "what was typed is kept"
    );
    let (status, _) = portal
        .api(
            Method::GET,
            "/v1/boundaries/other/resources/function/big",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The value of the first hidden `etag` field of a page.
fn etag_of(page: &common::Page) -> String {
    let marker = r#"name="etag" value=""#;
    let start = page.body.find(marker).unwrap() + marker.len();
    page.body[start..start + page.body[start..].find('"').unwrap()].to_owned()
}

/// Boundary `shop` with cluster `k1` (namespace `web`, read through a test double of the
/// clusters port) running Deployment `web` on nginx:latest (2 replicas) and Deployment `api`
/// without a `team` label (3 replicas); saved: the enforce policy `no-latest`, which denies
/// `web`. Signed in as admin.
async fn shop_running_workloads() -> (Portal, Browser) {
    use common::clusters::{deployment, FixedClusters};
    let clusters = FixedClusters {
        namespaces: vec!["web".into()],
        objects: vec![
            deployment(
                "web",
                "web",
                2,
                "nginx:latest",
                json!({"app": "web", "team": "web"}),
            ),
            deployment(
                "web",
                "api",
                3,
                "ghcr.io/acme/api:1.0",
                json!({"app": "api"}),
            ),
        ],
    };
    let portal = Portal::with_clusters(std::sync::Arc::new(clusters)).await;
    let (status, body) = portal
        .api(
            Method::POST,
            "/v1/boundaries",
            Some(json!({"name": "shop"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    portal.attached_cluster("shop", "k1", "web").await;
    let (status, body) = portal
        .api(
            Method::PUT,
            "/v1/boundaries/shop/policies/no-latest",
            Some(json!({"rules": [{"disallowLatestTag": {}}]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let browser = portal.sign_in(&portal.admin).await;
    (portal, browser)
}

#[tokio::test]
async fn a_save_is_held_only_for_what_it_newly_denies() {
    let (portal, browser) = shop_running_workloads().await;
    let edit = "/boundaries/shop/policies/no-latest/edit";
    let etag = etag_of(&portal.get(edit, &browser).await);
    let unchanged = [
        ("csrf", browser.csrf.as_str()),
        ("view", "form"),
        ("etag", &etag),
        ("order", "disallowLatestTag"),
        ("mode", "enforce"),
        ("scope", "all"),
        ("disallow_latest_tag", "on"),
        ("action", "save"),
    ];
    // The preview still shows what the version denies: web, already denied by the saved one.
    let mut preview = unchanged.to_vec();
    preview.retain(|(k, _)| *k != "action");
    preview.push(("action", "preview"));
    let previewed = portal.post(edit, &browser, &preview).await;
    assert_eq!(previewed.status, StatusCode::OK, "{}", previewed.body);
    assert!(previewed.text().contains("Would deny <strong>1</strong> objects of <strong>1</strong> workloads, <strong>2</strong> replicas at risk"), "{}", previewed.text());

    // Saving the unchanged policy denies nothing new: it is saved, not held.
    let saved = portal.post(edit, &browser, &unchanged).await;
    assert!(!saved.body.contains("confirm-notice"), "{}", saved.text());
    let saved = portal.follow(&saved, &mut browser.clone()).await;
    assert!(
        saved.text().contains("Saved. (unchanged)"),
        "{}",
        saved.text()
    );

    // A required team label newly denies api (web is denied already): held, naming api.
    let mut stricter = unchanged.to_vec();
    stricter.retain(|(k, _)| *k != "order");
    stricter.extend([
        ("order", "disallowLatestTag,requiredLabels"),
        ("label_key", "team"),
        ("label_value", ""),
    ]);
    let held = portal.post(edit, &browser, &stricter).await;
    assert_eq!(held.status, StatusCode::OK, "{}", held.body);
    let notice = text_of(element(
        &held.body,
        "",
        r#"<p id="confirm-notice">"#,
        "</p>",
    ));
    assert!(
        notice.starts_with("Not saved yet: this policy would newly deny 1 objects of 1 workloads, 3 replicas at risk."),
        "{notice}"
    );
    let objects = text_of(element(
        &held.body,
        "",
        r#"<ul id="confirm-objects">"#,
        "</ul>",
    ));
    assert_eq!(objects, "web/Deployment/api (cluster k1)");
    assert!(
        held.text()
            .contains(">Save anyway (3 replicas at risk)</button>"),
        "{}",
        held.text()
    );
    let (_, stored) = portal
        .api(Method::GET, "/v1/boundaries/shop/policies/no-latest", None)
        .await;
    assert_eq!(stored["spec"]["rules"], json!([{"disallowLatestTag": {}}]));
    assert_eq!(stored["etag"], json!(etag), "nothing was written");
}

#[tokio::test]
async fn an_unknown_page_is_the_portals_404_in_the_users_language() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    for path in [
        "/no-such-page",
        "/boundaries/shop/nonsense",
        "/boundaries/shop/policies/size-limits/nonsense",
    ] {
        let page = portal.get(path, &browser).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(
            page.headers.get("content-type").unwrap(),
            "text/html; charset=utf-8",
            "{path}: {}",
            page.body
        );
        assert!(page.body.contains(r#"<html lang="en">"#), "{}", page.body);
        assert!(page.body.contains("<h1>Not found</h1>"), "{}", page.body);
        assert!(page
            .body
            .contains(&format!("<p>There is no page at <code>{path}</code>.</p>")));
        assert!(page
            .body
            .contains(r#"<a href="/">Back to the boundaries</a>"#));
        assert!(
            page.body.contains("Signed in as"),
            "the page keeps the session"
        );
        assert!(page
            .headers
            .get("content-security-policy")
            .unwrap()
            .to_str()
            .unwrap()
            .contains("default-src 'none'"));
    }
    // In Swedish, signed in or not, for any method.
    let swedish = Browser::anonymous().with_cookie("lang", "sv");
    let page = portal
        .request(
            Method::POST,
            "/boundaries/shop/nonsense",
            &swedish,
            Some(&[("x", "y")]),
            &[],
        )
        .await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(page.body.contains(r#"<html lang="sv">"#), "{}", page.body);
    assert!(
        page.body.contains("<h1>Hittades inte</h1>"),
        "{}",
        page.body
    );
    assert!(page
        .body
        .contains("<p>Det finns ingen sida på <code>/boundaries/shop/nonsense</code>.</p>"));
    assert!(page
        .body
        .contains(r#"<a href="/">Tillbaka till boundaries</a>"#));

    // The API's paths keep the API's JSON error.
    for path in ["/v1", "/v1/nothing", "/v1/boundaries/shop/nonsense/more"] {
        let (status, body) = portal.api(Method::GET, path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(
            body,
            json!({"error": {"code": "not_found", "message": format!("no such path: {path}")}}),
            "{path}"
        );
    }
    let anonymous = portal.get("/v1/nothing", &Browser::anonymous()).await;
    assert_eq!(anonymous.status, StatusCode::NOT_FOUND);
    assert!(anonymous
        .body
        .starts_with(r#"{"error":{"code":"not_found""#));
    let (status, _) = portal.api(Method::PATCH, "/v1/boundaries", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_create_redirects_to_the_resource_page_which_shows_the_notice_once() {
    let portal = Portal::demo().await;
    let mut browser = portal.sign_in(&portal.admin).await;
    let created = portal
        .post(
            "/boundaries/shop/resources/new?type=app",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("name", "storefront"),
                ("plan", "small"),
                ("image", "ghcr.io/acme/storefront:2.0"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    let location = "/boundaries/shop/resources/app/storefront";
    assert_eq!(created.location(), location);
    browser.absorb(&created);
    let shown = portal.get(location, &browser).await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);
    assert!(
        shown.body.contains(
            r#"<p id="created">Created <code>app</code> <strong>storefront</strong>.</p>"#
        ),
        "{}",
        shown.body
    );
    assert!(shown.text().contains("ghcr.io/acme/storefront:2.0"));
    assert!(shown
        .body
        .contains(r#"href="/boundaries/shop/resources/app/storefront/edit""#));
    // Shown once: the page again (a reload) shows the resource without the notice.
    browser.absorb(&shown);
    let again = portal.get(location, &browser).await;
    assert_eq!(again.status, StatusCode::OK);
    assert!(!again.body.contains(r#"id="created""#), "{}", again.body);
    assert!(again.text().contains("ghcr.io/acme/storefront:2.0"));
    // A notice cannot be forged: a cookie the server did not seal shows nothing.
    let forged = browser.clone().with_cookie("palisade_flash", "Q3JlYXRlZA");
    assert!(!portal
        .get(location, &forged)
        .await
        .body
        .contains(r#"id="created""#));

    // An update and a function's warning: the same, with the API's warning.
    let edit = format!("{location}/edit");
    let etag = etag_of(&portal.get(&edit, &browser).await);
    let updated = portal
        .post(
            &edit,
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("etag", &etag),
                ("plan", "medium"),
                ("image", "ghcr.io/acme/storefront:2.1"),
            ],
        )
        .await;
    assert_eq!(updated.status, StatusCode::SEE_OTHER, "{}", updated.body);
    assert_eq!(updated.location(), location);
    browser.absorb(&updated);
    let shown = portal.get(location, &browser).await;
    assert!(shown
        .body
        .contains(r#"<p id="created">Updated <code>app</code> <strong>storefront</strong>.</p>"#));
    browser.absorb(&shown);
    let function = portal
        .post(
            "/boundaries/shop/resources/new?type=function",
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("name", "resize"),
                ("plan", "large"),
                ("source", "https://git.example.com/acme/resize.git"),
            ],
        )
        .await;
    assert_eq!(function.status, StatusCode::SEE_OTHER, "{}", function.body);
    browser.absorb(&function);
    let shown = portal.get(function.location(), &browser).await;
    assert!(
        text_of(element(&shown.body, "", r#"<ul id="warnings">"#, "</ul>")).contains(
            "Compute plan 'large' is disallowed by boundary policy 'size-limits'; plans of functions are not enforced"
        ),
        "{}",
        shown.body
    );
    browser.absorb(&shown);

    // A policy save redirects to the editor, which says what the save did.
    let policy = "/boundaries/shop/policies/trusted/edit";
    let etag = etag_of(&portal.get(policy, &browser).await);
    let saved = portal
        .post(
            policy,
            &browser,
            &[
                ("csrf", &browser.csrf),
                ("view", "form"),
                ("etag", &etag),
                ("order", "allowedRegistries,disallowLatestTag"),
                ("mode", "enforce"),
                ("scope", "all"),
                ("registries", "ghcr.io/acme\ndocker.io/library/"),
                ("disallow_latest_tag", "on"),
            ],
        )
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    assert_eq!(saved.location(), policy);
    browser.absorb(&saved);
    let shown = portal.get(policy, &browser).await;
    assert!(shown.text().contains(r#"Saved. (unchanged)"#));
    assert!(shown
        .text()
        .contains("registry prefix 'docker.io/library/' saved as 'docker.io/library'"));
    browser.absorb(&shown);
    assert!(!portal.get(policy, &browser).await.body.contains("Saved."));
}

/// The API pages a preview's findings; the editor shows the first page (the lists' default
/// of 100) with the whole summary, and says where to see every finding.
#[tokio::test]
async fn the_editor_shows_the_first_page_of_a_long_preview() {
    let portal = Portal::new().await;
    let (status, _) = portal
        .api(
            Method::POST,
            "/v1/boundaries",
            Some(json!({"name": "shop"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    for i in 0..101 {
        let (status, body) = portal
            .api(
                Method::POST,
                "/v1/boundaries/shop/resources",
                Some(json!({"type": "postgresql", "name": format!("db-{i:03}"), "plan": "large"})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let browser = portal.sign_in(&portal.admin).await;
    let form = [
        ("view", "form"),
        ("name", "size-limits"),
        ("plans", "small"),
        ("action", "preview"),
        ("csrf", &browser.csrf),
    ];
    let page = portal
        .post("/boundaries/shop/policies/new", &browser, &form)
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.text()
            .contains("101 resources whose plan it disallows"),
        "{}",
        page.text()
    );
    assert_eq!(
        page.body.matches("db-0").count() + page.body.matches("db-1").count(),
        100
    );
    assert!(page.body.contains("id=\"preview-more\""), "{}", page.body);
}

/// The boundary page shows each policy's exceptions with their end and time left, and the
/// active ones ending within 7 days at the top (SPEC 7), in English and Swedish.
#[tokio::test]
async fn exceptions_show_under_their_policy_and_those_ending_soon_on_top() {
    let portal = Portal::demo().await;
    let soon = (chrono::Utc::now() + chrono::Duration::days(3))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let later = (chrono::Utc::now() + chrono::Duration::days(30))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    for (name, expires) in [("legacy-web", &soon), ("legacy-db", &later)] {
        let answer = portal
            .api(
                Method::PUT,
                &format!("/v1/boundaries/shop/exceptions/{name}"),
                Some(
                    json!({"policy": "size-limits", "resources": ["app/web"], "plans": ["large"],
                    "expiresAt": expires, "reason": "moving to medium, OPS-1234"}),
                ),
            )
            .await;
        assert_eq!(answer.0, StatusCode::CREATED, "{answer:?}");
    }
    let developer = portal
        .sign_in(&portal.token("developer", Some("shop")).await)
        .await;
    let page = portal.get("/boundaries/shop", &developer).await;
    let text = page.text();
    let top = text
        .split("Exceptions ending within 7 days")
        .nth(1)
        .expect("the section is there");
    let top = top.split("Policies").next().unwrap_or_default();
    assert!(
        top.contains(&format!(
            "<code>legacy-web</code> (size-limits): {soon} — 2 d"
        )),
        "{top}"
    );
    assert!(!top.contains("legacy-db"), "{top}");
    assert!(
        text.contains(&format!(
            "<code>legacy-db</code>: active, until {later} (29 d) — moving to medium, OPS-1234"
        )),
        "{text}"
    );
    let swedish = portal
        .get(
            "/boundaries/shop",
            &developer.clone().with_cookie("lang", "sv"),
        )
        .await;
    assert!(swedish.text().contains("Undantag som upphör inom 7 dagar"));
}

/// A developer requests an exception with the portal's form; a bad field is shown on the form
/// with the API's message and nothing is saved; the request lets nothing past until a
/// boundary-admin approves it from the boundary page (post/redirect/get throughout; the
/// requester sees no Approve button).
#[tokio::test]
async fn a_developer_requests_an_exception_and_a_boundary_admin_approves_it() {
    let portal = Portal::demo().await;
    let mut developer = portal
        .sign_in(&portal.token("developer", Some("shop")).await)
        .await;
    let form = portal
        .get(
            "/boundaries/shop/exceptions/new?policy=size-limits",
            &developer,
        )
        .await;
    assert_eq!(form.status, StatusCode::OK, "{}", form.body);
    assert!(form
        .text()
        .contains("<option value=\"size-limits\" selected>size-limits</option>"));
    assert!(form.text().contains("Request the exception"));
    let expires = (chrono::Utc::now() + chrono::Duration::days(10))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let csrf = developer.csrf.clone();
    let fields = |expires: &str| {
        vec![
            ("csrf".to_owned(), csrf.clone()),
            ("name".to_owned(), "legacy-web".to_owned()),
            ("policy".to_owned(), "size-limits".to_owned()),
            ("rules".to_owned(), "AllowedComputePlans".to_owned()),
            ("resources".to_owned(), "app/web".to_owned()),
            ("plans".to_owned(), "large".to_owned()),
            ("expiresAt".to_owned(), expires.to_owned()),
            ("reason".to_owned(), "moving to medium, OPS-1234".to_owned()),
        ]
    };
    let as_refs = |f: &[(String, String)]| -> Vec<(String, String)> { f.to_vec() };
    // In the past: 400 on the form, the field marked, nothing saved.
    let past = as_refs(&fields("2020-01-01T00:00:00Z"));
    let past: Vec<(&str, &str)> = past.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let refused = portal
        .post("/boundaries/shop/exceptions/new", &developer, &past)
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(
        refused.text().contains("/expiresAt: "),
        "{}",
        refused.text()
    );
    assert!(refused
        .body
        .contains("id=\"expiresAt\" name=\"expiresAt\" value=\"2020-01-01T00:00:00Z\""));
    assert!(refused.body.contains("aria-invalid=\"true\""));
    let (status, _) = portal
        .api(
            Method::GET,
            "/v1/boundaries/shop/exceptions/legacy-web",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing was saved");

    let good = fields(&expires);
    let good: Vec<(&str, &str)> = good.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let saved = portal
        .post("/boundaries/shop/exceptions/new", &developer, &good)
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    assert_eq!(saved.location(), "/boundaries/shop");
    let page = portal.follow(&saved, &mut developer).await;
    let text = page.text();
    assert!(
        text.contains("Requested exception 'legacy-web' (it lets nothing past until an admin or boundary-admin approves it)"),
        "{text}"
    );
    assert!(
        text.contains("<code>legacy-web</code>: requested, until"),
        "{text}"
    );
    assert!(
        !text.contains("/exceptions/legacy-web/approve"),
        "a developer cannot approve"
    );
    // A reload shows the page alone.
    let again = portal.get("/boundaries/shop", &developer).await;
    assert!(!again.text().contains("Requested exception"));
    let (_, shown) = portal
        .api(
            Method::GET,
            "/v1/boundaries/shop/exceptions/legacy-web",
            None,
        )
        .await;
    assert_eq!(shown["status"], "requested");

    let mut boundary_admin = portal
        .sign_in(&portal.token("boundary-admin", Some("shop")).await)
        .await;
    let page = portal.get("/boundaries/shop", &boundary_admin).await;
    assert!(page
        .text()
        .contains("action=\"/boundaries/shop/exceptions/legacy-web/approve\""));
    let etag = shown["etag"].as_str().unwrap().to_owned();
    let csrf = boundary_admin.csrf.clone();
    let approved = portal
        .post(
            "/boundaries/shop/exceptions/legacy-web/approve",
            &boundary_admin,
            &[("csrf", &csrf), ("etag", &etag)],
        )
        .await;
    let page = portal.follow(&approved, &mut boundary_admin).await;
    assert!(
        page.text().contains(&format!(
            "Approved exception 'legacy-web': active until {expires}"
        )),
        "{}",
        page.text()
    );
    let (_, shown) = portal
        .api(
            Method::GET,
            "/v1/boundaries/shop/exceptions/legacy-web",
            None,
        )
        .await;
    assert_eq!(shown["status"], "active");
    assert!(shown["approved_by"]
        .as_str()
        .unwrap()
        .ends_with("(boundary-admin)"));
    // In Swedish, the form speaks Swedish.
    let swedish = portal
        .get(
            "/boundaries/shop/exceptions/new",
            &developer.clone().with_cookie("lang", "sv"),
        )
        .await;
    assert!(swedish.text().contains("Begär undantaget"));
}

/// A resource page's live region alone (`.../live?status=`, read by `/static/live.js`): it
/// answers at once when the status shown is not the stored one, waits when it is, and is
/// woken by the status palisade records, before its wait ends.
#[tokio::test]
async fn the_live_region_answers_when_the_status_moves() {
    use palisade_api_types::view::WorkloadStatus;
    let portal = Portal::demo().await;
    let store = portal.store.clone();
    let body = json!({"type": "app", "name": "follow", "plan": "small",
        "image": "ghcr.io/acme/api:1.0"});
    let new = palisade_store::NewResource::unplaced("shop", "app", "follow", body.to_string());
    store.create_resource(new, None, None).await.unwrap();
    let key = palisade_store::ResourceKey {
        boundary: "shop".into(),
        resource_type: "app".into(),
        name: "follow".into(),
    };
    let app = portal.state.app.clone();
    assert!(app
        .records()
        .record_workload_status(&key, &WorkloadStatus::Deploying)
        .await
        .unwrap());
    let browser = portal.sign_in(&portal.admin).await;
    let page = portal
        .get("/boundaries/shop/resources/app/follow", &browser)
        .await;
    assert!(
        page.body.contains(
            r#"data-live="/boundaries/shop/resources/app/follow/live" data-status="deploying""#
        ),
        "{}",
        page.body
    );

    // The page shows another status: answered at once, with the stored one.
    let live = "/boundaries/shop/resources/app/follow/live";
    let stale = portal
        .get(&format!("{live}?status=running"), &browser)
        .await;
    assert_eq!(stale.status, StatusCode::OK);
    assert!(
        stale.body.starts_with(r#"<section id="live""#),
        "{}",
        stale.body
    );
    assert!(stale.body.contains(r#"data-status="deploying""#));
    assert!(!stale.body.contains("<html"), "the region alone");

    // The page shows the stored status: the read waits for a change, up to a second.
    let started = std::time::Instant::now();
    let same = portal
        .get(&format!("{live}?status=deploying"), &browser)
        .await;
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
    assert!(same.body.contains(r#"data-status="deploying""#));

    // A status recorded meanwhile ends the wait with the new region.
    let started = std::time::Instant::now();
    let recorder = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        app.records()
            .record_workload_status(&key, &WorkloadStatus::Running)
            .await
            .unwrap()
    });
    let moved = portal
        .get(&format!("{live}?status=deploying"), &browser)
        .await;
    assert!(recorder.await.unwrap());
    assert!(
        started.elapsed() < std::time::Duration::from_millis(900),
        "woken by the write, not the end of the wait: {:?}",
        started.elapsed()
    );
    assert!(
        moved.body.contains(r#"data-status="running""#),
        "{}",
        moved.body
    );
    assert!(moved.body.contains(r#"data-moving="false""#));

    // Signed out: the sign-in page, which has no region (the script stops there).
    let anonymous = Browser::anonymous();
    let out = portal.get(live, &anonymous).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
}

/// SPEC 7 v3.2 in the portal: the Approve button sits beside the whole spec of the request, and
/// its form carries the etag of what was shown, so a request changed since is refused with the
/// 412 on the page and nothing is approved; the "new exception" form never replaces an
/// exception of the same name (409 on the form).
#[tokio::test]
async fn an_approval_is_of_the_spec_shown_and_the_form_never_replaces() {
    let portal = Portal::demo().await;
    let dev_token = portal.token("developer", Some("shop")).await;
    let mut developer = portal.sign_in(&dev_token).await;
    let expires = (chrono::Utc::now() + chrono::Duration::days(10))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let csrf = developer.csrf.clone();
    let reason = "moving to medium, OPS-1234";
    let fields = common::exception_request(&csrf, "legacy-web", "size-limits", &expires, reason);
    let saved = portal
        .post("/boundaries/shop/exceptions/new", &developer, &fields)
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    portal.follow(&saved, &mut developer).await;

    // The same name again: a 409 on the form, and the stored request is unchanged.
    let mut again = fields;
    again[6] = ("reason", "something else");
    let refused = portal
        .post("/boundaries/shop/exceptions/new", &developer, &again)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert!(
        refused
            .text()
            .contains("exception 'legacy-web' already exists in boundary 'shop'"),
        "{}",
        refused.text()
    );
    let (_, stored) = portal
        .api(
            Method::GET,
            "/v1/boundaries/shop/exceptions/legacy-web",
            None,
        )
        .await;
    assert_eq!(stored["spec"]["reason"], "moving to medium, OPS-1234");
    let etag = stored["etag"].as_str().unwrap().to_owned();

    // The approver sees the whole spec beside the button, and the etag of what is shown.
    let boundary_admin = portal
        .sign_in(&portal.token("boundary-admin", Some("shop")).await)
        .await;
    let page = portal.get("/boundaries/shop", &boundary_admin).await;
    let text = page.text();
    let spec = format!(
        "<pre class=\"spec\" lang=\"en\">policy: size-limits\nresources:\n- app/web\nplans:\n- large\nexpiresAt: {expires}\nreason: moving to medium, OPS-1234\n</pre>"
    );
    assert!(text.contains(&spec), "{text}");
    assert!(
        page.body
            .contains(&format!("name=\"etag\" value=\"{etag}\"")),
        "{}",
        page.body
    );

    // The developer widens the request after it was shown: the approval of what was shown is
    // refused, and nothing is approved.
    let (status, _) = portal
        .api_as(
            &dev_token,
            Method::PUT,
            "/v1/boundaries/shop/exceptions/legacy-web",
            Some(
                json!({"policy": "size-limits", "resources": ["app/web", "app/api"],
                "plans": ["large"], "expiresAt": expires, "reason": "moving to medium, OPS-1234"}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let csrf = boundary_admin.csrf.clone();
    let stale = portal
        .post(
            "/boundaries/shop/exceptions/legacy-web/approve",
            &boundary_admin,
            &[("csrf", &csrf), ("etag", &etag)],
        )
        .await;
    assert_eq!(
        stale.status,
        StatusCode::PRECONDITION_FAILED,
        "{}",
        stale.body
    );
    assert!(
        stale.text().contains("precondition_failed"),
        "{}",
        stale.text()
    );
    let (_, shown) = portal
        .api(
            Method::GET,
            "/v1/boundaries/shop/exceptions/legacy-web",
            None,
        )
        .await;
    assert_eq!(shown["status"], "requested");

    // Shown again, it is approved.
    let page = portal.get("/boundaries/shop", &boundary_admin).await;
    assert!(page.text().contains("- app/api\n"), "{}", page.text());
    let etag = shown["etag"].as_str().unwrap().to_owned();
    let approved = portal
        .post(
            "/boundaries/shop/exceptions/legacy-web/approve",
            &boundary_admin,
            &[("csrf", &csrf), ("etag", &etag)],
        )
        .await;
    assert_eq!(approved.status, StatusCode::SEE_OTHER, "{}", approved.body);
}

/// Signing out ends the session on the server: the same cookie, kept (copied, or in a browser
/// that ignores the deletion), signs no one in again; signing in again makes a new session.
#[tokio::test]
async fn a_signed_out_session_cookie_signs_no_one_in_again() {
    let portal = Portal::demo().await;
    let signed_in = portal.sign_in(&portal.admin).await;
    assert_eq!(
        portal.get("/boundaries/shop", &signed_in).await.status,
        StatusCode::OK
    );
    let kept = signed_in.clone();
    let out = portal
        .post("/sign-out", &signed_in, &[("csrf", &signed_in.csrf)])
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(out.location(), "/sign-in");
    assert!(out.set_cookie("palisade_session").contains("Max-Age=0"));

    // The old cookie: every page sends it to sign in, and the sign-in form is shown to it.
    let page = portal.get("/boundaries/shop", &kept).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.location(), "/sign-in?next=%2Fboundaries%2Fshop");
    let form = portal.get("/sign-in", &kept).await;
    assert_eq!(form.status, StatusCode::OK);
    assert!(form.text().contains("Sign in with a palisade API token"));
    // Its forms, CSRF token and all, are sent to sign in too, and do nothing.
    let refused = portal
        .post(
            "/boundaries",
            &kept,
            &[("csrf", &kept.csrf), ("name", "late")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::SEE_OTHER, "{}", refused.body);
    assert!(refused.location().starts_with("/sign-in"), "{refused:?}");
    assert_eq!(
        portal.api(Method::GET, "/v1/boundaries/late", None).await.0,
        StatusCode::NOT_FOUND
    );
    // The token itself still works, and signs in again with a session of its own.
    let again = portal.sign_in(&portal.admin).await;
    assert_eq!(
        portal.get("/boundaries/shop", &again).await.status,
        StatusCode::OK
    );
    assert_eq!(
        portal.get("/boundaries/shop", &kept).await.status,
        StatusCode::SEE_OTHER
    );
}

/// The last admin token cannot be revoked from the tokens page either: 409 with the API's
/// message, and the token keeps working.
#[tokio::test]
async fn the_last_admin_token_is_not_revoked_from_the_portal() {
    let portal = Portal::demo().await;
    let browser = portal.sign_in(&portal.admin).await;
    let (status, tokens) = portal.api(Method::GET, "/v1/tokens", None).await;
    assert_eq!(status, StatusCode::OK);
    let admin_id = tokens["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["role"] == "admin")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused = portal
        .post(
            &format!("/tokens/{admin_id}/revoke"),
            &browser,
            &[("csrf", &browser.csrf)],
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert!(
        refused.text().contains(&format!(
            "token '{admin_id}' is the last admin token: create another admin token first"
        )),
        "{}",
        refused.body
    );
    assert_eq!(portal.get("/tokens", &browser).await.status, StatusCode::OK);
}

/// When palisade serves HTTPS itself or its public URL is https (`Options::secure_cookies`),
/// every cookie is Secure, without any header from a proxy.
#[tokio::test]
async fn every_cookie_is_secure_when_palisade_is_reached_over_https() {
    let mut portal = Portal::demo().await;
    portal.router = palisade_server::app_with(
        portal.state.clone(),
        palisade_portal::router_with(palisade_portal::Options {
            secure_cookies: true,
        }),
    );
    let anonymous = Browser::anonymous();
    let form = portal.get("/sign-in", &anonymous).await;
    assert!(
        form.set_cookie("palisade_sign_in").ends_with("; Secure"),
        "{}",
        form.set_cookie("palisade_sign_in")
    );
    let mut browser = Browser::anonymous();
    browser.absorb(&form);
    let csrf = form.csrf();
    let done = portal
        .post(
            "/sign-in",
            &browser,
            &[("csrf", &csrf), ("token", &portal.admin)],
        )
        .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    for name in ["palisade_session", "palisade_sign_in"] {
        let cookie = done.set_cookie(name);
        assert_eq!(cookie.matches("Secure").count(), 1, "{cookie}");
        assert!(cookie.ends_with("; Secure"), "{cookie}");
    }
    // A proxy's header as well: still one Secure.
    let lang = portal
        .request(
            Method::GET,
            "/lang/sv?next=/",
            &anonymous,
            None,
            &[("x-forwarded-proto", "https")],
        )
        .await;
    assert_eq!(lang.set_cookie("lang").matches("Secure").count(), 1);
}

/// A policy's staged rollout on the boundary page (SPEC 8): its state, stages and what is
/// reached; a developer reads it, a boundary-admin promotes it and, for the next change,
/// aborts it.
#[tokio::test]
async fn a_rollout_is_shown_and_a_boundary_admin_promotes_and_aborts_it() {
    let portal = Portal::demo().await;
    let spec = |mode: &str| {
        json!({"mode": mode, "rules": [{"disallowLatestTag": {}}],
            "rollout": {"stages": [{"namespaces": "25%", "for": "1h"}], "promote": "manual"}})
    };
    let (status, saved) = portal
        .api(
            Method::PUT,
            "/v1/boundaries/shop/policies/staged",
            Some(spec("enforce")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{saved}");

    let developer = portal
        .sign_in(&portal.token("developer", Some("shop")).await)
        .await;
    let page = portal.get("/boundaries/shop", &developer).await;
    let text = page.text();
    assert!(
        text.contains("Version 1: <strong>running</strong>, stage 1/2, 0 denials"),
        "{text}"
    );
    assert!(
        text.contains("<li>every cluster: 25% of the namespaces, for 1h — reached</li>"),
        "{text}"
    );
    assert!(text.contains("<li>everywhere</li>"), "{text}");
    assert!(
        !text.contains("/policies/staged/rollout/promote"),
        "a developer reads"
    );

    let mut boundary_admin = portal
        .sign_in(&portal.token("boundary-admin", Some("shop")).await)
        .await;
    let page = portal.get("/boundaries/shop", &boundary_admin).await;
    assert!(page
        .text()
        .contains("action=\"/boundaries/shop/policies/staged/rollout/promote\""));
    let csrf = boundary_admin.csrf.clone();
    let promoted = portal
        .post(
            "/boundaries/shop/policies/staged/rollout/promote",
            &boundary_admin,
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(promoted.status, StatusCode::SEE_OTHER, "{}", promoted.body);
    let page = portal.follow(&promoted, &mut boundary_admin).await;
    let text = page.text();
    assert!(
        text.contains("Promoted the rollout of 'staged': version 1 done"),
        "{text}"
    );
    assert!(text.contains("Version 1: <strong>done</strong>"), "{text}");
    assert!(!text.contains("/policies/staged/rollout/abort"), "{text}");

    portal
        .api(
            Method::PUT,
            "/v1/boundaries/shop/policies/staged",
            Some(spec("audit")),
        )
        .await;
    let csrf = boundary_admin.csrf.clone();
    let aborted = portal
        .post(
            "/boundaries/shop/policies/staged/rollout/abort",
            &boundary_admin,
            &[("csrf", &csrf)],
        )
        .await;
    let page = portal.follow(&aborted, &mut boundary_admin).await;
    let text = page.text();
    assert!(
        text.contains("Aborted the rollout of 'staged': version 2 aborted"),
        "{text}"
    );
    assert!(
        text.contains("Version 2: <strong>aborted</strong> (previous version 1)"),
        "{text}"
    );
    // Nothing runs now: a promote is refused, and says why.
    let csrf = boundary_admin.csrf.clone();
    let refused = portal
        .post(
            "/boundaries/shop/policies/staged/rollout/promote",
            &boundary_admin,
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert!(refused
        .text()
        .contains("policy 'staged' of boundary 'shop' has no rollout running"));
}
