//! The AWS event stream binary framing (`application/vnd.amazon.eventstream`), as Bedrock's
//! `ConverseStream` answers: a pure, incremental decoder with no I/O.
//!
//! A message is `total length (u32 BE) | headers length (u32 BE) | prelude CRC32 | headers |
//! payload | message CRC32`, each CRC over everything before it. Headers are `name length (u8) |
//! name | type (u8) | value`. Bytes may arrive split anywhere; the decoder keeps at most one
//! message (bounded by [`MAX_MESSAGE`]) and checks both CRCs. A bad CRC, an impossible length or a
//! malformed header is an [`Error`]; after one, the stream is unusable and further input is
//! refused (a corrupt length would misalign everything after it).

use std::fmt;

/// Largest message accepted (the AWS SDKs' limit is 16 MiB as well).
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// Prelude (12 bytes) plus the trailing CRC.
const MIN_MESSAGE: usize = 16;

/// A header value (the types of the format; pith only reads strings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderValue {
    Bool(bool),
    Byte(i8),
    Short(i16),
    Int(i32),
    Long(i64),
    Bytes(Vec<u8>),
    String(String),
    Timestamp(i64),
    Uuid([u8; 16]),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub headers: Vec<(String, HeaderValue)>,
    pub payload: Vec<u8>,
}

impl Message {
    /// A string header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|(k, v)| match v {
            HeaderValue::String(s) if k == name => Some(s.as_str()),
            _ => None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    PreludeCrc {
        expected: u32,
        computed: u32,
    },
    MessageCrc {
        expected: u32,
        computed: u32,
    },
    /// The prelude announces a length that cannot be right.
    BadLength {
        total: u32,
        headers: u32,
    },
    /// A header runs past its section or has an unknown type.
    BadHeader(String),
    /// The body ended inside a message.
    Truncated {
        missing: usize,
    },
    /// Input after an earlier error.
    Poisoned,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::PreludeCrc { expected, computed } => write!(
                f,
                "event stream prelude checksum mismatch (expected {expected:#010x}, computed {computed:#010x})"
            ),
            Error::MessageCrc { expected, computed } => write!(
                f,
                "event stream message checksum mismatch (expected {expected:#010x}, computed {computed:#010x})"
            ),
            Error::BadLength { total, headers } => write!(
                f,
                "event stream message with impossible lengths (total {total}, headers {headers})"
            ),
            Error::BadHeader(m) => write!(f, "malformed event stream header: {m}"),
            Error::Truncated { missing } => {
                write!(
                    f,
                    "event stream ended inside a message ({missing} bytes missing)"
                )
            }
            Error::Poisoned => f.write_str("event stream already failed"),
        }
    }
}

impl std::error::Error for Error {}

/// Incremental decoder: [`Decoder::feed`] bytes as they come, get whole messages.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    pos: usize,
    failed: bool,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Append `bytes`; every message they complete is pushed to `out` (in order, also when an
    /// error follows them).
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Message>) -> Result<(), Error> {
        if self.failed {
            return Err(Error::Poisoned);
        }
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
        let result = self.drain(out);
        if result.is_err() {
            self.failed = true;
            self.buf = Vec::new();
            self.pos = 0;
        } else if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            // Keep the buffer from growing: drop what was consumed once it is most of it.
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        result
    }

    /// The input ended: an error if it ended inside a message.
    pub fn finish(&self) -> Result<(), Error> {
        if self.failed {
            return Err(Error::Poisoned);
        }
        let pending = self.buf.len() - self.pos;
        if pending == 0 {
            return Ok(());
        }
        let need = if pending >= 4 {
            be32(&self.buf[self.pos..]) as usize
        } else {
            MIN_MESSAGE
        };
        Err(Error::Truncated {
            missing: need.saturating_sub(pending).max(1),
        })
    }

    fn drain(&mut self, out: &mut Vec<Message>) -> Result<(), Error> {
        loop {
            let rest = &self.buf[self.pos..];
            if rest.len() < 12 {
                return Ok(());
            }
            let total = be32(rest);
            let headers_len = be32(&rest[4..]);
            let expected = be32(&rest[8..]);
            let computed = crc32(&rest[..8]);
            if expected != computed {
                return Err(Error::PreludeCrc { expected, computed });
            }
            let (t, h) = (total as usize, headers_len as usize);
            if !(MIN_MESSAGE..=MAX_MESSAGE).contains(&t) || h > t - MIN_MESSAGE {
                return Err(Error::BadLength {
                    total,
                    headers: headers_len,
                });
            }
            if rest.len() < t {
                return Ok(());
            }
            let expected = be32(&rest[t - 4..]);
            let computed = crc32(&rest[..t - 4]);
            if expected != computed {
                return Err(Error::MessageCrc { expected, computed });
            }
            let headers = parse_headers(&rest[12..12 + h])?;
            let payload = rest[12 + h..t - 4].to_vec();
            out.push(Message { headers, payload });
            self.pos += t;
        }
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn parse_headers(mut b: &[u8]) -> Result<Vec<(String, HeaderValue)>, Error> {
    let mut out = Vec::new();
    let short = |what: &str| Error::BadHeader(format!("{what} runs past the header section"));
    while !b.is_empty() {
        let n = b[0] as usize;
        let name = b.get(1..1 + n).ok_or_else(|| short("a name"))?;
        let name = std::str::from_utf8(name)
            .map_err(|_| Error::BadHeader("a name is not UTF-8".into()))?
            .to_string();
        b = &b[1 + n..];
        let (&kind, rest) = b.split_first().ok_or_else(|| short("a type"))?;
        b = rest;
        let mut take = |len: usize| -> Result<&[u8], Error> {
            let (v, rest) = (b.get(..len).ok_or_else(|| short(&name))?, &b[len..]);
            b = rest;
            Ok(v)
        };
        let value = match kind {
            0 => HeaderValue::Bool(true),
            1 => HeaderValue::Bool(false),
            2 => HeaderValue::Byte(take(1)?[0] as i8),
            3 => {
                let v = take(2)?;
                HeaderValue::Short(i16::from_be_bytes([v[0], v[1]]))
            }
            4 => HeaderValue::Int(be32(take(4)?) as i32),
            5 | 8 => {
                let v = take(8)?;
                let n = i64::from_be_bytes([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]]);
                if kind == 5 {
                    HeaderValue::Long(n)
                } else {
                    HeaderValue::Timestamp(n)
                }
            }
            6 | 7 => {
                let l = take(2)?;
                let len = u16::from_be_bytes([l[0], l[1]]) as usize;
                let v = take(len)?.to_vec();
                if kind == 6 {
                    HeaderValue::Bytes(v)
                } else {
                    HeaderValue::String(String::from_utf8(v).map_err(|_| {
                        Error::BadHeader(format!("the value of {name} is not UTF-8"))
                    })?)
                }
            }
            9 => {
                let mut u = [0u8; 16];
                u.copy_from_slice(take(16)?);
                HeaderValue::Uuid(u)
            }
            other => return Err(Error::BadHeader(format!("unknown type {other} of {name}"))),
        };
        out.push((name, value));
    }
    Ok(out)
}

/// CRC-32 (IEEE 802.3, the one zlib computes), table-driven.
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c = CRC_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

const CRC_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// Encode one message with string headers (tests, fakes).
pub fn encode(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    for (k, v) in headers {
        h.push(k.len() as u8);
        h.extend_from_slice(k.as_bytes());
        h.push(7);
        h.extend_from_slice(&(v.len() as u16).to_be_bytes());
        h.extend_from_slice(v.as_bytes());
    }
    let total = 12 + h.len() + payload.len() + 4;
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_be_bytes());
    m.extend_from_slice(&(h.len() as u32).to_be_bytes());
    let pc = crc32(&m);
    m.extend_from_slice(&pc.to_be_bytes());
    m.extend_from_slice(&h);
    m.extend_from_slice(payload);
    let mc = crc32(&m);
    m.extend_from_slice(&mc.to_be_bytes());
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_values() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }

    /// The AWS event stream test suite's `int32_header` vector (total 45, headers 16).
    #[test]
    fn decodes_the_aws_vector_with_an_int_header() {
        let bytes: [u8; 45] = [
            0, 0, 0, 45, 0, 0, 0, 16, 65, 196, 36, 184, 10, 101, 118, 101, 110, 116, 45, 116, 121,
            112, 101, 4, 0, 0, 160, 12, 123, 39, 102, 111, 111, 39, 58, 39, 98, 97, 114, 39, 125,
            54, 244, 128, 160,
        ];
        let mut d = Decoder::new();
        let mut out = Vec::new();
        d.feed(&bytes, &mut out).unwrap();
        assert_eq!(
            out,
            vec![Message {
                headers: vec![("event-type".into(), HeaderValue::Int(40972))],
                payload: b"{'foo':'bar'}".to_vec(),
            }]
        );
        d.finish().unwrap();
    }

    /// The suite's `payload_one_str_header` vector.
    #[test]
    fn decodes_the_aws_vector_with_a_string_header() {
        let bytes: [u8; 61] = [
            0, 0, 0, 61, 0, 0, 0, 32, 7, 253, 131, 150, 12, 99, 111, 110, 116, 101, 110, 116, 45,
            116, 121, 112, 101, 7, 0, 16, 97, 112, 112, 108, 105, 99, 97, 116, 105, 111, 110, 47,
            106, 115, 111, 110, 123, 39, 102, 111, 111, 39, 58, 39, 98, 97, 114, 39, 125, 141, 156,
            8, 177,
        ];
        let mut out = Vec::new();
        Decoder::new().feed(&bytes, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].header("content-type"), Some("application/json"));
        assert_eq!(out[0].payload, b"{'foo':'bar'}");
        // The same bytes with our encoder.
        assert_eq!(
            encode(&[("content-type", "application/json")], b"{'foo':'bar'}"),
            bytes.to_vec()
        );
    }

    /// The suite's `empty_message` vector: no headers, no payload.
    #[test]
    fn decodes_the_empty_message_vector() {
        let bytes = [
            0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x05, 0xc2, 0x48, 0xeb, 0x7d, 0x98,
            0xc8, 0xff,
        ];
        let mut out = Vec::new();
        Decoder::new().feed(&bytes, &mut out).unwrap();
        assert_eq!(
            out,
            vec![Message {
                headers: vec![],
                payload: vec![]
            }]
        );
    }

    #[test]
    fn byte_at_a_time_gives_the_same_messages() {
        let mut stream = encode(
            &[(":event-type", "messageStart"), (":message-type", "event")],
            br#"{"role":"assistant"}"#,
        );
        stream.extend(encode(&[(":event-type", "x")], "héllo 😀".as_bytes()));
        let mut whole = Vec::new();
        Decoder::new().feed(&stream, &mut whole).unwrap();
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0].header(":event-type"), Some("messageStart"));
        let mut d = Decoder::new();
        let mut bytewise = Vec::new();
        for b in &stream {
            d.feed(std::slice::from_ref(b), &mut bytewise).unwrap();
        }
        d.finish().unwrap();
        assert_eq!(bytewise, whole);
    }

    #[test]
    fn corrupt_frames_are_errors() {
        let good = encode(&[(":event-type", "a")], b"{}");
        // Flip a payload byte: message CRC.
        let mut bad = good.clone();
        let at = bad.len() - 6;
        bad[at] ^= 1;
        let err = Decoder::new().feed(&bad, &mut Vec::new()).unwrap_err();
        assert!(matches!(err, Error::MessageCrc { .. }), "{err}");
        // Flip a length byte: prelude CRC, detected before waiting for the announced length.
        let mut bad = good.clone();
        bad[1] = 0xff;
        let err = Decoder::new()
            .feed(&bad[..12], &mut Vec::new())
            .unwrap_err();
        assert!(matches!(err, Error::PreludeCrc { .. }), "{err}");
        // Consistent prelude, impossible lengths.
        let mut m = Vec::new();
        m.extend_from_slice(&8u32.to_be_bytes());
        m.extend_from_slice(&0u32.to_be_bytes());
        let c = crc32(&m);
        m.extend_from_slice(&c.to_be_bytes());
        let err = Decoder::new().feed(&m, &mut Vec::new()).unwrap_err();
        assert!(matches!(err, Error::BadLength { .. }), "{err}");
        // Truncated at the end.
        let mut d = Decoder::new();
        d.feed(&good[..good.len() - 3], &mut Vec::new()).unwrap();
        assert_eq!(d.finish(), Err(Error::Truncated { missing: 3 }));
        // A header whose value length runs past the section.
        let mut h = vec![1u8, b'a', 7, 0, 200];
        h.extend_from_slice(b"xy");
        let mut m = Vec::new();
        let total = 12 + h.len() + 4;
        m.extend_from_slice(&(total as u32).to_be_bytes());
        m.extend_from_slice(&(h.len() as u32).to_be_bytes());
        let c = crc32(&m);
        m.extend_from_slice(&c.to_be_bytes());
        m.extend_from_slice(&h);
        let c = crc32(&m);
        m.extend_from_slice(&c.to_be_bytes());
        let mut d = Decoder::new();
        let err = d.feed(&m, &mut Vec::new()).unwrap_err();
        assert!(matches!(err, Error::BadHeader(_)), "{err}");
        assert_eq!(d.feed(&good, &mut Vec::new()), Err(Error::Poisoned));
    }

    /// Deterministic pseudo-random inputs never panic (a fuzz-style smoke test; `cargo fuzz`
    /// targets can call [`Decoder::feed`] the same way).
    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let good = encode(&[(":event-type", "contentBlockDelta")], br#"{"a":1}"#);
        for round in 0..2000 {
            let mut d = Decoder::new();
            let mut out = Vec::new();
            let mut input = good.clone();
            for _ in 0..(round % 7) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x as usize) % input.len();
                input[i] = (x >> 32) as u8;
            }
            if round % 3 == 0 {
                input.truncate((x as usize) % input.len());
            }
            for piece in input.chunks(1 + (round % 5)) {
                if d.feed(piece, &mut out).is_err() {
                    break;
                }
            }
            let _ = d.finish();
        }
    }
}
