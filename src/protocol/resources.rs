//! Skills, prompt templates, context files and commands.

/// Skills, prompt templates, context files and commands.
#[derive(Debug)]
pub struct Resources {
    /// A byte-order mark before a skill's or template's `---` frontmatter is dropped first.
    /// 0.73.1: false; 0.87.1: true.
    pub frontmatter_strips_bom: bool,
    /// How a skill file's frontmatter is checked and named.
    /// 0.73.1: `Reference`; 0.87.1: `DescriptionRequired`.
    pub skill_rules: SkillRules,
    /// Which frontmatter `description` a prompt template keeps.
    /// 0.73.1: `Truthy`; 0.87.1: `StringOnly`.
    pub template_description: TemplateDescription,
    /// How `/template args` is split and substituted.
    /// 0.73.1: `Plain`; 0.87.1: `WithDefaults`.
    pub template_args: TemplateArgs,
    /// Under an `.agents/skills` directory, `.md` files below its root are skills too (not only
    /// `SKILL.md`). 0.73.1: false; 0.87.1: true.
    pub agents_nested_md_skills: bool,
    /// Skills from an `.agents` directory are a source of their own (`baseDir` the `.agents`
    /// parent) instead of joining the project's or user's `.pi` skills.
    /// 0.73.1: false; 0.87.1: true.
    pub agents_skills_own_source: bool,
    /// Project trust (`crate::trust`): a project with `.pi` files or `.mcp.json` is loaded only
    /// when `--approve`, the trust store or `defaultProjectTrust: "always"` says so.
    /// 0.73.1: false (everything is loaded unless `--no-approve`); 0.87.1: true.
    pub project_trust: bool,
}

/// How a skill file is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkillRules {
    /// pi 0.73.1: broken frontmatter is always a warning; a missing description is warned about
    /// and skips the skill; a truthy non-string `description`/`name` skips it with the
    /// JavaScript `TypeError` as the warning; the name is checked against its parent directory.
    Reference,
    /// pi 0.87.1: a file other than `SKILL.md` without a description (or with broken
    /// frontmatter) is silently not a skill; only string descriptions and names count; the
    /// name is not compared with the parent directory.
    DescriptionRequired,
}

/// Which frontmatter `description` a prompt template keeps (else: its first non-empty line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateDescription {
    /// Any JavaScript-truthy value, as it is (pi 0.73.1).
    Truthy,
    /// Only a string (pi 0.87.1).
    StringOnly,
}

/// How `/template args` is split and substituted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateArgs {
    /// pi 0.73.1: the name ends at the first space; arguments split at spaces and tabs; `$N`,
    /// `${@:N:L}`, `$ARGUMENTS` and `$@` replaced in successive passes.
    Plain,
    /// pi 0.87.1: any JavaScript white space separates; one pass that also knows
    /// `${N:-default}`, `${@:-default}` and `${ARGUMENTS:-default}`.
    WithDefaults,
}
