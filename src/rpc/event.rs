//! Event frames written to stdout (they never carry an `id`). Shapes and key order follow the
//! reference (spec 5.1); `agent_settled` is pith's addition.
//!
//! `message_update` is the hot path: the reference writes the whole partial message twice per
//! delta (`assistantMessageEvent.partial` and `message`). pith serialises the partial once and
//! splices the bytes into both places, and `--rpc-partials none` leaves both out.

use serde::Serialize;
use serde_json::Value;

use crate::message::{AgentMessage, AssistantMessage, ToolCall};
use crate::rpc::partial::PartialEncoder;

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event<'a> {
    AgentStart,
    AgentEnd {
        messages: &'a [AgentMessage],
        /// pi 0.87.1 only: an auto-retry follows this run.
        #[serde(rename = "willRetry", skip_serializing_if = "Option::is_none")]
        will_retry: Option<bool>,
    },
    TurnStart,
    TurnEnd {
        message: &'a AgentMessage,
        #[serde(rename = "toolResults")]
        tool_results: &'a [AgentMessage],
    },
    MessageStart {
        message: &'a AgentMessage,
    },
    MessageEnd {
        message: &'a AgentMessage,
    },
    ToolExecutionStart {
        #[serde(rename = "toolCallId")]
        tool_call_id: &'a str,
        #[serde(rename = "toolName")]
        tool_name: &'a str,
        args: &'a Value,
        /// pi 1.6.0: a call a `codemode` script made (the script's call id).
        #[serde(rename = "parentToolCallId", skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<&'a str>,
    },
    ToolExecutionUpdate {
        #[serde(rename = "toolCallId")]
        tool_call_id: &'a str,
        #[serde(rename = "toolName")]
        tool_name: &'a str,
        args: &'a Value,
        #[serde(rename = "partialResult")]
        partial_result: &'a Value,
        #[serde(rename = "parentToolCallId", skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<&'a str>,
    },
    ToolExecutionEnd {
        #[serde(rename = "toolCallId")]
        tool_call_id: &'a str,
        #[serde(rename = "toolName")]
        tool_name: &'a str,
        result: &'a Value,
        #[serde(rename = "isError")]
        is_error: bool,
        /// pi 1.6.0 only: how long the tool ran (absent when it did not run).
        #[serde(rename = "durationMs", skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
        #[serde(rename = "parentToolCallId", skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<&'a str>,
    },
    QueueUpdate {
        steering: &'a [String],
        #[serde(rename = "followUp")]
        follow_up: &'a [String],
    },
    /// Manual compaction (reference 0.73.1).
    CompactionStart {
        reason: &'a str,
    },
    CompactionEnd {
        reason: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<&'a Value>,
        aborted: bool,
        #[serde(rename = "willRetry")]
        will_retry: bool,
        #[serde(rename = "errorMessage", skip_serializing_if = "Option::is_none")]
        error_message: Option<&'a str>,
    },
    AutoCompactionStart {
        reason: &'a str,
    },
    AutoCompactionEnd {
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<&'a Value>,
        aborted: bool,
        #[serde(rename = "willRetry")]
        will_retry: bool,
        #[serde(rename = "errorMessage", skip_serializing_if = "Option::is_none")]
        error_message: Option<&'a str>,
    },
    AutoRetryStart {
        attempt: u32,
        #[serde(rename = "maxAttempts")]
        max_attempts: u32,
        #[serde(rename = "delayMs")]
        delay_ms: u64,
        #[serde(rename = "errorMessage")]
        error_message: &'a str,
    },
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(rename = "finalError", skip_serializing_if = "Option::is_none")]
        final_error: Option<&'a str>,
    },
    ThinkingLevelChanged {
        level: &'a str,
    },
    SessionInfoChanged {
        name: &'a str,
    },
    /// pith's addition: the agent is idle and nothing (retry, compaction, queued message) is pending.
    AgentSettled {
        /// pi 1.6.0 only: an `abort` ended the run.
        #[serde(skip_serializing_if = "Option::is_none")]
        aborted: Option<bool>,
    },
    /// pith's own (issue 27, `--heartbeat`): a run (or its retry wait, a compaction) is alive.
    Heartbeat {
        #[serde(rename = "elapsedMs")]
        elapsed_ms: u64,
        turns: u64,
        #[serde(rename = "toolCalls")]
        tool_calls: u64,
        tokens: u64,
        #[serde(rename = "costUsd")]
        cost_usd: f64,
        activity: &'a str,
    },
    /// pith's own (issue 27): a run limit ended the run (right before its `agent_end`). Only
    /// when a limit was set.
    RunLimitReached {
        limit: &'a str,
        value: f64,
        used: f64,
    },
    /// pith's own (issue 27): the final answer of a run with an output schema (right before
    /// `run_limit_reached` / `agent_end`): `valid` with its `value`, or not, with the corrections
    /// used and the last answer's errors. Only when a schema was asked for.
    StructuredOutput {
        valid: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<&'a Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        corrections: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        errors: Option<&'a [String]>,
    },
    /// pi 0.87.1: a chunk of the RPC `bash` command's output (`id` of the command, when it had one).
    BashExecutionUpdate {
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a Value>,
        delta: &'a str,
    },
    /// pi 0.87.1: a session entry was appended outside a message (`context_edit` after a retry).
    EntryAppended {
        entry: &'a Value,
    },
    /// pi 0.87.1: a summary request (compaction, branch summary) failed and is retried.
    SummarizationRetryScheduled {
        attempt: u32,
        #[serde(rename = "maxAttempts")]
        max_attempts: u32,
        #[serde(rename = "delayMs")]
        delay_ms: u64,
        #[serde(rename = "errorMessage")]
        error_message: &'a str,
    },
    SummarizationRetryAttemptStart {
        source: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'a str>,
    },
    SummarizationRetryFinished,
    /// pith's addition: writing the session file failed (once per series of failures); the
    /// unsaved entries are kept in memory and written with the next successful write.
    SessionWriteError {
        #[serde(rename = "sessionFile")]
        session_file: &'a str,
        error: &'a str,
        #[serde(rename = "unsavedEntries")]
        unsaved_entries: usize,
    },
    /// pith's addition: the session file is written again, the waiting entries included.
    SessionWriteResumed {
        #[serde(rename = "sessionFile")]
        session_file: &'a str,
        #[serde(rename = "savedEntries")]
        saved_entries: usize,
    },
}

/// How much of the partial message `message_update` carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partials {
    /// As the reference: `assistantMessageEvent.partial` and `message` both carry the snapshot.
    Full,
    /// `--rpc-partials none`: neither is written; hosts rebuild the message from the deltas.
    None,
}

/// The `assistantMessageEvent` of a `message_update`, without its `partial`.
pub enum UpdateKind<'a> {
    TextStart,
    TextDelta(&'a str),
    TextEnd(&'a str),
    ThinkingStart,
    ThinkingDelta(&'a str),
    ThinkingEnd(&'a str),
    /// `id` and `toolName` are written under `--compat 0.87` only.
    ToolCallStart {
        id: &'a str,
        name: &'a str,
    },
    ToolCallDelta(&'a str),
    ToolCallEnd(&'a ToolCall),
}

/// What a `message_update` carries besides its delta.
pub enum UpdateBody<'a> {
    /// pi 0.73.1: the partial message (and its incremental encoder) as `partial` and `message`.
    Snapshot(&'a mut PartialEncoder, &'a AssistantMessage),
    /// `--rpc-partials none` under 0.73: the delta only.
    Lean,
    /// pi 0.87.1: delta-only, with the live cumulative `usage` (its JSON, serialised once per
    /// usage change rather than per delta); `toolcall_start` names its call.
    Live { usage_json: &'a [u8] },
}

/// Serialise one `message_update` line.
pub fn message_update(kind: &UpdateKind<'_>, index: usize, body: UpdateBody<'_>) -> Vec<u8> {
    let live = matches!(body, UpdateBody::Live { .. });
    let (name, extra): (&str, Option<(&str, String)>) = match kind {
        UpdateKind::TextStart => ("text_start", None),
        UpdateKind::TextDelta(d) => ("text_delta", Some(("delta", json_str(d)))),
        UpdateKind::TextEnd(c) => ("text_end", Some(("content", json_str(c)))),
        UpdateKind::ThinkingStart => ("thinking_start", None),
        UpdateKind::ThinkingDelta(d) => ("thinking_delta", Some(("delta", json_str(d)))),
        UpdateKind::ThinkingEnd(c) => ("thinking_end", Some(("content", json_str(c)))),
        UpdateKind::ToolCallStart { id, name } if live => (
            "toolcall_start",
            Some((
                "id",
                format!("{},\"toolName\":{}", json_str(id), json_str(name)),
            )),
        ),
        UpdateKind::ToolCallStart { .. } => ("toolcall_start", None),
        UpdateKind::ToolCallDelta(d) => ("toolcall_delta", Some(("delta", json_str(d)))),
        UpdateKind::ToolCallEnd(t) => ("toolcall_end", Some(("toolCall", tool_call_json(t)))),
    };
    let (snap, usage): (&[u8], &[u8]) = match body {
        UpdateBody::Snapshot(encoder, partial) => (encoder.snapshot(partial), &[]),
        UpdateBody::Lean => (&[], &[]),
        UpdateBody::Live { usage_json } => (&[], usage_json),
    };
    let extra_len = extra.as_ref().map_or(0, |(k, v)| k.len() + v.len() + 4);
    // Exact size: frames wait in a bounded queue, and slack would multiply by its length.
    let mut out =
        Vec::with_capacity(96 + name.len() + extra_len + 2 * snap.len() + usage.len() + 9);
    out.extend_from_slice(b"{\"type\":\"message_update\",");
    if !usage.is_empty() {
        out.extend_from_slice(b"\"usage\":");
        out.extend_from_slice(usage);
        out.push(b',');
    }
    out.extend_from_slice(b"\"assistantMessageEvent\":{\"type\":\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\",\"contentIndex\":");
    out.extend_from_slice(index.to_string().as_bytes());
    if let Some((key, value)) = extra {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(value.as_bytes());
    }
    if snap.is_empty() {
        out.extend_from_slice(b"}}\n");
    } else {
        out.extend_from_slice(b",\"partial\":");
        out.extend_from_slice(snap);
        out.extend_from_slice(b"},\"message\":");
        out.extend_from_slice(snap);
        out.extend_from_slice(b"}\n");
    }
    out
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

fn tool_call_json(t: &ToolCall) -> String {
    #[derive(Serialize)]
    struct Tagged<'a> {
        #[serde(rename = "type")]
        ty: &'static str,
        #[serde(flatten)]
        call: &'a ToolCall,
    }
    serde_json::to_string(&Tagged {
        ty: "toolCall",
        call: t,
    })
    .unwrap_or_else(|_| "{}".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Content;

    #[test]
    fn message_update_full_and_lean() {
        let mut m = AssistantMessage::empty("faux", "faux", "m");
        m.timestamp = 7;
        m.content.push(Content::text("Hi"));
        let mut enc = PartialEncoder::new();
        enc.update(&crate::llm::StreamEvent::Start { partial: m.clone() }, &m);
        let full = String::from_utf8(message_update(
            &UpdateKind::TextDelta("Hi"),
            0,
            UpdateBody::Snapshot(&mut enc, &m),
        ))
        .unwrap();
        let v: Value = serde_json::from_str(&full).unwrap();
        assert_eq!(v["assistantMessageEvent"]["delta"], "Hi");
        assert_eq!(v["assistantMessageEvent"]["partial"], v["message"]);
        assert_eq!(v["message"]["role"], "assistant");
        assert_eq!(v["message"]["content"][0]["text"], "Hi");
        let lean = String::from_utf8(message_update(
            &UpdateKind::TextDelta("Hi"),
            0,
            UpdateBody::Lean,
        ))
        .unwrap();
        assert_eq!(
            lean,
            "{\"type\":\"message_update\",\"assistantMessageEvent\":{\"type\":\"text_delta\",\"contentIndex\":0,\"delta\":\"Hi\"}}\n"
        );
        let start = UpdateKind::ToolCallStart {
            id: "t1",
            name: "bash",
        };
        let old = String::from_utf8(message_update(&start, 2, UpdateBody::Lean)).unwrap();
        assert_eq!(
            old,
            "{\"type\":\"message_update\",\"assistantMessageEvent\":{\"type\":\"toolcall_start\",\"contentIndex\":2}}\n"
        );
        let live = String::from_utf8(message_update(
            &start,
            2,
            UpdateBody::Live {
                usage_json: b"{\"input\":1}",
            },
        ))
        .unwrap();
        assert_eq!(
            live,
            "{\"type\":\"message_update\",\"usage\":{\"input\":1},\"assistantMessageEvent\":{\"type\":\"toolcall_start\",\"contentIndex\":2,\"id\":\"t1\",\"toolName\":\"bash\"}}\n"
        );
    }

    #[test]
    fn settled_and_queue_update_shapes() {
        let s = serde_json::to_string(&Event::AgentSettled { aborted: None }).unwrap();
        assert_eq!(s, r#"{"type":"agent_settled"}"#);
        let s = serde_json::to_string(&Event::AgentSettled {
            aborted: Some(true),
        })
        .unwrap();
        assert_eq!(s, r#"{"type":"agent_settled","aborted":true}"#);
        let s = serde_json::to_string(&Event::QueueUpdate {
            steering: &["a".into()],
            follow_up: &[],
        })
        .unwrap();
        assert_eq!(
            s,
            r#"{"type":"queue_update","steering":["a"],"followUp":[]}"#
        );
    }
}
