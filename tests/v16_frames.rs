//! pi 1.6.0's frames and answers under `--compat 1.6` (issue 24): `data.disposition` on
//! prompt/steer/follow_up, the built-in `/llama` and `/mcp` prompts, `agent_settled.aborted`,
//! `durationMs` / `thinkingLevel` on messages, `durationMs` on tool results,
//! `usage.cost.totalFromProvider`, `get_last_assistant_text` skipping textless replies, the session
//! file from the first user message, the trailing aborted turn. Each also checks that
//! `--compat 0.87` is unchanged.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::anthropic::text_sse;
use support::fake_llm::Reply;
use support::frames::{keys, kinds, message_ends, run};
use support::{Pith, World, fake_rpc, fake_world};

fn faux(w: &World, script: &str, compat: &str, extra: &[&str]) -> Pith {
    let mut args = vec!["--compat", compat, "--no-session"];
    args.extend_from_slice(extra);
    w.spawn_faux(script, &args)
}

#[test]
fn prompt_steer_follow_up_say_their_disposition() {
    let w = World::new();
    let script = "{\"text\": \"slow answer here\", \"delayMs\": 150}\n{\"text\": \"second\"}\n{\"text\": \"third\"}\n{\"text\": \"fourth\"}\n";
    let mut p = faux(&w, script, "1.6", &[]);
    p.send(json!({"id":"p1","type":"prompt","message":"hello"}));
    let r = p.response("p1");
    assert_eq!(
        r,
        json!({"id":"p1","type":"response","command":"prompt","success":true,"data":{"disposition":"started"}})
    );
    assert_eq!(keys(&r), ["id", "type", "command", "success", "data"]);
    let r = p.call(json!({"type":"steer","message":"s"}), "s1");
    assert_eq!(r["data"], json!({"disposition":"queued"}));
    let r = p.call(json!({"type":"follow_up","message":"f"}), "f1");
    assert_eq!(r["data"], json!({"disposition":"queued"}));
    let r = p.call(
        json!({"type":"prompt","message":"q","streamingBehavior":"followUp"}),
        "p2",
    );
    assert_eq!(
        r,
        json!({"id":"p2","type":"response","command":"prompt","success":true,"data":{"disposition":"queued"}})
    );
    // Errors keep their shape.
    let r = p.call(json!({"type":"prompt","message":"x"}), "p3");
    assert_eq!(r["success"], false);
    assert!(r.get("data").is_none());
    p.recv_until(|v| v["type"] == "agent_settled");
}

#[test]
fn llama_and_mcp_prompts_are_handled_with_a_notice() {
    let w = World::new();
    let mut p = faux(&w, "{\"text\": \"never\"}\n", "1.6", &[]);
    let before = p.call(json!({"type":"get_state"}), "g0")["data"]["messageCount"].clone();
    p.send(json!({"id":"p1","type":"prompt","message":"/llama"}));
    let n = p.recv();
    assert_eq!(n["type"], "extension_ui_request");
    assert_eq!(keys(&n), ["type", "id", "method", "message", "notifyType"]);
    assert_eq!(n["method"], "notify");
    assert_eq!(n["message"], "/llama is available in interactive mode");
    assert_eq!(n["notifyType"], "warning");
    assert_eq!(
        p.recv(),
        json!({"id":"p1","type":"response","command":"prompt","success":true,"data":{"disposition":"handled"}})
    );
    p.send(json!({"id":"p2","type":"prompt","message":"/mcp"}));
    let n = p.recv();
    let expected = format!(
        "No MCP servers configured. Add them to {}/mcp.json or .pi/mcp.json.",
        w.agent_dir().display()
    );
    assert_eq!(n["message"], expected.as_str());
    assert_eq!(n["notifyType"], "info");
    assert_eq!(
        p.recv(),
        json!({"id":"p2","type":"response","command":"prompt","success":true,"data":{"disposition":"handled"}})
    );
    // No run, nothing added.
    p.assert_quiet(Duration::from_millis(300));
    let after = p.call(json!({"type":"get_state"}), "g1")["data"]["messageCount"].clone();
    assert_eq!(before, after);
}

#[test]
fn under_087_prompts_have_no_disposition_and_llama_is_text() {
    let w = World::new();
    let mut p = faux(&w, "{\"text\": \"as text\"}\n", "0.87", &[]);
    let frames = run(&mut p, "p1", "/llama");
    assert_eq!(
        frames[0],
        json!({"id":"p1","type":"response","command":"prompt","success":true})
    );
    assert_eq!(frames[1]["type"], "agent_start");
    assert_eq!(
        frames.last().unwrap(),
        &json!({"type":"agent_settled"}),
        "no `aborted` under 0.87"
    );
    let a = message_ends(&frames, "assistant")[0];
    assert!(a.get("durationMs").is_none() && a.get("thinkingLevel").is_none());
    assert!(a["usage"]["cost"].get("totalFromProvider").is_none());
}

#[test]
fn settled_says_aborted_after_abort_and_answers_after_it() {
    let w = World::new();
    let script =
        "{\"text\": \"a long slow answer that goes on\", \"delayMs\": 200}\n{\"text\": \"next\"}\n";
    let mut p = faux(&w, script, "1.6", &[]);
    p.send(json!({"id":"p1","type":"prompt","message":"go"}));
    p.recv_until(|v| v["type"] == "message_update");
    p.send(json!({"id":"a1","type":"abort"}));
    let frames = p.recv_until(|v| v["type"] == "response" && v["id"] == "a1");
    let k = kinds(&frames);
    let n = k.len();
    assert_eq!(
        k[n - 3..],
        ["agent_end", "agent_settled", "response:abort"],
        "{k:?}"
    );
    assert_eq!(
        frames[frames.len() - 2],
        json!({"type":"agent_settled","aborted":true})
    );
    let aborted = message_ends(&frames, "assistant")[0];
    assert_eq!(aborted["stopReason"], "aborted");
    assert!(aborted["durationMs"].is_u64());
    // The next run settles without `aborted`.
    let frames = run(&mut p, "p2", "again");
    assert_eq!(
        frames.last().unwrap(),
        &json!({"type":"agent_settled","aborted":false})
    );
}

#[test]
fn abort_retry_answers_before_a_settle_that_is_not_aborted() {
    let (w, _llm) = fake_world(vec![
        Reply::error(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Reply::sse(text_sse(1, &["never"])),
    ]);
    let mut p = w.spawn(&fake_rpc(&["--compat", "1.6", "--no-session"]));
    p.send(json!({"id":"p1","type":"prompt","message":"hi"}));
    p.recv_until(|v| v["type"] == "auto_retry_start");
    p.send(json!({"id":"r1","type":"abort_retry"}));
    let frames: Vec<Value> = p
        .recv_until(|v| v["type"] == "agent_settled")
        .into_iter()
        .filter(|v| v["type"] != "entry_appended")
        .collect();
    let k = kinds(&frames);
    assert_eq!(
        k,
        ["auto_retry_end", "response:abort_retry", "agent_settled"],
        "{frames:?}"
    );
    assert_eq!(frames[0]["finalError"], "Retry cancelled");
    assert_eq!(frames[2], json!({"type":"agent_settled","aborted":false}));
}

#[test]
fn messages_carry_duration_thinking_level_and_cost_origin() {
    let w = World::new();
    let dir = w.tmp().join("sessions");
    let dir_s = dir.to_string_lossy().to_string();
    let script = concat!(
        "{\"text\": \"Let me look.\", \"toolCalls\": [{\"name\": \"bash\", \"arguments\": {\"command\": \"echo hi\"}}, {\"name\": \"bash\", \"arguments\": {}}]}\n",
        "{\"text\": \"Done.\"}\n"
    );
    let mut p = w.spawn_faux(script, &["--compat", "1.6", "--session-dir", &dir_s]);
    let frames = run(&mut p, "p1", "go");
    // The streaming message_start has neither field.
    let start = frames
        .iter()
        .find(|f| f["type"] == "message_start" && f["message"]["stopReason"] == "pending")
        .expect("pending start");
    assert!(start["message"].get("durationMs").is_none());
    assert!(start["message"].get("thinkingLevel").is_none());
    // The faux provider reports its usage at the end (as OpenAI-style APIs do): until then no
    // cost was computed, so neither the streaming message_start nor the updates say whose it
    // is (pi-ai 1.6.0 marks it in `calculateCost`; an Anthropic stream's message_start carries
    // usage and so the mark: tests/v16_diff.rs).
    assert!(
        start["message"]["usage"]["cost"]
            .get("totalFromProvider")
            .is_none()
    );
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "message_update")
        .collect();
    assert!(!updates.is_empty());
    let assistants = message_ends(&frames, "assistant");
    assert_eq!(assistants.len(), 2);
    for a in &assistants {
        let k = keys(a);
        assert_eq!(k[k.len() - 2..], ["durationMs", "thinkingLevel"], "{k:?}");
        assert!(a["durationMs"].is_u64());
        assert_eq!(a["thinkingLevel"], "off", "faux has no reasoning");
        assert_eq!(
            keys(&a["usage"]["cost"]),
            [
                "input",
                "output",
                "cacheRead",
                "cacheWrite",
                "total",
                "totalFromProvider"
            ]
        );
        assert_eq!(a["usage"]["cost"]["totalFromProvider"], false);
    }
    // The tool that ran has a duration; the one that failed validation has none.
    let ends: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends.len(), 2);
    let ran = ends.iter().find(|e| e["isError"] == false).expect("ran");
    assert_eq!(
        keys(ran),
        [
            "type",
            "toolCallId",
            "toolName",
            "result",
            "isError",
            "durationMs"
        ]
    );
    assert!(ran["durationMs"].is_u64());
    let invalid = ends.iter().find(|e| e["isError"] == true).expect("invalid");
    assert!(invalid.get("durationMs").is_none());
    let results = message_ends(&frames, "toolResult");
    let ok = results.iter().find(|r| r["isError"] == false).unwrap();
    assert_eq!(
        keys(ok),
        [
            "role",
            "toolCallId",
            "toolName",
            "content",
            "isError",
            "durationMs",
            "timestamp"
        ]
    );
    let bad = results.iter().find(|r| r["isError"] == true).unwrap();
    assert!(bad.get("durationMs").is_none());
    // The session file keeps them.
    let file = support::sessions::first_file(&dir);
    let entries = support::sessions::entries(&file);
    let saved: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .collect();
    assert_eq!(saved.len(), 2);
    assert_eq!(saved[0]["message"]["thinkingLevel"], "off");
    assert!(saved[0]["message"]["durationMs"].is_u64());
    assert_eq!(
        saved[0]["message"]["usage"]["cost"]["totalFromProvider"],
        false
    );
    // get_messages after a reload of the file reads them back (the session reader keeps them).
    drop(p);
    let mut q = w.spawn_faux(
        "",
        &["--compat", "1.6", "--session", &file.to_string_lossy()],
    );
    let msgs = support::frames::messages(&mut q);
    let a = msgs
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("assistant");
    assert_eq!(a["thinkingLevel"], "off");
    assert_eq!(a["usage"]["cost"]["totalFromProvider"], false);
    let t = msgs
        .iter()
        .find(|m| m["role"] == "toolResult" && m["isError"] == false)
        .expect("tool result");
    assert!(t["durationMs"].is_u64());
}

#[test]
fn thinking_level_is_the_level_the_request_ran_at() {
    let (w, _llm) = fake_world(vec![
        Reply::sse(text_sse(1, &["one"])),
        Reply::sse(text_sse(2, &["two"])),
    ]);
    let mut p = w.spawn(&fake_rpc(&["--compat", "1.6", "--no-session"]));
    let frames = run(&mut p, "p1", "hi");
    assert_eq!(
        message_ends(&frames, "assistant")[0]["thinkingLevel"],
        "medium"
    );
    p.call(json!({"type":"set_thinking_level","level":"high"}), "t");
    let frames = run(&mut p, "p2", "again");
    assert_eq!(
        message_ends(&frames, "assistant")[0]["thinkingLevel"],
        "high"
    );
    // 0.87: no such fields.
    let (w, _llm) = fake_world(vec![Reply::sse(text_sse(1, &["one"]))]);
    let mut p = w.spawn(&fake_rpc(&["--compat", "0.87", "--no-session"]));
    let frames = run(&mut p, "p1", "hi");
    let a = message_ends(&frames, "assistant")[0];
    assert!(a.get("thinkingLevel").is_none() && a.get("durationMs").is_none());
}

#[test]
fn last_assistant_text_skips_a_failed_reply_without_text() {
    let script = "{\"text\": \"First answer.\"}\n{\"error\": \"400 bad request\"}\n";
    for (compat, expected) in [
        ("1.6", json!({"text":"First answer."})),
        ("0.87", json!({"text":"First answer."})),
    ] {
        let w = World::new();
        let mut p = faux(&w, script, compat, &[]);
        run(&mut p, "p1", "one");
        let frames = run(&mut p, "p2", "two");
        let failed = message_ends(&frames, "assistant")[0];
        assert_eq!(failed["stopReason"], "error");
        let r = p.call(json!({"type":"get_last_assistant_text"}), "g");
        if compat == "1.6" {
            assert_eq!(r["data"], expected);
        } else {
            // 0.87.1 looks at the failed reply itself: no text.
            assert_eq!(r["data"], json!({}), "{compat}");
        }
    }
}

#[test]
fn last_assistant_text_skips_a_reply_of_tool_calls_only() {
    let script = concat!(
        "{\"text\": \"First answer.\"}\n",
        "{\"toolCalls\": [{\"name\": \"bash\", \"arguments\": {\"command\": \"sleep 5\"}}]}\n"
    );
    let w = World::new();
    let mut p = faux(&w, script, "1.6", &[]);
    run(&mut p, "p1", "one");
    p.send(json!({"id":"p2","type":"prompt","message":"two"}));
    p.recv_until(|v| v["type"] == "tool_execution_start");
    p.send(json!({"id":"a","type":"abort"}));
    p.response("a");
    let r = p.call(json!({"type":"get_last_assistant_text"}), "g");
    assert_eq!(r["data"], json!({"text":"First answer."}));
}

#[test]
fn trailing_turn_after_a_tool_abort_is_aborted() {
    let script =
        "{\"toolCalls\": [{\"name\": \"bash\", \"arguments\": {\"command\": \"sleep 5\"}}]}\n";
    for (compat, stop) in [("1.6", "aborted"), ("0.87", "error")] {
        let w = World::new();
        let mut p = faux(&w, script, compat, &[]);
        p.send(json!({"id":"p1","type":"prompt","message":"go"}));
        p.recv_until(|v| v["type"] == "tool_execution_start");
        p.send(json!({"id":"a","type":"abort"}));
        let frames = p.recv_until(|v| v["type"] == "response" && v["id"] == "a");
        let trailing = *message_ends(&frames, "assistant").last().unwrap();
        assert_eq!(trailing["stopReason"], stop, "{compat}");
        assert_eq!(trailing["errorMessage"], "This operation was aborted");
        assert_eq!(trailing["content"], json!([]));
        if compat == "1.6" {
            assert!(frames.contains(&json!({"type":"agent_settled","aborted":true})));
        }
    }
}

#[test]
fn session_file_is_written_from_the_first_user_message() {
    for compat in ["1.6", "0.87"] {
        let w = World::new();
        let dir = w.tmp().join("sessions");
        let dir_s = dir.to_string_lossy().to_string();
        let mut p = w.spawn_faux(
            "{\"text\": \"a slow reply to keep the turn open\", \"delayMs\": 4000}\n",
            &["--compat", compat, "--session-dir", &dir_s],
        );
        p.send(json!({"id":"p1","type":"prompt","message":"remember me"}));
        p.recv_until(|v| v["type"] == "message_end" && v["message"]["role"] == "user");
        // The file is written off the event path: look for it for up to 2 s, well before the
        // reply (4 s) would make 0.87 write it too.
        let listed = || -> Vec<std::path::PathBuf> {
            std::fs::read_dir(&dir)
                .map(|d| d.flatten().map(|e| e.path()).collect())
                .unwrap_or_default()
        };
        let has_user = |files: &[std::path::PathBuf]| {
            files.first().is_some_and(|f| {
                std::fs::read_to_string(f).is_ok_and(|t| t.contains("\"role\":\"user\""))
            })
        };
        let mut files = listed();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while !has_user(&files) && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
            files = listed();
        }
        if compat == "0.87" {
            assert!(files.is_empty(), "0.87 waits for the first reply");
            continue;
        }
        assert_eq!(files.len(), 1, "{compat}");
        let text = std::fs::read_to_string(&files[0]).unwrap();
        let shape: Vec<String> = text
            .lines()
            .map(|l| {
                let e: Value = serde_json::from_str(l).unwrap();
                match e["message"]["role"].as_str() {
                    Some(r) => format!("{}:{r}", e["type"].as_str().unwrap()),
                    None => e["type"].as_str().unwrap().to_string(),
                }
            })
            .collect();
        assert_eq!(
            shape,
            [
                "session",
                "model_change",
                "thinking_level_change",
                "message:system",
                "message:user"
            ]
        );
        p.send(json!({"id":"a","type":"abort"}));
        p.response("a");
    }
}

#[test]
fn a_request_failing_before_its_stream_keeps_the_empty_cost() {
    let (w, _llm) = fake_world(vec![Reply::error(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
    )]);
    let mut p = w.spawn(&fake_rpc(&["--compat", "1.6", "--no-session"]));
    let frames = run(&mut p, "p1", "hi");
    let failed = message_ends(&frames, "assistant")[0];
    assert_eq!(failed["stopReason"], "error");
    // pi 1.6.0: the cost was never computed, so it does not say where it came from.
    assert_eq!(
        keys(&failed["usage"]["cost"]),
        ["input", "output", "cacheRead", "cacheWrite", "total"]
    );
    let k = keys(failed);
    assert_eq!(
        k[k.len() - 3..],
        ["errorMessage", "durationMs", "thinkingLevel"]
    );
    // Its message_start (emitted with the error) has both too.
    let start = frames
        .iter()
        .find(|f| f["type"] == "message_start" && f["message"]["role"] == "assistant")
        .unwrap();
    assert!(start["message"]["durationMs"].is_u64());
    assert_eq!(start["message"]["thinkingLevel"], "medium");
}
