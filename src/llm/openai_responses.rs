//! OpenAI Responses API (`openai-responses`): request body and the decoder of the typed
//! `response.*` event stream, as pi 0.73.1's `openai-responses-shared`. The conversion and the
//! decoder are shared with Azure OpenAI (`azure_openai.rs`) and the ChatGPT Codex backend
//! (`openai_codex.rs`), which differ in URL, headers and a few body fields.

use serde_json::{Map, Value, json};

use crate::llm::api::{self, Builder, ErrorWording, Prepared, WireApi};
use crate::llm::sse::SseEvent;
use crate::llm::transform::{short_hash, transform_messages};
use crate::llm::{LlmRequest, Model, StreamEvent};
use crate::message::{Content, LlmMessage, StopReason, ThinkingLevel, Usage, UserContent};
use crate::protocol::SdkGeneration;

/// The wire details of the OpenAI Responses family (also Azure and Codex) in one SDK
/// generation, built once per request from [`LlmRequest::sdk`].
#[derive(Clone, Copy, Debug)]
pub struct Dialect {
    pub errors: ErrorWording,
    /// Azure: pi's own `User-Agent`, the SDK's 300 s timeout and the Stainless platform headers
    /// of this `openai` package version.
    pub stainless_package: Option<&'static str>,
    /// Session headers from the model's `sessionAffinityFormat` (else `compat.sendSessionIdHeader`
    /// adds `session_id`); Codex's header is `session-id` (else `session_id`).
    pub session_affinity: bool,
    /// `prompt_cache_key` cut at 64 characters (`clampOpenAIPromptCacheKey`).
    pub clamp_cache_key: bool,
    /// The model's quirks `supportsExplicitPromptCacheMode`, `supportsMaxOutputTokens`,
    /// `supportsDeveloperRole`, `supportsAdditionalTools` / `supportsToolSearch` are read.
    pub model_quirks: bool,
    /// The smallest `max_output_tokens` sent.
    pub min_output_tokens: u64,
    /// `store: false` on Azure too.
    pub azure_store: bool,
    /// Tools asking for constrained sampling are sent strict where supported.
    pub strict_tools: bool,
    /// Codex: `reasoning` also sent when thinking is off (the map's `off`, else `none`).
    pub codex_reasoning_off: bool,
    /// Codex: the body sent zstd-encoded.
    pub codex_zstd: bool,
    /// The answer: `response.incomplete` is terminal, `usage.reasoning`, cache writes, the raw
    /// stop reason, an incomplete response other than a length stop is an error, and a stream
    /// without a terminal event fails.
    pub strict_stream_end: bool,
    /// Azure: the providers whose `call_id|item_id` ids are kept (pi's
    /// `AZURE_TOOL_CALL_PROVIDERS`; 1.6.0 names the Azure provider `azure`).
    pub azure_tool_call_providers: &'static [&'static str],
}

impl Dialect {
    pub const fn of(sdk: SdkGeneration) -> Dialect {
        match sdk {
            SdkGeneration::Pi073 => Dialect {
                errors: ErrorWording::Sdk,
                stainless_package: None,
                session_affinity: false,
                clamp_cache_key: false,
                model_quirks: false,
                min_output_tokens: 0,
                azure_store: false,
                strict_tools: false,
                codex_reasoning_off: false,
                codex_zstd: false,
                strict_stream_end: false,
                azure_tool_call_providers: &[
                    "openai",
                    "openai-codex",
                    "opencode",
                    "azure-openai-responses",
                ],
            },
            SdkGeneration::Pi087 => Dialect {
                errors: ErrorWording::ErrorObject,
                stainless_package: Some("6.40.0"),
                session_affinity: true,
                clamp_cache_key: true,
                model_quirks: true,
                min_output_tokens: 16,
                azure_store: true,
                strict_tools: true,
                codex_reasoning_off: true,
                codex_zstd: true,
                strict_stream_end: true,
                ..Dialect::of(SdkGeneration::Pi073)
            },
            SdkGeneration::Pi16 => Dialect {
                stainless_package: Some("7.59.0"),
                azure_tool_call_providers: &["openai", "openai-codex", "opencode", "azure"],
                ..Dialect::of(SdkGeneration::Pi087)
            },
        }
    }
}

/// Providers whose `call_id|item_id` tool-call ids are kept (pi's `OPENAI_TOOL_CALL_PROVIDERS`).
pub const OPENAI_TOOL_CALL_PROVIDERS: &[&str] = &["openai", "openai-codex", "opencode"];

/// The `openai-responses` wire API.
pub struct OpenAiResponses;

pub const API: OpenAiResponses = OpenAiResponses;

impl WireApi for OpenAiResponses {
    fn name(&self) -> &'static str {
        "openai-responses"
    }

    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String> {
        let mut p = prepare(req);
        // Cloudflare: `{VAR}` placeholders in the base URL; the AI Gateway's own key header.
        if crate::llm::cloudflare::is_cloudflare(&req.model.provider) {
            let base = crate::llm::cloudflare::resolve_base_url(req)?;
            p.url = format!("{}/responses", base.trim_end_matches('/'));
            if crate::llm::cloudflare::is_gateway(&req.model.provider) {
                crate::llm::openai_completions::gateway_headers(req, &mut p.headers);
            }
        }
        Ok(p)
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn api::Decoder> {
        Box::new(Decoder::new(req))
    }

    fn http_error_message(
        &self,
        req: &LlmRequest,
        status: u16,
        _headers: &[(String, String)],
        body: &str,
    ) -> String {
        match Dialect::of(req.sdk).errors {
            ErrorWording::Sdk => api::stainless_message(status, body, true),
            ErrorWording::ErrorObject => {
                let name = if req.model.provider == "openai" {
                    "OpenAI".to_string()
                } else {
                    req.model.provider.clone()
                };
                let prefix = format!("{name} API error");
                api::openai_error_object_message(status, body, Some(&prefix))
            }
        }
    }

    fn stainless(&self) -> bool {
        true
    }
}

/// `PI_CACHE_RETENTION` (`short` unless `long` or `none`).
pub fn cache_retention(req: &LlmRequest) -> String {
    match req.extra.var("PI_CACHE_RETENTION").as_deref() {
        Some("long") => "long".into(),
        Some("none") => "none".into(),
        _ => "short".into(),
    }
}

fn compat_flag(model: &Model, key: &str) -> bool {
    model
        .compat
        .as_ref()
        .and_then(|c| c.get(key))
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

pub fn prepare(req: &LlmRequest) -> Prepared {
    let mut headers = crate::llm::openai_completions::sdk_headers(req);
    if req.model.provider == "github-copilot" {
        crate::llm::openai_completions::copilot_headers(req, &mut headers);
    }
    if cache_retention(req) != "none" {
        if let Some(s) = &req.session_id {
            if Dialect::of(req.sdk).session_affinity {
                // pi 0.87.1: the model's `sessionAffinityFormat` (OpenRouter's by provider or
                // URL, else OpenAI's).
                let model = &req.model;
                let openrouter =
                    model.provider == "openrouter" || model.base_url.contains("openrouter.ai");
                let format = model
                    .compat
                    .as_ref()
                    .and_then(|c| c.get("sessionAffinityFormat"))
                    .and_then(Value::as_str)
                    .unwrap_or(if openrouter { "openrouter" } else { "openai" });
                if format == "openrouter" {
                    headers.push(("x-session-id".into(), s.clone()));
                } else {
                    if format == "openai" {
                        headers.push(("session_id".into(), s.clone()));
                    }
                    headers.push(("x-client-request-id".into(), s.clone()));
                }
            } else {
                if compat_flag(&req.model, "sendSessionIdHeader") {
                    headers.push(("session_id".into(), s.clone()));
                }
                headers.push(("x-client-request-id".into(), s.clone()));
            }
        }
    }
    Prepared {
        url: format!("{}/responses", req.model.base_url.trim_end_matches('/')),
        headers,
        body: api::json_body(&build_body(req)),
    }
}

/// The level to send: `thinkingLevelMap[level]` when mapped, else the level's name.
pub fn effort_for(req: &LlmRequest, level: ThinkingLevel) -> Option<String> {
    match req.extra.thinking_map.as_ref().and_then(|m| m.get(level)) {
        Some(Some(v)) => Some(v.to_string()),
        Some(None) => None,
        None => Some(level.as_str().to_string()),
    }
}

/// The `reasoning`/`include` fields of the OpenAI and Azure APIs; `effort: none` (or the map's
/// value for `off`) when thinking is off, unless the map says `off` is unsupported.
pub fn reasoning_fields(req: &LlmRequest, body: &mut Map<String, Value>, copilot: bool) {
    if !req.model.reasoning {
        return;
    }
    if req.thinking != ThinkingLevel::Off {
        let effort = effort_for(req, req.thinking).unwrap_or_else(|| req.thinking.as_str().into());
        body.insert(
            "reasoning".into(),
            json!({"effort": effort, "summary": "auto"}),
        );
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        return;
    }
    if copilot {
        return;
    }
    match req
        .extra
        .thinking_map
        .as_ref()
        .and_then(|m| m.get(ThinkingLevel::Off))
    {
        Some(None) => {}
        Some(Some(v)) => {
            body.insert("reasoning".into(), json!({ "effort": v }));
        }
        None => {
            body.insert("reasoning".into(), json!({"effort": "none"}));
        }
    }
}

/// pi 0.87.1's `clampOpenAIPromptCacheKey`: at most 64 characters.
pub fn cache_key(req: &LlmRequest, key: &str) -> String {
    if Dialect::of(req.sdk).clamp_cache_key {
        key.chars().take(64).collect()
    } else {
        key.to_string()
    }
}

pub fn build_body(req: &LlmRequest) -> Value {
    let model = &req.model;
    let retention = cache_retention(req);
    let d = Dialect::of(req.sdk);
    // pi 0.87.1: a model with an explicit prompt-cache mode gets `prompt_cache_options`
    // instead of `prompt_cache_retention`.
    let explicit = d.model_quirks
        && crate::llm::strict::compat_flag(model, "supportsExplicitPromptCacheMode", false);
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert(
        "input".into(),
        Value::Array(convert_messages(req, OPENAI_TOOL_CALL_PROVIDERS, true)),
    );
    body.insert("stream".into(), json!(true));
    if retention != "none" {
        if let Some(s) = &req.session_id {
            body.insert("prompt_cache_key".into(), json!(cache_key(req, s)));
        }
        if retention == "long" && compat_flag(model, "supportsLongCacheRetention") && !explicit {
            body.insert("prompt_cache_retention".into(), json!("24h"));
        }
    }
    if explicit {
        if retention == "none" {
            body.insert("prompt_cache_options".into(), json!({"mode": "explicit"}));
        } else if retention == "long" && compat_flag(model, "supportsLongCacheRetention") {
            body.insert("prompt_cache_options".into(), json!({"ttl": "30m"}));
        }
    }
    body.insert("store".into(), json!(false));
    let max = api::default_max_tokens(req);
    let max_allowed =
        !d.model_quirks || crate::llm::strict::compat_flag(model, "supportsMaxOutputTokens", true);
    if max > 0 && max_allowed {
        let max = max.max(d.min_output_tokens);
        body.insert("max_output_tokens".into(), json!(max));
    }
    if !request_tools(req).0.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(convert_tools(
                req,
                json!(false),
                crate::llm::strict::compat_flag(model, "supportsStrictMode", false),
            )),
        );
    }
    reasoning_fields(req, &mut body, model.provider == "github-copilot");
    Value::Object(body)
}

/// Tools as function definitions (`strict` as given: `false`, or `null` for Codex). Under
/// `--compat 0.87` as pi 0.87.1: where the provider supports strict schemas (`supported`, the
/// model's `supportsStrictMode` or the API's default) a tool asking for constrained sampling is
/// sent strict, and `strict` is left out where it is not supported.
pub fn convert_tools(req: &LlmRequest, strict: Value, supported: bool) -> Vec<Value> {
    convert_tool_list(req, &request_tools(req).0, strict, supported, false)
}

/// pi 0.87.1: the tools the request lists and whether tools added later are declared in place
/// (`compat.supportsAdditionalTools` or `supportsToolSearch`; `resolveTranscriptTools`).
pub fn request_tools(req: &LlmRequest) -> (Vec<crate::llm::ToolSchema>, bool) {
    if !Dialect::of(req.sdk).model_quirks {
        return (req.tools.clone(), false);
    }
    let additions = crate::llm::strict::compat_flag(&req.model, "supportsAdditionalTools", false)
        || crate::llm::strict::compat_flag(&req.model, "supportsToolSearch", false);
    crate::llm::transcript::request_tools(req, additions)
}

/// Tool declarations; `deferred` marks them as a tool search's results (`defer_loading`).
pub fn convert_tool_list(
    req: &LlmRequest,
    list: &[crate::llm::ToolSchema],
    strict: Value,
    supported: bool,
    deferred: bool,
) -> Vec<Value> {
    let d = Dialect::of(req.sdk);
    list.iter()
        .map(|t| {
            if !d.strict_tools {
                return json!({"type": "function", "name": t.name, "description": t.description,
                   "parameters": t.parameters, "strict": strict});
            }
            let wants = crate::llm::strict::resolve_preferred(t, supported);
            let value = wants.map_or(strict.clone(), Value::Bool);
            let mut f = Map::new();
            f.insert("type".into(), json!("function"));
            f.insert("name".into(), json!(t.name));
            f.insert("description".into(), json!(t.description));
            f.insert(
                "parameters".into(),
                crate::llm::strict::parameters(t, (value == json!(true)).then_some(true)),
            );
            if deferred {
                f.insert("defer_loading".into(), json!(true));
            }
            if supported {
                f.insert("strict".into(), value);
            }
            Value::Object(f)
        })
        .collect()
}

/// pi 0.87.1: tools a later system message adds, declared in place: as `additional_tools`
/// (`compat.supportsAdditionalTools`), else as a completed client-side tool search
/// (`compat.supportsToolSearch`) whose call id hashes the position and the names.
fn system_tool_additions(
    req: &LlmRequest,
    added: &[crate::llm::ToolSchema],
    index: usize,
    out: &mut Vec<Value>,
) {
    let model = &req.model;
    let codex = model.api == "openai-codex-responses";
    let default_strict = if codex { Value::Null } else { json!(false) };
    let supported = crate::llm::strict::compat_flag(
        model,
        "supportsStrictMode",
        codex || model.api == "azure-openai-responses",
    );
    if crate::llm::strict::compat_flag(model, "supportsAdditionalTools", false) {
        out.push(json!({
            "type": "additional_tools",
            "role": "developer",
            "tools": convert_tool_list(req, added, default_strict, supported, false),
        }));
        return;
    }
    if !crate::llm::strict::compat_flag(model, "supportsToolSearch", false) {
        return;
    }
    let names: Vec<&str> = added.iter().map(|t| t.name.as_str()).collect();
    let call_id = format!(
        "pi_tool_load_{}",
        short_hash(&format!("system:{index}:{}", names.join(",")))
    );
    out.push(json!({
        "type": "tool_search_call",
        "call_id": call_id,
        "execution": "client",
        "status": "completed",
        "arguments": {"query": names.join(" "), "limit": names.len()},
    }));
    out.push(json!({
        "type": "tool_search_output",
        "call_id": call_id,
        "execution": "client",
        "status": "completed",
        "tools": convert_tool_list(req, added, default_strict, supported, true),
    }));
}

/// `[a-zA-Z0-9_-]`, at most 64 characters, no trailing `_`.
fn normalize_id_part(part: &str) -> String {
    let s: String = part
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    s.trim_end_matches('_').to_string()
}

/// pi's text signature: `{"v":1,"id":…,"phase"?}` or a legacy plain id.
fn parse_text_signature(sig: Option<&str>) -> Option<(String, Option<String>)> {
    let sig = sig?;
    if sig.starts_with('{') {
        if let Ok(v) = serde_json::from_str::<Value>(sig) {
            if v.get("v").and_then(Value::as_i64) == Some(1) {
                if let Some(id) = v.get("id").and_then(Value::as_str) {
                    let phase = v
                        .get("phase")
                        .and_then(Value::as_str)
                        .filter(|p| *p == "commentary" || *p == "final_answer")
                        .map(str::to_string);
                    return Some((id.to_string(), phase));
                }
            }
        }
    }
    Some((sig.to_string(), None))
}

/// The `input` items (pi's `convertResponsesMessages`).
pub fn convert_messages(req: &LlmRequest, allowed: &[&str], include_system: bool) -> Vec<Value> {
    let model = &req.model;
    let keep_pairs = allowed.contains(&model.provider.as_str());
    let normalize = |id: &str| -> String {
        if !keep_pairs || !id.contains('|') {
            return normalize_id_part(id);
        }
        let mut parts = id.split('|');
        let call = normalize_id_part(parts.next().unwrap_or(""));
        let item_raw = parts.next().unwrap_or("");
        // Only foreign messages reach this normaliser: their item ids are re-derived.
        let mut item = format!("fc_{}", short_hash(item_raw));
        item.truncate(64);
        if !item.starts_with("fc_") {
            item = normalize_id_part(&format!("fc_{item}"));
        }
        format!("{call}|{item}")
    };
    let keep_system = crate::llm::transcript::mid_convo(req);
    let mut msgs = transform_messages(
        &req.messages,
        model,
        Some(&normalize),
        crate::llm::transform::ForeignThinking::of(req.sdk),
    );
    if !keep_system {
        msgs = crate::llm::transcript::collapsed(msgs);
    }
    let images = model.input.iter().any(|i| i == "image");
    let mut out = Vec::with_capacity(msgs.len() + 1);
    // pi 0.87.1: `system` for a model whose compat says it has no developer role.
    let role = if model.reasoning
        && (!Dialect::of(req.sdk).model_quirks
            || crate::llm::strict::compat_flag(model, "supportsDeveloperRole", true))
    {
        "developer"
    } else {
        "system"
    };
    let prompt = crate::llm::transcript::leading_prompt(req);
    if include_system && !prompt.is_empty() {
        out.push(json!({"role": role, "content": prompt}));
    }
    let anchored = request_tools(req).1;
    let mut index = 0usize;
    for (n, m) in msgs.iter().enumerate() {
        match m {
            LlmMessage::System(_) if n == 0 => continue,
            LlmMessage::System(s) => {
                let added: Vec<crate::llm::ToolSchema> = s
                    .tools_added
                    .iter()
                    .flatten()
                    .filter(|_| anchored)
                    .map(crate::llm::transcript::schema)
                    .collect();
                if !added.is_empty() {
                    system_tool_additions(req, &added, index, &mut out);
                }
                let text = crate::llm::transcript::render_update(s);
                if !text.is_empty() {
                    out.push(json!({"role": role, "content": text}));
                }
            }
            LlmMessage::User(u) => {
                let parts: Vec<Value> = match &u.content {
                    UserContent::Text(s) => vec![json!({"type": "input_text", "text": s})],
                    UserContent::Blocks(b) => b
                        .iter()
                        .filter_map(|c| match c {
                            Content::Text(t) => Some(json!({"type": "input_text", "text": t.text})),
                            Content::Image(i) => Some(json!({"type": "input_image",
                                "detail": "auto",
                                "image_url": format!("data:{};base64,{}", i.mime_type, i.data)})),
                            _ => None,
                        })
                        .collect(),
                };
                if parts.is_empty() {
                    continue;
                }
                out.push(json!({"role": "user", "content": parts}));
            }
            LlmMessage::Assistant(a) => {
                let different_model =
                    a.model != model.id && a.provider == model.provider && a.api == model.api;
                let before = out.len();
                for c in &a.content {
                    match c {
                        Content::Thinking(t) => {
                            if let Some(item) = t
                                .thinking_signature
                                .as_deref()
                                .filter(|s| !s.is_empty())
                                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                            {
                                out.push(item);
                            }
                        }
                        Content::Text(t) => {
                            let parsed = parse_text_signature(t.text_signature.as_deref());
                            let (id, phase) = match parsed {
                                Some((id, phase)) if !id.is_empty() => {
                                    let id = if id.encode_utf16().count() > 64 {
                                        format!("msg_{}", short_hash(&id))
                                    } else {
                                        id
                                    };
                                    (id, phase)
                                }
                                _ => (format!("msg_{index}"), None),
                            };
                            let mut item = Map::new();
                            item.insert("type".into(), json!("message"));
                            item.insert("role".into(), json!("assistant"));
                            item.insert(
                                "content".into(),
                                json!([{"type": "output_text", "text": t.text, "annotations": []}]),
                            );
                            item.insert("status".into(), json!("completed"));
                            item.insert("id".into(), json!(id));
                            if let Some(p) = phase {
                                item.insert("phase".into(), json!(p));
                            }
                            out.push(Value::Object(item));
                        }
                        Content::ToolCall(tc) => {
                            let mut parts = tc.id.split('|');
                            let call_id = parts.next().unwrap_or("");
                            let mut item_id = parts.next();
                            if different_model && item_id.is_some_and(|i| i.starts_with("fc_")) {
                                item_id = None;
                            }
                            let mut item = Map::new();
                            item.insert("type".into(), json!("function_call"));
                            if let Some(id) = item_id {
                                item.insert("id".into(), json!(id));
                            }
                            item.insert("call_id".into(), json!(call_id));
                            item.insert("name".into(), json!(tc.name));
                            item.insert("arguments".into(), json!(tc.arguments.to_string()));
                            out.push(Value::Object(item));
                        }
                        _ => {}
                    }
                }
                if out.len() == before {
                    continue;
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
                let text = text.join("\n");
                let has_images = r.content.iter().any(|c| matches!(c, Content::Image(_)));
                let call_id = r.tool_call_id.split('|').next().unwrap_or("");
                let output = if has_images && images {
                    let mut parts = Vec::new();
                    if !text.is_empty() {
                        parts.push(json!({"type": "input_text", "text": text}));
                    }
                    for c in &r.content {
                        if let Content::Image(i) = c {
                            parts.push(json!({"type": "input_image", "detail": "auto",
                                "image_url": format!("data:{};base64,{}", i.mime_type, i.data)}));
                        }
                    }
                    Value::Array(parts)
                } else if text.is_empty() {
                    json!("(see attached image)")
                } else {
                    json!(text)
                };
                out.push(json!({"type": "function_call_output", "call_id": call_id,
                    "output": output}));
            }
        }
        index += 1;
    }
    out
}

// ------------------------------------------------------------------------------------------------
// The decoder (pi's `processResponsesStream`)

/// How a stream's service tier is chosen (Codex prefers the requested one over `default`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    OpenAi,
    Azure,
    Codex,
}

#[derive(Clone, Debug)]
enum Item {
    Reasoning { summary: Vec<String> },
    Message { parts: Vec<(bool, String)> },
    FunctionCall,
}

pub struct Decoder {
    flavor: Flavor,
    dialect: Dialect,
    model_id: String,
    current_item: Option<Item>,
    /// The content index of the current block (`None` once its item is done).
    current_block: Option<usize>,
    stop: StopReason,
    /// Codex: the stream ended at its completion event.
    closed: bool,
    /// A terminal response event (completed, incomplete, failed) arrived (pi 0.87.1 fails a
    /// stream that ends without one).
    terminal: bool,
    /// pi 0.87.1: the error text of an incomplete response that is not a length stop.
    stop_error: Option<String>,
}

impl Decoder {
    pub fn new(req: &LlmRequest) -> Decoder {
        Decoder::with_flavor(req, Flavor::OpenAi)
    }

    pub fn with_flavor(req: &LlmRequest, flavor: Flavor) -> Decoder {
        Decoder {
            flavor,
            dialect: Dialect::of(req.sdk),
            model_id: req.model.id.clone(),
            current_item: None,
            current_block: None,
            stop: StopReason::Stop,
            closed: false,
            terminal: false,
            stop_error: None,
        }
    }

    fn block_is(&self, b: &mut Builder, kind: &str) -> Option<usize> {
        let i = self.current_block?;
        let ok = matches!(
            (kind, b.block_mut(i)),
            ("thinking", Some(Content::Thinking(_)))
                | ("text", Some(Content::Text(_)))
                | ("tool", Some(Content::ToolCall(_)))
        );
        ok.then_some(i)
    }

    /// One decoded event `v` of type `kind`.
    pub fn on_event(&mut self, kind: &str, v: &Value, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        let s = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match kind {
            "response.created" => {
                if let Some(id) = v.pointer("/response/id").and_then(Value::as_str) {
                    b.msg.response_id = Some(id.to_string());
                }
            }
            "response.output_item.added" => {
                let item = &v["item"];
                match item.get("type").and_then(Value::as_str) {
                    Some("reasoning") => {
                        let summary = item
                            .get("summary")
                            .and_then(Value::as_array)
                            .map(|a| {
                                a.iter()
                                    .map(|p| {
                                        p.get("text")
                                            .and_then(Value::as_str)
                                            .unwrap_or("")
                                            .to_string()
                                    })
                                    .collect()
                            })
                            .unwrap_or_default();
                        self.current_item = Some(Item::Reasoning { summary });
                        self.current_block = Some(b.start_thinking(out));
                    }
                    Some("message") => {
                        self.current_item = Some(Item::Message { parts: Vec::new() });
                        self.current_block = Some(b.start_text(out));
                    }
                    Some("function_call") => {
                        self.current_item = Some(Item::FunctionCall);
                        let id = format!("{}|{}", s("/item/call_id"), s("/item/id"));
                        let i = b.start_tool(&id, &s("/item/name"), out);
                        let initial = s("/item/arguments");
                        if !initial.is_empty() {
                            b.preset_args(i, &initial);
                        }
                        self.current_block = Some(i);
                    }
                    _ => {}
                }
            }
            "response.reasoning_summary_part.added" => {
                if let Some(Item::Reasoning { summary }) = &mut self.current_item {
                    summary.push(s("/part/text"));
                }
            }
            "response.reasoning_summary_text.delta" => {
                let block = self.block_is(b, "thinking");
                if let (Some(Item::Reasoning { summary }), Some(i)) =
                    (&mut self.current_item, block)
                {
                    if let Some(last) = summary.last_mut() {
                        let d = s("/delta");
                        last.push_str(&d);
                        b.delta(i, &d, out);
                    }
                }
            }
            "response.reasoning_summary_part.done" => {
                let block = self.block_is(b, "thinking");
                if let (Some(Item::Reasoning { summary }), Some(i)) =
                    (&mut self.current_item, block)
                {
                    if let Some(last) = summary.last_mut() {
                        last.push_str("\n\n");
                        b.delta(i, "\n\n", out);
                    }
                }
            }
            "response.reasoning_text.delta" => {
                if let (Some(Item::Reasoning { .. }), Some(i)) =
                    (&self.current_item, self.block_is(b, "thinking"))
                {
                    b.delta(i, &s("/delta"), out);
                }
            }
            "response.content_part.added" => {
                if let Some(Item::Message { parts }) = &mut self.current_item {
                    match v.pointer("/part/type").and_then(Value::as_str) {
                        Some("output_text") => parts.push((false, s("/part/text"))),
                        Some("refusal") => parts.push((true, s("/part/refusal"))),
                        _ => {}
                    }
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let refusal = kind == "response.refusal.delta";
                let block = self.block_is(b, "text");
                if let (Some(Item::Message { parts }), Some(i)) = (&mut self.current_item, block) {
                    if let Some((is_refusal, text)) = parts.last_mut() {
                        if *is_refusal == refusal {
                            let d = s("/delta");
                            text.push_str(&d);
                            b.delta(i, &d, out);
                        }
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                if let (Some(Item::FunctionCall), Some(i)) =
                    (&self.current_item, self.block_is(b, "tool"))
                {
                    b.delta(i, &s("/delta"), out);
                }
            }
            "response.function_call_arguments.done" => {
                if let (Some(Item::FunctionCall), Some(i)) =
                    (&self.current_item, self.block_is(b, "tool"))
                {
                    let full = s("/arguments");
                    let previous = b.raw_args(i).to_string();
                    if let Some(tail) = full.strip_prefix(previous.as_str()) {
                        if !tail.is_empty() {
                            let tail = tail.to_string();
                            b.delta(i, &tail, out);
                        }
                    } else {
                        b.preset_args(i, &full);
                    }
                }
            }
            "response.output_item.done" => {
                let item = &v["item"];
                match item.get("type").and_then(Value::as_str) {
                    Some("reasoning") => {
                        if let Some(i) = self.block_is(b, "thinking") {
                            let joined = |key: &str| {
                                item.get(key)
                                    .and_then(Value::as_array)
                                    .map(|a| {
                                        a.iter()
                                            .map(|p| {
                                                p.get("text").and_then(Value::as_str).unwrap_or("")
                                            })
                                            .collect::<Vec<_>>()
                                            .join("\n\n")
                                    })
                                    .unwrap_or_default()
                            };
                            let (summary, content) = (joined("summary"), joined("content"));
                            if let Some(Content::Thinking(t)) = b.block_mut(i) {
                                if !summary.is_empty() {
                                    t.thinking = summary;
                                } else if !content.is_empty() {
                                    t.thinking = content;
                                }
                                t.thinking_signature = Some(item.to_string());
                            }
                            b.end_block(i, out);
                            self.current_block = None;
                        }
                    }
                    Some("message") => {
                        if let Some(i) = self.block_is(b, "text") {
                            let text: String = item
                                .get("content")
                                .and_then(Value::as_array)
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|p| {
                                            match p.get("type").and_then(Value::as_str) {
                                                Some("output_text") => {
                                                    p.get("text").and_then(Value::as_str)
                                                }
                                                _ => p.get("refusal").and_then(Value::as_str),
                                            }
                                        })
                                        .collect()
                                })
                                .unwrap_or_default();
                            if let Some(Content::Text(t)) = b.block_mut(i) {
                                t.text = text;
                                t.text_signature = Some(text_signature(item));
                            }
                            b.end_block(i, out);
                            self.current_block = None;
                        }
                    }
                    Some("function_call") => {
                        match self.block_is(b, "tool") {
                            Some(i) => {
                                if b.raw_args(i).is_empty() {
                                    let args = item
                                        .get("arguments")
                                        .and_then(Value::as_str)
                                        .filter(|a| !a.is_empty())
                                        .unwrap_or("{}");
                                    b.preset_args(i, args);
                                }
                                b.end_block(i, out);
                            }
                            None => {
                                // No open block: the reference reports a call it never adds.
                                let args = item
                                    .get("arguments")
                                    .and_then(Value::as_str)
                                    .unwrap_or("{}");
                                out.push(StreamEvent::ToolCallEnd {
                                    index: b.msg.content.len().saturating_sub(1),
                                    tool_call: crate::message::ToolCall {
                                        id: format!("{}|{}", s("/item/call_id"), s("/item/id")),
                                        name: s("/item/name"),
                                        arguments: api::parse_partial_json(args),
                                        thought_signature: None,
                                        arguments_error: None,
                                    },
                                });
                            }
                        }
                        self.current_block = None;
                    }
                    _ => {}
                }
            }
            "response.completed" | "response.done" | "response.incomplete"
                if self.flavor == Flavor::Codex
                    || kind == "response.completed"
                    || (self.dialect.strict_stream_end && kind == "response.incomplete") =>
            {
                self.terminal = true;
                let r = &v["response"];
                if let Some(id) = r.get("id").and_then(Value::as_str) {
                    b.msg.response_id = Some(id.to_string());
                }
                let full = self.dialect.strict_stream_end;
                let mut usage = b.msg.usage;
                if let Some(u) = r.get("usage").filter(|u| u.is_object()) {
                    let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
                    let cached = n("/input_tokens_details/cached_tokens");
                    // pi 0.87.1 also takes cache writes out of the input tokens.
                    let written = if full {
                        n("/input_tokens_details/cache_write_tokens")
                    } else {
                        0
                    };
                    usage = Usage {
                        input: n("/input_tokens")
                            .saturating_sub(cached)
                            .saturating_sub(written),
                        output: n("/output_tokens"),
                        cache_read: cached,
                        cache_write: written,
                        total_tokens: n("/total_tokens"),
                        reasoning: full.then(|| n("/output_tokens_details/reasoning_tokens")),
                        ..Default::default()
                    };
                }
                if let (true, Some(status)) = (full, r.get("status").and_then(Value::as_str)) {
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
                if factor != 1.0 && self.flavor != Flavor::Azure {
                    scale_cost(&mut b.msg.usage.cost, factor);
                    for ev in &mut events {
                        if let StreamEvent::Meta { usage, .. } = ev {
                            *usage = b.msg.usage;
                        }
                    }
                }
                out.append(&mut events);
                let status = r.get("status").and_then(Value::as_str);
                self.stop = match status {
                    Some("incomplete") if full && self.flavor != Flavor::Codex => {
                        // pi 0.87.1 keeps the provider's reason apart: only the output limit
                        // is a `length` stop.
                        match r
                            .pointer("/incomplete_details/reason")
                            .and_then(Value::as_str)
                        {
                            Some("max_output_tokens") => StopReason::Length,
                            Some(why) => {
                                self.stop_error = Some(format!("Response incomplete: {why}"));
                                StopReason::Error
                            }
                            None => {
                                self.stop_error =
                                    Some("Response incomplete without a provider reason".into());
                                StopReason::Error
                            }
                        }
                    }
                    Some("incomplete") => StopReason::Length,
                    Some("failed") | Some("cancelled") => StopReason::Error,
                    _ => StopReason::Stop,
                };
                if self.stop == StopReason::Stop && b.msg.tool_calls().next().is_some() {
                    self.stop = StopReason::ToolUse;
                }
                if self.flavor == Flavor::Codex {
                    self.closed = true;
                }
            }
            "error" => {
                let msg = if self.flavor == Flavor::Codex {
                    let (code, message) = (s("/code"), s("/message"));
                    let shown = if !message.is_empty() {
                        message
                    } else if !code.is_empty() {
                        code
                    } else {
                        v.to_string()
                    };
                    format!("Codex error: {shown}")
                } else {
                    format!(
                        "Error Code {}: {}",
                        js_field(v, "code"),
                        js_field(v, "message")
                    )
                };
                b.fail(msg, false, None, out);
            }
            "response.failed" => {
                if self.dialect.strict_stream_end && self.flavor != Flavor::Codex {
                    b.msg.raw_stop_reason = v
                        .pointer("/response/status")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                }
                let msg = if self.flavor == Flavor::Codex {
                    let m = s("/response/error/message");
                    if m.is_empty() {
                        "Codex response failed".to_string()
                    } else {
                        m
                    }
                } else {
                    match v.pointer("/response/error").filter(|e| !e.is_null()) {
                        Some(e) => {
                            let f = |k: &str, d: &str| {
                                e.get(k)
                                    .and_then(Value::as_str)
                                    .filter(|s| !s.is_empty())
                                    .unwrap_or(d)
                                    .to_string()
                            };
                            format!("{}: {}", f("code", "unknown"), f("message", "no message"))
                        }
                        None => match v
                            .pointer("/response/incomplete_details/reason")
                            .and_then(Value::as_str)
                            .filter(|r| !r.is_empty())
                        {
                            Some(r) => format!("incomplete: {r}"),
                            None => "Unknown error (no error details in response)".to_string(),
                        },
                    }
                };
                b.fail(msg, false, None, out);
            }
            _ => {}
        }
    }
}

/// A field as JavaScript's template string prints it (`undefined` when absent).
fn js_field(v: &Value, k: &str) -> String {
    match v.get(k) {
        None => "undefined".into(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) => "null".into(),
        Some(other) => other.to_string(),
    }
}

impl api::Decoder for Decoder {
    fn event(&mut self, ev: &SseEvent, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if self.closed {
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
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        self.on_event(&kind, &v, b, out);
    }

    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        b.start(out);
        if self.dialect.strict_stream_end && self.flavor != Flavor::Codex {
            if !self.terminal {
                b.fail(
                    "OpenAI Responses stream ended before a terminal response event".into(),
                    false,
                    None,
                    out,
                );
                return;
            }
            if let Some(e) = self.stop_error.take() {
                b.fail(e, false, None, out);
                return;
            }
        }
        b.finish(self.stop, out);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_parts_and_text_signatures() {
        assert_eq!(normalize_id_part("call.1|x__"), "call_1_x");
        assert_eq!(normalize_id_part(&"a".repeat(70)).len(), 64);
        assert_eq!(
            parse_text_signature(Some(r#"{"v":1,"id":"msg_1","phase":"final_answer"}"#)),
            Some(("msg_1".into(), Some("final_answer".into())))
        );
        assert_eq!(
            parse_text_signature(Some(r#"{"v":1,"id":"msg_1","phase":"other"}"#)),
            Some(("msg_1".into(), None))
        );
        assert_eq!(
            parse_text_signature(Some("legacy_id")),
            Some(("legacy_id".into(), None))
        );
        assert_eq!(parse_text_signature(None), None);
    }
}
