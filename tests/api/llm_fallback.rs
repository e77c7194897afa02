//! A weak or unreachable LLM must not cost a person their memory (issue 30): when the LLM
//! extractor gives up on a conversation, the builtin rules' facts are stored, marked
//! `builtin_fallback`; with `--llm-fallback none` the job goes dead as before; a partly
//! wrong or cut answer keeps its usable operations. Against a local server speaking the
//! OpenAI protocol, on both backends.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

use crate::common::{
    llm::{openai_reply, spawn_extracting},
    *,
};

on_both_backends!(
    an_llm_that_always_times_out_ends_with_the_builtin_facts_after_waiting_between_attempts,
    a_job_falls_back_when_another_try_would_overrun_its_budget,
    an_unusable_answer_falls_back_at_once,
    with_the_fallback_off_an_unusable_answer_goes_dead_as_before,
    a_partly_wrong_and_cut_answer_stores_its_usable_operations,
    fallen_back_facts_are_evicted_like_extracted_ones,
);

/// Three facts the builtin rules find ("Name is Alice", "Lives in Paris", "Prefers tea over coffee").
const ALICE_TURNS: [&str; 3] = ["Hi! My name is Alice.", "I live in Paris.", "I prefer tea over coffee, honestly."];

async fn facts_of(app: &TestApp, user: &str) -> Vec<Value> {
    let (_, page) = app.get(&format!("/api/agents/concierge/users/{user}/facts"), &agent("acme")).await;
    page["items"].as_array().cloned().unwrap_or_default()
}

/// The texts of `facts`, in alphabetical order.
fn sorted_texts(facts: &[Value]) -> Vec<String> {
    let mut texts: Vec<String> = facts.iter().filter_map(|f| f["fact"].as_str().map(str::to_owned)).collect();
    texts.sort_unstable();
    texts
}

/// The job ended `succeeded` with the builtin's facts about Alice, each marked as the
/// fallback's, and says why in its `last_error`, without her words.
#[track_caller]
fn assert_fell_back(job: &Value, facts: &[Value], conversation_id: &str, why: &str) {
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(sorted_texts(facts), ["Lives in Paris", "Name is Alice", "Prefers tea over coffee"], "{job}");
    assert_eq!(job["facts_added"], 3, "{job}");
    for fact in facts {
        assert_eq!(fact["source"], "builtin_fallback", "{fact}");
        assert_eq!(fact["conversation_id"], conversation_id, "{fact}");
    }
    let error = job["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("the LLM extractor gave up") && error.contains(why), "{why}: {error}");
    assert!(!error.contains("Alice") && !error.contains("Paris"), "personal data in last_error: {error}");
}

/// Alice's turns against an LLM slower than the 1 s timeout `spawn_extracting` sets, as a
/// small model still generating (`extra` adds flags): the job falls back to the builtin's
/// facts after asking the LLM `attempts` times. The app, and how long the job took.
async fn alice_falls_back_from_a_slow_llm(backend: Backend, extra: &[&str], attempts: usize) -> (TestApp, Duration) {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(openai_reply("{}").set_delay(Duration::from_secs(3))).mount(&server).await;
    let app = spawn_extracting(backend, "openai", &server, extra).await;
    let started = Instant::now();
    let (conversation_id, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    let job = job_reaching(&app, &job_id(&ended), &["succeeded", "dead"], Duration::from_secs(40)).await;
    let took = started.elapsed();
    assert_fell_back(&job, &facts_of(&app, "alice").await, &conversation_id, "timed out");
    assert_eq!(job["attempts"], attempts, "{job}");
    assert_eq!(server.received_requests().await.unwrap_or_default().len(), attempts);
    (app, took)
}

async fn an_llm_that_always_times_out_ends_with_the_builtin_facts_after_waiting_between_attempts(backend: Backend) {
    // Every attempt asks the LLM (the last one falls back when it fails too)…
    let (app, took) = alice_falls_back_from_a_slow_llm(backend, &[], 3).await;
    // …and none right after a timeout: three timeouts of 1 s, each of the two retries a
    // further 1 s later (the 50 ms backoff alone would add a tenth of that).
    assert!(took >= Duration::from_millis(4800), "retried at once: {took:?}");
    app.assert_metrics(&[
        "engram_jobs_finished_total{kind=\"extract_facts\",outcome=\"fallback\"}",
        "engram_llm_calls_total{provider=\"openai\",outcome=\"timed_out\"}",
    ])
    .await;
}

/// With a budget of 2 s and 1 s calls, a retry (a wait and a call) begun after the first
/// timeout would end past it: the job falls back after one attempt, though two more were
/// allowed, and ends within its budget.
async fn a_job_falls_back_when_another_try_would_overrun_its_budget(backend: Backend) {
    let (_, took) = alice_falls_back_from_a_slow_llm(backend, &["--llm-job-budget-secs", "2"], 1).await;
    // The budget, plus the moments to notice the job is done.
    assert!(took < Duration::from_millis(2900), "took {took:?}");
}

/// Answers of a weak model that nothing can be kept of: asking again would get them again.
fn unusable_answers() -> [(&'static str, ResponseTemplate, &'static str); 4] {
    let cut = json!({
        "choices": [{"index": 0, "finish_reason": "length",
            "message": {"role": "assistant", "content": r#"{"operations": [{"op": "add", "fact": "Name is Al"#}}]
    });
    [
        ("prose", openai_reply("Sure! Alice lives in Paris."), "malformed"),
        (
            "wrong shapes",
            openai_reply(
                r#"{"operations": [{"op": "remember", "fact": "Name is Alice"}, {"fact": "Lives in Paris", "score": 2}]}"#,
            ),
            "none of the 2 operations is usable",
        ),
        ("cut", ResponseTemplate::new(200).set_body_json(cut), "truncated"),
        (
            "invented",
            openai_reply(r#"{"operations": [{"op": "add", "fact": "Name is <statement>", "score": 0.9}]}"#),
            "none of the 1 facts",
        ),
    ]
}

async fn an_unusable_answer_falls_back_at_once(backend: Backend) {
    for (name, answer, why) in unusable_answers() {
        let server = MockServer::start().await;
        Mock::given(method("POST")).respond_with(answer).mount(&server).await;
        let app = spawn_extracting(backend, "openai", &server, &[]).await;
        let (conversation_id, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;

        let job = job_reaching(&app, &job_id(&ended), &["succeeded", "dead"], Duration::from_secs(20)).await;

        assert_fell_back(&job, &facts_of(&app, "alice").await, &conversation_id, why);
        assert_eq!(job["attempts"], 1, "{name}: {job}");
        assert_eq!(server.received_requests().await.unwrap_or_default().len(), 1, "{name}");
    }
}

async fn with_the_fallback_off_an_unusable_answer_goes_dead_as_before(backend: Backend) {
    let [_, (_, answer, _), ..] = unusable_answers();
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(answer).mount(&server).await;
    let app = spawn_extracting(backend, "openai", &server, &["--llm-fallback", "none"]).await;
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;

    let job = job_reaching(&app, &job_id(&ended), &["succeeded", "dead"], Duration::from_secs(30)).await;

    assert_eq!((job["status"].as_str(), job["attempts"].as_i64()), (Some("dead"), Some(3)), "{job}");
    assert!(job["last_error"].as_str().unwrap_or_default().contains("none of the 2 operations is usable"), "{job}");
    assert!(facts_of(&app, "alice").await.is_empty());
}

async fn a_partly_wrong_and_cut_answer_stores_its_usable_operations(backend: Backend) {
    // A good add, an unknown operation, a score out of range, a fact not in the user's words,
    // another good add, and one cut in half at the completion limit.
    let content = r#"{"operations": [{"op": "add", "id": null, "fact": "Name is Alice", "score": 0.95, "tags": ["identity"]}, {"op": "remember", "fact": "Likes Paris"}, {"op": "add", "fact": "Lives in Paris", "score": 9}, {"op": "add", "fact": "Works as a nurse", "score": 0.9}, {"op": "add", "id": null, "fact": "Prefers tea over coffee", "score": 0.9, "tags": []}, {"op": "add", "id": null, "fact": "Lives in Pa"#;
    let answer = json!({"choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": content}}]});
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200).set_body_json(answer)).mount(&server).await;
    let app = spawn_extracting(backend, "openai", &server, &[]).await;
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;

    let job = job_reaching(&app, &job_id(&ended), &["succeeded", "dead"], Duration::from_secs(20)).await;

    assert_eq!((job["status"].as_str(), job["attempts"].as_i64()), (Some("succeeded"), Some(1)), "{job}");
    assert_eq!(job["last_error"], Value::Null, "the LLM's answer was used: {job}");
    let facts = facts_of(&app, "alice").await;
    assert_eq!(sorted_texts(&facts), ["Name is Alice", "Prefers tea over coffee"], "{facts:?}");
    assert!(facts.iter().all(|f| f["source"] == "extracted"), "{facts:?}");
    app.assert_metrics(&[
        "engram_llm_calls_total{provider=\"openai\",outcome=\"truncated\"}",
        "engram_llm_operations_dropped_total{reason=\"shape\"}",
    ])
    .await;
}

async fn fallen_back_facts_are_evicted_like_extracted_ones(backend: Backend) {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(openai_reply("no JSON here")).mount(&server).await;
    let app = spawn_extracting(backend, "openai", &server, &["--max-facts-per-user", "3"]).await;
    let (status, _) =
        app.post("/api/agents/concierge/users/alice/facts", &agent("acme"), json!({"fact": "Owns a bicycle"})).await;
    assert_eq!(status, reqwest::StatusCode::CREATED);
    let (_, ended) = converse(&app, "concierge", "alice", &ALICE_TURNS).await;
    let first = job_reaching(&app, &job_id(&ended), &["succeeded", "dead"], Duration::from_secs(20)).await;
    // Room for two beside the manual fact: the fallback's facts are not curated.
    assert_eq!(first["facts_added"], 2, "{first}");
    let turns = ["I work as a baker.", "I have three ferrets.", "I play the bassoon."];
    let (_, ended) = converse(&app, "concierge", "alice", &turns).await;
    let second = job_reaching(&app, &job_id(&ended), &["succeeded", "dead"], Duration::from_secs(20)).await;

    assert_eq!(second["facts_added"], 2, "the older fallback facts make room: {second}");
    let facts = facts_of(&app, "alice").await;
    assert_eq!(facts.len(), 3, "{facts:?}");
    assert!(sorted_texts(&facts).iter().any(|f| f == "Owns a bicycle"), "a manual fact is never evicted: {facts:?}");
}
