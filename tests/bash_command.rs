//! The RPC `bash` / `abort_bash` commands (spec 13, oracle j_bash_command) driven through the real
//! `pith` binary over pipes: the exact result object, output sanitising and truncation, killing
//! the process group, concurrency with other commands, the `bashExecution` messages and how the
//! model sees them on the next prompt (deferred while a run streams), and stdin EOF.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::anthropic::{Sse, text, tool_call};
use support::fake_llm::{FakeLlm, Reply};
use support::frames::{assistant, keys, messages, request_json, strip_cache_control, user};
use support::procs::{assert_no_process_within, pgrep};
use support::{Pith, World, fake_rpc, fake_world};

// ------------------------------------------------------------------------------------------------
// Helpers

/// An Anthropic SSE stream: text deltas (maybe none), then an optional `bash` tool call.
fn sse(n: usize, parts: &[&str], bash_call: Option<&str>) -> String {
    let mut blocks = vec![text(parts)];
    if let Some(cmd) = bash_call {
        let args = json!({ "command": cmd }).to_string();
        blocks.push(tool_call("toolu_1", "bash", &[&args]));
    }
    Sse::numbered(n).body(&blocks)
}

fn text_reply(n: usize, parts: &[&str]) -> Reply {
    Reply::sse(sse(n, parts, None))
}

fn setup(replies: Vec<Reply>) -> (World, FakeLlm, Pith) {
    let (w, srv) = fake_world(replies);
    let p = w.spawn(&fake_rpc(&["--no-session", "--rpc-partials", "none"]));
    (w, srv, p)
}

fn bash(p: &mut Pith, id: &str, command: &str) -> Value {
    p.call(json!({"type":"bash","command":command}), id)
}

/// The request's `messages` without `cache_control` markers.
fn request_messages(srv: &FakeLlm, i: usize) -> Value {
    strip_cache_control(request_json(srv, i)["messages"].clone())
}

/// `data` of a bash result with the output and no truncation: the counts follow from the text.
fn plain_result(output: &str, exit_code: i64) -> Value {
    let lines = output.split('\n').count();
    json!({"output":output,"exitCode":exit_code,"cancelled":false,"truncated":false,
        "totalLines":lines,"totalBytes":output.len(),"outputLines":lines,"outputBytes":output.len()})
}

fn wait_for_processes(marker: &str, n: usize) {
    let until = Instant::now() + Duration::from_secs(3);
    while pgrep(marker).len() < n {
        assert!(
            Instant::now() < until,
            "{n} processes with {marker} never ran"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits up to 1 s for no process whose command line contains `marker`.
fn assert_no_process(marker: &str) {
    assert_no_process_within(marker, Duration::from_secs(1));
}

fn unique_marker(tag: &str) -> String {
    support::procs::unique_marker(&format!("bashcmd_{tag}"))
}

// ------------------------------------------------------------------------------------------------
// Results

#[test]
fn stdout_and_stderr_are_merged_and_exit_codes_reported() {
    let (_w, _srv, mut p) = setup(vec![]);
    let r = bash(&mut p, "b1", "echo out; echo err >&2");
    assert_eq!(
        r,
        json!({"id":"b1","type":"response","command":"bash","success":true,
            "data":{"output":"out\nerr\n","exitCode":0,"cancelled":false,"truncated":false,
                "totalLines":3,"totalBytes":8,"outputLines":3,"outputBytes":8}})
    );
    let r = bash(&mut p, "b2", "exit 3");
    assert_eq!(r["success"], true);
    assert_eq!(r["data"], plain_result("", 3));
    // No events were emitted for either command.
    assert_eq!(p.seen.len(), 2, "{:#?}", p.seen);
    p.assert_quiet(Duration::from_millis(100));
}

#[test]
fn ansi_sequences_and_carriage_returns_are_stripped() {
    let (_w, _srv, mut p) = setup(vec![]);
    let r = bash(&mut p, "b1", r"printf '\033[31mred\033[0m\r\n'");
    assert_eq!(r["data"], plain_result("red\n", 0));
    let r = bash(
        &mut p,
        "b2",
        r"printf 'a\tb\007c\r\n\033[1;32mgreen\033[0m'",
    );
    assert_eq!(r["data"], plain_result("a\tbc\ngreen", 0));
}

#[test]
fn long_output_keeps_the_last_2000_lines_and_writes_the_full_output_file() {
    let (w, _srv, mut p) = setup(vec![]);
    let r = bash(&mut p, "b1", "seq 1 30000");
    let d = &r["data"];
    assert_eq!(d["truncated"], true, "{d}");
    assert_eq!(d["exitCode"], 0);
    assert_eq!(d["cancelled"], false);
    let want: String = (28002..=30000).map(|i| format!("{i}\n")).collect();
    let out = d["output"].as_str().expect("output");
    assert!(out.starts_with("28002\n"), "{:?}", &out[..20]);
    assert!(out.ends_with("\n29999\n30000\n"));
    assert!(out == want, "output is not lines 28002..=30000");
    assert_eq!(d["outputLines"], 2000);
    assert_eq!(d["outputBytes"], want.len());
    let full: String = (1..=30000).map(|i| format!("{i}\n")).collect();
    // The totals count the whole output, not the tail kept in memory.
    assert_eq!(d["totalLines"], 30001, "{d}");
    assert_eq!(d["totalBytes"], full.len(), "{d}");
    let path = d["fullOutputPath"].as_str().expect("fullOutputPath");
    let name = std::path::Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .expect("file name");
    assert!(
        path.starts_with(w.tmp().to_str().expect("utf-8 tmp")),
        "{path} is not in TMPDIR"
    );
    assert!(
        name.starts_with("pi-bash-") && name.ends_with(".log"),
        "{name}"
    );
    assert_eq!(name.len(), "pi-bash-".len() + 16 + ".log".len(), "{name}");
    assert_eq!(std::fs::read_to_string(path).expect("full output"), full);
}

#[test]
fn totals_of_20_mb_of_output_count_what_ran() {
    // 17-byte lines: 1,176,470 whole ones and a 10-byte piece. (100 MB gives 100,000,000 and
    // 5,882,353 the same way; 20 MB keeps the suite fast on a loaded machine.)
    let (_w, _srv, mut p) = setup(vec![]);
    p.send(json!({"id":"b1","type":"bash","command":"yes 0123456789abcdef | head -c 20000000"}));
    // A hang guard only: the default frame timeout is too short for 20 MB on a busy machine.
    let line = p.next_line(Duration::from_secs(120)).expect("response");
    let r: Value = serde_json::from_str(&line).expect("json");
    let d = &r["data"];
    assert_eq!(d["totalBytes"], 20_000_000u64, "{d}");
    assert_eq!(d["totalLines"], 1_176_471u64, "{d}");
    assert_eq!(d["outputLines"], 2000);
    assert_eq!(d["truncated"], true);
    let path = d["fullOutputPath"].as_str().expect("fullOutputPath");
    assert_eq!(
        std::fs::metadata(path).expect("full output").len(),
        20_000_000
    );
}

#[test]
fn output_cut_by_lines_under_50kb_still_gets_a_full_output_file() {
    // pi 0.73.1's bash executor creates the temp file whenever the output was truncated, also
    // by line count alone (0.58, which spec 13 describes, did not).
    let (_w, _srv, mut p) = setup(vec![]);
    let r = bash(&mut p, "b1", "seq 1 3000");
    let mut data = r["data"].clone();
    let out = data["output"].take();
    let path = data["fullOutputPath"].take();
    let want: String = (1002..=3000).map(|i| format!("{i}\n")).collect();
    let total: String = (1..=3000).map(|i| format!("{i}\n")).collect();
    assert!(out == want.as_str(), "output is not lines 1002..=3000");
    assert_eq!(
        data,
        json!({"output":null,"exitCode":0,"cancelled":false,"truncated":true,"fullOutputPath":null,
            "totalLines":3001,"totalBytes":total.len(),"outputLines":2000,"outputBytes":want.len()})
    );
    let full =
        std::fs::read_to_string(path.as_str().expect("fullOutputPath")).expect("full output file");
    assert_eq!(full, total);
}

#[test]
fn commands_run_in_the_process_cwd_without_stdin() {
    let (w, _srv, mut p) = setup(vec![]);
    let r = bash(&mut p, "b1", "pwd; cat; echo rc=$?");
    let cwd = w.cwd().canonicalize().expect("cwd");
    assert_eq!(
        r["data"],
        plain_result(&format!("{}\nrc=0\n", cwd.display()), 0)
    );
}

// ------------------------------------------------------------------------------------------------
// abort_bash and concurrency

/// `abort_bash` while `command` runs: both responses within 1 s, the result `cancelled` without
/// `exitCode`, and no process left with the marker.
fn abort_running(command: &str, marker: &str, processes: usize) {
    let (_w, _srv, mut p) = setup(vec![]);
    p.send(json!({"id":"b1","type":"bash","command":command}));
    wait_for_processes(marker, processes);
    let t0 = Instant::now();
    p.send(json!({"id":"a1","type":"abort_bash"}));
    let a = p.response("a1");
    assert_eq!(
        a,
        json!({"id":"a1","type":"response","command":"abort_bash","success":true})
    );
    let r = p.response("b1");
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert_eq!(
        r,
        json!({"id":"b1","type":"response","command":"bash","success":true,
            "data":{"output":"","cancelled":true,"truncated":false,
                "totalLines":1,"totalBytes":0,"outputLines":1,"outputBytes":0}})
    );
    assert_no_process(marker);
    // The cancelled command is recorded too.
    let m = messages(&mut p);
    assert_eq!(m.len(), 1, "{m:#?}");
    assert_eq!(m[0]["role"], "bashExecution");
    assert_eq!(m[0]["cancelled"], true);
    assert!(m[0].get("exitCode").is_none(), "{}", m[0]);
}

#[test]
fn abort_bash_kills_a_sleeping_command_at_once() {
    let marker = unique_marker("sleep");
    abort_running(&format!("sleep 30; echo {marker}"), &marker, 1);
}

#[test]
fn abort_bash_kills_background_children_too() {
    let marker = unique_marker("bg");
    let cmd = format!("sh -c 'sleep 30; : {marker}' & sh -c 'sleep 30; : {marker}'");
    abort_running(&cmd, &marker, 2);
}

#[test]
fn commands_are_answered_while_a_bash_runs_and_a_second_bash_runs_alongside() {
    let (_w, _srv, mut p) = setup(vec![]);
    let marker = unique_marker("busy");
    let first = format!("sleep 0.6; echo {marker}");
    p.send(json!({"id":"b1","type":"bash","command":first}));
    wait_for_processes(&marker, 1);
    let st = p.call(json!({"type":"get_state"}), "gs");
    assert_eq!(st["success"], true);
    assert_eq!(st["data"]["isStreaming"], false);
    // A second command runs at once, beside the first (as in the reference), and is answered
    // when it ends, before the first.
    let second = bash(&mut p, "b2", "echo second");
    assert_eq!(
        second,
        json!({"id":"b2","type":"response","command":"bash","success":true,
            "data":plain_result("second\n", 0)})
    );
    assert_eq!(
        pgrep(&marker).len(),
        1,
        "the first command is still running"
    );
    let r = p.response("b1");
    assert_eq!(r["data"], plain_result(&format!("{marker}\n"), 0));
    // Each is recorded on its own, in the order they finished.
    let m = messages(&mut p);
    let commands: Vec<&Value> = m.iter().map(|m| &m["command"]).collect();
    assert_eq!(commands, [&json!("echo second"), &json!(first)], "{m:#?}");
    assert!(m.iter().all(|m| m["role"] == "bashExecution"));
}

#[test]
fn abort_bash_stops_every_running_command() {
    let (_w, _srv, mut p) = setup(vec![]);
    let marker = unique_marker("many");
    for id in ["b1", "b2", "b3"] {
        p.send(json!({"id":id,"type":"bash","command":format!("sleep 30; echo {marker}")}));
    }
    wait_for_processes(&marker, 3);
    p.send(json!({"id":"a1","type":"abort_bash"}));
    assert_eq!(
        p.response("a1"),
        json!({"id":"a1","type":"response","command":"abort_bash","success":true})
    );
    // The three responses, in whatever order the commands died.
    let mut ids = Vec::new();
    while ids.len() < 3 {
        let r = p.recv();
        if r["type"] != "response" {
            continue;
        }
        let id = r["id"].as_str().expect("id").to_string();
        assert_eq!(
            r,
            json!({"id":id,"type":"response","command":"bash","success":true,
                "data":{"output":"","cancelled":true,"truncated":false,
                    "totalLines":1,"totalBytes":0,"outputLines":1,"outputBytes":0}})
        );
        ids.push(id);
    }
    ids.sort();
    assert_eq!(ids, ["b1", "b2", "b3"]);
    assert_no_process(&marker);
    let m = messages(&mut p);
    assert_eq!(m.len(), 3, "{m:#?}");
    assert!(m.iter().all(|m| m["cancelled"] == true), "{m:#?}");
    // Nothing is left running: a new command runs normally.
    let r = bash(&mut p, "b4", "echo again");
    assert_eq!(r["data"], plain_result("again\n", 0));
}

// ------------------------------------------------------------------------------------------------
// bashExecution messages and the LLM context

#[test]
fn bash_executions_are_recorded_and_sent_before_the_next_prompt() {
    let (_w, srv, mut p) = setup(vec![text_reply(1, &["It printed", " out."])]);
    bash(&mut p, "b1", "echo out; echo err >&2");
    bash(&mut p, "b2", "exit 3");
    let m = messages(&mut p);
    assert_eq!(m.len(), 2, "{m:#?}");
    assert_eq!(
        keys(&m[0]),
        [
            "role",
            "command",
            "output",
            "exitCode",
            "cancelled",
            "truncated",
            "timestamp"
        ]
    );
    assert_eq!(m[0]["role"], "bashExecution");
    assert_eq!(m[0]["command"], "echo out; echo err >&2");
    assert_eq!(m[0]["output"], "out\nerr\n");
    assert_eq!(m[0]["exitCode"], 0);
    assert_eq!(m[0]["cancelled"], false);
    assert_eq!(m[0]["truncated"], false);
    assert!(m[0]["timestamp"].as_u64().is_some());
    assert_eq!(m[1]["command"], "exit 3");
    assert_eq!(m[1]["output"], "");
    assert_eq!(m[1]["exitCode"], 3);

    p.send(json!({"id":"p1","type":"prompt","message":"What did the command print?"}));
    let frames = p.recv_until(|v| v["type"] == "agent_settled");
    // The bash messages produce no message events: only the prompt's user message.
    let starts: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "message_start")
        .collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0]["message"]["role"], "user");
    assert_eq!(
        request_messages(&srv, 0),
        json!([
            user("Ran `echo out; echo err >&2`\n```\nout\nerr\n\n```"),
            user("Ran `exit 3`\n(no output)\n\nCommand exited with code 3"),
            user("What did the command print?"),
        ])
    );
    let m = messages(&mut p);
    let roles: Vec<&str> = m
        .iter()
        .map(|x| x["role"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        roles,
        ["bashExecution", "bashExecution", "user", "assistant"]
    );
}

#[test]
fn a_bash_finishing_during_a_run_is_deferred_to_the_next_prompt() {
    // The first reply streams slowly and calls a tool, so the run makes a second request after
    // the RPC bash has finished.
    let first = Reply::sse(sse(1, &["a", "b", "c", "d", "e", "f"], Some("echo tool")))
        .chunked(200, Duration::from_millis(60));
    let (_w, srv, mut p) = setup(vec![
        first,
        text_reply(2, &["Done."]),
        text_reply(3, &["Seen."]),
    ]);
    p.send(json!({"id":"p1","type":"prompt","message":"Go"}));
    p.recv_until(|v| v["type"] == "agent_start");
    p.send(json!({"id":"b1","type":"bash","command":"echo during"}));
    let frames = p.recv_until(|v| v["type"] == "response" && v["id"] == "b1");
    assert!(
        !frames
            .iter()
            .any(|f| f["type"] == "message_end" && f["message"]["role"] == "assistant"),
        "the bash did not finish while the first reply streamed: {frames:#?}"
    );
    assert_eq!(frames.last().unwrap()["data"], plain_result("during\n", 0));
    let frames = p.recv_until(|v| v["type"] == "agent_settled");
    let agent_end = frames
        .iter()
        .find(|f| f["type"] == "agent_end")
        .expect("agent_end");
    let roles: Vec<&str> = agent_end["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"]);
    // The running turn's later request did not see it.
    let second = request_messages(&srv, 1);
    assert_eq!(second.as_array().expect("messages").len(), 3, "{second:#}");
    assert!(!second.to_string().contains("during"), "{second:#}");
    // Not in the context until the next prompt (spec 13: deferred to the next prompt).
    let m = messages(&mut p);
    assert!(
        !m.iter().any(|x| x["role"] == "bashExecution"),
        "recorded before the next prompt: {m:#?}"
    );

    p.send(json!({"id":"p2","type":"prompt","message":"Next"}));
    p.recv_until(|v| v["type"] == "agent_settled");
    let third = request_messages(&srv, 2);
    let third = third.as_array().expect("messages");
    assert_eq!(third.len(), 6, "{third:#?}");
    assert_eq!(third[3], assistant("Done."));
    assert_eq!(third[4], user("Ran `echo during`\n```\nduring\n\n```"));
    assert_eq!(third[5], user("Next"));
    let m = messages(&mut p);
    let roles: Vec<&str> = m
        .iter()
        .map(|x| x["role"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "bashExecution",
            "user",
            "assistant"
        ]
    );
}

#[test]
fn a_deferred_bash_stays_with_the_session_it_ran_in() {
    // The bash finishes while a run streams (deferred), then the host starts a new session before
    // any prompt: the result is recorded in the old session, never carried into the new one.
    let first = Reply::sse(sse(1, &["a", "b", "c", "d", "e", "f"], None))
        .chunked(120, Duration::from_millis(60));
    let (_w, srv, mut p) = setup(vec![first, text_reply(2, &["Fresh."])]);
    p.send(json!({"id":"p1","type":"prompt","message":"Go"}));
    p.recv_until(|v| v["type"] == "agent_start");
    let r = bash(&mut p, "b1", "echo during");
    assert_eq!(r["data"], plain_result("during\n", 0));
    p.recv_until(|v| v["type"] == "agent_settled");
    let r = p.call(json!({"type":"new_session"}), "ns");
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(messages(&mut p), Vec::<Value>::new());
    p.send(json!({"id":"p2","type":"prompt","message":"Next"}));
    p.recv_until(|v| v["type"] == "agent_settled");
    assert_eq!(request_messages(&srv, 1), json!([user("Next")]));
}

// ------------------------------------------------------------------------------------------------
// End of input

#[test]
fn stdin_eof_waits_for_the_running_bash_then_exits_0() {
    let (_w, _srv, mut p) = setup(vec![]);
    p.send(json!({"id":"b1","type":"bash","command":"sleep 0.4; echo finished"}));
    let t0 = Instant::now();
    let (status, rest) = p.finish(Duration::from_secs(5));
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(status.code(), Some(0));
    assert_eq!(rest.len(), 1, "{rest:#?}");
    let r: Value = serde_json::from_str(&rest[0]).expect("JSON");
    assert_eq!(
        r,
        json!({"id":"b1","type":"response","command":"bash","success":true,
            "data":plain_result("finished\n", 0)})
    );
}
