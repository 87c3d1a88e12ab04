//! The RPC `export_html` command: the page is rendered on a thread of its own, so `abort` and
//! every other command are answered while a long session renders (a 10,000-entry session takes
//! about 0.1 s, a debug build or a bigger session far longer). The machine checks what it can
//! answer at once (an in-memory session, nothing written yet), takes a copy of the session as it
//! is now, with the live system prompt and tools, and answers the command when the worker
//! reports ([`Worker::ExportDone`]); the response is the one the command always had.
//!
//! Exports render one at a time, in the order they were asked for: a host asking for many at
//! once must not leave the state machine competing with a crowd of render threads. At most
//! [`MAX_IN_FLIGHT`] wait or run (each holds a copy of the session); more are refused at once.
//!
//! Exports are not cancelled by `abort` (the host asked for the page; pi's export cannot be
//! aborted either); pith's shutdown cancels them, and their temporary files are removed.

use std::collections::VecDeque;

use serde_json::{Value, json};

use crate::cancel::{CancelSource, cancel_pair};
use crate::core::event::Worker;
use crate::core::machine::Machine;
use crate::rpc::response;
use crate::session::Session;
use crate::session::export_html::{
    Extras, ToolSpec, export_target, temporary_path, tool_specs, write_page,
};

/// Exports running or waiting at most.
pub const MAX_IN_FLIGHT: usize = 8;

/// The exports in flight: the one rendering and those waiting for it.
#[derive(Default)]
pub struct Exports {
    seq: u64,
    running: Option<Running>,
    waiting: VecDeque<Waiting>,
}

struct Running {
    job: u64,
    id: Option<Value>,
    cancel: CancelSource,
    /// Where the page is rendered before it is renamed into place.
    temporary: std::path::PathBuf,
}

/// An export asked for: what it renders, taken when the command arrived.
struct Waiting {
    job: u64,
    id: Option<Value>,
    session: Box<Session>,
    extras: Extras,
    path: String,
}

impl Exports {
    pub fn is_empty(&self) -> bool {
        self.running.is_none() && self.waiting.is_empty()
    }

    fn in_flight(&self) -> usize {
        self.waiting.len() + usize::from(self.running.is_some())
    }

    /// Shutdown: the render stops at its next write; waiting exports are dropped.
    pub fn cancel_all(&mut self) {
        self.waiting.clear();
        if let Some(r) = self.running.as_mut() {
            r.cancel.cancel();
        }
    }

    /// Shutdown, once the render has had its grace ([`Exports::cancel_all`]) and still runs (a
    /// slow build or a huge session can be far from its next write): it ends with the process,
    /// and its temporary page is removed here, as the render would have removed it.
    pub fn abandon(&mut self) {
        if let Some(r) = self.running.take() {
            let _ = std::fs::remove_file(&r.temporary);
        }
    }
}

impl Machine {
    /// `export_html`: answer at once what needs no rendering, else queue the render (the
    /// response follows from [`Machine::on_export_done`]).
    pub(crate) fn start_export(
        &mut self,
        output_path: Option<String>,
        id: Option<Value>,
    ) -> Result<(), String> {
        let path = export_target(&self.state.session, output_path.as_deref())?;
        if self.exports.in_flight() >= MAX_IN_FLIGHT {
            return Err(format!(
                "Too many exports in progress ({MAX_IN_FLIGHT}); send export_html again when one has finished"
            ));
        }
        let mut tools = tool_specs(&self.env.tools);
        tools.extend(self.offered_remote_tools().into_iter().map(|r| ToolSpec {
            name: r.name,
            description: r.description,
            parameters: r.parameters,
        }));
        let extras = Extras {
            system_prompt: Some(self.system_prompt()),
            tools,
        };
        self.exports.seq += 1;
        self.exports.waiting.push_back(Waiting {
            job: self.exports.seq,
            id,
            session: Box::new(self.state.session.clone()),
            extras,
            path,
        });
        self.next_export();
        Ok(())
    }

    /// Start the next waiting export when none renders.
    fn next_export(&mut self) {
        while self.exports.running.is_none() {
            let Some(w) = self.exports.waiting.pop_front() else {
                return;
            };
            let (cancel, token) = cancel_pair();
            let tx = self.io.worker_tx.clone();
            let Waiting {
                job,
                id,
                session,
                extras,
                path,
            } = w;
            let temporary = temporary_path(&path);
            let tmp = temporary.clone();
            let started = std::thread::Builder::new()
                .name("export".into())
                .spawn(move || {
                    let result = write_page(&session, &extras, &path, &tmp, Some(&token))
                        .map(|()| path.clone());
                    let _ = tx.send(Worker::ExportDone { job, result });
                });
            match started {
                Ok(_) => {
                    self.exports.running = Some(Running {
                        job,
                        id,
                        cancel,
                        temporary,
                    })
                }
                Err(e) => {
                    let msg = format!("Cannot start the export thread: {e}");
                    self.send(response::error(id.as_ref(), Some("export_html"), &msg));
                }
            }
        }
    }

    /// The export thread finished: answer its command, start the next one.
    pub(crate) fn on_export_done(&mut self, job: u64, result: Result<String, String>) {
        if self.exports.running.as_ref().is_none_or(|r| r.job != job) {
            return;
        }
        let Some(done) = self.exports.running.take() else {
            return;
        };
        let line = match result {
            Ok(path) => response::success(
                done.id.as_ref(),
                "export_html",
                Some(&json!({ "path": path })),
            ),
            Err(e) => response::error(done.id.as_ref(), Some("export_html"), &e),
        };
        self.send(line);
        self.next_export();
    }
}
