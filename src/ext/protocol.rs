//! The extension protocol (docs/extensions.md), pure: what an extension may write, decoded into
//! typed messages with errors that name the field, and the lines pith writes to it.
//!
//! Version 1. pith → extension: `hello`, `event`, `execute_tool`, `command`, `cancel`,
//! `ui_response`. Extension → pith: `register`, `result`, `tool_update`, `ui`, `send_message`,
//! `send_user_message`, `error` (a host of several extensions: one of them failed).

use serde_json::{Map, Value, json};

use super::ui::UiRequest;
use crate::message::{Content, ImageContent, UserContent};
use crate::tools::{ToolOutput, ToolResult};

/// The protocol version pith speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// Events whose handlers answer (pith waits for the `result`); every other event is a notification.
pub const BLOCKING_EVENTS: [&str; 8] = [
    "tool_call",
    "tool_result",
    "session_before_switch",
    "session_before_fork",
    "input",
    "before_agent_start",
    "context",
    "session_before_compact",
];

/// A tool an extension registers.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments (an object schema).
    pub parameters: Value,
    /// The one-liner for the system prompt's tool list (listed only when given, as in pi).
    pub prompt_snippet: Option<String>,
    /// Lines for the system prompt's guidelines / rules while the tool is active (pi's
    /// `promptGuidelines`: trimmed, empty ones and repeats dropped).
    pub prompt_guidelines: Vec<String>,
}

/// A slash command an extension registers.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandSpec {
    pub name: String,
    pub description: Option<String>,
    /// The file that registered it (the node host's commands: each pi extension's own path).
    pub path: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Registration {
    pub name: Option<String>,
    pub tools: Vec<ToolSpec>,
    pub commands: Vec<CommandSpec>,
    pub events: Vec<String>,
}

/// Where a custom message goes while the agent runs (pi's `deliverAs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliverAs {
    Steer,
    FollowUp,
    NextTurn,
}

/// pi's `sendMessage`: a custom message for the conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct SendMessage {
    pub custom_type: String,
    pub content: UserContent,
    pub display: bool,
    pub details: Option<Value>,
    /// pi's `triggerTurn` (absent: `None`; while the agent runs that counts as true).
    pub trigger_turn: Option<bool>,
    pub deliver_as: Option<DeliverAs>,
}

/// One message from an extension.
#[derive(Clone, Debug, PartialEq)]
pub enum FromExt {
    Register(Registration),
    /// The answer to call `id`: `Ok(result)` (`Value::Null` when absent) or `Err(error text)`.
    Result {
        id: u64,
        outcome: Result<Value, String>,
        /// A host of several extensions (pith's node host) names the one that failed.
        extension: Option<String>,
    },
    /// pith's node host runs on a node too old for TypeScript (`process.version`).
    NodeTooOld {
        version: String,
    },
    /// pith's node host: extensions failed to load, or command-line flags are not theirs: pi's
    /// start-up diagnostics (`Failed to load extension "<path>": …`, `Unknown option: --x`),
    /// after which pi stops.
    StartupFailed {
        errors: Vec<String>,
    },
    /// An API call of pith's node host (pi's `appendEntry`, `setSessionName`, ...): answered
    /// with `call_result`.
    Call {
        id: Value,
        method: String,
        params: Value,
    },
    /// A host of several extensions reports a failure of one of them that answers no call (a
    /// load failure, a notification handler that threw, an unsupported API method).
    Error {
        extension: String,
        event: String,
        error: String,
    },
    /// A partial result of tool call `id`.
    ToolUpdate {
        id: u64,
        output: ToolOutput,
    },
    /// A UI method; `id` (any JSON value) is required for dialogs and echoed in `ui_response`.
    Ui {
        id: Option<Value>,
        request: UiRequest,
    },
    SendMessage(SendMessage),
    /// pi's `sendUserMessage`: a user message (a prompt when idle, queued while running).
    SendUserMessage {
        content: UserContent,
        deliver_as: Option<DeliverAs>,
    },
}

/// A decoding failure. `Version` is fatal (the extension cannot be talked to).
#[derive(Debug, PartialEq)]
pub enum DecodeError {
    Invalid(String),
    Version(String),
}

fn invalid(s: impl Into<String>) -> DecodeError {
    DecodeError::Invalid(s.into())
}

pub(crate) fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Field access that names the message and field in its errors.
pub(crate) struct Fields<'a> {
    pub what: &'a str,
    pub obj: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn get(&self, k: &str) -> Option<&'a Value> {
        self.obj.get(k).filter(|v| !v.is_null())
    }
    fn err(&self, k: &str, expected: &str) -> DecodeError {
        match self.get(k) {
            None => invalid(format!(
                "{}: missing field \"{k}\" (expected {expected})",
                self.what
            )),
            Some(v) => invalid(format!(
                "{}: field \"{k}\" must be {expected}, got {}",
                self.what,
                describe(v)
            )),
        }
    }
    pub fn string(&self, k: &str) -> Result<String, DecodeError> {
        match self.get(k) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(self.err(k, "a string")),
        }
    }
    pub fn opt_strings(&self, k: &str) -> Result<Vec<String>, DecodeError> {
        match self.get(k) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| self.err(k, "an array of strings")),
            Some(_) => Err(self.err(k, "an array of strings")),
        }
    }
    pub fn opt_string(&self, k: &str) -> Result<Option<String>, DecodeError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.err(k, "a string")),
        }
    }
    pub fn opt_bool(&self, k: &str) -> Result<Option<bool>, DecodeError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.err(k, "a boolean")),
        }
    }
    pub fn u64(&self, k: &str) -> Result<u64, DecodeError> {
        match self.get(k).and_then(Value::as_u64) {
            Some(n) => Ok(n),
            None => Err(self.err(k, "a non-negative integer")),
        }
    }
    pub fn opt_u64(&self, k: &str) -> Result<Option<u64>, DecodeError> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.err(k, "a non-negative integer")),
        }
    }
    pub fn strings(&self, k: &str) -> Result<Option<Vec<String>>, DecodeError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| self.err(k, "an array of strings")),
            Some(_) => Err(self.err(k, "an array of strings")),
        }
    }
    fn array(&self, k: &str) -> Result<&'a [Value], DecodeError> {
        match self.get(k) {
            None => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(_) => Err(self.err(k, "an array")),
        }
    }
}

pub use crate::tools::valid_tool_name;

/// A command name: non-empty, no whitespace, not starting with `/`.
pub fn valid_command_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('/') && !name.chars().any(char::is_whitespace)
}

fn decode_register(f: &Fields) -> Result<Registration, DecodeError> {
    let version = match f.get("protocol") {
        None => {
            return Err(DecodeError::Version(format!(
                "register: missing field \"protocol\" (pith speaks protocol {PROTOCOL_VERSION})"
            )));
        }
        Some(v) => v.as_u64(),
    };
    if version != Some(PROTOCOL_VERSION) {
        return Err(DecodeError::Version(format!(
            "register: unsupported protocol {} (pith speaks protocol {PROTOCOL_VERSION})",
            f.get("protocol").map(|v| v.to_string()).unwrap_or_default()
        )));
    }
    let mut tools = Vec::new();
    for (i, t) in f.array("tools")?.iter().enumerate() {
        let what = format!("register: tools[{i}]");
        let Some(obj) = t.as_object() else {
            return Err(invalid(format!("{what} must be an object")));
        };
        let tf = Fields { what: &what, obj };
        let name = tf.string("name")?;
        if !valid_tool_name(&name) {
            return Err(invalid(format!(
                "{what}: tool name \"{name}\" must be 1-64 characters of A-Z a-z 0-9 _ -"
            )));
        }
        if tools.iter().any(|t: &ToolSpec| t.name == name) {
            return Err(invalid(format!("{what}: tool \"{name}\" registered twice")));
        }
        let parameters = match tf.get("parameters") {
            None => json!({"type": "object", "properties": {}}),
            Some(Value::Object(o)) => Value::Object(o.clone()),
            Some(_) => return Err(tf.err("parameters", "a JSON schema object")),
        };
        tools.push(ToolSpec {
            description: tf.opt_string("description")?.unwrap_or_default(),
            prompt_snippet: tf.opt_string("promptSnippet")?,
            prompt_guidelines: guidelines(&tf)?,
            name,
            parameters,
        });
    }
    let mut commands = Vec::new();
    for (i, c) in f.array("commands")?.iter().enumerate() {
        let what = format!("register: commands[{i}]");
        let Some(obj) = c.as_object() else {
            return Err(invalid(format!("{what} must be an object")));
        };
        let cf = Fields { what: &what, obj };
        let name = cf.string("name")?;
        if !valid_command_name(&name) {
            return Err(invalid(format!(
                "{what}: command name \"{name}\" must be non-empty, without spaces or a leading /"
            )));
        }
        commands.push(CommandSpec {
            description: cf.opt_string("description")?,
            path: cf.opt_string("path")?,
            name,
        });
    }
    Ok(Registration {
        name: f.opt_string("name")?,
        events: f.strings("events")?.unwrap_or_default(),
        tools,
        commands,
    })
}

/// Content blocks of a tool result or message: `text` and `image` blocks (a bare string is one
/// text block).
pub fn decode_content(v: &Value, what: &str) -> Result<Vec<Content>, DecodeError> {
    match v {
        Value::String(s) => Ok(vec![Content::text(s.clone())]),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, b)| decode_block(b).map_err(|e| invalid(format!("{what}[{i}]: {e}"))))
            .collect(),
        other => Err(invalid(format!(
            "{what} must be a string or an array of content blocks, got {}",
            describe(other)
        ))),
    }
}

fn decode_block(b: &Value) -> Result<Content, String> {
    let obj = b.as_object().ok_or("expected a content block object")?;
    let s = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    match obj.get("type").and_then(Value::as_str) {
        Some("text") => Ok(Content::text(
            s("text").ok_or("text block without \"text\"")?,
        )),
        Some("image") => Ok(Content::Image(ImageContent {
            data: s("data").ok_or("image block without \"data\"")?,
            mime_type: s("mimeType").ok_or("image block without \"mimeType\"")?,
        })),
        Some(t) => Err(format!("unsupported block type \"{t}\" (text or image)")),
        None => Err("block without \"type\"".to_string()),
    }
}

fn decode_deliver(f: &Fields, k: &str) -> Result<Option<DeliverAs>, DecodeError> {
    Ok(match f.opt_string(k)?.as_deref() {
        None => None,
        Some("steer") => Some(DeliverAs::Steer),
        Some("followUp") => Some(DeliverAs::FollowUp),
        Some("nextTurn") => Some(DeliverAs::NextTurn),
        Some(other) => {
            return Err(invalid(format!(
                "{}: field \"{k}\" must be \"steer\", \"followUp\" or \"nextTurn\", got \"{other}\"",
                f.what
            )));
        }
    })
}

/// Decode one line an extension wrote.
pub fn decode(v: &Value) -> Result<FromExt, DecodeError> {
    let Some(obj) = v.as_object() else {
        return Err(invalid(format!(
            "expected a JSON object, got {}",
            describe(v)
        )));
    };
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        _ => return Err(invalid("missing string field \"type\"")),
    };
    let f = Fields { what: ty, obj };
    Ok(match ty {
        "register" => FromExt::Register(decode_register(&f)?),
        "result" => {
            let id = f.u64("id")?;
            let outcome = match f.get("error") {
                Some(Value::String(e)) => Err(e.clone()),
                Some(other) => Err(other.to_string()),
                None => Ok(obj.get("result").cloned().unwrap_or(Value::Null)),
            };
            FromExt::Result {
                id,
                outcome,
                extension: f.opt_string("extension")?,
            }
        }
        "node_too_old" => FromExt::NodeTooOld {
            version: f.string("version")?,
        },
        "startup_failed" => FromExt::StartupFailed {
            errors: match obj.get("errors") {
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|e| match e {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect(),
                _ => return Err(DecodeError::Invalid("\"errors\" must be an array".into())),
            },
        },
        "call" => FromExt::Call {
            id: obj.get("id").cloned().unwrap_or(Value::Null),
            method: f.string("method")?,
            params: obj.get("params").cloned().unwrap_or(Value::Null),
        },
        "error" => FromExt::Error {
            extension: f.string("extension")?,
            event: f.string("event")?,
            error: f.string("error")?,
        },
        "tool_update" => {
            let id = f.u64("id")?;
            let content = match f.get("content") {
                None => Vec::new(),
                Some(c) => decode_content(c, "tool_update: content")?,
            };
            FromExt::ToolUpdate {
                id,
                output: ToolOutput {
                    content,
                    details: obj.get("details").cloned(),
                    ..Default::default()
                },
            }
        }
        "ui" => {
            let request = super::ui::decode_request(&f)?;
            let id = obj.get("id").filter(|v| !v.is_null()).cloned();
            if request.is_dialog() && id.is_none() {
                return Err(invalid(format!(
                    "ui: a {} dialog needs an \"id\" to answer",
                    request.method()
                )));
            }
            FromExt::Ui { id, request }
        }
        "send_message" => {
            let m = match f.get("message") {
                Some(Value::Object(m)) => m,
                _ => return Err(f.err("message", "an object")),
            };
            let (custom_type, content, display, details) =
                custom_message_parts(m, "send_message: message")?;
            FromExt::SendMessage(SendMessage {
                custom_type,
                content,
                display,
                details,
                trigger_turn: f.opt_bool("triggerTurn")?,
                deliver_as: decode_deliver(&f, "deliverAs")?,
            })
        }
        "send_user_message" => {
            let content = match f.get("content") {
                Some(Value::String(s)) => UserContent::Text(s.clone()),
                Some(c) => UserContent::Blocks(decode_content(c, "send_user_message: content")?),
                None => return Err(f.err("content", "a string or content blocks")),
            };
            let deliver_as = decode_deliver(&f, "deliverAs")?;
            if deliver_as == Some(DeliverAs::NextTurn) {
                return Err(invalid(
                    "send_user_message: deliverAs must be \"steer\" or \"followUp\"",
                ));
            }
            FromExt::SendUserMessage {
                content,
                deliver_as,
            }
        }
        other => return Err(invalid(format!("unknown message type \"{other}\""))),
    })
}

/// An extension tool's answer (`result` of `execute_tool`): `{content, details?, isError?}`.
/// An extension is not trusted more than an MCP server: its text is held to the limits of every
/// tool's output (the shared cut, [`crate::tools::truncate::bound_text`]), an image a provider
/// would refuse becomes a text saying so, and `details` over
/// [`MAX_STRUCTURED_BYTES`](crate::mcp::protocol::MAX_STRUCTURED_BYTES) serialised is replaced by
/// `{"detailsOmitted":{"bytes","maxBytes"}}`.
pub fn decode_tool_result(outcome: Result<Value, String>) -> ToolResult {
    let v = outcome?;
    let Some(obj) = v.as_object() else {
        return Err(format!(
            "Extension tool returned an invalid result: expected an object with \"content\", got {}",
            describe(&v)
        ));
    };
    let content = match obj.get("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(c) => decode_content(c, "content").map_err(|e| match e {
            DecodeError::Invalid(m) | DecodeError::Version(m) => {
                format!("Extension tool returned an invalid result: {m}")
            }
        })?,
    };
    let content: Vec<Content> = content
        .into_iter()
        .map(|c| match c {
            Content::Image(i) => {
                crate::mcp::protocol::image_block(Some(&i.data), Some(&i.mime_type))
            }
            other => other,
        })
        .collect();
    let (content, truncation) = crate::tools::truncate::bound_text(content, "extension tool");
    if obj.get("isError") == Some(&Value::Bool(true)) {
        let text: Vec<&str> = content
            .iter()
            .filter_map(|c| match c {
                Content::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        return Err(text.join("\n"));
    }
    let mut details = obj.get("details").filter(|d| !d.is_null()).cloned();
    if let Some(d) = &details {
        let bytes = serde_json::to_vec(d).map_or(0, |b| b.len());
        let max = crate::mcp::protocol::MAX_STRUCTURED_BYTES;
        if bytes > max {
            details = Some(json!({"detailsOmitted": {"bytes": bytes, "maxBytes": max}}));
        }
    }
    if let Some(t) = truncation {
        match &mut details {
            None => details = Some(json!({ "truncation": t })),
            Some(Value::Object(m)) if !m.contains_key("truncation") => {
                m.insert("truncation".into(), t);
            }
            Some(_) => {}
        }
    }
    Ok(ToolOutput {
        content,
        details,
        ..Default::default()
    })
}

/// What a `tool_call` handler decided.
#[derive(Debug, PartialEq)]
pub enum ToolCallDecision {
    Allow { input: Option<Value> },
    Block { reason: Option<String> },
}

pub fn decode_tool_call_result(v: &Value) -> ToolCallDecision {
    if v.get("block") == Some(&Value::Bool(true)) {
        return ToolCallDecision::Block {
            reason: v
                .get("reason")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        };
    }
    ToolCallDecision::Allow {
        input: v.get("input").filter(|i| i.is_object()).cloned(),
    }
}

/// `session_before_*` handlers: `{cancel: true}` cancels.
type CustomParts = (String, UserContent, bool, Option<Value>);

/// pi's custom message (`customType`, `content`, `display`, `details`).
fn custom_message_parts(m: &Map<String, Value>, what: &str) -> Result<CustomParts, DecodeError> {
    let mf = Fields { what, obj: m };
    let content = match mf.get("content") {
        None => UserContent::Blocks(Vec::new()),
        Some(Value::String(s)) => UserContent::Text(s.clone()),
        Some(c) => UserContent::Blocks(decode_content(c, &format!("{what}: content"))?),
    };
    Ok((
        mf.string("customType")?,
        content,
        mf.opt_bool("display")?.unwrap_or(true),
        m.get("details").filter(|v| !v.is_null()).cloned(),
    ))
}

/// A `before_agent_start` answer's messages (`message`, and `messages` from a host of several
/// extensions), as custom messages; the first invalid one is the error.
pub fn decode_start_messages(v: &Value) -> Result<Vec<crate::message::CustomMessage>, String> {
    let mut out = Vec::new();
    let list = v.get("messages").and_then(Value::as_array);
    for m in list.into_iter().flatten().chain(v.get("message")) {
        let Value::Object(m) = m else {
            return Err("before_agent_start: message must be an object".to_string());
        };
        let (custom_type, content, display, details) =
            custom_message_parts(m, "before_agent_start: message").map_err(|e| match e {
                DecodeError::Invalid(e) | DecodeError::Version(e) => e,
            })?;
        out.push(crate::message::CustomMessage {
            custom_type,
            content,
            display,
            details,
            timestamp: crate::message::now_ms(),
        });
    }
    Ok(out)
}

pub fn decode_cancel(v: &Value) -> bool {
    v.get("cancel") == Some(&Value::Bool(true))
}

// ---- pith → extension ------------------------------------------------------------------------

fn line(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    let _ = crate::rpc::response::write_js(&mut out, v);
    out
}

/// The first line pith writes.
pub fn hello(version: &str, cwd: &str, mode: &str, compat: &str, session: &Value) -> Vec<u8> {
    line(&json!({
        "type": "hello",
        "protocol": PROTOCOL_VERSION,
        "pith": version,
        "cwd": cwd,
        "mode": mode,
        "compat": compat,
        "session": session,
    }))
}

/// The node host's copy of the effective settings (pi's `getSettings()`), before `hello`.
pub fn settings_line(settings: &serde_json::Map<String, Value>) -> Vec<u8> {
    line(&json!({"type": "settings", "settings": settings}))
}

/// An event. With `id` the extension must answer with a `result`; without, it is a notification.
pub fn event(id: Option<u64>, event: &Value) -> Vec<u8> {
    match id {
        Some(id) => line(&json!({"type": "event", "id": id, "event": event})),
        None => line(&json!({"type": "event", "event": event})),
    }
}

/// A notification whose event object is already serialised (a frame pith also wrote to stdout).
pub fn event_raw(event_json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(event_json.len() + 24);
    out.extend_from_slice(b"{\"type\":\"event\",\"event\":");
    out.extend_from_slice(event_json);
    out.push(b'}');
    out
}

pub fn execute_tool(id: u64, tool_call_id: &str, tool_name: &str, input: &Value) -> Vec<u8> {
    line(&json!({
        "type": "execute_tool",
        "id": id,
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "input": input,
    }))
}

pub fn command(id: u64, name: &str, args: &str) -> Vec<u8> {
    line(&json!({"type": "command", "id": id, "name": name, "args": args}))
}

/// The answer to the node host's `call` `id`.
pub fn call_result(id: &Value, outcome: Result<Value, String>) -> Vec<u8> {
    match outcome {
        Ok(v) => line(&json!({"type": "call_result", "id": id, "result": v})),
        Err(e) => line(&json!({"type": "call_result", "id": id, "error": e})),
    }
}

/// What the node host's synchronous getters read (pi's `getSessionName()`, `ctx.model`, ...),
/// sent before any other line when it changed.
pub fn state(state: &Value) -> Vec<u8> {
    line(&json!({"type": "state", "state": state}))
}

pub fn cancel(id: u64) -> Vec<u8> {
    line(&json!({"type": "cancel", "id": id}))
}

pub fn ui_response(id: &Value, answer: Map<String, Value>) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("type".into(), json!("ui_response"));
    m.insert("id".into(), id.clone());
    m.extend(answer);
    line(&Value::Object(m))
}

/// pi's `_normalizePromptGuidelines`: each line trimmed, empty ones and repeats dropped.
fn guidelines(tf: &Fields<'_>) -> Result<Vec<String>, DecodeError> {
    let mut out: Vec<String> = Vec::new();
    for g in tf.opt_strings("promptGuidelines")? {
        let g = g.trim();
        if !g.is_empty() && !out.iter().any(|o| o == g) {
            out.push(g.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(v: Value) -> Result<FromExt, DecodeError> {
        decode(&v)
    }

    #[test]
    fn register_decodes_tools_commands_events() {
        let r = dec(json!({"type":"register","protocol":1,"name":"guard",
            "tools":[{"name":"greet","description":"Say hi","parameters":{"type":"object"},"promptSnippet":"greet people"}],
            "commands":[{"name":"hello","description":"Greets"},{"name":"bare"}],
            "events":["tool_call","turn_start"]}))
        .unwrap();
        let FromExt::Register(r) = r else { panic!() };
        assert_eq!(r.name.as_deref(), Some("guard"));
        assert_eq!(r.tools[0].name, "greet");
        assert_eq!(r.tools[0].prompt_snippet.as_deref(), Some("greet people"));
        assert_eq!(r.commands[1].description, None);
        assert_eq!(r.events, vec!["tool_call", "turn_start"]);
    }

    #[test]
    fn register_errors_name_the_field() {
        assert_eq!(
            dec(json!({"type":"register"})),
            Err(DecodeError::Version(
                "register: missing field \"protocol\" (pith speaks protocol 1)".into()
            ))
        );
        assert!(matches!(
            dec(json!({"type":"register","protocol":2})),
            Err(DecodeError::Version(_))
        ));
        assert_eq!(
            dec(json!({"type":"register","protocol":1,"tools":[{"name":"bad name"}]})),
            Err(DecodeError::Invalid(
                "register: tools[0]: tool name \"bad name\" must be 1-64 characters of A-Z a-z 0-9 _ -".into()
            ))
        );
        assert_eq!(
            dec(json!({"type":"register","protocol":1,"commands":[{"name":7}]})),
            Err(DecodeError::Invalid(
                "register: commands[0]: field \"name\" must be a string, got a number".into()
            ))
        );
    }

    #[test]
    fn results_updates_and_unknown_types() {
        assert_eq!(
            dec(json!({"type":"result","id":3,"result":{"block":true}})),
            Ok(FromExt::Result {
                id: 3,
                outcome: Ok(json!({"block":true})),
                extension: None,
            })
        );
        assert_eq!(
            dec(json!({"type":"result","id":3,"error":"boom"})),
            Ok(FromExt::Result {
                id: 3,
                outcome: Err("boom".into()),
                extension: None,
            })
        );
        // A host of several extensions names the one that failed.
        assert_eq!(
            dec(json!({"type":"result","id":3,"error":"boom","extension":"/x/a.ts"})),
            Ok(FromExt::Result {
                id: 3,
                outcome: Err("boom".into()),
                extension: Some("/x/a.ts".into()),
            })
        );
        assert_eq!(
            dec(json!({"type":"error","extension":"/x/a.ts","event":"turn_start","error":"bad"})),
            Ok(FromExt::Error {
                extension: "/x/a.ts".into(),
                event: "turn_start".into(),
                error: "bad".into(),
            })
        );
        assert_eq!(
            dec(json!({"type":"result","id":"x"})),
            Err(DecodeError::Invalid(
                "result: field \"id\" must be a non-negative integer, got a string".into()
            ))
        );
        let FromExt::ToolUpdate { id, output } =
            dec(json!({"type":"tool_update","id":1,"content":"half"})).unwrap()
        else {
            panic!()
        };
        assert_eq!(id, 1);
        assert_eq!(output.content, vec![Content::text("half")]);
        assert_eq!(
            dec(json!({"type":"nope"})),
            Err(DecodeError::Invalid("unknown message type \"nope\"".into()))
        );
        assert_eq!(
            dec(json!([1])),
            Err(DecodeError::Invalid(
                "expected a JSON object, got an array".into()
            ))
        );
    }

    #[test]
    fn dialogs_need_an_id() {
        assert!(dec(json!({"type":"ui","method":"confirm","title":"t","message":"m"})).is_err());
        assert!(dec(json!({"type":"ui","method":"notify","message":"m"})).is_ok());
    }

    #[test]
    fn send_message_defaults() {
        let FromExt::SendMessage(m) = dec(json!({"type":"send_message",
            "message":{"customType":"note","content":"hi"},"triggerTurn":true}))
        .unwrap() else {
            panic!()
        };
        assert_eq!(m.content, UserContent::Text("hi".into()));
        assert!(m.display && m.trigger_turn == Some(true));
        assert_eq!(m.deliver_as, None);
        assert!(dec(json!({"type":"send_message","message":{"content":"x"}})).is_err());
    }

    #[test]
    fn tool_results() {
        assert_eq!(
            decode_tool_result(Ok(
                json!({"content":[{"type":"text","text":"ok"}],"details":{"n":1}})
            )),
            Ok(ToolOutput {
                content: vec![Content::text("ok")],
                details: Some(json!({"n":1})),
                ..Default::default()
            })
        );
        assert_eq!(
            decode_tool_result(Ok(json!({"content":"bad","isError":true}))),
            Err("bad".into())
        );
        assert_eq!(
            decode_tool_result(Err("thrown".into())),
            Err("thrown".into())
        );
        assert!(
            decode_tool_result(Ok(json!(5)))
                .unwrap_err()
                .starts_with("Extension tool returned an invalid result")
        );
    }

    #[test]
    fn tool_results_are_bounded() {
        // A huge error text is cut like any output; an image a provider refuses is described.
        let long = "e".repeat(200_000);
        let err = decode_tool_result(Ok(json!({"content":long,"isError":true}))).unwrap_err();
        assert_eq!(
            err,
            "[The extension tool's first line is 195.3KB, over the 50.0KB limit: output not shown]"
        );
        let out = decode_tool_result(Ok(json!({"content":[
            {"type":"image","data":"PHN2Zz4=","mimeType":"image/png"}],
            "details":{"pad":"x".repeat(300_000)}})))
        .unwrap();
        assert_eq!(
            out.content,
            vec![Content::text(
                "[image image/png: not a PNG, JPEG, GIF or WebP image, not shown]"
            )]
        );
        assert_eq!(
            out.details,
            Some(json!({"detailsOmitted":{"bytes":300_010,"maxBytes":262_144}}))
        );
    }

    #[test]
    fn decisions() {
        assert_eq!(
            decode_tool_call_result(&json!({"block":true,"reason":"no"})),
            ToolCallDecision::Block {
                reason: Some("no".into())
            }
        );
        assert_eq!(
            decode_tool_call_result(&Value::Null),
            ToolCallDecision::Allow { input: None }
        );
        assert!(decode_cancel(&json!({"cancel":true})));
        assert!(!decode_cancel(&json!({"cancel":"yes"})));
    }

    #[test]
    fn lines_pith_writes() {
        assert_eq!(
            String::from_utf8(event(Some(4), &json!({"type":"tool_call"}))).unwrap(),
            r#"{"type":"event","id":4,"event":{"type":"tool_call"}}"#
        );
        assert_eq!(
            String::from_utf8(event_raw(br#"{"type":"agent_start"}"#)).unwrap(),
            r#"{"type":"event","event":{"type":"agent_start"}}"#
        );
        let mut a = Map::new();
        a.insert("confirmed".into(), json!(true));
        assert_eq!(
            String::from_utf8(ui_response(&json!("c1"), a)).unwrap(),
            r#"{"type":"ui_response","id":"c1","confirmed":true}"#
        );
    }
}
