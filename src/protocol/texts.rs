//! Texts that differ between the versions.

/// Texts that differ between the versions, all in one place.
#[derive(Debug)]
pub struct Texts {
    /// The empty assistant message of the extra turn that ends a run aborted while its tools ran
    /// (spec 5.4 F): its stop reason and error text. Not monotone across versions: 0.73.1 says
    /// `aborted` / `Request was aborted.`, 0.87.1 `error` / `This operation was aborted`.
    pub aborted_between_turns: TrailingTurn,
    /// `compact` on a session with nothing to summarise.
    pub nothing_to_compact: &'static str,
    /// A prompt `/llama` is the version's built-in command: it is consumed with this warning
    /// (RPC has no interactive mode). 0.73.1, 0.87.1: none (sent as text); 1.6.0: a notify.
    pub llama_command: Option<&'static str>,
    /// A prompt `/mcp` with no MCP server configured is consumed with this notice (`{agentDir}`
    /// is the agent directory). 0.73.1, 0.87.1: none (sent as text); 1.6.0: a notify.
    pub mcp_command_unconfigured: Option<&'static str>,
}

/// Stop reason and error text of a synthesized trailing assistant message.
#[derive(Debug, Clone, Copy)]
pub struct TrailingTurn {
    pub stop: TrailingStop,
    pub text: &'static str,
}

/// The stop reason of a synthesized trailing assistant message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrailingStop {
    Aborted,
    Error,
}
