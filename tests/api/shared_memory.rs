//! Shared memory over HTTP: an agent whose `reads_facts_of` names other agents of its
//! tenant reads their facts about the same person (memory context, search, the tools
//! over REST and MCP), while each fact stays with the agent that learned it, and nothing
//! crosses where sharing is off, the owning agent's memory is off, the person refused
//! consent or was erased, or the agent is another tenant's.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::*;
use crate::semantic::{all_embedded_with, spawn_with_local_model};

on_both_backends!(
    an_agent_reads_the_facts_of_the_agents_it_names_and_writes_stay_with_the_learner,
    the_tools_and_mcp_read_the_shared_facts_too,
    sharing_follows_the_owning_agents_memory_and_the_persons_consent_and_erasure,
    reads_facts_of_names_other_configured_agents_of_the_tenant_only,
    recall_by_meaning_reads_the_shared_facts,
);

const SHELLFISH: &str = "Is allergic to shellfish";
const EMAIL: &str = "Prefers to be contacted by email";
const QUOTE: &str = "Wants a quote for the premium plan";

/// Configures `agent_id` in `tenant` with memory on and `settings` on top.
async fn configure(app: &TestApp, tenant: &str, agent_id: &str, settings: Value) -> (StatusCode, Value) {
    let mut body = json!({"memory_enabled": true, "extract_every_user_turns": null});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), settings.as_object()) {
        body.extend(extra.clone());
    }
    app.put(&format!("/api/agents-config/{agent_id}"), &admin(tenant), body).await
}

async fn remember(app: &TestApp, tenant: &str, agent_id: &str, user: &str, fact: &str) -> Value {
    let path = format!("/api/agents/{agent_id}/users/{user}/facts");
    let (status, stored) = app.post(&path, &agent(tenant), json!({"fact": fact})).await;
    assert_eq!(status, StatusCode::CREATED, "{stored}");
    stored
}

/// `profile`, `support` and `sales` with memory on, `sales` reading `profile`; each
/// holding one fact about ann, and `profile` one about bob.
async fn three_agents(app: &TestApp) -> Value {
    for agent_id in ["profile", "support"] {
        assert_eq!(configure(app, "acme", agent_id, json!({})).await.0, StatusCode::OK);
    }
    let (status, sales) = configure(app, "acme", "sales", json!({"reads_facts_of": ["profile"]})).await;
    assert_eq!(status, StatusCode::OK, "{sales}");
    assert_eq!(sales["reads_facts_of"], json!(["profile"]), "{sales}");
    let shellfish = remember(app, "acme", "profile", "ann", SHELLFISH).await;
    remember(app, "acme", "support", "ann", EMAIL).await;
    remember(app, "acme", "sales", "ann", QUOTE).await;
    remember(app, "acme", "profile", "bob", "Lives in Oslo").await;
    shellfish
}

/// The memory context's facts for the agent and user, as (text, agent) pairs.
async fn context(app: &TestApp, agent_id: &str, user: &str, query: &str) -> Vec<(String, String)> {
    let path = format!("/api/agents/{agent_id}/users/{user}/memory-context?max_facts=50{query}");
    let (status, context) = app.get(&path, &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{context}");
    pairs(&context["facts"])
}

/// The search's hits for the agent and user, as (text, agent) pairs.
async fn search(app: &TestApp, agent_id: &str, user: &str, q: &str) -> Vec<(String, String)> {
    let path = format!("/api/agents/{agent_id}/users/{user}/facts/search?limit=50&q={}", enc(q));
    let (status, found) = app.get(&path, &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{found}");
    pairs(&found["items"])
}

fn pairs(facts: &Value) -> Vec<(String, String)> {
    let facts = facts.as_array().expect("a list of facts");
    let text = |f: &Value, key: &str| f[key].as_str().expect(key).to_owned();
    let mut pairs: Vec<_> = facts.iter().map(|f| (text(f, "fact"), text(f, "agent_id"))).collect();
    pairs.sort();
    pairs
}

fn pair(fact: &str, agent_id: &str) -> (String, String) {
    (fact.to_owned(), agent_id.to_owned())
}

async fn an_agent_reads_the_facts_of_the_agents_it_names_and_writes_stay_with_the_learner(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let shellfish = three_agents(&app).await;

    // sales reads profile's fact beside its own, each with the agent that learned it.
    let both = vec![pair(SHELLFISH, "profile"), pair(QUOTE, "sales")];
    assert_eq!(context(&app, "sales", "ann", "").await, both);
    assert_eq!(context(&app, "sales", "ann", "&query=shellfish%20allergy").await, both);
    let (_, ranked) = app.get("/api/agents/sales/users/ann/memory-context?query=shellfish", &agent("acme")).await;
    assert_eq!(ranked["facts"][0]["fact"], SHELLFISH, "the match first: {ranked}");
    assert!(ranked["prompt"].as_str().is_some_and(|p| p.contains(SHELLFISH)), "{ranked}");
    assert_eq!(search(&app, "sales", "ann", "shellfish").await, vec![pair(SHELLFISH, "profile")]);
    // A query of more words than PostgreSQL ranks in one statement takes the other way.
    let long = "which food is ann allergic to shellfish or maybe some seafood";
    assert_eq!(search(&app, "sales", "ann", long).await, vec![pair(SHELLFISH, "profile")]);
    assert_eq!(search(&app, "sales", "ann", "premium plan shellfish").await, both);

    // Nothing crosses where sharing is off: support reads no one, profile does not read
    // back, and another person's facts stay theirs.
    assert_eq!(context(&app, "support", "ann", "").await, vec![pair(EMAIL, "support")]);
    assert!(search(&app, "support", "ann", "shellfish").await.is_empty());
    assert_eq!(context(&app, "profile", "ann", "").await, vec![pair(SHELLFISH, "profile")]);
    assert!(search(&app, "profile", "ann", "premium quote").await.is_empty());
    assert!(search(&app, "sales", "ann", "Oslo").await.is_empty());
    assert_eq!(context(&app, "sales", "bob", "").await, vec![pair("Lives in Oslo", "profile")]);

    // Writes stay with the learner: sales lists its own facts, and cannot change or
    // delete profile's (not its fact: 404), which is unchanged.
    let (_, listed) = app.get("/api/agents/sales/users/ann/facts", &agent("acme")).await;
    assert_eq!(pairs(&listed["items"]), vec![pair(QUOTE, "sales")]);
    let id = shellfish["id"].as_str().expect("id");
    let (status, body) = app.delete(&format!("/api/agents/sales/users/ann/facts/{id}"), &agent("acme")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) =
        app.patch(&format!("/api/agents/sales/users/ann/facts/{id}"), &agent("acme"), json!({"fact": "x"})).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (_, kept) = app.get("/api/agents/profile/users/ann/facts", &agent("acme")).await;
    assert_eq!(kept["items"][0]["fact"], SHELLFISH, "{kept}");
    assert_eq!(kept["items"][0]["updated_at"], shellfish["updated_at"], "{kept}");

    // Sharing stops with `[]`.
    let (status, stopped) = configure(&app, "acme", "sales", json!({"reads_facts_of": []})).await;
    assert_eq!((status, stopped["reads_facts_of"].clone()), (StatusCode::OK, json!([])), "{stopped}");
    assert_eq!(context(&app, "sales", "ann", "").await, vec![pair(QUOTE, "sales")]);
    assert!(search(&app, "sales", "ann", "shellfish").await.is_empty());
}

/// Calls tool `name` through `/api/tools/call` for `agent_id` and ann.
async fn call_tool(app: &TestApp, agent_id: &str, name: &str, mut arguments: Value) -> (StatusCode, Value) {
    arguments["agent_id"] = json!(agent_id);
    arguments["external_ref"] = json!("ann");
    app.post("/api/tools/call", &agent("acme"), json!({"name": name, "arguments": arguments})).await
}

async fn the_tools_and_mcp_read_the_shared_facts_too(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    three_agents(&app).await;

    let (status, found) = call_tool(&app, "sales", "recall", json!({"query": "shellfish"})).await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(pairs(&found["items"]), vec![pair(SHELLFISH, "profile")]);
    let (status, built) = call_tool(&app, "sales", "memory_context", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{built}");
    assert_eq!(pairs(&built["facts"]), vec![pair(SHELLFISH, "profile"), pair(QUOTE, "sales")]);
    let (_, support) = call_tool(&app, "support", "recall", json!({"query": "shellfish"})).await;
    assert_eq!(support["items"], json!([]), "{support}");

    let client = crate::mcp::connect(&app, &agent("acme")).await;
    let arguments = json!({"agent_id": "sales", "external_ref": "ann", "query": "shellfish"});
    let result = crate::mcp::call(&client, "recall", arguments).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let by_mcp = result.structured_content.expect("structured content");
    assert_eq!(pairs(&by_mcp["items"]), vec![pair(SHELLFISH, "profile")]);

    // A tool's write stays with the agent calling it: sales remembers its own fact.
    let (status, written) = call_tool(&app, "sales", "remember", json!({"fact": "Pays by card"})).await;
    assert_eq!((status, written["agent_id"].clone()), (StatusCode::OK, json!("sales")), "{written}");
    let (_, profile) = app.get("/api/agents/profile/users/ann/facts", &agent("acme")).await;
    assert_eq!(pairs(&profile["items"]), vec![pair(SHELLFISH, "profile")]);
}

async fn sharing_follows_the_owning_agents_memory_and_the_persons_consent_and_erasure(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    three_agents(&app).await;
    let both = vec![pair(SHELLFISH, "profile"), pair(QUOTE, "sales")];

    // The owning agent's memory switched off: its facts are read nowhere, by no path.
    assert_eq!(configure(&app, "acme", "profile", json!({"memory_enabled": false})).await.0, StatusCode::OK);
    assert_eq!(context(&app, "sales", "ann", "").await, vec![pair(QUOTE, "sales")]);
    assert_eq!(context(&app, "sales", "ann", "&query=shellfish").await, vec![pair(QUOTE, "sales")]);
    assert!(search(&app, "sales", "ann", "shellfish").await.is_empty());
    assert!(search(&app, "sales", "ann", "which food is ann allergic to shellfish or maybe").await.is_empty());
    assert_eq!(configure(&app, "acme", "profile", json!({"memory_enabled": true})).await.0, StatusCode::OK);
    assert_eq!(context(&app, "sales", "ann", "").await, both);
    // Its settings deleted (memory off again): the same.
    let (status, _) = app.delete("/api/agents-config/profile", &admin("acme")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(context(&app, "sales", "ann", "").await, vec![pair(QUOTE, "sales")]);
    assert!(search(&app, "sales", "ann", "shellfish").await.is_empty());
    assert_eq!(configure(&app, "acme", "profile", json!({})).await.0, StatusCode::OK);
    assert_eq!(context(&app, "sales", "ann", "").await, both);

    // The person refused consent: no memory context, and the search of the reading agent
    // finds its own facts only (as before), never another agent's.
    let (status, _) = app.put("/api/users/ann/consent", &agent("acme"), json!({"ai_consent": false})).await;
    assert_eq!(status, StatusCode::OK);
    let (_, refused) = app.get("/api/agents/sales/users/ann/memory-context", &agent("acme")).await;
    assert_eq!((refused["enabled"].clone(), refused["facts"].clone()), (json!(false), json!([])), "{refused}");
    assert_eq!(search(&app, "sales", "ann", "premium shellfish").await, vec![pair(QUOTE, "sales")]);
    let (status, body) = call_tool(&app, "sales", "recall", json!({"query": "shellfish"})).await;
    assert_error(status, &body, StatusCode::CONFLICT, "conflict");
    let (status, _) = app.put("/api/users/ann/consent", &agent("acme"), json!({"ai_consent": true})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(search(&app, "sales", "ann", "premium shellfish").await, both);

    // The export holds each fact once, with the agent that learned it.
    let (status, export) = app.get("/api/rgpd/users/ann/ai-data", &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{export}");
    assert_eq!(pairs(&export["facts"]), vec![pair(SHELLFISH, "profile"), pair(EMAIL, "support"), pair(QUOTE, "sales")]);
    // Erased: nothing of ann is read by anyone.
    let (status, erased) = app.delete("/api/rgpd/users/ann/ai-data", &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert!(context(&app, "sales", "ann", "").await.is_empty());
    assert!(search(&app, "sales", "ann", "premium shellfish").await.is_empty());
    assert_eq!(context(&app, "sales", "bob", "").await, vec![pair("Lives in Oslo", "profile")], "bob is not ann");
}

async fn reads_facts_of_names_other_configured_agents_of_the_tenant_only(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    three_agents(&app).await;
    // Another tenant's agents: one named like none of acme's, one named like acme's
    // profile, which holds a fact about a person of its own tenant also called ann.
    for agent_id in ["ledger", "profile"] {
        assert_eq!(configure(&app, "globex", agent_id, json!({})).await.0, StatusCode::OK);
    }
    remember(&app, "globex", "profile", "ann", "Globex secret: lives in Rome").await;
    remember(&app, "globex", "ledger", "ann", "Globex ledger entry").await;

    let before = app.get("/api/agents-config/sales", &admin("acme")).await.1;
    for (names, why) in [
        (json!(["ledger"]), "not configured in this tenant: ledger"),
        (json!(["profile", "nobody"]), "not configured in this tenant: nobody"),
        (json!(["sales"]), "itself"),
        (json!(["profile", "profile"]), "twice"),
        (json!(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]), "at most 10"),
        (json!(["a/b"]), "agent_id"),
        (json!("profile"), ""),
    ] {
        let (status, body) = configure(&app, "acme", "sales", json!({"reads_facts_of": names})).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "{names}: {message}");
        assert_eq!(app.get("/api/agents-config/sales", &admin("acme")).await.1, before, "{names} changed nothing");
    }
    // A new agent's first settings are refused alike, and create nothing.
    let (status, body) = configure(&app, "acme", "newcomer", json!({"reads_facts_of": ["ledger"]})).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(app.get("/api/agents-config/newcomer", &admin("acme")).await.0, StatusCode::NOT_FOUND);

    // acme's profile is acme's: globex's facts about its own ann never cross.
    assert_eq!(context(&app, "sales", "ann", "").await, vec![pair(SHELLFISH, "profile"), pair(QUOTE, "sales")]);
    assert!(search(&app, "sales", "ann", "Globex secret Rome ledger").await.is_empty());
    let (_, globex) = app.get("/api/agents/profile/users/ann/memory-context", &agent("globex")).await;
    assert_eq!(pairs(&globex["facts"]), vec![pair("Globex secret: lives in Rome", "profile")]);
}

async fn recall_by_meaning_reads_the_shared_facts(backend: Backend) {
    let app = spawn_with_local_model(backend).await;
    three_agents(&app).await;
    all_embedded_with(&app.db, "local:all-MiniLM-L6-v2").await;
    // No word in common with the fact: found by meaning, among profile's facts too.
    let found = search(&app, "sales", "ann", "seafood").await;
    assert!(found.contains(&pair(SHELLFISH, "profile")), "{found:?}");
    let built = context(&app, "sales", "ann", "&query=seafood").await;
    assert!(built.contains(&pair(SHELLFISH, "profile")), "{built:?}");
    assert!(!search(&app, "support", "ann", "seafood").await.iter().any(|(_, agent_id)| agent_id == "profile"));
}
