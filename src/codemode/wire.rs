//! The lines pith and its codemode worker exchange (JSON, one per line). Pure data.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The first line the worker reads: everything one script needs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Setup {
    /// The script, without its `// @options:` line.
    pub code: String,
    pub tools: Vec<ToolInfo>,
    #[serde(default)]
    pub namespaces: Vec<Namespace>,
    /// `load()`'s values on this branch: key → JSON text.
    pub store: Map<String, Value>,
    /// The VM's heap limit in bytes.
    pub memory_limit: usize,
    /// `--sandbox` mode the worker confines itself to before it runs anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    #[serde(default)]
    pub cwd: String,
}

/// A tool as scripts see it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    pub name: String,
    /// The name as a JavaScript identifier (`mcp__dev-radius__x` → `mcp__dev_radius__x`).
    pub js_name: String,
    /// Its description and TypeScript declaration (`ALL_TOOLS`, `describeTool()`).
    pub description: String,
    /// The tool's own description (ranked by `searchTools()`).
    #[serde(default)]
    pub summary: String,
    /// The namespace (an MCP server's name) it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Namespace {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

impl Setup {
    /// What the prelude reads.
    pub fn js_view(&self) -> Value {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|t| {
                serde_json::json!({"name": t.name, "jsName": t.js_name, "description": t.description})
            })
            .collect();
        let store: Map<String, Value> = self
            .store
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.to_string())))
            .collect();
        serde_json::json!({"tools": tools, "store": store})
    }
}

/// Worker → pith.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "t", rename_all = "lowercase")]
pub enum ToUp {
    /// `tools.<name>(args)`.
    Call {
        id: u64,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args: Option<Value>,
    },
    /// `text()` / `console.*` / `image()`.
    Out {
        kind: String,
        data: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime: Option<String>,
    },
    /// The script ended.
    Done {
        ok: bool,
        /// The returned value as text (strings as they are, other values as JSON).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// `{set, delete}`: the store writes of a script that succeeded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        writes: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ScriptError>,
    },
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ScriptError {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
}

impl ScriptError {
    /// A failure of the sandbox itself, not of the script (its `name` says so).
    pub fn sandbox(message: String) -> Self {
        ScriptError {
            name: Some(SANDBOX_ERROR.into()),
            message,
            stack: None,
        }
    }

    /// The text after `Script error:`.
    pub fn text(&self) -> String {
        if self.name.as_deref() == Some(SANDBOX_ERROR) {
            return format!("Script sandbox failed: {}", self.message);
        }
        match &self.stack {
            Some(s) => s.clone(),
            None => format!(
                "{}: {}",
                self.name.as_deref().unwrap_or("Error"),
                self.message
            ),
        }
    }
}

const SANDBOX_ERROR: &str = "\u{0}sandbox";

/// pith → worker: the answer to call `id`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "t", rename_all = "lowercase")]
pub enum ToDown {
    Settle {
        id: u64,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}
