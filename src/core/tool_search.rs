//! The machine's side of `tool_search` (pi 1.6.0): rank the MCP tools not declared to the model
//! (`codemode` and `deferred` exposure) against the query (`mcp::search`), and load the matches:
//! they are declared from the run's next turn on, by the `role:"system"` message that declares
//! tool changes, and stay declared on that branch (the branch's system messages are what
//! [`Machine::offered_remote_tools`] reads).

use serde_json::{Value, json};

use crate::core::machine::Machine;
use crate::core::plugins::{Owner, RemoteTool};
use crate::mcp::config::Exposure;
use crate::mcp::search;
use crate::message::Content;
use crate::prompt::sections::Declared;
use crate::tools::{ToolOutput, ToolResult, tool_search};

impl Machine {
    /// The names of the tools declared on this branch (its system messages) or loaded in this run.
    fn loaded_tool_names(&self) -> std::collections::HashSet<String> {
        let mut names: std::collections::HashSet<String> = Declared::of(&self.state.messages)
            .tools
            .into_iter()
            .map(|t| t.name)
            .collect();
        if let Some(run) = &self.run {
            names.extend(run.loaded.iter().cloned());
        }
        names
    }

    /// The extension and MCP tools declared to the model now.
    pub(crate) fn offered_remote_tools(&self) -> Vec<RemoteTool> {
        let mut tools = if self.plugins.cfg.mcp_dialect == crate::protocol::McpDialect::Pith {
            self.plugins.remote_tools(&|_| false)
        } else {
            let loaded = self.loaded_tool_names();
            let mut tools = self.plugins.remote_tools(&|n| loaded.contains(n));
            // pi appends the tools `tool_search` loads to the active ones in the order they
            // were loaded: after the others, as the branch declared them, then this run's.
            let searchable: std::collections::HashSet<String> = self
                .plugins
                .mcp_tools()
                .into_iter()
                .filter(|(_, e)| matches!(e, Exposure::Codemode | Exposure::Deferred))
                .map(|(t, _)| t.name)
                .collect();
            if tools.iter().any(|t| searchable.contains(&t.name)) {
                let mut order: Vec<String> = Declared::of(&self.state.messages)
                    .tools
                    .into_iter()
                    .map(|t| t.name)
                    .collect();
                if let Some(run) = &self.run {
                    order.extend(run.loaded.iter().cloned());
                }
                let (mut late, mut early): (Vec<RemoteTool>, Vec<RemoteTool>) = tools
                    .into_iter()
                    .partition(|t| searchable.contains(&t.name));
                late.sort_by_key(|t| {
                    order
                        .iter()
                        .position(|n| *n == t.name)
                        .unwrap_or(usize::MAX)
                });
                early.extend(late);
                tools = early;
            }
            tools
        };
        // pi's `setActiveTools` from an extension.
        if !self.plugins.inactive_remote.is_empty() {
            tools.retain(|t| !self.plugins.inactive_remote.contains(&t.name));
        }
        tools
    }

    /// A tool the machine runs itself (see `Tool::runs_in_machine`).
    pub(crate) fn run_machine_tool(&mut self, name: &str, args: &Value) -> ToolResult {
        match name {
            tool_search::NAME => self.tool_search(args),
            _ => Err(format!("Tool {name} not found")),
        }
    }

    fn tool_search(&mut self, args: &Value) -> ToolResult {
        let query = args.get("query").and_then(Value::as_str).unwrap_or("");
        if query.trim().is_empty() {
            return Err("query must not be empty".into());
        }
        let limit = match args.get("limit") {
            None | Some(Value::Null) => tool_search::DEFAULT_LIMIT,
            Some(v) => match v.as_f64() {
                Some(f) if f.fract() == 0.0 && f > 0.0 => f.min(10_000.0) as usize,
                _ => return Err("limit must be a positive integer".into()),
            },
        };
        let loaded = self.loaded_tool_names();
        let candidates: Vec<RemoteTool> = self
            .plugins
            .mcp_tools()
            .into_iter()
            .filter(|(t, e)| {
                matches!(e, Exposure::Codemode | Exposure::Deferred) && !loaded.contains(&t.name)
            })
            .map(|(t, _)| t)
            .collect();
        let docs: Vec<search::Document> = candidates
            .iter()
            .map(|t| {
                let ns = match &t.owner {
                    Owner::Mcp { server, .. } => self.plugins.servers.get(*server).map(|s| {
                        (
                            crate::mcp::naming::namespace(&s.cfg.name),
                            s.cfg.description.clone().unwrap_or_default(),
                            s.instructions.clone().unwrap_or_default(),
                        )
                    }),
                    Owner::Ext(_) | Owner::McpResources(_) => None,
                };
                search::document(
                    &t.name,
                    &t.description,
                    &t.parameters,
                    ns.as_ref()
                        .map(|(n, d, i)| (n.as_str(), d.as_str(), i.as_str())),
                )
            })
            .collect();
        let matches = search::rank(query, &docs, limit);
        let text = if matches.is_empty() {
            "No matching tools found.".to_string()
        } else {
            let s = if matches.len() == 1 { "" } else { "s" };
            let lines: Vec<String> = matches
                .iter()
                .map(|m| {
                    let d = candidates
                        .iter()
                        .find(|t| &t.name == m)
                        .map(|t| {
                            t.description
                                .trim()
                                .lines()
                                .next()
                                .unwrap_or("")
                                .to_string()
                        })
                        .unwrap_or_default();
                    format!("- {m}: {d}")
                })
                .collect();
            format!(
                "Loaded {} tool{s}. They are available from your next call:\n{}",
                matches.len(),
                lines.join("\n")
            )
        };
        if let Some(run) = self.run.as_mut() {
            run.loaded.extend(matches.iter().cloned());
        }
        Ok(ToolOutput {
            content: vec![Content::text(text)],
            details: Some(json!({ "loaded": matches })),
            ..Default::default()
        })
    }
}
