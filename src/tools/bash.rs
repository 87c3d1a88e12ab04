//! The `bash` tool: run a command in the tool cwd and return its output tail (spec 14.4).
//! Process handling lives in [`super::process`], shared with the RPC `bash` command.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::process::{CommandOutcome, CommandSpec, run_command};
use super::truncate::{DEFAULT_MAX_BYTES, format_size};
use super::{Tool, ToolContext, ToolOutput, ToolResult, arg_f64, arg_str, js_num, text_output};
use crate::message::Content;

/// Minimum time between two `tool_execution_update`s of a running command.
pub const UPDATE_THROTTLE: Duration = Duration::from_millis(100);

pub struct BashTool;

impl Tool for BashTool {
    fn name(&self) -> &'static str {
        "bash"
    }

    fn description(&self) -> String {
        "Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated to last 2000 lines or 50KB (whichever is hit first). If truncated, full output is saved to a temp file. Optionally provide a timeout in seconds.".to_string()
    }

    fn snippet(&self) -> &'static str {
        "Execute bash commands (ls, grep, find, etc.)"
    }

    fn initial_update(&self) -> Option<ToolOutput> {
        Some(ToolOutput {
            content: vec![],
            details: None,
        })
    }

    fn parameters(&self) -> Value {
        static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        super::schema(
            &SCHEMA,
            r#"{
            "type": "object",
            "required": ["command"],
            "properties": {
                "command": {"type": "string", "description": "Bash command to execute"},
                "timeout": {"type": "number", "description": "Timeout in seconds (optional, no default timeout)"}
            }
        }"#,
        )
    }

    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        let command = arg_str(args, "command").ok_or("Invalid bash arguments.")?;
        let timeout = arg_f64(args, "timeout");
        if ctx.profile.bash_checks_timeout {
            // pi 0.87.1 refuses what 0.73.1 took as "no timeout" (and what a timer cannot hold).
            if let Some(t) = timeout {
                if !t.is_finite() || t <= 0.0 {
                    return Err("Invalid timeout: must be a finite number of seconds".to_string());
                }
                if t * 1000.0 > MAX_TIMEOUT_MS {
                    return Err(format!(
                        "Invalid timeout: maximum is {} seconds",
                        js_num(MAX_TIMEOUT_MS / 1000.0)
                    ));
                }
            }
        }
        let timeout = timeout.filter(|t| *t > 0.0 && t.is_finite());
        if !ctx.cwd.is_dir() {
            return Err(format!(
                "Working directory does not exist: {}\nCannot execute bash commands.",
                ctx.cwd.display()
            ));
        }
        if ctx.cancel.is_cancelled() {
            return Err("Command aborted".to_string());
        }
        let spec = CommandSpec {
            command,
            cwd: &ctx.cwd,
            shell_path: ctx.shell_path.as_deref(),
            prefix: ctx.shell_command_prefix.as_deref(),
            cancel: &ctx.cancel,
            timeout: timeout.map(Duration::from_secs_f64),
            sanitize: false,
            path_prepend: None,
            env: &ctx.env,
            on_text: None,
            line_counting: ctx.profile.line_counting,
        };
        let outcome = run_command(&spec, UPDATE_THROTTLE, &mut |snap| {
            let mut details = Map::new();
            if snap.truncation.truncated {
                details.insert("truncation".into(), snap.truncation.to_json());
            }
            if let Some(p) = snap.full_output_path {
                details.insert("fullOutputPath".into(), json!(p.to_string_lossy()));
            }
            on_update(ToolOutput {
                content: vec![Content::text(snap.truncation.content.clone())],
                details: Some(Value::Object(details)),
            });
        })?;
        let mut outcome = outcome;
        if ctx.profile.bash_signal_exit_codes {
            outcome.signal_as_exit_code(ctx.cancel.is_cancelled());
        }
        finish(&outcome, ctx, timeout)
    }
}

/// The longest timer Node.js can set (pi 0.87.1 refuses longer bash timeouts).
const MAX_TIMEOUT_MS: f64 = 2_147_483_647.0;

/// Turn an outcome into the tool's result or error text.
fn finish(outcome: &CommandOutcome, ctx: &ToolContext, timeout: Option<f64>) -> ToolResult {
    let (text, details) = format_output(outcome);
    let with_status = |status: String| {
        let body = if outcome.output.is_empty() {
            String::new()
        } else {
            text.clone()
        };
        if body.is_empty() {
            status
        } else {
            format!("{body}\n\n{status}")
        }
    };
    if outcome.timed_out {
        let secs = js_num(timeout.unwrap_or(0.0));
        return Err(with_status(format!(
            "Command timed out after {secs} seconds"
        )));
    }
    if ctx.cancel.is_cancelled() {
        return Err(with_status("Command aborted".to_string()));
    }
    if let Some(code) = outcome.exit_code.filter(|c| *c != 0) {
        return Err(with_status(format!("Command exited with code {code}")));
    }
    let mut out = text_output(text);
    out.details = details;
    Ok(out)
}

/// `(text, details)`: the output tail (or `(no output)`) plus the truncation notice.
pub fn format_output(outcome: &CommandOutcome) -> (String, Option<Value>) {
    let t = &outcome.truncation;
    let mut text = if outcome.output.is_empty() {
        "(no output)".to_string()
    } else {
        outcome.output.clone()
    };
    if !t.truncated {
        return (text, None);
    }
    let path = outcome
        .full_output_path
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| "undefined".to_string());
    let start = t.total_lines - t.output_lines + 1;
    let end = t.total_lines;
    if t.last_line_partial {
        text.push_str(&format!(
            "\n\n[Showing last {} of line {end} (line is {}). Full output: {path}]",
            format_size(t.output_bytes),
            format_size(outcome.last_line_bytes)
        ));
    } else if t.truncated_by == Some(super::truncate::TruncatedBy::Lines) {
        text.push_str(&format!(
            "\n\n[Showing lines {start}-{end} of {}. Full output: {path}]",
            t.total_lines
        ));
    } else {
        text.push_str(&format!(
            "\n\n[Showing lines {start}-{end} of {} ({} limit). Full output: {path}]",
            t.total_lines,
            format_size(DEFAULT_MAX_BYTES)
        ));
    }
    let mut details = Map::new();
    details.insert("truncation".into(), t.to_json());
    if let Some(p) = &outcome.full_output_path {
        details.insert("fullOutputPath".into(), json!(p.to_string_lossy()));
    }
    (text, Some(Value::Object(details)))
}
