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

/// A tool's successful result: `{content, details?}` as in `tool_execution_end.result`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<Content>,
    pub details: Option<Value>,
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
}

pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    /// Description sent to the model.
    fn description(&self) -> String;
    /// One-liner for the system prompt's tool list.
    fn snippet(&self) -> &'static str;
    /// JSON schema of the arguments.
    fn parameters(&self) -> Value;
    /// Run the tool. `args` have passed validation (with the reference's coercions).
    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult;
}
