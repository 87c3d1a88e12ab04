//! pi 0.87.1: what changed since [`super::v073`].

// Every block keeps `..` the previous version, also where all of its fields changed: a field
// added later then needs no edit here.
#![allow(clippy::needless_update)]

use super::*;

pub const PROFILE: Profile = Profile {
    version: Version::V087,

    events: Events {
        agent_end_will_retry: true,
        pending_stop_reason: true,
        update: UpdateShape::Live,
        compaction: CompactionEvents::Unified,
        settles_after_manual_compaction: false,
        ..super::v073::PROFILE.events
    },

    answers: Answers {
        abort: AbortAnswer::AfterSettle,
        eof: EofPolicy::Dispose,
        command_origin: CommandOrigin::SourceInfo,
        builtin_commands: &[BuiltinCommand {
            name: "llama",
            description: "Manage llama.cpp router models",
            path: "<inline:llama.cpp>",
            source: "inline",
            needs_mcp: false,
        }],
        session_stats: SessionStats::SessionFile,
        ..super::v073::PROFILE.answers
    },

    agent: Agent {
        system_messages: true,
        tool_changes: ToolChanges::Declare,
        fail_truncated_tool_calls: true,
        record_context_edits: true,
        child_env: &[("PI_CODING_AGENT", "true"), ("AI_AGENT", "pi")],
        session_tool_env: true,
        bash: RpcBash::Streamed,
        thinking_on_model_change: ThinkingOnModelChange::ModelSetting,
        session_switch: SessionSwitch::Rebuild,
        bash_results_at_run_end: true,
        replace_aborts_run: true,
        ..super::v073::PROFILE.agent
    },

    compaction: Compaction {
        flavor: CompactionFlavor::Projected,
        sequential_summaries: true,
        retry_summaries: true,
        summaries_uncached: true,
        recover_length_stops: true,
        prepare_before_start: true,
        key_before_preparation: false,
        ..super::v073::PROFILE.compaction
    },

    retry: Retry {
        transient: TransientErrors::WithNetworkLessQuota,
        delay: RetryDelay::Backoff,
        ..super::v073::PROFILE.retry
    },

    tools: Tools {
        line_counting: LineCounting::IgnoreFinalNewline,
        validation: ValidationDialect::TypeBox,
        edit_fuzzy_rewrite: FuzzyRewrite::TouchedLines,
        edit_patch: true,
        write_byte_count: false,
        read_images: ImageTypes::MagicBytes,
        bash_checks_timeout: true,
        bash_signal_exit_codes: true,
        ..super::v073::PROFILE.tools
    },

    resources: Resources {
        frontmatter_strips_bom: true,
        skill_rules: SkillRules::DescriptionRequired,
        template_description: TemplateDescription::StringOnly,
        template_args: TemplateArgs::WithDefaults,
        agents_nested_md_skills: true,
        agents_skills_own_source: true,
        project_trust: true,
        ..super::v073::PROFILE.resources
    },

    llm: Llm {
        sdk: SdkGeneration::Pi087,
        catalog: Catalog::V087,
        ..super::v073::PROFILE.llm
    },

    texts: Texts {
        aborted_between_turns: TrailingTurn {
            stop: TrailingStop::Error,
            text: "This operation was aborted",
        },
        fork_unsaved: Some(
            "This session has not been saved yet. Wait for the first assistant response before cloning or forking it.",
        ),
        ..super::v073::PROFILE.texts
    },
};
