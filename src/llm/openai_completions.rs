//! OpenAI Chat Completions (`openai-completions`; also every OpenAI-compatible provider: xAI,
//! Groq, Cerebras, OpenRouter, DeepSeek, z.ai, Moonshot, Hugging Face, Cloudflare, OpenCode and
//! custom servers), as pi-ai 0.73.1's `openai-completions.ts`: the compatibility flags (a model's
//! `compat`, else detected from its provider and URL), the request body and headers they shape,
//! and the decoder of the `data: {chunk}` / `data: [DONE]` stream.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use crate::llm::api::{self, Builder, ErrorWording, Prepared, WireApi};
use crate::llm::sse::SseEvent;
use crate::llm::transform::{sanitize_id, transform_messages};
use crate::llm::{LlmRequest, Model, StreamEvent};
use crate::message::{Content, LlmMessage, StopReason, ThinkingLevel, Usage, UserContent};
use crate::protocol::SdkGeneration;

/// Effective compatibility flags (pi's `getCompat`: the model's `compat` field by field, else
/// `detectCompat`'s value for its provider and base URL).
#[derive(Clone, Debug, PartialEq)]
pub struct Quirks {
    pub supports_store: bool,
    pub supports_developer_role: bool,
    pub supports_reasoning_effort: bool,
    pub supports_usage_in_streaming: bool,
    pub max_tokens_field: String,
    pub requires_tool_result_name: bool,
    pub requires_assistant_after_tool_result: bool,
    pub requires_thinking_as_text: bool,
    pub requires_reasoning_content_on_assistant_messages: bool,
    /// `openai`, `openrouter`, `deepseek`, `zai`, `qwen` or `qwen-chat-template`.
    pub thinking_format: String,
    pub zai_tool_stream: bool,
    pub supports_strict_mode: bool,
    /// `Some("anthropic")`: Anthropic-style `cache_control` markers.
    pub cache_control_format: Option<String>,
    pub send_session_affinity_headers: bool,
    pub supports_long_cache_retention: bool,
    /// pi 0.87.1: a stream without a finish reason is an error (`false`: the content decides).
    pub supports_finish_reason: bool,
    /// pi 0.87.1: `openrouter` (`x-session-id`), `openai` (`session_id` too) or another value
    /// (`x-client-request-id` and `x-session-affinity` only).
    pub session_affinity_format: String,
}

/// pi's `detectCompat`: what a provider (by name, else by a substring of its base URL) accepts.
fn detect(model: &Model) -> Quirks {
    let p = model.provider.as_str();
    let url = model.base_url.as_str();
    let is_zai = p == "zai" || url.contains("api.z.ai");
    let is_moonshot = p == "moonshotai" || p == "moonshotai-cn" || url.contains("api.moonshot.");
    let is_workers_ai = p == "cloudflare-workers-ai" || url.contains("api.cloudflare.com");
    let is_ai_gateway = p == "cloudflare-ai-gateway" || url.contains("gateway.ai.cloudflare.com");
    let is_grok = p == "xai" || url.contains("api.x.ai");
    let is_deepseek = p == "deepseek" || url.contains("deepseek.com");
    let non_standard = p == "cerebras"
        || url.contains("cerebras.ai")
        || is_grok
        || url.contains("chutes.ai")
        || url.contains("deepseek.com")
        || is_zai
        || is_moonshot
        || p == "opencode"
        || url.contains("opencode.ai")
        || is_workers_ai
        || is_ai_gateway;
    let max_tokens = url.contains("chutes.ai") || is_moonshot || is_ai_gateway;
    Quirks {
        supports_store: !non_standard,
        supports_developer_role: !non_standard,
        supports_reasoning_effort: !is_grok && !is_zai && !is_moonshot && !is_ai_gateway,
        supports_usage_in_streaming: true,
        max_tokens_field: if max_tokens {
            "max_tokens"
        } else {
            "max_completion_tokens"
        }
        .into(),
        requires_tool_result_name: false,
        requires_assistant_after_tool_result: false,
        requires_thinking_as_text: false,
        requires_reasoning_content_on_assistant_messages: is_deepseek,
        thinking_format: if is_deepseek {
            "deepseek"
        } else if is_zai {
            "zai"
        } else if p == "openrouter" || url.contains("openrouter.ai") {
            "openrouter"
        } else {
            "openai"
        }
        .into(),
        zai_tool_stream: false,
        supports_strict_mode: !is_moonshot && !is_ai_gateway,
        cache_control_format: (p == "openrouter" && model.id.starts_with("anthropic/"))
            .then(|| "anthropic".to_string()),
        send_session_affinity_headers: false,
        supports_long_cache_retention: !(is_workers_ai || is_ai_gateway),
        supports_finish_reason: false,
        session_affinity_format: "openai".into(),
    }
}

/// pi 0.87.1's `detectCompat`: more providers known by name or URL (Together, NVIDIA, Ant Ling,
/// z.ai's coding plan), `max_tokens` for DeepSeek and z.ai too, no developer role on OpenRouter
/// except for its `anthropic/` and `openai/` models, no strict mode unless the model says so,
/// session affinity headers for OpenRouter.
fn detect_extended(model: &Model) -> Quirks {
    let p = model.provider.as_str();
    let url = model.base_url.as_str();
    let is_zai = p == "zai"
        || p == "zai-coding-cn"
        || url.contains("api.z.ai")
        || url.contains("open.bigmodel.cn");
    let is_together =
        p == "together" || url.contains("api.together.ai") || url.contains("api.together.xyz");
    let is_moonshot = p == "moonshotai" || p == "moonshotai-cn" || url.contains("api.moonshot.");
    let is_openrouter = p == "openrouter" || url.contains("openrouter.ai");
    let is_workers_ai = p == "cloudflare-workers-ai" || url.contains("api.cloudflare.com");
    let is_ai_gateway = p == "cloudflare-ai-gateway" || url.contains("gateway.ai.cloudflare.com");
    let is_nvidia = p == "nvidia" || url.contains("integrate.api.nvidia.com");
    let is_ant_ling = p == "ant-ling" || url.contains("api.ant-ling.com");
    let is_cerebras = p == "cerebras" || url.contains("cerebras.ai");
    let is_deepseek = p == "deepseek" || url.to_lowercase().contains("deepseek.com");
    let is_grok = p == "xai" || url.contains("api.x.ai");
    let non_standard = is_nvidia
        || is_cerebras
        || is_grok
        || is_together
        || url.contains("chutes.ai")
        || is_deepseek
        || is_zai
        || is_moonshot
        || p == "opencode"
        || url.contains("opencode.ai")
        || is_workers_ai
        || is_ai_gateway
        || is_ant_ling;
    let max_tokens = url.contains("chutes.ai")
        || is_deepseek
        || is_moonshot
        || is_ai_gateway
        || is_together
        || is_nvidia
        || is_ant_ling
        || is_zai;
    let openrouter_developer =
        is_openrouter && (model.id.starts_with("anthropic/") || model.id.starts_with("openai/"));
    Quirks {
        supports_store: !non_standard,
        supports_developer_role: openrouter_developer || (!non_standard && !is_openrouter),
        supports_reasoning_effort: !is_grok
            && !is_zai
            && !is_moonshot
            && !is_together
            && !is_ai_gateway
            && !is_nvidia
            && !is_ant_ling,
        supports_usage_in_streaming: true,
        max_tokens_field: if max_tokens {
            "max_tokens"
        } else {
            "max_completion_tokens"
        }
        .into(),
        requires_tool_result_name: false,
        requires_assistant_after_tool_result: false,
        requires_thinking_as_text: false,
        requires_reasoning_content_on_assistant_messages: is_deepseek,
        thinking_format: if is_deepseek {
            "deepseek"
        } else if is_zai {
            "zai"
        } else if is_together {
            "together"
        } else if is_ant_ling {
            "ant-ling"
        } else if is_openrouter {
            "openrouter"
        } else {
            "openai"
        }
        .into(),
        zai_tool_stream: false,
        supports_strict_mode: false,
        cache_control_format: (p == "openrouter" && model.id.starts_with("anthropic/"))
            .then(|| "anthropic".to_string()),
        send_session_affinity_headers: is_openrouter,
        supports_long_cache_retention: !(is_together
            || is_workers_ai
            || is_ai_gateway
            || is_nvidia
            || is_ant_ling),
        supports_finish_reason: true,
        session_affinity_format: if is_openrouter {
            "openrouter"
        } else {
            "openai"
        }
        .into(),
    }
}

/// The model's quirks as the request's SDK generation resolves them.
pub fn quirks(model: &Model, sdk: SdkGeneration) -> Quirks {
    let extended = Dialect::of(sdk).extended_detection;
    let mut c = if extended {
        detect_extended(model)
    } else {
        detect(model)
    };
    let Some(m) = &model.compat else { return c };
    // `??`: a field that is absent (or not a boolean: models.json's schema refuses those) keeps
    // the detected value.
    let flag = |k: &str, d: bool| m.get(k).and_then(Value::as_bool).unwrap_or(d);
    let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
    c.supports_store = flag("supportsStore", c.supports_store);
    c.supports_developer_role = flag("supportsDeveloperRole", c.supports_developer_role);
    c.supports_reasoning_effort = flag("supportsReasoningEffort", c.supports_reasoning_effort);
    c.supports_usage_in_streaming = flag("supportsUsageInStreaming", c.supports_usage_in_streaming);
    if let Some(s) = text("maxTokensField") {
        c.max_tokens_field = s;
    }
    c.requires_tool_result_name = flag("requiresToolResultName", c.requires_tool_result_name);
    c.requires_assistant_after_tool_result = flag(
        "requiresAssistantAfterToolResult",
        c.requires_assistant_after_tool_result,
    );
    c.requires_thinking_as_text = flag("requiresThinkingAsText", c.requires_thinking_as_text);
    c.requires_reasoning_content_on_assistant_messages = flag(
        "requiresReasoningContentOnAssistantMessages",
        c.requires_reasoning_content_on_assistant_messages,
    );
    if let Some(s) = text("thinkingFormat") {
        c.thinking_format = s;
    }
    c.zai_tool_stream = flag("zaiToolStream", c.zai_tool_stream);
    c.supports_strict_mode = flag("supportsStrictMode", c.supports_strict_mode);
    if let Some(s) = text("cacheControlFormat") {
        c.cache_control_format = Some(s);
    }
    c.send_session_affinity_headers = flag(
        "sendSessionAffinityHeaders",
        c.send_session_affinity_headers,
    );
    c.supports_long_cache_retention = flag(
        "supportsLongCacheRetention",
        c.supports_long_cache_retention,
    );
    if extended {
        c.supports_finish_reason = flag("supportsFinishReason", c.supports_finish_reason);
        if let Some(s) = text("sessionAffinityFormat") {
            c.session_affinity_format = s;
        }
    }
    c
}

/// The wire details of OpenAI Chat Completions in one SDK generation, built from
/// [`LlmRequest::sdk`].
#[derive(Clone, Copy, Debug)]
pub struct Dialect {
    pub errors: ErrorWording,
    /// pi's own `User-Agent`, the SDK's 300 s timeout and the Stainless platform headers of this
    /// `openai` package version (else `OpenAI/JS 6.26.0`).
    pub stainless_package: Option<&'static str>,
    /// pi 0.87.1's `detectCompat` ([`detect_extended`]) and the quirks
    /// `supportsFinishReason` and `sessionAffinityFormat`.
    pub extended_detection: bool,
    /// `cache_control` also on the last tool result.
    pub cache_tool_results: bool,
    /// The thinking fields also ask a model not to think when thinking is off
    /// ([`reasoning_fields_with_off`]).
    pub reasoning_off: bool,
    /// Strict tool schemas only where the model's `supportsStrictMode` says so; a tool asking
    /// for constrained sampling goes strict there.
    pub strict_tools: bool,
    /// Tools added later are declared in place (`resolveTranscriptTools`,
    /// `compat.supportsMidConvoToolAdditions`).
    pub transcript_tools: bool,
    /// Tool-call ids `call|item` become `call_item` ([`normalize_call_item_id`]).
    pub call_item_ids: bool,
    /// OpenCode Go's `reasoning` field is replayed as `reasoning_content`.
    pub opencode_go_reasoning: bool,
    /// The answer's `usage.reasoning`, `cached_tokens` at the top level, cache reads not reduced
    /// by writes, and `rawStopReason`.
    pub usage_details: bool,
}

impl Dialect {
    pub const fn of(sdk: SdkGeneration) -> Dialect {
        match sdk {
            SdkGeneration::Pi073 => Dialect {
                errors: ErrorWording::Sdk,
                stainless_package: None,
                extended_detection: false,
                cache_tool_results: false,
                reasoning_off: false,
                strict_tools: false,
                transcript_tools: false,
                call_item_ids: false,
                opencode_go_reasoning: false,
                usage_details: false,
            },
            SdkGeneration::Pi087 => Dialect {
                errors: ErrorWording::ErrorObject,
                stainless_package: Some("6.40.0"),
                extended_detection: true,
                cache_tool_results: true,
                reasoning_off: true,
                strict_tools: true,
                transcript_tools: true,
                call_item_ids: true,
                opencode_go_reasoning: true,
                usage_details: true,
            },
            SdkGeneration::Pi16 => Dialect {
                stainless_package: Some("7.59.0"),
                ..Dialect::of(SdkGeneration::Pi087)
            },
        }
    }
}

/// pi's cache retention: `none` for requests that must not write the cache (pi 0.87.1's
/// summaries), `long` with `PI_CACHE_RETENTION=long`, else `short`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Retention {
    None,
    Short,
    Long,
}

fn retention(req: &LlmRequest) -> Retention {
    if req.no_cache {
        Retention::None
    } else if req.extra.var("PI_CACHE_RETENTION").as_deref() == Some("long") {
        Retention::Long
    } else {
        Retention::Short
    }
}

/// The `openai-completions` wire API.
pub struct OpenAiCompletions;

pub const API: OpenAiCompletions = OpenAiCompletions;

impl WireApi for OpenAiCompletions {
    fn name(&self) -> &'static str {
        "openai-completions"
    }

    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String> {
        prepare(req)
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
            ErrorWording::ErrorObject => api::openai_error_object_message(status, body, None),
        }
    }

    fn stainless(&self) -> bool {
        true
    }
}

pub fn prepare(req: &LlmRequest) -> Result<Prepared, String> {
    let base = crate::llm::cloudflare::base_url(req)?;
    let d = Dialect::of(req.sdk);
    let c = quirks(&req.model, req.sdk);
    let mut headers = sdk_headers(req);
    if req.model.provider == "github-copilot" {
        copilot_headers(req, &mut headers);
    }
    if let Some(id) = req
        .session_id
        .as_ref()
        .filter(|_| c.send_session_affinity_headers && retention(req) != Retention::None)
    {
        let names: &[&str] = match c.session_affinity_format.as_str() {
            _ if !d.extended_detection => {
                &["session_id", "x-client-request-id", "x-session-affinity"]
            }
            "openrouter" => &["x-session-id"],
            "openai" => &["session_id", "x-client-request-id", "x-session-affinity"],
            _ => &["x-client-request-id", "x-session-affinity"],
        };
        for name in names {
            put_header(&mut headers, name, id);
        }
        // Headers configured for the request (models.json) still win.
        crate::llm::http::merge_model_headers(&mut headers, &req.model);
    }
    if crate::llm::cloudflare::is_gateway(&req.model.provider) {
        gateway_headers(req, &mut headers);
    }
    Ok(Prepared {
        url: format!("{}/chat/completions", base.trim_end_matches('/')),
        headers,
        body: api::json_body(&build_body_with(req, &c)),
    })
}

/// Replace (or add) a header, names compared case-insensitively.
fn put_header(h: &mut Vec<(String, String)>, name: &str, value: &str) {
    h.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
    h.push((name.to_string(), value.to_string()));
}

/// Cloudflare AI Gateway (both OpenAI APIs): the key goes in `cf-aig-authorization`, and no
/// `Authorization` is sent unless the request's own headers set one.
pub fn gateway_headers(req: &LlmRequest, h: &mut Vec<(String, String)>) {
    let configured = req
        .model
        .headers
        .as_ref()
        .and_then(|m| {
            m.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        })
        .map(|(_, v)| v.as_str().map_or_else(|| v.to_string(), str::to_string));
    h.retain(|(k, _)| !k.eq_ignore_ascii_case("authorization"));
    if let Some(v) = configured {
        h.push(("authorization".into(), v));
    }
    let key = req.api_key.as_deref().unwrap_or("");
    put_header(h, "cf-aig-authorization", &format!("Bearer {key}"));
}

/// The headers the OpenAI SDK sends (both OpenAI APIs), the bearer key, then the model's headers.
pub fn sdk_headers(req: &LlmRequest) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = vec![
        ("accept".into(), "application/json".into()),
        ("content-type".into(), "application/json".into()),
    ];
    if let Some(package) = Dialect::of(req.sdk).stainless_package {
        h.push((
            "user-agent".into(),
            crate::llm::http::pi_user_agent(req.sdk),
        ));
        h.push(("x-stainless-timeout".into(), "300".into()));
        h.extend(crate::llm::http::stainless_platform(package));
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
pub fn normalize_call_item_id(id: &str, provider: &str) -> String {
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

/// pi's tool-call id normalisation for this API: ids of the Responses API (`call|item`) become
/// the call id, sanitised, at most 40 characters; OpenAI's own ids are cut to 40; others stay.
fn normalize_id_for(model: &Model) -> impl Fn(&str) -> String + '_ {
    move |id: &str| match id.split_once('|') {
        Some((call, _)) => sanitize_id(call, 40),
        None if model.provider == "openai" => id.chars().take(40).collect(),
        None => id.to_string(),
    }
}

/// The body for `req` (tests and inspection; [`prepare`] sends it).
pub fn build_body(req: &LlmRequest) -> Value {
    build_body_with(req, &quirks(&req.model, req.sdk))
}

fn build_body_with(req: &LlmRequest, c: &Quirks) -> Value {
    let model = &req.model;
    let retention = retention(req);
    let cache_control = (c.cache_control_format.as_deref() == Some("anthropic")
        && retention != Retention::None)
        .then(|| {
            if retention == Retention::Long && c.supports_long_cache_retention {
                json!({"type": "ephemeral", "ttl": "1h"})
            } else {
                json!({"type": "ephemeral"})
            }
        });
    let mut messages = convert_messages(req, c);
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("messages".into(), Value::Null);
    body.insert("stream".into(), json!(true));
    let long = retention == Retention::Long && c.supports_long_cache_retention;
    if let Some(id) = &req.session_id {
        if (model.base_url.contains("api.openai.com") && retention != Retention::None) || long {
            body.insert("prompt_cache_key".into(), json!(id));
        }
    }
    if long {
        body.insert("prompt_cache_retention".into(), json!("24h"));
    }
    if c.supports_usage_in_streaming {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if c.supports_store {
        body.insert("store".into(), json!(false));
    }
    let max_tokens = api::default_max_tokens(req);
    if max_tokens > 0 {
        let field = if c.max_tokens_field == "max_tokens" {
            "max_tokens"
        } else {
            "max_completion_tokens"
        };
        body.insert(field.into(), json!(max_tokens));
    }
    let history_has_tools = req.messages.iter().any(|m| match m {
        LlmMessage::ToolResult(_) => true,
        LlmMessage::Assistant(a) => a.tool_calls().next().is_some(),
        LlmMessage::User(_) | LlmMessage::System(_) => false,
    });
    let (request_tools, _) = request_tools(req);
    if !request_tools.is_empty() {
        let mut tools = convert_tools(req, c, &request_tools);
        if let (Some(cc), Some(Value::Object(last))) = (&cache_control, tools.last_mut()) {
            last.insert("cache_control".into(), cc.clone());
        }
        body.insert("tools".into(), Value::Array(tools));
        if c.zai_tool_stream {
            body.insert("tool_stream".into(), json!(true));
        }
    } else if history_has_tools {
        body.insert("tools".into(), json!([]));
    }
    if let Some(cc) = &cache_control {
        add_cache_control(&mut messages, cc, Dialect::of(req.sdk).cache_tool_results);
    }
    body.insert("messages".into(), Value::Array(messages));
    reasoning_fields(req, c, &mut body);
    if let Some(compat) = &model.compat {
        if model.base_url.contains("openrouter.ai") {
            if let Some(routing) = compat.get("openRouterRouting").filter(|v| !v.is_null()) {
                body.insert("provider".into(), routing.clone());
            }
        }
        if model.base_url.contains("ai-gateway.vercel.sh") {
            if let Some(routing) = compat.get("vercelGatewayRouting") {
                let mut gateway = Map::new();
                for k in ["only", "order"] {
                    if let Some(v) = routing.get(k).filter(|v| truthy(v)) {
                        gateway.insert(k.into(), v.clone());
                    }
                }
                if !gateway.is_empty() {
                    body.insert("providerOptions".into(), json!({ "gateway": gateway }));
                }
            }
        }
    }
    Value::Object(body)
}

/// The thinking fields of each `thinkingFormat`; the level sent is the model's
/// `thinkingLevelMap` value for it, else its name.
fn reasoning_fields(req: &LlmRequest, c: &Quirks, body: &mut Map<String, Value>) {
    let model = &req.model;
    if !model.reasoning {
        return;
    }
    if Dialect::of(req.sdk).reasoning_off {
        return reasoning_fields_with_off(req, c, body);
    }
    let map = req.extra.thinking_map.as_ref();
    let on = req.thinking != ThinkingLevel::Off;
    let effort = || match map.and_then(|m| m.get(req.thinking)) {
        Some(Some(v)) => json!(v),
        _ => json!(req.thinking.as_str()),
    };
    match c.thinking_format.as_str() {
        "zai" | "qwen" => {
            body.insert("enable_thinking".into(), json!(on));
        }
        "qwen-chat-template" => {
            body.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": on, "preserve_thinking": true}),
            );
        }
        "deepseek" => {
            let kind = if on { "enabled" } else { "disabled" };
            body.insert("thinking".into(), json!({ "type": kind }));
            if on {
                body.insert("reasoning_effort".into(), effort());
            }
        }
        "openrouter" => {
            if on {
                body.insert("reasoning".into(), json!({"effort": effort()}));
            } else {
                match map.and_then(|m| m.get(ThinkingLevel::Off)) {
                    Some(None) => {}
                    Some(Some(v)) => {
                        body.insert("reasoning".into(), json!({ "effort": v }));
                    }
                    None => {
                        body.insert("reasoning".into(), json!({"effort": "none"}));
                    }
                }
            }
        }
        _ if c.supports_reasoning_effort => {
            if on {
                body.insert("reasoning_effort".into(), effort());
            } else if let Some(Some(off)) = map.and_then(|m| m.get(ThinkingLevel::Off)) {
                body.insert("reasoning_effort".into(), json!(off));
            }
        }
        _ => {}
    }
}

/// pi 0.87.1's thinking fields: z.ai's `thinking` object, an effort only where the provider
/// takes one (`supportsReasoningEffort`), DeepSeek's `disabled` only when the model can turn
/// thinking off, and the formats 0.87.1 added (`together`, `ant-ling`, `string-thinking`).
fn reasoning_fields_with_off(req: &LlmRequest, c: &Quirks, body: &mut Map<String, Value>) {
    let map = req.extra.thinking_map.as_ref();
    let on = req.thinking != ThinkingLevel::Off;
    // `thinkingLevelMap[level] ?? level`.
    let effort = || match map.and_then(|m| m.get(req.thinking)) {
        Some(Some(v)) => json!(v),
        _ => json!(req.thinking.as_str()),
    };
    // `thinkingLevelMap.off !== null`: the model can be asked not to think.
    let off_value = map.and_then(|m| m.get(ThinkingLevel::Off));
    let can_turn_off = !matches!(off_value, Some(None));
    match c.thinking_format.as_str() {
        "zai" => {
            let thinking = if on {
                json!({"type": "enabled", "clear_thinking": false})
            } else {
                json!({"type": "disabled"})
            };
            body.insert("thinking".into(), thinking);
            // A level mapped to null sends none.
            if on && c.supports_reasoning_effort {
                match map.and_then(|m| m.get(req.thinking)) {
                    Some(None) => {}
                    _ => {
                        body.insert("reasoning_effort".into(), effort());
                    }
                }
            }
        }
        "qwen" => {
            body.insert("enable_thinking".into(), json!(on));
            if on && c.supports_reasoning_effort {
                body.insert("reasoning_effort".into(), effort());
            }
        }
        "qwen-chat-template" => {
            body.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": on, "preserve_thinking": true}),
            );
        }
        "deepseek" => {
            if on {
                body.insert("thinking".into(), json!({"type": "enabled"}));
            } else if can_turn_off {
                body.insert("thinking".into(), json!({"type": "disabled"}));
            }
            if on && c.supports_reasoning_effort {
                body.insert("reasoning_effort".into(), effort());
            }
        }
        "openrouter" => {
            if on {
                body.insert("reasoning".into(), json!({"effort": effort()}));
            } else if can_turn_off {
                let v = match off_value {
                    Some(Some(v)) => json!(v),
                    _ => json!("none"),
                };
                body.insert("reasoning".into(), json!({ "effort": v }));
            }
        }
        "ant-ling" => {
            if let Some(Some(v)) = map.and_then(|m| m.get(req.thinking)).filter(|_| on) {
                body.insert("reasoning".into(), json!({ "effort": v }));
            }
        }
        "together" => {
            body.insert("reasoning".into(), json!({ "enabled": on }));
            if on && c.supports_reasoning_effort {
                body.insert("reasoning_effort".into(), effort());
            }
        }
        "string-thinking" => {
            if on {
                body.insert("thinking".into(), effort());
            } else if can_turn_off {
                let v = match off_value {
                    Some(Some(v)) => json!(v),
                    _ => json!("none"),
                };
                body.insert("thinking".into(), v);
            }
        }
        _ if c.supports_reasoning_effort => {
            if on {
                body.insert("reasoning_effort".into(), effort());
            } else if let Some(Some(off)) = off_value {
                body.insert("reasoning_effort".into(), json!(off));
            }
        }
        _ => {}
    }
}

/// Anthropic-style cache breakpoints (OpenRouter's `anthropic/*` models): the system prompt, the
/// last user or assistant message with text — pi 0.87.1 (`tool_results`) also a tool result's
/// (the tools' last entry is marked by the caller).
fn add_cache_control(messages: &mut [Value], cc: &Value, tool_results: bool) {
    if let Some(system) = messages
        .iter_mut()
        .find(|m| matches!(m["role"].as_str(), Some("system" | "developer")))
    {
        mark_text(system, cc);
    }
    for m in messages.iter_mut().rev() {
        let role = m["role"].as_str();
        let conversation =
            matches!(role, Some("user" | "assistant")) || (tool_results && role == Some("tool"));
        if conversation && mark_text(m, cc) {
            return;
        }
    }
}

/// Put `cache_control` on a message's text: a non-empty string content becomes one text part,
/// else the last text part of an array is marked. `false` when there is no text to mark.
fn mark_text(message: &mut Value, cc: &Value) -> bool {
    let Some(content) = message.get_mut("content") else {
        return false;
    };
    match content {
        Value::String(s) if !s.is_empty() => {
            let text = std::mem::take(s);
            *content = json!([{"type": "text", "text": text, "cache_control": cc}]);
            true
        }
        Value::Array(parts) => match parts
            .iter_mut()
            .rev()
            .find(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        {
            Some(Value::Object(part)) => {
                part.insert("cache_control".into(), cc.clone());
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// `JSON.stringify` of a value (numbers as JavaScript prints them).
fn js_json(v: &Value) -> String {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, crate::json::JsFormatter);
    let _ = serde::Serialize::serialize(v, &mut ser);
    String::from_utf8(buf).unwrap_or_default()
}

/// JavaScript truthiness of a JSON value.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

fn image_url(mime: &str, data: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}})
}

/// The request's tool declarations (strict as pi 0.87.1 sends them under 0.87).
fn convert_tools(req: &LlmRequest, c: &Quirks, list: &[crate::llm::ToolSchema]) -> Vec<Value> {
    let model = &req.model;
    let strict_tools = Dialect::of(req.sdk).strict_tools;
    list.iter()
        .map(|t| {
            let mut f = Map::new();
            f.insert("name".into(), json!(t.name));
            f.insert("description".into(), json!(t.description));
            if strict_tools {
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
    if !Dialect::of(req.sdk).transcript_tools {
        return (req.tools.clone(), false);
    }
    let mid = crate::llm::transcript::mid_convo(req);
    let additions =
        mid && crate::llm::strict::compat_flag(&req.model, "supportsMidConvoToolAdditions", false);
    crate::llm::transcript::request_tools(req, additions)
}

fn convert_messages(req: &LlmRequest, c: &Quirks) -> Vec<Value> {
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
    let call_item_ids = Dialect::of(req.sdk).call_item_ids;
    let per_provider = normalize_id_for(model);
    let normalize = move |id: &str| {
        if call_item_ids {
            normalize_call_item_id(id, &provider)
        } else {
            per_provider(id)
        }
    };
    let mut msgs = transform_messages(
        &req.messages,
        model,
        Some(&normalize),
        crate::llm::transform::ForeignThinking::of(req.sdk),
    );
    if !keep_system {
        msgs = crate::llm::transcript::collapsed(msgs);
    }
    #[derive(PartialEq)]
    enum Last {
        Other,
        ToolResult,
    }
    let mut last = Last::Other;
    let mut i = 0;
    while i < msgs.len() {
        let msg: &LlmMessage = &msgs[i];
        i += 1;
        if c.requires_assistant_after_tool_result
            && last == Last::ToolResult
            && matches!(msg, LlmMessage::User(_))
        {
            out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
        }
        match msg {
            // The first one is the prompt above; later ones (a model that takes them in place)
            // where they are: tools added, then the changed sections.
            LlmMessage::System(s) => {
                if i > 1 {
                    let added: Vec<crate::llm::ToolSchema> = s
                        .tools_added
                        .iter()
                        .flatten()
                        .filter(|_| anchored)
                        .map(crate::llm::transcript::schema)
                        .collect();
                    if !added.is_empty() {
                        out.push(json!({"role": "system", "tools": convert_tools(req, c, &added)}));
                    }
                    let text = crate::llm::transcript::render_update(s);
                    if !text.is_empty() {
                        out.push(json!({"role": role, "content": text}));
                    }
                }
                last = Last::Other;
                continue;
            }
            LlmMessage::User(u) => match &u.content {
                UserContent::Text(s) => out.push(json!({"role": "user", "content": s})),
                UserContent::Blocks(blocks) => {
                    let parts: Vec<Value> = blocks
                        .iter()
                        .filter_map(|b| match b {
                            Content::Text(t) => Some(json!({"type": "text", "text": t.text})),
                            Content::Image(img) => Some(image_url(&img.mime_type, &img.data)),
                            _ => None,
                        })
                        .collect();
                    if parts.is_empty() {
                        continue;
                    }
                    out.push(json!({"role": "user", "content": parts}));
                }
            },
            LlmMessage::Assistant(a) => {
                let mut m = Map::new();
                m.insert("role".into(), json!("assistant"));
                m.insert(
                    "content".into(),
                    if c.requires_assistant_after_tool_result {
                        json!("")
                    } else {
                        Value::Null
                    },
                );
                let texts: Vec<&str> = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Content::Text(t) if !t.text.trim().is_empty() => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let text = texts.concat();
                let thinking: Vec<&crate::message::ThinkingContent> = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Content::Thinking(t) if !t.thinking.trim().is_empty() => Some(t),
                        _ => None,
                    })
                    .collect();
                if !thinking.is_empty() {
                    if c.requires_thinking_as_text {
                        let joined = thinking
                            .iter()
                            .map(|t| t.thinking.as_str())
                            .collect::<Vec<_>>()
                            .join("\n\n");
                        let mut parts = vec![json!({"type": "text", "text": joined})];
                        parts.extend(texts.iter().map(|t| json!({"type": "text", "text": t})));
                        m.insert("content".into(), Value::Array(parts));
                    } else {
                        if !text.is_empty() {
                            m.insert("content".into(), json!(text));
                        }
                        // The field the reasoning came in (`reasoning_content`, `reasoning`, …).
                        if let Some(field) = thinking[0]
                            .thinking_signature
                            .as_deref()
                            .filter(|s| !s.is_empty())
                        {
                            let joined = thinking
                                .iter()
                                .map(|t| t.thinking.as_str())
                                .collect::<Vec<_>>()
                                .join("\n");
                            m.insert(field.to_string(), json!(joined));
                        }
                    }
                } else if !text.is_empty() {
                    m.insert("content".into(), json!(text));
                }
                let calls: Vec<&crate::message::ToolCall> = a.tool_calls().collect();
                if !calls.is_empty() {
                    let tool_calls: Vec<Value> = calls
                        .iter()
                        .map(|tc| {
                            json!({"id": tc.id, "type": "function",
                                   "function": {"name": tc.name, "arguments": js_json(&tc.arguments)}})
                        })
                        .collect();
                    m.insert("tool_calls".into(), Value::Array(tool_calls));
                    let details: Vec<Value> = calls
                        .iter()
                        .filter_map(|tc| tc.thought_signature.as_deref())
                        .filter(|s| !s.is_empty())
                        .filter_map(|s| serde_json::from_str::<Value>(s).ok())
                        .filter(truthy)
                        .collect();
                    if !details.is_empty() {
                        m.insert("reasoning_details".into(), Value::Array(details));
                    }
                }
                if c.requires_reasoning_content_on_assistant_messages
                    && model.reasoning
                    && !m.contains_key("reasoning_content")
                {
                    m.insert("reasoning_content".into(), json!(""));
                }
                let has_content = match m.get("content") {
                    Some(Value::String(s)) => !s.is_empty(),
                    Some(Value::Array(a)) => !a.is_empty(),
                    _ => false,
                };
                if !has_content && !m.contains_key("tool_calls") {
                    continue;
                }
                out.push(Value::Object(m));
            }
            LlmMessage::ToolResult(first) => {
                let mut images = Vec::new();
                let mut r = first;
                loop {
                    let text: Vec<&str> = r
                        .content
                        .iter()
                        .filter_map(|b| match b {
                            Content::Text(t) => Some(t.text.as_str()),
                            _ => None,
                        })
                        .collect();
                    let text = text.join("\n");
                    let mut m = Map::new();
                    m.insert("role".into(), json!("tool"));
                    m.insert(
                        "content".into(),
                        json!(if text.is_empty() {
                            "(see attached image)"
                        } else {
                            &text
                        }),
                    );
                    m.insert("tool_call_id".into(), json!(r.tool_call_id));
                    if c.requires_tool_result_name && !r.tool_name.is_empty() {
                        m.insert("name".into(), json!(r.tool_name));
                    }
                    out.push(Value::Object(m));
                    if images_ok {
                        images.extend(r.content.iter().filter_map(|b| match b {
                            Content::Image(img) => Some(image_url(&img.mime_type, &img.data)),
                            _ => None,
                        }));
                    }
                    match msgs.get(i) {
                        Some(LlmMessage::ToolResult(next)) => {
                            r = next;
                            i += 1;
                        }
                        _ => break,
                    }
                }
                if images.is_empty() {
                    last = Last::ToolResult;
                } else {
                    if c.requires_assistant_after_tool_result {
                        out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
                    }
                    let mut parts = vec![
                        json!({"type": "text", "text": "Attached image(s) from tool result:"}),
                    ];
                    parts.extend(images);
                    out.push(json!({"role": "user", "content": parts}));
                    last = Last::Other;
                }
                continue;
            }
        }
        last = Last::Other;
    }
    out
}

// ------------------------------------------------------------------------------------------------

/// The stream decoder, as pi 0.73.1's: one text block and one thinking block per message
/// (later deltas of either kind extend them, whatever came between), tool calls matched by their
/// `index` or `id`, and every block closed (`*_end`, in content order) when the stream ends.
#[derive(Default)]
pub struct Decoder {
    text: Option<usize>,
    thinking: Option<usize>,
    /// Tool blocks by the stream's `index` and by the id last seen for them; the blocks that
    /// have an index. Maps, so a hostile stream of many tool calls costs linear time.
    tools_by_index: HashMap<u64, usize>,
    tools_by_id: HashMap<String, usize>,
    indexed: HashSet<usize>,
    /// The first tool block with each id (where `reasoning_details` attach).
    first_with_id: HashMap<String, usize>,
    stop: Option<StopReason>,
    /// A finish reason that maps to an error (`Provider finish_reason: …`).
    error: Option<String>,
    /// pi 0.87.1 (`compat.supportsFinishReason`): a stream that ends without a finish reason
    /// fails; `Some(false)`: the content decides; `None`: pi 0.73.1 (a clean stop).
    finish_required: Option<bool>,
    /// pi 0.87.1: OpenCode Go's `reasoning` field is replayed as `reasoning_content`.
    reasoning_as_content: bool,
    /// [`Dialect::usage_details`].
    usage_details: bool,
}

impl Decoder {
    pub fn new(req: &LlmRequest) -> Decoder {
        let d = Dialect::of(req.sdk);
        Decoder {
            finish_required: d
                .extended_detection
                .then(|| quirks(&req.model, req.sdk).supports_finish_reason),
            reasoning_as_content: d.opencode_go_reasoning && req.model.provider == "opencode-go",
            usage_details: d.usage_details,
            ..Decoder::default()
        }
    }

    fn tool_block(&mut self, call: &Value, b: &mut Builder, out: &mut Vec<StreamEvent>) -> usize {
        // Any JSON number is an index (its bits as the key).
        let index = call.get("index").and_then(Value::as_f64).map(f64::to_bits);
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let found = index
            .and_then(|n| self.tools_by_index.get(&n))
            .or_else(|| id.and_then(|s| self.tools_by_id.get(s)))
            .copied();
        let block = match found {
            Some(i) => i,
            None => {
                let name = call
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let i = b.start_tool(id.unwrap_or(""), name, out);
                if let Some(id) = id {
                    self.first_with_id.entry(id.to_string()).or_insert(i);
                }
                i
            }
        };
        // A new block, or one first seen without an index, takes this index.
        if let Some(n) = index {
            if self.indexed.insert(block) {
                self.tools_by_index.insert(n, block);
            }
        }
        if let Some(id) = id {
            self.tools_by_id.insert(id.to_string(), block);
        }
        block
    }

    /// The end of the stream: every block closed in content order, then the final message.
    fn complete(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if b.finished {
            return;
        }
        b.start(out);
        for i in 0..b.msg.content.len() {
            b.end_block(i, out);
        }
        let stop = match (self.stop, self.finish_required) {
            (Some(s), _) => s,
            (None, None) => StopReason::Stop,
            (None, Some(true)) => {
                b.fail(
                    "Stream ended without finish_reason".into(),
                    false,
                    None,
                    out,
                );
                return;
            }
            (None, Some(false)) => {
                let tools = b
                    .msg
                    .content
                    .iter()
                    .any(|c| matches!(c, Content::ToolCall(_)));
                if tools {
                    StopReason::ToolUse
                } else {
                    StopReason::Stop
                }
            }
        };
        match stop {
            StopReason::Error => {
                let msg = self
                    .error
                    .take()
                    .unwrap_or_else(|| "Provider returned an error stop reason".into());
                b.fail(msg, false, None, out);
            }
            stop => b.finish(stop, out),
        }
    }
}

/// pi's `mapStopReason`: unknown reasons are errors named after the reason.
fn map_finish(r: &str) -> (StopReason, Option<String>) {
    match r {
        "stop" | "end" => (StopReason::Stop, None),
        "length" => (StopReason::Length, None),
        "tool_calls" | "function_call" => (StopReason::ToolUse, None),
        other => (
            StopReason::Error,
            Some(format!("Provider finish_reason: {other}")),
        ),
    }
}

/// A token count as JavaScript reads it (`x || 0`).
fn count(v: Option<&Value>) -> u64 {
    v.and_then(Value::as_f64)
        .filter(|f| f.is_finite() && *f > 0.0)
        .map_or(0, |f| f as u64)
}

/// pi's `parseChunkUsage`: cached prompt tokens (`prompt_tokens_details.cached_tokens`, or
/// DeepSeek's `prompt_cache_hit_tokens`) less the tokens written to the cache in this request.
fn chunk_usage(u: &Value, usage_details: bool) -> Usage {
    let prompt = count(u.get("prompt_tokens"));
    let details = u.get("prompt_tokens_details");
    let cached = details
        .and_then(|d| d.get("cached_tokens"))
        .filter(|v| !v.is_null())
        .or_else(|| u.get("prompt_cache_hit_tokens").filter(|v| !v.is_null()))
        .or_else(|| {
            if usage_details {
                u.get("cached_tokens")
            } else {
                None
            }
        });
    let reported = count(cached);
    let cache_write = count(details.and_then(|d| d.get("cache_write_tokens")));
    // pi 0.87.1 takes the cached tokens as reads whatever was written.
    let cache_read = if cache_write > 0 && !usage_details {
        reported.saturating_sub(cache_write)
    } else {
        reported
    };
    let input = prompt.saturating_sub(cache_read + cache_write);
    // completion_tokens already counts the reasoning tokens (pi 0.87.1 reports them apart).
    let output = count(u.get("completion_tokens"));
    Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: input + output + cache_read + cache_write,
        reasoning: usage_details
            .then(|| count(u.pointer("/completion_tokens_details/reasoning_tokens"))),
        ..Default::default()
    }
}

impl api::Decoder for Decoder {
    fn event(&mut self, ev: &SseEvent, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if ev.data.starts_with("[DONE]") {
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
        if let Some(err) = v.get("error").filter(|e| truthy(e)) {
            // The SDK's APIError for an error chunk; OpenRouter's upstream text appended.
            let mut msg = match err.get("message") {
                Some(Value::String(m)) if !m.is_empty() => m.clone(),
                Some(m) if truthy(m) => js_json(m),
                _ => js_json(err),
            };
            if let Some(raw) = err.pointer("/metadata/raw").filter(|r| truthy(r)) {
                msg.push('\n');
                match raw {
                    Value::String(s) => msg.push_str(s),
                    Value::Object(_) => msg.push_str("[object Object]"),
                    other => msg.push_str(&js_json(other)),
                }
            }
            b.fail(msg, false, None, out);
            return;
        }
        if !v.is_object() {
            return;
        }
        b.start(out);
        if b.msg.response_id.as_deref().is_none_or(str::is_empty) {
            if let Some(id) = v.get("id").and_then(Value::as_str) {
                b.msg.response_id = Some(id.to_string());
            }
        }
        if b.msg.response_model.is_none() {
            b.msg.response_model = v
                .get("model")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty() && *m != b.msg.model)
                .map(str::to_string);
        }
        let details = self.usage_details;
        let chunk_has_usage = v.get("usage").is_some_and(truthy);
        if chunk_has_usage {
            b.set_usage(chunk_usage(&v["usage"], details), out);
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return;
        };
        if !truthy(choice) {
            return;
        }
        // Moonshot reports usage on the choice.
        if !chunk_has_usage {
            if let Some(u) = choice.get("usage").filter(|u| truthy(u)) {
                b.set_usage(chunk_usage(u, details), out);
            }
        }
        if let Some(r) = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
        {
            if details {
                b.msg.raw_stop_reason = Some(r.to_string());
            }
            let (stop, error) = map_finish(r);
            self.stop = Some(stop);
            if error.is_some() {
                self.error = error;
            }
        }
        let Some(delta) = choice.get("delta").filter(|d| truthy(d)) else {
            return;
        };
        if let Some(t) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            let i = *self.text.get_or_insert_with(|| b.start_text(out));
            b.delta(i, t, out);
        }
        // The first non-empty of the fields servers put reasoning in.
        let reasoning = ["reasoning_content", "reasoning", "reasoning_text"]
            .into_iter()
            .find_map(|f| {
                delta
                    .get(f)
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                    .map(|t| (f, t))
            });
        if let Some((field, t)) = reasoning {
            let i = match self.thinking {
                Some(i) => i,
                None => {
                    let field = if self.reasoning_as_content && field == "reasoning" {
                        "reasoning_content"
                    } else {
                        field
                    };
                    let i = b.start_thinking_signed(Some(field.to_string()), out);
                    self.thinking = Some(i);
                    i
                }
            };
            b.delta(i, t, out);
        }
        if let Some(Value::Array(calls)) = delta.get("tool_calls") {
            // Entries that are not objects are skipped (pi's decoder would throw on `null`).
            for call in calls.iter().filter(|c| c.is_object()) {
                let i = self.tool_block(call, b, out);
                if let Some(Content::ToolCall(tc)) = b.block_mut(i) {
                    if tc.id.is_empty() {
                        if let Some(id) = call.get("id").and_then(Value::as_str) {
                            tc.id = id.to_string();
                            if !id.is_empty() {
                                self.first_with_id.entry(id.to_string()).or_insert(i);
                            }
                        }
                    }
                    if tc.name.is_empty() {
                        if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                            tc.name = name.to_string();
                        }
                    }
                }
                // Every entry is an event, with an empty delta when it carries no arguments.
                let args = call
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                b.delta(i, args, out);
            }
        }
        if let Some(Value::Array(details)) = delta.get("reasoning_details") {
            for d in details {
                if d.get("type").and_then(Value::as_str) != Some("reasoning.encrypted")
                    || !d.get("id").is_some_and(truthy)
                    || !d.get("data").is_some_and(truthy)
                {
                    continue;
                }
                let block = d
                    .get("id")
                    .and_then(Value::as_str)
                    .and_then(|id| self.first_with_id.get(id));
                if let Some(Content::ToolCall(tc)) = block.and_then(|i| b.block_mut(*i)) {
                    tc.thought_signature = Some(js_json(d));
                }
            }
        }
    }

    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        self.complete(b, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::api::Decoder as _;

    fn feed(lines: &[&str]) -> (AssistantMessage, Vec<StreamEvent>) {
        let model = crate::llm::faux::model();
        let mut b = Builder::new(&model);
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for l in lines {
            let ev = SseEvent {
                event: None,
                data: l.to_string(),
                id: None,
                retry: None,
            };
            d.event(&ev, &mut b, &mut out);
        }
        d.end(&mut b, &mut out);
        (b.msg, out)
    }

    use crate::message::AssistantMessage;

    #[test]
    fn odd_chunks_are_skipped_not_trusted() {
        let (m, _) = feed(&[
            "null",
            "[]",
            "5",
            r#"{"choices":[null]}"#,
            r#"{"choices":{"0":1}}"#,
            r#"{"choices":[{"delta":{"content":7,"tool_calls":[null,5,{"index":-1},{"index":1e30}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}"#,
            r#"{"choices":[{"finish_reason":7,"delta":{"reasoning_details":[{"type":"reasoning.encrypted","id":"nope","data":"x"}]}}]}"#,
        ]);
        assert_eq!(m.stop_reason, StopReason::Stop);
        // Entries that are not objects are skipped; any number is an index.
        let calls = m.tool_calls().count();
        assert_eq!(calls, 3);
    }

    #[test]
    fn many_tool_calls_stay_linear() {
        // 20,000 parallel calls, then a detail for each: maps, not scans.
        let mut lines = Vec::new();
        for i in 0..20_000 {
            lines.push(format!(
                r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":{i},"id":"c{i}","function":{{"name":"f","arguments":"{{}}"}}}}]}}}}]}}"#
            ));
        }
        for i in 0..20_000 {
            lines.push(format!(
                r#"{{"choices":[{{"delta":{{"reasoning_details":[{{"type":"reasoning.encrypted","id":"c{i}","data":"d"}}]}}}}]}}"#
            ));
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (m, _) = feed(&refs);
        assert_eq!(m.tool_calls().count(), 20_000);
        assert!(m.tool_calls().all(|t| t.thought_signature.is_some()));
    }
}
