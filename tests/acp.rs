//! `pith --mode acp` driven over pipes by a small JSON-RPC client of the project's own, on the
//! offline faux provider: exact frames for initialize, session/new, prompts with streamed
//! thinking, text and tool calls, edit/write diffs, permissions and modes, cancel (mid-stream and
//! mid-tool), two sessions at once, session/load and slash commands (docs/acp.md).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::time::Duration;

use crossbeam_channel::Receiver;
use serde_json::{Value, json};

use support::World;

const TIMEOUT: Duration = Duration::from_secs(10);

struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next: u64,
}

impl Acp {
    fn start(world: &World, script: &str, extra: &[&str]) -> Acp {
        let path = world.tmp().join("faux.jsonl");
        std::fs::write(&path, script).expect("write faux script");
        let path = path.to_string_lossy().to_string();
        let mut args = vec!["--mode", "acp", "--model", "faux", "--faux-script", &path];
        args.extend_from_slice(extra);
        let mut child = world
            .command(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn pith");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Acp {
            child,
            stdin,
            lines: rx,
            next: 0,
        }
    }

    fn send(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).expect("json");
        line.push(b'\n');
        let stdin = self.stdin.as_mut().expect("stdin");
        stdin.write_all(&line).expect("write");
        stdin.flush().expect("flush");
    }

    /// Send a request; returns its id.
    fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn try_recv(&mut self) -> Option<Value> {
        let line = self.lines.recv_timeout(TIMEOUT).ok()?;
        let v: Value = serde_json::from_str(&line).expect("stdout line is JSON");
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        Some(v)
    }

    fn recv(&mut self) -> Value {
        self.try_recv().expect("a message from pith within 10 s")
    }

    /// Messages until (and including) the first that satisfies `pred`.
    fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let Some(v) = self.try_recv() else {
                panic!("no message within 10 s; so far: {out:#?}");
            };
            let done = pred(&v);
            out.push(v);
            if done {
                return out;
            }
        }
    }

    /// Messages until the answer of request `id`: (what came before, the answer).
    fn answer(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut all = self.until(|v| v["id"] == id && v.get("method").is_none());
        let last = all.pop().expect("answer");
        (all, last)
    }

    fn call(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.request(method, params);
        self.answer(id)
    }

    fn init(&mut self) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .1
    }

    /// `session/new` in the world's cwd: the session id, and the answer.
    fn new_session(&mut self, cwd: &std::path::Path) -> (String, Value) {
        let (_, a) = self.call(
            "session/new",
            json!({"cwd": cwd.to_string_lossy(), "mcpServers": []}),
        );
        let sid = a["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new answered {a}"))
            .to_string();
        // The slash commands follow the answer.
        let cmds = self.recv();
        assert_eq!(
            cmds["params"]["update"]["sessionUpdate"], "available_commands_update",
            "{cmds}"
        );
        (sid, a)
    }

    fn finish(mut self) -> std::process::ExitStatus {
        self.stdin.take();
        support::wait_timeout(&mut self.child, TIMEOUT)
    }
}

/// The `update`s of the `session/update` notifications in `msgs` (other messages kept whole).
fn updates(msgs: &[Value]) -> Vec<Value> {
    msgs.iter()
        .map(|m| {
            if m["method"] == "session/update" {
                m["params"]["update"].clone()
            } else {
                m.clone()
            }
        })
        .collect()
}

fn text(kind: &str, t: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": t}})
}

/// `usage_update`'s `used` depends on the prompt's size (the temp dir's path): any number.
fn normalise_usage(mut us: Vec<Value>) -> Vec<Value> {
    for u in &mut us {
        if u["sessionUpdate"] == "usage_update" {
            assert!(u["used"].as_u64().is_some_and(|n| n > 0), "{u}");
            u["used"] = json!("N");
        }
    }
    us
}

#[test]
fn initialize_new_session_and_a_prompt_with_thinking_text_edit_and_write_diffs() {
    let world = World::new();
    let cwd = world.cwd();
    std::fs::write(cwd.join("a.txt"), "hello world\nbye\n").unwrap();
    let script = [
        r#"{"thinking": "Plan.", "text": "Editing.", "toolCalls": [{"name": "edit", "arguments": {"path": "a.txt", "edits": [{"oldText": "bye", "newText": "ciao"}]}}]}"#,
        r#"{"toolCalls": [{"name": "write", "arguments": {"path": "new.txt", "content": "fresh\n"}}]}"#,
        r#"{"text": "Done."}"#,
    ]
    .join("\n");
    let mut acp = Acp::start(&world, &script, &[]);
    assert_eq!(
        acp.init(),
        json!({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": true, "sse": false},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
            },
            "authMethods": [],
            "agentInfo": {"name": "pith", "title": "pith", "version": env!("CARGO_PKG_VERSION")},
        }})
    );
    assert_eq!(
        acp.call("authenticate", json!({"methodId": "none"})).1["result"],
        json!({})
    );
    let (sid, answer) = acp.new_session(&cwd);
    let modes = json!([
        {"id": "default", "name": "Ask before changes", "description": "Reads run; edits, writes, bash and other tools ask first"},
        {"id": "acceptEdits", "name": "Accept edits", "description": "Reads, edits and writes run; bash and other tools ask first"},
        {"id": "fullAccess", "name": "Full access", "description": "Every tool runs without asking (pi's behaviour)"},
        {"id": "readOnly", "name": "Read only", "description": "Reads run; edits, writes, bash and other tools are refused"},
    ]);
    assert_eq!(
        answer["result"],
        json!({
            "sessionId": sid,
            "modes": {"currentModeId": "default", "availableModes": modes},
            "configOptions": [
                {"id": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "default",
                 "options": [{"value": "default", "name": "Ask before changes"}, {"value": "acceptEdits", "name": "Accept edits"},
                             {"value": "fullAccess", "name": "Full access"}, {"value": "readOnly", "name": "Read only"}]},
                {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "faux/faux",
                 "options": [{"value": "faux/faux", "name": "Faux (offline)"}]},
            ],
        })
    );
    // Accept edits: the edit and the write run without asking.
    let (before, a) = acp.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "acceptEdits"}),
    );
    assert!(before.is_empty());
    assert_eq!(a["result"], json!({}));
    let m = acp.recv();
    assert_eq!(
        m,
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
            "update": {"sessionUpdate": "current_mode_update", "currentModeId": "acceptEdits"}}})
    );

    let (msgs, a) = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "fix it"}]}),
    );
    assert_eq!(a["result"], json!({"stopReason": "end_turn"}));
    assert!(
        msgs.iter()
            .all(|m| m["params"]["sessionId"] == sid.as_str())
    );
    let a_txt = cwd.join("a.txt").to_string_lossy().to_string();
    let new_txt = cwd.join("new.txt").to_string_lossy().to_string();
    assert_eq!(
        normalise_usage(updates(&msgs)),
        vec![
            text("agent_thought_chunk", "Plan."),
            text("agent_message_chunk", "Editing."),
            json!({"sessionUpdate": "tool_call", "toolCallId": "faux_1_0", "title": format!("Edit {a_txt}"),
                "kind": "edit", "status": "pending", "locations": [{"path": a_txt}],
                "rawInput": {"path": "a.txt", "edits": [{"oldText": "bye", "newText": "ciao"}]}}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "faux_1_0", "status": "in_progress"}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "faux_1_0", "status": "completed",
                "content": [{"type": "diff", "path": a_txt, "oldText": "hello world\nbye\n", "newText": "hello world\nciao\n"}],
                "locations": [{"path": a_txt, "line": 2}]}),
            json!({"sessionUpdate": "tool_call", "toolCallId": "faux_3_0", "title": format!("Write {new_txt}"),
                "kind": "edit", "status": "pending", "locations": [{"path": new_txt}],
                "rawInput": {"path": "new.txt", "content": "fresh\n"}}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "faux_3_0", "status": "in_progress"}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "faux_3_0", "status": "completed",
                "content": [{"type": "diff", "path": new_txt, "oldText": null, "newText": "fresh\n"}],
                "locations": [{"path": new_txt, "line": 1}]}),
            text("agent_message_chunk", "Done."),
            json!({"sessionUpdate": "usage_update", "used": "N", "size": 200000,
                "cost": {"amount": 0.0, "currency": "USD"}}),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("a.txt")).unwrap(),
        "hello world\nciao\n"
    );
    // An unknown method is JSON-RPC's error; a prompt for an unknown session too.
    assert_eq!(
        acp.call("session/nope", json!({})).1,
        json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32601, "message": "Method not found: session/nope"}})
    );
    assert_eq!(
        acp.call("session/prompt", json!({"sessionId": "x", "prompt": []}))
            .1["error"],
        json!({"code": -32002, "message": "Session not found"})
    );
    assert!(acp.finish().success());
}

/// Answer pith's `session/request_permission` request `m` with `option`.
fn choose(acp: &mut Acp, m: &Value, option: &str) {
    assert_eq!(m["method"], "session/request_permission", "{m}");
    acp.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": {"outcome": {"outcome": "selected", "optionId": option}}}));
}

/// The ids of the tool calls that started, in order.
fn call_ids(us: &[Value]) -> Vec<String> {
    us.iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .filter_map(|u| u["toolCallId"].as_str().map(str::to_string))
        .collect()
}

/// The statuses a call went through (repeats folded: bash's output updates are `in_progress`).
fn status_of(us: &[Value], call: &str) -> Vec<String> {
    let mut out: Vec<String> = us
        .iter()
        .filter(|u| u["toolCallId"] == call)
        .filter_map(|u| u["status"].as_str().map(str::to_string))
        .collect();
    out.dedup();
    out
}

#[test]
fn permissions_allow_reject_always_and_the_read_only_mode() {
    let world = World::new();
    let cwd = world.cwd();
    std::fs::write(cwd.join("a.txt"), "a\n").unwrap();
    let script = [
        r#"{"toolCalls": [{"name": "edit", "arguments": {"path": "a.txt", "edits": [{"oldText": "a", "newText": "b"}]}}]}"#,
        r#"{"toolCalls": [{"name": "bash", "arguments": {"command": "echo one"}}]}"#,
        r#"{"toolCalls": [{"name": "bash", "arguments": {"command": "echo two"}}]}"#,
        r#"{"text": "ok"}"#,
        r#"{"toolCalls": [{"name": "write", "arguments": {"path": "w.txt", "content": "x"}}, {"name": "read", "arguments": {"path": "a.txt"}}]}"#,
        r#"{"text": "done"}"#,
    ]
    .join("\n");
    // pi 1.6.0's behaviour (every version works the same over ACP).
    let mut acp = Acp::start(&world, &script, &["--compat", "1.6"]);
    acp.init();
    let (sid, _) = acp.new_session(&cwd);
    let a_txt = cwd.join("a.txt").to_string_lossy().to_string();
    let prompt = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
    );
    // The edit asks (mode "default"): rejected once.
    let msgs = acp.until(|m| m["method"] == "session/request_permission");
    let edit_id = call_ids(&updates(&msgs))[0].clone();
    let ask = msgs.last().unwrap().clone();
    assert_eq!(
        ask,
        json!({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission", "params": {
            "sessionId": sid,
            "toolCall": {"toolCallId": edit_id, "title": format!("Edit {a_txt}"), "kind": "edit",
                "locations": [{"path": a_txt}], "status": "pending",
                "rawInput": {"path": "a.txt", "edits": [{"oldText": "a", "newText": "b"}]}},
            "options": [
                {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
                {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
                {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
            ],
        }})
    );
    choose(&mut acp, &ask, "reject_once");
    // The first bash asks: allowed always; the second runs without asking.
    let msgs = acp.until(|m| m["method"] == "session/request_permission");
    let us = updates(&msgs);
    assert_eq!(
        us.iter()
            .find(|u| u["toolCallId"] == edit_id.as_str() && u["status"] == "failed"),
        Some(
            &json!({"sessionUpdate": "tool_call_update", "toolCallId": edit_id, "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": "Tool call denied: the user declined to run edit."}}]})
        )
    );
    let bash1 = call_ids(&us)[0].clone();
    let ask = msgs.last().unwrap().clone();
    assert_eq!(ask["params"]["toolCall"]["title"], "echo one");
    assert_eq!(ask["params"]["toolCall"]["kind"], "execute");
    choose(&mut acp, &ask, "allow_always");
    let (msgs, a) = acp.answer(prompt);
    assert_eq!(a["result"], json!({"stopReason": "end_turn"}));
    assert!(
        msgs.iter().all(|m| m["method"] == "session/update"),
        "no second ask: {msgs:#?}"
    );
    let us = updates(&msgs);
    let bash2 = call_ids(&us)[0].clone();
    assert_eq!(status_of(&us, &bash1), ["in_progress", "completed"]);
    assert_eq!(
        status_of(&us, &bash2),
        ["pending", "in_progress", "completed"]
    );
    let done = us
        .iter()
        .find(|u| u["toolCallId"] == bash2.as_str() && u["status"] == "completed")
        .unwrap();
    assert_eq!(
        done["content"],
        json!([{"type": "content", "content": {"type": "text", "text": "two\n"}}])
    );
    assert_eq!(std::fs::read_to_string(cwd.join("a.txt")).unwrap(), "a\n");

    // Read only: the write is refused without asking, the read runs.
    acp.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "readOnly"}),
    );
    acp.recv(); // current_mode_update
    let (msgs, a) = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}),
    );
    assert_eq!(a["result"], json!({"stopReason": "end_turn"}));
    assert!(msgs.iter().all(|m| m["method"] == "session/update"));
    let us = updates(&msgs);
    let ids = call_ids(&us);
    assert_eq!(status_of(&us, &ids[0]), ["pending", "failed"]);
    assert_eq!(
        status_of(&us, &ids[1]),
        ["pending", "in_progress", "completed"]
    );
    assert!(!cwd.join("w.txt").exists());
    assert!(acp.finish().success());
}

#[test]
fn cancel_mid_stream_and_mid_tool_touches_only_its_own_session() {
    let world = World::new();
    let cwd = world.cwd();
    let slow = "x".repeat(8 * 20);
    let script = [
        format!(r#"{{"text": "{slow}", "delayMs": 40}}"#),
        r#"{"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 5; echo late"}}]}"#
            .to_string(),
        r#"{"text": "never"}"#.to_string(),
    ]
    .join("\n");
    let mut acp = Acp::start(&world, &script, &["--compat", "0.87"]);
    acp.init();
    let (a, _) = acp.new_session(&cwd);
    let (b, _) = acp.new_session(&cwd);
    assert_ne!(a, b);
    let pa = acp.request(
        "session/prompt",
        json!({"sessionId": a, "prompt": [{"type": "text", "text": "slow"}]}),
    );
    let pb = acp.request(
        "session/prompt",
        json!({"sessionId": b, "prompt": [{"type": "text", "text": "slow too"}]}),
    );
    // Both stream; A is cancelled after its first chunk.
    let mut msgs = acp.until(|m| {
        m["params"]["sessionId"] == a.as_str()
            && m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    });
    acp.notify("session/cancel", json!({"sessionId": a}));
    let answers = HashMapLite::default();
    msgs.extend(acp.until(|m| {
        if m["id"] == pa || m["id"] == pb {
            answers.0.borrow_mut().push(m.clone());
        }
        answers.0.borrow().len() == 2
    }));
    let got = answers.0.borrow().clone();
    assert!(
        got.contains(&json!({"jsonrpc": "2.0", "id": pa, "result": {"stopReason": "cancelled"}}))
    );
    assert!(
        got.contains(&json!({"jsonrpc": "2.0", "id": pb, "result": {"stopReason": "end_turn"}}))
    );
    // B streamed its whole answer; A stopped early.
    let chunks = |sid: &str| -> String {
        msgs.iter()
            .filter(|m| {
                m["params"]["sessionId"] == sid
                    && m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            })
            .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
            .collect()
    };
    assert_eq!(chunks(&b), slow);
    assert!(chunks(&a).len() < slow.len());

    // Mid-tool: A's bash is killed by the cancel.
    acp.call(
        "session/set_mode",
        json!({"sessionId": a, "modeId": "fullAccess"}),
    );
    acp.recv();
    let pa = acp.request(
        "session/prompt",
        json!({"sessionId": a, "prompt": [{"type": "text", "text": "run"}]}),
    );
    // Cancelled once the bash runs (the mode let it: `in_progress`).
    let started_call = acp.until(|m| m["params"]["update"]["status"] == "in_progress");
    let bash = call_ids(&updates(&started_call))[0].clone();
    let started = std::time::Instant::now();
    acp.notify("session/cancel", json!({"sessionId": a}));
    let (msgs, answer) = acp.answer(pa);
    assert_eq!(answer["result"], json!({"stopReason": "cancelled"}));
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(status_of(&updates(&msgs), &bash), ["failed"]);
    assert!(acp.finish().success());
}

/// Answers collected inside a `Fn` predicate.
#[derive(Default)]
struct HashMapLite(std::cell::RefCell<Vec<Value>>);

#[test]
fn load_replays_a_pi_session_with_its_compaction_and_a_pith_session_it_wrote() {
    let world = World::new();
    let cwd = world.cwd();
    let cwd_s = cwd.to_string_lossy().to_string();
    // A session in pi's format (version 3), with a compaction, in pi's session directory.
    let dir = pith::session::store::default_session_dir(&world.agent_dir(), &cwd_s);
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/acp/pi-session.jsonl"
    ))
    .unwrap()
    .replace("{CWD}", &cwd_s);
    std::fs::write(dir.join("2026-11-20T10-00-00-000Z_pi.jsonl"), fixture).unwrap();
    let mut acp = Acp::start(&world, r#"{"text": "hi there"}"#, &[]);
    acp.init();
    let (msgs, a) = acp.call(
        "session/load",
        json!({"sessionId": "0199aaaa-0000-7000-8000-000000000001", "cwd": cwd_s, "mcpServers": []}),
    );
    assert!(a["result"]["modes"].is_object(), "{a}");
    let a_txt = cwd.join("a.txt").to_string_lossy().to_string();
    assert_eq!(
        updates(&msgs),
        vec![
            text("user_message_chunk", "first question"),
            text("agent_message_chunk", "first answer"),
            text("user_message_chunk", "read a.txt"),
            text(
                "agent_message_chunk",
                "[Compaction summary]\n\nThe user asked a first question and got a first answer."
            ),
            text("agent_thought_chunk", "Look at it."),
            json!({"sessionUpdate": "tool_call", "title": format!("Read {a_txt}"), "kind": "read",
                "locations": [{"path": a_txt}], "toolCallId": "toolu_1", "status": "pending",
                "rawInput": {"path": "a.txt"}}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_1", "status": "completed",
                "content": [{"type": "content", "content": {"type": "text", "text": "a"}}]}),
            text("agent_message_chunk", "It says a."),
        ]
    );
    acp.recv(); // available_commands_update
    // An unknown id is not found; loading an open session is refused.
    assert_eq!(
        acp.call(
            "session/load",
            json!({"sessionId": "nope", "cwd": cwd_s, "mcpServers": []})
        )
        .1["error"],
        json!({"code": -32002, "message": "Session not found: nope"})
    );

    // A session pith writes in ACP mode loads again, after the process is gone.
    let (sid, _) = acp.new_session(&cwd);
    let (_, a) = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}),
    );
    assert_eq!(a["result"], json!({"stopReason": "end_turn"}));
    // session/list has both, the newest first.
    let (_, l) = acp.call("session/list", json!({"cwd": cwd_s}));
    let ids: Vec<&str> = l["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(ids, [sid.as_str(), "0199aaaa-0000-7000-8000-000000000001"]);
    assert!(acp.finish().success());

    let mut acp = Acp::start(&world, r#"{"text": "hi there"}"#, &[]);
    acp.init();
    let (msgs, _) = acp.call(
        "session/load",
        json!({"sessionId": sid, "cwd": cwd_s, "mcpServers": []}),
    );
    assert_eq!(
        updates(&msgs),
        vec![
            text("user_message_chunk", "hello"),
            text("agent_message_chunk", "hi there"),
        ]
    );
    acp.recv(); // available_commands_update
    // session/close ends it: the id is gone until it is opened again; session/resume opens it
    // without the replay.
    assert_eq!(
        acp.call("session/close", json!({"sessionId": sid})).1["result"],
        json!({})
    );
    assert_eq!(
        acp.call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}),
        )
        .1["error"],
        json!({"code": -32002, "message": "Session not found"})
    );
    let (msgs, a) = acp.call(
        "session/resume",
        json!({"sessionId": sid, "cwd": cwd_s, "mcpServers": []}),
    );
    assert!(updates(&msgs).is_empty(), "{msgs:?}");
    assert!(a["result"]["modes"].is_object(), "{a}");
    assert!(a["result"]["configOptions"].is_array(), "{a}");
    assert!(acp.finish().success());
}

#[test]
fn slash_commands_model_changes_and_run_limits() {
    let world = World::new();
    let cwd = world.cwd();
    world.fake_models(9);
    std::fs::create_dir_all(world.agent_dir().join("prompts")).unwrap();
    std::fs::write(
        world.agent_dir().join("prompts/review.md"),
        "---\ndescription: Review the code\n---\nReview $1 carefully.",
    )
    .unwrap();
    let script = [
        r#"{"toolCalls": [{"name": "ls", "arguments": {}}]}"#,
        r#"{"text": "never"}"#,
    ]
    .join("\n");
    let mut acp = Acp::start(&world, &script, &["--max-turns", "1"]);
    acp.init();
    let (_, answer) = acp.call(
        "session/new",
        json!({"cwd": cwd.to_string_lossy(), "mcpServers": []}),
    );
    let sid = answer["result"]["sessionId"].as_str().unwrap().to_string();
    let models = &answer["result"]["configOptions"][1];
    assert_eq!(models["currentValue"], "faux/faux");
    let values: Vec<&str> = models["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["value"].as_str())
        .collect();
    assert!(values.contains(&"fake/fake-model-2"), "{values:?}");
    let cmds = acp.recv();
    assert_eq!(
        cmds["params"]["update"],
        json!({"sessionUpdate": "available_commands_update", "availableCommands": [
            {"name": "review", "description": "Review the code", "input": {"hint": "arguments"}},
        ]})
    );
    // The template expands; the run stops at its limit of one LLM request.
    let (msgs, a) = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "/review main.rs"}]}),
    );
    assert_eq!(a["result"], json!({"stopReason": "max_turn_requests"}));
    assert!(
        msgs.iter()
            .all(|m| m["params"]["update"]["content"]["text"] != "never")
    );
    // A model change: answered with the options as they are now.
    let (_, a) = acp.call(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "model", "value": "fake/fake-model-2"}),
    );
    assert_eq!(
        a["result"]["configOptions"][1]["currentValue"],
        "fake/fake-model-2"
    );
    // A reasoning model has a thinking level to choose.
    let (_, a) = acp.call(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "model", "value": "fake/fake-model"}),
    );
    assert_eq!(
        a["result"]["configOptions"][2]["id"], "thought_level",
        "{a}"
    );
    let (_, a) = acp.call(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "thought_level", "value": "high"}),
    );
    assert_eq!(
        a["result"]["configOptions"][2]["currentValue"], "high",
        "{a}"
    );
    let (_, a) = acp.call(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "model", "value": "fake/nope"}),
    );
    assert_eq!(a["error"]["code"], -32602, "{a}");
    let (_, a) = acp.call(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "mode", "value": "readOnly"}),
    );
    assert_eq!(a["result"]["configOptions"][0]["currentValue"], "readOnly");
    assert!(acp.finish().success());
}

#[test]
fn client_fs_and_terminal_carry_the_file_tools_and_bash_when_offered() {
    let world = World::new();
    let cwd = world.cwd();
    std::fs::write(cwd.join("a.txt"), "on disk\n").unwrap();
    let script = [
        r#"{"toolCalls": [{"name": "read", "arguments": {"path": "a.txt"}}]}"#,
        r#"{"toolCalls": [{"name": "edit", "arguments": {"path": "a.txt", "edits": [{"oldText": "one", "newText": "two"}]}}]}"#,
        r#"{"toolCalls": [{"name": "bash", "arguments": {"command": "echo hi"}}]}"#,
        r#"{"text": "done"}"#,
    ]
    .join("\n");
    let mut acp = Acp::start(&world, &script, &[]);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {
            "fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}}),
    );
    let (sid, _) = acp.new_session(&cwd);
    acp.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "fullAccess"}),
    );
    acp.recv();
    let a_txt = cwd.join("a.txt").to_string_lossy().to_string();
    // The editor's unsaved buffer.
    let mut buffer = "buffer one\n".to_string();
    let prompt = acp.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
    );
    let mut asked = Vec::new();
    let mut us = Vec::new();
    loop {
        let m = acp.recv();
        if m["id"] == prompt && m.get("method").is_none() {
            assert_eq!(m["result"], json!({"stopReason": "end_turn"}));
            break;
        }
        let Some(method) = m["method"].as_str() else {
            panic!("{m}")
        };
        if method == "session/update" {
            us.push(m["params"]["update"].clone());
            continue;
        }
        let mut p = m["params"].clone();
        assert_eq!(p["sessionId"], sid.as_str());
        p.as_object_mut().unwrap().remove("sessionId");
        asked.push(json!({"method": method, "params": p}));
        let result = match method {
            "fs/read_text_file" => json!({"content": buffer}),
            "fs/write_text_file" => {
                buffer = p["content"].as_str().unwrap().to_string();
                json!({})
            }
            "terminal/create" => json!({"terminalId": "term-1"}),
            "terminal/wait_for_exit" => json!({"exitCode": 0, "signal": null}),
            "terminal/output" => json!({"output": "hi\n", "truncated": false}),
            "terminal/release" => json!({}),
            other => panic!("unexpected request {other}"),
        };
        acp.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": result}));
    }
    assert_eq!(
        asked,
        vec![
            json!({"method": "fs/read_text_file", "params": {"path": a_txt}}),
            json!({"method": "fs/read_text_file", "params": {"path": a_txt}}),
            json!({"method": "fs/write_text_file", "params": {"path": a_txt, "content": "buffer two\n"}}),
            json!({"method": "terminal/create", "params": {"command": "bash", "args": ["-c", "echo hi"],
                "cwd": cwd.to_string_lossy(), "outputByteLimit": 1048576}}),
            json!({"method": "terminal/wait_for_exit", "params": {"terminalId": "term-1"}}),
            json!({"method": "terminal/output", "params": {"terminalId": "term-1"}}),
            json!({"method": "terminal/release", "params": {"terminalId": "term-1"}}),
        ]
    );
    // What the model read was the buffer; the file on disk is the editor's to save.
    assert_eq!(
        std::fs::read_to_string(cwd.join("a.txt")).unwrap(),
        "on disk\n"
    );
    assert_eq!(buffer, "buffer two\n");
    let ends: Vec<&Value> = us
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .collect();
    assert_eq!(
        ends[0]["content"],
        json!([{"type": "content", "content": {"type": "text", "text": "buffer one\n"}}])
    );
    assert_eq!(
        ends[1]["content"],
        json!([{"type": "diff", "path": a_txt, "oldText": "buffer one\n", "newText": "buffer two\n"}])
    );
    assert_eq!(
        ends[2]["content"],
        json!([{"type": "terminal", "terminalId": "term-1"},
            {"type": "content", "content": {"type": "text", "text": "hi\n"}}])
    );
    assert!(us.contains(
        &json!({"sessionUpdate": "tool_call_update", "toolCallId": "faux_5_0",
        "status": "in_progress", "content": [{"type": "terminal", "terminalId": "term-1"}]})
    ));
    assert!(acp.finish().success());
}

#[test]
fn the_clients_mcp_servers_start_with_the_session() {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: python3 not found (the fake MCP server needs it)");
        return;
    }
    let world = World::new();
    let cwd = world.cwd();
    let script = [
        r#"{"toolCalls": [{"name": "mcp__fake__echo", "arguments": {"text": "hi"}}]}"#,
        r#"{"text": "ok"}"#,
    ]
    .join("\n");
    let mut acp = Acp::start(&world, &script, &[]);
    acp.init();
    let server = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/mcp/fake_server.py");
    let (_, a) = acp.call(
        "session/new",
        json!({"cwd": cwd.to_string_lossy(), "mcpServers": [
            {"name": "fake", "command": "python3", "args": [server], "env": []}]}),
    );
    let sid = a["result"]["sessionId"].as_str().unwrap().to_string();
    acp.recv();
    acp.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "fullAccess"}),
    );
    acp.recv();
    let (msgs, a) = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "echo"}]}),
    );
    assert_eq!(a["result"], json!({"stopReason": "end_turn"}));
    let us = updates(&msgs);
    assert!(us.contains(&json!({"sessionUpdate": "tool_call_update", "toolCallId": "faux_1_0",
        "status": "completed", "content": [{"type": "content", "content": {"type": "text", "text": "hi"}}]})),
        "{us:#?}");
    // SSE is refused.
    let (_, a) = acp.call(
        "session/new",
        json!({"cwd": cwd.to_string_lossy(), "mcpServers": [
            {"type": "sse", "name": "s", "url": "http://127.0.0.1:9/", "headers": []}]}),
    );
    assert_eq!(
        a["error"],
        json!({"code": -32602, "message": "MCP server s: SSE is not supported"})
    );
    assert!(acp.finish().success());
}

#[test]
fn a_refusal_is_a_stop_reason_and_a_failed_run_an_error() {
    let world = World::new();
    let cwd = world.cwd();
    let script = [
        r#"{"error": "The model refused to complete the request"}"#,
        r#"{"error": "400 bad request: nope"}"#,
    ]
    .join("\n");
    let mut acp = Acp::start(&world, &script, &[]);
    acp.init();
    let (sid, _) = acp.new_session(&cwd);
    let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]});
    assert_eq!(
        acp.call("session/prompt", prompt.clone()).1["result"],
        json!({"stopReason": "refusal"})
    );
    assert_eq!(
        acp.call("session/prompt", prompt).1["error"],
        json!({"code": -32603, "message": "400 bad request: nope"})
    );
    assert!(acp.finish().success());
}
