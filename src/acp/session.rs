//! One ACP session: its own state machine (the machine RPC mode runs, with its own channels) on
//! its own thread, started from the same start-up as RPC mode with the session's working
//! directory. What the front end needs to answer `session/new` / `session/load` comes back on
//! the ready channel; then the machine runs until its input closes.

use std::path::PathBuf;

use crossbeam_channel::{Receiver, Sender};
use serde_json::{Value, json};

use crate::cli::Options;
use crate::core::machine::{Channels, Machine};
use crate::io::stdin::Input;

/// A model as the config option lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRef {
    pub provider: String,
    pub id: String,
    pub name: String,
    pub context_window: u64,
    pub reasoning: bool,
}

impl ModelRef {
    pub fn value(&self) -> String {
        format!("{}/{}", self.provider, self.id)
    }
}

/// What a started session tells the front end.
pub struct Info {
    pub id: String,
    pub model: Option<ModelRef>,
    pub models: Vec<ModelRef>,
    pub thinking: String,
    /// `session/load`: the history as `session/update`s (the `update` objects).
    pub replay: Vec<Value>,
}

pub struct Ready {
    pub key: u64,
    pub result: Result<Info, String>,
}

/// What starts a session.
pub struct Spec {
    pub key: u64,
    pub opts: Options,
    pub cwd: PathBuf,
    /// `session/load`: the session file.
    pub load: Option<PathBuf>,
    pub mcp: Vec<crate::mcp::config::ServerConfig>,
    /// What the client offered to do for the tools, and the way to ask it.
    pub offered: super::client::Offered,
    pub calls: Sender<super::client::ClientCall>,
}

/// The machine's input and frames, and its thread.
pub struct Handle {
    pub input: Sender<Input>,
    pub frames: Receiver<Vec<u8>>,
    pub thread: std::thread::JoinHandle<()>,
}

/// Commands a session's machine queues at most (the front end never blocks on a full queue: it
/// answers with an error instead).
pub const INPUT_QUEUE: usize = 64;
const WORKER_QUEUE: usize = 128;

pub fn spawn(spec: Spec, ready: Sender<Ready>) -> std::io::Result<Handle> {
    let (input_tx, input_rx) = crossbeam_channel::bounded(INPUT_QUEUE);
    let (frames_tx, frames_rx) = crossbeam_channel::bounded(crate::io::stdout::QUEUE_FRAMES);
    let thread = std::thread::Builder::new()
        .name(format!("acp-session-{}", spec.key))
        .stack_size(crate::THREAD_STACK * 4)
        .spawn(move || run(spec, input_rx, frames_tx, ready))?;
    Ok(Handle {
        input: input_tx,
        frames: frames_rx,
        thread,
    })
}

fn run(spec: Spec, input: Receiver<Input>, frames: Sender<Vec<u8>>, ready: Sender<Ready>) {
    let key = spec.key;
    let startup = match startup(spec) {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Ready {
                key,
                result: Err(e),
            });
            return;
        }
    };
    let info = info(&startup);
    if ready
        .send(Ready {
            key,
            result: Ok(info),
        })
        .is_err()
    {
        return;
    }
    // The control channel stays open for the machine's life (nothing sends on it: the front end
    // ends a session by closing its input).
    let (_control_tx, control_rx) = crossbeam_channel::unbounded();
    let (worker_tx, worker_rx) = crossbeam_channel::bounded(WORKER_QUEUE);
    let machine = Machine::new(
        startup,
        Channels {
            input,
            control: control_rx,
            worker: worker_rx,
            worker_tx,
            stdout: frames,
        },
    );
    machine.run();
}

fn startup(spec: Spec) -> Result<crate::core::machine::Startup, String> {
    let mut o = spec.opts;
    // The session is the client's: a new one, or the file `session/load` found.
    o.session = spec.load.map(|p| p.to_string_lossy().into_owned());
    o.continue_session = false;
    o.fork = None;
    o.session_id = None;
    o.name = None;
    o.partials = crate::rpc::event::Partials::None;
    let mut s = crate::app::startup_in(&o, spec.cwd).map_err(|e| e.message)?;
    s.sandbox = crate::app::start_sandbox(&o, &s)?;
    // Under a sandbox the file tools and bash stay in pith, confined (the editor is not).
    let offered = if s.sandbox.is_some() {
        super::client::Offered::default()
    } else {
        spec.offered
    };
    let bridge = super::client::Bridge {
        session_id: s.session.id().to_string(),
        calls: spec.calls,
    };
    s.tools = std::mem::take(&mut s.tools)
        .into_iter()
        .map(|t| {
            if super::client::routed(t.name(), offered) {
                super::client::wrap(t, offered, &bridge)
            } else {
                super::difftool::wrap(t)
            }
        })
        .collect();
    s.plugins.call_events = true;
    s.plugins.mcp.extend(spec.mcp);
    if s.plugins.permissions.is_none() {
        // No rule of the user's: every call asks, and the session's mode answers (docs/acp.md).
        let canonical = std::fs::canonicalize(&s.cwd).unwrap_or_else(|_| s.cwd.clone());
        let (policy, _) = crate::perms::Policy::build(&crate::perms::Sources {
            cli: &[],
            cli_default: Some(crate::perms::rules::Level::Ask),
            user: None,
            project: None,
            confirm: &Default::default(),
            ui: true,
            anchors: crate::perms::anchors(canonical, crate::config::home_dir()),
        })?;
        s.plugins.permissions = policy;
    }
    Ok(s)
}

fn model_ref(m: &crate::llm::Model) -> ModelRef {
    ModelRef {
        provider: m.provider.clone(),
        id: m.id.clone(),
        name: m.name.clone(),
        context_window: m.context_window,
        reasoning: m.reasoning,
    }
}

fn info(s: &crate::core::machine::Startup) -> Info {
    let model = s.model.as_ref().map(model_ref);
    let mut models: Vec<ModelRef> = s
        .registry
        .available(&s.auth)
        .into_iter()
        .map(model_ref)
        .collect();
    if let Some(m) = &model {
        if !models.contains(m) {
            models.insert(0, m.clone());
        }
    }
    Info {
        id: s.session.id().to_string(),
        model,
        models,
        thinking: s.thinking.as_str().to_string(),
        replay: replay(&s.session),
    }
}

fn text_chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

/// The session's current branch as `session/update`s: every message, and each compaction's
/// summary where it happened (the messages it summarised are replayed too: the whole history).
pub fn replay(session: &crate::session::Session) -> Vec<Value> {
    let mut out = Vec::new();
    for e in session.branch_path() {
        match e.kind() {
            crate::session::entry::EntryKind::Compaction { summary, .. } => {
                out.push(text_chunk(
                    "agent_message_chunk",
                    &format!("[Compaction summary]\n\n{summary}"),
                ));
            }
            crate::session::entry::EntryKind::BranchSummary { summary, .. } => {
                out.push(text_chunk(
                    "agent_message_chunk",
                    &format!("[Branch summary]\n\n{summary}"),
                ));
            }
            crate::session::entry::EntryKind::Message { .. } => {
                if let Some(m) = e.raw().get("message") {
                    replay_message(m, std::path::Path::new(session.cwd()), &mut out);
                }
            }
            _ => {}
        }
    }
    out
}

fn replay_message(m: &Value, cwd: &std::path::Path, out: &mut Vec<Value>) {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("");
    let content = m.get("content");
    match role {
        "user" => match content {
            Some(Value::String(s)) => out.push(text_chunk("user_message_chunk", s)),
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("text") => out.push(text_chunk(
                            "user_message_chunk",
                            b.get("text").and_then(Value::as_str).unwrap_or(""),
                        )),
                        Some("image") => out.push(json!({"sessionUpdate": "user_message_chunk",
                            "content": {"type": "image", "data": b.get("data"), "mimeType": b.get("mimeType")}})),
                        _ => {}
                    }
                }
            }
            _ => {}
        },
        "assistant" => {
            for b in content.and_then(Value::as_array).into_iter().flatten() {
                match b.get("type").and_then(Value::as_str) {
                    Some("thinking") => {
                        let t = b.get("thinking").and_then(Value::as_str).unwrap_or("");
                        if !t.is_empty() {
                            out.push(text_chunk("agent_thought_chunk", t));
                        }
                    }
                    Some("text") => {
                        let t = b.get("text").and_then(Value::as_str).unwrap_or("");
                        if !t.is_empty() {
                            out.push(text_chunk("agent_message_chunk", t));
                        }
                    }
                    Some("toolCall") => {
                        let name = b.get("name").and_then(Value::as_str).unwrap_or("");
                        let args = b.get("arguments").cloned().unwrap_or(json!({}));
                        let mut u = super::map::tool_call(name, &args, cwd);
                        u["sessionUpdate"] = json!("tool_call");
                        u["toolCallId"] = b.get("id").cloned().unwrap_or(Value::Null);
                        u["status"] = json!("pending");
                        u["rawInput"] = args;
                        out.push(u);
                    }
                    _ => {}
                }
            }
        }
        "toolResult" => {
            let failed = m.get("isError").and_then(Value::as_bool).unwrap_or(false);
            out.push(json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": m.get("toolCallId"),
                "status": if failed { "failed" } else { "completed" },
                "content": result_content(content),
            }));
        }
        "bashExecution" => {
            let cmd = m.get("command").and_then(Value::as_str).unwrap_or("");
            let output = m.get("output").and_then(Value::as_str).unwrap_or("");
            out.push(text_chunk("user_message_chunk", &format!("!{cmd}")));
            out.push(text_chunk("agent_message_chunk", output));
        }
        "custom" => {
            // Extensions' messages that were shown: their text, as the agent's.
            let shown = m.get("display").and_then(Value::as_bool).unwrap_or(true);
            match content {
                Some(Value::String(s)) if shown && !s.is_empty() => {
                    out.push(text_chunk("agent_message_chunk", s))
                }
                Some(Value::Array(blocks)) if shown => {
                    for b in blocks {
                        if let Some(t) = b.get("text").and_then(Value::as_str) {
                            out.push(text_chunk("agent_message_chunk", t));
                        }
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
}

/// A tool result's content blocks as `tool_call_update` contents.
pub fn result_content(content: Option<&Value>) -> Vec<Value> {
    content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => Some(json!({"type": "content", "content": {"type": "text",
                "text": b.get("text").and_then(Value::as_str).unwrap_or("")}})),
            Some("image") => Some(json!({"type": "content", "content": {"type": "image",
                "data": b.get("data"), "mimeType": b.get("mimeType")}})),
            _ => None,
        })
        .collect()
}
