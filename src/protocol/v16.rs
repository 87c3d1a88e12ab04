//! pi 1.6.0: what changed since [`super::v087`].

// Every block keeps `..` the previous version, also where all of its fields changed: a field
// added later then needs no edit here.
#![allow(clippy::needless_update)]

use super::*;

pub const PROFILE: Profile = Profile {
    version: Version::V16,

    events: Events {
        ..super::v087::PROFILE.events
    },

    answers: Answers {
        ..super::v087::PROFILE.answers
    },

    agent: Agent {
        ..super::v087::PROFILE.agent
    },

    compaction: Compaction {
        ..super::v087::PROFILE.compaction
    },

    retry: Retry {
        ..super::v087::PROFILE.retry
    },

    tools: Tools {
        validation: ValidationDialect::PiSchema,
        structured_content: true,
        tool_list_modifiers: true,
        ..super::v087::PROFILE.tools
    },

    resources: Resources {
        ..super::v087::PROFILE.resources
    },

    llm: Llm {
        catalog: Catalog::V16,
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
        ..super::v087::PROFILE.texts
    },
};
