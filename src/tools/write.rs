//! The `write` tool: create or overwrite a file, creating parent directories (spec 14.6).

use serde_json::Value;

use super::paths::{approved_target, node_error};
use super::regular::{refuse_special, write_regular};
use super::{Tool, ToolContext, ToolOutput, ToolResult, arg_str, check_cancel, text_output};

pub struct WriteTool;

impl Tool for WriteTool {
    fn name(&self) -> &'static str {
        "write"
    }

    fn description(&self) -> String {
        "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. Automatically creates parent directories.".to_string()
    }

    fn snippet(&self) -> &'static str {
        "Create or overwrite files"
    }

    fn parameters(&self) -> Value {
        static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        super::schema(
            &SCHEMA,
            r#"{
            "type": "object",
            "required": ["path", "content"],
            "properties": {
                "path": {"type": "string", "description": "Path to the file to write (relative or absolute)"},
                "content": {"type": "string", "description": "Content to write to the file"}
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
        let path = arg_str(args, "path").ok_or("Invalid write arguments.")?;
        let content = arg_str(args, "content").ok_or("Invalid write arguments.")?;
        check_cancel(ctx)?;
        let abs = approved_target(path, &ctx.cwd, ctx.approved_target.as_deref())?;
        if let Some(parent) = abs.parent() {
            std::fs::create_dir_all(parent).map_err(|e| node_error(&e, "mkdir", parent))?;
        }
        check_cancel(ctx)?;
        // Writing into a FIFO blocks until a reader comes; devices are not files to write.
        if let Some(e) = refuse_special("write", &abs) {
            return Err(e);
        }
        write_regular(&abs, content.as_bytes()).map_err(|e| match e {
            Ok(special) => special,
            Err(e) => node_error(&e, "open", &abs),
        })?;
        check_cancel(ctx)?;
        if !ctx.profile.write_byte_count {
            return Ok(text_output(format!("Successfully wrote to {path}")));
        }
        // The reference reports the JavaScript string length (UTF-16 units).
        let units = content.encode_utf16().count();
        Ok(text_output(format!(
            "Successfully wrote {units} bytes to {path}"
        )))
    }
}
