//! Fast decoding of one session line (pure core, no I/O).
//!
//! Loading a long session used to parse every line into a `serde_json::Value` tree and serialise
//! it back to get the `JSON.stringify` form of the line: two full passes and a tree of small
//! allocations per entry, most of the resume time of a 20,000-entry session. Here a line is read
//! once into a borrowed [`Head`] holding only the fields the loader needs (everything else is
//! skipped, still validated by serde_json), and it is kept verbatim when it already is in
//! `JSON.stringify` form ([`is_canonical`]) — which every line written by pi or pith is. Anything
//! unusual (duplicate keys, odd whitespace or number forms, non-string ids) makes the caller fall
//! back to the full `Value` path, so the result is always the same as before, only faster.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::json::js_number;
use crate::message::AgentMessage;

/// A string field read leniently: any other JSON type reads as `None` (as `Value::as_str`).
#[derive(Default, Debug)]
pub struct LStr<'a>(pub Option<Cow<'a, str>>);

impl LStr<'_> {
    pub fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }
    pub fn owned(&self) -> Option<String> {
        self.0.as_deref().map(str::to_string)
    }
}

struct LStrVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for LStrVisitor<'a> {
    type Value = LStr<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(LStr(Some(Cow::Borrowed(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(LStr(Some(Cow::Owned(v.to_string()))))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(LStr(Some(Cow::Owned(v))))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(LStr(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(LStr(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(LStr(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(LStr(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LStr(None))
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LStr(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(LStr(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(LStr(None))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LStrVisitor(std::marker::PhantomData))
    }
}

/// A number field read leniently (`tokensBefore`): non-negative integers as they are, floats
/// clamped at 0 and truncated, anything else `None`.
#[derive(Default, Debug)]
pub struct LU64(pub Option<u64>);

struct LU64Visitor;

impl<'de> Visitor<'de> for LU64Visitor {
    type Value = LU64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(LU64(Some(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(LU64(Some(if v < 0 { 0 } else { v as u64 })))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(LU64(Some(v.max(0.0) as u64)))
    }
    fn visit_borrowed_str<E: de::Error>(self, _: &'de str) -> Result<Self::Value, E> {
        Ok(LU64(None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(LU64(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(LU64(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LU64(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(LU64(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(LU64(None))
    }
}

impl<'de> Deserialize<'de> for LU64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LU64Visitor)
    }
}

/// The `message` field: its `role` and, when the role is the object's first key (as
/// `JSON.stringify` writes every message), the message itself, read in the same pass that
/// validates the line (so a long session's messages are parsed once, not twice). Any other shape
/// reads as no role and no message.
#[derive(Default, Debug)]
pub struct Msg<'a> {
    pub role: LStr<'a>,
    pub parsed: Option<AgentMessage>,
}

struct MsgVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for MsgVisitor<'a> {
    type Value = Msg<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::value::MapAccessDeserializer as Rest;
        let Some(key) = map.next_key::<LStr<'de>>()? else {
            return Ok(Msg::default());
        };
        if key.as_str() == Some("role") {
            let role: LStr<'a> = map.next_value()?;
            // The rest of the object is the role's struct (the derive for the tagged enum would
            // buffer it first). An unknown role is skipped: the full path decides later.
            let mut rest = NoRole(map);
            let parsed = match role.as_str() {
                Some("user") => Some(AgentMessage::User(Deserialize::deserialize(Rest::new(
                    &mut rest,
                ))?)),
                Some("assistant") => Some(AgentMessage::Assistant(Deserialize::deserialize(
                    Rest::new(&mut rest),
                )?)),
                Some("toolResult") => Some(AgentMessage::ToolResult(Deserialize::deserialize(
                    Rest::new(&mut rest),
                )?)),
                _ => {
                    while rest.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                    None
                }
            };
            return Ok(Msg { role, parsed });
        }
        map.next_value::<IgnoredAny>()?;
        let mut role = LStr(None);
        let mut seen = false;
        while let Some(key) = map.next_key::<LStr<'de>>()? {
            if key.as_str() == Some("role") {
                if seen {
                    // A duplicate key: let the full parser decide which one counts.
                    return Err(de::Error::custom("duplicate role"));
                }
                seen = true;
                role = map.next_value()?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Msg { role, parsed: None })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Msg::default())
    }
    fn visit_borrowed_str<E: de::Error>(self, _: &'de str) -> Result<Self::Value, E> {
        Ok(Msg::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Msg::default())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Msg::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Msg::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Msg::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Msg::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Msg::default())
    }
}

/// The entries of a message after its `role`: a second `role` key is an error (the full parser
/// decides such a line), every other key is handed on.
struct NoRole<A>(A);

impl<'de, A: MapAccess<'de>> MapAccess<'de> for NoRole<A> {
    type Error = A::Error;
    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
        match self.0.next_key::<LStr<'de>>()? {
            None => Ok(None),
            Some(LStr(Some(key))) if key == "role" => Err(de::Error::custom("duplicate role")),
            Some(LStr(Some(Cow::Borrowed(key)))) => seed
                .deserialize(BorrowedStrDeserializer::new(key))
                .map(Some),
            Some(LStr(Some(Cow::Owned(key)))) => {
                seed.deserialize(StringDeserializer::new(key)).map(Some)
            }
            Some(LStr(None)) => Err(de::Error::custom("key is not a string")),
        }
    }
    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(seed)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Msg<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MsgVisitor(std::marker::PhantomData))
    }
}

/// The fields of an entry line the loader interprets; all others are skipped. A duplicate key
/// is an error here (serde's derive), which sends the line down the full path.
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct Head<'a> {
    #[serde(rename = "type", borrow)]
    pub ty: LStr<'a>,
    #[serde(borrow)]
    pub id: LStr<'a>,
    #[serde(rename = "parentId", borrow)]
    pub parent_id: LStr<'a>,
    #[serde(borrow)]
    pub timestamp: LStr<'a>,
    #[serde(borrow)]
    pub message: Msg<'a>,
    #[serde(borrow)]
    pub provider: LStr<'a>,
    #[serde(rename = "modelId", borrow)]
    pub model_id: LStr<'a>,
    #[serde(rename = "thinkingLevel", borrow)]
    pub thinking_level: LStr<'a>,
    #[serde(borrow)]
    pub summary: LStr<'a>,
    #[serde(rename = "firstKeptEntryId", borrow)]
    pub first_kept_entry_id: LStr<'a>,
    #[serde(rename = "tokensBefore")]
    pub tokens_before: LU64,
    #[serde(rename = "fromId", borrow)]
    pub from_id: LStr<'a>,
    #[serde(rename = "targetId", borrow)]
    pub target_id: LStr<'a>,
    #[serde(borrow)]
    pub label: LStr<'a>,
    #[serde(borrow)]
    pub name: LStr<'a>,
}

/// Parse the interpreted fields of a line; `None` when the line is not a JSON object this fast
/// path can vouch for (the caller then uses the full parser). The usual line is read by hand
/// ([`super::fastline`]); anything it leaves is read here with serde, which decides.
pub fn head(line: &str) -> Option<Head<'_>> {
    super::fastline::head(line).or_else(|| head_serde(line))
}

/// [`head`] through serde alone.
pub(crate) fn head_serde(line: &str) -> Option<Head<'_>> {
    // serde's derived structs also accept arrays: only objects are entries.
    if !line.starts_with('{') {
        return None;
    }
    serde_json::from_str::<Head>(line).ok()
}

/// Whether `line` (one JSON object) is exactly what `JSON.stringify` would write for it: no
/// whitespace between tokens, numbers in JavaScript's shortest form, strings with only the
/// escapes JavaScript produces. Such a line can be kept as it is instead of re-serialised.
/// Conservative: `false` only costs the slow path.
pub fn is_canonical(line: &str) -> bool {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                loop {
                    i = skip_plain(b, i);
                    let Some(&c) = b.get(i) else { return false };
                    match c {
                        b'"' => break,
                        b'\\' => {
                            match b.get(i + 1) {
                                Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                                Some(b'u') => {
                                    // JSON.stringify writes \u00XX (lowercase) for control
                                    // characters without a short form; anything else would
                                    // be written raw.
                                    let hex = b.get(i + 2..i + 6);
                                    let ok = matches!(hex, Some([b'0', b'0', h, l])
                                        if (*h == b'0' || *h == b'1')
                                            && (l.is_ascii_digit() || (b'a'..=b'f').contains(l))
                                            && !matches!((h, l), (b'0', b'8' | b'9' | b'c' | b'd') | (b'0', b'a')));
                                    if !ok {
                                        return false;
                                    }
                                    i += 6;
                                }
                                _ => return false,
                            }
                        }
                        _ => i += 1,
                    }
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let tok = &line[start..i];
                let plain_int = tok.bytes().all(|c| c.is_ascii_digit())
                    || (tok.starts_with('-')
                        && tok.len() > 1
                        && tok[1..].bytes().all(|c| c.is_ascii_digit()));
                if plain_int {
                    // Integers print as written unless beyond exact doubles or `-0`.
                    let digits = tok.trim_start_matches('-');
                    if digits.len() > 15 || tok == "-0" {
                        return false;
                    }
                } else {
                    match tok.parse::<f64>() {
                        Ok(v) if js_number(v) == tok => {}
                        _ => return false,
                    }
                }
            }
            b' ' | b'\t' | b'\r' | b'\n' => return false,
            _ => i += 1,
        }
    }
    true
}

/// The index of the first `"` or `\\` at or after `i` (or `b.len()`), eight bytes at a time: most
/// of a session line is string content, and this is the loop it spends its time in.
fn skip_plain(b: &[u8], mut i: usize) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const QUOTE: u64 = LO * b'"' as u64;
    const BACKSLASH: u64 = LO * b'\\' as u64;
    while let Some(chunk) = b.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let q = w ^ QUOTE;
        let s = w ^ BACKSLASH;
        // A zero byte in `q` or `s` marks a quote or a backslash (the classic has-zero test).
        let found = (q.wrapping_sub(LO) & !q | s.wrapping_sub(LO) & !s) & HI;
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && b[i] != b'"' && b[i] != b'\\' {
        i += 1;
    }
    i
}

/// The index of the first `\n` in `b` (the loader splits a long session file into lines with
/// it), sixteen bytes at a time.
#[cfg(target_arch = "x86_64")]
pub fn find_newline(b: &[u8]) -> Option<usize> {
    // SAFETY: SSE2 is part of the x86_64 baseline, always available.
    unsafe { find_newline_sse2(b) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn find_newline_sse2(b: &[u8]) -> Option<usize> {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };
    let nl = _mm_set1_epi8(b'\n' as i8);
    let mut i = 0;
    while i + 16 <= b.len() {
        // SAFETY: `i + 16 <= b.len()`: the 16 bytes read are inside `b` (unaligned load).
        let v = unsafe { _mm_loadu_si128(b.as_ptr().add(i).cast::<__m128i>()) };
        let mask = _mm_movemask_epi8(_mm_cmpeq_epi8(v, nl)) as u32;
        if mask != 0 {
            return Some(i + mask.trailing_zeros() as usize);
        }
        i += 16;
    }
    b[i..].iter().position(|&c| c == b'\n').map(|p| i + p)
}

#[cfg(not(target_arch = "x86_64"))]
pub fn find_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

/// `b` as text, when it is UTF-8. A line of only ASCII (most session lines: `JSON.stringify`
/// escapes nothing above it, but pi writes non-ASCII text as is) is recognised sixteen bytes at
/// a time; anything else goes through the full UTF-8 check.
pub fn utf8(b: &[u8]) -> Option<&str> {
    if is_ascii(b) {
        // SAFETY: every byte is below 0x80, so `b` is valid UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(b) });
    }
    std::str::from_utf8(b).ok()
}

#[cfg(target_arch = "x86_64")]
fn is_ascii(b: &[u8]) -> bool {
    // SAFETY: SSE2 is part of the x86_64 baseline, always available.
    unsafe { is_ascii_sse2(b) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn is_ascii_sse2(b: &[u8]) -> bool {
    use std::arch::x86_64::{
        __m128i, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_setzero_si128,
    };
    let mut acc = _mm_setzero_si128();
    let mut i = 0;
    while i + 16 <= b.len() {
        // SAFETY: `i + 16 <= b.len()`: the 16 bytes read are inside `b` (unaligned load).
        let v = unsafe { _mm_loadu_si128(b.as_ptr().add(i).cast::<__m128i>()) };
        acc = _mm_or_si128(acc, v);
        i += 16;
    }
    _mm_movemask_epi8(acc) == 0 && b[i..].is_ascii()
}

#[cfg(not(target_arch = "x86_64"))]
fn is_ascii(b: &[u8]) -> bool {
    b.is_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_of_ascii_and_utf8_lines() {
        for len in [0, 1, 15, 16, 17, 40] {
            let ascii = "a".repeat(len);
            assert_eq!(utf8(ascii.as_bytes()), Some(ascii.as_str()));
            for at in 0..len {
                let mut s = ascii.clone().into_bytes();
                s[at] = 0xff;
                assert_eq!(utf8(&s), None, "{len} {at}");
                let mut t = ascii.clone();
                t.replace_range(at..at + 1, "é");
                assert_eq!(utf8(t.as_bytes()), Some(t.as_str()));
            }
        }
    }

    #[test]
    fn canonical_lines() {
        for ok in [
            r#"{"type":"message","id":"a","parentId":null,"n":1,"f":0.00030000000000000003,"e":1e-7,"g":1e+21,"neg":-3}"#,
            "{\"s\":\"a\\\"b\\\\c\\n\\t\\u0001\\u001f\",\"u\":\"é ☃ \u{2028}\"}",
            r#"{"a":[true,false,null,{}],"b":[]}"#,
        ] {
            assert!(is_canonical(ok), "{ok}");
        }
        for bad in [
            r#"{ "type":"x"}"#,
            r#"{"type": "x"}"#,
            r#"{"n":1.0}"#,
            r#"{"n":1E5}"#,
            r#"{"n":-0}"#,
            r#"{"n":12345678901234567890}"#,
            r#"{"s":"\/"}"#,
            r#"{"s":"\u0041"}"#,
            r#"{"s":"\u001B"}"#,
            r#"{"s":"\u000a"}"#,
            r#"{"s":"\u2028"}"#,
            "{\"s\":\"unterminated",
        ] {
            assert!(!is_canonical(bad), "{bad}");
        }
    }

    #[test]
    fn find_newline_finds_the_first() {
        for (text, want) in [
            ("", None),
            ("abc", None),
            ("\n", Some(0)),
            ("abcdefgh\n", Some(8)),
            ("abcdefg\nh\n", Some(7)),
            ("é☃abcdefghijkl\nx", Some(17)),
            ("\u{8a}\u{10a}\u{2022}x\n", Some(8)),
            ("0123456789abcdef0123456789abcde\n", Some(31)),
            ("0123456789abcdef\n", Some(16)),
        ] {
            assert_eq!(find_newline(text.as_bytes()), want, "{text:?}");
        }
    }

    #[test]
    fn skip_plain_finds_the_first_quote_or_backslash() {
        for (text, want) in [
            ("", 0),
            ("abc", 3),
            ("\"", 0),
            ("abcdefgh\"", 8),
            ("abcdefg\\h", 7),
            ("é☃abcdefghijkl\"x", 17),
            ("\u{80}\u{ff}\u{2022}\"", 7),
        ] {
            assert_eq!(skip_plain(text.as_bytes(), 0), want, "{text:?}");
        }
        assert_eq!(skip_plain(b"ab\"cdefghijk\"", 3), 12);
    }

    #[test]
    fn head_is_lenient_about_types() {
        let h = head(r#"{"type":"model_change","id":"x","parentId":7,"provider":{"a":[1]},"modelId":"m","message":"str","tokensBefore":-2.5,"extra":[1,{"b":2}]}"#).unwrap();
        assert_eq!(h.ty.as_str(), Some("model_change"));
        assert_eq!(h.id.as_str(), Some("x"));
        assert_eq!(h.parent_id.as_str(), None);
        assert_eq!(h.provider.as_str(), None);
        assert_eq!(h.model_id.as_str(), Some("m"));
        assert_eq!(h.message.role.as_str(), None);
        assert_eq!(h.tokens_before.0, Some(0));
        let h = head(r#"{"message":{"content":"a","role":"user"},"id":"e\u0001"}"#).unwrap();
        assert_eq!(h.message.role.as_str(), Some("user"));
        assert!(h.message.parsed.is_none());
        assert_eq!(h.id.as_str(), Some("e\u{1}"));
        let h = head(r#"{"message":{"role":"user","content":"a","timestamp":3}}"#).unwrap();
        assert_eq!(h.message.role.as_str(), Some("user"));
        assert!(matches!(&h.message.parsed, Some(AgentMessage::User(u)) if u.timestamp == 3));
        let h = head(r#"{"message":{"role":"future","x":[1]}}"#).unwrap();
        assert_eq!(h.message.role.as_str(), Some("future"));
        assert!(h.message.parsed.is_none());
        // A message of a known role that does not parse: the line goes the full way.
        assert!(head(r#"{"message":{"role":"user","content":5}}"#).is_none());
    }

    #[test]
    fn head_refuses_what_the_full_parser_must_decide() {
        assert!(head(r#"{"id":"a","id":"b"}"#).is_none());
        assert!(head(r#"{"message":{"role":"a","role":"b"}}"#).is_none());
        assert!(head(r#"{"message":{"role":"user","content":"x","role":"b"}}"#).is_none());
        assert!(head(r#"{"message":{"content":"x","role":"user","role":"b"}}"#).is_none());
        assert!(head("[1]").is_none());
        assert!(head(r#"{"id":"a""#).is_none());
        assert!(head("").is_none());
    }
}
