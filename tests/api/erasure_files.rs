//! What an erasure leaves in the database's files. SQLite: after a person is erased, the
//! raw bytes of the main file, its WAL and its shared-memory index hold neither their
//! words nor their identifier, also when a reader held the purge back until it ended.
//! PostgreSQL: once the receipt is dated, no row version, live or dead, in the pages of
//! the erased tables holds them, nor the word index's file (its sweep of every table is
//! in `rgpd.rs`).

use std::{path::Path, time::Duration};

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

pub(crate) const SUBJECT: &str = "subject-7f3kq9@example.test";

/// Words only this person used, each its own stem, so that the full-text index stores
/// them as written (lowercased, after the person's tag). The last two are only in working
/// memory.
pub(crate) const WORDS: [&str; 6] =
    ["Zorblax", "Quendrith", "Vimbleshaw", "Glimmerquaff", "Plumbustique", "Snarfwiddle"];

/// Which of `needles` occur, case-insensitively, in the raw bytes of the database files
/// (`engram.db`, `-wal`, `-shm`), each with the file it is in.
pub(crate) fn remnants(dir: &Path, needles: &[&str]) -> Vec<String> {
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

/// The scan's own check: before the erasure it finds each needle in one file or more (a
/// word may sit in the WAL and in the main file at once, as checkpoints copy pages).
pub(crate) fn assert_every_needle_found(dir: &Path, needles: &[&str]) {
    let before = remnants(dir, needles);
    for needle in needles {
        let needle = needle.to_ascii_lowercase();
        assert!(
            before.iter().any(|hit| hit.starts_with(&format!("{needle} in "))),
            "the scan finds {needle} before: {before:?}"
        );
    }
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
    assert_every_needle_found(&app.db.data_dir, &needles);

    let (status, erased) = app.delete(&format!("/api/rgpd/users/{user}/ai-data"), &token("acme", "rgpd")).await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert_eq!(erased["deleted"]["conversations"], 2, "{erased}");

    // The app is still running: the files are read as they are while it serves.
    let after = remnants(&app.db.data_dir, &needles);
    assert!(after.is_empty(), "the database files still hold {after:?}");
}

/// A reader on an older snapshot (an export streamed to a slow client) keeps the WAL's
/// old pages needed: the erasure answers at once with `purged_at` null, and the receipt
/// is dated once the reader has ended and the files hold nothing of the person.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_erasure_under_a_long_reader_is_purged_once_it_ends() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let writer = agent("acme");
    let user = enc(SUBJECT);
    let facts = format!("/api/agents/concierge/users/{user}/facts");
    for fact in ["Lives in Zorblax", "Travels to Quendrith", "Collects Vimbleshaw stamps"] {
        let (status, body) = app.post(&facts, &writer, json!({"fact": fact})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let needles = [WORDS[0], WORDS[1], WORDS[2], SUBJECT];
    assert_every_needle_found(&app.db.data_dir, &needles);

    // A read transaction on its own connection, holding a snapshot from before the erasure.
    let mut reader = <sqlx::SqliteConnection as sqlx::Connection>::connect(&app.db.url).await.expect("connect");
    sqlx::Executor::execute(&mut reader, "BEGIN").await.expect("begin");
    let held: i64 = sqlx::query_scalar("SELECT count(*) FROM facts").fetch_one(&mut reader).await.expect("read");
    assert_eq!(held, 3);

    let rgpd = token("acme", "rgpd");
    let (status, erased) = app.delete(&format!("/api/rgpd/users/{user}/ai-data"), &rgpd).await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert_eq!(erased["deleted"]["facts"], 3, "{erased}");
    assert_eq!(erased["purged_at"], Value::Null, "the reader holds the purge back: {erased}");
    let receipt = format!("/api/rgpd/receipts/{}", erased["receipt_id"].as_str().expect("receipt id"));
    // Retried while the reader lasts, the purge stays owed.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, body) = app.get(&receipt, &rgpd).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["purged_at"], Value::Null, "still held back: {body}");

    sqlx::Executor::execute(&mut reader, "COMMIT").await.expect("end the read");
    drop(reader);
    let purged = eventually(Duration::from_secs(10), || async {
        let (_, body) = app.get(&receipt, &rgpd).await;
        body["purged_at"].as_str().map(str::to_owned)
    })
    .await;
    let purged = purged.expect("the receipt is dated once the reader has ended");
    let time = |at: &str| chrono::DateTime::parse_from_rfc3339(at).expect("an RFC 3339 time");
    assert!(time(&purged) >= time(erased["completed_at"].as_str().expect("completed_at")), "{purged} {erased}");
    // The files are read while the app serves and its checkpointer copies pages: a word
    // seen once is reported, and the receipt's promise is that the files settle clean.
    let mut seen = Vec::new();
    let settled = eventually(Duration::from_secs(5), || {
        let after = remnants(&app.db.data_dir, &needles);
        let clean = after.is_empty();
        if !clean {
            seen = after;
        }
        async move { clean.then_some(()) }
    })
    .await;
    assert!(settled.is_some(), "once purged, the database files still hold {seen:?}");
    if !seen.is_empty() {
        eprintln!("after the purge a read of the files first found {seen:?}, then nothing");
    }
}

/// Every tuple's bytes, live or dead, in the pages of `table` (`pageinspect`): what a
/// vacuum leaves of deleted rows is no tuple at all.
async fn tuples(conn: &mut sqlx::PgConnection, table: &str) -> Vec<Vec<u8>> {
    let blocks: i64 = sqlx::query_scalar("SELECT pg_relation_size($1::regclass) / current_setting('block_size')::int")
        .bind(table)
        .fetch_one(&mut *conn)
        .await
        .expect("the table's size");
    let mut found = Vec::new();
    for block in 0..blocks {
        let data: Vec<Option<Vec<u8>>> =
            sqlx::query_scalar("SELECT t_data FROM heap_page_items(get_raw_page($1, $2::int))")
                .bind(table)
                .bind(block)
                .fetch_all(&mut *conn)
                .await
                .expect("the page's tuples");
        found.extend(data.into_iter().flatten());
    }
    found
}

/// PostgreSQL keeps a deleted row's version in its page until a vacuum prunes it: the
/// receipt is dated once the erased tables are vacuumed, and then no tuple of theirs,
/// live or dead, holds the person's words, while a bystander's are still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_erasure_vacuums_every_version_out_of_the_pages() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let writer = agent("acme");
    for (person, words) in [(SUBJECT, &WORDS[..3]), ("bystander", &["Kestrelmoor"][..])] {
        let facts = format!("/api/agents/concierge/users/{}/facts", enc(person));
        for word in words {
            let (status, body) = app.post(&facts, &writer, json!({"fact": format!("Likes {word}")})).await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
        }
        let (status, conversation) =
            app.post("/api/conversations", &writer, json!({"agent_id": "concierge", "external_ref": person})).await;
        assert_eq!(status, StatusCode::CREATED, "{conversation}");
        let id = conversation["id"].as_str().expect("conversation id");
        let messages = json!({"messages": [{"role": "user", "content": format!("I am from {}", words[0])}]});
        let (status, body) = app.post(&format!("/api/conversations/{id}/messages"), &writer, messages).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&app.db.url).await.expect("connect");
    sqlx::Executor::execute(&mut conn, "CREATE EXTENSION IF NOT EXISTS pageinspect").await.expect("pageinspect");
    let tables = ["facts", "fact_versions", "messages", "events"];
    let holding = |tuples: &[Vec<u8>], word: &str| {
        let word = word.to_ascii_lowercase();
        tuples.iter().any(|t| t.to_ascii_lowercase().windows(word.len()).any(|w| w == word.as_bytes()))
    };
    for table in tables {
        let before = tuples(&mut conn, table).await;
        assert!(holding(&before, WORDS[0]), "{table} holds the person's words before");
    }
    let word_index = [word_index_file(&mut conn).await];
    assert!(holding(&word_index[..], WORDS[0]), "the word index holds the person's words before");

    let rgpd = token("acme", "rgpd");
    let (status, erased) = app.delete(&format!("/api/rgpd/users/{}/ai-data", enc(SUBJECT)), &rgpd).await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    let receipt = format!("/api/rgpd/receipts/{}", erased["receipt_id"].as_str().expect("receipt id"));
    let purged = eventually(Duration::from_secs(20), || async {
        let (_, body) = app.get(&receipt, &rgpd).await;
        body["purged_at"].as_str().map(str::to_owned)
    })
    .await;
    assert!(purged.is_some(), "the receipt is dated once the erased tables are vacuumed");
    for table in tables {
        let after = tuples(&mut conn, table).await;
        for word in &WORDS[..3] {
            assert!(!holding(&after, word), "a tuple of {table} still holds {word}");
        }
        if table != "events" {
            assert!(holding(&after, "Kestrelmoor"), "the bystander's {table} are kept");
        }
    }
    // A GIN index keeps a key whose postings are all gone: the word index is rebuilt.
    let word_index = [word_index_file(&mut conn).await];
    for word in &WORDS[..3] {
        assert!(!holding(&word_index[..], word), "the word index's file still holds {word}");
    }
    assert!(holding(&word_index[..], "Kestrelmoor"), "the bystander's words are still indexed");
}

/// The bytes of the word index's file (`facts_words`), as written by a checkpoint.
async fn word_index_file(conn: &mut sqlx::PgConnection) -> Vec<u8> {
    sqlx::Executor::execute(&mut *conn, "CHECKPOINT").await.expect("checkpoint");
    sqlx::query_scalar("SELECT pg_read_binary_file(pg_relation_filepath('facts_words'))")
        .fetch_one(&mut *conn)
        .await
        .expect("the word index's file")
}
