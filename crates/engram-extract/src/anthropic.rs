//! The extractor for Anthropic's Messages API: the wire format of `POST {base_url}/v1/messages`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::provider_call::{self, Provider, Reply};
use super::{
    ExtractError, Extraction, ExtractionRequest, KnownFact, MAX_SUMMARY_TOKENS, SummaryRequest, Usage,
    parse::parse_operations, prompt, summary_prompt,
};

/// The Messages API version this wire format follows.
const API_VERSION: &str = "2023-06-01";

/// The tool the model is made to call: its input schema is the answer's shape, so the API
/// itself holds the answer to it.
const TOOL: &str = "record_facts";

/// An extractor that talks to Anthropic's Messages API.
pub struct Anthropic {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    /// The completion limit of an extraction (`ENGRAM_LLM_MAX_TOKENS`).
    max_tokens: u32,
}

impl Anthropic {
    /// `base_url` is the host without the API version (`https://api.anthropic.com`), as in
    /// Anthropic's own SDKs. A trailing `/v1` is dropped all the same, because the OpenAI
    /// extractor's base URL includes it and an operator switching providers may keep it.
    /// `api_key` is optional so that a gateway that adds the key itself can sit in between.
    pub fn new(client: reqwest::Client, base_url: String, api_key: Option<String>, model: String) -> Self {
        let base_url = base_url.trim_end_matches('/');
        let base_url = base_url.strip_suffix("/v1").unwrap_or(base_url);
        Self { client, base_url: base_url.to_owned(), api_key, model, max_tokens: crate::DEFAULT_LLM_MAX_TOKENS }
    }

    /// The longest answer an extraction may have, in tokens (the default unless set).
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Asks the model for the facts the user stated in the new messages of `request`, and
    /// the changes they make to `known`.
    pub async fn extract(&self, request: &ExtractionRequest, known: &[KnownFact]) -> Result<Extraction, ExtractError> {
        let system = prompt::system_prompt(request.instructions.as_deref());
        let user = prompt::transcript(request, known);
        let body = MessagesRequest {
            tools: Some([json!({
                "name": TOOL,
                "description": "Records the changes to the memory about the user: facts they stated to add, known facts to update or delete.",
                "input_schema": prompt::answer_schema()
            })]),
            tool_choice: Some(json!({"type": "tool", "name": TOOL})),
            ..self.messages(&system, &user, self.max_tokens)
        };
        let parse = |text: &str, ending| parse_operations(text, known, ending);
        let (operations, usage) =
            provider_call::call(Provider::Anthropic, self.post(&body)?, unwrap_reply, parse).await?;
        Ok(Extraction { facts: operations.facts, changes: operations.changes, usage, ungrounded: 0 })
    }

    /// Asks the model to fold `request.turns` into the summary so far, answered in text.
    pub async fn summarize(&self, request: &SummaryRequest) -> Result<(String, Option<Usage>), ExtractError> {
        let user = summary_prompt::user_prompt(request);
        let body = self.messages(summary_prompt::system_prompt(), &user, MAX_SUMMARY_TOKENS);

        provider_call::call(Provider::Anthropic, self.post(&body)?, unwrap_reply, summary_prompt::parse_summary).await
    }

    fn messages<'a>(&'a self, system: &'a str, user: &'a str, max_tokens: u32) -> MessagesRequest<'a> {
        MessagesRequest {
            model: &self.model,
            max_tokens,
            system,
            messages: [Message { role: "user", content: user }],
            temperature: 0.0,
            tools: None,
            tool_choice: None,
        }
    }

    /// The `POST /v1/messages` of `body`, with the API key when there is one.
    fn post(&self, body: &MessagesRequest<'_>) -> Result<reqwest::RequestBuilder, ExtractError> {
        let mut http = self
            .client
            .post(format!("{}/v1/messages", self.base_url))
            .header("anthropic-version", API_VERSION)
            .json(body);
        if let Some(key) = &self.api_key {
            http = http.header("x-api-key", provider_call::secret_header(key)?);
        }
        Ok(http)
    }
}

/// The input of the `record_facts` call; from a gateway or model that answered in text
/// instead, the text blocks joined. Other block kinds (thinking) are not part of the answer.
fn unwrap_reply(response: MessagesResponse) -> Result<Reply, ExtractError> {
    let tool_input = response
        .content
        .iter()
        .find(|block| block.kind == "tool_use" && block.name.as_deref() == Some(TOOL))
        .and_then(|block| block.input.as_ref());
    let text: String = match tool_input {
        Some(input) => input.to_string(),
        None => {
            response.content.into_iter().filter(|block| block.kind == "text").filter_map(|block| block.text).collect()
        }
    };
    Ok(Reply {
        text,
        usage: response.usage.map(|u| Usage { input_tokens: u.input_tokens, output_tokens: u.output_tokens }),
        truncated: response.stop_reason.as_deref() == Some("max_tokens"),
    })
}

#[derive(Serialize)]
struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    system: &'a str,
    messages: [Message<'a>; 1],
    /// Extraction should be repeatable, not creative.
    temperature: f32,
    /// One tool, whose input schema is the answer's shape, and the model made to call it
    /// (facts only: a summary is answered in text).
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[Value; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

/// Only the fields extraction and summaries need; new fields and block kinds the API adds are ignored.
#[derive(Deserialize)]
struct MessagesResponse {
    content: Vec<ContentBlock>,
    /// `max_tokens` when the answer was cut at the limit.
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    /// A `tool_use` block's tool and arguments.
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}
