//! The memory tools, on both backends: driven over `/mcp` with the official Rust MCP
//! client (Streamable HTTP) and over `/api/tools` with plain HTTP. Remember → recall by
//! meaning (the real local model) → update → forget; facts written by tools are
//! `source: "agent"`; a user-bound token reaches only its own agent and user, through MCP
//! and through REST; memory off or consent refused stores nothing; scopes apply; the
//! OpenAI and Anthropic definitions have the shape those APIs take; `/api/tools/call`
//! answers what MCP answers.

use reqwest::StatusCode;
use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult},
    service::RunningService,
    transport::{StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig},
};
use serde_json::{Value, json};

use crate::{
    common::*,
    semantic::{all_embedded_with, spawn_with_local_model},
};

on_both_backends!(
    an_mcp_client_remembers_recalls_by_meaning_updates_and_forgets,
    a_user_bound_token_reaches_only_its_own_user,
    memory_off_or_consent_refused_stores_nothing,
    scopes_apply_to_tools,
    mcp_needs_a_valid_token_and_keeps_the_api_limits,
    mcp_shares_the_tenant_rate_limit,
    tool_definitions_have_the_openai_and_anthropic_shapes,
    tools_call_answers_what_mcp_answers,
    the_fact_cap_answers_alike_through_rest_tools_and_mcp,
);

const TOOLS: [&str; 8] = [
    "remember",
    "recall",
    "list_memories",
    "update_memory",
    "forget",
    "memory_context",
    "read_working_memory",
    "write_working_memory",
];

type Client = RunningService<RoleClient, ()>;

/// An MCP client connected to the app's `/mcp` with `token` (the handshake done).
pub(crate) async fn connect(app: &TestApp, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", app.base)).auth_header(token);
    ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("the MCP client connects")
}

/// Calls tool `name`; the result, error or not (a transport failure fails the test).
pub(crate) async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    let arguments = arguments.as_object().cloned().expect("arguments are an object");
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
    tokio::time::timeout(std::time::Duration::from_secs(30), client.call_tool(params))
        .await
        .expect("the tool answers in time")
        .expect("a tool call never fails at the protocol level")
}

/// The structured result of a successful call.
#[track_caller]
fn ok(result: CallToolResult) -> Value {
    assert_eq!(result.is_error, Some(false), "{result:?}");
    result.structured_content.expect("structured content")
}

/// Asserts a tool error carrying the API's error `code`; returns its body.
#[track_caller]
fn tool_error(result: CallToolResult, code: &str) -> Value {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let body = result.structured_content.expect("the error body");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(body["error"]["request_id"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    body
}

fn owner(agent_id: &str, user: &str, mut arguments: Value) -> Value {
    arguments["agent_id"] = agent_id.into();
    arguments["external_ref"] = user.into();
    arguments
}

/// The user's facts for the agent, as REST lists them.
async fn stored(app: &TestApp, agent_id: &str, user: &str) -> Vec<Value> {
    let (status, page) = app.get(&format!("/api/agents/{agent_id}/users/{}/facts", enc(user)), &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["items"].as_array().expect("items").clone()
}

async fn an_mcp_client_remembers_recalls_by_meaning_updates_and_forgets(backend: Backend) {
    let app = spawn_with_local_model(backend).await;
    app.enable_memory("acme", "concierge").await;
    let client = connect(&app, &agent("acme")).await;

    let server = client.peer_info().expect("the server introduced itself");
    assert_eq!(server.server_info.as_ref().map(|s| s.name.as_str()), Some("engram"));
    assert!(server.capabilities.tools.is_some());
    let tools = client.list_all_tools().await.expect("tools listed");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, TOOLS);
    for tool in &tools {
        assert!(tool.description.as_ref().is_some_and(|d| !d.is_empty() && !d.contains('\n')), "{tool:?}");
        assert_eq!(tool.input_schema["type"], "object");
        assert_eq!(tool.input_schema["additionalProperties"], false);
        let required = tool.input_schema["required"].as_array().expect("required");
        assert!(required.contains(&json!("agent_id")) && required.contains(&json!("external_ref")), "{tool:?}");
    }
    let remember = &tools[0].input_schema["properties"];
    assert_eq!(remember["fact"]["maxLength"], 1000);
    assert_eq!(remember["score"]["maximum"], 1.0);
    assert_eq!(remember["tags"]["maxItems"], 20);

    let fact = ok(call(
        &client,
        "remember",
        owner("concierge", "ann", json!({"fact": "Prefers tea over coffee", "tags": ["drinks"], "score": 0.9})),
    )
    .await);
    assert_eq!(fact["source"], "agent", "{fact}");
    assert_eq!((fact["fact"].as_str(), fact["external_ref"].as_str()), (Some("Prefers tea over coffee"), Some("ann")));
    for distractor in ["Lives in Lyon", "Works as a nurse", "Plays the cello on weekends", "Drives a red car"] {
        ok(call(&client, "remember", owner("concierge", "ann", json!({"fact": distractor}))).await);
    }
    let again =
        ok(call(&client, "remember", owner("concierge", "ann", json!({"fact": "prefers TEA over coffee."}))).await);
    assert_eq!(again["id"], fact["id"], "the same fact is stored once");
    assert_eq!(all_embedded_with(&app.db, "local:all-MiniLM-L6-v2").await, 5);

    // By meaning: no word of the query is in the fact.
    let found =
        ok(call(&client, "recall", owner("concierge", "ann", json!({"query": "what do I drink in the morning"})))
            .await);
    assert_eq!(found["items"][0]["id"], fact["id"], "{found}");
    assert!(found["items"][0]["relevance"].as_f64().is_some_and(|r| r > 0.0), "{found}");

    let id = fact["id"].as_str().expect("id");
    let updated =
        ok(call(&client, "update_memory", owner("concierge", "ann", json!({"id": id, "fact": "Prefers green tea"})))
            .await);
    assert_eq!((updated["fact"].as_str(), updated["source"].as_str()), (Some("Prefers green tea"), Some("agent")));
    let listed = ok(call(&client, "list_memories", owner("concierge", "ann", json!({"tag": "drinks"}))).await);
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed["items"][0]["fact"], "Prefers green tea");
    let context = ok(call(&client, "memory_context", owner("concierge", "ann", json!({"max_facts": 2}))).await);
    assert_eq!(context["enabled"], true);
    assert!(context["prompt"].as_str().is_some_and(|p| p.starts_with("<user-memory>")), "{context}");

    let forgotten = ok(call(&client, "forget", owner("concierge", "ann", json!({"id": id}))).await);
    assert_eq!(forgotten, json!({"id": id, "deleted": true}));
    assert!(stored(&app, "concierge", "ann").await.iter().all(|f| f["id"] != id));
    tool_error(call(&client, "forget", owner("concierge", "ann", json!({"id": id}))).await, "not_found");
    // Every fact the tools stored is an agent fact, as REST shows it.
    assert!(stored(&app, "concierge", "ann").await.iter().all(|f| f["source"] == "agent"));
    client.cancel().await.expect("the client closes");
}

async fn a_user_bound_token_reaches_only_its_own_user(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &[]).await;
    app.enable_memory("acme", "sales").await;
    let (_, bobs) =
        app.post("/api/agents/concierge/users/bob/facts", &agent("acme"), json!({"fact": "Bob likes jazz"})).await;
    let bobs = bobs["id"].as_str().expect("bob's fact").to_owned();
    let (_, sales) =
        app.post("/api/agents/sales/users/ann/facts", &agent("acme"), json!({"fact": "Ann likes jazz"})).await;
    let sales = sales["id"].as_str().expect("the sales agent's fact").to_owned();
    let bound =
        token_with(json!({"scope": "memory:read memory:write", "agent_id": "concierge", "external_ref": "ann"}));

    // MCP: the tools take no owner, and act on the token's own.
    let client = connect(&app, &bound).await;
    for tool in client.list_all_tools().await.expect("tools") {
        let properties = tool.input_schema["properties"].as_object().expect("properties");
        assert!(!properties.contains_key("agent_id") && !properties.contains_key("external_ref"), "{tool:?}");
    }
    let own = ok(call(&client, "remember", json!({"fact": "Ann likes jazz too"})).await);
    assert_eq!((own["agent_id"].as_str(), own["external_ref"].as_str()), (Some("concierge"), Some("ann")));
    ok(call(&client, "remember", owner("concierge", "ann", json!({"fact": "Ann plays the piano"}))).await);
    // Naming another user or agent is refused, and stores nothing.
    for (agent_id, user) in [("concierge", "bob"), ("sales", "ann"), ("sales", "bob")] {
        tool_error(call(&client, "remember", owner(agent_id, user, json!({"fact": "Injected"}))).await, "forbidden");
        tool_error(call(&client, "recall", owner(agent_id, user, json!({"query": "jazz"}))).await, "forbidden");
    }
    tool_error(call(&client, "list_memories", json!({"external_ref": "bob"})).await, "forbidden");
    // Their facts' ids are not found.
    for id in [&bobs, &sales] {
        tool_error(call(&client, "forget", json!({"id": id})).await, "not_found");
        tool_error(call(&client, "update_memory", json!({"id": id, "fact": "Changed"})).await, "not_found");
    }
    let found = ok(call(&client, "recall", json!({"query": "jazz"})).await);
    let texts: Vec<&str> =
        found["items"].as_array().expect("items").iter().filter_map(|f| f["fact"].as_str()).collect();
    assert_eq!(texts, ["Ann likes jazz too"]);
    assert_eq!(stored(&app, "concierge", "bob").await.len(), 1);
    assert_eq!(stored(&app, "sales", "ann").await.len(), 1);
    assert_eq!(stored(&app, "sales", "bob").await.len(), 0);
    assert_eq!(stored(&app, "concierge", "ann").await.len(), 2);

    // REST: the token's own paths work; any other agent or user is refused; their ids are 404.
    let (status, page) = app.get("/api/agents/concierge/users/ann/facts", &bound).await;
    assert_eq!((status, page["items"].as_array().map(Vec::len)), (StatusCode::OK, Some(2)), "{page}");
    for path in [
        "/api/agents/concierge/users/bob/facts",
        "/api/agents/sales/users/ann/facts",
        "/api/agents/sales/users/ann/memory-context",
        "/api/agents/concierge/users/bob/facts/search?q=jazz",
        "/api/users/bob/consent",
        "/api/conversations",
        "/api/agents-config/concierge",
    ] {
        let (status, body) = app.get(path, &bound).await;
        assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");
    }
    let (status, body) = app.post("/api/agents/concierge/users/bob/facts", &bound, json!({"fact": "Injected"})).await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");
    let (status, body) =
        app.post("/api/conversations", &bound, json!({"agent_id": "concierge", "external_ref": "bob"})).await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");
    let (status, body) = app.delete(&format!("/api/agents/concierge/users/ann/facts/{bobs}"), &bound).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) =
        app.patch(&format!("/api/agents/concierge/users/ann/facts/{sales}"), &bound, json!({"fact": "Changed"})).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) = app
        .post(
            "/api/tools/call",
            &bound,
            json!({"name": "recall", "arguments": {"external_ref": "bob", "query": "jazz"}}),
        )
        .await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(stored(&app, "concierge", "bob").await[0]["fact"], "Bob likes jazz");
    assert_eq!(stored(&app, "sales", "ann").await[0]["fact"], "Ann likes jazz");

    // A token naming only one of the two is no token.
    let half = token_with(json!({"scope": "memory:read", "external_ref": "ann"}));
    let (status, body) = app.get("/api/agents/concierge/users/ann/facts", &half).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");
}

async fn memory_off_or_consent_refused_stores_nothing(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &[]).await;
    let token = agent("acme");
    let (status, _) = app.put("/api/users/ann/consent", &token, json!({"ai_consent": false})).await;
    assert_eq!(status, StatusCode::OK);
    let client = connect(&app, &token).await;

    // Refused consent: every tool says so, and nothing is stored.
    for (tool, arguments) in [("remember", json!({"fact": "Is vegan"})), ("recall", json!({"query": "vegan"}))] {
        let body = tool_error(call(&client, tool, owner("concierge", "ann", arguments)).await, "conflict");
        assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("refused")), "{body}");
    }
    tool_error(call(&client, "memory_context", owner("concierge", "ann", json!({}))).await, "conflict");
    assert!(stored(&app, "concierge", "ann").await.is_empty());
    let (status, body) = app
        .post(
            "/api/tools/call",
            &token,
            json!({"name": "remember", "arguments": owner("concierge", "ann", json!({"fact": "Is vegan"}))}),
        )
        .await;
    assert_error(status, &body, StatusCode::CONFLICT, "conflict");
    assert!(stored(&app, "concierge", "ann").await.is_empty());

    // Memory off for the agent (never configured, then switched off).
    let body =
        tool_error(call(&client, "remember", owner("silent", "bob", json!({"fact": "Is vegan"}))).await, "conflict");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("memory is off")), "{body}");
    assert!(stored(&app, "silent", "bob").await.is_empty());
    ok(call(&client, "remember", owner("concierge", "bob", json!({"fact": "Is vegan"}))).await);
    let (status, _) = app.put("/api/agents-config/concierge", &admin("acme"), json!({"memory_enabled": false})).await;
    assert_eq!(status, StatusCode::OK);
    tool_error(call(&client, "remember", owner("concierge", "bob", json!({"fact": "Eats fish"}))).await, "conflict");
    assert_eq!(stored(&app, "concierge", "bob").await.len(), 1);
}

async fn scopes_apply_to_tools(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &[]).await;
    ok(call(
        &connect(&app, &agent("acme")).await,
        "remember",
        owner("concierge", "ann", json!({"fact": "Likes jazz"})),
    )
    .await);

    let reader = connect(&app, &token("acme", "memory:read")).await;
    tool_error(call(&reader, "remember", owner("concierge", "ann", json!({"fact": "Injected"}))).await, "forbidden");
    let fact = &stored(&app, "concierge", "ann").await[0];
    let id = fact["id"].as_str().expect("id");
    tool_error(
        call(&reader, "update_memory", owner("concierge", "ann", json!({"id": id, "score": 1}))).await,
        "forbidden",
    );
    tool_error(call(&reader, "forget", owner("concierge", "ann", json!({"id": id}))).await, "forbidden");
    let found = ok(call(&reader, "recall", owner("concierge", "ann", json!({"query": "jazz"}))).await);
    assert_eq!(found["items"][0]["id"], fact["id"]);
    assert_eq!(stored(&app, "concierge", "ann").await.len(), 1);
    let (status, body) = app
        .post(
            "/api/tools/call",
            &token("acme", "memory:read"),
            json!({"name": "forget", "arguments": owner("concierge", "ann", json!({"id": id}))}),
        )
        .await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");

    // No tool deletes everything; unknown tools and arguments are refused.
    let writer = connect(&app, &agent("acme")).await;
    tool_error(call(&writer, "forget_all", owner("concierge", "ann", json!({}))).await, "invalid_request");
    tool_error(
        call(&writer, "recall", owner("concierge", "ann", json!({"query": "jazz", "tenant": "other"}))).await,
        "invalid_request",
    );
    tool_error(call(&writer, "recall", json!({"query": "jazz"})).await, "invalid_request");
    tool_error(
        call(&writer, "remember", owner("concierge", "ann", json!({"fact": "x".repeat(1001)}))).await,
        "invalid_request",
    );
    tool_error(
        call(&writer, "forget", owner("concierge", "ann", json!({"id": "not-a-uuid"}))).await,
        "invalid_request",
    );
    assert_eq!(stored(&app, "concierge", "ann").await.len(), 1);
}

async fn mcp_needs_a_valid_token_and_keeps_the_api_limits(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--max-body-bytes", "4096"]).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let expired = token_with(json!({"exp": now() - 3600}));
    for token in [None, Some("not-a-token"), Some(expired.as_str())] {
        let mut request = app
            .client
            .post(format!("{}/mcp", app.base))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("sent");
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        let body: Value = response.json().await.expect("an API error body");
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    }
    let raw = |body: String| {
        app.client
            .post(format!("{}/mcp", app.base))
            .bearer_auth(agent("acme"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let response = raw(initialize.to_string()).await.expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
    let over = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "remember",
        "arguments": owner("concierge", "ann", json!({"fact": "x".repeat(5000)}))}});
    let refused = raw(over.to_string()).await.expect("sent");
    assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: Value = refused.json().await.expect("an API error body");
    assert_eq!(body["error"]["code"], "payload_too_large", "{body}");

    let client = connect(&app, &agent("acme")).await;
    tool_error(
        call(&client, "remember", owner("concierge", "ann", json!({"fact": "Nul\u{0}here"}))).await,
        "invalid_request",
    );
    tool_error(
        call(&client, "remember", owner("concierge", "ann", json!({"fact": "Ok", "tags": ["a\u{0}"]}))).await,
        "invalid_request",
    );
    assert!(stored(&app, "concierge", "ann").await.is_empty());
}

async fn mcp_shares_the_tenant_rate_limit(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--rate-limit-per-sec", "1", "--rate-limit-burst", "2"]).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let response = app
            .client
            .post(format!("{}/mcp", app.base))
            .bearer_auth(agent("acme"))
            .header("accept", "application/json, text/event-stream")
            .json(&ping)
            .send()
            .await
            .expect("sent");
        statuses.push(response.status());
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            assert!(response.headers().contains_key("retry-after"));
            let body: Value = response.json().await.expect("an API error body");
            assert_eq!(body["error"]["code"], "rate_limited", "{body}");
        }
    }
    assert_eq!(statuses, [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]);
    // The REST API counts against the same budget.
    let (status, body) = app.get("/api/tools?format=openai", &agent("acme")).await;
    assert_error(status, &body, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
}

async fn tool_definitions_have_the_openai_and_anthropic_shapes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let name_rule = |name: &str| {
        !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    let check_schema = |schema: &Value| {
        assert_eq!(schema["type"], "object", "{schema}");
        let properties = schema["properties"].as_object().expect("properties");
        for required in schema["required"].as_array().expect("required") {
            assert!(properties.contains_key(required.as_str().expect("a name")), "{schema}");
        }
        for property in properties.values() {
            assert!(property.get("type").is_some(), "every property has a type: {schema}");
            assert!(
                property["description"].as_str().is_some_and(|d| !d.is_empty())
                    || property.get("format").is_some()
                    || property.get("default").is_some()
                    || property["type"] == "integer",
                "{schema}"
            );
        }
        let text = schema.to_string();
        assert!(!text.contains("$ref") && !text.contains("\"example\""), "self-contained JSON Schema: {schema}");
    };

    let (status, openai) = app.get("/api/tools?format=openai", &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{openai}");
    let tools = openai["tools"].as_array().expect("tools");
    assert_eq!(tools.iter().map(|t| t["function"]["name"].as_str().unwrap_or_default()).collect::<Vec<_>>(), TOOLS);
    for tool in tools {
        let keys: Vec<&String> = tool.as_object().expect("a tool").keys().collect();
        assert_eq!(keys, ["function", "type"], "exactly these (sorted): {tool}");
        assert_eq!(tool["type"], "function");
        let function = &tool["function"];
        assert!(name_rule(function["name"].as_str().expect("name")), "{tool}");
        assert!(function["description"].as_str().is_some_and(|d| !d.is_empty() && d.len() <= 1024), "{tool}");
        check_schema(&function["parameters"]);
    }

    let (status, anthropic) = app.get("/api/tools?format=anthropic", &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{anthropic}");
    let tools = anthropic["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), TOOLS.len());
    for (tool, openai) in tools.iter().zip(openai["tools"].as_array().expect("tools")) {
        let keys: Vec<&String> = tool.as_object().expect("a tool").keys().collect();
        assert_eq!(keys, ["description", "input_schema", "name"], "exactly these (sorted): {tool}");
        assert!(name_rule(tool["name"].as_str().expect("name")), "{tool}");
        check_schema(&tool["input_schema"]);
        assert_eq!(tool["input_schema"], openai["function"]["parameters"], "one schema behind both");
    }

    let bound = token_with(json!({"scope": "memory:read", "agent_id": "concierge", "external_ref": "ann"}));
    let (_, mine) = app.get("/api/tools?format=anthropic", &bound).await;
    assert!(!mine.to_string().contains("external_ref"), "{mine}");
    for query in ["", "?format=mcp", "?format=OpenAI"] {
        let (status, body) = app.get(&format!("/api/tools{query}"), &agent("acme")).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    }
    let (status, body) = app.call(reqwest::Method::GET, "/api/tools?format=openai", None, None).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");
}

async fn tools_call_answers_what_mcp_answers(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &[]).await;
    let client = connect(&app, &agent("acme")).await;
    let rest = |name: &str, arguments: Value| {
        let body = json!({"name": name, "arguments": owner("concierge", "ann", arguments)});
        let app = &app;
        async move { app.post("/api/tools/call", &agent("acme"), body).await }
    };

    let (status, by_rest) = rest("remember", json!({"fact": "Likes jazz", "tags": ["music"]})).await;
    assert_eq!(status, StatusCode::OK, "{by_rest}");
    assert_eq!(by_rest["source"], "agent");
    let by_mcp =
        ok(call(&client, "remember", owner("concierge", "ann", json!({"fact": "Likes jazz", "tags": ["music"]})))
            .await);
    assert_eq!(by_mcp, by_rest, "the same fact, found again");
    ok(call(&client, "remember", owner("concierge", "ann", json!({"fact": "Plays jazz piano"}))).await);

    for (name, arguments) in [
        ("recall", json!({"query": "jazz"})),
        ("list_memories", json!({"limit": 1})),
        ("memory_context", json!({"query": "piano"})),
    ] {
        let (status, by_rest) = rest(name, arguments.clone()).await;
        assert_eq!(status, StatusCode::OK, "{name}: {by_rest}");
        let by_mcp = ok(call(&client, name, owner("concierge", "ann", arguments)).await);
        assert_eq!(by_mcp, by_rest, "{name}");
    }
    let (_, page) = rest("list_memories", json!({"limit": 1})).await;
    let cursor = page["next_cursor"].as_str().expect("a second page");
    let (_, second) = rest("list_memories", json!({"limit": 1, "cursor": cursor})).await;
    assert_eq!(second["items"][0]["fact"], "Likes jazz", "{second}");

    let missing = uuid::Uuid::now_v7().to_string();
    let (status, by_rest) = rest("forget", json!({"id": missing})).await;
    assert_error(status, &by_rest, StatusCode::NOT_FOUND, "not_found");
    let by_mcp =
        tool_error(call(&client, "forget", owner("concierge", "ann", json!({"id": missing}))).await, "not_found");
    assert_eq!(by_mcp["error"]["message"], by_rest["error"]["message"]);

    let (status, body) = app.post("/api/tools/call", &agent("acme"), json!({"name": "recall", "args": {}})).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, body) =
        app.post("/api/tools/call", &agent("acme"), json!({"name": "recall", "arguments": {"query": "a\u{0}"}})).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
}

/// One rule, three doors: the per-user fact cap is `service::facts::remember`'s, and REST,
/// `/api/tools/call` and MCP each answer it with the same code and the same words, and
/// store nothing past it. (The admin panel's door is in tests/admin.rs.)
async fn the_fact_cap_answers_alike_through_rest_tools_and_mcp(backend: Backend) {
    let app = TestApp::spawn_with_memory(backend, &["--max-facts-per-user", "2"]).await;
    let token = agent("acme");
    let path = "/api/agents/concierge/users/ann/facts";
    for fact in ["Likes jazz", "Lives in Lyon"] {
        let (status, body) = app.post(path, &token, json!({"fact": fact})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, rest) = app.post(path, &token, json!({"fact": "Owns a cat"})).await;
    assert_error(status, &rest, StatusCode::CONFLICT, "conflict");
    let message = rest["error"]["message"].as_str().expect("a message").to_owned();
    assert!(message.contains("maximum of 2 facts"), "{message}");

    let arguments = owner("concierge", "ann", json!({"fact": "Owns a dog"}));
    let (status, tools) =
        app.post("/api/tools/call", &token, json!({"name": "remember", "arguments": arguments.clone()})).await;
    assert_error(status, &tools, StatusCode::CONFLICT, "conflict");
    assert_eq!(tools["error"]["message"], message.as_str());

    let client = connect(&app, &token).await;
    let mcp = tool_error(call(&client, "remember", arguments).await, "conflict");
    assert_eq!(mcp["error"]["message"], message.as_str());
    client.cancel().await.expect("the client closes");

    let facts: Vec<String> = stored(&app, "concierge", "ann").await.iter().map(|f| f["fact"].to_string()).collect();
    assert_eq!(facts.len(), 2, "{facts:?}");
}
