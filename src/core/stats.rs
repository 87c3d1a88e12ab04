//! Token estimates and session statistics over the agent's context (spec 4.9, 10.2).
//! Pure functions: the state machine and compaction both use them.

use std::path::Path;

use serde_json::{Value, json};

use crate::message::{AgentMessage, Content, StopReason, Usage, UserContent};

/// JavaScript string length (UTF-16 code units): the reference counts characters this way.
fn js_len(s: &str) -> usize {
    s.encode_utf16().count()
}

fn content_chars(blocks: &[Content], image_tokens_as_chars: usize) -> usize {
    blocks
        .iter()
        .map(|c| match c {
            Content::Text(t) => js_len(&t.text),
            Content::Image(_) => image_tokens_as_chars,
            Content::Thinking(t) => js_len(&t.thinking),
            Content::ToolCall(t) => js_len(&t.name) + js_len(&t.arguments.to_string()),
        })
        .sum()
}

/// `estimateTokens`: characters / 4, rounded up (4800 tokens per image in tool results / custom).
pub fn estimate_tokens(m: &AgentMessage) -> u64 {
    let chars = match m {
        AgentMessage::User(u) => match &u.content {
            UserContent::Text(s) => js_len(s),
            UserContent::Blocks(b) => content_chars(b, 0),
        },
        AgentMessage::Assistant(a) => content_chars(&a.content, 0),
        AgentMessage::ToolResult(t) => content_chars(&t.content, 4800 * 4),
        AgentMessage::Custom(c) => match &c.content {
            UserContent::Text(s) => js_len(s),
            UserContent::Blocks(b) => content_chars(b, 4800 * 4),
        },
        AgentMessage::BashExecution(b) => js_len(&b.command) + js_len(&b.output),
        AgentMessage::BranchSummary(b) => js_len(&b.summary),
        AgentMessage::CompactionSummary(c) => js_len(&c.summary),
    };
    (chars as u64).div_ceil(4)
}

/// `calculateContextTokens`: `totalTokens`, or the sum of the parts when it is 0.
pub fn usage_tokens(u: &Usage) -> u64 {
    if u.total_tokens > 0 {
        u.total_tokens
    } else {
        u.input + u.output + u.cache_read + u.cache_write
    }
}

fn usable(m: &AgentMessage) -> Option<&Usage> {
    match m {
        AgentMessage::Assistant(a)
            if a.stop_reason != StopReason::Aborted && a.stop_reason != StopReason::Error =>
        {
            Some(&a.usage)
        }
        _ => None,
    }
}

/// `estimateContextTokens`: last usable usage + estimates of later messages; else all estimates.
pub fn estimate_context_tokens(messages: &[AgentMessage]) -> u64 {
    match messages.iter().rposition(|m| usable(m).is_some()) {
        Some(i) => {
            let base = usable(&messages[i]).map(usage_tokens).unwrap_or(0);
            base + messages[i + 1..].iter().map(estimate_tokens).sum::<u64>()
        }
        None => messages.iter().map(estimate_tokens).sum(),
    }
}

/// Context tokens for `contextUsage`, `None` when unknown (after a compaction with no reply since).
pub fn context_usage_tokens(messages: &[AgentMessage]) -> Option<u64> {
    let last_compaction = messages
        .iter()
        .rposition(|m| matches!(m, AgentMessage::CompactionSummary(_)));
    let last_usage = messages.iter().rposition(|m| usable(m).is_some());
    match (last_compaction, last_usage) {
        (Some(c), None) => {
            let _ = c;
            None
        }
        (Some(c), Some(u)) if u < c => None,
        _ => Some(estimate_context_tokens(messages)),
    }
}

/// The `get_session_stats` data.
pub fn session_stats(
    messages: &[AgentMessage],
    session_id: &str,
    session_file: Option<&Path>,
    context_window: Option<u64>,
) -> Value {
    let (mut user, mut assistant, mut calls, mut results) = (0u64, 0u64, 0u64, 0u64);
    let (mut input, mut output, mut cache_read, mut cache_write, mut cost) =
        (0u64, 0u64, 0u64, 0u64, 0f64);
    for m in messages {
        match m {
            AgentMessage::User(_) => user += 1,
            AgentMessage::Assistant(a) => {
                assistant += 1;
                calls += a.tool_calls().count() as u64;
                input += a.usage.input;
                output += a.usage.output;
                cache_read += a.usage.cache_read;
                cache_write += a.usage.cache_write;
                cost += a.usage.cost.total;
            }
            AgentMessage::ToolResult(_) => results += 1,
            _ => {}
        }
    }
    let mut data = serde_json::Map::new();
    if let Some(f) = session_file {
        data.insert("sessionFile".into(), json!(f.to_string_lossy()));
    }
    data.insert("sessionId".into(), json!(session_id));
    data.insert("userMessages".into(), json!(user));
    data.insert("assistantMessages".into(), json!(assistant));
    data.insert("toolCalls".into(), json!(calls));
    data.insert("toolResults".into(), json!(results));
    data.insert("totalMessages".into(), json!(messages.len()));
    data.insert(
        "tokens".into(),
        json!({"input": input, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write,
               "total": input + output + cache_read + cache_write}),
    );
    data.insert("cost".into(), js_number(cost));
    if let Some(window) = context_window {
        let usage = match context_usage_tokens(messages) {
            Some(t) => {
                let percent = if window > 0 {
                    t as f64 / window as f64 * 100.0
                } else {
                    0.0
                };
                json!({"tokens": t, "contextWindow": window, "percent": js_number(percent)})
            }
            None => json!({"tokens": null, "contextWindow": window, "percent": null}),
        };
        data.insert("contextUsage".into(), usage);
    }
    Value::Object(data)
}

/// A float as JavaScript prints it: integral values without a fraction.
pub fn js_number(v: f64) -> Value {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 9e15 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AssistantMessage, UserMessage};

    #[test]
    fn empty_stats_match_the_reference_shape() {
        let v = session_stats(&[], "sid", None, Some(200000));
        assert_eq!(
            v.to_string(),
            r#"{"sessionId":"sid","userMessages":0,"assistantMessages":0,"toolCalls":0,"toolResults":0,"totalMessages":0,"tokens":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0},"cost":0,"contextUsage":{"tokens":0,"contextWindow":200000,"percent":0}}"#
        );
    }

    #[test]
    fn context_tokens_use_last_usage_plus_estimates() {
        let mut a = AssistantMessage::empty("x", "y", "z");
        a.usage.total_tokens = 1870;
        let msgs = vec![
            AgentMessage::User(UserMessage {
                content: UserContent::Text("hello".into()),
                timestamp: 0,
            }),
            AgentMessage::Assistant(a),
            AgentMessage::User(UserMessage {
                content: UserContent::Text("12345678".into()),
                timestamp: 0,
            }),
        ];
        assert_eq!(estimate_context_tokens(&msgs), 1872);
        let v = session_stats(&msgs[..2], "s", None, Some(200000));
        assert_eq!(v["contextUsage"]["percent"], json!(0.935));
    }
}
