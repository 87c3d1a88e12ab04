//! pi 0.73.1: the protocol of the seeds and the shared scenarios.

use super::*;

pub const PROFILE: Profile = Profile {
    version: Version::V073,

    events: Events {},

    answers: Answers {},

    agent: Agent {},

    compaction: Compaction {},

    retry: Retry {},

    tools: Tools {},

    resources: Resources {},

    llm: Llm {
        sdk: SdkGeneration::Pi073,
        catalog: Catalog::V073,
    },

    texts: Texts {
        aborted_between_turns: TrailingTurn {
            stop: TrailingStop::Aborted,
            text: "Request was aborted.",
        },
        nothing_to_compact: "Nothing to compact (session too small)",
    },
};
