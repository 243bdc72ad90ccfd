//! URL-encoded form bodies as ordered (name, value) pairs: repeated fields (rows of labels or
//! components, several scope clusters) keep their order.

use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};

/// A submitted form.
#[derive(Debug, Default)]
pub struct FormData {
    pairs: Vec<(String, String)>,
}

impl FormData {
    pub fn parse(bytes: &[u8]) -> FormData {
        FormData {
            pairs: form_urlencoded::parse(bytes).into_owned().collect(),
        }
    }

    /// The first value of `name`, or "".
    pub fn get(&self, name: &str) -> &str {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// The etag the form was read at (its `etag` field), to send as `If-Match`; `None` when
    /// empty or absent.
    pub fn if_match(&self) -> Option<&str> {
        Some(self.get("etag")).filter(|e| !e.is_empty())
    }

    /// Whether `name` was sent at all (a checked checkbox).
    pub fn has(&self, name: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == name)
    }

    /// Every value of `name`, in order.
    pub fn all(&self, name: &str) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

impl<S: Send + Sync> FromRequest<S> for FormData {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(FormData::parse(&bytes))
    }
}
