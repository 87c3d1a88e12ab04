//! The `ls` tool: one directory's entries in the reference's order ([`super::collate`]),
//! directories suffixed `/` (spec 14.9). Entries are only `stat`ed, never opened, so FIFOs,
//! sockets and devices are listed like any other name.

use serde_json::{Map, Value};

use super::paths::resolve_to_cwd;
use super::truncate::{DEFAULT_MAX_BYTES, format_size, truncate_head};
use super::{
    Tool, ToolContext, ToolOutput, ToolResult, arg_f64, arg_str, check_cancel, text_output,
};

/// `Number.MAX_SAFE_INTEGER`: the line limit of the byte-only truncations.
pub const NO_LINE_LIMIT: usize = 9_007_199_254_740_991;
pub const DEFAULT_LIMIT: usize = 500;

pub struct LsTool;

impl Tool for LsTool {
    fn name(&self) -> &'static str {
        "ls"
    }

    fn description(&self) -> String {
        format!(
            "List directory contents. Returns entries sorted alphabetically, with '/' suffix for directories. Includes dotfiles. Output is truncated to {DEFAULT_LIMIT} entries or 50KB (whichever is hit first)."
        )
    }

    fn snippet(&self) -> &'static str {
        "List directory contents"
    }

    fn parameters(&self) -> Value {
        static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        super::schema(
            &SCHEMA,
            r#"{
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list (default: current directory)"},
                "limit": {"type": "number", "description": "Maximum number of entries to return (default: 500)"}
            }
        }"#,
        )
    }

    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        _on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        check_cancel(ctx)?;
        let dir = resolve_to_cwd(arg_str(args, "path").unwrap_or("."), &ctx.cwd);
        // `(entries to list, the limit as the notice names it)`.
        let (limit, named) = match arg_f64(args, "limit") {
            Some(l) if l.is_finite() && !ctx.profile.ls_limit_floored => (
                if l > 0.0 {
                    l.ceil().min(1e9) as usize
                } else {
                    0
                },
                l,
            ),
            given => {
                let n = effective_limit(given, DEFAULT_LIMIT);
                (n, n as f64)
            }
        };
        let meta =
            std::fs::metadata(&dir).map_err(|_| format!("Path not found: {}", dir.display()))?;
        if !meta.is_dir() {
            return Err(format!("Not a directory: {}", dir.display()));
        }
        let reader = std::fs::read_dir(&dir).map_err(|e| format!("Cannot read directory: {e}"))?;
        let mut names: Vec<String> = reader
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        // The reference: `a.toLowerCase().localeCompare(b.toLowerCase())` (ICU order).
        names.sort_by_cached_key(|n| super::collate::ls_key(n));
        let mut results = Vec::new();
        let mut limit_reached = false;
        for name in names {
            check_cancel(ctx)?;
            if results.len() >= limit {
                limit_reached = true;
                break;
            }
            // Entries that cannot be stat'ed are skipped; symlinks are followed.
            let Ok(m) = std::fs::metadata(dir.join(&name)) else {
                continue;
            };
            results.push(if m.is_dir() { format!("{name}/") } else { name });
        }
        if results.is_empty() {
            return Ok(text_output("(empty directory)"));
        }
        let mut notices = Vec::new();
        let mut details = Map::new();
        if limit_reached {
            notices.push(format!(
                "{} entries limit reached. Use limit={} for more",
                super::js_num(named),
                super::js_num(named * 2.0)
            ));
            details.insert("entryLimitReached".into(), super::js_value(named));
        }
        Ok(finish_listing(
            &results.join("\n"),
            notices,
            Vec::new(),
            details,
        ))
    }
}

/// `limit` argument → effective limit (at least 1), `default` when absent.
pub(crate) fn effective_limit(limit: Option<f64>, default: usize) -> usize {
    match limit {
        Some(l) if l.is_finite() => l.floor().clamp(1.0, 1e9) as usize,
        _ => default,
    }
}

/// Byte truncation plus the `[notice. notice]` suffix shared by ls, find and grep.
pub(crate) fn finish_listing(
    raw: &str,
    mut notices: Vec<String>,
    after: Vec<String>,
    mut details: Map<String, Value>,
) -> ToolOutput {
    let t = truncate_head(raw, NO_LINE_LIMIT, DEFAULT_MAX_BYTES);
    let mut text = t.content.clone();
    if t.truncated {
        notices.push(format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)));
        details.insert("truncation".into(), t.to_json());
    }
    notices.extend(after);
    if !notices.is_empty() {
        text.push_str(&format!("\n\n[{}]", notices.join(". ")));
    }
    let mut out = text_output(text);
    out.details = (!details.is_empty()).then_some(Value::Object(details));
    out
}
