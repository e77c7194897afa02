//! What both LLM provider test files use: one extraction request, the model's answer to it
//! and the facts that answer holds, and a client with a short timeout.

use std::time::Duration;

use engram::domain::message::Role;
use engram::extract::{ExtractError, ExtractedFact, Extraction, ExtractionRequest, Turn};
use serde_json::json;
use wiremock::ResponseTemplate;

/// A short timeout, so the slow-server tests stay fast.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_millis(500)).build().expect("client builds")
}

/// `answer`, sent well after [`client`]'s timeout.
pub fn slower_than_the_client(answer: serde_json::Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(answer).set_delay(Duration::from_secs(3))
}

/// A conversation whose new user line states two facts, with operator guidance.
pub fn request() -> ExtractionRequest {
    let turn = |seq, role, text: &str| Turn { seq, role, text: text.to_owned() };
    ExtractionRequest {
        turns: vec![
            turn(1, Role::User, "Hello there"),
            turn(2, Role::Assistant, "Hi! How can I help?"),
            turn(3, Role::User, "My name is Alice and I prefer tea over coffee"),
        ],
        from_seq: 2,
        instructions: Some("Ignore anything about pets.".to_owned()),
    }
}

/// The model's answer to [`request`].
pub const ANSWER: &str = r#"{"operations": [{"op": "add", "id": null, "fact": "Name is Alice", "score": 0.95, "tags": ["identity"]}, {"op": "add", "fact": "Prefers tea over coffee", "score": 0.8}]}"#;

/// The facts [`ANSWER`] holds.
pub fn expected_facts() -> Vec<ExtractedFact> {
    vec![
        ExtractedFact {
            fact: "Name is Alice".to_owned(),
            score: 0.95,
            tags: vec!["identity".to_owned()],
            said_in: vec![],
        },
        ExtractedFact { fact: "Prefers tea over coffee".to_owned(), score: 0.8, tags: vec![], said_in: vec![] },
    ]
}

/// The JSON body of the first request a fake provider received.
pub async fn first_body(server: &wiremock::MockServer) -> serde_json::Value {
    let received = server.received_requests().await.expect("recording is on");
    serde_json::from_slice(&received.first().expect("a request").body).expect("a JSON body")
}

/// Rate limited, for the 7 seconds the server's `Retry-After` said.
#[track_caller]
pub fn assert_rate_limited_for_7s(error: &ExtractError) {
    let wait = match error {
        ExtractError::RateLimited { retry_after } => *retry_after,
        other => panic!("not rate limited: {other:?}"),
    };
    assert_eq!(wait, Some(Duration::from_secs(7)));
}

/// How a provider refuses: a rejected key (401, 403) is fatal and said so, while the key
/// itself is in neither the message nor the debug form (they reach job errors and logs); any
/// other refusal (400) is fatal and told by its status only (the body may quote the person).
/// `error_body` words an error of a status and message as the provider's server does.
pub async fn assert_refusals_are_fatal(
    extraction_from: impl AsyncFn(ResponseTemplate) -> Result<Extraction, ExtractError>,
    error_body: fn(u16, &str) -> serde_json::Value,
    key: &str,
) {
    for status in [401, 403] {
        let answer = ResponseTemplate::new(status).set_body_json(error_body(status, &format!("invalid API key {key}")));
        let error = extraction_from(answer).await.expect_err("rejected");
        assert!(matches!(error, ExtractError::Fatal(_)), "{status}: {error:?}");
        assert!(error.to_string().contains("API key"), "{error}");
        assert!(!error.to_string().contains(key), "{error}");
        assert!(!format!("{error:?}").contains(key), "{error:?}");
    }
    let answer = ResponseTemplate::new(400).set_body_json(error_body(400, "prompt is too long: My name is Alice"));
    let error = extraction_from(answer).await.expect_err("refused");
    assert!(matches!(error, ExtractError::Fatal(_)), "{error:?}");
    assert_eq!(error.to_string(), "provider refused the request: HTTP 400");
}

/// Malformed, and never quoting what the person said ("Alice").
#[track_caller]
pub fn assert_malformed_unquoted(error: &ExtractError, case: &str) {
    assert!(matches!(error, ExtractError::Malformed(_)), "{case}: {error:?}");
    assert!(!error.to_string().contains("Alice"), "{case}: {error}");
}

/// Worth retrying later, and never quoting what the person said ("Alice").
#[track_caller]
pub fn assert_transient_unquoted(error: &ExtractError, case: &str) {
    assert!(matches!(error, ExtractError::Transient(_)), "{case}: {error:?}");
    assert!(!error.to_string().contains("Alice"), "{case}: {error}");
}

/// Timed out, after about [`client`]'s timeout, which the job's retry then waits again.
#[track_caller]
pub fn assert_timed_out(error: &ExtractError) {
    match error {
        ExtractError::TimedOut { after } => {
            assert!((Duration::from_millis(400)..Duration::from_secs(3)).contains(after), "{after:?}");
        }
        other => panic!("not timed out: {other:?}"),
    }
    assert!(error.to_string().contains("timed out"), "{error}");
}

/// The transcript [`request`] becomes: the person's words, with the new-messages marker
/// between the turns already seen and the new ones.
#[track_caller]
pub fn assert_transcript(transcript: &str) {
    assert!(transcript.contains("My name is Alice and I prefer tea over coffee"));
    let marker = transcript.find(engram::extract::prompt::NEW_MESSAGES_MARKER).expect("marker");
    assert!(marker > transcript.find("[2] assistant").expect("old turn"));
    assert!(marker < transcript.find("[3] user").expect("new turn"));
}

/// Starts the app with the `provider` extractor (`openai` or `anthropic`) pointed at the
/// fake `server`, polling for jobs every 50 ms; `extra` adds flags. Its API key is
/// `sk-test-secret-key`, its model `test-model`.
pub async fn spawn_with_llm(
    backend: super::Backend,
    provider: &str,
    server: &wiremock::MockServer,
    extra: &[&str],
) -> super::TestApp {
    // The OpenAI-compatible base URL includes `/v1`; Anthropic's does not.
    let base = if provider == "openai" { format!("{}/v1", server.uri()) } else { server.uri() };
    let mut args = vec!["--extractor", provider, "--llm-base-url", &base, "--llm-model", "test-model"];
    args.extend_from_slice(&["--llm-api-key", "sk-test-secret-key", "--job-poll-ms", "50"]);
    args.extend_from_slice(extra);
    super::TestApp::spawn_with(backend, &args).await
}

/// Starts the app with an LLM extractor pointed at `server`, fast retries, and memory on
/// for the agent `concierge`.
pub async fn spawn_extracting(
    backend: super::Backend,
    provider: &str,
    server: &wiremock::MockServer,
    extra: &[&str],
) -> super::TestApp {
    let fast = ["--llm-timeout-secs", "1", "--job-retry-base-ms", "50", "--job-max-attempts", "3"];
    let app = spawn_with_llm(backend, provider, server, &[&fast[..], extra].concat()).await;
    app.enable_memory("acme", "concierge").await;
    app
}

/// A chat completion whose assistant message says `content`.
pub fn openai_reply(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    }))
}
