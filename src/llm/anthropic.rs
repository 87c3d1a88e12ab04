//! Anthropic Messages API (`anthropic-messages`, spec 8.1): the request body pith sends and the
//! decoder of the SSE stream (`message_start`, `content_block_*`, `message_delta`,
//! `message_stop`, `error`). Both are pure; `stream.rs` does the I/O.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::llm::api::{self, Builder, Prepared, WireApi};
use crate::llm::sse::SseEvent;
use crate::llm::transform::{sanitize_id, transform_borrowed};
use crate::llm::{LlmRequest, Model, StreamEvent};
use crate::message::{Content, LlmMessage, StopReason, ThinkingLevel, Usage, UserContent};

const CLAUDE_CODE_IDENTITY: &str = "You are Claude Code, Anthropic's official CLI for Claude.";
const CLAUDE_CODE_TOOLS: [&str; 5] = ["Read", "Write", "Edit", "Bash", "Grep"];

/// A Claude subscription (OAuth) token: Claude Code's identity and tool names. Copilot's
/// tokens never count, whatever they look like.
fn is_oauth(req: &LlmRequest) -> bool {
    req.model.provider != "github-copilot"
        && req
            .api_key
            .as_deref()
            .is_some_and(|k| k.contains("sk-ant-oat"))
}

fn is_adaptive(model: &Model) -> bool {
    ["opus-4-6", "opus-4.6", "sonnet-4-6", "sonnet-4.6"]
        .iter()
        .any(|p| model.id.contains(p))
}

/// The cache breakpoint marker, `None` for a request that must not write the cache (pi 0.87.1's
/// summaries: `cacheRetention: "none"`).
fn cache_control(req: &LlmRequest) -> Option<Value> {
    (!req.no_cache).then(|| cache_control_for(&req.model))
}

fn cache_control_for(model: &Model) -> Value {
    let long = std::env::var("PI_CACHE_RETENTION").is_ok_and(|v| v == "long");
    if long && model.base_url.contains("api.anthropic.com") {
        json!({"type": "ephemeral", "ttl": "1h"})
    } else {
        json!({"type": "ephemeral"})
    }
}

/// Tool name as sent: Claude Code casing for known tools under OAuth.
fn wire_tool_name(name: &str, oauth: bool) -> String {
    if oauth {
        if let Some(cc) = CLAUDE_CODE_TOOLS
            .iter()
            .find(|cc| cc.eq_ignore_ascii_case(name))
        {
            return (*cc).to_string();
        }
    }
    name.to_string()
}
/// The `anthropic-messages` wire API.
pub struct Anthropic;

pub const API: Anthropic = Anthropic;

impl WireApi for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic-messages"
    }

    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String> {
        Ok(prepare(req))
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn api::Decoder> {
        Box::new(Decoder::new(req))
    }

    fn http_error_message(&self, status: u16, _headers: &[(String, String)], body: &str) -> String {
        api::stainless_message(status, body, false)
    }

    fn stainless(&self) -> bool {
        true
    }
}

pub fn prepare(req: &LlmRequest) -> Prepared {
    let base = req.model.base_url.trim_end_matches('/');
    Prepared {
        // pi 0.87.1 calls the SDK's beta messages endpoint.
        url: if req.compat.is_087() {
            format!("{base}/v1/messages?beta=true")
        } else {
            format!("{base}/v1/messages")
        },
        headers: headers(req),
        body: body_bytes(req),
    }
}

/// The model's `compat.supportsEagerToolInputStreaming` (default true): tools are sent with
/// `eager_input_streaming`, else the fine-grained tool streaming beta is asked for.
fn eager_tool_streaming(model: &Model) -> bool {
    model
        .compat
        .as_ref()
        .and_then(|c| c.get("supportsEagerToolInputStreaming"))
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

pub fn headers(req: &LlmRequest) -> Vec<(String, String)> {
    let copilot = req.model.provider == "github-copilot";
    let oauth = is_oauth(req);
    let mut betas: Vec<&str> = Vec::new();
    if oauth {
        betas.extend(["claude-code-20250219", "oauth-2025-04-20"]);
    }
    if !req.tools.is_empty() && !eager_tool_streaming(&req.model) {
        betas.push("fine-grained-tool-streaming-2025-05-14");
    }
    if !is_adaptive(&req.model) {
        betas.push("interleaved-thinking-2025-05-14");
    }
    let mut h: Vec<(String, String)> = vec![
        ("accept".into(), "application/json".into()),
        ("content-type".into(), "application/json".into()),
        ("anthropic-version".into(), "2023-06-01".into()),
        (
            "anthropic-dangerous-direct-browser-access".into(),
            "true".into(),
        ),
        ("x-stainless-lang".into(), "js".into()),
        (
            "x-stainless-timeout".into(),
            if req.compat.is_087() { "300" } else { "600" }.into(),
        ),
    ];
    if req.compat.is_087() {
        h.extend(crate::llm::http::stainless_platform_087(
            crate::llm::http::ANTHROPIC_SDK_087,
        ));
    }
    // pi 0.87.1 sends its own User-Agent instead of the SDK's.
    let sdk_agent = if req.compat.is_087() {
        crate::llm::http::pi_user_agent()
    } else {
        "Anthropic/JS 0.91.1".to_string()
    };
    if !betas.is_empty() {
        h.push(("anthropic-beta".into(), betas.join(",")));
    }
    match (&req.api_key, oauth) {
        // Copilot: the token as a bearer, the editor's identity from the model's headers.
        (Some(k), _) if copilot => {
            h.push(("authorization".into(), format!("Bearer {k}")));
            h.push(("user-agent".into(), "Anthropic/JS 0.91.1".into()));
        }
        (Some(k), true) => {
            h.push(("authorization".into(), format!("Bearer {k}")));
            h.push(("user-agent".into(), "claude-cli/2.1.75".into()));
            h.push(("x-app".into(), "cli".into()));
        }
        (Some(k), false) => {
            h.push(("x-api-key".into(), k.clone()));
            h.push(("user-agent".into(), sdk_agent));
        }
        (None, _) => h.push(("user-agent".into(), sdk_agent)),
    }
    crate::llm::http::merge_model_headers(&mut h, &req.model);
    if copilot {
        crate::llm::openai_completions::copilot_headers(req, &mut h);
    }
    h
}

/// The request body as a JSON value (what [`body_bytes`] writes, parsed back: for tests and
/// inspection).
pub fn build_body(req: &LlmRequest) -> Value {
    serde_json::from_slice(&body_bytes(req)).unwrap_or(Value::Null)
}

/// The request body, serialised. The history (`messages`, by far the largest part) is written
/// straight from the messages; the small fields around it are built as values.
pub fn body_bytes(req: &LlmRequest) -> Vec<u8> {
    let model = &req.model;
    let oauth = is_oauth(req);
    let cc = cache_control(req);
    let rest = body_fields(req, cc.as_ref(), oauth);
    let mut out = Vec::with_capacity(4096);
    out.extend_from_slice(b"{\"model\":");
    put(&mut out, &model.id);
    out.extend_from_slice(b",\"messages\":");
    write_messages(&mut out, req, cc.as_ref(), oauth);
    for (k, v) in &rest {
        out.push(b',');
        put(&mut out, k);
        out.push(b':');
        put(&mut out, v);
    }
    out.push(b'}');
    out
}

/// Every body field after `messages`, in the reference's order.
fn body_fields(req: &LlmRequest, cc: Option<&Value>, oauth: bool) -> Map<String, Value> {
    let model = &req.model;
    let mut body = Map::new();

    let mut max_tokens = api::default_max_tokens(req);
    if max_tokens == 0 {
        max_tokens = model.max_tokens / 3;
    }
    let mut thinking = None;
    let mut output_config = None;
    if model.reasoning && req.thinking != ThinkingLevel::Off {
        if is_adaptive(model) {
            let effort = match req.thinking {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
                ThinkingLevel::Medium => "medium",
                ThinkingLevel::Xhigh
                    if model.id.contains("opus-4-6") || model.id.contains("opus-4.6") =>
                {
                    "max"
                }
                _ => "high",
            };
            thinking = Some(json!({"type": "adaptive", "display": "summarized"}));
            output_config = Some(json!({ "effort": effort }));
        } else {
            let mut budget: u64 = match req.thinking {
                ThinkingLevel::Minimal => 1024,
                ThinkingLevel::Low => 2048,
                ThinkingLevel::Medium => 8192,
                _ => 16384,
            };
            max_tokens = (max_tokens + budget).min(model.max_tokens);
            if max_tokens <= budget {
                budget = max_tokens.saturating_sub(1024);
            }
            thinking =
                Some(json!({"type": "enabled", "budget_tokens": budget, "display": "summarized"}));
        }
    }
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));

    let mut system = Vec::new();
    let block = |text: &str| match cc {
        Some(cc) => json!({"type": "text", "text": text, "cache_control": cc}),
        None => json!({"type": "text", "text": text}),
    };
    if oauth {
        system.push(block(CLAUDE_CODE_IDENTITY));
    }
    if !req.system_prompt.is_empty() {
        system.push(block(&req.system_prompt));
    }
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                let props = t
                    .parameters
                    .get("properties")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                let required = t
                    .parameters
                    .get("required")
                    .cloned()
                    .unwrap_or_else(|| json!([]));
                let mut schema =
                    json!({"type": "object", "properties": props, "required": required});
                // The reference's shape, plus the definitions `$ref`s in the properties point at
                // (MCP servers' schemas use them; no built-in tool has any).
                for k in ["$defs", "definitions"] {
                    if let Some(d) = t.parameters.get(k) {
                        schema[k] = d.clone();
                    }
                }
                // pi 0.87.1: with the model's `supportsStrictTools`, a tool asking for
                // constrained sampling is sent strict (its strict schema, then the same
                // type/properties/required).
                let strict = req.compat.is_087()
                    && crate::llm::strict::resolve_preferred(
                        t,
                        crate::llm::strict::compat_flag(&req.model, "supportsStrictTools", false),
                    ) == Some(true);
                if strict {
                    if let Value::Object(mut s) = crate::llm::strict::parameters(t, Some(true)) {
                        s.entry("properties").or_insert_with(|| json!({}));
                        schema = Value::Object(s);
                    }
                }
                let mut tool = Map::new();
                tool.insert("name".into(), json!(wire_tool_name(&t.name, oauth)));
                tool.insert("description".into(), json!(t.description));
                if eager_tool_streaming(&req.model) {
                    tool.insert("eager_input_streaming".into(), json!(true));
                }
                if strict {
                    tool.insert("strict".into(), json!(true));
                }
                tool.insert("input_schema".into(), schema);
                Value::Object(tool)
            })
            .collect::<Vec<Value>>();
        let mut tools = tools;
        // The reference also marks the end of the tool list as a cache breakpoint.
        if let (Some(Value::Object(last)), Some(cc)) = (tools.last_mut(), cc) {
            last.insert("cache_control".into(), cc.clone());
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = thinking {
        body.insert("thinking".into(), t);
    }
    if let Some(o) = output_config {
        body.insert("output_config".into(), o);
    }
    body
}

fn image_block(data: &str, mime: &str) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
}

/// One message of the request as planned from the transformed history: references only, so the
/// long history is written straight into the body without an intermediate `Value` tree.
enum Planned<'a> {
    UserText(&'a str),
    UserBlocks(Vec<&'a Content>),
    Assistant(Vec<&'a Content>),
    ToolResults(&'a [Cow<'a, LlmMessage>]),
}

fn plan<'a>(msgs: &'a [Cow<'a, LlmMessage>], images_ok: bool) -> Vec<Planned<'a>> {
    let mut out = Vec::with_capacity(msgs.len());
    let mut i = 0;
    while i < msgs.len() {
        match &*msgs[i] {
            LlmMessage::User(u) => match &u.content {
                UserContent::Text(s) => {
                    if !s.trim().is_empty() {
                        out.push(Planned::UserText(s));
                    }
                }
                UserContent::Blocks(blocks) => {
                    let content: Vec<&Content> = blocks
                        .iter()
                        .filter(|b| match b {
                            Content::Text(t) => !t.text.trim().is_empty(),
                            Content::Image(_) => images_ok,
                            _ => false,
                        })
                        .collect();
                    if !content.is_empty() {
                        out.push(Planned::UserBlocks(content));
                    }
                }
            },
            LlmMessage::Assistant(a) => {
                let blocks: Vec<&Content> = a
                    .content
                    .iter()
                    .filter(|c| match c {
                        Content::Text(t) => !t.text.trim().is_empty(),
                        Content::Thinking(t) => {
                            t.redacted == Some(true) || !t.thinking.trim().is_empty()
                        }
                        Content::ToolCall(_) => true,
                        _ => false,
                    })
                    .collect();
                if !blocks.is_empty() {
                    out.push(Planned::Assistant(blocks));
                }
            }
            LlmMessage::ToolResult(_) => {
                let start = i;
                while msgs
                    .get(i)
                    .is_some_and(|m| matches!(**m, LlmMessage::ToolResult(_)))
                {
                    i += 1;
                }
                out.push(Planned::ToolResults(&msgs[start..i]));
                continue;
            }
        }
        i += 1;
    }
    out
}

/// `value` as JSON into `out` (serialising borrowed data into memory cannot fail).
fn put<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let _ = serde_json::to_writer(&mut *out, value);
}

/// A string as JSON into `out` (the fast path for the history's texts).
fn put_str(out: &mut Vec<u8>, s: &str) {
    crate::json::write_str(out, s);
}

/// Roughly the size of the body's history: reserved up front so the buffer of a long session
/// is not copied while it grows.
fn estimate(msgs: &[Cow<'_, LlmMessage>]) -> usize {
    let blocks = |c: &[Content]| -> usize {
        c.iter()
            .map(|b| {
                64 + match b {
                    Content::Text(t) => t.text.len(),
                    Content::Thinking(t) => t.thinking.len(),
                    Content::Image(i) => i.data.len(),
                    Content::ToolCall(_) => 256,
                }
            })
            .sum()
    };
    msgs.iter()
        .map(|m| {
            64 + match &**m {
                LlmMessage::User(u) => match &u.content {
                    UserContent::Text(s) => s.len(),
                    UserContent::Blocks(b) => blocks(b),
                },
                LlmMessage::Assistant(a) => blocks(&a.content),
                LlmMessage::ToolResult(r) => blocks(&r.content),
            }
        })
        .sum::<usize>()
        .saturating_mul(11)
        / 10
}

/// `,"cache_control":{...}` when this is the cache breakpoint.
fn put_cc(out: &mut Vec<u8>, cc: Option<&Value>) {
    if let Some(cc) = cc {
        out.extend_from_slice(b",\"cache_control\":");
        put(out, cc);
    }
}

fn put_text_block(out: &mut Vec<u8>, text: &str, cc: Option<&Value>) {
    out.extend_from_slice(b"{\"type\":\"text\",\"text\":");
    put_str(out, text);
    put_cc(out, cc);
    out.push(b'}');
}

fn put_image_block(out: &mut Vec<u8>, data: &str, mime: &str, cc: Option<&Value>) {
    out.extend_from_slice(b"{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":");
    put_str(out, mime);
    out.extend_from_slice(b",\"data\":");
    put_str(out, data);
    out.push(b'}');
    put_cc(out, cc);
    out.push(b'}');
}

/// The `messages` array, written into `out`. The last block of a final user message carries the
/// cache breakpoint, as the reference's.
fn write_messages(out: &mut Vec<u8>, req: &LlmRequest, cc: Option<&Value>, oauth: bool) {
    let model = &req.model;
    let normalize = |id: &str| sanitize_id(id, 64);
    let msgs = transform_borrowed(&req.messages, model, Some(&normalize));
    let images_ok = model.input.iter().any(|i| i == "image");
    let planned = plan(&msgs, images_ok);
    out.reserve(estimate(&msgs));
    out.push(b'[');
    for (n, m) in planned.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        let last = n + 1 == planned.len();
        // The cache breakpoint goes on the last block of the last message when it is the user's.
        let cc_at = |k: usize, len: usize| cc.filter(|_| last && k + 1 == len);
        match m {
            Planned::UserText(s) if last => {
                out.extend_from_slice(b"{\"role\":\"user\",\"content\":[");
                put_text_block(out, s, cc);
                out.extend_from_slice(b"]}");
            }
            Planned::UserText(s) => {
                out.extend_from_slice(b"{\"role\":\"user\",\"content\":");
                put_str(out, s);
                out.push(b'}');
            }
            Planned::UserBlocks(blocks) => {
                out.extend_from_slice(b"{\"role\":\"user\",\"content\":[");
                for (k, b) in blocks.iter().enumerate() {
                    if k > 0 {
                        out.push(b',');
                    }
                    match b {
                        Content::Text(t) => put_text_block(out, &t.text, cc_at(k, blocks.len())),
                        Content::Image(img) => {
                            put_image_block(out, &img.data, &img.mime_type, cc_at(k, blocks.len()))
                        }
                        _ => {}
                    }
                }
                out.extend_from_slice(b"]}");
            }
            Planned::Assistant(blocks) => {
                out.extend_from_slice(b"{\"role\":\"assistant\",\"content\":[");
                for (k, c) in blocks.iter().enumerate() {
                    if k > 0 {
                        out.push(b',');
                    }
                    match c {
                        Content::Text(t) => put_text_block(out, &t.text, None),
                        Content::Thinking(t) if t.redacted == Some(true) => {
                            out.extend_from_slice(b"{\"type\":\"redacted_thinking\",\"data\":");
                            put_str(out, t.thinking_signature.as_deref().unwrap_or(""));
                            out.push(b'}');
                        }
                        Content::Thinking(t) => match &t.thinking_signature {
                            Some(sig) if !sig.is_empty() => {
                                out.extend_from_slice(b"{\"type\":\"thinking\",\"thinking\":");
                                put_str(out, &t.thinking);
                                out.extend_from_slice(b",\"signature\":");
                                put_str(out, sig);
                                out.push(b'}');
                            }
                            _ => put_text_block(out, &t.thinking, None),
                        },
                        Content::ToolCall(tc) => {
                            out.extend_from_slice(b"{\"type\":\"tool_use\",\"id\":");
                            put_str(out, &tc.id);
                            out.extend_from_slice(b",\"name\":");
                            put_str(out, &wire_tool_name(&tc.name, oauth));
                            out.extend_from_slice(b",\"input\":");
                            put(out, &tc.arguments);
                            out.push(b'}');
                        }
                        _ => {}
                    }
                }
                out.extend_from_slice(b"]}");
            }
            Planned::ToolResults(results) => {
                out.extend_from_slice(b"{\"role\":\"user\",\"content\":[");
                for (k, r) in results.iter().enumerate() {
                    let LlmMessage::ToolResult(r) = &**r else {
                        continue;
                    };
                    if k > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"{\"type\":\"tool_result\",\"tool_use_id\":");
                    put_str(out, &r.tool_call_id);
                    out.extend_from_slice(b",\"content\":");
                    match tool_result_content(&r.content, images_ok) {
                        Value::String(text) => put_str(out, &text),
                        blocks => put(out, &blocks),
                    }
                    out.extend_from_slice(b",\"is_error\":");
                    out.extend_from_slice(if r.is_error { b"true" } else { b"false" });
                    put_cc(out, cc_at(k, results.len()));
                    out.push(b'}');
                }
                out.extend_from_slice(b"]}");
            }
        }
    }
    out.push(b']');
}

fn tool_result_content(content: &[Content], images_ok: bool) -> Value {
    let has_images = images_ok && content.iter().any(|c| matches!(c, Content::Image(_)));
    if !has_images {
        let texts: Vec<&str> = content
            .iter()
            .filter_map(|c| match c {
                Content::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        return json!(texts.join("\n"));
    }
    let mut blocks: Vec<Value> = Vec::new();
    for c in content {
        match c {
            Content::Text(t) => blocks.push(json!({"type": "text", "text": t.text})),
            Content::Image(img) => blocks.push(image_block(&img.data, &img.mime_type)),
            _ => {}
        }
    }
    if !content.iter().any(|c| matches!(c, Content::Text(_))) {
        blocks.insert(0, json!({"type": "text", "text": "(see attached image)"}));
    }
    Value::Array(blocks)
}

// ------------------------------------------------------------------------------------------------

pub struct Decoder {
    /// Provider block index → our content index.
    blocks: Vec<(u64, usize)>,
    stop: Option<StopReason>,
    tool_names: Vec<String>,
    oauth: bool,
    /// pi 0.87.1: the model's `compat.allowedFallbackModels` (`provider`, `model`, prices) that
    /// price a reply another model gave.
    fallbacks: Vec<(String, String, crate::llm::ModelCost)>,
    provider: String,
}

impl Decoder {
    pub fn new(req: &LlmRequest) -> Decoder {
        let fallbacks = req
            .model
            .compat
            .as_ref()
            .and_then(|c| c.get("allowedFallbackModels"))
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|f| {
                        let s = |k: &str| f.get(k).and_then(Value::as_str).map(str::to_string);
                        let c = f.get("cost")?;
                        let n = |k: &str| c.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                        Some((
                            s("provider")?,
                            s("model")?,
                            crate::llm::ModelCost {
                                input: n("input"),
                                output: n("output"),
                                cache_read: n("cacheRead"),
                                cache_write: n("cacheWrite"),
                                tiers: None,
                            },
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Decoder {
            fallbacks,
            provider: req.model.provider.clone(),
            blocks: Vec::new(),
            stop: None,
            tool_names: req.tools.iter().map(|t| t.name.clone()).collect(),
            oauth: is_oauth(req),
        }
    }

    fn ours(&self, index: Option<u64>) -> Option<usize> {
        let index = index?;
        self.blocks
            .iter()
            .rev()
            .find(|(a, _)| *a == index)
            .map(|(_, o)| *o)
    }

    fn tool_name(&self, wire: &str) -> String {
        if self.oauth {
            if let Some(n) = self
                .tool_names
                .iter()
                .find(|n| n.eq_ignore_ascii_case(wire))
            {
                return n.clone();
            }
        }
        wire.to_string()
    }
}

fn usage_field(u: &Value, key: &str) -> Option<u64> {
    u.get(key).and_then(Value::as_u64)
}

fn map_stop(r: &str) -> Result<StopReason, String> {
    match r {
        "end_turn" | "pause_turn" | "stop_sequence" => Ok(StopReason::Stop),
        "max_tokens" => Ok(StopReason::Length),
        "tool_use" => Ok(StopReason::ToolUse),
        "refusal" | "sensitive" => Ok(StopReason::Error),
        other => Err(format!("Unhandled stop reason: {other}")),
    }
}

impl api::Decoder for Decoder {
    fn event(&mut self, ev: &SseEvent, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        let v: Value = match serde_json::from_str(&ev.data) {
            Ok(v) => v,
            Err(e) => {
                b.fail(
                    format!("Could not parse SSE event data: {e}"),
                    false,
                    None,
                    out,
                );
                return;
            }
        };
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(ev.event.as_deref())
            .unwrap_or("");
        match kind {
            "message_start" => {
                let m = &v["message"];
                b.msg.response_id = m.get("id").and_then(Value::as_str).map(str::to_string);
                if b.compat.is_087() {
                    // pi 0.87.1 notes the model that answered when it is another one, and prices
                    // the reply as an allowed fallback model when it is one.
                    if let Some(answered) = m.get("model").and_then(Value::as_str) {
                        if answered != b.msg.model {
                            b.msg.response_model = Some(answered.to_string());
                            if let Some((_, _, cost)) = self
                                .fallbacks
                                .iter()
                                .find(|(p, id, _)| *p == self.provider && id == answered)
                            {
                                b.set_prices(*cost);
                            }
                        }
                    }
                }
                let u = &m["usage"];
                let mut usage = Usage {
                    input: usage_field(u, "input_tokens").unwrap_or(0),
                    output: usage_field(u, "output_tokens").unwrap_or(0),
                    cache_read: usage_field(u, "cache_read_input_tokens").unwrap_or(0),
                    cache_write: usage_field(u, "cache_creation_input_tokens").unwrap_or(0),
                    ..Default::default()
                };
                if b.compat.is_087() {
                    usage.cache_write_1h = Some(
                        u.pointer("/cache_creation/ephemeral_1h_input_tokens")
                            .and_then(Value::as_u64)
                            .unwrap_or(0),
                    );
                }
                usage.total_tokens =
                    usage.input + usage.output + usage.cache_read + usage.cache_write;
                b.set_usage(usage, out);
                b.start(out);
            }
            "content_block_start" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let cb = &v["content_block"];
                let ours = match cb.get("type").and_then(Value::as_str) {
                    Some("text") => b.start_text(out),
                    Some("thinking") => b.start_thinking(out),
                    Some("redacted_thinking") => {
                        let i = b.start_thinking(out);
                        if let Some(Content::Thinking(t)) = b.block_mut(i) {
                            t.thinking = "[Reasoning redacted]".into();
                            t.thinking_signature =
                                cb.get("data").and_then(Value::as_str).map(str::to_string);
                            t.redacted = Some(true);
                        }
                        i
                    }
                    Some("tool_use") => {
                        let id = cb.get("id").and_then(Value::as_str).unwrap_or("");
                        let name =
                            self.tool_name(cb.get("name").and_then(Value::as_str).unwrap_or(""));
                        b.start_tool(id, &name, out)
                    }
                    _ => return,
                };
                self.blocks.push((index, ours));
            }
            "content_block_delta" => {
                let Some(i) = self.ours(v.get("index").and_then(Value::as_u64)) else {
                    return;
                };
                let d = &v["delta"];
                let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
                match d.get("type").and_then(Value::as_str) {
                    Some("text_delta") => b.delta(i, s("text"), out),
                    Some("thinking_delta") => b.delta(i, s("thinking"), out),
                    Some("input_json_delta") => b.delta(i, s("partial_json"), out),
                    Some("signature_delta") => {
                        if let Some(Content::Thinking(t)) = b.block_mut(i) {
                            t.thinking_signature
                                .get_or_insert_with(String::new)
                                .push_str(s("signature"));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(i) = self.ours(v.get("index").and_then(Value::as_u64)) {
                    b.end_block(i, out);
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    if b.compat.is_087() {
                        b.msg.raw_stop_reason = Some(r.to_string());
                    }
                    match map_stop(r) {
                        Ok(s) => self.stop = Some(s),
                        Err(e) => {
                            b.fail(e, false, None, out);
                            return;
                        }
                    }
                }
                if let Some(u) = v.get("usage") {
                    let mut usage = b.msg.usage;
                    if let Some(x) = usage_field(u, "input_tokens") {
                        usage.input = x;
                    }
                    if let Some(x) = usage_field(u, "output_tokens") {
                        usage.output = x;
                    }
                    if let Some(x) = usage_field(u, "cache_read_input_tokens") {
                        usage.cache_read = x;
                    }
                    if let Some(x) = usage_field(u, "cache_creation_input_tokens") {
                        usage.cache_write = x;
                    }
                    if let Some(x) = u
                        .pointer("/output_tokens_details/thinking_tokens")
                        .and_then(Value::as_u64)
                        .filter(|_| b.compat.is_087())
                    {
                        usage.reasoning = Some(x);
                    }
                    usage.total_tokens =
                        usage.input + usage.output + usage.cache_read + usage.cache_write;
                    b.set_usage(usage, out);
                }
            }
            "message_stop" => {
                b.start(out);
                b.finish(self.stop.unwrap_or(StopReason::Stop), out);
            }
            "error" => {
                let msg = match v.get("message") {
                    Some(Value::String(m)) => m.clone(),
                    _ => v.to_string(),
                };
                b.fail(msg, false, None, out);
            }
            _ => {}
        }
    }

    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        match self.stop {
            Some(s) => b.finish(s, out),
            None => b.fail(api::TERMINATED.into(), false, None, out),
        }
    }
}
