//! The Streamable HTTP transport of MCP (spec 2025-06-18 / 2025-11-25), with the shape of a child
//! process ([`crate::io::child`]) so the state machine drives both alike: [`connect`] returns an
//! [`HttpHandle`] whose [`HttpHandle::write`] queues one JSON-RPC message without blocking, and
//! every message from the server arrives through `on_event` as [`ChildEvent::Line`].
//!
//! Threads, no async runtime: a dispatcher thread takes the queued messages in order; it POSTs
//! notifications and responses itself (the server acknowledges them with 202) and hands each
//! request to a thread of its own (at most [`MAX_IN_FLIGHT`] at once), which reads the answer: a
//! JSON body (one message or a batch) or an SSE stream (any number of server requests and
//! notifications, then the response). A response stream that drops before its response is
//! resumed with `GET` and `Last-Event-ID` when the server numbered its events. After
//! `notifications/initialized` a reader thread keeps the optional `GET` stream of
//! server-initiated messages open (405: the server offers none), reconnecting with backoff.
//!
//! Headers: `Accept: application/json, text/event-stream`, `Content-Type: application/json`,
//! `Mcp-Session-Id` once the server gave one, `MCP-Protocol-Version` once `initialize` answered
//! (read here from its result), the configured headers, and `Authorization: Bearer` with the
//! token pi stored in `mcp-auth.json` ([`super::auth`]) when no `Authorization` is configured.
//!
//! Failures never kill the connection: a request that fails gets a JSON-RPC error response with
//! its id (so only that call fails, and a failed `initialize` fails the start-up); network errors
//! and 408/429/5xx are retried twice (250 ms, 1 s) except for `tools/call`, which is retried only
//! when the connection could not be made (it may have run otherwise). 401: the stored token is
//! refreshed once and the request repeated; without a usable credential the error says to sign
//! in with pi. 404 on a session (the server forgot it): the session is renewed here (the same
//! `initialize` again, then `notifications/initialized`), the request repeated once, and a
//! `notifications/tools/list_changed` is delivered so the machine lists the tools again, as pi
//! lists them on its new connection. `Exited` comes once, after [`HttpHandle::close`] (the session
//! is `DELETE`d first) or when the machine stops listening.
//!
//! Bounds: a JSON body or one SSE event of at most `limits.max_line` bytes (the SSE parser's 16
//! MiB cap as well), at most `limits.max_lines_per_sec` messages per second (more is a `Flood`,
//! which stops the connection), `limits.write_queue` messages / `write_queue_bytes` queued.
//! Secrets (configured headers, tokens) never appear in events, errors or logs.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use serde_json::{Value, json};

use crate::io::child::{ChildEvent, Limits, WriteError};
use crate::llm::sse::{SseEvent, SseParser};
use crate::mcp::auth::{AuthError, AuthStore, Mutex};
use crate::mcp::protocol::{TRANSPORT_FAILURE_KEY, TransportFailure};

/// A remote MCP server.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpConfig {
    /// The server's name (errors, the credential lookup).
    pub name: String,
    pub url: String,
    /// Sent with every request (values final: variables already expanded).
    pub headers: Vec<(String, String)>,
    /// Longest wait for the next bytes of an answer (the machine enforces call deadlines).
    pub timeout: Duration,
    /// `<agentDir>/mcp-auth.json` (credentials pi stored), used when no `Authorization` header
    /// is configured.
    pub auth_file: Option<PathBuf>,
    /// The registered OAuth client of pi's `oauth` settings (refreshes use it, as pi's do).
    pub oauth_client: Option<crate::mcp::config::OAuthClient>,
}

impl HttpConfig {
    pub fn new(name: &str, url: &str) -> HttpConfig {
        HttpConfig {
            name: name.to_string(),
            url: url.to_string(),
            headers: Vec::new(),
            timeout: Duration::from_secs(60),
            auth_file: None,
            oauth_client: None,
        }
    }
}

/// Requests answered at once at most (a thread each).
pub const MAX_IN_FLIGHT: usize = 64;
/// Waits before the retries of a failed request (pi's connect retries).
const RETRY_DELAYS: [Duration; 2] = [Duration::from_millis(250), Duration::from_millis(1000)];
/// Reconnections of a dropped stream (pi's default), and their backoff.
const STREAM_RETRIES: u32 = 5;
const STREAM_DELAY: Duration = Duration::from_secs(1);
const STREAM_MAX_DELAY: Duration = Duration::from_secs(30);
const STREAM_MIN_DELAY: Duration = Duration::from_millis(20);
/// Resumptions of one response stream at most, however much each one delivered.
const MAX_RESUMES: u32 = 100;
/// Bytes of an error body kept (and 500 characters of it in the message).
const MAX_ERROR_BODY: u64 = 8 * 1024;
/// JSON-RPC's internal error.
const INTERNAL_ERROR: i64 = -32603;

/// The machine's handle on a connection.
pub struct HttpHandle {
    tx: Option<Sender<Vec<u8>>>,
    queued: Arc<AtomicUsize>,
    max_queued: usize,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for HttpHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the URL: it may carry a key.
        f.debug_struct("HttpHandle")
            .field("server", &self.shared.name)
            .finish()
    }
}

impl HttpHandle {
    /// Queue one message (serialised JSON). Never blocks.
    pub fn write(&self, msg: Vec<u8>) -> Result<(), WriteError> {
        let Some(tx) = &self.tx else {
            return Err(WriteError::Closed);
        };
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(WriteError::Closed);
        }
        let len = msg.len();
        let queued = self.queued.load(Ordering::Acquire);
        if queued > 0 && queued.saturating_add(len) > self.max_queued {
            return Err(WriteError::Full);
        }
        self.queued.fetch_add(len, Ordering::AcqRel);
        let r = match tx.try_send(msg) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Full(_)) => Err(WriteError::Full),
            Err(TrySendError::Disconnected(_)) => Err(WriteError::Closed),
        };
        self.queued.fetch_sub(len, Ordering::AcqRel);
        r
    }

    /// Stop: what is queued is sent, the session is `DELETE`d, then `Exited` is reported.
    /// Never blocks.
    pub fn close(&mut self) {
        self.tx = None;
    }

    /// Stop at once: nothing more is sent or reported (threads end at their next read).
    pub fn kill(&self) {
        self.shared.closed.store(true, Ordering::Release);
    }
}

impl Drop for HttpHandle {
    fn drop(&mut self) {
        self.tx = None;
    }
}

/// What every thread of one connection shares.
struct Shared {
    name: String,
    url: String,
    headers: Vec<(String, String)>,
    agent: ureq::Agent,
    auth: Option<AuthStore>,
    limits: Limits,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
    /// The `initialize` request as sent (replayed to renew an expired session).
    init: Mutex<Option<Vec<u8>>>,
    /// Held while a session is renewed.
    renewing: Mutex<()>,
    /// The last access token sent (the `DELETE` reuses it rather than refreshing).
    last_token: Mutex<Option<String>>,
    get_stream: AtomicBool,
    closed: AtomicBool,
    out: Mutex<Emitter>,
}

struct Emitter {
    on_event: Box<dyn FnMut(ChildEvent) -> bool + Send>,
    window: Instant,
    in_window: u32,
    /// No more messages are delivered.
    done: bool,
    exited: bool,
}

impl Shared {
    /// Hand a message to the machine; false once the connection is stopped.
    fn emit(&self, v: Value) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        let mut out = self.out.lock();
        if out.done {
            return false;
        }
        if out.window.elapsed() >= Duration::from_secs(1) {
            out.window = Instant::now();
            out.in_window = 0;
        }
        out.in_window += 1;
        if out.in_window > self.limits.max_lines_per_sec {
            out.done = true;
            self.closed.store(true, Ordering::Release);
            (out.on_event)(ChildEvent::Flood);
            return false;
        }
        if !(out.on_event)(ChildEvent::Line(v)) {
            out.done = true;
            self.closed.store(true, Ordering::Release);
            return false;
        }
        true
    }

    /// The final event (once; also after a flood or a kill, so the machine's shutdown does
    /// not wait for it).
    fn exited(&self, status: &str) {
        let mut out = self.out.lock();
        out.done = true;
        if !out.exited {
            out.exited = true;
            (out.on_event)(ChildEvent::Exited {
                status: status.to_string(),
                stderr_tail: None,
            });
        }
        self.closed.store(true, Ordering::Release);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// A JSON-RPC error answering our request `id`.
    fn fail(&self, id: &Value, message: &str) {
        self.emit(json!({"jsonrpc": "2.0", "id": id, "error": {"code": INTERNAL_ERROR, "message": message}}));
    }

    /// [`Self::fail`] for a failure of the transport itself, its kind in `data` (read back by
    /// [`crate::mcp::protocol::RpcError::transport`]) so pi's client can word it as pi does.
    fn fail_as(&self, id: &Value, message: &str, kind: TransportFailure) {
        self.emit(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": INTERNAL_ERROR,
            "message": message, "data": {TRANSPORT_FAILURE_KEY: kind.as_str()}}}),
        );
    }

    fn configured_auth(&self) -> bool {
        self.headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
    }

    /// Headers of one request, and the token sent.
    fn headers(&self, extra: &[(&str, &str)]) -> (Vec<(String, String)>, Option<String>) {
        let mut h: Vec<(String, String)> = self.headers.clone();
        let mut set = |k: &str, v: String| {
            h.retain(|(n, _)| !n.eq_ignore_ascii_case(k));
            h.push((k.to_string(), v));
        };
        for (k, v) in extra {
            set(k, v.to_string());
        }
        if let Some(s) = self.session.lock().clone() {
            set("Mcp-Session-Id", s);
        }
        if let Some(p) = self.protocol.lock().clone() {
            set("MCP-Protocol-Version", p);
        }
        let token = match &self.auth {
            Some(a) if !self.configured_auth() => a.token(),
            _ => None,
        };
        if let Some(t) = &token {
            set("Authorization", format!("Bearer {t}"));
        }
        *self.last_token.lock() = token.clone();
        (h, token)
    }

    fn sign_in_message(&self) -> String {
        format!(
            "MCP server \"{}\" needs sign-in: run `pi mcp login {}` once (pith cannot open a browser)",
            self.name, self.name
        )
    }

    fn sleep(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        while Instant::now() < end {
            if self.is_closed() {
                return false;
            }
            std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
        }
        !self.is_closed()
    }
}

/// Connect to `cfg.url`. Nothing is sent before the first [`HttpHandle::write`]; `on_event` runs
/// on the connection's threads (one at a time); returning false stops the connection.
pub fn connect(
    cfg: &HttpConfig,
    limits: Limits,
    on_event: Box<dyn FnMut(ChildEvent) -> bool + Send>,
) -> Result<HttpHandle, String> {
    let Some(url) = crate::mcp::auth::normalize_url(&cfg.url) else {
        // Not echoed: a URL may carry a key.
        return Err("\"url\" must be an http:// or https:// URL".to_string());
    };
    let timeouts = crate::llm::Timeouts {
        connect: Duration::from_secs(30),
        stall: cfg.timeout + Duration::from_secs(30),
    };
    let auth = cfg
        .auth_file
        .as_ref()
        .and_then(|f| AuthStore::new(f.clone(), &cfg.name, &url, cfg.oauth_client.clone()));
    let shared = Arc::new(Shared {
        name: cfg.name.clone(),
        url: cfg.url.clone(),
        headers: cfg.headers.clone(),
        agent: crate::llm::http::agent(&timeouts),
        auth,
        limits,
        session: Mutex::new(None),
        protocol: Mutex::new(None),
        init: Mutex::new(None),
        renewing: Mutex::new(()),
        last_token: Mutex::new(None),
        get_stream: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        out: Mutex::new(Emitter {
            on_event,
            window: Instant::now(),
            in_window: 0,
            done: false,
            exited: false,
        }),
    });
    let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(limits.write_queue.max(1));
    let queued = Arc::new(AtomicUsize::new(0));
    let q = queued.clone();
    let s = shared.clone();
    std::thread::Builder::new()
        .name(format!("mcp-http-{}", cfg.name))
        .stack_size(crate::llm::http::IO_THREAD_STACK)
        .spawn(move || dispatch(s, rx, &q))
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    Ok(HttpHandle {
        tx: Some(tx),
        queued,
        max_queued: limits.write_queue_bytes,
        shared,
    })
}

/// The dispatcher: messages in order until the handle closes, then the session's `DELETE`.
fn dispatch(shared: Arc<Shared>, rx: Receiver<Vec<u8>>, queued: &AtomicUsize) {
    let (slot_tx, slot_rx) = crossbeam_channel::bounded::<()>(MAX_IN_FLIGHT);
    while let Ok(msg) = rx.recv() {
        queued.fetch_sub(msg.len(), Ordering::AcqRel);
        if shared.is_closed() {
            break;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&msg) else {
            continue;
        };
        let method = v.get("method").and_then(Value::as_str).map(str::to_string);
        let id = v.get("id").filter(|i| !i.is_null()).cloned();
        match (method, id) {
            (Some(method), Some(id)) => {
                if method == "initialize" {
                    *shared.init.lock() = Some(msg.clone());
                }
                // A free slot (blocks while MAX_IN_FLIGHT requests run).
                if slot_tx.send(()).is_err() {
                    break;
                }
                let s = shared.clone();
                let slot = slot_rx.clone();
                let started = std::thread::Builder::new()
                    .name(format!("mcp-http-req-{}", shared.name))
                    .stack_size(crate::llm::http::IO_THREAD_STACK)
                    .spawn(move || {
                        request(&s, &method, &id, &msg);
                        let _ = slot.recv();
                    });
                if started.is_err() {
                    let _ = slot_rx.recv();
                    let id = v.get("id").cloned().unwrap_or(Value::Null);
                    shared.fail(&id, "cannot start a thread for the request");
                }
            }
            (method, _) => {
                post_one_way(&shared, &msg, true);
                if method.as_deref() == Some("notifications/initialized") {
                    start_get_stream(&shared);
                }
            }
        }
    }
    if !shared.is_closed() {
        delete_session(&shared);
    }
    shared.exited("connection closed");
}

/// A response as read.
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Box<dyn Read + Send>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn content_type(&self) -> String {
        self.header("content-type")
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    }
    fn error_text(self) -> String {
        let mut buf = Vec::new();
        let _ = self.body.take(MAX_ERROR_BODY).read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).trim().to_string()
    }
}

/// Why no usable response came.
enum Failure {
    /// No connection (nothing reached the server).
    Connect(String),
    /// A network failure after sending, or a timeout.
    Network(String),
    Other(String),
}

fn send(
    shared: &Shared,
    agent: &ureq::Agent,
    method: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
) -> Result<Resp, Failure> {
    let url = shared.url.as_str();
    let result = match method {
        "GET" => {
            let mut req = agent.get(url);
            for (k, v) in headers {
                req = req.header(k.as_str(), v.as_str());
            }
            req.call()
        }
        "DELETE" => {
            let mut req = agent.delete(url);
            for (k, v) in headers {
                req = req.header(k.as_str(), v.as_str());
            }
            req.call()
        }
        _ => {
            let mut req = agent.post(url);
            for (k, v) in headers {
                req = req.header(k.as_str(), v.as_str());
            }
            req.send(body.unwrap_or_default())
        }
    };
    match result {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let headers = resp
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_ascii_lowercase(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            Ok(Resp {
                status,
                headers,
                body: Box::new(resp.into_body().into_reader()),
            })
        }
        // ureq's messages name neither headers nor tokens.
        Err(e) => Err(match e {
            ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => {
                Failure::Connect(e.to_string())
            }
            ureq::Error::Io(ref io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
                Failure::Connect(e.to_string())
            }
            ureq::Error::Timeout(_) | ureq::Error::Io(_) | ureq::Error::Tls(_) => {
                Failure::Network(e.to_string())
            }
            other => Failure::Other(other.to_string()),
        }),
    }
}

fn transient(status: u16) -> bool {
    status == 408 || status == 429 || status >= 500
}

/// 401, or 403 asking for more scope.
fn needs_authorization(resp: &Resp) -> bool {
    resp.status == 401
        || (resp.status == 403
            && resp
                .header("www-authenticate")
                .is_some_and(|h| h.to_ascii_lowercase().contains("insufficient_scope")))
}

fn describe_status(status: u16, body: &str) -> String {
    let snippet: String = if body.chars().count() > 500 {
        let mut s: String = body.chars().take(497).collect();
        s.push_str("...");
        s
    } else {
        body.to_string()
    };
    if snippet.is_empty() {
        format!("MCP HTTP request failed with status {status}")
    } else {
        format!("MCP HTTP request failed with status {status}: {snippet}")
    }
}

/// What to do after an authorization failure.
enum AuthNext {
    Retry,
    Fail(String),
    /// No usable credential, or the configured `Authorization` was refused.
    Refused(String, TransportFailure),
}

/// A 401 (or a 403 asking for scope): refresh the stored credential once, or say how to sign in.
fn on_unauthorized(shared: &Shared, resp: Resp, token: Option<&str>, tried: bool) -> AuthNext {
    let status = resp.status;
    let insufficient = status == 403;
    drop(resp);
    if shared.configured_auth() {
        return AuthNext::Refused(
            format!(
                "MCP server \"{}\" refused the configured Authorization header (HTTP {status})",
                shared.name
            ),
            TransportFailure::AuthRefused,
        );
    }
    let Some(auth) = &shared.auth else {
        return AuthNext::Refused(shared.sign_in_message(), TransportFailure::SignIn);
    };
    if tried || insufficient {
        return AuthNext::Refused(shared.sign_in_message(), TransportFailure::SignIn);
    }
    match auth.refresh(token) {
        Ok(()) => AuthNext::Retry,
        Err(AuthError::NeedsSignIn) => {
            AuthNext::Refused(shared.sign_in_message(), TransportFailure::SignIn)
        }
        Err(AuthError::Failed(e)) => AuthNext::Fail(format!(
            "MCP server \"{}\": cannot refresh its sign-in: {e}",
            shared.name
        )),
    }
}

/// Which recoveries a POST gets besides a refreshed sign-in (every POST gets that).
struct Recover {
    /// Retry a connection that broke after it was made (a connection that could not be made
    /// is always retried: the server never saw the message).
    broken_connection: bool,
    /// Retry a transient status (429, 5xx).
    transient: bool,
    /// Open a new session, once, when the server forgot this one (404).
    renew_session: bool,
}

/// What a POST came to.
enum Posted {
    /// A 2xx answer (its session id captured).
    Answer(Resp),
    /// The server could not be reached.
    Unreachable(String),
    /// The server answered with a failure.
    Failed(String),
    /// Not authorised (see [`AuthNext::Refused`]).
    Refused(String, TransportFailure),
    /// The connection was closed while waiting to retry.
    Closed,
}

/// POST `msg`, with the recoveries of `recover` and the retry delays between attempts.
fn post(shared: &Shared, msg: &[u8], recover: Recover) -> Posted {
    let mut auth_tried = false;
    let mut renewed = false;
    let mut attempt = 0;
    loop {
        if shared.is_closed() {
            return Posted::Closed;
        }
        let used = shared.session.lock().clone();
        let (headers, token) = shared.headers(&[
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ]);
        let may_retry = attempt < RETRY_DELAYS.len();
        match send(shared, &shared.agent, "POST", &headers, Some(msg)) {
            Ok(resp) if needs_authorization(&resp) => {
                match on_unauthorized(shared, resp, token.as_deref(), auth_tried) {
                    AuthNext::Retry => {
                        auth_tried = true;
                        continue;
                    }
                    AuthNext::Fail(e) => return Posted::Failed(e),
                    AuthNext::Refused(e, kind) => return Posted::Refused(e, kind),
                }
            }
            Ok(resp) if resp.status == 404 && used.is_some() => {
                drop(resp);
                // The server forgot the session, so it did not take the message.
                if renewed || !recover.renew_session {
                    return Posted::Failed("MCP session expired".into());
                }
                renewed = true;
                if let Err(e) = renew_session(shared, used.as_deref()) {
                    return Posted::Failed(e);
                }
                continue;
            }
            Ok(resp) if transient(resp.status) && recover.transient && may_retry => drop(resp),
            Ok(resp) if !(200..300).contains(&resp.status) => {
                let status = resp.status;
                return Posted::Failed(describe_status(status, &resp.error_text()));
            }
            Ok(resp) => {
                capture_session(shared, &resp);
                return Posted::Answer(resp);
            }
            Err(Failure::Connect(_)) if may_retry => {}
            Err(Failure::Network(_)) if recover.broken_connection && may_retry => {}
            Err(Failure::Connect(e) | Failure::Network(e) | Failure::Other(e)) => {
                return Posted::Unreachable(e);
            }
        }
        if !shared.sleep(RETRY_DELAYS[attempt]) {
            return Posted::Closed;
        }
        attempt += 1;
    }
}

/// POST a notification or a response: the server acknowledges it (202), nothing comes back.
fn post_one_way(shared: &Shared, msg: &[u8], may_renew: bool) {
    let recover = Recover {
        broken_connection: true,
        transient: true,
        renew_session: may_renew,
    };
    let failure = match post(shared, msg, recover) {
        Posted::Answer(_) | Posted::Closed => return,
        Posted::Unreachable(e) | Posted::Failed(e) | Posted::Refused(e, _) => e,
    };
    eprintln!(
        "pith: MCP server {}: a notification was not delivered: {failure}",
        shared.name
    );
}

fn capture_session(shared: &Shared, resp: &Resp) {
    if let Some(s) = resp.header("mcp-session-id").filter(|s| !s.is_empty()) {
        *shared.session.lock() = Some(s.to_string());
    }
}

/// One request: POST it, read its answer (every message goes to the machine), or answer it with
/// an error. A `tools/call` is not repeated once the server may have seen it (it may not be
/// idempotent); anything else is.
fn request(shared: &Shared, method: &str, id: &Value, msg: &[u8]) {
    let retry_any = method != "tools/call";
    let recover = Recover {
        broken_connection: retry_any,
        transient: retry_any,
        renew_session: method != "initialize",
    };
    let resp = match post(shared, msg, recover) {
        Posted::Answer(resp) => resp,
        Posted::Closed => return,
        Posted::Unreachable(e) => {
            let e = format!("MCP server \"{}\" cannot be reached: {e}", shared.name);
            return shared.fail_as(id, &e, TransportFailure::Unreachable);
        }
        Posted::Failed(e) => return shared.fail(id, &e),
        Posted::Refused(e, kind) => return shared.fail_as(id, &e, kind),
    };
    let initialize = method == "initialize";
    let mut forward = |v: Value| {
        if initialize {
            note_protocol(shared, id, &v);
        }
        shared.emit(v)
    };
    if let Err(e) = read_answer(shared, resp, method, id, &mut forward) {
        shared.fail(id, &e);
    }
}

/// The protocol version the server chose in its `initialize` result (sent from then on).
fn note_protocol(shared: &Shared, id: &Value, v: &Value) {
    if v.get("id") == Some(id) {
        if let Some(p) = v.pointer("/result/protocolVersion").and_then(Value::as_str) {
            *shared.protocol.lock() = Some(p.to_string());
        }
    }
}

/// Read the answer to request `id`: every message goes to `sink` (which returns false to stop).
/// `Err` when the answer never came.
fn read_answer(
    shared: &Shared,
    resp: Resp,
    method: &str,
    id: &Value,
    sink: &mut dyn FnMut(Value) -> bool,
) -> Result<(), String> {
    if resp.status == 202 || resp.status == 204 {
        // pi 1.6.0's words.
        return Err(format!(
            "MCP server accepted request {method} without a response"
        ));
    }
    match resp.content_type().as_str() {
        "application/json" => {
            let max = shared.limits.max_line;
            let mut buf = Vec::new();
            resp.body
                .take(max as u64 + 1)
                .read_to_end(&mut buf)
                .map_err(|e| format!("MCP response could not be read: {e}"))?;
            if buf.len() > max {
                return Err(format!("MCP JSON response exceeds {max} bytes"));
            }
            let body: Value = serde_json::from_slice(&buf)
                .map_err(|e| format!("MCP response is not JSON: {e}"))?;
            let items = match body {
                Value::Array(a) => a,
                one => vec![one],
            };
            let mut answered = false;
            for v in items {
                answered |= v.get("id") == Some(id) && v.get("method").is_none();
                if !sink(v) {
                    return Ok(());
                }
            }
            if answered {
                Ok(())
            } else {
                Err("MCP JSON response did not answer the request".into())
            }
        }
        "text/event-stream" => response_stream(shared, resp.body, id, sink),
        other => Err(format!(
            "Unsupported MCP response content type: {}",
            if other.is_empty() { "missing" } else { other }
        )),
    }
}

/// Where a stream is, for resuming it.
#[derive(Default)]
struct Cursor {
    last_id: Option<String>,
    retry: Option<Duration>,
    received: bool,
}

/// Read SSE events until the stream ends; JSON-RPC messages go to `on_message` (false: stop).
/// `Ok(true)` when stopped by `on_message`.
fn read_sse(
    shared: &Shared,
    mut body: Box<dyn Read + Send>,
    cursor: &mut Cursor,
    on_message: &mut dyn FnMut(Value) -> bool,
) -> Result<bool, String> {
    let max = shared.limits.max_line;
    let mut parser = SseParser::new();
    let mut buf = vec![0u8; 32 * 1024];
    let mut events: Vec<SseEvent> = Vec::new();
    loop {
        if shared.is_closed() {
            return Ok(true);
        }
        let n = match body.read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("stream broke: {e}")),
        };
        parser
            .feed(&buf[..n], &mut events)
            .map_err(|e| e.to_string())?;
        for ev in events.drain(..) {
            if let Some(id) = ev.id.as_ref().filter(|i| !i.contains('\0')) {
                cursor.last_id = Some(id.clone());
            }
            if let Some(r) = ev.retry {
                cursor.retry = Some(Duration::from_millis(r));
            }
            cursor.received = true;
            if ev.data.trim().is_empty() || ev.event.as_deref().is_some_and(|e| e != "message") {
                continue;
            }
            if ev.data.len() > max {
                return Err(format!("MCP SSE event exceeds {max} bytes"));
            }
            match serde_json::from_str::<Value>(&ev.data) {
                Ok(v) => {
                    if !on_message(v) {
                        return Ok(true);
                    }
                }
                Err(e) => eprintln!(
                    "pith: MCP server {}: ignored an event that is not JSON: {e}",
                    shared.name
                ),
            }
        }
    }
}

fn stream_delay(attempt: u32, server: Option<Duration>) -> Duration {
    match server {
        // The server's `retry:`, but never a busy loop.
        Some(d) => d.max(STREAM_MIN_DELAY),
        None => (STREAM_DELAY * 2u32.saturating_pow(attempt)).min(STREAM_MAX_DELAY),
    }
}

/// The SSE stream answering request `id`, resumed with `GET` + `Last-Event-ID` when it ends
/// before the response and the server numbered its events.
fn response_stream(
    shared: &Shared,
    body: Box<dyn Read + Send>,
    id: &Value,
    sink: &mut dyn FnMut(Value) -> bool,
) -> Result<(), String> {
    let mut cursor = Cursor::default();
    let mut answered = false;
    let mut stream = Some(body);
    let mut failure: Option<String> = None;
    let mut attempt = 0u32;
    let mut resumes = 0u32;
    loop {
        if let Some(body) = stream.take() {
            let mut on_message = |v: Value| {
                if v.get("id") == Some(id) && v.get("method").is_none() {
                    answered = true;
                }
                sink(v)
            };
            match read_sse(shared, body, &mut cursor, &mut on_message) {
                Ok(true) => return Ok(()),
                Ok(false) => failure = None,
                Err(e) => failure = Some(e),
            }
        }
        if answered || shared.is_closed() {
            return Ok(());
        }
        if cursor.last_id.is_none() || attempt >= STREAM_RETRIES || resumes >= MAX_RESUMES {
            break;
        }
        resumes += 1;
        if cursor.received {
            attempt = 0;
        }
        cursor.received = false;
        if !shared.sleep(stream_delay(attempt, cursor.retry)) {
            return Ok(());
        }
        attempt += 1;
        match open_get(shared, cursor.last_id.as_deref()) {
            Ok(Some(b)) => stream = Some(b),
            Ok(None) => {
                failure = Some("the server cannot resume the stream (HTTP 405)".into());
                break;
            }
            Err((e, retryable)) => {
                failure = Some(e);
                if !retryable {
                    break;
                }
            }
        }
    }
    Err(format!(
        "MCP response stream failed: {}",
        failure.unwrap_or_else(|| "stream ended without a response".into())
    ))
}

/// Open a `GET` stream (`None`: 405, the server offers none). Errors say whether retrying helps.
fn open_get(
    shared: &Shared,
    last_id: Option<&str>,
) -> Result<Option<Box<dyn Read + Send>>, (String, bool)> {
    let mut auth_tried = false;
    loop {
        let mut extra = vec![("Accept", "text/event-stream")];
        if let Some(l) = last_id {
            extra.push(("Last-Event-ID", l));
        }
        let (headers, token) = shared.headers(&extra);
        let resp = match send(shared, &shared.agent, "GET", &headers, None) {
            Ok(r) => r,
            Err(Failure::Connect(e) | Failure::Network(e)) => return Err((e, true)),
            Err(Failure::Other(e)) => return Err((e, false)),
        };
        if resp.status == 405 {
            return Ok(None);
        }
        if needs_authorization(&resp) {
            match on_unauthorized(shared, resp, token.as_deref(), auth_tried) {
                AuthNext::Retry => {
                    auth_tried = true;
                    continue;
                }
                AuthNext::Fail(e) | AuthNext::Refused(e, _) => return Err((e, false)),
            }
        }
        if !(200..300).contains(&resp.status) {
            let status = resp.status;
            let text = resp.error_text();
            return Err((describe_status(status, &text), transient(status)));
        }
        capture_session(shared, &resp);
        if resp.content_type() != "text/event-stream" {
            return Err((
                format!(
                    "Unsupported MCP GET response content type: {}",
                    resp.content_type()
                ),
                false,
            ));
        }
        return Ok(Some(resp.body));
    }
}

/// The server-to-client stream, once per session.
fn start_get_stream(shared: &Arc<Shared>) {
    if shared.get_stream.swap(true, Ordering::AcqRel) {
        return;
    }
    let s = shared.clone();
    let started = std::thread::Builder::new()
        .name(format!("mcp-http-get-{}", shared.name))
        .stack_size(crate::llm::http::IO_THREAD_STACK)
        .spawn(move || {
            get_stream(&s);
            s.get_stream.store(false, Ordering::Release);
        });
    if started.is_err() {
        shared.get_stream.store(false, Ordering::Release);
    }
}

fn get_stream(shared: &Shared) {
    let mut cursor = Cursor::default();
    let mut attempt = 0u32;
    while !shared.is_closed() {
        match open_get(shared, cursor.last_id.as_deref()) {
            Ok(None) => return,
            Ok(Some(body)) => {
                let opened = Instant::now();
                let mut on_message = |v: Value| shared.emit(v);
                if let Ok(true) = read_sse(shared, body, &mut cursor, &mut on_message) {
                    return;
                }
                if cursor.received || opened.elapsed() > STREAM_MAX_DELAY {
                    attempt = 0;
                }
            }
            Err((e, retryable)) => {
                if shared.is_closed() {
                    return;
                }
                if !retryable {
                    eprintln!(
                        "pith: MCP server {}: the server-to-client stream failed: {e}",
                        shared.name
                    );
                    return;
                }
            }
        }
        cursor.received = false;
        if attempt >= STREAM_RETRIES {
            eprintln!(
                "pith: MCP server {}: the server-to-client stream dropped and could not be reopened",
                shared.name
            );
            return;
        }
        if !shared.sleep(stream_delay(attempt, cursor.retry)) {
            return;
        }
        attempt += 1;
    }
}

/// The server forgot session `used`: start a new one with the same `initialize` (unless another
/// request already did), then `notifications/initialized`; the machine is told to list the
/// tools again.
fn renew_session(shared: &Shared, used: Option<&str>) -> Result<(), String> {
    let _g = shared.renewing.lock();
    if shared.session.lock().as_deref() != used {
        return Ok(());
    }
    let Some(init) = shared.init.lock().clone() else {
        return Err("MCP session expired".into());
    };
    let id = serde_json::from_slice::<Value>(&init)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .unwrap_or(Value::Null);
    *shared.session.lock() = None;
    *shared.protocol.lock() = None;
    let (headers, _) = shared.headers(&[
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
    ]);
    let resp = match send(shared, &shared.agent, "POST", &headers, Some(&init)) {
        Ok(r) => r,
        Err(Failure::Connect(e) | Failure::Network(e) | Failure::Other(e)) => {
            return Err(format!("MCP session expired and a new one failed: {e}"));
        }
    };
    if !(200..300).contains(&resp.status) {
        let status = resp.status;
        return Err(format!(
            "MCP session expired and a new one failed: {}",
            describe_status(status, &resp.error_text())
        ));
    }
    capture_session(shared, &resp);
    let mut result: Option<Value> = None;
    let mut sink = |v: Value| {
        if v.get("id") == Some(&id) && v.get("method").is_none() {
            result = Some(v);
            true
        } else {
            shared.emit(v)
        }
    };
    read_answer(shared, resp, "initialize", &id, &mut sink)
        .map_err(|e| format!("MCP session expired and a new one failed: {e}"))?;
    let Some(answer) = result else {
        return Err("MCP session expired and a new one failed".into());
    };
    if let Some(e) = answer.get("error") {
        let msg = e.get("message").and_then(Value::as_str).unwrap_or("error");
        return Err(format!(
            "MCP session expired and a new one failed: initialize: {msg}"
        ));
    }
    note_protocol(shared, &id, &answer);
    let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    post_one_way(shared, note, false);
    eprintln!(
        "pith: MCP server {}: the session expired; a new one started",
        shared.name
    );
    shared.emit(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    Ok(())
}

/// `DELETE` the session (best effort, one second).
fn delete_session(shared: &Shared) {
    let Some(session) = shared.session.lock().clone() else {
        return;
    };
    let mut headers = shared.headers.clone();
    headers.retain(|(k, _)| {
        !k.eq_ignore_ascii_case("mcp-session-id") && !k.eq_ignore_ascii_case("authorization")
            || (k.eq_ignore_ascii_case("authorization") && shared.configured_auth())
    });
    headers.push(("Mcp-Session-Id".into(), session));
    if let Some(p) = shared.protocol.lock().clone() {
        headers.push(("MCP-Protocol-Version".into(), p));
    }
    if !shared.configured_auth() {
        if let Some(t) = shared.last_token.lock().clone() {
            headers.push(("Authorization".into(), format!("Bearer {t}")));
        }
    }
    let agent = crate::llm::http::agent(&crate::llm::Timeouts {
        connect: Duration::from_secs(1),
        stall: Duration::from_secs(1),
    });
    if let Ok(resp) = send(shared, &agent, "DELETE", &headers, None) {
        drop(resp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_keep_500_characters_of_the_body() {
        assert_eq!(
            describe_status(500, ""),
            "MCP HTTP request failed with status 500"
        );
        let long = "x".repeat(600);
        let m = describe_status(502, &long);
        assert!(m.ends_with("..."));
        assert_eq!(
            m.len(),
            "MCP HTTP request failed with status 502: ".len() + 500
        );
    }

    #[test]
    fn stream_backoff_doubles_and_caps_and_obeys_the_server() {
        assert_eq!(stream_delay(0, None), Duration::from_secs(1));
        assert_eq!(stream_delay(3, None), Duration::from_secs(8));
        assert_eq!(stream_delay(10, None), STREAM_MAX_DELAY);
        assert_eq!(
            stream_delay(4, Some(Duration::from_millis(50))),
            Duration::from_millis(50)
        );
        assert_eq!(stream_delay(0, Some(Duration::ZERO)), STREAM_MIN_DELAY);
    }

    #[test]
    fn a_bad_url_is_refused_before_anything_starts() {
        let cfg = HttpConfig::new("x", "file:///etc/passwd");
        let limits = Limits {
            max_line: 1024,
            max_lines_per_sec: 10,
            write_queue: 4,
            write_queue_bytes: 1024,
        };
        let e = connect(&cfg, limits, Box::new(|_| true)).err().unwrap();
        assert!(e.starts_with("\"url\" must be an http"), "{e}");
    }
}
