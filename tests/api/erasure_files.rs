//! Erasure on SQLite leaves nothing in the database files: after a person is erased, the
//! raw bytes of the main file, its WAL and its shared-memory index hold neither their
//! words nor their identifier (PostgreSQL's sweep of every table is in `rgpd.rs`).

use std::{path::Path, time::Duration};

use crate::common::*;
use reqwest::StatusCode;
use serde_json::json;

const SUBJECT: &str = "subject-7f3kq9@example.test";

/// Words only this person used, each its own stem, so that the full-text index stores
/// them as written (lowercased, after the person's tag). The last two are only in working
/// memory.
const WORDS: [&str; 6] = ["Zorblax", "Quendrith", "Vimbleshaw", "Glimmerquaff", "Plumbustique", "Snarfwiddle"];

/// Which of `needles` occur, case-insensitively, in the raw bytes of the database files
/// (`engram.db`, `-wal`, `-shm`), each with the file it is in.
fn remnants(dir: &Path, needles: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let path = dir.join(format!("engram.db{suffix}"));
        let Ok(bytes) = std::fs::read(&path) else { continue };
        let bytes = bytes.to_ascii_lowercase();
        for needle in needles {
            let needle = needle.to_ascii_lowercase();
            if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                found.push(format!("{needle} in engram.db{suffix}"));
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_erasure_leaves_nothing_in_the_files() {
    let flags = ["--job-poll-ms", "50", "--webhook-allow-private", "true", "--webhook-retry-base-ms", "60000"];
    let app = TestApp::spawn_with(Backend::Sqlite, &flags).await;
    // A webhook subscription whose receiver is down: the person's events keep pending
    // deliveries (and their attempts) until the erasure.
    let (status, _) = app.post("/api/webhooks", &admin("acme"), json!({"url": "http://127.0.0.1:9/hook"})).await;
    assert_eq!(status, StatusCode::CREATED);
    app.enable_memory("acme", "concierge").await;
    // Four messages are a long thread here: each gets a rolling summary of the first three.
    let summaries = json!({"summarize_after_messages": 2, "summary_window": 1});
    let (status, _) = app.put("/api/agents-config/concierge", &admin("acme"), summaries).await;
    assert_eq!(status, StatusCode::OK);
    let writer = agent("acme");
    let user = enc(SUBJECT);
    let (status, _) = app.put(&format!("/api/users/{user}/consent"), &writer, json!({"ai_consent": true})).await;
    assert_eq!(status, StatusCode::OK);
    let mut conversations = Vec::new();
    for title in ["Zorblax chat", "Quendrith trip"] {
        let (status, conversation) = app
            .post(
                "/api/conversations",
                &writer,
                json!({"agent_id": "concierge", "external_ref": SUBJECT, "title": title, "metadata": {"nick": "Zorblax"}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{conversation}");
        let id = conversation["id"].as_str().expect("conversation id").to_string();
        let messages = json!({"messages": [
            {"role": "user", "content": "My name is Zorblax."},
            {"role": "assistant", "content": "Hello Zorblax!"},
            {"role": "user", "content": "I live in Quendrith."},
            {"role": "user", "content": "I like vimbleshaw."}
        ]});
        let (status, body) = app.post(&format!("/api/conversations/{id}/messages"), &writer, messages).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        conversations.push(id);
    }
    let documents = [
        (format!("/api/agents/concierge/users/{user}/working-memory"), "Gift idea: Plumbustique"),
        (format!("/api/conversations/{}/working-memory", conversations[1]), "Snarfwiddle booked"),
    ];
    for (path, content) in documents {
        let (status, body) = app.put(&path, &writer, json!({"content": content})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let facts = format!("/api/agents/concierge/users/{user}/facts");
    let (status, body) = app.post(&facts, &writer, json!({"fact": "Favourite drink is Glimmerquaff"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // One conversation ends: its extraction job runs and stores facts.
    let (_, ended) = app.post(&format!("/api/conversations/{}/end", conversations[0]), &writer, json!({})).await;
    assert_eq!(ended["extraction"]["queued"], true, "{ended}");
    let extracted = eventually(Duration::from_secs(20), || async {
        let (_, listed) = app.get(&facts, &writer).await;
        (listed["items"].as_array().map_or(0, Vec::len) >= 4).then_some(())
    })
    .await;
    assert!(extracted.is_some(), "the extraction stored its facts");
    for id in &conversations {
        let summarised = eventually(Duration::from_secs(20), || async {
            let (_, context) = app.get(&format!("/api/conversations/{id}/context"), &writer).await;
            context["summary"].as_str().is_some_and(|s| s.contains("Quendrith")).then_some(())
        })
        .await;
        assert!(summarised.is_some(), "the summary of {id} was stored");
    }
    let mut needles = WORDS.to_vec();
    needles.push(SUBJECT);
    let before = remnants(&app.db.data_dir, &needles);
    for needle in &needles {
        let needle = needle.to_ascii_lowercase();
        assert!(before.iter().any(|hit| hit.starts_with(&needle)), "the scan finds {needle} before: {before:?}");
    }

    let (status, erased) = app.delete(&format!("/api/rgpd/users/{user}/ai-data"), &token("acme", "rgpd")).await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert_eq!(erased["deleted"]["conversations"], 2, "{erased}");

    // The app is still running: the files are read as they are while it serves.
    let after = remnants(&app.db.data_dir, &needles);
    assert!(after.is_empty(), "the database files still hold {after:?}");
}
