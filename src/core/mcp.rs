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
use crate::mcp::config::{Exposure, ServerConfig, Transport};
use crate::mcp::protocol::{self as mcp, Incoming};
use crate::protocol::McpDialect;
use crate::tools::ToolOutput;

/// Tools offered per server at most (a server listing more, in one page or over many, is cut
/// here): every tool goes into every request, and a list this long is already a broken server.
const MAX_TOOLS: usize = 10_000;

/// pi's place for a long MCP result or a binary resource: `<tmpdir>/pi-mcp-<16 hex><ext>`,
/// created exclusively, private to the user.
pub(crate) fn save_output(data: &[u8], ext: &str) -> Result<String, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::env::temp_dir();
    let mut last = String::new();
    for attempt in 0..8u64 {
        let hex = crate::tools::process::random_hex(attempt);
        let path = dir.join(format!("pi-mcp-{hex}{ext}"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(mut f) => {
                return f
                    .write_all(data)
                    .map(|_| path.display().to_string())
                    .map_err(|e| e.to_string());
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

/// What starting a server takes.
enum Start {
    Child(child::Spec),
    Http(crate::mcp::http::HttpConfig),
}

impl Machine {
    /// Finish call `index` of `batch` with a result made on a thread of its own: making it may
    /// write a long output or a binary resource to a temporary file ([`save_output`]), and the
    /// machine thread never waits on the disk. The result comes back as the tool threads'
    /// results do (one for a batch that has ended is dropped there).
    pub(crate) fn finish_off_thread(
        &mut self,
        batch: u64,
        index: usize,
        make: impl FnOnce() -> crate::tools::ToolResult + Send + 'static,
    ) {
        let tx = self.io.worker_tx.clone();
        let spawned = std::thread::Builder::new()
            .name("mcp-result".into())
            .spawn(move || {
                let _ = tx.send(Worker::Tool {
                    batch,
                    index,
                    event: ToolEvent::Done(make()),
                });
            });
        if let Err(e) = spawned {
            let r = Err(format!("Cannot start a thread for the result: {e}"));
            self.tool_finished(batch, index, r);
        }
    }

    pub(crate) fn start_mcp_server(&mut self, cfg: ServerConfig) {
        let index = self.plugins.servers.len();
        let blocks_prompt = match self.plugins.cfg.mcp_dialect {
            McpDialect::Pith => true,
            McpDialect::Pi => cfg.configured_exposures().any(|e| e == Exposure::Direct),
        };
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
                capture_stderr: self.plugins.cfg.mcp_dialect == McpDialect::Pi,
            }),
            Transport::Http {
                url,
                headers,
                oauth_client,
            } => Start::Http(crate::mcp::http::HttpConfig {
                name: cfg.name.clone(),
                url: url.clone(),
                headers: headers.clone(),
                oauth_client: oauth_client.clone(),
                timeout: match (cfg.timeout, self.plugins.cfg.mcp_dialect) {
                    (Some(t), _) => t,
                    (None, McpDialect::Pi) => std::time::Duration::from_secs(60),
                    (None, McpDialect::Pith) => self.plugins.cfg.mcp_call_timeout,
                },
                auth_file: Some(self.env.agent_dir.join("mcp-auth.json")),
            }),
        };
        let deadline = Instant::now() + self.plugins.cfg.mcp_startup_timeout;
        let enabled = cfg.enabled;
        self.plugins.servers.push(Server {
            cfg,
            handle: None,
            life: if enabled {
                Life::Starting(deadline)
            } else {
                Life::Dead
            },
            error: None,
            instructions: None,
            has_resources: false,
            blocks_prompt: blocks_prompt && enabled,
            tools: Vec::new(),
            requests: HashMap::new(),
            next_id: 1,
            listing: None,
            list_again: false,
            protocol_version: String::new(),
            needs_sign_in: false,
        });
        if !enabled {
            return;
        }
        // pi 1.6.0 resolves `headers` and `env` when it connects: a value it cannot resolve
        // fails the server, not the configuration.
        if let Some(e) = self.plugins.servers[index].cfg.start_error.clone() {
            self.fail_server(index, "startup", &e);
            return;
        }
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

    /// The timeout of one request to server `i`: its `timeout`, else the settings' (pith's
    /// client: `pith.mcpToolTimeoutSeconds`, 120 s; pi's: 60 s) for calls, the start-up timeout
    /// for the handshake and listings.
    fn mcp_timeout(&self, i: usize, call: bool) -> std::time::Duration {
        let cfg = &self.plugins.cfg;
        match (self.plugins.servers[i].cfg.timeout, call) {
            (Some(t), _) => t,
            (None, true) if cfg.mcp_dialect == McpDialect::Pi => std::time::Duration::from_secs(60),
            (None, true) => cfg.mcp_call_timeout,
            (None, false) => cfg.mcp_startup_timeout,
        }
    }

    /// The process runs: the handshake starts.
    pub(crate) fn mcp_initialize(&mut self, i: usize) {
        let params = match self.plugins.cfg.mcp_dialect {
            McpDialect::Pi => mcp::initialize_params_pi(),
            McpDialect::Pith => mcp::initialize_params(env!("CARGO_PKG_VERSION")),
        };
        self.mcp_request(i, McpReq::Initialize, "initialize", Some(params));
    }

    /// [`Self::mcp_request`] for other parts of the machine (resource tools).
    pub(crate) fn mcp_send(&mut self, i: usize, req: McpReq, method: &str, params: Option<Value>) {
        if self.plugins.servers[i].life != Life::Ready {
            if let McpReq::Resource { op } = req {
                let name = self.plugins.servers[i].cfg.name.clone();
                self.on_resource_answer(
                    i,
                    op,
                    Err(format!("MCP server \"{name}\" is not running")),
                );
            }
            return;
        }
        self.mcp_request(i, req, method, params);
    }

    /// Send a request; its deadline is the start-up timeout for the handshake, the call timeout
    /// for `tools/call`.
    fn mcp_request(&mut self, i: usize, req: McpReq, method: &str, params: Option<Value>) -> u64 {
        let timeout = self.mcp_timeout(
            i,
            matches!(req, McpReq::Call { .. } | McpReq::Resource { .. }),
        );
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
            ChildEvent::Exited {
                status,
                stderr_tail,
            } => {
                if !self.plugins.stopping {
                    let starting = matches!(self.plugins.servers[i].life, Life::Starting(_));
                    let stdio = matches!(
                        self.plugins.servers[i].cfg.transport,
                        Transport::Stdio { .. }
                    );
                    let what = match self.plugins.cfg.mcp_dialect {
                        // pi 1.6.0 (the MCP SDK's words), with the tail of the server's stderr.
                        McpDialect::Pi if stdio => {
                            let closed = if starting {
                                "MCP connection closed"
                            } else {
                                "Connection closed"
                            };
                            match stderr_tail {
                                Some(t) => format!("{closed}\n{t}"),
                                None => closed.to_string(),
                            }
                        }
                        _ if starting => format!("exited during start-up ({status})"),
                        _ => format!("exited ({status})"),
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
                        .map_err(|e| self.mcp_error_text(i, &e))
                        .and_then(|r| match self.plugins.cfg.mcp_dialect {
                            McpDialect::Pi => mcp::pi_initialize_problem(&r).map_or(Ok(r), Err),
                            McpDialect::Pith => Ok(r),
                        })
                        .and_then(|r| mcp::check_initialize(&r))
                    {
                        Ok(info) => {
                            self.plugins.servers[i].protocol_version = info.protocol_version;
                            self.plugins.servers[i].instructions = info.instructions;
                            self.plugins.servers[i].has_resources = info.has_resources;
                            self.mcp_write(i, mcp::notification("notifications/initialized", None));
                            if info.has_tools {
                                self.mcp_list(i, None);
                            } else {
                                self.plugins.servers[i].life = Life::Ready;
                            }
                        }
                        Err(e) if self.plugins.cfg.mcp_dialect == McpDialect::Pi => {
                            self.fail_server(i, "startup", &e)
                        }
                        Err(e) => {
                            self.fail_server(i, "startup", &format!("initialize failed: {e}"))
                        }
                    },
                    McpReq::List => match result
                        .map_err(|e| self.mcp_error_text(i, &e))
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
                            let pi = self.plugins.cfg.mcp_dialect == McpDialect::Pi;
                            if matches!(self.plugins.servers[i].life, Life::Starting(_)) && pi {
                                self.fail_server(i, "startup", &e);
                            } else if matches!(self.plugins.servers[i].life, Life::Starting(_)) {
                                self.fail_server(i, "startup", &format!("tools/list failed: {e}"));
                            } else {
                                let path = self.plugins.servers[i].path();
                                self.plugins.servers[i].listing = None;
                                self.extension_error(&path, "tools/list", &e);
                            }
                        }
                    },
                    McpReq::Resource { op } => {
                        self.on_resource_answer(i, op, result.map_err(|e| e.message));
                    }
                    McpReq::Call { batch, index, tool } => match result {
                        Ok(v) if self.plugins.cfg.mcp_dialect == McpDialect::Pi => {
                            let server = self.plugins.servers[i].cfg.name.clone();
                            let readable = self
                                .plugins
                                .servers
                                .iter()
                                .any(|s| s.life == Life::Ready && s.has_resources);
                            self.finish_off_thread(batch, index, move || {
                                crate::mcp::result::convert(
                                    &server,
                                    &tool,
                                    &v,
                                    readable,
                                    &save_output,
                                )
                            });
                        }
                        Ok(v) => self.tool_finished(batch, index, mcp::call_result(&v)),
                        // pi 1.6.0 reports a JSON-RPC error answer by its message alone.
                        Err(e) if self.plugins.cfg.mcp_dialect == McpDialect::Pi => {
                            let text = self.mcp_error_text(i, &e);
                            self.tool_finished(batch, index, Err(text))
                        }
                        Err(e) => self.tool_finished(batch, index, Err(e.to_string())),
                    },
                }
            }
            Incoming::Request { id, method } => {
                let pi = self.plugins.cfg.mcp_dialect == McpDialect::Pi;
                let line = if method == "ping" {
                    mcp::result_response(&id, json!({}))
                } else if pi && method == "roots/list" {
                    mcp::result_response(&id, mcp::roots_result(&self.env.cwd))
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
                    let pi = self.plugins.cfg.mcp_dialect == McpDialect::Pi;
                    let progress = if pi {
                        mcp::progress_text_pi(&params)
                    } else {
                        mcp::progress_text(&params)
                    };
                    let Some((token, text)) = progress else {
                        return;
                    };
                    let timeout = self.mcp_timeout(i, true);
                    let server = &self.plugins.servers[i];
                    let Some((McpReq::Call { batch, index, tool }, _)) =
                        server.requests.get(&token)
                    else {
                        return;
                    };
                    // pi 1.6.0's updates name the server and the tool, as its results do.
                    let details = pi.then(|| json!({"server": server.cfg.name, "tool": tool}));
                    let (batch, index) = (*batch, *index);
                    if let Some((_, deadline)) = self.plugins.servers[i].requests.get_mut(&token) {
                        *deadline = Instant::now() + timeout;
                    }
                    let out = ToolOutput {
                        content: vec![crate::message::Content::text(text)],
                        details,
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
        let pi = self.plugins.cfg.mcp_dialect == McpDialect::Pi;
        let total = tools.len();
        let mut named: Vec<(String, mcp::McpTool)> = Vec::with_capacity(total.min(MAX_TOOLS));
        let mut seen: std::collections::HashSet<String> = Default::default();
        // pi: names other servers' tools hold (sanitizing may map two tools to one name; the
        // second then gets a hash suffix).
        let others: std::collections::HashSet<String> = if pi {
            self.plugins
                .servers
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .flat_map(|(_, s)| s.tools.iter().map(|(n, _)| n.clone()))
                .collect()
        } else {
            Default::default()
        };
        // pi: every tool whose name sanitizes to a name another tool of this server also
        // sanitizes to gets the hash suffix (not only the second), whatever the list's order.
        let mut plain: HashMap<String, usize> = HashMap::new();
        if pi {
            let mut unique: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            unique.sort_unstable();
            unique.dedup();
            for n in unique {
                *plain
                    .entry(crate::mcp::naming::tool_name(&server, n, &|_| false))
                    .or_default() += 1;
            }
        }
        for mut t in tools {
            if named.len() == MAX_TOOLS {
                eprintln!(
                    "pith: MCP server {server}: {total} tools listed; only the first {MAX_TOOLS} are offered"
                );
                break;
            }
            let name = if pi {
                let taken = |n: &str| {
                    others.contains(n) || seen.contains(n) || plain.get(n).is_some_and(|c| *c > 1)
                };
                let name = crate::mcp::naming::tool_name(&server, &t.name, &taken);
                // pi's declaration: the description (else the title, else a default), and an
                // object schema with `properties`.
                let d = t.description.trim();
                t.description = if !d.is_empty() {
                    d.to_string()
                } else if let Some(title) = t.title.clone().filter(|x| !x.is_empty()) {
                    title
                } else {
                    format!("MCP tool {} from server {server}", t.name)
                };
                if let Some(Value::Object(mut m)) = t.raw_schema.clone() {
                    if !m.contains_key("type") {
                        m.insert("type".into(), json!("object"));
                    }
                    if !m.contains_key("properties") {
                        m.insert("properties".into(), json!({}));
                    }
                    t.input_schema = Value::Object(m);
                }
                name
            } else {
                mcp::tool_name(&server, &t.name)
            };
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
                    McpReq::Resource { op } => {
                        let secs = self.mcp_timeout(i, true).as_secs();
                        let name = self.plugins.servers[i].cfg.name.clone();
                        self.on_resource_answer(
                            i,
                            op,
                            Err(format!(
                                "MCP server \"{name}\" did not answer within {secs} seconds"
                            )),
                        );
                    }
                    McpReq::Call { batch, index, tool } => {
                        let timeout = self.mcp_timeout(i, true);
                        let secs = timeout.as_secs();
                        let name = self.plugins.servers[i].cfg.name.clone();
                        let pi = self.plugins.cfg.mcp_dialect == McpDialect::Pi;
                        let reason = if pi { "Request timed out" } else { "timed out" };
                        let params = json!({"requestId": id, "reason": reason});
                        self.mcp_write(
                            i,
                            mcp::notification("notifications/cancelled", Some(params)),
                        );
                        // pi 1.6.0: the MCP client's words, the timeout in milliseconds.
                        let text = if pi {
                            format!("MCP request timed out after {}ms", timeout.as_millis())
                        } else {
                            format!(
                                "MCP server \"{name}\" did not answer the call of {tool} within {secs} seconds"
                            )
                        };
                        self.tool_finished(batch, index, Err(text));
                    }
                }
            }
        }
    }

    /// The text of an error answer from server `i`'s connection. pith's client: the JSON-RPC
    /// error. pi's: the message alone, or for a failure of the HTTP transport pi 1.6.0's
    /// words (`fetch failed`, `MCP server requires authentication`, the sign-in request, which
    /// also marks the server as needing sign-in).
    fn mcp_error_text(&mut self, i: usize, e: &mcp::RpcError) -> String {
        if self.plugins.cfg.mcp_dialect != McpDialect::Pi {
            return e.to_string();
        }
        let name = &self.plugins.servers[i].cfg.name;
        match e.transport {
            Some(mcp::TransportFailure::Unreachable) => "fetch failed".to_string(),
            Some(mcp::TransportFailure::AuthRefused) => {
                "MCP server requires authentication".to_string()
            }
            Some(mcp::TransportFailure::SignIn) => {
                let text = format!("MCP server \"{name}\" requires sign-in. Run /mcp to sign in.");
                self.plugins.servers[i].needs_sign_in = true;
                text
            }
            None => e.message.clone(),
        }
    }

    /// Server `i` is unusable: `extension_error`, its process group killed, its calls failed.
    pub(crate) fn fail_server(&mut self, i: usize, event: &str, error: &str) {
        let s = &mut self.plugins.servers[i];
        if s.life == Life::Dead {
            return;
        }
        // pi keeps a server's instructions only from a connection that succeeded.
        if matches!(s.life, Life::Starting(_)) {
            s.instructions = None;
        }
        s.life = Life::Dead;
        s.error = Some(error.to_string());
        s.tools.clear();
        if let Some(h) = s.handle.as_ref() {
            h.kill();
        }
        let name = s.cfg.name.clone();
        let path = s.path();
        let mut ops: Vec<u64> = Vec::new();
        let calls: Vec<(u64, usize)> = s
            .requests
            .drain()
            .filter_map(|(_, (r, _))| match r {
                McpReq::Call { batch, index, .. } => Some((batch, index)),
                McpReq::Resource { op } => {
                    ops.push(op);
                    None
                }
                _ => None,
            })
            .collect();
        for op in ops {
            self.on_resource_answer(i, op, Err(format!("MCP server \"{name}\" failed: {error}")));
        }
        if self.plugins.cfg.mcp_dialect == McpDialect::Pith {
            self.extension_error(&path, event, error);
        }
        for (batch, index) in calls {
            self.tool_finished(
                batch,
                index,
                Err(format!("MCP server \"{name}\" failed: {error}")),
            );
        }
    }

    /// pi's client, once every server has settled after start-up: one `notify` (warning) for the
    /// configuration errors and the servers that failed, if any (on stderr outside RPC mode).
    pub(crate) fn mcp_report_problems(&mut self) {
        if self.plugins.cfg.mcp_dialect != McpDialect::Pi
            || self.plugins.mcp_reported
            || self.plugins.servers_starting()
        {
            return;
        }
        self.plugins.mcp_reported = true;
        let mut lines: Vec<String> = self
            .plugins
            .cfg
            .mcp_errors
            .iter()
            .map(|e| format!("config: {e}"))
            .collect();
        for s in &self.plugins.servers {
            if s.needs_sign_in && s.life == Life::Dead {
                lines.push(format!("{}: needs sign-in", s.cfg.name));
            } else if let (Life::Dead, Some(e)) = (&s.life, &s.error) {
                let first = e.lines().next().unwrap_or("unknown error");
                lines.push(format!("{}: failed: {first}", s.cfg.name));
            }
        }
        if lines.is_empty() {
            return;
        }
        let body: Vec<String> = lines.iter().map(|l| format!("  {l}")).collect();
        let message = format!(
            "MCP servers need attention:\n{}\nRun /mcp to fix.",
            body.join("\n")
        );
        self.notify_host(message, "warning");
    }

    /// pi's `/mcp` outside the TUI: one line per server (`<name>: <state>[, N tools] (<exposure>)`
    /// and its error below), then configuration errors.
    pub(crate) fn mcp_status_text(&self) -> String {
        let mut lines: Vec<String> = Vec::new();
        for s in &self.plugins.servers {
            let exposure = s.cfg.exposure.as_str();
            let (state, tools) = match (&s.life, s.cfg.enabled) {
                (_, false) => ("disabled".to_string(), String::new()),
                // pi's words: its `/mcp login` signs in (pith cannot: it opens no browser). A
                // server whose token stopped working mid-session says so too.
                (_, true) if s.needs_sign_in => (
                    format!("needs sign-in, run /mcp login {}", s.cfg.name),
                    String::new(),
                ),
                (Life::Starting(_), _) => ("starting".to_string(), String::new()),
                (Life::Ready, _) => (
                    "connected".to_string(),
                    format!(", {} tools", s.tools.len()),
                ),
                (Life::Dead, _) => ("failed".to_string(), String::new()),
            };
            let error = match (&s.life, &s.error) {
                (Life::Dead, Some(e)) if s.cfg.enabled && !s.needs_sign_in => {
                    format!("\n    {}", e.split('\n').collect::<Vec<_>>().join("\n    "))
                }
                _ => String::new(),
            };
            lines.push(format!(
                "{}: {state}{tools} ({exposure}){error}",
                s.cfg.name
            ));
        }
        for e in &self.plugins.cfg.mcp_errors {
            lines.push(format!("config error: {e}"));
        }
        lines.join("\n")
    }
}
