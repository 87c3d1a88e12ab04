//! pith: a headless coding agent speaking the pi RPC protocol.
//!
//! Threads at the edges (stdin reader, stdout writer, signals, LLM streaming, tools, bash, timers)
//! send [`core::event::Event`]s over crossbeam channels to one state machine
//! ([`core::machine`]) that owns all state. See `docs/architecture.md`.

pub mod acp;
pub mod app;
pub mod cancel;
pub mod cli;
pub mod codemode;
pub mod compaction;
pub mod config;
pub mod context;
pub mod core;
pub mod ext;
pub mod files;
#[doc(hidden)]
pub mod harness;
pub mod initial_message;
pub mod io;
pub mod json;
pub mod limits;
pub mod list_models;
pub mod llm;
pub mod malloc;
pub mod mcp;
pub mod message;
pub mod output_schema;
pub mod perms;
pub mod prompt;
pub mod protocol;
pub mod queues;
pub mod resources;
pub mod result_record;
pub mod retry;
pub mod rpc;
pub mod sandbox;
pub mod schema;
pub mod session;
pub mod sort;
pub mod tools;
pub mod trust;

/// Stack size of pith's own threads (edges, workers, LLM streams). The default 2 MiB is address
/// space, not memory, but each stack's touched pages stay resident for the thread's life and
/// hundreds of agents on a host pay for every one; nothing pith runs off the main thread recurses
/// deeply (JSON nesting is bounded at 128 levels by serde_json).
pub const THREAD_STACK: usize = 256 * 1024;
