//! `/api/jobs` (admin): the background jobs of the tenant, to watch extractions.

use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::ctx::Ctx;
use super::json::Json;
use super::{
    CommonErrors, NotFound,
    input::{ApiPath, ApiQuery},
};
use crate::domain::page::{Page, decode_cursor, limit};
use crate::{
    auth::Admin,
    domain::job::{Job, JobStatus},
    error::{ApiError, ErrorBody},
    service::{AppState, JobFilter, jobs},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_jobs)).routes(routes!(get_job)).routes(routes!(retry_job))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    #[param(value_type = Option<JobStatus>)]
    status: Option<JobStatus>,
    conversation_id: Option<Uuid>,
    #[param(minimum = 1, maximum = 200, default = 50)]
    limit: Option<i64>,
    /// A previous page's `next_cursor` (opaque: any other value is a 400).
    #[param(min_length = 1, pattern = "^[A-Za-z0-9_-]+$")]
    cursor: Option<String>,
}

/// The tenant's jobs, newest first.
#[utoipa::path(get, path = "/api/jobs", tag = "jobs", params(ListQuery),
    responses((status = 200, body = Page<Job>), CommonErrors))]
async fn list_jobs(
    Ctx { state, caller }: Ctx<Admin>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<Page<Job>>, ApiError> {
    let limit = limit(query.limit, 50, 200)?;
    let after: Option<Uuid> = decode_cursor(query.cursor.as_deref())?;
    let filter = JobFilter { status: query.status, conversation_id: query.conversation_id };
    let rows = jobs::list(&state, &caller.tenant, &filter, after, limit + 1).await?;
    Ok(Json(Page::from_rows(rows, limit, |job| job.id)))
}

/// One job.
#[utoipa::path(get, path = "/api/jobs/{id}", tag = "jobs", params(("id" = Uuid, Path)),
    responses((status = 200, body = Job), CommonErrors, NotFound))]
async fn get_job(Ctx { state, caller }: Ctx<Admin>, ApiPath(id): ApiPath<Uuid>) -> Result<Json<Job>, ApiError> {
    Ok(Json(jobs::get(&state, &caller.tenant, id).await?))
}

/// Run a `dead` or `failed` job again, with fresh attempts. Any other state is a 409.
#[utoipa::path(post, path = "/api/jobs/{id}/retry", tag = "jobs", params(("id" = Uuid, Path)),
    responses((status = 200, body = Job), CommonErrors, NotFound, (status = 409, body = ErrorBody)))]
async fn retry_job(Ctx { state, caller }: Ctx<Admin>, ApiPath(id): ApiPath<Uuid>) -> Result<Json<Job>, ApiError> {
    Ok(Json(jobs::retry(&state, &caller.tenant, id).await?))
}
