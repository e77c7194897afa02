//! Background extraction over HTTP: a conversation ends, a job runs, facts appear and
//! the next memory context holds them; LLM providers against a local server that speaks
//! their wire protocol, including its failures.

use std::time::Duration;

use crate::common::{
    llm::{openai_reply, spawn_extracting},
    *,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use wiremock::{
    Mock, MockServer, ResponseTemplate,
    matchers::{body_partial_json, header, method, path},
};

on_both_backends!(
    ended_conversation_yields_facts_with_provenance_and_memory_context,
    nothing_is_queued_without_memory_turns_or_consent,
    openai_request_shape_and_confidence_filter,
    anthropic_request_shape,
    rate_limit_is_retried_after_retry_after_then_dead,
    server_errors_timeouts_and_malformed_output_end_dead_while_api_answers,
    retry_of_a_dead_job_succeeds,
    refused_user_is_never_sent_to_the_llm,
    consent_refusal_cancels_queued_jobs,
    extraction_fills_only_the_room_manual_facts_leave,
    finished_jobs_are_deleted_after_their_retention,
    shutdown_releases_the_lease_of_a_running_job,
);

const ALICE_TURNS: [&str; 3] = ["Hi! My name is Alice.", "I live in Paris.", "I prefer tea over coffee, honestly."];

async fn facts_of(app: &TestApp, agent_id: &str, user: &str) -> Vec<Value> {
    let (status, page) = app.get(&format!("/api/agents/{agent_id}/users/{}/facts", enc(user)), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["items"].as_array().cloned().unwrap_or_default()
}

fn texts(facts: &[Value]) -> Vec<String> {
    facts.iter().map(|f| f["fact"].as_str().unwrap_or_default().to_string()).collect()
}

async fn ended_conversation_yields_facts_with_provenance_and_memory_context(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--job-poll-ms", "50"]).await;
    let (conversation_id, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    let job = job_reaching(&app, &job_id(&ended), &["succeeded"], Duration::from_secs(20)).await;
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["conversation_id"], conversation_id.as_str());

    let facts = facts_of(&app, "concierge", "alice").await;
    let stored = texts(&facts);
    for expected in ["Name is Alice", "Lives in Paris", "Prefers tea over coffee"] {
        assert!(stored.iter().any(|f| f == expected), "missing {expected:?} in {stored:?}");
    }
    assert_eq!(job["facts_added"], facts.len());
    for fact in &facts {
        assert_eq!(fact["source"], "extracted");
        assert_eq!(fact["conversation_id"], conversation_id.as_str());
        assert!(fact["score"].as_f64().is_some_and(|s| s >= 0.7), "{fact}");
    }

    // The next conversation starts with the agent already knowing the user.
    let (status, context) = app.get("/api/agents/concierge/users/alice/memory-context", &agent("acme")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(context["enabled"], true);
    let prompt = context["prompt"].as_str().unwrap_or_default();
    assert!(prompt.starts_with("<user-memory>\n") && prompt.ends_with("\n</user-memory>"), "{prompt}");
    for expected in ["- Name is Alice", "- Lives in Paris", "- Prefers tea over coffee"] {
        assert!(prompt.lines().any(|l| l == expected), "{expected:?} not in {prompt}");
    }

    app.assert_metrics(&[
        "engram_jobs{status=\"succeeded\"}",
        "engram_facts_added_total{extractor=\"builtin\"}",
        "engram_job_duration_seconds_count{kind=\"extract_facts\",extractor=\"builtin\"}",
    ])
    .await;

    // Ending again finds nothing new, and a second extraction would add no duplicates.
    let (_, again) = app.post(&format!("/api/conversations/{conversation_id}/end"), &agent("acme"), json!({})).await;
    assert_eq!(again["extraction"], json!({"queued": false, "reason": "nothing_new"}));
}

async fn nothing_is_queued_without_memory_turns_or_consent(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // Memory never enabled.
    let (_, ended) = converse(&app, "quiet-bot", "bob", &ALICE_TURNS).await;
    assert_eq!(ended["extraction"], json!({"queued": false, "reason": "memory_disabled"}));
    app.enable_memory("acme", "concierge").await;
    // Two user turns where three are needed.
    let (_, ended) = converse(&app, "concierge", "bob", &ALICE_TURNS[..2]).await;
    assert_eq!(ended["extraction"], json!({"queued": false, "reason": "too_few_user_turns"}));
    // Consent refused.
    app.put("/api/users/carol/consent", &agent("acme"), json!({"ai_consent": false})).await;
    let (_, ended) = converse(&app, "concierge", "carol", &ALICE_TURNS).await;
    assert_eq!(ended["extraction"], json!({"queued": false, "reason": "consent_refused"}));
    let (_, jobs) = app.get("/api/jobs", &admin("acme")).await;
    assert_eq!(jobs["items"], json!([]), "no job may be queued");
}

fn facts_json() -> String {
    json!({"operations": [
        {"op": "add", "fact": "Name is Alice", "score": 0.95, "tags": ["identity"]},
        {"op": "add", "fact": "Might like jazz", "score": 0.3},
        {"op": "add", "fact": "Lives in Paris", "score": 0.9}
    ]})
    .to_string()
}

async fn openai_request_shape_and_confidence_filter(backend: Backend) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-test-secret-key"))
        .and(body_partial_json(json!({"model": "test-model", "response_format": {"type": "json_schema"}})))
        .respond_with(openai_reply(&facts_json()))
        .expect(1)
        .mount(&server)
        .await;
    let app = spawn_extracting(backend, "openai", &server, &[]).await;
    app.put("/api/agents-config/concierge", &admin("acme"), json!({"extraction_instructions": "Focus on food."})).await;
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    let job = job_reaching(&app, &job_id(&ended), &["succeeded"], Duration::from_secs(20)).await;
    assert_eq!(job["facts_added"], 2);
    let mut stored = texts(&facts_of(&app, "concierge", "alice").await);
    stored.sort();
    assert_eq!(stored, ["Lives in Paris", "Name is Alice"], "the 0.3 fact is under min_confidence");

    let requests = server.received_requests().await.unwrap_or_default();
    let body: Value = serde_json::from_slice(&requests[0].body).expect("json request");
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let transcript = body["messages"][1]["content"].as_str().unwrap_or_default();
    assert!(system.contains("Focus on food."), "operator instructions are appended");
    assert!(transcript.contains("My name is Alice"), "the user's words are sent");
    assert_eq!(body["messages"][0]["role"], "system");
}

async fn anthropic_request_shape(backend: Backend) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "sk-test-secret-key"))
        .and(header("anthropic-version", "2023-06-01"))
        .and(body_partial_json(json!({"model": "test-model"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "test-model",
            "content": [{"type": "text", "text": facts_json()}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 100, "output_tokens": 20}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let app = spawn_extracting(backend, "anthropic", &server, &[]).await;
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    let job = job_reaching(&app, &job_id(&ended), &["succeeded"], Duration::from_secs(20)).await;
    assert_eq!(job["facts_added"], 2);
    let metrics = app.metrics().await;
    assert!(metrics.contains("engram_llm_calls_total{provider=\"anthropic\",outcome=\"ok\"}"), "{metrics}");
    assert!(!metrics.contains("sk-test-secret-key"));
}

async fn rate_limit_is_retried_after_retry_after_then_dead(backend: Backend) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .mount(&server)
        .await;
    // Without the builtin fallback, which would store facts on the last attempt.
    let app = spawn_extracting(backend, "openai", &server, &["--llm-fallback", "none"]).await;
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    let started = std::time::Instant::now();
    let job = job_reaching(&app, &job_id(&ended), &["dead"], Duration::from_secs(30)).await;
    assert_eq!(job["attempts"], 3);
    assert!(job["last_error"].as_str().unwrap_or_default().contains("rate limited"), "{job}");
    // Three attempts with Retry-After: 1 between them take at least two seconds, where
    // the 50 ms backoff alone would take a fraction of one.
    assert!(started.elapsed() >= Duration::from_secs(2), "Retry-After was not honoured");
    assert_eq!(server.received_requests().await.unwrap_or_default().len(), 3);
    assert!(facts_of(&app, "concierge", "alice").await.is_empty());
}

async fn server_errors_timeouts_and_malformed_output_end_dead_while_api_answers(backend: Backend) {
    let failures = [
        ("500", ResponseTemplate::new(500).set_body_string("upstream exploded"), "unavailable"),
        ("timeout", openai_reply(&facts_json()).set_delay(Duration::from_secs(3)), "unavailable"),
        ("malformed", openai_reply("Sure! Alice lives in Paris."), "malformed"),
    ];
    for (name, response, error_kind) in failures {
        let server = MockServer::start().await;
        Mock::given(method("POST")).respond_with(response).mount(&server).await;
        // As before the builtin fallback (`tests/api/llm_fallback.rs`), which is off here.
        let app = spawn_extracting(backend, "openai", &server, &["--llm-fallback", "none"]).await;
        let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
        let id = job_id(&ended);
        // The API keeps answering while the extractor fails.
        let (status, _) = app.get("/api/agents-config/concierge", &admin("acme")).await;
        assert_eq!(status, StatusCode::OK, "{name}");
        let job = job_reaching(&app, &id, &["dead"], Duration::from_secs(30)).await;
        assert_eq!(job["attempts"], 3, "{name}: {job}");
        let error = job["last_error"].as_str().unwrap_or_default();
        assert!(error.contains(error_kind), "{name}: {error}");
        assert!(!error.contains("Alice") && !error.contains("Paris"), "{name}: personal data in last_error: {error}");
        assert!(!error.contains("sk-test"), "{name}: secret in last_error");
        assert!(facts_of(&app, "concierge", "alice").await.is_empty(), "{name}");
    }
}

async fn retry_of_a_dead_job_succeeds(backend: Backend) {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(503)).mount(&server).await;
    let app = spawn_extracting(backend, "openai", &server, &["--llm-fallback", "none"]).await;
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    let id = job_id(&ended);
    job_reaching(&app, &id, &["dead"], Duration::from_secs(30)).await;
    let started = || app.db.rows::<(chrono::DateTime<chrono::Utc>,)>("SELECT started_at FROM jobs");
    let first_started = started().await;

    server.reset().await;
    Mock::given(method("POST")).respond_with(openai_reply(&facts_json())).mount(&server).await;
    let (status, body) = app.post(&format!("/api/jobs/{id}/retry"), &admin("acme"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "queued");
    let job = job_reaching(&app, &id, &["succeeded"], Duration::from_secs(20)).await;
    assert_eq!(job["facts_added"], 2);
    assert_eq!(job["last_error"], Value::Null);
    // A manual retry starts the job's time budget afresh.
    assert!(started().await[0].0 > first_started[0].0, "started_at was not reset by the retry");

    let (status, body) = app.post(&format!("/api/jobs/{id}/retry"), &admin("acme"), json!({})).await;
    assert_error(status, &body, StatusCode::CONFLICT, "conflict");
    let (status, _) = app.post(&format!("/api/jobs/{id}/retry"), &admin("globex"), json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.post(&format!("/api/jobs/{id}/retry"), &agent("acme"), json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

async fn refused_user_is_never_sent_to_the_llm(backend: Backend) {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(openai_reply(&facts_json())).expect(0).mount(&server).await;
    let app = spawn_extracting(backend, "openai", &server, &[]).await;
    app.put("/api/users/alice/consent", &agent("acme"), json!({"ai_consent": false})).await;
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    assert_eq!(ended["extraction"]["reason"], "consent_refused");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(server.received_requests().await.unwrap_or_default().is_empty());
}

async fn consent_refusal_cancels_queued_jobs(backend: Backend) {
    // No workers: the job stays queued until consent is refused.
    let app = TestApp::spawn_with_memory(backend, &["--workers", "0"]).await;
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    let id = job_id(&ended);
    let (_, job) = app.get(&format!("/api/jobs/{id}"), &admin("acme")).await;
    assert_eq!(job["status"], "queued");
    app.put("/api/users/alice/consent", &agent("acme"), json!({"ai_consent": false})).await;
    let (_, job) = app.get(&format!("/api/jobs/{id}"), &admin("acme")).await;
    assert_eq!(job["status"], "cancelled", "{job}");
}

async fn extraction_fills_only_the_room_manual_facts_leave(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--job-poll-ms", "50", "--max-facts-per-user", "3"]).await;
    let path = "/api/agents/concierge/users/alice/facts";
    let (status, _) = app.post(path, &agent("acme"), json!({"fact": "Owns a bicycle"})).await;
    assert_eq!(status, StatusCode::CREATED);
    // A fact the agent's model remembered through a tool is curated like a manual one.
    let arguments = json!({"agent_id": "concierge", "external_ref": "alice", "fact": "Plays chess"});
    let (status, fact) =
        app.post("/api/tools/call", &agent("acme"), json!({"name": "remember", "arguments": arguments})).await;
    assert_eq!((status, fact["source"].as_str()), (StatusCode::OK, Some("agent")), "{fact}");
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    let job = job_reaching(&app, &job_id(&ended), &["succeeded"], Duration::from_secs(20)).await;
    // Manual and agent facts are never evicted (tests/curated_facts.rs): one place is left.
    assert_eq!(job["facts_added"], 1);
    let stored = texts(&facts_of(&app, "concierge", "alice").await);
    assert_eq!(stored.len(), 3, "{stored:?}");
    assert!(stored.iter().any(|f| f == "Owns a bicycle") && stored.iter().any(|f| f == "Plays chess"), "{stored:?}");
}

async fn finished_jobs_are_deleted_after_their_retention(backend: Backend) {
    let app = TestApp::spawn_with_memory(
        backend,
        &["--job-poll-ms", "50", "--job-retention-secs", "1", "--sweep-interval-secs", "1"],
    )
    .await;
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    let id = job_id(&ended);
    job_reaching(&app, &id, &["succeeded"], Duration::from_secs(20)).await;
    let gone = eventually(Duration::from_secs(10), || async {
        let (status, _) = app.get(&format!("/api/jobs/{id}"), &admin("acme")).await;
        (status == StatusCode::NOT_FOUND).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the finished job was kept past its retention");
    assert_eq!(facts_of(&app, "concierge", "alice").await.len(), 3, "its facts stay");
}

async fn shutdown_releases_the_lease_of_a_running_job(backend: Backend) {
    let (mut app, llm) = spawn_with_blocking_llm(backend, &["--shutdown-grace-secs", "1"]).await;
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    let id = job_id(&ended);
    llm.called().await;
    // The LLM never answers: shutdown must give the job back rather than hang or lose it.
    tokio::time::timeout(Duration::from_secs(15), app.stop()).await.expect("shutdown finishes");
    let after = TestApp::start(app.db.clone(), vec!["--workers".into(), "0".into()]).await;
    let (_, job) = after.get(&format!("/api/jobs/{id}"), &admin("acme")).await;
    assert_eq!(job["status"], "queued", "{job}");
    assert_eq!(job["attempts"], 0, "an interrupted attempt is not counted: {job}");
}
