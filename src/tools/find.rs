//! The `find` tool: files and directories matching a glob (spec 14.8) with fd's own crates,
//! configured as the reference runs fd: `fd --glob --color=never --hidden --no-require-git
//! --max-results N [--full-path] -- PATTERN PATH`, where a pattern containing `/` turns on
//! `--full-path` and gets a leading `**/` unless it starts with `/` or `**/`.
//!
//! As in fd, the glob becomes a regex (`globset`, `*` never crossing `/`), matched against the
//! entry's name, or with `--full-path` against its absolute path; smart case: the match ignores
//! case unless the pattern has an uppercase letter. The walk is [`super::walk`]'s fd flavour.
//! fd's lines are then relativised as the reference does (`dir/` for directories).

use std::path::Path;

use globset::GlobBuilder;
use regex::bytes::{Regex, RegexBuilder};
use serde_json::{Map, Value};

use super::ls::finish_listing;
use super::ordered_walk::{Entry, Visitor, Walker};
use super::paths::resolve_to_cwd;
use super::walk::{Flavor, relative};
use super::{
    Tool, ToolContext, ToolOutput, ToolResult, arg_f64, arg_str, check_cancel, js_num, js_value,
    text_output,
};

pub const DEFAULT_LIMIT: usize = 1000;

/// `relative_globs`: pi 1.6.0's patterns, anchored at the search path (`Tools::find_paths_anchored`).
#[derive(Default)]
pub struct FindTool {
    pub relative_globs: bool,
}

impl Tool for FindTool {
    fn name(&self) -> &'static str {
        "find"
    }

    fn description(&self) -> String {
        "Search for files by glob pattern. Returns matching file paths relative to the search directory. Respects .gitignore. Output is truncated to 1000 results or 50KB (whichever is hit first).".to_string()
    }

    fn snippet(&self) -> &'static str {
        "Find files by glob pattern (respects .gitignore)"
    }

    fn parameters(&self) -> Value {
        static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        static SCHEMA_16: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        let base = || {
            super::schema(
                &SCHEMA,
                r#"{
            "type": "object",
            "required": ["pattern"],
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern to match files, e.g. '*.ts', '**/*.json', or 'src/**/*.spec.ts'"},
                "path": {"type": "string", "description": "Directory to search in (default: current directory)"},
                "limit": {"type": "number", "description": "Maximum number of results (default: 1000)"}
            }
        }"#,
            )
        };
        if self.relative_globs {
            // pi 1.6.0's text.
            return super::schema_variant(
                &SCHEMA_16,
                base,
                "pattern",
                "Glob pattern relative to the search directory, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth",
            );
        }
        base()
    }

    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        _on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        let pattern = arg_str(args, "pattern").ok_or("Invalid find arguments.")?;
        check_cancel(ctx)?;
        let root = resolve_to_cwd(
            arg_str(args, "path")
                .filter(|p| !p.is_empty())
                .unwrap_or("."),
            &ctx.cwd,
        );
        // `limit ?? 1000`, passed to fd as `--max-results String(limit)` (pi 1.6.0:
        // `Math.max(1, Math.floor(limit ?? 1000))`, and fd asked for one result more).
        let probe = ctx.profile.limits_probed;
        let limit = arg_f64(args, "limit").unwrap_or(DEFAULT_LIMIT as f64);
        let (limit, max_results) = if probe {
            let l = if limit.is_nan() {
                1.0
            } else {
                limit.floor().clamp(1.0, 1e15)
            };
            (l, Some(l as usize + 1))
        } else {
            (limit, max_results(limit)?)
        };
        if !root.is_dir() {
            return Err(format!(
                "[fd error]: Search path '{}' is not a directory.\n[fd error]: No valid search paths given.",
                root.display()
            ));
        }
        let matcher = if self.relative_globs {
            FdGlob::anchored(pattern, &root)?
        } else {
            FdGlob::new(pattern)?
        };
        let walker = Walker::new(
            &root,
            &ctx.cwd,
            Flavor::Fd,
            max_results.unwrap_or(usize::MAX),
        );
        let visitor = FindVisitor {
            matcher: &matcher,
            root: &root,
        };
        let mut lines: Vec<String> = Vec::new();
        walker.run(&visitor, &ctx.cancel, &mut |line| {
            lines.push(line);
            max_results.is_some_and(|m| lines.len() >= m)
        });
        check_cancel(ctx)?;
        // The reference reads fd's output with `readline` (a name with `\r` or `\n` in it
        // becomes several lines) and trims each line.
        let mut results: Vec<String> = lines
            .join("\n")
            .split("\r\n")
            .flat_map(|l| l.split(['\r', '\n']))
            .map(js_trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        if results.is_empty() {
            return Ok(text_output("No files found matching pattern"));
        }
        let mut notices = Vec::new();
        let mut details = Map::new();
        let limit_reached = if probe {
            let over = results.len() as f64 > limit;
            results.truncate(limit as usize);
            over
        } else {
            results.len() as f64 >= limit
        };
        if limit_reached {
            notices.push(format!(
                "{} results limit reached. Use limit={} for more, or refine pattern",
                js_num(limit),
                js_num(limit * 2.0)
            ));
            details.insert("resultLimitReached".into(), js_value(limit));
        }
        Ok(finish_listing(
            &results.join("\n"),
            notices,
            Vec::new(),
            details,
        ))
    }
}

/// fd's per-entry work: the entries whose name (or path) matches, as the lines fd prints.
struct FindVisitor<'a> {
    matcher: &'a FdGlob,
    root: &'a Path,
}

impl Visitor for FindVisitor<'_> {
    type State = ();
    type Out = String;

    fn state(&self) {}

    fn visit(&self, _: &mut (), entry: &Entry) -> Option<String> {
        // fd reports walk errors only with --show-errors.
        let entry = entry.as_ref().ok()?;
        if !self.matcher.is_match(entry.path()) {
            return None;
        }
        let rel = relative(entry.path(), self.root);
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        Some(if is_dir { format!("{rel}/") } else { rel })
    }

    fn weight(&self, _: &String) -> usize {
        1
    }
}

/// JavaScript's `String.prototype.trim`.
fn js_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

/// fd's `--max-results` as it parses `String(limit)`: `0` means no limit; anything else that
/// is not a whole number fails as fd fails (the reference reports fd's stderr).
fn max_results(limit: f64) -> Result<Option<usize>, String> {
    let text = js_num(limit);
    const HELP: &str = "\n\nFor more information, try '--help'.";
    if limit < 0.0 || text.starts_with('-') {
        // clap reads a leading `-` as a flag: `-1`/`-0…` are fd's own short flags.
        return Err(if text.starts_with("-1") || text.starts_with("-0") {
            format!(
                "error: a value is required for '--max-results <count>' but none was supplied{HELP}"
            )
        } else {
            format!(
                "error: unexpected argument '{text}' found\n\n  tip: to pass '{text}' as a value, use '-- {text}'\n\nUsage: fd [OPTIONS] [pattern] [path]...{HELP}"
            )
        });
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "error: invalid value '{text}' for '--max-results <count>': invalid digit found in string{HELP}"
        ));
    }
    match text.parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        Err(_) => Err(format!(
            "error: invalid value '{text}' for '--max-results <count>': number too large to fit in target type{HELP}"
        )),
    }
}

/// fd's `--glob` matcher for the reference's pattern.
pub struct FdGlob {
    regex: Regex,
    full_path: bool,
}

impl FdGlob {
    pub fn new(pattern: &str) -> Result<FdGlob, String> {
        let full_path = pattern.contains('/');
        let effective = if full_path
            && !pattern.starts_with('/')
            && !pattern.starts_with("**/")
            && pattern != "**"
        {
            format!("**/{pattern}")
        } else {
            pattern.to_string()
        };
        Self::build(&effective, full_path, None)
    }

    /// pi 1.6.0's pattern: a leading `./` dropped; a relative path pattern anchored at the
    /// search path `root` (prefixed with it, glob-escaped), and ignoring case when it is all
    /// lowercase (fd's `--ignore-case`; otherwise fd's smart case).
    pub fn anchored(pattern: &str, root: &Path) -> Result<FdGlob, String> {
        let mut p = pattern;
        while let Some(rest) = p.strip_prefix("./") {
            p = rest;
        }
        let full_path = p.contains('/');
        if !full_path || p.starts_with('/') {
            return Self::build(p, full_path, None);
        }
        let root = root.to_string_lossy();
        let mut escaped = String::with_capacity(root.len() + p.len() + 1);
        for c in root.trim_end_matches('/').chars() {
            if matches!(c, '\\' | '*' | '?' | '[' | ']' | '{' | '}') {
                escaped.push('\\');
            }
            escaped.push(c);
        }
        escaped.push('/');
        escaped.push_str(p);
        let ignore_case = p == p.to_lowercase();
        Self::build(&escaped, true, ignore_case.then_some(true))
    }

    /// The matcher of glob `effective`; `ignore_case`: `Some(true)` forces it, `None` is fd's
    /// smart case.
    fn build(
        effective: &str,
        full_path: bool,
        ignore_case: Option<bool>,
    ) -> Result<FdGlob, String> {
        let regex_text = if effective.is_empty() {
            String::new()
        } else {
            GlobBuilder::new(effective)
                .literal_separator(true)
                .build()
                .map_err(|e| format!("[fd error]: {e}"))?
                .regex()
                .to_string()
        };
        let case_sensitive = ignore_case.is_none() && has_uppercase_char(&regex_text);
        let regex = RegexBuilder::new(&regex_text)
            .case_insensitive(!case_sensitive)
            .dot_matches_new_line(true)
            .build()
            .map_err(|e| {
                format!(
                    "[fd error]: {e}\n\nNote: You can search for literal substrings with '--fixed-strings' or literal strings with '--exact' options (instead of a regular expression). Alternatively, you can also use the '--glob' option to match on a glob pattern."
                )
            })?;
        Ok(FdGlob { regex, full_path })
    }

    /// Does the entry at `path` (absolute, as fd sees it under an absolute search path) match?
    pub fn is_match(&self, path: &Path) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let subject = if self.full_path {
            path.as_os_str()
        } else {
            match path.file_name() {
                Some(n) => n,
                None => return false,
            }
        };
        self.regex.is_match(subject.as_bytes())
    }
}

/// fd's smart case: does the pattern's regex contain an uppercase literal or class bound?
fn has_uppercase_char(pattern: &str) -> bool {
    use regex_syntax::hir::{Class, Hir, HirKind, Literal};
    fn walk(hir: &Hir) -> bool {
        match hir.kind() {
            HirKind::Literal(Literal(bytes)) => match std::str::from_utf8(bytes) {
                Ok(s) => s.chars().any(char::is_uppercase),
                Err(_) => bytes.iter().any(|b| char::from(*b).is_uppercase()),
            },
            HirKind::Class(Class::Unicode(ranges)) => ranges
                .iter()
                .any(|r| r.start().is_uppercase() || r.end().is_uppercase()),
            HirKind::Class(Class::Bytes(ranges)) => ranges.iter().any(|r| {
                char::from(r.start()).is_uppercase() || char::from(r.end()).is_uppercase()
            }),
            HirKind::Capture(c) => walk(&c.sub),
            HirKind::Repetition(r) => walk(&r.sub),
            HirKind::Concat(hirs) | HirKind::Alternation(hirs) => hirs.iter().any(walk),
            _ => false,
        }
    }
    regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
        .map(|hir| walk(&hir))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smart_case_and_full_path() {
        let g = FdGlob::new("*.md").unwrap();
        assert!(g.is_match(Path::new("/r/README.MD")));
        let g = FdGlob::new("*.MD").unwrap();
        assert!(!g.is_match(Path::new("/r/readme.md")));
        let g = FdGlob::new("src/*.rs").unwrap();
        assert!(g.is_match(Path::new("/r/src/a.rs")));
        assert!(!g.is_match(Path::new("/r/src/x/a.rs")));
        let g = FdGlob::new("*.{ts,tsx}").unwrap();
        assert!(g.is_match(Path::new("/r/a.tsx")));
    }

    #[test]
    fn pi_16_anchors_path_patterns_at_the_search_path() {
        let root = Path::new("/r/[x]");
        let g = FdGlob::anchored("src/*.ts", root).unwrap();
        assert!(g.is_match(Path::new("/r/[x]/src/a.ts")));
        assert!(
            g.is_match(Path::new("/r/[x]/SRC/A.TS")),
            "all lowercase: any case"
        );
        assert!(!g.is_match(Path::new("/r/[x]/pkg/src/a.ts")));
        let g = FdGlob::anchored("./**/src/*.ts", root).unwrap();
        assert!(g.is_match(Path::new("/r/[x]/src/a.ts")));
        assert!(g.is_match(Path::new("/r/[x]/pkg/src/a.ts")));
        let g = FdGlob::anchored("Src/*.ts", root).unwrap();
        assert!(
            !g.is_match(Path::new("/r/[x]/src/a.ts")),
            "an uppercase letter: exact case"
        );
        let g = FdGlob::anchored("./*.md", root).unwrap();
        assert!(
            g.is_match(Path::new("/r/[x]/deep/README.MD")),
            "a name pattern at any depth"
        );
        // 0.87.1's: a leading `**/`.
        assert!(
            FdGlob::new("src/*.ts")
                .unwrap()
                .is_match(Path::new("/r/pkg/src/a.ts"))
        );
    }

    #[test]
    fn max_results_as_fd_parses_it() {
        assert_eq!(max_results(1000.0), Ok(Some(1000)));
        assert_eq!(max_results(0.0), Ok(None));
        assert!(max_results(2.5).unwrap_err().contains("invalid digit"));
        assert!(
            max_results(-1.0)
                .unwrap_err()
                .contains("a value is required")
        );
        assert!(
            max_results(-5.0)
                .unwrap_err()
                .contains("unexpected argument '-5'")
        );
        assert!(max_results(1e20).unwrap_err().contains("number too large"));
    }
}
