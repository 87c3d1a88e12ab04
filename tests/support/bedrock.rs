//! Bedrock's `converse-stream` replies for the fake LLM: AWS event-stream frames.

use serde_json::{Value, json};

use super::fake_llm::Reply;

/// A text-only Bedrock stream, "Hello from Bedrock" (usage: 3 in, 3 out), with the
/// event-stream content type.
pub fn text_reply() -> Reply {
    use pith::llm::aws::eventstream::encode;
    let ev = |kind: &str, payload: Value| {
        encode(
            &[
                (":event-type", kind),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload.to_string().as_bytes(),
        )
    };
    let mut b = ev("messageStart", json!({"role":"assistant"}));
    b.extend(ev(
        "contentBlockDelta",
        json!({"contentBlockIndex":0,"delta":{"text":"Hello from Bedrock"}}),
    ));
    b.extend(ev("contentBlockStop", json!({"contentBlockIndex":0})));
    b.extend(ev("messageStop", json!({"stopReason":"end_turn"})));
    b.extend(ev(
        "metadata",
        json!({"usage":{"inputTokens":3,"outputTokens":3,"totalTokens":6}}),
    ));
    Reply {
        headers: vec![(
            "content-type".into(),
            "application/vnd.amazon.eventstream".into(),
        )],
        ..Reply::sse(b)
    }
}
