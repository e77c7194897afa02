//! The Anthropic extractor against a local server speaking the Messages API: request shape,
//! success, rate limits, outages, timeouts and malformed output.

use std::time::Duration;

use engram::extract::anthropic::Anthropic;
use engram::extract::prompt::NEW_MESSAGES_MARKER;
use engram::extract::{ExtractError, Usage};
use serde_json::{Value, json};

use crate::common::llm::{ANSWER, client, expected_facts, request};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const API_KEY: &str = "sk-ant-test-5ecret";

fn extractor(server: &MockServer) -> Anthropic {
    extractor_at(server.uri())
}

/// The extractor with `base_url` as configured, to check how it joins the path.
fn extractor_at(base_url: String) -> Anthropic {
    Anthropic::new(client(), base_url, Some(API_KEY.to_owned()), "claude-test".to_owned())
}

/// A Messages API response with the given content blocks, as Anthropic sends it.
fn message_with(content: Value) -> Value {
    json!({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": content,
        "model": "claude-test",
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 398, "output_tokens": 41}
    })
}

/// A Messages API response whose single text block says `text`.
fn message(text: &str) -> Value {
    message_with(json!([{"type": "text", "text": text}]))
}

async fn server_answering(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/messages")).respond_with(response).mount(&server).await;
    server
}

/// The one request a successful extraction sends, with the server's URL plus `suffix`
/// as the configured base URL.
async fn the_request_sent_to(suffix: &str) -> wiremock::Request {
    let server = server_answering(ResponseTemplate::new(200).set_body_json(message(ANSWER))).await;
    extractor_at(format!("{}{suffix}", server.uri())).extract(&request()).await.expect("extraction succeeds");
    let mut received = server.received_requests().await.expect("recording is on");
    assert_eq!(received.len(), 1);
    received.remove(0)
}

#[tokio::test]
async fn sends_a_messages_api_request() {
    // A trailing slash on the base URL must not double up in the path.
    let sent = &the_request_sent_to("/").await;
    assert_eq!(sent.url.path(), "/v1/messages");
    let header = |name: &str| sent.headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(header("x-api-key"), Some(API_KEY));
    assert_eq!(header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(header("content-type"), Some("application/json"));
    assert_eq!(header("authorization"), None);
    let body: Value = serde_json::from_slice(&sent.body).expect("JSON body");
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 1024);
    assert_eq!(body["temperature"].as_f64(), Some(0.0));
    let system = body["system"].as_str().expect("system prompt");
    assert!(system.contains("Additional guidance from the operator:\nIgnore anything about pets."));
    let messages = body["messages"].as_array().expect("messages array");
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["role"], "user");
    let transcript = messages[0]["content"].as_str().expect("transcript");
    assert!(transcript.contains("My name is Alice and I prefer tea over coffee"));
    let marker = transcript.find(NEW_MESSAGES_MARKER).expect("marker");
    assert!(marker > transcript.find("[2] assistant").expect("old turn"));
    assert!(marker < transcript.find("[3] user").expect("new turn"));
}

#[tokio::test]
async fn a_base_url_ending_in_v1_is_not_doubled() {
    assert_eq!(the_request_sent_to("/v1/").await.url.path(), "/v1/messages");
}

#[tokio::test]
async fn returns_the_facts_and_token_usage() {
    let server = server_answering(ResponseTemplate::new(200).set_body_json(message(ANSWER))).await;

    let extraction = extractor(&server).extract(&request()).await.expect("extraction succeeds");

    assert_eq!(extraction.facts, expected_facts());
    assert_eq!(extraction.usage, Some(Usage { input_tokens: 398, output_tokens: 41 }));
}

#[tokio::test]
async fn joins_the_text_blocks_and_skips_other_kinds() {
    let (head, tail) = ANSWER.split_at(20);
    let server = server_answering(ResponseTemplate::new(200).set_body_json(message_with(json!([
        {"type": "thinking", "thinking": "The user said their name.", "signature": "sig"},
        {"type": "text", "text": head},
        {"type": "text", "text": tail}
    ]))))
    .await;

    let extraction = extractor(&server).extract(&request()).await.expect("extraction succeeds");

    assert_eq!(extraction.facts, expected_facts());
}

#[tokio::test]
async fn accepts_an_answer_in_a_json_code_fence() {
    let fenced = format!("```json\n{ANSWER}\n```");
    let server = server_answering(ResponseTemplate::new(200).set_body_json(message(&fenced))).await;

    let extraction = extractor(&server).extract(&request()).await.expect("extraction succeeds");

    assert_eq!(extraction.facts, expected_facts());
}

#[tokio::test]
async fn too_many_requests_is_rate_limited_with_the_retry_after_delay() {
    let server = server_answering(ResponseTemplate::new(429).insert_header("retry-after", "7").set_body_json(json!({
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your rate limit"}
    })))
    .await;

    let error = extractor(&server).extract(&request()).await.expect_err("rate limited");

    assert!(
        matches!(error, ExtractError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(7)),
        "{error:?}"
    );
}

#[tokio::test]
async fn server_errors_and_overload_are_transient() {
    // 529 is Anthropic's "overloaded".
    for status in [500, 503, 529] {
        let server = server_answering(ResponseTemplate::new(status).set_body_json(json!({
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded (Alice)"}
        })))
        .await;

        let error = extractor(&server).extract(&request()).await.expect_err("server error");

        assert!(matches!(error, ExtractError::Transient(_)), "{status}: {error:?}");
        assert!(!error.to_string().contains("Alice"), "{error}");
    }
}

#[tokio::test]
async fn a_response_slower_than_the_client_timeout_is_transient() {
    let server =
        server_answering(ResponseTemplate::new(200).set_body_json(message(ANSWER)).set_delay(Duration::from_secs(3)))
            .await;

    let error = extractor(&server).extract(&request()).await.expect_err("timed out");

    assert!(matches!(error, ExtractError::Transient(_)), "{error:?}");
}

#[tokio::test]
async fn malformed_model_output_is_malformed_and_never_quoted() {
    for text in [
        "Here are the facts: Name is Alice",
        r#"{"facts": "Alice"}"#,
        r#"{"facts": [{"fact": "Name is Alice", "score": 1.5}]}"#,
        r#"{"facts": [{"fact": "Name is Alice", "score": 0.9, "Alice": true}]}"#,
        // Cut short, though not at max_tokens (that one is `Truncated`).
        r#"{"facts": [{"fact": "Name is Alice", "sco"#,
    ] {
        let server = server_answering(ResponseTemplate::new(200).set_body_json(message(text))).await;

        let error = extractor(&server).extract(&request()).await.expect_err("malformed");

        assert!(matches!(error, ExtractError::Malformed(_)), "{text}: {error:?}");
        assert!(!error.to_string().contains("Alice"), "{text}: {error}");
    }
}

#[tokio::test]
async fn the_answer_is_a_forced_tool_call_whose_input_schema_is_its_shape() {
    let input: Value = serde_json::from_str(ANSWER).expect("json");
    let server = server_answering(ResponseTemplate::new(200).set_body_json(message_with(json!([
        {"type": "text", "text": "Recording the facts."},
        {"type": "tool_use", "id": "toolu_1", "name": "record_facts", "input": input}
    ]))))
    .await;

    let extraction = extractor(&server).extract(&request()).await.expect("extraction succeeds");

    assert_eq!(extraction.facts, expected_facts());
    let sent: Value =
        serde_json::from_slice(&server.received_requests().await.expect("recorded")[0].body).expect("json");
    assert_eq!(sent["tool_choice"], json!({"type": "tool", "name": "record_facts"}));
    assert_eq!(sent["tools"][0]["name"], "record_facts");
    assert_eq!(sent["tools"][0]["input_schema"]["required"], json!(["facts"]));
}

#[tokio::test]
async fn an_answer_cut_at_max_tokens_is_truncated_not_malformed() {
    let mut body = message(r#"{"facts": [{"fact": "Name is Alice", "sco"#);
    body["stop_reason"] = json!("max_tokens");
    let server = server_answering(ResponseTemplate::new(200).set_body_json(body)).await;

    let error = extractor(&server).extract(&request()).await.expect_err("truncated");

    assert!(matches!(error, ExtractError::Truncated), "{error:?}");
}

#[tokio::test]
async fn a_body_that_is_not_a_message_is_malformed() {
    for body in [
        ResponseTemplate::new(200).set_body_string("<html>Alice</html>"),
        ResponseTemplate::new(200).set_body_json(json!({"completion": "Alice"})),
        ResponseTemplate::new(200).set_body_json(message_with(json!([]))),
    ] {
        let server = server_answering(body).await;

        let error = extractor(&server).extract(&request()).await.expect_err("malformed");

        assert!(matches!(error, ExtractError::Malformed(_)), "{error:?}");
        assert!(!error.to_string().contains("Alice"), "{error}");
    }
}

#[tokio::test]
async fn a_rejected_key_is_fatal_and_the_key_is_never_shown() {
    for status in [401, 403] {
        let server = server_answering(ResponseTemplate::new(status).set_body_json(json!({
            "type": "error",
            "error": {"type": "authentication_error", "message": format!("invalid x-api-key {API_KEY}")}
        })))
        .await;

        let error = extractor(&server).extract(&request()).await.expect_err("rejected");

        assert!(matches!(error, ExtractError::Fatal(_)), "{status}: {error:?}");
        assert!(error.to_string().contains("API key"), "{error}");
        assert!(!error.to_string().contains(API_KEY), "{error}");
        assert!(!format!("{error:?}").contains(API_KEY), "{error:?}");
    }
}

#[tokio::test]
async fn other_client_errors_are_fatal_with_the_status_only() {
    let server = server_answering(ResponseTemplate::new(400).set_body_json(json!({
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: My name is Alice"}
    })))
    .await;

    let error = extractor(&server).extract(&request()).await.expect_err("rejected");

    assert!(matches!(error, ExtractError::Fatal(_)), "{error:?}");
    assert_eq!(error.to_string(), "provider refused the request: HTTP 400");
}
