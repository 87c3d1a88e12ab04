//! MCP servers' tools over stdio, against the small MCP server in `fixtures/mcp/fake_server.py`:
//! tools listed (all pages) and passed to the model with their schemas, called by the model
//! (text, images, structured content, `isError`), `notifications/tools/list_changed`, progress,
//! requests from the server, a crash, a call timeout, start-up failures, `.mcp.json` and
//! `--no-mcp`, and the process group stopped with pith.
//!
//! The real servers (`@modelcontextprotocol/server-everything`, `mcp-server-time`) are in
//! `tests/mcp_interop.rs` (installed by `make interop`).

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::anthropic::{Sse, text, tool_call};
use support::frames::{run_settled as run, tool_end};
use support::mcp::server_path;
use support::procs::{pgrep, unique_marker};
use support::{Pith, World, fake_rpc, fake_world};

/// settings.json with the fake server as `fake` (extra args) and `pith` settings.
fn configure(w: &World, args: &[&str], pith: Value) -> std::path::PathBuf {
    let log = w.tmp().join("mcp.log");
    let mut a = vec![server_path()];
    a.extend(args.iter().map(|s| s.to_string()));
    let settings = json!({
        "mcpServers": {"fake": {"command": "python3", "args": a,
            "env": {"FAKE_MCP_LOG": log.to_string_lossy()}}},
        "pith": pith,
    });
    w.write_agent_file("settings.json", &settings.to_string());
    log
}

fn spawn_faux(w: &World, script: &str, extra: &[&str]) -> Pith {
    w.spawn_faux_in(&w.cwd(), script, extra)
}

fn logged(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn tools_are_listed_with_their_schemas_and_called_by_the_model() {
    need_python!();
    let calls = Sse::numbered(1).reply(&[
        tool_call("t1", "mcp__fake__echo", &[r#"{"text":"hi"}"#]),
        tool_call("t2", "mcp__fake__add", &[r#"{"a":2,"b":"3"}"#]),
        tool_call("t3", "mcp__fake__image", &["{}"]),
        tool_call("t4", "mcp__fake__fail", &["{}"]),
        tool_call("t5", "mcp__fake__nope", &["{}"]),
    ]);
    let done = Sse::numbered(2).reply(&[text(&["done"])]);
    let (w, llm) = fake_world(vec![calls, done]);
    let log = configure(&w, &["--page-size", "3"], json!({}));
    let mut p = w.spawn(&fake_rpc(&[]));
    let frames = run(&mut p, "p", "use the tools");

    // Every page listed; names `mcp__<server>__<tool>`; schemas passed through unchanged.
    let reqs = llm.requests();
    let body: Value = serde_json::from_str(&reqs[0].body).unwrap();
    let tools: Vec<&Value> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().unwrap().starts_with("mcp__"))
        .collect();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        vec![
            "mcp__fake__echo",
            "mcp__fake__add",
            "mcp__fake__image",
            "mcp__fake__fail",
            "mcp__fake__slow",
            "mcp__fake__crash",
            "mcp__fake__grow",
            "mcp__fake__ask",
            "mcp__fake__when"
        ]
    );
    assert_eq!(tools[0]["description"], "Echo a text.");
    // Anthropic requests take the reference's shape of every tool schema (type, properties,
    // required), plus the definitions `$ref`s point at.
    assert_eq!(
        tools[0]["input_schema"],
        json!({"type":"object","properties":{"text":{"type":"string","description":"What to echo"}},
            "required":["text"]})
    );
    assert_eq!(
        tools[8]["input_schema"],
        json!({"type":"object","properties":{"at":{"$ref":"#/$defs/Time"}},"required":["at"],
            "$defs":{"Time":{"type":"string","description":"HH:MM"}}})
    );

    assert_eq!(
        tool_end(&frames, "t1")["result"],
        json!({"content":[{"type":"text","text":"hi"}]})
    );
    // "3" was coerced to a number by validation, as for every tool.
    assert_eq!(
        tool_end(&frames, "t2")["result"],
        json!({"content":[{"type":"text","text":"5"}],"details":{"structuredContent":{"sum":5}}})
    );
    assert_eq!(
        tool_end(&frames, "t3")["result"]["content"],
        json!([{"type":"text","text":"a pixel:"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}])
    );
    let fail = tool_end(&frames, "t4");
    assert_eq!(fail["isError"], true);
    assert_eq!(fail["result"]["content"][0]["text"], "it failed");
    assert_eq!(
        tool_end(&frames, "t5")["result"]["content"][0]["text"],
        "Tool mcp__fake__nope not found"
    );
    // The image reached the model as part of the tool result.
    let second: Value = serde_json::from_str(&reqs[1].body).unwrap();
    let s = second["messages"].to_string();
    assert!(s.contains("iVBORw0KGgo="), "{s}");

    // The handshake: initialize, then notifications/initialized; calls carry a progress token.
    let seen = logged(&log);
    assert_eq!(seen[0]["method"], "initialize");
    assert_eq!(seen[0]["params"]["protocolVersion"], "2025-06-18");
    assert_eq!(seen[0]["params"]["clientInfo"]["name"], "pith");
    assert_eq!(seen[1]["method"], "notifications/initialized");
    let call = seen
        .iter()
        .find(|m| m["method"] == "tools/call")
        .expect("tools/call");
    assert_eq!(call["params"]["name"], "echo");
    assert_eq!(call["params"]["arguments"], json!({"text":"hi"}));
    assert_eq!(call["params"]["_meta"]["progressToken"], call["id"]);
}

/// A server's results are not trusted: a long text is cut like every tool's output (head kept,
/// a note, `details.truncation`) and only that reaches the model; results of the wrong shape are
/// error results; an image that is not one becomes a text (a provider would refuse the request,
/// and every later one of the session).
#[test]
fn hostile_results_are_bounded_and_validated() {
    need_python!();
    let calls = Sse::numbered(1).reply(&[
        tool_call("t1", "mcp__fake__big", &[r#"{"lines":3000}"#]),
        tool_call("t2", "mcp__fake__raw", &[r#"{"result":"oops"}"#]),
        tool_call("t3", "mcp__fake__raw", &[r#"{"result":{"content":{"type":"text"}}}"#]),
        tool_call(
            "t4",
            "mcp__fake__raw",
            &[r#"{"result":{"content":[{"type":"image","data":"PHN2Zz4=","mimeType":"image/png"}]}}"#],
        ),
    ]);
    let done = Sse::numbered(2).reply(&[text(&["done"])]);
    let (w, llm) = fake_world(vec![calls, done]);
    configure(&w, &["--hostile"], json!({}));
    let mut p = w.spawn(&fake_rpc(&[]));
    let frames = run(&mut p, "p", "use the tools");

    let lines: Vec<String> = (1..=2000).map(|n| format!("line {n}")).collect();
    let cut = format!(
        "{}\n\n[Showing lines 1-2000 of 3000 of the MCP tool's output (2000 lines limit); the rest was cut]",
        lines.join("\n")
    );
    let big = tool_end(&frames, "t1");
    assert_eq!(big["isError"], false);
    assert_eq!(
        big["result"]["content"],
        json!([{"type":"text","text":cut}])
    );
    assert_eq!(
        big["result"]["details"]["truncation"]["totalBytes"],
        (1..=3000)
            .map(|n| format!("line {n}").len() + 1)
            .sum::<usize>()
            - 1
    );
    assert_eq!(big["result"]["details"]["truncation"]["outputLines"], 2000);
    let invalid = "The MCP server returned an invalid tools/call result";
    assert_eq!(
        tool_end(&frames, "t2")["result"],
        json!({"content":[{"type":"text","text":format!("{invalid}: not an object")}],"details":{}})
    );
    assert_eq!(tool_end(&frames, "t2")["isError"], true);
    assert_eq!(
        tool_end(&frames, "t3")["result"]["content"][0]["text"],
        format!("{invalid}: content is not an array")
    );
    assert_eq!(
        tool_end(&frames, "t4")["result"],
        json!({"content":[{"type":"text",
            "text":"[image image/png: not a PNG, JPEG, GIF or WebP image, not shown]"}]})
    );
    // The model got the cut text, nothing past line 2000, and no image.
    let second = &llm.requests()[1].body;
    assert!(
        second.contains("line 2000\\n\\n[Showing lines 1-2000 of 3000"),
        "cut text missing"
    );
    assert!(!second.contains("line 2001"));
    assert!(
        !second.contains("\"media_type\""),
        "an image block was sent"
    );
    let (status, _) = p.finish(support::TIMEOUT);
    assert!(status.success());
}

#[test]
fn openai_requests_carry_the_whole_schema() {
    need_python!();
    let done = support::fake_llm::Reply::sse(
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
    );
    let (w, llm) = fake_world(vec![done]);
    configure(&w, &[], json!({}));
    let mut p = w.spawn(&[
        "--mode",
        "rpc",
        "--provider",
        "fake-openai",
        "--model",
        "fake-oai-model",
    ]);
    run(&mut p, "p", "hi");
    let body: Value = serde_json::from_str(&llm.requests()[0].body).unwrap();
    let echo = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__fake__echo")
        .expect("echo tool");
    assert_eq!(
        echo["function"]["parameters"],
        json!({"type":"object","properties":{"text":{"type":"string","description":"What to echo"}},
            "required":["text"],"additionalProperties":false})
    );
}

#[test]
fn list_changed_brings_new_tools_at_the_next_turn() {
    need_python!();
    let script = r#"{"toolCalls":[{"name":"mcp__fake__grow","arguments":{}}]}
{"toolCalls":[{"name":"mcp__fake__extra","arguments":{}}]}
{"text":"done"}
"#;
    let w = World::new();
    configure(&w, &[], json!({}));
    let mut p = spawn_faux(&w, script, &[]);
    let frames = run(&mut p, "p", "grow");
    assert_eq!(
        tool_end(&frames, "faux_1_0")["result"]["content"][0]["text"],
        "grown"
    );
    assert_eq!(
        tool_end(&frames, "faux_3_0")["result"]["content"][0]["text"],
        "extra here"
    );
}

#[test]
fn a_crashing_server_fails_its_call_and_pith_keeps_running() {
    need_python!();
    let script = r#"{"toolCalls":[{"name":"mcp__fake__crash","arguments":{}}]}
{"text":"after"}
{"toolCalls":[{"name":"mcp__fake__echo","arguments":{"text":"x"}}]}
{"text":"end"}
"#;
    let w = World::new();
    configure(&w, &[], json!({}));
    let mut p = spawn_faux(&w, script, &[]);
    let frames = run(&mut p, "p", "crash it");
    let err = frames
        .iter()
        .find(|f| f["type"] == "extension_error")
        .expect("extension_error");
    assert_eq!(
        *err,
        json!({"type":"extension_error","extensionPath":"mcp:fake","event":"process","error":"exited (exit code 7)"})
    );
    let end = tool_end(&frames, "faux_1_0");
    assert_eq!(end["isError"], true);
    assert_eq!(
        end["result"]["content"][0]["text"],
        "MCP server \"fake\" failed: exited (exit code 7)"
    );
    assert!(frames.iter().any(|f| f["type"] == "agent_end"));
    assert_eq!(p.call(json!({"type":"get_state"}), "s")["success"], true);
    // Its tools are gone.
    let frames = run(&mut p, "p2", "again");
    assert_eq!(
        tool_end(&frames, "faux_5_0")["result"]["content"][0]["text"],
        "Tool mcp__fake__echo not found"
    );
}

#[test]
fn a_call_that_times_out_fails_alone_and_progress_extends_it() {
    need_python!();
    let script = r#"{"toolCalls":[{"name":"mcp__fake__slow","arguments":{"seconds":30}}]}
{"toolCalls":[{"name":"mcp__fake__slow","arguments":{"seconds":2,"progress":true}},{"name":"mcp__fake__echo","arguments":{"text":"still here"}}]}
{"text":"done"}
"#;
    let w = World::new();
    let log = configure(&w, &[], json!({"mcpToolTimeoutSeconds": 1}));
    let mut p = spawn_faux(&w, script, &[]);
    let frames = run(&mut p, "p", "wait");
    let late = tool_end(&frames, "faux_1_0");
    assert_eq!(late["isError"], true);
    assert_eq!(
        late["result"]["content"][0]["text"],
        "MCP server \"fake\" did not answer the call of slow within 1 seconds"
    );
    assert!(!frames.iter().any(|f| f["type"] == "extension_error"));
    // Progress every 0.2 s keeps a 2 s call alive past the 1 s timeout.
    let updates: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_update" && f["toolCallId"] == "faux_3_0")
        .collect();
    assert!(updates.len() >= 3, "{updates:?}");
    assert_eq!(
        updates[0]["partialResult"],
        json!({"content":[{"type":"text","text":"progress 1: working"}]})
    );
    assert_eq!(
        tool_end(&frames, "faux_3_0")["result"]["content"][0]["text"],
        "slept"
    );
    assert_eq!(
        tool_end(&frames, "faux_3_1")["result"]["content"][0]["text"],
        "still here"
    );
    // The timed-out request was cancelled.
    let seen = logged(&log);
    let cancel = seen
        .iter()
        .find(|m| m["method"] == "notifications/cancelled")
        .expect("cancelled");
    assert_eq!(cancel["params"]["reason"], "timed out");
}

#[test]
fn abort_cancels_a_running_mcp_call_at_once() {
    need_python!();
    let script = r#"{"toolCalls":[{"name":"mcp__fake__slow","arguments":{"seconds":30}}]}
"#;
    let w = World::new();
    let log = configure(&w, &[], json!({}));
    let mut p = spawn_faux(&w, script, &[]);
    p.send(json!({"id":"p","type":"prompt","message":"go"}));
    p.recv_until(|f| f["type"] == "tool_execution_start");
    p.send(json!({"id":"a","type":"abort"}));
    let frames = p.recv_until(|f| f["id"] == "a");
    assert_eq!(
        tool_end(&frames, "faux_1_0")["result"]["content"][0]["text"],
        "Operation aborted"
    );
    std::thread::sleep(Duration::from_millis(300));
    let seen = logged(&log);
    assert!(
        seen.iter()
            .any(|m| m["method"] == "notifications/cancelled" && m["params"]["reason"] == "aborted"),
        "{seen:?}"
    );
}

#[test]
fn requests_from_the_server_are_answered() {
    need_python!();
    let script = r#"{"toolCalls":[{"name":"mcp__fake__ask","arguments":{}}]}
{"text":"done"}
"#;
    let w = World::new();
    configure(&w, &[], json!({}));
    let mut p = spawn_faux(&w, script, &[]);
    let frames = run(&mut p, "p", "ask");
    assert_eq!(
        tool_end(&frames, "faux_1_0")["result"]["content"][0]["text"],
        "ping: {}; roots: {\"code\": -32601, \"message\": \"pith does not support roots/list\"}"
    );
}

#[test]
fn start_up_failures_are_reported_and_a_prompt_still_runs() {
    need_python!();
    let w = World::new();
    let settings = json!({
        "mcpServers": {
            "missing": {"command": "/nonexistent/mcp-server"},
            "silent": {"command": "python3", "args": [server_path(), "--no-init"]},
            "old": {"command": "python3", "args": [server_path(), "--version", "1999-01-01"]},
            "dies": {"command": "python3", "args": [server_path(), "--exit-at-start"]},
        },
        "pith": {"mcpStartupTimeoutSeconds": 4},
    });
    w.write_agent_file("settings.json", &settings.to_string());
    let mut p = spawn_faux(&w, "{\"text\":\"hello\"}\n", &[]);
    // The prompt waits for start-up to be over (here: the silent server's 4 s timeout).
    p.send(json!({"id":"p","type":"prompt","message":"hi"}));
    let frames: Vec<Value> = p
        .recv_until(|v| v["type"] == "agent_settled")
        .into_iter()
        .filter(|f| f["type"] != "message_update")
        .collect();
    let mut errors: Vec<(String, String)> = frames
        .iter()
        .filter(|f| f["type"] == "extension_error")
        .map(|f| {
            assert_eq!(f["event"], "startup");
            (
                f["extensionPath"].as_str().unwrap().to_string(),
                f["error"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    errors.sort();
    assert_eq!(errors.len(), 4, "{errors:?}");
    assert_eq!(errors[0].0, "mcp:dies");
    assert_eq!(errors[0].1, "exited during start-up (exit code 1)");
    assert_eq!(errors[1].0, "mcp:missing");
    assert!(
        errors[1]
            .1
            .starts_with("cannot start /nonexistent/mcp-server")
    );
    assert_eq!(errors[2].0, "mcp:old");
    assert!(
        errors[2]
            .1
            .starts_with("initialize failed: server speaks MCP protocol 1999-01-01"),
        "{}",
        errors[2].1
    );
    assert_eq!(
        errors[3],
        (
            "mcp:silent".to_string(),
            "did not answer initialize within 4 seconds".to_string()
        )
    );
    let errs = frames.iter().position(|f| f["type"] == "extension_error");
    let resp = frames.iter().position(|f| f["id"] == "p");
    assert!(errs < resp, "the prompt is answered once start-up is over");
    assert!(frames.iter().any(|f| f["type"] == "agent_end"));
}

#[test]
fn project_mcp_json_loads_and_no_mcp_skips_servers() {
    need_python!();
    let w = World::new();
    let cfg = json!({"mcpServers": {"proj": {"command": "python3", "args": [server_path()]}}});
    std::fs::write(w.cwd().join(".mcp.json"), cfg.to_string()).unwrap();
    let script = "{\"toolCalls\":[{\"name\":\"mcp__proj__echo\",\"arguments\":{\"text\":\"from .mcp.json\"}}]}\n{\"text\":\"done\"}\n";
    let mut p = spawn_faux(&w, script, &[]);
    let frames = run(&mut p, "p", "go");
    assert_eq!(
        tool_end(&frames, "faux_1_0")["result"]["content"][0]["text"],
        "from .mcp.json"
    );
    drop(p);
    let mut p = spawn_faux(&w, script, &["--no-mcp"]);
    let frames = run(&mut p, "p", "go");
    assert_eq!(
        tool_end(&frames, "faux_1_0")["result"]["content"][0]["text"],
        "Tool mcp__proj__echo not found"
    );
}

#[test]
fn servers_and_their_children_stop_with_pith() {
    need_python!();
    let w = World::new();
    let marker = unique_marker("mcpchild");
    configure(&w, &["--spawn-child", &marker], json!({}));
    let mut p = spawn_faux(&w, "{\"text\":\"hi\"}\n", &[]);
    run(&mut p, "p", "hi");
    assert!(!pgrep(&marker).is_empty(), "the server and its child run");
    let (status, _) = p.finish(Duration::from_secs(10));
    assert!(status.success());
    support::procs::assert_no_process_within(&marker, Duration::from_secs(5));
}
