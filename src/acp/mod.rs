//! `pith --mode acp`: the Agent Client Protocol (protocol version 1), JSON-RPC 2.0 lines on
//! stdin and stdout (docs/acp.md).
//!
//! Threads: the stdin reader and the stdout writer of RPC mode (`io/`), one front-end thread
//! (this module's [`Front`], on the main thread) that owns every ACP-level state, and per session
//! one state machine — the machine RPC mode runs, started as RPC mode starts it with the
//! session's working directory — on its own thread with its own channels and workers
//! (`session.rs`). The front end writes pi RPC commands into a session's input channel and reads
//! its frames back (in process, never on stdout), translating them into `session/update`
//! notifications and the answers of the client's requests. A session's machine never sees
//! another's commands, so a `session/cancel` only ever aborts its own run. The front end never
//! blocks on a session: a full input queue is an error answer, and frames are taken as they come.

pub mod client;
pub mod difftool;
pub mod map;
pub mod session;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crossbeam_channel::{Receiver, Select, Sender};
use serde_json::{Value, json};

use crate::cli::{self, Options};
use crate::io::stdin::Input;
use crate::io::watch::Control;
use map::{Mode, Verdict};
use session::{Info, ModelRef, Ready};

/// The ACP protocol version pith speaks.
pub const PROTOCOL_VERSION: u64 = 1;

// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;
const NOT_FOUND: i64 = -32002;

/// Run pith as an ACP agent until the client closes stdin.
pub fn run(opts: Options) -> i32 {
    for w in &opts.warnings {
        eprintln!("{w}");
    }
    let (input_tx, input_rx) = crossbeam_channel::bounded(64);
    let (out_tx, out_rx) = crossbeam_channel::bounded(crate::io::stdout::QUEUE_FRAMES);
    let (control_tx, control_rx) = crossbeam_channel::unbounded();
    let spawned = (|| {
        crate::io::stdin::spawn(input_tx)?;
        crate::io::stdout::spawn(out_rx, control_tx)
    })();
    let writer = match spawned {
        Ok(w) => w,
        Err(e) => {
            eprintln!("pith: cannot start threads: {e}");
            return cli::EXIT_FAILURE;
        }
    };
    let mut front = Front::new(opts, out_tx);
    front.run(&input_rx, &control_rx);
    drop(front);
    let _ = writer.join();
    cli::EXIT_OK
}

/// An open `session/new` or `session/load` waiting for its session to start.
enum Opening {
    New(Value),
    Load(Value),
    /// `session/resume`: loaded like `session/load`, answered without the replay.
    Resume(Value),
}

/// How `session/new`, `session/load` and `session/resume` open a session.
#[derive(Clone, Copy, PartialEq)]
enum How {
    New,
    Load,
    Resume,
}

/// What a command sent to a session's machine waits for.
enum Waiter {
    /// The `prompt` command: a failure answers the `session/prompt` request.
    Prompt,
    /// `set_model` / `set_thinking_level` for `session/set_config_option` (its request id, and
    /// the thinking level asked for).
    Config(Value, Option<String>),
    /// `get_commands`: becomes `available_commands_update`.
    Commands,
    /// Nothing: sent without an id (an `abort`, a dialog's answer).
    Nothing,
}

/// A tool call the session has seen start.
struct Call {
    tool: String,
    args: Value,
    /// `details.acpDiff` of a write or edit (the file before and after).
    diff: Option<Value>,
    /// The client's terminal a `bash` ran in.
    terminal: Option<Value>,
}

/// A `permission_request` waiting for its `confirm` dialog.
struct Asking {
    call_id: String,
    tool: String,
    rule: Option<String>,
}

/// A request pith sent the client, waiting for its answer.
enum Outgoing {
    /// `session/request_permission` for the session's dialog `dialog` (a permission ask of the
    /// call's `tool` when `tool` is set, else an extension's confirm).
    Permission {
        key: u64,
        dialog: String,
        tool: Option<String>,
    },
    /// A tool's request (`fs/*`, `terminal/*`): the answer goes back to its thread.
    Call(Sender<Result<Value, String>>),
}

struct Sess {
    key: u64,
    /// pith's session id (the session file's), which is the ACP session id.
    id: String,
    cwd: PathBuf,
    input: Sender<Input>,
    frames: Receiver<Vec<u8>>,
    thread: Option<std::thread::JoinHandle<()>>,
    opening: Option<Opening>,
    /// The `session/prompt` request being run.
    prompt: Option<Value>,
    cancelled: bool,
    /// How the last run ended (`agent_end`): a stop reason, or the error.
    ended: Option<Result<&'static str, String>>,
    limit_hit: bool,
    calls: HashMap<String, Call>,
    asking: Option<Asking>,
    /// "Always" answers, by tool name.
    always: HashMap<String, bool>,
    mode: Mode,
    model: Option<ModelRef>,
    models: Vec<ModelRef>,
    thinking: String,
    /// The session's cost so far (`usage_update`).
    cost: f64,
    seq: u64,
    waiting: HashMap<String, Waiter>,
}

pub struct Front {
    opts: Options,
    out: Sender<Vec<u8>>,
    offered: client::Offered,
    calls_tx: Sender<client::ClientCall>,
    calls_rx: Receiver<client::ClientCall>,
    sessions: Vec<Sess>,
    next_key: u64,
    next_request: u64,
    outgoing: HashMap<u64, Outgoing>,
    ready_tx: Sender<Ready>,
    ready_rx: Receiver<Ready>,
    input_closed: bool,
    /// The stdout writer reported that stdout is gone (it is not listened to any more).
    output_gone: bool,
}

fn s_param<'a>(params: &'a Value, key: &str) -> Option<&'a str> {
    params.get(key).and_then(Value::as_str)
}

impl Front {
    pub fn new(opts: Options, out: Sender<Vec<u8>>) -> Front {
        let (ready_tx, ready_rx) = crossbeam_channel::unbounded();
        let (calls_tx, calls_rx) = crossbeam_channel::unbounded();
        Front {
            opts,
            out,
            offered: client::Offered::default(),
            calls_tx,
            calls_rx,
            sessions: Vec::new(),
            next_key: 1,
            next_request: 0,
            outgoing: HashMap::new(),
            ready_tx,
            ready_rx,
            input_closed: false,
            output_gone: false,
        }
    }

    fn run(&mut self, input: &Receiver<Input>, control: &Receiver<Control>) {
        loop {
            if self.input_closed && self.sessions.is_empty() {
                return;
            }
            enum Got {
                Input(Input),
                Control,
                Ready(Ready),
                Call(client::ClientCall),
                Frame(u64, Option<Vec<u8>>),
            }
            let got = {
                let mut sel = Select::new();
                let i_input = (!self.input_closed).then(|| sel.recv(input));
                let i_control = (!self.output_gone).then(|| sel.recv(control));
                let i_ready = sel.recv(&self.ready_rx);
                let i_calls = sel.recv(&self.calls_rx);
                let frames: Vec<(usize, u64)> = self
                    .sessions
                    .iter()
                    .map(|s| (sel.recv(&s.frames), s.key))
                    .collect();
                let op = sel.select();
                let i = op.index();
                if Some(i) == i_input {
                    Got::Input(op.recv(input).unwrap_or(Input::Eof))
                } else if Some(i) == i_control {
                    let _ = op.recv(control);
                    Got::Control
                } else if i == i_calls {
                    match op.recv(&self.calls_rx) {
                        Ok(c) => Got::Call(c),
                        Err(_) => continue,
                    }
                } else if i == i_ready {
                    match op.recv(&self.ready_rx) {
                        Ok(r) => Got::Ready(r),
                        Err(_) => continue,
                    }
                } else {
                    let Some(&(_, key)) = frames.iter().find(|(j, _)| *j == i) else {
                        continue;
                    };
                    let Some(s) = self.sessions.iter().find(|s| s.key == key) else {
                        continue;
                    };
                    Got::Frame(key, op.recv(&s.frames).ok())
                }
            };
            match got {
                Got::Input(Input::Json(v)) => self.on_client(v),
                Got::Input(Input::Invalid(reason)) => {
                    self.error(&Value::Null, PARSE_ERROR, &format!("Parse error: {reason}"))
                }
                Got::Input(Input::Oversized { bytes }) => self.error(
                    &Value::Null,
                    PARSE_ERROR,
                    &format!("Parse error: a line of {bytes} bytes exceeds the limit"),
                ),
                Got::Input(Input::Eof) => self.close_all(),
                Got::Control => {
                    // stdout is gone: nobody can read anything more.
                    self.output_gone = true;
                    self.close_all();
                }
                Got::Ready(r) => self.on_ready(r),
                Got::Call(c) => self.request(c.method, c.params, Outgoing::Call(c.reply)),
                Got::Frame(key, Some(line)) => {
                    if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                        self.on_frame(key, v);
                    }
                }
                Got::Frame(key, None) => self.on_session_end(key),
            }
        }
    }

    /// The client closed stdin: every session's run is aborted and its input closed; pith ends
    /// when their machines have.
    fn close_all(&mut self) {
        self.input_closed = true;
        for s in &mut self.sessions {
            let _ = s.input.try_send(Input::Json(json!({"type": "abort"})));
            let (tx, _) = crossbeam_channel::bounded(1);
            s.input = tx;
        }
    }

    fn on_session_end(&mut self, key: u64) {
        if let Some(i) = self.sessions.iter().position(|s| s.key == key) {
            let mut s = self.sessions.remove(i);
            if let Some(t) = s.thread.take() {
                let _ = t.join();
            }
            if let Some(id) = s.prompt.take() {
                self.error(&id, INTERNAL_ERROR, "the session ended");
            }
            if let Some(Opening::New(id) | Opening::Load(id) | Opening::Resume(id)) =
                s.opening.take()
            {
                self.error(&id, INTERNAL_ERROR, "the session could not start");
            }
        }
    }

    // ---- output ----

    fn write(&self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap_or_default();
        line.push(b'\n');
        let _ = self.out.send(line);
    }

    fn respond(&self, id: &Value, result: Value) {
        self.write(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn error(&self, id: &Value, code: i64, message: &str) {
        self.write(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }

    fn update(&self, session_id: &str, update: Value) {
        if session_id.is_empty() {
            // A closed session (`session/close` clears its id): its last frames are not news.
            return;
        }
        self.write(&json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session_id, "update": update}}));
    }

    fn request(&mut self, method: &str, params: Value, purpose: Outgoing) {
        let id = self.next_request;
        self.next_request += 1;
        self.outgoing.insert(id, purpose);
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    /// Send a pi RPC command to a session's machine (with an id when `waiter` wants its answer).
    fn command(&mut self, key: u64, mut cmd: Value, waiter: Waiter) -> Result<(), String> {
        let Some(s) = self.sessions.iter_mut().find(|s| s.key == key) else {
            return Err("no such session".into());
        };
        if matches!(waiter, Waiter::Nothing) {
            // Fire and forget (a dialog's answer keeps its own `id`).
            return s
                .input
                .try_send(Input::Json(cmd))
                .map_err(|_| "the session is busy; try again".to_string());
        }
        s.seq += 1;
        let id = format!("acp-{}", s.seq);
        cmd["id"] = json!(id);
        s.input
            .try_send(Input::Json(cmd))
            .map_err(|_| "the session is busy; try again".to_string())?;
        s.waiting.insert(id, waiter);
        Ok(())
    }

    // ---- client messages ----

    fn on_client(&mut self, v: Value) {
        let Value::Object(obj) = &v else {
            return self.error(&Value::Null, INVALID_REQUEST, "Invalid request");
        };
        let id = obj.get("id").cloned();
        let params = obj.get("params").cloned().unwrap_or(json!({}));
        match (obj.get("method").and_then(Value::as_str), id) {
            (Some(method), Some(id)) => self.on_request(method, id, params),
            (Some(method), None) => self.on_notification(method, &params),
            (None, Some(id)) => self.on_answer(&id, obj.get("result"), obj.get("error")),
            (None, None) => self.error(&Value::Null, INVALID_REQUEST, "Invalid request"),
        }
    }

    fn on_request(&mut self, method: &str, id: Value, params: Value) {
        match method {
            "initialize" => self.initialize(&id, &params),
            "authenticate" => self.respond(&id, json!({})),
            "session/new" => self.open(id, &params, How::New),
            "session/load" => self.open(id, &params, How::Load),
            "session/resume" => self.open(id, &params, How::Resume),
            "session/close" => self.close(&id, &params),
            "session/prompt" => self.prompt(id, &params),
            "session/set_mode" => self.set_mode(&id, &params),
            "session/set_config_option" => self.set_config_option(id, &params),
            "session/list" => self.list(&id, &params),
            _ => self.error(
                &id,
                METHOD_NOT_FOUND,
                &format!("Method not found: {method}"),
            ),
        }
    }

    fn on_notification(&mut self, method: &str, params: &Value) {
        if method == "session/cancel" {
            let Some(key) = self.key_of(s_param(params, "sessionId").unwrap_or("")) else {
                return;
            };
            if let Some(s) = self.sessions.iter_mut().find(|s| s.key == key) {
                if s.prompt.is_some() {
                    s.cancelled = true;
                }
            }
            let _ = self.command(key, json!({"type": "abort"}), Waiter::Nothing);
        }
        // Other notifications (`$/cancel_request`, extensions') need nothing.
    }

    fn initialize(&mut self, id: &Value, params: &Value) {
        let caps = params.get("clientCapabilities");
        let flag = |path: &[&str]| {
            let mut v = caps;
            for k in path {
                v = v.and_then(|x| x.get(k));
            }
            v.and_then(Value::as_bool).unwrap_or(false)
        };
        self.offered = client::Offered {
            read: flag(&["fs", "readTextFile"]),
            write: flag(&["fs", "writeTextFile"]),
            terminal: flag(&["terminal"]),
        };
        self.respond(
            id,
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "agentCapabilities": {
                    "loadSession": true,
                    "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                    "mcpCapabilities": {"http": true, "sse": false},
                    "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
                },
                "authMethods": [],
                "agentInfo": {"name": "pith", "title": "pith", "version": env!("CARGO_PKG_VERSION")},
            }),
        );
    }

    fn key_of(&self, session_id: &str) -> Option<u64> {
        self.sessions
            .iter()
            .find(|s| s.id == session_id && s.opening.is_none())
            .map(|s| s.key)
    }

    fn session_dir(&self, cwd: &Path) -> PathBuf {
        match &self.opts.session_dir {
            Some(d) => PathBuf::from(d),
            None => crate::session::store::default_session_dir(
                &crate::config::agent_dir(),
                &cwd.to_string_lossy(),
            ),
        }
    }

    /// `session/new` and `session/load`: start the session's machine; the answer comes when it
    /// is ready ([`Front::on_ready`]).
    fn open(&mut self, id: Value, params: &Value, how: How) {
        let cwd = match s_param(params, "cwd") {
            Some(c) if Path::new(c).is_absolute() => PathBuf::from(c),
            _ => return self.error(&id, INVALID_PARAMS, "cwd must be an absolute path"),
        };
        if !cwd.is_dir() {
            return self.error(
                &id,
                INVALID_PARAMS,
                &format!("cwd {} is not a directory", cwd.display()),
            );
        }
        let mcp = match mcp_servers(params.get("mcpServers")) {
            Ok(m) => m,
            Err(e) => return self.error(&id, INVALID_PARAMS, &e),
        };
        let mut file = None;
        let mut session_id = String::new();
        if how != How::New {
            let Some(sid) = s_param(params, "sessionId") else {
                return self.error(&id, INVALID_PARAMS, "sessionId is required");
            };
            if self.sessions.iter().any(|s| s.id == sid) {
                return self.error(&id, INVALID_PARAMS, "the session is already open");
            }
            match crate::app::find_session_by_id(&self.session_dir(&cwd), sid) {
                Some(p) => file = Some(p),
                None => {
                    return self.error(&id, NOT_FOUND, &format!("Session not found: {sid}"));
                }
            }
            session_id = sid.to_string();
        }
        let key = self.next_key;
        self.next_key += 1;
        let spec = session::Spec {
            key,
            opts: self.opts.clone(),
            cwd: cwd.clone(),
            load: file,
            mcp,
            offered: self.offered,
            calls: self.calls_tx.clone(),
        };
        let handle = match session::spawn(spec, self.ready_tx.clone()) {
            Ok(h) => h,
            Err(e) => {
                return self.error(&id, INTERNAL_ERROR, &format!("cannot start a session: {e}"));
            }
        };
        self.sessions.push(Sess {
            key,
            id: session_id,
            cwd,
            input: handle.input,
            frames: handle.frames,
            thread: Some(handle.thread),
            opening: Some(match how {
                How::New => Opening::New(id),
                How::Load => Opening::Load(id),
                How::Resume => Opening::Resume(id),
            }),
            prompt: None,
            cancelled: false,
            ended: None,
            limit_hit: false,
            calls: HashMap::new(),
            asking: None,
            always: HashMap::new(),
            mode: Mode::Ask,
            model: None,
            models: Vec::new(),
            thinking: String::new(),
            cost: 0.0,
            seq: 0,
            waiting: HashMap::new(),
        });
    }

    /// `session/close`: the session's run is cancelled (its prompt answers `cancelled`) and its
    /// machine ends; the id is no longer addressable (it can be loaded or resumed again).
    fn close(&mut self, id: &Value, params: &Value) {
        let Some(key) = self.key_of(s_param(params, "sessionId").unwrap_or("")) else {
            return self.error(id, NOT_FOUND, "Session not found");
        };
        if let Some(s) = self.sessions.iter_mut().find(|s| s.key == key) {
            if s.prompt.is_some() {
                s.cancelled = true;
            }
            let _ = s.input.try_send(Input::Json(json!({"type": "abort"})));
            let (tx, _) = crossbeam_channel::bounded(1);
            s.input = tx;
            s.id.clear();
        }
        self.respond(id, json!({}));
    }

    fn on_ready(&mut self, r: Ready) {
        let Some(i) = self.sessions.iter().position(|s| s.key == r.key) else {
            return;
        };
        let opening = self.sessions[i].opening.take();
        let info = match r.result {
            Ok(info) => info,
            Err(e) => {
                let mut s = self.sessions.remove(i);
                if let Some(t) = s.thread.take() {
                    let _ = t.join();
                }
                if let Some(Opening::New(id) | Opening::Load(id) | Opening::Resume(id)) = opening {
                    self.error(&id, INTERNAL_ERROR, &e);
                }
                return;
            }
        };
        let Info {
            id: sid,
            model,
            models,
            thinking,
            replay,
        } = info;
        {
            let s = &mut self.sessions[i];
            s.id = sid.clone();
            s.model = model;
            s.models = models;
            s.thinking = thinking;
        }
        let answer = json!({
            "modes": map::modes_state(self.sessions[i].mode),
            "configOptions": config_options(&self.sessions[i]),
        });
        match opening {
            Some(Opening::New(id)) => {
                let mut first = json!({"sessionId": sid});
                if let (Some(f), Value::Object(rest)) = (first.as_object_mut(), answer) {
                    f.extend(rest);
                }
                self.respond(&id, first);
            }
            Some(Opening::Load(id)) => {
                for u in replay {
                    self.update(&sid, u);
                }
                self.respond(&id, answer);
            }
            Some(Opening::Resume(id)) => self.respond(&id, answer),
            None => {}
        }
        let _ = self.command(r.key, json!({"type": "get_commands"}), Waiter::Commands);
    }

    fn prompt(&mut self, id: Value, params: &Value) {
        let Some(key) = self.key_of(s_param(params, "sessionId").unwrap_or("")) else {
            return self.error(&id, NOT_FOUND, "Session not found");
        };
        let blocks = params
            .get("prompt")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let (text, images) = match map::prompt(&blocks) {
            Ok(p) => p,
            Err(e) => return self.error(&id, INVALID_PARAMS, &e),
        };
        if let Some(s) = self.sessions.iter().find(|s| s.key == key) {
            if s.prompt.is_some() {
                return self.error(
                    &id,
                    INVALID_REQUEST,
                    "a prompt is already running in this session",
                );
            }
        }
        let mut cmd = json!({"type": "prompt", "message": text});
        if !images.is_empty() {
            cmd["images"] = json!(images);
        }
        if let Err(e) = self.command(key, cmd, Waiter::Prompt) {
            return self.error(&id, INTERNAL_ERROR, &e);
        }
        if let Some(s) = self.sessions.iter_mut().find(|s| s.key == key) {
            s.prompt = Some(id);
            s.cancelled = false;
            s.ended = None;
            s.limit_hit = false;
        }
    }

    fn set_mode(&mut self, id: &Value, params: &Value) {
        let Some(key) = self.key_of(s_param(params, "sessionId").unwrap_or("")) else {
            return self.error(id, NOT_FOUND, "Session not found");
        };
        let Some(mode) = s_param(params, "modeId").and_then(Mode::parse) else {
            return self.error(id, INVALID_PARAMS, "unknown modeId");
        };
        let sid = match self.sessions.iter_mut().find(|s| s.key == key) {
            Some(s) => {
                s.mode = mode;
                s.id.clone()
            }
            None => return,
        };
        self.respond(id, json!({}));
        self.update(
            &sid,
            json!({"sessionUpdate": "current_mode_update", "currentModeId": mode.id()}),
        );
    }

    fn set_config_option(&mut self, id: Value, params: &Value) {
        let Some(key) = self.key_of(s_param(params, "sessionId").unwrap_or("")) else {
            return self.error(&id, NOT_FOUND, "Session not found");
        };
        let value = s_param(params, "value").unwrap_or("");
        let cmd = match s_param(params, "configId") {
            Some("model") => {
                let Some((provider, model)) = value.split_once('/') else {
                    return self.error(&id, INVALID_PARAMS, "a model is provider/id");
                };
                json!({"type": "set_model", "provider": provider, "modelId": model})
            }
            Some("thought_level") => {
                let cmd = json!({"type": "set_thinking_level", "level": value});
                if let Err(e) =
                    self.command(key, cmd, Waiter::Config(id.clone(), Some(value.into())))
                {
                    self.error(&id, INTERNAL_ERROR, &e);
                }
                return;
            }
            Some("mode") => {
                let Some(mode) = Mode::parse(value) else {
                    return self.error(&id, INVALID_PARAMS, "unknown mode");
                };
                let Some(s) = self.sessions.iter_mut().find(|s| s.key == key) else {
                    return;
                };
                s.mode = mode;
                let sid = s.id.clone();
                let options = config_options(s);
                self.respond(&id, json!({"configOptions": options}));
                self.update(
                    &sid,
                    json!({"sessionUpdate": "current_mode_update", "currentModeId": mode.id()}),
                );
                return;
            }
            _ => return self.error(&id, INVALID_PARAMS, "unknown configId"),
        };
        if let Err(e) = self.command(key, cmd, Waiter::Config(id.clone(), None)) {
            self.error(&id, INTERNAL_ERROR, &e);
        }
    }

    fn list(&self, id: &Value, params: &Value) {
        let cwd = match s_param(params, "cwd") {
            Some(c) => PathBuf::from(c),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        };
        let dir = self.session_dir(&cwd);
        let mut found: Vec<(u64, Value)> = Vec::new();
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.extension().is_none_or(|x| x != "jsonl") {
                continue;
            }
            let Some(h) = crate::session::store::read_header(&p) else {
                continue;
            };
            let mtime = e
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            found.push((
                mtime,
                json!({
                    "sessionId": h.get("id"),
                    "cwd": h.get("cwd").and_then(Value::as_str).unwrap_or(&cwd.to_string_lossy()),
                    "updatedAt": crate::session::ids::iso_timestamp(mtime),
                }),
            ));
        }
        found.sort_by_key(|b| std::cmp::Reverse(b.0));
        let sessions: Vec<Value> = found.into_iter().map(|(_, v)| v).collect();
        self.respond(id, json!({"sessions": sessions}));
    }

    /// The client's answer to a request pith sent.
    fn on_answer(&mut self, id: &Value, result: Option<&Value>, error: Option<&Value>) {
        let Some(n) = id.as_u64() else { return };
        let Some(purpose) = self.outgoing.remove(&n) else {
            return;
        };
        match purpose {
            Outgoing::Permission { key, dialog, tool } => {
                let option = if error.is_some() {
                    None
                } else {
                    result
                        .and_then(|r| r.get("outcome"))
                        .filter(|o| o.get("outcome").and_then(Value::as_str) == Some("selected"))
                        .and_then(|o| o.get("optionId"))
                        .and_then(Value::as_str)
                };
                let allow = matches!(option, Some("allow_once" | "allow_always"));
                if let (Some(t), Some(o @ ("allow_always" | "reject_always"))) = (&tool, option) {
                    if let Some(s) = self.sessions.iter_mut().find(|s| s.key == key) {
                        s.always.insert(t.clone(), o == "allow_always");
                    }
                }
                self.answer_dialog(key, &dialog, allow);
            }
            Outgoing::Call(reply) => {
                let r = match (result, error) {
                    (_, Some(e)) => Err(e
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("the client failed")
                        .to_string()),
                    (Some(r), None) => Ok(r.clone()),
                    (None, None) => Ok(Value::Null),
                };
                let _ = reply.send(r);
            }
        }
    }

    fn answer_dialog(&mut self, key: u64, dialog: &str, confirmed: bool) {
        let _ = self.command(
            key,
            json!({"type": "extension_ui_response", "id": dialog, "confirmed": confirmed}),
            Waiter::Nothing,
        );
    }

    // ---- the machine's frames ----

    fn on_frame(&mut self, key: u64, v: Value) {
        let Some(i) = self.sessions.iter().position(|s| s.key == key) else {
            return;
        };
        let sid = self.sessions[i].id.clone();
        let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
        match ty {
            "response" => self.on_response(key, &v),
            "message_update" => {
                let e = &v["assistantMessageEvent"];
                let kind = match e.get("type").and_then(Value::as_str) {
                    Some("text_delta") => "agent_message_chunk",
                    Some("thinking_delta") => "agent_thought_chunk",
                    _ => return,
                };
                let delta = e.get("delta").and_then(Value::as_str).unwrap_or("");
                self.update(
                    &sid,
                    json!({"sessionUpdate": kind, "content": {"type": "text", "text": delta}}),
                );
            }
            "tool_execution_start" => {
                let call_id = v["toolCallId"].as_str().unwrap_or("").to_string();
                let tool = v["toolName"].as_str().unwrap_or("").to_string();
                let args = v.get("args").cloned().unwrap_or(json!({}));
                let s = &mut self.sessions[i];
                let mut u = map::tool_call(&tool, &args, &s.cwd);
                u["sessionUpdate"] = json!("tool_call");
                u["toolCallId"] = json!(call_id);
                // Pending until the permission gate lets it run (`permission_decision`).
                u["status"] = json!("pending");
                u["rawInput"] = args.clone();
                s.calls.insert(
                    call_id,
                    Call {
                        tool,
                        args,
                        diff: None,
                        terminal: None,
                    },
                );
                self.update(&sid, u);
            }
            "tool_execution_update" => {
                let call_id = v["toolCallId"].as_str().unwrap_or("");
                let partial = &v["partialResult"];
                if let Some(d) = partial.get("details").and_then(|d| d.get("acpDiff")) {
                    if let Some(c) = self.sessions[i].calls.get_mut(call_id) {
                        c.diff = Some(d.clone());
                    }
                    return;
                }
                if let Some(t) = partial.get("details").and_then(|d| d.get("acpTerminal")) {
                    if let Some(c) = self.sessions[i].calls.get_mut(call_id) {
                        c.terminal = Some(t.clone());
                    }
                    self.update(
                        &sid,
                        json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                            "status": "in_progress", "content": [{"type": "terminal", "terminalId": t}]}),
                    );
                    return;
                }
                let content = session::result_content(partial.get("content"));
                if content.is_empty() {
                    return;
                }
                self.update(
                    &sid,
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                        "status": "in_progress", "content": content}),
                );
            }
            "tool_execution_end" => {
                let call_id = v["toolCallId"].as_str().unwrap_or("").to_string();
                let failed = v["isError"].as_bool().unwrap_or(false);
                let call = self.sessions[i].calls.remove(&call_id);
                let mut u = json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                    "status": if failed { "failed" } else { "completed" }});
                match call.as_ref().and_then(|c| c.diff.as_ref().map(|d| (c, d))) {
                    Some((c, d)) if !failed => {
                        let new = d["newText"].as_str().unwrap_or("");
                        let needle = match c.tool.as_str() {
                            "edit" => c.args["edits"][0]["newText"]
                                .as_str()
                                .or(c.args["newText"].as_str())
                                .unwrap_or(""),
                            _ => "",
                        };
                        let line = map::line_of(new, needle).unwrap_or(1);
                        u["content"] = json!([{"type": "diff", "path": d["path"],
                            "oldText": d["oldText"], "newText": new}]);
                        u["locations"] = json!([{"path": d["path"], "line": line}]);
                    }
                    _ => {
                        let mut content = session::result_content(v["result"].get("content"));
                        if let Some(t) = call.as_ref().and_then(|c| c.terminal.as_ref()) {
                            content.insert(0, json!({"type": "terminal", "terminalId": t}));
                        }
                        u["content"] = json!(content);
                    }
                }
                self.update(&sid, u);
            }
            "agent_end" => {
                let messages = v["messages"].as_array().cloned().unwrap_or_default();
                let last = messages.iter().rev().find(|m| m["role"] == "assistant");
                let s = &mut self.sessions[i];
                s.ended = last.map(map::stop_reason);
                let run_cost: f64 = messages
                    .iter()
                    .filter(|m| m["role"] == "assistant")
                    .filter_map(|m| m["usage"]["cost"]["total"].as_f64())
                    .sum();
                s.cost += run_cost;
                // The context's size: the last reply that reported its usage.
                let used = messages
                    .iter()
                    .rev()
                    .filter(|m| m["role"] == "assistant")
                    .filter_map(|m| m["usage"]["totalTokens"].as_u64())
                    .find(|&n| n > 0)
                    .unwrap_or(0);
                let size = s.model.as_ref().map(|m| m.context_window).unwrap_or(0);
                let cost = s.cost;
                if last.is_some() && size > 0 {
                    self.update(
                        &sid,
                        json!({"sessionUpdate": "usage_update", "used": used, "size": size,
                            "cost": {"amount": cost, "currency": "USD"}}),
                    );
                }
            }
            "run_limit_reached" => self.sessions[i].limit_hit = true,
            "agent_settled" => {
                let s = &mut self.sessions[i];
                let Some(id) = s.prompt.take() else { return };
                let reason = if s.cancelled {
                    Ok("cancelled")
                } else if s.limit_hit {
                    Ok("max_turn_requests")
                } else {
                    s.ended.take().unwrap_or(Ok("end_turn"))
                };
                s.cancelled = false;
                s.calls.clear();
                match reason {
                    Ok(r) => self.respond(&id, json!({"stopReason": r})),
                    Err(e) => self.error(&id, INTERNAL_ERROR, &e),
                }
            }
            "permission_decision" if v["decision"] == "allow" => {
                self.update(
                    &sid,
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": v["toolCallId"],
                        "status": "in_progress"}),
                );
            }
            "permission_request" => {
                self.sessions[i].asking = Some(Asking {
                    call_id: v["toolCallId"].as_str().unwrap_or("").to_string(),
                    tool: v["toolName"].as_str().unwrap_or("").to_string(),
                    rule: v["rule"].as_str().map(str::to_string),
                });
            }
            "extension_ui_request" => self.on_dialog(key, &v),
            _ => {}
        }
    }

    fn on_response(&mut self, key: u64, v: &Value) {
        let Some(i) = self.sessions.iter().position(|s| s.key == key) else {
            return;
        };
        let Some(id) = v["id"].as_str() else { return };
        let Some(waiter) = self.sessions[i].waiting.remove(id) else {
            return;
        };
        let ok = v["success"].as_bool().unwrap_or(false);
        let err = v["error"].as_str().unwrap_or("failed").to_string();
        let sid = self.sessions[i].id.clone();
        match waiter {
            Waiter::Prompt if !ok => {
                if let Some(id) = self.sessions[i].prompt.take() {
                    self.error(&id, INTERNAL_ERROR, &err);
                }
            }
            Waiter::Prompt | Waiter::Nothing => {}
            Waiter::Config(req, _) if !ok => self.error(&req, INVALID_PARAMS, &err),
            Waiter::Config(req, level) => {
                let s = &mut self.sessions[i];
                match v["command"].as_str() {
                    Some("set_model") => {
                        let d = &v["data"];
                        let (p, m) = (
                            d["provider"].as_str().unwrap_or(""),
                            d["id"].as_str().unwrap_or(""),
                        );
                        if let Some(found) = s
                            .models
                            .iter()
                            .find(|x| x.provider == p && x.id == m)
                            .cloned()
                        {
                            s.model = Some(found);
                        }
                    }
                    Some("set_thinking_level") => {
                        if let Some(l) = level {
                            s.thinking = l;
                        }
                    }
                    _ => {}
                }
                let options = config_options(s);
                self.respond(&req, json!({"configOptions": options}));
            }
            Waiter::Commands => {
                let commands: Vec<Value> = v["data"]["commands"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| {
                        let name = c["name"].as_str()?;
                        Some(json!({
                            "name": name,
                            "description": c["description"].as_str().unwrap_or(""),
                            "input": {"hint": "arguments"},
                        }))
                    })
                    .collect();
                self.update(
                    &sid,
                    json!({"sessionUpdate": "available_commands_update", "availableCommands": commands}),
                );
            }
        }
    }

    /// An `extension_ui_request`: a permission ask becomes `session/request_permission` unless
    /// the session's mode or an "always" answer decides it; an extension's confirm is asked as
    /// it is; other dialogs have no ACP form and are answered as cancelled.
    fn on_dialog(&mut self, key: u64, v: &Value) {
        let Some(i) = self.sessions.iter().position(|s| s.key == key) else {
            return;
        };
        let dialog = v["id"].as_str().unwrap_or("").to_string();
        match v["method"].as_str() {
            Some("confirm") => {}
            Some("select" | "input" | "editor") => {
                let _ = self.command(
                    key,
                    json!({"type": "extension_ui_response", "id": dialog, "cancelled": true}),
                    Waiter::Nothing,
                );
                return;
            }
            _ => return,
        }
        let s = &mut self.sessions[i];
        let sid = s.id.clone();
        let asking = s.asking.take();
        let (tool_call, tool) = match &asking {
            Some(a) => {
                let verdict = match s.always.get(&a.tool) {
                    Some(true) if s.mode != Mode::ReadOnly || map::is_read_only(&a.tool) => {
                        Verdict::Allow
                    }
                    Some(false) => Verdict::Deny,
                    _ => s.mode.decide(&a.tool, a.rule.as_deref()),
                };
                match verdict {
                    Verdict::Allow => return self.answer_dialog(key, &dialog, true),
                    Verdict::Deny => return self.answer_dialog(key, &dialog, false),
                    Verdict::Ask => {}
                }
                let args = s
                    .calls
                    .get(&a.call_id)
                    .map(|c| c.args.clone())
                    .unwrap_or(json!({}));
                let mut tc = map::tool_call(&a.tool, &args, &s.cwd);
                tc["toolCallId"] = json!(a.call_id);
                tc["status"] = json!("pending");
                tc["rawInput"] = args;
                (tc, Some(a.tool.clone()))
            }
            None => (
                json!({
                    "toolCallId": format!("dialog-{dialog}"),
                    "title": v["title"].as_str().unwrap_or("Confirm"),
                    "kind": "other",
                    "status": "pending",
                    "content": [{"type": "content", "content": {"type": "text",
                        "text": v["message"].as_str().unwrap_or("")}}],
                }),
                None,
            ),
        };
        let options = if tool.is_some() {
            map::permission_options()
        } else {
            json!([
                {"optionId": "allow_once", "name": "Yes", "kind": "allow_once"},
                {"optionId": "reject_once", "name": "No", "kind": "reject_once"},
            ])
        };
        self.request(
            "session/request_permission",
            json!({"sessionId": sid, "toolCall": tool_call, "options": options}),
            Outgoing::Permission { key, dialog, tool },
        );
    }
}

/// The session's config options: its model and thinking level, and its mode.
fn config_options(s: &Sess) -> Value {
    let mut out = Vec::new();
    out.push(json!({
        "id": "mode",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": s.mode.id(),
        "options": map::MODES.iter().map(|m| json!({"value": m.id(), "name": m.name()})).collect::<Vec<_>>(),
    }));
    if let Some(m) = &s.model {
        out.push(json!({
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": m.value(),
            "options": s.models.iter().map(|m| json!({"value": m.value(), "name": m.name})).collect::<Vec<_>>(),
        }));
        if m.reasoning {
            let levels = ["off", "minimal", "low", "medium", "high", "xhigh"];
            out.push(json!({
                "id": "thought_level",
                "name": "Thinking",
                "category": "thought_level",
                "type": "select",
                "currentValue": s.thinking,
                "options": levels.iter().map(|l| json!({"value": l, "name": l})).collect::<Vec<_>>(),
            }));
        }
    }
    Value::Array(out)
}

/// The client's `mcpServers` as pith's server configurations (stdio and HTTP; SSE is refused).
fn mcp_servers(v: Option<&Value>) -> Result<Vec<crate::mcp::config::ServerConfig>, String> {
    use crate::mcp::config::{Exposure, ServerConfig, Transport};
    let pairs = |v: Option<&Value>| -> Vec<(String, String)> {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| {
                Some((
                    p.get("name")?.as_str()?.to_string(),
                    p.get("value")?.as_str()?.to_string(),
                ))
            })
            .collect()
    };
    let mut out = Vec::new();
    for s in v.and_then(Value::as_array).into_iter().flatten() {
        let name = s_param(s, "name").ok_or("an MCP server needs a name")?;
        let transport = match s_param(s, "type") {
            Some("http") => Transport::Http {
                url: s_param(s, "url")
                    .ok_or("an http MCP server needs a url")?
                    .to_string(),
                headers: pairs(s.get("headers")),
                oauth_client: None,
            },
            Some("sse") => return Err(format!("MCP server {name}: SSE is not supported")),
            _ => Transport::Stdio {
                command: s_param(s, "command")
                    .ok_or("a stdio MCP server needs a command")?
                    .to_string(),
                args: s
                    .get("args")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(str::to_string))
                    .collect(),
                env: pairs(s.get("env")),
                cwd: None,
            },
        };
        out.push(ServerConfig {
            name: name.to_string(),
            transport,
            exposure: Exposure::Direct,
            tool_exposure: Vec::new(),
            description: None,
            timeout: None,
            enabled: true,
            source: PathBuf::from("<acp client>"),
            start_error: None,
        });
    }
    Ok(out)
}
