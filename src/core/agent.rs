//! The agent loop (spec 6.2), written as reactions of the state machine: a run starts with a
//! prompt, each turn streams one assistant message on an LLM thread, runs its tool calls on
//! worker threads, and decides what comes next when everything it waited for has reported. The
//! order of the events it emits is the reference's (spec 5.4).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::cancel::{CancelSource, CancelToken, cancel_pair};
use crate::core::event::{ToolEvent, Worker};
use crate::core::machine::Machine;
use crate::core::plugins::RemoteTool;
use crate::llm::stream::StreamHandle;
use crate::llm::{LlmRequest, Model, StreamEvent, Timeouts, ToolSchema};
use crate::message::{
    AgentMessage, AssistantMessage, Content, StopReason, TextContent, ThinkingContent,
    ThinkingLevel, ToolCall, ToolResultMessage, now_ms,
};
use crate::output_schema::{AfterTurn, TOOL_NAME as FINAL_ANSWER};
use crate::protocol::{AbortAnswer, Profile, ToolChanges, UpdateShape};
use crate::queues::Queued;
use crate::rpc::event::{Event as Frame, Partials, UpdateBody, UpdateKind};
use crate::rpc::partial::PartialEncoder;
use crate::tools::{Tool, ToolContext, ToolOutput, ToolResult};

/// Error text of the assistant message that ends a run aborted between turns (spec 5.4 F).
pub const ABORTED_REQUEST: &str = "Request was aborted.";
/// What a tool call gets when a queued steering message skips it.
pub const SKIPPED: &str = "Skipped due to queued user message.";
/// How long tools get to stop after an abort. A tool still running then (a worker stuck in a
/// blocking system call) is abandoned: its call ends with `Operation aborted` at once, and
/// whatever the worker reports later is ignored (its slot has a result, its batch is over).
pub const ABORT_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// Which queue delivered messages came from (for their `queue_update`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Steering,
    FollowUp,
}

/// One agent run (`agent_start` … `agent_end`). It snapshots model, thinking level, system
/// prompt and tools when it starts.
pub struct Run {
    pub model: Model,
    pub thinking: ThinkingLevel,
    pub system_prompt: String,
    pub tools: Vec<Arc<dyn Tool>>,
    /// The built-in tools as the requests of this run offer them (built once per run, in this
    /// protocol version's wording).
    pub schemas: Vec<ToolSchema>,
    /// Tools of extensions and MCP servers (an extension's tool replaces a built-in of its name).
    pub remote: Vec<RemoteTool>,
    /// Messages created during this run (for `agent_end`).
    pub new_messages: Vec<AgentMessage>,
    pub phase: Phase,
    /// `abort` was requested: ids of the abort commands to answer after `agent_end`.
    pub abort_waiters: Vec<Option<Value>>,
    pub aborting: bool,
    /// When the current LLM request started (an assistant message's `durationMs`).
    pub request_started: std::time::Instant,
    /// Tools `tool_search` loaded in this run: declared from the next turn on (then the
    /// branch's system messages remember them).
    pub loaded: Vec<String>,
    /// An extension's `before_agent_start` replaced the system prompt for this run: under the
    /// protocols with transcript system messages, requests carry it as their only one.
    pub forced_prompt: bool,
}

pub enum Phase {
    /// Between the start of a turn and its LLM request (messages are being delivered); never
    /// observed by an event handler, since the request starts in the same step.
    Starting,
    /// Waiting for the LLM stream of generation `generation`.
    Streaming {
        generation: u64,
        handle: StreamHandle,
        /// The partial assistant message (after `Start`).
        partial: Option<AssistantMessage>,
        /// Its JSON, kept up to date block by block for `message_update` snapshots.
        encoder: PartialEncoder,
        /// `--compat 0.87`: the live usage's JSON, serialised when the usage changes (each
        /// delta-only `message_update` carries it).
        usage_json: Vec<u8>,
    },
    /// Tool calls of `assistant` are running.
    Tools(ToolBatch),
}

pub struct ToolBatch {
    pub batch: u64,
    pub assistant: AgentMessage,
    /// One per call prepared so far (all of them once preparation is over).
    pub slots: Vec<Slot>,
    pub cancel: CancelSource,
    /// Steering that skipped calls during preparation (delivered next turn).
    pub steering: Vec<Queued>,
    /// The calls of the assistant message.
    pub calls: Vec<ToolCall>,
    /// Prepared calls waiting for the end of preparation: (index, tool, validated arguments).
    pub runnable: Vec<(usize, Exec, Value)>,
    /// Writes and edits whose resolved target the permission gate approved (index, target).
    pub approved: Vec<(usize, std::path::PathBuf)>,
    /// pi's per-file mutation queue (`tools::mutation`): the `edit`/`write` calls running, with
    /// the file each changes, and the prepared calls on those files waiting for them to end (in
    /// call order; released by [`Machine::finish_tool_slot`]).
    pub mutating: Vec<(usize, std::path::PathBuf)>,
    pub held: Vec<(usize, Exec, Value)>,
    token: CancelToken,
    /// After an abort: the timer that abandons calls still running after [`ABORT_GRACE`]
    /// (dropping it, when the batch ends first, stops it).
    pub abandon: Option<CancelSource>,
    /// Calls `codemode` scripts made: slots after the assistant message's calls, whose results
    /// go back to their script instead of to the model (`core/codemode.rs`).
    pub nested: Vec<crate::core::codemode::Nested>,
}

/// How a call runs: a built-in tool on a worker thread, or a tool of an extension or an MCP
/// server (a message to its process; the answer comes back as a worker event).
#[derive(Clone)]
pub enum Exec {
    Builtin(Arc<dyn Tool>),
    Remote(RemoteTool),
}

pub struct Slot {
    pub call: ToolCall,
    /// `None` while running.
    pub result: Option<ToolResultMessage>,
    /// When the tool started running (`None`: it did not run).
    pub started: Option<std::time::Instant>,
}

pub(crate) fn result_message(call: &ToolCall, r: ToolResult) -> ToolResultMessage {
    let (content, details, is_error) = match r {
        Ok(ToolOutput {
            content,
            details,
            is_error,
            ..
        }) => (content, details, is_error),
        Err(text) => (vec![Content::text(text)], Some(json!({})), true),
    };
    ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content,
        details,
        is_error,
        duration_ms: None,
        timestamp: now_ms(),
        nested_calls: None,
    }
}

/// A duration in whole milliseconds.
pub(crate) fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A tool's result or partial result as events carry it: `{content, details?}`.
pub(crate) fn result_json(content: &[Content], details: Option<&Value>) -> Value {
    let mut r = serde_json::Map::new();
    r.insert(
        "content".into(),
        serde_json::to_value(content).unwrap_or(Value::Null),
    );
    if let Some(d) = details {
        r.insert("details".into(), d.clone());
    }
    Value::Object(r)
}

/// The tools as a run's requests offer them (pi 0.73.1's schemas).
fn tool_schemas(tools: &[Arc<dyn Tool>]) -> Vec<ToolSchema> {
    tools
        .iter()
        .map(|t| ToolSchema {
            name: t.name().to_string(),
            description: t.description(),
            parameters: t.parameters(),
            constrained_sampling: None,
        })
        .collect()
}

/// A usage as JSON (JavaScript number forms), for the live `usage` of `message_update`.
fn usage_bytes(u: &crate::message::Usage) -> Vec<u8> {
    let mut out = Vec::with_capacity(192);
    if crate::rpc::response::write_js(&mut out, u).is_err() {
        out.clear();
        out.extend_from_slice(b"{}");
    }
    out
}

/// Apply one stream event to the machine's copy of the partial message.
pub(crate) fn apply_event(partial: &mut AssistantMessage, ev: &StreamEvent) {
    fn slot(p: &mut AssistantMessage, index: usize, make: impl FnOnce() -> Content) {
        if index < p.content.len() {
            p.content[index] = make();
        } else {
            p.content.push(make());
        }
    }
    match ev {
        StreamEvent::TextStart { index } => slot(partial, *index, || {
            Content::Text(TextContent {
                text: String::new(),
                text_signature: None,
            })
        }),
        StreamEvent::TextDelta { index, delta } => {
            if let Some(Content::Text(t)) = partial.content.get_mut(*index) {
                t.text.push_str(delta);
            }
        }
        StreamEvent::TextEnd {
            index,
            content,
            signature,
        } => {
            if let Some(Content::Text(t)) = partial.content.get_mut(*index) {
                t.text.clone_from(content);
                t.text_signature.clone_from(signature);
            }
        }
        StreamEvent::ThinkingStart { index, signature } => slot(partial, *index, || {
            Content::Thinking(ThinkingContent {
                thinking: String::new(),
                thinking_signature: signature.clone(),
                redacted: None,
            })
        }),
        StreamEvent::ThinkingDelta { index, delta } => {
            if let Some(Content::Thinking(t)) = partial.content.get_mut(*index) {
                t.thinking.push_str(delta);
            }
        }
        StreamEvent::ThinkingEnd {
            index,
            content,
            signature,
        } => {
            if let Some(Content::Thinking(t)) = partial.content.get_mut(*index) {
                t.thinking.clone_from(content);
                t.thinking_signature.clone_from(signature);
            }
        }
        StreamEvent::ToolCallStart { index, id, name } => slot(partial, *index, || {
            Content::ToolCall(ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: json!({}),
                thought_signature: None,
                arguments_error: None,
            })
        }),
        StreamEvent::ToolCallDelta { .. } => {}
        StreamEvent::ToolCallEnd { index, tool_call } => {
            slot(partial, *index, || Content::ToolCall(tool_call.clone()))
        }
        StreamEvent::Meta { usage, response_id } => {
            partial.usage = *usage;
            if response_id.is_some() {
                partial.response_id.clone_from(response_id);
            }
        }
        StreamEvent::Start { .. } | StreamEvent::Done { .. } | StreamEvent::Error { .. } => {}
    }
}

impl Machine {
    /// Start a run with these prompt messages (may be empty for a continuation).
    pub(crate) fn start_run(&mut self, prompts: Vec<AgentMessage>) {
        self.start_run_with(prompts, None, Vec::new());
    }

    /// [`Machine::start_run`] with the system prompt an extension's `before_agent_start` set,
    /// and aborted before its first request when `aborted` (the ids of `abort`s that came while
    /// the extensions were asked) is not empty.
    pub(crate) fn start_run_with(
        &mut self,
        prompts: Vec<AgentMessage>,
        forced: Option<String>,
        aborted: Vec<Option<Value>>,
    ) {
        let Some(model) = self.state.model.clone() else {
            return;
        };
        self.abort_requested = false;
        let remote = self.offered_remote_tools();
        let tools = self.env.tools.clone();
        let (system_message, system_prompt, schemas) = if self.profile.agent.system_messages {
            let (update, text) = self.system_update(!prompts.is_empty(), &remote);
            if !prompts.is_empty() {
                self.plugins.mcp_connect_requested = true;
            }
            let schemas = crate::prompt::sections::request_tools(
                &self.env.tools,
                self.env.settings.codemode_presentation(),
                &self.profile.texts.system_prompt,
            );
            (update, text, schemas)
        } else {
            (None, self.system_prompt(), tool_schemas(&tools))
        };
        let forced_prompt = forced.is_some();
        let system_prompt = forced.unwrap_or(system_prompt);
        let run = Run {
            system_prompt,
            forced_prompt,
            model,
            thinking: self.state.thinking,
            tools,
            schemas,
            remote,
            new_messages: Vec::new(),
            phase: Phase::Starting,
            abort_waiters: Vec::new(),
            aborting: false,
            request_started: std::time::Instant::now(),
            loaded: Vec::new(),
        };
        self.run = Some(run);
        if !aborted.is_empty() {
            self.abort_requested = true;
            if let Some(run) = self.run.as_mut() {
                run.aborting = true;
                run.abort_waiters = aborted;
            }
        }
        self.emit(&Frame::AgentStart);
        self.emit(&Frame::TurnStart);
        if let Some(m) = system_message {
            self.deliver(AgentMessage::System(m));
        }
        for p in prompts {
            self.deliver(p);
        }
        let steering = self.queues.steering.take();
        self.continue_turn(steering, Source::Steering);
    }

    /// Emit and record one message that enters the context during this run.
    fn deliver(&mut self, m: AgentMessage) {
        if matches!(m, AgentMessage::User(_)) {
            self.overflow_recovery_attempted = false;
        }
        self.emit(&Frame::MessageStart { message: &m });
        self.emit(&Frame::MessageEnd { message: &m });
        self.record(m);
    }

    /// A completed message: into the context, the run's list and the session.
    fn record(&mut self, m: AgentMessage) {
        self.persist_message(&m);
        if let Some(run) = self.run.as_mut() {
            run.new_messages.push(m.clone());
        }
        self.state.messages.push(m);
    }

    pub(crate) fn emit_queue_update(&mut self) {
        let s = self.queues.steering.texts();
        let f = self.queues.follow_up.texts();
        self.emit(&Frame::QueueUpdate {
            steering: &s,
            follow_up: &f,
        });
    }

    /// Deliver pending messages, then ask the model. Each queued message is preceded by a
    /// `queue_update` showing what is still waiting (the reference removes a message from its
    /// queue display right before its `message_start`).
    fn continue_turn(&mut self, pending: Vec<Queued>, source: Source) {
        let texts: Vec<String> = pending.iter().map(|q| q.text.clone()).collect();
        for (i, q) in pending.into_iter().enumerate() {
            let rest = &texts[i + 1..];
            let (mut steering, mut follow_up) =
                (self.queues.steering.texts(), self.queues.follow_up.texts());
            let list = if source == Source::Steering {
                &mut steering
            } else {
                &mut follow_up
            };
            list.splice(0..0, rest.iter().cloned());
            self.emit(&Frame::QueueUpdate {
                steering: &steering,
                follow_up: &follow_up,
            });
            self.deliver(q.message);
        }
        self.start_llm_call();
    }

    fn start_llm_call(&mut self) {
        if let Some(run) = self.run.as_mut() {
            run.request_started = std::time::Instant::now();
        }
        let Some(run) = self.run.as_ref() else { return };
        if run.aborting {
            // The reference's loop does not look at the abort signal between turns: the next
            // request fails at once as aborted (spec 5.4 F; pi 0.87.1 words it as an error).
            let mut m = AssistantMessage::empty(&run.model.api, &run.model.provider, &run.model.id);
            let trailing = self.profile.texts.aborted_between_turns;
            m.stop_reason = match trailing.stop {
                crate::protocol::TrailingStop::Aborted => StopReason::Aborted,
                crate::protocol::TrailingStop::Error => StopReason::Error,
            };
            m.error_message = Some(trailing.text.to_string());
            self.finish_assistant(m, true);
            return;
        }
        if self.profile.agent.tool_changes == ToolChanges::Refresh
            && (!self.plugins.exts.is_empty() || !self.plugins.servers.is_empty())
        {
            // Extensions re-register and MCP servers change their tools between turns (under
            // 0.87 the turn's system message declared them already).
            let remote = self.offered_remote_tools();
            if let Some(run) = self.run.as_mut() {
                run.remote = remote;
            }
        }
        if self.plugins.context.is_none() && !self.plugins.subscribers("context").is_empty() {
            // pi's `context` event: the extensions see the messages and may replace what this
            // request sends; the request starts with their answers.
            self.ask_context();
            return;
        }
        self.send_llm_request(None);
    }

    /// The LLM request of the current turn, with the messages the `context` handlers returned
    /// (`None`: the context as it is).
    pub(crate) fn send_llm_request(&mut self, replaced: Option<Vec<AgentMessage>>) {
        let Some(run) = self.run.as_ref() else { return };
        let (api_key, model, auth) = match self.request_credentials(&run.model) {
            Ok(c) => c,
            Err(e) => {
                let mut m =
                    AssistantMessage::empty(&run.model.api, &run.model.provider, &run.model.id);
                m.stop_reason = StopReason::Error;
                m.error_message = Some(e);
                self.finish_assistant(m, true);
                return;
            }
        };
        let Some(run) = self.run.as_ref() else { return };
        // `Some(only)` while `codemode` is declared.
        let codemode = run
            .schemas
            .iter()
            .any(|t| t.name == crate::codemode::NAME)
            .then(|| self.env.settings.codemode_presentation().only);
        // Mode `only`: `codemode`'s description lists the MCP and extension tools too, as the
        // branch's system messages declared it.
        let codemode_description = (codemode == Some(true) && self.profile.agent.system_messages)
            .then(|| {
                crate::prompt::sections::Declared::of(&self.state.messages)
                    .tools
                    .into_iter()
                    .find(|t| t.name == crate::codemode::NAME)
                    .map(|t| t.description)
            })
            .flatten();
        let req = LlmRequest {
            api_key,
            system_prompt: run.system_prompt.clone(),
            // Under 0.87 the transcript's system messages stay in place (pi 0.87.1's agent sends
            // them); under 0.73 the system prompt holds them.
            messages: {
                let replaced = replaced.map(crate::message::Context::from);
                let context = replaced.as_ref().unwrap_or(&self.state.messages);
                // A forced prompt (or messages an extension chose) leaves no system message in
                // place: the request's head holds the prompt and the current tools.
                let keep_system =
                    self.profile.agent.system_messages && !run.forced_prompt && replaced.is_none();
                crate::context::to_request(context, self.env.settings.block_images(), keep_system)
            },
            tools: run
                .schemas
                .iter()
                .filter(|t| !run.remote.iter().any(|r| r.name == t.name))
                .cloned()
                .map(|mut t| {
                    if let (true, Some(d)) = (
                        t.name == crate::codemode::NAME,
                        codemode_description.as_ref(),
                    ) {
                        t.description = d.clone();
                    }
                    t
                })
                .chain(run.remote.iter().filter_map(|r| {
                    // While `codemode` is declared (pi 1.6.0): mode `on` says how scripts call
                    // the tool; mode `only` leaves it to scripts.
                    let description = match codemode {
                        None => r.description.clone(),
                        Some(true) => return None,
                        Some(false) => self.script_call_description(r),
                    };
                    Some(ToolSchema {
                        name: r.name.clone(),
                        description,
                        parameters: r.parameters.clone(),
                        constrained_sampling: None,
                    })
                }))
                // `--output-schema` / `outputSchema`: the final-answer tool (it wins its name).
                .filter(|t| self.limits.output.is_none() || t.name != FINAL_ANSWER)
                .chain(self.limits.output.as_ref().map(|p| p.schema.tool()))
                .collect(),
            thinking: run.thinking,
            session_id: Some(self.state.session_id.clone()),
            max_tokens: None,
            timeouts: Timeouts {
                connect: std::time::Duration::from_secs(self.env.settings.connect_timeout_secs()),
                stall: std::time::Duration::from_secs(
                    self.env.settings.stream_stall_timeout_secs(),
                ),
            },
            faux_script: self.env.faux_script.clone(),
            sdk: self.profile.llm.sdk,
            no_cache: false,
            tool_arguments_error: self.profile.llm.tool_arguments_error,
            extra: crate::llm::RequestExtra {
                // pi gives its agent the settings' budgets; summaries use the defaults.
                thinking_budgets: self.env.settings.thinking_budgets(),
                ..self.request_extra(&model, auth)
            },
            model,
        };
        if let Some(t) = self.limits.tally.as_mut() {
            t.count_turn();
        }
        self.generation += 1;
        let generation = self.generation;
        let tx = self.io.worker_tx.clone();
        let handle = crate::llm::stream::spawn(
            req,
            Box::new(move |event| {
                let event = Box::new(event);
                tx.send(Worker::Llm { generation, event }).is_ok()
            }),
        );
        if let Some(run) = self.run.as_mut() {
            run.phase = Phase::Streaming {
                generation,
                handle,
                partial: None,
                encoder: PartialEncoder::new(),
                usage_json: Vec::new(),
            };
        }
    }

    /// An event from an LLM stream thread.
    pub(crate) fn on_llm_event(&mut self, generation: u64, ev: StreamEvent) {
        let events = &self.profile.events;
        let live = events.update == UpdateShape::Live;
        let pending = events.pending_stop_reason;
        let full = self.env.partials == Partials::Full && !live;
        let Some(run) = self.run.as_mut() else { return };
        let Phase::Streaming {
            generation: g,
            partial,
            encoder,
            usage_json,
            ..
        } = &mut run.phase
        else {
            return;
        };
        if *g != generation {
            return; // a cancelled stream's late events
        }
        match ev {
            StreamEvent::Start { partial: mut p } => {
                if live {
                    *usage_json = usage_bytes(&p.usage);
                } else {
                    encoder.update(&StreamEvent::Start { partial: p.clone() }, &p);
                }
                *partial = Some(p.clone());
                if pending {
                    // pi 0.87.1 marks a message that is still streaming.
                    p.stop_reason = StopReason::Pending;
                }
                let m = AgentMessage::Assistant(p);
                self.emit(&Frame::MessageStart { message: &m });
            }
            StreamEvent::Done { message }
            | StreamEvent::Error {
                message,
                retry_after_ms: None,
            } => {
                let started = partial.is_some();
                self.finish_assistant(message, !started);
            }
            StreamEvent::Error {
                message,
                retry_after_ms,
            } => {
                self.retry.last_retry_after = retry_after_ms;
                let started = partial.is_some();
                self.finish_assistant(message, !started);
            }
            other => {
                let Some(p) = partial.as_mut() else { return };
                apply_event(p, &other);
                if let StreamEvent::Meta { .. } = &other {
                    if live {
                        *usage_json = usage_bytes(&p.usage);
                    }
                }
                if full {
                    encoder.update(&other, p);
                }
                let (kind, index) = match &other {
                    StreamEvent::TextStart { index } => (UpdateKind::TextStart, *index),
                    StreamEvent::TextDelta { index, delta } => {
                        (UpdateKind::TextDelta(delta), *index)
                    }
                    StreamEvent::TextEnd { index, content, .. } => {
                        (UpdateKind::TextEnd(content), *index)
                    }
                    StreamEvent::ThinkingStart { index, .. } => (UpdateKind::ThinkingStart, *index),
                    StreamEvent::ThinkingDelta { index, delta } => {
                        (UpdateKind::ThinkingDelta(delta), *index)
                    }
                    StreamEvent::ThinkingEnd { index, content, .. } => {
                        (UpdateKind::ThinkingEnd(content), *index)
                    }
                    StreamEvent::ToolCallStart { index, id, name } => {
                        (UpdateKind::ToolCallStart { id, name }, *index)
                    }
                    StreamEvent::ToolCallDelta { index, delta } => {
                        (UpdateKind::ToolCallDelta(delta), *index)
                    }
                    StreamEvent::ToolCallEnd { index, tool_call } => {
                        (UpdateKind::ToolCallEnd(tool_call), *index)
                    }
                    _ => return,
                };
                let body = if live {
                    UpdateBody::Live { usage_json }
                } else if full {
                    UpdateBody::Snapshot(encoder, p)
                } else {
                    UpdateBody::Lean
                };
                let line = crate::rpc::event::message_update(&kind, index, body);
                self.send(line);
            }
        }
    }

    /// The assistant message of this turn is final: `message_end`, then tools or the turn's end.
    fn finish_assistant(&mut self, mut message: AssistantMessage, emit_start: bool) {
        self.stamp_assistant(&mut message);
        let m = AgentMessage::Assistant(message);
        if emit_start {
            self.emit(&Frame::MessageStart { message: &m });
        }
        self.emit(&Frame::MessageEnd { message: &m });
        self.record(m.clone());
        let AgentMessage::Assistant(a) = &m else {
            return;
        };
        if let Some(t) = self.limits.tally.as_mut() {
            t.add_usage(a.usage.total_tokens, a.usage.cost.total);
        }
        self.retry_message_end(a);
        if matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) {
            self.emit(&Frame::TurnEnd {
                message: &m,
                tool_results: &[],
            });
            self.end_run();
            return;
        }
        let calls: Vec<ToolCall> = a.tool_calls().cloned().collect();
        if !calls.is_empty()
            && a.stop_reason == StopReason::Length
            && self.profile.agent.fail_truncated_tool_calls
        {
            self.fail_truncated_tool_calls(&m, &calls);
            return;
        }
        if calls.is_empty() {
            self.emit(&Frame::TurnEnd {
                message: &m,
                tool_results: &[],
            });
            self.after_turn(false, Vec::new());
        } else {
            self.start_tools(m, calls);
        }
    }

    /// What the version adds to a final assistant message: its request's wall time and the
    /// thinking level it ran at (`off` for a model without reasoning). (That pith computed its
    /// cost is marked where the provider's usage arrives: `llm::api::Builder::set_usage`.)
    fn stamp_assistant(&self, a: &mut AssistantMessage) {
        let events = &self.profile.events;
        let Some(run) = self.run.as_ref() else { return };
        if events.message_duration {
            a.duration_ms = Some(millis(run.request_started.elapsed()));
        }
        if events.message_thinking_level {
            a.thinking_level = Some(if run.model.reasoning {
                run.thinking
            } else {
                ThinkingLevel::Off
            });
        }
    }

    /// `--compat 0.87`: a reply cut by the output token limit may carry truncated arguments, so
    /// pi 0.87.1 runs none of its tool calls: each gets its `tool_execution_start`, then an error
    /// result saying so, one after the other; the run goes on with the next turn.
    fn fail_truncated_tool_calls(&mut self, assistant: &AgentMessage, calls: &[ToolCall]) {
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            self.emit(&Frame::ToolExecutionStart {
                tool_call_id: &call.id,
                tool_name: &call.name,
                args: &call.arguments,
                parent_tool_call_id: None,
            });
            let r = result_message(
                call,
                Err(format!(
                    "Tool call \"{}\" was not executed: the response hit the output token limit, so its arguments may be truncated. Re-issue the tool call with complete arguments.",
                    call.name
                )),
            );
            self.emit_tool_end(&r);
            let m = AgentMessage::ToolResult(r);
            self.deliver(m.clone());
            results.push(m);
        }
        self.emit(&Frame::TurnEnd {
            message: assistant,
            tool_results: &results,
        });
        self.after_turn(true, Vec::new());
    }

    /// Start a tool batch (spec 6.3, parallel mode): prepare every call in order (its
    /// `tool_execution_start`, lookup, validation and gate, immediate errors right after their
    /// start; in interrupt mode `immediate`, steering queued meanwhile skips the rest), then start
    /// the runnable ones together.
    fn start_tools(&mut self, assistant: AgentMessage, calls: Vec<ToolCall>) {
        self.batch += 1;
        let (cancel, token) = cancel_pair();
        let Some(run) = self.run.as_mut() else { return };
        run.phase = Phase::Tools(ToolBatch {
            batch: self.batch,
            assistant,
            slots: Vec::with_capacity(calls.len()),
            cancel,
            steering: Vec::new(),
            calls,
            runnable: Vec::new(),
            approved: Vec::new(),
            mutating: Vec::new(),
            held: Vec::new(),
            token,
            abandon: None,
            nested: Vec::new(),
        });
        self.prepare_tools();
    }

    pub(crate) fn batch_mut(&mut self) -> Option<&mut ToolBatch> {
        match self.run.as_mut().map(|r| &mut r.phase) {
            Some(Phase::Tools(b)) => Some(b),
            _ => None,
        }
    }

    /// The `codemode` call whose script made call `call_id` (a nested call), if any.
    pub(crate) fn parent_of(&self, call_id: &str) -> Option<String> {
        if !call_id.contains('/') {
            return None;
        }
        match self.run.as_ref().map(|r| &r.phase) {
            Some(Phase::Tools(b)) => b
                .nested
                .iter()
                .find(|n| b.calls.get(n.slot).is_some_and(|c| c.id == call_id))
                .map(|n| n.parent_id.clone()),
            _ => None,
        }
    }

    /// The tool (built-in, or an extension's / MCP server's) a call names in this run.
    pub(crate) fn resolve_tool(&self, name: &str) -> Option<Exec> {
        let run = self.run.as_ref()?;
        if let Some(r) = run.remote.iter().find(|r| r.name == name) {
            return Some(Exec::Remote(r.clone()));
        }
        run.tools
            .iter()
            .find(|t| t.name() == name)
            .map(|t| Exec::Builtin(t.clone()))
    }

    /// Prepare the calls not prepared yet. A gate that waits for an answer (an extension's
    /// `tool_call` handler, a `--confirm-tools` dialog) stops here; [`Machine::gate_done`]
    /// resumes. When every call is prepared, the runnable ones start.
    pub(crate) fn prepare_tools(&mut self) {
        loop {
            let aborting = self.run.as_ref().is_some_and(|r| r.aborting);
            let Some(b) = self.batch_mut() else { return };
            let (batch, i) = (b.batch, b.slots.len());
            let Some(call) = b.calls.get(i).cloned() else {
                break;
            };
            let parent = self.parent_of(&call.id);
            self.emit(&Frame::ToolExecutionStart {
                tool_call_id: &call.id,
                tool_name: &call.name,
                args: &call.arguments,
                parent_tool_call_id: parent.as_deref(),
            });
            if parent.is_some() {
                // The script's row of this call, as pi shows it: right after the call's start.
                self.publish_nested(i);
            }
            let mut result: Option<ToolResult> = None;
            let mut ready: Option<(Exec, Value)> = None;
            // A call of a script that already ended (its timeout, a failure) does not run.
            let orphan = self
                .batch_mut()
                .is_some_and(|b| b.nested.iter().any(|n| n.slot == i && n.delivered));
            let aborting = aborting || orphan;
            let final_answer = self.final_answer(&call, aborting);
            let refused = self
                .limits
                .tally
                .as_mut()
                .filter(|_| final_answer.is_none())
                .and_then(|t| t.before_call(&call.name, &call.arguments).err());
            let exec = if parent.is_some() {
                self.resolve_script_tool(&call.name)
            } else {
                self.resolve_tool(&call.name)
            };
            match exec {
                _ if final_answer.is_some() => result = final_answer,
                _ if refused.is_some() => {
                    result = refused.map(|r| Err(crate::limits::Tally::refusal(&r)))
                }
                None => result = Some(Err(format!("Tool {} not found", call.name))),
                Some(_) if call.arguments_error.is_some() => {
                    result = call
                        .arguments_error
                        .as_ref()
                        .map(|e| Err(format!("Invalid arguments for tool \"{}\": {e}", call.name)))
                }
                Some(exec) => {
                    match validate_for(&exec, &call.arguments, self.profile.tools.validation) {
                        Err(e) => result = Some(Err(e)),
                        Ok(_) if aborting => result = Some(Err(crate::tools::ABORTED.to_string())),
                        Ok(args) if self.gate_needed(&call.name) => {
                            if let Some(b) = self.batch_mut() {
                                b.slots.push(Slot {
                                    call: call.clone(),
                                    result: None,
                                    started: None,
                                });
                            }
                            match self.start_gate(batch, i, &call, exec.clone(), args) {
                                None => return, // waiting: gate_done resumes
                                Some(Ok(args)) => ready = Some((exec, args)),
                                Some(Err(e)) => result = Some(Err(e)),
                            }
                            if let Some(b) = self.batch_mut() {
                                b.slots.pop();
                            }
                        }
                        Ok(args) => ready = Some((exec, args)),
                    }
                }
            }
            let r = result.map(|r| result_message(&call, r));
            if let Some(r) = &r {
                self.emit_tool_end(r);
            }
            let Some(b) = self.batch_mut() else { return };
            b.slots.push(Slot {
                call,
                result: r,
                started: None,
            });
            if let Some((exec, args)) = ready {
                b.runnable.push((i, exec, args));
            }
            if self.skip_for_steering(i) {
                break;
            }
        }
        self.spawn_runnable();
    }

    /// A call of the final-answer tool in a run with an output schema: its result (the answer
    /// checked against the schema; not a tool call the run limits count). `None`: another call.
    fn final_answer(&mut self, call: &ToolCall, aborting: bool) -> Option<ToolResult> {
        if call.name != FINAL_ANSWER {
            return None;
        }
        let p = self.limits.output.as_mut()?;
        if aborting {
            return Some(Err(crate::tools::ABORTED.to_string()));
        }
        Some(p.answer(&call.arguments).map(|text| ToolOutput {
            content: vec![Content::text(text)],
            ..ToolOutput::default()
        }))
    }

    /// The gate of call `index` of `batch` decided: `Ok(arguments)` runs it, `Err` is its
    /// error result. Preparation goes on with the next call.
    pub(crate) fn gate_done(
        &mut self,
        batch: u64,
        index: usize,
        exec: Exec,
        decision: Result<Value, String>,
    ) {
        let Some(b) = self.batch_mut() else { return };
        if b.batch != batch || b.slots.len() != index + 1 {
            return;
        }
        if b.slots[index].result.is_some() {
            // Ended meanwhile (a codemode script's nested call whose script ended): the calls
            // after it still need their turn.
            self.prepare_tools();
            return;
        }
        match decision {
            Ok(args) => b.runnable.push((index, exec, args)),
            Err(e) => {
                let r = result_message(&b.slots[index].call, Err(e));
                b.slots[index].result = Some(r.clone());
                self.emit_tool_end(&r);
            }
        }
        if self.skip_for_steering(index) {
            self.spawn_runnable();
            return;
        }
        self.prepare_tools();
    }

    /// Steering arrived while call `i` was prepared: the runnable calls and the rest are
    /// skipped (their steering is delivered next turn). True if it did.
    fn skip_for_steering(&mut self, i: usize) -> bool {
        // Interrupt mode `wait` (the default, pi's behaviour) never skips a call: steering
        // waits for the whole batch. `immediate` (oh-my-pi) skips the calls not yet started.
        if self.queues.interrupt_mode != crate::rpc::command::InterruptMode::Immediate {
            return false;
        }
        let steering = self.queues.steering.take();
        if steering.is_empty() {
            return false;
        }
        let Some(b) = self.batch_mut() else {
            return false;
        };
        b.steering = steering;
        let runnable: Vec<usize> = b.runnable.drain(..).map(|(j, _, _)| j).collect();
        let rest: Vec<ToolCall> = b.calls[i + 1..].to_vec();
        for j in runnable {
            let Some(b) = self.batch_mut() else { break };
            let r = result_message(&b.slots[j].call, Err(SKIPPED.to_string()));
            b.slots[j].result = Some(r.clone());
            self.emit_tool_end(&r);
        }
        for c in rest {
            let parent = self.parent_of(&c.id);
            self.emit(&Frame::ToolExecutionStart {
                tool_call_id: &c.id,
                tool_name: &c.name,
                args: &c.arguments,
                parent_tool_call_id: parent.as_deref(),
            });
            let r = result_message(&c, Err(SKIPPED.to_string()));
            self.emit_tool_end(&r);
            if let Some(b) = self.batch_mut() {
                b.slots.push(Slot {
                    call: c,
                    result: Some(r),
                    started: None,
                });
            }
        }
        true
    }

    /// Every call is prepared: start the runnable ones (built-ins on worker threads, remote
    /// ones as messages to their process).
    pub(crate) fn spawn_runnable(&mut self) {
        let aborting = self.run.as_ref().is_some_and(|r| r.aborting);
        let cwd = self.env.cwd.clone();
        let shell_path = self.env.settings.shell_path().map(str::to_string);
        let shell_command_prefix = self.env.settings.shell_command_prefix().map(str::to_string);
        let run_model = self.run.as_ref().map(|r| (r.model.clone(), r.thinking));
        let thinking = run_model.as_ref().map_or(self.state.thinking, |(_, t)| *t);
        let mut env = tool_env(
            self.profile,
            &self.state.session_id,
            self.state.session.file(),
            run_model
                .as_ref()
                .map(|(m, _)| (m.provider.as_str(), m.id.as_str())),
            thinking.as_str(),
        );
        let sandbox = self.env.sandbox.clone();
        if let Some(sb) = &sandbox {
            sb.filter_env(&mut env);
        }
        let waits = !aborting
            && self.plugins.cfg.mcp_dialect == crate::protocol::McpDialect::Pi
            && self.plugins.servers_starting();
        let Some(b) = self.batch_mut() else { return };
        let batch = b.batch;
        if waits && b.runnable.iter().any(|(_, e, a)| needs_all_servers(e, a)) {
            // pi 1.6.0 waits for the servers still starting before such calls run (their
            // start-up deadline bounds the wait); `check_startup_done` resumes here.
            self.plugins.tools_wait_servers = Some(batch);
            return;
        }
        let runnable = std::mem::take(&mut b.runnable);
        let ctx = ToolContext {
            env,
            cwd,
            cancel: b.token.clone(),
            shell_path,
            shell_command_prefix,
            profile: &self.profile.tools,
            approved_target: None,
        };
        for (index, exec, args) in runnable {
            let Some(call) = self
                .batch_mut()
                .and_then(|b| b.slots.get(index))
                .map(|s| s.call.clone())
            else {
                continue;
            };
            if self
                .batch_mut()
                .and_then(|b| b.slots.get(index))
                .is_some_and(|s| s.result.is_some())
            {
                continue; // a held call skipped or aborted meanwhile
            }
            if aborting {
                let r = result_message(&call, Err(crate::tools::ABORTED.to_string()));
                self.emit_tool_end(&r);
                if let Some(b) = self.batch_mut() {
                    b.slots[index].result = Some(r);
                }
                continue;
            }
            let tool = match exec {
                Exec::Builtin(t) if t.name() == crate::codemode::NAME => {
                    if let Some(b) = self.batch_mut() {
                        b.slots[index].started = Some(std::time::Instant::now());
                    }
                    self.start_script(batch, index, &call, &args);
                    continue;
                }
                Exec::Builtin(t) if t.runs_in_machine() => {
                    if let Some(b) = self.batch_mut() {
                        b.slots[index].started = Some(std::time::Instant::now());
                    }
                    let r = self.run_machine_tool(t.name(), &args);
                    self.tool_finished(batch, index, r);
                    continue;
                }
                Exec::Builtin(t) => {
                    // Another call of this batch is changing the same file: this one waits for it.
                    let key = crate::tools::mutation::key(t.name(), &args, &ctx.cwd);
                    if let (Some(k), Some(b)) = (&key, self.batch_mut()) {
                        if b.mutating.iter().any(|(_, m)| m == k) {
                            b.held.push((index, Exec::Builtin(t), args));
                            continue;
                        }
                    }
                    if let (Some(k), Some(b)) = (key, self.batch_mut()) {
                        b.mutating.push((index, k));
                    }
                    t
                }
                Exec::Remote(rt) => {
                    if let Some(b) = self.batch_mut() {
                        b.slots[index].started = Some(std::time::Instant::now());
                    }
                    if let Err(e) = self.start_remote_tool(batch, index, &rt, &call, &args) {
                        // pi 1.6.0: a call refused at once (an unknown resource server, say) is
                        // a result like any other (with its duration).
                        if self.plugins.cfg.mcp_dialect == crate::protocol::McpDialect::Pi
                            && !matches!(rt.owner, crate::core::plugins::Owner::Ext(_))
                        {
                            self.tool_finished(batch, index, Err(e));
                            continue;
                        }
                        let r = result_message(&call, Err(e));
                        self.emit_tool_end(&r);
                        if let Some(b) = self.batch_mut() {
                            b.slots[index].result = Some(r);
                        }
                    }
                    continue;
                }
            };
            let initial = tool.initial_update();
            if let Some(b) = self.batch_mut() {
                b.slots[index].started = Some(std::time::Instant::now());
            }
            let tx = self.io.worker_tx.clone();
            let mut ctx = ctx.clone();
            ctx.approved_target = self.batch_mut().and_then(|b| {
                b.approved
                    .iter()
                    .find(|(i, _)| *i == index)
                    .map(|(_, t)| t.clone())
            });
            let sandbox = sandbox.clone();
            // Not `THREAD_STACK`: a tool thread lives for one call, and runs third-party code
            // on the model's input that recurses (grep's and find's patterns compiled by the
            // regex crates, nesting up to their limit of 250; edit's diff; the walkers). An
            // overflow would abort pith, so these threads keep the default 2 MiB.
            let spawned = std::thread::Builder::new()
                .name(format!("tool-{}", tool.name()))
                .spawn(move || {
                    // `--sandbox`: this thread (new for this one call, ended with it) is
                    // confined before it touches anything the call asked for; fail closed.
                    if let Some(sb) = &sandbox {
                        if let Err(e) = sb.enter() {
                            let _ = tx.send(Worker::Tool {
                                batch,
                                index,
                                event: ToolEvent::Done(Err(format!(
                                    "The sandbox could not be entered, so the tool did not run: {e}"
                                ))),
                            });
                            return;
                        }
                    }
                    let mut on_update = |o: ToolOutput| {
                        let _ = tx.send(Worker::Tool {
                            batch,
                            index,
                            event: ToolEvent::Update(o),
                        });
                    };
                    let result = tool.execute(&args, &ctx, &mut on_update);
                    let _ = tx.send(Worker::Tool {
                        batch,
                        index,
                        event: ToolEvent::Done(result),
                    });
                });
            if spawned.is_ok() {
                if let Some(first) = initial {
                    let partial = result_json(&first.content, first.details.as_ref());
                    let parent = self.parent_of(&call.id);
                    self.emit(&Frame::ToolExecutionUpdate {
                        tool_call_id: &call.id,
                        tool_name: &call.name,
                        args: &call.arguments,
                        partial_result: &partial,
                        parent_tool_call_id: parent.as_deref(),
                    });
                }
            }
            if let Err(e) = spawned {
                let r = result_message(&call, Err(format!("Cannot start tool thread: {e}")));
                self.emit_tool_end(&r);
                if let Some(b) = self.batch_mut() {
                    b.slots[index].result = Some(r);
                }
            }
        }
        self.maybe_finish_tools();
    }

    /// The call of slot `index` of the current batch `batch`.
    pub(crate) fn tool_call_of(&self, batch: u64, index: usize) -> Option<ToolCall> {
        match self.run.as_ref().map(|r| &r.phase) {
            Some(Phase::Tools(b)) if b.batch == batch => b.slots.get(index).map(|s| s.call.clone()),
            _ => None,
        }
    }

    pub(crate) fn emit_tool_end(&mut self, r: &ToolResultMessage) {
        self.emit_tool_end_shown(r, None);
    }

    /// [`Self::emit_tool_end`] with what only `tool_execution_end.result` shows of a tool's own
    /// result (pi 1.6.0): its `structuredContent`, and `isError` when the tool marked it failed.
    fn emit_tool_end_shown(&mut self, r: &ToolResultMessage, shown: Option<&ToolOutput>) {
        let mut result = result_json(&r.content, r.details.as_ref());
        if let (Some(o), Value::Object(m)) = (shown, &mut result) {
            if let Some(sc) = &o.structured {
                m.insert("structuredContent".into(), sc.clone());
            }
            if o.is_error {
                m.insert("isError".into(), Value::Bool(true));
            }
        }
        let parent = self.parent_of(&r.tool_call_id);
        self.emit(&Frame::ToolExecutionEnd {
            tool_call_id: &r.tool_call_id,
            tool_name: &r.tool_name,
            result: &result,
            is_error: r.is_error,
            duration_ms: r.duration_ms,
            parent_tool_call_id: parent.as_deref(),
        });
    }

    /// A tool worker reported.
    pub(crate) fn on_tool_event(&mut self, batch: u64, index: usize, ev: ToolEvent) {
        let Some(run) = self.run.as_mut() else { return };
        let Phase::Tools(b) = &mut run.phase else {
            return;
        };
        if b.batch != batch {
            return;
        }
        let Some(slot) = b.slots.get_mut(index) else {
            return;
        };
        if slot.result.is_some() {
            return; // already skipped
        }
        match ev {
            ToolEvent::Update(o) => {
                let (id, name, args) = (
                    slot.call.id.clone(),
                    slot.call.name.clone(),
                    slot.call.arguments.clone(),
                );
                let partial = result_json(&o.content, o.details.as_ref());
                let parent = self.parent_of(&id);
                self.emit(&Frame::ToolExecutionUpdate {
                    tool_call_id: &id,
                    tool_name: &name,
                    args: &args,
                    partial_result: &partial,
                    parent_tool_call_id: parent.as_deref(),
                });
            }
            ToolEvent::Done(r) => self.tool_finished(batch, index, r),
        }
    }

    /// Record the final result of call `index` of `batch` (after extensions reviewed it).
    pub(crate) fn finish_tool_slot(&mut self, batch: u64, index: usize, r: ToolResult) {
        let timed = self.profile.events.message_duration;
        let record = self.scripts.record_of(batch, index);
        let Some(b) = self.batch_mut() else { return };
        if b.batch != batch {
            return;
        }
        let Some(slot) = b.slots.get_mut(index) else {
            return;
        };
        if slot.result.is_some() {
            return; // already skipped or aborted
        }
        let shown = r.as_ref().ok().map(|o| ToolOutput {
            structured: o.structured.clone(),
            is_error: o.is_error,
            ..ToolOutput::default()
        });
        let mut msg = result_message(&slot.call, r);
        if timed {
            msg.duration_ms = slot.started.map(|t| millis(t.elapsed()));
        }
        if let Some(n) = b.nested.iter_mut().find(|n| n.slot == index) {
            n.structured = shown.as_ref().and_then(|o| o.structured.clone());
        }
        let Some(slot) = b.slots.get_mut(index) else {
            return;
        };
        msg.nested_calls = record;
        slot.result = Some(msg.clone());
        // Its file is free: the calls held for it start (in call order; a later one on the same
        // file is held again behind the first).
        b.mutating.retain(|(i, _)| *i != index);
        let release = !b.held.is_empty();
        if release {
            let held = std::mem::take(&mut b.held);
            b.runnable.extend(held);
        }
        self.emit_tool_end_shown(&msg, shown.as_ref());
        if self.queues.interrupt_mode == crate::rpc::command::InterruptMode::Immediate
            && !self.queues.steering.is_empty()
        {
            self.skip_running_tools();
        }
        if release {
            self.spawn_runnable();
        } else {
            self.maybe_finish_tools();
        }
    }

    /// Interrupt mode `immediate`: a steering message is waiting, so calls still running are
    /// stopped and reported as skipped.
    fn skip_running_tools(&mut self) {
        let Some(run) = self.run.as_mut() else { return };
        let Phase::Tools(b) = &mut run.phase else {
            return;
        };
        let mut skipped = Vec::new();
        for slot in b.slots.iter_mut().filter(|s| s.result.is_none()) {
            let r = result_message(&slot.call, Err(SKIPPED.to_string()));
            slot.result = Some(r.clone());
            skipped.push(r);
        }
        if skipped.is_empty() {
            return;
        }
        b.cancel.cancel();
        let batch = b.batch;
        self.cancel_remote_calls(batch);
        self.drop_scripts(batch);
        for r in &skipped {
            self.emit_tool_end(r);
        }
    }

    /// When every call has a result: the tool-result messages in call order, `turn_end`, next.
    pub(crate) fn maybe_finish_tools(&mut self) {
        self.deliver_nested();
        let Some(run) = self.run.as_mut() else { return };
        let Phase::Tools(b) = &mut run.phase else {
            return;
        };
        if b.slots.len() < b.calls.len() || b.slots.iter().any(|s| s.result.is_none()) {
            return;
        }
        let results: Vec<AgentMessage> = b
            .slots
            .iter()
            .enumerate()
            .filter(|(i, _)| !b.nested.iter().any(|n| n.slot == *i))
            .filter_map(|(_, s)| s.result.clone())
            .map(AgentMessage::ToolResult)
            .collect();
        let assistant = b.assistant.clone();
        let steering = std::mem::take(&mut b.steering);
        let batch = b.batch;
        self.drop_scripts(batch);
        for r in &results {
            self.deliver(r.clone());
        }
        self.emit(&Frame::TurnEnd {
            message: &assistant,
            tool_results: &results,
        });
        self.after_turn(true, steering);
    }

    /// After `turn_end`: another turn (tool results, steering, follow-ups) or the end of the run.
    fn after_turn(&mut self, had_tool_calls: bool, steering: Vec<Queued>) {
        self.flush_after_turn_messages();
        let pending = if steering.is_empty() {
            self.queues.steering.take()
        } else {
            steering
        };
        let mut had_tool_calls = had_tool_calls;
        if pending.is_empty() {
            let more = !self.queues.follow_up.is_empty();
            let next = self
                .limits
                .output
                .as_mut()
                .map(|p| p.after_turn(had_tool_calls, more));
            match next {
                // The final answer is in: the run ends as after a reply without tool calls.
                Some(AfterTurn::Answered) => had_tool_calls = false,
                Some(AfterTurn::Failed) => {
                    self.end_run();
                    return;
                }
                Some(AfterTurn::Remind(text)) => {
                    if self.limit_ends_run() {
                        return;
                    }
                    self.emit(&Frame::TurnStart);
                    self.declare_tool_changes();
                    self.deliver(AgentMessage::User(crate::message::UserMessage {
                        content: crate::message::UserContent::Blocks(vec![Content::text(text)]),
                        timestamp: now_ms(),
                    }));
                    self.start_llm_call();
                    return;
                }
                Some(AfterTurn::Normal) | None => {}
            }
        }
        if had_tool_calls || !pending.is_empty() {
            if self.limit_ends_run() {
                return;
            }
            self.emit(&Frame::TurnStart);
            self.declare_tool_changes();
            self.continue_turn(pending, Source::Steering);
            return;
        }
        if !self.queues.follow_up.is_empty() && self.limit_ends_run() {
            return;
        }
        let follow = self.queues.follow_up.take();
        if !follow.is_empty() {
            self.emit(&Frame::TurnStart);
            self.declare_tool_changes();
            self.continue_turn(follow, Source::FollowUp);
            return;
        }
        self.end_run();
    }

    /// `--compat 0.87`, before every turn of a run after its first: pi 0.87.1 rebuilds the
    /// prompt sections with the tools active now (an extension re-registered, an MCP server's
    /// list changed) and declares what changed in a `role:"system"` message right after
    /// `turn_start` (changed sections, `toolsAdded`, `toolsRemoved`; no sections key when only
    /// tools changed). The run's requests then carry the new prompt and tools.
    fn declare_tool_changes(&mut self) {
        if self.profile.agent.tool_changes != ToolChanges::Declare || self.run.is_none() {
            return;
        }
        let mut remote = self.offered_remote_tools();
        // pi 1.6.0 registers the tools of an MCP server that connected or whose list changed
        // during a run for the next prompt: only `tool_search` declares MCP tools mid-run.
        if self.plugins.cfg.mcp_dialect == crate::protocol::McpDialect::Pi
            && let Some(run) = self.run.as_ref()
        {
            remote.retain(|t| {
                !matches!(t.owner, crate::core::plugins::Owner::Mcp { .. })
                    || run.remote.iter().any(|r| r.name == t.name)
                    || run.loaded.contains(&t.name)
            });
        }
        let (update, text) = self.system_update(true, &remote);
        if let Some(run) = self.run.as_mut() {
            run.system_prompt = text;
            run.remote = remote;
        }
        if let Some(m) = update {
            self.deliver(AgentMessage::System(m));
        }
    }

    /// `agent_end`, answer waiting aborts, then what follows a run.
    fn end_run(&mut self) {
        let Some(run) = self.run.take() else { return };
        let last = run.new_messages.iter().rev().find_map(|m| match m {
            AgentMessage::Assistant(a) => Some(a.clone()),
            _ => None,
        });
        // A limit ended the run: no retry follows, as after an abort.
        let stopped = run.aborting
            || self
                .limits
                .tally
                .as_ref()
                .is_some_and(|t| t.reached.is_some());
        self.announce_output();
        self.announce_limit();
        // pi 0.87.1 says on `agent_end` whether an auto-retry follows (decided as after_run does).
        let will_retry = self.profile.events.agent_end_will_retry.then(|| {
            !stopped
                && self.pending_prompt.is_none()
                && last.as_ref().is_some_and(|a| self.retry_planned(a))
        });
        self.emit(&Frame::AgentEnd {
            messages: &run.new_messages,
            will_retry,
        });
        // pi 0.73.1 answers `abort` right after `agent_end`; pi 0.87.1 once the run has settled.
        let answer_aborts = |m: &mut Machine| {
            for id in &run.abort_waiters {
                let line = crate::rpc::response::success(id.as_ref(), "abort", None);
                m.send(line);
            }
        };
        if self.profile.answers.abort == AbortAnswer::AfterSettle {
            self.after_run(last, stopped);
            answer_aborts(self);
        } else {
            answer_aborts(self);
            self.after_run(last, stopped);
        }
    }

    /// A prompt's run starts: its limits (the prompt's own over the flags' and settings'), a
    /// fresh tally and, with a deadline, the timer. No limit: no tally, nothing changes.
    pub(crate) fn begin_limits(&mut self, own: Option<&crate::limits::Limits>) {
        let limits = match own {
            Some(o) => self.limits.default_limits.overridden_by(o),
            None => self.limits.default_limits,
        };
        self.limits.deadline = None; // dropping the handle stops an earlier prompt's timer
        self.limits.prompt_started = std::time::Instant::now();
        self.limits.output = self
            .limits
            .default_output
            .clone()
            .map(crate::output_schema::Progress::new);
        if limits.is_empty() && self.heartbeat.is_none() {
            self.limits.tally = None;
            return;
        }
        // With heartbeats and no limit the tally only counts (it never reaches a limit).
        self.limits.tally = Some(crate::limits::Tally::new(limits));
        self.arm_heartbeat();
        if let Some(ms) = limits.deadline_ms {
            self.limits.deadline_seq += 1;
            let cancel = crate::io::timer::after(
                std::time::Duration::from_millis(ms),
                self.io.worker_tx.clone(),
                Worker::DeadlineDue {
                    id: self.limits.deadline_seq,
                },
            );
            self.limits.deadline =
                Some((self.limits.deadline_seq, std::time::Instant::now(), cancel));
        }
    }

    /// Before another turn: a limit that forbids its request ends the run here (true).
    fn limit_ends_run(&mut self) -> bool {
        let aborting = self.run.as_ref().is_some_and(|r| r.aborting);
        let Some(t) = self.limits.tally.as_mut() else {
            return false;
        };
        // An `abort` of the host ends the run as pi's does (not as a limit).
        if aborting && t.reached.is_none() {
            return false;
        }
        if t.before_turn().is_none() {
            return false;
        }
        self.end_run();
        true
    }

    /// `structured_output` (with an output schema): the accepted answer, or the errors once no
    /// correction is left. A run an error, an abort or a limit ended has neither.
    fn announce_output(&mut self) {
        let done = self
            .limits
            .output
            .as_ref()
            .is_some_and(|p| p.answer.is_some() || p.failed);
        let Some(p) = self.limits.output.take_if(|_| done) else {
            return;
        };
        self.emit(&match &p.answer {
            Some(value) => Frame::StructuredOutput {
                valid: true,
                value: Some(value),
                corrections: None,
                errors: None,
            },
            None => Frame::StructuredOutput {
                valid: false,
                value: None,
                corrections: Some(p.corrections),
                errors: Some(&p.last_errors),
            },
        });
    }

    /// `run_limit_reached`, once per run a limit ended.
    pub(crate) fn announce_limit(&mut self) {
        let Some(t) = self.limits.tally.as_mut() else {
            return;
        };
        let Some(r) = t.reached.filter(|_| !t.announced) else {
            return;
        };
        t.announced = true;
        self.emit(&Frame::RunLimitReached {
            limit: r.kind.name(),
            value: r.value,
            used: r.used,
        });
    }

    /// `--heartbeat`: (re)start the timer of the next beat.
    pub(crate) fn arm_heartbeat(&mut self) {
        let Some(every) = self.heartbeat.as_ref().map(|h| h.every) else {
            return;
        };
        self.heartbeat_seq += 1;
        let cancel = crate::io::timer::after(
            every,
            self.io.worker_tx.clone(),
            Worker::HeartbeatDue {
                id: self.heartbeat_seq,
            },
        );
        self.heartbeat_timer = Some((self.heartbeat_seq, cancel));
    }

    /// A heartbeat is due: while a run, its retry wait or a compaction is under way, one
    /// `heartbeat` event (or a touch of `--heartbeat-file`), and the next one armed; when idle,
    /// the timer stops (the next prompt starts it again).
    pub(crate) fn on_heartbeat_due(&mut self, id: u64) {
        if self.heartbeat_timer.as_ref().is_none_or(|(i, _)| *i != id) {
            return;
        }
        let activity = if self.compaction.is_some() {
            "compacting"
        } else {
            match self.run.as_ref().map(|r| &r.phase) {
                Some(Phase::Tools(_)) => "tool",
                Some(_) => "streaming",
                None if self.retry.wait.is_some() || self.retry.continue_wait.is_some() => {
                    "retry_wait"
                }
                None => {
                    self.heartbeat_timer = None;
                    return;
                }
            }
        };
        let file = self.heartbeat.as_ref().and_then(|h| h.file.clone());
        match file {
            // The touch is disk I/O: on a short thread of its own, never on the machine's (a
            // slow or full disk must not hold up the stream the beat reports on).
            Some(path) => {
                let spawned = std::thread::Builder::new()
                    .name("heartbeat-file".into())
                    .stack_size(crate::THREAD_STACK)
                    .spawn(move || {
                        let touched = std::fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(&path)
                            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
                        if let Err(e) = touched {
                            eprintln!(
                                "pith: cannot touch the heartbeat file {}: {e}",
                                path.display()
                            );
                        }
                    });
                if spawned.is_err() {
                    eprintln!("pith: cannot start the heartbeat file's thread");
                }
            }
            None => {
                let elapsed = u64::try_from(self.limits.prompt_started.elapsed().as_millis())
                    .unwrap_or(u64::MAX);
                let (turns, tool_calls, tokens, cost) =
                    self.limits.tally.as_ref().map_or((0, 0, 0, 0.0), |t| {
                        (t.turns, t.tool_calls, t.tokens, t.cost_usd)
                    });
                self.emit(&Frame::Heartbeat {
                    elapsed_ms: elapsed,
                    turns,
                    tool_calls,
                    tokens,
                    cost_usd: cost,
                    activity,
                });
            }
        }
        self.arm_heartbeat();
    }

    /// The run's deadline passed: a running stream or tool batch is aborted as by `abort` (the
    /// run then ends with `run_limit_reached`); an auto-retry or continuation still waiting is
    /// cancelled instead of started.
    pub(crate) fn on_deadline_due(&mut self, id: u64) {
        let Some(started) = self
            .limits
            .deadline
            .as_ref()
            .filter(|(i, _, _)| *i == id)
            .map(|(_, at, _)| *at)
        else {
            return;
        };
        let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let Some(t) = self.limits.tally.as_mut() else {
            return;
        };
        if t.reached.is_some() {
            return;
        }
        if self.run.is_some() {
            t.deadline_passed(elapsed);
            self.abort_run(None);
        } else if self.retry.wait.is_some() || self.retry.continue_wait.is_some() {
            t.deadline_passed(elapsed);
            if self.retry.continue_wait.take().is_some() {
                self.state.messages = self.state.session.build_context().into();
            }
            self.cancel_retry();
            self.announce_limit();
            self.settle();
        }
    }

    /// Abort the current run; the response is sent once the run has ended. `waiter`:
    /// `Some(id)` of an `abort` command to answer after `agent_end` (`Some(None)` when it had no
    /// id); `None` when nobody waits for an `abort` response (`abort_and_prompt`, shutdown).
    pub(crate) fn abort_run(&mut self, waiter: Option<Option<Value>>) -> bool {
        let Some(run) = self.run.as_mut() else {
            return false;
        };
        if let Some(id) = waiter {
            run.abort_waiters.push(id);
        }
        if run.aborting {
            return true;
        }
        run.aborting = true;
        match &mut run.phase {
            Phase::Streaming {
                handle, partial, ..
            } => {
                handle.cancel();
                let (message, started) = match partial.take() {
                    Some(mut p) => {
                        p.stop_reason = StopReason::Aborted;
                        p.error_message = Some(crate::llm::stream::ABORTED_MID_STREAM.to_string());
                        (p, true)
                    }
                    None => {
                        let mut m = AssistantMessage::empty(
                            &run.model.api,
                            &run.model.provider,
                            &run.model.id,
                        );
                        m.stop_reason = StopReason::Aborted;
                        m.error_message =
                            Some(crate::llm::stream::ABORTED_BEFORE_RESPONSE.to_string());
                        (m, false)
                    }
                };
                self.generation += 1; // ignore the stream's late events
                self.finish_assistant(message, !started);
            }
            Phase::Tools(b) => {
                b.cancel.cancel();
                b.abandon = Some(crate::io::timer::after(
                    ABORT_GRACE,
                    self.io.worker_tx.clone(),
                    Worker::ToolsAbandoned { batch: b.batch },
                ));
                let batch = b.batch;
                self.abort_remote(batch);
                self.abort_scripts(batch);
                if self.plugins.tools_wait_servers.take().is_some() {
                    self.spawn_runnable();
                }
            }
            Phase::Starting => {
                if self.plugins.context.take().is_some() {
                    // Waiting for `context` answers: the request fails at once as aborted (late
                    // answers are ignored).
                    self.start_llm_call();
                }
            }
        }
        true
    }

    /// [`ABORT_GRACE`] after an abort: calls that have not stopped are ended as aborted, so
    /// the abort is answered whatever their workers are doing.
    pub(crate) fn on_tools_abandoned(&mut self, batch: u64) {
        let Some(run) = self.run.as_mut() else { return };
        let Phase::Tools(b) = &mut run.phase else {
            return;
        };
        if b.batch != batch {
            return;
        }
        let mut ended = Vec::new();
        for slot in b.slots.iter_mut().filter(|s| s.result.is_none()) {
            let r = result_message(&slot.call, Err(crate::tools::ABORTED.to_string()));
            slot.result = Some(r.clone());
            ended.push(r);
        }
        for r in &ended {
            eprintln!(
                "pith: tool call {} ({}) did not stop within {} ms of the abort; abandoned",
                r.tool_call_id,
                r.tool_name,
                ABORT_GRACE.as_millis()
            );
            self.emit_tool_end(r);
        }
        self.maybe_finish_tools();
    }
}

/// pi 1.6.0: a call that needs the MCP servers started: `tool_search` and the resource tools
/// (every server), a codemode script that names an MCP tool or searches the tools.
fn needs_all_servers(exec: &Exec, args: &Value) -> bool {
    match exec {
        Exec::Builtin(t) if t.name() == crate::tools::tool_search::NAME => true,
        Exec::Builtin(t) if t.name() == crate::codemode::NAME => {
            let code = args.get("code").and_then(Value::as_str).unwrap_or("");
            [
                "mcp__",
                "searchTools",
                "ALL_TOOLS",
                "describeTool",
                "describeNamespace",
            ]
            .iter()
            .any(|k| code.contains(k))
        }
        Exec::Builtin(_) => false,
        Exec::Remote(rt) => matches!(rt.owner, crate::core::plugins::Owner::McpResources(_)),
    }
}

/// Variables every child process gets (pi sets them on its own process): the profile's
/// `child_env` (`PI_CODING_AGENT`, and since 0.84 `AI_AGENT`).
pub(crate) fn child_env(profile: &Profile) -> Vec<(String, Option<String>)> {
    profile
        .agent
        .child_env
        .iter()
        .map(|(k, v)| (k.to_string(), Some(v.to_string())))
        .collect()
}

/// The bash tool's environment: [`child_env`], and with the profile's `session_tool_env` the
/// session's `PI_SESSION_ID`, `PI_SESSION_FILE` (removed for an in-memory session),
/// `PI_PROVIDER`, `PI_MODEL` and `PI_REASONING_LEVEL`.
fn tool_env(
    profile: &Profile,
    session_id: &str,
    session_file: Option<&std::path::Path>,
    model: Option<(&str, &str)>,
    thinking: &str,
) -> Vec<(String, Option<String>)> {
    let mut env = child_env(profile);
    if profile.agent.session_tool_env {
        let mut set = |k: &str, v: Option<String>| env.push((k.to_string(), v));
        set("PI_SESSION_ID", Some(session_id.to_string()));
        set(
            "PI_SESSION_FILE",
            session_file.map(|f| f.to_string_lossy().into_owned()),
        );
        set("PI_PROVIDER", model.map(|m| m.0.to_string()));
        set("PI_MODEL", model.map(|m| m.1.to_string()));
        set("PI_REASONING_LEVEL", Some(thinking.to_string()));
    }
    env
}

/// Prepare and validate a call's arguments for the tool that runs it, in the profile's
/// dialect: TypeBox (every version's) checks a built-in tool against the schema it declares
/// (0.87's edit has no `additionalProperties`).
fn validate_for(
    exec: &Exec,
    args: &Value,
    dialect: crate::protocol::ValidationDialect,
) -> Result<Value, String> {
    use crate::protocol::ValidationDialect;
    match exec {
        Exec::Builtin(t) if dialect != ValidationDialect::Ajv => {
            let prepared = crate::tools::prepare_arguments(t.name(), args);
            // pi 0.73.1 checks its own schema (edit's forbids other properties), later
            // versions the one they declare.
            let schema = if dialect == ValidationDialect::TypeBoxNullsConverted {
                t.parameters()
            } else {
                crate::prompt::sections::declaration(t.as_ref()).parameters
            };
            crate::tools::validate::validate_args_as(t.name(), &schema, &prepared, dialect)
        }
        Exec::Builtin(t) => crate::tools::prepare_and_validate(t.as_ref(), args),
        Exec::Remote(r) => {
            crate::tools::validate::validate_args_as(&r.name, &r.parameters, args, dialect)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Version;

    fn keys(env: &[(String, Option<String>)]) -> Vec<&str> {
        env.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn child_and_tool_env_per_version() {
        let p073 = Version::V073.profile();
        let p087 = Version::V087.profile();
        assert_eq!(
            child_env(p073),
            vec![("PI_CODING_AGENT".to_string(), Some("true".to_string()))]
        );
        assert_eq!(keys(&child_env(p087)), ["PI_CODING_AGENT", "AI_AGENT"]);
        let model = Some(("faux", "m"));
        assert_eq!(
            keys(&tool_env(p073, "s1", None, model, "low")),
            ["PI_CODING_AGENT"]
        );
        let env = tool_env(p087, "s1", None, model, "low");
        assert_eq!(
            keys(&env),
            [
                "PI_CODING_AGENT",
                "AI_AGENT",
                "PI_SESSION_ID",
                "PI_SESSION_FILE",
                "PI_PROVIDER",
                "PI_MODEL",
                "PI_REASONING_LEVEL"
            ]
        );
        // An in-memory session removes the variable rather than leaving the parent's.
        assert_eq!(env[3].1, None);
        assert_eq!(env[6].1.as_deref(), Some("low"));
    }
}
