//! The extractor for OpenAI-compatible chat completions APIs (OpenAI, vLLM, Ollama,
//! llama.cpp server…): the wire format of `POST {base_url}/chat/completions`.

use serde::{Deserialize, Serialize};

use super::provider_call::{self, Provider, Reply};
use super::{ExtractError, Extraction, ExtractionRequest, MAX_ANSWER_TOKENS, Usage, prompt};

/// An extractor that talks to an OpenAI-compatible `/chat/completions` endpoint.
pub struct OpenAi {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
}

impl OpenAi {
    /// `base_url` includes the API version (`https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`) because compatible servers mount it in different places.
    /// `api_key` is optional because local servers usually need none.
    pub fn new(client: reqwest::Client, base_url: String, api_key: Option<String>, model: String) -> Self {
        Self { client, base_url: base_url.trim_end_matches('/').to_owned(), api_key, model }
    }

    /// Asks the model for the facts the user stated in the new messages of `request`.
    pub async fn extract(&self, request: &ExtractionRequest) -> Result<Extraction, ExtractError> {
        let system = prompt::system_prompt(request.instructions.as_deref());
        let user = prompt::transcript(request);
        let body = ChatRequest {
            model: &self.model,
            messages: [ChatMessage { role: "system", content: &system }, ChatMessage { role: "user", content: &user }],
            temperature: 0.0,
            max_tokens: MAX_ANSWER_TOKENS,
            response_format: ResponseFormat { kind: "json_object" },
        };
        let mut http = self.client.post(format!("{}/chat/completions", self.base_url)).json(&body);
        if let Some(key) = &self.api_key {
            http = http.header(reqwest::header::AUTHORIZATION, provider_call::secret_header(&format!("Bearer {key}"))?);
        }
        provider_call::call(Provider::OpenAi, http, unwrap_reply).await
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
    /// JSON mode makes the model emit a single JSON object. OpenAI requires the word "JSON"
    /// in the messages for this mode; the system prompt has it.
    response_format: ResponseFormat,
}

#[derive(Serialize)]
struct ChatMessage<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct ResponseFormat {
    #[serde(rename = "type")]
    kind: &'static str,
}

/// Only the fields extraction needs; the rest of the response is ignored so that compatible
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
