//! The application as `engram serve` runs it and as tests start it: store, keys, router,
//! background workers, and graceful shutdown.

use std::{future::Future, net::SocketAddr, sync::Arc};

use tokio::{
    net::TcpListener,
    sync::{Notify, watch},
};

use crate::{
    admin,
    auth::{Authenticator, Guard, KeySource, rate_limit::RateLimiter},
    config::{CoreConfig, MIN_SECRET_BYTES, Secret, ServeConfig},
    crypto,
    extract::Extractor,
    http,
    service::{AppState, Shared, facts_changed, recall_counts::RecallCounts},
    store::Store,
    telemetry,
};

/// Raises the soft limit on open files to the hard one: every connection, waiting read,
/// webhook delivery and SQLite connection holds a descriptor, and the soft limit a process
/// inherits (often 1 024, or 256) runs out long before memory or CPU do. Past it the
/// server can accept nothing, not even `/healthz`.
fn raise_open_files_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return;
    }
    let raised = Rlimit { current: limit.maximum, maximum: limit.maximum };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => tracing::info!(from = limit.current, to = limit.maximum, "raised the open files limit"),
        Err(e) => tracing::warn!(error = %e, limit = limit.current, "could not raise the open files limit"),
    }
}

pub struct App {
    state: AppState,
    listener: TcpListener,
    extractor: Arc<Extractor>,
}

impl App {
    /// Connects and migrates the database, loads the keys and binds the listener
    /// (`ENGRAM_BIND`; port 0 picks a free port, which tests use).
    pub async fn build(config: ServeConfig) -> anyhow::Result<App> {
        let config = config.validated()?;
        raise_open_files_limit();
        let (auth, key_source) = Authenticator::from_config(&config.core)?;
        if key_source == KeySource::DevelopmentSecret && !config.bind.ip().is_loopback() {
            // Not refused: the generated secret is as strong as a configured one, and
            // `docker run` + `engram token` is a fair way to try the image. What breaks is
            // operational (each volume, so each replica, has its own secret; tokens die
            // with the volume), so it is said at error level where alerts look.
            tracing::error!(
                bind = %config.bind,
                data_dir = %config.core.data_dir.display(),
                "development mode on a non-loopback address: no ENGRAM_JWT_SECRET or ENGRAM_JWT_PUBLIC_KEY_FILE, \
                 tokens are signed with a secret generated into the data directory; set ENGRAM_JWT_SECRET for \
                 anything but a trial"
            );
        } else if key_source == KeySource::DevelopmentSecret {
            tracing::warn!(
                data_dir = %config.core.data_dir.display(),
                "development mode: no ENGRAM_JWT_SECRET or ENGRAM_JWT_PUBLIC_KEY_FILE, tokens are signed with a \
                 secret generated into the data directory (use `engram token` to make one)"
            );
        }
        let store =
            Store::connect(&config.core.database_url(), config.core.db_max_connections, config.request_timeout())
                .await?;
        if config.core.receipt_key.is_none() && !store.is_embedded() {
            tracing::warn!("ENGRAM_RECEIPT_KEY is not set: each replica generates its own receipt key");
        }
        let receipt_key = receipt_key(&config.core)?;
        let store = store.with_word_key(receipt_key.0.as_bytes());
        store.migrate().await?;
        store.key_word_index().await?;
        let interrupted = crate::service::import::interrupt_stale(&store, config.import).await?;
        if interrupted > 0 {
            tracing::warn!(interrupted, "imports whose process died were marked interrupted");
        }
        if store.is_embedded() {
            tracing::info!(database = %config.core.database_url(), "using the embedded SQLite database");
        } else {
            tracing::info!("using PostgreSQL");
        }
        let listener = TcpListener::bind(config.bind)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on ENGRAM_BIND {}: {e}", config.bind))?;
        let extractor = Arc::new(config.build_extractor()?);
        let embedder = Arc::new(config.build_embedder()?);
        let rate_limiter = RateLimiter::new(config.rate_limit_per_sec, config.rate_limit_burst()).map(Arc::new);
        let guard = Guard { authenticator: Arc::new(auth), rate_limiter };
        let state = AppState::new(Shared {
            store,
            guard,
            recall_counts: Arc::new(RecallCounts::new(config.recall_tracking)),
            config: Arc::new(config),
            metrics: telemetry::metrics_handle(),
            job_wakeup: Arc::new(Notify::new()),
            receipt_key: Arc::new(receipt_key),
            embedder,
            embedding_wakeup: Arc::new(Notify::new()),
            inline_embedding: tokio::sync::Semaphore::new(1),
        });
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
        // The model is fetched and loaded while the server already answers (full text only
        // until then); the task holds no lease or connection, so shutdown does not wait for it.
        let preparing = {
            let state = state.clone();
            let index_url = state.config.model_files.embedding_index_url.clone();
            tokio::spawn(async move {
                state.embedder.prepare(index_url.as_deref()).await;
                facts_changed(&state);
            })
        };
        tracing::info!(address = %listener.local_addr()?, "engram listening");
        axum::serve(listener, http::router(state.clone(), admin::router())).with_graceful_shutdown(shutdown).await?;
        let _ = stop_tx.send(true);
        preparing.abort();
        for task in background {
            let _ = task.await;
        }
        state.store.close().await;
        tracing::info!("engram stopped");
        Ok(())
    }
}

/// `ENGRAM_RECEIPT_KEY`, or the key generated into the data directory. The server and
/// the command line's import, export and migrate read the same one: the word index's
/// tags are keyed with it.
pub fn receipt_key(core: &CoreConfig) -> anyhow::Result<Secret> {
    match &core.receipt_key {
        Some(key) => Ok(key.clone()),
        None => Ok(Secret(crypto::load_or_create_secret(&core.data_dir.join("receipt-key"), MIN_SECRET_BYTES)?)),
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

#[cfg(test)]
mod tests {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

    #[test]
    fn the_open_files_soft_limit_is_raised_to_the_hard_limit() {
        let before = getrlimit(Resource::Nofile);
        // A low soft limit, as a process started from a default shell inherits it.
        let low = before.maximum.map_or(256, |most| most.min(256));
        setrlimit(Resource::Nofile, Rlimit { current: Some(low), maximum: before.maximum }).expect("lowered");
        super::raise_open_files_limit();
        assert_eq!(getrlimit(Resource::Nofile).current, before.maximum);
    }
}
