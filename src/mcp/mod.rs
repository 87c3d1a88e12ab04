//! MCP servers' tools over stdio (JSON-RPC 2.0, one message per line) or Streamable HTTP. The
//! pure parts live here: the protocol messages and result conversion ([`protocol`]) and which
//! servers to start ([`config`]); the process I/O is [`crate::io::child`], the HTTP transport
//! [`http`] (with pi's stored credentials, [`auth`]), and the state-machine glue is `core::mcp`.

pub mod auth;
pub mod config;
pub mod http;
pub mod mcp_json;
pub mod naming;
pub mod protocol;
pub mod result;
pub mod search;
