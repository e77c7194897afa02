//! `/api/import` (admin): NDJSON import of conversations, facts and consents, and its
//! progress.
//!
//! The import runs in the request, not in a background job: its input is the request
//! body, which only the request can read, and a job would first have to spool the whole
//! body somewhere (a file of any size, or the database). The import still has a job
//! row, created before the first line is read and updated after each batch, so that
//! another client follows it with `GET /api/import/{id}` (the running import is the
//! first of `GET /api/import`'s list) and a broken upload leaves a record of how far it
//! got. The request has no overall time limit (a
//! large import takes minutes); each read of the body waits at most
//! `ENGRAM_REQUEST_TIMEOUT_SECS`, and the body is read a chunk at a time, never
//! whole: `ENGRAM_MAX_BODY_BYTES` does not apply, `ENGRAM_IMPORT_MAX_LINE_BYTES` caps
//! each line.

use axum::body::Body;
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
use crate::{
    auth::Admin,
    domain::{
        event::Actor,
        import::{ImportJob, ImportOptions, LineReport},
        page::{Page, decode_cursor, limit},
    },
    error::ApiError,
    service::{
        AppState, facts_changed,
        import::{self, ImportStop},
    },
};

/// The route whose request has no overall time limit (see the module doc).
pub const STREAMED_ROUTE: &str = "/api/import";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(import_records, list_imports))
        .routes(routes!(get_import))
        .routes(routes!(list_import_errors))
}

/// The tenant's 50 newest imports, newest first (a running one with its counts so far).
#[utoipa::path(get, path = "/api/import", tag = "import",
    responses((status = 200, body = Vec<ImportJob>), CommonErrors))]
async fn list_imports(Ctx { state, caller }: Ctx<Admin>) -> Result<Json<Vec<ImportJob>>, ApiError> {
    Ok(Json(import::list(&state, &caller.tenant, 50).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ImportQuery {
    /// Queue the imported conversations for extraction: an ended one when it meets the
    /// rules a live end checks (the agent's `memory_enabled` and `min_user_turns`, the
    /// conversation's `memory`, the person's consent), an open one whole when it ends.
    /// Without it, imported messages count as extracted. Default false.
    extract: Option<bool>,
}

/// The import's body as the spec states it: text of at least one byte, whatever it
/// holds. Each line is judged on its own and a bad one is reported inside the 200, so
/// no content but the empty body is refused, and the schema names no type: any value a
/// client serialises is text the import takes.
struct NdjsonBody;

impl utoipa::PartialSchema for NdjsonBody {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, SchemaType};
        ObjectBuilder::new()
            .schema_type(SchemaType::AnyValue)
            .min_length(Some(1))
            .description(Some(
                "NDJSON: one JSON record a line (`ImportRecord`, `openapi/import-record.schema.json`). Any \
                 non-empty text is taken; each line that is not a valid record is reported and skipped.",
            ))
            .into()
    }
}

impl utoipa::ToSchema for NdjsonBody {}

/// Import NDJSON, one record a line (the format: `openapi/import-record.schema.json`).
/// Every good line is written once (a client id imported before adds nothing), every
/// bad line reported with its number and code and skipped; the answer is the finished
/// import with its counts. An empty body is a 400. Records are written a batch per
/// transaction: after a broken upload, send the file again.
#[utoipa::path(post, path = "/api/import", tag = "import", params(ImportQuery),
    request_body(content = inline(NdjsonBody), content_type = "application/x-ndjson",
        description = "One JSON record a line (`ImportRecord`)."),
    responses((status = 200, body = ImportJob), CommonErrors))]
async fn import_records(
    Ctx { state, caller }: Ctx<Admin>,
    ApiQuery(query): ApiQuery<ImportQuery>,
    body: Body,
) -> Result<Json<ImportJob>, ApiError> {
    let options = ImportOptions {
        actor: Actor::Api,
        extract: query.extract.unwrap_or(false),
        default_consent: state.config.default_ai_consent,
    };
    let job =
        import::upload(&state, &caller.tenant, body.into_data_stream(), options).await.map_err(|stop| match stop {
            ImportStop::Input(why) => ApiError::InvalidRequest(format!("the import stopped: {why}")),
            ImportStop::Service(error) => error.into(),
        })?;
    facts_changed(&state);
    Ok(Json(job))
}

/// One import and its progress: lines read, records added, duplicates, bad lines with
/// the first 100 reports (`/api/import/{id}/errors` has them all).
#[utoipa::path(get, path = "/api/import/{id}", tag = "import", params(("id" = Uuid, Path)),
    responses((status = 200, body = ImportJob), CommonErrors, NotFound))]
async fn get_import(
    Ctx { state, caller }: Ctx<Admin>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<ImportJob>, ApiError> {
    Ok(Json(import::get(&state, &caller.tenant, id).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ErrorsQuery {
    #[param(minimum = 1, maximum = 1000, default = 100)]
    limit: Option<i64>,
    /// A previous page's `next_cursor` (opaque: any other value is a 400).
    #[param(min_length = 1, pattern = "^[A-Za-z0-9_-]+$")]
    cursor: Option<String>,
}

/// Every bad line of one import with its report, by line number, a page at a time
/// (saved with each batch: a running import's so far).
#[utoipa::path(get, path = "/api/import/{id}/errors", tag = "import", params(("id" = Uuid, Path), ErrorsQuery),
    responses((status = 200, body = Page<LineReport>), CommonErrors, NotFound))]
async fn list_import_errors(
    Ctx { state, caller }: Ctx<Admin>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<ErrorsQuery>,
) -> Result<Json<Page<LineReport>>, ApiError> {
    let limit = limit(query.limit, 100, 1000)?;
    let after: Option<u64> = decode_cursor(query.cursor.as_deref())?;
    let rows = import::errors(&state, &caller.tenant, id, after, limit + 1).await?;
    Ok(Json(Page::from_rows(rows, limit, |report| report.line)))
}
