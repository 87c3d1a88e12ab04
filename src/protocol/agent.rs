//! The agent loop (turns, tool calls, system messages).

/// The agent loop (turns, tool calls, system messages).
#[derive(Debug)]
pub struct Agent {
    /// The system prompt travels in the transcript as `role:"system"` messages (declared at the
    /// start of a run when the prompt or tools differ, kept in the context and the requests).
    /// 0.73.1: no (one system prompt per request; system messages a session file holds are left
    /// out of the context); 0.87.1: yes.
    pub system_messages: bool,
    /// How tool changes between the turns of a run (an extension re-registered, an MCP server's
    /// list changed) reach the model.
    pub tool_changes: ToolChanges,
    /// A reply cut at the token limit (`stopReason:"length"`) with tool calls fails the calls
    /// instead of running them. 0.73.1: no; 0.87.1: yes.
    pub fail_truncated_tool_calls: bool,
    /// A reply dropped from the context (a failed attempt before an auto-retry or an overflow
    /// compaction) is recorded as a `context_edit` entry. 0.73.1: no; 0.87.1: yes.
    pub record_context_edits: bool,
    /// Variables every child process gets (pi sets them on its own process). 0.73.1:
    /// `PI_CODING_AGENT`; 0.87.1 also `AI_AGENT=pi`.
    pub child_env: &'static [(&'static str, &'static str)],
    /// The bash tool also gets the session's `PI_SESSION_ID`, `PI_SESSION_FILE` (removed for an
    /// in-memory session), `PI_PROVIDER`, `PI_MODEL` and `PI_REASONING_LEVEL`. 0.73.1: no;
    /// 0.87.1: yes.
    pub session_tool_env: bool,
    /// The RPC `bash` command.
    pub bash: RpcBash,
    /// The thinking level of a model chosen without an explicit level (at start-up or by a
    /// switch): the current one (0.73.1) or the model's own setting from settings (0.87.1).
    pub thinking_on_model_change: ThinkingOnModelChange,
    /// What a session switch (new, switch, fork, clone) keeps.
    pub session_switch: SessionSwitch,
    /// The session file is written from the first user message on (before any reply). 0.73.1,
    /// 0.87.1: no (from the first assistant message on); 1.6.0: yes.
    pub early_session_file: bool,
    /// RPC `bash` results that finished during a run enter the context when the run ends
    /// (before `agent_settled`), in the order they finished. 0.73.1: no (before the next
    /// prompt); 0.87.1: yes.
    pub bash_results_at_run_end: bool,
    /// A session switch (new, switch, fork, clone) during a run aborts the run first, with the
    /// events of an `abort` (`message_end` aborted, `turn_end`, `agent_end`, `agent_settled`),
    /// and the aborted reply is written to the session being left; then the command is
    /// answered. 0.73.1: no (the run stops silently, its reply is written nowhere); 0.87.1: yes.
    pub replace_aborts_run: bool,
}

/// How tool changes between turns reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolChanges {
    /// 0.73.1: each request carries the tools active now.
    Refresh,
    /// 0.87.1: a `role:"system"` message after `turn_start` declares what changed.
    Declare,
}

/// The RPC `bash` command's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcBash {
    /// 0.73.1: collected, lines counted by splitting.
    Collected,
    /// 0.87.1: streamed as `bash_execution_update`, lines counted without the empty piece after
    /// a final newline, a signal reported as an exit code.
    Streamed,
}

/// The thinking level after a model change without an explicit level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingOnModelChange {
    /// 0.73.1: the current level when the old model reasons, else the default (else `medium`).
    KeepCurrent,
    /// 0.87.1: the model's own setting, else the settings' default, else the current level.
    ModelSetting,
}

/// What a session switch keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionSwitch {
    /// 0.73.1: the model and level set over RPC carry over (pi saved the setters).
    CarryOver,
    /// 0.87.1: the runtime is rebuilt from the command line (model, level, context files).
    Rebuild,
}
