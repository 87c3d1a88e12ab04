//! Amazon Web Services plumbing for the Bedrock API: credentials, request signing and the binary
//! event stream framing. Each is a pure core with unit tests; `bedrock.rs` uses them.

pub mod credentials;
pub mod eventstream;
pub mod sigv4;

use crate::llm::sse::SseEvent;

/// Frames for the decoder: each event stream message becomes an [`SseEvent`] whose `event` is
/// its `:event-type` (`exception:<type>` for an exception, `error:<code>` for an error message)
/// and whose `data` is its payload (the error message for `error`).
#[derive(Debug, Default)]
pub struct Framer {
    decoder: eventstream::Decoder,
    messages: Vec<eventstream::Message>,
}

impl Framer {
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), String> {
        let result = self.decoder.feed(bytes, &mut self.messages);
        for m in self.messages.drain(..) {
            out.push(to_event(&m));
        }
        result.map_err(|e| e.to_string())
    }

    pub fn finish(&mut self) -> Result<(), String> {
        self.decoder.finish().map_err(|e| e.to_string())
    }
}

fn to_event(m: &eventstream::Message) -> SseEvent {
    let payload = String::from_utf8_lossy(&m.payload).into_owned();
    let (event, data) = match m.header(":message-type") {
        Some("exception") => (
            format!("exception:{}", m.header(":exception-type").unwrap_or("")),
            payload,
        ),
        Some("error") => (
            format!("error:{}", m.header(":error-code").unwrap_or("")),
            m.header(":error-message").unwrap_or("").to_string(),
        ),
        _ => (m.header(":event-type").unwrap_or("").to_string(), payload),
    };
    SseEvent {
        event: Some(event),
        data,
        id: None,
        retry: None,
    }
}
