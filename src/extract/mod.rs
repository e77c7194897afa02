//! Extractors: what turns a conversation into facts about its user. One interface
//! ([`Extractor`]) over the built-in rules and two LLM wire protocols.

use std::time::Duration;

pub mod anthropic;
pub mod builtin;
pub mod openai;
pub mod parse;
pub mod prompt;
mod provider_call;

/// One message of a conversation, flattened to text for extraction.
#[derive(Debug, Clone)]
pub struct Turn {
    pub seq: i64,
    pub role: crate::domain::message::Role,
    pub text: String,
}

/// What the extractor is asked: the whole conversation for context, and facts only from
/// user turns with `seq > from_seq`.
#[derive(Debug, Clone)]
pub struct ExtractionRequest {
    pub turns: Vec<Turn>,
    pub from_seq: i64,
    pub instructions: Option<String>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ExtractedFact {
    pub fact: String,
    pub score: f64,
    #[serde(default)]
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    pub facts: Vec<ExtractedFact>,
    pub usage: Option<Usage>,
}

/// Why an extraction failed. Messages never hold personal data or secrets: they end up in
/// the job's `last_error`, which admins read.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("provider rate limited the request")]
    RateLimited { retry_after: Option<Duration> },
    #[error("provider unavailable: {0}")]
    Transient(String),
    #[error("malformed model output: {0}")]
    Malformed(String),
    #[error("provider refused the request: {0}")]
    Fatal(String),
}

/// The configured extractor (`ENGRAM_EXTRACTOR`).
pub enum Extractor {
    Builtin,
    OpenAi(openai::OpenAi),
    Anthropic(anthropic::Anthropic),
}

impl Extractor {
    pub fn from_config(config: &crate::config::ServeConfig) -> anyhow::Result<Extractor> {
        use crate::config::ExtractorKind;
        let client = || {
            reqwest::Client::builder()
                .timeout(Duration::from_secs(config.llm_timeout_secs))
                .build()
                .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))
        };
        let key = config.llm_api_key.as_ref().map(|k| k.0.clone());
        let model = config.llm_model.clone().unwrap_or_default();
        Ok(match config.extractor {
            ExtractorKind::Builtin => Extractor::Builtin,
            ExtractorKind::Openai => {
                let base = config.llm_base_url.clone().unwrap_or_else(|| "https://api.openai.com/v1".into());
                Extractor::OpenAi(openai::OpenAi::new(client()?, base, key, model))
            }
            ExtractorKind::Anthropic => {
                let base = config.llm_base_url.clone().unwrap_or_else(|| "https://api.anthropic.com".into());
                Extractor::Anthropic(anthropic::Anthropic::new(client()?, base, key, model))
            }
        })
    }

    /// The provider label of metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Extractor::Builtin => "builtin",
            Extractor::OpenAi(_) => "openai",
            Extractor::Anthropic(_) => "anthropic",
        }
    }

    pub async fn extract(&self, request: &ExtractionRequest) -> Result<Extraction, ExtractError> {
        match self {
            Extractor::Builtin => Ok(Extraction { facts: builtin::extract(request), usage: None }),
            Extractor::OpenAi(client) => client.extract(request).await,
            Extractor::Anthropic(client) => client.extract(request).await,
        }
    }
}
