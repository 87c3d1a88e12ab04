//! The RPC `export_html` command: the page is rendered on a thread of its own, so `abort` and
//! every other command are answered while a long session renders (a 10,000-entry session takes
//! about 0.1 s, a debug build or a bigger session far longer). The machine checks what it can
//! answer at once (an in-memory session, nothing written yet), hands the worker a copy of the
//! session as it is now, with the live system prompt and tools, and answers the command when the
//! worker reports ([`Worker::ExportDone`]); the response is the one the command always had.
//!
//! Exports are not cancelled by `abort` (the host asked for the page; pi's export cannot be
//! aborted either); pith's shutdown cancels them, and their temporary files are removed.

use serde_json::{Value, json};

use crate::cancel::{CancelSource, cancel_pair};
use crate::core::event::Worker;
use crate::core::machine::Machine;
use crate::rpc::response;
use crate::session::export_html::{Extras, ToolSpec, export_target, tool_specs, write_page};

/// The exports in flight.
#[derive(Default)]
pub struct Exports {
    seq: u64,
    jobs: Vec<ExportJob>,
}

struct ExportJob {
    job: u64,
    id: Option<Value>,
    cancel: CancelSource,
}

impl Exports {
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Shutdown: every render stops at its next write.
    pub fn cancel_all(&mut self) {
        for j in &mut self.jobs {
            j.cancel.cancel();
        }
    }
}

impl Machine {
    /// `export_html`: answer at once what needs no rendering, else start the worker (the
    /// response follows from [`Machine::on_export_done`]).
    pub(crate) fn start_export(
        &mut self,
        output_path: Option<String>,
        id: Option<Value>,
    ) -> Result<(), String> {
        let path = export_target(&self.session, output_path.as_deref())?;
        let mut tools = tool_specs(&self.tools);
        tools.extend(self.plugins.remote_tools().into_iter().map(|r| ToolSpec {
            name: r.name,
            description: r.description,
            parameters: r.parameters,
        }));
        let extras = Extras {
            system_prompt: Some(self.system_prompt()),
            tools,
        };
        let session = self.session.clone();
        self.exports.seq += 1;
        let job = self.exports.seq;
        let (cancel, token) = cancel_pair();
        let tx = self.worker_tx.clone();
        std::thread::Builder::new()
            .name("export".into())
            .spawn(move || {
                let result =
                    write_page(&session, &extras, &path, Some(&token)).map(|()| path.clone());
                let _ = tx.send(Worker::ExportDone { job, result });
            })
            .map_err(|e| format!("Cannot start the export thread: {e}"))?;
        self.exports.jobs.push(ExportJob { job, id, cancel });
        Ok(())
    }

    /// An export thread finished: answer its command.
    pub(crate) fn on_export_done(&mut self, job: u64, result: Result<String, String>) {
        let Some(pos) = self.exports.jobs.iter().position(|j| j.job == job) else {
            return;
        };
        let job = self.exports.jobs.remove(pos);
        let line = match result {
            Ok(path) => response::success(
                job.id.as_ref(),
                "export_html",
                Some(&json!({ "path": path })),
            ),
            Err(e) => response::error(job.id.as_ref(), Some("export_html"), &e),
        };
        self.send(line);
    }
}
