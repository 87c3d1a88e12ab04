//! The state machine: one thread, one `select!`, one [`Machine::handle_event`]. It owns the
//! session, the queues, the settings and every piece of mutable state; the threads around it only
//! send [`Event`]s. Handlers never block on I/O other than handing a finished frame to the
//! stdout writer's bounded channel (back-pressure from a slow host).

use std::path::PathBuf;

use crossbeam_channel::{Receiver, Sender, select};
use serde_json::{Map, Value, json};

use crate::config::Settings;
use crate::core::event::{Control, Event, Worker};
use crate::core::queues::Queue;
use crate::io::stdin::Input;
use crate::llm::Model;
use crate::message::{AgentMessage, StopReason, ThinkingLevel};
use crate::rpc::command::{self, Command, DecodeError, InterruptMode};
use crate::rpc::event::{Event as Frame, Partials};
use crate::rpc::response;

/// Everything the machine starts with (resolved by `app` from the CLI, config and registry).
pub struct Startup {
    pub cwd: PathBuf,
    pub agent_dir: PathBuf,
    pub settings: Settings,
    pub model: Option<Model>,
    pub thinking: ThinkingLevel,
    pub session_id: String,
    pub session_file: Option<PathBuf>,
    pub partials: Partials,
}

/// Channels the machine listens on and writes to.
pub struct Channels {
    pub input: Receiver<Input>,
    pub control: Receiver<Control>,
    pub worker: Receiver<Worker>,
    pub worker_tx: Sender<Worker>,
    pub stdout: Sender<Vec<u8>>,
}

/// How the machine loop ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// stdin closed and all work finished.
    InputClosed,
    /// stdout closed.
    ClientGone,
    /// Killed by this signal.
    Signal(i32),
}

impl Exit {
    pub fn code(&self) -> i32 {
        match self {
            Exit::InputClosed | Exit::ClientGone => 0,
            Exit::Signal(s) => 128 + s,
        }
    }
}

#[allow(dead_code)] // cwd, settings, partials: used by the agent loop (issue 4)
pub struct Machine {
    stdout: Sender<Vec<u8>>,
    client_gone: bool,
    input_closed: bool,

    cwd: PathBuf,
    #[allow(dead_code)]
    agent_dir: PathBuf,
    settings: Settings,
    partials: Partials,

    model: Option<Model>,
    thinking: ThinkingLevel,
    steering: Queue,
    follow_up: Queue,
    interrupt_mode: InterruptMode,
    auto_compaction: bool,
    auto_retry: bool,

    session_id: String,
    session_file: Option<PathBuf>,
    session_name: Option<String>,
    /// The agent's context: completed messages only.
    messages: Vec<AgentMessage>,
}

/// What a command handler answers: `Ok(data)` (None = no `data` key) or `Err(message)`.
type Reply = Result<Option<Value>, String>;

impl Machine {
    pub fn new(s: Startup, stdout: Sender<Vec<u8>>) -> Machine {
        Machine {
            stdout,
            client_gone: false,
            input_closed: false,
            steering: Queue::new(s.settings.steering_mode()),
            follow_up: Queue::new(s.settings.follow_up_mode()),
            interrupt_mode: InterruptMode::Immediate,
            auto_compaction: s.settings.compaction_enabled(),
            auto_retry: s.settings.retry_enabled(),
            cwd: s.cwd,
            agent_dir: s.agent_dir,
            settings: s.settings,
            partials: s.partials,
            model: s.model,
            thinking: s.thinking,
            session_id: s.session_id,
            session_file: s.session_file,
            session_name: None,
            messages: Vec::new(),
        }
    }

    /// The main loop: wait for the next event, handle it, until there is a reason to exit.
    pub fn run(mut self, ch: Channels) -> Exit {
        loop {
            if self.client_gone {
                return Exit::ClientGone;
            }
            if self.input_closed && self.is_idle() {
                return Exit::InputClosed;
            }
            let event = select! {
                recv(ch.control) -> c => match c {
                    Ok(c) => Event::Control(c),
                    Err(_) => continue,
                },
                recv(ch.input) -> i => Event::Input(i.unwrap_or(Input::Eof)),
                recv(ch.worker) -> w => match w {
                    Ok(w) => Event::Worker(w),
                    Err(_) => continue,
                },
            };
            if let Some(exit) = self.handle_event(event) {
                return exit;
            }
        }
    }

    /// The one place where state changes.
    pub fn handle_event(&mut self, event: Event) -> Option<Exit> {
        match event {
            Event::Input(Input::Json(v)) => self.handle_json(v),
            Event::Input(Input::Invalid(reason)) => {
                self.send(response::error(
                    None,
                    Some("parse"),
                    &format!("Failed to parse command: {reason}"),
                ));
            }
            Event::Input(Input::Oversized { bytes }) => self.send(response::error(
                None,
                Some("parse"),
                &format!(
                    "Failed to parse command: line of {bytes} bytes exceeds the limit of {} bytes; skipped",
                    crate::rpc::frame::MAX_LINE_BYTES
                ),
            )),
            Event::Input(Input::Eof) => self.input_closed = true,
            Event::Control(Control::ClientGone) => return Some(Exit::ClientGone),
            Event::Control(Control::Signal(sig)) => return Some(self.shutdown_on_signal(sig)),
            Event::Worker(Worker::Llm { .. }) => {}
        }
        None
    }

    /// No run, retry, compaction or bash command in flight.
    fn is_idle(&self) -> bool {
        true
    }

    fn shutdown_on_signal(&mut self, sig: i32) -> Exit {
        eprintln!("pith: received signal {sig}; exiting");
        Exit::Signal(sig)
    }

    // ---- output ------------------------------------------------------------------------------

    fn send(&mut self, line: Vec<u8>) {
        if self.client_gone {
            return;
        }
        if self.stdout.send(line).is_err() {
            self.client_gone = true;
        }
    }

    fn emit(&mut self, frame: &Frame<'_>) {
        let line = response::line(frame);
        self.send(line);
    }

    // ---- commands ----------------------------------------------------------------------------

    fn handle_json(&mut self, v: Value) {
        let Value::Object(obj) = v else {
            let what = match v {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                Value::Array(_) => "an array",
                Value::Object(_) => "an object",
            };
            self.send(response::error(
                None,
                Some("parse"),
                &format!("Failed to parse command: expected a JSON object, got {what}"),
            ));
            return;
        };
        let id = obj.get("id").cloned();
        let ty = match obj.get("type") {
            Some(Value::String(t)) => t.clone(),
            other => {
                let msg = match other {
                    None => "Invalid command: missing string field \"type\"".to_string(),
                    Some(_) => "Invalid command: field \"type\" must be a string".to_string(),
                };
                self.send(response::error(id.as_ref(), Some("parse"), &msg));
                return;
            }
        };
        let cmd = match command::decode(&ty, &obj) {
            Ok(c) => c,
            Err(DecodeError::Unknown) => {
                self.send(response::error(
                    id.as_ref(),
                    Some(&ty),
                    &format!("Unknown command: {ty}"),
                ));
                return;
            }
            Err(DecodeError::Invalid(msg)) => {
                self.send(response::error(id.as_ref(), Some(&ty), &msg));
                return;
            }
        };
        if matches!(cmd, Command::ExtensionUiResponse) {
            return; // no extensions: nothing is waiting for it (the reference ignores stale ids too)
        }
        let reply = self.handle_command(cmd, &ty, &obj);
        let line = match reply {
            Ok(data) => response::success(id.as_ref(), &ty, data.as_ref()),
            Err(msg) => response::error(id.as_ref(), Some(&ty), &msg),
        };
        self.send(line);
    }

    fn handle_command(&mut self, cmd: Command, ty: &str, _obj: &Map<String, Value>) -> Reply {
        match cmd {
            Command::GetState => Ok(Some(self.state_json())),
            Command::GetMessages => Ok(Some(json!({ "messages": self.messages }))),
            Command::GetLastAssistantText => Ok(Some(self.last_assistant_text())),
            Command::GetSessionStats => Ok(Some(self.session_stats())),
            Command::SetSteeringMode(m) => {
                self.steering.mode = m;
                Ok(None)
            }
            Command::SetFollowUpMode(m) => {
                self.follow_up.mode = m;
                Ok(None)
            }
            Command::SetInterruptMode(m) => {
                self.interrupt_mode = m;
                Ok(None)
            }
            Command::SetAutoCompaction(on) => {
                self.auto_compaction = on;
                Ok(None)
            }
            Command::SetAutoRetry(on) => {
                self.auto_retry = on;
                Ok(None)
            }
            Command::SetSessionName(name) => {
                let name = name.trim().to_string();
                if name.is_empty() {
                    return Err("Session name cannot be empty".to_string());
                }
                self.emit(&Frame::SessionInfoChanged { name: &name });
                self.session_name = Some(name);
                Ok(None)
            }
            Command::GetCommands => Ok(Some(json!({ "commands": [] }))),
            _ => Err(format!("{ty} is not implemented yet")),
        }
    }

    fn state_json(&self) -> Value {
        let mut m = Map::new();
        if let Some(model) = &self.model {
            m.insert(
                "model".into(),
                serde_json::to_value(model).unwrap_or(Value::Null),
            );
        }
        m.insert("thinkingLevel".into(), json!(self.thinking.as_str()));
        m.insert("isStreaming".into(), json!(false));
        m.insert("isCompacting".into(), json!(false));
        m.insert("steeringMode".into(), json!(self.steering.mode.as_str()));
        m.insert("followUpMode".into(), json!(self.follow_up.mode.as_str()));
        m.insert("interruptMode".into(), json!(self.interrupt_mode.as_str()));
        if let Some(f) = &self.session_file {
            m.insert("sessionFile".into(), json!(f.to_string_lossy()));
        }
        m.insert("sessionId".into(), json!(self.session_id));
        if let Some(n) = &self.session_name {
            m.insert("sessionName".into(), json!(n));
        }
        m.insert("autoCompactionEnabled".into(), json!(self.auto_compaction));
        m.insert("messageCount".into(), json!(self.messages.len()));
        let pending = self.steering.len() + self.follow_up.len();
        m.insert("pendingMessageCount".into(), json!(pending));
        m.insert("queuedMessageCount".into(), json!(pending));
        Value::Object(m)
    }

    fn last_assistant_text(&self) -> Value {
        let last = self.messages.iter().rev().find_map(|m| match m {
            AgentMessage::Assistant(a)
                if !(a.stop_reason == StopReason::Aborted && a.content.is_empty()) =>
            {
                Some(a)
            }
            _ => None,
        });
        match last.map(|a| a.text().trim().to_string()) {
            Some(t) if !t.is_empty() => json!({ "text": t }),
            _ => json!({}),
        }
    }

    fn session_stats(&self) -> Value {
        crate::core::stats::session_stats(
            &self.messages,
            &self.session_id,
            self.session_file.as_deref(),
            self.model.as_ref().map(|m| m.context_window),
        )
    }
}
