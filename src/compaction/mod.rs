//! Context compaction, the pure part (spec 10; pi 0.73.1 `core/compaction`, `ai/utils/overflow`).
//!
//! The state machine owns the flow: it asks [`check`] whether to compact after a run or before a
//! prompt (built on [`should_compact`] and [`is_context_overflow`]), calls [`prepare`] on the
//! session, sends the [`SummaryRequest`]s from [`summary_requests`] to the model, turns each
//! reply into text with [`response_text`], builds the stored summary with [`final_summary`] and
//! [`details`], and appends the `compaction` entry. This module only computes: no I/O, no
//! threads, no clock.
//!
//! The prompt texts below go to the LLM and are protocol facts: they are byte-exact copies of
//! what pi 0.73.1 sends (checked against the oracle's `k_compact` request).

pub mod projected;

use std::cmp::Ordering;
use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::context::to_llm;
use crate::message::{
    AgentMessage, AssistantMessage, BranchSummaryMessage, Content, LlmMessage, StopReason,
    ThinkingLevel, UserContent,
};
use crate::session::{Entry, EntryKind, Session, tree};

// ---------------------------------------------------------------------------------------------
// Prompt texts (byte-exact)
// ---------------------------------------------------------------------------------------------

/// System prompt of every summarization request.
pub const SUMMARIZATION_SYSTEM_PROMPT: &str = "You are a context summarization assistant. Your task is to read a conversation between a user and an AI coding assistant, then produce a structured summary following the exact format specified.

Do NOT continue the conversation. Do NOT respond to any questions in the conversation. ONLY output the structured summary.";

/// Instruction after the conversation on a first compaction.
pub const SUMMARIZATION_PROMPT: &str = "The messages above are a conversation to summarize. Create a structured context checkpoint summary that another LLM will use to continue the work.

Use this EXACT format:

## Goal
[What is the user trying to accomplish? Can be multiple items if the session covers different tasks.]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned by user]
- [Or \"(none)\" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Current work]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [Ordered list of what should happen next]

## Critical Context
- [Any data, examples, or references needed to continue]
- [Or \"(none)\" if not applicable]

Keep each section concise. Preserve exact file paths, function names, and error messages.";

/// Instruction when a previous summary exists (iterative compaction).
pub const UPDATE_SUMMARIZATION_PROMPT: &str = "The messages above are NEW conversation messages to incorporate into the existing summary provided in <previous-summary> tags.

Update the existing structured summary with new information. RULES:
- PRESERVE all existing information from the previous summary
- ADD new progress, decisions, and context from the new messages
- UPDATE the Progress section: move items from \"In Progress\" to \"Done\" when completed
- UPDATE \"Next Steps\" based on what was accomplished
- PRESERVE exact file paths, function names, and error messages
- If something is no longer relevant, you may remove it

Use this EXACT format:

## Goal
[Preserve existing goals, add new ones if the task expanded]

## Constraints & Preferences
- [Preserve existing, add new ones discovered]

## Progress
### Done
- [x] [Include previously done items AND newly completed items]

### In Progress
- [ ] [Current work - update based on progress]

### Blocked
- [Current blockers - remove if resolved]

## Key Decisions
- **[Decision]**: [Brief rationale] (preserve all previous, add new)

## Next Steps
1. [Update based on current state]

## Critical Context
- [Preserve important context, add new if needed]

Keep each section concise. Preserve exact file paths, function names, and error messages.";

/// Instruction of the second request when a turn is split.
pub const TURN_PREFIX_SUMMARIZATION_PROMPT: &str =
    "This is the PREFIX of a turn that was too large to keep. The SUFFIX (recent work) is retained.

Summarize the prefix to provide context for the retained suffix:

## Original Request
[What did the user ask for in this turn?]

## Early Progress
- [Key decisions and work done in the prefix]

## Context for Suffix
- [Information needed to understand the retained recent work]

Be concise. Focus on what's needed to understand the kept suffix.";

/// History text of a split turn when nothing precedes the turn.
pub const NO_PRIOR_HISTORY: &str = "No prior history.";

/// Tool results are cut to this many UTF-16 units in the serialized conversation.
pub const TOOL_RESULT_MAX_CHARS: usize = 2000;

// ---------------------------------------------------------------------------------------------
// Event and error texts (spec 10.6, as 0.73.1 emits them)
// ---------------------------------------------------------------------------------------------

/// Manual compaction when the branch already ends with a compaction.
pub const ALREADY_COMPACTED: &str = "Already compacted";
/// Manual compaction when there is nothing to keep a cut at (empty branch).
pub const NOTHING_TO_COMPACT: &str = "Nothing to compact (session too small)";
/// Error of an aborted compaction (`compaction_end{aborted:true}` carries no message).
pub const COMPACTION_CANCELLED: &str = "Compaction cancelled";
/// `compaction_end.errorMessage` prefix of a failed manual compaction.
pub const COMPACTION_FAILED_PREFIX: &str = "Compaction failed: ";
/// `compaction_end.errorMessage` prefix of a failed threshold compaction.
pub const AUTO_COMPACTION_FAILED_PREFIX: &str = "Auto-compaction failed: ";
/// `compaction_end.errorMessage` prefix of a failed overflow compaction.
pub const OVERFLOW_RECOVERY_FAILED_PREFIX: &str = "Context overflow recovery failed: ";
/// `compaction_end.errorMessage` when an overflow repeats after one compact-and-retry.
pub const OVERFLOW_RETRY_EXHAUSTED: &str = "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model.";
/// pi 0.87.1's text when a truncated reply (a recoverable `length` stop) comes back again.
pub const LENGTH_RETRY_EXHAUSTED: &str =
    "Truncated response recovery failed after one compact-and-retry attempt.";
/// Error prefix when the history summary request fails.
pub const SUMMARIZATION_FAILED_PREFIX: &str = "Summarization failed: ";
/// Error prefix when the turn-prefix summary request fails.
pub const TURN_PREFIX_SUMMARIZATION_FAILED_PREFIX: &str = "Turn prefix summarization failed: ";
/// Stand-in for an error response without `errorMessage`.
pub const UNKNOWN_ERROR: &str = "Unknown error";
/// Delay before `continue()` after an overflow compaction (or with queued messages).
pub const CONTINUE_DELAY_MS: u64 = 100;

// ---------------------------------------------------------------------------------------------
// Settings and triggers
// ---------------------------------------------------------------------------------------------

/// `compaction` settings (`enabled`, `reserveTokens`, `keepRecentTokens`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub enabled: bool,
    pub reserve_tokens: u64,
    pub keep_recent_tokens: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            enabled: true,
            reserve_tokens: 16384,
            keep_recent_tokens: 20000,
        }
    }
}

/// `shouldCompact`: enabled and `contextTokens > contextWindow - reserveTokens` (signed, so a
/// window smaller than the reserve always triggers).
pub fn should_compact(context_tokens: u64, context_window: u64, settings: &Settings) -> bool {
    settings.enabled
        && i128::from(context_tokens)
            > i128::from(context_window) - i128::from(settings.reserve_tokens)
}

/// What `_checkCompaction` decides for an assistant message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Context overflow: drop the trailing assistant message from the agent context, mark the
    /// recovery as attempted, compact with reason `overflow` and `willRetry: true`.
    Overflow,
    /// Overflow again after one recovery: emit only `compaction_end{reason:"overflow",
    /// aborted:false, willRetry:false, errorMessage}` with this text
    /// ([`OVERFLOW_RETRY_EXHAUSTED`], or [`LENGTH_RETRY_EXHAUSTED`] for a truncated reply).
    OverflowRetryExhausted(&'static str),
    /// pi 0.87.1: a complete reply (`stop`) whose usage overflowed the context window: compact
    /// with reason `overflow` but keep the reply and do not retry.
    OverflowNoRetry,
    /// Over the threshold: compact with reason `threshold`, `willRetry: false`.
    Threshold,
}

/// The state `_checkCompaction` looks at besides the assistant message.
#[derive(Clone, Copy, Debug)]
pub struct CheckInput<'a, M = AgentMessage> {
    pub settings: &'a Settings,
    /// The current model as `(provider, id, contextWindow)`; `None` when no model is set.
    pub model: Option<(&'a str, &'a str, u64)>,
    /// Timestamp (Unix ms) of the latest compaction entry on the branch
    /// ([`latest_compaction_ms`]).
    pub latest_compaction_ms: Option<u64>,
    /// An overflow recovery already ran since the last user message / successful reply.
    pub overflow_recovery_attempted: bool,
    /// `false` after a run (aborted replies are skipped), `true` before a prompt.
    pub include_aborted: bool,
    /// The agent's current context messages.
    pub context: &'a [M],
    /// A `length` stop below the model's own output limit (`max_tokens`) is recovered like an
    /// overflow, and an overflowing complete reply is kept (no retry): pi 0.87.1's rules.
    pub recover_length_stops: bool,
    /// The current model's `maxTokens` (0 when unknown).
    pub max_tokens: u64,
}

/// `_checkCompaction` (spec 10.1 / 10.5) as a pure decision.
pub fn check<M: std::borrow::Borrow<AgentMessage>>(
    assistant: &AssistantMessage,
    input: &CheckInput<M>,
) -> Option<Trigger> {
    if !input.settings.enabled {
        return None;
    }
    if !input.include_aborted && assistant.stop_reason == StopReason::Aborted {
        return None;
    }
    let context_window = input.model.map_or(0, |(_, _, w)| w);
    let same_model = input
        .model
        .is_some_and(|(provider, id, _)| assistant.provider == provider && assistant.model == id);
    let before_compaction = |ts: u64| input.latest_compaction_ms.is_some_and(|c| ts <= c);
    if before_compaction(assistant.timestamp) {
        return None;
    }
    let overflow = same_model && is_context_overflow(assistant, context_window);
    // pi 0.87.1: a reply cut below the model's own output limit may be context pressure.
    let recoverable_length = input.recover_length_stops
        && same_model
        && assistant.stop_reason == StopReason::Length
        && input.max_tokens > 0
        && assistant.usage.output < input.max_tokens;
    if overflow || recoverable_length {
        if input.recover_length_stops && assistant.stop_reason == StopReason::Stop {
            return Some(Trigger::OverflowNoRetry);
        }
        return Some(if input.overflow_recovery_attempted {
            Trigger::OverflowRetryExhausted(if overflow {
                OVERFLOW_RETRY_EXHAUSTED
            } else {
                LENGTH_RETRY_EXHAUSTED
            })
        } else {
            Trigger::Overflow
        });
    }
    let context_tokens = if assistant.stop_reason == StopReason::Error {
        let last_usage = input.context.iter().rposition(|m| {
            matches!(m.borrow(), AgentMessage::Assistant(a)
                if !matches!(a.stop_reason, StopReason::Aborted | StopReason::Error))
        })?;
        if let AgentMessage::Assistant(a) = input.context[last_usage].borrow() {
            if before_compaction(a.timestamp) {
                return None;
            }
        }
        tree::estimate_context_tokens(input.context)
    } else {
        tree::usage_tokens(assistant)
    };
    should_compact(context_tokens, context_window, input.settings).then_some(Trigger::Threshold)
}

/// Timestamp (Unix ms) of the latest compaction entry on the session's branch.
pub fn latest_compaction_ms(session: &Session) -> Option<u64> {
    session
        .branch_path()
        .iter()
        .rev()
        .find(|e| is_compaction(e))
        .map(|e| e.timestamp_ms())
}

// ---------------------------------------------------------------------------------------------
// Preparation (cut point, messages to summarize, file operations)
// ---------------------------------------------------------------------------------------------

/// Files touched by `read` / `write` / `edit` tool calls.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileOps {
    pub read: BTreeSet<String>,
    pub written: BTreeSet<String>,
    pub edited: BTreeSet<String>,
}

impl FileOps {
    /// Record the `path` argument of every read/write/edit call of an assistant message.
    pub(crate) fn add_message(&mut self, message: &AgentMessage) {
        let AgentMessage::Assistant(a) = message else {
            return;
        };
        for call in a.tool_calls() {
            let Some(path) = call.arguments.get("path").and_then(Value::as_str) else {
                continue;
            };
            if path.is_empty() {
                continue;
            }
            let set = match call.name.as_str() {
                "read" => &mut self.read,
                "write" => &mut self.written,
                "edit" => &mut self.edited,
                _ => continue,
            };
            set.insert(path.to_string());
        }
    }

    /// `(readFiles, modifiedFiles)`: files only read, and files written or edited; each sorted
    /// as JavaScript sorts strings (by UTF-16 code units).
    pub fn lists(&self) -> (Vec<String>, Vec<String>) {
        let modified: BTreeSet<&String> = self.edited.iter().chain(&self.written).collect();
        let mut read: Vec<String> = self
            .read
            .iter()
            .filter(|f| !modified.contains(f))
            .cloned()
            .collect();
        let mut modified: Vec<String> = modified.into_iter().cloned().collect();
        crate::sort::sort_by(&mut read, |a, b| js_cmp(a, b));
        crate::sort::sort_by(&mut modified, |a, b| js_cmp(a, b));
        (read, modified)
    }
}

fn js_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Everything needed to summarize and record one compaction (`CompactionPreparation`).
#[derive(Clone, Debug, PartialEq)]
pub struct Preparation {
    pub first_kept_entry_id: String,
    /// Messages before the cut (before the turn start when the turn is split).
    pub messages_to_summarize: Vec<AgentMessage>,
    /// Turn start → cut, when the cut splits a turn.
    pub turn_prefix_messages: Vec<AgentMessage>,
    pub is_split_turn: bool,
    pub tokens_before: u64,
    /// Summary of the previous compaction on the branch.
    pub previous_summary: Option<String>,
    pub file_ops: FileOps,
}

impl Preparation {
    /// Whether a separate turn-prefix summary is requested and merged in.
    pub fn has_turn_prefix(&self) -> bool {
        self.is_split_turn && !self.turn_prefix_messages.is_empty()
    }
}

/// `prepareCompaction` on the session's current branch. Errors carry the reference's manual
/// compaction texts ([`ALREADY_COMPACTED`], [`NOTHING_TO_COMPACT`]); auto-compaction treats
/// either as "nothing to do".
pub fn prepare(session: &Session, settings: &Settings) -> Result<Preparation, String> {
    prepare_path(&session.branch_path(), &session.build_context(), settings)
}

/// [`prepare`] on an explicit branch (root → leaf) and its context messages.
pub fn prepare_path(
    path: &[&Entry],
    context: &[AgentMessage],
    settings: &Settings,
) -> Result<Preparation, String> {
    if path.last().is_some_and(|e| is_compaction(e)) {
        return Err(ALREADY_COMPACTED.to_string());
    }
    let prev_compaction = path.iter().rposition(|e| is_compaction(e));
    let mut previous_summary = None;
    let mut start = 0;
    if let Some(pc) = prev_compaction {
        if let EntryKind::Compaction {
            summary,
            first_kept_entry_id,
            ..
        } = path[pc].kind()
        {
            previous_summary = Some(summary.clone());
            start = path
                .iter()
                .position(|e| e.id() == first_kept_entry_id)
                .unwrap_or(pc + 1);
        }
    }
    let tokens_before = tree::estimate_context_tokens(context);
    let cut = find_cut_point(path, start, settings.keep_recent_tokens);
    let first_kept_entry_id = match path.get(cut.first_kept) {
        Some(e) if !e.id().is_empty() => e.id().to_string(),
        _ => return Err(NOTHING_TO_COMPACT.to_string()),
    };
    let history_end = cut.turn_start.unwrap_or(cut.first_kept);
    let messages_to_summarize: Vec<AgentMessage> = path[start..history_end]
        .iter()
        .filter_map(|e| compaction_message(e))
        .collect();
    let turn_prefix_messages: Vec<AgentMessage> = match cut.turn_start {
        Some(ts) => path[ts..cut.first_kept]
            .iter()
            .filter_map(|e| compaction_message(e))
            .collect(),
        None => Vec::new(),
    };
    let mut file_ops = FileOps::default();
    if let Some(pc) = prev_compaction {
        add_previous_details(path[pc], &mut file_ops);
    }
    for m in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_message(m);
    }
    Ok(Preparation {
        first_kept_entry_id,
        messages_to_summarize,
        turn_prefix_messages,
        is_split_turn: cut.turn_start.is_some(),
        tokens_before,
        previous_summary,
        file_ops,
    })
}

fn is_compaction(e: &Entry) -> bool {
    matches!(e.kind(), EntryKind::Compaction { .. })
}

/// The message an entry contributes to a summary (`getMessageFromEntryForCompaction`):
/// compactions contribute nothing, branch summaries contribute even when empty.
fn compaction_message(e: &Entry) -> Option<AgentMessage> {
    match e.kind() {
        EntryKind::Compaction { .. } => None,
        EntryKind::BranchSummary { from_id, summary } => {
            Some(AgentMessage::BranchSummary(BranchSummaryMessage {
                summary: summary.clone(),
                from_id: from_id.clone(),
                timestamp: e.timestamp_ms(),
            }))
        }
        _ => e.context_message(),
    }
}

/// File lists recorded by a previous pi-generated compaction (not one supplied by a hook).
pub(crate) fn add_previous_details(entry: &Entry, ops: &mut FileOps) {
    let raw = entry.raw();
    if raw.get("fromHook").is_some_and(js_truthy) {
        return;
    }
    let Some(details) = raw.get("details").filter(|d| js_truthy(d)) else {
        return;
    };
    let strings = |key: &str| -> Vec<String> {
        details
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    ops.read.extend(strings("readFiles"));
    ops.edited.extend(strings("modifiedFiles"));
}

fn js_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// Result of `findCutPoint`: indices into the branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CutPoint {
    first_kept: usize,
    /// Start of the turn the cut splits (`None`: the cut is at a turn boundary).
    turn_start: Option<usize>,
}

fn message_role(e: &Entry) -> Option<&str> {
    match e.kind() {
        EntryKind::Message { role, .. } => Some(role.as_str()),
        _ => None,
    }
}

/// Where a cut may fall: any message but a tool result, and the user-like
/// `branch_summary` / `custom_message` entries.
fn is_valid_cut_point(e: &Entry) -> bool {
    match e.kind() {
        EntryKind::Message { role, .. } => matches!(
            role.as_str(),
            "user"
                | "assistant"
                | "bashExecution"
                | "custom"
                | "branchSummary"
                | "compactionSummary"
        ),
        EntryKind::BranchSummary { .. } | EntryKind::CustomMessage(_) => true,
        _ => false,
    }
}

/// `findCutPoint`: keep roughly `keep_recent_tokens` of the newest messages in
/// `path[start..]`.
fn find_cut_point(path: &[&Entry], start: usize, keep_recent_tokens: u64) -> CutPoint {
    let cut_points: Vec<usize> = (start..path.len())
        .filter(|&i| is_valid_cut_point(path[i]))
        .collect();
    let Some(&first_cut) = cut_points.first() else {
        return CutPoint {
            first_kept: start,
            turn_start: None,
        };
    };
    let mut cut = first_cut;
    let mut accumulated = 0u64;
    for i in (start..path.len()).rev() {
        if message_role(path[i]).is_none() {
            continue;
        }
        accumulated += path[i].message().map_or(0, tree::estimate_tokens);
        if accumulated >= keep_recent_tokens {
            if let Some(&c) = cut_points.iter().find(|&&c| c >= i) {
                cut = c;
            }
            break;
        }
    }
    // Keep the settings/label/... entries right before the cut with it.
    while cut > start {
        let prev = path[cut - 1];
        if is_compaction(prev) || message_role(prev).is_some() {
            break;
        }
        cut -= 1;
    }
    let is_user = message_role(path[cut]) == Some("user");
    let turn_start = if is_user {
        None
    } else {
        find_turn_start(path, cut, start)
    };
    CutPoint {
        first_kept: cut,
        turn_start,
    }
}

/// `findTurnStartIndex`: the nearest user/bashExecution message or branch_summary /
/// custom_message entry at or before `index`.
fn find_turn_start(path: &[&Entry], index: usize, start: usize) -> Option<usize> {
    (start..=index).rev().find(|&i| match path[i].kind() {
        EntryKind::BranchSummary { .. } | EntryKind::CustomMessage(_) => true,
        EntryKind::Message { role, .. } => role == "user" || role == "bashExecution",
        _ => false,
    })
}

// ---------------------------------------------------------------------------------------------
// Summarization requests
// ---------------------------------------------------------------------------------------------

/// Which summary a request produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummaryKind {
    /// The history before the cut (or before the split turn).
    History,
    /// The prefix of a split turn.
    TurnPrefix,
}

/// One `completeSimple` call: no tools, one user message with `user_text`.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRequest {
    pub kind: SummaryKind,
    pub system_prompt: String,
    pub user_text: String,
    pub max_tokens: u64,
    /// Reasoning level to request (`None`: no reasoning options).
    pub reasoning: Option<ThinkingLevel>,
}

/// The summarization requests of a compaction, to run in parallel: one history request, or for
/// a split turn a history request (omitted when nothing precedes the turn) and a turn-prefix
/// request. `thinking` is the session's thinking level when the model is a reasoning model
/// (`None` otherwise); 0.73.1 passes it to both requests unless it is `off`.
pub fn summary_requests(
    prep: &Preparation,
    custom_instructions: Option<&str>,
    settings: &Settings,
    thinking: Option<ThinkingLevel>,
) -> Vec<SummaryRequest> {
    let reasoning = thinking.filter(|t| *t != ThinkingLevel::Off);
    let history = || SummaryRequest {
        kind: SummaryKind::History,
        system_prompt: SUMMARIZATION_SYSTEM_PROMPT.to_string(),
        user_text: history_prompt(
            &prep.messages_to_summarize,
            prep.previous_summary.as_deref(),
            custom_instructions,
            true,
        ),
        max_tokens: (0.8 * settings.reserve_tokens as f64).floor() as u64,
        reasoning,
    };
    if !prep.has_turn_prefix() {
        return vec![history()];
    }
    let mut requests = Vec::with_capacity(2);
    if !prep.messages_to_summarize.is_empty() {
        requests.push(history());
    }
    requests.push(SummaryRequest {
        kind: SummaryKind::TurnPrefix,
        system_prompt: SUMMARIZATION_SYSTEM_PROMPT.to_string(),
        user_text: format!(
            "<conversation>\n{}\n</conversation>\n\n{TURN_PREFIX_SUMMARIZATION_PROMPT}",
            serialize_agent_messages(&prep.turn_prefix_messages, true)
        ),
        max_tokens: (0.5 * settings.reserve_tokens as f64).floor() as u64,
        reasoning,
    });
    requests
}

/// The user text of a history request (`generateSummary`). Empty previous summary and empty
/// instructions count as absent, as in JavaScript.
pub(crate) fn history_prompt(
    messages: &[AgentMessage],
    previous_summary: Option<&str>,
    custom_instructions: Option<&str>,
    thinking: bool,
) -> String {
    let previous = previous_summary.filter(|s| !s.is_empty());
    let mut text = format!(
        "<conversation>\n{}\n</conversation>\n\n",
        serialize_agent_messages(messages, thinking)
    );
    if let Some(prev) = previous {
        text.push_str(&format!(
            "<previous-summary>\n{prev}\n</previous-summary>\n\n"
        ));
    }
    text.push_str(if previous.is_some() {
        UPDATE_SUMMARIZATION_PROMPT
    } else {
        SUMMARIZATION_PROMPT
    });
    if let Some(focus) = custom_instructions.filter(|s| !s.is_empty()) {
        text.push_str("\n\nAdditional focus: ");
        text.push_str(focus);
    }
    text
}

/// [`serialize_conversation`] of the agent messages; `thinking`: with `[Assistant thinking]:`.
pub(crate) fn serialize_agent_messages(messages: &[AgentMessage], thinking: bool) -> String {
    serialize_conversation_with(&to_llm(messages, false), thinking)
}

/// `serializeConversation`: the LLM messages as labelled text blocks joined by a blank line, so
/// the summarizer does not continue the conversation.
pub fn serialize_conversation(messages: &[LlmMessage]) -> String {
    serialize_conversation_with(messages, true)
}

/// [`serialize_conversation`], the assistant's thinking left out unless `thinking` (pi 1.6.0
/// leaves it out).
pub fn serialize_conversation_with(messages: &[LlmMessage], thinking: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    for m in messages {
        match m {
            LlmMessage::User(u) => {
                let text = u.content.joined_text();
                if !text.is_empty() {
                    parts.push(format!("[User]: {text}"));
                }
            }
            LlmMessage::Assistant(a) => serialize_assistant(a, thinking, &mut parts),
            LlmMessage::System(_) => {}
            LlmMessage::ToolResult(r) => {
                let text = UserContent::Blocks(r.content.clone()).joined_text();
                if !text.is_empty() {
                    parts.push(format!(
                        "[Tool result]: {}",
                        truncate_for_summary(&text, TOOL_RESULT_MAX_CHARS)
                    ));
                }
            }
        }
    }
    parts.join("\n\n")
}

fn serialize_assistant(a: &AssistantMessage, with_thinking: bool, parts: &mut Vec<String>) {
    let mut texts = Vec::new();
    let mut thinking = Vec::new();
    let mut calls = Vec::new();
    for block in &a.content {
        match block {
            Content::Text(t) => texts.push(t.text.as_str()),
            Content::Thinking(t) => thinking.push(t.thinking.as_str()),
            Content::ToolCall(tc) => {
                let args: Vec<String> = match &tc.arguments {
                    Value::Object(map) => map
                        .iter()
                        .map(|(k, v)| {
                            format!("{k}={}", serde_json::to_string(v).unwrap_or_default())
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                calls.push(format!("{}({})", tc.name, args.join(", ")));
            }
            Content::Image(_) => {}
        }
    }
    if with_thinking && !thinking.is_empty() {
        parts.push(format!("[Assistant thinking]: {}", thinking.join("\n")));
    }
    if !texts.is_empty() {
        parts.push(format!("[Assistant]: {}", texts.join("\n")));
    }
    if !calls.is_empty() {
        parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
    }
}

/// `truncateForSummary`, counting UTF-16 units like JavaScript. A surrogate pair straddling the
/// limit is dropped whole (JavaScript would keep a lone high surrogate).
fn truncate_for_summary(text: &str, max_chars: usize) -> String {
    let total = text.encode_utf16().count();
    if total <= max_chars {
        return text.to_string();
    }
    let mut units = 0;
    let mut end = 0;
    for (i, c) in text.char_indices() {
        if units + c.len_utf16() > max_chars {
            break;
        }
        units += c.len_utf16();
        end = i + c.len_utf8();
    }
    format!(
        "{}\n\n[... {} more characters truncated]",
        &text[..end],
        total - max_chars
    )
}

/// The text of a summarizer reply (text blocks joined by `\n`), or the reference's error when
/// the reply has `stopReason: "error"`.
pub fn response_text(kind: SummaryKind, reply: &AssistantMessage) -> Result<String, String> {
    if reply.stop_reason == StopReason::Error {
        let prefix = match kind {
            SummaryKind::History => SUMMARIZATION_FAILED_PREFIX,
            SummaryKind::TurnPrefix => TURN_PREFIX_SUMMARIZATION_FAILED_PREFIX,
        };
        let msg = reply
            .error_message
            .as_deref()
            .filter(|m| !m.is_empty())
            .unwrap_or(UNKNOWN_ERROR);
        return Err(format!("{prefix}{msg}"));
    }
    let texts: Vec<&str> = reply
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    Ok(texts.join("\n"))
}

/// The summary stored in the compaction entry: the history text (merged with the turn-prefix
/// text for a split turn; `history: None` there means [`NO_PRIOR_HISTORY`]) followed by the
/// `<read-files>` / `<modified-files>` lists.
pub fn final_summary(prep: &Preparation, history: Option<&str>, prefix: Option<&str>) -> String {
    let mut summary = if prep.has_turn_prefix() {
        format!(
            "{}\n\n---\n\n**Turn Context (split turn):**\n\n{}",
            history.unwrap_or(NO_PRIOR_HISTORY),
            prefix.unwrap_or("")
        )
    } else {
        history.unwrap_or("").to_string()
    };
    let (read, modified) = prep.file_ops.lists();
    let mut sections = Vec::new();
    if !read.is_empty() {
        sections.push(format!("<read-files>\n{}\n</read-files>", read.join("\n")));
    }
    if !modified.is_empty() {
        sections.push(format!(
            "<modified-files>\n{}\n</modified-files>",
            modified.join("\n")
        ));
    }
    if !sections.is_empty() {
        summary.push_str("\n\n");
        summary.push_str(&sections.join("\n\n"));
    }
    summary
}

/// The compaction's `details`: `{"readFiles":[…],"modifiedFiles":[…]}`.
pub fn details(prep: &Preparation) -> Value {
    let (read, modified) = prep.file_ops.lists();
    json!({ "readFiles": read, "modifiedFiles": modified })
}

// ---------------------------------------------------------------------------------------------
// Overflow detection
// ---------------------------------------------------------------------------------------------

/// `isContextOverflow`: an error whose message names a context overflow (and not a rate
/// limit), a successful reply whose input exceeds the window (silent overflow), or a `length`
/// stop with no output and a full window. `context_window` 0 disables the usage checks.
pub fn is_context_overflow(message: &AssistantMessage, context_window: u64) -> bool {
    if message.stop_reason == StopReason::Error {
        if let Some(err) = message.error_message.as_deref().filter(|e| !e.is_empty()) {
            if overflow::is_overflow_error(err) {
                return true;
            }
        }
    }
    if context_window == 0 {
        return false;
    }
    let input = message.usage.input + message.usage.cache_read;
    match message.stop_reason {
        StopReason::Stop => input > context_window,
        StopReason::Length => {
            message.usage.output == 0 && input as f64 >= context_window as f64 * 0.99
        }
        _ => false,
    }
}

/// The 0.73.1 error-message patterns (pi-ai's `utils/overflow.js`) in the `regex` crate's syntax,
/// with JavaScript's meaning kept: the message is ASCII-lowercased instead of `/i` (the patterns
/// are ASCII, and JavaScript's `/i` never folds a non-ASCII character to ASCII), `.` excludes
/// JavaScript's line terminators, `\d` is ASCII, `\s` is JavaScript's white space.
mod overflow {
    use crate::retry::js_regex;

    const OVERFLOW: &[&str] = &[
        "prompt is too long",
        "request_too_large",
        "input is too long for requested model",
        "exceeds the context window",
        "input token count{DOT}*exceeds the maximum",
        "maximum prompt length is [0-9]+",
        "reduce the length of the messages",
        "maximum context length is [0-9]+ tokens",
        "exceeds the limit of [0-9]+",
        "exceeds the available context size",
        "greater than the context length",
        "context window exceeds limit",
        "exceeded model token limit",
        "too large for model with [0-9]+ maximum context length",
        "model_context_window_exceeded",
        "prompt too long; exceeded (?:max )?context length",
        "context[_ ]length[_ ]exceeded",
        "too many tokens",
        "token limit exceeded",
        "^4(?:00|13){SPACE}*(?:status code)?{SPACE}*\\(no body\\)",
    ];

    const NON_OVERFLOW: &[&str] = &[
        "^(?:throttling error|service unavailable):",
        "rate limit",
        "too many requests",
    ];

    pub(super) fn is_overflow_error(message: &str) -> bool {
        let h = message.to_ascii_lowercase();
        !js_regex(NON_OVERFLOW).is_match(&h) && js_regex(OVERFLOW).is_match(&h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ToolCall, ToolResultMessage, Usage, UserMessage};

    fn user(text: &str) -> AgentMessage {
        AgentMessage::User(UserMessage {
            content: UserContent::Blocks(vec![Content::text(text)]),
            timestamp: 1,
        })
    }

    fn assistant(content: Vec<Content>, total_tokens: u64) -> AgentMessage {
        let mut a = AssistantMessage::empty("anthropic-messages", "fake", "fake-model");
        a.content = content;
        a.usage.total_tokens = total_tokens;
        a.timestamp = 2;
        AgentMessage::Assistant(a)
    }

    fn reply(text: &str) -> AgentMessage {
        assistant(vec![Content::text(text)], 0)
    }

    fn call(name: &str, args: Value) -> Content {
        Content::ToolCall(ToolCall {
            id: format!("call_{name}"),
            name: name.into(),
            arguments: args,
            thought_signature: None,
            arguments_error: None,
        })
    }

    fn tool_result(text: &str) -> AgentMessage {
        AgentMessage::ToolResult(ToolResultMessage {
            tool_call_id: "call".into(),
            tool_name: "read".into(),
            content: vec![Content::text(text)],
            details: None,
            is_error: false,
            duration_ms: None,
            timestamp: 3,
            nested_calls: None,
        })
    }

    fn session() -> Session {
        Session::new("/tmp/cwd", None, None)
    }

    /// 40 characters: 10 estimated tokens.
    fn forty(c: char) -> String {
        std::iter::repeat_n(c, 40).collect()
    }

    fn settings(keep: u64) -> Settings {
        Settings {
            keep_recent_tokens: keep,
            ..Settings::default()
        }
    }

    #[test]
    fn k_compact_request_is_byte_exact() {
        let fixture: Value = serde_json::from_str(include_str!(
            "../../fixtures/compaction/k_compact_summary_request.json"
        ))
        .unwrap();
        let body = &fixture["body"];
        let mut s = session();
        let first = s.append_model_change("fake", "fake-model");
        s.append_thinking_level_change(ThinkingLevel::Medium);
        s.append_message(&user("First message"));
        s.append_message(&assistant(vec![Content::text("First reply.")], 102));
        s.append_message(&user("Second message"));
        s.append_message(&assistant(vec![Content::text("Second reply.")], 102));

        let prep = prepare(&s, &Settings::default()).unwrap();
        assert_eq!(prep.first_kept_entry_id, first);
        assert_eq!(prep.tokens_before, 102);
        assert!(prep.messages_to_summarize.is_empty());
        assert!(!prep.is_split_turn);
        assert_eq!(prep.previous_summary, None);

        let reqs = summary_requests(
            &prep,
            Some("Focus on testing"),
            &Settings::default(),
            Some(ThinkingLevel::Medium),
        );
        assert_eq!(reqs.len(), 1);
        let r = &reqs[0];
        assert_eq!(r.kind, SummaryKind::History);
        assert_eq!(
            r.user_text,
            body["messages"][0]["content"][0]["text"].as_str().unwrap()
        );
        assert_eq!(r.system_prompt, body["system"][0]["text"].as_str().unwrap());
        assert_eq!(r.max_tokens, 13107);
        assert_eq!(r.reasoning, Some(ThinkingLevel::Medium));

        let text = "## Goal\nFake summary of the conversation.";
        assert_eq!(final_summary(&prep, Some(text), None), text);
        assert_eq!(
            details(&prep).to_string(),
            r#"{"readFiles":[],"modifiedFiles":[]}"#
        );
    }

    #[test]
    fn reasoning_off_or_non_reasoning_model_sends_none() {
        let mut s = session();
        s.append_message(&user("hi"));
        let prep = prepare(&s, &Settings::default()).unwrap();
        let set = Settings::default();
        assert_eq!(summary_requests(&prep, None, &set, None)[0].reasoning, None);
        let off = Some(ThinkingLevel::Off);
        assert_eq!(summary_requests(&prep, None, &set, off)[0].reasoning, None);
        // Empty instructions add nothing.
        let a = summary_requests(&prep, Some(""), &set, None);
        let b = summary_requests(&prep, None, &set, None);
        assert_eq!(a[0].user_text, b[0].user_text);
        assert!(b[0].user_text.ends_with("error messages."));
    }

    #[test]
    fn empty_session_and_already_compacted() {
        let s = session();
        assert_eq!(
            prepare(&s, &Settings::default()).unwrap_err(),
            NOTHING_TO_COMPACT
        );
        let mut s = session();
        let u = s.append_message(&user("hi"));
        s.append_compaction("S", &u, 5, None, Some(false));
        assert_eq!(
            prepare(&s, &Settings::default()).unwrap_err(),
            ALREADY_COMPACTED
        );
    }

    #[test]
    fn long_conversation_cuts_at_keep_recent_tokens() {
        let mut s = session();
        s.append_model_change("fake", "fake-model");
        s.append_message(&user(&forty('a')));
        s.append_message(&reply(&forty('b')));
        let kept = s.append_message(&user(&forty('c')));
        s.append_message(&reply(&forty('d')));

        let prep = prepare(&s, &settings(15)).unwrap();
        assert_eq!(prep.first_kept_entry_id, kept);
        assert!(!prep.is_split_turn);
        assert!(prep.turn_prefix_messages.is_empty());
        // The last successful assistant's usage (0 here) plus estimates of what follows it.
        assert_eq!(prep.tokens_before, 0);
        let reqs = summary_requests(&prep, None, &settings(15), None);
        assert_eq!(reqs.len(), 1);
        assert_eq!(
            reqs[0].user_text,
            format!(
                "<conversation>\n[User]: {}\n\n[Assistant]: {}\n</conversation>\n\n{SUMMARIZATION_PROMPT}",
                forty('a'),
                forty('b')
            )
        );

        // Exactly reaching the budget on the last message keeps only from there, but the
        // cut at an assistant message then splits its turn.
        let prep = prepare(&s, &settings(10)).unwrap();
        assert!(prep.is_split_turn);
        assert_eq!(prep.turn_prefix_messages, vec![user(&forty('c'))]);
        assert_eq!(prep.messages_to_summarize.len(), 2);
    }

    #[test]
    fn cut_keeps_preceding_settings_entries() {
        let mut s = session();
        s.append_message(&user(&forty('a')));
        s.append_message(&reply(&forty('b')));
        let change = s.append_thinking_level_change(ThinkingLevel::High);
        s.append_session_info("name");
        s.append_message(&user(&forty('c')));
        s.append_message(&reply(&forty('d')));
        s.append_message(&user("tail"));
        let prep = prepare(&s, &settings(15)).unwrap();
        assert_eq!(prep.first_kept_entry_id, change);
        // Quirk of 0.73.1: the cut entry is now the settings entry, not a user message, so
        // the previous turn counts as split and becomes the turn prefix.
        assert!(prep.is_split_turn);
        assert!(prep.messages_to_summarize.is_empty());
        assert_eq!(
            prep.turn_prefix_messages,
            vec![user(&forty('a')), reply(&forty('b'))]
        );
        // Estimate of the one message after the last assistant (usage 0): ceil(4 / 4).
        assert_eq!(prep.tokens_before, 1);
    }

    #[test]
    fn split_turn_with_file_ops() {
        let big: String = std::iter::repeat_n('x', 400).collect();
        let mut s = session();
        s.append_message(&user("do it"));
        s.append_message(&assistant(
            vec![call("read", json!({"path": "src/a.rs", "offset": 1}))],
            0,
        ));
        s.append_message(&tool_result(&big));
        s.append_message(&assistant(
            vec![call("edit", json!({"path": "src/b.rs", "oldText": "x"}))],
            0,
        ));
        s.append_message(&tool_result(&big));
        let kept = s.append_message(&reply(&forty('d')));

        let set = settings(50);
        let prep = prepare(&s, &set).unwrap();
        assert_eq!(prep.first_kept_entry_id, kept);
        assert!(prep.is_split_turn);
        assert!(prep.messages_to_summarize.is_empty());
        assert_eq!(prep.turn_prefix_messages.len(), 5);
        assert_eq!(
            details(&prep).to_string(),
            r#"{"readFiles":["src/a.rs"],"modifiedFiles":["src/b.rs"]}"#
        );

        // Nothing before the turn: only the prefix request.
        let reqs = summary_requests(
            &prep,
            Some("ignored for prefix"),
            &set,
            Some(ThinkingLevel::Low),
        );
        assert_eq!(reqs.len(), 1);
        let r = &reqs[0];
        assert_eq!(r.kind, SummaryKind::TurnPrefix);
        assert_eq!(r.max_tokens, 8192);
        assert_eq!(r.reasoning, Some(ThinkingLevel::Low));
        let expected = format!(
            "<conversation>\n[User]: do it\n\n[Assistant tool calls]: read(path=\"src/a.rs\", offset=1)\n\n[Tool result]: {big}\n\n[Assistant tool calls]: edit(path=\"src/b.rs\", oldText=\"x\")\n\n[Tool result]: {big}\n</conversation>\n\n{TURN_PREFIX_SUMMARIZATION_PROMPT}"
        );
        assert_eq!(r.user_text, expected);

        assert_eq!(
            final_summary(&prep, None, Some("P")),
            "No prior history.\n\n---\n\n**Turn Context (split turn):**\n\nP\n\n<read-files>\nsrc/a.rs\n</read-files>\n\n<modified-files>\nsrc/b.rs\n</modified-files>"
        );
    }

    #[test]
    fn split_turn_with_history_sends_two_requests() {
        let big: String = std::iter::repeat_n('x', 400).collect();
        let mut s = session();
        s.append_message(&user("earlier"));
        s.append_message(&reply("ok"));
        s.append_message(&user("do it"));
        s.append_message(&assistant(vec![call("write", json!({"path": "w.txt"}))], 0));
        s.append_message(&tool_result(&big));
        s.append_message(&reply(&forty('d')));
        let set = settings(50);
        let prep = prepare(&s, &set).unwrap();
        assert!(prep.is_split_turn);
        assert_eq!(
            prep.messages_to_summarize,
            vec![user("earlier"), reply("ok")]
        );
        let reqs = summary_requests(&prep, Some("F"), &set, None);
        assert_eq!(
            reqs.iter().map(|r| r.kind).collect::<Vec<_>>(),
            vec![SummaryKind::History, SummaryKind::TurnPrefix]
        );
        assert_eq!(
            reqs[0].user_text,
            format!(
                "<conversation>\n[User]: earlier\n\n[Assistant]: ok\n</conversation>\n\n{SUMMARIZATION_PROMPT}\n\nAdditional focus: F"
            )
        );
        assert_eq!(
            final_summary(&prep, Some("H"), Some("P")),
            "H\n\n---\n\n**Turn Context (split turn):**\n\nP\n\n<modified-files>\nw.txt\n</modified-files>"
        );
    }

    #[test]
    fn iterative_compaction_uses_previous_summary_and_details() {
        let mut s = session();
        s.append_model_change("fake", "fake-model");
        let u1 = s.append_message(&user(&forty('a')));
        s.append_message(&assistant(
            vec![
                Content::text(forty('b')),
                call("read", json!({"path": "m.txt"})),
            ],
            0,
        ));
        s.append_compaction(
            "OLD",
            &u1,
            7,
            Some(json!({"readFiles": ["r.txt", 3], "modifiedFiles": ["m.txt"]})),
            Some(false),
        );
        let kept = s.append_message(&user(&forty('c')));
        s.append_message(&reply(&forty('d')));

        let prep = prepare(&s, &settings(15)).unwrap();
        assert_eq!(prep.first_kept_entry_id, kept);
        assert_eq!(prep.previous_summary.as_deref(), Some("OLD"));
        // Kept messages of the previous compaction are summarized again.
        assert_eq!(prep.messages_to_summarize.len(), 2);
        let reqs = summary_requests(&prep, None, &settings(15), None);
        assert_eq!(
            reqs[0].user_text,
            format!(
                "<conversation>\n[User]: {}\n\n[Assistant]: {}\n\n[Assistant tool calls]: read(path=\"m.txt\")\n</conversation>\n\n<previous-summary>\nOLD\n</previous-summary>\n\n{UPDATE_SUMMARIZATION_PROMPT}",
                forty('a'),
                forty('b')
            )
        );
        // m.txt was modified before, so a later read does not make it read-only.
        assert_eq!(
            details(&prep).to_string(),
            r#"{"readFiles":["r.txt"],"modifiedFiles":["m.txt"]}"#
        );
        assert_eq!(
            final_summary(&prep, Some("NEW"), None),
            "NEW\n\n<read-files>\nr.txt\n</read-files>\n\n<modified-files>\nm.txt\n</modified-files>"
        );
    }

    #[test]
    fn hook_compaction_details_are_ignored() {
        let mut s = session();
        let u1 = s.append_message(&user("a"));
        s.append_compaction(
            "",
            &u1,
            1,
            Some(json!({"readFiles": ["r.txt"]})),
            Some(true),
        );
        s.append_message(&user("b"));
        let prep = prepare(&s, &Settings::default()).unwrap();
        assert_eq!(prep.file_ops, FileOps::default());
        // An empty previous summary counts as none.
        let reqs = summary_requests(&prep, None, &Settings::default(), None);
        assert!(reqs[0].user_text.ends_with(SUMMARIZATION_PROMPT));
        assert!(!reqs[0].user_text.contains("<previous-summary>"));
    }

    #[test]
    fn serialization_of_every_role() {
        let mut thinking = AssistantMessage::empty("a", "p", "m");
        thinking.content = vec![
            Content::Thinking(crate::message::ThinkingContent {
                thinking: "t1".into(),
                thinking_signature: None,
                redacted: None,
            }),
            Content::text("x"),
            Content::Thinking(crate::message::ThinkingContent {
                thinking: "t2".into(),
                thinking_signature: None,
                redacted: None,
            }),
            Content::text("y"),
            call("bash", json!({"command": "ls \"a\"", "timeout": 5})),
            call("noargs", json!({})),
        ];
        let msgs = vec![
            AgentMessage::User(UserMessage {
                content: UserContent::Text("plain".into()),
                timestamp: 0,
            }),
            user(""),
            AgentMessage::Assistant(thinking),
            tool_result(""),
            AgentMessage::BashExecution(crate::message::BashExecutionMessage {
                command: "echo hi".into(),
                output: "hi\n".into(),
                exit_code: Some(0),
                cancelled: false,
                truncated: false,
                full_output_path: None,
                timestamp: 0,
                exclude_from_context: None,
            }),
        ];
        assert_eq!(
            serialize_conversation(&to_llm(&msgs, false)),
            "[User]: plain\n\n[Assistant thinking]: t1\nt2\n\n[Assistant]: x\ny\n\n[Assistant tool calls]: bash(command=\"ls \\\"a\\\"\", timeout=5); noargs()\n\n[User]: Ran `echo hi`\n```\nhi\n\n```"
        );
        // pi 1.6.0: without the thinking.
        assert_eq!(
            serialize_conversation_with(&to_llm(&msgs, false), false),
            "[User]: plain\n\n[Assistant]: x\ny\n\n[Assistant tool calls]: bash(command=\"ls \\\"a\\\"\", timeout=5); noargs()\n\n[User]: Ran `echo hi`\n```\nhi\n\n```"
        );
    }

    #[test]
    fn tool_results_are_truncated_in_utf16_units() {
        let long: String = std::iter::repeat_n('x', 2500).collect();
        let out = serialize_conversation(&to_llm(&[tool_result(&long)], false));
        let expected = format!(
            "[Tool result]: {}\n\n[... 500 more characters truncated]",
            &long[..2000]
        );
        assert_eq!(out, expected);
        // 1999 'x' then an astral char (2 units): the pair would straddle the limit.
        let mut s: String = std::iter::repeat_n('x', 1999).collect();
        s.push('😀');
        s.push('y');
        assert_eq!(
            truncate_for_summary(&s, 2000),
            format!("{}\n\n[... 2 more characters truncated]", &s[..1999])
        );
        assert_eq!(truncate_for_summary("😀", 2), "😀");
    }

    #[test]
    fn response_text_and_errors() {
        let mut a = AssistantMessage::empty("a", "p", "m");
        a.content = vec![
            Content::text("one"),
            call("x", json!({})),
            Content::text("two"),
        ];
        assert_eq!(response_text(SummaryKind::History, &a).unwrap(), "one\ntwo");
        a.stop_reason = StopReason::Error;
        a.error_message = Some("boom".into());
        assert_eq!(
            response_text(SummaryKind::History, &a).unwrap_err(),
            "Summarization failed: boom"
        );
        a.error_message = None;
        assert_eq!(
            response_text(SummaryKind::TurnPrefix, &a).unwrap_err(),
            "Turn prefix summarization failed: Unknown error"
        );
    }

    #[test]
    fn should_compact_threshold() {
        let s = Settings::default();
        assert!(!should_compact(200_000 - 16384, 200_000, &s));
        assert!(should_compact(200_000 - 16383, 200_000, &s));
        assert!(should_compact(1, 1000, &s));
        assert!(!should_compact(
            0,
            0,
            &Settings {
                enabled: false,
                ..s
            }
        ));
    }

    fn error_msg(text: &str) -> AssistantMessage {
        let mut a = AssistantMessage::empty("a", "p", "m");
        a.stop_reason = StopReason::Error;
        a.error_message = Some(text.into());
        a
    }

    #[test]
    fn overflow_patterns_each_match() {
        let cases = [
            "prompt is too long: 213462 tokens > 200000 maximum",
            "413 {\"error\":{\"type\":\"request_too_large\",\"message\":\"Request exceeds the maximum size\"}}",
            "Input is too long for requested model.",
            "Your input exceeds the context window of this model",
            "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",
            "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
            "Please reduce the length of the messages or completion",
            "This endpoint's maximum context length is 128000 tokens. However, you requested about 200000 tokens",
            "prompt token count of 140000 exceeds the limit of 128000",
            "the request exceeds the available context size, try increasing it",
            "tokens to keep from the initial prompt is greater than the context length",
            "invalid params, context window exceeds limit",
            "Your request exceeded model token limit: 262144 (requested: 300000)",
            "Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 maximum context length",
            "finish_reason: MODEL_CONTEXT_WINDOW_EXCEEDED",
            "prompt too long; exceeded max context length by 1200 tokens",
            "prompt too long; exceeded context length by 5 tokens",
            "context_length_exceeded",
            "Context Length Exceeded",
            "context_length exceeded",
            "Too many tokens in request",
            "token limit exceeded",
            "400 status code (no body)",
            "413 (no body)",
            "400(no body)",
            "413\u{a0}status code\t(no body) trailing",
        ];
        for c in cases {
            assert!(is_context_overflow(&error_msg(c), 0), "{c}");
        }
    }

    #[test]
    fn overflow_non_matches() {
        let cases = [
            "",
            "Internal server error",
            "maximum prompt length is unknown",
            "maximum context length is 128000",
            "exceeds the limit of x",
            "too large for model with many maximum context length",
            "input token count (5)\nexceeds the maximum",
            "exceeds the maximum; input token count",
            "context-length-exceeded",
            "prompt too long; exceeded maxcontext length",
            " 400 status code (no body)",
            "401 (no body)",
            "4 (no body)",
            "40013 (no body)",
            "400 status code",
            // Excluded as rate limits even though an overflow pattern matches.
            "ThrottlingException: Too many tokens, please wait before trying again.",
            "Throttling error: too many tokens",
            "Service unavailable: prompt is too long",
            "Rate limit reached: too many tokens per minute",
            "429 Too Many Requests: token limit exceeded",
        ];
        for c in cases {
            let m = error_msg(c);
            let expect =
                c == "ThrottlingException: Too many tokens, please wait before trying again.";
            // The Bedrock exclusion is by its formatted prefix only: the raw exception name
            // still counts as an overflow in 0.73.1.
            assert_eq!(is_context_overflow(&m, 0), expect, "{c}");
        }
        // A matching message without stopReason error is no overflow.
        let mut m = error_msg("prompt is too long");
        m.stop_reason = StopReason::Stop;
        assert!(!is_context_overflow(&m, 0));
    }

    #[test]
    fn silent_and_length_overflow() {
        let mut m = AssistantMessage::empty("a", "p", "m");
        m.usage = Usage {
            input: 900,
            cache_read: 101,
            output: 5,
            ..Usage::default()
        };
        assert!(is_context_overflow(&m, 1000));
        assert!(!is_context_overflow(&m, 1001));
        assert!(!is_context_overflow(&m, 0));
        m.stop_reason = StopReason::ToolUse;
        assert!(!is_context_overflow(&m, 1000));
        // Length stop: zero output and ≥ 99% of the window.
        m.stop_reason = StopReason::Length;
        m.usage = Usage {
            input: 990,
            ..Usage::default()
        };
        assert!(is_context_overflow(&m, 1000));
        m.usage.input = 989;
        assert!(!is_context_overflow(&m, 1000));
        m.usage.input = 1000;
        m.usage.output = 1;
        assert!(!is_context_overflow(&m, 1000));
    }

    fn check_input<'a>(
        settings: &'a Settings,
        context: &'a [AgentMessage],
        attempted: bool,
    ) -> CheckInput<'a> {
        CheckInput {
            settings,
            model: Some(("fake", "fake-model", 1000)),
            latest_compaction_ms: Some(100),
            overflow_recovery_attempted: attempted,
            include_aborted: false,
            context,
            recover_length_stops: false,
            max_tokens: 500,
        }
    }

    #[test]
    fn check_decides_like_check_compaction() {
        let set = Settings {
            reserve_tokens: 200,
            ..Settings::default()
        };
        let mut ok = AssistantMessage::empty("anthropic-messages", "fake", "fake-model");
        ok.timestamp = 200;
        ok.usage.total_tokens = 801;
        assert_eq!(
            check(&ok, &check_input(&set, &[], false)),
            Some(Trigger::Threshold)
        );
        ok.usage.total_tokens = 800;
        assert_eq!(check(&ok, &check_input(&set, &[], false)), None);
        // Older than the latest compaction: ignored.
        ok.usage.total_tokens = 900;
        ok.timestamp = 100;
        assert_eq!(check(&ok, &check_input(&set, &[], false)), None);
        ok.timestamp = 200;
        // Disabled.
        let off = Settings {
            enabled: false,
            ..set
        };
        assert_eq!(check(&ok, &check_input(&off, &[], false)), None);
        // Aborted replies only count before a prompt.
        let mut aborted = ok.clone();
        aborted.stop_reason = StopReason::Aborted;
        assert_eq!(check(&aborted, &check_input(&set, &[], false)), None);
        let before_prompt = CheckInput {
            include_aborted: true,
            ..check_input(&set, &[], false)
        };
        assert_eq!(check(&aborted, &before_prompt), Some(Trigger::Threshold));

        // Overflow from the current model; a second one is exhausted.
        let mut over = error_msg("prompt is too long");
        over.provider = "fake".into();
        over.model = "fake-model".into();
        over.timestamp = 200;
        assert_eq!(
            check(&over, &check_input(&set, &[], false)),
            Some(Trigger::Overflow)
        );
        assert_eq!(
            check(&over, &check_input(&set, &[], true)),
            Some(Trigger::OverflowRetryExhausted(OVERFLOW_RETRY_EXHAUSTED))
        );
        // pi 0.87.1: a `length` stop below the model's limit is recovered like an overflow.
        let mut cut = ok.clone();
        cut.stop_reason = StopReason::Length;
        cut.usage.total_tokens = 10;
        cut.usage.output = 3;
        let recovering = CheckInput {
            recover_length_stops: true,
            ..check_input(&set, &[], false)
        };
        assert_eq!(check(&cut, &check_input(&set, &[], false)), None);
        assert_eq!(check(&cut, &recovering), Some(Trigger::Overflow));
        assert_eq!(
            check(
                &cut,
                &CheckInput {
                    overflow_recovery_attempted: true,
                    ..recovering
                }
            ),
            Some(Trigger::OverflowRetryExhausted(LENGTH_RETRY_EXHAUSTED))
        );
        cut.usage.output = 500;
        assert_eq!(check(&cut, &recovering), None);
        // From another model: only the threshold rule, which needs a usable usage.
        over.model = "other".into();
        assert_eq!(check(&over, &check_input(&set, &[], false)), None);
        let mut prior = ok.clone();
        prior.usage.total_tokens = 790;
        let context = vec![
            AgentMessage::Assistant(prior.clone()),
            user(&forty('x')),
            AgentMessage::Assistant(over.clone()),
        ];
        // 790 + 10 (user) + 0 (the error reply's estimate) = 800: not over.
        assert_eq!(check(&over, &check_input(&set, &context, false)), None);
        let context = vec![
            AgentMessage::Assistant(prior.clone()),
            user(&forty('x')),
            user("y"),
            AgentMessage::Assistant(over.clone()),
        ];
        assert_eq!(
            check(&over, &check_input(&set, &context, false)),
            Some(Trigger::Threshold)
        );
        // The usage predates the latest compaction: skipped.
        let mut stale = prior;
        stale.timestamp = 50;
        let context = vec![AgentMessage::Assistant(stale), user(&forty('x')), user("y")];
        assert_eq!(check(&over, &check_input(&set, &context, false)), None);
    }

    #[test]
    fn latest_compaction_timestamp() {
        let mut s = session();
        assert_eq!(latest_compaction_ms(&s), None);
        let u = s.append_message(&user("a"));
        s.append_compaction("S", &u, 1, None, Some(false));
        let ts = s.branch_path().last().unwrap().timestamp_ms();
        assert!(ts > 0);
        s.append_message(&user("b"));
        assert_eq!(latest_compaction_ms(&s), Some(ts));
    }
}
