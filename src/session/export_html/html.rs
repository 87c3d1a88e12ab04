//! Small pieces of HTML output shared by the export's renderers: escaping, base64, cleaning
//! terminal output, and bounding how much of one text goes into the page.

/// Append `s` HTML-escaped (safe in element content and in quoted attribute values).
pub fn escape_into(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let rep = match b {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            b'\'' => "&#39;",
            _ => continue,
        };
        // Only ASCII bytes are replaced, so both slices end on character boundaries.
        out.push_str(&s[start..i]);
        out.push_str(rep);
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

/// `s` HTML-escaped, as a new string.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    escape_into(&mut out, s);
    out
}

/// Standard base64 (with padding) appended to `out`.
pub fn base64_into(out: &mut String, data: &[u8]) {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.reserve(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        let n = (u32::from(chunk[0]) << 16) | (u32::from(b1) << 8) | u32::from(b2);
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
}

/// Whether `data` is plain base64 (alphabet, padding, no whitespace), safe inside a `data:` URL
/// attribute without escaping.
pub fn is_base64(data: &str) -> bool {
    !data.is_empty()
        && data
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/' || c == b'=')
}

/// Raster image types a page may show inline (`data:` URLs). SVG is left out: it is a document,
/// not a picture, and has no business in a transcript viewer.
pub fn is_inline_image_mime(mime: &str) -> bool {
    matches!(
        mime.to_ascii_lowercase().as_str(),
        "image/png"
            | "image/jpeg"
            | "image/jpg"
            | "image/gif"
            | "image/webp"
            | "image/avif"
            | "image/bmp"
    )
}

/// Terminal output made readable: ANSI escape sequences (colours, cursor movement) removed,
/// tabs kept. Borrowed unchanged when there is nothing to remove.
pub fn strip_ansi(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('\x1b') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            // CSI: ESC [ params... final byte in @..~
            Some('[') => {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: ESC ] ... (BEL | ESC \)
            Some(']') => {
                chars.next();
                while let Some(c) = chars.next() {
                    if c == '\x07' {
                        break;
                    }
                    if c == '\x1b' {
                        chars.next();
                        break;
                    }
                }
            }
            Some(_) => {
                chars.next();
            }
            None => {}
        }
    }
    std::borrow::Cow::Owned(out)
}

/// At most `max` bytes of `s`, cut at a character boundary; the second value is how many bytes
/// were left out (0 when `s` fits).
pub fn bounded(s: &str, max: usize) -> (&str, usize) {
    if s.len() <= max {
        return (s, 0);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], s.len() - end)
}

/// One line of at most `max` characters: whitespace runs collapsed, `…` when cut.
pub fn excerpt(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut n = 0;
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if n >= max {
            out.push('…');
            return out;
        }
        if space {
            out.push(' ');
            n += 1;
            space = false;
        }
        out.push(c);
        n += 1;
    }
    out
}

/// `1234` → `1.2k`, `1234567` → `1.2M` (token counts in compact places).
pub fn compact_count(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=9_999 => format!("{:.1}k", n as f64 / 1e3),
        10_000..=999_999 => format!("{}k", (n as f64 / 1e3).round() as u64),
        1_000_000..=9_999_999 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{}M", (n as f64 / 1e6).round() as u64),
    }
}

/// `48211` → `48,211`.
pub fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A dollar amount with enough digits to be meaningful for small per-turn costs.
pub fn dollars(v: f64) -> String {
    if !v.is_finite() || v <= 0.0 {
        "$0".into()
    } else if v < 0.01 {
        format!("${v:.4}")
    } else {
        format!("${v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>"a" & 'b'</script> é"#),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt; é"
        );
    }

    #[test]
    fn base64_matches_rfc4648() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            let mut s = String::new();
            base64_into(&mut s, input.as_bytes());
            assert_eq!(s, want);
        }
        assert!(is_base64("iVBORw0KGgo="));
        assert!(!is_base64("abc\"onerror=x"));
        assert!(!is_base64(""));
    }

    #[test]
    fn images_are_raster_only() {
        assert!(is_inline_image_mime("image/PNG"));
        assert!(!is_inline_image_mime("image/svg+xml"));
        assert!(!is_inline_image_mime("text/html"));
    }

    #[test]
    fn ansi_is_removed() {
        assert_eq!(
            strip_ansi("\x1b[1;31merror\x1b[0m: x\x1b]0;title\x07!"),
            "error: x!"
        );
        assert!(matches!(strip_ansi("plain"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn bounded_cuts_at_char_boundary() {
        assert_eq!(bounded("héllo", 2), ("h", 5));
        assert_eq!(bounded("abc", 5), ("abc", 0));
    }

    #[test]
    fn excerpts_and_numbers() {
        assert_eq!(excerpt("  a\n\n b\tc  ", 10), "a b c");
        assert_eq!(excerpt("abcdef", 3), "abc…");
        assert_eq!(compact_count(999), "999");
        assert_eq!(compact_count(1234), "1.2k");
        assert_eq!(compact_count(48211), "48k");
        assert_eq!(compact_count(2_500_000), "2.5M");
        assert_eq!(grouped(48211), "48,211");
        assert_eq!(grouped(100), "100");
        assert_eq!(dollars(0.0123), "$0.012");
        assert_eq!(dollars(0.00042), "$0.0004");
    }
}
