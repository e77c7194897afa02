//! Health, readiness and metrics: unauthenticated, for orchestrators and scrapers.

use axum::{
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
};
use serde_json::{Value, json};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::json::Json;
use crate::service::{AppState, health, jobs};
use crate::{error::ApiError, telemetry};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(healthz)).routes(routes!(readyz)).routes(routes!(metrics))
}

/// Liveness: 200 while the process runs.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "The process runs", body = Value, example = json!({"status": "ok"}))))]
async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: 200 when the database answers and every migration is applied, else 503.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses((status = 200, description = "Ready", body = Value), (status = 503, description = "Database unreachable or not migrated", body = crate::error::ErrorBody)))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    health::ready(&state).await?;
    Ok(Json(json!({"status": "ready", "database": health::database(&state)})))
}

/// Prometheus metrics: HTTP requests and latency by route and status, jobs, extraction
/// and LLM calls.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    match jobs::counts_by_status(&state).await {
        Ok(counts) => telemetry::set_job_gauges(&counts),
        Err(e) => tracing::warn!(error = %e, "counting jobs for metrics failed"),
    }
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render())
}
