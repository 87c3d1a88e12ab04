//! What stands between a validated tool call and its execution, and between its result and
//! `tool_execution_end`: the tool gate (extensions' `tool_call` handlers in load order, then
//! `--confirm-tools`), UI dialogs (for extensions and for the gate), calls of tools that run in
//! an extension or an MCP server, and extensions' `tool_result` review.
//!
//! The gate asks one question at a time, for one call at a time, in call order (pi prepares the
//! calls of a message one after the other): the agent loop stops preparing while it waits and
//! resumes in [`Machine::gate_done`].

use std::time::Instant;

use serde_json::{Value, json};

use crate::core::agent::Exec;
use crate::core::machine::Machine;
use crate::core::plugins::{
    Asked, CallKind, Dialog, DialogOwner, Gate, GateWait, Owner, RemoteTool, Review,
};
use crate::ext::protocol::{self as proto, ToolCallDecision};
use crate::ext::ui::{self, Answer, UiRequest};
use crate::message::{Content, ToolCall};
use crate::perms::approval::{self, Denial};
use crate::perms::rules::{By, Level, Subject};
use crate::rpc::response;
use crate::tools::{ToolOutput, ToolResult};

/// Dialogs one extension may have open at once (the host answers them one by one; more is a
/// runaway extension, and each open dialog is memory).
const MAX_OPEN_DIALOGS: usize = 64;

impl Machine {
    /// Does a call of `tool` have to pass the gate?
    pub(crate) fn gate_needed(&self, tool: &str) -> bool {
        self.plugins.cfg.confirm_tools.needs(tool)
            || self.plugins.cfg.permissions.is_some()
            || self.plugins.exts.iter().any(|e| e.wants("tool_call"))
    }

    /// Open the gate for call `index` of `batch`. `Some(decision)` when it is decided at once;
    /// `None` when it waits (the answer resumes the batch through `gate_done`).
    pub(crate) fn start_gate(
        &mut self,
        batch: u64,
        index: usize,
        call: &ToolCall,
        exec: Exec,
        args: Value,
    ) -> Option<Result<Value, String>> {
        self.plugins.gate = Some(Gate {
            batch,
            index,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            args,
            exec,
            exts: self.plugins.subscribers("tool_call"),
            permission_pending: self.plugins.cfg.permissions.is_some(),
            asked: None,
            waiting: None,
        });
        let decided = self.advance_gate();
        if decided.is_some() {
            self.plugins.gate = None;
        }
        decided
    }

    /// Ask the next question; `Some(decision)` when there is none left (or one decided).
    fn advance_gate(&mut self) -> Option<Result<Value, String>> {
        let g = self.plugins.gate.as_mut()?;
        if let Some(i) = g.exts.pop_front() {
            let event = json!({
                "type": "tool_call",
                "toolCallId": g.call_id,
                "toolName": g.tool,
                "input": g.args,
            });
            let call = self.ext_call(i, &event, CallKind::ToolCall);
            if let Some(g) = self.plugins.gate.as_mut() {
                g.waiting = Some(GateWait::Ext { ext: i, call });
            }
            return None;
        }
        if g.permission_pending {
            g.permission_pending = false;
            return self.permission_stage();
        }
        Some(Ok(g.args.clone()))
    }

    /// The permission rules decide the gate's call (its arguments as the extensions left them):
    /// allowed and denied at once, or asked in a `confirm` dialog that shows where a file
    /// tool's path resolves. Each decision is a `permission_decision` event.
    fn permission_stage(&mut self) -> Option<Result<Value, String>> {
        let policy = self.plugins.cfg.permissions.as_ref()?;
        let g = self.plugins.gate.as_ref()?;
        let (tool, args) = (g.tool.clone(), g.args.clone());
        // Where a file tool's bytes land: resolved once here, shown in the dialog, matched by
        // the rules, and pinned for a write or edit (the tool refuses if it changed).
        let target = crate::perms::file_tool_path(&tool, &args).map(|p| {
            let lexical = crate::tools::paths::resolve_to_cwd(&p, &self.env.cwd);
            let real = crate::tools::paths::resolve_real(&lexical);
            let shown = approval::Target {
                resolved: real.to_string_lossy().into_owned(),
                moved: real != lexical,
                outside: !policy.inside_cwd(&real),
            };
            (real, shown)
        });
        let line;
        let split;
        let subject = match (&target, tool.as_str()) {
            (Some((real, _)), _) => Subject::Path(real),
            (None, "bash") => {
                line = args
                    .get("command")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                split = crate::perms::shell::split(&line);
                Subject::Command(&split, &line)
            }
            _ => Subject::Call,
        };
        let verdict = policy.rules.decide(&tool, subject, policy.default);
        let pinned = target
            .as_ref()
            .filter(|_| matches!(tool.as_str(), "write" | "edit"))
            .map(|(real, _)| real.clone());
        let (rule, part, confirm_tools) = match &verdict.by {
            By::Rule {
                rule,
                part,
                confirm_tools,
            } => (Some(rule.clone()), part.clone(), *confirm_tools),
            By::Default { part } => (None, part.clone(), false),
        };
        let by = if rule.is_some() { "rule" } else { "default" };
        match verdict.level {
            Level::Allow => {
                self.permission_event(true, by, rule.as_deref());
                self.pin_target(pinned);
                Some(Ok(args))
            }
            Level::Deny => {
                self.permission_event(false, by, rule.as_deref());
                Some(Err(match &rule {
                    Some(r) => approval::rule_denial_text(&tool, r, part.as_deref()),
                    None => approval::default_denial_text(&tool, part.as_deref()),
                }))
            }
            Level::Ask => {
                if !self.plugins.cfg.ui {
                    self.permission_event(false, by, rule.as_deref());
                    return Some(Err(approval::ask_without_host_text(
                        &tool,
                        rule.as_deref(),
                        confirm_tools,
                    )));
                }
                if self.plugins.input_closed {
                    self.permission_event(false, "host", rule.as_deref());
                    return Some(Err(approval::denial_text(&tool, Denial::Cancelled)));
                }
                if self.plugins.cfg.call_events {
                    let call_id = self.plugins.gate.as_ref().map(|g| g.call_id.clone());
                    let mut event = json!({
                        "type": "permission_request",
                        "toolCallId": call_id,
                        "toolName": tool,
                    });
                    if let Some(r) = &rule {
                        event["rule"] = json!(r);
                    }
                    self.send(response::line(&event));
                }
                let (title, message) =
                    approval::describe(&tool, &args, target.as_ref().map(|(_, t)| t));
                let timeout = self.plugins.cfg.confirm_timeout;
                let req = UiRequest::Confirm {
                    title,
                    message,
                    timeout: timeout.map(|t| t.as_millis() as u64),
                };
                let id = self.open_dialog(DialogOwner::Gate, &req);
                if let Some(g) = self.plugins.gate.as_mut() {
                    g.waiting = Some(GateWait::Dialog(id));
                    g.asked = Some(Asked {
                        rule,
                        target: pinned,
                    });
                }
                None
            }
        }
    }

    /// `{"type":"permission_decision",...}` for the gate's call.
    fn permission_event(&mut self, allow: bool, by: &str, rule: Option<&str>) {
        let Some(g) = self.plugins.gate.as_ref() else {
            return;
        };
        let mut event = json!({
            "type": "permission_decision",
            "toolCallId": g.call_id,
            "toolName": g.tool,
            "decision": if allow { "allow" } else { "deny" },
            "by": by,
        });
        if let Some(r) = rule {
            event["rule"] = json!(r);
        }
        let line = response::line(&event);
        if !self.plugins.exts.is_empty() {
            self.forward_event(&line);
        }
        self.send(line);
    }

    /// A write's or edit's approved target goes with the call to its tool.
    fn pin_target(&mut self, target: Option<std::path::PathBuf>) {
        let Some(t) = target else { return };
        let Some((batch, index)) = self.plugins.gate.as_ref().map(|g| (g.batch, g.index)) else {
            return;
        };
        if let Some(b) = self.batch_mut() {
            if b.batch == batch {
                b.approved.retain(|(i, _)| *i != index);
                b.approved.push((index, t));
            }
        }
    }

    /// Extension `i` answered the gate's `tool_call` question `call` (or failed: block).
    pub(crate) fn gate_ext_answer(
        &mut self,
        i: usize,
        call: u64,
        decision: Result<ToolCallDecision, String>,
    ) {
        let Some(g) = self.plugins.gate.as_mut() else {
            return;
        };
        if !matches!(g.waiting, Some(GateWait::Ext { ext, call: c }) if ext == i && c == call) {
            return;
        }
        g.waiting = None;
        let outcome = match decision {
            Ok(ToolCallDecision::Block { reason }) => Some(Err(
                reason.unwrap_or_else(|| "Tool execution was blocked".to_string())
            )),
            Ok(ToolCallDecision::Allow { input }) => {
                if let Some(input) = input {
                    g.args = input;
                }
                self.advance_gate()
            }
            Err(e) => Some(Err(format!("Extension failed, blocking execution: {e}"))),
        };
        if let Some(d) = outcome {
            self.finish_gate(d);
        }
    }

    fn finish_gate(&mut self, decision: Result<Value, String>) {
        let Some(g) = self.plugins.gate.take() else {
            return;
        };
        self.gate_done(g.batch, g.index, g.exec, decision);
    }

    /// The batch of the gate was aborted: the call does not run.
    pub(crate) fn abort_gate(&mut self, batch: u64) {
        if self.plugins.gate.as_ref().is_some_and(|g| g.batch == batch) {
            if let Some(GateWait::Dialog(id)) =
                self.plugins.gate.as_ref().and_then(|g| g.waiting.as_ref())
            {
                let id = id.clone();
                self.plugins.dialogs.remove(&id);
            }
            self.finish_gate(Err(crate::tools::ABORTED.to_string()));
        }
    }

    /// The batch was dropped with its run (`new_session`, `switch_session`).
    pub(crate) fn drop_gate(&mut self, batch: u64) {
        if self.plugins.gate.as_ref().is_some_and(|g| g.batch == batch) {
            self.plugins.gate = None;
        }
        self.plugins.reviews.retain(|(b, _), _| *b != batch);
    }

    // ---- dialogs --------------------------------------------------------------------------

    /// Emit an `extension_ui_request` dialog and remember who waits for it. Returns its id.
    pub(crate) fn open_dialog(&mut self, owner: DialogOwner, req: &UiRequest) -> String {
        let id = crate::core::plugins::uuid_v4();
        let deadline = req
            .timeout_ms()
            .map(|ms| Instant::now() + std::time::Duration::from_millis(ms));
        if let DialogOwner::Ext { ext, .. } = &owner {
            if let Some(e) = self.plugins.exts.get_mut(*ext) {
                e.dialogs_open += 1;
            }
        }
        self.plugins.dialogs.insert(
            id.clone(),
            Dialog {
                owner,
                method: req.method(),
                deadline,
            },
        );
        let frame = ui::request_frame(&id, req);
        self.send(response::line(&frame));
        id
    }

    /// An extension's UI call.
    pub(crate) fn ext_ui(&mut self, i: usize, id: Option<Value>, req: UiRequest) {
        if !req.is_dialog() {
            if self.plugins.cfg.ui {
                let frame = ui::request_frame(&crate::core::plugins::uuid_v4(), &req);
                self.send(response::line(&frame));
            }
            return;
        }
        let reply_id = id.unwrap_or(Value::Null);
        if self
            .plugins
            .exts
            .get(i)
            .is_some_and(|e| e.dialogs_open >= MAX_OPEN_DIALOGS)
        {
            let path = self.plugins.exts[i].path.clone();
            self.extension_error(
                &path,
                "protocol",
                &format!("more than {MAX_OPEN_DIALOGS} dialogs open; this one is dismissed"),
            );
            let fields = ui::answer_fields(req.method(), &Answer::Cancelled);
            self.ext_write(i, proto::ui_response(&reply_id, fields));
            return;
        }
        if !self.plugins.cfg.ui || self.plugins.input_closed {
            let fields = ui::answer_fields(req.method(), &Answer::NoUi);
            self.ext_write(i, proto::ui_response(&reply_id, fields));
            return;
        }
        self.open_dialog(DialogOwner::Ext { ext: i, reply_id }, &req);
    }

    /// The host's `extension_ui_response`: routed to whoever asked; unknown ids are ignored.
    pub(crate) fn on_ui_response(&mut self, obj: &serde_json::Map<String, Value>) {
        let Some(id) = obj.get("id").and_then(Value::as_str) else {
            return;
        };
        if !self.plugins.dialogs.contains_key(id) {
            return;
        }
        let id = id.to_string();
        self.resolve_dialog(&id, ui::parse_answer(obj));
        self.check_startup_done();
    }

    /// The host's input closed: every open dialog ends as dismissed.
    pub(crate) fn end_dialogs(&mut self) {
        let ids: Vec<String> = self.plugins.dialogs.keys().cloned().collect();
        for id in ids {
            self.resolve_dialog(&id, Answer::Cancelled);
        }
        self.plugins.input_closed = true;
    }

    /// A dialog ended (answered, dismissed, timed out).
    pub(crate) fn resolve_dialog(&mut self, id: &str, answer: Answer) {
        let Some(d) = self.plugins.dialogs.remove(id) else {
            return;
        };
        match d.owner {
            DialogOwner::Ext { ext, reply_id } => {
                if let Some(e) = self.plugins.exts.get_mut(ext) {
                    e.dialogs_open = e.dialogs_open.saturating_sub(1);
                    // Its clock restarts: the time the host took is not the extension's.
                    let now = Instant::now();
                    for c in e.calls.values_mut() {
                        c.deadline = c.deadline.max(now + c.timeout);
                    }
                }
                let fields = ui::answer_fields(d.method, &answer);
                self.ext_write(ext, proto::ui_response(&reply_id, fields));
            }
            DialogOwner::Gate => {
                let waiting =
                    self.plugins.gate.as_ref().is_some_and(
                        |g| matches!(&g.waiting, Some(GateWait::Dialog(w)) if w == id),
                    );
                if !waiting {
                    return;
                }
                let tool = self
                    .plugins
                    .gate
                    .as_ref()
                    .map(|g| g.tool.clone())
                    .unwrap_or_default();
                let asked = self.plugins.gate.as_mut().and_then(|g| g.asked.take());
                let rule = asked.as_ref().and_then(|a| a.rule.clone());
                let secs = self.plugins.cfg.confirm_timeout.map_or(0, |t| t.as_secs());
                let (allow, by) = match answer {
                    Answer::Confirmed(true) => (true, "host"),
                    Answer::TimedOut => (false, "timeout"),
                    _ => (false, "host"),
                };
                self.permission_event(allow, by, rule.as_deref());
                let decision = match answer {
                    Answer::Confirmed(true) => {
                        self.pin_target(asked.and_then(|a| a.target));
                        self.advance_gate()
                    }
                    Answer::Confirmed(false) | Answer::Value(_) => {
                        Some(Err(approval::denial_text(&tool, Denial::Declined)))
                    }
                    Answer::Cancelled => Some(Err(approval::denial_text(&tool, Denial::Cancelled))),
                    Answer::TimedOut => {
                        Some(Err(approval::denial_text(&tool, Denial::TimedOut(secs))))
                    }
                    Answer::NoUi => Some(Err(approval::denial_text(&tool, Denial::NoUi))),
                };
                if let Some(d) = decision {
                    self.finish_gate(d);
                }
            }
        }
    }

    // ---- remote tools ---------------------------------------------------------------------

    /// Start a tool that runs in an extension or an MCP server. `Err`: it cannot start (its
    /// owner is gone); the caller records the error result.
    pub(crate) fn start_remote_tool(
        &mut self,
        batch: u64,
        index: usize,
        tool: &RemoteTool,
        call: &ToolCall,
        args: &Value,
    ) -> Result<(), String> {
        match &tool.owner {
            Owner::Ext(i) => {
                let Some(e) = self.plugins.exts.get(*i) else {
                    return Err("Extension not found".into());
                };
                if !e.ready() {
                    return Err(format!("Extension \"{}\" is not running", e.name));
                }
                let id = self.plugins.fresh_id();
                let line = proto::execute_tool(id, &call.id, &call.name, args);
                self.ext_register_call(
                    *i,
                    id,
                    "execute_tool".to_string(),
                    CallKind::Tool { batch, index },
                    line,
                );
                Ok(())
            }
            Owner::Mcp { server, tool } => self.mcp_call(*server, batch, index, tool, args),
            Owner::McpResources(t) => self.mcp_resource_call(batch, index, *t, args),
        }
    }

    /// Calls of `batch` still running remotely are cancelled (`cancel` to extensions,
    /// `notifications/cancelled` to MCP servers) and forgotten. Returns their indices.
    pub(crate) fn cancel_remote_calls(&mut self, batch: u64) -> Vec<usize> {
        let mut out = Vec::new();
        for i in 0..self.plugins.exts.len() {
            let ids: Vec<(u64, usize)> = self.plugins.exts[i]
                .calls
                .iter()
                .filter_map(|(id, c)| match c.kind {
                    CallKind::Tool { batch: b, index } if b == batch => Some((*id, index)),
                    _ => None,
                })
                .collect();
            for (id, index) in ids {
                self.plugins.exts[i].calls.remove(&id);
                self.ext_write(i, proto::cancel(id));
                out.push(index);
            }
        }
        out.extend(self.mcp_cancel_batch(batch));
        out.extend(self.resource_cancel_batch(batch));
        out
    }

    /// `abort` during a tool batch: remote calls end at once as aborted, a waiting gate closes.
    pub(crate) fn abort_remote(&mut self, batch: u64) {
        for index in self.cancel_remote_calls(batch) {
            self.finish_tool_slot(batch, index, Err(crate::tools::ABORTED.to_string()));
        }
        let reviews: Vec<(u64, usize)> = self
            .plugins
            .reviews
            .keys()
            .filter(|(b, _)| *b == batch)
            .copied()
            .collect();
        for key in reviews {
            if let Some(r) = self.plugins.reviews.remove(&key) {
                self.finish_tool_slot(key.0, key.1, r.result);
            }
        }
        self.abort_gate(batch);
    }

    // ---- results --------------------------------------------------------------------------

    /// A tool finished (built-in, extension or MCP): extensions subscribed to `tool_result`
    /// review it in load order, then it is recorded.
    pub(crate) fn tool_finished(&mut self, batch: u64, index: usize, r: ToolResult) {
        let exts = self.plugins.subscribers("tool_result");
        if exts.is_empty() {
            self.finish_tool_slot(batch, index, r);
            return;
        }
        self.plugins
            .reviews
            .insert((batch, index), Review { result: r, exts });
        self.advance_review(batch, index);
    }

    fn advance_review(&mut self, batch: u64, index: usize) {
        let Some(rv) = self.plugins.reviews.get_mut(&(batch, index)) else {
            return;
        };
        let Some(i) = rv.exts.pop_front() else {
            if let Some(rv) = self.plugins.reviews.remove(&(batch, index)) {
                self.finish_tool_slot(batch, index, rv.result);
            }
            return;
        };
        let (content, details, is_error) = match &rv.result {
            Ok(o) => (
                serde_json::to_value(&o.content).unwrap_or(Value::Null),
                o.details.clone().unwrap_or(Value::Null),
                false,
            ),
            Err(t) => (json!([{"type": "text", "text": t}]), json!({}), true),
        };
        let Some(call) = self.tool_call_of(batch, index) else {
            self.plugins.reviews.remove(&(batch, index));
            return;
        };
        let event = json!({
            "type": "tool_result",
            "toolCallId": call.id,
            "toolName": call.name,
            "input": call.arguments,
            "content": content,
            "details": details,
            "isError": is_error,
        });
        self.ext_call(i, &event, CallKind::Review { batch, index });
    }

    /// An extension's `tool_result` answer: `{content?, details?, isError?}` replaces those
    /// parts (`None`: no change).
    pub(crate) fn review_answer(&mut self, batch: u64, index: usize, answer: Option<Value>) {
        let Some(rv) = self.plugins.reviews.get_mut(&(batch, index)) else {
            return;
        };
        if let Some(Value::Object(a)) = answer {
            let (mut content, mut details, mut is_error) = match &rv.result {
                Ok(o) => (o.content.clone(), o.details.clone(), false),
                Err(t) => (vec![Content::text(t.clone())], Some(json!({})), true),
            };
            if let Some(c) = a.get("content") {
                if let Ok(c) = proto::decode_content(c, "content") {
                    content = c;
                }
            }
            if let Some(d) = a.get("details") {
                details = Some(d.clone());
            }
            if let Some(Value::Bool(b)) = a.get("isError") {
                is_error = *b;
            }
            rv.result = if is_error {
                let text: Vec<&str> = content
                    .iter()
                    .filter_map(|c| match c {
                        Content::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                Err(text.join("\n"))
            } else {
                Ok(ToolOutput {
                    content,
                    details,
                    ..Default::default()
                })
            };
        }
        self.advance_review(batch, index);
    }
}
