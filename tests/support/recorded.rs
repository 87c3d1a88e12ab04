//! Conversations recorded from pi 0.73.1 against a local fake provider (`fixtures/<api>/*.json`):
//! for every LLM request pi made, the context it had (system prompt, tools, messages), the exact
//! request it sent, the response bytes the fake answered with, and the assistant message pi made
//! of them. [`assert_bodies`] checks pith sends the same bytes for the same context;
//! [`assert_replays`] serves the same bytes to pith (re-chunked down to single bytes) and checks it
//! ends with the same message.

#![allow(dead_code)]

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine;
use pith::llm::models::Registry;
use pith::llm::{LlmRequest, Model, StreamEvent, ToolSchema};
use pith::message::{LlmMessage, ThinkingLevel};
use serde_json::Value;

use super::fake_llm::{FakeLlm, Recorded, Reply};
use super::streams;

/// Lower-cased header pairs.
pub type Headers = Vec<(String, String)>;

/// What pi sent: method, path, headers, body.
pub type SentRequest = (String, String, Headers, String);

/// What the fake answered: status, headers, body bytes.
pub type Answer = (u16, Headers, Vec<u8>);

pub struct Turn {
    pub messages: Vec<LlmMessage>,
    /// pi's final assistant message, as pi printed it in its `message_end`.
    pub message_json: String,
    /// pi's `message_update`s for it: `[type, contentIndex, delta]`.
    pub updates: Vec<Value>,
    pub system_prompt: String,
    pub tools: Vec<ToolSchema>,
    pub session_id: Option<String>,
    /// What pi sent: method, path, lower-cased headers, body.
    pub request: Option<SentRequest>,
    /// What the fake answered: status, headers, body bytes.
    pub response: Option<Answer>,
}

pub struct Fixture {
    pub name: String,
    /// Recorded from pi 0.87.1 (`"pi":"0.87.1"`): replayed under `--compat 0.87`, with pi
    /// 0.87.1's model table.
    pub compat: pith::protocol::Version,
    /// The environment pi ran with (credentials, region, ...).
    pub env: Vec<(String, String)>,
    pub provider: String,
    pub model: String,
    pub thinking: Option<String>,
    /// The base URL pi was pointed at (models.json), `{PORT}` standing for the fake's port; when
    /// absent, the one the test passes.
    pub base_url: Option<String>,
    /// The models.json pi ran with, when the model is defined or changed there (`{PORT}` as in
    /// `base_url`).
    pub models_json: Option<String>,
    pub turns: Vec<Turn>,
}

pub fn load(name: &str) -> Fixture {
    let text = super::streams::fixture_text(name);
    let v: Value = serde_json::from_str(&text).expect("fixture json");
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let turns = v["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| {
            let messages: Vec<LlmMessage> =
                serde_json::from_value(t["messages"].clone()).expect("messages");
            let tools = t
                .get("tools")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|x| ToolSchema {
                            name: s(x, "name").unwrap_or_default(),
                            description: s(x, "description").unwrap_or_default(),
                            parameters: x["parameters"].clone(),
                            constrained_sampling: x.get("constrainedSampling").cloned(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let pairs = |h: &Value| -> Vec<(String, String)> {
                match h {
                    Value::Array(a) => a
                        .iter()
                        .map(|p| {
                            let k = p[0].as_str().unwrap_or("").to_ascii_lowercase();
                            (k, p[1].as_str().unwrap_or("").to_string())
                        })
                        .collect(),
                    Value::Object(m) => m
                        .iter()
                        .map(|(k, v)| {
                            (k.to_ascii_lowercase(), v.as_str().unwrap_or("").to_string())
                        })
                        .collect(),
                    _ => Vec::new(),
                }
            };
            let request = t.get("request").map(|r| {
                (
                    s(r, "method").unwrap_or_default(),
                    s(r, "path").unwrap_or_default(),
                    pairs(&r["headers"]),
                    s(r, "body").unwrap_or_default(),
                )
            });
            let response = t.get("response").map(|r| {
                let body = base64::engine::general_purpose::STANDARD
                    .decode(s(r, "bodyBase64").unwrap_or_default())
                    .expect("base64");
                (
                    r["status"].as_u64().unwrap_or(200) as u16,
                    pairs(&r["headers"]),
                    body,
                )
            });
            Turn {
                messages,
                message_json: s(t, "messageJson").expect("messageJson"),
                updates: t
                    .get("updates")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                system_prompt: s(t, "systemPrompt").unwrap_or_default(),
                tools,
                session_id: s(t, "sessionId"),
                request,
                response,
            }
        })
        .collect();
    let env = v
        .get("env")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let compat = if v.get("pi").and_then(Value::as_str) == Some("0.87.1") {
        pith::protocol::Version::V087
    } else {
        pith::protocol::Version::V073
    };
    Fixture {
        env,
        compat,
        name: name.to_string(),
        provider: s(&v, "provider").expect("provider"),
        model: s(&v, "model").expect("model"),
        thinking: s(&v, "thinking"),
        base_url: s(&v, "baseUrl"),
        models_json: s(&v, "modelsJson"),
        turns,
    }
}

/// The models pi had: the built-in ones, with the fixture's models.json when it has one. Built
/// once per version and models.json in the test binary: a debug build takes a good
/// part of a second to build the catalog, and every turn and chunk size asks for it twice.
fn registry(fx: &Fixture, port: &str) -> std::sync::Arc<Registry> {
    type Cache = std::sync::Mutex<HashMap<(String, String), std::sync::Arc<Registry>>>;
    static BUILT: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    // What the registry is built from: the version's catalog and the models.json, whose base
    // URLs name the port (each replay has a port of its own).
    let key = (
        format!("{:?}", fx.compat),
        fx.models_json
            .as_ref()
            .map_or(String::new(), |t| t.replace("{PORT}", port)),
    );
    let cache = BUILT.get_or_init(Default::default);
    if let Some(r) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return std::sync::Arc::clone(r);
    }
    let r = std::sync::Arc::new(build_registry(fx, port));
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, std::sync::Arc::clone(&r));
    r
}

fn build_registry(fx: &Fixture, port: &str) -> Registry {
    match &fx.models_json {
        Some(text) => Registry::from_models_json_for(
            &text.replace("{PORT}", port),
            fx.compat.profile().llm.catalog,
        )
        .unwrap_or_else(|e| panic!("{}: models.json: {e}", fx.name)),
        None => Registry::builtin_for(fx.compat.profile().llm.catalog),
    }
}

/// The model of the fixture, at `base_url` (or at the fixture's own base URL on the port of
/// `base_url`).
pub fn model(fx: &Fixture, base_url: &str) -> Model {
    let mut m = registry(fx, port_of(base_url))
        .find(&fx.provider, &fx.model)
        .unwrap_or_else(|| panic!("{}/{} is not known", fx.provider, fx.model))
        .clone();
    match (&fx.base_url, &fx.models_json) {
        (Some(template), _) => m.base_url = template.replace("{PORT}", port_of(base_url)),
        // The models.json URL, on this port already.
        (None, Some(_)) => {}
        (None, None) => m.base_url = base_url.to_string(),
    }
    m
}

/// The port of `http://127.0.0.1:PORT[/...]`.
fn port_of(url: &str) -> &str {
    let after = url.split_once("://").map_or(url, |(_, r)| r);
    let host = after.split('/').next().unwrap_or("");
    host.rsplit_once(':').map_or("", |(_, p)| p)
}

/// The request pith builds for turn `i`.
pub fn request(fx: &Fixture, i: usize, model: Model, api_key: &str) -> LlmRequest {
    let t = &fx.turns[i];
    let asked = match fx.thinking.as_deref() {
        Some(l) => serde_json::from_value(Value::String(l.into())).expect("level"),
        None => ThinkingLevel::Medium,
    };
    // As the state machine does: the level clamped to what the model supports.
    let reg = registry(fx, port_of(&model.base_url));
    let levels = reg.thinking_levels(&model);
    let thinking = pith::llm::clamp_thinking(&levels, asked);
    let mut messages = t.messages.clone();
    // Under 0.87 the transcript starts with its system message (pith's agent sends it in place);
    // fixtures recorded without it get one holding the turn's prompt and tools.
    if fx.compat == pith::protocol::Version::V087
        && !messages.iter().any(|m| matches!(m, LlmMessage::System(_)))
    {
        let decl: Vec<Value> = t
            .tools
            .iter()
            .map(|t| {
                let mut o = serde_json::json!({"name": t.name, "description": t.description,
                    "parameters": t.parameters});
                if let Some(c) = &t.constrained_sampling {
                    o["constrainedSampling"] = c.clone();
                }
                o
            })
            .collect();
        let mut sys = serde_json::json!({"role": "system", "content": t.system_prompt,
            "timestamp": 0});
        if !decl.is_empty() {
            sys["toolsAdded"] = Value::Array(decl);
        }
        messages.insert(0, serde_json::from_value(sys).expect("system message"));
    }
    let mut req = streams::request(model, messages);
    req.api_key = Some(api_key.to_string());
    req.system_prompt = t.system_prompt.clone();
    req.tools = t.tools.clone();
    req.thinking = thinking;
    req.session_id = t.session_id.clone();
    req.extra.thinking_map = reg.thinking_level_map(&fx.provider, &fx.model).cloned();
    req.sdk = fx.compat.profile().llm.sdk;
    let port = port_of(&req.model.base_url).to_string();
    let env: Vec<(String, String)> = fx
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.replace("{PORT}", &port)))
        .collect();
    req.extra.env = Some(std::sync::Arc::new(move |k: &str| {
        env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }));
    req
}

/// pith's request for every recorded turn has pi's exact body (and `path`).
pub fn assert_bodies(name: &str, base_url: &str, api_key: &str, adjust: &dyn Fn(&mut LlmRequest)) {
    let fx = load(name);
    for (i, t) in fx.turns.iter().enumerate() {
        let Some((_, path, _, body)) = &t.request else {
            continue;
        };
        let mut req = request(&fx, i, model(&fx, base_url), api_key);
        adjust(&mut req);
        let api = pith::llm::stream::api_for(&req.model.api).expect("api");
        let prepared = api
            .prepare(&req)
            .unwrap_or_else(|e| panic!("{name} turn {i}: {e}"));
        let body_bytes = prepared.body.bytes(&req);
        let body_bytes =
            if pith::llm::api::header_of(&prepared.headers, "content-encoding") == Some("zstd") {
                zstd_raw_decode(&body_bytes)
            } else {
                body_bytes
            };
        let got = String::from_utf8(body_bytes).expect("utf-8");
        if &got != body {
            let at = got
                .bytes()
                .zip(body.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(body.len()));
            let lo = at.saturating_sub(120);
            panic!(
                "{name} turn {i}: body differs at byte {at}\n pith: …{}\n   pi: …{}",
                &got[lo..(at + 120).min(got.len())],
                &body[lo..(at + 120).min(body.len())]
            );
        }
        let after_scheme = prepared.url.split_once("://").map_or("", |(_, r)| r);
        let url_path = after_scheme
            .find('/')
            .map_or("/".to_string(), |i| after_scheme[i..].to_string());
        assert_eq!(&url_path, path, "{name} turn {i}: path");
    }
}

/// pith's final message for every recorded response equals pi's, whole and re-chunked.
pub fn assert_replays(name: &str, api_key: &str, chunk_sizes: &[usize]) {
    let fx = load(name);
    for (i, t) in fx.turns.iter().enumerate() {
        let Some((status, headers, body)) = &t.response else {
            continue;
        };
        for &size in chunk_sizes {
            let mut reply = Reply {
                status: *status,
                headers: headers.clone(),
                ..Reply::sse(body.clone())
            };
            if size > 0 {
                reply = reply.chunked(size, Duration::ZERO);
            }
            let srv = FakeLlm::start(vec![reply]);
            let req = request(&fx, i, model(&fx, &srv.base_url()), api_key);
            let events = streams::collect(req);
            assert_eq!(
                updates(&events),
                t.updates,
                "{name} turn {i}, chunks of {size}: pith's stream events differ from pi's"
            );
            let got = generated_ids(&final_json(&events));
            let want = generated_ids(&without_timestamp(&t.message_json));
            assert_eq!(
                got, want,
                "{name} turn {i}, chunks of {size}: pith's message differs from pi's"
            );
        }
    }
}

/// The events a client sees as `message_update`s, as `[type, contentIndex, delta]` (pi's form).
pub fn updates(events: &[StreamEvent]) -> Vec<Value> {
    let u = |kind: &str, i: &usize, d: Option<&str>| {
        serde_json::json!([
            kind,
            i,
            d.map_or(Value::Null, |d| Value::String(d.to_string()))
        ])
    };
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextStart { index } => Some(u("text_start", index, None)),
            StreamEvent::TextDelta { index, delta } => Some(u("text_delta", index, Some(delta))),
            StreamEvent::TextEnd { index, .. } => Some(u("text_end", index, None)),
            StreamEvent::ThinkingStart { index, .. } => Some(u("thinking_start", index, None)),
            StreamEvent::ThinkingDelta { index, delta } => {
                Some(u("thinking_delta", index, Some(delta)))
            }
            StreamEvent::ThinkingEnd { index, .. } => Some(u("thinking_end", index, None)),
            StreamEvent::ToolCallStart { index, .. } => Some(u("toolcall_start", index, None)),
            StreamEvent::ToolCallDelta { index, delta } => {
                Some(u("toolcall_delta", index, Some(delta)))
            }
            StreamEvent::ToolCallEnd { index, .. } => Some(u("toolcall_end", index, None)),
            _ => None,
        })
        .collect()
}

/// Tool-call ids the Google APIs make up (`<name>_<epoch ms>_<n>`) with the time blanked.
pub fn generated_ids(json: &str) -> String {
    let b = json.as_bytes();
    let mut out = String::with_capacity(json.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'_'
            && i + 15 <= b.len()
            && b[i + 1..i + 14].iter().all(u8::is_ascii_digit)
            && b[i + 14] == b'_'
        {
            out.push_str("_<time>_");
            i += 15;
            continue;
        }
        let ch = json[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// The final message as pith prints it, without its timestamp.
pub fn final_json(events: &[StreamEvent]) -> String {
    let m = streams::final_message(events);
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, pith::json::JsFormatter);
    serde::Serialize::serialize(&LlmMessage::Assistant(m.clone()), &mut ser).expect("json");
    without_timestamp(&String::from_utf8(buf).expect("utf-8"))
}

/// Every `"timestamp":<digits>` removed from a message's JSON text (the message's own, and
/// those of pi 0.87.1's `diagnostics`; numbers compared as printed: costs are raw float products
/// and must print exactly as pi prints them).
pub fn without_timestamp(json: &str) -> String {
    let key = "\"timestamp\":";
    let mut out = String::with_capacity(json.len());
    let mut rest = json;
    while let Some(at) = rest.find(key) {
        let after = &rest[at + key.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            out.push_str(&rest[..at + key.len()]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..at]);
        let mut tail = &after[digits..];
        if let Some(t) = tail.strip_prefix(',') {
            tail = t;
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// The requests a fake received, for header checks.
pub fn requests(srv: &FakeLlm) -> Vec<Recorded> {
    srv.requests()
}

/// pith sends these headers with pi's values for every recorded turn (names compared
/// case-insensitively; a header pi did not send must be absent).
pub fn assert_headers(name: &str, base_url: &str, api_key: &str, names: &[&str]) {
    let fx = load(name);
    for (i, t) in fx.turns.iter().enumerate() {
        let Some((_, _, pi_headers, _)) = &t.request else {
            continue;
        };
        let req = request(&fx, i, model(&fx, base_url), api_key);
        let api = pith::llm::stream::api_for(&req.model.api).expect("api");
        let prepared = api
            .prepare(&req)
            .unwrap_or_else(|e| panic!("{name} turn {i}: {e}"));
        for h in names {
            let ours = pith::llm::api::header_of(&prepared.headers, h);
            let theirs = pith::llm::api::header_of(pi_headers, h);
            assert_eq!(ours, theirs, "{name} turn {i}: header {h}");
        }
    }
}

/// The content of a zstd frame made of raw blocks (what pith sends under `content-encoding:
/// zstd`).
pub fn zstd_raw_decode(frame: &[u8]) -> Vec<u8> {
    assert_eq!(&frame[..4], &[0x28, 0xB5, 0x2F, 0xFD], "zstd magic");
    let desc = frame[4];
    let fcs_len = [1, 2, 4, 8][(desc >> 6) as usize];
    let mut at = 5 + fcs_len;
    let mut out = Vec::new();
    loop {
        let h = u32::from_le_bytes([frame[at], frame[at + 1], frame[at + 2], 0]);
        at += 3;
        assert_eq!((h >> 1) & 3, 0, "raw block");
        let size = (h >> 3) as usize;
        out.extend_from_slice(&frame[at..at + size]);
        at += size;
        if h & 1 == 1 {
            break;
        }
    }
    out
}
