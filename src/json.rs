//! JSON written the way JavaScript's `JSON.stringify` writes it: the reference's clients and
//! session files see numbers as `3`, `0.00003`, `1e-7`, `1e+21` (serde_json alone would write
//! `3.0` and `3e-5`). Every frame on stdout and every session line goes through [`JsFormatter`].

use std::io::{self, Write};

/// A `serde_json` formatter printing floats like JavaScript's `Number.prototype.toString`
/// (`0.00003`, `1e-7`, `1e+21`, `3`), so lines match `JSON.stringify` byte for byte.
pub struct JsFormatter;

impl serde_json::ser::Formatter for JsFormatter {
    fn write_f64<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(js_number(value).as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        writer.write_all(js_number(f64::from(value)).as_bytes())
    }
}

/// JavaScript's string form of a number (`null` for non-finite values, as `JSON.stringify`).
pub fn js_number(v: f64) -> String {
    if !v.is_finite() {
        return "null".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    // Shortest round-trip digits and exponent, e.g. "3.0000000000000003e-4".
    let sci = format!("{:e}", v.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i32;
    let n = exp + 1; // value = 0.digits × 10^n
    let sign = if v < 0.0 { "-" } else { "" };
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e_sign = if e < 0 { '-' } else { '+' };
        let rest = if k > 1 {
            format!(".{}", &digits[1..])
        } else {
            String::new()
        };
        format!("{}{rest}e{e_sign}{}", &digits[..1], e.abs())
    };
    format!("{sign}{body}")
}

/// Append `s` as a JSON string literal exactly as `serde_json` (and `JSON.stringify`) write it:
/// `"` `\` and control characters escaped (`\b \t \n \f \r`, else `\u00xx`), everything else raw.
/// Runs without anything to escape are found sixteen bytes at a time ([`next_special`]) and
/// copied whole: request bodies of long sessions are mostly such runs.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    write_str_content(out, s);
    out.push(b'"');
}

/// The concatenation of `parts` with `sep` between them as one JSON string literal, as
/// [`write_str`] writes the joined string (without building it).
pub fn write_str_joined<'a>(
    out: &mut Vec<u8>,
    parts: impl IntoIterator<Item = &'a str>,
    sep: &str,
) {
    out.push(b'"');
    for (i, part) in parts.into_iter().enumerate() {
        if i > 0 {
            write_str_content(out, sep);
        }
        write_str_content(out, part);
    }
    out.push(b'"');
}

/// The inside of [`write_str`]'s literal.
fn write_str_content(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    let mut start = 0;
    loop {
        let i = next_special(b, start);
        out.extend_from_slice(&b[start..i]);
        let Some(&c) = b.get(i) else { break };
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 0xf) as usize]);
            }
        }
        start = i + 1;
    }
}

/// The length of `s` as a JSON string literal ([`write_str`]'s output), without writing it: the
/// first pass over a long request body only counts (`llm/body.rs`), and counting the escapes
/// 32 bytes at a time is a fraction of the cost of writing them.
pub fn str_len(s: &str) -> usize {
    2 + str_content_len(s.as_bytes())
}

/// The length of [`write_str_joined`]'s output.
pub fn str_joined_len<'a>(parts: impl IntoIterator<Item = &'a str>, sep: &str) -> usize {
    let sep_len = str_content_len(sep.as_bytes());
    let mut n = 2;
    for (i, part) in parts.into_iter().enumerate() {
        if i > 0 {
            n += sep_len;
        }
        n += str_content_len(part.as_bytes());
    }
    n
}

/// How many bytes [`write_str_content`] adds for the byte `c`, beyond `c` itself.
fn escape_extra(c: u8) -> usize {
    match c {
        b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
        0..=0x1f => 5,
        _ => 0,
    }
}

fn str_content_len(b: &[u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if b.len() >= 64 && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is available (checked just above).
        return unsafe { str_content_len_avx2(b) };
    }
    b.len() + b.iter().map(|&c| escape_extra(c)).sum::<usize>()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn str_content_len_avx2(b: &[u8]) -> usize {
    let mut n = b.len();
    let mut i = 0;
    while i + 32 <= b.len() {
        // SAFETY: AVX2 (this function's feature); `i + 32 <= b.len()`: the bytes are inside `b`.
        // Mostly nothing to escape; else each byte that is by the table.
        let mut m = unsafe { special_mask_32(b.as_ptr().add(i)) };
        while m != 0 {
            n += escape_extra(b[i + m.trailing_zeros() as usize]);
            m &= m - 1;
        }
        i += 32;
    }
    n + b[i..].iter().map(|&c| escape_extra(c)).sum::<usize>()
}

/// The bits of the 32 bytes at `p` that a JSON string must escape (`"`, `\\`, below 0x20).
///
/// # Safety
/// AVX2 must be available and the 32 bytes at `p` readable (the load is unaligned).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn special_mask_32(p: *const u8) -> u32 {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8,
    };
    // SAFETY: the caller guarantees the 32 bytes are readable.
    let v = unsafe { _mm256_loadu_si256(p.cast::<__m256i>()) };
    // A byte below 0x20 is the unsigned minimum of itself and 0x1f.
    let hits = _mm256_or_si256(
        _mm256_or_si256(
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8)),
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8)),
        ),
        _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1f)), v),
    );
    _mm256_movemask_epi8(hits) as u32
}

/// [`special_mask_32`] for 16 bytes (SSE2, part of the x86_64 baseline).
///
/// # Safety
/// The 16 bytes at `p` must be readable (the load is unaligned).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
unsafe fn special_mask_16(p: *const u8) -> u32 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: the caller guarantees the 16 bytes are readable.
    let v = unsafe { _mm_loadu_si128(p.cast::<__m128i>()) };
    let hits = _mm_or_si128(
        _mm_or_si128(
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)),
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)),
        ),
        _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v),
    );
    _mm_movemask_epi8(hits) as u32
}

/// The index of the first byte at or after `i` that a JSON string must escape (`"`, `\`, or
/// below 0x20), or `b.len()`.
#[cfg(target_arch = "x86_64")]
pub(crate) fn next_special(b: &[u8], i: usize) -> usize {
    // Long runs (tool output, file contents) are most of a long session's request body.
    if b.len() - i >= 64 && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is available (checked just above).
        return unsafe { next_special_avx2(b, i) };
    }
    // SAFETY: SSE2 is part of the x86_64 baseline, always available.
    unsafe { next_special_sse2(b, i) }
}

/// [`next_special`] for a run that is most likely short (a key, an id, a name): the first
/// sixteen bytes are looked at in place, without the dispatch.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn next_special_near(b: &[u8], i: usize) -> usize {
    // SAFETY: SSE2 is part of the x86_64 baseline, always available.
    unsafe { next_special_near_sse2(b, i) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
fn next_special_near_sse2(b: &[u8], i: usize) -> usize {
    if i + 16 > b.len() {
        return next_special(b, i);
    }
    // SAFETY: `i + 16 <= b.len()`, so the 16 bytes read are inside `b`.
    let mask = unsafe { special_mask_16(b.as_ptr().add(i)) };
    if mask != 0 {
        return i + mask.trailing_zeros() as usize;
    }
    next_special(b, i + 16)
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn next_special_near(b: &[u8], i: usize) -> usize {
    next_special(b, i)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn next_special_avx2(b: &[u8], mut i: usize) -> usize {
    while i + 32 <= b.len() {
        // SAFETY: AVX2 (this function's feature); `i + 32 <= b.len()`: the bytes are inside `b`.
        let mask = unsafe { special_mask_32(b.as_ptr().add(i)) };
        if mask != 0 {
            return i + mask.trailing_zeros() as usize;
        }
        i += 32;
    }
    next_special_sse2(b, i)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn next_special_sse2(b: &[u8], mut i: usize) -> usize {
    while i + 16 <= b.len() {
        // SAFETY: `i + 16 <= b.len()`, so the 16 bytes read are inside `b`.
        let mask = unsafe { special_mask_16(b.as_ptr().add(i)) };
        if mask != 0 {
            return i + mask.trailing_zeros() as usize;
        }
        i += 16;
    }
    next_special_scalar(b, i)
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn next_special(b: &[u8], i: usize) -> usize {
    next_special_scalar(b, i)
}

fn next_special_scalar(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .map_or(b.len(), |p| i + p)
}

#[cfg(test)]
mod write_str_tests {
    use super::write_str;

    #[test]
    fn str_len_is_the_length_write_str_writes() {
        let mut all: String = (0u8..0x80).map(char::from).collect();
        all.push_str("é€😀");
        let mut cases: Vec<String> = vec![String::new(), all.clone()];
        for len in [1, 31, 32, 33, 63, 64, 65, 100, 1000] {
            for (k, c) in all.chars().enumerate() {
                let mut s: String = "ab".repeat(len / 2);
                s.insert(s.len() / (1 + k % 3), c);
                cases.push(s.repeat(1 + k % 4));
            }
            cases.push(all.repeat(len / 10 + 1));
        }
        for s in &cases {
            let mut out = Vec::new();
            write_str(&mut out, s);
            assert_eq!(super::str_len(s), out.len(), "{s:?}");
            let mut joined = Vec::new();
            super::write_str_joined(&mut joined, [s.as_str(), "x\n", s.as_str()], "\n\t");
            assert_eq!(
                super::str_joined_len([s.as_str(), "x\n", s.as_str()], "\n\t"),
                joined.len()
            );
        }
    }

    #[test]
    fn next_special_near_finds_what_the_scalar_loop_finds() {
        for len in [0, 1, 15, 16, 17, 31, 33, 70, 100] {
            let plain = "é".repeat(len / 2) + &"a".repeat(len % 2);
            for at in 0..plain.len() {
                for special in [b'"', b'\\', 0x01, 0x1f] {
                    let mut b = plain.clone().into_bytes();
                    b[at] = special;
                    for from in 0..=at {
                        assert_eq!(
                            super::next_special_near(&b, from),
                            super::next_special_scalar(&b, from),
                            "{len} {at} {from}"
                        );
                    }
                }
            }
            assert_eq!(super::next_special_near(plain.as_bytes(), 0), plain.len());
        }
    }

    #[test]
    fn joined_parts_escape_as_the_joined_string() {
        for parts in [
            vec![],
            vec!["a"],
            vec!["a\"b", "", "c\nd"],
            vec!["é", "\u{1}"],
        ] {
            let mut out = Vec::new();
            super::write_str_joined(&mut out, parts.iter().copied(), "\n");
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(&parts.join("\n")).unwrap()
            );
        }
    }

    #[test]
    fn escapes_as_serde_json() {
        let mut all = String::new();
        for c in 0u8..=0x7f {
            all.push(c as char);
        }
        let samples = [
            "",
            "plain text that is longer than eight bytes",
            "q\"b\\n\nr\rt\tx\u{8}\u{c}\u{1}\u{1f}\u{7f}",
            "é☃ \u{2028}\u{2029} 😀 ünïcödé and more words",
            "\"\"\"\"\"\"\"\"\"\"",
            "abcdefg\u{0}",
            &all,
        ];
        // Every position in and around the sixteen-byte steps, for every kind of byte.
        let mut shifted = Vec::new();
        for len in (0..40).chain([63, 64, 65, 80, 95, 96, 97, 130]) {
            for special in ["\"", "\\", "\n", "\u{1}", "\u{1f}", "é", "\u{7f}", "☃"] {
                for at in 0..=len {
                    let mut t = "x".repeat(len);
                    t.insert_str(at, special);
                    shifted.push(t);
                }
            }
        }
        for s in samples
            .iter()
            .copied()
            .chain(shifted.iter().map(String::as_str))
        {
            let mut out = Vec::new();
            write_str(&mut out, s);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(s).unwrap(),
                "{s:?}"
            );
        }
    }
}
