//! Scripted Anthropic Messages SSE bodies for the fake LLM, in the shape of the oracle's
//! `fakellm.py`: `message_start` (with usage), one start / deltas / stop run per content block,
//! `message_delta` with the stop reason, `message_stop`. The tests differ only in the message id,
//! the usage numbers and whether a `ping` follows `message_start`, so [`Sse`] carries those and
//! [`Block`]s carry the content.

use serde_json::{Value, json};

use super::fake_llm::Reply;

/// One SSE event: `event: <name>` and its JSON `data`.
pub fn ev(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// One content block and the pieces its deltas carry.
#[derive(Clone)]
pub enum Block {
    /// Thinking deltas, then the signature.
    Thinking(Vec<String>, String),
    /// Text deltas (none at all is an empty text block).
    Text(Vec<String>),
    /// A tool call whose JSON arguments arrive as `json` pieces.
    Tool {
        id: String,
        name: String,
        json: Vec<String>,
    },
}

pub fn text(chunks: &[&str]) -> Block {
    Block::Text(chunks.iter().map(|s| s.to_string()).collect())
}

pub fn thinking(chunks: &[&str], sig: &str) -> Block {
    Block::Thinking(chunks.iter().map(|s| s.to_string()).collect(), sig.into())
}

/// A tool call whose argument text arrives in the given pieces.
pub fn tool_call(id: &str, name: &str, json: &[&str]) -> Block {
    Block::Tool {
        id: id.into(),
        name: name.into(),
        json: json.iter().map(|s| s.to_string()).collect(),
    }
}

/// The message-level parts of a stream: id, usage and an optional `ping`.
#[derive(Clone)]
pub struct Sse {
    pub id: String,
    /// `usage.input_tokens` in `message_start`.
    pub input_tokens: u64,
    /// `usage.output_tokens` in `message_delta` (`message_start` always says 1).
    pub output_tokens: u64,
    /// A `ping` event right after `message_start`.
    pub ping: bool,
}

impl Sse {
    /// Id `msg_fake_<n>`, 100 input tokens, 2 output tokens, no ping.
    pub fn numbered(n: usize) -> Sse {
        Sse {
            id: format!("msg_fake_{n}"),
            input_tokens: 100,
            output_tokens: 2,
            ping: false,
        }
    }

    /// The whole body; the stop reason is `tool_use` if any block is a tool call, else `end_turn`.
    pub fn body(&self, blocks: &[Block]) -> String {
        let mut out = ev(
            "message_start",
            json!({"type":"message_start","message":{"id":self.id,"type":"message",
                "role":"assistant","model":"fake-model","content":[],"stop_reason":null,
                "stop_sequence":null,"usage":{"input_tokens":self.input_tokens,"output_tokens":1,
                "cache_read_input_tokens":0,"cache_creation_input_tokens":0}}}),
        );
        if self.ping {
            out += &ev("ping", json!({"type":"ping"}));
        }
        for (i, b) in blocks.iter().enumerate() {
            out += &block(i, b);
        }
        let tool = blocks.iter().any(|b| matches!(b, Block::Tool { .. }));
        let stop = if tool { "tool_use" } else { "end_turn" };
        out += &ev(
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},
                "usage":{"output_tokens":self.output_tokens}}),
        );
        out += &ev("message_stop", json!({"type":"message_stop"}));
        out
    }

    pub fn reply(&self, blocks: &[Block]) -> Reply {
        Reply::sse(self.body(blocks))
    }
}

/// `content_block_start`, the deltas and `content_block_stop` of block `i`.
fn block(i: usize, b: &Block) -> String {
    let delta = |d: Value| {
        ev(
            "content_block_delta",
            json!({"type":"content_block_delta","index":i,"delta":d}),
        )
    };
    let start = match b {
        Block::Thinking(..) => json!({"type":"thinking","thinking":""}),
        Block::Text(_) => json!({"type":"text","text":""}),
        Block::Tool { id, name, .. } => json!({"type":"tool_use","id":id,"name":name,"input":{}}),
    };
    let mut out = ev(
        "content_block_start",
        json!({"type":"content_block_start","index":i,"content_block":start}),
    );
    match b {
        Block::Thinking(chunks, sig) => {
            for c in chunks {
                out += &delta(json!({"type":"thinking_delta","thinking":c}));
            }
            out += &delta(json!({"type":"signature_delta","signature":sig}));
        }
        Block::Text(chunks) => {
            for c in chunks {
                out += &delta(json!({"type":"text_delta","text":c}));
            }
        }
        Block::Tool { json, .. } => {
            for c in json {
                out += &delta(json!({"type":"input_json_delta","partial_json":c}));
            }
        }
    }
    out += &ev(
        "content_block_stop",
        json!({"type":"content_block_stop","index":i}),
    );
    out
}

/// A text-only stream `msg_fake_<n>` with `parts` as deltas (usage: 100 in, 2 out).
pub fn text_sse(n: usize, parts: &[&str]) -> String {
    Sse::numbered(n).body(&[text(parts)])
}

/// Reply `n` (`msg_fake_<n>`, [`Sse::numbered`]) with `blocks`.
pub fn reply(n: usize, blocks: &[Block]) -> Reply {
    Sse::numbered(n).reply(blocks)
}

/// Reply `n` with one text block of `parts`.
pub fn text_reply(n: usize, parts: &[&str]) -> Reply {
    reply(n, &[text(parts)])
}

/// One text reply per entry of `texts`, numbered from 1.
pub fn text_replies(texts: &[&str]) -> Vec<Reply> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| Reply::sse(text_sse(i + 1, &[t])))
        .collect()
}
