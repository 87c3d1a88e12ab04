//! Request bodies written while they are sent.
//!
//! The body of a long session's request is megabytes (12 MB for 20,000 messages), nearly all of
//! it the history written straight from the messages. Built whole before the first byte goes out
//! it was the largest allocation of a turn; instead, an API that writes its body through a
//! [`BodySink`] has it measured first (a pass that counts, for `Content-Length`), then written a
//! second time by a thread feeding the connection in chunks ([`spawn`]), so a request holds
//! about [`CHUNK`] bytes of it at a time. The same function writes both passes, and it is
//! deterministic, so the bytes are exactly those of the body built whole (tests compare them).
//!
//! Small bodies (under [`STREAM_ABOVE`]) are kept from the first pass and sent as bytes: one
//! pass, and the request on the wire exactly as before, header order included (ureq puts a
//! `Content-Length` it computes itself before `Host`, one given for a streamed body after it).

use std::io::Read;
use std::sync::Arc;

use crossbeam_channel::{Receiver, bounded};

use crate::llm::LlmRequest;

/// Writes a request body into a sink.
pub type WriteBody = fn(&LlmRequest, &mut BodySink);

/// About how much of a body is handed on at a time.
pub const CHUNK: usize = 64 * 1024;

/// Bodies up to this size are built whole and sent as bytes: one pass instead of two, for at
/// most this much memory while the request is sent (a context that makes such a body already
/// holds about twice that).
pub const STREAM_ABOVE: usize = 4 * 1024 * 1024;

/// Where a body is written: [`BodySink::buf`], handed on whenever it holds a [`CHUNK`] and the
/// writer reaches a [`BodySink::checkpoint`] (between messages of the history).
pub struct BodySink<'a> {
    pub buf: Vec<u8>,
    out: Out<'a>,
    total: u64,
}

enum Out<'a> {
    /// Keep everything (a body built whole).
    Keep,
    /// Keep everything up to `limit` bytes, then only count.
    KeepUpTo(usize),
    /// Count only.
    Count,
    /// Hand each chunk on; `false` from it: nobody takes them any more.
    Send(&'a mut dyn FnMut(Vec<u8>) -> bool),
    /// The receiver is gone: drop the rest.
    Closed,
}

impl<'a> BodySink<'a> {
    fn new(out: Out<'a>) -> BodySink<'a> {
        BodySink {
            // Grows to a chunk when the body is that large; most are a few KiB.
            buf: Vec::new(),
            out,
            total: 0,
        }
    }

    /// Between parts of the body: hand on what is buffered once it is a chunk.
    pub fn checkpoint(&mut self) {
        if self.buf.len() >= CHUNK {
            self.hand_on();
        }
    }

    fn hand_on(&mut self) {
        match &mut self.out {
            Out::Keep => {}
            Out::KeepUpTo(limit) => {
                if self.buf.len() > *limit {
                    self.out = Out::Count;
                    self.hand_on();
                }
            }
            Out::Count | Out::Closed => {
                self.total += self.buf.len() as u64;
                self.buf.clear();
            }
            Out::Send(send) => {
                let full = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK + CHUNK / 4));
                // (The next chunk is as large: its buffer is allocated at once.)
                self.total += full.len() as u64;
                if !send(full) {
                    self.out = Out::Closed;
                }
            }
        }
    }

    /// Whether what is written is only counted (nothing kept or sent): a writer may then count
    /// a part with a [`Counter`] and add it ([`BodySink::add_counted`]) instead of writing it.
    pub fn counting(&self) -> bool {
        matches!(self.out, Out::Count | Out::Closed)
    }

    /// Add `n` bytes counted elsewhere (only while [`BodySink::counting`]).
    pub fn add_counted(&mut self, n: u64) {
        self.total += n;
    }

    /// Hand on the rest: the body's whole length, and the body itself when it was kept.
    fn finish(mut self) -> (u64, Option<Vec<u8>>) {
        match self.out {
            Out::Keep => {}
            Out::KeepUpTo(_) => self.hand_on(),
            _ if !self.buf.is_empty() => self.hand_on(),
            _ => {}
        }
        match self.out {
            Out::Keep | Out::KeepUpTo(_) => {
                let kept = std::mem::take(&mut self.buf);
                (kept.len() as u64, Some(kept))
            }
            _ => (self.total, None),
        }
    }
}

/// What a body writer writes into: the bytes (a [`BodySink`], a `Vec`) or only their number (a
/// [`Counter`]: the first pass over a long body, for `Content-Length`). The writer is the same
/// function either way, so the count is the length of the bytes written.
pub trait JsonOut {
    fn extend_from_slice(&mut self, b: &[u8]);
    fn push(&mut self, b: u8);
    /// A string as a JSON literal (`json::write_str`).
    fn put_str(&mut self, s: &str);
    /// `parts` joined by `sep` as one JSON literal (`json::write_str_joined`).
    fn put_str_joined<'a>(&mut self, parts: impl IntoIterator<Item = &'a str>, sep: &str);
    /// `value` as JSON (serde_json).
    fn put<T: serde::Serialize + ?Sized>(&mut self, value: &T);
    /// Between parts of the body (a sink hands on what it holds once it is a chunk).
    fn checkpoint(&mut self) {}
}

impl JsonOut for Vec<u8> {
    fn extend_from_slice(&mut self, b: &[u8]) {
        Vec::extend_from_slice(self, b);
    }
    fn push(&mut self, b: u8) {
        Vec::push(self, b);
    }
    fn put_str(&mut self, s: &str) {
        crate::json::write_str(self, s);
    }
    fn put_str_joined<'a>(&mut self, parts: impl IntoIterator<Item = &'a str>, sep: &str) {
        crate::json::write_str_joined(self, parts, sep);
    }
    fn put<T: serde::Serialize + ?Sized>(&mut self, value: &T) {
        // Serialising borrowed data into memory cannot fail.
        let _ = serde_json::to_writer(&mut *self, value);
    }
}

impl JsonOut for BodySink<'_> {
    fn extend_from_slice(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    fn push(&mut self, b: u8) {
        self.buf.push(b);
    }
    fn put_str(&mut self, s: &str) {
        self.buf.put_str(s);
    }
    fn put_str_joined<'a>(&mut self, parts: impl IntoIterator<Item = &'a str>, sep: &str) {
        self.buf.put_str_joined(parts, sep);
    }
    fn put<T: serde::Serialize + ?Sized>(&mut self, value: &T) {
        self.buf.put(value);
    }
    fn checkpoint(&mut self) {
        BodySink::checkpoint(self);
    }
}

/// Counts what a writer would write ([`JsonOut`]): strings are measured by
/// `json::str_len`, which looks for escapes 32 bytes at a time instead of copying.
#[derive(Default)]
pub struct Counter(pub u64);

impl JsonOut for Counter {
    fn extend_from_slice(&mut self, b: &[u8]) {
        self.0 += b.len() as u64;
    }
    fn push(&mut self, _: u8) {
        self.0 += 1;
    }
    fn put_str(&mut self, s: &str) {
        self.0 += crate::json::str_len(s) as u64;
    }
    fn put_str_joined<'a>(&mut self, parts: impl IntoIterator<Item = &'a str>, sep: &str) {
        self.0 += crate::json::str_joined_len(parts, sep) as u64;
    }
    fn put<T: serde::Serialize + ?Sized>(&mut self, value: &T) {
        let _ = serde_json::to_writer(&mut *self, value);
    }
}

impl std::io::Write for Counter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The whole body in memory.
pub fn to_bytes(write: WriteBody, req: &LlmRequest) -> Vec<u8> {
    let mut sink = BodySink::new(Out::Keep);
    write(req, &mut sink);
    sink.finish().1.unwrap_or_default()
}

/// The length of the body, only counted (what [`measure`] does for a long history; tests hold
/// it to the bytes of [`to_bytes`] for every message shape).
pub fn count(write: WriteBody, req: &LlmRequest) -> u64 {
    let mut sink = BodySink::new(Out::Count);
    write(req, &mut sink);
    sink.finish().0
}

/// What the first pass over a body found.
pub enum Measured {
    /// Small: the body itself.
    Bytes(Vec<u8>),
    /// Large: only its length; it is written again while it is sent.
    Stream(u64),
}

/// The first pass: a small body kept, a large one counted. A history whose text alone is over
/// [`STREAM_ABOVE`] (`long`: [`counts_from_start`], which the caller has asked already) is
/// counted from the start (the body holds at least that text), instead of being kept up to the
/// limit first only to be dropped: a long session's turn would hold [`STREAM_ABOVE`] of body
/// (and up to twice that of buffer) for nothing.
pub fn measure(write: WriteBody, req: &LlmRequest, long: bool) -> Measured {
    let out = if long {
        Out::Count
    } else {
        Out::KeepUpTo(STREAM_ABOVE)
    };
    let mut sink = BodySink::new(out);
    write(req, &mut sink);
    match sink.finish() {
        (_, Some(bytes)) => {
            // Every request of a debug build (the test suite's) checks that the count a long
            // history gets is the length of the bytes written.
            debug_assert_eq!(count(write, req), bytes.len() as u64, "counted body length");
            Measured::Bytes(bytes)
        }
        (len, None) => Measured::Stream(len),
    }
}

/// Whether [`measure`] only counts this request's body (so it is surely streamed).
pub fn counts_from_start(req: &LlmRequest) -> bool {
    history_text_bytes(req) > STREAM_ABOVE
}

/// The bytes of text in a request's history (text and thinking blocks, plain user text), up to
/// the first message that takes them over [`STREAM_ABOVE`]: in a long session that is a third
/// of the history, and each message read is a cache miss or two. Only a hint for [`measure`]:
/// an estimate off either way changes how the body is sent, never its bytes.
fn history_text_bytes(req: &LlmRequest) -> usize {
    use crate::message::{Content, LlmMessage, UserContent};
    let blocks = |content: &[Content]| -> usize {
        content
            .iter()
            .map(|c| match c {
                Content::Text(t) => t.text.len(),
                Content::Thinking(t) => t.thinking.len(),
                _ => 0,
            })
            .sum()
    };
    let mut total = 0;
    for m in req.messages.iter() {
        total += match m {
            LlmMessage::User(u) => match &u.content {
                UserContent::Text(t) => t.len(),
                UserContent::Blocks(b) => blocks(b),
            },
            LlmMessage::Assistant(a) => blocks(&a.content),
            LlmMessage::ToolResult(t) => blocks(&t.content),
            LlmMessage::System(_) => 0,
        };
        if total > STREAM_ABOVE {
            break;
        }
    }
    total
}

/// A body being written by its own thread, read in chunks (what the HTTP client sends).
pub struct Streamed {
    rx: Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    pos: usize,
}

/// Start writing the body of `req` on a thread; read it from the result. The thread stops when
/// the body is written or the reader is dropped.
pub fn spawn(write: WriteBody, req: Arc<LlmRequest>) -> std::io::Result<Streamed> {
    // One chunk waiting while the next is written: the connection always has something to send.
    let (tx, rx) = bounded::<Vec<u8>>(1);
    std::thread::Builder::new()
        .name("llm-body".into())
        .stack_size(crate::THREAD_STACK)
        .spawn(move || {
            let mut send = |chunk: Vec<u8>| tx.send(chunk).is_ok();
            let mut sink = BodySink::new(Out::Send(&mut send));
            write(&req, &mut sink);
            sink.finish();
        })?;
    Ok(Streamed {
        rx,
        chunk: Vec::new(),
        pos: 0,
    })
}

impl Read for Streamed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.chunk.len() {
            match self.rx.recv() {
                Ok(c) => {
                    self.chunk = c;
                    self.pos = 0;
                }
                // The writer is done (or gone): the end of the body.
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.pos);
        buf[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(req: &LlmRequest, sink: &mut BodySink) {
        sink.buf.push(b'[');
        for i in 0..req.max_tokens.unwrap_or(0) {
            if i > 0 {
                sink.buf.push(b',');
            }
            sink.buf.extend_from_slice(format!("{i:07}").as_bytes());
            sink.checkpoint();
        }
        sink.buf.push(b']');
    }

    fn request(n: u64) -> LlmRequest {
        LlmRequest {
            model: crate::llm::faux::model(),
            api_key: None,
            system_prompt: String::new(),
            messages: Default::default(),
            tools: Vec::new(),
            thinking: crate::message::ThinkingLevel::Off,
            session_id: None,
            max_tokens: Some(n),
            timeouts: Default::default(),
            faux_script: None,
            sdk: Default::default(),
            no_cache: false,
            tool_arguments_error: false,
            extra: Default::default(),
        }
    }

    #[test]
    fn streamed_bodies_are_the_bytes_of_the_whole_body() {
        for n in [0, 1, 1000, 600_000] {
            let req = request(n);
            let whole = to_bytes(numbers, &req);
            match measure(numbers, &req, counts_from_start(&req)) {
                Measured::Bytes(b) => {
                    assert!(whole.len() <= STREAM_ABOVE);
                    assert_eq!(b, whole);
                }
                Measured::Stream(len) => {
                    assert!(whole.len() > STREAM_ABOVE);
                    assert_eq!(len, whole.len() as u64);
                    let mut sent = Vec::new();
                    spawn(numbers, Arc::new(req))
                        .unwrap()
                        .read_to_end(&mut sent)
                        .unwrap();
                    assert_eq!(sent, whole);
                }
            }
        }
    }

    #[test]
    fn a_dropped_reader_stops_the_writer() {
        let req = Arc::new(request(2_000_000));
        let mut r = spawn(numbers, Arc::clone(&req)).unwrap();
        let mut first = [0u8; 10];
        r.read_exact(&mut first).unwrap();
        drop(r);
        // The writer lets go of the request once it notices.
        for _ in 0..1000 {
            if Arc::strong_count(&req) == 1 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("the writer thread still holds the request");
    }
}
