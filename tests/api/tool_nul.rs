//! An escaped NUL (`\u0000`) in a tool call's arguments, through MCP and `/api/tools/call`:
//! in a string, an array, a key, or a value nested at any depth, it is refused as
//! `invalid_request` with the NUL message, before anything is read or written, on both
//! backends alike. The MCP door parses its JSON-RPC body itself, so the tools' own walk
//! of the arguments (`service::tools`) is the only check there; `/api/tools/call` is also
//! checked at the edge.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    common::*,
    mcp::{call, connect},
};

on_both_backends!(an_escaped_nul_anywhere_in_a_tool_call_is_refused_and_stores_nothing);

/// What every refusal of a NUL says (`domain::nul::REFUSED`).
const REFUSED: &str = "text must not contain the NUL character (U+0000)";

async fn an_escaped_nul_anywhere_in_a_tool_call_is_refused_and_stores_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", "concierge").await;
    let token = agent("acme");
    let client = connect(&app, &token).await;
    let owned = |arguments: Value| {
        let mut arguments = arguments;
        arguments["agent_id"] = "concierge".into();
        arguments["external_ref"] = "ann".into();
        arguments
    };
    let calls = [
        ("remember", owned(json!({"fact": "Lives in Nul\u{0}ville"}))),
        ("remember", owned(json!({"fact": "Likes tea", "tags": ["drinks", "t\u{0}"]}))),
        // A key: without the walk, an unknown argument, refused for another reason.
        ("remember", owned(json!({"fact": "Likes tea", "not\u{0}e": "x"}))),
        // Nested: an object inside an array inside an object, its key and its value.
        ("remember", owned(json!({"fact": "Likes tea", "tags": [{"k\u{0}": "v"}]}))),
        ("remember", owned(json!({"fact": "Likes tea", "score": {"deep": [{"k": "v\u{0}"}]}}))),
        // The owner, taken from the arguments before they are parsed.
        ("remember", json!({"agent_id": "concierge", "external_ref": "an\u{0}n", "fact": "Likes tea"})),
        ("recall", owned(json!({"query": "tea\u{0}"}))),
        ("write_working_memory", owned(json!({"content": "Gift: Nul\u{0}box"}))),
    ];
    for (name, arguments) in calls {
        let result = call(&client, name, arguments.clone()).await;
        assert_eq!(result.is_error, Some(true), "{name} {arguments}: {result:?}");
        let body = result.structured_content.expect("the error body");
        assert_eq!(body["error"]["code"], "invalid_request", "{name} {arguments}: {body}");
        assert_eq!(body["error"]["message"], REFUSED, "{name} {arguments}: {body}");

        let (status, body) = app.post("/api/tools/call", &token, json!({"name": name, "arguments": arguments})).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(body["error"]["message"], REFUSED, "{name}: {body}");
    }
    // Nothing of them was written: no fact, no working memory, for ann or anyone.
    let (status, facts) = app.get("/api/agents/concierge/users/ann/facts", &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{facts}");
    assert_eq!(facts["items"], json!([]), "{facts}");
    let (status, memory) = app.get("/api/agents/concierge/users/ann/working-memory", &admin("acme")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{memory}");
    let (status, events) = app.get("/api/events", &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{events}");
    let kinds = events["items"].as_array().expect("events").iter().filter_map(|e| e["type"].as_str());
    assert!(kinds.clone().all(|t| !t.starts_with("fact.") && !t.starts_with("working_memory.")), "{events}");
    // The same calls without the NUL go through: the refusals were the NUL's.
    let result = call(&client, "remember", owned(json!({"fact": "Likes tea", "tags": ["drinks"]}))).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
}
