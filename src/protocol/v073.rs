//! pi 0.73.1: the protocol of the seeds and the shared scenarios.

use super::*;

pub const PROFILE: Profile = Profile {
    version: Version::V073,

    events: Events {},

    answers: Answers {},

    agent: Agent {},

    compaction: Compaction {},

    retry: Retry {},

    tools: Tools {
        line_counting: LineCounting::Split,
        validation: ValidationDialect::Ajv,
        edit_fuzzy_rewrite: FuzzyRewrite::WholeFile,
        edit_patch: false,
        write_byte_count: true,
        read_images: ImageTypes::Reference,
        bash_checks_timeout: false,
        bash_signal_exit_codes: false,
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

    llm: Llm {},

    texts: Texts {
        aborted_between_turns: TrailingTurn {
            stop: TrailingStop::Aborted,
            text: "Request was aborted.",
        },
        nothing_to_compact: "Nothing to compact (session too small)",
    },
};
