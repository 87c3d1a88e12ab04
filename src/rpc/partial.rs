//! Incremental serialisation of the partial assistant message that every `message_update`
//! carries (twice). Serialising the whole message per delta costs O(message) of JSON encoding
//! per delta; here each finished content block is encoded once and kept as bytes, and the block
//! being streamed keeps its JSON-escaped text and grows by the escaped delta only. Writing a
//! snapshot is then a few `memcpy`s. The bytes are exactly those of serialising the message
//! (a test checks it against `serde_json` for every step of a stream).

use serde::Serialize;

use crate::llm::StreamEvent;
use crate::message::{AssistantMessage, Content};

enum Block {
    /// A block that does not change any more (or changes rarely): its JSON.
    Fixed(Vec<u8>),
    /// A text or thinking block being streamed: `{"type":"text","text":"` + escaped + `"}`
    /// (a thinking block that opened with a signature: `","thinkingSignature":"…"}`).
    Streaming {
        prefix: &'static str,
        escaped: String,
        suffix: String,
    },
}

#[derive(Default)]
pub struct PartialEncoder {
    blocks: Vec<Block>,
    /// Reused buffer for one snapshot, so each frame can be allocated at its exact size.
    scratch: Vec<u8>,
}

fn encode<T: Serialize + ?Sized>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    if crate::rpc::response::write_js(&mut out, v).is_err() {
        out.clear();
        out.extend_from_slice(b"{}");
    }
    out
}

/// A string escaped exactly as serde_json escapes it, without the quotes.
fn escape_into(s: &str, out: &mut String) {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    if quoted.len() >= 2 {
        out.push_str(&quoted[1..quoted.len() - 1]);
    }
}

impl PartialEncoder {
    pub fn new() -> PartialEncoder {
        PartialEncoder::default()
    }

    /// Follow one stream event; `partial` is the message after the event was applied to it.
    pub fn update(&mut self, ev: &StreamEvent, partial: &AssistantMessage) {
        let fixed = |i: usize| partial.content.get(i).map(|c| Block::Fixed(encode(c)));
        let set = |blocks: &mut Vec<Block>, i: usize, b: Block| {
            if i < blocks.len() {
                blocks[i] = b;
            } else {
                blocks.push(b);
            }
        };
        match ev {
            StreamEvent::TextStart { index } => set(
                &mut self.blocks,
                *index,
                Block::Streaming {
                    prefix: "{\"type\":\"text\",\"text\":\"",
                    escaped: String::new(),
                    suffix: "\"}".into(),
                },
            ),
            StreamEvent::ThinkingStart { index, signature } => set(
                &mut self.blocks,
                *index,
                Block::Streaming {
                    prefix: "{\"type\":\"thinking\",\"thinking\":\"",
                    escaped: String::new(),
                    suffix: match signature {
                        Some(s) => {
                            let mut t = String::from("\",\"thinkingSignature\":\"");
                            escape_into(s, &mut t);
                            t.push_str("\"}");
                            t
                        }
                        None => "\"}".into(),
                    },
                },
            ),
            StreamEvent::TextDelta { index, delta }
            | StreamEvent::ThinkingDelta { index, delta } => match self.blocks.get_mut(*index) {
                Some(Block::Streaming { escaped, .. }) => escape_into(delta, escaped),
                _ => self.rebuild(partial),
            },
            StreamEvent::TextEnd { index, .. }
            | StreamEvent::ThinkingEnd { index, .. }
            | StreamEvent::ToolCallStart { index, .. }
            | StreamEvent::ToolCallDelta { index, .. }
            | StreamEvent::ToolCallEnd { index, .. } => match fixed(*index) {
                Some(b) => set(&mut self.blocks, *index, b),
                None => self.rebuild(partial),
            },
            StreamEvent::Start { .. } => self.rebuild(partial),
            StreamEvent::Meta { .. } | StreamEvent::Done { .. } | StreamEvent::Error { .. } => {}
        }
        if self.blocks.len() != partial.content.len() {
            self.rebuild(partial);
        }
    }

    /// The snapshot of `partial`, in a buffer owned by the encoder (valid until the next call).
    pub fn snapshot(&mut self, partial: &AssistantMessage) -> &[u8] {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        self.write(partial, &mut buf);
        self.scratch = buf;
        &self.scratch
    }

    fn rebuild(&mut self, partial: &AssistantMessage) {
        self.blocks = partial
            .content
            .iter()
            .map(|c: &Content| Block::Fixed(encode(c)))
            .collect();
    }

    /// Append the JSON of `partial` (with `"role":"assistant"` first) to `out`.
    pub fn write(&self, partial: &AssistantMessage, out: &mut Vec<u8>) {
        // Everything but the content is small: serialise it with empty content and splice.
        let empty = partial.clone_without_content();
        #[derive(Serialize)]
        struct WithRole<'a> {
            role: &'static str,
            #[serde(flatten)]
            m: &'a AssistantMessage,
        }
        let shell = encode(&WithRole {
            role: "assistant",
            m: &empty,
        });
        const MARK: &[u8] = b"\"content\":[]";
        let Some(at) = shell.windows(MARK.len()).position(|w| w == MARK) else {
            out.extend_from_slice(&shell);
            return;
        };
        let split = at + MARK.len() - 1; // just before the closing `]`
        out.extend_from_slice(&shell[..split]);
        for (i, b) in self.blocks.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match b {
                Block::Fixed(bytes) => out.extend_from_slice(bytes),
                Block::Streaming {
                    prefix,
                    escaped,
                    suffix,
                } => {
                    out.extend_from_slice(prefix.as_bytes());
                    out.extend_from_slice(escaped.as_bytes());
                    out.extend_from_slice(suffix.as_bytes());
                }
            }
        }
        out.extend_from_slice(&shell[split..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use serde_json::json;

    fn full(m: &AssistantMessage) -> Vec<u8> {
        #[derive(Serialize)]
        struct WithRole<'a> {
            role: &'static str,
            #[serde(flatten)]
            m: &'a AssistantMessage,
        }
        encode(&WithRole {
            role: "assistant",
            m,
        })
    }

    /// Drive a mirror message and the encoder through a stream; every snapshot must equal a full
    /// serialisation.
    #[test]
    fn snapshots_equal_full_serialisation_at_every_step() {
        let mut m = AssistantMessage::empty("anthropic-messages", "p", "m");
        m.timestamp = 5;
        let deltas = [
            "He said \"hi\"\n",
            "\\ tab\t ctl\u{1} ",
            "emoji 😀 CJK 漢字 ",
            "sep\u{2028}end",
            "",
        ];
        let mut events = vec![
            StreamEvent::Start { partial: m.clone() },
            StreamEvent::ThinkingStart {
                index: 0,
                signature: Some("s\"ig".into()),
            },
        ];
        events.extend(deltas.iter().map(|d| StreamEvent::ThinkingDelta {
            index: 0,
            delta: d.to_string(),
        }));
        events.push(StreamEvent::ThinkingEnd {
            index: 0,
            content: deltas.concat(),
            signature: Some("sig".into()),
        });
        events.push(StreamEvent::TextStart { index: 1 });
        events.extend(deltas.iter().map(|d| StreamEvent::TextDelta {
            index: 1,
            delta: d.to_string(),
        }));
        let mut usage = m.usage;
        usage.input = 12;
        usage.cost.input = 0.00030000000000000003;
        events.push(StreamEvent::Meta {
            usage,
            response_id: Some("r1".into()),
        });
        events.push(StreamEvent::TextEnd {
            index: 1,
            content: deltas.concat(),
            signature: None,
        });
        events.push(StreamEvent::ToolCallStart {
            index: 2,
            id: "t1".into(),
            name: "bash".into(),
        });
        events.push(StreamEvent::ToolCallDelta {
            index: 2,
            delta: "{\"co".into(),
        });
        let call = ToolCall {
            id: "t1".into(),
            name: "bash".into(),
            arguments: json!({"command":"ls"}),
            thought_signature: None,
            arguments_error: None,
        };
        events.push(StreamEvent::ToolCallEnd {
            index: 2,
            tool_call: call,
        });

        let mut enc = PartialEncoder::new();
        for ev in &events {
            crate::core::agent::apply_event(&mut m, ev);
            enc.update(ev, &m);
            let mut got = Vec::new();
            enc.write(&m, &mut got);
            assert_eq!(
                String::from_utf8(got).unwrap(),
                String::from_utf8(full(&m)).unwrap(),
                "after {ev:?}"
            );
        }
    }
}
