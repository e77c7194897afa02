//! `…/working-memory`: the document an agent keeps about an end user
//! (`/api/agents/{agent_id}/users/{external_ref}/working-memory`) and about one
//! conversation (`/api/conversations/{id}/working-memory`), read, replaced whole and
//! deleted through [`crate::service::working_memory`]. Every answer carrying a document
//! carries its version as `ETag`; writes and deletes honour `If-Match` (and a create-only
//! `If-None-Match: *`), reads answer 304 to an `If-None-Match` naming the stored version.

use axum::{
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::ctx::Ctx;
use super::json::Json;
use super::{
    BodyErrors, CommonErrors,
    input::{ApiJson, ApiPath},
};
use crate::{
    auth::{MemoryRead, MemoryWrite},
    domain::{
        event::Actor,
        ids::{AgentId, ExternalRef},
        working_memory::{Condition, Scope, WorkingMemory, WorkingMemoryBody, not_modified},
    },
    error::{ApiError, ErrorBody},
    service::{AppState, working_memory},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_user_document, put_user_document, delete_user_document)).routes(routes!(
        get_conversation_document,
        put_conversation_document,
        delete_conversation_document
    ))
}

/// The answers of a read, beside [`CommonErrors`].
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // only its documentation is used
enum ReadAnswers {
    #[response(status = 200, description = "the document",
        headers(("ETag" = String, description = "The document's version, quoted")))]
    Found(WorkingMemory),
    #[response(status = 304, description = "`If-None-Match` names the stored version: no body",
        headers(("ETag" = String, description = "The document's version, quoted")))]
    NotModified,
    #[response(
        status = 404,
        description = "`not_found`: no document here yet, or no such conversation in the caller's tenant"
    )]
    NotFound(ErrorBody),
}

/// The answers of a write, beside [`CommonErrors`] and [`BodyErrors`].
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // only its documentation is used
enum WriteAnswers {
    #[response(status = 200, description = "replaced",
        headers(("ETag" = String, description = "The new version, quoted")))]
    Replaced(WorkingMemory),
    #[response(status = 201, description = "created",
        headers(("ETag" = String, description = "The new version, quoted")))]
    Created(WorkingMemory),
    #[response(status = 404, description = "`not_found`: no such conversation in the caller's tenant")]
    NotFound(ErrorBody),
    #[response(
        status = 412,
        description = "`precondition_failed`: `If-Match` names a version no longer stored, or `If-None-Match: *` met a document; nothing was written"
    )]
    PreconditionFailed(ErrorBody),
}

/// The answers of a delete, beside [`CommonErrors`].
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // only its documentation is used
enum DeleteAnswers {
    #[response(status = 204, description = "deleted")]
    Deleted,
    #[response(
        status = 404,
        description = "`not_found`: no document here, or no such conversation in the caller's tenant"
    )]
    NotFound(ErrorBody),
    #[response(
        status = 412,
        description = "`precondition_failed`: `If-Match` names a version no longer stored; nothing was deleted"
    )]
    PreconditionFailed(ErrorBody),
}

/// Read the agent's working memory document about an end user: the page it rewrites
/// as it learns about them, across their conversations.
#[utoipa::path(get, path = "/api/agents/{agent_id}/users/{external_ref}/working-memory", tag = "working memory",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path), IfNoneMatch),
    responses(ReadAnswers, CommonErrors))]
async fn get_user_document(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    read(&state, Scope::User(caller.owner(&agent, &user)), &headers).await
}

/// Replace the agent's working memory document about an end user (created when there
/// is none). Send the `ETag` you read as `If-Match` so that a write made since yours
/// was read is not overwritten (412 instead), or `If-None-Match: *` to create only.
#[utoipa::path(put, path = "/api/agents/{agent_id}/users/{external_ref}/working-memory", tag = "working memory",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path), WriteConditions),
    request_body = WorkingMemoryBody, responses(WriteAnswers, CommonErrors, BodyErrors))]
async fn put_user_document(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<WorkingMemoryBody>,
) -> Result<Response, ApiError> {
    write(&state, Scope::User(caller.owner(&agent, &user)), &headers, &body).await
}

/// Delete the agent's working memory document about an end user (only the version in
/// `If-Match`, when sent).
#[utoipa::path(delete, path = "/api/agents/{agent_id}/users/{external_ref}/working-memory", tag = "working memory",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path), WriteConditions),
    responses(DeleteAnswers, CommonErrors))]
async fn delete_user_document(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    delete(&state, Scope::User(caller.owner(&agent, &user)), &headers).await
}

/// Read one conversation's working memory document: what the agent keeps for this
/// thread only. It goes when the conversation is deleted.
#[utoipa::path(get, path = "/api/conversations/{id}/working-memory", tag = "working memory",
    params(("id" = Uuid, Path), IfNoneMatch), responses(ReadAnswers, CommonErrors))]
async fn get_conversation_document(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    read(&state, Scope::Conversation { tenant: &caller.tenant, id }, &headers).await
}

/// Replace one conversation's working memory document (created when there is none),
/// with `If-Match` / `If-None-Match: *` as for a user's.
#[utoipa::path(put, path = "/api/conversations/{id}/working-memory", tag = "working memory",
    params(("id" = Uuid, Path), WriteConditions), request_body = WorkingMemoryBody,
    responses(WriteAnswers, CommonErrors, BodyErrors))]
async fn put_conversation_document(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<WorkingMemoryBody>,
) -> Result<Response, ApiError> {
    write(&state, Scope::Conversation { tenant: &caller.tenant, id }, &headers, &body).await
}

/// Delete one conversation's working memory document.
#[utoipa::path(delete, path = "/api/conversations/{id}/working-memory", tag = "working memory",
    params(("id" = Uuid, Path), WriteConditions), responses(DeleteAnswers, CommonErrors))]
async fn delete_conversation_document(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    delete(&state, Scope::Conversation { tenant: &caller.tenant, id }, &headers).await
}

async fn read(state: &AppState, scope: Scope<'_>, headers: &HeaderMap) -> Result<Response, ApiError> {
    let document = working_memory::read(state, scope).await?;
    let etag = quoted(&document.etag)?;
    if not_modified(text(headers, header::IF_NONE_MATCH)?, &document.etag).map_err(ApiError::InvalidRequest)? {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response());
    }
    Ok((StatusCode::OK, [(header::ETAG, etag)], Json(document)).into_response())
}

async fn write(
    state: &AppState,
    scope: Scope<'_>,
    headers: &HeaderMap,
    body: &WorkingMemoryBody,
) -> Result<Response, ApiError> {
    let condition = condition(headers)?;
    let (created, document) = working_memory::write(state, scope, &body.content, &condition, Actor::Api).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, [(header::ETAG, quoted(&document.etag)?)], Json(document)).into_response())
}

async fn delete(state: &AppState, scope: Scope<'_>, headers: &HeaderMap) -> Result<StatusCode, ApiError> {
    working_memory::delete(state, scope, &condition(headers)?, Actor::Api).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn condition(headers: &HeaderMap) -> Result<Condition, ApiError> {
    Condition::parse(text(headers, header::IF_MATCH)?, text(headers, header::IF_NONE_MATCH)?)
        .map_err(ApiError::InvalidRequest)
}

/// A header's value as text; one that is not visible ASCII cannot be an entity tag.
fn text(headers: &HeaderMap, name: header::HeaderName) -> Result<Option<&str>, ApiError> {
    headers
        .get(&name)
        .map(|value| value.to_str().map_err(|_| ApiError::invalid(format!("{name} must be visible ASCII"))))
        .transpose()
}

/// The `ETag` header of a version (always a UUID here, so always a valid value).
fn quoted(etag: &str) -> Result<HeaderValue, ApiError> {
    HeaderValue::from_str(&format!("\"{etag}\"")).map_err(|e| ApiError::Internal(e.into()))
}

/// The conditions of a write or delete. Each header's pattern is what
/// [`Condition::parse`] reads, exactly: `*`, or entity tags (quoted, weak or bare)
/// separated by commas, with optional whitespace.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // only its documentation is used
struct WriteConditions {
    /// Only if the stored version is one of these `ETag`s (comma-separated, quoted or
    /// bare), or `*` for any stored version; otherwise 412 and nothing changes. Weak tags
    /// (`W/"…"`) never match a write.
    #[param(
        rename = "If-Match",
        nullable = false,
        pattern = r#"^[ \t]*(\*|((W/)?"[!#-~]*"|[!#-+\--~]+)([ \t]*,[ \t]*((W/)?"[!#-~]*"|[!#-+\--~]+))*)[ \t]*$"#
    )]
    if_match: Option<String>,
    /// `*`: only if there is no document yet (create, never replace); `ETag`s: only if
    /// the stored version is none of them (weak tags compare by value). Otherwise 412.
    /// With `If-Match`, both must hold.
    #[param(
        rename = "If-None-Match",
        nullable = false,
        pattern = r#"^[ \t]*(\*|((W/)?"[!#-~]*"|[!#-+\--~]+)([ \t]*,[ \t]*((W/)?"[!#-~]*"|[!#-+\--~]+))*)[ \t]*$"#
    )]
    if_none_match: Option<String>,
}

/// `If-None-Match` on a read.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // only its documentation is used
struct IfNoneMatch {
    /// `ETag`s (comma-separated, quoted or bare; weak ones compare by value) or `*`: 304
    /// with no body when the stored version is one of them.
    #[param(
        rename = "If-None-Match",
        nullable = false,
        pattern = r#"^[ \t]*(\*|((W/)?"[!#-~]*"|[!#-+\--~]+)([ \t]*,[ \t]*((W/)?"[!#-~]*"|[!#-+\--~]+))*)[ \t]*$"#
    )]
    if_none_match: Option<String>,
}
