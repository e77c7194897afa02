//! The extractor for OpenAI-compatible chat completions APIs (OpenAI, vLLM, Ollama,
//! llama.cpp server…): the wire format of `POST {base_url}/chat/completions`.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::provider_call::{self, Provider, Reply};
use super::{
    ExtractError, Extraction, ExtractionRequest, KnownFact, MAX_SUMMARY_TOKENS, SummaryRequest, Usage,
    parse::parse_operations, prompt, summary_prompt,
};
use crate::ResponseFormatKind;

/// An extractor that talks to an OpenAI-compatible `/chat/completions` endpoint.
pub struct OpenAi {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    format: ResponseFormatKind,
    /// The completion limit of an extraction (`ENGRAM_LLM_MAX_TOKENS`).
    max_tokens: u32,
    /// Set once the server refused a schema: every later call asks for plain JSON.
    schema_refused: AtomicBool,
}

impl OpenAi {
    /// `base_url` includes the API version (`https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`) because compatible servers mount it in different places.
    /// `api_key` is optional because local servers usually need none.
    pub fn new(client: reqwest::Client, base_url: String, api_key: Option<String>, model: String) -> Self {
        Self {
            client,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            model,
            format: ResponseFormatKind::JsonObject,
            max_tokens: crate::DEFAULT_LLM_MAX_TOKENS,
            schema_refused: AtomicBool::new(false),
        }
    }

    /// How the answer's shape is asked for (plain JSON mode unless set).
    pub fn with_response_format(mut self, format: ResponseFormatKind) -> Self {
        self.format = format;
        self
    }

    /// The longest answer an extraction may have, in tokens (the default unless set).
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Asks the model for the facts the user stated in the new messages of `request`, and
    /// the changes they make to `known`. A
    /// server that refuses the schema (400, 422 or 500: llama.cpp answers `json_schema`
    /// with a 500) is asked again at once in plain JSON mode, within the same attempt, and
    /// is never sent the schema again: a missing feature is not a failure to retry.
    pub async fn extract(&self, request: &ExtractionRequest, known: &[KnownFact]) -> Result<Extraction, ExtractError> {
        let format =
            if self.schema_refused.load(Ordering::Relaxed) { ResponseFormatKind::JsonObject } else { self.format };
        match self.call(request, known, format).await {
            Err(error) if format != ResponseFormatKind::JsonObject && provider_call::is_refusal(&error) => {
                self.schema_refused.store(true, Ordering::Relaxed);
                tracing::warn!(%error, "the LLM server refused the response schema; using plain JSON mode from now on");
                self.call(request, known, ResponseFormatKind::JsonObject).await
            }
            other => other,
        }
    }

    /// Asks the model to fold `request.turns` into the summary so far; the answer is plain
    /// text, so no `response_format` is sent.
    pub async fn summarize(&self, request: &SummaryRequest) -> Result<(String, Option<Usage>), ExtractError> {
        let user = summary_prompt::user_prompt(request);
        let body = self.chat(summary_prompt::system_prompt(), &user, MAX_SUMMARY_TOKENS, None);

        provider_call::call(Provider::OpenAi, self.post(&body)?, unwrap_reply, summary_prompt::parse_summary).await
    }

    async fn call(
        &self,
        request: &ExtractionRequest,
        known: &[KnownFact],
        format: ResponseFormatKind,
    ) -> Result<Extraction, ExtractError> {
        let system = prompt::system_prompt(request.instructions.as_deref());
        let user = prompt::transcript(request, known);
        let body = self.chat(&system, &user, self.max_tokens, Some(response_format(format)));
        let parse = |text: &str, ending| parse_operations(text, known, ending);
        let (operations, usage) = provider_call::call(Provider::OpenAi, self.post(&body)?, unwrap_reply, parse).await?;
        Ok(Extraction { facts: operations.facts, changes: operations.changes, usage, ungrounded: 0 })
    }

    fn chat<'a>(
        &'a self,
        system: &'a str,
        user: &'a str,
        max_tokens: u32,
        response_format: Option<Value>,
    ) -> ChatRequest<'a> {
        ChatRequest {
            model: &self.model,
            messages: [ChatMessage { role: "system", content: system }, ChatMessage { role: "user", content: user }],
            temperature: 0.0,
            max_tokens,
            response_format,
        }
    }

    /// The `POST /chat/completions` of `body`, with the API key when there is one.
    fn post(&self, body: &ChatRequest<'_>) -> Result<reqwest::RequestBuilder, ExtractError> {
        let mut http = self.client.post(format!("{}/chat/completions", self.base_url)).json(body);
        if let Some(key) = &self.api_key {
            http = http.header(reqwest::header::AUTHORIZATION, provider_call::secret_header(&format!("Bearer {key}"))?);
        }
        Ok(http)
    }
}

/// The `response_format` of each kind. JSON mode needs the word "JSON" in the messages
/// (OpenAI checks); the system prompt has it.
fn response_format(format: ResponseFormatKind) -> Value {
    match format {
        ResponseFormatKind::JsonSchema => {
            json!({"type": "json_schema", "json_schema": {"name": "operations", "strict": true, "schema": prompt::answer_schema()}})
        }
        ResponseFormatKind::JsonObjectSchema => json!({"type": "json_object", "schema": prompt::answer_schema()}),
        ResponseFormatKind::JsonObject => json!({"type": "json_object"}),
    }
}

fn unwrap_reply(response: ChatResponse) -> Result<Reply, ExtractError> {
    let choice = response
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ExtractError::Malformed("provider response has no choice".into()))?;
    let truncated = choice.finish_reason.as_deref() == Some("length");
    let content = match choice.message.content {
        Some(content) => content,
        None if truncated => String::new(),
        None => return Err(ExtractError::Malformed("provider response has no message content".into())),
    };
    Ok(Reply {
        text: content,
        usage: response.usage.map(|u| Usage { input_tokens: u.prompt_tokens, output_tokens: u.completion_tokens }),
        truncated,
    })
}

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: [ChatMessage<'a>; 2],
    /// Extraction should be repeatable, not creative.
    temperature: f32,
    /// `max_tokens`, which compatible servers (vLLM, Ollama, llama.cpp) all read; OpenAI's
    /// newer `max_completion_tokens` is not understood by all of them.
    max_tokens: u32,
    /// Makes the model emit one JSON object, of the answer's shape where the server can
    /// (facts only: a summary is plain text).
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
}

#[derive(Serialize)]
struct ChatMessage<'a> {
    role: &'static str,
    content: &'a str,
}

/// Only the fields extraction and summaries need; the rest of the response is ignored so that compatible
/// servers which add or omit other fields still work.
#[derive(Deserialize)]
struct ChatResponse {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
    /// `length` when the answer was cut at `max_tokens`.
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    /// `null` when the model refused or called a tool instead of answering.
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}
