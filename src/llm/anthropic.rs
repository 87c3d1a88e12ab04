//! Anthropic Messages API (`anthropic-messages`, spec 8.1): the request body pith sends and the
//! decoder of the SSE stream (`message_start`, `content_block_*`, `message_delta`,
//! `message_stop`, `error`). Both are pure; `stream.rs` does the I/O.

use serde_json::{Map, Value, json};

use crate::llm::sse::SseEvent;
use crate::llm::stream::{self, Builder, Prepared};
use crate::llm::transform::{sanitize_id, transform_messages};
use crate::llm::{LlmRequest, Model, StreamEvent};
use crate::message::{Content, LlmMessage, StopReason, ThinkingLevel, Usage, UserContent};

const CLAUDE_CODE_IDENTITY: &str = "You are Claude Code, Anthropic's official CLI for Claude.";
const CLAUDE_CODE_TOOLS: [&str; 5] = ["Read", "Write", "Edit", "Bash", "Grep"];

fn is_oauth(req: &LlmRequest) -> bool {
    req.api_key
        .as_deref()
        .is_some_and(|k| k.contains("sk-ant-oat"))
}

fn is_adaptive(model: &Model) -> bool {
    ["opus-4-6", "opus-4.6", "sonnet-4-6", "sonnet-4.6"]
        .iter()
        .any(|p| model.id.contains(p))
}

fn cache_control(model: &Model) -> Value {
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

pub fn prepare(req: &LlmRequest) -> Prepared {
    let base = req.model.base_url.trim_end_matches('/');
    Prepared {
        url: format!("{base}/v1/messages"),
        headers: headers(req),
        body: build_body(req),
    }
}

pub fn headers(req: &LlmRequest) -> Vec<(String, String)> {
    let oauth = is_oauth(req);
    let mut betas: Vec<&str> = Vec::new();
    if oauth {
        betas.extend(["claude-code-20250219", "oauth-2025-04-20"]);
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
        ("x-stainless-timeout".into(), "600".into()),
    ];
    if !betas.is_empty() {
        h.push(("anthropic-beta".into(), betas.join(",")));
    }
    match (&req.api_key, oauth) {
        (Some(k), true) => {
            h.push(("authorization".into(), format!("Bearer {k}")));
            h.push(("user-agent".into(), "claude-cli/2.1.75".into()));
            h.push(("x-app".into(), "cli".into()));
        }
        (Some(k), false) => {
            h.push(("x-api-key".into(), k.clone()));
            h.push(("user-agent".into(), "Anthropic/JS 0.91.1".into()));
        }
        (None, _) => h.push(("user-agent".into(), "Anthropic/JS 0.91.1".into())),
    }
    crate::llm::http::merge_model_headers(&mut h, &req.model);
    h
}

pub fn build_body(req: &LlmRequest) -> Value {
    let model = &req.model;
    let oauth = is_oauth(req);
    let cc = cache_control(model);
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(req, &cc, oauth)),
    );

    let mut max_tokens = stream::default_max_tokens(req);
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
    if oauth {
        system.push(json!({"type": "text", "text": CLAUDE_CODE_IDENTITY, "cache_control": cc}));
    }
    if !req.system_prompt.is_empty() {
        system.push(json!({"type": "text", "text": req.system_prompt, "cache_control": cc}));
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
                json!({
                    "name": wire_tool_name(&t.name, oauth),
                    "description": t.description,
                    "eager_input_streaming": true,
                    "input_schema": {"type": "object", "properties": props, "required": required},
                })
            })
            .collect::<Vec<Value>>();
        let mut tools = tools;
        // The reference also marks the end of the tool list as a cache breakpoint.
        if let Some(Value::Object(last)) = tools.last_mut() {
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
    Value::Object(body)
}

fn image_block(data: &str, mime: &str) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
}

fn convert_messages(req: &LlmRequest, cc: &Value, oauth: bool) -> Vec<Value> {
    let model = &req.model;
    let normalize = |id: &str| sanitize_id(id, 64);
    let msgs = transform_messages(&req.messages, model, Some(&normalize));
    let images_ok = model.input.iter().any(|i| i == "image");
    let mut out: Vec<Value> = Vec::with_capacity(msgs.len());
    let mut i = 0;
    while i < msgs.len() {
        match &msgs[i] {
            LlmMessage::User(u) => match &u.content {
                UserContent::Text(s) => {
                    if !s.trim().is_empty() {
                        out.push(json!({"role": "user", "content": s}));
                    }
                }
                UserContent::Blocks(blocks) => {
                    let content: Vec<Value> = blocks
                        .iter()
                        .filter_map(|b| match b {
                            Content::Text(t) if !t.text.trim().is_empty() => {
                                Some(json!({"type": "text", "text": t.text}))
                            }
                            Content::Image(img) if images_ok => {
                                Some(image_block(&img.data, &img.mime_type))
                            }
                            _ => None,
                        })
                        .collect();
                    if !content.is_empty() {
                        out.push(json!({"role": "user", "content": content}));
                    }
                }
            },
            LlmMessage::Assistant(a) => {
                let mut blocks = Vec::new();
                for c in &a.content {
                    match c {
                        Content::Text(t) if !t.text.trim().is_empty() => {
                            blocks.push(json!({"type": "text", "text": t.text}))
                        }
                        Content::Thinking(t) => {
                            if t.redacted == Some(true) {
                                let data = t.thinking_signature.clone().unwrap_or_default();
                                blocks.push(json!({"type": "redacted_thinking", "data": data}));
                            } else if t.thinking.trim().is_empty() {
                            } else {
                                match &t.thinking_signature {
                                    Some(sig) if !sig.is_empty() => blocks.push(
                                        json!({"type": "thinking", "thinking": t.thinking, "signature": sig}),
                                    ),
                                    _ => blocks.push(json!({"type": "text", "text": t.thinking})),
                                }
                            }
                        }
                        Content::ToolCall(tc) => blocks.push(json!({
                            "type": "tool_use",
                            "id": tc.id,
                            "name": wire_tool_name(&tc.name, oauth),
                            "input": tc.arguments,
                        })),
                        _ => {}
                    }
                }
                if !blocks.is_empty() {
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            LlmMessage::ToolResult(_) => {
                let mut results = Vec::new();
                while let Some(LlmMessage::ToolResult(r)) = msgs.get(i) {
                    results.push(json!({
                        "type": "tool_result",
                        "tool_use_id": r.tool_call_id,
                        "content": tool_result_content(&r.content, images_ok),
                        "is_error": r.is_error,
                    }));
                    i += 1;
                }
                out.push(json!({"role": "user", "content": results}));
                continue;
            }
        }
        i += 1;
    }
    // Cache breakpoint on the last block of the last message, if it is a user message.
    if let Some(last) = out.last_mut() {
        if last.get("role").and_then(Value::as_str) == Some("user") {
            if let Some(Value::String(s)) = last.get("content") {
                let s = s.clone();
                last["content"] = json!([{"type": "text", "text": s}]);
            }
            if let Some(Value::Object(block)) = last
                .get_mut("content")
                .and_then(|c| c.as_array_mut())
                .and_then(|a| a.last_mut())
            {
                block.insert("cache_control".into(), cc.clone());
            }
        }
    }
    out
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
}

impl Decoder {
    pub fn new(req: &LlmRequest) -> Decoder {
        Decoder {
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

impl stream::Decoder for Decoder {
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
                let u = &m["usage"];
                let mut usage = Usage {
                    input: usage_field(u, "input_tokens").unwrap_or(0),
                    output: usage_field(u, "output_tokens").unwrap_or(0),
                    cache_read: usage_field(u, "cache_read_input_tokens").unwrap_or(0),
                    cache_write: usage_field(u, "cache_creation_input_tokens").unwrap_or(0),
                    ..Default::default()
                };
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
            None => b.fail(stream::TERMINATED.into(), false, None, out),
        }
    }
}
