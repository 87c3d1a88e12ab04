//! MCP servers' tools over stdio (JSON-RPC 2.0, one message per line). The pure parts live here:
//! the protocol messages and result conversion ([`protocol`]) and which servers to start
//! ([`config`]); the process I/O is [`crate::io::child`] and the state-machine glue is
//! `core::mcp`.

pub mod config;
pub mod mcp_json;
pub mod naming;
pub mod protocol;
pub mod result;
pub mod search;
