//! `extraction --msc DIR`: the built-in extractor on Multi-Session Chat, human crowdworkers
//! chatting in several sessions, scored as the held-out split is scored.
//!
//! Each (dialogue, speaker) is one conversation: the speaker's utterances are the user
//! turns, from their first one on, and the other speaker's are the assistant turns. Gold
//! is every sentence of the annotators' `persona_text` for that speaker's turns. The
//! conversation goes through the API of an Engram started in this process (an agent with
//! memory on and `min_user_turns` 1; the conversation is ended and its extraction jobs
//! awaited) and the facts are what Engram then stores for that user. With
//! `--extract-every-user-turns N` the messages are appended one at a time and Engram
//! extracts every N user turns while the conversation goes on (rolling extraction), the
//! end extracting the rest; without it, only at the end. The first-person
//! baseline, `builtin::extract` called directly and the same without its clause model (its
//! rules alone) are scored in the same run, on the same turns, with the same scorer as
//! Synthetic-Persona-Chat; the direct and the API rows differ only by what the service
//! does after extraction (confidence threshold, per-job cap, merging of facts already
//! stored). A last row bounds what choosing can do: a perfect choice among the baseline's
//! sentences and every reading the builtin weighs, kept or not, at precision 1, which says
//! how much of the gap to a target better choosing could close at all (docs/extraction.md).
//!
//! With `--llm` the API's extractor is the LLM the environment configures, and the run also
//! reports how its jobs ended (with the LLM's facts, fallen back to the builtin's, dead),
//! how long a job took, and how many stored nothing where the builtin finds something.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engram::domain::message::Role;
use engram::extract::{ExtractionRequest, builtin};
use serde_json::{Value, json};

use crate::drive::{Budget, drive};
use crate::{Database, Embeddings, MIN_CONFIDENCE, Scorer, Tally, first_person_sentences, write_json};

/// One conversation to score: which session file it came from, its turns (speaker's own
/// marked `true`) and the gold persona sentences.
pub(crate) struct Conversation {
    pub(crate) session: u32,
    /// The dialogue's line number in its session file, from 0 (which half it is in).
    pub(crate) dialogue: usize,
    turns: Vec<(bool, String)>,
    pub(crate) gold: Vec<String>,
}

impl Conversation {
    pub(crate) fn request(&self) -> ExtractionRequest {
        crate::request_of(self.turns.iter().map(|(own, text)| (*own, text.as_str())))
    }

    fn said(&self) -> impl Iterator<Item = &str> {
        self.turns.iter().filter(|(own, _)| *own).map(|(_, text)| text.as_str())
    }
}

/// The three scored methods of one group (a session number, or all of them).
#[derive(Default)]
struct Row {
    baseline: Tally,
    /// `builtin::extract` without its clause model: the rules alone.
    rules: Tally,
    direct: Tally,
    api: Tally,
    /// The most a perfect choice among the baseline's sentences and every reading the
    /// builtin weighs (its rules' facts at any score, every restated clause, kept or not)
    /// could match: what any selection over what the speaker said and the builtin's
    /// readings of it can reach, at precision 1.
    best_choice: Tally,
}

/// Extraction timings, for the speed bound: in all, and per conversation scaled to 20
/// turns.
#[derive(Default)]
struct Timing {
    turns: usize,
    total: Duration,
    per_20_turns: Vec<Duration>,
}

/// Gold sentences no API fact matched, and all of them, by statement form.
#[derive(Default)]
struct Forms {
    gold: HashMap<String, usize>,
    missed: HashMap<String, usize>,
}

/// How many of the most-missed forms to list.
const FORMS_SHOWN: usize = 15;

pub async fn run(args: &crate::ExtractionArgs, dir: &Path) -> anyhow::Result<()> {
    let mut conversations = load(dir, args.limit)?;
    if let Some(half) = args.half {
        conversations.retain(|c| half.holds(c.dialogue));
    }
    anyhow::ensure!(!conversations.is_empty(), "no dialogues under {}", dir.display());
    anyhow::ensure!(args.clause_model.is_none() || args.in_process, "--clause-model scores in process only");
    let clause_model =
        args.clause_model.as_deref().map(crate::read_clause_model).transpose().map_err(anyhow::Error::msg)?;
    let scorer = Scorer::new();
    let mut rows: BTreeMap<u32, Row> = BTreeMap::new();
    let mut timing = Timing::default();
    let mut builtin_finds = Vec::with_capacity(conversations.len());
    for conversation in &conversations {
        let request = conversation.request();
        let started = Instant::now();
        let facts = match &clause_model {
            Some(model) => builtin::training::extract_with(&request, Some(model)),
            None => builtin::extract(&request),
        };
        let took = started.elapsed();
        timing.add(took, conversation.turns.len());
        let kept: Vec<String> = facts.into_iter().filter(|f| f.score >= MIN_CONFIDENCE).map(|f| f.fact).collect();
        builtin_finds.push(!kept.is_empty());
        // The rules alone, in one pass with every reading the builtin weighs: the rules'
        // facts at any score and every clause they leave unread, restated, whether or not
        // the clause model keeps it.
        let (rule_facts, restated) = builtin::training::candidates(&request);
        let rules: Vec<String> =
            rule_facts.iter().filter(|f| f.score >= MIN_CONFIDENCE).map(|f| f.fact.clone()).collect();
        let readings: Vec<String> =
            rule_facts.into_iter().map(|f| f.fact).chain(restated.into_iter().map(|c| c.text)).collect();
        let baseline = first_person_sentences(conversation.said());
        for key in [0, conversation.session] {
            let row = rows.entry(key).or_default();
            row.direct.add(&scorer, &kept, &conversation.gold);
            row.rules.add(&scorer, &rules, &conversation.gold);
            row.baseline.add(&scorer, &baseline, &conversation.gold);
            row.best_choice.add_best_choice(&scorer, &[&baseline[..], &readings[..]].concat(), &conversation.gold);
        }
    }
    let mut forms = Forms::default();
    let mut jobs = Jobs::default();
    let api = if args.in_process {
        None
    } else {
        let started = Instant::now();
        let (held, backend, extractor) =
            through_api(&conversations, &args.database, args.llm, args.extract_every_user_turns).await?;
        for ((conversation, held), builtin_finds) in conversations.iter().zip(&held).zip(&builtin_finds) {
            jobs.add(held, *builtin_finds);
            let matched = scorer.matched_gold(&held.facts, &conversation.gold);
            for (line, hit) in conversation.gold.iter().zip(matched) {
                forms.add(&form(line), hit);
            }
            for key in [0, conversation.session] {
                rows.entry(key).or_default().api.add(&scorer, &held.facts, &conversation.gold);
            }
        }
        Some(Api { elapsed: started.elapsed(), backend, extractor })
    };
    report(dir, &conversations, &rows, &mut timing, &forms, api.as_ref());
    if api.is_some() {
        jobs.report();
    }
    let json_rows: Vec<Value> = rows
        .iter()
        .map(|(session, row)| {
            let scores = |t: &Tally| json!({"facts": t.facts, "gold": t.gold, "matched": t.matched, "precision": t.precision(), "recall": t.recall(), "f1": t.f1()});
            json!({
                "session": if *session == 0 { "all".to_owned() } else { session.to_string() },
                "baseline": scores(&row.baseline),
                "builtin_direct": scores(&row.direct),
                "builtin_rules_alone": scores(&row.rules),
                "best_choice": scores(&row.best_choice),
                "api": api.is_some().then(|| scores(&row.api)),
            })
        })
        .collect();
    write_json(
        args.json.as_deref(),
        &json!({"command": "extraction", "data": dir.display().to_string(), "extractor": api.as_ref().map(|a| a.extractor),
            "rows": json_rows, "jobs": api.is_some().then(|| jobs.json()),
            "ms_per_20_turns": timing.mean_per_20_turns_ms(), "p99_ms_per_20_turns": timing.p99_per_20_turns_ms()}),
    )
}

/// How the API run went: how long it took, on which backend, with which extractor.
struct Api {
    elapsed: Duration,
    backend: &'static str,
    extractor: &'static str,
}

/// How one conversation's extraction jobs ended (the worst of them: dead, then fallen back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobEnd {
    /// Succeeded with the configured extractor's facts.
    Extracted,
    /// Succeeded with the builtin's facts after the LLM gave up (its `last_error` says why).
    FellBack,
    Dead,
    /// No job was queued (nothing to extract).
    NotQueued,
}

impl JobEnd {
    /// How one job ended, `None` while it has not.
    fn of(job: &Value) -> anyhow::Result<Option<JobEnd>> {
        Ok(match (job["status"].as_str(), job["last_error"].is_null()) {
            (Some("succeeded"), true) => Some(JobEnd::Extracted),
            (Some("succeeded"), false) => Some(JobEnd::FellBack),
            (Some("dead"), _) => Some(JobEnd::Dead),
            (Some("queued" | "running" | "failed"), _) => None,
            (other, _) => anyhow::bail!("extraction job ended {other:?}: {}", job["last_error"]),
        })
    }
}

/// One conversation held through the API: the facts stored for its user, how its job
/// ended, and how long the job took from the conversation's end.
struct Held {
    facts: Vec<String>,
    end: JobEnd,
    job_took: Duration,
    /// Extraction jobs the conversation had, and its user turns.
    jobs: usize,
    user_turns: usize,
}

/// How the jobs of an API run ended, and how long they took.
#[derive(Default)]
struct Jobs {
    ends: BTreeMap<&'static str, usize>,
    /// Jobs that stored no fact for a person the builtin finds facts about.
    empty_where_builtin_finds: usize,
    seconds: Vec<f64>,
    /// Extraction jobs and user turns over all conversations.
    queued: usize,
    user_turns: usize,
}

impl Jobs {
    fn add(&mut self, held: &Held, builtin_finds: bool) {
        self.queued += held.jobs;
        self.user_turns += held.user_turns;
        let end = match held.end {
            JobEnd::Extracted => "extracted",
            JobEnd::FellBack => "fell back",
            JobEnd::Dead => "dead",
            JobEnd::NotQueued => return,
        };
        *self.ends.entry(end).or_default() += 1;
        if held.facts.is_empty() && builtin_finds {
            self.empty_where_builtin_finds += 1;
        }
        self.seconds.push(held.job_took.as_secs_f64());
    }

    fn count(&self, end: &str) -> usize {
        self.ends.get(end).copied().unwrap_or_default()
    }

    fn mean_seconds(&self) -> f64 {
        self.seconds.iter().sum::<f64>() / self.seconds.len().max(1) as f64
    }

    fn max_seconds(&self) -> f64 {
        self.seconds.iter().copied().fold(0.0, f64::max)
    }

    fn per_100_user_turns(&self) -> f64 {
        100.0 * self.queued as f64 / self.user_turns.max(1) as f64
    }

    fn report(&self) {
        println!(
            "\nextraction jobs: {} for {} user turns, {:.1} per 100 user turns",
            self.queued,
            self.user_turns,
            self.per_100_user_turns()
        );
        println!(
            "\njobs: {} with the extractor's facts, {} fell back to the builtin, {} dead; {} stored nothing where the builtin finds facts",
            self.count("extracted"),
            self.count("fell back"),
            self.count("dead"),
            self.empty_where_builtin_finds
        );
        println!(
            "seconds to the last job's end (from the conversation's end): {:.1} on average, {:.1} at most",
            self.mean_seconds(),
            self.max_seconds()
        );
    }

    fn json(&self) -> Value {
        json!({"extracted": self.count("extracted"), "fell_back": self.count("fell back"), "dead": self.count("dead"),
            "empty_where_builtin_finds": self.empty_where_builtin_finds,
            "mean_seconds": self.mean_seconds(), "max_seconds": self.max_seconds(),
            "jobs": self.queued, "user_turns": self.user_turns, "jobs_per_100_user_turns": self.per_100_user_turns()})
    }
}

impl Timing {
    fn add(&mut self, took: Duration, turns: usize) {
        self.turns += turns;
        self.total += took;
        self.per_20_turns.push(took.mul_f64(20.0 / turns.max(1) as f64));
    }

    /// The time per 20 turns under which 99 % of the conversations were extracted (the
    /// slowest one is mostly a short conversation interrupted by the scheduler).
    fn p99_per_20_turns_ms(&mut self) -> f64 {
        self.per_20_turns.sort_unstable();
        let index = (self.per_20_turns.len() * 99 / 100).min(self.per_20_turns.len().saturating_sub(1));
        self.per_20_turns.get(index).map_or(0.0, |d| d.as_secs_f64() * 1e3)
    }

    fn mean_per_20_turns_ms(&self) -> f64 {
        self.total.as_secs_f64() * 1e3 * 20.0 / self.turns.max(1) as f64
    }
}

impl Forms {
    fn add(&mut self, form: &str, hit: bool) {
        *self.gold.entry(form.to_owned()).or_default() += 1;
        if !hit {
            *self.missed.entry(form.to_owned()).or_default() += 1;
        }
    }

    /// The forms with the most missed sentences, most first: (form, missed, all).
    fn most_missed(&self) -> Vec<(&str, usize, usize)> {
        let mut forms: Vec<(&str, usize, usize)> =
            self.missed.iter().map(|(form, missed)| (form.as_str(), *missed, self.gold[form])).collect();
        forms.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        forms.truncate(FORMS_SHOWN);
        forms
    }
}

/// The statement form of a gold sentence: its first two words, contractions expanded
/// ("I don't …" → "i do not"), or "i <verb>" when it opens with "I"; a sentence about
/// something else than the speaker shows as "(other subject)".
fn form(line: &str) -> String {
    let lower = line.to_lowercase().replace('\u{2019}', "'");
    let expanded = lower.replace("i'm", "i am").replace("i've", "i have").replace("n't", " not");
    let words: Vec<&str> = expanded.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).take(4).collect();
    match words.as_slice() {
        ["i", "do" | "am" | "have" | "can" | "will" | "was", "not", ..] => words[..3].join(" "),
        ["i", verb, ..] => format!("i {verb}"),
        ["my", ..] => "my …".to_owned(),
        [] => "(empty)".to_owned(),
        _ => "(other subject)".to_owned(),
    }
}

fn report(
    dir: &Path,
    conversations: &[Conversation],
    rows: &BTreeMap<u32, Row>,
    timing: &mut Timing,
    forms: &Forms,
    api: Option<&Api>,
) {
    println!(
        "extraction: {} ({} conversations, {} gold sentences){}",
        dir.display(),
        conversations.len(),
        rows.get(&0).map_or(0, |r| r.baseline.gold),
        match api {
            Some(api) => format!(
                ", through the API ({}) on {} in {:.1} s",
                api.extractor,
                api.backend,
                api.elapsed.as_secs_f64()
            ),
            None => ", in process only".to_owned(),
        }
    );
    println!(
        "builtin::extract, one thread: {:.2} ms per 20 turns on average, {:.2} ms at the 99th percentile of conversations",
        timing.mean_per_20_turns_ms(),
        timing.p99_per_20_turns_ms()
    );
    println!("matching: greedy one-to-one, content-word token F1 >= 0.5; micro-averaged\n");
    println!(
        "{:<8} {:<26} {:>6} {:>6} {:>7} {:>9} {:>7} {:>7} {:>8}",
        "session", "method", "facts", "gold", "matched", "precision", "recall", "F1", "vs base"
    );
    for (session, row) in rows {
        let name = if *session == 0 { "all".to_owned() } else { session.to_string() };
        let mut methods = vec![
            ("first-person baseline".to_owned(), &row.baseline),
            ("builtin, rules alone".to_owned(), &row.rules),
            ("builtin, direct".to_owned(), &row.direct),
        ];
        if let Some(api) = api {
            methods.push((format!("{}, through the API", api.extractor), &row.api));
        }
        methods.push(("best choice (bound)".to_owned(), &row.best_choice));
        for (method, tally) in methods {
            println!(
                "{name:<8} {method:<26} {:>6} {:>6} {:>7} {:>9.3} {:>7.3} {:>7.3} {:>7.2}x",
                tally.facts,
                tally.gold,
                tally.matched,
                tally.precision(),
                tally.recall(),
                tally.f1(),
                tally.f1() / row.baseline.f1().max(f64::MIN_POSITIVE)
            );
        }
    }
    if api.is_some() {
        println!("\nmost-missed statement forms (gold sentences no stored fact matched):");
        println!("{:<22} {:>7} {:>7} {:>7}", "form", "missed", "gold", "recall");
        for (form, missed, gold) in forms.most_missed() {
            println!("{form:<22} {missed:>7} {gold:>7} {:>7.3}", 1.0 - missed as f64 / gold as f64);
        }
    }
}

/// The agent the conversations are held with.
const AGENT: &str = "msc";

/// Conversations sent through the API at once with the builtin extractor, which answers
/// in a millisecond; an LLM gets two at a time, as `ENGRAM_WORKERS` runs them, so that a
/// job's time is its own and not its queue's.
const CONCURRENCY: usize = 8;
const LLM_CONCURRENCY: usize = 2;

/// Sends every conversation through an Engram started in this process, with the builtin
/// extractor or (`llm`) the one the environment configures; returns what each one left,
/// in order, the backend's name and the extractor's.
async fn through_api(
    conversations: &[Conversation],
    database: &Database,
    llm: bool,
    every: Option<i32>,
) -> anyhow::Result<(Vec<Held>, &'static str, &'static str)> {
    let scratch = database.create().await?;
    let mut extra = ["--job-poll-ms", "20"].map(str::to_owned).to_vec();
    if !llm {
        extra.extend(["--extractor", "builtin"].map(str::to_owned));
    }
    let server = scratch.serve_with(&Embeddings::default(), &extra).await?;
    let extractor = server.state.config.build_extractor()?.name();
    anyhow::ensure!(
        !llm || extractor != "builtin",
        "--llm needs an LLM extractor: set ENGRAM_EXTRACTOR and its ENGRAM_LLM_… settings"
    );
    let backend = server.state.store.backend();
    let token: Arc<str> =
        server.state.guard.authenticator.sign("bench", "admin", None, None, Duration::from_secs(24 * 3600))?.into();
    let client = reqwest::Client::new();
    let status = client
        .put(format!("{}/api/agents-config/{AGENT}", server.base))
        .bearer_auth(&*token)
        .json(&json!({"memory_enabled": true, "min_user_turns": 1, "extract_every_user_turns": every}))
        .send()
        .await?
        .status();
    anyhow::ensure!(status.is_success(), "configuring the agent failed: {status}");
    // Rolling extraction needs the user turns to arrive as they would, a few at a time.
    let batch = if every.is_some() { 1 } else { BATCH };
    let sessions: Arc<Vec<Vec<(Role, String)>>> = Arc::new(
        conversations.iter().map(|c| c.request().turns.into_iter().map(|t| (t.role, t.text)).collect()).collect(),
    );
    let held: Arc<Mutex<Vec<Option<Held>>>> =
        Arc::new(Mutex::new(std::iter::repeat_with(|| None).take(conversations.len()).collect()));
    let (base, out) = (server.base.clone(), held.clone());
    let concurrency = if llm { LLM_CONCURRENCY } else { CONCURRENCY };
    let outcome = drive(concurrency, Budget { count: Some(conversations.len()), until: None }, move |i| {
        let (client, base, token, sessions, out) =
            (client.clone(), base.clone(), token.clone(), sessions.clone(), out.clone());
        async move {
            match converse(&client, &base, &token, &format!("user-{i}"), &sessions[i], batch).await {
                Ok(held) => {
                    out.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(held);
                    true
                }
                Err(error) => {
                    eprintln!("conversation {i} failed: {error:#}");
                    false
                }
            }
        }
    })
    .await;
    server.stop().await?;
    scratch.remove().await?;
    anyhow::ensure!(outcome.errors == 0, "{} conversations failed", outcome.errors);
    let held = std::mem::take(&mut *held.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    let held = held
        .into_iter()
        .map(|h| {
            h.unwrap_or(Held {
                facts: vec![],
                end: JobEnd::NotQueued,
                job_took: Duration::ZERO,
                jobs: 0,
                user_turns: 0,
            })
        })
        .collect();
    Ok((held, backend, extractor))
}

/// Messages per append request (the API's maximum is 100).
const BATCH: usize = 100;

/// How long one extraction job may take before the run fails: an LLM job may be retried
/// five times, each call up to its timeout and each retry as long after.
const JOB_LIMIT: Duration = Duration::from_secs(15 * 60);

/// Holds one conversation with `user` (`batch` messages per append), ends it, awaits its
/// extraction jobs and returns the facts stored for the user, how the jobs ended and how
/// long the last took to end after the conversation did.
async fn converse(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    user: &str,
    turns: &[(Role, String)],
    batch: usize,
) -> anyhow::Result<Held> {
    let created: Value = ok_json(
        client
            .post(format!("{base}/api/conversations"))
            .bearer_auth(token)
            .json(&json!({"agent_id": AGENT, "external_ref": user})),
    )
    .await?;
    let id = created["id"].as_str().ok_or_else(|| anyhow::anyhow!("no conversation id in {created}"))?;
    for batch in turns.chunks(batch) {
        let messages: Vec<Value> =
            batch.iter().map(|(role, text)| json!({"role": role.as_str(), "content": text})).collect();
        ok_json(
            client
                .post(format!("{base}/api/conversations/{id}/messages"))
                .bearer_auth(token)
                .json(&json!({"messages": messages})),
        )
        .await?;
    }
    let started = Instant::now();
    ok_json(client.post(format!("{base}/api/conversations/{id}/end")).bearer_auth(token)).await?;
    let (end, jobs) = loop {
        let page: Value =
            ok_json(client.get(format!("{base}/api/jobs?conversation_id={id}&limit=100")).bearer_auth(token)).await?;
        let jobs: Vec<&Value> =
            page["items"].as_array().into_iter().flatten().filter(|job| job["kind"] == "extract_facts").collect();
        let ends = jobs.iter().map(|job| JobEnd::of(job)).collect::<anyhow::Result<Vec<_>>>()?;
        if ends.iter().all(Option::is_some) {
            let worst = [JobEnd::Dead, JobEnd::FellBack, JobEnd::Extracted]
                .into_iter()
                .find(|end| ends.contains(&Some(*end)))
                .unwrap_or(JobEnd::NotQueued);
            break (worst, jobs.len());
        }
        anyhow::ensure!(started.elapsed() < JOB_LIMIT, "extraction jobs still running after {JOB_LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let job_took = started.elapsed();
    let user_turns = turns.iter().filter(|(role, _)| *role == Role::User).count();
    let mut facts = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{base}/api/agents/{AGENT}/users/{user}/facts?limit=200");
        if let Some(cursor) = &cursor {
            url.push_str(&format!("&cursor={}", crate::scale::encode(cursor)));
        }
        let page: Value = ok_json(client.get(url).bearer_auth(token)).await?;
        facts.extend(
            page["items"].as_array().into_iter().flatten().filter_map(|f| f["fact"].as_str().map(str::to_owned)),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok(Held { facts, end, job_took, jobs, user_turns }),
        }
    }
}

/// Sends a request; its JSON body when it succeeded, else an error with status and body.
async fn ok_json(request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
    let response = request.send().await?;
    let status = response.status();
    let body = response.text().await?;
    anyhow::ensure!(status.is_success(), "{status}: {body}");
    Ok(serde_json::from_str(&body)?)
}

/// Reads `session_N.jsonl` under `dir` (N = 1, 2, …, in order), each dialogue cut into
/// its two speakers' conversations; `limit` keeps the first dialogues of each session.
pub(crate) fn load(dir: &Path, limit: Option<usize>) -> anyhow::Result<Vec<Conversation>> {
    let mut files: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix("session_")?.strip_suffix(".jsonl")?.parse().ok()?;
            Some((n, entry.path()))
        })
        .collect();
    files.sort();
    let mut conversations = Vec::new();
    for (session, path) in files {
        let text =
            std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let lines = text.lines().filter(|l| !l.trim().is_empty()).take(limit.unwrap_or(usize::MAX));
        for (n, line) in lines.enumerate() {
            let dialogue: Value =
                serde_json::from_str(line).map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), n + 1))?;
            conversations.extend(speakers(session, n, &dialogue));
        }
    }
    Ok(conversations)
}

/// The fields of a dialogue line that the benchmark reads (the format is described in
/// `../shared/data/README.md`): its turns, and each turn's speaker, text and annotation.
const TURNS: &str = "dialog";
const SPEAKER: &str = "id";
const TEXT: &str = "text";
const ANNOTATION: &str = "persona_text";

/// The conversations of one dialogue, one per speaker who spoke in it.
fn speakers(session: u32, index: usize, dialogue: &Value) -> Vec<Conversation> {
    let turns: Vec<(&str, &str, &str)> = dialogue[TURNS]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|turn| {
            Some((turn[SPEAKER].as_str()?, turn[TEXT].as_str()?, turn[ANNOTATION].as_str().unwrap_or_default()))
        })
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for (id, _, _) in &turns {
        if !names.contains(id) {
            names.push(id);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let first = turns.iter().position(|(id, _, _)| *id == name).unwrap_or_default();
            let own = &turns[first..];
            let mut seen = HashSet::new();
            let gold = own
                .iter()
                .filter(|(id, _, _)| *id == name)
                .flat_map(|(_, _, persona)| sentences(persona))
                .filter(|s| seen.insert(s.to_lowercase()))
                .collect();
            let turns = own.iter().map(|(id, text, _)| (*id == name, (*text).to_owned())).collect();
            Conversation { session, dialogue: index, turns, gold }
        })
        .collect()
}

/// The sentences of an annotation: cut after '.', '!' or '?', those with a letter or digit
/// kept.
fn sentences(text: &str) -> Vec<String> {
    text.split_inclusive(['.', '!', '?'])
        .map(str::trim)
        .filter(|s| s.chars().any(char::is_alphanumeric))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up dialogue line: (speaker, text, annotation) per turn.
    fn dialogue(turns: &[(&str, &str, Option<&str>)]) -> Value {
        let turns: Vec<Value> = turns
            .iter()
            .map(|(speaker, text, annotation)| {
                let mut turn = json!({SPEAKER: speaker, TEXT: text});
                if let Some(annotation) = annotation {
                    turn[ANNOTATION] = json!(annotation);
                }
                turn
            })
            .collect();
        json!({TURNS: turns})
    }

    #[test]
    fn a_dialogue_is_one_conversation_per_speaker_from_their_first_turn() {
        let dialogue = dialogue(&[
            ("ann", "Morning, neighbour! Busy week ahead?", None),
            ("bo", "I grind lenses.", Some("I grind lenses. I sharpen knives.")),
            ("ann", "I row at dawn.", Some("I row at dawn.")),
            ("bo", "Sounds grand.", Some("i grind lenses.")),
        ]);
        let [first, second] = <[Conversation; 2]>::try_from(speakers(3, 0, &dialogue)).ok().expect("two speakers");
        assert_eq!(first.session, 3);
        assert_eq!(first.turns.len(), 4);
        assert!(first.turns[0].0 && !first.turns[1].0);
        assert_eq!(first.gold, ["I row at dawn."]);
        // The second speaker's conversation starts at their first turn; gold repeats once.
        assert_eq!(second.turns.len(), 3);
        assert!(second.turns[0].0 && !second.turns[1].0);
        assert_eq!(second.gold, ["I grind lenses.", "I sharpen knives."]);
        let request = second.request();
        assert_eq!(request.turns[0].role, Role::User);
        assert_eq!(request.turns[2].seq, 3);
        assert_eq!(second.said().collect::<Vec<_>>(), ["I grind lenses.", "Sounds grand."]);
    }

    #[test]
    fn annotations_split_into_sentences() {
        assert_eq!(sentences("I brew cider. I'm a glassblower!  "), ["I brew cider.", "I'm a glassblower!"]);
        assert_eq!(sentences("no period"), ["no period"]);
        assert!(sentences(" . ").is_empty());
    }

    #[test]
    fn forms_group_gold_sentences() {
        assert_eq!(form("I don't knit scarves."), "i do not");
        assert_eq!(form("I’m wary of quinces."), "i am");
        assert_eq!(form("I live aboard a houseboat."), "i live");
        assert_eq!(form("My kettle whistles."), "my …");
        assert_eq!(form("Ten lanterns hung crooked."), "(other subject)");
        let mut forms = Forms::default();
        forms.add("i live", false);
        forms.add("i live", true);
        forms.add("i am", false);
        forms.add("i am", false);
        assert_eq!(forms.most_missed(), [("i am", 2, 2), ("i live", 1, 2)]);
    }

    #[test]
    fn jobs_are_told_by_how_they_ended() {
        let held = |facts: &[&str], end, secs| Held {
            facts: facts.iter().map(|f| (*f).to_owned()).collect(),
            end,
            job_took: Duration::from_secs(secs),
            jobs: usize::from(end != JobEnd::NotQueued) * 2,
            user_turns: 5,
        };
        let mut jobs = Jobs::default();
        jobs.add(&held(&["Grinds lenses"], JobEnd::Extracted, 2), true);
        jobs.add(&held(&[], JobEnd::Extracted, 4), true);
        jobs.add(&held(&[], JobEnd::Extracted, 3), false);
        jobs.add(&held(&["Rows at dawn"], JobEnd::FellBack, 9), true);
        jobs.add(&held(&[], JobEnd::Dead, 30), true);
        jobs.add(&held(&[], JobEnd::NotQueued, 0), true);
        assert_eq!(
            jobs.json(),
            json!({"extracted": 3, "fell_back": 1, "dead": 1, "empty_where_builtin_finds": 2,
                "mean_seconds": 9.6, "max_seconds": 30.0, "jobs": 10, "user_turns": 30,
                "jobs_per_100_user_turns": 100.0 * 10.0 / 30.0})
        );
    }

    #[test]
    fn timings_are_per_20_turns() {
        let mut timing = Timing::default();
        for ms in 1..=100 {
            timing.add(Duration::from_millis(ms), 10);
        }
        assert_eq!(timing.turns, 1000);
        assert!((timing.mean_per_20_turns_ms() - 101.0).abs() < 1e-6);
        assert!((timing.p99_per_20_turns_ms() - 200.0).abs() < 1e-6);
        assert_eq!(Timing::default().p99_per_20_turns_ms(), 0.0);
    }

    #[test]
    fn sessions_load_in_order_with_a_limit() {
        let dir = std::env::temp_dir().join(format!("engram-msc-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let line = |text: &str| dialogue(&[("ann", text, Some(text)), ("bo", "ok", None)]).to_string();
        std::fs::write(dir.join("session_10.jsonl"), line("I mend kites.")).expect("write");
        std::fs::write(
            dir.join("session_2.jsonl"),
            format!("{}\n\n{}\n", line("I carve spoons."), line("I glaze pots.")),
        )
        .expect("write");
        std::fs::write(dir.join("notes.txt"), "not a session").expect("write");
        let all = load(&dir, None).expect("loads");
        assert_eq!(all.iter().map(|c| c.session).collect::<Vec<_>>(), [2, 2, 2, 2, 10, 10]);
        assert_eq!(all[0].gold, ["I carve spoons."]);
        assert_eq!(load(&dir, Some(1)).expect("loads").len(), 4);
        std::fs::write(dir.join("session_3.jsonl"), "{").expect("write");
        assert!(load(&dir, None).is_err());
        std::fs::remove_dir_all(&dir).expect("cleanup");
        assert!(load(&dir, None).is_err());
    }
}
