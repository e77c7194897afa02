//! The served OpenAPI document is one generated clients can trust: every error status a
//! route can answer is documented, and requests the spec calls valid are accepted (the
//! disagreements schemathesis found, each pinned here). `scripts/schemathesis` runs
//! the full contract test against a live server.

use crate::common::{Backend, TestApp, admin, assert_error, on_both_backends};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// Every authenticated route documents 400, 401, 403, 429 and 503 with the error
/// schema; every route with a JSON body also 413 and 415 (the import's NDJSON is
/// streamed: no body limit, each line capped and reported on its own).
#[tokio::test]
async fn every_route_documents_the_errors_it_can_answer() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (status, spec) = app.call(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let mut checked = 0;
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if operation.get("security").is_none() {
                continue;
            }
            let mut expected = vec!["400", "401", "403", "429", "503"];
            if operation["requestBody"]["content"].get("application/json").is_some() {
                expected.extend(["413", "415"]);
            }
            for code in expected {
                let response = &operation["responses"][code];
                assert_eq!(
                    response["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody",
                    "{method} {path} does not document {code} with the error body"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 25, "only {checked} authenticated operations found");
}

/// Every `$ref` names a schema the document holds (a parameter's type is not collected
/// into the components unless inlined: schemathesis found `GET /api/tools`' `Format`).
#[tokio::test]
async fn every_reference_resolves() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, spec) = app.call(Method::GET, "/openapi.json", None, None).await;
    fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                out.extend(map.get("$ref").and_then(Value::as_str));
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    refs(&spec, &mut found);
    assert!(!found.is_empty());
    for reference in found {
        let name = reference.strip_prefix("#/components/schemas/").expect("a schema reference");
        assert!(spec["components"]["schemas"].get(name).is_some(), "{reference} does not resolve");
    }
}

/// The request bodies the server reads with `deny_unknown_fields` say so.
#[tokio::test]
async fn request_bodies_refuse_unknown_fields_in_the_spec() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, spec) = app.call(Method::GET, "/openapi.json", None, None).await;
    let schemas = &spec["components"]["schemas"];
    for name in ["NewConversation", "ConversationPatch", "AppendRequest", "ToolCall", "ConfigPatch", "ConsentBody"] {
        assert_eq!(schemas[name]["additionalProperties"], json!(false), "{name}");
    }
    for shape in schemas["NewMessage"]["oneOf"].as_array().unwrap() {
        assert_eq!(shape["additionalProperties"], json!(false), "{shape}");
    }
}

/// serde reads a struct from an array of its fields too; the API only takes objects.
#[tokio::test]
async fn a_json_array_is_not_a_patch() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let token = admin("acme");
    let (status, created) =
        app.post("/api/conversations", &token, json!({"agent_id": "bot", "external_ref": "u1", "title": "kept"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let path = format!("/api/conversations/{}", created["id"].as_str().unwrap());
    let (status, body) = app.patch(&path, &token, json!([null, null])).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (_, fetched) = app.get(&path, &token).await;
    assert_eq!(fetched["title"], "kept");
}

/// JSON Schema's `integer` includes `5.0`, so the server takes it.
#[tokio::test]
async fn integer_settings_may_be_written_with_a_zero_fraction() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (status, config) = app
        .put("/api/agents-config/bot", &admin("acme"), json!({"min_user_turns": 5.0, "max_injected_facts": 7}))
        .await;
    assert_eq!(status, StatusCode::OK, "{config}");
    assert_eq!((config["min_user_turns"].clone(), config["max_injected_facts"].clone()), (json!(5), json!(7)));
    let (status, body) = app.put("/api/agents-config/bot", &admin("acme"), json!({"min_user_turns": 5.5})).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
}

/// The spec's `maxLength` of a fact is on the text as sent, so a client's own check
/// and the server agree even when the text would shrink when cleaned.
#[tokio::test]
async fn fact_length_is_checked_as_sent() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let facts = "/api/agents/bot/users/u1/facts";
    let (_, spec) = app.call(Method::GET, "/openapi.json", None, None).await;
    let max = spec["components"]["schemas"]["FactString"]["maxLength"].as_u64().unwrap() as usize;
    let padded = format!("  {}", "x".repeat(max - 1));
    let (status, body) = app.post(facts, &admin("acme"), json!({"fact": padded})).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, body) = app.post(facts, &admin("acme"), json!({"fact": "x".repeat(max)})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// What the spec's patterns promise: the server's rules, value for value.
#[tokio::test]
async fn spec_patterns_match_the_server_rules() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, spec) = app.call(Method::GET, "/openapi.json", None, None).await;
    let schemas = &spec["components"]["schemas"];
    let pattern = |name: &str| schemas[name]["pattern"].as_str().unwrap().to_owned();
    assert_eq!(pattern("AgentId"), "^[A-Za-z0-9._:-]{1,128}$");
    assert_eq!(
        (schemas["ExternalRef"]["minLength"].clone(), schemas["ExternalRef"]["maxLength"].clone()),
        (json!(1), json!(256))
    );
    let token = admin("acme");
    // A C1 control character is outside the external_ref pattern, and the server refuses it.
    assert!(pattern("ExternalRef").contains("\\u007F-\\u009F"));
    let (status, body) = app.get("/api/users/a%C2%87b/consent", &token).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, _) = app.get("/api/users/a%C2%A0b/consent", &token).await;
    assert_eq!(status, StatusCode::OK, "U+00A0 is printable");
    let search: &Value = &spec["paths"]["/api/agents/{agent_id}/users/{external_ref}/facts/search"]["get"];
    let q = search["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "q").unwrap();
    assert_eq!(q["required"], json!(true));
    let (status, body) = app.get("/api/agents/bot/users/u1/facts/search", &token).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
}

on_both_backends!(extreme_json_numbers_round_trip);

/// Any JSON number a client may send in `content` or `metadata` reads back: PostgreSQL's
/// jsonb prints the largest doubles digit by digit, which serde_json without correct
/// rounding read as out of range (a 500 on every later read of the conversation).
async fn extreme_json_numbers_round_trip(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = admin("acme");
    let (_, conversation) =
        app.post("/api/conversations", &token, json!({"agent_id": "bot", "external_ref": "u1"})).await;
    let messages = format!("/api/conversations/{}/messages", conversation["id"].as_str().unwrap());
    let numbers = json!([f64::MAX, -f64::MAX, f64::MIN_POSITIVE, 5e-324, 1.7976931348623155e308, 5.600953322730294e16]);
    let message = json!({"role": "user", "content": [{"type": "data", "values": numbers}], "metadata": {"n": numbers}});
    let (status, body) = app.post(&messages, &token, json!({"messages": [message]})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, page) = app.get(&messages, &token).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    // As numbers: jsonb may write a whole double as an integer (`56009533227302940`).
    let as_f64 = |v: &Value| v.as_array().unwrap().iter().map(|n| n.as_f64().unwrap()).collect::<Vec<_>>();
    assert_eq!(as_f64(&page["items"][0]["content"][0]["values"]), as_f64(&numbers));
    assert_eq!(as_f64(&page["items"][0]["metadata"]["n"]), as_f64(&numbers));
}

/// The `types` filter of both event feeds states exactly the names the server knows (the
/// pattern is written out for utoipa; `engram::domain::event::TYPES_PATTERN` is checked
/// against every event type).
#[tokio::test]
async fn the_event_type_filter_pattern_is_the_servers() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, spec) = app.call(Method::GET, "/openapi.json", None, None).await;
    for path in ["/api/events", "/api/agents/{agent_id}/users/{external_ref}/events"] {
        let parameters = spec["paths"][path]["get"]["parameters"].as_array().expect(path);
        let types = parameters.iter().find(|p| p["name"] == "types").expect("types");
        assert_eq!(types["schema"]["pattern"], engram::domain::event::TYPES_PATTERN, "{path}");
    }
}
