//! GDPR erasure, export and receipts: nothing about the person is left, bystanders and
//! other tenants keep everything, a running extraction stores nothing afterwards.

use std::time::Duration;

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

on_both_backends!(
    erasure_leaves_nothing_and_spares_bystanders,
    repeating_an_erasure_answers_zeros,
    a_refusal_outlives_erasure_other_consent_does_not,
    receipt_proves_the_erasure_without_the_identifier,
    export_returns_everything_held,
    rgpd_routes_need_the_rgpd_scope,
    running_extraction_stores_nothing_after_erasure,
);

const SUBJECT: &str = "whatsapp:+33 6 00 00 00 01";

fn user_path(user: &str) -> String {
    format!("/api/rgpd/users/{}/ai-data", enc(user))
}

/// Gives `user` a history with `agent_id`: a conversation with messages (one sent with
/// an idempotency key), a manual fact, and returns the conversation id.
async fn history(app: &TestApp, tenant: &str, agent_id: &str, user: &str, marker: &str) -> String {
    let token = agent(tenant);
    let (_, conversation) = app
        .post(
            "/api/conversations",
            &token,
            json!({"agent_id": agent_id, "external_ref": user, "title": format!("{marker} title")}),
        )
        .await;
    let id = conversation["id"].as_str().expect("conversation id").to_string();
    let messages = json!({"messages": [
        {"role": "user", "content": format!("My name is {marker}.")},
        {"role": "assistant", "content": "Nice to meet you."},
        {"role": "user", "content": format!("I live in {marker}ville.")},
        {"role": "user", "content": format!("I prefer {marker}tea over coffee.")}
    ]});
    let (status, _) = app.append_with_key(&id, &token, &format!("key-{marker}"), &messages).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = app
        .post(
            &format!("/api/agents/{agent_id}/users/{}/facts", enc(user)),
            &token,
            json!({"fact": format!("Is called {marker}")}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    // Working memory in both scopes: the person's own and this conversation's.
    let documents = [
        (format!("/api/agents/{agent_id}/users/{}/working-memory", enc(user)), format!("{marker} likes aisle seats")),
        (format!("/api/conversations/{id}/working-memory"), format!("{marker} trip: step 1")),
    ];
    for (path, content) in documents {
        let (status, body) = app.put(&path, &token, json!({"content": content})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    id
}

async fn wait_for_jobs(app: &TestApp, tenant: &str) {
    let done = eventually(Duration::from_secs(20), || async {
        let (_, jobs) = app.get("/api/jobs?limit=200", &admin(tenant)).await;
        let items = jobs["items"].as_array().cloned().unwrap_or_default();
        items.iter().all(|j| j["status"] == "succeeded").then_some(())
    })
    .await;
    assert!(done.is_some(), "jobs did not finish");
}

async fn erasure_leaves_nothing_and_spares_bystanders(backend: Backend) {
    let flags = ["--job-poll-ms", "50", "--webhook-allow-private", "true", "--webhook-retry-base-ms", "60000"];
    let app = TestApp::spawn_with(backend, &flags).await;
    // A webhook subscription whose receiver is down: the person's events keep pending
    // deliveries (and their attempts) until the erasure.
    for tenant in ["acme", "globex"] {
        let receiver = json!({"url": "http://127.0.0.1:9/hook"});
        let (status, _) = app.post("/api/webhooks", &admin(tenant), receiver).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    for tenant in ["acme", "globex"] {
        for agent_id in ["concierge", "sales"] {
            app.enable_memory(tenant, agent_id).await;
            // Four messages are a long thread here: each gets a summary through seq 3.
            let summaries = json!({"summarize_after_messages": 2, "summary_window": 1});
            let (status, _) = app.put(&format!("/api/agents-config/{agent_id}"), &admin(tenant), summaries).await;
            assert_eq!(status, StatusCode::OK);
        }
    }
    app.put(&format!("/api/users/{}/consent", enc(SUBJECT)), &agent("acme"), json!({"ai_consent": true})).await;
    // An imported fact: the client id it came with is kept with the person's external ref.
    let line = json!({"type": "fact", "id": "Zorblax-note-1", "agent_id": "concierge", "external_ref": SUBJECT,
        "fact": "Zorblax keeps an imported note"});
    let imported =
        app.client.post(format!("{}/api/import", app.base)).bearer_auth(admin("acme")).body(format!("{line}\n"));
    let imported: Value = imported.send().await.expect("import").json().await.expect("import answer");
    assert_eq!(imported["added"], 1, "{imported}");
    let mut conversations = Vec::new();
    for agent_id in ["concierge", "sales"] {
        conversations.push(history(&app, "acme", agent_id, SUBJECT, "Zorblax").await);
        history(&app, "acme", agent_id, "bystander", "Quentin").await;
        history(&app, "globex", agent_id, SUBJECT, "Globexa").await;
    }
    // One conversation ends and its extraction commits before the erasure.
    let (_, ended) = app.post(&format!("/api/conversations/{}/end", conversations[0]), &agent("acme"), json!({})).await;
    assert_eq!(ended["extraction"]["queued"], true, "{ended}");
    wait_for_jobs(&app, "acme").await;
    let (_, before) = app.get(&format!("/api/agents/concierge/users/{}/facts", enc(SUBJECT)), &agent("acme")).await;
    assert!(before["items"].as_array().is_some_and(|f| f.len() > 1), "extracted facts exist: {before}");
    // The summaries hold the person's words too, and are swept below.
    let (_, export) = app.get(&user_path(SUBJECT), &token("acme", "rgpd")).await;
    for conversation in export["conversations"].as_array().into_iter().flatten() {
        assert!(conversation["summary"].as_str().is_some_and(|s| s.contains("Zorblax")), "{conversation}");
    }

    let (status, erased) = app.delete(&user_path(SUBJECT), &token("acme", "rgpd")).await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert_eq!(erased["external_ref"], SUBJECT);
    assert_eq!(erased["deleted"]["conversations"], 2);
    assert_eq!(erased["deleted"]["messages"], 8);
    assert_eq!(erased["deleted"]["jobs"], 3, "one extraction and two summaries");
    assert!(erased["deleted"]["facts"].as_u64().is_some_and(|n| n >= 3), "{erased}");
    assert_eq!(erased["deleted"]["working_memories"], 4, "two agents' and two conversations' documents");
    assert!(erased["deleted"]["events"].as_u64().is_some_and(|n| n > 10), "their events went too: {erased}");

    // Nothing is left through the API.
    let (_, export) = app.get(&user_path(SUBJECT), &token("acme", "rgpd")).await;
    assert_eq!(export["conversations"], json!([]));
    assert_eq!(export["facts"], json!([]));
    assert_eq!(export["working_memories"], json!([]));
    let reader = agent("acme");
    for agent_id in ["concierge", "sales"] {
        let base = format!("/api/agents/{agent_id}/users/{}", enc(SUBJECT));
        let (_, facts) = app.get(&format!("{base}/facts"), &reader).await;
        assert_eq!(facts["items"], json!([]));
        let (_, found) = app.get(&format!("{base}/facts/search?q=Zorblax%20tea%20name"), &reader).await;
        assert_eq!(found["items"], json!([]));
        let (_, context) = app.get(&format!("{base}/memory-context"), &reader).await;
        assert_eq!(context["facts"], json!([]));
        let (status, _) = app.get(&format!("{base}/working-memory"), &reader).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (_, listed) =
            app.get(&format!("/api/conversations?agent_id={agent_id}&external_ref={}", enc(SUBJECT)), &reader).await;
        assert_eq!(listed["items"], json!([]));
    }
    for id in &conversations {
        let (status, _) = app.get(&format!("/api/conversations/{id}"), &reader).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    let (_, jobs) = app.get("/api/jobs", &admin("acme")).await;
    let left: Vec<&Value> = jobs["items"].as_array().into_iter().flatten().collect();
    assert!(left.iter().all(|job| job["external_ref"] == "bystander"), "only the bystander's jobs are left: {jobs}");

    // Bystanders and the other tenant keep all their data.
    for (tenant, user) in [("acme", "bystander"), ("globex", SUBJECT)] {
        let (_, export) = app.get(&user_path(user), &token(tenant, "rgpd")).await;
        assert_eq!(export["conversations"].as_array().map(Vec::len), Some(2), "{tenant}/{user}: {export}");
        for conversation in export["conversations"].as_array().into_iter().flatten() {
            assert_eq!(conversation["messages"].as_array().map(Vec::len), Some(4));
            assert_eq!(conversation["summary_through_seq"], 3, "{conversation}");
            assert!(conversation["working_memory"]["content"].as_str().is_some_and(|c| c.ends_with("step 1")));
        }
        assert_eq!(export["facts"].as_array().map(Vec::len), Some(2), "{tenant}/{user}");
        assert_eq!(export["working_memories"].as_array().map(Vec::len), Some(2), "{tenant}/{user}");
    }

    // No row of any table still holds the identifier or the person's words (PostgreSQL:
    // every table of the schema, read as text).
    if backend == Backend::Postgres {
        let pool = sqlx::PgPool::connect(&app.db.url).await.expect("connect");
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
        )
        .fetch_all(&pool)
        .await
        .expect("tables");
        assert!(tables.len() >= 8, "{tables:?}");
        for table in tables {
            for needle in [SUBJECT, "Zorblax"] {
                let sql = format!("SELECT count(*) FROM {table} t WHERE t::text LIKE '%' || $1 || '%'");
                let hits: i64 =
                    sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(needle).fetch_one(&pool).await.expect("sweep");
                let allowed = if needle == SUBJECT && table != "_sqlx_migrations" {
                    // The other tenant's user of the same external_ref keeps their rows.
                    let sql = format!(
                        "SELECT count(*) FROM {table} t WHERE t::text LIKE '%' || $1 || '%' AND t::text LIKE '%globex%'"
                    );
                    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
                        .bind(needle)
                        .fetch_one(&pool)
                        .await
                        .unwrap_or(0)
                } else {
                    0
                };
                assert_eq!(hits, allowed, "table {table} still holds {needle:?}");
            }
        }
    }
}

async fn repeating_an_erasure_answers_zeros(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    history(&app, "acme", "concierge", SUBJECT, "Zorblax").await;
    let rgpd = token("acme", "rgpd");
    let (_, first) = app.delete(&user_path(SUBJECT), &rgpd).await;
    assert_eq!(
        (first["deleted"]["conversations"].clone(), first["deleted"]["working_memories"].clone()),
        (json!(1), json!(2))
    );
    let (status, second) = app.delete(&user_path(SUBJECT), &rgpd).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        second["deleted"],
        json!({"facts": 0, "conversations": 0, "messages": 0, "jobs": 0, "working_memories": 0, "events": 0})
    );
    assert_ne!(second["receipt_id"], first["receipt_id"]);
}

async fn a_refusal_outlives_erasure_other_consent_does_not(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token_w = agent("acme");
    app.put("/api/users/refuser/consent", &token_w, json!({"ai_consent": false})).await;
    app.put("/api/users/agreer/consent", &token_w, json!({"ai_consent": true})).await;
    for user in ["refuser", "agreer"] {
        let (status, _) = app.delete(&user_path(user), &token("acme", "rgpd")).await;
        assert_eq!(status, StatusCode::OK);
    }
    let (_, refuser) = app.get("/api/users/refuser/consent", &token_w).await;
    assert_eq!(refuser["ai_consent"], false);
    assert!(refuser["updated_at"].is_string(), "the refusal record is kept");
    let (_, agreer) = app.get("/api/users/agreer/consent", &token_w).await;
    assert_eq!(agreer["ai_consent"], true);
    assert_eq!(agreer["updated_at"], Value::Null, "a consent record that is not a refusal is erased");
}

async fn receipt_proves_the_erasure_without_the_identifier(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    history(&app, "acme", "concierge", SUBJECT, "Zorblax").await;
    let rgpd = token("acme", "rgpd");
    let (_, erased) = app.delete(&user_path(SUBJECT), &rgpd).await;
    let receipt_id = erased["receipt_id"].as_str().expect("receipt id");
    let (status, receipt) = app.get(&format!("/api/rgpd/receipts/{receipt_id}"), &rgpd).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_eq!(receipt["receipt_id"], receipt_id);
    assert_eq!(receipt["deleted"], erased["deleted"]);
    assert_eq!(receipt["completed_at"], erased["completed_at"]);
    // The purge dates the receipt: SQLite's before it answers (no reader holds it back),
    // PostgreSQL's vacuum moments later, in the background.
    if backend == Backend::Sqlite {
        assert!(erased["purged_at"].is_string(), "{erased}");
    }
    let purged = eventually(Duration::from_secs(20), || async {
        let (_, receipt) = app.get(&format!("/api/rgpd/receipts/{receipt_id}"), &rgpd).await;
        receipt["purged_at"].as_str().map(str::to_owned)
    })
    .await;
    assert!(purged.is_some(), "the receipt is dated by the purge");
    let hash = receipt["subject_hash"].as_str().expect("hash");
    assert_eq!(hash.len(), 64);
    assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
    let text = receipt.to_string();
    assert!(!text.contains("whatsapp") && !text.contains("+33"), "the receipt holds no identifier: {text}");
    // The same person erased again hashes the same; another tenant's receipts are hidden.
    let (_, again) = app.delete(&user_path(SUBJECT), &rgpd).await;
    let (_, second) =
        app.get(&format!("/api/rgpd/receipts/{}", again["receipt_id"].as_str().unwrap_or_default()), &rgpd).await;
    assert_eq!(second["subject_hash"], hash);
    let (status, _) = app.get(&format!("/api/rgpd/receipts/{receipt_id}"), &token("globex", "rgpd")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.get("/api/rgpd/receipts/not-a-uuid", &rgpd).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

async fn export_returns_everything_held(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.put(&format!("/api/users/{}/consent", enc(SUBJECT)), &agent("acme"), json!({"ai_consent": true})).await;
    let conversation = history(&app, "acme", "concierge", SUBJECT, "Zorblax").await;
    history(&app, "acme", "sales", SUBJECT, "Zorblax").await;
    history(&app, "acme", "concierge", "bystander", "Quentin").await;
    let (status, export) = app.get(&user_path(SUBJECT), &token("acme", "rgpd")).await;
    assert_eq!(status, StatusCode::OK, "{export}");
    assert_eq!(export["external_ref"], SUBJECT);
    assert_eq!(export["consent"]["ai_consent"], true);
    let conversations = export["conversations"].as_array().expect("conversations");
    assert_eq!(conversations.len(), 2);
    let first = conversations.iter().find(|c| c["id"] == conversation.as_str()).expect("the conversation");
    assert_eq!(first["agent_id"], "concierge");
    let messages = first["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[0]["content"], "My name is Zorblax.");
    assert_eq!(messages.iter().map(|m| m["seq"].as_i64().unwrap_or(0)).collect::<Vec<_>>(), [1, 2, 3, 4]);
    let facts = export["facts"].as_array().expect("facts");
    assert_eq!(facts.len(), 2, "facts of both agents");
    assert_eq!(first["working_memory"]["content"], "Zorblax trip: step 1");
    assert!(first["working_memory"]["etag"].is_string(), "{first}");
    let documents = export["working_memories"].as_array().expect("working memories");
    let agents: Vec<&str> = documents.iter().filter_map(|d| d["agent_id"].as_str()).collect();
    assert_eq!(agents, ["concierge", "sales"], "one per agent, by agent id");
    assert_eq!(documents[0]["content"], "Zorblax likes aisle seats");
    assert!(!export.to_string().contains("Quentin"), "nothing of another user");
}

async fn rgpd_routes_need_the_rgpd_scope(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    history(&app, "acme", "concierge", SUBJECT, "Zorblax").await;
    for scope in ["memory:write", "memory:read memory:write"] {
        let (status, body) = app.delete(&user_path(SUBJECT), &token("acme", scope)).await;
        assert_error(status, &body, StatusCode::FORBIDDEN, "forbidden");
        let (status, _) = app.get(&user_path(SUBJECT), &token("acme", scope)).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
    }
    let (_, export) = app.get(&user_path(SUBJECT), &admin("acme")).await;
    assert_eq!(export["conversations"].as_array().map(Vec::len), Some(1), "refused erasures changed nothing");
    let (status, _) = app.call(reqwest::Method::DELETE, &user_path(SUBJECT), None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = app.delete(&user_path(&"x".repeat(300)), &admin("acme")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

async fn running_extraction_stores_nothing_after_erasure(backend: Backend) {
    let (app, llm) = spawn_with_blocking_llm(backend, &[]).await;
    let conversation = history(&app, "acme", "concierge", SUBJECT, "Zorblax").await;
    let (_, ended) = app.post(&format!("/api/conversations/{conversation}/end"), &agent("acme"), json!({})).await;
    assert_eq!(ended["extraction"]["queued"], true);
    // The job is running and its LLM call is in flight.
    llm.called().await;
    let (status, erased) = app.delete(&user_path(SUBJECT), &token("acme", "rgpd")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(erased["deleted"]["jobs"], 1);
    llm.answer();
    // Give the worker time to try its (fenced) write.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, facts) = app.get(&format!("/api/agents/concierge/users/{}/facts", enc(SUBJECT)), &agent("acme")).await;
    assert_eq!(facts["items"], json!([]), "the running job stored nothing after the erasure");
    let (_, jobs) = app.get("/api/jobs", &admin("acme")).await;
    assert_eq!(jobs["items"], json!([]));
}
