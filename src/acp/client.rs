//! The tools that go through the editor when it offers to (`initialize`'s client capabilities):
//! `read`, `write` and `edit` through `fs/read_text_file` / `fs/write_text_file` (so the model
//! sees and changes the editor's unsaved buffers), `bash` through `terminal/*` (the editor shows
//! and owns the terminal). The tool's worker thread asks the front end to send the request and
//! waits for the answer (a cancelled run stops waiting at once and kills the terminal). The
//! text the model reads is made by the same code as the built-in tools' (`tools::read`,
//! `tools::edit`).

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender};
use serde_json::{Value, json};

use super::difftool::diff_output;
use crate::tools::{self, Tool, ToolContext, ToolOutput, ToolResult};

/// A request for the client, from a tool's thread; the answer goes to `reply`.
pub struct ClientCall {
    pub method: &'static str,
    pub params: Value,
    pub reply: Sender<Result<Value, String>>,
}

/// What the client offered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offered {
    pub read: bool,
    pub write: bool,
    pub terminal: bool,
}

/// The way to the client for one session's tools.
#[derive(Clone)]
pub struct Bridge {
    pub session_id: String,
    pub calls: Sender<ClientCall>,
}

impl Bridge {
    /// Send `method` and wait for its answer; a cancelled run stops waiting.
    fn call(&self, method: &'static str, mut params: Value, ctx: &ToolContext) -> ToolResult2 {
        params["sessionId"] = json!(self.session_id);
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.calls
            .send(ClientCall {
                method,
                params,
                reply: tx,
            })
            .map_err(|_| "the client is gone".to_string())?;
        loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(r) => return r,
                Err(RecvTimeoutError::Timeout) if ctx.cancel.is_cancelled() => {
                    return Err(tools::ABORTED.to_string());
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err("the client is gone".into()),
            }
        }
    }
}

type ToolResult2 = Result<Value, String>;

/// Whether the tool `name` goes through the client.
pub fn routed(name: &str, offered: Offered) -> bool {
    match name {
        "read" => offered.read,
        "write" => offered.write,
        "edit" => offered.read && offered.write,
        "bash" => offered.terminal,
        _ => false,
    }
}

/// `t` going through the client.
pub fn wrap(t: Arc<dyn Tool>, offered: Offered, bridge: &Bridge) -> Arc<dyn Tool> {
    Arc::new(ClientTool {
        inner: t,
        bridge: bridge.clone(),
        offered,
    })
}

pub struct ClientTool {
    inner: Arc<dyn Tool>,
    bridge: Bridge,
    offered: Offered,
}

fn is_image(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    [".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp"]
        .iter()
        .any(|x| p.ends_with(x))
}

impl ClientTool {
    fn read_client(&self, abs: &str, ctx: &ToolContext) -> Result<String, String> {
        let v = self
            .bridge
            .call("fs/read_text_file", json!({"path": abs}), ctx)?;
        v.get("content")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| "the client's answer has no content".to_string())
    }

    fn write_client(&self, abs: &str, content: &str, ctx: &ToolContext) -> Result<(), String> {
        self.bridge
            .call(
                "fs/write_text_file",
                json!({"path": abs, "content": content}),
                ctx,
            )
            .map(|_| ())
    }

    fn read(&self, args: &Value, ctx: &ToolContext) -> ToolResult {
        let path = tools::arg_str(args, "path").ok_or("Invalid read arguments.")?;
        let abs = tools::paths::resolve_to_cwd(path, &ctx.cwd);
        let text = self.read_client(&abs.to_string_lossy(), ctx)?;
        let num = |k: &str| args.get(k).and_then(Value::as_f64);
        tools::read::read_text(&text, path, num("offset"), num("limit"))
    }

    fn write(
        &self,
        args: &Value,
        ctx: &ToolContext,
        on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        let path = tools::arg_str(args, "path").ok_or("Invalid write arguments.")?;
        let content = tools::arg_str(args, "content").ok_or("Invalid write arguments.")?;
        tools::check_cancel(ctx)?;
        let abs = tools::paths::resolve_to_cwd(path, &ctx.cwd);
        let abs = abs.to_string_lossy();
        let old = if self.offered.read {
            self.read_client(&abs, ctx).ok()
        } else {
            None
        };
        self.write_client(&abs, content, ctx)?;
        on_update(diff_output(&abs, old.as_deref(), content));
        if !ctx.profile.write_byte_count {
            return Ok(tools::text_output(format!("Successfully wrote to {path}")));
        }
        let units = content.encode_utf16().count();
        Ok(tools::text_output(format!(
            "Successfully wrote {units} bytes to {path}"
        )))
    }

    fn edit(
        &self,
        args: &Value,
        ctx: &ToolContext,
        on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        let path = tools::arg_str(args, "path").ok_or("Invalid edit arguments.")?;
        let edits = tools::edit::parse_edits(args)?;
        tools::check_cancel(ctx)?;
        let abs = tools::paths::resolve_to_cwd(path, &ctx.cwd);
        let abs = abs.to_string_lossy();
        let raw = self
            .read_client(&abs, ctx)
            .map_err(|_| format!("File not found: {path}"))?;
        let edited = tools::edit::edit_text(&raw, &edits, path, ctx.profile.edit_fuzzy_rewrite)?;
        tools::check_cancel(ctx)?;
        self.write_client(&abs, &edited.written, ctx)?;
        on_update(diff_output(&abs, Some(&raw), &edited.written));
        Ok(edited.output(path, ctx.profile))
    }

    /// `bash` in a terminal of the client: created, shown (a `terminal` content), waited for
    /// (a cancel or the call's `timeout` kills it), read, released.
    fn bash(
        &self,
        args: &Value,
        ctx: &ToolContext,
        on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        let command = tools::arg_str(args, "command").ok_or("Invalid bash arguments.")?;
        tools::check_cancel(ctx)?;
        let created = self.bridge.call(
            "terminal/create",
            json!({"command": "bash", "args": ["-c", command],
                "cwd": ctx.cwd.to_string_lossy(), "outputByteLimit": 1024 * 1024}),
            ctx,
        )?;
        let id = created
            .get("terminalId")
            .and_then(Value::as_str)
            .ok_or("the client's answer has no terminalId")?
            .to_string();
        on_update(ToolOutput {
            content: Vec::new(),
            details: Some(json!({"acpTerminal": id})),
            structured: None,
            is_error: false,
        });
        let timeout = args.get("timeout").and_then(Value::as_f64);
        let waited = {
            let (tx, rx) = crossbeam_channel::bounded(1);
            let mut params = json!({"terminalId": id});
            params["sessionId"] = json!(self.bridge.session_id);
            let sent = self.bridge.calls.send(ClientCall {
                method: "terminal/wait_for_exit",
                params,
                reply: tx,
            });
            let deadline = timeout
                .filter(|t| *t > 0.0)
                .map(|t| std::time::Instant::now() + Duration::from_secs_f64(t));
            let mut r: Result<Option<Value>, String> = Ok(None);
            if sent.is_ok() {
                loop {
                    match rx.recv_timeout(Duration::from_millis(20)) {
                        Ok(v) => {
                            r = v.map(Some);
                            break;
                        }
                        Err(RecvTimeoutError::Timeout) => {
                            if ctx.cancel.is_cancelled() {
                                r = Err(tools::ABORTED.to_string());
                                break;
                            }
                            if deadline.is_some_and(|d| std::time::Instant::now() > d) {
                                r = Err(format!(
                                    "Command timed out after {} seconds",
                                    timeout.unwrap_or(0.0)
                                ));
                                break;
                            }
                        }
                        Err(RecvTimeoutError::Disconnected) => {
                            r = Err("the client is gone".into());
                            break;
                        }
                    }
                }
            }
            r
        };
        let never = ToolContext {
            cancel: crate::cancel::CancelToken::never(),
            ..ctx.clone()
        };
        if waited.is_err() {
            let _ = self
                .bridge
                .call("terminal/kill", json!({"terminalId": id}), &never);
        }
        let output = self
            .bridge
            .call("terminal/output", json!({"terminalId": id}), &never);
        let _ = self
            .bridge
            .call("terminal/release", json!({"terminalId": id}), &never);
        let text = output
            .as_ref()
            .ok()
            .and_then(|o| o.get("output").and_then(Value::as_str))
            .unwrap_or("")
            .to_string();
        let status = waited?.unwrap_or(Value::Null);
        let code = status.get("exitCode").and_then(Value::as_i64);
        let shown = if text.is_empty() {
            "(no output)".to_string()
        } else {
            text
        };
        match code {
            Some(0) => Ok(tools::text_output(shown)),
            Some(c) => Err(format!("{shown}\n\nCommand exited with code {c}")),
            None => Err(format!(
                "{shown}\n\nCommand ended by signal {}",
                status.get("signal").and_then(Value::as_str).unwrap_or("?")
            )),
        }
    }
}

impl Tool for ClientTool {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn description(&self) -> String {
        self.inner.description()
    }
    fn snippet(&self) -> &'static str {
        self.inner.snippet()
    }
    fn runs_in_machine(&self) -> bool {
        false
    }
    fn parameters(&self) -> Value {
        self.inner.parameters()
    }

    fn execute(
        &self,
        args: &Value,
        ctx: &ToolContext,
        on_update: &mut dyn FnMut(ToolOutput),
    ) -> ToolResult {
        match self.inner.name() {
            "read"
                if !args
                    .get("path")
                    .and_then(Value::as_str)
                    .is_some_and(is_image) =>
            {
                self.read(args, ctx)
            }
            "write" => self.write(args, ctx, on_update),
            "edit" => self.edit(args, ctx, on_update),
            "bash" => self.bash(args, ctx, on_update),
            _ => self.inner.execute(args, ctx, on_update),
        }
    }
}
