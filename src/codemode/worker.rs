//! The codemode worker: `pith __codemode-worker`, a child process of pith's own binary that runs
//! one script in QuickJS and exits. It reads the [`Setup`] line on stdin, then speaks JSON lines
//! ([`super::wire`]): tool calls and output go up, settlements come down. Nothing else reaches
//! the outside world: the VM has no file system, network or timers, and the process does nothing
//! but this (under `--sandbox` it is confined before it reads the script).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::rc::Rc;

use rquickjs::context::EvalOptions;
use rquickjs::{Context, Ctx, Function, Object, Runtime, Value};

use super::wire::{Setup, ToUp};

const PRELUDE: &str = include_str!("prelude.js");

/// What the bridge closure shares with the loop.
#[derive(Default)]
struct Shared {
    /// Tool calls sent up and not settled yet.
    pending: usize,
    /// Answers of globals the worker computes itself: (id, ok, payload).
    local: VecDeque<(u64, bool, String)>,
    done: bool,
    /// stdout failed: the parent is gone.
    broken: bool,
}

fn send(shared: &mut Shared, msg: &ToUp) {
    let mut out = std::io::stdout().lock();
    let ok = serde_json::to_writer(&mut out, msg).is_ok()
        && out.write_all(b"\n").is_ok()
        && out.flush().is_ok();
    if !ok {
        shared.broken = true;
    }
}

/// Run the worker; the process exit code.
pub fn main() -> i32 {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock();
    let mut first = String::new();
    if lines.read_line(&mut first).unwrap_or(0) == 0 {
        eprintln!("codemode worker: no script");
        return 2;
    }
    let setup: Setup = match serde_json::from_str(&first) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("codemode worker: bad setup line: {e}");
            return 2;
        }
    };
    if let Some(mode) = &setup.sandbox {
        if let Err(e) = enter_sandbox(mode, &setup.cwd) {
            let mut shared = Shared::default();
            send(
                &mut shared,
                &ToUp::Done {
                    ok: false,
                    value: None,
                    writes: None,
                    error: Some(super::wire::ScriptError::sandbox(format!(
                        "the sandbox could not be entered: {e}"
                    ))),
                },
            );
            return 1;
        }
    }
    match run(&setup, &mut lines) {
        Ok(()) => 0,
        Err(e) => {
            let mut shared = Shared::default();
            send(
                &mut shared,
                &ToUp::Done {
                    ok: false,
                    value: None,
                    writes: None,
                    error: Some(super::wire::ScriptError::sandbox(e)),
                },
            );
            1
        }
    }
}

/// `--sandbox`: the worker needs no file and no network, so it is confined read-only without
/// network whatever the mode (`warn`: the fallback when the kernel cannot).
fn enter_sandbox(fallback: &str, cwd: &str) -> Result<(), String> {
    use crate::sandbox::{Fallback, Mode, Policy, Sandbox};
    let policy = Policy {
        mode: Mode::ReadOnly,
        network: false,
        writable_roots: Vec::new(),
        env_inherit: false,
        fallback: if fallback == "warn" {
            Fallback::Warn
        } else {
            Fallback::Fail
        },
    };
    let tmp = std::env::temp_dir();
    match Sandbox::start(policy, std::path::Path::new(cwd), &tmp) {
        Ok(sb) => sb.enter(),
        Err(_) if fallback == "warn" => Ok(()),
        Err(e) => Err(e.0),
    }
}

fn run(setup: &Setup, lines: &mut dyn BufRead) -> Result<(), String> {
    let rt = Runtime::new().map_err(|e| e.to_string())?;
    rt.set_memory_limit(setup.memory_limit);
    rt.set_max_stack_size(1024 * 1024);
    let ctx = Context::full(&rt).map_err(|e| e.to_string())?;
    let shared = Rc::new(RefCell::new(Shared::default()));
    let tools = Rc::new(setup.clone());
    let api: Result<rquickjs::Persistent<Object<'static>>, String> = ctx.with(|ctx| {
        let sh = shared.clone();
        let catalog = tools.clone();
        let host = Function::new(ctx.clone(), move |kind: String, json: String| {
            bridge(&mut sh.borrow_mut(), &catalog, &kind, &json);
        })
        .map_err(|e| js_error(&ctx, e))?;
        let make: Function = ctx
            .eval_with_options(PRELUDE, options("codemode-prelude.js"))
            .map_err(|e| js_error(&ctx, e))?;
        let setup_json = serde_json::to_string(&tools.as_ref().js_view()).unwrap_or_default();
        let api: Object = make
            .call((host, setup_json))
            .map_err(|e| js_error(&ctx, e))?;
        let source = format!("(async (tools, console) => {{{}\n}})", setup.code);
        let run: Function = api.get("run").map_err(|e| js_error(&ctx, e))?;
        match ctx.eval_with_options::<Value, _>(source, options("codemode.js")) {
            Ok(f) => {
                run.call::<_, ()>((f,)).map_err(|e| js_error(&ctx, e))?;
            }
            Err(rquickjs::Error::Exception) => {
                // A syntax error: report it as the script's error.
                let thrown = ctx.catch();
                let text = thrown_text(&ctx, thrown);
                shared.borrow_mut().done = true;
                send(
                    &mut shared.borrow_mut(),
                    &ToUp::Done {
                        ok: false,
                        value: None,
                        writes: None,
                        error: Some(text),
                    },
                );
            }
            Err(e) => return Err(js_error(&ctx, e)),
        }
        Ok(rquickjs::Persistent::save(&ctx, api))
    });
    let api = api?;
    let mut line = String::new();
    loop {
        // Run every job the last step made ready (promise reactions).
        loop {
            match rt.execute_pending_job() {
                Ok(true) => continue,
                Ok(false) => break,
                Err(_) => continue, // the exception went to a promise's rejection
            }
        }
        {
            let s = shared.borrow();
            if s.done || s.broken {
                return Ok(());
            }
        }
        let local = shared.borrow_mut().local.pop_front();
        if let Some((id, ok, payload)) = local {
            settle(&ctx, &api, id, ok, &payload)?;
            continue;
        }
        if shared.borrow().pending == 0 {
            let stalled = ctx.with(|ctx| -> Result<bool, String> {
                let api = api.clone().restore(&ctx).map_err(|e| e.to_string())?;
                let f: Function = api.get("stalled").map_err(|e| js_error(&ctx, e))?;
                f.call::<_, bool>(()).map_err(|e| js_error(&ctx, e))
            })?;
            if stalled {
                return Ok(());
            }
            continue;
        }
        line.clear();
        match lines.read_line(&mut line) {
            Ok(0) | Err(_) => return Ok(()), // the parent closed: nothing left to do
            Ok(_) => {}
        }
        let Ok(msg) = serde_json::from_str::<super::wire::ToDown>(&line) else {
            continue;
        };
        let super::wire::ToDown::Settle {
            id,
            ok,
            value,
            error,
        } = msg;
        {
            let mut s = shared.borrow_mut();
            s.pending = s.pending.saturating_sub(1);
        }
        let payload = if ok {
            value
                .map(|v| serde_json::to_string(&v).unwrap_or_default())
                .unwrap_or_default()
        } else {
            error.unwrap_or_default()
        };
        settle(&ctx, &api, id, ok, &payload)?;
    }
}

fn options(filename: &str) -> EvalOptions {
    let mut o = EvalOptions::default();
    o.global = true;
    o.strict = false;
    o.filename = Some(filename.to_string());
    o
}

fn settle(
    ctx: &Context,
    api: &rquickjs::Persistent<Object<'static>>,
    id: u64,
    ok: bool,
    payload: &str,
) -> Result<(), String> {
    ctx.with(|ctx| {
        let api = api.clone().restore(&ctx).map_err(|e| e.to_string())?;
        let f: Function = api.get("settle").map_err(|e| js_error(&ctx, e))?;
        f.call::<_, ()>((id as f64, ok, payload))
            .map_err(|e| js_error(&ctx, e))
    })
}

/// An engine error outside the script (the prelude failed, out of memory while setting up).
fn js_error(ctx: &Ctx, e: rquickjs::Error) -> String {
    if matches!(e, rquickjs::Error::Exception) {
        let t = thrown_text(ctx, ctx.catch());
        return t.stack.unwrap_or(t.message);
    }
    e.to_string()
}

fn thrown_text(_ctx: &Ctx, v: Value) -> super::wire::ScriptError {
    if let Some(obj) = v.as_object() {
        let name: Option<String> = obj.get("name").ok();
        let message: String = obj.get("message").unwrap_or_default();
        let stack: Option<String> = obj.get("stack").ok();
        let head = match &name {
            Some(n) if !message.is_empty() => format!("{n}: {message}"),
            Some(n) => n.clone(),
            None => message.clone(),
        };
        let frames: Vec<&str> = stack
            .as_deref()
            .unwrap_or("")
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.contains("codemode-prelude.js"))
            .collect();
        let mut all = vec![head.as_str()];
        all.extend(frames);
        return super::wire::ScriptError {
            name,
            message,
            stack: Some(all.join("\n")),
        };
    }
    let message = v
        .as_string()
        .and_then(|s| s.to_string().ok())
        .unwrap_or_else(|| "The script threw a value that cannot be described".into());
    super::wire::ScriptError {
        name: None,
        message,
        stack: None,
    }
}

/// The host side of the prelude's `host(kind, json)`.
fn bridge(shared: &mut Shared, setup: &Setup, kind: &str, json: &str) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return;
    };
    match kind {
        "call" => {
            let id = v.get("id").and_then(|i| i.as_u64()).unwrap_or(0);
            let name = v.get("name").and_then(|n| n.as_str()).unwrap_or("");
            shared.pending += 1;
            send(
                shared,
                &ToUp::Call {
                    id,
                    name: name.to_string(),
                    args: v.get("args").cloned(),
                },
            );
        }
        "global" => {
            let id = v.get("id").and_then(|i| i.as_u64()).unwrap_or(0);
            let name = v.get("name").and_then(|n| n.as_str()).unwrap_or("");
            let args = v.get("args").cloned().unwrap_or(serde_json::Value::Null);
            let (ok, payload) = match super::discovery::global(setup, name, &args) {
                Ok(Some(value)) => (true, serde_json::to_string(&value).unwrap_or_default()),
                Ok(None) => (true, String::new()),
                Err(e) => (false, e),
            };
            shared.local.push_back((id, ok, payload));
        }
        "output" => {
            let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("text");
            let data = v.get("data").and_then(|d| d.as_str()).unwrap_or("");
            let mime = v.get("mimeType").and_then(|m| m.as_str());
            send(
                shared,
                &ToUp::Out {
                    kind: kind.to_string(),
                    data: data.to_string(),
                    mime: mime.map(str::to_string),
                },
            );
        }
        "done" => {
            shared.done = true;
            let ok = v.get("ok").and_then(|o| o.as_bool()).unwrap_or(false);
            let error = v
                .get("error")
                .and_then(|e| serde_json::from_value(e.clone()).ok());
            let value = v.get("value").and_then(|x| x.as_str()).map(str::to_string);
            let writes = v.get("writes").cloned();
            send(
                shared,
                &ToUp::Done {
                    ok,
                    value,
                    writes,
                    error,
                },
            );
        }
        _ => {}
    }
}
