//! Curated facts are safe: extraction never evicts a manual fact, one job stores at most
//! `ENGRAM_MAX_FACTS_PER_JOB` facts, and when manual facts alone fill the cap an
//! extraction stores nothing.

use std::time::Duration;

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

on_both_backends!(
    many_likes_cannot_push_out_manual_facts,
    one_job_stores_at_most_the_per_job_bound,
    manual_facts_filling_the_cap_leave_extraction_nothing,
);

const USER: &str = "curated-user";

/// One user message of `count` "I like X." clauses, each a distinct fact for the builtin
/// extractor ("Likes thing0", …); `round` keeps rounds apart.
fn likes(round: &str, count: usize) -> String {
    (0..count).map(|i| format!("I like {round}thing{i}. ")).collect()
}

/// Starts the app with `flags`, memory on for `concierge` with extraction after one
/// user turn.
async fn spawn(backend: Backend, flags: &[&str]) -> TestApp {
    let mut args = vec!["--job-poll-ms", "50"];
    args.extend_from_slice(flags);
    let app = TestApp::spawn_with(backend, &args).await;
    let (status, body) = app
        .put(
            "/api/agents-config/concierge",
            &admin("acme"),
            json!({"memory_enabled": true, "min_user_turns": 1, "extract_every_user_turns": null}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app
}

fn facts_path() -> String {
    format!("/api/agents/concierge/users/{USER}/facts")
}

#[track_caller]
fn assert_created(status: StatusCode, body: &Value) {
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

async fn remember(app: &TestApp, text: &str) {
    let (status, body) = app.post(&facts_path(), &agent("acme"), json!({"fact": text})).await;
    assert_created(status, &body);
}

/// Runs one conversation of one user message through extraction and returns the job's
/// `facts_added`.
async fn extract(app: &TestApp, text: &str) -> u64 {
    let token = agent("acme");
    let (status, conversation) =
        app.post("/api/conversations", &token, json!({"agent_id": "concierge", "external_ref": USER})).await;
    assert_created(status, &conversation);
    let id = conversation["id"].as_str().expect("conversation id").to_string();
    let (status, body) = app
        .post(
            &format!("/api/conversations/{id}/messages"),
            &token,
            json!({"messages": [{"role": "user", "content": text}]}),
        )
        .await;
    assert_created(status, &body);
    let (_, ended) = app.post(&format!("/api/conversations/{id}/end"), &token, json!({})).await;
    assert_eq!(ended["extraction"]["queued"], true, "{ended}");
    let added = eventually(Duration::from_secs(20), || async {
        let (_, jobs) = app.get("/api/jobs?limit=200", &admin("acme")).await;
        let job = jobs["items"].as_array()?.iter().find(|j| j["conversation_id"] == id.as_str())?.clone();
        (job["status"] == "succeeded").then(|| job["facts_added"].as_u64()).flatten()
    })
    .await;
    added.expect("the job succeeded")
}

/// The owner's facts as (text, source), newest first.
async fn stored(app: &TestApp) -> Vec<(String, String)> {
    let (status, page) = app.get(&format!("{}?limit=100", facts_path()), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|f| {
            (f["fact"].as_str().unwrap_or_default().to_owned(), f["source"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

fn with_source<'a>(facts: &'a [(String, String)], source: &str) -> Vec<&'a str> {
    facts.iter().filter(|(_, s)| s == source).map(|(f, _)| f.as_str()).collect()
}

async fn many_likes_cannot_push_out_manual_facts(backend: Backend) {
    let app = spawn(backend, &["--max-facts-per-user", "5"]).await;
    let manual = ["Prefers window seats", "Is allergic to penicillin", "Account manager is Dana"];
    for text in manual {
        remember(&app, text).await;
    }

    // Room for two extracted facts beside the three manual ones.
    assert_eq!(extract(&app, &likes("first", 20)).await, 2);
    let facts = stored(&app).await;
    assert_eq!(facts.len(), 5, "{facts:?}");
    // A second flood evicts the first round's facts, never a manual one.
    assert_eq!(extract(&app, &likes("second", 20)).await, 2);
    let facts = stored(&app).await;
    assert_eq!(facts.len(), 5, "{facts:?}");
    let mut kept = with_source(&facts, "manual");
    kept.sort_unstable();
    let mut expected = manual.to_vec();
    expected.sort_unstable();
    assert_eq!(kept, expected);
    let extracted = with_source(&facts, "extracted");
    assert_eq!(extracted.len(), 2, "{facts:?}");
    assert!(extracted.iter().all(|f| f.starts_with("Likes secondthing")), "{extracted:?}");
}

async fn one_job_stores_at_most_the_per_job_bound(backend: Backend) {
    let app = spawn(backend, &["--max-facts-per-job", "4"]).await;
    assert_eq!(extract(&app, &likes("", 30)).await, 4);
    let facts = stored(&app).await;
    assert_eq!(with_source(&facts, "extracted").len(), 4, "{facts:?}");
    // The first four (all score alike, so the extractor's order decides).
    let mut texts = with_source(&facts, "extracted");
    texts.sort_unstable();
    assert_eq!(texts, ["Likes thing0", "Likes thing1", "Likes thing2", "Likes thing3"]);
}

async fn manual_facts_filling_the_cap_leave_extraction_nothing(backend: Backend) {
    let app = spawn(backend, &["--max-facts-per-user", "3"]).await;
    for text in ["Prefers window seats", "Is allergic to penicillin", "Account manager is Dana"] {
        remember(&app, text).await;
    }
    assert_eq!(extract(&app, &likes("", 10)).await, 0);
    let facts = stored(&app).await;
    assert_eq!(facts.len(), 3, "{facts:?}");
    assert_eq!(with_source(&facts, "manual").len(), 3, "{facts:?}");
}
