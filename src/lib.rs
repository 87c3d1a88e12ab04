//! pith: a headless coding agent speaking the pi RPC protocol.
//!
//! Threads at the edges (stdin reader, stdout writer, signals, LLM streaming, tools, bash, timers)
//! send [`core::event::Event`]s over crossbeam channels to one state machine
//! ([`core::machine`]) that owns all state. See `docs/architecture.md`.

pub mod app;
pub mod cancel;
pub mod cli;
pub mod compaction;
pub mod compaction_087;
pub mod compat;
pub mod config;
pub mod core;
pub mod ext;
pub mod files;
#[doc(hidden)]
pub mod harness;
pub mod initial_message;
pub mod io;
pub mod json;
pub mod list_models;
pub mod llm;
pub mod mcp;
pub mod message;
pub mod resources;
pub mod retry;
pub mod rpc;
pub mod session;
pub mod tools;
pub mod trust;
