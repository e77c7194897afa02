//! Facts search as an indexed, rarity-aware query (issue 11), on both backends: a rare
//! query word beats a name that half the user's facts carry, in search and in the
//! memory context, in the same order on both backends; `relevance` stays a share of
//! the query's words; and the database's own plan reads through indexes instead of
//! testing every query word against every fact.

use std::time::Duration;

use crate::common::*;
use engram::{
    domain::{
        fact::{FactInput, NewFact, Origin},
        ids::{AgentId, ExternalRef, TenantId},
        owner::Owner,
        search_query::SearchQuery,
    },
    store::{Store, facts::FactFilter},
};
use reqwest::StatusCode;
use serde_json::json;

on_both_backends!(
    rare_words_outrank_common_names,
    search_plan_reads_through_indexes,
    a_fact_naming_another_users_index_key_is_not_theirs,
    facts_stored_before_the_word_index_are_found_after_the_upgrade,
    a_word_too_long_for_the_index_does_not_stop_a_fact
);

const AGENT: &str = "support-bot";
const USER: &str = "caroline";

fn user_path(user: &str) -> String {
    format!("/api/agents/{AGENT}/users/{user}")
}

fn new_fact(text: &str) -> NewFact {
    FactInput { fact: text.to_owned(), tags: None, score: None, ..Default::default() }
        .validate(chrono::Utc::now())
        .unwrap()
}

/// The rare fact is the oldest, so recency alone would rank it last: only the weight of
/// its rare word can put it first.
async fn rare_words_outrank_common_names(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    app.enable_memory("acme", AGENT).await;
    for text in [
        "Went to an LGBTQ support meeting in May",
        "Caroline likes painting sunsets",
        "Plays the violin on Sundays",
        "Caroline moved here from Sweden",
        "Works as a school counsellor",
        "Caroline has two dogs",
    ] {
        let (status, body) = app.post(&format!("{}/facts", user_path(USER)), &token, json!({"fact": text})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }

    let (status, hits) =
        app.get(&format!("{}/facts/search?q={}", user_path(USER), enc("Caroline LGBTQ")), &token).await;
    assert_eq!(status, StatusCode::OK, "{hits}");
    assert_eq!(
        texts(&hits["items"]),
        [
            "Went to an LGBTQ support meeting in May",
            "Caroline has two dogs",
            "Caroline moved here from Sweden",
            "Caroline likes painting sunsets"
        ],
        "one word each: the rare word first, then the name's facts newest first: {hits}"
    );
    let relevance = relevances(&hits);
    assert!(relevance.iter().all(|r| *r == 0.5), "a share of the query's two words: {relevance:?}");

    // Matching more words still ranks first, however common they are.
    let (_, both) =
        app.get(&format!("{}/facts/search?q={}", user_path(USER), enc("caroline painting lgbtq")), &token).await;
    assert_eq!(
        texts(&both["items"])[..2],
        ["Caroline likes painting sunsets", "Went to an LGBTQ support meeting in May"]
    );
    let top = both["items"][0]["relevance"].as_f64().unwrap();
    assert!(top > 0.0 && top <= 1.0, "{both}");

    let (status, context) = app
        .get(&format!("{}/memory-context?query={}&max_facts=2", user_path(USER), enc("Caroline LGBTQ")), &token)
        .await;
    assert_eq!(status, StatusCode::OK, "{context}");
    assert_eq!(
        texts(&context["facts"]),
        ["Went to an LGBTQ support meeting in May", "Caroline has two dogs"],
        "{context}"
    );
}

/// Both backends key each indexed word by its owner (SQLite's terms since migration 0019,
/// PostgreSQL's since 0020; before, PostgreSQL's lexemes since 0008): a fact whose own
/// text spells another user's key is still only its owner's. An owner's tag is a 64-bit
/// hash, which two owners may share: another user's fact given Caroline's very terms, as
/// a shared tag would give them, is found by her index lookups and refused by the owner
/// test on its row.
async fn a_fact_naming_another_users_index_key_is_not_theirs(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    app.enable_memory("acme", AGENT).await;
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02X}")).collect::<String>();
    let key = format!("{}x{}x{}", hex("acme"), hex(AGENT), hex(USER));
    // The forged fact is the newer, so it would rank first among equal matches and take
    // the only place of a search for one fact.
    let (status, body) =
        app.post(&format!("{}/facts", user_path(USER)), &token, json!({"fact": "Caroline drinks green tea"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let forged = format!("Mallory wrote {key} beside her tea");
    let (status, body) = app.post(&format!("{}/facts", user_path("mallory")), &token, json!({"fact": forged})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (_, theirs) = app.get(&format!("{}/facts/search?q=tea", user_path("mallory")), &token).await;
    assert_eq!(texts(&theirs["items"]), [forged.as_str()], "{theirs}");
    let shared: Vec<(i64,)> = app
        .db
        .rows(
            "UPDATE facts SET search_terms = (SELECT search_terms FROM facts WHERE fact = 'Caroline drinks green tea') \
             WHERE external_ref = 'mallory' RETURNING CAST(1 AS BIGINT)",
        )
        .await;
    assert_eq!(shared.len(), 1, "Mallory's fact now holds Caroline's terms");

    let (status, one) = app.get(&format!("{}/facts/search?q=tea&limit=1", user_path(USER)), &token).await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(texts(&one["items"]), ["Caroline drinks green tea"], "{one}");
    assert_eq!(search_texts(&app, &token, "tea").await, ["Caroline drinks green tea"]);
    let (status, context) =
        app.get(&format!("{}/memory-context?query={}&max_facts=1", user_path(USER), enc("tea")), &token).await;
    assert_eq!(status, StatusCode::OK, "{context}");
    assert_eq!(texts(&context["facts"]), ["Caroline drinks green tea"], "{context}");
}

/// A database the build before its backend's word index wrote (SQLite's migrations up to
/// 0018, PostgreSQL's up to 0019, facts as that build stored them) is searched as before
/// once Engram has started on it: the start writes every old fact's terms.
async fn facts_stored_before_the_word_index_are_found_after_the_upgrade(backend: Backend) {
    let db = TestDb::fresh(backend).await;
    let texts = ["Caroline drinks green tea", "Caroline hikes on Sundays", "Melanie hikes too"];
    let insert = "INSERT INTO facts (tenant_id, agent_id, external_ref, id, fact, normalized, tags, source, \
                    created_at, updated_at, observed_at) VALUES ('acme', $1, $2, $3, $4, $5, '[]', 'manual', $6, $6, $6)";
    macro_rules! store_the_old_way {
        ($pool:expr, $migrations:literal, $before:literal) => {{
            let pool = $pool;
            sqlx::migrate!($migrations).run_to($before, &pool).await.expect("the migrations before the word index");
            for (text, user) in texts.into_iter().zip([USER, USER, "melanie"]) {
                sqlx::query(insert)
                    .bind(AGENT)
                    .bind(user)
                    .bind(uuid::Uuid::now_v7())
                    .bind(text)
                    .bind(text.to_lowercase())
                    .bind(chrono::Utc::now())
                    .execute(&pool)
                    .await
                    .expect("a fact as the build before stored it");
            }
            pool.close().await;
        }};
    }
    match backend {
        Backend::Postgres => {
            store_the_old_way!(
                sqlx::PgPool::connect(&db.url).await.unwrap(),
                "crates/engram-store/migrations/postgres",
                19
            )
        }
        Backend::Sqlite => store_the_old_way!(
            sqlx::SqlitePool::connect(&format!("{}?mode=rwc", db.url)).await.unwrap(),
            "crates/engram-store/migrations/sqlite",
            18
        ),
    }

    let app = TestApp::start(db, Vec::new()).await;
    let token = agent("acme");
    app.enable_memory("acme", AGENT).await;
    let mut found = search_texts(&app, &token, "tea hiking").await;
    found.sort();
    assert_eq!(found, texts[..2], "Caroline's facts, found by the stems of their words");
    let without: Vec<(i64,)> = app.db.rows("SELECT count(*) FROM facts WHERE search_terms IS NULL").await;
    assert_eq!(without, [(0,)], "every old fact has its terms");
}

/// A fact holding a run of letters longer than PostgreSQL takes as one indexed word is
/// stored, and found by its other words, on both backends alike.
async fn a_word_too_long_for_the_index_does_not_stop_a_fact(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = agent("acme");
    app.enable_memory("acme", AGENT).await;
    // 2 100 bytes of letters: over the 2 047 of a PostgreSQL lexeme.
    let word = "東".repeat(700);
    let fact = format!("Caroline's favourite word is {word} and she drinks tea");
    let (status, body) = app.post(&format!("{}/facts", user_path(USER)), &token, json!({"fact": fact})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(search_texts(&app, &token, "tea").await, [fact.as_str()]);
    assert!(search_texts(&app, &token, &word).await.is_empty(), "the word itself is not indexed");
}

/// Seeds many users' facts, one of them at the cap with a rare word in a few, and asks
/// the database how it would find the matches: through the index of owner-keyed words
/// (FTS5 on SQLite, GIN on PostgreSQL), never a scan of the facts table. A short query
/// on PostgreSQL is ranked in the same statement, which reads the full rows last, by the
/// ranked ids; otherwise each hit's row is read once and the ranked rows by id in a
/// statement of their own.
async fn search_plan_reads_through_indexes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let store = Store::connect(&app.db.url, 2, Duration::from_secs(30)).await.unwrap();
    let (tenant, agent_id) = (TenantId::parse("acme".into()).unwrap(), AgentId::parse(AGENT.into()).unwrap());
    for user in 0..40 {
        let external_ref = ExternalRef::parse(format!("user-{user}")).unwrap();
        let owner = Owner::new(&tenant, &agent_id, &external_ref);
        let count = if user == 0 { 1_000 } else { 100 };
        let facts: Vec<NewFact> = (0..count)
            .map(|i| {
                let rare = if i % 250 == 0 { " zephyrine" } else { "" };
                new_fact(&format!("Fact {i} of user {user}: likes tea number {i}{rare}"))
            })
            .collect();
        store.import_facts(owner, &facts, Origin::Manual).await.unwrap();
    }
    store.refresh_statistics().await.unwrap();

    let external_ref = ExternalRef::parse("user-0".into()).unwrap();
    let owner = Owner::new(&tenant, &agent_id, &external_ref);
    let long = "does she like the zephyrine tea number fact of this user today with friends";
    for (words, rare) in [("zephyrine quartz", true), ("does she like the zephyrine tea", false), (long, false)] {
        let query = SearchQuery::parse(words).unwrap();
        // Fourteen runs: PostgreSQL may switch a connection from plans made for the bound
        // values to the generic plan the server runs from its sixth run on, and a
        // connection's first run also reads the catalogs. The last plan is checked, and on
        // PostgreSQL the pages read by the last four runs.
        let mut plans = Vec::new();
        for _ in 0..14 {
            plans.push(store.explain_search(owner, &query).await.unwrap());
        }
        let plan = plans.pop().unwrap();
        let text = plan.join("\n");
        match backend {
            // The words' postings for this owner, from the owner-keyed GIN index (when
            // they are common among the owner's facts, the planner may read those
            // through the owner's index instead); never the table.
            Backend::Postgres => {
                let by_owner =
                    plan.iter().any(|step| step.contains("Index Cond:") && step.contains("external_ref = 'user-0'"));
                let index = text.contains("Bitmap Index Scan on facts_words") || (words == long && by_owner);
                assert!(index, "the owner-keyed index: {text}");
                assert!(!text.contains("Seq Scan on facts"), "{text}");
                // Never compiled: at a million facts the plan's estimate passes
                // `jit_above_cost`, and compiling took 30 times as long as the search.
                assert!(text.contains("jit = 'off'"), "the connection runs without JIT: {text}");
                // The words' postings and their rows, where a scan of the table reads its
                // ~150 pages once per word.
                let pages = plans[plans.len() - 3..].iter().chain([&plan]).map(|plan| read_pages(plan)).max().unwrap();
                let bound = if rare { 40 } else { 200 };
                assert!(pages <= bound, "{words}: {pages} pages read, more than {bound}: {text}");
                // Whole terms: the index's answer is exact, no row's terms read again.
                assert!(!text.contains("Rows Removed by Index Recheck"), "{text}");
                let by_ranked_id =
                    plan.iter().any(|step| step.contains("Index Cond: (") && step.contains("(id = pairs.fact_id)"));
                assert_eq!(by_ranked_id, words != long, "the rows looked up by the ranked ids: {text}");
            }
            Backend::Sqlite => {
                assert!(text.contains("facts_fts VIRTUAL TABLE INDEX"), "the FTS5 index: {text}");
                let full_scan = plan.iter().any(|step| step.starts_with("SCAN facts") && !step.contains("VIRTUAL"));
                assert!(!full_scan, "{text}");
                // Each hit's row by its rowid, for the owner and currency tests (the
                // ranked rows are read by id after, in `facts_by_id`).
                let by_rowid = plan.iter().any(|step| step.starts_with("SEARCH facts USING INTEGER PRIMARY KEY"));
                assert!(by_rowid, "each hit's row by rowid: {text}");
            }
        }
        let hits = store.search_facts(owner, &query, FactFilter::CURRENT, 10).await.unwrap();
        let first = hits.iter().take_while(|h| h.fact.fact.ends_with("zephyrine")).count();
        assert_eq!(first, 4, "the rare word's four facts first: {hits:?}");
        assert_eq!(hits.len(), if rare { 4 } else { 10 }, "{hits:?}");
    }
    store.close().await;
}

/// Every remembered fact commits a segment to SQLite's full-text index, which FTS5 merges
/// only four at a time; the sweeper merges them into one, as a search reads one segment
/// faster than many. Search finds the same facts before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sweeper_merges_the_full_text_index_into_one_segment() {
    // Sweeps an hour apart: the first, at start, finds an empty index; the restart below
    // brings the next.
    let app = TestApp::spawn_with(Backend::Sqlite, &["--sweep-interval-secs", "3600"]).await;
    let token = agent("acme");
    app.enable_memory("acme", AGENT).await;
    for i in 0..30 {
        let text = if i % 10 == 0 { format!("Fact {i}: owns a kayak") } else { format!("Fact {i}: likes tea") };
        let (status, body) = app.post(&format!("{}/facts", user_path(USER)), &token, json!({"fact": text})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let before = segments(&app.db).await;
    assert!(before > 1, "thirty commits leave several segments: {before}");
    let found = search_texts(&app, &token, "kayak tea").await;
    assert_eq!(found.len(), 30, "{found:?}");
    assert!(found[..3].iter().all(|t| t.ends_with("kayak")), "the rare word first: {found:?}");

    let app = app.restart().await;
    let merged = eventually(Duration::from_secs(10), || async { (segments(&app.db).await == 1).then_some(()) }).await;
    assert!(merged.is_some(), "the sweep at start merges the {before} segments into one");
    assert_eq!(search_texts(&app, &token, "kayak tea").await, found, "the same facts, in the same order");
}

/// The shared buffers the root of a PostgreSQL `EXPLAIN (ANALYZE, BUFFERS)` read: its
/// first `Buffers:` line (every step's own are within it), hits and reads.
fn read_pages(plan: &[String]) -> u64 {
    let line = plan.iter().find(|step| step.trim_start().starts_with("Buffers: shared")).expect("a Buffers line");
    line.split_whitespace()
        .filter_map(|part| part.strip_prefix("hit=").or_else(|| part.strip_prefix("read=")))
        .map(|n| n.trim_end_matches(',').parse::<u64>().expect("a page count"))
        .sum()
}

/// The segments of SQLite's full-text index: each has its own rows in `facts_fts_idx`.
async fn segments(db: &TestDb) -> i64 {
    db.rows::<(i64,)>("SELECT count(DISTINCT segid) FROM facts_fts_idx").await[0].0
}

/// The texts of the facts a search for `q` finds (up to 50), in order.
async fn search_texts(app: &TestApp, token: &str, q: &str) -> Vec<String> {
    let (status, hits) = app.get(&format!("{}/facts/search?q={}&limit=50", user_path(USER), enc(q)), token).await;
    assert_eq!(status, StatusCode::OK, "{hits}");
    texts(&hits["items"]).into_iter().map(str::to_owned).collect()
}
