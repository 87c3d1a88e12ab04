//! The one-shot modes (`pith -p "…"` and `pith --mode json "…"`) run as real processes: the
//! printed answer, the JSON event stream, exit codes, and errors on stderr with nothing on stdout.
//! Most tests use the offline `faux` provider; provider errors come from a fake Anthropic server.

mod support;

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::FAKE_NO_SESSION as FAKE;
use support::fake_llm::Reply;
use support::frames::role_kinds as kinds;
use support::output::{stderr_utf8 as stderr, stdout_utf8 as stdout, with};
use support::{World, fake_world};

const FAUX: [&str; 5] = ["--provider", "faux", "--model", "faux", "--no-session"];
const BAD_REQUEST: &str =
    r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad request here"}}"#;

/// The JSON lines of stdout (which must be UTF-8).
fn json_lines(o: &Output) -> Vec<Value> {
    support::output::json_lines(&stdout(o))
}

/// Runs pith in `w` with stdin closed; panics if it takes more than 10 s.
fn pith(w: &World, args: &[&str]) -> Output {
    w.output_within_10s(args)
}

fn write_script(w: &World, lines: &[Value]) -> String {
    let path = w.dir.path().join("script.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).expect("write script");
    path.to_str().expect("utf-8 path").to_string()
}

// ------------------------------------------------------------------------------------------------
// Print mode

#[test]
fn print_mode_prints_the_answer_and_exits_0() {
    let w = World::new();
    let t0 = Instant::now();
    let o = pith(&w, &with(&["-p", "hi"], &FAUX));
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert_eq!(stdout(&o), "This is the faux provider. You said: hi\n");
    assert_eq!(stderr(&o), "");
}

#[test]
fn print_mode_is_the_default_with_a_prompt_argument() {
    let w = World::new();
    let o = pith(&w, &with(&["hello there"], &FAUX));
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "This is the faux provider. You said: hello there\n"
    );
}

#[test]
fn print_mode_prints_every_text_block_of_the_last_answer() {
    let w = World::new();
    let script = write_script(
        &w,
        &[json!({"thinking":"Hmm.","text":"Line one.\nLine two."})],
    );
    let o = pith(&w, &with(&["-p", "go", "--faux-script", &script], &FAUX));
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    // Thinking is not printed.
    assert_eq!(stdout(&o), "Line one.\nLine two.\n");
}

#[test]
fn a_tool_call_runs_before_the_final_answer() {
    let w = World::new();
    let script = write_script(
        &w,
        &[
            json!({"text":"Writing.","toolCalls":[{"name":"write","arguments":{"path":"out.txt","content":"hello\n"}}]}),
            json!({"toolCalls":[{"name":"bash","arguments":{"command":"cat out.txt"}}]}),
            json!({"text":"Wrote it."}),
        ],
    );
    let o = pith(
        &w,
        &with(&["-p", "write a file", "--faux-script", &script], &FAUX),
    );
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert_eq!(stdout(&o), "Wrote it.\n");
    assert_eq!(
        std::fs::read_to_string(w.cwd().join("out.txt")).expect("out.txt written"),
        "hello\n"
    );

    // The same run in json mode: the tools end before the final answer starts.
    std::fs::remove_file(w.cwd().join("out.txt")).expect("rm");
    let o = pith(
        &w,
        &with(
            &["--mode", "json", "write a file", "--faux-script", &script],
            &FAUX,
        ),
    );
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let frames = json_lines(&o);
    assert_eq!(
        kinds(&frames),
        [
            "session",
            "agent_start",
            "turn_start",
            "message_start:user",
            "message_end:user",
            "message_start:assistant",
            "message_end:assistant",
            "tool_execution_start",
            "tool_execution_end",
            "message_start:toolResult",
            "message_end:toolResult",
            "turn_end",
            "turn_start",
            "message_start:assistant",
            "message_end:assistant",
            "tool_execution_start",
            "tool_execution_end",
            "message_start:toolResult",
            "message_end:toolResult",
            "turn_end",
            "turn_start",
            "message_start:assistant",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
            "result"
        ]
    );
    let ends: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends[0]["toolName"], "write");
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert_eq!(ends[1]["toolName"], "bash");
    assert_eq!(
        ends[1]["result"]["content"],
        json!([{"type":"text","text":"hello\n"}])
    );
}

// ------------------------------------------------------------------------------------------------
// JSON mode

#[test]
fn json_mode_prints_every_event_and_ends_settled() {
    let w = World::new();
    let o = pith(&w, &with(&["--mode", "json", "hi"], &FAUX));
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(stdout(&o).ends_with('\n'));
    let frames = json_lines(&o);
    // The session header comes first, as pi writes it.
    let h = &frames[0];
    assert_eq!(
        h,
        &json!({"type":"session","version":3,"id":h["id"],"timestamp":h["timestamp"],
            "cwd":w.cwd().to_str().unwrap()})
    );
    assert_eq!(
        kinds(&frames),
        [
            "session",
            "agent_start",
            "turn_start",
            "message_start:user",
            "message_end:user",
            "message_start:assistant",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
            "result"
        ]
    );
    // The deltas spell out the answer; no RPC responses are written.
    let text: String = frames
        .iter()
        .filter(|f| f["assistantMessageEvent"]["type"] == "text_delta")
        .map(|f| f["assistantMessageEvent"]["delta"].as_str().expect("delta"))
        .collect();
    assert_eq!(text, "This is the faux provider. You said: hi");
    assert!(!frames.iter().any(|f| f["type"] == "response"));
    let end = &frames[frames.len() - 3];
    assert_eq!(
        end["messages"][0]["content"],
        json!([{"type":"text","text":"hi"}])
    );
    assert_eq!(
        end["messages"][1]["content"],
        json!([{"type":"text","text":"This is the faux provider. You said: hi"}])
    );
    assert_eq!(end["messages"][1]["stopReason"], "stop");
}

// ------------------------------------------------------------------------------------------------
// Failures

#[test]
fn a_provider_error_in_print_mode_exits_1_with_the_error_on_stderr() {
    let (w, srv) = fake_world(vec![Reply::error(400, BAD_REQUEST)]);
    let o = pith(&w, &with(&["-p", "hi"], &FAKE));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    let last = err.lines().last().unwrap_or_default();
    // As pi: the bare errorMessage.
    assert_eq!(last, format!("400 {BAD_REQUEST}"), "stderr: {err}");
    // A 400 is not retried.
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn a_provider_error_in_json_mode_exits_1_after_the_events() {
    let (w, srv) = fake_world(vec![Reply::error(400, BAD_REQUEST)]);
    let o = pith(&w, &with(&["--mode", "json", "hi"], &FAKE));
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    let frames = json_lines(&o);
    assert_eq!(
        kinds(&frames),
        [
            "session",
            "agent_start",
            "turn_start",
            "message_start:user",
            "message_end:user",
            "message_start:assistant",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
            "result"
        ]
    );
    let end = &frames[5]["message"];
    assert_eq!(end["stopReason"], "error");
    assert_eq!(end["errorMessage"], format!("400 {BAD_REQUEST}"));
    assert!(
        stderr(&o).contains(&format!("400 {BAD_REQUEST}")),
        "stderr: {}",
        stderr(&o)
    );
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn no_model_exits_2_with_a_message_on_stderr() {
    let w = World::new();
    for mode in [["-p", "hi"], ["--mode", "json"]] {
        let mut args = mode.to_vec();
        if mode[0] == "--mode" {
            args.push("hi");
        }
        args.push("--no-session");
        let o = pith(&w, &args);
        // pi exits 1; pith's exit code for a configuration that cannot run is 2 (issue 27).
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(stdout(&o), "", "{args:?}");
        let err = stderr(&o);
        // As pi: no model is a start-up error, before any output (its text points at /login,
        // which pith does not have).
        assert_eq!(
            err,
            format!("{}\n", pith::list_models::NO_MODELS),
            "{args:?}"
        );
    }
}

#[test]
fn a_scripted_error_turn_fails_the_run() {
    let w = World::new();
    let script = write_script(&w, &[json!({"error":"scripted failure"})]);
    let o = pith(&w, &with(&["-p", "hi", "--faux-script", &script], &FAUX));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "");
    assert!(
        stderr(&o).contains("scripted failure"),
        "stderr: {}",
        stderr(&o)
    );
}
