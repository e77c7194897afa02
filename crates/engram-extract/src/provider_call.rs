//! One round trip to an LLM provider, shared by every provider and by both tasks (facts,
//! summaries): sending the request, turning HTTP failures into [`ExtractError`], parsing
//! the model's answer, and recording metrics.
//!
//! Providers only describe their wire format; keeping the rest here means both classify
//! failures and count calls the same way. Nothing here puts a request or response body, or
//! the API key, into an error: only status codes and error kinds, because errors end up in
//! the job's `last_error` and in logs.

use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;
use reqwest::{RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;

use super::parse::{Ending, describe_json_error};
use super::{ExtractError, Usage};
use crate::remote_servers;

/// The metrics label of a provider.
#[derive(Debug, Clone, Copy)]
pub(super) enum Provider {
    OpenAi,
    Anthropic,
}

impl Provider {
    fn label(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

/// What a provider's response envelope holds once its own format is peeled off.
pub(super) struct Reply {
    /// The model's answer, still to be parsed (as facts, or as a summary).
    pub text: String,
    pub usage: Option<Usage>,
    /// The model stopped at the completion limit rather than at the end of its answer.
    pub truncated: bool,
}

/// Sends `request`, reads the 2xx body as the provider's envelope `E`, lets `unwrap` take the
/// model's text out of it, and `parse`s that text (told whether the completion limit cut
/// it), returning it with the tokens used. Every call is counted and timed, and tokens are
/// counted even when the answer turns out malformed, since they were spent.
pub(super) async fn call<E: DeserializeOwned, T>(
    provider: Provider,
    request: RequestBuilder,
    unwrap: impl FnOnce(E) -> Result<Reply, ExtractError>,
    parse: impl FnOnce(&str, Ending) -> Result<T, ExtractError>,
) -> Result<(T, Option<Usage>), ExtractError> {
    let started = Instant::now();
    let mut cut = false;
    let result = match send::<E>(request, started).await.and_then(unwrap) {
        Ok(reply) => {
            if let Some(usage) = reply.usage {
                record_tokens(provider, usage);
            }
            cut = reply.truncated;
            let ending = if reply.truncated { Ending::Cut } else { Ending::Whole };
            parse(&reply.text, ending).map(|t| (t, reply.usage))
        }
        Err(error) => Err(error),
    };
    let elapsed = started.elapsed();
    // A cut answer whose complete part was kept still counts as cut: a cap too low for
    // the model shows in the metrics.
    let outcome = if cut && result.is_ok() { "truncated" } else { outcome_label(&result) };
    metrics::counter!("engram_llm_calls_total", "provider" => provider.label(), "outcome" => outcome).increment(1);
    metrics::histogram!("engram_llm_call_seconds", "provider" => provider.label()).record(elapsed.as_secs_f64());
    tracing::debug!(provider = provider.label(), outcome, elapsed_ms = elapsed.as_millis() as u64, "LLM call finished");
    result
}

/// A header value for the API key, sensitive (see [`remote_servers::secret_header`]).
pub(super) fn secret_header(value: &str) -> Result<HeaderValue, ExtractError> {
    remote_servers::secret_header(value)
        .ok_or_else(|| ExtractError::Fatal("the API key is not a valid HTTP header value".into()))
}

/// The call whose `started` is given, up to its decoded body.
async fn send<E: DeserializeOwned>(request: RequestBuilder, started: Instant) -> Result<E, ExtractError> {
    let response = request.send().await.map_err(|e| from_reqwest(e, started.elapsed()))?;
    let response = check_status(response)?;
    let body = response.bytes().await.map_err(|e| from_reqwest(e, started.elapsed()))?;
    serde_json::from_slice(&body).map_err(|e| {
        ExtractError::Malformed(format!("provider response is not the expected JSON ({})", describe_json_error(&e)))
    })
}

/// Classifies a non-2xx response. The body is never read: providers echo request content and
/// parts of the key in their error bodies.
fn check_status(response: Response) -> Result<Response, ExtractError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let code = status.as_u16();
    Err(match status {
        StatusCode::TOO_MANY_REQUESTS => {
            ExtractError::RateLimited { retry_after: remote_servers::retry_after(response.headers()) }
        }
        StatusCode::REQUEST_TIMEOUT => ExtractError::Transient(format!("HTTP {code}")),
        s if s.is_server_error() => ExtractError::Transient(format!("HTTP {code}")),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            ExtractError::Fatal(format!("provider rejected the API key (HTTP {code})"))
        }
        _ => ExtractError::Fatal(format!("HTTP {code}")),
    })
}

/// Whether `error` is [`check_status`]'s answer to a 400, 422 or 500: what servers that do
/// not support a request option (a `response_format` schema) answer. A timeout or a lost
/// connection is not a refusal.
pub(super) fn is_refusal(error: &ExtractError) -> bool {
    match error {
        ExtractError::Fatal(message) => message == "HTTP 400" || message == "HTTP 422",
        ExtractError::Transient(message) => message == "HTTP 500",
        _ => false,
    }
}

/// A transport failure, by kind only (see [`remote_servers::failure`]); a timeout with the
/// `elapsed` time it took to give up.
fn from_reqwest(error: reqwest::Error, elapsed: Duration) -> ExtractError {
    if error.is_timeout() {
        return ExtractError::TimedOut { after: elapsed };
    }
    let failure = remote_servers::failure(&error);
    let reason = failure.reason.to_owned();
    if failure.fatal { ExtractError::Fatal(reason) } else { ExtractError::Transient(reason) }
}

fn record_tokens(provider: Provider, usage: Usage) {
    metrics::counter!("engram_llm_tokens_total", "provider" => provider.label(), "kind" => "input")
        .increment(usage.input_tokens);
    metrics::counter!("engram_llm_tokens_total", "provider" => provider.label(), "kind" => "output")
        .increment(usage.output_tokens);
}

fn outcome_label<T>(result: &Result<T, ExtractError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(ExtractError::RateLimited { .. }) => "rate_limited",
        Err(ExtractError::Transient(_)) => "transient",
        Err(ExtractError::TimedOut { .. }) => "timed_out",
        Err(ExtractError::Malformed(_)) => "malformed",
        Err(ExtractError::Truncated) => "truncated",
        Err(ExtractError::Fatal(_)) => "fatal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_headers_are_sensitive_and_reject_invalid_keys() {
        let header = secret_header("sk-secret").expect("valid key");
        assert!(header.is_sensitive());
        assert!(!format!("{header:?}").contains("sk-secret"));

        let error = secret_header("sk-secret\n").expect_err("newline is invalid");
        assert!(matches!(error, ExtractError::Fatal(_)));
        assert!(!error.to_string().contains("sk-secret"));
    }

    #[test]
    fn outcomes_have_one_label_per_error_kind() {
        let labels = [
            outcome_label(&Ok(())),
            outcome_label::<()>(&Err(ExtractError::RateLimited { retry_after: None })),
            outcome_label::<()>(&Err(ExtractError::Transient(String::new()))),
            outcome_label::<()>(&Err(ExtractError::TimedOut { after: Duration::from_secs(1) })),
            outcome_label::<()>(&Err(ExtractError::Malformed(String::new()))),
            outcome_label::<()>(&Err(ExtractError::Truncated)),
            outcome_label::<()>(&Err(ExtractError::Fatal(String::new()))),
        ];
        assert_eq!(labels, ["ok", "rate_limited", "transient", "timed_out", "malformed", "truncated", "fatal"]);
    }
}
