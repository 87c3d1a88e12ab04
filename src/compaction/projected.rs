//! Compaction as pi 0.87.1 prepares and words it (`--compat 0.87`), the pure part. The flow,
//! the summary of the conversation text and the file lists are [`crate::compaction`]'s; what
//! changed is here:
//!
//! - the branch is read through its projection ([`crate::session::projection`]): system
//!   messages are prompt state, not conversation, and an attempt a `context_edit` took out is not
//!   summarized;
//! - the cut point skips entries that put nothing in the context, and nothing to summarize
//!   (only a system message before the first kept message) is "Nothing to compact";
//! - the summarizer's system prompt and the turn-prefix instruction are 0.87.1's, the token caps
//!   are bounded by the model's `maxTokens`, and the requests run one after the other (history
//!   first) so a failed one can be retried (`summarization_retry_*`).

use crate::compaction::{
    ALREADY_COMPACTED, FileOps, NO_PRIOR_HISTORY, NOTHING_TO_COMPACT, Preparation, Settings,
    SummaryKind, SummaryRequest,
};
use crate::message::{AgentMessage, ThinkingLevel};
use crate::session::projection::{self, Projected};
use crate::session::{Entry, EntryKind};

/// pi 0.87.1's summarizer system prompt ("an AI assistant", no longer "an AI coding assistant").
pub const SUMMARIZATION_SYSTEM_PROMPT: &str = "You are a context summarization assistant. Your task is to read a conversation between a user and an AI assistant, then produce a structured summary following the exact format specified.

Do NOT continue the conversation. Do NOT respond to any questions in the conversation. ONLY output the structured summary.";

/// pi 0.87.1's instruction for the prefix of a split turn.
pub const TURN_PREFIX_SUMMARIZATION_PROMPT: &str = "The messages above are earlier context from an ongoing conversation. Later messages are stored separately and do not need to be reconstructed.

Create a concise checkpoint of the user's request and the progress shown above. This checkpoint will be placed before the later messages so the conversation can continue with the necessary context.

## Original Request
[What did the user ask for?]

## Progress So Far
- [Key decisions and work completed in these messages]

## Context Needed to Continue
- [Information from these messages needed to understand the later work]

Only summarize information explicitly present above. Do not infer or recreate later messages.";

/// A reply that stopped at the token cap is not a summary (0.87.1 refuses to store it).
pub const TRUNCATED_SUMMARY: &str = "generation hit the token cap and the summary is incomplete";

fn is_cut_point(m: &AgentMessage) -> bool {
    matches!(
        m,
        AgentMessage::User(_)
            | AgentMessage::Assistant(_)
            | AgentMessage::BashExecution(_)
            | AgentMessage::Custom(_)
            | AgentMessage::BranchSummary(_)
            | AgentMessage::CompactionSummary(_)
    )
}

fn is_turn_start(m: &AgentMessage) -> bool {
    matches!(
        m,
        AgentMessage::User(_)
            | AgentMessage::BashExecution(_)
            | AgentMessage::Custom(_)
            | AgentMessage::BranchSummary(_)
            | AgentMessage::CompactionSummary(_)
    )
}

fn is_compaction(p: &Projected<'_>) -> bool {
    matches!(p.entry.kind(), EntryKind::Compaction { .. })
}

fn starts_turn(p: &Projected<'_>) -> bool {
    !is_compaction(p) && p.messages.iter().any(is_turn_start)
}

/// `findProjectedCutPoint`: `(first kept, start of the split turn)` in the projection.
fn find_cut_point(
    entries: &[Projected<'_>],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> (usize, Option<usize>) {
    let cut_points: Vec<usize> = (start..end)
        .filter(|&i| !is_compaction(&entries[i]) && entries[i].messages.iter().any(is_cut_point))
        .collect();
    let (Some(&first), Some(&last)) = (cut_points.first(), cut_points.last()) else {
        return (start, None);
    };
    let mut cut = first;
    let mut exceeded = false;
    let mut accumulated = 0u64;
    for i in (start..end).rev() {
        let tokens: u64 = entries[i]
            .messages
            .iter()
            .map(projection::estimate_tokens)
            .sum();
        if tokens == 0 {
            continue;
        }
        accumulated += tokens;
        if accumulated >= keep_recent_tokens {
            exceeded = true;
            cut = cut_points.iter().copied().find(|&c| c >= i).unwrap_or(last);
            break;
        }
    }
    // An omitted recovery attempt right after the cut (and nothing visible besides) moves the
    // cut past it.
    let visible = |p: &Projected<'_>| {
        p.entry.entry_type() != "context_edit" && p.entry.context_message().is_some()
            || is_compaction(p)
    };
    let omitted = |p: &Projected<'_>| visible(p) && !is_compaction(p) && p.messages.is_empty();
    let suffix = &entries[(cut + 1).min(end)..end];
    let replaced_elsewhere = suffix.iter().any(|p| {
        p.entry.entry_type() == "context_edit"
            && !matches!(
                p.entry.raw().get("replacement"),
                None | Some(serde_json::Value::Null)
            )
    });
    if exceeded
        && !replaced_elsewhere
        && suffix
            .iter()
            .any(|p| p.entry.is_assistant_message() && omitted(p))
        && suffix
            .iter()
            .all(|p| !is_compaction(p) && (!visible(p) || omitted(p)))
    {
        cut += 1;
    }
    while cut > start {
        let prev = &entries[cut - 1];
        if is_compaction(prev) || !prev.messages.is_empty() {
            break;
        }
        cut -= 1;
    }
    if cut >= end {
        return (cut, None);
    }
    let turn_start = if starts_turn(&entries[cut]) {
        None
    } else {
        (start..=cut).rev().find(|&i| starts_turn(&entries[i]))
    };
    (cut, turn_start)
}

fn conversation(entries: &[Projected<'_>]) -> Vec<AgentMessage> {
    entries
        .iter()
        .filter(|p| !is_compaction(p))
        .flat_map(|p| p.messages.iter())
        .filter(|m| !matches!(m, AgentMessage::System(_)))
        .cloned()
        .collect()
}

/// pi 0.87.1's `prepareCompaction` on a branch (root → leaf).
pub fn prepare(path: &[&Entry], settings: &Settings) -> Result<Preparation, String> {
    if path
        .last()
        .is_some_and(|e| matches!(e.kind(), EntryKind::Compaction { .. }))
    {
        return Err(ALREADY_COMPACTED.to_string());
    }
    let projected = projection::project(path);
    let prev = projected
        .iter()
        .position(|p| is_compaction(p) && !p.messages.is_empty());
    let previous_summary = prev.and_then(|i| match projected[i].entry.kind() {
        EntryKind::Compaction { summary, .. } => Some(summary.clone()),
        _ => None,
    });
    let start = prev.map_or(0, |i| i + 1);
    let end = projected.len();
    let tokens_before = projection::estimate_context_tokens(&projected, path);
    let (first_kept, turn_start) =
        find_cut_point(&projected, start, end, settings.keep_recent_tokens);
    let first_kept_entry_id = match projected.get(first_kept) {
        Some(p) if !p.entry.id().is_empty() => p.entry.id().to_string(),
        _ => return Err(NOTHING_TO_COMPACT.to_string()),
    };
    let history_end = turn_start.unwrap_or(first_kept);
    let messages_to_summarize = conversation(&projected[start..history_end]);
    let turn_prefix_messages = match turn_start {
        Some(ts) => conversation(&projected[ts..first_kept]),
        None => Vec::new(),
    };
    if messages_to_summarize.is_empty() && turn_prefix_messages.is_empty() {
        return Err(NOTHING_TO_COMPACT.to_string());
    }
    let mut file_ops = FileOps::default();
    if let Some(i) = prev {
        crate::compaction::add_previous_details(projected[i].entry, &mut file_ops);
    }
    for m in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_message(m);
    }
    Ok(Preparation {
        first_kept_entry_id,
        messages_to_summarize,
        turn_prefix_messages,
        is_split_turn: turn_start.is_some(),
        tokens_before,
        previous_summary,
        file_ops,
    })
}

/// The summary requests, in the order they run: the history (unless a split turn has nothing
/// before it), then the turn prefix. Token caps are bounded by `model_max_tokens` (when known);
/// `profile` says whether they are that limit itself and whether thinking is summarized.
pub fn summary_requests(
    prep: &Preparation,
    custom_instructions: Option<&str>,
    settings: &Settings,
    thinking: Option<ThinkingLevel>,
    model_max_tokens: u64,
    profile: &crate::protocol::Compaction,
) -> Vec<SummaryRequest> {
    let reasoning = thinking.filter(|t| *t != ThinkingLevel::Off);
    let with_thinking = profile.summary_thinking;
    let cap = |share: f64| {
        let tokens = (share * settings.reserve_tokens as f64).floor() as u64;
        if profile.summary_max_tokens == crate::protocol::SummaryMaxTokens::ModelLimit
            && model_max_tokens > 0
        {
            model_max_tokens
        } else if model_max_tokens > 0 {
            tokens.min(model_max_tokens)
        } else {
            tokens
        }
    };
    let mut requests = Vec::with_capacity(2);
    if !prep.has_turn_prefix() || !prep.messages_to_summarize.is_empty() {
        requests.push(SummaryRequest {
            kind: SummaryKind::History,
            system_prompt: SUMMARIZATION_SYSTEM_PROMPT.to_string(),
            user_text: crate::compaction::history_prompt(
                &prep.messages_to_summarize,
                prep.previous_summary.as_deref(),
                custom_instructions,
                with_thinking,
            ),
            max_tokens: cap(0.8),
            reasoning,
        });
    }
    if prep.has_turn_prefix() {
        let mut user_text = format!(
            "# Conversation\n{}\n\n# Instructions\n{TURN_PREFIX_SUMMARIZATION_PROMPT}",
            crate::compaction::serialize_agent_messages(&prep.turn_prefix_messages, with_thinking)
        );
        if let Some(focus) =
            custom_instructions.filter(|s| profile.turn_prefix_focus && !s.is_empty())
        {
            user_text.push_str("\n\nAdditional focus: ");
            user_text.push_str(focus);
        }
        requests.push(SummaryRequest {
            kind: SummaryKind::TurnPrefix,
            system_prompt: SUMMARIZATION_SYSTEM_PROMPT.to_string(),
            user_text,
            max_tokens: cap(0.5),
            reasoning,
        });
    }
    requests
}

/// The stored summary: as 0.73.1's, except that a split turn with nothing before it keeps the
/// previous summary as its history (`No prior history.` only without one).
pub fn final_summary(prep: &Preparation, history: Option<&str>, prefix: Option<&str>) -> String {
    let fallback = prep.previous_summary.as_deref().unwrap_or(NO_PRIOR_HISTORY);
    let history = if prep.has_turn_prefix() {
        Some(history.unwrap_or(fallback))
    } else {
        history
    };
    crate::compaction::final_summary(prep, history, prefix)
}

/// `estimatedTokensAfter`: every message of the new context, estimated.
pub fn estimated_tokens_after<'a>(context: impl IntoIterator<Item = &'a AgentMessage>) -> u64 {
    context.into_iter().map(projection::estimate_tokens).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{
        AssistantMessage, Content, SystemMessage, Usage, UserContent, UserMessage,
    };
    use crate::session::Session;

    fn user(text: &str) -> AgentMessage {
        AgentMessage::User(UserMessage {
            content: UserContent::Blocks(vec![Content::text(text)]),
            timestamp: 1,
        })
    }

    fn reply(text: &str) -> AgentMessage {
        let mut a = AssistantMessage::empty("anthropic-messages", "p", "m");
        a.content.push(Content::text(text));
        a.usage = Usage {
            input: 100,
            output: 2,
            total_tokens: 102,
            ..Default::default()
        };
        AgentMessage::Assistant(a)
    }

    fn system() -> AgentMessage {
        AgentMessage::System(SystemMessage {
            content: UserContent::Text(String::new()),
            sections: Some(serde_json::Map::from_iter([(
                "preamble".to_string(),
                serde_json::json!("You are pith."),
            )])),
            timestamp: 1,
            tools_added: None,
            tools_removed: None,
            checkpoint: false,
        })
    }

    fn session(messages: &[AgentMessage]) -> Session {
        let mut s = Session::new("/w", None, None);
        s.append_model_change("p", "m");
        s.append_thinking_level_change(ThinkingLevel::Off);
        for m in messages {
            s.append_message(m);
        }
        s
    }

    #[test]
    fn a_system_message_alone_before_the_cut_is_nothing_to_compact() {
        let s = session(&[
            system(),
            user("First"),
            reply("One."),
            user("Second"),
            reply("Two."),
        ]);
        let err = prepare(&s.branch_path(), &Settings::default()).unwrap_err();
        assert_eq!(err, NOTHING_TO_COMPACT);
    }

    #[test]
    fn a_small_keep_budget_summarizes_the_first_exchange() {
        let s = session(&[
            system(),
            user("First message"),
            reply("First reply."),
            user("Second message"),
            reply("Second reply."),
        ]);
        let settings = Settings {
            keep_recent_tokens: 5,
            ..Settings::default()
        };
        let prep = prepare(&s.branch_path(), &settings).unwrap();
        assert_eq!(prep.messages_to_summarize.len(), 2);
        assert!(!prep.is_split_turn);
        assert_eq!(prep.tokens_before, 102);
        let first_kept = s.branch_path()[5].id().to_string();
        assert_eq!(prep.first_kept_entry_id, first_kept);
        let p087 = &crate::protocol::v087::PROFILE.compaction;
        let reqs = summary_requests(&prep, Some("Focus"), &settings, None, 16384, p087);
        assert_eq!(reqs.len(), 1);
        assert!(reqs[0].user_text.starts_with(
            "<conversation>\n[User]: First message\n\n[Assistant]: First reply.\n</conversation>"
        ));
        assert!(reqs[0].user_text.ends_with("\n\nAdditional focus: Focus"));
        assert_eq!(reqs[0].max_tokens, 13107);
        // pi 1.6.0: the model's own limit.
        let p16 = &crate::protocol::v16::PROFILE.compaction;
        let reqs = summary_requests(&prep, Some("Focus"), &settings, None, 32000, p16);
        assert_eq!(reqs[0].max_tokens, 32000);
        let reqs = summary_requests(&prep, Some("Focus"), &settings, None, 0, p16);
        assert_eq!(reqs[0].max_tokens, 13107);
    }

    #[test]
    fn an_omitted_attempt_is_not_summarized() {
        let mut failed = AssistantMessage::empty("anthropic-messages", "p", "m");
        failed.stop_reason = crate::message::StopReason::Error;
        failed.error_message = Some("529 overloaded".into());
        let mut s = session(&[system(), user("First message")]);
        s.append_message(&AgentMessage::Assistant(failed));
        let leaf = s.leaf_id().unwrap().to_string();
        s.append_context_edit(&leaf);
        for m in [
            reply("First reply."),
            user("Second message"),
            reply("Second reply."),
        ] {
            s.append_message(&m);
        }
        let settings = Settings {
            keep_recent_tokens: 5,
            ..Settings::default()
        };
        let prep = prepare(&s.branch_path(), &settings).unwrap();
        assert_eq!(prep.messages_to_summarize.len(), 2);
        assert!(
            matches!(&prep.messages_to_summarize[1], AgentMessage::Assistant(a) if a.text() == "First reply.")
        );
    }
}
