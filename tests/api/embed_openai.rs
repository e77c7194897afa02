//! The OpenAI-compatible embedder against a local server speaking the `/embeddings`
//! protocol: request shape, vectors in input order and normalised, rate limits, outages,
//! timeouts and malformed answers.

use std::time::Duration;

use engram::embed::{EmbedError, openai::OpenAi};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const API_KEY: &str = "sk-embed-5ecret";

fn embedder(server: &MockServer) -> OpenAi {
    let client = reqwest::Client::builder().timeout(Duration::from_millis(500)).build().expect("client builds");
    OpenAi::new(client, format!("{}/v1/", server.uri()), Some(API_KEY.to_owned()), "embed-test".to_owned())
}

async fn server_answering(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/embeddings")).respond_with(response).mount(&server).await;
    server
}

fn texts() -> Vec<String> {
    vec!["Ships the app on fly.io".to_owned(), "Has a daughter named Emma".to_owned()]
}

/// An embeddings response as OpenAI sends it, items deliberately out of order.
fn answer() -> Value {
    json!({
        "object": "list",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 2.0, 0.0]},
            {"object": "embedding", "index": 0, "embedding": [3.0, 0.0, 4.0]}
        ],
        "model": "embed-test",
        "usage": {"prompt_tokens": 12, "total_tokens": 12}
    })
}

#[tokio::test]
async fn sends_the_texts_and_returns_normalised_vectors_in_input_order() {
    let server = server_answering(ResponseTemplate::new(200).set_body_json(answer())).await;
    let vectors = embedder(&server).embed(&texts()).await.expect("embedded");
    assert_eq!(vectors, vec![vec![0.6, 0.0, 0.8], vec![0.0, 1.0, 0.0]]);

    let received = server.received_requests().await.expect("recording is on");
    assert_eq!(received.len(), 1);
    let body: Value = serde_json::from_slice(&received[0].body).expect("JSON body");
    assert_eq!(body, json!({"model": "embed-test", "input": texts(), "encoding_format": "float"}));
    let auth = received[0].headers.get("authorization").expect("authorization header");
    assert_eq!(auth.to_str().expect("ascii"), format!("Bearer {API_KEY}"));
}

#[tokio::test]
async fn a_rate_limit_carries_its_retry_after() {
    let server = server_answering(ResponseTemplate::new(429).insert_header("Retry-After", "7")).await;
    let error = embedder(&server).embed(&texts()).await.expect_err("rate limited");
    assert!(
        matches!(error, EmbedError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(7)),
        "{error:?}"
    );
}

#[tokio::test]
async fn server_errors_and_timeouts_are_transient_and_never_echo_the_body() {
    let server = server_answering(ResponseTemplate::new(500).set_body_string("Has a daughter named Emma")).await;
    let error = embedder(&server).embed(&texts()).await.expect_err("server error");
    assert!(matches!(&error, EmbedError::Transient(m) if m == "HTTP 500"), "{error:?}");

    let slow =
        server_answering(ResponseTemplate::new(200).set_body_json(answer()).set_delay(Duration::from_secs(3))).await;
    let error = embedder(&slow).embed(&texts()).await.expect_err("timed out");
    assert!(matches!(&error, EmbedError::Transient(m) if m.contains("timed out")), "{error:?}");
}

#[tokio::test]
async fn a_refused_key_is_fatal() {
    let server = server_answering(ResponseTemplate::new(401)).await;
    let error = embedder(&server).embed(&texts()).await.expect_err("refused");
    assert!(matches!(error, EmbedError::Fatal(_)), "{error:?}");
}

#[tokio::test]
async fn malformed_answers_are_refused() {
    let one = |index: u64, embedding: Value| json!({"index": index, "embedding": embedding});
    let cases = [
        ResponseTemplate::new(200).set_body_string("not json"),
        ResponseTemplate::new(200).set_body_json(json!({"data": [one(0, json!([1.0]))]})),
        ResponseTemplate::new(200).set_body_json(json!({"data": [one(0, json!([1.0])), one(0, json!([1.0]))]})),
        ResponseTemplate::new(200).set_body_json(json!({"data": [one(0, json!([1.0])), one(1, json!([1.0, 0.0]))]})),
        ResponseTemplate::new(200).set_body_json(json!({"data": [one(0, json!([1.0])), one(5, json!([1.0]))]})),
        ResponseTemplate::new(200).set_body_json(json!({"data": [one(0, json!([0.0])), one(1, json!([1.0]))]})),
        ResponseTemplate::new(200).set_body_json(json!({"data": [one(0, json!(["x"])), one(1, json!([1.0]))]})),
    ];
    for (i, response) in cases.into_iter().enumerate() {
        let server = server_answering(response).await;
        let error = embedder(&server).embed(&texts()).await.expect_err("malformed");
        assert!(matches!(error, EmbedError::Malformed(_)), "case {i}: {error:?}");
    }
}
