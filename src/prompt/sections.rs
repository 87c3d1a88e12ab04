//! pi 0.87.1's system prompt (`--compat 0.87`): named sections instead of one text, carried in
//! the transcript as `role:"system"` messages.
//!
//! The pure part builds the sections (`preamble`, `<tools>`, `<rules>`, `<addendum>`,
//! `<project_context>`, `<cwd>`), the tool declarations, and the message that patches what the
//! transcript already declares ([`Declared::update`]); rendering the sections gives the
//! request's system prompt. pi's `<docs>` section (paths of its installed documentation) is left
//! out: pith has no documentation tree to point at (docs/rpc.md).
//!
//! The machine glue ([`crate::core::prompt`]) decides when a run declares a change: before the
//! prompt of a run whose sections or tools differ from what the context already declares (the
//! first prompt of a session, after a tool change, or on a session written under another prompt).
//! The rendered prompt is cached by its sections ([`PromptCache`]), so a run whose prompt did not
//! change reuses the text.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::message::{AgentMessage, SystemMessage, ToolDeclaration, ToolRef, UserContent};
use crate::tools::Tool;

use crate::protocol::PromptTexts;

/// Inputs that decide the sections.
pub struct SectionInputs<'a> {
    pub cwd: &'a Path,
    /// `(name, one-liner)` of each active tool, in order.
    pub tools: &'a [(&'a str, &'a str)],
    /// `--system-prompt` / `SYSTEM.md`: replaces the preamble, tools and rules.
    pub custom: Option<&'a str>,
    /// `--append-system-prompt` / `APPEND_SYSTEM.md`: the `addendum` section.
    pub append: Option<&'a str>,
    /// `AGENTS.md` / `CLAUDE.md` files, global first.
    pub context_files: &'a [(PathBuf, String)],
    /// The skills listing (`resources::skills::format_for_prompt`, trimmed): the `skills`
    /// section; empty when no skill is listed.
    pub skills: &'a str,
    /// The guidelines of the active extension tools (their `promptGuidelines`), in tool order.
    pub guidelines: &'a [&'a str],
    /// The version's fixed texts (preamble, tools footer, edit rules).
    pub texts: &'a PromptTexts,
}

/// Per-tool rules (the tools' `promptGuidelines` in pi 0.87.1; the edit tool's are the version's).
pub fn tool_rules(name: &str, texts: &PromptTexts) -> &'static [&'static str] {
    match name {
        "read" => &["Use read to examine files instead of cat or sed."],
        "bash" => {
            &["You can inspect PI_* environment variables for current model and session details."]
        }
        "edit" => texts.edit_rules,
        "write" => &["Use write only for new files or complete rewrites."],
        crate::codemode::NAME => &[crate::codemode::GUIDELINE],
        _ => &[],
    }
}

fn rules(tools: &[(&str, &str)], remote: &[&str], texts: &PromptTexts) -> String {
    let has = |n: &str| tools.iter().any(|(t, _)| *t == n);
    let mut rules: Vec<&str> = Vec::new();
    if has("bash") && !has("grep") && !has("find") && !has("ls") {
        rules.push("Use bash for file operations like ls, rg, find");
    }
    let always = [
        "Be concise in your responses",
        "Show file paths clearly when working with files",
    ];
    for rule in tools
        .iter()
        .flat_map(|(t, _)| tool_rules(t, texts))
        .copied()
        .chain(remote.iter().copied())
        .chain(always)
    {
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    rules
        .iter()
        .map(|r| format!("- {r}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The sections in pi's order, each but the preamble wrapped in `<name>` tags.
pub fn sections(i: &SectionInputs<'_>) -> Map<String, Value> {
    let mut raw: Vec<(&str, String)> = Vec::new();
    match i.custom {
        Some(c) => raw.push(("preamble", c.to_string())),
        None => {
            raw.push(("preamble", i.texts.preamble.to_string()));
            let list = if i.tools.is_empty() {
                "(none)".to_string()
            } else {
                i.tools
                    .iter()
                    .map(|(n, s)| format!("- {n}: {s}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            raw.push(("tools", format!("{list}\n\n{}", i.texts.tools_footer)));
            raw.push(("rules", rules(i.tools, i.guidelines, i.texts)));
        }
    }
    if let Some(a) = i.append.filter(|a| !a.is_empty()) {
        raw.push(("addendum", a.to_string()));
    }
    if !i.context_files.is_empty() {
        let mut parts = vec!["Project-specific instructions and guidelines:".to_string()];
        for (p, c) in i.context_files {
            parts.push(format!(
                "<project_instructions path=\"{}\">\n{c}\n</project_instructions>",
                p.display()
            ));
        }
        raw.push(("project_context", parts.join("\n\n")));
    }
    if !i.skills.is_empty() {
        raw.push(("skills", i.skills.to_string()));
    }
    raw.push(("cwd", i.cwd.display().to_string().replace('\\', "/")));
    raw.into_iter()
        .map(|(name, text)| {
            let v = if name == "preamble" {
                text
            } else {
                format!("<{name}>\n{text}\n</{name}>")
            };
            (name.to_string(), Value::String(v))
        })
        .collect()
}

/// pi 0.87.1's context files: the config dir's, then one per directory from `/` down to cwd;
/// per directory the first of `AGENTS.override.md`, `AGENTS.md`, `AGENTS.MD`, `CLAUDE.md`,
/// `CLAUDE.MD` that is a file, with a leading BOM removed. Inside a git worktree nested in its
/// main checkout, the main checkout's file that the worktree's own copy shadows is skipped
/// ([`shadowed_context_file`]).
pub fn context_files(cwd: &Path, agent_dir: &Path) -> Vec<(PathBuf, String)> {
    let pick = |dir: &Path| -> Option<(PathBuf, String)> {
        CONTEXT_FILE_NAMES.iter().find_map(|n| {
            let p = dir.join(n);
            let text = crate::files::read_text_or_warn(&p)?;
            let text = text
                .strip_prefix('\u{feff}')
                .map(str::to_string)
                .unwrap_or(text);
            Some((p, text))
        })
    };
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    if let Some(f) = pick(agent_dir) {
        out.push(f);
    }
    let shadowed = shadowed_context_file(cwd);
    let mut dirs: Vec<&Path> = cwd.ancestors().collect();
    dirs.reverse();
    for d in dirs {
        if let Some(f) = pick(d) {
            if shadowed.as_ref().is_some_and(|s| canonical(&f.0) == *s) {
                continue;
            }
            if !out.iter().any(|(p, _)| *p == f.0) {
                out.push(f);
            }
        }
    }
    out
}

/// The names of a directory's context file, in pi 0.87.1's order of preference.
const CONTEXT_FILE_NAMES: [&str; 5] = [
    "AGENTS.override.md",
    "AGENTS.md",
    "AGENTS.MD",
    "CLAUDE.md",
    "CLAUDE.MD",
];

/// The context file pi 0.87.1 reads in `dir`: the first of its names that is a file.
fn context_file_in(dir: &Path) -> Option<PathBuf> {
    CONTEXT_FILE_NAMES
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The nearest git checkout at or above `cwd`: its directory and its common git dir (a linked
/// worktree's `.git` file names its git dir, whose `commondir` names the main repository's).
fn git_paths(cwd: &Path) -> Option<(PathBuf, PathBuf)> {
    for dir in cwd.ancestors() {
        let git = dir.join(".git");
        let Ok(meta) = std::fs::metadata(&git) else {
            continue;
        };
        if meta.is_dir() {
            return git
                .join("HEAD")
                .exists()
                .then(|| (dir.to_path_buf(), git.clone()));
        }
        if meta.is_file() {
            let text = crate::files::read_text(&git).ok()?;
            let Some(target) = text.trim().strip_prefix("gitdir: ") else {
                continue;
            };
            let git_dir = dir.join(target.trim());
            if !git_dir.join("HEAD").exists() {
                return None;
            }
            let common = match crate::files::read_text(&git_dir.join("commondir")) {
                Ok(c) => git_dir.join(c.trim()),
                Err(_) => git_dir,
            };
            return Some((dir.to_path_buf(), common));
        }
        // Something else named `.git`, or a file that names no git dir: look further up.
    }
    None
}

/// pi 0.87.1: in a linked git worktree nested inside its main checkout (`git worktree add
/// sub/feat`), the main checkout's context file that the worktree's own copy shadows (same
/// name), canonicalised. Both describe the same repository, so loading both would apply that
/// context twice. `None` for an ordinary repository, a sibling worktree, a bare layout or a
/// submodule, or when the worktree has no context file of its own.
pub fn shadowed_context_file(cwd: &Path) -> Option<PathBuf> {
    let (repo_dir, common) = git_paths(cwd)?;
    let common = canonical(&common);
    let worktree_root = canonical(&repo_dir);
    let main_root = common.parent()?.to_path_buf();
    if worktree_root == main_root || !worktree_root.starts_with(&main_root) {
        return None;
    }
    if canonical(&main_root.join(".git")) != common {
        return None;
    }
    let own = context_file_in(&worktree_root)?;
    Some(main_root.join(own.file_name()?))
}

/// A system message rendered as one prompt: its text, then each section's text.
pub fn render(content: &str, sections: &Map<String, Value>) -> String {
    let mut parts: Vec<&str> = Vec::with_capacity(sections.len() + 1);
    if !content.is_empty() {
        parts.push(content);
    }
    parts.extend(
        sections
            .values()
            .filter_map(Value::as_str)
            .filter(|s| !s.is_empty()),
    );
    parts.join("\n\n")
}

/// A built-in tool as pi 0.87.1 declares it: the read tool lists `bmp`, bash's argument is a
/// "Shell command", edit's schema has no `additionalProperties`, and the four default tools ask
/// for constrained sampling.
pub fn declaration(tool: &dyn Tool) -> ToolDeclaration {
    let name = tool.name();
    let mut description = tool.description();
    let mut parameters = tool.parameters();
    match name {
        "read" => {
            description = description.replace("(jpg, png, gif, webp)", "(jpg, png, gif, webp, bmp)")
        }
        "bash" => {
            if let Some(d) = parameters.pointer_mut("/properties/command/description") {
                *d = json!("Shell command to execute");
            }
        }
        "edit" => strip_additional_properties(&mut parameters),
        _ => {}
    }
    let constrained = if name == crate::codemode::NAME {
        Some(crate::codemode::constrained_sampling())
    } else {
        matches!(name, "read" | "bash" | "edit" | "write")
            .then(|| json!({"type": "json_schema", "strict": "prefer"}))
    };
    ToolDeclaration {
        name: name.to_string(),
        description,
        parameters,
        constrained_sampling: constrained,
    }
}

fn strip_additional_properties(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.shift_remove("additionalProperties");
            m.values_mut().for_each(strip_additional_properties);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_additional_properties),
        _ => {}
    }
}

/// The tools as a 0.87 request offers them (their declarations).
pub fn request_tools(
    tools: &[std::sync::Arc<dyn Tool>],
    codemode: crate::codemode::Presentation,
    texts: &PromptTexts,
) -> Vec<crate::llm::ToolSchema> {
    let mut decls: Vec<ToolDeclaration> = tools.iter().map(|t| declaration(t.as_ref())).collect();
    crate::codemode::annotate(&mut decls, codemode, &|n| {
        crate::codemode::ScriptView::builtin(n, tool_rules(n, texts))
    });
    // Mode `only`: the tools scripts call are listed in `codemode`, not declared.
    if codemode.only && decls.iter().any(|d| d.name == crate::codemode::NAME) {
        decls.retain(|d| !crate::codemode::listed_in_only(&d.name));
    }
    decls
        .into_iter()
        .map(|d| crate::llm::ToolSchema {
            name: d.name,
            description: d.description,
            parameters: d.parameters,
            constrained_sampling: d.constrained_sampling,
        })
        .collect()
}

/// What the system messages of a context declare, replayed in order (pi's
/// `getCurrentSystemMessage`): sections patched by name, tools added and withdrawn.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Declared {
    pub content: Vec<String>,
    pub sections: Map<String, Value>,
    pub tools: Vec<ToolDeclaration>,
    /// The first system message's timestamp (`None`: no system message).
    pub timestamp: Option<u64>,
}

impl Declared {
    pub fn of<'a>(messages: impl IntoIterator<Item = &'a AgentMessage>) -> Declared {
        let mut d = Declared::default();
        for m in messages {
            if let AgentMessage::System(s) = m {
                d.apply(s);
            }
        }
        d
    }

    pub fn apply(&mut self, m: &SystemMessage) {
        self.timestamp.get_or_insert(m.timestamp);
        let text = match &m.content {
            UserContent::Text(t) => t.clone(),
            blocks => blocks.joined_text(),
        };
        if !text.is_empty() {
            self.content.push(text);
        }
        for (name, v) in m.sections.iter().flatten() {
            if v.is_null() {
                self.sections.shift_remove(name);
            } else {
                self.sections.insert(name.clone(), v.clone());
            }
        }
        for r in m.tools_removed.iter().flatten() {
            self.tools.retain(|t| t.name != r.name);
        }
        for t in m.tools_added.iter().flatten() {
            match self.tools.iter_mut().find(|x| x.name == t.name) {
                Some(slot) => *slot = t.clone(),
                None => self.tools.push(t.clone()),
            }
        }
    }

    /// The prompt the model has (the request's system prompt).
    pub fn render(&self) -> String {
        render(&self.content.join("\n\n"), &self.sections)
    }

    /// The message that brings the context to `sections` and `tools`: changed sections, `null`
    /// for dropped ones, tools added or redefined, tools withdrawn. `None` when nothing changed.
    pub fn update(
        &self,
        sections: Option<&Map<String, Value>>,
        tools: &[ToolDeclaration],
        timestamp: u64,
    ) -> Option<SystemMessage> {
        let patch: Map<String, Value> = match sections {
            None => Map::new(),
            Some(want) => {
                let mut p: Map<String, Value> = want
                    .iter()
                    .filter(|(k, v)| self.sections.get(*k) != Some(*v))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                for k in self.sections.keys().filter(|k| !want.contains_key(*k)) {
                    p.insert(k.clone(), Value::Null);
                }
                p
            }
        };
        let added: Vec<ToolDeclaration> = tools
            .iter()
            .filter(|t| !self.tools.iter().any(|x| x == *t))
            .cloned()
            .collect();
        let removed: Vec<ToolRef> = self
            .tools
            .iter()
            .filter(|x| !tools.iter().any(|t| t == *x))
            .map(|x| ToolRef {
                name: x.name.clone(),
            })
            .collect();
        if patch.is_empty() && added.is_empty() && removed.is_empty() {
            return None;
        }
        Some(SystemMessage {
            content: UserContent::Text(String::new()),
            sections: (!patch.is_empty()).then_some(patch),
            timestamp,
            tools_added: (!added.is_empty()).then_some(added),
            tools_removed: (!removed.is_empty()).then_some(removed),
            checkpoint: false,
        })
    }

    /// The whole declared state as one message (a compaction's checkpoint).
    pub fn checkpoint(&self, timestamp: u64) -> Option<SystemMessage> {
        if self.timestamp.is_none() && self.tools.is_empty() {
            return None;
        }
        Some(SystemMessage {
            content: UserContent::Text(self.content.join("\n\n")),
            sections: (!self.sections.is_empty()).then(|| self.sections.clone()),
            timestamp,
            tools_added: (!self.tools.is_empty()).then(|| self.tools.clone()),
            tools_removed: None,
            checkpoint: true,
        })
    }
}

/// The rendered prompt of the last sections seen, so an unchanged prompt is not rebuilt.
#[derive(Default)]
pub struct PromptCache {
    sections: Map<String, Value>,
    rendered: String,
}

impl PromptCache {
    /// The prompt text `d` renders, from the cache when the sections did not change.
    pub fn get(&mut self, d: &Declared) -> String {
        if d.content.is_empty() && d.sections == self.sections && !self.rendered.is_empty() {
            return self.rendered.clone();
        }
        let text = d.render();
        if d.content.is_empty() {
            self.sections = d.sections.clone();
            self.rendered = text.clone();
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A main checkout at `root` (`.git/HEAD`, `AGENTS.md`) with a linked worktree `feat` at
    /// `root/<at>` that has its own `AGENTS.md` (what `git worktree add` writes, by hand).
    fn checkout_with_worktree(root: &Path, at: &Path) {
        std::fs::create_dir_all(root.join(".git/worktrees/feat")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            root.join(".git/worktrees/feat/HEAD"),
            "ref: refs/heads/feat\n",
        )
        .unwrap();
        std::fs::write(root.join(".git/worktrees/feat/commondir"), "../..\n").unwrap();
        std::fs::write(root.join("AGENTS.md"), "main").unwrap();
        std::fs::create_dir_all(at).unwrap();
        let gitdir = canonical(&root.join(".git/worktrees/feat"));
        std::fs::write(at.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
        std::fs::write(at.join("AGENTS.md"), "feature").unwrap();
    }

    #[test]
    fn a_nested_worktree_shadows_the_main_checkouts_context_file() {
        let tmp = tempfile::tempdir().unwrap();
        let root = canonical(tmp.path()).join("repo");
        let wt = root.join("sub/feat");
        checkout_with_worktree(&root, &wt);
        let agent = tmp.path().join("agent");
        assert_eq!(shadowed_context_file(&wt), Some(root.join("AGENTS.md")));
        // From a directory inside the worktree too.
        std::fs::create_dir_all(wt.join("src")).unwrap();
        assert_eq!(
            shadowed_context_file(&wt.join("src")),
            Some(root.join("AGENTS.md"))
        );
        let files: Vec<String> = context_files(&wt.join("src"), &agent)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        assert_eq!(files, ["feature"]);
        // Only the same name is shadowed: a main CLAUDE.md beside a worktree AGENTS.md stays.
        std::fs::rename(root.join("AGENTS.md"), root.join("CLAUDE.md")).unwrap();
        let files: Vec<String> = context_files(&wt, &agent)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        assert_eq!(files, ["main", "feature"]);
        // Without a context file of its own the worktree inherits the main one.
        std::fs::rename(root.join("CLAUDE.md"), root.join("AGENTS.md")).unwrap();
        std::fs::remove_file(wt.join("AGENTS.md")).unwrap();
        assert_eq!(shadowed_context_file(&wt), None);
        let files: Vec<String> = context_files(&wt, &agent)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        assert_eq!(files, ["main"]);
    }

    #[test]
    fn ordinary_repos_sibling_worktrees_and_bare_layouts_shadow_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let base = canonical(tmp.path());
        // The main checkout itself.
        let root = base.join("repo");
        checkout_with_worktree(&root, &base.join("feat"));
        assert_eq!(shadowed_context_file(&root), None);
        // A sibling worktree: its main checkout is not an ancestor.
        assert_eq!(shadowed_context_file(&base.join("feat")), None);
        // A bare layout: `proj/.bare` + `proj/main`; proj has no `.git` of its own.
        let proj = base.join("proj");
        std::fs::create_dir_all(proj.join(".bare/worktrees/main")).unwrap();
        std::fs::write(proj.join(".bare/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(proj.join(".bare/worktrees/main/HEAD"), "x\n").unwrap();
        std::fs::write(proj.join(".bare/worktrees/main/commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(proj.join("main")).unwrap();
        std::fs::write(
            proj.join("main/.git"),
            format!("gitdir: {}\n", proj.join(".bare/worktrees/main").display()),
        )
        .unwrap();
        std::fs::write(proj.join("main/AGENTS.md"), "w").unwrap();
        assert_eq!(shadowed_context_file(&proj.join("main")), None);
        // A `.git` file naming a git dir without HEAD: no checkout.
        let broken = base.join("broken");
        std::fs::create_dir_all(&broken).unwrap();
        std::fs::write(broken.join(".git"), "gitdir: /nonexistent/x\n").unwrap();
        assert_eq!(shadowed_context_file(&broken), None);
    }

    const T087: &PromptTexts = &crate::protocol::v087::PROFILE.texts.system_prompt;

    #[test]
    fn texts_of_pi_1_6() {
        let tools = default_tools();
        let s = sections(&SectionInputs {
            guidelines: &[],
            cwd: Path::new("/w"),
            tools: &tools,
            custom: None,
            append: None,
            context_files: &[],
            skills: "",
            texts: &crate::protocol::v16::PROFILE.texts.system_prompt,
        });
        assert_eq!(
            render("", &s),
            "You are a coding assistant running inside pi, a coding agent harness. Help users inspect files, run commands, and modify code.\n\n<tools>\n- read: Read file contents\n- bash: Execute bash commands (ls, grep, find, etc.)\n- edit: Make precise file edits with exact text replacement, including multiple disjoint edits in one call\n- write: Create or overwrite files\n\nAdditional tools may be available.\n</tools>\n\n<rules>\n- Use bash for file operations like ls, rg, find\n- Use read to examine files instead of cat or sed.\n- You can inspect PI_* environment variables for current model and session details.\n- Use edit for targeted changes. Batch changes to one file in a single call.\n- Each edits[].oldText must exactly and uniquely match the original file. Keep matches short and non-overlapping; merge nearby changes without including large unchanged regions.\n- Use write only for new files or complete rewrites.\n- Be concise in your responses\n- Show file paths clearly when working with files\n</rules>\n\n<cwd>\n/w\n</cwd>"
        );
    }

    fn default_tools() -> Vec<(&'static str, &'static str)> {
        vec![
            ("read", "Read file contents"),
            ("bash", "Execute bash commands (ls, grep, find, etc.)"),
            (
                "edit",
                "Make precise file edits with exact text replacement, including multiple disjoint edits in one call",
            ),
            ("write", "Create or overwrite files"),
        ]
    }

    #[test]
    fn default_sections_and_their_rendering() {
        let tools = default_tools();
        let s = sections(&SectionInputs {
            guidelines: &[],
            cwd: Path::new("/w"),
            tools: &tools,
            custom: None,
            append: None,
            context_files: &[],
            skills: "",
            texts: T087,
        });
        let names: Vec<&str> = s.keys().map(String::as_str).collect();
        assert_eq!(names, ["preamble", "tools", "rules", "cwd"]);
        assert_eq!(s["cwd"], "<cwd>\n/w\n</cwd>");
        let text = render("", &s);
        assert!(text.starts_with(&format!(
            "{}\n\n<tools>\n- read: Read file contents\n",
            T087.preamble
        )));
        assert!(text.contains("</tools>\n\n<rules>\n- Use bash for file operations like ls, rg, find\n- Use read to examine files instead of cat or sed.\n- You can inspect PI_* environment variables for current model and session details.\n"));
        assert!(text.ends_with(
            "- Show file paths clearly when working with files\n</rules>\n\n<cwd>\n/w\n</cwd>"
        ));
    }

    #[test]
    fn custom_prompt_append_and_context_files() {
        let s = sections(&SectionInputs {
            guidelines: &[],
            cwd: Path::new("/w"),
            tools: &[],
            custom: Some("Custom."),
            append: Some("More."),
            context_files: &[(PathBuf::from("/w/AGENTS.md"), "Be nice.".into())],
            skills: "",
            texts: T087,
        });
        assert_eq!(
            render("", &s),
            "Custom.\n\n<addendum>\nMore.\n</addendum>\n\n<project_context>\nProject-specific instructions and guidelines:\n\n<project_instructions path=\"/w/AGENTS.md\">\nBe nice.\n</project_instructions>\n</project_context>\n\n<cwd>\n/w\n</cwd>"
        );
        let with_skills = sections(&SectionInputs {
            guidelines: &[],
            cwd: Path::new("/w"),
            tools: &[],
            custom: Some("Custom."),
            append: None,
            context_files: &[],
            skills: "The following skills...",
            texts: T087,
        });
        assert_eq!(
            render("", &with_skills),
            "Custom.\n\n<skills>\nThe following skills...\n</skills>\n\n<cwd>\n/w\n</cwd>"
        );
        let none = sections(&SectionInputs {
            guidelines: &[],
            cwd: Path::new("/w"),
            tools: &[],
            custom: None,
            append: None,
            context_files: &[],
            skills: "",
            texts: T087,
        });
        assert!(render("", &none).contains("<tools>\n(none)\n\nIn addition"));
    }

    #[test]
    fn updates_patch_sections_and_tools() {
        let tools = default_tools();
        let want = sections(&SectionInputs {
            guidelines: &[],
            cwd: Path::new("/w"),
            tools: &tools,
            custom: None,
            append: None,
            context_files: &[],
            skills: "",
            texts: T087,
        });
        let decl = |n: &str| ToolDeclaration {
            name: n.into(),
            description: format!("{n} tool"),
            parameters: json!({"type": "object"}),
            constrained_sampling: None,
        };
        let empty = Declared::default();
        let first = empty
            .update(Some(&want), &[decl("read"), decl("bash")], 7)
            .unwrap();
        assert_eq!(first.sections.as_ref(), Some(&want));
        assert_eq!(first.tools_added.as_ref().map(Vec::len), Some(2));
        let mut d = Declared::of(&[AgentMessage::System(first)]);
        assert_eq!(d.render(), render("", &want));
        // Nothing changed: no message.
        assert!(
            d.update(Some(&want), &[decl("read"), decl("bash")], 8)
                .is_none()
        );
        // A retry (no sections) with the same tools: nothing either.
        assert!(d.update(None, &[decl("read"), decl("bash")], 8).is_none());
        // cwd changed, bash withdrawn.
        let mut moved = want.clone();
        moved.insert("cwd".into(), json!("<cwd>\n/x\n</cwd>"));
        moved.shift_remove("rules");
        let u = d.update(Some(&moved), &[decl("read")], 9).unwrap();
        assert_eq!(
            serde_json::to_value(AgentMessage::System(u.clone())).unwrap(),
            json!({"role": "system", "content": "", "sections": {"rules": null, "cwd": "<cwd>\n/x\n</cwd>"},
                   "timestamp": 9, "toolsRemoved": [{"name": "bash"}]})
        );
        d.apply(&u);
        assert_eq!(d.sections, moved);
        assert_eq!(d.tools, vec![decl("read")]);
        let cp = d.checkpoint(10).unwrap();
        assert_eq!(
            serde_json::to_string(&AgentMessage::System(cp)).unwrap(),
            format!(
                "{{\"role\":\"system\",\"content\":\"\",\"sections\":{},\"toolsAdded\":[{{\"name\":\"read\",\"description\":\"read tool\",\"parameters\":{{\"type\":\"object\"}}}}],\"timestamp\":10}}",
                serde_json::to_string(&moved).unwrap()
            )
        );
    }

    #[test]
    fn declarations_of_the_built_in_tools() {
        let read = declaration(crate::tools::builtin_tool("read").unwrap().as_ref());
        assert!(read.description.contains("(jpg, png, gif, webp, bmp)"));
        assert_eq!(
            read.constrained_sampling,
            Some(json!({"type": "json_schema", "strict": "prefer"}))
        );
        let bash = declaration(crate::tools::builtin_tool("bash").unwrap().as_ref());
        assert_eq!(
            bash.parameters["properties"]["command"]["description"],
            "Shell command to execute"
        );
        let edit = declaration(crate::tools::builtin_tool("edit").unwrap().as_ref());
        assert!(
            !serde_json::to_string(&edit.parameters)
                .unwrap()
                .contains("additionalProperties")
        );
        let ls = declaration(crate::tools::builtin_tool("ls").unwrap().as_ref());
        assert_eq!(ls.constrained_sampling, None);
    }
}
