//! Running one LLM request on its own OS thread.
//!
//! [`spawn`] starts a *stream thread* that builds the provider request, starts an *I/O thread*
//! for the blocking HTTP exchange, and turns the bytes it forwards (over a bounded channel) into
//! [`StreamEvent`]s via the SSE parser and the API's [`Decoder`]. Splitting the blocking socket
//! reads from the decoding lets the stream thread react at once to cancellation and to stalls
//! (no byte for `timeouts.stall`): it emits its final event and exits immediately, while the I/O
//! thread notices the closed channel after its current read (bounded by ureq's per-read
//! timeout) and drops the connection.
//!
//! Contract with the caller: events arrive in order, `Start` (once the provider answered) and
//! block events, then exactly one `Done` or `Error`, whatever happens (HTTP error, refused
//! connection, malformed data, stall, disconnect, cancel). The sink returning `false` means the
//! receiver is gone: the thread stops without further events.

use std::io::Read;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, select};
use serde_json::Value;

use crate::cancel::{CancelSource, CancelToken, cancel_pair};
use crate::llm::sse::{SseEvent, SseParser};
use crate::llm::{LlmRequest, Model, ModelCost, StreamEvent, http};
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

/// Largest error body we keep for an `errorMessage`.
const MAX_ERROR_BODY: usize = 1024 * 1024;
/// How much of a non-SSE success body is quoted in the error.
const PREVIEW_BYTES: usize = 4096;
/// Read size of the I/O thread.
const READ_CHUNK: usize = 16 * 1024;

pub type Sink = Box<dyn FnMut(StreamEvent) -> bool + Send>;

/// The running request. Dropping it cancels the request too.
pub struct StreamHandle {
    cancel: CancelSource,
    thread: Option<JoinHandle<()>>,
}

impl StreamHandle {
    /// Ask the stream to stop. Returns at once; the stream thread emits a final `Error`
    /// (`stopReason: "aborted"`) and exits without waiting for the network.
    pub fn cancel(&mut self) {
        self.cancel.cancel();
    }

    /// Wait for the stream thread to finish (tests; the state machine never blocks on it).
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Start `req` on a new thread; every event goes to `sink`.
pub fn spawn(req: LlmRequest, sink: Sink) -> StreamHandle {
    let (source, token) = cancel_pair();
    let thread = std::thread::Builder::new()
        .name(format!("llm-{}", req.model.id))
        .spawn(move || run(req, token, sink))
        .ok();
    StreamHandle {
        cancel: source,
        thread,
    }
}

fn run(req: LlmRequest, token: CancelToken, sink: Sink) {
    let mut em = Emitter { sink, alive: true };
    if req.model.api == "faux" {
        crate::llm::faux::run(&req, &token, &mut |ev| em.emit(ev));
        return;
    }
    let Some(api) = Api::from_name(&req.model.api) else {
        let mut b = Builder::new(&req.model);
        let mut out = Vec::new();
        b.fail(
            format!("No API provider registered for api: {}", req.model.api),
            false,
            None,
            &mut out,
        );
        em.emit_all(&mut out);
        return;
    };
    let mut builder = Builder::new(&req.model).redacting(req.api_key.as_deref());
    builder.compat = req.compat;
    let mut out = Vec::new();
    match api.prepare(&req) {
        Ok(prepared) => run_http(api, &req, prepared, &token, &mut builder, &mut em),
        Err(e) => {
            builder.fail(e, false, None, &mut out);
            em.emit_all(&mut out);
        }
    }
}

struct Emitter {
    sink: Sink,
    alive: bool,
}

impl Emitter {
    fn emit(&mut self, ev: StreamEvent) -> bool {
        if self.alive {
            self.alive = (self.sink)(ev);
        }
        self.alive
    }

    fn emit_all(&mut self, out: &mut Vec<StreamEvent>) -> bool {
        for ev in out.drain(..) {
            if !self.emit(ev) {
                return false;
            }
        }
        self.alive
    }
}

// ------------------------------------------------------------------------------------------------
// APIs

/// A ready-to-send provider request.
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// The serialised JSON body.
    pub body: Vec<u8>,
}

/// A body built as a value, serialised (`serde_json` cannot fail on a `Value`).
pub fn json_body(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).unwrap_or_default()
}

/// Decodes one API's SSE events into [`StreamEvent`]s, keeping the partial message in a
/// [`Builder`].
pub trait Decoder: Send {
    fn event(&mut self, ev: &SseEvent, b: &mut Builder, out: &mut Vec<StreamEvent>);
    /// The body ended cleanly; emit the final event if the stream has not already.
    fn end(&mut self, b: &mut Builder, out: &mut Vec<StreamEvent>);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    OpenAiCompletions,
    OpenAiResponses,
    Google,
}

impl Api {
    pub fn from_name(name: &str) -> Option<Api> {
        match name {
            "anthropic-messages" => Some(Api::Anthropic),
            "openai-completions" => Some(Api::OpenAiCompletions),
            "openai-responses" => Some(Api::OpenAiResponses),
            "google-generative-ai" => Some(Api::Google),
            _ => None,
        }
    }

    pub fn prepare(self, req: &LlmRequest) -> Result<Prepared, String> {
        use crate::llm::{anthropic, google, openai_completions, openai_responses};
        match self {
            Api::Anthropic => Ok(anthropic::prepare(req)),
            Api::OpenAiCompletions => Ok(openai_completions::prepare(req)),
            Api::OpenAiResponses => Ok(openai_responses::prepare(req)),
            Api::Google => Ok(google::prepare(req)),
        }
    }

    pub(crate) fn decoder(self, req: &LlmRequest) -> Box<dyn Decoder> {
        use crate::llm::{anthropic, google, openai_completions, openai_responses};
        match self {
            Api::Anthropic => Box::new(anthropic::Decoder::new(req)),
            Api::OpenAiCompletions => Box::new(openai_completions::Decoder::new(req)),
            Api::OpenAiResponses => Box::new(openai_responses::Decoder::new(req)),
            Api::Google => Box::new(google::Decoder::new(req)),
        }
    }

    /// The `errorMessage` for an HTTP error response (an HTML page or a long text reduced to
    /// what identifies the error: `error_body.rs`).
    pub fn http_error_message(self, status: u16, body: &str) -> String {
        let body = &*crate::llm::error_body::readable(body);
        match self {
            Api::Anthropic => stainless_message(status, body, false),
            Api::OpenAiCompletions | Api::OpenAiResponses => stainless_message(status, body, true),
            Api::Google => google_error_message(status, body),
        }
    }

    /// The error text of a connection that could not be made: the SDKs' wording.
    fn connection_error(self) -> &'static str {
        match self {
            Api::Google => FETCH_FAILED,
            _ => CONNECTION_ERROR,
        }
    }

    /// How many times a request is retried silently inside the stream. The reference's Stainless
    /// SDKs retry twice, invisibly to RPC clients; pith never does: every retry goes through
    /// auto-retry and shows as `auto_retry_start`/`auto_retry_end` (docs/rpc.md). The header
    /// `x-stainless-retry-count: 0` is still sent, as the SDKs do on a first attempt.
    fn sdk_max_retries(self) -> u32 {
        match self {
            Api::Anthropic | Api::OpenAiCompletions | Api::OpenAiResponses => 0,
            Api::Google => 0,
        }
    }
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

/// The Google SDK's error text: the JSON error body re-serialised compactly; a body that is not
/// JSON is wrapped as `{"error":{"message":…,"code":…,"status":<reason phrase>}}`.
fn google_error_message(status: u16, body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => v.to_string(),
        Err(_) => serde_json::json!({
            "error": {"message": body, "code": status, "status": reason_phrase(status)}
        })
        .to_string(),
    }
}

/// HTTP reason phrases (what Node's fetch reports as `statusText`).
fn reason_phrase(status: u16) -> &'static str {
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

// ------------------------------------------------------------------------------------------------
// The HTTP exchange

/// What the I/O thread reports.
enum Io {
    Response {
        status: u16,
        headers: Vec<(String, String)>,
    },
    Chunk(Vec<u8>),
    End,
    /// The request failed before a response (connect/timeout/other) or the body read failed.
    Failed(http::HttpError),
}

fn start_io(
    req: &LlmRequest,
    prepared: &Prepared,
    body: std::sync::Arc<Vec<u8>>,
    extra: Option<(String, String)>,
) -> Receiver<Io> {
    let (tx, rx) = bounded::<Io>(8);
    let timeouts = req.timeouts;
    let url = prepared.url.clone();
    let mut headers = prepared.headers.clone();
    if let Some(h) = extra {
        headers.push(h);
    }
    let spawned = std::thread::Builder::new()
        .name("llm-io".into())
        .spawn(move || {
            // Built here: creating the TLS config takes a moment the stream thread should not wait.
            let agent = http::agent(&timeouts);
            io_thread(&agent, &url, &headers, body, &tx);
        });
    if let Err(e) = spawned {
        let (tx, rx) = bounded::<Io>(1);
        let _ = tx.send(Io::Failed(http::HttpError::Other(e.to_string())));
        return rx;
    }
    rx
}

fn io_thread(
    agent: &ureq::Agent,
    url: &str,
    headers: &[(String, String)],
    body: std::sync::Arc<Vec<u8>>,
    tx: &Sender<Io>,
) {
    let resp = match http::post_json(agent, url, headers, &body) {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Io::Failed(e));
            return;
        }
    };
    if tx
        .send(Io::Response {
            status: resp.status,
            headers: resp.headers.clone(),
        })
        .is_err()
    {
        return;
    }
    let mut reader = resp.body;
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => {
                let _ = tx.send(Io::End);
                return;
            }
            Ok(n) => {
                if tx.send(Io::Chunk(buf[..n].to_vec())).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = tx.send(Io::Failed(http::HttpError::Other(e.to_string())));
                return;
            }
        }
    }
}

enum Wait<T> {
    Got(T),
    Cancelled,
    TimedOut,
    Closed,
}

fn wait_io(rx: &Receiver<Io>, token: &CancelToken, timeout: Duration) -> Wait<Io> {
    select! {
        recv(rx) -> m => match m {
            Ok(io) => Wait::Got(io),
            Err(_) => Wait::Closed,
        },
        recv(token.receiver()) -> _ => Wait::Cancelled,
        default(timeout) => Wait::TimedOut,
    }
}

/// Sleep `d` unless cancelled first; returns false when cancelled.
fn sleep_cancellable(token: &CancelToken, d: Duration) -> bool {
    matches!(
        token.receiver().recv_timeout(d),
        Err(RecvTimeoutError::Timeout)
    )
}

fn run_http(
    api: Api,
    req: &LlmRequest,
    mut prepared: Prepared,
    token: &CancelToken,
    b: &mut Builder,
    em: &mut Emitter,
) {
    let mut out = Vec::new();
    // Shared by every SDK-level attempt without copying (a long history is megabytes).
    let body = std::sync::Arc::new(std::mem::take(&mut prepared.body));
    let stainless = matches!(
        api,
        Api::Anthropic | Api::OpenAiCompletions | Api::OpenAiResponses
    );
    // Headers can be slow on a busy provider; the response wait is bounded by connect + stall.
    let header_wait = req.timeouts.connect + req.timeouts.stall + Duration::from_secs(1);
    let mut attempt = 0u32;
    loop {
        if token.is_cancelled() {
            b.fail(ABORTED_BEFORE_RESPONSE.into(), true, None, &mut out);
            em.emit_all(&mut out);
            return;
        }
        let extra = stainless.then(|| ("x-stainless-retry-count".to_string(), attempt.to_string()));
        let rx = start_io(req, &prepared, body.clone(), extra);
        let can_retry = attempt < api.sdk_max_retries();
        let outcome = match wait_io(&rx, token, header_wait) {
            Wait::Got(Io::Response { status, .. }) if (200..300).contains(&status) => {
                stream_body(api, req, &rx, token, b, em);
                return;
            }
            Wait::Got(Io::Response { status, headers }) => {
                let text = read_error_body(&rx, token, req.timeouts.stall);
                if token.is_cancelled() {
                    b.fail(ABORTED_BEFORE_RESPONSE.into(), true, None, &mut out);
                    em.emit_all(&mut out);
                    return;
                }
                let retry_after = retry_after_ms(&headers);
                let should = header(&headers, "x-should-retry");
                let retryable = match should {
                    Some("true") => true,
                    Some("false") => false,
                    _ => matches!(status, 408 | 409 | 429) || status >= 500,
                };
                if can_retry && retryable {
                    Err(retry_delay(attempt, retry_after))
                } else {
                    Ok((api.http_error_message(status, &text), retry_after))
                }
            }
            Wait::Got(Io::Failed(e)) => {
                let msg = match e {
                    http::HttpError::Connect(_) => api.connection_error().to_string(),
                    http::HttpError::Timeout(_) => TIMED_OUT.to_string(),
                    http::HttpError::Other(m) => m,
                };
                if can_retry && msg == api.connection_error() {
                    Err(retry_delay(attempt, None))
                } else {
                    Ok((msg, None))
                }
            }
            Wait::Got(_) | Wait::Closed => Ok((api.connection_error().to_string(), None)),
            Wait::TimedOut => Ok((TIMED_OUT.to_string(), None)),
            Wait::Cancelled => {
                b.fail(ABORTED_BEFORE_RESPONSE.into(), true, None, &mut out);
                em.emit_all(&mut out);
                return;
            }
        };
        match outcome {
            Ok((msg, retry_after)) => {
                b.fail(msg, false, retry_after, &mut out);
                em.emit_all(&mut out);
                return;
            }
            Err(delay) => {
                if !sleep_cancellable(token, delay) {
                    b.fail(ABORTED_BEFORE_RESPONSE.into(), true, None, &mut out);
                    em.emit_all(&mut out);
                    return;
                }
                attempt += 1;
            }
        }
    }
}

fn stream_body(
    api: Api,
    req: &LlmRequest,
    rx: &Receiver<Io>,
    token: &CancelToken,
    b: &mut Builder,
    em: &mut Emitter,
) {
    let mut decoder = api.decoder(req);
    let mut parser = SseParser::new();
    let mut events: Vec<SseEvent> = Vec::new();
    let mut out: Vec<StreamEvent> = Vec::new();
    let stall = req.timeouts.stall;
    // The start of a body that turns out not to be SSE (a JSON error sent with status 200).
    let mut preview: Vec<u8> = Vec::new();
    let mut saw_event = false;
    loop {
        match wait_io(rx, token, stall) {
            Wait::Got(Io::Chunk(bytes)) => {
                if let Err(e) = parser.feed(&bytes, &mut events) {
                    b.fail(e.to_string(), false, None, &mut out);
                }
                saw_event |= !events.is_empty();
                if !saw_event && preview.len() < PREVIEW_BYTES {
                    preview.extend_from_slice(
                        &bytes[..bytes.len().min(PREVIEW_BYTES - preview.len())],
                    );
                }
                for ev in events.drain(..) {
                    if b.finished {
                        break;
                    }
                    decoder.event(&ev, b, &mut out);
                }
            }
            Wait::Got(Io::End) => {
                parser.finish();
                let text = String::from_utf8_lossy(&preview);
                if !saw_event && !text.trim().is_empty() {
                    b.fail(
                        format!("Unexpected response from provider: {}", text.trim()),
                        false,
                        None,
                        &mut out,
                    );
                } else {
                    decoder.end(b, &mut out);
                }
            }
            Wait::Got(Io::Failed(_)) | Wait::Got(Io::Response { .. }) | Wait::Closed => {
                b.fail(TERMINATED.into(), false, None, &mut out);
            }
            Wait::Cancelled => b.fail(ABORTED_MID_STREAM.into(), true, None, &mut out),
            Wait::TimedOut => b.fail(
                format!(
                    "{TERMINATED}: no data from the provider for {} s",
                    stall.as_secs_f64()
                ),
                false,
                None,
                &mut out,
            ),
        }
        if !em.emit_all(&mut out) || b.finished {
            return;
        }
    }
}

fn read_error_body(rx: &Receiver<Io>, token: &CancelToken, stall: Duration) -> String {
    let mut body = Vec::new();
    while let Wait::Got(Io::Chunk(c)) = wait_io(rx, token, stall) {
        let room = MAX_ERROR_BODY.saturating_sub(body.len());
        body.extend_from_slice(&c[..c.len().min(room)]);
        if room == 0 {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// `retry-after-ms`, else `retry-after` in (possibly fractional) seconds.
pub fn retry_after_ms(headers: &[(String, String)]) -> Option<u64> {
    if let Some(ms) = header(headers, "retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(ms as u64);
        }
    }
    let secs = header(headers, "retry-after")?.trim().parse::<f64>().ok()?;
    (secs.is_finite() && secs >= 0.0).then_some((secs * 1000.0) as u64)
}

/// The Stainless SDK backoff: the server's hint when within 0..60 s, else 0.5 s · 2ⁿ capped at
/// 8 s, minus up to 25 % jitter.
fn retry_delay(attempt: u32, retry_after: Option<u64>) -> Duration {
    if let Some(ms) = retry_after {
        if ms < 60_000 {
            return Duration::from_millis(ms);
        }
    }
    let base = (0.5 * 2f64.powi(attempt as i32)).min(8.0);
    let jitter = 1.0 - pseudo_random() * 0.25;
    Duration::from_secs_f64(base * jitter)
}

fn pseudo_random() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1000) / 1000.0
}

// ------------------------------------------------------------------------------------------------
// The partial message

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
    /// The request's API key: blanked out of error messages (a proxy may echo it back).
    secret: Option<String>,
    /// The pi version whose message shapes the decoders produce: pi 0.87.1 adds
    /// `rawStopReason`, `usage.cacheWrite1h` (Anthropic) and `usage.reasoning`.
    pub compat: crate::compat::Compat,
}

impl Builder {
    pub fn new(model: &Model) -> Builder {
        Builder {
            msg: AssistantMessage::empty(&model.api, &model.provider, &model.id),
            prices: model.cost,
            started: false,
            finished: false,
            args: Vec::new(),
            secret: None,
            compat: Default::default(),
        }
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
        if !self.started {
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
        self.start(out);
        let i = self.push_block(Content::Thinking(ThinkingContent {
            thinking: String::new(),
            thinking_signature: None,
            redacted: None,
        }));
        out.push(StreamEvent::ThinkingStart { index: i });
        i
    }

    pub fn start_tool(&mut self, id: &str, name: &str, out: &mut Vec<StreamEvent>) -> usize {
        self.start(out);
        let i = self.push_block(Content::ToolCall(ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            arguments: Value::Object(Default::default()),
            thought_signature: None,
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
                if !args.is_empty() {
                    tc.arguments = parse_args(&args);
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
        usage.cost = if self.compat.is_087() {
            crate::llm::cost::calculate_087(&self.prices, &usage)
        } else {
            crate::llm::cost::calculate(&self.prices, &usage)
        };
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

/// Final parse of tool-call arguments: the JSON value, or `{}` when it does not parse.
pub fn parse_args(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::Object(Default::default()))
}

/// Best-effort parse of possibly incomplete JSON (a tool call's arguments mid-stream): closes
/// open strings and containers, dropping a trailing incomplete key or token; `{}` when nothing
/// usable remains. One pass over the input plus at most three parse attempts.
pub fn parse_partial_json(s: &str) -> Value {
    let empty = || Value::Object(Default::default());
    if s.trim().is_empty() {
        return empty();
    }
    if let Ok(v) = serde_json::from_str(s) {
        return v;
    }
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
        .unwrap_or_else(empty)
}

/// Default `max_tokens` of an agent request (spec 8).
pub fn default_max_tokens(req: &LlmRequest) -> u64 {
    req.max_tokens
        .unwrap_or_else(|| req.model.max_tokens.min(32000))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn retry_after_headers() {
        let h = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(retry_after_ms(&h("retry-after", "2")), Some(2000));
        assert_eq!(retry_after_ms(&h("retry-after", "0.5")), Some(500));
        assert_eq!(retry_after_ms(&h("retry-after-ms", "150")), Some(150));
        assert_eq!(
            retry_after_ms(&h("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")),
            None
        );
        assert_eq!(retry_after_ms(&[]), None);
    }
}
