//! `write` and `edit` as an ACP session runs them: the same tools, with the file's text taken by
//! the tool's own thread just before it writes and just after, reported as one partial result
//! (`details.acpDiff`) that the front end turns into a `diff` content. Nothing else can write the
//! file between the tool's read and its write through pith, so no edit loses its old text.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::tools::{Tool, ToolContext, ToolOutput, ToolResult};

/// Files larger than this are not copied into a diff (the call still runs).
const MAX_DIFF_BYTES: u64 = 4 * 1024 * 1024;

pub struct DiffTool {
    pub inner: Arc<dyn Tool>,
}

/// The built-in `write` and `edit` wrapped; every other tool as it is.
pub fn wrap(t: Arc<dyn Tool>) -> Arc<dyn Tool> {
    match t.name() {
        "write" | "edit" => Arc::new(DiffTool { inner: t }),
        _ => t,
    }
}

/// The partial result that carries a file's text before and after a call (`details.acpDiff`),
/// turned into a `diff` content by the front end.
pub fn diff_output(path: &str, old: Option<&str>, new: &str) -> ToolOutput {
    ToolOutput {
        content: Vec::new(),
        details: Some(json!({"acpDiff": {"path": path, "oldText": old, "newText": new}})),
        structured: None,
        is_error: false,
    }
}

fn read_small(path: &std::path::Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_DIFF_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

impl Tool for DiffTool {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn description(&self) -> String {
        self.inner.description()
    }
    fn snippet(&self) -> &'static str {
        self.inner.snippet()
    }
    fn initial_update(&self) -> Option<ToolOutput> {
        self.inner.initial_update()
    }
    fn runs_in_machine(&self) -> bool {
        self.inner.runs_in_machine()
    }
    fn parameters(&self) -> Value {
        self.inner.parameters()
    }

    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        let path = args
            .get("path")
            .and_then(Value::as_str)
            .map(|p| crate::tools::paths::resolve_to_cwd(p, &ctx.cwd));
        let existed = path.as_deref().is_some_and(std::path::Path::exists);
        let old = path.as_deref().and_then(read_small);
        let result = self.inner.execute(args, ctx, on_update);
        if let (Ok(out), Some(p)) = (&result, &path) {
            if !out.is_error && (old.is_some() || !existed) {
                if let Some(new) = read_small(p) {
                    on_update(diff_output(&p.to_string_lossy(), old.as_deref(), &new));
                }
            }
        }
        result
    }
}
