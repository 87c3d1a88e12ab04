//! Mistral chat completions (`mistral-conversations`, the built-in Mistral models): the body
//! pi 0.73.1 sends through the official TypeScript SDK (`@mistralai/mistralai` 2.7.0, which
//! serialises its fields in schema order and adds `prefix`/`index` defaults) and the decoder of
//! its `data: {chunk}` / `data: [DONE]` stream.
//!
//! Differences from the OpenAI chat format that matter here: thinking arrives as typed content
//! chunks (`{"type":"thinking","thinking":[{"type":"text",…}]}`), tool-call ids must be 9
//! alphanumeric characters (foreign ids are re-derived with the reference's hash), reasoning is
//! asked for with `prompt_mode: "reasoning"` (Magistral) or `reasoning_effort` (Mistral Small 4,
//! Medium 3.5), and a tool call ends only when the stream does.

use std::cell::RefCell;
use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::llm::api::{self, Builder, Prepared, WireApi};
use crate::llm::sse::SseEvent;
use crate::llm::transform::{short_hash, transform_messages};
use crate::llm::{LlmRequest, StreamEvent};
use crate::message::{Content, LlmMessage, StopReason, ThinkingLevel, Usage, UserContent};
use crate::protocol::SdkGeneration;

const TOOL_CALL_ID_LENGTH: usize = 9;
/// Longest error body quoted, in UTF-16 units (the reference's limit).
const MAX_ERROR_BODY_CHARS: usize = 4000;
/// What the SDK sends as its user agent.
const USER_AGENT: &str = "mistral-client-typescript/2.7.0";

/// The client pi talks to Mistral with: the SDK's (pi 0.73.1), or its own `fetch` (pi 0.87.1:
/// its own headers, `toMistralWirePayload`'s body, error texts and stream decoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    MistralSdk,
    Fetch,
}

impl Client {
    pub const fn of(sdk: SdkGeneration) -> Client {
        if sdk.mistral_own_fetch() {
            Client::Fetch
        } else {
            Client::MistralSdk
        }
    }
}

/// The `mistral-conversations` wire API.
pub struct Mistral;

pub const API: Mistral = Mistral;

impl WireApi for Mistral {
    fn name(&self) -> &'static str {
        "mistral-conversations"
    }

    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String> {
        let Some(key) = req.api_key.as_deref().filter(|k| !k.is_empty()) else {
            return Err(format!("No API key for provider: {}", req.model.provider));
        };
        let client = Client::of(req.sdk);
        let mut h: Vec<(String, String)> = if client == Client::Fetch {
            // pi 0.87.1's own client (no SDK).
            vec![
                (
                    "user-agent".into(),
                    crate::llm::http::pi_user_agent(req.sdk),
                ),
                ("accept".into(), "text/event-stream".into()),
                ("authorization".into(), format!("Bearer {key}")),
                ("content-type".into(), "application/json".into()),
            ]
        } else {
            vec![
                ("content-type".into(), "application/json".into()),
                ("accept".into(), "text/event-stream".into()),
                ("authorization".into(), format!("Bearer {key}")),
                ("user-agent".into(), USER_AGENT.into()),
            ]
        };
        crate::llm::http::merge_model_headers(&mut h, &req.model);
        // Mistral's KV-cache affinity, unless a header already sets it.
        if let Some(s) = &req.session_id {
            if api::header_of(&h, "x-affinity").is_none() {
                h.push(("x-affinity".into(), s.clone()));
            }
        }
        Ok(Prepared {
            url: format!(
                "{}/v1/chat/completions",
                req.model.base_url.trim_end_matches('/')
            ),
            headers: h,
            body: api::json_body(&match client {
                Client::MistralSdk => build_body(req),
                Client::Fetch => build_wire_payload(req),
            }),
        })
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn api::Decoder> {
        Box::new(Decoder {
            own_client: Client::of(req.sdk) == Client::Fetch,
            ..Decoder::default()
        })
    }

    fn http_error_message(
        &self,
        req: &LlmRequest,
        status: u16,
        headers: &[(String, String)],
        body: &str,
    ) -> String {
        if Client::of(req.sdk) == Client::Fetch && body.trim().is_empty() {
            // pi 0.87.1's own client: the response's status text.
            let text = match api::reason_phrase(status) {
                "" => format!("Request failed with status {status}"),
                t => t.to_string(),
            };
            return format!("Mistral API error ({status}): {text}");
        }
        let trimmed = body.trim();
        if !trimmed.is_empty() {
            return format!(
                "Mistral API error ({status}): {}",
                api::cut_utf16(trimmed, MAX_ERROR_BODY_CHARS)
            );
        }

        // The SDK's own message for an empty body.
        let mut m = format!("API error occurred: Status {status}");
        let ct = api::header_of(headers, "content-type").unwrap_or("");
        if ct != "application/json" {
            let ct = if ct.is_empty() { "\"\"" } else { ct };
            if ct.contains(' ') {
                m.push_str(&format!(" Content-Type \"{ct}\""));
            } else {
                m.push_str(&format!(" Content-Type {ct}"));
            }
        }
        m.push_str(". Body: \"\"");
        format!("Mistral API error ({status}): {m}")
    }

    fn connection_error(&self, req: &LlmRequest) -> &'static str {
        match Client::of(req.sdk) {
            Client::MistralSdk => "Unable to make request: TypeError: fetch failed",
            Client::Fetch => api::FETCH_FAILED,
        }
    }

    fn connection_error_cause(&self) -> bool {
        false
    }
}

/// The reference's `deriveMistralToolCallId`.
fn derive_tool_call_id(id: &str, attempt: u32) -> String {
    let normalized: String = id.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    if attempt == 0 && normalized.chars().count() == TOOL_CALL_ID_LENGTH {
        return normalized;
    }
    let base = if normalized.is_empty() {
        id
    } else {
        &normalized
    };
    let seed = if attempt == 0 {
        base.to_string()
    } else {
        format!("{base}:{attempt}")
    };
    short_hash(&seed)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(TOOL_CALL_ID_LENGTH)
        .collect()
}

/// Maps foreign tool-call ids to Mistral ones, avoiding collisions (per request).
#[derive(Default)]
struct IdNormalizer {
    ids: HashMap<String, String>,
    owners: HashMap<String, String>,
}

impl IdNormalizer {
    fn normalize(&mut self, id: &str) -> String {
        if let Some(done) = self.ids.get(id) {
            return done.clone();
        }
        let mut attempt = 0;
        loop {
            let candidate = derive_tool_call_id(id, attempt);
            match self.owners.get(&candidate) {
                Some(owner) if owner != id => attempt += 1,
                _ => {
                    self.ids.insert(id.to_string(), candidate.clone());
                    self.owners.insert(candidate.clone(), id.to_string());
                    return candidate;
                }
            }
        }
    }
}

fn uses_reasoning_effort(id: &str) -> bool {
    matches!(
        id,
        "mistral-small-2603" | "mistral-small-latest" | "mistral-medium-3.5"
    )
}

/// The request body, keys in the SDK's schema order.
pub fn build_body(req: &LlmRequest) -> Value {
    let model = &req.model;
    let images = model.input.iter().any(|i| i == "image");
    let normalizer = RefCell::new(IdNormalizer::default());
    let normalize = |id: &str| normalizer.borrow_mut().normalize(id);
    let msgs = crate::llm::transcript::collapsed(transform_messages(
        &req.messages,
        model,
        Some(&normalize),
        crate::llm::transform::ForeignThinking::of(req.sdk),
    ));
    let mut messages = Vec::with_capacity(msgs.len() + 1);
    if !req.system_prompt.is_empty() {
        messages.push(json!({"role": "system", "content": req.system_prompt}));
    }
    messages.extend(chat_messages(&msgs, images));

    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("max_tokens".into(), json!(api::default_max_tokens(req)));
    body.insert("stream".into(), json!(true));
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {"name": t.name,
                    "description": t.description, "strict": false, "parameters": t.parameters}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if model.reasoning && req.thinking != ThinkingLevel::Off {
        if uses_reasoning_effort(&model.id) {
            // No built-in Mistral model maps levels: every level asks for "high".
            body.insert("reasoning_effort".into(), json!("high"));
        } else {
            body.insert("prompt_mode".into(), json!("reasoning"));
        }
    }
    Value::Object(body)
}

/// pi 0.87.1's body (its own client, `toMistralWirePayload`): `model`, `stream`, `messages`,
/// `tools` (a tool asking for constrained sampling goes strict: Mistral supports it), then
/// `max_tokens`, the reasoning field and `prompt_cache_key` (the session id).
pub fn build_wire_payload(req: &LlmRequest) -> Value {
    let model = &req.model;
    let images = model.input.iter().any(|i| i == "image");
    let normalizer = RefCell::new(IdNormalizer::default());
    let normalize = |id: &str| normalizer.borrow_mut().normalize(id);
    let mut msgs = transform_messages(
        &req.messages,
        model,
        Some(&normalize),
        crate::llm::transform::ForeignThinking::of(req.sdk),
    );
    let mut messages = Vec::with_capacity(msgs.len() + 1);
    // A model that takes system messages in place gets them where they are (the first one whole,
    // the later ones as updates); otherwise they are folded into the prompt.
    if !crate::llm::transcript::mid_convo(req) {
        msgs = crate::llm::transcript::collapsed(msgs);
        if !req.system_prompt.is_empty() {
            messages.push(json!({"role": "system", "content": req.system_prompt}));
        }
    }
    for m in chat_messages(&msgs, images) {
        // The assistant message's keys in 0.87.1's order: role, prefix, content, tool_calls.
        let m = match m {
            Value::Object(o) if o.get("role") == Some(&json!("assistant")) => {
                let mut a = Map::new();
                for k in ["role", "prefix", "content", "tool_calls"] {
                    if let Some(v) = o.get(k) {
                        a.insert(k.into(), v.clone());
                    }
                }
                Value::Object(a)
            }
            Value::Object(o) if o.get("role") == Some(&json!("tool")) => {
                let mut t = Map::new();
                for k in ["role", "name", "content", "tool_call_id"] {
                    if let Some(v) = o.get(k) {
                        t.insert(k.into(), v.clone());
                    }
                }
                Value::Object(t)
            }
            other => other,
        };
        messages.push(m);
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("stream".into(), json!(true));
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                let strict = crate::llm::strict::resolve_preferred(t, true);
                json!({"type": "function", "function": {"name": t.name,
                    "description": t.description,
                    "parameters": crate::llm::strict::parameters(t, strict),
                    "strict": strict.unwrap_or(false)}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("max_tokens".into(), json!(api::default_max_tokens(req)));
    if model.reasoning && req.thinking != ThinkingLevel::Off {
        if uses_wire_reasoning_effort(&model.id) {
            let effort = req
                .extra
                .thinking_map
                .as_ref()
                .and_then(|m| m.get(req.thinking))
                .flatten()
                .unwrap_or("high");
            body.insert("reasoning_effort".into(), json!(effort));
        } else {
            body.insert("prompt_mode".into(), json!("reasoning"));
        }
    }
    if let Some(s) = &req.session_id {
        body.insert("prompt_cache_key".into(), json!(s));
    }
    Value::Object(body)
}

/// pi 0.87.1's `usesReasoningEffort`.
fn uses_wire_reasoning_effort(id: &str) -> bool {
    id == "mistral-small-2603"
        || id == "mistral-small-latest"
        || id.starts_with("mistral-medium-")
        || id == "zai-glm-5-2"
}

fn chat_messages(msgs: &[LlmMessage], images: bool) -> Vec<Value> {
    let mut out = Vec::with_capacity(msgs.len());
    for (n, m) in msgs.iter().enumerate() {
        match m {
            LlmMessage::System(s) => {
                let text = if n == 0 {
                    crate::llm::transcript::system_text(s)
                } else {
                    crate::llm::transcript::render_update(s)
                };
                if !text.is_empty() {
                    out.push(json!({"role": "system", "content": text}));
                }
            }
            LlmMessage::User(u) => match &u.content {
                UserContent::Text(s) => out.push(json!({"role": "user", "content": s})),
                UserContent::Blocks(blocks) => {
                    let had_images = blocks.iter().any(|b| matches!(b, Content::Image(_)));
                    let parts: Vec<Value> = blocks
                        .iter()
                        .filter_map(|b| match b {
                            Content::Text(t) => Some(json!({"type": "text", "text": t.text})),
                            Content::Image(i) if images => Some(json!({"type": "image_url",
                                "image_url": format!("data:{};base64,{}", i.mime_type, i.data)})),
                            _ => None,
                        })
                        .collect();
                    if !parts.is_empty() {
                        out.push(json!({"role": "user", "content": parts}));
                    } else if had_images && !images {
                        out.push(json!({"role": "user",
                            "content": "(image omitted: model does not support images)"}));
                    }
                }
            },
            LlmMessage::Assistant(a) => {
                let mut parts = Vec::new();
                let mut calls = Vec::new();
                for b in &a.content {
                    match b {
                        Content::Text(t) if !t.text.trim().is_empty() => {
                            parts.push(json!({"type": "text", "text": t.text}))
                        }
                        Content::Thinking(t) if !t.thinking.trim().is_empty() => parts
                            .push(json!({"type": "thinking",
                                "thinking": [{"type": "text", "text": t.thinking}]})),
                        Content::ToolCall(tc) => {
                            calls.push(json!({"id": tc.id, "type": "function",
                            "function": {"name": tc.name, "arguments": tc.arguments.to_string()},
                            "index": 0}))
                        }
                        _ => {}
                    }
                }
                if parts.is_empty() && calls.is_empty() {
                    continue;
                }
                let mut msg = Map::new();
                msg.insert("role".into(), json!("assistant"));
                if !parts.is_empty() {
                    msg.insert("content".into(), Value::Array(parts));
                }
                if !calls.is_empty() {
                    msg.insert("tool_calls".into(), Value::Array(calls));
                }
                msg.insert("prefix".into(), json!(false));
                out.push(Value::Object(msg));
            }
            LlmMessage::ToolResult(r) => {
                let text: Vec<&str> = r
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        Content::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let has_images = r.content.iter().any(|c| matches!(c, Content::Image(_)));
                let mut content = vec![json!({"type": "text",
                    "text": tool_result_text(&text.join("\n"), has_images, images, r.is_error)})];
                if images {
                    for c in &r.content {
                        if let Content::Image(i) = c {
                            content.push(json!({"type": "image_url",
                                "image_url": format!("data:{};base64,{}", i.mime_type, i.data)}));
                        }
                    }
                }
                out.push(json!({"role": "tool", "content": content,
                    "tool_call_id": r.tool_call_id, "name": r.tool_name}));
            }
        }
    }
    out
}

/// The reference's `buildToolResultText`.
fn tool_result_text(text: &str, has_images: bool, images: bool, is_error: bool) -> String {
    let trimmed = text.trim();
    let prefix = if is_error { "[tool error] " } else { "" };
    if !trimmed.is_empty() {
        let suffix = if has_images && !images {
            "\n[tool image omitted: model does not support images]"
        } else {
            ""
        };
        return format!("{prefix}{trimmed}{suffix}");
    }
    let body = if has_images && images {
        "(see attached image)"
    } else if has_images {
        "(image omitted: model does not support images)"
    } else {
        "(no tool output)"
    };
    format!("{prefix}{body}")
}

/// The stream decoder.
#[derive(Default)]
pub struct Decoder {
    /// The open text or thinking block.
    current: Option<usize>,
    /// `callId:index` (0.87.1: the index, else the id) → content index, in creation order.
    tools: Vec<(String, usize)>,
    stop: Option<StopReason>,
    /// [`Client::Fetch`]'s decoding: cached prompt tokens as cache reads, its stop reasons and
    /// error texts, a stream without a finish reason is an error.
    own_client: bool,
    /// 0.87: the error text of a finish reason that is an error.
    stop_error: Option<String>,
}

impl Decoder {
    fn close_current(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if let Some(i) = self.current.take() {
            b.end_block(i, out);
        }
    }

    fn text(&mut self, thinking: bool, delta: &str, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        let open = self.current.filter(|&i| match b.block_mut(i) {
            Some(Content::Thinking(_)) => thinking,
            Some(Content::Text(_)) => !thinking,
            _ => false,
        });
        let i = match open {
            Some(i) => i,
            None => {
                self.close_current(b, out);
                let i = if thinking {
                    b.start_thinking(out)
                } else {
                    b.start_text(out)
                };
                self.current = Some(i);
                i
            }
        };
        if delta.is_empty() {
            // The reference emits the empty delta too.
            out.push(if thinking {
                StreamEvent::ThinkingDelta {
                    index: i,
                    delta: String::new(),
                }
            } else {
                StreamEvent::TextDelta {
                    index: i,
                    delta: String::new(),
                }
            });
        } else {
            b.delta(i, delta, out);
        }
    }
}

impl api::Decoder for Decoder {
    fn event(&mut self, ev: &SseEvent, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if ev.data.trim() == "[DONE]" {
            return;
        }
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
        b.start(out);
        if b.msg.response_id.is_none() {
            b.msg.response_id = v
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            let (prompt, output) = (n("prompt_tokens"), n("completion_tokens"));
            // pi 0.87.1 reports cached prompt tokens as cache reads.
            let cached = if self.own_client {
                [
                    "/promptTokensDetails/cachedTokens",
                    "/prompt_tokens_details/cached_tokens",
                    "/promptTokenDetails/cachedTokens",
                    "/prompt_token_details/cached_tokens",
                    "/numCachedTokens",
                    "/num_cached_tokens",
                ]
                .iter()
                .find_map(|p| u.pointer(p).filter(|v| !v.is_null()))
                .and_then(Value::as_f64)
                .filter(|c| c.is_finite())
                .map_or(0, |c| (c.max(0.0) as u64).min(prompt))
            } else {
                0
            };
            let input = prompt - cached;
            let total = match n("total_tokens") {
                0 => input + output + cached,
                t => t,
            };
            b.set_usage(
                Usage {
                    input,
                    output,
                    cache_read: cached,
                    total_tokens: total,
                    ..Default::default()
                },
                out,
            );
        }
        let Some(choice) = v.pointer("/choices/0") else {
            return;
        };
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            if self.own_client {
                b.msg.raw_stop_reason = Some(r.to_string());
            }
            self.stop = Some(match r {
                "length" | "model_length" => StopReason::Length,
                "tool_calls" => StopReason::ToolUse,
                "error" => StopReason::Error,
                "stop" => StopReason::Stop,
                // pi 0.87.1: an unknown finish reason is an error.
                other if self.own_client => {
                    self.stop_error = Some(format!("Provider stopped with: {other}"));
                    StopReason::Error
                }
                _ => StopReason::Stop,
            });
            if self.own_client && r == "error" {
                self.stop_error = Some("Provider stopped with: error".into());
            }
        }
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        match delta.get("content") {
            Some(Value::String(s)) => self.text(false, s, b, out),
            Some(Value::Array(items)) => {
                for item in items {
                    match item {
                        Value::String(s) => self.text(false, s, b, out),
                        _ => match item.get("type").and_then(Value::as_str) {
                            Some("thinking") => {
                                let text: String = item
                                    .get("thinking")
                                    .and_then(Value::as_array)
                                    .map(|parts| {
                                        parts
                                            .iter()
                                            .filter_map(|p| p.get("text").and_then(Value::as_str))
                                            .collect()
                                    })
                                    .unwrap_or_default();
                                if !text.is_empty() {
                                    self.text(true, &text, b, out);
                                }
                            }
                            Some("text") => {
                                let t = item.get("text").and_then(Value::as_str).unwrap_or("");
                                self.text(false, t, b, out);
                            }
                            _ => {}
                        },
                    }
                }
            }
            _ => {}
        }
        if let Some(Value::Array(calls)) = delta.get("tool_calls") {
            for call in calls {
                self.close_current(b, out);
                let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                let call_id = match call.get("id").and_then(Value::as_str) {
                    Some(id) if id != "null" && !id.is_empty() => id.to_string(),
                    _ => derive_tool_call_id(&format!("toolcall:{index}"), 0),
                };
                let key = if self.own_client {
                    // pi 0.87.1 keys a streamed call by its index (else its id).
                    match call.get("index").and_then(Value::as_u64) {
                        Some(i) => format!("#{i}"),
                        None => call_id.clone(),
                    }
                } else {
                    format!("{call_id}:{index}")
                };
                let f = call.get("function").unwrap_or(&Value::Null);
                let i = match self.tools.iter().find(|(k, _)| *k == key) {
                    Some((_, i)) => *i,
                    None => {
                        let name = f.get("name").and_then(Value::as_str).unwrap_or("");
                        let i = b.start_tool(&call_id, name, out);
                        self.tools.push((key, i));
                        i
                    }
                };
                let args = match f.get("arguments") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) if !v.is_null() => v.to_string(),
                    _ => "{}".to_string(),
                };
                b.delta(i, &args, out);
            }
        }
    }

    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        b.start(out);
        self.close_current(b, out);
        for (_, i) in std::mem::take(&mut self.tools) {
            b.end_block(i, out);
        }
        if self.own_client {
            match (self.stop, self.stop_error.take()) {
                (None, _) => {
                    b.fail(
                        "Mistral stream ended without a finish reason".into(),
                        false,
                        None,
                        out,
                    );
                    return;
                }
                (Some(StopReason::Error), Some(e)) => {
                    b.fail(e, false, None, out);
                    return;
                }
                _ => {}
            }
        }
        b.finish(self.stop.unwrap_or(StopReason::Stop), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_ids_are_nine_alphanumerics() {
        assert_eq!(derive_tool_call_id("D681PevKs", 0), "D681PevKs");
        assert_eq!(derive_tool_call_id("call_abc|fc_1", 0).len(), 9);
        assert_eq!(derive_tool_call_id("toolcall:0", 0), "toolcall0");
        assert_eq!(derive_tool_call_id("call_abc|fc_1", 0), "j6ob6a1or");
        let mut n = IdNormalizer::default();
        let a = n.normalize("toolu_01ABC");
        assert_eq!(a, n.normalize("toolu_01ABC"));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()) && a.len() == 9);
    }

    #[test]
    fn error_bodies_are_trimmed_and_capped() {
        let req = LlmRequest {
            model: crate::llm::faux::model(),
            api_key: None,
            system_prompt: String::new(),
            messages: Default::default(),
            tools: Vec::new(),
            thinking: ThinkingLevel::Off,
            session_id: None,
            max_tokens: None,
            timeouts: Default::default(),
            faux_script: None,
            sdk: SdkGeneration::Pi073,
            no_cache: false,
            tool_arguments_error: false,
            extra: Default::default(),
        };
        let m = API.http_error_message(&req, 400, &[], "  {\"message\":\"bad\"}\n");
        assert_eq!(m, "Mistral API error (400): {\"message\":\"bad\"}");
        let long = "é".repeat(4005);
        let m = API.http_error_message(&req, 500, &[], &long);
        assert!(
            m.ends_with("... [truncated 5 chars]"),
            "{}",
            &m[m.len() - 40..]
        );
        let h = vec![("content-type".to_string(), "text/plain".to_string())];
        assert_eq!(
            API.http_error_message(&req, 503, &h, ""),
            "Mistral API error (503): API error occurred: Status 503 Content-Type text/plain. Body: \"\""
        );
    }

    #[test]
    fn tool_result_texts() {
        assert_eq!(tool_result_text(" hi\n", false, false, false), "hi");
        assert_eq!(
            tool_result_text("", false, false, true),
            "[tool error] (no tool output)"
        );
        assert_eq!(
            tool_result_text("", true, true, false),
            "(see attached image)"
        );
        assert_eq!(
            tool_result_text("x", true, false, false),
            "x\n[tool image omitted: model does not support images]"
        );
    }
}
