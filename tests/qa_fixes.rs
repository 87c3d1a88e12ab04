//! Findings of a QA pass, each driven through the real binary: pith's lock on auth.json is
//! released however pith ends, ... (one section per finding).

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::fake_llm::{FakeLlm, Reply};
use support::{Pith, World, faux, faux_rpc};

/// Polls `cond` until it holds (a hang guard, not a timing assertion).
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + support::TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// C: the OAuth refresh lock is always released

/// The token endpoint answers with headers and then nothing: pith's refresh holds pi's lock on
/// auth.json (the `auth.json.lock` directory) while it waits. The host aborts and goes away
/// (stdin closes): pith ends and removes the lock on its way out, so pi and other pith
/// processes do not wait for an abandoned lock to turn stale.
#[test]
fn the_auth_lock_is_released_when_pith_exits_during_a_refresh() {
    let tokens = FakeLlm::start(vec![
        Reply {
            headers: vec![("content-type".into(), "application/json".into())],
            ..Reply::sse(r#"{"access_token":"sk-ant-oat01-LATE","expires_in":3600}"#)
        }
        .stall_after(0, Duration::from_secs(60)),
    ]);
    let llm = FakeLlm::start(vec![]);
    let w = World::new();
    w.write_agent_file(
        "models.json",
        &json!({"providers":{"anthropic":{"baseUrl":llm.base_url()}}}).to_string(),
    );
    w.write_agent_file(
        "auth.json",
        &json!({"anthropic":{"type":"oauth","refresh":"rt-1","access":"sk-ant-oat01-OLD","expires":1000}})
            .to_string(),
    );
    let lock = w.agent_dir().join("auth.json.lock");
    let mut cmd = w.command(&[
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
    ]);
    cmd.env("PITH_ANTHROPIC_TOKEN_URL", tokens.base_url());
    let mut p = Pith::spawn_cmd(cmd);
    let r = p.call(json!({"type":"prompt","message":"hi"}), "p");
    assert_eq!(r["success"], true, "{r}");
    eventually("the refresh takes the lock", || lock.is_dir());
    // The lock is taken before the request goes out: wait until the endpoint has it (on a
    // loaded machine the abort could otherwise come first).
    eventually("the token endpoint gets the request", || {
        tokens.requests().len() == 1
    });
    let a = p.call(json!({"type":"abort"}), "a");
    assert_eq!(
        a,
        json!({"id":"a","type":"response","command":"abort","success":true})
    );
    p.recv_until(|v| v["type"] == "agent_settled");
    // The refresh's worker still waits for the token endpoint (15 s per read), lock in hand.
    p.close_stdin();
    let status = p.wait(support::TIMEOUT);
    assert!(status.success(), "{status:?}");
    assert!(!lock.exists(), "the lock was left behind");
    assert_eq!(tokens.requests().len(), 1);
    assert!(llm.requests().is_empty());
}

// ---------------------------------------------------------------------------------------------
// F: a host that goes away is noticed at once

/// The host closes its end of pith's stdout while a tool runs for a minute and prints nothing:
/// pith notices at once (not when the tool ends and the next write fails), stops the tool
/// (its process is gone), writes what the run had to the session and exits.
#[test]
fn a_closed_stdout_ends_pith_while_a_silent_tool_runs() {
    use std::io::{BufRead, BufReader, Write};
    let w = World::new();
    let marker = support::procs::unique_marker("gone");
    let script = w.tmp().join("faux.jsonl");
    std::fs::write(
        &script,
        format!(
            "{}\n{}\n",
            json!({"toolCalls":[{"name":"bash","arguments":{"command":format!("sleep 60; : {marker}")}}]}),
            json!({"text":"never"})
        ),
    )
    .unwrap();
    let sessions = w.tmp().join("sessions");
    let mut cmd = w.command(&faux_rpc(
        script.to_str().unwrap(),
        &["--session-dir", sessions.to_str().unwrap()],
    ));
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"id":"p","type":"prompt","message":"go"}}"#).unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("tool_execution_start") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "stdout ended");
    }
    eventually("the tool runs", || {
        !support::procs::pgrep(&marker).is_empty()
    });
    drop(out);
    // The sleep would run for a minute: a hang guard well below that.
    let status = support::wait_timeout(&mut child, support::TIMEOUT);
    assert!(status.success(), "{status:?}");
    support::procs::assert_no_process_within(&marker, support::TIMEOUT);
    drop(stdin);
    let entries = support::sessions::entries(&support::sessions::first_file(&sessions));
    let messages: Vec<(String, String)> = entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| {
            let m = &e["message"];
            let what = match m["role"].as_str().unwrap() {
                "toolResult" => m["content"][0]["text"].as_str().unwrap().to_string(),
                _ => m["stopReason"].as_str().unwrap_or("").to_string(),
            };
            (m["role"].as_str().unwrap().to_string(), what)
        })
        .collect();
    assert_eq!(
        messages,
        [
            ("user".to_string(), String::new()),
            ("assistant".to_string(), "toolUse".to_string()),
            ("toolResult".to_string(), "Command aborted".to_string()),
            ("assistant".to_string(), "aborted".to_string()),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// I: invalid UTF-8 and numbers beyond a double

/// A command line with bytes that are not UTF-8 is read as pi reads it (they become U+FFFD), so
/// the command runs and its id is echoed; an id like `1e400` (Infinity to JavaScript) runs the
/// command and is echoed as `null`, as pi 0.73.1 echoes it. Both were parse errors without an id,
/// so a client waiting on the id never got its answer.
#[test]
fn stray_bytes_and_overflowing_numbers_are_read_as_pi_reads_them() {
    let w = World::new();
    let mut p = w.spawn(&faux(&["--no-session"]));
    p.send_raw(b"{\"id\":\"x\xffy\",\"type\":\"abort\"}\n");
    assert_eq!(
        p.recv(),
        json!({"id":"x\u{fffd}y","type":"response","command":"abort","success":true})
    );
    p.send_raw(b"{\"id\":1e400,\"type\":\"get_state\"}\n");
    let r = p.recv();
    assert_eq!(r["id"], serde_json::Value::Null);
    assert_eq!(r.as_object().unwrap().keys().next().unwrap(), "id");
    assert_eq!(r["command"], "get_state");
    assert_eq!(r["success"], true);
    p.send_raw(b"{\"id\":-1e400,\"type\":\"set_session_name\",\"name\":\"n\xfe\"}\n");
    let frames = p.recv_until(|v| v["type"] == "response");
    assert_eq!(
        frames,
        [
            json!({"type":"session_info_changed","name":"n\u{fffd}"}),
            json!({"id":null,"type":"response","command":"set_session_name","success":true})
        ]
    );
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(st["data"]["sessionName"], "n\u{fffd}");
    // Still a parse error where pi's is one: the stray byte breaks the JSON syntax here.
    p.send_raw(b"{\"id\":\"a\",\"type\":\"get_state\"\xff}\n");
    assert_eq!(
        p.recv(),
        json!({"type":"response","command":"parse","success":false,
            "error":"Failed to parse command: expected `,` or `}` at line 1 column 29"})
    );
    let (status, _) = p.finish(support::TIMEOUT);
    assert!(status.success());
}

// ---------------------------------------------------------------------------------------------
// J: the Makefile finds the binaries where cargo puts them

/// With `CARGO_TARGET_DIR` set, cargo builds elsewhere: `make run`, `make test`'s interop step
/// and `make bench` use the binaries there (they ran `target/…/pith`, which did not exist or was
/// stale). Checked with `make -n` (what would run), so nothing is built.
#[test]
fn the_makefile_honours_cargo_target_dir() {
    let Ok(out) = std::process::Command::new("make")
        .args(["-n", "run", "test", "bench"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", "/elsewhere/t")
        .env("MAKEFLAGS", "")
        .output()
    else {
        eprintln!("SKIPPED: make not found");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for expected in [
        "./fixtures/demo/run.sh /elsewhere/t/release/pith",
        "PITH_BIN=/elsewhere/t/debug/pith tests/interop/run.sh pith",
        "python3 tests/bench/compare.py --pith /elsewhere/t/release/pith",
        "python3 tests/bench/tools.py --pith /elsewhere/t/release/pith",
    ] {
        assert!(text.contains(expected), "{expected} not in:\n{text}");
    }
    assert!(!text.contains("target/release/pith"), "{text}");

    // Without it, target/ — as an absolute path: the interop shim starts the binary from its own
    // directory, where a relative `target/debug/pith` does not exist (spawn ENOENT).
    let Ok(out) = std::process::Command::new("make")
        .args(["-n", "test"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("CARGO_TARGET_DIR")
        .env("MAKEFLAGS", "")
        .output()
    else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let expected = format!(
        "PITH_BIN={}/target/debug/pith tests/interop/run.sh pith",
        env!("CARGO_MANIFEST_DIR")
    );
    assert!(text.contains(&expected), "{expected} not in:\n{text}");
}

// ---------------------------------------------------------------------------------------------
// J: the message queues are bounded

/// A host that queues without end: the 1001st `follow_up` (or `steer`, or `prompt` with a
/// `streamingBehavior`) is refused with a clear error, nothing is queued for it, and what was
/// queued before is kept (`get_state` counts it; `abort` ends the run).
#[test]
fn the_message_queues_are_bounded() {
    let w = World::new();
    let script = w.tmp().join("faux.jsonl");
    std::fs::write(
        &script,
        format!("{}\n", json!({"text":"a long answer","delayMs":2000})),
    )
    .unwrap();
    let mut p = w.spawn(&faux(&[
        "--no-session",
        "--faux-script",
        script.to_str().unwrap(),
    ]));
    let r = p.call(json!({"type":"prompt","message":"go"}), "p");
    assert_eq!(r["success"], true);
    let mut burst = Vec::new();
    for k in 0..1000 {
        burst.extend_from_slice(
            format!(
                "{}\n",
                json!({"id":format!("f{k}"),"type":"follow_up","message":format!("m{k}")})
            )
            .as_bytes(),
        );
    }
    p.send_raw(&burst);
    p.response("f999");
    let full = "Queue full: 1000 follow-up messages (3.8KB) are already waiting, the most pith queues (1000 messages or 64 MiB); wait until the agent takes them, or abort";
    for (cmd, id) in [
        (json!({"type":"follow_up","message":"one more"}), "f1000"),
        (
            json!({"type":"prompt","message":"one more","streamingBehavior":"followUp"}),
            "p2",
        ),
    ] {
        let r = p.call(cmd.clone(), id);
        assert_eq!(
            r,
            json!({"id":id,"type":"response","command":cmd["type"],"success":false,"error":full})
        );
    }
    // The steering queue is a queue of its own.
    let r = p.call(json!({"type":"steer","message":"turn"}), "s");
    assert_eq!(r["success"], true, "{r}");
    let st = p.call(json!({"type":"get_state"}), "st");
    assert_eq!(st["data"]["pendingMessageCount"], 1001);
    let a = p.call(json!({"type":"abort"}), "a");
    assert_eq!(a["success"], true);
    let (status, _) = p.finish(support::TIMEOUT);
    assert!(status.success());
}
