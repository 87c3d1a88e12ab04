//! The threads at the process edges: stdin reader, stdout writer, signal listener.

pub mod signals;
pub mod stdin;
pub mod stdout;
