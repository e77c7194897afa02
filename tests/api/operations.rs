//! The LLM extractors' operations (issue 14) over HTTP, on both backends: the user's known
//! facts go to the model by label, its `update`s supersede them, its `delete`s remove them,
//! and an answer naming any fact that is not one of the listed ones (another user's, a
//! made-up label) changes none of the user's facts: only its `add`s are stored.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate, matchers::method};

use crate::common::{
    llm::{first_body, openai_reply, spawn_extracting},
    *,
};

on_both_backends!(valid_operations_update_delete_and_add, foreign_and_unknown_ids_cost_the_answer_its_changes_only);

const TURNS: [&str; 4] = [
    "I moved to Paris last spring.",
    "Sadly my dog died this year.",
    "These days I prefer blues to jazz.",
    "Oh, and I adopted a cat!",
];

fn path(user: &str) -> String {
    format!("/api/agents/concierge/users/{user}/facts")
}

/// Remembers `facts` for `user`; returns their ids in order.
async fn remember(app: &TestApp, user: &str, facts: &[&str]) -> Vec<String> {
    let mut ids = Vec::new();
    for fact in facts {
        let (status, body) = app.post(&path(user), &agent("acme"), json!({"fact": fact})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        ids.push(body["id"].as_str().expect("id").to_owned());
    }
    ids
}

/// `user`'s facts, superseded ones too, newest first.
async fn all_facts(app: &TestApp, user: &str) -> Vec<Value> {
    let (status, page) = app.get(&format!("{}?include_superseded=true", path(user)), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["items"].as_array().cloned().unwrap_or_default()
}

fn find<'a>(facts: &'a [Value], text: &str) -> Option<&'a Value> {
    facts.iter().find(|f| f["fact"] == text)
}

/// A model that answers with the operations `answer` writes, given the label (`f1`…) the
/// transcript gives each known fact: it reads the request as a real model would.
struct Model(fn(Labels) -> Value);

/// The label of a known fact in the request, by its text.
type Labels<'a> = &'a dyn Fn(&str) -> String;

impl Respond for Model {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let transcript = body["messages"][1]["content"].as_str().unwrap_or_default().to_owned();
        let label = |fact: &str| {
            let quoted = serde_json::to_string(fact).expect("a string");
            transcript
                .lines()
                .find_map(|line| line.strip_suffix(&quoted)?.strip_prefix('[')?.strip_suffix("] ").map(str::to_owned))
                .unwrap_or_else(|| panic!("{fact:?} is not among the known facts:\n{transcript}"))
        };
        openai_reply(&(self.0)(&label).to_string())
    }
}

async fn valid_operations_update_delete_and_add(backend: Backend) {
    let server = MockServer::start().await;
    let model = Model(|label| {
        json!({"operations": [
            {"op": "update", "id": label("Likes jazz"), "fact": "Prefers blues to jazz", "score": 0.9, "tags": ["music"]},
            {"op": "delete", "id": label("Has a dog"), "fact": null, "score": null, "tags": []},
            {"op": "update", "id": label("Lives in Lyon"), "fact": "Lives in Paris", "score": 0.9, "tags": []},
            {"op": "add", "id": null, "fact": "Has a cat", "score": 0.9, "tags": []},
        ]})
    });
    Mock::given(method("POST")).respond_with(model).mount(&server).await;
    let app = spawn_extracting(backend, "openai", &server, &[]).await;
    let ids = remember(&app, "alice", &["Lives in Lyon", "Has a dog", "Likes jazz"]).await;
    let bobs = remember(&app, "bob", &["Has a dog"]).await;

    let (_, ended) = converse(&app, "concierge", "alice", &TURNS).await;
    let job = job_reaching(&app, &job_id(&ended), &["succeeded"], Duration::from_secs(20)).await;

    assert_eq!(job["facts_added"], 3, "{job}");
    let facts = all_facts(&app, "alice").await;
    let current: Vec<&str> =
        facts.iter().filter(|f| f["superseded_by"].is_null()).filter_map(|f| f["fact"].as_str()).collect();
    assert_eq!(current, ["Has a cat", "Lives in Paris", "Prefers blues to jazz"], "{facts:?}");
    assert!(find(&facts, "Has a dog").is_none(), "deleted: {facts:?}");
    let (jazz, blues) =
        (find(&facts, "Likes jazz").expect("kept"), find(&facts, "Prefers blues to jazz").expect("new"));
    assert_eq!(jazz["id"], ids[2].as_str());
    assert_eq!(jazz["superseded_by"], blues["id"], "the update supersedes the fact it replaces");
    assert!(jazz["superseded_at"].is_string(), "{jazz}");
    assert_eq!(blues["tags"], json!(["music"]));
    assert_eq!(blues["source"], "extracted");
    let paris = find(&facts, "Lives in Paris").expect("new");
    assert_eq!(find(&facts, "Lives in Lyon").expect("kept")["superseded_by"], paris["id"]);
    assert_eq!(texts(&json!(all_facts(&app, "bob").await)), ["Has a dog"], "another user's facts are untouched");

    // The model saw the known facts by label, never their ids.
    let sent = first_body(&server).await;
    let transcript = sent["messages"][1]["content"].as_str().expect("transcript");
    assert!(transcript.starts_with("Known facts about the user:\n[f"), "{transcript}");
    for id in ids.iter().chain(&bobs) {
        assert!(!transcript.contains(id.as_str()), "a fact id reached the model");
    }
    assert_eq!(transcript.matches("Has a dog").count(), 1, "only this user's facts are listed");
}

async fn foreign_and_unknown_ids_cost_the_answer_its_changes_only(backend: Backend) {
    for bad in ["bob's fact", "f9"] {
        let server = MockServer::start().await;
        let app = spawn_extracting(backend, "openai", &server, &[]).await;
        remember(&app, "alice", &["Lives in Lyon", "Has a dog"]).await;
        let bobs = remember(&app, "bob", &["Has a dog"]).await;
        let id = if bad == "f9" { "f9".to_owned() } else { bobs[0].clone() };
        // A valid add and update beside the bad deletion: the model lost track of whose
        // facts are whose, so none of its changes is applied; its add, in the user's own
        // words, is stored.
        let answer = json!({"operations": [
            {"op": "add", "id": null, "fact": "Has a cat", "score": 0.9, "tags": []},
            {"op": "update", "id": "f1", "fact": "Lives in Paris", "score": 0.9, "tags": []},
            {"op": "delete", "id": id, "fact": null, "score": null, "tags": []},
        ]});
        Mock::given(method("POST")).respond_with(openai_reply(&answer.to_string())).mount(&server).await;

        let (_, ended) = converse(&app, "concierge", "alice", &TURNS).await;
        let job = job_reaching(&app, &job_id(&ended), &["succeeded"], Duration::from_secs(30)).await;

        assert_eq!((job["attempts"].as_i64(), job["facts_added"].as_i64()), (Some(1), Some(1)), "{bad}: {job}");
        assert_eq!(job["last_error"], Value::Null, "{bad}: the LLM's answer was used, no fallback: {job}");
        let alice = all_facts(&app, "alice").await;
        assert_eq!(texts(&json!(alice)), ["Has a cat", "Has a dog", "Lives in Lyon"], "{bad}: no change applied");
        assert!(alice.iter().all(|f| f["superseded_by"].is_null()), "{bad}: {alice:?}");
        assert_eq!(find(&alice, "Has a cat").expect("added")["source"], "extracted", "{bad}");
        assert_eq!(texts(&json!(all_facts(&app, "bob").await)), ["Has a dog"], "{bad}");
    }
}
