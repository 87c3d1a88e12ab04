//! The threads at the process edges: stdin reader, stdout writer, the watch on signals and on
//! the host hanging up, and the reader/writer pair of each child process speaking JSON lines
//! (extensions, MCP servers).

pub mod child;
pub mod stdin;
pub mod stdout;
pub mod sys;
pub mod timer;
pub mod watch;
