//! Static assets embedded in the binary: the portal's one stylesheet.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

const CSS: &str = include_str!("assets/portal.css");

fn css_version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| hex::encode(&Sha256::digest(CSS.as_bytes())[..6]))
}

/// The stylesheet's URL, versioned by its content so it can be cached for long.
pub fn css_href() -> String {
    format!("/static/portal.css?v={}", css_version())
}

pub async fn serve(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "portal.css" => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/css; charset=utf-8"),
                ),
                (
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("public, max-age=86400"),
                ),
            ],
            CSS,
        )
            .into_response(),
        _ => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}
