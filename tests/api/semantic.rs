//! Recall by meaning over HTTP, on both backends: vectors follow remember, edit and
//! extraction; a model change is backfilled; erasure and deletion leave no vector; an
//! embedding server that fails never fails a write (the fact is embedded later); without
//! vectors recall is exactly full text; and with the real local model, paraphrases are
//! found first among distractors.
//!
//! Most tests use a local OpenAI-compatible embedding server whose vectors are a hashed
//! bag of words (deterministic, instant); the paraphrase test needs the real model, which
//! `scripts/test` provides once under `target/models/` (or `ENGRAM_TEST_MODEL_DIR`).

use std::sync::{
    Arc,
    atomic::{AtomicU8, Ordering},
};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::*;

on_both_backends!(
    vectors_follow_remember_edit_and_extraction,
    a_model_change_is_backfilled,
    erasure_and_deletion_leave_no_vector,
    a_failing_embedding_server_never_fails_a_write,
    without_vectors_recall_is_exactly_full_text,
    a_rare_word_outweighs_a_common_name,
    paraphrases_are_recalled_first_with_the_local_model,
    paraphrases_of_one_preference_end_as_one_fact,
    facts_found_by_meaning_only_follow_the_tag_and_superseded_filters,
    a_remembered_fact_is_found_by_meaning_at_once,
);

const DIMS: usize = 16;

/// How the fake embedding server answers.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Mode {
    Healthy = 0,
    ServerError = 1,
    RateLimited = 2,
    Slow = 3,
    Malformed = 4,
}

/// A local OpenAI-compatible `/v1/embeddings` server: each text's vector counts its
/// lower-cased words hashed into [`DIMS`] buckets. Its mode can be switched while it runs.
struct FakeEmbeddings {
    base: String,
    mode: Arc<AtomicU8>,
}

impl FakeEmbeddings {
    async fn start() -> FakeEmbeddings {
        let mode = Arc::new(AtomicU8::new(Mode::Healthy as u8));
        let shared = mode.clone();
        let router = axum::Router::new().route(
            "/v1/embeddings",
            axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
                let mode = shared.load(Ordering::SeqCst);
                async move { answer(mode, &body).await }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}/v1", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        FakeEmbeddings { base, mode }
    }

    fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    fn args(&self, model: &str) -> Vec<String> {
        ["--embeddings", "openai", "--embedding-base-url", &self.base, "--embedding-model", model]
            .into_iter()
            .chain(["--embedding-timeout-secs", "1", "--job-poll-ms", "50"])
            .map(str::to_owned)
            .collect()
    }
}

async fn answer(mode: u8, body: &Value) -> axum::response::Response {
    use axum::response::IntoResponse;
    match mode {
        1 => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        2 => return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")]).into_response(),
        3 => tokio::time::sleep(Duration::from_secs(3)).await,
        4 => return axum::Json(json!({"data": [{"index": 0}]})).into_response(),
        _ => {}
    }
    let inputs = body["input"].as_array().cloned().unwrap_or_default();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let mut vector = [0f32; DIMS];
            vector[0] = 0.01;
            for word in text.as_str().unwrap_or("").split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
                let hash = word.to_lowercase().bytes().fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
                vector[hash % DIMS] += 1.0;
            }
            json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    axum::Json(json!({"object": "list", "data": data, "model": "fake"})).into_response()
}

/// Facts and their vectors in the test's database: (fact text, vector model or None,
/// whether the vector is current).
async fn vectors(db: &TestDb) -> Vec<(String, Option<String>, bool)> {
    const SQL: &str = "SELECT f.fact, v.model, v.fact_updated_at = f.updated_at AS current \
        FROM facts f LEFT JOIN fact_vectors v ON v.fact_id = f.id ORDER BY f.fact";
    let rows: Vec<(String, Option<String>, Option<bool>)> = db.rows(SQL).await;
    rows.into_iter().map(|(fact, model, current)| (fact, model, current.unwrap_or(false))).collect()
}

async fn vector_rows(db: &TestDb) -> i64 {
    let count: Vec<(i64,)> = db.rows("SELECT count(*) FROM fact_vectors").await;
    count[0].0
}

/// Waits until every fact has a current vector of `model`; returns how many facts.
pub(crate) async fn all_embedded_with(db: &TestDb, model: &str) -> usize {
    let done = eventually(Duration::from_secs(20), || async {
        let rows = vectors(db).await;
        rows.iter().all(|(_, m, current)| m.as_deref() == Some(model) && *current).then_some(rows.len())
    })
    .await;
    match done {
        Some(count) => count,
        None => panic!("not every fact has a current {model} vector: {:?}", vectors(db).await),
    }
}

fn facts_path(user: &str) -> String {
    format!("/api/agents/concierge/users/{user}/facts")
}

async fn remember(app: &TestApp, user: &str, fact: &str) -> Value {
    let (status, body) = app.post(&facts_path(user), &agent("acme"), json!({"fact": fact})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

async fn search(app: &TestApp, user: &str, q: &str) -> Vec<(String, f64)> {
    search_with(app, user, q, "").await
}

/// [`search`] with more parameters (`&tag=…`).
async fn search_with(app: &TestApp, user: &str, q: &str, more: &str) -> Vec<(String, f64)> {
    let (status, found) = app.get(&format!("{}/search?q={}{more}", facts_path(user), enc(q)), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{found}");
    found["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|hit| (hit["fact"].as_str().expect("text").to_owned(), hit["relevance"].as_f64().expect("relevance")))
        .collect()
}

async fn vectors_follow_remember_edit_and_extraction(backend: Backend) {
    let fake = FakeEmbeddings::start().await;
    let args = fake.args("fake-1");
    let app = TestApp::spawn_with(backend, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let fact = remember(&app, "ann", "Ships the app on fly.io").await;
    assert_eq!(all_embedded_with(&app.db, "openai:fake-1").await, 1);

    let id = fact["id"].as_str().expect("id");
    let (status, body) =
        app.patch(&format!("{}/{id}", facts_path("ann")), &agent("acme"), json!({"fact": "Deploys on Render"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(all_embedded_with(&app.db, "openai:fake-1").await, 1);
    assert_eq!(vectors(&app.db).await[0].0, "Deploys on Render");

    app.enable_memory("acme", "concierge").await;
    let (_, ended) =
        converse(&app, "concierge", "ann", &["Hi! My name is Ann.", "I live in Oslo.", "I prefer tea, honestly."])
            .await;
    assert_eq!(ended["extraction"]["queued"], true, "{ended}");
    let extracted = eventually(Duration::from_secs(20), || async {
        let rows = vectors(&app.db).await;
        (rows.len() >= 3 && rows.iter().all(|(_, m, current)| m.is_some() && *current)).then_some(rows.len())
    })
    .await;
    assert!(extracted.is_some(), "extracted facts got vectors: {:?}", vectors(&app.db).await);
}

async fn a_model_change_is_backfilled(backend: Backend) {
    let fake = FakeEmbeddings::start().await;
    let mut app = TestApp::start(TestDb::fresh(backend).await, fake.args("fake-1")).await;
    for fact in ["Ships the app on fly.io", "Has a daughter named Emma", "Prefers tea over coffee"] {
        remember(&app, "ann", fact).await;
    }
    assert_eq!(all_embedded_with(&app.db, "openai:fake-1").await, 3);
    app.stop().await;

    let app = TestApp::start(app.db.clone(), fake.args("fake-2")).await;
    assert_eq!(all_embedded_with(&app.db, "openai:fake-2").await, 3);
    assert_eq!(vector_rows(&app.db).await, 3, "old vectors are replaced, not kept beside");
}

async fn erasure_and_deletion_leave_no_vector(backend: Backend) {
    let fake = FakeEmbeddings::start().await;
    let args = fake.args("fake-1");
    let app = TestApp::spawn_with(backend, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let one = remember(&app, "ann", "Ships the app on fly.io").await;
    remember(&app, "ann", "Has a daughter named Emma").await;
    remember(&app, "bob", "Prefers tea over coffee").await;
    remember(&app, "cid", "Plays the cello").await;
    assert_eq!(all_embedded_with(&app.db, "openai:fake-1").await, 4);

    let id = one["id"].as_str().expect("id");
    let (status, _) = app.delete(&format!("{}/{id}", facts_path("ann")), &agent("acme")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(vector_rows(&app.db).await, 3);

    let (status, body) = app.delete(&facts_path("cid"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(vector_rows(&app.db).await, 2);

    let (status, erased) = app.delete("/api/rgpd/users/ann/ai-data", &token("acme", "rgpd")).await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    let left = vectors(&app.db).await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].0, "Prefers tea over coffee", "the bystander keeps their vector");
    assert_eq!(vector_rows(&app.db).await, 1);
}

async fn a_failing_embedding_server_never_fails_a_write(backend: Backend) {
    let fake = FakeEmbeddings::start().await;
    let args = fake.args("fake-1");
    let app = TestApp::spawn_with(backend, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    for (i, mode) in [Mode::ServerError, Mode::RateLimited, Mode::Slow, Mode::Malformed].into_iter().enumerate() {
        fake.set(mode);
        let text = format!("Owns {} bicycles", i + 2);
        let fact = remember(&app, "ann", &text).await;
        let id = fact["id"].as_str().expect("id");
        let (status, body) =
            app.patch(&format!("{}/{id}", facts_path("ann")), &agent("acme"), json!({"tags": ["sport"]})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        // Recall still answers, by full text.
        let found = search(&app, "ann", "bicycles").await;
        assert!(found.iter().any(|(fact, _)| *fact == text), "{found:?}");
        let rows = vectors(&app.db).await;
        assert!(rows.iter().any(|(fact, model, _)| *fact == text && model.is_none()), "{rows:?}");
        fake.set(Mode::Healthy);
        // …and the fact is embedded later.
        all_embedded_with(&app.db, "openai:fake-1").await;
    }
}

async fn without_vectors_recall_is_exactly_full_text(backend: Backend) {
    let offline = "http://127.0.0.1:9/simple/".to_owned();
    let missing = std::env::temp_dir().join(format!("engram-no-model-{}", uuid::Uuid::now_v7().simple()));
    let missing = missing.display().to_string();
    let runs = [
        vec!["--embeddings".to_owned(), "off".to_owned()],
        vec![
            "--embeddings".into(),
            "local".into(),
            "--embedding-model-dir".into(),
            missing.clone(),
            "--embedding-index-url".into(),
            offline,
        ],
    ];
    let mut answers = Vec::new();
    for args in runs {
        let app = TestApp::start(TestDb::fresh(backend).await, args).await;
        for fact in ["Ships the app on fly.io", "Deploys on Friday", "Has a daughter named Emma", "Drinks tea"] {
            remember(&app, "ann", fact).await;
        }
        app.enable_memory("acme", "concierge").await;
        let (status, context) =
            app.get("/api/agents/concierge/users/ann/memory-context?query=deploys%20on%20friday", &agent("acme")).await;
        assert_eq!(status, StatusCode::OK, "{context}");
        let found = search(&app, "ann", "where does Ann deploy on Friday").await;
        assert_eq!(found.first().map(|(f, _)| f.as_str()), Some("Deploys on Friday"), "{found:?}");
        assert_eq!(vector_rows(&app.db).await, 0);
        answers.push((found, context["prompt"].clone()));
    }
    assert!(!std::path::Path::new(&missing).join("model.safetensors").exists());
    assert_eq!(answers[0], answers[1], "the missing model answers as embeddings off");
}

/// A question that names someone who appears in many facts, and a rare word only one fact
/// holds: every fact matches one of the two words, so word counts tie, and the vectors
/// (bags of words) favour the short facts about the name. The rare word decides.
async fn a_rare_word_outweighs_a_common_name(backend: Backend) {
    let fake = FakeEmbeddings::start().await;
    let args = fake.args("fake-1");
    let app = TestApp::spawn_with(backend, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let rare = "Ran the Berlin marathon with their colleagues last spring";
    let common = ["Maya cooks", "Maya sings", "Maya paints", "Maya swims", "Maya gardens"];
    for fact in common.iter().chain([&rare]) {
        remember(&app, "ann", fact).await;
    }
    assert_eq!(all_embedded_with(&app.db, "openai:fake-1").await, common.len() + 1);
    let found = search(&app, "ann", "Maya marathon").await;
    assert_eq!(found.len(), common.len() + 1, "{found:?}");
    assert_eq!(found[0].0, rare, "{found:?}");
    assert!(found.iter().all(|(_, r)| (0.0..=1.0).contains(r)), "{found:?}");
}

/// The real model's directory: `ENGRAM_TEST_MODEL_DIR`, or where `scripts/test` puts it.
pub(crate) fn model_dir() -> String {
    std::env::var("ENGRAM_TEST_MODEL_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/target/models/all-MiniLM-L6-v2").to_owned())
}

/// The app with the real local model (never fetched: the index URL answers nothing).
pub(crate) async fn spawn_with_local_model(backend: Backend) -> TestApp {
    let dir = model_dir();
    assert!(
        std::path::Path::new(&dir).join("model.safetensors").is_file(),
        "the local model is missing from {dir}: run scripts/test (it fetches it once) or set ENGRAM_TEST_MODEL_DIR"
    );
    let args = ["--embeddings", "local", "--embedding-model-dir", &dir, "--embedding-index-url", "http://127.0.0.1:9/"];
    TestApp::spawn_with(backend, &args).await
}

async fn paraphrases_are_recalled_first_with_the_local_model(backend: Backend) {
    let app = spawn_with_local_model(backend).await;
    let targets = ["Ships the app on fly.io", "Has a daughter named Emma", "Prefers tea over coffee"];
    let distractors = [
        "Lives in Lyon",
        "Works as a nurse",
        "Allergic to peanuts",
        "Plays the cello on weekends",
        "Drives a red car",
        "Birthday is in March",
        "Reads science fiction",
        "Runs along the river",
        "Where the team meets is the blue room",
    ];
    for fact in targets.iter().chain(&distractors) {
        remember(&app, "ann", fact).await;
    }
    let count = all_embedded_with(&app.db, "local:all-MiniLM-L6-v2").await;
    assert_eq!(count, targets.len() + distractors.len());
    for (query, expected) in
        [("Where do I deploy?", targets[0]), ("my kid", targets[1]), ("what do I drink in the morning", targets[2])]
    {
        let found = search(&app, "ann", query).await;
        assert_eq!(found.first().map(|(f, _)| f.as_str()), Some(expected), "{query}: {found:?}");
        assert!(found.iter().all(|(_, r)| (0.0..=1.0).contains(r)), "{found:?}");
    }

    app.enable_memory("acme", "concierge").await;
    let (status, context) = app
        .get(
            &format!("/api/agents/concierge/users/ann/memory-context?query={}&max_facts=1", enc("my kid")),
            &agent("acme"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{context}");
    assert_eq!(context["facts"][0]["fact"], targets[1], "{context}");
}

/// Read your writes, by meaning: with the local model loaded, a fact is embedded before its
/// write is answered, so the search that follows finds it with no wait.
async fn a_remembered_fact_is_found_by_meaning_at_once(backend: Backend) {
    let app = spawn_with_local_model(backend).await;
    remember(&app, "ann", "Lives in Lyon").await;
    all_embedded_with(&app.db, "local:all-MiniLM-L6-v2").await; // the model is loaded
    for (fact, query) in [
        ("Has a daughter named Emma", "my kid"),
        ("Ships the app on fly.io", "Where do I deploy?"),
        ("Prefers tea over coffee", "what do I drink in the morning"),
    ] {
        remember(&app, "ann", fact).await;
        let found = search(&app, "ann", query).await;
        assert_eq!(found.first().map(|(f, _)| f.as_str()), Some(fact), "{query}: {found:?}");
    }
}

/// Found by meaning alone (no word of the query in the fact), a fact still has to pass the
/// search's filters: its tag, and being current unless superseded facts are asked for.
async fn facts_found_by_meaning_only_follow_the_tag_and_superseded_filters(backend: Backend) {
    let app = spawn_with_local_model(backend).await;
    let (status, body) = app
        .post(&facts_path("ann"), &agent("acme"), json!({"fact": "Has a daughter named Emma", "tags": ["family"]}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // The second fills the same slot (home): the first is superseded.
    for fact in ["Lives in Lyon", "Lives in Paris", "Works as a nurse", "Drives a red car"] {
        remember(&app, "ann", fact).await;
    }
    all_embedded_with(&app.db, "local:all-MiniLM-L6-v2").await;
    let texts = |found: Vec<(String, f64)>| found.into_iter().map(|(fact, _)| fact).collect::<Vec<_>>();

    assert_eq!(texts(search_with(&app, "ann", "my kid", "&tag=family").await), ["Has a daughter named Emma"]);
    assert_eq!(texts(search_with(&app, "ann", "my kid", "&tag=work").await), Vec::<String>::new());

    let current = texts(search(&app, "ann", "my hometown").await);
    assert!(current.contains(&"Lives in Paris".to_owned()), "{current:?}");
    assert!(!current.contains(&"Lives in Lyon".to_owned()), "a superseded fact is not recalled: {current:?}");
    let all = texts(search_with(&app, "ann", "my hometown", "&include_superseded=true").await);
    assert!(all.contains(&"Lives in Lyon".to_owned()), "{all:?}");
}

/// Three conversations, each stating one preference in other words: with the local model
/// the second and third refresh the first fact (score, `updated_at`, conversation) instead
/// of adding to it; without embeddings they stay three facts, and contradicting or other
/// facts are never merged.
async fn paraphrases_of_one_preference_end_as_one_fact(backend: Backend) {
    let said = ["I like tea.", "I enjoy tea.", "I love drinking tea."];
    let app = spawn_with_local_model(backend).await;
    app.enable_memory("acme", "concierge").await;
    let mut conversations = Vec::new();
    for line in said {
        let (conversation, ended) = converse(&app, "concierge", "ann", &["Hi there!", line, "See you."]).await;
        job_reaching(&app, &job_id(&ended), &["succeeded"], Duration::from_secs(30)).await;
        all_embedded_with(&app.db, "local:all-MiniLM-L6-v2").await;
        conversations.push(conversation);
    }
    let (_, page) = app.get(&facts_path("ann"), &agent("acme")).await;
    assert_eq!(texts(&page["items"]), ["Likes tea"], "{page}");
    let fact = &page["items"][0];
    assert_eq!(fact["conversation_id"], conversations[2].as_str(), "the latest conversation that said it");
    assert!(fact["updated_at"].as_str() > fact["created_at"].as_str(), "{fact}");

    // Not the same fact: a negation, a different drink.
    for line in ["I don't like tea.", "I like coffee."] {
        let (_, ended) = converse(&app, "concierge", "ann", &["Hi there!", line, "See you."]).await;
        job_reaching(&app, &job_id(&ended), &["succeeded"], Duration::from_secs(30)).await;
    }
    let (_, page) = app.get(&facts_path("ann"), &agent("acme")).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(3), "{page}");

    let plain = TestApp::spawn_with(backend, &["--job-poll-ms", "50"]).await;
    plain.enable_memory("acme", "concierge").await;
    for line in said {
        let (_, ended) = converse(&plain, "concierge", "ann", &["Hi there!", line, "See you."]).await;
        job_reaching(&plain, &job_id(&ended), &["succeeded"], Duration::from_secs(30)).await;
    }
    let (_, page) = plain.get(&facts_path("ann"), &agent("acme")).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(3), "without embeddings, the exact rule: {page}");
}

/// Vectors of all-MiniLM-L6-v2 made by candle-transformers' `BertModel` (the encoder the
/// local embedder had before its own), for texts 0–3: their first six dimensions, and the
/// cosine of pairs (0, 1), (0, 2), (1, 3), (2, 3).
const REFERENCE_TEXTS: [&str; 4] =
    ["Ships the app on fly.io", "Where do I deploy?", "Has a daughter named Emma", "my kid"];
const REFERENCE_HEADS: [[f32; 6]; 4] = [
    [-0.037275303, -0.029625572, 0.0019247254, -0.067363165, 0.060599964, -0.0762819],
    [0.069845505, -0.048919294, -0.031385195, -0.04854179, 0.065749496, -0.016507577],
    [-0.07549887, -0.09268284, 0.07128157, -0.009607707, -0.026403364, -0.03324355],
    [-0.10290514, 0.09914647, 0.0066629876, 0.023253174, 0.004657419, -0.061845686],
];
const REFERENCE_COSINES: [(usize, usize, f32); 4] =
    [(0, 1, 0.367222), (0, 2, 0.078533), (1, 3, 0.110100), (2, 3, 0.253002)];

fn assert_reference(index: usize, vector: &[f32]) {
    assert_eq!(vector.len(), 384);
    for (got, want) in vector.iter().zip(REFERENCE_HEADS[index]) {
        assert!((got - want).abs() < 1e-4, "text {index}: {:?} against {:?}", &vector[..6], REFERENCE_HEADS[index]);
    }
}

/// The local encoder gives the reference vectors: one text alone, several in one call
/// (padded to the longest), and texts of concurrent callers, which its inference threads
/// batch together, each answer going back to its own caller.
#[tokio::test]
async fn the_local_encoder_reproduces_reference_vectors_alone_batched_and_concurrently() {
    let local = Arc::new(engram::embed::local::Local::new(model_dir().into()));
    local.load().await.expect("the model loads");
    let texts: Vec<String> = REFERENCE_TEXTS.iter().map(|t| t.to_string()).collect();

    let alone = local.embed(&texts[..1]).await.expect("embedded");
    assert_reference(0, &alone[0]);

    let long = "A much longer text, so that the others are padded: the user talked at length about \
                deployments, databases, daughters and the tea they drink every morning before work";
    let together = local.embed(&[texts.clone(), vec![long.to_owned()]].concat()).await.expect("embedded");
    for (index, vector) in together.iter().take(texts.len()).enumerate() {
        assert_reference(index, vector);
    }
    for (a, b, want) in REFERENCE_COSINES {
        let cosine: f32 = together[a].iter().zip(&together[b]).map(|(x, y)| x * y).sum();
        assert!((cosine - want).abs() < 1e-4, "cosine ({a}, {b}) {cosine} against {want}");
    }

    let callers = (0..8).map(|i| {
        let (local, text) = (local.clone(), texts[i % texts.len()].clone());
        tokio::spawn(async move { (i % 4, local.embed(&[text]).await) })
    });
    for caller in futures::future::join_all(callers).await {
        let (index, vectors) = caller.expect("caller");
        assert_reference(index, &vectors.expect("embedded")[0]);
    }
}
