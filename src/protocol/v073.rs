//! pi 0.73.1: the protocol of the seeds and the shared scenarios.

use super::*;

pub const PROFILE: Profile = Profile {
    version: Version::V073,

    events: Events {
        agent_end_will_retry: false,
        pending_stop_reason: false,
        update: UpdateShape::Snapshot,
        compaction: CompactionEvents::AutoPrefixed,
        settles_after_manual_compaction: true,
        settled_aborted: false,
        message_duration: false,
        message_thinking_level: false,
        cost_total_from_provider: false,
        extension_entries_announced: false,
    },

    answers: Answers {
        abort: AbortAnswer::AfterAgentEnd,
        eof: EofPolicy::Drain,
        command_origin: CommandOrigin::Path,
        builtin_commands: &[],
        session_stats: SessionStats::Context,
        prompt_disposition: false,
        last_text_skips_empty: false,
        cycle_from_outside_to_first: false,
    },

    agent: Agent {
        system_messages: false,
        tool_changes: ToolChanges::Refresh,
        fail_truncated_tool_calls: false,
        record_context_edits: false,
        child_env: &[("PI_CODING_AGENT", "true")],
        session_tool_env: false,
        bash: RpcBash::Collected,
        thinking_on_model_change: ThinkingOnModelChange::KeepCurrent,
        session_switch: SessionSwitch::CarryOver,
        early_session_file: false,
        bash_results_at_run_end: false,
        replace_aborts_run: false,
    },

    compaction: Compaction {
        flavor: CompactionFlavor::Entries,
        sequential_summaries: false,
        retry_summaries: false,
        summaries_uncached: false,
        recover_length_stops: false,
        prepare_before_start: false,
        summary_thinking: true,
        summary_max_tokens: SummaryMaxTokens::ReserveShare,
        turn_prefix_focus: false,
        key_before_preparation: true,
    },

    retry: Retry {
        transient: TransientErrors::Base,
        delay: RetryDelay::RetryAfterOrBackoff,
    },

    tools: Tools {
        line_counting: LineCounting::Split,
        validation: ValidationDialect::TypeBoxNullsConverted,
        edit_fuzzy_rewrite: FuzzyRewrite::WholeFile,
        edit_patch: false,
        write_byte_count: true,
        read_images: ImageTypes::Reference,
        bash_checks_timeout: false,
        bash_signal_exit_codes: false,
        structured_content: false,
        tool_list_modifiers: false,
        codemode: false,
        mcp: McpDialect::Pith,
        find_paths_anchored: false,
        ls_limit_floored: false,
        grep_rg_lines: false,
        limits_probed: false,
    },

    resources: Resources {
        frontmatter_strips_bom: false,
        skill_rules: SkillRules::Reference,
        template_description: TemplateDescription::Truthy,
        template_args: TemplateArgs::Plain,
        agents_nested_md_skills: false,
        agents_skills_own_source: false,
        project_trust: false,
    },

    llm: Llm {
        sdk: SdkGeneration::Pi073,
        catalog: Catalog::V073,
        provider_requires_model: false,
        tool_arguments_error: false,
    },

    texts: Texts {
        aborted_between_turns: TrailingTurn {
            stop: TrailingStop::Aborted,
            text: "Request was aborted.",
        },
        nothing_to_compact: "Nothing to compact (session too small)",
        llama_command: None,
        mcp_command_unconfigured: None,
        fork_unsaved: None,
        system_prompt: PromptTexts {
            preamble: "You are an expert coding assistant operating inside pi, a coding agent harness. You help users by reading files, executing commands, editing code, and writing new files.",
            tools_footer: "In addition to the tools above, you may have access to other custom tools depending on the project.",
            edit_rules: &[
                "Use edit for precise changes (edits[].oldText must match exactly)",
                "When changing multiple separate locations in one file, use one edit call with multiple entries in edits[] instead of multiple edit calls",
                "Each edits[].oldText is matched against the original file, not after earlier edits are applied. Do not emit overlapping or nested edits. Merge nearby changes into one edit.",
                "Keep edits[].oldText as small as possible while still being unique in the file. Do not pad with large unchanged regions.",
            ],
            skills_paths: "When a skill file references a relative path, resolve it against the skill directory (parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.",
        },
    },
};
