//! The `grep` tool: search file contents (spec 14.7), in-process instead of ripgrep.
//!
//! Walks the search directory with ripgrep's defaults as the reference invokes it (`--hidden`,
//! `.gitignore` honoured, `.git` and binary files skipped, symlinks not followed), matches each
//! line with [`super::regex::Regex`] (or a literal), stops at `limit` matches and formats
//! `path:N: text` / `path-N- text` blocks with the reference's notices.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::ignore::{Glob, walk};
use super::ls::{effective_limit, finish_listing};
use super::paths::resolve_to_cwd;
use super::regex::Regex;
use super::truncate::{GREP_MAX_LINE_LENGTH, truncate_line};
use super::{
    ABORTED, Tool, ToolContext, ToolOutput, ToolResult, arg_f64, arg_str, check_cancel, text_output,
};

pub const DEFAULT_LIMIT: usize = 100;
/// Files larger than this are not searched (bounded memory).
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

pub struct GrepTool;

impl Tool for GrepTool {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn description(&self) -> String {
        "Search file contents for a pattern. Returns matching lines with file paths and line numbers. Respects .gitignore. Output is truncated to 100 matches or 50KB (whichever is hit first). Long lines are truncated to 500 chars.".to_string()
    }

    fn snippet(&self) -> &'static str {
        "Search file contents for patterns (respects .gitignore)"
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "required": ["pattern"],
            "properties": {
                "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
                "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
                "glob": {"type": "string", "description": "Filter files by glob pattern, e.g. '*.ts' or '**/*.spec.ts'"},
                "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
                "literal": {"type": "boolean", "description": "Treat pattern as literal string instead of regex (default: false)"},
                "context": {"type": "number", "description": "Number of lines to show before and after each match (default: 0)"},
                "limit": {"type": "number", "description": "Maximum number of matches to return (default: 100)"}
            }
        })
    }

    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        _on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        let pattern = arg_str(args, "pattern").ok_or("Invalid grep arguments.")?;
        check_cancel(ctx)?;
        let root = resolve_to_cwd(
            arg_str(args, "path")
                .filter(|p| !p.is_empty())
                .unwrap_or("."),
            &ctx.cwd,
        );
        let meta =
            std::fs::metadata(&root).map_err(|_| format!("Path not found: {}", root.display()))?;
        let ignore_case = args
            .get("ignoreCase")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let literal = args
            .get("literal")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let context = arg_f64(args, "context")
            .filter(|c| *c > 0.0)
            .map(|c| c.min(1e6) as usize)
            .unwrap_or(0);
        let limit = effective_limit(arg_f64(args, "limit"), DEFAULT_LIMIT);
        let matcher = Matcher::new(pattern, literal, ignore_case)?;
        let glob = arg_str(args, "glob")
            .filter(|g| !g.is_empty())
            .map(GlobFilter::new);

        let mut count = 0usize;
        let mut lines_truncated = false;
        let mut out_lines: Vec<String> = Vec::new();
        let mut search_file = |path: &Path, display: &str| -> bool {
            let Some(lines) = read_lines(path) else {
                return true;
            };
            for (i, line) in lines.iter().enumerate() {
                if count >= limit {
                    break;
                }
                if matcher.is_match(line) {
                    count += 1;
                    lines_truncated |=
                        format_block(&lines, i + 1, context, display, &mut out_lines);
                }
            }
            count < limit
        };
        if meta.is_dir() {
            let stop = || ctx.cancel.is_cancelled();
            walk(&root, &stop, &mut |e| {
                if e.is_dir || e.is_symlink {
                    return true;
                }
                if glob.as_ref().is_some_and(|g| !g.accepts(e.rel)) {
                    return true;
                }
                search_file(e.path, e.rel)
            });
        } else {
            let name = root
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            search_file(&root, &name);
        }
        if ctx.cancel.is_cancelled() {
            return Err(ABORTED.to_string());
        }
        if count == 0 {
            return Ok(text_output("No matches found"));
        }
        let mut notices = Vec::new();
        let mut details = Map::new();
        if count >= limit {
            notices.push(format!(
                "{limit} matches limit reached. Use limit={} for more, or refine pattern",
                limit * 2
            ));
            details.insert("matchLimitReached".into(), json!(limit));
        }
        let mut after = Vec::new();
        if lines_truncated {
            after.push(format!("Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"));
        }
        let mut out = finish_listing(&out_lines.join("\n"), notices, after, details);
        if lines_truncated {
            let mut d = out
                .details
                .take()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default();
            d.insert("linesTruncated".into(), json!(true));
            out.details = Some(Value::Object(d));
        }
        Ok(out)
    }
}

/// Append the block for a match at line `n` (1-based) with `context` lines around it; returns
/// whether a line had to be cut.
fn format_block(
    lines: &[String],
    n: usize,
    context: usize,
    display: &str,
    out: &mut Vec<String>,
) -> bool {
    let start = if context > 0 {
        n.saturating_sub(context).max(1)
    } else {
        n
    };
    let end = if context > 0 {
        (n + context).min(lines.len())
    } else {
        n
    };
    let mut any_cut = false;
    for cur in start..=end {
        let text = lines
            .get(cur - 1)
            .map(|l| l.replace('\r', ""))
            .unwrap_or_default();
        let (text, cut) = truncate_line(&text, GREP_MAX_LINE_LENGTH);
        any_cut |= cut;
        let sep = if cur == n { ':' } else { '-' };
        out.push(format!("{display}{sep}{cur}{sep} {text}"));
    }
    any_cut
}

/// A file's lines (CRLF/CR normalised as the reference re-reads them); `None` for unreadable,
/// huge or binary (NUL-containing) files, which ripgrep skips.
fn read_lines(path: &Path) -> Option<Vec<String>> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_FILE_BYTES {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    let text = String::from_utf8_lossy(&bytes)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    if text.ends_with('\n') {
        lines.pop(); // ripgrep does not report the empty piece after the final newline
    }
    Some(lines)
}

enum Matcher {
    Literal(String, bool),
    Regex(Regex),
}

impl Matcher {
    fn new(pattern: &str, literal: bool, ignore_case: bool) -> Result<Matcher, String> {
        if literal {
            let p = if ignore_case {
                pattern.to_lowercase()
            } else {
                pattern.to_string()
            };
            return Ok(Matcher::Literal(p, ignore_case));
        }
        Regex::new(pattern, ignore_case)
            .map(Matcher::Regex)
            .map_err(|e| format!("regex parse error:\n    {pattern}\nerror: {e}"))
    }

    fn is_match(&self, line: &str) -> bool {
        match self {
            Matcher::Literal(p, false) => line.contains(p.as_str()),
            Matcher::Literal(p, true) => line.to_lowercase().contains(p.as_str()),
            Matcher::Regex(r) => r.is_match(line),
        }
    }
}

/// ripgrep's `--glob`: `!` excludes; a glob without `/` matches the file name.
struct GlobFilter {
    glob: Glob,
    negated: bool,
    whole_path: bool,
}

impl GlobFilter {
    fn new(g: &str) -> GlobFilter {
        let (negated, g) = match g.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, g),
        };
        let whole_path = g.contains('/');
        GlobFilter {
            glob: Glob::new(g.strip_prefix('/').unwrap_or(g)),
            negated,
            whole_path,
        }
    }

    fn accepts(&self, rel: &str) -> bool {
        if self.negated {
            // An excluding glob also excludes everything below a matching directory.
            return !ancestors_and_self(rel).any(|p| self.matches(p));
        }
        self.matches(rel)
    }

    fn matches(&self, rel: &str) -> bool {
        let subject = if self.whole_path {
            rel
        } else {
            rel.rsplit('/').next().unwrap_or(rel)
        };
        self.glob.is_match(subject)
    }
}

/// `a`, `a/b`, `a/b/c.rs` for `a/b/c.rs`.
fn ancestors_and_self(rel: &str) -> impl Iterator<Item = &str> {
    rel.match_indices('/')
        .map(move |(i, _)| &rel[..i])
        .chain(std::iter::once(rel))
}
