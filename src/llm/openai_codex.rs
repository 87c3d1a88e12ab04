//! The ChatGPT Codex backend (`openai-codex-responses`, the `openai-codex` models a ChatGPT
//! Plus/Pro login reaches): the Responses body with `instructions`, sent to
//! `<base>/codex/responses` with the login's access token and the ChatGPT account id it carries,
//! as pi 0.73.1 does over SSE.
//!
//! pi first tries a WebSocket transport and falls back to SSE (on Node 20, which the reference
//! runs on, WebSocket is unavailable, so it always uses SSE); pith speaks SSE only.

use serde_json::{Map, Value, json};

use crate::llm::api::{self, Prepared, WireApi};
use crate::llm::oauth::codex_account_id;
use crate::llm::openai_responses::{
    Decoder, Dialect, Flavor, OPENAI_TOOL_CALL_PROVIDERS, convert_messages, convert_tools,
    effort_for,
};
use crate::llm::{LlmRequest, http};
use crate::message::ThinkingLevel;

const DEFAULT_BASE_URL: &str = "https://chatgpt.com/backend-api";

/// The `openai-codex-responses` wire API.
pub struct OpenAiCodex;

pub const API: OpenAiCodex = OpenAiCodex;

impl WireApi for OpenAiCodex {
    fn name(&self) -> &'static str {
        "openai-codex-responses"
    }

    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String> {
        let Some(token) = req.api_key.as_deref().filter(|k| !k.is_empty()) else {
            return Err(format!("No API key for provider: {}", req.model.provider));
        };
        let account = codex_account_id(token)
            .ok_or_else(|| "Failed to extract accountId from token".to_string())?;
        let mut headers: Vec<(String, String)> = Vec::new();
        http::merge_model_headers(&mut headers, &req.model);
        let mut set = |k: &str, v: String| {
            headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
            headers.push((k.to_string(), v));
        };
        set("Authorization", format!("Bearer {token}"));
        set("chatgpt-account-id", account);
        set("originator", "pi".into());
        set("User-Agent", http::pi_user_agent(req.sdk));
        set("OpenAI-Beta", "responses=experimental".into());
        set("accept", "text/event-stream".into());
        set("content-type", "application/json".into());
        let d = Dialect::of(req.sdk);
        if let Some(s) = &req.session_id {
            // pi 0.87.1 spells it `session-id`.
            let name = if d.session_affinity {
                "session-id"
            } else {
                "session_id"
            };
            set(name, s.clone());
            set("x-client-request-id", s.clone());
        }
        let json = serde_json::to_vec(&build_body(req)).unwrap_or_default();
        let body = if d.codex_zstd {
            // pi 0.87.1 sends the body as zstd; pith's frame holds it uncompressed (raw blocks).
            set("content-encoding", "zstd".into());
            api::Body::Bytes(zstd_raw_frame(&json))
        } else {
            api::Body::Bytes(json)
        };
        Ok(Prepared {
            url: codex_url(&req.model.base_url),
            headers,
            body,
        })
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn api::Decoder> {
        Box::new(Decoder::with_flavor(req, Flavor::Codex))
    }

    fn http_error_message(
        &self,
        _req: &LlmRequest,
        status: u16,
        _headers: &[(String, String)],
        body: &str,
    ) -> String {
        error_message(status, body, now_ms())
    }

    fn connection_error(&self, _req: &LlmRequest) -> &'static str {
        api::FETCH_FAILED
    }
}

/// `data` as one zstd frame of raw (stored) blocks (RFC 8878): valid for every zstd decoder,
/// without a compressor in the binary. Single segment, content size in the header, no checksum.
pub fn zstd_raw_frame(data: &[u8]) -> Vec<u8> {
    const MAX_BLOCK: usize = 128 * 1024;
    let mut out = Vec::with_capacity(data.len() + 16 + data.len() / MAX_BLOCK * 3);
    out.extend_from_slice(&0xFD2F_B528u32.to_le_bytes());
    let len = data.len() as u64;
    // Frame header descriptor: single segment (bit 5) and the content size field's width.
    let (fcs_flag, fcs): (u8, Vec<u8>) = if len < 256 {
        (0, vec![len as u8])
    } else if len < 65_536 + 256 {
        (1, ((len - 256) as u16).to_le_bytes().to_vec())
    } else if len <= u64::from(u32::MAX) {
        (2, (len as u32).to_le_bytes().to_vec())
    } else {
        (3, len.to_le_bytes().to_vec())
    };
    out.push((fcs_flag << 6) | 0x20);
    out.extend_from_slice(&fcs);
    let mut chunks = data.chunks(MAX_BLOCK).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0]); // one empty, last, raw block
    }
    while let Some(c) = chunks.next() {
        let last = u32::from(chunks.peek().is_none());
        let header = last | ((c.len() as u32) << 3);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.extend_from_slice(c);
    }
    out
}

fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}

/// `<base>/codex/responses` (a base already ending in `/codex` or `/codex/responses` is kept).
pub fn codex_url(base: &str) -> String {
    let raw = if base.trim().is_empty() {
        DEFAULT_BASE_URL
    } else {
        base
    };
    let normalized = raw.trim_end_matches('/');
    if normalized.ends_with("/codex/responses") {
        normalized.to_string()
    } else if normalized.ends_with("/codex") {
        format!("{normalized}/responses")
    } else {
        format!("{normalized}/codex/responses")
    }
}

pub fn build_body(req: &LlmRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model.id));
    body.insert("store".into(), json!(false));
    body.insert("stream".into(), json!(true));
    let prompt = crate::llm::transcript::leading_prompt(req);
    let instructions = if prompt.is_empty() {
        "You are a helpful assistant."
    } else {
        prompt.as_str()
    };
    body.insert("instructions".into(), json!(instructions));
    body.insert(
        "input".into(),
        Value::Array(convert_messages(req, OPENAI_TOOL_CALL_PROVIDERS, false)),
    );
    body.insert("text".into(), json!({"verbosity": "low"}));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    if let Some(s) = &req.session_id {
        body.insert("prompt_cache_key".into(), json!(s));
    }
    body.insert("tool_choice".into(), json!("auto"));
    body.insert("parallel_tool_calls".into(), json!(true));
    if !crate::llm::openai_responses::request_tools(req)
        .0
        .is_empty()
    {
        body.insert(
            "tools".into(),
            Value::Array(convert_tools(
                req,
                Value::Null,
                crate::llm::strict::compat_flag(&req.model, "supportsStrictMode", true),
            )),
        );
    }
    if req.model.reasoning && req.thinking != ThinkingLevel::Off {
        if let Some(effort) = effort_for(req, req.thinking) {
            body.insert(
                "reasoning".into(),
                json!({"effort": effort, "summary": "auto"}),
            );
        }
    } else if Dialect::of(req.sdk).codex_reasoning_off && req.model.reasoning {
        // pi 0.87.1 also says so when thinking is off (the map's `off`, else `none`), unless
        // the model's map marks `off` unsupported.
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
    Value::Object(body)
}

/// pi's `parseErrorResponse`: a friendly text for usage limits (and any 429), else the error's
/// message, else the raw body.
pub fn error_message(status: u16, body: &str, now_ms: f64) -> String {
    let mut message = if body.is_empty() {
        api::reason_phrase(status).to_string()
    } else {
        body.to_string()
    };
    if message.is_empty() {
        message = "Request failed".into();
    }
    let mut friendly = None;
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        if let Some(err) = v
            .get("error")
            .filter(|e| !e.is_null() && *e != &json!(false))
        {
            let s = |k: &str| err.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
            let code = s("code").or(s("type")).unwrap_or("").to_ascii_lowercase();
            let limited = [
                "usage_limit_reached",
                "usage_not_included",
                "rate_limit_exceeded",
            ]
            .iter()
            .any(|c| code.contains(c));
            if limited || status == 429 {
                let plan = s("plan_type")
                    .map(|p| format!(" ({} plan)", p.to_lowercase()))
                    .unwrap_or_default();
                let when = err
                    .get("resets_at")
                    .and_then(Value::as_f64)
                    .filter(|t| *t != 0.0)
                    .map(|t| {
                        let mins = ((t * 1000.0 - now_ms) / 60000.0).round().max(0.0);
                        format!(" Try again in ~{mins} min.")
                    })
                    .unwrap_or_default();
                friendly = Some(
                    format!("You have hit your ChatGPT usage limit{plan}.{when}")
                        .trim()
                        .to_string(),
                );
            }
            message = s("message")
                .map(str::to_string)
                .or_else(|| friendly.clone())
                .unwrap_or(message);
        }
    }
    friendly.unwrap_or(message)
}

#[cfg(test)]
mod tests {
    #[test]
    fn zstd_raw_frames_decode_with_zstd() {
        // Sizes around every content-size width and the 128 KiB block limit.
        for len in [
            0usize, 1, 255, 256, 65_791, 65_792, 131_072, 131_073, 300_000,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let frame = zstd_raw_frame(&data);
            assert_eq!(&frame[..4], &[0x28, 0xB5, 0x2F, 0xFD]);
            let Ok(mut child) = std::process::Command::new("zstd")
                .args(["-d", "-c", "-q"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
            else {
                eprintln!("SKIPPED: no zstd binary to decode with");
                return;
            };
            let mut stdin = child.stdin.take().unwrap();
            let writer = std::thread::spawn(move || {
                use std::io::Write;
                stdin.write_all(&frame).unwrap();
            });
            let out = child.wait_with_output().unwrap();
            writer.join().unwrap();
            assert!(out.status.success(), "len {len}");
            assert_eq!(out.stdout, data, "len {len}");
        }
    }

    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            codex_url("https://chatgpt.com/backend-api/"),
            "https://chatgpt.com/backend-api/codex/responses"
        );
        assert_eq!(codex_url("http://x/codex"), "http://x/codex/responses");
        assert_eq!(
            codex_url("http://x/codex/responses"),
            "http://x/codex/responses"
        );
        assert_eq!(
            codex_url(""),
            "https://chatgpt.com/backend-api/codex/responses"
        );
    }

    #[test]
    fn error_texts() {
        assert_eq!(
            error_message(
                429,
                r#"{"error":{"type":"usage_limit_reached","message":"x","plan_type":"Plus","resets_at":600}}"#,
                0.0
            ),
            "You have hit your ChatGPT usage limit (plus plan). Try again in ~10 min."
        );
        assert_eq!(
            error_message(400, r#"{"error":{"message":"Unsupported parameter"}}"#, 0.0),
            "Unsupported parameter"
        );
        assert_eq!(
            error_message(503, "upstream connect error", 0.0),
            "upstream connect error"
        );
        assert_eq!(error_message(500, "", 0.0), "Internal Server Error");
    }
}
