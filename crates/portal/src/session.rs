//! Sessions, cookies and CSRF. The session cookie holds the API token, a per-session CSRF token
//! and the session's id, sealed with the server's key, so it can be neither read nor forged.
//! Every POST carries the CSRF token in a hidden field and is refused with 403 when it does not
//! match. Signing out ends the session in the store (its id is remembered until the session
//! would have expired), so the cookie, if kept, signs no one in again.
//!
//! The `Secure` rule: every cookie is `Secure` when palisade serves HTTPS itself
//! (`--tls-cert`) or its public URL is `https://` (`--public-url`: TLS is terminated in front;
//! [`crate::Options::secure_cookies`]). Otherwise a cookie is `Secure` when the request reached
//! palisade through HTTPS, as a TLS-terminating proxy says with `X-Forwarded-Proto: https` (or
//! `Forwarded: proto=https`). Without either the portal is being used over plain HTTP (on
//! loopback, say), where a `Secure` cookie would never be sent back and sign-in could not work.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{header, HeaderMap, HeaderValue};
use base64::Engine;
use palisade_app::caller::{end_session, session_ended};
use palisade_app::App;
use palisade_app::AppError;
use palisade_app::{caller_from_token, Caller};
use rand::RngCore;
use serde::{Deserialize, Serialize};

/// The sealed session: API token and CSRF token.
pub const SESSION_COOKIE: &str = "palisade_session";
/// Before sign-in: the CSRF token of the sign-in form (double submit).
pub const SIGN_IN_COOKIE: &str = "palisade_sign_in";
/// `en` or `sv`.
pub const LANG_COOKIE: &str = "lang";
/// The hidden form field that carries the CSRF token.
pub const CSRF_FIELD: &str = "csrf";

/// A session ends after this long even if the browser keeps running.
const SESSION_LIFETIME_SECS: u64 = 12 * 60 * 60;

/// A cookie without `id` (made before sessions could end) opens no session.
#[derive(Serialize, Deserialize)]
struct SessionData {
    id: String,
    token: String,
    csrf: String,
    issued: u64,
}

impl SessionData {
    /// When the session expires whatever happens.
    fn expires(&self) -> SystemTime {
        UNIX_EPOCH + std::time::Duration::from_secs(self.issued + SESSION_LIFETIME_SECS)
    }
}

/// A signed-in caller.
#[derive(Clone, Debug)]
pub struct Session {
    pub caller: Caller,
    pub csrf: String,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// 32 random bytes, URL-safe base64.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The value of cookie `name`, from every `Cookie` header.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
}

/// Whether the request reached palisade over HTTPS (see the module docs).
pub fn is_secure(headers: &HeaderMap) -> bool {
    let forwarded_proto = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .map(|v| v.trim().eq_ignore_ascii_case("https"));
    if let Some(https) = forwarded_proto {
        return https;
    }
    headers
        .get(header::FORWARDED)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .map(|first| {
            first.split(';').any(|pair| {
                pair.trim().split_once('=').is_some_and(|(k, v)| {
                    k.trim().eq_ignore_ascii_case("proto")
                        && v.trim().trim_matches('"').eq_ignore_ascii_case("https")
                })
            })
        })
        .unwrap_or(false)
}

/// A `Set-Cookie` value: `HttpOnly`, `SameSite=Strict`, `Path=/`, and `Secure` over HTTPS.
/// `max_age` `Some(0)` deletes the cookie; `None` makes a browser-session cookie.
pub fn set_cookie(name: &str, value: &str, secure: bool, max_age: Option<u64>) -> HeaderValue {
    let mut text = format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict");
    if let Some(age) = max_age {
        text.push_str(&format!("; Max-Age={age}"));
    }
    if secure {
        text.push_str("; Secure");
    }
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `response` with `Secure` added to every cookie it sets that lacks it.
pub fn all_cookies_secure(mut response: axum::response::Response) -> axum::response::Response {
    let headers = response.headers_mut();
    let cookies: Vec<HeaderValue> = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|value| match value.to_str() {
            Ok(text) if !text.split(';').any(|part| part.trim() == "Secure") => {
                HeaderValue::from_str(&format!("{text}; Secure")).unwrap_or_else(|_| value.clone())
            }
            _ => value.clone(),
        })
        .collect();
    if !cookies.is_empty() {
        headers.remove(header::SET_COOKIE);
        for cookie in cookies {
            headers.append(header::SET_COOKIE, cookie);
        }
    }
    response
}

/// A new session for `token`: the cookie value and its CSRF token.
pub fn seal_session(state: &App, token: &str) -> Result<(String, String), AppError> {
    let csrf = random_token();
    let data = SessionData {
        id: random_token(),
        token: token.to_owned(),
        csrf: csrf.clone(),
        issued: now_secs(),
    };
    let plain = serde_json::to_vec(&data)
        .map_err(|e| AppError::Internal(format!("session cannot be encoded: {e}")))?;
    let sealed = state
        .sealing
        .seal(&plain)
        .map_err(|e| AppError::Internal(format!("session cannot be sealed: {e}")))?;
    Ok((
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed),
        csrf,
    ))
}

fn open_session(state: &App, value: &str) -> Option<SessionData> {
    let sealed = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(value)
        .ok()?;
    let plain = state.sealing.open(&sealed).ok()?;
    let data: SessionData = serde_json::from_slice(&plain).ok()?;
    let age = now_secs().saturating_sub(data.issued);
    (age <= SESSION_LIFETIME_SECS).then_some(data)
}

/// The request's session: `None` without a valid cookie, when the session was ended (signed
/// out) or when the token is no longer valid (unknown, revoked, expired); an error when the
/// store cannot be asked.
pub async fn session(state: &App, headers: &HeaderMap) -> Result<Option<Session>, AppError> {
    let Some(data) = cookie(headers, SESSION_COOKIE).and_then(|v| open_session(state, v)) else {
        return Ok(None);
    };
    if session_ended(state, &data.id).await? {
        return Ok(None);
    }
    match caller_from_token(state, &data.token).await {
        Ok(caller) => Ok(Some(Session {
            caller,
            csrf: data.csrf,
        })),
        Err(AppError::Unauthorized(_)) => Ok(None),
        Err(other) => Err(other),
    }
}

/// Ends the request's session for good (when its cookie opens one): the cookie, if kept,
/// opens no session again.
pub async fn end(state: &App, headers: &HeaderMap) -> Result<(), AppError> {
    match cookie(headers, SESSION_COOKIE).and_then(|v| open_session(state, v)) {
        Some(data) => end_session(state, &data.id, data.expires()).await,
        None => Ok(()),
    }
}

/// Compares two tokens in time independent of where they differ.
pub fn tokens_match(expected: &str, given: &str) -> bool {
    let (a, b) = (expected.as_bytes(), given.as_bytes());
    if a.len() != b.len() || a.is_empty() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
