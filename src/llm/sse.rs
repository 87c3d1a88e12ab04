//! An incremental Server-Sent Events parser (the `text/event-stream` format of the WHATWG HTML
//! spec), with no I/O: bytes go in as they arrive from the socket, complete events come out.
//!
//! Providers stream their answers as SSE. Reads can split the stream anywhere (inside a line,
//! between `\r` and `\n`, inside a UTF-8 code point), so the parser buffers raw bytes and only
//! decodes a line once its terminator has been seen. Each byte is scanned once; the line buffer
//! is reused. A single line or event larger than [`MAX_EVENT_BYTES`] is an error, so a broken or
//! hostile stream cannot make us buffer without bound.

use std::fmt;

/// Largest accepted line, and largest accepted event (sum of its `data` lines).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event. `event` is `None` when the stream gave no `event:` field (the spec's
/// default type `message`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
    pub id: Option<String>,
    pub retry: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseError {
    /// A line or an event exceeded [`MAX_EVENT_BYTES`].
    TooLarge,
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::TooLarge => write!(f, "SSE event larger than {MAX_EVENT_BYTES} bytes"),
        }
    }
}

impl std::error::Error for SseError {}

#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a `\n` at the start of the next one belongs to it.
    skip_lf: bool,
    /// Still at the very start of the stream (a UTF-8 BOM may follow).
    at_start: bool,
    /// Partially read BOM bytes at the start of the stream.
    bom_seen: usize,
    /// The event being assembled.
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
    retry: Option<u64>,
}

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

impl SseParser {
    pub fn new() -> SseParser {
        SseParser {
            at_start: true,
            ..Default::default()
        }
    }

    /// Feed the next bytes of the stream; complete events are appended to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.at_start {
            bytes = self.strip_bom(bytes);
            if self.at_start {
                return Ok(());
            }
        }
        while !bytes.is_empty() {
            if self.skip_lf {
                self.skip_lf = false;
                if bytes[0] == b'\n' {
                    bytes = &bytes[1..];
                    continue;
                }
            }
            match bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(pos) => {
                    self.push_line_bytes(&bytes[..pos])?;
                    if bytes[pos] == b'\r' {
                        if pos + 1 < bytes.len() {
                            if bytes[pos + 1] == b'\n' {
                                bytes = &bytes[pos + 2..];
                            } else {
                                bytes = &bytes[pos + 1..];
                            }
                        } else {
                            self.skip_lf = true;
                            bytes = &[];
                        }
                    } else {
                        bytes = &bytes[pos + 1..];
                    }
                    self.end_line(out)?;
                }
                None => {
                    self.push_line_bytes(bytes)?;
                    bytes = &[];
                }
            }
        }
        Ok(())
    }

    /// The stream ended. A final event without its terminating blank line is discarded, as the
    /// spec requires; returns whether such an incomplete event (or line) was pending.
    pub fn finish(&mut self) -> bool {
        let pending = !self.line.is_empty() || self.has_data || self.event.is_some();
        self.line.clear();
        self.reset_event();
        pending
    }

    /// Consume (part of) a leading BOM. Leaves `at_start` set while the input could still be a
    /// BOM prefix.
    fn strip_bom<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        let mut i = 0;
        while self.bom_seen < BOM.len() && i < bytes.len() {
            if bytes[i] != BOM[self.bom_seen] {
                // Not a BOM after all: replay the bytes taken so far as ordinary input.
                self.at_start = false;
                let seen = self.bom_seen;
                self.bom_seen = BOM.len();
                self.line.extend_from_slice(&BOM[..seen]);
                return &bytes[i..];
            }
            self.bom_seen += 1;
            i += 1;
        }
        if self.bom_seen == BOM.len() {
            self.at_start = false;
        }
        &bytes[i..]
    }

    fn push_line_bytes(&mut self, b: &[u8]) -> Result<(), SseError> {
        if self.line.len() + b.len() > MAX_EVENT_BYTES {
            self.line.clear();
            self.reset_event();
            return Err(SseError::TooLarge);
        }
        self.line.extend_from_slice(b);
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        let line = std::mem::take(&mut self.line);
        let result = self.process_line(&line);
        // Give the allocation back for the next line.
        self.line = line;
        self.line.clear();
        result
    }

    fn process_line(&mut self, line: &[u8]) -> Result<(), SseError> {
        if line[0] == b':' {
            return Ok(());
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let mut value = &line[colon + 1..];
                if value.first() == Some(&b' ') {
                    value = &value[1..];
                }
                (&line[..colon], value)
            }
            None => (line, &[][..]),
        };
        let value = String::from_utf8_lossy(value);
        match name {
            b"data" => {
                if self.data.len() + value.len() + 1 > MAX_EVENT_BYTES {
                    self.reset_event();
                    return Err(SseError::TooLarge);
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"event" => self.event = Some(value.into_owned()),
            b"id" if !value.contains('\0') => self.id = Some(value.into_owned()),
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if !self.has_data {
            // The spec: an event without data is not dispatched (its type is reset).
            self.event = None;
            return;
        }
        out.push(SseEvent {
            event: self.event.take(),
            data: std::mem::take(&mut self.data),
            id: self.id.clone(),
            retry: self.retry.take(),
        });
        self.has_data = false;
    }

    fn reset_event(&mut self) {
        self.event = None;
        self.data.clear();
        self.has_data = false;
        self.retry = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out).unwrap();
        }
        p.finish();
        out
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_string),
            data: data.to_string(),
            id: None,
            retry: None,
        }
    }

    #[test]
    fn lf_crlf_and_cr_line_ends() {
        let want = vec![ev(Some("a"), "1"), ev(Some("b"), "2"), ev(Some("c"), "3")];
        assert_eq!(
            parse_chunks(&[
                b"event: a\ndata: 1\n\nevent: b\r\ndata: 2\r\n\r\nevent: c\rdata: 3\r\r"
            ]),
            want
        );
    }

    #[test]
    fn cr_at_chunk_end_then_lf_is_one_line_end() {
        let got = parse_chunks(&[b"data: x\r", b"\ndata: y\r", b"\n\r", b"\n"]);
        assert_eq!(got, vec![ev(None, "x\ny")]);
    }

    #[test]
    fn lone_cr_at_chunk_end_followed_by_text() {
        let got = parse_chunks(&[b"data: x\r", b"data: y\r", b"\r"]);
        assert_eq!(got, vec![ev(None, "x\ny")]);
    }

    #[test]
    fn leading_bom_is_skipped_even_split() {
        assert_eq!(
            parse_chunks(&[b"\xEF\xBB\xBFdata: a\n\n"]),
            vec![ev(None, "a")]
        );
        assert_eq!(
            parse_chunks(&[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"]),
            vec![ev(None, "a")]
        );
        // Only one BOM is stripped, and only at the start.
        assert_eq!(
            parse_chunks(&[b"data: \xEF\xBB\xBFa\n\n"]),
            vec![ev(None, "\u{FEFF}a")]
        );
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        let got = parse_chunks(&[b": ping\nfoo: bar\ndata: a\n:x\n\n"]);
        assert_eq!(got, vec![ev(None, "a")]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newline() {
        assert_eq!(
            parse_chunks(&[b"data: a\ndata:b\ndata:  c\ndata\n\n"]),
            vec![ev(None, "a\nb\n c\n")]
        );
    }

    #[test]
    fn id_and_retry() {
        let got = parse_chunks(&[b"id: 7\nretry: 1500\ndata: a\n\nretry: x\ndata: b\n\n"]);
        assert_eq!(
            got,
            vec![
                SseEvent {
                    event: None,
                    data: "a".into(),
                    id: Some("7".into()),
                    retry: Some(1500)
                },
                SseEvent {
                    event: None,
                    data: "b".into(),
                    id: Some("7".into()),
                    retry: None
                },
            ]
        );
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        assert_eq!(
            parse_chunks(&[b"event: x\n\ndata: y\n\n"]),
            vec![ev(None, "y")]
        );
    }

    #[test]
    fn split_mid_codepoint() {
        let s = "data: h\u{1F600}\u{4E2D}\u{2028}!\n\n".as_bytes();
        for cut in 0..s.len() {
            assert_eq!(
                parse_chunks(&[&s[..cut], &s[cut..]]),
                vec![ev(None, "h\u{1F600}\u{4E2D}\u{2028}!")]
            );
        }
    }

    #[test]
    fn unterminated_final_event_is_discarded() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.feed(b"data: a\n\ndata: b\n", &mut out).unwrap();
        assert!(p.finish());
        assert_eq!(out, vec![ev(None, "a")]);
        let mut p = SseParser::new();
        p.feed(b"data: a\n\n", &mut out).unwrap();
        assert!(!p.finish());
    }

    #[test]
    fn oversized_line_is_an_error() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        let block = vec![b'x'; 1024 * 1024];
        p.feed(b"data: ", &mut out).unwrap();
        let mut err = None;
        for _ in 0..20 {
            if let Err(e) = p.feed(&block, &mut out) {
                err = Some(e);
                break;
            }
        }
        assert_eq!(err, Some(SseError::TooLarge));
        assert!(out.is_empty());
    }

    #[test]
    fn oversized_event_from_many_lines_is_an_error() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        let mut line = b"data: ".to_vec();
        line.extend(std::iter::repeat_n(b'y', 1024 * 1024));
        line.push(b'\n');
        let mut failed = false;
        for _ in 0..20 {
            if p.feed(&line, &mut out).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed);
    }

    /// A tiny deterministic generator (xorshift) so the test needs no external crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn any_chunking_gives_identical_events() {
        let fixture = "\u{FEFF}: comment\r\nevent: message_start\r\ndata: {\"a\":\"\u{1F600}\"}\r\n\r\n\
                       event: delta\rdata: line1\rdata: \u{4E2D}\u{6587}\u{2028}\r\rid: 3\nretry: 10\n\
                       data:x\n\ndata: tail\n\n";
        let bytes = fixture.as_bytes();
        let whole = parse_chunks(&[bytes]);
        assert_eq!(whole.len(), 4);
        assert_eq!(whole[1].data, "line1\n\u{4E2D}\u{6587}\u{2028}");
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..500 {
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                let n = 1 + (rng.next() % 7) as usize;
                let end = (i + n).min(bytes.len());
                chunks.push(&bytes[i..end]);
                i = end;
            }
            assert_eq!(parse_chunks(&chunks), whole);
        }
    }
}
