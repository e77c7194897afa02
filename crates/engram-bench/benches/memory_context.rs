//! Memory-context benchmark on PostgreSQL: the real app over HTTP with 100 000 facts
//! (1 000 users × 100 facts, one agent), measuring memory context without and with a
//! query and search, beside two baselines measured in the same run (`GET /healthz`,
//! which touches no database, and a plain `GET …/facts?limit=10` list).
//!
//! `cargo bench -p engram-bench --bench memory_context`, with `TEST_DATABASE_URL` or `DATABASE_URL`
//! pointing at a PostgreSQL server; a fresh database is created and dropped.

use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant},
};

use clap::Parser;
use engram::{
    app::App,
    config::ServeConfig,
    domain::{
        fact::{FactInput, Origin},
        fact_text,
        ids::{AgentId, ExternalRef, TenantId},
        owner::Owner,
    },
    store::Store,
};
use sqlx::Connection;
use uuid::Uuid;

const USERS: usize = 1_000;
const FACTS_PER_USER: usize = 100;
const AGENT: &str = "bench-bot";
const TENANT: &str = "bench";
const REQUESTS: usize = 2_000;
const CONCURRENCY: [usize; 2] = [1, 8];

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: ServeConfig,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let admin_url = std::env::var("TEST_DATABASE_URL")
        .or_else(|_| std::env::var("DATABASE_URL"))
        .ok()
        .filter(|u| u.starts_with("postgres"))
        .ok_or_else(|| anyhow::anyhow!("set TEST_DATABASE_URL (or DATABASE_URL) to a PostgreSQL server"))?;
    let name = format!("engram_bench_{}", Uuid::now_v7().simple());
    let mut admin = sqlx::PgConnection::connect(&admin_url).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut admin).await?;
    let result = run(&database_url(&admin_url, &name)).await;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)"))).execute(&mut admin).await?;
    result
}

/// `url` with its database name replaced by `name`.
fn database_url(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let base = base[after_scheme..].find('/').map_or(base, |slash| &base[..after_scheme + slash]);
    query.map_or_else(|| format!("{base}/{name}"), |q| format!("{base}/{name}?{q}"))
}

async fn run(url: &str) -> anyhow::Result<()> {
    let data_dir = std::env::temp_dir().join(format!("engram-bench-{}", Uuid::now_v7().simple()));
    let args = [
        "engram",
        "--database-url",
        url,
        "--data-dir",
        &data_dir.display().to_string(),
        "--bind",
        "127.0.0.1:0",
        "--jwt-secret",
        "bench-secret-bench-secret-bench-secret",
        // The full-text path, as this bench has always measured it, and no model download:
        // recall by meaning is measured by `engram-bench scale`.
        "--embeddings",
        "off",
    ]
    .map(str::to_owned);
    let app = App::build(Args::try_parse_from(args)?.config).await?;
    let base = format!("http://{}", app.local_addr()?);
    let token = app.state().guard.authenticator.sign(TENANT, "admin", None, None, Duration::from_secs(3600))?;
    let store = app.state().store.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));

    let started = Instant::now();
    load_facts(&store).await?;
    println!("loaded {} facts in {:.1?}", USERS * FACTS_PER_USER, started.elapsed());

    let client = reqwest::Client::new();
    let status = client
        .put(format!("{base}/api/agents-config/{AGENT}"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"memory_enabled": true}))
        .send()
        .await?
        .status();
    anyhow::ensure!(status.is_success(), "enabling memory failed: {status}");

    let scenarios: [(&str, UrlOf); 5] = [
        ("baseline: GET /healthz", |base, _| format!("{base}/healthz")),
        ("baseline: GET facts?limit=10", |base, i| format!("{}/facts?limit=10", user_path(base, i))),
        ("memory-context", |base, i| format!("{}/memory-context", user_path(base, i))),
        ("memory-context ?query=", |base, i| {
            format!("{}/memory-context?query=what%20does%20she%20drink%2C%20tea%3F", user_path(base, i))
        }),
        ("search ?q=tea coffee", |base, i| format!("{}/facts/search?q=tea%20coffee", user_path(base, i))),
    ];
    println!(
        "\n{:<30} {:>5} {:>9} {:>9} {:>9}   ({REQUESTS} requests each, after 200 warm-up)",
        "scenario", "conc", "p50 ms", "p99 ms", "req/s"
    );
    let target = Target { client, base: base.into(), token: token.into() };
    for (label, url_of) in scenarios {
        target.measure(url_of, 200, 1).await?;
        for concurrency in CONCURRENCY {
            let (mut latencies, elapsed) = target.measure(url_of, REQUESTS, concurrency).await?;
            latencies.sort_unstable();
            let percentile = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
            println!(
                "{label:<30} {concurrency:>5} {:>9.3} {:>9.3} {:>9.0}",
                percentile(50).as_secs_f64() * 1e3,
                percentile(99).as_secs_f64() * 1e3,
                REQUESTS as f64 / elapsed.as_secs_f64()
            );
        }
    }

    let _ = stop.send(());
    server.await??;
    let _ = std::fs::remove_dir_all(&data_dir);
    Ok(())
}

/// The URL of request number `i` of a scenario, given the server's base URL.
type UrlOf = fn(&str, usize) -> String;

/// Spreads requests over the users, so that no single user's rows stay hot.
fn user_path(base: &str, i: usize) -> String {
    format!("{base}/api/agents/{AGENT}/users/user-{}", (i * 7919) % USERS)
}

struct Target {
    client: reqwest::Client,
    base: Arc<str>,
    token: Arc<str>,
}

impl Target {
    /// Sends `count` GETs spread over `concurrency` workers; returns each latency and
    /// the wall time. Any non-200 answer stops the benchmark: a fast error is no result.
    async fn measure(
        &self,
        url_of: UrlOf,
        count: usize,
        concurrency: usize,
    ) -> anyhow::Result<(Vec<Duration>, Duration)> {
        let started = Instant::now();
        let mut workers = tokio::task::JoinSet::new();
        for worker in 0..concurrency {
            let (client, base, token) = (self.client.clone(), self.base.clone(), self.token.clone());
            workers.spawn(async move {
                let mut latencies = Vec::with_capacity(count / concurrency + 1);
                for i in (worker..count).step_by(concurrency) {
                    let url = url_of(&base, i);
                    let sent = Instant::now();
                    let response = client.get(&url).bearer_auth(&*token).send().await?;
                    let status = response.status();
                    let body = response.bytes().await?;
                    latencies.push(sent.elapsed());
                    anyhow::ensure!(status.is_success(), "{url}: {status} {}", String::from_utf8_lossy(&body));
                }
                anyhow::Ok(latencies)
            });
        }
        let mut all = Vec::with_capacity(count);
        for latencies in workers.join_all().await {
            all.extend(latencies?);
        }
        Ok((all, started.elapsed()))
    }
}

/// Facts with a realistic spread of words, so that search has both common and rare
/// terms: a template and slot words picked by a fixed pseudo-random sequence.
fn fact_texts(user: usize) -> Vec<String> {
    const TEMPLATES: [&str; 8] = [
        "Likes {a} and {b}",
        "Prefers {a} over {b}",
        "Is allergic to {a}",
        "Lives near {a} with a {b}",
        "Works with {a} every {b}",
        "Drinks {a} in the morning, never {b}",
        "Has a pet {a} called {b}",
        "Wants to learn about {a} and {b}",
    ];
    const WORDS: [&str; 40] = [
        "tea",
        "coffee",
        "peanuts",
        "cats",
        "dogs",
        "jazz",
        "chess",
        "football",
        "lisbon",
        "paris",
        "python",
        "rust",
        "gardening",
        "cycling",
        "sushi",
        "pasta",
        "wine",
        "juice",
        "mountains",
        "beaches",
        "novels",
        "podcasts",
        "painting",
        "running",
        "yoga",
        "baking",
        "history",
        "astronomy",
        "guitar",
        "piano",
        "tennis",
        "hiking",
        "photography",
        "cheese",
        "chocolate",
        "milk",
        "shellfish",
        "pollen",
        "monday",
        "weekend",
    ];
    let mut state = (user as u64).wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    let mut next = move |n: usize| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) % n as u64) as usize
    };
    let mut seen = HashSet::new();
    let mut facts = Vec::with_capacity(FACTS_PER_USER);
    while facts.len() < FACTS_PER_USER {
        let text = TEMPLATES[next(TEMPLATES.len())]
            .replace("{a}", WORDS[next(WORDS.len())])
            .replace("{b}", WORDS[next(WORDS.len())]);
        if seen.insert(fact_text::normalize(&text)) {
            facts.push(text);
        }
    }
    facts
}

/// Loads every fact through the store's bulk import (the HTTP path would only
/// measure the load itself), then refreshes the planner's statistics.
async fn load_facts(store: &Store) -> anyhow::Result<()> {
    let tenant = TenantId::parse(TENANT.into()).map_err(anyhow::Error::msg)?;
    let agent = AgentId::parse(AGENT.into()).map_err(anyhow::Error::msg)?;
    for user in 0..USERS {
        let external_ref = ExternalRef::parse(format!("user-{user}")).map_err(anyhow::Error::msg)?;
        let facts = fact_texts(user)
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                let score = Some(((user + i) % 10) as f64 / 10.0);
                FactInput { fact: text, tags: Some(vec!["bench".into()]), score, ..Default::default() }
                    .validate(chrono::Utc::now())
                    .map_err(anyhow::Error::msg)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let owner = Owner::new(&tenant, &agent, &external_ref);
        store.import_facts(owner, &facts, Origin::Manual).await?;
    }
    store.refresh_statistics().await?;
    Ok(())
}
