//! pi 0.87.1: what changed since [`super::v073`].

// Every block keeps `..` the previous version, also where all of its fields changed: a field
// added later then needs no edit here.
#![allow(clippy::needless_update)]

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
        ..super::v073::PROFILE.llm
    },

    texts: Texts {
        aborted_between_turns: TrailingTurn {
            stop: TrailingStop::Error,
            text: "This operation was aborted",
        },
        ..super::v073::PROFILE.texts
    },
};
