//! Compaction as the state machine runs it: manual `compact`, threshold and overflow
//! auto-compaction. The pure parts (cut point, prompts, summary text, overflow detection) are in
//! [`crate::compaction`]; here the summary requests run on LLM stream threads, and the result
//! becomes a session entry, a rebuilt context and events.
//!
//! Events: manual compaction emits `compaction_start` / `compaction_end` with `reason`, as the
//! reference 0.73.1 does; automatic compaction emits the documented `auto_compaction_start` /
//! `auto_compaction_end` (seed 001, spec 5.1).

use serde_json::{Value, json};

use crate::compaction::{self, Preparation, SummaryKind, SummaryRequest, Trigger};
use crate::core::event::Worker;
use crate::core::machine::Machine;
use crate::llm::stream::StreamHandle;
use crate::llm::{LlmRequest, StreamEvent, Timeouts};
use crate::message::{
    AgentMessage, AssistantMessage, Content, LlmMessage, Usage, UserContent, UserMessage, now_ms,
};
use crate::protocol::{CompactionEvents, CompactionFlavor};
use crate::rpc::event::Event as Frame;
use crate::rpc::response;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Manual,
    Threshold,
    Overflow,
}

impl Reason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Manual => "manual",
            Reason::Threshold => "threshold",
            Reason::Overflow => "overflow",
        }
    }
}

/// A compaction in flight.
pub struct Compaction {
    pub reason: Reason,
    /// The `compact` command's id (manual only).
    pub id: Option<Value>,
    pub prep: Preparation,
    /// One slot per summary request: generation, kind, handle, result.
    pub parts: Vec<Part>,
    pub will_retry: bool,
    /// pi 0.87.1: requests not started yet (they run one after the other).
    pub queued: Vec<SummaryRequest>,
    /// pi 0.87.1: usage of the summary replies so far.
    pub usage: Option<Usage>,
    /// pi 0.87.1: a failed summary request waiting to be retried (timer id, cancel, request).
    pub retry_wait: Option<(u64, crate::cancel::CancelSource, SummaryRequest)>,
    /// pi 0.87.1: attempts retried for the current request (0: none).
    pub retry_attempt: u32,
    /// The node host's `ctx.compact()` calls waiting for the result (extension, call id).
    pub ext_waiters: Vec<(usize, Value)>,
    /// Started by an extension (`ctx.compact()`): no `compact` response (nobody sent one).
    pub from_ext: bool,
    /// Waiting for the extensions' `session_before_compact` answers: the question, the
    /// extensions still to ask and the summary requests to start if none cancels or answers.
    pub asking: Option<(u64, std::collections::VecDeque<usize>, Vec<SummaryRequest>)>,
    /// An extension's own compaction (pi's `{compaction: {summary, ...}}`), used as it is.
    pub from_hook: Option<Value>,
}

pub struct Part {
    pub generation: u64,
    pub kind: SummaryKind,
    pub handle: StreamHandle,
    pub result: Option<Result<String, String>>,
    /// The request, kept to retry it (pi 0.87.1).
    pub request: SummaryRequest,
}

fn settings_of(m: &Machine) -> compaction::Settings {
    compaction::Settings {
        enabled: m.state.auto_compaction,
        reserve_tokens: m.env.settings.compaction_reserve_tokens(),
        keep_recent_tokens: m.env.settings.compaction_keep_recent_tokens(),
    }
}

/// pi 0.87.1's `combineUsage`: field by field.
fn combine_usage(a: Usage, b: Usage) -> Usage {
    let opt = |x: Option<u64>, y: Option<u64>| {
        (x.is_some() || y.is_some()).then(|| x.unwrap_or(0) + y.unwrap_or(0))
    };
    Usage {
        input: a.input + b.input,
        output: a.output + b.output,
        cache_read: a.cache_read + b.cache_read,
        cache_write: a.cache_write + b.cache_write,
        total_tokens: a.total_tokens + b.total_tokens,
        cost: crate::message::Cost {
            input: a.cost.input + b.cost.input,
            output: a.cost.output + b.cost.output,
            cache_read: a.cost.cache_read + b.cost.cache_read,
            cache_write: a.cost.cache_write + b.cost.cache_write,
            total: a.cost.total + b.cost.total,
            total_from_provider: a.cost.total_from_provider.or(b.cost.total_from_provider),
        },
        cache_write_1h: opt(a.cache_write_1h, b.cache_write_1h),
        reasoning: opt(a.reasoning, b.reasoning),
    }
}

/// A summarizer reply as text, or pi 0.87.1's failure: an error, a reply cut at the token cap,
/// a tool call.
fn response_text_projected(kind: SummaryKind, reply: &AssistantMessage) -> Result<String, String> {
    let label = match kind {
        SummaryKind::History => "Summarization",
        SummaryKind::TurnPrefix => "Turn prefix summarization",
    };
    if reply.stop_reason == crate::message::StopReason::Length {
        return Err(format!(
            "{label} failed: {}",
            crate::compaction::projected::TRUNCATED_SUMMARY
        ));
    }
    if reply.stop_reason != crate::message::StopReason::Error && reply.tool_calls().next().is_some()
    {
        return Err(format!("{label} attempted to call a tool"));
    }
    compaction::response_text(kind, reply)
}

impl Machine {
    /// The compaction preparation of this protocol version.
    fn prepare_compaction(&self, settings: &compaction::Settings) -> Result<Preparation, String> {
        if self.profile.compaction.flavor == CompactionFlavor::Projected {
            crate::compaction::projected::prepare(&self.state.session.branch_path(), settings)
        } else {
            compaction::prepare(&self.state.session, settings)
        }
    }

    /// `compaction_start`: pi 0.73.1 names automatic ones `auto_compaction_start` (seed 001),
    /// pi 0.87.1 gives every compaction `compaction_start` with its reason.
    fn emit_compaction_start(&mut self, reason: Reason) {
        if reason == Reason::Manual || self.profile.events.compaction == CompactionEvents::Unified {
            self.emit(&Frame::CompactionStart {
                reason: reason.as_str(),
            });
        } else {
            self.emit(&Frame::AutoCompactionStart {
                reason: reason.as_str(),
            });
        }
    }

    fn emit_compaction_end(
        &mut self,
        reason: Reason,
        result: Option<&Value>,
        aborted: bool,
        will_retry: bool,
        error_message: Option<&str>,
    ) {
        if reason == Reason::Manual || self.profile.events.compaction == CompactionEvents::Unified {
            self.emit(&Frame::CompactionEnd {
                reason: reason.as_str(),
                result,
                aborted,
                will_retry,
                error_message,
            });
        } else {
            self.emit(&Frame::AutoCompactionEnd {
                result,
                aborted,
                will_retry,
                error_message,
            });
        }
    }

    /// `compact`: answer comes when the summary is done (or failed).
    pub(crate) fn cmd_compact(
        &mut self,
        custom: Option<String>,
        id: Option<Value>,
    ) -> Result<(), String> {
        if self.compaction.is_some() {
            return Err("Compaction already in progress".to_string());
        }
        self.discard_run();
        // pi reports a refused manual compaction as a failed one (`compaction_start`, then
        // `compaction_end` with the error) before the error answer.
        let refuse = |this: &mut Self, e: String| {
            this.emit_compaction_start(Reason::Manual);
            let msg = format!("{}{e}", compaction::COMPACTION_FAILED_PREFIX);
            this.emit_compaction_end(Reason::Manual, None, false, false, Some(&msg));
            Err(e)
        };
        if self.profile.compaction.key_before_preparation {
            if let Err(e) = self.check_model_and_key() {
                return refuse(self, e);
            }
        }
        let prep = match self.prepare_compaction(&settings_of(self)) {
            Ok(p) => p,
            Err(e) => return refuse(self, e),
        };
        if self.state.model.is_none() {
            return refuse(self, super::machine::no_model_message());
        }
        self.start_compaction(Reason::Manual, prep, custom.as_deref(), id, false);
        Ok(())
    }

    /// After a run (or before a prompt): compact if the context is over the threshold or the
    /// provider reported an overflow. True if a compaction started (the caller waits for it).
    pub(crate) fn maybe_auto_compact(
        &mut self,
        last: &AssistantMessage,
        before_prompt: bool,
    ) -> bool {
        let settings = settings_of(self);
        let Some(model) = self.state.model.clone() else {
            return false;
        };
        let input = compaction::CheckInput {
            settings: &settings,
            model: Some((&model.provider, &model.id, model.context_window)),
            latest_compaction_ms: compaction::latest_compaction_ms(&self.state.session),
            overflow_recovery_attempted: self.overflow_recovery_attempted,
            include_aborted: before_prompt,
            context: self.state.messages.as_slice(),
            recover_length_stops: self.profile.compaction.recover_length_stops,
            max_tokens: model.max_tokens,
        };
        let (reason, will_retry) = match compaction::check(last, &input) {
            None => return false,
            Some(Trigger::OverflowRetryExhausted(text)) => {
                self.emit_compaction_end(Reason::Overflow, None, false, false, Some(text));
                return false;
            }
            Some(Trigger::OverflowNoRetry) => (Reason::Overflow, false),
            Some(Trigger::Overflow) => {
                if matches!(self.state.messages.last(), Some(AgentMessage::Assistant(_))) {
                    self.state.messages.pop();
                    if self.profile.agent.record_context_edits {
                        // pi 0.87.1 records the dropped attempt as a `context_edit`.
                        self.record_context_edit();
                    }
                }
                self.overflow_recovery_attempted = true;
                (Reason::Overflow, true)
            }
            Some(Trigger::Threshold) => (Reason::Threshold, false),
        };
        if self.profile.compaction.prepare_before_start {
            // pi 0.87.1 prepares first and starts nothing when there is nothing to compact.
            return match self.prepare_compaction(&settings) {
                Ok(prep) => {
                    self.start_compaction(reason, prep, None, None, will_retry);
                    true
                }
                Err(_) => false,
            };
        }
        self.emit_compaction_start(reason);
        match self.prepare_compaction(&settings) {
            Ok(prep) => {
                self.start_compaction(reason, prep, None, None, will_retry);
                true
            }
            Err(_) => {
                // Nothing to compact: the reference ends quietly (no result, no message).
                self.emit_compaction_end(reason, None, false, false, None);
                false
            }
        }
    }

    fn start_compaction(
        &mut self,
        reason: Reason,
        prep: Preparation,
        custom: Option<&str>,
        id: Option<Value>,
        will_retry: bool,
    ) {
        if reason == Reason::Manual || self.profile.events.compaction == CompactionEvents::Unified {
            self.emit_compaction_start(reason);
        }
        let Some(model) = self.state.model.clone() else {
            return;
        };
        let thinking = model.reasoning.then_some(self.state.thinking);
        let settings = settings_of(self);
        let mut requests = if self.profile.compaction.flavor == CompactionFlavor::Projected {
            crate::compaction::projected::summary_requests(
                &prep,
                custom,
                &settings,
                thinking,
                model.max_tokens,
                &self.profile.compaction,
            )
        } else {
            compaction::summary_requests(&prep, custom, &settings, thinking)
        };
        // pi 0.87.1 runs the requests one after the other; 0.73.1 in parallel.
        let queued = if self.profile.compaction.sequential_summaries && requests.len() > 1 {
            requests.split_off(1)
        } else {
            Vec::new()
        };
        self.compaction = Some(Compaction {
            reason,
            id,
            prep,
            parts: Vec::new(),
            will_retry,
            queued,
            usage: None,
            retry_wait: None,
            retry_attempt: 0,
            ext_waiters: Vec::new(),
            from_ext: std::mem::take(&mut self.plugins.compact_from_ext),
            asking: None,
            from_hook: None,
        });
        let exts = self.plugins.subscribers("session_before_compact");
        if !exts.is_empty() {
            // pi's `session_before_compact`: the extensions may cancel it or write the summary.
            let op = self.plugins.fresh_id();
            if let Some(c) = self.compaction.as_mut() {
                c.asking = Some((op, exts, requests));
            }
            self.ask_before_compact(op, custom.map(str::to_string));
            return;
        }
        self.spawn_summaries(requests);
    }

    /// Start the summary requests of the compaction in flight.
    fn spawn_summaries(&mut self, requests: Vec<SummaryRequest>) {
        for r in requests {
            if let Err(e) = self.spawn_summary(r) {
                if let Some(c) = self.compaction.take() {
                    self.compaction_failed(c, &e);
                }
                return;
            }
        }
        self.finish_compaction_if_done();
    }

    /// Ask the next extension subscribed to `session_before_compact` (pi's event: the
    /// preparation, the branch's entries, the custom instructions, the reason), or go on.
    fn ask_before_compact(&mut self, op: u64, custom: Option<String>) {
        let Some(c) = self.compaction.as_mut() else {
            return;
        };
        let Some((_, exts, _)) = c.asking.as_mut() else {
            return;
        };
        let Some(i) = exts.pop_front() else {
            let requests = c.asking.take().map(|a| a.2).unwrap_or_default();
            self.spawn_summaries(requests);
            return;
        };
        let p = &c.prep;
        let mut preparation = json!({
            "firstKeptEntryId": p.first_kept_entry_id,
            "messagesToSummarize": p.messages_to_summarize,
            "turnPrefixMessages": p.turn_prefix_messages,
            "isSplitTurn": p.is_split_turn,
            "tokensBefore": p.tokens_before,
            "fileOps": {
                "read": p.file_ops.read,
                "written": p.file_ops.written,
                "edited": p.file_ops.edited,
            },
        });
        if let Some(prev) = &p.previous_summary {
            preparation["previousSummary"] = json!(prev);
        }
        let branch: Vec<Value> = self
            .state
            .session
            .branch_path()
            .iter()
            .map(|e| Value::Object(e.raw().clone()))
            .collect();
        let mut event = json!({
            "type": "session_before_compact",
            "preparation": preparation,
            "branchEntries": branch,
        });
        if let Some(ci) = &custom {
            event["customInstructions"] = json!(ci);
        }
        event["reason"] = json!(c.reason.as_str());
        event["willRetry"] = json!(c.will_retry);
        self.ext_call(
            i,
            &event,
            crate::core::plugins::CallKind::BeforeCompact { op, custom },
        );
    }

    /// An extension's answer to `session_before_compact` `op` (`None`: no change): `cancel`
    /// ends the compaction as aborted, `compaction` is the summary, else the next one is asked.
    pub(crate) fn before_compact_answer(
        &mut self,
        op: u64,
        custom: Option<String>,
        answer: Option<Value>,
    ) {
        if self
            .compaction
            .as_ref()
            .and_then(|c| c.asking.as_ref())
            .is_none_or(|a| a.0 != op)
        {
            return;
        }
        if answer
            .as_ref()
            .is_some_and(crate::ext::protocol::decode_cancel)
        {
            let Some(c) = self.compaction.take() else {
                return;
            };
            self.emit_compaction_end(c.reason, None, true, false, None);
            if c.reason == Reason::Manual && !c.from_ext {
                self.send(response::error(
                    c.id.as_ref(),
                    Some("compact"),
                    compaction::COMPACTION_CANCELLED,
                ));
            }
            let cancelled = Err(compaction::COMPACTION_CANCELLED.to_string());
            self.answer_compact_waiters(&c.ext_waiters, cancelled);
            self.after_compaction(false, c.reason);
            return;
        }
        let own = answer
            .and_then(|mut a| a.get_mut("compaction").map(Value::take))
            .filter(|v| v.get("summary").is_some_and(Value::is_string));
        if let Some(own) = own {
            if let Some(c) = self.compaction.as_mut() {
                c.asking = None;
                c.queued.clear();
                c.from_hook = Some(own);
            }
            self.finish_compaction_if_done();
            return;
        }
        self.ask_before_compact(op, custom);
    }

    /// Start one summary request of the compaction in flight.
    fn spawn_summary(&mut self, r: SummaryRequest) -> Result<(), String> {
        let Some(model) = self.state.model.clone() else {
            return Err("No model selected".to_string());
        };
        let (api_key, request_model, auth) = self.request_credentials(&model)?;
        let req = LlmRequest {
            api_key,
            system_prompt: r.system_prompt.clone(),
            messages: vec![LlmMessage::User(UserMessage {
                content: UserContent::Blocks(vec![Content::text(r.user_text.clone())]),
                timestamp: now_ms(),
            })]
            .into(),
            tools: Vec::new(),
            thinking: r.reasoning.unwrap_or(crate::message::ThinkingLevel::Off),
            session_id: None,
            max_tokens: Some(r.max_tokens),
            timeouts: Timeouts {
                connect: std::time::Duration::from_secs(self.env.settings.connect_timeout_secs()),
                stall: std::time::Duration::from_secs(
                    self.env.settings.stream_stall_timeout_secs(),
                ),
            },
            faux_script: self.env.faux_script.clone(),
            sdk: self.profile.llm.sdk,
            // pi 0.87.1 writes no cache for a one-off summary.
            no_cache: self.profile.compaction.summaries_uncached,
            tool_arguments_error: false,
            extra: self.request_extra(&request_model, auth),
            model: request_model,
        };
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
        if let Some(c) = self.compaction.as_mut() {
            c.parts.push(Part {
                generation,
                kind: r.kind,
                handle,
                result: None,
                request: r,
            });
        }
        Ok(())
    }

    /// A stream event that may belong to a summary request. True if it did.
    pub(crate) fn on_compaction_stream(&mut self, generation: u64, ev: &StreamEvent) -> bool {
        let flavor = self.profile.compaction.flavor;
        let retry_summaries = self.profile.compaction.retry_summaries;
        let Some(c) = self.compaction.as_mut() else {
            return false;
        };
        let Some(index) = c.parts.iter().position(|p| p.generation == generation) else {
            return false;
        };
        let (StreamEvent::Done { message } | StreamEvent::Error { message, .. }) = ev else {
            return true;
        };
        if flavor == CompactionFlavor::Entries {
            let part = &mut c.parts[index];
            part.result = Some(compaction::response_text(part.kind, message));
            self.finish_compaction_if_done();
            return true;
        }
        // pi 0.87.1: a transient failure is retried with the agent's retry policy.
        if retry_summaries && self.summary_retry_planned(message) {
            if let Some(c) = self.compaction.as_mut() {
                let part = c.parts.remove(index);
                self.schedule_summary_retry(part.request, message);
            }
            return true;
        }
        let Some(c) = self.compaction.as_mut() else {
            return true;
        };
        let retried = c.retry_attempt > 0;
        c.retry_attempt = 0;
        let part = &mut c.parts[index];
        let result = response_text_projected(part.kind, message);
        if result.is_ok() {
            c.usage = Some(match c.usage {
                Some(u) => combine_usage(u, message.usage),
                None => message.usage,
            });
        }
        let ok = result.is_ok();
        part.result = Some(result);
        if retried {
            self.emit(&Frame::SummarizationRetryFinished);
        }
        if ok {
            let next = self
                .compaction
                .as_mut()
                .and_then(|c| (!c.queued.is_empty()).then(|| c.queued.remove(0)));
            if let Some(r) = next {
                if let Err(e) = self.spawn_summary(r) {
                    if let Some(c) = self.compaction.take() {
                        self.compaction_failed(c, &e);
                    }
                    return true;
                }
            }
        }
        self.finish_compaction_if_done();
        true
    }

    /// pi 0.87.1's `retryAssistantCall` test for a summary reply.
    fn summary_retry_planned(&self, reply: &AssistantMessage) -> bool {
        let Some(c) = self.compaction.as_ref() else {
            return false;
        };
        reply.stop_reason == crate::message::StopReason::Error
            && self.retry.enabled
            && c.retry_attempt < self.env.settings.retry_max_retries()
            && reply.error_message.as_deref().is_some_and(|e| {
                !e.is_empty() && crate::retry::is_transient_with(self.profile.retry.transient, e)
            })
    }

    fn schedule_summary_retry(&mut self, request: SummaryRequest, reply: &AssistantMessage) {
        let max = self.env.settings.retry_max_retries();
        let base = self.env.settings.retry_base_delay_ms();
        let cap = self.env.settings.retry_max_agent_delay_ms();
        let Some(c) = self.compaction.as_mut() else {
            return;
        };
        c.retry_attempt += 1;
        let attempt = c.retry_attempt;
        let delay = crate::retry::backoff_ms(base, attempt, cap);
        let error = reply.error_message.clone().unwrap_or_default();
        self.emit(&Frame::SummarizationRetryScheduled {
            attempt,
            max_attempts: max,
            delay_ms: delay,
            error_message: &error,
        });
        self.retry.seq += 1;
        let cancel = crate::io::timer::after(
            std::time::Duration::from_millis(delay),
            self.io.worker_tx.clone(),
            Worker::SummaryRetryDue { id: self.retry.seq },
        );
        if let Some(c) = self.compaction.as_mut() {
            c.retry_wait = Some((self.retry.seq, cancel, request));
        }
    }

    /// The backoff before a summary retry is over: run the request again.
    pub(crate) fn on_summary_retry_due(&mut self, id: u64) {
        let Some(c) = self.compaction.as_mut() else {
            return;
        };
        if c.retry_wait.as_ref().is_none_or(|(i, _, _)| *i != id) {
            return;
        }
        let Some((_, _, request)) = c.retry_wait.take() else {
            return;
        };
        let reason = c.reason.as_str();
        self.emit(&Frame::SummarizationRetryAttemptStart {
            source: "compaction",
            reason: Some(reason),
        });
        if let Err(e) = self.spawn_summary(request) {
            if let Some(c) = self.compaction.take() {
                self.compaction_failed(c, &e);
            }
        }
    }

    fn finish_compaction_if_done(&mut self) {
        let Some(c) = self.compaction.as_ref() else {
            return;
        };
        let failed = c.parts.iter().any(|p| matches!(p.result, Some(Err(_))));
        if !failed
            && (c.parts.iter().any(|p| p.result.is_none())
                || !c.queued.is_empty()
                || c.retry_wait.is_some())
        {
            return;
        }
        if failed
            && c.parts.iter().any(|p| p.result.is_none())
            && !self.profile.compaction.sequential_summaries
        {
            return;
        }
        let Some(c) = self.compaction.take() else {
            return;
        };
        let mut history = None;
        let mut prefix = None;
        let mut error = None;
        for p in &c.parts {
            match (&p.result, p.kind) {
                (Some(Ok(t)), SummaryKind::History) => history = Some(t.clone()),
                (Some(Ok(t)), SummaryKind::TurnPrefix) => prefix = Some(t.clone()),
                (Some(Err(e)), _) => error = error.or(Some(e.clone())),
                (None, _) => {}
            }
        }
        if let Some(e) = error {
            self.compaction_failed(c, &e);
            return;
        }
        let details = compaction::details(&c.prep);
        let result = if let Some(own) = &c.from_hook {
            // An extension's summary, as it gave it (pi's `fromExtension`).
            let summary = own["summary"].as_str().unwrap_or_default();
            let first_kept = own
                .get("firstKeptEntryId")
                .and_then(Value::as_str)
                .unwrap_or(&c.prep.first_kept_entry_id);
            let tokens_before = own
                .get("tokensBefore")
                .and_then(Value::as_u64)
                .unwrap_or(c.prep.tokens_before);
            let own_details = own.get("details").filter(|d| !d.is_null()).cloned();
            let usage = own.get("usage").filter(|u| !u.is_null()).cloned();
            if self.profile.compaction.flavor == CompactionFlavor::Projected {
                let declared = crate::prompt::sections::Declared::of(&self.state.messages);
                self.state.session.append_compaction_with_checkpoint(
                    summary,
                    first_kept,
                    tokens_before,
                    own_details.clone(),
                    usage,
                    true,
                    |ms| {
                        declared.checkpoint(ms).map(|m| {
                            serde_json::to_value(AgentMessage::System(m)).unwrap_or_default()
                        })
                    },
                );
            } else {
                self.state.session.append_compaction(
                    summary,
                    first_kept,
                    tokens_before,
                    own_details.clone(),
                    Some(true),
                );
            }
            self.state.messages =
                crate::core::machine::context_of(self.profile, self.state.session.build_context())
                    .into();
            let mut r = json!({
                "summary": summary,
                "firstKeptEntryId": first_kept,
                "tokensBefore": tokens_before,
            });
            if self.profile.compaction.flavor == CompactionFlavor::Projected {
                r["estimatedTokensAfter"] = json!(
                    crate::compaction::projected::estimated_tokens_after(&self.state.messages)
                );
            }
            if let Some(u) = own.get("usage").filter(|u| !u.is_null()) {
                r["usage"] = u.clone();
            }
            if let Some(d) = own_details {
                r["details"] = d;
            }
            r
        } else if self.profile.compaction.flavor == CompactionFlavor::Projected {
            let summary = crate::compaction::projected::final_summary(
                &c.prep,
                history.as_deref(),
                prefix.as_deref(),
            );
            let from_provider = self.profile.events.cost_total_from_provider;
            let usage = c.usage.map(|mut u| {
                if from_provider {
                    u.cost.total_from_provider = Some(false);
                }
                serde_json::to_value(u).unwrap_or(Value::Null)
            });
            let declared = crate::prompt::sections::Declared::of(&self.state.messages);
            self.state.session.append_compaction_with_checkpoint(
                &summary,
                &c.prep.first_kept_entry_id,
                c.prep.tokens_before,
                Some(details.clone()),
                usage.clone(),
                false,
                |ms| {
                    declared
                        .checkpoint(ms)
                        .map(|m| serde_json::to_value(AgentMessage::System(m)).unwrap_or_default())
                },
            );
            self.state.messages =
                crate::core::machine::context_of(self.profile, self.state.session.build_context())
                    .into();
            let after = crate::compaction::projected::estimated_tokens_after(&self.state.messages);
            let mut r = json!({
                "summary": summary,
                "firstKeptEntryId": c.prep.first_kept_entry_id,
                "tokensBefore": c.prep.tokens_before,
                "estimatedTokensAfter": after,
            });
            if let (Some(u), Value::Object(m)) = (usage, &mut r) {
                m.insert("usage".into(), u);
            }
            r["details"] = details;
            r
        } else {
            let summary = compaction::final_summary(&c.prep, history.as_deref(), prefix.as_deref());
            self.state.session.append_compaction(
                &summary,
                &c.prep.first_kept_entry_id,
                c.prep.tokens_before,
                Some(details.clone()),
                Some(false),
            );
            self.state.messages =
                crate::core::machine::context_of(self.profile, self.state.session.build_context())
                    .into();
            json!({
                "summary": summary,
                "firstKeptEntryId": c.prep.first_kept_entry_id,
                "tokensBefore": c.prep.tokens_before,
                "details": details,
            })
        };
        self.flush_session_warnings();
        if !self.plugins.subscribers("session_compact").is_empty() {
            // pi's `session_compact`, before `compaction_end`: the entry as written.
            let entry = self
                .state
                .session
                .leaf_id()
                .and_then(|id| self.state.session.entry(id))
                .map(|e| Value::Object(e.raw().clone()));
            self.notify_extensions(&json!({
                "type": "session_compact",
                "compactionEntry": entry,
                "fromExtension": c.from_hook.is_some(),
                "reason": c.reason.as_str(),
                "willRetry": c.will_retry,
            }));
        }
        match c.reason {
            Reason::Manual => {
                self.emit_compaction_end(c.reason, Some(&result), false, false, None);
                if !c.from_ext {
                    self.send(response::success(c.id.as_ref(), "compact", Some(&result)));
                }
                self.answer_compact_waiters(&c.ext_waiters, Ok(result.clone()));
            }
            reason => self.emit_compaction_end(reason, Some(&result), false, c.will_retry, None),
        }
        self.after_compaction(c.will_retry, c.reason);
    }

    fn compaction_failed(&mut self, mut c: Compaction, e: &str) {
        for p in c.parts.iter_mut().filter(|p| p.result.is_none()) {
            p.handle.cancel();
        }
        match c.reason {
            Reason::Manual => {
                let msg = format!("{}{e}", compaction::COMPACTION_FAILED_PREFIX);
                self.emit_compaction_end(c.reason, None, false, false, Some(&msg));
                if !c.from_ext {
                    self.send(response::error(c.id.as_ref(), Some("compact"), e));
                }
                self.answer_compact_waiters(&c.ext_waiters, Err(e.to_string()));
            }
            reason => {
                let prefix = if reason == Reason::Overflow {
                    compaction::OVERFLOW_RECOVERY_FAILED_PREFIX
                } else {
                    compaction::AUTO_COMPACTION_FAILED_PREFIX
                };
                let msg = format!("{prefix}{e}");
                self.emit_compaction_end(reason, None, false, false, Some(&msg));
            }
        }
        self.after_compaction(false, c.reason);
    }

    /// The node host's `ctx.compact()` calls: the result (`onComplete`) or the error (`onError`).
    pub(crate) fn answer_compact_waiters(
        &mut self,
        waiters: &[(usize, Value)],
        outcome: Result<Value, String>,
    ) {
        for (i, id) in waiters {
            self.ext_write(*i, crate::ext::protocol::call_result(id, outcome.clone()));
        }
    }

    /// `abort` during a compaction really cancels it (the reference's did not).
    pub(crate) fn abort_compaction(&mut self) -> bool {
        let Some(mut c) = self.compaction.take() else {
            return false;
        };
        for p in &mut c.parts {
            p.handle.cancel();
        }
        if let Some((_, mut cancel, _)) = c.retry_wait.take() {
            // pi 0.87.1 closes the summary retry before the compaction.
            cancel.cancel();
            self.emit(&Frame::SummarizationRetryFinished);
        }
        self.emit_compaction_end(c.reason, None, true, false, None);
        if c.reason == Reason::Manual && !c.from_ext {
            self.send(response::error(
                c.id.as_ref(),
                Some("compact"),
                compaction::COMPACTION_CANCELLED,
            ));
        }
        let cancelled = Err(compaction::COMPACTION_CANCELLED.to_string());
        self.answer_compact_waiters(&c.ext_waiters, cancelled);
        self.drop_pending_prompt("Prompt cancelled by abort");
        true
    }

    /// What follows a compaction: the overflow retry, a prompt that waited for it, or settling
    /// (pi 0.87.1 does not settle after a manual compaction: no run was involved).
    fn after_compaction(&mut self, will_retry: bool, reason: Reason) {
        if will_retry {
            // The context rebuilt from the session ends with the failed reply again: drop it and
            // continue. A *silent* overflow (a successful reply over the window) is not retried,
            // as in the reference: its reply stays and nothing is resent.
            if let Some(AgentMessage::Assistant(a)) = self.state.messages.last() {
                if a.stop_reason == crate::message::StopReason::Error {
                    self.state.messages.pop();
                }
            }
            if !matches!(self.state.messages.last(), Some(AgentMessage::Assistant(_))) {
                // Continue after a short pause, as the reference does (its 100 ms also keeps the
                // retried reply's timestamp after the compaction entry's).
                self.retry.seq += 1;
                let cancel = crate::io::timer::after(
                    std::time::Duration::from_millis(compaction::CONTINUE_DELAY_MS),
                    self.io.worker_tx.clone(),
                    Worker::ContinueDue { id: self.retry.seq },
                );
                self.retry.continue_wait = Some((self.retry.seq, cancel));
                return;
            }
        }
        if self.run_pending_prompt() {
            return;
        }
        if !self.queues.steering.is_empty() || !self.queues.follow_up.is_empty() {
            // Messages queued meanwhile continue the conversation (the reference's `continue()`).
            let queued = {
                let mut q = self.queues.steering.take();
                if q.is_empty() {
                    q = self.queues.follow_up.take();
                }
                q
            };
            self.emit_queue_update();
            let prompts = queued.into_iter().map(|q| q.message).collect();
            self.begin_limits(None);
            self.start_run(prompts);
            return;
        }
        if reason != Reason::Manual || self.profile.events.settles_after_manual_compaction {
            self.settle();
        }
    }

    /// The pause after an overflow compaction is over: re-run from the compacted context.
    pub(crate) fn on_continue_due(&mut self, id: u64) {
        if self
            .retry
            .continue_wait
            .as_ref()
            .is_some_and(|(i, _)| *i == id)
        {
            self.retry.continue_wait = None;
            self.start_run(Vec::new());
        }
    }

    /// The last assistant message in context (for the pre-prompt compaction check).
    pub(crate) fn last_assistant_in_context(&self) -> Option<AssistantMessage> {
        self.state.messages.iter().rev().find_map(|m| match m {
            AgentMessage::Assistant(a) => Some(a.clone()),
            _ => None,
        })
    }
}
