//! Skills: one `SKILL.md` (or a root `.md` file) turned into a [`Skill`] with pi's validation
//! rules, the `<available_skills>` block of the system prompt, and the `/skill:name args`
//! expansion. Pure: the loader (`load.rs`) reads the files.

use serde_json::Value;

use super::frontmatter;
use super::paths::{basename, dirname};
use super::{Diagnostic, SourceInfo, js_trim, js_truthy, utf16_len};
use crate::protocol::{self, SkillRules};

const MAX_NAME_LENGTH: usize = 64;
const MAX_DESCRIPTION_LENGTH: usize = 1024;

#[derive(Clone, Debug, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The path the skill was found at (pi's `filePath`: not canonicalised).
    pub file_path: String,
    /// The skill's directory (`dirname(file_path)`).
    pub base_dir: String,
    pub source_info: SourceInfo,
    /// `disable-model-invocation: true`: left out of the system prompt, still a command.
    pub disable_model_invocation: bool,
}

/// pi's name rules (0.73.1 also requires the name to match the parent directory).
fn validate_name(name: &str, parent: Option<&str>) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(parent) = parent {
        if name != parent {
            errors.push(format!(
                "name \"{name}\" does not match parent directory \"{parent}\""
            ));
        }
    }
    let len = utf16_len(name);
    if len > MAX_NAME_LENGTH {
        errors.push(format!("name exceeds {MAX_NAME_LENGTH} characters ({len})"));
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errors.push(
            "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)".into(),
        );
    }
    if name.starts_with('-') || name.ends_with('-') {
        errors.push("name must not start or end with a hyphen".into());
    }
    if name.contains("--") {
        errors.push("name must not contain consecutive hyphens".into());
    }
    errors
}

/// A skill from a file's text, as pi's `loadSkillFromFile` decides it: `None` when it is
/// skipped; the diagnostics are warnings either way. `source_info` is filled in by the loader.
pub fn from_file(
    file_path: &str,
    content: &str,
    profile: &protocol::Resources,
    source_info: SourceInfo,
) -> (Option<Skill>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let warn = |diags: &mut Vec<Diagnostic>, m: String| {
        diags.push(Diagnostic::warning(m, file_path));
    };
    let declared = basename(file_path) == "SKILL.md";
    let fm = match frontmatter::fields(content, profile.frontmatter_strips_bom) {
        Ok(f) => f,
        Err(e) => {
            if profile.skill_rules == SkillRules::Reference || declared {
                warn(&mut diags, e.to_string());
            }
            return (None, diags);
        }
    };
    let base_dir = dirname(file_path);
    let parent = basename(&base_dir).to_string();
    let description = fm.get("description");
    let (description, name) = if profile.skill_rules == SkillRules::DescriptionRequired {
        let desc = match description {
            Some(Value::String(s)) if !js_trim(s).is_empty() => Some(s.clone()),
            _ => None,
        };
        if !declared && desc.is_none() {
            return (None, diags);
        }
        match &desc {
            None => warn(&mut diags, "description is required".into()),
            Some(d) if utf16_len(d) > MAX_DESCRIPTION_LENGTH => warn(
                &mut diags,
                format!(
                    "description exceeds {MAX_DESCRIPTION_LENGTH} characters ({})",
                    utf16_len(d)
                ),
            ),
            Some(_) => {}
        }
        let name = match fm.get("name") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => parent.clone(),
        };
        for e in validate_name(&name, None) {
            warn(&mut diags, e);
        }
        (desc, name)
    } else {
        // 0.73.1: `!description || description.trim() === ""`; a truthy non-string makes
        // `.trim` throw, which skips the file with that error as the warning.
        let desc = match description {
            Some(v) if !js_truthy(v) => None,
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                warn(&mut diags, "description.trim is not a function".into());
                return (None, diags);
            }
        };
        match &desc {
            Some(d) if js_trim(d).is_empty() => warn(&mut diags, "description is required".into()),
            None => warn(&mut diags, "description is required".into()),
            Some(d) if utf16_len(d) > MAX_DESCRIPTION_LENGTH => warn(
                &mut diags,
                format!(
                    "description exceeds {MAX_DESCRIPTION_LENGTH} characters ({})",
                    utf16_len(d)
                ),
            ),
            Some(_) => {}
        }
        let name = match fm.get("name") {
            Some(v) if !js_truthy(v) => parent.clone(),
            None => parent.clone(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                warn(&mut diags, "name.startsWith is not a function".into());
                return (None, diags);
            }
        };
        for e in validate_name(&name, Some(&parent)) {
            warn(&mut diags, e);
        }
        (desc.filter(|d| !js_trim(d).is_empty()), name)
    };
    let Some(description) = description else {
        return (None, diags);
    };
    let disable_model_invocation = fm.get("disable-model-invocation") == Some(&Value::Bool(true));
    (
        Some(Skill {
            name,
            description,
            file_path: file_path.to_string(),
            base_dir,
            source_info,
            disable_model_invocation,
        }),
        diags,
    )
}

fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Which tool the prompt tells the model to read skill files with (0.87.1 falls back to bash).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadTool {
    Read,
    Bash,
}

/// pi's `formatSkillsForPrompt`: empty when no skill is visible to the model; otherwise starts
/// with two newlines (0.73.1 appends it to the prompt as it is; 0.87.1 trims it into a section).
/// `paths`: the version's sentence on relative paths (profile `texts.system_prompt`).
pub fn format_for_prompt(skills: &[Skill], tool: ReadTool, paths: &str) -> String {
    let visible: Vec<&Skill> = skills
        .iter()
        .filter(|s| !s.disable_model_invocation)
        .collect();
    if visible.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n\nThe following skills provide specialized instructions for specific tasks.\n",
    );
    s.push_str(match tool {
        ReadTool::Read => {
            "Use the read tool to load a skill's file when the task matches its description.\n"
        }
        ReadTool::Bash => {
            "Use bash to load a skill's file when the task matches its description.\n"
        }
    });
    s.push_str(paths);
    s.push_str("\n\n<available_skills>");
    for k in visible {
        s.push_str("\n  <skill>\n    <name>");
        s.push_str(&escape_xml(&k.name));
        s.push_str("</name>\n    <description>");
        s.push_str(&escape_xml(&k.description));
        s.push_str("</description>\n    <location>");
        s.push_str(&escape_xml(&k.file_path));
        s.push_str("</location>\n  </skill>");
    }
    s.push_str("\n</available_skills>");
    s
}

/// `/skill:name args` → (name, args); `None` when the text is not a skill command. As pi: the
/// name runs to the first space (so it may contain newlines), the args are trimmed.
pub fn parse_command(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix("/skill:")?;
    Some(match rest.find(' ') {
        Some(i) => (&rest[..i], js_trim(&rest[i + 1..])),
        None => (rest, ""),
    })
}

/// The text a skill command expands to, from the skill and its file's current body.
pub fn expansion(skill: &Skill, body: &str, args: &str) -> String {
    let block = format!(
        "<skill name=\"{}\" location=\"{}\">\nReferences are relative to {}.\n\n{}\n</skill>",
        skill.name, skill.file_path, skill.base_dir, body
    );
    if args.is_empty() {
        block
    } else {
        format!("{block}\n\n{args}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V073: &protocol::Resources = &protocol::v073::PROFILE.resources;
    const V087: &protocol::Resources = &protocol::v087::PROFILE.resources;

    fn info() -> SourceInfo {
        SourceInfo::synthetic("/p/x/SKILL.md", "local", None, Some("/p/x".into()))
    }

    fn load(path: &str, text: &str, profile: &protocol::Resources) -> (Option<Skill>, Vec<String>) {
        let (s, d) = from_file(path, text, profile, info());
        (s, d.into_iter().map(|d| d.message).collect())
    }

    #[test]
    fn valid_skill_and_warnings_that_still_load() {
        let (s, d) = load(
            "/s/alpha/SKILL.md",
            "---\nname: alpha\ndescription: Does alpha.\n---\nBody",
            V073,
        );
        let s = s.unwrap();
        assert_eq!(
            (s.name.as_str(), s.description.as_str()),
            ("alpha", "Does alpha.")
        );
        assert_eq!(s.base_dir, "/s/alpha");
        assert!(d.is_empty());
        let (s, d) = load(
            "/s/x/SKILL.md",
            "---\nname: Bad_Name\ndescription: d\n---\n",
            V073,
        );
        assert_eq!(s.unwrap().name, "Bad_Name");
        assert_eq!(d.len(), 2, "{d:?}");
        // 0.87.1 dropped the parent-directory check.
        let (_, d) = load(
            "/s/x/SKILL.md",
            "---\nname: other\ndescription: d\n---\n",
            V087,
        );
        assert!(d.is_empty(), "{d:?}");
    }

    #[test]
    fn skipped_skills() {
        for (text, why) in [
            ("---\nname: a\n---\n", "description is required"),
            ("no frontmatter", "description is required"),
            ("---\ndescription: '  '\n---\n", "description is required"),
            (
                "---\ndescription: 12\n---\n",
                "description.trim is not a function",
            ),
            ("---\ndescription: a: b\n---\n", "Nested mappings"),
            (
                "---\nname: 5\ndescription: d\n---\n",
                "name.startsWith is not a function",
            ),
        ] {
            let (s, d) = load("/s/a/SKILL.md", text, V073);
            assert!(s.is_none(), "{text}");
            assert!(d.iter().any(|m| m.contains(why)), "{text}: {d:?}");
        }
        // 0.87.1: a root .md without a description is not a skill and no warning.
        let (s, d) = load("/s/notes.md", "just notes", V087);
        assert!(s.is_none() && d.is_empty());
        let (s, d) = load("/s/notes.md", "just notes", V073);
        assert!(s.is_none() && !d.is_empty());
    }

    #[test]
    fn prompt_block_and_expansion() {
        let mut a = load("/s/a/SKILL.md", "---\ndescription: x <&> \"'\n---\nB", V073)
            .0
            .unwrap();
        let hidden = Skill {
            disable_model_invocation: true,
            ..a.clone()
        };
        assert_eq!(
            format_for_prompt(std::slice::from_ref(&hidden), ReadTool::Read, "P"),
            ""
        );
        let block = format_for_prompt(&[a.clone(), hidden], ReadTool::Read, "P");
        assert!(block.starts_with("\n\nThe following skills"));
        assert!(block.contains("its description.\nP\n\n<available_skills>"));
        assert!(block.ends_with("<available_skills>\n  <skill>\n    <name>a</name>\n    <description>x &lt;&amp;&gt; &quot;&apos;</description>\n    <location>/s/a/SKILL.md</location>\n  </skill>\n</available_skills>"));
        assert_eq!(parse_command("/skill:a  go  "), Some(("a", "go")));
        assert_eq!(parse_command("/skill:a"), Some(("a", "")));
        assert_eq!(parse_command("/review"), None);
        a.name = "a".into();
        assert_eq!(
            expansion(&a, "Body", "go"),
            "<skill name=\"a\" location=\"/s/a/SKILL.md\">\nReferences are relative to /s/a.\n\nBody\n</skill>\n\ngo"
        );
    }
}
