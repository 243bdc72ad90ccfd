//! Prometheus metrics: requests by route and status, request latency, plan decisions by
//! outcome. One recorder per process, installed on first use.
//!
//! Every label value comes from a closed set, never from what a request chooses: the route is
//! the matched path template (or [`UNMATCHED_ROUTE`]), the method one of HTTP's own (or
//! [`OTHER_METHOD`]), the status a number below 1000. So `/metrics` cannot be grown by
//! requests, however many distinct methods or paths they send.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::AppState;

#[derive(Clone)]
pub struct Metrics {
    handle: Option<PrometheusHandle>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("installed", &self.handle.is_some())
            .finish()
    }
}

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// A reconcile pass per cluster takes from milliseconds up to its 60 s limit.
const PASS_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

impl Metrics {
    /// The process-wide recorder (installed on first call).
    pub fn global() -> Self {
        let handle = HANDLE.get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full("palisade_reconcile_pass_duration_seconds".into()),
                    PASS_BUCKETS,
                )
                .ok()?
                .set_buckets_for_metric(Matcher::Suffix("duration_seconds".into()), LATENCY_BUCKETS)
                .ok()?;
            match builder.install_recorder() {
                Ok(handle) => {
                    describe();
                    Some(handle)
                }
                Err(error) => {
                    tracing::warn!(%error, "metrics recorder not installed");
                    None
                }
            }
        });
        Metrics {
            handle: handle.clone(),
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        self.handle
            .as_ref()
            .map(PrometheusHandle::render)
            .unwrap_or_default()
    }
}

/// Counter `{type, outcome}`: plan decisions of creates and plan moves (`palisade_app`
/// counts them): `allowed`, `denied`, `unavailable` (the policies could not be read) or
/// `error` for the types whose plans are checked, `not_enforced` or `unavailable` for
/// functions (SPEC 2.2). Every series exists from the start, at 0.
pub const PLAN_DECISIONS: &str = "palisade_plan_decisions_total";
/// Counter `{route, method, status}`: requests answered. A series exists from the first
/// request of its route, method and status (the status is not known before).
pub const HTTP_REQUESTS: &str = "palisade_http_requests_total";
/// Histogram `{route, method}`: how long requests took to answer, in seconds; a series exists
/// from the first request of its route and method.
pub const HTTP_REQUEST_DURATION: &str = "palisade_http_request_duration_seconds";

/// The server's metrics whose series exist from the start.
pub const FROM_START: [&str; 1] = [PLAN_DECISIONS];
/// The server's metrics whose series exist from a route's first request.
pub const PER_REQUEST: [&str; 2] = [HTTP_REQUESTS, HTTP_REQUEST_DURATION];
/// The histograms among them (series `_bucket`, `_sum` and `_count`).
pub const HISTOGRAMS: [&str; 1] = [HTTP_REQUEST_DURATION];

/// The plan decisions' `(type, outcome)` pairs that can be counted.
pub fn plan_decision_labels() -> Vec<(&'static str, &'static str)> {
    use palisade_policy::ResourceType;
    let mut labels = Vec::new();
    for ty in ResourceType::CHECKED {
        for outcome in ["allowed", "denied", "unavailable", "error"] {
            labels.push((ty.as_str(), outcome));
        }
    }
    for outcome in ["not_enforced", "unavailable"] {
        labels.push((ResourceType::Function.as_str(), outcome));
    }
    labels
}

/// Describes the server's metrics to the installed recorder (`# HELP`), and makes every
/// plan decision series exist at 0.
pub fn describe() {
    metrics::describe_counter!(
        PLAN_DECISIONS,
        "Plan decisions of resource creates and plan moves, by resource type and outcome"
    );
    metrics::describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by route, method and status"
    );
    metrics::describe_histogram!(
        HTTP_REQUEST_DURATION,
        metrics::Unit::Seconds,
        "How long HTTP requests took to answer, by route and method"
    );
    for (ty, outcome) in plan_decision_labels() {
        metrics::counter!(PLAN_DECISIONS, "type" => ty, "outcome" => outcome).increment(0);
    }
}

/// Counts a plan decision: `allowed`, `denied`, `unavailable`, or `not_enforced` (functions).
pub fn plan_decision(resource_type: &str, outcome: &'static str) {
    metrics::counter!(
        PLAN_DECISIONS,
        "type" => resource_type.to_owned(),
        "outcome" => outcome
    )
    .increment(1);
}

/// The route label of a request no route matched (any path).
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// The method label of every method outside RFC 9110's and PATCH (extension methods).
pub const OTHER_METHOD: &str = "other";

/// The method's label: its name for HTTP's standard methods, [`OTHER_METHOD`] for any other.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => OTHER_METHOD,
    }
}

/// Middleware: one counter and one latency observation per request, by matched route.
pub async fn track(State(_state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| UNMATCHED_ROUTE.to_owned(), |p| p.as_str().to_owned());
    let method = method_label(request.method());
    let start = Instant::now();
    let response = next.run(request).await;
    let elapsed = start.elapsed().as_secs_f64();
    let status = response.status().as_u16().to_string();
    metrics::counter!(
        HTTP_REQUESTS,
        "route" => route.clone(),
        "method" => method,
        "status" => status
    )
    .increment(1);
    metrics::histogram!(
        HTTP_REQUEST_DURATION,
        "route" => route,
        "method" => method
    )
    .record(elapsed);
    response
}
