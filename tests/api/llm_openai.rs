//! The OpenAI-compatible extractor against a local server speaking the chat completions
//! protocol: request shape, success, rate limits, outages, timeouts and malformed output.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use engram::extract::ResponseFormatKind;
use engram::extract::openai::OpenAi;
use engram::extract::{ExtractError, Extraction, Usage};
use serde_json::{Value, json};

use crate::common::llm::{
    ANSWER, assert_malformed_unquoted, assert_rate_limited_for_7s, assert_refusals_are_fatal, assert_timed_out,
    assert_transcript, assert_transient_unquoted, client, expected_facts, first_body, request, slower_than_the_client,
};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const API_KEY: &str = "sk-test-5ecret";

fn extractor(server: &MockServer) -> OpenAi {
    OpenAi::new(client(), format!("{}/v1", server.uri()), Some(API_KEY.to_owned()), "gpt-test".to_owned())
}

/// A chat completion whose assistant message says `content`, as OpenAI sends it.
fn completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": null},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 412, "completion_tokens": 37, "total_tokens": 449}
    })
}

/// What the extractor makes of a server answering `response`.
async fn extraction_from(response: ResponseTemplate) -> Result<Extraction, ExtractError> {
    extractor(&server_answering(response).await).extract(&request(), &[]).await
}

/// An error as the OpenAI API words it.
fn error_body(_status: u16, message: &str) -> Value {
    json!({"error": {"message": message, "type": "invalid_request_error", "code": null}})
}

async fn server_answering(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(response).mount(&server).await;
    server
}

#[tokio::test]
async fn sends_a_chat_completion_request_in_json_mode() {
    let server = server_answering(ResponseTemplate::new(200).set_body_json(completion(ANSWER))).await;
    // A trailing slash on the base URL must not double up in the path.
    let extractor =
        OpenAi::new(client(), format!("{}/v1/", server.uri()), Some(API_KEY.to_owned()), "gpt-test".to_owned());

    extractor.extract(&request(), &[]).await.expect("extraction succeeds");

    let received = server.received_requests().await.expect("recording is on");
    assert_eq!(received.len(), 1);
    let sent = &received[0];
    assert_eq!(sent.url.path(), "/v1/chat/completions");
    assert_eq!(sent.headers.get("authorization").and_then(|v| v.to_str().ok()), Some("Bearer sk-test-5ecret"));
    assert_eq!(sent.headers.get("content-type").and_then(|v| v.to_str().ok()), Some("application/json"));
    let body: Value = serde_json::from_slice(&sent.body).expect("JSON body");
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["temperature"].as_f64(), Some(0.0));
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    let messages = body["messages"].as_array().expect("messages array");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "system");
    let system = messages[0]["content"].as_str().expect("system prompt");
    assert!(system.contains("Additional guidance from the operator:\nIgnore anything about pets."));
    assert!(system.contains("JSON"));
    assert_eq!(messages[1]["role"], "user");
    assert_transcript(messages[1]["content"].as_str().expect("transcript"));
}

#[tokio::test]
async fn sends_no_authorization_header_without_a_key() {
    let server = server_answering(ResponseTemplate::new(200).set_body_json(completion(ANSWER))).await;
    let extractor = OpenAi::new(client(), format!("{}/v1", server.uri()), None, "llama3".to_owned());

    extractor.extract(&request(), &[]).await.expect("extraction succeeds");

    let received = server.received_requests().await.expect("recording is on");
    assert!(received[0].headers.get("authorization").is_none());
}

#[tokio::test]
async fn returns_the_facts_and_token_usage() {
    let extraction = extraction_from(ResponseTemplate::new(200).set_body_json(completion(ANSWER)))
        .await
        .expect("extraction succeeds");

    assert_eq!(extraction.facts, expected_facts());
    assert_eq!(extraction.usage, Some(Usage { input_tokens: 412, output_tokens: 37 }));
}

#[tokio::test]
async fn usage_is_optional() {
    let mut body = completion(ANSWER);
    body.as_object_mut().expect("object").remove("usage");
    let extraction =
        extraction_from(ResponseTemplate::new(200).set_body_json(body)).await.expect("extraction succeeds");

    assert_eq!(extraction.facts, expected_facts());
    assert_eq!(extraction.usage, None);
}

#[tokio::test]
async fn accepts_an_answer_in_a_json_code_fence() {
    let fenced = format!("```json\n{ANSWER}\n```");
    let extraction = extraction_from(ResponseTemplate::new(200).set_body_json(completion(&fenced)))
        .await
        .expect("extraction succeeds");

    assert_eq!(extraction.facts, expected_facts());
}

#[tokio::test]
async fn too_many_requests_is_rate_limited_with_the_retry_after_delay() {
    let error = extraction_from(
        ResponseTemplate::new(429)
            .insert_header("retry-after", "7")
            .set_body_json(json!({"error": {"message": "Rate limit reached", "type": "requests"}})),
    )
    .await
    .expect_err("rate limited");

    assert_rate_limited_for_7s(&error);
}

#[tokio::test]
async fn server_errors_and_timeouts_are_transient() {
    for status in [500, 502, 503, 408] {
        let error =
            extraction_from(ResponseTemplate::new(status).set_body_string("Alice")).await.expect_err("server error");

        assert_transient_unquoted(&error, &format!("HTTP {status}"));
        assert!(error.to_string().contains(&status.to_string()), "{error}");
    }
    // An answer after the client's timeout: told apart, with how long the call waited.
    let error = extraction_from(slower_than_the_client(completion(ANSWER))).await.expect_err("timed out");
    assert_timed_out(&error);
}

#[tokio::test]
async fn an_unreachable_server_is_transient() {
    // Bind a port, then free it, so nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let extractor =
        OpenAi::new(client(), format!("http://127.0.0.1:{port}/v1"), Some(API_KEY.to_owned()), "gpt-test".to_owned());

    let error = extractor.extract(&request(), &[]).await.expect_err("nothing listens");

    assert!(matches!(error, ExtractError::Transient(_)), "{error:?}");
}

#[tokio::test]
async fn malformed_model_output_is_malformed_and_never_quoted() {
    for content in [
        "Name is Alice",
        r#"{"operations": "Alice"}"#,
        r#"[{"op": "add", "fact": "Name is Alice", "score": 0.9}]"#,
        // Not one entry of the right shape.
        r#"{"operations": [{"op": "add", "fact": "Name is Alice", "score": 1.5}]}"#,
        r#"{"operations": [{"op": "add", "fact": "Name is Alice", "score": 0.9, "Alice": true}]}"#,
        r#"{"operations": [{"op": "add", "fact": "Name is Alice", "score": 0.9}], "note": "Alice"}"#,
    ] {
        let error = extraction_from(ResponseTemplate::new(200).set_body_json(completion(content)))
            .await
            .expect_err("malformed");

        assert_malformed_unquoted(&error, content);
    }
}

/// The body an extraction sent with response format `kind`.
async fn sent_with(kind: ResponseFormatKind) -> Value {
    let server = server_answering(ResponseTemplate::new(200).set_body_json(completion(ANSWER))).await;
    extractor(&server).with_response_format(kind).extract(&request(), &[]).await.expect("extraction succeeds");
    first_body(&server).await
}

#[tokio::test]
async fn asks_for_the_answer_schema_where_the_server_takes_one() {
    let sent = sent_with(ResponseFormatKind::JsonSchema).await;
    let format = &sent["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["strict"], true);
    assert_eq!(format["json_schema"]["schema"]["required"], json!(["operations"]));
    assert_eq!(
        format["json_schema"]["schema"]["properties"]["operations"]["items"]["required"],
        json!(["op", "id", "fact", "score", "tags"])
    );
}

/// A llama.cpp-like server: a 500 for a `json_schema` response format, an answer otherwise.
async fn server_refusing_schemas(status: u16) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(wiremock::matchers::body_partial_json(json!({"response_format": {"type": "json_schema"}})))
        .respond_with(ResponseTemplate::new(status).set_body_json(json!({"error": {"message": "unsupported"}})))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(ANSWER)))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_refused_schema_falls_back_to_json_mode_in_the_same_attempt_and_for_good() {
    for status in [400, 422, 500] {
        let server = server_refusing_schemas(status).await;
        let extractor = extractor(&server).with_response_format(ResponseFormatKind::JsonSchema);

        let first = extractor.extract(&request(), &[]).await.unwrap_or_else(|e| panic!("HTTP {status}: {e}"));
        let second = extractor.extract(&request(), &[]).await.expect("second extraction");

        assert_eq!(first.facts, expected_facts());
        assert_eq!(second.facts, expected_facts());
        let types: Vec<Value> = server
            .received_requests()
            .await
            .expect("recorded")
            .iter()
            .map(|r| serde_json::from_slice::<Value>(&r.body).expect("json")["response_format"]["type"].clone())
            .collect();
        assert_eq!(types, [json!("json_schema"), json!("json_object"), json!("json_object")], "HTTP {status}");
    }
}

#[tokio::test]
async fn llama_cpp_gets_the_schema_beside_json_mode() {
    let sent = sent_with(ResponseFormatKind::JsonObjectSchema).await;
    assert_eq!(sent["response_format"]["type"], "json_object");
    assert_eq!(sent["response_format"]["schema"]["required"], json!(["operations"]));
}

/// A completion of `content` cut at `max_tokens`.
fn cut_completion(content: &str) -> Value {
    let mut body = completion(content);
    body["choices"][0]["finish_reason"] = json!("length");
    body
}

#[tokio::test]
async fn an_answer_cut_at_max_tokens_keeps_its_complete_operations() {
    let cut = r#"{"operations": [{"op": "add", "id": null, "fact": "Name is Alice", "score": 0.95, "tags": ["identity"]}, {"op": "add", "fact": "Prefers tea ov"#;
    let server = server_answering(ResponseTemplate::new(200).set_body_json(cut_completion(cut))).await;

    let extraction = extractor(&server).with_max_tokens(200).extract(&request(), &[]).await.expect("salvaged");

    assert_eq!(extraction.facts, expected_facts()[..1], "the fact cut in half is not kept");
    assert_eq!(first_body(&server).await["max_tokens"], 200, "the completion length is bounded as configured");
}

#[tokio::test]
async fn an_answer_cut_before_its_first_operation_ended_is_truncated_not_malformed() {
    let server = server_answering(
        ResponseTemplate::new(200)
            .set_body_json(cut_completion(r#"{"operations": [{"op": "add", "fact": "Name is Alice", "sco"#)),
    )
    .await;

    let error = extractor(&server).extract(&request(), &[]).await.expect_err("truncated");

    assert!(matches!(error, ExtractError::Truncated), "{error:?}");
    assert!(error.to_string().contains("ENGRAM_LLM_MAX_TOKENS"), "{error}");
    assert_eq!(first_body(&server).await["max_tokens"], 384, "the default cap fits a small local model");
}

#[tokio::test]
async fn a_partly_wrong_answer_keeps_its_right_facts() {
    let content = r#"{"operations": [{"op": "add", "fact": "Name is Alice", "score": 0.95}, {"op": "add", "fact": "Prefers tea over coffee", "score": 3},
        {"op": "add", "fact": "Prefers tea over coffee", "score": 0.8, "tags": null}, {"op": "add", "score": 0.9}]}"#;
    let extraction =
        extraction_from(ResponseTemplate::new(200).set_body_json(completion(content))).await.expect("the right facts");

    let facts: Vec<(&str, f64)> = extraction.facts.iter().map(|f| (f.fact.as_str(), f.score)).collect();
    assert_eq!(facts, [("Name is Alice", 0.95), ("Prefers tea over coffee", 0.8)]);
}

#[tokio::test]
async fn facts_the_user_never_stated_are_dropped() {
    // A small model copying an example, and one making a fact up: neither shares a word with
    // what the user said ("My name is Alice and I prefer tea over coffee").
    let content = r#"{"operations": [{"op": "add", "fact": "Name is Alice", "score": 0.95}, {"op": "add", "fact": "Loves hiking in the Alps", "score": 0.9},
        {"op": "add", "fact": "Works as a nurse", "score": 0.9}]}"#;
    let server = server_answering(ResponseTemplate::new(200).set_body_json(completion(content))).await;

    let extraction =
        engram::extract::Extractor::OpenAi(extractor(&server)).extract(&request(), &[]).await.expect("facts");

    let facts: Vec<&str> = extraction.facts.iter().map(|f| f.fact.as_str()).collect();
    assert_eq!(facts, ["Name is Alice"]);
}

#[tokio::test]
async fn a_body_that_is_not_a_chat_completion_is_malformed() {
    for body in [
        ResponseTemplate::new(200).set_body_string("<html>Alice</html>"),
        ResponseTemplate::new(200).set_body_json(json!({"result": "Alice"})),
        ResponseTemplate::new(200).set_body_json(json!({"choices": []})),
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": "Alice"}}]
        })),
    ] {
        let error = extraction_from(body).await.expect_err("malformed");

        assert_malformed_unquoted(&error, "a body of another shape");
    }
}

#[tokio::test]
async fn refusals_are_fatal_and_never_show_the_key_or_the_person() {
    assert_refusals_are_fatal(extraction_from, error_body, API_KEY).await;
}

/// Metric cells by name and labels (`name{k=v,...}`), one per registration.
type Cells = Mutex<Vec<(String, Arc<AtomicU64>)>>;

/// Records counter totals and the number of histogram samples.
#[derive(Default)]
struct TestRecorder {
    counters: Cells,
    histograms: Cells,
}

struct CounterCell(Arc<AtomicU64>);
struct HistogramCell(Arc<AtomicU64>);

impl metrics::CounterFn for CounterCell {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::Relaxed);
    }
    fn absolute(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }
}

impl metrics::HistogramFn for HistogramCell {
    fn record(&self, _: f64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn register(cells: &Cells, key: &metrics::Key) -> Arc<AtomicU64> {
    let labels: Vec<String> = key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
    let cell = Arc::new(AtomicU64::new(0));
    cells.lock().expect("not poisoned").push((format!("{}{{{}}}", key.name(), labels.join(",")), cell.clone()));
    cell
}

fn total(cells: &Cells, name: &str) -> u64 {
    let cells = cells.lock().expect("not poisoned");
    cells.iter().filter(|(n, _)| n == name).map(|(_, c)| c.load(Ordering::Relaxed)).sum()
}

impl metrics::Recorder for TestRecorder {
    fn describe_counter(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn describe_gauge(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn describe_histogram(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}

    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(Arc::new(CounterCell(register(&self.counters, key))))
    }

    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }

    fn register_histogram(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Histogram {
        metrics::Histogram::from_arc(Arc::new(HistogramCell(register(&self.histograms, key))))
    }
}

/// The recorder is local to this thread, so the calls run on a current-thread runtime inside it.
#[test]
fn calls_are_counted_by_outcome_with_their_tokens_and_duration() {
    let recorder = TestRecorder::default();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let ok = server_answering(ResponseTemplate::new(200).set_body_json(completion(ANSWER))).await;
            let malformed = server_answering(ResponseTemplate::new(200).set_body_json(completion("not JSON"))).await;
            let limited = server_answering(ResponseTemplate::new(429)).await;
            extractor(&ok).extract(&request(), &[]).await.expect("ok");
            extractor(&malformed).extract(&request(), &[]).await.expect_err("malformed");
            extractor(&limited).extract(&request(), &[]).await.expect_err("rate limited");
        });
    });

    let calls = |outcome: &str| {
        total(&recorder.counters, &format!("engram_llm_calls_total{{provider=openai,outcome={outcome}}}"))
    };
    assert_eq!(calls("ok"), 1);
    assert_eq!(calls("malformed"), 1);
    assert_eq!(calls("rate_limited"), 1);
    // Tokens spent on the malformed answer count too.
    assert_eq!(total(&recorder.counters, "engram_llm_tokens_total{provider=openai,kind=input}"), 824);
    assert_eq!(total(&recorder.counters, "engram_llm_tokens_total{provider=openai,kind=output}"), 74);
    assert_eq!(total(&recorder.histograms, "engram_llm_call_seconds{provider=openai}"), 3);
}
