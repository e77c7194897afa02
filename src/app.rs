//! The application as `engram serve` runs it and as tests start it: store, keys, router,
//! background workers, and graceful shutdown.

use std::{future::Future, net::SocketAddr, sync::Arc};

use tokio::{
    net::TcpListener,
    sync::{Notify, watch},
};

use crate::{
    auth::{Authenticator, KeySource},
    config::{Secret, ServeConfig},
    crypto,
    extract::Extractor,
    http::{self, AppState, rate_limit::RateLimiter},
    store::Store,
    telemetry,
};

pub struct App {
    state: AppState,
    listener: TcpListener,
    extractor: Arc<Extractor>,
}

impl App {
    /// Connects and migrates the database, loads the keys and binds the listener
    /// (`ENGRAM_BIND`; port 0 picks a free port, which tests use).
    pub async fn build(config: ServeConfig) -> anyhow::Result<App> {
        config.validate()?;
        let (auth, key_source) = Authenticator::from_config(&config.core)?;
        if key_source == KeySource::DevelopmentSecret {
            tracing::warn!(
                data_dir = %config.core.data_dir.display(),
                "development mode: no ENGRAM_JWT_SECRET or ENGRAM_JWT_PUBLIC_KEY_FILE, tokens are signed with a \
                 secret generated into the data directory (use `engram token` to make one)"
            );
        }
        let store = Store::connect(&config.core.database_url(), config.core.db_max_connections).await?;
        store.migrate().await?;
        if let Store::Sqlite(_) = store {
            tracing::info!(database = %config.core.database_url(), "using the embedded SQLite database");
        } else {
            tracing::info!("using PostgreSQL");
        }
        let listener = TcpListener::bind(config.bind)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on ENGRAM_BIND {}: {e}", config.bind))?;
        let extractor = Arc::new(Extractor::from_config(&config)?);
        let receipt_key = match &config.receipt_key {
            Some(key) => key.clone(),
            None => {
                if let Store::Postgres(_) = store {
                    tracing::warn!("ENGRAM_RECEIPT_KEY is not set: each replica generates its own receipt key");
                }
                Secret(crypto::load_or_create_secret(&config.core.data_dir.join("receipt-key"))?)
            }
        };
        let rate_limiter = RateLimiter::new(config.rate_limit_per_sec, config.rate_limit_burst()).map(Arc::new);
        let state = AppState {
            store,
            auth: Arc::new(auth),
            config: Arc::new(config),
            metrics: telemetry::metrics_handle(),
            job_wakeup: Arc::new(Notify::new()),
            receipt_key: Arc::new(receipt_key),
            rate_limiter,
        };
        Ok(App { state, listener, extractor })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` resolves, then stops accepting, finishes in-flight
    /// requests, lets the background tasks finish, and closes the database.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        let App { state, listener, extractor } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        let background = crate::worker::spawn(state.clone(), extractor, stop_rx);
        tracing::info!(address = %listener.local_addr()?, "engram listening");
        axum::serve(listener, http::router(state.clone())).with_graceful_shutdown(shutdown).await?;
        let _ = stop_tx.send(true);
        for task in background {
            let _ = task.await;
        }
        state.store.close().await;
        tracing::info!("engram stopped");
        Ok(())
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutdown signal received");
}
