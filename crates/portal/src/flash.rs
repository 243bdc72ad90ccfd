//! What a form's POST did, shown once by the page it redirects to (303 See Other), so that
//! reloading that page repeats nothing. The notice travels in a short-lived cookie sealed with
//! the server's key, like the session: it can be neither read nor forged, so no link can make a
//! page say something palisade did not say. It is bound to the path it is for, and the page
//! that shows it deletes it.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{header, HeaderMap};
use axum::response::Response;
use base64::Engine;
use palisade_app::App;
use serde::{Deserialize, Serialize};

use crate::layout::{see_other, Ctx};
use crate::session::{cookie, set_cookie};

/// The sealed notice of the last POST.
pub const FLASH_COOKIE: &str = "palisade_flash";
/// Long enough for the redirect to be followed, short enough not to surprise later.
const FLASH_LIFETIME_SECS: u64 = 5 * 60;
/// Below what every browser keeps of one cookie (4,096 bytes with its name and attributes).
const MAX_VALUE_BYTES: usize = 3_800;

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Notice {
    /// A resource was created (`updated`: changed).
    Resource {
        resource_type: String,
        name: String,
        updated: bool,
    },
    /// A management page's action was done (`text`, in the page's language); a token's
    /// secret is shown once with it.
    Done {
        text: String,
        secret: Option<String>,
    },
    /// A resource was deleted.
    ResourceDeleted { resource_type: String, name: String },
    /// A policy was saved: `created`, `configured` or `unchanged`.
    PolicySaved { action: String },
    /// An exception was saved, with its status (`requested` or `active`).
    ExceptionSaved { name: String, status: String },
    /// A requested exception was approved; it is active until `until`.
    ExceptionApproved { name: String, until: String },
}

/// A notice for one page, with the API's warnings (as text).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flash {
    path: String,
    pub notice: Notice,
    pub warnings: Vec<String>,
    /// Warnings left out because the cookie could not hold them.
    pub more_warnings: usize,
    issued: u64,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn seal(state: &App, flash: &Flash) -> Option<String> {
    let plain = serde_json::to_vec(flash).ok()?;
    let sealed = state.sealing.seal(&plain).ok()?;
    Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed))
}

fn open(state: &App, value: &str) -> Option<Flash> {
    let sealed = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(value)
        .ok()?;
    let plain = state.sealing.open(&sealed).ok()?;
    let flash: Flash = serde_json::from_slice(&plain).ok()?;
    let age = now_secs().saturating_sub(flash.issued);
    (age <= FLASH_LIFETIME_SECS).then_some(flash)
}

/// 303 See Other to `path`, carrying `notice` and `warnings` (the API's `Warning` values or
/// texts) for the page there. Without a notice (it could not be sealed) the page still shows
/// the result, only not the words.
pub fn redirect(
    state: &App,
    ctx: &Ctx,
    path: &str,
    notice: Notice,
    warnings: &[String],
) -> Response {
    let mut flash = Flash {
        path: path.to_owned(),
        notice,
        warnings: warnings.to_vec(),
        more_warnings: 0,
        issued: now_secs(),
    };
    let mut value = seal(state, &flash);
    while value.as_ref().is_some_and(|v| v.len() > MAX_VALUE_BYTES)
        && flash.warnings.pop().is_some()
    {
        flash.more_warnings += 1;
        value = seal(state, &flash);
    }
    let mut response = see_other(path);
    match value.filter(|v| v.len() <= MAX_VALUE_BYTES) {
        Some(value) => {
            response.headers_mut().append(
                header::SET_COOKIE,
                set_cookie(FLASH_COOKIE, &value, ctx.secure, Some(FLASH_LIFETIME_SECS)),
            );
        }
        None => tracing::warn!(%path, "portal: the notice of a POST could not be sealed"),
    }
    response
}

/// The notice the request carries for the page at `path`, if any.
pub fn for_page(state: &App, headers: &HeaderMap, path: &str) -> Option<Flash> {
    cookie(headers, FLASH_COOKIE)
        .and_then(|value| open(state, value))
        .filter(|flash| flash.path == path)
}

/// Deletes the notice once its page has shown it, so a reload shows the page alone.
pub fn shown(ctx: &Ctx, response: &mut Response) {
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(FLASH_COOKIE, "", ctx.secure, Some(0)),
    );
}
