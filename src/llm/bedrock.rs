//! Amazon Bedrock `ConverseStream` (`bedrock-converse-stream`): the body pi 0.73.1's AWS SDK
//! client serialises (schema member order), signed with AWS Signature V4 ([`aws::sigv4`]) or sent
//! with a Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`), and the decoder of the binary event
//! stream ([`aws::eventstream`], framed by `stream.rs` into one event per message).
//!
//! Endpoint and region follow pi: a `baseUrl` that is not a standard `bedrock-runtime.<region>`
//! host (a VPC endpoint, a proxy, a models.json override) is used as is; a standard one is used
//! only when no region (`AWS_REGION`, `AWS_DEFAULT_REGION`) or profile (`AWS_PROFILE`) is
//! configured, otherwise the configured region's endpoint is (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`
//! / `AWS_ENDPOINT_URL` override it, as in the SDK).
//!
//! Preparing reads credential files and may call a credential endpoint: it runs on the stream's
//! worker thread ([`WireApi::prepare_blocks`]).

use serde_json::{Map, Value, json};

use crate::llm::api::{self, Builder, Framing, Prepared, WireApi};
use crate::llm::aws::{credentials, sigv4};
use crate::llm::models::ThinkingLevelMap;
use crate::llm::sse::SseEvent;
use crate::llm::transform::{sanitize_id, transform_messages};
use crate::llm::{LlmRequest, Model, StreamEvent};
use crate::message::{
    Content, LlmMessage, StopReason, ThinkingContent, ThinkingLevel, Usage, UserContent,
};
use crate::protocol::SdkGeneration;

/// The `bedrock-converse-stream` wire API.
pub struct Bedrock;

pub const API: Bedrock = Bedrock;

/// Environment lookup (the request's, see [`crate::llm::RequestExtra::env`]).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

impl WireApi for Bedrock {
    fn name(&self) -> &'static str {
        "bedrock-converse-stream"
    }

    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        prepare_with(req, &|k| req.extra.var(k), now)
    }

    fn prepare_blocks(&self) -> bool {
        true
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn api::Decoder> {
        Box::new(Decoder {
            dialect: Dialect::of(req.sdk),
            ..Decoder::default()
        })
    }

    fn http_error_message(
        &self,
        _req: &LlmRequest,
        status: u16,
        headers: &[(String, String)],
        body: &str,
    ) -> String {
        http_error_message(status, headers, body)
    }

    fn error_diagnostics(
        &self,
        req: &LlmRequest,
        status: u16,
        headers: &[(String, String)],
        body: &str,
    ) -> Option<Vec<Value>> {
        if !Dialect::of(req.sdk).diagnostics {
            return None;
        }
        Some(vec![failure_diagnostic(
            Some(status),
            error_name(headers, body).filter(|n| n.ends_with("Exception")),
            api::header_of(headers, "x-amzn-requestid"),
        )?])
    }

    fn framing(&self) -> Framing {
        Framing::EventStream
    }
}

/// The endpoint (without path) and signing region for `model`.
pub fn endpoint(model: &Model, env: Env) -> Result<(String, String), String> {
    endpoint_of(model, env).map(|(base, region, _)| (base, region))
}

/// [`endpoint`], and whether it is the client's explicit `endpoint` (the model's `baseUrl`)
/// rather than one the SDK resolves: its `ENDPOINT_OVERRIDE` feature.
fn endpoint_of(model: &Model, env: Env) -> Result<(String, String, bool), String> {
    let get = |k: &str| env(k).filter(|v| !v.is_empty());
    let configured = credentials::configured_region(env);
    let has_profile = get("AWS_PROFILE").is_some();
    let standard = standard_endpoint_region(&model.base_url);
    let explicit = standard.is_none() || (configured.is_none() && !has_profile);
    let region = match (&configured, &standard) {
        (Some(r), _) => r.clone(),
        (None, Some(r)) if explicit => r.clone(),
        _ if has_profile => {
            credentials::region(env).ok_or_else(|| "Region is missing".to_string())?
        }
        _ => "us-east-1".to_string(),
    };
    if explicit {
        return Ok((
            model.base_url.trim_end_matches('/').to_string(),
            region,
            true,
        ));
    }
    if let Some(url) = get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME").or_else(|| get("AWS_ENDPOINT_URL")) {
        return Ok((url.trim_end_matches('/').to_string(), region, false));
    }
    let suffix = if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    };
    Ok((
        format!("https://bedrock-runtime.{region}.{suffix}"),
        region,
        false,
    ))
}

/// The region of a standard `bedrock-runtime[-fips].<region>.amazonaws.com[.cn]` URL.
fn standard_endpoint_region(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?', '#']).next()?;
    let host = host.split(':').next()?.to_ascii_lowercase();
    let rest = host
        .strip_prefix("bedrock-runtime-fips.")
        .or_else(|| host.strip_prefix("bedrock-runtime."))?;
    let region = rest
        .strip_suffix(".amazonaws.com")
        .or_else(|| rest.strip_suffix(".amazonaws.com.cn"))?;
    (!region.is_empty()
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))
    .then(|| region.to_string())
}

/// The SDK's `extendedEncodeURIComponent` (a path label).
fn encode_label(s: &str) -> String {
    sigv4::escape_uri(s)
}

/// The whole request: endpoint, signature (or bearer token), body. `now` in seconds.
pub fn prepare_with(req: &LlmRequest, env: Env, now: u64) -> Result<Prepared, String> {
    let (base, region, explicit) = endpoint_of(&req.model, env)?;
    let path = format!("/model/{}/converse-stream", encode_label(&req.model.id));
    let url = format!("{base}{path}");
    check_images(req)?;
    let body = serde_json::to_vec(&build_body(req, env)).unwrap_or_default();
    let mut headers: Vec<(String, String)> = vec![
        ("content-type".into(), "application/json".into()),
        ("accept".into(), "application/vnd.amazon.eventstream".into()),
    ];
    let bearer = env("AWS_BEARER_TOKEN_BEDROCK").filter(|v| !v.is_empty());
    let skip_auth = env("AWS_BEDROCK_SKIP_AUTH").as_deref() == Some("1");
    let auth = match bearer {
        Some(token) if !skip_auth => Auth::Bearer(token),
        _ => {
            let (creds, source) = credentials::load(env, &region)?;
            Auth::Signed(creds, source)
        }
    };
    if Dialect::of(req.sdk).user_agents {
        // The SDK's feature ids: the explicit endpoint, the standard retry mode, then the
        // credentials' source (a bearer token given in code has none).
        let mut features = String::from(if explicit { "N,E" } else { "E" });
        if let Auth::Signed(_, source) = &auth {
            features.push(',');
            features.push_str(source);
        }
        headers.extend(crate::llm::http::aws_user_agents(&features));
    }
    crate::llm::http::merge_model_headers(&mut headers, &req.model);
    match auth {
        Auth::Bearer(token) => {
            headers.push(("authorization".into(), format!("Bearer {token}")));
        }
        Auth::Signed(creds, _) => {
            let host = host_of(&url).ok_or_else(|| format!("Invalid Bedrock endpoint: {url}"))?;
            headers.push(("host".into(), host));
            let url_path = path_of(&url);
            sigv4::sign(
                &creds,
                &region,
                "bedrock",
                &sigv4::amz_date(now),
                "POST",
                &url_path,
                &mut headers,
                &body,
            );
            // ureq writes the Host header itself, from the URL (the value signed above).
            headers.retain(|(k, _)| k != "host");
        }
    }
    Ok(Prepared {
        url,
        headers,
        body: crate::llm::api::Body::Bytes(body),
    })
}

/// How a request is authorised: a Bedrock API key, or SigV4 with credentials and the SDK's
/// feature ids of their source ([`credentials::sdk_features`]).
enum Auth {
    Bearer(String),
    Signed(credentials::Credentials, &'static str),
}

/// `host[:port]` of a URL, as an HTTP client sends it in `Host`.
fn host_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let default_port = match scheme {
        "https" => ":443",
        _ => ":80",
    };
    Some(
        authority
            .strip_suffix(default_port)
            .unwrap_or(authority)
            .to_ascii_lowercase(),
    )
}

/// Path and query of a URL.
fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    match rest.find('/') {
        Some(i) => rest[i..].split('#').next().unwrap_or("/").to_string(),
        None => "/".to_string(),
    }
}

// ------------------------------------------------------------------------------------------------
// The body

/// Candidates for model-name checks: id and name, lower-cased, also with separators dashed.
fn candidates(model: &Model) -> Vec<String> {
    [model.id.as_str(), model.name.as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .flat_map(|v| {
            let lower = v.to_lowercase();
            let dashed: String = {
                let mut out = String::new();
                let mut in_sep = false;
                for c in lower.chars() {
                    if c.is_whitespace() || matches!(c, '_' | '.' | ':') {
                        if !in_sep {
                            out.push('-');
                        }
                        in_sep = true;
                    } else {
                        out.push(c);
                        in_sep = false;
                    }
                }
                out
            };
            [lower, dashed]
        })
        .collect()
}

fn is_claude(model: &Model) -> bool {
    let id = model.id.to_lowercase();
    let name = model.name.to_lowercase();
    id.contains("anthropic.claude")
        || id.contains("anthropic/claude")
        || name.contains("anthropic.claude")
        || name.contains("anthropic/claude")
        || name.contains("claude")
}

fn adaptive(model: &Model) -> bool {
    candidates(model)
        .iter()
        .any(|s| s.contains("opus-4-6") || s.contains("opus-4-7") || s.contains("sonnet-4-6"))
}

fn supports_caching(model: &Model, env: Env) -> bool {
    let c = candidates(model);
    if !c.iter().any(|s| s.contains("claude")) {
        return env("AWS_BEDROCK_FORCE_CACHE").as_deref() == Some("1");
    }
    c.iter().any(|s| {
        s.contains("-4-") || s.contains("claude-3-7-sonnet") || s.contains("claude-3-5-haiku")
    })
}

fn effort(model: &Model, level: ThinkingLevel, map: Option<&ThinkingLevelMap>) -> String {
    if level == ThinkingLevel::Xhigh && candidates(model).iter().any(|s| s.contains("opus-4-7")) {
        return "xhigh".into();
    }
    if let Some(Some(v)) = map.and_then(|m| m.get(level)) {
        return v.to_string();
    }
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    }
    .into()
}

fn cache_point(long: bool) -> Value {
    if long {
        json!({"cachePoint": {"type": "default", "ttl": "1h"}})
    } else {
        json!({"cachePoint": {"type": "default"}})
    }
}

/// Bedrock takes JPEG, PNG, GIF and WebP only; pi refuses anything else before sending.
fn check_images(req: &LlmRequest) -> Result<(), String> {
    let images = req.messages.iter().flat_map(|m| match m {
        LlmMessage::User(u) => match &u.content {
            UserContent::Blocks(b) => b.as_slice(),
            UserContent::Text(_) => &[],
        },
        LlmMessage::ToolResult(r) => r.content.as_slice(),
        LlmMessage::Assistant(_) | LlmMessage::System(_) => &[],
    });
    for c in images {
        if let Content::Image(i) = c {
            if !matches!(
                i.mime_type.as_str(),
                "image/jpeg" | "image/jpg" | "image/png" | "image/gif" | "image/webp"
            ) {
                return Err(format!("Unknown image type: {}", i.mime_type));
            }
        }
    }
    Ok(())
}

fn image_block(mime: &str, data: &str) -> Value {
    let format = match mime {
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/png" => "png",
        "image/gif" => "gif",
        "image/webp" => "webp",
        // Refused before (check_images).
        other => other.rsplit('/').next().unwrap_or(other),
    };
    json!({"image": {"format": format, "source": {"bytes": data}}})
}

/// The `ConverseStream` body, members in the SDK's schema order.
pub fn build_body(req: &LlmRequest, env: Env) -> Value {
    let model = &req.model;
    let retention = env("PI_CACHE_RETENTION");
    let (cache, long) = match retention.as_deref() {
        Some("none") => (false, false),
        Some("long") => (supports_caching(model, env), true),
        _ => (supports_caching(model, env), false),
    };
    let claude = is_claude(model);
    let mut messages = messages(req, claude);
    if cache {
        if let Some(last) = messages.last_mut() {
            if last["role"] == "user" {
                if let Some(c) = last["content"].as_array_mut() {
                    c.push(cache_point(long));
                }
            }
        }
    }
    let reasoning = model.reasoning && req.thinking != ThinkingLevel::Off;
    let mut max_tokens = Some(api::default_max_tokens(req)).filter(|&m| m > 0);
    let mut budget_tokens = crate::llm::thinking_budget(req.thinking, &req.extra.thinking_budgets);
    if reasoning && claude && !adaptive(model) {
        // pi's adjustMaxTokensForThinking.
        let base = max_tokens.unwrap_or(0);
        let m = (base + budget_tokens).min(model.max_tokens);
        if m <= budget_tokens {
            budget_tokens = m.saturating_sub(1024);
        }
        max_tokens = Some(m);
    }

    let mut body = Map::new();
    body.insert("messages".into(), Value::Array(messages));
    if !req.system_prompt.is_empty() {
        let mut system = vec![json!({"text": req.system_prompt})];
        if cache {
            system.push(cache_point(long));
        }
        body.insert("system".into(), Value::Array(system));
    }
    let mut inference = Map::new();
    if let Some(m) = max_tokens {
        inference.insert("maxTokens".into(), json!(m));
    }
    body.insert("inferenceConfig".into(), Value::Object(inference));
    if !req.tools.is_empty() {
        let strict_tools = Dialect::of(req.sdk).strict_tools;
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                if !strict_tools {
                    return json!({"toolSpec": {"name": t.name,
                        "inputSchema": {"json": t.parameters}, "description": t.description}});
                }
                // pi 0.87.1: strict where the model's compat says Bedrock supports it.
                let strict = crate::llm::strict::resolve_preferred(
                    t,
                    crate::llm::strict::compat_flag(model, "supportsStrictMode", false),
                );
                let mut spec = Map::new();
                spec.insert("name".into(), json!(t.name));
                spec.insert(
                    "inputSchema".into(),
                    json!({"json": crate::llm::strict::parameters(t, strict)}),
                );
                spec.insert("description".into(), json!(t.description));
                if strict == Some(true) {
                    spec.insert("strict".into(), json!(true));
                }
                json!({ "toolSpec": spec })
            })
            .collect();
        body.insert("toolConfig".into(), json!({ "tools": tools }));
    }
    if reasoning && claude {
        let gov = credentials::configured_region(env)
            .is_some_and(|r| r.to_lowercase().starts_with("us-gov-"))
            || model.id.to_lowercase().starts_with("us-gov.")
            || model.id.to_lowercase().starts_with("arn:aws-us-gov:");
        let mut fields = Map::new();
        if adaptive(model) {
            let mut thinking = Map::new();
            thinking.insert("type".into(), json!("adaptive"));
            if !gov {
                thinking.insert("display".into(), json!("summarized"));
            }
            fields.insert("thinking".into(), Value::Object(thinking));
            fields.insert(
                "output_config".into(),
                json!({"effort": effort(model, req.thinking, req.extra.thinking_map.as_ref())}),
            );
        } else {
            let mut thinking = Map::new();
            thinking.insert("type".into(), json!("enabled"));
            thinking.insert("budget_tokens".into(), json!(budget_tokens));
            if !gov {
                thinking.insert("display".into(), json!("summarized"));
            }
            fields.insert("thinking".into(), Value::Object(thinking));
            fields.insert(
                "anthropic_beta".into(),
                json!(["interleaved-thinking-2025-05-14"]),
            );
        }
        body.insert("additionalModelRequestFields".into(), Value::Object(fields));
    }
    Value::Object(body)
}

fn messages(req: &LlmRequest, claude: bool) -> Vec<Value> {
    let normalize = |id: &str| sanitize_id(id, 64);
    let msgs = crate::llm::transcript::collapsed(transform_messages(
        &req.messages,
        &req.model,
        Some(&normalize),
        crate::llm::transform::ForeignThinking::of(req.sdk),
    ));
    let mut out: Vec<Value> = Vec::with_capacity(msgs.len());
    let mut i = 0;
    while i < msgs.len() {
        match &msgs[i] {
            LlmMessage::User(u) => {
                let content: Vec<Value> = match &u.content {
                    UserContent::Text(s) => vec![json!({ "text": s })],
                    UserContent::Blocks(b) => b
                        .iter()
                        .filter_map(|c| match c {
                            Content::Text(t) => Some(json!({"text": t.text})),
                            Content::Image(im) => Some(image_block(&im.mime_type, &im.data)),
                            _ => None,
                        })
                        .collect(),
                };
                out.push(json!({"role": "user", "content": content}));
            }
            LlmMessage::Assistant(a) => {
                let mut blocks = Vec::new();
                for c in &a.content {
                    match c {
                        Content::Text(t) if !t.text.trim().is_empty() => {
                            blocks.push(json!({"text": t.text}))
                        }
                        Content::ToolCall(tc) => blocks.push(json!({"toolUse": {
                            "toolUseId": tc.id, "name": tc.name, "input": tc.arguments}})),
                        Content::Thinking(t) if !t.thinking.trim().is_empty() => {
                            let sig = t.thinking_signature.as_deref().unwrap_or("");
                            if !claude {
                                blocks.push(json!({"reasoningContent": {
                                    "reasoningText": {"text": t.thinking}}}));
                            } else if sig.trim().is_empty() {
                                blocks.push(json!({"text": t.thinking}));
                            } else {
                                blocks.push(json!({"reasoningContent": {
                                    "reasoningText": {"text": t.thinking, "signature": sig}}}));
                            }
                        }
                        _ => {}
                    }
                }
                if !blocks.is_empty() {
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            // Folded into the system prompt and tools (`transcript::collapsed`).
            LlmMessage::System(_) => {}
            LlmMessage::ToolResult(_) => {
                let mut results = Vec::new();
                while let Some(LlmMessage::ToolResult(r)) = msgs.get(i) {
                    let content: Vec<Value> = r
                        .content
                        .iter()
                        .filter_map(|c| match c {
                            Content::Image(im) => Some(image_block(&im.mime_type, &im.data)),
                            Content::Text(t) => Some(json!({"text": t.text})),
                            _ => None,
                        })
                        .collect();
                    let status = if r.is_error { "error" } else { "success" };
                    results.push(json!({"toolResult": {"toolUseId": r.tool_call_id,
                        "content": content, "status": status}}));
                    i += 1;
                }
                out.push(json!({"role": "user", "content": results}));
                continue;
            }
        }
        i += 1;
    }
    out
}

// ------------------------------------------------------------------------------------------------
// Errors

/// Human prefixes pi gives the SDK's exception names (matched by auto-retry and overflow checks).
fn prefix(name: &str) -> &str {
    match name {
        "InternalServerException" => "Internal server error",
        "ModelStreamErrorException" => "Model stream error",
        "ValidationException" => "Validation error",
        "ThrottlingException" => "Throttling error",
        "ServiceUnavailableException" => "Service unavailable",
        other => other,
    }
}

/// The error text pi shows for an HTTP error from Bedrock (the SDK's exception, prefixed).
pub fn http_error_message(status: u16, headers: &[(String, String)], body: &str) -> String {
    let _ = status;
    let parsed: Option<Value> = if body.trim().is_empty() {
        Some(json!({}))
    } else {
        serde_json::from_str(body).ok()
    };
    let Some(v) = parsed else {
        return format!(
            "{}\n  Deserialization error: to see the raw response, inspect the hidden field {{error}}.$response on this object.",
            js_json_parse_error(body)
        );
    };
    let sanitize = |s: &str| {
        let s = s.split(':').next().unwrap_or(s);
        s.rsplit('#').next().unwrap_or(s).to_string()
    };
    let name = api::header_of(headers, "x-amzn-errortype")
        .map(sanitize)
        .or_else(|| {
            v.get("__type")
                .or_else(|| v.get("code"))
                .and_then(Value::as_str)
                .map(sanitize)
        })
        .filter(|n| !n.is_empty());
    let message = v
        .get("message")
        .or_else(|| v.get("Message"))
        .and_then(Value::as_str)
        .map(str::to_string);
    match name {
        Some(n) => format!("{}: {}", prefix(&n), message.unwrap_or_else(|| n.clone())),
        None => format!(
            "Unknown: {}",
            message.unwrap_or_else(|| "UnknownError".into())
        ),
    }
}

/// The AWS SDK's name for an HTTP error: the `x-amzn-errortype` header, else the body's `__type`
/// or `code` (without namespace or `:` suffix).
fn error_name(headers: &[(String, String)], body: &str) -> Option<String> {
    let sanitize = |s: &str| {
        let s = s.split(':').next().unwrap_or(s);
        s.rsplit('#').next().unwrap_or(s).to_string()
    };
    let v: Option<Value> = serde_json::from_str(body).ok();
    api::header_of(headers, "x-amzn-errortype")
        .map(sanitize)
        .or_else(|| {
            v.as_ref()?
                .get("__type")
                .or_else(|| v.as_ref()?.get("code"))
                .and_then(Value::as_str)
                .map(sanitize)
        })
        .filter(|n| !n.is_empty())
}

/// pi 0.87.1's `bedrock_response_failure` diagnostic: what is known of the failure (status,
/// modeled error code, request id; values over 200 characters dropped), `None` when nothing is.
pub fn failure_diagnostic(
    status: Option<u16>,
    code: Option<String>,
    request_id: Option<&str>,
) -> Option<Value> {
    let clean = |v: &str| {
        let t = v.trim();
        (!t.is_empty() && t.chars().count() <= 200).then(|| t.to_string())
    };
    let mut details = Map::new();
    if let Some(s) = status {
        details.insert("status".into(), json!(s));
    }
    if let Some(c) = code.as_deref().and_then(clean) {
        details.insert("errorCode".into(), json!(c));
    }
    if let Some(r) = request_id.and_then(clean) {
        details.insert("requestId".into(), json!(r));
    }
    if details.is_empty() {
        return None;
    }
    Some(
        json!({"type": "bedrock_response_failure", "timestamp": crate::message::now_ms(),
        "details": details}),
    )
}

/// V8's `JSON.parse` error text for a body that is not JSON (its first bad token).
pub(crate) fn js_json_parse_error(body: &str) -> String {
    let first = body.chars().next().unwrap_or(' ');
    let shown = if body.chars().count() <= 30 {
        format!("\"{body}\"")
    } else {
        let head: String = body.chars().take(10).collect();
        format!("\"{head}\"... ")
    };
    let shown = shown.trim_end();
    format!("Unexpected token '{first}', {shown} is not valid JSON")
}

// ------------------------------------------------------------------------------------------------
// The decoder

#[derive(Default)]
pub struct Decoder {
    /// Bedrock content block index → our content index, for blocks not yet stopped.
    open: Vec<(u64, usize)>,
    stop: Option<StopReason>,
    dialect: Dialect,
}

/// The wire details of Bedrock in one SDK generation, built from [`LlmRequest::sdk`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Dialect {
    /// Failures carry `diagnostics` (the modeled exception, the request id).
    pub diagnostics: bool,
    /// Tools asking for constrained sampling are sent strict where the model's
    /// `supportsStrictMode` says Bedrock supports it.
    pub strict_tools: bool,
    /// The answer's `rawStopReason`; an error stop names it.
    pub raw_stop_reason: bool,
    /// The SDK's `x-amz-user-agent` and `user-agent` with pi-ai's `customUserAgent` (pi 1.6.0,
    /// [`crate::llm::http::aws_user_agents`]). Earlier generations: neither is imitated.
    pub user_agents: bool,
}

impl Dialect {
    pub const fn of(sdk: SdkGeneration) -> Dialect {
        match sdk {
            SdkGeneration::Pi073 => Dialect {
                diagnostics: false,
                strict_tools: false,
                raw_stop_reason: false,
                user_agents: false,
            },
            SdkGeneration::Pi087 => Dialect {
                diagnostics: true,
                strict_tools: true,
                raw_stop_reason: true,
                user_agents: false,
            },
            SdkGeneration::Pi16 => Dialect {
                diagnostics: true,
                strict_tools: true,
                raw_stop_reason: true,
                user_agents: true,
            },
        }
    }
}

impl Decoder {
    fn find(&self, index: u64) -> Option<usize> {
        self.open.iter().find(|(b, _)| *b == index).map(|(_, i)| *i)
    }
}

impl api::Decoder for Decoder {
    fn event(&mut self, ev: &SseEvent, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        let kind = ev.event.as_deref().unwrap_or("");
        if let Some(exception) = kind.strip_prefix("exception:") {
            let v: Value = serde_json::from_str(&ev.data).unwrap_or(Value::Null);
            let message = v
                .get("message")
                .or_else(|| v.get("Message"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let mut name = exception.to_string();
            if let Some(first) = name.get_mut(0..1) {
                first.make_ascii_uppercase();
            }
            if self.dialect.diagnostics {
                // pi 0.87.1 notes the modeled exception beside the message.
                let code = Some(name.clone()).filter(|n| n.ends_with("Exception"));
                b.msg.diagnostics = failure_diagnostic(None, code, None).map(|d| Box::new(vec![d]));
            }
            b.fail(format!("{}: {message}", prefix(&name)), false, None, out);
            return;
        }
        if let Some(code) = kind.strip_prefix("error:") {
            b.fail(format!("{code}: {}", ev.data), false, None, out);
            return;
        }
        let v: Value = match serde_json::from_str(&ev.data) {
            Ok(v) => v,
            Err(e) => {
                b.fail(format!("Could not parse event data: {e}"), false, None, out);
                return;
            }
        };
        let index = v
            .get("contentBlockIndex")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        match kind {
            "messageStart" => {
                if v.get("role").and_then(Value::as_str) != Some("assistant") {
                    b.fail(
                        "Unexpected assistant message start but got user message start instead"
                            .into(),
                        false,
                        None,
                        out,
                    );
                    return;
                }
                b.start(out);
            }
            "contentBlockStart" => {
                if let Some(t) = v.pointer("/start/toolUse") {
                    let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
                    let i = b.start_tool(s("toolUseId"), s("name"), out);
                    self.open.push((index, i));
                }
            }
            "contentBlockDelta" => {
                let d = v.get("delta").unwrap_or(&Value::Null);
                let existing = self.find(index);
                if let Some(text) = d.get("text").and_then(Value::as_str) {
                    let i = match existing {
                        Some(i) => i,
                        None => {
                            let i = b.start_text(out);
                            self.open.push((index, i));
                            i
                        }
                    };
                    if matches!(b.block_mut(i), Some(Content::Text(_))) {
                        b.delta(i, text, out);
                    }
                } else if let Some(t) = d.get("toolUse") {
                    if let Some(i) = existing {
                        if matches!(b.block_mut(i), Some(Content::ToolCall(_))) {
                            let input = t.get("input").and_then(Value::as_str).unwrap_or("");
                            b.delta(i, input, out);
                        }
                    }
                } else if let Some(r) = d.get("reasoningContent") {
                    let i = match existing {
                        Some(i) => i,
                        None => {
                            let i = b.start_thinking_signed(Some(String::new()), out);
                            self.open.push((index, i));
                            i
                        }
                    };
                    if let Some(text) = r.get("text").and_then(Value::as_str) {
                        if matches!(b.block_mut(i), Some(Content::Thinking(_))) {
                            b.delta(i, text, out);
                        }
                    }
                    if let Some(sig) = r.get("signature").and_then(Value::as_str) {
                        if let Some(Content::Thinking(ThinkingContent {
                            thinking_signature, ..
                        })) = b.block_mut(i)
                        {
                            thinking_signature
                                .get_or_insert_with(String::new)
                                .push_str(sig);
                        }
                    }
                }
            }
            "contentBlockStop" => {
                if let Some(pos) = self.open.iter().position(|(bi, _)| *bi == index) {
                    let (_, i) = self.open.remove(pos);
                    b.end_block(i, out);
                }
            }
            "messageStop" => {
                if self.dialect.raw_stop_reason {
                    b.msg.raw_stop_reason = v
                        .get("stopReason")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                }
                self.stop = Some(
                    match v.get("stopReason").and_then(Value::as_str).unwrap_or("") {
                        "end_turn" | "stop_sequence" => StopReason::Stop,
                        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
                        "tool_use" => StopReason::ToolUse,
                        _ => StopReason::Error,
                    },
                );
            }
            "metadata" => {
                if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                    let (input, output) = (n("inputTokens"), n("outputTokens"));
                    let total = match n("totalTokens") {
                        0 => input + output,
                        t => t,
                    };
                    b.set_usage(
                        Usage {
                            input,
                            output,
                            cache_read: n("cacheReadInputTokens"),
                            cache_write: n("cacheWriteInputTokens"),
                            total_tokens: total,
                            ..Default::default()
                        },
                        out,
                    );
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>) {
        b.start(out);
        if self.dialect.raw_stop_reason && self.stop == Some(StopReason::Error) {
            // pi 0.87.1 names the provider's stop reason.
            let text = match &b.msg.raw_stop_reason {
                Some(r) if !r.is_empty() => format!("Provider stopped with: {r}"),
                _ => "An unknown error occurred".to_string(),
            };
            b.fail(text, false, None, out);
            return;
        }
        b.finish(self.stop.unwrap_or(StopReason::Stop), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(id: &str, base: &str) -> Model {
        Model {
            id: id.into(),
            name: id.into(),
            api: "bedrock-converse-stream".into(),
            provider: "amazon-bedrock".into(),
            base_url: base.into(),
            reasoning: true,
            input: vec!["text".into()],
            cost: Default::default(),
            context_window: 1,
            max_tokens: 1,
            headers: None,
            compat: None,
            ..Default::default()
        }
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn endpoints_follow_pi() {
        let std = "https://bedrock-runtime.us-east-1.amazonaws.com";
        let m = model("x", std);
        // Nothing configured: the model's standard endpoint and its region.
        assert_eq!(
            endpoint(&m, &env_of(&[])).unwrap(),
            (std.to_string(), "us-east-1".to_string())
        );
        // A configured region wins over the catalogue default.
        assert_eq!(
            endpoint(&m, &env_of(&[("AWS_REGION", "eu-west-3")])).unwrap(),
            (
                "https://bedrock-runtime.eu-west-3.amazonaws.com".to_string(),
                "eu-west-3".to_string()
            )
        );
        assert_eq!(
            endpoint(
                &m,
                &env_of(&[
                    ("AWS_REGION", "eu-west-3"),
                    ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://127.0.0.1:9/")
                ])
            )
            .unwrap()
            .0,
            "http://127.0.0.1:9"
        );
        // A custom endpoint is always used, signed for the configured region.
        let vpc = model("x", "https://vpce-1.bedrock-runtime.vpce.amazonaws.com/");
        assert_eq!(
            endpoint(&vpc, &env_of(&[("AWS_DEFAULT_REGION", "ap-south-1")])).unwrap(),
            (
                "https://vpce-1.bedrock-runtime.vpce.amazonaws.com".to_string(),
                "ap-south-1".to_string()
            )
        );
        assert_eq!(
            standard_endpoint_region("https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com")
                .as_deref(),
            Some("us-gov-west-1")
        );
        assert_eq!(standard_endpoint_region("http://127.0.0.1:8080"), None);
    }

    #[test]
    fn error_texts() {
        let h = |t: &str| vec![("x-amzn-errortype".to_string(), t.to_string())];
        assert_eq!(
            http_error_message(
                429,
                &h("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
                r#"{"message":"slow down"}"#
            ),
            "Throttling error: slow down"
        );
        assert_eq!(
            http_error_message(500, &[], r#"{"message":"internal failure"}"#),
            "Unknown: internal failure"
        );
        assert_eq!(http_error_message(400, &[], ""), "Unknown: UnknownError");
        assert_eq!(
            http_error_message(500, &[], "oops"),
            "Unexpected token 'o', \"oops\" is not valid JSON\n  Deserialization error: to see the raw response, inspect the hidden field {error}.$response on this object."
        );
    }

    #[test]
    fn hosts_and_paths() {
        assert_eq!(
            host_of("http://127.0.0.1:8080/x").as_deref(),
            Some("127.0.0.1:8080")
        );
        assert_eq!(
            host_of("https://Bedrock-Runtime.us-east-1.amazonaws.com:443/model").as_deref(),
            Some("bedrock-runtime.us-east-1.amazonaws.com")
        );
        assert_eq!(path_of("https://h/a/b?x=1"), "/a/b?x=1");
        assert_eq!(path_of("https://h"), "/");
        assert_eq!(
            encode_label("arn:aws:bedrock:us-east-1:1:inference-profile/x"),
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx"
        );
    }
}
