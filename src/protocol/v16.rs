//! pi 1.6.0: what changed since [`super::v087`].

// Every block keeps `..` the previous version, also where all of its fields changed: a field
// added later then needs no edit here.
#![allow(clippy::needless_update)]

use super::*;

pub const PROFILE: Profile = Profile {
    version: Version::V16,

    events: Events {
        settled_aborted: true,
        message_duration: true,
        message_thinking_level: true,
        cost_total_from_provider: true,
        extension_entries_announced: true,
        ..super::v087::PROFILE.events
    },

    answers: Answers {
        prompt_disposition: true,
        last_text_skips_empty: true,
        cycle_from_outside_to_first: true,
        builtin_commands: &[
            BuiltinCommand {
                name: "llama",
                description: "Manage llama.cpp router models",
                path: "builtin:llama.cpp",
                source: "builtin",
                needs_mcp: false,
            },
            BuiltinCommand {
                name: "mcp",
                description: "Manage MCP servers: sign in, reconnect, enable or disable, and change exposure",
                path: "builtin:mcp",
                source: "builtin",
                needs_mcp: true,
            },
        ],
        ..super::v087::PROFILE.answers
    },

    agent: Agent {
        early_session_file: true,
        ..super::v087::PROFILE.agent
    },

    compaction: Compaction {
        summary_thinking: false,
        summary_max_tokens: SummaryMaxTokens::ModelLimit,
        turn_prefix_focus: true,
        ..super::v087::PROFILE.compaction
    },

    retry: Retry {
        transient: TransientErrors::Wider,
        ..super::v087::PROFILE.retry
    },

    tools: Tools {
        validation: ValidationDialect::PiSchema,
        structured_content: true,
        tool_list_modifiers: true,
        codemode: true,
        mcp: McpDialect::Pi,
        find_paths_anchored: true,
        ls_limit_floored: true,
        grep_rg_lines: true,
        limits_probed: true,
        ..super::v087::PROFILE.tools
    },

    resources: Resources {
        ..super::v087::PROFILE.resources
    },

    llm: Llm {
        catalog: Catalog::V16,
        sdk: SdkGeneration::Pi16,
        provider_requires_model: true,
        tool_arguments_error: true,
        ..super::v087::PROFILE.llm
    },

    texts: Texts {
        // Back to `aborted` as in 0.73.1, with 0.87.1's text.
        aborted_between_turns: TrailingTurn {
            stop: TrailingStop::Aborted,
            text: "This operation was aborted",
        },
        llama_command: Some("/llama is available in interactive mode"),
        fork_unsaved: Some(
            "This session has not been saved yet. Send a message before cloning or forking it.",
        ),
        mcp_command_unconfigured: Some(
            "No MCP servers configured. Add them to {agentDir}/mcp.json or .pi/mcp.json.",
        ),
        system_prompt: PromptTexts {
            preamble: "You are a coding assistant running inside pi, a coding agent harness. Help users inspect files, run commands, and modify code.",
            tools_footer: "Additional tools may be available.",
            edit_rules: &[
                "Use edit for targeted changes. Batch changes to one file in a single call.",
                "Each edits[].oldText must exactly and uniquely match the original file. Keep matches short and non-overlapping; merge nearby changes without including large unchanged regions.",
            ],
            skills_paths: "Resolve relative paths against the skill's directory (parent of SKILL.md). Use absolute paths in tool calls.",
        },
        ..super::v087::PROFILE.texts
    },
};
