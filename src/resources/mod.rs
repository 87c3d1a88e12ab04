//! Skills and prompt templates, loaded exactly as pi loads them, and what they turn into: the
//! skills block of the system prompt, `/skill:name args` and `/template args` expansion, and the
//! `get_commands` list.
//!
//! - [`load`]: the I/O — every location pi looks in (config dir, `~/.agents`, project `.pi`,
//!   `.agents` in cwd and its ancestors, settings entries, `--skill` / `--prompt-template`), pi's
//!   precedence, ignore files, symlinks and collisions. Done once at start-up.
//! - [`frontmatter`] + [`yaml`]: the `---` block, parsed like pi's `yaml` package would.
//! - [`skills`], [`templates`]: pure rules (validation, descriptions, argument substitution).
//! - [`commands`]: the `get_commands` list, with a place for extension commands.
//! - [`paths`]: node's path functions on strings, so reported paths are pi's strings.
//! - [`patterns`]: pi's settings patterns (`!`, `+`, `-`, globs), shared with extension discovery.
//!
//! Both protocol versions are covered; the differences are listed where they apply.

pub mod commands;
pub mod frontmatter;
pub mod load;
pub mod paths;
pub mod patterns;
pub mod skills;
pub mod templates;
pub mod yaml;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol;
pub use load::{LoadOptions, load};
pub use skills::Skill;
pub use templates::Template;

/// Where a command came from, as pi reports it in `get_commands` (`sourceInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceInfo {
    pub path: String,
    /// `auto` (discovered), `local` (settings, CLI), `inline`, ...
    pub source: String,
    /// `user`, `project` or `temporary`.
    pub scope: String,
    /// `top-level` or `package`.
    pub origin: String,
    #[serde(rename = "baseDir", default, skip_serializing_if = "Option::is_none")]
    pub base_dir: Option<String>,
}

impl SourceInfo {
    /// pi's `createSyntheticSourceInfo`: scope defaults to `temporary`, origin `top-level`.
    pub fn synthetic(
        path: &str,
        source: &str,
        scope: Option<&str>,
        base_dir: Option<String>,
    ) -> SourceInfo {
        SourceInfo {
            path: path.to_string(),
            source: source.to_string(),
            scope: scope.unwrap_or("temporary").to_string(),
            origin: "top-level".to_string(),
            base_dir,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiagnosticKind {
    Warning,
    Collision,
}

/// Something wrong with a file or path, reported on stderr (pi's RPC mode reports nothing; its
/// interactive mode shows these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub kind: DiagnosticKind,
    pub message: String,
    pub path: String,
}

impl Diagnostic {
    pub fn warning(message: impl Into<String>, path: &str) -> Diagnostic {
        Diagnostic {
            kind: DiagnosticKind::Warning,
            message: message.into(),
            path: path.to_string(),
        }
    }

    /// The stderr line.
    pub fn line(&self) -> String {
        match self.kind {
            DiagnosticKind::Warning => format!("Warning: {}: {}", self.path, self.message),
            DiagnosticKind::Collision => format!("Warning: {}", self.message),
        }
    }
}

/// Everything loaded at start-up.
#[derive(Clone, Debug, Default)]
pub struct Resources {
    /// In pi's order (precedence, then discovery order); names unique.
    pub skills: Vec<Skill>,
    /// In pi's order; names unique.
    pub templates: Vec<Template>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Skills and templates read on first use (the first prompt, steer, follow-up or
/// `get_commands`), not at start-up: a cold start does not pay for reading hundreds of files,
/// and a host that never uses them never pays. Problems are reported on stderr when they are
/// read.
#[derive(Debug)]
pub struct LazyResources {
    options: Option<LoadOptions>,
    /// Loaded from `options` (else to be loaded at the next use).
    fresh: bool,
    loaded: Resources,
}

impl LazyResources {
    pub fn new(options: LoadOptions) -> LazyResources {
        LazyResources {
            options: Some(options),
            fresh: false,
            loaded: Resources::default(),
        }
    }

    /// Already loaded (tests, or nothing to load).
    pub fn ready(r: Resources) -> LazyResources {
        LazyResources {
            options: None,
            fresh: true,
            loaded: r,
        }
    }

    /// The resources, loaded now if they were not yet.
    pub fn get(&mut self) -> &Resources {
        if !self.fresh {
            self.fresh = true;
            if let Some(o) = &self.options {
                self.loaded = load(o);
                self.loaded.report();
            }
        }
        &self.loaded
    }

    /// Read the files again at the next use (a new session: pi builds a new runtime, whose
    /// resource loader reads the skills and prompt templates again).
    pub fn reload(&mut self) {
        if self.options.is_some() {
            self.fresh = false;
        }
    }
}

/// A skill file that could not be read when its command was used: pi reports it as an
/// `extension_error` event and sends the text as it was typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpansionError {
    pub path: String,
    pub error: String,
}

impl ExpansionError {
    /// The event frame.
    pub fn event(&self) -> Value {
        serde_json::json!({
            "type": "extension_error",
            "extensionPath": self.path,
            "event": "skill_expansion",
            "error": self.error,
        })
    }
}

impl Resources {
    /// The skills block of the 0.73.1 system prompt (empty when no skill is visible).
    pub fn skills_prompt(&self, tool: skills::ReadTool, paths: &str) -> String {
        skills::format_for_prompt(&self.skills, tool, paths)
    }

    /// What a prompt, steer or follow-up text becomes: `/skill:name args` first, then
    /// `/template args` on the result, as pi does. Anything else (an unknown `/name` too) is
    /// returned as it is.
    pub fn expand(
        &self,
        text: &str,
        profile: &protocol::Resources,
    ) -> (String, Option<ExpansionError>) {
        if !text.starts_with('/') {
            return (text.to_string(), None);
        }
        let mut error = None;
        let mut out = text.to_string();
        if let Some((name, args)) = skills::parse_command(text) {
            if let Some(skill) = self.skills.iter().find(|s| s.name == name) {
                let body = load::read_text(&skill.file_path)
                    .map_err(|e| e.node_message(&skill.file_path))
                    .and_then(|content| {
                        frontmatter::strip(&content, profile.frontmatter_strips_bom)
                            .map_err(|e| e.to_string())
                    });
                match body {
                    Ok(body) => out = skills::expansion(skill, js_trim(&body), args),
                    Err(e) => {
                        error = Some(ExpansionError {
                            path: skill.file_path.clone(),
                            error: e,
                        })
                    }
                }
            }
        }
        if let Some(t) = templates::expand(&out, &self.templates, profile.template_args) {
            out = t;
        }
        (out, error)
    }

    /// Print the diagnostics on stderr, once.
    pub fn report(&mut self) {
        for d in self.diagnostics.drain(..) {
            eprintln!("{}", d.line());
        }
    }
}

/// JS whitespace (`String.prototype.trim`, `/\s/`): Unicode White_Space without U+0085, plus
/// the BOM.
pub fn js_is_space(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

/// JS `trim()`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(js_is_space)
}

/// JS truthiness of a parsed YAML value.
pub fn js_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// JS `length`: UTF-16 code units.
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_helpers() {
        assert_eq!(js_trim("\u{feff} a \u{a0}\n"), "a");
        assert_eq!(js_trim("\u{85}a"), "\u{85}a");
        assert!(!js_truthy(&Value::from(0)) && js_truthy(&Value::from("x")));
        assert_eq!(utf16_len("a😀"), 3);
    }
}
