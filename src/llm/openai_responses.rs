//! OpenAI Responses API (`openai-responses`, spec 8.3): request body (`input` items) and the
//! decoder of the typed `response.*` event stream.

use serde_json::{Map, Value, json};

use crate::llm::sse::SseEvent;
use crate::llm::stream::{self, Builder, Prepared};
use crate::llm::transform::{is_same_model, transform_messages};
use crate::llm::{LlmRequest, StreamEvent};
use crate::message::{Content, LlmMessage, StopReason, ThinkingLevel, Usage, UserContent};

pub fn prepare(req: &LlmRequest) -> Prepared {
    Prepared {
        url: format!("{}/responses", req.model.base_url.trim_end_matches('/')),
        headers: crate::llm::openai_completions::sdk_headers(req),
        body: stream::json_body(&build_body(req)),
    }
}

pub fn build_body(req: &LlmRequest) -> Value {
    let model = &req.model;
    let mut input = Vec::new();
    if !req.system_prompt.is_empty() {
        let role = if model.reasoning {
            "developer"
        } else {
            "system"
        };
        input.push(json!({"role": role, "content": req.system_prompt}));
    }
    let msgs = transform_messages(&req.messages, model, None);
    for (mi, m) in msgs.iter().enumerate() {
        match m {
            LlmMessage::User(u) => {
                let parts: Vec<Value> = match &u.content {
                    UserContent::Text(s) => vec![json!({"type": "input_text", "text": s})],
                    UserContent::Blocks(b) => b
                        .iter()
                        .filter_map(|c| match c {
                            Content::Text(t) => Some(json!({"type": "input_text", "text": t.text})),
                            Content::Image(i) => {
                                Some(json!({"type": "input_image", "detail": "auto",
                                "image_url": format!("data:{};base64,{}", i.mime_type, i.data)}))
                            }
                            _ => None,
                        })
                        .collect(),
                };
                if !parts.is_empty() {
                    input.push(json!({"role": "user", "content": parts}));
                }
            }
            LlmMessage::Assistant(a) => {
                let same = is_same_model(a, model);
                for (bi, c) in a.content.iter().enumerate() {
                    match c {
                        Content::Thinking(t) => {
                            if let Some(item) = t
                                .thinking_signature
                                .as_deref()
                                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                            {
                                input.push(item);
                            }
                        }
                        Content::Text(t) => {
                            let id = t
                                .text_signature
                                .as_deref()
                                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                                .and_then(|v| {
                                    v.get("id").and_then(Value::as_str).map(str::to_string)
                                })
                                .unwrap_or_else(|| format!("msg_{mi}_{bi}"));
                            input.push(json!({"type": "message", "role": "assistant",
                                "content": [{"type": "output_text", "text": t.text, "annotations": []}],
                                "status": "completed", "id": id}));
                        }
                        Content::ToolCall(tc) => {
                            let mut parts = tc.id.splitn(2, '|');
                            let call_id = parts.next().unwrap_or("");
                            let item_id = parts.next();
                            let mut item = Map::new();
                            item.insert("type".into(), json!("function_call"));
                            if let (Some(id), true) = (item_id, same) {
                                item.insert("id".into(), json!(id));
                            }
                            item.insert("call_id".into(), json!(call_id));
                            item.insert("name".into(), json!(tc.name));
                            item.insert("arguments".into(), json!(tc.arguments.to_string()));
                            input.push(Value::Object(item));
                        }
                        _ => {}
                    }
                }
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
                let call_id = r.tool_call_id.split('|').next().unwrap_or("");
                input.push(json!({"type": "function_call_output", "call_id": call_id, "output": text.join("\n")}));
            }
        }
    }
    let reasoning_on = model.reasoning && req.thinking != ThinkingLevel::Off;
    if model.reasoning && !reasoning_on && model.name.starts_with("gpt-5") {
        input.push(json!({"role": "developer", "content": [{"type": "input_text", "text": "# Juice: 0 !important"}]}));
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("input".into(), Value::Array(input));
    body.insert("stream".into(), json!(true));
    if let Some(s) = &req.session_id {
        body.insert("prompt_cache_key".into(), json!(s));
    }
    body.insert("store".into(), json!(false));
    body.insert(
        "max_output_tokens".into(),
        json!(stream::default_max_tokens(req)),
    );
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                            "parameters": t.parameters, "strict": false})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if reasoning_on {
        let level = if req.thinking == ThinkingLevel::Xhigh && !model.supports_xhigh() {
            ThinkingLevel::High
        } else {
            req.thinking
        };
        body.insert(
            "reasoning".into(),
            json!({"effort": level.as_str(), "summary": "auto"}),
        );
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    Value::Object(body)
}

#[derive(Default)]
pub struct Decoder {
    /// Output item id → our content index.
    items: Vec<(String, usize)>,
    current: Option<usize>,
    /// For the service-tier price multiplier.
    model_id: String,
}

impl Decoder {
    pub fn new(req: &LlmRequest) -> Decoder {
        Decoder {
            model_id: req.model.id.clone(),
            ..Decoder::default()
        }
    }
    fn find(&self, id: &str) -> Option<usize> {
        self.items
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, o)| *o)
            .or(self.current)
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
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        let s = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match kind {
            "response.created" => {
                b.msg.response_id = v
                    .pointer("/response/id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                b.start(out);
            }
            "response.output_item.added" => {
                let item = &v["item"];
                let id = s("/item/id");
                let i = match item.get("type").and_then(Value::as_str) {
                    Some("reasoning") => b.start_thinking(out),
                    Some("message") => b.start_text(out),
                    Some("function_call") => {
                        let call = format!("{}|{}", s("/item/call_id"), id);
                        b.start_tool(&call, &s("/item/name"), out)
                    }
                    _ => return,
                };
                self.items.push((id, i));
                self.current = Some(i);
            }
            "response.reasoning_summary_text.delta"
            | "response.output_text.delta"
            | "response.refusal.delta"
            | "response.function_call_arguments.delta" => {
                if let Some(i) = self.find(&s("/item_id")) {
                    b.delta(i, &s("/delta"), out);
                }
            }
            "response.function_call_arguments.done" => {
                // The whole argument text: emit what the deltas did not deliver.
                if let Some(i) = self.find(&s("/item_id")) {
                    let full = s("/arguments");
                    let tail = full.strip_prefix(b.raw_args(i)).map(str::to_string);
                    if let Some(tail) = tail.filter(|t| !t.is_empty()) {
                        b.delta(i, &tail, out);
                    }
                }
            }
            "response.reasoning_summary_part.done" => {
                if let Some(i) = self.find(&s("/item_id")) {
                    b.delta(i, "\n\n", out);
                }
            }
            "response.output_item.done" => {
                let item = &v["item"];
                let Some(i) = self.find(&s("/item/id")) else {
                    return;
                };
                let no_args = b.raw_args(i).is_empty();
                match b.block_mut(i) {
                    Some(Content::Thinking(t)) => {
                        if let Some(text) = finished_reasoning_text(item) {
                            t.thinking = text;
                        }
                        t.thinking_signature = Some(item.to_string());
                    }
                    Some(Content::Text(t)) => {
                        if let Some(text) = finished_message_text(item) {
                            t.text = text;
                        }
                        t.text_signature = Some(text_signature(item));
                    }
                    Some(Content::ToolCall(_)) if no_args => {
                        let args = s("/item/arguments");
                        b.delta(i, &args, out);
                    }
                    _ => {}
                }
                b.end_block(i, out);
            }
            "response.completed" | "response.incomplete" => {
                let r = &v["response"];
                let n = |p: &str| r.pointer(p).and_then(Value::as_u64).unwrap_or(0);
                let cached = n("/usage/input_tokens_details/cached_tokens");
                let v087 = b.compat.is_087();
                let usage = Usage {
                    input: n("/usage/input_tokens").saturating_sub(cached),
                    output: n("/usage/output_tokens"),
                    cache_read: cached,
                    cache_write: 0,
                    total_tokens: n("/usage/total_tokens"),
                    reasoning: v087.then(|| n("/usage/output_tokens_details/reasoning_tokens")),
                    ..Default::default()
                };
                if let (true, Some(status)) = (v087, r.get("status").and_then(Value::as_str)) {
                    b.msg.raw_stop_reason = Some(
                        match r
                            .pointer("/incomplete_details/reason")
                            .and_then(Value::as_str)
                        {
                            Some(why) => format!("{status}.{why}"),
                            None => status.to_string(),
                        },
                    );
                }
                let mut events = Vec::new();
                b.set_usage(usage, &mut events);
                let tier = r.get("service_tier").and_then(Value::as_str);
                let factor = service_tier_factor(&self.model_id, tier);
                if factor != 1.0 {
                    scale_cost(&mut b.msg.usage.cost, factor);
                    for ev in &mut events {
                        if let StreamEvent::Meta { usage, .. } = ev {
                            *usage = b.msg.usage;
                        }
                    }
                }
                out.append(&mut events);
                let stop = match r.get("status").and_then(Value::as_str) {
                    Some("incomplete") => StopReason::Length,
                    Some("failed") | Some("cancelled") => StopReason::Error,
                    _ if b.msg.tool_calls().next().is_some() => StopReason::ToolUse,
                    _ => StopReason::Stop,
                };
                b.start(out);
                b.finish(stop, out);
            }
            "error" => {
                let msg = format!("Error Code {}: {}", s("/code"), s("/message"));
                b.fail(msg, false, None, out);
            }
            "response.failed" => {
                let msg = match v.pointer("/response/error") {
                    Some(e) if !e.is_null() => format!(
                        "{}: {}",
                        s("/response/error/code"),
                        s("/response/error/message")
                    ),
                    _ => format!("incomplete: {}", s("/response/incomplete_details/reason")),
                };
                b.fail(msg, false, None, out);
            }
            _ => {}
        }
    }

    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        b.fail(stream::TERMINATED.into(), false, None, out);
    }
}

/// The final thinking text of a finished reasoning item, as the reference takes it: its summary
/// parts joined by a blank line, else its content parts; `None` keeps the streamed text.
fn finished_reasoning_text(item: &Value) -> Option<String> {
    let joined = |key: &str| {
        let parts = item.get(key)?.as_array()?;
        let texts: Vec<&str> = parts
            .iter()
            .map(|p| p.get("text").and_then(Value::as_str).unwrap_or(""))
            .collect();
        Some(texts.join("\n\n")).filter(|t| !t.is_empty())
    };
    joined("summary").or_else(|| joined("content"))
}

/// The final text of a finished message item: its `output_text` and `refusal` parts
/// concatenated. `None` (keep the streamed text) when the item carries no content array.
fn finished_message_text(item: &Value) -> Option<String> {
    let parts = item.get("content")?.as_array()?;
    Some(
        parts
            .iter()
            .filter_map(|p| match p.get("type").and_then(Value::as_str) {
                Some("output_text") => p.get("text").and_then(Value::as_str),
                _ => p.get("refusal").and_then(Value::as_str),
            })
            .collect(),
    )
}

/// `{"v":1,"id":…,"phase"?}`, the reference's text signature for a message item.
fn text_signature(item: &Value) -> String {
    let mut sig = Map::new();
    sig.insert("v".into(), json!(1));
    sig.insert("id".into(), item.get("id").cloned().unwrap_or(Value::Null));
    if let Some(phase) = item
        .get("phase")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
    {
        sig.insert("phase".into(), json!(phase));
    }
    Value::Object(sig).to_string()
}

/// The reference's price multiplier for the response's service tier.
fn service_tier_factor(model_id: &str, tier: Option<&str>) -> f64 {
    match tier {
        Some("flex") => 0.5,
        Some("priority") if model_id == "gpt-5.5" => 2.5,
        Some("priority") => 2.0,
        _ => 1.0,
    }
}

fn scale_cost(cost: &mut crate::message::Cost, factor: f64) {
    cost.input *= factor;
    cost.output *= factor;
    cost.cache_read *= factor;
    cost.cache_write *= factor;
    cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write;
}
