//! The OpenAPI document, generated from the handlers' annotations and served at
//! `/openapi.json`. A test compares it with `docs/openapi.json` so a stale copy fails.

use std::sync::OnceLock;

use serde::Serialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use crate::routes::{
    boundaries, clusters, exceptions, meta, namespaces, policies, resources, tokens, uploads,
};

/// `{"error": {"code", "message"}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Error {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable snake_case code, e.g. `invalid_request`.
    pub code: String,
    /// For `invalid_request`, starts with the JSON Pointer of the field.
    pub message: String,
}

/// The 422 body of SPEC 2.4.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanNotAllowed {
    pub error: PlanNotAllowedDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PlanNotAllowedDetail {
    /// `compute_plan_not_allowed`.
    pub code: String,
    pub message: String,
    pub resource_type: String,
    pub plan: String,
    /// The container-instance component, or null.
    pub component: Option<String>,
    pub allowed_plans: Vec<String>,
    pub denied_by: Vec<String>,
}

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "palisade", description = "Boundary policies: compute plans enforced by this API, admission rules by Kubernetes."),
    paths(
        boundaries::create, boundaries::list, boundaries::get_one, boundaries::delete,
        policies::list, policies::get_one, policies::put, policies::delete, policies::history,
        policies::apply, policies::preview, policies::report, policies::rollback,
        policies::promote, policies::abort,
        exceptions::list, exceptions::get_one, exceptions::put, exceptions::approve,
        exceptions::delete, exceptions::history,
        resources::create, resources::list, resources::get_one, resources::workload, resources::patch,
        resources::delete, resources::plans, uploads::create, uploads::content,
        tokens::create, tokens::list, tokens::delete,
        clusters::put, clusters::list, clusters::get_one, clusters::delete,
        clusters::list_attached, clusters::attach, clusters::detach,
        namespaces::put, namespaces::get_one, namespaces::list, namespaces::delete,
        meta::healthz, meta::readyz, meta::metrics, meta::openapi,
    ),
    components(schemas(Error, ErrorDetail, PlanNotAllowed, PlanNotAllowedDetail)),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

/// The document as pretty JSON (computed once).
pub fn document_json() -> String {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT
        .get_or_init(|| ApiDoc::openapi().to_pretty_json().unwrap_or_default())
        .clone()
}
