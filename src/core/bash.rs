//! The RPC `bash` command: each command runs on its own thread (in its own process group, via
//! [`crate::tools::process`]) while the state machine keeps answering other commands. Several may
//! run at once, as in the reference (each is answered when it ends); `abort_bash` kills every
//! running group at once. Each result is recorded as its own `bashExecution` message (no event),
//! in the order the commands finish, which reaches the model on the next prompt.

use serde_json::Value;

use crate::cancel::{CancelSource, cancel_pair};
use crate::core::event::Worker;
use crate::core::machine::Machine;
use crate::message::{AgentMessage, BashExecutionMessage, now_ms};
use crate::rpc::response;
use crate::tools::process::{CommandOutcome, CommandSpec, run_command};

/// The RPC `bash` commands.
#[derive(Default)]
pub(crate) struct BashJobs {
    /// The commands in flight (several may run at once).
    pub(crate) jobs: Vec<BashJob>,
    /// Number of the latest job.
    pub(crate) seq: u64,
    /// Executions that finished during a run: recorded before the next prompt.
    pub(crate) deferred: Vec<AgentMessage>,
}

/// One RPC bash command in flight.
pub struct BashJob {
    /// pith's own number for the job (the command's `id` need not be unique).
    pub job: u64,
    pub id: Option<Value>,
    pub command: String,
    pub cancel: CancelSource,
    /// `excludeFromContext`: recorded, but never sent to the model.
    pub exclude_from_context: bool,
}

impl Machine {
    /// Start `command` on the bash thread; the response is sent when it finishes.
    pub(crate) fn start_bash(
        &mut self,
        command: String,
        exclude_from_context: bool,
        id: Option<Value>,
    ) -> Result<(), String> {
        self.bash.seq += 1;
        let job = self.bash.seq;
        let (cancel, token) = cancel_pair();
        let tx = self.io.worker_tx.clone();
        // pi 0.87.1 streams the output as `bash_execution_update` and counts lines without the
        // empty piece after a final newline.
        let stream = self.profile.agent.bash == crate::protocol::RpcBash::Streamed;
        let counting = if stream {
            crate::tools::truncate::LineCounting::IgnoreFinalNewline
        } else {
            crate::tools::truncate::LineCounting::Split
        };
        let mut env = crate::core::agent::child_env(self.profile);
        let sandbox = self.env.sandbox.clone();
        if let Some(sb) = &sandbox {
            sb.filter_env(&mut env);
        }
        let cwd = self.env.cwd.clone();
        let shell = self.env.settings.shell_path().map(str::to_string);
        let prefix = self.env.settings.shell_command_prefix().map(str::to_string);
        let bin = self.env.agent_dir.join("bin");
        let cmd = command.clone();
        std::thread::Builder::new()
            .name("bash".into())
            .stack_size(crate::THREAD_STACK)
            .spawn(move || {
                // `--sandbox`: this thread (one per command) is confined before the shell starts.
                if let Some(sb) = &sandbox {
                    if let Err(e) = sb.enter() {
                        let _ = tx.send(Worker::BashDone {
                            job,
                            outcome: Box::new(Err(format!(
                                "The sandbox could not be entered, so the command did not run: {e}"
                            ))),
                        });
                        return;
                    }
                }
                let updates = tx.clone();
                let on_text = move |delta: &str| {
                    let _ = updates.send(Worker::BashOutput {
                        job,
                        delta: delta.to_string(),
                    });
                };
                let spec = CommandSpec {
                    command: &cmd,
                    cwd: &cwd,
                    shell_path: shell.as_deref(),
                    prefix: prefix.as_deref(),
                    cancel: &token,
                    timeout: None,
                    sanitize: true,
                    path_prepend: Some(&bin),
                    env: &env,
                    on_text: if stream { Some(&on_text) } else { None },
                    line_counting: counting,
                };
                let mut outcome =
                    run_command(&spec, std::time::Duration::from_secs(3600), &mut |_| {});
                if stream {
                    if let Ok(o) = outcome.as_mut() {
                        o.signal_as_exit_code(token.is_cancelled());
                    }
                }
                let _ = tx.send(Worker::BashDone {
                    job,
                    outcome: Box::new(outcome),
                });
            })
            .map_err(|e| format!("Cannot start the bash thread: {e}"))?;
        self.bash.jobs.push(BashJob {
            job,
            id,
            command,
            cancel,
            exclude_from_context,
        });
        Ok(())
    }

    /// A piece of a running command's output (pi 0.87.1 only).
    pub(crate) fn on_bash_output(&mut self, job: u64, delta: &str) {
        let Some(j) = self.bash.jobs.iter().find(|j| j.job == job) else {
            return;
        };
        let id = j.id.clone();
        self.emit(&crate::rpc::event::Event::BashExecutionUpdate {
            id: id.as_ref(),
            delta,
        });
    }

    /// `abort_bash`: kill every running command's process group (their responses follow).
    pub(crate) fn abort_bash(&mut self) {
        for job in &mut self.bash.jobs {
            job.cancel.cancel();
        }
    }

    /// A bash thread finished: answer its command, and record the execution.
    pub(crate) fn on_bash_done(&mut self, job: u64, outcome: Result<CommandOutcome, String>) {
        let Some(pos) = self.bash.jobs.iter().position(|j| j.job == job) else {
            return;
        };
        let job = self.bash.jobs.remove(pos);
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                self.send(response::error(job.id.as_ref(), Some("bash"), &e));
                return;
            }
        };
        let mut data = outcome.rpc_result();
        if let Value::Object(m) = &mut data {
            m.insert("totalLines".into(), outcome.total_lines.into());
            m.insert("totalBytes".into(), outcome.total_bytes.into());
            m.insert("outputLines".into(), outcome.output_lines.into());
            m.insert("outputBytes".into(), outcome.output_bytes.into());
        }
        let message = AgentMessage::BashExecution(BashExecutionMessage {
            command: job.command,
            output: outcome.output.clone(),
            exit_code: outcome.exit_code,
            cancelled: outcome.cancelled || outcome.timed_out,
            truncated: outcome.truncated,
            full_output_path: outcome
                .full_output_path
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
            timestamp: now_ms(),
            exclude_from_context: job.exclude_from_context.then_some(true),
        });
        if self.run.is_some() {
            // The reference defers it to the next prompt so the running turn's context is stable.
            self.bash.deferred.push(message);
        } else {
            self.record_outside_run(message);
        }
        self.send(response::success(job.id.as_ref(), "bash", Some(&data)));
    }

    /// Messages recorded while no run is active (bash executions): context and session.
    pub(crate) fn record_outside_run(&mut self, m: AgentMessage) {
        self.persist_message(&m);
        self.state.messages.push(m);
    }

    /// Deferred bash executions enter the context before the next prompt.
    pub(crate) fn flush_deferred_bash(&mut self) {
        for m in std::mem::take(&mut self.bash.deferred) {
            self.record_outside_run(m);
        }
    }
}
