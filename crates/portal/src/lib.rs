//! palisade's portal: server-rendered pages (maud; one small script, a progressive
//! enhancement, makes a resource page follow its cluster) served by `palisade serve`
//! next to the API. Every decision is a use case of `palisade-app`, the same the API calls:
//! the same roles, the same picker data, the same validation and the same messages.
//!
//! Sessions live in their cookie: the caller's API token, a CSRF token and the session's id,
//! sealed with the server's key (ChaCha20-Poly1305). The token is checked again on every
//! request, so revoking it ends the session; signing out ends the session itself (its id is
//! remembered by the store until the session would have expired).

mod assets;
mod flash;
mod form;
mod i18n;
mod layout;
mod pages;
mod reasons;
mod session;
mod warnings;

use axum::extract::FromRef;
use axum::routing::{get, post};
use axum::Router;
use palisade_app::App;

pub use i18n::Lang;
pub use pages::boundary::{load_boundary_page, render_boundary_page, BoundaryPage};
pub use session::{CSRF_FIELD, LANG_COOKIE, SESSION_COOKIE, SIGN_IN_COOKIE};

/// How the portal is reached, which only the composition root knows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Every cookie is `Secure`: palisade serves HTTPS itself (`--tls-cert`), or its public
    /// URL is `https://` (`--public-url`, TLS terminated in front). Otherwise a cookie is
    /// `Secure` when the request says it came through HTTPS (`X-Forwarded-Proto: https`).
    pub secure_cookies: bool,
}

/// The portal's pages, to merge with the API (the server's `app_with`), over any state the
/// application can be taken from. Paths never overlap the API's (`/v1/...`, `/healthz`,
/// `/readyz`, `/metrics`, `/openapi.json`). Its fallback answers every other path it does
/// not know with the portal's 404 page (the API answers its own unknown paths).
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    App: FromRef<S>,
{
    router_with(Options::default())
}

/// [`router`] with `options`.
pub fn router_with<S>(options: Options) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    App: FromRef<S>,
{
    let secure_cookies = options.secure_cookies;
    Router::new()
        .route("/", get(pages::boundary::list))
        .route(
            "/sign-in",
            get(pages::sign_in::form).post(pages::sign_in::submit),
        )
        .route("/sign-out", post(pages::sign_in::sign_out))
        .route("/lang/{lang}", get(pages::sign_in::set_lang))
        .route("/static/{file}", get(assets::serve))
        .route("/boundaries", post(pages::manage::boundaries::create))
        .route(
            "/clusters",
            get(pages::manage::clusters::show).post(pages::manage::clusters::add),
        )
        .route(
            "/tokens",
            get(pages::manage::tokens::show).post(pages::manage::tokens::create),
        )
        .route("/tokens/{id}/revoke", post(pages::manage::tokens::revoke))
        .route(
            "/boundaries/{boundary}/clusters",
            get(pages::manage::placement::show).post(pages::manage::placement::attach),
        )
        .route(
            "/boundaries/{boundary}/namespaces",
            post(pages::manage::placement::put_namespace),
        )
        .route(
            "/boundaries/{boundary}/namespaces/release",
            post(pages::manage::placement::release),
        )
        .route("/boundaries/{boundary}", get(pages::boundary::show))
        .route(
            "/boundaries/{boundary}/policies/new",
            get(pages::policy_editor::new_form).post(pages::policy_editor::new_submit),
        )
        .route(
            "/boundaries/{boundary}/policies/{policy}/edit",
            get(pages::policy_editor::edit_form).post(pages::policy_editor::edit_submit),
        )
        .route(
            "/boundaries/{boundary}/policies/{policy}/delete",
            get(pages::policy_editor::delete_form).post(pages::policy_editor::delete_submit),
        )
        .route(
            "/boundaries/{boundary}/policies/{policy}/rollout/promote",
            post(pages::rollout::promote),
        )
        .route(
            "/boundaries/{boundary}/policies/{policy}/rollout/abort",
            post(pages::rollout::abort),
        )
        .route(
            "/boundaries/{boundary}/exceptions/new",
            get(pages::exceptions::new_form).post(pages::exceptions::new_submit),
        )
        .route(
            "/boundaries/{boundary}/exceptions/{exception}/approve",
            post(pages::exceptions::approve_submit),
        )
        .route(
            "/boundaries/{boundary}/resources/new",
            get(pages::resource_form::form).post(pages::resource_form::submit),
        )
        .route(
            "/boundaries/{boundary}/uploads/new",
            get(pages::resource_form::upload_form)
                .post(pages::resource_form::upload_submit)
                // The file: the application's limit, and room for the form's other fields.
                .layer(axum::extract::DefaultBodyLimit::max(
                    palisade_app::uploads::MAX_UPLOAD_BYTES + 64 * 1024,
                )),
        )
        .route(
            "/boundaries/{boundary}/resources/{resource_type}/{name}",
            get(pages::resource_form::show),
        )
        .route(
            "/boundaries/{boundary}/resources/{resource_type}/{name}/live",
            get(pages::resource_form::live),
        )
        .route(
            "/boundaries/{boundary}/resources/{resource_type}/{name}/delete",
            get(pages::resource_form::delete::form).post(pages::resource_form::delete::submit),
        )
        .route(
            "/boundaries/{boundary}/resources/{resource_type}/{name}/edit",
            get(pages::resource_form::edit_form).post(pages::resource_form::edit_submit),
        )
        .fallback(pages::not_found)
        .layer(axum::middleware::map_response(layout::security_headers))
        .layer(axum::middleware::map_response(
            move |response: axum::response::Response| async move {
                if secure_cookies {
                    session::all_cookies_secure(response)
                } else {
                    response
                }
            },
        ))
}
