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
///
/// Read as pi reads it: bytes that are not UTF-8 become U+FFFD (node decodes stdin as UTF-8 that
/// way), so a stray byte in a string does not lose the command or its `id`; a number beyond the
/// range of a double (`1e400`) is `Infinity` to JavaScript, which its `JSON.stringify` writes as
/// `null`, so it becomes `null` here (an `id` of `1e400` is echoed as `"id":null`, as pi echoes
/// it).
pub fn parse_line(line: &[u8]) -> Input {
    if line.iter().all(|b| b.is_ascii_whitespace()) {
        return Input::Invalid("Unexpected end of JSON input".to_string());
    }
    let line: std::borrow::Cow<[u8]> = match std::str::from_utf8(line) {
        Ok(_) => line.into(),
        Err(_) => String::from_utf8_lossy(line)
            .into_owned()
            .into_bytes()
            .into(),
    };
    match serde_json::from_slice::<Value>(&line) {
        Ok(v) => Input::Json(v),
        Err(e) if e.to_string().starts_with("number out of range") => {
            match serde_json::from_slice::<Value>(&overflowing_numbers_as_null(&line)) {
                Ok(v) => Input::Json(v),
                Err(e) => Input::Invalid(e.to_string()),
            }
        }
        Err(e) => Input::Invalid(e.to_string()),
    }
}

/// `line` with every number outside strings that overflows a double replaced by `null`.
fn overflowing_numbers_as_null(line: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    let mut i = 0;
    let mut in_string = false;
    while i < line.len() {
        let b = line[i];
        if in_string {
            out.push(b);
            match b {
                b'\\' if i + 1 < line.len() => {
                    out.push(line[i + 1]);
                    i += 1;
                }
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            out.push(b);
            i += 1;
            continue;
        }
        if b == b'-' || b.is_ascii_digit() {
            let start = i;
            while i < line.len()
                && matches!(line[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
            {
                i += 1;
            }
            let token = &line[start..i];
            let infinite = std::str::from_utf8(token)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .is_some_and(f64::is_infinite);
            out.extend_from_slice(if infinite { b"null" } else { token });
            continue;
        }
        out.push(b);
        i += 1;
    }
    out
}

/// The read buffer at start, and what it grows to.
const FIRST_READ: usize = 8 * 1024;
const READ_CHUNK: usize = 64 * 1024;

pub fn spawn(tx: Sender<Input>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("stdin".into())
        .stack_size(crate::THREAD_STACK)
        .spawn(move || run(std::io::stdin().lock(), MAX_LINE_BYTES, &tx))
}

/// The reader loop, generic over the source so tests can drive it.
pub fn run(mut src: impl Read, cap: usize, tx: &Sender<Input>) {
    let mut splitter = LineSplitter::new(cap);
    // Commands are small: the buffer starts at 8 KiB (what `Stdin` buffers itself; a read that
    // size bypasses its copy) and grows to 64 KiB once a read fills it (a large command, a
    // burst). 64 KiB zeroed up front were 16 page faults of every cold start.
    let mut buf = vec![0u8; FIRST_READ];
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
        if n == buf.len() && buf.len() < READ_CHUNK {
            buf.resize(READ_CHUNK, 0);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn json(line: &[u8]) -> Value {
        match parse_line(line) {
            Input::Json(v) => v,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn read_as_pi_reads_it() {
        assert_eq!(
            json(b"{\"id\":\"x\xffy\",\"type\":\"abort\"}"),
            serde_json::json!({"id":"x\u{fffd}y","type":"abort"})
        );
        assert_eq!(
            json(br#"{"id":1e400,"type":"get_state","s":"1e400 \" -1e999","n":[-1e400,2.5e3]}"#),
            serde_json::json!({"id":null,"type":"get_state","s":"1e400 \" -1e999","n":[null,2500.0]})
        );
        match parse_line(b"{\"id\":1e400,\"type\":}") {
            Input::Invalid(e) => assert!(e.starts_with("expected value"), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}
