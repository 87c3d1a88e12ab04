//! pi 0.87.1's view of a branch (`buildSessionProjection`): each context entry with the messages
//! it puts in the model's context (a compaction its checkpoint and summary, an entry taken out by a
//! `context_edit` none), and what 0.87.1 derives from it: the context token estimate and the
//! `contextUsage` of `get_session_stats`. Pure; used under `--compat 0.87`.

use serde_json::Value;

use crate::message::{AgentMessage, Content, UserContent};

use super::entry::{Entry, EntryKind};
use super::tree::{self, ContextUsage};

/// One context entry and its messages.
pub struct Projected<'a> {
    pub entry: &'a Entry,
    pub messages: Vec<AgentMessage>,
}

/// The projection of a branch (root → leaf): the latest compaction first (checkpoint, summary),
/// the entries it kept (but their system messages), then everything after it.
pub fn project<'a>(path: &[&'a Entry]) -> Vec<Projected<'a>> {
    let cpos = path
        .iter()
        .rposition(|e| matches!(e.kind(), EntryKind::Compaction { .. }));
    let mut chosen: Vec<&Entry> = Vec::with_capacity(path.len());
    match cpos {
        None => chosen.extend_from_slice(path),
        Some(c) => {
            chosen.push(path[c]);
            if let EntryKind::Compaction {
                first_kept_entry_id,
                ..
            } = path[c].kind()
            {
                if let Some(start) = path[..c].iter().position(|e| e.id() == first_kept_entry_id) {
                    chosen.extend(
                        path[start..c]
                            .iter()
                            .filter(|e| !matches!(e.kind(), EntryKind::Message { role, .. } if role == "system")),
                    );
                }
            }
            chosen.extend_from_slice(&path[c + 1..]);
        }
    }
    let omitted: Vec<&str> = chosen
        .iter()
        .filter(|e| e.entry_type() == "context_edit")
        .filter(|e| matches!(e.raw().get("replacement"), None | Some(Value::Null)))
        .filter_map(|e| e.raw().get("targetId").and_then(Value::as_str))
        .collect();
    chosen
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let messages = match e.kind() {
                EntryKind::Compaction { .. } if i > 0 => Vec::new(),
                EntryKind::Compaction { .. } => tree::compaction_messages(e),
                _ if omitted.contains(&e.id()) => Vec::new(),
                _ => e.context_message().into_iter().collect(),
            };
            Projected { entry: e, messages }
        })
        .collect()
}

/// pi 0.87.1's `estimateTokens`: as 0.73.1's, but a user message's images count too.
pub fn estimate_tokens(m: &AgentMessage) -> u64 {
    match m {
        AgentMessage::User(u) => {
            let chars: u64 = match &u.content {
                UserContent::Text(s) => tree::js_len(s),
                UserContent::Blocks(b) => b
                    .iter()
                    .map(|c| match c {
                        Content::Text(t) => tree::js_len(&t.text),
                        Content::Image(_) => 4800,
                        _ => 0,
                    })
                    .sum(),
            };
            chars.div_ceil(4)
        }
        other => tree::estimate_tokens(other),
    }
}

fn usage_total(a: &crate::message::AssistantMessage) -> u64 {
    let u = &a.usage;
    if u.total_tokens > 0 {
        u.total_tokens
    } else {
        u.input + u.output + u.cache_read + u.cache_write
    }
}

fn has_usage(m: &AgentMessage) -> bool {
    matches!(m, AgentMessage::Assistant(a)
        if !matches!(a.stop_reason, crate::message::StopReason::Aborted | crate::message::StopReason::Error)
            && usage_total(a) > 0)
}

/// `estimateProjectedContextTokens`: the last usable reported usage plus estimates of what
/// follows it, unless a `context_edit` or compaction came after that usage; then an estimate of
/// everything, the system messages counted once as their replay.
pub fn estimate_context_tokens(projection: &[Projected<'_>], path: &[&Entry]) -> u64 {
    let messages: Vec<&AgentMessage> = projection.iter().flat_map(|p| &p.messages).collect();
    if let Some(last) = messages.iter().rposition(|m| has_usage(m)) {
        let mut seen = 0;
        let source = projection.iter().find_map(|p| {
            seen += p.messages.len();
            (last < seen).then(|| p.entry.id())
        });
        let usage_at = source.and_then(|id| path.iter().position(|e| e.id() == id));
        let invalidated_at = path
            .iter()
            .rposition(|e| e.entry_type() == "context_edit" || e.entry_type() == "compaction");
        let trusted = match (usage_at, invalidated_at) {
            (Some(u), Some(i)) => u > i,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if trusted {
            let AgentMessage::Assistant(a) = messages[last] else {
                return 0;
            };
            let trailing: u64 = messages[last + 1..]
                .iter()
                .map(|m| estimate_tokens(m))
                .sum();
            return usage_total(a) + trailing;
        }
    }
    let owned: Vec<AgentMessage> = messages.iter().map(|m| (*m).clone()).collect();
    let system = crate::prompt::sections::Declared::of(&owned)
        .checkpoint(0)
        .map_or(0, |s| estimate_tokens(&AgentMessage::System(s)));
    system
        + messages
            .iter()
            .filter(|m| !matches!(m, AgentMessage::System(_)))
            .map(|m| estimate_tokens(m))
            .sum::<u64>()
}

/// `contextUsage`: unknown (`null`) after a compaction until a reply after it reported usage.
pub fn context_usage(
    projection: &[Projected<'_>],
    path: &[&Entry],
    context_window: Option<u64>,
) -> Option<ContextUsage> {
    let window = context_window.filter(|w| *w > 0)?;
    if let Some(c) = path
        .iter()
        .rposition(|e| matches!(e.kind(), EntryKind::Compaction { .. }))
    {
        let reported = projection
            .iter()
            .filter(|p| p.messages.iter().any(has_usage))
            .any(|p| path[c + 1..].iter().any(|e| e.id() == p.entry.id()));
        if !reported {
            return Some(ContextUsage {
                tokens: None,
                context_window: window,
                percent: None,
            });
        }
    }
    let tokens = estimate_context_tokens(projection, path);
    Some(ContextUsage {
        tokens: Some(tokens),
        context_window: window,
        percent: Some(tokens as f64 / window as f64 * 100.0),
    })
}
