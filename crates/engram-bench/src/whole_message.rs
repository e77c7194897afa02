//! `whole-message`: search with a user's whole message as the query (what the AI SDK
//! middleware sends on every call), over one person whose facts share their everyday
//! words: each fact 8 words of a 30-word vocabulary and a number of its own, each query 20
//! words of the same vocabulary (most query words then hold a quarter of the facts). One
//! person per size (`--facts`), searched at each `--clients`, on SQLite and, with
//! `--database-url`, on PostgreSQL in the same run, printed side by side.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use engram::domain::ids::{AgentId, TenantId};
use serde_json::json;

use crate::scale::{AGENT, PathOf, TENANT, common_fact, common_query, encode, get_all, import, with_memory};
use crate::{Database, Embeddings, write_json};

/// Searches before each row's measured ones.
const WARM_UP: usize = 100;

#[derive(Args)]
pub struct WholeMessageArgs {
    /// Facts of each person searched (one person per number).
    #[arg(long, value_delimiter = ',', default_value = "1000,5000")]
    facts: Vec<usize>,
    /// Searches in flight at once, one row per number.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    clients: Vec<usize>,
    /// Searches per row (after 100 to warm up).
    #[arg(long, default_value_t = 1_000)]
    requests: usize,
    /// A PostgreSQL server: measured there too, beside SQLite (a database of the bench's
    /// own, dropped at the end).
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// p50 and p99 in ms, by (facts, clients).
type Rows = Vec<((usize, usize), (f64, f64))>;

pub async fn run(args: &WholeMessageArgs) -> anyhow::Result<()> {
    let mut backends = vec![("SQLite", Database { database_url: None })];
    if let Some(url) = &args.database_url {
        backends.insert(0, ("PostgreSQL", Database { database_url: Some(url.clone()) }));
    }
    let mut measured: Vec<(&str, Rows)> = Vec::new();
    for (name, database) in &backends {
        measured.push((name, measure(args, database).await?));
    }
    println!(
        "\nwhole-message search: 20 words of 30 over one person's facts of 8 of them, limit 10, {} searches a row",
        args.requests
    );
    let header: Vec<String> = measured.iter().map(|(name, _)| format!("{name} p50 / p99 ms")).collect();
    let ratio = measured.len() == 2;
    print!("{:>7} {:>8}", "facts", "clients");
    for column in &header {
        print!(" {column:>26}");
    }
    println!("{}", if ratio { "   PostgreSQL ÷ SQLite (p50)" } else { "" });
    let mut json_rows = Vec::new();
    for (row, &(key, _)) in measured[0].1.iter().enumerate() {
        print!("{:>7} {:>8}", key.0, key.1);
        let mut cells = serde_json::Map::new();
        for (name, rows) in &measured {
            let (p50, p99) = rows[row].1;
            print!(" {:>26}", format!("{p50:.2} / {p99:.2}"));
            cells.insert((*name).to_owned(), json!({"p50_ms": p50, "p99_ms": p99}));
        }
        if ratio {
            print!("   {:.2}×", measured[0].1[row].1.0 / measured[1].1[row].1.0.max(1e-9));
        }
        println!();
        json_rows.push(json!({"facts": key.0, "clients": key.1, "backends": cells}));
    }
    for (name, rows) in &measured {
        for &clients in &args.clients {
            let p50 = |facts: Option<&usize>| {
                rows.iter().find(|(key, _)| Some(&key.0) == facts && key.1 == clients).map(|(_, (p50, _))| *p50)
            };
            if let (Some(first), Some(last)) = (p50(args.facts.first()), p50(args.facts.last()))
                && args.facts.len() > 1
            {
                println!(
                    "{name}, {clients} client(s): p50 {:.2}× from {} to {} facts",
                    last / first.max(1e-9),
                    args.facts[0],
                    args.facts[args.facts.len() - 1]
                );
            }
        }
    }
    write_json(args.json.as_deref(), &json!({"command": "whole-message", "requests": args.requests, "rows": json_rows}))
}

/// Loads one person per size on a fresh database of `database`, starts an Engram on it
/// and measures each (facts, clients) row.
async fn measure(args: &WholeMessageArgs, database: &Database) -> anyhow::Result<Rows> {
    let (store, scratch) = database.open().await?;
    let tenant = TenantId::parse(TENANT.into()).map_err(anyhow::Error::msg)?;
    let agent = AgentId::parse(AGENT.into()).map_err(anyhow::Error::msg)?;
    for (seed, &count) in args.facts.iter().enumerate() {
        import(&store, &tenant, &agent, person(count), (0..count).map(|i| common_fact(seed, i))).await?;
    }
    store.refresh_statistics().await?;
    println!("whole-message: {:?} facts loaded on {}", args.facts, store.backend());
    store.close().await;

    let server = scratch.serve(&Embeddings::default()).await?;
    let base = server.base.clone();
    let (client, token) = with_memory(&server).await?;
    let mut rows = Vec::new();
    for &count in &args.facts {
        for &clients in &args.clients {
            let path = format!("/api/agents/{AGENT}/users/{}/facts/search", person(count));
            let path_of: Arc<PathOf> =
                Arc::new(Box::new(move |i| format!("{path}?q={}&limit=10", encode(&common_query(i)))));
            get_all(&client, &base, &token, path_of.clone(), WARM_UP, clients).await;
            let outcome = get_all(&client, &base, &token, path_of, args.requests, clients).await;
            anyhow::ensure!(outcome.errors == 0, "{} of the searches failed", outcome.errors);
            rows.push(((count, clients), (outcome.percentile_ms(50), outcome.percentile_ms(99))));
        }
    }
    server.stop().await?;
    scratch.remove().await?;
    Ok(rows)
}

/// The person holding `count` facts.
fn person(count: usize) -> String {
    format!("person-{count}")
}
