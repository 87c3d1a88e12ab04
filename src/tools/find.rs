//! The `find` tool: files and directories matching a glob (spec 14.8), in-process instead of
//! fd. Hidden entries are included, `.gitignore` files are honoured and `.git` is skipped; a
//! pattern without `/` matches names, one with `/` matches paths relative to the search dir.

use serde_json::{Map, Value, json};

use super::ignore::{Glob, walk};
use super::ls::{effective_limit, finish_listing};
use super::paths::resolve_to_cwd;
use super::{
    ABORTED, Tool, ToolContext, ToolOutput, ToolResult, arg_f64, arg_str, check_cancel, text_output,
};

pub const DEFAULT_LIMIT: usize = 1000;

pub struct FindTool;

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
        json!({
            "type": "object",
            "required": ["pattern"],
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern to match files, e.g. '*.ts', '**/*.json', or 'src/**/*.spec.ts'"},
                "path": {"type": "string", "description": "Directory to search in (default: current directory)"},
                "limit": {"type": "number", "description": "Maximum number of results (default: 1000)"}
            }
        })
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
        if !root.exists() {
            return Err(format!("Path not found: {}", root.display()));
        }
        let limit = effective_limit(arg_f64(args, "limit"), DEFAULT_LIMIT);
        let matcher = PathGlob::new(pattern);
        let mut results: Vec<String> = Vec::new();
        let stop = || ctx.cancel.is_cancelled();
        walk(&root, &stop, &mut |e| {
            if matcher.is_match(e.rel) {
                results.push(if e.is_dir {
                    format!("{}/", e.rel)
                } else {
                    e.rel.to_string()
                });
            }
            results.len() < limit
        });
        if ctx.cancel.is_cancelled() {
            return Err(ABORTED.to_string());
        }
        if results.is_empty() {
            return Ok(text_output("No files found matching pattern"));
        }
        let mut notices = Vec::new();
        let mut details = Map::new();
        if results.len() >= limit {
            notices.push(format!(
                "{limit} results limit reached. Use limit={} for more, or refine pattern",
                limit * 2
            ));
            details.insert("resultLimitReached".into(), json!(limit));
        }
        Ok(finish_listing(
            &results.join("\n"),
            notices,
            Vec::new(),
            details,
        ))
    }
}

/// fd's glob semantics: names unless the pattern has a `/`, then full relative paths.
pub struct PathGlob {
    glob: Glob,
    whole_path: bool,
}

impl PathGlob {
    pub fn new(pattern: &str) -> PathGlob {
        let whole_path = pattern.contains('/');
        let p = if whole_path && !pattern.starts_with("**") && !pattern.starts_with('/') {
            format!("**/{pattern}")
        } else {
            pattern.trim_start_matches('/').to_string()
        };
        PathGlob {
            glob: Glob::new(&p),
            whole_path,
        }
    }

    pub fn is_match(&self, rel: &str) -> bool {
        if self.whole_path {
            self.glob.is_match(rel)
        } else {
            self.glob.is_match(rel.rsplit('/').next().unwrap_or(rel))
        }
    }
}
