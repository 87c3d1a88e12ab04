//! The machine's side of MCP servers: the `initialize` handshake, `tools/list` (all pages, again
//! on `notifications/tools/list_changed`), `tools/call` for the model's calls (progress
//! notifications become `tool_execution_update`s and extend the deadline), requests from the
//! server (`ping` answered, anything else refused), and failures: a server that cannot start,
//! crashes or does not answer its handshake gives an `extension_error` (`extensionPath`
//! `mcp:<name>`) and its calls fail; a call that times out fails alone (and is cancelled).

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{Value, json};

use crate::core::event::ToolEvent;
use crate::core::event::Worker;
use crate::core::machine::Machine;
use crate::core::plugins::{Conn, Life, MCP_LIMITS, McpReq, Server, SpawnRequest, Target};
use crate::io::child::{self, ChildEvent};
use crate::mcp::config::{ServerConfig, Transport};
use crate::mcp::protocol::{self as mcp, Incoming};
use crate::tools::ToolOutput;

/// Tools offered per server at most (a server listing more, in one page or over many, is cut
/// here): every tool goes into every request, and a list this long is already a broken server.
const MAX_TOOLS: usize = 10_000;

/// What starting a server takes.
enum Start {
    Child(child::Spec),
    Http(crate::mcp::http::HttpConfig),
}

impl Machine {
    pub(crate) fn start_mcp_server(&mut self, cfg: ServerConfig) {
        let index = self.plugins.servers.len();
        let start = match &cfg.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => Start::Child(child::Spec {
                program: command.clone().into(),
                args: args.clone(),
                env: env.clone(),
                inherit_env: false,
                cwd: cwd.clone().unwrap_or_else(|| self.env.cwd.clone()),
            }),
            Transport::Http { url, headers } => Start::Http(crate::mcp::http::HttpConfig {
                name: cfg.name.clone(),
                url: url.clone(),
                headers: headers.clone(),
                timeout: self.plugins.cfg.mcp_call_timeout,
                auth_file: Some(self.env.agent_dir.join("mcp-auth.json")),
            }),
        };
        let deadline = Instant::now() + self.plugins.cfg.mcp_startup_timeout;
        self.plugins.servers.push(Server {
            cfg,
            handle: None,
            life: Life::Starting(deadline),
            tools: Vec::new(),
            requests: HashMap::new(),
            next_id: 1,
            listing: None,
            list_again: false,
            protocol_version: String::new(),
        });
        match start {
            Start::Child(spec) => self.spawn_child(SpawnRequest {
                target: Target::Mcp(index),
                spec,
                limits: MCP_LIMITS,
            }),
            // No process to start: connecting only starts the connection's thread.
            Start::Http(http) => {
                let tx = self.io.worker_tx.clone();
                let on_event = Box::new(move |event| {
                    tx.send(Worker::Mcp {
                        server: index,
                        event,
                    })
                    .is_ok()
                });
                match crate::mcp::http::connect(&http, MCP_LIMITS, on_event) {
                    Ok(h) => {
                        self.plugins.servers[index].handle = Some(Conn::Http(h));
                        self.mcp_initialize(index);
                    }
                    Err(e) => self.fail_server(index, "startup", &e),
                }
            }
        }
    }

    /// The process runs: the handshake starts.
    pub(crate) fn mcp_initialize(&mut self, i: usize) {
        let params = mcp::initialize_params(env!("CARGO_PKG_VERSION"));
        self.mcp_request(i, McpReq::Initialize, "initialize", Some(params));
    }

    /// Send a request; its deadline is the start-up timeout for the handshake, the call timeout
    /// for `tools/call`.
    fn mcp_request(&mut self, i: usize, req: McpReq, method: &str, params: Option<Value>) -> u64 {
        let timeout = match req {
            McpReq::Call { .. } => self.plugins.cfg.mcp_call_timeout,
            _ => self.plugins.cfg.mcp_startup_timeout,
        };
        let s = &mut self.plugins.servers[i];
        let id = s.next_id;
        s.next_id += 1;
        s.requests.insert(id, (req, Instant::now() + timeout));
        self.mcp_write(i, mcp::request(id, method, params));
        id
    }

    fn mcp_write(&mut self, i: usize, line: Vec<u8>) {
        let full = match self.plugins.servers[i].handle.as_ref() {
            Some(h) => h.write(line) == Err(child::WriteError::Full),
            None => false,
        };
        if full {
            self.fail_server(i, "protocol", "does not read its input");
        }
    }

    pub(crate) fn on_mcp_event(&mut self, i: usize, event: ChildEvent) {
        let Some(s) = self.plugins.servers.get(i) else {
            return;
        };
        if s.life == Life::Dead {
            return;
        }
        let name = s.cfg.name.clone();
        match event {
            ChildEvent::Line(v) => self.on_mcp_message(i, mcp::classify(&v)),
            ChildEvent::Garbage { line, .. } => {
                eprintln!("pith: MCP server {name}: ignored a line that is not JSON: {line}")
            }
            ChildEvent::Oversized { bytes } => {
                eprintln!("pith: MCP server {name}: ignored a line of {bytes} bytes")
            }
            ChildEvent::Flood => self.fail_server(
                i,
                "protocol",
                &format!(
                    "flooded pith with more than {} messages in one second",
                    MCP_LIMITS.max_lines_per_sec
                ),
            ),
            ChildEvent::Exited { status } => {
                if !self.plugins.stopping {
                    let starting = matches!(self.plugins.servers[i].life, Life::Starting(_));
                    let what = if starting {
                        format!("exited during start-up ({status})")
                    } else {
                        format!("exited ({status})")
                    };
                    self.fail_server(i, if starting { "startup" } else { "process" }, &what);
                }
            }
        }
        self.check_startup_done();
    }

    fn on_mcp_message(&mut self, i: usize, msg: Incoming) {
        match msg {
            Incoming::Response { id, result } => {
                let Some((req, _)) = self.plugins.servers[i].requests.remove(&id) else {
                    return;
                };
                match req {
                    McpReq::Initialize => match result
                        .map_err(|e| e.to_string())
                        .and_then(|r| mcp::check_initialize(&r))
                    {
                        Ok(info) => {
                            self.plugins.servers[i].protocol_version = info.protocol_version;
                            self.mcp_write(i, mcp::notification("notifications/initialized", None));
                            if info.has_tools {
                                self.mcp_list(i, None);
                            } else {
                                self.plugins.servers[i].life = Life::Ready;
                            }
                        }
                        Err(e) => {
                            self.fail_server(i, "startup", &format!("initialize failed: {e}"))
                        }
                    },
                    McpReq::List => match result
                        .map_err(|e| e.to_string())
                        .and_then(|r| mcp::parse_tools_page(&r))
                    {
                        Ok((tools, cursor)) => {
                            let s = &mut self.plugins.servers[i];
                            let mut acc = s.listing.take().unwrap_or_default();
                            acc.extend(tools);
                            match cursor {
                                Some(c) if acc.len() < MAX_TOOLS => {
                                    self.plugins.servers[i].listing = Some(acc);
                                    self.mcp_list(i, Some(c));
                                }
                                _ => self.mcp_tools_listed(i, acc),
                            }
                        }
                        Err(e) => {
                            if matches!(self.plugins.servers[i].life, Life::Starting(_)) {
                                self.fail_server(i, "startup", &format!("tools/list failed: {e}"));
                            } else {
                                let path = self.plugins.servers[i].path();
                                self.plugins.servers[i].listing = None;
                                self.extension_error(&path, "tools/list", &e);
                            }
                        }
                    },
                    McpReq::Call { batch, index, .. } => {
                        let r = match result {
                            Ok(v) => mcp::call_result(&v),
                            Err(e) => Err(e.to_string()),
                        };
                        self.tool_finished(batch, index, r);
                    }
                }
            }
            Incoming::Request { id, method } => {
                let line = if method == "ping" {
                    mcp::result_response(&id, json!({}))
                } else {
                    mcp::error_response(
                        &id,
                        mcp::METHOD_NOT_FOUND,
                        &format!("pith does not support {method}"),
                    )
                };
                self.mcp_write(i, line);
            }
            Incoming::Notification { method, params } => match method.as_str() {
                "notifications/tools/list_changed" => {
                    let s = &mut self.plugins.servers[i];
                    if s.life == Life::Ready {
                        if s.listing.is_some() {
                            s.list_again = true;
                        } else {
                            self.mcp_list(i, None);
                        }
                    }
                }
                "notifications/progress" => {
                    let Some((token, text)) = mcp::progress_text(&params) else {
                        return;
                    };
                    let timeout = self.plugins.cfg.mcp_call_timeout;
                    let Some((McpReq::Call { batch, index, .. }, deadline)) =
                        self.plugins.servers[i].requests.get_mut(&token)
                    else {
                        return;
                    };
                    *deadline = Instant::now() + timeout;
                    let (batch, index) = (*batch, *index);
                    let out = ToolOutput {
                        content: vec![crate::message::Content::text(text)],
                        details: None,
                        ..Default::default()
                    };
                    self.on_tool_event(batch, index, ToolEvent::Update(out));
                }
                "notifications/message" => {
                    let name = &self.plugins.servers[i].cfg.name;
                    let level = params
                        .get("level")
                        .and_then(Value::as_str)
                        .unwrap_or("info");
                    let data = params.get("data").cloned().unwrap_or(Value::Null);
                    // A log line, not a dump: at most 2000 bytes of it.
                    let data = data.to_string();
                    let mut cut = data.len().min(2000);
                    while !data.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    let more = if cut < data.len() { " …" } else { "" };
                    eprintln!("pith: MCP server {name} [{level}]: {}{more}", &data[..cut]);
                }
                _ => {}
            },
            Incoming::Invalid(e) => {
                let name = &self.plugins.servers[i].cfg.name;
                eprintln!("pith: MCP server {name}: ignored a message: {e}");
            }
        }
    }

    fn mcp_list(&mut self, i: usize, cursor: Option<String>) {
        if cursor.is_none() {
            self.plugins.servers[i].listing = Some(Vec::new());
        }
        let params = cursor.map(|c| json!({"cursor": c}));
        self.mcp_request(i, McpReq::List, "tools/list", params);
    }

    /// A complete `tools/list`: the server's tools become agent tools (for the next run).
    fn mcp_tools_listed(&mut self, i: usize, tools: Vec<mcp::McpTool>) {
        let server = self.plugins.servers[i].cfg.name.clone();
        let total = tools.len();
        let mut named: Vec<(String, mcp::McpTool)> = Vec::with_capacity(total.min(MAX_TOOLS));
        let mut seen: std::collections::HashSet<String> = Default::default();
        for t in tools {
            if named.len() == MAX_TOOLS {
                eprintln!(
                    "pith: MCP server {server}: {total} tools listed; only the first {MAX_TOOLS} are offered"
                );
                break;
            }
            let name = mcp::tool_name(&server, &t.name);
            if !seen.insert(name.clone()) {
                eprintln!(
                    "pith: MCP server {server}: tool \"{}\" is named like another one ({name}); skipped",
                    t.name
                );
                continue;
            }
            named.push((name, t));
        }
        let s = &mut self.plugins.servers[i];
        s.tools = named;
        s.listing = None;
        s.life = Life::Ready;
        if std::mem::take(&mut s.list_again) {
            self.mcp_list(i, None);
        }
    }

    /// `tools/call` for call `index` of `batch`.
    pub(crate) fn mcp_call(
        &mut self,
        i: usize,
        batch: u64,
        index: usize,
        tool: &str,
        args: &Value,
    ) -> Result<(), String> {
        let Some(s) = self.plugins.servers.get(i) else {
            return Err("MCP server not found".into());
        };
        if s.life != Life::Ready {
            return Err(format!("MCP server \"{}\" is not running", s.cfg.name));
        }
        let id = s.next_id;
        let params = mcp::call_params(tool, args, id);
        let req = McpReq::Call {
            batch,
            index,
            tool: tool.to_string(),
        };
        self.mcp_request(i, req, "tools/call", Some(params));
        Ok(())
    }

    /// Calls of `batch` in flight are cancelled (`notifications/cancelled`); their indices.
    pub(crate) fn mcp_cancel_batch(&mut self, batch: u64) -> Vec<usize> {
        let mut out = Vec::new();
        for i in 0..self.plugins.servers.len() {
            let ids: Vec<(u64, usize)> = self.plugins.servers[i]
                .requests
                .iter()
                .filter_map(|(id, (r, _))| match r {
                    McpReq::Call {
                        batch: b, index, ..
                    } if *b == batch => Some((*id, *index)),
                    _ => None,
                })
                .collect();
            for (id, index) in ids {
                self.plugins.servers[i].requests.remove(&id);
                let params = json!({"requestId": id, "reason": "aborted"});
                self.mcp_write(
                    i,
                    mcp::notification("notifications/cancelled", Some(params)),
                );
                out.push(index);
            }
        }
        out
    }

    /// Deadlines of MCP requests: a late handshake fails the server, a late call fails alone.
    pub(crate) fn mcp_timeouts(&mut self, now: Instant) {
        for i in 0..self.plugins.servers.len() {
            if self.plugins.servers[i].life == Life::Dead {
                continue;
            }
            let late: Vec<u64> = self.plugins.servers[i]
                .requests
                .iter()
                .filter(|(_, (_, t))| *t <= now)
                .map(|(id, _)| *id)
                .collect();
            for id in late {
                let Some((req, _)) = self.plugins.servers[i].requests.remove(&id) else {
                    continue;
                };
                match req {
                    McpReq::Initialize | McpReq::List => {
                        let secs = self.plugins.cfg.mcp_startup_timeout.as_secs();
                        let what = if matches!(req, McpReq::Initialize) {
                            "initialize"
                        } else {
                            "tools/list"
                        };
                        self.fail_server(
                            i,
                            "startup",
                            &format!("did not answer {what} within {secs} seconds"),
                        );
                        break;
                    }
                    McpReq::Call { batch, index, tool } => {
                        let secs = self.plugins.cfg.mcp_call_timeout.as_secs();
                        let name = self.plugins.servers[i].cfg.name.clone();
                        let params = json!({"requestId": id, "reason": "timed out"});
                        self.mcp_write(
                            i,
                            mcp::notification("notifications/cancelled", Some(params)),
                        );
                        self.tool_finished(
                            batch,
                            index,
                            Err(format!(
                                "MCP server \"{name}\" did not answer the call of {tool} within {secs} seconds"
                            )),
                        );
                    }
                }
            }
        }
    }

    /// Server `i` is unusable: `extension_error`, its process group killed, its calls failed.
    pub(crate) fn fail_server(&mut self, i: usize, event: &str, error: &str) {
        let s = &mut self.plugins.servers[i];
        if s.life == Life::Dead {
            return;
        }
        s.life = Life::Dead;
        s.tools.clear();
        if let Some(h) = s.handle.as_ref() {
            h.kill();
        }
        let name = s.cfg.name.clone();
        let path = s.path();
        let calls: Vec<(u64, usize)> = s
            .requests
            .drain()
            .filter_map(|(_, (r, _))| match r {
                McpReq::Call { batch, index, .. } => Some((batch, index)),
                _ => None,
            })
            .collect();
        self.extension_error(&path, event, error);
        for (batch, index) in calls {
            self.tool_finished(
                batch,
                index,
                Err(format!("MCP server \"{name}\" failed: {error}")),
            );
        }
    }
}
