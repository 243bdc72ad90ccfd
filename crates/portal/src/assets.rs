//! Static assets embedded in the binary: the portal's one stylesheet and its one script (the
//! live region of a resource page, a progressive enhancement).

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

const CSS: &str = include_str!("assets/portal.css");
const LIVE_JS: &str = include_str!("assets/live.js");

/// A short hash of an asset's content, its version in URLs.
fn version(content: &str) -> String {
    hex::encode(&Sha256::digest(content.as_bytes())[..6])
}

/// The stylesheet's URL, versioned by its content so it can be cached for long.
pub fn css_href() -> String {
    static VERSION: OnceLock<String> = OnceLock::new();
    format!(
        "/static/portal.css?v={}",
        VERSION.get_or_init(|| version(CSS))
    )
}

/// The script's URL, versioned like the stylesheet's.
pub fn live_js_href() -> String {
    static VERSION: OnceLock<String> = OnceLock::new();
    format!(
        "/static/live.js?v={}",
        VERSION.get_or_init(|| version(LIVE_JS))
    )
}

/// An asset with its type, cached for a day (its URL changes with its content).
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=86400"),
            ),
        ],
        body,
    )
        .into_response()
}

pub async fn serve(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "portal.css" => asset("text/css; charset=utf-8", CSS),
        "live.js" => asset("text/javascript; charset=utf-8", LIVE_JS),
        _ => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}
