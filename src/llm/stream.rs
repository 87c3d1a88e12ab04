//! Running one LLM request on its own OS thread.
//!
//! [`spawn`] starts a *stream thread* that builds the provider request (on a worker thread when
//! that needs files or the network: OAuth refresh, cloud credentials), starts an *I/O thread*
//! for the blocking HTTP exchange, and turns the bytes it forwards (over a bounded channel) into
//! [`StreamEvent`]s via the API's framing (SSE or the AWS event stream) and [`Decoder`]. The
//! APIs are the [`WireApi`] values of [`APIS`]; their contract lives in `api.rs`. Splitting the blocking socket
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

use crate::cancel::{CancelSource, CancelToken, cancel_pair};
use crate::llm::api::Body;
use crate::llm::body::{self, Measured, WriteBody};
use crate::llm::sse::{SseEvent, SseParser};
use crate::llm::{LlmRequest, StreamEvent, http};

pub use crate::llm::api::{
    ABORTED_BEFORE_RESPONSE, ABORTED_MID_STREAM, Builder, CONNECTION_ERROR, Decoder, FETCH_FAILED,
    Framing, Prepared, TERMINATED, TIMED_OUT, WireApi, default_max_tokens, json_body, parse_args,
    parse_partial_json, stainless_message,
};

/// Every wire API pith speaks, by `model.api`: one entry per API module.
pub const APIS: &[&dyn WireApi] = &[
    &crate::llm::anthropic::API,
    &crate::llm::openai_completions::API,
    &crate::llm::openai_responses::API,
    &crate::llm::google::API,
    &crate::llm::mistral::API,
    &crate::llm::bedrock::API,
    &crate::llm::azure_openai::API,
    &crate::llm::openai_codex::API,
    &crate::llm::google_vertex::API,
];

/// The API implementing `name`, if pith speaks it.
pub fn api_for(name: &str) -> Option<&'static dyn WireApi> {
    APIS.iter().copied().find(|a| a.name() == name)
}

/// Largest error body we keep for an `errorMessage`.
const MAX_ERROR_BODY: usize = 1024 * 1024;
/// How much of a non-SSE success body is quoted in the error.
pub(crate) const PREVIEW_BYTES: usize = 4096;
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
        .stack_size(crate::THREAD_STACK)
        .spawn(move || run(req, token, sink))
        .ok();
    StreamHandle {
        cancel: source,
        thread,
    }
}

fn run(mut req: LlmRequest, token: CancelToken, sink: Sink) {
    crate::llm::transcript::normalize(&mut req);
    let mut em = Emitter { sink, alive: true };
    if req.model.api == "faux" {
        crate::llm::faux::run(&req, &token, &mut |ev| em.emit(ev));
        return;
    }
    let mut out = Vec::new();
    let Some(api) = api_for(&req.model.api) else {
        let mut b = Builder::new(&req.model);
        b.fail(
            format!("No API provider registered for api: {}", req.model.api),
            false,
            None,
            &mut out,
        );
        em.emit_all(&mut out);
        return;
    };
    let (req, prepared) = if api.prepare_blocks()
        || crate::llm::oauth::needs_refresh_check(&req)
        || req.extra.auth.is_some()
    {
        // Credentials may need the network (token refresh), the disk or a `!command`: off this
        // thread, so a cancel is answered at once.
        let mut b = Builder::new(&req.model).redacting(req.api_key.as_deref());
        b.msg.provider_thinking_level = api.provider_thinking_level(&req);
        match prepare_on_worker(api, req, &token) {
            Ok(done) => done,
            Err(e) => {
                let aborted = e.is_none();
                let msg = e.unwrap_or_else(|| ABORTED_BEFORE_RESPONSE.to_string());
                b.fail(msg, aborted, None, &mut out);
                em.emit_all(&mut out);
                return;
            }
        }
    } else {
        let prepared = api.prepare(&req);
        (req, prepared)
    };
    let mut builder = Builder::new(&req.model).redacting(req.api_key.as_deref());
    builder.sdk = req.sdk;
    builder.tool_arguments_error = req.tool_arguments_error;
    builder.msg.provider_thinking_level = api.provider_thinking_level(&req);
    // Shared with the thread that writes a large body onto the connection (`body.rs`).
    let req = std::sync::Arc::new(req);
    match prepared {
        Ok(prepared) => run_http(api, &req, prepared, &token, &mut builder, &mut em),
        Err(e) => {
            builder.fail(e, false, None, &mut out);
            em.emit_all(&mut out);
        }
    }
}

/// Credentials ([`crate::llm::oauth`]) and [`WireApi::prepare`] on a worker thread. `Err(None)`:
/// cancelled first; `Err(Some(e))`: the worker could not start.
#[allow(clippy::type_complexity)]
fn prepare_on_worker(
    api: &'static dyn WireApi,
    req: LlmRequest,
    token: &CancelToken,
) -> Result<(LlmRequest, Result<Prepared, String>), Option<String>> {
    let (tx, rx) = bounded(1);
    let cancel = token.clone();
    let spawned = std::thread::Builder::new()
        .name("llm-prepare".into())
        .stack_size(crate::llm::http::IO_THREAD_STACK)
        .spawn(move || {
            let mut req = req;
            let prepared = match resolve_auth(&mut req, &cancel)
                .and_then(|()| crate::llm::oauth::resolve(&mut req, &cancel))
            {
                Ok(()) => api.prepare(&req),
                Err(e) => Err(e),
            };
            let _ = tx.send((req, prepared));
        });
    if let Err(e) = spawned {
        return Err(Some(e.to_string()));
    }
    select! {
        recv(rx) -> done => done.map_err(|_| Some("the credential worker stopped".to_string())),
        recv(token.receiver()) -> _ => Err(None),
    }
}

/// The request's `!command` credentials ([`crate::llm::RequestExtra::auth`]), run here (a
/// cancel kills the command): the key and the resolved headers go into `req`.
fn resolve_auth(req: &mut LlmRequest, cancel: &CancelToken) -> Result<(), String> {
    let Some(plan) = req.extra.auth.take() else {
        return Ok(());
    };
    let resolved = plan.resolve(cancel)?;
    req.api_key = resolved.api_key;
    if let Some(h) = resolved.headers {
        let map = h
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect();
        req.model.headers = Some(map);
    }
    Ok(())
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

/// A request body as the I/O thread sends it.
#[derive(Clone)]
enum IoBody {
    Bytes(std::sync::Arc<Vec<u8>>),
    /// `len` bytes written by `write` while they are sent.
    Stream {
        write: WriteBody,
        len: u64,
        req: std::sync::Arc<LlmRequest>,
    },
}

fn start_io(
    req: &LlmRequest,
    prepared: &Prepared,
    body: IoBody,
    early: Option<body::Streamed>,
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
        .stack_size(crate::llm::http::IO_THREAD_STACK)
        .spawn(move || {
            // Built here: creating the TLS config takes a moment the stream thread should not wait.
            let agent = match body {
                IoBody::Stream { .. } => http::agent_sized(&timeouts, http::UPLOAD_BUFFER),
                IoBody::Bytes(_) => http::agent(&timeouts),
            };
            io_thread(&agent, &url, &headers, body, early, &tx);
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
    body: IoBody,
    early: Option<body::Streamed>,
    tx: &Sender<Io>,
) {
    let sent = match body {
        IoBody::Bytes(bytes) => http::post_json(agent, url, headers, &bytes),
        IoBody::Stream { write, len, req } => {
            match early.map_or_else(|| body::spawn(write, req), Ok) {
                Ok(reader) => http::post_streamed(agent, url, headers, len, reader),
                Err(e) => Err(http::HttpError::Other(e.to_string())),
            }
        }
    };
    let resp = match sent {
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
    api: &dyn WireApi,
    req: &std::sync::Arc<LlmRequest>,
    mut prepared: Prepared,
    token: &CancelToken,
    b: &mut Builder,
    em: &mut Emitter,
) {
    let mut out = Vec::new();
    // Shared by every SDK-level attempt without copying (a long history is megabytes), or, when
    // large, written onto the connection again for each attempt.
    // A long history's body is written twice: counted here, then written again while it is
    // sent. The second writer starts now, so that its setup (the transform and plan of 20,000
    // messages) and its first chunks are done on another core while this pass counts.
    let mut early = None;
    let body = match std::mem::replace(&mut prepared.body, Body::Bytes(Vec::new())) {
        Body::Bytes(b) => IoBody::Bytes(std::sync::Arc::new(b)),
        Body::Write(write) => {
            let long = body::counts_from_start(req);
            if long {
                early = body::spawn(write, std::sync::Arc::clone(req)).ok();
            }
            match body::measure(write, req, long) {
                Measured::Bytes(b) => IoBody::Bytes(std::sync::Arc::new(b)),
                Measured::Stream(len) => IoBody::Stream {
                    write,
                    len,
                    req: std::sync::Arc::clone(req),
                },
            }
        }
    };
    let stainless = api.stainless();
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
        // (Only the first attempt can use the early writer; a retry writes the body again.)
        let early = if matches!(body, IoBody::Stream { .. }) {
            early.take()
        } else {
            None
        };
        let rx = start_io(req, &prepared, body.clone(), early, extra);
        // pith never retries inside the stream (the SDKs do, invisibly): every retry goes through
        // auto-retry and shows as `auto_retry_start`/`auto_retry_end` (docs/rpc.md).
        let can_retry = false;
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
                    b.msg.diagnostics = api
                        .error_diagnostics(req, status, &headers, &text)
                        .map(Box::new);
                    // An HTML page or a long text reduced to what identifies the error.
                    let text = crate::llm::error_body::readable(&text);
                    Ok((
                        api.http_error_message(req, status, &headers, &text),
                        retry_after,
                    ))
                }
            }
            Wait::Got(Io::Failed(e)) => {
                let msg = match e {
                    http::HttpError::Connect(_, Some(cause))
                        if req.sdk.error_causes() && api.connection_error_cause() =>
                    {
                        format!("{}: {cause}", api.connection_error(req))
                    }
                    http::HttpError::Connect(..) => api.connection_error(req).to_string(),
                    http::HttpError::Timeout(_) => TIMED_OUT.to_string(),
                    http::HttpError::Other(m) => m,
                };
                if can_retry && msg.starts_with(api.connection_error(req)) {
                    Err(retry_delay(attempt, None))
                } else {
                    Ok((msg, None))
                }
            }
            Wait::Got(_) | Wait::Closed => Ok((api.connection_error(req).to_string(), None)),
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
    api: &dyn WireApi,
    req: &LlmRequest,
    rx: &Receiver<Io>,
    token: &CancelToken,
    b: &mut Builder,
    em: &mut Emitter,
) {
    let mut decoder = api.decoder(req);
    let mut parser = Framer::new(api.framing());
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
                    b.fail(e, false, None, &mut out);
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
                end_of_body(
                    parser.finish(),
                    saw_event,
                    &preview,
                    decoder.as_mut(),
                    b,
                    &mut out,
                );
            }
            Wait::Got(Io::Failed(e)) if req.sdk.error_causes() => {
                // undici's `terminated` with its cause, as pi 1.6.0 shows it.
                let cause = if e.to_string().to_ascii_lowercase().contains("reset") {
                    "read ECONNRESET"
                } else {
                    "other side closed (UND_ERR_SOCKET)"
                };
                b.fail(format!("{TERMINATED}: {cause}"), false, None, &mut out);
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

/// Cuts a response body into frames for the decoder (see [`Framing`]).
enum Framer {
    Sse(SseParser),
    EventStream(crate::llm::aws::Framer),
}

impl Framer {
    fn new(framing: Framing) -> Framer {
        match framing {
            Framing::Sse => Framer::Sse(SseParser::new()),
            Framing::EventStream => Framer::EventStream(Default::default()),
        }
    }

    fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), String> {
        match self {
            Framer::Sse(p) => p.feed(bytes, out).map_err(|e| e.to_string()),
            Framer::EventStream(p) => p.feed(bytes, out),
        }
    }

    /// The body ended; `Err` when it ended inside a frame that must be whole.
    fn finish(&mut self) -> Result<(), String> {
        match self {
            Framer::Sse(p) => {
                p.finish();
                Ok(())
            }
            Framer::EventStream(p) => p.finish(),
        }
    }
}

/// The body ended (shared with the fuzz harness, `harness.rs`): a frame cut at the end fails the
/// stream; a body that never gave an event but held text is an unexpected response; otherwise
/// the decoder ends the stream. Never an event after the final one.
pub(crate) fn end_of_body(
    framing: Result<(), String>,
    saw_event: bool,
    preview: &[u8],
    decoder: &mut dyn Decoder,
    b: &mut Builder,
    out: &mut Vec<StreamEvent>,
) {
    if let Err(e) = framing {
        b.fail(e, false, None, out);
    }
    let text = String::from_utf8_lossy(preview);
    if !saw_event && !text.trim().is_empty() {
        b.fail(
            format!("Unexpected response from provider: {}", text.trim()),
            false,
            None,
            out,
        );
    } else if !b.finished {
        decoder.end(b, out);
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

pub use crate::llm::api::header_of as header;

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
#[cfg(test)]
mod tests {
    use super::*;

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
