//! The machine's reactions to extensions (docs/extensions.md): their messages (registration,
//! answers, tool updates, UI calls, messages for the conversation), their failures (isolation),
//! the events they subscribed to, slash commands, and the session operations they may cancel.

use std::time::Instant;

use serde_json::{Value, json};

use crate::core::event::ToolEvent;
use crate::core::machine::{Answer, Machine, Reply};
use crate::core::plugins::{Call, CallKind, Life, OpReply, SessionOp, SessionOpKind};
use crate::ext::protocol::{self as proto, DecodeError, DeliverAs, FromExt};
use crate::io::child::{self, ChildEvent};
use crate::message::{AgentMessage, CustomMessage, UserContent, UserMessage, now_ms};
use crate::resources::SourceInfo;
use crate::resources::commands::{CommandSource, SlashCommand};
use crate::rpc::command::{Command, StreamingBehavior};
use crate::rpc::response;

/// A command the protocol version ships (an inline extension's), as `get_commands` lists it.
fn builtin_command(c: &crate::protocol::BuiltinCommand) -> Value {
    serde_json::json!({
        "name": c.name,
        "description": c.description,
        "source": "extension",
        "sourceInfo": {
            "path": c.path,
            "source": c.source,
            "scope": "temporary",
            "origin": "top-level"
        }
    })
}

impl Machine {
    /// A line (or the end) of extension `i`.
    pub(crate) fn on_ext_event(&mut self, i: usize, event: ChildEvent) {
        let Some(ext) = self.plugins.exts.get(i) else {
            return;
        };
        if ext.life == Life::Dead {
            return;
        }
        match event {
            ChildEvent::Line(v) => match proto::decode(&v) {
                Ok(msg) => self.on_ext_message(i, msg),
                Err(DecodeError::Version(e)) => self.isolate(i, "startup", &e),
                Err(DecodeError::Invalid(e)) => {
                    let path = self.plugins.exts[i].path.clone();
                    self.extension_error(&path, "protocol", &format!("invalid message: {e}"));
                }
            },
            ChildEvent::Garbage { error, line } => self.isolate(
                i,
                "protocol",
                &format!("wrote a line that is not JSON ({error}): {line}"),
            ),
            ChildEvent::Oversized { bytes } => self.isolate(
                i,
                "protocol",
                &format!(
                    "wrote a line of {bytes} bytes (the limit is {} bytes)",
                    crate::core::plugins::EXT_LIMITS.max_line
                ),
            ),
            ChildEvent::Flood => self.isolate(
                i,
                "protocol",
                &format!(
                    "flooded pith with more than {} messages in one second",
                    crate::core::plugins::EXT_LIMITS.max_lines_per_sec
                ),
            ),
            ChildEvent::Exited { status, .. } => {
                if self.plugins.stopping {
                    return;
                }
                if matches!(self.plugins.exts[i].life, Life::Starting(_)) {
                    let error = format!("exited before registering ({status})");
                    self.isolate(i, "startup", &error);
                } else {
                    self.isolate(i, "process", &format!("exited ({status})"));
                }
            }
        }
        self.check_startup_done();
    }

    fn on_ext_message(&mut self, i: usize, msg: FromExt) {
        match msg {
            FromExt::Register(r) => {
                let was_starting = matches!(self.plugins.exts[i].life, Life::Starting(_));
                let e = &mut self.plugins.exts[i];
                if let Some(n) = r.name.filter(|n| !n.is_empty()) {
                    e.name = n;
                }
                e.tools = r.tools;
                e.commands = r.commands;
                e.events = r.events;
                e.life = Life::Ready;
                if was_starting && e.wants("session_start") {
                    let mut ev = json!({"type": "session_start", "reason": "startup"});
                    self.add_session_fields(&mut ev);
                    self.ext_write(i, proto::event(None, &ev));
                }
            }
            FromExt::Result {
                id,
                outcome,
                extension,
            } => self.on_ext_result(i, id, outcome, extension),
            FromExt::Error {
                extension,
                event,
                error,
            } => self.extension_error(&extension, &event, &error),
            FromExt::NodeTooOld { version } if self.plugins.exts[i].node_host => {
                let path = self.plugins.node_path();
                self.plugins.exts[i].life = Life::Dead;
                self.refuse_node(crate::ext::node_host::NodeProblem::TooOld { path, version });
            }
            FromExt::NodeTooOld { .. } => {}
            FromExt::StartupFailed { errors } if self.plugins.exts[i].node_host => {
                // pi prints its start-up diagnostics and stops (exit 1), before any run.
                self.plugins.exts[i].life = Life::Dead;
                let mut text: Vec<String> = errors.iter().map(|e| format!("Error: {e}")).collect();
                if errors
                    .iter()
                    .any(|e| e.starts_with("Failed to load extension"))
                {
                    text.push("Hint: Start without extensions using \"pith -ne\".".into());
                }
                self.plugins.startup_failed = Some(text.join("\n"));
                self.drop_pending_prompt("Prompt cancelled: a pi extension failed to start");
            }
            FromExt::StartupFailed { .. } => {}
            FromExt::Call { id, method, params } => {
                let outcome = if !self.plugins.exts[i].node_host {
                    Err(format!("unknown call \"{method}\""))
                } else if method == "snapshot" {
                    let line = self.node_host_snapshot(&id, &params);
                    self.ext_write(i, line);
                    return;
                } else if method == "waitForIdle" {
                    if self.is_idle() {
                        self.ext_write(i, proto::call_result(&id, Ok(Value::Null)));
                    } else {
                        self.plugins.idle_waiters.push((i, id));
                    }
                    return;
                } else if method == "newSession" {
                    // pi's `ctx.newSession()`: as `new_session`, asking the extensions first;
                    // answered `{cancelled}` when it has run (or was cancelled).
                    let parent = params
                        .get("parentSession")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    let reply = OpReply::Ext { ext: i, call: id };
                    let _ = self.start_session_op(SessionOpKind::New { parent }, reply);
                    return;
                } else if method == "fork" || method == "switchSession" {
                    // pi's `ctx.fork(entryId)` / `ctx.switchSession(path)`: as the `fork` /
                    // `switch_session` commands, the extensions asked first.
                    let arg = |k: &str| params.get(k).and_then(Value::as_str).map(str::to_string);
                    let kind = if method == "fork" {
                        arg("entryId").map(|entry_id| SessionOpKind::Fork { entry_id })
                    } else {
                        arg("sessionPath").map(|path| SessionOpKind::Switch { path })
                    };
                    match kind {
                        Some(kind) => {
                            let reply = OpReply::Ext { ext: i, call: id };
                            let _ = self.start_session_op(kind, reply);
                            return;
                        }
                        None => Err(format!("{method}: a string argument is missing")),
                    }
                } else if method == "compact" {
                    // Answered when the compaction ends (`onComplete` / `onError`).
                    let custom = params
                        .get("customInstructions")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    self.plugins.compact_from_ext = true;
                    let started = self.cmd_compact(custom, None);
                    self.plugins.compact_from_ext = false;
                    match started {
                        Ok(()) => match self.compaction.as_mut() {
                            Some(c) => {
                                c.ext_waiters.push((i, id));
                                return;
                            }
                            None => Err(crate::compaction::COMPACTION_CANCELLED.to_string()),
                        },
                        Err(e) => Err(e),
                    }
                } else {
                    self.node_host_call(&method, &params)
                };
                self.ext_write(i, proto::call_result(&id, outcome));
            }
            FromExt::ToolUpdate { id, output } => {
                let Some(call) = self.plugins.exts[i].calls.get_mut(&id) else {
                    return;
                };
                let CallKind::Tool { batch, index } = call.kind else {
                    return;
                };
                call.deadline = Instant::now() + call.timeout;
                self.on_tool_event(batch, index, ToolEvent::Update(output));
            }
            FromExt::Ui { id, request } => self.ext_ui(i, id, request),
            FromExt::SendMessage(m) => {
                let message = AgentMessage::Custom(CustomMessage {
                    custom_type: m.custom_type,
                    content: m.content,
                    display: m.display,
                    details: m.details,
                    timestamp: now_ms(),
                });
                self.ext_send_message(i, message, m.trigger_turn, m.deliver_as);
            }
            FromExt::SendUserMessage {
                content,
                deliver_as,
            } => {
                let content = match content {
                    UserContent::Text(t) => {
                        UserContent::Blocks(vec![crate::message::Content::text(t)])
                    }
                    b => b,
                };
                let message = AgentMessage::User(UserMessage {
                    content,
                    timestamp: now_ms(),
                });
                self.ext_send_message(i, message, Some(true), deliver_as);
            }
        }
    }

    /// The answer to call `id` of extension `i`.
    fn on_ext_result(
        &mut self,
        i: usize,
        id: u64,
        outcome: Result<Value, String>,
        extension: Option<String>,
    ) {
        let Some(call) = self.plugins.exts[i].calls.remove(&id) else {
            return; // late (timed out, cancelled) or unknown: ignored
        };
        let path = extension.unwrap_or_else(|| self.plugins.exts[i].path.clone());
        let failed = |m: &mut Machine, e: &str| m.extension_error(&path, &call.event, e);
        // A handler's answer, or its failure reported (`None`: the handler had nothing to say).
        let answer = |m: &mut Machine, outcome: Result<Value, String>| match outcome {
            Ok(v) => Some(v),
            Err(e) => {
                failed(m, &e);
                None
            }
        };
        match call.kind {
            CallKind::ToolCall => {
                let decision = match outcome {
                    Ok(v) => Ok(proto::decode_tool_call_result(&v)),
                    Err(e) => {
                        failed(self, &e);
                        Err(e)
                    }
                };
                self.gate_ext_answer(i, id, decision);
            }
            CallKind::Review { batch, index } => {
                let a = answer(self, outcome);
                self.review_answer(batch, index, a);
            }
            CallKind::SessionOp(op) => {
                let cancel = match &outcome {
                    Ok(v) => proto::decode_cancel(v),
                    Err(e) => {
                        failed(self, e);
                        false
                    }
                };
                self.advance_session_op(op, cancel);
            }
            CallKind::Tool { batch, index } => {
                let r = proto::decode_tool_result(outcome);
                self.tool_finished(batch, index, r);
            }
            CallKind::Input(op) => {
                let a = answer(self, outcome);
                self.advance_input(op, a);
            }
            CallKind::BeforeStart(op) => {
                let answer = answer(self, outcome);
                self.advance_before_start(op, answer, &path);
            }
            CallKind::BeforeCompact { op, custom } => {
                let answer = answer(self, outcome);
                self.before_compact_answer(op, custom, answer);
            }
            CallKind::Context(op) => {
                let answer = answer(self, outcome);
                self.advance_context(op, answer, &path);
            }
            CallKind::Command { id, command, name } => {
                if let Err(e) = outcome {
                    self.extension_error(&format!("command:{name}"), "command", &e);
                }
                let data = self.disposition(response::Disposition::Handled);
                self.send(response::success(id.as_ref(), command, data.as_ref()));
            }
        }
    }

    /// Stop extension `i` for good: `extension_error`, its process group killed, everything it
    /// owed answered with its failure default (tool calls blocked, session operations go ahead,
    /// tools fail, commands answered), its dialogs forgotten, its tools and commands gone.
    pub(crate) fn isolate(&mut self, i: usize, event: &str, error: &str) {
        let Some(e) = self.plugins.exts.get_mut(i) else {
            return;
        };
        if e.life == Life::Dead {
            return;
        }
        let host_starting = e.node_host && matches!(e.life, Life::Starting(_));
        e.life = Life::Dead;
        if let Some(h) = e.handle.as_ref() {
            h.signal(child::SIGKILL);
        }
        if host_starting && !self.plugins.stopping {
            // pi's extensions did not load: no run starts without them (exit 2).
            let path = self.plugins.node_path();
            self.refuse_node(crate::ext::node_host::NodeProblem::Broken {
                path,
                error: format!("the host of pi's extensions failed ({event}): {error}"),
            });
            self.check_startup_done();
            return;
        }
        let path = e.path.clone();
        let name = e.name.clone();
        let calls: Vec<(u64, Call)> = e.calls.drain().collect();
        e.dialogs_open = 0;
        self.plugins.dialogs.retain(|_, d| {
            !matches!(d.owner, crate::core::plugins::DialogOwner::Ext { ext, .. } if ext == i)
        });
        self.extension_error(&path, event, error);
        for (id, call) in calls {
            match call.kind {
                CallKind::ToolCall => self.gate_ext_answer(i, id, Err(format!("{name}: {error}"))),
                CallKind::Review { batch, index } => self.review_answer(batch, index, None),
                CallKind::SessionOp(op) => self.advance_session_op(op, false),
                CallKind::Input(op) => self.advance_input(op, None),
                CallKind::BeforeStart(op) => self.advance_before_start(op, None, &path),
                CallKind::Context(op) => self.advance_context(op, None, &path),
                CallKind::BeforeCompact { op, custom } => {
                    self.before_compact_answer(op, custom, None)
                }
                CallKind::Tool { batch, index } => self.tool_finished(
                    batch,
                    index,
                    Err(format!("Extension \"{name}\" failed: {error}")),
                ),
                CallKind::Command { id, command, .. } => {
                    let data = self.disposition(response::Disposition::Handled);
                    self.send(response::success(id.as_ref(), command, data.as_ref()))
                }
            }
        }
        // Questions not yet asked of it are skipped.
        if let Some(g) = self.plugins.gate.as_mut() {
            g.exts.retain(|x| *x != i);
        }
        for r in self.plugins.reviews.values_mut() {
            r.exts.retain(|x| *x != i);
        }
        for op in self.plugins.ops.values_mut() {
            op.exts.retain(|x| *x != i);
        }
        for op in self.plugins.inputs.values_mut() {
            op.exts.retain(|x| *x != i);
        }
        if let Some(b) = self.plugins.before_start.as_mut() {
            b.exts.retain(|x| *x != i);
        }
        if let Some(c) = self.plugins.context.as_mut() {
            c.exts.retain(|x| *x != i);
        }
        if let Some((_, exts, _)) = self.compaction.as_mut().and_then(|c| c.asking.as_mut()) {
            exts.retain(|x| *x != i);
        }
        self.check_startup_done();
    }

    /// Send a blocking event to extension `i`; the answer comes back as `kind`.
    pub(crate) fn ext_call(&mut self, i: usize, event: &Value, kind: CallKind) -> u64 {
        let id = self.plugins.fresh_id();
        let name = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("event")
            .to_string();
        let line = proto::event(Some(id), event);
        self.ext_register_call(i, id, name, kind, line);
        id
    }

    /// Record a pending call and write its line.
    pub(crate) fn ext_register_call(
        &mut self,
        i: usize,
        id: u64,
        event: String,
        kind: CallKind,
        line: Vec<u8>,
    ) {
        let mut timeout = match kind {
            CallKind::Tool { .. } => self.plugins.cfg.ext_tool_timeout,
            _ => self.plugins.cfg.ext_timeout,
        };
        if self.plugins.exts.get(i).is_some_and(|e| e.node_host)
            && !matches!(kind, CallKind::Tool { .. })
        {
            // The node host gives up on a hung handler itself at the timeout (and drops that
            // extension alone); pith waits a little longer for a host that is stuck as a whole.
            timeout += crate::core::plugins::NODE_HOST_GRACE;
        }
        let deadline = Instant::now() + timeout;
        if let Some(e) = self.plugins.exts.get_mut(i) {
            e.calls.insert(
                id,
                Call {
                    kind,
                    deadline,
                    timeout,
                    event,
                },
            );
        }
        self.ext_write(i, line);
    }

    /// A frame pith emitted: a notification to the extensions subscribed to its type
    /// (`turn_start` / `turn_end` gain pi's `turnIndex` and `timestamp`).
    pub(crate) fn forward_event(&mut self, line: &[u8]) {
        let Some(ty) = frame_type(line) else { return };
        if ty == "agent_start" {
            self.plugins.turn_index = 0;
        }
        let subs = self.plugins.subscribers(ty);
        if !subs.is_empty() {
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            let out = if ty == "turn_start" || ty == "turn_end" {
                let mut v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                if let Some(m) = v.as_object_mut() {
                    m.insert("turnIndex".into(), json!(self.plugins.turn_index));
                    if ty == "turn_start" {
                        m.insert("timestamp".into(), json!(now_ms()));
                    }
                }
                proto::event(None, &v)
            } else {
                proto::event_raw(body)
            };
            for i in subs {
                self.ext_write(i, out.clone());
            }
        }
        if ty == "turn_end" {
            self.plugins.turn_index += 1;
        }
    }

    /// A notification of an extension-only event (`session_start`, ...).
    pub(crate) fn notify_extensions(&mut self, event: &Value) {
        let Some(ty) = event.get("type").and_then(Value::as_str) else {
            return;
        };
        let subs = self.plugins.subscribers(ty);
        if subs.is_empty() {
            return;
        }
        let line = proto::event(None, event);
        for i in subs {
            self.ext_write(i, line.clone());
        }
    }

    // ---- commands ------------------------------------------------------------------------

    /// `prompt` with `/name args` naming an extension command: run it (even while streaming);
    /// the response follows when it has finished.
    pub(crate) fn try_extension_command(
        &mut self,
        text: &str,
        id: Option<&Value>,
        command: &'static str,
    ) -> Option<Reply> {
        let rest = text.strip_prefix('/')?;
        let (name, args) = match rest.find(' ') {
            Some(p) => (&rest[..p], &rest[p + 1..]),
            None => (rest, ""),
        };
        let i = self.extension_command_owner(name)?;
        let call_id = self.plugins.fresh_id();
        let line = proto::command(call_id, name, args);
        let kind = CallKind::Command {
            id: id.cloned(),
            command,
            name: name.to_string(),
        };
        self.ext_register_call(i, call_id, "command".to_string(), kind, line);
        Some(Reply::Later)
    }

    /// A prompt naming one of the version's own commands (`/llama`, `/mcp`) that RPC answers with
    /// a notice: the notify first, then `handled`; no run, nothing added to the messages.
    pub(crate) fn try_builtin_command(&mut self, text: &str) -> Option<Reply> {
        let rest = text.strip_prefix('/')?;
        let name = rest.split(' ').next().unwrap_or(rest);
        if self.builtin_off(&format!(
            "builtin:{}",
            if name == "llama" { "llama.cpp" } else { name }
        )) || (name == "mcp" && self.plugins.cfg.no_mcp)
        {
            return None;
        }
        let texts = &self.profile.texts;
        let (message, kind) = match name {
            "llama" => (texts.llama_command?.to_string(), "warning"),
            "mcp" => {
                let none = texts.mcp_command_unconfigured?;
                self.plugins.mcp_connect_requested = true;
                if self.plugins.servers.is_empty() && self.plugins.cfg.mcp_errors.is_empty() {
                    let dir = self.env.agent_dir.display().to_string();
                    (none.replace("{agentDir}", &dir), "info")
                } else {
                    (self.mcp_status_text(), "info")
                }
            }
            _ => return None,
        };
        self.notify_host(message, kind);
        Some(Reply::Now(self.disposition(response::Disposition::Handled)))
    }

    /// pi 1.6.0's built-in extension at `path` (`builtin:mcp`) is turned off.
    pub(crate) fn builtin_off(&self, path: &str) -> bool {
        path.strip_prefix("builtin:")
            .is_some_and(|n| self.plugins.cfg.builtins_off.iter().any(|b| b == n))
    }

    /// A notice of pith's own for the host: an `extension_ui_request` `notify` in RPC mode, a
    /// line on stderr otherwise.
    pub(crate) fn notify_host(&mut self, message: String, kind: &str) {
        if !self.plugins.cfg.ui {
            eprintln!("{message}");
            return;
        }
        let frame = crate::ext::ui::request_frame(
            &crate::core::plugins::uuid_v4(),
            &crate::ext::ui::UiRequest::Notify {
                message,
                notify_type: Some(kind.to_string()),
            },
        );
        self.send(response::line(&frame));
    }

    fn extension_command_owner(&self, name: &str) -> Option<usize> {
        self.plugins
            .exts
            .iter()
            .position(|e| e.ready() && e.commands.iter().any(|c| c.name == name))
    }

    /// Does `text` (`/name args`) name a command of a running extension?
    pub(crate) fn names_extension_command(&self, text: &str) -> bool {
        let Some(rest) = text.strip_prefix('/') else {
            return false;
        };
        let name = rest.split(' ').next().unwrap_or(rest);
        self.extension_command_owner(name).is_some()
    }

    /// `get_commands`' data: extension commands (pi 0.87.1's inline extensions, `llama`, after
    /// the configured ones), then prompt templates, then skills.
    pub(crate) fn get_commands_data(&mut self) -> Value {
        let mut extensions = self.extension_commands();
        extensions.extend(
            self.profile
                .answers
                .builtin_commands
                .iter()
                .filter(|c| !c.needs_mcp || !self.plugins.cfg.no_mcp)
                .filter(|c| !self.builtin_off(c.path))
                .map(builtin_command)
                .filter_map(|v| serde_json::from_value::<SlashCommand>(v).ok()),
        );
        crate::resources::commands::CommandList::new(extensions, self.env.resources.get()).to_json()
    }

    /// The extension commands for `get_commands` (`source: "extension"`), in load order: under
    /// 0.73 with `path`, under 0.87 with `sourceInfo`.
    pub(crate) fn extension_commands(&self) -> Vec<SlashCommand> {
        let mut out = Vec::new();
        for e in self.plugins.exts.iter().filter(|e| e.ready()) {
            for c in &e.commands {
                // The node host's commands name the pi extension that registered each.
                let own = c.path.as_ref().and_then(|p| {
                    self.plugins
                        .cfg
                        .extensions
                        .iter()
                        .find(|x| x.path.to_string_lossy() == p.as_str())
                });
                let entry = own.unwrap_or(&e.entry);
                let file = c.path.clone().unwrap_or_else(|| e.path.clone());
                let (path, source_info) = if self.profile.answers.command_origin
                    == crate::protocol::CommandOrigin::SourceInfo
                {
                    let package = matches!(entry.origin, crate::ext::load::Origin::Package { .. });
                    let info = SourceInfo {
                        path: file,
                        source: entry
                            .package
                            .clone()
                            .unwrap_or_else(|| entry.origin.source().to_string()),
                        scope: entry.origin.scope().to_string(),
                        origin: if package { "package" } else { "top-level" }.to_string(),
                        base_dir: entry
                            .base_dir
                            .as_ref()
                            .map(|b| b.to_string_lossy().into_owned()),
                    };
                    (None, Some(info))
                } else {
                    (Some(file), None)
                };
                out.push(SlashCommand {
                    name: c.name.clone(),
                    description: c.description.as_ref().map(|d| json!(d)),
                    source: CommandSource::Extension,
                    path,
                    source_info,
                });
            }
        }
        out
    }

    /// Commands that need the extensions before the machine's own handler: session operations
    /// (extensions may cancel them; `session_start` follows them) and `steer` / `follow_up`
    /// naming an extension command (an error, as in pi). `None`: handle as usual.
    pub(crate) fn before_command(
        &mut self,
        cmd: &Command,
        id: Option<&Value>,
        ty: &str,
    ) -> Option<Reply> {
        if self.plugins.exts.is_empty() {
            return None;
        }
        let kind = match cmd {
            Command::GetCommands
                if self
                    .plugins
                    .exts
                    .iter()
                    .any(|e| matches!(e.life, Life::Starting(_))) =>
            {
                // Extensions still registering: answer once they have (or failed).
                self.plugins.waiting_commands.push(id.cloned());
                return Some(Reply::Later);
            }
            Command::GetAvailableModels | Command::SetModel { .. } | Command::CycleModel
                if self.plugins.node_host_starting() =>
            {
                // pi's extensions may still register providers: answer once they have loaded.
                self.plugins
                    .waiting_models
                    .push((id.cloned(), ty.to_string(), cmd.clone()));
                return Some(Reply::Later);
            }
            Command::GetState
                if self.plugins.cfg.deferred_model.is_some()
                    && self.plugins.node_host_starting() =>
            {
                // The start-up model waits for the extensions' providers: so does its state.
                self.plugins
                    .waiting_models
                    .push((id.cloned(), ty.to_string(), cmd.clone()));
                return Some(Reply::Later);
            }
            Command::Steer(input) | Command::FollowUp(input) => {
                let name = input.text.strip_prefix('/')?.split(' ').next()?;
                self.extension_command_owner(name)?;
                return Some(Reply::Fail(format!(
                    "Extension command \"/{name}\" cannot be queued. Use prompt() or execute the command when not streaming."
                )));
            }
            Command::NewSession { parent_session } => SessionOpKind::New {
                parent: parent_session.clone(),
            },
            Command::SwitchSession { session_path } => SessionOpKind::Switch {
                path: session_path.clone(),
            },
            Command::Fork { entry_id } => SessionOpKind::Fork {
                entry_id: entry_id.clone(),
            },
            Command::Clone => SessionOpKind::Clone,
            _ => return None,
        };
        let reply = OpReply::Rpc {
            id: id.cloned(),
            command: ty.to_string(),
        };
        self.start_session_op(kind, reply)
    }

    /// Ask the extensions that subscribe to `session_before_switch` / `session_before_fork`, one
    /// after another, then run the operation unless one cancelled it. `None`: done at once.
    fn start_session_op(&mut self, kind: SessionOpKind, reply: OpReply) -> Option<Reply> {
        let event = match kind {
            SessionOpKind::New { .. } | SessionOpKind::Switch { .. } => "session_before_switch",
            _ => "session_before_fork",
        };
        let exts = self.plugins.subscribers(event);
        if exts.is_empty() {
            let answer = self.run_session_op(&kind);
            return match reply {
                OpReply::Rpc { .. } => Some(answer.into()),
                OpReply::Ext { ext, call } => {
                    self.ext_write(
                        ext,
                        proto::call_result(&call, answer.map(|d| d.unwrap_or_default())),
                    );
                    None
                }
            };
        }
        let op = self.plugins.fresh_id();
        self.plugins.ops.insert(op, SessionOp { kind, reply, exts });
        self.advance_session_op(op, false);
        Some(Reply::Later)
    }

    /// The next extension's answer to session operation `op` (or its failure: not cancelled).
    pub(crate) fn advance_session_op(&mut self, op: u64, cancel: bool) {
        let Some(o) = self.plugins.ops.get_mut(&op) else {
            return;
        };
        if !cancel {
            if let Some(i) = o.exts.pop_front() {
                let event = match &o.kind {
                    SessionOpKind::New { .. } => {
                        json!({"type": "session_before_switch", "reason": "new"})
                    }
                    SessionOpKind::Switch { path } => json!({
                        "type": "session_before_switch",
                        "reason": "resume",
                        "targetSessionFile": self.env.cwd.join(path).to_string_lossy(),
                    }),
                    SessionOpKind::Fork { entry_id } => json!({
                        "type": "session_before_fork",
                        "entryId": entry_id,
                        "position": "before",
                    }),
                    SessionOpKind::Clone => json!({
                        "type": "session_before_fork",
                        "entryId": self.state.session.leaf_id().unwrap_or_default(),
                        "position": "at",
                    }),
                };
                self.ext_call(i, &event, CallKind::SessionOp(op));
                return;
            }
        }
        let Some(o) = self.plugins.ops.remove(&op) else {
            return;
        };
        let reply = if cancel {
            Ok(Some(json!({"cancelled": true})))
        } else {
            self.run_session_op(&o.kind)
        };
        match o.reply {
            OpReply::Rpc { id, command } => {
                let line = match reply {
                    Ok(data) => response::success(id.as_ref(), &command, data.as_ref()),
                    Err(e) => response::error(id.as_ref(), Some(&command), &e),
                };
                self.send(line);
            }
            OpReply::Ext { ext, call } => {
                let line = proto::call_result(&call, reply.map(|d| d.unwrap_or_default()));
                self.ext_write(ext, line);
            }
        }
    }

    /// Run a session operation the extensions allowed; `session_shutdown` and `session_start`
    /// tell them about it.
    fn run_session_op(&mut self, kind: &SessionOpKind) -> Answer {
        let previous = self
            .state
            .session
            .file()
            .map(|f| f.to_string_lossy().to_string());
        let reason = match kind {
            SessionOpKind::New { .. } => "new",
            SessionOpKind::Switch { .. } => "resume",
            _ => "fork",
        };
        let reply = match kind {
            SessionOpKind::New { parent } => self.cmd_new_session(parent.clone()),
            SessionOpKind::Switch { path } => self.cmd_switch_session(path),
            SessionOpKind::Fork { entry_id } => self.cmd_fork(entry_id),
            SessionOpKind::Clone => self.cmd_clone(),
        };
        if reply.is_ok() {
            let target = self
                .state
                .session
                .file()
                .map(|f| f.to_string_lossy().to_string());
            let mut down = json!({"type": "session_shutdown", "reason": reason});
            if let Some(t) = target {
                down["targetSessionFile"] = json!(t);
            }
            self.notify_extensions(&down);
            let mut start = json!({"type": "session_start", "reason": reason});
            if let Some(p) = previous {
                start["previousSessionFile"] = json!(p);
            }
            self.add_session_fields(&mut start);
            self.notify_extensions(&start);
        }
        reply
    }

    /// pith's additions to `session_start`: the session now current (an extension has no other
    /// way to learn it).
    fn add_session_fields(&self, ev: &mut Value) {
        ev["sessionId"] = json!(self.state.session_id);
        if let Some(f) = self.state.session.file() {
            ev["sessionFile"] = json!(f.to_string_lossy());
        }
    }

    // ---- the node host's API calls and state -------------------------------------------------

    /// What pi's synchronous getters read in the node host: the model, thinking level, session
    /// name, whether the agent is idle or has queued messages, and the tools.
    pub(crate) fn node_host_state(&self) -> Value {
        let remote = self.offered_remote_tools();
        let mut tools: Vec<Value> = self
            .env
            .tools
            .iter()
            .map(|t| json!({"name": t.name(), "description": t.description()}))
            .collect();
        tools.extend(
            remote
                .iter()
                .map(|r| json!({"name": r.name, "description": r.description})),
        );
        let pending = self.queues.steering.len() + self.queues.follow_up.len();
        // pi's `getAllTools()`: the active ones, then what `setActiveTools` may turn on.
        let mut inactive: Vec<Value> = crate::tools::ALL_TOOLS
            .iter()
            .filter(|n| !tools.iter().any(|t| t["name"] == **n))
            .filter_map(|n| crate::tools::builtin_tool(n))
            .map(|t| json!({"name": t.name(), "description": t.description()}))
            .collect();
        if !self.plugins.inactive_remote.is_empty() {
            let all = self.plugins.remote_tools(&|_| true);
            inactive.extend(
                all.iter()
                    .filter(|r| self.plugins.inactive_remote.contains(&r.name))
                    .map(|r| json!({"name": r.name, "description": r.description})),
            );
        }
        json!({
            "model": self.state.model,
            "thinkingLevel": self.state.thinking.as_str(),
            "sessionName": self.state.session.session_name(),
            "sessionId": self.state.session_id,
            "sessionFile": self.state.session.file().map(|f| f.to_string_lossy().into_owned()),
            "idle": self.is_idle(),
            "pendingMessages": pending > 0,
            "tools": tools,
            "inactiveTools": inactive,
            "models": self.plugins.models_generation,
        })
    }

    /// What pi's synchronous session reads need (`ctx.sessionManager.getEntries()`,
    /// `getBranch()`, `getTree()`, ..., `ctx.getContextUsage()`, `ctx.getSystemPrompt()`,
    /// `pi.getCommands()`), fetched by the host before a handler of an extension that uses them:
    /// the `call_result` line, with the entries' stored lines spliced in. The session only grows:
    /// a host that has its entries up to `since` (of session `sessionId`) gets the ones after
    /// it (`"append": true`), so a long session is not sent again for every handler.
    fn node_host_snapshot(&mut self, id: &Value, params: &Value) -> Vec<u8> {
        let usage = self
            .session_stats()
            .get("contextUsage")
            .cloned()
            .unwrap_or(Value::Null);
        let system_prompt = self.current_system_prompt();
        let commands = self
            .get_commands_data()
            .get("commands")
            .cloned()
            .unwrap_or(Value::Null);
        let since = params
            .get("since")
            .and_then(Value::as_str)
            .filter(|_| params.get("sessionId") == Some(&json!(self.state.session_id)));
        let (entries, append) = match since.and_then(|s| {
            crate::core::session_query::entries_json(&self.state.session, Some(s)).ok()
        }) {
            Some(e) => (e, true),
            None => (
                crate::core::session_query::entries_json(&self.state.session, None)
                    .unwrap_or_else(|_| b"{\"entries\":[],\"leafId\":null}".to_vec()),
                false,
            ),
        };
        let rest = json!({
            "append": append,
            "sessionId": self.state.session_id,
            "header": Value::Object(self.state.session.header().clone()),
            "contextUsage": usage,
            "systemPrompt": system_prompt,
            "commands": commands,
        });
        // `{"entries":[…],"leafId":…}` joined with the rest.
        let mut out = Vec::with_capacity(entries.len() + 4096);
        out.extend_from_slice(b"{\"type\":\"call_result\",\"id\":");
        let _ = crate::rpc::response::write_js(&mut out, id);
        out.extend_from_slice(b",\"result\":");
        out.extend_from_slice(&entries[..entries.len() - 1]);
        out.push(b',');
        let mut tail = Vec::new();
        let _ = crate::rpc::response::write_js(&mut tail, &rest);
        out.extend_from_slice(&tail[1..]);
        out.push(b'}');
        out
    }

    /// pi's `setActiveTools(names)`: the built-in tools named (in pith's order), and the
    /// extension and MCP tools named; the others are no longer offered. From the next run.
    pub(crate) fn set_active_tools(&mut self, names: &[String]) {
        let mut tools: Vec<std::sync::Arc<dyn crate::tools::Tool>> = Vec::new();
        for n in names {
            if tools.iter().any(|t| t.name() == n) {
                continue;
            }
            if let Some(t) = self.env.tools.iter().find(|t| t.name() == n) {
                tools.push(t.clone());
            } else if self.profile.tools.codemode && n == crate::codemode::NAME {
                tools.push(std::sync::Arc::new(crate::codemode::CodemodeTool {
                    docs_path: crate::codemode::docs_path(),
                }));
            } else if let Some(t) = crate::tools::tool_for(n, &self.profile.tools) {
                tools.push(std::sync::Arc::from(t));
            }
        }
        self.env.tools = tools;
        self.plugins.inactive_remote = self
            .plugins
            .remote_tools(&|_| true)
            .into_iter()
            .map(|t| t.name)
            .filter(|n| !names.contains(n))
            .collect();
    }

    /// pi's `ExtensionAPI` methods that change pith's state, called by the node host.
    fn node_host_call(&mut self, method: &str, params: &Value) -> Result<Value, String> {
        let str_param = |k: &str| params.get(k).and_then(Value::as_str);
        match method {
            "appendEntry" => {
                let custom_type = str_param("customType").ok_or("customType must be a string")?;
                let data = params.get("data").filter(|v| !v.is_null()).cloned();
                let id = self.state.session.append_custom(custom_type, data);
                self.flush_session_warnings();
                if self.profile.events.extension_entries_announced {
                    if let Some(entry) = self
                        .state
                        .session
                        .entry(&id)
                        .map(|e| Value::Object(e.raw().clone()))
                    {
                        self.emit(&crate::rpc::event::Event::EntryAppended { entry: &entry });
                    }
                }
                Ok(Value::Null)
            }
            "setSessionName" => {
                let name = str_param("name").ok_or("name must be a string")?;
                match self.handle_command(Command::SetSessionName(name.to_string()), None) {
                    Reply::Fail(e) => Err(e),
                    _ => Ok(Value::Null),
                }
            }
            "setLabel" => {
                let entry = str_param("entryId").ok_or("entryId must be a string")?;
                self.state
                    .session
                    .append_label(entry, str_param("label"))
                    .map(|_| Value::Null)
            }
            "setModel" => {
                let provider = str_param("provider").ok_or("provider must be a string")?;
                let id = str_param("id").ok_or("id must be a string")?;
                Ok(json!(self.cmd_set_model(provider, id).is_ok()))
            }
            "setThinkingLevel" => {
                let level = str_param("level")
                    .and_then(crate::message::ThinkingLevel::parse)
                    .ok_or("level must be a thinking level")?;
                let _ = self.handle_command(Command::SetThinkingLevel(level), None);
                Ok(Value::Null)
            }
            "setActiveTools" => {
                let names: Vec<String> = params
                    .get("names")
                    .and_then(Value::as_array)
                    .ok_or("names must be an array of tool names")?
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect();
                self.set_active_tools(&names);
                Ok(Value::Null)
            }
            "abort" => {
                // As the host's `abort`, without a response frame (nobody asked over RPC).
                if self.run.is_some() {
                    self.abort_requested = true;
                    self.abort_run(None);
                }
                Ok(Value::Null)
            }
            "models" => Ok(self.models_for_host()),
            "shutdown" => {
                // pi's print mode ignores it (pith exits after its prompts anyway).
                if self.plugins.cfg.mode != "print" {
                    self.plugins.shutdown_requested = true;
                }
                Ok(Value::Null)
            }
            "registerProvider" => {
                let name = str_param("name").ok_or("name must be a string")?;
                let config = params.get("config").cloned().unwrap_or(Value::Null);
                let env = self.env.auth.env().clone();
                self.env.registry.register_provider(name, &config, &*env)?;
                self.models_changed(name);
                Ok(Value::Null)
            }
            "unregisterProvider" => {
                let name = str_param("name").ok_or("name must be a string")?;
                if self.env.registry.unregister_provider(name) {
                    self.models_changed(name);
                }
                Ok(Value::Null)
            }
            other => Err(format!("pith does not support {other}")),
        }
    }

    /// `ctx.modelRegistry`'s data: every model (as `get_available_models` shows them), the
    /// providers with a credential, and models.json's error.
    fn models_for_host(&self) -> Value {
        let registry = &self.env.registry;
        let all = registry.all();
        let mut configured: Vec<&str> = Vec::new();
        for m in all {
            if !configured.contains(&m.provider.as_str())
                && registry.has_configured_auth(&m.provider, &self.env.auth)
            {
                configured.push(&m.provider);
            }
        }
        json!({"all": all, "configured": configured, "error": registry.load_error()})
    }

    /// `ctx.waitForIdle()` calls answered, now that pith is idle.
    pub(crate) fn answer_idle_waiters(&mut self) {
        for (i, id) in std::mem::take(&mut self.plugins.idle_waiters) {
            self.ext_write(i, proto::call_result(&id, Ok(Value::Null)));
        }
    }

    /// Provider `name` was registered, changed or removed by an extension: the current model,
    /// when it is one of that provider's, is read again (its `baseUrl`, headers...; it stays as
    /// it is when the provider is gone, as pi keeps it); a start-up `--model` waiting for the
    /// extensions is tried once they have all loaded ([`Machine::resolve_deferred_model`]).
    fn models_changed(&mut self, name: &str) {
        self.plugins.models_generation += 1;
        let keys = self.env.registry.provider_api_keys();
        self.env.auth.set_fallback_keys(keys);
        if let Some(m) = self.state.model.as_ref().filter(|m| m.provider == name) {
            if let Some(fresh) = self.env.registry.lookup(&m.provider, &m.id) {
                self.state.model = Some(fresh);
            }
        }
    }

    // ---- before_agent_start and context --------------------------------------------------------

    /// The system prompt as the next run would send it (pi's `getSystemPrompt()`).
    pub(crate) fn current_system_prompt(&mut self) -> String {
        if let Some(run) = &self.run {
            return run.system_prompt.clone();
        }
        if self.profile.agent.system_messages {
            let remote = self.offered_remote_tools();
            return self.system_update(true, &remote).1;
        }
        self.system_prompt()
    }

    /// Start a run with `messages`, after pi's `before_agent_start` when an extension listens:
    /// each may add a custom message (after the prompt and `nextTurn` messages) and replace the
    /// system prompt for this run; the next one sees the replacement.
    pub(crate) fn start_run_asking(
        &mut self,
        messages: Vec<AgentMessage>,
        prompt: &str,
        images: &[crate::message::ImageContent],
        answer: Option<Vec<u8>>,
    ) {
        let exts = self.plugins.subscribers("before_agent_start");
        if exts.is_empty() {
            if let Some(a) = answer {
                self.send(a);
            }
            self.start_run(messages);
            return;
        }
        let op = self.plugins.fresh_id();
        let system_prompt = self.current_system_prompt();
        self.plugins.before_start = Some(crate::core::plugins::BeforeStart {
            op,
            messages,
            prompt: prompt.to_string(),
            images: if images.is_empty() {
                Value::Null
            } else {
                json!(images)
            },
            system_prompt,
            replaced: false,
            exts,
            answer,
            abort_waiters: Vec::new(),
        });
        self.advance_before_start(op, None, "");
    }

    /// The next extension's answer to run `op`'s `before_agent_start` (`None`: no change).
    pub(crate) fn advance_before_start(&mut self, op: u64, answer: Option<Value>, path: &str) {
        if self
            .plugins
            .before_start
            .as_ref()
            .is_none_or(|b| b.op != op)
        {
            return;
        }
        if let Some(a) = answer {
            match proto::decode_start_messages(&a) {
                Ok(ms) => {
                    if let Some(b) = self.plugins.before_start.as_mut() {
                        b.messages.extend(ms.into_iter().map(AgentMessage::Custom));
                    }
                }
                Err(e) => self.extension_error(path, "before_agent_start", &e),
            }
            if let (Some(p), Some(b)) = (
                a.get("systemPrompt").and_then(Value::as_str),
                self.plugins.before_start.as_mut(),
            ) {
                b.system_prompt = p.to_string();
                b.replaced = true;
            }
        }
        let Some(b) = self.plugins.before_start.as_mut() else {
            return;
        };
        if let Some(i) = b.exts.pop_front() {
            let mut event = json!({"type": "before_agent_start", "prompt": b.prompt});
            if !b.images.is_null() {
                event["images"] = b.images.clone();
            }
            event["systemPrompt"] = json!(b.system_prompt);
            self.ext_call(i, &event, CallKind::BeforeStart(op));
            return;
        }
        let Some(b) = self.plugins.before_start.take() else {
            return;
        };
        if let Some(a) = b.answer {
            self.send(a);
        }
        let forced = b.replaced.then_some(b.system_prompt);
        self.start_run_with(b.messages, forced, b.abort_waiters);
    }

    /// pi's `context` event before an LLM request: the extensions subscribed see the messages
    /// (without the transcript's system messages) one after the other and may replace them.
    pub(crate) fn ask_context(&mut self) {
        let exts = self.plugins.subscribers("context");
        let op = self.plugins.fresh_id();
        self.plugins.context = Some(crate::core::plugins::ContextOp {
            op,
            messages: None,
            exts,
        });
        self.advance_context(op, None, "");
    }

    /// The next extension's answer to request `op`'s `context` (`None`: no change).
    pub(crate) fn advance_context(&mut self, op: u64, answer: Option<Value>, path: &str) {
        let Some(c) = self.plugins.context.as_mut().filter(|c| c.op == op) else {
            return;
        };
        if let Some(m) = answer
            .and_then(|mut a| a.get_mut("messages").map(Value::take))
            .filter(Value::is_array)
        {
            c.messages = Some(m);
        }
        if let Some(i) = c.exts.pop_front() {
            let messages = match &c.messages {
                Some(m) => m.clone(),
                None => Value::Array(
                    self.state
                        .messages
                        .iter()
                        .filter(|m| !matches!(m, AgentMessage::System(_)))
                        .filter_map(|m| serde_json::to_value(m).ok())
                        .collect(),
                ),
            };
            let event = json!({"type": "context", "messages": messages});
            self.ext_call(i, &event, CallKind::Context(op));
            return;
        }
        let Some(c) = self.plugins.context.take() else {
            return;
        };
        let replaced = match c.messages.as_ref().and_then(Value::as_array) {
            None => None,
            Some(list) => {
                let ms: Option<Vec<AgentMessage>> = list
                    .iter()
                    .map(crate::session::entry::message_from_json)
                    .collect();
                match ms {
                    Some(mut ms) => {
                        ms.retain(|m| !matches!(m, AgentMessage::System(_)));
                        Some(ms)
                    }
                    None => {
                        let error = "invalid messages (the request sends the context): a message pith cannot read";
                        self.extension_error(path, "context", error);
                        None
                    }
                }
            }
        };
        if self.run.is_some() {
            self.send_llm_request(replaced);
        }
    }

    // ---- the input hook -----------------------------------------------------------------------

    /// pi's `input` event, before a prompt runs or is queued: `Ok` when no extension is subscribed
    /// (or the prompt has been through it), else the prompt waits for their answers.
    pub(crate) fn input_hook(
        &mut self,
        input: crate::rpc::command::UserInput,
        behavior: Option<StreamingBehavior>,
        id: Option<&Value>,
        command: &'static str,
    ) -> Result<crate::rpc::command::UserInput, Reply> {
        if std::mem::take(&mut self.plugins.input_checked) || self.plugins.starting() {
            return Ok(input);
        }
        let exts = self.plugins.subscribers("input");
        if exts.is_empty() {
            return Ok(input);
        }
        let op = self.plugins.fresh_id();
        self.plugins.inputs.insert(
            op,
            crate::core::plugins::InputOp {
                input,
                behavior,
                id: id.cloned(),
                command,
                exts,
            },
        );
        self.advance_input(op, None);
        Err(Reply::Later)
    }

    /// The next extension's answer to prompt `op`'s `input` event (`None`: no change).
    pub(crate) fn advance_input(&mut self, op: u64, answer: Option<Value>) {
        let Some(o) = self.plugins.inputs.get_mut(&op) else {
            return;
        };
        let action = answer
            .as_ref()
            .and_then(|a| a.get("action"))
            .and_then(Value::as_str);
        if action == Some("handled") {
            if let Some(o) = self.plugins.inputs.remove(&op) {
                let data = self.disposition(response::Disposition::Handled);
                self.send(response::success(o.id.as_ref(), o.command, data.as_ref()));
            }
            return;
        }
        if action == Some("transform") {
            let a = answer.as_ref().unwrap_or(&Value::Null);
            if let Some(t) = a.get("text").and_then(Value::as_str) {
                o.input.text = t.to_string();
            }
            if let Some(images) = a
                .get("images")
                .and_then(|v| serde_json::from_value(v.clone()).ok())
            {
                o.input.images = images;
            }
        }
        if let Some(i) = o.exts.pop_front() {
            let mut event = json!({"type": "input", "text": o.input.text, "source": "rpc"});
            if !o.input.images.is_empty() {
                event["images"] = json!(o.input.images);
            }
            if self.run.is_some() {
                if let Some(b) = o.behavior {
                    event["streamingBehavior"] = json!(match b {
                        StreamingBehavior::Steer => "steer",
                        StreamingBehavior::FollowUp => "followUp",
                    });
                }
            }
            self.ext_call(i, &event, CallKind::Input(op));
            return;
        }
        let Some(o) = self.plugins.inputs.remove(&op) else {
            return;
        };
        let reply = match (o.command, o.behavior) {
            ("steer" | "follow_up", Some(b)) => {
                let r = self.enqueue(o.input, b);
                self.queued_reply(r)
            }
            _ => {
                self.plugins.input_checked = true;
                let reply = self.cmd_prompt(o.input, o.behavior, o.id.as_ref(), o.command);
                self.plugins.input_checked = false;
                reply
            }
        };
        match reply {
            Reply::Later => {}
            Reply::Fail(e) => self.send(response::error(o.id.as_ref(), Some(o.command), &e)),
            Reply::Now(data) => {
                self.send(response::success(o.id.as_ref(), o.command, data.as_ref()))
            }
        }
    }

    // ---- messages for the conversation ------------------------------------------------------

    /// pi's `sendMessage` / `sendUserMessage`: while the agent runs, queued (steer, follow-up)
    /// or added after the turn; idle, a new run (`triggerTurn`) or just recorded.
    fn ext_send_message(
        &mut self,
        i: usize,
        message: AgentMessage,
        trigger_turn: Option<bool>,
        deliver_as: Option<DeliverAs>,
    ) {
        if deliver_as == Some(DeliverAs::NextTurn) {
            self.plugins.next_turn.push(message);
            return;
        }
        let running = self.run.is_some();
        if running && trigger_turn != Some(false) {
            let behavior = match deliver_as {
                Some(DeliverAs::FollowUp) => StreamingBehavior::FollowUp,
                _ => StreamingBehavior::Steer,
            };
            if let Err(e) = self.enqueue_message(message, behavior) {
                let path = self.plugins.exts[i].path.clone();
                self.extension_error(&path, "send_message", &e);
            }
            return;
        }
        if running {
            self.plugins.after_turn.push(message);
            return;
        }
        if trigger_turn == Some(true) {
            if let Err(e) = self.start_run_for_extension(message) {
                let path = self.plugins.exts[i].path.clone();
                self.extension_error(&path, "send_message", &e);
            }
            return;
        }
        self.record_extension_message(message);
    }

    /// Record a message outside a turn: session, context, `message_start` / `message_end`.
    pub(crate) fn record_extension_message(&mut self, m: AgentMessage) {
        self.persist_message(&m);
        self.state.messages.push(m.clone());
        self.emit(&crate::rpc::event::Event::MessageStart { message: &m });
        self.emit(&crate::rpc::event::Event::MessageEnd { message: &m });
    }

    /// Messages sent without a turn while the agent ran: recorded once the turn is over.
    pub(crate) fn flush_after_turn_messages(&mut self) {
        for m in std::mem::take(&mut self.plugins.after_turn) {
            self.record_extension_message(m);
        }
    }

    /// An idle agent asked by an extension to run with `message`.
    fn start_run_for_extension(&mut self, message: AgentMessage) -> Result<(), String> {
        if !self.is_idle() || self.pending_prompt.is_some() {
            return self.enqueue_message(message, StreamingBehavior::FollowUp);
        }
        let Some(model) = self.state.model.clone() else {
            return Err("No model selected.".to_string());
        };
        if model.api != "faux" && !self.key_configured(&model.provider) {
            return Err(format!("No API key found for {}.", model.provider));
        }
        self.flush_deferred_bash();
        self.begin_limits(None);
        self.start_run(vec![message]);
        Ok(())
    }

    /// Queue a message for delivery during the run (`queue_update` shows its text).
    fn enqueue_message(
        &mut self,
        message: AgentMessage,
        behavior: StreamingBehavior,
    ) -> Result<(), String> {
        let text = match &message {
            AgentMessage::User(u) => content_text(&u.content),
            AgentMessage::Custom(c) => content_text(&c.content),
            _ => String::new(),
        };
        let q = crate::queues::Queued { text, message };
        self.push_queued(q, behavior)
    }

    /// `sendMessage` with `deliverAs: "nextTurn"`: the messages the next prompt carries.
    pub(crate) fn take_next_turn_messages(&mut self) -> Vec<AgentMessage> {
        std::mem::take(&mut self.plugins.next_turn)
    }
}

fn content_text(c: &UserContent) -> String {
    match c {
        UserContent::Text(t) => t.clone(),
        UserContent::Blocks(b) => b
            .iter()
            .filter_map(|c| match c {
                crate::message::Content::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(""),
    }
}

/// The `type` of a serialised frame (`{"type":"<name>",...`).
fn frame_type(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(b"{\"type\":\"")?;
    let end = rest.iter().position(|b| *b == b'"')?;
    std::str::from_utf8(&rest[..end]).ok()
}

#[cfg(test)]
mod tests {
    use super::frame_type;

    #[test]
    fn frame_types() {
        assert_eq!(
            frame_type(b"{\"type\":\"turn_start\"}\n"),
            Some("turn_start")
        );
        assert_eq!(frame_type(b"{\"id\":1}"), None);
    }
}
