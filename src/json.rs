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
/// Runs without anything to escape are found eight bytes at a time and copied whole: request
/// bodies of long sessions are mostly such runs.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const QUOTE: u64 = LO * b'"' as u64;
    const BACKSLASH: u64 = LO * b'\\' as u64;
    const SPACE: u64 = LO * 0x20;
    let b = s.as_bytes();
    out.reserve(b.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        if let Some(chunk) = b.get(i..i + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let w = u64::from_le_bytes(word);
            let q = w ^ QUOTE;
            let bs = w ^ BACKSLASH;
            let special =
                (q.wrapping_sub(LO) & !q | bs.wrapping_sub(LO) & !bs | w.wrapping_sub(SPACE) & !w)
                    & HI;
            if special == 0 {
                i += 8;
                continue;
            }
            i += (special.trailing_zeros() / 8) as usize;
        }
        let c = b[i];
        let short: Option<&[u8]> = match c {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            _ => None,
        };
        if c >= 0x20 && short.is_none() {
            i += 1;
            continue;
        }
        out.extend_from_slice(&b[start..i]);
        match short {
            Some(esc) => out.extend_from_slice(esc),
            None => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 0xf) as usize]);
            }
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&b[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod write_str_tests {
    use super::write_str;

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
        for s in samples {
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
