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
            ..Default::default()
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
        let started = std::time::Instant::now();
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
                ..Default::default()
            });
        })?;
        let mut outcome = outcome;
        if ctx.profile.bash_signal_exit_codes {
            outcome.signal_as_exit_code(ctx.cancel.is_cancelled());
        }
        finish(&outcome, ctx, timeout, started.elapsed())
    }
}

/// The longest timer Node.js can set (pi 0.87.1 refuses longer bash timeouts).
const MAX_TIMEOUT_MS: f64 = 2_147_483_647.0;

/// Turn an outcome into the tool's result or error text.
fn finish(
    outcome: &CommandOutcome,
    ctx: &ToolContext,
    timeout: Option<f64>,
    wall: Duration,
) -> ToolResult {
    let (text, details) = format_output(outcome);
    // A timeout or an abort follows the output, if any; an exit status follows the output or
    // `(no output)` (pi's `formatOutput` with and without its empty text).
    let with_status = |status: String| {
        if outcome.output.is_empty() {
            status
        } else {
            format!("{text}\n\n{status}")
        }
    };
    let exit_status = |code: i32| format!("{text}\n\nCommand exited with code {code}");
    if outcome.timed_out {
        let secs = js_num(timeout.unwrap_or(0.0));
        return Err(with_status(format!(
            "Command timed out after {secs} seconds"
        )));
    }
    if ctx.cancel.is_cancelled() {
        return Err(with_status("Command aborted".to_string()));
    }
    if ctx.profile.structured_content {
        if let Some(code) = outcome.exit_code {
            // pi 1.6.0: the exit status is data (`structuredContent.exit_code`); a failed
            // command is a result marked `isError`, not a thrown error (no `details:{}`).
            let failed = code != 0;
            let text = if failed { exit_status(code) } else { text };
            let mut out = text_output(text);
            out.details = details;
            out.structured = Some(structured_output(outcome, code, wall));
            out.is_error = failed;
            return Ok(out);
        }
    }
    if let Some(code) = outcome.exit_code.filter(|c| *c != 0) {
        return Err(exit_status(code));
    }
    let mut out = text_output(text);
    out.details = details;
    Ok(out)
}

/// Output limit of `structuredContent.output` (pi 1.6.0: 1 MiB, half from the head and half
/// from the tail of the full output when it is longer).
const STRUCTURED_OUTPUT_MAX_BYTES: u64 = 1024 * 1024;

/// pi 1.6.0's `structuredContent` of a finished command:
/// `{output, truncated[, full_output_path], exit_code, wall_time_seconds}`; `output` is the whole
/// output (from the temp file when there is one), `truncated` says it exceeded 1 MiB, and
/// `wall_time_seconds` has one decimal.
fn structured_output(outcome: &CommandOutcome, code: i32, wall: Duration) -> Value {
    let (output, truncated) = match &outcome.full_output_path {
        Some(p) => read_full_output(p, STRUCTURED_OUTPUT_MAX_BYTES)
            .unwrap_or_else(|| (outcome.raw_output.clone(), false)),
        None => (outcome.raw_output.clone(), false),
    };
    let mut m = Map::new();
    m.insert("output".into(), json!(output));
    m.insert("truncated".into(), json!(truncated));
    if truncated {
        if let Some(p) = &outcome.full_output_path {
            m.insert("full_output_path".into(), json!(p.to_string_lossy()));
        }
    }
    m.insert("exit_code".into(), json!(code));
    let tenths = (wall.as_millis() as f64 / 100.0).round() / 10.0;
    m.insert("wall_time_seconds".into(), super::js_value(tenths));
    Value::Object(m)
}

/// The full output saved in `path`: all of it when it fits in `max` bytes, else its first and
/// last `max / 2` bytes (cut at character boundaries) around `[... N bytes omitted ...]`.
/// Reads at most `max` bytes. `None` if the file cannot be read.
fn read_full_output(path: &std::path::Path, max: u64) -> Option<(String, bool)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let size = f.metadata().ok()?.len();
    if size <= max {
        let mut buf = Vec::with_capacity(size as usize);
        f.read_to_end(&mut buf).ok()?;
        return Some((String::from_utf8_lossy(&buf).into_owned(), false));
    }
    let head_len = max / 2;
    let tail_len = max - head_len;
    let mut head = vec![0u8; head_len as usize];
    f.read_exact(&mut head).ok()?;
    let mut tail = vec![0u8; tail_len as usize];
    f.seek(SeekFrom::Start(size - tail_len)).ok()?;
    f.read_exact(&mut tail).ok()?;
    // The head drops an incomplete trailing sequence; the tail skips continuation bytes.
    let head_text = match std::str::from_utf8(&head) {
        Ok(t) => t.to_string(),
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(&head[..e.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(&head).into_owned(),
    };
    let start = tail.iter().take_while(|b| (**b & 0xc0) == 0x80).count();
    let tail_text = String::from_utf8_lossy(&tail[start..]);
    let omitted = size - head_len - tail_len;
    Some((
        format!("{head_text}\n\n[... {omitted} bytes omitted ...]\n\n{tail_text}"),
        true,
    ))
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
