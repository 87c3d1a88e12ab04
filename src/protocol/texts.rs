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
    /// `fork` / `clone` of a session whose file is not written yet (before its first assistant
    /// message; 1.6.0: its first user message) from an entry other than the start. 0.73.1:
    /// `None`, its session manager's `Entry <id> not found` (the entry the branch would end
    /// at); 0.87.1 and 1.6.0 say why, each in its own words.
    pub fork_unsaved: Option<&'static str>,
    /// Texts of the sectioned system prompt (`crate::prompt::sections`, used when
    /// `agent.system_messages` is on). 0.73.1: not used (its prompt is one text, kept as
    /// 0.87.1's here); 0.87.1: "You are an expert coding assistant…", four edit rules;
    /// 1.6.0: "You are a coding assistant running inside pi…", two edit rules, a shorter
    /// tools footer.
    pub system_prompt: PromptTexts,
}

/// The fixed texts of the sectioned system prompt.
#[derive(Debug)]
pub struct PromptTexts {
    /// The `preamble` section (when no custom prompt replaces it).
    pub preamble: &'static str,
    /// The sentence after the tool list in the `tools` section.
    pub tools_footer: &'static str,
    /// The edit tool's rules (its `promptGuidelines`) in the `rules` section.
    pub edit_rules: &'static [&'static str],
    /// The sentence of the skills listing on relative paths in a skill's files.
    pub skills_paths: &'static str,
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
