//! `codemode` scripts (pi 1.6.0; docs/codemode.md): the state machine's side. A script runs in
//! a worker process (`pith __codemode-worker`, `src/codemode/worker.rs`) driven like an MCP
//! server: its lines arrive as [`Worker::Codemode`] events, answers are written to its stdin.
//!
//! A script's tool call becomes a *nested call*: one more slot of the running tool batch,
//! after the assistant message's calls ([`Nested`]). It goes through the same preparation as a
//! model's call (`prepare_tools`: limits, validation, the gate with extensions' `tool_call`,
//! permission rules and `--confirm-tools`, then `spawn_runnable`), and its events carry
//! `parentToolCallId`. When its slot has a result, [`Machine::deliver_nested`] settles the
//! script's promise instead of keeping the result for the model. The batch ends when every slot,
//! nested ones included, has a result.
//!
//! At most [`crate::codemode::max_workers`] workers are alive at once; later scripts wait in
//! arrival order (60 s at most). An abort kills the workers of the batch at once (SIGKILL to
//! their process group), and so does a script's `timeout_ms`.

use std::collections::VecDeque;
use std::time::Instant;

use serde_json::{Value, json};

use crate::cancel::CancelSource;
use crate::codemode::wire::{Setup, ToDown, ToUp, ToolInfo};
use crate::codemode::{CallRow, Ending, Item, ScriptOptions};
use crate::core::agent::{Exec, result_json, result_message};
use crate::core::event::Worker;
use crate::core::machine::Machine;
use crate::io::child::{ChildEvent, ChildHandle};
use crate::message::{Content, ToolCall};
use crate::rpc::event::Event as Frame;
use crate::tools::ToolOutput;

/// A call a script made: slot `slot` of the batch.
#[derive(Debug)]
pub struct Nested {
    pub slot: usize,
    /// The `codemode` call's id.
    pub parent_id: String,
    pub script: u64,
    /// The worker's number for the call.
    pub call: u64,
    /// Its row in the script's `details.calls`.
    pub row: usize,
    pub delivered: bool,
    /// The tool's `structuredContent` (read, bash, MCP tools), which the script receives.
    pub structured: Option<Value>,
}

/// A tool a script may call (the contract with MCP: see [`Machine::script_tools`]).
#[derive(Clone, Debug)]
pub struct ScriptTool {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    /// The MCP server it comes from.
    pub namespace: Option<String>,
    /// Its guidelines and output type, as its declaration shows them.
    pub view: crate::codemode::ScriptView,
}

struct Script {
    id: u64,
    batch: u64,
    /// The `codemode` call's slot.
    index: usize,
    call_id: String,
    options: ScriptOptions,
    /// Until the worker starts.
    setup: Option<Setup>,
    child: Option<ChildHandle>,
    /// It counts against the worker limit (until its process exited).
    holds_worker: bool,
    items: Vec<Item>,
    out_bytes: usize,
    rows: Vec<CallRow>,
    started: Instant,
    timer: Option<CancelSource>,
    ended: bool,
}

/// The scripts of this process.
#[derive(Default)]
pub struct Scripts {
    seq: u64,
    list: Vec<Script>,
    /// Scripts waiting for a worker, in arrival order.
    queue: VecDeque<u64>,
    workers: usize,
    /// `nestedCalls` of finished `codemode` calls, taken by `finish_tool_slot`: (batch, slot).
    records: Vec<((u64, usize), Value)>,
}

impl Scripts {
    /// The `nestedCalls` record of `codemode` call `index` of `batch` (once its script ended).
    pub(crate) fn record_of(&mut self, batch: u64, index: usize) -> Option<Value> {
        let i = self
            .records
            .iter()
            .position(|(k, _)| *k == (batch, index))?;
        Some(self.records.swap_remove(i).1)
    }

    fn get(&mut self, id: u64) -> Option<&mut Script> {
        self.list.iter_mut().find(|s| s.id == id)
    }
}

/// Output a script may send (the prelude stops it at 16 Mi characters; this is the parent's
/// own bound, in bytes, with room for JSON escapes).
const MAX_OUT_BYTES: usize = 64 * 1024 * 1024;

impl Machine {
    /// The tools a script may call: the run's tools but `codemode`, then the MCP tools not
    /// declared to the model (`codemode` and `deferred` exposure; `hidden` ones never), with their
    /// server as `namespace`, resolved by [`Machine::resolve_script_tool`].
    pub(crate) fn script_tools(&self) -> Vec<ScriptTool> {
        let Some(run) = self.run.as_ref() else {
            return Vec::new();
        };
        let mut out: Vec<ScriptTool> = Vec::new();
        for t in &run.tools {
            // `tool_search` is for the model only (pi's `model-only` exposure).
            if t.name() == crate::codemode::NAME
                || t.name() == crate::tools::tool_search::NAME
                || run.remote.iter().any(|r| r.name == t.name())
            {
                continue;
            }
            let d = crate::prompt::sections::declaration(t.as_ref());
            out.push(ScriptTool {
                name: t.name().to_string(),
                description: d.description,
                parameters: d.parameters,
                namespace: None,
                view: crate::codemode::ScriptView::builtin(
                    t.name(),
                    crate::prompt::sections::tool_rules(
                        t.name(),
                        &self.profile.texts.system_prompt,
                    ),
                ),
            });
        }
        let push = |out: &mut Vec<ScriptTool>, r: &crate::core::plugins::RemoteTool| {
            if r.name == crate::codemode::NAME || out.iter().any(|t| t.name == r.name) {
                return;
            }
            out.push(ScriptTool {
                name: r.name.clone(),
                description: r.description.clone(),
                parameters: r.parameters.clone(),
                namespace: self.namespace_of(&r.owner),
                view: self.script_view(&r.name, std::slice::from_ref(r)),
            });
        };
        // Extensions' tools, then the MCP tools in their servers' order whatever their exposure
        // (the declared ones and those only scripts reach), as pi registers them.
        for r in run
            .remote
            .iter()
            .filter(|r| matches!(r.owner, crate::core::plugins::Owner::Ext(_)))
        {
            push(&mut out, r);
        }
        use crate::mcp::config::Exposure;
        for (r, e) in self.plugins.mcp_tools() {
            if matches!(e, Exposure::Codemode | Exposure::Deferred)
                || run.remote.iter().any(|d| d.name == r.name)
            {
                push(&mut out, &r);
            }
        }
        for r in &run.remote {
            push(&mut out, r);
        }
        out
    }

    /// A remote tool's namespace in scripts: its MCP server's name.
    fn namespace_of(&self, owner: &crate::core::plugins::Owner) -> Option<String> {
        match owner {
            crate::core::plugins::Owner::Mcp { server, .. } => self
                .plugins
                .servers
                .get(*server)
                .map(|s| crate::mcp::naming::namespace(&s.cfg.name)),
            _ => None,
        }
    }

    /// MCP tools scripts reach although the model does not see them: `codemode` and `deferred`
    /// exposure (pi 1.6.0's client).
    fn script_only_mcp_tools(
        &self,
    ) -> Vec<(
        crate::core::plugins::RemoteTool,
        crate::mcp::config::Exposure,
    )> {
        use crate::mcp::config::Exposure;
        self.plugins
            .mcp_tools()
            .into_iter()
            .filter(|(_, e)| matches!(e, Exposure::Codemode | Exposure::Deferred))
            .collect()
    }

    /// The tool a script's call names: the run's tools (as the model's calls resolve), then the
    /// MCP tools only scripts reach.
    pub(crate) fn resolve_script_tool(&self, name: &str) -> Option<Exec> {
        if name == crate::codemode::NAME {
            return None; // scripts cannot start scripts
        }
        self.resolve_tool(name).or_else(|| {
            self.script_only_mcp_tools()
                .into_iter()
                .find(|(t, _)| t.name == name)
                .map(|(t, _)| Exec::Remote(t))
        })
    }

    /// `codemode` call `index` of `batch` starts: parse its options, then run it in a worker
    /// (or wait for one).
    pub(crate) fn start_script(&mut self, batch: u64, index: usize, call: &ToolCall, args: &Value) {
        let code = args.get("code").and_then(Value::as_str).unwrap_or("");
        let (code, options) = match crate::codemode::parse_source(code) {
            Ok(p) => p,
            Err(e) => {
                self.tool_finished(batch, index, Err(e));
                return;
            }
        };
        let partial = json!({"content": [], "details": {"calls": []}});
        self.emit(&Frame::ToolExecutionUpdate {
            tool_call_id: &call.id,
            tool_name: &call.name,
            args: &call.arguments,
            partial_result: &partial,
            parent_tool_call_id: None,
        });
        if !cfg!(feature = "codemode") {
            self.tool_finished(
                batch,
                index,
                Err(
                    "codemode is not available: this pith was built without the `codemode` feature"
                        .into(),
                ),
            );
            return;
        }
        let tools: Vec<ToolInfo> = self
            .script_tools()
            .into_iter()
            .map(|t| ToolInfo {
                js_name: crate::codemode::discovery::identifier(&t.name),
                description: {
                    let g: Vec<&str> = t.view.guidelines.iter().map(String::as_str).collect();
                    crate::codemode::render::sample(
                        &t.name,
                        &t.description,
                        &g,
                        &t.parameters,
                        &t.view.output,
                    )
                },
                // What `searchTools()` ranks, as pi's tool search documents: the description,
                // then the schema's descriptions and property names.
                summary: crate::mcp::search::document(&t.name, &t.description, &t.parameters, None)
                    .text,
                namespace: t.namespace,
                name: t.name,
            })
            .collect();
        let store = crate::codemode::fold_store(
            self.state
                .session
                .branch_path()
                .into_iter()
                .filter(|e| e.entry_type() == "custom")
                .filter_map(|e| {
                    let raw = e.raw();
                    (raw.get("customType").and_then(Value::as_str)
                        == Some(crate::codemode::STORE_ENTRY))
                    .then(|| raw.get("data"))
                    .flatten()
                })
                .collect::<Vec<_>>()
                .into_iter(),
        );
        let sandbox =
            self.env
                .sandbox
                .as_ref()
                .map(|sb| match (sb.enforcement(), sb.policy().fallback) {
                    (crate::sandbox::Enforcement::Unenforced { .. }, _)
                    | (_, crate::sandbox::Fallback::Warn) => "warn".to_string(),
                    _ => "fail".to_string(),
                });
        let mut namespaces: Vec<crate::codemode::wire::Namespace> = Vec::new();
        for t in &tools {
            if let Some(ns) = &t.namespace {
                if !namespaces.iter().any(|n| &n.name == ns) {
                    // pi's namespace of an MCP server: `mcp__<server>`, its configured
                    // description and the instructions of its `initialize`.
                    let server = self
                        .plugins
                        .servers
                        .iter()
                        .find(|s| &crate::mcp::naming::namespace(&s.cfg.name) == ns);
                    let trimmed = |v: Option<&String>| {
                        v.map(|x| x.trim().to_string()).filter(|x| !x.is_empty())
                    };
                    namespaces.push(crate::codemode::wire::Namespace {
                        name: ns.clone(),
                        description: server.and_then(|s| trimmed(s.cfg.description.as_ref())),
                        instructions: server.and_then(|s| trimmed(s.instructions.as_ref())),
                    });
                }
            }
        }
        let setup = Setup {
            code,
            tools,
            namespaces,
            store,
            memory_limit: memory_limit(),
            sandbox,
            cwd: self.env.cwd.to_string_lossy().into_owned(),
        };
        self.scripts.seq += 1;
        let id = self.scripts.seq;
        // The deadline covers the wait for a worker; the wait itself is at most a minute.
        let wait = options
            .timeout_ms
            .map(std::time::Duration::from_millis)
            .map_or(crate::codemode::WORKER_WAIT, |t| {
                t.min(crate::codemode::WORKER_WAIT)
            });
        let timer = Some(crate::io::timer::after(
            wait,
            self.io.worker_tx.clone(),
            Worker::CodemodeDue { script: id },
        ));
        self.scripts.list.push(Script {
            id,
            batch,
            index,
            call_id: call.id.clone(),
            options,
            setup: Some(setup),
            child: None,
            holds_worker: false,
            items: Vec::new(),
            out_bytes: 0,
            rows: Vec::new(),
            started: Instant::now(),
            timer,
            ended: false,
        });
        self.scripts.queue.push_back(id);
        self.admit_scripts();
    }

    /// Start waiting scripts while workers are free.
    fn admit_scripts(&mut self) {
        while self.scripts.workers < crate::codemode::max_workers() {
            let Some(id) = self.scripts.queue.pop_front() else {
                return;
            };
            self.launch(id);
        }
    }

    fn launch(&mut self, id: u64) {
        let tx = self.io.worker_tx.clone();
        let cwd = self.env.cwd.clone();
        let Some(s) = self.scripts.get(id) else {
            return;
        };
        let Some(setup) = s.setup.take() else {
            return;
        };
        let program = match std::env::current_exe() {
            Ok(p) => p,
            Err(e) => {
                self.end_script(
                    id,
                    Ending::Failed(format!(
                        "Script sandbox failed: cannot find pith's binary: {e}"
                    )),
                );
                return;
            }
        };
        let spec = crate::io::child::Spec {
            program,
            args: vec![crate::codemode::WORKER_ARG.to_string()],
            env: Vec::new(),
            inherit_env: false,
            cwd,
            capture_stderr: false,
        };
        let limits = crate::io::child::Limits {
            max_line: MAX_OUT_BYTES,
            max_lines_per_sec: 1_000_000,
            write_queue: 1024,
            write_queue_bytes: 256 * 1024 * 1024,
        };
        let on_event = Box::new(move |event: ChildEvent| {
            tx.send(Worker::Codemode { script: id, event }).is_ok()
        });
        let started = crate::io::child::spawn(&spec, limits, on_event);
        let line = serde_json::to_vec(&setup).unwrap_or_default();
        match started {
            Ok(child) => {
                let written = child.write(line);
                self.scripts.workers += 1;
                if let Some(s) = self.scripts.get(id) {
                    s.holds_worker = true;
                    s.child = Some(child);
                    // The deadline of the script itself, from now on.
                    let left = s.options.timeout_ms.map(|t| {
                        std::time::Duration::from_millis(t).saturating_sub(s.started.elapsed())
                    });
                    s.timer = left.map(|d| {
                        crate::io::timer::after(
                            d,
                            self.io.worker_tx.clone(),
                            Worker::CodemodeDue { script: id },
                        )
                    });
                }
                if written.is_err() {
                    self.kill_script(id);
                    self.end_script(
                        id,
                        Ending::Failed(
                            "Script sandbox failed: the worker does not read its input".into(),
                        ),
                    );
                }
            }
            Err(e) => self.end_script(id, Ending::Failed(format!("Script sandbox failed: {e}"))),
        }
    }

    /// A line from a worker, or its end.
    pub(crate) fn on_script_event(&mut self, id: u64, event: ChildEvent) {
        match event {
            ChildEvent::Line(v) => match serde_json::from_value::<ToUp>(v) {
                Ok(ToUp::Call {
                    id: call,
                    name,
                    args,
                }) => self.script_call(id, call, name, args),
                Ok(ToUp::Out { kind, data, mime }) => {
                    let Some(s) = self.scripts.get(id).filter(|s| !s.ended) else {
                        return;
                    };
                    s.out_bytes = s.out_bytes.saturating_add(data.len());
                    if s.out_bytes > MAX_OUT_BYTES {
                        self.kill_script(id);
                        self.end_script(
                            id,
                            Ending::Failed("RangeError: script output exceeded the limit".into()),
                        );
                        return;
                    }
                    s.items.push(match (kind.as_str(), mime) {
                        ("image", Some(mime)) => Item::Image { data, mime },
                        ("console", _) => Item::Console(data),
                        _ => Item::Text(data),
                    });
                }
                Ok(ToUp::Done {
                    ok,
                    value,
                    writes,
                    error,
                }) => {
                    if ok {
                        self.store_writes(id, writes);
                        self.end_script(id, Ending::Completed { value });
                    } else {
                        let text = error.map(|e| e.text()).unwrap_or_else(|| "Error".into());
                        self.end_script(id, Ending::Failed(text));
                    }
                    if let Some(c) = self.scripts.get(id).and_then(|s| s.child.as_mut()) {
                        c.close_input();
                    }
                }
                Err(e) => {
                    self.kill_script(id);
                    self.end_script(
                        id,
                        Ending::Failed(format!(
                            "Script sandbox failed: bad line from the worker: {e}"
                        )),
                    );
                }
            },
            ChildEvent::Garbage { error, .. } => {
                self.kill_script(id);
                self.end_script(
                    id,
                    Ending::Failed(format!(
                        "Script sandbox failed: bad line from the worker: {error}"
                    )),
                );
            }
            ChildEvent::Oversized { bytes } => {
                self.kill_script(id);
                self.end_script(
                    id,
                    Ending::Failed(format!(
                        "RangeError: script output exceeded the limit ({bytes} bytes in one item)"
                    )),
                );
            }
            ChildEvent::Flood => {
                self.kill_script(id);
                self.end_script(
                    id,
                    Ending::Failed("Script sandbox failed: the worker flooded its output".into()),
                );
            }
            ChildEvent::Exited { status, .. } => {
                self.end_script(
                    id,
                    Ending::Failed(format!(
                        "Script sandbox failed: the worker exited ({status})"
                    )),
                );
                if let Some(s) = self.scripts.get(id) {
                    s.child = None;
                    if s.holds_worker {
                        s.holds_worker = false;
                        self.scripts.workers = self.scripts.workers.saturating_sub(1);
                    }
                }
                self.scripts
                    .list
                    .retain(|s| !(s.ended && s.child.is_none()));
                self.admit_scripts();
            }
        }
    }

    /// A script's deadline (or its wait for a worker) passed.
    pub(crate) fn on_script_due(&mut self, id: u64) {
        let Some(s) = self.scripts.get(id).filter(|s| !s.ended) else {
            return;
        };
        let waiting = s.setup.is_some();
        let timeout = s.options.timeout_ms;
        let text = match (waiting, timeout) {
            (true, Some(t)) if t <= crate::codemode::WORKER_WAIT.as_millis() as u64 => format!(
                "Script timed out: Execution timed out after {t} ms while waiting for a free codemode worker"
            ),
            (true, _) => format!(
                "No codemode worker became free within {} seconds. All {} workers are held by other scripts. Retry after they finish.",
                crate::codemode::WORKER_WAIT.as_secs(),
                crate::codemode::max_workers()
            ),
            (false, t) => format!(
                "Script timed out: Execution timed out after {} ms",
                t.unwrap_or_default()
            ),
        };
        self.scripts.queue.retain(|q| *q != id);
        self.kill_script(id);
        self.end_script(id, Ending::Failed(text));
    }

    /// An abort: every script of `batch` ends now, its worker killed.
    pub(crate) fn abort_scripts(&mut self, batch: u64) {
        let ids: Vec<u64> = self
            .scripts
            .list
            .iter()
            .filter(|s| s.batch == batch && !s.ended)
            .map(|s| s.id)
            .collect();
        for id in ids {
            self.scripts.queue.retain(|q| *q != id);
            self.kill_script(id);
            self.end_script(
                id,
                Ending::Failed("Script aborted: This operation was aborted".into()),
            );
        }
    }

    /// The calls of `batch` are over (all have results: skipped by steering, the batch ended):
    /// scripts still running are stopped without a result of their own.
    pub(crate) fn drop_scripts(&mut self, batch: u64) {
        let ids: Vec<u64> = self
            .scripts
            .list
            .iter()
            .filter(|s| s.batch == batch && !s.ended)
            .map(|s| s.id)
            .collect();
        for id in ids {
            self.scripts.queue.retain(|q| *q != id);
            self.kill_script(id);
            if let Some(s) = self.scripts.get(id) {
                s.ended = true;
                s.timer = None;
                s.setup = None;
            }
        }
        self.scripts
            .list
            .retain(|s| !(s.ended && s.child.is_none() && !s.holds_worker));
    }

    fn kill_script(&mut self, id: u64) {
        if let Some(c) = self.scripts.get(id).and_then(|s| s.child.as_ref()) {
            c.signal(crate::io::child::SIGKILL);
        }
    }

    /// `store()` writes of a script that succeeded: one `codemode-store` entry.
    fn store_writes(&mut self, id: u64, writes: Option<Value>) {
        if self.scripts.get(id).is_none_or(|s| s.ended) {
            return;
        }
        let Some(w) = writes else { return };
        let set_empty = w
            .get("set")
            .and_then(Value::as_object)
            .is_none_or(|m| m.is_empty());
        let del_empty = w
            .get("delete")
            .and_then(Value::as_array)
            .is_none_or(|a| a.is_empty());
        if set_empty && del_empty {
            return;
        }
        let data = json!({
            "set": w.get("set").cloned().unwrap_or_else(|| json!({})),
            "delete": w.get("delete").cloned().unwrap_or_else(|| json!([])),
        });
        let entry_id = self
            .state
            .session
            .append_custom(crate::codemode::STORE_ENTRY, Some(data));
        self.flush_session_warnings();
        if let Some(entry) = self
            .state
            .session
            .entry(&entry_id)
            .map(|e| Value::Object(e.raw().clone()))
        {
            self.emit(&Frame::EntryAppended { entry: &entry });
        }
    }

    /// A script called `tools.<name>(args)`: a nested call of its batch.
    fn script_call(&mut self, id: u64, call: u64, name: String, args: Option<Value>) {
        let Some(s) = self.scripts.get(id).filter(|s| !s.ended) else {
            return;
        };
        let (batch, parent_id) = (s.batch, s.call_id.clone());
        if self.resolve_script_tool(&name).is_none() {
            self.settle_call(id, call, Err(format!("Tool {name} not found")));
            return;
        }
        let arguments = args.unwrap_or_else(|| json!({}));
        let Some(b) = self.batch_mut().filter(|b| b.batch == batch) else {
            self.settle_call(id, call, Err(crate::tools::ABORTED.to_string()));
            return;
        };
        let preparing = b.slots.len() < b.calls.len();
        let n = b.nested.iter().filter(|n| n.parent_id == parent_id).count() + 1;
        b.calls.push(ToolCall {
            id: format!("{parent_id}/{n}"),
            name: name.clone(),
            arguments: arguments.clone(),
            arguments_error: None,
            thought_signature: None,
        });
        let slot = b.calls.len() - 1;
        let row = match self.scripts.get(id) {
            Some(s) => {
                s.rows.push(CallRow {
                    id: format!("{parent_id}/?"),
                    name,
                    arguments,
                    status: "running",
                    duration_ms: None,
                    error: None,
                });
                s.rows.len() - 1
            }
            None => return,
        };
        if let Some(b) = self.batch_mut() {
            b.nested.push(Nested {
                slot,
                parent_id,
                script: id,
                call,
                row,
                delivered: false,
                structured: None,
            });
        }
        if !preparing {
            self.prepare_tools();
        }
    }

    /// The `codemode` call's update for nested call `slot` of the current batch (its start).
    pub(crate) fn publish_nested(&mut self, slot: usize) {
        let script = self
            .batch_mut()
            .and_then(|b| b.nested.iter().find(|n| n.slot == slot).map(|n| n.script));
        if let Some(id) = script {
            self.publish(id);
        }
    }

    /// Nested calls whose slot has a result: settle their script's promise.
    pub(crate) fn deliver_nested(&mut self) {
        let aborting = self.run.as_ref().is_some_and(|r| r.aborting);
        let Some(b) = self.batch_mut() else { return };
        let mut ready = Vec::new();
        for n in b.nested.iter_mut().filter(|n| !n.delivered) {
            let Some(slot) = b.slots.get(n.slot) else {
                continue;
            };
            let Some(r) = &slot.result else { continue };
            n.delivered = true;
            let ms = slot
                .started
                .map(|t| t.elapsed().as_secs_f64() * 1000.0)
                .unwrap_or(0.0);
            ready.push((n.script, n.call, n.row, r.clone(), n.structured.take(), ms));
        }
        for (id, call, row, r, structured, ms) in ready {
            let text = r
                .content
                .iter()
                .filter_map(|c| match c {
                    Content::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            let outcome = match structured {
                Some(v) => Ok(v),
                None if r.is_error => Err(if text.is_empty() {
                    format!("Tool \"{}\" failed", r.tool_name)
                } else {
                    text.clone()
                }),
                None => Ok(Value::String(text.clone())),
            };
            let Some(s) = self.scripts.get(id) else {
                continue;
            };
            if let Some(rw) = s.rows.get_mut(row) {
                rw.id = r.tool_call_id.clone();
                rw.duration_ms = Some(ms);
                if r.is_error {
                    rw.status = if aborting { "cancelled" } else { "error" };
                    rw.error = Some(crate::codemode::cut(
                        if text.is_empty() { "failed" } else { &text },
                        500,
                    ));
                } else {
                    rw.status = "ok";
                }
            }
            if s.ended {
                continue;
            }
            self.settle_call(id, call, outcome);
            self.publish(id);
        }
    }

    fn settle_call(&mut self, id: u64, call: u64, outcome: Result<Value, String>) {
        let msg = match outcome {
            Ok(v) => ToDown::Settle {
                id: call,
                ok: true,
                value: Some(v),
                error: None,
            },
            Err(e) => ToDown::Settle {
                id: call,
                ok: false,
                value: None,
                error: Some(e),
            },
        };
        let line = serde_json::to_vec(&msg).unwrap_or_default();
        let failed = match self.scripts.get(id).and_then(|s| s.child.as_ref()) {
            Some(c) => c.write(line).is_err(),
            None => false,
        };
        if failed {
            self.kill_script(id);
            self.end_script(
                id,
                Ending::Failed("Script sandbox failed: the worker does not read its input".into()),
            );
        }
    }

    /// `tool_execution_update` of the `codemode` call: its nested calls so far.
    fn publish(&mut self, id: u64) {
        let Some(s) = self.scripts.get(id) else {
            return;
        };
        let (batch, index) = (s.batch, s.index);
        let partial = json!({"content": [], "details": crate::codemode::details(&s.rows)});
        let Some(call) = self.tool_call_of(batch, index) else {
            return;
        };
        self.emit(&Frame::ToolExecutionUpdate {
            tool_call_id: &call.id,
            tool_name: &call.name,
            args: &call.arguments,
            partial_result: &partial,
            parent_tool_call_id: None,
        });
    }

    /// The script ended (once): its calls still running are cancelled, its result laid out,
    /// and its `codemode` call finishes.
    fn end_script(&mut self, id: u64, ending: Ending) {
        let Some(s) = self.scripts.get(id).filter(|s| !s.ended) else {
            return;
        };
        s.ended = true;
        s.timer = None;
        s.setup = None;
        let (batch, index) = (s.batch, s.index);
        let wall = s.started.elapsed();
        let items = std::mem::take(&mut s.items);
        let options = s.options.clone();
        let cut_off = !matches!(ending, Ending::Completed { .. })
            && s.rows.iter().any(|r| r.status == "running");
        for r in s.rows.iter_mut().filter(|r| r.status == "running") {
            r.status = "cancelled";
        }
        let rows = s.rows.clone();
        // Nested calls still running are cancelled: their slots end now.
        let mut cancelled = Vec::new();
        if let Some(b) = self.batch_mut().filter(|b| b.batch == batch) {
            for n in b.nested.iter_mut().filter(|n| n.script == id) {
                n.delivered = true;
                if let Some(slot) = b.slots.get_mut(n.slot) {
                    if slot.result.is_none() {
                        let r = result_message(&slot.call, Err(crate::tools::ABORTED.to_string()));
                        slot.result = Some(r.clone());
                        cancelled.push(r);
                    }
                }
            }
        }
        for r in &cancelled {
            self.emit_tool_end(r);
        }
        let (content, full) = crate::codemode::layout(
            &ending,
            items,
            &rows,
            &options,
            wall,
            &mut crate::codemode::TempSpill,
        );
        let mut details = crate::codemode::details(&rows);
        if let (Some(p), Value::Object(m)) = (full, &mut details) {
            m.insert("fullOutputPath".into(), Value::String(p));
        }
        if !rows.is_empty() {
            let record = json!({
                "calls": rows.iter().map(CallRow::record).collect::<Vec<_>>(),
                "complete": !cut_off,
            });
            self.scripts.records.push(((batch, index), record));
        }
        let output = ToolOutput {
            content,
            details: Some(details),
            structured: None,
            is_error: !matches!(ending, Ending::Completed { .. }),
        };
        if let Some(s) = self.scripts.get(id) {
            if s.child.is_none() && !s.holds_worker {
                self.scripts.list.retain(|s| s.id != id);
            }
        }
        let _ = result_json;
        self.tool_finished(batch, index, Ok(output));
    }
}

/// The VM's heap limit: pi's 256 MiB (debug builds: `PITH_TEST_CODEMODE_MEMORY` bytes, a test
/// switch, so the memory-limit test does not fill 256 MiB).
fn memory_limit() -> usize {
    if cfg!(debug_assertions) {
        if let Some(n) = std::env::var("PITH_TEST_CODEMODE_MEMORY")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
        {
            return n;
        }
    }
    crate::codemode::MEMORY_LIMIT
}
