//! Compaction and branch summaries.

/// Compaction and branch summaries.
#[derive(Debug)]
pub struct Compaction {
    /// How the branch is prepared, cut and summarized.
    pub flavor: CompactionFlavor,
    /// The summary requests run one after the other (history first), not in parallel.
    /// 0.73.1: no; 0.87.1: yes.
    pub sequential_summaries: bool,
    /// A transiently failed summary request is retried with the agent's retry policy
    /// (`summarization_retry_*`). 0.73.1: no; 0.87.1: yes.
    pub retry_summaries: bool,
    /// Summary requests ask the provider to write no prompt cache. 0.73.1: no; 0.87.1: yes.
    pub summaries_uncached: bool,
    /// A `length` stop below the model's own output limit is recovered like an overflow, and
    /// an overflowing complete reply is kept (no retry). 0.73.1: no; 0.87.1: yes.
    pub recover_length_stops: bool,
    /// Automatic compaction prepares first and starts nothing (no events) when there is nothing
    /// to compact. 0.73.1: no (it starts, then fails); 0.87.1: yes.
    pub prepare_before_start: bool,
    /// The summarized conversation shows the assistant's thinking (`[Assistant thinking]:`
    /// lines). 0.73.1, 0.87.1: yes; 1.6.0: no.
    pub summary_thinking: bool,
    /// The `max_tokens` of a summary request. 0.73.1, 0.87.1: a share of `reserveTokens`
    /// (0.8 history, 0.5 turn prefix); 1.6.0: the model's own output limit (the provider then
    /// caps it to fit the context window; `reserveTokens` only triggers compaction).
    pub summary_max_tokens: SummaryMaxTokens,
    /// A split turn's prefix summary request also ends with the custom instructions
    /// (`Additional focus: …`). 0.73.1, 0.87.1: only the history request; 1.6.0: both.
    pub turn_prefix_focus: bool,
    /// A manual `compact` checks for a model and its key before it prepares (pi 0.73.1's
    /// `_getRequiredRequestAuth`); 0.87.1, 1.6.0: it prepares first (nothing to compact wins),
    /// and the summary request goes without a key.
    pub key_before_preparation: bool,
}

/// The `max_tokens` of a summary request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryMaxTokens {
    /// A share of `compaction.reserveTokens` (bounded by the model's limit under 0.87.1).
    ReserveShare,
    /// The model's `maxTokens`.
    ModelLimit,
}

/// How the branch is prepared, cut and summarized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionFlavor {
    /// 0.73.1 (`crate::compaction`): the session's entries as they are.
    Entries,
    /// 0.87.1 (`crate::compaction::projected`): the branch through its projection (system
    /// messages are prompt state, `context_edit`s apply), 0.87.1's prompts and token caps, the
    /// stored entry with its usage and a system checkpoint.
    Projected,
}
