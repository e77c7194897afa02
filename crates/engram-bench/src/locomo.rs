//! `locomo`: evidence recall of facts search on LoCoMo, beside BM25 over the same facts.
//!
//! Each observation of a sample becomes a fact of that sample's user (through the store's
//! bulk import, on PostgreSQL or SQLite), remembered here with the dialogue ids it cites;
//! then an Engram is started on that database, in this process, and each question of
//! categories 1–5 goes to its facts search (`AppState::search_facts`, what
//! `GET …/facts/search` calls): full text, or with `--embedding-model-dir` full text fused
//! with the local model's vectors, once every fact is embedded. A question's recall at k is LoCoMo's `recall_acc`: the share of
//! its evidence ids that the first k facts cite (no evidence counts 1). BM25 (k1 = 1.2,
//! b = 0.75) ranks the same facts of the same user with the same words, in this process.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use clap::Args;
use engram::domain::owner::Owner;
use engram::domain::{
    fact::{FactInput, FactText, NewFact, Origin},
    ids::{AgentId, ExternalRef, TenantId},
    search_query::{STOP_WORDS, SearchQuery},
};
use engram::store::facts::FactFilter;
use rust_stemmers::{Algorithm, Stemmer};
use serde_json::{Value, json};

use crate::{Served, write_json};

const KS: [usize; 3] = [5, 10, 25];

#[derive(Args)]
pub struct LocomoArgs {
    /// LoCoMo's locomo10.json.
    #[arg(value_name = "PATH", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/locomo10.json"))]
    data: PathBuf,
    #[command(flatten)]
    served: Served,
}

/// One sample: its facts (text, cited dialogue ids) and its questions (text, category,
/// evidence ids).
struct Sample {
    user: String,
    facts: Vec<(String, Vec<String>)>,
    questions: Vec<(String, u64, Vec<String>)>,
}

/// Recall sums per category (and overall under 0): per k, and the question count.
#[derive(Default)]
struct Recall {
    questions: usize,
    sums: [f64; KS.len()],
}

pub async fn run(args: &LocomoArgs) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(&args.data).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.data.display()))?;
    let samples = parse(&serde_json::from_str(&text)?)?;
    let (store, scratch) = args.served.database.open().await?;
    let tenant = TenantId::parse("bench".into()).map_err(anyhow::Error::msg)?;
    let agent = AgentId::parse("locomo".into()).map_err(anyhow::Error::msg)?;
    let words = Words::new();
    // Per sample: its user, which dialogue ids each stored fact cites, and BM25 over them.
    let mut loaded = Vec::new();
    let mut fact_count = 0;
    for sample in &samples {
        let user = ExternalRef::parse(sample.user.clone()).map_err(anyhow::Error::msg)?;
        let owner = Owner::new(&tenant, &agent, &user);
        // Facts with the same text are one fact citing every observation's evidence.
        let mut cites: HashMap<String, HashSet<String>> = HashMap::new();
        let mut new_facts: Vec<NewFact> = Vec::new();
        for (fact, evidence) in &sample.facts {
            let stored = FactText::parse(fact).map_err(anyhow::Error::msg)?.text().to_owned();
            let entry = cites.entry(stored).or_default();
            if entry.is_empty() {
                new_facts.push(
                    FactInput { fact: fact.clone(), tags: None, score: None, ..Default::default() }
                        .validate(chrono::Utc::now())
                        .map_err(anyhow::Error::msg)?,
                );
            }
            entry.extend(evidence.iter().cloned());
        }
        fact_count += store.import_facts(owner, &new_facts, Origin::Manual).await?;
        let index = Bm25::new(&words, new_facts.iter().map(|f| f.text.text().to_owned()).collect());
        loaded.push((user, cites, index));
    }
    let backend = store.backend();
    store.close().await;

    let server = scratch.serve(&args.served.embeddings).await?;
    if args.served.embeddings.on() {
        let rate = server.backfilled(usize::try_from(fact_count)?).await?;
        println!("locomo: {fact_count} facts embedded, {rate:.1} facts/s");
    }
    let mut engram: BTreeMap<u64, Recall> = BTreeMap::new();
    let mut bm25: BTreeMap<u64, Recall> = BTreeMap::new();
    for (sample, (user, cites, index)) in samples.iter().zip(&loaded) {
        let owner = Owner::new(&tenant, &agent, user);
        for (question, category, evidence) in &sample.questions {
            let Ok(query) = SearchQuery::parse(question) else { continue };
            let hits =
                engram::service::recall::search(&server.state, owner.into(), &query, FactFilter::CURRENT, 25).await?;
            let found: Vec<&HashSet<String>> = hits.iter().filter_map(|h| cites.get(&h.fact.fact)).collect();
            let ranked: Vec<&HashSet<String>> =
                index.rank(&words, question, 25).into_iter().filter_map(|i| cites.get(&index.texts[i])).collect();
            for (tally, retrieved) in [(&mut engram, found), (&mut bm25, ranked)] {
                for key in [0, *category] {
                    let recall = tally.entry(key).or_default();
                    recall.questions += 1;
                    for (slot, k) in KS.iter().enumerate() {
                        recall.sums[slot] += recall_acc(evidence, &retrieved[..retrieved.len().min(*k)]);
                    }
                }
            }
        }
    }
    println!(
        "locomo: {} ({} samples, {fact_count} facts), backend {}; evidence recall (recall_acc) in %",
        args.data.display(),
        samples.len(),
        backend
    );
    println!("{:<10} {:>9} {:>22} {:>22}", "category", "questions", "search @5/@10/@25", "BM25 @5/@10/@25");
    let mut rows = Vec::new();
    for (category, recall) in &engram {
        let baseline = &bm25[category];
        let share = |r: &Recall, slot: usize| 100.0 * r.sums[slot] / r.questions as f64;
        let triple = |r: &Recall| format!("{:.1} / {:.1} / {:.1}", share(r, 0), share(r, 1), share(r, 2));
        let name = if *category == 0 { "overall".to_owned() } else { category.to_string() };
        println!("{name:<10} {:>9} {:>22} {:>22}", recall.questions, triple(recall), triple(baseline));
        rows.push(json!({
            "category": name,
            "questions": recall.questions,
            "search": KS.iter().enumerate().map(|(slot, k)| (format!("recall@{k}"), json!(share(recall, slot)))).collect::<serde_json::Map<_, _>>(),
            "bm25": KS.iter().enumerate().map(|(slot, k)| (format!("recall@{k}"), json!(share(baseline, slot)))).collect::<serde_json::Map<_, _>>(),
        }));
    }
    server.stop().await?;
    scratch.remove().await?;
    write_json(
        args.served.json.as_deref(),
        &json!({"command": "locomo", "backend": backend, "facts": fact_count, "embeddings": args.served.embeddings.on(), "rows": rows}),
    )
}

/// The share of `evidence` that the retrieved facts cite; 1 without evidence.
fn recall_acc(evidence: &[String], retrieved: &[&HashSet<String>]) -> f64 {
    if evidence.is_empty() {
        return 1.0;
    }
    let held = evidence.iter().filter(|id| retrieved.iter().any(|cited| cited.contains(*id))).count();
    held as f64 / evidence.len() as f64
}

/// Dialogue ids as LoCoMo writes them: `D1:3`, sometimes several in one string.
fn dialogue_ids(value: &Value) -> Vec<String> {
    let mut ids = Vec::new();
    let mut push = |text: &str| {
        ids.extend(
            text.split(|c: char| c == ';' || c == ',' || c.is_whitespace())
                .filter(|id| !id.is_empty())
                .map(str::to_owned),
        )
    };
    match value {
        Value::String(text) => push(text),
        Value::Array(items) => items.iter().filter_map(Value::as_str).for_each(push),
        _ => {}
    }
    ids
}

fn parse(data: &Value) -> anyhow::Result<Vec<Sample>> {
    let samples = data.as_array().ok_or_else(|| anyhow::anyhow!("expected a JSON array of samples"))?;
    let mut parsed = Vec::new();
    for sample in samples {
        let user = sample["sample_id"].as_str().ok_or_else(|| anyhow::anyhow!("a sample has no sample_id"))?;
        let mut facts = Vec::new();
        if let Some(sessions) = sample["observation"].as_object() {
            // Sessions in order (session_2 before session_10), so import order is time order.
            let mut sessions: Vec<(&String, &Value)> = sessions.iter().collect();
            sessions.sort_by_key(|(name, _)| name.split('_').nth(1).and_then(|n| n.parse::<u32>().ok()).unwrap_or(0));
            for (_, speakers) in sessions {
                for observations in speakers.as_object().into_iter().flat_map(|s| s.values()) {
                    for observation in observations.as_array().into_iter().flatten() {
                        if let Some(text) = observation[0].as_str() {
                            facts.push((text.to_owned(), dialogue_ids(&observation[1])));
                        }
                    }
                }
            }
        }
        let questions = sample["qa"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|qa| {
                let category = qa["category"].as_u64().filter(|c| (1..=5).contains(c))?;
                Some((qa["question"].as_str()?.to_owned(), category, dialogue_ids(&qa["evidence"])))
            })
            .collect();
        parsed.push(Sample { user: user.to_owned(), facts, questions });
    }
    Ok(parsed)
}

/// The words BM25 compares: the search's (letters and digits, lowercased, no stop
/// words), stemmed by the same Snowball English stemmer as PostgreSQL's.
struct Words(Stemmer);

impl Words {
    fn new() -> Words {
        Words(Stemmer::create(Algorithm::English))
    }

    fn of(&self, text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .filter(|w| !STOP_WORDS.contains(&w.as_str()))
            .map(|w| self.0.stem(&w).into_owned())
            .collect()
    }
}

/// Okapi BM25 over one user's facts.
struct Bm25 {
    texts: Vec<String>,
    docs: Vec<Vec<String>>,
    df: HashMap<String, usize>,
    average: f64,
}

impl Bm25 {
    fn new(words: &Words, texts: Vec<String>) -> Bm25 {
        let docs: Vec<Vec<String>> = texts.iter().map(|t| words.of(t)).collect();
        let mut df: HashMap<String, usize> = HashMap::new();
        for doc in &docs {
            for word in doc.iter().collect::<HashSet<_>>() {
                *df.entry(word.clone()).or_default() += 1;
            }
        }
        let average = docs.iter().map(Vec::len).sum::<usize>() as f64 / docs.len().max(1) as f64;
        Bm25 { texts, docs, df, average }
    }

    /// The indexes of the `k` best facts holding a query word, newest first on ties.
    fn rank(&self, words: &Words, query: &str, k: usize) -> Vec<usize> {
        let (k1, b) = (1.2, 0.75);
        let n = self.docs.len() as f64;
        let terms: HashSet<String> = words.of(query).into_iter().collect();
        let mut scored: Vec<(f64, usize)> = self
            .docs
            .iter()
            .enumerate()
            .filter_map(|(i, doc)| {
                let score: f64 = terms
                    .iter()
                    .map(|term| {
                        let tf = doc.iter().filter(|w| *w == term).count() as f64;
                        if tf == 0.0 {
                            return 0.0;
                        }
                        let df = self.df.get(term).copied().unwrap_or(0) as f64;
                        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                        idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * doc.len() as f64 / self.average))
                    })
                    .sum();
                (score > 0.0).then_some((score, i))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        scored.into_iter().take(k).map(|(_, i)| i).collect()
    }
}
