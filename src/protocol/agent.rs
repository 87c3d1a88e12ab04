//! The agent loop (turns, tool calls, system messages).

/// The agent loop (turns, tool calls, system messages).
#[derive(Debug)]
pub struct Agent {}
