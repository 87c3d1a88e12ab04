//! The Model Context Protocol as pith uses it (client side, stdio transport), pure: JSON-RPC 2.0
//! messages one per line, the `initialize` handshake with version negotiation, `tools/list`
//! pages, and `tools/call` results turned into tool results.

use serde_json::{Map, Value, json};

use crate::message::{Content, ImageContent};
use crate::tools::{ToolOutput, ToolResult};

/// Protocol versions pith can speak, newest first; the first is what it asks for.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2025-06-18", "2025-11-25", "2025-03-26", "2024-11-05"];

/// JSON-RPC "method not found".
pub const METHOD_NOT_FOUND: i64 = -32601;

fn line(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

pub fn request(id: u64, method: &str, params: Option<Value>) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("jsonrpc".into(), json!("2.0"));
    m.insert("id".into(), json!(id));
    m.insert("method".into(), json!(method));
    if let Some(p) = params {
        m.insert("params".into(), p);
    }
    line(&Value::Object(m))
}

pub fn notification(method: &str, params: Option<Value>) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("jsonrpc".into(), json!("2.0"));
    m.insert("method".into(), json!(method));
    if let Some(p) = params {
        m.insert("params".into(), p);
    }
    line(&Value::Object(m))
}

pub fn result_response(id: &Value, result: Value) -> Vec<u8> {
    line(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

pub fn error_response(id: &Value, code: i64, message: &str) -> Vec<u8> {
    line(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MCP error {}: {}", self.code, self.message)
    }
}

/// One message from a server.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// The answer to our request `id` (ids pith sends are integers).
    Response {
        id: u64,
        result: Result<Value, RpcError>,
    },
    /// A request from the server (it expects an answer with this id).
    Request {
        id: Value,
        method: String,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// Not JSON-RPC (or a response to an id pith never sent).
    Invalid(String),
}

pub fn classify(v: &Value) -> Incoming {
    let Some(obj) = v.as_object() else {
        return Incoming::Invalid("not a JSON object".into());
    };
    let method = obj.get("method").and_then(Value::as_str);
    match (method, obj.get("id").filter(|i| !i.is_null())) {
        (Some(m), Some(id)) => Incoming::Request {
            id: id.clone(),
            method: m.to_string(),
        },
        (Some(m), None) => Incoming::Notification {
            method: m.to_string(),
            params: obj.get("params").cloned().unwrap_or(Value::Null),
        },
        (None, Some(id)) => {
            let Some(id) = id.as_u64() else {
                return Incoming::Invalid(format!("response with unknown id {id}"));
            };
            let result = match obj.get("error") {
                Some(e) => Err(RpcError {
                    code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: e
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                        .to_string(),
                }),
                None => match obj.get("result") {
                    Some(r) => Ok(r.clone()),
                    None => Err(RpcError {
                        code: 0,
                        message: "response without result or error".into(),
                    }),
                },
            };
            Incoming::Response { id, result }
        }
        (None, None) => {
            Incoming::Invalid("neither a request, a notification nor a response".into())
        }
    }
}

pub fn initialize_params(client_version: &str) -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSIONS[0],
        "capabilities": {},
        "clientInfo": {"name": "pith", "version": client_version},
    })
}

/// What pith keeps from the server's `initialize` result.
#[derive(Debug, PartialEq)]
pub struct ServerInfo {
    pub protocol_version: String,
    pub name: Option<String>,
    pub has_tools: bool,
}

pub fn check_initialize(result: &Value) -> Result<ServerInfo, String> {
    let version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or("initialize result without \"protocolVersion\"")?;
    if !PROTOCOL_VERSIONS.contains(&version) {
        return Err(format!(
            "server speaks MCP protocol {version}; pith speaks {}",
            PROTOCOL_VERSIONS.join(", ")
        ));
    }
    let caps = result.get("capabilities");
    Ok(ServerInfo {
        protocol_version: version.to_string(),
        name: result
            .pointer("/serverInfo/name")
            .and_then(Value::as_str)
            .map(str::to_string),
        has_tools: caps.and_then(|c| c.get("tools")).is_some(),
    })
}

/// One tool of a server.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTool {
    /// The server's name for it (used in `tools/call`).
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// One page of `tools/list`: the tools and the cursor of the next page.
pub fn parse_tools_page(result: &Value) -> Result<(Vec<McpTool>, Option<String>), String> {
    let list = result
        .get("tools")
        .and_then(Value::as_array)
        .ok_or("tools/list result without a \"tools\" array")?;
    let mut tools = Vec::with_capacity(list.len());
    for t in list {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            continue;
        };
        let schema = match t.get("inputSchema") {
            Some(s @ Value::Object(_)) => s.clone(),
            _ => json!({"type": "object", "properties": {}}),
        };
        tools.push(McpTool {
            name: name.to_string(),
            description: t
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            input_schema: schema,
        });
    }
    let cursor = result
        .get("nextCursor")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    Ok((tools, cursor))
}

/// The agent's name for a server's tool: `mcp__<server>__<tool>`, characters outside
/// `[A-Za-z0-9_-]` replaced by `_`, at most 64 characters (what every provider accepts).
pub fn tool_name(server: &str, tool: &str) -> String {
    let raw = format!("mcp__{server}__{tool}");
    let mut s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.truncate(64);
    s
}

pub fn call_params(tool: &str, args: &Value, progress_token: u64) -> Value {
    json!({
        "name": tool,
        "arguments": args,
        "_meta": {"progressToken": progress_token},
    })
}

fn blocks(content: &[Value]) -> Vec<Content> {
    let mut out = Vec::with_capacity(content.len());
    for b in content {
        let s = |k: &str| b.get(k).and_then(Value::as_str);
        match s("type") {
            Some("text") => out.push(Content::text(s("text").unwrap_or(""))),
            Some("image") => match (s("data"), s("mimeType")) {
                (Some(data), Some(mime)) => out.push(Content::Image(ImageContent {
                    data: data.to_string(),
                    mime_type: mime.to_string(),
                })),
                _ => out.push(Content::text("[image without data]")),
            },
            Some("audio") => out.push(Content::text(format!(
                "[audio {} ({} bytes of base64) not shown]",
                s("mimeType").unwrap_or("?"),
                s("data").map_or(0, str::len)
            ))),
            Some("resource") => {
                let r = b.get("resource").cloned().unwrap_or(Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("?");
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => out.push(Content::text(format!("[resource {uri}]\n{t}"))),
                    None => out.push(Content::text(format!(
                        "[resource {uri} ({}), binary, not shown]",
                        r.get("mimeType").and_then(Value::as_str).unwrap_or("?")
                    ))),
                }
            }
            Some("resource_link") => {
                let mut t = format!(
                    "[resource link: {} <{}>]",
                    s("name").unwrap_or("?"),
                    s("uri").unwrap_or("?")
                );
                if let Some(d) = s("description") {
                    t.push(' ');
                    t.push_str(d);
                }
                out.push(Content::text(t));
            }
            other => out.push(Content::text(format!(
                "[unsupported content type {}]",
                other.unwrap_or("(none)")
            ))),
        }
    }
    out
}

/// A `tools/call` result as a tool result: text and image blocks (other kinds described in
/// text), `structuredContent` in `details` (and as the text when there is no content),
/// `isError: true` → an error result with the text.
pub fn call_result(result: &Value) -> ToolResult {
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| blocks(c))
        .unwrap_or_default();
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    let mut content = content;
    if content.is_empty() {
        if let Some(s) = structured {
            content.push(Content::text(s.to_string()));
        }
    }
    if result.get("isError") == Some(&Value::Bool(true)) {
        let text: Vec<&str> = content
            .iter()
            .filter_map(|c| match c {
                Content::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        let text = text.join("\n");
        return Err(if text.is_empty() {
            "The MCP tool reported an error without a message".into()
        } else {
            text
        });
    }
    Ok(ToolOutput {
        content,
        details: structured.map(|s| json!({ "structuredContent": s })),
    })
}

/// A progress notification for `token`: a one-line text for `tool_execution_update`.
pub fn progress_text(params: &Value) -> Option<(u64, String)> {
    let token = params.get("progressToken").and_then(Value::as_u64)?;
    let progress = params
        .get("progress")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let mut text = match params.get("total").and_then(Value::as_f64) {
        Some(total) => format!(
            "progress {}/{}",
            crate::tools::js_num(progress),
            crate::tools::js_num(total)
        ),
        None => format!("progress {}", crate::tools::js_num(progress)),
    };
    if let Some(m) = params.get("message").and_then(Value::as_str) {
        text.push_str(": ");
        text.push_str(m);
    }
    Some((token, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_and_classification() {
        assert_eq!(
            String::from_utf8(request(1, "tools/list", None)).unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        );
        assert_eq!(
            String::from_utf8(notification("notifications/initialized", None)).unwrap(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        );
        assert_eq!(
            classify(&json!({"jsonrpc":"2.0","id":3,"result":{"x":1}})),
            Incoming::Response {
                id: 3,
                result: Ok(json!({"x":1}))
            }
        );
        assert_eq!(
            classify(&json!({"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad"}})),
            Incoming::Response {
                id: 3,
                result: Err(RpcError {
                    code: -32602,
                    message: "bad".into()
                })
            }
        );
        assert_eq!(
            classify(&json!({"jsonrpc":"2.0","id":"s1","method":"ping"})),
            Incoming::Request {
                id: json!("s1"),
                method: "ping".into()
            }
        );
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})),
            Incoming::Notification { .. }
        ));
        assert!(matches!(classify(&json!([])), Incoming::Invalid(_)));
    }

    #[test]
    fn initialize_negotiation() {
        let ok = check_initialize(&json!({"protocolVersion":"2025-03-26","capabilities":{"tools":{}},"serverInfo":{"name":"t"}})).unwrap();
        assert_eq!(ok.protocol_version, "2025-03-26");
        assert!(ok.has_tools);
        assert!(
            check_initialize(&json!({"protocolVersion":"1999-01-01"}))
                .unwrap_err()
                .starts_with("server speaks MCP protocol 1999-01-01")
        );
    }

    #[test]
    fn tools_pages_and_names() {
        let (tools, cursor) = parse_tools_page(&json!({"tools":[
            {"name":"get_time","description":"Now","inputSchema":{"type":"object","properties":{"tz":{"type":"string"}}}},
            {"name":"bare"}], "nextCursor":"p2"}))
        .unwrap();
        assert_eq!(tools.len(), 2);
        assert_eq!(
            tools[1].input_schema,
            json!({"type":"object","properties":{}})
        );
        assert_eq!(cursor.as_deref(), Some("p2"));
        assert_eq!(tool_name("time", "get time"), "mcp__time__get_time");
        assert_eq!(tool_name("s", &"x".repeat(100)).len(), 64);
    }

    #[test]
    fn call_results() {
        let r = call_result(&json!({"content":[
            {"type":"text","text":"hi"},
            {"type":"image","data":"AA","mimeType":"image/png"},
            {"type":"resource","resource":{"uri":"file:///a","text":"body"}},
            {"type":"resource_link","uri":"u","name":"n"}]}))
        .unwrap();
        assert_eq!(r.content.len(), 4);
        assert_eq!(r.content[2], Content::text("[resource file:///a]\nbody"));
        assert_eq!(r.details, None);
        assert_eq!(
            call_result(&json!({"content":[{"type":"text","text":"nope"}],"isError":true})),
            Err("nope".into())
        );
        let r = call_result(&json!({"content":[],"structuredContent":{"t":1}})).unwrap();
        assert_eq!(r.content, vec![Content::text("{\"t\":1}")]);
        assert_eq!(r.details, Some(json!({"structuredContent":{"t":1}})));
        assert_eq!(
            progress_text(&json!({"progressToken":4,"progress":2,"total":5,"message":"working"})),
            Some((4, "progress 2/5: working".into()))
        );
    }
}
