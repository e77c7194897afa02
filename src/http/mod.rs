//! The HTTP API: shared state, the route table (one `router()` per resource file) and
//! the middleware every request goes through.

use std::{sync::Arc, time::Instant};

use axum::{
    Router,
    extract::{DefaultBodyLimit, MatchedPath, Request, State},
    http::{HeaderName, HeaderValue, StatusCode},
    middleware::{self, Next},
    response::Response,
};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::Notify;
use tower_http::catch_panic::CatchPanicLayer;
use tracing::Instrument;
use utoipa::{
    Modify, OpenApi,
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::{
    auth::Authenticator,
    config::ServeConfig,
    domain::conversation::Ended,
    error::{ApiError, REQUEST_ID, error_response},
    store::{Store, conversations::EndTrigger},
};

pub mod agents_config;
pub mod consent;
pub mod conversations;
pub mod extract;
pub mod facts;
pub mod jobs;
pub mod memory_context;
pub mod ops;
pub mod pagination;
pub mod rate_limit;
pub mod rgpd;

/// Everything a handler may need, cloned per request (all fields are cheap handles).
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub auth: Arc<Authenticator>,
    pub config: Arc<ServeConfig>,
    pub metrics: PrometheusHandle,
    /// Wakes this process's idle job workers when a job was queued (after commit).
    pub job_wakeup: Arc<Notify>,
    /// Key of the erasure receipts' subject hash.
    pub receipt_key: Arc<crate::config::Secret>,
    /// Per-tenant request limit; `None` when unlimited.
    pub rate_limiter: Option<Arc<rate_limit::RateLimiter>>,
}

impl AppState {
    /// Ends a conversation (see [`Store::end_conversation`]) and, when that queued an
    /// extraction, wakes a worker. The end route and the idle sweeper both come here.
    pub async fn end_conversation(
        &self,
        tenant: &str,
        id: uuid::Uuid,
        trigger: EndTrigger,
    ) -> sqlx::Result<Option<Ended>> {
        let ended = self.store.end_conversation(tenant, id, trigger, self.config.default_ai_consent).await?;
        if ended.as_ref().is_some_and(|e| e.extraction.queued) {
            self.job_wakeup.notify_one();
        }
        Ok(ended)
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Engram",
        description = "Memory service for AI agents: conversations, facts about end users, memory context, GDPR erasure.",
        license(name = "Apache-2.0")
    ),
    components(schemas(crate::error::ErrorBody)),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build()),
        );
    }
}

/// The route table and the OpenAPI document built from the same handlers.
fn routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(ops::router())
        .merge(agents_config::router())
        .merge(consent::router())
        .merge(conversations::router())
        .merge(jobs::router())
        .merge(facts::router())
        .merge(memory_context::router())
        .merge(rgpd::router())
        .split_for_parts()
}

/// The OpenAPI document, as `/openapi.json` serves it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    routes().1
}

pub fn router(state: AppState) -> Router {
    let (api, doc) = routes();
    let max_body = state.config.max_body_bytes;
    api.merge(SwaggerUi::new("/docs").url("/openapi.json", doc))
        .fallback(|| async { ApiError::NotFound("route") })
        .method_not_allowed_fallback(|| async {
            error_response(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed".into())
        })
        .layer(DefaultBodyLimit::max(max_body))
        .layer(CatchPanicLayer::custom(|_| {
            error_response(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error".into())
        }))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// One span per request, with the route template (never the raw path: it holds
/// external refs), request id, tenant (recorded by the auth extractor), status and
/// latency; HTTP metrics; and the `x-request-id` header on every response.
async fn observe(State(_): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let request_id = request
        .headers()
        .get(&X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |p| p.as_str()).to_owned();
    let method = request.method().clone();
    let span = tracing::info_span!(
        "request",
        method = %method,
        route = %route,
        request_id = %request_id,
        tenant = tracing::field::Empty,
        status = tracing::field::Empty,
        latency_ms = tracing::field::Empty,
    );
    let mut response = REQUEST_ID.scope(request_id.clone(), next.run(request)).instrument(span.clone()).await;
    let status = response.status().as_u16();
    let latency = started.elapsed();
    span.record("status", status);
    span.record("latency_ms", latency.as_secs_f64() * 1000.0);
    span.in_scope(|| tracing::info!("request completed"));
    let labels = [("method", method.to_string()), ("route", route), ("status", status.to_string())];
    metrics::counter!("engram_http_requests_total", &labels).increment(1);
    metrics::histogram!("engram_http_request_duration_seconds", &labels[..2]).record(latency.as_secs_f64());
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(X_REQUEST_ID.clone(), value);
    }
    response
}
