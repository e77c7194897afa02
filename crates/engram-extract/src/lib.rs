//! Extractors: what turns a conversation into facts about its user, and folds a long
//! thread into its rolling summary. One interface ([`Extractor`]) over the built-in rules
//! and two LLM wire protocols.

use std::time::Duration;

/// The domain crate, under the name the server's layers know it by.
use engram_domain as domain;
use engram_remote as remote_servers;

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

impl ExtractionRequest {
    /// The turns facts are taken from, oldest first: the user's, after `from_seq`.
    pub fn new_user_turns(&self) -> impl DoubleEndedIterator<Item = &Turn> {
        self.turns.iter().filter(|turn| turn.role == crate::domain::message::Role::User && turn.seq > self.from_seq)
    }
}

/// What a summariser is asked: fold `turns` (oldest first) into the summary so far.
#[derive(Debug, Clone)]
pub struct SummaryRequest {
    pub previous: Option<String>,
    pub turns: Vec<Turn>,
}

/// The default completion limit of an extraction, in tokens: about eleven `add`
/// operations of a short fact each (some 33 tokens apiece), more than a conversation
/// usually states. A small local model answers it in about 7 s at ~57 tokens/s (a cut
/// answer keeps its complete operations), where the former 1 024 took 18 s, 36 s for the
/// second of two jobs queued on one server: past the 30 s timeout.
pub const DEFAULT_LLM_MAX_TOKENS: u32 = 384;

/// The `response_format` the OpenAI-compatible extractor sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ResponseFormatKind {
    /// `{"type": "json_schema", …}`: OpenAI, vLLM, recent Ollama.
    JsonSchema,
    /// `{"type": "json_object", "schema": …}`: llama.cpp's server.
    JsonObjectSchema,
    /// `{"type": "json_object"}`: any JSON, the shape only asked for in the prompt.
    JsonObject,
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

/// The tokens a provider reported for one call: its prompt (input) and its answer (output).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    /// New facts.
    pub facts: Vec<ExtractedFact>,
    /// Updates and deletions of known facts (LLM extractors only).
    pub changes: Vec<Change>,
    pub usage: Option<Usage>,
    /// The model's facts that the user's lines do not support, dropped ([`grounding`]).
    pub ungrounded: usize,
}

impl Extraction {
    /// Whether the model answered facts and grounding dropped every one: unlike an answer
    /// that found nothing to remember, this one failed, and the worker may fall back.
    pub fn nothing_grounded(&self) -> bool {
        self.ungrounded > 0 && self.facts.is_empty() && self.changes.is_empty()
    }
}

/// Why an extraction failed. Messages never hold personal data or secrets: they end up in
/// the job's `last_error`, which admins read.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("provider rate limited the request")]
    RateLimited { retry_after: Option<Duration> },
    #[error("provider unavailable: {0}")]
    Transient(String),
    /// No answer within the call's timeout (`ENGRAM_LLM_TIMEOUT_SECS`), given up `after`
    /// this long. A local server may still be generating the abandoned answer.
    #[error("provider unavailable: request timed out after {} s", after.as_secs())]
    TimedOut { after: Duration },
    #[error("malformed model output: {0}")]
    Malformed(String),
    /// The model stopped at the completion limit before it completed one operation (or,
    /// for a summary, at all): nothing of the answer is usable.
    #[error("model output truncated at the completion limit (ENGRAM_LLM_MAX_TOKENS)")]
    Truncated,
    #[error("provider refused the request: {0}")]
    Fatal(String),
}

impl ExtractError {
    /// Whether asking the same again may answer otherwise: a provider that was busy, away
    /// or slow may not be next time. An answer with nothing usable in it would come again
    /// (extraction runs at temperature 0), and a refused request would be refused again.
    pub fn retry_may_help(&self) -> bool {
        match self {
            ExtractError::RateLimited { .. } | ExtractError::Transient(_) | ExtractError::TimedOut { .. } => true,
            ExtractError::Malformed(_) | ExtractError::Truncated | ExtractError::Fatal(_) => false,
        }
    }
}

/// The longest summary asked of an LLM (the prompt asks for about 300 words). Without a
/// limit a small local model can generate until its context is full, past the call's
/// timeout, and keep the server busy after Engram has given up. Facts have their own,
/// configured limit (`ENGRAM_LLM_MAX_TOKENS`).
pub const MAX_SUMMARY_TOKENS: u32 = 1024;

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
    /// The provider label of metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Extractor::Builtin => "builtin",
            Extractor::OpenAi(_) => "openai",
            Extractor::Anthropic(_) => "anthropic",
        }
    }

    /// Whether the extractor is an LLM's: it reads the user's known facts (see
    /// [`Extractor::extract`]), which the builtin rules do not, and it can fail where the
    /// rules would not, so the worker may fall back to them.
    pub fn is_llm(&self) -> bool {
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
    /// caller that must not send the messages to an LLM asks [`Extractor::Builtin`]. With
    /// the tokens the provider reported (none for the builtin).
    pub async fn summarize(&self, request: &SummaryRequest) -> Result<(String, Option<Usage>), ExtractError> {
        match self {
            Extractor::Builtin => {
                let said = request.turns.iter().map(|turn| (turn.role, turn.text.as_str()));
                Ok((crate::domain::summary::extractive(request.previous.as_deref(), said), None))
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
    Extraction { facts, changes, ungrounded: dropped, ..extraction }
}

/// Runs the builtin rules on a blocking thread, so that a long conversation never stalls
/// the async workers, for at most `limit`. A thread past its limit cannot be stopped: it
/// is abandoned and finishes on its own (the rules always end; the limit only bounds the
/// job's wait).
async fn run_builtin(request: &ExtractionRequest, limit: Duration) -> Result<Extraction, ExtractError> {
    let request = request.clone();
    let task = tokio::task::spawn_blocking(move || builtin::extract(&request));
    match tokio::time::timeout(limit, task).await {
        Ok(Ok(facts)) => Ok(Extraction { facts, changes: vec![], usage: None, ungrounded: 0 }),
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

    #[test]
    fn grounding_counts_what_it_drops_so_an_answer_of_invented_facts_is_told_from_an_empty_one() {
        let request = request("I carve spoons in my shed.".into());
        let answer = |facts: &[&str]| Extraction {
            facts: facts
                .iter()
                .map(|f| ExtractedFact { fact: (*f).to_owned(), score: 0.9, tags: vec![], said_in: vec![] })
                .collect(),
            changes: vec![],
            usage: None,
            ungrounded: 0,
        };
        let invented = ground(answer(&["Name is <statement>", "Likes jazz"]), &request);
        assert_eq!((invented.facts.len(), invented.ungrounded), (0, 2));
        assert!(invented.nothing_grounded());
        let partly = ground(answer(&["Carves spoons", "Likes jazz"]), &request);
        assert_eq!((partly.facts.len(), partly.ungrounded), (1, 1));
        assert!(!partly.nothing_grounded());
        assert!(!ground(answer(&[]), &request).nothing_grounded(), "finding nothing is no failure");
    }

    #[test]
    fn only_a_busy_away_or_slow_provider_is_worth_asking_again() {
        let again = [
            ExtractError::RateLimited { retry_after: None },
            ExtractError::Transient("HTTP 503".into()),
            ExtractError::TimedOut { after: Duration::from_secs(30) },
        ];
        assert!(again.iter().all(ExtractError::retry_may_help));
        let same_again =
            [ExtractError::Malformed("x".into()), ExtractError::Truncated, ExtractError::Fatal("HTTP 400".into())];
        assert!(!same_again.iter().any(ExtractError::retry_may_help));
    }

    #[tokio::test]
    async fn builtin_past_its_limit_is_a_failed_attempt() {
        // About 4 MB: tens of milliseconds at least, against a limit of one.
        let request = request("I live in Oslo and I like tea, coffee, and cake. ".repeat(80_000));
        let error = run_builtin(&request, Duration::from_millis(1)).await.expect_err("timed out");
        assert!(matches!(&error, ExtractError::Fatal(m) if m.contains("time limit")), "{error}");
    }
}
