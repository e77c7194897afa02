//! Facts over time (issue 26), on both backends with the real clock: when a fact was
//! true (`observed_at`, `valid_until`, and `as_of` on the list, search and memory
//! context), and expiry (`expires_at`, `ttl_seconds`: gone from every read the moment it
//! expires, and from every table after a sweep).

use std::time::Duration;

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

on_both_backends!(
    as_of_returns_lyon_before_the_move_and_paris_after,
    an_older_observed_at_does_not_displace_a_newer_slot_fact,
    extracted_facts_are_observed_when_their_message_was_written,
    an_expired_fact_leaves_every_read_at_once,
    the_sweeper_deletes_an_expired_fact_with_its_vector_and_history,
    invalid_times_are_refused_and_change_nothing,
    tools_remember_with_an_expiry,
);

const FACTS: &str = "/api/agents/concierge/users/ann/facts";
const CONTEXT: &str = "/api/agents/concierge/users/ann/memory-context";

async fn remember(app: &TestApp, body: Value) -> Value {
    let (status, fact) = app.post(FACTS, &agent("acme"), body).await;
    assert_eq!(status, StatusCode::CREATED, "{fact}");
    fact
}

/// The texts a GET answers with under `key` (`items` or `facts`), after checking it is a 200.
#[track_caller]
fn answered(status: StatusCode, body: &Value, key: &str) -> Vec<String> {
    assert_eq!(status, StatusCode::OK, "{body}");
    texts(&body[key]).into_iter().map(str::to_owned).collect()
}

/// What the list, the search for `q` and the memory context hold with `query` appended
/// (`&as_of=…` or nothing), in that order.
async fn reads(app: &TestApp, q: &str, query: &str) -> [Vec<String>; 3] {
    let token = agent("acme");
    let (status, list) = app.get(&format!("{FACTS}?limit=50{query}"), &token).await;
    let list = answered(status, &list, "items");
    let (status, found) = app.get(&format!("{FACTS}/search?q={}{query}", enc(q)), &token).await;
    let found = answered(status, &found, "items");
    let (status, context) = app.get(&format!("{CONTEXT}?max_facts=50{query}"), &token).await;
    [list, found, answered(status, &context, "facts")]
}

/// Calls tool `name` for the agent and user of these tests through `/api/tools/call`.
async fn call_tool(app: &TestApp, name: &str, mut arguments: Value) -> (StatusCode, Value) {
    arguments["agent_id"] = json!("concierge");
    arguments["external_ref"] = json!("ann");
    app.post("/api/tools/call", &agent("acme"), json!({"name": name, "arguments": arguments})).await
}

/// How many rows `table` holds, read from the database itself.
async fn count(app: &TestApp, sql: &'static str) -> i64 {
    let rows: Vec<(i64,)> = app.db.rows(sql).await;
    rows[0].0
}

async fn as_of_returns_lyon_before_the_move_and_paris_after(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &[]).await;
    let lyon = remember(&app, json!({"fact": "Lives in Lyon", "observed_at": "2025-01-10T09:00:00Z"})).await;
    remember(&app, json!({"fact": "Sharpens knives for the market", "observed_at": "2025-02-01T09:00:00+01:00"})).await;
    let paris = remember(&app, json!({"fact": "Moved to Paris", "observed_at": "2025-06-01T18:30:00Z"})).await;
    assert_eq!(lyon["observed_at"], "2025-01-10T09:00:00Z");
    assert_eq!((lyon["valid_until"].clone(), lyon["expires_at"].clone()), (Value::Null, Value::Null), "{lyon}");

    // Now: Paris. Lyon was true until Paris was said.
    let now = reads(&app, "where does she live Lyon Paris", "").await;
    assert_eq!(
        now,
        [
            vec!["Moved to Paris", "Sharpens knives for the market"],
            vec!["Moved to Paris"],
            vec!["Moved to Paris", "Sharpens knives for the market"]
        ]
    );
    let (_, all) = app.get(&format!("{FACTS}?include_superseded=true"), &agent("acme")).await;
    let stored = all["items"].as_array().expect("items").iter().find(|f| f["id"] == lyon["id"]).cloned();
    let stored = stored.expect("Lyon is kept");
    assert_eq!(
        (stored["superseded_by"].clone(), stored["valid_until"].clone()),
        (paris["id"].clone(), json!("2025-06-01T18:30:00Z"))
    );

    // Before the move: Lyon (and the knives, once said). Before anything: nothing.
    let before = reads(&app, "where does she live Lyon Paris", "&as_of=2025-03-01T00:00:00Z").await;
    assert_eq!(
        before,
        [
            vec!["Sharpens knives for the market", "Lives in Lyon"],
            vec!["Lives in Lyon"],
            vec!["Sharpens knives for the market", "Lives in Lyon"]
        ]
    );
    let after = reads(&app, "where does she live Lyon Paris", "&as_of=2025-09-01T00%3A00%3A00%2B02%3A00").await;
    assert_eq!(after, now);
    let earliest = reads(&app, "Lyon", "&as_of=2024-12-31T23:59:59Z").await;
    assert_eq!(earliest, [Vec::<String>::new(), vec![], vec![]]);
    // The instant of the move belongs to Paris.
    let (_, context) = app.get(&format!("{CONTEXT}?as_of=2025-06-01T18:30:00Z&query=Lyon"), &agent("acme")).await;
    assert_eq!(texts(&context["facts"]), ["Moved to Paris", "Sharpens knives for the market"]);
}

async fn an_older_observed_at_does_not_displace_a_newer_slot_fact(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let paris = remember(&app, json!({"fact": "Moved to Paris"})).await;
    // Said before Paris (history told late): stored already superseded by Paris.
    let lyon = remember(&app, json!({"fact": "Lives in Lyon", "observed_at": "2024-05-01T08:00:00Z"})).await;
    assert_eq!(lyon["superseded_by"], paris["id"], "{lyon}");
    assert_eq!(lyon["valid_until"], paris["observed_at"], "{lyon}");
    let (_, list) = app.get(FACTS, &agent("acme")).await;
    assert_eq!(texts(&list["items"]), ["Moved to Paris"]);
    let (_, list) = app.get(&format!("{FACTS}?include_superseded=true"), &agent("acme")).await;
    let current = list["items"].as_array().expect("items").iter().find(|f| f["id"] == paris["id"]).cloned();
    assert_eq!(current.map(|f| f["superseded_by"].clone()), Some(Value::Null), "Paris is untouched: {list}");
    let (_, list) = app.get(&format!("{FACTS}?as_of=2024-06-01T00:00:00Z"), &agent("acme")).await;
    assert_eq!(texts(&list["items"]), ["Lives in Lyon"]);
    // Said again about a time it was still true: nothing changes.
    let (status, again) =
        app.post(FACTS, &agent("acme"), json!({"fact": "lives in lyon", "observed_at": "2024-06-01T00:00:00Z"})).await;
    assert_eq!((status, again["superseded_by"].clone()), (StatusCode::OK, paris["id"].clone()), "{again}");
    // Said again now: Lyon is current again, and Paris ends now.
    let (status, again) = app.post(FACTS, &agent("acme"), json!({"fact": "lives in lyon"})).await;
    assert_eq!((status, again["superseded_by"].clone()), (StatusCode::OK, Value::Null), "{again}");
    let (_, list) = app.get(FACTS, &agent("acme")).await;
    assert_eq!(texts(&list["items"]), ["Lives in Lyon"]);
}

async fn extracted_facts_are_observed_when_their_message_was_written(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--job-poll-ms", "50"]).await;
    let (first, ended) = converse(
        &app,
        "concierge",
        "ann",
        &["I live in Lyon.", "I sharpen knives for the market.", "I play the oboe."],
    )
    .await;
    job_reaching(&app, &job_id(&ended), &["succeeded"], Duration::from_secs(20)).await;
    // Far enough apart for as_of to fall between the two conversations.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (second, ended) =
        converse(&app, "concierge", "ann", &["Some news.", "I moved to Paris in the spring.", "The oboe came too."])
            .await;
    job_reaching(&app, &job_id(&ended), &["succeeded"], Duration::from_secs(20)).await;

    let written = |id: String| {
        let app = &app;
        async move {
            let (_, messages) = app.get(&format!("/api/conversations/{id}/messages"), &agent("acme")).await;
            messages["items"][0]["created_at"].as_str().expect("created_at").to_owned()
        }
    };
    let (lyon_said, paris_said) = (written(first).await, written(second).await);
    let (_, all) = app.get(&format!("{FACTS}?include_superseded=true"), &agent("acme")).await;
    let find = |prefix: &str| {
        all["items"]
            .as_array()
            .expect("items")
            .iter()
            .find(|f| f["fact"].as_str().unwrap_or("").starts_with(prefix))
            .cloned()
    };
    let (lyon, paris) = (find("Lives in Lyon").expect("Lyon"), find("Moved to Paris").expect("Paris"));
    assert_eq!(lyon["observed_at"], lyon_said.as_str(), "{lyon}");
    assert_eq!(paris["observed_at"], paris_said.as_str(), "{paris}");
    assert_eq!(lyon["valid_until"], paris_said.as_str(), "{lyon}");

    let between = enc(&lyon_said);
    let (_, context) = app.get(&format!("{CONTEXT}?query=live&as_of={between}"), &agent("acme")).await;
    let facts = texts(&context["facts"]);
    assert!(facts.contains(&"Lives in Lyon") && !facts.iter().any(|f| f.starts_with("Moved to Paris")), "{context}");
    let (_, context) = app.get(CONTEXT, &agent("acme")).await;
    let facts = texts(&context["facts"]);
    assert!(!facts.contains(&"Lives in Lyon") && facts.iter().any(|f| f.starts_with("Moved to Paris")), "{context}");
}

async fn an_expired_fact_leaves_every_read_at_once(backend: Backend) {
    // No sweep runs during the test: the reads alone leave the fact out.
    let app = TestApp::spawn_with_memory(backend, &["--sweep-interval-secs", "3600"]).await;
    remember(&app, json!({"fact": "Sharpens knives for the market"})).await;
    let brief = remember(&app, json!({"fact": "Is waiting at the ferry terminal", "ttl_seconds": 1})).await;
    assert!(brief["expires_at"].is_string(), "{brief}");
    let id = brief["id"].as_str().expect("id").to_owned();
    let (_, context) = app.get(CONTEXT, &agent("acme")).await;
    assert_eq!(texts(&context["facts"]), ["Is waiting at the ferry terminal", "Sharpens knives for the market"]);

    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (_, context) = app.get(CONTEXT, &agent("acme")).await;
    assert_eq!(texts(&context["facts"]), ["Sharpens knives for the market"], "gone the moment it expired");
    assert!(!context["prompt"].as_str().unwrap_or("").contains("ferry"), "{context}");
    let [list, found, _] = reads(&app, "ferry terminal knives", "").await;
    assert_eq!(
        (list, found),
        (vec!["Sharpens knives for the market".to_owned()], vec!["Sharpens knives for the market".to_owned()])
    );
    let (status, body) = app.get(&format!("{FACTS}/{id}/history"), &agent("acme")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) = app.patch(&format!("{FACTS}/{id}"), &agent("acme"), json!({"score": 0.5})).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (_, export) = app.get("/api/rgpd/users/ann/ai-data", &admin("acme")).await;
    assert_eq!(texts(&export["facts"]), ["Sharpens knives for the market"], "{export}");
    let exported = &export["facts"][0];
    assert!(exported["observed_at"].is_string() && exported["expires_at"].is_null(), "{exported}");
    let versions = export["fact_versions"].as_array().expect("fact_versions");
    assert!(versions.iter().all(|v| v["fact_id"] != brief["id"]), "no history of the expired fact: {export}");
    let (_, listed) = call_tool(&app, "list_memories", json!({})).await;
    assert_eq!(texts(&listed["items"]), ["Sharpens knives for the market"], "{listed}");
    // Still stored until a sweep: no read needed one.
    assert_eq!(count(&app, "SELECT count(*) FROM facts").await, 2);

    // Said again, it is a new fact: the expired one does not stand in for it.
    let (status, again) = app.post(FACTS, &agent("acme"), json!({"fact": "Is waiting at the ferry terminal"})).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_ne!(again["id"], brief["id"]);
    assert_eq!(again["expires_at"], Value::Null);
}

async fn the_sweeper_deletes_an_expired_fact_with_its_vector_and_history(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--sweep-interval-secs", "1"]).await;
    remember(&app, json!({"fact": "Sharpens knives for the market"})).await;
    let brief = remember(&app, json!({"fact": "Is waiting at the ferry terminal", "ttl_seconds": 2})).await;
    let id: uuid::Uuid = brief["id"].as_str().expect("id").parse().expect("uuid");
    // A vector, as the embedding worker stores one (embeddings are off in tests).
    insert_vector(&app, id).await;
    assert_eq!(count(&app, "SELECT count(*) FROM fact_vectors").await, 1);
    assert_eq!(count(&app, "SELECT count(*) FROM fact_versions").await, 2);

    let swept = eventually(Duration::from_secs(15), || async {
        (count(&app, "SELECT count(*) FROM facts").await == 1).then_some(())
    })
    .await;
    assert!(swept.is_some(), "the sweeper deletes the expired fact");
    assert_eq!(count(&app, "SELECT count(*) FROM fact_vectors").await, 0, "its vector goes with it");
    assert_eq!(count(&app, "SELECT count(*) FROM fact_versions").await, 1, "its history goes with it");
    let (_, list) = app.get(FACTS, &agent("acme")).await;
    assert_eq!(texts(&list["items"]), ["Sharpens knives for the market"]);

    let (_, events) = app.get("/api/events?types=fact.deleted", &admin("acme")).await;
    let deleted = &events["items"][0];
    assert_eq!(events["items"].as_array().map(Vec::len), Some(1), "{events}");
    assert_eq!(deleted["data"]["fact_id"], brief["id"]);
    assert_eq!(deleted["data"]["reason"], "expired");
    assert_eq!((deleted["actor"]["kind"].clone(), deleted["external_ref"].clone()), (json!("sweeper"), json!("ann")));
    app.assert_metrics(&["engram_facts_expired_total"]).await;
}

async fn invalid_times_are_refused_and_change_nothing(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &[]).await;
    for body in [
        json!({"fact": "Sharpens knives for the market", "expires_at": "2099-01-01T00:00:00Z", "ttl_seconds": 60}),
        json!({"fact": "Sharpens knives for the market", "expires_at": "2020-01-01T00:00:00Z"}),
        json!({"fact": "Sharpens knives for the market", "ttl_seconds": 0}),
        json!({"fact": "Sharpens knives for the market", "ttl_seconds": 315_360_001}),
        json!({"fact": "Sharpens knives for the market", "ttl_seconds": "soon"}),
        json!({"fact": "Sharpens knives for the market", "ttl_seconds": 1.5}),
        json!({"fact": "Sharpens knives for the market", "expires_at": "tomorrow"}),
        json!({"fact": "Sharpens knives for the market", "observed_at": "2099-01-01T00:00:00Z"}),
        json!({"fact": "Sharpens knives for the market", "observed_at": "2025-13-01T00:00:00Z"}),
    ] {
        let (status, error) = app.post(FACTS, &agent("acme"), body.clone()).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
        let (status, error) = call_tool(&app, "remember", body.clone()).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    }
    let (_, both) = app
        .post(
            FACTS,
            &agent("acme"),
            json!({"fact": "Sharpens knives", "expires_at": "2099-01-01T00:00:00Z", "ttl_seconds": 60}),
        )
        .await;
    assert!(both["error"]["message"].as_str().is_some_and(|m| m.contains("not both")), "{both}");
    for path in [FACTS, &format!("{FACTS}/search?q=knives"), CONTEXT] {
        let join = if path.contains('?') { "&" } else { "?" };
        let bad: Vec<String> = ["as_of=yesterday", "as_of=2025-02-30T00:00:00Z", "as_of=", "as_of=2025-01-01"]
            .iter()
            .map(|q| format!("{join}{q}"))
            .collect();
        let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
        app.assert_invalid_queries(path, &agent("acme"), &bad).await;
    }
    let (status, error) =
        app.get(&format!("{FACTS}?as_of=2025-01-01T00:00:00Z&include_superseded=true"), &agent("acme")).await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    // Nothing was stored, nothing happened.
    assert_eq!(count(&app, "SELECT count(*) FROM facts").await, 0);
    let (_, events) = app.get("/api/events?types=fact.added,fact.updated,fact.superseded", &admin("acme")).await;
    assert_eq!(events["items"], json!([]));
}

async fn tools_remember_with_an_expiry(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &[]).await;
    let body = json!({"fact": "Is waiting at the ferry terminal", "ttl_seconds": 600.0, "observed_at": "2026-01-05T10:00:00Z"});
    let (status, fact) = call_tool(&app, "remember", body).await;
    assert_eq!(status, StatusCode::OK, "{fact}");
    assert_eq!((fact["source"].clone(), fact["observed_at"].clone()), (json!("agent"), json!("2026-01-05T10:00:00Z")));
    let expires: chrono::DateTime<chrono::Utc> =
        fact["expires_at"].as_str().expect("expires_at").parse().expect("time");
    let left = expires - chrono::Utc::now();
    assert!(left > chrono::TimeDelta::seconds(590) && left <= chrono::TimeDelta::seconds(600), "{fact}");
    let (_, tools) = app.get("/api/tools?format=openai", &agent("acme")).await;
    let remember =
        tools["tools"].as_array().expect("tools").iter().find(|t| t["function"]["name"] == "remember").cloned();
    let properties = remember.expect("remember")["function"]["parameters"]["properties"].clone();
    assert_eq!(properties["ttl_seconds"]["maximum"], 315_360_000, "{properties}");
    assert_eq!(properties["expires_at"]["format"], "date-time", "{properties}");
}

/// Stores a vector for fact `id` straight into the database, as the embedding worker
/// would (the fact's `updated_at` makes it current).
async fn insert_vector(app: &TestApp, id: uuid::Uuid) {
    let sql = "INSERT INTO fact_vectors (fact_id, model, dims, vector, fact_updated_at) \
               SELECT id, 'test-model', 1, $2, updated_at FROM facts WHERE id = $1";
    let vector = 1.0_f32.to_le_bytes().to_vec();
    match app.db.backend {
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(&app.db.url).await.expect("connect");
            sqlx::query(sql).bind(id).bind(vector).execute(&pool).await.expect("vector stored");
        }
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(&app.db.url).await.expect("connect");
            sqlx::query(sql).bind(id).bind(vector).execute(&pool).await.expect("vector stored");
        }
    }
}
