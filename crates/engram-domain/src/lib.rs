//! Plain types and pure rules, free of I/O: validation, the duplicate key of a fact,
//! replay-safe history and continuation checks, the memory prompt block, the extraction
//! decision, rolling summaries, the token budget. The bottom layer of the workspace: it
//! depends on no other crate of it.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod agent_config;
pub mod continuation;
pub mod conversation;
/// Randomness, hashes and secret files.
pub mod crypto;
pub mod event;
pub mod extracted;
pub mod fact;
pub mod fact_text;
pub mod ids;
pub mod import;
pub mod job;
pub mod json_writer;
pub mod memory_context;
pub mod message;
pub mod metadata;
pub mod near_duplicate;
pub mod nul;
pub mod owner;
pub mod page;
pub mod policy;
pub mod prompt;
pub mod replay;
pub mod search_query;
pub mod slot;
#[cfg(any(test, feature = "strategies"))]
pub mod strategies;
pub mod summary;
pub mod timestamp;
pub mod usage;
pub mod vector;
pub mod webhook;
pub mod working_memory;
