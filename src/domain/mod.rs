//! Plain types and pure rules, free of I/O: validation, the duplicate key of a fact,
//! replay-safe history and continuation checks, the memory prompt block, the extraction
//! decision, rolling summaries, the token budget.

pub mod agent_config;
pub mod continuation;
pub mod conversation;
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
pub mod summary;
pub mod timestamp;
pub mod usage;
pub mod vector;
pub mod webhook;
pub mod working_memory;
