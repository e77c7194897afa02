//! `/api/conversations`: conversations (found again by a client key), their messages
//! (append with idempotency keys and optimistic `expected_last_seq`, paged, windowed or
//! role-filtered reads, replay-safe sanitising, clearing), the ready-to-send history
//! (rolling summary plus the newest messages) and ending one.

use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::ctx::Ctx;
use super::json::{Json, Written};
use super::{
    BodyErrors, CommonErrors, NotFound,
    input::{ApiJson, ApiPath, ApiQuery},
};
use crate::domain::page::{Page, decode_cursor, limit};
use crate::{
    auth::{MemoryRead, MemoryWrite},
    domain::{
        continuation::{self, Problem},
        conversation::{
            AppendRequest, Appended, Conversation, ConversationPatch, ConversationStatus, Ended, IdempotencyKey,
            NewConversation,
        },
        event::Actor,
        ids::{AgentId, ConversationKey, ExternalRef},
        message::{Message, NewMessage, RoleSet},
        replay,
        summary::ThreadContext,
    },
    error::{ApiError, ErrorBody},
    service::{
        AppState, ConversationFilter, EndTrigger, Window,
        conversations::{self, message_error},
    },
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_conversation, list_conversations))
        .routes(routes!(get_conversation, update_conversation, delete_conversation))
        .routes(routes!(append_messages, list_messages, clear_messages))
        .routes(routes!(end_conversation))
        .routes(routes!(validate_history))
        .routes(routes!(get_context))
}

const NOT_FOUND: ApiError = ApiError::NotFound("conversation");

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    #[param(value_type = Option<AgentId>)]
    agent_id: Option<AgentId>,
    /// The end user's id.
    #[param(value_type = Option<ExternalRef>)]
    external_ref: Option<ExternalRef>,
    #[param(value_type = Option<ConversationStatus>)]
    status: Option<ConversationStatus>,
    /// A client key given at create (unique per agent: with `agent_id`, at most one match).
    #[param(value_type = Option<ConversationKey>)]
    key: Option<ConversationKey>,
    #[param(minimum = 1, maximum = 200, default = 50)]
    limit: Option<i64>,
    /// A previous page's `next_cursor` (opaque: any other value is a 400).
    #[param(min_length = 1, pattern = "^[A-Za-z0-9_-]+$")]
    cursor: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct MessagesQuery {
    /// Default 100. Not with `last`.
    #[param(minimum = 1, maximum = 1000, default = 100)]
    limit: Option<i64>,
    /// From a previous page's `next_cursor`. Not with `last`.
    #[param(min_length = 1, pattern = "^[A-Za-z0-9_-]+$")]
    cursor: Option<String>,
    /// Only the newest N messages, still oldest first, in one page with no
    /// `next_cursor`. Cannot be combined with `limit` or `cursor`.
    #[param(minimum = 1, maximum = 1000)]
    last: Option<i64>,
    /// Drop incomplete tool turns so the history can be replayed to a model provider.
    sanitize: Option<bool>,
    /// Only these roles, comma-separated (e.g. `user,assistant` to leave out system
    /// prompts). With `last`, the newest N of these roles.
    #[param(pattern = "^(system|user|assistant|tool)(,(system|user|assistant|tool))*$", example = "user,assistant")]
    roles: Option<String>,
    /// Only messages with a greater `seq`: incremental sync from the last one seen.
    /// Not with `cursor` (which already says where to go on).
    #[param(minimum = 0)]
    after_seq: Option<i64>,
}

/// Start a conversation between an agent and an end user. With a `key` the agent
/// already uses, nothing is created: the existing conversation comes back (200) when
/// `external_ref`, `title`, `metadata` and `memory` agree with it (absent ones read as
/// their defaults), else the answer is 409. Concurrent creates with one key make one
/// conversation.
#[utoipa::path(post, path = "/api/conversations", tag = "conversations", request_body = NewConversation, responses(
        (status = 201, body = Conversation, description = "created"),
        (status = 200, body = Conversation, description = "the conversation this key already names, which agrees with the request"),
        CommonErrors, BodyErrors,
        (status = 409, body = ErrorBody, description = "the key names a conversation with other fields") ))]
async fn create_conversation(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiJson(new): ApiJson<NewConversation>,
) -> Result<(StatusCode, Json<Conversation>), ApiError> {
    let (created, conversation) = conversations::create(&state, &caller.tenant, &new, Actor::Api).await?;
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, Json(conversation)))
}

/// The tenant's conversations, most recently updated first.
#[utoipa::path(get, path = "/api/conversations", tag = "conversations", params(ListQuery),
    responses((status = 200, body = Page<Conversation>), CommonErrors))]
async fn list_conversations(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<Page<Conversation>>, ApiError> {
    let limit = limit(query.limit, 50, 200)?;
    let after: Option<(DateTime<Utc>, Uuid)> = decode_cursor(query.cursor.as_deref())?;
    let filter = ConversationFilter {
        agent_id: query.agent_id.as_ref(),
        external_ref: query.external_ref.as_ref(),
        key: query.key.as_ref(),
        status: query.status,
    };
    let rows = conversations::list(&state, &caller.tenant, &filter, after, limit + 1).await?;
    Ok(Json(Page::from_rows(rows, limit, |c| (c.updated_at, c.id))))
}

/// One conversation.
#[utoipa::path(get, path = "/api/conversations/{id}", tag = "conversations", params(("id" = Uuid, Path)),
    responses((status = 200, body = Conversation), CommonErrors, NotFound))]
async fn get_conversation(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<Conversation>, ApiError> {
    Ok(Json(conversations::get(&state, &caller.tenant, id).await?))
}

/// Change a conversation's title (`null` clears it), replace its metadata, or opt it out
/// of (`memory: false`) or back into extraction and rolling summaries. Opting out cancels
/// its pending extractions and summaries.
#[utoipa::path(patch, path = "/api/conversations/{id}", tag = "conversations", params(("id" = Uuid, Path)),
    request_body = ConversationPatch,
    responses((status = 200, body = Conversation), CommonErrors, BodyErrors, NotFound))]
async fn update_conversation(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(patch): ApiJson<ConversationPatch>,
) -> Result<Json<Conversation>, ApiError> {
    Ok(Json(conversations::update(&state, &caller.tenant, id, patch).await?))
}

/// Delete a conversation and its messages. Facts extracted from it are kept.
#[utoipa::path(delete, path = "/api/conversations/{id}", tag = "conversations", params(("id" = Uuid, Path)),
    responses((status = 204), CommonErrors, NotFound))]
async fn delete_conversation(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<StatusCode, ApiError> {
    conversations::delete(&state, &caller.tenant, id, Actor::Api).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Append 1–100 messages, all or none, in order; each gets the next `seq`. Appending to
/// an ended conversation reopens it. With an `Idempotency-Key`, a repeat of the same
/// request returns the first response and stores nothing; the same key with a
/// different body is a 409. Keys are remembered for at least 24 hours. With
/// `expected_last_seq`, the batch is stored only if the conversation's last `seq` is
/// still that one; otherwise 409 with the current one in `error.last_seq`.
#[utoipa::path(post, path = "/api/conversations/{id}/messages", tag = "conversations", params( ("id" = Uuid, Path),
        ("Idempotency-Key" = Option<String>, Header, description = "1–255 visible ASCII characters",
            min_length = 1, max_length = 255, pattern = "^[!-~]+$") ), request_body = AppendRequest,
    responses((status = 201, body = Appended), CommonErrors, NotFound, (status = 409, body = ErrorBody, description = "Idempotency-Key reused with another body, or `expected_last_seq` stale (`error.last_seq` holds the current last seq)"), (status = 413, body = ErrorBody, description = "a message's content is over 64 KiB, or the body over its limit"), (status = 415, body = ErrorBody, description = "`unsupported_media_type`: the body is not `application/json`")))]
async fn append_messages(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<AppendRequest>,
) -> Result<(StatusCode, Json<Appended>), ApiError> {
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .map_err(|e| e.to_string())
                .and_then(IdempotencyKey::parse)
                .map_err(ApiError::InvalidRequest)?,
        ),
    };
    let appended = conversations::append(&state, &caller.tenant, id, &request, key.as_ref()).await?;
    Ok((StatusCode::CREATED, Json(appended)))
}

/// A conversation's messages, oldest first: by pages (`limit`, `cursor`) or only the
/// newest N (`last`), optionally only some `roles` and only after `after_seq`. `sanitize=true` drops incomplete tool turns from the returned
/// page (calls not answered right after them, results answering no call), whether
/// stored as OpenAI `tool_calls`, AI SDK parts or Anthropic blocks.
#[utoipa::path(get, path = "/api/conversations/{id}/messages", tag = "conversations",
    params(("id" = Uuid, Path), MessagesQuery),
    responses((status = 200, body = Page<Message>), CommonErrors, NotFound))]
async fn list_messages(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<MessagesQuery>,
) -> Result<Written<Page<Message>>, ApiError> {
    let roles = query.roles.as_deref().map_or(Ok(RoleSet::ALL), RoleSet::parse).map_err(ApiError::InvalidRequest)?;
    let after_seq = match query.after_seq {
        Some(_) if query.cursor.is_some() => return Err(ApiError::invalid("after_seq cannot be combined with cursor")),
        Some(seq) if seq < 0 => return Err(ApiError::invalid("after_seq must be 0 or more")),
        Some(seq) => seq,
        None => 0,
    };
    let mut page = match query.last {
        Some(_) if query.limit.is_some() || query.cursor.is_some() => {
            return Err(ApiError::invalid("last cannot be combined with limit or cursor"));
        }
        Some(last) => {
            let last = limit(Some(last), 100, 1000).map_err(|_| ApiError::invalid("last must be 1-1000"))?;
            let messages =
                conversations::messages(&state, &caller.tenant, id, after_seq, roles, Window::Last(last)).await?;
            Page { items: messages, next_cursor: None }
        }
        None => {
            let limit = limit(query.limit, 100, 1000)?;
            let after: Option<i64> = decode_cursor(query.cursor.as_deref())?;
            let after = after.unwrap_or(after_seq);
            let rows =
                conversations::messages(&state, &caller.tenant, id, after, roles, Window::First(limit + 1)).await?;
            // The cursor follows the stored order, so sanitizing never skips or repeats a message.
            Page::from_rows(rows, limit, |m| m.seq)
        }
    };
    if query.sanitize == Some(true) {
        page.items = replay::sanitize(page.items);
    }
    Ok(Written(page))
}

#[derive(Serialize, ToSchema)]
struct Cleared {
    /// Messages deleted.
    deleted: u64,
}

/// Delete every message of a conversation, keeping the conversation itself (its key,
/// title, metadata and extracted facts). Sequence numbers go on from where they were;
/// its rolling summary, the idempotency records of its appends and its pending
/// extractions and summaries go too.
#[utoipa::path(delete, path = "/api/conversations/{id}/messages", tag = "conversations", params(("id" = Uuid, Path)),
    responses((status = 200, body = Cleared), CommonErrors, NotFound))]
async fn clear_messages(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<Cleared>, ApiError> {
    let deleted = conversations::clear_messages(&state, &caller.tenant, id, Actor::Api).await?;
    Ok(Json(Cleared { deleted }))
}

/// The largest `window` of the context route, and its default.
const MAX_CONTEXT_WINDOW: i64 = 1000;
const DEFAULT_CONTEXT_WINDOW: i64 = 100;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ContextQuery {
    /// The most messages after the summary to return (the newest ones). Default 100.
    #[param(minimum = 1, maximum = 1000, default = 100)]
    window: Option<i64>,
    /// Drop incomplete tool turns from the messages, as the messages read does.
    sanitize: Option<bool>,
}

/// What an agent sends its model, in one call: the thread's rolling summary (made by
/// a `summarize` job once more than the agent's `summarize_after_messages` messages are
/// unsummarised), the newest messages after it (at most `window`, oldest first), and the
/// summary as a fenced `<conversation-summary>` block for the system prompt (its lines
/// cannot close the fence or open another one). Without a summary yet, `summary` is null,
/// `summary_through_seq` 0 and `prompt` "".
#[utoipa::path(get, path = "/api/conversations/{id}/context", tag = "conversations",
    params(("id" = Uuid, Path), ContextQuery), responses((status = 200, body = ThreadContext), CommonErrors, NotFound))]
async fn get_context(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<ContextQuery>,
) -> Result<Json<ThreadContext>, ApiError> {
    let window = limit(query.window, DEFAULT_CONTEXT_WINDOW, MAX_CONTEXT_WINDOW)
        .map_err(|_| ApiError::invalid(format!("window must be 1-{MAX_CONTEXT_WINDOW}")))?;
    // The summary first, then the messages after the seq it covers: a summary stored in
    // between is not seen, and what is returned still fits together.
    let (summary, through_seq) = conversations::summary(&state, &caller.tenant, id).await?;
    let mut messages =
        conversations::messages(&state, &caller.tenant, id, through_seq, RoleSet::ALL, Window::Last(window)).await?;
    if query.sanitize == Some(true) {
        messages = replay::sanitize(messages);
    }
    Ok(Json(ThreadContext::new(summary, through_seq, messages)))
}

/// The most messages a continuation check compares: a page of messages at most.
const MAX_VALIDATED: usize = 1000;

/// `POST /api/conversations/{id}/validate`: the history a client claims to hold.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ValidateRequest {
    /// Oldest first, in the shape of an append (0–1000 messages).
    #[schema(max_items = 1000)]
    messages: Vec<NewMessage>,
}

#[derive(Serialize, ToSchema)]
struct Validation {
    /// True when `problems` is empty: the claim is the stored thread or a prefix of it.
    valid: bool,
    /// At most one per claimed message, in order.
    problems: Vec<Problem>,
}

/// Check a client's claimed history against the stored thread: is it the thread, or a
/// prefix of it (a longer thread means someone appended since)? Each claimed message is
/// compared with the stored one at its position, content and tool fields as JSON (key
/// order does not count; `metadata` is not compared). Codes: `forged_tool_result` (a
/// tool result or approval whose call id no stored result answers), `unknown_tool_call`
/// (a call id the thread never made), `not_a_prefix` (no stored message there, or one
/// of another role), `modified_message` (same role, other content or tool fields).
/// Tool calls are read in the three shapes `sanitize` reads. Compared with the first
/// 1000 stored messages. Changes nothing.
#[utoipa::path(post, path = "/api/conversations/{id}/validate", tag = "conversations", params(("id" = Uuid, Path)),
    request_body = ValidateRequest, responses((status = 200, body = Validation), CommonErrors, BodyErrors, NotFound,
        (status = 413, body = ErrorBody, description = "a message's content is over 64 KiB, or the body over its limit")))]
async fn validate_history(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(request): ApiJson<ValidateRequest>,
) -> Result<Json<Validation>, ApiError> {
    if request.messages.len() > MAX_VALIDATED {
        return Err(ApiError::invalid(format!("messages must hold at most {MAX_VALIDATED} messages")));
    }
    for message in &request.messages {
        message.validate().map_err(message_error)?;
    }
    let limit = i64::try_from(MAX_VALIDATED).unwrap_or(i64::MAX);
    let stored = conversations::messages(&state, &caller.tenant, id, 0, RoleSet::ALL, Window::First(limit)).await?;
    let problems = continuation::check(&request.messages, &stored);
    Ok(Json(Validation { valid: problems.is_empty(), problems }))
}

/// End a conversation and, when the agent's memory is on, the conversation has not
/// opted out (`memory: false`), the user consents, the
/// conversation has enough user turns and something new to read, queue a fact
/// extraction (otherwise `extraction.reason` says which condition failed first).
/// Ending an ended conversation is allowed: the decision is made again.
#[utoipa::path(post, path = "/api/conversations/{id}/end", tag = "conversations", params(("id" = Uuid, Path)),
    responses( (status = 200, body = Ended, links(
            ("GetJob" = (operation_id = "get_job", parameters(("id" = "$response.body#/extraction/job_id")))),
            ("RetryJob" = (operation_id = "retry_job", parameters(("id" = "$response.body#/extraction/job_id")))) )),
        CommonErrors, NotFound ))]
async fn end_conversation(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<Ended>, ApiError> {
    let ended =
        conversations::end(&state, &caller.tenant, id, EndTrigger::Request, Actor::Api).await?.ok_or(NOT_FOUND)?;
    Ok(Json(ended))
}
