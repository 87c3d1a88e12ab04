//! The agent loop end to end: the real `pith` binary over pipes against a fake Anthropic server
//! on 127.0.0.1. Each test scripts the LLM replies, drives pith with RPC commands and asserts the
//! exact sequence of frames (as in the reference transcripts, spec 5.4) and the request bodies.
//!
//! Frames are compared through a compact summary (`kind`) so a failing test prints a readable
//! diff; the important fields are then checked one by one.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::anthropic::{Block, Sse, text, thinking, tool_call};
use support::fake_llm::{FakeLlm, Reply};
use support::frames::{request_body, strip_cache_control};
use support::procs::{assert_no_process_within, pgrep, unique_marker};
use support::{Pith, World, fake_rpc, fake_world};

// ------------------------------------------------------------------------------------------------
// Scripted Anthropic SSE bodies (the shape of /work/shared/oracle/fakellm.py)

/// A tool call whose compact JSON arguments arrive in three pieces.
fn tool(id: &str, name: &str, args: Value) -> Block {
    let s = args.to_string();
    let chars: Vec<char> = s.chars().collect();
    let size = chars.len().div_ceil(3).max(1);
    let pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    tool_call(id, name, &pieces)
}

fn bash(id: &str, command: &str) -> Block {
    tool(id, "bash", json!({ "command": command }))
}

/// Id `msg_fake`, usage 100 in / 5 out, a `ping` after `message_start`.
fn reply(blocks: &[Block]) -> Reply {
    Sse {
        id: "msg_fake".into(),
        input_tokens: 100,
        output_tokens: 5,
        ping: true,
    }
    .reply(blocks)
}

/// A text reply streamed slowly: `n` deltas `w0 `, `w1 ` … written in small delayed pieces.
fn slow_text(n: usize, chunk_delay_ms: u64) -> Reply {
    let words: Vec<String> = (0..n).map(|i| format!("w{i} ")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    reply(&[text(&refs)]).chunked(64, Duration::from_millis(chunk_delay_ms))
}

fn fixture_reply(name: &str) -> Reply {
    Reply::sse(std::fs::read(support::fixture(name)).expect("fixture"))
}

// ------------------------------------------------------------------------------------------------
// Driving pith

struct Setup {
    llm: FakeLlm,
    world: World,
    p: Pith,
}

fn setup_with(replies: Vec<Reply>, extra: &[&str], prepare: impl FnOnce(&World)) -> Setup {
    let (world, llm) = fake_world(replies);
    prepare(&world);
    let mut args = fake_rpc(&["--no-session"]);
    args.extend_from_slice(extra);
    let p = world.spawn(&args);
    Setup { llm, world, p }
}

/// pith with `--rpc-partials none` (small frames).
fn setup(replies: Vec<Reply>) -> Setup {
    setup_with(replies, &["--rpc-partials", "none"], |_| {})
}

fn prompt(p: &mut Pith, id: &str, message: &str) {
    p.send(json!({"type":"prompt","id":id,"message":message}));
}

fn settled(p: &mut Pith) -> Vec<Value> {
    p.recv_until(|v| v["type"] == "agent_settled")
}

/// A compact, readable summary of one frame.
fn kind(v: &Value) -> String {
    let t = v["type"].as_str().unwrap_or("?");
    let s = |x: &Value| x.as_str().unwrap_or("?").to_string();
    match t {
        "message_start" | "message_end" => format!("{t} {}", s(&v["message"]["role"])),
        "message_update" => format!("update {}", s(&v["assistantMessageEvent"]["type"])),
        "response" => format!(
            "response {} {}",
            s(&v["command"]),
            if v["success"] == true { "ok" } else { "FAIL" }
        ),
        "tool_execution_start" | "tool_execution_update" | "tool_execution_end" => {
            format!("{t} {}", s(&v["toolCallId"]))
        }
        "queue_update" => format!("queue_update {} {}", v["steering"], v["followUp"]),
        _ => t.to_string(),
    }
}

/// Summaries, without `tool_execution_update` (their number depends on pipe timing).
fn kinds(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .map(kind)
        .filter(|k| !k.starts_with("tool_execution_update"))
        .collect()
}

/// Summaries with runs of text/thinking/toolcall deltas collapsed to one entry.
fn kinds_collapsed(frames: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for k in kinds(frames) {
        if k.ends_with("_delta") && out.last() == Some(&k) {
            continue;
        }
        out.push(k);
    }
    out
}

/// The frames without `tool_execution_update` (their number depends on pipe timing).
fn no_updates(frames: &[Value]) -> Vec<Value> {
    frames
        .iter()
        .filter(|v| v["type"] != "tool_execution_update")
        .cloned()
        .collect()
}

fn find(frames: &[Value], pred: impl Fn(&Value) -> bool) -> &Value {
    frames
        .iter()
        .find(|v| pred(v))
        .unwrap_or_else(|| panic!("no such frame in {frames:#?}"))
}

fn tool_end<'a>(frames: &'a [Value], id: &str) -> &'a Value {
    find(frames, |v| {
        v["type"] == "tool_execution_end" && v["toolCallId"] == id
    })
}

fn end_text(frames: &[Value], id: &str) -> (String, bool) {
    let e = tool_end(frames, id);
    let content = e["result"]["content"].as_array().expect("content");
    assert_eq!(content.len(), 1, "{e}");
    assert_eq!(content[0]["type"], "text", "{e}");
    (
        content[0]["text"].as_str().expect("text").to_string(),
        e["isError"].as_bool().expect("isError"),
    )
}

fn deltas(frames: &[Value], ty: &str) -> Vec<String> {
    frames
        .iter()
        .filter(|v| v["type"] == "message_update" && v["assistantMessageEvent"]["type"] == ty)
        .map(|v| {
            v["assistantMessageEvent"]["delta"]
                .as_str()
                .expect("delta")
                .into()
        })
        .collect()
}

fn user_text(m: &Value) -> &str {
    m["content"][0]["text"].as_str().unwrap_or("?")
}

/// Waits up to 2 s for no process whose command line contains `marker`.
fn assert_no_process(marker: &str) {
    assert_no_process_within(marker, Duration::from_secs(2));
}

// ------------------------------------------------------------------------------------------------
// Plain replies

#[test]
fn plain_text_reply() {
    let mut s = setup(vec![fixture_reply("anthropic/text.sse")]);
    prompt(&mut s.p, "p1", "Say hello");
    let f = settled(&mut s.p);
    assert_eq!(
        kinds(&f),
        [
            "response prompt ok",
            "agent_start",
            "turn_start",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "update text_start",
            "update text_delta",
            "update text_delta",
            "update text_delta",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    assert_eq!(f[0]["id"], "p1");
    assert_eq!(
        f[3]["message"]["content"],
        json!([{"type":"text","text":"Say hello"}])
    );
    let start = &f[5]["message"];
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["stopReason"], "stop");
    assert_eq!(
        deltas(&f, "text_delta"),
        ["Hello", " there!", " How can I help you today?"]
    );
    let end_ev = &f[10]["assistantMessageEvent"];
    assert_eq!(end_ev["contentIndex"], 0);
    assert_eq!(end_ev["content"], "Hello there! How can I help you today?");
    // --rpc-partials none: neither snapshot is written.
    assert!(f[8].get("message").is_none(), "{}", f[8]);
    assert!(f[8]["assistantMessageEvent"].get("partial").is_none());
    let a = &f[11]["message"];
    assert_eq!(
        a["content"],
        json!([{"type":"text","text":"Hello there! How can I help you today?"}])
    );
    assert_eq!(a["api"], "anthropic-messages");
    assert_eq!(a["provider"], "fake");
    assert_eq!(a["model"], "fake-model");
    assert_eq!(a["stopReason"], "stop");
    assert_eq!(a["usage"]["input"], 1200);
    assert_eq!(a["usage"]["output"], 9);
    assert_eq!(a["usage"]["totalTokens"], 1209);
    assert!(a.get("errorMessage").is_none());
    assert_eq!(f[12]["message"], *a);
    assert_eq!(f[12]["toolResults"], json!([]));
    let msgs = f[13]["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0], f[4]["message"]);
    assert_eq!(msgs[1], *a);
    s.p.assert_quiet(Duration::from_millis(100));

    let body = request_body(&s.llm, 0);
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["stream"], true);
    assert_eq!(
        strip_cache_control(body["messages"].clone()),
        json!([{"role":"user","content":[{"type":"text","text":"Say hello"}]}])
    );
    let system = body["system"][0]["text"].as_str().expect("system text");
    assert!(
        system.starts_with("You are an expert coding assistant operating inside pi"),
        "{system}"
    );
    let cwd = s.world.cwd();
    assert!(
        system.ends_with(&format!("Current working directory: {}", cwd.display())),
        "{system}"
    );
    assert_eq!(s.llm.requests().len(), 1);
}

#[test]
fn partials_full_message_equals_partial_and_holds_the_text_so_far() {
    let mut s = setup_with(vec![fixture_reply("anthropic/text.sse")], &[], |_| {});
    prompt(&mut s.p, "p1", "Say hello");
    let f = settled(&mut s.p);
    let updates: Vec<&Value> = f.iter().filter(|v| v["type"] == "message_update").collect();
    assert_eq!(updates.len(), 5);
    let mut so_far = String::new();
    for u in updates {
        let e = &u["assistantMessageEvent"];
        if e["type"] == "text_delta" {
            so_far.push_str(e["delta"].as_str().expect("delta"));
        }
        assert_eq!(e["partial"], u["message"], "partial != message in {u}");
        assert_eq!(u["message"]["role"], "assistant");
        assert_eq!(
            u["message"]["content"][0]["text"].as_str(),
            Some(so_far.as_str()),
            "{u}"
        );
    }
    assert_eq!(so_far, "Hello there! How can I help you today?");
}

#[test]
fn thinking_then_text() {
    let mut s = setup(vec![
        reply(&[
            thinking(&["Let me think", " about this."], "sig-abc-123"),
            text(&["The answer", " is 42."]),
        ]),
        reply(&[text(&["Still 42."])]),
    ]);
    prompt(&mut s.p, "p1", "What is the answer?");
    let f = settled(&mut s.p);
    assert_eq!(
        kinds(&f),
        [
            "response prompt ok",
            "agent_start",
            "turn_start",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "update thinking_start",
            "update thinking_delta",
            "update thinking_delta",
            "update thinking_end",
            "update text_start",
            "update text_delta",
            "update text_delta",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    assert_eq!(
        deltas(&f, "thinking_delta"),
        ["Let me think", " about this."]
    );
    assert_eq!(f[9]["assistantMessageEvent"]["contentIndex"], 0);
    assert_eq!(
        f[9]["assistantMessageEvent"]["content"],
        "Let me think about this."
    );
    assert_eq!(f[10]["assistantMessageEvent"]["contentIndex"], 1);
    assert_eq!(
        f[13]["assistantMessageEvent"]["content"],
        "The answer is 42."
    );
    assert_eq!(
        f[14]["message"]["content"],
        json!([
            {"type":"thinking","thinking":"Let me think about this.","thinkingSignature":"sig-abc-123"},
            {"type":"text","text":"The answer is 42."}
        ])
    );

    // The thinking block goes back to the provider with its signature.
    prompt(&mut s.p, "p2", "Sure?");
    settled(&mut s.p);
    let body = request_body(&s.llm, 1);
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(support::fixture("anthropic/e_thinking.request2.json"))
            .expect("fixture"),
    )
    .expect("json");
    assert_eq!(body["messages"], want["messages"]);
}

// ------------------------------------------------------------------------------------------------
// Tools

#[test]
fn single_bash_call_then_answer() {
    let mut s = setup(vec![
        fixture_reply("anthropic/tool.sse"),
        reply(&[text(&["The command printed `hi`."])]),
    ]);
    prompt(&mut s.p, "p1", "Run echo hi");
    let f = settled(&mut s.p);
    assert_eq!(
        kinds_collapsed(&f),
        [
            "response prompt ok",
            "agent_start",
            "turn_start",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "update text_start",
            "update text_delta",
            "update text_end",
            "update toolcall_start",
            "update toolcall_delta",
            "update toolcall_end",
            "message_end assistant",
            "tool_execution_start toolu_bash_1",
            "tool_execution_end toolu_bash_1",
            "message_start toolResult",
            "message_end toolResult",
            "turn_end",
            "turn_start",
            "message_start assistant",
            "update text_start",
            "update text_delta",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    assert_eq!(
        deltas(&f, "toolcall_delta"),
        ["{\"comm", "and\":\"ec", "ho hi\"}"]
    );
    let tc_end = find(&f, |v| v["assistantMessageEvent"]["type"] == "toolcall_end");
    assert_eq!(
        tc_end["assistantMessageEvent"]["toolCall"],
        json!({"type":"toolCall","id":"toolu_bash_1","name":"bash","arguments":{"command":"echo hi"}})
    );
    let first_end = find(&f, |v| {
        v["type"] == "message_end" && v["message"]["role"] == "assistant"
    });
    assert_eq!(first_end["message"]["stopReason"], "toolUse");
    let start = find(&f, |v| v["type"] == "tool_execution_start");
    assert_eq!(
        *start,
        json!({"type":"tool_execution_start","toolCallId":"toolu_bash_1","toolName":"bash",
               "args":{"command":"echo hi"}})
    );
    assert_eq!(
        *tool_end(&f, "toolu_bash_1"),
        json!({"type":"tool_execution_end","toolCallId":"toolu_bash_1","toolName":"bash",
               "result":{"content":[{"type":"text","text":"hi\n"}]},"isError":false})
    );
    let tr = &find(&f, |v| {
        v["type"] == "message_end" && v["message"]["role"] == "toolResult"
    })["message"];
    assert_eq!(tr["toolCallId"], "toolu_bash_1");
    assert_eq!(tr["toolName"], "bash");
    assert_eq!(tr["content"], json!([{"type":"text","text":"hi\n"}]));
    assert_eq!(tr["isError"], false);
    let turn_end = find(&f, |v| v["type"] == "turn_end");
    assert_eq!(turn_end["toolResults"], json!([tr]));
    assert_eq!(turn_end["message"], first_end["message"]);
    let agent_end = find(&f, |v| v["type"] == "agent_end");
    assert_eq!(agent_end["messages"].as_array().map(Vec::len), Some(4));

    // The second request carries the tool call and its result, as the reference sent them.
    let body = request_body(&s.llm, 1);
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(support::fixture("anthropic/c_bash_tool.request2.json"))
            .expect("fixture"),
    )
    .expect("json");
    assert_eq!(body["messages"], want["messages"]);
}

#[test]
fn parallel_calls_end_in_completion_order_results_in_call_order() {
    let mut s = setup(vec![
        reply(&[bash("t_a", "sleep 0.5; echo a"), bash("t_b", "echo b")]),
        reply(&[text(&["done"])]),
    ]);
    prompt(&mut s.p, "p1", "two");
    let f = settled(&mut s.p);
    let k = kinds_collapsed(&f);
    let from = k
        .iter()
        .position(|x| x == "message_end assistant")
        .expect("assistant end");
    assert_eq!(
        k[from..from + 11],
        [
            "message_end assistant",
            "tool_execution_start t_a",
            "tool_execution_start t_b",
            "tool_execution_end t_b",
            "tool_execution_end t_a",
            "message_start toolResult",
            "message_end toolResult",
            "message_start toolResult",
            "message_end toolResult",
            "turn_end",
            "turn_start",
        ]
    );
    assert_eq!(end_text(&f, "t_a"), ("a\n".into(), false));
    assert_eq!(end_text(&f, "t_b"), ("b\n".into(), false));
    let results: Vec<&Value> = f
        .iter()
        .filter(|v| v["type"] == "message_end" && v["message"]["role"] == "toolResult")
        .map(|v| &v["message"])
        .collect();
    assert_eq!(results[0]["toolCallId"], "t_a");
    assert_eq!(results[1]["toolCallId"], "t_b");
    let turn_end = find(&f, |v| v["type"] == "turn_end");
    let ids: Vec<&Value> = turn_end["toolResults"]
        .as_array()
        .expect("toolResults")
        .iter()
        .map(|r| &r["toolCallId"])
        .collect();
    assert_eq!(ids, [&json!("t_a"), &json!("t_b")]);
    assert_eq!(turn_end["toolResults"][0], *results[0]);
    assert_eq!(turn_end["toolResults"][1], *results[1]);
}

#[test]
fn each_tool_success_and_error_texts() {
    let mut s = setup_with(
        vec![
            reply(&[
                tool(
                    "w1",
                    "write",
                    json!({"path":"sub/notes.txt","content":"alpha\nbeta\n"}),
                ),
                tool("r_missing", "read", json!({"path":"missing.txt"})),
                tool("l1", "ls", json!({})),
                tool("f1", "find", json!({"pattern":"*.txt"})),
                tool("g1", "grep", json!({"pattern":"gamma"})),
            ]),
            reply(&[
                tool("r1", "read", json!({"path":"sub/notes.txt"})),
                tool(
                    "e1",
                    "edit",
                    json!({"path":"sub/notes.txt",
                    "edits":[{"oldText":"nope","newText":"x"}]}),
                ),
            ]),
            reply(&[text(&["ok"])]),
        ],
        &[
            "--rpc-partials",
            "none",
            "--tools",
            "read,bash,edit,write,grep,find,ls",
        ],
        |w| {
            std::fs::write(w.cwd().join("g.txt"), "one\ngamma ray\n").expect("write");
        },
    );
    prompt(&mut s.p, "p1", "tools");
    let f = settled(&mut s.p);
    let cwd = s.world.cwd();
    assert_eq!(
        end_text(&f, "w1"),
        ("Successfully wrote 11 bytes to sub/notes.txt".into(), false)
    );
    assert_eq!(
        end_text(&f, "r_missing"),
        (
            format!(
                "ENOENT: no such file or directory, access '{}'",
                cwd.join("missing.txt").display()
            ),
            true
        )
    );
    assert_eq!(tool_end(&f, "r_missing")["result"]["details"], json!({}));
    // ls/find/grep run while write may still be creating sub/: only g.txt is certain, so the
    // listing is checked for it.
    let (ls, ls_err) = end_text(&f, "l1");
    assert!(!ls_err, "{ls}");
    assert!(ls.lines().any(|l| l == "g.txt"), "{ls}");
    let (found, find_err) = end_text(&f, "f1");
    assert!(!find_err, "{found}");
    assert!(found.lines().any(|l| l == "g.txt"), "{found}");
    assert_eq!(end_text(&f, "g1"), ("g.txt:2: gamma ray".into(), false));
    assert_eq!(end_text(&f, "r1"), ("alpha\nbeta\n".into(), false));
    assert_eq!(
        end_text(&f, "e1"),
        (
            "Could not find the exact text in sub/notes.txt. The old text must match exactly including all whitespace and newlines.".into(),
            true
        )
    );
    assert_eq!(tool_end(&f, "e1")["result"]["details"], json!({}));
    assert!(tool_end(&f, "w1")["result"].get("details").is_none());
    assert_eq!(
        std::fs::read_to_string(cwd.join("sub/notes.txt")).expect("written"),
        "alpha\nbeta\n"
    );
    // Tool results of one turn keep call order.
    let turn_ends: Vec<&Value> = f.iter().filter(|v| v["type"] == "turn_end").collect();
    assert_eq!(turn_ends.len(), 3);
    let ids: Vec<&str> = turn_ends[0]["toolResults"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["toolCallId"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(ids, ["w1", "r_missing", "l1", "f1", "g1"]);
}

#[test]
fn bash_output_over_2000_lines_is_truncated_with_full_output_file() {
    // 2500 lines of 21 bytes: over 50 KB in all (so a full-output file exists), while the last
    // 2000 lines fit in 50 KB (so the cut is by lines).
    let line = |i: usize| format!("line-{i:015}");
    let mut s = setup(vec![
        reply(&[bash(
            "big",
            "for i in $(seq 1 2500); do printf 'line-%015d\\n' $i; done",
        )]),
        reply(&[text(&["ok"])]),
    ]);
    prompt(&mut s.p, "p1", "big");
    let f = settled(&mut s.p);
    let end = tool_end(&f, "big");
    assert_eq!(end["isError"], false, "{end}");
    let text = end["result"]["content"][0]["text"].as_str().expect("text");
    let details = &end["result"]["details"];
    let path = details["fullOutputPath"]
        .as_str()
        .unwrap_or_else(|| panic!("no fullOutputPath in {details}"));
    let kept: String = (502..=2500).map(|i| line(i) + "\n").collect();
    assert_eq!(
        text,
        format!("{kept}\n\n[Showing lines 502-2501 of 2501. Full output: {path}]")
    );
    let t = &details["truncation"];
    assert_eq!(t["truncated"], true);
    assert_eq!(t["truncatedBy"], "lines");
    assert_eq!(t["totalLines"], 2501);
    assert_eq!(t["outputLines"], 2000);
    let full: String = (1..=2500).map(|i| line(i) + "\n").collect();
    assert_eq!(
        std::fs::read_to_string(path).expect("full output file"),
        full
    );
}

#[test]
fn unknown_tool_and_invalid_arguments_fail_immediately() {
    let mut s = setup(vec![
        reply(&[
            bash("slow", "sleep 0.3; echo slow"),
            tool("n1", "nope", json!({"x":1})),
            tool("v1", "read", json!({"file":"a.txt"})),
        ]),
        reply(&[text(&["ok"])]),
    ]);
    prompt(&mut s.p, "p1", "bad tools");
    let f = settled(&mut s.p);
    let k = kinds_collapsed(&f);
    let from = k
        .iter()
        .position(|x| x == "message_end assistant")
        .expect("assistant end");
    // Immediate errors end during preparation, before the slow call; the tool-result messages
    // all follow in call order (the reference's executeToolCallsParallel).
    assert_eq!(
        k[from..from + 13],
        [
            "message_end assistant",
            "tool_execution_start slow",
            "tool_execution_start n1",
            "tool_execution_end n1",
            "tool_execution_start v1",
            "tool_execution_end v1",
            "tool_execution_end slow",
            "message_start toolResult",
            "message_end toolResult",
            "message_start toolResult",
            "message_end toolResult",
            "message_start toolResult",
            "message_end toolResult",
        ]
    );
    assert_eq!(end_text(&f, "n1"), ("Tool nope not found".into(), true));
    assert_eq!(tool_end(&f, "n1")["result"]["details"], json!({}));
    assert_eq!(
        end_text(&f, "v1"),
        (
            "Validation failed for tool \"read\":\n  - path: must have required properties path\n\nReceived arguments:\n{\n  \"file\": \"a.txt\"\n}".into(),
            true
        )
    );
    assert_eq!(end_text(&f, "slow"), ("slow\n".into(), false));
    let turn_end = find(&f, |v| v["type"] == "turn_end");
    let ids: Vec<&str> = turn_end["toolResults"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["toolCallId"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(ids, ["slow", "n1", "v1"]);
}

// ------------------------------------------------------------------------------------------------
// Steering, follow-ups, queued prompts

#[test]
fn steer_during_streaming_is_a_new_turn_after_turn_end() {
    let mut s = setup(vec![slow_text(16, 15), reply(&[text(&["OK, stopping."])])]);
    prompt(&mut s.p, "p1", "Count slowly");
    let head =
        s.p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta");
    assert_eq!(kinds(&head)[0], "response prompt ok");
    s.p.send(json!({"type":"steer","id":"st1","message":"Stop counting please"}));
    let f = settled(&mut s.p);
    let k: Vec<String> = kinds(&f)
        .into_iter()
        .filter(|k| k != "update text_delta")
        .collect();
    assert_eq!(
        k,
        [
            "queue_update [\"Stop counting please\"] []",
            "response steer ok",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "turn_start",
            "queue_update [] []",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "update text_start",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    let user = find(&f, |v| {
        v["type"] == "message_start" && v["message"]["role"] == "user"
    });
    assert_eq!(user_text(&user["message"]), "Stop counting please");
    // The whole first answer was streamed (steering does not cut the stream).
    let first = find(&f, |v| {
        v["type"] == "message_end" && v["message"]["role"] == "assistant"
    });
    let want: String = (0..16).map(|i| format!("w{i} ")).collect();
    assert_eq!(first["message"]["content"][0]["text"], want);
    let agent_end = find(&f, |v| v["type"] == "agent_end");
    assert_eq!(agent_end["messages"].as_array().map(Vec::len), Some(4));
    // The second request ends with the steering message.
    let body = request_body(&s.llm, 1);
    let msgs = strip_cache_control(body["messages"].clone());
    assert_eq!(
        msgs.as_array().and_then(|m| m.last()).cloned(),
        Some(json!({"role":"user","content":[{"type":"text","text":"Stop counting please"}]}))
    );
}

/// Two bash calls, the first slow; a steer arrives after the fast one ended. `mode`: the
/// interrupt mode to set first (`None`: the default).
fn steer_during_tools(mode: Option<&str>, marker: &str) -> (Setup, Vec<Value>) {
    let mut s = setup(vec![
        reply(&[
            bash("t_slow", &format!("sleep 1.5; echo {marker}")),
            bash("t_fast", "echo fast"),
        ]),
        reply(&[text(&["Acknowledged the steer."])]),
    ]);
    if let Some(mode) = mode {
        let r =
            s.p.call(json!({"type":"set_interrupt_mode","mode":mode}), "im");
        assert_eq!(r["success"], true, "{r}");
    }
    prompt(&mut s.p, "p1", "Run the two commands");
    s.p.recv_until(|v| v["type"] == "tool_execution_end" && v["toolCallId"] == "t_fast");
    s.p.send(json!({"type":"prompt","id":"p2","message":"Change of plan",
                    "streamingBehavior":"steer"}));
    let f = settled(&mut s.p);
    (s, f)
}

#[test]
fn steer_during_tools_wait_mode_lets_tools_finish() {
    for mode in [Some("wait"), None] {
        steer_during_tools_lets_tools_finish(mode);
    }
}

/// Interrupt mode `wait` (the default, pi's behaviour): the running tools finish, nothing is
/// skipped, and the steering message starts the next turn.
fn steer_during_tools_lets_tools_finish(mode: Option<&str>) {
    let marker = unique_marker("wait");
    let (mut s, f) = steer_during_tools(mode, &marker);
    let st = s.p.call(json!({"type":"get_state"}), "gs");
    assert_eq!(st["data"]["interruptMode"], "wait", "{st}");
    assert_eq!(
        kinds_collapsed(&f),
        [
            "queue_update [\"Change of plan\"] []",
            "response prompt ok",
            "tool_execution_end t_slow",
            "message_start toolResult",
            "message_end toolResult",
            "message_start toolResult",
            "message_end toolResult",
            "turn_end",
            "turn_start",
            "queue_update [] []",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "update text_start",
            "update text_delta",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    assert_eq!(end_text(&f, "t_slow"), (format!("{marker}\n"), false));
    let user = find(&f, |v| {
        v["type"] == "message_start" && v["message"]["role"] == "user"
    });
    assert_eq!(user_text(&user["message"]), "Change of plan");
}

#[test]
fn steer_during_tools_immediate_mode_skips_the_running_tool() {
    // Immediate mode checks steering each time a tool finishes: t_mid finishes after the steer
    // arrived, so t_slow, still running, is stopped and reported as skipped.
    let marker = unique_marker("immediate");
    let t0 = Instant::now();
    let mut s = setup(vec![
        reply(&[
            bash("t_slow", &format!("sleep 3; echo {marker}")),
            bash("t_mid", "sleep 0.4; echo mid"),
            bash("t_fast", "echo fast"),
        ]),
        reply(&[text(&["Acknowledged the steer."])]),
    ]);
    let r = s.p.call(
        json!({"type":"set_interrupt_mode","mode":"immediate"}),
        "im",
    );
    assert_eq!(r["success"], true, "{r}");
    prompt(&mut s.p, "p1", "Run the three commands");
    s.p.recv_until(|v| v["type"] == "tool_execution_end" && v["toolCallId"] == "t_fast");
    s.p.send(json!({"type":"prompt","id":"p2","message":"Change of plan",
                    "streamingBehavior":"steer"}));
    let f = settled(&mut s.p);
    assert_eq!(
        kinds_collapsed(&f),
        [
            "queue_update [\"Change of plan\"] []",
            "response prompt ok",
            "tool_execution_end t_mid",
            "tool_execution_end t_slow",
            "message_start toolResult",
            "message_end toolResult",
            "message_start toolResult",
            "message_end toolResult",
            "message_start toolResult",
            "message_end toolResult",
            "turn_end",
            "turn_start",
            "queue_update [] []",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "update text_start",
            "update text_delta",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    assert_eq!(
        end_text(&f, "t_slow"),
        ("Skipped due to queued user message.".into(), true)
    );
    assert_eq!(tool_end(&f, "t_slow")["result"]["details"], json!({}));
    assert_eq!(end_text(&f, "t_mid"), ("mid\n".into(), false));
    assert!(
        t0.elapsed() < Duration::from_millis(2500),
        "the slow tool was waited for: {:?}",
        t0.elapsed()
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_no_process(&marker);
}

/// A steer that arrives while the model is still streaming its tool calls: in the default `wait`
/// mode (pi 0.73.1 and 0.87.1: the agent loop looks at steering only after the whole batch) every
/// call runs; in `immediate` mode the calls are skipped before they start.
fn steer_while_tool_calls_stream(mode: Option<&str>) -> Vec<Value> {
    let marker = unique_marker("prep");
    let mut s = setup(vec![
        reply(&[
            text(&["Running", " two", " commands", " now"]),
            bash("t_a", &format!("echo {marker}")),
            bash("t_b", "echo b"),
        ])
        .chunked(48, Duration::from_millis(60)),
        reply(&[text(&["Acknowledged."])]),
    ]);
    if let Some(mode) = mode {
        let r =
            s.p.call(json!({"type":"set_interrupt_mode","mode":mode}), "im");
        assert_eq!(r["success"], true, "{r}");
    }
    prompt(&mut s.p, "p1", "Run them");
    s.p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta");
    s.p.send(json!({"type":"steer","id":"s1","message":"Actually stop"}));
    let f = settled(&mut s.p);
    let ends: Vec<(String, bool)> = ["t_a", "t_b"].iter().map(|id| end_text(&f, id)).collect();
    let user = f
        .iter()
        .filter(|v| v["type"] == "message_end" && v["message"]["role"] == "user")
        .map(|v| user_text(&v["message"]))
        .collect::<Vec<_>>();
    assert_eq!(user, ["Actually stop"], "the steer starts the next turn");
    if mode == Some("immediate") {
        let skipped = ("Skipped due to queued user message.".to_string(), true);
        assert_eq!(ends, [skipped.clone(), skipped]);
    } else {
        assert_eq!(
            ends,
            [(format!("{marker}\n"), false), ("b\n".to_string(), false)]
        );
    }
    f
}

#[test]
fn steer_while_tool_calls_stream_skips_nothing_by_default() {
    steer_while_tool_calls_stream(None);
    steer_while_tool_calls_stream(Some("wait"));
}

#[test]
fn steer_while_tool_calls_stream_skips_them_in_immediate_mode() {
    steer_while_tool_calls_stream(Some("immediate"));
}

#[test]
fn follow_up_runs_an_extra_turn_in_the_same_run() {
    let mut s = setup(vec![slow_text(16, 10), reply(&[text(&["Follow answer."])])]);
    prompt(&mut s.p, "p1", "First");
    s.p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta");
    s.p.send(json!({"type":"follow_up","id":"f1","message":"And then?"}));
    let f = settled(&mut s.p);
    let k: Vec<String> = kinds(&f)
        .into_iter()
        .filter(|k| k != "update text_delta")
        .collect();
    assert_eq!(
        k,
        [
            "queue_update [] [\"And then?\"]",
            "response follow_up ok",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "turn_start",
            "queue_update [] []",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "update text_start",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    let all = s.p.seen.clone();
    assert_eq!(all.iter().filter(|v| v["type"] == "agent_start").count(), 1);
    let user = find(&f, |v| {
        v["type"] == "message_start" && v["message"]["role"] == "user"
    });
    assert_eq!(user_text(&user["message"]), "And then?");
    let agent_end = find(&f, |v| v["type"] == "agent_end");
    let texts: Vec<&str> = agent_end["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("?"))
        .collect();
    let first: String = (0..16).map(|i| format!("w{i} ")).collect();
    assert_eq!(
        texts,
        ["First", first.as_str(), "And then?", "Follow answer."]
    );
}

#[test]
fn prompt_while_streaming_without_behaviour_is_an_error() {
    let mut s = setup(vec![slow_text(24, 10)]);
    prompt(&mut s.p, "p1", "Answer slowly");
    s.p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta");
    prompt(
        &mut s.p,
        "p2",
        "Interrupting prompt without streamingBehavior",
    );
    let r = s.p.response("p2");
    assert_eq!(
        r,
        json!({"id":"p2","type":"response","command":"prompt","success":false,
               "error":"Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."})
    );
    let f = settled(&mut s.p);
    assert_eq!(f.iter().filter(|v| v["type"] == "turn_start").count(), 0);
    assert!(!f.iter().any(|v| v["type"] == "queue_update"));
    assert_eq!(s.llm.requests().len(), 1);
}

#[test]
fn steer_while_idle_is_delivered_with_the_next_prompt() {
    let mut s = setup(vec![reply(&[text(&["Both seen."])])]);
    let f = {
        s.p.send(json!({"type":"steer","id":"s1","message":"Steer while idle"}));
        s.p.recv_until(|v| v["type"] == "response")
    };
    assert_eq!(
        kinds(&f),
        [
            "queue_update [\"Steer while idle\"] []",
            "response steer ok"
        ]
    );
    let st = s.p.call(json!({"type":"get_state"}), "gs");
    assert_eq!(st["data"]["isStreaming"], false);
    assert_eq!(st["data"]["pendingMessageCount"], 1);
    prompt(&mut s.p, "p1", "Real prompt");
    let f = settled(&mut s.p);
    assert_eq!(
        kinds_collapsed(&f),
        [
            "response prompt ok",
            "agent_start",
            "turn_start",
            "message_start user",
            "message_end user",
            "queue_update [] []",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "update text_start",
            "update text_delta",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    assert_eq!(user_text(&f[3]["message"]), "Real prompt");
    assert_eq!(user_text(&f[6]["message"]), "Steer while idle");
    let body = request_body(&s.llm, 0);
    assert_eq!(
        strip_cache_control(body["messages"].clone()),
        json!([{"role":"user","content":[{"type":"text","text":"Real prompt"}]},
               {"role":"user","content":[{"type":"text","text":"Steer while idle"}]}])
    );
}

// ------------------------------------------------------------------------------------------------
// Abort

#[test]
fn abort_during_stream_then_new_prompt() {
    let mut s = setup(vec![slow_text(200, 15), reply(&[text(&["Fresh answer."])])]);
    prompt(&mut s.p, "p1", "Tell me a long story");
    let mut head =
        s.p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta");
    head.extend(s.p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta"));
    let t0 = Instant::now();
    s.p.send(json!({"type":"abort","id":"a1"}));
    let f = s.p.recv_until(|v| v["type"] == "response");
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    let mut so_far: String = deltas(&head, "text_delta").concat();
    so_far.push_str(&deltas(&f, "text_delta").concat());
    let k: Vec<String> = kinds(&f)
        .into_iter()
        .filter(|k| k != "update text_delta")
        .collect();
    assert_eq!(
        k,
        [
            "message_end assistant",
            "turn_end",
            "agent_end",
            "response abort ok"
        ]
    );
    let end = &find(&f, |v| v["type"] == "message_end")["message"];
    assert_eq!(end["stopReason"], "aborted");
    assert_eq!(end["errorMessage"], "This operation was aborted");
    assert_eq!(end["content"], json!([{"type":"text","text":so_far}]));
    let turn_end = find(&f, |v| v["type"] == "turn_end");
    assert_eq!(turn_end["toolResults"], json!([]));
    let agent_end = find(&f, |v| v["type"] == "agent_end");
    assert_eq!(agent_end["messages"].as_array().map(Vec::len), Some(2));
    assert_eq!(kinds(&[s.p.recv()]), ["agent_settled"]);

    let st = s.p.call(json!({"type":"get_state"}), "gs1");
    assert_eq!(st["data"]["isStreaming"], false);

    prompt(&mut s.p, "p2", "Short one please");
    let f = settled(&mut s.p);
    assert_eq!(kinds(&f)[0], "response prompt ok");
    let end = &f.iter().rfind(|v| v["type"] == "message_end").expect("end")["message"];
    assert_eq!(
        end["content"],
        json!([{"type":"text","text":"Fresh answer."}])
    );
    assert_eq!(end["stopReason"], "stop");
    // Aborted assistant messages are left out of later requests (spec 7.2).
    let body = request_body(&s.llm, 1);
    assert_eq!(
        strip_cache_control(body["messages"].clone()),
        json!([{"role":"user","content":[{"type":"text","text":"Tell me a long story"}]},
               {"role":"user","content":[{"type":"text","text":"Short one please"}]}])
    );
}

#[test]
fn abort_during_bash_kills_background_children() {
    let marker = unique_marker("abort");
    // `sleep 30 & sleep 30`, tagged with a marker that pgrep can find.
    let cmd = format!("echo started; sh -c 'sleep 30; : {marker}' & sh -c 'sleep 30; : {marker}'");
    let mut s = setup(vec![reply(&[bash("t_bg", &cmd)])]);
    prompt(&mut s.p, "p1", "background");
    s.p.recv_until(|v| v["type"] == "tool_execution_start");
    // Wait until both children run.
    let until = Instant::now() + Duration::from_secs(3);
    while pgrep(&marker).len() < 2 {
        assert!(Instant::now() < until, "children did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let t0 = Instant::now();
    s.p.send(json!({"type":"abort","id":"a1"}));
    let f = no_updates(&s.p.recv_until(|v| v["type"] == "response"));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(
        kinds(&f),
        [
            "tool_execution_end t_bg",
            "message_start toolResult",
            "message_end toolResult",
            "turn_end",
            "turn_start",
            "message_start assistant",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "response abort ok",
        ]
    );
    assert_eq!(
        end_text(&f, "t_bg"),
        ("started\n\n\nCommand aborted".into(), true)
    );
    let a = &f[6]["message"];
    assert_eq!(a["stopReason"], "aborted");
    assert_eq!(a["errorMessage"], "Request was aborted.");
    assert_eq!(a["content"], json!([]));
    assert_eq!(f[5]["message"]["content"], json!([]));
    assert_eq!(f[7]["toolResults"], json!([]));
    assert_eq!(kinds(&[s.p.recv()]), ["agent_settled"]);
    assert_no_process(&marker);
    // No second LLM request was made for the aborted turn.
    assert_eq!(s.llm.requests().len(), 1);
}

#[test]
fn abort_and_prompt_while_streaming() {
    let mut s = setup(vec![slow_text(200, 15), reply(&[text(&["New run."])])]);
    prompt(&mut s.p, "p1", "Long");
    s.p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta");
    s.p.send(json!({"type":"abort_and_prompt","id":"ap","message":"Instead this"}));
    let f = s.p.recv_until(|v| v["type"] == "agent_settled");
    let k: Vec<String> = kinds_collapsed(&f)
        .into_iter()
        .filter(|k| k != "update text_delta")
        .collect();
    assert_eq!(
        k,
        [
            "queue_update [] []",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "response abort_and_prompt ok",
            "agent_start",
            "turn_start",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "update text_start",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ],
        "frames: {}",
        f.iter()
            .filter(|v| v["type"] == "response")
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let ends: Vec<&Value> = f
        .iter()
        .filter(|v| v["type"] == "message_end" && v["message"]["role"] == "assistant")
        .collect();
    assert_eq!(ends[0]["message"]["stopReason"], "aborted");
    assert_eq!(ends[1]["message"]["stopReason"], "stop");
    assert_eq!(
        ends[1]["message"]["content"],
        json!([{"type":"text","text":"New run."}])
    );
    let user = find(&f, |v| {
        v["type"] == "message_start" && v["message"]["role"] == "user"
    });
    assert_eq!(user_text(&user["message"]), "Instead this");
    assert_eq!(f.iter().filter(|v| v["type"] == "agent_settled").count(), 1);
}

// ------------------------------------------------------------------------------------------------
// Images, state

#[test]
fn images_in_both_shapes_reach_the_request() {
    let mut s = setup(vec![reply(&[text(&["Two images."])])]);
    s.p.send(json!({"type":"prompt","id":"p1","message":"Look","images":[
        {"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},
        {"type":"image","source":{"type":"base64","mediaType":"image/jpeg","data":"/9j/4AAQ"}}
    ]}));
    let f = settled(&mut s.p);
    assert_eq!(kinds(&f)[0], "response prompt ok");
    let user = find(&f, |v| {
        v["type"] == "message_end" && v["message"]["role"] == "user"
    });
    assert_eq!(
        user["message"]["content"],
        json!([{"type":"text","text":"Look"},
               {"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},
               {"type":"image","data":"/9j/4AAQ","mimeType":"image/jpeg"}])
    );
    let body = request_body(&s.llm, 0);
    assert_eq!(
        strip_cache_control(body["messages"].clone()),
        json!([{"role":"user","content":[
            {"type":"text","text":"Look"},
            {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
            {"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQ"}}
        ]}])
    );
}

#[test]
fn seed_000_attachments_and_data_url_images_reach_the_request() {
    let mut s = setup(vec![reply(&[text(&["Seen."])])]);
    s.p.send(json!({"type":"prompt","id":"p1","message":"Look","images":[
        {"type":"image","source":{"type":"url","url":"data:image/gif;base64,R0lGOD"}}
    ],"attachments":[
        {"id":"a1","type":"image","fileName":"shot.png","mimeType":"image/png","size":8,
         "content":"iVBORw0KGgo="},
        {"id":"a2","type":"document","fileName":"notes.pdf","mimeType":"application/pdf","size":5,
         "content":"JVBERi0=","extractedText":"Quarterly numbers"}
    ]}));
    let f = settled(&mut s.p);
    assert_eq!(kinds(&f)[0], "response prompt ok");
    let user = find(&f, |v| {
        v["type"] == "message_end" && v["message"]["role"] == "user"
    });
    assert_eq!(
        user["message"]["content"],
        json!([{"type":"text","text":"Look"},
               {"type":"image","data":"R0lGOD","mimeType":"image/gif"},
               {"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},
               {"type":"text","text":"\n\n[Document: notes.pdf]\nQuarterly numbers"}])
    );
    let body = request_body(&s.llm, 0);
    assert_eq!(
        strip_cache_control(body["messages"].clone()),
        json!([{"role":"user","content":[
            {"type":"text","text":"Look"},
            {"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lGOD"}},
            {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
            {"type":"text","text":"\n\n[Document: notes.pdf]\nQuarterly numbers"}
        ]}])
    );
}

#[test]
fn input_that_cannot_be_mapped_is_refused_not_dropped() {
    let mut s = setup(vec![]);
    let cases = [
        (
            json!({"type":"prompt","message":"m","images":[
                {"type":"image","source":{"type":"url","url":"https://example.com/cat.png"}}]}),
            "prompt: images[0]: image URL \"https://example.com/cat.png\" is not supported: pith does not fetch images; send the image as base64 (a data: URL or source type \"base64\")",
        ),
        (
            json!({"type":"follow_up","message":"m","attachments":[
                {"id":"a","type":"document","fileName":"scan.pdf","mimeType":"application/pdf","size":1,"content":"JVBE"}]}),
            "follow_up: attachments[0]: document \"scan.pdf\" has no \"extractedText\": pith sends documents to the model as text only",
        ),
    ];
    for (i, (cmd, err)) in cases.into_iter().enumerate() {
        let ty = cmd["type"].clone();
        let id = format!("x{i}");
        assert_eq!(
            s.p.call(cmd, &id),
            json!({"id":id,"type":"response","command":ty,"success":false,"error":err})
        );
    }
    // Nothing was queued or started.
    let st = s.p.call(json!({"type":"get_state"}), "gs");
    assert_eq!(st["data"]["pendingMessageCount"], 0);
    assert_eq!(st["data"]["messageCount"], 0);
    assert!(s.llm.requests().is_empty());
}

#[test]
fn get_state_while_streaming_and_get_messages_after() {
    let mut s = setup(vec![slow_text(16, 10)]);
    let st = s.p.call(json!({"type":"get_state"}), "gs0");
    assert_eq!(st["data"]["isStreaming"], false);
    assert_eq!(st["data"]["messageCount"], 0);
    prompt(&mut s.p, "p1", "Stream");
    s.p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta");
    let st = s.p.call(json!({"type":"get_state"}), "gs1");
    assert_eq!(st["data"]["isStreaming"], true);
    assert_eq!(st["data"]["messageCount"], 1);
    let f = settled(&mut s.p);
    let agent_end = find(&f, |v| v["type"] == "agent_end").clone();
    let st = s.p.call(json!({"type":"get_state"}), "gs2");
    assert_eq!(st["data"]["isStreaming"], false);
    assert_eq!(st["data"]["messageCount"], 2);
    let m = s.p.call(json!({"type":"get_messages"}), "gm");
    assert_eq!(m["success"], true);
    assert_eq!(m["data"]["messages"], agent_end["messages"]);
    let text: String = (0..16).map(|i| format!("w{i} ")).collect();
    assert_eq!(
        m["data"]["messages"][1]["content"],
        json!([{"type":"text","text":text}])
    );
}

// ------------------------------------------------------------------------------------------------
// More queue and abort cases

/// Two steers while the first answer streams; the steering mode decides how they are delivered.
fn two_steers(mode: &str, replies: Vec<Reply>) -> (Setup, Vec<String>) {
    let mut s = setup(replies);
    let r =
        s.p.call(json!({"type":"set_steering_mode","mode":mode}), "sm");
    assert_eq!(r["success"], true, "{r}");
    prompt(&mut s.p, "p1", "Go");
    s.p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta");
    s.p.send(json!({"type":"steer","id":"s1","message":"A"}));
    s.p.send(json!({"type":"steer","id":"s2","message":"B"}));
    let f = settled(&mut s.p);
    let k: Vec<String> = kinds_collapsed(&f)
        .into_iter()
        .filter(|k| !k.starts_with("update"))
        .collect();
    (s, k)
}

#[test]
fn steering_mode_all_delivers_both_in_one_turn() {
    let (s, k) = two_steers("all", vec![slow_text(16, 10), reply(&[text(&["Both."])])]);
    assert_eq!(
        k,
        [
            "queue_update [\"A\"] []",
            "response steer ok",
            "queue_update [\"A\",\"B\"] []",
            "response steer ok",
            "message_end assistant",
            "turn_end",
            "turn_start",
            "queue_update [\"B\"] []",
            "message_start user",
            "message_end user",
            "queue_update [] []",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    assert_eq!(s.llm.requests().len(), 2);
}

#[test]
fn steering_one_at_a_time_delivers_one_per_turn() {
    let (s, k) = two_steers(
        "one-at-a-time",
        vec![
            slow_text(16, 10),
            reply(&[text(&["For A."])]),
            reply(&[text(&["For B."])]),
        ],
    );
    assert_eq!(
        k,
        [
            "queue_update [\"A\"] []",
            "response steer ok",
            "queue_update [\"A\",\"B\"] []",
            "response steer ok",
            "message_end assistant",
            "turn_end",
            "turn_start",
            "queue_update [\"B\"] []",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "message_end assistant",
            "turn_end",
            "turn_start",
            "queue_update [] []",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    let body = request_body(&s.llm, 2);
    let msgs = strip_cache_control(body["messages"].clone());
    let roles: Vec<&str> = msgs
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
}

#[test]
fn abort_while_idle_answers_at_once() {
    let mut s = setup(vec![]);
    let r = s.p.call(json!({"type":"abort"}), "a0");
    assert_eq!(
        r,
        json!({"id":"a0","type":"response","command":"abort","success":true})
    );
    assert_eq!(kinds(&s.p.seen), ["response abort ok"]);
    s.p.assert_quiet(Duration::from_millis(100));
}

#[test]
fn bash_exit_code_is_a_tool_error() {
    let mut s = setup(vec![
        reply(&[bash("t1", "echo oops; exit 3")]),
        reply(&[text(&["It failed."])]),
    ]);
    prompt(&mut s.p, "p1", "fail");
    let f = settled(&mut s.p);
    assert_eq!(
        end_text(&f, "t1"),
        ("oops\n\n\nCommand exited with code 3".into(), true)
    );
    assert_eq!(tool_end(&f, "t1")["result"]["details"], json!({}));
    let body = request_body(&s.llm, 1);
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .expect("messages");
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["is_error"], true);
    assert_eq!(
        last["content"][0]["content"],
        "oops\n\n\nCommand exited with code 3"
    );
}

#[test]
fn abort_and_prompt_drops_the_queues_with_a_queue_update() {
    let mut s = setup(vec![slow_text(200, 15), reply(&[text(&["New run."])])]);
    prompt(&mut s.p, "p1", "Long");
    s.p.recv_until(|v| v["assistantMessageEvent"]["type"] == "text_delta");
    s.p.send(json!({"type":"steer","id":"s1","message":"Steer me"}));
    s.p.send(json!({"type":"follow_up","id":"f1","message":"Then this"}));
    s.p.recv_until(|v| v["id"] == "f1");
    s.p.send(json!({"type":"abort_and_prompt","id":"ap","message":"Instead this"}));
    let f = s.p.recv_until(|v| v["type"] == "agent_settled");
    let k: Vec<String> = kinds_collapsed(&f)
        .into_iter()
        .filter(|k| !k.starts_with("update "))
        .collect();
    assert_eq!(
        k,
        [
            "queue_update [] []",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "response abort_and_prompt ok",
            "agent_start",
            "turn_start",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    // The dropped messages are never delivered.
    let users: Vec<&str> = f
        .iter()
        .filter(|v| v["type"] == "message_end" && v["message"]["role"] == "user")
        .map(|v| user_text(&v["message"]))
        .collect();
    assert_eq!(users, ["Instead this"]);
    let st = s.p.call(json!({"type":"get_state"}), "gs");
    assert_eq!(st["data"]["pendingMessageCount"], 0);
}

#[test]
fn abort_and_prompt_while_idle_drops_idle_steering_too() {
    let mut s = setup(vec![reply(&[text(&["Only this."])])]);
    s.p.send(json!({"type":"steer","id":"s1","message":"Queued while idle"}));
    s.p.recv_until(|v| v["id"] == "s1");
    s.p.send(json!({"type":"abort_and_prompt","id":"ap","message":"Fresh start"}));
    let f = settled(&mut s.p);
    assert_eq!(
        kinds_collapsed(&f)[..4],
        [
            "queue_update [] []",
            "response abort_and_prompt ok",
            "agent_start",
            "turn_start"
        ]
    );
    let users: Vec<&str> = f
        .iter()
        .filter(|v| v["type"] == "message_end" && v["message"]["role"] == "user")
        .map(|v| user_text(&v["message"]))
        .collect();
    assert_eq!(users, ["Fresh start"]);
}

#[test]
fn abort_and_prompt_while_a_tool_runs() {
    let marker = unique_marker("ap_tool");
    let mut s = setup(vec![
        reply(&[bash("t1", &format!("sleep 20; : {marker}"))]),
        reply(&[text(&["Fresh."])]),
    ]);
    prompt(&mut s.p, "p1", "slow tool");
    s.p.recv_until(|v| v["type"] == "tool_execution_start");
    let t0 = Instant::now();
    s.p.send(json!({"type":"abort_and_prompt","id":"ap","message":"Instead"}));
    let f = no_updates(&settled(&mut s.p));
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert_eq!(
        kinds_collapsed(&f),
        [
            "queue_update [] []",
            "tool_execution_end t1",
            "message_start toolResult",
            "message_end toolResult",
            "turn_end",
            "turn_start",
            "message_start assistant",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "response abort_and_prompt ok",
            "agent_start",
            "turn_start",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "update text_start",
            "update text_delta",
            "update text_end",
            "message_end assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    assert_eq!(end_text(&f, "t1"), ("Command aborted".into(), true));
    let response = find(&f, |v| v["type"] == "response");
    assert_eq!(
        *response,
        json!({"id":"ap","type":"response","command":"abort_and_prompt","success":true})
    );
    assert_no_process(&marker);
    // The new run's request: the old prompt, the tool call and its result, then the new prompt
    // (the aborted empty assistant message is left out).
    let body = request_body(&s.llm, 1);
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "user"]);
}

#[test]
fn sigterm_during_a_bash_tool_kills_its_process_group_and_exits_143() {
    let marker = unique_marker("sigterm");
    let cmd = format!("sh -c 'sleep 30; : {marker}' & sh -c 'sleep 30; : {marker}'");
    let mut s = setup(vec![reply(&[bash("t_term", &cmd)])]);
    prompt(&mut s.p, "p1", "background");
    s.p.recv_until(|v| v["type"] == "tool_execution_start");
    let until = Instant::now() + Duration::from_secs(3);
    while pgrep(&marker).len() < 2 {
        assert!(Instant::now() < until, "children did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &s.p.pid().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
    assert_eq!(s.p.wait(Duration::from_secs(5)).code(), Some(143));
    assert_no_process(&marker);
}
