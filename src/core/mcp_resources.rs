//! pi 1.6.0's MCP resource tools (`list_mcp_resources`, `list_mcp_resource_templates`,
//! `read_mcp_resource`), the machine's side: they exist while a ready server offers resources,
//! reach every such server, and are answered from requests to the servers (one page of a named
//! server, or every page of every server), collected here until the last answer arrives. Their
//! results: the JSON listing as text (20 KB middle cut) and as `structuredContent`; a read's
//! contents as text and images (binary resources saved to files).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::core::machine::Machine;
use crate::core::plugins::Server;
use crate::core::plugins::{Life, McpReq, Owner, RemoteTool};
use crate::mcp::config::Exposure;
use crate::tools::ToolResult;

pub const LIST: &str = "list_mcp_resources";
pub const TEMPLATES: &str = "list_mcp_resource_templates";
pub const READ: &str = "read_mcp_resource";

/// Pages read from one server for one listing, at most.
const MAX_PAGES: usize = 100;
/// Items kept from one listing, at most (the rest are dropped with a note).
const MAX_ITEMS: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceTool {
    List,
    Templates,
    Read,
}

impl ResourceTool {
    pub fn name(self) -> &'static str {
        match self {
            ResourceTool::List => LIST,
            ResourceTool::Templates => TEMPLATES,
            ResourceTool::Read => READ,
        }
    }
    fn method(self) -> &'static str {
        match self {
            ResourceTool::List => "resources/list",
            ResourceTool::Templates => "resources/templates/list",
            ResourceTool::Read => "resources/read",
        }
    }
    /// The listing's key (`resources`, `resourceTemplates`).
    fn key(self) -> &'static str {
        match self {
            ResourceTool::List => "resources",
            ResourceTool::Templates => "resourceTemplates",
            ResourceTool::Read => "contents",
        }
    }

    fn description(self) -> &'static str {
        match self {
            ResourceTool::List => {
                "Lists resources provided by MCP servers. Resources allow servers to share data that provides context to language models, such as files, database schemas, or application-specific information. Prefer resources over web search when possible."
            }
            ResourceTool::Templates => {
                "Lists resource templates provided by MCP servers. Parameterized resource templates allow servers to share data that takes parameters and provides context to language models, such as files, database schemas, or application-specific information. Prefer resource templates over web search when possible."
            }
            ResourceTool::Read => {
                "Read a specific resource from an MCP server given the server name and resource URI."
            }
        }
    }

    fn parameters(self) -> Value {
        match self {
            ResourceTool::Read => json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "MCP server name exactly as configured. Must match the 'server' field returned by list_mcp_resources."},
                    "uri": {"type": "string", "description": "Resource URI to read. Must be one of the URIs returned by list_mcp_resources."}
                },
                "required": ["server", "uri"],
                "additionalProperties": false
            }),
            _ => json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "MCP server name. Omit to list every server with resources."},
                    "cursor": {"type": "string", "description": "Opaque cursor from a previous call with the same server; omit for the first page."}
                },
                "additionalProperties": false
            }),
        }
    }
}

/// One server's part of a resource call.
struct Part {
    server: usize,
    name: String,
    items: Vec<Value>,
    next_cursor: Option<String>,
    pages: usize,
    error: Option<String>,
    done: bool,
}

/// A resource tool call waiting for its servers.
pub struct ResourceOp {
    batch: u64,
    index: usize,
    tool: ResourceTool,
    /// A named server: one page (`cursor`), or the read.
    single: bool,
    uri: String,
    parts: Vec<Part>,
}

/// The calls waiting, by id.
#[derive(Default)]
pub struct ResourceOps {
    next: u64,
    ops: HashMap<u64, ResourceOp>,
}

fn arg(args: &Value, key: &str) -> Result<Option<String>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
        Some(_) => Err(format!("{key} must be a string")),
    }
}

/// A listed item without `_meta` and icons, tagged with its server; None for MCP App UIs.
fn listed(server: &str, item: &Value) -> Option<Value> {
    let obj = item.as_object()?;
    let uri = obj
        .get("uri")
        .or_else(|| obj.get("uriTemplate"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let mime = obj.get("mimeType").and_then(Value::as_str).unwrap_or("");
    let app = mime.split(';').skip(1).any(|p| {
        p.trim()
            .replace(['"', ' '], "")
            .eq_ignore_ascii_case("profile=mcp-app")
    });
    if uri.starts_with("ui://") || app {
        return None;
    }
    let mut out = Map::new();
    out.insert("server".into(), json!(server));
    for (k, v) in obj {
        if k != "_meta" && k != "icons" && k != "server" {
            out.insert(k.clone(), v.clone());
        }
    }
    Some(Value::Object(out))
}

/// The resource tools while some ready server offers resources, with the widest exposure among
/// those servers (`direct`, then `codemode`/`deferred`).
pub fn tools_for(servers: &[Server]) -> Vec<(RemoteTool, Exposure)> {
    let exposures: Vec<Exposure> = servers
        .iter()
        .filter(|s| s.life == Life::Ready && s.has_resources)
        .map(|s| s.cfg.exposure)
        .filter(|e| *e != Exposure::Hidden)
        .collect();
    let Some(exposure) = [Exposure::Direct, Exposure::Codemode, Exposure::Deferred]
        .into_iter()
        .find(|e| exposures.contains(e))
    else {
        return Vec::new();
    };
    [
        ResourceTool::List,
        ResourceTool::Templates,
        ResourceTool::Read,
    ]
    .into_iter()
    .map(|t| {
        (
            RemoteTool {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
                snippet: None,
                guidelines: Vec::new(),
                owner: Owner::McpResources(t),
            },
            exposure,
        )
    })
    .collect()
}

impl Machine {
    /// Indices of the ready servers that offer resources, by name.
    fn resource_servers(&self) -> Vec<(usize, String)> {
        let mut v: Vec<(usize, String)> = self
            .plugins
            .servers
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.life == Life::Ready && s.has_resources && s.cfg.exposure != Exposure::Hidden
            })
            .map(|(i, s)| (i, s.cfg.name.clone()))
            .collect();
        v.sort_by_key(|a| a.1.to_lowercase());
        v
    }

    /// Start resource call `index` of `batch`.
    pub(crate) fn mcp_resource_call(
        &mut self,
        batch: u64,
        index: usize,
        tool: ResourceTool,
        args: &Value,
    ) -> Result<(), String> {
        let server = arg(args, "server")?;
        let cursor = arg(args, "cursor")?;
        let uri = arg(args, "uri")?;
        let servers = self.resource_servers();
        let find = |name: &str| -> Result<(usize, String), String> {
            servers
                .iter()
                .find(|(_, n)| n == name)
                .cloned()
                .ok_or_else(|| {
                    let names: Vec<&str> = servers.iter().map(|(_, n)| n.as_str()).collect();
                    if names.is_empty() {
                        format!("MCP server \"{name}\" has no resources")
                    } else {
                        format!(
                            "MCP server \"{name}\" has no resources. Servers with resources: {}",
                            names.join(", ")
                        )
                    }
                })
        };
        let (targets, single) = if tool == ResourceTool::Read {
            let Some(s) = server.as_deref() else {
                return Err("server must be provided".into());
            };
            if uri.is_none() {
                return Err("uri must be provided".into());
            }
            (vec![find(s)?], true)
        } else if let Some(s) = server.as_deref() {
            (vec![find(s)?], true)
        } else {
            if cursor.is_some() {
                return Err("cursor can only be used when a server is specified".into());
            }
            (servers, false)
        };
        let id = self.resource_ops.next;
        self.resource_ops.next += 1;
        let op = ResourceOp {
            batch,
            index,
            tool,
            single,
            uri: uri.clone().unwrap_or_default(),
            parts: targets
                .iter()
                .map(|(i, n)| Part {
                    server: *i,
                    name: n.clone(),
                    items: Vec::new(),
                    next_cursor: None,
                    pages: 0,
                    error: None,
                    done: false,
                })
                .collect(),
        };
        self.resource_ops.ops.insert(id, op);
        for (i, _) in targets {
            let params = match (tool, &cursor, &uri) {
                (ResourceTool::Read, _, Some(u)) => Some(json!({"uri": u})),
                (_, Some(c), _) => Some(json!({"cursor": c})),
                _ => None,
            };
            self.mcp_resource_request(i, id, tool, params);
        }
        self.resource_op_check(id);
        Ok(())
    }

    fn mcp_resource_request(
        &mut self,
        server: usize,
        op: u64,
        tool: ResourceTool,
        params: Option<Value>,
    ) {
        self.mcp_send(server, McpReq::Resource { op }, tool.method(), params);
    }

    /// An answer (or failure) of server `server` for resource call `op`.
    pub(crate) fn on_resource_answer(
        &mut self,
        server: usize,
        op: u64,
        result: Result<Value, String>,
    ) {
        let mut again: Option<(ResourceTool, String)> = None;
        {
            let Some(o) = self.resource_ops.ops.get_mut(&op) else {
                return;
            };
            let tool = o.tool;
            let single = o.single;
            let Some(part) = o.parts.iter_mut().find(|p| p.server == server && !p.done) else {
                return;
            };
            match result {
                Err(e) => {
                    part.error = Some(e);
                    part.done = true;
                }
                Ok(v) => {
                    part.pages += 1;
                    match v.get(tool.key()).and_then(Value::as_array) {
                        None => {
                            part.error = Some(format!("Invalid MCP {} result", tool.method()));
                            part.done = true;
                        }
                        Some(items) => {
                            if tool == ResourceTool::Read {
                                part.items.extend(items.iter().take(MAX_ITEMS).cloned());
                            } else {
                                let room = MAX_ITEMS.saturating_sub(part.items.len());
                                part.items.extend(
                                    items
                                        .iter()
                                        .filter_map(|x| listed(&part.name, x))
                                        .take(room),
                                );
                            }
                            let next = v
                                .get("nextCursor")
                                .and_then(Value::as_str)
                                .filter(|c| !c.is_empty())
                                .map(str::to_string);
                            match next {
                                Some(c)
                                    if !single
                                        && part.pages < MAX_PAGES
                                        && part.items.len() < MAX_ITEMS =>
                                {
                                    again = Some((tool, c));
                                }
                                Some(c) if single => {
                                    part.next_cursor = Some(c);
                                    part.done = true;
                                }
                                _ => part.done = true,
                            }
                        }
                    }
                }
            }
        }
        if let Some((tool, cursor)) = again {
            self.mcp_resource_request(server, op, tool, Some(json!({"cursor": cursor})));
        }
        self.resource_op_check(op);
    }

    /// Every server answered: the call's result.
    fn resource_op_check(&mut self, id: u64) {
        if !self
            .resource_ops
            .ops
            .get(&id)
            .is_some_and(|o| o.parts.iter().all(|p| p.done))
        {
            return;
        }
        let Some(o) = self.resource_ops.ops.remove(&id) else {
            return;
        };
        let (batch, index) = (o.batch, o.index);
        self.finish_off_thread(batch, index, move || Self::resource_result(&o));
    }

    /// The answer of a resource tool from its servers' answers (a binary resource is saved to
    /// a temporary file: made off the machine thread).
    fn resource_result(o: &ResourceOp) -> ToolResult {
        let save = &crate::core::mcp::save_output;
        if o.tool == ResourceTool::Read {
            let part = &o.parts[0];
            if let Some(e) = &part.error {
                return Err(e.clone());
            }
            let many = part.items.len() > 1;
            let mut blocks: Vec<Value> = Vec::new();
            for c in &part.items {
                if many {
                    let uri = c.get("uri").and_then(Value::as_str).unwrap_or("");
                    blocks.push(json!({"type": "text", "text": format!("{uri}:")}));
                }
                blocks.push(json!({"type": "resource", "resource": c}));
            }
            if blocks.is_empty() {
                blocks
                    .push(json!({"type": "text", "text": format!("Resource {} is empty.", o.uri)}));
            }
            let contents: Vec<Value> = part
                .items
                .iter()
                .map(|c| {
                    let mut c = c.clone();
                    if let Some(m) = c.as_object_mut() {
                        m.remove("_meta");
                    }
                    c
                })
                .collect();
            let wrapped = json!({"content": blocks});
            let mut out = crate::mcp::result::convert(&part.name, READ, &wrapped, true, save)?;
            out.structured = Some(json!({"server": part.name, "uri": o.uri, "contents": contents}));
            return Ok(out);
        }
        let key = o.tool.key();
        let payload = if o.single {
            let part = &o.parts[0];
            if let Some(e) = &part.error {
                return Err(e.clone());
            }
            let mut m = Map::new();
            m.insert("server".into(), json!(part.name));
            m.insert(key.into(), Value::Array(part.items.clone()));
            if let Some(c) = &part.next_cursor {
                m.insert("nextCursor".into(), json!(c));
            }
            Value::Object(m)
        } else {
            let mut items = Vec::new();
            let mut errors = Vec::new();
            for p in &o.parts {
                match &p.error {
                    Some(e) => errors.push(json!({"server": p.name, "error": e})),
                    None => items.extend(p.items.iter().cloned()),
                }
            }
            let mut m = Map::new();
            m.insert(key.into(), Value::Array(items));
            if !errors.is_empty() {
                m.insert("errors".into(), Value::Array(errors));
            }
            Value::Object(m)
        };
        let server = if o.single {
            o.parts[0].name.clone()
        } else {
            String::new()
        };
        let text = serde_json::to_string(&payload).unwrap_or_default();
        let wrapped = json!({"content": [{"type": "text", "text": text}]});
        let mut out = crate::mcp::result::convert(&server, o.tool.name(), &wrapped, true, save)?;
        out.structured = Some(payload);
        Ok(out)
    }

    /// Resource calls of `batch` are dropped (abort): their indices.
    pub(crate) fn resource_cancel_batch(&mut self, batch: u64) -> Vec<usize> {
        let ids: Vec<u64> = self
            .resource_ops
            .ops
            .iter()
            .filter(|(_, o)| o.batch == batch)
            .map(|(id, _)| *id)
            .collect();
        ids.into_iter()
            .filter_map(|id| self.resource_ops.ops.remove(&id).map(|o| o.index))
            .collect()
    }
}
