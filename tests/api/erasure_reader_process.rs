//! SQLite erasure while a reader in another process holds a snapshot from before it: the
//! server (`engram serve`, a process of its own) answers the erasure at once with
//! `purged_at` null and keeps it null while the reader lasts, though writes go on; once
//! the reader ends the receipt is dated within seconds, and the first read of the files
//! after that (`engram.db`, `-wal`, `-shm`) holds none of the person's words.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    common::*,
    erasure_files::{SUBJECT, WORDS, assert_every_needle_found, remnants},
    processes::Service,
};

/// How long the reader holds its snapshot: several of the purge's one-second retries.
const HELD: Duration = Duration::from_secs(3);

/// How soon after the reader ends the receipt must be dated.
const PURGED_WITHIN: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_erasure_waits_for_a_reader_in_another_process_and_then_leaves_nothing() {
    let db = TestDb::fresh(Backend::Sqlite).await;
    let server = Service::start(&db, &[]).await;
    let writer = agent("acme");
    let user = enc(SUBJECT);
    let facts = format!("/api/agents/concierge/users/{user}/facts");
    for word in &WORDS[..3] {
        let (status, body) = server.post(&facts, &writer, json!({"fact": format!("Likes {word}")})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let conversation = json!({"agent_id": "concierge", "external_ref": SUBJECT, "title": WORDS[3]});
    let (status, conversation) = server.post("/api/conversations", &writer, conversation).await;
    assert_eq!(status, StatusCode::CREATED, "{conversation}");
    let messages = format!("/api/conversations/{}/messages", conversation["id"].as_str().expect("id"));
    let said = json!({"messages": [{"role": "user", "content": format!("I live in {}", WORDS[4])}]});
    let (status, body) = server.post(&messages, &writer, said).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let needles = [WORDS[0], WORDS[1], WORDS[2], WORDS[3], WORDS[4], SUBJECT];
    assert_every_needle_found(&db.data_dir, &needles);

    // Another person's writes go on throughout, as on a live server.
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let load = tokio::spawn({
        let (api, writer) = (Api::clone(&server), writer.clone());
        async move {
            let mut written = 0u32;
            while !*stopped.borrow_and_update() {
                let fact = json!({"fact": format!("Bystander note {written}")});
                let path = "/api/agents/concierge/users/bystander/facts";
                let (status, body) = api.post(path, &writer, fact).await;
                assert_eq!(status, StatusCode::CREATED, "{body}");
                written += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            written
        }
    });

    // The reader: this test's own process, on its own connection, in a read transaction
    // whose snapshot is from before the erasure.
    let mut reader = <sqlx::SqliteConnection as sqlx::Connection>::connect(&db.url).await.expect("connect");
    sqlx::Executor::execute(&mut reader, "BEGIN").await.expect("begin");
    let held: i64 = sqlx::query_scalar("SELECT count(*) FROM facts WHERE external_ref = $1")
        .bind(SUBJECT)
        .fetch_one(&mut reader)
        .await
        .expect("read");
    assert_eq!(held, 3);

    let rgpd = token("acme", "rgpd");
    let (status, erased) = server.delete(&format!("/api/rgpd/users/{user}/ai-data"), &rgpd).await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert_eq!(erased["deleted"]["facts"], 3, "{erased}");
    assert_eq!(erased["purged_at"], Value::Null, "the reader holds the purge back: {erased}");
    let receipt = format!("/api/rgpd/receipts/{}", erased["receipt_id"].as_str().expect("receipt id"));
    let read_receipt = || async { server.get(&receipt, &rgpd).await };
    let holding = Instant::now();
    while holding.elapsed() < HELD {
        let (status, body) = read_receipt().await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["purged_at"], Value::Null, "dated while the reader still holds its snapshot: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The reader still sees the person: its snapshot is from before the erasure.
    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM facts WHERE external_ref = $1")
        .bind(SUBJECT)
        .fetch_one(&mut reader)
        .await
        .expect("read again");
    assert_eq!(seen, 3, "the snapshot was held throughout");

    sqlx::Executor::execute(&mut reader, "COMMIT").await.expect("end the read");
    sqlx::Connection::close(reader).await.expect("close");
    let ended = Instant::now();
    let mut dated = None;
    while dated.is_none() && ended.elapsed() < PURGED_WITHIN {
        let (_, body) = read_receipt().await;
        if body["purged_at"].is_string() {
            // Read at once: the receipt promises the files hold nothing from now on.
            dated = Some((body, remnants(&db.data_dir, &needles)));
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let (body, found) = dated.unwrap_or_else(|| panic!("not dated within {PURGED_WITHIN:?} of the reader's end"));
    assert!(found.is_empty(), "dated {}, yet the files hold {found:?}", body["purged_at"]);
    stop.send(true).expect("the load runs");
    let written = load.await.expect("the load");
    assert!(written > 0, "writes went on during the erasure");
    // And they stay clean while the server goes on writing and checkpointing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = remnants(&db.data_dir, &needles);
    assert!(later.is_empty(), "later the files hold {later:?}");
    drop(server);
}
