//! `?sanitize=true` on histories stored in each of the three tool-call shapes (OpenAI,
//! AI SDK content parts, Anthropic blocks), and tool results sent as `user` messages
//! not counting as user turns, on both backends.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

on_both_backends!(
    openai_history_keeps_answered_calls_only,
    ai_sdk_history_keeps_results_without_tool_call_id,
    anthropic_history_checks_tool_use_and_tool_result_blocks,
    tool_result_only_user_messages_are_not_user_turns,
);

/// A new conversation holding `messages`, stored through the API; returns its id.
async fn conversation_with(app: &TestApp, messages: Vec<Value>) -> String {
    let token = agent("acme");
    let (status, body) = app.post("/api/conversations", &token, json!({"agent_id": AGENT, "external_ref": USER})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().expect("an id").to_owned();
    let (status, body) =
        app.post(&format!("/api/conversations/{id}/messages"), &token, json!({"messages": messages})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    id
}

async fn sanitized(app: &TestApp, id: &str) -> Vec<Value> {
    let (status, body) = app.get(&format!("/api/conversations/{id}/messages?sanitize=true"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["items"].as_array().expect("items").clone()
}

fn seqs(items: &[Value]) -> Vec<i64> {
    items.iter().map(|m| m["seq"].as_i64().expect("seq")).collect()
}

fn text(words: &str) -> Value {
    json!({"type": "text", "text": words})
}

fn user_says(words: &str) -> Value {
    json!({"role": "user", "content": words})
}

async fn openai_history_keeps_answered_calls_only(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let call = |id: &str| json!({"role": "assistant", "content": "", "tool_calls": [{"id": id, "name": "weather", "arguments": {}}]});
    let result = |id: &str| json!({"role": "tool", "content": "22", "tool_call_id": id});
    let id = conversation_with(
        &app,
        vec![
            user_says("weather?"), // 1 kept
            call("a"),             // 2 answered: kept
            result("a"),           // 3 kept
            call("b"),             // 4 dangling: dropped
            user_says("hello?"),   // 5 kept
            result("b"),           // 6 after a user turn: orphan, dropped
        ],
    )
    .await;
    assert_eq!(seqs(&sanitized(&app, &id).await), [1, 2, 3, 5]);
}

async fn ai_sdk_history_keeps_results_without_tool_call_id(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let call = |ids: &[&str]| {
        let mut parts = vec![text("checking")];
        parts.extend(ids.iter().map(
            |id| json!({"type": "tool-call", "toolCallId": id, "toolName": "weather", "input": {"city": "Lyon"}}),
        ));
        json!({"role": "assistant", "content": parts})
    };
    let result_part = |id: &str| json!({"type": "tool-result", "toolCallId": id, "toolName": "weather", "output": {"type": "text", "value": "22"}});
    let results =
        |ids: &[&str]| json!({"role": "tool", "content": ids.iter().map(|id| result_part(id)).collect::<Vec<_>>()});
    let id = conversation_with(
        &app,
        vec![
            user_says("weather in Lyon and Paris?"),            // 1 kept
            call(&["a", "b"]),                                  // 2 answered: kept
            results(&["b"]),                                    // 3 kept
            results(&["a", "zzz"]),                             // 4 kept, without its orphan part
            json!({"role": "assistant", "content": "22 both"}), // 5 kept
            call(&["c"]),                                       // 6 dangling: dropped
            user_says("thanks"),                                // 7 kept
            results(&["c"]),                                    // 8 orphan: dropped
        ],
    )
    .await;
    let items = sanitized(&app, &id).await;
    assert_eq!(seqs(&items), [1, 2, 3, 4, 5, 7]);
    assert_eq!(items[3]["content"], json!([result_part("a")]), "only the orphan part goes");
    assert!(items[3].get("tool_call_id").is_none());
}

async fn anthropic_history_checks_tool_use_and_tool_result_blocks(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let call = |id: &str| json!({"role": "assistant", "content": [text("checking"), {"type": "tool_use", "id": id, "name": "weather", "input": {}}]});
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "22"});
    let id = conversation_with(
        &app,
        vec![
            user_says("weather?"),                                                  // 1 kept
            call("t1"),                                                             // 2 answered: kept
            json!({"role": "user", "content": [result("t1")]}),                     // 3 kept
            call("t2"),                                                             // 4 dangling: dropped
            json!({"role": "assistant", "content": "sorry"}),                       // 5 kept
            json!({"role": "user", "content": [result("t2")]}),                     // 6 orphan results only: dropped
            json!({"role": "user", "content": [result("t2"), text("and Paris?")]}), // 7 orphan removed, words kept
        ],
    )
    .await;
    let items = sanitized(&app, &id).await;
    assert_eq!(seqs(&items), [1, 2, 3, 5, 7]);
    assert_eq!(items[2]["content"], json!([result("t1")]));
    assert_eq!(items[4]["content"], json!([text("and Paris?")]));
    // Without sanitize, everything is returned as stored.
    let (_, all) = app.get(&format!("/api/conversations/{id}/messages"), &agent("acme")).await;
    assert_eq!(all["items"][6]["content"], json!([result("t2"), text("and Paris?")]));
}

async fn tool_result_only_user_messages_are_not_user_turns(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", AGENT).await;
    let call = |id: &str| json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "weather", "input": {}}]});
    let results =
        |id: &str| json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "22"}]});
    // Two things the person said, and an agent loop whose three answers come back as `user`.
    let id = conversation_with(
        &app,
        vec![
            user_says("I live in Lyon."),
            call("t1"),
            results("t1"),
            call("t2"),
            results("t2"),
            call("t3"),
            results("t3"),
            user_says("I like tea."),
        ],
    )
    .await;
    let (status, conversation) = app.get(&format!("/api/conversations/{id}"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(conversation["user_turns"], 2, "{conversation}");

    let (status, ended) = app.post(&format!("/api/conversations/{id}/end"), &agent("acme"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{ended}");
    assert_eq!(ended["extraction"], json!({"queued": false, "reason": "too_few_user_turns"}));

    // Results followed by the person's words are a user turn: now there are three.
    let mixed = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t4", "content": "ok"}, text("I play chess.")]});
    let (status, body) = app
        .post(&format!("/api/conversations/{id}/messages"), &agent("acme"), json!({"messages": [call("t4"), mixed]}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["conversation"]["user_turns"], 3, "{body}");
}
