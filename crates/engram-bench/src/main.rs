//! `engram-bench`: evaluations of Engram's components against the public data sets under
//! `../shared/data`, and its speed as data grows, one subcommand each.
//!
//! `load` (module `load`) drives each hot operation through the API beside the same
//! database work done directly; `scale` (module `scale`) measures memory context and
//! search as the number of facts grows; `locomo` (module `locomo`) measures the evidence
//! recall of facts search on LoCoMo beside BM25; `whole-message` (module `whole_message`)
//! measures search with a whole message as the query over facts sharing their words.
//! Module `drive` holds what the speed benchmarks share.
//!
//! `extraction` measures the built-in fact extractor on Synthetic-Persona-Chat: for each
//! speaker of each conversation, the facts extracted from that speaker's turns are matched
//! one-to-one against the speaker's persona lines, and compared with a naive baseline that
//! keeps every first-person sentence.

mod drive;
mod load;
mod locomo;
mod msc;
mod scale;
mod train;
mod whole_message;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use engram::config::ServeConfig;
use engram::domain::{message::Role, search_query::STOP_WORDS};
use engram::extract::{ExtractionRequest, Turn, builtin};
use engram::store::Store;
use rust_stemmers::{Algorithm, Stemmer};

/// Default confidence threshold of an agent; facts below it are never stored.
const MIN_CONFIDENCE: f64 = 0.7;

/// A fact and a persona line are the same statement when their content words overlap at
/// least this much.
const MATCH_F1: f64 = 0.5;

/// The data sets live beside the repository, shared by every checkout.
const SPC_VALID: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/spc-valid.csv");

#[derive(Parser)]
#[command(name = "engram-bench", about = "Evaluations of Engram's components and of its speed")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Precision, recall and F1 of the built-in fact extractor against the persona lines of
    /// Synthetic-Persona-Chat, beside a baseline that keeps every first-person sentence.
    Extraction(ExtractionArgs),
    /// Requests per second, latency percentiles, errors and the server's peak RSS of each
    /// hot operation at a concurrency, beside the same database work done directly.
    Load(load::LoadArgs),
    /// Memory context and search latency with many facts stored and with one user at the
    /// cap, through the HTTP API of an Engram started in this process.
    Scale(scale::ScaleArgs),
    /// Search with a whole message as the query over one person whose facts share their
    /// words, at 1 000 and 5 000 facts and 1 and 4 clients, SQLite beside PostgreSQL.
    WholeMessage(whole_message::WholeMessageArgs),
    /// Evidence recall at 5, 10 and 25 of facts search on LoCoMo, beside BM25 over the same
    /// facts.
    Locomo(locomo::LocomoArgs),
    /// Trains the built-in extractor's clause model on the even half of a Multi-Session
    /// Chat split and writes its weights file; reports both halves.
    TrainExtraction(train::TrainArgs),
}

/// Where a benchmark's data lives: a fresh database on the PostgreSQL server given, or a
/// SQLite file in a fresh temporary directory; removed again by [`Scratch::remove`].
#[derive(Args)]
struct Database {
    /// A PostgreSQL server (any database on it): the benchmark creates a database of its
    /// own there and drops it at the end. Without it: SQLite in a temporary directory.
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
}

/// The flags of a benchmark that loads facts and serves them: its database, whether it
/// recalls by meaning, and where its results are written too.
#[derive(Args)]
struct Served {
    #[command(flatten)]
    database: Database,
    #[command(flatten)]
    embeddings: Embeddings,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Whether the Engram a benchmark starts recalls by meaning.
#[derive(Args, Default)]
struct Embeddings {
    /// Run with local embeddings, all-MiniLM-L6-v2's files read from DIR (never fetched);
    /// without it, embeddings are off and recall is full text.
    #[arg(long, value_name = "DIR")]
    embedding_model_dir: Option<PathBuf>,
}

impl Embeddings {
    fn on(&self) -> bool {
        self.embedding_model_dir.is_some()
    }

    /// The server's embedding settings.
    fn serve_args(&self) -> Vec<String> {
        match &self.embedding_model_dir {
            Some(dir) => {
                ["--embeddings", "local", "--embedding-index-url", "http://127.0.0.1:9/", "--embedding-model-dir"]
                    .map(str::to_owned)
                    .into_iter()
                    .chain([dir.display().to_string()])
                    .collect()
            }
            None => ["--embeddings", "off"].map(str::to_owned).to_vec(),
        }
    }
}

/// A benchmark's database, with what it takes to remove it.
struct Scratch {
    url: String,
    dir: PathBuf,
    /// The server's URL and the database's name, on PostgreSQL.
    postgres: Option<(String, String)>,
}

/// How long one benchmark statement may run.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(120);

impl Database {
    async fn create(&self) -> anyhow::Result<Scratch> {
        let id = uuid::Uuid::now_v7().simple().to_string();
        let dir = std::env::temp_dir().join(format!("engram-bench-{id}"));
        std::fs::create_dir_all(&dir)?;
        let Some(server) = &self.database_url else {
            return Ok(Scratch { url: format!("sqlite://{}/engram.db", dir.display()), dir, postgres: None });
        };
        let name = format!("engram_bench_{id}");
        let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(server).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut admin).await?;
        let (base, query) = server.split_once('?').map_or((server.as_str(), None), |(b, q)| (b, Some(q)));
        let after_scheme = base.find("://").map_or(0, |i| i + 3);
        let root = base[after_scheme..].find('/').map_or(base.len(), |i| after_scheme + i);
        let url = format!("{}/{name}{}", &base[..root], query.map(|q| format!("?{q}")).unwrap_or_default());
        Ok(Scratch { url, dir, postgres: Some((server.clone(), name)) })
    }

    /// A fresh, migrated store.
    async fn open(&self) -> anyhow::Result<(Store, Scratch)> {
        let scratch = self.create().await?;
        let store = Store::connect(&scratch.url, 8, STATEMENT_TIMEOUT).await?;
        store.migrate().await?;
        Ok((store, scratch))
    }
}

/// The JWT secret of an Engram a benchmark starts, which signs the benchmark's tokens.
const BENCH_SECRET: &str = "bench-secret-bench-secret-bench-secret";

/// `engram serve`'s settings (besides the defaults), parsed as the server parses them.
#[derive(Parser)]
struct Serve {
    #[command(flatten)]
    config: ServeConfig,
}

fn serve_config(args: &[String]) -> anyhow::Result<ServeConfig> {
    let args = std::iter::once("engram").chain(args.iter().map(String::as_str));
    Ok(Serve::try_parse_from(args)?.config)
}

impl Scratch {
    /// The settings of an Engram on this database, listening on `bind`.
    fn serve_args(&self, bind: &str) -> Vec<String> {
        let dir = self.dir.display().to_string();
        ["--database-url", &self.url, "--data-dir", &dir, "--bind", bind, "--jwt-secret", BENCH_SECRET]
            .map(str::to_owned)
            .to_vec()
    }

    async fn remove(self) -> anyhow::Result<()> {
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some((server, name)) = self.postgres {
            let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&server).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)"))).execute(&mut admin).await?;
        }
        Ok(())
    }
}

/// An Engram started in this process on a benchmark's database, on a free port.
struct Server {
    base: String,
    state: engram::service::AppState,
    /// When it was built: the backfill's rate counts from here, model load included.
    started: Instant,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Scratch {
    /// Starts an Engram on this database, with `embeddings`.
    async fn serve(&self, embeddings: &Embeddings) -> anyhow::Result<Server> {
        self.serve_with(embeddings, &[]).await
    }

    /// Starts an Engram on this database, with `embeddings` and the further settings `extra`.
    async fn serve_with(&self, embeddings: &Embeddings, extra: &[String]) -> anyhow::Result<Server> {
        let config = serve_config(&[self.serve_args("127.0.0.1:0"), embeddings.serve_args(), extra.to_vec()].concat())?;
        let started = Instant::now();
        let app = engram::app::App::build(config).await?;
        let base = format!("http://{}", app.local_addr()?);
        let state = app.state().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(app.run(async move {
            let _ = stopped.await;
        }));
        Ok(Server { base, state, started, stop, task })
    }
}

impl Server {
    /// Waits until the server has embedded `total` facts (its `engram_facts_embedded_total`
    /// counter, read every 100 ms); returns facts per second since it was started.
    async fn backfilled(&self, total: usize) -> anyhow::Result<f64> {
        let client = reqwest::Client::new();
        let deadline = self.started + Duration::from_secs(3600);
        loop {
            let metrics = client.get(format!("{}/metrics", self.base)).send().await?.text().await?;
            let embedded = metrics
                .lines()
                .find_map(|line| line.strip_prefix("engram_facts_embedded_total "))
                .and_then(|n| n.trim().parse::<f64>().ok())
                .unwrap_or(0.0);
            if embedded >= total as f64 {
                return Ok(embedded / self.started.elapsed().as_secs_f64());
            }
            anyhow::ensure!(Instant::now() < deadline, "the backfill did not finish within an hour ({embedded} facts)");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Shuts the server down and waits for it.
    async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.task.await?
    }
}

/// Writes a command's results to `--json FILE`, when given.
fn write_json(path: Option<&Path>, value: &serde_json::Value) -> anyhow::Result<()> {
    if let Some(path) = path {
        std::fs::write(path, serde_json::to_string_pretty(value)?)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Runs an async command on a runtime of its own.
fn block_on(command: impl Future<Output = anyhow::Result<()>>) -> Result<(), String> {
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(command).map_err(|e| format!("{e:#}"))
}

#[derive(Args)]
struct ExtractionArgs {
    /// Synthetic-Persona-Chat CSV file.
    #[arg(long, value_name = "PATH", default_value = SPC_VALID)]
    data: PathBuf,
    /// Evaluate only the first N conversations (with `--msc`: the first N dialogues of
    /// each session).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Score on Multi-Session Chat instead: the `session_N.jsonl` files under DIR, each
    /// conversation held through the API of an Engram started in this process.
    #[arg(long, value_name = "DIR")]
    msc: Option<PathBuf>,
    /// With `--msc`: call the extractor directly only, without the API (faster, for
    /// iterating on rules).
    #[arg(long, requires = "msc")]
    in_process: bool,
    /// With `--msc`: extract through the API with the LLM extractor the environment
    /// configures (`ENGRAM_EXTRACTOR=openai`, `ENGRAM_LLM_BASE_URL`, `ENGRAM_LLM_MODEL`,
    /// `ENGRAM_LLM_FALLBACK`…) instead of the builtin, two conversations at a time as
    /// `ENGRAM_WORKERS` runs them; reports dead and fallen-back jobs and seconds per job.
    #[arg(long, requires = "msc", conflicts_with = "in_process")]
    llm: bool,
    /// With `--msc`: extract while the conversation goes on, every N user turns (the
    /// agent's `extract_every_user_turns`), appending one message at a time, instead of
    /// once at its end; the facts are read once the end's job and every segment's are done.
    #[arg(long, value_name = "N", requires = "msc", conflicts_with = "in_process",
          value_parser = clap::value_parser!(i32).range(1..=100))]
    extract_every_user_turns: Option<i32>,
    #[command(flatten)]
    database: Database,
    /// With `--msc`: also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE", requires = "msc")]
    json: Option<PathBuf>,
    /// With `--msc`: score only the dialogues of one half (by their line number in each
    /// session file); `train-extraction` trains the clause model on the even half, so the
    /// odd half is its hold-out.
    #[arg(long, value_enum, requires = "msc")]
    half: Option<Half>,
    /// Score `builtin::extract` with the clause model in FILE (as `train-extraction` writes
    /// it) instead of the one built in; not with the API.
    #[arg(long, value_name = "FILE", conflicts_with = "llm")]
    clause_model: Option<PathBuf>,
}

/// A clause model file, for scoring it before it is built in.
fn read_clause_model(path: &Path) -> Result<builtin::training::Model, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    builtin::training::Model::decode(&bytes).ok_or_else(|| format!("{} is no clause model", path.display()))
}

/// One half of a split's dialogues, by line number in their session file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Half {
    Even,
    Odd,
}

impl Half {
    fn holds(self, dialogue: usize) -> bool {
        dialogue.is_multiple_of(2) == (self == Half::Even)
    }
}

/// Command-line mistakes exit with 2 and the usage (clap's convention); a failed run exits
/// with 1 and its message.
fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Extraction(args) => match &args.msc {
            Some(dir) => block_on(msc::run(&args, dir)),
            None => extraction(&args),
        },
        Command::Load(args) => block_on(load::run(&args)),
        Command::Scale(args) => block_on(scale::run(&args)),
        Command::WholeMessage(args) => block_on(whole_message::run(&args)),
        Command::Locomo(args) => block_on(locomo::run(&args)),
        Command::TrainExtraction(args) => train::run(&args).map_err(|e| format!("{e:#}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------------------
// extraction
// ---------------------------------------------------------------------------------------

/// One row of Synthetic-Persona-Chat.
struct Dialogue {
    /// Persona lines of User 1 and User 2.
    personas: [Vec<String>; 2],
    /// Turns in order: speaker index (0 for User 1) and text.
    turns: Vec<(usize, String)>,
}

fn extraction(args: &ExtractionArgs) -> Result<(), String> {
    let text = std::fs::read_to_string(&args.data).map_err(|e| format!("cannot read {}: {e}", args.data.display()))?;
    let started = Instant::now();
    let mut dialogues = parse_dialogues(&text)?;
    if let Some(limit) = args.limit {
        dialogues.truncate(limit);
    }
    let clause_model = args.clause_model.as_deref().map(read_clause_model).transpose()?;
    let scorer = Scorer::new();
    let mut baseline = Tally::default();
    let mut confident = Tally::default();
    let mut all_scores = Tally::default();
    for dialogue in &dialogues {
        for speaker in 0..2 {
            let gold = &dialogue.personas[speaker];
            let request = speaker_request(dialogue, speaker);
            let facts = match &clause_model {
                Some(model) => builtin::training::extract_with(&request, Some(model)),
                None => builtin::extract(&request),
            };
            let kept: Vec<String> =
                facts.iter().filter(|f| f.score >= MIN_CONFIDENCE).map(|f| f.fact.clone()).collect();
            let every: Vec<String> = facts.into_iter().map(|f| f.fact).collect();
            confident.add(&scorer, &kept, gold);
            all_scores.add(&scorer, &every, gold);
            let said = dialogue.turns.iter().filter(|(who, _)| *who == speaker).map(|(_, text)| text.as_str());
            baseline.add(&scorer, &first_person_sentences(said), gold);
        }
    }
    let elapsed = started.elapsed();
    println!(
        "extraction: {} ({} rows, {} speakers, {} persona lines) in {:.2} s",
        args.data.display(),
        dialogues.len(),
        dialogues.len() * 2,
        baseline.gold,
        elapsed.as_secs_f64()
    );
    println!("matching: greedy one-to-one, content-word token F1 >= {MATCH_F1}; micro-averaged\n");
    println!(
        "{:<34} {:>6} {:>6} {:>7} {:>9} {:>7} {:>7}",
        "method", "facts", "gold", "matched", "precision", "recall", "F1"
    );
    let threshold = format!("builtin (score >= {MIN_CONFIDENCE})");
    for (name, tally) in [
        ("baseline (first-person sentences)", &baseline),
        (threshold.as_str(), &confident),
        ("builtin (any score)", &all_scores),
    ] {
        println!(
            "{:<34} {:>6} {:>6} {:>7} {:>9.3} {:>7.3} {:>7.3}",
            name,
            tally.facts,
            tally.gold,
            tally.matched,
            tally.precision(),
            tally.recall(),
            tally.f1()
        );
    }
    Ok(())
}

/// The conversation as the extractor sees it when `speaker` is the user.
fn speaker_request(dialogue: &Dialogue, speaker: usize) -> ExtractionRequest {
    request_of(dialogue.turns.iter().map(|(who, text)| (*who == speaker, text.as_str())))
}

/// A conversation as the extractor is asked it: each turn the user's (`true`) or the
/// assistant's, numbered from 1, all of them new.
fn request_of<'a>(turns: impl Iterator<Item = (bool, &'a str)>) -> ExtractionRequest {
    let turns = turns
        .zip(1..)
        .map(|((user, text), seq)| Turn {
            seq,
            role: if user { Role::User } else { Role::Assistant },
            text: text.to_owned(),
        })
        .collect();
    ExtractionRequest { turns, from_seq: 0, instructions: None }
}

const FIRST_PERSON: &[&str] = &["i", "i'm", "im", "i've", "i'd", "i'll", "me", "my", "mine", "myself"];

/// The baseline: every sentence of what the speaker `said` that mentions themself and
/// does not ask anything (the "every first-person, non-question sentence"),
/// verbatim.
fn first_person_sentences<'a>(said: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for text in said {
        for sentence in text.split_inclusive(['.', '!', '?']) {
            let sentence = sentence.trim();
            if sentence.ends_with('?') {
                continue;
            }
            let first_person = sentence
                .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '\u{2019}')
                .any(|w| FIRST_PERSON.contains(&w.replace('\u{2019}', "'").to_lowercase().as_str()));
            if first_person && seen.insert(sentence.to_lowercase()) {
                out.push(sentence.to_string());
            }
        }
    }
    out
}

/// The CSV's header names the columns; rows may be ragged (a missing field reads as empty)
/// and blank rows are skipped.
fn parse_dialogues(text: &str) -> Result<Vec<Dialogue>, String> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(text.as_bytes());
    let header = reader.headers().map_err(|e| format!("bad CSV header: {e}"))?.clone();
    if header.is_empty() {
        return Err("empty CSV file".into());
    }
    let column =
        |name: &str| header.iter().position(|h| h.trim() == name).ok_or_else(|| format!("missing column `{name}`"));
    let (p1, p2, conv) =
        (column("user 1 personas")?, column("user 2 personas")?, column("Best Generated Conversation")?);
    let mut dialogues = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("bad CSV record: {e}"))?;
        if record.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        let field = |i: usize| record.get(i).unwrap_or_default();
        dialogues.push(Dialogue { personas: [lines(field(p1)), lines(field(p2))], turns: parse_turns(field(conv)) });
    }
    Ok(dialogues)
}

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()
}

/// `User 1: ...` / `User 2: ...` lines; a line without a prefix continues the previous turn.
fn parse_turns(conversation: &str) -> Vec<(usize, String)> {
    let mut turns: Vec<(usize, String)> = Vec::new();
    for line in conversation.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let speaker = [("User 1:", 0), ("User 2:", 1)]
            .iter()
            .find_map(|(prefix, who)| line.strip_prefix(prefix).map(|rest| (*who, rest)));
        match (speaker, turns.last_mut()) {
            (Some((who, rest)), _) => turns.push((who, rest.trim().to_string())),
            (None, Some((_, text))) => {
                text.push(' ');
                text.push_str(line);
            }
            (None, None) => {}
        }
    }
    turns
}

// ---------------------------------------------------------------------------------------
// Matching and metrics
// ---------------------------------------------------------------------------------------

/// Words the matching ignores beyond the search stop words (which include pronouns):
/// contraction leftovers and fillers that carry no content, so that "Likes tea" and
/// "I really like tea." compare equal.
const EXTRA_STOP_WORDS: [&str; 11] = ["d", "ll", "m", "o", "re", "ve", "y", "im", "ive", "also", "really"];

struct Scorer {
    stemmer: Stemmer,
    stop_words: HashSet<&'static str>,
}

impl Scorer {
    fn new() -> Self {
        Scorer {
            stemmer: Stemmer::create(Algorithm::English),
            stop_words: STOP_WORDS.iter().chain(EXTRA_STOP_WORDS.iter()).copied().collect(),
        }
    }

    /// Lowercased, contractions expanded, split on non-alphanumerics, stop words dropped,
    /// stemmed.
    fn content_words(&self, text: &str) -> Vec<String> {
        expand_contractions(&text.to_lowercase())
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty() && !self.stop_words.contains(w))
            .map(|w| self.stemmer.stem(w).into_owned())
            .collect()
    }

    /// Which of the `gold` lines the `facts` match.
    fn matched_gold(&self, facts: &[String], gold: &[String]) -> Vec<bool> {
        let words = |texts: &[String]| texts.iter().map(|t| self.content_words(t)).collect::<Vec<_>>();
        greedy_match(&words(facts), &words(gold))
    }
}

/// "don't" → "do not", "doesn't" → "does not", "I'm" → "I am", "I've" → "I have": so
/// that a negated auxiliary leaves only stop words, not a stray "doesn".
fn expand_contractions(lower: &str) -> String {
    lower
        .replace('\u{2019}', "'")
        .replace("can't", "can not")
        .replace("won't", "will not")
        .replace("n't", " not")
        .replace("'m", " am")
        .replace("'ve", " have")
}

/// Token F1 of two bags of words (counting repeats, as in SQuAD).
fn token_f1(a: &[String], b: &[String]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for word in b {
        *counts.entry(word).or_default() += 1;
    }
    let mut common = 0usize;
    for word in a {
        if let Some(n) = counts.get_mut(word.as_str())
            && *n > 0
        {
            *n -= 1;
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / a.len() as f64;
    let recall = common as f64 / b.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// Pairs facts with gold lines, best overlap first, each used at most once; returns
/// which gold lines were paired.
fn greedy_match(facts: &[Vec<String>], gold: &[Vec<String>]) -> Vec<bool> {
    let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
    for (i, fact) in facts.iter().enumerate() {
        for (j, line) in gold.iter().enumerate() {
            let f1 = token_f1(fact, line);
            if f1 >= MATCH_F1 {
                pairs.push((f1, i, j));
            }
        }
    }
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut fact_used = vec![false; facts.len()];
    let mut gold_used = vec![false; gold.len()];
    for (_, i, j) in pairs {
        if !fact_used[i] && !gold_used[j] {
            fact_used[i] = true;
            gold_used[j] = true;
        }
    }
    gold_used
}

#[derive(Default)]
struct Tally {
    facts: usize,
    gold: usize,
    matched: usize,
}

impl Tally {
    fn add(&mut self, scorer: &Scorer, facts: &[String], gold: &[String]) {
        self.facts += facts.len();
        self.gold += gold.len();
        self.matched += scorer.matched_gold(facts, gold).into_iter().filter(|&m| m).count();
    }

    /// Adds the best a perfect choice among `candidates` could do: only those that match a
    /// gold line are kept, so precision is 1 and recall the most these candidates allow.
    fn add_best_choice(&mut self, scorer: &Scorer, candidates: &[String], gold: &[String]) {
        let matched = scorer.matched_gold(candidates, gold).into_iter().filter(|&m| m).count();
        self.facts += matched;
        self.gold += gold.len();
        self.matched += matched;
    }

    fn precision(&self) -> f64 {
        ratio(self.matched, self.facts)
    }

    fn recall(&self) -> f64 {
        ratio(self.matched, self.gold)
    }

    fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) }
    }
}

fn ratio(n: usize, d: usize) -> f64 {
    if d == 0 { 0.0 } else { n as f64 / d as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(scorer: &Scorer, text: &str) -> Vec<String> {
        scorer.content_words(text)
    }

    #[test]
    fn content_words_drop_stop_words_and_stem() {
        let scorer = Scorer::new();
        assert_eq!(words(&scorer, "I love to bake cookies."), ["love", "bake", "cooki"]);
        assert_eq!(words(&scorer, "Loves baking cookies"), ["love", "bake", "cooki"]);
        assert!(words(&scorer, "I am. You are!").is_empty());
        // Negated auxiliaries leave stop words only, whatever the apostrophe.
        assert_eq!(words(&scorer, "She doesn't swim; I can't, I won’t"), ["swim"]);
        assert_eq!(words(&scorer, "I'm sure I've been"), ["sure"]);
    }

    #[test]
    fn token_f1_counts_overlap() {
        let scorer = Scorer::new();
        let a = words(&scorer, "Lives in Paris");
        let b = words(&scorer, "I live in Paris, France.");
        assert!((token_f1(&a, &b) - 2.0 * 1.0 * (2.0 / 3.0) / (1.0 + 2.0 / 3.0)).abs() < 1e-9);
        assert_eq!(token_f1(&a, &a), 1.0);
        assert_eq!(token_f1(&a, &[]), 0.0);
        assert_eq!(token_f1(&a, &words(&scorer, "Plays tennis")), 0.0);
        let repeated = vec!["tea".to_string(), "tea".to_string()];
        let once = vec!["tea".to_string()];
        assert!((token_f1(&repeated, &once) - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn halves_split_dialogues_by_line_number() {
        assert!(Half::Even.holds(0) && Half::Even.holds(4) && !Half::Even.holds(3));
        assert!(Half::Odd.holds(1) && !Half::Odd.holds(2));
    }

    #[test]
    fn greedy_match_is_one_to_one_best_first() {
        let scorer = Scorer::new();
        let facts: Vec<Vec<String>> =
            ["Likes tea", "Likes green tea", "Plays chess"].iter().map(|f| words(&scorer, f)).collect();
        let gold: Vec<Vec<String>> = ["I like green tea.", "I hate cats."].iter().map(|g| words(&scorer, g)).collect();
        // Both tea facts match the first line, but it can be used only once.
        assert_eq!(greedy_match(&facts, &gold), [true, false]);
        let gold_both: Vec<Vec<String>> =
            ["I like green tea.", "I like tea."].iter().map(|g| words(&scorer, g)).collect();
        assert_eq!(greedy_match(&facts, &gold_both), [true, true]);
        assert_eq!(greedy_match(&[], &gold), [false, false]);
    }

    #[test]
    fn tally_micro_averages() {
        let tally = Tally { facts: 4, gold: 8, matched: 2 };
        assert_eq!(tally.precision(), 0.5);
        assert_eq!(tally.recall(), 0.25);
        assert!((tally.f1() - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(Tally::default().f1(), 0.0);
    }

    #[test]
    fn a_best_choice_keeps_only_what_matches() {
        let scorer = Scorer::new();
        let candidates = ["I grind lenses.", "Sounds grand.", "Grinds lenses", "Rows at dawn"].map(str::to_owned);
        let gold = ["I grind lenses.", "I sharpen knives.", "I row at dawn."].map(str::to_owned);
        let mut best = Tally::default();
        best.add_best_choice(&scorer, &candidates, &gold);
        assert_eq!((best.facts, best.gold, best.matched), (2, 3, 2));
        assert_eq!(best.precision(), 1.0);
        best.add_best_choice(&scorer, &[], &gold);
        assert_eq!((best.facts, best.gold, best.matched), (2, 6, 2));
    }

    #[test]
    fn csv_handles_quotes_newlines_crlf_and_ragged_rows() {
        let text = "Best Generated Conversation,user 1 personas,user 2 personas\r\n\
                    \"User 1: Hi, \"\"you\"\"\nUser 2: I play chess.\",\"I like tea.\r\nI nap.\",\"x, y\"\r\n\
                    ,,\r\n\
                    User 1: short";
        let dialogues = parse_dialogues(text).expect("valid csv");
        assert_eq!(dialogues.len(), 2);
        assert_eq!(dialogues[0].turns, [(0, "Hi, \"you\"".to_string()), (1, "I play chess.".to_string())]);
        assert_eq!(dialogues[0].personas, [vec!["I like tea.", "I nap."], vec!["x, y"]]);
        assert_eq!(dialogues[1].turns, [(0, "short".to_string())]);
        assert!(dialogues[1].personas.iter().all(Vec::is_empty));
        assert!(parse_dialogues("").is_err());
        assert!(parse_dialogues("a,b\n1,2\n").is_err());
    }

    #[test]
    fn dialogues_split_speakers() {
        let text = "user 1 personas,user 2 personas,Best Generated Conversation\n\
                    \"I like tea.\nI am a nurse.\",\"I play chess.\",\"User 1: Hi! I like tea.\n\
                    User 2: I play chess.\nand go.\"\n";
        let dialogues = parse_dialogues(text).expect("valid data");
        assert_eq!(dialogues.len(), 1);
        let d = &dialogues[0];
        assert_eq!(d.personas[0], ["I like tea.", "I am a nurse."]);
        assert_eq!(d.turns[1], (1, "I play chess. and go.".to_string()));
        let request = speaker_request(d, 1);
        assert_eq!(request.turns[0].role, Role::Assistant);
        assert_eq!(request.turns[1].role, Role::User);
        assert_eq!(request.turns[1].seq, 2);
        let said = d.turns.iter().filter(|(who, _)| *who == 0).map(|(_, text)| text.as_str());
        assert_eq!(first_person_sentences(said), ["I like tea."]);
    }

    #[test]
    fn the_baseline_keeps_no_question() {
        let said = ["Do I look tired? I am a nurse. Have you met my dog?", "I play chess!"];
        assert_eq!(first_person_sentences(said.into_iter()), ["I am a nurse.", "I play chess!"]);
    }

    fn parse(args: &[&str]) -> Result<ExtractionArgs, clap::Error> {
        let cli = Cli::try_parse_from(std::iter::once("engram-bench").chain(args.iter().copied()))?;
        match cli.command {
            Command::Extraction(args) => Ok(args),
            _ => Err(clap::Error::new(clap::error::ErrorKind::InvalidSubcommand)),
        }
    }

    #[test]
    fn extraction_args() {
        let parsed = parse(&["extraction", "--data", "x.csv", "--limit=5"]).expect("valid args");
        assert_eq!(parsed.data, PathBuf::from("x.csv"));
        assert_eq!(parsed.limit, Some(5));
        let defaults = parse(&["extraction"]).expect("valid args");
        assert_eq!(defaults.data, PathBuf::from(SPC_VALID));
        assert_eq!(defaults.limit, None);
        assert!(parse(&["extraction", "--limit", "many"]).is_err());
        let msc = parse(&["extraction", "--msc", "dir", "--in-process"]).expect("valid args");
        assert_eq!(msc.msc, Some(PathBuf::from("dir")));
        assert!(msc.in_process && defaults.msc.is_none() && !defaults.in_process);
        assert!(parse(&["extraction", "--in-process"]).is_err());
        assert!(parse(&["extraction", "--msc", "dir", "--llm"]).expect("valid args").llm);
        assert!(parse(&["extraction", "--llm"]).is_err(), "--llm scores on --msc");
        assert!(parse(&["extraction", "--msc", "dir", "--llm", "--in-process"]).is_err(), "an LLM runs in the API");
        assert!(parse(&["extraction", "--json", "out.json"]).is_err());
        assert!(parse(&["extraction", "--bogus"]).is_err());
        assert!(parse(&["extraction", "--data"]).is_err());
        assert!(parse(&["bogus"]).is_err());
        assert!(parse(&[]).is_err());
    }

    #[test]
    fn command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
