//! The contract every provider API implements, below the stream runtime (`stream.rs`).
//!
//! An API is one module under `src/llm/` with a [`WireApi`] value: it builds the HTTP request from
//! an [`LlmRequest`] ([`WireApi::prepare`]) and decodes the response frames into [`StreamEvent`]s
//! with a [`Decoder`] that keeps the partial message in a [`Builder`]. `stream.rs` owns the
//! threads, the HTTP exchange, cancellation and stalls, and dispatches to the APIs through one
//! table (`stream::APIS`); no API module imports it.

use serde_json::Value;

use crate::llm::body::WriteBody;
use crate::llm::sse::SseEvent;
use crate::llm::{LlmRequest, Model, ModelCost, StreamEvent};
use crate::message::{
    AssistantMessage, Content, StopReason, TextContent, ThinkingContent, ToolCall, Usage,
};

/// Error text of a stream cancelled before the provider answered (the SDK's wording).
pub const ABORTED_BEFORE_RESPONSE: &str = "Request was aborted.";
/// Error text of a stream cancelled while the body was streaming (the fetch abort wording).
pub const ABORTED_MID_STREAM: &str = "This operation was aborted";
/// The connection broke while the body was streaming (undici's wording; matched by auto-retry).
pub const TERMINATED: &str = "terminated";
/// No connection could be made (the SDKs' wording; matched by auto-retry).
pub const CONNECTION_ERROR: &str = "Connection error.";
/// No connection could be made, for the Google API (Node's fetch wording; matched by auto-retry).
pub const FETCH_FAILED: &str = "fetch failed";
/// The request timed out before the response headers arrived.
pub const TIMED_OUT: &str = "Request timed out.";
/// A ready-to-send provider request.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

/// The JSON body of a request.
#[derive(Clone)]
pub enum Body {
    /// Serialised already.
    Bytes(Vec<u8>),
    /// Written by this function: measured first, then a large body is written again while it
    /// is sent instead of being held whole (`body.rs`).
    Write(WriteBody),
}

impl Body {
    /// The body's bytes, whole (tests, inspection).
    pub fn bytes(&self, req: &LlmRequest) -> Vec<u8> {
        match self {
            Body::Bytes(b) => b.clone(),
            Body::Write(w) => crate::llm::body::to_bytes(*w, req),
        }
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Bytes(b) => write!(f, "Bytes({} bytes)", b.len()),
            Body::Write(_) => f.write_str("Write"),
        }
    }
}

/// A body built as a value, serialised (`serde_json` cannot fail on a `Value`).
pub fn json_body(body: &Value) -> Body {
    Body::Bytes(serde_json::to_vec(body).unwrap_or_default())
}

/// Decodes one API's SSE events into [`StreamEvent`]s, keeping the partial message in a
/// [`Builder`].
pub trait Decoder: Send {
    fn event(&mut self, ev: &SseEvent, b: &mut Builder, out: &mut Vec<StreamEvent>);
    /// The body ended cleanly; emit the final event if the stream has not already.
    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>);
}

/// How a response body is cut into frames before it reaches the [`Decoder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// `text/event-stream` ([`crate::llm::sse::SseParser`]).
    Sse,
    /// AWS `application/vnd.amazon.eventstream` ([`crate::llm::aws::eventstream`]): each message
    /// becomes an [`SseEvent`] whose `event` is its `:event-type` (or `exception:<type>` /
    /// `error:<code>`) and whose `data` is its payload.
    EventStream,
}

/// One wire API (`model.api`): request builder, decoder and error wording.
pub trait WireApi: Sync {
    /// The `api` name models use (`anthropic-messages`, ...).
    fn name(&self) -> &'static str;

    /// The HTTP request for `req`. May block (credential files, token endpoints) only when
    /// [`WireApi::prepare_blocks`] says so: then it runs on a worker thread of its own.
    fn prepare(&self, req: &LlmRequest) -> Result<Prepared, String>;

    /// Whether [`WireApi::prepare`] does I/O.
    fn prepare_blocks(&self) -> bool {
        false
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn Decoder>;

    /// The `errorMessage` for an HTTP error response (`headers` lower-cased), in the wording of
    /// the request's SDK generation (`req.sdk`).
    fn http_error_message(
        &self,
        req: &LlmRequest,
        status: u16,
        headers: &[(String, String)],
        body: &str,
    ) -> String;

    /// Structured details an HTTP error adds to the failed message (pi 0.87.1's `diagnostics`).
    fn error_diagnostics(
        &self,
        req: &LlmRequest,
        status: u16,
        headers: &[(String, String)],
        body: &str,
    ) -> Option<Vec<Value>> {
        let _ = (req, status, headers, body);
        None
    }

    /// The error text of a connection that could not be made: the SDK's wording.
    fn connection_error(&self, req: &LlmRequest) -> &'static str {
        let _ = req;
        CONNECTION_ERROR
    }

    /// Whether pi 1.6.0 appends a connection failure's cause to [`Self::connection_error`]
    /// (pi-ai's `withCauseDetail`; Mistral's formatter does not).
    fn connection_error_cause(&self) -> bool {
        true
    }

    /// The effort the provider is asked to answer at, recorded on the reply
    /// (`providerThinkingLevel`; pi 0.87.1's Anthropic managed effort). Most APIs: none.
    fn provider_thinking_level(&self, req: &LlmRequest) -> Option<String> {
        let _ = req;
        None
    }

    /// A Stainless SDK (sends `x-stainless-retry-count`).
    fn stainless(&self) -> bool {
        false
    }

    fn framing(&self) -> Framing {
        Framing::Sse
    }
}

/// How an HTTP error response is worded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorWording {
    /// The SDK's `APIError` message ([`stainless_message`]).
    Sdk,
    /// pi 0.87.1's `formatProviderError`: the response's error object as JSON
    /// ([`openai_error_object_message`]).
    ErrorObject,
}

/// The Stainless SDKs' `APIError` message: `"<status> <msg>"`. For Anthropic `msg` comes from the
/// whole body (`body.message`, else the body as JSON); for OpenAI from `body.error` (`.message`,
/// else its JSON). A body that is not JSON is used verbatim.
pub fn stainless_message(status: u16, body: &str, openai: bool) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let msg = match &parsed {
        Some(v) => {
            let err = if openai { v.get("error") } else { Some(v) };
            match err {
                Some(e) if !e.is_null() => match e.get("message") {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(m) if !m.is_null() => Some(m.to_string()),
                    _ => Some(e.to_string()),
                },
                _ => None,
            }
        }
        None if body.is_empty() => None,
        None => Some(body.to_string()),
    };
    let mut text = match msg {
        Some(m) => format!("{status} {m}"),
        None => format!("{status} status code (no body)"),
    };
    if openai {
        // OpenRouter puts the upstream provider's error in error.metadata.raw.
        if let Some(raw) = parsed
            .as_ref()
            .and_then(|v| v.pointer("/error/metadata/raw"))
            .and_then(Value::as_str)
        {
            text.push('\n');
            text.push_str(raw);
        }
    }
    text
}

/// pi 0.87.1's text for an OpenAI SDK error (`formatProviderError(normalizeProviderError(e))`):
/// when the response's JSON body has an `error` object, `<status>: <that object as JSON>` (with
/// `prefix`: `<prefix> (<status>): …`; cut at 4000 characters), else the SDK's message
/// ([`stainless_message`]). OpenRouter's `error.metadata.raw` follows on a line of its own unless
/// the text already holds it.
pub fn openai_error_object_message(status: u16, body: &str, prefix: Option<&str>) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error_obj = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .filter(|e| e.as_object().is_some_and(|o| !o.is_empty()));
    let message = stainless_message(status, body, true);
    // The SDK message without OpenRouter's raw line (added back below, once).
    let sdk_message = message.split('\n').next().unwrap_or("").to_string();
    let mut text = match error_obj {
        Some(e) => {
            let json = e.to_string();
            let json = cut_utf16(json.trim(), 4000);
            if sdk_message.contains(&json) {
                match prefix {
                    Some(p) => format!("{p} ({status}): {sdk_message}"),
                    None => sdk_message,
                }
            } else {
                match prefix {
                    Some(p) => format!("{p} ({status}): {json}"),
                    None => format!("{status}: {json}"),
                }
            }
        }
        None => match prefix {
            Some(p) => format!("{p} ({status}): {sdk_message}"),
            None => sdk_message,
        },
    };
    if let Some(raw) = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/metadata/raw"))
        .and_then(Value::as_str)
    {
        if !text.contains(raw) {
            text.push('\n');
            text.push_str(raw);
        }
    }
    text
}

/// `text` cut to `max` UTF-16 units with the reference's `... [truncated N chars]` note (also
/// Mistral's error bodies).
pub(crate) fn cut_utf16(text: &str, max: usize) -> String {
    let units = text.encode_utf16().count();
    if units <= max {
        return text.to_string();
    }
    let mut taken = 0;
    let mut end = 0;
    for (i, c) in text.char_indices() {
        if taken + c.len_utf16() > max {
            break;
        }
        taken += c.len_utf16();
        end = i + c.len_utf8();
    }
    format!("{}... [truncated {} chars]", &text[..end], units - max)
}

/// The Google SDK's error text: the JSON error body re-serialised compactly; a body that is not
/// JSON is wrapped as `{"error":{"message":…,"code":…,"status":<reason phrase>}}`.
pub fn google_error_message(status: u16, body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => v.to_string(),
        Err(_) => serde_json::json!({
            "error": {"message": body, "code": status, "status": reason_phrase(status)}
        })
        .to_string(),
    }
}

/// HTTP reason phrases (what Node's fetch reports as `statusText`).
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

/// The assistant message under construction, shared by every decoder: opens, extends and closes
/// content blocks and produces the matching events. Tool-call arguments accumulate as raw JSON
/// text and are parsed once, when the block ends.
pub struct Builder {
    pub msg: AssistantMessage,
    prices: ModelCost,
    started: bool,
    /// Set once `Done` or `Error` was produced; later calls are ignored.
    pub finished: bool,
    /// Raw argument JSON per content index (empty for non-tool blocks).
    args: Vec<String>,
    /// The SDK generation whose message shapes the decoders produce (pi 0.87.1's adds
    /// `rawStopReason`, `usage.cacheWrite1h` (Anthropic) and `usage.reasoning`) and whose cost
    /// formula prices the usage.
    pub sdk: crate::protocol::SdkGeneration,
    /// A finished tool call's arguments are parsed strictly ([`super::tool_args`]): text that
    /// is not a JSON object gives `argumentsError` (pi 1.6.0) instead of the prefix that parses.
    pub tool_arguments_error: bool,
    /// The request's API key: blanked out of error messages (a proxy may echo it back).
    secret: Option<String>,
}

impl Builder {
    pub fn new(model: &Model) -> Builder {
        Builder {
            msg: AssistantMessage::empty(&model.api, &model.provider, &model.id),
            prices: model.cost,
            started: false,
            finished: false,
            args: Vec::new(),
            sdk: Default::default(),
            tool_arguments_error: false,
            secret: None,
        }
    }

    /// Price the usage at other rates from now on (a reply another model gave).
    pub fn set_prices(&mut self, prices: ModelCost) {
        self.prices = prices;
    }

    /// Never let `key` through in an error message (keys shorter than 8 bytes and the
    /// `<authenticated>` sentinel of ambient credentials are no secrets worth a search).
    pub fn redacting(mut self, key: Option<&str>) -> Builder {
        self.secret = key
            .filter(|k| k.len() >= 8 && !k.starts_with('<'))
            .map(str::to_string);
        self
    }

    /// Emit `Start` (once).
    pub fn start(&mut self, out: &mut Vec<StreamEvent>) {
        // Never after the final event.
        if !self.started && !self.finished {
            self.started = true;
            out.push(StreamEvent::Start {
                partial: self.msg.clone(),
            });
        }
    }

    pub fn started(&self) -> bool {
        self.started
    }

    fn push_block(&mut self, c: Content) -> usize {
        self.msg.content.push(c);
        self.args.push(String::new());
        self.msg.content.len() - 1
    }

    pub fn start_text(&mut self, out: &mut Vec<StreamEvent>) -> usize {
        self.start(out);
        let i = self.push_block(Content::text(""));
        out.push(StreamEvent::TextStart { index: i });
        i
    }

    pub fn start_thinking(&mut self, out: &mut Vec<StreamEvent>) -> usize {
        self.start_thinking_signed(None, out)
    }

    /// A thinking block that opens with a signature (see [`StreamEvent::ThinkingStart`]).
    pub fn start_thinking_signed(
        &mut self,
        signature: Option<String>,
        out: &mut Vec<StreamEvent>,
    ) -> usize {
        self.start(out);
        let i = self.push_block(Content::Thinking(ThinkingContent {
            thinking: String::new(),
            thinking_signature: signature.clone(),
            redacted: None,
        }));
        out.push(StreamEvent::ThinkingStart {
            index: i,
            signature,
        });
        i
    }

    pub fn start_tool(&mut self, id: &str, name: &str, out: &mut Vec<StreamEvent>) -> usize {
        self.start(out);
        let i = self.push_block(Content::ToolCall(ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            arguments: Value::Object(Default::default()),
            thought_signature: None,
            arguments_error: None,
        }));
        out.push(StreamEvent::ToolCallStart {
            index: i,
            id: id.to_string(),
            name: name.to_string(),
        });
        i
    }

    /// Append `delta` to block `i` (text, thinking or tool arguments, whichever it is).
    pub fn delta(&mut self, i: usize, delta: &str, out: &mut Vec<StreamEvent>) {
        if delta.is_empty() && !matches!(self.msg.content.get(i), Some(Content::ToolCall(_))) {
            return;
        }
        match self.msg.content.get_mut(i) {
            Some(Content::Text(t)) => {
                t.text.push_str(delta);
                out.push(StreamEvent::TextDelta {
                    index: i,
                    delta: delta.to_string(),
                });
            }
            Some(Content::Thinking(t)) => {
                t.thinking.push_str(delta);
                out.push(StreamEvent::ThinkingDelta {
                    index: i,
                    delta: delta.to_string(),
                });
            }
            Some(Content::ToolCall(_)) => {
                if let Some(a) = self.args.get_mut(i) {
                    a.push_str(delta);
                }
                out.push(StreamEvent::ToolCallDelta {
                    index: i,
                    delta: delta.to_string(),
                });
            }
            _ => {}
        }
    }

    /// Mutable access to block `i` (signatures, ids).
    pub fn block_mut(&mut self, i: usize) -> Option<&mut Content> {
        self.msg.content.get_mut(i)
    }

    /// Replace the raw argument text of tool block `i`, without an event (arguments a provider
    /// sends whole rather than as deltas).
    pub fn preset_args(&mut self, i: usize, raw: &str) {
        if let Some(a) = self.args.get_mut(i) {
            a.clear();
            a.push_str(raw);
        }
    }

    /// Raw tool arguments of block `i` so far.
    pub fn raw_args(&self, i: usize) -> &str {
        self.args.get(i).map(String::as_str).unwrap_or("")
    }

    /// Close block `i`, emitting its `*End` event.
    pub fn end_block(&mut self, i: usize, out: &mut Vec<StreamEvent>) {
        let args = self.args.get_mut(i).map(std::mem::take).unwrap_or_default();
        match self.msg.content.get_mut(i) {
            Some(Content::Text(TextContent {
                text,
                text_signature,
            })) => out.push(StreamEvent::TextEnd {
                index: i,
                content: text.clone(),
                signature: text_signature.clone(),
            }),
            Some(Content::Thinking(t)) => out.push(StreamEvent::ThinkingEnd {
                index: i,
                content: t.thinking.clone(),
                signature: t.thinking_signature.clone(),
            }),
            Some(Content::ToolCall(tc)) => {
                if self.tool_arguments_error {
                    // pi 1.6.0's `parseToolCallArguments`: the whole text or nothing.
                    match super::tool_args::parse_tool_arguments(&args) {
                        Ok(v) => tc.arguments = v,
                        Err(e) => {
                            tc.arguments = Value::Object(Default::default());
                            tc.arguments_error = Some(e);
                        }
                    }
                } else if !args.is_empty() {
                    // The reference's `parseStreamingJson`: what parses of a truncated text.
                    tc.arguments = parse_partial_json(&args);
                }
                out.push(StreamEvent::ToolCallEnd {
                    index: i,
                    tool_call: tc.clone(),
                });
            }
            _ => {}
        }
    }

    /// Replace the usage (cost recomputed) and report it.
    pub fn set_usage(&mut self, mut usage: Usage, out: &mut Vec<StreamEvent>) {
        usage.cost = if self.sdk.tiered_prices() {
            crate::llm::cost::calculate_tiered(&self.prices, &usage)
        } else {
            crate::llm::cost::calculate(&self.prices, &usage)
        };
        // pi-ai 1.5.0's `calculateCost` records that the cost is its own, whenever it runs: a
        // reply whose provider never reported usage (a stream cut before it) has no mark.
        if self.sdk.marks_cost_source() {
            usage.cost.total_from_provider = Some(false);
        }
        self.msg.usage = usage;
        if self.started {
            out.push(StreamEvent::Meta {
                usage,
                response_id: self.msg.response_id.clone(),
            });
        }
    }

    /// The stream completed: `Done`, or `Error` when the provider's stop reason maps to error.
    pub fn finish(&mut self, stop: StopReason, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        if matches!(stop, StopReason::Error | StopReason::Aborted) {
            self.fail(
                "An unknown error occurred".into(),
                stop == StopReason::Aborted,
                None,
                out,
            );
            return;
        }
        self.finished = true;
        self.msg.stop_reason = stop;
        out.push(StreamEvent::Done {
            message: self.msg.clone(),
        });
    }

    /// The stream failed: the final `Error` event carrying what was received so far.
    pub fn fail(
        &mut self,
        message: String,
        aborted: bool,
        retry_after_ms: Option<u64>,
        out: &mut Vec<StreamEvent>,
    ) {
        if self.finished {
            return;
        }
        self.finished = true;
        // Tool calls still streaming keep what their arguments parse to so far.
        for (i, raw) in self.args.iter().enumerate() {
            if !raw.is_empty() {
                if let Some(Content::ToolCall(tc)) = self.msg.content.get_mut(i) {
                    tc.arguments = parse_partial_json(raw);
                }
            }
        }
        self.msg.stop_reason = if aborted {
            StopReason::Aborted
        } else {
            StopReason::Error
        };
        let message = match &self.secret {
            Some(key) if message.contains(key.as_str()) => {
                message.replace(key.as_str(), "[redacted]")
            }
            _ => message,
        };
        self.msg.error_message = Some(message);
        out.push(StreamEvent::Error {
            message: self.msg.clone(),
            retry_after_ms,
        });
    }
}

/// A header's value (names compared case-insensitively).
pub fn header_of<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Final parse of tool-call arguments: the JSON value, or `{}` when it does not parse.
pub fn parse_args(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    parse_json_with_repair(raw).unwrap_or_else(|_| Value::Object(Default::default()))
}

/// Malformed string literals made valid as pi repairs them (both versions): raw control
/// characters inside strings escaped, a backslash before a character that cannot follow one
/// doubled. Text outside strings is left alone.
pub fn repair_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 16);
    let mut in_string = false;
    let mut chars = json.chars().peekable();
    while let Some(c) = chars.next() {
        if !in_string {
            out.push(c);
            in_string = c == '"';
            continue;
        }
        match c {
            '"' => {
                out.push(c);
                in_string = false;
            }
            '\\' => match chars.peek().copied() {
                None => out.push_str("\\\\"),
                Some('u') => {
                    let hex: String = chars.clone().skip(1).take(4).collect();
                    out.push_str("\\u");
                    chars.next();
                    if hex.len() == 4 && hex.chars().all(|h| h.is_ascii_hexdigit()) {
                        out.push_str(&hex);
                        for _ in 0..4 {
                            chars.next();
                        }
                    }
                }
                Some(n @ ('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't')) => {
                    out.push('\\');
                    out.push(n);
                    chars.next();
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
    }
    out
}

/// `JSON.parse`, then once more on the [`repair_json`]ed text when that changes anything.
pub fn parse_json_with_repair(json: &str) -> Result<Value, serde_json::Error> {
    match serde_json::from_str(json) {
        Ok(v) => Ok(v),
        Err(e) => {
            let repaired = repair_json(json);
            if repaired == json {
                Err(e)
            } else {
                serde_json::from_str(&repaired)
            }
        }
    }
}

/// Best-effort parse of possibly incomplete JSON (a tool call's arguments mid-stream): closes
/// open strings and containers, dropping a trailing incomplete key or token; `{}` when nothing
/// usable remains. As pi's: the whole text (repaired if need be), then its complete prefix, then
/// the complete prefix of the repaired text (partial-json keeps what it read before a bad
/// string, so the repaired text counts only when nothing of the original does).
pub fn parse_partial_json(s: &str) -> Value {
    let empty = || Value::Object(Default::default());
    if s.trim().is_empty() {
        return empty();
    }
    if let Ok(v) = parse_json_with_repair(s) {
        return v;
    }
    parse_partial_prefix(s)
        .or_else(|| parse_partial_prefix(&repair_json(s)))
        .unwrap_or_else(empty)
}

/// The longest complete prefix of `s` closed into a value: one pass over the input plus at most
/// three parse attempts.
fn parse_partial_prefix(s: &str) -> Option<Value> {
    let bytes = s.as_bytes();
    let mut stack: Vec<u8> = Vec::new();
    let mut in_string = false;
    let mut escape = false;
    let mut string_is_key = false;
    let mut expect_key = false;
    let mut last_safe: Option<(usize, Vec<u8>)> = None;
    for (i, &c) in bytes.iter().enumerate() {
        if in_string {
            if escape {
                escape = false;
            } else if c == b'\\' {
                escape = true;
            } else if c == b'"' {
                in_string = false;
                if !string_is_key {
                    last_safe = Some((i + 1, stack.clone()));
                }
            }
            continue;
        }
        match c {
            b'"' => {
                in_string = true;
                string_is_key = stack.last() == Some(&b'{') && expect_key;
            }
            b'{' | b'[' => {
                stack.push(c);
                expect_key = c == b'{';
                last_safe = Some((i + 1, stack.clone()));
            }
            b'}' | b']' => {
                stack.pop();
                expect_key = false;
                last_safe = Some((i + 1, stack.clone()));
            }
            b',' => {
                last_safe = Some((i, stack.clone()));
                expect_key = stack.last() == Some(&b'{');
            }
            b':' => expect_key = false,
            _ => {}
        }
    }
    let closers = |stack: &[u8]| -> String {
        stack
            .iter()
            .rev()
            .map(|&c| if c == b'{' { '}' } else { ']' })
            .collect()
    };
    let mut candidates = Vec::with_capacity(3);
    if in_string && !string_is_key {
        let cut = if escape { &s[..s.len() - 1] } else { s };
        candidates.push(format!("{cut}\"{}", closers(&stack)));
    }
    if !in_string {
        candidates.push(format!("{s}{}", closers(&stack)));
    }
    if let Some((pos, st)) = last_safe {
        candidates.push(format!("{}{}", &s[..pos], closers(&st)));
    }
    candidates
        .iter()
        .find_map(|c| serde_json::from_str::<Value>(c).ok())
        .filter(|v| v.is_object() || v.is_array())
}

/// Default `max_tokens` of an agent request (spec 8). pi 0.87.1 takes the model's own limit
/// (no 32000 cap) and clamps it to what the context window leaves ([`crate::llm::estimate`]).
pub fn default_max_tokens(req: &LlmRequest) -> u64 {
    if req.sdk.max_tokens_from_window() {
        let base = req.max_tokens.unwrap_or(req.model.max_tokens);
        crate::llm::estimate::clamp_max_tokens(req, base)
    } else {
        req.max_tokens
            .unwrap_or_else(|| req.model.max_tokens.min(32000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_repair_as_pi() {
        // Raw control characters in strings escaped, bad escapes doubled, valid ones kept.
        assert_eq!(repair_json("{\"a\":\"x\ty\ny\"}"), "{\"a\":\"x\\ty\\ny\"}");
        assert_eq!(
            repair_json(r#"{"a":"\q \u00e9 \uZZ"}"#),
            r#"{"a":"\\q \u00e9 \uZZ"}"#
        );
        assert_eq!(repair_json("{\"a\":\"\u{1}\"}"), "{\"a\":\"\\u0001\"}");
        // Outside strings nothing changes.
        assert_eq!(repair_json("{ \n \"a\" : 1 }"), "{ \n \"a\" : 1 }");
        assert_eq!(
            parse_json_with_repair("{\"p\":\"C:\\dir\"}").unwrap(),
            serde_json::json!({"p": "C:\\dir"})
        );
        assert_eq!(
            parse_args("{\"cmd\":\"a\tb\"}"),
            serde_json::json!({"cmd": "a\tb"})
        );
        // Mid-stream, a string with a raw control character is dropped (partial-json's answer).
        assert_eq!(parse_partial_json("{\"cmd\":\"a\tb"), serde_json::json!({}));
        assert_eq!(
            parse_partial_json("{\"a\":\"ok\",\"b\":\"\tx"),
            serde_json::json!({"a": "ok"})
        );
    }

    #[test]
    fn stainless_messages() {
        let anth = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            stainless_message(529, anth, false),
            r#"529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
        );
        assert_eq!(
            stainless_message(500, "upstream exploded", false),
            "500 upstream exploded"
        );
        assert_eq!(
            stainless_message(500, "", false),
            "500 status code (no body)"
        );
        let oai =
            r#"{"error":{"message":"Rate limit reached for requests","type":"x","code":null}}"#;
        assert_eq!(
            stainless_message(429, oai, true),
            "429 Rate limit reached for requests"
        );
        assert_eq!(
            stainless_message(400, r#"{"foo":1}"#, true),
            "400 status code (no body)"
        );
        let or = r#"{"error":{"message":"Provider returned error","metadata":{"raw":"boom"}}}"#;
        assert_eq!(
            stainless_message(502, or, true),
            "502 Provider returned error\nboom"
        );
    }

    #[test]
    fn partial_json() {
        use serde_json::json;
        assert_eq!(parse_partial_json(""), json!({}));
        assert_eq!(
            parse_partial_json(r#"{"command":"ec"#),
            json!({"command": "ec"})
        );
        assert_eq!(parse_partial_json(r#"{"comm"#), json!({}));
        assert_eq!(parse_partial_json(r#"{"a":1,"b"#), json!({"a": 1}));
        assert_eq!(parse_partial_json(r#"{"a":[1,2"#), json!({"a": [1, 2]}));
        assert_eq!(parse_partial_json(r#"{"a":"x\"#), json!({"a": "x"}));
        assert_eq!(
            parse_partial_json(r#"{"a":{"b":"c"},"d":"#),
            json!({"a": {"b": "c"}})
        );
        assert_eq!(
            parse_partial_json(r#"{"a":"q\"uote"#),
            json!({"a": "q\"uote"})
        );
        assert_eq!(parse_partial_json("not json"), json!({}));
    }
}
