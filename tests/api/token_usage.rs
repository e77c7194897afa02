//! What the model costs (issue 66): each extraction job records the tokens its provider
//! reported (the builtin spends none), `GET /api/usage` sums them per agent, and a
//! tenant's daily token budget makes a job over it fall back to the builtin or wait for
//! the next UTC day, counted and shown on the job. Against local servers speaking the
//! OpenAI and Anthropic protocols, on both backends.

use std::time::Duration;

use chrono::{DateTime, Days, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

use crate::common::{
    llm::{openai_reply, spawn_extracting},
    *,
};

on_both_backends!(
    an_openai_job_records_the_tokens_its_provider_reported,
    an_anthropic_job_records_the_tokens_its_provider_reported,
    the_builtin_spends_no_tokens,
    a_fallback_keeps_the_tokens_of_the_answer_it_could_not_use,
    usage_sums_tokens_per_agent_over_the_period_asked,
    over_its_daily_budget_a_tenant_gets_the_builtin_and_the_job_says_so,
    over_its_daily_budget_with_wait_a_job_waits_for_the_next_utc_day,
    a_tenant_budget_overrides_the_default,
);

/// Enough user turns to extract; the builtin rules find three facts in them.
const TURNS: [&str; 3] = ["Hi! My name is Alice.", "I live in Paris.", "I prefer tea over coffee, honestly."];

/// The model's answer: one fact in the user's words.
const ANSWER: &str = r#"{"operations": [{"op": "add", "fact": "Name is Alice", "score": 0.9}]}"#;

/// A fake OpenAI-compatible provider answering [`ANSWER`] with 120 prompt and 30
/// completion tokens to every request.
async fn openai() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(openai_reply(ANSWER)).mount(&server).await;
    server
}

/// Ends a conversation of `user` with the agent `concierge` and waits for its job to end.
async fn extracted(app: &TestApp, user: &str) -> Value {
    let (_, ended) = converse(app, "concierge", user, &TURNS).await;
    job_reaching(app, &job_id(&ended), &["succeeded", "dead"], Duration::from_secs(20)).await
}

async fn usage(app: &TestApp, query: &str) -> Value {
    let (status, usage) = app.get(&format!("/api/usage{query}"), &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{usage}");
    usage
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.unwrap_or_default().len()
}

#[track_caller]
fn tokens(job: &Value) -> (i64, i64) {
    (job["input_tokens"].as_i64().expect("input_tokens"), job["output_tokens"].as_i64().expect("output_tokens"))
}

async fn an_openai_job_records_the_tokens_its_provider_reported(backend: Backend) {
    let server = openai().await;
    let app = spawn_extracting(backend, "openai", &server, &[]).await;

    let job = extracted(&app, "alice").await;

    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(tokens(&job), (120, 30), "{job}");
    assert_eq!(job["over_budget"], Value::Null, "{job}");
    let conversation = job["conversation_id"].as_str().expect("conversation_id");
    let (_, page) = app.get(&format!("/api/jobs?conversation_id={conversation}"), &admin("acme")).await;
    assert_eq!(tokens(&page["items"][0]), (120, 30), "the list shows them too: {page}");
    assert!(app.metrics().await.contains("engram_llm_tokens_total{provider=\"openai\",kind=\"input\"}"));
}

async fn an_anthropic_job_records_the_tokens_its_provider_reported(backend: Backend) {
    let server = MockServer::start().await;
    let operations: Value = serde_json::from_str(ANSWER).expect("JSON");
    let message = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "test-model",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "record_facts", "input": operations}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 398, "output_tokens": 41}
    });
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200).set_body_json(message)).mount(&server).await;
    let app = spawn_extracting(backend, "anthropic", &server, &[]).await;

    let job = extracted(&app, "alice").await;

    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(tokens(&job), (398, 41), "{job}");
    let usage = usage(&app, "?days=1").await;
    assert_eq!(usage["agents"][0]["input_tokens"], 398, "{usage}");
    assert_eq!(usage["budget"]["spent_today"], 439, "{usage}");
}

async fn the_builtin_spends_no_tokens(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--job-poll-ms", "50"]).await;

    let job = extracted(&app, "alice").await;

    assert_eq!((job["status"].as_str(), job["facts_added"].as_i64()), (Some("succeeded"), Some(3)), "{job}");
    assert_eq!(tokens(&job), (0, 0), "{job}");
    let usage = usage(&app, "").await;
    assert_eq!(
        usage["agents"],
        json!([{"agent_id": "concierge", "input_tokens": 0, "output_tokens": 0, "jobs": 1, "over_budget_jobs": 0}])
    );
}

/// An answer of facts none of which the user said is not used, but it was paid for.
async fn a_fallback_keeps_the_tokens_of_the_answer_it_could_not_use(backend: Backend) {
    let server = MockServer::start().await;
    let invented = r#"{"operations": [{"op": "add", "fact": "Likes jazz", "score": 0.9}]}"#;
    Mock::given(method("POST")).respond_with(openai_reply(invented)).mount(&server).await;
    let app = spawn_extracting(backend, "openai", &server, &[]).await;

    let job = extracted(&app, "alice").await;

    assert!(job["last_error"].as_str().unwrap_or_default().contains("gave up"), "{job}");
    assert_eq!(tokens(&job), (120, 30), "{job}");
    assert_eq!(job["over_budget"], Value::Null, "{job}");
}

async fn usage_sums_tokens_per_agent_over_the_period_asked(backend: Backend) {
    let server = openai().await;
    let app = spawn_extracting(backend, "openai", &server, &[]).await;
    extracted(&app, "alice").await;
    extracted(&app, "bob").await;
    // A day that long ended: in the 30-day period, not in today's.
    let old = (Utc::now() - Duration::from_secs(5 * 86_400)).date_naive();
    app.db
        .execute(&format!(
            "INSERT INTO token_usage (tenant_id, day, agent_id, input_tokens, output_tokens, jobs, over_budget_jobs) \
             VALUES ('acme', '{old}', 'concierge', 1000, 100, 4, 0), ('acme', '{old}', 'sales', 7, 3, 1, 0), \
                    ('other', '{old}', 'concierge', 99999, 1, 1, 0)"
        ))
        .await;

    let today = usage(&app, "?days=1").await;
    let month = usage(&app, "?days=30").await;

    assert_eq!(today["since"], Utc::now().date_naive().to_string(), "{today}");
    assert_eq!(
        today["agents"],
        json!([{"agent_id": "concierge", "input_tokens": 240, "output_tokens": 60, "jobs": 2, "over_budget_jobs": 0}])
    );
    assert_eq!(
        month["agents"],
        json!([
            {"agent_id": "concierge", "input_tokens": 1240, "output_tokens": 160, "jobs": 6, "over_budget_jobs": 0},
            {"agent_id": "sales", "input_tokens": 7, "output_tokens": 3, "jobs": 1, "over_budget_jobs": 0}
        ]),
        "most tokens first, the other tenant's apart"
    );
    assert_eq!(month["budget"], json!({"daily_tokens": null, "spent_today": 300, "over_budget": "builtin"}));
    app.assert_invalid_queries("/api/usage", &admin("acme"), &["?days=0", "?days=367", "?days=-1", "?days=week"]).await;
    let (status, body) = app.get("/api/usage", &agent("acme")).await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");
}

async fn over_its_daily_budget_a_tenant_gets_the_builtin_and_the_job_says_so(backend: Backend) {
    let server = openai().await;
    let app = spawn_extracting(backend, "openai", &server, &["--tenant-daily-tokens", "100"]).await;
    let first = extracted(&app, "alice").await;
    assert_eq!((tokens(&first), first["over_budget"].clone()), ((120, 30), Value::Null), "within: {first}");

    // 150 spent of 100: the next job does not call the LLM.
    let second = extracted(&app, "bob").await;

    assert_eq!(requests(&server).await, 1, "no second LLM call");
    assert_eq!(second["status"], "succeeded", "{second}");
    assert_eq!(second["over_budget"], "builtin", "{second}");
    assert_eq!(tokens(&second), (0, 0), "{second}");
    assert!(second["last_error"].as_str().unwrap_or_default().contains("daily token budget of 100"), "{second}");
    let (_, facts) = app.get("/api/agents/concierge/users/bob/facts", &agent("acme")).await;
    let facts = facts["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(facts.len(), 3, "the builtin's facts: {facts:?}");
    assert!(facts.iter().all(|fact| fact["source"] == "builtin_fallback"), "{facts:?}");
    let usage = usage(&app, "?days=1").await;
    assert_eq!(usage["agents"][0]["over_budget_jobs"], 1, "{usage}");
    assert_eq!(usage["budget"], json!({"daily_tokens": 100, "spent_today": 150, "over_budget": "builtin"}));
    let metrics = app.metrics().await;
    let series = "engram_jobs_over_budget_total{kind=\"extract_facts\",action=\"builtin\"}";
    assert!(metrics.contains(series), "{series} missing");
}

async fn over_its_daily_budget_with_wait_a_job_waits_for_the_next_utc_day(backend: Backend) {
    let server = openai().await;
    let flags = ["--tenant-daily-tokens", "100", "--over-budget", "wait"];
    let app = spawn_extracting(backend, "openai", &server, &flags).await;
    extracted(&app, "alice").await;

    let (_, ended) = converse(&app, "concierge", "bob", &TURNS).await;
    let id = job_id(&ended);
    let waiting = eventually(Duration::from_secs(20), || async {
        let (_, job) = app.get(&format!("/api/jobs/{id}"), &admin("acme")).await;
        (job["over_budget"] == "waited").then_some(job)
    })
    .await
    .expect("the job waits");

    assert_eq!(waiting["status"], "queued", "{waiting}");
    assert_eq!(waiting["attempts"], 0, "waiting is not a failed attempt: {waiting}");
    let run_at: DateTime<Utc> = waiting["run_at"].as_str().expect("run_at").parse().expect("a time");
    let midnight = Utc::now().date_naive().checked_add_days(Days::new(1)).expect("tomorrow");
    assert_eq!(run_at, midnight.and_hms_opt(0, 0, 0).expect("midnight").and_utc(), "{waiting}");
    assert!(waiting["last_error"].as_str().unwrap_or_default().contains("waits for the next UTC day"), "{waiting}");
    // It stays so: not run, not dropped, and nothing else asked of the LLM.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, still) = app.get(&format!("/api/jobs/{id}"), &admin("acme")).await;
    assert_eq!((still["status"].as_str(), still["over_budget"].as_str()), (Some("queued"), Some("waited")));
    assert_eq!(requests(&server).await, 1);
    let (_, facts) = app.get("/api/agents/concierge/users/bob/facts", &agent("acme")).await;
    assert_eq!(facts["items"], json!([]), "{facts}");
    let usage = usage(&app, "?days=1").await;
    assert_eq!(usage["agents"][0]["over_budget_jobs"], 1, "{usage}");
    assert_eq!(usage["budget"]["over_budget"], "waited", "{usage}");
    let series = "engram_jobs_over_budget_total{kind=\"extract_facts\",action=\"waited\"}";
    assert!(app.metrics().await.contains(series), "{series} missing");
}

async fn a_tenant_budget_overrides_the_default(backend: Backend) {
    let server = openai().await;
    let flags = ["--tenant-daily-tokens", "100", "--tenant-daily-tokens-by-tenant", r#"{"acme": 1000}"#];
    let app = spawn_extracting(backend, "openai", &server, &flags).await;
    extracted(&app, "alice").await;

    let second = extracted(&app, "bob").await;

    assert_eq!((tokens(&second), second["over_budget"].clone()), ((120, 30), Value::Null), "{second}");
    assert_eq!(requests(&server).await, 2);
    assert_eq!(usage(&app, "").await["budget"]["daily_tokens"], 1000);
}
