//! Settings, read once at start-up from flags and the environment (clap), validated so
//! that a bad value stops the process with a message naming the variable.

use std::{fmt, net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, ValueEnum};

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

/// Where the data lives and how tokens are checked: what `serve`, `migrate` and `token`
/// all need.
#[derive(Debug, Clone, Args)]
pub struct CoreConfig {
    /// `postgres://…` for production, `sqlite://…` embedded. Default: `sqlite://<data dir>/engram.db`.
    #[arg(long, env = "DATABASE_URL")]
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
    /// Maximum database connections per process.
    #[arg(long, env = "ENGRAM_DB_MAX_CONNECTIONS", default_value_t = 10)]
    pub db_max_connections: u32,
}

impl CoreConfig {
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.0.clone(),
            None => format!("sqlite://{}/engram.db", self.data_dir.display()),
        }
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
    /// Largest request body in bytes.
    #[arg(long, env = "ENGRAM_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,
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
    /// Facts kept per agent and user.
    #[arg(long, env = "ENGRAM_MAX_FACTS_PER_USER", default_value_t = 1000)]
    pub max_facts_per_user: i64,
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
    /// Which extractor turns conversations into facts.
    #[arg(long, env = "ENGRAM_EXTRACTOR", value_enum, default_value = "builtin")]
    pub extractor: ExtractorKind,
    /// Base URL of the LLM API (OpenAI-compatible: includes `/v1`).
    #[arg(long, env = "ENGRAM_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,
    #[arg(long, env = "ENGRAM_LLM_API_KEY", hide_env_values = true)]
    pub llm_api_key: Option<Secret>,
    #[arg(long, env = "ENGRAM_LLM_MODEL")]
    pub llm_model: Option<String>,
    #[arg(long, env = "ENGRAM_LLM_TIMEOUT_SECS", default_value_t = 30)]
    pub llm_timeout_secs: u64,
    /// Key of the erasure receipts' subject hash; generated into the data directory when unset.
    #[arg(long, env = "ENGRAM_RECEIPT_KEY", hide_env_values = true)]
    pub receipt_key: Option<Secret>,
}

impl ServeConfig {
    /// Checks what clap cannot: ranges and combinations.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.workers <= 64, "ENGRAM_WORKERS must be at most 64");
        anyhow::ensure!(self.job_lease_secs >= 1, "ENGRAM_JOB_LEASE_SECS must be at least 1");
        anyhow::ensure!(self.job_max_attempts >= 1, "ENGRAM_JOB_MAX_ATTEMPTS must be at least 1");
        anyhow::ensure!(self.max_facts_per_user >= 1, "ENGRAM_MAX_FACTS_PER_USER must be at least 1");
        anyhow::ensure!(self.idle_end_secs >= 1, "ENGRAM_IDLE_END_SECS must be at least 1");
        anyhow::ensure!(self.sweep_interval_secs >= 1, "ENGRAM_SWEEP_INTERVAL_SECS must be at least 1");
        anyhow::ensure!(self.max_body_bytes >= 1024, "ENGRAM_MAX_BODY_BYTES must be at least 1024");
        if self.extractor != ExtractorKind::Builtin {
            anyhow::ensure!(
                self.llm_model.is_some(),
                "ENGRAM_LLM_MODEL is required with ENGRAM_EXTRACTOR={:?}",
                self.extractor
            );
        }
        Ok(())
    }

    pub fn rate_limit_burst(&self) -> u32 {
        self.rate_limit_burst.unwrap_or(self.rate_limit_per_sec.saturating_mul(2))
    }

    pub fn job_lease(&self) -> Duration {
        Duration::from_secs(self.job_lease_secs)
    }
}
