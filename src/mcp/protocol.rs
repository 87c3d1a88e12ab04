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
    /// The HTTP transport's own failure (it answers our request in the server's stead).
    pub transport: Option<TransportFailure>,
}

/// The key in `error.data` under which the HTTP transport names its failure.
pub const TRANSPORT_FAILURE_KEY: &str = "pithTransportFailure";

/// Failures of the HTTP transport that pi's client words on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportFailure {
    /// The server could not be reached.
    Unreachable,
    /// No usable stored credential: sign in with pi.
    SignIn,
    /// The configured `Authorization` header was refused.
    AuthRefused,
}

impl TransportFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            TransportFailure::Unreachable => "unreachable",
            TransportFailure::SignIn => "signIn",
            TransportFailure::AuthRefused => "authRefused",
        }
    }

    fn parse(s: &str) -> Option<TransportFailure> {
        match s {
            "unreachable" => Some(TransportFailure::Unreachable),
            "signIn" => Some(TransportFailure::SignIn),
            "authRefused" => Some(TransportFailure::AuthRefused),
            _ => None,
        }
    }
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
                    transport: e
                        .get("data")
                        .and_then(|d| d.get(TRANSPORT_FAILURE_KEY))
                        .and_then(Value::as_str)
                        .and_then(TransportFailure::parse),
                }),
                None => match obj.get("result") {
                    Some(r) => Ok(r.clone()),
                    None => Err(RpcError {
                        code: 0,
                        message: "response without result or error".into(),
                        transport: None,
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

/// The protocol version pi 1.6.0 asks for (its newest).
pub const PI_PROTOCOL_VERSION: &str = "2025-11-25";

/// pi 1.6.0's `initialize`: its newest protocol version, the `roots` capability (it answers
/// `roots/list` with the session's directory) and `clientInfo` `pi`/1.6.0.
pub fn initialize_params_pi() -> Value {
    json!({
        "protocolVersion": PI_PROTOCOL_VERSION,
        "capabilities": {"roots": {}},
        "clientInfo": {"name": "pi", "version": "1.6.0"},
    })
}

/// pi 1.6.0's answer to `roots/list`: the directory as a `file:` URL (Node's `pathToFileURL`:
/// bytes outside the URL path's safe set percent-encoded) and its last component as the name.
pub fn roots_result(cwd: &std::path::Path) -> Value {
    let path = cwd.to_string_lossy();
    let mut uri = String::from("file://");
    for b in path.bytes() {
        let safe = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&b);
        if safe {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    let name = cwd
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    json!({"roots": [{"uri": uri, "name": name}]})
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
    /// `instructions`: how to use the server's tools, as a group.
    pub instructions: Option<String>,
    /// It offers resources.
    pub has_resources: bool,
}

/// What pi 1.6.0's client finds wrong with an `initialize` result, in its words: a result
/// without the fields the spec requires, or a protocol version it does not speak.
pub fn pi_initialize_problem(result: &Value) -> Option<String> {
    let str_at = |p: &str| result.pointer(p).is_some_and(Value::is_string);
    let valid = str_at("/protocolVersion")
        && result.get("capabilities").is_some_and(Value::is_object)
        && str_at("/serverInfo/name")
        && str_at("/serverInfo/version")
        && result.get("instructions").is_none_or(Value::is_string);
    if !valid {
        return Some("Invalid MCP initialize result".into());
    }
    let version = result.get("protocolVersion").and_then(Value::as_str)?;
    (!PROTOCOL_VERSIONS.contains(&version))
        .then(|| format!("MCP server selected unsupported protocol version {version}"))
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
        has_resources: caps.and_then(|c| c.get("resources")).is_some(),
        instructions: result
            .get("instructions")
            .and_then(Value::as_str)
            .map(|s| s.chars().take(64 * 1024).collect()),
    })
}

/// One tool of a server.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTool {
    /// The server's name for it (used in `tools/call`).
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// `title` (or `annotations.title`).
    pub title: Option<String>,
    /// `inputSchema` as the server sent it, when it was an object.
    pub raw_schema: Option<Value>,
    /// `outputSchema` (the schema of `structuredContent`), when it is an object.
    pub output_schema: Option<Value>,
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
        let raw_schema = t.get("inputSchema").filter(|s| s.is_object()).cloned();
        let schema = match &raw_schema {
            Some(s) => s.clone(),
            None => json!({"type": "object", "properties": {}}),
        };
        let title = t
            .get("title")
            .or_else(|| t.pointer("/annotations/title"))
            .and_then(Value::as_str)
            .map(str::to_string);
        tools.push(McpTool {
            title,
            raw_schema,
            output_schema: t.get("outputSchema").filter(|s| s.is_object()).cloned(),
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

/// Largest image a server may send, in characters of base64 (about 7.5 MB of image): more than
/// any provider takes in one image.
pub const MAX_IMAGE_BASE64: usize = 10 * 1024 * 1024;
/// Largest `structuredContent` kept in `details` (serialised bytes); the model never sees
/// `details`, but events and the session file do.
pub const MAX_STRUCTURED_BYTES: usize = 256 * 1024;
/// Longest progress message shown, in characters.
const MAX_PROGRESS_CHARS: usize = 1000;

/// The start of standard base64 `data` decoded (at most `n` bytes); `None` if it is not base64
/// (alphabet, padding only at the end, length a multiple of 4).
fn base64_prefix(data: &str, n: usize) -> Option<Vec<u8>> {
    let b = data.as_bytes();
    if b.is_empty() || !b.len().is_multiple_of(4) {
        return None;
    }
    let pad = b.iter().rev().take_while(|&&c| c == b'=').count();
    if pad > 2 {
        return None;
    }
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    if !b[..b.len() - pad].iter().all(|&c| val(c).is_some()) {
        return None;
    }
    let mut out = Vec::with_capacity(n + 2);
    for quad in b[..b.len() - pad].chunks(4) {
        if out.len() >= n {
            break;
        }
        let mut acc = 0u32;
        for (i, &c) in quad.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        let bytes = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
        out.extend_from_slice(&bytes[..quad.len() - 1]);
    }
    out.truncate(n);
    Some(out)
}

/// An image block, if it is one a provider accepts: base64 of a PNG, JPEG, GIF or WebP (by its
/// bytes, which win over a wrong `mimeType`), at most [`MAX_IMAGE_BASE64`]. Otherwise a text
/// saying why it is not shown: one bad image would make every later request of the session fail.
pub(crate) fn image_block(data: Option<&str>, mime: Option<&str>) -> Content {
    let shown = mime.unwrap_or("?");
    let Some(data) = data else {
        return Content::text(format!("[image {shown} without data, not shown]"));
    };
    if data.len() > MAX_IMAGE_BASE64 {
        return Content::text(format!(
            "[image {shown} of {} of base64, over the {} limit, not shown]",
            crate::tools::truncate::format_size(data.len()),
            crate::tools::truncate::format_size(MAX_IMAGE_BASE64)
        ));
    }
    let sniffed = base64_prefix(data, 16).map(|head| crate::tools::read::image_mime(&head));
    match sniffed {
        None => Content::text(format!("[image {shown}: data is not base64, not shown]")),
        Some(None) => Content::text(format!(
            "[image {shown}: not a PNG, JPEG, GIF or WebP image, not shown]"
        )),
        Some(Some(mime)) => Content::Image(ImageContent {
            data: data.to_string(),
            mime_type: mime.to_string(),
        }),
    }
}

fn blocks(content: &[Value]) -> Vec<Content> {
    let mut out = Vec::with_capacity(content.len().min(1024));
    for b in content {
        let s = |k: &str| b.get(k).and_then(Value::as_str);
        match s("type") {
            Some("text") => out.push(match s("text") {
                Some(t) => Content::text(t),
                None => Content::text("[text block without text]"),
            }),
            Some("image") => out.push(image_block(s("data"), s("mimeType"))),
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

/// The texts of `content`'s text blocks.
fn texts(content: &[Content]) -> Vec<&str> {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

/// A `tools/call` result as a tool result: text and image blocks (other kinds described in
/// text), `structuredContent` in `details` (and as the text when there is no content),
/// `isError: true` → an error result with the text. A server is not trusted: a result that is
/// not an object, or whose `content` is not an array, is an error result; text is held to the
/// limits of every tool's output; an image a provider would refuse becomes a text saying so.
pub fn call_result(result: &Value) -> ToolResult {
    const INVALID: &str = "The MCP server returned an invalid tools/call result";
    let Some(obj) = result.as_object() else {
        return Err(format!("{INVALID}: not an object"));
    };
    let structured = obj.get("structuredContent").filter(|v| !v.is_null());
    let mut content = match obj.get("content") {
        Some(Value::Array(c)) => blocks(c),
        None | Some(Value::Null) if structured.is_some() => Vec::new(),
        None | Some(Value::Null) => return Err(format!("{INVALID}: no content")),
        Some(_) => return Err(format!("{INVALID}: content is not an array")),
    };
    let mut structured_json = None;
    if let Some(s) = structured {
        let text = s.to_string();
        if content.is_empty() {
            content.push(Content::text(text.clone()));
        }
        structured_json = Some(text);
    }
    let (content, truncation) = crate::tools::truncate::bound_text(content, "MCP tool");
    if obj.get("isError") == Some(&Value::Bool(true)) {
        let text = texts(&content).join("\n");
        return Err(if text.is_empty() {
            "The MCP tool reported an error without a message".into()
        } else {
            text
        });
    }
    let mut details = Map::new();
    if let (Some(s), Some(text)) = (structured, structured_json) {
        if text.len() <= MAX_STRUCTURED_BYTES {
            details.insert("structuredContent".into(), s.clone());
        } else {
            details.insert(
                "structuredContentOmitted".into(),
                json!({"bytes": text.len(), "maxBytes": MAX_STRUCTURED_BYTES}),
            );
        }
    }
    if let Some(t) = truncation {
        details.insert("truncation".into(), t);
    }
    Ok(ToolOutput {
        content,
        details: (!details.is_empty()).then_some(Value::Object(details)),
        ..Default::default()
    })
}

/// A progress notification for `token`: a one-line text for `tool_execution_update`.
/// pi 1.6.0's text of a progress notification: its message, else `Progress <p>[/<total>]`.
pub fn progress_text_pi(params: &Value) -> Option<(u64, String)> {
    let token = params.get("progressToken").and_then(Value::as_u64)?;
    let progress = params.get("progress").and_then(Value::as_f64)?;
    let text = match params.get("message").and_then(Value::as_str) {
        Some(m) => match m.char_indices().nth(MAX_PROGRESS_CHARS) {
            Some((cut, _)) => format!("{}…", &m[..cut]),
            None => m.to_string(),
        },
        None => match params.get("total").and_then(Value::as_f64) {
            Some(total) => format!(
                "Progress {}/{}",
                crate::tools::js_num(progress),
                crate::tools::js_num(total)
            ),
            None => format!("Progress {}", crate::tools::js_num(progress)),
        },
    };
    Some((token, text))
}

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
        match m.char_indices().nth(MAX_PROGRESS_CHARS) {
            Some((cut, _)) => {
                text.push_str(&m[..cut]);
                text.push('…');
            }
            None => text.push_str(m),
        }
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
                    message: "bad".into(),
                    transport: None,
                })
            }
        );
        let e = json!({"jsonrpc":"2.0","id":4,"error":{"code":-32603,"message":"m",
            "data":{TRANSPORT_FAILURE_KEY:"signIn"}}});
        let Incoming::Response { result: Err(e), .. } = classify(&e) else {
            panic!("not an error response");
        };
        assert_eq!(e.transport, Some(TransportFailure::SignIn));
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
        assert_eq!(
            pi_initialize_problem(&json!({"protocolVersion":"1999-01-01","capabilities":{},
                "serverInfo":{"name":"t","version":"1"}})),
            Some("MCP server selected unsupported protocol version 1999-01-01".into())
        );
        assert_eq!(
            pi_initialize_problem(&json!({"protocolVersion":"2025-11-25","capabilities":{}})),
            Some("Invalid MCP initialize result".into())
        );
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
        let long = "é".repeat(5000);
        let (_, t) =
            progress_text(&json!({"progressToken":4,"progress":1,"message":long})).unwrap();
        assert_eq!(
            t.chars().count(),
            "progress 1: ".len() + MAX_PROGRESS_CHARS + 1
        );
    }

    #[test]
    fn hostile_result_shapes_are_errors_or_placeholders() {
        let invalid = "The MCP server returned an invalid tools/call result";
        assert_eq!(
            call_result(&json!("hi")),
            Err(format!("{invalid}: not an object"))
        );
        assert_eq!(
            call_result(&json!({})),
            Err(format!("{invalid}: no content"))
        );
        assert_eq!(
            call_result(&json!({"content":"text"})),
            Err(format!("{invalid}: content is not an array"))
        );
        let r = call_result(&json!({"content":[7, {"type":"text","text":3},
            {"type":"image","data":"not base64!","mimeType":"image/png"},
            {"type":"image","data":"SGVsbG8gd29ybGQh","mimeType":"image/png"},
            {"type":"image","data":"iVBORw0KGgo=","mimeType":"image/jpeg"}]}))
        .unwrap();
        assert_eq!(
            r.content,
            vec![
                Content::text("[unsupported content type (none)]"),
                Content::text("[text block without text]"),
                Content::text("[image image/png: data is not base64, not shown]"),
                Content::text("[image image/png: not a PNG, JPEG, GIF or WebP image, not shown]"),
                // The bytes are a PNG's: their type wins over the declared one.
                Content::Image(ImageContent {
                    data: "iVBORw0KGgo=".into(),
                    mime_type: "image/png".into()
                }),
            ]
        );
        let big = "A".repeat(MAX_IMAGE_BASE64 + 4);
        let r =
            call_result(&json!({"content":[{"type":"image","data":big,"mimeType":"image/png"}]}))
                .unwrap();
        assert_eq!(
            r.content,
            vec![Content::text(
                "[image image/png of 10.0MB of base64, over the 10.0MB limit, not shown]"
            )]
        );
        assert_eq!(
            base64_prefix("SGVsbG8=", 16).as_deref(),
            Some(&b"Hello"[..])
        );
        assert_eq!(base64_prefix("SGVsbA==", 2).as_deref(), Some(&b"He"[..]));
        assert_eq!(base64_prefix("SGVsb===", 16), None);
        assert_eq!(base64_prefix("SGV", 16), None);
    }

    #[test]
    fn long_output_is_cut_like_every_tools() {
        let lines: Vec<String> = (1..=3000).map(|i| format!("line {i}")).collect();
        let r = call_result(&json!({"content":[
            {"type":"text","text":lines[..1500].join("\n")},
            {"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},
            {"type":"text","text":lines[1500..].join("\n")}]}))
        .unwrap();
        assert_eq!(r.content.len(), 2);
        let Content::Text(t) = &r.content[0] else {
            panic!("{:?}", r.content)
        };
        assert!(t.text.starts_with("line 1\nline 2\n"));
        assert!(t.text.ends_with(
            "line 2000\n\n[Showing lines 1-2000 of 3000 of the MCP tool's output (2000 lines limit); the rest was cut]"
        ));
        assert!(matches!(r.content[1], Content::Image(_)));
        let tr = &r.details.as_ref().unwrap()["truncation"];
        assert_eq!(tr["truncatedBy"], "lines");
        assert_eq!(tr["totalLines"], 3000);
        assert_eq!(tr["outputLines"], 2000);

        let r = call_result(
            &json!({"content":[{"type":"text","text":"x".repeat(60_000)}],
            "isError": true}),
        );
        assert_eq!(
            r,
            Err(
                "[The MCP tool's first line is 58.6KB, over the 50.0KB limit: output not shown]"
                    .into()
            )
        );
        let huge =
            json!({"content":[], "structuredContent":{"s":"y".repeat(MAX_STRUCTURED_BYTES)}});
        let r = call_result(&huge).unwrap();
        assert_eq!(
            r.details.as_ref().unwrap()["structuredContentOmitted"],
            json!({"bytes": MAX_STRUCTURED_BYTES + 8, "maxBytes": MAX_STRUCTURED_BYTES})
        );
        // Within the limits nothing changes.
        let r = call_result(&json!({"content":[{"type":"text","text":"a\nb"}]})).unwrap();
        assert_eq!(r.content, vec![Content::text("a\nb")]);
        assert_eq!(r.details, None);
    }

    #[test]
    fn pis_progress_text_and_roots() {
        let p = |v: Value| progress_text_pi(&v).map(|(_, t)| t);
        assert_eq!(
            p(json!({"progressToken":1,"progress":1,"total":3,"message":"m"})),
            Some("m".into())
        );
        assert_eq!(
            p(json!({"progressToken":1,"progress":1.5,"total":3})),
            Some("Progress 1.5/3".into())
        );
        assert_eq!(
            p(json!({"progressToken":1,"progress":2})),
            Some("Progress 2".into())
        );
        // pi ignores a notification without a numeric progress.
        assert_eq!(p(json!({"progressToken":1,"message":"m"})), None);
        assert_eq!(
            roots_result(std::path::Path::new("/tmp/a b/é#x")),
            json!({"roots":[{"uri":"file:///tmp/a%20b/%C3%A9%23x","name":"é#x"}]})
        );
    }
}
