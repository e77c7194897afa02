//! `scale`: memory context and search latency as the facts grow, through the HTTP API of
//! an Engram started in this process (so the server's RSS is this process's; not
//! reported here).
//!
//! `--users` users with `--facts-per-user` facts each (10 000 facts by default; 10 000 ×
//! 100 for a million), plus two users holding 1 000 facts (the default cap) — one of
//! varied words, one whose facts all draw from 30 common words — all bulk-loaded through
//! the store's import. Then, per scenario, `--requests` GETs at
//! `--concurrency`: p50, p99, requests per second and errors.
//!
//! Recall is full text (`--embeddings off`) unless `--embedding-model-dir` names the
//! local model's files: then the server embeds every loaded fact first (the backfill,
//! timed: facts per second) and the scenarios with a query recall by meaning too, the
//! query's embedding included in their latency.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use engram::{
    domain::{
        fact::{FactInput, NewFact, Origin},
        ids::{AgentId, ExternalRef, TenantId},
        owner::Owner,
    },
    store::Store,
};
use serde_json::json;

use crate::drive::{Budget, Outcome, drive, succeeds};
use crate::{Served, Server, write_json};

pub const TENANT: &str = "bench";
pub const AGENT: &str = "bench-bot";
/// The user at the cap.
const CAPPED: &str = "capped-user";
const CAPPED_FACTS: usize = 1_000;
/// A user at the cap whose facts share their words: 8 words each from a vocabulary of
/// [`COMMON_VOCABULARY`], so every query word is in about a quarter of them (a person's
/// name, "likes", their city: what an agent sending a whole message as the query meets).
const COMMON: &str = "common-words-user";
const COMMON_VOCABULARY: usize = 30;
/// The distinct 20-word queries of the common-words scenario, sent in turn.
const COMMON_QUERIES: usize = 400;

#[derive(Args)]
pub struct ScaleArgs {
    /// Users besides the one at the cap.
    #[arg(long, default_value_t = 100)]
    users: usize,
    /// Facts of each of those users.
    #[arg(long, default_value_t = 100)]
    facts_per_user: usize,
    /// Requests per scenario (after 100 to warm up).
    #[arg(long, default_value_t = 2_000)]
    requests: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    #[command(flatten)]
    served: Served,
}

/// What one scenario asks: the path of request `i`.
pub type PathOf = Box<dyn Fn(usize) -> String + Send + Sync>;

/// Requests before each scenario's measured ones.
const WARM_UP: usize = 100;

pub async fn run(args: &ScaleArgs) -> anyhow::Result<()> {
    let (store, scratch) = args.served.database.open().await?;
    let started = Instant::now();
    load(&store, args).await?;
    let total = args.users * args.facts_per_user + 2 * CAPPED_FACTS;
    println!(
        "scale: {total} facts ({} users × {} + 2 × {CAPPED_FACTS}), backend {}, loaded in {:.1?}",
        args.users,
        args.facts_per_user,
        store.backend(),
        started.elapsed()
    );
    let backend = store.backend();
    store.close().await;

    let server = scratch.serve(&args.served.embeddings).await?;
    let base = server.base.clone();
    let (client, token) = with_memory(&server).await?;
    let backfill = if args.served.embeddings.on() { Some(server.backfilled(total).await?) } else { None };

    let users = args.users.max(1);
    let user = move |i: usize| format!("/api/agents/{AGENT}/users/user-{}", (i * 7919) % users);
    let capped = format!("/api/agents/{AGENT}/users/{CAPPED}");
    let long_query = encode(&twenty_word_query());
    let scenarios: Vec<(&str, PathOf)> = vec![
        ("memory context, no query", Box::new(move |i| format!("{}/memory-context", user(i)))),
        (
            "memory context, 3-word query",
            Box::new(move |i| format!("{}/memory-context?query={}", user(i), encode(&three_words(i)))),
        ),
        ("search, 3-word query", Box::new(move |i| format!("{}/facts/search?q={}", user(i), encode(&three_words(i))))),
        (
            "search, 1 000 facts, 20 words",
            Box::new({
                let (capped, q) = (capped.clone(), long_query.clone());
                move |_| format!("{capped}/facts/search?q={q}")
            }),
        ),
        (
            "memory context, 1 000 facts, 20 words",
            Box::new(move |_| format!("{capped}/memory-context?query={long_query}")),
        ),
        (
            "search, 1 000 facts, 20 common words",
            Box::new(move |i| {
                format!("/api/agents/{AGENT}/users/{COMMON}/facts/search?q={}", encode(&common_query(i)))
            }),
        ),
    ];
    println!(
        "\n{:<40} {:>9} {:>9} {:>9} {:>7}   ({} requests each, concurrency {})",
        "scenario", "p50 ms", "p99 ms", "req/s", "errors", args.requests, args.concurrency
    );
    let mut rows = Vec::new();
    for (label, path_of) in scenarios {
        let path_of: Arc<PathOf> = Arc::new(path_of);
        get_all(&client, &base, &token, path_of.clone(), WARM_UP, args.concurrency).await;
        let outcome = get_all(&client, &base, &token, path_of, args.requests, args.concurrency).await;
        let (p50, p99, rate) = (outcome.percentile_ms(50), outcome.percentile_ms(99), outcome.rate());
        println!("{label:<40} {p50:>9.2} {p99:>9.2} {rate:>9.0} {:>7}", outcome.errors);
        rows.push(
            json!({"scenario": label, "p50_ms": p50, "p99_ms": p99, "requests_per_s": rate, "errors": outcome.errors}),
        );
    }
    if let Some(rate) = backfill {
        println!("embedding backfill: {rate:.1} facts/s (from the server's start, model load included)");
    }
    server.stop().await?;
    scratch.remove().await?;
    write_json(
        args.served.json.as_deref(),
        &json!({
            "command": "scale", "backend": backend, "facts": total, "users": args.users,
            "facts_per_user": args.facts_per_user, "concurrency": args.concurrency, "rows": rows,
            "embeddings": args.served.embeddings.on(), "backfill_facts_per_s": backfill,
        }),
    )
}

/// A client and an admin token of the bench's tenant, once memory is enabled for its
/// agent on `server`.
pub(crate) async fn with_memory(server: &Server) -> anyhow::Result<(reqwest::Client, Arc<str>)> {
    let token: Arc<str> =
        server.state.guard.authenticator.sign(TENANT, "admin", None, None, Duration::from_secs(3600))?.into();
    let client = reqwest::Client::new();
    let status = client
        .put(format!("{}/api/agents-config/{AGENT}", server.base))
        .bearer_auth(&*token)
        .json(&json!({"memory_enabled": true}))
        .send()
        .await?
        .status();
    anyhow::ensure!(status.is_success(), "enabling memory failed: {status}");
    Ok((client, token))
}

/// Sends `count` GETs over `concurrency` tasks.
pub async fn get_all(
    client: &reqwest::Client,
    base: &str,
    token: &Arc<str>,
    path_of: Arc<PathOf>,
    count: usize,
    concurrency: usize,
) -> Outcome {
    let (client, base, token) = (client.clone(), base.to_owned(), token.clone());
    drive(concurrency, Budget { count: Some(count), until: None }, move |i| {
        succeeds(client.get(format!("{base}{}", path_of(i))).bearer_auth(&*token))
    })
    .await
}

/// Bulk-loads every user's facts through the store, then refreshes the planner's
/// statistics.
async fn load(store: &Store, args: &ScaleArgs) -> anyhow::Result<()> {
    let tenant = TenantId::parse(TENANT.into()).map_err(anyhow::Error::msg)?;
    let agent = AgentId::parse(AGENT.into()).map_err(anyhow::Error::msg)?;
    let mut owners: Vec<(String, usize)> =
        (0..args.users).map(|u| (format!("user-{u}"), args.facts_per_user)).collect();
    owners.push((CAPPED.to_owned(), CAPPED_FACTS));
    let common = (owners.len(), COMMON.to_owned());
    for (seed, (name, count)) in owners.into_iter().enumerate() {
        let texts = (0..count).map(|i| fact_text(seed, i));
        import(store, &tenant, &agent, name, texts).await?;
    }
    let (seed, name) = common;
    import(store, &tenant, &agent, name, (0..CAPPED_FACTS).map(|i| common_fact(seed, i))).await?;
    store.refresh_statistics().await?;
    Ok(())
}

/// Imports the facts `texts` of user `name`.
pub async fn import(
    store: &Store,
    tenant: &TenantId,
    agent: &AgentId,
    name: String,
    texts: impl Iterator<Item = String>,
) -> anyhow::Result<()> {
    let user = ExternalRef::parse(name).map_err(anyhow::Error::msg)?;
    let facts = texts
        .map(|fact| {
            FactInput { fact, tags: None, score: None, ..Default::default() }
                .validate(chrono::Utc::now())
                .map_err(anyhow::Error::msg)
        })
        .collect::<anyhow::Result<Vec<NewFact>>>()?;
    // A PostgreSQL transaction records a bounded number of events, one per fact added: a
    // person of more facts is imported in several.
    for chunk in facts.chunks(engram::store::events::PER_TRANSACTION / 2) {
        store.import_facts(Owner::new(tenant, agent, &user), chunk, Origin::Manual).await?;
    }
    Ok(())
}

/// Fact `i` of the common-words user: 8 words of the first [`COMMON_VOCABULARY`], drawn
/// evenly (the number keeps each fact distinct).
pub fn common_fact(seed: usize, i: usize) -> String {
    let words: Vec<&str> = (0..8).map(|k| WORDS[uniform(seed, i, 10 + k, COMMON_VOCABULARY)]).collect();
    format!("{} {i}", words.join(" "))
}

/// Query `i` (of [`COMMON_QUERIES`]) to the common-words user: 20 words of the same
/// vocabulary.
pub fn common_query(i: usize) -> String {
    let i = i % COMMON_QUERIES;
    (0..20).map(|k| WORDS[uniform(usize::MAX, i, 100 + k, COMMON_VOCABULARY)]).collect::<Vec<_>>().join(" ")
}

/// Words of the facts and queries: a few common, most rare (picked with a skew).
const WORDS: [&str; 48] = [
    "tea",
    "coffee",
    "dogs",
    "cats",
    "running",
    "painting",
    "guitar",
    "piano",
    "hiking",
    "Lisbon",
    "Paris",
    "Berlin",
    "nurse",
    "teacher",
    "engineer",
    "garden",
    "football",
    "tennis",
    "chess",
    "novels",
    "poetry",
    "jazz",
    "cooking",
    "baking",
    "sushi",
    "pasta",
    "cycling",
    "swimming",
    "yoga",
    "camping",
    "photography",
    "astronomy",
    "pottery",
    "knitting",
    "surfing",
    "climbing",
    "violin",
    "opera",
    "ballet",
    "museums",
    "volunteering",
    "gardening",
    "sailing",
    "skiing",
    "fishing",
    "birdwatching",
    "calligraphy",
    "origami",
];

const TEMPLATES: [&str; 6] = [
    "Likes {a} and {b}",
    "Went to a {a} class with a friend who loves {b}",
    "Has been into {a} since childhood",
    "Wants to try {a} next summer, maybe with {b}",
    "Talked about {a} for an hour",
    "Prefers {a} over {b} on weekends",
];

/// A fixed pseudo-random sequence, so every run loads the same facts.
fn pick(seed: usize, i: usize, salt: usize, n: usize) -> usize {
    // Squared: low indexes (common words) come up far more often than high ones.
    let unit = (mix(seed, i, salt) % 10_000) as f64 / 10_000.0;
    ((unit * unit) * n as f64) as usize % n
}

/// A well-mixed number from three.
fn mix(seed: usize, i: usize, salt: usize) -> u64 {
    let mut x = (seed as u64).wrapping_mul(6_364_136_223_846_793_005)
        ^ (i as u64).wrapping_mul(1_442_695_040_888_963_407)
        ^ salt as u64;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x
}

/// As [`pick`], without the skew: every one of the `n` equally likely.
fn uniform(seed: usize, i: usize, salt: usize, n: usize) -> usize {
    (mix(seed, i, salt) % n as u64) as usize
}

pub fn fact_text(seed: usize, i: usize) -> String {
    TEMPLATES[pick(seed, i, 1, TEMPLATES.len())]
        .replace("{a}", WORDS[pick(seed, i, 2, WORDS.len())])
        .replace("{b}", WORDS[pick(seed, i, 3, WORDS.len())])
        + &format!(" (note {i})")
}

pub fn three_words(i: usize) -> String {
    format!("does she like {} or {} and {}", WORDS[i % 7], WORDS[(i * 13) % WORDS.len()], WORDS[(i * 31) % WORDS.len()])
}

/// A long question of 20 content words, common and rare.
fn twenty_word_query() -> String {
    let words: Vec<&str> = (0..20).map(|i| WORDS[(i * 5) % WORDS.len()]).collect();
    format!("what do you remember about {}?", words.join(" "))
}

pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_words_facts_and_queries_share_one_small_vocabulary() {
        let vocabulary = &WORDS[..COMMON_VOCABULARY];
        let words_of = |text: &str| -> Vec<String> {
            text.split(' ').filter(|w| !w.chars().all(|c| c.is_ascii_digit())).map(str::to_owned).collect()
        };
        let facts: Vec<String> = (0..CAPPED_FACTS).map(|i| common_fact(3, i)).collect();
        for fact in &facts {
            let words = words_of(fact);
            assert_eq!(words.len(), 8, "{fact}");
            assert!(words.iter().all(|w| vocabulary.contains(&w.as_str())), "{fact}");
        }
        assert_eq!(facts.iter().collect::<std::collections::HashSet<_>>().len(), CAPPED_FACTS, "all distinct");
        // Every word of the vocabulary is common: in roughly a quarter of the facts.
        for word in vocabulary {
            let share = facts.iter().filter(|f| words_of(f).iter().any(|w| w == word)).count() as f64 / 1000.0;
            assert!((0.15..0.35).contains(&share), "{word}: {share}");
        }
        let query = common_query(7);
        assert_eq!(words_of(&query).len(), 20);
        assert!(words_of(&query).iter().all(|w| vocabulary.contains(&w.as_str())));
        assert_eq!(common_query(7 + COMMON_QUERIES), query);
        assert_ne!(common_query(8), query);
    }
}
