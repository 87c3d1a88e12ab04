//! `!command` credentials (models.json `apiKey` and header values, auth.json `api_key` keys) run
//! on the request's own worker, never on the state machine: while one runs, every command is
//! answered and `abort` stops the request (and the command) at once. They run as often as pi
//! runs them: models.json values once per request, auth.json keys once per process.

mod support;

use std::fs;

use serde_json::{Value, json};
use support::anthropic::text_sse;
use support::fake_llm::{FakeLlm, Reply};
use support::procs::{assert_no_process_within, unique_marker};
use support::{Pith, World};

/// A world whose provider `cmd` (Anthropic API, at `llm`) has `api_key` as its models.json
/// `apiKey`.
fn world_with_key(llm: &FakeLlm, api_key: &str) -> World {
    let w = World::new();
    w.write_agent_file(
        "models.json",
        &json!({"providers":{"cmd":{"baseUrl":llm.base_url(),"api":"anthropic-messages",
            "apiKey":api_key,
            "models":[{"id":"m1","contextWindow":100000,"maxTokens":1000}]}}})
        .to_string(),
    );
    w
}

fn spawn(w: &World) -> Pith {
    w.spawn(&[
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "cmd",
        "--model",
        "m1",
    ])
}

fn last_assistant(frames: &[Value]) -> Value {
    let end = frames
        .iter()
        .rev()
        .find(|v| v["type"] == "agent_end")
        .unwrap_or_else(|| panic!("no agent_end in {frames:?}"));
    end["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .cloned()
        .expect("assistant message")
}

fn count_lines(path: &std::path::Path) -> usize {
    fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// A key command that waits for a file: meanwhile `get_state` and `abort` are answered, the run
/// ends as aborted, and the command is stopped (it never gets to count itself). The next prompt
/// runs it once and sends its key.
#[test]
fn a_key_command_that_waits_blocks_nothing_and_abort_stops_it() {
    let llm = FakeLlm::start(vec![Reply::sse(text_sse(1, &["ok"]))]);
    let marker = unique_marker("keycmd");
    let w0 = World::new();
    let go = w0.tmp().join("go");
    let count = w0.tmp().join("count");
    let cmd = format!(
        "!: {marker}; while [ ! -e '{}' ]; do sleep 0.02; done; echo run >> '{}'; printf sk-from-command",
        go.display(),
        count.display()
    );
    let w = world_with_key(&llm, &cmd);
    let mut p = spawn(&w);
    let r = p.call(json!({"type":"prompt","message":"hi"}), "p1");
    assert_eq!(
        r,
        json!({"id":"p1","type":"response","command":"prompt","success":true})
    );
    let st = p.call(json!({"type":"get_state"}), "s");
    assert_eq!(st["data"]["isStreaming"], true, "{st}");
    let a = p.call(json!({"type":"abort"}), "a");
    assert_eq!(
        a,
        json!({"id":"a","type":"response","command":"abort","success":true})
    );
    p.recv_until(|v| v["type"] == "agent_settled");
    let m = last_assistant(&p.seen);
    assert_eq!(m["stopReason"], "aborted", "{m}");
    assert_eq!(m["errorMessage"], "Request was aborted.", "{m}");
    assert_no_process_within(&marker, support::TIMEOUT);
    fs::write(&go, "").unwrap();
    assert_eq!(count_lines(&count), 0, "the aborted command ran to its end");
    assert!(llm.requests().is_empty());

    let r = p.call(json!({"type":"prompt","message":"again"}), "p2");
    assert_eq!(r["success"], true, "{r}");
    let frames = p.recv_until(|v| v["type"] == "agent_settled");
    assert_eq!(last_assistant(&frames)["stopReason"], "stop");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].header("x-api-key"), Some("sk-from-command"));
    assert_eq!(count_lines(&count), 1, "one run per request");
}

/// models.json `apiKey` commands are not cached (pi resolves them for every request): two
/// prompts, two runs. auth.json `api_key` commands are (pi caches them for the process): two
/// prompts, one run.
#[test]
fn key_commands_run_as_often_as_pi_runs_them() {
    let llm = FakeLlm::start(vec![
        Reply::sse(text_sse(1, &["one"])),
        Reply::sse(text_sse(2, &["two"])),
        Reply::sse(text_sse(3, &["three"])),
        Reply::sse(text_sse(4, &["four"])),
    ]);
    let w0 = World::new();
    let models_count = w0.tmp().join("models-count");
    let auth_count = w0.tmp().join("auth-count");
    let w = world_with_key(
        &llm,
        &format!(
            "!echo run >> '{}'; printf sk-models",
            models_count.display()
        ),
    );
    let mut p = spawn(&w);
    for (i, id) in ["p1", "p2"].iter().enumerate() {
        let r = p.call(json!({"type":"prompt","message":"hi"}), id);
        assert_eq!(r["success"], true, "{r}");
        p.recv_until(|v| v["type"] == "agent_settled");
        assert_eq!(count_lines(&models_count), i + 1);
    }
    drop(p);

    w.write_agent_file(
        "auth.json",
        &json!({"cmd":{"type":"api_key","key":format!("!echo run >> '{}'; printf sk-auth", auth_count.display())}})
            .to_string(),
    );
    let mut p = spawn(&w);
    for id in ["p3", "p4"] {
        let r = p.call(json!({"type":"prompt","message":"hi"}), id);
        assert_eq!(r["success"], true, "{r}");
        p.recv_until(|v| v["type"] == "agent_settled");
    }
    assert_eq!(count_lines(&auth_count), 1);
    assert_eq!(count_lines(&models_count), 2, "auth.json comes first");
    let keys: Vec<Option<String>> = llm
        .requests()
        .iter()
        .map(|r| r.header("x-api-key").map(str::to_string))
        .collect();
    assert_eq!(
        keys,
        [
            Some("sk-models".to_string()),
            Some("sk-models".to_string()),
            Some("sk-auth".to_string()),
            Some("sk-auth".to_string())
        ]
    );
}

/// A command that fails ends the run with pi's error; nothing reaches the provider.
#[test]
fn a_failing_key_command_is_the_runs_error() {
    let llm = FakeLlm::start(vec![]);
    let w = world_with_key(&llm, "!echo oops >&2; exit 3");
    let mut p = spawn(&w);
    let r = p.call(json!({"type":"prompt","message":"hi"}), "p");
    assert_eq!(r["success"], true, "{r}");
    let frames = p.recv_until(|v| v["type"] == "agent_settled");
    let m = last_assistant(&frames);
    assert_eq!(m["stopReason"], "error");
    assert_eq!(
        m["errorMessage"],
        "Failed to resolve API key for provider \"cmd\" from shell command: echo oops >&2; exit 3"
    );
    assert!(llm.requests().is_empty());
}
