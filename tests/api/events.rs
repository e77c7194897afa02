//! The event feed and fact history (issue 25), on both backends: every change to memory
//! is one event written with the change (none for a replay, a refused or rolled-back
//! change), in commit order without gaps under concurrent writers; long polling, its
//! waiting reads capped per tenant; a
//! person's own feed for a user-bound token; the retention's expired cursor; a fact's
//! versions with their actors, Lyon → Paris by two extraction jobs; on PostgreSQL, events
//! held back while an older change of the same database runs, and only then.

use std::time::{Duration, Instant};

use crate::common::*;
use engram::{
    domain::{
        event::Actor,
        fact::{FactInput, Origin},
        ids::{AgentId, ExternalRef, TenantId},
        owner::Owner,
    },
    store::{Store, Tx},
};
use reqwest::StatusCode;
use serde_json::{Value, json};

on_both_backends!(
    every_change_is_one_event_and_a_replay_none,
    refused_and_rolled_back_changes_write_no_event,
    the_feed_pages_without_gaps_under_concurrent_writers,
    a_waiting_read_wakes_on_the_next_event_or_times_out_empty,
    waiting_reads_are_capped_per_tenant,
    a_user_bound_token_reads_only_its_own_person,
    a_cursor_older_than_the_retention_is_gone,
    history_shows_lyon_superseded_by_paris_with_the_job,
    bad_feed_queries_are_refused,
    a_fact_said_again_is_restored_once,
    a_remembered_facts_event_and_first_version_are_the_fact_as_stored,
    a_summary_is_two_events_by_its_job,
    a_dead_job_is_one_event,
);

const PERSON: &str = "whatsapp:+33 6 11 22 33 44";

fn facts_path(user: &str) -> String {
    format!("/api/agents/{AGENT}/users/{}/facts", enc(user))
}

/// Every event after `after`, read page by page (5 at a time, so paging is exercised).
async fn events_after(app: &TestApp, after: i64) -> Vec<Value> {
    let mut cursor = after;
    let mut all = Vec::new();
    loop {
        let (status, page) = app.get(&format!("/api/events?after={cursor}&limit=5"), &admin("acme")).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let items = page["items"].as_array().expect("items").clone();
        cursor = page["next_cursor"].as_i64().expect("next_cursor");
        if items.is_empty() {
            return all;
        }
        all.extend(items);
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().expect("type")).collect()
}

/// Stores "Rides a bike" for `user` of acme's agent in `tx`, straight through the store.
async fn store_a_fact(tx: &mut Tx, user: &str) {
    let (tenant, agent_id, user) = (
        TenantId::parse("acme".into()).unwrap(),
        AgentId::parse(AGENT.into()).unwrap(),
        ExternalRef::parse(user.into()).unwrap(),
    );
    let new = FactInput { fact: "Rides a bike".into(), tags: None, score: None, ..Default::default() }
        .validate(chrono::Utc::now())
        .unwrap();
    tx.insert_fact(Owner::new(&tenant, &agent_id, &user), &new, Origin::Manual, None).await.unwrap();
}

/// The id of the newest event (0 when none).
async fn last_id(app: &TestApp) -> i64 {
    events_after(app, 0).await.last().map_or(0, |e| e["id"].as_i64().expect("id"))
}

async fn every_change_is_one_event_and_a_replay_none(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    let thread = json!({"agent_id": AGENT, "external_ref": PERSON, "key": "order-42"});
    let (_, conversation) = app.post("/api/conversations", &token, thread.clone()).await;
    let id = conversation["id"].as_str().expect("id").to_owned();
    let (status, again) = app.post("/api/conversations", &token, thread).await;
    assert_eq!((status, again["id"].as_str()), (StatusCode::OK, Some(id.as_str())), "the key's thread, unchanged");
    // Messages are not memory changes; a replay of the same key changes nothing anyway.
    let body = json!({"messages": [{"role": "user", "content": "hello"}]});
    app.append_with_key(&id, &token, "key-1", &body).await;
    app.append_with_key(&id, &token, "key-1", &body).await;

    let (_, lyon) = app.post(&facts_path(PERSON), &token, json!({"fact": "Lives in Lyon"})).await;
    let (status, _) = app.post(&facts_path(PERSON), &token, json!({"fact": "lives in lyon!"})).await;
    assert_eq!(status, StatusCode::OK, "the same fact again: no change, no event");
    let (_, paris) = app.post(&facts_path(PERSON), &token, json!({"fact": "Lives in Paris"})).await;
    let fact = format!("{}/{}", facts_path(PERSON), paris["id"].as_str().unwrap());
    app.patch(&fact, &token, json!({"tags": ["home"]})).await;
    // Memory tools need the agent's memory on.
    app.put(&format!("/api/agents-config/{AGENT}"), &admin("acme"), json!({"memory_enabled": true})).await;
    let arguments = json!({"agent_id": AGENT, "external_ref": PERSON, "fact": "Plays chess"});
    let (status, _) = app.post("/api/tools/call", &token, json!({"name": "remember", "arguments": arguments})).await;
    assert_eq!(status, StatusCode::OK);
    app.delete(&fact, &token).await;
    app.put(&format!("/api/users/{}/consent", enc(PERSON)), &admin("acme"), json!({"ai_consent": true})).await;
    let document = format!("/api/agents/{AGENT}/users/{}/working-memory", enc(PERSON));
    app.put(&document, &token, json!({"content": "prefers mornings"})).await;
    app.delete(&document, &token).await;
    app.delete(&format!("/api/conversations/{id}/messages"), &token).await;
    app.post(&format!("/api/conversations/{id}/end"), &token, json!({})).await;
    app.post(&format!("/api/conversations/{id}/end"), &token, json!({})).await;
    app.delete(&format!("/api/conversations/{id}"), &token).await;
    app.delete(&facts_path(PERSON), &token).await;
    let (status, none) = app.delete(&facts_path(PERSON), &token).await;
    assert_eq!((status, none["deleted"].clone()), (StatusCode::OK, json!(0)), "nothing left: no change, no event");

    let events = events_after(&app, 0).await;
    assert_eq!(
        types(&events),
        [
            "conversation.created",
            "fact.added",
            "fact.superseded",
            "fact.added",
            "fact.updated",
            "agent.settings_changed",
            "fact.added",
            "fact.deleted",
            "consent.changed",
            "working_memory.written",
            "working_memory.deleted",
            "conversation.cleared",
            "conversation.ended",
            "conversation.deleted",
            "facts.forgotten",
        ],
        "{events:#?}"
    );
    let ids: Vec<i64> = events.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(ids.is_sorted() && ids.windows(2).all(|w| w[0] < w[1]), "ids only grow: {ids:?}");
    let actors: Vec<&str> = events.iter().map(|e| e["actor"]["kind"].as_str().unwrap()).collect();
    assert_eq!(actors[6], "agent", "the tool's fact: {:?}", events[6]);
    assert!(actors.iter().enumerate().all(|(i, a)| i == 6 || *a == "api"), "{actors:?}");
    assert_eq!(events[2]["data"]["fact"]["fact"], "Lives in Lyon");
    assert_eq!(events[2]["data"]["fact"]["superseded_by"], paris["id"]);
    assert_eq!(events[2]["data"]["fact_id"], lyon["id"]);
    assert_eq!(events[4]["data"]["fact"]["tags"], json!(["home"]));
    assert_eq!(events[8]["data"]["consent"], true);
    assert_eq!(events[8]["external_ref"], PERSON);
    assert!(events[8].get("agent_id").is_none(), "consent spans agents: {}", events[8]);
    assert_eq!(events[5]["data"]["settings"]["memory_enabled"], true);
    assert!(events[5].get("external_ref").is_none());
    assert_eq!(events[11]["data"]["count"], 1, "one message cleared");
    assert_eq!(events[14]["data"]["count"], 2, "Lyon and chess were left");
    assert!(events.iter().all(|e| e["created_at"].is_string()));

    // The erasure removes the person's events and writes its own, with the receipt only.
    let (status, receipt) =
        app.delete(&format!("/api/rgpd/users/{}/ai-data", enc(PERSON)), &crate::common::token("acme", "rgpd")).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_eq!(receipt["deleted"]["events"], 14, "all but the agent settings' event");
    let events = events_after(&app, 0).await;
    assert_eq!(types(&events), ["agent.settings_changed", "person.erased"], "{events:#?}");
    assert_eq!(events[1]["data"]["receipt_id"], receipt["receipt_id"]);
    assert!(!events[1].to_string().contains("33 6 11"), "the erasure's event never names the person");
    assert!(events[1]["id"].as_i64() > ids.last().copied(), "the erasure's event follows the ones it deleted");
}

async fn refused_and_rolled_back_changes_write_no_event(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--max-facts-per-user", "2"]).await;
    let token = agent("acme");
    app.post(&facts_path(PERSON), &token, json!({"fact": "Likes tea"})).await;
    let (_, coffee) = app.post(&facts_path(PERSON), &token, json!({"fact": "Likes coffee"})).await;
    let (status, _) = app.post(&facts_path(PERSON), &token, json!({"fact": "Likes jazz"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "over the cap");
    // An edit into a duplicate fails inside its transaction, which rolls back.
    let fact = format!("{}/{}", facts_path(PERSON), coffee["id"].as_str().unwrap());
    let (status, _) = app.patch(&fact, &token, json!({"fact": "likes tea"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = app.delete(&format!("{}/{}", facts_path(PERSON), uuid::Uuid::now_v7()), &token).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A transaction that stored a fact and is dropped without commit leaves no event.
    let store = Store::connect(&app.db.url, 2, Duration::from_secs(30)).await.unwrap();
    let mut tx = store.begin_change(Actor::Api).await.unwrap();
    store_a_fact(&mut tx, "someone-else").await;
    drop(tx);
    // Its rollback does not wait for this store's next writer: the app writes at once
    // (held, the write lock would keep it in the busy handler until it gave up).
    let (status, body) = app.post(&facts_path("a-third-person"), &token, json!({"fact": "Likes rain"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // A transaction without an actor cannot commit an event: it fails, and writes nothing.
    let mut tx = store.begin_write().await.unwrap();
    store_a_fact(&mut tx, "someone-else").await;
    assert!(tx.commit().await.is_err(), "an event without its actor is refused");
    store.close().await;

    let events = events_after(&app, 0).await;
    assert_eq!(types(&events), ["fact.added", "fact.added", "fact.added"], "{events:#?}");
    let (_, listed) = app.get(&format!("/api/agents/{AGENT}/users/someone-else/facts"), &token).await;
    assert_eq!(listed["items"], json!([]));
}

async fn the_feed_pages_without_gaps_under_concurrent_writers(backend: Backend) {
    const WRITERS: usize = 6;
    const EACH: usize = 20;
    let app = std::sync::Arc::new(TestApp::spawn(backend).await);
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let app = app.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..EACH {
                let (status, body) = app
                    .post(&facts_path(&format!("user-{w}")), &agent("acme"), json!({"fact": format!("Fact {i}")}))
                    .await;
                assert_eq!(status, StatusCode::CREATED, "{body}");
            }
        }));
    }
    // A reader follows the feed while they write, page by page, with long polls.
    let reader = {
        let app = app.clone();
        tokio::spawn(async move {
            let (mut cursor, mut seen) = (0_i64, Vec::new());
            while seen.len() < WRITERS * EACH {
                let path = format!("/api/events?after={cursor}&limit=7&wait=5");
                let (status, page) = app.get(&path, &admin("acme")).await;
                assert_eq!(status, StatusCode::OK, "{page}");
                for event in page["items"].as_array().unwrap() {
                    seen.push(event["id"].as_i64().unwrap());
                }
                let next = page["next_cursor"].as_i64().unwrap();
                assert!(next >= cursor);
                if next == cursor {
                    break;
                }
                cursor = next;
            }
            seen
        })
    };
    for writer in writers {
        writer.await.unwrap();
    }
    let seen = tokio::time::timeout(Duration::from_secs(60), reader).await.expect("reader done").unwrap();
    let expected: Vec<i64> = events_after(&app, 0).await.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert_eq!(expected.len(), WRITERS * EACH, "one event per fact");
    assert_eq!(seen, expected, "every event once, in id order, none skipped");
}

/// PostgreSQL commits concurrently: a change that began first may commit after a later
/// one. Its event has the lower id, so the feed holds the later event back until the
/// earlier change ends, and a reader's cursor never passes an event still to come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_holds_back_events_until_older_changes_end() {
    let app = std::sync::Arc::new(TestApp::spawn(Backend::Postgres).await);
    let store = Store::connect(&app.db.url, 2, Duration::from_secs(30)).await.unwrap();
    let mut slow = store.begin_change(Actor::Api).await.unwrap();
    store_a_fact(&mut slow, "slow").await;
    // A later change commits while the slow one runs.
    let (status, _) = app.post(&facts_path(PERSON), &agent("acme"), json!({"fact": "Likes tea"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let started = Instant::now();
    let (status, page) = app.get("/api/events?after=0", &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["items"], json!([]), "the later event waits for the slow change");
    assert_eq!(page["next_cursor"], 0);
    assert!(started.elapsed() >= Duration::from_millis(1500), "the read waited for it: {:?}", started.elapsed());

    let reader = {
        let app = app.clone();
        tokio::spawn(async move { app.get("/api/events?after=0", &admin("acme")).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    slow.commit().await.unwrap();
    let (status, page) = reader.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{page}");
    let facts: Vec<&str> =
        page["items"].as_array().unwrap().iter().filter_map(|e| e["data"]["fact"]["fact"].as_str()).collect();
    assert_eq!(facts, ["Rides a bike", "Likes tea"], "both, the slow change's first: {page}");
    store.close().await;
}

/// A transaction running in another database of the same server cannot write this
/// one's events: it holds nothing back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_does_not_wait_for_other_databases() {
    use sqlx::{Connection, Executor};
    let app = TestApp::spawn(Backend::Postgres).await;
    let mut elsewhere = sqlx::PgConnection::connect(&postgres_url()).await.unwrap();
    elsewhere.execute("BEGIN").await.unwrap();
    elsewhere.execute("SELECT pg_current_xact_id()").await.unwrap();
    let (status, _) = app.post(&facts_path(PERSON), &agent("acme"), json!({"fact": "Likes tea"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let started = Instant::now();
    let (_, page) = app.get("/api/events?after=0", &admin("acme")).await;
    assert_eq!(types(page["items"].as_array().unwrap()), ["fact.added"], "{page}");
    assert!(started.elapsed() < Duration::from_secs(1), "it did not wait: {:?}", started.elapsed());
    elsewhere.execute("ROLLBACK").await.unwrap();
}

async fn a_waiting_read_wakes_on_the_next_event_or_times_out_empty(backend: Backend) {
    let app = std::sync::Arc::new(TestApp::spawn(backend).await);
    let started = Instant::now();
    let (status, page) = app.get("/api/events?after=0&wait=1", &admin("acme")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!((page["items"].clone(), page["next_cursor"].clone()), (json!([]), json!(0)));
    assert!(started.elapsed() >= Duration::from_millis(900), "it waited: {:?}", started.elapsed());

    let waiting = {
        let app = app.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let (status, page) = app.get("/api/events?after=0&wait=20", &admin("acme")).await;
            (status, page, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    app.post(&facts_path(PERSON), &agent("acme"), json!({"fact": "Likes tea"})).await;
    let (status, page, took) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(types(page["items"].as_array().unwrap()), ["fact.added"]);
    assert_eq!(page["next_cursor"], page["items"][0]["id"]);
    assert!(took < Duration::from_secs(5), "woken by the write, not the time limit: {took:?}");
}

/// Three waiting reads of acme at once at a cap of two: one is answered 429 at once, while
/// the two others wait, another tenant and a read that does not wait are served; once
/// the two are answered (by acme's next event), acme may wait again.
async fn waiting_reads_are_capped_per_tenant(backend: Backend) {
    let app = std::sync::Arc::new(TestApp::spawn_with(backend, &["--event-waiters-per-tenant", "2"]).await);
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..3 {
        let (app, answers) = (app.clone(), answers.clone());
        tokio::spawn(async move {
            let path = "/api/events?after=0&wait=25";
            let _ = answers.send(app.send(reqwest::Method::GET, path, &admin("acme"), &[], None).await);
        });
    }
    let first = tokio::time::timeout(Duration::from_secs(20), answered.recv()).await;
    let (status, headers, body) = first.expect("one read is answered before any event").expect("answer");
    assert_error(status, &body, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    assert!(body["error"]["message"].as_str().unwrap().contains("ENGRAM_EVENT_WAITERS_PER_TENANT"), "{body}");
    assert_eq!(headers.get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));

    let (status, page) = app.get("/api/events?after=0", &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "a read that does not wait is not counted: {page}");
    let (status, page) = app.get("/api/events?after=0&wait=1", &admin("globex")).await;
    assert_eq!(status, StatusCode::OK, "another tenant has its own cap: {page}");

    app.post(&facts_path(PERSON), &agent("acme"), json!({"fact": "Likes tea"})).await;
    for _ in 0..2 {
        let (status, _, page) = answered.recv().await.expect("answer");
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(types(page["items"].as_array().unwrap()), ["fact.added"]);
    }
    let (status, page) = app.get("/api/events?after=0&wait=1", &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "the answered reads no longer count: {page}");
}

async fn a_user_bound_token_reads_only_its_own_person(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for user in [PERSON, "bystander"] {
        app.post(&facts_path(user), &agent("acme"), json!({"fact": "Likes tea"})).await;
    }
    app.post(
        &format!("/api/agents/other-bot/users/{}/facts", enc(PERSON)),
        &agent("acme"),
        json!({"fact": "Likes tea"}),
    )
    .await;
    let bound = token_with(json!({"scope": "memory:read", "agent_id": AGENT, "external_ref": PERSON}));
    let (status, body) = app.get("/api/events", &bound).await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");
    let own = format!("/api/agents/{AGENT}/users/{}/events", enc(PERSON));
    let (status, page) = app.get(&own, &bound).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{page}");
    assert_eq!((items[0]["agent_id"].as_str(), items[0]["external_ref"].as_str()), (Some(AGENT), Some(PERSON)));
    let (status, body) = app.get(&format!("/api/agents/{AGENT}/users/bystander/events"), &bound).await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");
    // The tenant feed filters the same way; another tenant sees none of it.
    let (_, page) = app.get(&format!("/api/events?external_ref={}", enc(PERSON)), &admin("acme")).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(2), "{page}");
    let (_, page) = app.get(&format!("/api/events?agent_id={AGENT}&types=fact.added"), &admin("acme")).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(2), "{page}");
    let (_, page) = app.get("/api/events?types=fact.deleted,consent.changed", &admin("acme")).await;
    assert_eq!(page["items"], json!([]));
    let (_, page) = app.get("/api/events", &admin("globex")).await;
    assert_eq!(page["items"], json!([]));
}

async fn a_cursor_older_than_the_retention_is_gone(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--event-retention", "1s", "--sweep-interval-secs", "1"]).await;
    app.post(&facts_path(PERSON), &agent("acme"), json!({"fact": "Likes tea"})).await;
    let first = last_id(&app).await;
    let pruned = eventually(Duration::from_secs(15), || async {
        let (_, page) = app.get("/api/events", &admin("acme")).await;
        (page["items"] == json!([])).then_some(())
    })
    .await;
    assert!(pruned.is_some(), "the sweeper deleted the expired event");
    let (status, body) = app.get("/api/events?after=0", &admin("acme")).await;
    assert_error(status, &body, StatusCode::GONE, "gone");
    let (status, page) = app.get(&format!("/api/events?after={first}"), &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "a cursor at the pruned event misses nothing: {page}");
    // New events follow on from the deleted ones' ids.
    app.post(&facts_path(PERSON), &agent("acme"), json!({"fact": "Likes jazz"})).await;
    let (_, page) = app.get(&format!("/api/events?after={first}"), &admin("acme")).await;
    assert!(page["items"][0]["id"].as_i64() > Some(first), "{page}");
}

async fn history_shows_lyon_superseded_by_paris_with_the_job(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--job-poll-ms", "50"]).await;
    let (_, ended) =
        converse(&app, "concierge", "ann", &["I live in Lyon.", "I like tea.", "I work as a nurse."]).await;
    let first_job = job_id(&ended);
    job_reaching(&app, &first_job, &["succeeded"], Duration::from_secs(20)).await;
    let (_, ended) =
        converse(&app, "concierge", "ann", &["Big news!", "I moved to Paris last month.", "It is lovely."]).await;
    let second_job = job_id(&ended);
    job_reaching(&app, &second_job, &["succeeded"], Duration::from_secs(20)).await;

    let facts = "/api/agents/concierge/users/ann/facts";
    let (_, all) = app.get(&format!("{facts}?include_superseded=true"), &agent("acme")).await;
    let find = |prefix: &str| {
        all["items"].as_array().unwrap().iter().find(|f| f["fact"].as_str().unwrap().starts_with(prefix)).cloned()
    };
    let (lyon, paris) = (find("Lives in Lyon").expect("Lyon"), find("Moved to Paris").expect("Paris"));
    let (status, history) = app.get(&format!("{facts}/{}/history", lyon["id"].as_str().unwrap()), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let versions = history["items"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "{history}");
    assert_eq!((versions[0]["version"].clone(), versions[0]["change"].clone()), (json!(1), json!("fact.added")));
    assert_eq!(versions[0]["actor"], json!({"kind": "extraction", "job_id": first_job}));
    assert_eq!(versions[0]["fact"]["superseded_by"], Value::Null);
    assert_eq!(versions[1]["change"], "fact.superseded");
    assert_eq!(versions[1]["actor"], json!({"kind": "extraction", "job_id": second_job}));
    assert_eq!(versions[1]["fact"]["superseded_by"], paris["id"]);
    assert_eq!(versions[1]["fact"]["fact"], "Lives in Lyon");

    // Each job's success is an event too, by the job, after its facts.
    let events = events_after(&app, 0).await;
    let succeeded: Vec<&Value> = events.iter().filter(|e| e["type"] == "job.succeeded").collect();
    assert_eq!(succeeded.len(), 2);
    assert_eq!(succeeded[1]["data"]["job_id"], json!(second_job));
    assert_eq!(succeeded[1]["actor"]["job_id"], json!(second_job));

    // An unknown or other person's fact has no history.
    let (status, body) = app.get(&format!("{facts}/{}/history", uuid::Uuid::now_v7()), &agent("acme")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let other = format!("/api/agents/concierge/users/bob/facts/{}/history", lyon["id"].as_str().unwrap());
    let (status, _) = app.get(&other, &agent("acme")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.get(&format!("{facts}/{}/history", lyon["id"].as_str().unwrap()), &agent("globex")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn bad_feed_queries_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let before = last_id(&app).await;
    app.assert_invalid_queries(
        "/api/events",
        &admin("acme"),
        &[
            "?after=-1",
            "?after=9007199254740992",
            "?limit=0",
            "?limit=1001",
            "?wait=31",
            "?types=fact.eaten",
            "?types=fact.added,",
            "?agent_id=",
            "?after=x",
        ],
    )
    .await;
    assert_eq!(last_id(&app).await, before);
    let (status, body) = app.get("/api/events", &token("acme", "rgpd")).await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");
}

async fn a_fact_said_again_is_restored_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    let (_, lyon) = app.post(&facts_path(PERSON), &token, json!({"fact": "Lives in Lyon"})).await;
    let (_, paris) = app.post(&facts_path(PERSON), &token, json!({"fact": "Lives in Paris"})).await;
    let (status, again) = app.post(&facts_path(PERSON), &token, json!({"fact": "Lives in Lyon"})).await;
    assert_eq!((status, again["superseded_by"].clone()), (StatusCode::OK, Value::Null), "{again}");
    let events = events_after(&app, 0).await;
    assert_eq!(
        types(&events),
        ["fact.added", "fact.superseded", "fact.added", "fact.superseded", "fact.restored"],
        "{events:#?}"
    );
    assert_eq!(events[3]["data"]["fact_id"], paris["id"]);
    assert_eq!(events[3]["data"]["fact"]["superseded_by"], lyon["id"]);
    assert_eq!(events[4]["data"]["fact_id"], lyon["id"]);
    let history = format!("{}/{}/history", facts_path(PERSON), lyon["id"].as_str().unwrap());
    let (_, versions) = app.get(&history, &token).await;
    let changes: Vec<&str> =
        versions["items"].as_array().unwrap().iter().map(|v| v["change"].as_str().unwrap()).collect();
    assert_eq!(changes, ["fact.added", "fact.superseded", "fact.restored"]);
}

/// A new fact's event and first version carry the fact exactly as stored, to the
/// microsecond and the tag (PostgreSQL writes them with the fact's own statement, from
/// the fact computed before it runs), and a change that writes several events keeps
/// them in order: a fact said again while expired is one deletion, then one addition.
async fn a_remembered_facts_event_and_first_version_are_the_fact_as_stored(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    let before = last_id(&app).await;
    let input = json!({
        "fact": "Keeps   bees\tin the garden",
        "tags": ["hobby", "outdoors"],
        "score": 0.8125,
        "observed_at": "2025-03-04T05:06:07.1234567Z",
        "ttl_seconds": 86_400,
    });
    let (status, stored) = app.post(&facts_path(PERSON), &token, input).await;
    assert_eq!(status, StatusCode::CREATED, "{stored}");
    assert_eq!(stored["observed_at"], "2025-03-04T05:06:07.123456Z", "{stored}");
    let (_, listed) = app.get(&facts_path(PERSON), &token).await;
    assert_eq!(listed["items"][0], stored, "the answer is the fact as a later read finds it");
    let events = events_after(&app, before).await;
    assert_eq!(types(&events), ["fact.added"], "{events:#?}");
    assert_eq!(events[0]["data"]["fact_id"], stored["id"]);
    assert_eq!(events[0]["data"]["fact"], stored);
    assert_eq!(events[0]["actor"], json!({"kind": "api"}));
    let history = format!("{}/{}/history", facts_path(PERSON), stored["id"].as_str().unwrap());
    let (_, versions) = app.get(&history, &token).await;
    assert_eq!(versions["items"].as_array().map(Vec::len), Some(1), "{versions}");
    assert_eq!(versions["items"][0]["fact"], stored);

    // Expired, then said again: the old fact's deletion, then the new fact's addition.
    let (_, short) =
        app.post(&facts_path(PERSON), &token, json!({"fact": "Waits for a parcel", "ttl_seconds": 1})).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let after = last_id(&app).await;
    let (status, again) = app.post(&facts_path(PERSON), &token, json!({"fact": "Waits for a parcel"})).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    let events = events_after(&app, after).await;
    assert_eq!(types(&events), ["fact.deleted", "fact.added"], "{events:#?}");
    assert_eq!((&events[0]["data"]["fact_id"], &events[1]["data"]["fact"]), (&short["id"], &again));
}

async fn a_summary_is_two_events_by_its_job(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--job-poll-ms", "50"]).await;
    let body = json!({"summarize_after_messages": 2, "summary_window": 1});
    app.put(&format!("/api/agents-config/{AGENT}"), &admin("acme"), body).await;
    let (_, conversation) =
        app.post("/api/conversations", &agent("acme"), json!({"agent_id": AGENT, "external_ref": PERSON})).await;
    let id = conversation["id"].as_str().unwrap();
    let messages: Vec<Value> = ["I carve spoons.", "Lovely!", "And goats too."]
        .iter()
        .enumerate()
        .map(|(i, text)| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": text}))
        .collect();
    app.post(&format!("/api/conversations/{id}/messages"), &agent("acme"), json!({"messages": messages})).await;
    let summarized = eventually(Duration::from_secs(20), || async {
        let events = events_after(&app, 0).await;
        events.iter().any(|e| e["type"] == "job.succeeded").then_some(events)
    })
    .await
    .expect("the summary job succeeds");
    let kinds = types(&summarized);
    assert_eq!(kinds[kinds.len() - 2..], ["conversation.summarized", "job.succeeded"], "{summarized:#?}");
    let job = &summarized[summarized.len() - 1];
    assert_eq!(job["data"]["job_kind"], "summarize");
    assert_eq!(job["actor"]["kind"], "summary");
    assert_eq!(job["actor"]["job_id"], job["data"]["job_id"]);
    assert_eq!(summarized[summarized.len() - 2]["data"]["conversation_id"], conversation["id"]);
}

async fn a_dead_job_is_one_event(backend: Backend) {
    // An LLM extractor nobody answers, one attempt, no fallback: the job dies.
    let flags = [
        "--extractor",
        "openai",
        "--llm-base-url",
        "http://127.0.0.1:9/v1",
        "--llm-model",
        "m",
        "--job-max-attempts",
        "1",
        "--llm-fallback",
        "none",
        "--job-poll-ms",
        "50",
    ];
    let app = TestApp::spawn_with_memory(backend, &flags).await;
    let (_, ended) = converse(&app, "concierge", "ann", &["I live in Oslo.", "I like tea.", "I carve spoons."]).await;
    let job = job_id(&ended);
    job_reaching(&app, &job, &["dead"], Duration::from_secs(20)).await;
    let events = events_after(&app, 0).await;
    let dead: Vec<&Value> = events.iter().filter(|e| e["type"] == "job.dead").collect();
    assert_eq!(dead.len(), 1, "{events:#?}");
    assert_eq!(dead[0]["data"]["job_id"], json!(job));
    assert_eq!(dead[0]["actor"], json!({"kind": "extraction", "job_id": job}));
    assert_eq!(dead[0]["external_ref"], "ann");
    assert!(!events.iter().any(|e| e["type"] == "job.succeeded" || e["type"] == "fact.added"));
}
