//! Conversations, messages, ending (the extraction decision), jobs listing and the idle
//! sweeper, on both backends.

use std::{collections::HashSet, time::Duration};

use crate::common::*;
use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};

on_both_backends!(
    create_returns_the_conversation_and_get_finds_it,
    create_rejects_invalid_bodies,
    patch_changes_title_and_metadata_only,
    list_filters_and_orders_most_recently_updated_first,
    list_paginates_with_a_cursor,
    append_numbers_messages_and_counts_user_turns,
    append_keeps_optional_fields_as_given,
    concurrent_appends_get_seqs_without_gaps,
    idempotent_retry_stores_once_and_returns_the_first_response,
    idempotency_key_with_another_body_is_a_conflict,
    concurrent_requests_with_one_key_store_once,
    a_conflict_over_a_conversation_key_is_answered_once_the_conversation_is_readable,
    invalid_idempotency_key_is_rejected,
    batch_with_one_bad_message_stores_nothing,
    batch_size_must_be_1_to_100,
    oversized_message_is_payload_too_large,
    messages_paginate_with_a_cursor,
    last_returns_the_newest_messages_oldest_first,
    sanitize_keeps_only_complete_tool_turns,
    end_with_memory_off_is_memory_disabled,
    end_with_consent_refused_is_consent_refused,
    end_with_too_few_user_turns_is_too_few_user_turns,
    second_end_is_nothing_new,
    end_queues_an_extract_job_visible_in_jobs,
    concurrent_ends_queue_exactly_one_job,
    appending_to_an_ended_conversation_reopens_it,
    idle_sweeper_ends_idle_conversations,
    other_tenants_get_404_on_every_route,
    lists_are_scoped_to_the_tenant,
    delete_removes_messages_and_keeps_jobs,
    scopes_are_enforced,
    jobs_list_paginates_newest_first,
);

async fn create(app: &TestApp, token: &str, agent: &str, user: &str) -> Value {
    let (status, body) = app.post("/api/conversations", token, json!({"agent_id": agent, "external_ref": user})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

/// A fresh app, an agent token of tenant `acme` and a new thread of [`AGENT`] and [`USER`].
async fn app_with_thread(backend: Backend) -> (TestApp, String, String) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    let id = id_of(&create(&app, &token, AGENT, USER).await);
    (app, token, id)
}

fn id_of(value: &Value) -> String {
    value["id"].as_str().expect("an id").to_owned()
}

fn user_msg(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn assistant_msg(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

async fn append(app: &TestApp, token: &str, id: &str, messages: Vec<Value>) -> (StatusCode, Value) {
    app.post(&format!("/api/conversations/{id}/messages"), token, json!({"messages": messages})).await
}

#[track_caller]
fn assert_created(status: StatusCode, body: &Value) {
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

async fn append_with_key(app: &TestApp, id: &str, key: &str, body: &Value) -> (StatusCode, Value) {
    app.append_with_key(id, &agent("acme"), key, body).await
}

async fn messages(app: &TestApp, id: &str, query: &str) -> Value {
    let (status, body) = app.get(&format!("/api/conversations/{id}/messages{query}"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn seqs(page: &Value) -> Vec<i64> {
    page["items"].as_array().expect("items").iter().map(|m| m["seq"].as_i64().expect("seq")).collect()
}

fn contents(page: &Value) -> Vec<String> {
    page["items"].as_array().expect("items").iter().map(|m| m["content"].as_str().unwrap_or("").to_owned()).collect()
}

/// A conversation with `turns` user messages, each followed by an assistant reply.
async fn conversation_with_turns(app: &TestApp, turns: usize) -> String {
    let id = id_of(&create(app, &agent("acme"), AGENT, USER).await);
    let mut batch = Vec::new();
    for n in 0..turns {
        batch.push(user_msg(&format!("user says {n}")));
        batch.push(assistant_msg(&format!("assistant says {n}")));
    }
    if !batch.is_empty() {
        let (status, body) = append(app, &agent("acme"), &id, batch).await;
        assert_created(status, &body);
    }
    id
}

async fn end(app: &TestApp, id: &str) -> Value {
    let (status, body) = app.post(&format!("/api/conversations/{id}/end"), &agent("acme"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn jobs_of(app: &TestApp, conversation: &str) -> Vec<Value> {
    let (status, body) = app.get(&format!("/api/jobs?conversation_id={conversation}"), &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["items"].as_array().expect("items").clone()
}

async fn create_returns_the_conversation_and_get_finds_it(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    let (status, created) = app
        .post(
            "/api/conversations",
            &token,
            json!({"agent_id": AGENT, "external_ref": USER, "title": "Order 42", "metadata": {"channel": "whatsapp"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert!(uuid::Uuid::parse_str(created["id"].as_str().unwrap()).is_ok());
    assert_eq!(created["agent_id"], AGENT);
    assert_eq!(created["external_ref"], USER);
    assert_eq!(created["title"], "Order 42");
    assert_eq!(created["metadata"], json!({"channel": "whatsapp"}));
    assert_eq!(created["status"], "open");
    assert_eq!(created["message_count"], 0);
    assert_eq!(created["user_turns"], 0);
    assert_eq!(created["ended_at"], Value::Null);
    assert_eq!(created["created_at"], created["updated_at"]);

    let (status, fetched) = app.get(&format!("/api/conversations/{}", id_of(&created)), &token).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fetched, created);

    let bare = create(&app, &token, AGENT, USER).await;
    assert_eq!(bare["title"], Value::Null);
    assert_eq!(bare["metadata"], json!({}));
}

async fn create_rejects_invalid_bodies(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    for body in [
        json!({"agent_id": AGENT}),
        json!({"external_ref": USER}),
        json!({"agent_id": "bad agent", "external_ref": USER}),
        json!({"agent_id": AGENT, "external_ref": ""}),
        json!({"agent_id": AGENT, "external_ref": USER, "metadata": [1]}),
        json!({"agent_id": AGENT, "external_ref": USER, "title": "x".repeat(501)}),
        json!({"agent_id": AGENT, "external_ref": USER, "status": "ended"}),
    ] {
        let (status, error) = app.post("/api/conversations", &token, body.clone()).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    }
    let (_, list) = app.get("/api/conversations", &token).await;
    assert_eq!(list["items"], json!([]));
    let (status, error) = app.get("/api/conversations/not-a-uuid", &token).await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
}

async fn patch_changes_title_and_metadata_only(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    let created = create(&app, &token, AGENT, USER).await;
    let path = format!("/api/conversations/{}", id_of(&created));

    let (status, patched) = app.patch(&path, &token, json!({"title": "Refund", "metadata": {"k": 1}})).await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["title"], "Refund");
    assert_eq!(patched["metadata"], json!({"k": 1}));
    assert_eq!(patched["agent_id"], AGENT);
    assert!(patched["updated_at"].as_str() >= created["updated_at"].as_str());

    let (_, kept) = app.patch(&path, &token, json!({"metadata": {"k": 2}})).await;
    assert_eq!(kept["title"], "Refund", "an absent title is kept");
    let (_, cleared) = app.patch(&path, &token, json!({"title": null})).await;
    assert_eq!(cleared["title"], Value::Null);
    assert_eq!(cleared["metadata"], json!({"k": 2}));

    for bad in [json!({"status": "ended"}), json!({"metadata": "x"}), json!({"title": 5})] {
        let (status, error) = app.patch(&path, &token, bad).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    }
    let (_, after) = app.get(&path, &token).await;
    assert_eq!(after, cleared);
}

async fn list_filters_and_orders_most_recently_updated_first(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    let a = id_of(&create(&app, &token, "bot-a", "u1").await);
    let b = id_of(&create(&app, &token, "bot-b", "u1").await);
    let c = id_of(&create(&app, &token, "bot-a", "u2").await);
    // Touch `a` last, and end `b`.
    end(&app, &b).await;
    let (status, body) = append(&app, &token, &a, vec![user_msg("hello")]).await;
    assert_created(status, &body);

    let ids = |page: &Value| -> Vec<String> { page["items"].as_array().unwrap().iter().map(id_of).collect() };
    let (_, all) = app.get("/api/conversations", &token).await;
    assert_eq!(ids(&all), [a.clone(), b.clone(), c.clone()]);
    assert_eq!(all["next_cursor"], Value::Null);
    let (_, by_agent) = app.get("/api/conversations?agent_id=bot-a", &token).await;
    assert_eq!(ids(&by_agent), [a.clone(), c.clone()]);
    let (_, by_user) = app.get(&format!("/api/conversations?external_ref={}", enc("u1")), &token).await;
    assert_eq!(ids(&by_user), [a.clone(), b.clone()]);
    let (_, ended) = app.get("/api/conversations?status=ended", &token).await;
    assert_eq!(ids(&ended), [b]);
    let (_, open_a_u2) = app.get("/api/conversations?status=open&agent_id=bot-a&external_ref=u2", &token).await;
    assert_eq!(ids(&open_a_u2), [c]);
    app.assert_invalid_queries(
        "/api/conversations",
        &token,
        &["?status=closed", "?agent_id=a%20b", "?limit=0", "?limit=201", "?cursor=nope"],
    )
    .await;
}

async fn list_paginates_with_a_cursor(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    let mut created = Vec::new();
    for _ in 0..5 {
        created.push(id_of(&create(&app, &token, AGENT, USER).await));
    }
    created.reverse();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = cursor.as_ref().map_or("?limit=2".to_owned(), |c| format!("?limit=2&cursor={c}"));
        let (status, page) = app.get(&format!("/api/conversations{query}"), &token).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert!(page["items"].as_array().unwrap().len() <= 2);
        seen.extend(page["items"].as_array().unwrap().iter().map(id_of));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, created);
}

async fn append_numbers_messages_and_counts_user_turns(backend: Backend) {
    let (app, token, id) = app_with_thread(backend).await;
    let (status, first) = append(
        &app,
        &token,
        &id,
        vec![json!({"role": "system", "content": "Be kind"}), user_msg("Hi, I'm Alice"), assistant_msg("Hello")],
    )
    .await;
    assert_created(status, &first);
    let stored = first["messages"].as_array().unwrap();
    assert_eq!(stored.iter().map(|m| m["seq"].as_i64().unwrap()).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(stored.iter().all(|m| m["conversation_id"] == id.as_str() && m["id"].is_string()));
    assert_eq!(stored[1]["role"], "user");
    assert_eq!(stored[1]["content"], "Hi, I'm Alice");
    assert_eq!(first["conversation"]["message_count"], 3);
    assert_eq!(first["conversation"]["user_turns"], 1);

    let (status, second) = append(&app, &token, &id, vec![user_msg("I like tea")]).await;
    assert_created(status, &second);
    assert_eq!(second["messages"][0]["seq"], 4);
    assert_eq!(second["conversation"]["message_count"], 4);
    assert_eq!(second["conversation"]["user_turns"], 2);
    let (_, fetched) = app.get(&format!("/api/conversations/{id}"), &token).await;
    assert_eq!(fetched, second["conversation"]);

    let page = messages(&app, &id, "").await;
    assert_eq!(seqs(&page), [1, 2, 3, 4]);
    assert_eq!(page["items"][1], first["messages"][1], "read back as stored");
}

async fn append_keeps_optional_fields_as_given(backend: Backend) {
    let (app, token, id) = app_with_thread(backend).await;
    let sent = vec![
        json!({"role": "user", "name": "alice", "content": [{"type": "text", "text": "what is 2+2?"}],
               "metadata": {"lang": "en", "nested": {"x": [1, 2]}}}),
        json!({"role": "assistant", "content": "",
               "tool_calls": [{"id": "call_1", "name": "calc", "arguments": {"expr": "2+2"}}]}),
        json!({"role": "tool", "content": "4", "tool_call_id": "call_1"}),
    ];
    let (status, body) = append(&app, &token, &id, sent.clone()).await;
    assert_created(status, &body);
    let page = messages(&app, &id, "").await;
    for (stored, sent) in page["items"].as_array().unwrap().iter().zip(&sent) {
        for (field, value) in sent.as_object().unwrap() {
            assert_eq!(&stored[field], value, "{field}");
        }
    }
    assert!(page["items"][0].get("tool_calls").is_none(), "absent fields stay absent");
    assert!(page["items"][1].get("metadata").is_none());
}

async fn concurrent_appends_get_seqs_without_gaps(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let id = id_of(&create(&app, &agent("acme"), AGENT, USER).await);
    let appends = (0..50).map(|n| {
        let (app, id) = (&app, &id);
        async move { append(app, &agent("acme"), id, vec![user_msg(&format!("message {n}"))]).await }
    });
    for (status, body) in join_all(appends).await {
        assert_created(status, &body);
    }
    let page = messages(&app, &id, "").await;
    assert_eq!(seqs(&page), (1..=50).collect::<Vec<_>>());
    let texts: HashSet<String> = contents(&page).into_iter().collect();
    assert_eq!(texts, (0..50).map(|n| format!("message {n}")).collect::<HashSet<_>>());
    let (_, conversation) = app.get(&format!("/api/conversations/{id}"), &agent("acme")).await;
    assert_eq!(conversation["message_count"], 50);
    assert_eq!(conversation["user_turns"], 50);
}

async fn idempotent_retry_stores_once_and_returns_the_first_response(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let id = id_of(&create(&app, &agent("acme"), AGENT, USER).await);
    let body = json!({"messages": [user_msg("pay my bill"), assistant_msg("done")]});
    let (status, first) = append_with_key(&app, &id, "retry-7f3a", &body).await;
    assert_created(status, &first);
    // The same request resent with another layout is the same request.
    let relaid = json!({"messages": [{"content": "pay my bill", "role": "user"}, assistant_msg("done")]});
    let (status, second) = append_with_key(&app, &id, "retry-7f3a", &relaid).await;
    assert_created(status, &second);
    assert_eq!(second, first);
    assert_eq!(seqs(&messages(&app, &id, "").await), [1, 2]);
    // Another key is another request.
    let (status, third) = append_with_key(&app, &id, "retry-other", &body).await;
    assert_created(status, &third);
    assert_eq!(third["messages"][0]["seq"], 3);
}

async fn idempotency_key_with_another_body_is_a_conflict(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let id = id_of(&create(&app, &agent("acme"), AGENT, USER).await);
    let (status, first) = append_with_key(&app, &id, "k1", &json!({"messages": [user_msg("a")]})).await;
    assert_created(status, &first);
    let (status, error) = append_with_key(&app, &id, "k1", &json!({"messages": [user_msg("b")]})).await;
    assert_error(status, &error, StatusCode::CONFLICT, "conflict");
    assert_eq!(contents(&messages(&app, &id, "").await), ["a"]);
    // Keys are per conversation.
    let other = id_of(&create(&app, &agent("acme"), AGENT, USER).await);
    let (status, _) = append_with_key(&app, &other, "k1", &json!({"messages": [user_msg("b")]})).await;
    assert_eq!(status, StatusCode::CREATED);
}

async fn concurrent_requests_with_one_key_store_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = json!({"messages": [user_msg("only once")]});
    // Several rounds: a replay is answered once the first request's messages are readable
    // (on SQLite the two may share one group commit), which one round may not race.
    for _ in 0..5 {
        let id = id_of(&create(&app, &agent("acme"), AGENT, USER).await);
        let requests = (0..10).map(|_| async {
            let answer = append_with_key(&app, &id, "same-key", &body).await;
            assert_eq!(seqs(&messages(&app, &id, "").await), [1], "an answer before its messages are readable");
            answer
        });
        let answers = join_all(requests).await;
        for (status, answer) in &answers {
            assert_created(*status, answer);
            assert_eq!(answer["messages"], answers[0].1["messages"], "every answer is the first response");
        }
        assert_eq!(seqs(&messages(&app, &id, "").await), [1]);
    }
}

/// Two creates racing for one key with different fields: the loser's 409 says the key is
/// taken, so a read right after it must find the winner's conversation. On SQLite both
/// writers may share one group commit; the conflict is answered only once that group is
/// in the file, never from a row another writer has not yet committed.
async fn a_conflict_over_a_conversation_key_is_answered_once_the_conversation_is_readable(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    for round in 0..40 {
        let key = format!("thread-{round}");
        let by_key = format!("/api/conversations?agent_id=bot&key={}", enc(&key));
        let creates = ["first", "second"].map(|title| {
            let body =
                json!({"agent_id": "bot", "external_ref": "u1", "key": key, "title": format!("{title} {round}")});
            let (app, token, by_key) = (&app, &token, &by_key);
            async move {
                let (status, created) = app.post("/api/conversations", token, body).await;
                if status == StatusCode::CONFLICT {
                    let (_, found) = app.get(by_key, token).await;
                    let items = found["items"].as_array().map_or(0, Vec::len);
                    assert_eq!(items, 1, "round {round}: a 409 for a key no read finds yet: {found}");
                } else {
                    assert_eq!(status, StatusCode::CREATED, "{created}");
                }
                status
            }
        });
        let statuses = join_all(creates).await;
        assert!(statuses.contains(&StatusCode::CREATED), "round {round}: {statuses:?}");
    }
}

async fn invalid_idempotency_key_is_rejected(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let id = id_of(&create(&app, &agent("acme"), AGENT, USER).await);
    let body = json!({"messages": [user_msg("x")]});
    for key in ["", "has space", &"k".repeat(256)] {
        let (status, error) = append_with_key(&app, &id, key, &body).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    }
    assert_eq!(seqs(&messages(&app, &id, "").await), Vec::<i64>::new());
}

async fn batch_with_one_bad_message_stores_nothing(backend: Backend) {
    let (app, token, id) = app_with_thread(backend).await;
    for bad in [
        json!({"role": "robot", "content": "x"}),
        json!({"role": "user", "content": 42}),
        json!({"role": "user", "content": null}),
        json!({"role": "user", "content": "x", "extra": true}),
        json!({"role": "user", "content": "x", "metadata": "m"}),
        json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "f", "arguments": [1]}]}),
    ] {
        let (status, error) = append(&app, &token, &id, vec![user_msg("fine"), bad.clone(), user_msg("fine")]).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    }
    assert_eq!(seqs(&messages(&app, &id, "").await), Vec::<i64>::new());
    let (_, conversation) = app.get(&format!("/api/conversations/{id}"), &token).await;
    assert_eq!(conversation["message_count"], 0);
    let (_, next) = append(&app, &token, &id, vec![user_msg("first")]).await;
    assert_eq!(next["messages"][0]["seq"], 1, "a refused batch leaves no gap");
}

async fn batch_size_must_be_1_to_100(backend: Backend) {
    let (app, token, id) = app_with_thread(backend).await;
    let (status, error) = append(&app, &token, &id, vec![]).await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, error) = append(&app, &token, &id, vec![user_msg("x"); 101]).await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(seqs(&messages(&app, &id, "").await), Vec::<i64>::new());
    let (status, body) = append(&app, &token, &id, vec![user_msg("x"); 100]).await;
    assert_created(status, &body);
    assert_eq!(body["conversation"]["message_count"], 100);
}

async fn oversized_message_is_payload_too_large(backend: Backend) {
    let (app, token, id) = app_with_thread(backend).await;
    let (status, error) = append(&app, &token, &id, vec![user_msg("ok"), user_msg(&"x".repeat(70_000))]).await;
    assert_error(status, &error, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    // Over the 1 MiB body limit, in messages that are each small enough.
    let (status, error) = append(&app, &token, &id, vec![user_msg(&"y".repeat(60_000)); 20]).await;
    assert_error(status, &error, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert_eq!(seqs(&messages(&app, &id, "").await), Vec::<i64>::new());
}

async fn messages_paginate_with_a_cursor(backend: Backend) {
    let (app, token, id) = app_with_thread(backend).await;
    let batch: Vec<Value> = (1..=7).map(|n| user_msg(&format!("m{n}"))).collect();
    append(&app, &token, &id, batch).await;

    let first = messages(&app, &id, "?limit=3").await;
    assert_eq!(seqs(&first), [1, 2, 3]);
    let cursor = first["next_cursor"].as_str().expect("a next page").to_owned();
    let second = messages(&app, &id, &format!("?limit=3&cursor={cursor}")).await;
    assert_eq!(seqs(&second), [4, 5, 6]);
    let cursor = second["next_cursor"].as_str().expect("a next page").to_owned();
    let third = messages(&app, &id, &format!("?limit=3&cursor={cursor}")).await;
    assert_eq!(seqs(&third), [7]);
    assert_eq!(third["next_cursor"], Value::Null);
    assert_eq!(seqs(&messages(&app, &id, "").await), (1..=7).collect::<Vec<_>>());
    app.assert_invalid_queries(
        &format!("/api/conversations/{id}/messages"),
        &token,
        // `last` out of range, or with paging (it reads one window: newest, oldest first).
        &[
            "?limit=0",
            "?limit=1001",
            "?cursor=zzz",
            "?sanitize=maybe",
            "?last=0",
            "?last=1001",
            "?last=2&limit=2",
            "?last=2&cursor=Mg",
        ],
    )
    .await;
}

async fn last_returns_the_newest_messages_oldest_first(backend: Backend) {
    let (app, token, id) = app_with_thread(backend).await;
    append(&app, &token, &id, (1..=6).map(|n| user_msg(&format!("m{n}"))).collect()).await;

    let page = messages(&app, &id, "?last=4").await;
    assert_eq!(seqs(&page), [3, 4, 5, 6]);
    assert_eq!(page["next_cursor"], Value::Null);
    assert_eq!(seqs(&messages(&app, &id, "?last=100").await), [1, 2, 3, 4, 5, 6]);
}

async fn sanitize_keeps_only_complete_tool_turns(backend: Backend) {
    let (app, token, id) = app_with_thread(backend).await;
    let call = |ids: &[&str]| {
        let calls: Vec<Value> = ids.iter().map(|i| json!({"id": i, "name": "lookup", "arguments": {}})).collect();
        json!({"role": "assistant", "content": "", "tool_calls": calls})
    };
    let result = |call_id: &str| json!({"role": "tool", "content": "r", "tool_call_id": call_id});
    append(
        &app,
        &token,
        &id,
        vec![
            user_msg("hi"),                   // 1 kept
            call(&["a", "b"]),                // 2 half answered: dropped
            result("a"),                      // 3 dropped with its turn
            result("zzz"),                    // 4 orphan: dropped
            user_msg("again"),                // 5 kept
            call(&["c"]),                     // 6 complete turn: kept
            result("c"),                      // 7 kept
            assistant_msg("the answer is r"), // 8 kept
        ],
    )
    .await;
    assert_eq!(seqs(&messages(&app, &id, "?sanitize=true").await), [1, 5, 6, 7, 8]);
    assert_eq!(seqs(&messages(&app, &id, "?sanitize=false").await), (1..=8).collect::<Vec<_>>());
    // A window that cuts a tool turn in half drops what cannot be replayed.
    assert_eq!(seqs(&messages(&app, &id, "?last=2&sanitize=true").await), [8]);
}

async fn end_with_memory_off_is_memory_disabled(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let id = conversation_with_turns(&app, 3).await;
    let ended = end(&app, &id).await;
    assert_eq!(ended["conversation"]["status"], "ended");
    assert!(ended["conversation"]["ended_at"].is_string());
    assert_eq!(ended["extraction"], json!({"queued": false, "reason": "memory_disabled"}));

    // Configured but off is the same.
    app.put(&format!("/api/agents-config/{AGENT}"), &admin("acme"), json!({"memory_enabled": false})).await;
    let again = end(&app, &id).await;
    assert_eq!(again["extraction"]["reason"], "memory_disabled");
    assert!(jobs_of(&app, &id).await.is_empty());
}

async fn end_with_consent_refused_is_consent_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", AGENT).await;
    let (status, _) =
        app.put(&format!("/api/users/{}/consent", enc(USER)), &agent("acme"), json!({"ai_consent": false})).await;
    assert_eq!(status, StatusCode::OK);
    let id = conversation_with_turns(&app, 3).await;
    ends_without_a_job(&app, &id, "consent_refused").await;
}

/// Ends conversation `id` and checks that no extraction was queued, for `reason`.
async fn ends_without_a_job(app: &TestApp, id: &str, reason: &str) {
    let ended = end(app, id).await;
    assert_eq!(ended["extraction"], json!({"queued": false, "reason": reason}), "{ended}");
    assert!(jobs_of(app, id).await.is_empty());
}

async fn end_with_too_few_user_turns_is_too_few_user_turns(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", AGENT).await;
    let id = conversation_with_turns(&app, 2).await;
    ends_without_a_job(&app, &id, "too_few_user_turns").await;
}

async fn second_end_is_nothing_new(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", AGENT).await;
    let id = conversation_with_turns(&app, 3).await;
    let first = end(&app, &id).await;
    assert_eq!(first["extraction"]["queued"], true, "{first}");
    let second = end(&app, &id).await;
    assert_eq!(second["extraction"], json!({"queued": false, "reason": "nothing_new"}));
    assert_eq!(second["conversation"]["ended_at"], first["conversation"]["ended_at"], "ending twice keeps ended_at");
    assert_eq!(jobs_of(&app, &id).await.len(), 1);
}

async fn end_queues_an_extract_job_visible_in_jobs(backend: Backend) {
    // No workers, so the job is seen exactly as the end queued it.
    let app = TestApp::spawn_with(backend, &["--workers", "0"]).await;
    app.enable_memory("acme", AGENT).await;
    let id = conversation_with_turns(&app, 3).await;
    let ended = end(&app, &id).await;
    let job_id = ended["extraction"]["job_id"].as_str().expect("a job id").to_owned();

    let (status, job) = app.get(&format!("/api/jobs/{job_id}"), &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    assert_eq!(job["id"], job_id.as_str());
    assert_eq!(job["kind"], "extract_facts");
    assert_eq!(job["agent_id"], AGENT);
    assert_eq!(job["external_ref"], USER);
    assert_eq!(job["conversation_id"], id.as_str());
    assert_eq!(job["status"], "queued");
    assert_eq!(job["attempts"], 0);
    assert_eq!(job["facts_added"], Value::Null);
    for field in ["last_error", "run_at", "created_at", "updated_at"] {
        assert!(job.get(field).is_some(), "{field} missing from {job}");
    }
    assert_eq!(jobs_of(&app, &id).await, [job]);
}

async fn concurrent_ends_queue_exactly_one_job(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", AGENT).await;
    let id = conversation_with_turns(&app, 3).await;
    let ends = join_all((0..8).map(|_| end(&app, &id))).await;
    let queued: Vec<&Value> = ends.iter().filter(|e| e["extraction"]["queued"] == true).collect();
    assert_eq!(queued.len(), 1, "{ends:?}");
    assert!(
        ends.iter().filter(|e| e["extraction"]["queued"] == false).all(|e| e["extraction"]["reason"] == "nothing_new")
    );
    let jobs = jobs_of(&app, &id).await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["id"], queued[0]["extraction"]["job_id"]);
}

async fn appending_to_an_ended_conversation_reopens_it(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", AGENT).await;
    let id = conversation_with_turns(&app, 3).await;
    assert_eq!(end(&app, &id).await["extraction"]["queued"], true);

    let (status, body) = append(&app, &agent("acme"), &id, vec![user_msg("one more thing")]).await;
    assert_created(status, &body);
    assert_eq!(body["conversation"]["status"], "open");
    assert_eq!(body["conversation"]["ended_at"], Value::Null);
    assert_eq!(body["messages"][0]["seq"], 7);
    // The new user message is something new to extract.
    let again = end(&app, &id).await;
    assert_eq!(again["extraction"]["queued"], true, "{again}");
    assert_eq!(jobs_of(&app, &id).await.len(), 2);
}

async fn idle_sweeper_ends_idle_conversations(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--idle-end-secs", "1", "--sweep-interval-secs", "1"]).await;
    app.enable_memory("acme", AGENT).await;
    let id = conversation_with_turns(&app, 3).await;
    let path = format!("/api/conversations/{id}");
    let ended = eventually(Duration::from_secs(15), || async {
        let (_, conversation) = app.get(&path, &agent("acme")).await;
        (conversation["status"] == "ended").then_some(conversation)
    })
    .await
    .expect("the sweeper ends the idle conversation");
    assert!(ended["ended_at"].is_string());
    let jobs = jobs_of(&app, &id).await;
    assert_eq!(jobs.len(), 1, "the sweeper queues the extraction like the end route");
    assert_eq!(jobs[0]["kind"], "extract_facts");
}

async fn other_tenants_get_404_on_every_route(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", AGENT).await;
    let id = conversation_with_turns(&app, 3).await;
    let job_id = end(&app, &id).await["extraction"]["job_id"].as_str().unwrap().to_owned();
    let globex = admin("globex");
    let base = format!("/api/conversations/{id}");

    let answers = [
        app.get(&base, &globex).await,
        app.patch(&base, &globex, json!({"title": "mine"})).await,
        app.post(&format!("{base}/messages"), &globex, json!({"messages": [user_msg("x")]})).await,
        app.get(&format!("{base}/messages"), &globex).await,
        app.get(&format!("{base}/messages?last=2"), &globex).await,
        app.post(&format!("{base}/end"), &globex, json!({})).await,
        app.get(&format!("/api/jobs/{job_id}"), &globex).await,
        app.delete(&base, &globex).await,
    ];
    for (status, body) in answers {
        assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    }
    let (status, mine) = app.get(&base, &agent("acme")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(mine["title"], Value::Null);
    assert_eq!(mine["message_count"], 6);
    assert_eq!(seqs(&messages(&app, &id, "").await).len(), 6);
}

async fn lists_are_scoped_to_the_tenant(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", AGENT).await;
    let id = conversation_with_turns(&app, 3).await;
    end(&app, &id).await;
    let globex = admin("globex");
    create(&app, &globex, AGENT, USER).await;

    let (_, theirs) = app.get("/api/conversations", &globex).await;
    assert_eq!(theirs["items"].as_array().unwrap().len(), 1);
    assert_ne!(theirs["items"][0]["id"], id.as_str());
    let (_, by_ref) = app.get(&format!("/api/conversations?external_ref={}", enc(USER)), &globex).await;
    assert_eq!(by_ref["items"].as_array().unwrap().len(), 1);
    let (_, jobs) = app.get("/api/jobs", &globex).await;
    assert_eq!(jobs["items"], json!([]));
    let (_, filtered) = app.get(&format!("/api/jobs?conversation_id={id}"), &globex).await;
    assert_eq!(filtered["items"], json!([]));
    let (_, mine) = app.get("/api/conversations", &agent("acme")).await;
    assert_eq!(mine["items"].as_array().unwrap().len(), 1);
}

async fn delete_removes_messages_and_keeps_jobs(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", AGENT).await;
    let id = conversation_with_turns(&app, 3).await;
    let job_id = end(&app, &id).await["extraction"]["job_id"].as_str().unwrap().to_owned();
    let keep = conversation_with_turns(&app, 1).await;

    let (status, body) = app.delete(&format!("/api/conversations/{id}"), &agent("acme")).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    for path in [format!("/api/conversations/{id}"), format!("/api/conversations/{id}/messages")] {
        let (status, error) = app.get(&path, &agent("acme")).await;
        assert_error(status, &error, StatusCode::NOT_FOUND, "not_found");
    }
    let (status, error) = app.delete(&format!("/api/conversations/{id}"), &agent("acme")).await;
    assert_error(status, &error, StatusCode::NOT_FOUND, "not_found");
    let (status, job) = app.get(&format!("/api/jobs/{job_id}"), &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "the job outlives its conversation");
    assert_eq!(job["conversation_id"], id.as_str());
    assert_eq!(seqs(&messages(&app, &keep, "").await), [1, 2], "other conversations keep their messages");
}

async fn scopes_are_enforced(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let id = id_of(&create(&app, &agent("acme"), AGENT, USER).await);
    let reader = token("acme", "memory:read");
    let base = format!("/api/conversations/{id}");
    let refused = [
        app.post("/api/conversations", &reader, json!({"agent_id": AGENT, "external_ref": USER})).await,
        app.patch(&base, &reader, json!({"title": "t"})).await,
        app.post(&format!("{base}/messages"), &reader, json!({"messages": [user_msg("x")]})).await,
        app.post(&format!("{base}/end"), &reader, json!({})).await,
        app.delete(&base, &reader).await,
        app.get("/api/jobs", &agent("acme")).await,
        app.get(&format!("/api/jobs/{id}"), &agent("acme")).await,
    ];
    for (status, body) in refused {
        assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");
    }
    for path in ["/api/conversations".to_owned(), base.clone(), format!("{base}/messages")] {
        let (status, body) = app.get(&path, &reader).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    let (_, conversation) = app.get(&base, &reader).await;
    assert_eq!(conversation["status"], "open");
    assert_eq!(conversation["title"], Value::Null);
}

async fn jobs_list_paginates_newest_first(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", AGENT).await;
    let mut job_ids = Vec::new();
    for _ in 0..3 {
        let id = conversation_with_turns(&app, 3).await;
        job_ids.push(end(&app, &id).await["extraction"]["job_id"].as_str().unwrap().to_owned());
    }
    job_ids.reverse();
    let (_, first) = app.get("/api/jobs?limit=2", &admin("acme")).await;
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let (_, second) = app.get(&format!("/api/jobs?limit=2&cursor={cursor}"), &admin("acme")).await;
    assert_eq!(second["next_cursor"], Value::Null);
    let seen: Vec<String> =
        first["items"].as_array().unwrap().iter().chain(second["items"].as_array().unwrap()).map(id_of).collect();
    assert_eq!(seen, job_ids);
    let (_, none) = app.get("/api/jobs?status=dead", &admin("acme")).await;
    assert_eq!(none["items"], json!([]));
    app.assert_invalid_queries(
        "/api/jobs",
        &admin("acme"),
        &["?status=done", "?conversation_id=nope", "?cursor=zz", "?limit=500"],
    )
    .await;
}
