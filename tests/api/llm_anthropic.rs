//! The Anthropic extractor against a local server speaking the Messages API: request shape,
//! success, rate limits, outages, timeouts and malformed output.

use engram::extract::anthropic::Anthropic;
use engram::extract::{ExtractError, Extraction, Usage};
use serde_json::{Value, json};

use crate::common::llm::{
    ANSWER, assert_malformed_unquoted, assert_rate_limited_for_7s, assert_refusals_are_fatal, assert_timed_out,
    assert_transcript, assert_transient_unquoted, client, expected_facts, first_body, request, slower_than_the_client,
};
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

/// What the extractor makes of a server answering `response`.
async fn extraction_from(response: ResponseTemplate) -> Result<Extraction, ExtractError> {
    extractor(&server_answering(response).await).extract(&request(), &[]).await
}

/// An error as the Messages API words it.
fn error_body(status: u16, message: &str) -> Value {
    let kind = if status == 400 { "invalid_request_error" } else { "authentication_error" };
    json!({"type": "error", "error": {"type": kind, "message": message}})
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
    extractor_at(format!("{}{suffix}", server.uri())).extract(&request(), &[]).await.expect("extraction succeeds");
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
    assert_eq!(body["max_tokens"], 384);
    assert_eq!(body["temperature"].as_f64(), Some(0.0));
    let system = body["system"].as_str().expect("system prompt");
    assert!(system.contains("Additional guidance from the operator:\nIgnore anything about pets."));
    let messages = body["messages"].as_array().expect("messages array");
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["role"], "user");
    assert_transcript(messages[0]["content"].as_str().expect("transcript"));
}

#[tokio::test]
async fn a_base_url_ending_in_v1_is_not_doubled() {
    assert_eq!(the_request_sent_to("/v1/").await.url.path(), "/v1/messages");
}

#[tokio::test]
async fn returns_the_facts_and_token_usage() {
    let extraction =
        extraction_from(ResponseTemplate::new(200).set_body_json(message(ANSWER))).await.expect("extraction succeeds");

    assert_eq!(extraction.facts, expected_facts());
    assert_eq!(extraction.usage, Some(Usage { input_tokens: 398, output_tokens: 41 }));
}

#[tokio::test]
async fn joins_the_text_blocks_and_skips_other_kinds() {
    let (head, tail) = ANSWER.split_at(20);
    let extraction = extraction_from(ResponseTemplate::new(200).set_body_json(message_with(json!([
        {"type": "thinking", "thinking": "The user said their name.", "signature": "sig"},
        {"type": "text", "text": head},
        {"type": "text", "text": tail}
    ]))))
    .await
    .expect("extraction succeeds");

    assert_eq!(extraction.facts, expected_facts());
}

#[tokio::test]
async fn accepts_an_answer_in_a_json_code_fence() {
    let fenced = format!("```json\n{ANSWER}\n```");
    let extraction =
        extraction_from(ResponseTemplate::new(200).set_body_json(message(&fenced))).await.expect("extraction succeeds");

    assert_eq!(extraction.facts, expected_facts());
}

#[tokio::test]
async fn too_many_requests_is_rate_limited_with_the_retry_after_delay() {
    let error = extraction_from(ResponseTemplate::new(429).insert_header("retry-after", "7").set_body_json(json!({
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your rate limit"}
    })))
    .await
    .expect_err("rate limited");

    assert_rate_limited_for_7s(&error);
}

#[tokio::test]
async fn server_errors_overload_and_timeouts_are_transient() {
    // 529 is Anthropic's "overloaded".
    for status in [500, 503, 529] {
        let error = extraction_from(ResponseTemplate::new(status).set_body_json(json!({
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded (Alice)"}
        })))
        .await
        .expect_err("server error");

        assert_transient_unquoted(&error, &format!("HTTP {status}"));
    }
    // An answer after the client's timeout.
    let error = extraction_from(slower_than_the_client(message(ANSWER))).await.expect_err("timed out");
    assert_timed_out(&error);
}

#[tokio::test]
async fn malformed_model_output_is_malformed_and_never_quoted() {
    for text in [
        "Here are the facts: Name is Alice",
        r#"{"operations": "Alice"}"#,
        r#"{"operations": [{"op": "add", "fact": "Name is Alice", "score": 1.5}]}"#,
        r#"{"operations": [{"op": "add", "fact": "Name is Alice", "score": 0.9, "Alice": true}]}"#,
        // Cut short, though not at max_tokens (that one is `Truncated`).
        r#"{"operations": [{"op": "add", "fact": "Name is Alice", "sco"#,
    ] {
        let error =
            extraction_from(ResponseTemplate::new(200).set_body_json(message(text))).await.expect_err("malformed");

        assert_malformed_unquoted(&error, text);
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

    let extraction = extractor(&server).extract(&request(), &[]).await.expect("extraction succeeds");

    assert_eq!(extraction.facts, expected_facts());
    let sent = first_body(&server).await;
    assert_eq!(sent["tool_choice"], json!({"type": "tool", "name": "record_facts"}));
    assert_eq!(sent["tools"][0]["name"], "record_facts");
    assert_eq!(sent["tools"][0]["input_schema"]["required"], json!(["operations"]));
}

#[tokio::test]
async fn an_answer_cut_at_max_tokens_keeps_its_complete_operations() {
    for (text, kept) in [
        (r#"{"operations": [{"op": "add", "fact": "Name is Alice", "sco"#, None),
        (
            r#"{"operations": [{"op": "add", "fact": "Name is Alice", "score": 0.95, "tags": ["identity"]}, {"op"#,
            Some(1),
        ),
    ] {
        let mut body = message(text);
        body["stop_reason"] = json!("max_tokens");
        let answer = extraction_from(ResponseTemplate::new(200).set_body_json(body)).await;

        match (answer, kept) {
            (Err(error), None) => assert!(matches!(error, ExtractError::Truncated), "{error:?}"),
            (Ok(extraction), Some(n)) => assert_eq!(extraction.facts, expected_facts()[..n]),
            (other, _) => panic!("{text}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_body_that_is_not_a_message_is_malformed() {
    for body in [
        ResponseTemplate::new(200).set_body_string("<html>Alice</html>"),
        ResponseTemplate::new(200).set_body_json(json!({"completion": "Alice"})),
        ResponseTemplate::new(200).set_body_json(message_with(json!([]))),
    ] {
        let error = extraction_from(body).await.expect_err("malformed");

        assert_malformed_unquoted(&error, "a body of another shape");
    }
}

#[tokio::test]
async fn refusals_are_fatal_and_never_show_the_key_or_the_person() {
    assert_refusals_are_fatal(extraction_from, error_body, API_KEY).await;
}
