//! A hand-written reader for the usual session line (pure core, no I/O): a compact
//! (`JSON.stringify`) entry whose message, if any, is a user, assistant or tool-result message
//! with `role` first. It goes from the bytes straight to [`Head`] and the message structs, without
//! serde's visitor machinery, scanning strings 32 bytes at a time (`json::next_special`).
//!
//! It answers only what it can vouch for: anything unusual (whitespace between tokens, escaped
//! keys, `\u` escapes of surrogates, duplicate keys, a missing or mistyped field, other roles or
//! entry shapes, numbers it would have to round, deep nesting) returns `None`, and the caller reads
//! the line with serde ([`super::line::head`]), which decides. So a line reads exactly as serde
//! reads it, only faster; a differential test below checks that on every line shape and on every
//! cut and mutation of them.

use std::borrow::Cow;

use serde_json::Value;

use super::line::{Head, LStr, LU64, Msg};
use crate::json::{next_special, next_special_near};
use crate::message::{
    AgentMessage, AssistantMessage, Content, Cost, ImageContent, StopReason, TextContent,
    ThinkingContent, ToolCall, ToolResultMessage, Usage, UserContent, UserMessage,
};

/// serde_json refuses nesting deeper than 128; well below that this reader leaves it to serde.
const MAX_DEPTH: u32 = 64;

/// Read `line` (one entry, no newline) into a [`Head`], or `None` when serde must decide.
pub fn head(line: &str) -> Option<Head<'_>> {
    let mut p = P {
        s: line,
        b: line.as_bytes(),
        i: 0,
        depth: 0,
    };
    let h = p.head()?;
    (p.i == p.b.len()).then_some(h)
}

struct P<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    depth: u32,
}

/// A set of keys seen in one object (a duplicate makes serde's derive fail: leave it to serde).
#[derive(Default)]
struct Seen(u32);

impl Seen {
    fn first(&mut self, bit: u32) -> Option<()> {
        let m = 1 << bit;
        if self.0 & m != 0 {
            return None;
        }
        self.0 |= m;
        Some(())
    }
    fn has(&self, bit: u32) -> bool {
        self.0 & (1 << bit) != 0
    }
}

impl<'a> P<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        if self.peek()? == c {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    #[inline]
    fn lit(&mut self, word: &[u8]) -> Option<()> {
        if self.b.get(self.i..self.i + word.len())? == word {
            self.i += word.len();
            Some(())
        } else {
            None
        }
    }

    /// After a value inside an object: `true` if another key follows (`,`), `false` at `}`.
    #[inline]
    fn more(&mut self, close: u8) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.i += 1;
                Some(true)
            }
            c if c == close => {
                self.i += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// `{`, then `true` if the object has a first key (`false`: it was `{}`).
    fn open(&mut self) -> Option<bool> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(false);
        }
        Some(true)
    }

    /// The first byte at or after `i` that ends a plain run of string content (`"`, `\\`, or a
    /// control character).
    #[inline]
    fn scan(&self, i: usize) -> usize {
        next_special_near(self.b, i)
    }

    /// A key without escapes and its `:`.
    #[inline]
    fn key(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let end = self.scan(start);
        if *self.b.get(end)? != b'"' {
            return None;
        }
        self.i = end + 1;
        self.eat(b':')?;
        self.s.get(start..end)
    }

    /// A string, borrowed when it has no escapes (as serde_json hands it to a visitor).
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.i;
        let end = self.scan(start);
        match *self.b.get(end)? {
            b'"' => {
                self.i = end + 1;
                Some(Cow::Borrowed(self.s.get(start..end)?))
            }
            b'\\' => self.escaped(start, end).map(Cow::Owned),
            _ => None,
        }
    }

    fn owned(&mut self) -> Option<String> {
        self.string().map(Cow::into_owned)
    }

    /// The rest of a string with escapes, from `start` (after the quote); `at` is the first `\`.
    fn escaped(&mut self, start: usize, mut at: usize) -> Option<String> {
        let mut out = String::with_capacity(at - start + 16);
        out.push_str(self.s.get(start..at)?);
        loop {
            // `self.b[at]` is a backslash.
            let c = *self.b.get(at + 1)?;
            at += 2;
            match c {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let hex = self.b.get(at..at + 4)?;
                    let mut v = 0u32;
                    for &h in hex {
                        v = v * 16 + (h as char).to_digit(16)?;
                    }
                    // Surrogates (pairs or lone ones) are serde's to judge.
                    out.push(char::from_u32(v)?);
                    at += 4;
                }
                _ => return None,
            }
            let end = next_special(self.b, at);
            out.push_str(self.s.get(at..end)?);
            match *self.b.get(end)? {
                b'"' => {
                    self.i = end + 1;
                    return Some(out);
                }
                b'\\' => at = end,
                _ => return None,
            }
        }
    }

    /// A string or `null`.
    fn opt_string(&mut self) -> Option<Option<String>> {
        if self.peek()? == b'n' {
            self.lit(b"null")?;
            return Some(None);
        }
        self.owned().map(Some)
    }

    fn boolean(&mut self) -> Option<bool> {
        match self.peek()? {
            b't' => self.lit(b"true").map(|_| true),
            b'f' => self.lit(b"false").map(|_| false),
            _ => None,
        }
    }

    /// A number token as JSON spells it (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`).
    fn number(&mut self) -> Option<&'a str> {
        let start = self.i;
        let b = self.b;
        let mut i = start;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i)? {
            b'0' => i += 1,
            b'1'..=b'9' => {
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
            }
            _ => return None,
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            let digits = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == digits {
                return None;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let digits = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == digits {
                return None;
            }
        }
        self.i = i;
        self.s.get(start..i)
    }

    /// A non-negative integer that fits a `u64` (serde refuses the rest for a `u64` field).
    fn u64(&mut self) -> Option<u64> {
        let b = self.b;
        let start = self.i;
        let mut i = start;
        let mut v = 0u64;
        while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
            i += 1;
        }
        // No digits, a leading zero, or a fraction or exponent: serde's to refuse.
        if i == start || (b[start] == b'0' && i > start + 1) {
            return None;
        }
        if matches!(b.get(i), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.i = i;
        Some(v)
    }

    /// A `u64` or `null`.
    fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.peek()? == b'n' {
            self.lit(b"null")?;
            return Some(None);
        }
        self.u64().map(Some)
    }

    /// An `f64` field: integers as serde reads them (exactly, below 2^53), anything else through
    /// serde_json itself, so rounding is the same.
    fn f64(&mut self) -> Option<f64> {
        let tok = self.number()?;
        // (`-0` is a float for serde_json: it goes that way too.)
        if tok.len() <= 15 && tok.bytes().all(|c| c.is_ascii_digit()) {
            return Some(tok.parse::<u64>().ok()? as f64);
        }
        serde_json::from_str(tok).ok()
    }

    /// Any value, validated as serde_json would and skipped.
    fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' => {
                self.nest()?;
                if self.open()? {
                    loop {
                        self.skip_string()?;
                        self.eat(b':')?;
                        self.skip()?;
                        if !self.more(b'}')? {
                            break;
                        }
                    }
                }
                self.depth -= 1;
                Some(())
            }
            b'[' => {
                self.nest()?;
                self.i += 1;
                if self.peek()? == b']' {
                    self.i += 1;
                } else {
                    loop {
                        self.skip()?;
                        if !self.more(b']')? {
                            break;
                        }
                    }
                }
                self.depth -= 1;
                Some(())
            }
            b't' => self.lit(b"true"),
            b'f' => self.lit(b"false"),
            b'n' => self.lit(b"null"),
            _ => {
                let tok = self.number()?;
                // Exponents (a float serde might find out of range) and huge integers: serde's.
                (tok.len() <= 300 && !tok.contains(['e', 'E'])).then_some(())
            }
        }
    }

    fn nest(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    fn skip_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        let mut at = self.i;
        loop {
            let end = next_special(self.b, at);
            match *self.b.get(end)? {
                b'"' => {
                    self.i = end + 1;
                    return Some(());
                }
                b'\\' => match *self.b.get(end + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => at = end + 2,
                    b'u' => {
                        let hex = self.b.get(end + 2..end + 6)?;
                        let mut v = 0u32;
                        for &h in hex {
                            v = v * 16 + (h as char).to_digit(16)?;
                        }
                        char::from_u32(v)?;
                        at = end + 6;
                    }
                    _ => return None,
                },
                _ => return None,
            }
        }
    }

    /// Any value, parsed by serde_json from its own bytes (tool-call arguments, details).
    fn value(&mut self) -> Option<Value> {
        let start = self.i;
        // The usual tool-call arguments, an object of strings, built directly (as serde's `Value`
        // would: a later duplicate key replaces the value in place).
        if let Some(v) = self.flat_object() {
            return Some(v);
        }
        self.i = start;
        self.skip()?;
        serde_json::from_str(self.s.get(start..self.i)?).ok()
    }

    /// An object whose values are all strings (`None`, wherever `self.i` is, for anything else).
    fn flat_object(&mut self) -> Option<Value> {
        let mut map = serde_json::Map::new();
        if self.open()? {
            loop {
                let key = self.key()?;
                if self.peek()? != b'"' {
                    return None;
                }
                let v = self.owned()?;
                map.insert(key.to_string(), Value::String(v));
                if !self.more(b'}')? {
                    break;
                }
            }
        }
        Some(Value::Object(map))
    }

    /// A lenient string field of the head: a string, or `None` for any other (valid) value.
    fn lstr(&mut self) -> Option<LStr<'a>> {
        if self.peek()? == b'"' {
            return self.string().map(|s| LStr(Some(s)));
        }
        self.skip()?;
        Some(LStr(None))
    }

    fn head(&mut self) -> Option<Head<'a>> {
        let mut h = Head::default();
        let mut seen = Seen::default();
        if !self.open()? {
            return Some(h);
        }
        loop {
            let key = self.key()?;
            let (bit, field) = match key {
                "type" => (0, &mut h.ty),
                "id" => (1, &mut h.id),
                "parentId" => (2, &mut h.parent_id),
                "timestamp" => (3, &mut h.timestamp),
                "message" => {
                    seen.first(4)?;
                    h.message = self.message()?;
                    if !self.more(b'}')? {
                        break;
                    }
                    continue;
                }
                "provider" => (5, &mut h.provider),
                "modelId" => (6, &mut h.model_id),
                "thinkingLevel" => (7, &mut h.thinking_level),
                "summary" => (8, &mut h.summary),
                "firstKeptEntryId" => (9, &mut h.first_kept_entry_id),
                "tokensBefore" => {
                    seen.first(10)?;
                    h.tokens_before = LU64(Some(self.u64()?));
                    if !self.more(b'}')? {
                        break;
                    }
                    continue;
                }
                "fromId" => (11, &mut h.from_id),
                "targetId" => (12, &mut h.target_id),
                "label" => (13, &mut h.label),
                "name" => (14, &mut h.name),
                _ => {
                    self.skip()?;
                    if !self.more(b'}')? {
                        break;
                    }
                    continue;
                }
            };
            seen.first(bit)?;
            *field = self.lstr()?;
            if !self.more(b'}')? {
                break;
            }
        }
        Some(h)
    }

    /// The `message` of an entry: only a user, assistant or tool-result message with `role` first.
    fn message(&mut self) -> Option<Msg<'a>> {
        if !self.open()? || self.key()? != "role" {
            return None;
        }
        let role = self.string()?;
        if !self.more(b'}')? {
            return None;
        }
        let parsed = match &*role {
            "user" => Some(AgentMessage::User(self.user()?)),
            "assistant" => Some(AgentMessage::Assistant(self.assistant()?)),
            "toolResult" => Some(AgentMessage::ToolResult(self.tool_result()?)),
            // Other roles (0.87's system messages, bash executions, ...) are read later, by
            // the full parser: only their role is needed here.
            _ => {
                self.fields(|_, _| Some(false))?;
                None
            }
        };
        Some(Msg {
            role: LStr(Some(role)),
            parsed,
        })
    }

    /// The keys of an object after its first, until `}`: `field` reads the value of a known key
    /// (or returns `Some(false)` for one to skip).
    fn fields(&mut self, mut field: impl FnMut(&mut Self, &'a str) -> Option<bool>) -> Option<()> {
        loop {
            let key = self.key()?;
            // A second `role` is an error for serde (the full parser decides).
            if key == "role" {
                return None;
            }
            if !field(self, key)? {
                self.skip()?;
            }
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }

    fn user(&mut self) -> Option<UserMessage> {
        let (mut content, mut timestamp) = (None, None);
        let mut seen = Seen::default();
        self.fields(|p, key| {
            match key {
                "content" => {
                    seen.first(0)?;
                    content = Some(if p.peek()? == b'"' {
                        UserContent::Text(p.owned()?)
                    } else {
                        UserContent::Blocks(p.blocks()?)
                    });
                }
                "timestamp" => {
                    seen.first(1)?;
                    timestamp = Some(p.u64()?);
                }
                _ => return Some(false),
            }
            Some(true)
        })?;
        Some(UserMessage {
            content: content?,
            timestamp: timestamp?,
        })
    }

    fn assistant(&mut self) -> Option<AssistantMessage> {
        let mut m = AssistantMessage::default();
        let mut seen = Seen::default();
        self.fields(|p, key| {
            match key {
                "content" => {
                    seen.first(0)?;
                    m.content = p.blocks()?;
                }
                "api" => {
                    seen.first(1)?;
                    m.api = p.owned()?;
                }
                "provider" => {
                    seen.first(2)?;
                    m.provider = p.owned()?;
                }
                "model" => {
                    seen.first(3)?;
                    m.model = p.owned()?;
                }
                "providerThinkingLevel" => {
                    seen.first(4)?;
                    m.provider_thinking_level = p.opt_string()?;
                }
                "usage" => {
                    seen.first(5)?;
                    m.usage = p.usage()?;
                }
                "stopReason" => {
                    seen.first(6)?;
                    m.stop_reason = match &*p.string()? {
                        "stop" => StopReason::Stop,
                        "length" => StopReason::Length,
                        "toolUse" => StopReason::ToolUse,
                        "error" => StopReason::Error,
                        "aborted" => StopReason::Aborted,
                        "pending" => StopReason::Pending,
                        _ => return None,
                    };
                }
                "timestamp" => {
                    seen.first(7)?;
                    m.timestamp = p.u64()?;
                }
                "responseId" => {
                    seen.first(8)?;
                    m.response_id = p.opt_string()?;
                }
                "responseModel" => {
                    seen.first(9)?;
                    m.response_model = p.opt_string()?;
                }
                "rawStopReason" => {
                    seen.first(10)?;
                    m.raw_stop_reason = p.opt_string()?;
                }
                "errorMessage" => {
                    seen.first(11)?;
                    m.error_message = p.opt_string()?;
                }
                "diagnostics" => {
                    seen.first(12)?;
                    let v = p.value()?;
                    m.diagnostics = match v {
                        Value::Null => None,
                        Value::Array(a) => Some(Box::new(a)),
                        _ => return None,
                    };
                }
                "durationMs" => {
                    seen.first(13)?;
                    m.duration_ms = p.opt_u64()?;
                }
                "thinkingLevel" => {
                    seen.first(14)?;
                    m.thinking_level = p
                        .opt_string()?
                        .as_deref()
                        .and_then(crate::message::ThinkingLevel::parse);
                }
                _ => return Some(false),
            }
            Some(true)
        })?;
        // The fields serde requires.
        (0..=7)
            .filter(|&b| b != 4)
            .all(|b| seen.has(b))
            .then_some(m)
    }

    fn usage(&mut self) -> Option<Usage> {
        let mut u = Usage::default();
        let mut seen = Seen::default();
        self.nest()?;
        if !self.open()? {
            return None;
        }
        self.first_fields(|p, key| {
            match key {
                "input" => {
                    seen.first(0)?;
                    u.input = p.u64()?;
                }
                "output" => {
                    seen.first(1)?;
                    u.output = p.u64()?;
                }
                "cacheRead" => {
                    seen.first(2)?;
                    u.cache_read = p.u64()?;
                }
                "cacheWrite" => {
                    seen.first(3)?;
                    u.cache_write = p.u64()?;
                }
                "totalTokens" => {
                    seen.first(4)?;
                    u.total_tokens = p.u64()?;
                }
                "cost" => {
                    seen.first(5)?;
                    u.cost = p.cost()?;
                }
                "cacheWrite1h" => {
                    seen.first(6)?;
                    u.cache_write_1h = p.opt_u64()?;
                }
                "reasoning" => {
                    seen.first(7)?;
                    u.reasoning = p.opt_u64()?;
                }
                _ => return Some(false),
            }
            Some(true)
        })?;
        self.depth -= 1;
        (0..=5).all(|b| seen.has(b)).then_some(u)
    }

    fn cost(&mut self) -> Option<Cost> {
        let mut c = Cost::default();
        let mut seen = Seen::default();
        self.nest()?;
        if !self.open()? {
            return None;
        }
        self.first_fields(|p, key| {
            let (bit, slot) = match key {
                "input" => (0, &mut c.input),
                "output" => (1, &mut c.output),
                "cacheRead" => (2, &mut c.cache_read),
                "cacheWrite" => (3, &mut c.cache_write),
                "total" => (4, &mut c.total),
                "totalFromProvider" => {
                    seen.first(5)?;
                    c.total_from_provider = match p.value()? {
                        Value::Null => None,
                        Value::Bool(b) => Some(b),
                        _ => return None,
                    };
                    return Some(true);
                }
                _ => return Some(false),
            };
            seen.first(bit)?;
            *slot = p.f64()?;
            Some(true)
        })?;
        self.depth -= 1;
        (0..=4).all(|b| seen.has(b)).then_some(c)
    }

    /// Like [`P::fields`] from an object's first key, where `role` is just another key.
    fn first_fields(
        &mut self,
        mut field: impl FnMut(&mut Self, &'a str) -> Option<bool>,
    ) -> Option<()> {
        loop {
            let key = self.key()?;
            if !field(self, key)? {
                self.skip()?;
            }
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }

    fn tool_result(&mut self) -> Option<ToolResultMessage> {
        let (mut id, mut name, mut content, mut details, mut is_error, mut timestamp) =
            (None, None, None, None, None, None);
        let mut duration_ms = None;
        let mut seen = Seen::default();
        self.fields(|p, key| {
            match key {
                "toolCallId" => {
                    seen.first(0)?;
                    id = Some(p.owned()?);
                }
                "toolName" => {
                    seen.first(1)?;
                    name = Some(p.owned()?);
                }
                "content" => {
                    seen.first(2)?;
                    content = Some(p.blocks()?);
                }
                "details" => {
                    seen.first(3)?;
                    details = match p.value()? {
                        Value::Null => None,
                        v => Some(v),
                    };
                }
                "isError" => {
                    seen.first(4)?;
                    is_error = Some(p.boolean()?);
                }
                "timestamp" => {
                    seen.first(5)?;
                    timestamp = Some(p.u64()?);
                }
                "durationMs" => {
                    seen.first(6)?;
                    duration_ms = p.opt_u64()?;
                }
                _ => return Some(false),
            }
            Some(true)
        })?;
        Some(ToolResultMessage {
            tool_call_id: id?,
            tool_name: name?,
            content: content?,
            details,
            is_error: is_error?,
            duration_ms,
            timestamp: timestamp?,
            nested_calls: None,
        })
    }

    /// An array of content blocks, in a vector no larger than it needs (as `read_blocks`).
    fn blocks(&mut self) -> Option<Vec<Content>> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(Vec::new());
        }
        self.nest()?;
        let first = self.block()?;
        if !self.more(b']')? {
            self.depth -= 1;
            return Some(vec![first]);
        }
        let mut v = vec![first, self.block()?];
        while self.more(b']')? {
            v.push(self.block()?);
        }
        v.shrink_to_fit();
        self.depth -= 1;
        Some(v)
    }

    /// One content block with `type` first (as `JSON.stringify` writes them).
    fn block(&mut self) -> Option<Content> {
        if !self.open()? || self.key()? != "type" {
            return None;
        }
        let tag = self.string()?;
        let mut seen = Seen::default();
        let block = match &*tag {
            "text" => {
                let (mut text, mut sig) = (None, None);
                self.rest(|p, key| {
                    match key {
                        "text" => {
                            seen.first(0)?;
                            text = Some(p.owned()?);
                        }
                        "textSignature" => {
                            seen.first(1)?;
                            sig = p.opt_string()?;
                        }
                        _ => return Some(false),
                    }
                    Some(true)
                })?;
                Content::Text(TextContent {
                    text: text?,
                    text_signature: sig,
                })
            }
            "toolCall" => {
                let (mut id, mut name, mut args, mut sig) = (None, None, None, None);
                self.rest(|p, key| {
                    match key {
                        "id" => {
                            seen.first(0)?;
                            id = Some(p.owned()?);
                        }
                        "name" => {
                            seen.first(1)?;
                            name = Some(p.owned()?);
                        }
                        "arguments" => {
                            seen.first(2)?;
                            args = Some(p.value()?);
                        }
                        "thoughtSignature" => {
                            seen.first(3)?;
                            sig = p.opt_string()?;
                        }
                        _ => return Some(false),
                    }
                    Some(true)
                })?;
                Content::ToolCall(ToolCall {
                    id: id?,
                    name: name?,
                    arguments: args?,
                    thought_signature: sig,
                    arguments_error: None,
                })
            }
            "thinking" => {
                let (mut thinking, mut sig, mut redacted) = (None, None, None);
                self.rest(|p, key| {
                    match key {
                        "thinking" => {
                            seen.first(0)?;
                            thinking = Some(p.owned()?);
                        }
                        "thinkingSignature" => {
                            seen.first(1)?;
                            sig = p.opt_string()?;
                        }
                        "redacted" => {
                            seen.first(2)?;
                            redacted = if p.peek()? == b'n' {
                                p.lit(b"null")?;
                                None
                            } else {
                                Some(p.boolean()?)
                            };
                        }
                        _ => return Some(false),
                    }
                    Some(true)
                })?;
                Content::Thinking(ThinkingContent {
                    thinking: thinking?,
                    thinking_signature: sig,
                    redacted,
                })
            }
            "image" => {
                let (mut data, mut mime) = (None, None);
                self.rest(|p, key| {
                    match key {
                        "data" => {
                            seen.first(0)?;
                            data = Some(p.owned()?);
                        }
                        "mimeType" => {
                            seen.first(1)?;
                            mime = Some(p.owned()?);
                        }
                        _ => return Some(false),
                    }
                    Some(true)
                })?;
                Content::Image(ImageContent {
                    data: data?,
                    mime_type: mime?,
                })
            }
            _ => return None,
        };
        Some(block)
    }

    /// The keys of a block after its tag (`,` or `}` next).
    fn rest(&mut self, field: impl FnMut(&mut Self, &'a str) -> Option<bool>) -> Option<()> {
        if !self.more(b'}')? {
            return Some(());
        }
        self.first_fields(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast reader agrees with serde's wherever it answers.
    fn agrees(line: &str) -> bool {
        let fast = head(line);
        let slow = super::super::line::head_serde(line);
        if let Some(f) = &fast {
            assert_eq!(
                Some(format!("{f:?}")),
                slow.as_ref().map(|s| format!("{s:?}")),
                "{line}"
            );
        }
        fast.is_some()
    }

    const LINES: &[&str] = &[
        r#"{"type":"session","version":3,"id":"5f0e","timestamp":"2026-11-21T22:24:44.852Z","cwd":"/tmp/x"}"#,
        r#"{"type":"model_change","provider":"fake","modelId":"fake-model","id":"00000001","parentId":null,"timestamp":"2026-11-21T22:24:44.852Z"}"#,
        r#"{"type":"message","message":{"role":"user","content":[{"type":"text","text":"step 0: look at the logs"}],"timestamp":1795299884867},"id":"00000002","parentId":"00000001","timestamp":"2026-11-21T22:24:44.852Z"}"#,
        r#"{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","id":"toolu_000000","name":"bash","arguments":{"command":"cat log0.txt"}}],"api":"anthropic-messages","provider":"fake","model":"fake-model","usage":{"input":100,"output":20,"cacheRead":0,"cacheWrite":0,"totalTokens":120,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":1795299884867},"id":"00000003","parentId":"00000002","timestamp":"2026-11-21T22:24:44.852Z"}"#,
        r#"{"type":"message","message":{"role":"toolResult","toolCallId":"toolu_000000","toolName":"bash","content":[{"type":"text","text":"line of tool output line of tool output"}],"isError":false,"timestamp":1795299884867},"id":"00000004","parentId":"00000003","timestamp":"2026-11-21T22:24:44.852Z"}"#,
        r#"{"type":"message","id":"a","parentId":"b","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm\n\"q\"","thinkingSignature":"sig","redacted":true},{"type":"text","text":"é ☃ \u0001\t","textSignature":null},{"type":"toolCall","id":"c","name":"read","arguments":{"path":"a.txt","n":[1,2.5,-3,{"x":null}]},"thoughtSignature":"ts"}],"api":"openai-responses","provider":"openai","model":"gpt","providerThinkingLevel":"high","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"reasoning":5,"totalTokens":6,"cost":{"input":0.00030000000000000003,"output":1.5e-7,"cacheRead":-0,"cacheWrite":12345678901234567,"total":2},"cacheWrite1h":7},"stopReason":"error","timestamp":5,"responseId":"r","responseModel":"m","rawStopReason":"end_turn","errorMessage":"boom","diagnostics":[{"a":1}],"extra":{"deep":[[[]]]}}}"#,
        r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"anthropic-messages","provider":"fake","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0,"totalFromProvider":false}},"stopReason":"stop","timestamp":1,"responseId":"r","rawStopReason":"end_turn","durationMs":12,"thinkingLevel":"medium"}}"#,
        r#"{"type":"message","id":"a","message":{"role":"toolResult","toolCallId":"c","toolName":"bash","content":[],"isError":false,"durationMs":3,"timestamp":2}}"#,
        r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"plain \\ text \/ \b\f\r","timestamp":0,"unknown":[true,false,null]}}"#,
        r#"{"type":"message","id":"a","message":{"role":"user","content":[{"type":"image","data":"QQ==","mimeType":"image/png"},{"type":"text","text":"a"},{"type":"text","text":"b"}],"timestamp":1}}"#,
        r#"{"type":"message","id":"a","message":{"role":"toolResult","toolCallId":"c","toolName":"bash","content":[],"details":{"exitCode":1},"isError":true,"timestamp":2}}"#,
        r#"{"type":"message","id":"a","message":{"role":"toolResult","toolCallId":"c","toolName":"bash","content":[],"details":null,"isError":true,"timestamp":2}}"#,
        r#"{"type":"message","id":"a","message":{"role":"bashExecution","command":"ls","output":"","cancelled":false,"truncated":false,"timestamp":1}}"#,
        r#"{"type":"message","id":"a","message":{"role":"system","content":"","sections":{"preamble":"You are"},"timestamp":1,"toolsAdded":[{"name":"read","description":"d","parameters":{"type":"object"}}]}}"#,
        r#"{"type":"message","id":"a","message":{"role":"custom","customType":"x","content":"a","display":true,"role":"user"}}"#,
        r#"{"type":"message","id":"a","message":{"role":"future"}}"#,
        r#"{"type":"message","id":"a","message":{"content":"x","role":"user","timestamp":1}}"#,
        r#"{"type":"compaction","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:00.000Z","summary":"s","firstKeptEntryId":"a","tokensBefore":1234,"details":{}}"#,
        r#"{"type":"label","id":"l","parentId":"c","targetId":"a","label":"x","name":5,"provider":[1],"modelId":{"a":"b"},"thinkingLevel":true,"fromId":null,"summary":"\u00e9"}"#,
        r#"{"type":"session_info","id":"i","name":"my \"session\""}"#,
        r#"{"id":"a","id":"b"}"#,
        r#"{"type":"message","message":{"role":"user","content":"x","timestamp":1,"timestamp":2}}"#,
        r#"{"type":"message","message":{"role":"user","content":"x","timestamp":1,"role":"user"}}"#,
        r#"{"type":"message","message":{"role":"user","content":5,"timestamp":1}}"#,
        r#"{"type":"message","message":{"role":"user","content":"x","timestamp":1.5}}"#,
        r#"{"type":"message","message":{"role":"user","content":"x","timestamp":-1}}"#,
        r#"{"type":"message","message":{"role":"user","content":[{"text":"a","type":"text"}],"timestamp":1}}"#,
        r#"{"type":"message","message":{"role":"user","content":[{"type":"video"}],"timestamp":1}}"#,
        r#"{"type":"message","message":{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":6,"cost":{"input":1,"output":1,"cacheRead":1,"cacheWrite":1,"total":1e400}},"stopReason":"stop","timestamp":1}}"#,
        r#"{"type":"x","n":1e5,"m":-0.0,"s":"\ud83d\ude00","t":"\ud800"}"#,
        r#"{"a":"\u0041\u00FF\u20ac"}"#,
        r#"{}"#,
        r#"[1]"#,
        r#"{"type":"x"} "#,
        r#"{"type": "x"}"#,
        r#"{"type":"x","v":01}"#,
        r#"{"type":"x","v":1.}"#,
        r#"{"type":"x","v":-}"#,
        r#"{"type":"x","v":tru}"#,
        r#"{"type":"x","v":"a\x"}"#,
        r#"{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"n","arguments":{"b":"1","a":"2","b":"3"}},{"type":"toolCall","id":"c","name":"n","arguments":{}},{"type":"toolCall","id":"c","name":"n","arguments":{"a":"\u00e9\n"}}],"api":"a","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":6,"cost":{"input":1,"output":1,"cacheRead":1,"cacheWrite":1,"total":1}},"stopReason":"stop","timestamp":1}}"#,
        r#"{"ty\u0070e":"x"}"#,
    ];

    #[test]
    fn agrees_with_serde_on_every_line_and_every_cut() {
        let mut fast = 0;
        for line in LINES {
            if agrees(line) {
                fast += 1;
            }
            for cut in 0..line.len() {
                if line.is_char_boundary(cut) {
                    agrees(&line[..cut]);
                    agrees(&format!("{}}}", &line[..cut]));
                }
            }
            // Every byte replaced by a few troublemakers.
            for at in 0..line.len() {
                for with in [
                    "\"", "\\", "}", "]", ",", ":", "0", "\u{1}", " ", "n", "{", "[",
                ] {
                    if line.is_char_boundary(at) && line.is_char_boundary(at + 1) {
                        let mut m = line.to_string();
                        m.replace_range(at..at + 1, with);
                        agrees(&m);
                    }
                }
            }
        }
        // The usual shapes take the fast path.
        assert!(fast >= 18, "{fast}");
        for line in LINES[..12]
            .iter()
            .chain(LINES.iter().filter(|l| l.contains(r#""b":"3""#)))
        {
            assert!(head(line).is_some(), "{line}");
        }
    }

    #[test]
    fn deep_nesting_is_left_to_serde() {
        let deep = format!(
            r#"{{"type":"x","v":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert!(head(&deep).is_none());
        assert!(!agrees(&deep));
        let ok = format!(r#"{{"type":"x","v":{}{}}}"#, "[".repeat(20), "]".repeat(20));
        assert!(agrees(&ok));
    }
}
