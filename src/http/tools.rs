//! `/api/tools`: the memory tools of [`catalog`](crate::service::tools) for agent frameworks without MCP — their
//! definitions in OpenAI's and Anthropic's formats, and one route that runs a tool. The
//! tools, their rules and their results are the ones `/mcp` serves.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::json::Json;
use super::{
    BodyErrors, CommonErrors,
    input::{ApiJson, ApiQuery},
};
use crate::{
    auth::Caller,
    error::ApiError,
    service::{
        AppState,
        tools::{self as catalog, Tool},
    },
};

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
    #[param(inline)]
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
enum ToolDefinition {
    OpenAi(OpenAiTool),
    Anthropic(AnthropicTool),
}

#[derive(Debug, Serialize, ToSchema)]
struct ToolDefinitions {
    /// Pass as the `tools` of a chat request.
    tools: Vec<ToolDefinition>,
}

/// The memory tools as function (OpenAI) or tool (Anthropic) definitions. A user-bound
/// token's tools take no `agent_id` or `external_ref`; anyone else's require both. Any
/// valid token may list them; calling one needs its scope.
#[utoipa::path(get, path = "/api/tools", tag = "tools", params(FormatQuery),
    responses((status = 200, body = ToolDefinitions), CommonErrors))]
async fn list_tools(caller: Caller, ApiQuery(query): ApiQuery<FormatQuery>) -> Json<ToolDefinitions> {
    let bound = caller.bound.is_some();
    let tools = Tool::ALL
        .into_iter()
        .map(|tool| {
            let (name, description, schema) = (tool.name(), tool.description(), tool.input_schema(bound));
            match query.format {
                Format::Openai => ToolDefinition::OpenAi(OpenAiTool {
                    kind: "function",
                    function: OpenAiFunction { name, description, parameters: schema },
                }),
                Format::Anthropic => {
                    ToolDefinition::Anthropic(AnthropicTool { name, description, input_schema: schema })
                }
            }
        })
        .collect();
    Json(ToolDefinitions { tools })
}

/// The body of `POST /api/tools/call`: what a model asked for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolInvocation {
    name: String,
    arguments: Map<String, Value>,
}

/// The spec states the body exactly: one variant per tool, each with that tool's
/// argument schema (as a caller without a user-bound token sends them), so a generated
/// client and the contract test know every argument's rules.
impl utoipa::PartialSchema for ToolInvocation {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let variants: Vec<Value> = Tool::ALL
            .into_iter()
            .map(|tool| {
                serde_json::json!({
                    "type": "object",
                    "description": tool.description(),
                    "properties": {"name": {"type": "string", "enum": [tool.name()]}, "arguments": tool.input_schema(false)},
                    "required": ["name", "arguments"],
                    "additionalProperties": false,
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({"oneOf": variants})).unwrap_or_default()
    }
}

impl ToSchema for ToolInvocation {}

/// Run one tool: 200 with its result (what `/mcp` returns as structured content), or the
/// error its REST route would answer. 409 `conflict` when the agent's memory is off or
/// the user refused consent (nothing is read or stored).
#[utoipa::path(post, path = "/api/tools/call", tag = "tools", request_body = ToolInvocation,
    responses(
        (status = 200, body = Object, description = "the tool's result"),
        CommonErrors, BodyErrors, super::NotFound,
        (status = 409, body = crate::error::ErrorBody, description = "memory off, consent refused, or the fact conflicts")
    ))]
async fn call_tool(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(call): ApiJson<ToolInvocation>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(catalog::call(&state, &caller, &call.name, call.arguments).await?))
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    use super::*;

    #[test]
    fn the_call_body_has_one_variant_per_tool_with_its_arguments() {
        let schema = serde_json::to_value(ToolInvocation::schema()).expect("a schema");
        let variants = schema["oneOf"].as_array().expect("oneOf");
        assert_eq!(variants.len(), Tool::ALL.len(), "{schema}");
        assert_eq!(variants[0]["properties"]["name"]["enum"][0], "remember");
        assert_eq!(variants[0]["properties"]["arguments"]["properties"]["fact"]["maxLength"], 1000);
        assert_eq!(variants[4]["properties"]["arguments"]["properties"]["id"]["format"], "uuid");
    }
}
