//! The embedder for OpenAI-compatible embedding APIs (OpenAI, Ollama, vLLM, llama.cpp
//! server…): the wire format of `POST {base_url}/embeddings`.
//!
//! Failures are classified by status and error kind only: no response body is read on an
//! error and no reqwest message is kept, since bodies echo the input and URLs may carry
//! credentials.

use reqwest::StatusCode;
use serde::{Deserialize, Serialize};

use super::{EmbedError, normalised};
use crate::remote_servers;

/// Largest response read, so that a confused server cannot exhaust memory: 64 MB is far
/// above a batch of large vectors as JSON.
const MAX_RESPONSE_BYTES: usize = 64 << 20;

pub struct OpenAi {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
}

impl OpenAi {
    /// `base_url` includes the API version (`https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`); `api_key` is optional because local servers need none.
    pub fn new(client: reqwest::Client, base_url: String, api_key: Option<String>, model: String) -> Self {
        Self { client, base_url: base_url.trim_end_matches('/').to_owned(), api_key, model }
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let started = std::time::Instant::now();
        let result = self.call(texts).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(EmbedError::RateLimited { .. }) => "rate_limited",
            Err(EmbedError::Transient(_)) => "transient",
            Err(EmbedError::Malformed(_)) => "malformed",
            Err(EmbedError::Fatal(_) | EmbedError::Unavailable) => "fatal",
        };
        metrics::counter!("engram_embedding_calls_total", "provider" => "openai", "outcome" => outcome).increment(1);
        metrics::histogram!("engram_embedding_call_seconds", "provider" => "openai")
            .record(started.elapsed().as_secs_f64());
        result
    }

    async fn call(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = EmbeddingsRequest { model: &self.model, input: texts, encoding_format: "float" };
        let mut request = self.client.post(format!("{}/embeddings", self.base_url)).json(&body);
        if let Some(key) = &self.api_key {
            let header = remote_servers::secret_header(&format!("Bearer {key}"))
                .ok_or_else(|| EmbedError::Fatal("the API key is not a valid HTTP header value".into()))?;
            request = request.header(reqwest::header::AUTHORIZATION, header);
        }
        let mut response = request.send().await.map_err(from_reqwest)?;
        let status = response.status();
        if !status.is_success() {
            let code = status.as_u16();
            return Err(match status {
                StatusCode::TOO_MANY_REQUESTS => {
                    EmbedError::RateLimited { retry_after: remote_servers::retry_after(response.headers()) }
                }
                StatusCode::REQUEST_TIMEOUT => EmbedError::Transient(format!("HTTP {code}")),
                s if s.is_server_error() => EmbedError::Transient(format!("HTTP {code}")),
                _ => EmbedError::Fatal(format!("HTTP {code}")),
            });
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(from_reqwest)? {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(EmbedError::Malformed("response too large".into()));
            }
            body.extend_from_slice(&chunk);
        }
        let reply: EmbeddingsResponse = serde_json::from_slice(&body)
            .map_err(|_| EmbedError::Malformed("response is not the expected JSON".into()))?;
        vectors_in_order(reply, texts.len())
    }
}

/// The vectors of `reply` by their `index`: exactly one per input, all of one length.
fn vectors_in_order(reply: EmbeddingsResponse, count: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; count];
    for item in reply.data {
        let slot = slots.get_mut(item.index).ok_or_else(|| EmbedError::Malformed("index out of range".into()))?;
        if slot.replace(item.embedding).is_some() {
            return Err(EmbedError::Malformed("an index appears twice".into()));
        }
    }
    let vectors: Vec<Vec<f32>> =
        slots.into_iter().collect::<Option<_>>().ok_or_else(|| EmbedError::Malformed("a vector is missing".into()))?;
    let dims = vectors.first().map_or(0, Vec::len);
    if vectors.iter().any(|v| v.len() != dims) {
        return Err(EmbedError::Malformed("vectors differ in length".into()));
    }
    vectors.into_iter().map(normalised).collect()
}

/// A transport failure, by kind only (see [`remote_servers::failure`]).
fn from_reqwest(error: reqwest::Error) -> EmbedError {
    let failure = remote_servers::failure(&error);
    let reason = failure.reason.to_owned();
    if failure.fatal { EmbedError::Fatal(reason) } else { EmbedError::Transient(reason) }
}

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [String],
    /// Floats, not base64: every compatible server speaks this one.
    encoding_format: &'static str,
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    index: usize,
}
