//! Auth, errors, agent configuration, consent and operations routes, on both backends.

use crate::common::*;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

on_both_backends!(
    put_fills_defaults_and_get_returns_it,
    put_is_a_partial_update,
    invalid_config_is_rejected_and_changes_nothing,
    bad_tokens_are_unauthorized,
    the_jwt_leeway_is_a_setting,
    scopes_are_enforced,
    tenants_never_see_each_other,
    list_paginates_by_agent_id,
    delete_turns_memory_off,
    consent_defaults_and_updates,
    config_and_consent_survive_a_restart,
    errors_carry_request_ids_and_json_bodies,
    operations_routes_answer,
);

async fn put_fills_defaults_and_get_returns_it(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = admin("acme");
    let (status, body) = app.put("/api/agents-config/support-bot", &token, json!({"memory_enabled": true})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["agent_id"], "support-bot");
    assert_eq!(body["memory_enabled"], true);
    assert_eq!(body["min_user_turns"], 3);
    assert_eq!(body["max_injected_facts"], 10);
    assert_eq!(body["min_confidence"], 0.7);
    assert_eq!(body["extraction_instructions"], Value::Null);
    assert!(body["created_at"].is_string() && body["updated_at"].is_string());

    let (status, fetched) = app.get("/api/agents-config/support-bot", &token).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fetched, body);
}

async fn put_is_a_partial_update(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = admin("acme");
    let path = "/api/agents-config/bot";
    app.put(path, &token, json!({"memory_enabled": true, "min_user_turns": 5, "extraction_instructions": "Be brief"}))
        .await;
    let (status, body) = app.put(path, &token, json!({"min_confidence": 0.9})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["memory_enabled"], true);
    assert_eq!(body["min_user_turns"], 5);
    assert_eq!(body["min_confidence"], 0.9);
    assert_eq!(body["extraction_instructions"], "Be brief");
    let (_, cleared) = app.put(path, &token, json!({"extraction_instructions": null})).await;
    assert_eq!(cleared["extraction_instructions"], Value::Null);
    assert_eq!(cleared["min_user_turns"], 5);
}

async fn invalid_config_is_rejected_and_changes_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = admin("acme");
    let (_, before) = app.put("/api/agents-config/bot", &token, json!({"memory_enabled": true})).await;
    let invalid = [
        json!({"min_user_turns": 0}),
        json!({"min_user_turns": 101}),
        json!({"max_injected_facts": 0}),
        json!({"min_confidence": 2}),
        json!({"min_confidence": -1}),
        json!({"memory_enabled": "yes"}),
        json!({"unknown_field": true}),
        json!({"extraction_instructions": "x".repeat(4001)}),
        json!([1, 2]),
    ];
    for body in invalid {
        let (status, error) = app.put("/api/agents-config/bot", &token, body.clone()).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    }
    // Malformed JSON, with the right content type.
    let (status, error) =
        app.put_raw("/api/agents-config/bot", &token, "application/json", "{\"memory_enabled\": tru").await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    // Bad agent ids in the path.
    for bad in ["x".repeat(200), "a%2Fb".to_string(), "a%20b".to_string()] {
        let (status, error) =
            app.put(&format!("/api/agents-config/{bad}"), &token, json!({"memory_enabled": true})).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    }
    let (status, _) = app.get(&format!("/api/agents-config/{}", "x".repeat(200)), &token).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, after) = app.get("/api/agents-config/bot", &token).await;
    assert_eq!(after, before, "a rejected request changed the config");
    let (_, list) = app.get("/api/agents-config", &token).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
}

async fn bad_tokens_are_unauthorized(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let path = "/api/agents-config/bot";
    let expired = token_with(json!({"exp": now() - 3600}));
    let not_yet = token_with(json!({"nbf": now() + 3600}));
    let no_tenant = token_with(json!({"tenant": null}));
    let no_exp = token_with(json!({"exp": null}));
    let wrong_key = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"tenant": "acme", "exp": now() + 3600, "scope": "admin"}),
        &jsonwebtoken::EncodingKey::from_secret(b"another-secret-another-secret-another"),
    )
    .unwrap();
    // alg none: header {"alg":"none","typ":"JWT"}, no signature.
    let b64 = |v: &Value| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    let alg_none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&json!({"tenant": "acme", "exp": now() + 3600, "scope": "admin"}))
    );
    let hs512 = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS512),
        &json!({"tenant": "acme", "exp": now() + 3600, "scope": "admin"}),
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    let string_exp = token_with(json!({"exp": (now() + 3600).to_string()}));
    let tokens = [
        expired,
        not_yet,
        no_tenant,
        no_exp,
        wrong_key,
        alg_none,
        hs512,
        string_exp,
        "garbage".into(),
        "a.b.c".into(),
        String::new(),
    ];
    for token in &tokens {
        let (status, body) = app.get(path, token).await;
        assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");
    }
    let (status, body) = app.call(Method::GET, path, None, None).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");
    let response =
        app.client.get(format!("{}{path}", app.base)).header("authorization", "Basic abc").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
}

/// Real expiry times either side of a two-minute leeway: 60 s past `exp` is accepted
/// (the default 30 s would refuse it), 180 s past is refused.
async fn the_jwt_leeway_is_a_setting(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--jwt-leeway-secs", "120"]).await;
    let path = "/api/agents-config/bot";
    let within = token_with(json!({"exp": now() - 60}));
    let (status, body) = app.get(path, &within).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "expired 60 s ago, within the leeway: {body}");
    let beyond = token_with(json!({"exp": now() - 180}));
    let (status, body) = app.get(path, &beyond).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");

    let strict = TestApp::spawn_with(backend, &["--jwt-leeway-secs", "0"]).await;
    let (status, body) = strict.get(path, &token_with(json!({"exp": now() - 5}))).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");
}

async fn scopes_are_enforced(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let reader = token("acme", "memory:read");
    let (status, body) = app.put("/api/agents-config/bot", &reader, json!({"memory_enabled": true})).await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");
    let (status, _) = app.get("/api/agents-config", &reader).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = app.delete("/api/agents-config/bot", &agent("acme")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let no_scope = token_with(json!({"scope": null}));
    let (status, _) = app.get("/api/agents-config/bot", &no_scope).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // memory:read may read a config; nothing was created by the refused PUT.
    let (status, _) = app.get("/api/agents-config/bot", &reader).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.put("/api/users/u1/consent", &reader, json!({"ai_consent": false})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

async fn tenants_never_see_each_other(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let acme = admin("acme");
    let globex = admin("globex");
    app.put("/api/agents-config/bot", &acme, json!({"memory_enabled": true, "min_user_turns": 7})).await;
    app.put("/api/users/u1/consent", &acme, json!({"ai_consent": false})).await;

    let (status, body) = app.get("/api/agents-config/bot", &globex).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, _) = app.delete("/api/agents-config/bot", &globex).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, list) = app.get("/api/agents-config", &globex).await;
    assert_eq!(list["items"], json!([]));
    let (_, consent) = app.get("/api/users/u1/consent", &globex).await;
    assert_eq!(consent["ai_consent"], true);
    assert_eq!(consent["updated_at"], Value::Null);

    // globex configuring the same agent id creates its own, leaving acme's untouched.
    app.put("/api/agents-config/bot", &globex, json!({"min_user_turns": 2})).await;
    let (_, mine) = app.get("/api/agents-config/bot", &acme).await;
    assert_eq!(mine["min_user_turns"], 7);
    assert_eq!(mine["memory_enabled"], true);
}

async fn list_paginates_by_agent_id(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = admin("acme");
    for agent in ["c", "a", "e", "b", "d"] {
        app.put(&format!("/api/agents-config/{agent}"), &token, json!({})).await;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/agents-config?limit=2&cursor={c}"),
            None => "/api/agents-config?limit=2".into(),
        };
        let (status, page) = app.get(&path, &token).await;
        assert_eq!(status, StatusCode::OK);
        seen.extend(page["items"].as_array().unwrap().iter().map(|c| c["agent_id"].as_str().unwrap().to_string()));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, ["a", "b", "c", "d", "e"]);
    app.assert_invalid_queries("/api/agents-config", &token, &["?cursor=nope", "?limit=0", "?limit=201", "?limit=x"])
        .await;
}

async fn delete_turns_memory_off(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = admin("acme");
    app.put("/api/agents-config/bot", &token, json!({"memory_enabled": true})).await;
    let (status, _) = app.delete("/api/agents-config/bot", &token).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (read, _) = app.get("/api/agents-config/bot", &token).await;
    let (deleted_again, _) = app.delete("/api/agents-config/bot", &token).await;
    assert_eq!((read, deleted_again), (StatusCode::NOT_FOUND, StatusCode::NOT_FOUND));
}

async fn consent_defaults_and_updates(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    let user = "whatsapp:+33 6 12/34";
    let path = format!("/api/users/{}/consent", enc(user));
    let (status, body) = app.get(&path, &token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"external_ref": user, "ai_consent": true, "updated_at": null}));
    let (status, body) = app.put(&path, &token, json!({"ai_consent": false})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["ai_consent"], false);
    assert_eq!(body["external_ref"], user);
    assert!(body["updated_at"].is_string());
    let (_, fetched) = app.get(&path, &token).await;
    assert_eq!(fetched, body);
    for bad in [json!({"ai_consent": "no"}), json!({}), json!({"ai_consent": true, "extra": 1})] {
        let (status, error) = app.put(&path, &token, bad).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
    }
    // An external_ref over 256 bytes, or with a control character.
    for bad in [format!("/api/users/{}/consent", "x".repeat(300)), "/api/users/a%0Ab/consent".to_owned()] {
        let (status, body) = app.get(&bad, &token).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    }
}

async fn config_and_consent_survive_a_restart(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = admin("acme");
    let (_, config) =
        app.put("/api/agents-config/bot", &token, json!({"memory_enabled": true, "min_confidence": 0.5})).await;
    let (_, consent) = app.put("/api/users/u1/consent", &token, json!({"ai_consent": false})).await;
    let app = app.restart().await;
    let (_, config_after) = app.get("/api/agents-config/bot", &token).await;
    let (_, consent_after) = app.get("/api/users/u1/consent", &token).await;
    assert_eq!(config_after, config);
    assert_eq!(consent_after, consent);
}

async fn errors_carry_request_ids_and_json_bodies(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = admin("acme");
    let response = app
        .client
        .get(format!("{}/api/agents-config/nope", app.base))
        .bearer_auth(&token)
        .header("x-request-id", "trace-123")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "trace-123");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["request_id"], "trace-123");

    let response = app.client.get(format!("{}/healthz", app.base)).send().await.unwrap();
    assert!(!response.headers()["x-request-id"].is_empty());

    // Wrong content type.
    let (status, body) = app.put_raw("/api/agents-config/bot", &token, "text/plain", "{}").await;
    assert_error(status, &body, StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");

    // Body over the limit.
    let huge = json!({"extraction_instructions": "x".repeat(1024 * 1024 + 100)});
    let (status, body) = app.put("/api/agents-config/bot", &token, huge).await;
    assert_error(status, &body, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");

    // Unknown route.
    let (status, body) = app.get("/api/nothing-here", &token).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, _) = app.get("/api/agents-config/bot", &token).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the rejected bodies created nothing");
}

async fn operations_routes_answer(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (status, body) = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ok"})));
    let (status, body) = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.get("/api/agents-config/bot", &admin("acme")).await;
    let (status, metrics) = app.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let text = metrics.as_str().unwrap();
    assert!(
        text.contains(
            "engram_http_requests_total{method=\"GET\",route=\"/api/agents-config/{agent_id}\",status=\"404\"}"
        ),
        "{text}"
    );
    let response = app.client.get(format!("{}/docs/", app.base)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let page = response.text().await.unwrap();
    assert!(page.contains("swagger"), "docs page is the bundled viewer");
    assert!(!page.contains("https://"), "the docs viewer loads nothing from the internet");
}

/// The committed `openapi/openapi.json` is what the server serves. Regenerate with
/// `UPDATE_OPENAPI=1 cargo test --test api openapi`.
#[tokio::test]
async fn openapi_document_is_committed_and_current() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (status, served) = app.call(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(served["openapi"].as_str().map(|v| v.starts_with("3.1")), Some(true));
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
    let rendered = serde_json::to_string_pretty(&served).unwrap() + "\n";
    if std::env::var("UPDATE_OPENAPI").is_ok() {
        std::fs::write(path, &rendered).unwrap();
    }
    let committed = std::fs::read_to_string(path).expect("openapi/openapi.json exists (UPDATE_OPENAPI=1 writes it)");
    assert!(committed == rendered, "openapi/openapi.json is stale: run UPDATE_OPENAPI=1 cargo test --test api openapi");
}

#[tokio::test]
async fn each_tenant_is_rate_limited_on_its_own() {
    let app = TestApp::spawn_with(Backend::Sqlite, &["--rate-limit-per-sec", "1", "--rate-limit-burst", "3"]).await;
    let acme = admin("acme");
    for _ in 0..3 {
        let (status, _) = app.get("/api/agents-config", &acme).await;
        assert_eq!(status, StatusCode::OK);
    }
    let response = app.client.get(format!("{}/api/agents-config", app.base)).bearer_auth(&acme).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()["retry-after"], "1");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    let (status, _) = app.get("/api/agents-config", &admin("globex")).await;
    assert_eq!(status, StatusCode::OK, "another tenant is not limited by acme's traffic");
    let (status, _) = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(status, StatusCode::OK, "operations routes are not limited");
}
