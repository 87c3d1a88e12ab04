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
        ..super::v087::PROFILE.events
    },

    answers: Answers {
        prompt_disposition: true,
        last_text_skips_empty: true,
        ..super::v087::PROFILE.answers
    },

    agent: Agent {
        early_session_file: true,
        ..super::v087::PROFILE.agent
    },

    compaction: Compaction {
        ..super::v087::PROFILE.compaction
    },

    retry: Retry {
        ..super::v087::PROFILE.retry
    },

    tools: Tools {
        ..super::v087::PROFILE.tools
    },

    resources: Resources {
        ..super::v087::PROFILE.resources
    },

    llm: Llm {
        catalog: Catalog::V16,
        ..super::v087::PROFILE.llm
    },

    texts: Texts {
        // Back to `aborted` as in 0.73.1, with 0.87.1's text.
        aborted_between_turns: TrailingTurn {
            stop: TrailingStop::Aborted,
            text: "This operation was aborted",
        },
        llama_command: Some("/llama is available in interactive mode"),
        mcp_command_unconfigured: Some(
            "No MCP servers configured. Add them to {agentDir}/mcp.json or .pi/mcp.json.",
        ),
        ..super::v087::PROFILE.texts
    },
};
