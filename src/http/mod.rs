//! The HTTP API: the route table (one `router()` per resource file) and
//! the middleware every request goes through.

use std::time::Instant;

use axum::{
    Router,
    extract::{DefaultBodyLimit, MatchedPath, Request, State},
    http::{HeaderName, HeaderValue, Method, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use tower_http::catch_panic::CatchPanicLayer;
use tracing::Instrument;
use utoipa::{
    Modify, OpenApi,
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme},
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::{
    error::{ApiError, REQUEST_ID, error_response},
    service::{AppState, error::ServiceError},
};

pub mod agents_config;
pub mod consent;
pub mod conversations;
pub mod ctx;
pub mod events;
pub mod facts;
pub mod gdpr;
pub mod import;
pub mod input;
pub mod jobs;
pub mod json;
pub mod mcp;
pub mod memory_context;
pub mod ops;
pub mod tools;
pub mod usage;
pub mod webhooks;
pub mod working_memory;

/// The errors every authenticated route can answer, listed once for the spec: a bad
/// path or query value, no valid token, a token without the scope, the tenant's rate
/// limit, the database unreachable.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // only its documentation is used
pub(crate) enum CommonErrors {
    #[response(status = 400, description = "`invalid_request`: a bad path, query or body value")]
    InvalidRequest(crate::error::ErrorBody),
    #[response(
        status = 401,
        description = "`unauthorized`: missing, malformed, expired or badly signed token",
        headers(("WWW-Authenticate" = String, description = "`Bearer`"))
    )]
    Unauthorized(crate::error::ErrorBody),
    #[response(status = 403, description = "`forbidden`: the token lacks the scope this route needs")]
    Forbidden(crate::error::ErrorBody),
    #[response(
        status = 429,
        description = "`rate_limited`: the tenant's rate limit was hit",
        headers(("Retry-After" = u64, description = "Seconds to wait before retrying"))
    )]
    RateLimited(crate::error::ErrorBody),
    #[response(status = 503, description = "`unavailable`: the database is unreachable; retry later")]
    Unavailable(crate::error::ErrorBody),
}

/// The errors of a route that reads a JSON body, on top of [`CommonErrors`].
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // only its documentation is used
pub(crate) enum BodyErrors {
    #[response(status = 413, description = "`payload_too_large`: the body is over its limit (default 1 MiB)")]
    PayloadTooLarge(crate::error::ErrorBody),
    #[response(status = 415, description = "`unsupported_media_type`: the body is not `application/json`")]
    UnsupportedMediaType(crate::error::ErrorBody),
}

/// The answer of a route about one resource that the caller's tenant does not hold.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // only its documentation is used
pub(crate) enum NotFound {
    #[response(status = 404, description = "`not_found`: no such resource in the caller's tenant")]
    NotFound(crate::error::ErrorBody),
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

/// Declares the bearer scheme that protected operations refer to.
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

/// Requires the bearer token on every operation that can answer 401, so the routes
/// behind a token say so once, in [`CommonErrors`], not again per handler. Runs on the
/// merged document: `Modify` runs before the routes' paths are added.
fn require_bearer(openapi: &mut utoipa::openapi::OpenApi) {
    for item in openapi.paths.paths.values_mut() {
        let operations = [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch];
        for operation in operations.into_iter().flatten() {
            if operation.responses.responses.contains_key("401") {
                operation.security = Some(vec![SecurityRequirement::new("bearer", Vec::<String>::new())]);
            }
        }
    }
}

/// The route table and the OpenAPI document built from the same handlers.
fn routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let api = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(ops::router())
        .merge(agents_config::router())
        .merge(consent::router())
        .merge(conversations::router())
        .merge(events::router())
        .merge(jobs::router())
        .merge(facts::router())
        .merge(import::router())
        .merge(memory_context::router())
        .merge(gdpr::router())
        .merge(tools::router())
        .merge(usage::router())
        .merge(webhooks::router())
        .merge(working_memory::router());
    let (router, mut doc) = api.split_for_parts();
    require_bearer(&mut doc);
    (router, doc)
}

/// The OpenAPI document, as `/openapi.json` serves it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    routes().1
}

/// The API, plus `pages` (the admin panel, which `app` hands in so that neither
/// front end imports the other), behind the middleware every request goes through.
pub fn router(state: AppState, pages: Router<AppState>) -> Router {
    let (api, doc) = routes();
    let max_body = state.config.max_body_bytes;
    let mcp = Router::new()
        .route_service("/mcp", mcp::service(state.clone()))
        .layer(middleware::from_fn_with_state(state.clone(), mcp::authenticate));
    api.merge(SwaggerUi::new("/docs").url("/openapi.json", doc))
        .merge(mcp)
        .merge(pages)
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

/// A service failure as the API answers it (docs/api.md's error table): every REST route
/// and, through the same body, every MCP tool error. Each meaning has its one status.
impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        match error {
            ServiceError::Invalid(why) => ApiError::InvalidRequest(why),
            ServiceError::TooLarge(why) => ApiError::PayloadTooLarge(why),
            ServiceError::Forbidden(why) => ApiError::Forbidden(why),
            ServiceError::NotFound(what) => ApiError::NotFound(what),
            ServiceError::Conflict(why) => ApiError::Conflict(why),
            ServiceError::StaleSeq(last_seq) => ApiError::StaleSeq(last_seq),
            ServiceError::PreconditionFailed(why) => ApiError::PreconditionFailed(why),
            ServiceError::Gone(why) => ApiError::Gone(why),
            ServiceError::TooMany(why) => ApiError::TooMany(why),
            ServiceError::Unavailable(why) => ApiError::Unavailable(why),
            ServiceError::Internal(cause) => ApiError::Internal(cause),
        }
    }
}

/// The method as a metrics and log label, from a closed set: any token is a valid HTTP
/// method, so the raw one would let a client add label values (and memory) without end.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// One span per request, with the route template (never the raw path: it holds
/// external refs), request id, tenant (recorded by the auth extractor), status and
/// latency; HTTP metrics; and the `x-request-id` header on every response.
async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let request_id = request
        .headers()
        .get(&X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |p| p.as_str()).to_owned();
    let method = method_label(request.method());
    let span = tracing::info_span!(
        "request",
        method = %method,
        route = %route,
        request_id = %request_id,
        tenant = tracing::field::Empty,
        status = tracing::field::Empty,
        latency_ms = tracing::field::Empty,
    );
    // Past the time limit the handler is dropped (its database work with it: the
    // statement timeout ends what the server would still be doing) and the client
    // learns it may retry.
    // An import streams its body for as long as it is: each of its reads has the time
    // limit instead (see `http/import.rs`).
    let limit = (route != import::STREAMED_ROUTE).then(|| state.config.request_timeout());
    let handled = async move {
        let Some(limit) = limit else { return next.run(request).await };
        match tokio::time::timeout(limit, next.run(request)).await {
            Ok(response) => response,
            Err(_) => ApiError::Unavailable("the request took too long").into_response(),
        }
    };
    let mut response = REQUEST_ID.scope(request_id.clone(), handled).instrument(span.clone()).await;
    let status = response.status().as_u16();
    let latency = started.elapsed();
    span.record("status", status);
    span.record("latency_ms", latency.as_secs_f64() * 1000.0);
    span.in_scope(|| tracing::info!("request completed"));
    let labels = [("method", method.to_owned()), ("route", route), ("status", status.to_string())];
    metrics::counter!("engram_http_requests_total", &labels).increment(1);
    metrics::histogram!("engram_http_request_duration_seconds", &labels[..2]).record(latency.as_secs_f64());
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(X_REQUEST_ID.clone(), value);
    }
    response
}
