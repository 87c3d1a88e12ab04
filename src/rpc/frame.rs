//! Splitting the stdin byte stream into command lines.
//!
//! Pure (no I/O) so that every framing rule is unit-tested: records end at `\n` only; one trailing
//! `\r` is stripped (CRLF clients work); U+2028/U+2029 are ordinary characters inside a record; a
//! final record without `\n` is still delivered at end of input. A record longer than the cap is
//! not buffered: its bytes are dropped as they arrive and a single [`Frame::Oversized`] reports it,
//! so one bad line can never make pith allocate more than the cap.

/// Default cap for one command line (64 MiB: room for several large base64 images).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// One record, without its `\n` and without one trailing `\r`.
    Line(Vec<u8>),
    /// A record exceeded the cap; `bytes` is how long it was.
    Oversized { bytes: usize },
}

pub struct LineSplitter {
    buf: Vec<u8>,
    cap: usize,
    /// `Some(n)`: inside an oversized record, `n` bytes seen so far; its bytes are discarded.
    discarding: Option<usize>,
}

impl LineSplitter {
    pub fn new(cap: usize) -> LineSplitter {
        LineSplitter {
            buf: Vec::new(),
            cap,
            discarding: None,
        }
    }

    /// Feed the next chunk; complete records are appended to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Frame>) {
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|&b| b == b'\n');
            let (part, rest, complete) = match newline {
                Some(i) => (&chunk[..i], &chunk[i + 1..], true),
                None => (chunk, &chunk[chunk.len()..], false),
            };
            chunk = rest;
            if let Some(seen) = self.discarding.as_mut() {
                *seen += part.len();
                if complete {
                    out.push(Frame::Oversized { bytes: *seen });
                    self.discarding = None;
                }
                continue;
            }
            if self.buf.len() + part.len() > self.cap {
                let seen = self.buf.len() + part.len();
                self.buf = Vec::new();
                if complete {
                    out.push(Frame::Oversized { bytes: seen });
                } else {
                    self.discarding = Some(seen);
                }
                continue;
            }
            if complete {
                let mut line = if self.buf.is_empty() {
                    part.to_vec()
                } else {
                    let mut l = std::mem::take(&mut self.buf);
                    l.extend_from_slice(part);
                    l
                };
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                out.push(Frame::Line(line));
            } else {
                self.buf.extend_from_slice(part);
            }
        }
    }

    /// End of input: a non-empty unterminated record is delivered as a last line.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        if let Some(seen) = self.discarding.take() {
            out.push(Frame::Oversized { bytes: seen });
        } else if !self.buf.is_empty() {
            let mut line = std::mem::take(&mut self.buf);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            out.push(Frame::Line(line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]], cap: usize) -> Vec<Frame> {
        let mut s = LineSplitter::new(cap);
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, &mut out);
        }
        s.finish(&mut out);
        out
    }

    fn line(s: &str) -> Frame {
        Frame::Line(s.as_bytes().to_vec())
    }

    #[test]
    fn splits_on_lf_only_and_strips_one_cr() {
        assert_eq!(
            split(&[b"a\r\nb\n\r\r\n"], 100),
            vec![line("a"), line("b"), line("\r")]
        );
    }

    #[test]
    fn keeps_unicode_separators_inside_records() {
        let s = "{\"m\":\"x\u{2028}y\u{2029}\"}\n";
        assert_eq!(
            split(&[s.as_bytes()], 100),
            vec![line("{\"m\":\"x\u{2028}y\u{2029}\"}")]
        );
    }

    #[test]
    fn record_split_across_chunks_and_last_line_without_newline() {
        assert_eq!(
            split(&[b"ab", b"c\nde", b"f"], 100),
            vec![line("abc"), line("def")]
        );
    }

    #[test]
    fn blank_lines_are_records() {
        assert_eq!(split(&[b"\n\n"], 100), vec![line(""), line("")]);
    }

    #[test]
    fn oversized_record_is_reported_once_and_skipped() {
        let out = split(&[b"12345", b"6789", b"0\nok\n"], 8);
        assert_eq!(out, vec![Frame::Oversized { bytes: 10 }, line("ok")]);
        let out = split(&[b"123456789\nok"], 8);
        assert_eq!(out, vec![Frame::Oversized { bytes: 9 }, line("ok")]);
        let out = split(&[b"123456789"], 8);
        assert_eq!(out, vec![Frame::Oversized { bytes: 9 }]);
    }
}
