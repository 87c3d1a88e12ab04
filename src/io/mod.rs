//! The threads at the process edges: stdin reader, stdout writer, signal listener, and the
//! reader/writer pair of each child process speaking JSON lines (extensions, MCP servers).

pub mod child;
pub mod signals;
pub mod stdin;
pub mod stdout;
