//! Google Generative AI (`google-generative-ai`, spec 8.4): `streamGenerateContent?alt=sse`
//! request body and decoder. Function calls arrive whole (start, one delta, end).

use serde_json::{Map, Value, json};

use crate::llm::sse::SseEvent;
use crate::llm::stream::{self, Builder, Prepared};
use crate::llm::transform::{is_same_model, transform_messages};
use crate::llm::{LlmRequest, StreamEvent};
use crate::message::{Content, LlmMessage, StopReason, ThinkingLevel, Usage, UserContent, now_ms};

pub fn prepare(req: &LlmRequest) -> Prepared {
    let base = req.model.base_url.trim_end_matches('/');
    let mut h: Vec<(String, String)> = vec![("content-type".into(), "application/json".into())];
    if let Some(k) = &req.api_key {
        h.push(("x-goog-api-key".into(), k.clone()));
    }
    crate::llm::http::merge_model_headers(&mut h, &req.model);
    Prepared {
        url: format!(
            "{base}/models/{}:streamGenerateContent?alt=sse",
            req.model.id
        ),
        headers: h,
        body: stream::json_body(&build_body(req)),
    }
}

fn thinking_config(req: &LlmRequest) -> Option<Value> {
    let m = &req.model;
    if !m.reasoning || req.thinking == ThinkingLevel::Off {
        return None;
    }
    let l = req.thinking;
    let id = m.id.as_str();
    if id.contains("gemini-3") && id.contains("pro") {
        let level = if matches!(l, ThinkingLevel::Minimal | ThinkingLevel::Low) {
            "LOW"
        } else {
            "HIGH"
        };
        return Some(json!({"includeThoughts": true, "thinkingLevel": level}));
    }
    if id.contains("gemini-3") && id.contains("flash") {
        let level = match l {
            ThinkingLevel::Minimal => "MINIMAL",
            ThinkingLevel::Low => "LOW",
            ThinkingLevel::Medium => "MEDIUM",
            _ => "HIGH",
        };
        return Some(json!({"includeThoughts": true, "thinkingLevel": level}));
    }
    let budgets: [i64; 4] = if id.contains("2.5-pro") {
        [128, 2048, 8192, 32768]
    } else if id.contains("2.5-flash") {
        [128, 2048, 8192, 24576]
    } else {
        [-1, -1, -1, -1]
    };
    let b = match l {
        ThinkingLevel::Minimal => budgets[0],
        ThinkingLevel::Low => budgets[1],
        ThinkingLevel::Medium => budgets[2],
        _ => budgets[3],
    };
    Some(json!({"includeThoughts": true, "thinkingBudget": b}))
}

pub fn build_body(req: &LlmRequest) -> Value {
    let model = &req.model;
    let msgs = transform_messages(&req.messages, model, None);
    let mut contents: Vec<Value> = Vec::new();
    for m in &msgs {
        match m {
            LlmMessage::User(u) => {
                let parts: Vec<Value> = match &u.content {
                    UserContent::Text(s) => vec![json!({"text": s})],
                    UserContent::Blocks(b) => b
                        .iter()
                        .filter_map(|c| match c {
                            Content::Text(t) => Some(json!({"text": t.text})),
                            Content::Image(i) => Some(
                                json!({"inlineData": {"mimeType": i.mime_type, "data": i.data}}),
                            ),
                            _ => None,
                        })
                        .collect(),
                };
                if !parts.is_empty() {
                    contents.push(json!({"role": "user", "parts": parts}));
                }
            }
            LlmMessage::Assistant(a) => {
                let same = is_same_model(a, model);
                let mut parts = Vec::new();
                for c in &a.content {
                    match c {
                        Content::Text(t) if !t.text.trim().is_empty() => {
                            parts.push(json!({"text": t.text}))
                        }
                        Content::Thinking(t) if same && !t.thinking.trim().is_empty() => {
                            let mut p = Map::new();
                            p.insert("thought".into(), json!(true));
                            p.insert("text".into(), json!(t.thinking));
                            if let Some(s) = &t.thinking_signature {
                                p.insert("thoughtSignature".into(), json!(s));
                            }
                            parts.push(Value::Object(p));
                        }
                        Content::ToolCall(tc) => {
                            let mut p = Map::new();
                            p.insert(
                                "functionCall".into(),
                                json!({"name": tc.name, "args": tc.arguments}),
                            );
                            if let Some(s) = &tc.thought_signature {
                                p.insert("thoughtSignature".into(), json!(s));
                            }
                            parts.push(Value::Object(p));
                        }
                        _ => {}
                    }
                }
                if !parts.is_empty() {
                    contents.push(json!({"role": "model", "parts": parts}));
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
                let key = if r.is_error { "error" } else { "output" };
                let part = json!({"functionResponse": {"name": r.tool_name, "response": {key: text.join("\n")}}});
                // Consecutive tool results share one user turn.
                let merged = contents.last_mut().is_some_and(|last| {
                    let is_fr = last["role"] == "user"
                        && last["parts"]
                            .as_array()
                            .is_some_and(|p| p.iter().all(|x| x.get("functionResponse").is_some()));
                    if is_fr {
                        if let Some(p) = last["parts"].as_array_mut() {
                            p.push(part.clone());
                        }
                    }
                    is_fr
                });
                if !merged {
                    contents.push(json!({"role": "user", "parts": [part]}));
                }
            }
        }
    }
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents));
    if !req.system_prompt.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": req.system_prompt}]}),
        );
    }
    if !req.tools.is_empty() {
        let decls: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}))
            .collect();
        body.insert("tools".into(), json!([{"functionDeclarations": decls}]));
    }
    let mut generation = Map::new();
    generation.insert(
        "maxOutputTokens".into(),
        json!(stream::default_max_tokens(req)),
    );
    if let Some(t) = thinking_config(req) {
        generation.insert("thinkingConfig".into(), t);
    }
    body.insert("generationConfig".into(), Value::Object(generation));
    Value::Object(body)
}

#[derive(Default)]
pub struct Decoder {
    current: Option<(bool, usize)>,
    finish: Option<StopReason>,
    counter: u64,
}

impl Decoder {
    pub fn new(_req: &LlmRequest) -> Decoder {
        Decoder::default()
    }
    fn close(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if let Some((_, i)) = self.current.take() {
            b.end_block(i, out);
        }
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
        if let Some(e) = v.get("error") {
            let msg = e
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string());
            b.fail(msg, false, None, out);
            return;
        }
        if b.msg.response_id.is_none() {
            b.msg.response_id = v
                .get("responseId")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        b.start(out);
        let cand = v.pointer("/candidates/0");
        if let Some(Value::Array(parts)) = cand.and_then(|c| c.pointer("/content/parts")) {
            for p in parts {
                if let Some(text) = p.get("text").and_then(Value::as_str) {
                    let thought = p.get("thought").and_then(Value::as_bool).unwrap_or(false);
                    let i = match self.current {
                        Some((t, i)) if t == thought => i,
                        _ => {
                            self.close(b, out);
                            let i = if thought {
                                b.start_thinking(out)
                            } else {
                                b.start_text(out)
                            };
                            self.current = Some((thought, i));
                            i
                        }
                    };
                    b.delta(i, text, out);
                    if let Some(sig) = p.get("thoughtSignature").and_then(Value::as_str) {
                        match b.block_mut(i) {
                            Some(Content::Thinking(t)) => t.thinking_signature = Some(sig.into()),
                            Some(Content::Text(t)) => t.text_signature = Some(sig.into()),
                            _ => {}
                        }
                    }
                }
                if let Some(fc) = p.get("functionCall") {
                    self.close(b, out);
                    let name = fc.get("name").and_then(Value::as_str).unwrap_or("");
                    self.counter += 1;
                    let id = fc
                        .get("id")
                        .and_then(Value::as_str)
                        .filter(|id| !id.is_empty() && !b.msg.tool_calls().any(|t| t.id == *id))
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("{name}_{}_{}", now_ms(), self.counter));
                    let i = b.start_tool(&id, name, out);
                    let args = fc.get("args").cloned().unwrap_or_else(|| json!({}));
                    b.delta(i, &args.to_string(), out);
                    if let Some(Content::ToolCall(tc)) = b.block_mut(i) {
                        tc.thought_signature = p
                            .get("thoughtSignature")
                            .and_then(Value::as_str)
                            .map(str::to_string);
                    }
                    b.end_block(i, out);
                }
            }
        }
        if let Some(r) = cand
            .and_then(|c| c.get("finishReason"))
            .and_then(Value::as_str)
        {
            if b.compat.is_087() {
                b.msg.raw_stop_reason = Some(r.to_string());
            }
            self.finish = Some(match r {
                "STOP" => StopReason::Stop,
                "MAX_TOKENS" => StopReason::Length,
                _ => StopReason::Error,
            });
        }
        if let Some(u) = v.get("usageMetadata") {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            // promptTokenCount includes the cached tokens, which are priced apart.
            let cached = n("cachedContentTokenCount");
            let usage = Usage {
                input: n("promptTokenCount").saturating_sub(cached),
                output: n("candidatesTokenCount").saturating_add(n("thoughtsTokenCount")),
                cache_read: cached,
                cache_write: 0,
                total_tokens: n("totalTokenCount"),
                reasoning: b.compat.is_087().then(|| n("thoughtsTokenCount")),
                ..Default::default()
            };
            b.set_usage(usage, out);
        }
    }

    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        self.close(b, out);
        match self.finish {
            None => b.fail(stream::TERMINATED.into(), false, None, out),
            // As in the reference, any tool call makes it toolUse, whatever the finish reason.
            Some(_) if b.msg.tool_calls().next().is_some() => b.finish(StopReason::ToolUse, out),
            Some(s) => b.finish(s, out),
        }
    }
}
