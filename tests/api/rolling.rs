//! Rolling extraction over HTTP: an open conversation is extracted every
//! `extract_every_user_turns` new user turns, each message by one extraction only, under
//! the same memory, opt-out and consent rules as an end.

use std::time::Duration;

use crate::common::{
    llm::{openai_reply, spawn_extracting},
    *,
};
use engram::extract::prompt::NEW_MESSAGES_MARKER;
use reqwest::StatusCode;
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, matchers::method};

on_both_backends!(
    a_thread_learns_while_it_goes_on_and_ends_with_the_facts_of_an_end_only_thread,
    each_message_is_in_one_segment_and_the_end_extracts_only_the_tail,
    a_later_segment_waits_for_the_one_before_it,
    an_llm_reads_each_segment_as_new_with_the_one_before_as_context,
    memory_opt_out_and_consent_apply_to_every_segment,
    rolling_settings_default_to_min_user_turns_and_bad_values_change_nothing,
);

const WAIT: Duration = Duration::from_secs(20);

/// The 40 user turns of the thread: the name in turn 1, a home in turn 2, a move in turn
/// 25, and questions (which state nothing about the user) between them.
fn thread() -> Vec<String> {
    (1..=40)
        .map(|turn| match turn {
            1 => "Hi! My name is Alice.".to_owned(),
            2 => "I live in Lyon.".to_owned(),
            25 => "I moved to Paris.".to_owned(),
            _ => format!("Which book should I read next, number {turn}?"),
        })
        .collect()
}

/// Configures `agent_id` with memory on, `min_user_turns` and `every` as its rolling
/// extraction setting.
async fn configure(app: &TestApp, agent_id: &str, min_user_turns: i64, every: Value) {
    let settings = json!({"memory_enabled": true, "min_user_turns": min_user_turns, "extract_every_user_turns": every});
    let (status, config) = app.put(&format!("/api/agents-config/{agent_id}"), &admin("acme"), settings).await;
    assert_eq!(status, StatusCode::OK, "{config}");
    assert_eq!(config["extract_every_user_turns"], every, "{config}");
}

async fn open(app: &TestApp, agent_id: &str, user: &str, extra: Value) -> String {
    let mut body = json!({"agent_id": agent_id, "external_ref": user});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let (status, conversation) = app.post("/api/conversations", &agent("acme"), body).await;
    assert_eq!(status, StatusCode::CREATED, "{conversation}");
    conversation["id"].as_str().expect("id").to_owned()
}

/// Appends one user turn and the assistant's reply; returns the conversation. A 503 is
/// retried as a client is told to (it wrote nothing): on a busy PostgreSQL an append has
/// been seen to meet one while a segment's job ran, at most a few times in a thread.
async fn say(app: &TestApp, id: &str, text: &str) -> Value {
    let messages = json!({"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted!"}]});
    let path = format!("/api/conversations/{id}/messages");
    let mut tries = 0;
    loop {
        let (status, body) = app.post(&path, &agent("acme"), messages.clone()).await;
        tries += 1;
        if status == StatusCode::SERVICE_UNAVAILABLE && tries < 5 {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            continue;
        }
        assert_eq!(status, StatusCode::CREATED, "{body}");
        return body["conversation"].clone();
    }
}

/// Says each of `texts` in conversation `id`, one request each, as a chat would.
async fn say_each(app: &TestApp, id: &str, texts: &[impl AsRef<str>]) {
    for text in texts {
        say(app, id, text.as_ref()).await;
    }
}

/// The conversation's extraction jobs, oldest first.
async fn jobs_of(app: &TestApp, id: &str) -> Vec<Value> {
    let (status, page) = app.get(&format!("/api/jobs?conversation_id={id}&limit=100"), &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let mut jobs: Vec<Value> = page["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|job| job["kind"] == "extract_facts")
        .collect();
    jobs.sort_by_key(|job| job["through_seq"].as_i64());
    jobs
}

/// Waits until every extraction job of the conversation has succeeded; returns them.
async fn all_succeeded(app: &TestApp, id: &str) -> Vec<Value> {
    let done = eventually(WAIT, || async {
        let jobs = jobs_of(app, id).await;
        jobs.iter().all(|job| job["status"] == "succeeded").then_some(jobs)
    })
    .await;
    match done {
        Some(jobs) => jobs,
        None => panic!("jobs never all succeeded: {:?}", jobs_of(app, id).await),
    }
}

async fn context_prompt(app: &TestApp, agent_id: &str, user: &str) -> String {
    let path = format!("/api/agents/{agent_id}/users/{user}/memory-context");
    let (status, context) = app.get(&path, &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{context}");
    context["prompt"].as_str().unwrap_or_default().to_owned()
}

/// Current facts, and superseded ones as (text, text of what superseded it), sorted.
async fn facts_with_history(app: &TestApp, agent_id: &str, user: &str) -> (Vec<String>, Vec<(String, String)>) {
    let path = format!("/api/agents/{agent_id}/users/{user}/facts?include_superseded=true&limit=100");
    let (status, page) = app.get(&path, &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let facts = page["items"].as_array().cloned().unwrap_or_default();
    let text_of =
        |id: &Value| facts.iter().find(|f| &f["id"] == id).map(|f| f["fact"].as_str().unwrap_or_default().to_owned());
    let mut current = Vec::new();
    let mut superseded = Vec::new();
    for fact in &facts {
        let text = fact["fact"].as_str().unwrap_or_default().to_owned();
        match text_of(&fact["superseded_by"]) {
            Some(by) => superseded.push((text, by)),
            None => current.push(text),
        }
    }
    current.sort();
    superseded.sort();
    (current, superseded)
}

async fn a_thread_learns_while_it_goes_on_and_ends_with_the_facts_of_an_end_only_thread(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--job-poll-ms", "50"]).await;
    let n = 3;
    configure(&app, "rolling", 3, json!(n)).await;
    configure(&app, "ending", 3, Value::Null).await;
    let turns = thread();

    let id = open(&app, "rolling", "alice", json!({})).await;
    for (i, text) in turns.iter().enumerate() {
        let turn = i + 1;
        let conversation = say(&app, &id, text).await;
        assert_eq!(conversation["status"], "open");
        if turn == n {
            // The first segment is queued by this append; by the next turn the agent knows.
            let learned = eventually(WAIT, || async {
                context_prompt(&app, "rolling", "alice").await.contains("- Name is Alice").then_some(())
            })
            .await;
            assert!(learned.is_some(), "the name never reached memory context while the thread was open");
        }
        if turn == 25 {
            let prompt = context_prompt(&app, "rolling", "alice").await;
            assert!(prompt.contains("- Lives in Lyon") && !prompt.contains("Paris"), "{prompt}");
        }
        if turn == 25 + n {
            let moved = eventually(WAIT, || async {
                let prompt = context_prompt(&app, "rolling", "alice").await;
                (prompt.contains("Paris") && !prompt.contains("Lyon")).then_some(())
            })
            .await;
            assert!(moved.is_some(), "{}", context_prompt(&app, "rolling", "alice").await);
            let (_, superseded) = facts_with_history(&app, "rolling", "alice").await;
            assert!(
                superseded.iter().any(|(old, by)| old == "Lives in Lyon" && by.contains("Paris")),
                "{superseded:?}"
            );
        }
    }
    let jobs = all_succeeded(&app, &id).await;
    assert_eq!(jobs.len(), 40 / n, "one segment every {n} user turns: {jobs:?}");
    let (status, ended) = app.post(&format!("/api/conversations/{id}/end"), &agent("acme"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{ended}");
    let tail = job_reaching(&app, &job_id(&ended), &["succeeded"], WAIT).await;
    assert_eq!(tail["from_seq"], jobs.last().map_or(json!(0), |job| job["through_seq"].clone()), "{tail}");
    assert_eq!(tail["through_seq"], 80, "{tail}");

    // The same turns in a thread of an agent that extracts at the end only.
    let id = open(&app, "ending", "alice", json!({})).await;
    say_each(&app, &id, &turns).await;
    assert!(jobs_of(&app, &id).await.is_empty(), "null keeps extraction for the end");
    let (_, ended) = app.post(&format!("/api/conversations/{id}/end"), &agent("acme"), json!({})).await;
    job_reaching(&app, &job_id(&ended), &["succeeded"], WAIT).await;

    let rolling = facts_with_history(&app, "rolling", "alice").await;
    let ending = facts_with_history(&app, "ending", "alice").await;
    assert!(rolling.0.contains(&"Name is Alice".to_owned()), "{rolling:?}");
    assert_eq!(rolling, ending, "rolling and end-only extraction keep the same facts");
}

async fn each_message_is_in_one_segment_and_the_end_extracts_only_the_tail(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--job-poll-ms", "50"]).await;
    configure(&app, "concierge", 1, json!(2)).await;
    let id = open(&app, "concierge", "bob", json!({})).await;
    let said = ["My name is Bob.", "I live in Ghent.", "I work as a nurse.", "I like jazz.", "I have a dog."];
    say_each(&app, &id, &said[..4]).await;
    // One batch of two user turns makes one segment, not two.
    let batch = json!({"messages": [
        {"role": "user", "content": "I play chess."}, {"role": "user", "content": "I speak Dutch."}]});
    let (status, body) = app.post(&format!("/api/conversations/{id}/messages"), &agent("acme"), batch).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let jobs = all_succeeded(&app, &id).await;
    let ranges: Vec<(i64, i64)> = jobs
        .iter()
        .map(|job| (job["from_seq"].as_i64().unwrap_or(-1), job["through_seq"].as_i64().unwrap_or(-1)))
        .collect();
    assert_eq!(ranges, [(0, 4), (4, 8), (8, 10)], "segments meet end to end, none overlaps: {jobs:?}");
    let (_, conversation) = app.get(&format!("/api/conversations/{id}"), &agent("acme")).await;
    assert_eq!(conversation["extracted_through_seq"], 10, "{conversation}");
    let facts: i64 = jobs.iter().map(|job| job["facts_added"].as_i64().unwrap_or_default()).sum();
    let (current, _) = facts_with_history(&app, "concierge", "bob").await;
    assert_eq!(usize::try_from(facts).unwrap_or_default(), current.len(), "no fact stored twice: {current:?}");
    assert_eq!(current.len(), 6, "{current:?}");

    // Everything is covered: the end has nothing new; a last turn is the only tail.
    let (_, ended) = app.post(&format!("/api/conversations/{id}/end"), &agent("acme"), json!({})).await;
    assert_eq!(ended["extraction"], json!({"queued": false, "reason": "nothing_new"}), "{ended}");
    say(&app, &id, said[4]).await;
    let (_, ended) = app.post(&format!("/api/conversations/{id}/end"), &agent("acme"), json!({})).await;
    let tail = job_reaching(&app, &job_id(&ended), &["succeeded"], WAIT).await;
    assert_eq!((tail["from_seq"].clone(), tail["through_seq"].clone()), (json!(10), json!(12)), "{tail}");
    assert_eq!(tail["facts_added"], 1, "only the tail is new: {tail}");
    let (_, conversation) = app.get(&format!("/api/conversations/{id}"), &agent("acme")).await;
    assert_eq!(conversation["extracted_through_seq"], 12, "{conversation}");
}

async fn a_later_segment_waits_for_the_one_before_it(backend: Backend) {
    let (app, llm) = spawn_with_blocking_llm(backend, &[]).await;
    configure(&app, "concierge", 1, json!(1)).await;
    let id = open(&app, "concierge", "carol", json!({})).await;
    say_each(&app, &id, &["My name is Carol.", "I live in Oslo.", "I like tea."]).await;
    // The first segment is with the LLM, so the conversation's others stay queued
    // however many workers are free.
    llm.called().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let jobs = jobs_of(&app, &id).await;
    let statuses: Vec<&str> = jobs.iter().map(|job| job["status"].as_str().unwrap_or_default()).collect();
    assert_eq!(statuses, ["running", "queued", "queued"], "{jobs:?}");
    let (_, conversation) = app.get(&format!("/api/conversations/{id}"), &agent("acme")).await;
    assert_eq!(conversation["extracted_through_seq"], 0, "nothing is extracted yet: {conversation}");
    llm.answer();
    for _ in 0..2 {
        llm.called().await;
        llm.answer();
    }
    let jobs = all_succeeded(&app, &id).await;
    let ranges: Vec<(Value, Value)> =
        jobs.iter().map(|job| (job["from_seq"].clone(), job["through_seq"].clone())).collect();
    assert_eq!(ranges, [(json!(0), json!(2)), (json!(2), json!(4)), (json!(4), json!(6))], "{jobs:?}");
}

async fn an_llm_reads_each_segment_as_new_with_the_one_before_as_context(backend: Backend) {
    let server = MockServer::start().await;
    let answer = json!({"operations": [{"op": "add", "id": null, "fact": "Lives in Oslo", "score": 0.9}]});
    Mock::given(method("POST")).respond_with(openai_reply(&answer.to_string())).mount(&server).await;
    let app = spawn_extracting(backend, "openai", &server, &[]).await;
    configure(&app, "concierge", 1, json!(2)).await;
    let id = open(&app, "concierge", "frida", json!({})).await;
    say_each(&app, &id, &["My name is Frida.", "I like tea."]).await;
    all_succeeded(&app, &id).await;
    say_each(&app, &id, &["I live in Oslo.", "Which book should I read?"]).await;
    let jobs = all_succeeded(&app, &id).await;
    assert_eq!(jobs.len(), 2, "{jobs:?}");

    let prompts: Vec<String> = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
            body["messages"][1]["content"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    assert_eq!(prompts.len(), 2, "one LLM call per segment: {prompts:?}");
    let (before, new) = prompts[1].split_once(NEW_MESSAGES_MARKER).expect("the marker");
    assert!(before.contains("My name is Frida.") && before.contains("I like tea."), "context: {before}");
    assert!(new.contains("I live in Oslo.") && !new.contains("Frida"), "only the segment is new: {new}");
    assert!(!prompts[0].contains("Oslo"), "the first segment never saw the second: {}", prompts[0]);

    // The first answer holds nothing the user said (no Oslo yet): the builtin stood in for
    // that segment only; the second answer is grounded in its own segment and stored as is.
    let (_, page) = app.get("/api/agents/concierge/users/frida/facts", &agent("acme")).await;
    let source_of = |text: &str| {
        page["items"].as_array().into_iter().flatten().find(|f| f["fact"] == text).map(|f| f["source"].clone())
    };
    assert_eq!(source_of("Name is Frida"), Some(json!("builtin_fallback")), "{page}");
    assert_eq!(source_of("Lives in Oslo"), Some(json!("extracted")), "{page}");
    assert!(jobs[0]["last_error"].as_str().is_some_and(|e| e.contains("gave up")), "{:?}", jobs[0]);
    assert_eq!(jobs[1]["last_error"], Value::Null, "{:?}", jobs[1]);
}

async fn memory_opt_out_and_consent_apply_to_every_segment(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--job-poll-ms", "50"]).await;
    configure(&app, "concierge", 1, json!(1)).await;
    let turns = ["My name is Dana.", "I live in Rome.", "I like opera."];

    // A conversation opted out when created, and one opted out by a `PATCH`.
    let out = open(&app, "concierge", "dana", json!({"memory": false})).await;
    say_each(&app, &out, &turns).await;
    assert!(jobs_of(&app, &out).await.is_empty(), "an opted-out conversation queues no segment");
    let half = open(&app, "concierge", "dana", json!({})).await;
    let (status, _) = app.patch(&format!("/api/conversations/{half}"), &agent("acme"), json!({"memory": false})).await;
    assert_eq!(status, StatusCode::OK);
    say_each(&app, &half, &turns).await;
    assert!(jobs_of(&app, &half).await.is_empty());

    // A user who refused consent: no segment, nothing sent, nothing learned.
    let (status, _) = app.put("/api/users/erin/consent", &agent("acme"), json!({"ai_consent": false})).await;
    assert_eq!(status, StatusCode::OK);
    let refused = open(&app, "concierge", "erin", json!({})).await;
    say_each(&app, &refused, &turns).await;
    assert!(jobs_of(&app, &refused).await.is_empty(), "a refused user's segments are never queued");
    let (_, conversation) = app.get(&format!("/api/conversations/{refused}"), &agent("acme")).await;
    assert_eq!(conversation["extracted_through_seq"], 0, "{conversation}");

    // Memory off for the agent: nothing either, whatever the setting says.
    let (status, _) = app.put("/api/agents-config/concierge", &admin("acme"), json!({"memory_enabled": false})).await;
    assert_eq!(status, StatusCode::OK);
    let off = open(&app, "concierge", "dana", json!({})).await;
    say_each(&app, &off, &turns).await;
    assert!(jobs_of(&app, &off).await.is_empty(), "memory off queues no segment");

    // The control: the same turns with memory on and consent given are extracted.
    app.put("/api/agents-config/concierge", &admin("acme"), json!({"memory_enabled": true})).await;
    let on = open(&app, "concierge", "dana", json!({})).await;
    say_each(&app, &on, &turns).await;
    assert_eq!(all_succeeded(&app, &on).await.len(), 3);
    let (_, facts) = app.get("/api/agents/concierge/users/erin/facts", &agent("acme")).await;
    assert_eq!(facts["items"], json!([]), "{facts}");
}

async fn rolling_settings_default_to_min_user_turns_and_bad_values_change_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let path = "/api/agents-config/concierge";
    let (_, created) = app.put(path, &admin("acme"), json!({"memory_enabled": true, "min_user_turns": 4})).await;
    assert_eq!(created["extract_every_user_turns"], 4, "defaults to min_user_turns: {created}");
    let (_, kept) = app.put(path, &admin("acme"), json!({"min_user_turns": 6})).await;
    assert_eq!(kept["extract_every_user_turns"], 4, "absent keeps it: {kept}");
    let (_, set) = app.put(path, &admin("acme"), json!({"extract_every_user_turns": 2})).await;
    assert_eq!(set["extract_every_user_turns"], 2, "{set}");
    for bad in [json!(0), json!(101), json!(-3), json!("3"), json!(2.5), json!(true), json!([3])] {
        let (status, body) = app.put(path, &admin("acme"), json!({"extract_every_user_turns": bad})).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        let (_, now) = app.get(path, &admin("acme")).await;
        assert_eq!(now["extract_every_user_turns"], 2, "{bad} changed nothing: {now}");
        assert_eq!(now["updated_at"], set["updated_at"], "{bad} changed nothing: {now}");
    }
    let (_, off) = app.put(path, &admin("acme"), json!({"extract_every_user_turns": null})).await;
    assert_eq!(off["extract_every_user_turns"], Value::Null, "{off}");
    let (_, listed) = app.get("/api/agents-config", &admin("acme")).await;
    assert_eq!(listed["items"][0]["extract_every_user_turns"], Value::Null, "{listed}");
}

/// Two replicas on one PostgreSQL database, each with its own workers, take the appends of
/// one open conversation in turn and race to claim its segments: every message is in
/// exactly one segment, each segment is extracted once (one attempt, one success event,
/// no fact added twice), and the segments succeed in the conversation's order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_extract_each_segment_once_and_in_order() {
    let db = TestDb::fresh(Backend::Postgres).await;
    let extra: Vec<String> = ["--job-poll-ms", "20", "--workers", "2"].map(String::from).into();
    let replicas = [TestApp::start(db.clone(), extra.clone()).await, TestApp::start(db.clone(), extra).await];
    configure(&replicas[0], "concierge", 1, json!(1)).await;
    let id = open(&replicas[1], "concierge", "carol", json!({})).await;
    let said = [
        "My name is Carol.",
        "I live in Ghent.",
        "I work as a nurse.",
        "I like jazz.",
        "I have a dog.",
        "I play chess.",
        "I speak Dutch.",
        "I drink green tea.",
        "I moved to Oslo.",
        "I own a red bike.",
    ];
    for (turn, text) in said.iter().enumerate() {
        say(&replicas[turn % 2], &id, text).await;
    }

    let jobs = all_succeeded(&replicas[1], &id).await;
    let ranges: Vec<(i64, i64)> = jobs
        .iter()
        .map(|job| (job["from_seq"].as_i64().unwrap_or(-1), job["through_seq"].as_i64().unwrap_or(-1)))
        .collect();
    let expected: Vec<(i64, i64)> = (0..said.len() as i64).map(|turn| (2 * turn, 2 * turn + 2)).collect();
    assert_eq!(ranges, expected, "one segment per user turn, each message in exactly one");
    assert!(jobs.iter().all(|job| job["attempts"] == 1), "each segment extracted once: {jobs:?}");
    let (_, conversation) = replicas[0].get(&format!("/api/conversations/{id}"), &agent("acme")).await;
    assert_eq!(conversation["extracted_through_seq"], 2 * said.len(), "{conversation}");
    assert_eq!(conversation["status"], "open", "{conversation}");

    // The feed, in commit order: one success per segment, in the segments' order, and
    // one `fact.added` per fact stored.
    let (status, page) = replicas[1].get("/api/events?after=0&limit=1000", &admin("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let events = page["items"].as_array().cloned().unwrap_or_default();
    let succeeded: Vec<&Value> =
        events.iter().filter(|e| e["type"] == "job.succeeded").map(|e| &e["data"]["job_id"]).collect();
    let in_order: Vec<&Value> = jobs.iter().map(|job| &job["id"]).collect();
    assert_eq!(succeeded, in_order, "the segments succeeded in order");
    let (current, superseded) = facts_with_history(&replicas[0], "concierge", "carol").await;
    let added = events.iter().filter(|e| e["type"] == "fact.added").count();
    assert_eq!(added, current.len() + superseded.len(), "no fact added twice: {current:?} {superseded:?}");
    assert!(current.contains(&"Name is Carol".to_owned()), "{current:?}");
}
