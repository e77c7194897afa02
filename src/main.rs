//! The `engram` command line: `serve`, `migrate`, `token`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use engram::{
    app::{App, shutdown_signal},
    auth::{Authenticator, parse_ttl},
    config::{CoreConfig, LogFormat, ServeConfig},
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
    /// Print a signed token (HS256, with the configured or development secret).
    Token {
        #[command(flatten)]
        core: CoreConfig,
        #[arg(long)]
        tenant: String,
        /// Space-separated scopes: memory:read memory:write admin rgpd.
        #[arg(long, default_value = "admin")]
        scope: String,
        #[arg(long)]
        sub: Option<String>,
        /// Lifetime, e.g. 90s, 15m, 1h, 7d.
        #[arg(long, default_value = "1h", value_parser = parse_ttl)]
        ttl: std::time::Duration,
    },
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
            migrate(&core).await
        }
        Command::Token { core, tenant, scope, sub, ttl } => Authenticator::from_config(&core)
            .and_then(|(auth, _)| auth.sign(&tenant, &scope, sub.as_deref(), ttl))
            .map(|token| {
                println!("{token}");
            }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("engram: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn migrate(core: &CoreConfig) -> anyhow::Result<()> {
    let store = Store::connect(&core.database_url(), 2).await?;
    store.migrate().await?;
    tracing::info!(backend = store.backend(), "migrations applied");
    store.close().await;
    Ok(())
}
