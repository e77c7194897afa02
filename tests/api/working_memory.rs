//! Working memory (issue 24), on both backends: a document per agent and user and per
//! conversation, read, replaced and deleted with `ETag` / `If-Match`; two writers of one
//! version get one winner and one 412 with nothing lost; create-only with
//! `If-None-Match: *`; 304 on a read of the stored version; the cap of 32 768 characters; bad headers
//! and bodies change nothing; a conversation's document goes with it; scopes and
//! user-bound tokens; memory context's `<working-memory>` block; the two tools.

use futures::future::join_all;
use reqwest::{Method, StatusCode, header::HeaderMap};
use serde_json::{Value, json};

use crate::common::*;

on_both_backends!(
    a_document_is_created_read_replaced_and_deleted_by_version,
    two_writers_of_one_version_get_one_winner_and_lose_nothing,
    concurrent_create_only_writes_make_one_document,
    bad_writes_are_refused_and_change_nothing,
    a_conversation_keeps_its_own_document_which_goes_with_it,
    scopes_tenants_and_bound_tokens_apply,
    memory_context_shows_it_when_asked_and_memory_is_on,
    the_tools_read_and_write_it_by_version,
);

fn user_doc(agent_id: &str, user: &str) -> String {
    format!("/api/agents/{agent_id}/users/{}/working-memory", enc(user))
}

/// The quoted `ETag` header, checked against the body's `etag`.
#[track_caller]
fn etag_of(headers: &HeaderMap, body: &Value) -> String {
    let header = headers.get("etag").expect("an ETag header").to_str().expect("ASCII").to_owned();
    assert_eq!(header, format!("\"{}\"", body["etag"].as_str().expect("an etag")), "{body}");
    header
}

async fn put(app: &TestApp, path: &str, headers: &[(&str, &str)], content: &str) -> (StatusCode, HeaderMap, Value) {
    app.send(Method::PUT, path, &agent("acme"), headers, Some(json!({"content": content}))).await
}

async fn get(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, Value) {
    app.send(Method::GET, path, &agent("acme"), headers, None).await
}

async fn delete(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> (StatusCode, Value) {
    let (status, _, body) = app.send(Method::DELETE, path, &agent("acme"), headers, None).await;
    (status, body)
}

/// The stored content (the document must exist).
async fn content(app: &TestApp, path: &str) -> String {
    let (status, _, body) = get(app, path, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["content"].as_str().expect("content").to_owned()
}

async fn a_document_is_created_read_replaced_and_deleted_by_version(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let path = user_doc("concierge", "ann");
    let (status, _, body) = get(&app, &path, &[]).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");

    let (status, headers, created) = put(&app, &path, &[], "## Ann\n- planning a trip").await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let first = etag_of(&headers, &created);
    assert_eq!(created["content"], "## Ann\n- planning a trip");
    let (status, headers, read) = get(&app, &path, &[]).await;
    assert_eq!((status, etag_of(&headers, &read)), (StatusCode::OK, first.clone()));
    assert_eq!(read, created);

    // The version read is the version replaced; the old one no longer matches.
    let (status, headers, replaced) = put(&app, &path, &[("if-match", &first)], "## Ann\n- trip booked").await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    let second = etag_of(&headers, &replaced);
    assert_ne!(first, second);
    let (status, _, body) = put(&app, &path, &[("if-match", &first)], "stale").await;
    assert_error(status, &body, StatusCode::PRECONDITION_FAILED, "precondition_failed");
    assert_eq!(content(&app, &path).await, "## Ann\n- trip booked");
    // A list naming the current version matches; `*` matches any stored version.
    let list = format!("{first}, {second}");
    let (status, headers, body) = put(&app, &path, &[("if-match", &list)], "## Ann\n- trip paid").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let third = etag_of(&headers, &body);

    // Conditional reads: 304 with the tag and no body for the stored version.
    let (status, headers, body) = get(&app, &path, &[("if-none-match", &third)]).await;
    assert_eq!((status, body), (StatusCode::NOT_MODIFIED, Value::Null));
    assert_eq!(headers.get("etag").and_then(|v| v.to_str().ok()), Some(third.as_str()));
    let weak = format!("W/{third}");
    assert_eq!(get(&app, &path, &[("if-none-match", &weak)]).await.0, StatusCode::NOT_MODIFIED);
    assert_eq!(get(&app, &path, &[("if-none-match", &second)]).await.0, StatusCode::OK);

    // Deletes honour If-Match too.
    let (status, body) = delete(&app, &path, &[("if-match", &second)]).await;
    assert_error(status, &body, StatusCode::PRECONDITION_FAILED, "precondition_failed");
    assert_eq!(content(&app, &path).await, "## Ann\n- trip paid");
    let (status, body) = delete(&app, &path, &[("if-none-match", &third)]).await;
    assert_error(status, &body, StatusCode::PRECONDITION_FAILED, "precondition_failed");
    assert_eq!(delete(&app, &path, &[("if-match", &third)]).await.0, StatusCode::NO_CONTENT);
    let (status, _, body) = get(&app, &path, &[]).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) = delete(&app, &path, &[]).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    // With no document, If-Match (any tag, or `*`) cannot hold: nothing is created.
    for tag in [third.as_str(), "*"] {
        let (status, _, body) = put(&app, &path, &[("if-match", tag)], "revived").await;
        assert_error(status, &body, StatusCode::PRECONDITION_FAILED, "precondition_failed");
    }
    assert_eq!(get(&app, &path, &[]).await.0, StatusCode::NOT_FOUND);
    // An unconditional write is last-writer-wins, as PUT without If-Match says.
    assert_eq!(put(&app, &path, &[], "v1").await.0, StatusCode::CREATED);
    assert_eq!(put(&app, &path, &[], "").await.0, StatusCode::OK);
    assert_eq!(content(&app, &path).await, "");
}

async fn two_writers_of_one_version_get_one_winner_and_lose_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let path = user_doc("concierge", "ann");
    let (_, headers, created) = put(&app, &path, &[], "- likes jazz").await;
    let seen = etag_of(&headers, &created);
    for round in 0..5 {
        // Eight writers read the same version, then each writes its own edit.
        let seen_now = if round == 0 {
            seen.clone()
        } else {
            let (_, headers, body) = get(&app, &path, &[]).await;
            etag_of(&headers, &body)
        };
        let writes = (0..8).map(|writer| {
            let (app, path, seen_now) = (&app, &path, &seen_now);
            async move {
                let edit = format!("- likes jazz\n- round {round} writer {writer}");
                let (status, _, body) = put(app, path, &[("if-match", seen_now)], &edit).await;
                (status, edit, body)
            }
        });
        let answers = join_all(writes).await;
        let winners: Vec<&(StatusCode, String, Value)> =
            answers.iter().filter(|(status, _, _)| *status == StatusCode::OK).collect();
        assert_eq!(winners.len(), 1, "one winner: {answers:?}");
        for (status, _, body) in answers.iter().filter(|(status, _, _)| *status != StatusCode::OK) {
            assert_error(*status, body, StatusCode::PRECONDITION_FAILED, "precondition_failed");
        }
        // The stored document is the winner's, whole.
        assert_eq!(content(&app, &path).await, winners[0].1);
    }
    // A loser rereads and writes again on top of the winner's version: nothing is lost.
    let (_, headers, body) = get(&app, &path, &[]).await;
    let merged = format!("{}\n- the loser's line", body["content"].as_str().unwrap_or_default());
    let (status, _, _) = put(&app, &path, &[("if-match", &etag_of(&headers, &body))], &merged).await;
    assert_eq!(status, StatusCode::OK);
    let stored = content(&app, &path).await;
    assert!(stored.contains("round 4") && stored.ends_with("the loser's line"), "{stored}");
}

async fn concurrent_create_only_writes_make_one_document(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let path = user_doc("concierge", "ann");
    let creates = (0..6).map(|writer| {
        let (app, path) = (&app, &path);
        async move { put(app, path, &[("if-none-match", "*")], &format!("writer {writer}")).await }
    });
    let answers = join_all(creates).await;
    let statuses: Vec<StatusCode> = answers.iter().map(|(status, _, _)| *status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::CREATED).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::PRECONDITION_FAILED).count(), 5, "{statuses:?}");
    let winner = answers.iter().find(|(status, _, _)| *status == StatusCode::CREATED).expect("a winner");
    assert_eq!(content(&app, &path).await, winner.2["content"].as_str().expect("content"));
    let rows: Vec<(i64,)> = app.db.rows("SELECT count(*) FROM working_memories").await;
    assert_eq!(rows, [(1,)]);
}

async fn bad_writes_are_refused_and_change_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let path = user_doc("concierge", "ann");
    let (_, headers, created) = put(&app, &path, &[], "kept").await;
    let tag = etag_of(&headers, &created);

    // Exactly 32 768 characters are stored, of one byte or two; one more is a 413.
    let (status, headers, body) = put(&app, &path, &[("if-match", &tag)], &"é".repeat(32 * 1024)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let tag = etag_of(&headers, &body);
    let full = "a".repeat(32 * 1024);
    let (status, headers, body) = put(&app, &path, &[("if-match", &tag)], &full).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let tag = etag_of(&headers, &body);
    for over in ["a".repeat(32 * 1024 + 1), "é".repeat(32 * 1024 + 1)] {
        let (status, _, body) = put(&app, &path, &[("if-match", &tag)], &over).await;
        assert_error(status, &body, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    }
    let (status, _, body) = put(&app, &path, &[], "a\u{0}b").await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    for body in [json!({}), json!({"content": 7}), json!({"content": "x", "extra": 1}), json!(["x"])] {
        let (status, _, answer) = app.send(Method::PUT, &path, &agent("acme"), &[], Some(body.clone())).await;
        assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    // Not a list of entity tags: 400.
    for headers in [&[("if-match", "\"open")][..], &[("if-none-match", "\"a\" \"b\"")], &[("if-match", ",")]] {
        let (status, _, body) = put(&app, &path, headers, "changed").await;
        assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    }
    let (status, body) = delete(&app, &path, &[("if-match", "\"open")]).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, _, body) = get(&app, &path, &[("if-none-match", "\"open")]).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    // Well-formed conditions that do not hold: 412. A weak tag never matches a write; a
    // bare tag is compared as written; If-None-Match naming the stored version refuses.
    let weak = format!("W/{tag}");
    let bare = tag.trim_matches('"').to_owned();
    let refused: [&[(&str, &str)]; 4] = [
        &[("if-match", &weak)],
        &[("if-match", "some-other-version")],
        &[("if-none-match", &tag)],
        &[("if-match", &tag), ("if-none-match", "*")],
    ];
    for headers in refused {
        let (status, _, body) = put(&app, &path, headers, "changed").await;
        assert_error(status, &body, StatusCode::PRECONDITION_FAILED, "precondition_failed");
    }
    // Create-only over an existing document is a 412.
    let (status, _, body) = put(&app, &path, &[("if-none-match", "*")], "changed").await;
    assert_error(status, &body, StatusCode::PRECONDITION_FAILED, "precondition_failed");

    let (status, headers, body) = get(&app, &path, &[]).await;
    assert_eq!((status, etag_of(&headers, &body)), (StatusCode::OK, tag.clone()));
    assert_eq!(body["content"], full.as_str());
    // The same tag written bare matches; If-None-Match naming another version lets it through.
    let (status, _, body) = put(&app, &path, &[("if-match", &bare), ("if-none-match", "\"v0\"")], "ok").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

async fn a_conversation_keeps_its_own_document_which_goes_with_it(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let writer = agent("acme");
    let (_, conversation) =
        app.post("/api/conversations", &writer, json!({"agent_id": "concierge", "external_ref": "ann"})).await;
    let id = conversation["id"].as_str().expect("id").to_owned();
    let path = format!("/api/conversations/{id}/working-memory");
    let (status, _, body) = get(&app, &path, &[]).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("working memory")), "{body}");

    let (status, headers, created) = put(&app, &path, &[("if-none-match", "*")], "step 1 of 3 done").await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let tag = etag_of(&headers, &created);
    let (status, _, _) = put(&app, &path, &[("if-match", &tag)], "step 2 of 3 done").await;
    assert_eq!(status, StatusCode::OK);
    // The user's own document is another one.
    assert_eq!(get(&app, &user_doc("concierge", "ann"), &[]).await.0, StatusCode::NOT_FOUND);
    assert_eq!(put(&app, &user_doc("concierge", "ann"), &[], "Ann's page").await.0, StatusCode::CREATED);
    assert_eq!(content(&app, &path).await, "step 2 of 3 done");

    // Clearing the messages keeps it; deleting the conversation takes it along.
    assert_eq!(app.delete(&format!("/api/conversations/{id}/messages"), &writer).await.0, StatusCode::OK);
    assert_eq!(content(&app, &path).await, "step 2 of 3 done");
    assert_eq!(app.delete(&format!("/api/conversations/{id}"), &writer).await.0, StatusCode::NO_CONTENT);
    let (read, _, read_body) = get(&app, &path, &[]).await;
    let (written, _, written_body) = put(&app, &path, &[], "x").await;
    for (status, body) in [(read, read_body), (written, written_body), delete(&app, &path, &[]).await] {
        assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
        assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("conversation")), "{body}");
    }
    let rows: Vec<(i64,)> =
        app.db.rows("SELECT count(*) FROM working_memories WHERE conversation_id IS NOT NULL").await;
    assert_eq!(rows, [(0,)]);
    assert_eq!(content(&app, &user_doc("concierge", "ann")).await, "Ann's page");
}

async fn scopes_tenants_and_bound_tokens_apply(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let path = user_doc("concierge", "ann");
    let (_, conversation) =
        app.post("/api/conversations", &agent("acme"), json!({"agent_id": "concierge", "external_ref": "ann"})).await;
    let conversation_path = format!("/api/conversations/{}/working-memory", conversation["id"].as_str().expect("id"));
    for path in [&path, &conversation_path] {
        assert_eq!(put(&app, path, &[], "acme's").await.0, StatusCode::CREATED);
    }
    let body = Some(json!({"content": "x"}));

    // Another tenant sees nothing and writes only its own.
    let globex = agent("globex");
    let (status, _, answer) = app.send(Method::GET, &path, &globex, &[], None).await;
    assert_error(status, &answer, StatusCode::NOT_FOUND, "not_found");
    for method in [Method::GET, Method::PUT, Method::DELETE] {
        let (status, _, answer) = app.send(method, &conversation_path, &globex, &[], body.clone()).await;
        assert_error(status, &answer, StatusCode::NOT_FOUND, "not_found");
    }
    // memory:read reads, never writes.
    let reader = token("acme", "memory:read");
    assert_eq!(app.send(Method::GET, &path, &reader, &[], None).await.0, StatusCode::OK);
    for method in [Method::PUT, Method::DELETE] {
        let (status, _, answer) = app.send(method, &path, &reader, &[], body.clone()).await;
        assert_error(status, &answer, StatusCode::FORBIDDEN, "forbidden");
    }
    // A user-bound token reaches its own document only; conversation routes are not its.
    let bound =
        token_with(json!({"scope": "memory:read memory:write", "agent_id": "concierge", "external_ref": "ann"}));
    let (status, _, own) = app.send(Method::GET, &path, &bound, &[], None).await;
    assert_eq!((status, own["content"].as_str()), (StatusCode::OK, Some("acme's")));
    for other in [user_doc("concierge", "bob"), user_doc("sales", "ann"), conversation_path.clone()] {
        for method in [Method::GET, Method::PUT, Method::DELETE] {
            let (status, _, answer) = app.send(method, &other, &bound, &[], body.clone()).await;
            assert_error(status, &answer, StatusCode::FORBIDDEN, "forbidden");
        }
    }
    for path in [&path, &conversation_path] {
        assert_eq!(content(&app, path).await, "acme's");
    }
    assert_eq!(get(&app, &user_doc("concierge", "bob"), &[]).await.0, StatusCode::NOT_FOUND);
}

async fn memory_context_shows_it_when_asked_and_memory_is_on(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let writer = agent("acme");
    let base = format!("/api/agents/concierge/users/{}", enc("ann"));
    app.post(&format!("{base}/facts"), &writer, json!({"fact": "Likes jazz"})).await;
    assert_eq!(
        put(&app, &user_doc("concierge", "ann"), &[], "## Ann\n\n- <b>gift</b> ideas: vinyl").await.0,
        StatusCode::CREATED
    );

    // Memory off: nothing, asked or not.
    let (_, context) = app.get(&format!("{base}/memory-context?working_memory=true"), &writer).await;
    assert_eq!((context["enabled"].as_bool(), context["prompt"].as_str()), (Some(false), Some("")), "{context}");
    app.enable_memory("acme", "concierge").await;
    let (_, plain) = app.get(&format!("{base}/memory-context"), &writer).await;
    assert!(plain.get("working_memory").is_none(), "{plain}");
    assert_eq!(plain["prompt"], "<user-memory>\n- Likes jazz\n</user-memory>");
    let (status, context) = app.get(&format!("{base}/memory-context?working_memory=true"), &writer).await;
    assert_eq!(status, StatusCode::OK, "{context}");
    assert_eq!(context["working_memory"]["content"], "## Ann\n\n- <b>gift</b> ideas: vinyl");
    assert_eq!(
        context["prompt"],
        "<user-memory>\n- Likes jazz\n</user-memory>\n\n<working-memory>\n## Ann\n- bgift/b ideas: vinyl\n</working-memory>"
    );
    // A budget too small for the document leaves it out of the prompt, whole.
    let (_, tight) = app.get(&format!("{base}/memory-context?working_memory=true&token_budget=12"), &writer).await;
    assert_eq!(tight["prompt"], "<user-memory>\n- Likes jazz\n</user-memory>", "{tight}");
    // Another user has none: null, and no block.
    let (_, other) = app.get("/api/agents/concierge/users/bob/memory-context?working_memory=true", &writer).await;
    assert_eq!((other["working_memory"].clone(), other["prompt"].as_str()), (Value::Null, Some("")), "{other}");
    assert!(other.as_object().is_some_and(|o| o.contains_key("working_memory")), "{other}");
    app.assert_invalid_queries(&format!("{base}/memory-context"), &writer, &["?working_memory=maybe"]).await;
    // Consent refused: nothing either.
    app.put("/api/users/ann/consent", &writer, json!({"ai_consent": false})).await;
    let (_, refused) = app.get(&format!("{base}/memory-context?working_memory=true"), &writer).await;
    assert_eq!((refused["enabled"].as_bool(), refused["prompt"].as_str()), (Some(false), Some("")), "{refused}");
}

async fn the_tools_read_and_write_it_by_version(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let writer = agent("acme");
    let call = |name: &'static str, arguments: Value| {
        let (app, writer) = (&app, &writer);
        async move { app.post("/api/tools/call", writer, json!({"name": name, "arguments": arguments})).await }
    };
    let owner = |extra: Value| {
        let mut arguments = json!({"agent_id": "concierge", "external_ref": "ann"});
        for (key, value) in extra.as_object().into_iter().flatten() {
            arguments[key] = value.clone();
        }
        arguments
    };
    // Memory off: the tools refuse, as every tool does, and store nothing.
    let (status, body) = call("write_working_memory", owner(json!({"content": "draft"}))).await;
    assert_error(status, &body, StatusCode::CONFLICT, "conflict");
    app.enable_memory("acme", "concierge").await;

    let (status, body) = call("read_working_memory", owner(json!({}))).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, first) = call("write_working_memory", owner(json!({"content": "- wants a quiet table"}))).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let (_, read) = call("read_working_memory", owner(json!({}))).await;
    assert_eq!(read, first);
    // A write naming the version read wins once; the same version again is refused.
    let tag = first["etag"].clone();
    let (status, second) =
        call("write_working_memory", owner(json!({"content": "- wants a quiet table\n- vegan", "etag": tag}))).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    let (status, body) = call("write_working_memory", owner(json!({"content": "lost?", "etag": tag}))).await;
    assert_error(status, &body, StatusCode::PRECONDITION_FAILED, "precondition_failed");
    let (status, body) = call("write_working_memory", owner(json!({"content": "x".repeat(32 * 1024 + 1)}))).await;
    assert_error(status, &body, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    let (status, body) = call("read_working_memory", owner(json!({"content": "x"}))).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    // REST sees what the tools wrote, and the tool's context shows it.
    assert_eq!(content(&app, &user_doc("concierge", "ann")).await, "- wants a quiet table\n- vegan");
    let (_, context) = call("memory_context", owner(json!({"working_memory": true}))).await;
    assert_eq!(context["prompt"], "<working-memory>\n- wants a quiet table\n- vegan\n</working-memory>", "{context}");
}
