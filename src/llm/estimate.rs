//! pi 0.87.1's context estimate and output limit (`--compat 0.87`): every request's `max_tokens`
//! is the model's limit clamped to what the context window leaves free (`clampMaxTokensToContext`:
//! window − estimated context − 4096, at least 1). The estimate is pi-ai's `estimateContextTokens`:
//! the usage the last complete reply reported plus about a token per four characters (UTF-16
//! units) of everything after it; images count 4800 characters; the system prompt and the tool
//! declarations count as pi's leading `role:"system"` message does. Pure code.

use crate::llm::LlmRequest;
use crate::message::{AssistantMessage, Content, LlmMessage, StopReason, UserContent};

/// Tokens kept free beside the estimate.
const CONTEXT_SAFETY_TOKENS: i64 = 4096;
const CHARS_PER_TOKEN: usize = 4;
const IMAGE_CHARS: usize = 4800;

fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

fn tokens(chars: usize) -> u64 {
    chars.div_ceil(CHARS_PER_TOKEN) as u64
}

fn content_chars(blocks: &[Content]) -> usize {
    blocks
        .iter()
        .map(|b| match b {
            Content::Text(t) => units(&t.text),
            Content::Image(_) => IMAGE_CHARS,
            _ => 0,
        })
        .sum()
}

/// pi-ai's `estimateMessageTokens`.
fn message_tokens(m: &LlmMessage) -> u64 {
    match m {
        LlmMessage::User(u) => match &u.content {
            UserContent::Text(s) => tokens(units(s)),
            UserContent::Blocks(b) => tokens(content_chars(b)),
        },
        LlmMessage::ToolResult(r) => tokens(content_chars(&r.content)),
        // A transcript system message: its whole text and the tools it adds and removes.
        LlmMessage::System(s) => {
            let list = |v: Option<serde_json::Value>| match v {
                Some(serde_json::Value::Array(a)) if !a.is_empty() => {
                    tokens(units(&serde_json::Value::Array(a).to_string()))
                }
                _ => 0,
            };
            tokens(units(&crate::llm::transcript::system_text(s)))
                + list(
                    s.tools_added
                        .as_ref()
                        .and_then(|t| serde_json::to_value(t).ok()),
                )
                + list(
                    s.tools_removed
                        .as_ref()
                        .and_then(|t| serde_json::to_value(t).ok()),
                )
        }
        LlmMessage::Assistant(a) => tokens(
            a.content
                .iter()
                .map(|b| match b {
                    Content::Text(t) => units(&t.text),
                    Content::Thinking(t) => units(&t.thinking),
                    Content::ToolCall(c) => units(&c.name) + units(&c.arguments.to_string()),
                    _ => 0,
                })
                .sum(),
        ),
    }
}

/// `calculateContextTokens`: the reported total, else the sum of its parts.
fn usage_tokens(a: &AssistantMessage) -> u64 {
    let u = &a.usage;
    if u.total_tokens > 0 {
        u.total_tokens
    } else {
        u.input + u.output + u.cache_read + u.cache_write
    }
}

/// The leading system message: its text and the tools it declares (pi's `toolsAdded` JSON).
fn system_tokens(req: &LlmRequest) -> u64 {
    let text = tokens(units(&req.system_prompt));
    if req.tools.is_empty() {
        return text;
    }
    let decls: Vec<serde_json::Value> = req
        .tools
        .iter()
        .map(|t| {
            let mut o = serde_json::Map::new();
            o.insert("name".into(), t.name.clone().into());
            o.insert("description".into(), t.description.clone().into());
            o.insert("parameters".into(), t.parameters.clone());
            if let Some(c) = &t.constrained_sampling {
                o.insert("constrainedSampling".into(), c.clone());
            }
            serde_json::Value::Object(o)
        })
        .collect();
    let json = serde_json::Value::Array(decls).to_string();
    text + tokens(units(&json))
}

/// pi-ai's `estimateContextTokens` over the request's context (system message first).
pub fn context_tokens(req: &LlmRequest) -> u64 {
    // The last complete reply with usage whose timestamp is not older than what precedes it.
    let mut latest_prefix: Option<u64> = None;
    let mut usage_at: Option<usize> = None;
    for (i, m) in req.messages.iter().enumerate() {
        if let LlmMessage::Assistant(a) = m {
            if latest_prefix.is_none_or(|p| a.timestamp >= p)
                && !matches!(a.stop_reason, StopReason::Aborted | StopReason::Error)
                && usage_tokens(a) > 0
            {
                usage_at = Some(i);
            }
        }
        let ts = match m {
            LlmMessage::User(u) => u.timestamp,
            LlmMessage::Assistant(a) => a.timestamp,
            LlmMessage::ToolResult(r) => r.timestamp,
            LlmMessage::System(s) => s.timestamp,
        };
        latest_prefix = Some(latest_prefix.map_or(ts, |p| p.max(ts)));
    }
    match usage_at {
        Some(i) => {
            let base = match &req.messages[i] {
                LlmMessage::Assistant(a) => usage_tokens(a),
                _ => 0,
            };
            base + req
                .messages
                .iter()
                .skip(i + 1)
                .map(message_tokens)
                .sum::<u64>()
        }
        // Under 0.87 the transcript's system messages are among the messages; otherwise the
        // prompt and tools count as one leading system message.
        None if req
            .messages
            .iter()
            .any(|m| matches!(m, LlmMessage::System(_))) =>
        {
            req.messages.iter().map(message_tokens).sum::<u64>()
        }
        None => system_tokens(req) + req.messages.iter().map(message_tokens).sum::<u64>(),
    }
}

/// `clampMaxTokensToContext`: `max_tokens` within what the context window leaves.
pub fn clamp_max_tokens(req: &LlmRequest, max_tokens: u64) -> u64 {
    let window = req.model.context_window as i64;
    if window <= 0 {
        return max_tokens.max(1);
    }
    let available = window - context_tokens(req) as i64 - CONTEXT_SAFETY_TOKENS;
    max_tokens.min(available.max(1) as u64)
}
