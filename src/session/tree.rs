//! Reading the entry tree: the branch from the root to a leaf, the LLM context it produces
//! (spec 11.4: compaction summary first, kept messages, then everything after), the model and
//! thinking level recorded on it, and the statistics of `get_session_stats` (spec 4.9).
//!
//! Everything here is linear in the number of entries; nothing mutates.

use serde::Serialize;
use std::borrow::Borrow;

use crate::message::{AgentMessage, CompactionSummaryMessage, Content, UserContent, js_f64};

use super::entry::{Entry, EntryKind};

/// Indices into `entries` from the root to `leaf` (inclusive), following `parent_of` (the index
/// of an entry's parent, `None` at a root or a broken link). A cyclic chain stops the walk
/// instead of looping.
pub fn branch_indices(
    len: usize,
    parent_of: impl Fn(usize) -> Option<usize>,
    leaf: Option<usize>,
) -> Vec<usize> {
    let mut path = Vec::new();
    let mut current = leaf;
    while let Some(i) = current {
        if path.len() > len {
            break;
        }
        path.push(i);
        current = parent_of(i);
    }
    path.reverse();
    path
}

/// Which entries make up a branch's context (spec 11.4): the latest compaction (its summary
/// comes first) and the entries whose messages follow, in order.
pub struct ContextPlan {
    pub compaction: Option<usize>,
    pub entries: Vec<usize>,
}

/// The context of a branch as pi's `buildSessionContext` gives it: every message on the path
/// after the latest compaction, failed replies included (a retried one too: pi 0.73.1 drops it
/// from its live context only and shows it again once the file is read; 0.87.1's
/// `context_edit` entry takes it out, [`drop_edited`]). Requests never carry failed replies.
pub fn context_plan(entries: &[Entry], path: &[usize]) -> ContextPlan {
    compaction_plan(entries, path)
}

/// Spec 11.4: the latest compaction on the branch and the entries whose messages follow it.
fn compaction_plan(entries: &[Entry], path: &[usize]) -> ContextPlan {
    let compaction_pos = path
        .iter()
        .rposition(|&i| matches!(entries[i].kind(), EntryKind::Compaction { .. }));
    let Some(cpos) = compaction_pos else {
        let mut all = path.to_vec();
        drop_edited(entries, &mut all);
        return ContextPlan {
            compaction: None,
            entries: all,
        };
    };
    let EntryKind::Compaction {
        first_kept_entry_id,
        ..
    } = entries[path[cpos]].kind()
    else {
        return ContextPlan {
            compaction: None,
            entries: Vec::new(),
        };
    };
    let first_kept = path[..cpos]
        .iter()
        .position(|&i| entries[i].id() == first_kept_entry_id);
    // System messages before the compaction are replaced by its checkpoint (pi 0.87.1).
    let mut kept: Vec<usize> = first_kept.map_or_else(Vec::new, |start| {
        path[start..cpos]
            .iter()
            .copied()
            .filter(|&i| !is_system_message(&entries[i]))
            .collect()
    });
    kept.extend_from_slice(&path[cpos + 1..]);
    drop_edited(entries, &mut kept);
    ContextPlan {
        compaction: Some(path[cpos]),
        entries: kept,
    }
}

fn is_system_message(e: &Entry) -> bool {
    matches!(e.kind(), EntryKind::Message { role, .. } if role == "system")
}

/// pi 0.87.1's `context_edit` entries with `replacement: null` take their target out of the
/// context (a failed attempt before an auto-retry); the target stays in the file.
fn drop_edited(entries: &[Entry], plan: &mut Vec<usize>) {
    let targets: Vec<String> = plan
        .iter()
        .filter(|&&i| entries[i].entry_type() == "context_edit")
        .filter_map(|&i| {
            let raw = entries[i].raw();
            match raw.get("replacement") {
                None | Some(serde_json::Value::Null) => raw
                    .get("targetId")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string),
                Some(_) => None,
            }
        })
        .collect();
    if !targets.is_empty() {
        plan.retain(|&i| !targets.iter().any(|t| t == entries[i].id()));
    }
}

/// The summary message a compaction entry puts at the start of the context.
pub fn compaction_summary(entry: &Entry) -> Option<AgentMessage> {
    match entry.kind() {
        EntryKind::Compaction {
            summary,
            tokens_before,
            ..
        } => Some(AgentMessage::CompactionSummary(CompactionSummaryMessage {
            summary: summary.clone(),
            tokens_before: *tokens_before,
            timestamp: entry.timestamp_ms(),
        })),
        _ => None,
    }
}

/// What a compaction entry puts at the start of the context: its system checkpoint (pi 0.87.1's
/// `systemMessage`, when it has one), then its summary.
pub fn compaction_messages(entry: &Entry) -> Vec<AgentMessage> {
    let checkpoint = (entry.line().contains("\"systemMessage\""))
        .then(|| entry.raw().get("systemMessage").cloned())
        .flatten()
        .and_then(|v| serde_json::from_value::<crate::message::SystemMessage>(v).ok())
        .map(|mut m| {
            m.checkpoint = true;
            AgentMessage::System(m)
        });
    checkpoint
        .into_iter()
        .chain(compaction_summary(entry))
        .collect()
}

/// The context messages of a branch (spec 11.4).
pub fn build_context(entries: &[Entry], path: &[usize]) -> Vec<AgentMessage> {
    let plan = context_plan(entries, path);
    let mut messages: Vec<AgentMessage> = plan
        .compaction
        .map(|c| compaction_messages(&entries[c]))
        .unwrap_or_default();
    messages.extend(
        plan.entries
            .iter()
            .filter_map(|&i| entries[i].context_message()),
    );
    messages
}

/// The last recorded thinking level on the branch (`None` when the branch has none).
pub fn thinking_level(entries: &[Entry], path: &[usize]) -> Option<String> {
    path.iter().rev().find_map(|&i| match entries[i].kind() {
        EntryKind::ThinkingLevelChange(level) => Some(level.clone()),
        _ => None,
    })
}

/// The model on the branch: the last `model_change` or assistant message, as
/// `(provider, model id)`.
pub fn model(entries: &[Entry], path: &[usize]) -> Option<(String, String)> {
    path.iter().rev().find_map(|&i| match entries[i].kind() {
        EntryKind::ModelChange { provider, model_id } => Some((provider.clone(), model_id.clone())),
        EntryKind::Message { .. } => match entries[i].message() {
            Some(AgentMessage::Assistant(a)) => Some((a.provider.clone(), a.model.clone())),
            _ => None,
        },
        _ => None,
    })
}

/// `get_last_assistant_text`: the last assistant message in `messages`, skipping aborted ones
/// with no content (and, with `skip_textless`, pi 1.6.0's rule: any reply that did not end with
/// `stop` and has no non-blank text: aborted, failed, tool calls only); its text blocks joined
/// and trimmed; `None` when absent or empty.
pub fn last_assistant_text<M: Borrow<AgentMessage>>(messages: &[M]) -> Option<String> {
    last_reply_text(messages, false)
}

/// [`last_assistant_text`], with `skip_textless` the profile's `answers.last_text_skips_empty`.
pub fn last_reply_text<M: Borrow<AgentMessage>>(
    messages: &[M],
    skip_textless: bool,
) -> Option<String> {
    use crate::message::{Content, StopReason};
    let last = messages.iter().rev().find_map(|m| match m.borrow() {
        AgentMessage::Assistant(a) => {
            let skipped = if skip_textless {
                a.stop_reason != StopReason::Stop
                    && !a
                        .content
                        .iter()
                        .any(|c| matches!(c, Content::Text(t) if !t.text.trim().is_empty()))
            } else {
                a.stop_reason == StopReason::Aborted && a.content.is_empty()
            };
            (!skipped).then_some(a)
        }
        _ => None,
    })?;
    let text = last.text().trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// `get_session_stats` data, serialised in the reference's key order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionStats {
    #[serde(rename = "sessionFile", skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    #[serde(rename = "sessionId")]
    pub session_id: String,
    #[serde(rename = "userMessages")]
    pub user_messages: u64,
    #[serde(rename = "assistantMessages")]
    pub assistant_messages: u64,
    #[serde(rename = "toolCalls")]
    pub tool_calls: u64,
    #[serde(rename = "toolResults")]
    pub tool_results: u64,
    #[serde(rename = "totalMessages")]
    pub total_messages: u64,
    pub tokens: TokenStats,
    #[serde(serialize_with = "js_f64")]
    pub cost: f64,
    #[serde(rename = "contextUsage", skip_serializing_if = "Option::is_none")]
    pub context_usage: Option<ContextUsage>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TokenStats {
    pub input: u64,
    pub output: u64,
    #[serde(rename = "cacheRead")]
    pub cache_read: u64,
    #[serde(rename = "cacheWrite")]
    pub cache_write: u64,
    pub total: u64,
}

/// `contextUsage`: `tokens`/`percent` are `null` right after a compaction, until an assistant
/// message reports usage again.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ContextUsage {
    pub tokens: Option<u64>,
    #[serde(rename = "contextWindow")]
    pub context_window: u64,
    #[serde(serialize_with = "js_opt_f64")]
    pub percent: Option<f64>,
}

fn js_opt_f64<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(f) => js_f64(f, s),
        None => s.serialize_none(),
    }
}

/// The counts and token sums of `get_session_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MessageCounts {
    pub users: u64,
    pub assistants: u64,
    pub tool_calls: u64,
    pub tool_results: u64,
    pub total: u64,
    pub tokens: TokenStats,
    pub cost: f64,
}

impl MessageCounts {
    fn add_usage(&mut self, u: &UsageTotals) {
        self.tokens.input += u.input;
        self.tokens.output += u.output;
        self.tokens.cache_read += u.cache_read;
        self.tokens.cache_write += u.cache_write;
        self.cost += u.cost.total;
    }

    fn finish(mut self) -> MessageCounts {
        let t = &mut self.tokens;
        t.total = t.input + t.output + t.cache_read + t.cache_write;
        self
    }
}

/// Counts and token sums over the context messages (pi 0.73.1).
pub fn message_stats<M: Borrow<AgentMessage>>(messages: &[M]) -> MessageCounts {
    let mut c = MessageCounts {
        total: messages.len() as u64,
        ..MessageCounts::default()
    };
    for m in messages {
        match m.borrow() {
            AgentMessage::User(_) => c.users += 1,
            AgentMessage::ToolResult(_) => c.tool_results += 1,
            AgentMessage::Assistant(a) => {
                c.assistants += 1;
                c.tool_calls += a.tool_calls().count() as u64;
                c.tokens.input += a.usage.input;
                c.tokens.output += a.usage.output;
                c.tokens.cache_read += a.usage.cache_read;
                c.tokens.cache_write += a.usage.cache_write;
                c.cost += a.usage.cost.total;
            }
            _ => {}
        }
    }
    c.finish()
}

/// The usage numbers the stats add up (absent fields count 0).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct UsageTotals {
    input: u64,
    output: u64,
    #[serde(rename = "cacheRead")]
    cache_read: u64,
    #[serde(rename = "cacheWrite")]
    cache_write: u64,
    cost: CostTotal,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct CostTotal {
    total: f64,
}

/// Only what the 0.87 stats read from an entry line.
#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct StatsLine {
    usage: Option<UsageTotals>,
    message: Option<StatsMessage>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct StatsMessage {
    usage: Option<UsageTotals>,
    content: Option<StatsContent>,
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum StatsContent {
    Blocks(Vec<BlockType>),
    Other(serde::de::IgnoredAny),
}

#[derive(serde::Deserialize)]
struct BlockType {
    #[serde(rename = "type", default)]
    ty: Option<String>,
}

/// Counts and token sums over every entry of the session file, all branches (pi 0.87.1's
/// `getSessionStats`): every `message` entry counts (whatever its role), assistant and tool
/// result messages add their usage, and so do `usage` entries and compaction / branch summary
/// entries that carry one.
pub fn entry_stats(entries: &[Entry]) -> MessageCounts {
    let mut c = MessageCounts::default();
    for e in entries {
        let ty = e.entry_type();
        let counted = ty == "usage" || ty == "compaction" || ty == "branch_summary";
        let role = match e.kind() {
            EntryKind::Message { role, .. } => Some(role.as_str()),
            _ => None,
        };
        if !counted && !matches!(role, Some("assistant" | "toolResult")) {
            if role.is_some() {
                c.total += 1;
                if role == Some("user") {
                    c.users += 1;
                }
            }
            continue;
        }
        let line: StatsLine = serde_json::from_str(&e.line()).unwrap_or_default();
        if counted {
            if let Some(u) = &line.usage {
                c.add_usage(u);
            }
            continue;
        }
        c.total += 1;
        let msg = line.message.unwrap_or_default();
        if role == Some("assistant") {
            c.assistants += 1;
            if let Some(StatsContent::Blocks(blocks)) = &msg.content {
                c.tool_calls += blocks
                    .iter()
                    .filter(|b| b.ty.as_deref() == Some("toolCall"))
                    .count() as u64;
            }
        } else {
            c.tool_results += 1;
        }
        if let Some(u) = &msg.usage {
            c.add_usage(u);
        }
    }
    c.finish()
}

/// `contextUsage` for the given context and window (spec 4.9 / 10.2). `None` when the window is
/// unknown or zero.
pub fn context_usage<M: Borrow<AgentMessage>>(
    entries: &[Entry],
    path: &[usize],
    messages: &[M],
    context_window: Option<u64>,
) -> Option<ContextUsage> {
    let window = context_window.filter(|w| *w > 0)?;
    let compaction = path
        .iter()
        .rposition(|&i| matches!(entries[i].kind(), EntryKind::Compaction { .. }));
    if let Some(cpos) = compaction {
        let usable = path[cpos + 1..]
            .iter()
            .rev()
            .find_map(|&i| match entries[i].message() {
                Some(AgentMessage::Assistant(a)) if !is_failed(a) => Some(usage_tokens(a) > 0),
                _ => None,
            });
        if usable != Some(true) {
            return Some(ContextUsage {
                tokens: None,
                context_window: window,
                percent: None,
            });
        }
    }
    let tokens = estimate_context_tokens(messages);
    Some(ContextUsage {
        tokens: Some(tokens),
        context_window: window,
        percent: Some(tokens as f64 / window as f64 * 100.0),
    })
}

fn is_failed(a: &crate::message::AssistantMessage) -> bool {
    use crate::message::StopReason;
    matches!(a.stop_reason, StopReason::Aborted | StopReason::Error)
}

/// `calculateContextTokens`: `totalTokens`, or the sum of the four counts when it is 0.
pub fn usage_tokens(a: &crate::message::AssistantMessage) -> u64 {
    let u = &a.usage;
    if u.total_tokens > 0 {
        u.total_tokens
    } else {
        u.input + u.output + u.cache_read + u.cache_write
    }
}

/// `estimateContextTokens`: the last successful assistant message's usage plus estimates of
/// every message after it; the sum of estimates when there is none.
pub fn estimate_context_tokens<M: Borrow<AgentMessage>>(messages: &[M]) -> u64 {
    let last = messages.iter().rposition(|m| match m.borrow() {
        AgentMessage::Assistant(a) => !is_failed(a),
        _ => false,
    });
    let estimate = |m: &M| estimate_tokens(m.borrow());
    match last {
        Some(i) => {
            let base = match messages[i].borrow() {
                AgentMessage::Assistant(a) => usage_tokens(a),
                _ => 0,
            };
            base + messages[i + 1..].iter().map(estimate).sum::<u64>()
        }
        None => messages.iter().map(estimate).sum(),
    }
}

pub(crate) fn js_len(s: &str) -> u64 {
    s.encode_utf16().count() as u64
}

fn blocks_chars(blocks: &[Content]) -> u64 {
    blocks
        .iter()
        .map(|b| match b {
            Content::Text(t) => js_len(&t.text),
            Content::Image(_) => 4800,
            _ => 0,
        })
        .sum()
}

/// A system message's size as pi 0.87.1 estimates it: its text, every section's text and the
/// tool declarations as JSON.
fn system_chars(m: &crate::message::SystemMessage) -> u64 {
    let content = match &m.content {
        UserContent::Text(s) => js_len(s),
        UserContent::Blocks(b) => blocks_chars(b),
    };
    let sections: u64 = m
        .sections
        .iter()
        .flat_map(|s| s.values())
        .filter_map(|v| v.as_str())
        .map(js_len)
        .sum();
    let tools = m
        .tools_added
        .as_ref()
        .map_or(0, |t| js_len(&serde_json::to_string(t).unwrap_or_default()));
    content + sections + tools
}

/// `estimateTokens` (spec 10.2): characters / 4, rounded up.
pub fn estimate_tokens(m: &AgentMessage) -> u64 {
    let chars = match m {
        AgentMessage::User(u) => match &u.content {
            UserContent::Text(s) => js_len(s),
            UserContent::Blocks(b) => b
                .iter()
                .map(|c| match c {
                    Content::Text(t) => js_len(&t.text),
                    _ => 0,
                })
                .sum(),
        },
        AgentMessage::Assistant(a) => a
            .content
            .iter()
            .map(|c| match c {
                Content::Text(t) => js_len(&t.text),
                Content::Thinking(t) => js_len(&t.thinking),
                Content::ToolCall(tc) => {
                    js_len(&tc.name)
                        + js_len(&serde_json::to_string(&tc.arguments).unwrap_or_default())
                }
                Content::Image(_) => 0,
            })
            .sum(),
        AgentMessage::ToolResult(r) => blocks_chars(&r.content),
        AgentMessage::Custom(c) => match &c.content {
            UserContent::Text(s) => js_len(s),
            UserContent::Blocks(b) => blocks_chars(b),
        },
        AgentMessage::BashExecution(b) => js_len(&b.command) + js_len(&b.output),
        AgentMessage::BranchSummary(b) => js_len(&b.summary),
        AgentMessage::CompactionSummary(c) => js_len(&c.summary),
        AgentMessage::System(sm) => system_chars(sm),
    };
    chars.div_ceil(4)
}
