//! Helpers for tests that drive the LLM layer directly (`pith::llm::stream::spawn`): requests,
//! collecting a stream's events, and the cancel-while-stalled scenario every API must pass.

use std::time::{Duration, Instant};

use pith::llm::stream::{self, StreamHandle};
use pith::llm::{LlmRequest, Model, StreamEvent, Timeouts};
use pith::message::{
    AssistantMessage, Content, LlmMessage, StopReason, ThinkingLevel, UserContent, UserMessage,
};

/// A fixture file's text.
pub fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(super::fixture(name)).expect("fixture")
}

pub fn user(text: &str) -> LlmMessage {
    LlmMessage::User(UserMessage {
        content: UserContent::Blocks(vec![Content::text(text)]),
        timestamp: 1,
    })
}

/// A request to `model` with a test key, a short system prompt, thinking medium, no tools.
pub fn request(model: Model, messages: Vec<LlmMessage>) -> LlmRequest {
    LlmRequest {
        model,
        api_key: Some("sk-test-key".into()),
        system_prompt: "You are a test.".into(),
        messages: messages.into(),
        tools: Vec::new(),
        thinking: ThinkingLevel::Medium,
        session_id: None,
        max_tokens: None,
        timeouts: Timeouts {
            connect: Duration::from_secs(5),
            stall: Duration::from_secs(10),
        },
        faux_script: None,
        sdk: Default::default(),
        no_cache: false,
        tool_arguments_error: false,
        extra: Default::default(),
    }
}

pub fn start(req: LlmRequest) -> (StreamHandle, crossbeam_channel::Receiver<StreamEvent>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let h = stream::spawn(req, Box::new(move |ev| tx.send(ev).is_ok()));
    (h, rx)
}

/// Run to completion; every event, the last being Done or Error, and nothing after it.
pub fn collect(req: LlmRequest) -> Vec<StreamEvent> {
    let (_h, rx) = start(req);
    let mut out = Vec::new();
    loop {
        let ev = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("stream ended without a final event");
        let last = matches!(ev, StreamEvent::Done { .. } | StreamEvent::Error { .. });
        out.push(ev);
        if last {
            break;
        }
    }
    assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
    out
}

pub fn final_message(events: &[StreamEvent]) -> &AssistantMessage {
    match events.last() {
        Some(StreamEvent::Done { message }) | Some(StreamEvent::Error { message, .. }) => message,
        other => panic!("no final event: {other:?}"),
    }
}

/// Start `req` against a server that stalls, cancel after the first text delta: the final Error
/// (aborted, `This operation was aborted`) must come within 100 ms with the text received so
/// far (which starts with `prefix`), and the stream thread must end within 100 ms too.
pub fn assert_cancel_is_prompt(req: LlmRequest, prefix: &str) {
    let (mut h, rx) = start(req);
    let mut seen = String::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(5)).expect("event") {
            StreamEvent::TextDelta { delta, .. } => {
                seen.push_str(&delta);
                // Let the rest of what was sent before the stall arrive.
                std::thread::sleep(Duration::from_millis(100));
                break;
            }
            StreamEvent::Done { .. } | StreamEvent::Error { .. } => panic!("ended early"),
            _ => {}
        }
    }
    let t = Instant::now();
    h.cancel();
    let last = loop {
        let ev = rx
            .recv_timeout(Duration::from_secs(2))
            .expect("final event after cancel");
        match ev {
            StreamEvent::TextDelta { delta, .. } => seen.push_str(&delta),
            StreamEvent::Done { .. } | StreamEvent::Error { .. } => break ev,
            _ => {}
        }
    };
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "cancel took {:?}",
        t.elapsed()
    );
    let StreamEvent::Error { message, .. } = last else {
        panic!("expected Error")
    };
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(
        message.error_message.as_deref(),
        Some("This operation was aborted")
    );
    assert!(seen.starts_with(prefix), "{seen:?}");
    assert_eq!(message.text(), seen);
    let t = Instant::now();
    h.join();
    assert!(t.elapsed() < Duration::from_millis(100));
}
