//! The state machine: one thread, one `select!`, one [`Machine::handle_event`]. It owns the
//! session, the queues, the settings and every piece of mutable state; the threads around it only
//! send [`Event`]s. Handlers never block on I/O other than handing a finished frame to the
//! stdout writer's bounded channel (back-pressure from a slow host).

use std::path::PathBuf;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, select};
use serde_json::{Map, Value, json};

use crate::config::Settings;
use crate::core::agent::Run;
use crate::core::event::{Event, Worker};
use crate::io::stdin::Input;
use crate::io::watch::Control;
use crate::llm::Model;
use crate::llm::models::{Auth, Registry};
use crate::message::{
    AgentMessage, AssistantMessage, Context, ThinkingLevel, UserContent, UserMessage, now_ms,
};
use crate::protocol::{AbortAnswer, EofPolicy, Profile, ThinkingOnModelChange, Version};
use crate::queues::{Queue, Queued};
use crate::rpc::command::{
    self, Command, DecodeError, InterruptMode, StreamingBehavior, UserInput,
};
use crate::rpc::event::{Event as Frame, Partials};
use crate::rpc::response;
use crate::session::{Session, WriteNotice};
use crate::tools::Tool;

/// Everything the machine starts with (resolved by `app` from the CLI, config and registry).
pub struct Startup {
    pub cwd: PathBuf,
    pub agent_dir: PathBuf,
    pub settings: Settings,
    pub registry: Registry,
    pub auth: Auth,
    pub model: Option<Model>,
    pub thinking: ThinkingLevel,
    /// What `--compat 0.87` applies again to every session it switches to.
    pub defaults: SessionDefaults,
    /// `--models` (or settings `enabledModels`) resolved: models for `cycle_model`.
    pub scoped_models: Vec<(Model, Option<ThinkingLevel>)>,
    pub session: Session,
    pub tools: Vec<Arc<dyn Tool>>,
    pub custom_system_prompt: Option<String>,
    pub append_system_prompt: Option<String>,
    /// `--no-context-files`.
    pub no_context_files: bool,
    pub faux_script: Option<PathBuf>,
    pub partials: Partials,
    /// The pi protocol version pith emits.
    pub compat: Version,
    /// Skills and prompt templates (read on first use).
    pub resources: crate::resources::LazyResources,
    /// Extensions, MCP servers, `--confirm-tools` (`core/plugins.rs`).
    pub plugins: crate::core::plugins::PluginConfig,
    /// `--sandbox` (src/sandbox.rs): entered first by every tool thread. `None`: no sandbox.
    pub sandbox: Option<Arc<crate::sandbox::Sandbox>>,
    /// Run limits of every prompt: settings `pith.limits`, overridden by the flags.
    pub limits: crate::limits::Limits,
    /// `--heartbeat` / `--heartbeat-file`.
    pub heartbeat: Option<Heartbeat>,
    /// `--output-schema`: every prompt's final answer matches it (`output_schema.rs`).
    pub output_schema: Option<crate::output_schema::OutputSchema>,
}

/// `--heartbeat SECONDS` / `--heartbeat-file PATH`: how often, and a file to touch instead of
/// the `heartbeat` event.
#[derive(Clone, Debug)]
pub struct Heartbeat {
    pub every: std::time::Duration,
    pub file: Option<PathBuf>,
}

/// The choices pi 0.87.1 applies again whenever it builds the runtime of a session (it does so
/// for `new_session`, `switch_session`, `fork` and `clone`): the CLI's model and thinking level
/// (also a `--model pattern:level`), the scoped models' pick, and the first model otherwise.
#[derive(Clone, Debug, Default)]
pub struct SessionDefaults {
    pub cli_model: Option<Model>,
    pub cli_level: Option<ThinkingLevel>,
    /// The scoped model a session without messages starts with, and its level.
    pub scoped: Option<(Model, Option<ThinkingLevel>)>,
    /// The settings' default model (provider, id) at start-up, for [`SessionDefaults::initial`].
    pub settings_default: Option<(String, String)>,
    /// The settings' default model, else the first one with a key: found on first need (finding
    /// the first model with a key can build the whole registry, which a start with `--model`
    /// never needs). Registry, auth and `settings_default` do not change after start-up, so this
    /// is what start-up would have found.
    pub initial: std::cell::OnceCell<Option<Model>>,
}

impl SessionDefaults {
    pub fn initial(
        &self,
        registry: &crate::llm::models::Registry,
        auth: &crate::llm::models::Auth,
    ) -> Option<Model> {
        self.initial
            .get_or_init(|| {
                let default = self.settings_default.as_ref();
                crate::llm::models::initial_model(
                    registry,
                    auth,
                    default.map(|(p, i)| (p.as_str(), i.as_str())),
                )
            })
            .clone()
    }
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
    /// A configured pi extension cannot run (its node is too old or cannot start): exit 2.
    Refused,
    /// Start-up failed once the extensions had loaded (the start-up model is still unknown, an
    /// extension failed to load, a flag is none of theirs): exit 1 in RPC mode, 2 otherwise (as
    /// when start-up finds no such model).
    StartupFailed { rpc: bool },
}

impl Exit {
    pub fn code(&self) -> i32 {
        match self {
            Exit::InputClosed | Exit::ClientGone => 0,
            Exit::Signal(s) => 128 + s,
            Exit::Refused => 2,
            Exit::StartupFailed { rpc } => {
                if *rpc {
                    1
                } else {
                    2
                }
            }
        }
    }
}

pub struct Machine {
    /// The edges: channels, and what the machine knows of its host.
    pub(crate) io: Io,
    /// The environment a session runs in: directories, settings, models, credentials, tools, resources.
    pub(crate) env: Env,
    /// The current session: its file, context, model and thinking level.
    pub(crate) state: SessionState,
    /// Steering and follow-up messages waiting for the run.
    pub(crate) queues: Queues,
    /// Run limits (`--max-*`, `--deadline`) and what the current run has used.
    pub(crate) limits: RunLimits,
    /// The behaviours of the protocol version pith speaks.
    pub(crate) profile: &'static Profile,

    /// The agent run in progress, if any.
    pub(crate) run: Option<Run>,
    /// The RPC `bash` commands (`core/bash.rs`).
    pub(crate) bash: crate::core::bash::BashJobs,
    /// The `export_html` renders in flight (`core/export.rs`).
    pub(crate) exports: crate::core::export::Exports,
    /// Auto-retry, summary retries and the pause before continuing (`core/retry.rs`).
    pub(crate) retry: crate::core::retry::RetryState,
    /// `abort_and_prompt` waiting for the aborted run to end.
    pub(crate) pending_prompt: Option<(UserInput, Option<Value>, &'static str)>,
    /// Session switches (`new_session`, `switch_session`, `fork`, `clone`) that wait for a run
    /// whose tools were running to end aborted (`agent.replace_aborts_run`), in arrival order.
    pub(crate) pending_replace: Vec<(Command, Option<Value>)>,
    /// `abort` arrived while a run (its retries, its compaction) was going on: the next
    /// `agent_settled` says so (`events.settled_aborted`). Cleared when a run starts.
    pub(crate) abort_requested: bool,
    /// The compaction in flight.
    pub(crate) compaction: Option<crate::core::compaction::Compaction>,
    /// An overflow recovery ran since the last user message / successful reply.
    pub(crate) overflow_recovery_attempted: bool,
    /// Generation of the latest LLM stream (late events of older ones are ignored).
    pub(crate) generation: u64,
    /// Number of the latest tool batch.
    pub(crate) batch: u64,
    /// Extensions, MCP servers, dialogs and tool gates (`core/plugins.rs`).
    pub(crate) plugins: crate::core::plugins::Plugins,
    /// pi's MCP resource tool calls waiting for their servers.
    pub(crate) resource_ops: crate::core::mcp_resources::ResourceOps,
    /// When the machine started (`ping`'s `uptimeMs`).
    born: std::time::Instant,
    pub(crate) heartbeat: Option<Heartbeat>,
    /// The armed heartbeat timer: its number and cancel handle.
    pub(crate) heartbeat_timer: Option<(u64, crate::cancel::CancelSource)>,
    pub(crate) heartbeat_seq: u64,
    /// `codemode` scripts and their workers (`core/codemode.rs`).
    pub(crate) scripts: crate::core::codemode::Scripts,
}

/// The edges: channels, and what the machine knows of its host.
pub(crate) struct Io {
    pub(crate) stdout: Sender<Vec<u8>>,
    pub(crate) input_rx: Receiver<Input>,
    pub(crate) control_rx: Receiver<Control>,
    pub(crate) worker_rx: Receiver<Worker>,
    pub(crate) client_gone: bool,
    /// `--compat 0.87` after stdin ended: nothing more is written (frames are dropped; what was
    /// queued before is still flushed).
    pub(crate) muted: bool,
    pub(crate) input_closed: bool,
    pub(crate) worker_tx: Sender<Worker>,
    /// A signal arrived while a frame was waiting for the stdout queue: exit as soon as possible.
    pub(crate) exit_signal: Option<i32>,
    /// Starts the threads the first answer does not need, and when ([`Machine::with_late_start`]).
    pub(crate) late_start: Option<(Box<dyn FnOnce() + Send>, std::time::Instant)>,
}

/// The environment a session runs in: directories, settings, models, credentials, tools, resources.
pub(crate) struct Env {
    pub(crate) cwd: PathBuf,
    pub(crate) agent_dir: PathBuf,
    pub(crate) settings: Settings,
    pub(crate) partials: Partials,
    pub(crate) registry: Registry,
    pub(crate) auth: Auth,
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    pub(crate) custom_system_prompt: Option<String>,
    pub(crate) append_system_prompt: Option<String>,
    pub(crate) no_context_files: bool,
    pub(crate) faux_script: Option<PathBuf>,
    pub(crate) resources: crate::resources::LazyResources,
    /// See [`Startup::sandbox`].
    pub(crate) sandbox: Option<Arc<crate::sandbox::Sandbox>>,
}

/// The current session: its file, context, model and thinking level.
pub(crate) struct SessionState {
    /// `--compat 0.87`: the rendered system prompt of the last declared sections.
    pub(crate) prompt_cache: crate::prompt::sections::PromptCache,
    /// `--compat 0.87`: the context files, read once per session runtime.
    pub(crate) session_context_files: Option<Vec<(PathBuf, String)>>,
    pub(crate) model: Option<Model>,
    pub(crate) thinking: ThinkingLevel,
    /// See [`Startup::defaults`].
    pub(crate) defaults: SessionDefaults,
    pub(crate) scoped_models: Vec<(Model, Option<ThinkingLevel>)>,
    pub(crate) auto_compaction: bool,
    pub(crate) session: Session,
    pub(crate) session_id: String,
    /// The agent's context: completed messages only.
    pub(crate) messages: Context,
}

/// Steering and follow-up messages waiting for the run.
pub(crate) struct Queues {
    pub(crate) steering: Queue,
    pub(crate) follow_up: Queue,
    pub(crate) interrupt_mode: InterruptMode,
}

/// Run limits (`--max-*`, `--deadline`) and what the current run has used.
pub(crate) struct RunLimits {
    /// Run limits of every prompt (a prompt's own `limits` override them).
    pub(crate) default_limits: crate::limits::Limits,
    /// What the current prompt's run has used against its limits (`None`: no limit set).
    pub(crate) tally: Option<crate::limits::Tally>,
    /// The deadline timer of `tally`: its number, when the run started, its cancel handle.
    pub(crate) deadline: Option<(u64, std::time::Instant, crate::cancel::CancelSource)>,
    pub(crate) deadline_seq: u64,
    /// When the current prompt's run started (heartbeats' `elapsedMs`).
    pub(crate) prompt_started: std::time::Instant,
    /// `--output-schema`: the schema of every prompt's final answer (a prompt's own over it).
    pub(crate) default_output: Option<crate::output_schema::OutputSchema>,
    /// The current run's structured output (`None`: no schema asked for, nothing changes).
    pub(crate) output: Option<crate::output_schema::Progress>,
}

/// How long after it starts the machine starts the late threads.
const LATE_START_WAIT: std::time::Duration = std::time::Duration::from_millis(5);

/// What a command handler answers.
#[derive(Debug)]
pub(crate) enum Reply {
    /// Success now, with this `data` (`None`: no `data` key).
    Now(Option<Value>),
    /// The handler answers later itself (after a run, a compaction, an export, ...).
    Later,
    /// Failure now, with this error message.
    Fail(String),
}

impl From<Result<Option<Value>, String>> for Reply {
    fn from(r: Result<Option<Value>, String>) -> Reply {
        match r {
            Ok(data) => Reply::Now(data),
            Err(e) => Reply::Fail(e),
        }
    }
}

impl From<Result<(), String>> for Reply {
    fn from(r: Result<(), String>) -> Reply {
        match r {
            Ok(()) => Reply::Now(None),
            Err(e) => Reply::Fail(e),
        }
    }
}

/// What the plain handlers return: `Ok(data)` (None = no `data` key) or `Err(message)`.
pub(crate) type Answer = Result<Option<Value>, String>;

impl Machine {
    pub fn new(mut s: Startup, ch: Channels) -> Machine {
        let profile = s.compat.profile();
        let messages = shared_context_of(profile, s.session.take_context());
        let auto_compaction = s.settings.compaction_enabled();
        let queues = Queues {
            steering: Queue::new(s.settings.steering_mode()),
            follow_up: Queue::new(s.settings.follow_up_mode()),
            // pi's behaviour: steering waits for the running tools (`immediate` is oh-my-pi's).
            interrupt_mode: InterruptMode::Wait,
        };
        let retry = crate::core::retry::RetryState::new(s.settings.retry_enabled());
        Machine {
            io: Io {
                stdout: ch.stdout,
                input_rx: ch.input,
                control_rx: ch.control,
                worker_rx: ch.worker,
                client_gone: false,
                muted: false,
                input_closed: false,
                worker_tx: ch.worker_tx,
                exit_signal: None,
                late_start: None,
            },
            env: Env {
                registry: s.registry,
                auth: s.auth,
                tools: s.tools,
                custom_system_prompt: s.custom_system_prompt,
                append_system_prompt: s.append_system_prompt,
                no_context_files: s.no_context_files,
                faux_script: s.faux_script,
                resources: s.resources,
                sandbox: s.sandbox,
                cwd: s.cwd,
                agent_dir: s.agent_dir,
                settings: s.settings,
                partials: s.partials,
            },
            state: SessionState {
                scoped_models: s.scoped_models,
                session_id: s.session.id().to_string(),
                session: s.session,
                messages,
                auto_compaction,
                prompt_cache: Default::default(),
                session_context_files: None,
                model: s.model,
                thinking: s.thinking,
                defaults: s.defaults,
            },
            queues,
            limits: RunLimits {
                default_limits: s.limits,
                tally: None,
                deadline: None,
                deadline_seq: 0,
                prompt_started: std::time::Instant::now(),
                default_output: s.output_schema,
                output: None,
            },
            run: None,
            bash: Default::default(),
            exports: Default::default(),
            pending_prompt: None,
            pending_replace: Vec::new(),
            abort_requested: false,
            compaction: None,
            overflow_recovery_attempted: false,
            generation: 0,
            batch: 0,
            plugins: crate::core::plugins::Plugins::new(s.plugins),
            resource_ops: Default::default(),
            retry,
            profile,
            born: std::time::Instant::now(),
            heartbeat: s.heartbeat,
            heartbeat_timer: None,
            heartbeat_seq: 0,
            scripts: Default::default(),
        }
    }

    /// `start` spawns threads the first answer does not need (RPC mode: the watch thread, which
    /// forwards the signals whose handlers are already installed and notices the host hanging
    /// up). It runs [`LATE_START_WAIT`] after this call, between two events, or before the
    /// machine would block on a full stdout queue: spawning it before the first answer, or
    /// right after it while the host is reading it, took CPU time from both on a loaded machine
    /// (docs/architecture.md, "Memory per agent"). A signal that comes meanwhile waits for it.
    pub fn with_late_start(mut self, start: Box<dyn FnOnce() + Send>) -> Machine {
        self.io.late_start = Some((start, std::time::Instant::now() + LATE_START_WAIT));
        self
    }

    fn start_late(&mut self) {
        if let Some((start, _)) = self.io.late_start.take() {
            start();
        }
    }

    /// The main loop: wait for the next event, handle it, until there is a reason to exit.
    /// Extensions and MCP servers start first (in the background) and stop at the end.
    pub fn run(mut self) -> Exit {
        self.run_plugins_and_loop()
    }

    fn run_plugins_and_loop(&mut self) -> Exit {
        self.start_plugins();
        let exit = self.run_loop();
        self.stop_plugins(matches!(exit, Exit::Signal(_)));
        exit
    }

    /// [`Machine::run`] in a process that ends right after it: the context, the session and
    /// the model registry are left to the OS instead of freed an allocation at a time (a long
    /// session's context alone is tens of thousands). The channels still close, so the stdout
    /// writer drains what is queued and stops.
    pub fn run_to_exit(mut self) -> Exit {
        let exit = self.run_plugins_and_loop();
        self.state.session.close_writes();
        std::mem::forget(std::mem::take(&mut self.state.messages));
        std::mem::forget(std::mem::replace(
            &mut self.state.session,
            Session::new("", None, None),
        ));
        std::mem::forget(std::mem::take(&mut self.env.registry));
        exit
    }

    fn run_loop(&mut self) -> Exit {
        loop {
            if let Some(why) = self.plugins.refused.take() {
                eprintln!("{why}");
                self.cancel_all_work();
                return Exit::Refused;
            }
            if let Some(why) = self.plugins.startup_failed.take() {
                eprintln!("{why}");
                self.cancel_all_work();
                return Exit::StartupFailed {
                    rpc: self.plugins.cfg.mode == "rpc",
                };
            }
            if let Some(sig) = self.io.exit_signal {
                return self.shutdown_on_signal(sig);
            }
            if self.io.client_gone {
                self.cancel_all_work();
                return Exit::ClientGone;
            }
            if !self.plugins.idle_waiters.is_empty() && self.is_idle() {
                self.answer_idle_waiters();
            }
            if self.plugins.shutdown_requested
                && self.is_idle()
                && self.exports.is_empty()
                && !self.plugins.busy()
            {
                // An extension's `ctx.shutdown()`: as the end of input (session_shutdown first).
                return Exit::InputClosed;
            }
            if self.io.input_closed
                && self.is_idle()
                && self.exports.is_empty()
                && !self.plugins.busy()
            {
                return Exit::InputClosed;
            }
            // Once stdin is closed nobody can send `abort`: work that shows no progress at all
            // for `pith.eofIdleTimeoutSeconds` (a stuck worker) is aborted and pith exits.
            let mut idle_limit = if self.io.input_closed {
                std::time::Duration::from_secs(self.env.settings.eof_idle_timeout_secs())
            } else {
                std::time::Duration::MAX
            };
            if let Some((_, at)) = &self.io.late_start {
                match at.checked_duration_since(std::time::Instant::now()) {
                    Some(left) if !left.is_zero() => idle_limit = idle_limit.min(left),
                    _ => self.start_late(),
                }
            }
            let timer = self.plugins.timer();
            let event = select! {
                recv(self.io.control_rx) -> c => match c {
                    Ok(c) => Event::Control(c),
                    Err(_) => continue,
                },
                recv(self.io.input_rx) -> i => match i {
                    Ok(i) => Event::Input(i),
                    Err(_) => Event::Input(Input::Eof),
                },
                recv(self.io.worker_rx) -> w => match w {
                    Ok(w) => Event::Worker(w),
                    Err(_) => continue,
                },
                recv(timer) -> _ => Event::Timer,
                default(idle_limit) => {
                    if self.io.late_start.is_some() {
                        self.start_late();
                        continue;
                    }
                    eprintln!(
                        "pith: stdin is closed and nothing progressed for {} s; aborting and exiting",
                        idle_limit.as_secs()
                    );
                    self.cancel_all_work();
                    return Exit::InputClosed;
                }
            };
            if let Some(exit) = self.handle_event(event) {
                return exit;
            }
        }
    }

    pub(crate) fn worker_rx_timeout(&self, deadline: std::time::Instant) -> Option<Worker> {
        self.io.worker_rx.recv_deadline(deadline).ok()
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
            Event::Input(Input::Eof) if self.profile.answers.eof == EofPolicy::Dispose => {
                if let Some(exit) = self.dispose_on_eof() {
                    return Some(exit);
                }
            }
            Event::Input(Input::Eof) => {
                self.io.input_closed = true;
                self.end_dialogs(); // nobody is left to answer them
                // Nothing will read from stdin again; a closed input must not wake the loop.
                self.io.input_rx = crossbeam_channel::never();
            }
            Event::Control(Control::ClientGone) => {
                self.io.client_gone = true;
                self.cancel_all_work();
                return Some(Exit::ClientGone);
            }
            Event::Control(Control::Signal(sig)) => return Some(self.shutdown_on_signal(sig)),
            Event::Worker(Worker::Llm { generation, event }) => {
                if !self.on_compaction_stream(generation, &event) {
                    self.on_llm_event(generation, *event);
                }
            }
            Event::Worker(Worker::Tool { batch, index, event }) => self.on_tool_event(batch, index, event),
            Event::Worker(Worker::RetryDue { id }) => self.on_retry_due(id),
            Event::Worker(Worker::ContinueDue { id }) => self.on_continue_due(id),
            Event::Worker(Worker::SummaryRetryDue { id }) => self.on_summary_retry_due(id),
            Event::Worker(Worker::BashDone { job, outcome }) => self.on_bash_done(job, *outcome),
            Event::Worker(Worker::ToolsAbandoned { batch }) => self.on_tools_abandoned(batch),
            Event::Worker(Worker::DeadlineDue { id }) => self.on_deadline_due(id),
            Event::Worker(Worker::HeartbeatDue { id }) => self.on_heartbeat_due(id),
            Event::Worker(Worker::BashOutput { job, delta }) => self.on_bash_output(job, &delta),
            Event::Worker(Worker::ExportDone { job, result }) => self.on_export_done(job, result),
            Event::Worker(Worker::Ext { ext, event }) => self.on_ext_event(ext, event),
            Event::Worker(Worker::Mcp { server, event }) => self.on_mcp_event(server, event),
            Event::Worker(Worker::Codemode { script, event }) => {
                self.on_script_event(script, event)
            }
            Event::Worker(Worker::CodemodeDue { script }) => self.on_script_due(script),
            Event::Worker(Worker::Spawned { target, result }) => self.on_spawned(target, result),
            Event::Timer => self.on_plugin_timer(),
        }
        None
    }

    /// No run, retry, compaction or bash command in flight.
    pub(crate) fn is_idle(&self) -> bool {
        self.run.is_none()
            && self.plugins.before_start.is_none()
            && self.retry.wait.is_none()
            && self.bash.jobs.is_empty()
            && self.compaction.is_none()
            && self.retry.continue_wait.is_none()
    }

    fn shutdown_on_signal(&mut self, sig: i32) -> Exit {
        eprintln!("pith: received signal {sig}; exiting");
        self.io.exit_signal = Some(sig);
        self.cancel_all_work();
        Exit::Signal(sig)
    }

    /// `--compat 0.87`, stdin ended: pi 0.87.1 disposes its runtime at once (`runtimeHost.dispose()`
    /// in its rpc mode): it stops emitting, cancels whatever runs — the stream, tools, a retry
    /// delay, a compaction, `bash` commands, extension dialogs — records nothing more, flushes
    /// stdout and exits 0. Extensions still get `session_shutdown` (`run` stops them).
    fn dispose_on_eof(&mut self) -> Option<Exit> {
        self.io.input_closed = true;
        self.io.muted = true;
        self.state.session.detach_file();
        self.io.input_rx = crossbeam_channel::never();
        self.end_dialogs();
        self.cancel_all_work();
        if self.plugins.node_host_starting() {
            // The node host is still loading pi's extensions: wait for its verdict (a node too
            // old exits 2); the loop exits once it has registered.
            return None;
        }
        Some(Exit::InputClosed)
    }

    /// Stop every worker (streams, tools) before exiting; tool threads kill their process groups.
    fn cancel_all_work(&mut self) {
        self.drop_pending_prompt("Prompt cancelled: pith is shutting down");
        for (cmd, id) in std::mem::take(&mut self.pending_replace) {
            let name = match cmd {
                Command::SwitchSession { .. } => "switch_session",
                Command::Fork { .. } => "fork",
                Command::Clone => "clone",
                _ => "new_session",
            };
            self.send(response::error(
                id.as_ref(),
                Some(name),
                "Cancelled: pith is shutting down",
            ));
        }
        self.retry.continue_wait = None;
        if let Some((_, mut cancel)) = self.retry.wait.take() {
            cancel.cancel();
        }
        if let Some(mut c) = self.compaction.take() {
            for p in &mut c.parts {
                p.handle.cancel();
            }
        }
        self.abort_run(None);
        self.abort_bash();
        self.exports.cancel_all();
        // Give tool, bash and export threads a moment to kill their process groups, remove
        // their temporary files and report.
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
        while (self.run.is_some() || !self.bash.jobs.is_empty() || !self.exports.is_empty())
            && std::time::Instant::now() < deadline
        {
            match self.worker_rx_timeout(deadline) {
                Some(w) => {
                    let _ = self.handle_event(Event::Worker(w));
                }
                None => break,
            }
        }
        self.exports.abandon();
    }

    // ---- output ------------------------------------------------------------------------------

    /// Hand a frame to the stdout writer. The queue is bounded, so a host that does not read
    /// stops pith here; a signal must still get through, so while the queue is full the machine
    /// also listens to the control channel. After a signal (or when the host is gone) frames are
    /// dropped and the main loop exits.
    pub(crate) fn send(&mut self, line: Vec<u8>) {
        if self.io.client_gone || self.io.muted {
            return;
        }
        let line = match self.io.stdout.try_send(line) {
            Ok(()) => return,
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => {
                self.io.client_gone = true;
                return;
            }
            // Shutting down: what does not fit is dropped, nothing may block now.
            Err(crossbeam_channel::TrySendError::Full(_)) if self.io.exit_signal.is_some() => {
                return;
            }
            Err(crossbeam_channel::TrySendError::Full(line)) => line,
        };
        // About to block: signals must get through.
        self.start_late();
        select! {
            send(self.io.stdout, line) -> r => {
                if r.is_err() {
                    self.io.client_gone = true;
                }
            }
            recv(self.io.control_rx) -> c => match c {
                Ok(Control::Signal(sig)) => self.io.exit_signal = Some(sig),
                Ok(Control::ClientGone) => self.io.client_gone = true,
                Err(_) => {}
            },
        }
    }

    pub(crate) fn emit(&mut self, frame: &Frame<'_>) {
        let line = response::line(frame);
        if !self.plugins.exts.is_empty() {
            self.forward_event(&line);
        }
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
        if obj.get("type").and_then(Value::as_str) == Some("extension_ui_response") {
            self.on_ui_response(&obj); // unknown ids are ignored, as in the reference
            return;
        }
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
        let reply = match self.before_command(&cmd, id.as_ref(), &ty) {
            Some(r) => r,
            None => self.handle_command(cmd, id.as_ref()),
        };
        let line = match reply {
            Reply::Now(data) => response::success(id.as_ref(), &ty, data.as_ref()),
            Reply::Later => return,
            Reply::Fail(msg) => response::error(id.as_ref(), Some(&ty), &msg),
        };
        self.send(line);
    }

    pub(crate) fn handle_command(&mut self, cmd: Command, id: Option<&Value>) -> Reply {
        match cmd {
            Command::Prompt {
                input,
                streaming_behavior,
            } => {
                let input = self.expand_input(input);
                self.cmd_prompt(input, streaming_behavior, id, "prompt")
            }
            Command::Steer(input) => {
                let input = self.expand_input(input);
                let input =
                    match self.input_hook(input, Some(StreamingBehavior::Steer), id, "steer") {
                        Ok(input) => input,
                        Err(reply) => return reply,
                    };
                let r = self.enqueue(input, StreamingBehavior::Steer);
                self.queued_reply(r)
            }
            Command::FollowUp(input) => {
                let input = self.expand_input(input);
                let input = match self.input_hook(
                    input,
                    Some(StreamingBehavior::FollowUp),
                    id,
                    "follow_up",
                ) {
                    Ok(input) => input,
                    Err(reply) => return reply,
                };
                let r = self.enqueue(input, StreamingBehavior::FollowUp);
                self.queued_reply(r)
            }
            Command::Abort => {
                if self.run.is_some()
                    || self.retry.wait.is_some()
                    || self.retry.continue_wait.is_some()
                    || self
                        .compaction
                        .as_ref()
                        .is_some_and(|c| c.reason != crate::core::compaction::Reason::Manual)
                {
                    self.abort_requested = true;
                }
                if self.retry.continue_wait.take().is_some() {
                    // No continuation: the context is the session's (the failed reply is back).
                    self.state.messages = self.state.session.build_context().into();
                    self.send(response::success(id, "abort", None));
                    self.settle();
                    return Reply::Later;
                }
                let manual = self
                    .compaction
                    .as_ref()
                    .is_some_and(|c| c.reason == crate::core::compaction::Reason::Manual);
                if self.abort_compaction() {
                    self.send(response::success(id, "abort", None));
                    if !manual || self.profile.events.settles_after_manual_compaction {
                        self.settle();
                    }
                    return Reply::Later;
                }
                if self.cancel_retry() {
                    // pi 0.87.1 answers once the run has settled (as for an aborted run).
                    if self.profile.answers.abort == AbortAnswer::AfterSettle {
                        self.settle();
                        self.send(response::success(id, "abort", None));
                    } else {
                        self.send(response::success(id, "abort", None));
                        self.settle();
                    }
                    return Reply::Later;
                }
                if let Some(b) = self.plugins.before_start.as_mut() {
                    // The run waits for `before_agent_start` answers: as pi, it starts with them
                    // and is aborted before its request; the abort is answered then.
                    b.abort_waiters.push(id.cloned());
                    return Reply::Later;
                }
                if self.abort_run(Some(id.cloned())) {
                    return Reply::Later;
                }
                Reply::Now(None)
            }
            Command::AbortRetry => {
                if self.cancel_retry() {
                    self.send(response::success(id, "abort_retry", None));
                    self.settle();
                    return Reply::Later;
                }
                Reply::Now(None)
            }
            Command::AbortAndPrompt(input) => {
                let input = self.expand_input(input);
                // Queued messages are dropped, and hosts see it: one `queue_update` with both
                // queues empty, as pi's clearQueue emits (always, even when they were empty).
                self.queues.steering.clear();
                self.queues.follow_up.clear();
                self.emit_queue_update();
                if self.run.is_some() {
                    // Abort, then prompt once the run has ended. Set first: aborting a stream ends the run synchronously, and the end of the
                    // run is what starts the waiting prompt.
                    self.set_pending_prompt(input, id.cloned(), "abort_and_prompt");
                    self.abort_run(None);
                    return Reply::Later;
                }
                self.cmd_prompt(input, None, id, "abort_and_prompt")
            }
            Command::Bash {
                command,
                exclude_from_context,
            } => match self.start_bash(command, exclude_from_context, id.cloned()) {
                Ok(_) => Reply::Later,
                Err(e) => Reply::Fail(e),
            },
            Command::AbortBash => {
                self.abort_bash();
                Reply::Now(None)
            }
            Command::Compact {
                custom_instructions,
            } => match self.cmd_compact(custom_instructions, id.cloned()) {
                Ok(_) => Reply::Later,
                Err(e) => Reply::Fail(e),
            },
            Command::GetState => Reply::Now(Some(self.state_json())),
            Command::Ping => Reply::Now(Some(json!({
                "uptimeMs": u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX),
                "isStreaming": self.run.is_some(),
            }))),
            Command::GetMessages => Reply::Now(Some(json!({ "messages": self.state.messages }))),
            Command::GetLastAssistantText => Reply::Now(Some(
                match crate::session::tree::last_reply_text(
                    self.state.messages.as_slice(),
                    self.profile.answers.last_text_skips_empty,
                ) {
                    Some(t) => json!({ "text": t }),
                    None => json!({}),
                },
            )),
            Command::GetSessionStats => Reply::Now(Some(self.session_stats())),
            Command::SetSteeringMode(m) => {
                self.queues.steering.mode = m;
                Reply::Now(None)
            }
            Command::SetFollowUpMode(m) => {
                self.queues.follow_up.mode = m;
                Reply::Now(None)
            }
            Command::SetInterruptMode(m) => {
                self.queues.interrupt_mode = m;
                Reply::Now(None)
            }
            Command::SetAutoCompaction(on) => {
                self.state.auto_compaction = on;
                Reply::Now(None)
            }
            Command::SetAutoRetry(on) => {
                self.retry.enabled = on;
                Reply::Now(None)
            }
            Command::SetSessionName(name) => {
                let name = name.trim().to_string();
                if name.is_empty() {
                    return Reply::Fail("Session name cannot be empty".to_string());
                }
                self.emit(&Frame::SessionInfoChanged { name: &name });
                self.state.session.append_session_info(&name);
                self.flush_session_warnings();
                Reply::Now(None)
            }
            Command::GetCommands => Reply::Now(Some(self.get_commands_data())),
            Command::ClearQueue => Reply::Now(Some(self.cmd_clear_queue())),
            Command::GetAvailableThinkingLevels => {
                Reply::Now(Some(self.available_thinking_levels()))
            }
            Command::GetEntries { since } => {
                self.cmd_get_entries(id, since.as_deref());
                Reply::Later
            }
            Command::GetTree => {
                self.cmd_get_tree(id);
                Reply::Later
            }
            Command::NewSession { .. }
            | Command::SwitchSession { .. }
            | Command::Fork { .. }
            | Command::Clone
                if self.replace_waits_for_tools() =>
            {
                // pi tears the session down with an abort that waits for the tools to end:
                // the switch happens once the aborted run has ended.
                self.pending_replace.push((cmd, id.cloned()));
                self.abort_requested = true;
                self.abort_run(None);
                Reply::Later
            }
            Command::NewSession { parent_session } => self.cmd_new_session(parent_session).into(),
            Command::SwitchSession { session_path } => {
                self.cmd_switch_session(&session_path).into()
            }
            Command::Fork { entry_id } => self.cmd_fork(&entry_id).into(),
            Command::Clone => self.cmd_clone().into(),
            Command::GetForkMessages => Reply::Now(Some(
                json!({ "messages": self.state.session.user_messages_for_fork() }),
            )),
            Command::ExportHtml { output_path } => {
                match self.start_export(output_path, id.cloned()) {
                    Ok(_) => Reply::Later,
                    Err(e) => Reply::Fail(e),
                }
            }
            Command::GetAvailableModels => {
                let models: Vec<&Model> = self.env.registry.available(&self.env.auth);
                Reply::Now(Some(json!({ "models": models })))
            }
            Command::SetModel { provider, model_id } => {
                self.cmd_set_model(&provider, &model_id).into()
            }
            Command::CycleModel => self.cmd_cycle_model().into(),
            Command::SetThinkingLevel(level) => {
                self.set_thinking(level);
                Reply::Now(None)
            }
            Command::CycleThinkingLevel => self.cmd_cycle_thinking().into(),
            // Answered nowhere: handled (ignored) before dispatch.
            Command::ExtensionUiResponse => Reply::Now(None),
        }
    }

    /// `prompt`: start a run, or queue the message while one is running.
    pub(crate) fn cmd_prompt(
        &mut self,
        input: UserInput,
        behavior: Option<StreamingBehavior>,
        id: Option<&Value>,
        command: &str,
    ) -> Reply {
        if let Some(r) = self.try_extension_command(&input.text, id, command_name(command)) {
            return r;
        }
        if let Some(r) = self.try_builtin_command(&input.text) {
            return r;
        }
        let input = match self.input_hook(input, behavior, id, command_name(command)) {
            Ok(input) => input,
            Err(reply) => return reply,
        };
        let busy = self.run.is_some()
            || self.plugins.before_start.is_some()
            || self.retry.wait.is_some()
            || self.retry.continue_wait.is_some()
            || self.pending_prompt.is_some()
            || (self.compaction.is_some() && behavior.is_some());
        if busy {
            let Some(b) = behavior else {
                return Reply::Fail("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.".to_string());
            };
            let r = self.enqueue(input, b);
            return self.queued_reply(r);
        }
        if self.plugins.starting() {
            // Extensions and MCP servers are still starting: the prompt runs with their tools.
            self.set_pending_prompt(input, id.cloned(), command_name(command));
            self.plugins.prompt_waits_startup = true;
            if self.plugins.cfg.mcp_dialect == crate::protocol::McpDialect::Pi
                && !self.plugins.mcp_waited
                && self.plugins.mcp_wait_until.is_none()
            {
                self.plugins.mcp_wait_until =
                    Some(std::time::Instant::now() + std::time::Duration::from_secs(10));
            }
            return Reply::Later;
        }
        if let Err(e) = self.check_model_and_key() {
            return Reply::Fail(e);
        }
        if self.compaction.is_some() {
            self.set_pending_prompt(input, id.cloned(), command_name(command));
            self.plugins.pending_input_checked = true; // its input hook has run
            return Reply::Later;
        }
        self.flush_deferred_bash();
        if let Some(last) = self.last_assistant_in_context() {
            if self.maybe_auto_compact(&last, true) {
                self.set_pending_prompt(input, id.cloned(), command_name(command));
                self.plugins.pending_input_checked = true;
                return Reply::Later;
            }
        }
        // Answer first (the reference's order), then the run's events; with extensions
        // listening to `before_agent_start`, once they have answered (pi's preflight).
        let data = self.disposition(response::Disposition::Started);
        let answer = response::success(id, command, data.as_ref());
        let answer = if self.plugins.subscribers("before_agent_start").is_empty() {
            self.send(answer);
            None
        } else {
            Some(answer)
        };
        let message = AgentMessage::User(UserMessage {
            content: UserContent::Blocks(input.content()),
            timestamp: now_ms(),
        });
        let mut messages = vec![message];
        messages.extend(self.take_next_turn_messages());
        self.begin_limits(input.limits.as_ref());
        if let Some(schema) = input.output_schema {
            self.limits.output = Some(crate::output_schema::Progress::new(schema));
        }
        self.start_run_asking(messages, &input.text, &input.images, answer);
        Reply::Later
    }

    /// The `data` of a successful prompt, steer or follow-up in this version.
    pub(crate) fn disposition(&self, d: response::Disposition) -> Option<Value> {
        response::disposition(d, self.profile.answers.prompt_disposition)
    }

    /// The answer to a message put in a queue (or the queue's refusal).
    pub(crate) fn queued_reply(&self, r: Result<(), String>) -> Reply {
        match r {
            Ok(()) => Reply::Now(self.disposition(response::Disposition::Queued)),
            Err(e) => Reply::Fail(e),
        }
    }

    pub(crate) fn enqueue(
        &mut self,
        input: UserInput,
        behavior: StreamingBehavior,
    ) -> Result<(), String> {
        if input.output_schema.is_some() {
            return Err("outputSchema applies to a prompt that starts a run, not to a message queued for the running one".to_string());
        }
        let q = Queued {
            text: input.text.clone(),
            message: AgentMessage::User(UserMessage {
                content: UserContent::Blocks(input.content()),
                timestamp: now_ms(),
            }),
        };
        self.push_queued(q, behavior)
    }

    /// Put `q` on the steering or follow-up queue (a full queue is the error) and show the queues.
    pub(crate) fn push_queued(
        &mut self,
        q: Queued,
        behavior: StreamingBehavior,
    ) -> Result<(), String> {
        let pushed = match behavior {
            StreamingBehavior::Steer => self
                .queues
                .steering
                .push(q)
                .map_err(|f| f.message("steering")),
            StreamingBehavior::FollowUp => self
                .queues
                .follow_up
                .push(q)
                .map_err(|f| f.message("follow-up")),
        };
        pushed?;
        self.emit_queue_update();
        Ok(())
    }

    /// Stop the current run without emitting its closing events (`new_session`,
    /// `switch_session`: the reference disconnects from the agent before aborting).
    pub(crate) fn discard_run(&mut self) {
        if let Some(mut run) = self.run.take() {
            let mut dropped_batch = None;
            match &mut run.phase {
                crate::core::agent::Phase::Streaming { handle, .. } => handle.cancel(),
                crate::core::agent::Phase::Tools(b) => {
                    b.cancel.cancel();
                    dropped_batch = Some(b.batch);
                }
                crate::core::agent::Phase::Starting => {}
            }
            if let Some(b) = dropped_batch {
                self.cancel_remote_calls(b);
                self.drop_gate(b);
            }
            self.generation += 1;
            self.batch += 1;
            for id in &run.abort_waiters {
                let line = response::success(id.as_ref(), "abort", None);
                self.send(line);
            }
        }
        self.drop_pending_prompt("Prompt cancelled: the session was replaced");
        if let Some((_, mut cancel)) = self.retry.wait.take() {
            cancel.cancel();
        }
        self.retry.attempt = 0;
        self.retry.continue_wait = None;
        if let Some(mut c) = self.compaction.take() {
            for p in &mut c.parts {
                p.handle.cancel();
            }
            if !c.from_ext
                && (c.id.is_some() || c.reason == crate::core::compaction::Reason::Manual)
            {
                let msg = crate::compaction::COMPACTION_CANCELLED;
                self.send(response::error(c.id.as_ref(), Some("compact"), msg));
            }
            let cancelled = crate::compaction::COMPACTION_CANCELLED.to_string();
            self.answer_compact_waiters(&c.ext_waiters, Err(cancelled));
        }
        // A run waiting for `before_agent_start` answers is dropped with it, and a request
        // waiting for `context` answers.
        if let Some(b) = self.plugins.before_start.take() {
            for id in &b.abort_waiters {
                self.send(response::success(id.as_ref(), "abort", None));
            }
        }
        self.plugins.context = None;
    }

    /// After the session object changed: context from it, queues emptied.
    pub(crate) fn reset_context(&mut self) {
        // pi builds a new runtime for the new session: skills and prompt templates are read again.
        self.env.resources.reload();
        self.state.session_id = self.state.session.id().to_string();
        self.state.messages = context_of(self.profile, self.state.session.build_context()).into();
        self.queues.steering.clear();
        self.queues.follow_up.clear();
        self.flush_session_warnings();
    }

    /// Key and headers for one request to `model` (resolved per call, as the reference does, so
    /// `!command` keys and header values can change): the model comes back with the resolved
    /// headers, which the request builders send. A `!command` is never run here (it could take
    /// any time): its plan comes back instead, for the request's worker to resolve.
    pub(crate) fn request_credentials(
        &self,
        model: &Model,
    ) -> Result<(Option<String>, Model, Option<crate::llm::models::AuthPlan>), String> {
        let plan = self.env.registry.auth_plan(model, &self.env.auth);
        if plan.runs_commands() {
            return Ok((None, model.clone(), Some(plan)));
        }
        let ra = plan.resolve(&crate::cancel::CancelToken::never())?;
        let mut m = model.clone();
        if let Some(h) = ra.headers {
            let map: Map<String, Value> =
                h.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
            m.headers = Some(map);
        }
        Ok((ra.api_key, m, None))
    }

    /// What a request to `model` needs beyond its key: the stored OAuth login to refresh, the
    /// model's thinking level map.
    pub(crate) fn request_extra(
        &self,
        model: &Model,
        auth: Option<crate::llm::models::AuthPlan>,
    ) -> crate::llm::RequestExtra {
        crate::llm::RequestExtra {
            auth,
            oauth: self.env.auth.oauth_login(&model.provider),
            thinking_map: self
                .env
                .registry
                .thinking_level_map_of(&model.provider, &model.id),
            env: Some(self.env.auth.env().clone()),
            thinking_budgets: Default::default(),
        }
    }

    /// A prompt's (and pi 0.73.1's manual compaction's) first check: a model is chosen and its
    /// provider has a key. `Err` is the answer: pi's first line, pith's advice (docs/rpc.md).
    pub(crate) fn check_model_and_key(&self) -> Result<(), String> {
        let Some(model) = &self.state.model else {
            return Err(no_model_message());
        };
        if model.api != "faux" && !self.key_configured(&model.provider) {
            return Err(format!(
                "No API key found for {}.\n\n{KEY_HELP}",
                model.provider
            ));
        }
        Ok(())
    }

    /// Whether a request to `provider` would have a key (runtime override, auth.json, env,
    /// models.json), without running a `!command`: one counts as a key, as in pi, and a command
    /// that yields none fails the request with that error.
    pub(crate) fn key_configured(&self, provider: &str) -> bool {
        self.env.auth.key_configured(provider)
    }

    /// `/skill:name args` and `/template args` expanded as pi does (not a `/name` of an
    /// extension command: those run as they are); a skill file that cannot be read now is
    /// reported as an `extension_error` event and the text stays as typed.
    fn expand_input(&mut self, mut input: UserInput) -> UserInput {
        if !input.text.starts_with('/') || self.names_extension_command(&input.text) {
            return input;
        }
        let (text, error) = self
            .env
            .resources
            .get()
            .expand(&input.text, &self.profile.resources);
        if let Some(e) = error {
            let line = response::line(&e.event());
            self.send(line);
        }
        input.text = text;
        input
    }

    pub(crate) fn system_prompt(&mut self) -> String {
        let remote = self.offered_remote_tools();
        let mut names: Vec<(&str, &str)> = self
            .env
            .tools
            .iter()
            .map(|t| (t.name(), t.snippet()))
            .collect();
        names.extend(
            remote
                .iter()
                .filter_map(|r| r.snippet.as_deref().map(|s| (r.name.as_str(), s))),
        );
        let guidelines: Vec<&str> = remote
            .iter()
            .flat_map(|r| r.guidelines.iter().map(String::as_str))
            .collect();
        // Listed only when the model can read the files (pi: a `read` tool is active).
        let skills = if names.iter().any(|(n, _)| *n == "read") {
            self.env.resources.get().skills_prompt(
                crate::resources::skills::ReadTool::Read,
                self.profile.texts.system_prompt.skills_paths,
            )
        } else {
            String::new()
        };
        crate::prompt::build(&crate::prompt::PromptInputs {
            skills: &skills,
            cwd: &self.env.cwd,
            agent_dir: &self.env.agent_dir,
            tools: &names,
            guidelines: &guidelines,
            custom: self.env.custom_system_prompt.as_deref(),
            append: self.env.append_system_prompt.as_deref(),
            no_context_files: self.env.no_context_files,
            date: &crate::prompt::utc_date(),
        })
    }

    /// Record a finished message in the session (written per the session's flushing rules).
    pub(crate) fn persist_message(&mut self, m: &AgentMessage) {
        match m {
            // Extensions' messages are `custom_message` entries, as the reference writes them.
            AgentMessage::Custom(c) => {
                self.state.session.append_custom_message(
                    &c.custom_type,
                    &c.content,
                    c.display,
                    c.details.clone(),
                );
            }
            _ => {
                self.state.session.append_message(m);
                if matches!(m, AgentMessage::User(_)) && self.profile.agent.early_session_file {
                    self.state.session.start_file();
                }
            }
        }
        self.flush_session_warnings();
    }

    pub(crate) fn flush_session_warnings(&mut self) {
        for w in self.state.session.take_warnings() {
            eprintln!("Warning: {w}");
        }
        for n in self.state.session.take_write_notices() {
            self.emit(&match &n {
                WriteNotice::Failed {
                    file,
                    error,
                    unsaved,
                } => Frame::SessionWriteError {
                    session_file: file,
                    error,
                    unsaved_entries: *unsaved,
                },
                WriteNotice::Resumed { file, saved } => Frame::SessionWriteResumed {
                    session_file: file,
                    saved_entries: *saved,
                },
            });
        }
    }

    /// What follows the end of a run: a prompt that waited for it (`abort_and_prompt`), else
    /// auto-retry, else auto-compaction, else `agent_settled`.
    pub(crate) fn after_run(&mut self, last: Option<AssistantMessage>, aborted: bool) {
        if !self.pending_replace.is_empty() {
            self.settle();
            for (cmd, id) in std::mem::take(&mut self.pending_replace) {
                let name = match &cmd {
                    Command::SwitchSession { .. } => "switch_session",
                    Command::Fork { .. } => "fork",
                    Command::Clone => "clone",
                    _ => "new_session",
                };
                let reply = self.handle_command(cmd, id.as_ref());
                match reply {
                    Reply::Later => {}
                    Reply::Fail(e) => self.send(response::error(id.as_ref(), Some(name), &e)),
                    Reply::Now(data) => {
                        self.send(response::success(id.as_ref(), name, data.as_ref()))
                    }
                }
            }
            return;
        }
        if self.run_pending_prompt() {
            return;
        }
        if let Some(a) = &last {
            if !aborted && self.maybe_schedule_retry(a) {
                return;
            }
            if self.maybe_auto_compact(a, false) {
                return;
            }
        }
        self.settle();
    }

    /// A prompt that waits for a run or a compaction to end. A prompt already waiting is
    /// answered with an error (it never goes unanswered).
    pub(crate) fn set_pending_prompt(
        &mut self,
        input: UserInput,
        id: Option<Value>,
        command: &'static str,
    ) {
        self.drop_pending_prompt("Prompt superseded by a newer abort_and_prompt");
        self.pending_prompt = Some((input, id, command));
        self.plugins.pending_input_checked = false;
    }

    /// Answer a waiting prompt with an error and forget it.
    pub(crate) fn drop_pending_prompt(&mut self, reason: &str) {
        if let Some((_, id, command)) = self.pending_prompt.take() {
            self.send(response::error(id.as_ref(), Some(command), reason));
        }
    }

    /// Run a prompt that waited for a run or a compaction to end. True if it did anything.
    pub(crate) fn run_pending_prompt(&mut self) -> bool {
        let Some((input, id, command)) = self.pending_prompt.take() else {
            return false;
        };
        // A prompt that waited for a compaction has been through the input hook already.
        self.plugins.input_checked = std::mem::take(&mut self.plugins.pending_input_checked);
        let reply = self.cmd_prompt(input, None, id.as_ref(), command);
        match reply {
            Reply::Later => {}
            Reply::Fail(e) => self.send(response::error(id.as_ref(), Some(command), &e)),
            Reply::Now(data) => self.send(response::success(id.as_ref(), command, data.as_ref())),
        }
        true
    }

    /// `agent_settled` when nothing is running or scheduled.
    pub(crate) fn settle(&mut self) {
        if self.is_idle() {
            if self.profile.agent.bash_results_at_run_end {
                self.flush_deferred_bash();
            }
            let aborted = std::mem::take(&mut self.abort_requested);
            let aborted = self.profile.events.settled_aborted.then_some(aborted);
            self.emit(&Frame::AgentSettled { aborted });
        }
    }

    // ---- models and thinking ------------------------------------------------------------------

    fn set_model_to(&mut self, model: Model, level: Option<ThinkingLevel>) {
        let old_supports = self.state.model.as_ref().is_some_and(|m| m.reasoning);
        self.state
            .session
            .append_model_change(&model.provider, &model.id);
        let wanted = level.unwrap_or(
            if self.profile.agent.thinking_on_model_change == ThinkingOnModelChange::ModelSetting {
                // pi 0.87.1: the model's own setting, else the settings' default, else the current.
                self.env
                    .settings
                    .model_thinking_level(&model.provider, &model.id)
                    .or(self.env.settings.default_thinking_level())
                    .unwrap_or(self.state.thinking)
            } else if old_supports {
                self.state.thinking
            } else {
                self.env
                    .settings
                    .default_thinking_level()
                    .unwrap_or(ThinkingLevel::Medium)
            },
        );
        self.state.model = Some(model);
        self.set_thinking(wanted);
    }

    /// Clamp to the model, record and announce a change.
    fn set_thinking(&mut self, level: ThinkingLevel) {
        let effective = match &self.state.model {
            Some(m) => crate::llm::clamp_thinking(&self.env.registry.thinking_levels(m), level),
            None => ThinkingLevel::Off,
        };
        if effective != self.state.thinking {
            self.state.thinking = effective;
            self.state.session.append_thinking_level_change(effective);
            self.emit(&Frame::ThinkingLevelChanged {
                level: effective.as_str(),
            });
        }
    }

    pub(crate) fn cmd_set_model(&mut self, provider: &str, model_id: &str) -> Answer {
        let found = self
            .env
            .registry
            .available(&self.env.auth)
            .into_iter()
            .find(|m| m.provider == provider && m.id == model_id)
            .cloned()
            // The offline model is in no registry (never listed), but `--model faux` is not the
            // only way to it: a host that switched away must be able to come back.
            .or_else(|| (provider == "faux" && model_id == "faux").then(crate::llm::faux::model));
        let Some(model) = found else {
            return Err(format!("Model not found: {provider}/{model_id}"));
        };
        self.set_model_to(model.clone(), None);
        Ok(Some(serde_json::to_value(&model).unwrap_or(Value::Null)))
    }

    fn cmd_cycle_model(&mut self) -> Answer {
        let scoped: Vec<(Model, Option<ThinkingLevel>)> = self
            .state
            .scoped_models
            .iter()
            .filter(|(m, _)| {
                self.env.auth.has_auth(&m.provider)
                    || self
                        .env
                        .registry
                        .has_configured_auth(&m.provider, &self.env.auth)
            })
            .cloned()
            .collect();
        let (candidates, is_scoped): (Vec<(Model, Option<ThinkingLevel>)>, bool) =
            if !self.state.scoped_models.is_empty() {
                (scoped, true)
            } else {
                (
                    self.env
                        .registry
                        .available(&self.env.auth)
                        .into_iter()
                        .map(|m| (m.clone(), None))
                        .collect(),
                    false,
                )
            };
        let current = self.state.model.as_ref().and_then(|cur| {
            candidates
                .iter()
                .position(|(m, _)| m.provider == cur.provider && m.id == cur.id)
        });
        let n = candidates.len();
        let next_index = if self.profile.answers.cycle_from_outside_to_first {
            // pi 1.6.0's getNextCycleIndex.
            match current {
                _ if n == 0 => None,
                None => Some(0),
                Some(_) if n == 1 => None,
                Some(i) => Some((i + 1) % n),
            }
        } else {
            (n > 1).then(|| (current.unwrap_or(0) + 1) % n)
        };
        let Some(next_index) = next_index else {
            return Ok(Some(Value::Null));
        };
        let (next, level) = candidates[next_index].clone();
        self.set_model_to(next.clone(), level);
        Ok(Some(
            json!({"model": next, "thinkingLevel": self.state.thinking.as_str(), "isScoped": is_scoped}),
        ))
    }

    fn cmd_cycle_thinking(&mut self) -> Answer {
        let Some(model) = self.state.model.as_ref() else {
            return Ok(Some(Value::Null));
        };
        if !model.reasoning {
            return Ok(Some(Value::Null));
        }
        let levels = self.env.registry.thinking_levels(model);
        let pos = levels
            .iter()
            .position(|l| *l == self.state.thinking)
            .unwrap_or(0);
        let next = levels[(pos + 1) % levels.len()];
        self.set_thinking(next);
        Ok(Some(json!({ "level": self.state.thinking.as_str() })))
    }

    fn state_json(&self) -> Value {
        let mut m = Map::new();
        let model = match &self.state.model {
            Some(model) => serde_json::to_value(model).unwrap_or(Value::Null),
            // pi's agent holds a placeholder until a model is chosen (pi-agent-core's
            // `DEFAULT_MODEL`, every version): `get_state` shows it.
            None => serde_json::from_str(PLACEHOLDER_MODEL).unwrap_or(Value::Null),
        };
        m.insert("model".into(), model);
        m.insert("thinkingLevel".into(), json!(self.state.thinking.as_str()));
        m.insert("isStreaming".into(), json!(self.run.is_some()));
        m.insert("isCompacting".into(), json!(self.compaction.is_some()));
        m.insert(
            "steeringMode".into(),
            json!(self.queues.steering.mode.as_str()),
        );
        m.insert(
            "followUpMode".into(),
            json!(self.queues.follow_up.mode.as_str()),
        );
        m.insert(
            "interruptMode".into(),
            json!(self.queues.interrupt_mode.as_str()),
        );
        if let Some(f) = self.state.session.file() {
            m.insert("sessionFile".into(), json!(f.to_string_lossy()));
        }
        m.insert("sessionId".into(), json!(self.state.session_id));
        if let Some(n) = self.state.session.session_name() {
            m.insert("sessionName".into(), json!(n));
        }
        m.insert(
            "autoCompactionEnabled".into(),
            json!(self.state.auto_compaction),
        );
        m.insert("messageCount".into(), json!(self.state.messages.len()));
        let pending = self.queues.steering.len() + self.queues.follow_up.len();
        m.insert("pendingMessageCount".into(), json!(pending));
        m.insert("queuedMessageCount".into(), json!(pending));
        // pith's own, only under `--sandbox` (docs/rpc.md): the sandbox in effect.
        if let Some(sb) = &self.env.sandbox {
            m.insert("sandbox".into(), sb.state_json());
        }
        Value::Object(m)
    }
}

/// The `'static` name of a prompting command.
fn command_name(c: &str) -> &'static str {
    if c == "abort_and_prompt" {
        "abort_and_prompt"
    } else {
        "prompt"
    }
}

/// How to give pith a key (pi's text here points at its `/login` command and docs, which pith
/// does not have).
/// pi-agent-core's `DEFAULT_MODEL`, in its key order.
const PLACEHOLDER_MODEL: &str = r#"{"id":"unknown","name":"unknown","api":"unknown","provider":"unknown","baseUrl":"","reasoning":false,"input":[],"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0},"contextWindow":0,"maxTokens":0}"#;

/// Without a model: pi's agent holds a placeholder model without a key, so its answer is the
/// no-key one for "the selected model".
pub(crate) fn no_model_message() -> String {
    format!(
        "No API key found for the selected model.\n\n{KEY_HELP}\n\nThen select a model with set_model (or --model)."
    )
}

const KEY_HELP: &str = "Set the provider's API key in the environment (e.g. ANTHROPIC_API_KEY), in auth.json or with --api-key; custom providers go in models.json.";

/// A context rebuilt from a session as this version sees it: a version without system messages
/// leaves out those a session file written under another one holds.
pub(crate) fn context_of(
    profile: &Profile,
    mut messages: Vec<crate::message::AgentMessage>,
) -> Vec<crate::message::AgentMessage> {
    if !profile.agent.system_messages {
        messages.retain(|m| !matches!(m, crate::message::AgentMessage::System(_)));
    }
    messages
}

/// [`context_of`] for a context already shared (`Arc`) with requests.
pub(crate) fn shared_context_of(
    profile: &Profile,
    mut messages: crate::message::Context,
) -> crate::message::Context {
    if !profile.agent.system_messages {
        messages.retain(|m| !matches!(m, crate::message::AgentMessage::System(_)));
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AgentMessage, SystemMessage, UserContent};

    #[test]
    fn a_version_without_system_messages_leaves_them_out_of_the_context() {
        let system = AgentMessage::System(SystemMessage {
            content: UserContent::Text("p".into()),
            sections: None,
            timestamp: 1,
            tools_added: None,
            tools_removed: None,
            checkpoint: false,
        });
        let messages = vec![system];
        assert!(context_of(Version::V073.profile(), messages.clone()).is_empty());
        assert_eq!(context_of(Version::V087.profile(), messages).len(), 1);
    }
}
