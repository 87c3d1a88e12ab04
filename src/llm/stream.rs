//! Placeholder stream (replaced by the real streaming layer): answers every request with a
//! short text, streamed in three deltas.

use crate::cancel::{CancelSource, cancel_pair};
use crate::llm::{LlmRequest, StreamEvent};
use crate::message::{AssistantMessage, Content, StopReason};

pub const ABORTED_BEFORE_RESPONSE: &str = "Request was aborted.";
pub const ABORTED_MID_STREAM: &str = "This operation was aborted";

pub type Sink = Box<dyn FnMut(StreamEvent) -> bool + Send>;

pub struct StreamHandle {
    cancel: CancelSource,
}

impl StreamHandle {
    pub fn cancel(&mut self) {
        self.cancel.cancel();
    }
}

pub fn spawn(req: LlmRequest, mut sink: Sink) -> StreamHandle {
    let (source, token) = cancel_pair();
    std::thread::spawn(move || {
        let partial = AssistantMessage::empty(&req.model.api, &req.model.provider, &req.model.id);
        sink(StreamEvent::Start {
            partial: partial.clone(),
        });
        sink(StreamEvent::TextStart { index: 0 });
        let parts = ["Hello", " from", " pith."];
        for p in parts {
            std::thread::sleep(std::time::Duration::from_millis(20));
            if token.is_cancelled() {
                return;
            }
            sink(StreamEvent::TextDelta {
                index: 0,
                delta: p.to_string(),
            });
        }
        sink(StreamEvent::TextEnd {
            index: 0,
            content: parts.concat(),
            signature: None,
        });
        let mut done = partial;
        done.content.push(Content::text(parts.concat()));
        done.stop_reason = StopReason::Stop;
        sink(StreamEvent::Done { message: done });
    });
    StreamHandle { cancel: source }
}
