//! The RPC protocol: framing of stdin, command decoding, the response envelope and event frames.

pub mod command;
pub mod event;
pub mod frame;
pub mod partial;
pub mod response;
