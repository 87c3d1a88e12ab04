//! Auto-retry as the state machine runs it: after a run that ended with a transient error, wait
//! (on a timer thread, [`crate::io::timer::after`]) and re-run without the failed reply;
//! `auto_retry_start` / `auto_retry_end` as the reference emits them (spec 9). Which errors are
//! transient and the delays are in [`crate::retry`].

use crate::core::event::Worker;
use crate::core::machine::Machine;
use crate::message::{AgentMessage, AssistantMessage, StopReason};
use crate::protocol::RetryDelay;
use crate::rpc::event::Event as Frame;

/// The machine's auto-retry state (and the timers that share its numbering: summary retries,
/// the pause before continuing after an overflow compaction).
pub(crate) struct RetryState {
    /// `set_auto_retry` / settings `retry.enabled`.
    pub(crate) enabled: bool,
    /// Consecutive failed attempts of the current auto-retry sequence.
    pub(crate) attempt: u32,
    /// A scheduled retry: timer id and its cancel handle.
    pub(crate) wait: Option<(u64, crate::cancel::CancelSource)>,
    /// Number of the latest retry timer.
    pub(crate) seq: u64,
    /// The pause before the continuation after an overflow compaction.
    pub(crate) continue_wait: Option<(u64, crate::cancel::CancelSource)>,
    /// `retry-after` of the last provider error.
    pub(crate) last_retry_after: Option<u64>,
}

impl RetryState {
    pub(crate) fn new(enabled: bool) -> RetryState {
        RetryState {
            enabled,
            attempt: 0,
            wait: None,
            seq: 0,
            continue_wait: None,
            last_retry_after: None,
        }
    }
}

impl Machine {
    /// `a` ended with an error that auto-retry handles (enabled, transient, not an overflow).
    fn retryable(&self, a: &AssistantMessage) -> bool {
        let Some(err) = a.error_message.as_deref().filter(|e| !e.is_empty()) else {
            return false;
        };
        let transient = crate::retry::is_transient_with(self.profile.retry.transient, err);
        if a.stop_reason != StopReason::Error || !self.retry.enabled || !transient {
            return false;
        }
        let window = self
            .state
            .model
            .as_ref()
            .map(|m| m.context_window)
            .unwrap_or(0);
        !crate::compaction::is_context_overflow(a, window)
    }

    /// Whether [`Machine::maybe_schedule_retry`] will schedule a retry after `a` (pi 0.87.1's
    /// `agent_end.willRetry`).
    pub(crate) fn retry_planned(&self, a: &AssistantMessage) -> bool {
        self.retryable(a) && self.retry.attempt < self.env.settings.retry_max_retries()
    }

    /// After a run that ended with an error: schedule a retry (true) or give up.
    pub(crate) fn maybe_schedule_retry(&mut self, a: &AssistantMessage) -> bool {
        if !self.retryable(a) {
            return false;
        }
        let Some(err) = a.error_message.as_deref() else {
            return false;
        };
        self.retry.attempt += 1;
        let max = self.env.settings.retry_max_retries();
        if self.retry.attempt > max {
            let attempt = self.retry.attempt - 1;
            self.retry.attempt = 0;
            self.emit(&Frame::AutoRetryEnd {
                success: false,
                attempt,
                final_error: Some(err),
            });
            return false;
        }
        let retry_after = self.retry.last_retry_after.take();
        let delay = match self.profile.retry.delay {
            RetryDelay::Backoff => crate::retry::backoff_ms(
                self.env.settings.retry_base_delay_ms(),
                self.retry.attempt,
                self.env.settings.retry_max_agent_delay_ms(),
            ),
            RetryDelay::RetryAfterOrBackoff => crate::retry::delay_ms(
                self.env.settings.retry_base_delay_ms(),
                self.retry.attempt,
                retry_after,
                self.env.settings.retry_max_delay_ms(),
            ),
        };
        self.emit(&Frame::AutoRetryStart {
            attempt: self.retry.attempt,
            max_attempts: max,
            delay_ms: delay,
            error_message: err,
        });
        // The failed message leaves the context (it stays in the session file); pi 0.87.1 records
        // that as a `context_edit` entry and announces it.
        if matches!(self.state.messages.last(), Some(AgentMessage::Assistant(_))) {
            self.state.messages.pop();
            if self.profile.agent.record_context_edits {
                self.record_context_edit();
            }
        }
        self.retry.seq += 1;
        let cancel = crate::io::timer::after(
            std::time::Duration::from_millis(delay),
            self.io.worker_tx.clone(),
            Worker::RetryDue { id: self.retry.seq },
        );
        self.retry.wait = Some((self.retry.seq, cancel));
        true
    }

    /// `context_edit` for the failed reply (the session's leaf), then `entry_appended`.
    pub(crate) fn record_context_edit(&mut self) {
        let Some(target) = self.state.session.leaf_id().map(str::to_string) else {
            return;
        };
        let entry = self.state.session.append_context_edit(&target);
        self.flush_session_warnings();
        if let Some(entry) = entry {
            self.emit(&Frame::EntryAppended { entry: &entry });
        }
    }

    /// The first non-error assistant message after retries ends them successfully.
    pub(crate) fn retry_message_end(&mut self, a: &AssistantMessage) {
        if a.stop_reason != StopReason::Error && self.retry.attempt > 0 {
            let attempt = self.retry.attempt;
            self.retry.attempt = 0;
            self.emit(&Frame::AutoRetryEnd {
                success: true,
                attempt,
                final_error: None,
            });
        }
    }

    pub(crate) fn on_retry_due(&mut self, id: u64) {
        if self.retry.wait.as_ref().is_some_and(|(i, _)| *i == id) {
            self.retry.wait = None;
            self.start_run(Vec::new());
        }
    }

    /// `abort` / `abort_retry` while waiting: cancel the timer. True if a retry was pending.
    pub(crate) fn cancel_retry(&mut self) -> bool {
        let Some((_, mut cancel)) = self.retry.wait.take() else {
            return false;
        };
        cancel.cancel();
        // The failed reply left the live context when the retry was scheduled and stays out of
        // it (as in pi 0.73.1 and 0.87.1: `messageCount`, `get_messages` and 0.73's
        // `get_session_stats` count without it). It is still in the session file: 0.73 shows it
        // again once the file is read (`switch_session`, resume), 0.87's `context_edit` keeps it
        // out there too.
        let attempt = self.retry.attempt;
        self.retry.attempt = 0;
        self.emit(&Frame::AutoRetryEnd {
            success: false,
            attempt,
            final_error: Some(crate::retry::RETRY_CANCELLED),
        });
        true
    }
}
