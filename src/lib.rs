//! Engram: a memory service for AI agents.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

/// The operator's admin panel under `/admin`.
pub mod admin;
/// The application: build, serve, shut down.
pub mod app;
/// Bearer tokens, scopes and the `Caller` extractor.
pub mod auth;
/// Settings from flags and environment.
pub mod config;
/// Plain types and pure rules: the `engram-domain` crate, under the name every layer of
/// the server knows it by.
pub use engram_domain as domain;
/// Randomness, hashes and secret files: the domain crate's, where the layers below the
/// server use them too.
pub use engram_domain::crypto;
/// Embedders that turn texts into vectors, for recall by meaning: the `engram-embed` crate.
pub use engram_embed as embed;
/// The API error type.
pub mod error;
/// Extractors that turn conversations into facts: the `engram-extract` crate.
pub use engram_extract as extract;
/// Routes, handlers and middleware.
pub mod http;
/// Which module may use which (a test that reads the source).
mod layers;
/// What every call to another server shares: failures by kind, secret headers,
/// `Retry-After`: the `engram-remote` crate.
pub use engram_remote as remote_servers;
/// What handlers and workers share: the app state and the operations both start.
pub mod service;
/// SQL, for PostgreSQL and SQLite: the `engram-store` crate.
pub use engram_store as store;
/// Logs and metrics.
pub mod telemetry;
/// Background jobs and sweepers.
pub mod worker;
