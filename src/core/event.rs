//! The one enum of everything that can happen to pith. Threads at the edges produce these; the
//! state machine ([`super::machine`]) consumes them in a single `select!` and changes state in a
//! single place. Nothing else mutates state.

use crate::io::stdin::Input;
use crate::llm::StreamEvent;
use crate::tools::{ToolOutput, ToolResult};

/// Process-level events: they travel on their own small channel so they are never stuck behind a
/// backlog of worker events.
#[derive(Debug)]
pub enum Control {
    /// SIGINT / SIGTERM / SIGHUP.
    Signal(i32),
    /// stdout is closed (the host went away).
    ClientGone,
}

/// What worker threads (LLM streams, tools, bash, timers) report.
#[derive(Debug)]
pub enum Worker {
    /// An event of the LLM stream started as `generation`; stale generations are ignored.
    Llm { generation: u64, event: StreamEvent },
    /// A tool of batch `batch` (call `index` of the assistant message) reported.
    Tool {
        batch: u64,
        index: usize,
        event: ToolEvent,
    },
    /// The auto-retry delay number `id` is over.
    RetryDue { id: u64 },
    /// The pause before continuing after an overflow compaction (number `id`) is over.
    ContinueDue { id: u64 },
    /// RPC `bash` command number `job` finished (or could not start).
    BashDone {
        job: u64,
        outcome: Box<Result<crate::tools::process::CommandOutcome, String>>,
    },
}

#[derive(Debug)]
pub enum ToolEvent {
    /// A partial result (`tool_execution_update`).
    Update(ToolOutput),
    /// The tool finished.
    Done(ToolResult),
}

#[derive(Debug)]
pub enum Event {
    Input(Input),
    Control(Control),
    Worker(Worker),
}
