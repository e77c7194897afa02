//! `/mcp`: the memory tools of [`catalog`](crate::service::tools) as an MCP server, over
//! the Streamable HTTP transport of the official Rust SDK (`rmcp`).
//!
//! The server is stateless: every POST carries one JSON-RPC message and gets its answer
//! as one JSON body; no session is kept between requests, so any replica can answer any
//! request, nothing lives past a request (graceful shutdown waits for no open stream),
//! and the `initialize` handshake of older protocol revisions works as well as the
//! per-request metadata of the current one.
//!
//! Authentication is the API's: the same bearer token, checked (and rate-limited per
//! tenant) before the SDK sees the request, so a request without a valid token is a 401
//! in the API's error shape. The verified caller travels to the tool in the request's
//! extensions. A tool's failure — a refused scope, a fact not found, memory off — is an
//! MCP tool error (`isError: true`) whose structured content is the API's error body
//! with its code; only a malformed JSON-RPC message is a protocol error.

use std::sync::Arc;

use axum::{
    extract::{FromRequestParts, Request, State},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool as McpTool,
    },
    service::RequestContext,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::never::NeverSessionManager,
    },
};
use tracing::Instrument;

use crate::{
    auth::Caller,
    error::{ApiError, REQUEST_ID},
    service::{
        AppState,
        error::ServiceError,
        tools::{self as catalog, Tool},
    },
};

/// What the HTTP layer hands a tool: who is calling, and the request's id and span so
/// that the tool's logs and error bodies belong to its request.
#[derive(Clone)]
struct McpRequest {
    caller: Caller,
    request_id: String,
    span: tracing::Span,
}

/// The MCP service for `/mcp`, to be put behind [`authenticate`].
pub fn service(state: AppState) -> StreamableHttpService<MemoryServer, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // The SDK's Host check guards unauthenticated local servers against DNS
        // rebinding; every request here needs a bearer token a browser page cannot add,
        // and the server runs under whatever host name its operator gives it.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(state.config.max_body_bytes);
    StreamableHttpService::new(
        move || Ok(MemoryServer { state: state.clone() }),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// Verifies the bearer token (401 without a valid one, 429 over the tenant's rate
/// limit), bounds the body (413), and passes the caller on to the tools.
pub async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let caller = match Caller::from_request_parts(&mut parts, &state).await {
        Ok(caller) => caller,
        Err(error) => return error.into_response(),
    };
    // Read here within the API's limit, so that a larger body is the API's JSON 413 (the
    // SDK's own check answers in plain text). A body the client cut short counts as too
    // large too: the client is gone and reads no answer.
    let Ok(body) = axum::body::to_bytes(body, state.config.max_body_bytes).await else {
        return ApiError::PayloadTooLarge("request body is too large".into()).into_response();
    };
    let request_id = REQUEST_ID.try_with(Clone::clone).unwrap_or_default();
    parts.extensions.insert(McpRequest { caller, request_id, span: tracing::Span::current() });
    next.run(Request::from_parts(parts, axum::body::Body::from(body))).await
}

/// The memory tools as an MCP server.
pub struct MemoryServer {
    state: AppState,
}

impl MemoryServer {
    /// The caller that [`authenticate`] verified for this request.
    fn request(context: &RequestContext<RoleServer>) -> Result<McpRequest, ErrorData> {
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<McpRequest>())
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", None))
    }
}

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("engram", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Long-term memory about the user you are talking with. Call memory_context at the start of a \
                 conversation, recall when you need something you may have been told before, remember when the \
                 user shares a lasting fact or asks you to remember, update_memory or forget when a fact is \
                 wrong or the user asks.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let bound = Self::request(&context)?.caller.bound.is_some();
        let tools = Tool::ALL
            .into_iter()
            .map(|tool| McpTool::new(tool.name(), tool.description(), tool.input_schema(bound)))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let McpRequest { caller, request_id, span } = Self::request(&context)?;
        let arguments = request.arguments.unwrap_or_default();
        let call = catalog::call(&self.state, &caller, &request.name, arguments);
        let result = REQUEST_ID
            .scope(request_id, async {
                match call.await {
                    Ok(value) => CallToolResult::structured(value),
                    Err(error) => CallToolResult::structured_error(error_value(error)),
                }
            })
            .instrument(span)
            .await;
        Ok(result.into())
    }
}

/// The API's error body as a tool error's content (`isError`): the service's error
/// mapped as the tool's REST route maps it, so both doors answer alike.
fn error_value(error: ServiceError) -> serde_json::Value {
    serde_json::to_value(ApiError::from(error).into_body()).unwrap_or_default()
}
