//! Anthropic Messages API (`anthropic-messages`, spec 8.1): the request body pith sends and the
//! decoder of the SSE stream (`message_start`, `content_block_*`, `message_delta`,
//! `message_stop`, `error`). Both are pure; `stream.rs` does the I/O.

use serde_json::{Map, Value, json};

use crate::llm::api::{self, Body, Builder, Prepared, WireApi};
use crate::llm::body::{self, BodySink, JsonOut};
use crate::llm::sse::SseEvent;
use crate::llm::transform::{Transformed, sanitize_id, transform_borrowed};
use crate::llm::{LlmRequest, Model, StreamEvent, ToolSchema};
use crate::message::{Content, LlmMessage, StopReason, ThinkingLevel, Usage, UserContent};
use crate::protocol::SdkGeneration;

/// The wire details of the Anthropic Messages API in one SDK generation, built from
/// [`LlmRequest::sdk`].
#[derive(Clone, Copy, Debug)]
pub struct Dialect {
    /// The SDK's beta messages endpoint (`/v1/messages?beta=true`), with the beta features sent
    /// as the SDK's `betas` parameter ([`configured_betas`]): they win over a configured
    /// `anthropic-beta` header.
    pub beta_api: bool,
    /// `x-stainless-timeout`, in seconds.
    pub timeout_secs: &'static str,
    /// The Stainless platform headers of this `@anthropic-ai/sdk` package version.
    pub stainless_package: Option<&'static str>,
    /// The SDK's `User-Agent`; `None`: pi's own ([`crate::llm::http::pi_user_agent`]).
    pub sdk_user_agent: Option<&'static str>,
    /// Claude Code's version in an OAuth request's `User-Agent` (`claude-cli/<v>`).
    pub claude_cli: &'static str,
    /// The model's quirks are read: `sendSessionAffinityHeaders`, `supportsMidConvoEffort`
    /// (managed effort), `forceAdaptiveThinking`, `supportsCacheControlOnTools`,
    /// `supportsStrictTools`, `allowEmptySignature`, `allowedFallbackModels`.
    pub model_quirks: bool,
    /// The body fields after `messages` ([`body_fields_clamped`]): `max_tokens` clamped to the
    /// context window, thinking off not said where the thinking map cannot turn it off.
    pub clamped_body: bool,
    /// Thinking blocks sent back: a signed block with empty text is kept, an unsigned one goes
    /// as text (or with an empty signature where the model allows it).
    pub signed_thinking_replay: bool,
    /// The answer: `stop_details`, `rawStopReason`, `usage.cacheWrite1h`, `usage.reasoning`,
    /// the answering model, and a stream must end with `message_stop`.
    pub strict_stream: bool,
    /// A tool's `additionalProperties` is kept in its `input_schema` (pi 1.6.0: the model
    /// knows whether extra arguments are allowed).
    pub tool_additional_properties: bool,
}

impl Dialect {
    pub const fn of(sdk: SdkGeneration) -> Dialect {
        match sdk {
            SdkGeneration::Pi073 => Dialect {
                beta_api: false,
                timeout_secs: "600",
                stainless_package: None,
                sdk_user_agent: Some("Anthropic/JS 0.91.1"),
                claude_cli: "2.1.75",
                model_quirks: false,
                clamped_body: false,
                signed_thinking_replay: false,
                strict_stream: false,
                tool_additional_properties: false,
            },
            SdkGeneration::Pi087 => Dialect {
                beta_api: true,
                timeout_secs: "300",
                stainless_package: Some("0.124.0"),
                sdk_user_agent: None,
                claude_cli: "2.1.280",
                model_quirks: true,
                clamped_body: true,
                signed_thinking_replay: true,
                strict_stream: true,
                tool_additional_properties: false,
            },
            SdkGeneration::Pi16 => Dialect {
                stainless_package: Some("0.129.0"),
                tool_additional_properties: true,
                ..Dialect::of(SdkGeneration::Pi087)
            },
        }
    }

    /// The `User-Agent` of an SDK request.
    fn user_agent(&self, sdk: SdkGeneration) -> String {
        match self.sdk_user_agent {
            Some(agent) => agent.to_string(),
            None => crate::llm::http::pi_user_agent(sdk),
        }
    }
}

const CLAUDE_CODE_IDENTITY: &str = "You are Claude Code, Anthropic's official CLI for Claude.";
/// Claude Code's tool names in their canonical casing (the same list in pi 0.73.1 and 0.87.1).
const CLAUDE_CODE_TOOLS: [&str; 17] = [
    "Read",
    "Write",
    "Edit",
    "Bash",
    "Grep",
    "Glob",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "KillShell",
    "NotebookEdit",
    "Skill",
    "Task",
    "TaskOutput",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
];

/// A Claude subscription (OAuth) token: Claude Code's identity and tool names. Copilot's and
/// Cloudflare AI Gateway's keys never count, whatever they look like.
fn is_oauth(req: &LlmRequest) -> bool {
    req.model.provider != "github-copilot"
        && !crate::llm::cloudflare::is_gateway(&req.model.provider)
        && req
            .api_key
            .as_deref()
            .is_some_and(|k| k.contains("sk-ant-oat"))
}

fn is_adaptive(model: &Model) -> bool {
    [
        "opus-4-6",
        "opus-4.6",
        "opus-4-7",
        "opus-4.7",
        "sonnet-4-6",
        "sonnet-4.6",
    ]
    .iter()
    .any(|p| model.id.contains(p))
}

/// The cache breakpoint marker, `None` for a request that must not write the cache (pi 0.87.1's
/// summaries: `cacheRetention: "none"`).
fn cache_control(req: &LlmRequest) -> Option<Value> {
    (!req.no_cache).then(|| cache_control_for(req))
}

/// `ttl: 1h` with `PI_CACHE_RETENTION=long` unless the model's
/// `compat.supportsLongCacheRetention` is false.
fn cache_control_for(req: &LlmRequest) -> Value {
    let long = req
        .extra
        .var("PI_CACHE_RETENTION")
        .is_some_and(|v| v == "long");
    let supported = req
        .model
        .compat
        .as_ref()
        .and_then(|c| c.get("supportsLongCacheRetention"))
        .and_then(Value::as_bool)
        .unwrap_or(true);
    if long && supported {
        json!({"type": "ephemeral", "ttl": "1h"})
    } else {
        json!({"type": "ephemeral"})
    }
}

/// Tool name as sent: Claude Code casing for known tools under OAuth.
fn wire_tool_name(name: &str, oauth: bool) -> &str {
    if oauth {
        if let Some(cc) = CLAUDE_CODE_TOOLS
            .iter()
            .find(|cc| cc.eq_ignore_ascii_case(name))
        {
            return cc;
        }
    }
    name
}
/// The `anthropic-messages` wire API.
pub struct Anthropic;

pub const API: Anthropic = Anthropic;

impl WireApi for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic-messages"
    }

    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String> {
        let mut p = prepare(req);
        if crate::llm::cloudflare::is_gateway(&req.model.provider) {
            let base = crate::llm::cloudflare::resolve_base_url(req)?;
            let beta = if Dialect::of(req.sdk).beta_api {
                "?beta=true"
            } else {
                ""
            };
            p.url = format!("{}/v1/messages{beta}", base.trim_end_matches('/'));
        }
        Ok(p)
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
        api::stainless_message(status, body, false)
    }

    fn provider_thinking_level(&self, req: &LlmRequest) -> Option<String> {
        provider_thinking_level(req)
    }

    fn stainless(&self) -> bool {
        true
    }
}

pub fn prepare(req: &LlmRequest) -> Prepared {
    let base = req.model.base_url.trim_end_matches('/');
    Prepared {
        // pi 0.87.1 calls the SDK's beta messages endpoint.
        url: if Dialect::of(req.sdk).beta_api {
            format!("{base}/v1/messages?beta=true")
        } else {
            format!("{base}/v1/messages")
        },
        headers: headers(req),
        body: Body::Write(write_body),
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
    let d = Dialect::of(req.sdk);
    let betas: Vec<String> = if d.beta_api {
        configured_betas(req, oauth)
    } else {
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
        betas.into_iter().map(str::to_string).collect()
    };
    let mut h: Vec<(String, String)> = vec![
        ("accept".into(), "application/json".into()),
        ("content-type".into(), "application/json".into()),
        ("anthropic-version".into(), "2023-06-01".into()),
        (
            "anthropic-dangerous-direct-browser-access".into(),
            "true".into(),
        ),
        ("x-stainless-lang".into(), "js".into()),
        ("x-stainless-timeout".into(), d.timeout_secs.into()),
    ];
    if let Some(package) = d.stainless_package {
        h.extend(crate::llm::http::stainless_platform(package));
    }
    // pi 0.87.1 sends its own User-Agent instead of the SDK's.
    let sdk_agent = d.user_agent(req.sdk);
    if !betas.is_empty() {
        h.push(("anthropic-beta".into(), betas.join(",")));
    }
    match (&req.api_key, oauth) {
        // Cloudflare AI Gateway: the key in its own header, neither `x-api-key` nor a bearer.
        (key, _) if crate::llm::cloudflare::is_gateway(&req.model.provider) => {
            let key = key.as_deref().unwrap_or("");
            h.push(("cf-aig-authorization".into(), format!("Bearer {key}")));
            h.push(("user-agent".into(), sdk_agent));
        }
        // Copilot: the token as a bearer, the editor's identity from the model's headers.
        (Some(k), _) if copilot => {
            h.push(("authorization".into(), format!("Bearer {k}")));
            h.push(("user-agent".into(), d.user_agent(req.sdk)));
        }
        (Some(k), true) => {
            h.push(("authorization".into(), format!("Bearer {k}")));
            h.push(("user-agent".into(), format!("claude-cli/{}", d.claude_cli)));
            h.push(("x-app".into(), "cli".into()));
        }
        (Some(k), false) => {
            h.push(("x-api-key".into(), k.clone()));
            h.push(("user-agent".into(), sdk_agent));
        }
        (None, _) => h.push(("user-agent".into(), sdk_agent)),
    }
    if d.model_quirks && !copilot && !oauth {
        if let Some(header) = session_affinity_header(req) {
            h.push(header);
        }
    }
    crate::llm::http::merge_model_headers(&mut h, &req.model);
    // pi 0.87.1 sends the beta features as the SDK's `betas` parameter, which wins over a
    // configured `anthropic-beta` header (whose features it already took, deduplicated).
    if d.beta_api {
        h.retain(|(k, _)| !k.eq_ignore_ascii_case("anthropic-beta"));
        if !betas.is_empty() {
            h.push(("anthropic-beta".into(), betas.join(",")));
        }
    }
    if copilot {
        crate::llm::openai_completions::copilot_headers(req, &mut h);
    }
    h
}

/// The model's `compat.forceAdaptiveThinking` (pi 0.87.1: adaptive thinking with an effort
/// instead of a token budget).
fn force_adaptive(model: &Model) -> bool {
    crate::llm::strict::compat_flag(model, "forceAdaptiveThinking", false)
}

/// The model's `compat.supportsMidConvoEffort` (pi 0.87.1: the effort travels as system messages
/// in the conversation, the request always thinks adaptively at "high").
fn managed_effort(model: &Model) -> bool {
    crate::llm::strict::compat_flag(model, "supportsMidConvoEffort", false)
}

/// The model's `compat.allowedFallbackModels`.
fn fallback_models(model: &Model) -> Vec<&Value> {
    model
        .compat
        .as_ref()
        .and_then(|c| c.get("allowedFallbackModels"))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// pi 0.87.1: the effort a managed-effort model (`compat.supportsMidConvoEffort`) is asked to
/// answer at (the thinking level's effort, "high" with thinking off), recorded on its reply.
fn provider_thinking_level(req: &LlmRequest) -> Option<String> {
    (Dialect::of(req.sdk).model_quirks
        && req.model.api == "anthropic-messages"
        && managed_effort(&req.model))
    .then(|| active_effort(req))
}

fn active_effort(req: &LlmRequest) -> String {
    if thinking_enabled(req) && force_adaptive(&req.model) {
        adaptive_effort(req)
    } else {
        "high".into()
    }
}

fn thinking_enabled(req: &LlmRequest) -> bool {
    req.thinking != ThinkingLevel::Off
}

/// pi 0.87.1's beta features: those of a configured `anthropic-beta` header (deduplicated, none
/// when it is null), else the ones the request needs.
fn configured_betas(req: &LlmRequest, oauth: bool) -> Vec<String> {
    let model = &req.model;
    let configured = model.headers.as_ref().and_then(|h| {
        h.iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case("anthropic-beta"))
            .map(|(_, v)| v)
    });
    let mut out: Vec<String> = Vec::new();
    let mut add = |f: &str| {
        if !out.iter().any(|x| x == f) {
            out.push(f.to_string());
        }
    };
    match configured {
        Some(Value::Null) => {}
        Some(v) => {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            for f in text.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                add(f);
            }
        }
        None => {
            if oauth {
                add("claude-code-20250219");
                add("oauth-2025-04-20");
            }
            if !req.tools.is_empty() && !eager_tool_streaming(model) {
                add("fine-grained-tool-streaming-2025-05-14");
            }
            if model.reasoning && thinking_enabled(req) && !force_adaptive(model) {
                add("interleaved-thinking-2025-05-14");
            }
            if !fallback_models(model).is_empty() {
                add("server-side-fallback-2026-07-01");
            }
            if managed_effort(model) {
                add("mid-conversation-output-config-2026-07-01");
                add("thinking-binding-controls-2026-08-01");
            }
            if native_tool_changes(req).is_some() {
                add("mid-conversation-tool-changes-2026-07-01");
            }
        }
    }
    out
}

/// pi 0.87.1's session affinity header (`compat.sendSessionAffinityHeaders`, on by default for
/// OpenRouter): the session id, unless the request writes no cache.
fn session_affinity_header(req: &LlmRequest) -> Option<(String, String)> {
    let model = &req.model;
    let openrouter = model.provider == "openrouter" || model.base_url.contains("openrouter.ai");
    let compat = model.compat.as_ref();
    let send = compat
        .and_then(|c| c.get("sendSessionAffinityHeaders"))
        .and_then(Value::as_bool)
        .unwrap_or(openrouter);
    let format = compat
        .and_then(|c| c.get("sessionAffinityFormat"))
        .and_then(Value::as_str)
        .or(openrouter.then_some("openrouter"));
    let id = req.session_id.as_ref().filter(|_| send && !req.no_cache)?;
    let name = if format == Some("openrouter") {
        "x-session-id"
    } else {
        "x-session-affinity"
    };
    Some((name.into(), id.clone()))
}

/// The request body as a JSON value (what [`body_bytes`] writes, parsed back: for tests and
/// inspection).
pub fn build_body(req: &LlmRequest) -> Value {
    serde_json::from_slice(&body_bytes(req)).unwrap_or(Value::Null)
}

/// The request body, serialised ([`write_body`] into memory).
pub fn body_bytes(req: &LlmRequest) -> Vec<u8> {
    body::to_bytes(write_body, req)
}

/// Write the request body. The history (`messages`, by far the largest part) is written
/// straight from the messages, a message at a time (the sink hands the body on in chunks while
/// it is sent: `body.rs`); the small fields around it are built as values.
pub fn write_body(req: &LlmRequest, sink: &mut BodySink) {
    let model = &req.model;
    let oauth = is_oauth(req);
    let cc = cache_control(req);
    let rest = body_fields(req, cc.as_ref(), oauth);
    sink.buf.extend_from_slice(b"{\"model\":");
    put(&mut sink.buf, &model.id);
    sink.buf.extend_from_slice(b",\"messages\":");
    if sink.counting() {
        // The first pass over a long body: the history only counted, not written.
        sink.add_counted(count_messages(req, cc.as_ref(), oauth));
    } else {
        write_messages(sink, req, cc.as_ref(), oauth);
    }
    let out = &mut sink.buf;
    for (k, v) in &rest {
        out.push(b',');
        put(out, k);
        out.push(b':');
        put(out, v);
    }
    out.push(b'}');
}

/// Every body field after `messages`, in the reference's order.
fn body_fields(req: &LlmRequest, cc: Option<&Value>, oauth: bool) -> Map<String, Value> {
    if Dialect::of(req.sdk).clamped_body {
        return body_fields_clamped(req, cc, oauth);
    }
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
            // The model's `thinkingLevelMap` value for the level (Opus 4.6's `xhigh` is `max`).
            let mapped = req
                .extra
                .thinking_map
                .as_ref()
                .and_then(|m| m.get(req.thinking))
                .flatten();
            let effort = mapped.unwrap_or(match req.thinking {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
                ThinkingLevel::Medium => "medium",
                _ => "high",
            });
            thinking = Some(json!({"type": "adaptive", "display": "summarized"}));
            output_config = Some(json!({ "effort": effort }));
        } else {
            let mut budget = crate::llm::thinking_budget(req.thinking, &req.extra.thinking_budgets);
            max_tokens = (max_tokens + budget).min(model.max_tokens);
            if max_tokens <= budget {
                budget = max_tokens.saturating_sub(1024);
            }
            thinking =
                Some(json!({"type": "enabled", "budget_tokens": budget, "display": "summarized"}));
        }
    } else if model.reasoning {
        // Thinking off on a reasoning model is said explicitly (pi 0.87.1: unless its thinking
        // map says it cannot be turned off).
        let cannot_disable = Dialect::of(req.sdk).clamped_body
            && req
                .extra
                .thinking_map
                .as_ref()
                .and_then(|m| m.get(ThinkingLevel::Off))
                == Some(None);
        if !cannot_disable {
            thinking = Some(json!({"type": "disabled"}));
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
    if let Some(tools) = tools_value(req, cc, oauth) {
        body.insert("tools".into(), tools);
    }
    if let Some(t) = thinking {
        body.insert("thinking".into(), t);
    }
    if let Some(o) = output_config {
        body.insert("output_config".into(), o);
    }
    body
}

/// pi 0.87.1's effort for adaptive thinking: the model's thinking level map, else low, medium or
/// high.
fn adaptive_effort(req: &LlmRequest) -> String {
    if let Some(Some(v)) = req
        .extra
        .thinking_map
        .as_ref()
        .and_then(|m| m.get(req.thinking))
    {
        return v.to_string();
    }
    match req.thinking {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    }
    .to_string()
}

/// Every body field after `messages` as pi 0.87.1 sends them: `max_tokens` clamped to the context
/// window (and grown by a thinking budget), thinking adaptive (`compat.forceAdaptiveThinking`),
/// budgeted, or explicitly disabled, the managed effort of `compat.supportsMidConvoEffort`, and
/// the allowed fallback models.
fn body_fields_clamped(req: &LlmRequest, cc: Option<&Value>, oauth: bool) -> Map<String, Value> {
    let model = &req.model;
    let mut body = Map::new();
    let enabled = thinking_enabled(req);
    let adaptive = force_adaptive(model);
    let mut max_tokens = api::default_max_tokens(req);
    let mut budget = 0;
    if enabled && !adaptive {
        let mut b = crate::llm::thinking_budget(req.thinking, &req.extra.thinking_budgets);
        let grown = (max_tokens + b).min(model.max_tokens);
        if grown <= b {
            b = b.min(grown.saturating_sub(1024));
        }
        max_tokens = crate::llm::estimate::clamp_max_tokens(req, grown);
        budget = b.min(max_tokens.saturating_sub(1024));
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
    // Taking system messages in place, the leading prompt is the first one's.
    let prompt = if crate::llm::transcript::mid_convo(req) {
        crate::llm::transcript::initial(&req.messages)
            .map(crate::llm::transcript::system_text)
            .unwrap_or_default()
    } else {
        req.system_prompt.clone()
    };
    if !prompt.is_empty() {
        system.push(block(&prompt));
    }
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    if let Some(initial) = native_tool_changes(req) {
        body.insert("tools".into(), native_tools_value(req, &initial, cc, oauth));
    } else if let Some(tools) = tools_value(req, cc, oauth) {
        body.insert("tools".into(), tools);
    }
    if managed_effort(model) {
        body.insert(
            "thinking".into(),
            json!({"type": "adaptive", "display": "summarized",
                "block_binding": {"prefix_mismatch_behavior": "drop_block"}}),
        );
        body.insert("output_config".into(), json!({"effort": "high"}));
    } else if model.reasoning {
        if enabled && adaptive {
            body.insert(
                "thinking".into(),
                json!({"type": "adaptive", "display": "summarized"}),
            );
            body.insert(
                "output_config".into(),
                json!({"effort": adaptive_effort(req)}),
            );
        } else if enabled {
            let budget = if budget == 0 { 1024 } else { budget };
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget, "display": "summarized"}),
            );
        } else {
            let off_is_null = req
                .extra
                .thinking_map
                .as_ref()
                .and_then(|m| m.get(ThinkingLevel::Off))
                == Some(None);
            if !off_is_null {
                body.insert("thinking".into(), json!({"type": "disabled"}));
            }
        }
    }
    let fallbacks: Vec<Value> = fallback_models(model)
        .iter()
        .filter_map(|f| f.get("model"))
        .map(|m| json!({ "model": m }))
        .collect();
    if !fallbacks.is_empty() {
        body.insert("fallbacks".into(), Value::Array(fallbacks));
    }
    body
}

/// The `tools` field: each tool's name, description and schema (strict where pi 0.87.1 sends
/// it so), the last one a cache breakpoint.
fn tools_value(req: &LlmRequest, cc: Option<&Value>, oauth: bool) -> Option<Value> {
    if req.tools.is_empty() {
        return None;
    }
    let mut tools = convert_tools(req, &req.tools, oauth);
    // The reference also marks the end of the tool list as a cache breakpoint (pi 0.87.1: unless
    // the model's `compat.supportsCacheControlOnTools` is false).
    let on_tools = !Dialect::of(req.sdk).model_quirks
        || crate::llm::strict::compat_flag(&req.model, "supportsCacheControlOnTools", true);
    if let (Some(Value::Object(last)), Some(cc)) = (tools.last_mut(), cc.filter(|_| on_tools)) {
        last.insert("cache_control".into(), cc.clone());
    }
    Some(Value::Array(tools))
}

/// pi 0.87.1's tools with native tool changes (`compat.supportsMidConvoToolChanges`): the first
/// system message's tools (the last a cache breakpoint), a deferred placeholder, then every tool
/// declared later, deferred (a later system message activates or withdraws it by name).
fn native_tools_value(
    req: &LlmRequest,
    initial: &[ToolSchema],
    cc: Option<&Value>,
    oauth: bool,
) -> Value {
    let mut tools = convert_tools(req, initial, oauth);
    let on_tools = crate::llm::strict::compat_flag(&req.model, "supportsCacheControlOnTools", true);
    if let (Some(Value::Object(last)), Some(cc)) = (tools.last_mut(), cc.filter(|_| on_tools)) {
        last.insert("cache_control".into(), cc.clone());
    }
    tools.push(json!({
        "name": "__pi_deferred_placeholder__",
        "description": "Reserved placeholder. Never available. Never call this.",
        "input_schema": {"type": "object", "properties": {}, "required": []},
        "defer_loading": true,
    }));
    let later: Vec<ToolSchema> = crate::llm::transcript::declared_tools(&req.messages)
        .into_iter()
        .filter(|t| !initial.iter().any(|i| i.name == t.name))
        .collect();
    for mut t in convert_tools(req, &later, oauth) {
        if let Value::Object(o) = &mut t {
            o.insert("defer_loading".into(), json!(true));
        }
        tools.push(t);
    }
    Value::Array(tools)
}

/// pi 0.87.1: whether tool changes travel as `tool_addition` / `tool_removal` blocks (the model
/// takes system messages and tool changes mid-conversation, the first system message declares
/// tools, and no name was declared twice differently). Returns the first message's tools.
fn native_tool_changes(req: &LlmRequest) -> Option<Vec<ToolSchema>> {
    if !crate::llm::transcript::mid_convo(req)
        || !crate::llm::strict::compat_flag(&req.model, "supportsMidConvoToolChanges", false)
        || crate::llm::transcript::has_tool_redefinitions(&req.messages)
    {
        return None;
    }
    let initial: Vec<ToolSchema> = crate::llm::transcript::initial(&req.messages)?
        .tools_added
        .as_ref()?
        .iter()
        .map(crate::llm::transcript::schema)
        .collect();
    (!initial.is_empty()).then_some(initial)
}

fn convert_tools(req: &LlmRequest, list: &[ToolSchema], oauth: bool) -> Vec<Value> {
    list.iter()
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
            let mut schema = json!({"type": "object", "properties": props, "required": required});
            if Dialect::of(req.sdk).tool_additional_properties {
                if let Some(a) = t.parameters.get("additionalProperties") {
                    schema["additionalProperties"] = a.clone();
                }
            }
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
            let strict = Dialect::of(req.sdk).model_quirks
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
        .collect()
}

fn image_block(data: &str, mime: &str) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
}

/// One message of the request as planned from the transformed history: references only, so the
/// long history is written straight into the body without an intermediate `Value` tree (and
/// without a list of blocks per message: the blocks sent are those the predicates below keep,
/// at least one).
enum Planned<'a> {
    UserText(&'a str),
    /// Blocks kept by [`user_block_sent`].
    UserBlocks(&'a [Content]),
    /// Blocks kept by [`assistant_block_sent`].
    Assistant(&'a crate::message::AssistantMessage),
    ToolResults(&'a [Transformed<'a>]),
    /// pi 0.87.1: a later system message of a model that takes them in place.
    System(&'a crate::message::SystemMessage),
}

/// Whether a block of a user message is sent: text that is not blank, images when the model
/// takes them.
fn user_block_sent(b: &Content, images_ok: bool) -> bool {
    match b {
        Content::Text(t) => !t.text.trim().is_empty(),
        Content::Image(_) => images_ok,
        _ => false,
    }
}

/// Whether a block of an assistant message is sent: text that is not blank, thinking that is
/// redacted or not blank (pi 0.87.1: or signed), tool calls.
fn assistant_block_sent(c: &Content, signed_replay: bool) -> bool {
    match c {
        Content::Text(t) => !t.text.trim().is_empty(),
        Content::Thinking(t) => {
            t.redacted == Some(true)
                || !t.thinking.trim().is_empty()
                || (signed_replay && signed(t))
        }
        Content::ToolCall(_) => true,
        _ => false,
    }
}

/// A thinking block with a signature to send back (pi 0.87.1 keeps a signed block whose text is
/// empty).
fn signed(t: &crate::message::ThinkingContent) -> bool {
    t.thinking_signature
        .as_deref()
        .is_some_and(|s| !s.trim().is_empty())
}

fn plan<'a>(
    msgs: &'a [Transformed<'a>],
    images_ok: bool,
    signed_replay: bool,
    keep_system: bool,
) -> Vec<Planned<'a>> {
    let mut out = Vec::with_capacity(msgs.len());
    let mut i = 0;
    while i < msgs.len() {
        match &*msgs[i] {
            // The first is the leading prompt; the others stay only where the model takes them.
            LlmMessage::System(s) => {
                if keep_system && i > 0 {
                    out.push(Planned::System(s));
                }
            }
            LlmMessage::User(u) => match &u.content {
                UserContent::Text(s) => {
                    if !s.trim().is_empty() {
                        out.push(Planned::UserText(s));
                    }
                }
                UserContent::Blocks(blocks) => {
                    if blocks.iter().any(|b| user_block_sent(b, images_ok)) {
                        out.push(Planned::UserBlocks(blocks));
                    }
                }
            },
            LlmMessage::Assistant(a) => {
                if a.content
                    .iter()
                    .any(|c| assistant_block_sent(c, signed_replay))
                {
                    out.push(Planned::Assistant(a));
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
fn put<T: serde::Serialize + ?Sized>(out: &mut impl JsonOut, value: &T) {
    out.put(value);
}

/// A string as JSON into `out` (the fast path for the history's texts).
fn put_str(out: &mut impl JsonOut, s: &str) {
    out.put_str(s);
}

/// `,"cache_control":{...}` when this is the cache breakpoint.
fn put_cc(out: &mut impl JsonOut, cc: Option<&Value>) {
    if let Some(cc) = cc {
        out.extend_from_slice(b",\"cache_control\":");
        put(out, cc);
    }
}

fn put_text_block(out: &mut impl JsonOut, text: &str, cc: Option<&Value>) {
    out.extend_from_slice(b"{\"type\":\"text\",\"text\":");
    put_str(out, text);
    put_cc(out, cc);
    out.push(b'}');
}

fn put_image_block(out: &mut impl JsonOut, data: &str, mime: &str, cc: Option<&Value>) {
    out.extend_from_slice(b"{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":");
    put_str(out, mime);
    out.extend_from_slice(b",\"data\":");
    put_str(out, data);
    out.push(b'}');
    put_cc(out, cc);
    out.push(b'}');
}

/// What the `messages` array holds, in order.
enum Wire<'p, 'a> {
    Msg(&'p Planned<'a>),
    /// A later system message's blocks (pi 0.87.1).
    System(Vec<Value>),
    /// A managed-effort marker (pi 0.87.1, `compat.supportsMidConvoEffort`).
    Effort(String),
}

/// The order pi 0.87.1 sends: a later system message waits for the next assistant message (a
/// `tool_result` must follow its `tool_use`), or the end; a managed-effort model gets, before each
/// of its own replies, the effort it answered at, and the effort asked for now at the end.
fn wire_order<'p, 'a>(
    req: &LlmRequest,
    planned: &'p [Planned<'a>],
    oauth: bool,
) -> Vec<Wire<'p, 'a>> {
    let native = native_tool_changes(req).is_some();
    let mut out: Vec<Wire> = Vec::with_capacity(planned.len() + 1);
    let mut pending: Vec<Wire> = Vec::new();
    for p in planned {
        match p {
            Planned::System(s) => {
                let mut blocks = Vec::new();
                let text = crate::llm::transcript::render_update(s);
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                if native {
                    for t in s.tools_removed.iter().flatten() {
                        blocks.push(json!({"type": "tool_removal",
                            "tool": {"type": "tool_reference", "name": wire_tool_name(&t.name, oauth)}}));
                    }
                    for t in s.tools_added.iter().flatten() {
                        blocks.push(json!({"type": "tool_addition",
                            "tool": {"type": "tool_reference", "name": wire_tool_name(&t.name, oauth)}}));
                    }
                }
                if !blocks.is_empty() {
                    pending.push(Wire::System(blocks));
                }
            }
            Planned::Assistant(..) => {
                out.append(&mut pending);
                out.push(Wire::Msg(p));
            }
            _ => out.push(Wire::Msg(p)),
        }
    }
    out.append(&mut pending);
    if !(Dialect::of(req.sdk).model_quirks && managed_effort(&req.model)) {
        return out;
    }
    let valid = |e: &str| ["low", "medium", "high", "xhigh", "max"].contains(&e);
    let mut with_efforts = Vec::with_capacity(out.len() + 4);
    for w in out {
        if let Wire::Msg(Planned::Assistant(a)) = &w {
            if let Some(level) = a.provider_thinking_level.as_deref().filter(|l| {
                valid(l) && a.api == "anthropic-messages" && a.provider == req.model.provider
            }) {
                with_efforts.push(Wire::Effort(level.to_string()));
            }
        }
        with_efforts.push(w);
    }
    with_efforts.push(Wire::Effort(active_effort(req)));
    with_efforts
}

/// What writing one item of the `messages` array needs besides the item.
struct Ctx<'r> {
    cc: Option<&'r Value>,
    /// The item that carries the cache breakpoint: the last message converted, when it is the
    /// user's or a system one.
    cc_at_index: Option<usize>,
    images_ok: bool,
    /// [`Dialect::signed_thinking_replay`].
    signed_replay: bool,
    empty_signature_ok: bool,
    oauth: bool,
}

/// The history as the items of the `messages` array (transformed, planned, in wire order), handed
/// to `f` with what writing them needs: the one preparation of both passes over a body.
fn with_items<R>(
    req: &LlmRequest,
    cc: Option<&Value>,
    oauth: bool,
    f: impl FnOnce(&[Wire], &Ctx) -> R,
) -> R {
    let model = &req.model;
    let normalize = |id: &str| sanitize_id(id, 64);
    let msgs = transform_borrowed(
        &req.messages,
        model,
        Some(&normalize),
        crate::llm::transform::ForeignThinking::of(req.sdk),
    );
    let images_ok = model.input.iter().any(|i| i == "image");
    let d = Dialect::of(req.sdk);
    let signed_replay = d.signed_thinking_replay;
    let keep_system = crate::llm::transcript::mid_convo(req);
    let planned = plan(&msgs, images_ok, signed_replay, keep_system);
    let wire = wire_order(req, &planned, oauth);
    let x = Ctx {
        cc,
        cc_at_index: wire.iter().rposition(|w| !matches!(w, Wire::Effort(_))),
        images_ok,
        signed_replay,
        empty_signature_ok: d.model_quirks
            && crate::llm::strict::compat_flag(model, "allowEmptySignature", false),
        oauth,
    };
    f(&wire, &x)
}

/// The `messages` array, written into `out`. The last block of a final user message carries the
/// cache breakpoint, as the reference's.
fn write_messages<O: JsonOut>(out: &mut O, req: &LlmRequest, cc: Option<&Value>, oauth: bool) {
    with_items(req, cc, oauth, |wire, x| {
        out.push(b'[');
        for (n, w) in wire.iter().enumerate() {
            out.checkpoint();
            if n > 0 {
                out.push(b',');
            }
            write_item(out, n, w, x);
        }
        out.push(b']');
    })
}

/// Histories of at least this many items are counted on two threads ([`count_messages`]).
const COUNT_ON_TWO_ABOVE: usize = 4096;

/// The length of the `messages` array [`write_messages`] writes, counted (the first pass over a
/// long body, for `Content-Length`). A long history is counted in two halves, the second on a
/// scoped thread: the count is on the way to the first byte on the wire, and the other core is
/// idle meanwhile (the body's second writer, started before the count, has written its first
/// chunks and waits for the connection).
fn count_messages(req: &LlmRequest, cc: Option<&Value>, oauth: bool) -> u64 {
    with_items(req, cc, oauth, count_items)
}

fn count_items(wire: &[Wire], x: &Ctx) -> u64 {
    let count = |from: usize, items: &[Wire]| {
        let mut c = body::Counter::default();
        for (n, w) in items.iter().enumerate() {
            write_item(&mut c, from + n, w, x);
        }
        c.0
    };
    // `[`, `]` and the commas between items.
    let punctuation = 2 + wire.len().saturating_sub(1) as u64;
    let two = wire.len() >= COUNT_ON_TWO_ABOVE
        && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    if !two {
        return punctuation + count(0, wire);
    }
    let mid = wire.len() / 2;
    let (first, second) = wire.split_at(mid);
    let (a, b) = std::thread::scope(|s| {
        let helper = std::thread::Builder::new()
            .name("llm-count".into())
            .stack_size(crate::THREAD_STACK)
            .spawn_scoped(s, || count(mid, second));
        let a = count(0, first);
        // A helper that could not start (or died): its half is counted here.
        let b = match helper {
            Ok(h) => h.join().ok(),
            Err(_) => None,
        };
        (a, b)
    });
    punctuation + a + b.unwrap_or_else(|| count(mid, second))
}

/// Item `n` of the `messages` array.
fn write_item<O: JsonOut>(out: &mut O, n: usize, w: &Wire, x: &Ctx) {
    let last = Some(n) == x.cc_at_index;
    let (cc, images_ok, signed_replay, oauth) = (x.cc, x.images_ok, x.signed_replay, x.oauth);
    let empty_signature_ok = x.empty_signature_ok;
    let m = match w {
        Wire::Msg(m) => *m,
        Wire::System(blocks) => {
            out.extend_from_slice(b"{\"role\":\"system\",\"content\":[");
            for (k, b) in blocks.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                let mut b = b.clone();
                if let (true, Some(cc), Value::Object(o)) =
                    (last && k + 1 == blocks.len(), cc, &mut b)
                {
                    o.insert("cache_control".into(), cc.clone());
                }
                put(out, &b);
            }
            out.extend_from_slice(b"]}");
            return;
        }
        Wire::Effort(effort) => {
            out.extend_from_slice(
                b"{\"role\":\"system\",\"content\":[],\"output_config\":{\"effort\":",
            );
            put_str(out, effort);
            out.extend_from_slice(b"}}");
            return;
        }
    };
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
            let sent = |b: &&Content| user_block_sent(b, images_ok);
            // How many are sent matters only for where the breakpoint goes.
            let n = if last {
                blocks.iter().filter(sent).count()
            } else {
                0
            };
            for (k, b) in blocks.iter().filter(sent).enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                match b {
                    Content::Text(t) => put_text_block(out, &t.text, cc_at(k, n)),
                    Content::Image(img) => {
                        put_image_block(out, &img.data, &img.mime_type, cc_at(k, n))
                    }
                    _ => {}
                }
            }
            out.extend_from_slice(b"]}");
        }
        Planned::System(_) => {}
        Planned::Assistant(a) => {
            out.extend_from_slice(b"{\"role\":\"assistant\",\"content\":[");
            let blocks = a
                .content
                .iter()
                .filter(|c| assistant_block_sent(c, signed_replay));
            for (k, c) in blocks.enumerate() {
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
                    Content::Thinking(t) if signed_replay && !signed(t) && empty_signature_ok => {
                        out.extend_from_slice(b"{\"type\":\"thinking\",\"thinking\":");
                        put_str(out, &t.thinking);
                        out.extend_from_slice(b",\"signature\":\"\"}");
                    }
                    Content::Thinking(t) if signed_replay && !signed(t) => {
                        put_text_block(out, &t.thinking, None)
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
                        put_str(out, wire_tool_name(&tc.name, oauth));
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
                if images_ok && r.content.iter().any(|c| matches!(c, Content::Image(_))) {
                    put(out, &tool_result_blocks(&r.content));
                } else {
                    // The texts joined by newlines, as one string.
                    let texts = r.content.iter().filter_map(|c| match c {
                        Content::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    });
                    out.put_str_joined(texts, "\n");
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

/// The content of a tool result with images (allowed by the model) as blocks.
fn tool_result_blocks(content: &[Content]) -> Value {
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
    /// pi 0.87.1: `message_stop` seen (a stream that started must stop).
    saw_stop: bool,
    /// pi 0.87.1: the error text of a stop reason that is an error (`refusal`, `sensitive`).
    stop_error: Option<String>,
    /// pi 0.87.1: the `input_transformations` Anthropic reported (a diagnostic of the reply).
    transformations: Option<Vec<Value>>,
    /// `message_start` was seen.
    started: bool,
    /// [`Dialect::strict_stream`].
    strict_stream: bool,
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
            strict_stream: Dialect::of(req.sdk).strict_stream,
            fallbacks,
            provider: req.model.provider.clone(),
            blocks: Vec::new(),
            stop: None,
            tool_names: req.tools.iter().map(|t| t.name.clone()).collect(),
            oauth: is_oauth(req),
            saw_stop: false,
            stop_error: None,
            transformations: None,
            started: false,
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

/// pi 0.87.1's stop reasons: an error stop carries its own text.
fn map_stop_with_details(
    r: &str,
    details: Option<&Value>,
) -> Result<(StopReason, Option<String>), String> {
    match r {
        "refusal" => Ok((
            StopReason::Error,
            Some(
                details
                    .and_then(|d| d.get("explanation"))
                    .and_then(Value::as_str)
                    .filter(|e| !e.is_empty())
                    .unwrap_or("The model refused to complete the request")
                    .to_string(),
            ),
        )),
        "sensitive" => Ok((
            StopReason::Error,
            Some("Provider stopped with: sensitive".into()),
        )),
        other => map_stop(other).map(|s| (s, None)),
    }
}

/// The events pi 0.87.1 reads; any other is skipped.
const MESSAGE_EVENTS: [&str; 6] = [
    "message_start",
    "message_delta",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
];

impl Decoder {
    /// pi 0.87.1's reading of one SSE event, before the shared handling: an `error` event fails
    /// with its data, events it does not know are skipped, data is parsed with repair, and the
    /// parts it treats differently are handled here. `None` = handled.
    fn event_strict(
        &mut self,
        ev: &SseEvent,
        b: &mut Builder,
        out: &mut Vec<StreamEvent>,
    ) -> Option<Value> {
        let name = ev.event.as_deref().unwrap_or("");
        if name == "error" {
            b.fail(ev.data.clone(), false, None, out);
            return None;
        }
        if !MESSAGE_EVENTS.contains(&name) {
            return None;
        }
        let v = match api::parse_json_with_repair(&ev.data) {
            Ok(v) => v,
            Err(_) => {
                let data = &ev.data;
                let raw = std::iter::once(format!("event: {name}"))
                    .chain(data.split('\n').map(|l| format!("data: {l}")))
                    .collect::<Vec<_>>()
                    .join("\\n");
                b.fail(
                    format!(
                        "Could not parse Anthropic SSE event {name}: {}; data={data}; raw={raw}",
                        crate::llm::bedrock::js_json_parse_error(data)
                    ),
                    false,
                    None,
                    out,
                );
                return None;
            }
        };
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        if let Some(t) = v
            .get("input_transformations")
            .or_else(|| v.pointer("/message/input_transformations"))
            .and_then(Value::as_array)
        {
            self.transformations = Some(t.clone());
        }
        match kind {
            "message_stop" => {
                // The reply ends with the stream, not here.
                self.saw_stop = true;
                None
            }
            "content_block_start"
                if v.pointer("/content_block/type").and_then(Value::as_str) == Some("fallback") =>
            {
                if !b.msg.content.is_empty() {
                    b.fail(
                        "Anthropic performed an unsupported mid-output model fallback".into(),
                        false,
                        None,
                        out,
                    );
                }
                None
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    b.msg.raw_stop_reason = Some(r.to_string());
                    match map_stop_with_details(r, v.pointer("/delta/stop_details")) {
                        Ok((stop, err)) => {
                            self.stop = Some(stop);
                            self.stop_error = err;
                        }
                        Err(e) => {
                            b.fail(e, false, None, out);
                            return None;
                        }
                    }
                }
                // The usage part is shared; the stop reason is taken.
                let mut v = v;
                if let Some(d) = v.get_mut("delta").and_then(Value::as_object_mut) {
                    d.remove("stop_reason");
                }
                Some(v)
            }
            _ => Some(v),
        }
    }

    /// pi 0.87.1's end of the stream: a started stream must have stopped with a stop reason; an
    /// error stop fails with its text; reported input transformations become a diagnostic.
    fn end_strict(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if self.started && !self.saw_stop {
            b.fail(
                "Anthropic stream ended before message_stop".into(),
                false,
                None,
                out,
            );
            return;
        }
        let Some(stop) = self.stop else {
            b.fail(
                "Anthropic stream ended without a stop reason".into(),
                false,
                None,
                out,
            );
            return;
        };
        if matches!(stop, StopReason::Error | StopReason::Aborted) {
            let msg = self
                .stop_error
                .take()
                .unwrap_or_else(|| "An unknown error occurred".into());
            b.fail(msg, false, None, out);
            return;
        }
        if let Some(t) = self.transformations.take().filter(|t| !t.is_empty()) {
            let list: Vec<Value> = t
                .iter()
                .map(|x| {
                    let mut m = Map::new();
                    for k in ["type", "path", "reason"] {
                        if let Some(v) = x.get(k).filter(|v| !v.is_null()) {
                            m.insert(k.into(), v.clone());
                        }
                    }
                    Value::Object(m)
                })
                .collect();
            b.msg
                .diagnostics
                .get_or_insert_with(Box::default)
                .push(json!({
                    "type": "anthropic_input_transformations",
                    "timestamp": crate::message::now_ms(),
                    "details": {"transformations": list},
                }));
        }
        b.start(out);
        b.finish(stop, out);
    }
}

impl api::Decoder for Decoder {
    fn event(&mut self, ev: &SseEvent, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if self.strict_stream {
            if let Some(v) = self.event_strict(ev, b, out) {
                let kind = v
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                self.shared_event(&kind, &v, b, out);
            }
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
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(ev.event.as_deref())
            .unwrap_or("")
            .to_string();
        self.shared_event(&kind, &v, b, out);
    }

    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        if self.strict_stream {
            return self.end_strict(b, out);
        }
        // The body ended without `message_stop`: an error once the message started (pi's
        // `Anthropic stream ended before message_stop`), else an empty, finished message.
        if self.started {
            b.fail(
                "Anthropic stream ended before message_stop".into(),
                false,
                None,
                out,
            );
        } else {
            b.start(out);
            b.finish(self.stop.unwrap_or(StopReason::Stop), out);
        }
    }
}

impl Decoder {
    /// One event's data, of type `kind`, as both versions read it.
    fn shared_event(&mut self, kind: &str, v: &Value, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        match kind {
            "message_start" => {
                self.started = true;
                let m = &v["message"];
                b.msg.response_id = m.get("id").and_then(Value::as_str).map(str::to_string);
                if self.strict_stream {
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
                if self.strict_stream {
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
                    // pi: `thinkingSignature: content_block.signature ?? ""` from the start.
                    Some("thinking") => b.start_thinking_signed(
                        Some(
                            cb.get("signature")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        ),
                        out,
                    ),
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
                    if self.strict_stream {
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
                        .filter(|_| self.strict_stream)
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
}
