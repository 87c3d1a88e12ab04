//! OpenAI Chat Completions (`openai-completions`, spec 8.2; also most OpenAI-compatible servers):
//! request body with the compat flags of models.json (auto-detected when unset), and the decoder
//! of the `data: {chunk}` / `data: [DONE]` stream.

use serde_json::{Map, Value, json};

use crate::llm::api::{self, Builder, Prepared, WireApi};
use crate::llm::sse::SseEvent;
use crate::llm::transform::{sanitize_id, transform_messages};
use crate::llm::{LlmRequest, Model, StreamEvent};
use crate::message::{Content, LlmMessage, StopReason, ThinkingLevel, Usage, UserContent};

/// Effective compatibility flags (models.json `compat`, else auto-detected).
#[derive(Clone, Debug, PartialEq)]
pub struct Compat {
    pub supports_store: bool,
    pub supports_developer_role: bool,
    pub supports_reasoning_effort: bool,
    pub supports_usage_in_streaming: bool,
    pub supports_strict_mode: bool,
    pub max_tokens_field: String,
    pub requires_tool_result_name: bool,
    pub requires_assistant_after_tool_result: bool,
    pub requires_thinking_as_text: bool,
    pub thinking_format: String,
    pub reasoning_effort_map: Map<String, Value>,
    pub supports_xhigh: bool,
}

pub fn compat(model: &Model) -> Compat {
    let url = model.base_url.as_str();
    let p = model.provider.as_str();
    let non_standard = ["cerebras", "xai", "opencode", "zai"].contains(&p)
        || [
            "cerebras.ai",
            "api.x.ai",
            "chutes.ai",
            "deepseek.com",
            "api.z.ai",
            "opencode.ai",
        ]
        .iter()
        .any(|h| url.contains(h));
    let is_zai = p == "zai" || url.contains("api.z.ai");
    let is_xai = p == "xai" || url.contains("api.x.ai");
    let mut effort_map = Map::new();
    if p == "groq" && model.id == "qwen/qwen3-32b" {
        for l in ["minimal", "low", "medium", "high", "xhigh"] {
            effort_map.insert(l.into(), json!("default"));
        }
    }
    let mut c = Compat {
        supports_store: !non_standard,
        supports_developer_role: !non_standard,
        supports_reasoning_effort: !(is_xai || is_zai),
        supports_usage_in_streaming: true,
        supports_strict_mode: true,
        max_tokens_field: if url.contains("chutes.ai") {
            "max_tokens"
        } else {
            "max_completion_tokens"
        }
        .into(),
        requires_tool_result_name: false,
        requires_assistant_after_tool_result: false,
        requires_thinking_as_text: false,
        thinking_format: if is_zai { "zai" } else { "openai" }.into(),
        reasoning_effort_map: effort_map,
        supports_xhigh: model.supports_xhigh(),
    };
    if let Some(m) = &model.compat {
        let flag = |k: &str, d: bool| m.get(k).and_then(Value::as_bool).unwrap_or(d);
        c.supports_store = flag("supportsStore", c.supports_store);
        c.supports_developer_role = flag("supportsDeveloperRole", c.supports_developer_role);
        c.supports_reasoning_effort = flag("supportsReasoningEffort", c.supports_reasoning_effort);
        c.supports_usage_in_streaming =
            flag("supportsUsageInStreaming", c.supports_usage_in_streaming);
        c.supports_strict_mode = flag("supportsStrictMode", c.supports_strict_mode);
        c.requires_tool_result_name = flag("requiresToolResultName", c.requires_tool_result_name);
        c.requires_assistant_after_tool_result = flag(
            "requiresAssistantAfterToolResult",
            c.requires_assistant_after_tool_result,
        );
        c.requires_thinking_as_text = flag("requiresThinkingAsText", c.requires_thinking_as_text);
        if let Some(s) = m.get("maxTokensField").and_then(Value::as_str) {
            c.max_tokens_field = s.into();
        }
        if let Some(s) = m.get("thinkingFormat").and_then(Value::as_str) {
            c.thinking_format = s.into();
        }
        if let Some(Value::Object(map)) = m.get("reasoningEffortMap") {
            c.reasoning_effort_map = map.clone();
        }
    }
    c
}
/// The `openai-completions` wire API.
pub struct OpenAiCompletions;

pub const API: OpenAiCompletions = OpenAiCompletions;

impl WireApi for OpenAiCompletions {
    fn name(&self) -> &'static str {
        "openai-completions"
    }

    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String> {
        Ok(prepare(req))
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn api::Decoder> {
        Box::new(Decoder::new(req))
    }

    fn http_error_message(&self, status: u16, _headers: &[(String, String)], body: &str) -> String {
        api::stainless_message(status, body, true)
    }

    fn http_error_message_for(
        &self,
        req: &LlmRequest,
        status: u16,
        headers: &[(String, String)],
        body: &str,
    ) -> String {
        // pi 0.87.1 words SDK errors with the response's error object.
        if req.compat.is_087() {
            return api::openai_error_087(status, body, None);
        }
        self.http_error_message(status, headers, body)
    }

    fn stainless(&self) -> bool {
        true
    }
}

pub fn prepare(req: &LlmRequest) -> Prepared {
    Prepared {
        url: format!(
            "{}/chat/completions",
            req.model.base_url.trim_end_matches('/')
        ),
        headers: {
            let mut h = sdk_headers(req);
            if req.model.provider == "github-copilot" {
                copilot_headers(req, &mut h);
            }
            h
        },
        body: api::json_body(&build_body(req)),
    }
}

/// The headers the OpenAI SDK sends (both OpenAI APIs), the bearer key, then the model's headers.
pub fn sdk_headers(req: &LlmRequest) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = vec![
        ("accept".into(), "application/json".into()),
        ("content-type".into(), "application/json".into()),
    ];
    if req.compat.is_087() {
        h.push(("user-agent".into(), crate::llm::http::pi_user_agent()));
        h.push(("x-stainless-timeout".into(), "300".into()));
        h.extend(crate::llm::http::stainless_platform_087(
            crate::llm::http::OPENAI_SDK_087,
        ));
    } else {
        h.push(("user-agent".into(), "OpenAI/JS 6.26.0".into()));
    }
    h.push(("x-stainless-lang".into(), "js".into()));
    if let Some(k) = &req.api_key {
        h.push(("authorization".into(), format!("Bearer {k}")));
    }
    crate::llm::http::merge_model_headers(&mut h, &req.model);
    h
}

/// GitHub Copilot's per-request headers (pi's `buildCopilotDynamicHeaders`): who started the
/// turn, the intent, and whether images are sent. They replace headers of the same name.
pub fn copilot_headers(req: &LlmRequest, h: &mut Vec<(String, String)>) {
    // The last message of what is sent (later system messages are not, unless the model takes
    // them in place).
    let keep_system = crate::llm::transcript::mid_convo(req);
    let last = req
        .messages
        .iter()
        .rev()
        .find(|m| keep_system || !matches!(m, LlmMessage::System(_)));
    let initiator = match last {
        Some(m) if !matches!(m, LlmMessage::User(_)) => "agent",
        _ => "user",
    };
    let vision = req.messages.iter().any(|m| match m {
        LlmMessage::User(u) => {
            matches!(&u.content, UserContent::Blocks(b) if b.iter().any(|c| matches!(c, Content::Image(_))))
        }
        LlmMessage::ToolResult(r) => r.content.iter().any(|c| matches!(c, Content::Image(_))),
        LlmMessage::Assistant(_) | LlmMessage::System(_) => false,
    });
    let mut put = |k: &str, v: &str| {
        h.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
        h.push((k.to_string(), v.to_string()));
    };
    put("X-Initiator", initiator);
    put("Openai-Intent", "conversation-edits");
    if vision {
        put("Copilot-Vision-Request", "true");
    }
}

/// pi 0.87.1's tool-call ids for Chat Completions: a Responses `call|item` id keeps both parts
/// (`call_item`, or a hashed form past 40 characters), OpenAI's own ids are cut to 40, other ids
/// stay as they are.
pub fn normalize_id_087(id: &str, provider: &str) -> String {
    if let Some((call, item)) = id.split_once('|') {
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        let call_id = clean(call);
        let item_id = clean(item);
        let combined = if item_id.is_empty() {
            call_id.clone()
        } else {
            format!("{call_id}_{item_id}")
        };
        if combined.encode_utf16().count() <= 40 {
            return combined;
        }
        let hash: String = crate::llm::transform::short_hash(id)
            .chars()
            .take(8)
            .collect();
        let keep = 40usize.saturating_sub(hash.len() + 1).max(1);
        let prefix: String = call_id.chars().take(keep).collect();
        return format!("{prefix}_{hash}");
    }
    if provider == "openai" && id.encode_utf16().count() > 40 {
        return id.chars().take(40).collect();
    }
    id.to_string()
}

pub fn normalize_id(id: &str) -> String {
    let head = id.split('|').next().unwrap_or(id);
    sanitize_id(head, 40)
}

pub fn build_body(req: &LlmRequest) -> Value {
    let model = &req.model;
    let c = compat(model);
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    let messages = convert_messages(req, &c);
    let history_has_tools = req.messages.iter().any(|m| match m {
        LlmMessage::ToolResult(_) => true,
        LlmMessage::Assistant(a) => a.tool_calls().next().is_some(),
        LlmMessage::User(_) | LlmMessage::System(_) => false,
    });
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(true));
    if c.supports_usage_in_streaming {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if c.supports_store {
        body.insert("store".into(), json!(false));
    }
    body.insert(
        c.max_tokens_field.clone(),
        json!(api::default_max_tokens(req)),
    );
    let (request_tools, _) = request_tools(req);
    if !request_tools.is_empty() {
        let tools = convert_tools(req, &request_tools);
        body.insert("tools".into(), Value::Array(tools));
    } else if history_has_tools {
        body.insert("tools".into(), json!([]));
    }
    let on = req.thinking != ThinkingLevel::Off;
    match c.thinking_format.as_str() {
        "zai" | "qwen" => {
            body.insert("enable_thinking".into(), json!(on));
        }
        "qwen-chat-template" => {
            body.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": on}),
            );
        }
        _ => {
            if on && model.reasoning && c.supports_reasoning_effort {
                let level = if req.thinking == ThinkingLevel::Xhigh && !c.supports_xhigh {
                    ThinkingLevel::High
                } else {
                    req.thinking
                };
                let effort = c
                    .reasoning_effort_map
                    .get(level.as_str())
                    .cloned()
                    .unwrap_or_else(|| json!(level.as_str()));
                body.insert("reasoning_effort".into(), effort);
            }
        }
    }
    Value::Object(body)
}

/// The request's tool declarations (strict as pi 0.87.1 sends them under 0.87).
fn convert_tools(req: &LlmRequest, list: &[crate::llm::ToolSchema]) -> Vec<Value> {
    let model = &req.model;
    let c = compat(model);
    list.iter()
        .map(|t| {
            let mut f = Map::new();
            f.insert("name".into(), json!(t.name));
            f.insert("description".into(), json!(t.description));
            if req.compat.is_087() {
                // pi 0.87.1 assumes no strict mode unless the model's compat says so; where
                // it is supported, a tool asking for constrained sampling goes strict.
                let supported = crate::llm::strict::compat_flag(model, "supportsStrictMode", false);
                let strict = crate::llm::strict::resolve_preferred(t, supported);
                f.insert(
                    "parameters".into(),
                    crate::llm::strict::parameters(t, strict),
                );
                if supported {
                    f.insert("strict".into(), json!(strict.unwrap_or(false)));
                }
            } else {
                f.insert("parameters".into(), t.parameters.clone());
                if c.supports_strict_mode {
                    f.insert("strict".into(), json!(false));
                }
            }
            json!({"type": "function", "function": f})
        })
        .collect()
}

/// The tools the request lists and whether tools added later are declared in place (pi
/// 0.87.1's `resolveTranscriptTools`, with `compat.supportsMidConvoToolAdditions` for a model
/// that takes system messages in place).
fn request_tools(req: &LlmRequest) -> (Vec<crate::llm::ToolSchema>, bool) {
    if !req.compat.is_087() {
        return (req.tools.clone(), false);
    }
    let mid = crate::llm::transcript::mid_convo(req);
    let additions =
        mid && crate::llm::strict::compat_flag(&req.model, "supportsMidConvoToolAdditions", false);
    crate::llm::transcript::request_tools(req, additions)
}

fn convert_messages(req: &LlmRequest, c: &Compat) -> Vec<Value> {
    let model = &req.model;
    let images_ok = model.input.iter().any(|i| i == "image");
    let mut out = Vec::new();
    let role = if model.reasoning && c.supports_developer_role {
        "developer"
    } else {
        "system"
    };
    // pi 0.87.1 sends a model that takes system messages in place its first one as the prompt
    // and the later ones where they are.
    let keep_system = crate::llm::transcript::mid_convo(req);
    let prompt = if keep_system {
        crate::llm::transcript::initial(&req.messages)
            .map(crate::llm::transcript::system_text)
            .unwrap_or_default()
    } else {
        req.system_prompt.clone()
    };
    if !prompt.is_empty() {
        out.push(json!({"role": role, "content": prompt}));
    }
    let anchored = request_tools(req).1;
    let provider = model.provider.clone();
    let v087 = req.compat.is_087();
    let normalize = move |id: &str| {
        if v087 {
            normalize_id_087(id, &provider)
        } else {
            normalize_id(id)
        }
    };
    let mut msgs = transform_messages(&req.messages, model, Some(&normalize));
    if !keep_system {
        msgs = crate::llm::transcript::collapsed(msgs);
    }
    let mut last_was_tool = false;
    let mut i = 0;
    while i < msgs.len() {
        match &msgs[i] {
            LlmMessage::System(s) => {
                if i > 0 {
                    let added: Vec<crate::llm::ToolSchema> = s
                        .tools_added
                        .iter()
                        .flatten()
                        .filter(|_| anchored)
                        .map(crate::llm::transcript::schema)
                        .collect();
                    if !added.is_empty() {
                        out.push(json!({"role": "system", "tools": convert_tools(req, &added)}));
                    }
                    let text = crate::llm::transcript::render_update(s);
                    if !text.is_empty() {
                        out.push(json!({"role": role, "content": text}));
                    }
                }
                last_was_tool = false;
            }
            LlmMessage::User(u) => {
                if last_was_tool && c.requires_assistant_after_tool_result {
                    out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
                }
                match &u.content {
                    UserContent::Text(s) => out.push(json!({"role": "user", "content": s})),
                    UserContent::Blocks(blocks) => {
                        let parts: Vec<Value> = blocks
                            .iter()
                            .filter_map(|b| match b {
                                Content::Text(t) => Some(json!({"type": "text", "text": t.text})),
                                Content::Image(img) if images_ok => Some(json!({
                                    "type": "image_url",
                                    "image_url": {"url": format!("data:{};base64,{}", img.mime_type, img.data)},
                                })),
                                _ => None,
                            })
                            .collect();
                        if !parts.is_empty() {
                            out.push(json!({"role": "user", "content": parts}));
                        }
                    }
                }
                last_was_tool = false;
            }
            LlmMessage::Assistant(a) => {
                let mut m = Map::new();
                m.insert("role".into(), json!("assistant"));
                let mut text: String = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Content::Text(t) if !t.text.trim().is_empty() => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let thinking: Vec<(&str, Option<&str>)> = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Content::Thinking(t) if !t.thinking.trim().is_empty() => {
                            Some((t.thinking.as_str(), t.thinking_signature.as_deref()))
                        }
                        _ => None,
                    })
                    .collect();
                let mut reasoning_field = None;
                if !thinking.is_empty() {
                    let joined = thinking
                        .iter()
                        .map(|(t, _)| *t)
                        .collect::<Vec<_>>()
                        .join("\n");
                    if c.requires_thinking_as_text {
                        text = format!("{joined}{text}");
                    } else if let Some(field) = thinking[0].1.filter(|f| {
                        ["reasoning_content", "reasoning", "reasoning_text"].contains(f)
                    }) {
                        reasoning_field = Some((field.to_string(), joined));
                    }
                }
                let tool_calls: Vec<Value> = a
                    .tool_calls()
                    .map(|tc| {
                        json!({"id": tc.id, "type": "function",
                               "function": {"name": tc.name, "arguments": tc.arguments.to_string()}})
                    })
                    .collect();
                if text.is_empty() && tool_calls.is_empty() && reasoning_field.is_none() {
                    i += 1;
                    continue;
                }
                if text.is_empty() {
                    m.insert(
                        "content".into(),
                        if c.requires_assistant_after_tool_result {
                            json!("")
                        } else {
                            Value::Null
                        },
                    );
                } else {
                    m.insert("content".into(), json!(text));
                }
                if let Some((field, joined)) = reasoning_field {
                    m.insert(field, json!(joined));
                }
                if !tool_calls.is_empty() {
                    m.insert("tool_calls".into(), Value::Array(tool_calls));
                }
                out.push(Value::Object(m));
                last_was_tool = false;
            }
            LlmMessage::ToolResult(r) => {
                let text: Vec<&str> = r
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Content::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let text = if text.is_empty() {
                    "(see attached image)".to_string()
                } else {
                    text.join("\n")
                };
                let mut m = Map::new();
                m.insert("role".into(), json!("tool"));
                m.insert("content".into(), json!(text));
                m.insert("tool_call_id".into(), json!(r.tool_call_id));
                if c.requires_tool_result_name {
                    m.insert("name".into(), json!(r.tool_name));
                }
                out.push(Value::Object(m));
                let images: Vec<Value> = r
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Content::Image(img) if images_ok => Some(json!({
                            "type": "image_url",
                            "image_url": {"url": format!("data:{};base64,{}", img.mime_type, img.data)},
                        })),
                        _ => None,
                    })
                    .collect();
                if !images.is_empty() {
                    let mut parts = vec![
                        json!({"type": "text", "text": "Attached image(s) from tool result:"}),
                    ];
                    parts.extend(images);
                    out.push(json!({"role": "user", "content": parts}));
                }
                last_was_tool = true;
            }
        }
        i += 1;
    }
    out
}

// ------------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
    Tool,
}

#[derive(Default)]
pub struct Decoder {
    current: Option<(Kind, usize)>,
    current_tool_id: Option<String>,
    finish: Option<StopReason>,
}

impl Decoder {
    pub fn new(_req: &LlmRequest) -> Decoder {
        Decoder::default()
    }

    fn switch(&mut self, kind: Kind, b: &mut Builder, out: &mut Vec<StreamEvent>) -> usize {
        if let Some((k, i)) = self.current {
            if k == kind {
                return i;
            }
            b.end_block(i, out);
        }
        let i = match kind {
            Kind::Text => b.start_text(out),
            Kind::Thinking => b.start_thinking(out),
            Kind::Tool => unreachable_tool(b, out),
        };
        self.current = Some((kind, i));
        i
    }

    fn close(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if let Some((_, i)) = self.current.take() {
            b.end_block(i, out);
        }
    }

    fn complete(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        self.close(b, out);
        b.start(out);
        b.finish(self.finish.unwrap_or(StopReason::Stop), out);
    }
}

/// Tool blocks are opened by `tool_delta` with their id and name; never through `switch`.
fn unreachable_tool(b: &mut Builder, out: &mut Vec<StreamEvent>) -> usize {
    b.start_tool("", "", out)
}

fn map_finish(r: &str) -> Result<StopReason, String> {
    match r {
        "stop" | "end" => Ok(StopReason::Stop),
        "length" => Ok(StopReason::Length),
        "tool_calls" | "function_call" => Ok(StopReason::ToolUse),
        "content_filter" => Ok(StopReason::Error),
        other => Err(format!("Unhandled stop reason: {other}")),
    }
}

impl api::Decoder for Decoder {
    fn event(&mut self, ev: &SseEvent, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if ev.data == "[DONE]" {
            self.complete(b, out);
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
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let msg = match err.get("message") {
                Some(Value::String(m)) => m.clone(),
                _ => err.to_string(),
            };
            b.fail(msg, false, None, out);
            return;
        }
        if b.msg.response_id.is_none() {
            b.msg.response_id = v.get("id").and_then(Value::as_str).map(str::to_string);
        }
        if b.msg.response_model.is_none() {
            b.msg.response_model = v
                .get("model")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty() && *m != b.msg.model)
                .map(str::to_string);
        }
        b.start(out);
        let choice = v.get("choices").and_then(|c| c.get(0));
        let usage = v
            .get("usage")
            .filter(|u| u.is_object())
            .or_else(|| choice.and_then(|c| c.get("usage")));
        if let Some(u) = usage.filter(|u| u.is_object()) {
            let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
            let cached = n("/prompt_tokens_details/cached_tokens");
            let input = n("/prompt_tokens").saturating_sub(cached);
            let reasoning = n("/completion_tokens_details/reasoning_tokens");
            // pi 0.87.1: completion_tokens already counts reasoning, which is reported apart.
            let v087 = b.compat.is_087();
            let output = n("/completion_tokens") + if v087 { 0 } else { reasoning };
            let usage = Usage {
                input,
                output,
                cache_read: cached,
                cache_write: 0,
                total_tokens: input + output + cached,
                reasoning: v087.then_some(reasoning),
                ..Default::default()
            };
            b.set_usage(usage, out);
        }
        let Some(choice) = choice else { return };
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            if b.compat.is_087() {
                b.msg.raw_stop_reason = Some(r.to_string());
            }
            match map_finish(r) {
                Ok(s) => self.finish = Some(s),
                Err(e) => {
                    b.fail(e, false, None, out);
                    return;
                }
            }
        }
        let Some(delta) = choice.get("delta") else {
            return;
        };
        if let Some(t) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            let i = self.switch(Kind::Text, b, out);
            b.delta(i, t, out);
        }
        for field in ["reasoning_content", "reasoning", "reasoning_text"] {
            if let Some(t) = delta
                .get(field)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                let i = self.switch(Kind::Thinking, b, out);
                if let Some(Content::Thinking(th)) = b.block_mut(i) {
                    th.thinking_signature
                        .get_or_insert_with(|| field.to_string());
                }
                b.delta(i, t, out);
                break;
            }
        }
        if let Some(Value::Array(calls)) = delta.get("tool_calls") {
            for call in calls {
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                let is_new = match (self.current, id) {
                    (Some((Kind::Tool, _)), Some(id)) => {
                        self.current_tool_id.as_deref() != Some(id)
                    }
                    (Some((Kind::Tool, _)), None) => false,
                    _ => true,
                };
                if is_new {
                    self.close(b, out);
                    let name = call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let i = b.start_tool(id.unwrap_or(""), name, out);
                    self.current = Some((Kind::Tool, i));
                    self.current_tool_id = id.map(str::to_string);
                }
                if let Some((Kind::Tool, i)) = self.current {
                    // An empty fragment is still an event (the reference emits `delta: ""`).
                    if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str)
                    {
                        b.delta(i, args, out);
                    }
                }
            }
        }
    }

    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if self.finish.is_some() {
            self.complete(b, out);
        } else {
            b.fail(api::TERMINATED.into(), false, None, out);
        }
    }
}
