//! `/api/tools`: the memory tools of [`catalog`] for agent frameworks without MCP — their
//! definitions in OpenAI's and Anthropic's formats, and one route that runs a tool. The
//! tools, their rules and their results are the ones `/mcp` serves.

use axum::{Json, extract::State};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    BodyErrors, CommonErrors,
    extract::{ApiJson, ApiQuery},
};
use crate::{auth::Caller, error::ApiError, service::AppState};

pub mod catalog;

use catalog::Tool;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_tools)).routes(routes!(call_tool))
}

/// The tool-definition dialects `GET /api/tools` speaks.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum Format {
    /// Chat Completions `tools`: `{"type": "function", "function": {name, description, parameters}}`.
    Openai,
    /// Messages API `tools`: `{name, description, input_schema}`.
    Anthropic,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct FormatQuery {
    format: Format,
}

/// An OpenAI function tool.
#[derive(Debug, Serialize, ToSchema)]
struct OpenAiTool {
    /// Always `function`.
    #[serde(rename = "type")]
    kind: &'static str,
    function: OpenAiFunction,
}

#[derive(Debug, Serialize, ToSchema)]
struct OpenAiFunction {
    name: &'static str,
    description: &'static str,
    /// The arguments' JSON Schema.
    #[schema(value_type = Object)]
    parameters: Map<String, Value>,
}

/// An Anthropic tool.
#[derive(Debug, Serialize, ToSchema)]
struct AnthropicTool {
    name: &'static str,
    description: &'static str,
    /// The arguments' JSON Schema.
    #[schema(value_type = Object)]
    input_schema: Map<String, Value>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
enum Definition {
    OpenAi(OpenAiTool),
    Anthropic(AnthropicTool),
}

#[derive(Debug, Serialize, ToSchema)]
struct Definitions {
    /// Pass as the `tools` of a chat request.
    tools: Vec<Definition>,
}

/// The memory tools as function (OpenAI) or tool (Anthropic) definitions. A user-bound
/// token's tools take no `agent_id` or `external_ref`; anyone else's require both. Any
/// valid token may list them; calling one needs its scope.
#[utoipa::path(get, path = "/api/tools", tag = "tools", params(FormatQuery),
    responses((status = 200, body = Definitions), CommonErrors))]
async fn list_tools(caller: Caller, ApiQuery(query): ApiQuery<FormatQuery>) -> Json<Definitions> {
    let bound = caller.bound.is_some();
    let tools = Tool::ALL
        .into_iter()
        .map(|tool| {
            let (name, description, schema) = (tool.name(), tool.description(), tool.input_schema(bound));
            match query.format {
                Format::Openai => Definition::OpenAi(OpenAiTool {
                    kind: "function",
                    function: OpenAiFunction { name, description, parameters: schema },
                }),
                Format::Anthropic => Definition::Anthropic(AnthropicTool { name, description, input_schema: schema }),
            }
        })
        .collect();
    Json(Definitions { tools })
}

/// The body of `POST /api/tools/call`: what a model asked for.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ToolCall {
    /// `remember`, `recall`, `list_memories`, `update_memory`, `forget` or `memory_context`.
    #[schema(example = "recall")]
    name: String,
    /// The tool's arguments, as its schema states them.
    #[serde(default)]
    #[schema(value_type = Object)]
    arguments: Map<String, Value>,
}

/// Run one tool: 200 with its result (what `/mcp` returns as structured content), or the
/// error its REST route would answer. 409 `conflict` when the agent's memory is off or
/// the user refused consent (nothing is read or stored).
#[utoipa::path(post, path = "/api/tools/call", tag = "tools", request_body = ToolCall,
    responses(
        (status = 200, body = Object, description = "the tool's result"),
        CommonErrors, BodyErrors, super::NotFound,
        (status = 409, body = crate::error::ErrorBody, description = "memory off, consent refused, or the fact conflicts")
    ))]
async fn call_tool(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(call): ApiJson<ToolCall>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(catalog::call(&state, &caller, &call.name, call.arguments).await?))
}
