//! pi 0.87.1: what changed since [`super::v073`].

use super::*;

pub const PROFILE: Profile = Profile {
    version: Version::V087,

    events: Events {
        ..super::v073::PROFILE.events
    },

    answers: Answers {
        ..super::v073::PROFILE.answers
    },

    agent: Agent {
        ..super::v073::PROFILE.agent
    },

    compaction: Compaction {
        ..super::v073::PROFILE.compaction
    },

    retry: Retry {
        ..super::v073::PROFILE.retry
    },

    tools: Tools {
        ..super::v073::PROFILE.tools
    },

    resources: Resources {
        ..super::v073::PROFILE.resources
    },

    llm: Llm {
        sdk: SdkGeneration::Pi087,
        catalog: Catalog::V087,
    },

    texts: Texts {
        aborted_between_turns: TrailingTurn {
            stop: TrailingStop::Error,
            text: "This operation was aborted",
        },
        ..super::v073::PROFILE.texts
    },
};
