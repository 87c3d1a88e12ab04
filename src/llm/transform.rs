//! Provider-independent message hygiene applied before every request (the reference's
//! `transformMessages`, spec 7.2): failed/aborted assistant turns are dropped, thinking from a
//! different model becomes plain text, tool-call ids are normalised for the target API (and the
//! matching tool results follow), and tool calls left without a result get a synthetic
//! `No result provided` error result so the provider accepts the history.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::llm::Model;
use crate::message::{
    AssistantMessage, Content, LlmMessage, StopReason, TextContent, ToolResultMessage, UserContent,
    now_ms,
};

/// What becomes of another model's readable (unsigned or foreign-signed) thinking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForeignThinking {
    /// pi 0.73.1 / 0.87.1: sent as a text block.
    AsText,
    /// pi 1.6.0 (1.3.0, "clean model switching"): left out; back on the model that wrote it, it
    /// is replayed as thinking again.
    Dropped,
}

impl ForeignThinking {
    pub const fn of(sdk: crate::protocol::SdkGeneration) -> ForeignThinking {
        if sdk.drops_foreign_thinking() {
            ForeignThinking::Dropped
        } else {
            ForeignThinking::AsText
        }
    }
}

/// Normalise `messages` for `model`. `normalize_id` maps a foreign tool-call id to one the target
/// API accepts (only applied to assistant messages from another model).
pub fn transform_messages<'a>(
    messages: impl IntoIterator<Item = &'a LlmMessage>,
    model: &Model,
    normalize_id: Option<&dyn Fn(&str) -> String>,
    foreign: ForeignThinking,
) -> Vec<LlmMessage> {
    transform_borrowed(messages, model, normalize_id, foreign)
        .into_iter()
        .map(Transformed::into_owned)
        .collect()
}

/// A message after [`transform_borrowed`]: the request's own when unchanged, else a new one.
/// (Two words: a long history's transformed list is small next to the history.)
#[derive(Debug)]
pub enum Transformed<'a> {
    Same(&'a LlmMessage),
    Changed(Box<LlmMessage>),
}

impl Transformed<'_> {
    pub fn into_owned(self) -> LlmMessage {
        match self {
            Transformed::Same(m) => m.clone(),
            Transformed::Changed(m) => *m,
        }
    }
}

impl std::ops::Deref for Transformed<'_> {
    type Target = LlmMessage;
    fn deref(&self) -> &LlmMessage {
        match self {
            Transformed::Same(m) => m,
            Transformed::Changed(m) => m,
        }
    }
}

/// [`transform_messages`] without copying what it leaves unchanged (nearly everything in a long
/// history of one model): unchanged messages are borrowed. One pass: each message is
/// transformed, then placed (orphaned tool calls answered, failed turns dropped).
pub fn transform_borrowed<'a>(
    messages: impl IntoIterator<Item = &'a LlmMessage>,
    model: &Model,
    normalize_id: Option<&dyn Fn(&str) -> String>,
    foreign: ForeignThinking,
) -> Vec<Transformed<'a>> {
    let mut id_map: HashMap<String, String> = HashMap::new();
    let messages = messages.into_iter();
    let mut out: Vec<Transformed<'a>> = Vec::with_capacity(messages.size_hint().0);
    let images_ok = model.input.iter().any(|i| i == "image");
    // Tool calls (id, name, answered) of the latest assistant message: those without a result
    // by the next assistant or user message get one (`flush_orphans`).
    let mut pending: Vec<(Cow<'a, str>, Cow<'a, str>, bool)> = Vec::new();
    // pi 0.87.1: system messages met while tool calls are pending wait until those are answered
    // (synthetic results included), so they never split calls from their results.
    let mut held: Vec<Transformed<'a>> = Vec::new();
    for msg in messages {
        let msg = match msg {
            LlmMessage::User(u) => match &u.content {
                UserContent::Blocks(b) if !images_ok && has_image(b) => {
                    let mut u = u.clone();
                    u.content = UserContent::Blocks(replace_images(b, USER_IMAGE_PLACEHOLDER));
                    Transformed::Changed(Box::new(LlmMessage::User(u)))
                }
                _ => Transformed::Same(msg),
            },
            LlmMessage::ToolResult(r) => {
                let id = id_map.get(&r.tool_call_id);
                let downgrade = !images_ok && has_image(&r.content);
                if id.is_none() && !downgrade {
                    Transformed::Same(msg)
                } else {
                    let mut r = r.clone();
                    if let Some(id) = id {
                        r.tool_call_id = id.clone();
                    }
                    if downgrade {
                        r.content = replace_images(&r.content, TOOL_IMAGE_PLACEHOLDER);
                    }
                    Transformed::Changed(Box::new(LlmMessage::ToolResult(r)))
                }
            }
            LlmMessage::System(_) => Transformed::Same(msg),
            LlmMessage::Assistant(a) if unchanged(a, model) => Transformed::Same(msg),
            LlmMessage::Assistant(a) => Transformed::Changed(Box::new(LlmMessage::Assistant(
                transform_assistant(a, model, normalize_id, foreign, &mut id_map),
            ))),
        };
        match &*msg {
            LlmMessage::System(_) => {
                if pending.is_empty() {
                    out.push(msg);
                } else {
                    held.push(msg);
                }
            }
            LlmMessage::Assistant(a) => {
                flush_orphans(&mut pending, &mut out);
                out.append(&mut held);
                if matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) {
                    continue;
                }
                // Refilled in place: a long history has a call in most assistant messages.
                pending.clear();
                match &msg {
                    // The request's own message: its ids are borrowed, not copied.
                    Transformed::Same(LlmMessage::Assistant(a)) => {
                        pending.extend(a.tool_calls().map(|tc| {
                            (
                                Cow::Borrowed(tc.id.as_str()),
                                Cow::Borrowed(tc.name.as_str()),
                                false,
                            )
                        }))
                    }
                    _ => pending.extend(a.tool_calls().map(|tc| {
                        (
                            Cow::Owned(tc.id.clone()),
                            Cow::Owned(tc.name.clone()),
                            false,
                        )
                    })),
                }
                out.push(msg);
            }
            LlmMessage::ToolResult(r) => {
                for p in pending
                    .iter_mut()
                    .filter(|p| p.0 == r.tool_call_id.as_str())
                {
                    p.2 = true;
                }
                out.push(msg);
            }
            LlmMessage::User(_) => {
                flush_orphans(&mut pending, &mut out);
                out.append(&mut held);
                out.push(msg);
            }
        }
    }
    // Calls still unanswered at the end get their synthetic results too (both versions).
    flush_orphans(&mut pending, &mut out);
    out.append(&mut held);
    out
}

/// What replaces images for a model without image input (the reference's wording).
pub const USER_IMAGE_PLACEHOLDER: &str = "(image omitted: model does not support images)";
pub const TOOL_IMAGE_PLACEHOLDER: &str = "(tool image omitted: model does not support images)";

fn has_image(blocks: &[Content]) -> bool {
    blocks.iter().any(|b| matches!(b, Content::Image(_)))
}

/// Images become one placeholder text per run of images (a placeholder text already there
/// counts), as the reference's `replaceImagesWithPlaceholder`.
fn replace_images(blocks: &[Content], placeholder: &str) -> Vec<Content> {
    let mut out = Vec::with_capacity(blocks.len());
    let mut previous_was_placeholder = false;
    for b in blocks {
        if let Content::Image(_) = b {
            if !previous_was_placeholder {
                out.push(Content::text(placeholder));
            }
            previous_was_placeholder = true;
            continue;
        }
        previous_was_placeholder = matches!(b, Content::Text(t) if t.text == placeholder);
        out.push(b.clone());
    }
    out
}

/// Whether [`transform_assistant`] would return `a` as it is: a message of this very model
/// without empty unsigned thinking blocks.
fn unchanged(a: &AssistantMessage, model: &Model) -> bool {
    is_same_model(a, model)
        && !a.content.iter().any(|b| {
            matches!(b, Content::Thinking(t)
                if t.redacted != Some(true)
                    && !has_signature(t)
                    && t.thinking.trim().is_empty())
        })
}

/// pi tests the signature for truth: an empty one (a block cut off before its signature
/// arrived) counts as none.
fn has_signature(t: &crate::message::ThinkingContent) -> bool {
    t.thinking_signature
        .as_deref()
        .is_some_and(|s| !s.is_empty())
}

fn flush_orphans<'a>(
    pending: &mut Vec<(Cow<'a, str>, Cow<'a, str>, bool)>,
    out: &mut Vec<Transformed<'a>>,
) {
    for (id, name, answered) in pending.drain(..) {
        if !answered {
            out.push(Transformed::Changed(Box::new(LlmMessage::ToolResult(
                ToolResultMessage {
                    tool_call_id: id.into_owned(),
                    tool_name: name.into_owned(),
                    content: vec![Content::text("No result provided")],
                    details: None,
                    is_error: true,
                    duration_ms: None,
                    timestamp: now_ms(),
                    nested_calls: None,
                },
            ))));
        }
    }
}

fn transform_assistant(
    a: &AssistantMessage,
    model: &Model,
    normalize_id: Option<&dyn Fn(&str) -> String>,
    foreign: ForeignThinking,
    id_map: &mut HashMap<String, String>,
) -> AssistantMessage {
    let same = is_same_model(a, model);
    let mut content = Vec::with_capacity(a.content.len());
    for block in &a.content {
        match block {
            Content::Thinking(t) => {
                if t.redacted == Some(true) {
                    if same {
                        content.push(block.clone());
                    }
                } else if same && has_signature(t) {
                    content.push(block.clone());
                } else if t.thinking.trim().is_empty() {
                } else if same {
                    content.push(block.clone());
                } else if foreign == ForeignThinking::AsText {
                    content.push(Content::text(t.thinking.clone()));
                }
            }
            Content::Text(t) if !same => content.push(Content::Text(TextContent {
                text: t.text.clone(),
                text_signature: None,
            })),
            Content::ToolCall(tc) if !same => {
                let mut tc = tc.clone();
                tc.thought_signature = None;
                if let Some(f) = normalize_id {
                    let id = f(&tc.id);
                    if id != tc.id {
                        id_map.insert(tc.id.clone(), id.clone());
                        tc.id = id;
                    }
                }
                content.push(Content::ToolCall(tc));
            }
            _ => content.push(block.clone()),
        }
    }
    AssistantMessage {
        content,
        ..a.clone()
    }
}

pub fn is_same_model(a: &AssistantMessage, model: &Model) -> bool {
    a.provider == model.provider && a.api == model.api && a.model == model.id
}

/// The reference's `shortHash`: two 32-bit multiplicative hashes over the UTF-16 code units,
/// printed in base 36 (used to shorten and derive tool-call and item ids).
pub fn short_hash(s: &str) -> String {
    let mut h1: u32 = 0xdead_beef;
    let mut h2: u32 = 0x41c6_ce57;
    for ch in s.encode_utf16() {
        let ch = u32::from(ch);
        h1 = (h1 ^ ch).wrapping_mul(2_654_435_761);
        h2 = (h2 ^ ch).wrapping_mul(1_597_334_677);
    }
    h1 = (h1 ^ (h1 >> 16)).wrapping_mul(2_246_822_507)
        ^ (h2 ^ (h2 >> 13)).wrapping_mul(3_266_489_909);
    h2 = (h2 ^ (h2 >> 16)).wrapping_mul(2_246_822_507)
        ^ (h1 ^ (h1 >> 13)).wrapping_mul(3_266_489_909);
    format!("{}{}", base36(h2), base36(h1))
}

fn base36(mut n: u32) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    if n == 0 {
        return "0".into();
    }
    let mut out = Vec::new();
    while n > 0 {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// Replace every character outside `[a-zA-Z0-9_-]` with `_` and cut to `max` characters.
pub fn sanitize_id(id: &str, max: usize) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(max)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ModelCost;
    use crate::message::{ThinkingContent, ToolCall, UserContent, UserMessage};

    fn model() -> Model {
        Model {
            id: "m".into(),
            name: "m".into(),
            api: "anthropic-messages".into(),
            provider: "p".into(),
            base_url: "http://x".into(),
            reasoning: true,
            input: vec!["text".into()],
            cost: ModelCost::default(),
            context_window: 1000,
            max_tokens: 100,
            headers: None,
            compat: None,
            ..Default::default()
        }
    }

    fn user(t: &str) -> LlmMessage {
        LlmMessage::User(UserMessage {
            content: UserContent::Text(t.into()),
            timestamp: 1,
        })
    }

    fn assistant(model: &str, content: Vec<Content>, stop: StopReason) -> LlmMessage {
        let mut a = AssistantMessage::empty("anthropic-messages", "p", model);
        a.content = content;
        a.stop_reason = stop;
        LlmMessage::Assistant(a)
    }

    fn call(id: &str) -> Content {
        Content::ToolCall(ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: serde_json::json!({}),
            thought_signature: Some("s".into()),
            arguments_error: None,
        })
    }

    #[test]
    fn short_hash_matches_the_reference() {
        // Values computed with pi-ai's `shortHash`.
        assert_eq!(short_hash("toolcall:0"), "1nlso9v7di2pi");
        assert_eq!(short_hash(""), "k4n83c7h0j2b");
        assert_eq!(short_hash("call_abc|fc_123"), "jp01dsxufnom");
        assert_eq!(short_hash("héllo 😀"), "1t90xbiinqdrp");
    }

    #[test]
    fn unchanged_messages_are_borrowed() {
        let msgs = vec![
            user("a"),
            assistant("m", vec![call("t1")], StopReason::ToolUse),
            LlmMessage::ToolResult(ToolResultMessage {
                tool_call_id: "t1".into(),
                tool_name: "bash".into(),
                content: vec![Content::text("ok")],
                details: None,
                is_error: false,
                duration_ms: None,
                timestamp: 1,
                nested_calls: None,
            }),
            assistant("other", vec![Content::text("x")], StopReason::Stop),
        ];
        let out = transform_borrowed(&msgs, &model(), None, ForeignThinking::AsText);
        let borrowed: Vec<bool> = out
            .iter()
            .map(|m| matches!(m, Transformed::Same(_)))
            .collect();
        assert_eq!(borrowed, [true, true, true, false]);
    }

    #[test]
    fn drops_failed_turns_and_fills_orphans() {
        let msgs = vec![
            user("a"),
            assistant("m", vec![call("t1")], StopReason::ToolUse),
            user("b"),
            assistant("m", vec![Content::text("x")], StopReason::Error),
        ];
        let out = transform_messages(&msgs, &model(), None, ForeignThinking::AsText);
        assert_eq!(out.len(), 4);
        match &out[2] {
            LlmMessage::ToolResult(r) => {
                assert_eq!((r.tool_call_id.as_str(), r.is_error), ("t1", true));
                assert_eq!(r.content, vec![Content::text("No result provided")]);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(out[3], LlmMessage::User(_)));
    }

    #[test]
    fn foreign_thinking_becomes_text_and_ids_are_normalised() {
        let thinking = Content::Thinking(ThinkingContent {
            thinking: "hmm".into(),
            thinking_signature: Some("sig".into()),
            redacted: None,
        });
        let msgs = vec![
            user("a"),
            assistant("other", vec![thinking, call("a|b")], StopReason::ToolUse),
            LlmMessage::ToolResult(ToolResultMessage {
                tool_call_id: "a|b".into(),
                tool_name: "bash".into(),
                content: vec![Content::text("ok")],
                details: None,
                is_error: false,
                duration_ms: None,
                timestamp: 1,
                nested_calls: None,
            }),
        ];
        let f = |id: &str| sanitize_id(id, 64);
        let out = transform_messages(&msgs, &model(), Some(&f), ForeignThinking::AsText);
        let LlmMessage::Assistant(a) = &out[1] else {
            panic!()
        };
        assert_eq!(a.content[0], Content::text("hmm"));
        let LlmMessage::ToolResult(r) = &out[2] else {
            panic!()
        };
        assert_eq!(r.tool_call_id, "a_b");
        let Content::ToolCall(tc) = &a.content[1] else {
            panic!()
        };
        assert_eq!(
            (tc.id.as_str(), tc.thought_signature.is_none()),
            ("a_b", true)
        );
        // pi 1.6.0: another model's thinking is left out; on its own model it stays thinking.
        let out = transform_messages(&msgs, &model(), Some(&f), ForeignThinking::Dropped);
        let LlmMessage::Assistant(a) = &out[1] else {
            panic!()
        };
        assert_eq!(a.content.len(), 1);
        assert!(matches!(&a.content[0], Content::ToolCall(tc) if tc.id == "a_b"));
        let own = vec![
            user("a"),
            assistant(
                &model().id,
                vec![
                    Content::Thinking(ThinkingContent {
                        thinking: "hmm".into(),
                        thinking_signature: Some("sig".into()),
                        redacted: None,
                    }),
                    Content::text("x"),
                ],
                StopReason::Stop,
            ),
        ];
        let out = transform_messages(&own, &model(), Some(&f), ForeignThinking::Dropped);
        let LlmMessage::Assistant(a) = &out[1] else {
            panic!()
        };
        assert!(matches!(&a.content[0], Content::Thinking(t) if t.thinking == "hmm"));
        assert_eq!(
            ForeignThinking::of(crate::protocol::SdkGeneration::Pi087),
            ForeignThinking::AsText
        );
    }
}
