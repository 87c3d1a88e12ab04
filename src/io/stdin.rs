//! The stdin reader thread: bytes → lines ([`crate::rpc::frame`]) → JSON values, sent to the state
//! machine. Parsing happens here so a large command never stalls the machine. The channel is
//! bounded: a host that writes faster than pith handles commands is slowed down by the pipe
//! instead of growing pith's memory. End of input is a message too.

use std::io::Read;

use crossbeam_channel::Sender;
use serde_json::Value;

use crate::rpc::frame::{Frame, LineSplitter, MAX_LINE_BYTES};

#[derive(Debug)]
pub enum Input {
    /// A line that parsed as JSON (any JSON value; the machine checks it is a command object).
    Json(Value),
    /// A line that is not JSON; the text is the reason.
    Invalid(String),
    /// A line longer than the cap; it was skipped without being buffered.
    Oversized { bytes: usize },
    /// stdin reached end of file (or failed).
    Eof,
}

/// The reason text for a line that does not parse. Blank lines get the reference's wording.
pub fn parse_line(line: &[u8]) -> Input {
    if line.iter().all(|b| b.is_ascii_whitespace()) {
        return Input::Invalid("Unexpected end of JSON input".to_string());
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(v) => Input::Json(v),
        Err(e) => Input::Invalid(e.to_string()),
    }
}

pub fn spawn(tx: Sender<Input>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("stdin".into())
        .stack_size(crate::THREAD_STACK)
        .spawn(move || run(std::io::stdin().lock(), MAX_LINE_BYTES, &tx))
}

/// The reader loop, generic over the source so tests can drive it.
pub fn run(mut src: impl Read, cap: usize, tx: &Sender<Input>) {
    let mut splitter = LineSplitter::new(cap);
    let mut buf = vec![0u8; 64 * 1024];
    let mut frames = Vec::new();
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("pith: reading stdin failed: {e}");
                break;
            }
        };
        splitter.feed(&buf[..n], &mut frames);
        if !forward(&mut frames, tx) {
            return;
        }
    }
    splitter.finish(&mut frames);
    if forward(&mut frames, tx) {
        let _ = tx.send(Input::Eof);
    }
}

fn forward(frames: &mut Vec<Frame>, tx: &Sender<Input>) -> bool {
    for frame in frames.drain(..) {
        let input = match frame {
            Frame::Line(line) => parse_line(&line),
            Frame::Oversized { bytes } => Input::Oversized { bytes },
        };
        if tx.send(input).is_err() {
            return false;
        }
    }
    true
}
