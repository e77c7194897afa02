//! The word index's owner tags are keyed with the server's secret (`ENGRAM_RECEIPT_KEY`):
//! a term in the files cannot be traced back to a person by hashing candidate
//! identifiers, and a start under another key tags every fact again, so search still
//! finds them.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::json;

on_both_backends!(a_start_under_another_key_tags_every_fact_again);

const KEY_A: &str = "first-receipt-key-first-receipt-key!";
const KEY_B: &str = "other-receipt-key-other-receipt-key!";

/// The unkeyed tag anyone could compute: FNV-1a (64 bits) of tenant, agent and external
/// ref, each followed by 0xFF, in hex.
fn unkeyed_tag(parts: [&str; 3]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &byte in part.as_bytes().iter().chain(&[0xFF]) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

async fn terms(app: &TestApp) -> String {
    let rows: Vec<(String,)> = app.db.rows("SELECT search_terms FROM facts").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0].0.clone()
}

async fn found(app: &TestApp, q: &str) -> usize {
    let path = format!("/api/agents/{AGENT}/users/{}/facts/search?q={q}", enc(USER));
    let (status, hits) = app.get(&path, &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{hits}");
    hits["items"].as_array().map_or(0, Vec::len)
}

async fn a_start_under_another_key_tags_every_fact_again(backend: Backend) {
    let mut app = TestApp::spawn_with(backend, &["--receipt-key", KEY_A]).await;
    app.enable_memory("acme", AGENT).await;
    let facts = format!("/api/agents/{AGENT}/users/{}/facts", enc(USER));
    let (status, body) = app.post(&facts, &agent("acme"), json!({"fact": "Caroline drinks green tea"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let under_a = terms(&app).await;
    assert!(under_a.ends_with("tea"), "{under_a}");
    let unkeyed = unkeyed_tag(["acme", AGENT, USER]);
    assert!(!under_a.contains(&unkeyed), "the tag is computable without the key: {under_a}");
    assert_eq!(found(&app, "tea").await, 1);

    let db = app.db.clone();
    app.stop().await;
    let app = TestApp::start(db, vec!["--receipt-key".into(), KEY_B.into()]).await;
    let under_b = terms(&app).await;
    let tag = |terms: &str| terms[..16].to_owned();
    assert_ne!(tag(&under_a), tag(&under_b), "another key, another tag");
    assert_eq!(under_b.split(' ').count(), under_a.split(' ').count(), "{under_a} / {under_b}");
    assert_eq!(found(&app, "tea").await, 1, "the start tagged the fact again under the new key");
}
