//! Google Generative AI (`google-generative-ai`, spec 8.4): `streamGenerateContent?alt=sse`
//! request body and decoder. Function calls arrive whole (start, one delta, end).

use serde_json::{Map, Value, json};

use crate::llm::api::{self, Builder, Prepared, WireApi};
use crate::llm::sse::SseEvent;
use crate::llm::transform::transform_messages;
use crate::llm::{LlmRequest, StreamEvent};
use crate::message::{Content, LlmMessage, StopReason, ThinkingLevel, Usage, UserContent, now_ms};
use crate::protocol::SdkGeneration;

/// The wire details of the Google APIs (Gemini and Vertex) in one SDK generation, built from
/// [`LlmRequest::sdk`].
#[derive(Clone, Copy, Debug)]
pub struct Dialect {
    /// `@google/genai`'s newer converter: Gemini 3 and later need tool call ids, the id is
    /// written between the call's name and arguments, tools are declared with their own
    /// (constrained-sampling) schemas, strict on Gemini 3 and later.
    pub gemini3_tools: bool,
    /// The answer: `rawStopReason`, `usage.reasoning`, and a missing, unknown or error finish
    /// reason fails the message.
    pub strict_finish: bool,
    /// pi 1.6.0's identity `User-Agent` (pi-ai's `formatUserAgent`, over the SDK's) and
    /// `@google/genai`'s `x-goog-api-client`. Earlier generations: neither (the SDK's name the
    /// Node.js version pi runs on; 0.87.1's `User-Agent` the kernel release).
    pub identity_headers: bool,
}

impl Dialect {
    pub const fn of(sdk: SdkGeneration) -> Dialect {
        match sdk {
            SdkGeneration::Pi073 => Dialect {
                gemini3_tools: false,
                strict_finish: false,
                identity_headers: false,
            },
            SdkGeneration::Pi087 => Dialect {
                gemini3_tools: true,
                strict_finish: true,
                identity_headers: false,
            },
            SdkGeneration::Pi16 => Dialect {
                gemini3_tools: true,
                strict_finish: true,
                identity_headers: true,
            },
        }
    }
}

/// The first headers of a Gemini API or Vertex request, before the credentials: pi 1.6.0's
/// `User-Agent` and `x-goog-api-client` where the dialect sends them, then `content-type`, in
/// the SDK's order. A model's `headers` override them ([`crate::llm::http::merge_model_headers`]).
pub fn sdk_headers(req: &LlmRequest) -> Vec<(String, String)> {
    let mut h = Vec::with_capacity(4);
    if Dialect::of(req.sdk).identity_headers {
        h.push((
            "user-agent".into(),
            crate::llm::http::pi_user_agent(req.sdk),
        ));
        h.push((
            "x-goog-api-client".into(),
            crate::llm::http::google_api_client(),
        ));
    }
    h.push(("content-type".into(), "application/json".into()));
    h
}
/// The `google-generative-ai` wire API.
pub struct Google;

pub const API: Google = Google;

impl WireApi for Google {
    fn name(&self) -> &'static str {
        "google-generative-ai"
    }

    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String> {
        Ok(prepare(req))
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn api::Decoder> {
        Box::new(Decoder::new(req))
    }

    fn http_error_message(
        &self,
        _req: &LlmRequest,
        status: u16,
        _headers: &[(String, String)],
        body: &str,
    ) -> String {
        api::google_error_message(status, body)
    }

    fn connection_error(&self, _req: &LlmRequest) -> &'static str {
        api::FETCH_FAILED
    }
}

pub fn prepare(req: &LlmRequest) -> Prepared {
    let base = req.model.base_url.trim_end_matches('/');
    let mut h = sdk_headers(req);
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
        body: api::json_body(&build_body(req)),
    }
}

/// Which SDK converter shapes the body: the Gemini API's (`mldev`) or Vertex AI's. They differ
/// in key order only (`functionCall` `{args,name}` vs `{name,args}`, `inlineData`
/// `{data,mimeType}` vs `{mimeType,data}`, function declarations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Gemini,
    Vertex,
}

fn is_gemini3_pro(id: &str) -> bool {
    after_prefix_matches(&id.to_lowercase(), "-pro")
}

fn is_gemini3_flash(id: &str) -> bool {
    after_prefix_matches(&id.to_lowercase(), "-flash")
}

/// `/gemini-3(?:\.\d+)?<suffix>/`.
fn after_prefix_matches(id: &str, suffix: &str) -> bool {
    id.match_indices("gemini-3").any(|(i, m)| {
        let mut rest = &id[i + m.len()..];
        if let Some(r) = rest.strip_prefix('.') {
            let digits = r.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 {
                rest = &r[digits..];
            }
        }
        rest.starts_with(suffix)
    })
}

fn is_gemma4(id: &str) -> bool {
    let l = id.to_lowercase();
    l.contains("gemma4") || l.contains("gemma-4")
}

/// The `thinkingConfig` pi sends (`None`: none at all).
pub fn thinking_config(req: &LlmRequest, flavor: Flavor) -> Option<Value> {
    let m = &req.model;
    if !m.reasoning {
        return None;
    }
    let id = m.id.as_str();
    let gemma = flavor == Flavor::Gemini && is_gemma4(id);
    if req.thinking == ThinkingLevel::Off {
        return Some(if is_gemini3_pro(id) {
            json!({"thinkingLevel": "LOW"})
        } else if is_gemini3_flash(id) || gemma {
            json!({"thinkingLevel": "MINIMAL"})
        } else {
            json!({"thinkingBudget": 0})
        });
    }
    let l = req.thinking;
    if is_gemini3_pro(id) || is_gemini3_flash(id) || gemma {
        let level = if is_gemini3_pro(id) {
            if matches!(l, ThinkingLevel::Minimal | ThinkingLevel::Low) {
                "LOW"
            } else {
                "HIGH"
            }
        } else if gemma {
            if matches!(l, ThinkingLevel::Minimal | ThinkingLevel::Low) {
                "MINIMAL"
            } else {
                "HIGH"
            }
        } else {
            match l {
                ThinkingLevel::Minimal => "MINIMAL",
                ThinkingLevel::Low => "LOW",
                ThinkingLevel::Medium => "MEDIUM",
                _ => "HIGH",
            }
        };
        return Some(json!({"includeThoughts": true, "thinkingLevel": level}));
    }
    let budgets: [i64; 4] = if id.contains("2.5-pro") {
        [128, 2048, 8192, 32768]
    } else if id.contains("2.5-flash-lite") && flavor == Flavor::Gemini {
        [512, 2048, 8192, 24576]
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

/// A thought signature is replayed only to the same provider and model, and only when it is
/// well-formed base64.
fn valid_signature(same: bool, sig: Option<&str>) -> Option<String> {
    let s = sig?;
    let ok = same && !s.is_empty() && s.len() % 4 == 0 && {
        let body = s.trim_end_matches('=');
        s.len() - body.len() <= 2
            && !body.is_empty()
            && body
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    };
    ok.then(|| s.to_string())
}

/// Models that need tool call ids in function calls and responses (pi 0.87.1: Gemini 3 and
/// later too).
fn requires_tool_call_id(id: &str, gemini3_tools: bool) -> bool {
    id.starts_with("claude-")
        || id.starts_with("gpt-oss-")
        || (gemini3_tools && gemini_major(id).is_some_and(|v| v >= 3))
}

/// Gemini 3 and later (and non-Gemini models) take images inside function responses.
fn multimodal_function_response(id: &str) -> bool {
    let l = id.to_lowercase();
    let rest = l
        .strip_prefix("gemini-live-")
        .or_else(|| l.strip_prefix("gemini-"));
    match rest {
        Some(r) => {
            let digits: String = r.chars().take_while(char::is_ascii_digit).collect();
            match digits.parse::<u32>() {
                Ok(v) => v >= 3,
                Err(_) => true,
            }
        }
        None => true,
    }
}

fn inline_data(flavor: Flavor, mime: &str, data: &str) -> Value {
    match flavor {
        Flavor::Gemini => json!({"inlineData": {"data": data, "mimeType": mime}}),
        Flavor::Vertex => json!({"inlineData": {"mimeType": mime, "data": data}}),
    }
}

fn content(parts: Vec<Value>, role: &str) -> Value {
    json!({"parts": parts, "role": role})
}

/// The `contents` (pi's google-shared `convertMessages`, then the SDK converter's key order).
pub fn contents(req: &LlmRequest, flavor: Flavor) -> Vec<Value> {
    let model = &req.model;
    let with_ids = requires_tool_call_id(&model.id, Dialect::of(req.sdk).gemini3_tools);
    let normalize = |id: &str| {
        if with_ids {
            crate::llm::transform::sanitize_id(id, 64)
        } else {
            id.to_string()
        }
    };
    let msgs = crate::llm::transcript::collapsed(transform_messages(
        &req.messages,
        model,
        Some(&normalize),
        crate::llm::transform::ForeignThinking::of(req.sdk),
    ));
    let images = model.input.iter().any(|i| i == "image");
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
                            Content::Image(i) => Some(inline_data(flavor, &i.mime_type, &i.data)),
                            _ => None,
                        })
                        .collect(),
                };
                if !parts.is_empty() {
                    contents.push(content(parts, "user"));
                }
            }
            LlmMessage::Assistant(a) => {
                let same = a.provider == model.provider && a.model == model.id;
                let mut parts = Vec::new();
                for c in &a.content {
                    match c {
                        Content::Text(t) if !t.text.trim().is_empty() => {
                            let mut p = Map::new();
                            p.insert("text".into(), json!(t.text));
                            if let Some(sig) = valid_signature(same, t.text_signature.as_deref()) {
                                p.insert("thoughtSignature".into(), json!(sig));
                            }
                            parts.push(Value::Object(p));
                        }
                        Content::Thinking(t) if !t.thinking.trim().is_empty() => {
                            let mut p = Map::new();
                            p.insert("text".into(), json!(t.thinking));
                            if same {
                                p.insert("thought".into(), json!(true));
                                if let Some(sig) =
                                    valid_signature(same, t.thinking_signature.as_deref())
                                {
                                    p.insert("thoughtSignature".into(), json!(sig));
                                }
                            }
                            parts.push(Value::Object(p));
                        }
                        Content::ToolCall(tc) => {
                            let mut call = Map::new();
                            let id = with_ids.then(|| json!(tc.id));
                            match flavor {
                                // pi 0.87.1's SDK writes the id between the two.
                                Flavor::Gemini if Dialect::of(req.sdk).gemini3_tools => {
                                    call.insert("args".into(), tc.arguments.clone());
                                    if let Some(id) = id {
                                        call.insert("id".into(), id);
                                    }
                                    call.insert("name".into(), json!(tc.name));
                                }
                                Flavor::Gemini => {
                                    if let Some(id) = id {
                                        call.insert("id".into(), id);
                                    }
                                    call.insert("args".into(), tc.arguments.clone());
                                    call.insert("name".into(), json!(tc.name));
                                }
                                Flavor::Vertex => {
                                    call.insert("name".into(), json!(tc.name));
                                    call.insert("args".into(), tc.arguments.clone());
                                    if let Some(id) = id {
                                        call.insert("id".into(), id);
                                    }
                                }
                            }
                            let mut p = Map::new();
                            p.insert("functionCall".into(), Value::Object(call));
                            if let Some(sig) =
                                valid_signature(same, tc.thought_signature.as_deref())
                            {
                                p.insert("thoughtSignature".into(), json!(sig));
                            }
                            parts.push(Value::Object(p));
                        }
                        _ => {}
                    }
                }
                if !parts.is_empty() {
                    contents.push(content(parts, "model"));
                }
            }
            // Folded into the system prompt and tools (`transcript::collapsed`).
            LlmMessage::System(_) => {}
            LlmMessage::ToolResult(r) => {
                let text: Vec<&str> = r
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        Content::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let text = text.join("\n");
                let image_parts: Vec<Value> = if images {
                    r.content
                        .iter()
                        .filter_map(|c| match c {
                            Content::Image(i) => Some(inline_data(flavor, &i.mime_type, &i.data)),
                            _ => None,
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let has_images = !image_parts.is_empty();
                let multimodal = multimodal_function_response(&model.id);
                let value = if !text.is_empty() {
                    text
                } else if has_images {
                    "(see attached image)".to_string()
                } else {
                    String::new()
                };
                let key = if r.is_error { "error" } else { "output" };
                let mut fr = Map::new();
                fr.insert("name".into(), json!(r.tool_name));
                fr.insert("response".into(), json!({ key: value }));
                if has_images && multimodal {
                    fr.insert("parts".into(), Value::Array(image_parts.clone()));
                }
                if with_ids {
                    fr.insert("id".into(), json!(r.tool_call_id));
                }
                let part = json!({"functionResponse": Value::Object(fr)});
                // Consecutive tool results share one user turn.
                let merged = contents.last_mut().is_some_and(|last| {
                    let joins = last["role"] == "user"
                        && last["parts"]
                            .as_array()
                            .is_some_and(|p| p.iter().any(|x| x.get("functionResponse").is_some()));
                    if joins {
                        if let Some(p) = last["parts"].as_array_mut() {
                            p.push(part.clone());
                        }
                    }
                    joins
                });
                if !merged {
                    contents.push(content(vec![part], "user"));
                }
                if has_images && !multimodal {
                    let mut parts = vec![json!({"text": "Tool result image:"})];
                    parts.extend(image_parts);
                    contents.push(content(parts, "user"));
                }
            }
        }
    }
    contents
}

/// The request body for either flavor.
pub fn body_for(req: &LlmRequest, flavor: Flavor) -> Value {
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents(req, flavor)));
    if !req.system_prompt.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": req.system_prompt}], "role": "user"}),
        );
    }
    let own_schemas = Dialect::of(req.sdk).gemini3_tools;
    // pi 0.87.1: Gemini 3 and later validate required parameters, so tools asking for
    // constrained sampling go strict there and the calling mode becomes VALIDATED.
    let strict_supported = own_schemas && gemini_major(&req.model.id).is_some_and(|m| m >= 3);
    let mut any_strict = false;
    if !req.tools.is_empty() {
        let decls: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                if own_schemas {
                    let strict = crate::llm::strict::resolve_preferred(t, strict_supported);
                    any_strict |= strict == Some(true);
                    return json!({"name": t.name, "description": t.description,
                        "parametersJsonSchema": crate::llm::strict::parameters(t, strict)});
                }
                match flavor {
                    Flavor::Gemini => json!({"name": t.name, "description": t.description,
                        "parametersJsonSchema": t.parameters}),
                    Flavor::Vertex => json!({"description": t.description, "name": t.name,
                        "parametersJsonSchema": t.parameters}),
                }
            })
            .collect();
        body.insert("tools".into(), json!([{ "functionDeclarations": decls }]));
        if any_strict {
            body.insert(
                "toolConfig".into(),
                json!({"functionCallingConfig": {"mode": "VALIDATED"}}),
            );
        }
    }
    let mut generation = Map::new();
    let max = api::default_max_tokens(req);
    if max > 0 {
        generation.insert("maxOutputTokens".into(), json!(max));
    }
    if let Some(t) = thinking_config(req, flavor) {
        generation.insert("thinkingConfig".into(), t);
    }
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    Value::Object(body)
}

pub fn build_body(req: &LlmRequest) -> Value {
    body_for(req, Flavor::Gemini)
}

/// The Gemini major version of a model id (pi's `/^gemini(?:-live)?-(\d+)/`: `gemini-3-flash`
/// → 3, `gemini-2.5-pro` → 2).
fn gemini_major(id: &str) -> Option<u32> {
    let id = id.to_ascii_lowercase();
    let rest = id.strip_prefix("gemini-")?;
    let rest = rest.strip_prefix("live-").unwrap_or(rest);
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

#[derive(Default)]
pub struct Decoder {
    current: Option<(bool, usize)>,
    finish: Option<StopReason>,
    counter: u64,
    /// pi 0.87.1: the error text of an unknown finish reason.
    unhandled: Option<String>,
    /// [`Dialect::strict_finish`].
    strict_finish: bool,
}

/// The finish reasons pi 0.87.1's Google SDK names (others are "unhandled").
const KNOWN_FINISH: [&str; 18] = [
    "STOP",
    "MAX_TOKENS",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "SAFETY",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "IMAGE_OTHER",
    "RECITATION",
    "FINISH_REASON_UNSPECIFIED",
    "OTHER",
    "LANGUAGE",
    "MALFORMED_FUNCTION_CALL",
    "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS",
    "NO_IMAGE",
];

impl Decoder {
    pub fn new(req: &LlmRequest) -> Decoder {
        Decoder {
            strict_finish: Dialect::of(req.sdk).strict_finish,
            ..Decoder::default()
        }
    }
    fn close(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if let Some((_, i)) = self.current.take() {
            b.end_block(i, out);
        }
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
            if self.strict_finish {
                b.msg.raw_stop_reason = Some(r.to_string());
                if !KNOWN_FINISH.contains(&r) {
                    self.unhandled = Some(format!("Unhandled stop reason: {r}"));
                }
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
                reasoning: self.strict_finish.then(|| n("thoughtsTokenCount")),
                ..Default::default()
            };
            b.set_usage(usage, out);
        }
    }

    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        self.close(b, out);
        b.start(out);
        if self.strict_finish {
            // pi 0.87.1: no finish reason, or one that is an error, fails the message; only a
            // normal stop with tool calls becomes toolUse.
            if let Some(e) = self.unhandled.take() {
                b.fail(e, false, None, out);
                return;
            }
            match self.finish {
                None => b.fail(
                    "Google stream ended without a finish reason".into(),
                    false,
                    None,
                    out,
                ),
                Some(StopReason::Error) => {
                    let text = match &b.msg.raw_stop_reason {
                        Some(r) => format!("Provider stopped with: {r}"),
                        None => "An unknown error occurred".to_string(),
                    };
                    b.fail(text, false, None, out);
                }
                Some(StopReason::Stop) if b.msg.tool_calls().next().is_some() => {
                    b.finish(StopReason::ToolUse, out)
                }
                Some(s) => b.finish(s, out),
            }
            return;
        }
        match self.finish {
            // A stream that ends without a finish reason is done as it stands (the reference).
            None => b.finish(StopReason::Stop, out),
            // As in the reference, any tool call makes it toolUse, whatever the finish reason.
            Some(_) if b.msg.tool_calls().next().is_some() => b.finish(StopReason::ToolUse, out),
            Some(s) => b.finish(s, out),
        }
    }
}
