//! Facts that replace each other (issue 14), on both backends: a newer fact in a
//! single-valued slot (a home city, a job…) supersedes the older one, which leaves memory
//! context, lists and search unless asked for, names its successor, comes back when it
//! is said again, and is exported like any fact. Facts of no slot are never touched.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

on_both_backends!(
    a_newer_fact_of_a_slot_supersedes_the_older,
    a_fact_said_again_comes_back,
    other_slots_users_and_agents_are_untouched,
    extraction_keeps_one_home_city,
);

const FACTS: &str = "/api/agents/concierge/users/ann/facts";

async fn remember(app: &TestApp, text: &str) -> (StatusCode, Value) {
    app.post(FACTS, &agent("acme"), json!({"fact": text})).await
}

/// The texts the list route answers with, newest first, with `query` appended.
async fn listed(app: &TestApp, query: &str) -> Vec<String> {
    let (status, page) = app.get(&format!("{FACTS}{query}"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    texts(&page["items"]).into_iter().map(str::to_owned).collect()
}

/// The memory context's facts.
async fn in_context(app: &TestApp) -> Vec<String> {
    let (status, context) = app.get("/api/agents/concierge/users/ann/memory-context", &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{context}");
    texts(&context["facts"]).into_iter().map(str::to_owned).collect()
}

async fn a_newer_fact_of_a_slot_supersedes_the_older(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &[]).await;
    let (_, lyon) = remember(&app, "Lives in Lyon").await;
    remember(&app, "Likes tea").await;
    let (status, paris) = remember(&app, "Moved to Paris").await;
    assert_eq!(status, StatusCode::CREATED, "{paris}");
    assert_eq!(paris["superseded_by"], Value::Null);

    assert_eq!(in_context(&app).await, ["Moved to Paris", "Likes tea"]);
    assert_eq!(listed(&app, "").await, ["Moved to Paris", "Likes tea"]);
    let (_, all) = app.get(&format!("{FACTS}?include_superseded=true"), &agent("acme")).await;
    assert_eq!(texts(&all["items"]), ["Moved to Paris", "Likes tea", "Lives in Lyon"]);
    let old = &all["items"][2];
    assert_eq!(old["id"], lyon["id"]);
    assert_eq!(old["superseded_by"], paris["id"]);
    assert!(old["superseded_at"].is_string(), "{old}");

    let (_, found) = app.get(&format!("{FACTS}/search?q=Lyon"), &agent("acme")).await;
    assert_eq!(found["items"], json!([]), "a superseded fact is not recalled");
    let (_, found) = app.get(&format!("{FACTS}/search?q=Lyon&include_superseded=true"), &agent("acme")).await;
    assert_eq!(texts(&found["items"]), ["Lives in Lyon"]);
    app.assert_invalid_queries(FACTS, &agent("acme"), &["?include_superseded=maybe"]).await;

    // Exported like any fact, with its successor.
    let (_, export) = app.get("/api/rgpd/users/ann/ai-data", &admin("acme")).await;
    let exported: Vec<&Value> = export["facts"].as_array().expect("facts").iter().collect();
    assert_eq!(exported.len(), 3, "{export}");
    assert!(exported.iter().any(|f| f["fact"] == "Lives in Lyon" && f["superseded_by"] == paris["id"]), "{export}");
}

async fn a_fact_said_again_comes_back(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, lyon) = remember(&app, "Lives in Lyon").await;
    let (_, paris) = remember(&app, "Moved to Paris").await;

    let (status, again) = remember(&app, "lives in lyon.").await;
    assert_eq!(status, StatusCode::OK, "the same fact: {again}");
    assert_eq!(again["id"], lyon["id"]);
    assert_eq!(again["superseded_by"], Value::Null);
    assert_eq!(listed(&app, "").await, ["Lives in Lyon"]);
    let (_, all) = app.get(&format!("{FACTS}?include_superseded=true"), &agent("acme")).await;
    let moved = all["items"].as_array().expect("items").iter().find(|f| f["id"] == paris["id"]).cloned();
    assert_eq!(moved.map(|f| f["superseded_by"].clone()), Some(lyon["id"].clone()));
}

async fn other_slots_users_and_agents_are_untouched(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for text in ["Lives in Lyon", "Works as a nurse", "Likes tea", "Likes coffee", "Is married"] {
        remember(&app, text).await;
    }
    // Another user, another agent: their slots are their own.
    let (status, _) =
        app.post("/api/agents/concierge/users/bob/facts", &agent("acme"), json!({"fact": "Lives in Rome"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) =
        app.post("/api/agents/sales/users/ann/facts", &agent("acme"), json!({"fact": "Lives in Oslo"})).await;
    assert_eq!(status, StatusCode::CREATED);
    // A new job replaces the job only.
    remember(&app, "Works as a teacher").await;
    assert_eq!(
        listed(&app, "").await,
        ["Works as a teacher", "Is married", "Likes coffee", "Likes tea", "Lives in Lyon"]
    );
}

async fn extraction_keeps_one_home_city(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--job-poll-ms", "50"]).await;
    converse(&app, "concierge", "ann", &["I live in Lyon.", "I like tea.", "I work as a nurse."]).await;
    let first = eventually(std::time::Duration::from_secs(20), || async {
        let facts = listed(&app, "").await;
        facts.iter().any(|f| f == "Lives in Lyon").then_some(facts)
    })
    .await;
    assert!(first.is_some(), "the first conversation's facts");
    converse(&app, "concierge", "ann", &["Big news!", "I moved to Paris last month.", "It is lovely."]).await;
    let home = eventually(std::time::Duration::from_secs(20), || async {
        let facts = in_context(&app).await;
        facts.iter().any(|f| f.starts_with("Moved to Paris")).then_some(facts)
    })
    .await
    .expect("the second conversation's facts");
    assert!(!home.iter().any(|f| f == "Lives in Lyon"), "one home city in memory: {home:?}");
    assert!(home.iter().any(|f| f == "Likes tea"), "{home:?}");
}
