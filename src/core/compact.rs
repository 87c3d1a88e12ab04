//! Compaction as the state machine runs it: manual `compact`, threshold and overflow
//! auto-compaction. The pure parts (cut point, prompts, summary text, overflow detection) are in
//! [`crate::compaction`]; here the summary requests run on LLM stream threads, and the result
//! becomes a session entry, a rebuilt context and events.
//!
//! Events: manual compaction emits `compaction_start` / `compaction_end` with `reason`, as the
//! reference 0.73.1 does; automatic compaction emits the documented `auto_compaction_start` /
//! `auto_compaction_end` (seed 001, spec 5.1).

use serde_json::{Value, json};

use crate::compaction::{self, Preparation, SummaryKind, Trigger};
use crate::core::event::Worker;
use crate::core::machine::Machine;
use crate::llm::stream::StreamHandle;
use crate::llm::{LlmRequest, StreamEvent, Timeouts};
use crate::message::{
    AgentMessage, AssistantMessage, Content, LlmMessage, UserContent, UserMessage, now_ms,
};
use crate::rpc::event::Event as Frame;
use crate::rpc::response;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Manual,
    Threshold,
    Overflow,
}

impl Reason {
    fn as_str(self) -> &'static str {
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
}

pub struct Part {
    pub generation: u64,
    pub kind: SummaryKind,
    pub handle: StreamHandle,
    pub result: Option<Result<String, String>>,
}

fn settings_of(m: &Machine) -> compaction::Settings {
    compaction::Settings {
        enabled: m.auto_compaction,
        reserve_tokens: m.settings.compaction_reserve_tokens(),
        keep_recent_tokens: m.settings.compaction_keep_recent_tokens(),
    }
}

impl Machine {
    /// `compact`: answer comes when the summary is done (or failed).
    pub(crate) fn cmd_compact(
        &mut self,
        custom: Option<String>,
        id: Option<Value>,
    ) -> Result<(), String> {
        if self.compaction.is_some() {
            return Err("Compaction already in progress".to_string());
        }
        if self.model.is_none() {
            return Err("No model selected".to_string());
        }
        self.discard_run();
        let prep = compaction::prepare(&self.session, &settings_of(self))?;
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
        let Some(model) = self.model.clone() else {
            return false;
        };
        let input = compaction::CheckInput {
            settings: &settings,
            model: Some((&model.provider, &model.id, model.context_window)),
            latest_compaction_ms: compaction::latest_compaction_ms(&self.session),
            overflow_recovery_attempted: self.overflow_recovery_attempted,
            include_aborted: before_prompt,
            context: &self.messages,
        };
        let (reason, will_retry) = match compaction::check(last, &input) {
            None => return false,
            Some(Trigger::OverflowRetryExhausted) => {
                self.emit(&Frame::AutoCompactionEnd {
                    result: None,
                    aborted: false,
                    will_retry: false,
                    error_message: Some(compaction::OVERFLOW_RETRY_EXHAUSTED),
                });
                return false;
            }
            Some(Trigger::Overflow) => {
                if matches!(self.messages.last(), Some(AgentMessage::Assistant(_))) {
                    self.messages.pop();
                }
                self.overflow_recovery_attempted = true;
                (Reason::Overflow, true)
            }
            Some(Trigger::Threshold) => (Reason::Threshold, false),
        };
        self.emit(&Frame::AutoCompactionStart {
            reason: reason.as_str(),
        });
        match compaction::prepare(&self.session, &settings) {
            Ok(prep) => {
                self.start_compaction(reason, prep, None, None, will_retry);
                true
            }
            Err(_) => {
                // Nothing to compact: the reference ends quietly (no result, no message).
                self.emit(&Frame::AutoCompactionEnd {
                    result: None,
                    aborted: false,
                    will_retry: false,
                    error_message: None,
                });
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
        if reason == Reason::Manual {
            self.emit(&Frame::CompactionStart {
                reason: reason.as_str(),
            });
        }
        let Some(model) = self.model.clone() else {
            return;
        };
        let thinking = model.reasoning.then_some(self.thinking);
        let (api_key, request_model) = match self.request_credentials(&model) {
            Ok(c) => c,
            Err(e) => {
                let c = Compaction {
                    reason,
                    id,
                    prep,
                    parts: Vec::new(),
                    will_retry: false,
                };
                self.compaction_failed(&c, &e);
                return;
            }
        };
        let requests = compaction::summary_requests(&prep, custom, &settings_of(self), thinking);
        let mut parts = Vec::new();
        for r in requests {
            let req = LlmRequest {
                api_key: api_key.clone(),
                system_prompt: r.system_prompt,
                messages: vec![LlmMessage::User(UserMessage {
                    content: UserContent::Blocks(vec![Content::text(r.user_text)]),
                    timestamp: now_ms(),
                })],
                tools: Vec::new(),
                thinking: r.reasoning.unwrap_or(crate::message::ThinkingLevel::Off),
                session_id: None,
                max_tokens: Some(r.max_tokens),
                timeouts: Timeouts {
                    connect: std::time::Duration::from_secs(self.settings.connect_timeout_secs()),
                    stall: std::time::Duration::from_secs(
                        self.settings.stream_stall_timeout_secs(),
                    ),
                },
                faux_script: self.faux_script.clone(),
                model: request_model.clone(),
            };
            self.generation += 1;
            let generation = self.generation;
            let tx = self.worker_tx.clone();
            let handle = crate::llm::stream::spawn(
                req,
                Box::new(move |event| tx.send(Worker::Llm { generation, event }).is_ok()),
            );
            parts.push(Part {
                generation,
                kind: r.kind,
                handle,
                result: None,
            });
        }
        self.compaction = Some(Compaction {
            reason,
            id,
            prep,
            parts,
            will_retry,
        });
        self.finish_compaction_if_done();
    }

    /// A stream event that may belong to a summary request. True if it did.
    pub(crate) fn on_compaction_stream(&mut self, generation: u64, ev: &StreamEvent) -> bool {
        let Some(c) = self.compaction.as_mut() else {
            return false;
        };
        let Some(part) = c.parts.iter_mut().find(|p| p.generation == generation) else {
            return false;
        };
        match ev {
            StreamEvent::Done { message } | StreamEvent::Error { message, .. } => {
                part.result = Some(compaction::response_text(part.kind, message));
            }
            _ => {}
        }
        self.finish_compaction_if_done();
        true
    }

    fn finish_compaction_if_done(&mut self) {
        let Some(c) = self.compaction.as_ref() else {
            return;
        };
        if c.parts.iter().any(|p| p.result.is_none()) {
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
            self.compaction_failed(&c, &e);
            return;
        }
        let summary = compaction::final_summary(&c.prep, history.as_deref(), prefix.as_deref());
        let details = compaction::details(&c.prep);
        self.session.append_compaction(
            &summary,
            &c.prep.first_kept_entry_id,
            c.prep.tokens_before,
            Some(details.clone()),
            Some(false),
        );
        self.messages = self.session.build_context();
        self.flush_session_warnings();
        let result = json!({
            "summary": summary,
            "firstKeptEntryId": c.prep.first_kept_entry_id,
            "tokensBefore": c.prep.tokens_before,
            "details": details,
        });
        match c.reason {
            Reason::Manual => {
                self.emit(&Frame::CompactionEnd {
                    reason: c.reason.as_str(),
                    result: Some(&result),
                    aborted: false,
                    will_retry: false,
                    error_message: None,
                });
                self.send(response::success(c.id.as_ref(), "compact", Some(&result)));
            }
            _ => self.emit(&Frame::AutoCompactionEnd {
                result: Some(&result),
                aborted: false,
                will_retry: c.will_retry,
                error_message: None,
            }),
        }
        self.after_compaction(c.will_retry);
    }

    fn compaction_failed(&mut self, c: &Compaction, e: &str) {
        match c.reason {
            Reason::Manual => {
                let msg = format!("{}{e}", compaction::COMPACTION_FAILED_PREFIX);
                self.emit(&Frame::CompactionEnd {
                    reason: c.reason.as_str(),
                    result: None,
                    aborted: false,
                    will_retry: false,
                    error_message: Some(&msg),
                });
                self.send(response::error(c.id.as_ref(), Some("compact"), e));
            }
            reason => {
                let prefix = if reason == Reason::Overflow {
                    compaction::OVERFLOW_RECOVERY_FAILED_PREFIX
                } else {
                    compaction::AUTO_COMPACTION_FAILED_PREFIX
                };
                let msg = format!("{prefix}{e}");
                self.emit(&Frame::AutoCompactionEnd {
                    result: None,
                    aborted: false,
                    will_retry: false,
                    error_message: Some(&msg),
                });
            }
        }
        self.after_compaction(false);
    }

    /// `abort` during a compaction really cancels it (the reference's did not).
    pub(crate) fn abort_compaction(&mut self) -> bool {
        let Some(mut c) = self.compaction.take() else {
            return false;
        };
        for p in &mut c.parts {
            p.handle.cancel();
        }
        match c.reason {
            Reason::Manual => {
                self.emit(&Frame::CompactionEnd {
                    reason: c.reason.as_str(),
                    result: None,
                    aborted: true,
                    will_retry: false,
                    error_message: None,
                });
                self.send(response::error(
                    c.id.as_ref(),
                    Some("compact"),
                    compaction::COMPACTION_CANCELLED,
                ));
            }
            _ => self.emit(&Frame::AutoCompactionEnd {
                result: None,
                aborted: true,
                will_retry: false,
                error_message: None,
            }),
        }
        self.drop_pending_prompt("Prompt cancelled by abort");
        true
    }

    /// What follows a compaction: the overflow retry, a prompt that waited for it, or settling.
    fn after_compaction(&mut self, will_retry: bool) {
        if will_retry {
            // The context rebuilt from the session ends with the failed reply again: drop it and
            // continue. A *silent* overflow (a successful reply over the window) is not retried,
            // as in the reference: its reply stays and nothing is resent.
            if let Some(AgentMessage::Assistant(a)) = self.messages.last() {
                if a.stop_reason == crate::message::StopReason::Error {
                    self.messages.pop();
                }
            }
            if !matches!(self.messages.last(), Some(AgentMessage::Assistant(_))) {
                // Continue after a short pause, as the reference does (its 100 ms also keeps the
                // retried reply's timestamp after the compaction entry's).
                self.retry_seq += 1;
                let cancel = crate::retry::start_timer_with(
                    Worker::ContinueDue { id: self.retry_seq },
                    std::time::Duration::from_millis(compaction::CONTINUE_DELAY_MS),
                    self.worker_tx.clone(),
                );
                self.continue_wait = Some((self.retry_seq, cancel));
                return;
            }
        }
        if self.run_pending_prompt() {
            return;
        }
        if !self.steering.is_empty() || !self.follow_up.is_empty() {
            // Messages queued meanwhile continue the conversation (the reference's `continue()`).
            let queued = {
                let mut q = self.steering.take();
                if q.is_empty() {
                    q = self.follow_up.take();
                }
                q
            };
            self.emit_queue_update();
            let prompts = queued.into_iter().map(|q| q.message).collect();
            self.start_run(prompts);
            return;
        }
        self.settle();
    }

    /// The pause after an overflow compaction is over: re-run from the compacted context.
    pub(crate) fn on_continue_due(&mut self, id: u64) {
        if self.continue_wait.as_ref().is_some_and(|(i, _)| *i == id) {
            self.continue_wait = None;
            self.start_run(Vec::new());
        }
    }

    /// The last assistant message in context (for the pre-prompt compaction check).
    pub(crate) fn last_assistant_in_context(&self) -> Option<AssistantMessage> {
        self.messages.iter().rev().find_map(|m| match m {
            AgentMessage::Assistant(a) => Some(a.clone()),
            _ => None,
        })
    }
}
