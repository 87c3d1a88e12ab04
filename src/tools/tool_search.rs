//! `tool_search` (pi 1.6.0, `--compat 1.6`): its declaration. The search itself needs every MCP
//! tool and the tools declared on the branch, which only the state machine knows, so the
//! machine runs it (`core::tool_search`) instead of a worker thread.

use serde_json::Value;

use super::{Tool, ToolContext, ToolOutput, ToolResult};

pub const NAME: &str = "tool_search";
/// Matches returned when the call names no `limit`.
pub const DEFAULT_LIMIT: usize = 8;

pub struct ToolSearchTool;

impl Tool for ToolSearchTool {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> String {
        "# Tool discovery\n\nSearches over deferred tool metadata with BM25 and exposes matching tools for the next model call.\n\nSome of the tools, such as tools of MCP servers, may not have been provided to you upfront, and you should use this tool (`tool_search`) to search for the required tools. For MCP tool discovery, always use `tool_search`.".to_string()
    }

    fn snippet(&self) -> &'static str {
        "Search for tools that are not loaded yet and load the matches"
    }

    fn parameters(&self) -> Value {
        static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        super::schema(
            &SCHEMA,
            r#"{
            "type": "object",
            "required": ["query"],
            "properties": {
                "query": {"type": "string", "description": "Search query for deferred tools."},
                "limit": {"type": "number", "description": "Maximum number of tools to return. Defaults to 8."}
            }
        }"#,
        )
    }

    fn runs_in_machine(&self) -> bool {
        true
    }

    fn execute(
        &self,
        _args: &Value,
        _ctx: &ToolContext,
        _on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        // The machine resolves `tool_search` before any worker could run it.
        Err("tool_search runs in the agent, not on a worker".into())
    }
}
