//! The complete arguments text of a finished tool call, as pi 1.6.0 reads it (pure).
//!
//! pi 1.3.0+ (`parseToolCallArguments`): blank text is `{}`; otherwise the text must parse as a
//! JSON object (after repairing raw control characters and bad escapes inside strings, as
//! [`repair_json`] does); when it does not, the call gets `arguments: {}` and an `argumentsError`
//! made of the message Node.js's `JSON.parse` (V8) throws, then `\n\nReceived arguments:\n` and
//! the text. [`v8_json_error`] reproduces V8's messages (positions in UTF-16 code units).

use serde_json::Value;

/// `Ok(arguments)`, or `Err(argumentsError)` (V8's message, then the text received).
pub fn parse_tool_arguments(raw: &str) -> Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let received = |e: String| format!("{e}\n\nReceived arguments:\n{raw}");
    let text = match v8_json_error(raw) {
        None => std::borrow::Cow::Borrowed(raw),
        Some(first) => {
            let repaired = repair_json(raw);
            if repaired == raw {
                return Err(received(first));
            }
            if let Some(e) = v8_json_error(&repaired) {
                return Err(received(e));
            }
            std::borrow::Cow::Owned(repaired)
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(received("Tool arguments must be a JSON object".to_string())),
        // V8 accepted it, so serde_json should too (a number beyond f64's range is the one
        // known difference); say so rather than run the tool with guessed arguments.
        Err(e) => Err(received(e.to_string())),
    }
}

/// pi-ai's `repairJson`: inside strings, raw control characters are escaped and a backslash
/// before a character that cannot follow it is doubled.
pub fn repair_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut in_string = false;
    let chars: Vec<char> = json.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !in_string {
            out.push(c);
            in_string = c == '"';
            i += 1;
            continue;
        }
        match c {
            '"' => {
                out.push(c);
                in_string = false;
            }
            '\\' => match chars.get(i + 1) {
                None => out.push_str("\\\\"),
                Some('u')
                    if chars.len() >= i + 6
                        && chars[i + 2..i + 6].iter().all(|d| d.is_ascii_hexdigit()) =>
                {
                    out.extend(&chars[i..i + 6]);
                    i += 5;
                }
                Some(&n) if matches!(n, '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => {
                    out.push('\\');
                    out.push(n);
                    i += 1;
                }
                Some(_) => out.push_str("\\\\"),
            },
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// The message V8's `JSON.parse` (Node.js 22) throws for `source`, or `None` if it parses.
pub fn v8_json_error(source: &str) -> Option<String> {
    let units: Vec<u16> = source.encode_utf16().collect();
    let mut p = Parser { s: &units, pos: 0 };
    match p.value(0).and_then(|_| {
        p.skip_ws();
        if p.pos < p.s.len() {
            Err(Fail::At(Msg::NonWhitespaceAfter, p.pos))
        } else {
            Ok(())
        }
    }) {
        Ok(()) => None,
        Err(f) => Some(p.message(f)),
    }
}

/// V8's message templates that name a position.
#[derive(Clone, Copy, Debug)]
enum Msg {
    Number,
    PropNameOrRBrace,
    CommaOrRBrack,
    CommaOrRBrace,
    ColonAfterPropName,
    DoubleQuotedPropName,
    UnterminatedString,
    BadControl,
    BadUnicodeEscape,
    BadEscape,
    NoNumberAfterMinus,
    ExponentMissing,
    UnterminatedFraction,
    NonWhitespaceAfter,
}

impl Msg {
    fn text(self) -> &'static str {
        match self {
            Msg::Number => "Unexpected number in JSON",
            Msg::PropNameOrRBrace => "Expected property name or '}' in JSON",
            Msg::CommaOrRBrack => "Expected ',' or ']' after array element in JSON",
            Msg::CommaOrRBrace => "Expected ',' or '}' after property value in JSON",
            Msg::ColonAfterPropName => "Expected ':' after property name in JSON",
            Msg::DoubleQuotedPropName => "Expected double-quoted property name in JSON",
            Msg::UnterminatedString => "Unterminated string in JSON",
            Msg::BadControl => "Bad control character in string literal in JSON",
            Msg::BadUnicodeEscape => "Bad Unicode escape in JSON",
            Msg::BadEscape => "Bad escaped character in JSON",
            Msg::NoNumberAfterMinus => "No number after minus sign in JSON",
            Msg::ExponentMissing => "Exponent part is missing a number in JSON",
            Msg::UnterminatedFraction => "Unterminated fractional number in JSON",
            Msg::NonWhitespaceAfter => "Unexpected non-whitespace character after JSON",
        }
    }
}

#[derive(Debug)]
enum Fail {
    /// A template with `at position N (line L column C)`.
    At(Msg, usize),
    /// The generic "unexpected token" at this position (end of input when past the end).
    Token(usize),
}

/// Nesting V8 handles without a stack overflow is far deeper; pith stops here.
const MAX_DEPTH: usize = 4096;

struct Parser<'a> {
    s: &'a [u16],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u16> {
        self.s.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(0x20 | 0x09 | 0x0a | 0x0d)) {
            self.pos += 1;
        }
    }

    /// The token at the cursor is not the one expected: V8 names what it expected (at the end
    /// of the input too).
    fn unexpected(&self, msg: Msg) -> Fail {
        Fail::At(msg, self.pos)
    }

    fn value(&mut self, depth: usize) -> Result<(), Fail> {
        if depth > MAX_DEPTH {
            return Err(Fail::Token(self.pos));
        }
        self.skip_ws();
        let Some(c) = self.peek() else {
            return Err(Fail::Token(self.pos));
        };
        match c {
            0x7b => self.object(depth),
            0x5b => self.array(depth),
            0x22 => self.string(),
            0x2d | 0x30..=0x39 => self.number(),
            0x74 => self.literal("true"),
            0x66 => self.literal("false"),
            0x6e => self.literal("null"),
            _ => Err(Fail::Token(self.pos)),
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), Fail> {
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(0x7d) {
            self.pos += 1;
            return Ok(());
        }
        let mut first = true;
        loop {
            self.skip_ws();
            if self.peek() != Some(0x22) {
                let m = if first {
                    Msg::PropNameOrRBrace
                } else {
                    Msg::DoubleQuotedPropName
                };
                return Err(self.unexpected(m));
            }
            first = false;
            self.string()?;
            self.skip_ws();
            if self.peek() != Some(0x3a) {
                return Err(self.unexpected(Msg::ColonAfterPropName));
            }
            self.pos += 1;
            self.value(depth + 1)?;
            self.skip_ws();
            match self.peek() {
                Some(0x2c) => self.pos += 1,
                Some(0x7d) => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.unexpected(Msg::CommaOrRBrace)),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), Fail> {
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(0x5d) {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.value(depth + 1)?;
            self.skip_ws();
            match self.peek() {
                Some(0x2c) => self.pos += 1,
                Some(0x5d) => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.unexpected(Msg::CommaOrRBrack)),
            }
        }
    }

    fn string(&mut self) -> Result<(), Fail> {
        self.pos += 1;
        loop {
            let Some(c) = self.peek() else {
                return Err(Fail::At(Msg::UnterminatedString, self.pos));
            };
            match c {
                0x22 => {
                    self.pos += 1;
                    return Ok(());
                }
                0x5c => {
                    self.pos += 1;
                    match self.peek() {
                        None => return Err(Fail::At(Msg::UnterminatedString, self.pos)),
                        Some(0x75) => {
                            for k in 1..=4 {
                                match self.s.get(self.pos + k) {
                                    Some(d)
                                        if (*d as u8 as u16) == *d
                                            && (*d as u8).is_ascii_hexdigit() => {}
                                    None => {
                                        return Err(Fail::At(
                                            Msg::UnterminatedString,
                                            self.s.len(),
                                        ));
                                    }
                                    Some(_) => {
                                        return Err(Fail::At(Msg::BadUnicodeEscape, self.pos + k));
                                    }
                                }
                            }
                            self.pos += 5;
                        }
                        Some(e) if b"\"\\/bfnrt".iter().any(|b| *b as u16 == e) => self.pos += 1,
                        Some(_) => return Err(Fail::At(Msg::BadEscape, self.pos)),
                    }
                }
                c if c < 0x20 => return Err(Fail::At(Msg::BadControl, self.pos)),
                _ => self.pos += 1,
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(0x30..=0x39)) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<(), Fail> {
        if self.peek() == Some(0x2d) {
            self.pos += 1;
            if !matches!(self.peek(), Some(0x30..=0x39)) {
                return Err(Fail::At(Msg::NoNumberAfterMinus, self.pos));
            }
        }
        if self.peek() == Some(0x30) {
            self.pos += 1;
            if matches!(self.peek(), Some(0x30..=0x39)) {
                return Err(Fail::At(Msg::Number, self.pos));
            }
        } else {
            self.digits();
        }
        if self.peek() == Some(0x2e) {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(Fail::At(Msg::UnterminatedFraction, self.pos));
            }
        }
        if matches!(self.peek(), Some(0x65 | 0x45)) {
            self.pos += 1;
            if matches!(self.peek(), Some(0x2b | 0x2d)) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(Fail::At(Msg::ExponentMissing, self.pos));
            }
        }
        Ok(())
    }

    fn literal(&mut self, word: &str) -> Result<(), Fail> {
        for b in word.bytes() {
            if self.peek() != Some(b as u16) {
                return Err(Fail::Token(self.pos));
            }
            self.pos += 1;
        }
        Ok(())
    }

    fn message(&self, f: Fail) -> String {
        match f {
            Fail::At(m, pos) => {
                let (line, col) = self.line_col(pos);
                format!("{} at position {pos} (line {line} column {col})", m.text())
            }
            Fail::Token(pos) if pos >= self.s.len() => "Unexpected end of JSON input".to_string(),
            Fail::Token(pos) => {
                let whole = String::from_utf16_lossy(self.s);
                if matches!(
                    whole.as_str(),
                    "NaN" | "Infinity" | "undefined" | "[object Object]"
                ) {
                    return format!("\"{whole}\" is not valid JSON");
                }
                let token = String::from_utf16_lossy(&self.s[pos..pos + 1]);
                let len = self.s.len();
                const CONTEXT: usize = 10;
                if len < 2 * CONTEXT + 1 {
                    return format!("Unexpected token '{token}', \"{whole}\" is not valid JSON");
                }
                let sub = |a: usize, b: usize| String::from_utf16_lossy(&self.s[a..b.min(len)]);
                if pos < CONTEXT {
                    format!(
                        "Unexpected token '{token}', \"{}\"... is not valid JSON",
                        sub(0, pos + CONTEXT)
                    )
                } else if pos < len - CONTEXT {
                    format!(
                        "Unexpected token '{token}', ...\"{}\"... is not valid JSON",
                        sub(pos - CONTEXT, pos + CONTEXT)
                    )
                } else {
                    format!(
                        "Unexpected token '{token}', ...\"{}\" is not valid JSON",
                        sub(pos - CONTEXT, len)
                    )
                }
            }
        }
    }

    /// 1-based line and column of a position (lines end at `\n`).
    fn line_col(&self, pos: usize) -> (usize, usize) {
        let before = &self.s[..pos.min(self.s.len())];
        let line = 1 + before.iter().filter(|c| **c == 0x0a).count();
        let col = match before.iter().rposition(|c| *c == 0x0a) {
            Some(nl) => pos - nl,
            None => pos + 1,
        };
        (line, col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Messages Node.js 22.23.3's `JSON.parse` threw for these texts (checked with node).
    const V8_CASES: &[(&str, Option<&str>)] = &[
        (
            "{\"command\": \"echo hi\", \"timeout\": }",
            Some("Unexpected token '}', ...\"timeout\": }\" is not valid JSON"),
        ),
        (
            "{",
            Some("Expected property name or '}' in JSON at position 1 (line 1 column 2)"),
        ),
        ("[", Some("Unexpected end of JSON input")),
        (
            "{\"a\":1",
            Some(
                "Expected ',' or '}' after property value in JSON at position 6 (line 1 column 7)",
            ),
        ),
        (
            "{\"a\" 1}",
            Some("Expected ':' after property name in JSON at position 5 (line 1 column 6)"),
        ),
        (
            "{a:1}",
            Some("Expected property name or '}' in JSON at position 1 (line 1 column 2)"),
        ),
        (
            "{\"a\":1,}",
            Some("Expected double-quoted property name in JSON at position 7 (line 1 column 8)"),
        ),
        (
            "{\"a\":1,b}",
            Some("Expected double-quoted property name in JSON at position 7 (line 1 column 8)"),
        ),
        (
            "[1,]",
            Some("Unexpected token ']', \"[1,]\" is not valid JSON"),
        ),
        (
            "[1 2]",
            Some("Expected ',' or ']' after array element in JSON at position 3 (line 1 column 4)"),
        ),
        (
            "{\"a\":tru}",
            Some("Unexpected token '}', \"{\"a\":tru}\" is not valid JSON"),
        ),
        (
            "{\"a\":trux}",
            Some("Unexpected token 'x', \"{\"a\":trux}\" is not valid JSON"),
        ),
        (
            "{\"a\":\"x\ty\"}",
            Some("Bad control character in string literal in JSON at position 7 (line 1 column 8)"),
        ),
        (
            "{\"a\":\"\\q\"}",
            Some("Bad escaped character in JSON at position 7 (line 1 column 8)"),
        ),
        (
            "{\"a\":\"\\u12G4\"}",
            Some("Bad Unicode escape in JSON at position 10 (line 1 column 11)"),
        ),
        (
            "{\"a\":-}",
            Some("No number after minus sign in JSON at position 6 (line 1 column 7)"),
        ),
        (
            "{\"a\":1.}",
            Some("Unterminated fractional number in JSON at position 7 (line 1 column 8)"),
        ),
        (
            "{\"a\":1e}",
            Some("Exponent part is missing a number in JSON at position 7 (line 1 column 8)"),
        ),
        (
            "{\"a\":01}",
            Some("Unexpected number in JSON at position 6 (line 1 column 7)"),
        ),
        (
            "{\"a\":1} x",
            Some("Unexpected non-whitespace character after JSON at position 8 (line 1 column 9)"),
        ),
        (
            "{\"command\":\"echo hi\"} {\"x\":1}",
            Some(
                "Unexpected non-whitespace character after JSON at position 22 (line 1 column 23)",
            ),
        ),
        ("}", Some("Unexpected token '}', \"}\" is not valid JSON")),
        (
            "{\"a\":1}}",
            Some("Unexpected non-whitespace character after JSON at position 7 (line 1 column 8)"),
        ),
        ("NaN", Some("\"NaN\" is not valid JSON")),
        ("undefined", Some("\"undefined\" is not valid JSON")),
        (
            "{\"é😀\": x}",
            Some("Unexpected token 'x', \"{\"é😀\": x}\" is not valid JSON"),
        ),
        (
            "{\n\"a\":\n}",
            Some("Unexpected token '}', \"{\n\"a\":\n}\" is not valid JSON"),
        ),
        (
            "\"abc",
            Some("Unterminated string in JSON at position 4 (line 1 column 5)"),
        ),
        (
            "{\"a\":\"abc",
            Some("Unterminated string in JSON at position 9 (line 1 column 10)"),
        ),
        (
            "{\"a\" \"b\"}",
            Some("Expected ':' after property name in JSON at position 5 (line 1 column 6)"),
        ),
        (
            "[1,2,3,4,5,6,7,8,9,10,11,x]",
            Some("Unexpected token 'x', ...\"8,9,10,11,x]\" is not valid JSON"),
        ),
        (
            "{\"abcdefghijklmnop\":x,\"q\":1}",
            Some("Unexpected token 'x', ...\"ijklmnop\":x,\"q\":1}\" is not valid JSON"),
        ),
        (
            "{\"a\":\"\\u12\"}",
            Some("Bad Unicode escape in JSON at position 10 (line 1 column 11)"),
        ),
        ("{\"a\":[1,{\"b\":null}],\"c\":-1.5e+3}", None),
    ];

    #[test]
    fn v8_messages_match_node() {
        for (src, want) in V8_CASES {
            assert_eq!(v8_json_error(src).as_deref(), *want, "{src:?}");
        }
    }

    #[test]
    fn arguments_error_names_the_text_received() {
        let raw = "{\"command\": \"echo hi\", \"timeout\": }";
        assert_eq!(
            parse_tool_arguments(raw),
            Err(format!(
                "Unexpected token '}}', ...\"timeout\": }}\" is not valid JSON\n\nReceived arguments:\n{raw}"
            ))
        );
        assert_eq!(parse_tool_arguments("  "), Ok(json!({})));
        assert_eq!(
            parse_tool_arguments("[1]"),
            Err("Tool arguments must be a JSON object\n\nReceived arguments:\n[1]".to_string())
        );
        assert_eq!(parse_tool_arguments("{\"a\":1}"), Ok(json!({"a": 1})));
    }

    #[test]
    fn repairs_raw_control_characters_and_bad_escapes() {
        assert_eq!(repair_json("{\"a\":\"x\ty\\q\"}"), "{\"a\":\"x\\ty\\\\q\"}");
        assert_eq!(
            parse_tool_arguments("{\"cmd\":\"a\tb \\d\"}"),
            Ok(json!({"cmd": "a\tb \\d"}))
        );
        // Still broken after the repair: the repaired text's message.
        assert_eq!(
            parse_tool_arguments("{\"a\":\"x\ty\","),
            Err("Expected double-quoted property name in JSON at position 12 (line 1 column 13)\n\nReceived arguments:\n{\"a\":\"x\ty\",".to_string())
        );
    }
}
