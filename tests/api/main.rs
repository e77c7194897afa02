//! The integration tests, as one binary: linking the whole stack once instead of once
//! per file is most of their build time. Each module is one area of the API, run against
//! the real app (`common`) on SQLite and PostgreSQL.
//!
//! One file's tests: `cargo test --test api conversations::`.
//!
//! All tests share this process, and with it what is global to a process: the metrics
//! recorder (which every app in a process already shared) and the log subscriber, which
//! the log capture installs, so that test runs in a child process of its own (`logs`).

mod common;

mod conversations;
mod curated_facts;
mod deploy;
mod embed_openai;
mod erasure_files;
mod erasure_reader_process;
mod events;
mod extraction;
mod facts;
mod facts_over_time;
mod forgetting;
mod foundation;
mod gdpr;
mod hardening;
mod import;
mod llm_anthropic;
mod llm_fallback;
mod llm_openai;
mod logs;
mod mcp;
mod models_fetch;
mod operations;
mod owner_tags;
mod processes;
mod provenance;
mod rolling;
mod sanitize;
mod search;
mod secrets;
mod semantic;
mod shared_memory;
mod spec;
mod summaries;
mod superseded;
mod threads;
mod token_usage;
mod tool_nul;
mod webhooks;
mod working_memory;
