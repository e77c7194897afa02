//! `load`: each hot operation driven at a concurrency for a time through Engram's HTTP
//! API, and beside it the same database work done directly, so the ratio says what
//! Engram costs on top of what the database alone allows.
//!
//! Engram runs as its own process (the `engram` binary beside this one, `engram serve`),
//! so the peak RSS reported is the server's alone: `/proc/<pid>/status` `VmHWM`, reset
//! before each operation through `/proc/<pid>/clear_refs`. Or `--url` names an Engram
//! already running (with `--token`, and `--database-url` naming its database): then
//! there is no RSS.
//!
//! The baseline calls, from this process, the [`Store`] methods the route calls, with a
//! pool of the server's size (`ENGRAM_DB_MAX_CONNECTIONS`): exactly the statements
//! Engram issues, in the same transactions, decoded into the same rows. What it leaves
//! out is what Engram adds: HTTP, the token check, JSON in and out, validation, the
//! prompt assembly of the memory context, the receipt's HMAC.
//!
//! Beside each side's rate and latencies: the CPU time per request of the server and of
//! this process (`/proc/<pid>/stat`), which on a shared machine tells more than the rate
//! does where Engram spends its time.
//!
//! A first row gives what HTTP alone allows at the same concurrency (`GET /healthz`: the
//! client, the server's stack, no token, no database), the ceiling of every other row.
//!
//! The last column, the server's **overhead**, is what it spends on a request that is
//! neither the database's work nor HTTP's: its CPU per request, less the direct side's
//! (the same `Store` calls, driver and — on SQLite — the database engine included), less
//! HTTP alone's. That is request parsing and validation, auth, building and serialising
//! the answer, the request log line and metrics. `--runs N` drives every operation N
//! times on each side and prints the median of each figure.
//!
//! The server runs with `--workers 0` (ended conversations queue jobs that nobody runs
//! while measuring) and `--embeddings off` (recall is full text, the statements the
//! baseline issues).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use clap::{Args, ValueEnum};
use engram::{
    auth::Authenticator,
    domain::{
        conversation::{AppendRequest, NewConversation},
        event::Actor,
        fact::{FactInput, NewFact, Origin},
        ids::{AgentId, ExternalRef, TenantId},
        memory_context::default_max_facts,
        message::{NewMessage, Role, RoleSet},
        owner::Owner,
        search_query::SearchQuery,
    },
    store::{
        Store,
        conversations::{Created, EndTrigger},
        facts::{FactFilter, Remembered},
        messages::{AppendOutcome, Window},
    },
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::drive::{Budget, Outcome, answer, drive, succeeds};
use crate::scale::{encode, fact_text, three_words};
use crate::{Database, STATEMENT_TIMEOUT, Scratch, serve_config, write_json};

const TENANT: &str = "bench";
/// An erasure receipt's subject hash, for the baseline (Engram computes an HMAC).
const SUBJECT_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// How long the started server may take to answer `/readyz`.
const START_LIMIT: Duration = Duration::from_secs(60);
/// What the answer to an end holds when it queued an extraction.
const QUEUED: &[u8] = br#""queued":true"#;
/// Messages per append while seeding (the API's batch limit).
const BATCH: usize = 100;
/// The consent of a user who never said, as `engram serve` assumes by default, for the
/// appends the bench makes on the store directly.
const DEFAULT_AI_CONSENT: bool = true;

#[derive(Args)]
pub struct LoadArgs {
    /// Seconds each operation is driven, through Engram and again directly.
    #[arg(long, default_value_t = 5.0, value_parser = seconds)]
    seconds: f64,
    /// Requests in flight at once [default: 32 on PostgreSQL, 8 on SQLite].
    #[arg(long)]
    concurrency: Option<usize>,
    /// Users holding facts and one conversation each.
    #[arg(long, default_value_t = 200)]
    users: usize,
    /// Facts of each of those users.
    #[arg(long, default_value_t = 50)]
    facts_per_user: usize,
    /// Messages in each of those users' conversation before the run.
    #[arg(long, default_value_t = 40)]
    messages: usize,
    /// Users with a short conversation and two facts, to end and then erase: this many
    /// for Engram and as many for the baseline. Ending and erasing stop early when they
    /// run out.
    #[arg(long, default_value_t = 1_500)]
    pool: usize,
    /// Runs of each operation and side; every figure printed is the median of the runs
    /// (counts are summed), so one disturbed run moves nothing.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=99))]
    runs: u16,
    /// An Engram already running, instead of starting one; needs `--token` (an admin
    /// token of the tenant to use) and `--database-url` naming that Engram's database,
    /// into which the bench writes its data under an agent of its own.
    #[arg(long, value_name = "URL", requires = "token")]
    url: Option<String>,
    #[arg(long, value_name = "JWT", requires = "url")]
    token: Option<String>,
    /// The `engram` binary to start [default: the one beside this program].
    #[arg(long, value_name = "PATH", conflicts_with = "url")]
    engram: Option<PathBuf>,
    #[command(flatten)]
    database: Database,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Only these operations (comma-separated), e.g. to profile one of them.
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Op>,
    /// The bench agent's `extract_every_user_turns` (rolling extraction); without it the
    /// agent extracts at the end only, as before rolling extraction existed.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=100))]
    extract_every_user_turns: Option<i32>,
}

/// The operations, in the order they run: reads first, so that every read sees the
/// seeded data, then the writes; erasure last, as it removes what ending used.
#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum Op {
    LastMessages,
    Context,
    ContextQuery,
    Search,
    Append,
    Remember,
    End,
    Erase,
}

const OPS: [Op; 8] =
    [Op::LastMessages, Op::Context, Op::ContextQuery, Op::Search, Op::Append, Op::Remember, Op::End, Op::Erase];

impl Op {
    fn label(self) -> &'static str {
        match self {
            Op::LastMessages => "read the last 20 messages",
            Op::Context => "memory context, no query",
            Op::ContextQuery => "memory context, 3-word query",
            Op::Search => "facts search, 3-word query",
            Op::Append => "append one message",
            Op::Remember => "remember a fact",
            Op::End => "end a conversation (queue a job)",
            Op::Erase => "erase a user",
        }
    }

    /// Whether each request uses up one pool user.
    fn pooled(self) -> bool {
        matches!(self, Op::End | Op::Erase)
    }
}

/// The Engram being measured: its address, and its process when this bench started it.
struct Server {
    base: String,
    child: Option<tokio::process::Child>,
}

/// Everything an operation needs, shared by the tasks driving it.
struct Bench {
    client: reqwest::Client,
    base: String,
    token: String,
    store: Store,
    tenant: TenantId,
    agent: AgentId,
    users: Vec<ExternalRef>,
    /// The conversation of each of `users`.
    conversations: Vec<Uuid>,
    /// Pool users and their conversation: Engram's, then the baseline's (`--pool` for
    /// each run).
    pool: [Vec<(ExternalRef, Uuid)>; 2],
    cap: i64,
}

pub async fn run(args: &LoadArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.users >= 1, "--users must be at least 1");
    // The database and, unless one is given, a server started on it.
    let (store, scratch, server, token, config) = match (&args.url, &args.token) {
        (Some(url), Some(token)) => {
            let Some(database) = &args.database.database_url else {
                anyhow::bail!(
                    "--url needs --database-url naming that Engram's database: the seeding and the baseline work on it"
                )
            };
            let config = serve_config(&[])?;
            // The seeded facts are tagged under that Engram's key, when given
            // (`ENGRAM_RECEIPT_KEY`), so that its searches find them.
            let store = Store::connect(database, config.core.db_max_connections, STATEMENT_TIMEOUT).await?;
            let store = match &config.core.receipt_key {
                Some(key) => store.with_word_key(key.0.as_bytes()),
                None => store,
            };
            let server = Server { base: url.trim_end_matches('/').to_owned(), child: None };
            (store, None, server, token.clone(), config)
        }
        _ => {
            let scratch = args.database.create().await?;
            let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let serve = scratch.serve_args(&format!("127.0.0.1:{port}"));
            let config = serve_config(&serve)?;
            // The server migrates the database; the bench's pool is opened after.
            let server = match start(args.engram.clone(), &serve, &scratch, port).await {
                Ok(server) => server,
                Err(error) => {
                    // The database is dropped even though the run never began.
                    let _ = scratch.remove().await;
                    return Err(error);
                }
            };
            let store = Store::connect(&scratch.url, config.core.db_max_connections, STATEMENT_TIMEOUT)
                .await?
                .with_word_key(engram::app::receipt_key(&config.core)?.0.as_bytes());
            let (authenticator, _) = Authenticator::from_config(&config.core)?;
            let token = authenticator.sign(TENANT, "admin", None, None, Duration::from_secs(24 * 3600))?;
            (store, Some(scratch), server, token, config)
        }
    };
    let result = measure(args, store.clone(), &server, token, config.max_facts_per_user).await;
    store.close().await;
    if let Some(mut child) = server.child {
        let _ = child.kill().await;
    }
    if let Some(scratch) = scratch {
        scratch.remove().await?;
    }
    result
}

/// Starts `engram serve` with `serve`'s settings and waits until it is ready.
async fn start(engram: Option<PathBuf>, serve: &[String], scratch: &Scratch, port: u16) -> anyhow::Result<Server> {
    let binary = match engram {
        Some(path) => path,
        None => std::env::current_exe()?.with_file_name("engram"),
    };
    let log = scratch.dir.join("engram.log");
    let mut child = tokio::process::Command::new(&binary)
        .arg("serve")
        .args(serve)
        .args(["--workers", "0", "--embeddings", "off"])
        .stdin(Stdio::null())
        // Its request log at the default level: formatted (a cost of Engram), not kept.
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {} (build it, or give --engram): {e}", binary.display()))?;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let started = Instant::now();
    while started.elapsed() < START_LIMIT {
        if let Some(status) = child.try_wait()? {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            anyhow::bail!("engram serve exited ({status}): {log}");
        }
        let ready = client.get(format!("{base}/readyz")).timeout(Duration::from_secs(2)).send().await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            return Ok(Server { base, child: Some(child) });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("engram serve was not ready within {START_LIMIT:?}")
}

async fn measure(args: &LoadArgs, store: Store, server: &Server, token: String, cap: i64) -> anyhow::Result<()> {
    let backend = store.backend();
    let concurrency = args.concurrency.unwrap_or(if backend == "postgres" { 32 } else { 8 });
    let run = Uuid::now_v7().simple().to_string()[..12].to_owned();
    let client = reqwest::Client::new();
    // The agent's memory on, one user turn enough to queue an extraction, and rolling
    // extraction as asked (off by default: end-only).
    let agent = format!("load-{run}");
    let status = client
        .put(format!("{}/api/agents-config/{agent}", server.base))
        .bearer_auth(&token)
        .json(&json!({
            "memory_enabled": true,
            "min_user_turns": 1,
            "extract_every_user_turns": args.extract_every_user_turns,
        }))
        .send()
        .await?
        .status();
    anyhow::ensure!(status.is_success(), "configuring the agent failed: {status}");

    let started = Instant::now();
    let tenant = tenant_of(&token)?;
    let agent = AgentId::parse(agent).map_err(anyhow::Error::msg)?;
    let name = |kind: &str, i: usize| ExternalRef::parse(format!("{run}-{kind}-{i}")).map_err(anyhow::Error::msg);
    let users = (0..args.users).map(|i| name("user", i)).collect::<anyhow::Result<Vec<_>>>()?;
    let runs = usize::from(args.runs);
    let pool_users = [
        (0..args.pool * runs).map(|i| name("engram", i)).collect::<anyhow::Result<Vec<_>>>()?,
        (0..args.pool * runs).map(|i| name("direct", i)).collect::<anyhow::Result<Vec<_>>>()?,
    ];
    let seeder = Seeder { store: store.clone(), tenant: tenant.clone(), agent: agent.clone() };
    let conversations = seeder.seed(&users, args.facts_per_user, args.messages, concurrency).await?;
    let mut pool: [Vec<(ExternalRef, Uuid)>; 2] = [Vec::new(), Vec::new()];
    for (side, users) in pool_users.into_iter().enumerate() {
        let ids = seeder.seed(&users, 2, 2, concurrency).await?;
        pool[side] = users.into_iter().zip(ids).collect();
    }
    store.refresh_statistics().await?;
    println!(
        "load: backend {backend}, {} users × {} facts and {} messages, 2 × {} pool users; seeded in {:.1?}",
        args.users,
        args.facts_per_user,
        args.messages,
        args.pool * runs,
        started.elapsed()
    );
    println!(
        "{concurrency} requests in flight, {} s per operation and side, {runs} run(s) of each (medians); \
         baseline: the same Store calls from this process",
        args.seconds
    );

    let bench = Arc::new(Bench {
        client,
        base: server.base.clone(),
        token,
        store,
        tenant,
        agent,
        users,
        conversations,
        pool,
        cap,
    });
    let pid = server.child.as_ref().and_then(tokio::process::Child::id);
    // Connections opened and caches warm on both sides before anything is measured.
    let period = Duration::from_secs_f64(args.seconds);
    let warm_up = Budget { count: None, until: Some(period.min(Duration::from_secs(1))) };
    for engram in [true, false] {
        run_side(&bench, Op::LastMessages, engram, concurrency, warm_up, 0).await;
    }

    println!(
        "\n{:<34} {:<8} {:>8} {:>9} {:>8} {:>8} {:>8} {:>6} {:>7} {:>7} {:>9} {:>6} {:>7}",
        "operation",
        "side",
        "requests",
        "req/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "errors",
        "srv µs",
        "own µs",
        "peak RSS",
        "ratio",
        "ovh µs"
    );
    println!(
        "(srv µs, own µs: CPU time per request of the server and of this process; the database's is in neither;\n \
         ovh µs: the server's overhead, srv µs − the direct side's own µs − HTTP alone's srv µs)"
    );
    let until = Some(period);
    // What HTTP alone allows on this machine: the client, the server's stack and the
    // token-free health route, no database.
    let mut floors = Vec::new();
    for _ in 0..runs {
        let clock = CpuClock::start(pid);
        let (client, url) = (bench.client.clone(), format!("{}/healthz", bench.base));
        let outcome = drive(concurrency, Budget { count: None, until }, move |_| succeeds(client.get(&url))).await;
        floors.push(Figures::of(&outcome, clock.per_request(&outcome)));
    }
    let floor = Figures::median(&floors);
    print_row("HTTP alone: GET /healthz", "engram", &floor, "", "", None);
    let mut rows = Vec::new();
    // Extraction jobs the Engram side's appends queued (each append is one user turn).
    let mut extraction = (0, 0);
    for op in OPS.into_iter().filter(|op| args.only.is_empty() || args.only.contains(op)) {
        let budget = Budget { count: op.pooled().then_some(args.pool), until };
        let (mut engram, mut direct, mut rss, mut overheads) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // Each run goes on where the last one stopped: new facts, new pool users.
        let mut offsets = [0, 0];
        for run in 0..runs {
            if let Some(pid) = pid {
                reset_peak_rss(pid);
            }
            let queued = if op == Op::Append { bench.queued_extractions().await? } else { 0 };
            let clock = CpuClock::start(pid);
            let outcome = run_side(&bench, op, true, concurrency, budget, offsets[0]).await;
            offsets[0] += outcome.requests();
            if op == Op::Append {
                extraction.0 += bench.queued_extractions().await?.saturating_sub(queued);
                extraction.1 += outcome.requests() - outcome.errors;
            }
            engram.push(Figures::of(&outcome, clock.per_request(&outcome)));
            rss.extend(pid.and_then(peak_rss_kib));
            let clock = CpuClock::start(None);
            let outcome = run_side(&bench, op, false, concurrency, budget, offsets[1]).await;
            offsets[1] += outcome.requests();
            direct.push(Figures::of(&outcome, clock.per_request(&outcome)));
            overheads.extend(overhead(&engram[run], &direct[run], &floor));
        }
        let ratios: Vec<f64> = engram.iter().zip(&direct).map(|(e, d)| e.rate / d.rate.max(1e-9)).collect();
        let (engram, direct, ratio) = (Figures::median(&engram), Figures::median(&direct), median(&ratios));
        let overhead = (!overheads.is_empty()).then(|| median(&overheads));
        let rss = rss.iter().max().copied();
        let rss_text = rss.map_or("-".to_owned(), |kib| format!("{:.1} MiB", kib as f64 / 1024.0));
        print_row(op.label(), "engram", &engram, &rss_text, &format!("{ratio:.2}"), overhead);
        print_row("", "direct", &direct, "", "", None);
        rows.push(json!({
            "operation": op.label(), "engram": engram.to_json(), "baseline": direct.to_json(),
            "engram_peak_rss_kib": rss, "ratio": ratio,
            "engram_server_cpu_us_per_request": engram.server_us, "engram_bench_cpu_us_per_request": engram.own_us,
            "baseline_bench_cpu_us_per_request": direct.own_us, "overhead_us_per_request": overhead,
        }));
    }
    let per_100_user_turns = (extraction.1 > 0).then(|| 100.0 * extraction.0 as f64 / extraction.1 as f64);
    if let Some(per_100) = per_100_user_turns {
        println!(
            "\nappend (Engram side): {} extraction jobs queued for {} user turns, {per_100:.1} per 100 user turns \
             (extract_every_user_turns {})",
            extraction.0,
            extraction.1,
            args.extract_every_user_turns.map_or("null".to_owned(), |n| n.to_string()),
        );
    }
    write_json(
        args.json.as_deref(),
        &json!({
            "command": "load", "backend": backend, "concurrency": concurrency, "seconds": args.seconds,
            "runs": runs, "users": args.users, "facts_per_user": args.facts_per_user, "messages": args.messages,
            "pool": args.pool, "http_floor": floor.to_json(), "rows": rows,
            "extract_every_user_turns": args.extract_every_user_turns,
            "extraction_jobs_per_100_user_turns": per_100_user_turns,
        }),
    )
}

/// One side of one run of an operation in numbers, or the medians of several runs.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Figures {
    requests: usize,
    errors: usize,
    rate: f64,
    p50_ms: f64,
    p95_ms: f64,
    p99_ms: f64,
    /// CPU µs per request of the server (when this bench started it) and of this process.
    server_us: Option<f64>,
    own_us: Option<f64>,
}

impl Figures {
    fn of(outcome: &Outcome, (server_us, own_us): (Option<f64>, Option<f64>)) -> Figures {
        Figures {
            requests: outcome.requests(),
            errors: outcome.errors,
            rate: outcome.rate(),
            p50_ms: outcome.percentile_ms(50),
            p95_ms: outcome.percentile_ms(95),
            p99_ms: outcome.percentile_ms(99),
            server_us,
            own_us,
        }
    }

    /// Each figure's median over `runs` (at least one); requests and errors are summed.
    fn median(runs: &[Figures]) -> Figures {
        let of = |figure: fn(&Figures) -> f64| median(&runs.iter().map(figure).collect::<Vec<_>>());
        let of_cpu = |figure: fn(&Figures) -> Option<f64>| {
            runs.iter().map(figure).collect::<Option<Vec<f64>>>().map(|values| median(&values))
        };
        Figures {
            requests: runs.iter().map(|f| f.requests).sum(),
            errors: runs.iter().map(|f| f.errors).sum(),
            rate: of(|f| f.rate),
            p50_ms: of(|f| f.p50_ms),
            p95_ms: of(|f| f.p95_ms),
            p99_ms: of(|f| f.p99_ms),
            server_us: of_cpu(|f| f.server_us),
            own_us: of_cpu(|f| f.own_us),
        }
    }

    fn to_json(self) -> Value {
        json!({
            "requests": self.requests, "requests_per_s": self.rate, "errors": self.errors,
            "p50_ms": self.p50_ms, "p95_ms": self.p95_ms, "p99_ms": self.p99_ms,
        })
    }
}

/// The server's CPU per request that is neither the database's nor HTTP's (see the
/// module docs); `None` without the server's CPU (an Engram this bench did not start).
fn overhead(engram: &Figures, direct: &Figures, floor: &Figures) -> Option<f64> {
    Some(engram.server_us? - direct.own_us? - floor.server_us?)
}

/// The median (the mean of the two middle values of an even count); 0 for none.
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// A positive number of seconds, at most a day.
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 86_400.0 => Ok(seconds),
        _ => Err("a number of seconds greater than 0 and at most 86400".into()),
    }
}

fn print_row(label: &str, side: &str, figures: &Figures, rss: &str, ratio: &str, overhead: Option<f64>) {
    let micros = |us: Option<f64>| us.map_or("-".to_owned(), |us| format!("{us:.0}"));
    let overhead = overhead.map_or(String::new(), |us| format!("{us:.0}"));
    println!(
        "{label:<34} {side:<8} {:>8} {:>9.0} {:>8.2} {:>8.2} {:>8.2} {:>6} {:>7} {:>7} {rss:>9} {ratio:>6} {overhead:>7}",
        figures.requests,
        figures.rate,
        figures.p50_ms,
        figures.p95_ms,
        figures.p99_ms,
        figures.errors,
        micros(figures.server_us),
        micros(figures.own_us),
    );
}

/// Drives one operation, through Engram's API or directly on the store; request i
/// is the operation's `offset + i`th (pooled operations use up pool users from there).
async fn run_side(
    bench: &Arc<Bench>,
    op: Op,
    engram: bool,
    concurrency: usize,
    budget: Budget,
    offset: usize,
) -> Outcome {
    let bench = bench.clone();
    drive(concurrency, budget, move |i| {
        let bench = bench.clone();
        let i = offset + i;
        async move { if engram { bench.engram(op, i).await } else { bench.direct(op, i).await } }
    })
    .await
}

impl Bench {
    async fn engram(&self, op: Op, i: usize) -> bool {
        let (base, agent) = (&self.base, &self.agent);
        let user = format!("{base}/api/agents/{agent}/users/{}", self.users[i % self.users.len()]);
        let conversation = format!("{base}/api/conversations/{}", self.conversations[i % self.conversations.len()]);
        let request = match op {
            Op::LastMessages => self.client.get(format!("{conversation}/messages?last=20")),
            Op::Context => self.client.get(format!("{user}/memory-context")),
            Op::ContextQuery => self.client.get(format!("{user}/memory-context?query={}", encode(&three_words(i)))),
            Op::Search => self.client.get(format!("{user}/facts/search?q={}", encode(&three_words(i)))),
            Op::Append => self.client.post(format!("{conversation}/messages")).json(&append_request(i)),
            Op::Remember => {
                self.client.post(format!("{user}/facts")).json(&json!({"fact": remembered("via Engram", i)}))
            }
            Op::End => self.client.post(format!("{base}/api/conversations/{}/end", self.pool[0][i].1)),
            Op::Erase => self.client.delete(format!("{base}/api/rgpd/users/{}/ai-data", self.pool[0][i].0)),
        };
        // Each write counts when it did what the baseline's does: stored, or queued.
        answer(request.bearer_auth(&self.token), |status, body| match op {
            Op::Append | Op::Remember => status == reqwest::StatusCode::CREATED,
            Op::End => status.is_success() && body.windows(QUEUED.len()).any(|w| w == QUEUED),
            _ => status.is_success(),
        })
        .await
    }

    /// The same work as [`Bench::engram`], as the route does it with the store.
    async fn direct(&self, op: Op, i: usize) -> bool {
        let (store, tenant) = (&self.store, &self.tenant);
        let owner = Owner::new(tenant, &self.agent, &self.users[i % self.users.len()]);
        let conversation = self.conversations[i % self.conversations.len()];
        let query = || SearchQuery::parse(&three_words(i)).ok();
        match op {
            Op::LastMessages => store
                .list_messages(tenant, conversation, 0, RoleSet::ALL, Window::Last(20))
                .await
                .is_ok_and(|m| m.is_some()),
            Op::Context => self.context(owner, None).await,
            Op::ContextQuery => self.context(owner, query().as_ref()).await,
            Op::Search => match query() {
                Some(query) => store.search_facts(owner, &query, FactFilter::CURRENT, 10).await.is_ok(),
                None => false,
            },
            Op::Append => store
                .append_messages(tenant, conversation, &append_request(i), None, DEFAULT_AI_CONSENT)
                .await
                .is_ok_and(|outcome| matches!(outcome, AppendOutcome::Appended { .. })),
            Op::Remember => {
                match (FactInput { fact: remembered("direct", i), tags: None, score: None, ..Default::default() })
                    .validate(chrono::Utc::now())
                {
                    Ok(fact) => store
                        .remember_fact(owner, &fact, Origin::Manual, self.cap, Actor::Api)
                        .await
                        .is_ok_and(|outcome| matches!(outcome, Remembered::Created(_))),
                    Err(_) => false,
                }
            }
            Op::End => store
                .end_conversation(tenant, self.pool[1][i].1, EndTrigger::Request, true, Actor::Api)
                .await
                .is_ok_and(|ended| ended.is_some_and(|ended| ended.extraction.queued)),
            Op::Erase => store.erase_user(tenant, &self.pool[1][i].0, SUBJECT_HASH, Actor::Api).await.is_ok(),
        }
    }

    /// The memory context's two statements: the agent's switch and the user's consent,
    /// then the facts.
    async fn context(&self, owner: Owner<'_>, query: Option<&SearchQuery>) -> bool {
        let Ok(policy) = self.store.policy(owner).await else { return false };
        let Some(max_facts) = default_max_facts(&policy, true) else { return false };
        let limit = i64::try_from(max_facts).unwrap_or(i64::MAX);
        self.store.context_facts(owner, query, None, limit).await.is_ok()
    }
}

fn append_request(i: usize) -> AppendRequest {
    AppendRequest {
        messages: vec![message(Role::User, &format!("message {i}: {}", three_words(i)))],
        expected_last_seq: None,
    }
}

fn message(role: Role, text: &str) -> NewMessage {
    NewMessage {
        role,
        content: Value::String(text.to_owned()),
        name: None,
        tool_calls: None,
        tool_call_id: None,
        metadata: None,
    }
}

/// A fact no user holds yet (each side remembers its own).
fn remembered(side: &str, i: usize) -> String {
    format!("Remembered {side} {i}: {}", three_words(i))
}

/// The tenant a token names (its signature is the server's business).
fn tenant_of(token: &str) -> anyhow::Result<TenantId> {
    let payload = token.split('.').nth(1).ok_or_else(|| anyhow::anyhow!("--token is not a JWT"))?;
    let claims: Value = serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload)?)?;
    let tenant = claims["tenant"].as_str().ok_or_else(|| anyhow::anyhow!("--token names no tenant"))?;
    TenantId::parse(tenant.to_owned()).map_err(anyhow::Error::msg)
}

/// Writes the seed data through the store.
#[derive(Clone)]
struct Seeder {
    store: Store,
    tenant: TenantId,
    agent: AgentId,
}

impl Seeder {
    /// Gives each user `facts` facts and one conversation of `messages` messages
    /// (alternately the user's and the assistant's); returns the conversations' ids.
    async fn seed(
        &self,
        users: &[ExternalRef],
        facts: usize,
        messages: usize,
        concurrency: usize,
    ) -> anyhow::Result<Vec<Uuid>> {
        let ids: Arc<Vec<OnceLock<Uuid>>> = Arc::new(users.iter().map(|_| OnceLock::new()).collect());
        let (seeder, users_shared) = (Arc::new(self.clone()), Arc::new(users.to_vec()));
        let ids_shared = ids.clone();
        let outcome = drive(concurrency, Budget { count: Some(users.len()), until: None }, move |i| {
            let (seeder, users, ids) = (seeder.clone(), users_shared.clone(), ids_shared.clone());
            async move {
                match seeder.user(i, &users[i], facts, messages).await {
                    Ok(id) => ids[i].set(id).is_ok(),
                    Err(error) => {
                        eprintln!("seeding failed: {error:#}");
                        false
                    }
                }
            }
        })
        .await;
        anyhow::ensure!(outcome.errors == 0, "seeding failed for {} users", outcome.errors);
        Ok(ids.iter().filter_map(|id| id.get().copied()).collect())
    }

    async fn user(&self, seed: usize, user: &ExternalRef, facts: usize, messages: usize) -> anyhow::Result<Uuid> {
        let owner = Owner::new(&self.tenant, &self.agent, user);
        let facts = (0..facts)
            .map(|i| {
                FactInput { fact: fact_text(seed, i), tags: None, score: None, ..Default::default() }
                    .validate(chrono::Utc::now())
                    .map_err(anyhow::Error::msg)
            })
            .collect::<anyhow::Result<Vec<NewFact>>>()?;
        self.store.import_facts(owner, &facts, Origin::Manual).await?;
        let new = NewConversation {
            agent_id: self.agent.clone(),
            external_ref: user.clone(),
            key: None,
            title: None,
            metadata: None,
            memory: None,
        };
        let (Created::New(conversation) | Created::Existing(conversation)) =
            self.store.create_conversation(&self.tenant, &new, Actor::Api).await?;
        let turns: Vec<NewMessage> = (0..messages)
            .map(|i| message(if i % 2 == 0 { Role::User } else { Role::Assistant }, &fact_text(seed, i)))
            .collect();
        for batch in turns.chunks(BATCH) {
            let request = AppendRequest { messages: batch.to_vec(), expected_last_seq: None };
            let outcome =
                self.store.append_messages(&self.tenant, conversation.id, &request, None, DEFAULT_AI_CONSENT).await?;
            anyhow::ensure!(matches!(outcome, AppendOutcome::Appended { .. }), "seeding messages failed");
        }
        Ok(conversation.id)
    }
}

impl Bench {
    /// The extraction jobs queued (the server runs no worker, so none leaves the queue),
    /// read page by page through the jobs route.
    async fn queued_extractions(&self) -> anyhow::Result<usize> {
        let (mut count, mut cursor) = (0, None::<String>);
        loop {
            let mut url = format!("{}/api/jobs?status=queued&limit=200", self.base);
            if let Some(cursor) = &cursor {
                url.push_str(&format!("&cursor={}", encode(cursor)));
            }
            let page: Value =
                self.client.get(url).bearer_auth(&self.token).send().await?.error_for_status()?.json().await?;
            let items = page["items"].as_array().map(Vec::as_slice).unwrap_or_default();
            count += items.iter().filter(|job| job["kind"] == "extract_facts").count();
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => return Ok(count),
            }
        }
    }
}

/// Linux's `USER_HZ`, the unit of `/proc/<pid>/stat`'s CPU times, on every common
/// architecture.
const USER_HZ: f64 = 100.0;

/// CPU time (user and system) a process has used, from `/proc/<pid>/stat`.
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state (field 3) … utime (14), stime (15).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_secs_f64(ticks as f64 / USER_HZ))
}

/// The CPU time of the server (when this bench started it) and of this process at the
/// start of a run, to tell how much of it each request took: CPU time does not depend on
/// what else runs on the machine the way throughput does.
struct CpuClock {
    server: Option<(u32, Duration)>,
    own: Option<Duration>,
}

impl CpuClock {
    fn start(server: Option<u32>) -> CpuClock {
        CpuClock { server: server.and_then(|pid| Some((pid, cpu_time(pid)?))), own: cpu_time(std::process::id()) }
    }

    /// Microseconds of CPU per request since the start: the server's, this process's.
    fn per_request(&self, outcome: &Outcome) -> (Option<f64>, Option<f64>) {
        let requests = outcome.requests().max(1) as f64;
        let per_request = |pid: u32, before: Duration| {
            cpu_time(pid).map(|now| now.saturating_sub(before).as_secs_f64() * 1e6 / requests)
        };
        (
            self.server.and_then(|(pid, before)| per_request(pid, before)),
            self.own.and_then(|before| per_request(std::process::id(), before)),
        )
    }
}

/// Resets the peak RSS of `pid` to its current RSS (Linux's `clear_refs` 5); without it
/// the peak is the process's since it started.
fn reset_peak_rss(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// `VmHWM` of `pid`: its peak resident set size, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_positive_and_bounded() {
        assert_eq!(seconds("0.5"), Ok(0.5));
        assert_eq!(seconds("5"), Ok(5.0));
        for bad in ["0", "-1", "NaN", "inf", "1e9", "five", ""] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn medians_take_the_middle_and_sum_the_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        let run = |rate: f64, server_us: Option<f64>| Figures {
            requests: 10,
            errors: 1,
            rate,
            p50_ms: rate / 10.0,
            p95_ms: 0.0,
            p99_ms: 0.0,
            server_us,
            own_us: Some(rate),
        };
        let runs = [run(100.0, Some(50.0)), run(300.0, Some(70.0)), run(200.0, Some(60.0))];
        let median = Figures::median(&runs);
        assert_eq!((median.requests, median.errors, median.rate, median.p50_ms), (30, 3, 200.0, 20.0));
        assert_eq!((median.server_us, median.own_us), (Some(60.0), Some(200.0)));
        // A run without the server's CPU leaves the median without it.
        assert_eq!(Figures::median(&[run(1.0, None), run(2.0, Some(1.0))]).server_us, None);
    }

    #[test]
    fn overhead_is_what_is_neither_the_database_nor_http() {
        let figures = |server_us: Option<f64>, own_us: Option<f64>| Figures {
            requests: 1,
            errors: 0,
            rate: 1.0,
            p50_ms: 0.0,
            p95_ms: 0.0,
            p99_ms: 0.0,
            server_us,
            own_us,
        };
        let (engram, direct, floor) =
            (figures(Some(150.0), Some(5.0)), figures(None, Some(70.0)), figures(Some(16.0), None));
        assert_eq!(overhead(&engram, &direct, &floor), Some(64.0));
        assert_eq!(overhead(&figures(None, Some(5.0)), &direct, &floor), None);
    }

    #[test]
    fn cpu_time_of_this_process_grows() {
        // Spins until the kernel's tick-grained count moves; on a busy machine 100 ms of
        // wall time can pass with less than one tick of CPU, so the bound is generous.
        let before = cpu_time(std::process::id()).expect("Linux reports CPU times");
        let started = Instant::now();
        let mut x = 0u64;
        while cpu_time(std::process::id()).expect("still there") <= before {
            assert!(started.elapsed() < Duration::from_secs(10), "no CPU time counted after 10 s of spinning");
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        assert!(cpu_time(u32::MAX).is_none());
    }

    #[test]
    fn peak_rss_of_this_process() {
        let kib = peak_rss_kib(std::process::id()).expect("Linux reports VmHWM");
        assert!(kib > 0);
        assert!(peak_rss_kib(u32::MAX).is_none());
    }

    #[test]
    fn the_tenant_comes_from_the_token() {
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"tenant":"acme","exp":1}"#);
        assert_eq!(tenant_of(&format!("x.{payload}.y")).expect("a tenant").as_str(), "acme");
        assert!(tenant_of("not a token").is_err());
        let none = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"exp":1}"#);
        assert!(tenant_of(&format!("x.{none}.y")).is_err());
    }
}
