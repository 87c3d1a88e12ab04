//! Extensions and MCP servers as the state machine sees them: their processes (started in the
//! background when the machine starts, stopped with it), the calls waiting for their answers,
//! the UI dialogs waiting for the host, and the one timer that enforces every deadline
//! (per-call timeouts, dialog timeouts, start-up). The machine's loop selects on
//! [`Plugins::timer`] next to its channels; nothing here blocks.
//!
//! The reactions live next to this file: `core/ext.rs` (extension messages, commands, session
//! hooks, events), `core/gate.rs` (tool gates: extensions' `tool_call`, `--confirm-tools`, UI
//! dialogs, remote tool calls, `tool_result` review), `core/mcp.rs` (MCP servers).

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use serde_json::{Value, json};

use crate::core::event::Worker;
use crate::core::machine::Machine;
use crate::ext::load::ExtEntry;
use crate::ext::protocol::{CommandSpec, ToolSpec};
use crate::io::child::{self, ChildHandle, Limits};
use crate::mcp::config::{Exposure, ServerConfig};
use crate::mcp::protocol::McpTool;
use crate::message::AgentMessage;
use crate::perms::approval::ConfirmTools;
use crate::protocol::McpDialect;
use crate::rpc::response;

/// Output limits of an extension: one line up to 16 MiB, at most 1000 lines per second; 1024
/// lines or 32 MiB queued for it (one line longer than that is still accepted alone).
pub const EXT_LIMITS: Limits = Limits {
    max_line: 16 * 1024 * 1024,
    max_lines_per_sec: 1000,
    write_queue: 1024,
    write_queue_bytes: 32 * 1024 * 1024,
};

/// How much longer than `pith.extensionTimeoutSeconds` pith waits for the node host's answer to
/// an event or command: the host times its handlers out itself, at the timeout.
pub const NODE_HOST_GRACE: Duration = Duration::from_secs(2);

/// MCP servers may log a lot; their cap is higher.
pub const MCP_LIMITS: Limits = Limits {
    max_line: 16 * 1024 * 1024,
    max_lines_per_sec: 10_000,
    write_queue: 1024,
    write_queue_bytes: 32 * 1024 * 1024,
};

/// Everything the plugin host starts with (resolved by `app` from CLI and settings).
#[derive(Clone, Debug, Default)]
pub struct PluginConfig {
    pub extensions: Vec<ExtEntry>,
    pub mcp: Vec<ServerConfig>,
    pub confirm_tools: ConfirmTools,
    /// Permission rules and `--confirm-tools` merged (None: nothing configured, no gate).
    pub permissions: Option<crate::perms::Policy>,
    /// `--confirm-timeout` (None: wait forever).
    pub confirm_timeout: Option<Duration>,
    /// Per-call timeout of an extension (also its time to register).
    pub ext_timeout: Duration,
    /// The same for its tools' calls (each `tool_update` restarts it).
    pub ext_tool_timeout: Duration,
    pub mcp_startup_timeout: Duration,
    pub mcp_call_timeout: Duration,
    /// A host can answer dialogs (RPC mode); otherwise dialogs resolve at once as cancelled.
    pub ui: bool,
    /// `rpc`, `json` or `print` (told to extensions in `hello`).
    pub mode: &'static str,
    /// `--no-mcp`: no MCP server starts (and 1.6.0's built-in `mcp` command is not listed).
    pub no_mcp: bool,
    /// Whose MCP client pith is (the protocol version's).
    pub mcp_dialect: McpDialect,
    /// pi's `mcp.json` `autoEnableCodemode` (default true).
    pub auto_enable_codemode: bool,
    /// Problems of pi's `mcp.json` files (`<file>: <what>`), reported once after start-up.
    pub mcp_errors: Vec<String>,
    /// pi's `--tools mcp__…` / `--exclude-tools` on MCP tools.
    pub mcp_filter: crate::mcp::config::ToolFilter,
    /// pi 1.6.0's built-in extensions turned off (`-builtin:<name>`, `--no-extensions`).
    pub builtins_off: Vec<String>,
    /// A front end that ties each permission dialog to its tool call (ACP mode, `src/acp/`):
    /// a `permission_request` frame precedes an ask's `confirm` dialog. Never set in the RPC,
    /// json and print modes, whose frames stay pi's.
    pub call_events: bool,
    /// pi's TypeScript extensions are configured: the node that hosts them.
    pub node_host: Option<NodeHostSetup>,
    /// `--model` (with `--provider`), or a resumed session's model, named no known model, and pi
    /// extensions may register its provider (`registerProvider` in their factory): resolved once
    /// they have all loaded.
    pub deferred_model: Option<DeferredModel>,
    /// Long flags pith does not know, for pi's extensions (`cli::Options::extension_flags`):
    /// handed to the node host, which checks them against the flags its extensions register.
    pub extension_flags: Vec<(String, Option<String>)>,
}

/// A start-up model left for after the extensions' start ([`PluginConfig`]).
#[derive(Clone, Debug)]
pub struct DeferredModel {
    pub wanted: Wanted,
    /// `--api-key`, for the model's provider.
    pub api_key: Option<String>,
    /// `--thinking`, if given (else the model's `:level` suffix, once resolved).
    pub level: Option<crate::message::ThinkingLevel>,
    /// The session has messages (its thinking level counts; no `model_change` is recorded).
    pub resumed: bool,
}

/// Which model start-up could not find before the extensions' providers.
#[derive(Clone, Debug)]
pub enum Wanted {
    /// `--provider` / `--model`: still unknown then, start-up's error.
    Cli {
        provider: Option<String>,
        pattern: String,
    },
    /// A resumed session's model: still unknown then, start-up's fallback.
    Session { provider: String, id: String },
}

/// The node host of pi's TypeScript extensions (`ext::node_host`).
#[derive(Clone, Debug)]
pub struct NodeHostSetup {
    pub node: crate::ext::node_host::Node,
    /// Told to the extensions (`ctx.isProjectTrusted()`).
    pub project_trusted: bool,
}

impl PluginConfig {
    /// Resolve from the command line and settings. Warnings are for stderr. An untrusted
    /// project (`project_trusted` false, see `crate::trust`) names nothing that starts: its
    /// settings' extensions and its `.mcp.json` are not read (`settings` is then the user's only).
    #[allow(clippy::too_many_arguments)]
    pub fn resolve(
        cli_extensions: &[String],
        no_extensions: bool,
        no_mcp: bool,
        project_trusted: bool,
        confirm_tools: Option<&str>,
        confirm_timeout: Option<u64>,
        settings: &crate::config::Settings,
        agent_dir: &Path,
        cwd: &Path,
        mode: &'static str,
        mcp_dialect: McpDialect,
    ) -> (PluginConfig, Vec<String>) {
        let (extensions, mut warnings) = crate::ext::load::resolve(
            cli_extensions,
            no_extensions,
            project_trusted,
            agent_dir,
            cwd,
        );
        let builtins_off = if mcp_dialect == McpDialect::Pi {
            crate::ext::load::builtins_off(
                cli_extensions,
                no_extensions,
                project_trusted,
                agent_dir,
                cwd,
            )
        } else {
            Vec::new()
        };
        let no_mcp = no_mcp || builtins_off.iter().any(|b| b == "mcp");
        let mut mcp = Vec::new();
        let mut auto_enable_codemode = true;
        let mut mcp_errors = Vec::new();
        if !no_mcp && mcp_dialect == McpDialect::Pi {
            let env = |k: &str| std::env::var(k).ok();
            let no_env: crate::llm::models::Env = std::sync::Arc::new(|_: &str| None);
            let run = |cmd: &str| {
                crate::llm::models::resolve_config_value_uncached(&format!("!{cmd}"), &no_env)
            };
            let inputs = crate::mcp::mcp_json::Inputs {
                env: &env,
                home: std::env::var_os("HOME").map(std::path::PathBuf::from),
                run: &run,
            };
            let read = |p: &Path| match crate::files::read_text(p) {
                Ok(t) => Ok(Some(t)),
                Err(crate::files::ReadError::NotFound) => Ok(None),
                Err(e) => Err(e.warning(p).unwrap_or_else(|| "cannot read".into())),
            };
            let loaded = crate::mcp::mcp_json::load(
                agent_dir,
                project_trusted.then_some(cwd),
                cwd,
                &read,
                &inputs,
            );
            mcp = loaded.servers;
            mcp_errors = loaded.errors;
            auto_enable_codemode = loaded.auto_enable_codemode.unwrap_or(true);
        } else if !no_mcp {
            let project_path = cwd.join(".mcp.json");
            let project = if !project_trusted {
                if project_path.exists() {
                    warnings.push(format!(
                        "Warning: the project is not trusted: {} ignored (--approve trusts it)",
                        project_path.display()
                    ));
                }
                None
            } else {
                match crate::files::read_text(&project_path).map_err(|e| {
                    warnings.extend(e.warning(&project_path));
                }) {
                    Ok(text) => match serde_json::from_str::<Value>(&text) {
                        Ok(v) => Some(v),
                        Err(e) => {
                            warnings.push(format!(
                                "Warning: cannot parse {}: {e}; ignored",
                                project_path.display()
                            ));
                            None
                        }
                    },
                    Err(_) => None,
                }
            };
            let env = |k: &str| std::env::var(k).ok();
            let (servers, w) = crate::mcp::config::resolve(
                settings.mcp_servers(),
                project.as_ref().map(|v| (v, cwd)),
                cwd,
                &env,
            );
            mcp = servers;
            warnings.extend(w);
        }
        let confirm_tools = match confirm_tools {
            Some(s) => ConfirmTools::parse(s),
            None => settings.confirm_tools().unwrap_or_default(),
        };
        let secs = confirm_timeout.unwrap_or_else(|| settings.confirm_timeout_secs());
        (
            PluginConfig {
                extensions,
                mcp,
                confirm_tools,
                permissions: None,
                confirm_timeout: (secs > 0).then(|| Duration::from_secs(secs)),
                ext_timeout: Duration::from_secs(settings.extension_timeout_secs().max(1)),
                ext_tool_timeout: Duration::from_secs(
                    settings.extension_tool_timeout_secs().max(1),
                ),
                mcp_startup_timeout: Duration::from_secs(
                    settings.mcp_startup_timeout_secs().max(1),
                ),
                mcp_call_timeout: Duration::from_secs(settings.mcp_tool_timeout_secs().max(1)),
                ui: mode == "rpc",
                mode,
                no_mcp,
                mcp_dialect,
                auto_enable_codemode,
                mcp_errors,
                mcp_filter: Default::default(),
                builtins_off,
                call_events: false,
                node_host: None,
                deferred_model: None,
                extension_flags: Vec::new(),
            },
            warnings,
        )
    }
}

/// Which process a spawn was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Ext(usize),
    Mcp(usize),
}

/// A process for the spawner thread to start.
pub struct SpawnRequest {
    pub target: Target,
    pub spec: child::Spec,
    pub limits: Limits,
}

/// The thread that starts the processes. Off the machine thread, because each fork waits for
/// the child's exec (milliseconds each on a busy machine, which would delay the first
/// responses); and alive until pith stops, because a child's parent-death signal
/// (`PR_SET_PDEATHSIG`) fires when the thread that forked it ends.
fn spawn_spawner(
    worker_tx: Sender<Worker>,
    sandbox: Option<std::sync::Arc<crate::sandbox::Sandbox>>,
) -> Option<Sender<SpawnRequest>> {
    let (tx, rx) = crossbeam_channel::unbounded::<SpawnRequest>();
    let started = std::thread::Builder::new()
        .name(
            if sandbox.is_some() {
                "spawner-sandboxed"
            } else {
                "spawner"
            }
            .into(),
        )
        .spawn(move || {
            // `--sandbox`: this thread, and so every process it starts, is confined like tools.
            let entered = match &sandbox {
                Some(sb) => sb.enter().map_err(|e| {
                    format!("the sandbox could not be entered, so it did not start: {e}")
                }),
                None => Ok(()),
            };
            for req in rx {
                let result = match &entered {
                    Ok(()) => spawn_now(&req, &worker_tx),
                    Err(e) => Err(e.clone()),
                };
                if worker_tx
                    .send(Worker::Spawned {
                        target: req.target,
                        result,
                    })
                    .is_err()
                {
                    return;
                }
            }
        });
    started.ok().map(|_| tx)
}

fn spawn_now(req: &SpawnRequest, worker_tx: &Sender<Worker>) -> Result<ChildHandle, String> {
    let tx = worker_tx.clone();
    let on_event: Box<dyn FnMut(child::ChildEvent) -> bool + Send> = match req.target {
        Target::Ext(ext) => Box::new(move |event| tx.send(Worker::Ext { ext, event }).is_ok()),
        Target::Mcp(server) => {
            Box::new(move |event| tx.send(Worker::Mcp { server, event }).is_ok())
        }
    };
    child::spawn(&req.spec, req.limits, on_event)
}

/// A tool that does not run in pith: an extension's or an MCP server's.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteTool {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub snippet: Option<String>,
    /// The tool's lines for the system prompt's guidelines (an extension's `promptGuidelines`).
    pub guidelines: Vec<String>,
    pub owner: Owner,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Owner {
    Ext(usize),
    /// Server number and the server's own name for the tool.
    Mcp {
        server: usize,
        tool: String,
    },
    /// pi 1.6.0's resource tools, answered from every server with resources.
    McpResources(crate::core::mcp_resources::ResourceTool),
}

#[derive(Debug, PartialEq, Eq)]
pub enum Life {
    /// Started, not registered / initialised yet (until the deadline).
    Starting(Instant),
    Ready,
    Dead,
}

/// A call pith made to an extension and waits for.
pub struct Call {
    pub kind: CallKind,
    pub deadline: Instant,
    /// How long it may take (restarted by progress and by the end of a dialog).
    pub timeout: Duration,
    /// The event (or message) name reported if it fails.
    pub event: String,
}

pub enum CallKind {
    /// The tool gate's question (`tool_call`).
    ToolCall,
    /// A `tool_result` review of call `index` of batch `batch`.
    Review { batch: u64, index: usize },
    /// A `session_before_*` question of session operation `op`.
    SessionOp(u64),
    /// `execute_tool` for call `index` of batch `batch`.
    Tool { batch: u64, index: usize },
    /// An `input` question of prompt `op` (pi's input hook).
    Input(u64),
    /// A `before_agent_start` question of the run `op` about to start.
    BeforeStart(u64),
    /// A `context` question of the LLM request `op`.
    Context(u64),
    /// A `session_before_compact` question of the compaction in flight (`op`), with its custom
    /// instructions (told to the next extension too).
    BeforeCompact { op: u64, custom: Option<String> },
    /// A slash command run from a prompt (answered when it finishes).
    Command {
        id: Option<Value>,
        command: &'static str,
        name: String,
    },
}

pub struct Ext {
    pub entry: ExtEntry,
    /// `extensionPath` of its errors.
    pub path: String,
    pub name: String,
    pub handle: Option<ChildHandle>,
    pub life: Life,
    pub tools: Vec<ToolSpec>,
    pub commands: Vec<CommandSpec>,
    pub events: Vec<String>,
    pub calls: HashMap<u64, Call>,
    /// Dialogs it asked for that the host has not answered: its deadlines wait meanwhile.
    pub dialogs_open: usize,
    /// pith's node host of pi's extensions: gets `state` lines and may send `call`s.
    pub node_host: bool,
    /// The `state` last sent to it.
    pub last_state: Option<Value>,
}

impl Ext {
    pub fn ready(&self) -> bool {
        self.life == Life::Ready
    }
    pub fn wants(&self, event: &str) -> bool {
        self.ready() && self.events.iter().any(|e| e == event)
    }
}

/// A request pith sent to an MCP server.
pub enum McpReq {
    Initialize,
    List,
    Call {
        batch: u64,
        index: usize,
        tool: String,
    },
    /// A request of resource tool call `op` (`core::mcp_resources`).
    Resource {
        op: u64,
    },
}

/// How pith talks to an MCP server: a child process or a Streamable HTTP connection.
#[derive(Debug)]
pub enum Conn {
    Child(ChildHandle),
    Http(crate::mcp::http::HttpHandle),
}

impl Conn {
    /// Queue one message. Never blocks.
    pub fn write(&self, line: Vec<u8>) -> Result<(), child::WriteError> {
        match self {
            Conn::Child(h) => h.write(line),
            Conn::Http(h) => h.write(line),
        }
    }

    /// Stop after what is queued: the child's stdin closes, the HTTP session is deleted.
    /// `Exited` follows.
    pub fn close(&mut self) {
        match self {
            Conn::Child(h) => h.close_input(),
            Conn::Http(h) => h.close(),
        }
    }

    /// Stop at once (the child's process group is killed).
    pub fn kill(&self) {
        match self {
            Conn::Child(h) => h.signal(child::SIGKILL),
            Conn::Http(h) => h.kill(),
        }
    }

    /// The child's process group, if it is one.
    pub fn pid(&self) -> Option<i32> {
        match self {
            Conn::Child(h) => Some(h.pid),
            Conn::Http(_) => None,
        }
    }
}

pub struct Server {
    pub cfg: ServerConfig,
    pub handle: Option<Conn>,
    pub life: Life,
    /// Why it is not running (shown by pi's `/mcp`): `Life::Dead` with no error is disabled.
    pub error: Option<String>,
    /// `instructions` of its `initialize` result (first line: its summary without a description).
    pub instructions: Option<String>,
    /// It announced `resources` in `initialize` (pi's resource tools reach it).
    pub has_resources: bool,
    /// A prompt waits for it to start: its tools are declared to the model (all of pith's own
    /// client's; pi's `direct` ones).
    pub blocks_prompt: bool,
    /// `(agent name, the server's tool)`.
    pub tools: Vec<(String, McpTool)>,
    pub requests: HashMap<u64, (McpReq, Instant)>,
    pub next_id: u64,
    /// Pages of a `tools/list` in progress.
    pub listing: Option<Vec<McpTool>>,
    /// `notifications/tools/list_changed` arrived while listing: list again.
    pub list_again: bool,
    pub protocol_version: String,
    /// pi's client: it failed for want of a stored credential (`/mcp` says "needs sign-in").
    pub needs_sign_in: bool,
}

impl Server {
    pub fn path(&self) -> String {
        format!("mcp:{}", self.cfg.name)
    }
}

/// Whether a tool of this exposure is declared to the model: `direct` ones always,
/// `codemode`/`deferred` ones once `loaded` (by `tool_search`, on the branch), `hidden` never.
fn declared(exposure: Exposure, loaded: impl FnOnce() -> bool) -> bool {
    match exposure {
        Exposure::Direct => true,
        Exposure::Codemode | Exposure::Deferred => loaded(),
        Exposure::Hidden => false,
    }
}

/// Server `server`'s tool `t`, named `name` for the agent, as a remote tool.
fn mcp_remote(server: usize, name: &str, t: &McpTool) -> RemoteTool {
    RemoteTool {
        name: name.to_string(),
        description: t.description.clone(),
        parameters: t.input_schema.clone(),
        snippet: None,
        guidelines: Vec::new(),
        owner: Owner::Mcp {
            server,
            tool: t.name.clone(),
        },
    }
}

/// Who waits for a dialog's answer.
pub enum DialogOwner {
    Ext {
        ext: usize,
        reply_id: Value,
    },
    /// The tool gate (`--confirm-tools`).
    Gate,
}

pub struct Dialog {
    pub owner: DialogOwner,
    pub method: &'static str,
    pub deadline: Option<Instant>,
}

/// The tool gate of the call being prepared: extensions' `tool_call` in load order, then
/// `--confirm-tools`.
pub struct Gate {
    pub batch: u64,
    pub index: usize,
    pub call_id: String,
    pub tool: String,
    pub args: Value,
    pub exec: crate::core::agent::Exec,
    pub exts: VecDeque<usize>,
    /// The permission rules (and `--confirm-tools`) are still to decide this call.
    pub permission_pending: bool,
    /// The call is asked (its dialog open): what asked, and where a file tool's path resolves.
    pub asked: Option<Asked>,
    /// Waiting for this extension's answer or this dialog.
    pub waiting: Option<GateWait>,
}

/// What an open permission dialog was for.
pub struct Asked {
    /// The ask rule (None: the default asked).
    pub rule: Option<String>,
    /// A write's or edit's resolved target, pinned when the host allows.
    pub target: Option<std::path::PathBuf>,
}

pub enum GateWait {
    Ext { ext: usize, call: u64 },
    Dialog(String),
}

/// A `tool_result` review in progress.
pub struct Review {
    pub result: crate::tools::ToolResult,
    pub exts: VecDeque<usize>,
}

/// A prompt waiting for extensions' `input` answers (pi's input hook: transforms chain, the
/// first `handled` ends it).
pub struct InputOp {
    pub input: crate::rpc::command::UserInput,
    pub behavior: Option<crate::rpc::command::StreamingBehavior>,
    pub id: Option<Value>,
    pub command: &'static str,
    pub exts: VecDeque<usize>,
}

/// A run waiting for the extensions' `before_agent_start` answers (asked one after the other).
pub struct BeforeStart {
    pub op: u64,
    /// The run's prompt messages (the user message and `nextTurn` messages).
    pub messages: Vec<AgentMessage>,
    /// The prompt's text and images, as the event tells them.
    pub prompt: String,
    pub images: Value,
    /// The system prompt the next extension sees (an earlier one's replacement, else pith's).
    pub system_prompt: String,
    /// An extension replaced the system prompt for this run.
    pub replaced: bool,
    pub exts: VecDeque<usize>,
    /// The prompt's response, sent when the run starts (pi answers after this preflight).
    pub answer: Option<Vec<u8>>,
    /// `abort`s that came meanwhile: the run starts aborted (ids to answer).
    pub abort_waiters: Vec<Option<Value>>,
}

/// An LLM request waiting for the extensions' `context` answers.
pub struct ContextOp {
    pub op: u64,
    /// The messages the next extension sees (`None`: the context, unchanged so far).
    pub messages: Option<Value>,
    pub exts: VecDeque<usize>,
}

/// A session operation waiting for extensions' `session_before_*` answers.
pub struct SessionOp {
    pub kind: SessionOpKind,
    pub reply: OpReply,
    pub exts: VecDeque<usize>,
}

/// Who is told how a session operation ended.
pub enum OpReply {
    /// The host, with the command's response (`id`, command name).
    Rpc { id: Option<Value>, command: String },
    /// Extension `ext` (the node host), with the answer to its call `call` (`ctx.newSession()`).
    Ext { ext: usize, call: Value },
}

#[derive(Clone, Debug)]
pub enum SessionOpKind {
    New { parent: Option<String> },
    Switch { path: String },
    Fork { entry_id: String },
    Clone,
}

/// The plugin host's state, owned by the machine.
#[derive(Default)]
pub struct Plugins {
    pub cfg: PluginConfig,
    pub exts: Vec<Ext>,
    pub servers: Vec<Server>,
    pub dialogs: HashMap<String, Dialog>,
    pub gate: Option<Gate>,
    pub reviews: HashMap<(u64, usize), Review>,
    pub ops: HashMap<u64, SessionOp>,
    /// Prompts waiting for `input` answers.
    pub inputs: HashMap<u64, InputOp>,
    /// A run waiting for `before_agent_start` answers (it counts as running).
    pub before_start: Option<BeforeStart>,
    /// The run's next LLM request waiting for `context` answers.
    pub context: Option<ContextOp>,
    /// pi's `setActiveTools`: the extension and MCP tools it turned off (tools registered
    /// later are offered).
    pub inactive_remote: Vec<String>,
    /// The compaction about to start is an extension's `ctx.compact()` (no response frame).
    pub compact_from_ext: bool,
    /// The prompt being handled has been through the input hook.
    pub input_checked: bool,
    /// The waiting prompt (`Machine::pending_prompt`) has been through the input hook.
    pub pending_input_checked: bool,
    pub next_id: u64,
    pub turn_index: u64,
    /// `sendMessage` with `deliverAs: "nextTurn"`: added to the next prompt.
    pub next_turn: Vec<AgentMessage>,
    /// `sendMessage` without a turn while the agent runs: added after the current turn.
    pub after_turn: Vec<AgentMessage>,
    /// A prompt waits for extensions and servers to finish starting.
    pub prompt_waits_startup: bool,
    /// pi 1.6.0: the tool batch whose calls need every MCP server (`tool_search`, a codemode
    /// script naming MCP tools or searching them) waits for the servers still starting.
    pub tools_wait_servers: Option<u64>,
    /// pi's MCP client reported its start-up problems (once).
    pub mcp_reported: bool,
    /// pi's MCP client connects its servers at the first prompt (or `/mcp`): until then it
    /// knows no server's instructions, so the first prompt's `mcp_servers` section has none
    /// (unless it waited for servers with direct tools).
    pub mcp_connect_requested: bool,
    /// pi's MCP client: until when the first prompt waits for servers with direct tools (10 s).
    pub mcp_wait_until: Option<Instant>,
    /// pi's MCP client: the first prompt has waited; later prompts do not wait for servers.
    pub mcp_waited: bool,
    /// `get_commands` requests waiting for extensions to register (their ids).
    pub waiting_commands: Vec<Option<Value>>,
    /// Extensions whose failure was noticed where it could not be handled (a full input queue
    /// while writing an event): isolated at the next timer tick.
    pub failures: Vec<(usize, String, String)>,
    timer: Option<(Instant, Receiver<Instant>)>,
    pub stopping: bool,
    /// The host's stdin is closed: no dialog can be answered any more.
    pub input_closed: bool,
    /// The spawner thread's queue (dropped at the end: the thread ends).
    spawner: Option<Sender<SpawnRequest>>,
    /// `--sandbox`: the confined spawner of the node host.
    sandboxed_spawner: Option<Sender<SpawnRequest>>,
    /// The node host's program, written at start (removed when pith ends).
    node_dir: Option<tempfile::TempDir>,
    /// pith must not go on: a configured pi extension cannot run (the message for stderr).
    pub refused: Option<String>,
    /// pith must not go on, as pi stops at start-up (the message for stderr; exit as for an
    /// unknown model at start): the `--model` left for the extensions is still unknown once they
    /// have loaded, or a pi extension failed to load, or a flag is none of theirs.
    pub startup_failed: Option<String>,
    /// An extension's `ctx.shutdown()`: pith exits as at the end of input once idle.
    pub shutdown_requested: bool,
    /// `ctx.waitForIdle()` calls to answer once idle (extension, call id).
    pub idle_waiters: Vec<(usize, Value)>,
    /// Counts changes to the models (extensions' providers), told to the node host in its state.
    pub models_generation: u64,
    /// Model commands (`get_available_models`, `set_model`, `cycle_model`) received while the
    /// node host loads pi's extensions (they may register providers): id, type, command.
    pub waiting_models: Vec<(Option<Value>, String, crate::rpc::command::Command)>,
}

impl Plugins {
    /// The node the TypeScript extensions' host runs on (empty when there is none), for the
    /// refusal that names it.
    pub fn node_path(&self) -> std::path::PathBuf {
        self.cfg
            .node_host
            .as_ref()
            .map(|s| s.node.path.clone())
            .unwrap_or_default()
    }

    pub fn new(cfg: PluginConfig) -> Plugins {
        Plugins {
            cfg,
            next_id: 1,
            ..Plugins::default()
        }
    }

    /// Any extension or server configured (else every hook is a no-op).
    pub fn active(&self) -> bool {
        !self.exts.is_empty()
            || !self.servers.is_empty()
            || !self.cfg.confirm_tools.is_none()
            || self.cfg.permissions.is_some()
    }

    pub fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// An extension, or a server whose tools a prompt declares, is still starting.
    pub fn starting(&self) -> bool {
        self.exts
            .iter()
            .any(|e| matches!(e.life, Life::Starting(_)))
            || (!self.mcp_waited
                && self
                    .servers
                    .iter()
                    .any(|s| s.blocks_prompt && matches!(s.life, Life::Starting(_))))
    }

    /// Any MCP server still starting.
    pub fn servers_starting(&self) -> bool {
        self.servers
            .iter()
            .any(|s| matches!(s.life, Life::Starting(_)))
    }

    /// Work the process must finish before it may exit at end of input: a prompt waiting for
    /// start-up, extension commands and session operations in flight, and the node host still
    /// loading pi's extensions (a node too old says so only then, and pith must exit 2).
    pub fn busy(&self) -> bool {
        self.prompt_waits_startup
            || self.node_host_starting()
            || !self.waiting_commands.is_empty()
            || !self.waiting_models.is_empty()
            || !self.ops.is_empty()
            || !self.inputs.is_empty()
            || self.before_start.is_some()
            || self.exts.iter().any(|e| {
                e.calls
                    .values()
                    .any(|c| matches!(c.kind, CallKind::Command { .. }))
            })
    }

    /// The node host has not registered yet (nor failed).
    pub fn node_host_starting(&self) -> bool {
        self.exts
            .iter()
            .any(|e| e.node_host && matches!(e.life, Life::Starting(_)))
    }

    /// Ready extensions subscribed to `event`, in load order.
    pub fn subscribers(&self, event: &str) -> VecDeque<usize> {
        (0..self.exts.len())
            .filter(|i| self.exts[*i].wants(event))
            .collect()
    }

    /// The tools of ready extensions and servers declared to the model, in load order; a name
    /// already taken is skipped (first wins). Under pi's MCP client a server tool is declared
    /// when its exposure is `direct`, or when it is `codemode`/`deferred` and `loaded` (by
    /// `tool_search`, on this branch).
    pub fn remote_tools(&self, loaded: &dyn Fn(&str) -> bool) -> Vec<RemoteTool> {
        let mut out: Vec<RemoteTool> = Vec::new();
        // Names already taken (a set: a server may offer thousands of tools, and this runs
        // several times per turn).
        let mut taken: std::collections::HashSet<&str> = Default::default();
        for (i, e) in self.exts.iter().enumerate().filter(|(_, e)| e.ready()) {
            for t in &e.tools {
                if !taken.insert(&t.name) {
                    continue;
                }
                out.push(RemoteTool {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    parameters: t.parameters.clone(),
                    snippet: t.prompt_snippet.clone(),
                    guidelines: t.prompt_guidelines.clone(),
                    owner: Owner::Ext(i),
                });
            }
        }
        for (i, name, t, exposure) in self.mcp_entries() {
            if declared(exposure, || loaded(name)) && taken.insert(name) {
                out.push(mcp_remote(i, name, t));
            }
        }
        if self.cfg.mcp_dialect == McpDialect::Pi {
            for (t, e) in crate::core::mcp_resources::tools_for(&self.servers) {
                if declared(e, || loaded(&t.name))
                    && self.cfg.mcp_filter.allows(&t.name)
                    && !taken.contains(t.name.as_str())
                {
                    out.push(t);
                }
            }
        }
        out
    }

    /// The tools of the ready MCP servers that `--tools` / `--exclude-tools` leave: server
    /// number, agent name, the server's tool, its exposure (the settings format's are all
    /// `direct`), in server order.
    fn mcp_entries(&self) -> impl Iterator<Item = (usize, &String, &McpTool, Exposure)> + '_ {
        self.servers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.life == Life::Ready)
            .flat_map(move |(i, s)| {
                s.tools
                    .iter()
                    .filter(|(name, _)| self.cfg.mcp_filter.allows(name))
                    .map(move |(name, t)| {
                        let exposure = match self.cfg.mcp_dialect {
                            McpDialect::Pith => Exposure::Direct,
                            McpDialect::Pi => s.cfg.exposure_of(&t.name),
                        };
                        (i, name, t, exposure)
                    })
            })
    }

    /// Every tool of the ready MCP servers as a remote tool, with its exposure, then (pi's
    /// client) the resource tools.
    pub fn mcp_tools(&self) -> Vec<(RemoteTool, Exposure)> {
        let mut out: Vec<(RemoteTool, Exposure)> = self
            .mcp_entries()
            .map(|(i, name, t, e)| (mcp_remote(i, name, t), e))
            .collect();
        if self.cfg.mcp_dialect == McpDialect::Pi {
            out.extend(
                crate::core::mcp_resources::tools_for(&self.servers)
                    .into_iter()
                    .filter(|(t, _)| self.cfg.mcp_filter.allows(&t.name)),
            );
        }
        out
    }

    /// The earliest deadline of anything waiting.
    fn next_deadline(&self) -> Option<Instant> {
        if !self.failures.is_empty() {
            return Some(Instant::now());
        }
        let mut best: Option<Instant> = None;
        let mut take = |t: Instant| {
            if best.is_none_or(|b| t < b) {
                best = Some(t);
            }
        };
        for e in &self.exts {
            if let Life::Starting(t) = e.life {
                take(t);
            }
            if e.dialogs_open == 0 {
                for c in e.calls.values() {
                    take(c.deadline);
                }
            }
        }
        for s in &self.servers {
            for (_, t) in s.requests.values() {
                take(*t);
            }
        }
        for d in self.dialogs.values() {
            if let Some(t) = d.deadline {
                take(t);
            }
        }
        if let Some(t) = self.mcp_wait_until {
            take(t);
        }
        best
    }

    /// A channel that delivers when the earliest deadline passes (never, if there is none).
    pub fn timer(&mut self) -> Receiver<Instant> {
        if !self.active() {
            return crossbeam_channel::never();
        }
        match self.next_deadline() {
            None => {
                self.timer = None;
                crossbeam_channel::never()
            }
            Some(t) => match &self.timer {
                Some((at, rx)) if *at == t => rx.clone(),
                _ => {
                    let rx = crossbeam_channel::at(t);
                    self.timer = Some((t, rx.clone()));
                    rx
                }
            },
        }
    }
}

/// A random UUID v4 for `extension_ui_request` ids (pi uses `crypto.randomUUID()`).
pub fn uuid_v4() -> String {
    let mut b = [0u8; 16];
    crate::session::ids::random_bytes(&mut b);
    b[6] = 0x40 | (b[6] & 0x0f);
    b[8] = 0x80 | (b[8] & 0x3f);
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

impl Machine {
    /// Start every configured extension and MCP server. Spawning is quick (fork + exec); the
    /// handshakes happen in the background, as their lines arrive.
    pub(crate) fn start_plugins(&mut self) {
        self.warn_unreachable_mcp_tools();
        if self.plugins.cfg.extensions.is_empty() && self.plugins.cfg.mcp.is_empty() {
            self.mcp_report_problems();
            return;
        }
        self.plugins.spawner = spawn_spawner(self.io.worker_tx.clone(), None);
        let entries = self.plugins.cfg.extensions.clone();
        let pi: Vec<ExtEntry> = entries
            .iter()
            .filter(|e| e.kind == crate::ext::load::Kind::Node)
            .cloned()
            .collect();
        for entry in entries {
            match entry.kind {
                crate::ext::load::Kind::Exec => self.start_extension(entry),
                // One host for all of pi's extensions, where the first of them loads.
                crate::ext::load::Kind::Node if entry == pi[0] => self.start_node_host(&pi),
                crate::ext::load::Kind::Node => {}
            }
        }
        let servers = self.plugins.cfg.mcp.clone();
        for cfg in servers {
            self.start_mcp_server(cfg);
        }
    }

    /// pi 1.6.0: servers with `codemode` or `deferred` tools but neither `codemode` nor
    /// `tool_search` active: one warning that those tools cannot be called.
    fn warn_unreachable_mcp_tools(&mut self) {
        if self.plugins.cfg.mcp_dialect != McpDialect::Pi {
            return;
        }
        let enabled = || self.plugins.cfg.mcp.iter().filter(|s| s.enabled);
        let needs_codemode =
            enabled().any(|s| s.configured_exposures().any(|e| e == Exposure::Codemode));
        let needs_search =
            enabled().any(|s| s.configured_exposures().any(|e| e == Exposure::Deferred));
        if !needs_codemode && !needs_search {
            return;
        }
        let active = |n: &str| self.env.tools.iter().any(|t| t.name() == n);
        if active("codemode") || active(crate::tools::tool_search::NAME) {
            return;
        }
        let codemode_exists = self.profile.tools.codemode
            && !self
                .plugins
                .cfg
                .builtins_off
                .iter()
                .any(|b| b == "codemode");
        let reason = if needs_codemode && codemode_exists && !self.plugins.cfg.auto_enable_codemode
        {
            " (autoEnableCodemode is false)"
        } else {
            ""
        };
        self.notify_host(
            format!("MCP tools are only reachable from the codemode or tool_search tool, but neither is active{reason}; they cannot be called."),
            "warning",
        );
    }

    fn start_extension(&mut self, entry: ExtEntry) {
        let spec = child::Spec {
            program: entry.path.clone(),
            args: Vec::new(),
            env: vec![("PITH_EXTENSION_PROTOCOL".into(), "1".into())],
            inherit_env: true,
            cwd: self.env.cwd.clone(),
            capture_stderr: false,
        };
        self.start_ext_process(entry, spec, false);
    }

    /// The node host of pi's extensions `pi` (in load order): its program written to a private
    /// temporary directory, then started like any extension. Its `extensionPath` is the
    /// extension's when there is one (each extension's own failures name it anyway).
    fn start_node_host(&mut self, pi: &[ExtEntry]) {
        let Some(setup) = self.plugins.cfg.node_host.clone() else {
            return;
        };
        let program = tempfile::Builder::new()
            .prefix("pith-node-host-")
            .tempdir()
            .and_then(|dir| {
                let p = crate::ext::node_host::write_program(dir.path())?;
                self.plugins.node_dir = Some(dir);
                Ok(p)
            });
        let paths: Vec<String> = pi
            .iter()
            .map(|e| e.path.to_string_lossy().into_owned())
            .collect();
        let program = match program {
            Ok(p) => p,
            Err(e) => {
                let path = paths.join(", ");
                self.extension_error(
                    &path,
                    "startup",
                    &format!("cannot write the node host program: {e}"),
                );
                return;
            }
        };
        // The host gives up on a handler at the timeout, before pith would give up on the host
        // ([`NODE_HOST_GRACE`] later), so a hung extension is dropped alone.
        let timeout_ms = self.plugins.cfg.ext_timeout.as_millis() as u64;
        let mut env: Vec<(String, String)> = Vec::new();
        let sandbox = self.env.sandbox.clone();
        if let Some(sb) = &sandbox {
            // Confined like the bash tool: its environment without secret-looking variables.
            let mut all: Vec<(String, Option<String>)> =
                std::env::vars().map(|(k, v)| (k, Some(v))).collect();
            sb.filter_env(&mut all);
            env.extend(all.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))));
        }
        env.extend([
            ("PITH_EXTENSION_PROTOCOL".into(), "1".into()),
            (
                "PITH_NODE_HOST_EXTENSIONS".into(),
                serde_json::to_string(&paths).unwrap_or_default(),
            ),
            (
                "PITH_PROJECT_TRUSTED".into(),
                if setup.project_trusted { "1" } else { "0" }.into(),
            ),
            ("PITH_NODE_HOST_TIMEOUT_MS".into(), timeout_ms.to_string()),
            (
                "PITH_NODE_HOST_FLAGS".into(),
                serde_json::to_string(&self.plugins.cfg.extension_flags).unwrap_or_default(),
            ),
        ]);
        let spec = child::Spec {
            program: setup.node.path.clone(),
            args: crate::ext::node_host::node_args(&program),
            env,
            inherit_env: sandbox.is_none(),
            cwd: self.env.cwd.clone(),
            capture_stderr: false,
        };
        let mut entry = pi[0].clone();
        if pi.len() > 1 {
            entry.path = program.clone();
        }
        if sandbox.is_some() && self.plugins.sandboxed_spawner.is_none() {
            self.plugins.sandboxed_spawner = spawn_spawner(self.io.worker_tx.clone(), sandbox);
        }
        self.start_ext_process(entry, spec, true);
    }

    fn start_ext_process(&mut self, entry: ExtEntry, spec: child::Spec, node_host: bool) {
        let index = self.plugins.exts.len();
        let path = entry.path.to_string_lossy().to_string();
        let name = entry
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| path.clone());
        // The node host times out each extension's loading itself; it gets a little longer.
        let grace = if node_host {
            NODE_HOST_GRACE
        } else {
            Duration::ZERO
        };
        let deadline = Instant::now() + self.plugins.cfg.ext_timeout + grace;
        self.plugins.exts.push(Ext {
            entry,
            path,
            name,
            handle: None,
            life: Life::Starting(deadline),
            tools: Vec::new(),
            commands: Vec::new(),
            events: Vec::new(),
            calls: HashMap::new(),
            dialogs_open: 0,
            node_host,
            last_state: None,
        });
        self.spawn_child(SpawnRequest {
            target: Target::Ext(index),
            spec,
            limits: EXT_LIMITS,
        });
    }

    /// Hand a process to the spawner thread (or start it here if there is none).
    pub(crate) fn spawn_child(&mut self, req: SpawnRequest) {
        let confined = self.env.sandbox.is_some()
            && matches!(req.target, Target::Ext(i) if self.plugins.exts.get(i).is_some_and(|e| e.node_host));
        if confined {
            // Never started unconfined: without its spawner it fails.
            match &self.plugins.sandboxed_spawner {
                Some(tx) => {
                    if let Err(e) = tx.send(req) {
                        let req = e.into_inner();
                        self.on_spawned(req.target, Err("the sandboxed spawner is gone".into()));
                    }
                }
                None => self.on_spawned(
                    req.target,
                    Err("the sandboxed spawner could not start".into()),
                ),
            }
            return;
        }
        if let Some(tx) = &self.plugins.spawner {
            if let Err(e) = tx.send(req) {
                let req = e.into_inner();
                let result = spawn_now(&req, &self.io.worker_tx);
                self.on_spawned(req.target, result);
            }
            return;
        }
        let result = spawn_now(&req, &self.io.worker_tx);
        self.on_spawned(req.target, result);
    }

    /// A process started (or could not): the extension gets `hello`, the MCP server
    /// `initialize`.
    pub(crate) fn on_spawned(&mut self, target: Target, result: Result<ChildHandle, String>) {
        match (target, result) {
            (Target::Ext(i), Ok(h)) => {
                if self.plugins.stopping || self.plugins.exts[i].life == Life::Dead {
                    h.signal(child::SIGKILL);
                    return;
                }
                self.plugins.exts[i].handle = Some(h);
                self.ext_hello(i);
            }
            (Target::Ext(i), Err(e)) if self.plugins.exts[i].node_host => {
                let node = self.plugins.node_path();
                self.plugins.exts[i].life = Life::Dead;
                self.refuse_node(crate::ext::node_host::NodeProblem::Broken {
                    path: node,
                    error: e,
                });
            }
            (Target::Ext(i), Err(e)) => {
                let ext = &mut self.plugins.exts[i];
                if ext.life != Life::Dead {
                    ext.life = Life::Dead;
                    let path = ext.path.clone();
                    self.extension_error(&path, "startup", &e);
                }
            }
            (Target::Mcp(i), Ok(h)) => {
                if self.plugins.stopping || self.plugins.servers[i].life == Life::Dead {
                    h.signal(child::SIGKILL);
                    return;
                }
                self.plugins.servers[i].handle = Some(Conn::Child(h));
                self.mcp_initialize(i);
            }
            (Target::Mcp(i), Err(e)) => self.fail_server(i, "startup", &e),
        }
        self.check_startup_done();
    }

    fn ext_hello(&mut self, index: usize) {
        if self.plugins.exts[index].node_host {
            // pi's `getSettings()`: the effective settings (global, and the project's when
            // trusted), as pi's settings manager merged them.
            let line = crate::ext::protocol::settings_line(self.env.settings.raw());
            self.ext_write(index, line);
        }
        let session = match self.state.session.file() {
            Some(f) => json!({"id": self.state.session_id, "file": f.to_string_lossy()}),
            None => json!({"id": self.state.session_id}),
        };
        let hello = crate::ext::protocol::hello(
            env!("CARGO_PKG_VERSION"),
            &self.env.cwd.to_string_lossy(),
            self.plugins.cfg.mode,
            self.profile.version.as_str(),
            &session,
        );
        self.ext_write(index, hello);
    }

    /// Queue a line for extension `i`. A full queue means it does not read its input: it is
    /// isolated at the next timer tick (not here: writes happen in the middle of other work).
    pub(crate) fn ext_write(&mut self, i: usize, line: Vec<u8>) -> bool {
        if self.plugins.exts.get(i).is_some_and(|e| e.node_host) {
            let state = self.node_host_state();
            if self.plugins.exts[i].last_state.as_ref() != Some(&state) {
                let l = crate::ext::protocol::state(&state);
                self.plugins.exts[i].last_state = Some(state);
                self.ext_write_line(i, l);
            }
        }
        self.ext_write_line(i, line)
    }

    fn ext_write_line(&mut self, i: usize, line: Vec<u8>) -> bool {
        let Some(h) = self.plugins.exts.get(i).and_then(|e| e.handle.as_ref()) else {
            return false;
        };
        match h.write(line) {
            Ok(()) => true,
            Err(child::WriteError::Full) => {
                self.plugins.failures.push((
                    i,
                    "protocol".into(),
                    format!(
                        "does not read its input ({} messages or {} MiB queued)",
                        EXT_LIMITS.write_queue,
                        EXT_LIMITS.write_queue_bytes >> 20
                    ),
                ));
                false
            }
            Err(child::WriteError::Closed) => false,
        }
    }

    /// The node host cannot run pi's extensions: pith stops before any run (exit 2).
    pub(crate) fn refuse_node(&mut self, problem: crate::ext::node_host::NodeProblem) {
        let pi: Vec<std::path::PathBuf> = self
            .plugins
            .cfg
            .extensions
            .iter()
            .filter(|e| e.kind == crate::ext::load::Kind::Node)
            .map(|e| e.path.clone())
            .collect();
        self.plugins.refused = Some(crate::ext::node_host::refusal(&problem, &pi));
        self.drop_pending_prompt("Prompt cancelled: a pi extension cannot run");
    }

    /// The `extension_error` event (also logged to stderr).
    pub(crate) fn extension_error(&mut self, path: &str, event: &str, error: &str) {
        eprintln!("pith: extension {path}: {event}: {error}");
        let frame = json!({
            "type": "extension_error",
            "extensionPath": path,
            "event": event,
            "error": error,
        });
        self.send(response::line(&frame));
    }

    /// Deadlines passed: isolate hung extensions, time out dialogs and MCP requests.
    pub(crate) fn on_plugin_timer(&mut self) {
        for (i, event, error) in std::mem::take(&mut self.plugins.failures) {
            self.isolate(i, &event, &error);
        }
        let now = Instant::now();
        if self.plugins.mcp_wait_until.is_some_and(|t| t <= now) {
            // pi 1.6.0: the first prompt waits 10 s for servers with direct tools, then goes on.
            self.plugins.mcp_wait_until = None;
            self.plugins.mcp_waited = true;
            if self.plugins.prompt_waits_startup {
                self.notify_host(
                    "MCP servers are still connecting; their tools become available once connected."
                        .to_string(),
                    "info",
                );
            }
        }
        let timeout = self.plugins.cfg.ext_timeout.as_secs();
        for i in 0..self.plugins.exts.len() {
            let e = &self.plugins.exts[i];
            if let Life::Starting(t) = e.life {
                if t <= now {
                    self.isolate(
                        i,
                        "startup",
                        &format!("did not register within {timeout} seconds"),
                    );
                    continue;
                }
            }
            if e.dialogs_open > 0 {
                continue;
            }
            let late: Option<(String, u64)> = e
                .calls
                .values()
                .filter(|c| c.deadline <= now)
                .map(|c| (c.event.clone(), c.timeout.as_secs()))
                .next();
            if let Some((event, secs)) = late {
                self.isolate(
                    i,
                    &event,
                    &format!("did not answer {event} within {secs} seconds"),
                );
            }
        }
        let expired: Vec<String> = self
            .plugins
            .dialogs
            .iter()
            .filter(|(_, d)| d.deadline.is_some_and(|t| t <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.resolve_dialog(&id, crate::ext::ui::Answer::TimedOut);
        }
        self.mcp_timeouts(now);
        self.check_startup_done();
    }

    /// Once nothing is starting any more, a prompt that waited for start-up runs.
    pub(crate) fn check_startup_done(&mut self) {
        let exts_starting = self
            .plugins
            .exts
            .iter()
            .any(|e| matches!(e.life, Life::Starting(_)));
        if !exts_starting && !self.plugins.waiting_commands.is_empty() {
            for id in std::mem::take(&mut self.plugins.waiting_commands) {
                let data = self.get_commands_data();
                self.send(response::success(id.as_ref(), "get_commands", Some(&data)));
            }
        }
        self.mcp_report_problems();
        if !exts_starting && self.plugins.cfg.deferred_model.is_some() {
            self.resolve_deferred_model();
        }
        if !exts_starting && !self.plugins.waiting_models.is_empty() {
            for (id, ty, cmd) in std::mem::take(&mut self.plugins.waiting_models) {
                let line = match self.handle_command(cmd, id.as_ref()) {
                    crate::core::machine::Reply::Now(data) => {
                        response::success(id.as_ref(), &ty, data.as_ref())
                    }
                    crate::core::machine::Reply::Fail(msg) => {
                        response::error(id.as_ref(), Some(&ty), &msg)
                    }
                    crate::core::machine::Reply::Later => continue,
                };
                self.send(line);
            }
        }
        if self.plugins.tools_wait_servers.is_some() && !self.plugins.servers_starting() {
            self.plugins.tools_wait_servers = None;
            self.spawn_runnable();
        }
        if self.plugins.prompt_waits_startup && !self.plugins.starting() {
            self.plugins.prompt_waits_startup = false;
            if self.plugins.cfg.mcp_dialect == McpDialect::Pi {
                self.plugins.mcp_waited = true;
                self.plugins.mcp_wait_until = None;
            }
            self.run_pending_prompt();
        }
    }

    /// The start-up `--provider` / `--model` resolved now that the extensions have registered
    /// their providers: the session's model, as if the CLI had found it; still unknown, pith
    /// stops with the error start-up would have given.
    fn resolve_deferred_model(&mut self) {
        let Some(d) = self.plugins.cfg.deferred_model.take() else {
            return;
        };
        let (model, level) = match &d.wanted {
            crate::core::plugins::Wanted::Cli { provider, pattern } => {
                let (registry, auth) = (&self.env.registry, &self.env.auth);
                let usable = |p: &str| registry.has_configured_auth(p, auth);
                let cx = crate::llm::models::resolve::CliContext {
                    usable: &usable,
                    inline_key: d.api_key.is_some(),
                    thinking: d.level,
                };
                match crate::llm::models::resolve_cli_model(
                    registry,
                    provider.as_deref(),
                    pattern,
                    &cx,
                ) {
                    Ok((model, level, warning)) => {
                        if let Some(w) = warning {
                            eprintln!("Warning: {w}");
                        }
                        if let Some(key) = &d.api_key {
                            self.env.auth.set_runtime_key(&model.provider, key);
                        }
                        let level = d.level.or(level);
                        self.state.defaults.cli_model = Some(model.clone());
                        self.state.defaults.cli_level = level;
                        (model, level)
                    }
                    Err(e) => {
                        self.plugins.startup_failed = Some(format!("Error: {e}"));
                        self.drop_pending_prompt("Prompt cancelled: the model is unknown");
                        return;
                    }
                }
            }
            // A resumed session's model, else what start-up falls back to.
            crate::core::plugins::Wanted::Session { provider, id } => {
                let found = self
                    .env
                    .registry
                    .lookup(provider, id)
                    .filter(|m| self.env.auth.has_auth(&m.provider));
                match found.or_else(|| {
                    self.state
                        .defaults
                        .initial(&self.env.registry, &self.env.auth)
                }) {
                    Some(m) => (m, d.level),
                    None => return,
                }
            }
        };
        // As start-up picks the level (`app::pick_thinking`), nothing announced.
        let session = &mut self.state.session;
        let settings = &self.env.settings;
        let model_setting = self.profile.agent.thinking_on_model_change
            == crate::protocol::ThinkingOnModelChange::ModelSetting;
        let wanted = level
            .or(if d.resumed {
                session.thinking_level()
            } else {
                None
            })
            .or(if model_setting {
                settings.model_thinking_level(&model.provider, &model.id)
            } else {
                None
            })
            .or(settings.default_thinking_level())
            .unwrap_or(crate::message::ThinkingLevel::Medium);
        let thinking = if model.reasoning {
            crate::llm::clamp_thinking(&self.env.registry.thinking_levels(&model), wanted)
        } else {
            crate::message::ThinkingLevel::Off
        };
        if !d.resumed {
            session.append_model_change(&model.provider, &model.id);
            session.append_thinking_level_change(thinking);
        } else if session.thinking_level().is_none() {
            session.append_thinking_level_change(thinking);
        }
        self.state.model = Some(model);
        self.state.thinking = thinking;
    }

    /// pith is exiting: `session_shutdown` to subscribers, stdin closed, a short wait for the
    /// processes to exit, then their process groups are killed.
    pub(crate) fn stop_plugins(&mut self, quick: bool) {
        if self.plugins.exts.is_empty() && self.plugins.servers.is_empty() {
            return;
        }
        self.plugins.stopping = true;
        let ev = json!({"type": "session_shutdown", "reason": "quit"});
        for i in self.plugins.subscribers("session_shutdown") {
            self.ext_write(i, crate::ext::protocol::event(None, &ev));
        }
        let mut live = 0;
        for e in &mut self.plugins.exts {
            if let Some(h) = e.handle.as_mut() {
                h.close_input();
                live += 1;
            }
        }
        for s in &mut self.plugins.servers {
            if let Some(h) = s.handle.as_mut() {
                h.close();
                live += 1;
            }
        }
        let grace = Duration::from_millis(if quick { 100 } else { 500 });
        let deadline = Instant::now() + grace;
        while live > 0 {
            match self.worker_rx_timeout(deadline) {
                Some(Worker::Ext {
                    event: child::ChildEvent::Exited { .. },
                    ..
                })
                | Some(Worker::Mcp {
                    event: child::ChildEvent::Exited { .. },
                    ..
                }) => live -= 1,
                Some(Worker::Spawned { result: Ok(h), .. }) => h.signal(child::SIGKILL),
                Some(_) => {}
                None => break,
            }
        }
        let pids: Vec<i32> = self
            .plugins
            .exts
            .iter()
            .filter_map(|e| e.handle.as_ref().map(|h| h.pid))
            .chain(
                self.plugins
                    .servers
                    .iter()
                    .filter_map(|s| s.handle.as_ref().and_then(Conn::pid)),
            )
            .collect();
        for pid in &pids {
            child::signal_group(*pid, child::SIGTERM);
        }
        if live > 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        for pid in &pids {
            child::signal_group(*pid, child::SIGKILL);
        }
        // The spawner thread ends; anything it started late dies with it (parent-death signal).
        self.plugins.spawner = None;
    }
}
