//! Forgetting and retention (issue 26), on both backends with the real clock: the agents'
//! forgetting policies (maximum age of extracted facts, time since the last recall, keep
//! the best N per user), each deleting exactly the facts it names and no manual or agent
//! fact unless told; recall counts gathered in memory and flushed; message retention
//! (the oldest messages of a long conversation, conversations long ended); `as_of` on
//! the tools; erasure and export of what is new.
//!
//! Days cannot be waited for: a test moves a fact's or a conversation's time into the
//! past with SQL, straight in the database, then lets the sweeper (every second) act.

use std::time::Duration;

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

on_both_backends!(
    bad_settings_are_refused_and_change_nothing,
    max_age_forgets_old_extracted_facts_and_curated_ones_only_when_told,
    unrecalled_facts_are_forgotten_and_recalled_ones_kept,
    keep_best_keeps_the_best_extracted_facts_per_user,
    recall_counts_are_flushed_on_a_timer_and_at_shutdown,
    recall_tracking_off_counts_nothing,
    retention_trims_long_conversations_to_their_newest_messages,
    retention_trims_only_summarised_messages_when_the_agent_summarises,
    retention_deletes_conversations_long_ended,
    tools_read_as_of,
    erasure_and_export_cover_recall_counts,
);

const CONFIG: &str = "/api/agents-config/concierge";
const FACTS: &str = "/api/agents/concierge/users/ann/facts";

/// Sets the agent's settings (admin); the config as stored.
async fn configure(app: &TestApp, settings: Value) -> Value {
    let (status, config) = app.put(CONFIG, &admin("acme"), settings).await;
    assert_eq!(status, StatusCode::OK, "{config}");
    config
}

async fn remember(app: &TestApp, user: &str, body: Value) -> Value {
    let path = format!("/api/agents/concierge/users/{user}/facts");
    let (status, fact) = app.post(&path, &agent("acme"), body).await;
    assert_eq!(status, StatusCode::CREATED, "{fact}");
    fact
}

/// Calls tool `name` for concierge and ann through `/api/tools/call`.
async fn call_tool(app: &TestApp, name: &str, mut arguments: Value) -> (StatusCode, Value) {
    arguments["agent_id"] = json!("concierge");
    arguments["external_ref"] = json!("ann");
    app.post("/api/tools/call", &agent("acme"), json!({"name": name, "arguments": arguments})).await
}

/// The user's current facts, sorted by text.
async fn fact_texts(app: &TestApp, user: &str) -> Vec<String> {
    let (status, page) = app.get(&format!("/api/agents/concierge/users/{user}/facts?limit=200"), &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let mut texts: Vec<String> = texts(&page["items"]).into_iter().map(str::to_owned).collect();
    texts.sort();
    texts
}

/// Runs `sql` straight on the test's database (to move times into the past).
async fn exec(app: &TestApp, sql: &'static str) {
    if app.db.url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(&app.db.url).await.expect("connect");
        sqlx::query(sql).execute(&pool).await.expect("statement runs");
    } else {
        let pool = sqlx::SqlitePool::connect(&app.db.url).await.expect("connect");
        sqlx::query(sql).execute(&pool).await.expect("statement runs");
    }
}

async fn count(app: &TestApp, sql: &'static str) -> i64 {
    let rows: Vec<(i64,)> = app.db.rows(sql).await;
    rows[0].0
}

/// Extracts facts from a conversation of `user` with the builtin rules and waits for them.
async fn extract(app: &TestApp, user: &str, turns: &[&str]) {
    let (_, ended) = converse(app, "concierge", user, turns).await;
    job_reaching(app, &job_id(&ended), &["succeeded"], Duration::from_secs(20)).await;
}

/// Waits until `user`'s facts are exactly `expected` (sorted), or fails with what they are.
async fn facts_become(app: &TestApp, user: &str, expected: &[&str]) {
    let reached =
        eventually(Duration::from_secs(15), || async { (fact_texts(app, user).await == expected).then_some(()) }).await;
    assert!(reached.is_some(), "expected {expected:?}, have {:?}", fact_texts(app, user).await);
}

/// The `fact.deleted` events' (fact text, reason, actor kind), sorted.
async fn deletions(app: &TestApp) -> Vec<(String, String, String)> {
    let (status, events) = app.get("/api/events?types=fact.deleted&limit=200", &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{events}");
    let mut found: Vec<_> = events["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|e| {
            let text = e["data"]["fact"]["fact"].as_str().unwrap_or_default().to_owned();
            let reason = e["data"]["reason"].as_str().unwrap_or_default().to_owned();
            (text, reason, e["actor"]["kind"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    found.sort();
    found
}

fn owned(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| (*t).to_owned()).collect()
}

async fn bad_settings_are_refused_and_change_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let before = configure(&app, json!({"memory_enabled": true, "keep_best_facts": 50})).await;
    for (body, named) in [
        (json!({"forget_extracted_after_days": -1}), "forget_extracted_after_days"),
        (json!({"forget_extracted_after_days": 36501}), "forget_extracted_after_days"),
        (json!({"forget_unrecalled_after_days": 2.5}), "forget_unrecalled_after_days"),
        (json!({"keep_best_facts": 100001, "memory_enabled": false}), "keep_best_facts"),
        (json!({"forget_curated_facts": "yes"}), "forget_curated_facts"),
        (json!({"max_messages_per_conversation": -5}), "max_messages_per_conversation"),
        (json!({"delete_conversations_after_days": 1e9}), "delete_conversations_after_days"),
    ] {
        let (status, error) = app.put(CONFIG, &admin("acme"), body.clone()).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{body}: {message}");
    }
    let (_, after) = app.get(CONFIG, &admin("acme")).await;
    assert_eq!(after, before, "nothing changed");
    assert_eq!((after["keep_best_facts"].clone(), after["memory_enabled"].clone()), (json!(50), json!(true)));
    assert_eq!(after["forget_curated_facts"], false);
    assert_eq!(after["max_messages_per_conversation"], 0, "off by default");
}

async fn max_age_forgets_old_extracted_facts_and_curated_ones_only_when_told(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--job-poll-ms", "50", "--sweep-interval-secs", "1"]).await;
    extract(&app, "ann", &["I live in Lyon.", "I play the oboe.", "I grow tomatoes on my balcony."]).await;
    let extracted = fact_texts(&app, "ann").await;
    assert!(extracted.len() >= 2, "{extracted:?}");
    remember(&app, "ann", json!({"fact": "Restores old clocks", "observed_at": "2020-03-01T10:00:00Z"})).await;
    let (status, tool) =
        call_tool(&app, "remember", json!({"fact": "Collects tram tickets", "observed_at": "2020-03-01T10:00:00Z"}))
            .await;
    assert_eq!(status, StatusCode::OK, "{tool}");
    remember(&app, "ann", json!({"fact": "Swims on Sundays"})).await;
    // One extracted fact was said long ago; the others just now.
    exec(&app, "UPDATE facts SET observed_at = '2020-03-01T10:00:00+00:00' WHERE fact = 'Lives in Lyon'").await;

    configure(&app, json!({"forget_extracted_after_days": 365})).await;
    let mut kept: Vec<&str> = extracted.iter().map(String::as_str).filter(|f| *f != "Lives in Lyon").collect();
    kept.extend(["Collects tram tickets", "Restores old clocks", "Swims on Sundays"]);
    kept.sort();
    facts_become(&app, "ann", &kept).await;
    // A few more sweeps: nothing else goes.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(fact_texts(&app, "ann").await, owned(&kept));
    let sweeper = |text: &str| (text.to_owned(), "max_age".to_owned(), "sweeper".to_owned());
    assert_eq!(deletions(&app).await, [sweeper("Lives in Lyon")]);

    // Told to, the policy reaches manual and agent facts said long ago, and only those.
    configure(&app, json!({"forget_curated_facts": true})).await;
    kept.retain(|f| !["Collects tram tickets", "Restores old clocks"].contains(f));
    facts_become(&app, "ann", &kept).await;
    let mut expected = vec![sweeper("Collects tram tickets"), sweeper("Lives in Lyon"), sweeper("Restores old clocks")];
    expected.sort();
    assert_eq!(deletions(&app).await, expected);
    assert!(app.metrics().await.contains("engram_facts_forgotten_total{reason=\"max_age\"}"));
}

async fn unrecalled_facts_are_forgotten_and_recalled_ones_kept(backend: Backend) {
    let app = TestApp::spawn_with_memory(
        backend,
        &["--job-poll-ms", "50", "--sweep-interval-secs", "1", "--recall-flush-secs", "1"],
    )
    .await;
    extract(&app, "ann", &["Good morning.", "I live in Lyon.", "I play the oboe."]).await;
    assert_eq!(fact_texts(&app, "ann").await, ["Lives in Lyon", "Plays the oboe"]);
    remember(&app, "ann", json!({"fact": "Restores old clocks"})).await;
    // All stored long ago and never recalled since.
    exec(&app, "UPDATE facts SET created_at = '2020-03-01T10:00:00+00:00'").await;

    // Recalled now, by a search: flushed within a second.
    let (status, found) = app.get(&format!("{FACTS}/search?q=oboe"), &agent("acme")).await;
    assert_eq!((status, texts(&found["items"])), (StatusCode::OK, vec!["Plays the oboe"]));
    let flushed = eventually(Duration::from_secs(10), || async {
        (count(&app, "SELECT count(*) FROM facts WHERE recall_count > 0").await == 1).then_some(())
    })
    .await;
    assert!(flushed.is_some(), "the recall was flushed");

    configure(&app, json!({"forget_unrecalled_after_days": 30})).await;
    facts_become(&app, "ann", &["Plays the oboe", "Restores old clocks"]).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(fact_texts(&app, "ann").await, ["Plays the oboe", "Restores old clocks"]);
    assert_eq!(deletions(&app).await, [("Lives in Lyon".into(), "unrecalled".into(), "sweeper".into())]);
}

async fn keep_best_keeps_the_best_extracted_facts_per_user(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--job-poll-ms", "50", "--sweep-interval-secs", "1"]).await;
    extract(&app, "ann", &["I live in Lyon.", "I play the oboe.", "I grow tomatoes on my balcony."]).await;
    extract(&app, "bob", &["Good evening.", "I live in Nantes.", "I play the cello."]).await;
    let (_, page) = app.get(FACTS, &agent("acme")).await;
    let items = page["items"].as_array().expect("items").clone();
    assert_eq!(items.len(), 3, "{page}");
    // Scores decide among facts said and recalled alike: the lowest goes.
    for (item, score) in items.iter().zip([0.9, 0.2, 0.6]) {
        let (status, body) = app
            .patch(&format!("{FACTS}/{}", item["id"].as_str().expect("id")), &agent("acme"), json!({"score": score}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let worst = items[1]["fact"].as_str().expect("fact").to_owned();
    // A manual fact scored lower still is not the policy's to delete, nor counted in N.
    remember(&app, "ann", json!({"fact": "Restores old clocks", "score": 0.05})).await;
    let bob = fact_texts(&app, "bob").await;
    assert_eq!(bob.len(), 2, "{bob:?}");

    configure(&app, json!({"keep_best_facts": 2})).await;
    let mut kept: Vec<String> = items.iter().map(|f| f["fact"].as_str().unwrap_or_default().to_owned()).collect();
    kept.retain(|f| *f != worst);
    kept.push("Restores old clocks".into());
    kept.sort();
    let kept: Vec<&str> = kept.iter().map(String::as_str).collect();
    facts_become(&app, "ann", &kept).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(fact_texts(&app, "ann").await, owned(&kept));
    assert_eq!(fact_texts(&app, "bob").await, bob, "another user holds no more than N");
    assert_eq!(deletions(&app).await, [(worst, "keep_best".into(), "sweeper".into())]);
}

async fn recall_counts_are_flushed_on_a_timer_and_at_shutdown(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--recall-flush-secs", "1"]).await;
    let clocks = remember(&app, "ann", json!({"fact": "Restores old clocks"})).await;
    remember(&app, "ann", json!({"fact": "Swims on Sundays"})).await;
    assert_eq!((clocks["recall_count"].clone(), clocks["last_recalled_at"].clone()), (json!(0), Value::Null));
    // Returned by the memory context twice, by a search once; the other fact once.
    for path in [
        "/api/agents/concierge/users/ann/memory-context".to_owned(),
        "/api/agents/concierge/users/ann/memory-context?query=clocks".to_owned(),
        format!("{FACTS}/search?q=clocks"),
    ] {
        let (status, body) = app.get(&path, &agent("acme")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let counted = eventually(Duration::from_secs(10), || async {
        let (_, page) = app.get(FACTS, &agent("acme")).await;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        let clocks = items.iter().find(|f| f["fact"] == "Restores old clocks")?.clone();
        (clocks["recall_count"] == 3).then_some(items)
    })
    .await
    .expect("the counts were flushed");
    let clocks = counted.iter().find(|f| f["fact"] == "Restores old clocks").expect("clocks");
    let swims = counted.iter().find(|f| f["fact"] == "Swims on Sundays").expect("swims");
    assert!(clocks["last_recalled_at"].is_string(), "{clocks}");
    assert_eq!(swims["recall_count"], 2, "in both memory contexts (the second lists the newest too)");
    // Listing is no recall.
    assert_eq!(count(&app, "SELECT CAST(sum(recall_count) AS BIGINT) FROM facts").await, 5);

    // A flush interval longer than the test: the counts are written at shutdown.
    let mut app = app;
    app.extra = vec!["--recall-flush-secs".into(), "3600".into()];
    let app = app.restart().await;
    let (status, _) = app.get(&format!("{FACTS}/search?q=sundays"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK);
    let app = app.restart().await;
    assert_eq!(
        count(&app, "SELECT CAST(sum(recall_count) AS BIGINT) FROM facts").await,
        6,
        "written when the app stopped"
    );
}

async fn recall_tracking_off_counts_nothing(backend: Backend) {
    let mut app =
        TestApp::spawn_with_memory(backend, &["--recall-flush-secs", "1", "--recall-tracking", "false"]).await;
    remember(&app, "ann", json!({"fact": "Restores old clocks"})).await;
    let (status, _) = app.get(&format!("{FACTS}/search?q=clocks"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    app.stop().await;
    assert_eq!(count(&app, "SELECT CAST(sum(recall_count) AS BIGINT) FROM facts").await, 0);
}

/// Creates a conversation of concierge and ann with `n` messages; its id.
async fn conversation_with(app: &TestApp, n: usize) -> String {
    let (status, conversation) =
        app.post("/api/conversations", &agent("acme"), json!({"agent_id": "concierge", "external_ref": "ann"})).await;
    assert_eq!(status, StatusCode::CREATED, "{conversation}");
    let id = conversation["id"].as_str().expect("id").to_owned();
    let messages: Vec<Value> =
        (1..=n).map(|i| json!({"role": "user", "content": format!("Line number {i}.")})).collect();
    let (status, body) =
        app.post(&format!("/api/conversations/{id}/messages"), &agent("acme"), json!({"messages": messages})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    id
}

/// The contents of a conversation's stored messages, oldest first.
async fn contents(app: &TestApp, id: &str) -> Vec<String> {
    let (status, page) = app.get(&format!("/api/conversations/{id}/messages?limit=200"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn retention_trims_long_conversations_to_their_newest_messages(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--sweep-interval-secs", "1"]).await;
    configure(&app, json!({"summarize_after_messages": 0})).await;
    let long = conversation_with(&app, 8).await;
    let short = conversation_with(&app, 2).await;
    configure(&app, json!({"max_messages_per_conversation": 3})).await;
    let trimmed =
        eventually(Duration::from_secs(15), || async { (contents(&app, &long).await.len() == 3).then_some(()) }).await;
    assert!(trimmed.is_some(), "{:?}", contents(&app, &long).await);
    assert_eq!(contents(&app, &long).await, ["Line number 6.", "Line number 7.", "Line number 8."]);
    assert_eq!(contents(&app, &short).await.len(), 2);
    let (_, conversation) = app.get(&format!("/api/conversations/{long}"), &agent("acme")).await;
    assert_eq!(conversation["message_count"], 3, "{conversation}");
    // New messages go on from the last seq, and the next sweep trims again.
    let (status, _) = app
        .post(
            &format!("/api/conversations/{long}/messages"),
            &agent("acme"),
            json!({"messages": [{"role": "user", "content": "Line number 9."}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let again = eventually(Duration::from_secs(15), || async {
        (contents(&app, &long).await == ["Line number 7.", "Line number 8.", "Line number 9."]).then_some(())
    })
    .await;
    assert!(again.is_some(), "{:?}", contents(&app, &long).await);

    let (_, events) = app.get("/api/events?types=conversation.cleared", &admin("acme")).await;
    let items = events["items"].as_array().expect("items");
    let counts: Vec<_> = items.iter().map(|e| e["data"]["count"].as_u64().unwrap_or_default()).collect();
    assert_eq!(counts.iter().sum::<u64>(), 6, "{events}");
    assert!(items.iter().all(|e| e["data"]["reason"] == "retention" && e["actor"]["kind"] == "sweeper"), "{events}");
    assert!(!events.to_string().contains("Line number"), "counts, never contents: {events}");
    assert!(app.metrics().await.contains("engram_messages_trimmed_total"));
}

async fn retention_trims_only_summarised_messages_when_the_agent_summarises(backend: Backend) {
    // Summaries on (the default, after 20 messages), none written yet: nothing is trimmed,
    // as the summary has not taken the gist of those messages.
    let app = TestApp::spawn_with(backend, &["--sweep-interval-secs", "1"]).await;
    configure(&app, json!({"summarize_after_messages": 20, "max_messages_per_conversation": 3})).await;
    let id = conversation_with(&app, 8).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(contents(&app, &id).await.len(), 8);
    // Once a summary covers the first five, those may go (and only those).
    exec(&app, "UPDATE conversations SET summary = 'Counted lines.', summary_through_seq = 5").await;
    let trimmed =
        eventually(Duration::from_secs(15), || async { (contents(&app, &id).await.len() == 3).then_some(()) }).await;
    assert!(trimmed.is_some(), "{:?}", contents(&app, &id).await);
    exec(&app, "UPDATE conversations SET summary_through_seq = 8").await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(contents(&app, &id).await.len(), 3, "never fewer than the newest N");
}

async fn retention_deletes_conversations_long_ended(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--sweep-interval-secs", "1"]).await;
    let old = conversation_with(&app, 2).await;
    let recent = conversation_with(&app, 2).await;
    let open = conversation_with(&app, 2).await;
    for id in [&old, &recent] {
        let (status, body) = app.post(&format!("/api/conversations/{id}/end"), &agent("acme"), json!({})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // The first ended long ago; the open one was created long ago but never ended.
    exec(&app, "UPDATE conversations SET created_at = '2020-03-01T10:00:00+00:00'").await;
    let sql = "UPDATE conversations SET ended_at = '2020-03-01T11:00:00+00:00' WHERE id = (SELECT id FROM conversations WHERE ended_at IS NOT NULL ORDER BY ended_at LIMIT 1)";
    exec(&app, sql).await;
    configure(&app, json!({"delete_conversations_after_days": 30})).await;
    let gone = eventually(Duration::from_secs(15), || async {
        let (status, _) = app.get(&format!("/api/conversations/{old}"), &agent("acme")).await;
        (status == StatusCode::NOT_FOUND).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the conversation ended long ago is deleted");
    for id in [&recent, &open] {
        let (status, body) = app.get(&format!("/api/conversations/{id}"), &agent("acme")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    assert_eq!(count(&app, "SELECT count(*) FROM messages").await, 4, "its messages went with it");
    let (_, events) = app.get("/api/events?types=conversation.deleted", &admin("acme")).await;
    let deleted = &events["items"][0];
    assert_eq!(events["items"].as_array().map(Vec::len), Some(1), "{events}");
    assert_eq!(
        (
            deleted["data"]["conversation_id"].as_str(),
            deleted["data"]["reason"].clone(),
            deleted["actor"]["kind"].clone()
        ),
        (Some(old.as_str()), json!("retention"), json!("sweeper"))
    );
    assert!(app.metrics().await.contains("engram_conversations_retention_deleted_total"));
}

async fn tools_read_as_of(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &[]).await;
    remember(&app, "ann", json!({"fact": "Lives in Lyon", "observed_at": "2021-05-01T09:00:00Z"})).await;
    remember(&app, "ann", json!({"fact": "Lives in Paris", "observed_at": "2024-05-01T09:00:00Z"})).await;
    let then = "2022-01-01T00:00:00Z";
    let (status, found) = call_tool(&app, "recall", json!({"query": "lives", "as_of": then})).await;
    assert_eq!((status, texts(&found["items"])), (StatusCode::OK, vec!["Lives in Lyon"]), "{found}");
    let (_, found) = call_tool(&app, "recall", json!({"query": "lives"})).await;
    assert_eq!(texts(&found["items"]), ["Lives in Paris"], "{found}");
    let (_, listed) = call_tool(&app, "list_memories", json!({"as_of": then})).await;
    assert_eq!(texts(&listed["items"]), ["Lives in Lyon"], "{listed}");
    let (_, context) = call_tool(&app, "memory_context", json!({"as_of": then})).await;
    assert_eq!(texts(&context["facts"]), ["Lives in Lyon"], "{context}");
    // Before anything was said, nothing was true.
    let (_, context) = call_tool(&app, "memory_context", json!({"as_of": "2020-01-01T00:00:00Z"})).await;
    assert_eq!(texts(&context["facts"]), Vec::<&str>::new(), "{context}");
    for bad in [json!("yesterday"), json!(17), json!("2022-13-01T00:00:00Z")] {
        let (status, error) = call_tool(&app, "recall", json!({"query": "lives", "as_of": bad})).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    }
    // Over MCP, the same.
    let client = crate::mcp::connect(&app, &agent("acme")).await;
    let arguments = json!({"agent_id": "concierge", "external_ref": "ann", "query": "lives", "as_of": then});
    let result = crate::mcp::call(&client, "recall", arguments).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let items = result.structured_content.expect("structured");
    assert_eq!(texts(&items["items"]), ["Lives in Lyon"]);
    let tools = client.list_all_tools().await.expect("tools listed");
    for name in ["recall", "list_memories", "memory_context"] {
        let tool = tools.iter().find(|t| t.name == name).expect("tool");
        assert!(tool.input_schema.get("properties").is_some_and(|p| p.get("as_of").is_some()), "{name}");
    }
}

async fn erasure_and_export_cover_recall_counts(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--recall-flush-secs", "1"]).await;
    remember(&app, "ann", json!({"fact": "Restores old clocks"})).await;
    remember(&app, "bob", json!({"fact": "Swims on Sundays"})).await;
    let (status, _) = app.get(&format!("{FACTS}/search?q=clocks"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK);
    let flushed = eventually(Duration::from_secs(10), || async {
        (count(&app, "SELECT count(*) FROM facts WHERE recall_count > 0").await == 1).then_some(())
    })
    .await;
    assert!(flushed.is_some());
    let (_, export) = app.get("/api/rgpd/users/ann/ai-data", &admin("acme")).await;
    let exported = &export["facts"][0];
    assert_eq!(exported["recall_count"], 1, "{export}");
    assert!(exported["last_recalled_at"].is_string(), "{export}");

    // Recalled again, then erased before the flush: the flush brings nothing back.
    let (status, _) = app.get(&format!("{FACTS}/search?q=clocks"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, receipt) = app.delete("/api/rgpd/users/ann/ai-data", &token("acme", "rgpd")).await;
    assert!(status.is_success(), "{receipt}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(count(&app, "SELECT count(*) FROM facts WHERE external_ref = 'ann'").await, 0);
    assert_eq!(count(&app, "SELECT count(*) FROM facts").await, 1);
    assert_eq!(fact_texts(&app, "bob").await, ["Swims on Sundays"]);
}
