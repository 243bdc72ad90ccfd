//! A Swedish page holds no English word of palisade's own (issue 26, item 4): every page of the
//! portal is fetched in Swedish, what is marked `lang="en"` (the API's and Kubernetes' own
//! texts), code and what users typed are left out, and no English phrase of the portal's
//! catalogue (`src/i18n.rs`) whose Swedish differs may be found in what is left.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{exception_request, unescape, Portal};
use serde_json::{json, Value};

/// The catalogue's (English, Swedish) pairs that differ, read from its source.
fn catalogue() -> Vec<(String, String)> {
    let source = include_str!("../src/i18n.rs");
    let mut pairs = Vec::new();
    for line in source.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix('"') else {
            continue;
        };
        let Some((english, rest)) = rest.split_once("\" => \"") else {
            continue;
        };
        let Some(swedish) = rest.strip_suffix("\",") else {
            continue;
        };
        if english != swedish {
            pairs.push((english.to_owned(), swedish.to_owned()));
        }
    }
    assert!(
        pairs.len() > 150,
        "the catalogue was not read: {}",
        pairs.len()
    );
    pairs
}

/// Removes each element whose opening tag satisfies `drop`, with what it holds.
fn without(html: &str, drop: impl Fn(&str) -> bool) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('>') else {
            break;
        };
        let tag = &rest[start..start + end + 1];
        let name: String = tag[1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if !name.is_empty() && !tag.ends_with("/>") && drop(tag) {
            // Skip to the matching close tag, counting nested ones of the same name.
            let (open, close) = (format!("<{name}"), format!("</{name}>"));
            let mut depth = 0usize;
            let mut at = start;
            loop {
                let next_open = rest[at + 1..].find(&open).map(|i| i + at + 1);
                let next_close = rest[at + 1..].find(&close).map(|i| i + at + 1);
                match (next_open, next_close) {
                    (Some(o), Some(c)) if o < c => {
                        depth += 1;
                        at = o;
                    }
                    (_, Some(c)) if depth > 0 => {
                        depth -= 1;
                        at = c;
                    }
                    (_, Some(c)) => {
                        rest = &rest[c + close.len()..];
                        break;
                    }
                    _ => {
                        rest = "";
                        break;
                    }
                }
            }
        } else {
            out.push_str(tag);
            rest = &rest[start + end + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// What a Swedish reader reads on the page as palisade's own words.
fn palisade_words(html: &str) -> String {
    let body = html.split("<body>").nth(1).unwrap_or(html);
    let kept = without(body, |tag| {
        tag.contains(r#"lang="en""#)
            || ["<code", "<script", "<textarea", "<pre", "<time", "<option"]
                .iter()
                .any(|t| tag.starts_with(t))
    });
    // The tags themselves (their attributes are not read), then the entities.
    let text = without(&kept, |_| false);
    let mut plain = String::new();
    let mut inside = false;
    for c in text.chars() {
        match c {
            '<' => inside = true,
            '>' => {
                inside = false;
                plain.push(' ');
            }
            _ if !inside => plain.push(c),
            _ => {}
        }
    }
    unescape(&plain)
}

/// Whether `phrase` is in `text` as whole words.
fn has_phrase(text: &str, phrase: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    text.match_indices(phrase).any(|(at, _)| {
        let before = text[..at].chars().next_back().is_none_or(|c| !word(c));
        let after = text[at + phrase.len()..]
            .chars()
            .next()
            .is_none_or(|c| !word(c));
        before && after
    })
}

#[tokio::test]
async fn no_swedish_page_holds_an_english_phrase_of_palisade_s_own() {
    let portal = Portal::demo().await;
    let admin = portal.sign_in(&portal.admin).await;
    let browser = admin.clone().with_cookie("lang", "sv");
    // An exception, so that the exception pages and notices have content.
    let expires = (std::time::SystemTime::now() + std::time::Duration::from_secs(30 * 86_400))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let expires = chrono::DateTime::from_timestamp(i64::try_from(expires).unwrap(), 0)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let (status, body) = portal
        .api(
            Method::PUT,
            "/v1/boundaries/shop/exceptions/legacy",
            Some(
                json!({"policy": "size-limits", "resources": ["app/legacy"], "plans": ["large"],
                        "expiresAt": expires, "reason": "migration"}),
            ),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let (_, resources) = portal
        .api(Method::GET, "/v1/boundaries/shop/resources", None)
        .await;
    let (_, policies) = portal
        .api(Method::GET, "/v1/boundaries/shop/policies", None)
        .await;
    let mut paths: Vec<String> = [
        "/",
        "/boundaries/shop",
        "/boundaries/shop/clusters",
        "/clusters",
        "/tokens",
        "/boundaries/shop/resources/new",
        "/boundaries/shop/policies/new",
        "/boundaries/shop/exceptions/new",
        "/boundaries/shop/uploads/new?type=function",
        "/boundaries/shop/uploads/new?type=static_web_app",
    ]
    .iter()
    .map(|p| (*p).to_owned())
    .collect();
    for ty in [
        "app",
        "container_instance",
        "function",
        "static_web_app",
        "postgresql",
        "sqlserver",
        "qdrant",
        "valkey",
    ] {
        paths.push(format!("/boundaries/shop/resources/new?type={ty}"));
    }
    for item in resources["items"].as_array().unwrap() {
        let base = format!(
            "/boundaries/shop/resources/{}/{}",
            item["type"].as_str().unwrap(),
            item["name"].as_str().unwrap()
        );
        paths.push(base.clone());
        paths.push(format!("{base}/edit"));
        paths.push(format!("{base}/delete"));
    }
    for item in policies["items"].as_array().unwrap() {
        let name = item["name"].as_str().unwrap();
        paths.push(format!("/boundaries/shop/policies/{name}/edit"));
        paths.push(format!("/boundaries/shop/policies/{name}/delete"));
    }
    let catalogue = catalogue();
    let mut found = Vec::new();
    let mut pages = 0;
    for path in &paths {
        let page = portal.get(path, &browser).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        assert!(page.body.contains(r#"<html lang="sv">"#), "{path}");
        pages += 1;
        let words = palisade_words(&page.body);
        for (english, _) in &catalogue {
            if has_phrase(&words, english) {
                found.push(format!("{path}: {english:?}"));
            }
        }
    }
    // Anonymous pages too: sign-in and the 404.
    let anonymous = common::Browser::anonymous().with_cookie("lang", "sv");
    for (path, status) in [
        ("/sign-in", StatusCode::OK),
        ("/nope", StatusCode::NOT_FOUND),
    ] {
        let page = portal.get(path, &anonymous).await;
        assert_eq!(page.status, status, "{path}");
        pages += 1;
        for (english, _) in &catalogue {
            if has_phrase(&palisade_words(&page.body), english) {
                found.push(format!("{path}: {english:?}"));
            }
        }
    }
    assert!(pages > 30, "{pages} pages");
    eprintln!("{pages} Swedish pages read");
    assert!(
        found.is_empty(),
        "English of palisade's own on Swedish pages:\n{}",
        found.join("\n")
    );
}

/// Save warnings of a policy and of an exception are said in Swedish on the page the save
/// redirects to, with what they quote (names, prefixes) as written.
#[tokio::test]
async fn save_warnings_are_swedish_on_swedish_pages() {
    let portal = Portal::demo().await;
    let browser = portal
        .sign_in(&portal.admin)
        .await
        .with_cookie("lang", "sv");
    let yaml = "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata:\n  name: warned\n  boundary: shop\nspec:\n  rules:\n    - allowedRegistries: {registries: [ghcr.io/acme/]}\n    - requiredLabels: {labels: [{key: team, value: \"\"}]}\n";
    let saved = portal.save_policy_yaml(&browser, yaml).await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.text());
    let page = portal.follow(&saved, &mut browser.clone()).await;
    let text = unescape(&page.body);
    assert!(text.contains("Sparad. (skapad)"), "{text}");
    assert!(
        text.contains("<li>registerprefixet 'ghcr.io/acme/' sparades som 'ghcr.io/acme'</li>"),
        "{text}"
    );
    assert!(
        text.contains("<li>etiketten 'team' med värdet \"\" sparades som valfritt värde</li>"),
        "{text}"
    );

    let expires = chrono::Utc::now() + chrono::Duration::days(30);
    let expires = expires.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let reason = "before the policy";
    let fields = exception_request(&browser.csrf, "early", "not-yet", &expires, reason);
    let saved = portal
        .post("/boundaries/shop/exceptions/new", &browser, &fields)
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.text());
    let page = portal.follow(&saved, &mut browser.clone()).await;
    let text = unescape(&page.body);
    assert!(
        text.contains("<p>boundaryn 'shop' har ingen policy 'not-yet' (ännu): undantaget gäller när den får en</p>"),
        "{text}"
    );
}

/// The checker finds what it must: an English phrase outside `lang="en"` is found, inside it
/// or in code it is not.
#[test]
fn the_checker_sees_english_only_outside_marked_text() {
    let page = r#"<html lang="sv"><body><h1>Kluster</h1><p>Create a token</p><span lang="en">Create a resource <b>Status</b></span><code>Name</code></body></html>"#;
    let words = palisade_words(page);
    assert!(has_phrase(&words, "Create a token"));
    assert!(!has_phrase(&words, "Create a resource"));
    assert!(!has_phrase(&words, "Status"));
    assert!(!has_phrase(&words, "Name"));
    assert!(has_phrase(&words, "Kluster"));
    let _: Value = json!(null);
}
