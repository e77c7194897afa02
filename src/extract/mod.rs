//! Extractors: what turns a conversation into facts about its user, and folds a long
//! thread into its rolling summary. One interface ([`Extractor`]) over the built-in rules
//! and two LLM wire protocols.

use std::time::Duration;

pub mod anthropic;
pub mod builtin;
pub mod grounding;
pub mod openai;
pub mod parse;
pub mod prompt;
mod provider_call;
pub mod summary_prompt;

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

/// What a summariser is asked: fold `turns` (oldest first) into the summary so far.
#[derive(Debug, Clone)]
pub struct SummaryRequest {
    pub previous: Option<String>,
    pub turns: Vec<Turn>,
}

pub use crate::domain::extracted::{Change, ExtractedFact};

/// One of the user's stored facts, shown to an LLM extractor so that it can update or
/// delete it. The prompt names it by its position (`f1` is the first, see
/// [`prompt::label`]), not by its id: short labels are what small models copy without
/// mistakes, a fact id never reaches the model, and an answer can only name the facts the
/// prompt listed, all of them this user's.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownFact {
    pub id: uuid::Uuid,
    pub text: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    /// New facts.
    pub facts: Vec<ExtractedFact>,
    /// Updates and deletions of known facts (LLM extractors only).
    pub changes: Vec<Change>,
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
    /// The model stopped at the completion limit ([`MAX_ANSWER_TOKENS`]): the answer is cut.
    #[error("model output truncated at the completion limit of {MAX_ANSWER_TOKENS} tokens")]
    Truncated,
    #[error("provider refused the request: {0}")]
    Fatal(String),
}

/// The longest answer asked of an LLM: room for a few dozen short facts. Without a limit a
/// small local model can generate until its context is full, past the call's timeout, and
/// keep the server busy after Engram has given up.
pub const MAX_ANSWER_TOKENS: u32 = 1024;

/// How long the builtin rules may work on one job. They run in time linear in their input
/// (megabytes per second even unoptimised), so only a bug could reach this; the limit keeps
/// such a bug from holding a worker forever. Reached, the attempt fails like any other and
/// is retried at most `ENGRAM_JOB_MAX_ATTEMPTS` times.
pub const BUILTIN_TIME_LIMIT: Duration = Duration::from_secs(10);

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
                Extractor::OpenAi(
                    openai::OpenAi::new(client()?, base, key, model).with_response_format(config.llm_response_format),
                )
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

    /// Whether the extractor reads the user's known facts (see [`Extractor::extract`]):
    /// the builtin rules do not, so the worker need not read them for it.
    pub fn reads_known_facts(&self) -> bool {
        !matches!(self, Extractor::Builtin)
    }

    /// The facts the user stated in the new messages of `request`, and, from an LLM
    /// extractor, the changes they make to `known`, the user's stored facts that the
    /// model is shown.
    pub async fn extract(&self, request: &ExtractionRequest, known: &[KnownFact]) -> Result<Extraction, ExtractError> {
        match self {
            Extractor::Builtin => run_builtin(request, BUILTIN_TIME_LIMIT).await,
            Extractor::OpenAi(client) => client.extract(request, known).await.map(|e| ground(e, request)),
            Extractor::Anthropic(client) => client.extract(request, known).await.map(|e| ground(e, request)),
        }
    }
}

impl Extractor {
    /// The summary so far with `request.turns` folded in: written by the LLM provider, or
    /// by the builtin extractive summary (see [`crate::domain::summary::extractive`]). A
    /// caller that must not send the messages to an LLM asks [`Extractor::Builtin`].
    pub async fn summarize(&self, request: &SummaryRequest) -> Result<String, ExtractError> {
        match self {
            Extractor::Builtin => {
                let said = request.turns.iter().map(|turn| (turn.role, turn.text.as_str()));
                Ok(crate::domain::summary::extractive(request.previous.as_deref(), said))
            }
            Extractor::OpenAi(client) => client.summarize(request).await,
            Extractor::Anthropic(client) => client.summarize(request).await,
        }
    }
}

/// Keeps the LLM's facts, new or replacing a known one, that the user's lines support
/// ([`grounding`]); the builtin rules only ever rewrite the user's own sentences. An update
/// whose new fact is not supported is dropped whole: the known fact stays as it is.
fn ground(extraction: Extraction, request: &ExtractionRequest) -> Extraction {
    let said = grounding::Said::new(request);
    let before = extraction.facts.len() + extraction.changes.len();
    let facts: Vec<ExtractedFact> = extraction.facts.into_iter().filter(|f| said.supports(&f.fact)).collect();
    let changes: Vec<Change> = extraction
        .changes
        .into_iter()
        .filter(|change| match change {
            Change::Update { fact, .. } => said.supports(&fact.fact),
            Change::Delete { .. } => true,
        })
        .collect();
    let dropped = before - facts.len() - changes.len();
    if dropped > 0 {
        metrics::counter!("engram_llm_facts_ungrounded_total").increment(dropped as u64);
        tracing::debug!(dropped, "facts not supported by the user's lines were dropped");
    }
    Extraction { facts, changes, ..extraction }
}

/// Runs the builtin rules on a blocking thread, so that a long conversation never stalls
/// the async workers, for at most `limit`. A thread past its limit cannot be stopped: it
/// is abandoned and finishes on its own (the rules always end; the limit only bounds the
/// job's wait).
async fn run_builtin(request: &ExtractionRequest, limit: Duration) -> Result<Extraction, ExtractError> {
    let request = request.clone();
    let task = tokio::task::spawn_blocking(move || builtin::extract(&request));
    match tokio::time::timeout(limit, task).await {
        Ok(Ok(facts)) => Ok(Extraction { facts, changes: vec![], usage: None }),
        Ok(Err(_)) => Err(ExtractError::Fatal("the builtin extractor failed".into())),
        Err(_) => Err(ExtractError::Fatal(format!(
            "the builtin extractor ran past its time limit of {} ms",
            limit.as_millis()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::message::Role;

    fn request(text: String) -> ExtractionRequest {
        ExtractionRequest { turns: vec![Turn { seq: 1, role: Role::User, text }], from_seq: 0, instructions: None }
    }

    #[tokio::test]
    async fn builtin_answers_within_its_limit_as_the_rules_do() {
        let request = request("I live in Oslo. I like tea.".into());
        let extraction = Extractor::Builtin.extract(&request, &[]).await.expect("extracted");
        assert_eq!(extraction.facts, builtin::extract(&request));
        assert_eq!(extraction.facts.len(), 2);
    }

    #[tokio::test]
    async fn builtin_past_its_limit_is_a_failed_attempt() {
        // About 4 MB: tens of milliseconds at least, against a limit of one.
        let request = request("I live in Oslo and I like tea, coffee, and cake. ".repeat(80_000));
        let error = run_builtin(&request, Duration::from_millis(1)).await.expect_err("timed out");
        assert!(matches!(&error, ExtractError::Fatal(m) if m.contains("time limit")), "{error}");
    }
}
