//! Where each fact came from: an extracted fact names the messages it was drawn from
//! (`source_messages`), in every answer that shows it and in its history; the facts of a
//! conversation are found by it, before and after it is deleted; the agent's
//! `delete_facts_with_conversation` deletes those drawn only from it; a cleared message
//! keeps its reference; the GDPR export carries the links.

use std::time::Duration;

use crate::common::{
    llm::{openai_reply, spawn_extracting},
    *,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, matchers::method};

on_both_backends!(
    an_extracted_fact_names_the_user_message_it_was_read_in_wherever_it_is_shown,
    an_llm_fact_is_drawn_from_the_user_messages_that_hold_its_words,
    a_fact_said_again_in_another_conversation_is_found_from_both,
    deleting_a_conversation_keeps_its_facts_unless_the_agent_deletes_those_drawn_only_from_it,
    a_message_cleared_by_retention_leaves_its_reference,
);

const WAIT: Duration = Duration::from_secs(20);
const FACTS: &str = "/api/agents/concierge/users/ann/facts";

/// Memory on for `concierge`, extracting at the end of a conversation of one user turn
/// or more.
async fn one_turn_is_enough(app: &TestApp) {
    let settings = json!({"memory_enabled": true, "extract_every_user_turns": null, "min_user_turns": 1});
    let (status, config) = app.put("/api/agents-config/concierge", &admin("acme"), settings).await;
    assert_eq!(status, StatusCode::OK, "{config}");
}

/// Has `turns` said as user turns (each followed by the assistant's reply, so user turn
/// n is message 2n - 1), ends the conversation, waits for its extraction to succeed and
/// returns the conversation's id.
async fn conversation(app: &TestApp, turns: &[&str]) -> String {
    let (id, ended) = converse(app, "concierge", "ann", turns).await;
    let job = job_reaching(app, &job_id(&ended), &["succeeded", "dead", "cancelled"], WAIT).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    id
}

/// The facts listed with `query` (`?…`), as `(text, [(conversation, seq)])`, newest first.
async fn listed(app: &TestApp, query: &str) -> Vec<(String, Vec<(String, i64)>)> {
    let (status, page) = app.get(&format!("{FACTS}{query}"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["items"].as_array().expect("items").iter().map(sourced).collect()
}

/// A fact's text and its source messages.
fn sourced(fact: &Value) -> (String, Vec<(String, i64)>) {
    let sources = fact["source_messages"]
        .as_array()
        .unwrap_or_else(|| panic!("source_messages is a list: {fact}"))
        .iter()
        .map(|s| (s["conversation_id"].as_str().expect("conversation").to_owned(), s["seq"].as_i64().expect("seq")))
        .collect();
    (fact["fact"].as_str().expect("text").to_owned(), sources)
}

fn from(id: &str, seqs: &[i64]) -> Vec<(String, i64)> {
    seqs.iter().map(|seq| (id.to_owned(), *seq)).collect()
}

async fn an_extracted_fact_names_the_user_message_it_was_read_in_wherever_it_is_shown(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--job-poll-ms", "50"]).await;
    one_turn_is_enough(&app).await;
    let (status, manual) = app.post(FACTS, &agent("acme"), json!({"fact": "Prefers window seats"})).await;
    assert_eq!(status, StatusCode::CREATED, "{manual}");
    assert_eq!(manual["source_messages"], json!([]), "a manual fact was drawn from no message");
    // Lyon is named again in turn 3, which states nothing: the builtin rules know the
    // fact was read in turn 2 (message 3), not merely where its words are.
    let id =
        conversation(&app, &["Hi! My name is Ann.", "I live in Lyon.", "Is Lyon far from the sea?", "I like tea."])
            .await;
    let facts = listed(&app, "").await;
    let of =
        |text: &str| facts.iter().find(|(t, _)| t == text).unwrap_or_else(|| panic!("{text} in {facts:?}")).1.clone();
    assert_eq!(of("Name is Ann"), from(&id, &[1]));
    assert_eq!(of("Lives in Lyon"), from(&id, &[3]));
    assert_eq!(of("Prefers window seats"), []);

    // The same in search, the memory context, a tool's answer and the fact's history.
    let (_, found) = app.get(&format!("{FACTS}/search?q=Lyon"), &agent("acme")).await;
    assert_eq!(sourced(&found["items"][0]), ("Lives in Lyon".to_owned(), from(&id, &[3])), "{found}");
    let (_, context) = app.get("/api/agents/concierge/users/ann/memory-context?q=Lyon", &agent("acme")).await;
    let in_context = context["facts"].as_array().expect("facts").iter().map(sourced).collect::<Vec<_>>();
    assert!(in_context.contains(&("Lives in Lyon".to_owned(), from(&id, &[3]))), "{context}");
    let call =
        json!({"name": "recall", "arguments": {"agent_id": "concierge", "external_ref": "ann", "query": "Lyon"}});
    let (status, recalled) = app.post("/api/tools/call", &agent("acme"), call).await;
    assert_eq!(status, StatusCode::OK, "{recalled}");
    assert!(recalled.to_string().contains(&format!(r#""source_messages":[{{"conversation_id":"{id}","seq":3}}]"#)));
    let (_, page) = app.get(FACTS, &agent("acme")).await;
    let lyon = page["items"].as_array().expect("items").iter().find(|f| f["fact"] == "Lives in Lyon").expect("Lyon");
    let (status, history) =
        app.get(&format!("{FACTS}/{}/history", lyon["id"].as_str().expect("id")), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{history}");
    assert_eq!(sourced(&history["items"][0]["fact"]).1, from(&id, &[3]), "{history}");

    // The GDPR export carries the links, in the facts and in their versions.
    let (_, export) = app.get("/api/rgpd/users/ann/ai-data", &admin("acme")).await;
    let exported: Vec<_> = export["facts"].as_array().expect("facts").iter().map(sourced).collect();
    assert!(exported.contains(&("Lives in Lyon".to_owned(), from(&id, &[3]))), "{export}");
    let versions = export["fact_versions"].as_array().expect("versions");
    assert!(versions.iter().any(|v| sourced(&v["fact"]).1 == from(&id, &[3])), "{export}");
}

/// An LLM names no message: its fact is drawn from the new user messages that hold one of
/// its words, the rule that kept it (grounding); the builtin fallback names its own.
async fn an_llm_fact_is_drawn_from_the_user_messages_that_hold_its_words(backend: Backend) {
    let server = MockServer::start().await;
    let answer = json!({"operations": [{"op": "add", "id": null, "fact": "Lives in Oslo", "score": 0.9}]});
    Mock::given(method("POST")).respond_with(openai_reply(&answer.to_string())).mount(&server).await;
    let app = spawn_extracting(backend, "openai", &server, &[]).await;
    one_turn_is_enough(&app).await;
    let id = conversation(&app, &["I moved to Oslo in May.", "I like tea.", "Oslo is cold in winter."]).await;
    assert_eq!(listed(&app, "").await, [("Lives in Oslo".to_owned(), from(&id, &[1, 5]))]);

    // An answer none of whose facts the user said: the builtin rules' facts are stored,
    // each from the message the rules read it in.
    server.reset().await;
    let invented = json!({"operations": [{"op": "add", "id": null, "fact": "Likes jazz", "score": 0.9}]});
    Mock::given(method("POST")).respond_with(openai_reply(&invented.to_string())).mount(&server).await;
    let other = conversation(&app, &["Hello there.", "I play the oboe."]).await;
    let facts = listed(&app, &format!("?source_conversation={other}")).await;
    assert_eq!(facts.len(), 1, "{facts:?}");
    assert_eq!(facts[0].1, from(&other, &[3]), "{facts:?}");
}

async fn a_fact_said_again_in_another_conversation_is_found_from_both(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--job-poll-ms", "50"]).await;
    one_turn_is_enough(&app).await;
    let first = conversation(&app, &["I live in Lyon.", "I play the oboe."]).await;
    let second = conversation(&app, &["Hello again.", "I live in Lyon."]).await;
    let lyon = ("Lives in Lyon".to_owned(), [from(&first, &[1]), from(&second, &[3])].concat());
    let from_first = listed(&app, &format!("?source_conversation={first}")).await;
    assert_eq!(from_first.len(), 2, "{from_first:?}");
    assert!(from_first.contains(&lyon), "{from_first:?}");
    assert_eq!(listed(&app, &format!("?source_conversation={second}")).await, [lyon]);
    let unknown = uuid::Uuid::now_v7();
    assert_eq!(listed(&app, &format!("?source_conversation={unknown}")).await, []);
    app.assert_invalid_queries(FACTS, &agent("acme"), &["?source_conversation=lyon", "?source_conversation="]).await;
}

async fn deleting_a_conversation_keeps_its_facts_unless_the_agent_deletes_those_drawn_only_from_it(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--job-poll-ms", "50"]).await;
    one_turn_is_enough(&app).await;
    let (_, config) = app.get("/api/agents-config/concierge", &admin("acme")).await;
    assert_eq!(config["delete_facts_with_conversation"], false, "off by default: {config}");
    let kept = conversation(&app, &["I play the oboe."]).await;
    let (status, _) = app.delete(&format!("/api/conversations/{kept}"), &agent("acme")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let still = listed(&app, &format!("?source_conversation={kept}")).await;
    assert_eq!(still.len(), 1, "the deleted conversation's fact stays, and is found by it: {still:?}");

    let settings = json!({"delete_facts_with_conversation": true});
    let (status, config) = app.put("/api/agents-config/concierge", &admin("acme"), settings).await;
    assert_eq!(status, StatusCode::OK, "{config}");
    assert_eq!(config["delete_facts_with_conversation"], true);
    let (status, refused) =
        app.put("/api/agents-config/concierge", &admin("acme"), json!({"delete_facts_with_conversation": "yes"})).await;
    assert_error(status, &refused, StatusCode::BAD_REQUEST, "invalid_request");
    let shared = conversation(&app, &["I live in Lyon.", "I grow tomatoes."]).await;
    conversation(&app, &["I live in Lyon."]).await;
    let only_shared: Vec<String> = listed(&app, &format!("?source_conversation={shared}"))
        .await
        .into_iter()
        .filter(|(_, sources)| sources.iter().all(|(c, _)| *c == shared))
        .map(|(text, _)| text)
        .collect();
    assert_eq!(only_shared.len(), 1, "{only_shared:?}");
    let (status, _) = app.delete(&format!("/api/conversations/{shared}"), &agent("acme")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let left: Vec<String> = listed(&app, "").await.into_iter().map(|(text, _)| text).collect();
    assert!(!left.contains(&only_shared[0]), "drawn only from it, deleted with it: {left:?}");
    assert!(left.contains(&"Lives in Lyon".to_owned()), "said elsewhere too, kept: {left:?}");
    assert_eq!(left.len(), 2, "the fact of the conversation deleted before stays: {left:?}");
    let (_, events) = app.get("/api/events?types=fact.deleted", &admin("acme")).await;
    let reasons: Vec<&Value> =
        events["items"].as_array().expect("items").iter().map(|e| &e["data"]["reason"]).collect();
    assert_eq!(reasons, [&json!("conversation_deleted")], "{events}");
}

async fn a_message_cleared_by_retention_leaves_its_reference(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--job-poll-ms", "50", "--sweep-interval-secs", "1"]).await;
    one_turn_is_enough(&app).await;
    let id = conversation(&app, &["I live in Lyon.", "Is it sunny today?", "What about tomorrow?"]).await;
    let settings = json!({"summarize_after_messages": 0, "max_messages_per_conversation": 2});
    let (status, config) = app.put("/api/agents-config/concierge", &admin("acme"), settings).await;
    assert_eq!(status, StatusCode::OK, "{config}");
    let trimmed = eventually(WAIT, || async {
        let (_, conversation) = app.get(&format!("/api/conversations/{id}"), &agent("acme")).await;
        (conversation["message_count"] == 2).then_some(())
    })
    .await;
    assert!(trimmed.is_some(), "retention never trimmed the conversation");
    let (_, messages) = app.get(&format!("/api/conversations/{id}/messages"), &agent("acme")).await;
    assert!(!messages.to_string().contains("Lyon"), "the message is gone: {messages}");
    assert_eq!(listed(&app, "").await, [("Lives in Lyon".to_owned(), from(&id, &[1]))]);
}
