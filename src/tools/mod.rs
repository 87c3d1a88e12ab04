//! The seven built-in tools (read, write, edit, bash, grep, find, ls).
//!
//! A tool is a plain blocking function run on a worker thread (never on the state machine). It
//! gets validated arguments, a [`ToolContext`] (cwd, cancellation, shell settings) and a callback
//! for partial results (`tool_execution_update`). It returns a [`ToolOutput`] or an error text
//! (the reference's exact wording: the model reads it).

use std::path::PathBuf;

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::message::Content;

/// A tool's result: `{content, details?}` as in `tool_execution_end.result` (pi 1.6.0 adds
/// `structuredContent` and, for a result the tool itself marks failed, `isError`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<Content>,
    pub details: Option<Value>,
    /// `structuredContent` (pi 1.6.0): shown in `tool_execution_end.result` only, never in the
    /// toolResult message. Set only when the profile's `tools.structured_content` asks for it.
    pub structured: Option<Value>,
    /// A result the tool returned as failed (pi 1.6.0's bash with a non-zero exit): the
    /// toolResult message has `isError:true` but no `details:{}`, and `result.isError:true`.
    pub is_error: bool,
}

/// `Err(text)` becomes `{content:[{type:text,text}], details:{}, isError:true}`.
pub type ToolResult = Result<ToolOutput, String>;

#[derive(Clone)]
pub struct ToolContext {
    pub cwd: PathBuf,
    pub cancel: CancelToken,
    /// settings `shellPath` (None = bash from PATH / /bin/bash).
    pub shell_path: Option<String>,
    /// settings `shellCommandPrefix`.
    pub shell_command_prefix: Option<String>,
    /// Environment for child processes (`None` removes a variable): pi's `PI_CODING_AGENT`,
    /// and under `--compat 0.87` `AI_AGENT` and the session's `PI_*` variables.
    pub env: Vec<(String, Option<String>)>,
    /// The tool behaviour of the protocol version spoken (line counting, image types, bash exit
    /// statuses and timeouts, edit's fuzzy writes and patch, write's wording).
    pub profile: &'static crate::protocol::Tools,
    /// A write or edit whose resolved target the permission gate approved: it must still
    /// resolve there when the tool writes (None: no permission rules, nothing to check).
    pub approved_target: Option<PathBuf>,
}

pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    /// Description sent to the model.
    fn description(&self) -> String;
    /// One-liner for the system prompt's tool list.
    fn snippet(&self) -> &'static str;
    /// A partial result the tool reports the moment it starts (bash: `{"content":[]}`). The
    /// state machine emits it when it starts the tool, so these updates keep the calls' order
    /// instead of racing between worker threads.
    fn initial_update(&self) -> Option<ToolOutput> {
        None
    }
    /// JSON schema of the arguments.
    /// The state machine runs it itself (it needs the agent's state: `tool_search`), not a
    /// worker thread; [`Tool::execute`] is then never called.
    fn runs_in_machine(&self) -> bool {
        false
    }

    fn parameters(&self) -> Value;
    /// Run the tool. `args` have passed validation (with the reference's coercions).
    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult;
}

pub mod bash;
pub mod bmp;
pub mod collate;
pub mod edit;
pub mod find;
pub mod grep;
pub mod ls;
pub mod mutation;
pub mod ordered_walk;
pub mod paths;
pub mod pi_coerce;
pub mod pi_schema;
pub mod process;
pub mod read;
pub mod regular;
pub mod selection;
pub mod tool_search;
pub mod truncate;
pub mod validate;
pub mod walk;
pub mod write;

/// Tools the reference enables when `--tools` is not given, in its order.
pub const DEFAULT_TOOLS: [&str; 4] = ["read", "bash", "edit", "write"];
/// Every built-in tool, in the reference's order.
pub const ALL_TOOLS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

/// The built-in tools with these names, in the order given (unknown names are skipped).
pub fn builtin_tools(names: &[&str]) -> Vec<Box<dyn Tool>> {
    names.iter().filter_map(|n| builtin_tool(n)).collect()
}

/// One built-in tool by name.
pub fn builtin_tool(name: &str) -> Option<Box<dyn Tool>> {
    Some(match name {
        "read" => Box::new(read::ReadTool),
        "bash" => Box::new(bash::BashTool),
        "edit" => Box::new(edit::EditTool),
        "write" => Box::new(write::WriteTool),
        "grep" => Box::new(grep::GrepTool::default()),
        "find" => Box::new(find::FindTool::default()),
        "ls" => Box::new(ls::LsTool),
        _ => return None,
    })
}

/// One tool by name as the protocol version's tool set has it: the built-ins, and pi 1.6.0's
/// `tool_search` with its MCP client.
pub fn tool_for(name: &str, profile: &crate::protocol::Tools) -> Option<Box<dyn Tool>> {
    match name {
        tool_search::NAME if profile.mcp == crate::protocol::McpDialect::Pi => {
            Some(Box::new(tool_search::ToolSearchTool))
        }
        "find" => Some(Box::new(find::FindTool {
            relative_globs: profile.find_paths_anchored,
        })),
        "grep" => Some(Box::new(grep::GrepTool {
            relative_globs: profile.find_paths_anchored,
        })),
        _ => builtin_tool(name),
    }
}

/// The reference's argument preparation before validation: `edit` accepts the legacy
/// `{oldText,newText}` form and `edits` sent as a JSON string. Other tools pass through.
pub fn prepare_arguments(tool_name: &str, args: &Value) -> Value {
    match tool_name {
        "edit" => edit::prepare_edit_arguments(args),
        _ => args.clone(),
    }
}

/// A tool's JSON schema ([`Tool::parameters`]) from its text, parsed once per process and cloned
/// for every caller. `json!` would build it with inline code at every call, about 5 KB of code a
/// tool (`docs/architecture.md`, "Binary size"); a clone costs what that building did. The texts
/// are constants, checked by a test to parse.
pub(crate) fn schema(cell: &'static std::sync::OnceLock<Value>, text: &str) -> Value {
    cell.get_or_init(|| serde_json::from_str(text).unwrap_or(Value::Null))
        .clone()
}

/// A version's variant of a tool's schema: `base` with parameter `param`'s description replaced,
/// made once per process (the key order stays `base`'s).
pub(crate) fn schema_variant(
    cell: &'static std::sync::OnceLock<Value>,
    base: impl FnOnce() -> Value,
    param: &str,
    description: &str,
) -> Value {
    cell.get_or_init(|| {
        let mut v = base();
        if let Some(p) = v.pointer_mut(&format!("/properties/{param}/description")) {
            *p = Value::String(description.to_string());
        }
        v
    })
    .clone()
}

/// Prepare, then validate `args` against `tool`'s schema (the machine's one call per tool call).
pub fn prepare_and_validate(tool: &dyn Tool, args: &Value) -> Result<Value, String> {
    let prepared = prepare_arguments(tool.name(), args);
    validate::validate_args(tool.name(), &tool.parameters(), &prepared)
}

/// A result with one text block and no details.
pub(crate) fn text_output(text: impl Into<String>) -> ToolOutput {
    ToolOutput {
        content: vec![Content::text(text)],
        details: None,
        ..Default::default()
    }
}

/// The error every file tool gives when the run was aborted.
pub(crate) const ABORTED: &str = "Operation aborted";

/// `Err(Operation aborted)` if the run was cancelled.
pub(crate) fn check_cancel(ctx: &ToolContext) -> Result<(), String> {
    if ctx.cancel.is_cancelled() {
        Err(ABORTED.to_string())
    } else {
        Ok(())
    }
}

/// Optional string argument.
pub(crate) fn arg_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// Optional numeric argument (validation already coerced numeric strings).
pub(crate) fn arg_f64(args: &Value, key: &str) -> Option<f64> {
    args.get(key).and_then(Value::as_f64)
}

/// A JSON number as JavaScript holds it: whole numbers as integers (`2`, not `2.0`).
pub(crate) fn js_value(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        Value::from(n as i64)
    } else {
        Value::from(n)
    }
}

/// JavaScript's `String(n)`: `5`, not `5.0`; `1e+21`; `NaN`, `Infinity`.
pub(crate) fn js_num(n: f64) -> String {
    if n.is_nan() {
        "NaN".to_string()
    } else if n.is_infinite() {
        if n > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        crate::json::js_number(n)
    }
}

/// A name the providers accept for a tool: 1-64 of `[A-Za-z0-9_-]`.
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod schema_tests {
    use super::*;

    #[test]
    fn every_schema_text_parses_to_an_object_schema() {
        for name in ALL_TOOLS {
            let tool = builtin_tool(name).expect("built-in tool");
            let p = tool.parameters();
            assert_eq!(p["type"], "object", "{name}");
            assert!(p["properties"].is_object(), "{name}");
            // A second call gives the same value (from the parsed copy).
            assert_eq!(tool.parameters(), p, "{name}");
        }
    }
}
