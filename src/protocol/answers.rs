//! Order and shape of the protocol's answers.

/// Order and shape of the protocol's answers.
#[derive(Debug)]
pub struct Answers {
    /// When `abort` of a run (or of a retry delay) is answered.
    pub abort: AbortAnswer,
    /// What end of input (stdin closed) does.
    pub eof: EofPolicy,
    /// How `get_commands` says where an extension command comes from. 0.73.1: `path`;
    /// 0.87.1: `sourceInfo`.
    pub command_origin: CommandOrigin,
    /// Commands `get_commands` lists before any template, skill or extension. 0.73.1: none;
    /// 0.87.1: its inline `llama` extension command; 1.6.0: the built-in `llama` and `mcp`.
    pub builtin_commands: &'static [BuiltinCommand],
    /// What `get_session_stats` counts. 0.73.1: the context; 0.87.1: the whole session file
    /// (with the summaries' usage), the context usage estimated through its projection.
    pub session_stats: SessionStats,
    /// A successful `prompt`, `steer` or `follow_up` says what became of it
    /// (`data.disposition`: `started`, `queued` or `handled`). 0.73.1, 0.87.1: no `data`; 1.6.0:
    /// yes.
    pub prompt_disposition: bool,
    /// `get_last_assistant_text` skips assistant messages without text (an empty aborted or
    /// failed reply, a reply of tool calls only). 0.73.1, 0.87.1: no (the last assistant message,
    /// no text when it has none); 1.6.0: yes.
    pub last_text_skips_empty: bool,
    /// `cycle_model` from a model outside the cycle (set with `set_model` outside settings
    /// `enabledModels`) goes to the cycle's first model, also when the cycle has only one.
    /// 0.73.1, 0.87.1: no (as if the first were current: the second; `null` with fewer than
    /// two); 1.6.0: yes.
    pub cycle_from_outside_to_first: bool,
}

/// When `abort` is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortAnswer {
    /// 0.73.1: right after the aborted run's `agent_end`.
    AfterAgentEnd,
    /// 0.87.1: after the aborted run's `agent_settled`.
    AfterSettle,
}

/// What end of input does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EofPolicy {
    /// 0.73.1: finish what runs, then exit.
    Drain,
    /// 0.87.1: dispose at once: stop emitting, cancel everything, record nothing more, exit 0.
    Dispose,
}

/// How an extension command's origin is given in `get_commands`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandOrigin {
    Path,
    SourceInfo,
}

/// What `get_session_stats` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionStats {
    Context,
    SessionFile,
}

/// A command the version itself ships (`source: "extension"`, an inline extension).
#[derive(Debug)]
pub struct BuiltinCommand {
    pub name: &'static str,
    pub description: &'static str,
    /// `sourceInfo.path`.
    pub path: &'static str,
    /// `sourceInfo.source`. 0.87.1: `inline`; 1.6.0: `builtin`.
    pub source: &'static str,
    /// Listed only while MCP is on (`--no-mcp` drops it): 1.6.0's `mcp`.
    pub needs_mcp: bool,
}
