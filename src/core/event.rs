//! The one enum of everything that can happen to pith. Threads at the edges produce these; the
//! state machine ([`super::machine`]) consumes them in a single `select!` and changes state in a
//! single place. Nothing else mutates state.

use crate::io::stdin::Input;
use crate::io::watch::Control;
use crate::llm::StreamEvent;
use crate::tools::{ToolOutput, ToolResult};

/// What worker threads (LLM streams, tools, bash, timers) report.
#[derive(Debug)]
pub enum Worker {
    /// An event of the LLM stream started as `generation`; stale generations are ignored.
    /// Boxed: the final events carry a whole message, far larger than every other event.
    Llm {
        generation: u64,
        event: Box<StreamEvent>,
    },
    /// A tool of batch `batch` (call `index` of the assistant message) reported.
    Tool {
        batch: u64,
        index: usize,
        event: ToolEvent,
    },
    /// The auto-retry delay number `id` is over.
    RetryDue { id: u64 },
    /// The backoff before retrying a failed summary request (number `id`) is over (pi 0.87.1).
    SummaryRetryDue { id: u64 },
    /// The pause before continuing after an overflow compaction (number `id`) is over.
    ContinueDue { id: u64 },
    /// Heartbeat timer number `id` (`--heartbeat`) fired.
    HeartbeatDue { id: u64 },
    /// The deadline of the run limits number `id` (`limits.rs`) passed.
    DeadlineDue { id: u64 },
    /// The grace after an abort is over: tool calls of `batch` still running are abandoned.
    ToolsAbandoned { batch: u64 },
    /// Output of the RPC `bash` command `job` (pi 0.87.1's `bash_execution_update`).
    BashOutput { job: u64, delta: String },
    /// RPC `bash` command number `job` finished (or could not start).
    BashDone {
        job: u64,
        outcome: Box<Result<crate::tools::process::CommandOutcome, String>>,
    },
    /// The `export_html` render number `job` finished: the page's path, or the error
    /// (`core/export.rs`).
    ExportDone {
        job: u64,
        result: Result<String, String>,
    },
    /// A line from extension number `ext`, or its end (`core/ext.rs`).
    Ext {
        ext: usize,
        event: crate::io::child::ChildEvent,
    },
    /// A line from MCP server number `server`, or its end (`core/mcp.rs`).
    Mcp {
        server: usize,
        event: crate::io::child::ChildEvent,
    },
    /// A line from the worker of `codemode` script number `script`, or its end
    /// (`core/codemode.rs`).
    Codemode {
        script: u64,
        event: crate::io::child::ChildEvent,
    },
    /// Script number `script` reached its `timeout_ms`, or waited too long for a worker.
    CodemodeDue { script: u64 },
    /// The spawner thread started (or failed to start) an extension or MCP server process.
    Spawned {
        target: crate::core::plugins::Target,
        result: Result<crate::io::child::ChildHandle, String>,
    },
}

#[derive(Debug)]
pub enum ToolEvent {
    /// A partial result (`tool_execution_update`).
    Update(ToolOutput),
    /// The tool finished.
    Done(ToolResult),
}

// `Worker` carries whole assistant messages (the stream's partials and finals); boxing
// them would touch every decoder for ~7 KiB saved on a 128-slot channel per agent.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Event {
    Input(Input),
    Control(Control),
    Worker(Worker),
    /// A deadline of an extension, MCP server or dialog passed (`core/plugins.rs`).
    Timer,
}
