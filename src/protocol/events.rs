//! Shapes of RPC events (what a frame carries in each version).

/// Shapes of RPC events (what a frame carries in each version).
#[derive(Debug)]
pub struct Events {
    /// `agent_end` says whether an auto-retry follows (`willRetry`). 0.73.1: no; 0.87.1: yes.
    pub agent_end_will_retry: bool,
    /// A streaming assistant message's `message_start` says `stopReason:"pending"`. 0.73.1: no
    /// (the stop reason it will have); 0.87.1: yes.
    pub pending_stop_reason: bool,
    /// What a `message_update` carries.
    pub update: UpdateShape,
    /// The names of the compaction events.
    pub compaction: CompactionEvents,
    /// pith's `agent_settled` follows a manual compaction. 0.73.1: yes (pith's own event);
    /// 0.87.1: no (it settles after runs only, and a manual compaction is none).
    pub settles_after_manual_compaction: bool,
    /// `agent_settled` says whether an `abort` ended the run (`aborted`). 0.73.1, 0.87.1: no
    /// (`{"type":"agent_settled"}`); 1.6.0: yes.
    pub settled_aborted: bool,
    /// Assistant messages carry their request's wall time (`durationMs`, not on a streaming
    /// `message_start`), tool results and `tool_execution_end` their tool's (absent when the tool
    /// did not run). 0.73.1, 0.87.1: no; 1.6.0: yes.
    pub message_duration: bool,
    /// Assistant messages carry the thinking level their request ran at (`thinkingLevel`, `off`
    /// for a model without reasoning). 0.73.1, 0.87.1: no; 1.6.0: yes.
    pub message_thinking_level: bool,
    /// Every usage cost says `totalFromProvider:false` (pith computes it from the prices).
    /// 0.73.1, 0.87.1: no; 1.6.0: yes.
    pub cost_total_from_provider: bool,
    /// An entry an extension appends (`appendEntry`) is announced as `entry_appended`.
    /// 0.73.1, 0.87.1: no; 1.6.0: yes.
    pub extension_entries_announced: bool,
}

/// What a `message_update` carries besides the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateShape {
    /// 0.73.1: the whole partial message so far (with `--partials full`; lean otherwise).
    Snapshot,
    /// 0.87.1: the live usage of the message only.
    Live,
}

/// How compaction events are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionEvents {
    /// 0.73.1: `compaction_start`/`_end` for a manual one, `auto_compaction_start`/`_end` for
    /// the others.
    AutoPrefixed,
    /// 0.87.1: every compaction is `compaction_start`/`_end` with its reason.
    Unified,
}
